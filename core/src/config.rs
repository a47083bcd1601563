//! Capacities in one place: the [`Config`] a [`Runtime`](crate::Runtime) is built with.
//!
//! Every table of the runtime is a fixed-capacity array (no heap), and its size comes from one
//! configuration type, so a firmware image picks small tables and a std host large ones without
//! threading a list of const generics through every `impl`. [`Capacities`] is the configuration
//! type: its const parameters are the table sizes, each with a default, and the named
//! configurations below are aliases of it.
//!
//! No operation costs more because a capacity is larger: handles are validated in O(1), free
//! slots come from free lists, host-side lists grow with what is live (a stream-table scan stops
//! at the highest slot ever used), and graph planning touches only the graph's own nodes.

use crate::pool::QueueSlot;
pub use crate::slot::{Slot, Table, MAX_DEVICES};
use crate::slots::thread::ThreadSlot;
#[cfg(feature = "capture")]
use crate::slots::{capture::CaptureSlot, context::ContextSlot, graph::ExecSlot, graph::GraphSlot};
use crate::slots::{event::EventSlot, host_signal::HostSignalSlot, module::ModuleSlot, stream::StreamSlot};

/// The capacities of a runtime.
///
/// Implemented by [`Capacities`]; the associated types are its tables, the constants the limits
/// that are not tables.
pub trait Config: 'static {
    /// Stream slots (created streams, one null stream per device used, one per-thread stream
    /// per thread and device; a destroyed stream keeps its slot until its work is done).
    type Streams<R: lock_api::RawMutex>: Table<StreamSlot<R>>;
    /// Event slots.
    type Events<R: lock_api::RawMutex>: Table<EventSlot<R>>;
    /// Host threads with a per-thread stream, a current device or a capture mode.
    type Threads: Table<ThreadSlot>;
    /// Signal pairs of host functions in flight.
    type HostSignals: Table<HostSignalSlot>;
    /// Hardware-queue slots of the queue pool (all devices).
    type Queues<Q>: Table<QueueSlot<Q>>;
    /// Graphs (user-created or capture-owned).
    #[cfg(feature = "capture")]
    type Graphs: Table<GraphSlot>;
    /// Captures in progress.
    #[cfg(feature = "capture")]
    type Captures: Table<CaptureSlot>;
    /// Graph executables.
    #[cfg(feature = "capture")]
    type Execs: Table<ExecSlot>;
    /// Execution (green) contexts.
    #[cfg(feature = "capture")]
    type Contexts: Table<ContextSlot>;
    /// Code objects loaded at once (all devices).
    type Modules<M>: Table<ModuleSlot<M>>;
    /// Most nodes one graph holds.
    const GRAPH_NODES: usize;
    /// Hardware queues each device creates before streams share them (changeable at run time
    /// with [`Runtime::set_max_hw_queues`](crate::Runtime::set_max_hw_queues)).
    const MAX_HW_QUEUES: u32;
}

/// The configuration type: table sizes as const parameters, each with a default.
///
/// | parameter | table |
/// | --- | --- |
/// | `S` | stream slots |
/// | `E` | events |
/// | `T` | host threads |
/// | `H` | host functions in flight |
/// | `G` | graphs (and captures) |
/// | `N` | nodes per graph |
/// | `X` | graph executables |
/// | `Q` | hardware-queue slots (all devices) |
/// | `B` | hardware queues per device before streams share them (HIP's `GPU_MAX_HW_QUEUES`) |
/// | `M` | code objects loaded at once (all devices) |
#[derive(Debug, Clone, Copy, Default)]
pub struct Capacities<
    const S: usize = 32,
    const E: usize = 64,
    const T: usize = 8,
    const H: usize = 64,
    const G: usize = 4,
    const N: usize = 32,
    const X: usize = 2,
    const Q: usize = 40,
    const B: u32 = 16,
    const M: usize = 8,
>;

impl<
        const S: usize,
        const E: usize,
        const T: usize,
        const H: usize,
        const G: usize,
        const N: usize,
        const X: usize,
        const Q: usize,
        const B: u32,
        const M: usize,
    > Config for Capacities<S, E, T, H, G, N, X, Q, B, M>
{
    type Streams<R: lock_api::RawMutex> = [StreamSlot<R>; S];
    type Events<R: lock_api::RawMutex> = [EventSlot<R>; E];
    type Threads = [ThreadSlot; T];
    type HostSignals = [HostSignalSlot; H];
    type Queues<Qu> = [QueueSlot<Qu>; Q];
    #[cfg(feature = "capture")]
    type Graphs = [GraphSlot; G];
    #[cfg(feature = "capture")]
    type Captures = [CaptureSlot; G];
    #[cfg(feature = "capture")]
    type Execs = [ExecSlot; X];
    #[cfg(feature = "capture")]
    type Contexts = [ContextSlot; 8];
    type Modules<Mo> = [ModuleSlot<Mo>; M];
    const GRAPH_NODES: usize = N;
    const MAX_HW_QUEUES: u32 = B;
}

/// The default: 32 streams, 64 events, 8 threads, 64 host functions in flight, 4 graphs of 32
/// nodes, 2 executables, 40 queue slots, 16 hardware queues per device, 8 code objects (a small
/// host with few streams, each on its own queue; HIP-scale hosts use [`HipScale`], whose budget
/// is 4).
pub type Default = Capacities;

/// A small firmware image: 16 streams, 32 events, 2 threads, 8 host functions, 1 graph of 8
/// nodes, 1 executable, 8 queue slots, 4 hardware queues per device, 2 code objects.
pub type Firmware = Capacities<16, 32, 2, 8, 1, 8, 1, 8, 4, 2>;

/// HIP scale, for the std host and the HIP library: 4352 stream slots (4096 streams besides the
/// null and per-thread ones), 16384 events, 256 threads, 1024 host functions in flight, 256
/// graphs of up to 16384 nodes, 256 executables, 64 queue slots, 4 hardware queues per device,
/// 16384 code objects (a process loads its fat binaries' code objects lazily, one per
/// translation unit and device it launches from: rocSPARSE registers 111).
pub type HipScale = Capacities<4352, 16384, 256, 1024, 256, 16384, 256, 64, 4, 16384>;
