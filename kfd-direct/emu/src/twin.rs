//! The Rust twin API (docs/architecture.md rule 6; docs/kfd-aql.md §9 "kernels"): a kernel on the
//! emulator is a host function run once per work-group, bound to a kernel object.
//!
//! A twin receives the dispatch geometry, its work-group id, the kernel-argument bytes and a
//! [`MemView`] of device memory. A twin bound to a kernel of a code object also gets the
//! arguments' layout from the object's metadata ([`KernelCtx::arg`] and friends read arguments
//! by position, [`KernelCtx::hidden_arg`] by hidden kind). Twins of one dispatch run on several
//! compute-unit workers at once, and twins of different dispatches too: a twin must be `Sync`
//! and must not assume its work-groups run in order.

use std::sync::Arc;

use aqueduct::aql::KernelDispatchPacket;

use crate::memory::{KernelError, MemView};

/// One kernel argument as the code object's metadata lays it out (docs/code-objects.md §6),
/// explicit or hidden.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelArg {
    /// Byte offset in the kernel-argument segment.
    pub offset: u32,
    /// Bytes.
    pub size: u32,
    /// `.value_kind` (`by_value`, `global_buffer`, `hidden_global_offset_x`, …).
    pub value_kind: String,
    /// `.name`, when the compiler kept it.
    pub name: Option<String>,
}

impl KernelArg {
    /// Whether the runtime, not the caller, supplies this argument.
    pub fn is_hidden(&self) -> bool {
        self.value_kind.starts_with("hidden_")
    }
}

impl From<amdhsa::Arg<'_>> for KernelArg {
    fn from(a: amdhsa::Arg<'_>) -> KernelArg {
        KernelArg {
            offset: a.offset,
            size: a.size,
            value_kind: a.value_kind.to_owned(),
            name: a.name.map(str::to_owned),
        }
    }
}

/// What a code object's metadata says of one kernel, kept with the twin bound to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Kernel-argument bytes.
    pub(crate) kernarg_size: u32,
    /// The arguments, explicit then hidden.
    pub(crate) args: Vec<KernelArg>,
}

impl Layout {
    pub(crate) fn of(k: &amdhsa::KernelMeta<'_>) -> Layout {
        Layout { kernarg_size: k.kernarg_segment_size, args: k.args().map(KernelArg::from).collect() }
    }
}

/// What one work-group of a twin sees.
pub struct KernelCtx<'a> {
    /// The dispatch packet.
    pub packet: KernelDispatchPacket,
    /// Grid size in work-items (unused dimensions 1).
    pub grid: [u32; 3],
    /// Work-group size in work-items.
    pub workgroup_size: [u32; 3],
    /// Work-groups per dimension (`ceil(grid / workgroup_size)`).
    pub workgroup_count: [u32; 3],
    /// The kernel-argument bytes (the twin's declared size, or the metadata's
    /// `.kernarg_segment_size`, read at dispatch).
    pub kernarg: &'a [u8],
    /// The arguments' layout from the code object's metadata, in declaration order (explicit,
    /// then hidden); empty when the kernel was not named from a code object with metadata.
    pub args: &'a [KernelArg],
    /// Device memory.
    pub mem: &'a MemView<'a>,
    /// GPU VA of the dispatch packet (what a kernel's dispatch ptr holds).
    pub packet_address: u64,
    /// GPU VA of the queue's `amd_queue_t` (what a kernel's queue ptr holds).
    pub queue_address: u64,
    /// The packet's index in its queue (the dispatch id).
    pub dispatch_id: u64,
    /// The compute-unit worker running this work-group (`0..` the device's worker count; see
    /// [`crate::EmuConfig::cus`] for how a queue's CU mask maps onto workers).
    pub worker: u32,
    /// The device's clocks (`s_memtime`, `s_memrealtime` of machine-code kernels).
    pub(crate) clock: &'a crate::hw::Clock,
    /// The queue's process events (`s_sendmsg(MSG_INTERRUPT)` of machine-code kernels).
    pub(crate) events: &'a crate::events::Events,
}

