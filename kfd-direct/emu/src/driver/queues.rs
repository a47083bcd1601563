//! Queues (docs/kfd-aql.md §1.5): creation with the queue-buffer checks, destruction, updates, CU
//! masks; AQL queues go to the device's packet processor, SDMA queues to its SDMA engine.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::abi::{self, limits, mem_flags, mmap_offset, queue_type, CreateQueueArgs, SetCuMaskArgs, UpdateQueueArgs};
use crate::aql_queue::{AqlQueue, QueueParams, QueuePtrs};
use crate::memory::Vm;
use crate::sdma::{SdmaPtrs, SdmaQueue};
use crate::{Errno, SysResult};

use super::{access_ok, copy_in, Emu, Process, QueueHw, QueueRec};

impl Emu {
    /// `kfd_queue_buffer_get`: a BO mapped on `gpu` whose mapping starts exactly at `addr` and
    /// (when `size != 0`) is exactly `size` bytes long.
    pub(super) fn queue_buffer(vm: &Vm, gpu: u32, addr: u64, size: u64) -> SysResult<u64> {
        let bo = vm.bo_at(addr & !(limits::PAGE_SIZE - 1)).ok_or(Errno::EINVAL)?;
        if !bo.mapped.contains(&gpu) || bo.va != addr & !(limits::PAGE_SIZE - 1) || (size != 0 && bo.size != size) {
            return Err(Errno::EINVAL);
        }
        Ok(bo.handle)
    }

