//! Shared helpers for the conformance suites: runtimes over the loopback backend, counting
//! kernels with host twins, host-memory cells and trace readers.

pub mod conformance;

use core::ffi::c_void;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use aqueduct::aql::{
    BarrierPacket, BarrierValuePacket, KernelDispatchPacket, Packet, PacketType, PacketWords, QueueFault,
};
use aqueduct::loopback::{Dispatch, Loopback, LoopbackMemory, LoopbackQueue, TraceEntry};
use aqueduct::{
    Backend, Config, HostFn, KernelLaunch, Result, Runtime, SingleThread, SpinRawMutex, StreamHandle, ThreadKey,
    ThreadKeys,
};

/// The default loopback memory (40 queues of 64 packets).
pub type Mem = LoopbackMemory<aqueduct::config::Default>;
/// The default loopback backend.
pub type Lb = Loopback<'static, aqueduct::config::Default>;
/// The default runtime over the loopback.
pub type Rt = Runtime<Lb, SingleThread>;

/// The default tables with a small loopback device: 16 queues with rings of 8 packets (for
/// ring-full tests), 64 kernel-argument bytes per packet, 96 signals, 4 KiB of heap.
pub type SmallDevice = aqueduct::Capacities<32, 64, 8, 64, 4, 32, 2, 40, 16, 8, 16, 8, 64, 96, 4096>;
/// Loopback memory with rings of 8 packets (for ring-full tests).
pub type SmallMem = LoopbackMemory<SmallDevice>;
/// A loopback backend over [`SmallMem`].
pub type SmallLb = Loopback<'static, SmallDevice>;

/// Moves `t` to the heap for the rest of the test process.
pub fn leak<T>(t: T) -> &'static T {
    Box::leak(Box::new(t))
}

/// A fresh default loopback memory.
pub fn mem() -> &'static Mem {
    leak(Mem::new())
}

/// A runtime over a fresh one-device loopback.
pub fn runtime() -> Rt {
    Runtime::new(Loopback::new(mem()), SingleThread)
}

/// Thread keys for std threads: each thread gets its own key from a process-wide counter.
#[derive(Debug, Clone, Copy, Default)]
pub struct StdThreads;

/// The next thread key. Process-wide on purpose, and no test state: it only hands out ids, each
/// once, so tests running in parallel get distinct keys and never observe each other through it.
static NEXT_THREAD_KEY: AtomicU64 = AtomicU64::new(1);

std::thread_local! {
    static THREAD_KEY: u64 = NEXT_THREAD_KEY.fetch_add(1, Ordering::Relaxed);
}

impl ThreadKeys for StdThreads {
    type RawMutex = SpinRawMutex;

    fn current(&self) -> ThreadKey {
        let k = THREAD_KEY.with(|k| *k);
        ThreadKey(core::num::NonZeroU64::new(k).expect("keys start at 1"))
    }
}

/// A runtime that tells std threads apart.
pub type MtRt = Runtime<Lb, StdThreads>;

/// A runtime over a fresh one-device loopback whose threads each have their own key.
pub fn mt_runtime() -> MtRt {
    Runtime::new(Loopback::new(mem()), StdThreads)
}

/// [`runtime`], moved to the heap for the rest of the process. A runtime is about 90 KB, so
/// tests that build several keep them out of their stack frames this way.
#[inline(never)]
pub fn leaked_runtime() -> &'static Rt {
    leak(runtime())
}

/// [`mt_runtime`], moved to the heap for the rest of the process.
#[inline(never)]
pub fn leaked_mt_runtime() -> &'static MtRt {
    leak(mt_runtime())
}

/// The least time, in milliseconds, that `packets` packets between two event records add on the
/// loopback clock, which ticks once at each packet's start and once at its end
/// ([`LOOPBACK_TIMESTAMP_HZ`](aqueduct::loopback::LOOPBACK_TIMESTAMP_HZ)): work of known duration
/// for elapsed-time tests. Rounded as `event_elapsed_time` rounds, so it compares exactly.
pub fn loopback_packets_ms(packets: u64) -> f32 {
    (2.0 * packets as f64 * 1000.0 / aqueduct::loopback::LOOPBACK_TIMESTAMP_HZ as f64) as f32
}

/// A runtime over a fresh loopback with `devices` devices.
pub fn runtime_devices(devices: u32) -> Rt {
    Runtime::new(Loopback::with_devices(mem(), devices), SingleThread)
}

