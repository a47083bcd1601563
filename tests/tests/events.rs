//! Events (docs/hip-semantics.md §2.4) and cross-stream waits (`hipStreamWaitEvent`, §2.2): flag
//! rules, record/query/synchronize, elapsed time, events outliving their streams, and the
//! barrier-AND packets a wait publishes.

use std::sync::atomic::{AtomicU32, Ordering};

use aqueduct::{Error, EventHandle, StreamHandle, Timeout};
use aqueduct_tests::*;

const NULL: StreamHandle = StreamHandle::NULL;
const EQ: u32 = 1;

fn gate(rt: &Rt, s: StreamHandle) -> &'static AtomicU32 {
    let g = cell32(0);
    rt.wait_value32(s, addr32(g), 1, EQ, u32::MAX).unwrap();
    g
}

fn open(g: &AtomicU32) {
    g.store(1, Ordering::SeqCst);
}

#[test]
fn creation_flag_rules() {
    let rt = runtime();
    for ok in [0u32, 0x1, 0x2, 0x3, 0x6, 0x7, 0x2000_0000, 0x4000_0000, 0x8000_0000, 0x4000_0002] {
        let e = rt.event_create(ok).unwrap_or_else(|err| panic!("flags {ok:#x}: {err}"));
        rt.event_destroy(e).unwrap();
    }
    for bad in [
        0x0800_0000u32,            // unsupported bit
        0x8,                       // unsupported bit
        0x4,                       // interprocess without disable-timing
        0x5,                       // same
        0x4000_0000 | 0x8000_0000, // two fence flags
        0x2000_0000 | 0x4000_0000, // two fence flags
        0x2000_0000 | 0x8000_0000, // two fence flags
        0xe000_0000,               // all three
        u32::MAX,
    ] {
        assert_eq!(rt.event_create(bad), Err(Error::InvalidValue), "flags {bad:#x}");
    }
}

#[test]
fn record_query_synchronize() {
    let rt = runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let s = rt.stream_create(0).unwrap();
    let e = rt.event_create(0).unwrap();
    // Never recorded: complete.
    assert_eq!(rt.event_query(e), Ok(()));
    assert_eq!(rt.event_synchronize(e), Ok(()));
    let g = gate(&rt, s);
    launch(&rt, s, k.inc, addr32(c)).unwrap();
    rt.event_record(e, s, 0).unwrap();
    assert_eq!(rt.event_query(e), Err(Error::NotReady));
    assert_eq!(rt.event_synchronize_timeout(e, Timeout::ZERO), Err(Error::NotReady));
    // Work after the record does not hold the event back.
    let after = cell32(0);
    open(g);
    let g2 = gate(&rt, s);
    launch(&rt, s, k.inc, addr32(after)).unwrap();
    assert_eq!(rt.event_synchronize(e), Ok(()));
    assert_eq!(read32(addr32(c)), 1, "the event completes after the work before it");
    assert_eq!(read32(addr32(after)), 0);
    assert_eq!(rt.event_query(e), Ok(()));
    open(g2);
    rt.stream_synchronize(s).unwrap();
    // Recording with the External flag works as well; flags > 1 do not.
    rt.event_record(e, s, 1).unwrap();
    assert_eq!(rt.event_query(e), Ok(()));
    assert_eq!(rt.event_record(e, s, 2), Err(Error::InvalidValue));
    assert_eq!(rt.event_record(e, s, u32::MAX), Err(Error::InvalidValue));
    // The flag check comes before the null-event check.
    assert_eq!(rt.event_record(EventHandle::NULL, s, 2), Err(Error::InvalidValue));
    assert_eq!(rt.event_record(EventHandle::NULL, s, 0), Err(Error::InvalidHandle));
}

#[test]
fn record_on_null_and_per_thread_streams() {
    let rt = runtime();
    for s in [NULL, StreamHandle::LEGACY, StreamHandle::PER_THREAD] {
        let e = rt.event_create(0).unwrap();
        let g = gate(&rt, s);
        rt.event_record(e, s, 0).unwrap();
        assert_eq!(rt.event_query(e), Err(Error::NotReady), "{s:?}");
        open(g);
        assert_eq!(rt.event_query(e), Ok(()), "{s:?}");
    }
}

#[test]
fn re_record_tracks_the_latest_record() {
    let rt = runtime();
    let a = rt.stream_create(1).unwrap();
    let b = rt.stream_create(1).unwrap();
    let e = rt.event_create(0).unwrap();
    let g = gate(&rt, a);
    rt.event_record(e, a, 0).unwrap();
    assert_eq!(rt.event_query(e), Err(Error::NotReady));
    // Recorded again on an idle stream: the event now stands for that record only.
    rt.event_record(e, b, 0).unwrap();
    assert_eq!(rt.event_query(e), Ok(()));
    assert_eq!(rt.event_synchronize_timeout(e, Timeout::ZERO), Ok(()));
    open(g);
    rt.device_synchronize().unwrap();
    assert_eq!(rt.event_query(e), Ok(()));
}

