//! Virtual memory management (docs/architecture.md §2, "Virtual memory"; docs/hip-semantics.md
//! §6.5): `hipMemGetAllocationGranularity`, `hipMemCreate`,
//! `hipMemRelease`, `hipMemAddressReserve`, `hipMemAddressFree`, `hipMemMap`, `hipMemUnmap`,
//! `hipMemSetAccess`, `hipMemGetAccess`, `hipMemRetainAllocationHandle`,
//! `hipMemGetAllocationPropertiesFromHandle` over the backend's `vmem_*` operations
//! ([`aqueduct::Backend::vmem_create`] …), and `hipMemExportToShareableHandle` /
//! `hipMemImportFromShareableHandle`, which check their arguments and answer
//! `hipErrorNotSupported`.
//!
//! A handle (`hipMemGenericAllocationHandle_t`) is the backend's handle as a pointer; this
//! module keeps what HIP asks of it: its size and properties, and a reference count
//! (`hipMemCreate` and each `hipMemRetainAllocationHandle` add one, `hipMemRelease` drops one;
//! at zero the backend releases it, and mappings keep the memory until they are unmapped, as
//! CUDA says). It also keeps the reservations and the mappings, so that copies and fills treat
//! a mapped range as device memory ([`in_mapped_range`], adjacent mappings as one range) and the
//! pointer queries answer for any address inside a mapping ([`mapping_of`]: device memory of the
//! handle's device, the mapping its range). A handle whose last reference went has no
//! properties any more, and `hipMemRetainAllocationHandle` of its mappings is
//! `hipErrorInvalidValue`.
//!
//! CUDA's answers (`cuMemCreate` … `cuMemGetAccess`), all `hipErrorInvalidValue` unless named:
//! NULL pointers, zero sizes, flags other than 0; sizes not a multiple of the granularity
//! (`VMEM_GRANULARITY`, 2 MiB, both the minimum and the recommended one); properties other than
//! pinned memory on a device (a device that does not exist: `hipErrorInvalidDevice`);
//! `hipMemMap` with an offset other than 0 or a size other than the handle's, outside a
//! reservation or over a mapping; `hipMemUnmap` and `hipMemSetAccess` of a range that is not
//! whole adjacent mappings; `hipMemAddressFree` of a range that is not a reservation, or one
//! still mapped; unknown handles. Read-only access (`hipMemAccessFlagsProtRead`) is
//! `hipErrorNotSupported`: amdkfd maps a buffer read-write. A backend without virtual memory
//! management (the ROCr backend: ROCr 5.2 has no `hsa_amd_vmem_*`; the loopback) answers
//! `hipErrorNotSupported` from `hipMemCreate` and `hipMemAddressReserve`.
//!
//! Unmapping, and revoking a device's access, first wait for the work of the devices that had
//! access (the backend's contract: nothing may still reach the memory).

use std::collections::{BTreeMap, HashMap};
use std::ffi::{c_int, c_uint, c_ulonglong, c_void};
use std::sync::{LazyLock, Mutex};

use aqueduct::backend::VMEM_GRANULARITY;
use aqueduct::Backend;

use crate::error::{api, HipResult, INVALID_DEVICE, INVALID_VALUE, NOT_SUPPORTED};
use crate::global::{global, lock, Global};

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

/// `hipMemAccessFlagsProtReadWrite`.
const ACCESS_READ_WRITE: c_int = 3;
const GRANULE: u64 = VMEM_GRANULARITY as u64;

/// A live handle.
#[derive(Debug, Clone, Copy)]
struct Handle {
    bytes: u64,
    device: u32,
    requested_handle_type: c_int,
    refs: u32,
}

/// A mapping of a handle.
#[derive(Debug, Clone, Copy)]
struct Mapped {
    bytes: u64,
    handle: u64,
    /// Devices with read-write access, one bit each.
    access: u64,
    /// Its buffer id (`HIP_POINTER_ATTRIBUTE_BUFFER_ID`).
    buffer_id: u32,
}

#[derive(Default)]
struct Vmm {
    handles: HashMap<u64, Handle>,
    /// Reservations by start: their size.
    reservations: BTreeMap<u64, u64>,
    /// Mappings by start.
    mappings: BTreeMap<u64, Mapped>,
}

