//! loom models of the AQL ring, run over `core/src/aql/ring.rs` and `core/src/aql/processor.rs`
//! themselves: [`AqlRing`] over a [`LoomRingMemory`], whose slot headers are loom atomics and
//! whose bodies are loom `UnsafeCell`s (`core/src/sync.rs`), so loom reports any body access
//! that the ring's orderings do not order.
//!
//! `RUSTFLAGS="--cfg loom" cargo test -p aqueduct --release --test loom_ring` (or
//! `scripts/verify loom`, which also runs the planted bugs).
//!
//! The consumer is the packet processor's own [`aql::step`], reading up to a whole ring ahead of
//! its read index: it trusts slot headers alone, as a CP that scans past the doorbell may, so the
//! doorbell's ordering hides no header bug. Every model spawns its producers and its consumer and
//! asserts that loom explored more than one execution.
//!
//! # Planted bugs
//!
//! Each `planted_*` test exists only in a build with its `--cfg loom_bug="..."`, which switches
//! on that bug inside ring.rs, and must FAIL there with the failure `scripts/verify loom`
//! expects (a causality violation or a failed check of the model).
#![cfg(loom)]

mod loom_common;

use aqueduct::aql::{self, AqlRing, KernelDispatchPacket, Outcome, Packet, PacketExecutor, RawPacket, Step};
use aqueduct::sync::LoomRingMemory;
use aqueduct::Error;
use loom::sync::Arc;
use loom::thread;
use loom_common::{explore, Doorbell};

/// A dispatch packet carrying `payload` in its body (kernel object and, inverted, kernarg).
fn dispatch(payload: u64) -> KernelDispatchPacket {
    KernelDispatchPacket {
        header: aql::DISPATCH_HEADER.0,
        setup: 1,
        workgroup_size_x: 1,
        workgroup_size_y: 1,
        workgroup_size_z: 1,
        grid_size_x: 1,
        grid_size_y: 1,
        grid_size_z: 1,
        kernel_object: payload,
        kernarg_address: !payload,
        ..Default::default()
    }
}

/// The executor of the consumer: records the payload of each dispatch it runs.
#[derive(Default)]
struct Recorder {
    payloads: Vec<u64>,
}

impl PacketExecutor for Recorder {
    fn read_signal(&mut self, _handle: u64, _mask: i64) -> Option<i64> {
        None
    }
    fn complete_signal(&mut self, _handle: u64, _start: u64, _end: u64) {
        unreachable!("the ring models' packets have no completion signal")
    }
    fn dispatch(&mut self, packet: &KernelDispatchPacket, kernarg: u64) -> Outcome {
        assert_eq!(kernarg, !packet.kernel_object, "a packet's body is torn");
        self.payloads.push(packet.kernel_object);
        Outcome::Done
    }
    fn timestamp(&mut self) -> u64 {
        0
    }
}

/// The packet processor: `aql::step` until `packets` slots are retired, or until every one of
/// the `producers` is done and the slot at the read index is still unpublished (a lost packet
/// then fails the model's checks). Returns the dispatched payloads in the order they ran.
///
/// Each step may read up to a whole ring ahead of the read index: the consumer trusts slot
/// headers alone, as a CP that reads past the doorbell may, so the doorbell's own
/// synchronisation hides no header bug.
fn consume(ring: &AqlRing, packets: usize, bell: &Doorbell, producers: usize) -> Vec<u64> {
    let mut exec = Recorder::default();
    let mut retired = 0;
    while retired < packets {
        let seen = bell.now();
        let limit = ring.read_index().wrapping_add(ring.size());
        match aql::step(ring, limit, &mut exec) {
            Step::Retired(_) => retired += 1,
            Step::Stalled if seen.producers_done == producers => break,
            Step::Stalled => bell.wait_change(seen),
            other => panic!("unexpected step {other:?}"),
        }
    }
    exec.payloads
}

/// A view of `mem`'s ring.
fn ring_of<const N: usize>(mem: &LoomRingMemory<N>) -> AqlRing {
    // SAFETY: every caller keeps `mem` (an Arc) alive for as long as it uses the ring.
    unsafe { AqlRing::new_loom(mem) }.expect("a power-of-two ring")
}

/// Two producers publish one dispatch each with the multi-producer reservation (`reserve`,
/// `write`, `finish`) into a ring of `N` slots whose indices start at `start`, against one
/// consumer. With `N == 1` the ring is full after the first reservation: the second producer
/// gets NotReady (and retries) or waits for room after its `fetch_add`.
fn two_producers<const N: usize>(name: &str, start: u64) {
    explore(name, move || {
        let mem = Arc::new(LoomRingMemory::<N>::new(start));
        let bell = Arc::new(Doorbell::default());
        let ring = ring_of(&mem);
        ring.invalidate_all();
        let producers: Vec<_> = [1u64, 2]
            .into_iter()
            .map(|payload| {
                let (mem, bell) = (mem.clone(), bell.clone());
                thread::spawn(move || {
                    let ring = ring_of(&mem);
                    let mut res = loop {
                        match ring.reserve(1, 1) {
                            Ok(res) => break res,
                            Err(Error::NotReady) => loom::hint::spin_loop(),
                            Err(e) => panic!("reserve: {e:?}"),
                        }
                    };
                    assert_eq!(res.write(&dispatch(payload)), Some(res.first()));
                    res.finish();
                    bell.ring();
                    bell.producer_done();
                })
            })
            .collect();
        let consumer = {
            let (mem, bell) = (mem.clone(), bell.clone());
            thread::spawn(move || consume(&ring_of(&mem), 2, &bell, 2))
        };
        for p in producers {
            p.join().unwrap();
        }
        let mut got = consumer.join().unwrap();
        got.sort_unstable();
        assert_eq!(got, [1, 2], "every published packet is consumed exactly once");
        assert_eq!(ring.write_index(), start.wrapping_add(2));
        assert_eq!(ring.read_index(), start.wrapping_add(2));
    });
}

