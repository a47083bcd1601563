//! [`aqueduct::Backend`] for [`Kfd`]: each method a thin call into the role that implements it
//! (docs/kfd-aql.md §1.5 queues, §2 doorbells, §4.1 signals).

use core::ptr::NonNull;
use portable_atomic::{AtomicU64, Ordering};

use aqueduct::aql::Condition;
use aqueduct::backend::{
    BuiltinKernel, DeviceInfo, HostFn, KernelSymbol, MemoryKind, QueueDesc, Timeout, VariableSymbol,
};
use aqueduct::{Backend, CuMask, Error, Priority, Result, SignalHandle};

use crate::driver::{GTT_FLAGS, VRAM_PUBLIC_FLAGS};
#[cfg(feature = "std")]
use crate::service;
use crate::{Allocation, Errno, HostCall, Kfd, KfdError, KfdModule, KfdQueue, Op, Sys, TIMESTAMP_HZ};

// SAFETY: signals are 64-byte slots of the CPU-mapped signal pool (live until the backend
// drops); a queue's ring, indices and kernel-argument area live in its buffers until
// `queue_destroy`; published packets are consumed by the device's command processor, or the
// queue's fault is reported through `queue_fault` (error word, latched device faults).
unsafe impl<S: Sys> Backend for Kfd<S> {
    type Queue = KfdQueue;
    type Module = KfdModule;

    fn device_count(&self) -> u32 {
        self.gpus.len() as u32
    }

    fn device_info(&self, device: u32) -> Result<DeviceInfo> {
        let g = self.gpus.get(device as usize).ok_or(Error::InvalidDevice)?;
        Ok(DeviceInfo {
            cu_count: g.node.props.cu_count(),
            gfx_target_version: g.node.props.gfx_target_version,
            timestamp_frequency: TIMESTAMP_HZ,
        })
    }

    fn queue_create(&self, device: u32, priority: Priority, cu_mask: Option<&CuMask>) -> Result<KfdQueue> {
        if device as usize >= self.gpus.len() {
            return Err(Error::InvalidDevice);
        }
        let r = self.create_queue(device, priority, cu_mask);
        self.record(r)
    }

    fn queue_desc(&self, queue: &KfdQueue) -> Result<QueueDesc> {
        let st = self.state.lock();
        let q = st.queues.get(usize::from(queue.slot)).and_then(|q| q.as_ref()).ok_or(Error::InvalidHandle)?;
        Ok(QueueDesc {
            ring: q.ring,
            kernarg_host: NonNull::new(q.kernarg.ptr::<u8>(0)).ok_or(Error::InvalidHandle)?,
            kernarg_device: q.kernarg.va,
            kernarg_slot_bytes: self.config.kernarg_bytes,
            kernarg_overhang_slots: self.kernarg_overhang(),
        })
    }

    fn ring_doorbell(&self, queue: &KfdQueue, index: u64) {
        // SAFETY: the doorbell slot of a live queue, 8-byte aligned and mapped until the backend
        // drops. It is only ever stored to atomically: streams that share a queue ring it from
        // several threads at once (a plain store would be a data race).
        let doorbell = unsafe { AtomicU64::from_ptr(queue.doorbell.as_ptr()) };
        // Ordering: Release: the packets' headers are visible before the doorbell (§2); a 64-bit
        // store of the last packet's index (doorbell type 2), as ROCr's screlease store.
        doorbell.store(index, Ordering::Release);
    }

    fn device_doorbell(&self, queue: &KfdQueue) -> Option<aqueduct::conditional::DeviceDoorbell> {
        // Doorbell type 2: the 64-bit index of the last packet (as ring_doorbell stores it).
        self.sys().device_doorbells().then(|| aqueduct::conditional::DeviceDoorbell {
            address: queue.doorbell.as_ptr().expose_provenance() as u64,
            offset: 0,
        })
    }

    fn queue_fault(&self, queue: &KfdQueue) -> Option<Error> {
        // After fork the child must not touch the inherited ring or doorbell (KFD answers
        // EBADF, the doorbell page is VM_DONTCOPY): every stream reports the fork.
        if self.check_process().is_err() {
            return Some(Error::from(KfdError::Forked));
        }
        // SAFETY: the error word lives in the queue's page until queue_destroy.
        let w = unsafe { queue.error_word.as_ref() };
        self.slot_fault(usize::from(queue.slot), usize::from(queue.gpu), Some(w))
    }

    fn queue_destroy(&self, queue: KfdQueue) {
        let r = self.destroy_queue(&queue);
        let _ = self.record(r);
    }

