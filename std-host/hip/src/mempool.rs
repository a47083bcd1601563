//! Stream-ordered allocation (docs/hip-semantics.md, "Stream-ordered allocation"):
//! `hipMallocAsync`, `hipFreeAsync`, `hipMallocFromPoolAsync`, the `hipMemPool*` functions and
//! the devices' default and current pools, over core's [`aqueduct::MemPools`] (which holds the
//! semantics: reuse in stream order, the reuse policy, thresholds, graph allocations).
//!
//! This layer checks C arguments in HIP's order, converts `hipMemPoolProps`, and keeps the
//! allocation table of [`crate::global`] in step (pool memory is device memory for copies and
//! `hipPointerGetAttributes` while it is handed out). Pools cannot be shared between processes
//! here: the export and import functions are `hipErrorNotSupported` after their argument checks.

use std::ffi::{c_int, c_uint, c_void};

use aqueduct::mempool::{Access, Allocation, Freed};
use aqueduct::{PoolAttr, PoolHandle};

use crate::error::{api, HipResult, INVALID_DEVICE, INVALID_VALUE, NOT_SUPPORTED};
use crate::global::{global, lock, Global};
use crate::{handle, put, stream_of, Handle};

/// `hipMemAllocationTypePinned`.
const ALLOCATION_PINNED: c_uint = 1;
/// `hipMemLocationTypeDevice`.
const LOCATION_DEVICE: c_uint = 1;

/// `hipMemLocation`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MemLocation {
    kind: c_uint,
    id: c_int,
}

/// `hipMemPoolProps` (88 bytes). HIP 5.2's `reserved[64]` begins with the `size_t maxSize` of
/// newer HIP (0: no bound), which is honoured.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MemPoolProps {
    alloc_type: c_uint,
    handle_types: c_uint,
    location: MemLocation,
    win32_security_attributes: *mut c_void,
    max_size: usize,
    reserved: [u8; 56],
}

/// `hipMemAccessDesc`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MemAccessDesc {
    location: MemLocation,
    flags: c_uint,
}

const _: () = assert!(size_of::<MemPoolProps>() == 88);
const _: () = assert!(size_of::<MemAccessDesc>() == 12);

fn pool_of(p: Handle) -> PoolHandle {
    PoolHandle(p as usize as u64)
}

/// A device number from C: negative is `err`.
fn device_of(device: c_int, err: crate::error::Hip) -> HipResult<u32> {
    u32::try_from(device).map_err(|_| err)
}

/// Puts a new allocation into the allocation table and writes its address out.
///
/// # Safety
/// `ptr` is valid for writes.
unsafe fn hand_out(g: &Global, ptr: *mut *mut c_void, a: Allocation) -> HipResult {
    if a.address != 0 {
        lock(&g.allocs).insert(a.address, (a.size, a.device));
    }
    // SAFETY: the caller's contract.
    unsafe { put(ptr, a.address as usize as *mut c_void) }
}

/// `hipMallocAsync`: from the current pool of the stream's device, in stream order; a graph
/// allocation on a capturing stream. Zero bytes gives NULL.
///
/// # Safety
/// `ptr` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipMallocAsync(ptr: *mut *mut c_void, bytes: usize, stream: Handle) -> i32 {
    api(|| {
        let g = global()?;
        crate::capture::refuse_memory_nodes(g, stream)?;
        if ptr.is_null() {
            return Err(INVALID_VALUE);
        }
        let a = g.pools.malloc_async(&*g.rt, stream_of(stream), bytes as u64)?;
        crate::capture::note_graph_allocation(g, stream);
        // SAFETY: checked non-null; the caller's contract.
        unsafe { hand_out(g, ptr, a) }
    })
}

