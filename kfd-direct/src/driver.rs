//! Typed amdkfd ioctls (docs/kfd-aql.md §1.3) and GPU buffers (§1.4) over a [`Sys`].
//!
//! Each call fills the real argument struct from [`crate::abi`] and issues it through
//! [`Driver::ioctl`], which takes the request as a type ([`abi::Ioctl`]) whose argument struct is
//! fixed, so a request cannot be paired with the wrong struct; a failure becomes
//! [`KfdError::Sys`] naming the step and the errno. Requests whose argument holds no user
//! address ([`abi::PlainIoctl`]) go through the safe [`Driver::call`]; only those with one (an
//! array the kernel copies, a queue's ring addresses, a buffer's VA) need an `unsafe` call and
//! its `// SAFETY:` argument.
//!
//! # Buffers
//!
//! A buffer is made in four steps, each undone in reverse order if a later one fails
//! ([`Driver::alloc`]): reserve CPU VA (`PROT_NONE` anonymous mapping; GPU VA == CPU VA on GFX9+
//! dGPUs), `ALLOC_MEMORY_OF_GPU` at that VA, `MAP_MEMORY_TO_GPU` on every device that must reach
//! it, and — when the CPU needs it — `mmap(MAP_FIXED)` of the render node at the returned offset
//! over the reservation. [`Driver::free`] unmaps from the GPUs, frees, and drops the mapping.
//! The undo of each step is an `OnDrop` guard, defused once the buffer is whole.

use core::ffi::c_void;

use crate::abi::{self, ioctl, Ioctl, PlainIoctl};
use crate::error::{KfdError, KfdResult, Op};
use crate::on_drop::OnDrop;
use crate::sys::{Errno, Mapping, RawFd, Sys};

/// CPU page size.
pub const PAGE: u64 = 4096;

/// Flags of host memory the GPU and CPU share coherently (rings, signals, kernel arguments, the
/// event page; §1.4 "typical flag sets").
pub const GTT_FLAGS: u32 = abi::mem_flags::GTT
    | abi::mem_flags::WRITABLE
    | abi::mem_flags::EXECUTABLE
    | abi::mem_flags::COHERENT
    | abi::mem_flags::UNCACHED
    | abi::mem_flags::NO_SUBSTITUTE;
/// Flags of device memory the CPU can reach through a large BAR.
pub const VRAM_PUBLIC_FLAGS: u32 = abi::mem_flags::VRAM
    | abi::mem_flags::WRITABLE
    | abi::mem_flags::EXECUTABLE
    | abi::mem_flags::NO_SUBSTITUTE
    | abi::mem_flags::PUBLIC;
/// Flags of device memory only the GPU touches (EOP).
pub const VRAM_FLAGS: u32 =
    abi::mem_flags::VRAM | abi::mem_flags::WRITABLE | abi::mem_flags::EXECUTABLE | abi::mem_flags::NO_SUBSTITUTE;

/// Flags of registered host memory (a `USERPTR` buffer over the user's own pages, coherent with
/// the CPU as fine-grained host memory is; docs/kfd-aql.md §1.4).
pub const USERPTR_FLAGS: u32 =
    abi::mem_flags::USERPTR | abi::mem_flags::WRITABLE | abi::mem_flags::EXECUTABLE | abi::mem_flags::COHERENT;

/// A GPU buffer object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bo {
    /// GPU VA (== CPU VA).
    pub va: u64,
    /// Bytes (page-rounded).
    pub size: u64,
    /// KFD handle (`gpu_id << 32 | idr`).
    pub handle: u64,
    /// Whether the CPU mapping is in place (else only the VA reservation is).
    pub cpu: bool,
}

impl Bo {
    /// The CPU pointer to byte `off` (valid while the buffer lives, if it is CPU-mapped).
    pub fn ptr<T>(&self, off: u64) -> *mut T {
        core::ptr::with_exposed_provenance_mut::<T>((self.va + off) as usize)
    }
}

