//! The amdkfd user ABI: ioctl request numbers, argument structs, flags, mmap-offset encoding, and
//! the queue-side structures the command processor reads (`amd_queue_t`, `hsa_queue_t`, the CWSR
//! header).
//!
//! Layouts follow `linux/kfd_ioctl.h` (KFD ABI 1.17; docs/kfd-aql.md §1.3) and ROCr's
//! `amd_hsa_queue.h` / `hsa.h` (§4.2, §4.3). Every struct is `repr(C)` with `const` size and
//! offset assertions here; the emulator's test suite additionally compares them with the system
//! headers (`kfd-direct/emu/tests/layout.rs`). Packets and `amd_signal_t` are not repeated here:
//! they live in core (`aqueduct::aql`, `aqueduct::AmdSignal`).
//!
//! It also holds [`Errno`], the error number both sides speak, and [`Ioctl`], which ties each
//! request number to its argument struct.
//!
//! The crate is `#![no_std]` without dependencies (`defmt` is optional): the kfd-direct backend (`aqueduct-kfd`) and its
//! emulator (`aqueduct-kfd-emu`) both build on it, so the emulator never links the backend it
//! emulates for (docs/architecture.md).

#![no_std]

use core::mem::{offset_of, size_of};

mod errno;

pub use errno::Errno;

/// `AMDKFD_IOCTL_BASE`, the ioctl type byte `'K'`.
pub const AMDKFD_IOCTL_BASE: u32 = 0x4B;

const IOC_WRITE: u32 = 1;
const IOC_READ: u32 = 2;

/// Builds an ioctl request number as Linux `_IOC(dir, 'K', nr, size)` does.
pub const fn ioc(dir: u32, nr: u32, size: usize) -> u64 {
    ((dir << 30) | ((size as u32) << 16) | (AMDKFD_IOCTL_BASE << 8) | nr) as u64
}

/// Decoded parts of a request number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Command number (bits 7:0).
    pub nr: u32,
    /// Type byte (bits 15:8).
    pub ty: u32,
    /// Argument size in bytes (bits 29:16).
    pub size: usize,
    /// Direction bits (bit 0 write = to the kernel, bit 1 read = from the kernel).
    pub dir: u32,
}

impl Request {
    /// Splits a request number.
    pub const fn decode(request: u64) -> Request {
        let r = request as u32;
        Request { nr: r & 0xff, ty: (r >> 8) & 0xff, size: ((r >> 16) & 0x3fff) as usize, dir: r >> 30 }
    }

    /// Whether the kernel copies the argument in.
    pub const fn is_in(self) -> bool {
        self.dir & IOC_WRITE != 0
    }

    /// Whether the kernel copies the argument back out.
    pub const fn is_out(self) -> bool {
        self.dir & IOC_READ != 0
    }
}

/// Command numbers (`nr`) of the ioctls the emulator implements.
pub mod nr {
    /// `AMDKFD_IOC_GET_VERSION`.
    pub const GET_VERSION: u32 = 0x01;
    /// `AMDKFD_IOC_CREATE_QUEUE`.
    pub const CREATE_QUEUE: u32 = 0x02;
    /// `AMDKFD_IOC_DESTROY_QUEUE`.
    pub const DESTROY_QUEUE: u32 = 0x03;
    /// `AMDKFD_IOC_GET_CLOCK_COUNTERS`.
    pub const GET_CLOCK_COUNTERS: u32 = 0x05;
    /// `AMDKFD_IOC_UPDATE_QUEUE`.
    pub const UPDATE_QUEUE: u32 = 0x07;
    /// `AMDKFD_IOC_CREATE_EVENT`.
    pub const CREATE_EVENT: u32 = 0x08;
    /// `AMDKFD_IOC_DESTROY_EVENT`.
    pub const DESTROY_EVENT: u32 = 0x09;
    /// `AMDKFD_IOC_SET_EVENT`.
    pub const SET_EVENT: u32 = 0x0A;
    /// `AMDKFD_IOC_RESET_EVENT`.
    pub const RESET_EVENT: u32 = 0x0B;
    /// `AMDKFD_IOC_WAIT_EVENTS`.
    pub const WAIT_EVENTS: u32 = 0x0C;
    /// `AMDKFD_IOC_GET_PROCESS_APERTURES_NEW`.
    pub const GET_PROCESS_APERTURES_NEW: u32 = 0x14;
    /// `AMDKFD_IOC_ACQUIRE_VM`.
    pub const ACQUIRE_VM: u32 = 0x15;
    /// `AMDKFD_IOC_ALLOC_MEMORY_OF_GPU`.
    pub const ALLOC_MEMORY_OF_GPU: u32 = 0x16;
    /// `AMDKFD_IOC_FREE_MEMORY_OF_GPU`.
    pub const FREE_MEMORY_OF_GPU: u32 = 0x17;
    /// `AMDKFD_IOC_MAP_MEMORY_TO_GPU`.
    pub const MAP_MEMORY_TO_GPU: u32 = 0x18;
    /// `AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU`.
    pub const UNMAP_MEMORY_FROM_GPU: u32 = 0x19;
    /// `AMDKFD_IOC_SET_CU_MASK`.
    pub const SET_CU_MASK: u32 = 0x1A;
    /// `AMDKFD_IOC_GET_DMABUF_INFO`.
    pub const GET_DMABUF_INFO: u32 = 0x1C;
    /// `AMDKFD_IOC_IMPORT_DMABUF`.
    pub const IMPORT_DMABUF: u32 = 0x1D;
    /// `AMDKFD_IOC_EXPORT_DMABUF` (ABI 1.12).
    pub const EXPORT_DMABUF: u32 = 0x24;
}

/// `kfd_ioctl_get_version_args`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GetVersionArgs {
    /// Out: major version (1).
    pub major_version: u32,
    /// Out: minor version.
    pub minor_version: u32,
}

/// `kfd_ioctl_create_queue_args` (1.17 size, 96 bytes; ≤ 1.16 callers pass 88).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CreateQueueArgs {
    /// In: ring VA.
    pub ring_base_address: u64,
    /// In: write pointer VA (`&amd_queue.write_dispatch_id` for AQL).
    pub write_pointer_address: u64,
    /// In: read pointer VA (`&amd_queue.read_dispatch_id` for AQL).
    pub read_pointer_address: u64,
    /// Out: mmap offset of the doorbell on the kfd fd.
    pub doorbell_offset: u64,
    /// In: ring bytes (power of two or 0).
    pub ring_size: u32,
    /// In: device.
    pub gpu_id: u32,
    /// In: [`queue_type`].
    pub queue_type: u32,
    /// In: bits 7:0 percentage 0..100.
    pub queue_percentage: u32,
    /// In: 0..15.
    pub queue_priority: u32,
    /// Out: per-process queue id.
    pub queue_id: u32,
    /// In: EOP buffer VA (0 = none).
    pub eop_buffer_address: u64,
    /// In: EOP buffer size (must be the node's, 4096).
    pub eop_buffer_size: u64,
    /// In: CWSR area VA.
    pub ctx_save_restore_address: u64,
    /// In: per-XCC CWSR size.
    pub ctx_save_restore_size: u32,
    /// In: control-stack size (must equal the node's).
    pub ctl_stack_size: u32,
    /// In (1.17): SDMA engine for `SDMA_BY_ENG_ID`.
    pub sdma_engine_id: u32,
    /// Padding.
    pub pad: u32,
}

