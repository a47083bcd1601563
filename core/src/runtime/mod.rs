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
use portable_atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};

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

#[cfg(feature = "capture")]
pub use capture::CaptureSlot;
#[cfg(feature = "capture")]
pub use context::{ContextHandle, ContextSlot};
#[cfg(feature = "capture")]
pub use graphs::{ExecSlot, GraphExecHandle, GraphHandle, GraphSlot};
pub use modules::{ModuleHandle, ModuleSlot};

use crate::backend::{Backend, DeviceInfo};
#[cfg(feature = "capture")]
use crate::capture::CaptureMode;
use crate::capture::DepSet;
use crate::config::{Config, Slot, Table};
use crate::error::{Error, Result};
use crate::event::EventFlags;
use crate::live::{LiveSignal, SignalCell};
use crate::pool::{Binding, PoolWriter};
use crate::stream::{CuMask, Priority, StreamFlags, StreamHandle};
use crate::table::{self, Lookup};
use crate::thread::{ThreadKey, ThreadKeys};

/// Most devices one runtime drives.
pub const MAX_DEVICES: usize = 8;
/// Handle tag of streams.
const STREAM_TAG: u16 = 0x5a71;
/// Handle tag of events.
const EVENT_TAG: u16 = 0xe7e7;

static NEXT_STREAM_ID: AtomicU64 = AtomicU64::new(1);

fn next_stream_id() -> u64 {
    // Ordering: Relaxed; only uniqueness and monotonicity of the counter matter.
    NEXT_STREAM_ID.fetch_add(1, Ordering::Relaxed)
}

// ----- slot words: state and generation in one atomic ---------------------------------------

/// What a slot holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SlotState {
    Free = 0,
    Live = 1,
    /// Destroyed by the user; its work is still pending. Freed once it is done.
    Draining = 2,
}

/// A slot's state and generation: `generation << 2 | state`. The handle of a slot carries
/// `generation + 1` (handles never carry 0), and the generation grows when the object ends, so
/// an all-zero word is a free slot that never held anything.
#[derive(Debug)]
pub(crate) struct SlotWord(AtomicU64);

impl SlotWord {
    const fn new() -> Self {
        SlotWord(AtomicU64::new(0))
    }

    #[inline]
    fn load(&self) -> (u32, SlotState) {
        // Ordering: Acquire pairs with the Release stores below: a reader that sees Live sees the
        // slot's attributes written before it.
        let w = self.0.load(Ordering::Acquire);
        let state = match w & 3 {
            1 => SlotState::Live,
            2 => SlotState::Draining,
            _ => SlotState::Free,
        };
        ((w >> 2) as u32, state)
    }

    #[inline]
    fn state(&self) -> SlotState {
        self.load().1
    }

    /// The generation a handle of the current (or next) object carries.
    #[inline]
    fn handle_generation(&self) -> u32 {
        self.load().0.wrapping_add(1).max(1)
    }

    fn set(&self, generation: u32, state: SlotState) {
        // Ordering: Release; see `load`.
        self.0.store(u64::from(generation) << 2 | state as u64, Ordering::Release);
    }

    /// Marks the slot live; returns the handle generation.
    fn occupy(&self) -> u32 {
        let (g, _) = self.load();
        self.set(g, SlotState::Live);
        g.wrapping_add(1).max(1)
    }

    /// Ends the object: its handles become stale; the slot is `then`.
    fn vacate(&self, then: SlotState) {
        let (g, _) = self.load();
        let next = if g >= u32::MAX - 1 { 0 } else { g + 1 };
        self.set(next, then);
    }

    /// Changes the state, keeping the generation.
    fn set_state(&self, state: SlotState) {
        let (g, _) = self.load();
        self.set(g, state);
    }

    #[inline]
    fn classify(&self, slot: usize, generation: u32) -> Lookup {
        let (g, state) = self.load();
        let current = g.wrapping_add(1).max(1);
        if generation == 0 || generation > current {
            Lookup::Garbage
        } else if generation == current {
            if state == SlotState::Live {
                Lookup::Live(slot)
            } else {
                Lookup::Garbage
            }
        } else {
            Lookup::Stale
        }
    }
}

/// Looks a raw handle up in a table of slots with words.
#[inline]
fn lookup<T>(tag: u16, raw: u64, slots: &[T], word: impl Fn(&T) -> &SlotWord) -> Lookup {
    let (t, generation, slot) = table::decode(raw);
    if t != tag {
        return Lookup::Garbage;
    }
    match slots.get(slot) {
        Some(s) => word(s).classify(slot, generation),
        None => Lookup::Garbage,
    }
}

// ----- streams ------------------------------------------------------------------------------

