//! [`Runtime`]: the stream engine. Streams, events, implicit synchronisation, per-thread streams
//! and device reset, over any [`Backend`].
//!
//! # How streams execute
//!
//! A stream is a table slot and a position on a pooled hardware queue (`docs/queue-pool.md`).
//! Each slot has a *progress signal*, created on the slot's first use and kept for the
//! runtime's life: every packet a stream publishes with the progress signal as its completion
//! signal is *counted*, the slot remembers how many it has published over all its lives
//! (`submitted`, written under the stream's lock, read anywhere), and the signal, which starts at
//! 0, goes down by one as each completes. Everything the stream enqueued so far is done when
//! `value <= -submitted`; "everything up to now" is the pair (progress signal, `submitted`), a
//! point in time that another queue waits for with one barrier-value packet
//! (`value < 1 - submitted`). Every operation ends with a counted packet, and a stream's counted
//! packets complete in order, so the count is exact.
//!
//! FIFO order on the queue: every packet carries the barrier bit, so a queue runs in order, and
//! streams sharing a queue are serialized with each other (as HIP's are): see
//! `docs/queue-pool.md`, "Serialization rules" and "Head-of-line effects".
//!
//! Cross-stream ordering: the null stream's implicit synchronisation waits on the other streams'
//! progress points (barrier-value packets, `implicit_sync.rs`); events complete a signal of their
//! own with a barrier-AND packet, which waits on it with a barrier-AND; host functions use a pair
//! of signals from a small pool.
//!
//! # Locks
//!
//! Enqueueing takes only the stream's own lock (a [`ThreadKeys::RawMutex`]): handles are checked
//! through atomics, the null stream's progress point, the number of live captures and a stream's
//! detached flag are atomics, and a pooled queue is reached through a [`Binding`](crate::pool)
//! that keeps it in place. The structural lock guards changes of shape only: stream and event
//! create and destroy, the queue pool, captures, graphs, executables and contexts, device reset.
//! Lock order: structural, then event, then stream; host-signal pool last.

#![deny(unsafe_code)]

use crate::sync::atomic64::AtomicU64;
use core::sync::atomic::Ordering as CoreOrdering;
use portable_atomic::{AtomicU32, Ordering};

#[cfg(feature = "capture")]
mod capture;
#[cfg(feature = "capture")]
#[allow(unsafe_code)]
mod conditional;
#[cfg(feature = "capture")]
mod context;
mod event;
#[cfg(feature = "capture")]
mod graph_update;
#[cfg(feature = "capture")]
mod graphs;
mod host_wait;
mod implicit_sync;
mod mempool;
mod modules;
mod ops;
mod stream;
#[allow(unsafe_code)]
mod submit;
mod sync;

pub use crate::slot::MAX_DEVICES;
#[cfg(feature = "capture")]
pub use crate::slots::capture::CaptureSlot;
#[cfg(feature = "capture")]
pub use crate::slots::context::{ContextHandle, ContextSlot};
pub use crate::slots::event::EventSlot;
#[cfg(feature = "capture")]
pub use crate::slots::graph::{ExecSlot, GraphExecHandle, GraphHandle, GraphSlot};
pub use crate::slots::host_signal::HostSignalSlot;
pub use crate::slots::module::{ModuleHandle, ModuleSlot};
pub use crate::slots::stream::StreamSlot;
pub use crate::slots::thread::ThreadSlot;

use crate::backend::{Backend, DeviceInfo};
#[cfg(feature = "capture")]
use crate::capture::CaptureMode;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::pool::PoolWriter;
use crate::slot::Table;
#[cfg(feature = "capture")]
use crate::slots::graph::BodyQueues;
use crate::slots::lookup;
use crate::slots::thread::{DeviceSlot, TOMBSTONE};
use crate::stream::{Priority, StreamHandle};
use crate::table::{self, Lookup};
use crate::thread::{ThreadKey, ThreadKeys};

/// Handle tag of streams.
const STREAM_TAG: u16 = 0x5a71;
/// Handle tag of events.
const EVENT_TAG: u16 = 0xe7e7;

static NEXT_STREAM_ID: AtomicU64 = AtomicU64::new(1);

fn next_stream_id() -> u64 {
    // Ordering: Relaxed; only uniqueness and monotonicity of the counter matter.
    NEXT_STREAM_ID.fetch_add(1, Ordering::Relaxed)
}

#[cfg(feature = "capture")]
fn mode_of(raw: u8) -> CaptureMode {
    CaptureMode::from_raw(u32::from(raw)).unwrap_or_default()
}