/// `kfd_ioctl_destroy_queue_args`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DestroyQueueArgs {
    /// In: queue id.
    pub queue_id: u32,
    /// Padding.
    pub pad: u32,
}

/// `kfd_ioctl_update_queue_args`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UpdateQueueArgs {
    /// In: new ring VA.
    pub ring_base_address: u64,
    /// In: queue id.
    pub queue_id: u32,
    /// In: new ring bytes.
    pub ring_size: u32,
    /// In: new percentage (0 = inactive).
    pub queue_percentage: u32,
    /// In: new priority.
    pub queue_priority: u32,
}

/// `kfd_ioctl_set_cu_mask_args`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SetCuMaskArgs {
    /// In: queue id.
    pub queue_id: u32,
    /// In: number of mask bits (multiple of 32, non-zero).
    pub num_cu_mask: u32,
    /// In: pointer to `num_cu_mask / 32` dwords.
    pub cu_mask_ptr: u64,
}

/// `kfd_ioctl_get_clock_counters_args`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GetClockCountersArgs {
    /// Out: GPU timestamp counter (the clock of signal timestamps).
    pub gpu_clock_counter: u64,
    /// Out: CPU raw monotonic clock, ns.
    pub cpu_clock_counter: u64,
    /// Out: system (boot-time) clock, ns.
    pub system_clock_counter: u64,
    /// Out: frequency of the system clock, Hz.
    pub system_clock_freq: u64,
    /// In: device.
    pub gpu_id: u32,
    /// Padding.
    pub pad: u32,
}

/// `kfd_process_device_apertures`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcessDeviceApertures {
    /// LDS aperture base.
    pub lds_base: u64,
    /// LDS aperture limit.
    pub lds_limit: u64,
    /// Scratch aperture base.
    pub scratch_base: u64,
    /// Scratch aperture limit.
    pub scratch_limit: u64,
    /// First usable GPU VA.
    pub gpuvm_base: u64,
    /// Last usable GPU VA.
    pub gpuvm_limit: u64,
    /// Device.
    pub gpu_id: u32,
    /// Padding.
    pub pad: u32,
}

/// `kfd_ioctl_get_process_apertures_new_args`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GetProcessAperturesNewArgs {
    /// In: user array of [`ProcessDeviceApertures`].
    pub kfd_process_device_apertures_ptr: u64,
    /// In: capacity; out: nodes (0 in = query the count).
    pub num_of_nodes: u32,
    /// Padding.
    pub pad: u32,
}

/// `kfd_ioctl_acquire_vm_args`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AcquireVmArgs {
    /// In: render-node fd.
    pub drm_fd: u32,
    /// In: device.
    pub gpu_id: u32,
}

/// `kfd_ioctl_alloc_memory_of_gpu_args`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AllocMemoryOfGpuArgs {
    /// In: GPU VA (user-chosen).
    pub va_addr: u64,
    /// In: bytes.
    pub size: u64,
    /// Out: `(gpu_id << 32) | idr`.
    pub handle: u64,
    /// In (USERPTR: CPU address) / out (mmap offset).
    pub mmap_offset: u64,
    /// In: device.
    pub gpu_id: u32,
    /// In: [`mem_flags`].
    pub flags: u32,
}

/// `kfd_ioctl_free_memory_of_gpu_args`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FreeMemoryOfGpuArgs {
    /// In: handle.
    pub handle: u64,
}

/// `kfd_ioctl_export_dmabuf_args` (ABI 1.12; docs/kfd-aql.md §1.4, "Physical handles").
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExportDmabufArgs {
    /// In: the buffer's handle.
    pub handle: u64,
    /// In: flags of the new fd (`O_CLOEXEC`, `O_RDWR`).
    pub flags: u32,
    /// Out: the dma-buf fd.
    pub dmabuf_fd: u32,
}

/// `kfd_ioctl_import_dmabuf_args`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImportDmabufArgs {
    /// In: GPU VA of the new buffer.
    pub va_addr: u64,
    /// Out: its handle.
    pub handle: u64,
    /// In: the device it belongs to.
    pub gpu_id: u32,
    /// In: the dma-buf fd.
    pub dmabuf_fd: u32,
}

/// `kfd_ioctl_get_dmabuf_info_args`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GetDmabufInfoArgs {
    /// Out: bytes.
    pub size: u64,
    /// In: where to copy the metadata (0: none).
    pub metadata_ptr: u64,
    /// In: room at `metadata_ptr`; out: the metadata's size.
    pub metadata_size: u32,
    /// Out: the exporting device.
    pub gpu_id: u32,
    /// Out: the buffer's [`mem_flags`].
    pub flags: u32,
    /// In: the dma-buf fd.
    pub dmabuf_fd: u32,
}

/// `kfd_ioctl_map_memory_to_gpu_args` and `kfd_ioctl_unmap_memory_from_gpu_args`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MapMemoryArgs {
    /// In: handle.
    pub handle: u64,
    /// In: pointer to `n_devices` gpu ids.
    pub device_ids_array_ptr: u64,
    /// In: number of devices.
    pub n_devices: u32,
    /// In/out: devices already done.
    pub n_success: u32,
}

/// `kfd_ioctl_create_event_args`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CreateEventArgs {
    /// In: event-page BO handle (first signal event only); out: mmap offset of the page.
    pub event_page_offset: u64,
    /// Out: trigger data (= event id for signal events).
    pub event_trigger_data: u32,
    /// In: [`event_type`].
    pub event_type: u32,
    /// In: auto-reset.
    pub auto_reset: u32,
    /// In: node (some types).
    pub node_id: u32,
    /// Out: event id.
    pub event_id: u32,
    /// Out: slot index in the event page.
    pub event_slot_index: u32,
}

/// `kfd_ioctl_destroy_event_args`, `kfd_ioctl_set_event_args`, `kfd_ioctl_reset_event_args`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EventIdArgs {
    /// In: event id.
    pub event_id: u32,
    /// Padding.
    pub pad: u32,
}

/// `kfd_memory_exception_failure`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryExceptionFailure {
    /// Page not present.
    pub not_present: u32,
    /// Write to a read-only page.
    pub read_only: u32,
    /// Execute of a no-execute page.
    pub no_execute: u32,
    /// Address imprecise.
    pub imprecise: u32,
}

