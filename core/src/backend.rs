//! The Backend trait: the hardware abstraction every execution layer implements.
//!
//! A backend provides hardware queues (ring memory, read/write indices, a doorbell), signals,
//! memory, the built-in copy/fill kernels, a host-function service, waits with timeouts and a
//! clock. It knows nothing of streams, events or capture (docs/architecture.md rule 4): core turns
//! every stream operation into AQL packets and publishes them with [`crate::aql::AqlRing`].

use core::ffi::c_void;
use core::ptr::NonNull;

use crate::aql::{AqlRing, Condition};
use crate::error::{Error, Result};
use crate::signal::SignalHandle;
use crate::stream::{CuMask, Priority};

/// Facts about one device that core needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DeviceInfo {
    /// Number of compute units (bounds CU masks).
    pub cu_count: u32,
    /// `gfx_target_version`, e.g. 90010 for gfx90a.
    pub gfx_target_version: u32,
    /// Frequency of the timestamps written into signals, in Hz.
    pub timestamp_frequency: u64,
}

/// Where core writes packets and kernel arguments for one hardware queue.
#[derive(Debug, Clone, Copy)]
pub struct QueueDesc {
    /// The ring and its indices.
    pub ring: AqlRing,
    /// Host view of the kernel-argument area: one [`QueueDesc::kernarg_slot_bytes`] slot per ring
    /// slot, so a packet's arguments live exactly as long as its ring slot.
    pub kernarg_host: NonNull<u8>,
    /// Device address of the same area.
    pub kernarg_device: u64,
    /// Bytes per kernel-argument slot (a multiple of 16).
    pub kernarg_slot_bytes: u32,
    /// Slots the kernel-argument area extends past the ring's last one. A dispatch whose
    /// arguments take `k` slots reserves `k` ring slots (the dispatch and `k - 1` no-op
    /// barriers) and its arguments span their slots, running into this overhang at the ring's
    /// end; so arguments up to `(1 + kernarg_overhang_slots) * kernarg_slot_bytes` bytes fit.
    pub kernarg_overhang_slots: u32,
}

// SAFETY: a QueueDesc only describes backend memory (the Backend contract keeps it valid while
// the queue lives); every access through it follows the AQL protocol, from any thread.
unsafe impl Send for QueueDesc {}
// SAFETY: as above; shared access is through atomics and reserved slots only.
unsafe impl Sync for QueueDesc {}

/// A wait bound in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Timeout(pub u64);

impl Timeout {
    /// Do not wait: test the condition once.
    pub const ZERO: Timeout = Timeout(0);
    /// Wait until the condition holds.
    pub const NEVER: Timeout = Timeout(u64::MAX);
    /// One second.
    pub const SECOND: Timeout = Timeout(1_000_000_000);
}

/// A host function enqueued on a stream (`hipLaunchHostFunc` / `hipStreamAddCallback`).
#[derive(Debug, Clone, Copy)]
pub enum HostFn {
    /// `void fn(void* user_data)`.
    Plain {
        /// The function.
        func: unsafe extern "C" fn(*mut c_void),
        /// Its argument.
        data: *mut c_void,
    },
    /// `void fn(hipStream_t stream, hipError_t status, void* user_data)`.
    StreamCallback {
        /// The function.
        func: unsafe extern "C" fn(u64, i32, *mut c_void),
        /// The stream handle passed back.
        stream: u64,
        /// Its argument.
        data: *mut c_void,
    },
}

// SAFETY: a host function and its argument are handed to another thread by contract, exactly
// as HIP hands them to its callback thread; the caller of the enqueue API vouches for them.
unsafe impl Send for HostFn {}

impl HostFn {
    /// Calls the function.
    ///
    /// # Safety
    /// The function and its data must still be valid, as the enqueuing caller promised.
    pub unsafe fn call(&self) {
        match *self {
            // SAFETY: forwarded caller guarantee.
            HostFn::Plain { func, data } => unsafe { func(data) },
            // SAFETY: forwarded caller guarantee.
            HostFn::StreamCallback { func, stream, data } => unsafe { func(stream, 0, data) },
        }
    }
}

