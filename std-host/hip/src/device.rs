//! Device management and error reporting: `hipGetDeviceCount` … `hipDeviceReset`,
//! `hipGetLastError`, `hipPeekAtLastError`, `hipGetErrorName`, `hipGetErrorString`.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, CString};
use std::sync::OnceLock;

use aqueduct::Backend;

use crate::error::{api, last_error, Hip, HipResult, CODES, INVALID_DEVICE, INVALID_VALUE};
use crate::global::{global, lock, Global};
use crate::put;

/// `hipGetDeviceCount`.
///
/// # Safety
/// `count` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipGetDeviceCount(count: *mut c_int) -> i32 {
    api(|| {
        let n = global()?.rt.device_count()?;
        // SAFETY: the caller's contract.
        unsafe { put(count, n as c_int) }
    })
}

/// `hipSetDevice` for the calling thread.
#[no_mangle]
pub extern "C" fn hipSetDevice(device: c_int) -> i32 {
    api(|| {
        let g = global()?;
        let device = u32::try_from(device).map_err(|_| INVALID_DEVICE)?;
        g.rt.set_device(device)?;
        crate::launch::note_current_device(device);
        Ok(())
    })
}

/// `hipGetDevice`: the calling thread's device.
///
/// # Safety
/// `device` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipGetDevice(device: *mut c_int) -> i32 {
    api(|| {
        let g = global()?;
        if device.is_null() {
            return Err(INVALID_VALUE);
        }
        let d = g.rt.device()?;
        // SAFETY: the caller's contract.
        unsafe { put(device, d as c_int) }
    })
}

/// `hipDeviceSynchronize`.
#[no_mangle]
pub extern "C" fn hipDeviceSynchronize() -> i32 {
    api(|| {
        let g = global()?;
        g.rt.device_synchronize()?;
        g.pools.release_on_sync(&*g.rt);
        Ok(())
    })
}

/// `hipDeviceReset`: waits for the current device, releases its streams and events, and frees
/// the memory allocated on it.
#[no_mangle]
pub extern "C" fn hipDeviceReset() -> i32 {
    api(|| {
        let g = global()?;
        let device = g.rt.device()?;
        g.rt.device_reset()?;
        crate::global::invalidate_launches();
        let mut allocs = lock(&g.allocs);
        g.pools.device_reset(&*g.rt, device, |addr| {
            allocs.remove(&addr);
        });
        allocs.retain(|&addr, &mut (_, d)| {
            if d == device {
                let _ = g.rt.backend().memory_free(addr);
            }
            d != device
        });
        Ok(())
    })
}

/// `device` as an index of an existing device; anything else is `hipErrorInvalidDevice`.
pub(crate) fn checked_device(g: &Global, device: c_int) -> HipResult<u32> {
    let count = g.rt.device_count()?;
    u32::try_from(device).ok().filter(|&d| d < count).ok_or(INVALID_DEVICE)
}

/// `hipDeviceGetStreamPriorityRange`: least 1, greatest -1; either pointer may be NULL.
///
/// # Safety
/// Each pointer is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipDeviceGetStreamPriorityRange(least: *mut c_int, greatest: *mut c_int) -> i32 {
    api(|| {
        let g = global()?;
        g.rt.device_count()?;
        let (lo, hi) = g.rt.stream_priority_range();
        // SAFETY: the caller's contract; NULL pointers are skipped.
        unsafe {
            if !least.is_null() {
                put(least, lo)?;
            }
            if !greatest.is_null() {
                put(greatest, hi)?;
            }
        }
        Ok(())
    })
}

/// `hipGetLastError`: the calling thread's last error, which is then reset to `hipSuccess`.
#[no_mangle]
pub extern "C" fn hipGetLastError() -> i32 {
    last_error(true)
}

/// `hipPeekAtLastError`: the calling thread's last error, left in place.
#[no_mangle]
pub extern "C" fn hipPeekAtLastError() -> i32 {
    last_error(false)
}

/// NUL-terminated copies of the name and description tables.
fn c_strings() -> &'static HashMap<i32, (CString, CString)> {
    static TABLE: OnceLock<HashMap<i32, (CString, CString)>> = OnceLock::new();
    TABLE.get_or_init(|| {
        CODES.iter().filter_map(|&(c, n, d)| Some((c, (CString::new(n).ok()?, CString::new(d).ok()?)))).collect()
    })
}

fn c_string(code: i32, pick: impl Fn(&(CString, CString)) -> &CString) -> *const c_char {
    let table = c_strings();
    let unknown = Hip(999).0;
    table.get(&code).or_else(|| table.get(&unknown)).map_or(c"unknown error".as_ptr(), |e| pick(e).as_ptr())
}

/// `hipGetErrorName`: `"hipErrorUnknown"` for codes HIP does not name.
#[no_mangle]
pub extern "C" fn hipGetErrorName(code: i32) -> *const c_char {
    c_string(code, |e| &e.0)
}

/// `hipDrvGetErrorName` (newer HIP, CUDA's `cuGetErrorName`): `*name` is HIP's name of `code`;
/// a code HIP does not name is `hipErrorInvalidValue` with `*name` NULL.
///
/// # Safety
/// `name` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipDrvGetErrorName(code: i32, name: *mut *const c_char) -> i32 {
    // SAFETY: the caller's contract.
    unsafe { drv_error_text(code, name, |e| &e.0) }
}

/// `hipDrvGetErrorString` (newer HIP, CUDA's `cuGetErrorString`): as `hipDrvGetErrorName`, with
/// the description.
///
/// # Safety
/// `text` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipDrvGetErrorString(code: i32, text: *mut *const c_char) -> i32 {
    // SAFETY: the caller's contract.
    unsafe { drv_error_text(code, text, |e| &e.1) }
}

/// # Safety
/// `out` is NULL or valid for writes.
unsafe fn drv_error_text(code: i32, out: *mut *const c_char, pick: impl Fn(&(CString, CString)) -> &CString) -> i32 {
    api(|| {
        if out.is_null() {
            return Err(INVALID_VALUE);
        }
        let text = c_strings().get(&code).map(|e| pick(e).as_ptr());
        // SAFETY: the caller's contract.
        unsafe { put(out, text.unwrap_or(std::ptr::null())) }?;
        text.map(|_| ()).ok_or(INVALID_VALUE)
    })
}

/// `hipGetErrorString`: `"unknown error"` for codes HIP does not name.
#[no_mangle]
pub extern "C" fn hipGetErrorString(code: i32) -> *const c_char {
    c_string(code, |e| &e.1)
}
