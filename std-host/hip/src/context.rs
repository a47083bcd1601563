//! Execution ("green") contexts (docs/hip-semantics.md §2.6): streams created in one are detached
//! when it is destroyed; later work on them answers `hipErrorStreamDetached`.

use std::ffi::{c_int, c_uint};

use aqueduct::ContextHandle;

use crate::error::{api, INVALID_DEVICE, INVALID_VALUE};
use crate::global::global;
use crate::{handle, put, Handle};

fn context_of(c: Handle) -> ContextHandle {
    ContextHandle(c as usize as u64)
}

/// `aqdExecCtxCreate`: a context owning every CU of `device`.
///
/// # Safety
/// `ctx` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn aqdExecCtxCreate(ctx: *mut Handle, device: c_int) -> i32 {
    api(|| {
        let g = global()?;
        if ctx.is_null() {
            return Err(INVALID_VALUE);
        }
        let device = u32::try_from(device).map_err(|_| INVALID_DEVICE)?;
        if device >= g.rt.device_count()? {
            return Err(INVALID_DEVICE);
        }
        // Core creates contexts on the calling thread's device: switch to `device` for the call.
        let current = g.rt.device()?;
        if device != current {
            g.rt.set_device(device)?;
        }
        let c = g.rt.context_create(&[]);
        if device != current {
            g.rt.set_device(current)?;
        }
        // SAFETY: the caller's contract.
        unsafe { put(ctx, handle(c?.0)) }
    })
}

/// `aqdExecCtxStreamCreate`: a stream owned by `ctx` (non-blocking towards the null stream).
///
/// # Safety
/// `stream` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn aqdExecCtxStreamCreate(
    ctx: Handle,
    stream: *mut Handle,
    flags: c_uint,
    priority: c_int,
) -> i32 {
    api(|| {
        let g = global()?;
        if stream.is_null() {
            return Err(INVALID_VALUE);
        }
        let s = g.rt.context_stream_create(context_of(ctx), flags, priority)?;
        // SAFETY: the caller's contract.
        unsafe { put(stream, handle(s.0)) }
    })
}

/// `aqdExecCtxDestroy`: detaches every stream of the context.
#[no_mangle]
pub extern "C" fn aqdExecCtxDestroy(ctx: Handle) -> i32 {
    api(|| Ok(global()?.rt.context_destroy(context_of(ctx))?))
}
