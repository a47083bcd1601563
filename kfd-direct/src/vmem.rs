//! Virtual memory management on amdkfd (docs/kfd-aql.md §1.4, "Physical handles";
//! docs/architecture.md §2, "Virtual memory"), the way ROCr's `hsa_amd_vmem_*` builds it:
//!
//! - *physical memory* is a VRAM buffer at a VA of its own that no GPU maps, exported as a
//!   dma-buf (`ALLOC_MEMORY_OF_GPU`, `EXPORT_DMABUF`); its handle is that VA;
//! - a *reservation* is address space only: a `PROT_NONE` reservation like every buffer's
//!   (GPU VA == CPU VA), at the caller's hint when it is free, aligned by over-reserving;
//! - *mapping* a handle imports its dma-buf at the address (`IMPORT_DMABUF`), a new buffer over
//!   the same pages, so mappings of one handle alias; *access* maps that buffer on a GPU
//!   (`MAP_MEMORY_TO_GPU`); unmapping is `UNMAP_MEMORY_FROM_GPU` and `FREE_MEMORY_OF_GPU`;
//! - releasing a handle frees the exported buffer and closes the fd: the imports keep the
//!   pages until they are unmapped.
//!
//! Without `std` the tables are fixed ([`MAX_VMEM_HANDLES`], [`MAX_VMEM_RESERVATIONS`],
//! [`MAX_VMEM_MAPPINGS`]; running out is `OutOfMemory`); with it they grow (`crate::slots`).

use aqueduct::backend::VMEM_GRANULARITY;
use aqueduct::{Error, Result};

use crate::abi::{self, ioctl};
use crate::driver::{Bo, Driver, GTT_FLAGS, PAGE, VRAM_FLAGS};
use crate::on_drop::OnDrop;
use crate::slots::Slots;
use crate::sys::Errno;
use crate::sys::{Mapping, RawFd, Sys};
use crate::{Kfd, KfdError, KfdResult, Op};

/// Live physical handles at most without `std`.
pub const MAX_VMEM_HANDLES: usize = 256;
/// Live reservations at most without `std`.
pub const MAX_VMEM_RESERVATIONS: usize = 64;
/// Live mappings at most without `std`.
pub const MAX_VMEM_MAPPINGS: usize = 512;

/// `O_RDWR | O_CLOEXEC` (Linux), the dma-buf fd's flags.
const DMABUF_FD_FLAGS: u32 = 0o2 | 0o2_000_000;

const GRANULE: u64 = VMEM_GRANULARITY as u64;

#[derive(Debug, Clone, Copy)]
struct Physical {
    /// The exported buffer (its VA is the handle).
    bo: Bo,
    /// Its dma-buf.
    fd: RawFd,
    /// The device index.
    gpu: u8,
}

#[derive(Debug, Clone, Copy)]
struct Reservation {
    va: u64,
    size: u64,
    /// The whole reservation made (larger than `size` when it was over-reserved to align).
    raw: u64,
    raw_size: u64,
}

/// The buffer handle of a mapping whose import is still under way (amdkfd's handles are
/// `gpu_id << 32 | idr`, never 0).
const PENDING: u64 = 0;

#[derive(Debug, Clone, Copy)]
struct VMapping {
    va: u64,
    size: u64,
    /// The imported buffer's KFD handle.
    handle: u64,
    /// Device indices with access, one bit each.
    access: u16,
}

/// An allocation exported for another process (`Kfd::ipc_export`).
#[derive(Debug, Clone, Copy)]
struct Export {
    /// The allocation's VA.
    va: u64,
    /// Its dma-buf, open until the allocation is freed.
    fd: RawFd,
}

/// Another process's dma-buf imported here (`Kfd::ipc_import`).
#[derive(Debug, Clone, Copy)]
struct Import {
    va: u64,
    /// The imported buffer's KFD handle.
    handle: u64,
    /// The reservation made for it.
    raw: u64,
    raw_size: u64,
}

