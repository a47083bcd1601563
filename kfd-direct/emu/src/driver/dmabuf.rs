//! Exported buffers (docs/kfd-aql.md §1.4, "Physical handles"): `EXPORT_DMABUF` makes a VRAM or
//! GTT buffer a dma-buf fd, `IMPORT_DMABUF` makes a dma-buf a new buffer at a VA of the caller's
//! choice, `GET_DMABUF_INFO` describes one. Every buffer of a dma-buf stands for the same pool
//! pages, so two imports at two VAs alias each other in the translation; the pages go back to the
//! pool when the last reference (an fd or a buffer) goes.

use std::collections::BTreeSet;

use crate::abi::{limits, mem_flags, ExportDmabufArgs, GetDmabufInfoArgs, ImportDmabufArgs};
use crate::memory::{Backing, Bo, DRM_MMAP_BASE, GPUVM_BASE, GPUVM_LIMIT};
use crate::{Errno, SysResult};

use super::{Emu, FdEntry, FdKind, ProcState, Process};

/// One dma-buf: pool pages and who holds them.
#[derive(Debug, Clone, Copy)]
pub(super) struct DmaBuf {
    /// Pool offset of the pages.
    off: u64,
    /// Bytes (page-rounded).
    size: u64,
    /// The exported buffer's [`mem_flags`].
    flags: u32,
    /// The exporting device.
    gpu_id: u32,
    /// Open fds plus buffers of it.
    refs: u32,
}

impl Emu {
    /// `kfd_ioctl_export_dmabuf`: the device of the handle must exist (`EINVAL`) and the process
    /// must have used it (`EINVAL`), the handle must name a buffer (`EINVAL`); a USERPTR buffer
    /// cannot be exported (`EPERM`, as `amdgpu_gem_prime_export` answers), nor — here — a
    /// doorbell or MMIO page (`EINVAL`). A buffer exported twice is one dma-buf.
    pub(super) fn export_dmabuf(&self, proc: &Process, a: &mut ExportDmabufArgs) -> SysResult<()> {
        let gpu_id = (a.handle >> 32) as u32;
        self.node_index(gpu_id).ok_or(Errno::EINVAL)?;
        let st = proc.lock();
        if !st.pdds.contains_key(&gpu_id) {
            return Err(Errno::EINVAL);
        }
        let mut vm = proc.vm.write();
        let bo = vm.bos.get_mut(&a.handle).ok_or(Errno::EINVAL)?;
        if bo.flags & mem_flags::USERPTR != 0 {
            return Err(Errno::EPERM);
        }
        let Backing::Pool(off) = bo.backing else { return Err(Errno::EINVAL) };
        if bo.flags & (mem_flags::VRAM | mem_flags::GTT) == 0 {
            return Err(Errno::EINVAL);
        }
        let mut bufs = self.m.dmabufs.lock().unwrap_or_else(|e| e.into_inner());
        let id = match bo.dmabuf {
            Some(id) => {
                let d = bufs.get_mut(&id).ok_or(Errno::EINVAL)?;
                d.refs += 1;
                id
            }
            None => {
                // Ordering: Relaxed; a unique counter.
                let id = self.m.next_dmabuf.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                bufs.insert(id, DmaBuf { off, size: bo.size, flags: bo.flags, gpu_id, refs: 2 });
                bo.dmabuf = Some(id);
                id
            }
        };
        drop(bufs);
        // Ordering: Relaxed; a unique counter.
        let fd = self.m.next_fd.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.lock_fds().insert(fd, FdEntry { kind: FdKind::DmaBuf(id), owner: self.pid });
        a.dmabuf_fd = fd as u32;
        Ok(())
    }

    /// The dma-buf behind `fd`: not an open fd of the process → `EBADF`, another kind of file →
    /// `EINVAL` (`dma_buf_get`).
    fn dmabuf_of_fd(&self, fd: u32) -> SysResult<(u64, DmaBuf)> {
        let e = *self.lock_fds().get(&(fd as i32)).ok_or(Errno::EBADF)?;
        if e.owner != self.pid {
            return Err(Errno::EBADF);
        }
        let FdKind::DmaBuf(id) = e.kind else { return Err(Errno::EINVAL) };
        let d = *self.m.dmabufs.lock().unwrap_or_else(|e| e.into_inner()).get(&id).ok_or(Errno::EINVAL)?;
        Ok((id, d))
    }