/// `kfd_hsa_memory_exception_data`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryExceptionData {
    /// Failure kind.
    pub failure: MemoryExceptionFailure,
    /// Faulting VA.
    pub va: u64,
    /// Device.
    pub gpu_id: u32,
    /// RAS error type (0 none, 3 GPU hang).
    pub error_type: u32,
}

/// `kfd_hsa_hw_exception_data`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HwExceptionData {
    /// Reset type.
    pub reset_type: u32,
    /// 0 hang, 1 ECC.
    pub reset_cause: u32,
    /// Whether VRAM contents were lost.
    pub memory_lost: u32,
    /// Device.
    pub gpu_id: u32,
}

/// `kfd_event_data` (48 bytes). The 32-byte union is kept as raw dwords; use the accessors.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EventData {
    /// The union: memory exception data, hardware exception data, or (1.14+) `last_event_age`
    /// in the first eight bytes.
    pub payload: [u64; 4],
    /// Extension pointer.
    pub kfd_event_data_ext: u64,
    /// In: event id.
    pub event_id: u32,
    /// Padding.
    pub pad: u32,
}

impl EventData {
    /// The union read as memory exception data.
    pub fn memory_exception(&self) -> MemoryExceptionData {
        // SAFETY: both are 32-byte plain-integer structs; every bit pattern is valid.
        unsafe { core::mem::transmute::<[u64; 4], MemoryExceptionData>(self.payload) }
    }

    /// Stores memory exception data into the union.
    pub fn set_memory_exception(&mut self, d: MemoryExceptionData) {
        // SAFETY: as above, same size, plain integers.
        self.payload = unsafe { core::mem::transmute::<MemoryExceptionData, [u64; 4]>(d) };
    }

    /// The union read as hardware exception data.
    pub fn hw_exception(&self) -> HwExceptionData {
        let w = self.payload;
        HwExceptionData {
            reset_type: w[0] as u32,
            reset_cause: (w[0] >> 32) as u32,
            memory_lost: w[1] as u32,
            gpu_id: (w[1] >> 32) as u32,
        }
    }

    /// Stores hardware exception data into the union (the rest is zeroed).
    pub fn set_hw_exception(&mut self, d: HwExceptionData) {
        self.payload = [
            u64::from(d.reset_type) | u64::from(d.reset_cause) << 32,
            u64::from(d.memory_lost) | u64::from(d.gpu_id) << 32,
            0,
            0,
        ];
    }

    /// `signal_event_data.last_event_age` (KFD 1.14+).
    pub fn last_event_age(&self) -> u64 {
        self.payload[0]
    }
}

/// `kfd_ioctl_wait_events_args`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WaitEventsArgs {
    /// In: array of [`EventData`].
    pub events_ptr: u64,
    /// In: number of events.
    pub num_events: u32,
    /// In: all (1) or any (0).
    pub wait_for_all: u32,
    /// In: ms; 0 polls, `u32::MAX` waits forever.
    pub timeout: u32,
    /// Out: [`wait_result`].
    pub wait_result: u32,
}

/// `KFD_IOC_QUEUE_TYPE_*`.
pub mod queue_type {
    /// PM4 compute.
    pub const COMPUTE: u32 = 0;
    /// SDMA.
    pub const SDMA: u32 = 1;
    /// AQL compute.
    pub const COMPUTE_AQL: u32 = 2;
    /// SDMA over XGMI.
    pub const SDMA_XGMI: u32 = 3;
    /// SDMA by engine id (1.17).
    pub const SDMA_BY_ENG_ID: u32 = 4;
}

/// `KFD_IOC_ALLOC_MEM_FLAGS_*`.
pub mod mem_flags {
    /// Device memory.
    pub const VRAM: u32 = 1 << 0;
    /// System memory mapped through the GART.
    pub const GTT: u32 = 1 << 1;
    /// Existing user memory.
    pub const USERPTR: u32 = 1 << 2;
    /// The process doorbell slice.
    pub const DOORBELL: u32 = 1 << 3;
    /// The MMIO remap (HDP flush) page.
    pub const MMIO_REMAP: u32 = 1 << 4;
    /// GPU writable.
    pub const WRITABLE: u32 = 1 << 31;
    /// GPU executable.
    pub const EXECUTABLE: u32 = 1 << 30;
    /// CPU-visible VRAM.
    pub const PUBLIC: u32 = 1 << 29;
    /// Do not substitute system memory for VRAM.
    pub const NO_SUBSTITUTE: u32 = 1 << 28;
    /// GFX7/8 AQL double map.
    pub const AQL_QUEUE_MEM: u32 = 1 << 27;
    /// Fine-grain coherent.
    pub const COHERENT: u32 = 1 << 26;
    /// GPU uncached.
    pub const UNCACHED: u32 = 1 << 25;
    /// Extended coherence (gfx942).
    pub const EXT_COHERENT: u32 = 1 << 24;
    /// Contiguous VRAM (1.16).
    pub const CONTIGUOUS: u32 = 1 << 23;
    /// The memory-type bits.
    pub const TYPE_MASK: u32 = VRAM | GTT | USERPTR | DOORBELL | MMIO_REMAP;
}

/// `KFD_IOC_EVENT_*` types.
pub mod event_type {
    /// Signal event (has a slot in the event page).
    pub const SIGNAL: u32 = 0;
    /// Topology node change.
    pub const NODECHANGE: u32 = 1;
    /// Device state change.
    pub const DEVICESTATECHANGE: u32 = 2;
    /// Hardware exception (reset).
    pub const HW_EXCEPTION: u32 = 3;
    /// System event.
    pub const SYSTEM_EVENT: u32 = 4;
    /// Debug event (signal-like).
    pub const DEBUG_EVENT: u32 = 5;
    /// Profile event.
    pub const PROFILE_EVENT: u32 = 6;
    /// Queue event.
    pub const QUEUE_EVENT: u32 = 7;
    /// Memory (VM fault) event.
    pub const MEMORY: u32 = 8;
}

/// `KFD_IOC_WAIT_RESULT_*`.
pub mod wait_result {
    /// The condition was met.
    pub const COMPLETE: u32 = 0;
    /// The timeout expired.
    pub const TIMEOUT: u32 = 1;
    /// An event was destroyed while waited on.
    pub const FAIL: u32 = 2;
}