/// The built-in kernels every backend provides (blit kernels on hardware, host twins on the
/// loopback and the emulator). Their kernel-argument layouts are fixed here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum BuiltinKernel {
    /// Byte copy; kernarg [`CopyArgs`].
    Copy,
    /// Fill with a repeated 1-, 2- or 4-byte pattern; kernarg [`FillArgs`].
    Fill,
    /// Store a 32- or 64-bit value; kernarg [`WriteValueArgs`].
    WriteValue,
    /// The conditional-node scheduler; kernarg
    /// [`SchedulerArgs`](crate::conditional::SchedulerArgs) (see [`crate::conditional`]).
    GraphScheduler,
}

/// Kernel arguments of [`BuiltinKernel::Copy`].
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyArgs {
    /// Destination address.
    pub dst: u64,
    /// Source address.
    pub src: u64,
    /// Byte count.
    pub bytes: u64,
}

/// Kernel arguments of [`BuiltinKernel::Fill`].
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FillArgs {
    /// Destination address.
    pub dst: u64,
    /// Number of elements.
    pub count: u64,
    /// The pattern (low `element_bytes` bytes are used).
    pub value: u32,
    /// 1, 2 or 4.
    pub element_bytes: u32,
}

/// Kernel arguments of [`BuiltinKernel::WriteValue`].
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteValueArgs {
    /// Destination address.
    pub dst: u64,
    /// The value (the low 32 bits for a 32-bit store).
    pub value: u64,
    /// 4 or 8.
    pub width: u32,
    /// Reserved, 0.
    pub reserved: u32,
}

/// A kernel of a loaded code object, as a launch needs it (docs/code-objects.md §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct KernelSymbol {
    /// The kernel object a dispatch packet carries (the descriptor's device address).
    pub kernel_object: u64,
    /// Static LDS bytes per work-group (dynamic LDS comes on top, per launch).
    pub group_segment_size: u32,
    /// Static scratch bytes per work-item.
    pub private_segment_size: u32,
    /// Kernel-argument bytes (explicit and hidden).
    pub kernarg_size: u32,
    /// Kernel-argument alignment (at least 16).
    pub kernarg_align: u32,
    /// The kernel needs a dynamic stack: the launch adds the stack-size limit to its private
    /// segment.
    pub dynamic_stack: bool,
}

/// A device variable of a loaded code object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct VariableSymbol {
    /// Its device address.
    pub address: u64,
    /// Its size in bytes.
    pub size: u64,
}

/// Kind of memory to allocate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum MemoryKind {
    /// Device memory (VRAM where the device has it).
    Device,
    /// Host memory the device can reach (GTT, pinned).
    Host,
}

/// The size and alignment unit of virtual memory management ([`Backend::vmem_create`],
/// [`Backend::vmem_reserve`]): 2 MiB, the allocation granule ROCr reports for a dGPU's VRAM
/// pool and the GPU's large-page size (docs/architecture.md §2, "Virtual memory").
pub const VMEM_GRANULARITY: usize = 2 << 20;

/// A hardware layer under core.
///
/// # Safety
/// Core dereferences what a backend hands out, so an implementation must guarantee:
/// - a [`SignalHandle`] from [`signal_create`](Backend::signal_create) is the address of a live,
///   64-byte aligned [`AmdSignal`](crate::signal::AmdSignal) in host-visible memory until it is
///   passed to [`signal_destroy`](Backend::signal_destroy);
/// - the [`QueueDesc`] of a queue describes memory that stays valid, and is consumed as
///   [`crate::aql`] documents, until [`queue_destroy`](Backend::queue_destroy);
/// - every packet published into a queue and announced with
///   [`ring_doorbell`](Backend::ring_doorbell) is eventually processed or reported through
///   [`queue_fault`](Backend::queue_fault).
pub unsafe trait Backend {
    /// A hardware queue.
    type Queue;
    /// A code object loaded onto a device (docs/code-objects.md §8): what the backend keeps
    /// to find its symbols and to free it.
    type Module: Send;

    /// Number of devices (0 means `NoDevice` for every call that needs one).
    fn device_count(&self) -> u32;
    /// Facts about `device`.
    fn device_info(&self, device: u32) -> Result<DeviceInfo>;

    /// Creates a queue on `device` with a priority and an optional CU mask.
    fn queue_create(&self, device: u32, priority: Priority, cu_mask: Option<&CuMask>) -> Result<Self::Queue>;
    /// Where to write packets for `queue`.
    fn queue_desc(&self, queue: &Self::Queue) -> Result<QueueDesc>;
    /// Rings the doorbell: packets up to `index` (the last one written) are published.
    fn ring_doorbell(&self, queue: &Self::Queue, index: u64);
    /// The error that stopped the queue, if it stopped.
    fn queue_fault(&self, queue: &Self::Queue) -> Option<Error>;
    /// Destroys a queue whose packets have all completed.
    fn queue_destroy(&self, queue: Self::Queue);

