//! Stream capture (docs/hip-semantics.md §2.3, §4): begin/end errors in HIP's order, the shape of
//! captured graphs (linear, fork/join, concurrent joins, self-waits), capture info, dependency
//! updates, thread modes, cross-capture waits, the prohibited calls and what they invalidate,
//! the legacy stream during a blocking capture, and destroying members of a capture.
//!
//! The newest HIP model is the one checked: invalidation covers the whole capture, and ending
//! an invalidated or unjoined capture tears it down (every member back to None).

use std::sync::atomic::Ordering;

use aqueduct::{
    CaptureMode, CaptureStatus, Error, EventHandle, GraphHandle, HostFn, NodeId, NodeKind, Runtime, StreamHandle,
    ThreadKeys,
};
use aqueduct_tests::*;

const NULL: StreamHandle = StreamHandle::NULL;
const LEGACY: StreamHandle = StreamHandle::LEGACY;
const GLOBAL: u32 = 0;
const THREAD_LOCAL: u32 = 1;
const RELAXED: u32 = 2;
const MODES: [u32; 3] = [GLOBAL, THREAD_LOCAL, RELAXED];
/// `hipStreamNonBlocking`.
const NB: u32 = 1;
/// `hipEventRecordExternal` / `hipEventWaitExternal`.
const EXTERNAL: u32 = 1;
/// `hipStreamAddCaptureDependencies` / `hipStreamSetCaptureDependencies`.
const ADD: u32 = 0;
const SET: u32 = 1;

type R<K> = Runtime<Lb, K>;

fn status<K: ThreadKeys>(rt: &R<K>, s: StreamHandle) -> CaptureStatus {
    rt.stream_is_capturing(s).unwrap()
}

/// The edges of `g`, sorted, as plain numbers.
fn edges<K: ThreadKeys>(rt: &R<K>, g: GraphHandle) -> Vec<(u16, u16)> {
    let mut out = [(NodeId(0), NodeId(0)); 64];
    let n = rt.graph_edges(g, &mut out).unwrap();
    let mut e: Vec<(u16, u16)> = out[..n].iter().map(|(a, b)| (a.0, b.0)).collect();
    e.sort_unstable();
    e
}

fn is_kernel(kind: NodeKind, object: u64) -> bool {
    matches!(kind, NodeKind::Dispatch(d) if d.kernel_object == object)
}

/// The capture graph of an active stream.
fn capture_graph<K: ThreadKeys>(rt: &R<K>, s: StreamHandle) -> GraphHandle {
    let info = rt.stream_capture_info(s).unwrap();
    assert_eq!(info.status, CaptureStatus::Active);
    GraphHandle(info.graph)
}

/// Makes `fork` join the capture of `origin` (record on `origin`, wait on `fork`).
fn fork<K: ThreadKeys>(rt: &R<K>, origin: StreamHandle, fork: StreamHandle) -> EventHandle {
    let e = rt.event_create(0).unwrap();
    rt.event_record(e, origin, 0).unwrap();
    rt.stream_wait_event(fork, e, 0).unwrap();
    e
}

/// Joins `from`'s work back into `into`.
fn join<K: ThreadKeys>(rt: &R<K>, from: StreamHandle, into: StreamHandle) {
    let e = rt.event_create(0).unwrap();
    rt.event_record(e, from, 0).unwrap();
    rt.stream_wait_event(into, e, 0).unwrap();
}

/// Ends `s`'s capture and destroys its graph (graph slots are few).
fn end_and_drop<K: ThreadKeys>(rt: &R<K>, s: StreamHandle) {
    let g = rt.stream_end_capture(s).unwrap();
    rt.graph_destroy(g).unwrap();
}

// ----- begin and end ---------------------------------------------------------------------------

#[test]
fn begin_on_null_or_legacy_is_unsupported_before_the_mode_is_checked() {
    let rt = leaked_runtime();
    for s in [NULL, LEGACY] {
        assert_eq!(rt.stream_begin_capture(s, GLOBAL), Err(Error::StreamCaptureUnsupported));
        assert_eq!(rt.stream_begin_capture(s, 7), Err(Error::StreamCaptureUnsupported));
        assert_eq!(status(rt, s), CaptureStatus::None);
    }
}

#[test]
fn begin_with_a_bad_mode_is_invalid_value() {
    let rt = leaked_runtime();
    let s = rt.stream_create(0).unwrap();
    assert_eq!(rt.stream_begin_capture(s, 3), Err(Error::InvalidValue));
    assert_eq!(status(rt, s), CaptureStatus::None);
    // The mode is checked before the stream's state.
    rt.stream_begin_capture(s, GLOBAL).unwrap();
    assert_eq!(rt.stream_begin_capture(s, 3), Err(Error::InvalidValue));
    end_and_drop(rt, s);
}

#[test]
fn begin_on_a_capturing_stream_is_illegal_state() {
    let rt = leaked_runtime();
    let s = rt.stream_create(0).unwrap();
    let f = rt.stream_create(0).unwrap();
    rt.stream_begin_capture(s, GLOBAL).unwrap();
    for m in MODES {
        assert_eq!(rt.stream_begin_capture(s, m), Err(Error::IllegalState));
    }
    // A fork that joined by waiting is Active too.
    fork(rt, s, f);
    assert_eq!(rt.stream_begin_capture(f, GLOBAL), Err(Error::IllegalState));
    // So is an invalidated member.
    assert_eq!(rt.stream_query(s), Err(Error::StreamCaptureUnsupported));
    assert_eq!(rt.stream_begin_capture(s, GLOBAL), Err(Error::IllegalState));
    assert_eq!(rt.stream_begin_capture(f, GLOBAL), Err(Error::IllegalState));
    assert_eq!(rt.stream_end_capture(s), Err(Error::StreamCaptureInvalidated));
}

#[test]
fn end_on_null_or_legacy_is_illegal_state() {
    let rt = leaked_runtime();
    let s = rt.stream_create(0).unwrap();
    rt.stream_begin_capture(s, GLOBAL).unwrap();
    for n in [NULL, LEGACY] {
        assert_eq!(rt.stream_end_capture(n), Err(Error::IllegalState));
    }
    assert_eq!(status(rt, s), CaptureStatus::Active);
    end_and_drop(rt, s);
}

#[test]
fn end_on_a_stream_that_is_not_capturing_is_illegal_state() {
    let rt = leaked_runtime();
    let s = rt.stream_create(0).unwrap();
    assert_eq!(rt.stream_end_capture(s), Err(Error::IllegalState));
    rt.stream_begin_capture(s, GLOBAL).unwrap();
    end_and_drop(rt, s);
    assert_eq!(rt.stream_end_capture(s), Err(Error::IllegalState));
}

#[test]
fn end_on_a_fork_is_unmatched_and_the_origin_still_ends() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let (s, f) = (rt.stream_create(0).unwrap(), rt.stream_create(0).unwrap());
    rt.stream_begin_capture(s, GLOBAL).unwrap();
    launch(rt, s, k.inc, addr32(c)).unwrap();
    fork(rt, s, f);
    assert_eq!(rt.stream_end_capture(f), Err(Error::StreamCaptureUnmatched));
    assert_eq!(status(rt, s), CaptureStatus::Active);
    assert_eq!(status(rt, f), CaptureStatus::Active);
    let g = rt.stream_end_capture(s).unwrap();
    assert_eq!(rt.graph_node_count(g), Ok(1));
    assert_eq!(status(rt, f), CaptureStatus::None);
}