/// The host-signal pool: slots and a cursor where the search for a free one starts.
struct HostSignals<C: Config> {
    slots: C::HostSignals,
    cursor: usize,
}

// ----- the structural state -------------------------------------------------------------------

/// Free and draining lists of a table (links live in the slots): slots below `high` have been
/// used; `free` and `draining` are list heads (slot + 1; 0 is empty).
#[derive(Debug, Clone, Copy, Default)]
struct Lists {
    free: u32,
    draining: u32,
}

/// Everything that changes only under the structural lock.
pub(crate) struct Structure<C: Config> {
    pool: PoolWriter,
    streams: Lists,
    events: Lists,
    #[cfg(feature = "capture")]
    graphs: C::Graphs,
    #[cfg(feature = "capture")]
    captures: C::Captures,
    #[cfg(feature = "capture")]
    execs: C::Execs,
    #[cfg(feature = "capture")]
    contexts: C::Contexts,
    _config: core::marker::PhantomData<fn() -> C>,
}

/// The structural state (locked).
type St<C> = Structure<C>;

// ----- public value types ---------------------------------------------------------------------

/// A kernel launch (`hipModuleLaunchKernel`'s arguments in AQL terms).
#[derive(Debug, Clone, Copy)]
pub struct KernelLaunch<'a> {
    /// Kernel object (address of the kernel descriptor).
    pub kernel_object: u64,
    /// Grid size in work-items.
    pub grid: [u32; 3],
    /// Work-group size in work-items (product at most 1024).
    pub workgroup: [u16; 3],
    /// Group (LDS) bytes per work-group.
    pub group_segment_size: u32,
    /// Private bytes per work-item.
    pub private_segment_size: u32,
    /// Kernel arguments, copied at enqueue.
    pub kernarg: &'a [u8],
}

/// `hipStreamWaitValue*` comparison.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum WaitValueOp {
    /// `hipStreamWaitValueGte`: `(*ptr & mask) >= value`.
    Gte = 0,
    /// `hipStreamWaitValueEq`: `(*ptr & mask) == value`.
    Eq = 1,
    /// `hipStreamWaitValueAnd`: `(*ptr & value & mask) != 0`.
    And = 2,
    /// `hipStreamWaitValueNor`: `~(*ptr | value) & mask != 0`.
    Nor = 3,
}

impl WaitValueOp {
    /// Parses HIP's flag value; anything else is `InvalidValue`.
    pub fn from_raw(raw: u32) -> Result<WaitValueOp> {
        Ok(match raw {
            0 => WaitValueOp::Gte,
            1 => WaitValueOp::Eq,
            2 => WaitValueOp::And,
            3 => WaitValueOp::Nor,
            _ => return Err(Error::InvalidValue),
        })
    }
}

/// Ticks to milliseconds.
fn ticks_to_ms(ticks: i64, hz: u64) -> f32 {
    if hz == 0 {
        return 0.0;
    }
    (ticks as f64 * 1000.0 / hz as f64) as f32
}

// ----- the runtime ------------------------------------------------------------------------------

/// The stream engine over backend `B`, with host threads told apart (and locks supplied) by `K`,
/// and table sizes from `C` ([`crate::config`]).
pub struct Runtime<B: Backend, K: ThreadKeys, C: Config = crate::config::Default> {
    backend: B,
    keys: K,
    streams: C::Streams<K::RawMutex>,
    /// Stream slots below this index have been used (scans stop here).
    stream_high: AtomicU32,
    events: C::Events<K::RawMutex>,
    /// Event slots below this index have been used.
    event_high: AtomicU32,
    threads: C::Threads,
    queues: C::Queues<B::Queue>,
    devices: [DeviceSlot; MAX_DEVICES],
    /// Captures alive (Active or Invalidated): while 0, enqueues skip every capture check.
    captures_live: AtomicU32,
    structure: lock_api::Mutex<K::RawMutex, Structure<C>>,
    host_signals: lock_api::Mutex<K::RawMutex, HostSignals<C>>,
    /// Body queues of conditional nodes, dedicated to their executables (outside the pool).
    #[cfg(feature = "capture")]
    body_queues: lock_api::Mutex<K::RawMutex, BodyQueues<B::Queue>>,
    /// Loaded code objects.
    modules: lock_api::Mutex<K::RawMutex, C::Modules<B::Module>>,
}

