//! Memory: allocation, copies and fills (hip-semantics.md §2.5).
//!
//! Copies between memory of this runtime (`hipMalloc`, `hipHostMalloc`) run on the device. The
//! device cannot reach pageable host memory (`malloc`, the stack), so a copy from or to it goes
//! through a pinned staging buffer in chunks, as HIP's pageable copies do, and completes before
//! the call returns (also for `hipMemcpyAsync`).

use std::ffi::{c_int, c_uint, c_void};

use aqueduct::{CaptureStatus, StreamHandle};

use crate::error::{api, HipResult, INVALID_MEMCPY_DIRECTION, INVALID_VALUE};
use crate::global::{global, lock, Global, STAGING_BYTES};
use crate::{put, stream_of, Handle};

/// `hipHostMallocCoherent` / `hipHostMallocNonCoherent`.
const HOST_MALLOC_COHERENT: c_uint = 0x4000_0000;
const HOST_MALLOC_NON_COHERENT: c_uint = 0x8000_0000;
/// Every `hipHostMalloc*` flag bit.
const HOST_MALLOC_FLAGS: c_uint = 0x1 | 0x2 | 0x4 | 0x2000_0000 | HOST_MALLOC_COHERENT | HOST_MALLOC_NON_COHERENT;

fn alloc(ptr: *mut *mut c_void, bytes: usize, host: bool) -> HipResult {
    let g = global()?;
    let device = g.rt.device()?;
    let addr = if bytes == 0 {
        // HIP gives NULL for a zero-byte request (after the capture checks an allocation makes).
        g.rt.free(0)?;
        0
    } else if host {
        g.rt.host_malloc(bytes)?
    } else {
        g.rt.malloc(bytes)?
    };
    if addr != 0 {
        lock(&g.allocs).insert(addr, (bytes as u64, device));
    }
    // SAFETY: `ptr` was checked non-null by the caller of this helper, which holds the C
    // contract that it is valid for writes.
    unsafe { put(ptr, addr as usize as *mut c_void) }
}

fn free(p: *mut c_void) -> HipResult {
    let g = global()?;
    let addr = p as usize as u64;
    g.rt.free(addr)?;
    lock(&g.allocs).remove(&addr);
    Ok(())
}

/// `hipMalloc`: zero bytes gives NULL.
///
/// # Safety
/// `ptr` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipMalloc(ptr: *mut *mut c_void, bytes: usize) -> i32 {
    api(|| {
        global()?;
        if ptr.is_null() {
            return Err(INVALID_VALUE);
        }
        alloc(ptr, bytes, false)
    })
}

/// `hipHostMalloc`: pinned host memory the device can reach.
///
/// # Safety
/// `ptr` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipHostMalloc(ptr: *mut *mut c_void, bytes: usize, flags: c_uint) -> i32 {
    api(|| {
        global()?;
        let both = HOST_MALLOC_COHERENT | HOST_MALLOC_NON_COHERENT;
        if ptr.is_null() || flags & !HOST_MALLOC_FLAGS != 0 || flags & both == both {
            return Err(INVALID_VALUE);
        }
        alloc(ptr, bytes, true)
    })
}

/// `hipFree`: NULL is a no-op; memory not from `hipMalloc` is `hipErrorInvalidValue`.
///
/// # Safety
/// No work still running uses the memory.
#[no_mangle]
pub unsafe extern "C" fn hipFree(ptr: *mut c_void) -> i32 {
    api(|| free(ptr))
}

/// `hipHostFree`.
///
/// # Safety
/// No work still running uses the memory.
#[no_mangle]
pub unsafe extern "C" fn hipHostFree(ptr: *mut c_void) -> i32 {
    api(|| free(ptr))
}

/// `hipMemcpyKind` values 0 (`HostToHost`) to 4 (`Default`).
fn check_kind(kind: c_uint) -> HipResult {
    if kind > 4 {
        return Err(INVALID_MEMCPY_DIRECTION);
    }
    Ok(())
}

/// Copies through the staging buffer when either side is pageable, running each device copy
/// with `copy(dst, src, bytes)` (which also synchronises). `Ok(false)` when both sides are
/// device-reachable and nothing was done.
fn staged(g: &Global, dst: u64, src: u64, bytes: u64, copy: impl Fn(u64, u64, u64) -> HipResult) -> HipResult<bool> {
    let (dst_dev, src_dev) = (g.is_device_reachable(dst, bytes), g.is_device_reachable(src, bytes));
    if dst_dev && src_dev {
        return Ok(false);
    }
    if !dst_dev && !src_dev {
        // SAFETY: both ranges are host memory the C caller handed us for this copy.
        unsafe { std::ptr::copy(src as usize as *const u8, dst as usize as *mut u8, bytes as usize) };
        return Ok(true);
    }
    let staging = lock(&g.staging);
    if *staging == 0 {
        return Err(INVALID_VALUE);
    }
    let mut off = 0;
    while off < bytes {
        let n = (bytes - off).min(STAGING_BYTES as u64);
        if src_dev {
            copy(*staging, src + off, n)?;
            // SAFETY: the staging buffer holds `n` bytes just written by the device copy, which
            // has completed; `dst + off` is the caller's host memory.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    *staging as usize as *const u8,
                    (dst + off) as usize as *mut u8,
                    n as usize,
                )
            };
        } else {
            // SAFETY: `src + off` is the caller's host memory; the staging buffer holds `n` bytes
            // and no device copy is using it (the lock is held and earlier copies completed).
            unsafe {
                std::ptr::copy_nonoverlapping(
                    (src + off) as usize as *const u8,
                    *staging as usize as *mut u8,
                    n as usize,
                )
            };
            copy(dst + off, *staging, n)?;
        }
        off += n;
    }
    Ok(true)
}