#[test]
fn end_from_another_thread_is_wrong_thread_and_the_capture_survives() {
    for mode in [GLOBAL, THREAD_LOCAL] {
        let rt = leaked_mt_runtime();
        let k = register(rt.backend());
        let c = cell32(0);
        let s = rt.stream_create(0).unwrap();
        rt.stream_begin_capture(s, mode).unwrap();
        launch(rt, s, k.inc, addr32(c)).unwrap();
        std::thread::scope(|sc| {
            sc.spawn(|| {
                assert_eq!(rt.stream_end_capture(s), Err(Error::StreamCaptureWrongThread));
                assert_eq!(status(rt, s), CaptureStatus::Active);
            })
            .join()
            .unwrap();
        });
        assert_eq!(status(rt, s), CaptureStatus::Active);
        let g = rt.stream_end_capture(s).unwrap();
        assert_eq!(rt.graph_node_count(g), Ok(1));
        assert_eq!(status(rt, s), CaptureStatus::None);
    }
}

#[test]
fn relaxed_capture_can_be_ended_from_any_thread() {
    let rt = leaked_mt_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let s = rt.stream_create(0).unwrap();
    rt.stream_begin_capture(s, RELAXED).unwrap();
    launch(rt, s, k.inc, addr32(c)).unwrap();
    let g = std::thread::scope(|sc| sc.spawn(|| rt.stream_end_capture(s)).join().unwrap()).unwrap();
    assert_eq!(rt.graph_node_count(g), Ok(1));
    assert_eq!(status(rt, s), CaptureStatus::None);
}

#[test]
fn end_of_an_invalidated_capture_tears_every_member_down() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let (s, f1, f2) = (rt.stream_create(0).unwrap(), rt.stream_create(NB).unwrap(), rt.stream_create(0).unwrap());
    rt.stream_begin_capture(s, GLOBAL).unwrap();
    launch(rt, s, k.inc, addr32(c)).unwrap();
    fork(rt, s, f1);
    fork(rt, f1, f2);
    let g = capture_graph(rt, s);
    // Invalidating through a fork invalidates every member.
    assert_eq!(rt.stream_synchronize(f2), Err(Error::StreamCaptureUnsupported));
    for m in [s, f1, f2] {
        assert_eq!(status(rt, m), CaptureStatus::Invalidated);
    }
    assert_eq!(rt.stream_end_capture(s), Err(Error::StreamCaptureInvalidated));
    for m in [s, f1, f2] {
        assert_eq!(status(rt, m), CaptureStatus::None);
    }
    // The capture's graph went with it.
    assert_eq!(rt.graph_node_count(g), Err(Error::InvalidValue));
    assert_eq!(rt.stream_end_capture(s), Err(Error::IllegalState));
    for m in [s, f1, f2] {
        rt.stream_begin_capture(m, GLOBAL).unwrap();
        end_and_drop(rt, m);
    }
    assert_eq!(c.load(Ordering::SeqCst), 0, "captured work never ran");
}

#[test]
fn end_with_an_unjoined_fork_is_unjoined_and_tears_down() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let (s, f) = (rt.stream_create(0).unwrap(), rt.stream_create(0).unwrap());
    rt.stream_begin_capture(s, GLOBAL).unwrap();
    launch(rt, s, k.inc, addr32(c)).unwrap();
    fork(rt, s, f);
    launch(rt, f, k.inc, addr32(c)).unwrap();
    launch(rt, s, k.inc, addr32(c)).unwrap();
    let g = capture_graph(rt, s);
    assert_eq!(rt.stream_end_capture(s), Err(Error::StreamCaptureUnjoined));
    assert_eq!(status(rt, s), CaptureStatus::None);
    assert_eq!(status(rt, f), CaptureStatus::None);
    assert_eq!(rt.graph_node_count(g), Err(Error::InvalidValue));
    rt.stream_begin_capture(f, GLOBAL).unwrap();
    end_and_drop(rt, f);
    rt.stream_begin_capture(s, GLOBAL).unwrap();
    end_and_drop(rt, s);
}

#[test]
fn work_on_a_fork_after_its_join_is_unjoined() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let (s, f) = (rt.stream_create(0).unwrap(), rt.stream_create(0).unwrap());
    rt.stream_begin_capture(s, GLOBAL).unwrap();
    launch(rt, s, k.inc, addr32(c)).unwrap();
    fork(rt, s, f);
    launch(rt, f, k.inc, addr32(c)).unwrap();
    join(rt, f, s);
    launch(rt, f, k.inc, addr32(c)).unwrap();
    assert_eq!(rt.stream_end_capture(s), Err(Error::StreamCaptureUnjoined));
}

#[test]
fn a_fork_that_recorded_no_work_needs_no_rejoin() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let (s, f) = (rt.stream_create(0).unwrap(), rt.stream_create(0).unwrap());
    rt.stream_begin_capture(s, GLOBAL).unwrap();
    launch(rt, s, k.inc, addr32(c)).unwrap();
    fork(rt, s, f);
    launch(rt, s, k.inc, addr32(c)).unwrap();
    let g = rt.stream_end_capture(s).unwrap();
    assert_eq!(rt.graph_node_count(g), Ok(2));
    assert_eq!(status(rt, f), CaptureStatus::None);
}

#[test]
fn capture_apis_on_a_stale_stream_are_context_is_destroyed() {
    let rt = leaked_runtime();
    let s = rt.stream_create(0).unwrap();
    rt.stream_destroy(s).unwrap();
    assert_eq!(rt.stream_end_capture(s), Err(Error::ContextIsDestroyed));
    assert_eq!(rt.stream_capture_info(s).err(), Some(Error::ContextIsDestroyed));
    assert_eq!(rt.stream_update_capture_dependencies(s, &[], ADD), Err(Error::ContextIsDestroyed));
}

// ----- ids and graph shapes ------------------------------------------------------------------

#[test]
fn capture_ids_are_unique_and_increasing() {
    let rt = leaked_runtime();
    let (a, b) = (rt.stream_create(0).unwrap(), rt.stream_create(0).unwrap());
    let mut last = 0;
    for _ in 0..5 {
        rt.stream_begin_capture(a, GLOBAL).unwrap();
        rt.stream_begin_capture(b, RELAXED).unwrap();
        let ia = rt.stream_capture_info(a).unwrap().id;
        let ib = rt.stream_capture_info(b).unwrap().id;
        assert!(ia > last && ib > ia, "ids {last} < {ia} < {ib}");
        last = ib;
        end_and_drop(rt, a);
        end_and_drop(rt, b);
    }
}

#[test]
fn empty_capture_gives_an_empty_graph() {
    let rt = leaked_runtime();
    let s = rt.stream_create(0).unwrap();
    rt.stream_begin_capture(s, GLOBAL).unwrap();
    let g = rt.stream_end_capture(s).unwrap();
    assert_ne!(g, GraphHandle::NULL);
    assert_eq!(rt.graph_node_count(g), Ok(0));
    assert_eq!(edges(rt, g), vec![]);
    assert_eq!(status(rt, s), CaptureStatus::None);
    rt.graph_destroy(g).unwrap();
}