/// A runtime over a fresh loopback with 8-packet rings.
pub fn small_runtime() -> Runtime<SmallLb, SingleThread> {
    Runtime::new(Loopback::new(leak(SmallMem::new())), SingleThread)
}

/// Host twin: `*(u32*)arg += 1`.
pub fn inc_kernel(d: &Dispatch) -> core::result::Result<(), QueueFault> {
    // SAFETY: every launch of this kernel passes one u64 address of a live, aligned u32.
    let addr: u64 = unsafe { d.args() };
    // SAFETY: as above; the test owns the cell for the process's life.
    let cell = unsafe { AtomicU32::from_ptr(addr as usize as *mut u32) };
    cell.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

/// Host twin: `*(u32*)arg *= 2`.
pub fn double_kernel(d: &Dispatch) -> core::result::Result<(), QueueFault> {
    // SAFETY: every launch of this kernel passes one u64 address of a live, aligned u32.
    let addr: u64 = unsafe { d.args() };
    // SAFETY: as above.
    let cell = unsafe { AtomicU32::from_ptr(addr as usize as *mut u32) };
    let v = cell.load(Ordering::SeqCst);
    cell.store(v.wrapping_mul(2), Ordering::SeqCst);
    Ok(())
}

/// Host twin that reports a kernel error (the queue faults).
pub fn failing_kernel(_d: &Dispatch) -> core::result::Result<(), QueueFault> {
    Err(QueueFault::KernelError)
}

/// Where [`log_kernel`] appends: a count and the ids in the order the kernels ran.
#[derive(Debug)]
pub struct OrderLog {
    /// Entries written.
    pub len: AtomicU32,
    /// The ids, in run order.
    pub ids: [AtomicU32; 64],
}

impl OrderLog {
    /// A fresh log, alive for the rest of the process.
    pub fn new() -> &'static OrderLog {
        leak(OrderLog { len: AtomicU32::new(0), ids: core::array::from_fn(|_| AtomicU32::new(0)) })
    }

    /// The ids logged so far.
    pub fn ids(&self) -> Vec<u32> {
        let n = self.len.load(Ordering::SeqCst) as usize;
        self.ids.iter().take(n).map(|a| a.load(Ordering::SeqCst)).collect()
    }

    /// The kernel arguments making [`log_kernel`] append `id` here.
    pub fn args(&'static self, id: u32) -> [u8; 16] {
        let mut a = [0u8; 16];
        a[..8].copy_from_slice(&(self as *const OrderLog as usize as u64).to_le_bytes());
        a[8..].copy_from_slice(&u64::from(id).to_le_bytes());
        a
    }
}

/// Host twin: appends its id to an [`OrderLog`]; arguments `[log address: u64, id: u64]`.
pub fn log_kernel(d: &Dispatch) -> core::result::Result<(), QueueFault> {
    // SAFETY: every launch of this kernel passes OrderLog::args: a leaked log's address and an id.
    let (addr, id): (u64, u64) = unsafe { d.args() };
    // SAFETY: as above; the log lives for the rest of the process.
    let log = unsafe { &*(addr as usize as *const OrderLog) };
    let at = log.len.fetch_add(1, Ordering::SeqCst) as usize;
    if let Some(slot) = log.ids.get(at) {
        slot.store(id as u32, Ordering::SeqCst);
    }
    Ok(())
}

/// A kernel launch of `kernel` with `args`, one work-item.
pub fn kernel_launch(kernel: u64, args: &[u8]) -> KernelLaunch<'_> {
    KernelLaunch {
        kernel_object: kernel,
        grid: [1, 1, 1],
        workgroup: [1, 1, 1],
        group_segment_size: 0,
        private_segment_size: 0,
        kernarg: args,
    }
}

/// Kernel objects of the test kernels on one loopback.
#[derive(Debug, Clone, Copy)]
pub struct Kernels {
    /// [`inc_kernel`].
    pub inc: u64,
    /// [`double_kernel`].
    pub double: u64,
    /// [`failing_kernel`].
    pub fail: u64,
    /// [`log_kernel`].
    pub log: u64,
}

