//! Pinned host memory under its older names, and what a pointer is: `hipHostAlloc`,
//! `hipMallocHost`, `hipMemAllocHost`, `hipFreeHost`, `hipHostGetFlags`, `hipExtMallocWithFlags`,
//! `hipMemGetAddressRange`, `hipMemPtrGetInfo`, `hipPointerGetAttribute` and
//! `hipDrvPointerGetAttributes` (docs/hip-semantics.md §6.1).
//!
//! Allocations are those `crate::memory` records (`hipMalloc`, `hipHostMalloc`, pitched and
//! pool memory) and the registrations of `crate::host_register`; an address anywhere inside one
//! names it (for a registration, by its host or its device address).
//!
//! `hipPointerGetAttribute` writes each attribute with the width HIP 5.2 writes it (booleans one
//! byte, the memory type, buffer id, ordinal, range size and access flags four bytes, pointers
//! eight). Two attributes answer `hipErrorNotSupported`, as HIP 5.2's do:
//! `HIP_POINTER_ATTRIBUTE_P2P_TOKENS` (GPUDirect RDMA tokens; no RDMA here) and
//! `HIP_POINTER_ATTRIBUTE_MEMPOOL_HANDLE`.

use std::ffi::{c_int, c_uint, c_void};

use crate::error::{api, HipResult, INVALID_DEVICE_POINTER, INVALID_VALUE, NOT_SUPPORTED};
use crate::global::{global, Global};
use crate::memory::{alloc, allocation_of, free, hipHostMalloc, Allocation};
use crate::put;

/// `hipHostAlloc`: `hipHostMalloc` under CUDA's older name.
///
/// # Safety
/// `ptr` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipHostAlloc(ptr: *mut *mut c_void, bytes: usize, flags: c_uint) -> i32 {
    // SAFETY: forwarded caller contract.
    unsafe { hipHostMalloc(ptr, bytes, flags) }
}

/// `hipMallocHost`: `hipHostMalloc` with no flags.
///
/// # Safety
/// `ptr` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipMallocHost(ptr: *mut *mut c_void, bytes: usize) -> i32 {
    // SAFETY: forwarded caller contract.
    unsafe { hipHostMalloc(ptr, bytes, 0) }
}

/// `hipMemAllocHost`: `hipHostMalloc` with no flags.
///
/// # Safety
/// `ptr` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipMemAllocHost(ptr: *mut *mut c_void, bytes: usize) -> i32 {
    // SAFETY: forwarded caller contract.
    unsafe { hipHostMalloc(ptr, bytes, 0) }
}

/// `hipFreeHost`: as `hipHostFree`.
#[no_mangle]
pub extern "C" fn hipFreeHost(ptr: *mut c_void) -> i32 {
    api(|| free(ptr))
}

/// Every `hipExtMallocWithFlags` flag: `hipDeviceMallocFinegrained` (0x1) and
/// `hipMallocSignalMemory` (0x2); `hipDeviceMallocDefault` is 0.
const EXT_MALLOC_FLAGS: c_uint = 0x1 | 0x2;

/// `hipExtMallocWithFlags`: device memory; the fine-grained, signal and uncached variants are
/// the same memory here (the emulated GPU's memory is coherent with the host's); unknown flags
/// are `hipErrorInvalidValue`.
///
/// # Safety
/// `ptr` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipExtMallocWithFlags(ptr: *mut *mut c_void, bytes: usize, flags: c_uint) -> i32 {
    api(|| {
        global()?;
        if ptr.is_null() || flags & !EXT_MALLOC_FLAGS != 0 {
            return Err(INVALID_VALUE);
        }
        alloc(ptr, bytes, None)
    })
}

/// `hipHostGetFlags`: the flags `hipHostMalloc` (or `hipHostAlloc`) was given, for any address
/// inside the allocation; device memory, registered memory (`hipHostRegister`), other memory
/// and NULL are `hipErrorInvalidValue`.
///
/// # Safety
/// `flags` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipHostGetFlags(flags: *mut c_uint, host: *mut c_void) -> i32 {
    api(|| {
        let g = global()?;
        if flags.is_null() || host.is_null() {
            return Err(INVALID_VALUE);
        }
        // Managed memory is host memory here, but not `hipHostMalloc`'s; neither is registered
        // memory (clr asks for a `hipHostMalloc` buffer, as CUDA does).
        let a = allocation_of(g, host as usize as u64).filter(|a| !a.managed && a.registered.is_none());
        let f = a.and_then(|a| a.host_flags).ok_or(INVALID_VALUE)?;
        // SAFETY: the caller's contract.
        unsafe { put(flags, f) }
    })
}

/// `hipMemGetAddressRange`: the start and size of the allocation holding `ptr`; an address of
/// no allocation (NULL too) is `hipErrorInvalidDevicePointer` (HIP's answer).
///
/// # Safety
/// Each out-pointer is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipMemGetAddressRange(base: *mut *mut c_void, size: *mut usize, ptr: *mut c_void) -> i32 {
    api(|| {
        let g = global()?;
        if base.is_null() || size.is_null() {
            return Err(INVALID_VALUE);
        }
        let a = allocation_of(g, ptr as usize as u64).ok_or(INVALID_DEVICE_POINTER)?;
        // SAFETY: the caller's contract.
        unsafe {
            put(base, a.base as usize as *mut c_void)?;
            put(size, a.bytes as usize)
        }
    })
}