impl Vmm {
    /// The mappings that tile `[addr, addr + bytes)` exactly, one after another.
    fn tiling(&self, addr: u64, bytes: u64) -> HipResult<Vec<(u64, Mapped)>> {
        let end = addr.checked_add(bytes).ok_or(INVALID_VALUE)?;
        let mut at = addr;
        let mut out = Vec::new();
        while at < end {
            let m = *self.mappings.get(&at).ok_or(INVALID_VALUE)?;
            out.push((at, m));
            at += m.bytes;
        }
        if at != end {
            return Err(INVALID_VALUE);
        }
        Ok(out)
    }

    /// The mapping holding `addr`.
    fn holding(&self, addr: u64) -> Option<(u64, Mapped)> {
        let (&start, &m) = self.mappings.range(..=addr).next_back()?;
        (addr < start + m.bytes).then_some((start, m))
    }
}

static VMM: LazyLock<Mutex<Vmm>> = LazyLock::new(Default::default);

/// Whether `[addr, addr + bytes)` lies in mapped memory (adjacent mappings count as one range):
/// device memory for copies and fills.
pub(crate) fn in_mapped_range(addr: u64, bytes: u64) -> bool {
    let vmm = lock(&VMM);
    let end = addr.saturating_add(bytes.max(1));
    let mut at = addr;
    while let Some((start, m)) = vmm.holding(at) {
        at = start + m.bytes;
        if at >= end {
            return true;
        }
    }
    false
}

/// The mapping holding `addr` as device memory of its handle's device, for the pointer queries
/// (`hipPointerGetAttributes`, `hipMemGetAddressRange`): one mapping, even beside another.
pub(crate) fn mapping_of(addr: u64) -> Option<MappingInfo> {
    let vmm = lock(&VMM);
    let (base, m) = vmm.holding(addr)?;
    let device = vmm.handles.get(&m.handle).map_or(0, |h| h.device);
    Some(MappingInfo { base, bytes: m.bytes, device, buffer_id: m.buffer_id })
}

/// One mapping as the pointer queries see it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MappingInfo {
    /// Its first address.
    pub(crate) base: u64,
    /// Its bytes.
    pub(crate) bytes: u64,
    /// Its handle's device.
    pub(crate) device: u32,
    /// Its buffer id (`HIP_POINTER_ATTRIBUTE_BUFFER_ID`).
    pub(crate) buffer_id: u32,
}

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
unsafe fn check_prop(g: &Global, prop: *const MemAllocationProp) -> HipResult<MemAllocationProp> {
    if prop.is_null() {
        return Err(INVALID_VALUE);
    }
    // SAFETY: the caller's contract; non-null.
    let p = unsafe { prop.read() };
    if p.type_ != ALLOCATION_PINNED || !matches!(p.requestedHandleType, 0 | 1 | 2 | 4) {
        return Err(INVALID_VALUE);
    }
    check_location(g, &p.location)?;
    Ok(p)
}

/// `hipMemGetAllocationGranularity`: the granularity, the minimum and the recommended one alike.
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
        // SAFETY: non-null; the caller's out-parameter.
        unsafe { granularity.write(VMEM_GRANULARITY) };
        Ok(())
    })
}

/// `hipMemCreate`: physical memory of `size` bytes on the properties' device.
///
/// # Safety
/// `prop` is NULL or valid for reads; `handle` is NULL or valid for a write.
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
        let p = unsafe { check_prop(g, prop) }?;
        if size as u64 % GRANULE != 0 {
            return Err(INVALID_VALUE);
        }
        let device = p.location.id as u32;
        let h = g.rt.backend().vmem_create(device, size)?;
        let info = Handle { bytes: size as u64, device, requested_handle_type: p.requestedHandleType, refs: 1 };
        lock(&VMM).handles.insert(h, info);
        // SAFETY: non-null; the caller's out-parameter.
        unsafe { handle.write(h as usize as *mut c_void) };
        Ok(())
    })
}

/// Drops one reference of `h`; the last releases it in the backend.
fn release(g: &Global, h: u64) -> HipResult {
    let mut vmm = lock(&VMM);
    let info = vmm.handles.get_mut(&h).ok_or(INVALID_VALUE)?;
    info.refs -= 1;
    if info.refs == 0 {
        vmm.handles.remove(&h);
        drop(vmm);
        g.rt.backend().vmem_release(h)?;
    }
    Ok(())
}

