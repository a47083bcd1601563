//! Submit-path benchmarks for the "Performance budget" of docs/architecture.md, each figure beside
//! the floor measured in the same process run.
//!
//! Criterion groups first, then a summary table from a quick `Instant` loop (best of 5):
//!
//! - **packet floor**: [`PacketFloor::submit`], core's one floor body (also what `aqueduct bench`
//!   runs): atomic add on a 64-bit write index, the 60-byte body written with plain stores, a
//!   release store of dword 0, a 64-bit doorbell store, on a 64-byte aligned ring in ordinary
//!   memory;
//! - **ring**: [`AqlRing::reserve`] + [`Reservation::write`] of a [`KernelDispatchPacket`] +
//!   `finish` + the same doorbell store, on a ring over this file's memory;
//! - **launch_kernel, submit only**: [`Runtime::launch_kernel`] over a backend that wraps the
//!   loopback but defers its doorbell, so packets run outside the timed region;
//! - **launch_kernel on the loopback**: the loopback runs the dispatch synchronously when the
//!   doorbell rings, so this figure includes execution;
//! - **stream create + destroy** on the loopback, steady state;
//! - **handle validation** (`stream_priority`) with 1 and with 1024 live streams.
//!
//! Rings are refilled between timed chunks of `RING` operations (read index caught up, or the
//! deferred doorbells rung) outside the timed region.
//!
//! [`PacketFloor::submit`]: aqueduct::floor::PacketFloor::submit
//! [`AqlRing::reserve`]: aqueduct::aql::AqlRing::reserve
//! [`Reservation::write`]: aqueduct::aql::Reservation::write

use std::cell::{RefCell, UnsafeCell};
use std::hint::black_box;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use aqueduct::aql::{
    AqlRing, Condition, KernelDispatchPacket, Packet, QueueFault, DEFAULT_ROOM_SPINS, DISPATCH_HEADER,
};
use aqueduct::floor::PacketFloor;
use aqueduct::loopback::{Dispatch, Loopback, LoopbackMemory, LoopbackQueue};
use aqueduct::{
    Backend, BuiltinKernel, CuMask, DeviceInfo, HostFn, KernelLaunch, KernelSymbol, MemoryKind, Priority, QueueDesc,
    Result, Runtime, SignalHandle, SingleThread, StreamHandle, Timeout, VariableSymbol,
};
use criterion::Criterion;

/// Packets per ring (floor, direct ring and the launch runtimes): operations per timed chunk.
const RING: usize = 1024;
/// Kernel-argument bytes per ring slot on the loopbacks.
const KARG: usize = 64;
/// Queues of the launch loopbacks.
const LAUNCH_Q: usize = 4;

/// The default tables with the launch loopbacks' sizes.
type LaunchDevice = aqueduct::Capacities<32, 64, 8, 64, 4, 32, 2, 40, 16, 8, LAUNCH_Q, RING, KARG, 32, 4096>;
type LaunchMem = LoopbackMemory<LaunchDevice>;
type LaunchLoopback = Loopback<'static, LaunchDevice>;

/// Create/destroy: the loopback's default queue and signal counts, the runtime's default capacities.
const CREATE_Q: usize = 40;
type CreateDevice = aqueduct::Capacities<32, 64, 8, 64, 4, 32, 2, 40, 16, 8, CREATE_Q, 8, KARG, 160, 4096>;
type CreateMem = LoopbackMemory<CreateDevice>;
type CreateLoopback = Loopback<'static, CreateDevice>;

/// Validation: 1100 stream slots, one queue and one progress signal per stream.
const VALIDATE_S: usize = 1100;
type ValidateDevice = aqueduct::Capacities<32, 64, 8, 64, 4, 32, 2, 40, 16, 8, VALIDATE_S, 8, KARG, 1200, 4096>;
type ValidateMem = LoopbackMemory<ValidateDevice>;
type ValidateLoopback = Loopback<'static, ValidateDevice>;

static EXEC_MEM: LaunchMem = LoopbackMemory::new();
static DEFERRED_MEM: LaunchMem = LoopbackMemory::new();
static CREATE_MEM: CreateMem = LoopbackMemory::new();
static VALIDATE_ONE_MEM: ValidateMem = LoopbackMemory::new();
static VALIDATE_MANY_MEM: ValidateMem = LoopbackMemory::new();

// ----- the direct ring ---------------------------------------------------------------------------

