//! [`Emu`]: the emulated machine as a process sees it — `open`, `ioctl`, `mmap`/`munmap`,
//! `close` and sysfs reads — and the amdkfd driver model behind the ioctls (kfd-aql.md §1, §2,
//! §1.5, §1.6, §7, §9 "ioctl layer").
//!
//! # Who validates what
//!
//! The ioctl entry ([`Emu::ioctl`]) does what `kfd_ioctl` does before a handler runs: the fd must
//! be a kfd fd of the calling process (`EBADF` otherwise, including after `fork`), the command is
//! looked up by `nr` only (`EINVAL` if unknown), the argument is copied in with the caller's size
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
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use aqueduct::aql::AqlRing;
use aqueduct::BuiltinKernel;

use crate::abi::{self, limits, mem_flags, mmap_offset, queue_type, Request};
use crate::abi::{
    AcquireVmArgs, AllocMemoryOfGpuArgs, CreateEventArgs, CreateQueueArgs, DestroyQueueArgs, EventData, EventIdArgs,
    FreeMemoryOfGpuArgs, GetClockCountersArgs, GetProcessAperturesNewArgs, GetVersionArgs, HwExceptionData,
    MapMemoryArgs, MemoryExceptionData, MemoryExceptionFailure, ProcessDeviceApertures, SetCuMaskArgs, UpdateQueueArgs,
    WaitEventsArgs,
};
use crate::cp::{self, Clock, Device, HwQueue, QueuePtrs};
use crate::events::{EventPage, Events};
use crate::kernels::{builtin_object, Fingerprint, Registry, Twin};
use crate::memory::{
    Backing, Bo, Pool, Vm, DRM_MMAP_BASE, GPUVM_BASE, GPUVM_LIMIT, LDS_APERTURE_BASE, SCRATCH_APERTURE_BASE,
};
use crate::sdma::{SdmaPtrs, SdmaQueue, SdmaStats};
use crate::topology::{gpu_nodes, GpuNode, GpuProfile, SysfsTree};
use crate::{Errno, SysResult};

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
}

