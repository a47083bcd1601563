//! The loopback backend: a deterministic, thread-free device that runs in core itself.
//!
//! Published packets execute on the calling thread when the doorbell rings (and again whenever
//! a wait or query polls), through the same [`aql::step`] the emulator's command processor uses.
//! Kernels are host functions registered by kernel object; a built-in kernel (copy, fill,
//! write-value, the graph scheduler) is registered in its fixed slot at its first
//! `builtin_kernel` request. Every doorbell and every processed packet is
//! recorded in a fixed-size trace that tests assert on.
//!
//! All memory lives in a [`LoopbackMemory`] the caller owns (a `static` on firmware, a local in
//! tests), so signal handles and ring addresses stay put for as long as the backend borrows it.
//! Its sizes (queues, packets per queue, kernel-argument bytes per packet, signals, heap) come
//! from a [`Config`] (`LoopbackMemory<config::Default>`), like every other table of core.
//! "Device" memory is host memory: device addresses are host addresses.
//!
//! Host functions and kernels must not call back into the runtime (HIP forbids API calls from
//! callbacks too); the loopback runs them with its own lock released.

use crate::sync::atomic64::AtomicU64;
use core::cell::UnsafeCell;
use core::ptr::NonNull;
use portable_atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};

use crate::aql::{
    self, AqlRing, Condition, KernelDispatchPacket, Outcome, PacketExecutor, PacketWords, QueueFault, Step,
};
use crate::backend::{
    Backend, BuiltinKernel, CopyArgs, DeviceInfo, FillArgs, HostFn, KernelSymbol, MemoryKind, QueueDesc, Timeout,
    VariableSymbol, WriteValueArgs,
};
use crate::config::{Config, Default as DefaultConfig};
use crate::error::{Error, Result};
use crate::host_calls::HostCalls;
use crate::signal::{AmdSignal, SignalHandle};
use crate::slot::{Bytes, Slot, Table};
use crate::stream::{CuMask, Priority};

/// A kernel's host twin: runs one whole dispatch.
pub type KernelFn = fn(&Dispatch) -> core::result::Result<(), QueueFault>;

/// What a kernel's host twin receives.
#[derive(Debug, Clone, Copy)]
pub struct Dispatch {
    /// The dispatch packet.
    pub packet: KernelDispatchPacket,
}

impl Dispatch {
    /// Reads the kernel arguments as a `T`.
    ///
    /// # Safety
    /// The enqueuer must have written at least `size_of::<T>()` bytes of arguments laid out as `T`.
    pub unsafe fn args<T: Copy>(&self) -> T {
        let p = core::ptr::with_exposed_provenance::<T>(self.packet.kernarg_address as usize);
        // SAFETY: the kernarg slot is live while its packet runs; the caller vouches for the layout.
        unsafe { core::ptr::read_unaligned(p) }
    }
}

/// Bytes of kernel arguments each ring slot can carry on the default loopback.
pub const DEFAULT_KERNARG_BYTES: usize = 256;
const KERNEL_OBJECT_BASE: u64 = 0x7f00_0000_0000;
const MAX_KERNELS: usize = 32;
const MAX_HOST_CALLS: usize = 32;
const MAX_ALLOCATIONS: usize = 256;
/// Live host registrations at most ([`Backend::host_register`]).
const MAX_REGISTRATIONS: usize = 16;
/// Entries kept in the trace of the default configuration (`LT` of
/// [`Capacities`](crate::config::Capacities)).
pub const TRACE_CAPACITY: usize = <<DefaultConfig as Config>::LoopbackTrace<TraceSlot> as Table<TraceSlot>>::LEN;
/// Number of CUs the loopback device reports.
pub const LOOPBACK_CUS: u32 = 104;
/// How long a wait spins for another thread's pump to finish before it answers `NotReady`.
const LOOPBACK_WAIT_SPINS: u32 = 1 << 24;
/// Ticks per second of the loopback clock (one tick per packet start and end).
pub const LOOPBACK_TIMESTAMP_HZ: u64 = 1_000_000;

#[repr(C, align(64))]
struct RingSlot(UnsafeCell<[u8; 64]>);

impl Slot for RingSlot {
    const EMPTY: Self = RingSlot(UnsafeCell::new([0; 64]));
}

#[repr(C, align(16))]
struct KernargSlot<C: Config>(UnsafeCell<C::LoopbackKernarg>);

impl<C: Config> Slot for KernargSlot<C> {
    const EMPTY: Self = KernargSlot(UnsafeCell::new(<C::LoopbackKernarg as Bytes>::ZERO));
}

#[repr(C, align(64))]
struct QueueMem<C: Config> {
    ring: C::LoopbackRing<RingSlot>,
    kernarg: C::LoopbackRing<KernargSlot<C>>,
    // The ring's indices are `AqlRing`'s atomics (core/src/sync.rs).
    write_index: crate::sync::atomic::AtomicU64,
    read_index: crate::sync::atomic::AtomicU64,
    /// Doorbell value + 1 (0 = never rung).
    doorbell: AtomicU64,
}

impl<C: Config> Slot for QueueMem<C> {
    const EMPTY: Self = QueueMem {
        ring: <C::LoopbackRing<RingSlot> as Table<RingSlot>>::EMPTY,
        kernarg: <C::LoopbackRing<KernargSlot<C>> as Table<KernargSlot<C>>>::EMPTY,
        write_index: crate::sync::atomic::AtomicU64::new(0),
        read_index: crate::sync::atomic::AtomicU64::new(0),
        doorbell: AtomicU64::new(0),
    };
}

impl Slot for AmdSignal {
    const EMPTY: Self = AmdSignal::zeroed();
}

#[repr(C, align(16))]
struct Heap<C: Config>(UnsafeCell<C::LoopbackHeap>);