    fn signal_create(&self, initial: i64) -> Result<SignalHandle> {
        let pool = self.signal_pool.ok_or(Error::NotInitialized)?;
        let i = {
            let mut st = self.state.lock();
            let (w, word) =
                st.signal_used.iter_mut().enumerate().find(|(_, w)| **w != u64::MAX).ok_or(Error::OutOfMemory)?;
            let b = (!*word).trailing_zeros() as usize;
            *word |= 1 << b;
            w * 64 + b
        };
        let h = SignalHandle(pool.va + 64 * i as u64);
        // SAFETY: a slot of the live, CPU-mapped pool, now owned by the caller.
        let s = unsafe { h.get() };
        let page = self.event_page.map_or(0, |p| p.va);
        // Ordering: Relaxed; `reset` publishes the signal with a Release store of the value.
        s.kind.store(aqueduct::signal::kind::USER, Ordering::Relaxed);
        // Ordering: Relaxed; as above. Every signal posts the shared completion event (§4.1).
        s.event_mailbox_ptr.store(page + 8 * u64::from(self.completion_slot), Ordering::Relaxed);
        // Ordering: Relaxed; as above.
        s.event_id.store(self.completion_event, Ordering::Relaxed);
        s.reset(initial);
        Ok(h)
    }

    fn signal_destroy(&self, signal: SignalHandle) {
        if let Some(i) = self.signal_index(signal) {
            let mut st = self.state.lock();
            if let Some(w) = st.signal_used.get_mut(i / 64) {
                *w &= !(1u64 << (i % 64));
            }
        }
    }

    fn signal_wait(&self, signal: SignalHandle, cond: Condition, expected: i64, timeout: Timeout) -> Result<i64> {
        let s = self.signal_ref(signal)?;
        self.wait(s, signal, cond, expected, timeout)
    }

    fn memory_alloc(&self, device: u32, bytes: usize, kind: MemoryKind) -> Result<u64> {
        let gi = device as usize;
        let g = self.gpus.get(gi).ok_or(Error::InvalidDevice)?;
        if bytes == 0 {
            return Err(Error::InvalidValue);
        }
        self.record(self.check_process())?;
        // A cheap early refusal when the table is full; the slot itself is taken below, under
        // the same lock as the insert, so two threads allocating at once never pick one slot.
        if self.state.lock().allocations.is_full() {
            return Err(Error::OutOfMemory);
        }
        let bo = match kind {
            MemoryKind::Device if g.node.props.vram_bytes > 0 => {
                match self.alloc_bo(gi, bytes as u64, VRAM_PUBLIC_FLAGS, true) {
                    // A small BAR refuses CPU-visible VRAM: fall back to host memory.
                    Err(KfdError::Sys { op: Op::AllocMemory, errno: Errno::EINVAL }) => {
                        self.alloc_bo(gi, bytes as u64, GTT_FLAGS, true)
                    }
                    r => r,
                }
            }
            _ => self.alloc_bo(gi, bytes as u64, GTT_FLAGS, true),
        };
        let bo = self.record(bo)?;
        let mut st = self.state.lock();
        match st.allocations.vacant() {
            Some(s) => {
                *s = Some(Allocation { bo, registered: None });
                Ok(bo.va)
            }
            None => {
                drop(st);
                let _ = self.free_bo(&bo);
                Err(Error::OutOfMemory)
            }
        }
    }

    fn memory_free(&self, address: u64) -> Result<()> {
        let a = {
            let mut st = self.state.lock();
            let slot = st
                .allocations
                .iter_mut()
                .find(|a| a.is_some_and(|a| a.registered.is_none() && a.bo.va == address))
                .ok_or(Error::InvalidValue)?;
            slot.take().ok_or(Error::InvalidValue)?
        };
        self.record(self.check_process())?;
        self.ipc_unexport(address);
        let r = self.free_bo(&a.bo);
        self.record(r)
    }

    /// A `USERPTR` buffer over the pages of the range at a new GPU VA, mapped on every GPU
    /// (`Driver::register_user`; docs/kfd-aql.md §1.4). amdkfd's `EFAULT` (pages not mapped, or
    /// not readable) and `EPERM` (mapped read-only) are `InvalidValue`.
    fn host_register(&self, device: u32, host: u64, bytes: usize) -> Result<u64> {
        let g = self.gpus.get(device as usize).ok_or(Error::InvalidDevice)?;
        if host == 0 || bytes == 0 {
            return Err(Error::InvalidValue);
        }
        self.record(self.check_process())?;
        if self.state.lock().allocations.is_full() {
            return Err(Error::OutOfMemory);
        }
        let r = self.drv.register_user(g.node.gpu_id, host, bytes as u64, &self.gpu_ids);
        let unreachable = matches!(r, Err(KfdError::Sys { op: Op::AllocMemory, errno: Errno::EFAULT | Errno::EPERM }));
        let (bo, address) = self.record(r).map_err(|e| if unreachable { Error::InvalidValue } else { e })?;
        let mut st = self.state.lock();
        match st.allocations.vacant() {
            Some(s) => {
                *s = Some(Allocation { bo, registered: Some(address) });
                Ok(address)
            }
            None => {
                drop(st);
                let _ = self.free_bo(&bo);
                Err(Error::OutOfMemory)
            }
        }
    }