/// An allocation exported as a dma-buf for another process ([`Kfd::ipc_export`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpcExport {
    /// The dma-buf fd, open in this process until the allocation is freed.
    pub fd: RawFd,
    /// The allocation's start.
    pub base: u64,
    /// Its bytes (page-rounded).
    pub size: u64,
}

/// Live exported allocations and imports at most without `std`.
pub const MAX_IPC: usize = 64;

/// The backend's virtual-memory tables (inside its state lock).
pub(crate) struct VmemState {
    physical: Slots<Physical, MAX_VMEM_HANDLES>,
    reservations: Slots<Reservation, MAX_VMEM_RESERVATIONS>,
    mappings: Slots<VMapping, MAX_VMEM_MAPPINGS>,
    exports: Slots<Export, MAX_IPC>,
    imports: Slots<Import, MAX_IPC>,
}

impl VmemState {
    pub(crate) const EMPTY: VmemState = VmemState {
        physical: Slots::EMPTY,
        reservations: Slots::EMPTY,
        mappings: Slots::EMPTY,
        exports: Slots::EMPTY,
        imports: Slots::EMPTY,
    };
}

impl<S: Sys> Driver<S> {
    /// Physical memory: a buffer of `bytes` on `gpu_id` with `flags` at a VA of its own, mapped
    /// on no GPU, exported as a dma-buf. Returns the buffer and the dma-buf fd; every failure
    /// undoes the earlier steps.
    pub fn physical_create(&self, gpu_id: u32, bytes: u64, flags: u32) -> KfdResult<(Bo, RawFd)> {
        // SAFETY: a fresh reservation at an address of the kernel's choice.
        let va = unsafe { self.sys().mmap(core::ptr::null_mut(), bytes as usize, Mapping::Reserve) }
            .map_err(|errno| KfdError::Sys { op: Op::ReserveVa, errno })?
            .expose_provenance() as u64;
        let unreserve = OnDrop::new(|| self.unreserve(va, bytes));
        let mut a = abi::AllocMemoryOfGpuArgs { va_addr: va, size: bytes, gpu_id, flags, ..Default::default() };
        // SAFETY: `mmap_offset` is 0 and the flags are not USERPTR: no user pointer.
        unsafe { self.ioctl::<ioctl::AllocMemoryOfGpu>(Op::AllocMemory, &mut a) }?;
        let handle = a.handle;
        let free = OnDrop::new(|| {
            let _ = self.free_handle(handle);
        });
        let mut e = abi::ExportDmabufArgs { handle, flags: DMABUF_FD_FLAGS, dmabuf_fd: 0 };
        self.call::<ioctl::ExportDmabuf>(Op::ExportDmabuf, &mut e)?;
        free.defuse();
        unreserve.defuse();
        Ok((Bo { va, size: bytes, handle, cpu: false }, e.dmabuf_fd as RawFd))
    }

    /// Frees the exported buffer of [`Driver::physical_create`], its VA and its fd (imports of
    /// the dma-buf keep the pages).
    pub fn physical_release(&self, bo: &Bo, fd: RawFd) -> KfdResult<()> {
        self.free_handle(bo.handle)?;
        self.unreserve(bo.va, bo.size);
        let _ = self.sys().close(fd);
        Ok(())
    }

    /// `IMPORT_DMABUF` of `fd` at `va` on `gpu_id`; returns the new buffer's handle.
    pub fn import_dmabuf(&self, va: u64, gpu_id: u32, fd: RawFd) -> KfdResult<u64> {
        let mut a = abi::ImportDmabufArgs { va_addr: va, handle: 0, gpu_id, dmabuf_fd: fd as u32 };
        self.call::<ioctl::ImportDmabuf>(Op::ImportDmabuf, &mut a)?;
        Ok(a.handle)
    }

