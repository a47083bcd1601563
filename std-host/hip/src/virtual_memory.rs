//! Virtual memory management: `hipMemGetAllocationGranularity`, `hipMemCreate`,
//! `hipMemRelease`, `hipMemAddressReserve`, `hipMemAddressFree`, `hipMemMap`, `hipMemUnmap`,
//! `hipMemSetAccess`, `hipMemGetAccess`, `hipMemRetainAllocationHandle`,
//! `hipMemGetAllocationPropertiesFromHandle`, `hipMemExportToShareableHandle`,
//! `hipMemImportFromShareableHandle`.
//!
//! Each checks its arguments with HIP's error codes (NULL pointers, zero sizes, flags other
//! than 0, allocation properties other than pinned memory on an existing device, access
//! descriptors) and then answers `hipErrorNotSupported`: aqueduct's `Backend` trait allocates
//! memory and maps it in one step, at an address the backend picks, and has no split into
//! physical handles and reserved address ranges yet (amdkfd itself takes the address from its
//! caller, so kfd-direct can grow one; the emulated GPU would follow).

use std::ffi::{c_int, c_uint, c_ulonglong, c_void};

use crate::error::{api, HipResult, INVALID_DEVICE, INVALID_VALUE, NOT_SUPPORTED};
use crate::global::{global, Global};

/// `hipMemLocation`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MemLocation {
    /// `hipMemLocationType`: 1 is a device.
    pub kind: c_int,
    /// The device.
    pub id: c_int,
}

/// HIP 5.2's `hipMemAllocationProp` (newer HIP reorders it; the 5.2 ABI decides here).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(non_snake_case, missing_docs)]
pub struct MemAllocationProp {
    pub compressionType: u8,
    pub location: MemLocation,
    pub requestedHandleType: c_int,
    pub type_: c_int,
    pub usage: u16,
    pub win32HandleMetaData: *mut c_void,
}

const _: () = assert!(size_of::<MemAllocationProp>() == 32);

/// `hipMemAccessDesc`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MemAccessDesc {
    /// Where the access applies.
    pub location: MemLocation,
    /// `hipMemAccessFlags`: 0, 1 (read) or 3 (read-write).
    pub flags: c_int,
}

/// `hipMemLocationTypeDevice`, `hipMemAllocationTypePinned`.
const LOCATION_DEVICE: c_int = 1;
const ALLOCATION_PINNED: c_int = 1;

/// A location must be an existing device.
fn check_location(g: &Global, l: &MemLocation) -> HipResult {
    if l.kind != LOCATION_DEVICE {
        return Err(INVALID_VALUE);
    }
    if l.id < 0 || l.id as u64 >= u64::from(g.rt.device_count()?) {
        return Err(INVALID_DEVICE);
    }
    Ok(())
}

/// Allocation properties: pinned memory on an existing device, a known handle type.
///
/// # Safety
/// `prop` is NULL or valid for reads.
unsafe fn check_prop(g: &Global, prop: *const MemAllocationProp) -> HipResult {
    if prop.is_null() {
        return Err(INVALID_VALUE);
    }
    // SAFETY: the caller's contract; non-null.
    let p = unsafe { prop.read() };
    if p.type_ != ALLOCATION_PINNED || !matches!(p.requestedHandleType, 0 | 1 | 2 | 4) {
        return Err(INVALID_VALUE);
    }
    check_location(g, &p.location)
}

/// `hipMemGetAllocationGranularity`: not supported, after checking the properties and the
/// option (`hipMemAllocationGranularityMinimum` or `…Recommended`).
///
/// # Safety
/// `prop` is NULL or valid for reads.
#[no_mangle]
pub unsafe extern "C" fn hipMemGetAllocationGranularity(
    granularity: *mut usize,
    prop: *const MemAllocationProp,
    option: c_int,
) -> i32 {
    api(|| {
        let g = global()?;
        if granularity.is_null() || !matches!(option, 0 | 1) {
            return Err(INVALID_VALUE);
        }
        // SAFETY: the caller's contract.
        unsafe { check_prop(g, prop) }?;
        Err(NOT_SUPPORTED)
    })
}

/// `hipMemCreate`: not supported, after checking the arguments.
///
/// # Safety
/// `prop` is NULL or valid for reads.
#[no_mangle]
pub unsafe extern "C" fn hipMemCreate(
    handle: *mut *mut c_void,
    size: usize,
    prop: *const MemAllocationProp,
    flags: c_ulonglong,
) -> i32 {
    api(|| {
        let g = global()?;
        if handle.is_null() || size == 0 || flags != 0 {
            return Err(INVALID_VALUE);
        }
        // SAFETY: the caller's contract.
        unsafe { check_prop(g, prop) }?;
        Err(NOT_SUPPORTED)
    })
}