    /// `kfd_ioctl_import_dmabuf`: an unknown device → `EINVAL`; the fd as `dma_buf_get` checks
    /// it; a device whose VM the process has not acquired → `ENODEV`; the VA as for any buffer
    /// (page-aligned, inside GPUVM, overlapping nothing: `EINVAL`). The new buffer is not mapped
    /// on any GPU yet (`MAP_MEMORY_TO_GPU` does that) and counts against no device's VRAM.
    pub(super) fn import_dmabuf(&self, proc: &Process, a: &mut ImportDmabufArgs) -> SysResult<()> {
        self.node_index(a.gpu_id).ok_or(Errno::EINVAL)?;
        let (id, d) = self.dmabuf_of_fd(a.dmabuf_fd)?;
        let mut st = proc.lock();
        self.bound_pdd(&mut st, a.gpu_id, Errno::ENODEV)?;
        let mut vm = proc.vm.write();
        if a.va_addr % limits::PAGE_SIZE != 0
            || a.va_addr < GPUVM_BASE
            || a.va_addr.checked_add(d.size).is_none_or(|end| end - 1 > GPUVM_LIMIT)
            || vm.overlaps(a.va_addr, d.size)
        {
            return Err(Errno::EINVAL);
        }
        {
            let mut bufs = self.m.dmabufs.lock().unwrap_or_else(|e| e.into_inner());
            bufs.get_mut(&id).ok_or(Errno::EINVAL)?.refs += 1;
        }
        let handle = vm.new_handle(a.gpu_id);
        vm.insert(Bo {
            handle,
            gpu_id: a.gpu_id,
            va: a.va_addr,
            size: d.size,
            flags: d.flags,
            backing: Backing::Pool(d.off),
            mmap_offset: DRM_MMAP_BASE + d.off,
            mapped: BTreeSet::new(),
            queue_refs: 0,
            dmabuf: Some(id),
        });
        a.handle = handle;
        Ok(())
    }

    /// `kfd_ioctl_get_dmabuf_info`: the size, exporting device and flags of a dma-buf; the
    /// emulator keeps no metadata (its size is 0).
    pub(super) fn get_dmabuf_info(&self, a: &mut GetDmabufInfoArgs) -> SysResult<()> {
        if self.m.nodes.is_empty() {
            return Err(Errno::EINVAL);
        }
        let (_, d) = self.dmabuf_of_fd(a.dmabuf_fd)?;
        a.size = d.size;
        a.gpu_id = d.gpu_id;
        a.flags = d.flags;
        a.metadata_size = 0;
        Ok(())
    }

    /// Drops one reference to dma-buf `id`; the last returns its pages to the pool (and, for
    /// VRAM, to the exporting device's budget in `st`, the process that allocated it).
    pub(super) fn dmabuf_put(&self, id: u64, st: Option<&mut ProcState>) {
        let mut bufs = self.m.dmabufs.lock().unwrap_or_else(|e| e.into_inner());
        let Some(d) = bufs.get_mut(&id) else { return };
        d.refs = d.refs.saturating_sub(1);
        if d.refs > 0 {
            return;
        }
        let d = *d;
        bufs.remove(&id);
        drop(bufs);
        self.m.pool.release(d.off, d.size);
        if d.flags & mem_flags::VRAM != 0 {
            if let Some(p) = st.and_then(|st| st.pdds.get_mut(&d.gpu_id)) {
                p.vram_used = p.vram_used.saturating_sub(d.size);
            }
        }
    }

    /// The pool offset `mmap` of a dma-buf fd maps: from offset 0 (`EINVAL` otherwise), at most
    /// its size (`EINVAL`).
    pub(super) fn dmabuf_mmap_offset(&self, id: u64, len: u64, offset: u64) -> SysResult<u64> {
        let bufs = self.m.dmabufs.lock().unwrap_or_else(|e| e.into_inner());
        let d = bufs.get(&id).ok_or(Errno::EINVAL)?;
        if offset != 0 || len > d.size {
            return Err(Errno::EINVAL);
        }
        Ok(d.off)
    }
}