/// `hipMallocFromPoolAsync`: as `hipMallocAsync` from `pool` (NULL, destroyed or garbage:
/// `hipErrorInvalidValue`).
///
/// # Safety
/// `ptr` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipMallocFromPoolAsync(
    ptr: *mut *mut c_void,
    bytes: usize,
    pool: Handle,
    stream: Handle,
) -> i32 {
    api(|| {
        let g = global()?;
        crate::capture::refuse_memory_nodes(g, stream)?;
        if ptr.is_null() || pool.is_null() {
            return Err(INVALID_VALUE);
        }
        let a = g.pools.malloc_from_pool_async(&*g.rt, pool_of(pool), stream_of(stream), bytes as u64)?;
        crate::capture::note_graph_allocation(g, stream);
        // SAFETY: checked non-null; the caller's contract.
        unsafe { hand_out(g, ptr, a) }
    })
}

/// `hipFreeAsync`: pool memory becomes free at this point of the stream (a graph allocation's
/// free is recorded when the stream captures); other memory of this runtime is freed at once,
/// as `hipFree` frees it. NULL, unknown memory and double frees are `hipErrorInvalidValue`.
#[no_mangle]
pub extern "C" fn hipFreeAsync(ptr: *mut c_void, stream: Handle) -> i32 {
    api(|| {
        let g = global()?;
        crate::capture::refuse_memory_nodes(g, stream)?;
        if ptr.is_null() {
            // Freeing nothing succeeds (the newest HIP's and CUDA's answer; HIP 5.2 refuses
            // it); the stream's own checks still apply.
            return Ok(g.rt.memcpy_async(stream_of(stream), 1, 1, 0)?);
        }
        let addr = ptr as usize as u64;
        match g.pools.free_async(&*g.rt, stream_of(stream), addr)? {
            Freed::Pooled => {
                lock(&g.allocs).remove(&addr);
                Ok(())
            }
            Freed::Graph => Ok(()),
            Freed::NotPooled => crate::memory::free(ptr),
        }
    })
}

/// `hipDeviceGetDefaultMemPool`.
///
/// # Safety
/// `pool` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipDeviceGetDefaultMemPool(pool: *mut Handle, device: c_int) -> i32 {
    api(|| {
        let g = global()?;
        if pool.is_null() {
            return Err(INVALID_VALUE);
        }
        let p = g.pools.default_pool(&*g.rt, device_of(device, INVALID_DEVICE)?)?;
        // SAFETY: the caller's contract.
        unsafe { put(pool, handle(p.0)) }
    })
}

/// `hipDeviceGetMemPool`: the device's current pool (its default one until set).
///
/// # Safety
/// `pool` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipDeviceGetMemPool(pool: *mut Handle, device: c_int) -> i32 {
    api(|| {
        let g = global()?;
        if pool.is_null() {
            return Err(INVALID_VALUE);
        }
        let p = g.pools.current_pool(&*g.rt, device_of(device, INVALID_VALUE)?)?;
        // SAFETY: the caller's contract.
        unsafe { put(pool, handle(p.0)) }
    })
}

/// `hipDeviceSetMemPool`: a pool of another device is `hipErrorInvalidDevice`.
#[no_mangle]
pub extern "C" fn hipDeviceSetMemPool(device: c_int, pool: Handle) -> i32 {
    api(|| {
        let g = global()?;
        if pool.is_null() {
            return Err(INVALID_VALUE);
        }
        Ok(g.pools.set_current_pool(&*g.rt, device_of(device, INVALID_VALUE)?, pool_of(pool))?)
    })
}

/// `hipMemPoolCreate`: pinned allocations on a device (`hipMemLocationTypeDevice`); anything
/// else is `hipErrorInvalidValue`.
///
/// # Safety
/// `pool` is NULL or valid for writes; `props` is NULL or valid for reads.
#[no_mangle]
pub unsafe extern "C" fn hipMemPoolCreate(pool: *mut Handle, props: *const MemPoolProps) -> i32 {
    api(|| {
        let g = global()?;
        if pool.is_null() || props.is_null() {
            return Err(INVALID_VALUE);
        }
        // SAFETY: the caller's contract.
        let props = unsafe { props.read() };
        if props.alloc_type != ALLOCATION_PINNED || props.location.kind != LOCATION_DEVICE {
            return Err(INVALID_VALUE);
        }
        let device = device_of(props.location.id, INVALID_VALUE)?;
        let p = g.pools.create(&*g.rt, device, props.max_size as u64)?;
        // SAFETY: the caller's contract.
        unsafe { put(pool, handle(p.0)) }
    })
}

