//! The ioctl front end. [`Emu`]: the emulated machine as a process sees it — `open`, `ioctl`,
//! `mmap`/`munmap`, `close` and sysfs reads — and the amdkfd driver model behind the ioctls
//! (docs/kfd-aql.md §1, §2, §1.5, §1.6, §7, §9 "ioctl layer"). One `impl Emu` over several files,
//! one per behaviour: the process's GPU memory (`vm`), queues (`queues`), events (`events`),
//! kernels and code objects (`kernels`), fault injection and observation (`faults`), and the
//! older ioctls of ROCm 5.2's thunk ([`dialect`]).
//!
//! # Who validates what
//!
//! The ioctl entry ([`Emu::ioctl`]) does what `kfd_ioctl` does before a handler runs: the fd must
//! be a kfd fd of the calling process (`EBADF` otherwise, including after `fork`), the command is
//! looked up by `nr` only (`EINVAL` if unknown; each handler is keyed on its request type in
//! [`abi::ioctl`]), the argument is copied in with the caller's size
//! and zero-extended to the kernel's, and copied back out with the caller's size afterwards. Each
//! handler then validates as its amdkfd counterpart does, with the same errnos. Queue creation
//! additionally applies the ≥ 6.12 queue-buffer checks (`kfd_queue_acquire_buffers`).
//!
//! # User pointers
//!
//! The emulator runs in the caller's address space. A user pointer the kernel would copy from
//! is checked the way `access_ok` checks it (inside the 47-bit user space), and a null or
//! first-page pointer counts as unmapped (`EFAULT`). Other bad pointers are the caller's
//! responsibility (the `unsafe` contract of [`Emu::ioctl`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::c_void;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::abi::GetVersionArgs;
use crate::abi::{self, ioctl, limits, mmap_offset, Ioctl, Request};
use crate::aql_queue::AqlQueue;
use crate::device::{Device, DeviceParts};
use crate::events::Events;
use crate::hw::Clock;
use crate::memory::{Backing, Pool, VmLock};
use crate::registry::Registry;
use crate::scheduler::Engine;
use crate::sdma::{SdmaQueue, SdmaStats};
use crate::topology::{gpu_nodes, GpuNode, GpuProfile, SysfsTree};
use crate::{Errno, SysResult};

pub mod dialect;
mod dmabuf;
mod events;
mod faults;
mod kernels;
mod queues;
mod vm;

/// An emulated file descriptor.
pub type Fd = i32;

/// First fd number the emulator hands out (far from real fds, so mixing them up fails loudly).
pub const FIRST_FD: Fd = 0x4000;

/// How the emulated machine is built.
#[derive(Debug, Clone)]
pub struct EmuConfig {
    /// The GPUs, in topology order (nodes 1..).
    pub gpus: Vec<GpuProfile>,
    /// KFD ABI version `GET_VERSION` reports (default 1.17).
    pub version: (u32, u32),
    /// Adversarial mode: barrier-less dispatches overlap and complete out of order, seeded.
    pub adversarial_seed: Option<u64>,
    /// Address space reserved for emulated device memory (sparse; default 64 GiB).
    pub pool_bytes: u64,
    /// Whether VRAM is fully CPU-visible (large BAR); `VRAM|PUBLIC` fails with `EINVAL` if not.
    pub large_bar: bool,
    /// Compute-unit workers per GPU: how many work-groups run at once (1..=64). Default:
    /// `AQUEDUCT_EMU_CUS` if set, else the host's available parallelism. A device runs one
    /// thread more than this (the packet processor's). A queue's CU mask maps onto workers as
    /// CU `c` → worker `c % cus`.
    pub cus: u32,
    /// Shared libraries of C twins (`include/aqueduct_emu.h`) to load at start. Default: the
    /// colon-separated paths of `AQUEDUCT_TWINS`.
    pub twin_libraries: Vec<PathBuf>,
    /// Twins or machine code for code-object kernels. Default: `AQUEDUCT_EMU_KERNELS`
    /// ([`crate::KernelMode::from_env`]).
    pub kernels: crate::KernelMode,
    /// Instructions one wave of a machine-code kernel may run before the dispatch fails.
    /// Default: `AQUEDUCT_EMU_WATCHDOG`, else 2^32.
    pub isa_watchdog: u64,
}

