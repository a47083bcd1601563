//! loom models of the signal protocol, run over `core/src/signal.rs` itself: the packet
//! processor's [`AmdSignal::complete`] (timestamps, `AcqRel` decrement, then the event mailbox
//! post) against a host waiter's [`AmdSignal::wait`] (an `Acquire` load of the value, blocking
//! on the signal's event only after seeing an old value), on an [`AmdSignal`] whose fields are
//! loom atomics (`AmdSignal::new_loom`, see `core/src/sync.rs`).
//!
//! `RUSTFLAGS="--cfg loom" cargo test -p aqueduct --release --test loom_signal` (or
//! `scripts/verify loom`, which also runs the planted bugs).
//!
//! The KFD event behind the mailbox is modelled as the driver keeps it: the interrupt sets an
//! auto-reset flag and wakes its waiters, a wait consumes the flag. It is a loom `Mutex` and
//! `Condvar`, so a lost wake-up is a loom deadlock. Each packet's kernel writes a loom
//! `UnsafeCell` before its completion; a waiter that returns reads it, so loom reports a
//! completion that is not ordered before the wait's return as a causality violation.
//!
//! # Planted bugs
//!
//! Each `planted_*` test exists only in a build with its `--cfg loom_bug="..."`, which switches
//! on that bug inside signal.rs, and must FAIL there with the failure `scripts/verify loom`
//! expects (a causality violation, a failed check, or a deadlock).
#![cfg(loom)]

mod loom_common;

use aqueduct::aql::{self, AqlRing, Condition, KernelDispatchPacket, Outcome, PacketExecutor, Step};
use aqueduct::sync::LoomRingMemory;
use aqueduct::AmdSignal;
use core::sync::atomic::Ordering::{Relaxed, Release};
use loom::cell::UnsafeCell;
use loom::sync::atomic::AtomicU64;
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;
use loom_common::{explore, Doorbell};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

/// The event mailbox slot the signal names (an address the "device" translates).
const MAILBOX: u64 = 0x1000;
/// The KFD event id the signal posts.
const EVENT_ID: u32 = 7;

/// A KFD signal event: its mailbox slot and its auto-reset "signaled" flag.
#[derive(Default)]
struct Event {
    mailbox: AtomicU64,
    signaled: Mutex<bool>,
    interrupt: Condvar,
}

impl Event {
    /// The `post` of [`AmdSignal::complete`]: the mailbox write, then the interrupt that sets
    /// the event and wakes its waiters.
    fn post(&self, mailbox: u64, id: u32) {
        assert_eq!((mailbox, id), (MAILBOX, EVENT_ID), "the completion posted to the signal's mailbox");
        self.mailbox.store(u64::from(id), Release);
        *self.signaled.lock().unwrap() = true;
        self.interrupt.notify_all();
    }

    /// A wait with no timeout; consumes the event.
    fn wait(&self) {
        let mut signaled = self.signaled.lock().unwrap();
        while !*signaled {
            signaled = self.interrupt.wait(signaled).unwrap();
        }
        *signaled = false;
    }

    /// A wait with a zero timeout: consumes the event if it is set.
    fn poll(&self) -> bool {
        std::mem::take(&mut *self.signaled.lock().unwrap())
    }
}

/// A signal with an event, and what each packet's kernel wrote.
struct Device {
    signal: AmdSignal,
    event: Event,
    effects: Vec<UnsafeCell<u64>>,
}

impl Device {
    /// A signal of value `value` posting to the event, for `packets` packets.
    fn new(value: i64, packets: usize) -> Device {
        let signal = AmdSignal::new_loom(value);
        // Ordering: Relaxed, as a backend sets them up before the signal is used (the model's
        // threads are spawned after this).
        signal.event_mailbox_ptr.store(MAILBOX, Relaxed);
        signal.event_id.store(EVENT_ID, Relaxed);
        Device { signal, event: Event::default(), effects: (0..packets).map(|_| UnsafeCell::new(0)).collect() }
    }

    /// Packet `k`'s kernel: its effect.
    fn kernel(&self, k: usize) {
        // SAFETY: (model) only packet k writes its cell; loom checks the readers.
        self.effects[k].with_mut(|e| unsafe { *e = k as u64 + 1 });
    }