/// `hipMemRelease`: one reference of the handle fewer (the module docs).
#[no_mangle]
pub extern "C" fn hipMemRelease(handle: *mut c_void) -> i32 {
    api(|| {
        let g = global()?;
        if handle.is_null() {
            return Err(INVALID_VALUE);
        }
        release(g, handle as usize as u64)
    })
}

/// `hipMemAddressReserve`: `size` bytes of device address space aligned to `alignment` (0: the
/// granularity), at `addr` when that range is free and aligned.
///
/// # Safety
/// `ptr` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn hipMemAddressReserve(
    ptr: *mut *mut c_void,
    size: usize,
    alignment: usize,
    addr: *mut c_void,
    flags: c_ulonglong,
) -> i32 {
    api(|| {
        let g = global()?;
        if ptr.is_null() || size == 0 || flags != 0 || (alignment != 0 && !alignment.is_power_of_two()) {
            return Err(INVALID_VALUE);
        }
        if size as u64 % GRANULE != 0 {
            return Err(INVALID_VALUE);
        }
        let va = g.rt.backend().vmem_reserve(size, alignment, addr as usize as u64)?;
        lock(&VMM).reservations.insert(va, size as u64);
        // SAFETY: non-null; the caller's out-parameter.
        unsafe { ptr.write(va as usize as *mut c_void) };
        Ok(())
    })
}

/// `hipMemAddressFree`: the reservation starting at `ptr`, of `size` bytes, with nothing mapped.
#[no_mangle]
pub extern "C" fn hipMemAddressFree(ptr: *mut c_void, size: usize) -> i32 {
    api(|| {
        let g = global()?;
        let va = ptr as usize as u64;
        if va == 0 || size == 0 {
            return Err(INVALID_VALUE);
        }
        let mut vmm = lock(&VMM);
        if vmm.reservations.get(&va) != Some(&(size as u64)) {
            return Err(INVALID_VALUE);
        }
        if vmm.mappings.range(va..va + size as u64).next().is_some() {
            return Err(INVALID_VALUE);
        }
        g.rt.backend().vmem_free(va)?;
        vmm.reservations.remove(&va);
        Ok(())
    })
}

/// `hipMemMap`: all of `handle` (offset 0, its size) at `ptr`, inside a reservation, over no
/// mapping; no device has access until `hipMemSetAccess`.
#[no_mangle]
pub extern "C" fn hipMemMap(
    ptr: *mut c_void,
    size: usize,
    offset: usize,
    handle: *mut c_void,
    flags: c_ulonglong,
) -> i32 {
    api(|| {
        let g = global()?;
        let (va, h) = (ptr as usize as u64, handle as usize as u64);
        if va == 0 || h == 0 || size == 0 || flags != 0 || offset != 0 {
            return Err(INVALID_VALUE);
        }
        let mut vmm = lock(&VMM);
        let info = *vmm.handles.get(&h).ok_or(INVALID_VALUE)?;
        if info.bytes != size as u64 {
            return Err(INVALID_VALUE);
        }
        g.rt.backend().vmem_map(va, h)?;
        let buffer_id = crate::global::next_buffer_id();
        vmm.mappings.insert(va, Mapped { bytes: info.bytes, handle: h, access: 0, buffer_id });
        Ok(())
    })
}

/// Waits for the work of every device in `mask`.
fn wait_devices(g: &Global, mask: u64) -> HipResult {
    for d in (0..64).filter(|d| mask & (1 << d) != 0) {
        g.wait_idle_on(d)?;
    }
    Ok(())
}

/// `hipMemUnmap`: the mappings that make up `[ptr, ptr + size)`, after the work of the devices
/// with access.
#[no_mangle]
pub extern "C" fn hipMemUnmap(ptr: *mut c_void, size: usize) -> i32 {
    api(|| {
        let g = global()?;
        let va = ptr as usize as u64;
        if va == 0 || size == 0 {
            return Err(INVALID_VALUE);
        }
        let tiles = lock(&VMM).tiling(va, size as u64)?;
        wait_devices(g, tiles.iter().fold(0, |m, (_, t)| m | t.access))?;
        for (at, _) in tiles {
            g.rt.backend().vmem_unmap(at)?;
            lock(&VMM).mappings.remove(&at);
        }
        Ok(())
    })
}

