/* Stage 2: ROCr queue creation and a BARRIER_AND packet on the emulated GPU. */
#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

#define CHECK(x) do { hsa_status_t s_ = (x); if (s_ != HSA_STATUS_SUCCESS) { \
    const char *m_ = 0; hsa_status_string(s_, &m_); \
    fprintf(stderr, "%s:%d %s = %#x (%s)\n", __FILE__, __LINE__, #x, s_, m_ ? m_ : "?"); exit(1); } } while (0)

static hsa_status_t find_gpu(hsa_agent_t a, void *out) {
    hsa_device_type_t t;
    hsa_agent_get_info(a, HSA_AGENT_INFO_DEVICE, &t);
    if (t == HSA_DEVICE_TYPE_GPU) { *(hsa_agent_t *)out = a; return HSA_STATUS_INFO_BREAK; }
    return HSA_STATUS_SUCCESS;
}

int main(void) {
    CHECK(hsa_init());
    hsa_agent_t gpu = {0};
    hsa_iterate_agents(find_gpu, &gpu);
    if (!gpu.handle) { fprintf(stderr, "no GPU agent\n"); return 1; }
    char name[64] = {0};
    CHECK(hsa_agent_get_info(gpu, HSA_AGENT_INFO_NAME, name));
    hsa_queue_t *q;
    CHECK(hsa_queue_create(gpu, 64, HSA_QUEUE_TYPE_SINGLE, NULL, NULL, UINT32_MAX, UINT32_MAX, &q));
    for (int round = 0; round < 3; round++) {
        hsa_signal_t done, dep;
        CHECK(hsa_signal_create(1, 0, NULL, &done));
        CHECK(hsa_signal_create(0, 0, NULL, &dep));
        uint64_t idx = hsa_queue_add_write_index_relaxed(q, 1);
        hsa_barrier_and_packet_t *p = (hsa_barrier_and_packet_t *)q->base_address + (idx % q->size);
        memset((char *)p + 4, 0, sizeof(*p) - 4);
        p->dep_signal[0] = dep;
        p->completion_signal = done;
        uint16_t header = (HSA_PACKET_TYPE_BARRIER_AND << HSA_PACKET_HEADER_TYPE) | (1 << HSA_PACKET_HEADER_BARRIER) |
                          (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_ACQUIRE_FENCE_SCOPE) |
                          (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_RELEASE_FENCE_SCOPE);
        __atomic_store_n((uint32_t *)p, header, __ATOMIC_RELEASE);
        hsa_signal_store_screlease(q->doorbell_signal, idx);
        hsa_signal_value_t v = hsa_signal_wait_scacquire(done, HSA_SIGNAL_CONDITION_LT, 1, UINT64_MAX, HSA_WAIT_STATE_BLOCKED);
        if (v != 0) { fprintf(stderr, "barrier signal = %ld\n", (long)v); return 1; }
        hsa_signal_destroy(done);
        hsa_signal_destroy(dep);
    }
    CHECK(hsa_queue_destroy(q));
    CHECK(hsa_shut_down());
    printf("barrier ok on %s\n", name);
    return 0;
}
