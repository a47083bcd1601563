/* Stage 3: ROCr copies (H2D, D2D, misaligned D2H) and fill, verified byte by byte. */
#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

#define CHECK(x) do { hsa_status_t s_ = (x); if (s_ != HSA_STATUS_SUCCESS) { \
    const char *m_ = 0; hsa_status_string(s_, &m_); \
    fprintf(stderr, "%s:%d %s = %#x (%s)\n", __FILE__, __LINE__, #x, s_, m_ ? m_ : "?"); exit(1); } } while (0)

static hsa_agent_t gpu, cpu;
static hsa_amd_memory_pool_t vram, sysmem;

static hsa_status_t find_agents(hsa_agent_t a, void *unused) {
    hsa_device_type_t t;
    hsa_agent_get_info(a, HSA_AGENT_INFO_DEVICE, &t);
    if (t == HSA_DEVICE_TYPE_GPU && !gpu.handle) gpu = a;
    if (t == HSA_DEVICE_TYPE_CPU && !cpu.handle) cpu = a;
    return HSA_STATUS_SUCCESS;
}

static hsa_status_t find_pool(hsa_amd_memory_pool_t p, void *data) {
    hsa_amd_segment_t seg;
    uint32_t flags = 0;
    hsa_amd_memory_pool_get_info(p, HSA_AMD_MEMORY_POOL_INFO_SEGMENT, &seg);
    if (seg != HSA_AMD_SEGMENT_GLOBAL) return HSA_STATUS_SUCCESS;
    hsa_amd_memory_pool_get_info(p, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, &flags);
    hsa_amd_memory_pool_t *out = data;
    if (!out->handle) *out = p;
    return HSA_STATUS_SUCCESS;
}

static void copy(void *dst, hsa_agent_t da, const void *src, hsa_agent_t sa, size_t n) {
    hsa_signal_t s;
    CHECK(hsa_signal_create(1, 0, NULL, &s));
    CHECK(hsa_amd_memory_async_copy(dst, da, src, sa, n, 0, NULL, s));
    if (hsa_signal_wait_scacquire(s, HSA_SIGNAL_CONDITION_LT, 1, UINT64_MAX, HSA_WAIT_STATE_BLOCKED) != 0) {
        fprintf(stderr, "copy signal not 0\n"); exit(1);
    }
    hsa_signal_destroy(s);
}

static void check(const unsigned char *got, const unsigned char *want, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i]) { fprintf(stderr, "%s: byte %zu is %#x, want %#x\n", what, i, got[i], want[i]); exit(1); }
}

int main(void) {
    CHECK(hsa_init());
    hsa_iterate_agents(find_agents, NULL);
    if (!gpu.handle || !cpu.handle) { fprintf(stderr, "agents missing\n"); return 1; }
    CHECK(hsa_amd_agent_iterate_memory_pools(gpu, find_pool, &vram));
    CHECK(hsa_amd_agent_iterate_memory_pools(cpu, find_pool, &sysmem));
    const size_t n = 1 << 20;
    unsigned char *h1, *h2;
    void *d1, *d2;
    CHECK(hsa_amd_memory_pool_allocate(sysmem, n, 0, (void **)&h1));
    CHECK(hsa_amd_memory_pool_allocate(sysmem, n, 0, (void **)&h2));
    CHECK(hsa_amd_memory_pool_allocate(vram, n, 0, &d1));
    CHECK(hsa_amd_memory_pool_allocate(vram, n, 0, &d2));
    hsa_agent_t both[2] = {gpu, cpu};
    CHECK(hsa_amd_agents_allow_access(2, both, NULL, h1));
    CHECK(hsa_amd_agents_allow_access(2, both, NULL, h2));
    for (size_t i = 0; i < n; i++) h1[i] = (unsigned char)(i * 7 + 3);
    memset(h2, 0, n);
    copy(d1, gpu, h1, cpu, n);                  /* H2D */
    copy(d2, gpu, d1, gpu, n);                  /* D2D */
    copy(h2 + 3, cpu, (char *)d2 + 5, gpu, n - 1000); /* D2H, misaligned */
    check(h2 + 3, h1 + 5, n - 1000, "H2D+D2D+misaligned D2H");
    if (h2[0] || h2[1] || h2[2] || h2[n - 1000 + 3]) { fprintf(stderr, "D2H wrote outside its range\n"); return 1; }
    /* Pageable (malloc) memory, H2D and D2H: ROCr pins it at a new GPU address. */
    unsigned char *m = malloc(n), *back = malloc(n);
    for (size_t i = 0; i < n; i++) m[i] = (unsigned char)(i ^ 0x5a);
    void *pinned_m, *pinned_b;
    CHECK(hsa_amd_memory_lock(m, n, NULL, 0, &pinned_m));
    CHECK(hsa_amd_memory_lock(back, n, NULL, 0, &pinned_b));
    copy(d1, gpu, pinned_m, cpu, n);
    copy(pinned_b, cpu, d1, gpu, n);
    check(back, m, n, "locked H2D/D2H");
    CHECK(hsa_amd_memory_unlock(m));
    CHECK(hsa_amd_memory_unlock(back));
    /* Fill */
    CHECK(hsa_amd_memory_fill(d2, 0xdeadbeef, n / 4));
    copy(h2, cpu, d2, gpu, n);
    for (size_t i = 0; i < n / 4; i++)
        if (((uint32_t *)h2)[i] != 0xdeadbeef) { fprintf(stderr, "fill word %zu = %#x\n", i, ((uint32_t *)h2)[i]); return 1; }
    hsa_amd_memory_pool_free(h1); hsa_amd_memory_pool_free(h2);
    hsa_amd_memory_pool_free(d1); hsa_amd_memory_pool_free(d2);
    free(m); free(back);
    CHECK(hsa_shut_down());
    printf("copies ok\n");
    return 0;
}