/// The open kfd fd and the system it lives on.
#[derive(Debug, Clone)]
pub struct Driver<S: Sys> {
    sys: S,
    kfd: RawFd,
}

impl<S: Sys> Driver<S> {
    /// Wraps an open `/dev/kfd` descriptor of `sys`.
    pub fn new(sys: S, kfd: RawFd) -> Self {
        Driver { sys, kfd }
    }

    /// The system calls.
    pub fn sys(&self) -> &S {
        &self.sys
    }

    /// The `/dev/kfd` descriptor.
    pub fn kfd_fd(&self) -> RawFd {
        self.kfd
    }

    /// Issues ioctl `R` with `arg`, its argument struct; a failure is reported as step `op`.
    ///
    /// The request number comes from `R` ([`Ioctl::REQUEST`]), so its size and direction always
    /// describe `arg`.
    ///
    /// # Safety
    ///
    /// Every user address inside `arg` (the `*_ptr` fields: aperture, device-id, event and CU-mask
    /// arrays) points at memory valid for what the kernel does with it for `R` — read for the
    /// count the struct gives, or written for the aperture and event arrays — for the duration
    /// of the call. Arguments without such fields have no requirement.
    pub unsafe fn ioctl<R: Ioctl>(&self, op: Op, arg: &mut R::Arg) -> KfdResult<()> {
        // SAFETY: `arg` is a live, exclusive `R::Arg`, the struct `R::REQUEST` names (the `Ioctl`
        // contract); the user pointers inside it are valid (this function's contract).
        unsafe { self.sys.ioctl(self.kfd, R::REQUEST, (arg as *mut R::Arg).cast::<c_void>()) }
            .map(|_| ())
            .map_err(|errno| KfdError::Sys { op, errno })
    }

    /// Issues ioctl `R`, whose argument holds no user addresses ([`abi::PlainIoctl`]), with `arg`;
    /// a failure is reported as step `op`. The safe form of [`Driver::ioctl`].
    pub fn call<R: PlainIoctl>(&self, op: Op, arg: &mut R::Arg) -> KfdResult<()> {
        // SAFETY: `R::Arg` has no user pointers (the `PlainIoctl` contract), so `ioctl`'s
        // contract holds for every value of it.
        unsafe { self.ioctl::<R>(op, arg) }
    }

    /// `GET_VERSION`.
    pub fn version(&self) -> KfdResult<(u32, u32)> {
        let mut a = abi::GetVersionArgs::default();
        self.call::<ioctl::GetVersion>(Op::GetVersion, &mut a)?;
        Ok((a.major_version, a.minor_version))
    }

    /// `ACQUIRE_VM`.
    pub fn acquire_vm(&self, drm_fd: RawFd, gpu_id: u32) -> KfdResult<()> {
        let mut a = abi::AcquireVmArgs { drm_fd: drm_fd as u32, gpu_id };
        self.call::<ioctl::AcquireVm>(Op::AcquireVm, &mut a)
    }

    /// `GET_PROCESS_APERTURES_NEW` into `out`; returns the entries filled.
    pub fn apertures(&self, out: &mut [abi::ProcessDeviceApertures]) -> KfdResult<usize> {
        let mut a = abi::GetProcessAperturesNewArgs {
            kfd_process_device_apertures_ptr: out.as_mut_ptr() as u64,
            num_of_nodes: out.len() as u32,
            pad: 0,
        };
        // SAFETY: the array pointer and count describe `out`, which the kernel fills.
        unsafe { self.ioctl::<ioctl::GetProcessAperturesNew>(Op::GetApertures, &mut a) }?;
        Ok((a.num_of_nodes as usize).min(out.len()))
    }

