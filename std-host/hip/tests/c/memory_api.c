/* The rest of the memory API: fixed-direction copies, 2-D copies, typed fills, host pointers
   and pointer attributes, memory info, and hipFree's wait for the work that may still use the
   block it releases. */
#include "check.h"

#include <pthread.h>
#include <time.h>
#include <sched.h>

static volatile int about_to_free, go, free_returned, violations, wrote;

/* slow_write(buf, n): held until `go`, then notes whether hipFree has returned already and
   fills buf with 0xdeadbeef. */
static void slow_write(void **args, dim3 blockIdx, dim3 gridDim, dim3 blockDim) {
    unsigned *buf = *(unsigned **)args[0];
    unsigned n = *(unsigned *)args[1];
    while (!go) {
    }
    if (free_returned) violations++;
    for (unsigned i = 0; i < n; i++) buf[i] = 0xdeadbeefu;
    wrote = 1;
}
static char slow_symbol;

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Lets the held kernel go once main is about to free its buffer. A hipFree that waits cannot
   return before this; one that did not wait would, and the bounded wait first gives it up to
   20 ms to (it only makes that mistake visible: the correct order never depends on it). The
   bound is time, not a count of yields: on a loaded machine each yield can cost a time slice. */
static void *releaser(void *arg) {
    (void)arg;
    while (!about_to_free) sched_yield();
    double start = now_ms();
    while (!free_returned && now_ms() - start < 20.0) sched_yield();
    go = 1;
    return NULL;
}

