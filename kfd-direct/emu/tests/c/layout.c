/* sizeof/offsetof of the real ABI headers, for tests/layout.rs (compiled by build.rs).
 * linux/kfd_ioctl.h comes from linux-libc-dev; hsa/*.h from libhsa-runtime-dev. */
#include <stddef.h>
#include <stdint.h>
#include <linux/kfd_ioctl.h>
#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>
#include <hsa/amd_hsa_queue.h>
#include <hsa/amd_hsa_signal.h>

struct aqueduct_layout_entry {
    const char *name;
    uint64_t value;
};

#define SZ(t) {"sizeof " #t, sizeof(t)}
#define OF(t, f) {#t "." #f, offsetof(t, f)}
#define KS(t) {"sizeof " #t, sizeof(struct t)}
#define KO(t, f) {#t "." #f, offsetof(struct t, f)}
#define RQ(x) {#x, (uint64_t)(x)}
#define FL(x) {#x, (uint64_t)(uint32_t)(x)}

const struct aqueduct_layout_entry aqueduct_emu_layout[] = {
    {"KFD_IOCTL_MAJOR_VERSION", KFD_IOCTL_MAJOR_VERSION},
    {"KFD_IOCTL_MINOR_VERSION", KFD_IOCTL_MINOR_VERSION},
    KS(kfd_ioctl_get_version_args), KO(kfd_ioctl_get_version_args, minor_version),
#if KFD_IOCTL_MINOR_VERSION >= 17
    KS(kfd_ioctl_create_queue_args), KO(kfd_ioctl_create_queue_args, sdma_engine_id),
#else
    {"sizeof kfd_ioctl_create_queue_args (<=1.16)", sizeof(struct kfd_ioctl_create_queue_args)},
#endif
    KO(kfd_ioctl_create_queue_args, write_pointer_address), KO(kfd_ioctl_create_queue_args, read_pointer_address),
    KO(kfd_ioctl_create_queue_args, doorbell_offset), KO(kfd_ioctl_create_queue_args, ring_size),
    KO(kfd_ioctl_create_queue_args, gpu_id), KO(kfd_ioctl_create_queue_args, queue_type),
    KO(kfd_ioctl_create_queue_args, queue_percentage), KO(kfd_ioctl_create_queue_args, queue_priority),
    KO(kfd_ioctl_create_queue_args, queue_id), KO(kfd_ioctl_create_queue_args, eop_buffer_address),
    KO(kfd_ioctl_create_queue_args, eop_buffer_size), KO(kfd_ioctl_create_queue_args, ctx_save_restore_address),
    KO(kfd_ioctl_create_queue_args, ctx_save_restore_size), KO(kfd_ioctl_create_queue_args, ctl_stack_size),
    KS(kfd_ioctl_destroy_queue_args),
    KS(kfd_ioctl_update_queue_args), KO(kfd_ioctl_update_queue_args, queue_id), KO(kfd_ioctl_update_queue_args, ring_size),
    KO(kfd_ioctl_update_queue_args, queue_percentage), KO(kfd_ioctl_update_queue_args, queue_priority),
    KS(kfd_ioctl_set_cu_mask_args), KO(kfd_ioctl_set_cu_mask_args, num_cu_mask), KO(kfd_ioctl_set_cu_mask_args, cu_mask_ptr),
    KS(kfd_ioctl_get_clock_counters_args), KO(kfd_ioctl_get_clock_counters_args, cpu_clock_counter),
    KO(kfd_ioctl_get_clock_counters_args, system_clock_counter), KO(kfd_ioctl_get_clock_counters_args, system_clock_freq),
    KO(kfd_ioctl_get_clock_counters_args, gpu_id),
    KS(kfd_process_device_apertures), KO(kfd_process_device_apertures, lds_limit), KO(kfd_process_device_apertures, scratch_base),
    KO(kfd_process_device_apertures, scratch_limit), KO(kfd_process_device_apertures, gpuvm_base),
    KO(kfd_process_device_apertures, gpuvm_limit), KO(kfd_process_device_apertures, gpu_id),
    KS(kfd_ioctl_get_process_apertures_new_args), KO(kfd_ioctl_get_process_apertures_new_args, num_of_nodes),
    KS(kfd_ioctl_acquire_vm_args), KO(kfd_ioctl_acquire_vm_args, gpu_id),
    KS(kfd_ioctl_alloc_memory_of_gpu_args), KO(kfd_ioctl_alloc_memory_of_gpu_args, size), KO(kfd_ioctl_alloc_memory_of_gpu_args, handle),
    KO(kfd_ioctl_alloc_memory_of_gpu_args, mmap_offset), KO(kfd_ioctl_alloc_memory_of_gpu_args, gpu_id),
    KO(kfd_ioctl_alloc_memory_of_gpu_args, flags),
    KS(kfd_ioctl_free_memory_of_gpu_args),
    KS(kfd_ioctl_import_dmabuf_args), KO(kfd_ioctl_import_dmabuf_args, handle), KO(kfd_ioctl_import_dmabuf_args, gpu_id),
    KO(kfd_ioctl_import_dmabuf_args, dmabuf_fd),
    KS(kfd_ioctl_get_dmabuf_info_args), KO(kfd_ioctl_get_dmabuf_info_args, metadata_ptr),
    KO(kfd_ioctl_get_dmabuf_info_args, metadata_size), KO(kfd_ioctl_get_dmabuf_info_args, gpu_id),
    KO(kfd_ioctl_get_dmabuf_info_args, flags), KO(kfd_ioctl_get_dmabuf_info_args, dmabuf_fd),
    KS(kfd_ioctl_map_memory_to_gpu_args), KO(kfd_ioctl_map_memory_to_gpu_args, device_ids_array_ptr),
    KO(kfd_ioctl_map_memory_to_gpu_args, n_devices), KO(kfd_ioctl_map_memory_to_gpu_args, n_success),
    KS(kfd_ioctl_unmap_memory_from_gpu_args), KO(kfd_ioctl_unmap_memory_from_gpu_args, device_ids_array_ptr),
    KO(kfd_ioctl_unmap_memory_from_gpu_args, n_devices), KO(kfd_ioctl_unmap_memory_from_gpu_args, n_success),
    KS(kfd_ioctl_create_event_args), KO(kfd_ioctl_create_event_args, event_trigger_data), KO(kfd_ioctl_create_event_args, event_type),
    KO(kfd_ioctl_create_event_args, auto_reset), KO(kfd_ioctl_create_event_args, node_id), KO(kfd_ioctl_create_event_args, event_id),
    KO(kfd_ioctl_create_event_args, event_slot_index),
    KS(kfd_ioctl_destroy_event_args), KS(kfd_ioctl_set_event_args), KS(kfd_ioctl_reset_event_args),
    KS(kfd_hsa_memory_exception_data), KO(kfd_hsa_memory_exception_data, va), KO(kfd_hsa_memory_exception_data, gpu_id),
    KO(kfd_hsa_memory_exception_data, ErrorType),
    KS(kfd_hsa_hw_exception_data), KO(kfd_hsa_hw_exception_data, memory_lost), KO(kfd_hsa_hw_exception_data, gpu_id),
    KS(kfd_event_data), KO(kfd_event_data, kfd_event_data_ext), KO(kfd_event_data, event_id),
    KS(kfd_ioctl_wait_events_args), KO(kfd_ioctl_wait_events_args, num_events), KO(kfd_ioctl_wait_events_args, wait_for_all),
    KO(kfd_ioctl_wait_events_args, timeout), KO(kfd_ioctl_wait_events_args, wait_result),
    RQ(AMDKFD_IOC_GET_VERSION), RQ(AMDKFD_IOC_CREATE_QUEUE), RQ(AMDKFD_IOC_DESTROY_QUEUE), RQ(AMDKFD_IOC_GET_CLOCK_COUNTERS),
    RQ(AMDKFD_IOC_UPDATE_QUEUE), RQ(AMDKFD_IOC_CREATE_EVENT), RQ(AMDKFD_IOC_DESTROY_EVENT), RQ(AMDKFD_IOC_SET_EVENT),
    RQ(AMDKFD_IOC_RESET_EVENT), RQ(AMDKFD_IOC_WAIT_EVENTS), RQ(AMDKFD_IOC_GET_PROCESS_APERTURES_NEW), RQ(AMDKFD_IOC_ACQUIRE_VM),
    RQ(AMDKFD_IOC_ALLOC_MEMORY_OF_GPU), RQ(AMDKFD_IOC_FREE_MEMORY_OF_GPU), RQ(AMDKFD_IOC_MAP_MEMORY_TO_GPU),
    RQ(AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU), RQ(AMDKFD_IOC_SET_CU_MASK),
    FL(KFD_IOC_ALLOC_MEM_FLAGS_VRAM), FL(KFD_IOC_ALLOC_MEM_FLAGS_GTT), FL(KFD_IOC_ALLOC_MEM_FLAGS_USERPTR),
    FL(KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL), FL(KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP), FL(KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE),
    FL(KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE), FL(KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC), FL(KFD_IOC_ALLOC_MEM_FLAGS_COHERENT),
    FL(KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED), RQ(KFD_IOC_QUEUE_TYPE_COMPUTE_AQL), RQ(KFD_IOC_EVENT_SIGNAL),
    RQ(KFD_IOC_EVENT_HW_EXCEPTION), RQ(KFD_IOC_EVENT_MEMORY), RQ(KFD_IOC_WAIT_RESULT_TIMEOUT), RQ(KFD_SIGNAL_EVENT_LIMIT),
    RQ(KFD_MAX_QUEUE_PRIORITY), RQ(KFD_MAX_QUEUE_PERCENTAGE),
    /* hsa.h packets and hsa_queue_t */
    SZ(hsa_kernel_dispatch_packet_t), OF(hsa_kernel_dispatch_packet_t, setup), OF(hsa_kernel_dispatch_packet_t, workgroup_size_x),
    OF(hsa_kernel_dispatch_packet_t, reserved0), OF(hsa_kernel_dispatch_packet_t, grid_size_x), OF(hsa_kernel_dispatch_packet_t, grid_size_z),
    OF(hsa_kernel_dispatch_packet_t, private_segment_size), OF(hsa_kernel_dispatch_packet_t, group_segment_size),
    OF(hsa_kernel_dispatch_packet_t, kernel_object), OF(hsa_kernel_dispatch_packet_t, kernarg_address),
    OF(hsa_kernel_dispatch_packet_t, reserved2), OF(hsa_kernel_dispatch_packet_t, completion_signal),
    SZ(hsa_barrier_and_packet_t), OF(hsa_barrier_and_packet_t, dep_signal), OF(hsa_barrier_and_packet_t, completion_signal),
    SZ(hsa_barrier_or_packet_t), OF(hsa_barrier_or_packet_t, dep_signal), OF(hsa_barrier_or_packet_t, completion_signal),
    SZ(hsa_agent_dispatch_packet_t), OF(hsa_agent_dispatch_packet_t, type), OF(hsa_agent_dispatch_packet_t, return_address),
    OF(hsa_agent_dispatch_packet_t, arg), OF(hsa_agent_dispatch_packet_t, completion_signal),
    SZ(hsa_amd_barrier_value_packet_t), OF(hsa_amd_barrier_value_packet_t, signal), OF(hsa_amd_barrier_value_packet_t, value),
    OF(hsa_amd_barrier_value_packet_t, mask), OF(hsa_amd_barrier_value_packet_t, cond), OF(hsa_amd_barrier_value_packet_t, completion_signal),
    RQ(HSA_PACKET_TYPE_INVALID), RQ(HSA_PACKET_TYPE_KERNEL_DISPATCH), RQ(HSA_PACKET_TYPE_BARRIER_AND), RQ(HSA_PACKET_TYPE_BARRIER_OR),
    RQ(HSA_PACKET_HEADER_BARRIER), RQ(HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE), RQ(HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE),
    SZ(hsa_queue_t), OF(hsa_queue_t, features), OF(hsa_queue_t, base_address), OF(hsa_queue_t, doorbell_signal),
    OF(hsa_queue_t, size), OF(hsa_queue_t, id),
    /* amd_hsa_signal.h, amd_hsa_queue.h */
    SZ(amd_signal_t), OF(amd_signal_t, value), OF(amd_signal_t, event_mailbox_ptr), OF(amd_signal_t, event_id),
    OF(amd_signal_t, start_ts), OF(amd_signal_t, end_ts), OF(amd_signal_t, queue_ptr),
    {"alignof amd_signal_t", _Alignof(amd_signal_t)},
    SZ(amd_queue_t), OF(amd_queue_t, write_dispatch_id), OF(amd_queue_t, group_segment_aperture_base_hi),
    OF(amd_queue_t, private_segment_aperture_base_hi), OF(amd_queue_t, max_cu_id), OF(amd_queue_t, max_wave_id),
    OF(amd_queue_t, max_legacy_doorbell_dispatch_id_plus_1), OF(amd_queue_t, legacy_doorbell_lock),
    OF(amd_queue_t, read_dispatch_id), OF(amd_queue_t, read_dispatch_id_field_base_byte_offset),
    OF(amd_queue_t, compute_tmpring_size), OF(amd_queue_t, scratch_resource_descriptor),
    OF(amd_queue_t, scratch_backing_memory_location), OF(amd_queue_t, scratch_backing_memory_byte_size),
    OF(amd_queue_t, scratch_wave64_lane_byte_size), OF(amd_queue_t, queue_properties), OF(amd_queue_t, queue_inactive_signal),
    {"alignof amd_queue_t", _Alignof(amd_queue_t)},
    RQ(AMD_QUEUE_PROPERTIES_ENABLE_PROFILING),
    {0, 0},
};