    /// `MAP_MEMORY_TO_GPU` or `UNMAP_MEMORY_FROM_GPU` (`R`) of `handle` on `gpus`.
    pub(crate) fn map_op<R: Ioctl<Arg = abi::MapMemoryArgs>>(
        &self,
        op: Op,
        handle: u64,
        gpus: &[u32],
    ) -> KfdResult<()> {
        let mut a = abi::MapMemoryArgs {
            handle,
            device_ids_array_ptr: gpus.as_ptr() as u64,
            n_devices: gpus.len() as u32,
            n_success: 0,
        };
        // SAFETY: the device-id pointer and count describe `gpus`, which the kernel reads.
        unsafe { self.ioctl::<R>(op, &mut a) }
    }

    pub(crate) fn free_handle(&self, handle: u64) -> KfdResult<()> {
        let mut a = abi::FreeMemoryOfGpuArgs { handle };
        self.call::<ioctl::FreeMemoryOfGpu>(Op::FreeMemory, &mut a)
    }

    pub(crate) fn unreserve(&self, va: u64, size: u64) {
        // SAFETY: the range is a reservation (or a mapping over it) this driver made and
        // nothing uses any more.
        let _ = unsafe { self.sys.munmap(core::ptr::with_exposed_provenance_mut(va as usize), size as usize) };
    }

    /// Allocates a buffer of `bytes` on `gpu_id` with `flags`, GPU-maps it on `map_on` and, if
    /// `cpu`, CPU-maps it through `render_fd`. Every failure undoes the earlier steps.
    pub fn alloc(
        &self,
        gpu_id: u32,
        render_fd: RawFd,
        bytes: u64,
        flags: u32,
        map_on: &[u32],
        cpu: bool,
    ) -> KfdResult<Bo> {
        if bytes == 0 {
            return Err(KfdError::InvalidArgument);
        }
        let size = bytes.checked_next_multiple_of(PAGE).ok_or(KfdError::InvalidArgument)?;
        // SAFETY: a fresh reservation at an address of the kernel's choice.
        let va = unsafe { self.sys.mmap(core::ptr::null_mut(), size as usize, Mapping::Reserve) }
            .map_err(|errno| KfdError::Sys { op: Op::ReserveVa, errno })?
            .expose_provenance() as u64;
        // Each step arms a guard that undoes it; on a later step's failure they run in reverse
        // (dropped in reverse order of declaration). All are defused once the buffer is whole.
        let unreserve = OnDrop::new(|| self.unreserve(va, size));
        let mut a = abi::AllocMemoryOfGpuArgs { va_addr: va, size, gpu_id, flags, ..Default::default() };
        // SAFETY: `mmap_offset` is 0, so no user pointer (a `USERPTR` allocation then fails).
        unsafe { self.ioctl::<ioctl::AllocMemoryOfGpu>(Op::AllocMemory, &mut a) }?;
        let handle = a.handle;
        let free = OnDrop::new(|| {
            let _ = self.free_handle(handle);
        });
        self.map_op::<ioctl::MapMemoryToGpu>(Op::MapMemory, handle, map_on)?;
        if cpu {
            let unmap = OnDrop::new(|| {
                let _ = self.map_op::<ioctl::UnmapMemoryFromGpu>(Op::UnmapMemory, handle, map_on);
            });
            let at = core::ptr::with_exposed_provenance_mut::<c_void>(va as usize);
            // SAFETY: `va..va+size` is our reservation, replaced by the buffer's pages.
            unsafe { self.sys.mmap(at, size as usize, Mapping::Fixed { fd: render_fd, offset: a.mmap_offset }) }
                .map_err(|errno| KfdError::Sys { op: Op::CpuMap, errno })?;
            unmap.defuse();
        }
        free.defuse();
        unreserve.defuse();
        Ok(Bo { va, size, handle, cpu })
    }

