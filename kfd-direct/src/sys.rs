//! The system-call boundary: every call the backend makes to the operating system goes through
//! [`Sys`], so the same code drives real amdkfd ([`LinuxSys`], rustix, no libc) and the emulated
//! GPU (`EmuSys`, behind the `emu` feature).
//!
//! The trait is deliberately small — the calls a kfd-direct runtime needs and nothing else
//! (docs/kfd-aql.md §1.2): `open`/`close` of `/dev/kfd` and the DRM render node, `ioctl` by full
//! request number, `mmap`/`munmap` of the three kinds of mapping the driver protocol uses, and a
//! whole-file read for sysfs. Two helpers that are not device calls ride along: the process id
//! (fork detection, §0 item 10) and a monotonic clock (wait deadlines).

use core::ffi::c_void;

/// A file descriptor as the system (or the emulator) numbers it.
pub type RawFd = i32;

pub use aqueduct_kfd_abi::Errno;

/// Result of a system call.
pub type SysResult<T> = core::result::Result<T, Errno>;

/// The kinds of mapping the driver protocol needs (docs/kfd-aql.md §1.4, §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mapping {
    /// Reserve address space: `PROT_NONE`, `MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE`, at an
    /// address of the kernel's choice (the GPU VA of a buffer, GPU VA == CPU VA on GFX9+ dGPUs).
    /// A non-null `addr` is a hint (no `MAP_FIXED`): the kernel uses it when the range is free.
    Reserve,
    /// CPU-map a buffer over its reservation: read/write, `MAP_SHARED | MAP_FIXED`, on the render
    /// node at the buffer's `mmap_offset`.
    Fixed {
        /// The render-node fd.
        fd: RawFd,
        /// The offset `ALLOC_MEMORY_OF_GPU` returned.
        offset: u64,
    },
    /// Map a driver page (the doorbell slice) read/write, `MAP_SHARED`, anywhere, on the kfd fd.
    Shared {
        /// The kfd fd.
        fd: RawFd,
        /// The encoded offset (`doorbell_offset & !8191`).
        offset: u64,
    },
}

/// The system calls of the kfd-direct backend.
///
/// Implementations are cheap handles (`Clone`) usable from any thread: the `std` host-function
/// service runs on a thread of its own with a clone.
pub trait Sys: Clone + Send + Sync + 'static {
    /// `open(path, O_RDWR | O_CLOEXEC)`.
    fn open(&self, path: &str) -> SysResult<RawFd>;
    /// `close(fd)`.
    fn close(&self, fd: RawFd) -> SysResult<()>;
    /// `ioctl(fd, request, arg)`.
    ///
    /// # Safety
    /// `arg` must point at the argument struct of `request` (and every user pointer inside it
    /// at memory of the sizes the ioctl uses), as for the real system call.
    unsafe fn ioctl(&self, fd: RawFd, request: u64, arg: *mut c_void) -> SysResult<i32>;
    /// `mmap` of one of the protocol's [`Mapping`]s.
    ///
    /// # Safety
    /// For [`Mapping::Fixed`], `addr..addr + len` must be a range the caller reserved and nobody
    /// else uses.
    unsafe fn mmap(&self, addr: *mut c_void, len: usize, mapping: Mapping) -> SysResult<*mut c_void>;
    /// `munmap(addr, len)`.
    ///
    /// # Safety
    /// Nothing may use the range afterwards.
    unsafe fn munmap(&self, addr: *mut c_void, len: usize) -> SysResult<()>;
    /// Reads a (sysfs) file from offset 0 into `buf`; returns the bytes read.
    fn read_file(&self, path: &str, buf: &mut [u8]) -> SysResult<usize>;
    /// The calling process's id (a change means the process forked).
    fn process_id(&self) -> u32;
    /// A monotonic clock in nanoseconds.
    fn now_ns(&self) -> u64;
    /// Lets the thread give way while it polls (a no-op by default).
    fn relax(&self) {}
    /// Called after a code object's segments were loaded and relocated, as ROCr's loader tells
    /// a debugger through `r_debug`. Real systems ignore it; the emulator binds the host twins
    /// of the object's kernels.
    fn code_object_loaded(&self, _elf: &[u8]) {}
    /// Whether device code can store to this process's doorbell mappings, as the
    /// conditional-graph scheduler kernel does. The emulator's kernels run in this process, so
    /// it can; a real GPU would need the doorbell page mapped into its VM, which this backend does
    /// not do, so real systems say no and conditional graph nodes are `NotSupported` there.
    fn device_doorbells(&self) -> bool {
        false
    }
}

