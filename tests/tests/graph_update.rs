//! Executables changed in place on the loopback (docs/hip-semantics.md, "Graphs"): one node's
//! dispatch, host function or event is patched, the next launch runs the new parameters, a
//! launch enqueued before keeps the old ones, and no later launch ever publishes the old
//! packet again.

use std::sync::atomic::{AtomicU32, Ordering};

use aqueduct::aql::QueueFault;
use aqueduct::loopback::Dispatch;
use aqueduct::{Error, GraphExecHandle, GraphHandle, KernelLaunch, NodeId, NodeKind, StreamHandle};
use aqueduct_tests::*;

/// `hipStreamWaitValueEq`.
const EQ: u32 = 1;
/// Nodes in the test graphs (the default configuration's per-graph limit).
const NODES: u32 = 32;

/// Host twin: `*(u32*)a0 = a1`.
fn store_kernel(d: &Dispatch) -> Result<(), QueueFault> {
    // SAFETY: every launch of this kernel passes `[address of a live u32, value]`.
    let (addr, value): (u64, u64) = unsafe { d.args() };
    // SAFETY: as above; the cells are leaked.
    let cell = unsafe { AtomicU32::from_ptr(addr as usize as *mut u32) };
    cell.store(value as u32, Ordering::SeqCst);
    Ok(())
}

/// Host twin: `*(u32*)a0 = a1 + 1000`.
fn store_plus_kernel(d: &Dispatch) -> Result<(), QueueFault> {
    // SAFETY: as `store_kernel`.
    let (addr, value): (u64, u64) = unsafe { d.args() };
    // SAFETY: as above.
    let cell = unsafe { AtomicU32::from_ptr(addr as usize as *mut u32) };
    cell.store(value as u32 + 1000, Ordering::SeqCst);
    Ok(())
}

fn args(cell: &AtomicU32, value: u64) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[..8].copy_from_slice(&addr32(cell).to_le_bytes());
    a[8..].copy_from_slice(&value.to_le_bytes());
    a
}

fn launch_of(kernel: u64, args: &[u8]) -> KernelLaunch<'_> {
    kernel_launch(kernel, args)
}

