/* Stage 4: HIP device properties, memory, streams, events, wait-value, host functions. */
#include <hip/hip_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(x) do { hipError_t e_ = (x); if (e_ != hipSuccess) { \
    fprintf(stderr, "%s:%d %s = %d (%s)\n", __FILE__, __LINE__, #x, e_, hipGetErrorString(e_)); exit(1); } } while (0)

static int host_fn_ran = 0;
static void host_fn(hipStream_t s, hipError_t st, void *p) { (void)s; if (st == hipSuccess) *(int *)p += 1; }

int main(void) {
    int n = 0;
    CHECK(hipGetDeviceCount(&n));
    if (n != 1) { fprintf(stderr, "device count %d\n", n); return 1; }
    hipDeviceProp_t prop;
    CHECK(hipGetDeviceProperties(&prop, 0));
    printf("device %s arch %s CUs %d\n", prop.name, prop.gcnArchName, prop.multiProcessorCount);
    if (strncmp(prop.gcnArchName, "gfx90a", 6) != 0) { fprintf(stderr, "arch %s\n", prop.gcnArchName); return 1; }

    const size_t size = (1 << 20) + 13;
    unsigned char *h = malloc(size), *back = malloc(size);
    for (size_t i = 0; i < size; i++) h[i] = (unsigned char)(i * 13 + 1);
    unsigned char *d1, *d2;
    CHECK(hipMalloc((void **)&d1, size));
    CHECK(hipMalloc((void **)&d2, size));
    CHECK(hipMemcpy(d1, h, size, hipMemcpyHostToDevice));
    CHECK(hipMemcpy(d2 + 3, d1 + 1, size - 8, hipMemcpyDeviceToDevice));
    CHECK(hipMemcpy(back, d2 + 3, size - 8, hipMemcpyDeviceToHost));
    if (memcmp(back, h + 1, size - 8) != 0) { fprintf(stderr, "memcpy H2D/D2D/D2H mismatch\n"); return 1; }
    /* Small copies take the CPU path on large-BAR VRAM. */
    CHECK(hipMemcpy(back, d1 + 5, 64, hipMemcpyDeviceToHost));
    if (memcmp(back, h + 5, 64) != 0) { fprintf(stderr, "small D2H mismatch\n"); return 1; }
    CHECK(hipMemset(d2, 0x5a, size));
    CHECK(hipMemcpy(back, d2, size, hipMemcpyDeviceToHost));
    for (size_t i = 0; i < size; i++) if (back[i] != 0x5a) { fprintf(stderr, "memset byte %zu = %#x\n", i, back[i]); return 1; }
    CHECK(hipMemsetD32((hipDeviceptr_t)d2, 0xdeadbeef, size / 4));
    CHECK(hipMemcpy(back, d2, 16, hipMemcpyDeviceToHost));
    if (((unsigned *)back)[3] != 0xdeadbeef) { fprintf(stderr, "memsetD32 %#x\n", ((unsigned *)back)[3]); return 1; }
    /* Pinned host memory and async copies. */
    unsigned char *pinned;
    CHECK(hipHostMalloc((void **)&pinned, size, 0));

    int lo, hi;
    CHECK(hipDeviceGetStreamPriorityRange(&lo, &hi));
    hipStream_t s[3];
    CHECK(hipStreamCreateWithPriority(&s[0], hipStreamNonBlocking, lo));
    CHECK(hipStreamCreateWithPriority(&s[1], hipStreamNonBlocking, hi));
    CHECK(hipStreamCreate(&s[2]));
    hipEvent_t a, b;
    CHECK(hipEventCreate(&a));
    CHECK(hipEventCreate(&b));
    CHECK(hipEventRecord(a, s[0]));
    CHECK(hipMemcpyAsync(d1, h, size, hipMemcpyHostToDevice, s[0]));
    CHECK(hipMemcpyAsync(pinned, d1, size, hipMemcpyDeviceToHost, s[0]));
    CHECK(hipEventRecord(b, s[0]));
    CHECK(hipEventSynchronize(b));
    float ms = -1;
    CHECK(hipEventElapsedTime(&ms, a, b));
    if (!(ms >= 0)) { fprintf(stderr, "elapsed %f\n", ms); return 1; }
    if (memcmp(pinned, h, size) != 0) { fprintf(stderr, "async round trip mismatch\n"); return 1; }
    CHECK(hipStreamWaitEvent(s[1], b, 0));
    CHECK(hipMemsetAsync(d2, 1, 4096, s[1]));
    CHECK(hipStreamSynchronize(s[1]));
    if (hipStreamQuery(s[1]) != hipSuccess) { fprintf(stderr, "stream query not ready\n"); return 1; }

    /* Wait-value: the stream waits until the host writes the flag. */
    unsigned *flag;
    CHECK(hipHostMalloc((void **)&flag, 64, 0));
    *flag = 0;
    CHECK(hipStreamWaitValue32(s[2], flag, 1, hipStreamWaitValueGte, 0xffffffff));
    CHECK(hipStreamAddCallback(s[2], host_fn, &host_fn_ran, 0));
    if (hipStreamQuery(s[2]) != hipErrorNotReady) { fprintf(stderr, "stream should wait for the value\n"); return 1; }
    __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
    CHECK(hipStreamSynchronize(s[2]));
    if (host_fn_ran != 1) { fprintf(stderr, "host function ran %d times\n", host_fn_ran); return 1; }
    CHECK(hipStreamWriteValue32(s[2], flag, 7, 0));
    CHECK(hipStreamSynchronize(s[2]));
    if (*flag != 7) { fprintf(stderr, "write value %u\n", *flag); return 1; }

    /* Elapsed time against a lower bound the test creates: s[2] is held at a wait-value until
       the host has spun for 5 ms after event a completed, so b ends at least 5 ms after a (the
       emulated GPU clock runs at host time; load only lengthens the gap). */
    *flag = 0;
    CHECK(hipEventRecord(a, s[2]));
    CHECK(hipStreamWaitValue32(s[2], flag, 1, hipStreamWaitValueEq, 0xffffffff));
    CHECK(hipEventRecord(b, s[2]));
    CHECK(hipEventSynchronize(a));
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do clock_gettime(CLOCK_MONOTONIC, &t1);
    while ((t1.tv_sec - t0.tv_sec) * 1000.0 + (t1.tv_nsec - t0.tv_nsec) / 1e6 < 5.0);
    __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
    CHECK(hipEventSynchronize(b));
    CHECK(hipEventElapsedTime(&ms, a, b));
    if (!(ms >= 5.0)) { fprintf(stderr, "elapsed %f ms across a 5 ms hold\n", ms); return 1; }

    for (int i = 0; i < 3; i++) CHECK(hipStreamDestroy(s[i]));
    CHECK(hipEventDestroy(a));
    CHECK(hipEventDestroy(b));
    CHECK(hipHostFree(pinned));
    CHECK(hipHostFree(flag));
    CHECK(hipFree(d1));
    CHECK(hipFree(d2));
    CHECK(hipDeviceSynchronize());
    free(h); free(back);
    printf("hip runtime ok\n");
    return 0;
}