/// The memory of a loopback device: rings, kernel-argument areas, signals and a heap.
///
/// `C::LoopbackQueues` queues of `C::LoopbackRing` packets with `C::LoopbackKernarg` argument
/// bytes per packet, `C::LoopbackSignals` signals, `C::LoopbackHeap` bytes of allocatable memory
/// ([`Capacities`](crate::config::Capacities)' `LQ`, `LR`, `LK`, `LS` and `LH`).
pub struct LoopbackMemory<C: Config = DefaultConfig> {
    queues: C::LoopbackQueues<QueueMem<C>>,
    signals: C::LoopbackSignals<AmdSignal>,
    heap: Heap<C>,
}

// SAFETY: every shared field is atomic or accessed through the AQL slot protocol and the
// loopback's lock.
unsafe impl<C: Config> Sync for LoopbackMemory<C> {}

impl<C: Config> LoopbackMemory<C> {
    /// Zeroed memory, usable in a `static`.
    pub const fn new() -> Self {
        LoopbackMemory {
            queues: <C::LoopbackQueues<QueueMem<C>> as Table<QueueMem<C>>>::EMPTY,
            signals: <C::LoopbackSignals<AmdSignal> as Table<AmdSignal>>::EMPTY,
            heap: Heap(UnsafeCell::new(<C::LoopbackHeap as Bytes>::ZERO)),
        }
    }
}

impl<C: Config> Default for LoopbackMemory<C> {
    fn default() -> Self {
        Self::new()
    }
}

/// One entry of the trace table.
#[derive(Clone, Copy)]
struct TraceSlot(Option<TraceEntry>);

impl Slot for TraceSlot {
    const EMPTY: Self = TraceSlot(None);
}

/// One recorded event of the loopback device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceEntry {
    /// A doorbell write.
    Doorbell {
        /// Queue index.
        queue: u32,
        /// The value written (index of the last packet published).
        value: u64,
    },
    /// A packet the processor retired.
    Packet {
        /// Queue index.
        queue: u32,
        /// Ring index of the packet.
        index: u64,
        /// The packet.
        words: PacketWords,
    },
    /// A host function ran.
    HostCall,
    /// A queue stopped on a fault.
    Fault {
        /// Queue index.
        queue: u32,
        /// Why.
        fault: QueueFault,
    },
}

impl TraceEntry {
    /// The packet type of a `Packet` entry.
    pub fn packet_type(&self) -> Option<aql::PacketType> {
        match self {
            TraceEntry::Packet { words, .. } => aql::Header(words[0] as u16).packet_type(),
            _ => None,
        }
    }
}

/// Whether a queue or a signal of the loopback's memory is handed out.
#[derive(Clone, Copy)]
struct Used(bool);

impl Slot for Used {
    const EMPTY: Self = Used(false);
}

/// The priority a queue was created with.
#[derive(Clone, Copy)]
struct QueuePriority(Priority);

impl Slot for QueuePriority {
    const EMPTY: Self = QueuePriority(Priority::Normal);
}

/// The CU mask a queue was created with.
#[derive(Clone, Copy)]
struct QueueCuMask(Option<CuMask>);

impl Slot for QueueCuMask {
    const EMPTY: Self = QueueCuMask(None);
}

/// 0, or the [`QueueFault::code`] that stopped a queue.
struct Fault(AtomicU8);

impl Slot for Fault {
    const EMPTY: Self = Fault(AtomicU8::new(0));
}

struct State<C: Config> {
    queue_used: C::LoopbackQueues<Used>,
    queue_priority: C::LoopbackQueues<QueuePriority>,
    queue_cu_mask: C::LoopbackQueues<QueueCuMask>,
    signal_used: C::LoopbackSignals<Used>,
    kernels: [Option<KernelFn>; MAX_KERNELS],
    allocations: [(usize, usize); MAX_ALLOCATIONS],
    /// Registered host ranges `(address, bytes)`; `bytes == 0` is a free entry.
    registrations: [(u64, u64); MAX_REGISTRATIONS],
    trace: C::LoopbackTrace<TraceSlot>,
    trace_len: usize,
    trace_dropped: usize,
    /// What runs the pending host calls: set by the first `host_call`, so the pump names the
    /// drain only through this value and an image that never hands over a host call does not
    /// link it (docs/architecture.md, "Footprint").
    drain_calls: Option<fn(&Loopback<'_, C>) -> bool>,
}

/// The loopback backend over a borrowed [`LoopbackMemory`].
pub struct Loopback<'m, C: Config = DefaultConfig> {
    mem: &'m LoopbackMemory<C>,
    state: lock_api::Mutex<crate::thread::SpinRawMutex, State<C>>,
    /// Host functions waiting for their start signal (core's pending list).
    calls: HostCalls<crate::thread::SpinRawMutex, MAX_HOST_CALLS>,
    /// Per queue: 0, or the [`QueueFault::code`] that stopped it (read without the lock).
    faults: C::LoopbackQueues<Fault>,
    devices: u32,
    clock: AtomicU64,
    pumping: AtomicBool,
    /// Passes of the pump that ran a packet (written by the pump holder only): a waiter spinning
    /// while another thread pumps keeps waiting while this moves.
    pump_passes: AtomicU32,
    start_index: Option<u64>,
    deferred: AtomicBool,
}

/// The queue handle of the loopback backend.
#[derive(Debug, PartialEq, Eq)]
pub struct LoopbackQueue(pub u32);

fn builtin_copy(d: &Dispatch) -> core::result::Result<(), QueueFault> {
    // SAFETY: core's memcpy enqueue writes CopyArgs.
    let a: CopyArgs = unsafe { d.args() };
    let dst = core::ptr::with_exposed_provenance_mut::<u8>(a.dst as usize);
    let src = core::ptr::with_exposed_provenance::<u8>(a.src as usize);
    // SAFETY: loopback device memory is host memory; the enqueuer vouched for both ranges
    // (hipMemcpyAsync's contract). `copy` allows overlap.
    unsafe { core::ptr::copy(src, dst, a.bytes as usize) };
    Ok(())
}

