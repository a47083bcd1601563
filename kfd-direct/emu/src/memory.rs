//! Emulated GPU memory: the backing pool, the per-process buffer table (GPUVM) and the memory
//! view kernels and the command processor use (kfd-aql.md §1.4, §9 "memory").
//!
//! # Model
//!
//! Emulated device memory is host memory. Every buffer object (VRAM, GTT, the doorbell slice,
//! the MMIO page, a kernel-allocated event page) is a page-aligned range of one `memfd` pool
//! that the emulator maps once for its own use (the "device view"). A process CPU-maps a BO the
//! way it would on Linux — `mmap(va, size, …, MAP_FIXED, render_fd, mmap_offset)` — and the
//! emulator turns that into a real shared mapping of the same pool pages at the user's VA, so
//! the process and the device see the same bytes at the same GPU VA == CPU VA. USERPTR BOs are
//! the user's own pages and are reached directly.
//!
//! The device side never dereferences a user VA directly: it translates every GPU VA through
//! the buffer table ([`Vm::translate`]), honouring GPU mappings per device. An access outside
//! any BO mapped on the device is a GPU memory fault with that address.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;
use std::sync::Mutex;

use crate::abi::{limits::PAGE_SIZE, mem_flags};

/// Byte offset at which DRM GEM mmap offsets start (`DRM_FILE_PAGE_OFFSET_START` pages).
pub const DRM_MMAP_BASE: u64 = 0x1_0000_0000;
/// Lowest GPU VA a process may use (the reserved bottom of the GPUVM aperture).
pub const GPUVM_BASE: u64 = 0x100_0000;
/// Highest GPU VA a process may use (47-bit user space).
pub const GPUVM_LIMIT: u64 = (1 << 47) - 1;
/// LDS aperture base on GFX9+ (`1 << 48`).
pub const LDS_APERTURE_BASE: u64 = 1 << 48;
/// Scratch aperture base on GFX9+ (`2 << 48`).
pub const SCRATCH_APERTURE_BASE: u64 = 2 << 48;

/// The memfd-backed pool all device memory comes from.
pub(crate) struct Pool {
    fd: i32,
    base: *mut u8,
    size: u64,
    next: Mutex<u64>,
}

// SAFETY: the pool is a fixed shared mapping; the pointer is only used to form addresses inside
// it, and accesses to the memory go through the BO protocol (atomics or owned ranges).
unsafe impl Send for Pool {}
// SAFETY: as for Send; `next` is behind a mutex.
unsafe impl Sync for Pool {}

impl Pool {
    /// Reserves `size` bytes of address space backed by a sparse memfd.
    pub(crate) fn new(size: u64) -> io::Result<Pool> {
        let name = c"aqueduct-kfd-emu";
        // SAFETY: memfd_create with a valid NUL-terminated name.
        let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is the memfd we own; ftruncate only sets its (sparse) size.
        if unsafe { libc::ftruncate(fd, size as libc::off_t) } != 0 {
            let e = io::Error::last_os_error();
            // SAFETY: closing our own fd.
            unsafe { libc::close(fd) };
            return Err(e);
        }
        // SAFETY: a fresh shared mapping of the whole memfd at an address of the kernel's choice.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_NORESERVE,
                fd,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            let e = io::Error::last_os_error();
            // SAFETY: closing our own fd.
            unsafe { libc::close(fd) };
            return Err(e);
        }
        Ok(Pool { fd, base: base.cast(), size, next: Mutex::new(0) })
    }

    /// Allocates `bytes` (rounded up to pages) of zeroed pool memory; returns the offset.
    pub(crate) fn alloc(&self, bytes: u64) -> Option<u64> {
        let bytes = bytes.checked_next_multiple_of(PAGE_SIZE)?;
        let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
        let off = *next;
        let end = off.checked_add(bytes)?;
        if end > self.size {
            return None;
        }
        *next = end;
        Some(off)
    }

    /// Returns pool pages to the system (they read as zero afterwards). Offsets are not reused.
    pub(crate) fn release(&self, off: u64, bytes: u64) {
        let bytes = bytes.next_multiple_of(PAGE_SIZE);
        // SAFETY: punching a hole in our own memfd inside its size; mappings of it stay valid.
        unsafe {
            libc::fallocate(
                self.fd,
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                off as libc::off_t,
                bytes as libc::off_t,
            );
        }
    }

    /// The device-view address of a pool offset.
    pub(crate) fn ptr(&self, off: u64) -> *mut u8 {
        self.base.wrapping_add(off as usize)
    }

    /// Maps `len` bytes of the pool at `off` into the process, as `mmap` on a device fd does.
    ///
    /// # Safety
    /// With `MAP_FIXED` in `flags`, `addr` must be a range the caller owns (as for `mmap(2)`).
    pub(crate) unsafe fn map_user(
        &self,
        addr: *mut libc::c_void,
        len: usize,
        prot: i32,
        flags: i32,
        off: u64,
    ) -> Result<*mut libc::c_void, crate::Errno> {
        let flags = (flags & !(libc::MAP_PRIVATE | libc::MAP_ANONYMOUS)) | libc::MAP_SHARED;
        // SAFETY: the caller's contract for MAP_FIXED; otherwise the kernel picks the address.
        let p = unsafe { libc::mmap(addr, len, prot, flags, self.fd, off as libc::off_t) };
        if p == libc::MAP_FAILED {
            return Err(crate::Errno(io::Error::last_os_error().raw_os_error().unwrap_or(libc::ENOMEM)));
        }
        Ok(p)
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // SAFETY: unmapping and closing what `new` created; nobody uses the device view after
        // the machine (which owns the pool) is gone.
        unsafe {
            libc::munmap(self.base.cast(), self.size as usize);
            libc::close(self.fd);
        }
    }
}

