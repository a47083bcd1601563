// The per-thread default stream ABI from a hipcc-built program. The test harness builds this file
// three ways with Debian's hipcc and links it against Debian's libamdhip64:
// - `-fgpu-default-stream=per-thread`: clang defines HIP_API_PER_THREAD_DEFAULT_STREAM, so HIP's
//   header renames hipMemcpy, hipStreamSynchronize … to their _spt forms, and `<<<>>>` calls
//   hipLaunchKernel_spt;
// - `-DHIP_API_PER_THREAD_DEFAULT_STREAM`: the renamed API, without kernels (AQD_NO_KERNELS):
//   with the macro alone, clang finds no hipLaunchKernel for a kernel's host stub, the header
//   having renamed it;
// - neither: the legacy default stream.
// Two threads use the default stream (0): thread A's is held shut by a wait on host memory;
// thread B's work completes meanwhile with per-thread default streams, and waits behind A's on
// the legacy stream. The legacy stream still synchronises with blocking streams in every build.
//
// Built with -nogpulib -nogpuinc (Debian has no HIP device library for clang-15): the device
// attributes and work-item builtins are spelled out. On the emulated GPU fill_u32 runs as the
// host twin registered under its name, which computes the same thing.
#include <hip/hip_runtime_api.h>
#include <atomic>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define __global__ __attribute__((global))

#ifndef AQD_NO_KERNELS
extern "C" __global__ void fill_u32(unsigned *dst, unsigned value, unsigned count) {
    unsigned i = __builtin_amdgcn_workgroup_id_x() * 256 + __builtin_amdgcn_workitem_id_x();
    if (i < count) dst[i] = value;
}
#endif

#ifdef HIP_API_PER_THREAD_DEFAULT_STREAM
#define PER_THREAD 1
// The default stream, as a function HIP does not rename (hipStreamWaitValue32) must name it.
#define DEFAULT_STREAM hipStreamPerThread
#else
#define PER_THREAD 0
#define DEFAULT_STREAM 0
#endif