#[test]
fn elapsed_time_rules() {
    let rt = runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let s = rt.stream_create(0).unwrap();
    let a = rt.event_create(0).unwrap();
    let b = rt.event_create(0).unwrap();
    let untimed = rt.event_create(0x2).unwrap();
    // Null events.
    assert_eq!(rt.event_elapsed_time(EventHandle::NULL, b), Err(Error::InvalidHandle));
    assert_eq!(rt.event_elapsed_time(a, EventHandle::NULL), Err(Error::InvalidHandle));
    // Not recorded.
    assert_eq!(rt.event_elapsed_time(a, b), Err(Error::InvalidHandle));
    rt.event_record(a, s, 0).unwrap();
    assert_eq!(rt.event_elapsed_time(a, b), Err(Error::InvalidHandle), "b not recorded");
    assert_eq!(rt.event_elapsed_time(b, a), Err(Error::InvalidHandle), "b not recorded");
    // Same event, complete: 0 ms.
    assert_eq!(rt.event_elapsed_time(a, a), Ok(0.0));
    // DisableTiming.
    rt.event_record(untimed, s, 0).unwrap();
    assert_eq!(rt.event_query(untimed), Ok(()));
    assert_eq!(rt.event_elapsed_time(a, untimed), Err(Error::InvalidHandle));
    assert_eq!(rt.event_elapsed_time(untimed, a), Err(Error::InvalidHandle));
    assert_eq!(rt.event_elapsed_time(untimed, untimed), Err(Error::InvalidHandle));
    // Time over work of known duration: 50 kernels, each at least two loopback clock ticks.
    rt.event_record(a, s, 0).unwrap();
    for _ in 0..50 {
        launch(&rt, s, k.inc, addr32(c)).unwrap();
    }
    rt.event_record(b, s, 0).unwrap();
    rt.event_synchronize(b).unwrap();
    let ms = rt.event_elapsed_time(a, b).unwrap();
    assert!(ms >= loopback_packets_ms(50), "elapsed {ms} ms over 50 kernels ({} ms)", loopback_packets_ms(50));
    let back = rt.event_elapsed_time(b, a).unwrap();
    assert!(back < 0.0 && (back + ms).abs() < 1e-6, "reverse order is negative: {back}");
    // Pending.
    let g = gate(&rt, s);
    rt.event_record(b, s, 0).unwrap();
    assert_eq!(rt.event_elapsed_time(a, b), Err(Error::NotReady));
    assert_eq!(rt.event_elapsed_time(b, a), Err(Error::NotReady));
    assert_eq!(rt.event_elapsed_time(b, b), Err(Error::NotReady));
    open(g);
    rt.event_synchronize(b).unwrap();
    // Now b's first record and the wait packet lie between them as well.
    let later = rt.event_elapsed_time(a, b).unwrap();
    assert!(later > ms && later >= loopback_packets_ms(52), "elapsed {later} ms over 52 packets");
    // Destroyed events.
    rt.event_destroy(b).unwrap();
    assert_eq!(rt.event_elapsed_time(a, b), Err(Error::ContextIsDestroyed));
}

#[test]
fn record_on_destroyed_stream() {
    let rt = runtime();
    let s = rt.stream_create(0).unwrap();
    let e = rt.event_create(0).unwrap();
    rt.stream_destroy(s).unwrap();
    assert_eq!(rt.event_record(e, s, 0), Err(Error::ContextIsDestroyed));
    assert_eq!(rt.event_query(e), Ok(()), "the failed record left the event unrecorded");
    assert_eq!(rt.event_elapsed_time(e, e), Err(Error::InvalidHandle));
}

#[test]
fn events_outlive_their_stream() {
    let rt = runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let s = rt.stream_create(0).unwrap();
    let e = rt.event_create(0).unwrap();
    let g = gate(&rt, s);
    launch(&rt, s, k.inc, addr32(c)).unwrap();
    rt.event_record(e, s, 0).unwrap();
    rt.stream_destroy(s).unwrap();
    assert_eq!(rt.event_query(e), Err(Error::NotReady));
    open(g);
    assert_eq!(rt.event_synchronize(e), Ok(()));
    assert_eq!(read32(addr32(c)), 1);
    assert_eq!(rt.event_query(e), Ok(()));
}

#[test]
fn destroy_pending_event() {
    let rt = runtime();
    let s = rt.stream_create(0).unwrap();
    let e = rt.event_create(0).unwrap();
    let g = gate(&rt, s);
    rt.event_record(e, s, 0).unwrap();
    rt.event_destroy(e).unwrap();
    assert_eq!(rt.event_query(e), Err(Error::ContextIsDestroyed));
    assert_eq!(rt.event_destroy(e), Err(Error::ContextIsDestroyed));
    open(g);
    rt.stream_synchronize(s).unwrap();
    let e2 = rt.event_create(0).unwrap();
    assert_eq!(rt.event_query(e2), Ok(()));
}

