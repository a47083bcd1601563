//! Graphs (docs/hip-semantics.md §2.5 graph rows): instantiate and launch on the loopback. Nodes
//! run in dependency order with barrier-AND packets on node signals where the DAG joins;
//! executables relaunch, overlap a still-running launch, follow the null stream's implicit
//! synchronisation, and carry host-function, event-record and event-wait nodes. Plus the error
//! codes of graph/exec creation, destruction, instantiation and launch.

use std::sync::atomic::{AtomicU32, Ordering};

use aqueduct::{Error, GraphExecHandle, GraphHandle, NodeId, StreamHandle};
use aqueduct_tests::*;

const NULL: StreamHandle = StreamHandle::NULL;
const GLOBAL: u32 = 0;
/// `hipStreamNonBlocking`.
const NB: u32 = 1;
/// `hipEventRecordExternal` / `hipEventWaitExternal`.
const EXTERNAL: u32 = 1;
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

/// Adds a node running `log_kernel` with `id` after `deps`.
fn log_node(rt: &Rt, g: GraphHandle, deps: &[NodeId], kernel: u64, log: &'static OrderLog, id: u32) -> NodeId {
    let args = log.args(id);
    rt.graph_add_kernel_node(g, deps, &kernel_launch(kernel, &args)).unwrap()
}

/// Adds a node running `kernel` on the u32 at `cell` after `deps`.
fn cell_node(rt: &Rt, g: GraphHandle, deps: &[NodeId], kernel: u64, cell: &AtomicU32) -> NodeId {
    let args = addr32(cell).to_le_bytes();
    rt.graph_add_kernel_node(g, deps, &kernel_launch(kernel, &args)).unwrap()
}

/// A diamond A→B, A→C, {B,C}→D of `kernel` on `cell`.
fn diamond(rt: &Rt, kernel: u64, cell: &AtomicU32) -> GraphHandle {
    let g = rt.graph_create().unwrap();
    let a = cell_node(rt, g, &[], kernel, cell);
    let b = cell_node(rt, g, &[a], kernel, cell);
    let c = cell_node(rt, g, &[a], kernel, cell);
    cell_node(rt, g, &[b, c], kernel, cell);
    g
}

/// The retired dispatch of `log_kernel` with `id` on `queue`.
fn logged(pkts: &[Pkt], queue: u32, kernel: u64, id: u32) -> Pkt {
    let hits: Vec<Pkt> = pkts
        .iter()
        .copied()
        .filter(|p| p.queue == queue && p.dispatch().is_some_and(|d| d.kernel_object == kernel))
        .filter(|p| p.arg(1) == Some(u64::from(id)))
        .collect();
    assert_eq!(hits.len(), 1, "one dispatch of node {id}");
    hits[0]
}

fn has_barrier_bit(p: &Pkt) -> bool {
    p.words[0] & (1 << 8) != 0
}

fn completion(p: &Pkt) -> u64 {
    p.dispatch().map_or(0, |d| d.completion_signal)
}

/// The barrier-AND on `queue` waiting for exactly `signals`, retired between `after` and `before`.
fn join_barrier(pkts: &[Pkt], queue: u32, signals: &[u64], after: usize, before: usize) {
    let mut want = signals.to_vec();
    want.sort_unstable();
    let found = pkts.iter().any(|p| {
        let mut deps = p.deps();
        deps.sort_unstable();
        p.queue == queue && p.barrier_and().is_some() && deps == want && p.pos > after && p.pos < before
    });
    assert!(found, "a barrier-AND on {want:x?} between trace positions {after} and {before}: {pkts:#?}");
}

// ----- launch ----------------------------------------------------------------------------------