/// The check of synchronous copies: `hipErrorStreamCaptureImplicit` (and every capture
/// invalidated) while any capture is active. A fill of nothing on the null stream makes exactly
/// that check, and the null stream's own.
pub(crate) fn check_capturing(g: &Global) -> HipResult {
    Ok(g.rt.memset(1, 0, 0)?)
}

/// A synchronous copy on the null stream: device-reachable memory on the device, pageable
/// memory staged; complete on return.
pub(crate) fn memcpy_sync(g: &Global, d: u64, s: u64, n: u64) -> HipResult {
    // The capture check, the null-stream ordering and the NULL checks, with nothing to copy.
    g.rt.memcpy(d, s, 0)?;
    if !staged(g, d, s, n, |d, s, n| Ok(g.rt.memcpy(d, s, n)?))? {
        g.rt.memcpy(d, s, n)?;
    }
    Ok(())
}

/// `hipMemcpy`: synchronous; any active capture makes it `hipErrorStreamCaptureImplicit`.
///
/// # Safety
/// `dst` and `src` are valid for `bytes` bytes.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpy(dst: *mut c_void, src: *const c_void, bytes: usize, kind: c_uint) -> i32 {
    api(|| {
        let g = global()?;
        check_kind(kind)?;
        memcpy_sync(g, dst as usize as u64, src as usize as u64, bytes as u64)
    })
}

/// Copies on `stream`: device-reachable memory in stream order; pageable memory staged after
/// the stream's earlier work, complete on return. A capturing stream records the copy as is.
pub(crate) fn memcpy_on(g: &Global, stream: StreamHandle, d: u64, s: u64, n: u64) -> HipResult {
    // The stream's checks (stale, detached, invalidated capture) and the NULL checks.
    g.rt.memcpy_async(stream, d, s, 0)?;
    let reachable = g.is_device_reachable(d, n) && g.is_device_reachable(s, n);
    let capturing = g.rt.stream_is_capturing(stream).is_ok_and(|st| st != CaptureStatus::None);
    if reachable || capturing || n == 0 {
        return Ok(g.rt.memcpy_async(stream, d, s, n)?);
    }
    g.rt.stream_synchronize(stream)?;
    staged(g, d, s, n, |d, s, n| {
        g.rt.memcpy_async(stream, d, s, n)?;
        Ok(g.rt.stream_synchronize(stream)?)
    })?;
    Ok(())
}

/// `hipMemcpyAsync`.
///
/// # Safety
/// `dst` and `src` are valid for `bytes` bytes until the copy has run.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyAsync(
    dst: *mut c_void,
    src: *const c_void,
    bytes: usize,
    kind: c_uint,
    stream: Handle,
) -> i32 {
    api(|| {
        let g = global()?;
        check_kind(kind)?;
        memcpy_on(g, stream_of(stream), dst as usize as u64, src as usize as u64, bytes as u64)
    })
}

/// `hipMemcpyWithStream`: a copy on `stream` that has completed on return; as a synchronous
/// copy it is `hipErrorStreamCaptureImplicit` while any capture is active.
///
/// # Safety
/// `dst` and `src` are valid for `bytes` bytes.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyWithStream(
    dst: *mut c_void,
    src: *const c_void,
    bytes: usize,
    kind: c_uint,
    stream: Handle,
) -> i32 {
    api(|| {
        let g = global()?;
        check_kind(kind)?;
        let (d, s) = (dst as usize as u64, src as usize as u64);
        g.rt.memcpy(d, s, 0)?;
        let stream = stream_of(stream);
        memcpy_on(g, stream, d, s, bytes as u64)?;
        Ok(g.rt.stream_synchronize(stream)?)
    })
}

/// `hipMemset`: synchronous byte fill.
///
/// # Safety
/// `dst` is device-reachable memory of at least `bytes` bytes.
#[no_mangle]
pub unsafe extern "C" fn hipMemset(dst: *mut c_void, value: c_int, bytes: usize) -> i32 {
    api(|| Ok(global()?.rt.memset(dst as usize as u64, value as u8, bytes as u64)?))
}

/// `hipMemsetAsync`: byte fill in stream order.
///
/// # Safety
/// `dst` is device-reachable memory of at least `bytes` bytes.
#[no_mangle]
pub unsafe extern "C" fn hipMemsetAsync(dst: *mut c_void, value: c_int, bytes: usize, stream: Handle) -> i32 {
    api(|| {
        Ok(global()?.rt.memset_async(
            stream_of(stream),
            dst as usize as u64,
            u32::from(value as u8),
            1,
            bytes as u64,
        )?)
    })
}

/// `hipMemsetD32Async`: `count` 32-bit words in stream order.
///
/// # Safety
/// `dst` is device-reachable memory of at least `4 * count` bytes.
#[no_mangle]
pub unsafe extern "C" fn hipMemsetD32Async(dst: *mut c_void, value: c_int, count: usize, stream: Handle) -> i32 {
    api(|| Ok(global()?.rt.memset_async(stream_of(stream), dst as usize as u64, value as u32, 4, count as u64)?))
}

#[cfg(test)]
mod tests {
    #[test]
    fn host_malloc_flags_cover_hips() {
        assert_eq!(super::HOST_MALLOC_FLAGS, 0xe000_0007);
    }
}
