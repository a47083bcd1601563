//! Emulated GPU memory: the backing pool, the per-process buffer table (GPUVM), the translation
//! snapshots the engines use, and the memory view kernels see (docs/kfd-aql.md §1.4, §9 "memory").
//!
//! # Model
//!
//! Emulated device memory is host memory. Every buffer object (VRAM, GTT, the doorbell slice,
//! the MMIO page, a kernel-allocated event page) is a page-aligned range of one `memfd` pool
//! that the emulator maps once for its own use (the "device view"). A process CPU-maps a BO the
//! way it would on Linux — `mmap(va, size, …, MAP_FIXED, render_fd, mmap_offset)` — and the
//! emulator turns that into a real shared mapping of the same pool pages at the user's VA, so
//! the process and the device see the same bytes at the same GPU VA == CPU VA. USERPTR BOs are
//! the user's own pages and are reached directly. An import of another process's dma-buf
//! ([`Backing::Foreign`]) is that process's pool pages, mapped once into this device view
//! (docs/kfd-aql.md §1.4, "Sharing between processes").
//!
//! # Translation
//!
//! The device side never dereferences a user VA directly: it translates every GPU VA through
//! the buffer table, honouring GPU mappings per device. An access outside any BO mapped on the
//! device is a GPU memory fault with that address. The engines do not lock the buffer table for
//! that: [`VmLock::translation`] hands out an immutable [`Translation`] of one device's mapped
//! ranges (a sorted array, binary-searched), rebuilt after the table changes. A work-group keeps
//! the snapshot of its dispatch, so a long kernel never holds a lock the driver needs, and a
//! twin resolves a buffer once ([`MemView::slice`]) and then indexes it with a bounds check only.
//! Freed pool ranges stay mapped in the device view (their pages read as zero), so a snapshot
//! that outlives a `FREE_MEMORY_OF_GPU` never points at unmapped memory.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

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

    /// The pool's memfd (exported dma-bufs are new opens of it: docs/kfd-aql.md §1.4,
    /// "Physical handles").
    pub(crate) fn fd(&self) -> i32 {
        self.fd
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
    /// Another process's pool pages, mapped here at this address (an import of a dma-buf that
    /// process exported: docs/kfd-aql.md §1.4, "Physical handles").
    Foreign(u64),
}

impl Backing {
    /// The device-view address of byte 0 of a buffer with this backing.
    pub(crate) fn base(self, pool: &Pool) -> *mut u8 {
        match self {
            Backing::Pool(p) => pool.ptr(p),
            Backing::User(addr) | Backing::Foreign(addr) => std::ptr::with_exposed_provenance_mut(addr as usize),
        }
    }
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
    /// The dma-buf the BO was exported as or imported from (its pages are the dma-buf's, shared
    /// with every other BO of it; docs/kfd-aql.md §1.4 "Physical handles").
    pub(crate) dmabuf: Option<u64>,
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
        Ok(bo.backing.base(pool).wrapping_add((va - bo.va) as usize))
    }
}

/// A process's buffer table behind its lock, with the translation snapshots handed to the
/// engines. Writers go through [`VmLock::write`], whose guard drops every snapshot when the
/// change is done.
#[derive(Debug, Default)]
pub(crate) struct VmLock {
    vm: RwLock<Vm>,
    /// Incremented after every change (engines compare it with the snapshot they hold).
    generation: AtomicU64,
    /// One snapshot per device, built on demand. Lock order: `vm`, then `snapshots`.
    snapshots: Mutex<Vec<Arc<Translation>>>,
}

/// Write access to a buffer table; dropping it invalidates the translation snapshots.
pub(crate) struct VmWrite<'a> {
    guard: RwLockWriteGuard<'a, Vm>,
    lock: &'a VmLock,
}

impl Deref for VmWrite<'_> {
    type Target = Vm;
    fn deref(&self) -> &Vm {
        &self.guard
    }
}

impl DerefMut for VmWrite<'_> {
    fn deref_mut(&mut self) -> &mut Vm {
        &mut self.guard
    }
}

