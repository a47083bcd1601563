//! The null stream's implicit synchronisation (docs/hip-semantics.md §3): the three hip-tests
//! cases, the barrier-value packets on progress points that implement rules 1 and 2, non-blocking
//! and per-thread streams, and the host-side query/synchronize differences between `0`,
//! `hipStreamLegacy` and device sync.
//!
//! Work is held back with `wait_value32` on a host u32 ("gate") so the loopback, which runs
//! packets as soon as it can, leaves it pending until the test opens the gate.

use std::sync::atomic::{AtomicU32, Ordering};

use aqueduct::{Error, StreamHandle, Timeout};
use aqueduct_tests::*;

const NULL: StreamHandle = StreamHandle::NULL;
const LEGACY: StreamHandle = StreamHandle::LEGACY;
const PT: StreamHandle = StreamHandle::PER_THREAD;
/// `hipStreamWaitValueEq`.
const EQ: u32 = 1;

/// Holds later work of `s` until `open` is called.
fn gate(rt: &Rt, s: StreamHandle) -> &'static AtomicU32 {
    let g = cell32(0);
    rt.wait_value32(s, addr32(g), 1, EQ, u32::MAX).unwrap();
    g
}

fn open(g: &AtomicU32) {
    g.store(1, Ordering::SeqCst);
}

fn device_u32(rt: &Rt, v: u32) -> u64 {
    let a = rt.malloc(4).unwrap();
    write32(a, v);
    a
}

/// The completion signal of any packet (the last 8 bytes).
fn completion(p: &Pkt) -> u64 {
    u64::from(p.words[14]) | u64::from(p.words[15]) << 32
}

/// Asserts that `consumer`'s queue has a barrier-value packet waiting on the progress signal
/// that `producer`'s packets complete (the producer's progress point), retiring after a packet
/// of the producer that completes it. Returns the trace positions (producer packet, consumer
/// wait).
fn sync_edge(pkts: &[Pkt], producer: u32, consumer: u32) -> (usize, usize) {
    for c in pkts.iter().filter(|p| p.queue == consumer) {
        let Some(w) = c.barrier_value() else { continue };
        let before = pkts.iter().rev().find(|p| p.queue == producer && completion(p) == w.signal && p.pos < c.pos);
        if let Some(p) = before {
            return (p.pos, c.pos);
        }
    }
    panic!("no barrier-value on queue {consumer} waits for the progress of queue {producer}: {pkts:#?}");
}

/// Whether any barrier-value of `consumer` waits on a progress signal completed on `producer`.
fn has_edge(pkts: &[Pkt], producer: u32, consumer: u32) -> bool {
    pkts.iter().filter(|p| p.queue == consumer).any(|c| {
        c.barrier_value().is_some_and(|w| pkts.iter().any(|p| p.queue == producer && completion(p) == w.signal))
    })
}

fn pos_of_launch(pkts: &[Pkt], queue: u32, kernel: u64, arg: u64) -> Vec<usize> {
    pkts.iter().filter(|p| p.queue == queue && p.is_launch(kernel, arg)).map(|p| p.pos).collect()
}

#[test]
fn hip_tests_fill_then_n_increments_on_blocking_stream() {
    for n in [1u32, 3, 10] {
        let rt = runtime();
        let k = register(rt.backend());
        let buf = device_u32(&rt, 0xdead);
        let s = rt.stream_create(0).unwrap();
        let g = gate(&rt, NULL);
        let seed = 1000;
        rt.memset_async(NULL, buf, seed, 4, 1).unwrap();
        for _ in 0..n {
            launch(&rt, s, k.inc, buf).unwrap();
        }
        assert_eq!(read32(buf), 0xdead, "the increments wait for the fill on the null stream");
        assert_eq!(rt.stream_query(s), Err(Error::NotReady));
        open(g);
        rt.stream_synchronize(s).unwrap();
        assert_eq!(read32(buf), seed + n);
    }
}

