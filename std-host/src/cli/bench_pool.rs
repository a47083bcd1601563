//! `aqueduct bench` figures of the queue pool and the lock-free submit path, on core's loopback
//! with its doorbell deferred (the doorbell only stores a value, as a hardware doorbell does;
//! the packets run outside the timed region), each beside its floor from the same run:
//!
//! - `enqueue_loopback`: one thread launching on one stream; floor: the packet floor;
//! - `enqueue_two_threads_scaling`: two threads launching on two streams (each its own queue);
//!   `ns` is one thread's time per launch, `floor_ns` the two threads' aggregate time per launch,
//!   so `ratio` is the two threads' aggregate throughput over one thread's (target >= 1.7);
//! - `stream_create_destroy_pooled`: create + destroy when the stream's queue is pooled already
//!   (no queue is created); `stream_create_first_of_key`: the same when each stream has a new key
//!   (a queue is created and an idle one given back);
//! - `validate_enqueue_1`, `validate_enqueue_4096`: a launch on one stream of 1 and of 4096 live
//!   streams (flat: the floor is the 1-stream figure);
//! - `capture_instantiate_per_node_{10,100,1000,10000}`: capture a chain of kernels and
//!   instantiate it, per node; floor: copying as many 64-byte packets.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use aqueduct::aql::{Condition, QueueFault};
use aqueduct::loopback::{Dispatch, Loopback, LoopbackMemory, LoopbackQueue};
use aqueduct::{
    Backend, BuiltinKernel, Capacities, CuMask, DeviceInfo, HostFn, KernelLaunch, KernelSymbol, MemoryKind, Priority,
    QueueDesc, Result, Runtime, SignalHandle, SingleThread, StreamHandle, Timeout, VariableSymbol,
};

use super::bench::Figure;
use crate::threads::StdThreadKeys;

/// Queues of the enqueue loopback; packets per ring (a whole timed run fits, no drain inside).
const Q: usize = 4;
const RING: usize = 1 << 16;
/// The default tables with the enqueue loopback's sizes (4200 signals, 4 KiB of heap).
type Device = Capacities<32, 64, 8, 64, 4, 32, 2, 40, 16, 8, Q, RING, 64, 4200, 4096>;
type Mem = LoopbackMemory<Device>;
type Lb = Loopback<'static, Device>;

/// The loopback with its doorbell deferred: `ring_doorbell` stores the value per queue (no lock,
/// no trace), [`Deferred::drain`] runs the packets later.
struct Deferred {
    inner: Lb,
    pending: [Pad; Q],
}

/// One doorbell value per cache line (two threads ringing two queues share nothing).
#[repr(align(128))]
struct Pad(AtomicU64);

impl Deferred {
    fn drain(&self) {
        for (q, p) in self.pending.iter().enumerate() {
            // Ordering: AcqRel; takes the latest doorbell value.
            let v = p.0.swap(0, Ordering::AcqRel);
            if v != 0 {
                self.inner.ring_doorbell(&LoopbackQueue(q as u32), v - 1);
            }
        }
    }
}

// SAFETY: every call goes to the loopback, which upholds the contract, except `ring_doorbell`,
// whose packets are announced to the loopback by `drain`; `signal_wait` drains first and the
// benchmark drains after each timed run, so every published packet is eventually processed.
unsafe impl Backend for Deferred {
    type Queue = LoopbackQueue;
    type Module = core::convert::Infallible;

