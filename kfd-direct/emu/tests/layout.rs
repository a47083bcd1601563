//! ABI layouts against the system headers: every ioctl argument struct against
//! `linux/kfd_ioctl.h`, the AQL packets and `hsa_queue_t` against `hsa.h` / `hsa_ext_amd.h`,
//! `amd_signal_t` and `amd_queue_t` against ROCr's `amd_hsa_signal.h` / `amd_hsa_queue.h`.
//!
//! The numbers come from `tests/c/layout.c`, compiled by build.rs against the installed headers.
//! Debian's linux-libc-dev ships KFD ABI 1.11, so fields newer than the installed header are
//! compared only where the header has them. Without the headers this test fails and names the
//! missing package.

use std::collections::BTreeMap;
use std::mem::{align_of, offset_of, size_of};

use aqueduct::aql::{AgentDispatchPacket, BarrierPacket, BarrierValuePacket, KernelDispatchPacket};
use aqueduct::AmdSignal;
use aqueduct_kfd_emu::abi::*;

#[cfg(emu_layout_headers)]
fn header_values() -> BTreeMap<String, u64> {
    #[repr(C)]
    struct Entry {
        name: *const std::ffi::c_char,
        value: u64,
    }
    extern "C" {
        static aqueduct_emu_layout: [Entry; 0];
    }
    let mut out = BTreeMap::new();
    // SAFETY: the C table is a static array terminated by a null name.
    unsafe {
        let mut p = std::ptr::addr_of!(aqueduct_emu_layout).cast::<Entry>();
        while !(*p).name.is_null() {
            let name = std::ffi::CStr::from_ptr((*p).name).to_string_lossy().into_owned();
            out.insert(name, (*p).value);
            p = p.add(1);
        }
    }
    out
}

#[cfg(not(emu_layout_headers))]
fn header_values() -> BTreeMap<String, u64> {
    panic!(
        "layout test needs the system headers: {} — install with `apt-get install linux-libc-dev libhsa-runtime-dev`",
        env!("EMU_LAYOUT_MISSING")
    );
}

macro_rules! o {
    ($m:ident, $c:literal, $t:ty, $($f:ident),+) => {
        $( $m.insert(concat!($c, ".", stringify!($f)).to_owned(), offset_of!($t, $f) as u64); )+
    };
}