    /// Registers the host pages holding `[host, host + bytes)` for the GPUs: a `USERPTR`
    /// buffer on `gpu_id` over those pages (their page-aligned start in `mmap_offset`, as amdkfd
    /// requires), at a new GPU VA reserved like every other buffer's, GPU-mapped on `map_on`
    /// (docs/kfd-aql.md §1.4, "Registered host memory"). Returns the buffer (`cpu` false: the CPU
    /// keeps using `host`) and the device address of `host` (the VA plus `host`'s offset in its
    /// page). The kernel faults the pages in for writing at the allocation: unmapped or unreadable
    /// pages are `EFAULT`, read-only ones `EPERM`.
    /// [`Driver::free`] ends the registration. Every failure undoes the earlier steps.
    pub fn register_user(&self, gpu_id: u32, host: u64, bytes: u64, map_on: &[u32]) -> KfdResult<(Bo, u64)> {
        if host == 0 || bytes == 0 {
            return Err(KfdError::InvalidArgument);
        }
        let base = host & !(PAGE - 1);
        let end = host.checked_add(bytes).and_then(|e| e.checked_next_multiple_of(PAGE));
        let size = end.ok_or(KfdError::InvalidArgument)? - base;
        // SAFETY: a fresh reservation at an address of the kernel's choice.
        let va = unsafe { self.sys.mmap(core::ptr::null_mut(), size as usize, Mapping::Reserve) }
            .map_err(|errno| KfdError::Sys { op: Op::ReserveVa, errno })?
            .expose_provenance() as u64;
        let unreserve = OnDrop::new(|| self.unreserve(va, size));
        let mut a = abi::AllocMemoryOfGpuArgs {
            va_addr: va,
            size,
            gpu_id,
            flags: USERPTR_FLAGS,
            mmap_offset: base,
            ..Default::default()
        };
        // SAFETY: the one user address is `mmap_offset`, the user pages the buffer will stand
        // for; the kernel checks them itself (it faults them in, refusing pages that are not
        // mapped writable) and this call dereferences nothing on the CPU.
        unsafe { self.ioctl::<ioctl::AllocMemoryOfGpu>(Op::AllocMemory, &mut a) }?;
        let handle = a.handle;
        let free = OnDrop::new(|| {
            let _ = self.free_handle(handle);
        });
        self.map_op::<ioctl::MapMemoryToGpu>(Op::MapMemory, handle, map_on)?;
        free.defuse();
        unreserve.defuse();
        Ok((Bo { va, size, handle, cpu: false }, va + (host - base)))
    }

    /// Unmaps `bo` from the GPUs in `mapped_on`, frees it and drops its mapping. Stops at the
    /// first failure (the buffer then stays as it is, and the error says why).
    pub fn free(&self, bo: &Bo, mapped_on: &[u32]) -> KfdResult<()> {
        self.map_op::<ioctl::UnmapMemoryFromGpu>(Op::UnmapMemory, bo.handle, mapped_on)?;
        self.free_handle(bo.handle)?;
        self.unreserve(bo.va, bo.size);
        Ok(())
    }

    /// `CREATE_EVENT`; returns `(event_id, slot_index)`.
    pub fn create_event(&self, ty: u32, auto_reset: bool, page_handle: u64) -> KfdResult<(u32, u32)> {
        let mut a = abi::CreateEventArgs {
            event_page_offset: page_handle,
            event_type: ty,
            auto_reset: u32::from(auto_reset),
            ..Default::default()
        };
        self.call::<ioctl::CreateEvent>(Op::CreateEvent, &mut a)?;
        Ok((a.event_id, a.event_slot_index))
    }

    /// `DESTROY_EVENT`.
    pub fn destroy_event(&self, id: u32) -> KfdResult<()> {
        let mut a = abi::EventIdArgs { event_id: id, pad: 0 };
        self.call::<ioctl::DestroyEvent>(Op::DestroyEvent, &mut a)
    }

    /// `SET_EVENT`.
    pub fn set_event(&self, id: u32) -> KfdResult<()> {
        let mut a = abi::EventIdArgs { event_id: id, pad: 0 };
        self.call::<ioctl::SetEvent>(Op::SetEvent, &mut a)
    }