/// `hipMemAddressReserve`: not supported, after checking the arguments (the alignment 0 or a
/// power of two).
#[no_mangle]
pub extern "C" fn hipMemAddressReserve(
    ptr: *mut *mut c_void,
    size: usize,
    alignment: usize,
    _addr: *mut c_void,
    flags: c_ulonglong,
) -> i32 {
    api(|| {
        global()?;
        if ptr.is_null() || size == 0 || flags != 0 || (alignment != 0 && !alignment.is_power_of_two()) {
            return Err(INVALID_VALUE);
        }
        Err(NOT_SUPPORTED)
    })
}

/// `hipMemSetAccess`: not supported, after checking every descriptor (an existing device,
/// flags 0, 1 or 3).
///
/// # Safety
/// `desc` is NULL or holds `count` descriptors.
#[no_mangle]
pub unsafe extern "C" fn hipMemSetAccess(
    ptr: *mut c_void,
    size: usize,
    desc: *const MemAccessDesc,
    count: usize,
) -> i32 {
    api(|| {
        let g = global()?;
        if ptr.is_null() || size == 0 || desc.is_null() || count == 0 {
            return Err(INVALID_VALUE);
        }
        // SAFETY: the caller's contract.
        for d in unsafe { std::slice::from_raw_parts(desc, count) } {
            check_location(g, &d.location)?;
            if !matches!(d.flags, 0 | 1 | 3) {
                return Err(INVALID_VALUE);
            }
        }
        Err(NOT_SUPPORTED)
    })
}

/// `hipMemGetAccess`: not supported, after checking the arguments.
///
/// # Safety
/// `location` is NULL or valid for reads.
#[no_mangle]
pub unsafe extern "C" fn hipMemGetAccess(
    flags: *mut c_ulonglong,
    location: *const MemLocation,
    ptr: *mut c_void,
) -> i32 {
    api(|| {
        let g = global()?;
        if flags.is_null() || location.is_null() || ptr.is_null() {
            return Err(INVALID_VALUE);
        }
        // SAFETY: the caller's contract; non-null.
        check_location(g, unsafe { &*location })?;
        Err(NOT_SUPPORTED)
    })
}

/// Answers `hipErrorInvalidValue` when any of `ptrs` is NULL or a size is 0, else
/// `hipErrorNotSupported`.
fn checked(ptrs: &[*const c_void], sizes: &[usize]) -> i32 {
    api(|| {
        global()?;
        if ptrs.iter().any(|p| p.is_null()) || sizes.contains(&0) {
            return Err(INVALID_VALUE);
        }
        Err(NOT_SUPPORTED)
    })
}

/// `hipMemRelease`: not supported (no handle can have been created).
#[no_mangle]
pub extern "C" fn hipMemRelease(handle: *mut c_void) -> i32 {
    checked(&[handle], &[])
}

/// `hipMemAddressFree`: not supported (no range can have been reserved).
#[no_mangle]
pub extern "C" fn hipMemAddressFree(ptr: *mut c_void, size: usize) -> i32 {
    checked(&[ptr], &[size])
}

/// `hipMemMap`: not supported, after checking the arguments (flags 0).
#[no_mangle]
pub extern "C" fn hipMemMap(
    ptr: *mut c_void,
    size: usize,
    _offset: usize,
    handle: *mut c_void,
    flags: c_ulonglong,
) -> i32 {
    if flags != 0 {
        return api(|| {
            global()?;
            Err(INVALID_VALUE)
        });
    }
    checked(&[ptr, handle], &[size])
}

/// `hipMemUnmap`: not supported (nothing can have been mapped).
#[no_mangle]
pub extern "C" fn hipMemUnmap(ptr: *mut c_void, size: usize) -> i32 {
    checked(&[ptr], &[size])
}

/// `hipMemRetainAllocationHandle`: not supported.
#[no_mangle]
pub extern "C" fn hipMemRetainAllocationHandle(handle: *mut *mut c_void, addr: *mut c_void) -> i32 {
    checked(&[handle.cast(), addr], &[])
}

/// `hipMemGetAllocationPropertiesFromHandle`: not supported.
#[no_mangle]
pub extern "C" fn hipMemGetAllocationPropertiesFromHandle(prop: *mut MemAllocationProp, handle: *mut c_void) -> i32 {
    checked(&[prop.cast(), handle], &[])
}

/// `hipMemExportToShareableHandle`: not supported, after checking the arguments (flags 0).
#[no_mangle]
pub extern "C" fn hipMemExportToShareableHandle(
    shareable: *mut c_void,
    handle: *mut c_void,
    _kind: c_int,
    flags: c_ulonglong,
) -> i32 {
    if flags != 0 {
        return api(|| {
            global()?;
            Err(INVALID_VALUE)
        });
    }
    checked(&[shareable, handle], &[])
}

/// `hipMemImportFromShareableHandle`: not supported.
#[no_mangle]
pub extern "C" fn hipMemImportFromShareableHandle(
    handle: *mut *mut c_void,
    os_handle: *mut c_void,
    _kind: c_uint,
) -> i32 {
    checked(&[handle.cast(), os_handle], &[])
}