    /// `GET_DMABUF_INFO` of `fd`: the dma-buf's bytes and exporting device's GPU id (no
    /// metadata asked for).
    pub fn dmabuf_info(&self, fd: RawFd) -> KfdResult<(u64, u32)> {
        let mut a = abi::GetDmabufInfoArgs { dmabuf_fd: fd as u32, ..Default::default() };
        // SAFETY: `metadata_ptr` is 0 with a size of 0: the kernel writes no metadata.
        unsafe { self.ioctl::<ioctl::GetDmabufInfo>(Op::DmabufInfo, &mut a) }?;
        Ok((a.size, a.gpu_id))
    }

    /// Reserves `bytes` of VA aligned to `align` (a power of two ≥ a page): at `hint` when the
    /// kernel grants it there, else by over-reserving `bytes + align` and using its aligned
    /// part. Returns `(start, reservation start, reservation bytes)`.
    pub fn reserve_aligned(&self, bytes: u64, align: u64, hint: u64) -> KfdResult<(u64, u64, u64)> {
        let reserve = |at: u64, len: u64| {
            // SAFETY: a fresh reservation; `at` is only a hint (nothing mapped is replaced).
            unsafe {
                self.sys().mmap(core::ptr::with_exposed_provenance_mut(at as usize), len as usize, Mapping::Reserve)
            }
            .map(|p| p.expose_provenance() as u64)
            .map_err(|errno| KfdError::Sys { op: Op::ReserveVa, errno })
        };
        if hint != 0 && hint % align == 0 {
            let at = reserve(hint, bytes)?;
            if at == hint {
                return Ok((at, at, bytes));
            }
            self.unreserve(at, bytes);
        }
        let len = bytes.checked_add(align).ok_or(KfdError::InvalidArgument)?;
        let raw = reserve(0, len)?;
        Ok((raw.next_multiple_of(align), raw, len))
    }
}

impl<S: Sys> Kfd<S> {
    pub(crate) fn vmem_create_impl(&self, device: u32, bytes: usize) -> Result<u64> {
        let g = self.gpus.get(device as usize).ok_or(Error::InvalidDevice)?;
        let bytes = bytes as u64;
        if bytes == 0 || bytes % GRANULE != 0 {
            return Err(Error::InvalidValue);
        }
        self.record(self.check_process())?;
        if self.state.lock().vmem.physical.is_full() {
            return Err(Error::OutOfMemory);
        }
        let flags = if g.node.props.vram_bytes > 0 { VRAM_FLAGS } else { GTT_FLAGS };
        let (bo, fd) = self.record(self.drv.physical_create(g.node.gpu_id, bytes, flags))?;
        let mut st = self.state.lock();
        match st.vmem.physical.vacant() {
            Some(s) => {
                *s = Some(Physical { bo, fd, gpu: device as u8 });
                Ok(bo.va)
            }
            None => {
                drop(st);
                let _ = self.drv.physical_release(&bo, fd);
                Err(Error::OutOfMemory)
            }
        }
    }

    pub(crate) fn vmem_release_impl(&self, handle: u64) -> Result<()> {
        let p = {
            let mut st = self.state.lock();
            let slot = st
                .vmem
                .physical
                .iter_mut()
                .find(|p| p.is_some_and(|p| p.bo.va == handle))
                .ok_or(Error::InvalidValue)?;
            slot.take().ok_or(Error::InvalidValue)?
        };
        self.record(self.check_process())?;
        let r = self.drv.physical_release(&p.bo, p.fd);
        self.record(r)
    }

    pub(crate) fn vmem_reserve_impl(&self, bytes: usize, alignment: usize, hint: u64) -> Result<u64> {
        let bytes = bytes as u64;
        if bytes == 0 || bytes % GRANULE != 0 || (alignment != 0 && !alignment.is_power_of_two()) {
            return Err(Error::InvalidValue);
        }
        let align = (alignment as u64).max(GRANULE);
        self.record(self.check_process())?;
        if self.state.lock().vmem.reservations.is_full() {
            return Err(Error::OutOfMemory);
        }
        let (va, raw, raw_size) = self.record(self.drv.reserve_aligned(bytes, align, hint))?;
        let mut st = self.state.lock();
        match st.vmem.reservations.vacant() {
            Some(s) => {
                *s = Some(Reservation { va, size: bytes, raw, raw_size });
                Ok(va)
            }
            None => {
                drop(st);
                self.drv.unreserve(raw, raw_size);
                Err(Error::OutOfMemory)
            }
        }
    }