#[test]
fn linear_capture_gives_a_chain_of_kernel_nodes() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let s = rt.stream_create(0).unwrap();
    rt.stream_begin_capture(s, GLOBAL).unwrap();
    for _ in 0..3 {
        launch(rt, s, k.inc, addr32(c)).unwrap();
    }
    let g = rt.stream_end_capture(s).unwrap();
    assert_eq!(rt.graph_node_count(g), Ok(3));
    assert_eq!(edges(rt, g), vec![(0, 1), (1, 2)]);
    for n in 0..3 {
        assert!(is_kernel(rt.graph_node_kind(g, NodeId(n)).unwrap(), k.inc));
    }
    assert_eq!(c.load(Ordering::SeqCst), 0, "captured kernels do not run");
}

#[test]
fn every_async_operation_becomes_a_node_and_none_runs() {
    let rt = leaked_runtime();
    let s = rt.stream_create(0).unwrap();
    let q = queue_of(rt, s);
    let (src, dst, v) = (cell32(7), cell32(0), cell64(0));
    let log = HostLog::watching(0);
    rt.stream_begin_capture(s, GLOBAL).unwrap();
    rt.memcpy_async(s, addr32(dst), addr32(src), 4).unwrap();
    rt.memset_async(s, addr32(dst), 9, 4, 1).unwrap();
    rt.launch_host_func(s, log.plain()).unwrap();
    rt.write_value64(s, addr64(v), 5, 0).unwrap();
    rt.wait_value64(s, addr64(v), 5, 0, u64::MAX).unwrap();
    rt.marker(s).unwrap();
    let g = rt.stream_end_capture(s).unwrap();
    assert_eq!(rt.graph_node_count(g), Ok(6));
    assert_eq!(edges(rt, g), vec![(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]);
    let kinds: Vec<&str> = (0..6).map(|n| rt.graph_node_kind(g, NodeId(n)).unwrap().name()).collect();
    assert_eq!(kinds, ["kernel", "kernel", "host", "kernel", "wait-value", "empty"]);
    rt.stream_synchronize(s).unwrap();
    assert_eq!((dst.load(Ordering::SeqCst), v.load(Ordering::SeqCst), log.calls()), (0, 0, 0));
    assert!(packets(rt.backend()).iter().all(|p| p.queue != q), "nothing was published on the stream");
}

#[test]
fn fork_and_join_through_events_gives_a_diamond() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let (s1, s2) = (rt.stream_create(0).unwrap(), rt.stream_create(0).unwrap());
    rt.stream_begin_capture(s1, GLOBAL).unwrap();
    launch(rt, s1, k.inc, addr32(c)).unwrap(); // A = 0
    let e1 = fork(rt, s1, s2);
    assert_eq!(status(rt, s2), CaptureStatus::Active);
    let (i1, i2) = (rt.stream_capture_info(s1).unwrap(), rt.stream_capture_info(s2).unwrap());
    assert_eq!((i2.id, i2.graph), (i1.id, i1.graph), "the fork shares the capture");
    launch(rt, s1, k.double, addr32(c)).unwrap(); // B = 1
    launch(rt, s2, k.fail, addr32(c)).unwrap(); // C = 2
    join(rt, s2, s1);
    launch(rt, s1, k.inc, addr32(c)).unwrap(); // D = 3
    let g = rt.stream_end_capture(s1).unwrap();
    assert_eq!(rt.graph_node_count(g), Ok(4));
    assert_eq!(edges(rt, g), vec![(0, 1), (0, 2), (1, 3), (2, 3)]);
    let objects = [k.inc, k.double, k.fail, k.inc];
    for (n, o) in objects.into_iter().enumerate() {
        assert!(is_kernel(rt.graph_node_kind(g, NodeId(n as u16)).unwrap(), o), "node {n}");
    }
    assert_eq!(status(rt, s1), CaptureStatus::None);
    assert_eq!(status(rt, s2), CaptureStatus::None);
    // The captured event lost its capture: querying it is fine now.
    assert_eq!(rt.event_query(e1), Ok(()));
}

#[test]
fn concurrent_joins_keep_the_origin_tail() {
    let rt = leaked_runtime();
    let kern = register(rt.backend());
    let c = cell32(0);
    const FORKS: usize = 3;
    let s = rt.stream_create(0).unwrap();
    let forks: Vec<StreamHandle> = (0..FORKS).map(|_| rt.stream_create(0).unwrap()).collect();
    rt.stream_begin_capture(s, GLOBAL).unwrap();
    launch(rt, s, kern.inc, addr32(c)).unwrap();
    let e = rt.event_create(0).unwrap();
    rt.event_record(e, s, 0).unwrap();
    for &f in &forks {
        rt.stream_wait_event(f, e, 0).unwrap();
        launch(rt, f, kern.inc, addr32(c)).unwrap();
    }
    for &f in &forks {
        join(rt, f, s);
    }
    launch(rt, s, kern.inc, addr32(c)).unwrap();
    let g = rt.stream_end_capture(s).unwrap();
    assert_eq!(rt.graph_node_count(g), Ok(FORKS + 2));
    let e = edges(rt, g);
    assert_eq!(e.len(), 2 * FORKS + 1);
    let last = (FORKS + 1) as u16;
    assert!(e.contains(&(0, last)), "the origin's own tail survives the joins");
    for f in 1..=FORKS as u16 {
        assert!(e.contains(&(0, f)) && e.contains(&(f, last)));
    }
}

#[test]
fn self_wait_right_after_a_record_adds_nothing() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let s = rt.stream_create(0).unwrap();
    rt.stream_begin_capture(s, GLOBAL).unwrap();
    launch(rt, s, k.inc, addr32(c)).unwrap();
    let e = rt.event_create(0).unwrap();
    rt.event_record(e, s, 0).unwrap();
    rt.stream_wait_event(s, e, 0).unwrap();
    launch(rt, s, k.inc, addr32(c)).unwrap();
    let g = rt.stream_end_capture(s).unwrap();
    assert_eq!(rt.graph_node_count(g), Ok(2));
    assert_eq!(edges(rt, g), vec![(0, 1)]);
}

#[test]
fn self_wait_after_more_work_adds_a_redundant_edge() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let s = rt.stream_create(0).unwrap();
    rt.stream_begin_capture(s, GLOBAL).unwrap();
    launch(rt, s, k.inc, addr32(c)).unwrap();
    let e = rt.event_create(0).unwrap();
    rt.event_record(e, s, 0).unwrap();
    launch(rt, s, k.inc, addr32(c)).unwrap();
    rt.stream_wait_event(s, e, 0).unwrap();
    launch(rt, s, k.inc, addr32(c)).unwrap();
    launch(rt, s, k.inc, addr32(c)).unwrap();
    let g = rt.stream_end_capture(s).unwrap();
    assert_eq!(rt.graph_node_count(g), Ok(4));
    assert_eq!(edges(rt, g), vec![(0, 1), (0, 2), (1, 2), (2, 3)]);
}