impl<B: Backend, K: ThreadKeys, C: Config> Runtime<B, K, C> {
    /// A runtime over `backend`, with `keys` naming host threads. `const`, so it can live in a
    /// `static`; [`init`](Self::init) builds the same runtime in place.
    pub const fn new(backend: B, keys: K) -> Self {
        Runtime {
            backend,
            keys,
            streams: <C::Streams<K::RawMutex> as Table<StreamSlot<K::RawMutex>>>::EMPTY,
            stream_high: AtomicU32::new(0),
            events: <C::Events<K::RawMutex> as Table<EventSlot<K::RawMutex>>>::EMPTY,
            event_high: AtomicU32::new(0),
            threads: <C::Threads as Table<ThreadSlot>>::EMPTY,
            queues: <C::Queues<B::Queue> as Table<crate::pool::QueueSlot<B::Queue>>>::EMPTY,
            devices: Self::DEVICES,
            captures_live: AtomicU32::new(0),
            structure: Self::structure_empty(),
            host_signals: Self::host_signals_empty(),
            #[cfg(feature = "capture")]
            body_queues: Self::body_queues_empty(),
            modules: Self::modules_empty(),
        }
    }

    /// [`new`](Self::new) written into `place` field by field, each table slot by slot, and
    /// returned: the way to build a runtime inside a `static` whose backend is not `const` (a
    /// firmware image's). `new`'s result is a runtime-sized temporary, built on the stack and
    /// copied (tens of KiB of stack and a chain of copies in the image); this writes each part
    /// once where it lives (docs/architecture.md, "Footprint"). `backend` is moved in.
    #[allow(unsafe_code)]
    pub fn init(place: &mut core::mem::MaybeUninit<Self>, backend: B, keys: K) -> &mut Self {
        let p = place.as_mut_ptr();
        // SAFETY: `p` points to `place`, valid for writes and aligned; the backend is written
        // through a pointer to itself, `init_rest` writes every other field.
        unsafe {
            core::ptr::addr_of_mut!((*p).backend).write(backend);
            Self::init_rest(p, keys);
            place.assume_init_mut()
        }
    }

    /// [`init`](Self::init) with the backend built in place too: `backend` initialises the
    /// slot it is given and returns it (`Loopback::init`, for one). `InvalidValue` (and `place`
    /// left uninitialised) when what it returns is not that slot.
    #[allow(unsafe_code)]
    pub fn init_with(
        place: &mut core::mem::MaybeUninit<Self>,
        keys: K,
        backend: impl FnOnce(&mut core::mem::MaybeUninit<B>) -> &mut B,
    ) -> Result<&mut Self> {
        let p = place.as_mut_ptr();
        // SAFETY: `p` points to `place`, valid for writes and aligned; the backend's slot is
        // handed out as a `MaybeUninit` of its own type (same layout) through a pointer to
        // itself, and counts as written once `backend` returns that very slot initialised;
        // `init_rest` writes every other field.
        unsafe {
            let slot = core::ptr::addr_of_mut!((*p).backend).cast::<core::mem::MaybeUninit<B>>();
            if !core::ptr::eq(backend(&mut *slot), (*slot).as_ptr()) {
                return Err(Error::InvalidValue);
            }
            Self::init_rest(p, keys);
            Ok(place.assume_init_mut())
        }
    }

    /// Writes every field of the runtime at `p` but its backend, as [`new`](Self::new) has them.
    ///
    /// # Safety
    /// `p` must be valid for writes and aligned.
    #[allow(unsafe_code)]
    unsafe fn init_rest(p: *mut Self, keys: K) {
        // Every field, named: a field added to `Runtime` fails to compile here until it is
        // written below too (never called; no code).
        let _every_field = |r: &Self| {
            let Self {
                backend: _,
                keys: _,
                streams: _,
                stream_high: _,
                events: _,
                event_high: _,
                threads: _,
                queues: _,
                devices: _,
                captures_live: _,
                structure: _,
                host_signals: _,
                #[cfg(feature = "capture")]
                    body_queues: _,
                modules: _,
            } = r;
        };
        use core::mem::MaybeUninit;
        use core::ptr::addr_of_mut;
        // SAFETY: the caller vouches for `p`; every field is written through a pointer to
        // itself (`addr_of_mut!`, no reference to the uninitialised whole), each table as a
        // `MaybeUninit` of its own type (same layout).
        unsafe {
            addr_of_mut!((*p).keys).write(keys);
            Table::init_empty(&mut *addr_of_mut!((*p).streams).cast::<MaybeUninit<C::Streams<K::RawMutex>>>());
            addr_of_mut!((*p).stream_high).write(AtomicU32::new(0));
            Table::init_empty(&mut *addr_of_mut!((*p).events).cast::<MaybeUninit<C::Events<K::RawMutex>>>());
            addr_of_mut!((*p).event_high).write(AtomicU32::new(0));
            Table::init_empty(&mut *addr_of_mut!((*p).threads).cast::<MaybeUninit<C::Threads>>());
            Table::init_empty(&mut *addr_of_mut!((*p).queues).cast::<MaybeUninit<C::Queues<B::Queue>>>());
            addr_of_mut!((*p).devices).write(Self::DEVICES);
            addr_of_mut!((*p).captures_live).write(AtomicU32::new(0));
            addr_of_mut!((*p).structure).write(Self::STRUCTURE);
            addr_of_mut!((*p).host_signals).write(Self::HOST_SIGNALS);
            #[cfg(feature = "capture")]
            addr_of_mut!((*p).body_queues).write(Self::BODY_QUEUES);
            addr_of_mut!((*p).modules).write(Self::MODULES);
        }
    }