/// `hipMemPoolDestroy`: a default pool is `hipErrorInvalidValue`; memory still handed out
/// keeps the pool's blocks alive until it is freed.
#[no_mangle]
pub extern "C" fn hipMemPoolDestroy(pool: Handle) -> i32 {
    api(|| {
        let g = global()?;
        if pool.is_null() {
            return Err(INVALID_VALUE);
        }
        Ok(g.pools.destroy(&*g.rt, pool_of(pool))?)
    })
}

/// `hipMemPoolSetAttribute`: the reuse switches take an `int`, the others a `uint64_t`.
///
/// # Safety
/// `value` is NULL or points at the attribute's type.
#[no_mangle]
pub unsafe extern "C" fn hipMemPoolSetAttribute(pool: Handle, attr: c_uint, value: *mut c_void) -> i32 {
    api(|| {
        let g = global()?;
        if pool.is_null() || value.is_null() {
            return Err(INVALID_VALUE);
        }
        let attr = PoolAttr::from_raw(attr)?;
        // SAFETY: the caller's contract: `value` points at an int or a uint64_t as `attr` says.
        let v = unsafe {
            if attr.is_int() {
                value.cast::<c_int>().read_unaligned() as i64 as u64
            } else {
                value.cast::<u64>().read_unaligned()
            }
        };
        Ok(g.pools.set_attribute(pool_of(pool), attr, v)?)
    })
}

/// `hipMemPoolGetAttribute`.
///
/// # Safety
/// `value` is NULL or valid for writing the attribute's type.
#[no_mangle]
pub unsafe extern "C" fn hipMemPoolGetAttribute(pool: Handle, attr: c_uint, value: *mut c_void) -> i32 {
    api(|| {
        let g = global()?;
        if pool.is_null() || value.is_null() {
            return Err(INVALID_VALUE);
        }
        let attr = PoolAttr::from_raw(attr)?;
        let v = g.pools.attribute(pool_of(pool), attr)?;
        // SAFETY: the caller's contract.
        unsafe {
            if attr.is_int() {
                value.cast::<c_int>().write_unaligned(v as c_int);
            } else {
                value.cast::<u64>().write_unaligned(v);
            }
        }
        Ok(())
    })
}

/// `hipMemPoolTrimTo`.
#[no_mangle]
pub extern "C" fn hipMemPoolTrimTo(pool: Handle, keep: usize) -> i32 {
    api(|| {
        let g = global()?;
        if pool.is_null() {
            return Err(INVALID_VALUE);
        }
        Ok(g.pools.trim_to(&*g.rt, pool_of(pool), keep as u64)?)
    })
}

/// `hipMemPoolSetAccess`: more descriptors than devices, a device out of range and revoking
/// access are `hipErrorInvalidDevice`; a location that is not a device or flags past
/// read-write `hipErrorInvalidValue`. Every emulated GPU reaches every other's memory, so the
/// access is recorded and reported.
///
/// # Safety
/// `descs` is NULL or holds `count` descriptors.
#[no_mangle]
pub unsafe extern "C" fn hipMemPoolSetAccess(pool: Handle, descs: *const MemAccessDesc, count: usize) -> i32 {
    api(|| {
        let g = global()?;
        if pool.is_null() || descs.is_null() {
            return Err(INVALID_VALUE);
        }
        if count > g.rt.device_count()? as usize {
            return Err(INVALID_DEVICE);
        }
        // SAFETY: the caller's contract.
        let descs = unsafe { std::slice::from_raw_parts(descs, count) };
        for d in descs {
            if d.location.kind != LOCATION_DEVICE {
                return Err(INVALID_VALUE);
            }
            let device = device_of(d.location.id, INVALID_DEVICE)?;
            g.pools.set_access(&*g.rt, pool_of(pool), device, d.flags)?;
        }
        Ok(())
    })
}