#[test]
fn external_record_and_wait_add_event_nodes() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let (s, f) = (rt.stream_create(0).unwrap(), rt.stream_create(0).unwrap());
    let outside = rt.event_create(0).unwrap();
    rt.stream_begin_capture(s, GLOBAL).unwrap();
    launch(rt, s, k.inc, addr32(c)).unwrap(); // 0
    let e = rt.event_create(0).unwrap();
    rt.event_record(e, s, EXTERNAL).unwrap(); // 1: event-record node after 0
    rt.stream_wait_event(f, e, 0).unwrap(); // the fork's deps: {1}
    launch(rt, f, k.inc, addr32(c)).unwrap(); // 2
    join(rt, f, s);
    rt.stream_wait_event(s, outside, EXTERNAL).unwrap(); // 3: event-wait node after {1, 2}
    let g = rt.stream_end_capture(s).unwrap();
    assert_eq!(rt.graph_node_count(g), Ok(4));
    assert!(matches!(rt.graph_node_kind(g, NodeId(1)), Ok(NodeKind::EventRecord(r)) if r == e.0));
    assert!(matches!(rt.graph_node_kind(g, NodeId(3)), Ok(NodeKind::EventWait(r)) if r == outside.0));
    assert_eq!(edges(rt, g), vec![(0, 1), (1, 2), (1, 3), (2, 3)]);
}

// ----- capture info and dependency updates -----------------------------------------------------

#[test]
fn capture_info_reports_status_and_id_only_while_active() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let s = rt.stream_create(0).unwrap();
    let none = rt.stream_capture_info(s).unwrap();
    assert_eq!((none.status, none.id, none.graph, none.dependencies.len()), (CaptureStatus::None, 0, 0, 0));
    rt.stream_begin_capture(s, GLOBAL).unwrap();
    let active = rt.stream_capture_info(s).unwrap();
    assert_eq!(active.status, CaptureStatus::Active);
    assert_ne!(active.id, 0);
    assert_ne!(active.graph, 0);
    assert_eq!(active.dependencies.len(), 0, "nothing captured yet");
    launch(rt, s, k.inc, addr32(c)).unwrap();
    launch(rt, s, k.inc, addr32(c)).unwrap();
    let linear = rt.stream_capture_info(s).unwrap();
    assert_eq!(linear.id, active.id);
    assert_eq!(linear.dependencies.as_slice(), &[NodeId(1)]);
    assert_eq!(rt.stream_query(s), Err(Error::StreamCaptureUnsupported));
    let inval = rt.stream_capture_info(s).unwrap();
    assert_eq!(inval.status, CaptureStatus::Invalidated);
    assert_eq!((inval.id, inval.graph, inval.dependencies.len()), (0, 0, 0));
    assert_eq!(rt.stream_end_capture(s), Err(Error::StreamCaptureInvalidated));
}

#[test]
fn capture_info_counts_two_dependencies_after_joining_two_forks() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let (s, a, b) = (rt.stream_create(0).unwrap(), rt.stream_create(0).unwrap(), rt.stream_create(0).unwrap());
    rt.stream_begin_capture(s, GLOBAL).unwrap();
    let e = rt.event_create(0).unwrap();
    rt.event_record(e, s, 0).unwrap();
    rt.stream_wait_event(a, e, 0).unwrap();
    rt.stream_wait_event(b, e, 0).unwrap();
    launch(rt, a, k.inc, addr32(c)).unwrap();
    launch(rt, b, k.inc, addr32(c)).unwrap();
    join(rt, a, s);
    join(rt, b, s);
    let info = rt.stream_capture_info(s).unwrap();
    assert_eq!(info.dependencies.len(), 2);
    assert!(info.dependencies.contains(NodeId(0)) && info.dependencies.contains(NodeId(1)));
    end_and_drop(rt, s);
}

#[test]
fn update_dependencies_add_appends_without_duplicates() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let s = rt.stream_create(0).unwrap();
    rt.stream_begin_capture(s, GLOBAL).unwrap();
    launch(rt, s, k.inc, addr32(c)).unwrap(); // 0
    launch(rt, s, k.inc, addr32(c)).unwrap(); // 1
    rt.stream_update_capture_dependencies(s, &[NodeId(0), NodeId(1)], ADD).unwrap();
    let deps = rt.stream_capture_info(s).unwrap().dependencies;
    assert_eq!(deps.as_slice(), &[NodeId(1), NodeId(0)]);
    launch(rt, s, k.inc, addr32(c)).unwrap(); // 2 after {0, 1}
    let g = rt.stream_end_capture(s).unwrap();
    assert_eq!(edges(rt, g), vec![(0, 1), (0, 2), (1, 2)]);
}

#[test]
fn update_dependencies_set_replaces_and_the_old_set_is_not_unjoined() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let s = rt.stream_create(0).unwrap();
    rt.stream_begin_capture(s, GLOBAL).unwrap();
    launch(rt, s, k.inc, addr32(c)).unwrap(); // 0
    launch(rt, s, k.inc, addr32(c)).unwrap(); // 1
    rt.stream_update_capture_dependencies(s, &[NodeId(0)], SET).unwrap();
    assert_eq!(rt.stream_capture_info(s).unwrap().dependencies.as_slice(), &[NodeId(0)]);
    launch(rt, s, k.inc, addr32(c)).unwrap(); // 2 after {0}; node 1 stays a leaf
    let g = rt.stream_end_capture(s).unwrap();
    assert_eq!(edges(rt, g), vec![(0, 1), (0, 2)]);
}

#[test]
fn update_dependencies_errors() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let s = rt.stream_create(0).unwrap();
    assert_eq!(rt.stream_update_capture_dependencies(s, &[], ADD), Err(Error::IllegalState));
    assert_eq!(rt.stream_update_capture_dependencies(NULL, &[], ADD), Err(Error::IllegalState));
    rt.stream_begin_capture(s, GLOBAL).unwrap();
    launch(rt, s, k.inc, addr32(c)).unwrap();
    assert_eq!(rt.stream_update_capture_dependencies(s, &[NodeId(0)], 2), Err(Error::InvalidValue));
    assert_eq!(rt.stream_update_capture_dependencies(s, &[NodeId(5)], ADD), Err(Error::InvalidValue));
    assert_eq!(rt.stream_update_capture_dependencies(s, &[NodeId(0), NodeId(0)], SET), Err(Error::InvalidValue));
    // Nothing changed.
    assert_eq!(rt.stream_capture_info(s).unwrap().dependencies.as_slice(), &[NodeId(0)]);
    end_and_drop(rt, s);
    assert_eq!(rt.stream_update_capture_dependencies(s, &[], SET), Err(Error::IllegalState));
}

#[test]
fn exchange_capture_mode_returns_the_previous_mode() {
    let rt = leaked_mt_runtime();
    assert_eq!(rt.thread_exchange_capture_mode(RELAXED), Ok(CaptureMode::Global), "initially Global");
    assert_eq!(rt.thread_exchange_capture_mode(THREAD_LOCAL), Ok(CaptureMode::Relaxed));
    assert_eq!(rt.thread_exchange_capture_mode(3), Err(Error::InvalidValue));
    assert_eq!(rt.thread_exchange_capture_mode(GLOBAL), Ok(CaptureMode::ThreadLocal), "unchanged by the error");
    // The mode is per thread.
    rt.thread_exchange_capture_mode(RELAXED).unwrap();
    std::thread::scope(|sc| {
        sc.spawn(|| assert_eq!(rt.thread_exchange_capture_mode(GLOBAL), Ok(CaptureMode::Global))).join().unwrap();
    });
    assert_eq!(rt.thread_exchange_capture_mode(GLOBAL), Ok(CaptureMode::Relaxed));
}