/// KFD queue exception codes (`KFD_EC_*`, docs/kfd-aql.md §7) and the mask macro.
pub mod exception {
    /// `EC_QUEUE_WAVE_MEMORY_VIOLATION`.
    pub const QUEUE_WAVE_MEMORY_VIOLATION: u32 = 5;
    /// `EC_QUEUE_PACKET_DISPATCH_DIM_INVALID`.
    pub const QUEUE_PACKET_DISPATCH_DIM_INVALID: u32 = 16;
    /// `EC_QUEUE_PACKET_DISPATCH_GROUP_SEGMENT_SIZE_INVALID`.
    pub const QUEUE_PACKET_DISPATCH_GROUP_SEGMENT_SIZE_INVALID: u32 = 17;
    /// `EC_QUEUE_PACKET_DISPATCH_CODE_INVALID`.
    pub const QUEUE_PACKET_DISPATCH_CODE_INVALID: u32 = 18;
    /// `EC_QUEUE_PACKET_RESERVED`.
    pub const QUEUE_PACKET_RESERVED: u32 = 19;
    /// `EC_QUEUE_PACKET_UNSUPPORTED`.
    pub const QUEUE_PACKET_UNSUPPORTED: u32 = 20;
    /// `EC_QUEUE_PACKET_DISPATCH_WORK_GROUP_SIZE_INVALID`.
    pub const QUEUE_PACKET_DISPATCH_WORK_GROUP_SIZE_INVALID: u32 = 21;
    /// `EC_DEVICE_MEMORY_VIOLATION`.
    pub const DEVICE_MEMORY_VIOLATION: u32 = 33;
    /// `EC_DEVICE_FATAL_HALT`.
    pub const DEVICE_FATAL_HALT: u32 = 35;

    /// `KFD_EC_MASK(ec)`.
    pub const fn mask(ec: u32) -> u64 {
        1u64 << (ec - 1)
    }
}

/// Limits and sizes from `kfd_priv.h` and the uapi header.
pub mod limits {
    /// `KFD_MAX_QUEUE_PERCENTAGE`.
    pub const MAX_QUEUE_PERCENTAGE: u32 = 100;
    /// `KFD_MAX_QUEUE_PRIORITY`.
    pub const MAX_QUEUE_PRIORITY: u32 = 15;
    /// `KFD_MIN_QUEUE_RING_SIZE`.
    pub const MIN_QUEUE_RING_SIZE: u32 = 1024;
    /// `KFD_SIGNAL_EVENT_LIMIT`.
    pub const SIGNAL_EVENT_LIMIT: u32 = 4096;
    /// Bytes of the event page (`KFD_SIGNAL_EVENT_LIMIT * 8`).
    pub const EVENT_PAGE_BYTES: u64 = SIGNAL_EVENT_LIMIT as u64 * 8;
    /// First id of non-signal events.
    pub const FIRST_NONSIGNAL_EVENT_ID: u32 = 0x4000_0000;
    /// Process doorbell slice on GFX9+ (1024 doorbells of 8 bytes).
    pub const DOORBELL_SLICE_BYTES: u64 = 8192;
    /// Bytes per doorbell on GFX9+.
    pub const DOORBELL_BYTES: u64 = 8;
    /// Queues per process (doorbell slots).
    pub const MAX_QUEUES_PER_PROCESS: u32 = 1024;
    /// CPU page size the emulator assumes.
    pub const PAGE_SIZE: u64 = 4096;
    /// EOP buffer size on GFX8+ (except Tonga).
    pub const EOP_BUFFER_SIZE: u64 = 4096;
    /// `KFD_EVENT_TIMEOUT_INFINITE`.
    pub const TIMEOUT_INFINITE: u32 = 0xFFFF_FFFF;
    /// Most events one `WAIT_EVENTS` may name (`KFD_SIGNAL_EVENT_LIMIT`).
    pub const MAX_WAIT_EVENTS: u32 = SIGNAL_EVENT_LIMIT;
}

/// kfd-fd mmap offset encoding (`kfd_priv.h`): bits 63:62 type, 61:46 gpu id.
pub mod mmap_offset {
    /// Shift of the type bits.
    pub const TYPE_SHIFT: u32 = 62;
    /// Type: doorbell slice.
    pub const TYPE_DOORBELL: u64 = 3 << TYPE_SHIFT;
    /// Type: kernel-allocated event page.
    pub const TYPE_EVENTS: u64 = 2 << TYPE_SHIFT;
    /// Type: reserved memory.
    pub const TYPE_RESERVED_MEM: u64 = 1 << TYPE_SHIFT;
    /// Type: MMIO remap page.
    pub const TYPE_MMIO: u64 = 0;
    /// Mask of the type bits.
    pub const TYPE_MASK: u64 = 3 << TYPE_SHIFT;
    /// Shift of the gpu id.
    pub const GPU_ID_SHIFT: u32 = 46;
    /// Mask of the gpu id field.
    pub const GPU_ID_MASK: u64 = 0xffff << GPU_ID_SHIFT;

    /// `KFD_MMAP_GPU_ID(gpu_id)`.
    pub const fn gpu_id(gpu_id: u32) -> u64 {
        ((gpu_id as u64) << GPU_ID_SHIFT) & GPU_ID_MASK
    }

    /// `KFD_MMAP_GET_GPU_ID(offset)`.
    pub const fn get_gpu_id(offset: u64) -> u32 {
        ((offset & GPU_ID_MASK) >> GPU_ID_SHIFT) as u32
    }
}

/// `hsa_queue_t` (40 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HsaQueue {
    /// `hsa_queue_type32_t`.
    pub queue_type: u32,
    /// Feature bits (1 kernel dispatch).
    pub features: u32,
    /// Ring base address.
    pub base_address: u64,
    /// Doorbell signal handle.
    pub doorbell_signal: u64,
    /// Ring size in packets.
    pub size: u32,
    /// Reserved.
    pub reserved1: u32,
    /// Queue id.
    pub id: u64,
}

/// `amd_queue_t` (256 bytes, 64-byte aligned). Offsets per docs/kfd-aql.md §4.3.
#[repr(C, align(64))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AmdQueue {
    /// The HSA queue.
    pub hsa_queue: HsaQueue,
    /// Capability bits.
    pub caps: u32,
    /// Reserved.
    pub reserved1: [u32; 3],
    /// Producer write index (+56).
    pub write_dispatch_id: u64,
    /// `lds_base >> 32`.
    pub group_segment_aperture_base_hi: u32,
    /// `scratch_base >> 32`.
    pub private_segment_aperture_base_hi: u32,
    /// CUs − 1.
    pub max_cu_id: u32,
    /// Waves per CU − 1.
    pub max_wave_id: u32,
    /// GFX7/8 write-index proxy.
    pub max_legacy_doorbell_dispatch_id_plus_1: u64,
    /// GFX7/8 lock.
    pub legacy_doorbell_lock: u32,
    /// Reserved.
    pub reserved2: [u32; 9],
    /// Consumer read index (+128).
    pub read_dispatch_id: u64,
    /// 128: lets the firmware find the struct from the read pointer.
    pub read_dispatch_id_field_base_byte_offset: u32,
    /// Scratch configuration.
    pub compute_tmpring_size: u32,
    /// Scratch buffer resource descriptor.
    pub scratch_resource_descriptor: [u32; 4],
    /// Scratch base VA.
    pub scratch_backing_memory_location: u64,
    /// Scratch bytes.
    pub scratch_backing_memory_byte_size: u64,
    /// Scratch bytes per lane.
    pub scratch_wave64_lane_byte_size: u32,
    /// [`queue_properties`] bits.
    pub queue_properties: u32,
    /// Scratch bookkeeping.
    pub scratch_last_used_index: u64,
    /// Legacy error/scratch-request signal.
    pub queue_inactive_signal: u64,
    /// Reserved.
    pub reserved4: [u32; 2],
    /// Alternate scratch fields and reserved words.
    pub reserved5: [u64; 6],
}