/// Where a BO's bytes live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backing {
    /// A pool range (VRAM, GTT, doorbell slice, MMIO page).
    Pool(u64),
    /// The user's own memory at this address (USERPTR).
    User(u64),
}

/// One buffer object in a process's table.
#[derive(Debug, Clone)]
pub(crate) struct Bo {
    pub(crate) handle: u64,
    pub(crate) gpu_id: u32,
    pub(crate) va: u64,
    pub(crate) size: u64,
    pub(crate) flags: u32,
    pub(crate) backing: Backing,
    /// The mmap offset handed out (render fd for VRAM/GTT, kfd fd for DOORBELL/MMIO).
    pub(crate) mmap_offset: u64,
    /// Devices the BO is GPU-mapped on.
    pub(crate) mapped: BTreeSet<u32>,
    /// Live queues using the BO as a queue buffer (unmap → EBUSY while > 0).
    pub(crate) queue_refs: u32,
}

impl Bo {
    pub(crate) fn end(&self) -> u64 {
        self.va + self.size
    }
}

/// A process's GPU virtual memory: its buffer table.
#[derive(Debug, Default)]
pub(crate) struct Vm {
    pub(crate) bos: HashMap<u64, Bo>,
    /// VA → handle, for translation.
    by_va: BTreeMap<u64, u64>,
    /// Next idr per gpu.
    next_idr: HashMap<u32, u32>,
}

impl Vm {
    pub(crate) fn new_handle(&mut self, gpu_id: u32) -> u64 {
        let idr = self.next_idr.entry(gpu_id).or_insert(0);
        let h = (u64::from(gpu_id) << 32) | u64::from(*idr);
        *idr += 1;
        h
    }

    /// The BO whose VA range contains `va`.
    pub(crate) fn bo_at(&self, va: u64) -> Option<&Bo> {
        let (_, h) = self.by_va.range(..=va).next_back()?;
        let bo = self.bos.get(h)?;
        (va < bo.end()).then_some(bo)
    }

    /// Whether `[va, va + size)` overlaps any BO.
    pub(crate) fn overlaps(&self, va: u64, size: u64) -> bool {
        let end = va.saturating_add(size);
        if let Some((_, h)) = self.by_va.range(..end).next_back() {
            if let Some(bo) = self.bos.get(h) {
                return bo.end() > va;
            }
        }
        false
    }

    pub(crate) fn insert(&mut self, bo: Bo) {
        if bo.flags & mem_flags::USERPTR == 0 || bo.va != 0 {
            self.by_va.insert(bo.va, bo.handle);
        }
        self.bos.insert(bo.handle, bo);
    }

    pub(crate) fn remove(&mut self, handle: u64) -> Option<Bo> {
        let bo = self.bos.remove(&handle)?;
        if self.by_va.get(&bo.va) == Some(&handle) {
            self.by_va.remove(&bo.va);
        }
        Some(bo)
    }