#[repr(C, align(64))]
struct Slot(UnsafeCell<[u32; 16]>);

/// A ring in ordinary memory with its indices and doorbell, for the direct ring.
struct Ring {
    slots: Box<[Slot; RING]>,
    write: AtomicU64,
    read: AtomicU64,
    doorbell: AtomicU64,
}

impl Ring {
    fn new() -> Self {
        Ring {
            slots: Box::new([const { Slot(UnsafeCell::new([0; 16])) }; RING]),
            write: AtomicU64::new(0),
            read: AtomicU64::new(0),
            doorbell: AtomicU64::new(0),
        }
    }

    /// An [`AqlRing`] over this ring's memory.
    fn aql(&self) -> AqlRing {
        let base = NonNull::from(&*self.slots).cast::<u8>();
        // SAFETY: `slots` is RING * 64 bytes, 64-byte aligned, and lives (boxed) as long as
        // `self`; the indices are `AtomicU64`s with the same in-memory representation as `u64`
        // (std's and portable-atomic's alike), cast to the type `AqlRing::new` takes. The caller
        // uses the returned ring only while `self` lives.
        unsafe { AqlRing::new(base, RING as u32, NonNull::from(&self.write).cast(), NonNull::from(&self.read).cast()) }
            .expect("ring of a power-of-two size, 64-byte aligned")
    }

    /// Retires everything published (outside the timed region): the ring has room for RING again.
    fn catch_up(&self) {
        self.read.store(self.write.load(Ordering::Acquire), Ordering::Release);
    }
}

fn dispatch_template() -> KernelDispatchPacket {
    KernelDispatchPacket {
        header: DISPATCH_HEADER.0,
        setup: 3,
        workgroup_size_x: 64,
        workgroup_size_y: 1,
        workgroup_size_z: 1,
        grid_size_x: 1024,
        grid_size_y: 1,
        grid_size_z: 1,
        kernel_object: 0x7f00_0000_1000,
        kernarg_address: 0x1000,
        completion_signal: 0x40,
        ..Default::default()
    }
}

/// The direct ring path: reserve, write the dispatch, finish, doorbell (as the floor stores it).
#[inline]
fn ring_submit(aql: &AqlRing, doorbell: &AtomicU64, packet: &KernelDispatchPacket) {
    let mut res = aql.reserve(1, DEFAULT_ROOM_SPINS).expect("room: the ring is caught up every RING operations");
    res.write(packet);
    let last = res.finish();
    doorbell.store(last, Ordering::Release);
}

// ----- a loopback whose doorbell is deferred -----------------------------------------------------

/// The loopback with its doorbell deferred: `ring_doorbell` only stores the value (what a
/// hardware doorbell is), and [`Deferred::drain`] rings the loopback's own doorbell later, outside
/// the timed region, so the loopback runs the packets then.
struct Deferred {
    inner: LaunchLoopback,
    /// Per queue: last doorbell value + 1, 0 when nothing is pending.
    pending: [AtomicU64; LAUNCH_Q],
}

impl Deferred {
    fn drain(&self) {
        for (q, p) in self.pending.iter().enumerate() {
            let v = p.swap(0, Ordering::AcqRel);
            if v != 0 {
                self.inner.ring_doorbell(&LoopbackQueue(q as u32), v - 1);
            }
        }
    }
}

// SAFETY: every call goes to the loopback, which upholds the contract, except `ring_doorbell`,
// whose packets are announced to the loopback by `drain`; `signal_wait` drains first, and the
// bench drains before each timed chunk, so every published packet is eventually processed.
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
            p.store(index.wrapping_add(1), Ordering::Release);
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

// ----- fixtures ----------------------------------------------------------------------------------

fn noop_kernel(_: &Dispatch) -> core::result::Result<(), QueueFault> {
    Ok(())
}

const KERNARG: [u8; 16] = [7; 16];

struct Fixtures {
    /// Borrowed once per timed run (`submit` takes `&mut`: one producer).
    floor: RefCell<Box<PacketFloor<RING>>>,
    ring: Ring,
    dispatch: KernelDispatchPacket,
    floor_packet: [u32; 16],
    deferred: Box<Runtime<Deferred, SingleThread, aqueduct::Capacities<4, 4, 1, 4>>>,
    deferred_stream: StreamHandle,
    deferred_kernel: u64,
    exec: Box<Runtime<LaunchLoopback, SingleThread, aqueduct::Capacities<4, 4, 1, 4>>>,
    exec_stream: StreamHandle,
    exec_kernel: u64,
    create: Box<Runtime<CreateLoopback, SingleThread>>,
    /// A runtime with one live stream.
    validate_one: Box<ValidateRuntime>,
    validate_one_stream: StreamHandle,
    /// The same configuration with 1024 live streams.
    validate_many: Box<ValidateRuntime>,
    validate_many_streams: Vec<StreamHandle>,
}