#[cfg(all(target_os = "linux", feature = "emu"))]
pub(crate) use linux::cached_process_id;
#[cfg(target_os = "linux")]
pub use linux::LinuxSys;

#[cfg(target_os = "linux")]
mod linux {
    use super::{Errno, Mapping, RawFd, Sys, SysResult};
    use core::ffi::c_void;
    use rustix::fd::{BorrowedFd, FromRawFd, IntoRawFd, OwnedFd};
    use rustix::fs::{Mode, OFlags};
    use rustix::ioctl::{Ioctl, IoctlOutput, Opcode};
    use rustix::mm::{MapFlags, ProtFlags};

    /// Real Linux system calls through rustix (no libc).
    #[derive(Debug, Clone, Copy, Default)]
    pub struct LinuxSys;

    /// A page holding this process's id that the kernel zeroes in a forked child
    /// (`MADV_WIPEONFORK`), so the fork check every submit makes is a load, not a system call.
    static PID_PAGE: core::sync::atomic::AtomicPtr<core::sync::atomic::AtomicU32> =
        core::sync::atomic::AtomicPtr::new(core::ptr::null_mut());
    const PID_PAGE_BYTES: usize = 4096;

    /// The calling process's id, cached in [`PID_PAGE`]; a zero there (the first call, or a
    /// child after fork) takes the `getpid` path and refills it.
    pub(crate) fn cached_process_id() -> u32 {
        use core::sync::atomic::Ordering;
        // Ordering: Acquire pairs with the AcqRel publication of the page below.
        let page = PID_PAGE.load(Ordering::Acquire);
        if !page.is_null() {
            // SAFETY: once published, the page stays mapped for the life of the process (and of
            // a forked child, which inherits the mapping) and holds an AtomicU32 at offset 0.
            // Ordering: Relaxed; the value is only ever this process's own id.
            let cached = unsafe { &*page }.load(Ordering::Relaxed);
            if cached != 0 {
                return cached;
            }
        }
        let pid = rustix::process::getpid().as_raw_nonzero().get() as u32;
        let page = if page.is_null() { map_pid_page() } else { page };
        if !page.is_null() {
            // SAFETY: as above.
            // Ordering: Relaxed; see the load.
            unsafe { &*page }.store(pid, Ordering::Relaxed);
        }
        pid
    }

    fn map_pid_page() -> *mut core::sync::atomic::AtomicU32 {
        use core::sync::atomic::Ordering;
        let flags = ProtFlags::READ | ProtFlags::WRITE;
        // SAFETY: a fresh anonymous private mapping at an address the kernel chooses.
        let Ok(p) =
            (unsafe { rustix::mm::mmap_anonymous(core::ptr::null_mut(), PID_PAGE_BYTES, flags, MapFlags::PRIVATE) })
        else {
            return core::ptr::null_mut();
        };
        // SAFETY: `p` is the page just mapped; on failure it is unmapped and never used.
        let wiped = unsafe { rustix::mm::madvise(p, PID_PAGE_BYTES, rustix::mm::Advice::LinuxWipeOnFork) };
        let unmap = |p: *mut c_void| {
            // SAFETY: `p` is our own mapping, not published (or lost the race below).
            let _ = unsafe { rustix::mm::munmap(p, PID_PAGE_BYTES) };
        };
        if wiped.is_err() {
            unmap(p);
            return core::ptr::null_mut();
        }
        // Ordering: AcqRel publishes the mapping; on a lost race use the winner's page.
        match PID_PAGE.compare_exchange(core::ptr::null_mut(), p.cast(), Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => p.cast(),
            Err(winner) => {
                unmap(p);
                winner
            }
        }
    }

    fn errno(e: rustix::io::Errno) -> Errno {
        Errno(e.raw_os_error())
    }

    /// An ioctl whose request number is only known at run time.
    struct RawIoctl {
        request: Opcode,
        arg: *mut c_void,
    }

