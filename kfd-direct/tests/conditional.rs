//! Conditional graph nodes through core's `Runtime` over kfd-direct on the emulated GPU: the
//! scheduler is the blit code object's `aqueduct_graph_scheduler`, run by its twin on the
//! emulator's compute-unit workers, and it publishes the bodies into the nodes' body queues
//! itself — the host neither publishes nor calls into the driver while a loop runs.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aqueduct::conditional::{ConditionalHandle, ConditionalKind, ConditionalNode, COND_ASSIGN_DEFAULT};
use aqueduct::{Backend, GraphHandle, KernelLaunch, MemoryKind, NodeId, Runtime, SingleThread};
use aqueduct_kfd::{EmuSys, Kfd, KfdConfig};
use aqueduct_kfd_emu::{EmuConfig, Twin};

const DEADLOCK_GUARD: Duration = Duration::from_secs(60);

type Rt = Runtime<Kfd<EmuSys>, SingleThread>;

struct Setup {
    rt: Rt,
    sys: EmuSys,
    /// `*a0 += 1`.
    inc: u64,
    /// `*a0 -= 1; condition(a1) = *a0 != 0; if *a0 == 0 { done = true }`.
    countdown: u64,
    /// `condition(a0) = *a1`.
    set_from: u64,
    done: Arc<AtomicBool>,
}

fn setup() -> Setup {
    let sys = EmuSys::new(EmuConfig::default().cus(2)).unwrap();
    let emu = sys.emu();
    let inc = emu.register_kernel(Twin::new("inc", 8, |ctx, _| {
        let a = ctx.arg_u64(0);
        ctx.mem.write_u32(a, ctx.mem.read_u32(a)? + 1)
    }));
    let done = Arc::new(AtomicBool::new(false));
    let d = Arc::clone(&done);
    let countdown = emu.register_kernel(Twin::new("countdown", 16, move |ctx, _| {
        let (a, handle) = (ctx.arg_u64(0), ctx.arg_u64(8));
        let left = ctx.mem.read_u32(a)? - 1;
        ctx.mem.write_u32(a, left)?;
        // What aqdGraphSetConditional does: store the handle's word.
        ctx.mem.write_u32(handle, u32::from(left != 0))?;
        if left == 0 {
            d.store(true, Ordering::Release);
        }
        Ok(())
    }));
    let set_from = emu.register_kernel(Twin::new("set_from", 16, |ctx, _| {
        let (handle, src) = (ctx.arg_u64(0), ctx.arg_u64(8));
        ctx.mem.write_u32(handle, ctx.mem.read_u32(src)?)
    }));
    let rt = Runtime::new(Kfd::open(sys.clone(), KfdConfig::default()).unwrap(), SingleThread);
    Setup { rt, sys, inc, countdown, set_from, done }
}

fn launch(k: u64, args: &[u8]) -> KernelLaunch<'_> {
    KernelLaunch {
        kernel_object: k,
        grid: [1, 1, 1],
        workgroup: [1, 1, 1],
        group_segment_size: 0,
        private_segment_size: 0,
        kernarg: args,
    }
}

fn args(words: &[u64]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// A u32 of host-visible device memory, set to `v`.
fn cell(rt: &Rt, v: u32) -> u64 {
    let a = rt.backend().memory_alloc(0, 16, MemoryKind::Host).unwrap();
    write(a, v);
    a
}

fn cell_of(a: u64) -> &'static AtomicU32 {
    // SAFETY: a live, aligned u32 of host-visible memory the test allocated and never frees.
    unsafe { AtomicU32::from_ptr(a as usize as *mut u32) }
}

fn read(a: u64) -> u32 {
    cell_of(a).load(Ordering::SeqCst)
}

fn write(a: u64, v: u32) {
    cell_of(a).store(v, Ordering::SeqCst);
}

impl Setup {
    fn kernel(&self, g: GraphHandle, deps: &[NodeId], k: u64, words: &[u64]) -> NodeId {
        self.rt.graph_add_kernel_node(g, deps, &launch(k, &args(words))).unwrap()
    }

    fn inc_body(&self, c: u64) -> GraphHandle {
        let b = self.rt.graph_create().unwrap();
        self.kernel(b, &[], self.inc, &[c]);
        b
    }

