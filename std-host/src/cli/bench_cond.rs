//! `aqueduct bench`'s conditional-graph figure, `while_loop_iteration`: what one iteration of a
//! WHILE loop costs when the device drives the loop (docs/conditional-graphs.md), beside the
//! same loop driven by the host.
//!
//! The body is the smallest that can end a loop: one countdown kernel, a host twin registered on
//! the emulated device (the one the conditional tests use) that decrements a counter in
//! host-visible memory and stores `counter != 0` into the condition word. A body run once too
//! often finds the counter at 0 and traps, which fails the run.
//!
//! - `while_loop_iteration`: a graph holding `WHILE(handle, default 1 at every launch) {
//!   countdown }`, instantiated once; a sample sets the counter to N, then times one launch and
//!   synchronise and divides by N (nothing subtracted: the launch, the entry scheduler, the exit
//!   and the synchronise are spread over the N iterations).
//! - floor `host_loop_iteration`: a graph holding the countdown kernel alone, launched and
//!   synchronised once per iteration by the host, which reads the counter after each
//!   synchronise and stops at 0; per iteration.
//!
//! N is 5000 (500 with `--short`). Both check their results: the counter reached 0 and the body
//! ran exactly N times. Target: ratio ≤ 0.2. Conditional nodes need a device-side doorbell and
//! the twin needs the emulator, so the figure is measured on the emulated device only; on
//! another backend it is left out with a note on stderr.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use aqueduct::conditional::{ConditionalKind, ConditionalNode, COND_ASSIGN_DEFAULT};
use aqueduct::Error;

use super::bench::{median, BenchOptions, Figure, Floor};
use crate::api::{Device, Dim3, Graph, GraphExec, HostBuffer, Kernel, KernelArgs, Stream};
use aqueduct_kfd_emu::KernelError;

/// Arguments of the countdown kernel.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct CountdownArgs {
    /// The counter (u32).
    counter: u64,
    /// The condition word to store `counter != 0` into (a conditional handle, or any u32).
    condition: u64,
}
// SAFETY: repr(C), two u64, no padding.
unsafe impl KernelArgs for CountdownArgs {}

/// The countdown kernel; `runs` counts its executions.
fn countdown_kernel(dev: &Device, runs: Arc<AtomicU64>) -> Result<Kernel<CountdownArgs>, Error> {
    dev.host_kernel::<CountdownArgs>("bench_countdown", move |ctx, _| {
        let (counter, condition) = (ctx.arg_u64(0), ctx.arg_u64(8));
        let left = ctx.mem.read_u32(counter)?.checked_sub(1).ok_or(KernelError::Trap)?;
        ctx.mem.write_u32(counter, left)?;
        // What aqdGraphSetConditional does: a 32-bit store to the handle's word.
        ctx.mem.write_u32(condition, u32::from(left != 0))?;
        // The runs of the body are serialised (each iteration waits for the one before, and a
        // host-driven iteration for its synchronise), so a load and a store count them.
        // Ordering: Relaxed; read after the synchronise that orders it.
        runs.store(runs.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        Ok(())
    })
}

/// The executable of `WHILE(handle, default 1 at every launch) { countdown }` (`cond`), or of
/// the countdown kernel alone.
fn exec_of<'d>(
    dev: &'d Device,
    k: &Kernel<CountdownArgs>,
    args: CountdownArgs,
    cond: bool,
) -> Result<GraphExec<'d>, Error> {
    let rt = dev.runtime();
    let g = Graph::new(dev)?;
    if !cond {
        k.with_launch(Dim3::x(1), Dim3::x(1), args.as_bytes(), |l| rt.graph_add_kernel_node(g.handle(), &[], l))?;
        return g.instantiate();
    }
    let h = rt.graph_conditional_handle_create(g.handle(), 1, COND_ASSIGN_DEFAULT)?;
    let body = Graph::new(dev)?;
    let args = CountdownArgs { condition: h.0, ..args };
    k.with_launch(Dim3::x(1), Dim3::x(1), args.as_bytes(), |l| rt.graph_add_kernel_node(body.handle(), &[], l))?;
    let node = ConditionalNode::new(h, ConditionalKind::While, &[body.handle().0])?;
    rt.graph_add_conditional_node(g.handle(), &[], node)?;
    // The body is flattened into the executable: both graphs may go afterwards.
    g.instantiate()
}