    pub(super) fn create_queue(&self, proc: &Process, a: &mut CreateQueueArgs) -> SysResult<()> {
        // set_queue_properties_from_user
        if a.queue_percentage & 0xff > limits::MAX_QUEUE_PERCENTAGE || a.queue_priority > limits::MAX_QUEUE_PRIORITY {
            return Err(Errno::EINVAL);
        }
        if a.ring_base_address != 0 && !access_ok(a.ring_base_address, 8) {
            return Err(Errno::EFAULT);
        }
        if a.ring_size != 0 && !a.ring_size.is_power_of_two() {
            return Err(Errno::EINVAL);
        }
        if a.ring_size < limits::MIN_QUEUE_RING_SIZE {
            a.ring_size = limits::MIN_QUEUE_RING_SIZE;
        }
        if !access_ok(a.read_pointer_address, 4) || !access_ok(a.write_pointer_address, 4) {
            return Err(Errno::EFAULT);
        }
        if (a.eop_buffer_address != 0 && !access_ok(a.eop_buffer_address, 4))
            || (a.ctx_save_restore_address != 0 && !access_ok(a.ctx_save_restore_address, 4))
        {
            return Err(Errno::EFAULT);
        }
        match a.queue_type {
            queue_type::COMPUTE_AQL => {}
            queue_type::SDMA | queue_type::SDMA_XGMI => return self.create_sdma_queue(proc, a),
            // SDMA_BY_ENG_ID exists from 1.17 only.
            queue_type::SDMA_BY_ENG_ID if self.m.config.version >= (1, 17) => return self.create_sdma_queue(proc, a),
            // PM4 queues are valid for amdkfd but not emulated.
            _ => return Err(Errno::ENOTSUPP),
        }
        let idx = self.node_index(a.gpu_id).ok_or(Errno::EINVAL)?;
        let node = self.m.nodes[idx];
        let mut st = proc.lock();
        let qid = (0..limits::MAX_QUEUES_PER_PROCESS).find(|q| !st.queues.contains_key(q)).ok_or(Errno::ENOMEM)?;
        let pdd = self.bound_pdd(&mut st, a.gpu_id, Errno::ESRCH)?;
        let slot = (0..limits::MAX_QUEUES_PER_PROCESS).find(|s| !pdd.doorbell_used.contains(s)).ok_or(Errno::ENOMEM)?;
        let slice = self.doorbell_slice(pdd)?;
        // kfd_queue_acquire_buffers
        let sizes = node.props.queue_sizes();
        let mut vm = proc.vm.write();
        let gpu = a.gpu_id;
        // Queue-buffer validation (`kfd_queue_acquire_buffers`) arrived with KFD 1.16 (Linux
        // 6.12); older drivers, such as the 1.8–1.11 ROCm 5.2 talks to, only need the buffers to
        // be reachable. They are then pinned by whichever BO holds them.
        let legacy = self.m.config.version < (1, 16);
        let queue_buffer = |vm: &Vm, addr: u64, size: u64| {
            if legacy {
                vm.bo_at(addr).filter(|b| b.mapped.contains(&gpu)).map(|b| b.handle).ok_or(Errno::EINVAL)
            } else {
                Self::queue_buffer(vm, gpu, addr, size)
            }
        };
        let wptr_bo = queue_buffer(&vm, a.write_pointer_address, limits::PAGE_SIZE)?;
        let rptr_bo = queue_buffer(&vm, a.read_pointer_address, limits::PAGE_SIZE)?;
        // AQL: both indices live in one amd_queue_t at +56 / +128.
        let page = a.read_pointer_address & !(limits::PAGE_SIZE - 1);
        if a.read_pointer_address - page != abi::AMD_QUEUE_READ_DISPATCH_ID
            || a.write_pointer_address != page + abi::AMD_QUEUE_WRITE_DISPATCH_ID
        {
            return Err(Errno::EINVAL);
        }
        let ring_bo = queue_buffer(&vm, a.ring_base_address, u64::from(a.ring_size))?;
        if a.ring_base_address % limits::PAGE_SIZE != 0 {
            return Err(Errno::EINVAL);
        }
        let mut bos = vec![wptr_bo, rptr_bo, ring_bo];
        if a.eop_buffer_address != 0 {
            if a.eop_buffer_size != sizes.eop_buffer_size {
                return Err(Errno::EINVAL);
            }
            bos.push(queue_buffer(&vm, a.eop_buffer_address, a.eop_buffer_size)?);
        }
        if !legacy || a.ctx_save_restore_address != 0 {
            if a.ctl_stack_size != sizes.ctl_stack_size || a.ctx_save_restore_size < sizes.cwsr_size {
                return Err(Errno::EINVAL);
            }
            let cwsr_total = node.props.cwsr_bo_size_for(a.ctx_save_restore_size);
            bos.push(queue_buffer(&vm, a.ctx_save_restore_address, cwsr_total)?);
        }

        let ring_exec = vm.bos.get(&ring_bo).is_some_and(|b| b.flags & mem_flags::EXECUTABLE != 0);
        let tr = |va: u64, len: u64| vm.translate(&self.m.pool, gpu, va, len).map_err(|_| Errno::EINVAL);
        let ptrs = QueuePtrs {
            ring: tr(a.ring_base_address, u64::from(a.ring_size))?,
            ring_va: a.ring_base_address,
            ring_packets: a.ring_size / 64,
            read_dispatch_id: tr(a.read_pointer_address, 8)?,
            queue_properties: tr(page + abi::AMD_QUEUE_PROPERTIES, 4)?,
            queue_va: page,
            doorbell: self.m.pool.ptr(slice + u64::from(slot) * limits::DOORBELL_BYTES),
        };
        tr(a.write_pointer_address, 8)?;
        let device = &self.m.devices[idx];
        let params = QueueParams {
            priority: a.queue_priority,
            percentage: a.queue_percentage,
            cu_enabled: node.props.cu_count(),
            workers: device.all_workers(),
            order: device.next_order(),
            cwsr_va: a.ctx_save_restore_address,
            noexec_ring: if ring_exec { None } else { Some(a.ring_base_address) },
            adversarial: self.m.config.adversarial_seed,
        };
        // SAFETY: every pointer was translated from a BO that is now pinned by the queue
        // (queue_refs below: unmap → EBUSY, free needs an unmap) or is the process doorbell slice,
        // which lives as long as the pool; the ring size is a power of two (checked above).
        let hw = unsafe { AqlQueue::new(gpu, Arc::clone(&proc.vm), Arc::clone(&proc.events), ptrs, params) }
            .ok_or(Errno::EINVAL)?;
        for h in &bos {
            if let Some(bo) = vm.bos.get_mut(h) {
                bo.queue_refs += 1;
            }
        }
        drop(vm);
        pdd.doorbell_used.insert(slot);
        let hw = Arc::new(hw);
        st.queues.insert(
            qid,
            QueueRec { hw: QueueHw::Aql(Arc::clone(&hw)), gpu_id: gpu, device: idx, bos, doorbell_slot: slot },
        );
        drop(st);
        self.m.devices[idx].add_queue(hw);
        self.m.engines[idx].start();
        a.queue_id = qid;
        a.doorbell_offset =
            mmap_offset::TYPE_DOORBELL | mmap_offset::gpu_id(gpu) | (u64::from(slot) * limits::DOORBELL_BYTES);
        Ok(())
    }