    fn cond(
        &self,
        g: GraphHandle,
        deps: &[NodeId],
        h: ConditionalHandle,
        kind: ConditionalKind,
        bodies: &[GraphHandle],
    ) {
        let raw: Vec<u64> = bodies.iter().map(|b| b.0).collect();
        self.rt.graph_add_conditional_node(g, deps, ConditionalNode::new(h, kind, &raw).unwrap()).unwrap();
    }

    /// `WHILE(h, default 1 at every launch) { countdown(remaining, h) }`.
    fn countdown_loop(&self, remaining: u64) -> GraphHandle {
        let g = self.rt.graph_create().unwrap();
        let h = self.rt.graph_conditional_handle_create(g, 1, COND_ASSIGN_DEFAULT).unwrap();
        let body = self.rt.graph_create().unwrap();
        self.kernel(body, &[], self.countdown, &[remaining, h.0]);
        self.cond(g, &[], h, ConditionalKind::While, &[body]);
        g
    }
}

#[test]
fn if_else_and_switch_pick_their_bodies_on_the_emulated_gpu() {
    let e = setup();
    let src = cell(&e.rt, 0);
    let hits: Vec<u64> = (0..3).map(|_| cell(&e.rt, 0)).collect();
    let bodies: Vec<GraphHandle> = hits.iter().map(|c| e.inc_body(*c)).collect();
    let s = e.rt.stream_create(0).unwrap();
    let run = |kind, bodies: &[GraphHandle]| {
        let g = e.rt.graph_create().unwrap();
        let h = e.rt.graph_conditional_handle_create(g, 0, 0).unwrap();
        let set = e.kernel(g, &[], e.set_from, &[h.0, src]);
        e.cond(g, &[set], h, kind, bodies);
        let x = e.rt.graph_instantiate(g).unwrap();
        // The executable outlives its graph (and keeps the handle's word).
        e.rt.graph_destroy(g).unwrap();
        x
    };
    let if_else = run(ConditionalKind::If, &bodies[..2]);
    let counts = || hits.iter().map(|c| read(*c)).collect::<Vec<_>>();
    for (v, want) in [(0, [0, 1, 0]), (9, [1, 1, 0])] {
        write(src, v);
        e.rt.graph_launch(if_else, s).unwrap();
        e.rt.stream_synchronize(s).unwrap();
        assert_eq!(counts(), want, "IF/ELSE, value {v}");
    }
    // The bodies' graphs are copied into the executables: the same graphs serve the SWITCH.
    let switch = run(ConditionalKind::Switch, &bodies);
    for (v, want) in [(2, [1, 1, 1]), (0, [2, 1, 1]), (7, [2, 1, 1])] {
        write(src, v);
        e.rt.graph_launch(switch, s).unwrap();
        e.rt.stream_synchronize(s).unwrap();
        assert_eq!(counts(), want, "SWITCH, value {v}");
    }
}

#[test]
fn while_runs_zero_and_one_iterations() {
    let e = setup();
    let s = e.rt.stream_create(0).unwrap();
    let remaining = cell(&e.rt, 1);
    let x = e.rt.graph_instantiate(e.countdown_loop(remaining)).unwrap();
    e.rt.graph_launch(x, s).unwrap();
    e.rt.stream_synchronize(s).unwrap();
    assert_eq!(read(remaining), 0);
    // Zero iterations: a handle whose default is 0.
    let g = e.rt.graph_create().unwrap();
    let h = e.rt.graph_conditional_handle_create(g, 0, COND_ASSIGN_DEFAULT).unwrap();
    let body = e.inc_body(remaining);
    e.cond(g, &[], h, ConditionalKind::While, &[body]);
    let x = e.rt.graph_instantiate(g).unwrap();
    e.rt.graph_launch(x, s).unwrap();
    e.rt.stream_synchronize(s).unwrap();
    assert_eq!(read(remaining), 0);
}