impl KernelCtx<'_> {
    /// A little-endian u64 argument at byte offset `off` (0 if out of range).
    pub fn arg_u64(&self, off: usize) -> u64 {
        self.kernarg.get(off..off + 8).map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
    }

    /// A little-endian u32 argument at byte offset `off` (0 if out of range).
    pub fn arg_u32(&self, off: usize) -> u32 {
        self.kernarg.get(off..off + 4).map_or(0, |b| u32::from_le_bytes(b.try_into().unwrap_or_default()))
    }

    /// The bytes of argument `i` (by position, from the metadata), if it exists and lies
    /// inside the kernel-argument bytes.
    pub fn arg_bytes(&self, i: usize) -> Option<&[u8]> {
        let a = self.args.get(i)?;
        self.kernarg.get(a.offset as usize..a.offset as usize + a.size as usize)
    }

    /// Argument `i` (by position, from the metadata) as a little-endian integer of its size,
    /// zero-extended (a `char` reads one byte, a pointer eight); 0 if it does not exist.
    pub fn arg(&self, i: usize) -> u64 {
        self.arg_bytes(i).map_or(0, |b| b.iter().take(8).rev().fold(0, |acc, &x| (acc << 8) | u64::from(x)))
    }

    /// Argument `i` sign-extended from its size (for `char`, `short`, `int` arguments).
    pub fn arg_signed(&self, i: usize) -> i64 {
        let size = self.args.get(i).map_or(8, |a| a.size.clamp(1, 8));
        let shift = 64 - 8 * size;
        ((self.arg(i) << shift) as i64) >> shift
    }

    /// The hidden argument of `.value_kind` `kind` (e.g. `hidden_global_offset_x`), if the
    /// kernel has one.
    pub fn hidden_arg(&self, kind: &str) -> Option<u64> {
        let i = self.args.iter().position(|a| a.value_kind == kind)?;
        self.arg_bytes(i).map(|_| self.arg(i))
    }

    /// The range of global work-item ids (x) covered by work-group `wg` (the last one may be
    /// partial).
    pub fn items_x(&self, wg: [u32; 3]) -> std::ops::Range<u32> {
        let lo = wg[0] * self.workgroup_size[0];
        lo..(lo + self.workgroup_size[0]).min(self.grid[0])
    }
}

/// The function type of a twin: runs one work-group.
pub type TwinFn = dyn Fn(&KernelCtx<'_>, [u32; 3]) -> Result<(), KernelError> + Send + Sync;

/// A kernel's host twin.
#[derive(Clone)]
pub struct Twin {
    /// Name (the symbol without `.kd`).
    pub name: Arc<str>,
    /// Kernel-argument bytes read at dispatch.
    pub kernarg_size: u32,
    /// The function.
    pub f: Arc<TwinFn>,
    /// Argument layout from the code object's metadata (set when the emulator binds the twin
    /// to a kernel it named in a code object; empty otherwise).
    pub args: Arc<[KernelArg]>,
    /// Whether the function runs the kernel's own machine code (docs/executor.md) rather than
    /// a host implementation of it.
    pub machine_code: bool,
}

impl std::fmt::Debug for Twin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Twin")
            .field("name", &self.name)
            .field("kernarg_size", &self.kernarg_size)
            .field("machine_code", &self.machine_code)
            .finish()
    }
}

impl Twin {
    /// A twin from a closure.
    pub fn new(
        name: &str,
        kernarg_size: u32,
        f: impl Fn(&KernelCtx<'_>, [u32; 3]) -> Result<(), KernelError> + Send + Sync + 'static,
    ) -> Twin {
        Twin { name: Arc::from(name), kernarg_size, f: Arc::new(f), args: Arc::from([]), machine_code: false }
    }
}
