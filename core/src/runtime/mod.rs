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

use portable_atomic::{AtomicU64, Ordering};

use crate::aql::{BarrierValuePacket, Condition, KernelDispatchPacket};
mod capture;
mod context;
mod event;
mod graphs;
mod implicit_sync;
mod ops;
mod stream;
mod submit;
mod sync;

use capture::CaptureSlot;
pub use context::ContextHandle;
use context::{ContextSlot, MAX_CONTEXTS};
use graphs::{ExecSlot, GraphSlot};
pub use graphs::{GraphExecHandle, GraphHandle};

use crate::backend::{Backend, BuiltinKernel, DeviceInfo, HostFn, QueueDesc, Timeout};
use crate::capture::{CaptureMode, CaptureStatus, DepSet};
use crate::error::{Error, Result};
use crate::event::EventFlags;
use crate::signal::SignalHandle;
use crate::stream::{CuMask, Priority, StreamFlags};
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
}
