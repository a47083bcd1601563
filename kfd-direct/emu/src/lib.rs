//! # aqueduct-kfd-emu
//!
//! An emulated AMD GPU at the amdkfd boundary. A process talks to it exactly as it would talk
//! to `/dev/kfd`, a DRM render node and sysfs — `open`, `ioctl` by request number with the real
//! argument structs, `mmap`/`munmap` of the offsets the driver hands out, reads of the topology
//! tree — through [`Emu`], which the kfd-direct backend calls instead of the real syscalls. Behind
//! it each GPU runs a packet processor over the real AQL ring layout and compute-unit workers
//! that execute work-groups of many dispatches at once.
//!
//! Specification: `docs/kfd-aql.md` (cited below by section).
//!
//! ## Layers (each module imports only the ones above it)
//!
//! - [`abi`]: the ioctl ABI: request numbers, `repr(C)` argument structs with `const` layout
//!   checks, flags, mmap-offset encoding, and `amd_queue_t` / `hsa_queue_t` / CWSR header.
//!   Packets and `amd_signal_t` come from core (layouts only).
//! - `hw`: the GPU clock, queue status words, the adversarial generator.
//! - [`topology`]: the sysfs tree for gfx90a, gfx942 and gfx1100 GPUs and the queue sizes
//!   derived from it. [`drm`]: the render node's ioctls.
//! - `memory`: device memory is host memory (a `memfd` pool); BOs are CPU-mapped at the user's
//!   VA by real `mmap`, so GPU VA == CPU VA; engines translate through immutable snapshots of the
//!   buffer table, so an unmapped access is a GPU memory fault ([`MemView`], [`DeviceSlice`]).
//! - `events`: the event page, mailbox slots, signal/memory/hardware-exception events and
//!   `WAIT_EVENTS`.
//! - Kernels: [`twin`] (the Rust twin API), [`builtin`] (aqueduct's, ROCr's and ROCclr's blit
//!   kernels), [`naming`] (naming a dispatched kernel object from the image in device memory),
//!   [`c_abi`] (C twins, `AQUEDUCT_TWINS`), `registry` (which twin runs for a kernel object);
//!   code objects and their metadata are read with `amdhsa` (docs/code-objects.md); [`isa`]
//!   runs a code-object kernel without a twin as its own gfx90a (or, on gfx942, gfx940) machine code
//!   (`aqueduct-isa`'s executor, docs/executor.md).
//! - `aql_queue`: an AQL queue as the device sees it, its completion and in-order retirement.
//!   `sdma`: the SDMA v4 engine and its queues. `device`: one GPU's queues and failure reports.
//! - `packet_processor`: the AQL rules (barrier bit, barrier-AND/OR, barrier-value, fences,
//!   INVALID stalls, queue errors, adversarial mode) — an implementation of its own, sharing
//!   only the packet layouts with core, so core's packets are checked by an independent reader.
//! - `scheduler`: the work-group scheduler (priorities, CU masks → workers) and the threads of a
//!   device, among which the packet-processor role floats.
//! - [`Emu`] (`driver`): the ioctl front end. It validates every ioctl the way amdkfd does, with
//!   its errnos: fd ownership (a forked child gets `EBADF`), argument size negotiation, VM
//!   acquisition, the buffer table, queue-buffer checks, priorities, CU masks, events; plus fault
//!   injection and observation for tests.
//!
//! ## Memory ordering
//!
//! The producer publishes packets with core's protocol (body, Release header store, fence,
//! doorbell store). The packet processor loads the doorbell with Acquire and each header with
//! Acquire, applies an Acquire fence for packets with an acquire scope, and hands a dispatch to
//! the workers through the scheduler's lock. The last work-group's AcqRel decrement of the
//! dispatch's counter orders every work-group before the completion, which applies the Release
//! fence of a release scope, decrements the signal with AcqRel, stores the mailbox with Release
//! and advances `read_dispatch_id` with Release. Every `// Ordering:` comment names its pair.

pub mod abi;
mod aql_queue;
pub mod builtin;
pub mod c_abi;
mod check;
mod device;
mod driver;
pub mod drm;
mod errno;
mod events;
pub mod floor;
mod hw;
pub mod isa;
pub mod kernels;
mod memory;
pub mod naming;
mod packet_processor;
mod registry;
mod scheduler;
mod sdma;
pub mod topology;
mod tsan;
pub mod twin;

pub use driver::{default_cus, dialect, Emu, EmuConfig, EmuStats, Fd, QueueState, FIRST_FD};
pub use errno::{Errno, SysResult};
pub use events::SLOT_UNSIGNALED;
pub use hw::GPU_CLOCK_HZ;
pub use isa::KernelMode;
pub use memory::{DeviceSlice, KernelError, MemView, Scalar, DRM_MMAP_BASE, GPUVM_BASE, GPUVM_LIMIT};
pub use scheduler::{DEEP_NAP_US, MAX_NAP_US};
pub use topology::{GpuNode, GpuProfile};
pub use twin::{KernelArg, KernelCtx, Twin, TwinFn};