/// `amd_queue_properties_t` bits.
pub mod queue_properties {
    /// Trap handler enabled.
    pub const ENABLE_TRAP_HANDLER: u32 = 1 << 0;
    /// 64-bit pointers.
    pub const IS_PTR64: u32 = 1 << 1;
    /// Debug SGPRs.
    pub const ENABLE_TRAP_HANDLER_DEBUG_SGPRS: u32 = 1 << 2;
    /// The CP writes start/end timestamps into completion signals.
    pub const ENABLE_PROFILING: u32 = 1 << 3;
    /// Scratch once.
    pub const USE_SCRATCH_ONCE: u32 = 1 << 4;
}

/// Offset of `write_dispatch_id` in `amd_queue_t`.
pub const AMD_QUEUE_WRITE_DISPATCH_ID: u64 = 56;
/// Offset of `read_dispatch_id` in `amd_queue_t`.
pub const AMD_QUEUE_READ_DISPATCH_ID: u64 = 128;
/// Offset of `queue_properties` in `amd_queue_t`.
pub const AMD_QUEUE_PROPERTIES: u64 = 180;

/// `kfd_context_save_area_header` (40 bytes) at the start of each per-XCC CWSR slice.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CwsrHeader {
    /// Written by KFD on save.
    pub control_stack_offset: u32,
    /// Written by KFD on save.
    pub control_stack_size: u32,
    /// Written by KFD on save.
    pub wave_state_offset: u32,
    /// Written by KFD on save.
    pub wave_state_size: u32,
    /// Offset of the debugger area.
    pub debug_offset: u32,
    /// Size of the debugger area.
    pub debug_size: u32,
    /// VA of the 64-bit error mask the exception path ORs into.
    pub err_payload_addr: u64,
    /// Event set on a queue exception.
    pub err_event_id: u32,
    /// Reserved.
    pub reserved1: u32,
}

/// AMDHSA kernel descriptor (`llvm_amdhsa_kernel_descriptor_t`, 64 bytes; docs/kfd-aql.md §6).
#[repr(C, align(64))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KernelDescriptor {
    /// Static LDS bytes.
    pub group_segment_fixed_size: u32,
    /// Static scratch bytes per work-item.
    pub private_segment_fixed_size: u32,
    /// Kernel-argument bytes.
    pub kernarg_size: u32,
    /// Reserved.
    pub reserved0: [u8; 4],
    /// Entry point relative to the descriptor.
    pub kernel_code_entry_byte_offset: i64,
    /// Reserved.
    pub reserved1: [u8; 20],
    /// `COMPUTE_PGM_RSRC3`.
    pub compute_pgm_rsrc3: u32,
    /// `COMPUTE_PGM_RSRC1`.
    pub compute_pgm_rsrc1: u32,
    /// `COMPUTE_PGM_RSRC2`.
    pub compute_pgm_rsrc2: u32,
    /// Kernel code properties.
    pub kernel_code_properties: u16,
    /// Kernarg preload.
    pub kernarg_preload: u16,
    /// Reserved.
    pub reserved3: [u8; 4],
}

macro_rules! assert_layout {
    ($ty:ty, $size:expr $(, $field:ident = $off:expr)*) => {
        const _: () = {
            assert!(size_of::<$ty>() == $size);
            $(assert!(offset_of!($ty, $field) == $off);)*
        };
    };
}

assert_layout!(GetVersionArgs, 8, minor_version = 4);
assert_layout!(
    CreateQueueArgs,
    96,
    write_pointer_address = 8,
    read_pointer_address = 16,
    doorbell_offset = 24,
    ring_size = 32,
    gpu_id = 36,
    queue_type = 40,
    queue_percentage = 44,
    queue_priority = 48,
    queue_id = 52,
    eop_buffer_address = 56,
    eop_buffer_size = 64,
    ctx_save_restore_address = 72,
    ctx_save_restore_size = 80,
    ctl_stack_size = 84,
    sdma_engine_id = 88
);
assert_layout!(DestroyQueueArgs, 8);
assert_layout!(UpdateQueueArgs, 24, queue_id = 8, ring_size = 12, queue_percentage = 16, queue_priority = 20);
assert_layout!(SetCuMaskArgs, 16, num_cu_mask = 4, cu_mask_ptr = 8);
assert_layout!(GetClockCountersArgs, 40, system_clock_freq = 24, gpu_id = 32);
assert_layout!(ProcessDeviceApertures, 56, scratch_base = 16, gpuvm_base = 32, gpuvm_limit = 40, gpu_id = 48);
assert_layout!(GetProcessAperturesNewArgs, 16, num_of_nodes = 8);
assert_layout!(AcquireVmArgs, 8, gpu_id = 4);
assert_layout!(AllocMemoryOfGpuArgs, 40, size = 8, handle = 16, mmap_offset = 24, gpu_id = 32, flags = 36);
assert_layout!(FreeMemoryOfGpuArgs, 8);
assert_layout!(ExportDmabufArgs, 16, flags = 8, dmabuf_fd = 12);
assert_layout!(ImportDmabufArgs, 24, handle = 8, gpu_id = 16, dmabuf_fd = 20);
assert_layout!(GetDmabufInfoArgs, 32, metadata_ptr = 8, metadata_size = 16, gpu_id = 20, flags = 24, dmabuf_fd = 28);
assert_layout!(MapMemoryArgs, 24, device_ids_array_ptr = 8, n_devices = 16, n_success = 20);
assert_layout!(
    CreateEventArgs,
    32,
    event_trigger_data = 8,
    event_type = 12,
    auto_reset = 16,
    node_id = 20,
    event_id = 24,
    event_slot_index = 28
);
assert_layout!(EventIdArgs, 8);
assert_layout!(MemoryExceptionData, 32, va = 16, gpu_id = 24, error_type = 28);
assert_layout!(HwExceptionData, 16, memory_lost = 8, gpu_id = 12);
assert_layout!(EventData, 48, kfd_event_data_ext = 32, event_id = 40);
assert_layout!(WaitEventsArgs, 24, num_events = 8, wait_for_all = 12, timeout = 16, wait_result = 20);
assert_layout!(HsaQueue, 40, features = 4, base_address = 8, doorbell_signal = 16, size = 24, id = 32);
assert_layout!(
    AmdQueue,
    256,
    caps = 40,
    write_dispatch_id = 56,
    group_segment_aperture_base_hi = 64,
    max_cu_id = 72,
    max_wave_id = 76,
    max_legacy_doorbell_dispatch_id_plus_1 = 80,
    legacy_doorbell_lock = 88,
    read_dispatch_id = 128,
    read_dispatch_id_field_base_byte_offset = 136,
    compute_tmpring_size = 140,
    scratch_resource_descriptor = 144,
    scratch_backing_memory_location = 160,
    scratch_backing_memory_byte_size = 168,
    scratch_wave64_lane_byte_size = 176,
    queue_properties = 180,
    scratch_last_used_index = 184,
    queue_inactive_signal = 192
);
assert_layout!(
    CwsrHeader,
    40,
    control_stack_size = 4,
    debug_offset = 16,
    debug_size = 20,
    err_payload_addr = 24,
    err_event_id = 32
);
assert_layout!(
    KernelDescriptor,
    64,
    kernarg_size = 8,
    kernel_code_entry_byte_offset = 16,
    compute_pgm_rsrc3 = 44,
    compute_pgm_rsrc1 = 48,
    kernel_code_properties = 56
);