/// `hipMemPoolGetAccess`: read-write for the pool's own device.
///
/// # Safety
/// `flags` is NULL or valid for writes; `location` is NULL or valid for reads.
#[no_mangle]
pub unsafe extern "C" fn hipMemPoolGetAccess(flags: *mut c_uint, pool: Handle, location: *const MemLocation) -> i32 {
    api(|| {
        let g = global()?;
        if flags.is_null() || pool.is_null() || location.is_null() {
            return Err(INVALID_VALUE);
        }
        // SAFETY: the caller's contract.
        let location = unsafe { location.read() };
        if location.kind != LOCATION_DEVICE {
            return Err(INVALID_VALUE);
        }
        let device = device_of(location.id, INVALID_VALUE)?;
        let a: Access = g.pools.access(&*g.rt, pool_of(pool), device)?;
        // SAFETY: the caller's contract.
        unsafe { put(flags, a as c_uint) }
    })
}

/// `hipMemPoolExportToShareableHandle`: `hipErrorNotSupported` (pools are not shared between
/// processes here) after HIP's argument checks.
///
/// # Safety
/// Nothing is dereferenced.
#[no_mangle]
pub unsafe extern "C" fn hipMemPoolExportToShareableHandle(
    handle_out: *mut c_void,
    pool: Handle,
    _handle_type: c_uint,
    flags: c_uint,
) -> i32 {
    api(|| {
        global()?;
        if handle_out.is_null() || pool.is_null() || flags != 0 {
            return Err(INVALID_VALUE);
        }
        Err(NOT_SUPPORTED)
    })
}

/// `hipMemPoolImportFromShareableHandle`: `hipErrorNotSupported` after HIP's argument checks.
///
/// # Safety
/// Nothing is dereferenced.
#[no_mangle]
pub unsafe extern "C" fn hipMemPoolImportFromShareableHandle(
    pool: *mut Handle,
    handle_in: *mut c_void,
    _handle_type: c_uint,
    flags: c_uint,
) -> i32 {
    api(|| {
        global()?;
        if pool.is_null() || handle_in.is_null() || flags != 0 {
            return Err(INVALID_VALUE);
        }
        Err(NOT_SUPPORTED)
    })
}

/// `hipMemPoolExportPointer`: `hipErrorNotSupported` after HIP's argument checks.
///
/// # Safety
/// Nothing is dereferenced.
#[no_mangle]
pub unsafe extern "C" fn hipMemPoolExportPointer(data: *mut c_void, ptr: *mut c_void) -> i32 {
    api(|| {
        global()?;
        if data.is_null() || ptr.is_null() {
            return Err(INVALID_VALUE);
        }
        Err(NOT_SUPPORTED)
    })
}

/// `hipMemPoolImportPointer`: `hipErrorNotSupported` after HIP's argument checks.
///
/// # Safety
/// Nothing is dereferenced.
#[no_mangle]
pub unsafe extern "C" fn hipMemPoolImportPointer(ptr: *mut *mut c_void, pool: Handle, data: *mut c_void) -> i32 {
    api(|| {
        global()?;
        if ptr.is_null() || pool.is_null() || data.is_null() {
            return Err(INVALID_VALUE);
        }
        Err(NOT_SUPPORTED)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn props_have_hips_layout() {
        assert_eq!(std::mem::offset_of!(MemPoolProps, location), 8);
        assert_eq!(std::mem::offset_of!(MemPoolProps, win32_security_attributes), 16);
        assert_eq!(std::mem::offset_of!(MemPoolProps, max_size), 24);
        assert_eq!(std::mem::offset_of!(MemAccessDesc, flags), 8);
    }
}
