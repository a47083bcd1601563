//! # aqueduct-kfd-emu
//!
//! An emulated AMD GPU at the amdkfd boundary. A process talks to it exactly as it would talk
//! to `/dev/kfd`, a DRM render node and sysfs — `open`, `ioctl` by request number with the real
//! argument structs, `mmap`/`munmap` of the offsets the driver hands out, reads of the topology
//! tree — through [`Emu`], which the kfd-direct backend calls instead of the real syscalls. Behind
//! it runs a command processor per GPU that consumes the real AQL ring layout.
//!
//! Specification: `shared/reference/kfd-aql.md` (cited below as §n).
//!
//! ## Layers
//!
//! - [`abi`]: the ioctl ABI (§1.1, §1.3): request numbers, `repr(C)` argument structs with
//!   `const` layout checks, flags, mmap-offset encoding (§1.4, §2), and `amd_queue_t` /
//!   `hsa_queue_t` / CWSR header (§4.2, §4.3, §1.5). Packets and `amd_signal_t` come from core.
//! - [`Emu`] (`emu`): the driver model. It validates every ioctl the way amdkfd does, with its
//!   errnos (§1, §1.5, §1.6, §7, §9): fd ownership (a forked child gets `EBADF`), argument
//!   size negotiation (shorter structs are zero-extended), VM acquisition, the buffer table,
//!   queue-buffer checks (exact, GPU-mapped BOs; `amd_queue_t` indices at +56/+128; EOP 4096;
//!   ctl-stack and CWSR sizes from the topology), priorities, CU masks, events.
//! - [`topology`]: the sysfs tree (§5) for gfx90a, gfx942 and gfx1100 GPUs and the queue sizes
//!   derived from it (§1.5).
//! - `memory`: device memory is host memory (a `memfd` pool); BOs are CPU-mapped at the user's
//!   VA by real `mmap`, so GPU VA == CPU VA; the device side translates every VA through the
//!   buffer table, so an unmapped access is a GPU memory fault ([`MemView`]).
//! - `events`: the event page, mailbox slots, signal/memory/hardware-exception events and
//!   `WAIT_EVENTS` (§1.6).
//! - `cp`: one command-processor thread per GPU (§3.4, §4.1). It runs core's single
//!   packet-processing step, [`aqueduct::aql::step`] (DESIGN.md rule 3), over an
//!   [`aqueduct::aql::AqlRing`] built on the queue's ring BO with the write index at
//!   `amd_queue_t + 56`; its executor implements fences, atomic signal decrements, mailboxes,
//!   timestamps, in-order retirement into `read_dispatch_id` (+128), queue errors (§7), and the
//!   adversarial out-of-order mode.
//! - `sdma`: the SDMA v4 engine (rocr-on-emu.md §4.5): user-mode SDMA queues with byte-offset
//!   rings, served by the same per-GPU thread after the AQL queues; linear and rectangular
//!   copies, fills, fences, traps, memory polls, 64-bit atomics and timestamps.
//! - [`kernels`]: host twins (DESIGN.md rule 6), the built-in copy/fill/write-value twins, and
//!   [`codeobj`]: AMDHSA code-object parsing (§6).
//!
//! ## Memory ordering
//!
//! The producer publishes packets with core's protocol (body, Release header store, Release fence,
//! doorbell store). The CP loads the doorbell with Acquire, reads headers with Acquire (inside
//! the step), applies an Acquire fence for packets with an acquire scope and a Release fence
//! before completing a signal with an AcqRel decrement, then stores the mailbox with Release and
//! advances `read_dispatch_id` with Release. Every `// Ordering:` comment names its pair.

pub mod abi;
pub mod codeobj;
mod cp;
pub mod dialect;
pub mod drm;
mod emu;
mod errno;
mod events;
pub mod floor;
pub mod kernels;
mod memory;
pub mod metadata;
pub mod naming;
mod sdma;
pub mod topology;

pub use cp::GPU_CLOCK_HZ;
pub use emu::{Emu, EmuConfig, EmuStats, Fd, QueueState, FIRST_FD};
pub use errno::{Errno, SysResult};
pub use events::SLOT_UNSIGNALED;
pub use kernels::{KernelArg, KernelCtx, Twin, TwinFn};
pub use memory::{KernelError, MemView, DRM_MMAP_BASE, GPUVM_BASE, GPUVM_LIMIT};
pub use topology::{GpuNode, GpuProfile};