/// One producer with the single-producer reservation pushes two dispatches and a reservation it
/// finishes without writing (a no-op barrier) through a ring of two slots whose indices start
/// just below the 64-bit wrap: the third reservation finds the ring full unless the consumer
/// has retired a slot, reports NotReady without reserving, and reuses a slot once it has room.
fn single_producer_wrap_and_full() {
    const START: u64 = u64::MAX - 1;
    explore("single_producer_wrap_and_full", || {
        let mem = Arc::new(LoomRingMemory::<2>::new(START));
        let bell = Arc::new(Doorbell::default());
        let ring = ring_of(&mem);
        ring.invalidate_all();
        let producer = {
            let (mem, bell) = (mem.clone(), bell.clone());
            thread::spawn(move || {
                let ring = ring_of(&mem);
                let mut hint = ring.read_index();
                for k in 0..3u64 {
                    let mut res = loop {
                        let before = ring.write_index();
                        // SAFETY: this thread is the ring's only producer.
                        match unsafe { ring.reserve_single_producer(1, 0, &mut hint) } {
                            Ok(res) => break res,
                            Err(Error::NotReady) => {
                                assert_eq!(ring.write_index(), before, "a refused reservation moved the index");
                                loom::hint::spin_loop();
                            }
                            Err(e) => panic!("reserve: {e:?}"),
                        }
                    };
                    assert_eq!(res.first(), START.wrapping_add(k));
                    if k < 2 {
                        res.write(&dispatch(k + 1));
                    }
                    assert_eq!(res.finish(), START.wrapping_add(k));
                    bell.ring();
                }
                bell.producer_done();
            })
        };
        let consumer = {
            let (mem, bell) = (mem.clone(), bell.clone());
            thread::spawn(move || consume(&ring_of(&mem), 3, &bell, 1))
        };
        producer.join().unwrap();
        let got = consumer.join().unwrap();
        assert_eq!(got, [1, 2], "FIFO across the wrap, the no-op barrier retired");
        assert_eq!(ring.read_index(), START.wrapping_add(3));
    });
}

/// One producer publishes a dispatch, then a batch of two with `write_batch` (first slot
/// published last), into a ring of two slots starting below the 64-bit wrap: the batch needs the
/// first packet's slot back, and runs across the end of the slot array and the index wrap.
fn batch_publishes_first_slot_last() {
    const START: u64 = u64::MAX - 1;
    explore("batch_publishes_first_slot_last", || {
        let mem = Arc::new(LoomRingMemory::<2>::new(START));
        let bell = Arc::new(Doorbell::default());
        let ring = ring_of(&mem);
        ring.invalidate_all();
        let producer = {
            let (mem, bell) = (mem.clone(), bell.clone());
            thread::spawn(move || {
                let ring = ring_of(&mem);
                let mut res = ring.reserve(1, 0).expect("an empty ring has room");
                res.write(&dispatch(1));
                res.finish();
                bell.ring();
                let mut res = loop {
                    match ring.reserve(2, 0) {
                        Ok(res) => break res,
                        Err(Error::NotReady) => loom::hint::spin_loop(),
                        Err(e) => panic!("reserve: {e:?}"),
                    }
                };
                let batch = [RawPacket(*dispatch(2).words()), RawPacket(*dispatch(3).words())];
                assert_eq!(res.write_batch(&batch), 2);
                assert_eq!(res.finish(), START.wrapping_add(2));
                bell.ring();
                bell.producer_done();
            })
        };
        let consumer = {
            let (mem, bell) = (mem.clone(), bell.clone());
            thread::spawn(move || consume(&ring_of(&mem), 3, &bell, 1))
        };
        producer.join().unwrap();
        let got = consumer.join().unwrap();
        assert_eq!(got, [1, 2, 3], "the batch is consumed whole, in order");
    });
}

#[test]
fn two_producers_one_consumer() {
    two_producers::<2>("two_producers_one_consumer", 0);
}

#[test]
fn two_producers_on_a_full_ring() {
    two_producers::<1>("two_producers_on_a_full_ring", u64::MAX);
}

#[test]
fn single_producer_across_the_wrap_and_a_full_ring() {
    single_producer_wrap_and_full();
}

#[test]
fn batch_publish() {
    batch_publishes_first_slot_last();
}

/// `Reservation::write` publishes the header Relaxed: the consumer reads a body it is not
/// ordered after.
#[cfg(loom_bug = "relaxed_header")]
#[test]
fn planted_relaxed_header() {
    single_producer_wrap_and_full();
}

/// `reserve_hinted` reserves with a load and a store: two producers take the same slot.
#[cfg(loom_bug = "non_atomic_reserve")]
#[test]
fn planted_non_atomic_reserve() {
    two_producers::<2>("two_producers_one_consumer", 0);
}

/// `write_batch` publishes the first slot before the others are written.
#[cfg(loom_bug = "batch_first_slot_first")]
#[test]
fn planted_batch_first_slot_first() {
    batch_publishes_first_slot_last();
}

/// `retire` advances the read index Relaxed: a producer reuses a slot the consumer may still be
/// reading.
#[cfg(loom_bug = "relaxed_retire")]
#[test]
fn planted_relaxed_retire() {
    single_producer_wrap_and_full();
}
