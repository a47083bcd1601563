//! The per-thread default stream ABI: the `_spt` functions a program calls when it is built
//! with `-fgpu-default-stream=per-thread` or `-DHIP_API_PER_THREAD_DEFAULT_STREAM` (HIP's
//! `amd_hip_runtime_pt_api.h` renames `hipMemcpy` to `hipMemcpy_spt` and so on, and clang's
//! `<<<>>>` calls `hipLaunchKernel_spt`) (docs/hip-semantics.md §2.1).
//!
//! Each behaves as its plain form with the null stream — and `hipStreamLegacy` too, as HIP
//! remaps both — meaning the calling thread's `hipStreamPerThread`, so two threads' default
//! work does not order against each other or against the legacy stream. The synchronous forms
//! (`hipMemcpy_spt` …) run on the per-thread stream and wait for it alone
//! ([`crate::memory::synchronously`]), after the check every synchronous copy makes.
//!
//! `hipEventRecord_spt` is here too: HIP 5.2's header renames `hipEventRecord` under
//! `HIP_API_PER_THREAD_DEFAULT_STREAM` although its library has no such function (aqueduct
//! exports it, in node `AQUEDUCT_0.1`).

use std::ffi::{c_int, c_uint, c_void};

use aqueduct::StreamHandle;

use crate::array::Array;
use crate::error::{api, status};
use crate::global::global;
use crate::memory::{memset_on, synchronously};
use crate::pitched::{memcpy_3d, memset_2d, memset_3d, Extent, Memcpy3DParms, Order, PitchedPtr};
use crate::{handle, Dim3, Handle};

/// `stream` as the `_spt` functions read it: the null stream and `hipStreamLegacy` are the
/// calling thread's per-thread stream.
fn per_thread(stream: Handle) -> Handle {
    let raw = stream as usize as u64;
    if raw == StreamHandle::NULL.0 || raw == StreamHandle::LEGACY.0 {
        handle(StreamHandle::PER_THREAD.0)
    } else {
        stream
    }
}

/// The synchronous forms' stream.
const PT: StreamHandle = StreamHandle::PER_THREAD;

/// `hipStreamSynchronize_spt`.
#[no_mangle]
pub extern "C" fn hipStreamSynchronize_spt(stream: Handle) -> i32 {
    crate::stream::hipStreamSynchronize(per_thread(stream))
}

/// `hipStreamQuery_spt`.
#[no_mangle]
pub extern "C" fn hipStreamQuery_spt(stream: Handle) -> i32 {
    crate::stream::hipStreamQuery(per_thread(stream))
}

/// `hipStreamGetFlags_spt`: the null stream is the per-thread stream (flags 0), not
/// `hipErrorInvalidValue` as for `hipStreamGetFlags`.
///
/// # Safety
/// `flags` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipStreamGetFlags_spt(stream: Handle, flags: *mut c_uint) -> i32 {
    // SAFETY: forwarded caller contract.
    unsafe { crate::stream::hipStreamGetFlags(per_thread(stream), flags) }
}

/// `hipStreamGetPriority_spt`.
///
/// # Safety
/// `priority` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipStreamGetPriority_spt(stream: Handle, priority: *mut c_int) -> i32 {
    // SAFETY: forwarded caller contract.
    unsafe { crate::stream::hipStreamGetPriority(per_thread(stream), priority) }
}

/// `hipStreamWaitEvent_spt`.
#[no_mangle]
pub extern "C" fn hipStreamWaitEvent_spt(stream: Handle, event: Handle, flags: c_uint) -> i32 {
    crate::stream::hipStreamWaitEvent(per_thread(stream), event, flags)
}

/// `hipEventRecord_spt` (the function HIP 5.2's header names; see the module docs).
#[no_mangle]
pub extern "C" fn hipEventRecord_spt(event: Handle, stream: Handle) -> i32 {
    crate::stream::hipEventRecord(event, per_thread(stream))
}

/// `hipLaunchKernel_spt`: `hipLaunchKernel` on the per-thread stream.
///
/// # Safety
/// As `hipLaunchKernel`.
#[no_mangle]
pub unsafe extern "C" fn hipLaunchKernel_spt(
    function: *const c_void,
    grid: Dim3,
    block: Dim3,
    args: *mut *mut c_void,
    shared_mem: usize,
    stream: Handle,
) -> i32 {
    // SAFETY: forwarded caller contract.
    unsafe { crate::launch::hipLaunchKernel(function, grid, block, args, shared_mem, per_thread(stream)) }
}

/// `hipMemcpyAsync_spt`.
///
/// # Safety
/// As `hipMemcpyAsync`.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyAsync_spt(
    dst: *mut c_void,
    src: *const c_void,
    bytes: usize,
    kind: c_uint,
    stream: Handle,
) -> i32 {
    // SAFETY: forwarded caller contract.
    unsafe { crate::memory::hipMemcpyAsync(dst, src, bytes, kind, per_thread(stream)) }
}

/// `hipMemcpy_spt`: `hipMemcpy` on the per-thread stream.
///
/// # Safety
/// As `hipMemcpy`.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpy_spt(dst: *mut c_void, src: *const c_void, bytes: usize, kind: c_uint) -> i32 {
    api(|| {
        synchronously(global()?, PT, |s| {
            // SAFETY: forwarded caller contract.
            status(unsafe { crate::memory::hipMemcpyAsync(dst, src, bytes, kind, s) })
        })
    })
}

