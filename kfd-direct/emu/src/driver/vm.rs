//! The process's GPU memory (docs/kfd-aql.md §1.4): VM acquisition, apertures, allocation, mapping,
//! and the doorbell and MMIO pages.

use std::collections::BTreeSet;

use crate::abi::{
    limits, mem_flags, mmap_offset, AcquireVmArgs, AllocMemoryOfGpuArgs, GetProcessAperturesNewArgs, MapMemoryArgs,
    ProcessDeviceApertures,
};
use crate::memory::{Backing, Bo, DRM_MMAP_BASE, GPUVM_BASE, GPUVM_LIMIT, LDS_APERTURE_BASE, SCRATCH_APERTURE_BASE};
use crate::{Errno, SysResult};

use super::{args, copy_in, copy_out, put, user_ok, Emu, Fd, FdKind, Pdd, ProcState, Process};

impl Emu {
    pub(super) fn get_process_apertures(&self, buf: &mut [u8]) -> SysResult<()> {
        let mut a: GetProcessAperturesNewArgs = args(buf);
        let n = self.m.nodes.len() as u32;
        if a.num_of_nodes == 0 {
            a.num_of_nodes = n;
            put(buf, &a);
            return Ok(());
        }
        let k = a.num_of_nodes.min(n);
        let mut bytes = Vec::with_capacity(k as usize * size_of::<ProcessDeviceApertures>());
        for node in self.m.nodes.iter().take(k as usize) {
            let ap = ProcessDeviceApertures {
                lds_base: LDS_APERTURE_BASE,
                lds_limit: LDS_APERTURE_BASE + (4 << 30) - 1,
                scratch_base: SCRATCH_APERTURE_BASE,
                scratch_limit: SCRATCH_APERTURE_BASE + (4 << 30) - 1,
                gpuvm_base: GPUVM_BASE,
                gpuvm_limit: GPUVM_LIMIT,
                gpu_id: node.gpu_id,
                pad: 0,
            };
            let mut e = [0u8; size_of::<ProcessDeviceApertures>()];
            put(&mut e, &ap);
            bytes.extend_from_slice(&e);
        }
        copy_out(a.kfd_process_device_apertures_ptr, &bytes)?;
        a.num_of_nodes = k;
        put(buf, &a);
        Ok(())
    }

    pub(super) fn acquire_vm(&self, proc: &Process, a: AcquireVmArgs) -> SysResult<()> {
        let entry = self.lock_fds().get(&(a.drm_fd as Fd)).copied().ok_or(Errno::EINVAL)?;
        let idx = self.node_index(a.gpu_id).ok_or(Errno::EINVAL)?;
        if entry.kind != FdKind::Render(idx) {
            return Err(Errno::EINVAL);
        }
        let mut st = proc.lock();
        let pdd = st.pdds.entry(a.gpu_id).or_insert_with(|| Pdd {
            drm_fd: None,
            doorbell: None,
            doorbell_used: BTreeSet::new(),
            mmio: None,
            vram_used: 0,
        });
        match pdd.drm_fd {
            Some(fd) if fd == a.drm_fd as Fd => Ok(()),
            Some(_) => Err(Errno::EBUSY),
            None => {
                pdd.drm_fd = Some(a.drm_fd as Fd);
                Ok(())
            }
        }
    }