#[test]
fn captured_diamond_runs_in_dependency_order_with_barriers_at_the_joins() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let log = OrderLog::new();
    let (s1, s2, run) = (rt.stream_create(0).unwrap(), rt.stream_create(0).unwrap(), rt.stream_create(NB).unwrap());
    let (a, b, c, d) = (log.args(0), log.args(1), log.args(2), log.args(3));
    rt.stream_begin_capture(s1, GLOBAL).unwrap();
    rt.launch_kernel(s1, &kernel_launch(k.log, &a)).unwrap();
    let e = rt.event_create(0).unwrap();
    rt.event_record(e, s1, 0).unwrap();
    rt.stream_wait_event(s2, e, 0).unwrap();
    rt.launch_kernel(s1, &kernel_launch(k.log, &b)).unwrap();
    rt.launch_kernel(s2, &kernel_launch(k.log, &c)).unwrap();
    let e2 = rt.event_create(0).unwrap();
    rt.event_record(e2, s2, 0).unwrap();
    rt.stream_wait_event(s1, e2, 0).unwrap();
    rt.launch_kernel(s1, &kernel_launch(k.log, &d)).unwrap();
    let g = rt.stream_end_capture(s1).unwrap();
    let x = rt.graph_instantiate(g).unwrap();
    assert!(log.ids().is_empty(), "instantiation runs nothing");
    rt.graph_launch(x, run).unwrap();
    rt.stream_synchronize(run).unwrap();
    let ids = log.ids();
    assert_eq!(ids.len(), 4);
    assert_eq!((ids[0], ids[3]), (0, 3), "A first, D last: {ids:?}");
    let q = queue_of(rt, run);
    let pkts = packets(rt.backend());
    let (pa, pb, pc, pd) = (
        logged(&pkts, q, k.log, 0),
        logged(&pkts, q, k.log, 1),
        logged(&pkts, q, k.log, 2),
        logged(&pkts, q, k.log, 3),
    );
    assert!(pa.pos < pb.pos.min(pc.pos) && pb.pos.max(pc.pos) < pd.pos);
    // D joins everything in flight: its barrier bit, or a barrier-AND on B's and C's signals.
    let joined = has_barrier_bit(&pd)
        || pkts.iter().any(|p| {
            p.queue == q
                && p.pos > pb.pos.max(pc.pos)
                && p.pos < pd.pos
                && completion(&pb) != 0
                && completion(&pc) != 0
                && p.deps().contains(&completion(&pb))
                && p.deps().contains(&completion(&pc))
        });
    assert!(joined, "D is ordered after both B and C: {pkts:#?}");
    rt.graph_exec_destroy(x).unwrap();
    rt.graph_destroy(g).unwrap();
}

#[test]
fn partial_joins_wait_on_node_signals_with_barrier_and_packets() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let log = OrderLog::new();
    let s = rt.stream_create(0).unwrap();
    let g = rt.graph_create().unwrap();
    // Roots A, B, E; D joins A and B while E is still in flight; F joins D and E.
    let a = log_node(rt, g, &[], k.log, log, 0);
    let b = log_node(rt, g, &[], k.log, log, 1);
    let e = log_node(rt, g, &[], k.log, log, 2);
    let d = log_node(rt, g, &[a, b], k.log, log, 3);
    log_node(rt, g, &[d, e], k.log, log, 4);
    let x = rt.graph_instantiate(g).unwrap();
    rt.graph_launch(x, s).unwrap();
    rt.stream_synchronize(s).unwrap();
    let ids = log.ids();
    assert_eq!(ids.len(), 5);
    let at = |id: u32| ids.iter().position(|&i| i == id).unwrap();
    assert!(at(3) > at(0) && at(3) > at(1) && at(4) > at(3) && at(4) > at(2), "{ids:?}");
    let q = queue_of(rt, s);
    let pkts = packets(rt.backend());
    let (pa, pb, pd) = (logged(&pkts, q, k.log, 0), logged(&pkts, q, k.log, 1), logged(&pkts, q, k.log, 3));
    assert_ne!(completion(&pa), 0, "a node a barrier-AND waits on completes a signal of its own");
    assert_ne!(completion(&pb), 0);
    join_barrier(&pkts, q, &[completion(&pa), completion(&pb)], pa.pos.max(pb.pos), pd.pos);
    rt.graph_exec_destroy(x).unwrap();
}