type ValidateRuntime = Runtime<ValidateLoopback, SingleThread, aqueduct::Capacities<VALIDATE_S, 4, 1, 4>>;

impl Fixtures {
    fn new() -> Self {
        let dispatch = dispatch_template();
        let floor_packet = *dispatch.words();

        let deferred = Box::new(Runtime::new(
            Deferred { inner: Loopback::new(&DEFERRED_MEM), pending: [const { AtomicU64::new(0) }; LAUNCH_Q] },
            SingleThread,
        ));
        let deferred_kernel = deferred.backend().inner.register_kernel(noop_kernel).expect("kernel slot");
        let deferred_stream = deferred.stream_create(0).expect("stream");

        let exec = Box::new(Runtime::new(Loopback::new(&EXEC_MEM), SingleThread));
        let exec_kernel = exec.backend().register_kernel(noop_kernel).expect("kernel slot");
        let exec_stream = exec.stream_create(0).expect("stream");

        let create = Box::new(Runtime::new(Loopback::new(&CREATE_MEM), SingleThread));
        let validate_one = Box::new(Runtime::new(Loopback::new(&VALIDATE_ONE_MEM), SingleThread));
        let validate_one_stream = validate_one.stream_create(0).expect("stream");
        let validate_many = Box::new(Runtime::new(Loopback::new(&VALIDATE_MANY_MEM), SingleThread));
        let validate_many_streams: Vec<StreamHandle> =
            (0..1024).map(|_| validate_many.stream_create(0).expect("stream slot")).collect();

        Fixtures {
            floor: RefCell::new(Box::new(PacketFloor::new())),
            ring: Ring::new(),
            dispatch,
            floor_packet,
            deferred,
            deferred_stream,
            deferred_kernel,
            exec,
            exec_stream,
            exec_kernel,
            create,
            validate_one,
            validate_one_stream,
            validate_many,
            validate_many_streams,
        }
    }

    fn launch(&self, kernel_object: u64) -> KernelLaunch<'static> {
        KernelLaunch {
            kernel_object,
            grid: [1024, 1, 1],
            workgroup: [64, 1, 1],
            group_segment_size: 0,
            private_segment_size: 0,
            kernarg: &KERNARG,
        }
    }

    /// Checks that the launch runtimes did their work (after the timed loops).
    fn verify(&self) {
        self.deferred.stream_synchronize(self.deferred_stream).expect("deferred stream drains");
        self.exec.stream_synchronize(self.exec_stream).expect("loopback stream completes");
        assert!(self.deferred.backend().inner.queues_in_use() >= 1);
        let floor = self.floor.borrow();
        assert_eq!(floor.doorbell(), floor.submitted() - 1, "the floor rang its doorbell for every packet");
    }
}

// ----- timing ------------------------------------------------------------------------------------

/// Times `iters` calls of `op` in chunks of at most `chunk`, running `reset` (untimed) before each.
fn chunked(iters: u64, chunk: u64, mut reset: impl FnMut(), mut op: impl FnMut()) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let n = left.min(chunk);
        reset();
        let t = Instant::now();
        for _ in 0..n {
            op();
        }
        total += t.elapsed();
        left -= n;
    }
    total
}

/// Nanoseconds per operation: best of `runs` runs of `iters` operations.
fn best_ns(runs: u32, iters: u64, mut run: impl FnMut(u64) -> Duration) -> f64 {
    (0..runs).map(|_| run(iters).as_secs_f64() * 1e9 / iters as f64).fold(f64::INFINITY, f64::min)
}

// Each operation once, so criterion and the summary time the same code.

fn op_floor(f: &Fixtures, iters: u64) -> Duration {
    let packet = black_box(&f.floor_packet);
    let mut floor = f.floor.borrow_mut();
    chunked(iters, RING as u64, || {}, || floor.submit(packet))
}