/// What a stream slot is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StreamKind {
    Created = 0,
    Null = 1,
    PerThread = 2,
}

/// A stream's fixed attributes, packed into one atomic word so that any thread reads them
/// without the stream's lock: device (bits 0..3), kind (3..5), non-blocking (5), priority + 1
/// (6..8), detached (8), context + 1 (9..13), has a CU mask (13).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Attrs {
    pub(crate) device: u32,
    pub(crate) kind: StreamKind,
    pub(crate) flags: StreamFlags,
    pub(crate) priority: Priority,
    pub(crate) detached: bool,
    pub(crate) context: Option<u8>,
}

impl Attrs {
    fn pack(self) -> u32 {
        (self.device & 7)
            | (self.kind as u32) << 3
            | u32::from(!self.flags.is_blocking()) << 5
            | ((self.priority.value() + 1) as u32 & 3) << 6
            | u32::from(self.detached) << 8
            | self.context.map_or(0, |c| u32::from(c) + 1) << 9
    }

    #[inline]
    fn unpack(w: u32) -> Attrs {
        Attrs {
            device: w & 7,
            kind: match (w >> 3) & 3 {
                1 => StreamKind::Null,
                2 => StreamKind::PerThread,
                _ => StreamKind::Created,
            },
            flags: if w >> 5 & 1 == 1 { StreamFlags::NON_BLOCKING } else { StreamFlags::DEFAULT },
            priority: Priority::clamp(((w >> 6) & 3) as i32 - 1),
            detached: w >> 8 & 1 == 1,
            context: match (w >> 9) & 15 {
                0 => None,
                c => Some(c as u8 - 1),
            },
        }
    }

    /// A blocking stream other than the null stream: the null stream synchronises with it.
    #[inline]
    pub(crate) fn is_blocking_user(&self) -> bool {
        self.kind != StreamKind::Null && self.flags.is_blocking()
    }
}

/// A stream's state that only its lock holder touches.
#[derive(Debug)]
#[cfg_attr(not(feature = "capture"), allow(dead_code))]
pub(crate) struct StreamInner {
    /// The pooled queue the stream publishes into.
    pub(crate) binding: Option<Binding>,
    /// This producer's copy of the ring's read index.
    pub(crate) read_hint: u64,
    /// The CU mask the stream was created with.
    pub(crate) cu_mask: Option<CuMask>,
    /// The capture this stream joined: (capture slot, capture id). Stale once that capture
    /// ends (the id no longer matches).
    pub(crate) capture: Option<(u8, u64)>,
    /// The dependency set of the next captured node (`lastCapturedNodes_`).
    pub(crate) capture_deps: DepSet,
}

/// One stream slot (at most 256 bytes: `scripts/footprint` reports it). Cache-line aligned, so
/// threads enqueueing on neighbouring streams do not share a line.
#[repr(align(64))]
pub struct StreamSlot<R: lock_api::RawMutex> {
    pub(crate) word: SlotWord,
    pub(crate) attrs: AtomicU32,
    pub(crate) id: AtomicU64,
    /// Counted packets published by every life of the slot (written under `inner`).
    pub(crate) submitted: AtomicU64,
    pub(crate) progress: SignalCell,
    /// Link of the free and draining lists (slot + 1; 0 ends the list).
    pub(crate) link: AtomicU32,
    pub(crate) inner: lock_api::Mutex<R, StreamInner>,
}

impl<R: lock_api::RawMutex> Slot for StreamSlot<R> {
    const EMPTY: Self = StreamSlot {
        word: SlotWord::new(),
        attrs: AtomicU32::new(0),
        id: AtomicU64::new(0),
        submitted: AtomicU64::new(0),
        progress: SignalCell::new(),
        link: AtomicU32::new(0),
        inner: lock_api::Mutex::const_new(
            R::INIT,
            StreamInner { binding: None, read_hint: 0, cu_mask: None, capture: None, capture_deps: DepSet::EMPTY },
        ),
    };
}

impl<R: lock_api::RawMutex> StreamSlot<R> {
    #[inline]
    pub(crate) fn attrs(&self) -> Attrs {
        // Ordering: Acquire pairs with the Release in `set_attrs`.
        Attrs::unpack(self.attrs.load(Ordering::Acquire))
    }

    pub(crate) fn set_attrs(&self, a: Attrs) {
        // Ordering: Release; written before the slot word goes Live (and on detach).
        self.attrs.store(a.pack(), Ordering::Release);
    }

    /// Counted packets published so far (Acquire: the packets are in the ring).
    #[inline]
    pub(crate) fn submitted(&self) -> u64 {
        self.submitted.load(Ordering::Acquire)
    }