int main(void) {
    enum { N = 1024 };
    static unsigned pageable[N], back[N];
    unsigned *d, *d2, *pinned;
    hipStream_t s;
    OK(hipStreamCreate(&s));
    OK(hipMalloc((void **)&d, N * 4));
    OK(hipMalloc((void **)&d2, N * 4));
    OK(hipHostMalloc((void **)&pinned, N * 4, hipHostMallocMapped));
    for (unsigned i = 0; i < N; i++) pageable[i] = i * 3;

    /* Fixed-direction copies, pageable and pinned, synchronous and on a stream. */
    OK(hipMemcpyHtoD(d, pageable, sizeof pageable));
    OK(hipMemcpyDtoD(d2, d, sizeof pageable));
    OK(hipMemcpyDtoH(back, d2, sizeof back));
    TRUE(back[0] == 0 && back[N - 1] == 3 * (N - 1));
    for (unsigned i = 0; i < N; i++) pinned[i] = i + 7;
    OK(hipMemcpyHtoDAsync(d, pinned, N * 4, s));
    OK(hipMemcpyDtoDAsync(d2, d, N * 4, s));
    memset(back, 0, sizeof back);
    OK(hipMemcpyDtoHAsync(back, d2, sizeof back, s));
    OK(hipStreamSynchronize(s));
    TRUE(back[0] == 7 && back[N - 1] == N + 6);
    EXPECT(hipMemcpyHtoD(NULL, pageable, 4), hipErrorInvalidValue);

    /* 2-D: 4 rows of 48 bytes into a buffer of 64-byte rows; the padding stays. */
    unsigned char rows[4 * 48], out[4 * 64], round[4 * 48];
    for (int i = 0; i < (int)sizeof rows; i++) rows[i] = (unsigned char)i;
    OK(hipMemset(d, 0xee, 4 * 64));
    OK(hipMemcpy2D(d, 64, rows, 48, 48, 4, hipMemcpyHostToDevice));
    OK(hipMemcpy(out, d, sizeof out, hipMemcpyDeviceToHost));
    TRUE(out[0] == 0 && out[47] == 47 && out[48] == 0xee && out[63] == 0xee && out[64] == 48 && out[3 * 64 + 47] == 191);
    OK(hipMemcpy2DAsync(round, 48, d, 64, 48, 4, hipMemcpyDeviceToHost, s));
    OK(hipStreamSynchronize(s));
    TRUE(memcmp(round, rows, sizeof rows) == 0);
    OK(hipMemcpy2D(d2, 64, d, 64, 64, 4, hipMemcpyDeviceToDevice)); /* contiguous: one copy */
    EXPECT(hipMemcpy2D(d, 32, rows, 48, 48, 4, hipMemcpyHostToDevice), hipErrorInvalidPitchValue);
    EXPECT(hipMemcpy2D(d, 64, rows, 40, 48, 4, hipMemcpyHostToDevice), hipErrorInvalidPitchValue);
    EXPECT(hipMemcpy2D(d, 64, rows, 48, 48, 4, (hipMemcpyKind)7), hipErrorInvalidMemcpyDirection);
    OK(hipMemcpy2D(d, 64, rows, 48, 0, 4, hipMemcpyHostToDevice));
    OK(hipMemcpy2DAsync(d, 64, rows, 48, 48, 0, hipMemcpyHostToDevice, s));

    /* Typed fills. */
    OK(hipMemsetD32(d, 0x01020304, N));
    OK(hipMemsetD16((unsigned short *)d + 2, 0xabcd, 3));
    OK(hipMemsetD8((unsigned char *)d + 1, 0x77, 1));
    OK(hipMemcpy(back, d, 16, hipMemcpyDeviceToHost));
    TRUE(back[0] == 0x01027704 && back[1] == 0xabcdabcd && back[2] == 0x0102abcd && back[3] == 0x01020304);
    OK(hipMemsetD32Async(d2, 5, N, s));
    OK(hipMemsetD16Async(d2, 0x1111, 2, s));
    OK(hipMemsetD8Async(d2, 0x22, 1, s));
    OK(hipMemcpyDtoHAsync(back, d2, 8, s));
    OK(hipStreamSynchronize(s));
    TRUE(back[0] == 0x11111122 && back[1] == 5);
    EXPECT(hipMemsetD32(NULL, 0, 4), hipErrorInvalidValue);
    OK(hipMemsetD32(NULL, 0, 0));
    EXPECT(hipMemsetD32(pageable, 0, 4), hipErrorInvalidValue);
    EXPECT(hipMemsetD32(d + 1, 0, N), hipErrorInvalidValue);
    EXPECT(hipMemsetD8Async(d, 0, N * 4 + 1, s), hipErrorInvalidValue);

    /* Under capture: synchronous calls are implicit-synchronisation errors; async ones record. */
    hipGraph_t g;
    size_t nodes = 0;
    OK(hipStreamBeginCapture(s, hipStreamCaptureModeGlobal));
    OK(hipMemsetD32Async(d, 9, N, s));
    OK(hipMemcpyDtoDAsync(d2, d, N * 4, s));
    OK(hipStreamEndCapture(s, &g));
    OK(hipGraphGetNodes(g, NULL, &nodes));
    TRUE(nodes == 2);
    OK(hipGraphDestroy(g));
    OK(hipStreamBeginCapture(s, hipStreamCaptureModeGlobal));
    EXPECT(hipMemcpyHtoD(d, pageable, 4), hipErrorStreamCaptureImplicit);
    EXPECT(hipStreamEndCapture(s, &g), hipErrorStreamCaptureInvalidated);
    OK(hipStreamBeginCapture(s, hipStreamCaptureModeGlobal));
    EXPECT(hipMemsetD32(d, 0, 4), hipErrorStreamCaptureImplicit);
    EXPECT(hipStreamEndCapture(s, &g), hipErrorStreamCaptureInvalidated);

    /* Host memory: registration's argument checks (host_register.hip covers the rest). */
    EXPECT(hipHostRegister(NULL, sizeof pageable, 0), hipErrorInvalidValue);
    EXPECT(hipHostRegister(pageable, 0, 0), hipErrorInvalidValue);
    EXPECT(hipHostRegister(pageable, sizeof pageable, 16), hipErrorInvalidValue);
    EXPECT(hipHostUnregister(pageable), hipErrorHostMemoryNotRegistered);
    EXPECT(hipHostUnregister(NULL), hipErrorInvalidValue);
    void *dp = NULL;
    OK(hipHostGetDevicePointer(&dp, pinned + 4, 0));
    TRUE(dp == pinned + 4);
    EXPECT(hipHostGetDevicePointer(&dp, pinned, 1), hipErrorInvalidValue);
    EXPECT(hipHostGetDevicePointer(&dp, pageable, 0), hipErrorInvalidValue);
    EXPECT(hipHostGetDevicePointer(NULL, pinned, 0), hipErrorInvalidValue);

    /* Pointer attributes. */
    hipPointerAttribute_t a;
    OK(hipPointerGetAttributes(&a, d + 10));
    TRUE(a.memoryType == hipMemoryTypeDevice && a.device == 0 && a.devicePointer == d + 10 && a.hostPointer == NULL);
    TRUE(a.isManaged == 0 && a.allocationFlags == 0);
    OK(hipPointerGetAttributes(&a, pinned));
    TRUE(a.memoryType == hipMemoryTypeHost && a.hostPointer == pinned && a.devicePointer == pinned);
    TRUE(a.allocationFlags == hipHostMallocMapped);
    EXPECT(hipPointerGetAttributes(&a, pageable), hipErrorInvalidValue);
    EXPECT(hipPointerGetAttributes(&a, NULL), hipErrorInvalidValue);
    EXPECT(hipPointerGetAttributes(NULL, d), hipErrorInvalidValue);
    EXPECT(hipPointerGetAttributes(&a, d + N), hipErrorInvalidValue); /* one past the end */

    /* Memory info: the device's size, less what this process allocated on it. */
    size_t free0, total, free1;
    OK(hipMemGetInfo(&free0, &total));
    TRUE(total == 64ull << 30 && free0 < total);
    void *big;
    OK(hipMalloc(&big, 1 << 20));
    OK(hipMemGetInfo(&free1, NULL));
    TRUE(free0 - free1 == 1 << 20);
    OK(hipFree(big));
    EXPECT(hipFree(big), hipErrorInvalidValue);
    OK(hipMemGetInfo(&free1, NULL));
    TRUE(free1 == free0);
    OK(hipMemGetInfo(NULL, NULL));

    /* hipFree waits for the kernel still writing into the block; the block handed out next
       keeps what is written into it. */
    size_t sizes[] = {sizeof(void *), 4};
    OK(aqdRegisterHostKernel(&slow_symbol, slow_write, 2, sizes));
    unsigned *victim;
    OK(hipMalloc((void **)&victim, N * 4));
    unsigned n = N;
    void *kargs[] = {&victim, &n};
    hipStream_t nb;
    OK(hipStreamCreateWithFlags(&nb, hipStreamNonBlocking));
    OK(hipLaunchKernel(&slow_symbol, (dim3){1, 1, 1}, (dim3){1, 1, 1}, kargs, 0, nb));
    pthread_t t;
    pthread_create(&t, NULL, releaser, NULL);
    about_to_free = 1;
    OK(hipFree(victim));
    free_returned = 1;
    TRUE(wrote == 1);
    unsigned *reused;
    OK(hipMalloc((void **)&reused, N * 4));
    OK(hipMemsetD32(reused, 0x11, N));
    OK(hipDeviceSynchronize());
    OK(hipMemcpy(back, reused, sizeof back, hipMemcpyDeviceToHost));
    TRUE(back[0] == 0x11 && back[N - 1] == 0x11);
    printf("block reused: %s\n", reused == victim ? "yes" : "no");
    pthread_join(t, NULL);
    TRUE(violations == 0);
    EXPECT(hipFree(pageable), hipErrorInvalidValue);
    OK(hipFree(NULL));

    OK(hipFree(reused));
    OK(hipFree(d));
    OK(hipFree(d2));
    OK(hipHostFree(pinned));
    OK(hipStreamDestroy(s));
    OK(hipStreamDestroy(nb));
    DONE("memory_api");
}