impl Default for EmuConfig {
    fn default() -> Self {
        EmuConfig {
            gpus: vec![GpuProfile::Gfx90a],
            version: (1, 17),
            adversarial_seed: None,
            pool_bytes: 64 << 30,
            large_bar: true,
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
    Aql(Arc<HwQueue>),
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
    vm: Arc<RwLock<Vm>>,
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
    fds: Mutex<HashMap<Fd, FdEntry>>,
    next_fd: AtomicI32,
    procs: Mutex<HashMap<u32, Arc<Process>>>,
    next_vpid: AtomicU32,
    real_pid: u32,
    ioctl_faults: Mutex<Vec<IoctlFault>>,
    ioctl_count: AtomicU64,
    sdma_stats: Arc<SdmaStats>,
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
}

impl Drop for Machine {
    fn drop(&mut self) {
        for d in &self.devices {
            d.shutdown();
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
        let nodes = gpu_nodes(&config.gpus);
        let sysfs = SysfsTree::build(&nodes);
        let pool = Arc::new(Pool::new(config.pool_bytes)?);
        let registry = Arc::new(Registry::new());
        let clock = Arc::new(Clock::new());
        let sdma_stats = Arc::new(SdmaStats::default());
        let devices = nodes
            .iter()
            .map(|n| {
                Arc::new(Device::new(
                    *n,
                    Arc::clone(&pool),
                    Arc::clone(&registry),
                    Arc::clone(&clock),
                    config.adversarial_seed,
                    Arc::clone(&sdma_stats),
                ))
            })
            .collect();
        let real_pid = std::process::id();
        let m = Machine {
            config,
            nodes,
            sysfs,
            pool,
            registry,
            clock,
            devices,
            fds: Mutex::new(HashMap::new()),
            next_fd: AtomicI32::new(FIRST_FD),
            procs: Mutex::new(HashMap::new()),
            next_vpid: AtomicU32::new(real_pid.wrapping_add(1)),
            real_pid,
            ioctl_faults: Mutex::new(Vec::new()),
            ioctl_count: AtomicU64::new(0),
            sdma_stats,
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
                    vm: Arc::new(RwLock::new(Vm::default())),
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
        match fds.get(&fd) {
            Some(e) if e.owner == self.pid => {
                fds.remove(&fd);
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
        let proc = self.process().ok_or(Errno::EBADF)?;
        if let Some(e) = self.injected_ioctl_fault(req.nr) {
            return Err(e);
        }
        let Some(kreq) = abi::kernel_request(req.nr) else {
            // SAFETY: forwarded caller contract.
            return unsafe { crate::dialect::ioctl(self, req, arg) };
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

    fn injected_ioctl_fault(&self, nr: u32) -> Option<Errno> {
        // Ordering: Relaxed; a statistics counter.
        self.m.ioctl_count.fetch_add(1, Ordering::Relaxed);
        let mut faults = self.m.ioctl_faults.lock().unwrap_or_else(|e| e.into_inner());
        let mut hit = None;
        for f in faults.iter_mut() {
            if f.nr.is_none_or(|n| n == nr) {
                f.remaining = f.remaining.saturating_sub(1);
                if f.remaining == 0 && hit.is_none() {
                    hit = Some(f.errno);
                }
            }
        }
        faults.retain(|f| f.remaining > 0);
        hit
    }

    fn dispatch(&self, proc: &Arc<Process>, nr: u32, buf: &mut [u8]) -> SysResult<()> {
        match nr {
            abi::nr::GET_VERSION => {
                let (major_version, minor_version) = self.m.config.version;
                put(buf, &GetVersionArgs { major_version, minor_version });
                Ok(())
            }
            abi::nr::GET_PROCESS_APERTURES_NEW => self.get_process_apertures(buf),
            abi::nr::ACQUIRE_VM => self.acquire_vm(proc, args(buf)),
            abi::nr::ALLOC_MEMORY_OF_GPU => {
                let mut a: AllocMemoryOfGpuArgs = args(buf);
                let r = self.alloc_memory(proc, &mut a);
                put(buf, &a);
                r
            }
            abi::nr::FREE_MEMORY_OF_GPU => self.free_memory(proc, args::<FreeMemoryOfGpuArgs>(buf).handle),
            abi::nr::MAP_MEMORY_TO_GPU | abi::nr::UNMAP_MEMORY_FROM_GPU => {
                let mut a: MapMemoryArgs = args(buf);
                let r = self.map_memory(proc, &mut a, nr == abi::nr::MAP_MEMORY_TO_GPU);
                put(buf, &a);
                r
            }
            abi::nr::CREATE_QUEUE => {
                let mut a: CreateQueueArgs = args(buf);
                let r = self.create_queue(proc, &mut a);
                put(buf, &a);
                r
            }
            abi::nr::DESTROY_QUEUE => self.destroy_queue(proc, args::<DestroyQueueArgs>(buf).queue_id),
            abi::nr::UPDATE_QUEUE => self.update_queue(proc, args(buf)),
            abi::nr::SET_CU_MASK => self.set_cu_mask(proc, args(buf)),
            abi::nr::CREATE_EVENT => {
                let mut a: CreateEventArgs = args(buf);
                let r = self.create_event(proc, &mut a);
                put(buf, &a);
                r
            }
            abi::nr::DESTROY_EVENT => proc.events.destroy(args::<EventIdArgs>(buf).event_id),
            abi::nr::SET_EVENT => proc.events.set(args::<EventIdArgs>(buf).event_id),
            abi::nr::RESET_EVENT => proc.events.reset(args::<EventIdArgs>(buf).event_id),
            abi::nr::WAIT_EVENTS => {
                let mut a: WaitEventsArgs = args(buf);
                let r = self.wait_events(proc, &mut a);
                put(buf, &a);
                r
            }
            abi::nr::GET_CLOCK_COUNTERS => {
                let mut a: GetClockCountersArgs = args(buf);
                a.gpu_clock_counter = if self.node_index(a.gpu_id).is_some() { self.m.clock.gpu_ticks() } else { 0 };
                a.cpu_clock_counter = clock_ns(libc::CLOCK_MONOTONIC_RAW);
                a.system_clock_counter = clock_ns(libc::CLOCK_BOOTTIME);
                a.system_clock_freq = 1_000_000_000;
                put(buf, &a);
                Ok(())
            }
            _ => Err(Errno::EINVAL),
        }
    }

    fn get_process_apertures(&self, buf: &mut [u8]) -> SysResult<()> {
        let mut a: GetProcessAperturesNewArgs = args(buf);
        let n = self.m.nodes.len() as u32;
        if a.num_of_nodes == 0 {
            a.num_of_nodes = n;
            put(buf, &a);
            return Ok(());
        }
        let k = a.num_of_nodes.min(n);
        let mut bytes = Vec::with_capacity(k as usize * size_of::<ProcessDeviceApertures>());
        for node in self.m.nodes.iter().take(k as usize) {
            let ap = ProcessDeviceApertures {
                lds_base: LDS_APERTURE_BASE,
                lds_limit: LDS_APERTURE_BASE + (4 << 30) - 1,
                scratch_base: SCRATCH_APERTURE_BASE,
                scratch_limit: SCRATCH_APERTURE_BASE + (4 << 30) - 1,
                gpuvm_base: GPUVM_BASE,
                gpuvm_limit: GPUVM_LIMIT,
                gpu_id: node.gpu_id,
                pad: 0,
            };
            let mut e = [0u8; size_of::<ProcessDeviceApertures>()];
            put(&mut e, &ap);
            bytes.extend_from_slice(&e);
        }
        copy_out(a.kfd_process_device_apertures_ptr, &bytes)?;
        a.num_of_nodes = k;
        put(buf, &a);
        Ok(())
    }

    fn acquire_vm(&self, proc: &Process, a: AcquireVmArgs) -> SysResult<()> {
        let entry = self.lock_fds().get(&(a.drm_fd as Fd)).copied().ok_or(Errno::EINVAL)?;
        let idx = self.node_index(a.gpu_id).ok_or(Errno::EINVAL)?;
        if entry.kind != FdKind::Render(idx) {
            return Err(Errno::EINVAL);
        }
        let mut st = proc.lock();
        let pdd = st.pdds.entry(a.gpu_id).or_insert_with(|| Pdd {
            drm_fd: None,
            doorbell: None,
            doorbell_used: BTreeSet::new(),
            mmio: None,
            vram_used: 0,
        });
        match pdd.drm_fd {
            Some(fd) if fd == a.drm_fd as Fd => Ok(()),
            Some(_) => Err(Errno::EBUSY),
            None => {
                pdd.drm_fd = Some(a.drm_fd as Fd);
                Ok(())
            }
        }
    }

    /// The bound pdd of a GPU: unknown gpu → EINVAL, VM not acquired → `unbound`.
    fn bound_pdd<'s>(&self, st: &'s mut ProcState, gpu_id: u32, unbound: Errno) -> SysResult<&'s mut Pdd> {
        self.node_index(gpu_id).ok_or(Errno::EINVAL)?;
        match st.pdds.get_mut(&gpu_id) {
            Some(p) if p.drm_fd.is_some() => Ok(p),
            _ => Err(unbound),
        }
    }

    fn doorbell_slice(&self, pdd: &mut Pdd) -> SysResult<u64> {
        if let Some(off) = pdd.doorbell {
            return Ok(off);
        }
        let off = self.m.pool.alloc(limits::DOORBELL_SLICE_BYTES).ok_or(Errno::ENOMEM)?;
        pdd.doorbell = Some(off);
        Ok(off)
    }

    fn mmio_page(&self, pdd: &mut Pdd) -> SysResult<u64> {
        if let Some(off) = pdd.mmio {
            return Ok(off);
        }
        let off = self.m.pool.alloc(limits::PAGE_SIZE).ok_or(Errno::ENOMEM)?;
        pdd.mmio = Some(off);
        Ok(off)
    }

    fn alloc_memory(&self, proc: &Process, a: &mut AllocMemoryOfGpuArgs) -> SysResult<()> {
        if a.size == 0 {
            return Err(Errno::EINVAL);
        }
        let idx = self.node_index(a.gpu_id).ok_or(Errno::EINVAL)?;
        let flags = a.flags;
        if flags & mem_flags::VRAM != 0 && flags & mem_flags::PUBLIC != 0 && !self.m.config.large_bar {
            return Err(Errno::EINVAL);
        }
        let mut st = proc.lock();
        let pdd = self.bound_pdd(&mut st, a.gpu_id, Errno::ENODEV)?;
        let size = a.size.checked_next_multiple_of(limits::PAGE_SIZE).ok_or(Errno::EINVAL)?;
        let mmap_off;
        let backing = if flags & mem_flags::VRAM != 0 {
            if pdd.vram_used + size > self.m.nodes[idx].props.vram_bytes {
                return Err(Errno::ENOMEM);
            }
            let off = self.m.pool.alloc(size).ok_or(Errno::ENOMEM)?;
            pdd.vram_used += size;
            mmap_off = DRM_MMAP_BASE + off;
            Backing::Pool(off)
        } else if flags & mem_flags::GTT != 0 {
            let off = self.m.pool.alloc(size).ok_or(Errno::ENOMEM)?;
            mmap_off = DRM_MMAP_BASE + off;
            Backing::Pool(off)
        } else if flags & mem_flags::USERPTR != 0 {
            let cpu = a.mmap_offset;
            if cpu % limits::PAGE_SIZE != 0 || !user_ok(cpu, size) {
                return Err(Errno::EFAULT);
            }
            mmap_off = cpu;
            Backing::User(cpu)
        } else if flags & mem_flags::DOORBELL != 0 {
            if a.size != limits::DOORBELL_SLICE_BYTES {
                return Err(Errno::EINVAL);
            }
            mmap_off = mmap_offset::TYPE_DOORBELL | mmap_offset::gpu_id(a.gpu_id);
            Backing::Pool(self.doorbell_slice(pdd)?)
        } else if flags & mem_flags::MMIO_REMAP != 0 {
            if a.size != limits::PAGE_SIZE {
                return Err(Errno::EINVAL);
            }
            mmap_off = mmap_offset::TYPE_MMIO | mmap_offset::gpu_id(a.gpu_id);
            Backing::Pool(self.mmio_page(pdd)?)
        } else {
            return Err(Errno::EINVAL);
        };
        let release = |this: &Self| {
            if flags & (mem_flags::VRAM | mem_flags::GTT) != 0 {
                if let Backing::Pool(off) = backing {
                    this.m.pool.release(off, size);
                }
            }
        };
        let mut vm = proc.vm.write().unwrap_or_else(|e| e.into_inner());
        if a.va_addr % limits::PAGE_SIZE != 0
            || a.va_addr < GPUVM_BASE
            || a.va_addr.checked_add(size).is_none_or(|end| end - 1 > GPUVM_LIMIT)
            || vm.overlaps(a.va_addr, size)
        {
            release(self);
            if flags & mem_flags::VRAM != 0 {
                if let Some(p) = st.pdds.get_mut(&a.gpu_id) {
                    p.vram_used -= size;
                }
            }
            return Err(Errno::EINVAL);
        }
        let handle = vm.new_handle(a.gpu_id);
        vm.insert(Bo {
            handle,
            gpu_id: a.gpu_id,
            va: a.va_addr,
            size,
            flags,
            backing,
            mmap_offset: mmap_off,
            mapped: BTreeSet::new(),
            queue_refs: 0,
        });
        a.handle = handle;
        a.mmap_offset = mmap_off;
        Ok(())
    }

    fn free_memory(&self, proc: &Process, handle: u64) -> SysResult<()> {
        let mut st = proc.lock();
        if proc.events.page_handle() == Some(handle) && handle != 0 {
            return Err(Errno::EPERM);
        }
        let mut vm = proc.vm.write().unwrap_or_else(|e| e.into_inner());
        let bo = vm.bos.get(&handle).ok_or(Errno::EINVAL)?;
        if !bo.mapped.is_empty() {
            return Err(Errno::EBUSY);
        }
        let bo = vm.remove(handle).ok_or(Errno::EINVAL)?;
        if bo.flags & (mem_flags::VRAM | mem_flags::GTT) != 0 {
            if let Backing::Pool(off) = bo.backing {
                self.m.pool.release(off, bo.size);
            }
        }
        if bo.flags & mem_flags::VRAM != 0 {
            if let Some(p) = st.pdds.get_mut(&bo.gpu_id) {
                p.vram_used = p.vram_used.saturating_sub(bo.size);
            }
        }
        Ok(())
    }

    fn map_memory(&self, proc: &Process, a: &mut MapMemoryArgs, map: bool) -> SysResult<()> {
        if a.n_devices == 0 || a.n_success > a.n_devices {
            return Err(Errno::EINVAL);
        }
        let ids = copy_in(a.device_ids_array_ptr, a.n_devices as usize * 4)?;
        let ids: Vec<u32> = ids.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        let mut st = proc.lock();
        let owner = (a.handle >> 32) as u32;
        self.bound_pdd(&mut st, owner, Errno::ENODEV)?;
        let mut vm = proc.vm.write().unwrap_or_else(|e| e.into_inner());
        if !vm.bos.contains_key(&a.handle) {
            return Err(Errno::EINVAL);
        }
        for (i, &gpu) in ids.iter().enumerate().skip(a.n_success as usize) {
            if let Err(e) = self.bound_pdd(&mut st, gpu, Errno::EINVAL) {
                a.n_success = i as u32;
                return Err(e);
            }
            let Some(bo) = vm.bos.get_mut(&a.handle) else { return Err(Errno::EINVAL) };
            if map {
                bo.mapped.insert(gpu);
            } else {
                if bo.queue_refs > 0 {
                    a.n_success = i as u32;
                    return Err(Errno::EBUSY);
                }
                if !bo.mapped.remove(&gpu) {
                    a.n_success = i as u32;
                    return Err(Errno::EINVAL);
                }
            }
        }
        a.n_success = a.n_devices;
        Ok(())
    }

    /// `kfd_queue_buffer_get`: a BO mapped on `gpu` whose mapping starts exactly at `addr` and
    /// (when `size != 0`) is exactly `size` bytes long.
    fn queue_buffer(vm: &Vm, gpu: u32, addr: u64, size: u64) -> SysResult<u64> {
        let bo = vm.bo_at(addr & !(limits::PAGE_SIZE - 1)).ok_or(Errno::EINVAL)?;
        if !bo.mapped.contains(&gpu) || bo.va != addr & !(limits::PAGE_SIZE - 1) || (size != 0 && bo.size != size) {
            return Err(Errno::EINVAL);
        }
        Ok(bo.handle)
    }

    fn create_queue(&self, proc: &Process, a: &mut CreateQueueArgs) -> SysResult<()> {
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
        let mut vm = proc.vm.write().unwrap_or_else(|e| e.into_inner());
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
            write_dispatch_id: tr(a.write_pointer_address, 8)?,
            read_dispatch_id: tr(a.read_pointer_address, 8)?,
            queue_properties: tr(page + abi::AMD_QUEUE_PROPERTIES, 4)?,
            doorbell: self.m.pool.ptr(slice + u64::from(slot) * limits::DOORBELL_BYTES),
        };
        // SAFETY: every pointer was translated from a BO that is now pinned by the queue
        // (queue_refs below: unmap → EBUSY, free needs an unmap) or is the process doorbell slice,
        // which lives as long as the pool.
        let hw = unsafe {
            HwQueue::new(
                gpu,
                Arc::clone(&proc.vm),
                Arc::clone(&proc.events),
                ptrs,
                a.queue_priority,
                a.queue_percentage,
                node.props.cu_count(),
                a.ctx_save_restore_address,
                if ring_exec { None } else { Some(a.ring_base_address) },
            )
        }
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
    fn create_sdma_queue(&self, proc: &Process, a: &mut CreateQueueArgs) -> SysResult<()> {
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
        let mut vm = proc.vm.write().unwrap_or_else(|e| e.into_inner());
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
        a.queue_id = qid;
        a.doorbell_offset =
            mmap_offset::TYPE_DOORBELL | mmap_offset::gpu_id(gpu) | (u64::from(slot) * limits::DOORBELL_BYTES);
        Ok(())
    }

    fn destroy_queue(&self, proc: &Process, qid: u32) -> SysResult<()> {
        let mut st = proc.lock();
        let rec = st.queues.remove(&qid).ok_or(Errno::EINVAL)?;
        match &rec.hw {
            QueueHw::Aql(hw) => self.m.devices[rec.device].remove_queue(hw),
            QueueHw::Sdma(q) => self.m.devices[rec.device].remove_sdma_queue(q),
        }
        let mut vm = proc.vm.write().unwrap_or_else(|e| e.into_inner());
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

    fn update_queue(&self, proc: &Process, a: UpdateQueueArgs) -> SysResult<()> {
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
        let mut cp = hw.lock_cp();
        let cur_base = cp.ring_va;
        let cur_size = cp.ring_bytes;
        if a.ring_base_address != cur_base || u64::from(a.ring_size) != cur_size {
            let mut vm = proc.vm.write().unwrap_or_else(|e| e.into_inner());
            let new_bo = Self::queue_buffer(&vm, hw.gpu_id, a.ring_base_address, u64::from(a.ring_size))?;
            let p = vm
                .translate(&self.m.pool, hw.gpu_id, a.ring_base_address, u64::from(a.ring_size))
                .map_err(|_| Errno::EINVAL)?;
            let write = hw.write_dispatch_id;
            // SAFETY: the new ring BO is pinned below (queue_refs); the indices are the queue's.
            let ring = unsafe {
                AqlRing::new(std::ptr::NonNull::new(p).ok_or(Errno::EINVAL)?, a.ring_size / 64, write, hw.shadow())
            }
            .map_err(|_| Errno::EINVAL)?;
            HwQueue::replace_ring(&mut cp, ring, a.ring_base_address, u64::from(a.ring_size));
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
        // Ordering: Relaxed; scheduling parameters, stored under the cp lock so the change is in
        // effect when the ioctl returns (amdkfd preempts and reloads the queue).
        hw.percentage.store(a.queue_percentage, Ordering::Relaxed);
        hw.priority.store(a.queue_priority, Ordering::Relaxed);
        drop(cp);
        self.m.devices[rec.device].touch();
        Ok(())
    }

    /// UPDATE_QUEUE of an SDMA queue: a new ring (an exact, GPU-mapped BO; the read offset
    /// carries over), percentage and priority.
    fn update_sdma_queue(
        &self,
        proc: &Process,
        rec: &mut QueueRec,
        q: &SdmaQueue,
        a: UpdateQueueArgs,
    ) -> SysResult<()> {
        let mut ring = q.lock_ring();
        if a.ring_base_address & !0xff != ring.va || u64::from(a.ring_size) != ring.bytes {
            let mut vm = proc.vm.write().unwrap_or_else(|e| e.into_inner());
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

    fn set_cu_mask(&self, proc: &Process, a: SetCuMaskArgs) -> SysResult<()> {
        if a.num_cu_mask % 32 != 0 || a.num_cu_mask == 0 {
            return Err(Errno::EINVAL);
        }
        let bits = a.num_cu_mask.min(1024);
        let words = copy_in(a.cu_mask_ptr, bits as usize / 8)?;
        let st = proc.lock();
        let rec = st.queues.get(&a.queue_id).ok_or(Errno::EFAULT)?;
        let cus = self.m.nodes[rec.device].props.cu_count();
        let enabled = (0..bits.min(cus)).filter(|&i| words[(i / 8) as usize] & (1 << (i % 8)) != 0).count() as u32;
        // An SDMA queue accepts the mask and ignores it, as its MQD has no CU mask.
        if let QueueHw::Aql(hw) = &rec.hw {
            let _cp = hw.lock_cp();
            // Ordering: Relaxed; a scheduling parameter, stored under the cp lock (see
            // update_queue).
            hw.cu_enabled.store(enabled, Ordering::Relaxed);
        }
        Ok(())
    }

    fn create_event(&self, proc: &Process, a: &mut CreateEventArgs) -> SysResult<()> {
        let st = proc.lock();
        if a.event_page_offset != 0 {
            if proc.events.has_page() {
                return Err(Errno::EINVAL);
            }
            let gpu = (a.event_page_offset >> 32) as u32;
            self.node_index(gpu).ok_or(Errno::EINVAL)?;
            let vm = proc.vm.read().unwrap_or_else(|e| e.into_inner());
            let bo = vm.bos.get(&a.event_page_offset).ok_or(Errno::EINVAL)?;
            let ptr = match bo.backing {
                Backing::Pool(off) => self.m.pool.ptr(off),
                Backing::User(addr) => std::ptr::with_exposed_provenance_mut(addr as usize),
            };
            let slots = (bo.size / 8).min(u64::from(limits::SIGNAL_EVENT_LIMIT)) as u32;
            proc.events.set_page(EventPage { ptr, slots, handle: a.event_page_offset })?;
        }
        drop(st);
        let signal = matches!(a.event_type, abi::event_type::SIGNAL | abi::event_type::DEBUG_EVENT);
        if signal && !proc.events.has_page() {
            // The APU path: the kernel allocates the page, to be mmapped from the kfd fd.
            let mut st = proc.lock();
            let off = self.m.pool.alloc(limits::EVENT_PAGE_BYTES).ok_or(Errno::ENOMEM)?;
            st.kernel_event_page = Some(off);
            proc.events.set_page(EventPage {
                ptr: self.m.pool.ptr(off),
                slots: limits::SIGNAL_EVENT_LIMIT,
                handle: 0,
            })?;
        }
        let (id, slot) = proc.events.create(a.event_type, a.auto_reset != 0)?;
        a.event_id = id;
        if signal {
            a.event_trigger_data = id;
            a.event_slot_index = slot;
            a.event_page_offset = mmap_offset::TYPE_EVENTS;
        }
        Ok(())
    }

    fn wait_events(&self, proc: &Process, a: &mut WaitEventsArgs) -> SysResult<()> {
        if a.num_events > limits::MAX_WAIT_EVENTS {
            return Err(Errno::EINVAL);
        }
        let n = a.num_events as usize;
        let raw = copy_in(a.events_ptr, n * size_of::<EventData>())?;
        let mut data: Vec<EventData> = raw.chunks_exact(size_of::<EventData>()).map(args::<EventData>).collect();
        let out = proc.events.wait(&mut data, a.wait_for_all != 0, a.timeout)?;
        a.wait_result = out.result;
        let mut bytes = vec![0u8; n * size_of::<EventData>()];
        for (d, chunk) in data.iter().zip(bytes.chunks_exact_mut(size_of::<EventData>())) {
            put(chunk, d);
        }
        copy_out(a.events_ptr, &bytes)
    }

    /// `mmap(2)`. Device fds: the kfd fd maps the doorbell slice, a kernel-allocated event page
    /// or the MMIO page by their encoded offsets; a render fd maps a VRAM/GTT BO by its GEM
    /// offset. Any other fd (e.g. -1 with `MAP_ANONYMOUS`) is passed to the real `mmap`.
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
        if fd < FIRST_FD {
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
            FdKind::Render(i) => {
                let vm = proc.vm.read().unwrap_or_else(|e| e.into_inner());
                let bo = vm.bo_by_mmap_offset(offset).ok_or(Errno::EINVAL)?;
                if bo.gpu_id != self.m.nodes[i].gpu_id || len as u64 > bo.size {
                    return Err(Errno::EINVAL);
                }
                match bo.backing {
                    Backing::Pool(off) => off,
                    Backing::User(_) => return Err(Errno::EINVAL),
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

    // ---- kernels -------------------------------------------------------------------------

    /// Registers a host twin and returns the kernel object that names it in dispatch packets.
    pub fn register_kernel(&self, twin: Twin) -> u64 {
        self.m.registry.register_direct(twin)
    }

    /// Binds a twin to a kernel object address the caller chose.
    pub fn register_kernel_at(&self, kernel_object: u64, twin: Twin) {
        self.m.registry.register_at(kernel_object, twin);
    }

    /// Registers a twin under a kernel symbol name (without `.kd`), to be matched when a code
    /// object containing that kernel is announced with [`Emu::load_code_object`].
    pub fn register_twin_by_name(&self, twin: Twin) {
        self.m.registry.register_name(twin);
    }

    /// Announces an AMDHSA code object (ELF bytes): every kernel descriptor in it whose
    /// symbol has a twin registered by name becomes recognisable wherever a loader places it.
    /// Returns the names that were bound. Fails with `EINVAL` for a file that is not an AMDGPU
    /// HSA code object.
    pub fn load_code_object(&self, elf: &[u8]) -> SysResult<Vec<String>> {
        let co = crate::codeobj::CodeObject::parse(elf).map_err(|_| Errno::EINVAL)?;
        let mut bound = Vec::new();
        for k in &co.kernels {
            if let Some(mut twin) = self.m.registry.by_name(&k.name) {
                if let Some(m) = &k.meta {
                    twin.kernarg_size = twin.kernarg_size.max(m.kernarg_segment_size);
                    twin.args = m.args.clone().into();
                }
                if twin.kernarg_size == 0 {
                    twin.kernarg_size = k.descriptor.kernarg_size;
                }
                self.m.registry.add_fingerprint(Fingerprint { kd: k.descriptor_bytes, code: k.code.clone(), twin });
                bound.push(k.name.clone());
            }
        }
        Ok(bound)
    }

    /// The kernel object of a built-in blit kernel.
    pub fn builtin_kernel(&self, kernel: BuiltinKernel) -> u64 {
        builtin_object(kernel)
    }

    // ---- observation and fault injection ----------------------------------------------------

    /// The device-side state of one of this process's queues (AQL or SDMA).
    pub fn queue_state(&self, qid: u32) -> Option<QueueState> {
        let p = self.process()?;
        let st = p.lock();
        // Ordering: Relaxed; diagnostic reads.
        let (status, ec) = match &st.queues.get(&qid)?.hw {
            QueueHw::Aql(q) => (q.status.load(Ordering::Relaxed), q.exception.load(Ordering::Relaxed)),
            QueueHw::Sdma(q) => (q.status.load(Ordering::Relaxed), q.exception.load(Ordering::Relaxed)),
        };
        Some(match status {
            cp::status::ERROR => QueueState::Error(ec),
            cp::status::HUNG => QueueState::Hung,
            cp::status::EVICTED => QueueState::Evicted(ec),
            _ => QueueState::Active,
        })
    }

    /// Machine-wide engine counters (every process of this machine).
    pub fn stats(&self) -> EmuStats {
        let s = &self.m.sdma_stats;
        // Ordering: Relaxed; statistics counters.
        EmuStats {
            sdma_queues_created: s.queues_created.load(Ordering::Relaxed),
            sdma_packets: s.packets.load(Ordering::Relaxed),
            sdma_copies: s.copies.load(Ordering::Relaxed),
            sdma_bytes: s.bytes.load(Ordering::Relaxed),
        }
    }

    /// Makes the `n`th ioctl from now (counting only `nr` if given; `n >= 1`) fail with `errno`
    /// before the driver looks at it.
    pub fn fail_ioctl(&self, n: u64, nr: Option<u32>, errno: Errno) {
        let mut f = self.m.ioctl_faults.lock().unwrap_or_else(|e| e.into_inner());
        f.push(IoctlFault { remaining: n.max(1), nr, errno });
    }

    /// Number of ioctls issued so far.
    pub fn ioctl_count(&self) -> u64 {
        // Ordering: Relaxed; a statistics counter.
        self.m.ioctl_count.load(Ordering::Relaxed)
    }

    /// A GPU memory fault at `va` on `gpu_id` for this process, as the interrupt handler reports
    /// it: every queue of the process on the device is evicted and its MEMORY events are set.
    pub fn inject_memory_fault(&self, gpu_id: u32, va: u64) -> SysResult<()> {
        let idx = self.node_index(gpu_id).ok_or(Errno::EINVAL)?;
        let p = self.process().ok_or(Errno::ESRCH)?;
        self.m.devices[idx].evict(Some(&p.vm));
        p.events.signal_memory_fault(MemoryExceptionData {
            failure: MemoryExceptionFailure { not_present: 1, ..Default::default() },
            va,
            gpu_id,
            error_type: 0,
        });
        Ok(())
    }

    /// A device hang and reset: every queue on the device is evicted and every process's
    /// HW_EXCEPTION events are set (reset cause 0 = hang, memory lost).
    pub fn inject_device_reset(&self, gpu_id: u32) -> SysResult<()> {
        let idx = self.node_index(gpu_id).ok_or(Errno::EINVAL)?;
        self.m.devices[idx].evict(None);
        let procs: Vec<Arc<Process>> =
            self.m.procs.lock().unwrap_or_else(|e| e.into_inner()).values().cloned().collect();
        for p in procs {
            p.events.signal_reset(HwExceptionData { reset_type: 1, reset_cause: 0, memory_lost: 1, gpu_id });
        }
        Ok(())
    }

    /// Kills the command-processor thread of a GPU (it is not restarted). The driver then
    /// finds the device hung, as amdkfd's scheduler does when the CP stops answering
    /// (a preemption timeout), and resets it: see [`Emu::inject_device_reset`].
    pub fn kill_command_processor(&self, gpu_id: u32) -> SysResult<()> {
        let idx = self.node_index(gpu_id).ok_or(Errno::EINVAL)?;
        self.m.devices[idx].kill();
        self.inject_device_reset(gpu_id)
    }

    /// Whether a GPU's command-processor thread is running.
    pub fn command_processor_alive(&self, gpu_id: u32) -> bool {
        // Ordering: Acquire pairs with the CP's Release store on exit.
        self.node_index(gpu_id).is_some_and(|i| self.m.devices[i].alive.load(Ordering::Acquire))
    }

    /// Pauses or resumes a GPU's command processor (test hook: publish several queues' packets,
    /// then let arbitration decide).
    pub fn pause_command_processor(&self, gpu_id: u32, paused: bool) -> SysResult<()> {
        let idx = self.node_index(gpu_id).ok_or(Errno::EINVAL)?;
        // Ordering: Relaxed; see Device::run.
        self.m.devices[idx].paused.store(paused, Ordering::Relaxed);
        Ok(())
    }

    /// The GPU clock (ticks at [`crate::GPU_CLOCK_HZ`]).
    pub fn gpu_clock(&self) -> u64 {
        self.m.clock.gpu_ticks()
    }

    /// Whether a signal event is currently signalled (diagnostics).
    pub fn event_signaled(&self, event_id: u32) -> Option<bool> {
        self.process()?.events.is_signaled(event_id)
    }
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec we own.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