/// A chain of `NODES` stores, node `i` writing `i` into `cells[i]`.
fn chain(rt: &Rt, store: u64, cells: &[&'static AtomicU32]) -> (GraphHandle, Vec<NodeId>) {
    let g = rt.graph_create().unwrap();
    let mut nodes: Vec<NodeId> = Vec::new();
    for (i, c) in cells.iter().enumerate() {
        let deps: Vec<NodeId> = nodes.last().copied().into_iter().collect();
        nodes.push(rt.graph_add_kernel_node(g, &deps, &launch_of(store, &args(c, i as u64))).unwrap());
    }
    (g, nodes)
}

fn values(cells: &[&'static AtomicU32]) -> Vec<u32> {
    cells.iter().map(|c| c.load(Ordering::SeqCst)).collect()
}

fn reset(cells: &[&'static AtomicU32]) {
    for c in cells {
        c.store(u32::MAX, Ordering::SeqCst);
    }
}

/// The dispatches of `kernel` retired with `args` since trace position `after`.
fn retired_with(rt: &Rt, kernel: u64, args: &[u8], after: usize) -> usize {
    let a0 = u64::from_le_bytes(args[..8].try_into().unwrap());
    let a1 = u64::from_le_bytes(args[8..16].try_into().unwrap());
    packets(rt.backend())
        .iter()
        .filter(|p| p.pos > after && p.dispatch().is_some_and(|d| d.kernel_object == kernel))
        .filter(|p| p.arg(0) == Some(a0) && p.arg(1) == Some(a1))
        .count()
}

fn last_pos(rt: &Rt) -> usize {
    packets(rt.backend()).last().map_or(0, |p| p.pos)
}

fn setup() -> (&'static Rt, u64, u64, Vec<&'static AtomicU32>, StreamHandle) {
    let rt = leaked_runtime();
    let store = rt.backend().register_kernel(store_kernel).unwrap();
    let plus = rt.backend().register_kernel(store_plus_kernel).unwrap();
    let cells: Vec<&'static AtomicU32> = (0..NODES).map(|_| cell32(u32::MAX)).collect();
    let s = rt.stream_create(0).unwrap();
    (rt, store, plus, cells, s)
}

fn run(rt: &Rt, x: GraphExecHandle, s: StreamHandle) {
    rt.graph_launch(x, s).unwrap();
    rt.stream_synchronize(s).unwrap();
}

#[test]
fn one_patched_node_changes_the_next_launch_and_only_that_node() {
    let (rt, store, _, cells, s) = setup();
    let (g, nodes) = chain(rt, store, &cells);
    let x = rt.graph_instantiate(g).unwrap();
    run(rt, x, s);
    let first: Vec<u32> = (0..NODES).collect();
    assert_eq!(values(&cells), first);

    let old = args(cells[7], 7);
    let new = args(cells[7], 700);
    rt.graph_exec_set_dispatch(x, nodes[7], &launch_of(store, &new)).unwrap();
    reset(&cells);
    let before = last_pos(rt);
    run(rt, x, s);
    let mut want = first.clone();
    want[7] = 700;
    assert_eq!(values(&cells), want);
    assert_eq!(retired_with(rt, store, &new, before), 1, "the new arguments ran once");
    assert_eq!(retired_with(rt, store, &old, before), 0, "the old arguments never again");

    // Again, with a launch in between: every later launch runs the latest parameters.
    let newer = args(cells[7], 7000);
    rt.graph_exec_set_dispatch(x, nodes[7], &launch_of(store, &newer)).unwrap();
    let before = last_pos(rt);
    run(rt, x, s);
    run(rt, x, s);
    assert_eq!(cells[7].load(Ordering::SeqCst), 7000);
    assert_eq!(retired_with(rt, store, &newer, before), 2);
    assert_eq!(retired_with(rt, store, &new, before) + retired_with(rt, store, &old, before), 0);
    // The graph itself is untouched: a new executable runs the original parameters.
    let y = rt.graph_instantiate(g).unwrap();
    reset(&cells);
    run(rt, y, s);
    assert_eq!(values(&cells), first);
    rt.graph_exec_destroy(y).unwrap();
    rt.graph_exec_destroy(x).unwrap();
    rt.graph_destroy(g).unwrap();
}

#[test]
fn a_launch_enqueued_before_a_patch_keeps_the_old_parameters() {
    let (rt, store, plus, cells, s) = setup();
    let (g, nodes) = chain(rt, store, &cells);
    let x = rt.graph_instantiate(g).unwrap();
    // Held behind a gate, the first launch stays in flight.
    let gate = cell32(0);
    rt.wait_value32(s, addr32(gate), 1, EQ, u32::MAX).unwrap();
    rt.graph_launch(x, s).unwrap();
    // The kernel object alone changes at once (packets are copied into the ring per launch);
    // new arguments would have to wait for the launch in flight, which on the thread-free
    // loopback cannot finish while this thread waits: the answer is NotReady, nothing changed.
    rt.graph_exec_set_dispatch(x, nodes[3], &launch_of(plus, &args(cells[3], 3))).unwrap();
    assert_eq!(rt.graph_exec_set_dispatch(x, nodes[5], &launch_of(store, &args(cells[5], 50))), Err(Error::NotReady));
    assert_eq!(rt.graph_exec_wait(x), Err(Error::NotReady));
    gate.store(1, Ordering::SeqCst);
    rt.stream_synchronize(s).unwrap();
    let first: Vec<u32> = (0..NODES).collect();
    assert_eq!(values(&cells), first, "the launch in flight ran the old kernel and arguments");
    rt.graph_exec_wait(x).unwrap();
    rt.graph_exec_set_dispatch(x, nodes[5], &launch_of(store, &args(cells[5], 50))).unwrap();
    run(rt, x, s);
    let mut want = first;
    want[3] = 1003;
    want[5] = 50;
    assert_eq!(values(&cells), want);
    rt.graph_exec_destroy(x).unwrap();
    rt.graph_destroy(g).unwrap();
}

#[test]
fn patches_that_cannot_be_made_in_place_are_refused_and_change_nothing() {
    let (rt, store, _, cells, s) = setup();
    let g = rt.graph_create().unwrap();
    let short = addr32(cells[0]).to_le_bytes();
    let k = rt.graph_add_kernel_node(g, &[], &launch_of(store, &args(cells[1], 1))).unwrap();
    let e = rt.graph_add_empty_node(g, &[k]).unwrap();
    let x = rt.graph_instantiate(g).unwrap();
    // Longer arguments than the node's block: NotSupported (the caller instantiates again).
    assert_eq!(rt.graph_exec_set_dispatch(x, k, &launch_of(store, &[0u8; 17])), Err(Error::NotSupported));
    // Shorter ones fit (the rest of the block is zeroed).
    rt.graph_exec_set_dispatch(x, k, &launch_of(store, &short)).unwrap();
    rt.graph_exec_set_dispatch(x, k, &launch_of(store, &args(cells[1], 11))).unwrap();
    assert_eq!(rt.graph_exec_set_dispatch(x, e, &launch_of(store, &short)), Err(Error::InvalidValue));
    assert_eq!(rt.graph_exec_set_dispatch(x, NodeId(9), &launch_of(store, &short)), Err(Error::InvalidValue));
    assert_eq!(rt.graph_exec_set_dispatch(GraphExecHandle(7), k, &launch_of(store, &short)), Err(Error::InvalidValue));
    let mut bad = launch_of(store, &short);
    bad.workgroup = [0, 1, 1];
    assert_eq!(rt.graph_exec_set_dispatch(x, k, &bad), Err(Error::InvalidConfiguration));
    assert_eq!(rt.graph_exec_set_host(x, k, HostLog::watching(0).plain()), Err(Error::InvalidValue));
    assert_eq!(rt.graph_exec_set_event(x, e, 0), Err(Error::InvalidValue));
    run(rt, x, s);
    assert_eq!(cells[1].load(Ordering::SeqCst), 11);
    rt.graph_exec_destroy(x).unwrap();
    assert_eq!(rt.graph_exec_set_dispatch(x, k, &launch_of(store, &short)), Err(Error::InvalidValue));
    rt.graph_destroy(g).unwrap();
}

#[test]
fn host_functions_and_event_waits_are_patched_for_the_next_launch() {
    let (rt, store, _, cells, s) = setup();
    let g = rt.graph_create().unwrap();
    let (a, b) = (HostLog::watching(0), HostLog::watching(0));
    let h = rt.graph_add_node(g, &[], NodeKind::Host(a.plain())).unwrap();
    let done = rt.event_create(0).unwrap();
    let w = rt.graph_add_node(g, &[h], NodeKind::EventWait(done.0)).unwrap();
    rt.graph_add_kernel_node(g, &[w], &launch_of(store, &args(cells[0], 5))).unwrap();
    let x = rt.graph_instantiate(g).unwrap();
    run(rt, x, s);
    assert_eq!((a.calls(), b.calls(), cells[0].load(Ordering::SeqCst)), (1, 0, 5));

    rt.graph_exec_set_host(x, h, b.plain()).unwrap();
    // The wait node now waits for an event recorded behind a gate on another stream.
    let other = rt.stream_create(0).unwrap();
    let gate = cell32(0);
    rt.wait_value32(other, addr32(gate), 1, EQ, u32::MAX).unwrap();
    let pending = rt.event_create(0).unwrap();
    rt.event_record(pending, other, 0).unwrap();
    rt.graph_exec_set_event(x, w, pending.0).unwrap();
    cells[0].store(0, Ordering::SeqCst);
    rt.graph_launch(x, s).unwrap();
    assert_eq!(rt.stream_query(s), Err(Error::NotReady), "the launch waits for the new event");
    assert_eq!(cells[0].load(Ordering::SeqCst), 0);
    gate.store(1, Ordering::SeqCst);
    rt.stream_synchronize(other).unwrap();
    rt.stream_synchronize(s).unwrap();
    assert_eq!((a.calls(), b.calls(), cells[0].load(Ordering::SeqCst)), (1, 1, 5));
    rt.graph_exec_destroy(x).unwrap();
    rt.graph_destroy(g).unwrap();
}