    /// Packet `k` runs and completes the signal, with timestamps (10 + k, 20 + k).
    fn run_packet(&self, k: usize) {
        self.kernel(k);
        let ts = (10 + k as u64, 20 + k as u64);
        self.signal.complete(Some(ts), |mailbox, id| self.event.post(mailbox, id));
    }

    /// A wait with no timeout for `value < 1`.
    fn wait(&self) -> Option<i64> {
        self.signal.wait(Condition::Lt, 1, || {
            self.event.wait();
            true
        })
    }

    /// After a wait returned: every packet's effect, and timestamps that completions stored
    /// (`ends` lists the end timestamps; each start is its end - 10), are visible. Which
    /// completion's they are is a race when several complete at once, as on the device.
    fn check_completed(&self, ends: &[u64]) {
        for (k, e) in self.effects.iter().enumerate() {
            // SAFETY: (model) loom checks that packet k's write happened before this read.
            let v = e.with(|e| unsafe { *e });
            assert_eq!(v, k as u64 + 1, "packet {k}'s effect is not visible after the wait");
        }
        let end = self.signal.end_ts.load(Relaxed);
        let start = self.signal.start_ts.load(Relaxed);
        assert!(
            ends.contains(&end) && ends.contains(&(start + 10)),
            "the completion's timestamps are not visible after the wait: start {start}, end {end}"
        );
    }
}

/// Two packets complete one signal (value 2, as a counter of outstanding work), each on its own
/// processor thread; a waiter with no timeout wakes on the event and sees both packets' effects.
fn completions_wake_the_waiter() {
    explore("completions_wake_the_waiter", || {
        let dev = Arc::new(Device::new(2, 2));
        let processors: Vec<_> = (0..2)
            .map(|k| {
                let dev = dev.clone();
                thread::spawn(move || dev.run_packet(k))
            })
            .collect();
        let waiter = {
            let dev = dev.clone();
            thread::spawn(move || {
                assert_eq!(dev.wait(), Some(0));
                dev.check_completed(&[20, 21]);
            })
        };
        for p in processors {
            p.join().unwrap();
        }
        waiter.join().unwrap();
        assert_eq!(dev.event.mailbox.load(Relaxed), u64::from(EVENT_ID));
    });
}

/// One packet completes its signal while the waiter waits with a bound (one poll of the event):
/// the wait either returns the completion, with its effect and timestamps, or gives up with the
/// signal still pending, and a timeout loses nothing: a second wait with no timeout returns it.
/// Both outcomes must occur among the explored executions.
fn wait_with_timeout() {
    let outcomes = std::sync::Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let counted = outcomes.clone();
    explore("wait_with_timeout", move || {
        let dev = Arc::new(Device::new(1, 1));
        let processor = {
            let dev = dev.clone();
            thread::spawn(move || dev.run_packet(0))
        };
        let waiter = {
            let dev = dev.clone();
            thread::spawn(move || {
                let mut polls = 1;
                let bounded = dev.signal.wait(Condition::Lt, 1, || {
                    if polls == 0 {
                        return false;
                    }
                    polls -= 1;
                    if !dev.event.poll() {
                        thread::yield_now();
                    }
                    true
                });
                let timed_out = bounded.is_none();
                if timed_out {
                    assert_eq!(dev.wait(), Some(0), "the completion after a timeout was lost");
                } else {
                    assert_eq!(bounded, Some(0));
                }
                dev.check_completed(&[20]);
                timed_out
            })
        };
        processor.join().unwrap();
        let timed_out = waiter.join().unwrap();
        counted[usize::from(timed_out)].fetch_add(1, SeqCst);
    });
    let [done, timed_out] = [outcomes[0].load(SeqCst), outcomes[1].load(SeqCst)];
    println!("wait_with_timeout: {done} executions returned the completion, {timed_out} timed out first");
    assert!(done > 0 && timed_out > 0, "the bounded wait did not both succeed and time out");
}

/// The executor of the end-to-end model: runs the dispatch (packet 0's kernel) and completes
/// the signal the packet names with [`AmdSignal::complete`].
struct Processor {
    dev: Arc<Device>,
    clock: u64,
}