// ----- cross-capture waits -----------------------------------------------------------------------

#[test]
fn waiting_across_two_live_captures_is_merge_and_invalidates_both() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let (s1, s2, f) = (rt.stream_create(0).unwrap(), rt.stream_create(0).unwrap(), rt.stream_create(0).unwrap());
    rt.stream_begin_capture(s1, GLOBAL).unwrap();
    rt.stream_begin_capture(s2, RELAXED).unwrap();
    fork(rt, s2, f);
    launch(rt, s1, k.inc, addr32(c)).unwrap();
    launch(rt, s2, k.inc, addr32(c)).unwrap();
    let e1 = rt.event_create(0).unwrap();
    rt.event_record(e1, s1, 0).unwrap();
    assert_eq!(rt.stream_wait_event(s2, e1, 0), Err(Error::StreamCaptureMerge));
    for s in [s1, s2, f] {
        assert_eq!(status(rt, s), CaptureStatus::Invalidated);
    }
    assert_eq!(rt.stream_end_capture(s1), Err(Error::StreamCaptureInvalidated));
    assert_eq!(rt.stream_end_capture(s2), Err(Error::StreamCaptureInvalidated));
    for s in [s1, s2, f] {
        assert_eq!(status(rt, s), CaptureStatus::None);
    }
}

#[test]
fn idle_stream_waiting_on_an_invalidated_capture_is_invalid_value_and_not_enrolled() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let (s, idle) = (rt.stream_create(0).unwrap(), rt.stream_create(0).unwrap());
    rt.stream_begin_capture(s, GLOBAL).unwrap();
    launch(rt, s, k.inc, addr32(c)).unwrap();
    let e = rt.event_create(0).unwrap();
    rt.event_record(e, s, 0).unwrap();
    assert_eq!(rt.stream_query(s), Err(Error::StreamCaptureUnsupported));
    assert_eq!(rt.stream_wait_event(idle, e, 0), Err(Error::InvalidValue));
    assert_eq!(status(rt, idle), CaptureStatus::None);
    // Work on it still runs.
    launch(rt, idle, k.inc, addr32(c)).unwrap();
    rt.stream_synchronize(idle).unwrap();
    assert_eq!(c.load(Ordering::SeqCst), 1);
}

#[test]
fn invalidated_stream_waiting_on_any_event_is_invalidated() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let (s, other) = (rt.stream_create(0).unwrap(), rt.stream_create(0).unwrap());
    let plain = rt.event_create(0).unwrap();
    launch(rt, other, k.inc, addr32(c)).unwrap();
    rt.event_record(plain, other, 0).unwrap();
    rt.stream_begin_capture(s, GLOBAL).unwrap();
    let mine = rt.event_create(0).unwrap();
    rt.event_record(mine, s, 0).unwrap();
    rt.stream_begin_capture(other, RELAXED).unwrap();
    let theirs = rt.event_create(0).unwrap();
    rt.event_record(theirs, other, 0).unwrap();
    assert_eq!(rt.stream_query(s), Err(Error::StreamCaptureUnsupported));
    for e in [plain, mine, theirs] {
        assert_eq!(rt.stream_wait_event(s, e, 0), Err(Error::StreamCaptureInvalidated));
        assert_eq!(status(rt, s), CaptureStatus::Invalidated);
    }
    assert_eq!(status(rt, other), CaptureStatus::Active, "the other capture is untouched");
    end_and_drop(rt, other);
}

#[test]
fn waiting_on_work_recorded_before_the_capture_of_a_capturing_stream_is_isolation() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let (s, w) = (rt.stream_create(0).unwrap(), rt.stream_create(0).unwrap());
    let g = cell32(0);
    rt.wait_value32(s, addr32(g), 1, 1, u32::MAX).unwrap();
    launch(rt, s, k.inc, addr32(c)).unwrap();
    let e = rt.event_create(0).unwrap();
    rt.event_record(e, s, 0).unwrap();
    rt.stream_begin_capture(s, GLOBAL).unwrap();
    rt.stream_begin_capture(w, GLOBAL).unwrap();
    assert_eq!(rt.stream_wait_event(w, e, 0), Err(Error::StreamCaptureIsolation));
    g.store(1, Ordering::SeqCst);
    end_and_drop(rt, w);
    end_and_drop(rt, s);
    rt.stream_synchronize(s).unwrap();
    assert_eq!(c.load(Ordering::SeqCst), 1);
}

// ----- prohibited calls --------------------------------------------------------------------------

#[test]
fn sync_or_query_of_a_capturing_stream_is_unsupported_and_invalidates_in_every_mode() {
    for mode in MODES {
        for query in [false, true] {
            for flags in [0, NB] {
                let rt = leaked_runtime();
                let (s, f) = (rt.stream_create(flags).unwrap(), rt.stream_create(0).unwrap());
                rt.stream_begin_capture(s, mode).unwrap();
                fork(rt, s, f);
                let r = if query { rt.stream_query(s) } else { rt.stream_synchronize(s) };
                assert_eq!(r, Err(Error::StreamCaptureUnsupported), "mode {mode} query {query}");
                assert_eq!(status(rt, s), CaptureStatus::Invalidated);
                assert_eq!(status(rt, f), CaptureStatus::Invalidated);
                assert_eq!(rt.stream_end_capture(s), Err(Error::StreamCaptureInvalidated));
            }
        }
    }
}

#[test]
fn sync_of_an_idle_stream_follows_the_thread_mode_rule() {
    // The capturing thread, in its own Global or ThreadLocal capture: prohibited.
    for mode in [GLOBAL, THREAD_LOCAL] {
        let rt = leaked_runtime();
        let (s, idle) = (rt.stream_create(0).unwrap(), rt.stream_create(0).unwrap());
        rt.stream_begin_capture(s, mode).unwrap();
        assert_eq!(rt.stream_synchronize(idle), Err(Error::StreamCaptureUnsupported));
        assert_eq!(rt.stream_end_capture(s), Err(Error::StreamCaptureInvalidated));
    }
    // Its own Relaxed capture restricts nothing.
    let rt = leaked_runtime();
    let (s, idle) = (rt.stream_create(0).unwrap(), rt.stream_create(0).unwrap());
    rt.stream_begin_capture(s, RELAXED).unwrap();
    assert_eq!(rt.stream_synchronize(idle), Ok(()));
    assert_eq!(rt.stream_query(idle), Ok(()));
    end_and_drop(rt, s);
}

#[test]
fn another_threads_global_capture_prohibits_syncing_an_idle_stream() {
    for (mode, prohibited) in [(GLOBAL, true), (THREAD_LOCAL, false), (RELAXED, false)] {
        let rt = leaked_mt_runtime();
        let s = rt.stream_create(0).unwrap();
        rt.stream_begin_capture(s, mode).unwrap();
        std::thread::scope(|sc| {
            sc.spawn(|| {
                let own = rt.stream_create(0).unwrap();
                let expect = if prohibited { Err(Error::StreamCaptureUnsupported) } else { Ok(()) };
                assert_eq!(rt.stream_synchronize(own), expect, "capture mode {mode}");
            })
            .join()
            .unwrap();
        });
        if prohibited {
            assert_eq!(rt.stream_end_capture(s), Err(Error::StreamCaptureInvalidated));
        } else {
            end_and_drop(rt, s);
        }
    }
}