    pub(crate) fn vmem_free_impl(&self, address: u64) -> Result<()> {
        let r = {
            let mut st = self.state.lock();
            let vm = &mut st.vmem;
            let i =
                vm.reservations.iter().position(|r| r.is_some_and(|r| r.va == address)).ok_or(Error::InvalidValue)?;
            let r = vm.reservations.get(i).copied().flatten().ok_or(Error::InvalidValue)?;
            if vm.mappings.iter().flatten().any(|m| m.va >= r.va && m.va < r.va + r.size) {
                return Err(Error::InvalidValue);
            }
            vm.reservations.get_mut(i).and_then(Option::take).ok_or(Error::InvalidValue)?
        };
        self.drv.unreserve(r.raw, r.raw_size);
        Ok(())
    }

    pub(crate) fn vmem_map_impl(&self, address: u64, handle: u64) -> Result<()> {
        // The range is claimed (a mapping with no buffer yet, `PENDING`) before the import, so
        // that a concurrent map of an overlapping range is refused while this one runs.
        let p = {
            let mut st = self.state.lock();
            let vm = &mut st.vmem;
            let p = vm.physical.iter().flatten().find(|p| p.bo.va == handle).copied().ok_or(Error::InvalidValue)?;
            let size = p.bo.size;
            let end = address.checked_add(size).ok_or(Error::InvalidValue)?;
            let inside = vm.reservations.iter().flatten().any(|r| address >= r.va && end <= r.va + r.size);
            let overlaps = vm.mappings.iter().flatten().any(|m| address < m.va + m.size && m.va < end);
            if address % PAGE != 0 || !inside || overlaps {
                return Err(Error::InvalidValue);
            }
            let slot = vm.mappings.vacant().ok_or(Error::OutOfMemory)?;
            *slot = Some(VMapping { va: address, size, handle: PENDING, access: 0 });
            p
        };
        let unclaim = OnDrop::new(|| {
            if let Some(s) = self.state.lock().vmem.mappings.iter_mut().find(|m| m.is_some_and(|m| m.va == address)) {
                *s = None;
            }
        });
        self.record(self.check_process())?;
        let gpu_id = self.gpus.get(p.gpu as usize).ok_or(Error::InvalidDevice)?.node.gpu_id;
        let kfd_handle = self.record(self.drv.import_dmabuf(address, gpu_id, p.fd))?;
        let mut st = self.state.lock();
        let m = st.vmem.mappings.iter_mut().flatten().find(|m| m.va == address && m.handle == PENDING);
        match m {
            Some(m) => {
                m.handle = kfd_handle;
                drop(st);
                unclaim.defuse();
                Ok(())
            }
            None => {
                drop(st);
                unclaim.defuse();
                let _ = self.drv.free_handle(kfd_handle);
                Err(Error::InvalidValue)
            }
        }
    }

    /// The GPU ids of the devices in `mask`.
    fn gpu_ids_of(&self, mask: u16) -> heapless::Vec<u32, { crate::MAX_GPUS }> {
        self.gpus.iter().enumerate().filter(|(i, _)| mask & (1 << i) != 0).map(|(_, g)| g.node.gpu_id).collect()
    }

    pub(crate) fn vmem_unmap_impl(&self, address: u64) -> Result<()> {
        let m = {
            let mut st = self.state.lock();
            let slot = st
                .vmem
                .mappings
                .iter_mut()
                .find(|m| m.is_some_and(|m| m.va == address && m.handle != PENDING))
                .ok_or(Error::InvalidValue)?;
            slot.take().ok_or(Error::InvalidValue)?
        };
        self.record(self.check_process())?;
        let r = self.unmap_buffer(&m);
        self.record(r)
    }

