//! What a loaded module holds beside its functions: `hipModuleGetGlobal` (a variable's device
//! address and size, through core's `Runtime::module_variable`), `hipModuleLoadDataEx` (JIT
//! options, which a finished code object has no use for), `hipModuleGetTexRef` and
//! `__hipGetPCH`.
//!
//! `__hipGetPCH` answers no pre-compiled header. `hipModuleGetTexRef` finds the texture reference's variable as HIP does, then answers
//! `hipErrorNotSupported`: the emulated GPU cannot sample images (README, "HIP C ABI").

use std::ffi::{c_char, c_uint, c_void, CStr};

use crate::error::{api, HipResult, INVALID_SYMBOL, INVALID_VALUE, NOT_FOUND, NOT_SUPPORTED};
use crate::global::global;
use crate::launch::{hipModuleLoadData, module_index, module_variable};
use crate::{put, Handle};

/// A name from C: NULL or empty is `hipErrorInvalidValue`, and one that is not UTF-8 names
/// nothing (`hipErrorNotFound`).
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
unsafe fn name<'a>(name: *const c_char) -> HipResult<&'a str> {
    if name.is_null() {
        return Err(INVALID_VALUE);
    }
    // SAFETY: the caller's contract.
    let s = unsafe { CStr::from_ptr(name) }.to_str().map_err(|_| NOT_FOUND)?;
    if s.is_empty() {
        return Err(INVALID_VALUE);
    }
    Ok(s)
}

/// The device address and size of variable `name` of `module`; a name the code object does
/// not define is `hipErrorNotFound` (CUDA's `CUDA_ERROR_NOT_FOUND`).
fn variable(module: Handle, name: &str) -> HipResult<(u64, u64)> {
    let g = global()?;
    let i = module_index(module)?;
    module_variable(g, i, name).map_err(|e| if e == INVALID_SYMBOL { NOT_FOUND } else { e })
}

/// `hipModuleGetGlobal`: the device address and size of a module's variable; either
/// out-pointer may be NULL (it is then not written, as in CUDA), but not both.
///
/// # Safety
/// `dptr` and `bytes` are NULL or valid for writes; `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn hipModuleGetGlobal(
    dptr: *mut *mut c_void,
    bytes: *mut usize,
    module: Handle,
    name: *const c_char,
) -> i32 {
    api(|| {
        global()?;
        if dptr.is_null() && bytes.is_null() {
            return Err(INVALID_VALUE);
        }
        // SAFETY: the caller's contract.
        let name = unsafe { self::name(name) }?;
        let (addr, size) = variable(module, name)?;
        if !dptr.is_null() {
            // SAFETY: the caller's contract; non-null.
            unsafe { put(dptr, addr as usize as *mut c_void) }?;
        }
        if !bytes.is_null() {
            // SAFETY: the caller's contract; non-null.
            unsafe { put(bytes, size as usize) }?;
        }
        Ok(())
    })
}

/// `hipModuleLoadDataEx`: `hipModuleLoadData`; the JIT options (`hipJitOption`) are checked to
/// be readable and ignored, as HIP ignores them (the image is a finished code object).
///
/// # Safety
/// As `hipModuleLoadData`; `options` and `values` are NULL or hold `count` entries.
#[no_mangle]
pub unsafe extern "C" fn hipModuleLoadDataEx(
    module: *mut Handle,
    image: *const c_void,
    count: c_uint,
    options: *mut c_uint,
    values: *mut *mut c_void,
) -> i32 {
    if count > 0 && (options.is_null() || values.is_null()) {
        return api(|| {
            global()?;
            Err(INVALID_VALUE)
        });
    }
    // SAFETY: forwarded caller contract.
    unsafe { hipModuleLoadData(module, image) }
}

/// `hipModuleGetTexRef`: the texture reference `name` of `module`: NULL arguments are
/// `hipErrorInvalidValue`, a name the code object lacks `hipErrorNotFound`, and one it has
/// `hipErrorNotSupported` (no texture sampling on this device).
///
/// # Safety
/// `tex_ref` is NULL or valid for writes; `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn hipModuleGetTexRef(tex_ref: *mut *mut c_void, module: Handle, name: *const c_char) -> i32 {
    api(|| {
        global()?;
        if tex_ref.is_null() {
            return Err(INVALID_VALUE);
        }
        // SAFETY: the caller's contract.
        let name = unsafe { self::name(name) }?;
        variable(module, name)?;
        Err(NOT_SUPPORTED)
    })
}

/// `__hipGetPCH`: the pre-compiled header HIP's online compiler (`hiprtc`) uses; this library
/// carries none, so NULL and 0 bytes.
///
/// # Safety
/// `pch` and `size` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn __hipGetPCH(pch: *mut *const c_char, size: *mut c_uint) {
    if !pch.is_null() {
        // SAFETY: the caller's contract; non-null.
        unsafe { pch.write(std::ptr::null()) };
    }
    if !size.is_null() {
        // SAFETY: the caller's contract; non-null.
        unsafe { size.write(0) };
    }
}
