//! # aqueduct
//!
//! A GPU command-stream runtime for AMD GPUs with HIP's stream semantics, `no_std` and without
//! heap allocation.
//!
//! ## Layers
//!
//! - [`Runtime`] (`runtime`): streams, events, the null stream's implicit synchronisation,
//!   per-thread streams, device reset. It validates every handle and argument (returning HIP's
//!   error numbers, [`Error`]) and turns each stream operation into AQL packets.
//! - [`aql`]: the 64-byte packet layouts, the one ring publish protocol ([`aql::AqlRing`]) and
//!   the one packet-processing step ([`aql::step`]) shared by every consumer.
//! - [`signal`]: `amd_signal_t` and its handles.
//! - [`Backend`] (`backend`): what a hardware layer provides — queues, signals, memory,
//!   built-in copy/fill kernels, a host-function service, waits and a clock. Backends validate
//!   nothing about streams; they trust core's packets and report queue faults.
//! - [`loopback`]: a deterministic backend inside core that executes packets on the calling
//!   thread. Tests and firmware host tests run on it.
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
//! use aqueduct::{Runtime, SingleThread, StreamHandle};
//!
//! let mem: LoopbackMemory<40, 64, 256, 160, 65536> = LoopbackMemory::new();
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