#[test]
fn added_dependencies_order_nodes_against_creation_order() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let log = OrderLog::new();
    let s = rt.stream_create(0).unwrap();
    let g = rt.graph_create().unwrap();
    let n: Vec<NodeId> = (0..3).map(|id| log_node(rt, g, &[], k.log, log, id)).collect();
    // 2 → 1 → 0: the reverse of creation order.
    rt.graph_add_dependencies(g, &[n[2], n[1]], &[n[1], n[0]]).unwrap();
    let x = rt.graph_instantiate(g).unwrap();
    rt.graph_launch(x, s).unwrap();
    rt.stream_synchronize(s).unwrap();
    assert_eq!(log.ids(), vec![2, 1, 0]);
    rt.graph_exec_destroy(x).unwrap();
}

#[test]
fn kernel_arguments_follow_their_nodes_whatever_the_launch_order() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let s = rt.stream_create(0).unwrap();
    let (a, b, c) = (cell32(0), cell32(5), cell32(0));
    let g = rt.graph_create().unwrap();
    // Node 2 is a root, so it is flattened before node 1.
    let n0 = cell_node(rt, g, &[], k.inc, a);
    cell_node(rt, g, &[n0], k.double, b);
    cell_node(rt, g, &[], k.inc, c);
    let x = rt.graph_instantiate(g).unwrap();
    rt.graph_launch(x, s).unwrap();
    rt.stream_synchronize(s).unwrap();
    assert_eq!((a.load(Ordering::SeqCst), b.load(Ordering::SeqCst), c.load(Ordering::SeqCst)), (1, 10, 1));
    rt.graph_exec_destroy(x).unwrap();
}

#[test]
fn relaunching_many_times_runs_the_graph_each_time() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let s = rt.stream_create(0).unwrap();
    let c = cell32(0);
    let g = diamond(rt, k.inc, c);
    let x = rt.graph_instantiate(g).unwrap();
    // Far more packets than the 64-slot ring holds.
    for i in 1..=40 {
        rt.graph_launch(x, s).unwrap();
        if i % 7 == 0 {
            rt.stream_synchronize(s).unwrap();
            assert_eq!(c.load(Ordering::SeqCst), 4 * i);
        }
    }
    rt.stream_synchronize(s).unwrap();
    assert_eq!(c.load(Ordering::SeqCst), 160);
    rt.graph_exec_destroy(x).unwrap();
    rt.graph_destroy(g).unwrap();
}

#[test]
fn launch_while_the_previous_launch_is_still_pending_on_the_same_stream() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let s = rt.stream_create(0).unwrap();
    let c = cell32(1);
    let g = rt.graph_create().unwrap();
    let a = cell_node(rt, g, &[], k.inc, c);
    let b = cell_node(rt, g, &[a], k.double, c);
    let d = cell_node(rt, g, &[a], k.double, c);
    cell_node(rt, g, &[b, d], k.inc, c);
    let x = rt.graph_instantiate(g).unwrap();
    let gt = gate(rt, s);
    rt.graph_launch(x, s).unwrap();
    rt.graph_launch(x, s).unwrap();
    assert_eq!(c.load(Ordering::SeqCst), 1, "both launches wait behind the gate");
    assert_eq!(rt.stream_query(s), Err(Error::NotReady));
    open(gt);
    rt.stream_synchronize(s).unwrap();
    // ((1 + 1) * 4 + 1) = 9, then ((9 + 1) * 4 + 1) = 41: the launches ran one after the other.
    assert_eq!(c.load(Ordering::SeqCst), 41);
    rt.graph_exec_destroy(x).unwrap();
}