    /// The bound pdd of a GPU: unknown gpu → EINVAL, VM not acquired → `unbound`.
    pub(super) fn bound_pdd<'s>(&self, st: &'s mut ProcState, gpu_id: u32, unbound: Errno) -> SysResult<&'s mut Pdd> {
        self.node_index(gpu_id).ok_or(Errno::EINVAL)?;
        match st.pdds.get_mut(&gpu_id) {
            Some(p) if p.drm_fd.is_some() => Ok(p),
            _ => Err(unbound),
        }
    }

    pub(super) fn doorbell_slice(&self, pdd: &mut Pdd) -> SysResult<u64> {
        if let Some(off) = pdd.doorbell {
            return Ok(off);
        }
        let off = self.m.pool.alloc(limits::DOORBELL_SLICE_BYTES).ok_or(Errno::ENOMEM)?;
        pdd.doorbell = Some(off);
        Ok(off)
    }

    pub(super) fn mmio_page(&self, pdd: &mut Pdd) -> SysResult<u64> {
        if let Some(off) = pdd.mmio {
            return Ok(off);
        }
        let off = self.m.pool.alloc(limits::PAGE_SIZE).ok_or(Errno::ENOMEM)?;
        pdd.mmio = Some(off);
        Ok(off)
    }

    pub(super) fn alloc_memory(&self, proc: &Process, a: &mut AllocMemoryOfGpuArgs) -> SysResult<()> {
        if a.size == 0 {
            return Err(Errno::EINVAL);
        }
        let idx = self.node_index(a.gpu_id).ok_or(Errno::EINVAL)?;
        let flags = a.flags;
        if flags & mem_flags::VRAM != 0 && flags & mem_flags::PUBLIC != 0 && !self.m.config.large_bar {
            return Err(Errno::EINVAL);
        }
        let mut st = proc.lock();
        let pdd = self.bound_pdd(&mut st, a.gpu_id, Errno::ENODEV)?;
        let size = a.size.checked_next_multiple_of(limits::PAGE_SIZE).ok_or(Errno::EINVAL)?;
        let mmap_off;
        let backing = if flags & mem_flags::VRAM != 0 {
            if pdd.vram_used + size > self.m.nodes[idx].props.vram_bytes {
                return Err(Errno::ENOMEM);
            }
            let off = self.m.pool.alloc(size).ok_or(Errno::ENOMEM)?;
            pdd.vram_used += size;
            mmap_off = DRM_MMAP_BASE + off;
            Backing::Pool(off)
        } else if flags & mem_flags::GTT != 0 {
            let off = self.m.pool.alloc(size).ok_or(Errno::ENOMEM)?;
            mmap_off = DRM_MMAP_BASE + off;
            Backing::Pool(off)
        } else if flags & mem_flags::USERPTR != 0 {
            let cpu = a.mmap_offset;
            if cpu % limits::PAGE_SIZE != 0 || !user_ok(cpu, size) {
                return Err(Errno::EFAULT);
            }
            user_pages_writable(cpu, size)?;
            mmap_off = cpu;
            Backing::User(cpu)
        } else if flags & mem_flags::DOORBELL != 0 {
            if a.size != limits::DOORBELL_SLICE_BYTES {
                return Err(Errno::EINVAL);
            }
            mmap_off = mmap_offset::TYPE_DOORBELL | mmap_offset::gpu_id(a.gpu_id);
            Backing::Pool(self.doorbell_slice(pdd)?)
        } else if flags & mem_flags::MMIO_REMAP != 0 {
            if a.size != limits::PAGE_SIZE {
                return Err(Errno::EINVAL);
            }
            mmap_off = mmap_offset::TYPE_MMIO | mmap_offset::gpu_id(a.gpu_id);
            Backing::Pool(self.mmio_page(pdd)?)
        } else {
            return Err(Errno::EINVAL);
        };
        let release = |this: &Self| {
            if flags & (mem_flags::VRAM | mem_flags::GTT) != 0 {
                if let Backing::Pool(off) = backing {
                    this.m.pool.release(off, size);
                }
            }
        };
        let mut vm = proc.vm.write();
        if a.va_addr % limits::PAGE_SIZE != 0
            || a.va_addr < GPUVM_BASE
            || a.va_addr.checked_add(size).is_none_or(|end| end - 1 > GPUVM_LIMIT)
            || vm.overlaps(a.va_addr, size)
        {
            release(self);
            if flags & mem_flags::VRAM != 0 {
                if let Some(p) = st.pdds.get_mut(&a.gpu_id) {
                    p.vram_used -= size;
                }
            }
            return Err(Errno::EINVAL);
        }
        let handle = vm.new_handle(a.gpu_id);
        vm.insert(Bo {
            handle,
            gpu_id: a.gpu_id,
            va: a.va_addr,
            size,
            flags,
            backing,
            mmap_offset: mmap_off,
            mapped: BTreeSet::new(),
            queue_refs: 0,
            dmabuf: None,
        });
        a.handle = handle;
        a.mmap_offset = mmap_off;
        Ok(())
    }

    pub(super) fn free_memory(&self, proc: &Process, handle: u64) -> SysResult<()> {
        let mut st = proc.lock();
        if proc.events.page_handle() == Some(handle) && handle != 0 {
            return Err(Errno::EPERM);
        }
        let mut vm = proc.vm.write();
        let bo = vm.bos.get(&handle).ok_or(Errno::EINVAL)?;
        if !bo.mapped.is_empty() {
            return Err(Errno::EBUSY);
        }
        let bo = vm.remove(handle).ok_or(Errno::EINVAL)?;
        if let Some(id) = bo.dmabuf {
            // The pages belong to the dma-buf: they go when its last reference does.
            drop(vm);
            self.dmabuf_put(id, Some(&mut st));
            return Ok(());
        }
        if bo.flags & (mem_flags::VRAM | mem_flags::GTT) != 0 {
            if let Backing::Pool(off) = bo.backing {
                self.m.pool.release(off, bo.size);
            }
        }
        if bo.flags & mem_flags::VRAM != 0 {
            if let Some(p) = st.pdds.get_mut(&bo.gpu_id) {
                p.vram_used = p.vram_used.saturating_sub(bo.size);
            }
        }
        Ok(())
    }

    pub(super) fn map_memory(&self, proc: &Process, a: &mut MapMemoryArgs, map: bool) -> SysResult<()> {
        if a.n_devices == 0 || a.n_success > a.n_devices {
            return Err(Errno::EINVAL);
        }
        let ids = copy_in(a.device_ids_array_ptr, a.n_devices as usize * 4)?;
        let ids: Vec<u32> = ids.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        let mut st = proc.lock();
        let owner = (a.handle >> 32) as u32;
        self.bound_pdd(&mut st, owner, Errno::ENODEV)?;
        let mut vm = proc.vm.write();
        if !vm.bos.contains_key(&a.handle) {
            return Err(Errno::EINVAL);
        }
        for (i, &gpu) in ids.iter().enumerate().skip(a.n_success as usize) {
            if let Err(e) = self.bound_pdd(&mut st, gpu, Errno::EINVAL) {
                a.n_success = i as u32;
                return Err(e);
            }
            let Some(bo) = vm.bos.get_mut(&a.handle) else { return Err(Errno::EINVAL) };
            if map {
                bo.mapped.insert(gpu);
            } else {
                if bo.queue_refs > 0 {
                    a.n_success = i as u32;
                    return Err(Errno::EBUSY);
                }
                if !bo.mapped.remove(&gpu) {
                    a.n_success = i as u32;
                    return Err(Errno::EINVAL);
                }
            }
        }
        a.n_success = a.n_devices;
        Ok(())
    }
}

