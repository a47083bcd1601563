//! The AQL ring as streams use it: 64-bit index wrap, doorbell values, and a full ring that
//! refuses work (NotReady) without overwriting anything.

use std::sync::atomic::{AtomicU32, Ordering};

use aqueduct::loopback::Loopback;
use aqueduct::{Backend, Error, Runtime, SingleThread, StreamHandle, ThreadKeys};
use aqueduct_tests::*;

const NULL: StreamHandle = StreamHandle::NULL;
const EQ: u32 = 1;

fn gate<B: Backend, K: ThreadKeys, C: aqueduct::Config>(rt: &Runtime<B, K, C>, s: StreamHandle) -> &'static AtomicU32 {
    let g = cell32(0);
    rt.wait_value32(s, addr32(g), 1, EQ, u32::MAX).unwrap();
    g
}

fn open(g: &AtomicU32) {
    g.store(1, Ordering::SeqCst);
}

#[test]
fn indices_wrap_past_u64_max() {
    let start = u64::MAX - 5;
    let rt: Rt = Runtime::new(Loopback::new(mem()).with_start_index(start), SingleThread);
    let k = register(rt.backend());
    let c = cell32(0);
    let s = rt.stream_create(1).unwrap();
    let q = queue_of(&rt, s);
    for i in 1..=12u32 {
        launch(&rt, s, k.inc, addr32(c)).unwrap();
        assert_eq!(read32(addr32(c)), i);
    }
    rt.stream_synchronize(s).unwrap();
    // One packet per launch: the doorbell carries the index of each packet, wrapping to 0.
    let bells = doorbells(rt.backend(), q);
    let want: Vec<u64> = (0..12).map(|i| start.wrapping_add(i)).collect();
    assert_eq!(bells, want);
    assert!(bells.contains(&u64::MAX) && bells.contains(&0));
    let idx: Vec<u64> = packets(rt.backend()).iter().filter(|p| p.queue == q).map(|p| p.index).collect();
    assert_eq!(idx, want, "every packet retired, in index order, across the wrap");
}

#[test]
fn blocked_work_across_the_wrap() {
    let start = u64::MAX - 2;
    let rt: Rt = Runtime::new(Loopback::new(mem()).with_start_index(start), SingleThread);
    let k = register(rt.backend());
    let buf = rt.malloc(4).unwrap();
    write32(buf, 0);
    let s = rt.stream_create(0).unwrap();
    // Null-stream work pending, then a blocking stream with multi-packet batches (barrier +
    // kernel) straddling the wrap on both queues.
    let g = gate(&rt, NULL);
    rt.memset_async(NULL, buf, 10, 4, 1).unwrap();
    launch(&rt, s, k.inc, buf).unwrap();
    launch(&rt, NULL, k.double, buf).unwrap();
    launch(&rt, s, k.inc, buf).unwrap();
    launch(&rt, NULL, k.double, buf).unwrap();
    launch(&rt, s, k.inc, buf).unwrap();
    assert_eq!(read32(buf), 0);
    open(g);
    rt.stream_synchronize(NULL).unwrap();
    assert_eq!(read32(buf), (((10 + 1) * 2 + 1) * 2) + 1);
    for q in [queue_of(&rt, NULL), queue_of(&rt, s)] {
        let bells = doorbells(rt.backend(), q);
        assert!(bells.len() >= 3);
        // Doorbells only move forward (by wrapping distance) and end at the last packet.
        for w in bells.windows(2) {
            let step = w[1].wrapping_sub(w[0]);
            assert!((1..16).contains(&step), "doorbell {:#x} then {:#x}", w[0], w[1]);
        }
        let idx: Vec<u64> = packets(rt.backend()).iter().filter(|p| p.queue == q).map(|p| p.index).collect();
        assert_eq!(idx.first(), Some(&start));
        assert_eq!(idx.last(), bells.last());
        for w in idx.windows(2) {
            assert_eq!(w[1], w[0].wrapping_add(1));
        }
        assert!(idx.contains(&0), "queue {q} crossed the wrap");
    }
}