#[test]
fn hip_tests_fill_inc_double_inc() {
    let rt = runtime();
    let k = register(rt.backend());
    let buf = device_u32(&rt, 0);
    let s = rt.stream_create(0).unwrap();
    let g = gate(&rt, NULL);
    let seed = 21;
    rt.memset_async(NULL, buf, seed, 4, 1).unwrap();
    launch(&rt, s, k.inc, buf).unwrap();
    launch(&rt, NULL, k.double, buf).unwrap();
    launch(&rt, s, k.inc, buf).unwrap();
    assert_eq!(read32(buf), 0);
    open(g);
    rt.stream_synchronize(NULL).unwrap();
    assert_eq!(read32(buf), (seed + 1) * 2 + 1);
    // Both directions show in the trace: S waits on a null-stream marker (rule 2) and the null
    // stream waits on a marker of S (rule 1).
    let pkts = packets(rt.backend());
    let (qn, qs) = (queue_of(&rt, NULL), queue_of(&rt, s));
    sync_edge(&pkts, qn, qs);
    sync_edge(&pkts, qs, qn);
}

#[test]
fn hip_tests_fill_then_increments_on_four_blocking_streams() {
    let rt = runtime();
    let k = register(rt.backend());
    let buf = device_u32(&rt, 0);
    let streams: Vec<StreamHandle> = (0..4).map(|_| rt.stream_create(0).unwrap()).collect();
    let g = gate(&rt, NULL);
    let seed = 77;
    rt.memset_async(NULL, buf, seed, 4, 1).unwrap();
    for &s in &streams {
        launch(&rt, s, k.inc, buf).unwrap();
    }
    assert_eq!(read32(buf), 0);
    open(g);
    for &s in &streams {
        rt.stream_synchronize(s).unwrap();
    }
    assert_eq!(read32(buf), seed + 4);
    let pkts = packets(rt.backend());
    let qn = queue_of(&rt, NULL);
    for &s in &streams {
        let (_, consumer) = sync_edge(&pkts, qn, queue_of(&rt, s));
        let inc = pos_of_launch(&pkts, queue_of(&rt, s), k.inc, buf);
        assert!(inc.iter().all(|&p| p > consumer));
    }
}

#[test]
fn null_stream_work_waits_for_pending_blocking_work_through_markers() {
    let rt = runtime();
    let k = register(rt.backend());
    let a = cell32(0);
    let b = cell32(0);
    let s = rt.stream_create(0).unwrap();
    let g = gate(&rt, s);
    launch(&rt, s, k.inc, addr32(a)).unwrap();
    launch(&rt, NULL, k.inc, addr32(b)).unwrap();
    assert_eq!(read32(addr32(a)), 0);
    assert_eq!(read32(addr32(b)), 0, "null-stream work waits for the blocking stream");
    assert_eq!(rt.stream_query(LEGACY), Err(Error::NotReady));
    open(g);
    rt.stream_synchronize(LEGACY).unwrap();
    assert_eq!(read32(addr32(b)), 1);
    assert_eq!(read32(addr32(a)), 1, "synchronize(L) observes blocking work the null stream waited for");
    let pkts = packets(rt.backend());
    let (qn, qs) = (queue_of(&rt, NULL), queue_of(&rt, s));
    let (done, wait) = sync_edge(&pkts, qs, qn);
    let s_inc = pos_of_launch(&pkts, qs, k.inc, addr32(a));
    let n_inc = pos_of_launch(&pkts, qn, k.inc, addr32(b));
    assert_eq!((s_inc.len(), n_inc.len()), (1, 1));
    assert!(s_inc[0] <= done, "the wait covers S's pending work");
    assert!(wait < n_inc[0], "the null stream's wait precedes its kernel");
    // The wait is a barrier-value packet on S's progress point (`progress < 1 - count`).
    let w = pkts.iter().find(|p| p.pos == wait).unwrap().barrier_value().unwrap();
    assert_eq!(w.cond, aqueduct::aql::Condition::Lt as u32);
    assert!(w.value <= 0);
}

#[test]
fn null_stream_waits_for_every_busy_blocking_stream() {
    let rt = runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let s1 = rt.stream_create(0).unwrap();
    let s2 = rt.stream_create(0).unwrap();
    let idle = rt.stream_create(0).unwrap();
    rt.marker(idle).unwrap();
    let g1 = gate(&rt, s1);
    let g2 = gate(&rt, s2);
    launch(&rt, NULL, k.inc, addr32(c)).unwrap();
    open(g1);
    assert_eq!(rt.stream_query(NULL), Err(Error::NotReady));
    assert_eq!(read32(addr32(c)), 0, "still waiting for s2");
    open(g2);
    rt.stream_synchronize(NULL).unwrap();
    assert_eq!(read32(addr32(c)), 1);
    let pkts = packets(rt.backend());
    let qn = queue_of(&rt, NULL);
    sync_edge(&pkts, queue_of(&rt, s1), qn);
    sync_edge(&pkts, queue_of(&rt, s2), qn);
    assert!(!has_edge(&pkts, queue_of(&rt, idle), qn), "an idle blocking stream adds no marker");
}