fn op_floor_fenced(f: &Fixtures, iters: u64) -> Duration {
    let packet = black_box(&f.floor_packet);
    let mut floor = f.floor.borrow_mut();
    chunked(iters, RING as u64, || {}, || floor.submit_fenced(packet))
}

fn op_ring(f: &Fixtures, iters: u64) -> Duration {
    let aql = f.ring.aql();
    let packet = black_box(&f.dispatch);
    chunked(iters, RING as u64, || f.ring.catch_up(), || ring_submit(&aql, &f.ring.doorbell, packet))
}

fn op_launch_deferred(f: &Fixtures, iters: u64) -> Duration {
    let launch = f.launch(f.deferred_kernel);
    let rt = &*f.deferred;
    chunked(
        iters,
        RING as u64,
        || rt.backend().drain(),
        || rt.launch_kernel(black_box(f.deferred_stream), black_box(&launch)).expect("launch"),
    )
}

fn op_launch_exec(f: &Fixtures, iters: u64) -> Duration {
    let launch = f.launch(f.exec_kernel);
    let rt = &*f.exec;
    chunked(iters, u64::MAX, || {}, || rt.launch_kernel(black_box(f.exec_stream), black_box(&launch)).expect("launch"))
}

fn op_create_destroy(f: &Fixtures, iters: u64) -> Duration {
    let rt = &*f.create;
    chunked(
        iters,
        u64::MAX,
        || {},
        || {
            let s = rt.stream_create(black_box(0)).expect("stream create");
            rt.stream_destroy(black_box(s)).expect("stream destroy");
        },
    )
}

fn op_validate_one(f: &Fixtures, iters: u64) -> Duration {
    let rt = &*f.validate_one;
    let h = f.validate_one_stream;
    chunked(
        iters,
        u64::MAX,
        || {},
        || {
            black_box(rt.stream_priority(black_box(h)).expect("live"));
        },
    )
}

fn op_validate_many_last(f: &Fixtures, iters: u64) -> Duration {
    let rt = &*f.validate_many;
    let h = *f.validate_many_streams.last().expect("a stream");
    chunked(
        iters,
        u64::MAX,
        || {},
        || {
            black_box(rt.stream_priority(black_box(h)).expect("live"));
        },
    )
}

fn op_validate_cycle(f: &Fixtures, iters: u64) -> Duration {
    let rt = &*f.validate_many;
    let hs = &f.validate_many_streams;
    let mut k = 0usize;
    chunked(
        iters,
        u64::MAX,
        || {},
        || {
            black_box(rt.stream_priority(black_box(hs[k])).expect("live"));
            k += 1;
            if k == hs.len() {
                k = 0;
            }
        },
    )
}

// ----- criterion -----------------------------------------------------------------------------------

fn criterion_groups(c: &mut Criterion, f: &Fixtures) {
    {
        let mut g = c.benchmark_group("submit");
        g.bench_function("packet_floor", |b| b.iter_custom(|n| op_floor(f, n)));
        g.bench_function("packet_floor_seqcst_fence", |b| b.iter_custom(|n| op_floor_fenced(f, n)));
        g.bench_function("aql_ring_reserve_write_finish_doorbell", |b| b.iter_custom(|n| op_ring(f, n)));
        g.bench_function("launch_kernel_submit_only", |b| b.iter_custom(|n| op_launch_deferred(f, n)));
        g.bench_function("launch_kernel_loopback_with_execution", |b| b.iter_custom(|n| op_launch_exec(f, n)));
        g.finish();
    }
    {
        let mut g = c.benchmark_group("stream");
        g.bench_function("create_destroy", |b| b.iter_custom(|n| op_create_destroy(f, n)));
        g.finish();
    }
    {
        let mut g = c.benchmark_group("validate");
        g.bench_function("stream_priority_1_live", |b| b.iter_custom(|n| op_validate_one(f, n)));
        g.bench_function("stream_priority_1024_live_same", |b| b.iter_custom(|n| op_validate_many_last(f, n)));
        g.bench_function("stream_priority_1024_live_cycling", |b| b.iter_custom(|n| op_validate_cycle(f, n)));
        g.finish();
    }
}

// ----- summary ---------------------------------------------------------------------------------