    fn device_count(&self) -> u32 {
        self.inner.device_count()
    }
    fn device_info(&self, device: u32) -> Result<DeviceInfo> {
        self.inner.device_info(device)
    }
    fn queue_create(&self, device: u32, priority: Priority, cu_mask: Option<&CuMask>) -> Result<LoopbackQueue> {
        self.inner.queue_create(device, priority, cu_mask)
    }
    fn queue_desc(&self, queue: &LoopbackQueue) -> Result<QueueDesc> {
        self.inner.queue_desc(queue)
    }
    fn ring_doorbell(&self, queue: &LoopbackQueue, index: u64) {
        if let Some(p) = self.pending.get(queue.0 as usize) {
            // Ordering: Release; the packets' headers are stored before.
            p.0.store(index.wrapping_add(1), Ordering::Release);
        }
    }
    fn queue_fault(&self, queue: &LoopbackQueue) -> Option<aqueduct::Error> {
        self.inner.queue_fault(queue)
    }
    fn queue_destroy(&self, queue: LoopbackQueue) {
        self.inner.queue_destroy(queue)
    }
    fn signal_create(&self, initial: i64) -> Result<SignalHandle> {
        self.inner.signal_create(initial)
    }
    fn signal_destroy(&self, signal: SignalHandle) {
        self.inner.signal_destroy(signal)
    }
    fn signal_wait(&self, signal: SignalHandle, cond: Condition, expected: i64, timeout: Timeout) -> Result<i64> {
        self.drain();
        self.inner.signal_wait(signal, cond, expected, timeout)
    }
    fn memory_alloc(&self, device: u32, bytes: usize, kind: MemoryKind) -> Result<u64> {
        self.inner.memory_alloc(device, bytes, kind)
    }
    fn memory_free(&self, address: u64) -> Result<()> {
        self.inner.memory_free(address)
    }
    fn host_register(&self, device: u32, host: u64, bytes: usize) -> Result<u64> {
        self.inner.host_register(device, host, bytes)
    }
    fn host_unregister(&self, device_address: u64) -> Result<()> {
        self.inner.host_unregister(device_address)
    }
    fn vmem_create(&self, device: u32, bytes: usize) -> Result<u64> {
        self.inner.vmem_create(device, bytes)
    }
    fn vmem_release(&self, handle: u64) -> Result<()> {
        self.inner.vmem_release(handle)
    }
    fn vmem_reserve(&self, bytes: usize, alignment: usize, hint: u64) -> Result<u64> {
        self.inner.vmem_reserve(bytes, alignment, hint)
    }
    fn vmem_free(&self, address: u64) -> Result<()> {
        self.inner.vmem_free(address)
    }
    fn vmem_map(&self, address: u64, handle: u64) -> Result<()> {
        self.inner.vmem_map(address, handle)
    }
    fn vmem_unmap(&self, address: u64) -> Result<()> {
        self.inner.vmem_unmap(address)
    }
    fn vmem_set_access(&self, address: u64, device: u32, access: bool) -> Result<()> {
        self.inner.vmem_set_access(address, device, access)
    }
    fn builtin_kernel(&self, device: u32, kernel: BuiltinKernel) -> Result<u64> {
        self.inner.builtin_kernel(device, kernel)
    }
    fn module_load(&self, device: u32, code_object: &[u8]) -> Result<Self::Module> {
        self.inner.module_load(device, code_object)
    }
    fn module_kernel(&self, module: &Self::Module, name: &str) -> Result<KernelSymbol> {
        self.inner.module_kernel(module, name)
    }
    fn module_variable(&self, module: &Self::Module, name: &str) -> Result<VariableSymbol> {
        self.inner.module_variable(module, name)
    }
    fn module_image(&self, module: &Self::Module) -> Option<(u64, u64)> {
        self.inner.module_image(module)
    }
    fn module_unload(&self, module: Self::Module) -> Result<()> {
        self.inner.module_unload(module)
    }
    fn reserve_scratch(&self, device: u32, bytes_per_work_item: u32) -> Result<()> {
        self.inner.reserve_scratch(device, bytes_per_work_item)
    }
    fn host_call(&self, start: SignalHandle, done: SignalHandle, f: HostFn) -> Result<()> {
        self.inner.host_call(start, done, f)
    }
    fn timestamp(&self) -> u64 {
        self.inner.timestamp()
    }
}

fn noop(_: &Dispatch) -> std::result::Result<(), QueueFault> {
    Ok(())
}

fn per(d: Duration, n: u64) -> f64 {
    d.as_secs_f64() * 1e9 / n.max(1) as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Zeroed loopback memory on the heap (megabytes: never on the stack).
fn memory() -> &'static Mem {
    let layout = std::alloc::Layout::new::<Mem>();
    // SAFETY: the layout is Mem's (not zero-sized); all-zero is LoopbackMemory's initial state
    // (`LoopbackMemory::new` is zeros); the allocation is leaked for the process's life.
    unsafe {
        let p = std::alloc::alloc_zeroed(layout).cast::<Mem>();
        assert!(!p.is_null(), "out of memory");
        &*p
    }
}

/// 4100 streams (validation), a budget of 4 queues.
type Big = Capacities<4100, 16, 4, 8, 1, 8, 1, 8, 4>;
type EnqueueRt = Runtime<Deferred, StdThreadKeys, Big>;

fn enqueue_runtime() -> Result<(Box<EnqueueRt>, u64)> {
    let rt = std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(|| {
            Box::new(Runtime::new(
                Deferred { inner: Loopback::new(memory()), pending: [const { Pad(AtomicU64::new(0)) }; Q] },
                StdThreadKeys,
            ))
        })
        .map_err(|_| aqueduct::Error::OutOfMemory)?
        .join()
        .map_err(|_| aqueduct::Error::OutOfMemory)?;
    let k = rt.backend().inner.register_kernel(noop)?;
    Ok((rt, k))
}

