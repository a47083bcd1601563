//! HIP's (deprecated) driver contexts: `hipCtx*` and `hipDevicePrimaryCtx*`
//! (docs/hip-semantics.md §9). Not the execution contexts of `crate::context`.
//!
//! As in HIP, a context stands for a device: each device has one context, which is its primary
//! context and also what `hipCtxCreate` hands out for it, so every context is bound to its
//! device. Each thread keeps a stack of contexts; making a context current (create, push, set,
//! or a pop that uncovers one) makes its device the thread's device, and with an empty stack
//! the current context is that of the thread's device. Destroying a context pops it when it is
//! on top of the caller's stack; the device stays.
//!
//! The primary context counts its retains (`hipDevicePrimaryCtxRetain`/`Release`): it is
//! active while retained, and its flags can be set only while it is not
//! (`hipErrorContextAlreadyInUse`, HIP's answer). `hipDevicePrimaryCtxReset` resets the device
//! as `hipDeviceReset` does.
//!
//! Where HIP 5.2 answers `hipErrorNotSupported` (`hipCtxGetApiVersion`, `hipCtxGetFlags`,
//! `hipCtxSynchronize`, the cache and shared-memory settings), aqueduct does what HIP's header
//! documents: API version 4, the device's flags, a device synchronisation, and hints accepted
//! and ignored.

use std::cell::RefCell;
use std::ffi::{c_int, c_uint};
use std::sync::atomic::{AtomicU32, Ordering};

use aqueduct::MAX_DEVICES;

use crate::device::{checked_device, hipDeviceReset, hipDeviceSynchronize, hipSetDevice};
use crate::device_query::{device_flags, hipDeviceGetCacheConfig, hipDeviceGetSharedMemConfig};
use crate::error::{api, status, HipResult, CONTEXT_ALREADY_IN_USE, INVALID_CONTEXT, INVALID_DEVICE, INVALID_VALUE};
use crate::global::{global, Global};
use crate::peer::{hipDeviceDisablePeerAccess, hipDeviceEnablePeerAccess};
use crate::{handle, put, Handle};

/// Tag in the top 16 bits of a context handle; the low bits are the device + 1.
const CTX_TAG: u64 = 0xc7c7 << 48;
const TAG_MASK: u64 = 0xffff << 48;

/// The context of `device`.
pub(crate) fn context(device: u32) -> Handle {
    handle(CTX_TAG | (u64::from(device) + 1))
}

/// The device of context `ctx`; `None` for NULL, values never issued and devices that do not
/// exist.
fn device_of(g: &Global, ctx: Handle) -> Option<u32> {
    let raw = ctx as usize as u64;
    if raw & TAG_MASK != CTX_TAG {
        return None;
    }
    let d = (raw & !TAG_MASK).wrapping_sub(1);
    u32::try_from(d).ok().filter(|&d| d < g.rt.device_count().unwrap_or(0))
}

std::thread_local! {
    /// The calling thread's context stack (devices; the top is last).
    static STACK: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
}

fn stack<T>(f: impl FnOnce(&mut Vec<u32>) -> T) -> HipResult<T> {
    STACK.try_with(|s| f(&mut s.borrow_mut())).map_err(|_| INVALID_CONTEXT)
}

/// The device of the calling thread's current context: the top of its stack, else its device.
fn current(g: &Global) -> HipResult<u32> {
    match stack(|s| s.last().copied())? {
        Some(d) => Ok(d),
        None => Ok(g.rt.device()?),
    }
}

/// Makes `device` the calling thread's device.
fn make_current(device: u32) -> HipResult {
    status(hipSetDevice(device as c_int))
}

/// Runs `f` with `device` as the calling thread's device, then restores the thread's device.
fn on_device(g: &Global, device: u32, f: impl FnOnce() -> i32) -> HipResult {
    let before = g.rt.device()?;
    if before == device {
        return status(f());
    }
    make_current(device)?;
    let r = status(f());
    make_current(before)?;
    r
}

