//! Exported buffers (docs/kfd-aql.md §1.4, "Physical handles"): `EXPORT_DMABUF` makes a VRAM or
//! GTT buffer a dma-buf fd, `IMPORT_DMABUF` makes a dma-buf a new buffer at a VA of the caller's
//! choice, `GET_DMABUF_INFO` describes one. Every buffer of a dma-buf stands for the same pool
//! pages, so two imports at two VAs alias each other in the translation; the pages go back to the
//! pool when the last reference (an fd or a buffer) goes.
//!
//! # Dma-bufs are real fds, shared between processes
//!
//! A dma-buf fd is a real OS fd: a new open of the pool's memfd whose file position is the
//! dma-buf's *descriptor*, a pool page written at the first export ([`Descriptor`]: magic, pool
//! offset, size, flags, device, and a shared state word). A second process that gets the fd (by
//! `pidfd_getfd`, or over a Unix socket) and imports it into its own emulated GPU finds the
//! descriptor at the fd's position, maps the exporter's pool pages into its own device view and
//! gives them a buffer of its own: the two processes' kernels and copies then see one set of
//! pages, as two processes share VRAM through a dma-buf on one real GPU.
//!
//! The pages outlive whichever side lets go first. The state word counts the importing
//! processes' dma-bufs (low 32 bits) and has [`EXPORTER_GONE`] set once the exporting process
//! dropped its last reference; whoever leaves the word at exactly `EXPORTER_GONE` returns the
//! pages to the system (a hole punched in the pool memfd, through the pool or, in an importer,
//! through its mapping).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::abi::{limits, mem_flags, ExportDmabufArgs, GetDmabufInfoArgs, ImportDmabufArgs};
use crate::memory::{Backing, Bo, DRM_MMAP_BASE, GPUVM_BASE, GPUVM_LIMIT};
use crate::{Errno, SysResult};

use super::{Emu, FdEntry, FdKind, ProcState, Process, FIRST_FD};

/// `b"AQDMABUF"`: the first word of a [`Descriptor`].
const MAGIC: u64 = u64::from_le_bytes(*b"AQDMABUF");
/// Set in [`Descriptor::state`] once the exporting process holds no reference any more.
const EXPORTER_GONE: u64 = 1 << 63;
/// The importer count in [`Descriptor::state`].
const IMPORTERS: u64 = (1 << 32) - 1;

/// What a dma-buf fd's position points at, in the exporter's pool (one page of its own).
#[repr(C)]
struct Descriptor {
    magic: u64,
    /// Pool offset of the pages.
    off: u64,
    /// Bytes (page-rounded).
    size: u64,
    flags: u32,
    gpu_id: u32,
    /// Importing dma-bufs of other processes, and [`EXPORTER_GONE`].
    state: AtomicU64,
}

/// Where a dma-buf's pages live, as this process sees them.
#[derive(Debug, Clone, Copy)]
enum Pages {
    /// Exported here: pool offset of the pages and of the descriptor page.
    Local { off: u64, desc: u64 },
    /// Another process's: its pages and its descriptor page, mapped here at these addresses.
    Foreign { addr: u64, desc: u64 },
}

/// One dma-buf: pool pages and who holds them.
#[derive(Debug, Clone, Copy)]
pub(super) struct DmaBuf {
    pages: Pages,
    /// Bytes (page-rounded).
    size: u64,
    /// The exported buffer's [`mem_flags`].
    flags: u32,
    /// The exporting device.
    gpu_id: u32,
    /// Open fds plus buffers of it, in this process.
    refs: u32,
}

/// A dma-buf fd as `dma_buf_get` resolves it.
enum Resolved {
    /// One of this machine's (by id).
    Local(u64, DmaBuf),
    /// Another process's: its descriptor, read through the fd.
    Foreign { fd: i32, desc_pos: u64, off: u64, size: u64, flags: u32, gpu_id: u32 },
}