/// Registers the test kernels on a loopback.
pub fn register<L: Config>(lb: &Loopback<'_, L>) -> Kernels {
    Kernels {
        inc: lb.register_kernel(inc_kernel).expect("register inc"),
        double: lb.register_kernel(double_kernel).expect("register double"),
        fail: lb.register_kernel(failing_kernel).expect("register fail"),
        log: lb.register_kernel(log_kernel).expect("register log"),
    }
}

/// Launches `kernel` with one u64 argument (an address) on `s`.
pub fn launch<B: Backend, K: ThreadKeys, C: Config>(
    rt: &Runtime<B, K, C>,
    s: StreamHandle,
    kernel: u64,
    arg: u64,
) -> Result<()> {
    let args = arg.to_le_bytes();
    rt.launch_kernel(
        s,
        &KernelLaunch {
            kernel_object: kernel,
            grid: [1, 1, 1],
            workgroup: [1, 1, 1],
            group_segment_size: 0,
            private_segment_size: 0,
            kernarg: &args,
        },
    )
}

/// A u32 in host memory, alive for the rest of the process.
pub fn cell32(v: u32) -> &'static AtomicU32 {
    leak(AtomicU32::new(v))
}

/// A u64 in host memory, alive for the rest of the process.
pub fn cell64(v: u64) -> &'static AtomicU64 {
    leak(AtomicU64::new(v))
}

/// The device (= host) address of a cell.
pub fn addr32(c: &AtomicU32) -> u64 {
    c.as_ptr() as usize as u64
}

/// The device (= host) address of a cell.
pub fn addr64(c: &AtomicU64) -> u64 {
    c.as_ptr() as usize as u64
}

/// Reads a u32 of loopback device memory.
pub fn read32(addr: u64) -> u32 {
    // SAFETY: callers pass addresses of live, aligned u32s of loopback memory (host memory).
    unsafe { core::ptr::read_volatile(addr as usize as *const u32) }
}

/// Writes a u32 of loopback device memory.
pub fn write32(addr: u64, v: u32) {
    // SAFETY: callers pass addresses of live, aligned u32s of loopback memory (host memory).
    unsafe { core::ptr::write_volatile(addr as usize as *mut u32, v) }
}

/// The queue index behind a stream of a loopback runtime.
pub fn queue_of<B, K, C: Config>(rt: &Runtime<B, K, C>, s: StreamHandle) -> u32
where
    B: Backend<Queue = LoopbackQueue>,
    K: ThreadKeys,
{
    rt.with_stream_queue(s, |q| q.0).expect("stream has a queue")
}

/// The whole trace of a loopback.
pub fn trace<L: Config>(lb: &Loopback<'_, L>) -> Vec<TraceEntry> {
    assert_eq!(lb.trace_dropped(), 0, "trace overflowed");
    (0..lb.trace_len()).filter_map(|i| lb.trace_entry(i)).collect()
}

/// A retired packet from the trace.
#[derive(Debug, Clone, Copy)]
pub struct Pkt {
    /// Position in the trace.
    pub pos: usize,
    /// Queue index.
    pub queue: u32,
    /// Ring index.
    pub index: u64,
    /// The packet.
    pub words: PacketWords,
}

impl Pkt {
    /// The packet type.
    pub fn ty(&self) -> Option<PacketType> {
        aqueduct::aql::Header(self.words[0] as u16).packet_type()
    }

    /// The packet as a barrier-AND, if it is one.
    pub fn barrier_and(&self) -> Option<BarrierPacket> {
        (self.ty() == Some(PacketType::BarrierAnd)).then(|| BarrierPacket::from_words(&self.words))
    }

    /// The packet as a kernel dispatch, if it is one.
    pub fn dispatch(&self) -> Option<KernelDispatchPacket> {
        (self.ty() == Some(PacketType::KernelDispatch)).then(|| KernelDispatchPacket::from_words(&self.words))
    }

    /// The packet as a barrier-value packet, if it is one.
    pub fn barrier_value(&self) -> Option<BarrierValuePacket> {
        (self.ty() == Some(PacketType::VendorSpecific)).then(|| BarrierValuePacket::from_words(&self.words))
    }

    /// Non-zero dependency signals of a barrier-AND (empty for other packets).
    pub fn deps(&self) -> Vec<u64> {
        self.barrier_and().map(|b| b.dep_signal.iter().copied().filter(|&d| d != 0).collect()).unwrap_or_default()
    }

