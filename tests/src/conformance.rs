//! Cross-backend conformance: the same stream, event, capture, graph, detach and fault scenarios
//! over every backend available — core's loopback and kfd-direct on the emulated GPU (in order
//! and in the emulator's adversarial mode). Each scenario is a generic function over a
//! [`Target`], which builds runtimes and provides the three kernels the scenarios need, with
//! their arguments in backend memory so that the emulated GPU can reach them.
//!
//! Kernels (arguments are little-endian u64s):
//! - `inc(addr)`: `*(u32*)addr += 1`;
//! - `log(addr, id)`: appends `id` to the log at `addr` (`u32` count, then `u32` entries);
//! - `fail()`: stops its queue with a kernel error.

use std::sync::atomic::{AtomicU32, Ordering};

use aqueduct::aql::QueueFault;
use aqueduct::loopback::{Dispatch, Loopback};
use aqueduct::{Backend, Error, HostFn, KernelLaunch, Runtime, StreamHandle, Timeout};
use aqueduct_kfd::{EmuSys, Kfd, KfdConfig, WaitMode};
use aqueduct_kfd_emu::{EmuConfig, KernelError, Twin};

use crate::{leak, Mem, StdThreads};

/// Kernel objects of the scenario kernels on one runtime.
#[derive(Debug, Clone, Copy)]
pub struct Kernels {
    /// `inc(addr)`.
    pub inc: u64,
    /// `log(addr, id)`.
    pub log: u64,
    /// `fail()`.
    pub fail: u64,
}

/// A backend the scenarios run on.
pub trait Target {
    /// The backend.
    type B: Backend + 'static;
    /// A name for messages.
    fn name(&self) -> &'static str;
    /// A fresh runtime (one device unless the target says otherwise) and its kernels.
    fn runtime(&self) -> (Box<Runtime<Self::B, StdThreads>>, Kernels);
    /// Enqueues on `s` work of known duration on the device's timestamp clock: it ends at least
    /// `ticks` ticks after the work before it on `s` ended.
    fn enqueue_ticks(&self, rt: &Runtime<Self::B, StdThreads>, k: &Kernels, s: StreamHandle, ticks: u64);
}

/// Milliseconds of `ticks` ticks at `hz`, rounded as `event_elapsed_time` rounds them (so more
/// ticks never give fewer milliseconds).
pub fn ticks_ms(ticks: u64, hz: u64) -> f32 {
    (ticks as f64 * 1000.0 / hz as f64) as f32
}

/// What [`spin_host_fn`] needs: the backend whose clock it reads and how far to let it run.
struct ClockSpin<B> {
    backend: *const B,
    ticks: u64,
}

/// A host function that returns once the device clock (`Backend::timestamp`, the clock of
/// signal timestamps) has advanced by `ticks` since it started: work of known device duration
/// on a device whose clock runs on its own. Spinning on the device clock is no wall-clock
/// sleep: it waits for exactly the quantity the test measures.
unsafe extern "C" fn spin_host_fn<B: Backend>(data: *mut core::ffi::c_void) {
    // SAFETY: `data` is the ClockSpin that `enqueue_clock_spin` leaked for this one call; the
    // runtime (and with it the backend) outlives every host function it runs.
    let spin = unsafe { Box::from_raw(data.cast::<ClockSpin<B>>()) };
    // SAFETY: as above.
    let backend = unsafe { &*spin.backend };
    let start = backend.timestamp();
    while backend.timestamp().wrapping_sub(start) < spin.ticks {
        std::hint::spin_loop();
    }
}

/// Enqueues [`spin_host_fn`] on `s`.
fn enqueue_clock_spin<B: Backend>(rt: &Runtime<B, StdThreads>, s: StreamHandle, ticks: u64) {
    let data = Box::into_raw(Box::new(ClockSpin { backend: rt.backend() as *const B, ticks }));
    let f = HostFn::Plain { func: spin_host_fn::<B>, data: data.cast() };
    if let Err(e) = rt.launch_host_func(s, f) {
        // SAFETY: refused, so never called: the box is still ours.
        drop(unsafe { Box::from_raw(data) });
        panic!("launch_host_func: {e:?}");
    }
}