/// The default worker count: `AQUEDUCT_EMU_CUS`, else the host's available parallelism.
pub fn default_cus() -> u32 {
    std::env::var("AQUEDUCT_EMU_CUS")
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get() as u32))
        .clamp(1, 64)
}

impl Default for EmuConfig {
    fn default() -> Self {
        EmuConfig {
            gpus: vec![GpuProfile::Gfx90a],
            version: (1, 17),
            adversarial_seed: None,
            pool_bytes: 64 << 30,
            large_bar: true,
            cus: default_cus(),
            twin_libraries: crate::c_abi::twin_libraries_from_env(),
            kernels: crate::KernelMode::from_env(),
            isa_watchdog: crate::isa::watchdog_from_env(),
        }
    }
}

impl EmuConfig {
    /// A machine with these GPUs.
    pub fn with_gpus(gpus: &[GpuProfile]) -> Self {
        EmuConfig { gpus: gpus.to_vec(), ..Default::default() }
    }

    /// Sets the reported KFD version.
    pub fn version(mut self, major: u32, minor: u32) -> Self {
        self.version = (major, minor);
        self
    }

    /// Turns on adversarial scheduling with a seed.
    pub fn adversarial(mut self, seed: u64) -> Self {
        self.adversarial_seed = Some(seed);
        self
    }

    /// Sets the compute-unit workers per GPU (clamped to 1..=64).
    pub fn cus(mut self, cus: u32) -> Self {
        self.cus = cus.clamp(1, 64);
        self
    }
}

/// A queue's state as the device sees it (for tests and diagnostics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueState {
    /// Consuming packets.
    Active,
    /// Halted by a queue exception with this KFD exception code.
    Error(u32),
    /// Stuck in a kernel that never finishes.
    Hung,
    /// Evicted by a memory fault or a device reset (exception code, 0 for a reset).
    Evicted(u32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FdKind {
    Kfd,
    Render(usize),
    /// A dma-buf exported by `EXPORT_DMABUF` (its id in [`Machine::dmabufs`]).
    DmaBuf(u64),
}

#[derive(Debug, Clone, Copy)]
struct FdEntry {
    kind: FdKind,
    owner: u32,
}

struct Pdd {
    drm_fd: Option<Fd>,
    doorbell: Option<u64>,
    doorbell_used: BTreeSet<u32>,
    mmio: Option<u64>,
    vram_used: u64,
}

/// The device side of a queue.
enum QueueHw {
    Aql(Arc<AqlQueue>),
    Sdma(Arc<SdmaQueue>),
}

struct QueueRec {
    hw: QueueHw,
    gpu_id: u32,
    device: usize,
    bos: Vec<u64>,
    doorbell_slot: u32,
}

#[derive(Default)]
struct ProcState {
    pdds: HashMap<u32, Pdd>,
    queues: BTreeMap<u32, QueueRec>,
    kernel_event_page: Option<u64>,
}

struct Process {
    vm: Arc<VmLock>,
    events: Arc<Events>,
    st: Mutex<ProcState>,
}

impl Process {
    fn lock(&self) -> MutexGuard<'_, ProcState> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[derive(Debug, Clone, Copy)]
struct IoctlFault {
    remaining: u64,
    nr: Option<u32>,
    errno: Errno,
}

struct Machine {
    config: EmuConfig,
    nodes: Vec<GpuNode>,
    sysfs: SysfsTree,
    pool: Arc<Pool>,
    registry: Arc<Registry>,
    clock: Arc<Clock>,
    devices: Vec<Arc<Device>>,
    engines: Vec<Engine>,
    fds: Mutex<HashMap<Fd, FdEntry>>,
    next_fd: AtomicI32,
    procs: Mutex<HashMap<u32, Arc<Process>>>,
    next_vpid: AtomicU32,
    real_pid: u32,
    ioctl_faults: Mutex<Vec<IoctlFault>>,
    ioctl_count: AtomicU64,
    sdma_stats: Arc<SdmaStats>,
    /// Exported buffers by id (docs/kfd-aql.md §1.4, "Physical handles").
    dmabufs: Mutex<HashMap<u64, dmabuf::DmaBuf>>,
    next_dmabuf: AtomicU64,
}

/// Machine-wide counters of the emulated engines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EmuStats {
    /// SDMA queues created (every process, every GPU).
    pub sdma_queues_created: u64,
    /// SDMA packets executed, NOPs excluded.
    pub sdma_packets: u64,
    /// SDMA copy packets (linear and rectangular) executed.
    pub sdma_copies: u64,
    /// Bytes SDMA copies and fills wrote.
    pub sdma_bytes: u64,
    /// Kernel dispatches launched (every GPU).
    pub dispatches: u64,
}

impl Drop for Machine {
    fn drop(&mut self) {
        for e in &self.engines {
            e.shutdown();
        }
        let fds = self.fds.get_mut().unwrap_or_else(|e| e.into_inner());
        for (fd, e) in fds.drain() {
            if matches!(e.kind, FdKind::DmaBuf(_)) {
                // SAFETY: a real dma-buf fd of this machine (`dmabuf`) nobody closed; the
                // machine is going, so nothing resolves it any more.
                unsafe { libc::close(fd) };
            }
        }
    }
}

/// The emulated machine, seen from one process. Cheap to clone; the machine (and its command
/// processor threads) lives until the last clone is dropped.
#[derive(Clone)]
pub struct Emu {
    m: Arc<Machine>,
    pid: u32,
}

impl std::fmt::Debug for Emu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emu").field("pid", &self.pid).field("gpus", &self.m.nodes.len()).finish()
    }
}