    fn host_unregister(&self, device_address: u64) -> Result<()> {
        let a = {
            let mut st = self.state.lock();
            let slot = st
                .allocations
                .iter_mut()
                .find(|a| a.is_some_and(|a| a.registered == Some(device_address)))
                .ok_or(Error::InvalidValue)?;
            slot.take().ok_or(Error::InvalidValue)?
        };
        self.record(self.check_process())?;
        let r = self.free_bo(&a.bo);
        self.record(r)
    }

    /// Virtual memory management over dma-buf export and import (`crate::vmem`; docs/kfd-aql.md
    /// §1.4, "Physical handles").
    fn vmem_create(&self, device: u32, bytes: usize) -> Result<u64> {
        self.vmem_create_impl(device, bytes)
    }

    fn vmem_release(&self, handle: u64) -> Result<()> {
        self.vmem_release_impl(handle)
    }

    fn vmem_reserve(&self, bytes: usize, alignment: usize, hint: u64) -> Result<u64> {
        self.vmem_reserve_impl(bytes, alignment, hint)
    }

    fn vmem_free(&self, address: u64) -> Result<()> {
        self.vmem_free_impl(address)
    }

    fn vmem_map(&self, address: u64, handle: u64) -> Result<()> {
        self.vmem_map_impl(address, handle)
    }

    fn vmem_unmap(&self, address: u64) -> Result<()> {
        self.vmem_unmap_impl(address)
    }

    fn vmem_set_access(&self, address: u64, device: u32, access: bool) -> Result<()> {
        self.vmem_set_access_impl(address, device, access)
    }

    fn builtin_kernel(&self, device: u32, kernel: BuiltinKernel) -> Result<u64> {
        let g = self.gpus.get(device as usize).ok_or(Error::InvalidDevice)?;
        let i = match kernel {
            BuiltinKernel::Copy => 0,
            BuiltinKernel::Fill => 1,
            BuiltinKernel::WriteValue => 2,
            BuiltinKernel::GraphScheduler => 3,
        };
        match g.blit.get(i).copied() {
            Some(0) | None => Err(Error::NotSupported),
            Some(k) => Ok(k),
        }
    }

    fn module_load(&self, device: u32, code_object: &[u8]) -> Result<KfdModule> {
        if device as usize >= self.gpus.len() {
            return Err(Error::InvalidDevice);
        }
        let r = self.load_module(device, code_object);
        self.record(r)
    }

    fn module_kernel(&self, module: &KfdModule, name: &str) -> Result<KernelSymbol> {
        let r = self.kernel_of(module, name);
        self.record(r)
    }

    fn module_variable(&self, module: &KfdModule, name: &str) -> Result<VariableSymbol> {
        let r = self.variable_of(module, name);
        self.record(r)
    }

    fn module_image(&self, module: &KfdModule) -> Option<(u64, u64)> {
        Some(module.image_range())
    }

    fn module_unload(&self, module: KfdModule) -> Result<()> {
        let r = self.unload_module(module);
        self.record(r)
    }

    fn reserve_scratch(&self, device: u32, bytes_per_work_item: u32) -> Result<()> {
        let r = self.reserve_scratch_on(device, bytes_per_work_item);
        self.record(r)
    }

    fn host_call(&self, start: SignalHandle, done: SignalHandle, f: HostFn) -> Result<()> {
        self.signal_index(start).ok_or(Error::InvalidHandle)?;
        self.signal_index(done).ok_or(Error::InvalidHandle)?;
        let call = HostCall { start, done, f };
        #[cfg(feature = "std")]
        {
            service::submit(self, call)
        }
        #[cfg(not(feature = "std"))]
        {
            let mut st = self.state.lock();
            let slot = st.host_calls.iter_mut().find(|c| c.is_none()).ok_or(Error::OutOfMemory)?;
            *slot = Some(call);
            Ok(())
        }
    }

    fn timestamp(&self) -> u64 {
        self.gpu_ids.first().and_then(|&g| self.drv.gpu_clock(g).ok()).unwrap_or(0)
    }
}
