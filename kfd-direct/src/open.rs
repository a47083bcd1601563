//! Bring-up and teardown of [`Kfd`] (docs/kfd-aql.md §1.2), its accessors, and the buffer
//! helpers every role uses. `Kfd::open` needs no rollback guard: once the `/dev/kfd` fd is open
//! the backend value exists, and dropping it on an error runs the same teardown as any drop.

use portable_atomic::{AtomicBool, AtomicU64, AtomicU8};

use aqueduct::{Error, Result};

use crate::abi::{self, event_type, limits};
use crate::driver::{Bo, Driver, GTT_FLAGS};
use crate::slots::Slots;
use crate::topology::{self, GpuNode, QueueSizes};
#[cfg(not(feature = "std"))]
use crate::MAX_HOST_CALLS;
use crate::{Errno, Gpu, Kfd, KfdConfig, KfdError, KfdResult, Op, QueueRec, State, Sys, MAX_GPUS, MAX_QUEUES, SIGNALS};

impl<S: Sys> Kfd<S> {
    /// Brings the backend up (§1.2): topology, `/dev/kfd`, interface version, render nodes and
    /// VMs, apertures, the event page and events, the signal pool and the blit kernels. On any
    /// failure, what was acquired is released in reverse order and the error names the step.
    pub fn open(sys: S, config: KfdConfig) -> KfdResult<Kfd<S>> {
        if !config.ring_packets.is_power_of_two() || config.ring_packets < 16 || config.kernarg_bytes % 16 != 0 {
            return Err(KfdError::InvalidArgument);
        }
        let mut nodes: heapless::Vec<GpuNode, MAX_GPUS> = heapless::Vec::new();
        topology::discover(&sys, |g| {
            // GPUs beyond the capacity are left alone.
            let _ = nodes.push(g);
            Ok(())
        })?;
        if nodes.is_empty() {
            return Err(KfdError::NoDevice);
        }
        let pid = sys.process_id();
        let kfd = match sys.open("/dev/kfd") {
            Ok(fd) => fd,
            Err(Errno::ENOENT | Errno::ENODEV | Errno(6)) => return Err(KfdError::NoDevice),
            Err(errno) => return Err(KfdError::Sys { op: Op::OpenKfd, errno }),
        };
        let mut k = Kfd {
            drv: Driver::new(sys, kfd),
            pid,
            version: (0, 0),
            config,
            gpus: heapless::Vec::new(),
            gpu_ids: heapless::Vec::new(),
            event_page: None,
            completion_event: 0,
            completion_slot: 0,
            memory_event: 0,
            hw_event: 0,
            signal_pool: None,
            event_age: AtomicU64::new(1),
            state: spin::Mutex::new(State {
                queues: [None; MAX_QUEUES],
                allocations: Slots::EMPTY,
                signal_used: [0; SIGNALS / 64],
                #[cfg(not(feature = "std"))]
                host_calls: [None; MAX_HOST_CALLS],
                doorbells: [0; MAX_GPUS],
                scratch: [crate::scratch::QueueScratch::NONE; MAX_QUEUES],
                scratch_lane: [0; MAX_GPUS],
                last_error: None,
                vmem: crate::vmem::VmemState::EMPTY,
            }),
            queue_faults: [const { AtomicU8::new(0) }; MAX_QUEUES],
            device_faults: [const { AtomicU8::new(0) }; MAX_GPUS],
            device_fault_va: [const { AtomicU64::new(0) }; MAX_GPUS],
            any_fault: AtomicBool::new(false),
            #[cfg(feature = "std")]
            service: std::sync::Mutex::new(None),
        };
        // From here on, dropping `k` on an error releases what it holds (Drop → teardown).
        k.version = k.drv.version()?;
        if k.version.0 != 1 {
            return Err(KfdError::UnsupportedVersion { major: k.version.0, minor: k.version.1 });
        }
        for n in &nodes {
            let mut path = topology::Path::new();
            core::fmt::Write::write_fmt(&mut path, format_args!("/dev/dri/renderD{}", n.props.drm_render_minor))
                .map_err(|_| KfdError::Capacity("render path"))?;
            let fd = match k.drv.sys().open(&path) {
                Ok(fd) => fd,
                // Hidden by the container or cgroup: not ours to use (§5).
                Err(Errno::ENOENT | Errno::EPERM | Errno::EACCES) => continue,
                Err(errno) => return Err(KfdError::Sys { op: Op::OpenRenderNode, errno }),
            };
            let gpu = Gpu {
                node: *n,
                render_fd: fd,
                sizes: n.props.queue_sizes(),
                lds_base: 0,
                scratch_base: 0,
                blit: [0; 4],
                blit_image: None,
            };
            if k.gpus.push(gpu).is_err() {
                let _ = k.drv.sys().close(fd);
                break;
            }
            let _ = k.gpu_ids.push(n.gpu_id);
            k.drv.acquire_vm(fd, n.gpu_id)?;
        }
        if k.gpus.is_empty() {
            return Err(KfdError::NoDevice);
        }
        let mut ap = [abi::ProcessDeviceApertures::default(); MAX_GPUS];
        let n = k.drv.apertures(&mut ap)?;
        for a in ap.iter().take(n) {
            if let Some(g) = k.gpus.iter_mut().find(|g| g.node.gpu_id == a.gpu_id) {
                g.lds_base = a.lds_base;
                g.scratch_base = a.scratch_base;
            }
        }
        // The event page: user-allocated GTT, handed to the first CREATE_EVENT (§1.6).
        let page = k.alloc_bo(0, limits::EVENT_PAGE_BYTES, GTT_FLAGS, true)?;
        k.event_page = Some(page);
        let (id, slot) = k.drv.create_event(event_type::SIGNAL, true, page.handle)?;
        k.completion_event = id;
        k.completion_slot = slot;
        k.memory_event = k.drv.create_event(event_type::MEMORY, true, 0)?.0;
        k.hw_event = k.drv.create_event(event_type::HW_EXCEPTION, true, 0)?.0;
        k.signal_pool = Some(k.alloc_bo(0, (SIGNALS * 64) as u64, GTT_FLAGS, true)?);
        for i in 0..k.gpus.len() {
            k.load_blit(i)?;
        }
        Ok(k)
    }