#[test]
fn a_thousand_iterations_run_with_no_host_work_between_them() {
    let e = setup();
    let s = e.rt.stream_create(0).unwrap();
    let remaining = cell(&e.rt, 1000);
    let x = e.rt.graph_instantiate(e.countdown_loop(remaining)).unwrap();
    e.rt.graph_launch(x, s).unwrap();
    let stream_ring = e.rt.with_stream_queue(s, |q| e.rt.backend().queue_desc(q).unwrap().ring).unwrap();
    // From here the host only watches memory: no runtime call, no driver call, and nothing
    // more published on the stream's queue while the device runs the loop.
    let published = stream_ring.write_index();
    e.sys.set_tracing(true);
    let end = Instant::now() + DEADLOCK_GUARD;
    while !e.done.load(Ordering::Acquire) {
        assert!(Instant::now() < end, "the loop did not finish: {} left", read(remaining));
        std::thread::yield_now();
    }
    let calls = e.sys.calls();
    e.sys.set_tracing(false);
    assert!(calls.is_empty(), "driver calls while the loop ran: {calls:?}");
    assert_eq!(stream_ring.write_index(), published);
    assert_eq!(read(remaining), 0);
    e.rt.stream_synchronize(s).unwrap();
    // Relaunch: the default is assigned again on the device.
    e.done.store(false, Ordering::Release);
    write(remaining, 1000);
    e.rt.graph_launch(x, s).unwrap();
    e.rt.stream_synchronize(s).unwrap();
    assert_eq!(read(remaining), 0);
    e.rt.graph_exec_destroy(x).unwrap();
    e.rt.stream_destroy(s).unwrap();
}

#[test]
fn nested_if_inside_while_on_the_emulated_gpu() {
    let e = setup();
    let remaining = cell(&e.rt, 6);
    let odd = cell(&e.rt, 0);
    let g = e.rt.graph_create().unwrap();
    let outer = e.rt.graph_conditional_handle_create(g, 1, COND_ASSIGN_DEFAULT).unwrap();
    let inner = e.rt.graph_conditional_handle_create(g, 0, 0).unwrap();
    let body = e.rt.graph_create().unwrap();
    let c = e.kernel(body, &[], e.countdown, &[remaining, outer.0]);
    let set = e.kernel(body, &[c], e.set_from, &[inner.0, remaining]);
    let then = e.inc_body(odd);
    e.cond(body, &[set], inner, ConditionalKind::If, &[then]);
    e.cond(g, &[], outer, ConditionalKind::While, &[body]);
    let s = e.rt.stream_create(0).unwrap();
    let x = e.rt.graph_instantiate(g).unwrap();
    e.rt.graph_launch(x, s).unwrap();
    e.rt.stream_synchronize(s).unwrap();
    assert_eq!((read(remaining), read(odd)), (0, 5));
}

#[test]
fn a_fault_in_a_body_kernel_is_reported_on_the_stream() {
    let e = setup();
    let bad_va = 0x7000_dead_0000u64;
    let oob = e.sys.emu().register_kernel(Twin::new("oob", 0, move |ctx, _| ctx.mem.write_u32(bad_va, 1)));
    let remaining = cell(&e.rt, 3);
    let after = cell(&e.rt, 0);
    // WHILE { countdown; oob } then inc(after): the second kernel of the first iteration faults.
    let g = e.rt.graph_create().unwrap();
    let h = e.rt.graph_conditional_handle_create(g, 1, COND_ASSIGN_DEFAULT).unwrap();
    let body = e.rt.graph_create().unwrap();
    let c = e.kernel(body, &[], e.countdown, &[remaining, h.0]);
    e.kernel(body, &[c], oob, &[]);
    let raw = [body.0];
    let node = e.rt.graph_add_conditional_node(g, &[], ConditionalNode::new(h, ConditionalKind::While, &raw).unwrap());
    e.kernel(g, &[node.unwrap()], e.inc, &[after]);
    let s = e.rt.stream_create(0).unwrap();
    let x = e.rt.graph_instantiate(g).unwrap();
    e.rt.graph_launch(x, s).unwrap();
    // amdkfd evicts every queue of the process on a VM fault: the body queue's fault reaches
    // the stream, whose wait returns instead of waiting for a node that can never finish.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        scope.spawn(|| tx.send(e.rt.stream_synchronize(s)).unwrap());
        let r = rx.recv_timeout(DEADLOCK_GUARD).expect("the stream's wait did not return after the fault");
        assert_eq!(r, Err(aqueduct::Error::IllegalAddress));
    });
    assert_eq!(read(remaining), 2, "one iteration started, none after the fault");
    assert_eq!(read(after), 0, "the node after the loop never ran");
    assert_eq!(e.rt.graph_launch(x, s), Err(aqueduct::Error::IllegalAddress), "sticky");
    // The executable and its body queue go without waiting for work that cannot finish.
    e.rt.graph_exec_destroy(x).unwrap();
    e.rt.stream_destroy(s).unwrap();
}
