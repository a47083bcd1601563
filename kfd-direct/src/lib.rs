//! # aqueduct-kfd — kfd-direct, the kernel-bypass backend
//!
//! An [`aqueduct::Backend`] that drives AMD GPUs straight through amdkfd: no ROCr, no libhsakmt,
//! no libc. Core writes AQL packets into rings this crate creates in GPU-visible memory, and
//! rings doorbells this crate maps into the process. Specification: `docs/kfd-aql.md`
//! (cited as §n).
//!
//! ## Layers
//!
//! - [`sys`]: the [`Sys`] trait — `open`, `ioctl`, `mmap`, `munmap`, `close`, sysfs reads — with
//!   [`LinuxSys`] (rustix, real syscalls) and, behind the `emu` feature, `EmuSys` (the emulated GPU
//!   of `aqueduct-kfd-emu`). Nothing else in the crate touches the system.
//! - [`abi`]: the ioctl ABI, shared with the emulator (`aqueduct-kfd-abi`).
//! - [`topology`]: GPU discovery from sysfs and the queue-buffer sizes derived from it (§5, §1.5).
//! - [`driver`]: typed ioctls and GPU buffers (allocate, GPU-map, CPU-map; undone in reverse).
//! - [`Kfd`] (this file): bring-up (§1.2), queues (§1.5, §2), signals and KFD events (§1.6,
//!   §4.1), waits, faults (§7), host functions, blit kernels and the code-object loader
//!   ([`codeobj`], §6).
//!
//! ## Who validates what
//!
//! Core validates every handle and argument of the HIP-level API; this backend trusts core's
//! packets and validates only what reaches it (signal handles must come from its pool, memory
//! addresses from its allocations, devices from its topology). The kernel validates every ioctl;
//! each failure comes back as [`KfdError::Sys`] naming the step and the errno, and whatever the
//! failing operation had acquired is released in reverse order.
//!
//! ## Memory ordering
//!
//! Core publishes packets (body, `Release` header store) and issues a `Release` fence; the
//! doorbell store here adds a `Release` fence and a 64-bit volatile store of the last packet's
//! index (§2). The command processor decrements completion signals and posts the event
//! mailbox; host waiters load signal values with `Acquire` (core's [`aqueduct::AmdSignal`]). Fault
//! latches are `Release`-stored and `Acquire`-loaded so a reader that sees a fault sees why.
//!
//! ## Faults (§7)
//!
//! A queue error reaches user mode through the CWSR header: the kernel ORs the exception mask
//! into the queue's error word and sets the completion event, so waiters wake. A GPU memory fault
//! or a device reset sets the process's MEMORY / HW_EXCEPTION events, which every blocking wait
//! (and every zero-time poll) includes; the backend latches them per device. A faulted queue's
//! stream fails its pending work with a sticky error ([`Backend::queue_fault`]); a wait for a
//! signal that only a faulted queue could complete ends with that error instead of hanging.

#![no_std]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing))]

#[cfg(feature = "std")]
extern crate std;

pub use aqueduct_kfd_abi as abi;

pub mod codeobj;
pub mod driver;
#[cfg(feature = "emu")]
mod emu_sys;
mod error;
pub mod sys;
pub mod topology;

#[cfg(feature = "emu")]
pub use emu_sys::{Call, EmuSys, BLIT_TWIN_NAMES};
pub use error::{KfdError, KfdResult, Op};
#[cfg(target_os = "linux")]
pub use sys::LinuxSys;
pub use sys::{Errno, Mapping, RawFd, Sys, SysResult};

use core::ptr::NonNull;
use portable_atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};

use aqueduct::aql::{AqlRing, Condition, Decoded};
use aqueduct::backend::{BuiltinKernel, DeviceInfo, HostFn, MemoryKind, QueueDesc, Timeout};
use aqueduct::{AmdSignal, Backend, CuMask, Error, Priority, Result, SignalHandle};

use crate::abi::{event_type, limits, queue_properties, AmdQueue, CwsrHeader, EventData};
use crate::codeobj::KernelInfo;
use crate::driver::{Bo, Driver, GTT_FLAGS, PAGE, VRAM_FLAGS, VRAM_PUBLIC_FLAGS};
use crate::topology::{GpuNode, QueueSizes};

/// GPUs the backend drives at most.
pub const MAX_GPUS: usize = 8;
/// Live queues at most.
pub const MAX_QUEUES: usize = 128;
/// Live user allocations at most (graphs and executables keep theirs in backend memory too).
pub const MAX_ALLOCATIONS: usize = 512;
/// Signals in the pool (one 2 MiB GTT buffer): a progress signal per stream slot and a signal per
/// recorded event, at HIP scale.
pub const SIGNALS: usize = 32768;
/// Pending host functions at most (without `std`).
pub const MAX_HOST_CALLS: usize = 64;
/// Loaded code objects at most (the blit objects included).
pub const MAX_CODE_OBJECTS: usize = 16;
/// Ticks per second of the GPU timestamp counter (signal timestamps): 100 MHz on GFX9+ (§3.4).
pub const TIMESTAMP_HZ: u64 = 100_000_000;
/// Offset of the queue's error word (the CWSR header's `err_payload_addr`) in its
/// `amd_queue_t` page, just past the 256-byte `amd_queue_t`.
pub const ERROR_WORD_OFFSET: u64 = 256;