    /// CREATE_QUEUE of an SDMA queue (`KFD_IOC_QUEUE_TYPE_SDMA`, `_SDMA_XGMI`, and
    /// `_SDMA_BY_ENG_ID` from 1.17): the ring and the two index words are checked as amdkfd
    /// checks them (`kfd_queue_acquire_buffers` from 1.16: page-sized BOs for the indices, an
    /// exact BO for the ring; only reachability before), no EOP or CWSR area is needed, and the
    /// queue gets the first free slot of the device's engines of that kind
    /// (`allocate_sdma_queue`: bit `b` is engine `b % engines`, queue `b / engines`; `ENOMEM`
    /// when none is free) and the SOC15 static doorbell of that engine and queue.
    pub(super) fn create_sdma_queue(&self, proc: &Process, a: &mut CreateQueueArgs) -> SysResult<()> {
        const QUEUES_PER_ENGINE: u32 = 8;
        let idx = self.node_index(a.gpu_id).ok_or(Errno::EINVAL)?;
        let node = self.m.nodes[idx];
        let (pcie, xgmi) = (node.props.num_sdma_engines, node.props.num_sdma_xgmi_engines);
        let (first, count) = match a.queue_type {
            queue_type::SDMA => (0, pcie),
            queue_type::SDMA_XGMI => (pcie, xgmi),
            _ => {
                if a.sdma_engine_id >= pcie + xgmi {
                    return Err(Errno::EINVAL);
                }
                (a.sdma_engine_id, 1)
            }
        };
        if count == 0 {
            return Err(Errno::ENOMEM);
        }
        let mut st = proc.lock();
        let qid = (0..limits::MAX_QUEUES_PER_PROCESS).find(|q| !st.queues.contains_key(q)).ok_or(Errno::ENOMEM)?;
        let pdd = self.bound_pdd(&mut st, a.gpu_id, Errno::ESRCH)?;
        let slice = self.doorbell_slice(pdd)?;
        let mut vm = proc.vm.write();
        let gpu = a.gpu_id;
        let legacy = self.m.config.version < (1, 16);
        let ring_bytes = u64::from(a.ring_size);
        let buffer = |vm: &Vm, addr: u64, size: u64| {
            if legacy {
                vm.bo_at(addr).filter(|b| b.mapped.contains(&gpu)).map(|b| b.handle).ok_or(Errno::EINVAL)
            } else {
                Self::queue_buffer(vm, gpu, addr, size)
            }
        };
        let bos = vec![
            buffer(&vm, a.write_pointer_address, limits::PAGE_SIZE)?,
            buffer(&vm, a.read_pointer_address, limits::PAGE_SIZE)?,
            buffer(&vm, a.ring_base_address, ring_bytes)?,
        ];
        // The engine writes its 64-bit read offset back to the rptr word; the ring base is
        // programmed in 256-byte units (`rb_base = addr >> 8`).
        if a.read_pointer_address % 8 != 0 {
            return Err(Errno::EINVAL);
        }
        let ring_va = a.ring_base_address & !0xff;
        let tr = |va: u64, len: u64| vm.translate(&self.m.pool, gpu, va, len).map_err(|_| Errno::EINVAL);
        let ring = tr(ring_va, ring_bytes)?;
        let rptr = tr(a.read_pointer_address, 8)?;
        tr(a.write_pointer_address, 8)?;
        let doorbells = &pdd.doorbell_used;
        let pool = &self.m.pool;
        let (vm_arc, events) = (&proc.vm, &proc.events);
        let (priority, percentage) = (a.queue_priority, a.queue_percentage);
        let mut chosen = 0;
        let q = self.m.devices[idx].add_sdma_queue(|existing| {
            let taken = |e: u32, n: u32| existing.iter().any(|q| q.engine == e && q.engine_queue == n);
            let (engine, engine_queue) = (0..count * QUEUES_PER_ENGINE)
                .map(|b| (first + b % count, b / count))
                .find(|&(e, n)| !taken(e, n))
                .ok_or(Errno::ENOMEM)?;
            // SOC15 static SDMA doorbells (Vega20 layout): 0x100 + 10 per engine, odd queues
            // in the mirror half 512 doorbells up.
            let slot = 0x100 + engine * 10 + (engine_queue & 1) * 512 + (engine_queue >> 1);
            if doorbells.contains(&slot) {
                return Err(Errno::ENOMEM);
            }
            chosen = slot;
            let ptrs = SdmaPtrs {
                ring,
                ring_va,
                ring_bytes,
                rptr,
                doorbell: pool.ptr(slice + u64::from(slot) * limits::DOORBELL_BYTES),
            };
            // SAFETY: the ring and rptr pointers were translated from BOs that are now pinned by
            // the queue (queue_refs below); the doorbell is in the process slice, which lives as
            // long as the pool; rptr is 8-byte aligned (checked), the ring 256-byte aligned.
            let q = unsafe {
                SdmaQueue::new(
                    gpu,
                    qid,
                    engine,
                    engine_queue,
                    Arc::clone(vm_arc),
                    Arc::clone(events),
                    ptrs,
                    priority,
                    percentage,
                )
            };
            q.map(Arc::new).ok_or(Errno::EINVAL)
        })?;
        for h in &bos {
            if let Some(bo) = vm.bos.get_mut(h) {
                bo.queue_refs += 1;
            }
        }
        drop(vm);
        let slot = chosen;
        if let Some(pdd) = st.pdds.get_mut(&gpu) {
            pdd.doorbell_used.insert(slot);
        }
        st.queues.insert(qid, QueueRec { hw: QueueHw::Sdma(q), gpu_id: gpu, device: idx, bos, doorbell_slot: slot });
        drop(st);
        self.m.engines[idx].start();
        a.queue_id = qid;
        a.doorbell_offset =
            mmap_offset::TYPE_DOORBELL | mmap_offset::gpu_id(gpu) | (u64::from(slot) * limits::DOORBELL_BYTES);
        Ok(())
    }