impl Drop for VmWrite<'_> {
    fn drop(&mut self) {
        // Still under the write lock: no reader holds `snapshots` (readers take it under `vm`).
        self.lock.lock_snapshots().clear();
        // Ordering: Release pairs with `TranslationCache::get`'s Acquire load: an engine that
        // sees the new generation fetches a snapshot built after this change.
        self.lock.generation.fetch_add(1, Ordering::Release);
    }
}

impl VmLock {
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, Vm> {
        self.vm.read().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn write(&self) -> VmWrite<'_> {
        VmWrite { guard: self.vm.write().unwrap_or_else(|e| e.into_inner()), lock: self }
    }

    fn lock_snapshots(&self) -> MutexGuard<'_, Vec<Arc<Translation>>> {
        self.snapshots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The ranges of this table mapped on `gpu_id`, as of now.
    pub(crate) fn translation(&self, pool: &Pool, gpu_id: u32) -> Arc<Translation> {
        let vm = self.read();
        let mut snaps = self.lock_snapshots();
        if let Some(t) = snaps.iter().find(|t| t.gpu_id == gpu_id) {
            return Arc::clone(t);
        }
        let t = Arc::new(Translation::build(&vm, pool, gpu_id));
        snaps.push(Arc::clone(&t));
        t
    }
}

/// An engine's copy of a translation snapshot, refreshed when the table changed.
#[derive(Default)]
pub(crate) struct TranslationCache {
    generation: u64,
    current: Option<Arc<Translation>>,
}

impl TranslationCache {
    /// The current snapshot of `vm` for `gpu_id`.
    pub(crate) fn get(&mut self, vm: &VmLock, pool: &Pool, gpu_id: u32) -> &Arc<Translation> {
        // Ordering: Acquire pairs with VmWrite's Release increment.
        let g = vm.generation.load(Ordering::Acquire);
        let stale = self.generation != g || self.current.as_ref().is_none_or(|t| t.gpu_id != gpu_id);
        if stale {
            self.generation = g;
            self.current = None;
        }
        self.current.get_or_insert_with(|| vm.translation(pool, gpu_id))
    }
}

#[derive(Debug, Clone, Copy)]
struct Range {
    va: u64,
    end: u64,
    /// Device-view address of `va`.
    base: *mut u8,
    /// Memory the engines own rather than kernels: a queue's buffers (ring, pointers, EOP,
    /// context save area) or a doorbell/MMIO page.
    engine: bool,
}

/// Slots of a snapshot's page cache (see [`Translation::find`]).
const PAGE_SLOTS: usize = 256;
/// The cache's entries hold a range index in their low 16 bits.
const PAGE_INDEX_BITS: u32 = 16;

/// One device's view of a buffer table: the GPU-mapped ranges, sorted by address.
#[derive(Debug)]
pub(crate) struct Translation {
    gpu_id: u32,
    ranges: Vec<Range>,
    /// Pages translated lately: slot `page % PAGE_SLOTS` holds `page << 16 | (range index + 1)`
    /// (0: empty). A hint that spares the search of `ranges` (a chain of dependent loads) on
    /// most accesses; every hit is checked against its range.
    pages: Box<[AtomicU64]>,
}

// SAFETY: the pointers are device-view addresses (pool memory that lives as long as the
// machine, or the user's own USERPTR pages); the snapshot never dereferences them itself.
unsafe impl Send for Translation {}
// SAFETY: as for Send; the snapshot is immutable.
unsafe impl Sync for Translation {}

impl Translation {
    fn build(vm: &Vm, pool: &Pool, gpu_id: u32) -> Translation {
        let ranges = vm
            .by_va
            .values()
            .filter_map(|h| vm.bos.get(h))
            .filter(|bo| bo.mapped.contains(&gpu_id))
            .map(|bo| Range {
                va: bo.va,
                end: bo.end(),
                base: bo.backing.base(pool),
                engine: bo.queue_refs > 0 || bo.flags & (mem_flags::DOORBELL | mem_flags::MMIO_REMAP) != 0,
            })
            .collect();
        Translation { gpu_id, ranges, pages: (0..PAGE_SLOTS).map(|_| AtomicU64::new(0)).collect() }
    }

