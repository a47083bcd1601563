//! Conditional graph nodes on the loopback (docs/conditional-graphs.md): IF, IF/ELSE, SWITCH and
//! WHILE whose conditions device code sets, nesting, a convergence loop, and the proof that the
//! device — the scheduler dispatch — drives the loop: one host doorbell per launch, the bodies'
//! packets published by the scheduler into the node's body queue.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use aqueduct::conditional::{
    set_conditional, ConditionalHandle, ConditionalKind, ConditionalNode, COND_ASSIGN_DEFAULT,
};
use aqueduct::loopback::{Dispatch, TraceEntry};
use aqueduct::{Error, GraphHandle, NodeId, NodeKind};
use aqueduct_tests::*;

use ConditionalKind::{If, Switch, While};

/// Kernel: `set_conditional(handle, *src)`; args `[handle, src]`.
fn set_from_kernel(d: &Dispatch) -> Result<(), aqueduct::aql::QueueFault> {
    // SAFETY: the tests pass two u64s: a live handle and the address of a live u32.
    let [handle, src]: [u64; 2] = unsafe { d.args() };
    // SAFETY: as above.
    let v = unsafe { AtomicU32::from_ptr(src as usize as *mut u32) }.load(Ordering::SeqCst);
    // SAFETY: a live handle of the test's graph.
    unsafe { set_conditional(ConditionalHandle(handle), v) };
    Ok(())
}

/// Kernel: `*remaining -= 1; set_conditional(handle, *remaining != 0)`; args `[remaining, handle]`.
fn countdown_kernel(d: &Dispatch) -> Result<(), aqueduct::aql::QueueFault> {
    // SAFETY: the tests pass the address of a live u32 and a live handle.
    let [remaining, handle]: [u64; 2] = unsafe { d.args() };
    // SAFETY: as above.
    let r = unsafe { AtomicU32::from_ptr(remaining as usize as *mut u32) };
    let left = r.fetch_sub(1, Ordering::SeqCst) - 1;
    // SAFETY: a live handle of the test's graph.
    unsafe { set_conditional(ConditionalHandle(handle), u32::from(left != 0)) };
    Ok(())
}

/// Kernel: one Newton step for the square root of 2 on the f64 at `x`; stops the loop (handle
/// 0) once the step is below 1e-12; args `[x, handle, steps]`.
fn newton_kernel(d: &Dispatch) -> Result<(), aqueduct::aql::QueueFault> {
    // SAFETY: the tests pass the addresses of a live u64 (f64 bits), a handle and a live u32.
    let [x, handle, steps]: [u64; 3] = unsafe { d.args() };
    // SAFETY: as above.
    let cell = unsafe { AtomicU64::from_ptr(x as usize as *mut u64) };
    let old = f64::from_bits(cell.load(Ordering::SeqCst));
    let new = 0.5 * (old + 2.0 / old);
    cell.store(new.to_bits(), Ordering::SeqCst);
    // SAFETY: as above.
    unsafe { AtomicU32::from_ptr(steps as usize as *mut u32) }.fetch_add(1, Ordering::SeqCst);
    // SAFETY: a live handle of the test's graph.
    unsafe { set_conditional(ConditionalHandle(handle), u32::from((new - old).abs() >= 1e-12)) };
    Ok(())
}

struct Fx {
    rt: &'static Rt,
    inc: u64,
    set_from: u64,
    countdown: u64,
    newton: u64,
}

fn fx() -> Fx {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    let lb = rt.backend();
    Fx {
        rt,
        inc: k.inc,
        set_from: lb.register_kernel(set_from_kernel).unwrap(),
        countdown: lb.register_kernel(countdown_kernel).unwrap(),
        newton: lb.register_kernel(newton_kernel).unwrap(),
    }
}