#[test]
fn wait_event_publishes_a_barrier_on_the_event_signal() {
    let rt = runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let a = rt.stream_create(1).unwrap();
    let b = rt.stream_create(1).unwrap();
    let e = rt.event_create(0).unwrap();
    let g = gate(&rt, a);
    launch(&rt, a, k.inc, addr32(c)).unwrap();
    rt.event_record(e, a, 0).unwrap();
    rt.stream_wait_event(b, e, 0).unwrap();
    launch(&rt, b, k.double, addr32(c)).unwrap();
    assert_eq!(read32(addr32(c)), 0, "b waits for a's event");
    assert_eq!(rt.stream_query(b), Err(Error::NotReady));
    open(g);
    rt.stream_synchronize(b).unwrap();
    assert_eq!(read32(addr32(c)), 2, "(0 + 1) * 2: the increment ran first");
    let pkts = packets(rt.backend());
    let (qa, qb) = (queue_of(&rt, a), queue_of(&rt, b));
    // The record: a barrier-AND on a whose completion signal is the event's signal.
    let inc = pkts.iter().find(|p| p.queue == qa && p.is_launch(k.inc, addr32(c))).unwrap();
    let record = pkts.iter().find(|p| p.queue == qa && p.pos > inc.pos && p.barrier_completion() != 0).unwrap();
    // The wait: a barrier-value on b for a's progress point at the record (which the record's
    // packets reach; later records do not move it), before b's kernel.
    let progress = u64::from(inc.words[14]) | u64::from(inc.words[15]) << 32;
    let wait = pkts
        .iter()
        .find(|p| p.queue == qb && p.barrier_value().is_some_and(|w| w.signal == progress))
        .expect("b waits on the event");
    assert!(wait.pos > record.pos);
    let dbl = pkts.iter().find(|p| p.queue == qb && p.is_launch(k.double, addr32(c))).unwrap();
    assert!(dbl.pos > wait.pos);
    // Waiting on the same event once it completed adds nothing.
    rt.backend().clear_trace();
    rt.stream_wait_event(b, e, 1).unwrap();
    assert!(packets(rt.backend()).is_empty());
}

#[test]
fn wait_event_on_null_stream() {
    let rt = runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let nb = rt.stream_create(1).unwrap();
    let e = rt.event_create(0).unwrap();
    let g = gate(&rt, nb);
    rt.event_record(e, nb, 0).unwrap();
    rt.stream_wait_event(NULL, e, 0).unwrap();
    launch(&rt, NULL, k.inc, addr32(c)).unwrap();
    assert_eq!(read32(addr32(c)), 0, "the null stream waits for the event of a non-blocking stream");
    open(g);
    rt.stream_synchronize(NULL).unwrap();
    assert_eq!(read32(addr32(c)), 1);
}

#[test]
fn wait_on_unrecorded_event_is_a_no_op() {
    let rt = runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let s = rt.stream_create(0).unwrap();
    let e = rt.event_create(0).unwrap();
    rt.marker(s).unwrap();
    rt.backend().clear_trace();
    rt.stream_wait_event(s, e, 0).unwrap();
    assert_eq!(rt.backend().trace_len(), 0, "nothing published");
    launch(&rt, s, k.inc, addr32(c)).unwrap();
    assert_eq!(read32(addr32(c)), 1);
}

#[test]
fn wait_on_event_of_destroyed_stream_is_a_no_op() {
    let rt = runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let a = rt.stream_create(1).unwrap();
    let b = rt.stream_create(1).unwrap();
    let e = rt.event_create(0).unwrap();
    let g = gate(&rt, a);
    rt.event_record(e, a, 0).unwrap();
    rt.stream_destroy(a).unwrap();
    rt.stream_wait_event(b, e, 0).unwrap();
    launch(&rt, b, k.inc, addr32(c)).unwrap();
    assert_eq!(read32(addr32(c)), 1, "the wait was dropped");
    open(g);
    rt.event_synchronize(e).unwrap();
}

#[test]
fn wait_event_parameter_order() {
    let rt = runtime();
    let s = rt.stream_create(0).unwrap();
    let e = rt.event_create(0).unwrap();
    for flags in [2u32, 3, 0x100, u32::MAX] {
        assert_eq!(rt.stream_wait_event(s, e, flags), Err(Error::InvalidValue));
        assert_eq!(rt.stream_wait_event(s, EventHandle::NULL, flags), Err(Error::InvalidValue), "flags first");
        assert_eq!(rt.stream_wait_event(StreamHandle(0xdead_beef), e, flags), Err(Error::InvalidValue));
    }
    assert_eq!(rt.stream_wait_event(s, EventHandle::NULL, 0), Err(Error::InvalidHandle));
    assert_eq!(rt.stream_wait_event(s, EventHandle::NULL, 1), Err(Error::InvalidHandle));
    assert_eq!(rt.stream_wait_event(s, e, 0), Ok(()));
    assert_eq!(rt.stream_wait_event(s, e, 1), Ok(()));
    for h in [NULL, StreamHandle::LEGACY, StreamHandle::PER_THREAD] {
        assert_eq!(rt.stream_wait_event(h, e, 0), Ok(()));
    }
}