fn builtin_fill(d: &Dispatch) -> core::result::Result<(), QueueFault> {
    // SAFETY: core's memset enqueue writes FillArgs.
    let a: FillArgs = unsafe { d.args() };
    let size = a.element_bytes as usize;
    let bytes = a.value.to_le_bytes();
    let pattern = bytes.get(..size).ok_or(QueueFault::KernelError)?;
    let dst = core::ptr::with_exposed_provenance_mut::<u8>(a.dst as usize);
    for i in 0..a.count as usize {
        // SAFETY: the enqueuer vouched for `count * element_bytes` bytes at `dst`.
        unsafe { core::ptr::copy_nonoverlapping(pattern.as_ptr(), dst.add(i * size), size) };
    }
    Ok(())
}

fn builtin_write_value(d: &Dispatch) -> core::result::Result<(), QueueFault> {
    // SAFETY: core's write-value enqueue writes WriteValueArgs.
    let a: WriteValueArgs = unsafe { d.args() };
    match a.width {
        4 => {
            let p = core::ptr::with_exposed_provenance_mut::<u32>(a.dst as usize);
            // SAFETY: the enqueuer vouched for an aligned, live u32 at dst.
            unsafe { core::ptr::write_volatile(p, a.value as u32) };
        }
        8 => {
            let p = core::ptr::with_exposed_provenance_mut::<u64>(a.dst as usize);
            // SAFETY: the enqueuer vouched for an aligned, live u64 at dst.
            unsafe { core::ptr::write_volatile(p, a.value) };
        }
        _ => return Err(QueueFault::KernelError),
    }
    Ok(())
}

#[cfg(feature = "capture")]
fn builtin_graph_scheduler(d: &Dispatch) -> core::result::Result<(), QueueFault> {
    // SAFETY: core's graph instantiation writes SchedulerArgs.
    let a: crate::conditional::SchedulerArgs = unsafe { d.args() };
    // SAFETY: the executable that published the dispatch keeps its frame, bodies, signals and
    // body queue live until its launches are done.
    unsafe { crate::conditional::run_scheduler(a) }
}

/// Kernel slots kept for the built-in kernels (Copy, Fill, WriteValue, GraphScheduler, in the
/// order of [`builtin_fn`]); registered kernels take the slots after them.
const BUILTIN_SLOTS: usize = 4;

/// The built-in kernel `kernel`: its kernel slot and host function. The graph scheduler only
/// with capture: without it no graph exists to dispatch it, and the loopback answers
/// `NotSupported` (`docs/architecture.md`, "Footprint"). Inlined into each request, so a
/// request of one constant kind names that kernel's function alone and an image links only the
/// built-ins it asks for.
#[inline(always)]
fn builtin_fn(kernel: BuiltinKernel) -> Result<(usize, KernelFn)> {
    Ok(match kernel {
        BuiltinKernel::Copy => (0, builtin_copy),
        BuiltinKernel::Fill => (1, builtin_fill),
        BuiltinKernel::WriteValue => (2, builtin_write_value),
        #[cfg(feature = "capture")]
        BuiltinKernel::GraphScheduler => (3, builtin_graph_scheduler),
        #[cfg(not(feature = "capture"))]
        BuiltinKernel::GraphScheduler => return Err(Error::NotSupported),
    })
}

impl<'m, C: Config> Loopback<'m, C> {
    /// Packets per ring.
    const RING: usize = <C::LoopbackRing<RingSlot> as Table<RingSlot>>::LEN;
    /// Trace entries.
    const TRACE: usize = <C::LoopbackTrace<TraceSlot> as Table<TraceSlot>>::LEN;
    /// Kernel-argument bytes per ring slot.
    const KARG: usize = <C::LoopbackKernarg as Bytes>::LEN;
    /// Heap bytes.
    const HEAP: usize = <C::LoopbackHeap as Bytes>::LEN;

    /// A loopback backend with one device.
    pub fn new(mem: &'m LoopbackMemory<C>) -> Self {
        Self::with_devices(mem, 1)
    }

    /// A loopback backend reporting `devices` devices (they share the memory).
    pub fn with_devices(mem: &'m LoopbackMemory<C>, devices: u32) -> Self {
        Loopback {
            mem,
            state: Self::LOCKED_STATE,
            faults: <C::LoopbackQueues<Fault> as Table<Fault>>::EMPTY,
            calls: HostCalls::new(),
            devices,
            clock: AtomicU64::new(0),
            pumping: AtomicBool::new(false),
            pump_passes: AtomicU32::new(0),
            start_index: None,
            deferred: AtomicBool::new(false),
        }
    }