fn args(words: &[u64]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

impl Fx {
    fn kernel(&self, g: GraphHandle, deps: &[NodeId], kernel: u64, words: &[u64]) -> NodeId {
        self.rt.graph_add_kernel_node(g, deps, &kernel_launch(kernel, &args(words))).unwrap()
    }

    fn inc(&self, g: GraphHandle, deps: &[NodeId], cell: &AtomicU32) -> NodeId {
        self.kernel(g, deps, self.inc, &[addr32(cell)])
    }

    /// A body graph that increments `cell`.
    fn inc_body(&self, cell: &AtomicU32) -> GraphHandle {
        let b = self.rt.graph_create().unwrap();
        self.inc(b, &[], cell);
        b
    }

    fn cond(
        &self,
        g: GraphHandle,
        deps: &[NodeId],
        h: ConditionalHandle,
        kind: ConditionalKind,
        bodies: &[GraphHandle],
    ) -> NodeId {
        let raw: Vec<u64> = bodies.iter().map(|b| b.0).collect();
        self.rt.graph_add_conditional_node(g, deps, ConditionalNode::new(h, kind, &raw).unwrap()).unwrap()
    }

    /// Instantiates `g`, launches it once on a new stream, synchronizes; returns the stream's queue.
    fn run(&self, g: GraphHandle) -> u32 {
        let s = self.rt.stream_create(0).unwrap();
        let x = self.rt.graph_instantiate(g).unwrap();
        self.rt.graph_launch(x, s).unwrap();
        self.rt.stream_synchronize(s).unwrap();
        self.rt.graph_exec_destroy(x).unwrap();
        let q = queue_of(self.rt, s);
        self.rt.stream_destroy(s).unwrap();
        q
    }
}

/// A graph `set handle from *src → IF/SWITCH(bodies)`.
fn decided(f: &Fx, kind: ConditionalKind, src: &AtomicU32, bodies: &[GraphHandle]) -> GraphHandle {
    let g = f.rt.graph_create().unwrap();
    let h = f.rt.graph_conditional_handle_create(g, 0, 0).unwrap();
    let set = f.kernel(g, &[], f.set_from, &[h.0, addr32(src)]);
    f.cond(g, &[set], h, kind, bodies);
    g
}

#[test]
fn if_runs_its_body_when_device_code_sets_the_value_and_skips_it_otherwise() {
    let f = fx();
    let src = cell32(7);
    let hits = cell32(0);
    let after = cell32(0);
    let g = decided(&f, If, src, &[f.inc_body(hits)]);
    // A node after the conditional node runs after its body, either way.
    let last = f.rt.graph_node_count(g).unwrap() - 1;
    f.inc(g, &[NodeId(last as u16)], after);
    let s = f.rt.stream_create(0).unwrap();
    let x = f.rt.graph_instantiate(g).unwrap();
    f.rt.graph_launch(x, s).unwrap();
    f.rt.stream_synchronize(s).unwrap();
    assert_eq!((hits.load(Ordering::SeqCst), after.load(Ordering::SeqCst)), (1, 1));
    src.store(0, Ordering::SeqCst);
    f.rt.graph_launch(x, s).unwrap();
    f.rt.stream_synchronize(s).unwrap();
    assert_eq!((hits.load(Ordering::SeqCst), after.load(Ordering::SeqCst)), (1, 2));
    src.store(1, Ordering::SeqCst);
    f.rt.graph_launch(x, s).unwrap();
    f.rt.stream_synchronize(s).unwrap();
    assert_eq!((hits.load(Ordering::SeqCst), after.load(Ordering::SeqCst)), (2, 3));
}

#[test]
fn if_else_runs_exactly_one_of_its_two_bodies() {
    let f = fx();
    let src = cell32(0);
    let then = cell32(0);
    let other = cell32(0);
    let g = decided(&f, If, src, &[f.inc_body(then), f.inc_body(other)]);
    let s = f.rt.stream_create(0).unwrap();
    let x = f.rt.graph_instantiate(g).unwrap();
    // The executable outlives its graph: the handle's word stays while the executable uses it.
    let cells = f.rt.backend().signals_in_use();
    f.rt.graph_destroy(g).unwrap();
    assert_eq!(f.rt.backend().signals_in_use(), cells);
    for (v, want) in [(0, (0, 1)), (5, (1, 1)), (0, (1, 2))] {
        src.store(v, Ordering::SeqCst);
        f.rt.graph_launch(x, s).unwrap();
        f.rt.stream_synchronize(s).unwrap();
        assert_eq!((then.load(Ordering::SeqCst), other.load(Ordering::SeqCst)), want, "value {v}");
    }
}

#[test]
fn switch_runs_the_case_the_value_names_and_none_out_of_range() {
    let f = fx();
    let src = cell32(0);
    let cases: Vec<&AtomicU32> = (0..3).map(|_| cell32(0)).collect();
    let bodies: Vec<GraphHandle> = cases.iter().map(|c| f.inc_body(c)).collect();
    let g = decided(&f, Switch, src, &bodies);
    let s = f.rt.stream_create(0).unwrap();
    let x = f.rt.graph_instantiate(g).unwrap();
    let counts = || cases.iter().map(|c| c.load(Ordering::SeqCst)).collect::<Vec<_>>();
    for (v, want) in [(2, [0, 0, 1]), (0, [1, 0, 1]), (1, [1, 1, 1]), (3, [1, 1, 1]), (u32::MAX, [1, 1, 1])] {
        src.store(v, Ordering::SeqCst);
        f.rt.graph_launch(x, s).unwrap();
        f.rt.stream_synchronize(s).unwrap();
        assert_eq!(counts(), want, "value {v}");
    }
}

/// A graph `WHILE(h) { countdown(remaining, h) }` with a handle that starts every launch at
/// `default`; returns the graph.
fn countdown_loop(f: &Fx, default: u32, remaining: &AtomicU32) -> GraphHandle {
    let g = f.rt.graph_create().unwrap();
    let h = f.rt.graph_conditional_handle_create(g, default, COND_ASSIGN_DEFAULT).unwrap();
    let body = f.rt.graph_create().unwrap();
    f.kernel(body, &[], f.countdown, &[addr32(remaining), h.0]);
    f.cond(g, &[], h, While, &[body]);
    g
}

#[test]
fn while_iterations_cost_the_host_nothing() {
    // The host's doorbells and packets per launch are the same for 1 and 20 iterations.
    let f = fx();
    let host_side = |iterations: u32| {
        let remaining = cell32(iterations);
        let g = countdown_loop(&f, 1, remaining);
        let s = f.rt.stream_create(0).unwrap();
        let x = f.rt.graph_instantiate(g).unwrap();
        let lb = f.rt.backend();
        lb.clear_trace();
        f.rt.graph_launch(x, s).unwrap();
        f.rt.stream_synchronize(s).unwrap();
        assert_eq!(remaining.load(Ordering::SeqCst), 0);
        let q = queue_of(f.rt, s);
        let bells = doorbells(lb, q).len();
        let all_bells = trace(lb).iter().filter(|e| matches!(e, TraceEntry::Doorbell { .. })).count();
        assert_eq!(bells, all_bells, "the host rang only the stream's queue");
        let on_stream = packets(lb).iter().filter(|p| p.queue == q).count();
        f.rt.graph_exec_destroy(x).unwrap();
        (bells, on_stream)
    };
    assert_eq!(host_side(1), host_side(20));
}

#[test]
fn while_with_a_false_default_runs_zero_iterations() {
    let f = fx();
    let remaining = cell32(5);
    f.run(countdown_loop(&f, 0, remaining));
    assert_eq!(remaining.load(Ordering::SeqCst), 5);
}

#[test]
fn while_runs_once_when_the_body_clears_the_value() {
    let f = fx();
    let remaining = cell32(1);
    f.run(countdown_loop(&f, 1, remaining));
    assert_eq!(remaining.load(Ordering::SeqCst), 0);
}

#[test]
fn while_runs_a_thousand_iterations_inside_the_launch_call_on_a_64_slot_ring() {
    let f = fx();
    let remaining = cell32(1000);
    let g = countdown_loop(&f, 1, remaining);
    let s = f.rt.stream_create(0).unwrap();
    let x = f.rt.graph_instantiate(g).unwrap();
    f.rt.backend().clear_trace();
    f.rt.graph_launch(x, s).unwrap();
    // The loopback runs published packets inside the doorbell: the whole loop ran in the
    // launch call, with no host call, wait or doorbell of the host between iterations.
    assert_eq!(remaining.load(Ordering::SeqCst), 0);
    let lb = f.rt.backend();
    let first: Vec<TraceEntry> = (0..lb.trace_len()).filter_map(|i| lb.trace_entry(i)).collect();
    let host_doorbells = first.iter().filter(|e| matches!(e, TraceEntry::Doorbell { .. })).count();
    // The launch's own: the node-signal reset batch and the graph's packets.
    assert_eq!(host_doorbells, 2, "the launch's doorbells only");
    assert!(!first.iter().any(|e| matches!(e, TraceEntry::HostCall)));
    f.rt.stream_synchronize(s).unwrap();
    // Relaunch: the default (1) is assigned on the device at the start of the launch.
    remaining.store(1000, Ordering::SeqCst);
    f.rt.graph_launch(x, s).unwrap();
    f.rt.stream_synchronize(s).unwrap();
    assert_eq!(remaining.load(Ordering::SeqCst), 0);
}

#[test]
fn while_iterations_are_published_by_the_scheduler_into_the_body_queue() {
    let f = fx();
    let remaining = cell32(20);
    let g = countdown_loop(&f, 1, remaining);
    let s = f.rt.stream_create(0).unwrap();
    let x = f.rt.graph_instantiate(g).unwrap();
    let lb = f.rt.backend();
    lb.clear_trace();
    f.rt.graph_launch(x, s).unwrap();
    f.rt.stream_synchronize(s).unwrap();
    assert_eq!(remaining.load(Ordering::SeqCst), 0);
    let stream_q = queue_of(f.rt, s);
    let pkts = packets(lb);
    let body: Vec<&Pkt> = pkts.iter().filter(|p| p.queue != stream_q).collect();
    let countdowns = body.iter().filter(|p| p.dispatch().is_some_and(|d| d.kernel_object == f.countdown)).count();
    assert_eq!(countdowns, 20);
    // Per iteration: the body's dispatch and the tail scheduler; then the exit barrier.
    assert_eq!(body.len(), 20 * 2 + 1);
    // The scheduler is the body queue's only producer: its packets are one contiguous run.
    let first = body.first().map(|p| p.index).unwrap();
    assert_eq!(body.last().map(|p| p.index).unwrap() - first, 40);
}

#[test]
fn nested_if_inside_while_runs_on_the_iterations_device_code_picks() {
    let f = fx();
    let remaining = cell32(6);
    let odd = cell32(0);
    let g = f.rt.graph_create().unwrap();
    let outer = f.rt.graph_conditional_handle_create(g, 1, COND_ASSIGN_DEFAULT).unwrap();
    let inner = f.rt.graph_conditional_handle_create(g, 0, 0).unwrap();
    let body = f.rt.graph_create().unwrap();
    // Body: countdown; then IF(inner = remaining's low bit) { odd += 1 }.
    let c = f.kernel(body, &[], f.countdown, &[addr32(remaining), outer.0]);
    let set = f.kernel(body, &[c], f.set_from, &[inner.0, addr32(remaining)]);
    let then = f.inc_body(odd);
    f.cond(body, &[set], inner, If, &[then]);
    f.cond(g, &[], outer, While, &[body]);
    f.run(g);
    assert_eq!(remaining.load(Ordering::SeqCst), 0);
    // remaining after each countdown: 5 4 3 2 1 0 → the IF sees non-zero five times.
    assert_eq!(odd.load(Ordering::SeqCst), 5);
}

#[test]
fn a_convergence_loop_stops_when_its_kernel_says_so() {
    let f = fx();
    let x = leak(AtomicU64::new(1.0f64.to_bits()));
    let steps = cell32(0);
    let g = f.rt.graph_create().unwrap();
    let h = f.rt.graph_conditional_handle_create(g, 1, COND_ASSIGN_DEFAULT).unwrap();
    let body = f.rt.graph_create().unwrap();
    f.kernel(body, &[], f.newton, &[x as *const AtomicU64 as u64, h.0, addr32(steps)]);
    f.cond(g, &[], h, While, &[body]);
    f.run(g);
    let root = f64::from_bits(x.load(Ordering::SeqCst));
    assert!((root - std::f64::consts::SQRT_2).abs() < 1e-12, "{root}");
    let n = steps.load(Ordering::SeqCst);
    assert!((3..=8).contains(&n), "Newton from 1.0 converges in a few steps, took {n}");
}

#[test]
fn bodies_with_fork_join_and_partial_joins_keep_their_order_in_every_iteration() {
    let f = fx();
    let remaining = cell32(3);
    let a = cell32(0);
    let g = f.rt.graph_create().unwrap();
    let h = f.rt.graph_conditional_handle_create(g, 1, COND_ASSIGN_DEFAULT).unwrap();
    let body = f.rt.graph_create().unwrap();
    // Two roots, a node after the first only (a partial join: a node signal reset by the
    // scheduler every iteration), and the countdown after all.
    let r1 = f.inc(body, &[], a);
    let r2 = f.inc(body, &[], a);
    let p = f.inc(body, &[r1], a);
    f.kernel(body, &[r1, r2, p], f.countdown, &[addr32(remaining), h.0]);
    f.cond(g, &[], h, While, &[body]);
    f.run(g);
    assert_eq!((a.load(Ordering::SeqCst), remaining.load(Ordering::SeqCst)), (9, 0));
}

#[test]
fn conditional_errors() {
    let f = fx();
    let rt = f.rt;
    let g = rt.graph_create().unwrap();
    assert_eq!(rt.graph_conditional_handle_create(g, 0, 2).err(), Some(Error::InvalidValue));
    assert_eq!(rt.graph_conditional_handle_create(GraphHandle::NULL, 0, 0).err(), Some(Error::InvalidValue));
    let h = rt.graph_conditional_handle_create(g, 0, 0).unwrap();
    let body = rt.graph_create().unwrap();
    assert!(ConditionalNode::new(h, While, &[body.0, body.0]).is_err());
    let node = ConditionalNode::new(h, If, &[body.0]).unwrap();
    // A body cannot be the graph itself; a handle serves one node.
    let own = ConditionalNode::new(h, If, &[g.0]).unwrap();
    assert_eq!(rt.graph_add_conditional_node(g, &[], own).err(), Some(Error::InvalidValue));
    rt.graph_add_conditional_node(g, &[], node).unwrap();
    assert_eq!(rt.graph_add_conditional_node(g, &[], node).err(), Some(Error::InvalidValue));
    // Conditional nodes only through their own call.
    assert_eq!(rt.graph_add_node(g, &[], NodeKind::Conditional(node)).err(), Some(Error::InvalidValue));
    // A handle nobody created.
    let stray = ConditionalNode::new(ConditionalHandle(0x1000), If, &[body.0]).unwrap();
    assert_eq!(rt.graph_add_conditional_node(g, &[], stray).err(), Some(Error::InvalidValue));
    // Host nodes are not allowed in bodies: instantiation says NotSupported and leaks nothing.
    let log = HostLog::watching(0);
    rt.graph_add_node(body, &[], NodeKind::Host(log.plain())).unwrap();
    let signals = rt.backend().signals_in_use();
    assert_eq!(rt.graph_instantiate(g).err(), Some(Error::NotSupported));
    assert_eq!(rt.backend().signals_in_use(), signals);
    // Destroying the graph holding the node frees the handle for a node of another graph
    // (the handle's graph, `owner`, keeps the cell alive).
    rt.graph_destroy(g).unwrap();
    rt.graph_destroy(body).unwrap();
    let owner = rt.graph_create().unwrap();
    let h = rt.graph_conditional_handle_create(owner, 0, 0).unwrap();
    let empty = rt.graph_create().unwrap();
    let (first, second) = (rt.graph_create().unwrap(), rt.graph_create().unwrap());
    let node = ConditionalNode::new(h, If, &[empty.0]).unwrap();
    rt.graph_add_conditional_node(first, &[], node).unwrap();
    assert_eq!(rt.graph_add_conditional_node(second, &[], node).err(), Some(Error::InvalidValue));
    rt.graph_destroy(first).unwrap();
    rt.graph_add_conditional_node(second, &[], node).unwrap();
}

#[test]
fn destroying_an_executable_releases_its_body_queues_and_signals() {
    let f = fx();
    let remaining = cell32(3);
    let lb = f.rt.backend();
    let queues = lb.queues_in_use();
    let signals = lb.signals_in_use();
    let g = countdown_loop(&f, 1, remaining);
    let s = f.rt.stream_create(0).unwrap();
    let queues = queues + 1;
    let x = f.rt.graph_instantiate(g).unwrap();
    f.rt.graph_launch(x, s).unwrap();
    f.rt.stream_synchronize(s).unwrap();
    assert!(lb.queues_in_use() > queues);
    f.rt.graph_exec_destroy(x).unwrap();
    assert_eq!(lb.queues_in_use(), queues);
    assert_eq!(lb.signals_in_use(), signals + 1, "the stream's progress signal only");
    f.rt.graph_destroy(g).unwrap();
}

#[test]
fn body_queues_are_dedicated_and_outside_the_stream_pools_budget() {
    let f = fx();
    let rt = f.rt;
    rt.set_max_hw_queues(0, 1).unwrap();
    let s1 = rt.stream_create(0).unwrap();
    let q1 = queue_of(rt, s1);
    let remaining = cell32(0);
    let x = rt.graph_instantiate(countdown_loop(&f, 1, remaining)).unwrap();
    // The body queue is not the pool's: with a budget of one queue, a new stream still shares
    // the first stream's queue, and the executable's body queue takes no stream.
    let s2 = rt.stream_create(0).unwrap();
    assert_eq!(queue_of(rt, s2), q1);
    let lb = rt.backend();
    for s in [s1, s2] {
        remaining.store(5, Ordering::SeqCst);
        lb.clear_trace();
        rt.graph_launch(x, s).unwrap();
        rt.stream_synchronize(s).unwrap();
        assert_eq!(remaining.load(Ordering::SeqCst), 0);
        // Everything off the stream's queue is the scheduler's: one body queue, 5 iterations
        // of the body and the tail scheduler, then the exit barrier.
        let pkts = packets(lb);
        let body: Vec<&Pkt> = pkts.iter().filter(|p| p.queue != q1).collect();
        assert_eq!(body.len(), 5 * 2 + 1);
        assert!(body.iter().all(|p| p.queue == body[0].queue));
    }
    rt.graph_exec_destroy(x).unwrap();
}

#[test]
fn a_handle_lives_while_any_graph_using_it_does() {
    let f = fx();
    let rt = f.rt;
    let src = cell32(1);
    let hits = cell32(0);
    // The handle is made on `owner`, its node added to `g`; `owner` goes first.
    let owner = rt.graph_create().unwrap();
    let h = rt.graph_conditional_handle_create(owner, 0, 0).unwrap();
    let g = rt.graph_create().unwrap();
    let set = f.kernel(g, &[], f.set_from, &[h.0, addr32(src)]);
    f.cond(g, &[set], h, If, &[f.inc_body(hits)]);
    // SAFETY: `owner` and `g` each hold a reference to the cell.
    let cell = unsafe { h.cell() };
    assert_eq!(cell.refs.load(Ordering::SeqCst), 2);
    rt.graph_destroy(owner).unwrap();
    // The cell is still g's, and the graph runs.
    assert_eq!(cell.refs.load(Ordering::SeqCst), 1);
    f.run(g);
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    assert_eq!(cell.refs.load(Ordering::SeqCst), 1, "the destroyed executable dropped its reference");
    rt.graph_destroy(g).unwrap();
}
