//! [`EmuSys`]: the emulated GPU (`aqueduct-kfd-emu`) behind the [`Sys`] trait, with a call trace
//! and an account of what is held (fds, buffers, mappings) for tests.

use core::ffi::c_void;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::vec::Vec;

use aqueduct::BuiltinKernel;
use aqueduct_kfd_emu::{kernels::builtin_twins, Emu, EmuConfig, Twin};

use crate::abi::Request;
use crate::sys::{Errno, Mapping, RawFd, Sys, SysResult};

/// One recorded system call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// `open` of a path.
    Open(std::string::String),
    /// `close`.
    Close(RawFd),
    /// `ioctl` with this command number (`nr`) and its result.
    Ioctl(u32, Result<(), Errno>),
    /// An address-space reservation.
    Reserve(usize),
    /// A fixed CPU mapping of a buffer.
    MapFixed(usize),
    /// A shared mapping of a driver page (the doorbell slice).
    MapShared(u64),
    /// `munmap`.
    Unmap(usize),
}

#[derive(Default)]
struct Record {
    tracing: bool,
    calls: Vec<Call>,
    fds: Vec<RawFd>,
    mappings: Vec<(usize, usize)>,
}

/// The emulator as a [`Sys`]. Clones share the machine, the trace and the simulated pid.
#[derive(Clone)]
pub struct EmuSys {
    emu: Emu,
    record: Arc<Mutex<Record>>,
    fork_generation: Arc<AtomicU32>,
}

impl core::fmt::Debug for EmuSys {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("EmuSys").field("emu", &self.emu).finish()
    }
}

/// Names under which the blit kernels' twins are registered (the kernels' symbol names in
/// `blit/blit.cl`).
pub const BLIT_TWIN_NAMES: [(BuiltinKernel, &str); 4] = [
    (BuiltinKernel::Copy, "aqueduct_copy"),
    (BuiltinKernel::Fill, "aqueduct_fill"),
    (BuiltinKernel::WriteValue, "aqueduct_write_value"),
    (BuiltinKernel::GraphScheduler, "aqueduct_graph_scheduler"),
];

impl EmuSys {
    /// A new emulated machine with `config`.
    pub fn new(config: EmuConfig) -> std::io::Result<EmuSys> {
        Ok(EmuSys::over(Emu::new(config)?))
    }

    /// The default machine (one gfx90a, KFD 1.17).
    pub fn with_defaults() -> std::io::Result<EmuSys> {
        EmuSys::new(EmuConfig::default())
    }

    /// Wraps an existing emulator. The blit kernels' host twins are registered by name, so the
    /// backend's blit code objects run them once loaded.
    pub fn over(emu: Emu) -> EmuSys {
        for (kernel, twin) in builtin_twins() {
            if let Some((_, name)) = BLIT_TWIN_NAMES.iter().find(|(k, _)| *k == kernel) {
                emu.register_twin_by_name(Twin { name: Arc::from(*name), ..twin });
            }
        }
        EmuSys { emu, record: Arc::default(), fork_generation: Arc::default() }
    }

    /// The emulator (fault injection, twins, observation).
    pub fn emu(&self) -> &Emu {
        &self.emu
    }

    fn record(&self) -> MutexGuard<'_, Record> {
        self.record.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts (or stops) recording calls; starting clears the trace.
    pub fn set_tracing(&self, on: bool) {
        let mut r = self.record();
        r.tracing = on;
        if on {
            r.calls.clear();
        }
    }

    /// The calls recorded since tracing started.
    pub fn calls(&self) -> Vec<Call> {
        self.record().calls.clone()
    }

    /// The ioctl command numbers recorded (successful or not), in order.
    pub fn ioctl_trace(&self) -> Vec<u32> {
        self.record()
            .calls
            .iter()
            .filter_map(|c| match c {
                Call::Ioctl(n, _) => Some(*n),
                _ => None,
            })
            .collect()
    }

    /// Fds open through this sys.
    pub fn open_fds(&self) -> usize {
        self.record().fds.len()
    }