fn args<T: Copy>(buf: &[u8]) -> T {
    debug_assert!(buf.len() >= size_of::<T>());
    // SAFETY: the dispatcher sizes `buf` to at least the kernel struct; T is a plain-integer
    // repr(C) ABI struct, valid for every bit pattern.
    unsafe { std::ptr::read_unaligned(buf.as_ptr().cast::<T>()) }
}

fn put<T: Copy>(buf: &mut [u8], v: &T) {
    debug_assert!(buf.len() >= size_of::<T>());
    // SAFETY: as in `args`.
    unsafe { std::ptr::write_unaligned(buf.as_mut_ptr().cast::<T>(), *v) }
}

/// The argument of request `R` in `buf`.
fn arg<R: Ioctl>(buf: &[u8]) -> R::Arg
where
    R::Arg: Copy,
{
    args(buf)
}

/// Stores `v` as the argument of request `R` in `buf`.
fn put_arg<R: Ioctl>(buf: &mut [u8], v: &R::Arg)
where
    R::Arg: Copy,
{
    put(buf, v)
}

/// Runs `f` over the argument of request `R` in `buf` and stores what it leaves there, whether
/// it succeeds or not (amdkfd copies the struct out either way).
fn update<R: Ioctl>(buf: &mut [u8], f: impl FnOnce(&mut R::Arg) -> SysResult<()>) -> SysResult<()>
where
    R::Arg: Copy,
{
    let mut a = arg::<R>(buf);
    let r = f(&mut a);
    put_arg::<R>(buf, &a);
    r
}

/// `access_ok`: the range lies inside the 47-bit user address space.
fn access_ok(addr: u64, len: u64) -> bool {
    addr.checked_add(len).is_some_and(|end| end <= 1 << 47)
}

/// Whether a copy from/to user memory at `addr` can succeed (null and the first page are
/// never mapped).
fn user_ok(addr: u64, len: u64) -> bool {
    addr >= limits::PAGE_SIZE && access_ok(addr, len)
}

fn copy_in(addr: u64, len: usize) -> SysResult<Vec<u8>> {
    if !user_ok(addr, len as u64) {
        return Err(Errno::EFAULT);
    }
    let mut v = vec![0u8; len];
    // SAFETY: the ioctl caller vouches that user pointers it passes name readable memory; the
    // obviously unmapped ones were rejected above.
    unsafe {
        std::ptr::copy_nonoverlapping(std::ptr::with_exposed_provenance::<u8>(addr as usize), v.as_mut_ptr(), len)
    };
    Ok(v)
}

fn copy_out(addr: u64, data: &[u8]) -> SysResult<()> {
    if !user_ok(addr, data.len() as u64) {
        return Err(Errno::EFAULT);
    }
    // SAFETY: as in `copy_in`, for writable memory.
    unsafe {
        std::ptr::copy_nonoverlapping(
            data.as_ptr(),
            std::ptr::with_exposed_provenance_mut::<u8>(addr as usize),
            data.len(),
        )
    };
    Ok(())
}