#[test]
fn device_synchronize_during_any_capture_is_unsupported_and_invalidates_all() {
    let rt = leaked_runtime();
    let (a, b) = (rt.stream_create(0).unwrap(), rt.stream_create(NB).unwrap());
    rt.stream_begin_capture(a, GLOBAL).unwrap();
    rt.stream_begin_capture(b, RELAXED).unwrap();
    rt.thread_exchange_capture_mode(RELAXED).unwrap();
    assert_eq!(rt.device_synchronize(), Err(Error::StreamCaptureUnsupported));
    assert_eq!(status(rt, a), CaptureStatus::Invalidated);
    assert_eq!(status(rt, b), CaptureStatus::Invalidated);
    assert_eq!(rt.stream_end_capture(a), Err(Error::StreamCaptureInvalidated));
    assert_eq!(rt.stream_end_capture(b), Err(Error::StreamCaptureInvalidated));
    assert_eq!(rt.device_synchronize(), Ok(()));
}

#[test]
fn synchronous_copies_during_any_capture_are_implicit_and_invalidate_all() {
    for memset in [false, true] {
        let rt = leaked_mt_runtime();
        let (a, b) = (rt.stream_create(NB).unwrap(), rt.stream_create(NB).unwrap());
        let (src, dst) = (cell32(5), cell32(0));
        let step = std::sync::Barrier::new(2);
        rt.stream_begin_capture(a, RELAXED).unwrap();
        std::thread::scope(|sc| {
            // A thread-local, non-blocking capture on another thread counts too (HIP differs
            // from CUDA here).
            sc.spawn(|| {
                rt.stream_begin_capture(b, THREAD_LOCAL).unwrap();
                step.wait();
                step.wait();
                assert_eq!(rt.stream_end_capture(b), Err(Error::StreamCaptureInvalidated));
            });
            step.wait();
            let r = if memset { rt.memset(addr32(dst), 1, 4) } else { rt.memcpy(addr32(dst), addr32(src), 4) };
            assert_eq!(r, Err(Error::StreamCaptureImplicit));
            assert_eq!(dst.load(Ordering::SeqCst), 0, "nothing was copied");
            assert_eq!(status(rt, a), CaptureStatus::Invalidated);
            assert_eq!(status(rt, b), CaptureStatus::Invalidated);
            step.wait();
        });
        assert_eq!(rt.stream_end_capture(a), Err(Error::StreamCaptureInvalidated));
        // With no capture left, they work.
        rt.memcpy(addr32(dst), addr32(src), 4).unwrap();
        assert_eq!(dst.load(Ordering::SeqCst), 5);
    }
}

#[test]
fn query_or_sync_of_a_captured_event_is_captured_event_and_invalidates() {
    for (sync, mode) in [(false, GLOBAL), (true, RELAXED), (false, RELAXED), (true, THREAD_LOCAL)] {
        let rt = leaked_runtime();
        let (s, f) = (rt.stream_create(0).unwrap(), rt.stream_create(0).unwrap());
        rt.stream_begin_capture(s, mode).unwrap();
        let e = fork(rt, s, f);
        let r = if sync { rt.event_synchronize(e) } else { rt.event_query(e) };
        assert_eq!(r, Err(Error::CapturedEvent));
        assert_eq!(status(rt, s), CaptureStatus::Invalidated);
        assert_eq!(status(rt, f), CaptureStatus::Invalidated);
        assert_eq!(rt.stream_end_capture(s), Err(Error::StreamCaptureInvalidated));
        // After the teardown the event is an ordinary one again.
        assert_eq!(rt.event_query(e), Ok(()));
    }
}

#[test]
fn query_of_an_event_recorded_before_a_global_capture_is_unsupported() {
    let rt = leaked_runtime();
    let s = rt.stream_create(0).unwrap();
    let e = rt.event_create(0).unwrap();
    rt.event_record(e, s, 0).unwrap();
    rt.stream_begin_capture(s, GLOBAL).unwrap();
    assert_eq!(rt.event_query(e), Err(Error::StreamCaptureUnsupported));
    assert_eq!(rt.stream_end_capture(s), Err(Error::StreamCaptureInvalidated));
}

#[test]
fn malloc_follows_the_thread_mode_rule_across_threads() {
    // (mode of the other thread's capture, mode of the calling thread, prohibited)
    let cases = [
        (GLOBAL, GLOBAL, true),
        (THREAD_LOCAL, GLOBAL, false),
        (RELAXED, GLOBAL, false),
        (GLOBAL, RELAXED, false),
        (GLOBAL, THREAD_LOCAL, false),
    ];
    for (capture, caller, prohibited) in cases {
        let rt = leaked_mt_runtime();
        let s = rt.stream_create(0).unwrap();
        rt.stream_begin_capture(s, capture).unwrap();
        std::thread::scope(|sc| {
            sc.spawn(|| {
                rt.thread_exchange_capture_mode(caller).unwrap();
                let r = rt.malloc(64);
                if prohibited {
                    assert_eq!(r, Err(Error::StreamCaptureUnsupported), "capture {capture} caller {caller}");
                } else {
                    let a = r.unwrap();
                    rt.free(a).unwrap();
                }
            })
            .join()
            .unwrap();
        });
        let expect = if prohibited { CaptureStatus::Invalidated } else { CaptureStatus::Active };
        assert_eq!(status(rt, s), expect, "capture {capture} caller {caller}");
        if prohibited {
            assert_eq!(rt.stream_end_capture(s), Err(Error::StreamCaptureInvalidated));
        } else {
            end_and_drop(rt, s);
        }
    }
}

#[test]
fn malloc_on_the_capturing_thread_is_prohibited_unless_relaxed() {
    for (mode, prohibited) in [(GLOBAL, true), (THREAD_LOCAL, true), (RELAXED, false)] {
        let rt = leaked_runtime();
        let s = rt.stream_create(0).unwrap();
        rt.stream_begin_capture(s, mode).unwrap();
        match rt.host_malloc(16) {
            Err(e) => {
                assert!(prohibited);
                assert_eq!(e, Error::StreamCaptureUnsupported);
                assert_eq!(rt.stream_end_capture(s), Err(Error::StreamCaptureInvalidated));
            }
            Ok(a) => {
                assert!(!prohibited, "mode {mode}");
                rt.free(a).unwrap();
                end_and_drop(rt, s);
            }
        }
    }
}

#[test]
fn stream_callback_on_a_capturing_stream_is_unsupported_and_invalidates() {
    for mode in MODES {
        let rt = leaked_runtime();
        let (s, f) = (rt.stream_create(0).unwrap(), rt.stream_create(0).unwrap());
        let log = HostLog::watching(0);
        rt.stream_begin_capture(s, mode).unwrap();
        fork(rt, s, f);
        assert_eq!(rt.launch_host_func(f, log.callback(f)), Err(Error::StreamCaptureUnsupported));
        assert_eq!(status(rt, s), CaptureStatus::Invalidated);
        assert_eq!(status(rt, f), CaptureStatus::Invalidated);
        // On the invalidated stream it is still unsupported.
        assert_eq!(rt.launch_host_func(s, log.callback(s)), Err(Error::StreamCaptureUnsupported));
        assert_eq!(rt.stream_end_capture(s), Err(Error::StreamCaptureInvalidated));
        assert_eq!(log.calls(), 0);
    }
}

