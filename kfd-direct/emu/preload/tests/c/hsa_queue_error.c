/* Stage 6: a malformed dispatch (work-group size 0) is a queue error that ROCr reports to the
 * queue's error callback, as on hardware. */
#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>

static hsa_status_t find_gpu(hsa_agent_t a, void *out) {
    hsa_device_type_t t;
    hsa_agent_get_info(a, HSA_AGENT_INFO_DEVICE, &t);
    if (t == HSA_DEVICE_TYPE_GPU) { *(hsa_agent_t *)out = a; return HSA_STATUS_INFO_BREAK; }
    return HSA_STATUS_SUCCESS;
}

static void on_error(hsa_status_t status, hsa_queue_t *q, void *data) {
    const char *m = 0;
    hsa_status_string(status, &m);
    printf("queue error callback: %#x (%s)\n", status, m ? m : "?");
    fflush(stdout);
    _exit(42);
}

int main(void) {
    if (hsa_init() != HSA_STATUS_SUCCESS) return 1;
    hsa_agent_t gpu = {0};
    hsa_iterate_agents(find_gpu, &gpu);
    hsa_queue_t *q;
    if (hsa_queue_create(gpu, 64, HSA_QUEUE_TYPE_SINGLE, on_error, NULL, UINT32_MAX, UINT32_MAX, &q)) return 1;
    hsa_signal_t done;
    hsa_signal_create(1, 0, NULL, &done);
    uint64_t idx = hsa_queue_add_write_index_relaxed(q, 1);
    hsa_kernel_dispatch_packet_t *p = (hsa_kernel_dispatch_packet_t *)q->base_address + (idx % q->size);
    memset((char *)p + 4, 0, sizeof(*p) - 4);
    p->setup = 1;
    p->workgroup_size_x = 0; /* invalid */
    p->workgroup_size_y = p->workgroup_size_z = 1;
    p->grid_size_x = 64; p->grid_size_y = p->grid_size_z = 1;
    p->kernel_object = 0x1000;
    p->completion_signal = done;
    uint16_t header = (HSA_PACKET_TYPE_KERNEL_DISPATCH << HSA_PACKET_HEADER_TYPE) | (1 << HSA_PACKET_HEADER_BARRIER);
    __atomic_store_n((uint32_t *)p, header | ((uint32_t)p->setup << 16), __ATOMIC_RELEASE);
    hsa_signal_store_screlease(q->doorbell_signal, idx);
    /* The callback exits; waiting here must not be forever. */
    hsa_signal_wait_scacquire(done, HSA_SIGNAL_CONDITION_LT, 1, 20ull * 1000 * 1000 * 1000, HSA_WAIT_STATE_BLOCKED);
    printf("no queue error reported\n");
    return 1;
}