    pub(super) fn destroy_queue(&self, proc: &Process, qid: u32) -> SysResult<()> {
        let mut st = proc.lock();
        let rec = st.queues.remove(&qid).ok_or(Errno::EINVAL)?;
        match &rec.hw {
            QueueHw::Aql(hw) => self.m.devices[rec.device].remove_queue(hw),
            QueueHw::Sdma(q) => self.m.devices[rec.device].remove_sdma_queue(q),
        }
        let mut vm = proc.vm.write();
        for h in &rec.bos {
            if let Some(bo) = vm.bos.get_mut(h) {
                bo.queue_refs = bo.queue_refs.saturating_sub(1);
            }
        }
        drop(vm);
        if let Some(pdd) = st.pdds.get_mut(&rec.gpu_id) {
            pdd.doorbell_used.remove(&rec.doorbell_slot);
        }
        Ok(())
    }

    pub(super) fn update_queue(&self, proc: &Process, a: UpdateQueueArgs) -> SysResult<()> {
        if a.queue_percentage & 0xff > limits::MAX_QUEUE_PERCENTAGE || a.queue_priority > limits::MAX_QUEUE_PRIORITY {
            return Err(Errno::EINVAL);
        }
        if a.ring_base_address != 0 && !access_ok(a.ring_base_address, 8) {
            return Err(Errno::EFAULT);
        }
        if a.ring_size != 0 && !a.ring_size.is_power_of_two() {
            return Err(Errno::EINVAL);
        }
        let mut st = proc.lock();
        let rec = st.queues.get_mut(&a.queue_id).ok_or(Errno::EFAULT)?;
        let hw = match &rec.hw {
            QueueHw::Aql(hw) => Arc::clone(hw),
            QueueHw::Sdma(q) => {
                let q = Arc::clone(q);
                return self.update_sdma_queue(proc, rec, &q, a);
            }
        };
        let mut ring = hw.lock_ring();
        if a.ring_base_address != ring.va || u64::from(a.ring_size) != ring.bytes {
            if a.ring_size < 64 {
                return Err(Errno::EINVAL);
            }
            let mut vm = proc.vm.write();
            let new_bo = Self::queue_buffer(&vm, hw.gpu_id, a.ring_base_address, u64::from(a.ring_size))?;
            let p = vm
                .translate(&self.m.pool, hw.gpu_id, a.ring_base_address, u64::from(a.ring_size))
                .map_err(|_| Errno::EINVAL)?;
            // The new ring BO is pinned below (queue_refs) while the queue uses it; its size is a
            // power of two (checked above) and its base page-aligned (a BO).
            ring.base = std::ptr::NonNull::new(p).ok_or(Errno::EINVAL)?;
            ring.packets = a.ring_size / 64;
            ring.va = a.ring_base_address;
            ring.bytes = u64::from(a.ring_size);
            hw.set_ring(&ring);
            // Swap the ring's pin (the ring is the third queue buffer).
            if let Some(old) = rec.bos.get(2).copied() {
                if let Some(bo) = vm.bos.get_mut(&old) {
                    bo.queue_refs = bo.queue_refs.saturating_sub(1);
                }
            }
            if let Some(bo) = vm.bos.get_mut(&new_bo) {
                bo.queue_refs += 1;
            }
            if let Some(slot) = rec.bos.get_mut(2) {
                *slot = new_bo;
            }
        }
        // Ordering: Relaxed; scheduling parameters, stored under the ring lock so the change is
        // in effect when the ioctl returns (amdkfd preempts and reloads the queue).
        hw.percentage.store(a.queue_percentage, Ordering::Relaxed);
        hw.priority.store(a.queue_priority, Ordering::Relaxed);
        drop(ring);
        self.m.devices[rec.device].touch();
        Ok(())
    }