#[test]
fn stream_callback_on_the_legacy_stream_during_a_blocking_capture_is_implicit() {
    for n in [NULL, LEGACY] {
        let rt = leaked_runtime();
        let (blocking, nb) = (rt.stream_create(0).unwrap(), rt.stream_create(NB).unwrap());
        let log = HostLog::watching(0);
        rt.stream_begin_capture(nb, RELAXED).unwrap();
        // Only a non-blocking stream captures: allowed.
        rt.launch_host_func(n, log.callback(n)).unwrap();
        rt.stream_synchronize(LEGACY).unwrap();
        assert_eq!(log.calls(), 1);
        rt.stream_begin_capture(blocking, GLOBAL).unwrap();
        assert_eq!(rt.launch_host_func(n, log.callback(n)), Err(Error::StreamCaptureImplicit));
        assert_eq!(status(rt, blocking), CaptureStatus::Invalidated);
        assert_eq!(status(rt, nb), CaptureStatus::Invalidated, "every capture");
        rt.stream_synchronize(LEGACY).unwrap();
        assert_eq!(log.calls(), 1);
    }
}

#[test]
fn capture_status_of_the_legacy_stream_during_a_blocking_capture_is_implicit_and_harmless() {
    let rt = leaked_runtime();
    let (blocking, nb) = (rt.stream_create(0).unwrap(), rt.stream_create(NB).unwrap());
    rt.stream_begin_capture(nb, GLOBAL).unwrap();
    for n in [NULL, LEGACY] {
        assert_eq!(rt.stream_is_capturing(n), Ok(CaptureStatus::None));
        assert_eq!(rt.stream_capture_info(n).unwrap().status, CaptureStatus::None);
    }
    rt.stream_begin_capture(blocking, GLOBAL).unwrap();
    for n in [NULL, LEGACY] {
        assert_eq!(rt.stream_is_capturing(n), Err(Error::StreamCaptureImplicit));
        assert_eq!(rt.stream_capture_info(n).err(), Some(Error::StreamCaptureImplicit));
    }
    assert_eq!(status(rt, blocking), CaptureStatus::Active, "a pure query invalidates nothing");
    assert_eq!(status(rt, nb), CaptureStatus::Active);
    end_and_drop(rt, blocking);
    end_and_drop(rt, nb);
}

#[test]
fn legacy_stream_work_during_a_blocking_capture_runs_and_is_not_captured() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let log = HostLog::watching(addr32(c));
    let s = rt.stream_create(0).unwrap();
    rt.stream_begin_capture(s, GLOBAL).unwrap();
    launch(rt, s, k.inc, addr32(c)).unwrap();
    for n in [NULL, LEGACY] {
        launch(rt, n, k.inc, addr32(c)).unwrap();
        rt.memset_async(n, addr32(cell32(0)), 3, 4, 1).unwrap();
    }
    rt.launch_host_func(NULL, log.plain()).unwrap();
    rt.stream_synchronize(NULL).unwrap();
    assert_eq!(rt.stream_query(NULL), Ok(()));
    assert_eq!(c.load(Ordering::SeqCst), 2, "the null-stream kernels ran, the captured one did not");
    assert_eq!((log.calls(), log.seen()), (1, 2));
    assert_eq!(status(rt, s), CaptureStatus::Active);
    let g = rt.stream_end_capture(s).unwrap();
    assert_eq!(rt.graph_node_count(g), Ok(1));
}

#[test]
fn async_work_on_an_invalidated_stream_is_invalidated() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let (c, v) = (cell32(0), cell64(0));
    let (s, f) = (rt.stream_create(0).unwrap(), rt.stream_create(0).unwrap());
    let log = HostLog::watching(0);
    rt.stream_begin_capture(s, GLOBAL).unwrap();
    fork(rt, s, f);
    launch(rt, s, k.inc, addr32(c)).unwrap();
    assert_eq!(rt.stream_query(s), Err(Error::StreamCaptureUnsupported));
    for m in [s, f] {
        let ci = Err(Error::StreamCaptureInvalidated);
        assert_eq!(launch(rt, m, k.inc, addr32(c)), ci);
        assert_eq!(rt.memcpy_async(m, addr32(c), addr32(cell32(1)), 4), ci);
        assert_eq!(rt.memset_async(m, addr32(c), 1, 4, 1), ci);
        assert_eq!(rt.launch_host_func(m, log.plain()), ci);
        assert_eq!(rt.write_value64(m, addr64(v), 1, 0), ci);
        assert_eq!(rt.wait_value64(m, addr64(v), 1, 0, u64::MAX), ci);
        assert_eq!(rt.marker(m), ci);
    }
    assert_eq!(rt.stream_end_capture(s), Err(Error::StreamCaptureInvalidated));
    rt.device_synchronize().unwrap();
    assert_eq!((c.load(Ordering::SeqCst), v.load(Ordering::SeqCst), log.calls()), (0, 0, 0));
}

#[test]
fn async_work_on_a_stale_stream_while_capturing_is_invalid_value() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let (s, dead) = (rt.stream_create(0).unwrap(), rt.stream_create(0).unwrap());
    rt.stream_destroy(dead).unwrap();
    assert_eq!(launch(rt, dead, k.inc, addr32(c)), Err(Error::ContextIsDestroyed));
    rt.stream_begin_capture(s, RELAXED).unwrap();
    assert_eq!(launch(rt, dead, k.inc, addr32(c)), Err(Error::InvalidValue));
    assert_eq!(rt.memset_async(dead, addr32(c), 1, 4, 1), Err(Error::InvalidValue));
    assert_eq!(status(rt, s), CaptureStatus::Active);
    end_and_drop(rt, s);
}

// ----- destroying members -------------------------------------------------------------------------

#[test]
fn destroying_the_origin_discards_the_capture_and_its_graph() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let (s, f) = (rt.stream_create(0).unwrap(), rt.stream_create(0).unwrap());
    rt.stream_begin_capture(s, GLOBAL).unwrap();
    launch(rt, s, k.inc, addr32(c)).unwrap();
    fork(rt, s, f);
    let g = capture_graph(rt, s);
    assert_eq!(rt.graph_node_count(g), Ok(1));
    rt.stream_destroy(s).unwrap();
    assert_eq!(rt.graph_destroy(g), Err(Error::InvalidValue));
    assert_eq!(rt.graph_node_count(g), Err(Error::InvalidValue));
    assert_eq!(status(rt, f), CaptureStatus::None);
    rt.stream_begin_capture(f, GLOBAL).unwrap();
    end_and_drop(rt, f);
}

