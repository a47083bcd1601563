//! Execution contexts and detach (docs/hip-semantics.md §2.6, §4.8): once a context is destroyed
//! its streams answer every guarded API with `StreamDetached` (argument errors that come first
//! still win), keep their getters, report a capture that was live as Invalidated, and can still be
//! destroyed. Null, legacy and per-thread streams never detach; events recorded before keep
//! working; a detach during a capture invalidates that whole capture and nothing else.

use std::sync::atomic::{AtomicU32, Ordering};

use aqueduct::{CaptureStatus, ContextHandle, Error, EventHandle, GraphExecHandle, StreamHandle};
use aqueduct_tests::*;

const NULL: StreamHandle = StreamHandle::NULL;
const LEGACY: StreamHandle = StreamHandle::LEGACY;
const PT: StreamHandle = StreamHandle::PER_THREAD;
const GLOBAL: u32 = 0;
const RELAXED: u32 = 2;
/// `hipStreamWaitValueEq`.
const EQ: u32 = 1;
const SD: Error = Error::StreamDetached;

/// Holds later work of `s` until `open` is called.
fn gate(rt: &Rt, s: StreamHandle) -> &'static AtomicU32 {
    let g = cell32(0);
    rt.wait_value32(s, addr32(g), 1, EQ, u32::MAX).unwrap();
    g
}

fn open(g: &AtomicU32) {
    g.store(1, Ordering::SeqCst);
}

/// A context with one stream, and the context destroyed: the stream is detached.
fn detached(rt: &Rt) -> StreamHandle {
    let ctx = rt.context_create(&[]).unwrap();
    let s = rt.context_stream_create(ctx, 0, 0).unwrap();
    assert_eq!(rt.stream_is_detached(s), Ok(false));
    rt.context_destroy(ctx).unwrap();
    assert_eq!(rt.stream_is_detached(s), Ok(true));
    s
}

fn status(rt: &Rt, s: StreamHandle) -> CaptureStatus {
    rt.stream_is_capturing(s).unwrap()
}

#[test]
fn guarded_apis_on_a_detached_stream_are_stream_detached() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let (c, v) = (cell32(0), cell64(0));
    let log = HostLog::watching(0);
    let s = detached(rt);
    let other = rt.stream_create(0).unwrap();
    let e = rt.event_create(0).unwrap();
    rt.event_record(e, other, 0).unwrap();
    let g = rt.graph_create().unwrap();
    rt.graph_add_empty_node(g, &[]).unwrap();
    let x = rt.graph_instantiate(g).unwrap();
    assert_eq!(rt.stream_synchronize(s), Err(SD));
    assert_eq!(rt.stream_query(s), Err(SD));
    assert_eq!(rt.stream_wait_event(s, e, 0), Err(SD));
    assert_eq!(rt.launch_host_func(s, log.plain()), Err(SD));
    assert_eq!(rt.launch_host_func(s, log.callback(s)), Err(SD));
    assert_eq!(rt.event_record(e, s, 0), Err(SD));
    assert_eq!(rt.event_record(e, s, 1), Err(SD));
    assert_eq!(launch(rt, s, k.inc, addr32(c)), Err(SD));
    assert_eq!(rt.memcpy_async(s, addr32(c), addr32(cell32(3)), 4), Err(SD));
    assert_eq!(rt.memset_async(s, addr32(c), 3, 4, 1), Err(SD));
    assert_eq!(rt.write_value32(s, addr32(c), 3, 0), Err(SD));
    assert_eq!(rt.write_value64(s, addr64(v), 3, 0), Err(SD));
    assert_eq!(rt.wait_value32(s, addr32(c), 0, 0, u32::MAX), Err(SD));
    assert_eq!(rt.wait_value64(s, addr64(v), 0, 0, u64::MAX), Err(SD));
    assert_eq!(rt.marker(s), Err(SD));
    assert_eq!(rt.graph_launch(x, s), Err(SD));
    assert_eq!(rt.stream_begin_capture(s, GLOBAL), Err(SD));
    assert_eq!(rt.stream_begin_capture_to_graph(s, g, &[], GLOBAL), Err(SD));
    assert_eq!(rt.stream_end_capture(s), Err(SD));
    assert_eq!(status(rt, s), CaptureStatus::None, "nothing began");
    rt.device_synchronize().unwrap();
    assert_eq!((c.load(Ordering::SeqCst), v.load(Ordering::SeqCst), log.calls()), (0, 0, 0));
    // The event still stands for its record on the other stream.
    assert_eq!(rt.event_query(e), Ok(()));
    rt.graph_exec_destroy(x).unwrap();
}