    /// Creates a signal with an initial value.
    fn signal_create(&self, initial: i64) -> Result<SignalHandle>;
    /// Returns a signal no packet will use again.
    fn signal_destroy(&self, signal: SignalHandle);
    /// Waits until `cond` holds for the signal's value against `expected`, or the timeout ends
    /// (`NotReady`). Returns the value that satisfied the condition.
    fn signal_wait(&self, signal: SignalHandle, cond: Condition, expected: i64, timeout: Timeout) -> Result<i64>;

    /// Allocates memory; returns its device address (also its host address where the backend
    /// maps device memory into the host, as the loopback and the emulator do).
    fn memory_alloc(&self, device: u32, bytes: usize, kind: MemoryKind) -> Result<u64>;
    /// Frees memory from [`memory_alloc`](Backend::memory_alloc); unknown addresses → `InvalidValue`.
    fn memory_free(&self, address: u64) -> Result<()>;

    /// Registers `bytes` of the host's own memory at `host` (pageable memory: `malloc`, the
    /// stack, a mapped file) for device access on every device, and returns the device address
    /// of `host` (docs/architecture.md §2, "Registered host memory"). The registration covers the
    /// pages that hold the range. The device address need not equal `host` (on amdkfd it is a
    /// new GPU VA over the same pages); the host keeps using `host`. Zero bytes or a NULL
    /// `host` → `InvalidValue`; memory the host cannot reach (unmapped, not writable) →
    /// `InvalidValue`; a backend whose devices cannot reach host memory → `NotSupported`.
    fn host_register(&self, device: u32, host: u64, bytes: usize) -> Result<u64>;
    /// Ends a registration, given the device address [`host_register`](Backend::host_register)
    /// returned; the caller has waited for every device access to it. Unknown addresses →
    /// `InvalidValue`.
    fn host_unregister(&self, device_address: u64) -> Result<()>;

    /// Virtual memory management (docs/architecture.md §2, "Virtual memory"): creates
    /// *physical memory* of `bytes` on `device` — a multiple of [`VMEM_GRANULARITY`], else
    /// `InvalidValue` — that has no address until it is mapped, and returns its handle (never
    /// 0). A backend without virtual memory management keeps the defaults of every `vmem_*`
    /// method: `NotSupported`.
    fn vmem_create(&self, _device: u32, _bytes: usize) -> Result<u64> {
        Err(Error::NotSupported)
    }
    /// Releases a handle of [`vmem_create`](Backend::vmem_create); its mappings keep the memory
    /// until they are unmapped. Unknown handles → `InvalidValue`.
    fn vmem_release(&self, _handle: u64) -> Result<()> {
        Err(Error::NotSupported)
    }
    /// Reserves `bytes` (a multiple of [`VMEM_GRANULARITY`]) of device address space, aligned
    /// to `alignment` (0 or a power of two; at least the granularity), at `hint` if that range is
    /// free and suitably aligned (else anywhere); returns its start. Nothing is accessible there
    /// until memory is mapped and access granted.
    fn vmem_reserve(&self, _bytes: usize, _alignment: usize, _hint: u64) -> Result<u64> {
        Err(Error::NotSupported)
    }
    /// Frees the reservation starting at `address`. Unknown addresses, or a reservation with
    /// live mappings → `InvalidValue`.
    fn vmem_free(&self, _address: u64) -> Result<()> {
        Err(Error::NotSupported)
    }
    /// Maps all of the physical memory `handle` at `address`, inside one reservation and over
    /// no other mapping (`InvalidValue` otherwise). The same handle may be mapped at several
    /// addresses: each sees the same bytes. No device may access it yet
    /// ([`vmem_set_access`](Backend::vmem_set_access)).
    fn vmem_map(&self, _address: u64, _handle: u64) -> Result<()> {
        Err(Error::NotSupported)
    }
    /// Removes the mapping starting at `address` (every device's access with it); the caller has
    /// waited for every device access to it. Unknown addresses → `InvalidValue`.
    fn vmem_unmap(&self, _address: u64) -> Result<()> {
        Err(Error::NotSupported)
    }
    /// Grants (`access`) or revokes read-write access of `device` to the mapping starting at
    /// `address`. Unknown addresses → `InvalidValue`.
    fn vmem_set_access(&self, _address: u64, _device: u32, _access: bool) -> Result<()> {
        Err(Error::NotSupported)
    }