    /// `WAIT_EVENTS` (any) over `events` for at most `timeout_ms`; returns the wait result.
    pub fn wait_events(&self, events: &mut [abi::EventData], timeout_ms: u32) -> KfdResult<u32> {
        let mut a = abi::WaitEventsArgs {
            events_ptr: events.as_mut_ptr() as u64,
            num_events: events.len() as u32,
            wait_for_all: 0,
            timeout: timeout_ms,
            wait_result: 0,
        };
        // SAFETY: the event pointer and count describe `events`, which the kernel reads and
        // writes back.
        unsafe { self.ioctl::<ioctl::WaitEvents>(Op::WaitEvents, &mut a) }?;
        Ok(a.wait_result)
    }

    /// `CREATE_QUEUE` (1.17 layout; older kernels zero-extend, §0 item 6).
    pub fn create_queue(&self, a: &mut abi::CreateQueueArgs) -> KfdResult<()> {
        // SAFETY: no CPU pointers the kernel dereferences: the ring, read/write pointer, EOP and
        // context-save addresses are GPU VAs, which amdkfd checks against this process's buffers.
        unsafe { self.ioctl::<ioctl::CreateQueue>(Op::CreateQueue, a) }
    }

    /// `DESTROY_QUEUE`.
    pub fn destroy_queue(&self, queue_id: u32) -> KfdResult<()> {
        let mut a = abi::DestroyQueueArgs { queue_id, pad: 0 };
        self.call::<ioctl::DestroyQueue>(Op::DestroyQueue, &mut a)
    }

    /// `SET_CU_MASK` with `words` (32 CUs each).
    pub fn set_cu_mask(&self, queue_id: u32, words: &[u32]) -> KfdResult<()> {
        let mut a =
            abi::SetCuMaskArgs { queue_id, num_cu_mask: words.len() as u32 * 32, cu_mask_ptr: words.as_ptr() as u64 };
        // SAFETY: the mask pointer and bit count describe `words`, which the kernel reads.
        unsafe { self.ioctl::<ioctl::SetCuMask>(Op::SetCuMask, &mut a) }
    }

    /// `GET_CLOCK_COUNTERS`: the GPU timestamp counter.
    pub fn gpu_clock(&self, gpu_id: u32) -> KfdResult<u64> {
        let mut a = abi::GetClockCountersArgs { gpu_id, ..Default::default() };
        self.call::<ioctl::GetClockCounters>(Op::ClockCounters, &mut a)?;
        Ok(a.gpu_clock_counter)
    }

    /// Maps the doorbell slice of a GPU (`mmap` on the kfd fd, §2).
    pub fn map_doorbells(&self, doorbell_offset: u64) -> KfdResult<*mut u8> {
        let base = doorbell_offset & !(abi::limits::DOORBELL_SLICE_BYTES - 1);
        // SAFETY: a new mapping at an address of the kernel's choice.
        let p = unsafe {
            self.sys.mmap(
                core::ptr::null_mut(),
                abi::limits::DOORBELL_SLICE_BYTES as usize,
                Mapping::Shared { fd: self.kfd, offset: base },
            )
        }
        .map_err(|errno| KfdError::Sys { op: Op::MapDoorbell, errno })?;
        Ok(p.cast::<u8>())
    }

    /// Drops a doorbell mapping.
    pub fn unmap_doorbells(&self, p: *mut u8) {
        // SAFETY: `p` is a doorbell mapping of this driver that no queue uses any more.
        let _ = unsafe { self.sys.munmap(p.cast(), abi::limits::DOORBELL_SLICE_BYTES as usize) };
    }
}

/// Maps a KFD errno the way the HIP layer reports it.
pub const fn is_out_of_memory(e: Errno) -> bool {
    matches!(e, Errno::ENOMEM | Errno::ENOSPC)
}
