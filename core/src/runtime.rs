//! [`Runtime`]: the stream engine. Streams, events, implicit synchronisation, per-thread streams
//! and device reset, over any [`Backend`].
//!
//! # How streams execute
//!
//! Each stream owns one hardware queue (created on first use of a table slot and kept with the
//! slot when the stream is destroyed, so a later stream with the same device, priority and CU mask
//! reuses it) and one *progress signal*. Every packet whose completion signal is the progress
//! signal is *counted*: the stream remembers how many it submitted since binding, and the signal,
//! which starts at 0, goes down by one as each completes. The stream is idle when
//! `value == -submitted`. Every packet carries the barrier bit, so the queue runs in order and the
//! last counted packet completing means everything before it completed.
//!
//! Cross-stream ordering (events, the null stream's implicit synchronisation, host functions) uses
//! barrier-AND packets on *point-in-time marker signals*: the producer stream publishes a
//! barrier-AND whose completion signal is a marker (value 1) followed by a counted no-op, and the
//! consumer publishes a counted barrier-AND that depends on the marker. Marker signals come from a
//! pool; a marker is reusable once its consumer's counted packets have passed the barrier that
//! read it.

use core::sync::atomic::Ordering as CoreOrdering;
use portable_atomic::{AtomicU64, Ordering};

use crate::aql::{
    BarrierPacket, BarrierValuePacket, Condition, FenceScope, Header, KernelDispatchPacket, PacketType,
    DEFAULT_ROOM_SPINS, DISPATCH_HEADER,
};
mod capture;
mod context;
mod graphs;

use capture::CaptureSlot;
pub use context::ContextHandle;
use context::{ContextSlot, MAX_CONTEXTS};
use graphs::{ExecSlot, GraphSlot};
pub use graphs::{GraphExecHandle, GraphHandle};

use crate::backend::{
    Backend, BuiltinKernel, CopyArgs, DeviceInfo, FillArgs, HostFn, MemoryKind, QueueDesc, Timeout, WriteValueArgs,
};
use crate::capture::{CaptureMode, CaptureStatus, DepSet};
use crate::error::{Error, Result};
use crate::event::{check_record_flags, EventFlags, EventHandle};
use crate::signal::SignalHandle;
use crate::stream::{CuMask, Priority, StreamFlags, StreamHandle};
use crate::table::{self, Generation, Lookup};
use crate::thread::{ThreadKey, ThreadKeys};

/// Most devices one runtime drives.
pub const MAX_DEVICES: usize = 8;
/// Handle tag of streams.
const STREAM_TAG: u16 = 0x5a71;
/// Handle tag of events.
const EVENT_TAG: u16 = 0xe7e7;
/// Most packets one stream operation publishes.
const MAX_BATCH: usize = 8;
/// Bound on waiting for a marker signal to come free.
const MARKER_WAIT: Timeout = Timeout::SECOND;

static NEXT_STREAM_ID: AtomicU64 = AtomicU64::new(1);