fn lb_inc(d: &Dispatch) -> core::result::Result<(), QueueFault> {
    // SAFETY: `inc` launches pass one u64 address of a live, aligned u32 in backend memory.
    let addr: u64 = unsafe { d.args() };
    // SAFETY: as above.
    let c = unsafe { AtomicU32::from_ptr(addr as usize as *mut u32) };
    c.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

fn lb_log(d: &Dispatch) -> core::result::Result<(), QueueFault> {
    // SAFETY: `log` launches pass (address of a log in backend memory, id).
    let (addr, id): (u64, u64) = unsafe { d.args() };
    // SAFETY: the log is live, aligned backend memory of LOG_BYTES.
    unsafe { log_append(addr, id as u32) };
    Ok(())
}

fn lb_fail(_d: &Dispatch) -> core::result::Result<(), QueueFault> {
    Err(QueueFault::KernelError)
}

/// Bytes of a log.
pub const LOG_BYTES: usize = 4 + 4 * 255;

/// # Safety
/// `addr` must be a live, 4-aligned log of [`LOG_BYTES`].
unsafe fn log_append(addr: u64, id: u32) {
    // SAFETY: caller's contract.
    let count = unsafe { AtomicU32::from_ptr(addr as usize as *mut u32) };
    let n = count.load(Ordering::SeqCst);
    if n < 255 {
        // SAFETY: entry n lies inside the log.
        let e = unsafe { AtomicU32::from_ptr((addr as usize + 4 + 4 * n as usize) as *mut u32) };
        e.store(id, Ordering::SeqCst);
        count.store(n + 1, Ordering::SeqCst);
    }
}

/// Core's loopback backend.
#[derive(Debug, Clone, Copy)]
pub struct LoopbackTarget;

impl Target for LoopbackTarget {
    type B = Loopback<'static, aqueduct::config::Default>;

    fn name(&self) -> &'static str {
        "loopback"
    }

    /// The loopback clock ticks once at each packet's start and once at its end
    /// (`LOOPBACK_TIMESTAMP_HZ`), so each kernel between two records adds two ticks.
    fn enqueue_ticks(&self, rt: &Runtime<Self::B, StdThreads>, k: &Kernels, s: StreamHandle, ticks: u64) {
        let scratch = cell(rt);
        for _ in 0..ticks.div_ceil(2) {
            launch(rt, s, k.inc, &args1(scratch)).unwrap();
        }
    }

    fn runtime(&self) -> (Box<Runtime<Self::B, StdThreads>>, Kernels) {
        let rt = Box::new(Runtime::new(Loopback::new(leak(Mem::new())), StdThreads));
        let b = rt.backend();
        let k = Kernels {
            inc: b.register_kernel(lb_inc).expect("register"),
            log: b.register_kernel(lb_log).expect("register"),
            fail: b.register_kernel(lb_fail).expect("register"),
        };
        (rt, k)
    }
}

/// kfd-direct over the emulated GPU.
#[derive(Debug, Clone)]
pub struct KfdEmuTarget {
    /// The emulated machine.
    pub config: EmuConfig,
    /// How waits wait.
    pub wait: WaitMode,
}

impl KfdEmuTarget {
    /// One gfx90a, in-order command processor.
    pub fn new() -> Self {
        KfdEmuTarget { config: EmuConfig::default(), wait: WaitMode::Hybrid(50_000) }
    }

    /// The emulator's adversarial mode (barrier-less dispatches overlap and finish out of order).
    pub fn adversarial(seed: u64) -> Self {
        KfdEmuTarget { config: EmuConfig::default().adversarial(seed), wait: WaitMode::Hybrid(50_000) }
    }
}

impl Default for KfdEmuTarget {
    fn default() -> Self {
        Self::new()
    }
}

/// Registers the scenario kernels' host twins on an emulator.
pub fn emu_kernels(sys: &EmuSys) -> Kernels {
    let emu = sys.emu();
    Kernels {
        inc: emu.register_kernel(Twin::new("inc", 8, |ctx, _| {
            let a = ctx.arg_u64(0);
            let v = ctx.mem.read_u32(a)?;
            ctx.mem.write_u32(a, v.wrapping_add(1))
        })),
        log: emu.register_kernel(Twin::new("log", 16, |ctx, _| {
            let (a, id) = (ctx.arg_u64(0), ctx.arg_u64(8));
            let n = ctx.mem.read_u32(a)?;
            if n < 255 {
                ctx.mem.write_u32(a + 4 + 4 * u64::from(n), id as u32)?;
                ctx.mem.write_u32(a, n + 1)?;
            }
            Ok(())
        })),
        fail: emu.register_kernel(Twin::new("fail", 0, |_, _| Err(KernelError::Trap))),
    }
}