    /// The range containing `va`, with its index.
    #[inline]
    fn find(&self, va: u64) -> Option<(usize, &Range)> {
        let page = va >> 12;
        let slot = self.pages.get(page as usize % PAGE_SLOTS)?;
        // Ordering: Relaxed; a hint into this immutable snapshot, checked before use.
        let e = slot.load(Ordering::Relaxed);
        if e >> PAGE_INDEX_BITS == page {
            let i = (e & ((1 << PAGE_INDEX_BITS) - 1)) as usize;
            if let Some(i) = i.checked_sub(1) {
                if let Some(r) = self.ranges.get(i).filter(|r| r.va <= va && va < r.end) {
                    return Some((i, r));
                }
            }
        }
        let i = self.ranges.partition_point(|r| r.va <= va).checked_sub(1)?;
        let r = self.ranges.get(i).filter(|r| va < r.end)?;
        if i + 1 < 1 << PAGE_INDEX_BITS && page < 1 << (64 - PAGE_INDEX_BITS) {
            // Ordering: Relaxed; see above.
            slot.store(page << PAGE_INDEX_BITS | (i as u64 + 1), Ordering::Relaxed);
        }
        Some((i, r))
    }

    /// The range at index `i` if it contains `va`.
    #[inline]
    fn hit(&self, i: usize, va: u64) -> Option<&Range> {
        self.ranges.get(i).filter(|r| r.va <= va && va < r.end)
    }

    /// The device this snapshot belongs to.
    pub(crate) fn gpu_id(&self) -> u32 {
        self.gpu_id
    }

    /// Every mapped range kernels own as (VA, bytes), in address order: all but the engines'
    /// (queue buffers, doorbell and MMIO pages).
    pub(crate) fn kernel_ranges(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.ranges.iter().filter(|r| !r.engine).map(|r| (r.va, r.end - r.va))
    }

    /// The same ranges with some of their bytes elsewhere: the range at VA `va` at `base(va)`
    /// where that is `Some` (which must hold the range's bytes for as long as the result is
    /// used: check mode's copies of device memory), in place otherwise.
    pub(crate) fn relocated(&self, base: impl Fn(u64) -> Option<*mut u8>) -> Translation {
        let ranges = self.ranges.iter().map(|r| Range { base: base(r.va).unwrap_or(r.base), ..*r }).collect();
        Translation { gpu_id: self.gpu_id, ranges, pages: (0..PAGE_SLOTS).map(|_| AtomicU64::new(0)).collect() }
    }

    /// The start of the mapped buffer containing `va`.
    pub(crate) fn range_start(&self, va: u64) -> Option<u64> {
        self.find(va).map(|(_, r)| r.va)
    }

    /// Translates `[va, va + len)` into a device-view pointer: the range must lie inside one BO
    /// mapped on the device. `Err(va)` names the faulting address (the BO's end for an access
    /// that runs past it).
    pub(crate) fn translate(&self, va: u64, len: u64) -> Result<*mut u8, u64> {
        self.find(va).ok_or(va).and_then(|(_, r)| r.at(va, len))
    }
}

impl Range {
    /// The device-view pointer of `[va, va + len)`, `va` inside this range (see
    /// [`Translation::translate`]).
    #[inline]
    fn at(&self, va: u64, len: u64) -> Result<*mut u8, u64> {
        let end = va.checked_add(len).ok_or(va)?;
        if end > self.end {
            return Err(self.end);
        }
        Ok(self.base.wrapping_add((va - self.va) as usize))
    }
}