    /// [`new`](Self::new) written into `place` field by field and returned: no backend-sized
    /// temporary to copy (for `Runtime::init_with` in a firmware image, docs/architecture.md,
    /// "Footprint").
    pub fn init<'p>(place: &'p mut core::mem::MaybeUninit<Self>, mem: &'m LoopbackMemory<C>) -> &'p mut Self {
        use core::ptr::addr_of_mut;
        // Every field, named: a field added to `Loopback` fails to compile here until it is
        // written below too (never called; no code).
        let _every_field = |l: &Self| {
            let Self {
                mem: _,
                state: _,
                calls: _,
                faults: _,
                devices: _,
                clock: _,
                pumping: _,
                pump_passes: _,
                start_index: _,
                deferred: _,
            } = l;
        };
        let p = place.as_mut_ptr();
        // SAFETY: `p` points to `place`, valid for writes and aligned; every field is written
        // through a pointer to itself (no reference to the uninitialised whole), `faults` as a
        // `MaybeUninit` of its own type (same layout).
        unsafe {
            addr_of_mut!((*p).mem).write(mem);
            addr_of_mut!((*p).state).write(Self::LOCKED_STATE);
            Table::init_empty(
                &mut *addr_of_mut!((*p).faults).cast::<core::mem::MaybeUninit<C::LoopbackQueues<Fault>>>(),
            );
            addr_of_mut!((*p).calls).write(HostCalls::new());
            addr_of_mut!((*p).devices).write(1);
            addr_of_mut!((*p).clock).write(AtomicU64::new(0));
            addr_of_mut!((*p).pumping).write(AtomicBool::new(false));
            addr_of_mut!((*p).pump_passes).write(AtomicU32::new(0));
            addr_of_mut!((*p).start_index).write(None);
            addr_of_mut!((*p).deferred).write(AtomicBool::new(false));
        }
        // SAFETY: every field was written above.
        unsafe { place.assume_init_mut() }
    }

    /// The state of a new loopback: nothing used, no kernel registered (a built-in is at its
    /// first [`builtin_kernel`](Backend::builtin_kernel) request), an empty trace.
    const STATE: State<C> = State {
        queue_used: <C::LoopbackQueues<Used> as Table<Used>>::EMPTY,
        queue_priority: <C::LoopbackQueues<QueuePriority> as Table<QueuePriority>>::EMPTY,
        queue_cu_mask: <C::LoopbackQueues<QueueCuMask> as Table<QueueCuMask>>::EMPTY,
        signal_used: <C::LoopbackSignals<Used> as Table<Used>>::EMPTY,
        kernels: [None; MAX_KERNELS],
        allocations: [(0, 0); MAX_ALLOCATIONS],
        registrations: [(0, 0); MAX_REGISTRATIONS],
        trace: <C::LoopbackTrace<TraceSlot> as Table<TraceSlot>>::EMPTY,
        trace_len: 0,
        trace_dropped: 0,
        drain_calls: None,
    };

    /// [`STATE`](Self::STATE) behind its lock, a constant: written in place with one copy of
    /// its image (or a clear), not built on the stack first.
    #[allow(clippy::declare_interior_mutable_const)]
    const LOCKED_STATE: lock_api::Mutex<crate::thread::SpinRawMutex, State<C>> =
        lock_api::Mutex::const_new(<crate::thread::SpinRawMutex as lock_api::RawMutex>::INIT, Self::STATE);