/// `hipMemcpy2D_spt`.
///
/// # Safety
/// As `hipMemcpy2D`.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpy2D_spt(
    dst: *mut c_void,
    dpitch: usize,
    src: *const c_void,
    spitch: usize,
    width: usize,
    height: usize,
    kind: c_uint,
) -> i32 {
    api(|| {
        synchronously(global()?, PT, |s| {
            // SAFETY: forwarded caller contract.
            status(unsafe { crate::memory::hipMemcpy2DAsync(dst, dpitch, src, spitch, width, height, kind, s) })
        })
    })
}

/// `hipMemcpy3D_spt`.
///
/// # Safety
/// As `hipMemcpy3D`.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpy3D_spt(p: *const Memcpy3DParms) -> i32 {
    // SAFETY: forwarded caller contract.
    api(|| unsafe { memcpy_3d(Order::Sync(PT), p) })
}

/// `hipMemcpyToSymbol_spt`.
///
/// # Safety
/// As `hipMemcpyToSymbol`.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyToSymbol_spt(
    symbol: *const c_void,
    src: *const c_void,
    bytes: usize,
    offset: usize,
    kind: c_uint,
) -> i32 {
    api(|| {
        synchronously(global()?, PT, |s| {
            // SAFETY: forwarded caller contract.
            status(unsafe { crate::register::hipMemcpyToSymbolAsync(symbol, src, bytes, offset, kind, s) })
        })
    })
}

/// `hipMemcpyFromSymbol_spt`.
///
/// # Safety
/// As `hipMemcpyFromSymbol`.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyFromSymbol_spt(
    dst: *mut c_void,
    symbol: *const c_void,
    bytes: usize,
    offset: usize,
    kind: c_uint,
) -> i32 {
    api(|| {
        synchronously(global()?, PT, |s| {
            // SAFETY: forwarded caller contract.
            status(unsafe { crate::register::hipMemcpyFromSymbolAsync(dst, symbol, bytes, offset, kind, s) })
        })
    })
}

/// `hipMemset_spt`.
///
/// # Safety
/// As `hipMemset`.
#[no_mangle]
pub unsafe extern "C" fn hipMemset_spt(dst: *mut c_void, value: c_int, bytes: usize) -> i32 {
    api(|| synchronously(global()?, PT, |s| memset_on(dst, u32::from(value as u8), 1, bytes, s)))
}

/// `hipMemset2D_spt`.
///
/// # Safety
/// As `hipMemset2D`.
#[no_mangle]
pub unsafe extern "C" fn hipMemset2D_spt(
    dst: *mut c_void,
    pitch: usize,
    value: c_int,
    width: usize,
    height: usize,
) -> i32 {
    api(|| memset_2d(Order::Sync(PT), dst, pitch, value, width, height))
}

/// `hipMemset3D_spt`.
///
/// # Safety
/// As `hipMemset3D`.
#[no_mangle]
pub unsafe extern "C" fn hipMemset3D_spt(p: PitchedPtr, value: c_int, extent: Extent) -> i32 {
    api(|| memset_3d(Order::Sync(PT), p, value, extent))
}

/// `hipLaunchCooperativeKernel_spt`: `hipLaunchCooperativeKernel` on the per-thread stream.
///
/// # Safety
/// As `hipLaunchKernel`.
#[no_mangle]
pub unsafe extern "C" fn hipLaunchCooperativeKernel_spt(
    function: *const c_void,
    grid: Dim3,
    block: Dim3,
    args: *mut *mut c_void,
    shared_mem: u32,
    stream: Handle,
) -> i32 {
    // SAFETY: forwarded caller contract.
    unsafe {
        crate::launch_ext::hipLaunchCooperativeKernel(function, grid, block, args, shared_mem, per_thread(stream))
    }
}

/// `hipMemcpy2DToArray_spt`.
///
/// # Safety
/// As `hipMemcpy2DToArray`.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpy2DToArray_spt(
    dst: *mut Array,
    x: usize,
    y: usize,
    src: *const c_void,
    spitch: usize,
    width: usize,
    height: usize,
    kind: c_uint,
) -> i32 {
    api(|| {
        synchronously(global()?, PT, |s| {
            // SAFETY: forwarded caller contract.
            status(unsafe { crate::array::hipMemcpy2DToArrayAsync(dst, x, y, src, spitch, width, height, kind, s) })
        })
    })
}

/// `hipMemcpy2DFromArray_spt`.
///
/// # Safety
/// As `hipMemcpy2DFromArray`.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpy2DFromArray_spt(
    dst: *mut c_void,
    dpitch: usize,
    src: *const Array,
    x: usize,
    y: usize,
    width: usize,
    height: usize,
    kind: c_uint,
) -> i32 {
    api(|| {
        synchronously(global()?, PT, |s| {
            // SAFETY: forwarded caller contract.
            status(unsafe { crate::array::hipMemcpy2DFromArrayAsync(dst, dpitch, src, x, y, width, height, kind, s) })
        })
    })
}