impl Target for KfdEmuTarget {
    type B = Kfd<EmuSys>;

    fn name(&self) -> &'static str {
        if self.config.adversarial_seed.is_some() {
            "kfd-direct on the emulator (adversarial)"
        } else {
            "kfd-direct on the emulator"
        }
    }

    fn runtime(&self) -> (Box<Runtime<Self::B, StdThreads>>, Kernels) {
        let sys = EmuSys::new(self.config.clone()).expect("emulator");
        let k = emu_kernels(&sys);
        let kfd =
            Kfd::open(sys, KfdConfig { wait: self.wait, ..KfdConfig::default() }).expect("kfd-direct on the emulator");
        (Box::new(Runtime::new(kfd, StdThreads)), k)
    }

    /// The emulated GPU clock runs on its own: a host function spins until it has advanced.
    fn enqueue_ticks(&self, rt: &Runtime<Self::B, StdThreads>, _: &Kernels, s: StreamHandle, ticks: u64) {
        enqueue_clock_spin(rt, s, ticks);
    }
}

// ----- helpers ---------------------------------------------------------------------------------

fn args1(a: u64) -> [u8; 8] {
    a.to_le_bytes()
}

fn args2(a: u64, b: u64) -> [u8; 16] {
    let mut x = [0u8; 16];
    x[..8].copy_from_slice(&a.to_le_bytes());
    x[8..].copy_from_slice(&b.to_le_bytes());
    x
}

fn launch<B: Backend>(rt: &Runtime<B, StdThreads>, s: StreamHandle, kernel: u64, args: &[u8]) -> aqueduct::Result<()> {
    rt.launch_kernel(
        s,
        &KernelLaunch {
            kernel_object: kernel,
            grid: [1, 1, 1],
            workgroup: [1, 1, 1],
            group_segment_size: 0,
            private_segment_size: 0,
            kernarg: args,
        },
    )
}

/// A zeroed log in backend host memory.
fn new_log<B: Backend>(rt: &Runtime<B, StdThreads>) -> u64 {
    let a = rt.host_malloc(LOG_BYTES).expect("log");
    // SAFETY: fresh host-visible backend memory of LOG_BYTES.
    unsafe { std::ptr::write_bytes(a as usize as *mut u8, 0, LOG_BYTES) };
    a
}

/// The ids in a log.
pub fn log_ids(addr: u64) -> Vec<u32> {
    // SAFETY: logs are live backend memory for the test's duration.
    let n = unsafe { AtomicU32::from_ptr(addr as usize as *mut u32) }.load(Ordering::SeqCst);
    let entry = |i: u32| {
        // SAFETY: as above; entries below the count are written.
        unsafe { AtomicU32::from_ptr((addr as usize + 4 + 4 * i as usize) as *mut u32) }.load(Ordering::SeqCst)
    };
    (0..n).map(entry).collect()
}

fn read32(addr: u64) -> u32 {
    // SAFETY: backend host-visible memory owned by the scenario.
    unsafe { AtomicU32::from_ptr(addr as usize as *mut u32) }.load(Ordering::SeqCst)
}

fn cell<B: Backend>(rt: &Runtime<B, StdThreads>) -> u64 {
    let a = rt.host_malloc(64).expect("cell");
    // SAFETY: fresh backend memory.
    unsafe { std::ptr::write_bytes(a as usize as *mut u8, 0, 64) };
    a
}

// ----- scenarios -------------------------------------------------------------------------------

/// A stream runs its work in FIFO order, and synchronize waits for all of it.
pub fn stream_fifo_order<T: Target>(t: &T) {
    let (rt, k) = t.runtime();
    let rt = &*rt;
    let s = rt.stream_create(0).unwrap();
    let log = new_log(rt);
    for id in 1..=24 {
        launch(rt, s, k.log, &args2(log, id)).unwrap();
    }
    rt.stream_synchronize(s).unwrap();
    assert_eq!(log_ids(log), (1..=24).collect::<Vec<_>>(), "{}", t.name());
    rt.stream_query(s).unwrap();
    rt.stream_destroy(s).unwrap();
}