/// Ranges a [`MemView`] remembers (see [`MemView::translate`]).
const VIEW_HINTS: usize = 8;

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
///
/// Device memory is shared with the host and with other work-groups exactly as on a GPU: the
/// view hands out no Rust references into it, only copies, atomics and [`DeviceSlice`]s.
pub struct MemView<'a> {
    pub(crate) tr: &'a Translation,
    /// The ranges this view translated last: index + 1 into the snapshot's ranges (0: none),
    /// replaced in turn from `next`. A view belongs to one worker's run of work-groups (one
    /// thread), so these lines stay in its core's cache, where the snapshot's shared page
    /// cache is written by every worker (docs/executor.md §6 "speed"). Atomics only so the
    /// view stays `Sync`; a hint, checked against its range before use like the shared one.
    recent: [AtomicU32; VIEW_HINTS],
    next: AtomicU32,
}

impl<'a> MemView<'a> {
    pub(crate) fn new(tr: &'a Translation) -> MemView<'a> {
        MemView { tr, recent: Default::default(), next: AtomicU32::new(0) }
    }

    /// [`Translation::translate`] through this view's hints first.
    #[inline]
    fn translate(&self, va: u64, len: u64) -> Result<*mut u8, u64> {
        for h in &self.recent {
            // Ordering: Relaxed; a hint into the immutable snapshot, checked before use.
            let i = h.load(Ordering::Relaxed) as usize;
            if let Some(r) = i.checked_sub(1).and_then(|i| self.tr.hit(i, va)) {
                return r.at(va, len);
            }
        }
        let (i, r) = self.tr.find(va).ok_or(va)?;
        if let Ok(e) = u32::try_from(i + 1) {
            // Ordering: Relaxed; see above.
            let n = self.next.load(Ordering::Relaxed) as usize;
            // Ordering: Relaxed; see above.
            self.next.store(((n + 1) % VIEW_HINTS) as u32, Ordering::Relaxed);
            if let Some(h) = self.recent.get(n) {
                // Ordering: Relaxed; see above.
                h.store(e, Ordering::Relaxed);
            }
        }
        r.at(va, len)
    }

    /// Device-view pointer to `len` bytes at `va` (valid while the dispatch runs).
    pub fn ptr(&self, va: u64, len: u64) -> Result<*mut u8, KernelError> {
        self.translate(va, len).map_err(KernelError::MemoryFault)
    }

    /// `count` elements of `T` at `va`, resolved once: the range must lie inside one BO mapped on
    /// the device and `va` must be aligned for `T` (a misaligned address is a memory fault, as
    /// the hardware's natural-alignment requirement for atomics makes it).
    pub fn slice<T: Scalar>(&self, va: u64, count: u64) -> Result<DeviceSlice<'a, T>, KernelError> {
        let bytes = count.checked_mul(size_of::<T>() as u64).ok_or(KernelError::MemoryFault(va))?;
        if va % align_of::<T>() as u64 != 0 {
            return Err(KernelError::MemoryFault(va));
        }
        let ptr = self.translate(va, bytes).map_err(KernelError::MemoryFault)?;
        let len = usize::try_from(count).map_err(|_| KernelError::MemoryFault(va))?;
        Ok(DeviceSlice { ptr: ptr.cast(), len, va, _life: PhantomData })
    }