    /// The state, locked. Out of line on targets without native 64-bit atomics (the small
    /// images: one copy of the spin loop instead of one per caller, docs/architecture.md,
    /// "Footprint"); inlined on hosts.
    #[cfg_attr(not(target_has_atomic = "64"), inline(never))]
    #[cfg_attr(target_has_atomic = "64", inline)]
    fn lock_state(&self) -> lock_api::MutexGuard<'_, crate::thread::SpinRawMutex, State<C>> {
        self.state.lock()
    }

    /// While deferred, a doorbell only records its value (as a hardware doorbell does) and the
    /// packets run at the next [`pump`](Self::pump) or wait, not on the ringing thread. Used to
    /// time the submit path alone, and to hold work pending in tests.
    pub fn set_deferred(&self, deferred: bool) {
        // Ordering: Relaxed; a mode flag read by the same thread that rings.
        self.deferred.store(deferred, Ordering::Relaxed);
    }

    /// Makes every queue created from now on start its read and write indices at `index`
    /// (to exercise the 64-bit wrap: indices never reset in a real queue's life).
    pub fn with_start_index(mut self, index: u64) -> Self {
        self.start_index = Some(index);
        self
    }

    /// Registers a kernel's host twin; returns its kernel object.
    pub fn register_kernel(&self, f: KernelFn) -> Result<u64> {
        let mut st = self.lock_state();
        let (i, slot) = st
            .kernels
            .iter_mut()
            .enumerate()
            .skip(BUILTIN_SLOTS)
            .find(|(_, k)| k.is_none())
            .ok_or(Error::OutOfMemory)?;
        *slot = Some(f);
        Ok(KERNEL_OBJECT_BASE + i as u64 * 64)
    }

    /// Number of trace entries recorded (at most the configuration's `LT`, [`TRACE_CAPACITY`]
    /// by default).
    pub fn trace_len(&self) -> usize {
        self.lock_state().trace_len
    }

    /// Trace entry `i`, oldest first.
    pub fn trace_entry(&self, i: usize) -> Option<TraceEntry> {
        let st = self.lock_state();
        if i < st.trace_len {
            st.trace.slots().get(i).and_then(|t| t.0)
        } else {
            None
        }
    }

    /// Copies the trace into `out`; returns how many entries were written.
    pub fn trace(&self, out: &mut [TraceEntry]) -> usize {
        let st = self.lock_state();
        let mut n = 0;
        for (o, e) in out.iter_mut().zip(st.trace.slots().iter().map(|t| &t.0).take(st.trace_len)) {
            if let Some(e) = e {
                *o = *e;
                n += 1;
            }
        }
        n
    }

    /// Entries that did not fit in the trace since it was last cleared.
    pub fn trace_dropped(&self) -> usize {
        self.lock_state().trace_dropped
    }

    /// Empties the trace.
    pub fn clear_trace(&self) {
        let mut st = self.lock_state();
        st.trace_len = 0;
        st.trace_dropped = 0;
    }

    /// The priority a live queue was created with.
    pub fn queue_priority(&self, queue: &LoopbackQueue) -> Priority {
        let st = self.lock_state();
        st.queue_priority.slots().get(queue.0 as usize).map(|p| p.0).unwrap_or_default()
    }

    /// The CU mask a live queue was created with.
    pub fn queue_cu_mask(&self, queue: &LoopbackQueue) -> Option<CuMask> {
        let st = self.lock_state();
        st.queue_cu_mask.slots().get(queue.0 as usize).and_then(|m| m.0)
    }

    /// Stops a queue as if the device had faulted on its current packet (fault injection).
    pub fn inject_fault(&self, queue: &LoopbackQueue, fault: QueueFault) {
        self.set_fault(queue.0 as usize, Some(fault));
    }

    fn set_fault(&self, q: usize, fault: Option<QueueFault>) {
        if let Some(Fault(f)) = self.faults.slots().get(q) {
            // Ordering: Release, so a reader that sees the fault sees the trace written before.
            f.store(fault.map_or(0, QueueFault::code), Ordering::Release);
        }
    }

    fn fault_of(&self, q: usize) -> Option<QueueFault> {
        // Ordering: Acquire pairs with set_fault.
        self.faults.slots().get(q).and_then(|Fault(f)| QueueFault::from_code(f.load(Ordering::Acquire)))
    }

    /// Number of queues in use.
    pub fn queues_in_use(&self) -> usize {
        self.lock_state().queue_used.slots().iter().filter(|u| u.0).count()
    }

    /// Number of signals in use.
    pub fn signals_in_use(&self) -> usize {
        self.lock_state().signal_used.slots().iter().filter(|u| u.0).count()
    }

    /// Runs every queue and host call until nothing can make progress.
    pub fn pump(&self) {
        self.try_pump();
    }

    /// Pumps to a fixpoint unless another pump is running (on another thread, or further up
    /// this thread's stack when a doorbell is rung inside a host call); returns whether it ran.
    fn try_pump(&self) -> bool {
        // Ordering: Acquire/Release on the re-entrancy flag: a nested or concurrent pump leaves
        // the work to the one running.
        if self.pumping.swap(true, Ordering::Acquire) {
            return false;
        }
        loop {
            let mut progress = false;
            for q in 0..self.mem.queues.slots().len() {
                progress |= self.run_queue(q);
            }
            // Only with calls pending (set before the first push): the drain is `host_call`'s.
            if !self.calls.is_empty() {
                // Read with the state lock released again before the drain runs (it takes it).
                let drain = self.lock_state().drain_calls;
                if let Some(drain) = drain {
                    progress |= drain(self);
                }
            }
            if !progress {
                break;
            }
            // Ordering: Relaxed; the pump holder is the only writer, and waiters only compare.
            self.pump_passes.store(self.pump_passes.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
        }
        self.pumping.store(false, Ordering::Release);
        true
    }

    fn ring_of(&self, q: usize) -> Option<(AqlRing, &QueueMem<C>)> {
        let qm = self.mem.queues.slots().get(q)?;
        let base = NonNull::new(qm.ring.slots().as_ptr() as *mut u8)?;
        // SAFETY: the ring memory and indices live in `self.mem`, borrowed for 'm, and are used
        // only through the AQL protocol.
        let ring = unsafe {
            AqlRing::new(
                base,
                Self::RING as u32,
                NonNull::from(&qm.write_index).cast(),
                NonNull::from(&qm.read_index).cast(),
            )
        }
        .ok()?;
        Some((ring, qm))
    }

    fn run_queue(&self, q: usize) -> bool {
        {
            let st = self.lock_state();
            if !st.queue_used.slots().get(q).is_some_and(|u| u.0) || self.fault_of(q).is_some() {
                return false;
            }
        }
        let Some((ring, qm)) = self.ring_of(q) else { return false };
        // Ordering: Acquire pairs with the Release doorbell store.
        let limit = qm.doorbell.load(Ordering::Acquire);
        let mut progress = false;
        loop {
            let mut exec = Exec { lb: self };
            let index = ring.read_index();
            // The packet as the trace records it (not read when there is no trace to keep it).
            let words = if Self::TRACE == 0 { None } else { ring.read(index) };
            match aql::step(&ring, limit, &mut exec) {
                Step::Retired(i) => {
                    progress = true;
                    match words {
                        Some(words) => self.push_trace(TraceEntry::Packet { queue: q as u32, index: i, words }),
                        // No trace: the packet counts as dropped, as an entry that does not fit.
                        None if Self::TRACE == 0 => self.lock_state().trace_dropped += 1,
                        None => {}
                    }
                }
                Step::Faulted(_, fault) => {
                    self.set_fault(q, Some(fault));
                    self.push_trace(TraceEntry::Fault { queue: q as u32, fault });
                    return true;
                }
                Step::Idle | Step::Stalled | Step::Blocked => return progress,
            }
        }
    }

    fn run_host_calls(&self) -> bool {
        self.calls.run_ready(|done| {
            // SAFETY: `done` is a signal of this backend, live until the stream's barrier after
            // it completes (the host_call contract).
            unsafe { done.get() }.reset(0);
            self.push_trace(TraceEntry::HostCall);
        }) > 0
    }

    /// Records `e`, or counts it as dropped when the trace is full (or has no entries).
    fn push_trace(&self, e: TraceEntry) {
        let mut st = self.lock_state();
        let n = st.trace_len;
        match st.trace.slots_mut().get_mut(n) {
            Some(slot) => {
                *slot = TraceSlot(Some(e));
                st.trace_len += 1;
            }
            None => st.trace_dropped += 1,
        }
    }

    fn signal_index(&self, h: SignalHandle) -> Option<usize> {
        // 64 bytes, except in loom builds (larger atomics, core/src/sync.rs).
        let size = core::mem::size_of::<AmdSignal>();
        let signals = self.mem.signals.slots();
        let base = signals.as_ptr() as usize;
        let off = (h.0 as usize).checked_sub(base)?;
        (off % size == 0 && off / size < signals.len()).then_some(off / size)
    }
}

struct Exec<'a, 'm, C: Config> {
    lb: &'a Loopback<'m, C>,
}