#[test]
fn many_launches_pending_at_once_with_node_signals_all_complete_in_order() {
    // A and B independent, C after A only: C waits on A's node signal (a barrier-AND), so the
    // executable has a node signal that every launch resets on the device. Five launches queue
    // behind a gate without the host waiting for any of them.
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let s = rt.stream_create(0).unwrap();
    let (c1, c2) = (cell32(0), cell32(0));
    let g = rt.graph_create().unwrap();
    let a = cell_node(rt, g, &[], k.inc, c1);
    cell_node(rt, g, &[], k.inc, c2);
    cell_node(rt, g, &[a], k.double, c1);
    let x = rt.graph_instantiate(g).unwrap();
    let gt = gate(rt, s);
    for _ in 0..5 {
        rt.graph_launch(x, s).unwrap();
    }
    assert_eq!((c1.load(Ordering::SeqCst), c2.load(Ordering::SeqCst)), (0, 0));
    open(gt);
    rt.stream_synchronize(s).unwrap();
    // c1 = (c1 + 1) * 2 five times: 2, 6, 14, 30, 62.
    assert_eq!((c1.load(Ordering::SeqCst), c2.load(Ordering::SeqCst)), (62, 5));
    rt.graph_exec_destroy(x).unwrap();
}

#[test]
fn launches_of_one_executable_are_ordered_across_streams() {
    // CUDA's rule, which HIP documents too: each launch is ordered behind any previous launch of
    // the same executable, so a launch on another stream waits for the pending one.
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let (s1, s2) = (rt.stream_create(NB).unwrap(), rt.stream_create(NB).unwrap());
    let c = cell32(0);
    let g = diamond(rt, k.inc, c);
    let x = rt.graph_instantiate(g).unwrap();
    let gt = gate(rt, s1);
    rt.graph_launch(x, s1).unwrap();
    rt.graph_launch(x, s2).unwrap();
    assert_eq!(rt.stream_query(s2), Err(Error::NotReady), "the second launch did not wait for the first");
    assert_eq!(c.load(Ordering::SeqCst), 0);
    open(gt);
    rt.stream_synchronize(s2).unwrap();
    rt.stream_synchronize(s1).unwrap();
    assert_eq!(c.load(Ordering::SeqCst), 8);
    rt.graph_exec_destroy(x).unwrap();
}

#[test]
fn launch_into_a_blocking_stream_waits_for_null_stream_work() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let s = rt.stream_create(0).unwrap();
    let c = cell32(0);
    let g = rt.graph_create().unwrap();
    cell_node(rt, g, &[], k.double, c);
    let x = rt.graph_instantiate(g).unwrap();
    let gt = gate(rt, NULL);
    rt.memset_async(NULL, addr32(c), 5, 4, 1).unwrap();
    rt.graph_launch(x, s).unwrap();
    assert_eq!(c.load(Ordering::SeqCst), 0);
    open(gt);
    rt.stream_synchronize(s).unwrap();
    assert_eq!(c.load(Ordering::SeqCst), 10, "the fill ran before the graph doubled it");
    rt.graph_exec_destroy(x).unwrap();
}

#[test]
fn destroying_an_executable_lets_its_pending_launch_finish() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let s = rt.stream_create(0).unwrap();
    let c = cell32(0);
    let g = diamond(rt, k.inc, c);
    let x = rt.graph_instantiate(g).unwrap();
    let gt = gate(rt, s);
    rt.graph_launch(x, s).unwrap();
    rt.graph_exec_destroy(x).unwrap();
    rt.graph_destroy(g).unwrap();
    assert_eq!(rt.graph_launch(x, s), Err(Error::InvalidValue));
    open(gt);
    rt.stream_synchronize(s).unwrap();
    assert_eq!(c.load(Ordering::SeqCst), 4);
}

#[test]
fn instantiate_reuses_the_slots_of_destroyed_executables_whose_launches_finished() {
    // The runtime holds two executables. Both are destroyed while their launches are pending;
    // once the launches finish, instantiation takes their slots back, with no later destroy.
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let s = rt.stream_create(0).unwrap();
    let c = cell32(0);
    let g = diamond(rt, k.inc, c);
    let gt = gate(rt, s);
    for _ in 0..2 {
        let x = rt.graph_instantiate(g).unwrap();
        rt.graph_launch(x, s).unwrap();
        rt.graph_exec_destroy(x).unwrap();
    }
    assert_eq!(rt.graph_instantiate(g), Err(Error::OutOfMemory), "both launches still pending");
    open(gt);
    rt.stream_synchronize(s).unwrap();
    assert_eq!(c.load(Ordering::SeqCst), 8);
    let x = rt.graph_instantiate(g).unwrap();
    rt.graph_launch(x, s).unwrap();
    rt.stream_synchronize(s).unwrap();
    assert_eq!(c.load(Ordering::SeqCst), 12);
    rt.graph_exec_destroy(x).unwrap();
    rt.graph_destroy(g).unwrap();
}