/// How [`Backend::signal_wait`] waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitMode {
    /// Spin on the signal value (lowest latency; burns a core). Faults are still polled.
    Spin,
    /// Block in `WAIT_EVENTS` at once.
    Block,
    /// Spin for this many nanoseconds, then block (ROCr spins about 200 µs).
    Hybrid(u64),
}

/// How the backend is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KfdConfig {
    /// Packets per queue ring (a power of two, at least 16; the ring is `64 *` this bytes).
    pub ring_packets: u32,
    /// Kernel-argument bytes per ring slot (a multiple of 16).
    pub kernarg_bytes: u32,
    /// How waits wait.
    pub wait: WaitMode,
    /// Whether queues have `ENABLE_PROFILING` (start/end timestamps in signals; needed by
    /// `hipEventElapsedTime`).
    pub profiling: bool,
}

impl Default for KfdConfig {
    fn default() -> Self {
        KfdConfig { ring_packets: 256, kernarg_bytes: 256, wait: WaitMode::Hybrid(50_000), profiling: true }
    }
}

/// Why a device stopped (latched from its MEMORY / HW_EXCEPTION events).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DeviceFault {
    /// A GPU memory fault at this VA: every queue of the process on the device was evicted.
    MemoryFault(u64),
    /// The device hung and was reset.
    Reset,
}

mod fault {
    pub(crate) const NONE: u8 = 0;
    pub(crate) const QUEUE_ERROR: u8 = 1;
    pub(crate) const MEMORY: u8 = 2;
    pub(crate) const RESET: u8 = 3;
}

fn fault_error(code: u8) -> Option<Error> {
    match code {
        fault::QUEUE_ERROR => Some(Error::LaunchFailure),
        fault::MEMORY => Some(Error::IllegalAddress),
        fault::RESET => Some(Error::LaunchTimeOut),
        _ => None,
    }
}

/// One GPU of the backend.
#[derive(Debug, Clone, Copy)]
struct Gpu {
    node: GpuNode,
    render_fd: RawFd,
    sizes: QueueSizes,
    lds_base: u64,
    scratch_base: u64,
    blit: [u64; 4],
}

/// A queue as core holds it: the slot and the two pointers the hot paths need.
#[derive(Debug)]
pub struct KfdQueue {
    slot: u16,
    gpu: u8,
    doorbell: NonNull<u64>,
    error_word: NonNull<AtomicU64>,
}

// SAFETY: the pointers name the doorbell slot and error word of a live queue, which stay mapped
// until `queue_destroy` consumes this handle; both are accessed with volatile/atomic operations.
unsafe impl Send for KfdQueue {}
// SAFETY: as above.
unsafe impl Sync for KfdQueue {}

impl KfdQueue {
    /// The backend's slot of this queue.
    pub fn slot(&self) -> u16 {
        self.slot
    }

    /// The device index.
    pub fn device(&self) -> u32 {
        u32::from(self.gpu)
    }

    /// The value last written to the queue's doorbell (the index of the last packet published).
    pub fn doorbell_value(&self) -> u64 {
        // SAFETY: the doorbell slot is mapped while the queue lives.
        unsafe { core::ptr::read_volatile(self.doorbell.as_ptr()) }
    }
}

#[derive(Debug, Clone, Copy)]
struct QueueRec {
    gpu: u8,
    queue_id: u32,
    amd_queue: Bo,
    ring_bo: Bo,
    eop: Bo,
    cwsr: Bo,
    kernarg: Bo,
    ring: AqlRing,
}

#[derive(Debug, Clone, Copy)]
struct Allocation {
    bo: Bo,
}

#[derive(Debug, Clone, Copy)]
struct HostCall {
    start: SignalHandle,
    done: SignalHandle,
    f: HostFn,
}

/// A loaded code object.
#[derive(Debug, Clone)]
pub struct CodeObject {
    gpu: u8,
    image: Bo,
    kernels: heapless::Vec<KernelInfo, { codeobj::MAX_KERNELS }>,
}

impl CodeObject {
    /// Its kernels.
    pub fn kernels(&self) -> &[KernelInfo] {
        &self.kernels
    }

    /// The kernel named `name`.
    pub fn kernel(&self, name: &str) -> Option<&KernelInfo> {
        self.kernels.iter().find(|k| k.name.as_str() == name)
    }

    /// The GPU VA of the loaded image.
    pub fn base(&self) -> u64 {
        self.image.va
    }
}

/// A handle to a code object loaded with [`Kfd::load_code_object`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeObjectHandle(u16);

struct State {
    queues: [Option<QueueRec>; MAX_QUEUES],
    allocations: [Option<Allocation>; MAX_ALLOCATIONS],
    signal_used: [u64; SIGNALS / 64],
    #[cfg(not(feature = "std"))]
    host_calls: [Option<HostCall>; MAX_HOST_CALLS],
    doorbells: [usize; MAX_GPUS],
    code_objects: [Option<CodeObject>; MAX_CODE_OBJECTS],
    last_error: Option<KfdError>,
}

#[cfg(feature = "std")]
mod service;