    /// The kernel object of a built-in kernel on `device`.
    fn builtin_kernel(&self, device: u32, kernel: BuiltinKernel) -> Result<u64>;
    /// The doorbell of `queue` as a device-side producer (the conditional-node scheduler) rings
    /// it; `None` (the default) where the device cannot, and conditional nodes are then
    /// `NotSupported`.
    fn device_doorbell(&self, _queue: &Self::Queue) -> Option<crate::conditional::DeviceDoorbell> {
        None
    }

    /// Loads an AMDHSA code object onto `device`: `InvalidImage` for bytes that are not one,
    /// `NoBinaryForGpu` for one built for another target, `OutOfMemory` when its image does not
    /// fit, `NotSupported` where the backend runs no code objects.
    fn module_load(&self, device: u32, code_object: &[u8]) -> Result<Self::Module>;
    /// The kernel `name` (without `.kd`) of a loaded code object; `NotFound` if it has none.
    fn module_kernel(&self, module: &Self::Module, name: &str) -> Result<KernelSymbol>;
    /// The device variable `name`; `InvalidSymbol` if the code object has none.
    fn module_variable(&self, module: &Self::Module, name: &str) -> Result<VariableSymbol>;
    /// Where the loaded image lies in device memory (address, bytes), where the backend knows.
    fn module_image(&self, module: &Self::Module) -> Option<(u64, u64)>;
    /// Unloads a code object none of whose dispatches is pending.
    fn module_unload(&self, module: Self::Module) -> Result<()>;
    /// Makes every queue of `device`, and those created later, hold `bytes_per_work_item` of
    /// private segment (scratch) for every wave the device runs at once, growing it if needed
    /// (docs/code-objects.md §9). Called before any dispatch that needs it is published. The
    /// default, for backends whose device or runtime manages scratch itself, does nothing.
    fn reserve_scratch(&self, _device: u32, _bytes_per_work_item: u32) -> Result<()> {
        Ok(())
    }

    /// Arranges for `f` to run on the host once `start` reaches 0, after which `done` is set to 0.
    fn host_call(&self, start: SignalHandle, done: SignalHandle, f: HostFn) -> Result<()>;

    /// The current device timestamp (same clock as signal timestamps).
    fn timestamp(&self) -> u64;
}

/// Kernel arguments of a built-in kernel, laid out as the kernel reads them (little-endian
/// `repr(C)` fields, no padding).
pub trait BuiltinArgs: Copy {
    /// The built-in kernel that reads these arguments.
    const KERNEL: BuiltinKernel;

    /// The bytes and how many of them there are.
    fn to_bytes(&self) -> ([u8; 32], usize);
}

/// Writes little-endian words into a 32-byte buffer; returns the length.
fn le_words(words: &[&[u8]]) -> ([u8; 32], usize) {
    let mut out = [0u8; 32];
    let mut n = 0;
    for w in words {
        if let Some(dst) = out.get_mut(n..n + w.len()) {
            dst.copy_from_slice(w);
        }
        n += w.len();
    }
    (out, n)
}

impl BuiltinArgs for CopyArgs {
    const KERNEL: BuiltinKernel = BuiltinKernel::Copy;

    fn to_bytes(&self) -> ([u8; 32], usize) {
        le_words(&[&self.dst.to_le_bytes(), &self.src.to_le_bytes(), &self.bytes.to_le_bytes()])
    }
}

impl BuiltinArgs for FillArgs {
    const KERNEL: BuiltinKernel = BuiltinKernel::Fill;

    fn to_bytes(&self) -> ([u8; 32], usize) {
        le_words(&[
            &self.dst.to_le_bytes(),
            &self.count.to_le_bytes(),
            &self.value.to_le_bytes(),
            &self.element_bytes.to_le_bytes(),
        ])
    }
}

impl BuiltinArgs for WriteValueArgs {
    const KERNEL: BuiltinKernel = BuiltinKernel::WriteValue;

    fn to_bytes(&self) -> ([u8; 32], usize) {
        le_words(&[
            &self.dst.to_le_bytes(),
            &self.value.to_le_bytes(),
            &self.width.to_le_bytes(),
            &self.reserved.to_le_bytes(),
        ])
    }
}