/// `hipMemSetAccess`: each descriptor's access (none or read-write) for each mapping of
/// `[ptr, ptr + size)`.
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
        let descs = unsafe { std::slice::from_raw_parts(desc, count) };
        for d in descs {
            check_location(g, &d.location)?;
            if !matches!(d.flags, 0 | 1 | 3) {
                return Err(INVALID_VALUE);
            }
        }
        let tiles = lock(&VMM).tiling(ptr as usize as u64, size as u64)?;
        if descs.iter().any(|d| d.flags == 1) {
            return Err(NOT_SUPPORTED);
        }
        for d in descs {
            let (device, grant) = (d.location.id as u32, d.flags == ACCESS_READ_WRITE);
            let bit = 1u64 << device;
            if !grant {
                wait_devices(g, tiles.iter().fold(0, |m, (_, t)| m | (t.access & bit)))?;
            }
            for (at, _) in &tiles {
                g.rt.backend().vmem_set_access(*at, device, grant)?;
                if let Some(m) = lock(&VMM).mappings.get_mut(at) {
                    m.access = if grant { m.access | bit } else { m.access & !bit };
                }
            }
        }
        Ok(())
    })
}

/// `hipMemGetAccess`: the access of the location's device to the mapping holding `ptr`.
///
/// # Safety
/// `location` is NULL or valid for reads; `flags` is NULL or valid for a write.
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
        let l = unsafe { &*location };
        check_location(g, l)?;
        let (_, m) = lock(&VMM).holding(ptr as usize as u64).ok_or(INVALID_VALUE)?;
        let granted = m.access & (1 << l.id) != 0;
        // SAFETY: non-null; the caller's out-parameter.
        unsafe { flags.write(if granted { ACCESS_READ_WRITE as c_ulonglong } else { 0 }) };
        Ok(())
    })
}

/// `hipMemRetainAllocationHandle`: the handle mapped at `addr` (any address inside the
/// mapping), with one reference more; a handle already released is `hipErrorInvalidValue`.
///
/// # Safety
/// `handle` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn hipMemRetainAllocationHandle(handle: *mut *mut c_void, addr: *mut c_void) -> i32 {
    api(|| {
        global()?;
        if handle.is_null() || addr.is_null() {
            return Err(INVALID_VALUE);
        }
        let mut vmm = lock(&VMM);
        let (_, m) = vmm.holding(addr as usize as u64).ok_or(INVALID_VALUE)?;
        let info = vmm.handles.get_mut(&m.handle).ok_or(INVALID_VALUE)?;
        info.refs += 1;
        // SAFETY: non-null; the caller's out-parameter.
        unsafe { handle.write(m.handle as usize as *mut c_void) };
        Ok(())
    })
}

/// `hipMemGetAllocationPropertiesFromHandle`: the properties the handle was created with.
///
/// # Safety
/// `prop` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn hipMemGetAllocationPropertiesFromHandle(
    prop: *mut MemAllocationProp,
    handle: *mut c_void,
) -> i32 {
    api(|| {
        global()?;
        if prop.is_null() || handle.is_null() {
            return Err(INVALID_VALUE);
        }
        let info = *lock(&VMM).handles.get(&(handle as usize as u64)).ok_or(INVALID_VALUE)?;
        let p = MemAllocationProp {
            compressionType: 0,
            location: MemLocation { kind: LOCATION_DEVICE, id: info.device as c_int },
            requestedHandleType: info.requested_handle_type,
            type_: ALLOCATION_PINNED,
            usage: 0,
            win32HandleMetaData: std::ptr::null_mut(),
        };
        // SAFETY: non-null; the caller's out-parameter.
        unsafe { prop.write(p) };
        Ok(())
    })
}

/// Answers `hipErrorInvalidValue` when any of `ptrs` is NULL, else `hipErrorNotSupported`.
fn checked(ptrs: &[*const c_void]) -> i32 {
    api(|| {
        global()?;
        if ptrs.iter().any(|p| p.is_null()) {
            return Err(INVALID_VALUE);
        }
        Err(NOT_SUPPORTED)
    })
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
    checked(&[shareable, handle])
}

/// `hipMemImportFromShareableHandle`: not supported.
#[no_mangle]
pub extern "C" fn hipMemImportFromShareableHandle(
    handle: *mut *mut c_void,
    os_handle: *mut c_void,
    _kind: c_uint,
) -> i32 {
    checked(&[handle.cast(), os_handle])
}