    // The locked parts as constants: written with one copy each (a constant's image), not built
    // on the stack first. Interior mutability is the point: each is a fresh value written once
    // into a runtime, never borrowed as a shared constant.
    #[allow(clippy::declare_interior_mutable_const)]
    const STRUCTURE: lock_api::Mutex<K::RawMutex, Structure<C>> = Self::structure_empty();
    #[allow(clippy::declare_interior_mutable_const)]
    const HOST_SIGNALS: lock_api::Mutex<K::RawMutex, HostSignals<C>> = Self::host_signals_empty();
    #[cfg(feature = "capture")]
    #[allow(clippy::declare_interior_mutable_const)]
    const BODY_QUEUES: lock_api::Mutex<K::RawMutex, BodyQueues<B::Queue>> = Self::body_queues_empty();
    #[allow(clippy::declare_interior_mutable_const)]
    const MODULES: lock_api::Mutex<K::RawMutex, C::Modules<B::Module>> = Self::modules_empty();

    /// The device table of a new runtime.
    #[allow(clippy::declare_interior_mutable_const)]
    const DEVICES: [DeviceSlot; MAX_DEVICES] =
        [const { DeviceSlot { null_stream: AtomicU64::new(0), max_hw_queues: AtomicU32::new(C::MAX_HW_QUEUES) } };
            MAX_DEVICES];

    /// The structural state of a new runtime.
    const fn structure_empty() -> lock_api::Mutex<K::RawMutex, Structure<C>> {
        lock_api::Mutex::const_new(
            <K::RawMutex as lock_api::RawMutex>::INIT,
            Structure {
                pool: PoolWriter::new(),
                streams: Lists { free: 0, draining: 0 },
                events: Lists { free: 0, draining: 0 },
                #[cfg(feature = "capture")]
                graphs: <C::Graphs as Table<GraphSlot>>::EMPTY,
                #[cfg(feature = "capture")]
                captures: <C::Captures as Table<CaptureSlot>>::EMPTY,
                #[cfg(feature = "capture")]
                execs: <C::Execs as Table<ExecSlot>>::EMPTY,
                #[cfg(feature = "capture")]
                contexts: <C::Contexts as Table<ContextSlot>>::EMPTY,
                _config: core::marker::PhantomData,
            },
        )
    }

    /// The host-signal pool of a new runtime.
    const fn host_signals_empty() -> lock_api::Mutex<K::RawMutex, HostSignals<C>> {
        lock_api::Mutex::const_new(
            <K::RawMutex as lock_api::RawMutex>::INIT,
            HostSignals { slots: <C::HostSignals as Table<HostSignalSlot>>::EMPTY, cursor: 0 },
        )
    }

    /// The body queues of a new runtime.
    #[cfg(feature = "capture")]
    const fn body_queues_empty() -> lock_api::Mutex<K::RawMutex, BodyQueues<B::Queue>> {
        lock_api::Mutex::const_new(<K::RawMutex as lock_api::RawMutex>::INIT, heapless::Vec::new())
    }