    /// The KFD interface version the driver reported.
    pub fn version(&self) -> (u32, u32) {
        self.version
    }

    /// The system calls this backend uses.
    pub fn sys(&self) -> &S {
        self.drv.sys()
    }

    /// The KFD gpu id of `device`.
    pub fn gpu_id(&self, device: u32) -> Option<u32> {
        self.gpu_ids.get(device as usize).copied()
    }

    /// The topology node of `device`.
    pub fn node(&self, device: u32) -> Option<GpuNode> {
        self.gpus.get(device as usize).map(|g| g.node)
    }

    /// The queue-buffer sizes of `device`.
    pub fn queue_sizes(&self, device: u32) -> Option<QueueSizes> {
        self.gpus.get(device as usize).map(|g| g.sizes)
    }

    /// The last error a backend call mapped to a HIP error (with its step and errno).
    pub fn last_error(&self) -> Option<KfdError> {
        self.state.lock().last_error
    }

    /// The KFD events the backend created: (completion, memory, hardware exception).
    pub fn events(&self) -> (u32, u32, u32) {
        (self.completion_event, self.memory_event, self.hw_event)
    }

    pub(crate) fn record<T>(&self, r: KfdResult<T>) -> Result<T> {
        r.map_err(|e| {
            self.state.lock().last_error = Some(e);
            Error::from(e)
        })
    }

    pub(crate) fn check_process(&self) -> KfdResult<()> {
        if self.drv.sys().process_id() != self.pid {
            return Err(KfdError::Forked);
        }
        Ok(())
    }

    pub(crate) fn alloc_bo(&self, gpu: usize, bytes: u64, flags: u32, cpu: bool) -> KfdResult<Bo> {
        let g = self.gpus.get(gpu).ok_or(KfdError::InvalidDevice)?;
        self.drv.alloc(g.node.gpu_id, g.render_fd, bytes, flags, &self.gpu_ids, cpu)
    }

    pub(crate) fn free_bo(&self, bo: &Bo) -> KfdResult<()> {
        self.drv.free(bo, &self.gpu_ids)
    }

    fn teardown(&mut self) {
        #[cfg(feature = "std")]
        {
            let svc = self.service.lock().map(|mut s| s.take()).unwrap_or_else(|mut e| e.get_mut().take());
            drop(svc);
        }
        let forked = self.check_process().is_err();
        if !forked {
            let queues = {
                let mut st = self.state.lock();
                let mut v: heapless::Vec<QueueRec, MAX_QUEUES> = heapless::Vec::new();
                for q in st.queues.iter_mut() {
                    if let Some(r) = q.take() {
                        let _ = v.push(r);
                    }
                }
                v
            };
            for rec in queues.iter().rev() {
                let _ = self.drv.destroy_queue(rec.queue_id);
                for bo in [rec.kernarg, rec.cwsr, rec.eop, rec.ring_bo, rec.amd_queue] {
                    let _ = self.free_bo(&bo);
                }
            }
            for slot in 0..crate::MAX_QUEUES {
                self.free_queue_scratch(slot);
            }
            self.vmem_teardown();
            let (codes, allocs) = {
                let mut st = self.state.lock();
                let mut c: heapless::Vec<Bo, MAX_GPUS> = heapless::Vec::new();
                for g in self.gpus.iter_mut().rev() {
                    if let Some(image) = g.blit_image.take() {
                        let _ = c.push(image);
                    }
                }
                (c, st.allocations.take_all())
            };
            for bo in allocs.iter().rev().flatten().map(|a| &a.bo).chain(codes.iter()) {
                let _ = self.free_bo(bo);
            }
            if let Some(pool) = self.signal_pool.take() {
                let _ = self.free_bo(&pool);
            }
            for id in [self.hw_event, self.memory_event, self.completion_event] {
                if id != 0 {
                    let _ = self.drv.destroy_event(id);
                }
            }
            // The event page BO cannot be freed (EPERM, §1.4): it goes with the process's KFD
            // state when the fd closes. Only our mapping of it is dropped here.
            if let Some(page) = self.event_page.take() {
                // SAFETY: no event will be created again; the mapping is ours.
                let _ = unsafe { self.drv.sys().munmap(page.ptr::<core::ffi::c_void>(0), page.size as usize) };
            }
            let doorbells = self.state.lock().doorbells;
            for p in doorbells.iter().filter(|p| **p != 0) {
                self.drv.unmap_doorbells(core::ptr::with_exposed_provenance_mut(*p));
            }
        }
        for g in self.gpus.iter().rev() {
            let _ = self.drv.sys().close(g.render_fd);
        }
        self.gpus.clear();
        let _ = self.drv.sys().close(self.drv.kfd_fd());
    }
}

impl<S: Sys> Drop for Kfd<S> {
    fn drop(&mut self) {
        self.teardown();
    }
}