/// Copies and fills through the built-in kernels land, in order.
pub fn copies_and_fills<T: Target>(t: &T) {
    let (rt, _) = t.runtime();
    let rt = &*rt;
    let s = rt.stream_create(1).unwrap();
    let a = rt.malloc(8192).unwrap();
    let b = rt.malloc(8192).unwrap();
    rt.memset_async(s, a, 0x11, 1, 8192).unwrap();
    rt.memset_async(s, a + 4096, 0xdead_beef, 4, 1024).unwrap();
    rt.memcpy_async(s, b, a, 8192).unwrap();
    rt.write_value32(s, b, 7, 0).unwrap();
    rt.stream_synchronize(s).unwrap();
    // SAFETY: backend memory is host-visible on these targets; the work completed.
    let v = unsafe { std::slice::from_raw_parts(b as usize as *const u32, 2048) };
    assert_eq!(v[0], 7, "{}", t.name());
    assert!(v[1..1024].iter().all(|&x| x == 0x1111_1111), "{}", t.name());
    assert!(v[1024..].iter().all(|&x| x == 0xdead_beef), "{}", t.name());
    rt.memset(a, 0, 8192).unwrap();
    rt.memcpy(b, a, 16).unwrap();
    assert_eq!(v[0], 0, "{}", t.name());
    rt.free(a).unwrap();
    rt.free(b).unwrap();
    assert_eq!(rt.free(a), Err(Error::InvalidValue), "{}", t.name());
    rt.stream_destroy(s).unwrap();
}

/// Events: record, query, synchronize, elapsed time, and cross-stream waits.
pub fn events_order_streams<T: Target>(t: &T) {
    let (rt, k) = t.runtime();
    let rt = &*rt;
    let s1 = rt.stream_create(1).unwrap();
    let s2 = rt.stream_create(1).unwrap();
    let log = new_log(rt);
    let e0 = rt.event_create(0).unwrap();
    let e1 = rt.event_create(0).unwrap();
    // Between the records: work lasting at least 2 ms of device time.
    let hz = rt.backend().device_info(0).unwrap().timestamp_frequency;
    let ticks = hz / 500;
    rt.event_record(e0, s1, 0).unwrap();
    for id in 1..=4 {
        launch(rt, s1, k.log, &args2(log, id)).unwrap();
    }
    t.enqueue_ticks(rt, &k, s1, ticks);
    rt.event_record(e1, s1, 0).unwrap();
    rt.stream_wait_event(s2, e1, 0).unwrap();
    launch(rt, s2, k.log, &args2(log, 100)).unwrap();
    rt.stream_synchronize(s2).unwrap();
    assert_eq!(log_ids(log), vec![1, 2, 3, 4, 100], "{}", t.name());
    rt.event_synchronize(e1).unwrap();
    rt.event_query(e1).unwrap();
    let ms = rt.event_elapsed_time(e0, e1).unwrap();
    let min = ticks_ms(ticks, hz);
    assert!(ms >= min, "{}: elapsed {ms} ms over work of {min} ms", t.name());
    assert_eq!(rt.event_elapsed_time(e1, e0), Ok(-ms), "{}: reversed", t.name());
    rt.event_destroy(e0).unwrap();
    rt.event_destroy(e1).unwrap();
    rt.stream_destroy(s1).unwrap();
    rt.stream_destroy(s2).unwrap();
}

/// The null stream waits for blocking streams and they wait for it; non-blocking streams don't.
pub fn null_stream_implicit_sync<T: Target>(t: &T) {
    let (rt, k) = t.runtime();
    let rt = &*rt;
    let blocking = rt.stream_create(0).unwrap();
    let log = new_log(rt);
    launch(rt, blocking, k.log, &args2(log, 1)).unwrap();
    launch(rt, StreamHandle::NULL, k.log, &args2(log, 2)).unwrap();
    launch(rt, blocking, k.log, &args2(log, 3)).unwrap();
    rt.device_synchronize().unwrap();
    assert_eq!(log_ids(log), vec![1, 2, 3], "{}", t.name());
    rt.stream_destroy(blocking).unwrap();
}