static std::atomic<int> failures;
#define CHECK(call) EXPECT(call, hipSuccess)
#define EXPECT(call, want)                                                                         \
    do {                                                                                           \
        hipError_t e_ = (call);                                                                    \
        if (e_ != (want)) {                                                                        \
            fprintf(stderr, "%s:%d: %s = %s, want %s\n", __FILE__, __LINE__, #call,                \
                    hipGetErrorName(e_), hipGetErrorName(want));                                   \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)
#define TRUE(cond)                                                                                 \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: %s is false\n", __FILE__, __LINE__, #cond);                     \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

enum { N = 256 };
static unsigned *gate, *gate2; // pinned host memory: 0 holds a stream shut
static unsigned *buf_a, *buf_b; // device memory
static pthread_barrier_t step;

static unsigned *values[4]; // pinned host memory: N copies of 0, 1, 2, 3

// Fills `dst` with `value` on the default stream: a copy (hipMemcpyAsync is renamed to its _spt
// form under HIP_API_PER_THREAD_DEFAULT_STREAM).
static hipError_t fill(unsigned *dst, unsigned value) {
    return hipMemcpyAsync(dst, values[value], N * 4, hipMemcpyHostToDevice, 0);
}

static void *thread_a(void *) {
    CHECK(hipStreamWaitValue32(DEFAULT_STREAM, gate, 1, hipStreamWaitValueEq, 0xffffffffu));
    CHECK(fill(buf_a, 1));
    pthread_barrier_wait(&step); // 1: A's default stream is shut
    EXPECT(hipStreamQuery(0), hipErrorNotReady);
    pthread_barrier_wait(&step); // 2: B has looked; the main thread opens the gate
    pthread_barrier_wait(&step); // 3
    CHECK(hipStreamSynchronize(0));
    return nullptr;
}

static void *thread_b(void *) {
    unsigned host[N];
    pthread_barrier_wait(&step); // 1
    CHECK(fill(buf_b, 2));
    if (PER_THREAD) {
        // B's default stream is its own: its work completes while A's is shut.
        CHECK(hipStreamSynchronize(0));
        CHECK(hipStreamQuery(0));
        memset(host, 0, sizeof host);
        CHECK(hipMemcpy(host, buf_b, sizeof host, hipMemcpyDeviceToHost));
        TRUE(host[0] == 2 && host[N - 1] == 2);
        CHECK(hipMemset(buf_b, 0, sizeof host));
        CHECK(hipMemcpy(host, buf_b, sizeof host, hipMemcpyDeviceToHost));
        TRUE(host[0] == 0 && host[N - 1] == 0);
#ifndef AQD_NO_KERNELS
        // Kernels on the default stream: `<<<>>>` (hipLaunchKernel_spt with
        // -fgpu-default-stream=per-thread) and hipLaunchKernel (renamed by the header).
        fill_u32<<<1, 256>>>(buf_b, 3, N);
        CHECK(hipGetLastError());
        CHECK(hipStreamSynchronize(0));
        CHECK(hipMemcpy(host, buf_b, sizeof host, hipMemcpyDeviceToHost));
        TRUE(host[0] == 3 && host[N - 1] == 3);
        unsigned *dst = buf_b, value = 1, count = N;
        void *args[] = {&dst, &value, &count};
        CHECK(hipLaunchKernel((const void *)fill_u32, dim3(1), dim3(256), args, 0, 0));
        CHECK(hipMemcpy(host, buf_b, sizeof host, hipMemcpyDeviceToHost));
        TRUE(host[0] == 1 && host[N - 1] == 1);
#endif
    } else {
        // One legacy stream for both threads: B's work waits behind A's.
        EXPECT(hipStreamQuery(0), hipErrorNotReady);
    }
    pthread_barrier_wait(&step); // 2
    pthread_barrier_wait(&step); // 3
    CHECK(hipStreamSynchronize(0));
    return nullptr;
}

static std::atomic<int> legacy_done;
static void on_legacy(hipStream_t, hipError_t, void *) { legacy_done = 1; }

int main() {
    CHECK(hipHostMalloc((void **)&gate, sizeof(unsigned), 0));
    CHECK(hipHostMalloc((void **)&gate2, sizeof(unsigned), 0));
    *gate = *gate2 = 0;
    for (unsigned v = 0; v < 4; v++) {
        CHECK(hipHostMalloc((void **)&values[v], N * 4, 0));
        for (unsigned i = 0; i < N; i++) values[v][i] = v;
    }
    CHECK(hipMalloc((void **)&buf_a, N * 4));
    CHECK(hipMalloc((void **)&buf_b, N * 4));

    // The getters read the default stream as the per-thread stream (flags 0), or as the null
    // stream, whose flags HIP refuses to report.
    unsigned flags = 99;
    EXPECT(hipStreamGetFlags(0, &flags), PER_THREAD ? hipSuccess : hipErrorInvalidValue);
    if (PER_THREAD) TRUE(flags == 0);
    int priority = 99;
    CHECK(hipStreamGetPriority(0, &priority));
    TRUE(priority == 0);

    pthread_barrier_init(&step, nullptr, 3);
    pthread_t a, b;
    pthread_create(&a, nullptr, thread_a, nullptr);
    pthread_create(&b, nullptr, thread_b, nullptr);
    pthread_barrier_wait(&step); // 1
    pthread_barrier_wait(&step); // 2
    __atomic_store_n(gate, 1u, __ATOMIC_RELEASE);
    pthread_barrier_wait(&step); // 3
    pthread_join(a, nullptr);
    pthread_join(b, nullptr);
    unsigned host[N];
    CHECK(hipMemcpy(host, buf_a, sizeof host, hipMemcpyDeviceToHost));
    TRUE(host[0] == 1 && host[N - 1] == 1);

    // The legacy stream (work HIP does not rename, on stream 0) waits for a blocking stream.
    hipStream_t blocking;
    CHECK(hipStreamCreate(&blocking));
    CHECK(hipStreamWaitValue32(blocking, gate2, 1, hipStreamWaitValueEq, 0xffffffffu));
    CHECK(hipStreamAddCallback(0, on_legacy, nullptr, 0));
    usleep(100 * 1000);
    TRUE(legacy_done == 0);
    __atomic_store_n(gate2, 1u, __ATOMIC_RELEASE);
    CHECK(hipDeviceSynchronize());
    for (int i = 0; i < 1000 && !legacy_done; i++) usleep(1000);
    TRUE(legacy_done == 1);

    CHECK(hipStreamDestroy(blocking));
    CHECK(hipFree(buf_a));
    CHECK(hipFree(buf_b));
    CHECK(hipHostFree(gate));
    CHECK(hipHostFree(gate2));
    for (unsigned v = 0; v < 4; v++) CHECK(hipHostFree(values[v]));
    if (failures) {
        fprintf(stderr, "per_thread: %d failure(s)\n", failures.load());
        return 1;
    }
    printf("per_thread: ok (%s)\n", PER_THREAD ? "per-thread default stream" : "legacy default stream");
    return 0;
}