/// An amdkfd ioctl, tied to its argument struct: the request number is built from the command
/// number, the direction and `size_of::<Self::Arg>()`, so a request cannot be issued with an
/// argument of another size or type (as rustix ties an opcode to its argument type).
///
/// Each ioctl is a type of its own (in [`ioctl`]) rather than a property of its argument struct,
/// because the kernel shares argument layouts between commands (`MAP`/`UNMAP_MEMORY`, the three
/// event-id commands).
///
/// ```
/// use aqueduct_kfd_abi::{ioctl, request, GetVersionArgs, Ioctl};
/// fn issue<R: Ioctl>(_arg: &mut R::Arg) -> u64 {
///     R::REQUEST
/// }
/// assert_eq!(issue::<ioctl::GetVersion>(&mut GetVersionArgs::default()), request::GET_VERSION);
/// ```
///
/// A request with another command's argument does not compile:
///
/// ```compile_fail,E0308
/// use aqueduct_kfd_abi::{ioctl, GetVersionArgs, Ioctl};
/// fn issue<R: Ioctl>(_arg: &mut R::Arg) -> u64 {
///     R::REQUEST
/// }
/// issue::<ioctl::SetCuMask>(&mut GetVersionArgs::default());
/// ```
///
/// # Safety
///
/// An implementation asserts that, for command `NR` with direction `DIR`, the kernel reads and
/// writes exactly a `Self::Arg`: `Self::Arg` is `repr(C)` with the layout of the kernel's struct,
/// every bit pattern the kernel may write back is a valid `Self::Arg`, and [`Ioctl::REQUEST`] keeps
/// its provided value.
pub unsafe trait Ioctl {
    /// The argument struct the kernel copies in and/or out.
    type Arg;
    /// The command number (`nr`, bits 7:0 of the request).
    const NR: u32;
    /// The direction bits (`_IOR`, `_IOW` or `_IOWR`).
    const DIR: u32;
    /// The full request number, `_IOC(DIR, 'K', NR, size_of::<Arg>())`.
    const REQUEST: u64 = ioc(Self::DIR, Self::NR, size_of::<Self::Arg>());
}

/// An [`Ioctl`] whose argument struct holds no user address the kernel or the device
/// dereferences: only ids, handles, sizes, flags and results. Issuing it with any value of
/// `Self::Arg` cannot make anything read or write the caller's memory beyond the struct itself,
/// so a caller may issue it without an `unsafe` contract of its own (`aqueduct-kfd`'s
/// `Driver::call`).
///
/// Requests whose struct carries an address — an array the kernel copies (apertures, device
/// ids, events, CU masks), a queue's ring and index addresses the command processor writes to,
/// or a `USERPTR` allocation's user address — are not `PlainIoctl`:
///
/// ```
/// use aqueduct_kfd_abi::{ioctl, PlainIoctl};
/// fn safe_to_issue<R: PlainIoctl>() {}
/// safe_to_issue::<ioctl::SetEvent>();
/// ```
///
/// ```compile_fail,E0277
/// use aqueduct_kfd_abi::{ioctl, PlainIoctl};
/// fn safe_to_issue<R: PlainIoctl>() {}
/// safe_to_issue::<ioctl::WaitEvents>();
/// ```
///
/// # Safety
///
/// An implementation asserts that no field of `Self::Arg` is, for this request, an address the
/// kernel or the device accesses on the caller's behalf.
pub unsafe trait PlainIoctl: Ioctl {}

/// The amdkfd ioctls this crate describes, one uninhabited type each (see [`Ioctl`]).
pub mod ioctl {
    use super::*;