#[test]
fn full_ring_refuses_without_overwriting() {
    let rt = small_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let s = rt.stream_create(1).unwrap();
    let q = queue_of(&rt, s);
    let g = gate(&rt, s);
    // The wait takes one of the 8 slots.
    for _ in 0..7 {
        launch(&rt, s, k.inc, addr32(c)).unwrap();
    }
    for _ in 0..3 {
        assert_eq!(launch(&rt, s, k.inc, addr32(c)), Err(Error::NotReady));
        assert_eq!(rt.write_value32(s, addr32(c), 1000, 0), Err(Error::NotReady));
        assert_eq!(rt.marker(s), Err(Error::NotReady));
    }
    assert_eq!(read32(addr32(c)), 0);
    open(g);
    rt.stream_synchronize(s).unwrap();
    assert_eq!(read32(addr32(c)), 7, "exactly the accepted work ran");
    // The ring has room again.
    for _ in 0..20 {
        launch(&rt, s, k.inc, addr32(c)).unwrap();
    }
    rt.stream_synchronize(s).unwrap();
    assert_eq!(read32(addr32(c)), 27);
    let bells = doorbells(rt.backend(), q);
    assert_eq!(bells.len(), 1 + 7 + 20, "refused work rang no doorbell");
    for w in bells.windows(2) {
        assert_eq!(w[1], w[0] + 1, "doorbell values increase by one packet each");
    }
}

#[test]
fn full_ring_on_an_event_record_leaves_the_event_unrecorded() {
    let rt = small_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let s = rt.stream_create(1).unwrap();
    let e = rt.event_create(0).unwrap();
    let g = gate(&rt, s);
    for _ in 0..7 {
        launch(&rt, s, k.inc, addr32(c)).unwrap();
    }
    assert_eq!(rt.event_record(e, s, 0), Err(Error::NotReady));
    assert_eq!(rt.event_query(e), Ok(()), "the refused record did not leave the event pending");
    open(g);
    rt.stream_synchronize(s).unwrap();
    rt.event_record(e, s, 0).unwrap();
    assert_eq!(rt.event_synchronize(e), Ok(()));
}

#[test]
fn full_producer_ring_does_not_block_null_stream_work() {
    // The null stream waits for s through s's progress point: nothing goes into s's full ring,
    // so null-stream work behind it is accepted, and runs once s's work has.
    let rt: Runtime<SmallLb, SingleThread, aqueduct::Capacities<8, 8, 2, 2>> =
        Runtime::new(Loopback::new(leak(SmallMem::new())), SingleThread);
    let k = register(rt.backend());
    let c = cell32(0);
    let s = rt.stream_create(0).unwrap();
    rt.marker(NULL).unwrap();
    let g = gate(&rt, s);
    for _ in 0..7 {
        launch(&rt, s, k.inc, addr32(c)).unwrap();
    }
    assert_eq!(launch(&rt, s, k.inc, addr32(c)), Err(Error::NotReady), "s's ring is full");
    // Each null-stream launch is a wait on s and the kernel: three fit in its ring.
    for _ in 0..3 {
        launch(&rt, NULL, k.inc, addr32(c)).unwrap();
    }
    assert_eq!(read32(addr32(c)), 0);
    open(g);
    rt.stream_synchronize(NULL).unwrap();
    assert_eq!(read32(addr32(c)), 10);
    // Waits are needed again: s pending, then null-stream work.
    for round in 0..4u32 {
        let g = gate(&rt, s);
        launch(&rt, s, k.inc, addr32(c)).unwrap();
        launch(&rt, NULL, k.double, addr32(c)).unwrap();
        open(g);
        rt.stream_synchronize(NULL).unwrap();
        let _ = round;
    }
    let mut want = 10u32;
    for _ in 0..4 {
        want = (want + 1) * 2;
    }
    assert_eq!(read32(addr32(c)), want);
}

#[test]
fn refused_re_record_keeps_the_previous_record() {
    let rt = small_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let a = rt.stream_create(1).unwrap();
    let b = rt.stream_create(1).unwrap();
    let e = rt.event_create(0).unwrap();
    let ga = gate(&rt, a);
    rt.event_record(e, a, 0).unwrap();
    let gb = gate(&rt, b);
    for _ in 0..7 {
        launch(&rt, b, k.inc, addr32(c)).unwrap();
    }
    assert_eq!(rt.event_record(e, b, 0), Err(Error::NotReady));
    assert_eq!(rt.event_query(e), Err(Error::NotReady), "still the pending record on a");
    open(ga);
    assert_eq!(rt.event_query(e), Ok(()), "and it completes with a");
    open(gb);
    rt.device_synchronize().unwrap();
    assert_eq!(read32(addr32(c)), 7);
}
