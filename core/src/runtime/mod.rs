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

use core::sync::atomic::Ordering as CoreOrdering;
use portable_atomic::{AtomicU32, AtomicU64, Ordering};

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
    /// `static`.
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
            devices: [const {
                DeviceSlot { null_stream: AtomicU64::new(0), max_hw_queues: AtomicU32::new(C::MAX_HW_QUEUES) }
            }; MAX_DEVICES],
            captures_live: AtomicU32::new(0),
            structure: lock_api::Mutex::const_new(
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
            ),
            host_signals: lock_api::Mutex::const_new(
                <K::RawMutex as lock_api::RawMutex>::INIT,
                HostSignals { slots: <C::HostSignals as Table<HostSignalSlot>>::EMPTY, cursor: 0 },
            ),
            #[cfg(feature = "capture")]
            body_queues: lock_api::Mutex::const_new(<K::RawMutex as lock_api::RawMutex>::INIT, heapless::Vec::new()),
            modules: lock_api::Mutex::const_new(
                <K::RawMutex as lock_api::RawMutex>::INIT,
                <C::Modules<B::Module> as Table<ModuleSlot<B::Module>>>::EMPTY,
            ),
        }
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

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

    #[inline]
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
