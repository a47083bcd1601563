//! # aqueduct-kfd — kfd-direct, the kernel-bypass backend
//!
//! An [`aqueduct::Backend`] that drives AMD GPUs straight through amdkfd: no ROCr, no libhsakmt,
//! no libc. Core writes AQL packets into rings this crate creates in GPU-visible memory, and
//! rings doorbells this crate maps into the process. Specification: `docs/kfd-aql.md`
//! (cited as §n).
//!
//! ## Layers
//!
//! From the system up; each layer calls only the ones above it in this list.
//!
//! - [`sys`]: the [`Sys`] trait — `open`, `ioctl`, `mmap`, `munmap`, `close`, sysfs reads — with
//!   [`LinuxSys`] (rustix, real syscalls) and, behind the `emu` feature, `EmuSys` (the emulated GPU
//!   of `aqueduct-kfd-emu`). Nothing else in the crate touches the system.
//! - [`abi`]: the ioctl ABI, shared with the emulator (`aqueduct-kfd-abi`): each request a type
//!   tied to its argument struct.
//! - [`topology`]: GPU discovery from sysfs and the queue-buffer sizes derived from it (§5, §1.5).
//! - [`driver`]: typed ioctls (safe for requests without user pointers) and GPU buffers
//!   (allocate, GPU-map, CPU-map; undone in reverse) (§1.3, §1.4).
//! - [`Kfd`], one type whose `impl` is spread over one file per role:
//!   - `open`: bring-up (§1.2), accessors, teardown on drop;
//!   - `queues`: AQL queues, their buffers, doorbells and CU masks (§1.5, §2);
//!   - `signals`: the signal pool, KFD events, waits, `poll` and `notify` (§1.6, §4.1);
//!   - `faults`: the queue and device fault latches and the dead-signal check (§7);
//!   - `code_objects`: the blit kernels and loaded code objects, read, placed and looked up
//!     through `amdhsa`, the one code-object reader (docs/code-objects.md §1, §8);
//!   - `scratch`: the queues' private segment memory, grown when a kernel needs more
//!     (docs/code-objects.md §9);
//!   - `backend`: the [`aqueduct::Backend`] implementation over the roles above;
//!   - `service` (`std`): the host-function thread.
//! - `on_drop`: the rollback guard of multi-step bring-ups (buffers, queues).
//!
//! ## Who validates what
//!
//! Core validates every handle and argument of the HIP-level API; this backend trusts core's
//! packets and validates only what reaches it (signal handles must come from its pool, memory
//! addresses from its allocations, devices from its topology). The kernel validates every ioctl;
//! each failure comes back as [`KfdError::Sys`] naming the step and the errno, and whatever the
//! failing operation had acquired is released in reverse order (an `OnDrop` guard, defused on
//! success).
//!
//! ## Memory ordering
//!
//! Core publishes packets (body, `Release` header store) and issues a `Release` fence; the
//! doorbell store here is a `Release` 64-bit atomic store of the last packet's index (§2). The
//! command processor decrements completion signals and posts the event mailbox; host waiters load
//! signal values with `Acquire` (core's [`aqueduct::AmdSignal`]). Fault latches are
//! `Release`-stored and `Acquire`-loaded so a reader that sees a fault sees why.
//!
//! ## Faults (§7)
//!
//! A queue error reaches user mode through the CWSR header: the kernel ORs the exception mask
//! into the queue's error word and sets the completion event, so waiters wake. A GPU memory fault
//! or a device reset sets the process's MEMORY / HW_EXCEPTION events, which every blocking wait
//! (and every zero-time poll) includes; the backend latches them per device. A faulted queue's
//! stream fails its pending work with a sticky error ([`aqueduct::Backend::queue_fault`]); a wait for a
//! signal that only a faulted queue could complete ends with that error instead of hanging.

#![no_std]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing))]

#[cfg(feature = "std")]
extern crate std;

pub use aqueduct_kfd_abi as abi;

pub mod driver;
#[cfg(feature = "emu")]
mod emu_sys;
mod error;
pub mod sys;
pub mod topology;

