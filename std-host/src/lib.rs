//! # aqueduct-std
//!
//! The std host of aqueduct, in layers:
//!
//! - [`threads`]: thread keys from a thread-local (per-thread streams, capture modes) and the
//!   thread-exit hook that hands a finished thread's per-thread streams back to core.
//! - [`select`]: backend selection — kfd-direct on the real `/dev/kfd`, ROCr through `hsa-sys`
//!   (feature `rocr`), or kfd-direct on the emulated GPU — behind one [`select::AnyBackend`]
//!   that implements core's `Backend` trait, and the reasons a backend is unavailable.
//! - `rocr` (feature `rocr`): the ROCr backend.
//! - [`api`]: the idiomatic Rust API over core's runtime — [`Device`], [`Stream`], [`Event`],
//!   [`Graph`], [`GraphExec`], buffers and typed kernels — with RAII whose `Drop` never panics
//!   or blocks and whose errors are sticky on the device.
//! - [`cli`]: the subcommands of the `aqueduct` tool (`info`, `demo`, `bench`, `trace`);
//!   [`launcher`]: `aqueduct run`, which starts a program on the emulated GPU by preloading
//!   `libaqueduct_kfd_preload.so`.
//!
//! Who validates what: core validates every handle and argument; the backends trust core's
//! packets; this crate adds only ownership (each handle destroyed once, by its owner).

pub mod api;
pub mod cli;
pub mod launcher;
#[cfg(feature = "rocr")]
pub mod rocr;
pub mod select;
pub mod threads;

pub use api::{Device, DeviceBuffer, Dim3, Event, Graph, GraphExec, HostBuffer, Kernel, KernelArgs, Module, Stream};
pub use select::{AnyBackend, BackendKind, OpenOptions, Unavailable};

/// A clock rate in whole MHz, rounded to the nearest. Rates are measured (ROCr's is the slope
/// between two clock-counter samples some 100 µs apart, good to about 10^-3), so truncating
/// would print a 100 MHz clock measured at 99.97 MHz as 99.
pub(crate) fn rounded_mhz(hz: u64) -> u64 {
    hz.saturating_add(500_000) / 1_000_000
}