    fn unmap_buffer(&self, m: &VMapping) -> KfdResult<()> {
        let ids = self.gpu_ids_of(m.access);
        if !ids.is_empty() {
            self.drv.map_op::<ioctl::UnmapMemoryFromGpu>(Op::UnmapMemory, m.handle, &ids)?;
        }
        self.drv.free_handle(m.handle)
    }

    pub(crate) fn vmem_set_access_impl(&self, address: u64, device: u32, access: bool) -> Result<()> {
        let g = self.gpus.get(device as usize).ok_or(Error::InvalidDevice)?;
        let bit = 1u16 << device;
        let m = {
            let st = self.state.lock();
            let m = st.vmem.mappings.iter().flatten().find(|m| m.va == address && m.handle != PENDING);
            m.copied().ok_or(Error::InvalidValue)?
        };
        if (m.access & bit != 0) == access {
            return Ok(());
        }
        self.record(self.check_process())?;
        let ids = [g.node.gpu_id];
        let r = if access {
            self.drv.map_op::<ioctl::MapMemoryToGpu>(Op::MapMemory, m.handle, &ids)
        } else {
            self.drv.map_op::<ioctl::UnmapMemoryFromGpu>(Op::UnmapMemory, m.handle, &ids)
        };
        self.record(r)?;
        let mut st = self.state.lock();
        if let Some(m) = st.vmem.mappings.iter_mut().flatten().find(|m| m.va == address) {
            if access {
                m.access |= bit;
            } else {
                m.access &= !bit;
            }
        }
        Ok(())
    }

    /// Exports the allocation that starts at `address` (memory of [`aqueduct::Backend::memory_alloc`])
    /// as a dma-buf another process can import ([`Kfd::ipc_import`]) once it holds the fd
    /// (docs/kfd-aql.md §1.4, "Sharing between processes"). The fd stays open until the
    /// allocation is freed; exporting it again answers the same fd. Anything but an allocation's
    /// start is `InvalidValue`.
    pub fn ipc_export(&self, address: u64) -> Result<IpcExport> {
        let bo = {
            let st = self.state.lock();
            let a = st.allocations.iter().flatten().find(|a| a.registered.is_none() && a.bo.va == address);
            let bo = a.map(|a| a.bo).ok_or(Error::InvalidValue)?;
            if let Some(e) = st.vmem.exports.iter().flatten().find(|e| e.va == address) {
                return Ok(IpcExport { fd: e.fd, base: bo.va, size: bo.size });
            }
            if st.vmem.exports.is_full() {
                return Err(Error::OutOfMemory);
            }
            bo
        };
        self.record(self.check_process())?;
        let mut e = abi::ExportDmabufArgs { handle: bo.handle, flags: DMABUF_FD_FLAGS, dmabuf_fd: 0 };
        self.record(self.drv.call::<ioctl::ExportDmabuf>(Op::ExportDmabuf, &mut e))?;
        let fd = e.dmabuf_fd as RawFd;
        let mut st = self.state.lock();
        if let Some(e) = st.vmem.exports.iter().flatten().find(|e| e.va == address).copied() {
            // Another thread exported it meanwhile: one fd per allocation.
            drop(st);
            let _ = self.drv.sys().close(fd);
            return Ok(IpcExport { fd: e.fd, base: bo.va, size: bo.size });
        }
        match st.vmem.exports.vacant() {
            Some(s) => {
                *s = Some(Export { va: address, fd });
                Ok(IpcExport { fd, base: bo.va, size: bo.size })
            }
            None => {
                drop(st);
                let _ = self.drv.sys().close(fd);
                Err(Error::OutOfMemory)
            }
        }
    }