#[test]
fn host_function_and_event_record_nodes_run_in_launched_graphs() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let (cap, run, other) =
        (rt.stream_create(0).unwrap(), rt.stream_create(NB).unwrap(), rt.stream_create(NB).unwrap());
    let (c, d) = (cell32(0), cell32(0));
    let log = HostLog::watching(addr32(c));
    let e = rt.event_create(0).unwrap();
    rt.stream_begin_capture(cap, GLOBAL).unwrap();
    launch(rt, cap, k.inc, addr32(c)).unwrap();
    rt.launch_host_func(cap, log.plain()).unwrap();
    rt.event_record(e, cap, EXTERNAL).unwrap();
    launch(rt, cap, k.inc, addr32(c)).unwrap();
    let g = rt.stream_end_capture(cap).unwrap();
    assert_eq!(rt.graph_node_count(g), Ok(4));
    let x = rt.graph_instantiate(g).unwrap();
    for round in 1..=2u32 {
        let gt = gate(rt, run);
        rt.graph_launch(x, run).unwrap();
        assert_eq!(rt.event_query(e), Err(Error::NotReady), "the event stands for the graph's record node");
        rt.stream_wait_event(other, e, 0).unwrap();
        launch(rt, other, k.inc, addr32(d)).unwrap();
        assert_eq!(d.load(Ordering::SeqCst), round - 1, "the waiter is held by the graph's event");
        assert_eq!(log.calls(), round - 1);
        open(gt);
        rt.stream_synchronize(run).unwrap();
        rt.stream_synchronize(other).unwrap();
        assert_eq!(log.calls(), round);
        assert_eq!(log.seen(), 2 * round - 1, "the host node ran after the kernel before it");
        assert_eq!(c.load(Ordering::SeqCst), 2 * round);
        assert_eq!(d.load(Ordering::SeqCst), round);
        assert_eq!(rt.event_query(e), Ok(()));
    }
    rt.graph_exec_destroy(x).unwrap();
}

#[test]
fn event_wait_nodes_hold_the_graph_until_the_event_completes() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let (cap, run, producer) =
        (rt.stream_create(0).unwrap(), rt.stream_create(NB).unwrap(), rt.stream_create(NB).unwrap());
    let c = cell32(0);
    let e = rt.event_create(0).unwrap();
    rt.stream_begin_capture(cap, GLOBAL).unwrap();
    rt.stream_wait_event(cap, e, EXTERNAL).unwrap();
    launch(rt, cap, k.inc, addr32(c)).unwrap();
    let g = rt.stream_end_capture(cap).unwrap();
    let x = rt.graph_instantiate(g).unwrap();
    let gt = gate(rt, producer);
    rt.event_record(e, producer, 0).unwrap();
    rt.graph_launch(x, run).unwrap();
    assert_eq!(c.load(Ordering::SeqCst), 0, "the graph waits for the event");
    open(gt);
    rt.stream_synchronize(run).unwrap();
    assert_eq!(c.load(Ordering::SeqCst), 1);
    rt.graph_exec_destroy(x).unwrap();
}

#[test]
fn captured_wait_value_nodes_gate_launches() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let (cap, run) = (rt.stream_create(0).unwrap(), rt.stream_create(0).unwrap());
    let (c, flag) = (cell32(0), cell32(0));
    rt.stream_begin_capture(cap, GLOBAL).unwrap();
    rt.wait_value32(cap, addr32(flag), 1, EQ, u32::MAX).unwrap();
    launch(rt, cap, k.inc, addr32(c)).unwrap();
    let g = rt.stream_end_capture(cap).unwrap();
    let x = rt.graph_instantiate(g).unwrap();
    rt.graph_launch(x, run).unwrap();
    assert_eq!(rt.stream_query(run), Err(Error::NotReady));
    assert_eq!(c.load(Ordering::SeqCst), 0);
    flag.store(1, Ordering::SeqCst);
    rt.stream_synchronize(run).unwrap();
    assert_eq!(c.load(Ordering::SeqCst), 1);
    rt.graph_exec_destroy(x).unwrap();
}

