//! Capacities in one place: the [`Config`] a [`Runtime`](crate::Runtime), a
//! [`Loopback`](crate::loopback::Loopback) device and [`MemPools`](crate::mempool::MemPools) are
//! built with.
//!
//! Every table of core is a fixed-capacity array (no heap), and its size comes from one
//! configuration type, so a firmware image picks small tables and a std host large ones without
//! threading a list of const generics through every `impl`. [`Capacities`] is the configuration
//! type: its const parameters are the table sizes, each with a default, and the named
//! configurations below are aliases of it. The loopback's and the pools' sizes are part of it
//! too (`LoopbackMemory<config::Default>`); a runtime and the loopback it runs on may use
//! different configurations (tests size the device apart from the runtime).
//!
//! No operation costs more because a capacity is larger: handles are validated in O(1), free
//! slots come from free lists, host-side lists grow with what is live (a stream-table scan stops
//! at the highest slot ever used), and graph planning touches only the graph's own nodes.

use crate::pool::QueueSlot;
pub use crate::slot::{Bytes, FixedVec, Slot, Table, MAX_DEVICES};
use crate::slots::thread::ThreadSlot;
#[cfg(feature = "capture")]
use crate::slots::{capture::CaptureSlot, context::ContextSlot, graph::ExecSlot, graph::GraphSlot};
use crate::slots::{event::EventSlot, host_signal::HostSignalSlot, module::ModuleSlot, stream::StreamSlot};

/// The capacities of a runtime, of a loopback device and of the memory pools.
///
/// Implemented by [`Capacities`]; the associated types are its tables, the constants the limits
/// that are not tables. The loopback's and the pools' tables are generic over their slot type,
/// which stays private to its module.
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

    /// Queues of a loopback device, one entry each.
    type LoopbackQueues<T: Slot>: Table<T>;
    /// Packets per loopback queue (a power of two), one entry each.
    type LoopbackRing<T: Slot>: Table<T>;
    /// Kernel-argument bytes each loopback ring slot carries.
    type LoopbackKernarg: Bytes;
    /// Signals of a loopback device, one entry each.
    type LoopbackSignals<T: Slot>: Table<T>;
    /// Allocatable bytes of a loopback device.
    type LoopbackHeap: Bytes;
    /// Entries of a loopback device's trace, one entry each (0: the device records nothing and
    /// counts every entry as dropped).
    type LoopbackTrace<T: Slot>: Table<T>;
    /// Memory pools, one entry each.
    type Pools<T: Slot>: Table<T>;
    /// Blocks of backend memory the pools hold, over all pools.
    type PoolBlocks<T>: FixedVec<T>;
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
/// | `LQ` | loopback: queues |
/// | `LR` | loopback: packets per queue (a power of two) |
/// | `LK` | loopback: kernel-argument bytes per packet |
/// | `LS` | loopback: signals |
/// | `LH` | loopback: heap bytes |
/// | `P` | memory pools |
/// | `PB` | memory-pool blocks (all pools) |
/// | `LT` | loopback: trace entries |
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
    const LQ: usize = 40,
    const LR: usize = 64,
    const LK: usize = 256,
    const LS: usize = 160,
    const LH: usize = 65536,
    const P: usize = 16,
    const PB: usize = 256,
    const LT: usize = 256,
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
        const LQ: usize,
        const LR: usize,
        const LK: usize,
        const LS: usize,
        const LH: usize,
        const P: usize,
        const PB: usize,
        const LT: usize,
    > Config for Capacities<S, E, T, H, G, N, X, Q, B, M, LQ, LR, LK, LS, LH, P, PB, LT>
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
    type LoopbackQueues<Ts: Slot> = [Ts; LQ];
    type LoopbackRing<Ts: Slot> = [Ts; LR];
    type LoopbackKernarg = [u8; LK];
    type LoopbackSignals<Ts: Slot> = [Ts; LS];
    type LoopbackHeap = [u8; LH];
    type LoopbackTrace<Ts: Slot> = [Ts; LT];
    type Pools<Ts: Slot> = [Ts; P];
    type PoolBlocks<Ts> = heapless::Vec<Ts, PB>;
}

/// The default: 32 streams, 64 events, 8 threads, 64 host functions in flight, 4 graphs of 32
/// nodes, 2 executables, 40 queue slots, 16 hardware queues per device, 8 code objects (a small
/// host with few streams, each on its own queue; HIP-scale hosts use [`HipScale`], whose budget
/// is 4); a loopback device of 40 queues of 64 packets with 256 kernel-argument bytes each
/// ([`DEFAULT_KERNARG_BYTES`](crate::loopback::DEFAULT_KERNARG_BYTES)), 160 signals and 64 KiB of
/// heap and a trace of 256 entries; 16 memory pools over 256 blocks.
pub type Default = Capacities;

/// A small firmware image: 16 streams, 32 events, 2 threads, 8 host functions, 1 graph of 8
/// nodes, 1 executable, 8 queue slots, 4 hardware queues per device, 2 code objects (the
/// loopback and the pools as in [`Default`](type@Default)).
pub type Firmware = Capacities<16, 32, 2, 8, 1, 8, 1, 8, 4, 2>;

/// HIP scale, for the std host and the HIP library: 4352 stream slots (4096 streams besides the
/// null and per-thread ones), 16384 events, 256 threads, 1024 host functions in flight, 256
/// graphs of up to 16384 nodes, 256 executables, 64 queue slots, 4 hardware queues per device,
/// 16384 code objects (a process loads its fat binaries' code objects lazily, one per
/// translation unit and device it launches from: rocSPARSE registers 111); the loopback as in
/// [`Default`](type@Default); 64 memory pools over 1024 blocks (the HIP library's).
pub type HipScale =
    Capacities<4352, 16384, 256, 1024, 256, 16384, 256, 64, 4, 16384, 40, 64, 256, 160, 65536, 64, 1024>;