    /// Closes the dma-buf of an exported allocation (the allocation is being freed; importers
    /// keep the pages). Nothing for an allocation never exported.
    pub(crate) fn ipc_unexport(&self, address: u64) {
        let e = {
            let mut st = self.state.lock();
            st.vmem.exports.iter_mut().find(|e| e.is_some_and(|e| e.va == address)).and_then(Option::take)
        };
        if let Some(e) = e {
            let _ = self.drv.sys().close(e.fd);
        }
    }

    /// Imports the dma-buf `fd` (another process's export, its fd obtained in this process) at a
    /// VA of its own, reachable by every device; `device` is the importing device. Returns the
    /// VA and the bytes. The caller keeps `fd` (the import holds the pages without it). A file
    /// that is not a dma-buf, or one whose pages are gone, is `InvalidValue`.
    pub fn ipc_import(&self, device: u32, fd: RawFd) -> Result<(u64, u64)> {
        let g = self.gpus.get(device as usize).ok_or(Error::InvalidDevice)?;
        self.record(self.check_process())?;
        let invalid = |e: KfdError| match e {
            KfdError::Sys { errno: Errno::EBADF | Errno::EINVAL, .. } => Error::InvalidValue,
            e => Error::from(e),
        };
        if self.state.lock().vmem.imports.is_full() {
            return Err(Error::OutOfMemory);
        }
        let (size, _) = self.drv.dmabuf_info(fd).map_err(invalid)?;
        if size == 0 {
            return Err(Error::InvalidValue);
        }
        let (va, raw, raw_size) = self.record(self.drv.reserve_aligned(size, GRANULE, 0))?;
        let unreserve = OnDrop::new(|| self.drv.unreserve(raw, raw_size));
        let handle = self.drv.import_dmabuf(va, g.node.gpu_id, fd).map_err(invalid)?;
        let free = OnDrop::new(|| {
            let _ = self.drv.free_handle(handle);
        });
        self.record(self.drv.map_op::<ioctl::MapMemoryToGpu>(Op::MapMemory, handle, &self.gpu_ids))?;
        let mut st = self.state.lock();
        let slot = st.vmem.imports.vacant().ok_or(Error::OutOfMemory)?;
        *slot = Some(Import { va, handle, raw, raw_size });
        free.defuse();
        unreserve.defuse();
        Ok((va, size))
    }

    /// Ends an import of [`Kfd::ipc_import`] at `address` (the caller has waited for the
    /// devices first): unmapped from every device, freed, its VA released. Anything else is
    /// `InvalidValue`.
    pub fn ipc_close(&self, address: u64) -> Result<()> {
        let i = {
            let mut st = self.state.lock();
            let slot = st.vmem.imports.iter_mut().find(|i| i.is_some_and(|i| i.va == address));
            slot.and_then(Option::take).ok_or(Error::InvalidValue)?
        };
        self.record(self.check_process())?;
        let r = self.close_import(&i);
        self.record(r)
    }

    fn close_import(&self, i: &Import) -> KfdResult<()> {
        self.drv.map_op::<ioctl::UnmapMemoryFromGpu>(Op::UnmapMemory, i.handle, &self.gpu_ids)?;
        self.drv.free_handle(i.handle)?;
        self.drv.unreserve(i.raw, i.raw_size);
        Ok(())
    }

    /// Ends every mapping, handle and reservation (the backend's teardown).
    pub(crate) fn vmem_teardown(&self) {
        let vm = {
            let mut st = self.state.lock();
            core::mem::replace(&mut st.vmem, VmemState::EMPTY)
        };
        for i in vm.imports.iter().flatten() {
            let _ = self.close_import(i);
        }
        for e in vm.exports.iter().flatten() {
            let _ = self.drv.sys().close(e.fd);
        }
        for m in vm.mappings.iter().flatten().filter(|m| m.handle != PENDING) {
            let _ = self.unmap_buffer(m);
        }
        for p in vm.physical.iter().flatten() {
            let _ = self.drv.physical_release(&p.bo, p.fd);
        }
        for r in vm.reservations.iter().flatten() {
            self.drv.unreserve(r.raw, r.raw_size);
        }
    }
}