static ARGS: [u8; 16] = [7; 16];

fn launch(k: u64) -> KernelLaunch<'static> {
    KernelLaunch {
        kernel_object: k,
        grid: [64, 1, 1],
        workgroup: [64, 1, 1],
        group_segment_size: 0,
        private_segment_size: 0,
        kernarg: &ARGS,
    }
}

/// `n` launches on `s`, ns per launch (the ring holds them all).
fn enqueue(rt: &EnqueueRt, s: StreamHandle, k: u64, n: u64) -> Result<f64> {
    let l = launch(k);
    let t = Instant::now();
    for _ in 0..n {
        rt.launch_kernel(black_box(s), black_box(&l))?;
    }
    let ns = per(t.elapsed(), n);
    rt.stream_synchronize(s)?;
    Ok(ns)
}

/// Two threads, `n` launches each on its own stream: aggregate ns per launch.
fn enqueue_two(rt: &EnqueueRt, s: [StreamHandle; 2], k: u64, n: u64) -> Result<f64> {
    let start = std::sync::Barrier::new(2);
    let t = std::thread::scope(|sc| {
        let hs = s.map(|si| {
            let start = &start;
            sc.spawn(move || -> Result<Duration> {
                let l = launch(k);
                start.wait();
                let t = Instant::now();
                for _ in 0..n {
                    rt.launch_kernel(black_box(si), black_box(&l))?;
                }
                Ok(t.elapsed())
            })
        });
        let mut worst = Duration::ZERO;
        for h in hs {
            let d = h.join().map_err(|_| aqueduct::Error::Unknown)??;
            worst = worst.max(d);
        }
        Ok::<Duration, aqueduct::Error>(worst)
    })?;
    for si in s {
        rt.stream_synchronize(si)?;
    }
    Ok(per(t, 2 * n))
}

/// The figures; `packet` is the packet floor measured by the caller in the same run.
pub fn figures(samples: usize, short: bool, packet: f64) -> std::result::Result<Vec<Figure>, String> {
    let e = |what: &'static str| move |err: aqueduct::Error| format!("{what}: {err}");
    let n = if short { 2_000 } else { 30_000 };
    let mut out = Vec::new();
    let (rt, k) = enqueue_runtime().map_err(e("runtime"))?;
    let a = rt.stream_create(1).map_err(e("stream"))?;
    let b = rt.stream_create(1).map_err(e("stream"))?;
    let one = median((0..samples).map(|_| enqueue(&rt, a, k, n).unwrap_or(f64::NAN)).collect());
    out.push(Figure {
        name: "enqueue_loopback",
        ns: one,
        floor: Some("packet"),
        floor_ns: Some(packet),
        target: "<= 2x packet floor",
    });
    let two = median((0..samples).map(|_| enqueue_two(&rt, [a, b], k, n).unwrap_or(f64::NAN)).collect());
    out.push(Figure {
        name: "enqueue_two_threads_scaling",
        ns: one,
        floor: Some("two threads, aggregate per launch"),
        floor_ns: Some(two),
        target: "ratio >= 1.7 (aggregate over one thread)",
    });
    // Validate + enqueue on `a` with 1 and with 4096 live streams (the others of another
    // priority, so `a` keeps its own queue and only the number of live streams changes).
    let v1 = median((0..samples).map(|_| enqueue(&rt, a, k, n).unwrap_or(f64::NAN)).collect());
    let mut many = Vec::new();
    for _ in 0..4096 {
        many.push(rt.stream_create_with_priority(1, -1).map_err(e("4096 streams"))?);
    }
    let v4096 = median((0..samples).map(|_| enqueue(&rt, a, k, n).unwrap_or(f64::NAN)).collect());
    out.push(Figure {
        name: "validate_enqueue_1",
        ns: v1,
        floor: Some("packet"),
        floor_ns: Some(packet),
        target: "O(1)",
    });
    out.push(Figure {
        name: "validate_enqueue_4096",
        ns: v4096,
        floor: Some("validate_enqueue_1"),
        floor_ns: Some(v1),
        target: "flat: ~1.0x",
    });
    for s in many {
        rt.stream_destroy(s).map_err(e("destroy"))?;
    }
    // Create + destroy with the queue pooled (the key's queues exist), and with a new key each
    // time (a queue created, an idle one given back).
    let m = if short { 2_000 } else { 50_000 };
    let pooled = median(
        (0..samples)
            .map(|_| {
                let t = Instant::now();
                for _ in 0..m {
                    let s = rt.stream_create(black_box(1)).unwrap_or(StreamHandle::NULL);
                    let _ = rt.stream_destroy(black_box(s));
                }
                per(t.elapsed(), m)
            })
            .collect(),
    );
    out.push(Figure {
        name: "stream_create_destroy_pooled",
        ns: pooled,
        floor: None,
        floor_ns: None,
        target: "<= 200 ns",
    });
    let keyed = median(
        (0..samples)
            .map(|_| {
                let t = Instant::now();
                for i in 0..1000u32 {
                    // 64 CU masks: more keys than queue slots, so every create makes a queue.
                    let s = rt
                        .stream_create_with_cu_mask(&[1 << (i % 32), 1 << (i / 32 % 2)])
                        .unwrap_or(StreamHandle::NULL);
                    let _ = rt.stream_destroy(black_box(s));
                }
                per(t.elapsed(), 1000)
            })
            .collect(),
    );
    out.push(Figure {
        name: "stream_create_first_of_key",
        ns: keyed,
        floor: Some("stream_create_destroy_pooled"),
        floor_ns: Some(pooled),
        target: "(queue creation on the loopback)",
    });
    out.extend(capture_figures(samples, short)?);
    Ok(out)
}