/// `hipMemPtrGetInfo`: the size of the allocation holding `ptr`; other addresses are
/// `hipErrorInvalidValue`.
///
/// # Safety
/// `size` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipMemPtrGetInfo(ptr: *mut c_void, size: *mut usize) -> i32 {
    api(|| {
        let g = global()?;
        if ptr.is_null() || size.is_null() {
            return Err(INVALID_VALUE);
        }
        let a = allocation_of(g, ptr as usize as u64).ok_or(INVALID_VALUE)?;
        // SAFETY: the caller's contract.
        unsafe { put(size, a.bytes as usize) }
    })
}

/// `hipMemoryTypeHost` / `hipMemoryTypeDevice` (HIP 5.2's numbering).
const MEMORY_HOST: u32 = 0;
const MEMORY_DEVICE: u32 = 1;

/// One attribute's value, in the width HIP 5.2 writes it.
enum Value {
    Bool(bool),
    U32(u32),
    Ptr(u64),
}

/// `hipPointer_attribute` `attr` of `ptr` (inside allocation `a`).
fn attribute(a: &Allocation, attr: c_int, ptr: u64) -> HipResult<Value> {
    Ok(match attr {
        // HIP_POINTER_ATTRIBUTE_CONTEXT: the device's context (`crate::driver_context`).
        1 => Value::Ptr(crate::driver_context::context(a.device) as usize as u64),
        // MEMORY_TYPE.
        2 => Value::U32(if a.host_flags.is_some() { MEMORY_HOST } else { MEMORY_DEVICE }),
        // DEVICE_POINTER: the same address on the device (registered memory: its device address).
        3 => Value::Ptr(a.device_pointer(ptr)),
        // HOST_POINTER: host memory only.
        4 => Value::Ptr(a.host_pointer(ptr).ok_or(INVALID_VALUE)?),
        // P2P_TOKENS.
        5 => return Err(NOT_SUPPORTED),
        // SYNC_MEMOPS: copies of this memory are always synchronous with respect to it.
        6 => Value::Bool(true),
        // BUFFER_ID.
        7 => Value::U32(a.buffer_id),
        // IS_MANAGED.
        8 => Value::Bool(a.managed),
        // DEVICE_ORDINAL.
        9 => Value::U32(a.device),
        // IS_LEGACY_HIP_IPC_CAPABLE: no IPC handles yet.
        10 => Value::Bool(false),
        // RANGE_START_ADDR.
        11 => Value::Ptr(a.base),
        // RANGE_SIZE (HIP 5.2 writes four bytes).
        12 => Value::U32(u32::try_from(a.bytes).unwrap_or(u32::MAX)),
        // MAPPED.
        13 => Value::Bool(true),
        // ALLOWED_HANDLE_TYPES: none (no shareable handles).
        14 => Value::U32(0),
        // IS_GPU_DIRECT_RDMA_CAPABLE.
        15 => Value::Bool(false),
        // ACCESS_FLAGS (HIP 5.2's answer: 0).
        16 => Value::U32(0),
        // MEMPOOL_HANDLE.
        17 => return Err(NOT_SUPPORTED),
        _ => return Err(INVALID_VALUE),
    })
}

/// One attribute written through `data`.
///
/// # Safety
/// `data` is valid for writing the attribute's width.
unsafe fn get_attribute(g: &Global, data: *mut c_void, attr: c_int, ptr: *mut c_void) -> HipResult {
    if data.is_null() || ptr.is_null() {
        return Err(INVALID_VALUE);
    }
    let addr = ptr as usize as u64;
    let a = allocation_of(g, addr).ok_or(INVALID_VALUE)?;
    // SAFETY: non-null, and valid for the attribute's width by the caller's contract.
    unsafe {
        match attribute(&a, attr, addr)? {
            Value::Bool(b) => data.cast::<u8>().write_unaligned(u8::from(b)),
            Value::U32(v) => data.cast::<u32>().write_unaligned(v),
            Value::Ptr(p) => data.cast::<u64>().write_unaligned(p),
        }
    }
    Ok(())
}

/// `hipPointerGetAttribute`: one attribute of memory of this runtime (module docs); other
/// memory and unknown attributes are `hipErrorInvalidValue`.
///
/// # Safety
/// `data` is NULL or valid for writing the attribute.
#[no_mangle]
pub unsafe extern "C" fn hipPointerGetAttribute(data: *mut c_void, attr: c_int, ptr: *mut c_void) -> i32 {
    // SAFETY: forwarded caller contract.
    api(|| unsafe { get_attribute(global()?, data, attr, ptr) })
}

/// `hipDrvPointerGetAttributes`: `count` attributes, each as `hipPointerGetAttribute`; the
/// first failing one is the answer.
///
/// # Safety
/// `attrs` and `data` are NULL or hold `count` entries; each `data[i]` is valid for its
/// attribute.
#[no_mangle]
pub unsafe extern "C" fn hipDrvPointerGetAttributes(
    count: c_uint,
    attrs: *const c_int,
    data: *mut *mut c_void,
    ptr: *mut c_void,
) -> i32 {
    api(|| {
        let g = global()?;
        if count == 0 || attrs.is_null() || data.is_null() {
            return Err(INVALID_VALUE);
        }
        for i in 0..count as usize {
            // SAFETY: both arrays hold `count` entries (the caller's contract).
            let (attr, out) = unsafe { (*attrs.add(i), *data.add(i)) };
            // SAFETY: `out` is valid for its attribute (the caller's contract).
            unsafe { get_attribute(g, out, attr, ptr)? };
        }
        Ok(())
    })
}