    /// `len` bytes at `va` (any alignment).
    pub fn bytes(&self, va: u64, len: u64) -> Result<DeviceSlice<'a, u8>, KernelError> {
        self.slice::<u8>(va, len)
    }

    /// Copies `out.len()` bytes from `va`.
    pub fn read(&self, va: u64, out: &mut [u8]) -> Result<(), KernelError> {
        self.bytes(va, out.len() as u64)?.read_to(out)
    }

    /// Copies `data` to `va`.
    pub fn write(&self, va: u64, data: &[u8]) -> Result<(), KernelError> {
        self.bytes(va, data.len() as u64)?.write_from(data)
    }

    /// Copies `bytes` from `src` to `dst` (overlap allowed). Either side may span buffers that
    /// sit back to back in the VA space (the ranges of a virtual-memory reservation mapped one
    /// physical handle after another, docs/kfd-aql.md §1.4 "Physical handles"), as the GPU's page
    /// tables make them one range.
    pub fn copy(&self, dst: u64, src: u64, bytes: u64) -> Result<(), KernelError> {
        if bytes == 0 {
            return Ok(());
        }
        if let (Ok(s), Ok(d)) = (self.bytes(src, bytes), self.bytes(dst, bytes)) {
            return d.copy_from(&s);
        }
        let mut chunks = Vec::new();
        let mut off = 0;
        while off < bytes {
            let n = self.run_len(src + off, bytes - off)?.min(self.run_len(dst + off, bytes - off)?);
            chunks.push((off, n));
            off += n;
        }
        // A forward overlap copies from the end, as memmove does.
        if dst > src && dst < src + bytes {
            chunks.reverse();
        }
        for (off, n) in chunks {
            let s = self.bytes(src + off, n)?;
            self.bytes(dst + off, n)?.copy_from(&s)?;
        }
        Ok(())
    }

    /// The bytes from `va`, at most `max`, that lie in the one buffer holding `va`.
    fn run_len(&self, va: u64, max: u64) -> Result<u64, KernelError> {
        match self.translate(va, max) {
            Ok(_) => Ok(max),
            Err(end) if end > va => Ok(end - va),
            Err(fault) => Err(KernelError::MemoryFault(fault)),
        }
    }

    /// Writes `total` bytes of `pattern` repeated from `dst`, across buffers that sit back to
    /// back as [`MemView::copy`] allows.
    pub(crate) fn fill_pattern(&self, dst: u64, pattern: &[u8], total: u64) -> Result<(), KernelError> {
        let mut off = 0;
        while off < total {
            let n = self.run_len(dst + off, total - off)?;
            let phase = (off % pattern.len().max(1) as u64) as usize;
            let mut rotated = pattern.to_vec();
            rotated.rotate_left(phase);
            self.bytes(dst + off, n)?.fill_pattern(&rotated);
            off += n;
        }
        Ok(())
    }

    /// Reads a little-endian u32 (one 32-bit access where the address is aligned for it).
    pub fn read_u32(&self, va: u64) -> Result<u32, KernelError> {
        if va % 4 == 0 {
            return self.slice::<u32>(va, 1)?.get(0);
        }
        let mut b = [0; 4];
        self.read(va, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    /// Reads a little-endian u64 (one 64-bit access where the address is aligned for it).
    pub fn read_u64(&self, va: u64) -> Result<u64, KernelError> {
        if va % 8 == 0 {
            return self.slice::<u64>(va, 1)?.get(0);
        }
        let mut b = [0; 8];
        self.read(va, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// Writes a little-endian u32 (one 32-bit access where the address is aligned for it).
    pub fn write_u32(&self, va: u64, v: u32) -> Result<(), KernelError> {
        if va % 4 == 0 {
            return self.slice::<u32>(va, 1)?.set(0, v);
        }
        self.write(va, &v.to_le_bytes())
    }

    /// Writes a little-endian u64 (one 64-bit access where the address is aligned for it).
    pub fn write_u64(&self, va: u64, v: u64) -> Result<(), KernelError> {
        if va % 8 == 0 {
            return self.slice::<u64>(va, 1)?.set(0, v);
        }
        self.write(va, &v.to_le_bytes())
    }

    /// Atomically replaces the naturally aligned 4- or 8-byte value at `va` with `f(old)` and
    /// returns `old` (a misaligned or unmapped address is a memory fault). The read-modify-write
    /// is atomic with respect to every other worker and the host.
    pub fn fetch_update(&self, va: u64, size: u8, f: impl Fn(u64) -> u64) -> Result<u64, KernelError> {
        if !(size == 4 || size == 8) || va % u64::from(size) != 0 {
            return Err(KernelError::MemoryFault(va));
        }
        let p = self.ptr(va, u64::from(size))?;
        if size == 4 {
            // SAFETY: `p` was translated for 4 bytes of a BO mapped on the device (live while
            // the dispatch runs); BOs start on pages, so an aligned VA is an aligned pointer.
            let a = unsafe { std::sync::atomic::AtomicU32::from_ptr(p.cast()) };
            // Ordering: AcqRel: a device-scope atomic orders the accesses around it, as the
            // ISA's atomics with their waits do (Relaxed on the failed load: it is retried).
            let old = a.fetch_update(Ordering::AcqRel, Ordering::Relaxed, |o| Some(f(u64::from(o)) as u32));
            Ok(u64::from(old.unwrap_or_else(|o| o)))
        } else {
            // SAFETY: as above, for 8 bytes.
            let a = unsafe { AtomicU64::from_ptr(p.cast()) };
            // Ordering: AcqRel; see above.
            let old = a.fetch_update(Ordering::AcqRel, Ordering::Relaxed, |o| Some(f(o)));
            Ok(old.unwrap_or_else(|o| o))
        }
    }

    /// The device this view belongs to.
    pub fn gpu_id(&self) -> u32 {
        self.tr.gpu_id()
    }
}

mod sealed {
    pub trait Sealed {}
}

/// An element type of a [`DeviceSlice`]: a primitive integer or float, read and written with
/// relaxed atomic accesses of its own size (what a GPU's naturally aligned loads and stores are).
pub trait Scalar: sealed::Sealed + Copy + Default + 'static {
    #[doc(hidden)]
    /// Loads the element at `p`.
    ///
    /// # Safety
    /// `p` is aligned for `Self` and points at live memory.
    unsafe fn load(p: *const Self) -> Self;
    #[doc(hidden)]
    /// Stores `v` at `p`.
    ///
    /// # Safety
    /// As for [`Scalar::load`], for writable memory.
    unsafe fn store(p: *mut Self, v: Self);
}

macro_rules! scalar {
    ($($t:ty => $atomic:ty, $bits:ty, $to:expr, $from:expr;)*) => {$(
        impl sealed::Sealed for $t {}
        impl Scalar for $t {
            #[inline]
            unsafe fn load(p: *const Self) -> Self {
                // SAFETY: caller's contract: aligned, live; the atomic has the size and
                // alignment of the element.
                let a = unsafe { <$atomic>::from_ptr(p as *mut $bits) };
                // Ordering: Relaxed; plain device loads, ordered by the packet's fences.
                let bits: $bits = a.load(Ordering::Relaxed);
                #[allow(clippy::redundant_closure_call)]
                let v: Self = ($from)(bits);
                v
            }
            #[inline]
            unsafe fn store(p: *mut Self, v: Self) {
                // SAFETY: as in `load`.
                let a = unsafe { <$atomic>::from_ptr(p as *mut $bits) };
                #[allow(clippy::redundant_closure_call)]
                let bits: $bits = ($to)(v);
                // Ordering: Relaxed; plain device stores, ordered by the packet's fences.
                a.store(bits, Ordering::Relaxed);
            }
        }
    )*};
}

scalar! {
    u8 => std::sync::atomic::AtomicU8, u8, |v| v, |b| b;
    i8 => std::sync::atomic::AtomicI8, i8, |v| v, |b| b;
    u16 => std::sync::atomic::AtomicU16, u16, |v| v, |b| b;
    i16 => std::sync::atomic::AtomicI16, i16, |v| v, |b| b;
    u32 => std::sync::atomic::AtomicU32, u32, |v| v, |b| b;
    i32 => std::sync::atomic::AtomicI32, i32, |v| v, |b| b;
    u64 => std::sync::atomic::AtomicU64, u64, |v| v, |b| b;
    i64 => std::sync::atomic::AtomicI64, i64, |v| v, |b| b;
    f32 => std::sync::atomic::AtomicU32, u32, f32::to_bits, f32::from_bits;
    f64 => std::sync::atomic::AtomicU64, u64, f64::to_bits, f64::from_bits;
}

/// `len` elements of device memory, resolved once by [`MemView::slice`]: element access costs a
/// bounds check, bulk transfers are `memcpy`s. Valid while the work-group runs.
#[derive(Clone, Copy)]
pub struct DeviceSlice<'a, T: Scalar> {
    ptr: *mut T,
    len: usize,
    va: u64,
    _life: PhantomData<&'a [T]>,
}

impl<T: Scalar> std::fmt::Debug for DeviceSlice<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceSlice").field("va", &format_args!("{:#x}", self.va)).field("len", &self.len).finish()
    }
}