    /// The completion signal of a barrier-AND (0 for other packets).
    pub fn barrier_completion(&self) -> u64 {
        self.barrier_and().map_or(0, |b| b.completion_signal)
    }

    /// The `k`-th u64 of a dispatch's kernel arguments (`None` for other packets).
    pub fn arg(&self, k: u64) -> Option<u64> {
        // SAFETY: as in `is_launch`; callers ask only for arguments the kernel takes.
        self.dispatch().map(|d| unsafe { read_u64(d.kernarg_address + 8 * k) })
    }

    /// Whether this is a dispatch of `kernel_object` with argument `arg`.
    pub fn is_launch(&self, kernel_object: u64, arg: u64) -> bool {
        self.dispatch().is_some_and(|d| {
            // SAFETY: dispatch kernargs live in loopback ring memory for the process's life;
            // a retired slot keeps its bytes until reused, and every test kernel takes one u64.
            d.kernel_object == kernel_object && unsafe { read_u64(d.kernarg_address) } == arg
        })
    }
}

/// Reads a u64 at `addr`.
///
/// # Safety
/// `addr` must be a live, 8-byte aligned u64.
pub unsafe fn read_u64(addr: u64) -> u64 {
    // SAFETY: forwarded caller guarantee.
    unsafe { core::ptr::read_volatile(addr as usize as *const u64) }
}

/// The retired packets of the trace, in retirement order.
pub fn packets<L: Config>(lb: &Loopback<'_, L>) -> Vec<Pkt> {
    trace(lb)
        .into_iter()
        .enumerate()
        .filter_map(|(pos, e)| match e {
            TraceEntry::Packet { queue, index, words } => Some(Pkt { pos, queue, index, words }),
            _ => None,
        })
        .collect()
}

/// The doorbell values written to `queue`, in order.
pub fn doorbells<L: Config>(lb: &Loopback<'_, L>, queue: u32) -> Vec<u64> {
    trace(lb)
        .into_iter()
        .filter_map(|e| match e {
            TraceEntry::Doorbell { queue: q, value } if q == queue => Some(value),
            _ => None,
        })
        .collect()
}

/// What a logging host function saw.
#[derive(Debug, Default)]
pub struct HostLog {
    /// How many times it ran.
    pub calls: AtomicU32,
    /// The value of the watched cell when it last ran.
    pub seen: AtomicU32,
    /// Address of the watched u32 (0: none).
    pub watch: AtomicU64,
    /// The stream handle a stream callback received.
    pub stream: AtomicU64,
    /// The status a stream callback received.
    pub status: AtomicU32,
}

impl HostLog {
    /// A log watching the u32 at `watch`.
    pub fn watching(watch: u64) -> &'static HostLog {
        let log = leak(HostLog::default());
        log.watch.store(watch, Ordering::SeqCst);
        log
    }

    fn note(&self) {
        let w = self.watch.load(Ordering::SeqCst);
        if w != 0 {
            self.seen.store(read32(w), Ordering::SeqCst);
        }
        self.calls.fetch_add(1, Ordering::SeqCst);
    }

    /// A `hipLaunchHostFunc`-style function logging into `self`.
    pub fn plain(&'static self) -> HostFn {
        HostFn::Plain { func: log_plain, data: self as *const HostLog as *mut c_void }
    }

    /// A `hipStreamAddCallback`-style function logging into `self`, given back `stream`.
    pub fn callback(&'static self, stream: StreamHandle) -> HostFn {
        HostFn::StreamCallback { func: log_callback, stream: stream.0, data: self as *const HostLog as *mut c_void }
    }

    /// Number of calls so far.
    pub fn calls(&self) -> u32 {
        self.calls.load(Ordering::SeqCst)
    }

    /// The watched value at the last call.
    pub fn seen(&self) -> u32 {
        self.seen.load(Ordering::SeqCst)
    }
}

unsafe extern "C" fn log_plain(data: *mut c_void) {
    // SAFETY: `data` is a leaked HostLog (HostLog::plain).
    let log = unsafe { &*(data as *const HostLog) };
    log.note();
}

unsafe extern "C" fn log_callback(stream: u64, status: i32, data: *mut c_void) {
    // SAFETY: `data` is a leaked HostLog (HostLog::callback).
    let log = unsafe { &*(data as *const HostLog) };
    log.stream.store(stream, Ordering::SeqCst);
    log.status.store(status as u32, Ordering::SeqCst);
    log.note();
}