mod backend;
mod code_objects;
mod faults;
mod on_drop;
mod open;
mod queues;
mod scratch;
#[cfg(feature = "std")]
mod service;
mod signals;
mod slots;
mod vmem;
pub use vmem::{IpcExport, MAX_IPC, MAX_VMEM_HANDLES, MAX_VMEM_MAPPINGS, MAX_VMEM_RESERVATIONS};

pub use code_objects::{blit_code_object, KfdModule};
#[cfg(feature = "emu")]
pub use emu_sys::{Call, EmuSys, BLIT_TWIN_NAMES};
pub use error::{KfdError, KfdResult, Op};
pub use scratch::{ScratchSetup, MAX_LANE_BYTES};
#[cfg(target_os = "linux")]
pub use sys::LinuxSys;
pub use sys::{Errno, Mapping, RawFd, Sys, SysResult};

use core::ptr::NonNull;
use portable_atomic::{AtomicBool, AtomicU64, AtomicU8};

use aqueduct::aql::AqlRing;
use aqueduct::backend::HostFn;
use aqueduct::SignalHandle;

use crate::driver::{Bo, Driver};
use crate::slots::Slots;
use crate::topology::{GpuNode, QueueSizes};

/// GPUs the backend drives at most.
pub const MAX_GPUS: usize = 8;
/// Live queues at most.
pub const MAX_QUEUES: usize = 128;
/// Live user allocations at most without `std`, which grows the table (graphs and executables
/// keep theirs in backend memory too).
pub const MAX_ALLOCATIONS: usize = 512;
/// Signals in the pool (one 2 MiB GTT buffer): a progress signal per stream slot and a signal per
/// recorded event, at HIP scale.
pub const SIGNALS: usize = 32768;
/// Kernel-argument bytes of one dispatch at most: HIP's limit, 4 KiB (a dispatch whose arguments
/// pass its ring slot's `kernarg_bytes` takes the slots after it; `aqueduct::QueueDesc`).
pub const MAX_KERNARG_BYTES: u32 = 4096;
/// Pending host functions at most (without `std`).
pub const MAX_HOST_CALLS: usize = 64;
/// Ticks per second of the GPU timestamp counter (signal timestamps): 100 MHz on GFX9+ (docs/kfd-aql.md §3.4).
pub const TIMESTAMP_HZ: u64 = 100_000_000;
/// Offset of the queue's error word (the CWSR header's `err_payload_addr`) in its
/// `amd_queue_t` page, just past the 256-byte `amd_queue_t`.
pub const ERROR_WORD_OFFSET: u64 = 256;

/// How [`aqueduct::Backend::signal_wait`] waits.
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

/// One GPU of the backend.
#[derive(Debug, Clone, Copy)]
struct Gpu {
    node: GpuNode,
    render_fd: RawFd,
    sizes: QueueSizes,
    lds_base: u64,
    scratch_base: u64,
    blit: [u64; 4],
    /// The blit code object's image.
    blit_image: Option<Bo>,
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
    /// `Some(device address)` for registered host memory (`Backend::host_register`), whose
    /// buffer stands for the user's pages; `None` for memory the backend allocated.
    registered: Option<u64>,
}

#[derive(Debug, Clone, Copy)]
struct HostCall {
    start: SignalHandle,
    done: SignalHandle,
    f: HostFn,
}

struct State {
    queues: [Option<QueueRec>; MAX_QUEUES],
    allocations: Slots<Allocation, MAX_ALLOCATIONS>,
    signal_used: [u64; SIGNALS / 64],
    #[cfg(not(feature = "std"))]
    host_calls: [Option<HostCall>; MAX_HOST_CALLS],
    doorbells: [usize; MAX_GPUS],
    /// Scratch buffers per queue slot.
    scratch: [scratch::QueueScratch; MAX_QUEUES],
    /// Scratch bytes per work-item every queue of a device holds.
    scratch_lane: [u32; MAX_GPUS],
    last_error: Option<KfdError>,
    /// Physical handles, reservations and mappings (`vmem`).
    vmem: vmem::VmemState,
}

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