impl<C: Config> PacketExecutor for Exec<'_, '_, C> {
    fn read_signal(&mut self, handle: u64, mask: i64) -> Option<i64> {
        if handle == 0 {
            return None;
        }
        if let Some(i) = self.lb.signal_index(SignalHandle(handle)) {
            return self.lb.mem.signals.slots().get(i).map(AmdSignal::load);
        }
        // A value anywhere in host memory (stream wait-value): the value sits at handle + 8.
        // Only the 32-bit half a 32-bit wait's mask covers is read (a 32-bit value 4 past an
        // 8-byte boundary is waited for in the upper half of the aligned word).
        let addr = (handle as usize).wrapping_add(8);
        let upper_only = mask as u64 & 0xffff_ffff == 0 && mask != 0;
        if mask as u64 >> 32 == 0 || upper_only {
            let at = if upper_only { addr.wrapping_add(4) } else { addr };
            if at % 4 != 0 {
                return None;
            }
            let p = core::ptr::with_exposed_provenance::<u32>(at);
            // SAFETY: the enqueuer of the wait-value vouched for a live, aligned u32 there.
            let v = i64::from(unsafe { core::ptr::read_volatile(p) });
            Some(if upper_only { v << 32 } else { v })
        } else {
            if addr % 8 != 0 {
                return None;
            }
            let p = core::ptr::with_exposed_provenance::<i64>(addr);
            // SAFETY: the enqueuer of the wait-value vouched for a live, aligned u64 there.
            Some(unsafe { core::ptr::read_volatile(p) })
        }
    }

    fn complete_signal(&mut self, handle: u64, start: u64, end: u64) {
        if let Some(s) = self.lb.signal_index(SignalHandle(handle)).and_then(|i| self.lb.mem.signals.slots().get(i)) {
            // Loopback signals have no event mailbox: waiters poll (and pump).
            s.complete(Some((start, end)), |_, _| {});
        }
    }

    fn dispatch(&mut self, packet: &KernelDispatchPacket, _kernarg: u64) -> Outcome {
        let wg = [packet.workgroup_size_x, packet.workgroup_size_y, packet.workgroup_size_z];
        let grid = [packet.grid_size_x, packet.grid_size_y, packet.grid_size_z];
        // u64: three u16 sizes overflow u32 (and a wrapped product could pass the 1024 check).
        let wg_items: u64 = wg.iter().map(|&w| u64::from(w)).product();
        if wg.contains(&0) || grid.contains(&0) || wg_items > 1024 {
            return Outcome::Fault(QueueFault::InvalidDispatch);
        }
        let f = {
            let st = self.lb.lock_state();
            let idx = packet.kernel_object.checked_sub(KERNEL_OBJECT_BASE).map(|o| (o / 64) as usize);
            idx.and_then(|i| st.kernels.get(i).copied().flatten())
        };
        match f {
            Some(f) => match f(&Dispatch { packet: *packet }) {
                Ok(()) => Outcome::Done,
                Err(e) => Outcome::Fault(e),
            },
            None => Outcome::Fault(QueueFault::UnknownKernel),
        }
    }

    fn timestamp(&mut self) -> u64 {
        // Ordering: Relaxed; the clock only needs to be monotonic.
        self.lb.clock.fetch_add(1, Ordering::Relaxed) + 1
    }
}