#[test]
fn destroying_a_fork_leaves_the_capture_running() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let (s, f) = (rt.stream_create(0).unwrap(), rt.stream_create(0).unwrap());
    rt.stream_begin_capture(s, GLOBAL).unwrap();
    launch(rt, s, k.inc, addr32(c)).unwrap();
    fork(rt, s, f);
    launch(rt, f, k.inc, addr32(c)).unwrap();
    join(rt, f, s);
    rt.stream_destroy(f).unwrap();
    assert_eq!(status(rt, s), CaptureStatus::Active);
    launch(rt, s, k.inc, addr32(c)).unwrap();
    let g = rt.stream_end_capture(s).unwrap();
    assert_eq!(rt.graph_node_count(g), Ok(3));
    assert_eq!(edges(rt, g), vec![(0, 1), (0, 2), (1, 2)]);
}

#[test]
fn destroying_a_middle_fork_keeps_its_children_enrolled() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let (s, mid, child) = (rt.stream_create(0).unwrap(), rt.stream_create(0).unwrap(), rt.stream_create(0).unwrap());
    rt.stream_begin_capture(s, GLOBAL).unwrap();
    launch(rt, s, k.inc, addr32(c)).unwrap();
    fork(rt, s, mid);
    fork(rt, mid, child);
    rt.stream_destroy(mid).unwrap();
    assert_eq!(status(rt, child), CaptureStatus::Active);
    assert_eq!(rt.stream_capture_info(child).unwrap().id, rt.stream_capture_info(s).unwrap().id);
    launch(rt, child, k.inc, addr32(c)).unwrap();
    join(rt, child, s);
    let g = rt.stream_end_capture(s).unwrap();
    assert_eq!(edges(rt, g), vec![(0, 1)]);
    assert_eq!(status(rt, child), CaptureStatus::None);
}

#[test]
fn capture_to_graph_keeps_existing_nodes_as_manual_nodes() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let s = rt.stream_create(0).unwrap();
    let g = rt.graph_create().unwrap();
    let arg = addr32(c).to_le_bytes();
    let a = rt.graph_add_kernel_node(g, &[], &kernel_launch(k.inc, &arg)).unwrap();
    let b = rt.graph_add_empty_node(g, &[]).unwrap();
    rt.stream_begin_capture_to_graph(s, g, &[a], GLOBAL).unwrap();
    assert_eq!(rt.stream_capture_info(s).unwrap().dependencies.as_slice(), &[a]);
    launch(rt, s, k.double, addr32(c)).unwrap();
    // `b` is a leaf that was never joined, but it was there before the capture.
    let out = rt.stream_end_capture(s).unwrap();
    assert_eq!(out, g, "the capture went into the given graph");
    assert_eq!(rt.graph_node_count(g), Ok(3));
    assert_eq!(edges(rt, g), vec![(a.0, 2)]);
    assert_eq!(b, NodeId(1));
    assert_eq!(status(rt, s), CaptureStatus::None);
    rt.graph_destroy(g).unwrap();
}

#[test]
fn capture_to_graph_errors() {
    let rt = leaked_runtime();
    let s = rt.stream_create(0).unwrap();
    let g = rt.graph_create().unwrap();
    let n = rt.graph_add_empty_node(g, &[]).unwrap();
    // The graph is checked before the stream.
    assert_eq!(rt.stream_begin_capture_to_graph(NULL, GraphHandle::NULL, &[], GLOBAL), Err(Error::InvalidValue));
    assert_eq!(rt.stream_begin_capture_to_graph(s, GraphHandle::NULL, &[], GLOBAL), Err(Error::InvalidValue));
    assert_eq!(rt.stream_begin_capture_to_graph(NULL, g, &[], GLOBAL), Err(Error::StreamCaptureUnsupported));
    assert_eq!(rt.stream_begin_capture_to_graph(s, g, &[], 3), Err(Error::InvalidValue));
    assert_eq!(rt.stream_begin_capture_to_graph(s, g, &[NodeId(4)], GLOBAL), Err(Error::InvalidValue));
    assert_eq!(status(rt, s), CaptureStatus::None);
    rt.stream_begin_capture(s, GLOBAL).unwrap();
    assert_eq!(rt.stream_begin_capture_to_graph(s, g, &[n], GLOBAL), Err(Error::IllegalState));
    end_and_drop(rt, s);
    rt.graph_destroy(g).unwrap();
}

#[test]
fn streams_can_be_created_and_destroyed_during_a_capture() {
    for mode in MODES {
        let rt = leaked_runtime();
        let s = rt.stream_create(0).unwrap();
        rt.stream_begin_capture(s, mode).unwrap();
        let t = rt.stream_create(0).unwrap();
        rt.stream_destroy(t).unwrap();
        assert_eq!(status(rt, s), CaptureStatus::Active);
        end_and_drop(rt, s);
    }
}

#[test]
fn plain_host_functions_are_captured_as_host_nodes() {
    let rt = leaked_runtime();
    let s = rt.stream_create(0).unwrap();
    let log = HostLog::watching(0);
    rt.stream_begin_capture(s, GLOBAL).unwrap();
    rt.launch_host_func(s, log.plain()).unwrap();
    let g = rt.stream_end_capture(s).unwrap();
    assert!(matches!(rt.graph_node_kind(g, NodeId(0)), Ok(NodeKind::Host(HostFn::Plain { .. }))));
    rt.device_synchronize().unwrap();
    assert_eq!(log.calls(), 0);
}

#[test]
fn membership_cycles_among_forks_still_end() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let (a, b) = (rt.stream_create(0).unwrap(), rt.stream_create(0).unwrap());
    rt.stream_begin_capture(a, GLOBAL).unwrap();
    launch(rt, a, k.inc, addr32(c)).unwrap(); // 0
    fork(rt, a, b);
    launch(rt, b, k.inc, addr32(c)).unwrap(); // 1
    join(rt, b, a);
    launch(rt, a, k.inc, addr32(c)).unwrap(); // 2
                                              // b, already a member, waits on a again: it only gains dependencies.
    join(rt, a, b);
    assert_eq!(rt.stream_capture_info(b).unwrap().dependencies.as_slice(), &[NodeId(1), NodeId(2)]);
    launch(rt, b, k.inc, addr32(c)).unwrap(); // 3
    join(rt, b, a);
    launch(rt, a, k.inc, addr32(c)).unwrap(); // 4
    let g = rt.stream_end_capture(a).unwrap();
    assert_eq!(rt.graph_node_count(g), Ok(5));
    assert_eq!(edges(rt, g), vec![(0, 1), (0, 2), (1, 2), (1, 3), (2, 3), (2, 4), (3, 4)]);
    let x = rt.graph_instantiate(g).unwrap();
    rt.graph_exec_destroy(x).unwrap();
}

#[test]
fn per_thread_stream_captures_like_a_blocking_stream() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    const PT: StreamHandle = StreamHandle::PER_THREAD;
    rt.stream_begin_capture(PT, GLOBAL).unwrap();
    launch(rt, PT, k.inc, addr32(c)).unwrap();
    assert_eq!(status(rt, PT), CaptureStatus::Active);
    // The per-thread stream is blocking: the legacy stream would depend on it.
    assert_eq!(rt.stream_is_capturing(NULL), Err(Error::StreamCaptureImplicit));
    let g = rt.stream_end_capture(PT).unwrap();
    assert_eq!(rt.graph_node_count(g), Ok(1));
    assert_eq!(c.load(Ordering::SeqCst), 0);
}