#[test]
fn argument_errors_that_come_first_still_win_on_a_detached_stream() {
    let rt = leaked_runtime();
    let s = detached(rt);
    let e = rt.event_create(0).unwrap();
    assert_eq!(rt.event_record(EventHandle::NULL, s, 0), Err(Error::InvalidHandle));
    assert_eq!(rt.event_record(e, s, 2), Err(Error::InvalidValue));
    assert_eq!(rt.graph_launch(GraphExecHandle::NULL, s), Err(Error::InvalidValue));
    assert_eq!(rt.stream_wait_event(s, e, 2), Err(Error::InvalidValue));
    assert_eq!(rt.stream_wait_event(s, EventHandle::NULL, 0), Err(Error::InvalidHandle));
    assert_eq!(rt.write_value32(s, 0, 1, 0), Err(Error::InvalidValue));
    assert_eq!(rt.wait_value32(s, addr32(cell32(0)), 1, 9, u32::MAX), Err(Error::InvalidValue));
    assert_eq!(rt.memcpy_async(s, 0, addr32(cell32(0)), 4), Err(Error::InvalidValue));
}

#[test]
fn getters_keep_their_values_from_before_the_detach() {
    let rt = leaked_runtime();
    let mask = [0x0000_ff0fu32, 0x1];
    let ctx = rt.context_create(&mask).unwrap();
    let s = rt.context_stream_create(ctx, 0, -7).unwrap();
    let before = (rt.stream_flags(s), rt.stream_priority(s), rt.stream_device(s), rt.stream_id(s));
    let mut m_before = [0u32; 4];
    rt.stream_cu_mask(s, &mut m_before).unwrap();
    assert_eq!(before.0, Ok(1), "context streams are non-blocking");
    assert_eq!(before.1, Ok(-1), "the priority is clamped");
    assert_eq!(&m_before[..2], &mask);
    rt.context_destroy(ctx).unwrap();
    let after = (rt.stream_flags(s), rt.stream_priority(s), rt.stream_device(s), rt.stream_id(s));
    assert_eq!(after, before);
    let mut m_after = [0u32; 4];
    rt.stream_cu_mask(s, &mut m_after).unwrap();
    assert_eq!(m_after, m_before);
}

#[test]
fn capture_info_of_a_detached_stream_whose_capture_was_live_is_invalidated() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let ctx = rt.context_create(&[]).unwrap();
    let s = rt.context_stream_create(ctx, 0, 0).unwrap();
    rt.stream_begin_capture(s, RELAXED).unwrap();
    launch(rt, s, k.inc, addr32(c)).unwrap();
    let g = aqueduct::GraphHandle(rt.stream_capture_info(s).unwrap().graph);
    rt.context_destroy(ctx).unwrap();
    assert_eq!(status(rt, s), CaptureStatus::Invalidated);
    let info = rt.stream_capture_info(s).unwrap();
    assert_eq!(info.status, CaptureStatus::Invalidated);
    assert_eq!(info.id, 0);
    // The detach guard runs before the capture checks, and the graph went with the detach.
    assert_eq!(rt.stream_end_capture(s), Err(SD));
    assert_eq!(rt.graph_node_count(g), Err(Error::InvalidValue));
    assert_eq!(status(rt, s), CaptureStatus::Invalidated, "stays visible");
    // No capture is live any more: nothing else is restricted.
    rt.device_synchronize().unwrap();
    assert_eq!(c.load(Ordering::SeqCst), 0);
}