// SAFETY: signals are AmdSignals inside `self.mem` (64-byte aligned, borrowed for 'm); queue
// memory likewise; every published packet is processed by `pump`, which doorbells and waits run,
// or the queue's fault is reported.
unsafe impl<C: Config> Backend for Loopback<'_, C> {
    type Queue = LoopbackQueue;
    /// The loopback runs host kernels only: no code object is ever loaded.
    type Module = core::convert::Infallible;

    fn device_count(&self) -> u32 {
        self.devices
    }

    fn device_info(&self, device: u32) -> Result<DeviceInfo> {
        if device >= self.device_count() {
            return Err(Error::InvalidDevice);
        }
        Ok(DeviceInfo { cu_count: LOOPBACK_CUS, gfx_target_version: 90010, timestamp_frequency: LOOPBACK_TIMESTAMP_HZ })
    }

    fn queue_create(&self, device: u32, priority: Priority, cu_mask: Option<&CuMask>) -> Result<LoopbackQueue> {
        if device >= self.device_count() {
            return Err(Error::InvalidDevice);
        }
        // The slot is claimed and its ring made fresh under the state lock: the pump reads a
        // queue only after seeing it in use under that lock, so it never sees the previous
        // user's packets (a faulted queue leaves its packet VALID) beside the new user's writes.
        let mut st = self.lock_state();
        let q = st.queue_used.slots().iter().position(|u| !u.0).ok_or(Error::OutOfMemory)?;
        let (ring, qm) = self.ring_of(q).ok_or(Error::OutOfMemory)?;
        // A fresh queue starts with every slot INVALID and, as HSA allows, its indices where the
        // previous user left them (they only ever grow).
        // The consumer's last retire on this slot's previous queue stored the read index with
        // Release; this Acquire load orders the pump's reads of the old packets before the new
        // user's writes into the same ring memory.
        let _retired = ring.read_index();
        ring.invalidate_all();
        let w = self.start_index.unwrap_or_else(|| ring.write_index());
        // Ordering: Release; nobody consumes this queue before it is handed out.
        qm.write_index.store(w, Ordering::Release);
        // Ordering: Release; nobody consumes this queue before it is handed out.
        qm.read_index.store(w, Ordering::Release);
        qm.doorbell.store(w, Ordering::Release);
        self.set_fault(q, None);
        if let Some(p) = st.queue_priority.slots_mut().get_mut(q) {
            *p = QueuePriority(priority);
        }
        if let Some(m) = st.queue_cu_mask.slots_mut().get_mut(q) {
            *m = QueueCuMask(cu_mask.copied());
        }
        if let Some(u) = st.queue_used.slots_mut().get_mut(q) {
            *u = Used(true);
        }
        Ok(LoopbackQueue(q as u32))
    }

    fn queue_desc(&self, queue: &LoopbackQueue) -> Result<QueueDesc> {
        let (ring, qm) = self.ring_of(queue.0 as usize).ok_or(Error::InvalidHandle)?;
        let ka = NonNull::new(qm.kernarg.slots().as_ptr() as *mut u8).ok_or(Error::InvalidHandle)?;
        Ok(QueueDesc {
            ring,
            kernarg_host: ka,
            kernarg_device: ka.as_ptr().expose_provenance() as u64,
            kernarg_slot_bytes: Self::KARG as u32,
            kernarg_overhang_slots: 0,
        })
    }

    fn ring_doorbell(&self, queue: &LoopbackQueue, index: u64) {
        if let Some(qm) = self.mem.queues.slots().get(queue.0 as usize) {
            // Ordering: Release, after the packets' Release headers (docs/kfd-aql.md §2 ordering).
            // Producers never ring backwards, and indices may wrap, so this is a plain store.
            qm.doorbell.store(index.wrapping_add(1), Ordering::Release);
        }
        self.push_trace(TraceEntry::Doorbell { queue: queue.0, value: index });
        // Ordering: Relaxed; see set_deferred.
        if !self.deferred.load(Ordering::Relaxed) {
            self.pump();
        }
    }

    fn queue_fault(&self, queue: &LoopbackQueue) -> Option<Error> {
        self.fault_of(queue.0 as usize).map(|f| match f {
            QueueFault::MemoryViolation => Error::IllegalAddress,
            _ => Error::LaunchFailure,
        })
    }

    fn queue_destroy(&self, queue: LoopbackQueue) {
        let mut st = self.lock_state();
        if let Some(u) = st.queue_used.slots_mut().get_mut(queue.0 as usize) {
            *u = Used(false);
        }
    }

    fn signal_create(&self, initial: i64) -> Result<SignalHandle> {
        let mut st = self.lock_state();
        let i = st.signal_used.slots().iter().position(|u| !u.0).ok_or(Error::OutOfMemory)?;
        let s = self.mem.signals.slots().get(i).ok_or(Error::OutOfMemory)?;
        if let Some(u) = st.signal_used.slots_mut().get_mut(i) {
            *u = Used(true);
        }
        // Ordering: Relaxed; `reset` below publishes with Release.
        s.kind.store(crate::signal::kind::USER, Ordering::Relaxed);
        s.reset(initial);
        Ok(s.handle())
    }

    fn signal_destroy(&self, signal: SignalHandle) {
        if let Some(i) = self.signal_index(signal) {
            let mut st = self.lock_state();
            if let Some(u) = st.signal_used.slots_mut().get_mut(i) {
                *u = Used(false);
            }
        }
    }

    fn signal_wait(&self, signal: SignalHandle, cond: Condition, expected: i64, _timeout: Timeout) -> Result<i64> {
        let s = self.signal_index(signal).and_then(|i| self.mem.signals.slots().get(i)).ok_or(Error::InvalidHandle)?;
        // Nothing runs between pumps on a thread-free device: after a full pump of our own the
        // answer is final, so every timeout behaves like zero. While another thread pumps, wait
        // and pump again: as long as that pump makes progress (a thread feeding it can keep it
        // running for long), else boundedly (a host function that calls back into the runtime
        // would otherwise wait for its own caller, whose pump is stopped inside it).
        let mut ran = self.try_pump();
        let mut spins = 0u32;
        // Ordering: Relaxed, as in `try_pump`.
        let mut passes = self.pump_passes.load(Ordering::Relaxed);
        let block = || {
            if ran || spins >= LOOPBACK_WAIT_SPINS {
                return false;
            }
            // Ordering: Relaxed, as above.
            let now = self.pump_passes.load(Ordering::Relaxed);
            if now != passes {
                passes = now;
                spins = 0;
            }
            spins += 1;
            core::hint::spin_loop();
            ran = self.try_pump();
            true
        };
        s.wait(cond, expected, block).ok_or(Error::NotReady)
    }

    fn memory_alloc(&self, device: u32, bytes: usize, _kind: MemoryKind) -> Result<u64> {
        if device >= self.device_count() {
            return Err(Error::InvalidDevice);
        }
        if bytes == 0 {
            return Err(Error::InvalidValue);
        }
        // Larger than the heap (or overflowing the rounding) never fits.
        let size = bytes.checked_next_multiple_of(16).filter(|&n| n <= Self::HEAP).ok_or(Error::OutOfMemory)?;
        let mut st = self.lock_state();
        // First fit: the lowest of 0 and the block ends where `size` bytes fit (candidate 0 is
        // the heap's start, candidate `j + 1` the end of entry `j`). One plain loop: no
        // iterator chain to expand (docs/architecture.md, "Footprint").
        // Borrowed, not copied: the table is MAX_ALLOCATIONS entries.
        let live = &st.allocations;
        let mut cursor = None;
        for j in 0..=live.len() {
            let at = match j.checked_sub(1).map(|j| live.get(j)) {
                None => 0,
                Some(Some(&(off, len))) if len != 0 => off + len,
                Some(_) => continue,
            };
            let fits = at + size <= Self::HEAP
                && live.iter().all(|&(off, len)| len == 0 || at + size <= off || off + len <= at);
            if fits && cursor.is_none_or(|c| at < c) {
                cursor = Some(at);
            }
        }
        let cursor = cursor.ok_or(Error::OutOfMemory)?;
        let slot = st.allocations.iter_mut().find(|(_, len)| *len == 0).ok_or(Error::OutOfMemory)?;
        *slot = (cursor, size);
        let base = self.mem.heap.0.get() as *mut u8;
        Ok(base.wrapping_add(cursor).expose_provenance() as u64)
    }

    fn memory_free(&self, address: u64) -> Result<()> {
        let base = self.mem.heap.0.get() as usize;
        let off = (address as usize).checked_sub(base).ok_or(Error::InvalidValue)?;
        let mut st = self.lock_state();
        let slot = st.allocations.iter_mut().find(|(o, len)| *len != 0 && *o == off).ok_or(Error::InvalidValue)?;
        *slot = (0, 0);
        Ok(())
    }

    /// The loopback's device is the calling CPU, so host memory is device memory as it is: the
    /// device address is `host`. The registration is recorded only so that an unknown address
    /// can be refused.
    fn host_register(&self, device: u32, host: u64, bytes: usize) -> Result<u64> {
        if device >= self.device_count() {
            return Err(Error::InvalidDevice);
        }
        if host == 0 || bytes == 0 || host.checked_add(bytes as u64).is_none() {
            return Err(Error::InvalidValue);
        }
        let mut st = self.lock_state();
        let slot = st.registrations.iter_mut().find(|(_, len)| *len == 0).ok_or(Error::OutOfMemory)?;
        *slot = (host, bytes as u64);
        Ok(host)
    }

    fn host_unregister(&self, device_address: u64) -> Result<()> {
        let mut st = self.lock_state();
        let slot = st
            .registrations
            .iter_mut()
            .find(|(a, len)| *len != 0 && *a == device_address)
            .ok_or(Error::InvalidValue)?;
        *slot = (0, 0);
        Ok(())
    }

    // Inlined, so a request of a constant kind links that built-in only (`builtin_fn`).
    #[inline(always)]
    fn builtin_kernel(&self, device: u32, kernel: BuiltinKernel) -> Result<u64> {
        if device >= self.device_count() {
            return Err(Error::InvalidDevice);
        }
        let (i, f) = builtin_fn(kernel)?;
        // Registered on first request (the slot is the kind's whatever the order of requests).
        if let Some(k) = self.lock_state().kernels.get_mut(i) {
            *k = Some(f);
        }
        Ok(KERNEL_OBJECT_BASE + i as u64 * 64)
    }

    fn device_doorbell(&self, queue: &LoopbackQueue) -> Option<crate::conditional::DeviceDoorbell> {
        let qm = self.mem.queues.slots().get(queue.0 as usize)?;
        // The loopback's doorbell word holds the index of the last packet plus one.
        Some(crate::conditional::DeviceDoorbell {
            address: core::ptr::from_ref(&qm.doorbell).expose_provenance() as u64,
            offset: 1,
        })
    }

    fn module_load(&self, device: u32, _code_object: &[u8]) -> Result<Self::Module> {
        if device >= self.device_count() {
            return Err(Error::InvalidDevice);
        }
        Err(Error::NotSupported)
    }

    fn module_kernel(&self, module: &Self::Module, _name: &str) -> Result<KernelSymbol> {
        match *module {}
    }

    fn module_variable(&self, module: &Self::Module, _name: &str) -> Result<VariableSymbol> {
        match *module {}
    }

    fn module_image(&self, module: &Self::Module) -> Option<(u64, u64)> {
        match *module {}
    }

    fn module_unload(&self, module: Self::Module) -> Result<()> {
        match module {}
    }

    fn host_call(&self, start: SignalHandle, done: SignalHandle, f: HostFn) -> Result<()> {
        self.lock_state().drain_calls = Some(|lb| lb.run_host_calls());
        // SAFETY: core hands this backend's own live signals and a function its caller vouched
        // for (the Backend::host_call contract).
        unsafe { self.calls.push(start, done, f) }
    }

    fn timestamp(&self) -> u64 {
        // Ordering: Relaxed; a monotonic tick count.
        self.clock.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::{Runtime, SingleThread};
    use std::boxed::Box;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn host_registration_is_identity_and_refuses_unknown_addresses() {
        let mem: &'static LoopbackMemory = Box::leak(Box::new(LoopbackMemory::new()));
        let lb = Loopback::new(mem);
        let rt: Runtime<Loopback<'_>, _> = Runtime::new(lb, SingleThread);
        let mut src = [7u8; 100];
        let mut dst = [0u8; 100];
        let (s, d) = (src.as_mut_ptr() as u64, dst.as_mut_ptr() as u64);
        assert_eq!(rt.backend().host_register(0, s, 100), Ok(s));
        assert_eq!(rt.backend().host_register(0, d, 100), Ok(d));
        assert_eq!(rt.backend().host_register(0, 0, 100), Err(Error::InvalidValue));
        assert_eq!(rt.backend().host_register(0, s, 0), Err(Error::InvalidValue));
        assert_eq!(rt.backend().host_register(1, s, 100), Err(Error::InvalidDevice));
        rt.memcpy(d, s, 100).unwrap();
        assert_eq!(dst, [7u8; 100]);
        assert_eq!(rt.backend().host_unregister(s + 1), Err(Error::InvalidValue));
        assert_eq!(rt.backend().host_unregister(s), Ok(()));
        assert_eq!(rt.backend().host_unregister(s), Err(Error::InvalidValue));
        assert_eq!(rt.backend().host_unregister(d), Ok(()));
        for i in 0..MAX_REGISTRATIONS as u64 {
            assert_eq!(rt.backend().host_register(0, s + i, 1), Ok(s + i));
        }
        assert_eq!(rt.backend().host_register(0, d, 1), Err(Error::OutOfMemory), "the table is full");
    }

    #[test]
    fn runtime_is_send_and_sync() {
        assert_send_sync::<Loopback<'static>>();
        assert_send_sync::<Runtime<Loopback<'static>, SingleThread>>();
    }
}