    /// The point in time "everything published so far": (progress signal, count), or `None`
    /// when the slot never published anything.
    #[inline]
    pub(crate) fn point(&self) -> Option<(LiveSignal, u64)> {
        let n = self.submitted();
        let p = self.progress.get()?;
        (n > 0).then_some((p, n))
    }

    /// Whether everything published so far has completed.
    #[inline]
    pub(crate) fn is_idle(&self) -> bool {
        self.point().is_none_or(|(p, n)| p.load() <= -(n as i64))
    }
}

// ----- events -------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recorded {
    Never,
    /// On the legacy null stream.
    OnNull,
    /// On a created or per-thread stream (its raw handle).
    On(u64),
}

#[derive(Debug)]
pub(crate) struct EventInner {
    pub(crate) flags: EventFlags,
    pub(crate) device: u32,
    /// The last record's progress point on its stream: waits and queries use it, so a later
    /// record never changes what an earlier wait waits for. `None` for a record made by a graph
    /// launch (those use `signal`).
    pub(crate) point: Option<(LiveSignal, u64)>,
    /// The signal a timed record (or a graph's record node) completes: its timestamps give
    /// `hipEventElapsedTime`. Created on first need.
    pub(crate) signal: Option<LiveSignal>,
    /// A second signal, swapped in when the event is recorded again while its last record is
    /// still pending, so the event stands for the latest record only. Reused only once drained.
    pub(crate) spare: Option<LiveSignal>,
    pub(crate) recorded: Recorded,
    /// Set when last recorded inside a capture: (capture slot, capture id).
    pub(crate) captured: Option<(u8, u64)>,
    /// The recording stream's dependency set at that record.
    pub(crate) snapshot: DepSet,
}

/// One event slot.
pub struct EventSlot<R: lock_api::RawMutex> {
    pub(crate) word: SlotWord,
    pub(crate) link: AtomicU32,
    pub(crate) inner: lock_api::Mutex<R, EventInner>,
}

impl<R: lock_api::RawMutex> Slot for EventSlot<R> {
    const EMPTY: Self = EventSlot {
        word: SlotWord::new(),
        link: AtomicU32::new(0),
        inner: lock_api::Mutex::const_new(
            R::INIT,
            EventInner {
                flags: EventFlags::empty(),
                device: 0,
                point: None,
                signal: None,
                spare: None,
                recorded: Recorded::Never,
                captured: None,
                snapshot: DepSet::EMPTY,
            },
        ),
    };
}

// ----- threads and devices ------------------------------------------------------------------

/// Key value of a thread slot that was used and freed (probing continues past it).
const TOMBSTONE: u64 = u64::MAX;

/// One host thread: its key, current device, capture mode and per-thread streams. Found by
/// hashing the key (open addressing), so a lookup does not scan the table.
pub struct ThreadSlot {
    key: AtomicU64,
    device: AtomicU32,
    mode: AtomicU8,
    per_thread: [AtomicU64; MAX_DEVICES],
}

impl Slot for ThreadSlot {
    const EMPTY: Self = ThreadSlot {
        key: AtomicU64::new(0),
        device: AtomicU32::new(0),
        mode: AtomicU8::new(0),
        per_thread: [const { AtomicU64::new(0) }; MAX_DEVICES],
    };
}

#[cfg(feature = "capture")]
fn mode_of(raw: u8) -> CaptureMode {
    CaptureMode::from_raw(u32::from(raw)).unwrap_or_default()
}

/// Per-device state.
struct DeviceSlot {
    /// The null stream's raw handle (0 before first use).
    null_stream: AtomicU64,
    /// Hardware queues the pool creates on this device before streams share them.
    max_hw_queues: AtomicU32,
}

// ----- host-function signals ----------------------------------------------------------------

/// A pair of signals for one host function in flight: `start` completes when the stream reaches
/// the function, the host sets `done` after running it. Reusable once the stream's barrier
/// that reads `done` has completed.
#[derive(Debug, Clone, Copy)]
pub struct HostSignalSlot {
    pair: Option<(LiveSignal, LiveSignal)>,
    busy: bool,
    /// The consuming stream slot and the count its progress must reach before reuse
    /// (`u64::MAX` while the consuming batch is being published).
    consumer: u32,
    release_at: u64,
}

impl Slot for HostSignalSlot {
    const EMPTY: Self = HostSignalSlot { pair: None, busy: false, consumer: 0, release_at: 0 };
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
    body_queues: lock_api::Mutex<K::RawMutex, conditional::BodyQueues<B::Queue>>,
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

    #[inline]
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
fn doorbell_fence() {
    core::sync::atomic::fence(CoreOrdering::Release);
}