impl Emu {
    /// Builds a machine (the CP threads start with the first queue).
    pub fn new(config: EmuConfig) -> std::io::Result<Emu> {
        dmabuf::raise_fd_limit();
        let nodes = gpu_nodes(&config.gpus);
        let sysfs = SysfsTree::build(&nodes);
        let pool = Arc::new(Pool::new(config.pool_bytes)?);
        let registry = Arc::new(Registry::new(config.kernels, config.isa_watchdog));
        let twins = crate::c_abi::library_twins(&config.twin_libraries)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("AQUEDUCT_TWINS: {e}")))?;
        for t in twins {
            registry.register_name(t);
        }
        let clock = Arc::new(Clock::new());
        let sdma_stats = Arc::new(SdmaStats::default());
        let devices: Vec<Arc<Device>> = nodes
            .iter()
            .map(|n| {
                Arc::new(Device::new(
                    *n,
                    DeviceParts {
                        pool: Arc::clone(&pool),
                        registry: Arc::clone(&registry),
                        clock: Arc::clone(&clock),
                        adversarial: config.adversarial_seed,
                        cus: config.cus.clamp(1, 64),
                        sdma_stats: Arc::clone(&sdma_stats),
                    },
                ))
            })
            .collect();
        let engines = devices.iter().map(|d| Engine::new(Arc::clone(d))).collect();
        let real_pid = std::process::id();
        let m = Machine {
            config,
            nodes,
            sysfs,
            pool,
            registry,
            clock,
            devices,
            engines,
            fds: Mutex::new(HashMap::new()),
            next_fd: AtomicI32::new(FIRST_FD),
            procs: Mutex::new(HashMap::new()),
            next_vpid: AtomicU32::new(real_pid.wrapping_add(1)),
            real_pid,
            ioctl_faults: Mutex::new(Vec::new()),
            ioctl_count: AtomicU64::new(0),
            sdma_stats,
            dmabufs: Mutex::new(HashMap::new()),
            next_dmabuf: AtomicU64::new(1),
        };
        Ok(Emu { m: Arc::new(m), pid: real_pid })
    }

    /// A machine with the default configuration (one gfx90a, KFD 1.17).
    pub fn with_defaults() -> std::io::Result<Emu> {
        Emu::new(EmuConfig::default())
    }

    /// The GPU nodes (topology nodes 1..).
    pub fn gpus(&self) -> &[GpuNode] {
        &self.m.nodes
    }

    /// The configuration.
    pub fn config(&self) -> &EmuConfig {
        &self.m.config
    }

    /// The same machine seen from a forked child: fds opened by this process are not usable
    /// from it (`EBADF`); it may open `/dev/kfd` again and gets a process of its own.
    pub fn fork_child(&self) -> Emu {
        // Ordering: Relaxed; a unique counter.
        let pid = self.m.next_vpid.fetch_add(1, Ordering::Relaxed);
        Emu { m: Arc::clone(&self.m), pid }
    }

    fn lock_fds(&self) -> MutexGuard<'_, HashMap<Fd, FdEntry>> {
        self.m.fds.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn process(&self) -> Option<Arc<Process>> {
        self.m.procs.lock().unwrap_or_else(|e| e.into_inner()).get(&self.pid).cloned()
    }

    fn node_index(&self, gpu_id: u32) -> Option<usize> {
        self.m.nodes.iter().position(|n| n.gpu_id == gpu_id)
    }

    /// `open(2)` of `/dev/kfd` or `/dev/dri/renderD<minor>`.
    pub fn open(&self, path: &str, _flags: i32) -> SysResult<Fd> {
        if std::process::id() != self.m.real_pid {
            return Err(Errno::EBADF);
        }
        let kind = if path == "/dev/kfd" {
            let mut procs = self.m.procs.lock().unwrap_or_else(|e| e.into_inner());
            procs.entry(self.pid).or_insert_with(|| {
                Arc::new(Process {
                    vm: Arc::new(VmLock::default()),
                    events: Arc::new(Events::default()),
                    st: Mutex::new(ProcState::default()),
                })
            });
            FdKind::Kfd
        } else if let Some(minor) = path.strip_prefix("/dev/dri/renderD") {
            let minor: u32 = minor.parse().map_err(|_| Errno::ENOENT)?;
            let i = self.m.nodes.iter().position(|n| n.drm_render_minor == minor).ok_or(Errno::ENOENT)?;
            FdKind::Render(i)
        } else {
            return Err(Errno::ENOENT);
        };
        // Ordering: Relaxed; a unique counter.
        let fd = self.m.next_fd.fetch_add(1, Ordering::Relaxed);
        self.lock_fds().insert(fd, FdEntry { kind, owner: self.pid });
        Ok(fd)
    }

    /// `close(2)`.
    pub fn close(&self, fd: Fd) -> SysResult<()> {
        let mut fds = self.lock_fds();
        match fds.get(&fd).copied() {
            Some(e) if e.owner == self.pid => {
                fds.remove(&fd);
                drop(fds);
                if let FdKind::DmaBuf(id) = e.kind {
                    // A dma-buf fd is a real one (`dmabuf`).
                    // SAFETY: closing the fd `export_dmabuf` opened, now out of the table.
                    unsafe { libc::close(fd) };
                    let proc = self.process();
                    let mut st = proc.as_ref().map(|p| p.lock());
                    self.dmabuf_put(id, st.as_deref_mut());
                }
                Ok(())
            }
            _ => Err(Errno::EBADF),
        }
    }

    fn fd_entry(&self, fd: Fd) -> SysResult<FdEntry> {
        if std::process::id() != self.m.real_pid {
            return Err(Errno::EBADF);
        }
        let e = *self.lock_fds().get(&fd).ok_or(Errno::EBADF)?;
        if e.owner != self.pid {
            return Err(Errno::EBADF);
        }
        Ok(e)
    }

    /// Reads a sysfs file into `buf` from offset 0, as `open` + `read` + `close` would;
    /// returns the bytes read. `ENOENT` for a missing file, `EISDIR` for a directory.
    pub fn read_sysfs(&self, path: &str, buf: &mut [u8]) -> SysResult<usize> {
        match self.m.sysfs.file(path) {
            Some(text) => {
                let n = text.len().min(buf.len());
                buf[..n].copy_from_slice(&text.as_bytes()[..n]);
                Ok(n)
            }
            None if self.m.sysfs.is_dir(path) => Err(Errno::EISDIR),
            None => Err(Errno::ENOENT),
        }
    }

    /// Lists a sysfs directory (names sorted as strings).
    pub fn list_sysfs(&self, path: &str) -> SysResult<Vec<String>> {
        match self.m.sysfs.list(path) {
            Some(v) => Ok(v),
            None if self.m.sysfs.file(path).is_some() => Err(Errno::ENOTDIR),
            None => Err(Errno::ENOENT),
        }
    }

    /// `ioctl(2)` on an emulated fd: `request` is the full request number and `arg` the user
    /// argument pointer. Returns the syscall's non-negative result.
    ///
    /// # Safety
    /// `arg` and every user pointer inside the argument struct must be either obviously invalid
    /// (null, first page, beyond user space: the call fails with `EFAULT`) or point at memory
    /// readable and writable for the sizes the ioctl uses, as a real kernel would require.
    pub unsafe fn ioctl(&self, fd: Fd, request: u64, arg: *mut c_void) -> SysResult<i32> {
        let entry = self.fd_entry(fd)?;
        let req = Request::decode(request);
        if let FdKind::Render(i) = entry.kind {
            if req.ty != crate::drm::DRM_IOCTL_BASE {
                return Err(Errno::ENOTTY);
            }
            // SAFETY: forwarded caller contract.
            return unsafe { crate::drm::ioctl(&self.m.nodes[i], request, arg) };
        }
        if let FdKind::DmaBuf(_) = entry.kind {
            // No dma-buf ioctl is emulated (DMA_BUF_IOCTL_SYNC and friends).
            return Err(Errno::ENOTTY);
        }
        let proc = self.process().ok_or(Errno::EBADF)?;
        if let Some(e) = self.injected_ioctl_fault(req.nr) {
            return Err(e);
        }
        let Some(kreq) = abi::kernel_request(req.nr) else {
            // SAFETY: forwarded caller contract.
            return unsafe { dialect::ioctl(self, req, arg) };
        };
        let kreq = Request::decode(kreq);
        let usize_ = req.size;
        let mut buf = vec![0u8; usize_.max(kreq.size)];
        let addr = arg as u64;
        if kreq.is_in() {
            let data = copy_in(addr, usize_)?;
            buf[..usize_].copy_from_slice(&data);
        }
        let ret = self.dispatch(&proc, req.nr, &mut buf);
        if kreq.is_out() {
            copy_out(addr, &buf[..usize_])?;
        }
        ret.map(|()| 0)
    }

    /// Runs the handler of command `nr`. Each arm is keyed on its request type's
    /// [`Ioctl::NR`] and reads (and, for an `_IOWR` request, writes back) that type's argument
    /// struct, so an arm cannot decode another command's layout.
    fn dispatch(&self, proc: &Arc<Process>, nr: u32, buf: &mut [u8]) -> SysResult<()> {
        match nr {
            ioctl::GetVersion::NR => {
                let (major_version, minor_version) = self.m.config.version;
                put_arg::<ioctl::GetVersion>(buf, &GetVersionArgs { major_version, minor_version });
                Ok(())
            }
            ioctl::GetProcessAperturesNew::NR => self.get_process_apertures(buf),
            ioctl::AcquireVm::NR => self.acquire_vm(proc, arg::<ioctl::AcquireVm>(buf)),
            ioctl::AllocMemoryOfGpu::NR => update::<ioctl::AllocMemoryOfGpu>(buf, |a| self.alloc_memory(proc, a)),
            ioctl::FreeMemoryOfGpu::NR => self.free_memory(proc, arg::<ioctl::FreeMemoryOfGpu>(buf).handle),
            ioctl::MapMemoryToGpu::NR => update::<ioctl::MapMemoryToGpu>(buf, |a| self.map_memory(proc, a, true)),
            ioctl::UnmapMemoryFromGpu::NR => {
                update::<ioctl::UnmapMemoryFromGpu>(buf, |a| self.map_memory(proc, a, false))
            }
            ioctl::CreateQueue::NR => update::<ioctl::CreateQueue>(buf, |a| self.create_queue(proc, a)),
            ioctl::DestroyQueue::NR => self.destroy_queue(proc, arg::<ioctl::DestroyQueue>(buf).queue_id),
            ioctl::UpdateQueue::NR => self.update_queue(proc, arg::<ioctl::UpdateQueue>(buf)),
            ioctl::SetCuMask::NR => self.set_cu_mask(proc, arg::<ioctl::SetCuMask>(buf)),
            ioctl::ExportDmabuf::NR => update::<ioctl::ExportDmabuf>(buf, |a| self.export_dmabuf(proc, a)),
            ioctl::ImportDmabuf::NR => update::<ioctl::ImportDmabuf>(buf, |a| self.import_dmabuf(proc, a)),
            ioctl::GetDmabufInfo::NR => update::<ioctl::GetDmabufInfo>(buf, |a| self.get_dmabuf_info(a)),
            ioctl::CreateEvent::NR => update::<ioctl::CreateEvent>(buf, |a| self.create_event(proc, a)),
            ioctl::DestroyEvent::NR => proc.events.destroy(arg::<ioctl::DestroyEvent>(buf).event_id),
            ioctl::SetEvent::NR => proc.events.set(arg::<ioctl::SetEvent>(buf).event_id),
            ioctl::ResetEvent::NR => proc.events.reset(arg::<ioctl::ResetEvent>(buf).event_id),
            ioctl::WaitEvents::NR => update::<ioctl::WaitEvents>(buf, |a| self.wait_events(proc, a)),
            ioctl::GetClockCounters::NR => {
                let mut a = arg::<ioctl::GetClockCounters>(buf);
                let gpu = self.node_index(a.gpu_id).is_some();
                (a.gpu_clock_counter, a.cpu_clock_counter, a.system_clock_counter) =
                    clock_counters(|| if gpu { self.m.clock.gpu_ticks() } else { 0 });
                a.system_clock_freq = 1_000_000_000;
                put_arg::<ioctl::GetClockCounters>(buf, &a);
                Ok(())
            }
            _ => Err(Errno::EINVAL),
        }
    }

    /// `mmap(2)`. Device fds: the kfd fd maps the doorbell slice, a kernel-allocated event page
    /// or the MMIO page by their encoded offsets; a render fd maps a VRAM/GTT BO by its GEM
    /// offset; a dma-buf fd (a real fd, `dmabuf`) its pages from offset 0. Any other fd (e.g. -1 with `MAP_ANONYMOUS`) is passed to the real `mmap`.
    ///
    /// # Safety
    /// As `mmap(2)`: with `MAP_FIXED`, `addr..addr+len` must be a range the caller owns.
    pub unsafe fn mmap(
        &self,
        addr: *mut c_void,
        len: usize,
        prot: i32,
        flags: i32,
        fd: Fd,
        offset: u64,
    ) -> SysResult<*mut c_void> {
        let dmabuf =
            fd < FIRST_FD && matches!(self.lock_fds().get(&fd), Some(e) if matches!(e.kind, FdKind::DmaBuf(_)));
        if fd < FIRST_FD && !dmabuf {
            // SAFETY: forwarded caller contract.
            let p = unsafe { libc::mmap(addr, len, prot, flags, fd, offset as libc::off_t) };
            if p == libc::MAP_FAILED {
                return Err(Errno(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EINVAL)));
            }
            return Ok(p);
        }
        let entry = self.fd_entry(fd)?;
        let proc = self.process().ok_or(Errno::ENODEV)?;
        let off = match entry.kind {
            FdKind::Kfd => {
                let gpu = mmap_offset::get_gpu_id(offset);
                match offset & mmap_offset::TYPE_MASK {
                    mmap_offset::TYPE_DOORBELL => {
                        if len as u64 != limits::DOORBELL_SLICE_BYTES {
                            return Err(Errno::EINVAL);
                        }
                        let mut st = proc.lock();
                        let pdd = self.bound_pdd(&mut st, gpu, Errno::EINVAL)?;
                        self.doorbell_slice(pdd)?
                    }
                    mmap_offset::TYPE_EVENTS => {
                        if len as u64 != limits::EVENT_PAGE_BYTES {
                            return Err(Errno::EINVAL);
                        }
                        proc.lock().kernel_event_page.ok_or(Errno::EINVAL)?
                    }
                    mmap_offset::TYPE_MMIO => {
                        if len as u64 != limits::PAGE_SIZE {
                            return Err(Errno::EINVAL);
                        }
                        let mut st = proc.lock();
                        let pdd = self.bound_pdd(&mut st, gpu, Errno::EINVAL)?;
                        self.mmio_page(pdd)?
                    }
                    _ => return Err(Errno::EINVAL),
                }
            }
            FdKind::DmaBuf(id) => self.dmabuf_mmap_offset(id, len as u64, offset)?,
            FdKind::Render(i) => {
                let vm = proc.vm.read();
                let bo = vm.bo_by_mmap_offset(offset).ok_or(Errno::EINVAL)?;
                if bo.gpu_id != self.m.nodes[i].gpu_id || len as u64 > bo.size {
                    return Err(Errno::EINVAL);
                }
                match bo.backing {
                    Backing::Pool(off) => off,
                    Backing::User(_) | Backing::Foreign(_) => return Err(Errno::EINVAL),
                }
            }
        };
        // SAFETY: forwarded caller contract; the pool range exists for the machine's life.
        unsafe { self.m.pool.map_user(addr, len, prot, flags, off) }
    }

    /// `munmap(2)`.
    ///
    /// # Safety
    /// As `munmap(2)`: nothing may use the range afterwards.
    pub unsafe fn munmap(&self, addr: *mut c_void, len: usize) -> SysResult<()> {
        // SAFETY: forwarded caller contract.
        if unsafe { libc::munmap(addr, len) } != 0 {
            return Err(Errno(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EINVAL)));
        }
        Ok(())
    }
}