struct Row {
    operation: &'static str,
    measured: f64,
    floor: Option<(&'static str, f64)>,
    target: &'static str,
}

fn print_table(rows: &[Row], runs: u32) {
    println!();
    println!("summary (std::time::Instant, best of {runs}; ns per operation)");
    println!("operation | measured | floor | ratio | target");
    println!("--- | --- | --- | --- | ---");
    for r in rows {
        let (floor, ratio) = match r.floor {
            Some((name, ns)) => (format!("{ns:.2} ns ({name})"), format!("{:.2}x", r.measured / ns)),
            None => ("-".to_string(), "-".to_string()),
        };
        println!("{} | {:.2} ns | {} | {} | {}", r.operation, r.measured, floor, ratio, r.target);
    }
}

/// The summary table: fast operations `fast` times, slow ones `slow` times, best of `runs`.
fn summary(f: &Fixtures, runs: u32, fast: u64, slow: u64) {
    let floor = best_ns(runs, fast, |n| op_floor(f, n));
    let floor_fenced = best_ns(runs, fast, |n| op_floor_fenced(f, n));
    let ring = best_ns(runs, fast, |n| op_ring(f, n));
    let deferred = best_ns(runs, fast, |n| op_launch_deferred(f, n));
    let exec = best_ns(runs, slow, |n| op_launch_exec(f, n));
    let create = best_ns(runs, slow, |n| op_create_destroy(f, n));
    let v1 = best_ns(runs, fast, |n| op_validate_one(f, n));
    let v1024 = best_ns(runs, fast, |n| op_validate_many_last(f, n));
    let v1024c = best_ns(runs, fast, |n| op_validate_cycle(f, n));

    let pf = Some(("packet floor", floor));
    let rows = [
        Row {
            operation: "packet floor (aqueduct::floor)",
            measured: floor,
            floor: pf,
            target: "~5 ns on a current x86 core",
        },
        Row {
            operation: "packet floor + SeqCst fence before doorbell (reference)",
            measured: floor_fenced,
            floor: pf,
            target: "(reference)",
        },
        Row {
            operation: "AqlRing reserve + write(dispatch) + finish + doorbell store",
            measured: ring,
            floor: pf,
            target: "<= 2x packet floor",
        },
        Row {
            operation: "launch_kernel, submit only (loopback, doorbell deferred)",
            measured: deferred,
            floor: pf,
            target: "<= 2x packet floor",
        },
        Row {
            operation: "launch_kernel on loopback (incl. synchronous execution)",
            measured: exec,
            floor: pf,
            target: "(not a budget row: includes execution)",
        },
        Row {
            operation: "stream create + destroy (loopback, S=32, Q=40)",
            measured: create,
            floor: None,
            target: "<= 200 ns",
        },
        Row { operation: "stream_priority, 1 live stream", measured: v1, floor: None, target: "O(1)" },
        Row {
            operation: "stream_priority, 1024 live, same handle",
            measured: v1024,
            floor: Some(("1 live stream", v1)),
            target: "flat: ~1.0x",
        },
        Row {
            operation: "stream_priority, 1024 live, cycling all handles",
            measured: v1024c,
            floor: Some(("1 live stream", v1)),
            target: "flat: ~1.0x",
        },
    ];
    print_table(&rows, runs);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // `cargo bench` passes --bench; `cargo test --benches` does not (criterion then runs each
    // benchmark once as a test), so the summary shrinks to a smoke run.
    let benchmarking = args.iter().any(|a| a == "--bench") && !args.iter().any(|a| a == "--test");
    let mut c = Criterion::default()
        .sample_size(20)
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_secs(1))
        .configure_from_args();
    let f = Fixtures::new();
    // A profiling run (docs/architecture.md, "The submit path, instruction by instruction"):
    // `AQUEDUCT_PROFILE_ENQUEUES=N` runs N deferred launches and nothing else, so that
    // `perf stat` over two values of N gives the instructions of one enqueue.
    if let Some(n) = std::env::var("AQUEDUCT_PROFILE_ENQUEUES").ok().and_then(|v| v.parse::<u64>().ok()) {
        let d = op_launch_deferred(&f, n);
        println!("{n} launches (submit only): {:.2} ns each", d.as_secs_f64() * 1e9 / n.max(1) as f64);
        f.deferred.stream_synchronize(f.deferred_stream).expect("deferred stream drains");
        return;
    }
    criterion_groups(&mut c, &f);
    c.final_summary();
    if benchmarking {
        summary(&f, 5, 1_000_000, 200_000);
    } else {
        summary(&f, 1, 1_000, 1_000);
    }
    f.verify();
}