fn ours() -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    let mut s = |name: &str, v: usize| {
        m.insert(format!("sizeof {name}"), v as u64);
    };
    s("kfd_ioctl_get_version_args", size_of::<GetVersionArgs>());
    s("kfd_ioctl_create_queue_args", size_of::<CreateQueueArgs>());
    s("kfd_ioctl_create_queue_args (<=1.16)", offset_of!(CreateQueueArgs, sdma_engine_id));
    s("kfd_ioctl_destroy_queue_args", size_of::<DestroyQueueArgs>());
    s("kfd_ioctl_update_queue_args", size_of::<UpdateQueueArgs>());
    s("kfd_ioctl_set_cu_mask_args", size_of::<SetCuMaskArgs>());
    s("kfd_ioctl_get_clock_counters_args", size_of::<GetClockCountersArgs>());
    s("kfd_process_device_apertures", size_of::<ProcessDeviceApertures>());
    s("kfd_ioctl_get_process_apertures_new_args", size_of::<GetProcessAperturesNewArgs>());
    s("kfd_ioctl_acquire_vm_args", size_of::<AcquireVmArgs>());
    s("kfd_ioctl_alloc_memory_of_gpu_args", size_of::<AllocMemoryOfGpuArgs>());
    s("kfd_ioctl_free_memory_of_gpu_args", size_of::<FreeMemoryOfGpuArgs>());
    s("kfd_ioctl_import_dmabuf_args", size_of::<ImportDmabufArgs>());
    s("kfd_ioctl_get_dmabuf_info_args", size_of::<GetDmabufInfoArgs>());
    s("kfd_ioctl_map_memory_to_gpu_args", size_of::<MapMemoryArgs>());
    s("kfd_ioctl_unmap_memory_from_gpu_args", size_of::<MapMemoryArgs>());
    s("kfd_ioctl_create_event_args", size_of::<CreateEventArgs>());
    s("kfd_ioctl_destroy_event_args", size_of::<EventIdArgs>());
    s("kfd_ioctl_set_event_args", size_of::<EventIdArgs>());
    s("kfd_ioctl_reset_event_args", size_of::<EventIdArgs>());
    s("kfd_hsa_memory_exception_data", size_of::<MemoryExceptionData>());
    s("kfd_hsa_hw_exception_data", size_of::<HwExceptionData>());
    s("kfd_event_data", size_of::<EventData>());
    s("kfd_ioctl_wait_events_args", size_of::<WaitEventsArgs>());
    s("hsa_kernel_dispatch_packet_t", size_of::<KernelDispatchPacket>());
    s("hsa_barrier_and_packet_t", size_of::<BarrierPacket>());
    s("hsa_barrier_or_packet_t", size_of::<BarrierPacket>());
    s("hsa_agent_dispatch_packet_t", size_of::<AgentDispatchPacket>());
    s("hsa_amd_barrier_value_packet_t", size_of::<BarrierValuePacket>());
    s("hsa_queue_t", size_of::<HsaQueue>());
    s("amd_signal_t", size_of::<AmdSignal>());
    s("amd_queue_t", size_of::<AmdQueue>());
    m.insert("alignof amd_signal_t".into(), align_of::<AmdSignal>() as u64);
    m.insert("alignof amd_queue_t".into(), align_of::<AmdQueue>() as u64);
    m.insert("kfd_ioctl_get_version_args.minor_version".into(), 4);
    o!(
        m,
        "kfd_ioctl_create_queue_args",
        CreateQueueArgs,
        write_pointer_address,
        read_pointer_address,
        doorbell_offset,
        ring_size,
        gpu_id,
        queue_type,
        queue_percentage,
        queue_priority,
        queue_id,
        eop_buffer_address,
        eop_buffer_size,
        ctx_save_restore_address,
        ctx_save_restore_size,
        ctl_stack_size,
        sdma_engine_id
    );
    o!(m, "kfd_ioctl_update_queue_args", UpdateQueueArgs, queue_id, ring_size, queue_percentage, queue_priority);
    o!(m, "kfd_ioctl_set_cu_mask_args", SetCuMaskArgs, num_cu_mask, cu_mask_ptr);
    o!(
        m,
        "kfd_ioctl_get_clock_counters_args",
        GetClockCountersArgs,
        cpu_clock_counter,
        system_clock_counter,
        system_clock_freq,
        gpu_id
    );
    o!(
        m,
        "kfd_process_device_apertures",
        ProcessDeviceApertures,
        lds_limit,
        scratch_base,
        scratch_limit,
        gpuvm_base,
        gpuvm_limit,
        gpu_id
    );
    o!(m, "kfd_ioctl_get_process_apertures_new_args", GetProcessAperturesNewArgs, num_of_nodes);
    o!(m, "kfd_ioctl_acquire_vm_args", AcquireVmArgs, gpu_id);
    o!(m, "kfd_ioctl_alloc_memory_of_gpu_args", AllocMemoryOfGpuArgs, size, handle, mmap_offset, gpu_id, flags);
    o!(m, "kfd_ioctl_import_dmabuf_args", ImportDmabufArgs, handle, gpu_id, dmabuf_fd);
    o!(m, "kfd_ioctl_get_dmabuf_info_args", GetDmabufInfoArgs, metadata_ptr, metadata_size, gpu_id, flags, dmabuf_fd);
    o!(m, "kfd_ioctl_map_memory_to_gpu_args", MapMemoryArgs, device_ids_array_ptr, n_devices, n_success);
    o!(m, "kfd_ioctl_unmap_memory_from_gpu_args", MapMemoryArgs, device_ids_array_ptr, n_devices, n_success);
    o!(
        m,
        "kfd_ioctl_create_event_args",
        CreateEventArgs,
        event_trigger_data,
        event_type,
        auto_reset,
        node_id,
        event_id,
        event_slot_index
    );
    o!(m, "kfd_hsa_memory_exception_data", MemoryExceptionData, va, gpu_id);
    m.insert("kfd_hsa_memory_exception_data.ErrorType".into(), offset_of!(MemoryExceptionData, error_type) as u64);
    o!(m, "kfd_hsa_hw_exception_data", HwExceptionData, memory_lost, gpu_id);
    o!(m, "kfd_event_data", EventData, kfd_event_data_ext, event_id);
    o!(m, "kfd_ioctl_wait_events_args", WaitEventsArgs, num_events, wait_for_all, timeout, wait_result);
    o!(
        m,
        "hsa_kernel_dispatch_packet_t",
        KernelDispatchPacket,
        setup,
        workgroup_size_x,
        reserved0,
        grid_size_x,
        grid_size_z,
        private_segment_size,
        group_segment_size,
        kernel_object,
        kernarg_address,
        reserved2,
        completion_signal
    );
    o!(m, "hsa_barrier_and_packet_t", BarrierPacket, dep_signal, completion_signal);
    o!(m, "hsa_barrier_or_packet_t", BarrierPacket, dep_signal, completion_signal);
    m.insert("hsa_agent_dispatch_packet_t.type".into(), offset_of!(AgentDispatchPacket, kind) as u64);
    o!(m, "hsa_agent_dispatch_packet_t", AgentDispatchPacket, return_address, arg, completion_signal);
    o!(m, "hsa_amd_barrier_value_packet_t", BarrierValuePacket, signal, value, mask, cond, completion_signal);
    o!(m, "hsa_queue_t", HsaQueue, features, base_address, doorbell_signal, size, id);
    o!(m, "amd_signal_t", AmdSignal, value, event_mailbox_ptr, event_id, start_ts, end_ts, queue_ptr);
    o!(
        m,
        "amd_queue_t",
        AmdQueue,
        write_dispatch_id,
        group_segment_aperture_base_hi,
        private_segment_aperture_base_hi,
        max_cu_id,
        max_wave_id,
        max_legacy_doorbell_dispatch_id_plus_1,
        legacy_doorbell_lock,
        read_dispatch_id,
        read_dispatch_id_field_base_byte_offset,
        compute_tmpring_size,
        scratch_resource_descriptor,
        scratch_backing_memory_location,
        scratch_backing_memory_byte_size,
        scratch_wave64_lane_byte_size,
        queue_properties,
        queue_inactive_signal
    );
    m.insert("AMD_QUEUE_PROPERTIES_ENABLE_PROFILING".into(), queue_properties::ENABLE_PROFILING.into());
    // Constants.
    for (k, v) in [
        ("KFD_IOCTL_MAJOR_VERSION", 1u64),
        ("AMDKFD_IOC_GET_VERSION", request::GET_VERSION),
        ("AMDKFD_IOC_DESTROY_QUEUE", request::DESTROY_QUEUE),
        ("AMDKFD_IOC_GET_CLOCK_COUNTERS", request::GET_CLOCK_COUNTERS),
        ("AMDKFD_IOC_UPDATE_QUEUE", request::UPDATE_QUEUE),
        ("AMDKFD_IOC_CREATE_EVENT", request::CREATE_EVENT),
        ("AMDKFD_IOC_DESTROY_EVENT", request::DESTROY_EVENT),
        ("AMDKFD_IOC_SET_EVENT", request::SET_EVENT),
        ("AMDKFD_IOC_RESET_EVENT", request::RESET_EVENT),
        ("AMDKFD_IOC_WAIT_EVENTS", request::WAIT_EVENTS),
        ("AMDKFD_IOC_GET_PROCESS_APERTURES_NEW", request::GET_PROCESS_APERTURES_NEW),
        ("AMDKFD_IOC_ACQUIRE_VM", request::ACQUIRE_VM),
        ("AMDKFD_IOC_ALLOC_MEMORY_OF_GPU", request::ALLOC_MEMORY_OF_GPU),
        ("AMDKFD_IOC_FREE_MEMORY_OF_GPU", request::FREE_MEMORY_OF_GPU),
        ("AMDKFD_IOC_MAP_MEMORY_TO_GPU", request::MAP_MEMORY_TO_GPU),
        ("AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU", request::UNMAP_MEMORY_FROM_GPU),
        ("AMDKFD_IOC_SET_CU_MASK", request::SET_CU_MASK),
        ("KFD_IOC_ALLOC_MEM_FLAGS_VRAM", mem_flags::VRAM.into()),
        ("KFD_IOC_ALLOC_MEM_FLAGS_GTT", mem_flags::GTT.into()),
        ("KFD_IOC_ALLOC_MEM_FLAGS_USERPTR", mem_flags::USERPTR.into()),
        ("KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL", mem_flags::DOORBELL.into()),
        ("KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP", mem_flags::MMIO_REMAP.into()),
        ("KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE", mem_flags::WRITABLE.into()),
        ("KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE", mem_flags::EXECUTABLE.into()),
        ("KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC", mem_flags::PUBLIC.into()),
        ("KFD_IOC_ALLOC_MEM_FLAGS_COHERENT", mem_flags::COHERENT.into()),
        ("KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED", mem_flags::UNCACHED.into()),
        ("KFD_IOC_QUEUE_TYPE_COMPUTE_AQL", queue_type::COMPUTE_AQL.into()),
        ("KFD_IOC_EVENT_SIGNAL", event_type::SIGNAL.into()),
        ("KFD_IOC_EVENT_HW_EXCEPTION", event_type::HW_EXCEPTION.into()),
        ("KFD_IOC_EVENT_MEMORY", event_type::MEMORY.into()),
        ("KFD_IOC_WAIT_RESULT_TIMEOUT", wait_result::TIMEOUT.into()),
        ("KFD_SIGNAL_EVENT_LIMIT", limits::SIGNAL_EVENT_LIMIT.into()),
        ("KFD_MAX_QUEUE_PRIORITY", limits::MAX_QUEUE_PRIORITY.into()),
        ("KFD_MAX_QUEUE_PERCENTAGE", limits::MAX_QUEUE_PERCENTAGE.into()),
        ("HSA_PACKET_TYPE_INVALID", 1),
        ("HSA_PACKET_TYPE_KERNEL_DISPATCH", 2),
        ("HSA_PACKET_TYPE_BARRIER_AND", 3),
        ("HSA_PACKET_TYPE_BARRIER_OR", 5),
        ("HSA_PACKET_HEADER_BARRIER", 8),
        ("HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE", 9),
        ("HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE", 11),
    ] {
        m.insert(k.to_owned(), v);
    }
    m
}

#[test]
fn abi_layouts_match_the_system_headers() {
    let theirs = header_values();
    let ours = ours();
    let minor = theirs["KFD_IOCTL_MINOR_VERSION"];
    let create_queue = if minor >= 17 { request::CREATE_QUEUE } else { request::CREATE_QUEUE_88 };
    let mut checked = 0;
    let mut bad = Vec::new();
    for (name, &v) in &theirs {
        let expect = match name.as_str() {
            "KFD_IOCTL_MINOR_VERSION" => continue,
            "AMDKFD_IOC_CREATE_QUEUE" => create_queue,
            n => *ours.get(n).unwrap_or_else(|| panic!("no Rust counterpart for {n}")),
        };
        checked += 1;
        if v != expect {
            bad.push(format!("{name}: header {v}, ours {expect}"));
        }
    }
    assert!(bad.is_empty(), "layout mismatches:\n{}", bad.join("\n"));
    assert!(checked > 150, "only {checked} values compared");
}