    // SAFETY: the caller of `Sys::ioctl` vouches that `arg` is the argument struct of `request`
    // (its contract); the kernel may read and write it, so the call is mutating.
    unsafe impl Ioctl for RawIoctl {
        type Output = i32;
        const IS_MUTATING: bool = true;

        fn opcode(&self) -> Opcode {
            self.request
        }

        fn as_ptr(&mut self) -> *mut c_void {
            self.arg
        }

        unsafe fn output_from_ptr(out: IoctlOutput, _arg: *mut c_void) -> rustix::io::Result<i32> {
            Ok(out)
        }
    }

    impl Sys for LinuxSys {
        fn open(&self, path: &str) -> SysResult<RawFd> {
            let fd = rustix::fs::open(path, OFlags::RDWR | OFlags::CLOEXEC, Mode::empty()).map_err(errno)?;
            Ok(fd.into_raw_fd())
        }

        fn close(&self, fd: RawFd) -> SysResult<()> {
            if fd < 0 {
                return Err(Errno::EBADF);
            }
            // SAFETY: the backend closes only fds it opened, once.
            drop(unsafe { OwnedFd::from_raw_fd(fd) });
            Ok(())
        }

        unsafe fn ioctl(&self, fd: RawFd, request: u64, arg: *mut c_void) -> SysResult<i32> {
            // SAFETY: `fd` is an fd the backend opened and keeps open for this call.
            let fd = unsafe { BorrowedFd::borrow_raw(fd) };
            let io = RawIoctl { request: request as Opcode, arg };
            // SAFETY: forwarded caller contract (argument struct of `request`).
            unsafe { rustix::ioctl::ioctl(fd, io) }.map_err(errno)
        }

        unsafe fn mmap(&self, addr: *mut c_void, len: usize, mapping: Mapping) -> SysResult<*mut c_void> {
            let rw = ProtFlags::READ | ProtFlags::WRITE;
            match mapping {
                Mapping::Reserve => {
                    // SAFETY: a fresh anonymous reservation at an address of the kernel's choice
                    // (`addr` only a hint: no MAP_FIXED, so nothing mapped is replaced).
                    unsafe {
                        rustix::mm::mmap_anonymous(
                            addr,
                            len,
                            ProtFlags::empty(),
                            MapFlags::PRIVATE | MapFlags::NORESERVE,
                        )
                    }
                    .map_err(errno)
                }
                Mapping::Fixed { fd, offset } => {
                    // SAFETY: `fd` is the backend's render fd, open for this call.
                    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
                    // SAFETY: forwarded caller contract: the range is the caller's reservation.
                    unsafe { rustix::mm::mmap(addr, len, rw, MapFlags::SHARED | MapFlags::FIXED, fd, offset) }
                        .map_err(errno)
                }
                Mapping::Shared { fd, offset } => {
                    // SAFETY: `fd` is the backend's kfd fd, open for this call.
                    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
                    // SAFETY: a new shared mapping at an address of the kernel's choice.
                    unsafe { rustix::mm::mmap(core::ptr::null_mut(), len, rw, MapFlags::SHARED, fd, offset) }
                        .map_err(errno)
                }
            }
        }

        unsafe fn munmap(&self, addr: *mut c_void, len: usize) -> SysResult<()> {
            // SAFETY: forwarded caller contract.
            unsafe { rustix::mm::munmap(addr, len) }.map_err(errno)
        }

        fn read_file(&self, path: &str, buf: &mut [u8]) -> SysResult<usize> {
            let fd = rustix::fs::open(path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).map_err(errno)?;
            let mut n = 0;
            while n < buf.len() {
                let Some(rest) = buf.get_mut(n..) else { break };
                match rustix::io::read(&fd, rest) {
                    Ok(0) => break,
                    Ok(k) => n += k,
                    Err(rustix::io::Errno::INTR) => continue,
                    Err(e) => return Err(errno(e)),
                }
            }
            Ok(n)
        }

        fn process_id(&self) -> u32 {
            cached_process_id()
        }

        fn now_ns(&self) -> u64 {
            let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
            (t.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(t.tv_nsec as u64)
        }

        fn relax(&self) {
            rustix::thread::sched_yield();
        }
    }
}
