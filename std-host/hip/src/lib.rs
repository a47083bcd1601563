//! # aqueduct-hip
//!
//! HIP's C ABI over aqueduct: `libaqueduct_hip.so` / `libaqueduct_hip.a` export the stream,
//! event, capture, graph, memory and launch functions of `hip/hip_runtime_api.h` (HIP 5.2's
//! header, Debian's `libamdhip64-dev`) with HIP's signatures, types and error values, plus the
//! additions of `include/aqueduct_hip.h` (newer HIP functions, host kernels, execution contexts,
//! conditional graph nodes).
//! A C program written against HIP links against this library instead of `libamdhip64`.
//!
//! ## Layers, and who validates what
//!
//! Modules import one way, lowest first (`scripts/check-layers std-host/hip/src` fails on a
//! cycle; CI runs it):
//!
//! 0. Leaves: `error` (`hipError_t` names and strings, the calling thread's last error, and the
//!    one boundary every exported function goes through: panics become `hipErrorUnknown`,
//!    nothing unwinds into C), `code_objects` (the module table's types: modules, functions,
//!    host kernels, what a kernel's metadata says), `api_names`, `half`, `interop`.
//! 1. `global`: one process-wide core [`aqueduct::Runtime`] over the backend `AQUEDUCT_BACKEND`
//!    selects (the emulated GPU by default), created on first use, with std-host's thread keys,
//!    and the tables the C layer keeps beside core (allocations, modules, functions, host
//!    kernels, graph-node handles), the launch epoch and buffer ids.
//! 2. What an address can be, and device state: `host_register` (registered host memory),
//!    `virtual_memory` (reserved ranges, physical handles, mappings), `ipc_opened` (memory
//!    opened from other processes), `properties` (device
//!    properties and limits), `hostcall`, `context` (aqueduct's execution contexts),
//!    `stream_attr` (stream attributes, and the checks of launch attributes).
//! 3. `memory` (allocation, the one address lookup over allocations, registrations, mappings
//!    and images; copies and fills) and `module` (loading code objects, their functions and
//!    variables).
//! 4. Over memory: `managed`, `peer` (several GPUs), `ipc` (memory and event handles shared
//!    between processes); over modules: `rtc` (`hiprtc`,
//!    compiling with the installed clang-15).
//! 5. `register`: HIP's registration ABI (fat binaries, kernel handles, device variables,
//!    symbol copies), as hipcc-generated host code calls it.
//! 6. `launch` (host kernels, `hipLaunchKernel`, module launches, the `<<<>>>` call
//!    configuration) and `array` (arrays over linear memory).
//! 7. Over launches: `device`, `function` (kernel attributes and occupancy), `tracing` (the
//!    profiler, callbacks and names); `pitched` (2-D/3-D memory) and `texture` over arrays.
//! 8. `graph` (graphs built node by node, conditional nodes too, executables and their updates,
//!    over core's graphs) and `device_query`.
//! 9. `capture` (stream capture, into new or existing graphs) and `driver_context` (HIP's
//!    deprecated `hipCtx*` contexts).
//! 10. `stream` (streams and events), `mempool` (stream-ordered allocation over core's
//!     [`aqueduct::MemPools`]), `host_memory`.
//! 11. `launch_ext`: extended, cooperative and attributed launches.
//! 12. `per_thread`: the `_spt` forms over all of the above.
//!
//! This layer checks what only C has — NULL out-pointers, in the order HIP checks them —
//! converts handles, and passes everything else to core, whose errors already carry HIP's
//! numbers. What this machine cannot do (`texture` sampling, GL/external-memory `interop`, a
//! few of `virtual_memory`'s calls, `ipc` on the ROCr backend) is exported, checked, and
//! answered `hipErrorNotSupported`, each module saying why (README lists them).
//!
//! Handles are core's generational 64-bit values used as pointers (never 0, 1 or 2); graph
//! nodes, modules and functions get tagged indices into tables kept here. A destroyed or garbage
//! handle is answered by a table lookup, never dereferenced.

/// Exported functions this library cannot serve: each answers `hipErrorNotSupported` (after
/// creating the runtime, as every call does), never a silent success. README lists them, with
/// the reason.
macro_rules! not_supported {
    ($($(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),* $(,)?);)*) => {$(
        $(#[$doc])*
        #[no_mangle]
        pub extern "C" fn $name($($arg: $ty),*) -> i32 {
            $(let _ = $arg;)*
            crate::error::api(|| {
                crate::global::global()?;
                Err(crate::error::NOT_SUPPORTED)
            })
        }
    )*};
}

mod api_names;
mod array;
mod capture;
mod code_objects;
mod context;
mod device;
mod device_query;
mod driver_context;
mod error;
mod function;
mod global;
mod graph;
mod half;
mod host_memory;
mod host_register;
mod hostcall;
mod interop;
mod ipc;
mod ipc_opened;
mod launch;
mod launch_ext;
mod managed;
mod memory;
mod mempool;
mod module;
mod peer;
mod per_thread;
mod pitched;
mod properties;
mod register;
mod rtc;
mod stream;
mod stream_attr;
mod texture;
mod tracing;
mod virtual_memory;

use std::ffi::c_void;

use aqueduct::StreamHandle;

use error::{HipResult, INVALID_VALUE};

/// `hipStream_t`, `hipEvent_t`, `hipGraph_t` …: an opaque pointer.
type Handle = *mut c_void;

/// `dim3`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dim3 {
    /// x.
    pub x: u32,
    /// y.
    pub y: u32,
    /// z.
    pub z: u32,
}

/// The core stream handle behind a `hipStream_t`.
fn stream_of(s: Handle) -> StreamHandle {
    StreamHandle(s as usize as u64)
}

/// A core handle value as a C pointer.
fn handle(raw: u64) -> Handle {
    raw as usize as Handle
}

/// Writes `v` through a C out-pointer; NULL is `hipErrorInvalidValue`.
///
/// # Safety
/// `p` is NULL or valid for writing a `T`.
unsafe fn put<T>(p: *mut T, v: T) -> HipResult {
    if p.is_null() {
        return Err(INVALID_VALUE);
    }
    // SAFETY: non-null, and valid for writes by the caller's contract.
    unsafe { p.write(v) };
    Ok(())
}