    macro_rules! ioctls {
        ($($(#[$doc:meta])* $name:ident = ($dir:expr, $nr:expr, $arg:ty);)*) => {$(
            $(#[$doc])*
            #[derive(Debug)]
            pub enum $name {}
            // SAFETY: `$arg` is the `repr(C)` copy of the kernel's argument struct for `$nr`
            // (`linux/kfd_ioctl.h`, ABI 1.17), its size and offsets asserted above; all its
            // fields are plain integers, so any bytes the kernel writes back are valid.
            unsafe impl Ioctl for $name {
                type Arg = $arg;
                const NR: u32 = $nr;
                const DIR: u32 = $dir;
            }
        )*};
    }

    ioctls! {
        /// `AMDKFD_IOC_GET_VERSION`.
        GetVersion = (IOC_READ, nr::GET_VERSION, GetVersionArgs);
        /// `AMDKFD_IOC_CREATE_QUEUE` (1.17, 96 bytes).
        CreateQueue = (IOC_READ | IOC_WRITE, nr::CREATE_QUEUE, CreateQueueArgs);
        /// `AMDKFD_IOC_DESTROY_QUEUE`.
        DestroyQueue = (IOC_READ | IOC_WRITE, nr::DESTROY_QUEUE, DestroyQueueArgs);
        /// `AMDKFD_IOC_GET_CLOCK_COUNTERS`.
        GetClockCounters = (IOC_READ | IOC_WRITE, nr::GET_CLOCK_COUNTERS, GetClockCountersArgs);
        /// `AMDKFD_IOC_UPDATE_QUEUE`.
        UpdateQueue = (IOC_WRITE, nr::UPDATE_QUEUE, UpdateQueueArgs);
        /// `AMDKFD_IOC_CREATE_EVENT`.
        CreateEvent = (IOC_READ | IOC_WRITE, nr::CREATE_EVENT, CreateEventArgs);
        /// `AMDKFD_IOC_DESTROY_EVENT`.
        DestroyEvent = (IOC_WRITE, nr::DESTROY_EVENT, EventIdArgs);
        /// `AMDKFD_IOC_SET_EVENT`.
        SetEvent = (IOC_WRITE, nr::SET_EVENT, EventIdArgs);
        /// `AMDKFD_IOC_RESET_EVENT`.
        ResetEvent = (IOC_WRITE, nr::RESET_EVENT, EventIdArgs);
        /// `AMDKFD_IOC_WAIT_EVENTS`.
        WaitEvents = (IOC_READ | IOC_WRITE, nr::WAIT_EVENTS, WaitEventsArgs);
        /// `AMDKFD_IOC_GET_PROCESS_APERTURES_NEW`.
        GetProcessAperturesNew =
            (IOC_READ | IOC_WRITE, nr::GET_PROCESS_APERTURES_NEW, GetProcessAperturesNewArgs);
        /// `AMDKFD_IOC_ACQUIRE_VM`.
        AcquireVm = (IOC_WRITE, nr::ACQUIRE_VM, AcquireVmArgs);
        /// `AMDKFD_IOC_ALLOC_MEMORY_OF_GPU`.
        AllocMemoryOfGpu = (IOC_READ | IOC_WRITE, nr::ALLOC_MEMORY_OF_GPU, AllocMemoryOfGpuArgs);
        /// `AMDKFD_IOC_FREE_MEMORY_OF_GPU`.
        FreeMemoryOfGpu = (IOC_WRITE, nr::FREE_MEMORY_OF_GPU, FreeMemoryOfGpuArgs);
        /// `AMDKFD_IOC_MAP_MEMORY_TO_GPU`.
        MapMemoryToGpu = (IOC_READ | IOC_WRITE, nr::MAP_MEMORY_TO_GPU, MapMemoryArgs);
        /// `AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU`.
        UnmapMemoryFromGpu = (IOC_READ | IOC_WRITE, nr::UNMAP_MEMORY_FROM_GPU, MapMemoryArgs);
        /// `AMDKFD_IOC_SET_CU_MASK`.
        SetCuMask = (IOC_WRITE, nr::SET_CU_MASK, SetCuMaskArgs);
        /// `AMDKFD_IOC_GET_DMABUF_INFO`.
        GetDmabufInfo = (IOC_READ | IOC_WRITE, nr::GET_DMABUF_INFO, GetDmabufInfoArgs);
        /// `AMDKFD_IOC_IMPORT_DMABUF`.
        ImportDmabuf = (IOC_READ | IOC_WRITE, nr::IMPORT_DMABUF, ImportDmabufArgs);
        /// `AMDKFD_IOC_EXPORT_DMABUF`.
        ExportDmabuf = (IOC_READ | IOC_WRITE, nr::EXPORT_DMABUF, ExportDmabufArgs);
    }

    // SAFETY: `ExportDmabufArgs` is a buffer handle, fd flags and the fd the kernel writes.
    unsafe impl PlainIoctl for ExportDmabuf {}
    // SAFETY: `ImportDmabufArgs` holds a GPU VA the kernel checks against the process's buffers
    // (never dereferenced on the CPU), a gpu id and an fd.
    unsafe impl PlainIoctl for ImportDmabuf {}

    // SAFETY: `GetVersionArgs` is two version numbers the kernel writes.
    unsafe impl PlainIoctl for GetVersion {}
    // SAFETY: `DestroyQueueArgs` is a queue id.
    unsafe impl PlainIoctl for DestroyQueue {}
    // SAFETY: `GetClockCountersArgs` is a gpu id in and four counters out.
    unsafe impl PlainIoctl for GetClockCounters {}
    // SAFETY: `CreateEventArgs` holds ids, a type and flags; `event_page_offset` is a buffer
    // handle (the kernel maps that buffer itself), never a user address.
    unsafe impl PlainIoctl for CreateEvent {}
    // SAFETY: `EventIdArgs` is an event id.
    unsafe impl PlainIoctl for DestroyEvent {}
    // SAFETY: as for `DestroyEvent`.
    unsafe impl PlainIoctl for SetEvent {}
    // SAFETY: as for `DestroyEvent`.
    unsafe impl PlainIoctl for ResetEvent {}
    // SAFETY: `AcquireVmArgs` is a DRM fd number and a gpu id.
    unsafe impl PlainIoctl for AcquireVm {}
    // SAFETY: `FreeMemoryOfGpuArgs` is a buffer handle; the caller's CPU mapping of the buffer
    // is its own (the kernel does not unmap it).
    unsafe impl PlainIoctl for FreeMemoryOfGpu {}
}

/// Request numbers (`AMDKFD_IOC_*`), each the [`Ioctl::REQUEST`] of its type in [`ioctl`].
pub mod request {
    use super::*;
    /// `AMDKFD_IOC_GET_VERSION`.
    pub const GET_VERSION: u64 = ioctl::GetVersion::REQUEST;
    /// `AMDKFD_IOC_CREATE_QUEUE` (1.17, 96 bytes).
    pub const CREATE_QUEUE: u64 = ioctl::CreateQueue::REQUEST;
    /// `AMDKFD_IOC_CREATE_QUEUE` as ≤ 1.16 headers encode it (88 bytes).
    pub const CREATE_QUEUE_88: u64 = ioc(IOC_READ | IOC_WRITE, nr::CREATE_QUEUE, 88);
    /// `AMDKFD_IOC_DESTROY_QUEUE`.
    pub const DESTROY_QUEUE: u64 = ioctl::DestroyQueue::REQUEST;
    /// `AMDKFD_IOC_GET_CLOCK_COUNTERS`.
    pub const GET_CLOCK_COUNTERS: u64 = ioctl::GetClockCounters::REQUEST;
    /// `AMDKFD_IOC_UPDATE_QUEUE`.
    pub const UPDATE_QUEUE: u64 = ioctl::UpdateQueue::REQUEST;
    /// `AMDKFD_IOC_CREATE_EVENT`.
    pub const CREATE_EVENT: u64 = ioctl::CreateEvent::REQUEST;
    /// `AMDKFD_IOC_DESTROY_EVENT`.
    pub const DESTROY_EVENT: u64 = ioctl::DestroyEvent::REQUEST;
    /// `AMDKFD_IOC_SET_EVENT`.
    pub const SET_EVENT: u64 = ioctl::SetEvent::REQUEST;
    /// `AMDKFD_IOC_RESET_EVENT`.
    pub const RESET_EVENT: u64 = ioctl::ResetEvent::REQUEST;
    /// `AMDKFD_IOC_WAIT_EVENTS`.
    pub const WAIT_EVENTS: u64 = ioctl::WaitEvents::REQUEST;
    /// `AMDKFD_IOC_GET_PROCESS_APERTURES_NEW`.
    pub const GET_PROCESS_APERTURES_NEW: u64 = ioctl::GetProcessAperturesNew::REQUEST;
    /// `AMDKFD_IOC_ACQUIRE_VM`.
    pub const ACQUIRE_VM: u64 = ioctl::AcquireVm::REQUEST;
    /// `AMDKFD_IOC_ALLOC_MEMORY_OF_GPU`.
    pub const ALLOC_MEMORY_OF_GPU: u64 = ioctl::AllocMemoryOfGpu::REQUEST;
    /// `AMDKFD_IOC_FREE_MEMORY_OF_GPU`.
    pub const FREE_MEMORY_OF_GPU: u64 = ioctl::FreeMemoryOfGpu::REQUEST;
    /// `AMDKFD_IOC_MAP_MEMORY_TO_GPU`.
    pub const MAP_MEMORY_TO_GPU: u64 = ioctl::MapMemoryToGpu::REQUEST;
    /// `AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU`.
    pub const UNMAP_MEMORY_FROM_GPU: u64 = ioctl::UnmapMemoryFromGpu::REQUEST;
    /// `AMDKFD_IOC_SET_CU_MASK`.
    pub const SET_CU_MASK: u64 = ioctl::SetCuMask::REQUEST;
    /// `AMDKFD_IOC_GET_DMABUF_INFO`.
    pub const GET_DMABUF_INFO: u64 = ioctl::GetDmabufInfo::REQUEST;
    /// `AMDKFD_IOC_IMPORT_DMABUF`.
    pub const IMPORT_DMABUF: u64 = ioctl::ImportDmabuf::REQUEST;
    /// `AMDKFD_IOC_EXPORT_DMABUF`.
    pub const EXPORT_DMABUF: u64 = ioctl::ExportDmabuf::REQUEST;
}

/// The kernel's own direction and argument size for each implemented `nr` (what `kfd_ioctl`
/// uses after matching on `nr`): the [`Ioctl::REQUEST`] of the request type whose
/// [`Ioctl::NR`] it is, or `None` for an unknown command.
pub const fn kernel_request(nr: u32) -> Option<u64> {
    Some(match nr {
        ioctl::GetVersion::NR => ioctl::GetVersion::REQUEST,
        ioctl::CreateQueue::NR => ioctl::CreateQueue::REQUEST,
        ioctl::DestroyQueue::NR => ioctl::DestroyQueue::REQUEST,
        ioctl::GetClockCounters::NR => ioctl::GetClockCounters::REQUEST,
        ioctl::UpdateQueue::NR => ioctl::UpdateQueue::REQUEST,
        ioctl::CreateEvent::NR => ioctl::CreateEvent::REQUEST,
        ioctl::DestroyEvent::NR => ioctl::DestroyEvent::REQUEST,
        ioctl::SetEvent::NR => ioctl::SetEvent::REQUEST,
        ioctl::ResetEvent::NR => ioctl::ResetEvent::REQUEST,
        ioctl::WaitEvents::NR => ioctl::WaitEvents::REQUEST,
        ioctl::GetProcessAperturesNew::NR => ioctl::GetProcessAperturesNew::REQUEST,
        ioctl::AcquireVm::NR => ioctl::AcquireVm::REQUEST,
        ioctl::AllocMemoryOfGpu::NR => ioctl::AllocMemoryOfGpu::REQUEST,
        ioctl::FreeMemoryOfGpu::NR => ioctl::FreeMemoryOfGpu::REQUEST,
        ioctl::MapMemoryToGpu::NR => ioctl::MapMemoryToGpu::REQUEST,
        ioctl::UnmapMemoryFromGpu::NR => ioctl::UnmapMemoryFromGpu::REQUEST,
        ioctl::SetCuMask::NR => ioctl::SetCuMask::REQUEST,
        ioctl::GetDmabufInfo::NR => ioctl::GetDmabufInfo::REQUEST,
        ioctl::ImportDmabuf::NR => ioctl::ImportDmabuf::REQUEST,
        ioctl::ExportDmabuf::NR => ioctl::ExportDmabuf::REQUEST,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_numbers_match_the_brief() {
        assert_eq!(request::GET_VERSION, 0x8008_4B01);
        assert_eq!(request::CREATE_QUEUE, 0xC060_4B02);
        assert_eq!(request::CREATE_QUEUE_88, 0xC058_4B02);
        assert_eq!(request::DESTROY_QUEUE, 0xC008_4B03);
        assert_eq!(request::GET_CLOCK_COUNTERS, 0xC028_4B05);
        assert_eq!(request::UPDATE_QUEUE, 0x4018_4B07);
        assert_eq!(request::CREATE_EVENT, 0xC020_4B08);
        assert_eq!(request::DESTROY_EVENT, 0x4008_4B09);
        assert_eq!(request::SET_EVENT, 0x4008_4B0A);
        assert_eq!(request::RESET_EVENT, 0x4008_4B0B);
        assert_eq!(request::WAIT_EVENTS, 0xC018_4B0C);
        assert_eq!(request::GET_PROCESS_APERTURES_NEW, 0xC010_4B14);
        assert_eq!(request::ACQUIRE_VM, 0x4008_4B15);
        assert_eq!(request::ALLOC_MEMORY_OF_GPU, 0xC028_4B16);
        assert_eq!(request::FREE_MEMORY_OF_GPU, 0x4008_4B17);
        assert_eq!(request::MAP_MEMORY_TO_GPU, 0xC018_4B18);
        assert_eq!(request::UNMAP_MEMORY_FROM_GPU, 0xC018_4B19);
        assert_eq!(request::SET_CU_MASK, 0x4010_4B1A);
        assert_eq!(request::GET_DMABUF_INFO, 0xC020_4B1C);
        assert_eq!(request::IMPORT_DMABUF, 0xC018_4B1D);
        assert_eq!(request::EXPORT_DMABUF, 0xC010_4B24);
        let r = Request::decode(request::CREATE_QUEUE_88);
        assert_eq!((r.nr, r.ty, r.size, r.is_in(), r.is_out()), (2, 0x4B, 88, true, true));
    }

    #[test]
    fn event_data_union_round_trips() {
        let mut e = EventData::default();
        e.set_hw_exception(HwExceptionData { reset_type: 1, reset_cause: 0, memory_lost: 1, gpu_id: 0x1234 });
        assert_eq!(e.hw_exception().gpu_id, 0x1234);
        let m = MemoryExceptionData { va: 0xdead_0000, gpu_id: 7, ..Default::default() };
        e.set_memory_exception(m);
        assert_eq!(e.memory_exception(), m);
        assert_eq!(mmap_offset::get_gpu_id(mmap_offset::TYPE_DOORBELL | mmap_offset::gpu_id(0xd0cf)), 0xd0cf);
    }
}