    /// The code-object table of a new runtime.
    const fn modules_empty() -> lock_api::Mutex<K::RawMutex, C::Modules<B::Module>> {
        lock_api::Mutex::const_new(
            <K::RawMutex as lock_api::RawMutex>::INIT,
            <C::Modules<B::Module> as Table<ModuleSlot<B::Module>>>::EMPTY,
        )
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    // Out of line on small images (docs/architecture.md, "Footprint"); inlined on hosts.
    #[cfg_attr(not(target_has_atomic = "64"), inline(never))]
    #[cfg_attr(target_has_atomic = "64", inline)]
    fn stream_slots(&self) -> &[StreamSlot<K::RawMutex>] {
        let all = self.streams.slots();
        // Ordering: Acquire pairs with the Release raise in `take_slot`.
        let high = self.stream_high.load(Ordering::Acquire) as usize;
        all.get(..high.min(all.len())).unwrap_or(all)
    }

    fn event_slots(&self) -> &[EventSlot<K::RawMutex>] {
        let all = self.events.slots();
        // Ordering: Acquire, as above.
        let high = self.event_high.load(Ordering::Acquire) as usize;
        all.get(..high.min(all.len())).unwrap_or(all)
    }

    // Out of line on targets without native 64-bit atomics (the small 32-bit images, where size
    // comes first: one copy instead of one per caller, docs/architecture.md, "Footprint");
    // inlined on hosts.
    #[cfg_attr(not(target_has_atomic = "64"), inline(never))]
    #[cfg_attr(target_has_atomic = "64", inline)]
    fn stream(&self, i: usize) -> Result<&StreamSlot<K::RawMutex>> {
        self.streams.slots().get(i).ok_or(Error::InvalidHandle)
    }

    #[inline]
    fn lookup_stream(&self, raw: u64) -> Lookup {
        lookup(STREAM_TAG, raw, self.streams.slots(), |s| &s.word)
    }

    fn lookup_event(&self, raw: u64) -> Lookup {
        lookup(EVENT_TAG, raw, self.events.slots(), |e| &e.word)
    }

    fn handle_of(&self, i: usize) -> StreamHandle {
        let g = self.streams.slots().get(i).map_or(0, |s| s.word.handle_generation());
        StreamHandle(table::encode(STREAM_TAG, g, i))
    }

    // Out of line on targets without native 64-bit atomics (the small 32-bit images, where size
    // comes first: one copy instead of one per caller, docs/architecture.md, "Footprint");
    // inlined on hosts.
    #[cfg_attr(not(target_has_atomic = "64"), inline(never))]
    #[cfg_attr(target_has_atomic = "64", inline)]
    fn lock(&self) -> lock_api::MutexGuard<'_, K::RawMutex, Structure<C>> {
        self.structure.lock()
    }

    #[cfg_attr(not(target_has_atomic = "64"), inline(never))]
    #[cfg_attr(target_has_atomic = "64", inline)]
    fn any_capture(&self) -> bool {
        // Ordering: Acquire pairs with the Release changes in capture.rs.
        cfg!(feature = "capture") && self.captures_live.load(Ordering::Acquire) != 0
    }

    // ----- devices and threads -------------------------------------------------------------

    /// Number of devices (`hipGetDeviceCount`); `NoDevice` when there is none.
    #[inline]
    pub fn device_count(&self) -> Result<u32> {
        match self.backend.device_count().min(MAX_DEVICES as u32) {
            0 => Err(Error::NoDevice),
            n => Ok(n),
        }
    }

    /// Facts about a device.
    pub fn device_info(&self, device: u32) -> Result<DeviceInfo> {
        if device >= self.device_count()? {
            return Err(Error::InvalidDevice);
        }
        self.backend.device_info(device)
    }

    /// `hipDeviceGetStreamPriorityRange`: `(least, greatest)` = `(1, -1)`.
    pub const fn stream_priority_range(&self) -> (i32, i32) {
        (Priority::LEAST, Priority::GREATEST)
    }

    /// Sets how many hardware queues `device` creates before new streams share them (HIP's
    /// `GPU_MAX_HW_QUEUES`; at least 1). Queues already created stay.
    pub fn set_max_hw_queues(&self, device: u32, max: u32) -> Result<()> {
        let d = self.devices.get(device as usize).ok_or(Error::InvalidDevice)?;
        // Ordering: Relaxed; read under the structural lock when a stream binds.
        d.max_hw_queues.store(max.max(1), Ordering::Relaxed);
        Ok(())
    }

    /// The hardware-queue budget of `device`.
    pub fn max_hw_queues(&self, device: u32) -> Result<u32> {
        let d = self.devices.get(device as usize).ok_or(Error::InvalidDevice)?;
        // Ordering: Relaxed, as above.
        Ok(d.max_hw_queues.load(Ordering::Relaxed))
    }