#[test]
fn blocking_stream_waits_for_pending_null_work() {
    let rt = runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let s = rt.stream_create(0).unwrap();
    let g = gate(&rt, NULL);
    launch(&rt, s, k.inc, addr32(c)).unwrap();
    assert_eq!(read32(addr32(c)), 0);
    assert_eq!(rt.stream_query(s), Err(Error::NotReady));
    open(g);
    rt.stream_synchronize(s).unwrap();
    assert_eq!(read32(addr32(c)), 1);
    let pkts = packets(rt.backend());
    sync_edge(&pkts, queue_of(&rt, NULL), queue_of(&rt, s));
}

#[test]
fn idle_streams_add_no_barriers() {
    let rt = runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let s = rt.stream_create(0).unwrap();
    launch(&rt, s, k.inc, addr32(c)).unwrap();
    launch(&rt, NULL, k.inc, addr32(c)).unwrap();
    launch(&rt, s, k.inc, addr32(c)).unwrap();
    rt.device_synchronize().unwrap();
    assert_eq!(read32(addr32(c)), 3);
    let pkts = packets(rt.backend());
    assert!(pkts.iter().all(|p| p.deps().is_empty()), "nothing was pending, so nothing waits");
}

#[test]
fn non_blocking_streams_never_synchronise_with_null() {
    let rt = runtime();
    let k = register(rt.backend());
    let a = cell32(0);
    let b = cell32(0);
    let nb = rt.stream_create(1).unwrap();
    // NB pending; null work does not wait for it.
    let g = gate(&rt, nb);
    launch(&rt, nb, k.inc, addr32(a)).unwrap();
    launch(&rt, NULL, k.inc, addr32(b)).unwrap();
    assert_eq!(read32(addr32(b)), 1, "the null stream ran past the non-blocking stream");
    assert_eq!(read32(addr32(a)), 0);
    assert_eq!(rt.stream_query(NULL), Ok(()), "query(0) ignores non-blocking streams");
    assert_eq!(rt.stream_synchronize_timeout(NULL, Timeout::ZERO), Ok(()));
    assert_eq!(rt.device_synchronize_timeout(Timeout::ZERO), Err(Error::NotReady), "device sync includes NB");
    // Null pending; NB work does not wait for it.
    let gn = gate(&rt, NULL);
    launch(&rt, NULL, k.inc, addr32(b)).unwrap();
    open(g);
    launch(&rt, nb, k.inc, addr32(a)).unwrap();
    assert_eq!(read32(addr32(a)), 2, "the non-blocking stream ran past the null stream");
    assert_eq!(read32(addr32(b)), 1);
    open(gn);
    rt.device_synchronize().unwrap();
    assert_eq!(read32(addr32(b)), 2);
    let pkts = packets(rt.backend());
    let (qn, qnb) = (queue_of(&rt, NULL), queue_of(&rt, nb));
    assert!(!has_edge(&pkts, qnb, qn));
    assert!(!has_edge(&pkts, qn, qnb));
    assert!(pkts.iter().filter(|p| p.queue == qnb || p.queue == qn).all(|p| p.deps().is_empty()));
}

#[test]
fn blocking_streams_do_not_order_each_other() {
    let rt = runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let s1 = rt.stream_create(0).unwrap();
    let s2 = rt.stream_create(0).unwrap();
    let g = gate(&rt, s1);
    launch(&rt, s2, k.inc, addr32(c)).unwrap();
    assert_eq!(read32(addr32(c)), 1);
    open(g);
    rt.device_synchronize().unwrap();
    let pkts = packets(rt.backend());
    assert!(!has_edge(&pkts, queue_of(&rt, s1), queue_of(&rt, s2)));
}