/// Capture + instantiate per node at 10 .. 10,000 nodes on the loopback.
fn capture_figures(samples: usize, short: bool) -> std::result::Result<Vec<Figure>, String> {
    /// 4 streams, 4 events, 1 thread, 8 host functions, 2 graphs of 16384 nodes, 1 executable,
    /// 4 queue slots and 4 hardware queues; a loopback of 2 queues of 16384 packets, 64 signals and
    /// 8 MiB of heap.
    type GSizes = Capacities<4, 4, 1, 8, 2, 16384, 1, 4, 4, 8, 2, 16384, 64, 64, { 8 << 20 }>;
    type GMem = LoopbackMemory<GSizes>;
    type GLb = Loopback<'static, GSizes>;
    type GRt = Runtime<GLb, SingleThread, GSizes>;
    let e = |what: &'static str| move |err: aqueduct::Error| format!("{what}: {err}");
    let layout = std::alloc::Layout::new::<GMem>();
    // SAFETY: as in `memory`.
    let mem: &'static GMem = unsafe {
        let p = std::alloc::alloc_zeroed(layout).cast::<GMem>();
        assert!(!p.is_null(), "out of memory");
        &*p
    };
    let rt: Box<GRt> = std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(move || Box::new(Runtime::new(Loopback::new(mem), SingleThread)))
        .map_err(|err| err.to_string())?
        .join()
        .map_err(|_| "runtime".to_string())?;
    let k = rt.backend().register_kernel(noop).map_err(e("kernel"))?;
    let s = rt.stream_create(1).map_err(e("stream"))?;
    let l = launch(k);
    let mut out = Vec::new();
    for (nodes, name) in [
        (10usize, "capture_instantiate_per_node_10"),
        (100, "capture_instantiate_per_node_100"),
        (1000, "capture_instantiate_per_node_1000"),
        (10_000, "capture_instantiate_per_node_10000"),
    ] {
        let iters = ((if short { 20_000 } else { 200_000 }) / nodes).max(2);
        let one = |count: bool| -> aqueduct::Result<Duration> {
            let t = Instant::now();
            rt.stream_begin_capture(s, 2)?;
            for _ in 0..nodes {
                rt.launch_kernel(s, &l)?;
            }
            let g = rt.stream_end_capture(s)?;
            let x = rt.graph_instantiate(g)?;
            let d = t.elapsed();
            rt.graph_exec_destroy(x)?;
            rt.graph_destroy(g)?;
            Ok(if count { d } else { Duration::ZERO })
        };
        one(false).map_err(e("warm-up capture"))?;
        let ns = median(
            (0..samples)
                .map(|_| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        total += one(true).unwrap_or(Duration::from_secs(1));
                    }
                    per(total, (iters * nodes) as u64)
                })
                .collect(),
        );
        let floor = copy_floor(nodes, iters as u64);
        out.push(Figure { name, ns, floor: Some("copy"), floor_ns: Some(floor), target: "<= 100 ns per node" });
    }
    Ok(out)
}

/// Copying `packets` 64-byte packets: ns per packet.
fn copy_floor(packets: usize, iters: u64) -> f64 {
    let src = vec![[0x5a5a_5a5au32; 16]; packets];
    let mut dst = vec![[0u32; 16]; packets];
    let t = Instant::now();
    for _ in 0..iters {
        dst.copy_from_slice(black_box(&src));
        black_box(&mut dst);
    }
    per(t.elapsed(), iters * packets as u64)
}