/// What [`host_reads_log`] reads and where it notes what it saw: one per scenario run, so the
/// three backends' runs (parallel tests) never share it.
struct LogReader {
    log: u64,
    seen: AtomicU32,
}

unsafe extern "C" fn host_reads_log(data: *mut core::ffi::c_void) {
    // SAFETY: the scenario passes its leaked LogReader, whose log is live backend memory.
    let r = unsafe { &*(data as *const LogReader) };
    // SAFETY: as above.
    let n = unsafe { AtomicU32::from_ptr(r.log as usize as *mut u32) }.load(Ordering::SeqCst);
    r.seen.store(n, Ordering::SeqCst);
}

/// A host function runs after the work before it and before the work after it.
pub fn host_function_in_order<T: Target>(t: &T) {
    let (rt, k) = t.runtime();
    let rt = &*rt;
    let s = rt.stream_create(0).unwrap();
    let log = new_log(rt);
    // Leaked (one per run, never shared), so it outlives the runtime whatever the stream does.
    let reader = leak(LogReader { log, seen: AtomicU32::new(u32::MAX) });
    launch(rt, s, k.log, &args2(log, 1)).unwrap();
    launch(rt, s, k.log, &args2(log, 2)).unwrap();
    let data = reader as *const LogReader as *mut core::ffi::c_void;
    rt.launch_host_func(s, HostFn::Plain { func: host_reads_log, data }).unwrap();
    launch(rt, s, k.log, &args2(log, 3)).unwrap();
    rt.stream_synchronize(s).unwrap();
    assert_eq!(reader.seen.load(Ordering::SeqCst), 2, "{}: the host function saw the log at 2 entries", t.name());
    assert_eq!(log_ids(log), vec![1, 2, 3], "{}", t.name());
    rt.stream_destroy(s).unwrap();
}

/// Stream capture builds a graph; its launches replay the work, in dependency order.
pub fn capture_and_graph_launch<T: Target>(t: &T) {
    let (rt, k) = t.runtime();
    let rt = &*rt;
    let s = rt.stream_create(1).unwrap();
    let side = rt.stream_create(1).unwrap();
    let log = new_log(rt);
    rt.stream_begin_capture(s, 0).unwrap();
    launch(rt, s, k.log, &args2(log, 1)).unwrap();
    // Fork onto a side stream and join back.
    let fork = rt.event_create(0).unwrap();
    let join = rt.event_create(0).unwrap();
    rt.event_record(fork, s, 0).unwrap();
    rt.stream_wait_event(side, fork, 0).unwrap();
    launch(rt, side, k.log, &args2(log, 2)).unwrap();
    rt.event_record(join, side, 0).unwrap();
    rt.stream_wait_event(s, join, 0).unwrap();
    launch(rt, s, k.log, &args2(log, 3)).unwrap();
    let g = rt.stream_end_capture(s).unwrap();
    assert!(log_ids(log).is_empty(), "{}: capture runs nothing", t.name());
    let x = rt.graph_instantiate(g).unwrap();
    rt.graph_launch(x, s).unwrap();
    rt.graph_launch(x, s).unwrap();
    rt.stream_synchronize(s).unwrap();
    assert_eq!(log_ids(log), vec![1, 2, 3, 1, 2, 3], "{}", t.name());
    rt.graph_exec_destroy(x).unwrap();
    rt.graph_destroy(g).unwrap();
    rt.stream_destroy(s).unwrap();
    rt.stream_destroy(side).unwrap();
}

/// Destroying an execution context detaches its streams; other streams go on.
pub fn detach_on_context_destroy<T: Target>(t: &T) {
    let (rt, k) = t.runtime();
    let rt = &*rt;
    let c = cell(rt);
    let ctx = rt.context_create(&[0xffff]).unwrap();
    let s = rt.context_stream_create(ctx, 0, 0).unwrap();
    launch(rt, s, k.inc, &args1(c)).unwrap();
    rt.stream_synchronize(s).unwrap();
    rt.context_destroy(ctx).unwrap();
    assert_eq!(rt.stream_is_detached(s), Ok(true), "{}", t.name());
    assert_eq!(launch(rt, s, k.inc, &args1(c)), Err(Error::StreamDetached), "{}", t.name());
    let other = rt.stream_create(0).unwrap();
    launch(rt, other, k.inc, &args1(c)).unwrap();
    rt.stream_synchronize(other).unwrap();
    assert_eq!(read32(c), 2, "{}", t.name());
    rt.stream_destroy(s).unwrap();
    rt.stream_destroy(other).unwrap();
}