#[test]
fn launching_an_empty_graph_completes_at_once_and_publishes_nothing() {
    let rt = leaked_runtime();
    let s = rt.stream_create(0).unwrap();
    let g = rt.graph_create().unwrap();
    let x = rt.graph_instantiate(g).unwrap();
    rt.graph_launch(x, s).unwrap();
    assert_eq!(rt.stream_query(s), Ok(()));
    let q = queue_of(rt, s);
    assert!(packets(rt.backend()).iter().all(|p| p.queue != q));
    rt.graph_exec_destroy(x).unwrap();
}

#[test]
fn instantiating_during_a_global_capture_is_allowed() {
    let rt = leaked_runtime();
    let s = rt.stream_create(0).unwrap();
    let g = rt.graph_create().unwrap();
    rt.graph_add_empty_node(g, &[]).unwrap();
    rt.stream_begin_capture(s, GLOBAL).unwrap();
    let x = rt.graph_instantiate(g).unwrap();
    assert_eq!(rt.stream_is_capturing(s), Ok(aqueduct::CaptureStatus::Active));
    rt.graph_exec_destroy(x).unwrap();
    let cg = rt.stream_end_capture(s).unwrap();
    rt.graph_destroy(cg).unwrap();
}

// ----- errors ----------------------------------------------------------------------------------

#[test]
fn graph_destroy_errors() {
    let rt = leaked_runtime();
    assert_eq!(rt.graph_destroy(GraphHandle::NULL), Err(Error::InvalidValue));
    let g = rt.graph_create().unwrap();
    rt.graph_destroy(g).unwrap();
    assert_eq!(rt.graph_destroy(g), Err(Error::InvalidValue));
    assert_eq!(rt.graph_node_count(g), Err(Error::InvalidValue));
    assert_eq!(rt.graph_destroy(GraphHandle(0x1234_5678)), Err(Error::InvalidValue));
}

#[test]
fn graph_node_errors() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let g = rt.graph_create().unwrap();
    let a = rt.graph_add_empty_node(g, &[]).unwrap();
    assert_eq!(rt.graph_add_empty_node(g, &[NodeId(7)]), Err(Error::InvalidValue));
    assert_eq!(rt.graph_add_empty_node(GraphHandle::NULL, &[]), Err(Error::InvalidValue));
    assert_eq!(rt.graph_node_kind(g, NodeId(7)).err(), Some(Error::InvalidValue));
    assert_eq!(rt.graph_add_dependencies(g, &[a], &[a]), Err(Error::InvalidValue));
    assert_eq!(rt.graph_add_dependencies(g, &[a], &[NodeId(7)]), Err(Error::InvalidValue));
    assert_eq!(rt.graph_add_dependencies(g, &[a], &[]), Err(Error::InvalidValue));
    let bad = aqueduct::KernelLaunch { workgroup: [0, 1, 1], ..kernel_launch(k.inc, &[]) };
    assert_eq!(rt.graph_add_kernel_node(g, &[], &bad), Err(Error::InvalidConfiguration));
    assert_eq!(rt.graph_add_kernel_node(g, &[], &kernel_launch(0, &[])), Err(Error::InvalidValue));
    assert_eq!(rt.graph_node_count(g), Ok(1), "failed calls add nothing");
    let mut e = [(NodeId(0), NodeId(0)); 4];
    assert_eq!(rt.graph_edges(g, &mut e), Ok(0));
}

