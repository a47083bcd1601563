//! # aqueduct
//!
//! A GPU command-stream runtime for AMD GPUs with HIP's stream semantics, `no_std` and without
//! heap allocation.
//!
//! ## Layers
//!
//! Every module is a layer and imports only from the layers listed before it (or from earlier
//! modules of its own layer): imports point one way, and `scripts/check-layers` checks that the
//! `use` graph of `core/src` has no cycle.
//!
//! 1. Foundations, importing nothing of core but [`error`]: `fmt` (the logging shim), [`error`]
//!    (HIP's error numbers), `sync` (the ring's atomics and slot memory, loom's under
//!    `cfg(loom)`), [`slot`] (the [`Slot`](slot::Slot) and [`Table`](slot::Table) traits every
//!    table is built from, and [`MAX_DEVICES`]), [`thread`] (thread keys and the raw lock),
//!    `table` (generational handles, validated in O(1)), and the value types [`stream`] and
//!    [`event`].
//! 2. AQL: [`aql`] (the 64-byte packet layouts, the one ring publish protocol
//!    [`aql::AqlRing`] and the one packet-processing step [`aql::step`] shared by every
//!    consumer), [`signal`] (`amd_signal_t` and its handles), [`floor`] (the packet floors the
//!    submit figures are judged against).
//! 3. [`conditional`]: conditional nodes on the device (the scheduler kernel a backend runs).
//! 4. [`Backend`] (`backend`): what a hardware layer provides — queues, signals, memory,
//!    built-in copy/fill kernels, code objects, a host-function service, waits and a clock.
//!    Backends validate nothing about streams; they trust core's packets and report queue
//!    faults. Over it: `live` (a signal a backend keeps live), [`host_calls`] (the host-function
//!    service's shared part), `host_array` (arrays in backend memory) and [`pool`] (the
//!    hardware-queue slots and the binding that lets streams publish without a lock).
//! 5. [`graph`] (the one graph model: nodes, planning into packets), then [`capture`] (capture's
//!    value types over graph nodes).
//! 6. The tables: [`slots`] (the runtime's slot types, one file per table), then [`config`]
//!    (the capacities: one [`Config`] names every table of the runtime, of the loopback device
//!    and of the memory pools).
//! 7. Tables sized by a [`Config`]: [`mempool`] (stream-ordered memory pools) and [`loopback`]
//!    (a deterministic backend inside core that executes packets on the calling thread; tests
//!    and firmware host tests run on it).
//! 8. [`Runtime`] (`runtime`): streams, events, the null stream's implicit synchronisation,
//!    per-thread streams, capture, graphs, contexts, code objects, device reset. It validates
//!    every handle and argument (returning HIP's error numbers, [`Error`]) and turns each stream
//!    operation into AQL packets. Inside it, `runtime/mod.rs` holds the runtime's state; each
//!    other file is one behaviour's `impl Runtime` and imports `mod.rs`, `submit.rs` (the one
//!    enqueue path) and, for graphs, `conditional.rs` below `graphs.rs` below `capture.rs` and
//!    `graph_update.rs`; `context.rs` builds on `stream.rs`. Nothing imports the other way.
//!
//! ## Memory ordering, in one place
//!
//! A producer reserves ring slots with an `AcqRel` `fetch_add` on the 64-bit write index, writes
//! each packet's body with plain stores and publishes its first dword with a `Release` store,
//! then (after a `SeqCst` fence) rings the doorbell with the index of the last packet. The
//! consumer loads the first dword with `Acquire`, runs the packet, decrements the completion
//! signal with `AcqRel`, stores INVALID back and advances the read index with `Release`; the
//! producer's `Acquire` load of the read index orders slot reuse after that. Host waiters load
//! signal values with `Acquire`. See [`aql`] and [`signal`] for the details.
//!
//! ## Quick start
//!
//! ```
//! use aqueduct::loopback::{Loopback, LoopbackMemory};
//! use aqueduct::{config, Runtime, SingleThread, StreamHandle};
//!
//! let mem: LoopbackMemory<config::Default> = LoopbackMemory::new();
//! let rt: Runtime<_, _> = Runtime::new(Loopback::new(&mem), SingleThread);
//! let s = rt.stream_create(0)?;
//! let buf = rt.malloc(64)?;
//! rt.memset_async(s, buf, 0xab, 1, 64)?;
//! rt.stream_synchronize(s)?;
//! // SAFETY: loopback device memory is host memory, and the fill has completed.
//! assert_eq!(unsafe { *(buf as usize as *const u8) }, 0xab);
//! rt.stream_destroy(s)?;
//! # Ok::<(), aqueduct::Error>(())
//! ```

#![no_std]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing))]

#[macro_use]
mod fmt;

pub mod aql;
pub mod backend;
pub mod capture;
pub mod conditional;
pub mod config;
pub mod error;
pub mod event;
pub mod floor;
pub mod graph;
mod host_array;
pub mod host_calls;
mod live;
pub mod loopback;
pub mod mempool;
pub mod pool;
pub mod runtime;
pub mod signal;
pub mod slot;
pub mod slots;
pub mod stream;
#[cfg(not(loom))]
mod sync;
#[cfg(loom)]
pub mod sync;
mod table;
pub mod thread;

pub use backend::{
    Backend, BuiltinKernel, DeviceInfo, HostFn, KernelSymbol, MemoryKind, QueueDesc, Timeout, VariableSymbol,
};
pub use capture::{CaptureInfo, CaptureMode, CaptureStatus, DepSet};
pub use config::{Capacities, Config, MAX_DEVICES};
pub use error::{Error, Result};
pub use event::{EventFlags, EventHandle};
pub use graph::{NodeId, NodeKind};
pub use mempool::{MemPools, PoolAttr, PoolHandle};
#[cfg(feature = "capture")]
pub use runtime::{ContextHandle, GraphExecHandle, GraphHandle};
pub use runtime::{KernelLaunch, ModuleHandle, Runtime, WaitValueOp};
pub use signal::{AmdSignal, SignalHandle};
pub use stream::{CuMask, Priority, StreamFlags, StreamHandle};
pub use table::Lookup;
pub use thread::{SingleThread, SpinRawMutex, ThreadKey, ThreadKeys};