/// `hipCtxCreate`: the context of `device`, pushed onto the caller's stack and made current; a
/// device that does not exist is `hipErrorInvalidValue` (HIP's answer). The flags are accepted
/// and not kept, as HIP does (scheduling flags belong to the device: `hipSetDeviceFlags`).
///
/// # Safety
/// `ctx` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipCtxCreate(ctx: *mut Handle, _flags: c_uint, device: c_int) -> i32 {
    api(|| {
        let g = global()?;
        if ctx.is_null() {
            return Err(INVALID_VALUE);
        }
        let d = checked_device(g, device).map_err(|_| INVALID_VALUE)?;
        stack(|s| s.push(d))?;
        make_current(d)?;
        // SAFETY: the caller's contract.
        unsafe { put(ctx, context(d)) }
    })
}

/// `hipCtxDestroy`: pops `ctx` if it is on top of the caller's stack (the device uncovered
/// becomes current); NULL and other values are `hipErrorInvalidValue`.
#[no_mangle]
pub extern "C" fn hipCtxDestroy(ctx: Handle) -> i32 {
    api(|| {
        let g = global()?;
        let d = device_of(g, ctx).ok_or(INVALID_VALUE)?;
        let uncovered = stack(|s| {
            if s.last() == Some(&d) {
                s.pop();
                s.last().copied()
            } else {
                None
            }
        })?;
        if let Some(next) = uncovered {
            make_current(next)?;
        }
        Ok(())
    })
}

/// `hipCtxPopCurrent`: an empty stack is `hipErrorInvalidContext`; `ctx` may be NULL.
///
/// # Safety
/// `ctx` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipCtxPopCurrent(ctx: *mut Handle) -> i32 {
    api(|| {
        global()?;
        let (popped, next) = stack(|s| (s.pop(), s.last().copied()))?;
        let popped = popped.ok_or(INVALID_CONTEXT)?;
        if let Some(next) = next {
            make_current(next)?;
        }
        if !ctx.is_null() {
            // SAFETY: the caller's contract.
            unsafe { put(ctx, context(popped))? };
        }
        Ok(())
    })
}

/// `hipCtxPushCurrent`: NULL and values that are no context are `hipErrorInvalidContext`.
#[no_mangle]
pub extern "C" fn hipCtxPushCurrent(ctx: Handle) -> i32 {
    api(|| {
        let g = global()?;
        let d = device_of(g, ctx).ok_or(INVALID_CONTEXT)?;
        stack(|s| s.push(d))?;
        make_current(d)
    })
}

/// `hipCtxSetCurrent`: replaces the top of the caller's stack (pushes onto an empty one); NULL
/// pops the top, if any.
#[no_mangle]
pub extern "C" fn hipCtxSetCurrent(ctx: Handle) -> i32 {
    api(|| {
        let g = global()?;
        if ctx.is_null() {
            let next = stack(|s| {
                s.pop();
                s.last().copied()
            })?;
            return next.map_or(Ok(()), make_current);
        }
        let d = device_of(g, ctx).ok_or(INVALID_CONTEXT)?;
        stack(|s| {
            s.pop();
            s.push(d);
        })?;
        make_current(d)
    })
}

/// `hipCtxGetCurrent`: the top of the caller's stack, else the context of its device.
///
/// # Safety
/// `ctx` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipCtxGetCurrent(ctx: *mut Handle) -> i32 {
    api(|| {
        let g = global()?;
        if ctx.is_null() {
            return Err(INVALID_VALUE);
        }
        let d = current(g)?;
        // SAFETY: the caller's contract.
        unsafe { put(ctx, context(d)) }
    })
}

/// `hipCtxGetDevice`: the device of the current context.
///
/// # Safety
/// `device` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipCtxGetDevice(device: *mut c_int) -> i32 {
    api(|| {
        let g = global()?;
        if device.is_null() {
            return Err(INVALID_VALUE);
        }
        let d = current(g)?;
        // SAFETY: the caller's contract.
        unsafe { put(device, d as c_int) }
    })
}