fn next_stream_id() -> u64 {
    // Ordering: Relaxed; only uniqueness and monotonicity of the counter matter.
    NEXT_STREAM_ID.fetch_add(1, Ordering::Relaxed)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlotState {
    Free,
    Live,
    /// Destroyed by the user; its queue still has work. Freed once idle.
    Draining,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StreamKind {
    Created,
    Null,
    PerThread,
}

/// The hardware a stream slot is bound to.
struct Hw<Q> {
    queue: Q,
    desc: QueueDesc,
    signal: SignalHandle,
    device: u32,
    priority: Priority,
    cu_mask: Option<CuMask>,
    /// This producer's copy of the ring's read index ([`AqlRing::reserve_hinted`]).
    read_hint: u64,
}

struct StreamSlot<Q> {
    generation: Generation,
    state: SlotState,
    kind: StreamKind,
    device: u32,
    flags: StreamFlags,
    priority: Priority,
    cu_mask: Option<CuMask>,
    id: u64,
    /// Counted packets published since the hardware was bound.
    submitted: u64,
    hw: Option<Hw<Q>>,
    /// The capture this stream takes part in (index into the capture table).
    capture: Option<u8>,
    /// What `hipStreamIsCapturing` reports.
    capture_status: CaptureStatus,
    /// The dependency set of the next captured node (`lastCapturedNodes_`).
    capture_deps: DepSet,
    /// The execution context that owns the stream.
    context: Option<u8>,
    /// Set when its execution context was destroyed.
    detached: bool,
}

impl<Q> StreamSlot<Q> {
    const fn new() -> Self {
        StreamSlot {
            generation: Generation::new(),
            state: SlotState::Free,
            kind: StreamKind::Created,
            device: 0,
            flags: StreamFlags::empty(),
            priority: Priority::Normal,
            cu_mask: None,
            id: 0,
            submitted: 0,
            hw: None,
            capture: None,
            capture_status: CaptureStatus::None,
            capture_deps: DepSet::EMPTY,
            context: None,
            detached: false,
        }
    }

    fn is_blocking_user(&self) -> bool {
        self.state == SlotState::Live && self.kind != StreamKind::Null && self.flags.is_blocking()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Recorded {
    Never,
    /// On the legacy null stream.
    OnNull,
    /// On a created or per-thread stream (its raw handle).
    On(u64),
}

struct EventSlot {
    generation: Generation,
    state: SlotState,
    flags: EventFlags,
    device: u32,
    signal: SignalHandle,
    /// A second signal, swapped in when the event is recorded again while its last record is
    /// still pending, so the event stands for the latest record only. Reused only once drained.
    spare: SignalHandle,
    recorded: Recorded,
    /// Set when last recorded inside a capture: (capture slot, capture id).
    captured: Option<(u8, u64)>,
    /// The recording stream's dependency set at that record.
    snapshot: DepSet,
}

impl EventSlot {
    const fn new() -> Self {
        EventSlot {
            generation: Generation::new(),
            state: SlotState::Free,
            flags: EventFlags::empty(),
            device: 0,
            signal: SignalHandle::NULL,
            spare: SignalHandle::NULL,
            recorded: Recorded::Never,
            captured: None,
            snapshot: DepSet::EMPTY,
        }
    }
}

#[derive(Clone, Copy)]
struct MarkerSlot {
    signal: SignalHandle,
    busy: bool,
    consumer: usize,
    consumer_generation: u32,
    /// The consumer's counted-packet number that must complete before reuse.
    release_at: u64,
}

impl MarkerSlot {
    const fn new() -> Self {
        MarkerSlot { signal: SignalHandle::NULL, busy: false, consumer: 0, consumer_generation: 0, release_at: 0 }
    }
}

#[derive(Clone, Copy)]
struct ThreadSlot {
    key: Option<ThreadKey>,
    device: u32,
    per_thread: [u64; MAX_DEVICES],
    /// The thread's capture mode (`hipThreadExchangeStreamCaptureMode`), initially Global.
    mode: CaptureMode,
}

impl ThreadSlot {
    const fn new() -> Self {
        ThreadSlot { key: None, device: 0, per_thread: [0; MAX_DEVICES], mode: CaptureMode::Global }
    }
}

#[derive(Clone, Copy)]
struct DeviceSlot {
    null_stream: u64,
}

struct State<
    Q,
    const S: usize,
    const E: usize,
    const T: usize,
    const M: usize,
    const G: usize,
    const N: usize,
    const X: usize,
> {
    streams: [StreamSlot<Q>; S],
    events: [EventSlot; E],
    threads: [ThreadSlot; T],
    markers: [MarkerSlot; M],
    /// Markers taken by the operation being submitted (their `release_at` is still PENDING).
    markers_taken: u32,
    devices: [DeviceSlot; MAX_DEVICES],
    /// Graphs (user-created or capture-owned).
    graphs: [GraphSlot<N>; G],
    /// Captures in progress; each owns or borrows one graph.
    captures: [CaptureSlot; G],
    /// Instantiated graphs.
    execs: [ExecSlot<N>; X],
    /// Execution (green) contexts.
    contexts: [ContextSlot; MAX_CONTEXTS],
}

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

/// One stream operation, before it becomes packets.
#[derive(Clone, Copy)]
enum Command<'a> {
    Kernel(KernelLaunch<'a>),
    Builtin { kernel: BuiltinKernel, args: [u8; 32], len: usize },
    WaitValue { address: u64, value: i64, mask: i64, cond: Condition },
    HostFn(HostFn),
    EventRecord(usize),
    WaitEvent(SignalHandle),
    Marker,
}

/// Which packet to publish (the batch of one operation).
#[derive(Clone, Copy)]
enum Spec<'a> {
    /// A counted barrier-AND on these dependencies.
    Deps([u64; 5]),
    /// A barrier-AND completing `signal` (not counted).
    Mark(SignalHandle),
    /// A counted kernel dispatch with its kernel arguments.
    Dispatch(KernelDispatchPacket, &'a [u8]),
    /// A counted barrier-value packet.
    Value(BarrierValuePacket),
}

/// The packets of one operation, in publish order.
struct Batch<'a> {
    specs: [Spec<'a>; MAX_BATCH],
    len: usize,
}

impl<'a> Batch<'a> {
    fn new() -> Self {
        Batch { specs: [Spec::Deps([0; 5]); MAX_BATCH], len: 0 }
    }

    fn push(&mut self, spec: Spec<'a>) -> Result<()> {
        let slot = self.specs.get_mut(self.len).ok_or(Error::OutOfMemory)?;
        *slot = spec;
        self.len += 1;
        Ok(())
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn as_slice(&self) -> &[Spec<'a>] {
        self.specs.get(..self.len).unwrap_or(&[])
    }
}

/// Dependency signals of one operation (implicit and explicit), five per barrier-AND.
type Deps = heapless::Vec<u64, 20>;

/// Adds a dependency signal (0 means none); `OutOfMemory` when the list is full.
fn push_dep(deps: &mut Deps, d: u64) -> Result<()> {
    if d == 0 {
        return Ok(());
    }
    deps.push(d).map_err(|_| Error::OutOfMemory)
}

/// The dependency list as barrier-AND payloads.
fn dep_chunks(deps: &Deps) -> impl Iterator<Item = [u64; 5]> + '_ {
    deps.chunks(5).map(|c| {
        let mut a = [0u64; 5];
        for (d, s) in a.iter_mut().zip(c) {
            *d = *s;
        }
        a
    })
}

/// `release_at` of a marker whose consuming batch is not published yet.
const PENDING: u64 = u64::MAX;

/// The stream engine over backend `B`.
///
/// Capacities: `S` stream slots (created streams, one null stream per device used and one
/// per-thread stream per thread and device), `E` events, `T` threads, `M` marker signals.
pub struct Runtime<
    B: Backend,
    K: ThreadKeys,
    const S: usize = 32,
    const E: usize = 64,
    const T: usize = 8,
    const M: usize = 64,
    const G: usize = 4,
    const N: usize = 32,
    const X: usize = 2,
> {
    backend: B,
    keys: K,
    state: spin::Mutex<State<B::Queue, S, E, T, M, G, N, X>>,
}

fn lookup_stream<Q>(streams: &[StreamSlot<Q>], raw: u64) -> Lookup {
    table::lookup(STREAM_TAG, raw, streams, |s| s.generation)
}

fn lookup_event(events: &[EventSlot], raw: u64) -> Lookup {
    table::lookup(EVENT_TAG, raw, events, |e| e.generation)
}

/// Ticks to milliseconds.
fn ticks_to_ms(ticks: i64, hz: u64) -> f32 {
    if hz == 0 {
        return 0.0;
    }
    (ticks as f64 * 1000.0 / hz as f64) as f32
}

impl<
        B: Backend,
        K: ThreadKeys,
        const S: usize,
        const E: usize,
        const T: usize,
        const M: usize,
        const G: usize,
        const N: usize,
        const X: usize,
    > Runtime<B, K, S, E, T, M, G, N, X>
{
    /// A runtime over `backend`, with `keys` naming host threads. `const`, so it can live in a
    /// `static`.
    pub const fn new(backend: B, keys: K) -> Self {
        Runtime {
            backend,
            keys,
            state: spin::Mutex::new(State {
                streams: [const { StreamSlot::new() }; S],
                events: [const { EventSlot::new() }; E],
                threads: [const { ThreadSlot::new() }; T],
                markers: [const { MarkerSlot::new() }; M],
                markers_taken: 0,
                graphs: [const { GraphSlot::new() }; G],
                captures: [const { CaptureSlot::new() }; G],
                execs: [const { ExecSlot::new() }; X],
                contexts: [const { ContextSlot::new() }; MAX_CONTEXTS],
                devices: [const { DeviceSlot { null_stream: 0 } }; MAX_DEVICES],
            }),
        }
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    // ----- devices and threads -------------------------------------------------------------

    /// Number of devices (`hipGetDeviceCount`); `NoDevice` when there is none.
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

    /// `hipSetDevice` for the calling thread.
    pub fn set_device(&self, device: u32) -> Result<()> {
        if device >= self.device_count()? {
            return Err(Error::InvalidDevice);
        }
        let mut st = self.state.lock();
        let t = self.thread_slot(&mut st)?;
        if let Some(ts) = st.threads.get_mut(t) {
            ts.device = device;
        }
        Ok(())
    }

    /// `hipGetDevice` for the calling thread (0 until it sets one).
    pub fn device(&self) -> Result<u32> {
        self.device_count()?;
        let st = self.state.lock();
        Ok(self.current_device(&st))
    }

    /// Forgets the calling thread: its per-thread streams are destroyed (pending work still
    /// completes) and its table slot is freed. std-host calls this at thread exit.
    pub fn thread_exit(&self) {
        let key = self.keys.current();
        let mut st = self.state.lock();
        let Some(t) = st.threads.iter().position(|ts| ts.key == Some(key)) else { return };
        let pts = st.threads.get(t).map(|ts| ts.per_thread).unwrap_or([0; MAX_DEVICES]);
        for raw in pts {
            if let Lookup::Live(i) = lookup_stream(&st.streams, raw) {
                self.retire_stream(&mut st, i);
            }
        }
        if let Some(ts) = st.threads.get_mut(t) {
            *ts = ThreadSlot::new();
        }
    }

    fn current_device(&self, st: &State<B::Queue, S, E, T, M, G, N, X>) -> u32 {
        let key = self.keys.current();
        st.threads.iter().find(|ts| ts.key == Some(key)).map_or(0, |ts| ts.device)
    }

    fn thread_slot(&self, st: &mut State<B::Queue, S, E, T, M, G, N, X>) -> Result<usize> {
        let key = self.keys.current();
        if let Some(i) = st.threads.iter().position(|ts| ts.key == Some(key)) {
            return Ok(i);
        }
        let i = st.threads.iter().position(|ts| ts.key.is_none()).ok_or(Error::OutOfMemory)?;
        if let Some(ts) = st.threads.get_mut(i) {
            *ts = ThreadSlot { key: Some(key), ..ThreadSlot::new() };
        }
        Ok(i)
    }

    // ----- stream slots and hardware -------------------------------------------------------

    /// Binds hardware to slot `i`, reusing the slot's cached queue when it matches.
    fn bind(
        &self,
        st: &mut State<B::Queue, S, E, T, M, G, N, X>,
        i: usize,
        device: u32,
        priority: Priority,
        cu_mask: Option<CuMask>,
    ) -> Result<()> {
        let slot = st.streams.get_mut(i).ok_or(Error::InvalidHandle)?;
        if let Some(hw) = &slot.hw {
            let healthy = self.backend.queue_fault(&hw.queue).is_none();
            if healthy && hw.device == device && hw.priority == priority && hw.cu_mask == cu_mask {
                // SAFETY: the signal belongs to this slot's hardware and is live until destroyed.
                unsafe { hw.signal.get() }.reset(0);
                slot.submitted = 0;
                return Ok(());
            }
        }
        if let Some(hw) = slot.hw.take() {
            self.release_hw(hw);
        }
        let hw = loop {
            match self.create_hw(device, priority, cu_mask.as_ref()) {
                Ok(hw) => break hw,
                Err(Error::OutOfMemory) => {
                    // Give back one cached queue of a free slot and try again.
                    let cached = st.streams.iter_mut().find(|s| s.state == SlotState::Free && s.hw.is_some());
                    match cached.and_then(|s| s.hw.take()) {
                        Some(old) => self.release_hw(old),
                        None => return Err(Error::OutOfMemory),
                    }
                }
                Err(e) => return Err(e),
            }
        };
        let slot = st.streams.get_mut(i).ok_or(Error::InvalidHandle)?;
        slot.hw = Some(hw);
        slot.submitted = 0;
        Ok(())
    }

    fn create_hw(&self, device: u32, priority: Priority, cu_mask: Option<&CuMask>) -> Result<Hw<B::Queue>> {
        let queue = self.backend.queue_create(device, priority, cu_mask)?;
        let desc = match self.backend.queue_desc(&queue) {
            Ok(d) => d,
            Err(e) => {
                self.backend.queue_destroy(queue);
                return Err(e);
            }
        };
        let signal = match self.backend.signal_create(0) {
            Ok(s) => s,
            Err(e) => {
                self.backend.queue_destroy(queue);
                return Err(e);
            }
        };
        let read_hint = desc.ring.read_index();
        Ok(Hw { queue, desc, signal, device, priority, cu_mask: cu_mask.copied(), read_hint })
    }

    fn release_hw(&self, hw: Hw<B::Queue>) {
        self.backend.signal_destroy(hw.signal);
        self.backend.queue_destroy(hw.queue);
    }

    /// Takes a free slot (reaping drained ones if needed) and makes it a live stream.
    fn create_slot(
        &self,
        st: &mut State<B::Queue, S, E, T, M, G, N, X>,
        kind: StreamKind,
        device: u32,
        flags: StreamFlags,
        priority: Priority,
        cu_mask: Option<CuMask>,
    ) -> Result<usize> {
        let free = |st: &State<B::Queue, S, E, T, M, G, N, X>| {
            // Prefer a slot whose cached queue already matches.
            st.streams
                .iter()
                .position(|s| {
                    s.state == SlotState::Free
                        && s.hw
                            .as_ref()
                            .is_some_and(|h| h.device == device && h.priority == priority && h.cu_mask == cu_mask)
                })
                .or_else(|| st.streams.iter().position(|s| s.state == SlotState::Free))
        };
        let i = match free(st) {
            Some(i) => i,
            None => {
                self.reap(st);
                free(st).ok_or(Error::OutOfMemory)?
            }
        };
        self.bind(st, i, device, priority, cu_mask)?;
        let slot = st.streams.get_mut(i).ok_or(Error::OutOfMemory)?;
        slot.generation.occupy();
        slot.state = SlotState::Live;
        slot.kind = kind;
        slot.device = device;
        slot.flags = flags;
        slot.priority = priority;
        slot.cu_mask = cu_mask;
        slot.id = next_stream_id();
        slot.capture = None;
        slot.capture_status = CaptureStatus::None;
        slot.capture_deps = DepSet::EMPTY;
        slot.context = None;
        slot.detached = false;
        debug!("stream slot {} live, id {}", i, slot.id);
        Ok(i)
    }

    fn handle_of(st: &State<B::Queue, S, E, T, M, G, N, X>, i: usize) -> StreamHandle {
        let g = st.streams.get(i).map_or(0, |s| s.generation.current);
        StreamHandle(table::encode(STREAM_TAG, g, i))
    }

    /// Ends a live stream: handles go stale now; the slot frees now if its work is done, else
    /// once it is (see [`reap`](Self::reap)).
    fn retire_stream(&self, st: &mut State<B::Queue, S, E, T, M, G, N, X>, i: usize) {
        Self::capture_on_destroy(st, i);
        let idle = st.streams.get(i).is_some_and(|s| self.is_idle(s));
        if let Some(s) = st.streams.get_mut(i) {
            s.generation.vacate();
            s.state = if idle { SlotState::Free } else { SlotState::Draining };
        }
    }

    /// Frees draining slots whose queues are idle (or dead).
    fn reap(&self, st: &mut State<B::Queue, S, E, T, M, G, N, X>) {
        for i in 0..S {
            let Some(s) = st.streams.get(i) else { continue };
            if s.state != SlotState::Draining {
                continue;
            }
            let dead = s.hw.as_ref().is_none_or(|hw| self.backend.queue_fault(&hw.queue).is_some());
            if dead || self.is_idle(s) {
                if let Some(s) = st.streams.get_mut(i) {
                    s.state = SlotState::Free;
                    if dead {
                        if let Some(hw) = s.hw.take() {
                            self.release_hw(hw);
                        }
                    }
                }
            }
        }
        for e in st.events.iter_mut() {
            // SAFETY: a draining event keeps its backend signal until it is freed.
            if e.state == SlotState::Draining && unsafe { e.signal.get() }.load() <= 0 {
                e.state = SlotState::Free;
            }
        }
    }

    /// Whether every counted packet of the stream has completed, read straight from the
    /// progress signal (no backend call: bookkeeping paths use this).
    fn is_idle(&self, s: &StreamSlot<B::Queue>) -> bool {
        match &s.hw {
            // SAFETY: a bound slot's progress signal is live until its hardware is released.
            Some(hw) => unsafe { hw.signal.get() }.load() <= -(s.submitted as i64),
            None => true,
        }
    }

    /// Like [`is_idle`](Self::is_idle), but lets the backend make progress first (a zero-time
    /// wait): the answer `hipStreamQuery` gives.
    fn poll_idle(&self, s: &StreamSlot<B::Queue>) -> bool {
        match &s.hw {
            Some(hw) => {
                self.is_idle(s)
                    || self.backend.signal_wait(hw.signal, Condition::Lt, 1 - s.submitted as i64, Timeout::ZERO).is_ok()
            }
            None => true,
        }
    }

    fn null_stream(&self, st: &mut State<B::Queue, S, E, T, M, G, N, X>, device: u32) -> Result<usize> {
        let raw = st.devices.get(device as usize).ok_or(Error::InvalidDevice)?.null_stream;
        if let Lookup::Live(i) = lookup_stream(&st.streams, raw) {
            return Ok(i);
        }
        let i = self.create_slot(st, StreamKind::Null, device, StreamFlags::DEFAULT, Priority::Normal, None)?;
        let h = Self::handle_of(st, i);
        if let Some(d) = st.devices.get_mut(device as usize) {
            d.null_stream = h.0;
        }
        Ok(i)
    }

    fn per_thread_stream(&self, st: &mut State<B::Queue, S, E, T, M, G, N, X>) -> Result<usize> {
        let t = self.thread_slot(st)?;
        let ts = st.threads.get(t).copied().ok_or(Error::OutOfMemory)?;
        let device = ts.device;
        let raw = ts.per_thread.get(device as usize).copied().ok_or(Error::InvalidDevice)?;
        if let Lookup::Live(i) = lookup_stream(&st.streams, raw) {
            return Ok(i);
        }
        let i = self.create_slot(st, StreamKind::PerThread, device, StreamFlags::DEFAULT, Priority::Normal, None)?;
        let h = Self::handle_of(st, i);
        if let Some(p) = st.threads.get_mut(t).and_then(|ts| ts.per_thread.get_mut(device as usize)) {
            *p = h.0;
        }
        Ok(i)
    }

    /// Resolves a handle to a live slot: `0`/`hipStreamLegacy` to the current device's null
    /// stream, `hipStreamPerThread` to the calling thread's stream; stale handles answer
    /// `stale`, never-issued ones `InvalidHandle`.
    fn resolve(&self, st: &mut State<B::Queue, S, E, T, M, G, N, X>, s: StreamHandle, stale: Error) -> Result<usize> {
        self.device_count()?;
        match s {
            StreamHandle::NULL | StreamHandle::LEGACY => {
                let d = self.current_device(st);
                self.null_stream(st, d)
            }
            StreamHandle::PER_THREAD => self.per_thread_stream(st),
            StreamHandle(raw) => table::require(lookup_stream(&st.streams, raw), stale, Error::InvalidHandle),
        }
    }

    // ----- stream management ---------------------------------------------------------------

    /// `hipStreamCreateWithFlags`: unknown flag bits are `InvalidValue`.
    pub fn stream_create(&self, flags: u32) -> Result<StreamHandle> {
        self.stream_create_with_priority(flags, 0)
    }

    /// `hipStreamCreateWithPriority`: the priority is clamped into [-1, 1], never an error.
    pub fn stream_create_with_priority(&self, flags: u32, priority: i32) -> Result<StreamHandle> {
        let priority = Priority::clamp(priority);
        let flags = StreamFlags::from_raw(flags)?;
        self.device_count()?;
        let mut st = self.state.lock();
        let device = self.current_device(&st);
        let i = self.create_slot(&mut st, StreamKind::Created, device, flags, priority, None)?;
        Ok(Self::handle_of(&st, i))
    }

    /// `hipExtStreamCreateWithCUMask`: flags 0, Normal priority, the given CU mask (bits past
    /// the device's CUs ignored; an empty mask or one enabling no CU is `InvalidValue`).
    pub fn stream_create_with_cu_mask(&self, mask: &[u32]) -> Result<StreamHandle> {
        if mask.is_empty() {
            return Err(Error::InvalidValue);
        }
        self.device_count()?;
        let mut st = self.state.lock();
        let device = self.current_device(&st);
        let info = self.backend.device_info(device)?;
        let cu_mask = CuMask::from_words(mask, info.cu_count)?;
        let i = self.create_slot(
            &mut st,
            StreamKind::Created,
            device,
            StreamFlags::DEFAULT,
            Priority::Normal,
            Some(cu_mask),
        )?;
        Ok(Self::handle_of(&st, i))
    }

    /// `hipStreamDestroy`: returns at once; pending work still completes and the queue is
    /// reused or released afterwards. `0`, `hipStreamLegacy` and `hipStreamPerThread` are
    /// `InvalidHandle`; a stale handle is `ContextIsDestroyed`.
    pub fn stream_destroy(&self, s: StreamHandle) -> Result<()> {
        if s.0 <= 2 {
            return Err(Error::InvalidHandle);
        }
        let mut st = self.state.lock();
        let i = table::require(lookup_stream(&st.streams, s.0), Error::ContextIsDestroyed, Error::InvalidHandle)?;
        if st.streams.get(i).is_some_and(|sl| sl.kind != StreamKind::Created) {
            return Err(Error::InvalidHandle);
        }
        self.retire_stream(&mut st, i);
        trace!("stream {} destroyed", s.0);
        Ok(())
    }

    /// `hipStreamGetFlags`: `0` and `hipStreamLegacy` are `InvalidValue` (HIP differs from CUDA
    /// here); the per-thread stream reports 0.
    pub fn stream_flags(&self, s: StreamHandle) -> Result<u32> {
        if s.is_null_or_legacy() {
            return Err(Error::InvalidValue);
        }
        self.stream_attr(s, Error::ContextIsDestroyed, |sl| sl.flags.bits())
    }

    /// `hipStreamGetPriority`: 0 for the null stream and the per-thread stream.
    pub fn stream_priority(&self, s: StreamHandle) -> Result<i32> {
        if s.is_null_or_legacy() {
            self.device_count()?;
            return Ok(0);
        }
        self.stream_attr(s, Error::ContextIsDestroyed, |sl| sl.priority.value())
    }

    /// `hipStreamGetDevice`: the current device for `0`/`hipStreamLegacy`.
    pub fn stream_device(&self, s: StreamHandle) -> Result<u32> {
        if s.is_null_or_legacy() {
            return self.device();
        }
        self.stream_attr(s, Error::ContextIsDestroyed, |sl| sl.device)
    }

    /// `hipStreamGetId`: `0` and `hipStreamLegacy` share the null stream's id; stale handles are
    /// `InvalidHandle`.
    pub fn stream_id(&self, s: StreamHandle) -> Result<u64> {
        self.stream_attr(s, Error::InvalidHandle, |sl| sl.id)
    }

    /// `hipExtStreamGetCUMask`: the stream's mask, or every CU of the device when it has none
    /// (always for `0`, `hipStreamLegacy` and the per-thread stream). `out` must hold
    /// `ceil(CUs / 32)` dwords.
    pub fn stream_cu_mask(&self, s: StreamHandle, out: &mut [u32]) -> Result<()> {
        let (device, mask) = if s.0 <= 2 {
            (self.device()?, None)
        } else {
            self.stream_attr(s, Error::ContextIsDestroyed, |sl| (sl.device, sl.cu_mask))?
        };
        let cus = self.backend.device_info(device)?.cu_count;
        mask.unwrap_or_else(|| CuMask::full(cus)).write_to(out, cus)
    }

    fn stream_attr<R>(&self, s: StreamHandle, stale: Error, f: impl FnOnce(&StreamSlot<B::Queue>) -> R) -> Result<R> {
        let mut st = self.state.lock();
        let i = self.resolve(&mut st, s, stale)?;
        st.streams.get(i).map(f).ok_or(Error::InvalidHandle)
    }

    /// Runs `f` on the hardware queue behind `s` (resolving `0`, `hipStreamLegacy` and
    /// `hipStreamPerThread` as work submission does). For tests and fault injection.
    #[doc(hidden)]
    pub fn with_stream_queue<R>(&self, s: StreamHandle, f: impl FnOnce(&B::Queue) -> R) -> Result<R> {
        let mut st = self.state.lock();
        let i = self.resolve(&mut st, s, Error::ContextIsDestroyed)?;
        let hw = st.streams.get(i).and_then(|sl| sl.hw.as_ref()).ok_or(Error::InvalidHandle)?;
        Ok(f(&hw.queue))
    }

    /// Whether `s` is a live created stream of `device` (the device's stream set).
    pub fn stream_exists(&self, device: u32, s: StreamHandle) -> bool {
        let st = self.state.lock();
        match lookup_stream(&st.streams, s.0) {
            Lookup::Live(i) => {
                st.streams.get(i).is_some_and(|sl| sl.device == device && sl.kind == StreamKind::Created)
            }
            _ => false,
        }
    }

    /// Writes the live created streams of `device` into `out`; returns how many there are.
    pub fn device_streams(&self, device: u32, out: &mut [StreamHandle]) -> usize {
        let st = self.state.lock();
        let mut n = 0;
        for (i, sl) in st.streams.iter().enumerate() {
            if sl.state == SlotState::Live && sl.kind == StreamKind::Created && sl.device == device {
                if let Some(o) = out.get_mut(n) {
                    *o = Self::handle_of(&st, i);
                }
                n += 1;
            }
        }
        n
    }

    // ----- publishing ----------------------------------------------------------------------

    /// Publishes `specs` on stream slot `i` as one batch and rings its doorbell once.
    fn publish(&self, st: &mut State<B::Queue, S, E, T, M, G, N, X>, i: usize, specs: &[Spec<'_>]) -> Result<()> {
        let slot = st.streams.get_mut(i).ok_or(Error::InvalidHandle)?;
        let hw = slot.hw.as_mut().ok_or(Error::InvalidHandle)?;
        let desc = hw.desc;
        let progress = hw.signal.0;
        let n = u32::try_from(specs.len()).map_err(|_| Error::InvalidValue)?;
        // SAFETY: a stream's ring has one producer, this runtime, which publishes into it only
        // while holding the state lock (held here through `st`).
        let mut res = unsafe { desc.ring.reserve_single_producer(n, DEFAULT_ROOM_SPINS, &mut hw.read_hint) }?;
        let mut counted = 0u64;
        for spec in specs {
            let index = res.next_index();
            match *spec {
                Spec::Deps(deps) => {
                    res.write(&BarrierPacket::and(deps, progress));
                    counted += 1;
                }
                Spec::Mark(signal) => {
                    res.write(&BarrierPacket::and([0; 5], signal.0));
                }
                Spec::Dispatch(mut p, args) => {
                    let off = (index & (desc.ring.size() - 1)) * u64::from(desc.kernarg_slot_bytes);
                    // SAFETY: the kernarg slot of a reserved ring slot belongs to this producer
                    // until the packet retires (QueueDesc contract); `args` fits (checked by
                    // the caller against kernarg_slot_bytes).
                    unsafe {
                        let dst = desc.kernarg_host.as_ptr().add(off as usize);
                        core::ptr::copy_nonoverlapping(args.as_ptr(), dst, args.len());
                    }
                    p.kernarg_address = desc.kernarg_device + off;
                    p.completion_signal = progress;
                    res.write(&p);
                    counted += 1;
                }
                Spec::Value(mut p) => {
                    p.completion_signal = progress;
                    res.write(&p);
                    counted += 1;
                }
            }
        }
        let last = res.finish();
        slot.submitted += counted;
        // Ordering: a Release fence orders the headers before the doorbell store (kfd-aql.md §2);
        // a backend whose doorbell or ring sits in write-combined memory adds its own store fence.
        core::sync::atomic::fence(CoreOrdering::Release);
        self.backend.ring_doorbell(&hw.queue, last);
        Ok(())
    }

    /// Takes a marker signal (value 1) that stream `consumer` will read in the barrier it
    /// publishes next; it comes free once that barrier has completed.
    fn take_marker(&self, st: &mut State<B::Queue, S, E, T, M, G, N, X>, consumer: usize) -> Result<SignalHandle> {
        let consumer_generation = st.streams.get(consumer).map_or(0, |s| s.generation.current);
        let idx = match self.free_marker(st) {
            Some(m) => m,
            None => {
                // Wait (bounded) for the oldest marker's consumer to move on.
                let oldest = st.markers.iter().filter(|m| m.busy).min_by_key(|m| m.release_at).copied();
                if let Some(m) = oldest {
                    if let Some(s) = st.streams.get(m.consumer) {
                        if let Some(hw) = &s.hw {
                            let _ = self.backend.signal_wait(
                                hw.signal,
                                Condition::Lt,
                                1 - m.release_at as i64,
                                MARKER_WAIT,
                            );
                        }
                    }
                }
                self.free_marker(st).ok_or(Error::OutOfMemory)?
            }
        };
        let m = st.markers.get_mut(idx).ok_or(Error::OutOfMemory)?;
        if m.signal.is_null() {
            m.signal = self.backend.signal_create(1)?;
        } else {
            // SAFETY: pool markers stay allocated for the runtime's life.
            unsafe { m.signal.get() }.reset(1);
        }
        m.busy = true;
        m.consumer = consumer;
        m.consumer_generation = consumer_generation;
        m.release_at = PENDING;
        st.markers_taken += 1;
        Ok(m.signal)
    }

    /// A free marker slot, reclaiming those whose consumer has passed them.
    fn free_marker(&self, st: &mut State<B::Queue, S, E, T, M, G, N, X>) -> Option<usize> {
        for idx in 0..M {
            let m = *st.markers.get(idx)?;
            if !m.busy {
                return Some(idx);
            }
            // The producer's packet must have completed the marker, and (below) the consumer's
            // barrier must have read it.
            // SAFETY: pool markers stay allocated for the runtime's life.
            if m.release_at == PENDING || unsafe { m.signal.get() }.load() > 0 {
                continue;
            }
            let passed = match st.streams.get(m.consumer) {
                // The consumer slot moved on to another life or was freed: its queue drained.
                Some(s) if s.state == SlotState::Free => true,
                Some(s) if s.generation.current != m.consumer_generation && s.state == SlotState::Live => true,
                Some(s) => match &s.hw {
                    Some(hw) => self
                        .backend
                        .signal_wait(hw.signal, Condition::Lt, 1 - m.release_at as i64, Timeout::ZERO)
                        .is_ok(),
                    None => true,
                },
                None => true,
            };
            if passed {
                if let Some(m) = st.markers.get_mut(idx) {
                    m.busy = false;
                }
                return Some(idx);
            }
        }
        None
    }

    /// Makes `consumer` wait for everything stream `producer` has published so far: a marker
    /// on the producer, returned as the dependency to put in the consumer's next barrier.
    fn point_in_time(
        &self,
        st: &mut State<B::Queue, S, E, T, M, G, N, X>,
        producer: usize,
        consumer: usize,
    ) -> Result<SignalHandle> {
        let marker = self.take_marker(st, consumer)?;
        if let Err(e) = self.publish(st, producer, &[Spec::Mark(marker), Spec::Deps([0; 5])]) {
            // Never published, so nothing would ever complete it and the pool would lose it:
            // complete it here; it comes free once the consumer's release point passes.
            // SAFETY: pool markers stay allocated for the runtime's life.
            unsafe { marker.get() }.reset(0);
            return Err(e);
        }
        Ok(marker)
    }

    /// The implicit dependencies of work on slot `i` (hip-semantics.md §3 rules 1, 2, 4, 5).
    fn implicit_deps(&self, st: &mut State<B::Queue, S, E, T, M, G, N, X>, i: usize, deps: &mut Deps) -> Result<()> {
        let Some(s) = st.streams.get(i) else { return Err(Error::InvalidHandle) };
        let device = s.device;
        match s.kind {
            StreamKind::Null => {
                for p in 0..S {
                    let busy = st
                        .streams
                        .get(p)
                        .is_some_and(|ps| ps.is_blocking_user() && ps.device == device && !self.is_idle(ps));
                    if busy {
                        let m = self.point_in_time(st, p, i)?;
                        push_dep(deps, m.0)?;
                    }
                }
            }
            _ if s.flags.is_blocking() => {
                let raw = st.devices.get(device as usize).map_or(0, |d| d.null_stream);
                if let Lookup::Live(n) = lookup_stream(&st.streams, raw) {
                    let busy = st.streams.get(n).is_some_and(|ns| !self.is_idle(ns));
                    if busy {
                        let m = self.point_in_time(st, n, i)?;
                        push_dep(deps, m.0)?;
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Checks the queue behind slot `i` for a fault (sticky: the stream keeps failing).
    fn check_fault(&self, st: &State<B::Queue, S, E, T, M, G, N, X>, i: usize) -> Result<()> {
        match st.streams.get(i).and_then(|s| s.hw.as_ref()) {
            Some(hw) => match self.backend.queue_fault(&hw.queue) {
                Some(e) => Err(e),
                None => Ok(()),
            },
            None => Err(Error::InvalidHandle),
        }
    }

    /// Enqueues one operation on stream `s` with its implicit and explicit dependencies.
    fn submit(&self, s: StreamHandle, cmd: Command<'_>) -> Result<()> {
        let mut st = self.state.lock();
        let i = self.resolve_for_work(&mut st, s)?;
        if matches!(cmd, Command::HostFn(HostFn::StreamCallback { .. })) {
            self.check_callback_target(&mut st, s, i)?;
        }
        match Self::capture_status_of(&st, i) {
            CaptureStatus::Active if Self::capture_of(&st, i).is_some() => {
                return self.capture_command(&mut st, i, &cmd);
            }
            CaptureStatus::Invalidated if Self::capture_of(&st, i).is_some() => {
                return Err(Error::StreamCaptureInvalidated);
            }
            _ => {}
        }
        self.check_fault(&st, i)?;
        let result = self.submit_locked(&mut st, i, &cmd);
        self.release_taken_markers(&mut st, i);
        result
    }

    /// Resolves the stream of an async work API (`STREAM_CAPTURE` in clr): an invalid handle is
    /// `InvalidValue` while any capture exists, a detached stream `StreamDetached`.
    fn resolve_for_work(&self, st: &mut State<B::Queue, S, E, T, M, G, N, X>, s: StreamHandle) -> Result<usize> {
        let i = match self.resolve(st, s, Error::ContextIsDestroyed) {
            Ok(i) => i,
            Err(e @ (Error::ContextIsDestroyed | Error::InvalidHandle)) => {
                return Err(if Self::any_capture(st) { Error::InvalidValue } else { e });
            }
            Err(e) => return Err(e),
        };
        if st.streams.get(i).is_some_and(|sl| sl.detached) {
            return Err(Error::StreamDetached);
        }
        Ok(i)
    }

    /// The checks an async work API makes on its stream when there is nothing to enqueue
    /// (a zero-byte copy): the stream must resolve and must not be detached.
    fn check_work_stream(&self, s: StreamHandle) -> Result<()> {
        let mut st = self.state.lock();
        let i = self.resolve_for_work(&mut st, s)?;
        match Self::capture_status_of(&st, i) {
            CaptureStatus::Invalidated if Self::capture_of(&st, i).is_some() => Err(Error::StreamCaptureInvalidated),
            _ => Ok(()),
        }
    }

    /// Markers taken for the operation just submitted on slot `i` are released after its last
    /// counted packet (or at once if nothing was published); `take_marker` left them pending.
    fn release_taken_markers(&self, st: &mut State<B::Queue, S, E, T, M, G, N, X>, i: usize) {
        if st.markers_taken > 0 {
            st.markers_taken = 0;
            let submitted = st.streams.get(i).map_or(0, |sl| sl.submitted);
            for m in st.markers.iter_mut().filter(|m| m.busy && m.consumer == i && m.release_at == PENDING) {
                m.release_at = submitted;
            }
        }
    }

    fn submit_locked(&self, st: &mut State<B::Queue, S, E, T, M, G, N, X>, i: usize, cmd: &Command<'_>) -> Result<()> {
        let device = st.streams.get(i).map_or(0, |sl| sl.device);
        let mut deps = Deps::new();
        self.implicit_deps(st, i, &mut deps)?;
        // The common case, a dispatch with nothing to wait for, skips the batch.
        if deps.is_empty() {
            match cmd {
                Command::Kernel(k) => {
                    let spec = self.dispatch_spec(st, i, *k)?;
                    return self.publish(st, i, core::slice::from_ref(&spec));
                }
                Command::Builtin { kernel, args, len } => {
                    let spec = Spec::Dispatch(
                        Self::dispatch_packet(
                            self.backend.builtin_kernel(device, *kernel)?,
                            [1, 1, 1],
                            [1, 1, 1],
                            0,
                            0,
                        ),
                        args.get(..*len).ok_or(Error::InvalidValue)?,
                    );
                    return self.publish(st, i, core::slice::from_ref(&spec));
                }
                _ => {}
            }
        }
        let mut host: Option<(SignalHandle, SignalHandle, HostFn)> = None;
        match *cmd {
            Command::WaitEvent(sig) => push_dep(&mut deps, sig.0)?,
            Command::HostFn(f) => {
                let start = self.take_marker(st, i)?;
                let done = match self.take_marker(st, i) {
                    Ok(d) => d,
                    Err(e) => {
                        // Never published: nothing will complete it, so complete it here.
                        // SAFETY: pool markers stay allocated for the runtime's life.
                        unsafe { start.get() }.reset(0);
                        return Err(e);
                    }
                };
                host = Some((start, done, f));
            }
            _ => {}
        }
        let mut batch = Batch::new();
        for chunk in dep_chunks(&deps) {
            batch.push(Spec::Deps(chunk))?;
        }
        match cmd {
            Command::Kernel(k) => batch.push(self.dispatch_spec(st, i, *k)?)?,
            Command::Builtin { kernel, args, len } => {
                let object = self.backend.builtin_kernel(device, *kernel)?;
                let packet = Self::dispatch_packet(object, [1, 1, 1], [1, 1, 1], 0, 0);
                batch.push(Spec::Dispatch(packet, args.get(..*len).ok_or(Error::InvalidValue)?))?;
            }
            Command::WaitValue { address, value, mask, cond } => {
                batch.push(Spec::Value(BarrierValuePacket {
                    header: Header::new(PacketType::VendorSpecific, true, FenceScope::System, FenceScope::System).0,
                    amd_format: crate::aql::amd_format::BARRIER_VALUE,
                    // The packet reads the value at signal + 8, where a signal keeps its value.
                    signal: address.wrapping_sub(8),
                    value: *value,
                    mask: *mask,
                    cond: *cond as u32,
                    ..Default::default()
                }))?;
            }
            Command::HostFn(_) => {
                if let Some((start, done, _)) = host {
                    batch.push(Spec::Mark(start))?;
                    batch.push(Spec::Deps([done.0, 0, 0, 0, 0]))?;
                }
            }
            Command::EventRecord(e) => {
                let sig = st.events.get(*e).map(|ev| ev.signal).ok_or(Error::InvalidHandle)?;
                batch.push(Spec::Mark(sig))?;
                batch.push(Spec::Deps([0; 5]))?;
                // SAFETY: a live event's signal is a live backend signal.
                unsafe { sig.get() }.value.fetch_add(1, Ordering::AcqRel);
            }
            Command::WaitEvent(_) => {}
            Command::Marker => batch.push(Spec::Deps([0; 5]))?,
        }
        if batch.is_empty() {
            // Nothing to wait for and nothing to run.
            return Ok(());
        }
        if let Err(e) = self.publish(st, i, batch.as_slice()) {
            if let Some((start, done, _)) = host {
                // SAFETY: pool markers stay allocated for the runtime's life.
                unsafe {
                    start.get().reset(0);
                    done.get().reset(0);
                }
            }
            if let Command::EventRecord(ev) = cmd {
                if let Some(sig) = st.events.get(*ev).map(|ev| ev.signal) {
                    // SAFETY: as above.
                    unsafe { sig.get() }.value.fetch_sub(1, Ordering::AcqRel);
                }
            }
            return Err(e);
        }
        if let Some((start, done, f)) = host {
            if let Err(e) = self.backend.host_call(start, done, f) {
                // The barrier after the call waits on `done`, which nobody will complete now:
                // complete it so the stream's later work is not stuck behind a call that never
                // runs.
                // SAFETY: pool markers stay allocated for the runtime's life.
                unsafe { done.get() }.reset(0);
                return Err(e);
            }
        }
        Ok(())
    }

    fn dispatch_packet(object: u64, grid: [u32; 3], wg: [u16; 3], group: u32, private: u32) -> KernelDispatchPacket {
        KernelDispatchPacket {
            header: DISPATCH_HEADER.0,
            setup: 3,
            workgroup_size_x: wg[0],
            workgroup_size_y: wg[1],
            workgroup_size_z: wg[2],
            reserved0: 0,
            grid_size_x: grid[0],
            grid_size_y: grid[1],
            grid_size_z: grid[2],
            private_segment_size: private,
            group_segment_size: group,
            kernel_object: object,
            kernarg_address: 0,
            reserved2: 0,
            completion_signal: 0,
        }
    }

    fn dispatch_spec<'a>(
        &self,
        st: &State<B::Queue, S, E, T, M, G, N, X>,
        i: usize,
        k: KernelLaunch<'a>,
    ) -> Result<Spec<'a>> {
        // u64: three u16 sizes overflow u32 (and a wrapped product could pass the 1024 check).
        let wg_items: u64 = k.workgroup.iter().map(|&w| u64::from(w)).product();
        if k.workgroup.contains(&0) || k.grid.contains(&0) || wg_items > 1024 {
            return Err(Error::InvalidConfiguration);
        }
        if k.kernel_object == 0 {
            return Err(Error::InvalidValue);
        }
        let slot_bytes = st.streams.get(i).and_then(|s| s.hw.as_ref()).map_or(0, |hw| hw.desc.kernarg_slot_bytes);
        if k.kernarg.len() > slot_bytes as usize {
            return Err(Error::InvalidValue);
        }
        Ok(Spec::Dispatch(
            Self::dispatch_packet(k.kernel_object, k.grid, k.workgroup, k.group_segment_size, k.private_segment_size),
            k.kernarg,
        ))
    }

    // ----- stream operations ---------------------------------------------------------------

    /// Launches a kernel on `s` (`hipModuleLaunchKernel`); its arguments are copied now.
    /// A zero size or a work-group over 1024 work-items is `InvalidConfiguration`.
    pub fn launch_kernel(&self, s: StreamHandle, launch: &KernelLaunch<'_>) -> Result<()> {
        self.submit(s, Command::Kernel(*launch))
    }

    fn builtin<A: Copy>(&self, s: StreamHandle, kernel: BuiltinKernel, args: A) -> Result<()> {
        let len = core::mem::size_of::<A>();
        let mut buf = [0u8; 32];
        let dst = buf.get_mut(..len).ok_or(Error::InvalidValue)?;
        // SAFETY: A is a repr(C) argument struct of plain integers (CopyArgs, FillArgs,
        // WriteValueArgs) without padding; viewing it as bytes is sound.
        let bytes = unsafe { core::slice::from_raw_parts(&args as *const A as *const u8, len) };
        dst.copy_from_slice(bytes);
        self.submit(s, Command::Builtin { kernel, args: buf, len })
    }

    /// `hipMemcpyAsync`: copies `bytes` from `src` to `dst` in stream order. Zero bytes is a
    /// no-op; a null address is `InvalidValue`.
    pub fn memcpy_async(&self, s: StreamHandle, dst: u64, src: u64, bytes: u64) -> Result<()> {
        if dst == 0 || src == 0 {
            return Err(Error::InvalidValue);
        }
        if bytes == 0 {
            self.check_work_stream(s)?;
            return Ok(());
        }
        self.builtin(s, BuiltinKernel::Copy, CopyArgs { dst, src, bytes })
    }

    /// `hipMemsetAsync` / `hipMemsetD16Async` / `hipMemsetD32Async`: fills `count` elements of
    /// `element_bytes` (1, 2 or 4) with `value`.
    pub fn memset_async(&self, s: StreamHandle, dst: u64, value: u32, element_bytes: u32, count: u64) -> Result<()> {
        if dst == 0 || !matches!(element_bytes, 1 | 2 | 4) || dst % u64::from(element_bytes) != 0 {
            return Err(Error::InvalidValue);
        }
        if count == 0 {
            self.check_work_stream(s)?;
            return Ok(());
        }
        self.builtin(s, BuiltinKernel::Fill, FillArgs { dst, count, value, element_bytes })
    }

    /// `hipMemcpy`: a copy on the null stream, then waits for the null stream.
    pub fn memcpy(&self, dst: u64, src: u64, bytes: u64) -> Result<()> {
        self.check_sync_copy()?;
        self.memcpy_async(StreamHandle::NULL, dst, src, bytes)?;
        self.stream_synchronize(StreamHandle::LEGACY)
    }

    /// `hipMemset`: a byte fill on the null stream, then waits for the null stream.
    pub fn memset(&self, dst: u64, value: u8, bytes: u64) -> Result<()> {
        self.check_sync_copy()?;
        self.memset_async(StreamHandle::NULL, dst, u32::from(value), 1, bytes)?;
        self.stream_synchronize(StreamHandle::LEGACY)
    }

    /// Synchronous copies and fills while any capture is active: `StreamCaptureImplicit`, and
    /// every capture is invalidated (HIP differs from CUDA here).
    fn check_sync_copy(&self) -> Result<()> {
        let mut st = self.state.lock();
        if Self::any_active_capture(&st) {
            Self::invalidate_all_captures(&mut st);
            return Err(Error::StreamCaptureImplicit);
        }
        Ok(())
    }

    /// The thread-mode rule for allocation APIs (`CHECK_STREAM_CAPTURE_SUPPORTED`).
    fn check_alloc_call(&self) -> Result<()> {
        let mut st = self.state.lock();
        self.check_unsafe_call(&mut st, Error::StreamCaptureUnsupported)
    }

    /// `hipMalloc` on the current device.
    pub fn malloc(&self, bytes: usize) -> Result<u64> {
        self.check_alloc_call()?;
        let device = self.device()?;
        self.backend.memory_alloc(device, bytes, MemoryKind::Device)
    }

    /// `hipHostMalloc`.
    pub fn host_malloc(&self, bytes: usize) -> Result<u64> {
        self.check_alloc_call()?;
        let device = self.device()?;
        self.backend.memory_alloc(device, bytes, MemoryKind::Host)
    }

    /// `hipFree`: freeing 0 is a no-op.
    pub fn free(&self, address: u64) -> Result<()> {
        self.check_alloc_call()?;
        if address == 0 {
            return Ok(());
        }
        self.backend.memory_free(address)
    }

    /// `hipLaunchHostFunc` / `hipStreamAddCallback`: runs `f` on the host after all earlier
    /// work of the stream and before any later work.
    pub fn launch_host_func(&self, s: StreamHandle, f: HostFn) -> Result<()> {
        self.submit(s, Command::HostFn(f))
    }

    /// Enqueues an empty command (a point the stream passes once everything before it is done).
    pub fn marker(&self, s: StreamHandle) -> Result<()> {
        self.submit(s, Command::Marker)
    }

    fn check_value_args(address: u64, flags: u32, align: u64) -> Result<()> {
        if address == 0 || flags != 0 || address % align != 0 {
            return Err(Error::InvalidValue);
        }
        Ok(())
    }

    /// `hipStreamWriteValue32`: stores `value` at `address` in stream order (flags must be 0).
    pub fn write_value32(&self, s: StreamHandle, address: u64, value: u32, flags: u32) -> Result<()> {
        Self::check_value_args(address, flags, 4)?;
        self.builtin(
            s,
            BuiltinKernel::WriteValue,
            WriteValueArgs { dst: address, value: u64::from(value), width: 4, reserved: 0 },
        )
    }

    /// `hipStreamWriteValue64`.
    pub fn write_value64(&self, s: StreamHandle, address: u64, value: u64, flags: u32) -> Result<()> {
        Self::check_value_args(address, flags, 8)?;
        self.builtin(s, BuiltinKernel::WriteValue, WriteValueArgs { dst: address, value, width: 8, reserved: 0 })
    }

    /// `bytes` is the width of the value waited on: 4 or 8.
    fn wait_value(&self, s: StreamHandle, address: u64, value: u64, op: u32, mask: u64, bytes: u64) -> Result<()> {
        let op = WaitValueOp::from_raw(op)?;
        Self::check_value_args(address, 0, bytes)?;
        let full = if bytes == 4 { u64::from(u32::MAX) } else { u64::MAX };
        let mask = mask & full;
        let value = value & full;
        let (value, mask, cond) = match op {
            WaitValueOp::Gte => (value, mask, Condition::Gte),
            WaitValueOp::Eq => (value, mask, Condition::Eq),
            WaitValueOp::And => (0, value & mask, Condition::Ne),
            WaitValueOp::Nor => {
                let m = mask & !value & full;
                (m, m, Condition::Ne)
            }
        };
        self.submit(s, Command::WaitValue { address, value: value as i64, mask: mask as i64, cond })
    }

    /// `hipStreamWaitValue32`: later work of the stream waits until the condition holds for the
    /// 32-bit value at `address` (`op`: 0 Gte, 1 Eq, 2 And, 3 Nor).
    pub fn wait_value32(&self, s: StreamHandle, address: u64, value: u32, op: u32, mask: u32) -> Result<()> {
        self.wait_value(s, address, u64::from(value), op, u64::from(mask), 4)
    }

    /// `hipStreamWaitValue64`.
    pub fn wait_value64(&self, s: StreamHandle, address: u64, value: u64, op: u32, mask: u64) -> Result<()> {
        self.wait_value(s, address, value, op, mask, 8)
    }

    // ----- query and synchronize -----------------------------------------------------------

    /// The slots `hipStreamQuery`/`hipStreamSynchronize` must look at for `s`, null stream last.
    fn sync_set(
        &self,
        st: &mut State<B::Queue, S, E, T, M, G, N, X>,
        s: StreamHandle,
        out: &mut [usize; S],
    ) -> Result<usize> {
        let i = self.resolve(st, s, Error::ContextIsDestroyed)?;
        if !s.is_null_or_legacy() {
            if st.streams.get(i).is_some_and(|sl| sl.detached) {
                return Err(Error::StreamDetached);
            }
            // `0` and legacy are not capture-checked (HIP differs from CUDA here).
            self.check_sync_target(st, i)?;
        }
        let mut n = 0;
        if s == StreamHandle::NULL {
            // Rule 6/7: the null stream and every blocking stream of the device.
            let device = st.streams.get(i).map_or(0, |sl| sl.device);
            for (p, ps) in st.streams.iter().enumerate() {
                if ps.is_blocking_user() && ps.device == device {
                    if let Some(o) = out.get_mut(n) {
                        *o = p;
                        n += 1;
                    }
                }
            }
        }
        if let Some(o) = out.get_mut(n) {
            *o = i;
            n += 1;
        }
        Ok(n)
    }

    /// `hipStreamQuery`: `Ok` when all work is done, `NotReady` otherwise. For `0` that includes
    /// every blocking stream of the device; `hipStreamLegacy` looks at the null stream only.
    pub fn stream_query(&self, s: StreamHandle) -> Result<()> {
        let mut st = self.state.lock();
        let mut set = [0usize; S];
        let n = self.sync_set(&mut st, s, &mut set)?;
        for &i in set.iter().take(n) {
            self.check_fault(&st, i)?;
            if st.streams.get(i).is_some_and(|sl| !self.poll_idle(sl)) {
                self.check_fault(&st, i)?;
                return Err(Error::NotReady);
            }
        }
        Ok(())
    }

    /// `hipStreamSynchronize` (waits without bound).
    pub fn stream_synchronize(&self, s: StreamHandle) -> Result<()> {
        self.stream_synchronize_timeout(s, Timeout::NEVER)
    }

    /// `hipStreamSynchronize` with a bound: `NotReady` if the work did not finish in time; the
    /// queue's error if it faulted.
    pub fn stream_synchronize_timeout(&self, s: StreamHandle, timeout: Timeout) -> Result<()> {
        let mut targets = [(SignalHandle::NULL, 0i64, 0usize); S];
        let n = {
            let mut st = self.state.lock();
            let mut set = [0usize; S];
            let n = self.sync_set(&mut st, s, &mut set)?;
            for (t, &i) in targets.iter_mut().zip(set.iter().take(n)) {
                if let Some(sl) = st.streams.get(i) {
                    if let Some(hw) = &sl.hw {
                        *t = (hw.signal, 1 - sl.submitted as i64, i);
                    }
                }
            }
            n
        };
        self.wait_targets(targets.get(..n).unwrap_or(&[]), timeout)
    }

    fn wait_targets(&self, targets: &[(SignalHandle, i64, usize)], timeout: Timeout) -> Result<()> {
        for &(signal, expected, i) in targets {
            if signal.is_null() {
                continue;
            }
            if let Err(e) = self.backend.signal_wait(signal, Condition::Lt, expected, timeout) {
                let st = self.state.lock();
                self.check_fault(&st, i)?;
                return Err(e);
            }
            let st = self.state.lock();
            self.check_fault(&st, i)?;
        }
        Ok(())
    }

    /// `hipDeviceSynchronize`: waits for every stream of the current device, non-blocking ones
    /// included.
    pub fn device_synchronize(&self) -> Result<()> {
        self.device_synchronize_timeout(Timeout::NEVER)
    }

    /// `hipDeviceSynchronize` with a bound.
    pub fn device_synchronize_timeout(&self, timeout: Timeout) -> Result<()> {
        {
            let mut st = self.state.lock();
            // Any active capture anywhere: unsupported, and every capture is invalidated.
            if Self::any_active_capture(&st) {
                Self::invalidate_all_captures(&mut st);
                return Err(Error::StreamCaptureUnsupported);
            }
        }
        self.wait_device(timeout)
    }

    fn wait_device(&self, timeout: Timeout) -> Result<()> {
        let mut targets = [(SignalHandle::NULL, 0i64, 0usize); S];
        let mut n = 0;
        {
            self.device_count()?;
            let st = self.state.lock();
            let device = self.current_device(&st);
            for (i, sl) in st.streams.iter().enumerate() {
                if sl.state != SlotState::Free && sl.device == device {
                    if let (Some(hw), Some(t)) = (&sl.hw, targets.get_mut(n)) {
                        *t = (hw.signal, 1 - sl.submitted as i64, i);
                        n += 1;
                    }
                }
            }
        }
        self.wait_targets(targets.get(..n).unwrap_or(&[]), timeout)?;
        let mut st = self.state.lock();
        self.reap(&mut st);
        Ok(())
    }

    /// `hipDeviceReset` of the current device: waits for its work, then releases every stream
    /// (the null and per-thread streams included) and event of the device. Their handles go
    /// stale; the null and per-thread streams come back on next use.
    pub fn device_reset(&self) -> Result<()> {
        // Work that cannot finish (a faulted queue) does not keep the reset from happening.
        let _ = self.wait_device(Timeout::SECOND);
        let mut st = self.state.lock();
        let device = self.current_device(&st);
        for i in 0..S {
            if st.streams.get(i).is_some_and(|s| s.state != SlotState::Free && s.device == device) {
                Self::capture_on_destroy(&mut st, i);
            }
            let Some(s) = st.streams.get_mut(i) else { continue };
            if s.state == SlotState::Free || s.device != device {
                continue;
            }
            if s.state == SlotState::Live {
                s.generation.vacate();
            }
            s.state = SlotState::Free;
            let faulted = s.hw.as_ref().is_some_and(|hw| self.backend.queue_fault(&hw.queue).is_some());
            if faulted || !self.is_idle(s) {
                if let Some(hw) = s.hw.take() {
                    self.release_hw(hw);
                }
            }
        }
        if let Some(d) = st.devices.get_mut(device as usize) {
            d.null_stream = 0;
        }
        for e in st.events.iter_mut() {
            if e.state != SlotState::Free && e.device == device {
                if e.state == SlotState::Live {
                    e.generation.vacate();
                }
                e.state = SlotState::Free;
                e.recorded = Recorded::Never;
                // SAFETY: event signals stay allocated while cached in the slot.
                unsafe { e.signal.get() }.reset(0);
            }
        }
        Ok(())
    }

    // ----- events --------------------------------------------------------------------------

    /// `hipEventCreateWithFlags` on the current device.
    pub fn event_create(&self, flags: u32) -> Result<EventHandle> {
        let flags = EventFlags::from_raw(flags)?;
        self.device_count()?;
        let mut st = self.state.lock();
        let device = self.current_device(&st);
        let i = match st.events.iter().position(|e| e.state == SlotState::Free) {
            Some(i) => i,
            None => {
                self.reap(&mut st);
                st.events.iter().position(|e| e.state == SlotState::Free).ok_or(Error::OutOfMemory)?
            }
        };
        let e = st.events.get_mut(i).ok_or(Error::OutOfMemory)?;
        if e.signal.is_null() {
            e.signal = self.backend.signal_create(0)?;
        } else {
            // SAFETY: cached event signals stay allocated.
            unsafe { e.signal.get() }.reset(0);
        }
        let g = e.generation.occupy();
        e.state = SlotState::Live;
        e.flags = flags;
        e.device = device;
        e.recorded = Recorded::Never;
        // A reused slot must not inherit its previous event's capture record.
        e.captured = None;
        e.snapshot = DepSet::EMPTY;
        Ok(EventHandle(table::encode(EVENT_TAG, g, i)))
    }

    /// If the event's last record is still pending, makes the drained spare signal (created
    /// on first need) the event's signal, so a new record does not add to the old one's count
    /// (hipEventQuery reflects the latest record only). Returns whether it swapped. Without a
    /// drained spare (or a signal for one) the record shares the pending signal, as before.
    fn swap_if_pending(&self, ev: &mut EventSlot) -> bool {
        // SAFETY: a live event's signal is live.
        if unsafe { ev.signal.get() }.load() <= 0 {
            return false;
        }
        if ev.spare.is_null() {
            match self.backend.signal_create(0) {
                Ok(sig) => ev.spare = sig,
                Err(_) => return false,
            }
        }
        // SAFETY: a spare, once created, stays allocated with its slot.
        let spare = unsafe { ev.spare.get() };
        if spare.load() > 0 {
            return false;
        }
        spare.reset(0);
        core::mem::swap(&mut ev.signal, &mut ev.spare);
        true
    }

    fn event_slot(st: &State<B::Queue, S, E, T, M, G, N, X>, e: EventHandle) -> Result<usize> {
        if e == EventHandle::NULL {
            return Err(Error::InvalidHandle);
        }
        table::require(lookup_event(&st.events, e.0), Error::ContextIsDestroyed, Error::InvalidHandle)
    }

    /// `hipEventDestroy`: null is `InvalidHandle`, a destroyed event `ContextIsDestroyed`. A
    /// pending record still completes.
    pub fn event_destroy(&self, e: EventHandle) -> Result<()> {
        let mut st = self.state.lock();
        let i = Self::event_slot(&st, e)?;
        let ev = st.events.get_mut(i).ok_or(Error::InvalidHandle)?;
        ev.generation.vacate();
        // SAFETY: a live event's signal is live.
        let pending = unsafe { ev.signal.get() }.load() > 0;
        ev.state = if pending { SlotState::Draining } else { SlotState::Free };
        Ok(())
    }

    /// `hipEventRecordWithFlags` (`flags` 0 or 1): the event completes once all work enqueued
    /// on `s` so far has completed.
    pub fn event_record(&self, e: EventHandle, s: StreamHandle, flags: u32) -> Result<()> {
        check_record_flags(flags)?;
        let i_recorded = {
            let mut st = self.state.lock();
            let i = Self::event_slot(&st, e)?;
            let si = self.resolve_for_work(&mut st, s)?;
            match Self::capture_status_of(&st, si) {
                CaptureStatus::Active if Self::capture_of(&st, si).is_some() => {
                    return self.capture_event_record(&mut st, si, i, e, flags == 1);
                }
                CaptureStatus::Invalidated if Self::capture_of(&st, si).is_some() => {
                    return Err(Error::StreamCaptureInvalidated);
                }
                _ => {}
            }
            let (sdev, skind) = st.streams.get(si).map(|sl| (sl.device, sl.kind)).ok_or(Error::InvalidHandle)?;
            if st.events.get(i).is_some_and(|ev| ev.device != sdev) {
                return Err(Error::InvalidHandle);
            }
            let recorded =
                if skind == StreamKind::Null { Recorded::OnNull } else { Recorded::On(Self::handle_of(&st, si).0) };
            let swapped = st.events.get_mut(i).is_some_and(|ev| self.swap_if_pending(ev));
            (i, recorded, swapped)
        };
        let (i, recorded, swapped) = i_recorded;
        let result = self.submit(s, Command::EventRecord(i));
        let mut st = self.state.lock();
        if let Some(ev) = st.events.get_mut(i) {
            match result {
                Ok(()) => {
                    ev.recorded = recorded;
                    // A record outside any capture makes the event a plain event again: a
                    // later wait is an ordinary wait, not a join of the capture it was last
                    // recorded in.
                    ev.captured = None;
                    ev.snapshot = DepSet::EMPTY;
                }
                // The record never happened: the event goes back to its previous record.
                Err(_) if swapped => core::mem::swap(&mut ev.signal, &mut ev.spare),
                Err(_) => {}
            }
        }
        result
    }

    /// `hipEventQuery`: `Ok` if complete or never recorded, `NotReady` otherwise.
    pub fn event_query(&self, e: EventHandle) -> Result<()> {
        let mut st = self.state.lock();
        let i = Self::event_slot(&st, e)?;
        self.check_event_capture(&mut st, i)?;
        let ev = st.events.get(i).ok_or(Error::InvalidHandle)?;
        if ev.recorded == Recorded::Never {
            return Ok(());
        }
        self.backend.signal_wait(ev.signal, Condition::Lt, 1, Timeout::ZERO).map(|_| ())
    }

    /// Capture checks of `hipEventQuery`/`hipEventSynchronize`: an event recorded in an active
    /// capture → `CapturedEvent` and that capture invalidated; an event recorded on a created
    /// stream → the thread-mode rule.
    fn check_event_capture(&self, st: &mut State<B::Queue, S, E, T, M, G, N, X>, i: usize) -> Result<()> {
        let (captured, recorded) = st.events.get(i).map(|e| (e.captured, e.recorded)).ok_or(Error::InvalidHandle)?;
        if let Some((c, id)) = captured {
            let c = usize::from(c);
            if st.captures.get(c).is_some_and(|cap| cap.live && cap.id == id && cap.status == CaptureStatus::Active) {
                Self::set_capture_status(st, c, CaptureStatus::Invalidated);
                return Err(Error::CapturedEvent);
            }
        }
        match recorded {
            Recorded::Never | Recorded::OnNull => Ok(()),
            Recorded::On(_) => self.check_unsafe_call(st, Error::StreamCaptureUnsupported),
        }
    }

    /// `hipEventSynchronize`.
    pub fn event_synchronize(&self, e: EventHandle) -> Result<()> {
        self.event_synchronize_timeout(e, Timeout::NEVER)
    }

    /// `hipEventSynchronize` with a bound (`NotReady` when it runs out).
    pub fn event_synchronize_timeout(&self, e: EventHandle, timeout: Timeout) -> Result<()> {
        let (signal, recorded) = {
            let mut st = self.state.lock();
            let i = Self::event_slot(&st, e)?;
            self.check_event_capture(&mut st, i)?;
            let ev = st.events.get(i).ok_or(Error::InvalidHandle)?;
            (ev.signal, ev.recorded)
        };
        if recorded == Recorded::Never {
            return Ok(());
        }
        self.backend.signal_wait(signal, Condition::Lt, 1, timeout).map(|_| ())
    }

    /// `hipEventElapsedTime` in milliseconds from `start` to `stop`.
    pub fn event_elapsed_time(&self, start: EventHandle, stop: EventHandle) -> Result<f32> {
        let st = self.state.lock();
        let a = st.events.get(Self::event_slot(&st, start)?).ok_or(Error::InvalidHandle)?;
        let b = st.events.get(Self::event_slot(&st, stop)?).ok_or(Error::InvalidHandle)?;
        if a.device != b.device {
            return Err(Error::InvalidHandle);
        }
        let untimed = |e: &EventSlot| e.recorded == Recorded::Never || e.flags.contains(EventFlags::DISABLE_TIMING);
        if untimed(a) || untimed(b) {
            return Err(Error::InvalidHandle);
        }
        for ev in [a, b] {
            self.backend.signal_wait(ev.signal, Condition::Lt, 1, Timeout::ZERO)?;
        }
        let hz = self.backend.device_info(a.device)?.timestamp_frequency;
        // SAFETY: live events' signals are live.
        let (ta, tb) = unsafe { (a.signal.get(), b.signal.get()) };
        // Ordering: the Acquire loads in signal_wait ordered these after the completions.
        let ticks = tb.end_ts.load(Ordering::Relaxed) as i64 - ta.end_ts.load(Ordering::Relaxed) as i64;
        Ok(ticks_to_ms(ticks, hz))
    }

    /// `hipStreamWaitEvent` (`flags` 0 or 1): later work of `s` waits for the event's last
    /// record. An event never recorded, already complete, or recorded on a stream that has since
    /// been destroyed adds no wait.
    pub fn stream_wait_event(&self, s: StreamHandle, e: EventHandle, flags: u32) -> Result<()> {
        if flags > 1 {
            return Err(Error::InvalidValue);
        }
        let signal = {
            let mut st = self.state.lock();
            let i = Self::event_slot(&st, e)?;
            let si = self.resolve_for_work(&mut st, s)?;
            if self.capture_wait_event(&mut st, s, si, i, e, flags == 1)? {
                return Ok(());
            }
            let ev = st.events.get(i).ok_or(Error::InvalidHandle)?;
            let live_source = match ev.recorded {
                Recorded::Never => false,
                Recorded::OnNull => true,
                Recorded::On(raw) => matches!(lookup_stream(&st.streams, raw), Lookup::Live(_)),
            };
            // SAFETY: a live event's signal is live.
            let pending = unsafe { ev.signal.get() }.load() > 0;
            (live_source && pending).then_some(ev.signal)
        };
        match signal {
            Some(sig) => self.submit(s, Command::WaitEvent(sig)),
            None => Ok(()),
        }
    }
}