#[test]
fn destroying_a_detached_stream_succeeds() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let ctx = rt.context_create(&[]).unwrap();
    let s = rt.context_stream_create(ctx, 0, 0).unwrap();
    let gt = gate(rt, s);
    launch(rt, s, k.inc, addr32(c)).unwrap();
    rt.context_destroy(ctx).unwrap();
    assert_eq!(rt.context_destroy(ctx), Err(Error::InvalidContext));
    assert_eq!(rt.context_stream_create(ctx, 0, 0), Err(Error::InvalidContext));
    rt.stream_destroy(s).unwrap();
    assert_eq!(rt.stream_destroy(s), Err(Error::ContextIsDestroyed));
    // The work queued before still completes.
    open(gt);
    rt.device_synchronize().unwrap();
    assert_eq!(c.load(Ordering::SeqCst), 1);
    // A stream destroyed before its context leaves the context; destroying it is fine.
    let ctx = rt.context_create(&[]).unwrap();
    let s = rt.context_stream_create(ctx, 0, 0).unwrap();
    rt.stream_destroy(s).unwrap();
    rt.context_destroy(ctx).unwrap();
    let fresh = rt.stream_create(0).unwrap();
    assert_eq!(rt.stream_is_detached(fresh), Ok(false));
    launch(rt, fresh, k.inc, addr32(c)).unwrap();
    rt.stream_synchronize(fresh).unwrap();
    assert_eq!(c.load(Ordering::SeqCst), 2);
}

#[test]
fn null_legacy_and_per_thread_streams_never_detach() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    for s in [NULL, LEGACY, PT] {
        launch(rt, s, k.inc, addr32(c)).unwrap();
    }
    let ctx = rt.context_create(&[]).unwrap();
    let _owned = rt.context_stream_create(ctx, 0, 0).unwrap();
    rt.context_destroy(ctx).unwrap();
    for s in [NULL, LEGACY, PT] {
        assert_eq!(rt.stream_is_detached(s), Ok(false));
        launch(rt, s, k.inc, addr32(c)).unwrap();
        rt.stream_synchronize(s).unwrap();
        assert_eq!(rt.stream_query(s), Ok(()));
    }
    assert_eq!(c.load(Ordering::SeqCst), 6);
}

#[test]
fn events_recorded_before_the_detach_keep_working() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let ctx = rt.context_create(&[]).unwrap();
    let s = rt.context_stream_create(ctx, 0, 0).unwrap();
    let other = rt.stream_create(0).unwrap();
    let start = rt.event_create(0).unwrap();
    let stop = rt.event_create(0).unwrap();
    rt.event_record(start, s, 0).unwrap();
    let gt = gate(rt, s);
    launch(rt, s, k.inc, addr32(c)).unwrap();
    rt.event_record(stop, s, 0).unwrap();
    rt.context_destroy(ctx).unwrap();
    assert_eq!(rt.event_query(stop), Err(Error::NotReady));
    rt.stream_wait_event(other, stop, 0).unwrap();
    launch(rt, other, k.double, addr32(c)).unwrap();
    assert_eq!(c.load(Ordering::SeqCst), 0, "the waiter is held by the event");
    open(gt);
    rt.event_synchronize(stop).unwrap();
    assert_eq!(rt.event_query(stop), Ok(()));
    // The wait packet and the kernel lie between the records: at least their loopback ticks.
    let ms = rt.event_elapsed_time(start, stop).unwrap();
    assert!(ms >= loopback_packets_ms(2), "elapsed {ms} ms over two packets");
    rt.stream_synchronize(other).unwrap();
    assert_eq!(c.load(Ordering::SeqCst), 2, "inc on the detached stream, then double");
}