    /// Mappings (reservations, buffer and doorbell mappings) still in place.
    pub fn live_mappings(&self) -> usize {
        self.record().mappings.len()
    }

    /// Simulates `fork()`: from now on the process id differs from the one the backend recorded
    /// at open, as in a child process.
    pub fn simulate_fork(&self) {
        // Ordering: Relaxed; a counter read by `process_id`.
        self.fork_generation.fetch_add(1, Ordering::Relaxed);
    }

    fn push(&self, c: Call) {
        let mut r = self.record();
        if r.tracing {
            r.calls.push(c);
        }
    }
}

impl Sys for EmuSys {
    fn device_doorbells(&self) -> bool {
        true
    }

    fn open(&self, path: &str) -> SysResult<RawFd> {
        self.push(Call::Open(path.into()));
        let fd = self.emu.open(path, libc::O_RDWR | libc::O_CLOEXEC)?;
        self.record().fds.push(fd);
        Ok(fd)
    }

    fn close(&self, fd: RawFd) -> SysResult<()> {
        self.push(Call::Close(fd));
        self.emu.close(fd)?;
        self.record().fds.retain(|f| *f != fd);
        Ok(())
    }

    unsafe fn ioctl(&self, fd: RawFd, request: u64, arg: *mut c_void) -> SysResult<i32> {
        // SAFETY: forwarded caller contract.
        let r = unsafe { self.emu.ioctl(fd, request, arg) };
        self.push(Call::Ioctl(Request::decode(request).nr, r.map(|_| ())));
        r
    }

    unsafe fn mmap(&self, addr: *mut c_void, len: usize, mapping: Mapping) -> SysResult<*mut c_void> {
        let rw = libc::PROT_READ | libc::PROT_WRITE;
        let r = match mapping {
            Mapping::Reserve => {
                self.push(Call::Reserve(len));
                let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;
                // SAFETY: a fresh anonymous reservation (`addr` only a hint: no MAP_FIXED).
                unsafe { self.emu.mmap(addr, len, libc::PROT_NONE, flags, -1, 0) }
            }
            Mapping::Fixed { fd, offset } => {
                self.push(Call::MapFixed(len));
                // SAFETY: forwarded caller contract (the range is the caller's reservation).
                unsafe { self.emu.mmap(addr, len, rw, libc::MAP_SHARED | libc::MAP_FIXED, fd, offset) }
            }
            Mapping::Shared { fd, offset } => {
                self.push(Call::MapShared(offset));
                // SAFETY: a new mapping at an address of the kernel's choice.
                unsafe { self.emu.mmap(core::ptr::null_mut(), len, rw, libc::MAP_SHARED, fd, offset) }
            }
        }?;
        if mapping == Mapping::Reserve || matches!(mapping, Mapping::Shared { .. }) {
            self.record().mappings.push((r as usize, len));
        }
        Ok(r)
    }

    unsafe fn munmap(&self, addr: *mut c_void, len: usize) -> SysResult<()> {
        self.push(Call::Unmap(len));
        // SAFETY: forwarded caller contract.
        unsafe { self.emu.munmap(addr, len) }?;
        self.record().mappings.retain(|&(a, _)| a != addr as usize);
        Ok(())
    }

    fn read_file(&self, path: &str, buf: &mut [u8]) -> SysResult<usize> {
        self.emu.read_sysfs(path, buf)
    }

    fn process_id(&self) -> u32 {
        // Ordering: Relaxed; see simulate_fork.
        crate::sys::cached_process_id().wrapping_add(self.fork_generation.load(Ordering::Relaxed))
    }

    fn now_ns(&self) -> u64 {
        use std::sync::OnceLock;
        static START: OnceLock<std::time::Instant> = OnceLock::new();
        START.get_or_init(std::time::Instant::now).elapsed().as_nanos() as u64
    }

    fn relax(&self) {
        std::thread::yield_now();
    }

    fn code_object_loaded(&self, elf: &[u8]) {
        let _ = self.emu.load_code_object(elf);
    }
}
