/* Side-by-side HIP API benchmark (build against libamdhip64 on the emulator, or later against
 * libaqueduct_hip). usage: hip_bench CODE_OBJECT (user_kernels.co built from user_kernels.cl) */
#include <hip/hip_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(x) do { hipError_t e_ = (x); if (e_ != hipSuccess) { fprintf(stderr, "%s = %d\n", #x, e_); exit(1); } } while (0)
extern void **__hipRegisterFatBinary(const void *);
extern void __hipRegisterFunction(void **, const void *, char *, const char *, unsigned, void *, void *, void *, void *, int *);
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
static void poke_stub(void) {}
struct fatbin_wrapper { int magic; int version; const void *binary; void *unused; };

int main(int argc, char **argv) {
    FILE *f = fopen(argv[1], "rb"); fseek(f, 0, SEEK_END); size_t len = ftell(f); fseek(f, 0, SEEK_SET);
    char *co = malloc(len); if (fread(co, 1, len, f) != len) return 1; fclose(f);
    const char *tr[2] = {"host-x86_64-unknown-linux", "hipv4-amdgcn-amd-amdhsa--gfx90a"};
    char *b = aligned_alloc(4096, 4096 + len + 4096); memset(b, 0, 4096);
    memcpy(b, "__CLANG_OFFLOAD_BUNDLE__", 24); uint64_t n2 = 2, off = 32; memcpy(b + 24, &n2, 8);
    for (int i = 0; i < 2; i++) { uint64_t o = i ? 4096 : 0, s = i ? len : 0, tl = strlen(tr[i]);
        memcpy(b + off, &o, 8); memcpy(b + off + 8, &s, 8); memcpy(b + off + 16, &tl, 8); memcpy(b + off + 24, tr[i], tl); off += 24 + tl; }
    memcpy(b + 4096, co, len);
    static struct fatbin_wrapper w = {0x48495046, 1, 0, 0}; w.binary = b;
    void **h = __hipRegisterFatBinary(&w);
    __hipRegisterFunction(h, (const void *)poke_stub, "aqueduct_poke", "aqueduct_poke", (unsigned)-1, 0, 0, 0, 0, 0);
    unsigned *d; CHECK(hipMalloc((void **)&d, 4096));
    unsigned v = 1; void *args[] = {&d, &v};
    dim3 g = {1, 1, 1}, blk = {64, 1, 1};
    hipStream_t s; CHECK(hipStreamCreate(&s));
    CHECK(hipLaunchKernel((const void *)poke_stub, g, blk, args, 0, s)); CHECK(hipStreamSynchronize(s));
    int N = 2000; double t;
    t = now(); for (int i = 0; i < 200; i++) { hipStream_t x; CHECK(hipStreamCreate(&x)); CHECK(hipStreamDestroy(x)); }
    printf("stream create+destroy: %.2f us\n", (now() - t) / 200 / 1e3);
    t = now(); for (int i = 0; i < N; i++) CHECK(hipLaunchKernel((const void *)poke_stub, g, blk, args, 0, s));
    double enq = (now() - t) / N; CHECK(hipStreamSynchronize(s));
    printf("launch enqueue: %.2f us\n", enq / 1e3);
    t = now(); for (int i = 0; i < 500; i++) { CHECK(hipLaunchKernel((const void *)poke_stub, g, blk, args, 0, s)); CHECK(hipStreamSynchronize(s)); }
    printf("launch+sync round trip: %.2f us\n", (now() - t) / 500 / 1e3);
    hipEvent_t e; CHECK(hipEventCreate(&e));
    t = now(); for (int i = 0; i < 500; i++) { CHECK(hipEventRecord(e, s)); CHECK(hipEventSynchronize(e)); }
    printf("event record+sync: %.2f us\n", (now() - t) / 500 / 1e3);
    hipGraph_t graph; CHECK(hipGraphCreate(&graph, 0));
    hipGraphNode_t prev = NULL, node;
    hipKernelNodeParams kp = {0}; kp.func = (void *)poke_stub; kp.gridDim = g; kp.blockDim = blk; kp.kernelParams = args;
    for (int i = 0; i < 1000; i++) { CHECK(hipGraphAddKernelNode(&node, graph, prev ? &prev : NULL, prev ? 1 : 0, &kp)); prev = node; }
    hipGraphExec_t ex; CHECK(hipGraphInstantiate(&ex, graph, NULL, NULL, 0));
    CHECK(hipGraphLaunch(ex, s)); CHECK(hipStreamSynchronize(s));
    t = now(); for (int i = 0; i < 5; i++) CHECK(hipGraphLaunch(ex, s));
    double gl = (now() - t) / 5; CHECK(hipStreamSynchronize(s));
    printf("1000-node graph launch (host): %.2f us (%.2f ns/node)\n", gl / 1e3, gl / 1000);
    printf("bench ok\n");
    return 0;
}