impl PacketExecutor for Processor {
    fn read_signal(&mut self, _handle: u64, _mask: i64) -> Option<i64> {
        None
    }
    fn complete_signal(&mut self, handle: u64, start: u64, end: u64) {
        assert_eq!(handle, self.dev.signal.handle().0, "the packet names the model's signal");
        let dev = &self.dev;
        dev.signal.complete(Some((start, end)), |mailbox, id| dev.event.post(mailbox, id));
    }
    fn dispatch(&mut self, _packet: &KernelDispatchPacket, _kernarg: u64) -> Outcome {
        self.dev.kernel(0);
        Outcome::Done
    }
    fn timestamp(&mut self) -> u64 {
        // Start 10, end 20, as `check_completed` expects.
        self.clock += 10;
        self.clock
    }
}

/// The whole path: a producer publishes a dispatch whose completion signal is the model's signal
/// through [`AqlRing`], the packet processor runs it with [`aql::step`] and completes the signal,
/// and a host waiter waits for the signal and sees the kernel's effect and the timestamps.
fn dispatch_completes_the_waited_signal() {
    explore("dispatch_completes_the_waited_signal", || {
        let dev = Arc::new(Device::new(1, 1));
        let mem = Arc::new(LoomRingMemory::<2>::new(0));
        let bell = Arc::new(Doorbell::default());
        // SAFETY: `mem` outlives every ring view (each thread holds an Arc).
        unsafe { AqlRing::new_loom(&*mem) }.expect("a power-of-two ring").invalidate_all();
        let producer = {
            let (dev, mem, bell) = (dev.clone(), mem.clone(), bell.clone());
            thread::spawn(move || {
                // SAFETY: as above.
                let ring = unsafe { AqlRing::new_loom(&*mem) }.expect("a power-of-two ring");
                let packet = KernelDispatchPacket {
                    header: aql::DISPATCH_HEADER.0,
                    setup: 1,
                    workgroup_size_x: 1,
                    workgroup_size_y: 1,
                    workgroup_size_z: 1,
                    grid_size_x: 1,
                    grid_size_y: 1,
                    grid_size_z: 1,
                    completion_signal: dev.signal.handle().0,
                    ..Default::default()
                };
                let mut res = ring.reserve(1, 0).expect("an empty ring has room");
                res.write(&packet);
                res.finish();
                bell.ring();
                bell.producer_done();
            })
        };
        let consumer = {
            let (dev, mem, bell) = (dev.clone(), mem.clone(), bell.clone());
            thread::spawn(move || {
                // SAFETY: as above.
                let ring = unsafe { AqlRing::new_loom(&*mem) }.expect("a power-of-two ring");
                let mut exec = Processor { dev, clock: 0 };
                loop {
                    let seen = bell.now();
                    match aql::step(&ring, ring.read_index().wrapping_add(ring.size()), &mut exec) {
                        Step::Retired(_) => break,
                        Step::Stalled => bell.wait_change(seen),
                        other => panic!("unexpected step {other:?}"),
                    }
                }
            })
        };
        let waiter = {
            let dev = dev.clone();
            thread::spawn(move || {
                assert_eq!(dev.wait(), Some(0));
                dev.check_completed(&[20]);
            })
        };
        producer.join().unwrap();
        consumer.join().unwrap();
        waiter.join().unwrap();
    });
}

#[test]
fn completion_wakes_the_waiter() {
    completions_wake_the_waiter();
}

#[test]
fn bounded_wait_returns_the_completion_or_times_out() {
    wait_with_timeout();
}

#[test]
fn dispatch_to_waiter() {
    dispatch_completes_the_waited_signal();
}

/// `complete` decrements Relaxed: a waiter that sees the new value is not ordered after the
/// packet's effect.
#[cfg(loom_bug = "relaxed_decrement")]
#[test]
fn planted_relaxed_decrement() {
    completions_wake_the_waiter();
}

/// `load` (the waiter's) is Relaxed: as above, from the waiter's side.
#[cfg(loom_bug = "relaxed_wait")]
#[test]
fn planted_relaxed_wait() {
    completions_wake_the_waiter();
}

/// `complete` stores the timestamps after the decrement that should publish them.
#[cfg(loom_bug = "timestamps_after_decrement")]
#[test]
fn planted_timestamps_after_decrement() {
    wait_with_timeout();
}

/// `complete` posts the event before the decrement: a lost wake-up, which loom reports as a
/// deadlock.
#[cfg(loom_bug = "post_before_decrement")]
#[test]
fn planted_post_before_decrement() {
    completions_wake_the_waiter();
}