#[test]
fn instantiate_errors() {
    let rt = leaked_runtime();
    assert_eq!(rt.graph_instantiate(GraphHandle::NULL), Err(Error::InvalidValue));
    let g = rt.graph_create().unwrap();
    let a = rt.graph_add_empty_node(g, &[]).unwrap();
    let b = rt.graph_add_empty_node(g, &[a]).unwrap();
    for flags in [2, 4, 16, 0x8000_0000] {
        assert_eq!(rt.graph_instantiate_with_flags(g, flags), Err(Error::InvalidValue), "flags {flags:#x}");
    }
    for flags in [1, 8, 9] {
        let x = rt.graph_instantiate_with_flags(g, flags).unwrap();
        rt.graph_exec_destroy(x).unwrap();
    }
    rt.graph_add_dependencies(g, &[b], &[a]).unwrap();
    assert_eq!(rt.graph_instantiate(g), Err(Error::InvalidValue), "a cycle");
    let dead = rt.graph_create().unwrap();
    rt.graph_destroy(dead).unwrap();
    assert_eq!(rt.graph_instantiate(dead), Err(Error::InvalidValue));
    // The failed instantiations leaked no executable slot.
    let ok = rt.graph_create().unwrap();
    let x1 = rt.graph_instantiate(ok).unwrap();
    let x2 = rt.graph_instantiate(ok).unwrap();
    rt.graph_exec_destroy(x1).unwrap();
    rt.graph_exec_destroy(x2).unwrap();
}

#[test]
fn exec_destroy_and_launch_errors() {
    let rt = leaked_runtime();
    let s = rt.stream_create(0).unwrap();
    assert_eq!(rt.graph_exec_destroy(GraphExecHandle::NULL), Err(Error::InvalidValue));
    assert_eq!(rt.graph_launch(GraphExecHandle::NULL, s), Err(Error::InvalidValue));
    let g = rt.graph_create().unwrap();
    rt.graph_add_empty_node(g, &[]).unwrap();
    let x = rt.graph_instantiate(g).unwrap();
    // The graph can go; the executable stays usable.
    rt.graph_destroy(g).unwrap();
    rt.graph_launch(x, s).unwrap();
    let dead = rt.stream_create(0).unwrap();
    rt.stream_destroy(dead).unwrap();
    assert_eq!(rt.graph_launch(x, dead), Err(Error::ContextIsDestroyed));
    // The executable is checked first.
    assert_eq!(rt.graph_launch(GraphExecHandle::NULL, dead), Err(Error::InvalidValue));
    rt.stream_synchronize(s).unwrap();
    rt.graph_exec_destroy(x).unwrap();
    assert_eq!(rt.graph_exec_destroy(x), Err(Error::InvalidValue));
    assert_eq!(rt.graph_launch(x, s), Err(Error::InvalidValue));
}

#[test]
fn nodes_added_by_kind_run_and_dispatch_arguments_read_back() {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let s = rt.stream_create(0).unwrap();
    let c = cell32(0);
    let log = HostLog::watching(addr32(c));
    let g = rt.graph_create().unwrap();
    let args = addr32(c).to_le_bytes();
    let a = rt.graph_add_kernel_node(g, &[], &kernel_launch(k.inc, &args)).unwrap();
    let h = rt.graph_add_node(g, &[a], aqueduct::NodeKind::Host(log.plain())).unwrap();
    assert_eq!(rt.graph_add_node(g, &[h], aqueduct::NodeKind::Empty).map(|_| ()), Ok(()));
    // A dispatch needs its arguments: only graph_add_kernel_node adds one.
    let d = rt.graph_node_kind(g, a).unwrap();
    assert_eq!(rt.graph_add_node(g, &[], d).map(|_| ()), Err(Error::InvalidValue));
    let mut out = [0u8; 16];
    assert_eq!(rt.graph_node_args(g, a, &mut out), Ok(args.len()));
    assert_eq!(&out[..args.len()], &args);
    assert_eq!(rt.graph_node_args(g, h, &mut out), Err(Error::InvalidValue));
    let x = rt.graph_instantiate(g).unwrap();
    rt.graph_launch(x, s).unwrap();
    rt.stream_synchronize(s).unwrap();
    assert_eq!(log.calls(), 1);
    assert_eq!(log.seen(), 1, "the host node ran after the kernel it depends on");
    rt.graph_exec_destroy(x).unwrap();
    rt.graph_destroy(g).unwrap();
}