impl<'a, T: Scalar> DeviceSlice<'a, T> {
    /// Elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the slice has no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The GPU VA of element 0.
    pub fn va(&self) -> u64 {
        self.va
    }

    fn fault(&self, i: usize) -> KernelError {
        KernelError::MemoryFault(self.va.wrapping_add((i as u64).wrapping_mul(size_of::<T>() as u64)))
    }

    /// Element `i` (a memory fault past the end).
    #[inline]
    pub fn get(&self, i: usize) -> Result<T, KernelError> {
        if i >= self.len {
            return Err(self.fault(i));
        }
        // SAFETY: i < len inside the translated range; `slice` checked the alignment.
        Ok(unsafe { T::load(self.ptr.add(i)) })
    }

    /// Stores element `i` (a memory fault past the end).
    #[inline]
    pub fn set(&self, i: usize, v: T) -> Result<(), KernelError> {
        if i >= self.len {
            return Err(self.fault(i));
        }
        // SAFETY: as in `get`.
        unsafe { T::store(self.ptr.add(i), v) };
        Ok(())
    }

    /// Elements `range` as a slice of their own.
    pub fn sub(&self, range: std::ops::Range<usize>) -> Result<DeviceSlice<'a, T>, KernelError> {
        if range.start > range.end || range.end > self.len {
            return Err(self.fault(range.end));
        }
        Ok(DeviceSlice {
            // SAFETY: start <= len: at most one past the end of the translated range.
            ptr: unsafe { self.ptr.add(range.start) },
            len: range.end - range.start,
            va: self.va + (range.start * size_of::<T>()) as u64,
            _life: PhantomData,
        })
    }

    /// Copies the slice out (`out.len()` must equal its length).
    pub fn read_to(&self, out: &mut [T]) -> Result<(), KernelError> {
        if out.len() != self.len {
            return Err(self.fault(out.len().min(self.len)));
        }
        // SAFETY: `len` live elements at `ptr`; byte copies into memory we own, no reference
        // into device memory kept (kernels and the host may race on it as on a GPU).
        unsafe { std::ptr::copy(self.ptr, out.as_mut_ptr(), self.len) };
        Ok(())
    }

    /// Copies `data` in (`data.len()` must equal the slice's length).
    pub fn write_from(&self, data: &[T]) -> Result<(), KernelError> {
        if data.len() != self.len {
            return Err(self.fault(data.len().min(self.len)));
        }
        // SAFETY: as in `read_to`, for writable memory.
        unsafe { std::ptr::copy(data.as_ptr(), self.ptr, self.len) };
        Ok(())
    }

    /// Copies another slice of the same length in (overlap allowed).
    pub fn copy_from(&self, src: &DeviceSlice<'_, T>) -> Result<(), KernelError> {
        if src.len != self.len {
            return Err(self.fault(src.len.min(self.len)));
        }
        // SAFETY: both ranges were translated for `len` elements; `copy` allows overlap.
        unsafe { std::ptr::copy(src.ptr, self.ptr, self.len) };
        Ok(())
    }

    /// Stores `v` into every element.
    pub fn fill(&self, v: T) {
        if self.len == 0 {
            return;
        }
        // SAFETY: the first element is live and aligned.
        unsafe { self.ptr.write(v) };
        // Double the filled prefix with copies: a few `memcpy`s instead of one store per
        // element.
        let mut done = 1;
        while done < self.len {
            let n = done.min(self.len - done);
            // SAFETY: `[0, done)` is filled and `[done, done + n)` lies inside the slice; the two
            // do not overlap.
            unsafe { std::ptr::copy_nonoverlapping(self.ptr, self.ptr.add(done), n) };
            done += n;
        }
    }
}