/// `GET_CLOCK_COUNTERS`' (GPU, CPU, system) counters, read together: amdkfd reads them one
/// after another in the kernel, some hundred ns apart, and ROCr derives the GPU clock's rate
/// from two such samples, the first two as little as 100 µs apart (docs/kfd-aql.md §3), so a
/// sample whose readings a preemption separated would skew that rate by its length (seen:
/// 107 MHz for 100 under a loaded host). The readings are bracketed by two reads of the system
/// clock and taken again, up to 64 times, until the bracket is under 2 µs (unpreempted,
/// 100–600 ns); the narrowest is kept.
fn clock_counters(gpu: impl Fn() -> u64) -> (u64, u64, u64) {
    const TIGHT_NS: u64 = 2_000;
    let mut best = (u64::MAX, (0, 0, 0));
    for _ in 0..64 {
        let before = clock_ns(libc::CLOCK_BOOTTIME);
        let g = gpu();
        let c = clock_ns(libc::CLOCK_MONOTONIC_RAW);
        let after = clock_ns(libc::CLOCK_BOOTTIME);
        let width = after.saturating_sub(before);
        if width < best.0 {
            best = (width, (g, c, before + width / 2));
        }
        if width < TIGHT_NS {
            break;
        }
    }
    best.1
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec we own.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