/// `hipCtxGetApiVersion`: 4, as HIP's header documents; `ctx` may be NULL (the current
/// context); a value that is no context is `hipErrorInvalidContext`.
///
/// # Safety
/// `version` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipCtxGetApiVersion(ctx: Handle, version: *mut c_int) -> i32 {
    api(|| {
        let g = global()?;
        if version.is_null() {
            return Err(INVALID_VALUE);
        }
        if !ctx.is_null() && device_of(g, ctx).is_none() {
            return Err(INVALID_CONTEXT);
        }
        // SAFETY: the caller's contract.
        unsafe { put(version, 4) }
    })
}

/// `hipCtxGetCacheConfig`: as `hipDeviceGetCacheConfig`.
///
/// # Safety
/// `config` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipCtxGetCacheConfig(config: *mut c_int) -> i32 {
    // SAFETY: forwarded caller contract.
    unsafe { hipDeviceGetCacheConfig(config) }
}

/// `hipCtxSetCacheConfig`: a hint AMD devices ignore; accepted.
#[no_mangle]
pub extern "C" fn hipCtxSetCacheConfig(config: c_int) -> i32 {
    crate::device_query::hipDeviceSetCacheConfig(config)
}

/// `hipCtxGetSharedMemConfig`: as `hipDeviceGetSharedMemConfig`.
///
/// # Safety
/// `config` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipCtxGetSharedMemConfig(config: *mut c_int) -> i32 {
    // SAFETY: forwarded caller contract.
    unsafe { hipDeviceGetSharedMemConfig(config) }
}

/// `hipCtxSetSharedMemConfig`: a hint AMD devices ignore; accepted.
#[no_mangle]
pub extern "C" fn hipCtxSetSharedMemConfig(config: c_int) -> i32 {
    crate::device_query::hipDeviceSetSharedMemConfig(config)
}

/// `hipCtxSynchronize`: `hipDeviceSynchronize` on the current context's device.
#[no_mangle]
pub extern "C" fn hipCtxSynchronize() -> i32 {
    api(|| {
        let g = global()?;
        on_device(g, current(g)?, || hipDeviceSynchronize())
    })
}

/// `hipCtxGetFlags`: the flags of the current context's device (`hipGetDeviceFlags`).
///
/// # Safety
/// `flags` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipCtxGetFlags(flags: *mut c_uint) -> i32 {
    api(|| {
        let g = global()?;
        if flags.is_null() {
            return Err(INVALID_VALUE);
        }
        let f = device_flags(current(g)?);
        // SAFETY: the caller's contract.
        unsafe { put(flags, f) }
    })
}

/// `hipCtxEnablePeerAccess`: `hipDeviceEnablePeerAccess` of the peer context's device from the
/// current context's; a value that is no context is `hipErrorInvalidValue`.
#[no_mangle]
pub extern "C" fn hipCtxEnablePeerAccess(peer: Handle, flags: c_uint) -> i32 {
    api(|| {
        let g = global()?;
        let p = device_of(g, peer).ok_or(INVALID_VALUE)?;
        on_device(g, current(g)?, || hipDeviceEnablePeerAccess(p as c_int, flags))
    })
}

/// `hipCtxDisablePeerAccess`: as `hipDeviceDisablePeerAccess`.
#[no_mangle]
pub extern "C" fn hipCtxDisablePeerAccess(peer: Handle) -> i32 {
    api(|| {
        let g = global()?;
        let p = device_of(g, peer).ok_or(INVALID_VALUE)?;
        on_device(g, current(g)?, || hipDeviceDisablePeerAccess(p as c_int))
    })
}

/// Retains of each device's primary context.
static RETAINS: [AtomicU32; MAX_DEVICES] = [const { AtomicU32::new(0) }; MAX_DEVICES];
/// Flags of each device's primary context.
static PRIMARY_FLAGS: [AtomicU32; MAX_DEVICES] = [const { AtomicU32::new(0) }; MAX_DEVICES];