/// Checks one sample's outcome: the counter at 0, the body run `n` times.
fn check(what: &str, counter: &HostBuffer<'_, u32>, runs: &AtomicU64, n: u64) -> Result<(), String> {
    let left = counter.get(0).unwrap_or(u32::MAX);
    // Ordering: Relaxed; the synchronise before ordered the kernel's counting.
    let ran = runs.swap(0, Ordering::Relaxed);
    if left != 0 || ran != n {
        return Err(format!("{what}: the counter is at {left} after {ran} body runs (want 0 after {n})"));
    }
    Ok(())
}

fn sample_device(
    s: &Stream<'_>,
    x: &GraphExec<'_>,
    counter: &HostBuffer<'_, u32>,
    runs: &AtomicU64,
    n: u64,
) -> Result<f64, String> {
    counter.write(&[n as u32]);
    let t = Instant::now();
    x.launch(s).map_err(|e| format!("while loop launch: {e}"))?;
    s.synchronize().map_err(|e| format!("while loop synchronize: {e}"))?;
    let ns = t.elapsed().as_secs_f64() * 1e9 / n as f64;
    check("while_loop_iteration", counter, runs, n)?;
    Ok(ns)
}

fn sample_host(
    s: &Stream<'_>,
    x: &GraphExec<'_>,
    counter: &HostBuffer<'_, u32>,
    runs: &AtomicU64,
    n: u64,
) -> Result<f64, String> {
    counter.write(&[n as u32]);
    let t = Instant::now();
    let mut launches = 0u64;
    loop {
        x.launch(s).map_err(|e| format!("host loop launch: {e}"))?;
        s.synchronize().map_err(|e| format!("host loop synchronize: {e}"))?;
        launches += 1;
        if counter.get(0) == Some(0) || launches > n {
            break;
        }
    }
    let ns = t.elapsed().as_secs_f64() * 1e9 / n as f64;
    check("host_loop_iteration", counter, runs, n)?;
    Ok(ns)
}

/// `while_loop_iteration` beside its floor, on `dev` and stream `s`; `None` when the device is
/// not the emulated one (no host twins there).
pub(super) fn figures(dev: &Device, s: &Stream<'_>, bench: BenchOptions) -> Result<Option<(Figure, Floor)>, String> {
    let runs = Arc::new(AtomicU64::new(0));
    let k = match countdown_kernel(dev, Arc::clone(&runs)) {
        Ok(k) => k,
        Err(Error::NotSupported) => {
            eprintln!(
                "aqueduct bench: while_loop_iteration skipped: its body is a host twin, which needs the emulated \
                 device (`{}` selected)",
                dev.backend_kind().name()
            );
            return Ok(None);
        }
        Err(e) => return Err(format!("countdown kernel: {e}")),
    };
    let e = |what: &'static str| move |err: Error| format!("{what}: {err}");
    let counter = dev.alloc_host::<u32>(1).map_err(e("counter"))?;
    let scratch = dev.alloc_host::<u32>(1).map_err(e("condition word"))?;
    let samples = bench.samples.max(1);
    let n: u64 = if bench.short { 500 } else { 5000 };

    let args = CountdownArgs { counter: counter.address(), condition: scratch.address() };
    let looped = exec_of(dev, &k, args, true).map_err(e("while loop graph"))?;
    let single = exec_of(dev, &k, args, false).map_err(e("host loop graph"))?;

    // One untimed round of each first (queues created, caches warm).
    sample_device(s, &looped, &counter, &runs, n.min(100))?;
    sample_host(s, &single, &counter, &runs, n.min(100))?;
    let mut dev_ns = Vec::with_capacity(samples);
    let mut host_ns = Vec::with_capacity(samples);
    for _ in 0..samples {
        dev_ns.push(sample_device(s, &looped, &counter, &runs, n)?);
        host_ns.push(sample_host(s, &single, &counter, &runs, n)?);
    }
    let host = median(host_ns);
    let figure = Figure {
        name: "while_loop_iteration",
        ns: median(dev_ns),
        floor: Some("host_loop_iteration"),
        floor_ns: Some(host),
        target: "<= 0.2x host-driven loop",
    };
    let floor = Floor {
        name: "host_loop_iteration",
        ns: host,
        what: "countdown graph launched + synchronized per iteration, ns per iteration",
    };
    Ok(Some((figure, floor)))
}