/// Raises the soft limit of open fds to the hard one: every dma-buf is a real fd, and a program
/// holding many (a physical handle of virtual memory keeps one open) must not meet the usual
/// soft limit of 1024 where the emulator's own fds had none.
pub(super) fn raise_fd_limit() {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit on a struct we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}

fn errno() -> Errno {
    Errno(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EINVAL))
}

/// The descriptor at a device-view (or mapped) address.
///
/// # Safety
/// `p` points at a live, page-aligned descriptor page.
unsafe fn descriptor<'a>(p: *mut u8) -> &'a Descriptor {
    // SAFETY: the caller's contract; a page is aligned for the descriptor and every field is
    // valid for any bits; `state` is only touched atomically.
    unsafe { &*p.cast::<Descriptor>() }
}

impl Emu {
    /// `kfd_ioctl_export_dmabuf`: the device of the handle must exist (`EINVAL`) and the process
    /// must have used it (`EINVAL`), the handle must name a buffer (`EINVAL`); a USERPTR buffer
    /// cannot be exported (`EPERM`, as `amdgpu_gem_prime_export` answers), nor — here — a
    /// doorbell or MMIO page, or an import of another process's dma-buf (`EINVAL`). A buffer
    /// exported twice is one dma-buf. The fd is a real one (`O_CLOEXEC` as `flags` asks).
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
        let (id, desc) = match bo.dmabuf {
            Some(id) => match bufs.get(&id).ok_or(Errno::EINVAL)?.pages {
                Pages::Local { desc, .. } => (id, desc),
                Pages::Foreign { .. } => return Err(Errno::EINVAL),
            },
            None => {
                let desc = self.m.pool.alloc(limits::PAGE_SIZE).ok_or(Errno::ENOMEM)?;
                // SAFETY: a fresh pool page, ours alone until the fd below exists.
                unsafe {
                    self.m.pool.ptr(desc).cast::<Descriptor>().write(Descriptor {
                        magic: MAGIC,
                        off,
                        size: bo.size,
                        flags: bo.flags,
                        gpu_id,
                        state: AtomicU64::new(0),
                    })
                };
                // Ordering: Relaxed; a unique counter.
                let id = self.m.next_dmabuf.fetch_add(1, Ordering::Relaxed);
                let d = DmaBuf { pages: Pages::Local { off, desc }, size: bo.size, flags: bo.flags, gpu_id, refs: 1 };
                bufs.insert(id, d);
                bo.dmabuf = Some(id);
                (id, desc)
            }
        };
        let fd = self.open_pool_at(desc, a.flags)?;
        bufs.get_mut(&id).ok_or(Errno::EINVAL)?.refs += 1;
        drop(bufs);
        self.lock_fds().insert(fd, FdEntry { kind: FdKind::DmaBuf(id), owner: self.pid });
        a.dmabuf_fd = fd as u32;
        Ok(())
    }

    /// A new open of the pool memfd positioned at `pos` (the fd of a dma-buf).
    fn open_pool_at(&self, pos: u64, flags: u32) -> SysResult<i32> {
        let path = format!("/proc/self/fd/{}\0", self.m.pool.fd());
        let cloexec = if flags & libc::O_CLOEXEC as u32 != 0 { libc::O_CLOEXEC } else { 0 };
        // SAFETY: a NUL-terminated path; opening a new description of our own memfd.
        let fd = unsafe { libc::open(path.as_ptr().cast(), libc::O_RDWR | cloexec) };
        if fd < 0 {
            return Err(errno());
        }
        // SAFETY: positioning the fd just opened.
        if unsafe { libc::lseek(fd, pos as libc::off_t, libc::SEEK_SET) } < 0 {
            let e = errno();
            // SAFETY: closing the fd just opened.
            unsafe { libc::close(fd) };
            return Err(e);
        }
        Ok(fd)
    }

    /// The dma-buf behind `fd`, as `dma_buf_get` finds it: an fd of this machine's table
    /// (another process's entry, or another kind of file → `EBADF` / `EINVAL`), else a real fd:
    /// not open → `EBADF`; a dma-buf of this machine's pool (a second fd of it) → that one;
    /// another emulated GPU's dma-buf (its descriptor at the fd's position) → foreign; any other
    /// file → `EINVAL`.
    fn resolve_dmabuf(&self, fd: u32) -> SysResult<Resolved> {
        let fd = fd as i32;
        if let Some(e) = self.lock_fds().get(&fd).copied() {
            if e.owner != self.pid {
                return Err(Errno::EBADF);
            }
            let FdKind::DmaBuf(id) = e.kind else { return Err(Errno::EINVAL) };
            let d = *self.m.dmabufs.lock().unwrap_or_else(|e| e.into_inner()).get(&id).ok_or(Errno::EINVAL)?;
            return Ok(Resolved::Local(id, d));
        }
        if !(0..FIRST_FD).contains(&fd) {
            return Err(Errno::EBADF);
        }
        // SAFETY: fstat into a struct we own.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        if unsafe { libc::fstat(fd, &mut st) } != 0 {
            return Err(Errno::EBADF);
        }
        // SAFETY: reading the position of an open fd.
        let pos = unsafe { libc::lseek(fd, 0, libc::SEEK_CUR) };
        let mut raw = [0u8; size_of::<Descriptor>()];
        // SAFETY: pread into a buffer we own.
        let n = if pos >= 0 { unsafe { libc::pread(fd, raw.as_mut_ptr().cast(), raw.len(), pos) } } else { -1 };
        let word = |i: usize| u64::from_le_bytes(raw[i * 8..i * 8 + 8].try_into().unwrap_or_default());
        if (st.st_mode & libc::S_IFMT) != libc::S_IFREG || n != raw.len() as isize || word(0) != MAGIC {
            return Err(Errno::EINVAL);
        }
        let (pos, off, size) = (pos as u64, word(1), word(2));
        let (flags, gpu_id) = (word(3) as u32, (word(3) >> 32) as u32);
        let page = limits::PAGE_SIZE;
        if pos % page != 0
            || off % page != 0
            || size % page != 0
            || off.checked_add(size).is_none_or(|e| e > st.st_size as u64)
        {
            return Err(Errno::EINVAL);
        }
        // SAFETY: fstat into a struct we own.
        let mut own: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: as above, on the pool's fd.
        let same = unsafe { libc::fstat(self.m.pool.fd(), &mut own) } == 0
            && (own.st_dev, own.st_ino) == (st.st_dev, st.st_ino);
        if same {
            let bufs = self.m.dmabufs.lock().unwrap_or_else(|e| e.into_inner());
            let local = bufs.iter().find(|(_, d)| matches!(d.pages, Pages::Local { desc, .. } if desc == pos));
            let (id, d) = local.ok_or(Errno::EINVAL)?;
            return Ok(Resolved::Local(*id, *d));
        }
        Ok(Resolved::Foreign { fd, desc_pos: pos, off, size, flags, gpu_id })
    }

    /// Maps another process's dma-buf (its pages and its descriptor) and counts this process
    /// among its importers; returns the new dma-buf's id. `EINVAL` once the pages are gone (the
    /// exporter left and no importer held them).
    fn attach_foreign(&self, fd: i32, desc_pos: u64, off: u64, size: u64, flags: u32, gpu_id: u32) -> SysResult<u64> {
        let map = |len: u64, at: u64| {
            let rw = libc::PROT_READ | libc::PROT_WRITE;
            // SAFETY: a new shared mapping at an address of the kernel's choice.
            let p =
                unsafe { libc::mmap(std::ptr::null_mut(), len as usize, rw, libc::MAP_SHARED, fd, at as libc::off_t) };
            if p == libc::MAP_FAILED {
                Err(errno())
            } else {
                Ok(p.expose_provenance() as u64)
            }
        };
        let unmap = |p: u64, len: u64| {
            // SAFETY: unmapping a mapping made here and used by nothing else yet.
            unsafe { libc::munmap(std::ptr::with_exposed_provenance_mut(p as usize), len as usize) };
        };
        let addr = map(size, off)?;
        let desc = match map(limits::PAGE_SIZE, desc_pos) {
            Ok(d) => d,
            Err(e) => {
                unmap(addr, size);
                return Err(e);
            }
        };
        // SAFETY: the descriptor page just mapped.
        let state = unsafe { &descriptor(std::ptr::with_exposed_provenance_mut(desc as usize)).state };
        // Ordering: AcqRel pairs with the exporter's and other importers' updates, so that the
        // pages are not punched under a new importer.
        let joined = state.fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
            (s != EXPORTER_GONE && s & IMPORTERS < IMPORTERS).then_some(s + 1)
        });
        if joined.is_err() {
            unmap(addr, size);
            unmap(desc, limits::PAGE_SIZE);
            return Err(Errno::EINVAL);
        }
        // Ordering: Relaxed; a unique counter.
        let id = self.m.next_dmabuf.fetch_add(1, Ordering::Relaxed);
        let d = DmaBuf { pages: Pages::Foreign { addr, desc }, size, flags, gpu_id, refs: 0 };
        self.m.dmabufs.lock().unwrap_or_else(|e| e.into_inner()).insert(id, d);
        Ok(id)
    }

    /// `kfd_ioctl_import_dmabuf`: an unknown device → `EINVAL`; the fd as `dma_buf_get` checks
    /// it; a device whose VM the process has not acquired → `ENODEV`; the VA as for any buffer
    /// (page-aligned, inside GPUVM, overlapping nothing: `EINVAL`). The new buffer is not mapped
    /// on any GPU yet (`MAP_MEMORY_TO_GPU` does that) and counts against no device's VRAM. A
    /// dma-buf of another process's emulated GPU is mapped into this one's device view.
    pub(super) fn import_dmabuf(&self, proc: &Process, a: &mut ImportDmabufArgs) -> SysResult<()> {
        self.node_index(a.gpu_id).ok_or(Errno::EINVAL)?;
        let resolved = self.resolve_dmabuf(a.dmabuf_fd)?;
        let size = match &resolved {
            Resolved::Local(_, d) => d.size,
            Resolved::Foreign { size, .. } => *size,
        };
        let mut st = proc.lock();
        self.bound_pdd(&mut st, a.gpu_id, Errno::ENODEV)?;
        let mut vm = proc.vm.write();
        if a.va_addr % limits::PAGE_SIZE != 0
            || a.va_addr < GPUVM_BASE
            || a.va_addr.checked_add(size).is_none_or(|end| end - 1 > GPUVM_LIMIT)
            || vm.overlaps(a.va_addr, size)
        {
            return Err(Errno::EINVAL);
        }
        let id = match resolved {
            Resolved::Local(id, _) => id,
            Resolved::Foreign { fd, desc_pos, off, size, flags, gpu_id } => {
                self.attach_foreign(fd, desc_pos, off, size, flags, gpu_id)?
            }
        };
        let d = {
            let mut bufs = self.m.dmabufs.lock().unwrap_or_else(|e| e.into_inner());
            let d = bufs.get_mut(&id).ok_or(Errno::EINVAL)?;
            d.refs += 1;
            *d
        };
        let (backing, mmap_offset) = match d.pages {
            Pages::Local { off, .. } => (Backing::Pool(off), DRM_MMAP_BASE + off),
            // No GEM offset: this process's render node does not hold the pages.
            Pages::Foreign { addr, .. } => (Backing::Foreign(addr), 0),
        };
        let handle = vm.new_handle(a.gpu_id);
        vm.insert(Bo {
            handle,
            gpu_id: a.gpu_id,
            va: a.va_addr,
            size: d.size,
            flags: d.flags,
            backing,
            mmap_offset,
            mapped: BTreeSet::new(),
            queue_refs: 0,
            dmabuf: Some(id),
        });
        a.handle = handle;
        Ok(())
    }

    /// `kfd_ioctl_get_dmabuf_info`: the size, exporting device and flags of a dma-buf (this
    /// machine's or another process's); the emulator keeps no metadata (its size is 0).
    pub(super) fn get_dmabuf_info(&self, a: &mut GetDmabufInfoArgs) -> SysResult<()> {
        if self.m.nodes.is_empty() {
            return Err(Errno::EINVAL);
        }
        (a.size, a.gpu_id, a.flags) = match self.resolve_dmabuf(a.dmabuf_fd)? {
            Resolved::Local(_, d) => (d.size, d.gpu_id, d.flags),
            Resolved::Foreign { size, gpu_id, flags, .. } => (size, gpu_id, flags),
        };
        a.metadata_size = 0;
        Ok(())
    }

    /// Drops one reference to dma-buf `id`; the last returns its pages — unless another
    /// process still imports them — to the pool (and, for VRAM, to the exporting device's
    /// budget in `st`, the process that allocated it).
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
        match d.pages {
            Pages::Local { off, desc } => {
                // SAFETY: the descriptor page stays in the pool until released below.
                let state = unsafe { &descriptor(self.m.pool.ptr(desc)).state };
                // Ordering: AcqRel; see `attach_foreign`.
                if state.fetch_or(EXPORTER_GONE, Ordering::AcqRel) & IMPORTERS == 0 {
                    self.m.pool.release(off, d.size);
                    self.m.pool.release(desc, limits::PAGE_SIZE);
                }
                if d.flags & mem_flags::VRAM != 0 {
                    if let Some(p) = st.and_then(|st| st.pdds.get_mut(&d.gpu_id)) {
                        p.vram_used = p.vram_used.saturating_sub(d.size);
                    }
                }
            }
            Pages::Foreign { addr, desc } => {
                let ptr = std::ptr::with_exposed_provenance_mut::<libc::c_void>(addr as usize);
                let dptr = std::ptr::with_exposed_provenance_mut::<libc::c_void>(desc as usize);
                // SAFETY: the descriptor page mapped by `attach_foreign`, unmapped only here.
                let state = unsafe { &descriptor(dptr.cast()).state };
                // Ordering: AcqRel; see `attach_foreign`.
                if state.fetch_sub(1, Ordering::AcqRel) == EXPORTER_GONE + 1 {
                    // SAFETY: punching the pages of shared mappings nobody else holds now.
                    unsafe {
                        libc::madvise(ptr, d.size as usize, libc::MADV_REMOVE);
                        libc::madvise(dptr, limits::PAGE_SIZE as usize, libc::MADV_REMOVE);
                    }
                }
                // The pages' place in the device view becomes zero pages rather than a hole,
                // as a freed pool range does, for a translation snapshot that outlives the
                // buffer (`crate::memory`, "Translation").
                let rw = libc::PROT_READ | libc::PROT_WRITE;
                let anon = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED | libc::MAP_NORESERVE;
                // SAFETY: replacing our own mapping of the foreign pages; unmapping the
                // descriptor page only this entry used.
                unsafe {
                    libc::mmap(ptr, d.size as usize, rw, anon, -1, 0);
                    libc::munmap(dptr, limits::PAGE_SIZE as usize);
                }
            }
        }
    }

    /// The pool offset `mmap` of a dma-buf fd maps: from offset 0 (`EINVAL` otherwise), at most
    /// its size (`EINVAL`); another process's dma-buf is not mapped through this machine.
    pub(super) fn dmabuf_mmap_offset(&self, id: u64, len: u64, offset: u64) -> SysResult<u64> {
        let bufs = self.m.dmabufs.lock().unwrap_or_else(|e| e.into_inner());
        let d = bufs.get(&id).ok_or(Errno::EINVAL)?;
        let Pages::Local { off, .. } = d.pages else { return Err(Errno::EINVAL) };
        if offset != 0 || len > d.size {
            return Err(Errno::EINVAL);
        }
        Ok(off)
    }
}
