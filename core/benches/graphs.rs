//! Graph benchmarks for the "Performance budget" of docs/architecture.md, each beside its floor
//! measured in the same run:
//!
//! - **capture + instantiate**, per node: begin a capture, launch `n` kernels into it, end it,
//!   instantiate the graph (destroying both afterwards, outside the timing); floor: copying the
//!   same number of 64-byte packets;
//! - **graph launch**, per node, for 10, 100 and 1000 nodes: `graph_launch` of an instantiated
//!   chain on a loopback whose doorbell is deferred (the packets run after the timing); floor:
//!   copying the launch's packet bytes into a ring.
//!
//! Prints a table "operation | measured | floor | ratio | target".

use std::hint::black_box;
use std::time::{Duration, Instant};

use aqueduct::aql::QueueFault;
use aqueduct::loopback::{Dispatch, Loopback, LoopbackMemory};
use aqueduct::{GraphExecHandle, KernelLaunch, Runtime, SingleThread, StreamHandle};

/// Most nodes per graph in this bench.
const NODES: usize = 1024;
/// Ring packets: a whole 1000-node launch fits.
const RING: usize = 2048;
const SIG: usize = 64;

/// 4 streams, 4 events, 2 threads, 8 host functions, 2 graphs of `NODES` nodes, 1 executable;
/// a loopback of 2 queues of `RING` packets, `SIG` signals, 1 MiB of heap (a 1000-node graph keeps
/// its packets and kernel arguments there).
type Sizes = aqueduct::Capacities<4, 4, 2, 8, 2, NODES, 1, 40, 16, 8, 2, RING, 64, SIG, { 1 << 20 }>;
type Mem = LoopbackMemory<Sizes>;
type Lb = Loopback<'static, Sizes>;
type Rt = Runtime<Lb, SingleThread, Sizes>;

static MEM: Mem = LoopbackMemory::new();

fn empty_kernel(_: &Dispatch) -> Result<(), QueueFault> {
    Ok(())
}

struct Fixture {
    rt: Box<Rt>,
    stream: StreamHandle,
    kernel: u64,
}

impl Fixture {
    fn new() -> Self {
        let rt: Box<Rt> = Box::new(Runtime::new(Loopback::new(&MEM), SingleThread));
        let kernel = rt.backend().register_kernel(empty_kernel).expect("kernel slot");
        let stream = rt.stream_create(1).expect("stream");
        Fixture { rt, stream, kernel }
    }

    fn launch(&self) -> KernelLaunch<'static> {
        static ARGS: [u8; 16] = [7; 16];
        KernelLaunch {
            kernel_object: self.kernel,
            grid: [64, 1, 1],
            workgroup: [64, 1, 1],
            group_segment_size: 0,
            private_segment_size: 0,
            kernarg: &ARGS,
        }
    }

    /// Captures a chain of `n` kernels and instantiates it.
    fn capture_instantiate(&self, n: usize) -> (aqueduct::GraphHandle, GraphExecHandle) {
        let launch = self.launch();
        self.rt.stream_begin_capture(self.stream, 2).expect("begin");
        for _ in 0..n {
            self.rt.launch_kernel(self.stream, &launch).expect("captured launch");
        }
        let g = self.rt.stream_end_capture(self.stream).expect("end");
        let x = self.rt.graph_instantiate(g).expect("instantiate");
        (g, x)
    }
}

/// Best of `runs` timings of `iters` calls of `f`, in ns per call.
fn best(runs: u32, iters: u64, mut f: impl FnMut() -> Duration) -> f64 {
    (0..runs).map(|_| f().as_nanos() as f64 / iters as f64).fold(f64::INFINITY, f64::min)
}

/// Copying `packets` 64-byte packets into a ring buffer: the floor of publishing them.
fn copy_floor(packets: usize, iters: u64) -> Duration {
    let src = vec![[0x5a5a_5a5au32; 16]; packets];
    let mut dst = vec![[0u32; 16]; RING];
    let start = Instant::now();
    for _ in 0..iters {
        let n = packets.min(RING);
        dst[..n].copy_from_slice(black_box(&src[..n]));
        black_box(&mut dst);
    }
    start.elapsed()
}

fn main() {
    let quick = !std::env::args().any(|a| a == "--bench");
    let (runs, scale) = if quick { (1, 1) } else { (5, 20) };
    let f = Fixture::new();
    println!("graph benchmarks (std::time::Instant, best of {runs}; ns)");
    println!("operation | measured | floor | ratio | target");
    println!("--- | --- | --- | --- | ---");
    for n in [10usize, 100, 1000] {
        let iters = (scale * 2000 / n as u64).max(1);
        let per_node = best(runs, iters * n as u64, || {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let start = Instant::now();
                let (g, x) = f.capture_instantiate(n);
                total += start.elapsed();
                f.rt.graph_exec_destroy(x).expect("exec destroy");
                f.rt.graph_destroy(g).expect("graph destroy");
            }
            total
        });
        let floor = best(runs, iters * n as u64, || copy_floor(n, iters));
        println!(
            "capture + instantiate, {n} nodes, per node | {per_node:.2} ns | {floor:.2} ns (copy {n} packets) | {:.1}x | <= 100 ns per node",
            per_node / floor
        );
    }
    let lb = f.rt.backend();
    for n in [10usize, 100, 1000] {
        let (g, x) = f.capture_instantiate(n);
        let iters = (scale * 20_000 / n as u64).max(1);
        lb.set_deferred(true);
        let per_node = best(runs, iters * n as u64, || {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let start = Instant::now();
                f.rt.graph_launch(black_box(x), black_box(f.stream)).expect("launch");
                total += start.elapsed();
                lb.pump();
            }
            total
        });
        lb.set_deferred(false);
        f.rt.stream_synchronize(f.stream).expect("sync");
        let floor = best(runs, iters * n as u64, || copy_floor(n + 1, iters));
        println!(
            "graph launch, {n} nodes, per node | {per_node:.2} ns | {floor:.2} ns (copy {} packets) | {:.1}x | <= 2 ns per node at 1000",
            n + 1,
            per_node / floor
        );
        f.rt.graph_exec_destroy(x).expect("exec destroy");
        f.rt.graph_destroy(g).expect("graph destroy");
    }
}