#[test]
fn per_thread_stream_is_blocking() {
    let rt = runtime();
    let k = register(rt.backend());
    let a = cell32(0);
    let b = cell32(0);
    // PT pending → null waits (rule 1).
    let g = gate(&rt, PT);
    launch(&rt, PT, k.inc, addr32(a)).unwrap();
    launch(&rt, NULL, k.inc, addr32(b)).unwrap();
    assert_eq!(read32(addr32(b)), 0);
    assert_eq!(rt.stream_query(NULL), Err(Error::NotReady));
    assert_eq!(rt.stream_query(PT), Err(Error::NotReady));
    open(g);
    rt.stream_synchronize(LEGACY).unwrap();
    assert_eq!((read32(addr32(a)), read32(addr32(b))), (1, 1));
    // Null pending → PT waits (rule 2).
    let g = gate(&rt, NULL);
    launch(&rt, PT, k.inc, addr32(a)).unwrap();
    assert_eq!(read32(addr32(a)), 1);
    open(g);
    rt.stream_synchronize(PT).unwrap();
    assert_eq!(read32(addr32(a)), 2);
    let pkts = packets(rt.backend());
    let (qn, qpt) = (queue_of(&rt, NULL), queue_of(&rt, PT));
    sync_edge(&pkts, qpt, qn);
    sync_edge(&pkts, qn, qpt);
}

#[test]
fn query_null_versus_legacy() {
    let rt = runtime();
    let s = rt.stream_create(0).unwrap();
    // Nothing submitted anywhere.
    assert_eq!(rt.stream_query(NULL), Ok(()));
    assert_eq!(rt.stream_query(LEGACY), Ok(()));
    assert_eq!(rt.stream_query(s), Ok(()));
    let g = gate(&rt, s);
    assert_eq!(rt.stream_query(s), Err(Error::NotReady));
    assert_eq!(rt.stream_query(NULL), Err(Error::NotReady), "0 includes every blocking stream");
    assert_eq!(rt.stream_query(LEGACY), Ok(()), "L looks at the null stream only");
    open(g);
    assert_eq!(rt.stream_query(s), Ok(()));
    assert_eq!(rt.stream_query(NULL), Ok(()));
    assert_eq!(rt.stream_query(LEGACY), Ok(()));
    // Pending work on the null stream itself shows in both.
    let g = gate(&rt, NULL);
    assert_eq!(rt.stream_query(NULL), Err(Error::NotReady));
    assert_eq!(rt.stream_query(LEGACY), Err(Error::NotReady));
    assert_eq!(rt.stream_query(s), Ok(()));
    open(g);
    assert_eq!(rt.stream_query(LEGACY), Ok(()));
}

#[test]
fn synchronize_null_versus_legacy_versus_device() {
    let rt = runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let s = rt.stream_create(0).unwrap();
    let nb = rt.stream_create(1).unwrap();
    // A blocking stream pending: sync(0) waits for it, sync(L) does not.
    let g = gate(&rt, s);
    launch(&rt, s, k.inc, addr32(c)).unwrap();
    assert_eq!(rt.stream_synchronize_timeout(LEGACY, Timeout::ZERO), Ok(()));
    assert_eq!(rt.stream_synchronize_timeout(NULL, Timeout::ZERO), Err(Error::NotReady));
    assert_eq!(rt.device_synchronize_timeout(Timeout::ZERO), Err(Error::NotReady));
    open(g);
    rt.stream_synchronize(NULL).unwrap();
    assert_eq!(read32(addr32(c)), 1);
    // A non-blocking stream pending: only device sync waits for it.
    let g = gate(&rt, nb);
    launch(&rt, nb, k.inc, addr32(c)).unwrap();
    assert_eq!(rt.stream_synchronize_timeout(LEGACY, Timeout::ZERO), Ok(()));
    assert_eq!(rt.stream_synchronize_timeout(NULL, Timeout::ZERO), Ok(()));
    assert_eq!(rt.device_synchronize_timeout(Timeout::ZERO), Err(Error::NotReady));
    open(g);
    rt.device_synchronize().unwrap();
    assert_eq!(read32(addr32(c)), 2);
    // The per-thread stream: sync(PT) waits for it alone.
    let g = gate(&rt, PT);
    assert_eq!(rt.stream_synchronize_timeout(PT, Timeout::ZERO), Err(Error::NotReady));
    assert_eq!(rt.stream_synchronize_timeout(s, Timeout::ZERO), Ok(()));
    assert_eq!(rt.stream_synchronize_timeout(LEGACY, Timeout::ZERO), Ok(()));
    assert_eq!(rt.stream_synchronize_timeout(NULL, Timeout::ZERO), Err(Error::NotReady));
    open(g);
    rt.stream_synchronize(PT).unwrap();
}