/// amdkfd faults a USERPTR buffer's pages in for writing when it allocates it (`hmm_range_fault`
/// with write access required): a page no mapping covers, or one mapped without read access, is
/// `EFAULT`; a page mapped read-only is `EPERM` (docs/kfd-aql.md §1.4). The process's mappings
/// come from `/proc/self/maps` (the emulator lives in the process whose pages these are).
fn user_pages_writable(start: u64, len: u64) -> SysResult<()> {
    let maps = std::fs::read_to_string("/proc/self/maps").map_err(|_| Errno::EFAULT)?;
    let end = start.checked_add(len).ok_or(Errno::EFAULT)?;
    let mut at = start;
    for line in maps.lines() {
        let mut fields = line.split_ascii_whitespace();
        let (Some(range), Some(perms)) = (fields.next(), fields.next()) else { continue };
        let Some((lo, hi)) = range.split_once('-') else { continue };
        let (Ok(lo), Ok(hi)) = (u64::from_str_radix(lo, 16), u64::from_str_radix(hi, 16)) else { continue };
        if hi <= at {
            continue;
        }
        if lo > at {
            // A hole before the next mapping.
            return Err(Errno::EFAULT);
        }
        let perms = perms.as_bytes();
        if perms.first() != Some(&b'r') {
            return Err(Errno::EFAULT);
        }
        if perms.get(1) != Some(&b'w') {
            return Err(Errno::EPERM);
        }
        at = hi;
        if at >= end {
            return Ok(());
        }
    }
    Err(Errno::EFAULT)
}