    /// UPDATE_QUEUE of an SDMA queue: a new ring (an exact, GPU-mapped BO; the read offset
    /// carries over), percentage and priority.
    pub(super) fn update_sdma_queue(
        &self,
        proc: &Process,
        rec: &mut QueueRec,
        q: &SdmaQueue,
        a: UpdateQueueArgs,
    ) -> SysResult<()> {
        let mut ring = q.lock_ring();
        if a.ring_base_address & !0xff != ring.va || u64::from(a.ring_size) != ring.bytes {
            let mut vm = proc.vm.write();
            let bytes = u64::from(a.ring_size);
            let new_bo = Self::queue_buffer(&vm, q.gpu_id, a.ring_base_address, bytes)?;
            let va = a.ring_base_address & !0xff;
            let p = vm.translate(&self.m.pool, q.gpu_id, va, bytes).map_err(|_| Errno::EINVAL)?;
            // SAFETY: the new ring BO is pinned below (queue_refs) while the queue uses it.
            if !unsafe { SdmaQueue::replace_ring(&mut ring, p, va, bytes) } {
                return Err(Errno::EINVAL);
            }
            if let Some(old) = rec.bos.get(2).copied() {
                if let Some(bo) = vm.bos.get_mut(&old) {
                    bo.queue_refs = bo.queue_refs.saturating_sub(1);
                }
            }
            if let Some(bo) = vm.bos.get_mut(&new_bo) {
                bo.queue_refs += 1;
            }
            if let Some(slot) = rec.bos.get_mut(2) {
                *slot = new_bo;
            }
        }
        // Ordering: Relaxed; scheduling parameters, stored under the ring lock (see update_queue).
        q.percentage.store(a.queue_percentage, Ordering::Relaxed);
        q.priority.store(a.queue_priority, Ordering::Relaxed);
        Ok(())
    }

    pub(super) fn set_cu_mask(&self, proc: &Process, a: SetCuMaskArgs) -> SysResult<()> {
        if a.num_cu_mask % 32 != 0 || a.num_cu_mask == 0 {
            return Err(Errno::EINVAL);
        }
        let bits = a.num_cu_mask.min(1024);
        let words = copy_in(a.cu_mask_ptr, bits as usize / 8)?;
        let st = proc.lock();
        let rec = st.queues.get(&a.queue_id).ok_or(Errno::EFAULT)?;
        let cus = self.m.nodes[rec.device].props.cu_count();
        let on = |i: &u32| words[(*i / 8) as usize] & (1 << (i % 8)) != 0;
        let enabled = (0..bits.min(cus)).filter(on).count() as u32;
        let workers = self.m.devices[rec.device].workers_for((0..bits.min(cus)).filter(on));
        // An SDMA queue accepts the mask and ignores it, as its MQD has no CU mask.
        if let QueueHw::Aql(hw) = &rec.hw {
            let _ring = hw.lock_ring();
            // Ordering: Relaxed; scheduling parameters, stored under the ring lock (see
            // update_queue); dispatches launched from now on use them.
            hw.cu_enabled.store(enabled, Ordering::Relaxed);
            hw.workers.store(workers, Ordering::Relaxed);
        }
        Ok(())
    }
}
