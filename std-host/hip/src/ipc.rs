//! Inter-process sharing: `hipIpcGetMemHandle`, `hipIpcOpenMemHandle`, `hipIpcCloseMemHandle`,
//! `hipIpcGetEventHandle`, `hipIpcOpenEventHandle`.
//!
//! Each checks its arguments with HIP's error codes and then answers `hipErrorNotSupported`:
//! the emulated GPU lives inside the process that uses it (each process that loads this library
//! gets a GPU of its own), so there is no second process on the same device to share with; on
//! a real `/dev/kfd`, kfd-direct has no DMA-buf export and import of its allocations and
//! signals yet. Nothing is exported half-way: a handle is never written.

use std::ffi::{c_uint, c_void};

use aqueduct::EventHandle;

use crate::error::{api, Hip, HipResult, INVALID_VALUE, NOT_READY, NOT_SUPPORTED};
use crate::global::global;
use crate::memory::allocation_of;
use crate::Handle;

/// `hipIpcMemHandle_t` / `hipIpcEventHandle_t`: 64 opaque bytes, passed by value.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IpcHandle {
    /// `reserved`.
    pub reserved: [u8; 64],
}

/// `hipIpcMemLazyEnablePeerAccess` (0 in HIP 5.2's header, 1 in CUDA's and newer HIP's).
const LAZY_ENABLE_PEER_ACCESS: c_uint = 0x1;

/// `hipIpcGetMemHandle`: `ptr` must be the start of device memory of this runtime
/// (`hipErrorInvalidValue` otherwise); then not supported.
#[no_mangle]
pub extern "C" fn hipIpcGetMemHandle(handle: *mut IpcHandle, ptr: *mut c_void) -> i32 {
    api(|| {
        let g = global()?;
        if handle.is_null() || ptr.is_null() {
            return Err(INVALID_VALUE);
        }
        let a = allocation_of(g, ptr as usize as u64).ok_or(INVALID_VALUE)?;
        if a.host_flags.is_some() {
            return Err(INVALID_VALUE);
        }
        Err(NOT_SUPPORTED)
    })
}

/// `hipIpcOpenMemHandle`: flags 0 or `hipIpcMemLazyEnablePeerAccess`; then not supported.
#[no_mangle]
pub extern "C" fn hipIpcOpenMemHandle(ptr: *mut *mut c_void, _handle: IpcHandle, flags: c_uint) -> i32 {
    api(|| {
        global()?;
        if ptr.is_null() || flags & !LAZY_ENABLE_PEER_ACCESS != 0 {
            return Err(INVALID_VALUE);
        }
        Err(NOT_SUPPORTED)
    })
}

/// `hipIpcCloseMemHandle`: not supported (nothing can have been opened).
#[no_mangle]
pub extern "C" fn hipIpcCloseMemHandle(ptr: *mut c_void) -> i32 {
    api(|| {
        global()?;
        if ptr.is_null() {
            return Err(INVALID_VALUE);
        }
        Err(NOT_SUPPORTED)
    })
}

/// The event `event` names, checked (a destroyed or garbage handle answers core's error).
fn check_event(event: Handle) -> HipResult {
    let g = global()?;
    match g.rt.event_query(EventHandle(event as usize as u64)) {
        Err(e) if Hip::from(e) != Hip(NOT_READY) => Err(e.into()),
        _ => Ok(()),
    }
}

/// `hipIpcGetEventHandle`: a live event; then not supported.
#[no_mangle]
pub extern "C" fn hipIpcGetEventHandle(handle: *mut IpcHandle, event: Handle) -> i32 {
    api(|| {
        global()?;
        if handle.is_null() || event.is_null() {
            return Err(INVALID_VALUE);
        }
        check_event(event)?;
        Err(NOT_SUPPORTED)
    })
}

/// `hipIpcOpenEventHandle`: not supported.
#[no_mangle]
pub extern "C" fn hipIpcOpenEventHandle(event: *mut Handle, _handle: IpcHandle) -> i32 {
    api(|| {
        global()?;
        if event.is_null() {
            return Err(INVALID_VALUE);
        }
        Err(NOT_SUPPORTED)
    })
}