    /// `hipSetDevice` for the calling thread.
    pub fn set_device(&self, device: u32) -> Result<()> {
        if device >= self.device_count()? {
            return Err(Error::InvalidDevice);
        }
        let t = self.thread_slot()?;
        // Ordering: Relaxed; only the calling thread reads its own slot's device.
        t.device.store(device, Ordering::Relaxed);
        Ok(())
    }

    /// `hipGetDevice` for the calling thread (0 until it sets one).
    pub fn device(&self) -> Result<u32> {
        self.device_count()?;
        Ok(self.current_device())
    }

    /// Forgets the calling thread: its per-thread streams are destroyed (pending work still
    /// completes) and its table slot is freed. std-host calls this at thread exit.
    pub fn thread_exit(&self) {
        let Some(t) = self.find_thread() else { return };
        let mut st = self.lock();
        for p in &t.per_thread {
            // Ordering: Relaxed; the slot is the calling thread's own.
            let raw = p.swap(0, Ordering::Relaxed);
            if let Lookup::Live(i) = self.lookup_stream(raw) {
                self.retire_stream(&mut st, i);
            }
        }
        // Ordering: Relaxed; only this thread looks its own key up, and the structural lock
        // orders the slot's reuse.
        t.device.store(0, Ordering::Relaxed);
        t.mode.store(0, Ordering::Relaxed);
        t.key.store(TOMBSTONE, Ordering::Release);
    }

    /// Where probing for `key` starts.
    #[inline]
    fn thread_hash(&self, key: ThreadKey) -> usize {
        let n = self.threads.slots().len().max(1);
        // Fibonacci hashing of the key.
        (key.0.get().wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as usize % n
    }

    /// The calling thread's slot, if it has one (no lock: only this thread adds or removes its
    /// own key).
    #[inline]
    fn find_thread(&self) -> Option<&ThreadSlot> {
        let key = self.keys.current();
        let slots = self.threads.slots();
        let n = slots.len();
        let h = self.thread_hash(key);
        for k in 0..n {
            let t = slots.get((h + k) % n)?;
            // Ordering: Acquire pairs with the Release insert in `thread_slot`.
            match t.key.load(Ordering::Acquire) {
                0 => return None,
                v if v == key.0.get() => return Some(t),
                _ => {}
            }
        }
        None
    }

    /// The calling thread's slot, inserted on first use.
    fn thread_slot(&self) -> Result<&ThreadSlot> {
        if let Some(t) = self.find_thread() {
            return Ok(t);
        }
        let key = self.keys.current();
        let _st = self.lock();
        let slots = self.threads.slots();
        let n = slots.len();
        let h = self.thread_hash(key);
        for k in 0..n {
            let Some(t) = slots.get((h + k) % n) else { break };
            // Ordering: Relaxed under the structural lock (inserts are serialized by it).
            let v = t.key.load(Ordering::Relaxed);
            if v == 0 || v == TOMBSTONE {
                t.device.store(0, Ordering::Relaxed);
                t.mode.store(0, Ordering::Relaxed);
                for p in &t.per_thread {
                    p.store(0, Ordering::Relaxed);
                }
                // Ordering: Release publishes the cleared slot with the key.
                t.key.store(key.0.get(), Ordering::Release);
                return Ok(t);
            }
        }
        Err(Error::OutOfMemory)
    }

    #[inline]
    fn current_device(&self) -> u32 {
        // Ordering: Relaxed; the calling thread's own value.
        self.find_thread().map_or(0, |t| t.device.load(Ordering::Relaxed))
    }

    /// The calling thread's capture mode.
    #[cfg(feature = "capture")]
    fn thread_mode(&self) -> (ThreadKey, CaptureMode) {
        let key = self.keys.current();
        // Ordering: Relaxed; the calling thread's own value.
        let mode = self.find_thread().map_or(CaptureMode::Global, |t| mode_of(t.mode.load(Ordering::Relaxed)));
        (key, mode)
    }
}

/// Fence before a doorbell: the packets' headers are visible first (docs/kfd-aql.md, "Ring
/// publish protocol"); a backend whose doorbell sits in write-combined memory adds its own.
/// Inline on hosts: free on x86, where a call to it is a call to an empty function.
#[cfg_attr(target_has_atomic = "64", inline)]
fn doorbell_fence() {
    core::sync::atomic::fence(CoreOrdering::Release);
}