    /// The BO whose mmap offset is `offset`.
    pub(crate) fn bo_by_mmap_offset(&self, offset: u64) -> Option<&Bo> {
        self.bos.values().find(|b| b.mmap_offset == offset && matches!(b.backing, Backing::Pool(_)))
    }

    /// Translates `[va, va + len)` for device `gpu_id` into a device-view pointer: the range must
    /// lie inside one BO that is GPU-mapped on that device. `Err(va)` names the faulting address.
    pub(crate) fn translate(&self, pool: &Pool, gpu_id: u32, va: u64, len: u64) -> Result<*mut u8, u64> {
        let bo = self.bo_at(va).ok_or(va)?;
        if !bo.mapped.contains(&gpu_id) {
            return Err(va);
        }
        let end = va.checked_add(len).ok_or(va)?;
        if end > bo.end() {
            return Err(bo.end());
        }
        let off = va - bo.va;
        Ok(match bo.backing {
            Backing::Pool(p) => pool.ptr(p + off),
            Backing::User(addr) => std::ptr::with_exposed_provenance_mut(addr as usize + off as usize),
        })
    }
}

/// Why a kernel's host twin stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelError {
    /// A GPU memory fault at this VA (not mapped on the device, or out of bounds).
    MemoryFault(u64),
    /// The kernel never finishes (the dispatch hangs its queue).
    Hang,
    /// The kernel hit an illegal instruction / trap (reported as a wave error).
    Trap,
}

/// What a kernel sees of device memory: GPU VAs translated through its process's buffer table,
/// for one device. Every access is bounds-checked; a bad address is a [`KernelError::MemoryFault`].
pub struct MemView<'a> {
    pub(crate) vm: &'a Vm,
    pub(crate) pool: &'a Pool,
    pub(crate) gpu_id: u32,
}

impl MemView<'_> {
    /// Device-view pointer to `len` bytes at `va` (valid while the dispatch runs).
    pub fn ptr(&self, va: u64, len: u64) -> Result<*mut u8, KernelError> {
        self.vm.translate(self.pool, self.gpu_id, va, len).map_err(KernelError::MemoryFault)
    }

    /// Copies `out.len()` bytes from `va`.
    pub fn read(&self, va: u64, out: &mut [u8]) -> Result<(), KernelError> {
        let p = self.ptr(va, out.len() as u64)?;
        // SAFETY: `ptr` checked that the range lies inside one live, mapped BO; kernels and the
        // host may race on it exactly as on a GPU (byte copies, no references kept).
        unsafe { std::ptr::copy(p, out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    /// Copies `data` to `va`.
    pub fn write(&self, va: u64, data: &[u8]) -> Result<(), KernelError> {
        let p = self.ptr(va, data.len() as u64)?;
        // SAFETY: as in `read`.
        unsafe { std::ptr::copy(data.as_ptr(), p, data.len()) };
        Ok(())
    }

    /// Copies `bytes` from `src` to `dst` (overlap allowed).
    pub fn copy(&self, dst: u64, src: u64, bytes: u64) -> Result<(), KernelError> {
        if bytes == 0 {
            return Ok(());
        }
        let s = self.ptr(src, bytes)?;
        let d = self.ptr(dst, bytes)?;
        // SAFETY: both ranges were checked to lie inside mapped BOs; `copy` allows overlap.
        unsafe { std::ptr::copy(s, d, bytes as usize) };
        Ok(())
    }

    /// Reads a little-endian u32.
    pub fn read_u32(&self, va: u64) -> Result<u32, KernelError> {
        let mut b = [0; 4];
        self.read(va, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    /// Reads a little-endian u64.
    pub fn read_u64(&self, va: u64) -> Result<u64, KernelError> {
        let mut b = [0; 8];
        self.read(va, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// Writes a little-endian u32.
    pub fn write_u32(&self, va: u64, v: u32) -> Result<(), KernelError> {
        self.write(va, &v.to_le_bytes())
    }

    /// Writes a little-endian u64.
    pub fn write_u64(&self, va: u64, v: u64) -> Result<(), KernelError> {
        self.write(va, &v.to_le_bytes())
    }

    /// The device this view belongs to.
    pub fn gpu_id(&self) -> u32 {
        self.gpu_id
    }
}