/// The retain count and flags of `device`'s primary context.
fn primary(device: u32) -> HipResult<(&'static AtomicU32, &'static AtomicU32)> {
    let i = device as usize;
    Ok((RETAINS.get(i).ok_or(INVALID_DEVICE)?, PRIMARY_FLAGS.get(i).ok_or(INVALID_DEVICE)?))
}

/// Every flag bit a primary context accepts (`hipSetDeviceFlags`'s).
const PRIMARY_FLAG_BITS: c_uint = 0x7 | 0x8 | 0x16;

/// `hipDevicePrimaryCtxGetState`: the primary context's flags, and 1 while it is retained.
///
/// # Safety
/// Each pointer is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipDevicePrimaryCtxGetState(device: c_int, flags: *mut c_uint, active: *mut c_int) -> i32 {
    api(|| {
        let g = global()?;
        let (retains, f) = primary(checked_device(g, device)?)?;
        if flags.is_null() || active.is_null() {
            return Err(INVALID_VALUE);
        }
        // Ordering: independent counters; no other memory is published with them.
        let (f, on) = (f.load(Ordering::Relaxed), retains.load(Ordering::Relaxed) > 0);
        // SAFETY: the caller's contract.
        unsafe {
            put(flags, f)?;
            put(active, c_int::from(on))
        }
    })
}

/// `hipDevicePrimaryCtxRetain`: the device's context, retained once more.
///
/// # Safety
/// `ctx` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipDevicePrimaryCtxRetain(ctx: *mut Handle, device: c_int) -> i32 {
    api(|| {
        let g = global()?;
        if ctx.is_null() {
            return Err(INVALID_VALUE);
        }
        let d = checked_device(g, device)?;
        // Ordering: as in `hipDevicePrimaryCtxGetState`.
        primary(d)?.0.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract.
        unsafe { put(ctx, context(d)) }
    })
}

/// `hipDevicePrimaryCtxRelease`: one retain fewer (never below none; HIP answers success for a
/// release without a retain too).
#[no_mangle]
pub extern "C" fn hipDevicePrimaryCtxRelease(device: c_int) -> i32 {
    api(|| {
        let g = global()?;
        let (retains, _) = primary(checked_device(g, device)?)?;
        // Ordering: as in `hipDevicePrimaryCtxGetState`.
        let _ = retains.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        Ok(())
    })
}

/// `hipDevicePrimaryCtxReset`: `hipDeviceReset` of `device` (its streams, events and memory
/// go); the primary context's flags return to 0.
#[no_mangle]
pub extern "C" fn hipDevicePrimaryCtxReset(device: c_int) -> i32 {
    api(|| {
        let g = global()?;
        let d = checked_device(g, device)?;
        on_device(g, d, || hipDeviceReset())?;
        // Ordering: as in `hipDevicePrimaryCtxGetState`.
        primary(d)?.1.store(0, Ordering::Relaxed);
        Ok(())
    })
}

/// `hipDevicePrimaryCtxSetFlags`: `hipErrorContextAlreadyInUse` while the primary context is
/// retained; unknown bits are `hipErrorInvalidValue`.
#[no_mangle]
pub extern "C" fn hipDevicePrimaryCtxSetFlags(device: c_int, flags: c_uint) -> i32 {
    api(|| {
        let g = global()?;
        let (retains, f) = primary(checked_device(g, device)?)?;
        // Ordering: as in `hipDevicePrimaryCtxGetState`.
        if retains.load(Ordering::Relaxed) > 0 {
            return Err(CONTEXT_ALREADY_IN_USE);
        }
        if flags & !PRIMARY_FLAG_BITS != 0 {
            return Err(INVALID_VALUE);
        }
        f.store(flags, Ordering::Relaxed);
        Ok(())
    })
}