/// The kfd-direct backend over a [`Sys`].
pub struct Kfd<S: Sys> {
    drv: Driver<S>,
    pid: u32,
    version: (u32, u32),
    config: KfdConfig,
    gpus: heapless::Vec<Gpu, MAX_GPUS>,
    gpu_ids: heapless::Vec<u32, MAX_GPUS>,
    event_page: Option<Bo>,
    completion_event: u32,
    completion_slot: u32,
    memory_event: u32,
    hw_event: u32,
    signal_pool: Option<Bo>,
    event_age: AtomicU64,
    state: spin::Mutex<State>,
    queue_faults: [AtomicU8; MAX_QUEUES],
    device_faults: [AtomicU8; MAX_GPUS],
    device_fault_va: [AtomicU64; MAX_GPUS],
    any_fault: AtomicBool,
    #[cfg(feature = "std")]
    service: std::sync::Mutex<Option<service::Service>>,
}

impl<S: Sys> core::fmt::Debug for Kfd<S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Kfd").field("version", &self.version).field("gpus", &self.gpus.len()).finish()
    }
}

const fn kfd_priority(p: Priority) -> u32 {
    // §1.5 priority mapping: HIP High/Normal/Low → KFD 11/7/0 (thunk table for +2/0/−3).
    match p {
        Priority::High => 11,
        Priority::Normal => 7,
        Priority::Low => 0,
    }
}

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
                allocations: [None; MAX_ALLOCATIONS],
                signal_used: [0; SIGNALS / 64],
                #[cfg(not(feature = "std"))]
                host_calls: [None; MAX_HOST_CALLS],
                doorbells: [0; MAX_GPUS],
                code_objects: [const { None }; MAX_CODE_OBJECTS],
                last_error: None,
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

    /// The latched fault of a device, if it stopped.
    pub fn device_fault(&self, device: u32) -> Option<DeviceFault> {
        let i = device as usize;
        // Ordering: Acquire pairs with the Release latch in `latch_device`.
        match self.device_faults.get(i)?.load(Ordering::Acquire) {
            fault::MEMORY => Some(DeviceFault::MemoryFault(self.device_fault_va.get(i)?.load(Ordering::Acquire))),
            fault::RESET => Some(DeviceFault::Reset),
            _ => None,
        }
    }

    /// The KFD queue id of a live queue (for diagnostics and tests).
    pub fn queue_id(&self, queue: &KfdQueue) -> Option<u32> {
        self.state.lock().queues.get(usize::from(queue.slot)).and_then(|q| q.as_ref()).map(|q| q.queue_id)
    }

    /// The KFD events the backend created: (completion, memory, hardware exception).
    pub fn events(&self) -> (u32, u32, u32) {
        (self.completion_event, self.memory_event, self.hw_event)
    }

    fn record<T>(&self, r: KfdResult<T>) -> Result<T> {
        r.map_err(|e| {
            self.state.lock().last_error = Some(e);
            Error::from(e)
        })
    }

    fn check_process(&self) -> KfdResult<()> {
        if self.drv.sys().process_id() != self.pid {
            return Err(KfdError::Forked);
        }
        Ok(())
    }

    fn alloc_bo(&self, gpu: usize, bytes: u64, flags: u32, cpu: bool) -> KfdResult<Bo> {
        let g = self.gpus.get(gpu).ok_or(KfdError::InvalidDevice)?;
        self.drv.alloc(g.node.gpu_id, g.render_fd, bytes, flags, &self.gpu_ids, cpu)
    }

    fn free_bo(&self, bo: &Bo) -> KfdResult<()> {
        self.drv.free(bo, &self.gpu_ids)
    }

    // ----- code objects ------------------------------------------------------------------

    fn load_blit(&mut self, gpu: usize) -> KfdResult<()> {
        let Some(g) = self.gpus.get(gpu) else { return Err(KfdError::InvalidDevice) };
        let Some(elf) = blit_code_object(g.node.props.gfx_target_version) else { return Ok(()) };
        let h = self.load_code_object(gpu as u32, elf)?;
        let st = self.state.lock();
        let co = st.code_objects.get(usize::from(h.0)).and_then(|c| c.as_ref()).ok_or(KfdError::KernelNotFound)?;
        let mut blit = [0u64; 4];
        let names = ["aqueduct_copy", "aqueduct_fill", "aqueduct_write_value", "aqueduct_graph_scheduler"];
        for (slot, name) in blit.iter_mut().zip(names) {
            *slot = co.kernel(name).ok_or(KfdError::KernelNotFound)?.kernel_object;
        }
        drop(st);
        if let Some(g) = self.gpus.get_mut(gpu) {
            g.blit = blit;
        }
        Ok(())
    }

    /// Loads an AMDHSA code object onto `device` (§6): checks the target, places the segments
    /// in one executable GPU buffer, applies the relocations and reads every kernel descriptor.
    pub fn load_code_object(&self, device: u32, elf: &[u8]) -> KfdResult<CodeObjectHandle> {
        self.check_process()?;
        let gpu = self.gpus.get(device as usize).ok_or(KfdError::InvalidDevice)?;
        let parsed = codeobj::parse(elf, gpu.node.props.gfx_target_version)?;
        let free_slot = {
            let st = self.state.lock();
            st.code_objects.iter().position(Option::is_none).ok_or(KfdError::Capacity("code objects"))?
        };
        let bo = self.alloc_bo(device as usize, parsed.image_size, GTT_FLAGS, true)?;
        let result = (|| {
            // SAFETY: the buffer is CPU-mapped, `bo.size >= image_size` bytes, and ours alone
            // until the handle is returned.
            let image = unsafe { core::slice::from_raw_parts_mut(bo.ptr::<u8>(0), parsed.image_size as usize) };
            codeobj::place(&parsed, elf, image, bo.va)?;
            let mut kernels = heapless::Vec::new();
            codeobj::kernels(&parsed, image, bo.va, |k| kernels.push(k).map_err(|_| KfdError::Capacity("kernels")))?;
            Ok(kernels)
        })();
        let kernels = match result {
            Ok(k) => k,
            Err(e) => {
                let _ = self.free_bo(&bo);
                return Err(e);
            }
        };
        self.drv.sys().code_object_loaded(elf);
        let mut st = self.state.lock();
        match st.code_objects.get_mut(free_slot) {
            Some(slot @ None) => {
                *slot = Some(CodeObject { gpu: device as u8, image: bo, kernels });
                Ok(CodeObjectHandle(free_slot as u16))
            }
            _ => {
                drop(st);
                let _ = self.free_bo(&bo);
                Err(KfdError::Capacity("code objects"))
            }
        }
    }

    /// A kernel of a loaded code object, by name.
    pub fn kernel(&self, co: CodeObjectHandle, name: &str) -> KfdResult<KernelInfo> {
        let st = self.state.lock();
        let c = st.code_objects.get(usize::from(co.0)).and_then(|c| c.as_ref()).ok_or(KfdError::InvalidArgument)?;
        c.kernel(name).cloned().ok_or(KfdError::KernelNotFound)
    }

    /// A copy of a loaded code object's description.
    pub fn code_object(&self, co: CodeObjectHandle) -> Option<CodeObject> {
        self.state.lock().code_objects.get(usize::from(co.0)).and_then(|c| c.clone())
    }

    /// Unloads a code object (no dispatch of its kernels may be pending).
    pub fn unload_code_object(&self, co: CodeObjectHandle) -> KfdResult<()> {
        let c = {
            let mut st = self.state.lock();
            st.code_objects.get_mut(usize::from(co.0)).and_then(Option::take).ok_or(KfdError::InvalidArgument)?
        };
        let _ = c.gpu;
        self.free_bo(&c.image)
    }

    /// Launches kernel `name` of a loaded code object on a stream: the descriptor gives the
    /// segment sizes; `kernarg` must hold at least the explicit arguments.
    pub fn launch_by_name<K, C: aqueduct::Config>(
        rt: &aqueduct::Runtime<Kfd<S>, K, C>,
        stream: aqueduct::StreamHandle,
        co: CodeObjectHandle,
        name: &str,
        grid: [u32; 3],
        workgroup: [u16; 3],
        kernarg: &[u8],
    ) -> Result<()>
    where
        K: aqueduct::ThreadKeys,
    {
        let k = rt.backend().kernel(co, name).map_err(Error::from)?;
        if k.dynamic_stack || k.private_segment_size > 0 {
            // No scratch is set up (§4.3 MVP): such kernels are refused, not run wrong.
            return Err(Error::NotSupported);
        }
        rt.launch_kernel(
            stream,
            &aqueduct::KernelLaunch {
                kernel_object: k.kernel_object,
                grid,
                workgroup,
                group_segment_size: k.group_segment_size,
                private_segment_size: k.private_segment_size,
                kernarg,
            },
        )
    }

    // ----- queues ----------------------------------------------------------------------------

    fn create_queue(&self, device: u32, priority: Priority, cu_mask: Option<&CuMask>) -> KfdResult<KfdQueue> {
        self.check_process()?;
        let gi = device as usize;
        let g = *self.gpus.get(gi).ok_or(KfdError::InvalidDevice)?;
        let slot = {
            let st = self.state.lock();
            st.queues.iter().position(Option::is_none).ok_or(KfdError::Capacity("queues"))?
        };
        let packets = u64::from(self.config.ring_packets);
        let has_vram = g.node.props.vram_bytes > 0;
        // Acquired in this order, released in reverse on failure.
        let mut held: heapless::Vec<Bo, 5> = heapless::Vec::new();
        let release = |held: &heapless::Vec<Bo, 5>| {
            for bo in held.iter().rev() {
                let _ = self.free_bo(bo);
            }
        };
        let steps = [
            (PAGE, GTT_FLAGS, true),                                                  // amd_queue_t
            (packets * 64, GTT_FLAGS, true),                                          // ring (executable, §0 item 7)
            (g.sizes.eop_size, if has_vram { VRAM_FLAGS } else { GTT_FLAGS }, false), // EOP
            (g.sizes.cwsr_bo_size, GTT_FLAGS, true),                                  // CWSR area
            (packets * u64::from(self.config.kernarg_bytes), GTT_FLAGS, true),        // kernel arguments
        ];
        for (bytes, flags, cpu) in steps {
            match self.alloc_bo(gi, bytes, flags, cpu) {
                Ok(bo) => {
                    let _ = held.push(bo);
                }
                Err(e) => {
                    release(&held);
                    return Err(e);
                }
            }
        }
        let (Some(&aq), Some(&ring_bo), Some(&eop), Some(&cwsr), Some(&kernarg)) =
            (held.first(), held.get(1), held.get(2), held.get(3), held.get(4))
        else {
            release(&held);
            return Err(KfdError::Capacity("queue buffers"));
        };
        // amd_queue_t (§4.3): the dispatch ids at +56/+128, profiling, CU and wave limits.
        let props = g.node.props;
        let q = AmdQueue {
            hsa_queue: abi::HsaQueue {
                queue_type: 0,
                features: 1,
                base_address: ring_bo.va,
                doorbell_signal: 0,
                size: self.config.ring_packets,
                reserved1: 0,
                id: slot as u64,
            },
            group_segment_aperture_base_hi: (g.lds_base >> 32) as u32,
            private_segment_aperture_base_hi: (g.scratch_base >> 32) as u32,
            max_cu_id: props.cu_count().saturating_sub(1),
            max_wave_id: (props.max_waves_per_simd * props.simd_per_cu).saturating_sub(1),
            read_dispatch_id_field_base_byte_offset: abi::AMD_QUEUE_READ_DISPATCH_ID as u32,
            queue_properties: queue_properties::IS_PTR64
                | if self.config.profiling { queue_properties::ENABLE_PROFILING } else { 0 },
            scratch_last_used_index: u64::MAX,
            ..AmdQueue::default()
        };
        // SAFETY: the page is CPU-mapped, page-aligned and ours until CREATE_QUEUE hands it to
        // the device; the error word after it starts at 0.
        unsafe {
            aq.ptr::<AmdQueue>(0).write(q);
            aq.ptr::<u64>(ERROR_WORD_OFFSET).write(0);
        }
        // CWSR headers, one per XCC (§1.5; THUNK fill_cwsr_header): errors go to our error word
        // and set the completion event, so waiters wake.
        let xcc = props.num_xcc.max(1);
        for i in 0..xcc {
            let hdr = CwsrHeader {
                debug_offset: (xcc - i) * g.sizes.cwsr_size,
                debug_size: g.sizes.debug_memory_size * xcc,
                err_payload_addr: aq.va + ERROR_WORD_OFFSET,
                err_event_id: self.completion_event,
                ..CwsrHeader::default()
            };
            // SAFETY: header i lies at i * cwsr_size inside the CPU-mapped CWSR buffer.
            unsafe { cwsr.ptr::<CwsrHeader>(u64::from(i) * u64::from(g.sizes.cwsr_size)).write(hdr) };
        }
        let ring_ptr = NonNull::new(ring_bo.ptr::<u8>(0)).ok_or(KfdError::InvalidArgument);
        let wptr = NonNull::new(aq.ptr::<portable_atomic::AtomicU64>(abi::AMD_QUEUE_WRITE_DISPATCH_ID));
        let rptr = NonNull::new(aq.ptr::<portable_atomic::AtomicU64>(abi::AMD_QUEUE_READ_DISPATCH_ID));
        let ring = match (ring_ptr, wptr, rptr) {
            // SAFETY: ring and indices lie in CPU-mapped buffers that live until queue_destroy.
            (Ok(b), Some(w), Some(r)) => unsafe { AqlRing::new(b, self.config.ring_packets, w, r) }.ok(),
            _ => None,
        };
        let Some(ring) = ring else {
            release(&held);
            return Err(KfdError::InvalidArgument);
        };
        ring.invalidate_all();
        let mut args = abi::CreateQueueArgs {
            ring_base_address: ring_bo.va,
            write_pointer_address: aq.va + abi::AMD_QUEUE_WRITE_DISPATCH_ID,
            read_pointer_address: aq.va + abi::AMD_QUEUE_READ_DISPATCH_ID,
            ring_size: (packets * 64) as u32,
            gpu_id: g.node.gpu_id,
            queue_type: abi::queue_type::COMPUTE_AQL,
            queue_percentage: limits::MAX_QUEUE_PERCENTAGE,
            queue_priority: kfd_priority(priority),
            eop_buffer_address: eop.va,
            eop_buffer_size: g.sizes.eop_size,
            ctx_save_restore_address: cwsr.va,
            ctx_save_restore_size: g.sizes.cwsr_size,
            ctl_stack_size: g.sizes.ctl_stack_size,
            ..Default::default()
        };
        if let Err(e) = self.drv.create_queue(&mut args) {
            release(&held);
            return Err(e);
        }
        let undo_queue = |e: KfdError| {
            let _ = self.drv.destroy_queue(args.queue_id);
            release(&held);
            e
        };
        // The doorbell slice is mapped once per GPU and reused (§2).
        let slice = {
            let mut st = self.state.lock();
            match st.doorbells.get(gi).copied() {
                Some(0) => match self.drv.map_doorbells(args.doorbell_offset) {
                    Ok(p) => {
                        if let Some(d) = st.doorbells.get_mut(gi) {
                            *d = p as usize;
                        }
                        p as usize
                    }
                    Err(e) => {
                        drop(st);
                        return Err(undo_queue(e));
                    }
                },
                Some(p) => p,
                None => 0,
            }
        };
        let db_off = (args.doorbell_offset & (limits::DOORBELL_SLICE_BYTES - 1)) as usize;
        let doorbell = NonNull::new(core::ptr::with_exposed_provenance_mut::<u64>(slice.wrapping_add(db_off)));
        let error_word = NonNull::new(aq.ptr::<AtomicU64>(ERROR_WORD_OFFSET));
        let (Some(doorbell), Some(error_word)) = (doorbell, error_word) else {
            return Err(undo_queue(KfdError::InvalidArgument));
        };
        if let Some(mask) = cu_mask {
            let words = cu_mask_words(mask, props.cu_count(), props.has_wgp());
            let n = (props.cu_count().div_ceil(32) as usize).clamp(1, words.len());
            if let Err(e) = self.drv.set_cu_mask(args.queue_id, words.get(..n).unwrap_or(&words)) {
                return Err(undo_queue(e));
            }
        }
        let rec = QueueRec { gpu: gi as u8, queue_id: args.queue_id, amd_queue: aq, ring_bo, eop, cwsr, kernarg, ring };
        if let Some(f) = self.queue_faults.get(slot) {
            // Ordering: Release; the slot is reused, its old fault is gone before it is handed out.
            f.store(fault::NONE, Ordering::Release);
        }
        let mut st = self.state.lock();
        match st.queues.get_mut(slot) {
            Some(s @ None) => *s = Some(rec),
            _ => {
                drop(st);
                return Err(undo_queue(KfdError::Capacity("queues")));
            }
        }
        Ok(KfdQueue { slot: slot as u16, gpu: gi as u8, doorbell, error_word })
    }

    fn destroy_queue(&self, queue: &KfdQueue) -> KfdResult<()> {
        let rec = {
            let mut st = self.state.lock();
            st.queues.get_mut(usize::from(queue.slot)).and_then(Option::take).ok_or(KfdError::InvalidArgument)?
        };
        if self.check_process().is_err() {
            return Err(KfdError::Forked);
        }
        self.drv.destroy_queue(rec.queue_id)?;
        for bo in [rec.kernarg, rec.cwsr, rec.eop, rec.ring_bo, rec.amd_queue] {
            self.free_bo(&bo)?;
        }
        Ok(())
    }

    /// The fault of the queue in `slot` (latched, from its error word, or from its device).
    fn slot_fault(&self, slot: usize, gpu: usize, error_word: Option<&AtomicU64>) -> Option<Error> {
        // Ordering: Acquire pairs with the Release latches.
        if let Some(e) = self.device_faults.get(gpu).and_then(|d| fault_error(d.load(Ordering::Acquire))) {
            return Some(e);
        }
        // Ordering: as above.
        if let Some(e) = self.queue_faults.get(slot).and_then(|f| fault_error(f.load(Ordering::Acquire))) {
            return Some(e);
        }
        // Ordering: Acquire; the kernel ORs the exception mask in before setting the event.
        let word = error_word.map_or(0, |w| w.load(Ordering::Acquire));
        if word != 0 {
            let code = if word & abi::exception::mask(abi::exception::QUEUE_WAVE_MEMORY_VIOLATION) != 0
                || word & abi::exception::mask(abi::exception::DEVICE_MEMORY_VIOLATION) != 0
            {
                fault::MEMORY
            } else {
                fault::QUEUE_ERROR
            };
            if let Some(f) = self.queue_faults.get(slot) {
                // Ordering: Release publishes the latch (sticky).
                f.store(code, Ordering::Release);
            }
            // Ordering: Release; see any_fault readers.
            self.any_fault.store(true, Ordering::Release);
            return fault_error(code);
        }
        None
    }

    fn latch_device(&self, gpu_id: u32, code: u8, va: u64) {
        if let Some(i) = self.gpu_ids.iter().position(|&g| g == gpu_id) {
            if let (Some(d), Some(v)) = (self.device_faults.get(i), self.device_fault_va.get(i)) {
                // Ordering: Release, VA first, so a reader that sees the code sees the address.
                v.store(va, Ordering::Release);
                // Ordering: Release; a reset outranks an earlier memory fault.
                d.fetch_max(code, Ordering::Release);
            }
            // Ordering: Release; see any_fault readers.
            self.any_fault.store(true, Ordering::Release);
        }
    }

    // ----- signals, events and waits -----------------------------------------------------------

    fn signal_index(&self, h: SignalHandle) -> Option<usize> {
        let pool = self.signal_pool?;
        let off = h.0.checked_sub(pool.va)?;
        (off % 64 == 0 && (off / 64) < SIGNALS as u64).then_some((off / 64) as usize)
    }

    fn signal_ref(&self, h: SignalHandle) -> Result<&AmdSignal> {
        self.signal_index(h).ok_or(Error::InvalidHandle)?;
        // SAFETY: the handle is a 64-byte aligned slot of the CPU-mapped signal pool, which
        // lives as long as `self`.
        Ok(unsafe { h.get() })
    }

    /// Waits in the kernel for the completion event (or a fault event) for at most `ms`.
    fn wait_kfd_events(&self, ms: u32) {
        let age_ok = self.version.1 >= 14;
        // Ordering: Relaxed; the age is a hint (a stale one only causes a spurious wake).
        let age = self.event_age.load(Ordering::Relaxed);
        let mut ev = [
            EventData {
                event_id: self.completion_event,
                payload: [if age_ok { age } else { 0 }, 0, 0, 0],
                ..Default::default()
            },
            EventData { event_id: self.memory_event, ..Default::default() },
            EventData { event_id: self.hw_event, ..Default::default() },
        ];
        if let Ok(abi::wait_result::COMPLETE) = self.drv.wait_events(&mut ev, ms) {
            let [c, m, h] = ev;
            if age_ok && c.last_event_age() != 0 {
                // Ordering: Relaxed; see above.
                self.event_age.fetch_max(c.last_event_age(), Ordering::Relaxed);
            }
            let mem = m.memory_exception();
            if mem.gpu_id != 0 {
                let code = if mem.error_type == 3 { fault::RESET } else { fault::MEMORY };
                self.latch_device(mem.gpu_id, code, mem.va);
            }
            let hw = h.hw_exception();
            if hw.gpu_id != 0 {
                self.latch_device(hw.gpu_id, fault::RESET, 0);
            }
        }
    }

    /// Checks the error words of every queue (cheap loads) so faults are latched.
    fn scan_error_words(&self) {
        let st = self.state.lock();
        for (slot, q) in st.queues.iter().enumerate() {
            if let Some(q) = q {
                let w = NonNull::new(q.amd_queue.ptr::<AtomicU64>(ERROR_WORD_OFFSET));
                // SAFETY: the error word lives in the queue's CPU-mapped page while the queue does.
                let w = w.map(|p| unsafe { p.as_ref() });
                let _ = self.slot_fault(slot, usize::from(q.gpu), w);
            }
        }
    }

    /// The error of a faulted queue holding a pending packet that would complete `signal`.
    fn dead_signal(&self, signal: SignalHandle) -> Option<Error> {
        // Ordering: Acquire pairs with the latches' Release stores.
        if !self.any_fault.load(Ordering::Acquire) {
            return None;
        }
        let st = self.state.lock();
        if let Some(e) = self.faulted_completer(&st, signal.0) {
            return Some(e);
        }
        // One step further: a healthy queue whose pending packet would complete `signal` only
        // after a barrier-AND on a signal a faulted queue would complete (a cross-stream marker
        // or event of the faulted stream) never gets there: the wait ends with that error.
        for q in st.queues.iter().flatten() {
            let (rd, wr) = (q.ring.read_index(), q.ring.write_index());
            let n = wr.wrapping_sub(rd).min(q.ring.size());
            let mut blocked: Option<Error> = None;
            for k in 0..n {
                let Some(words) = q.ring.read(rd.wrapping_add(k)) else { break };
                let Some(d) = Decoded::decode(&words) else { continue };
                match d {
                    Decoded::BarrierAnd(b) => {
                        for &dep in b.dep_signal.iter().filter(|&&x| x != 0) {
                            blocked = blocked.or_else(|| self.faulted_completer(&st, dep));
                        }
                    }
                    // A wait on another stream's progress point (core's implicit
                    // synchronisation) whose packets sit in a faulted queue.
                    Decoded::BarrierValue(v) => blocked = blocked.or_else(|| self.faulted_completer(&st, v.signal)),
                    _ => {}
                }
                if blocked.is_some() && d.completion_signal() == signal.0 {
                    return blocked;
                }
            }
        }
        None
    }

    /// The error of a faulted queue holding a pending packet that would complete `signal`.
    fn faulted_completer(&self, st: &State, signal: u64) -> Option<Error> {
        for (slot, q) in st.queues.iter().enumerate() {
            let Some(q) = q else { continue };
            let Some(err) = self.slot_fault(slot, usize::from(q.gpu), None) else { continue };
            let (rd, wr) = (q.ring.read_index(), q.ring.write_index());
            let n = wr.wrapping_sub(rd).min(q.ring.size());
            for k in 0..n {
                // The CP of a faulted queue has stopped: its pending slots are stable.
                let Some(words) = q.ring.read(rd.wrapping_add(k)) else { break };
                if Decoded::decode(&words).is_some_and(|d| d.completion_signal() == signal) {
                    return Some(err);
                }
            }
        }
        None
    }

    /// Makes progress without blocking: runs ready host functions (without `std`), latches
    /// faults from the error words and from a zero-time poll of the fault events.
    pub fn poll(&self) {
        #[cfg(not(feature = "std"))]
        self.run_host_calls();
        self.scan_error_words();
        self.wait_kfd_events(0);
    }

    #[cfg(not(feature = "std"))]
    fn run_host_calls(&self) {
        loop {
            let ready = {
                let mut st = self.state.lock();
                let mut found = None;
                for c in st.host_calls.iter_mut() {
                    // SAFETY: start/done are live pool signals until the barrier after the call
                    // completes, which needs `done`.
                    if c.as_ref().is_some_and(|c| unsafe { c.start.get() }.load() == 0) {
                        found = c.take();
                        break;
                    }
                }
                found
            };
            let Some(call) = ready else { break };
            // SAFETY: the enqueuer vouched for the function and its data.
            unsafe { call.f.call() };
            // SAFETY: as above.
            unsafe { call.done.get() }.reset(0);
            let _ = self.drv.set_event(self.completion_event);
        }
    }

    fn wait(
        &self,
        s: &AmdSignal,
        handle: SignalHandle,
        cond: Condition,
        expected: i64,
        timeout: Timeout,
    ) -> Result<i64> {
        let v = s.load();
        if cond.holds(v, expected) {
            return Ok(v);
        }
        if timeout == Timeout::ZERO {
            self.poll();
            let v = s.load();
            if cond.holds(v, expected) {
                return Ok(v);
            }
            return Err(self.dead_signal(handle).unwrap_or(Error::NotReady));
        }
        self.check_process().map_err(Error::from)?;
        let start = self.drv.sys().now_ns();
        let deadline = start.saturating_add(timeout.0);
        let spin_until = match self.config.wait {
            WaitMode::Spin => deadline,
            WaitMode::Block => start,
            WaitMode::Hybrid(ns) => start.saturating_add(ns).min(deadline),
        };
        let mut spins = 0u32;
        loop {
            let v = s.load();
            if cond.holds(v, expected) {
                return Ok(v);
            }
            spins = spins.wrapping_add(1);
            if spins % 256 == 0 {
                let now = self.drv.sys().now_ns();
                if spins % (1 << 16) == 0 {
                    // Even a spinning waiter learns of faults (about every millisecond or so).
                    self.poll();
                    if let Some(e) = self.dead_signal(handle) {
                        return Err(e);
                    }
                }
                if now >= spin_until {
                    break;
                }
            }
            core::hint::spin_loop();
        }
        // Slices bound a lost wake-up when the kernel has no event age (before 1.14).
        let slice_ms: u64 = if self.version.1 >= 14 { 100 } else { 1 };
        loop {
            #[cfg(not(feature = "std"))]
            self.run_host_calls();
            let v = s.load();
            if cond.holds(v, expected) {
                return Ok(v);
            }
            self.scan_error_words();
            if let Some(e) = self.dead_signal(handle) {
                return Err(e);
            }
            let now = self.drv.sys().now_ns();
            if now >= deadline {
                return Err(Error::NotReady);
            }
            let ms = (deadline - now).div_ceil(1_000_000).min(slice_ms) as u32;
            self.wait_kfd_events(ms);
        }
    }

    /// Wakes blocked waiters (after a host-side signal change).
    pub fn notify(&self) {
        let _ = self.drv.set_event(self.completion_event);
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
            let (codes, allocs) = {
                let mut st = self.state.lock();
                let mut c: heapless::Vec<Bo, MAX_CODE_OBJECTS> = heapless::Vec::new();
                for co in st.code_objects.iter_mut().rev() {
                    if let Some(co) = co.take() {
                        let _ = c.push(co.image);
                    }
                }
                let mut a: heapless::Vec<Bo, MAX_ALLOCATIONS> = heapless::Vec::new();
                for al in st.allocations.iter_mut().rev() {
                    if let Some(al) = al.take() {
                        let _ = a.push(al.bo);
                    }
                }
                (c, a)
            };
            for bo in allocs.iter().chain(codes.iter()) {
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

fn cu_mask_words(mask: &CuMask, cus: u32, wgp: bool) -> [u32; aqueduct::stream::CU_MASK_WORDS] {
    let mut w = *mask.words();
    if wgp {
        // GFX10+: CUs are enabled in work-group-processor pairs (ROCr SetCUMasking).
        for word in w.iter_mut() {
            let pairs = (*word | (*word >> 1)) & 0x5555_5555;
            *word = pairs | (pairs << 1);
        }
    }
    for (i, word) in w.iter_mut().enumerate() {
        let lo = i as u32 * 32;
        if lo >= cus {
            *word = 0;
        } else if cus - lo < 32 {
            *word &= (1u32 << (cus - lo)) - 1;
        }
    }
    w
}

/// The embedded blit code object for a gfx target, if the crate carries one.
pub fn blit_code_object(gfx_target_version: u32) -> Option<&'static [u8]> {
    match gfx_target_version {
        90010 => Some(include_bytes!("../blit/blit-gfx90a.co")),
        90400 | 90402 => Some(include_bytes!("../blit/blit-gfx940.co")),
        110000 => Some(include_bytes!("../blit/blit-gfx1100.co")),
        _ => None,
    }
}

// SAFETY: signals are 64-byte slots of the CPU-mapped signal pool (live until the backend
// drops); a queue's ring, indices and kernel-argument area live in its buffers until
// `queue_destroy`; published packets are consumed by the device's command processor, or the
// queue's fault is reported through `queue_fault` (error word, latched device faults).
unsafe impl<S: Sys> Backend for Kfd<S> {
    type Queue = KfdQueue;

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
        if self.state.lock().allocations.iter().all(Option::is_some) {
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
        match st.allocations.iter_mut().find(|a| a.is_none()) {
            Some(s) => {
                *s = Some(Allocation { bo });
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
            let slot =
                st.allocations.iter_mut().find(|a| a.is_some_and(|a| a.bo.va == address)).ok_or(Error::InvalidValue)?;
            slot.take().ok_or(Error::InvalidValue)?
        };
        self.record(self.check_process())?;
        let r = self.free_bo(&a.bo);
        self.record(r)
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