impl DeviceSlice<'_, u8> {
    /// Repeats `pattern` over the slice (a trailing partial copy is cut), with `memcpy`s that
    /// double the filled prefix. An empty pattern leaves the slice as it is.
    pub fn fill_pattern(&self, pattern: &[u8]) {
        let n = pattern.len().min(self.len);
        if n == 0 {
            return;
        }
        // SAFETY: `n <= len` bytes of the translated range; the pattern is our own memory.
        unsafe { std::ptr::copy_nonoverlapping(pattern.as_ptr(), self.ptr, n) };
        let mut done = n;
        while done < self.len {
            let k = done.min(self.len - done);
            // SAFETY: `[0, done)` is filled and `[done, done + k)` lies inside the slice; the
            // ranges do not overlap.
            unsafe { std::ptr::copy_nonoverlapping(self.ptr, self.ptr.add(done), k) };
            done += k;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A snapshot of ranges (sorted here, as `build` sorts them) at fake device-view addresses
    /// (translation never dereferences them).
    fn snapshot(spans: &[(u64, u64)]) -> Translation {
        let mut spans = spans.to_vec();
        spans.sort_unstable();
        let ranges = spans
            .iter()
            .map(|&(va, len)| Range { va, end: va + len, base: (va as usize ^ 0x5000_0000) as *mut u8, engine: false })
            .collect();
        Translation { gpu_id: 1, ranges, pages: (0..PAGE_SLOTS).map(|_| AtomicU64::new(0)).collect() }
    }

    /// What a translation must be: a linear scan of the ranges.
    fn reference(spans: &[(u64, u64)], va: u64, len: u64) -> Result<*mut u8, u64> {
        let &(start, n) = spans.iter().find(|&&(s, n)| s <= va && va < s + n).ok_or(va)?;
        if va + len > start + n {
            return Err(start + n);
        }
        Ok(((start as usize ^ 0x5000_0000) + (va - start) as usize) as *mut u8)
    }

    #[test]
    fn a_view_translates_as_the_ranges_say_whatever_its_hints_hold() {
        // Back-to-back buffers, a gap, and more buffers than the view keeps hints for, two of
        // them on pages that share a slot of the snapshot's page cache.
        let mut spans = vec![
            (0x1000, 0x2000),
            (0x3000, 0x1000),
            (0x10000, 0x1000),
            (0x10000 + (PAGE_SLOTS as u64) * 0x1000, 0x1000),
            (0x40000, 0x8000),
            (0x50000, 0x1000),
        ];
        spans.extend((0..VIEW_HINTS as u64).map(|k| (0x60000 + k * 0x2000, 0x1000)));
        let tr = snapshot(&spans);
        let view = MemView::new(&tr);
        let probes = [
            (0x1000, 4),
            (0x2ffc, 4),
            (0x2ffc, 8), // runs past the first buffer into the next: a fault at its end
            (0x3000, 4),
            (0x10000, 4),
            (0x10000 + (PAGE_SLOTS as u64) * 0x1000, 4),
            (0x10ffc, 4),
            (0x11000, 4), // just past a buffer
            (0x40000, 0x8000),
            (0x47ffc, 8),
            (0x50000, 4),
            (0x60000, 4),
            (0x62000, 4),
            (0x64000, 4),
            (0x66000, 4),
            (0x68000, 4),
            (0x6a000, 4),
            (0x6c000, 4),
            (0x6e000, 4),
            (0x6e000 + 0x1000, 4), // between two buffers
            (0x1800, 4),           // evicted from the hints by now
            (0x0, 4),
            (0x5f000, 4),
            (0x3ffc, 4),
            (0x3ffc, 5),
        ];
        for round in 0..3 {
            for &(va, len) in &probes {
                assert_eq!(view.translate(va, len), reference(&spans, va, len), "round {round}: {va:#x}+{len}");
                assert_eq!(tr.translate(va, len), reference(&spans, va, len), "round {round}: {va:#x}+{len}");
            }
        }
    }
}