#[test]
fn detach_during_a_forked_capture_invalidates_the_whole_capture() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let ctx = rt.context_create(&[]).unwrap();
    let origin = rt.context_stream_create(ctx, 0, 0).unwrap();
    let ctx_fork = rt.context_stream_create(ctx, 0, 0).unwrap();
    let regular_fork = rt.stream_create(0).unwrap();
    rt.stream_begin_capture(origin, GLOBAL).unwrap();
    launch(rt, origin, k.inc, addr32(c)).unwrap();
    let e = rt.event_create(0).unwrap();
    rt.event_record(e, origin, 0).unwrap();
    rt.stream_wait_event(ctx_fork, e, 0).unwrap();
    rt.stream_wait_event(regular_fork, e, 0).unwrap();
    launch(rt, regular_fork, k.inc, addr32(c)).unwrap();
    let g = aqueduct::GraphHandle(rt.stream_capture_info(origin).unwrap().graph);
    let id = rt.stream_capture_info(regular_fork).unwrap().id;
    rt.context_destroy(ctx).unwrap();
    // Both context streams stay visibly Invalidated; the graph is gone.
    assert_eq!(status(rt, origin), CaptureStatus::Invalidated);
    assert_eq!(status(rt, ctx_fork), CaptureStatus::Invalidated);
    assert_eq!(rt.graph_node_count(g), Err(Error::InvalidValue));
    // The regular fork is out of the capture: its work is no longer captured, and it may begin
    // a capture of its own.
    assert_ne!(status(rt, regular_fork), CaptureStatus::Active);
    assert_eq!(rt.stream_end_capture(regular_fork), Err(Error::IllegalState));
    rt.stream_begin_capture(regular_fork, GLOBAL).unwrap();
    assert!(rt.stream_capture_info(regular_fork).unwrap().id > id);
    let g2 = rt.stream_end_capture(regular_fork).unwrap();
    assert_eq!(rt.graph_node_count(g2), Ok(0));
    // The captured event lost its capture.
    assert_eq!(rt.event_query(e), Ok(()));
    launch(rt, regular_fork, k.inc, addr32(c)).unwrap();
    rt.stream_synchronize(regular_fork).unwrap();
    assert_eq!(c.load(Ordering::SeqCst), 1, "only the work after the detach ran");
}

#[test]
fn detach_leaves_an_unrelated_capture_on_a_regular_stream_alone() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let ctx = rt.context_create(&[]).unwrap();
    let owned = rt.context_stream_create(ctx, 0, 0).unwrap();
    let regular = rt.stream_create(0).unwrap();
    rt.stream_begin_capture(owned, RELAXED).unwrap();
    rt.stream_begin_capture(regular, GLOBAL).unwrap();
    launch(rt, regular, k.inc, addr32(c)).unwrap();
    rt.context_destroy(ctx).unwrap();
    assert_eq!(status(rt, owned), CaptureStatus::Invalidated);
    assert_eq!(status(rt, regular), CaptureStatus::Active);
    launch(rt, regular, k.inc, addr32(c)).unwrap();
    let g = rt.stream_end_capture(regular).unwrap();
    assert_eq!(rt.graph_node_count(g), Ok(2));
}

#[test]
fn destroying_one_context_leaves_the_streams_of_another_attached() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let (a, b): (ContextHandle, ContextHandle) = (rt.context_create(&[]).unwrap(), rt.context_create(&[]).unwrap());
    let (sa, sb) = (rt.context_stream_create(a, 0, 0).unwrap(), rt.context_stream_create(b, 0, 0).unwrap());
    rt.context_destroy(a).unwrap();
    assert_eq!(rt.stream_is_detached(sa), Ok(true));
    assert_eq!(rt.stream_is_detached(sb), Ok(false));
    launch(rt, sb, k.inc, addr32(c)).unwrap();
    rt.stream_synchronize(sb).unwrap();
    assert_eq!(c.load(Ordering::SeqCst), 1);
    rt.context_destroy(b).unwrap();
    assert_eq!(rt.stream_synchronize(sb), Err(SD));
}

#[test]
fn context_streams_do_not_synchronise_with_the_null_stream() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let ctx = rt.context_create(&[]).unwrap();
    let s = rt.context_stream_create(ctx, 0, 0).unwrap();
    let gt = gate(rt, NULL);
    launch(rt, s, k.inc, addr32(c)).unwrap();
    rt.stream_synchronize(s).unwrap();
    assert_eq!(c.load(Ordering::SeqCst), 1, "the context stream did not wait for the null stream");
    open(gt);
    rt.context_destroy(ctx).unwrap();
}