/// A stream waits on a value in memory until the host writes it.
pub fn wait_value_then_host_write<T: Target>(t: &T) {
    let (rt, k) = t.runtime();
    let rt = &*rt;
    let s = rt.stream_create(1).unwrap();
    let flag = cell(rt);
    let c = cell(rt);
    rt.wait_value32(s, flag, 1, 1, u32::MAX).unwrap(); // hipStreamWaitValueEq
    launch(rt, s, k.inc, &args1(c)).unwrap();
    assert_eq!(rt.stream_synchronize_timeout(s, Timeout(20_000_000)), Err(Error::NotReady), "{}", t.name());
    assert_eq!(read32(c), 0, "{}", t.name());
    // SAFETY: backend memory the scenario owns.
    unsafe { AtomicU32::from_ptr(flag as usize as *mut u32) }.store(1, Ordering::SeqCst);
    rt.stream_synchronize(s).unwrap();
    assert_eq!(read32(c), 1, "{}", t.name());
    rt.stream_destroy(s).unwrap();
}

/// A failing kernel fails its stream (sticky); other streams go on.
pub fn fault_is_sticky_and_isolated<T: Target>(t: &T) {
    let (rt, k) = t.runtime();
    let rt = &*rt;
    let bad = rt.stream_create(1).unwrap();
    let good = rt.stream_create(1).unwrap();
    let c = cell(rt);
    launch(rt, bad, k.fail, &[]).unwrap();
    // Accepted, or refused at once when the backend already saw the fault (the loopback runs
    // packets at the doorbell).
    let second = launch(rt, bad, k.inc, &args1(c));
    let e = rt.stream_synchronize_timeout(bad, Timeout::SECOND).unwrap_err();
    assert!(second.is_ok() || second == Err(e), "{}: {second:?}", t.name());
    assert!(matches!(e, Error::LaunchFailure | Error::IllegalAddress), "{}: {e:?}", t.name());
    assert_eq!(rt.stream_query(bad), Err(e), "{}: sticky", t.name());
    assert_eq!(launch(rt, bad, k.inc, &args1(c)), Err(e), "{}: no new work", t.name());
    for _ in 0..3 {
        launch(rt, good, k.inc, &args1(c)).unwrap();
    }
    rt.stream_synchronize(good).unwrap();
    assert_eq!(read32(c), 3, "{}: the failed stream's later kernel never ran", t.name());
    let _ = rt.stream_destroy(bad);
    rt.stream_destroy(good).unwrap();
}

/// Many streams with priorities and CU masks, interleaved, each in order.
pub fn many_streams_priorities_and_masks<T: Target>(t: &T) {
    let (rt, k) = t.runtime();
    let rt = &*rt;
    let mut streams = Vec::new();
    for p in [-1, 0, 1] {
        streams.push(rt.stream_create_with_priority(1, p).unwrap());
    }
    streams.push(rt.stream_create_with_cu_mask(&[0x0f0f]).unwrap());
    let logs: Vec<u64> = streams.iter().map(|_| new_log(rt)).collect();
    for round in 0..8 {
        for (s, l) in streams.iter().zip(&logs) {
            launch(rt, *s, k.log, &args2(*l, round)).unwrap();
        }
    }
    rt.device_synchronize().unwrap();
    for l in &logs {
        assert_eq!(log_ids(*l), (0..8).collect::<Vec<_>>(), "{}", t.name());
    }
    for s in streams {
        rt.stream_destroy(s).unwrap();
    }
}

/// Runs every scenario on `t`.
pub fn all<T: Target>(t: &T) {
    stream_fifo_order(t);
    copies_and_fills(t);
    events_order_streams(t);
    null_stream_implicit_sync(t);
    host_function_in_order(t);
    capture_and_graph_launch(t);
    detach_on_context_destroy(t);
    wait_value_then_host_write(t);
    fault_is_sticky_and_isolated(t);
    many_streams_priorities_and_masks(t);
}
