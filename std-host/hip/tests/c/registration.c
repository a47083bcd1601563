/* A program laid out the way hipcc lays one out: fat binaries (clang offload bundles of the
   emulator's clang-15 code objects, built by the test harness) in `.hip_fatbin` behind
   `__hip_fatbin_wrapper`-style wrappers, a module constructor that registers them and their
   kernels, device stubs that pop the `<<<>>>` configuration and call hipLaunchKernel with the
   kernel's handle, and `__hipUnregisterFatBinary` at exit.

   BUNDLE_GOOD: host entry, gfx90a:xnack+ (holding gfx1100 code: chosen only if features were
   ignored), gfx1100, gfx90a. BUNDLE_WRONG: host entry, gfx1100 only. */
#include "check.h"

#ifndef BUNDLE_GOOD
#error "build with -DBUNDLE_GOOD=\"path\" -DBUNDLE_WRONG=\"path\""
#endif

/* The registration ABI as clang's generated code declares it. */
void **__hipRegisterFatBinary(const void *wrapper);
void __hipRegisterFunction(void **modules, const void *hostFunction, char *deviceFunction,
                           const char *deviceName, unsigned int threadLimit, void *tid, void *bid,
                           dim3 *blockDim, dim3 *gridDim, int *wSize);
void __hipRegisterVar(void **modules, void *var, char *hostVar, char *deviceVar, int ext,
                      size_t size, int constant, int global);
void __hipUnregisterFatBinary(void **modules);
hipError_t hipConfigureCall(dim3 gridDim, dim3 blockDim, size_t sharedMem, hipStream_t stream);
hipError_t hipSetupArgument(const void *arg, size_t size, size_t offset);
hipError_t hipLaunchByPtr(const void *func);

#define FATBIN(sym, file)                                                                          \
    __asm__(".section .hip_fatbin,\"a\",@progbits\n.p2align 12\n.globl " #sym "\n" #sym           \
            ":\n.incbin \"" file "\"\n.previous\n")
FATBIN(fatbin_good, BUNDLE_GOOD);
FATBIN(fatbin_wrong, BUNDLE_WRONG);
FATBIN(fatbin_again, BUNDLE_GOOD);
extern const char fatbin_good[], fatbin_wrong[], fatbin_again[];

struct fatbin_wrapper {
    unsigned int magic, version;
    const void *binary;
    void *unused;
};
#define HIPF 0x48495046u
__attribute__((section(".hipFatBinSegment"), used)) static const struct fatbin_wrapper
    good_wrapper = {HIPF, 1, fatbin_good, 0},
    wrong_wrapper = {HIPF, 1, fatbin_wrong, 0}, again_wrapper = {HIPF, 1, fatbin_again, 0};
static const struct fatbin_wrapper bad_magic = {0x46504948u, 1, fatbin_good, 0},
                                   bad_version = {HIPF, 2, fatbin_good, 0};

/* Device stubs; each kernel handle is a global whose value is the stub (its symbol is the
   kernel's device-side name in hipcc's output). */
#define STUB3(name, handle, T0, T1, T2)                                                            \
    static void name##_stub(T0 a0, T1 a1, T2 a2);                                                  \
    void (*const handle)(T0, T1, T2) = name##_stub;                                                \
    static void name##_stub(T0 a0, T1 a1, T2 a2) {                                                 \
        dim3 grid, block;                                                                          \
        size_t shmem;                                                                              \
        hipStream_t stream;                                                                        \
        if (__hipPopCallConfiguration(&grid, &block, &shmem, &stream) != hipSuccess) return;       \
        void *args[] = {&a0, &a1, &a2};                                                            \
        (void)hipLaunchKernel((const void *)&handle, grid, block, args, shmem, stream);            \
    }
STUB3(fill, fill_u32, unsigned *, unsigned, unsigned)
STUB3(fill_wrong, fill_u32_wrong, unsigned *, unsigned, unsigned)
STUB3(fill_again, fill_u32_again, unsigned *, unsigned, unsigned)
STUB3(fill_refused, fill_u32_refused, unsigned *, unsigned, unsigned)

static void vector_add_stub(const unsigned *a, const unsigned *b, unsigned *c, unsigned n);
void (*const vector_add)(const unsigned *, const unsigned *, unsigned *, unsigned) = vector_add_stub;
static void vector_add_stub(const unsigned *a, const unsigned *b, unsigned *c, unsigned n) {
    dim3 grid, block;
    size_t shmem;
    hipStream_t stream;
    if (__hipPopCallConfiguration(&grid, &block, &shmem, &stream) != hipSuccess) return;
    void *args[] = {&a, &b, &c, &n};
    (void)hipLaunchKernel((const void *)&vector_add, grid, block, args, shmem, stream);
}

/* kernel<<<grid, block, shmem, stream>>>(args…) as clang expands it. */
#define LAUNCH(stub, grid, block, shmem, stream, ...)                                              \
    do {                                                                                           \
        if (__hipPushCallConfiguration(grid, block, shmem, stream) == hipSuccess) stub(__VA_ARGS__); \
    } while (0)

static unsigned shadow_missing, shadow_wrong, shadow_unregistered;
static void **good, **wrong, **again, **refused;

static void module_dtor(void) {
    __hipUnregisterFatBinary(good);
    __hipUnregisterFatBinary(wrong);
}

__attribute__((constructor)) static void module_ctor(void) {
    good = __hipRegisterFatBinary(&good_wrapper);
    __hipRegisterFunction(good, (const void *)&fill_u32, "fill_u32", "fill_u32", (unsigned)-1, 0, 0, 0, 0, 0);
    /* A second registration of the same handle is ignored. */
    __hipRegisterFunction(good, (const void *)&fill_u32, "vector_add", "vector_add", (unsigned)-1, 0, 0, 0, 0, 0);
    __hipRegisterFunction(good, (const void *)&vector_add, "vector_add", "vector_add", (unsigned)-1, 0, 0, 0, 0, 0);
    __hipRegisterVar(good, &shadow_missing, "no_such_variable", "no_such_variable", 0, 4, 0, 0);
    wrong = __hipRegisterFatBinary(&wrong_wrapper);
    __hipRegisterFunction(wrong, (const void *)&fill_u32_wrong, "fill_u32", "fill_u32", (unsigned)-1, 0, 0, 0, 0, 0);
    __hipRegisterVar(wrong, &shadow_wrong, "table", "table", 0, 256, 0, 0);
    refused = __hipRegisterFatBinary(&bad_magic);
    __hipRegisterFunction(refused, (const void *)&fill_u32_refused, "fill_u32", "fill_u32", (unsigned)-1, 0, 0, 0, 0, 0);
    atexit(module_dtor);
}

int main(void) {
    enum { N = 1000 };
    static unsigned host[N];
    unsigned *a, *b, *c;
    hipStream_t s;
    TRUE(good != NULL && wrong != NULL && good != wrong);
    TRUE(refused == NULL);
    TRUE(__hipRegisterFatBinary(&bad_version) == NULL);
    TRUE(__hipRegisterFatBinary(NULL) == NULL);
    TRUE(__hipRegisterFatBinary(&good_wrapper) == good); /* one handle per blob */

    OK(hipStreamCreate(&s));
    OK(hipMalloc((void **)&a, N * 4));
    OK(hipMalloc((void **)&b, N * 4));
    OK(hipMalloc((void **)&c, N * 4));

    /* fill_u32<<<…>>> on the null stream and on s; vector_add<<<…>>> on s. */
    dim3 grid = {(N + 255) / 256, 1, 1}, block = {256, 1, 1}, one = {1, 1, 1};
    LAUNCH(fill_stub, grid, block, 0, 0, a, 40u, (unsigned)N);
    OK(hipGetLastError());
    LAUNCH(fill_stub, grid, block, 0, s, b, 2u, (unsigned)N);
    OK(hipGetLastError());
    OK(hipDeviceSynchronize());
    dim3 grid64 = {(N + 63) / 64, 1, 1}, block64 = {64, 1, 1};
    LAUNCH(vector_add_stub, grid64, block64, 0, s, a, b, c, (unsigned)N);
    OK(hipGetLastError());
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(host, c, sizeof host, hipMemcpyDeviceToHost));
    TRUE(host[0] == 42 && host[N - 1] == 42);

    /* The old launch API: configuration, arguments at their offsets, launch by handle. */
    unsigned *dst = a, value = 7, count = N;
    OK(hipConfigureCall(grid, block, 0, s));
    OK(hipSetupArgument(&dst, sizeof dst, 0));
    OK(hipSetupArgument(&value, 4, 8));
    OK(hipSetupArgument(&count, 4, 12));
    OK(hipLaunchByPtr((const void *)&fill_u32));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(host, a, sizeof host, hipMemcpyDeviceToHost));
    TRUE(host[0] == 7 && host[N - 1] == 7);
    EXPECT(hipLaunchByPtr((const void *)&fill_u32), hipErrorMissingConfiguration);
    EXPECT(hipGetLastError(), hipErrorMissingConfiguration); /* sticky until read */

    /* Captured: the registered kernel runs at every launch of the graph. */
    hipGraph_t graph;
    hipGraphExec_t exec;
    OK(hipStreamBeginCapture(s, hipStreamCaptureModeGlobal));
    LAUNCH(fill_stub, grid, block, 0, s, c, 9u, (unsigned)N);
    OK(hipGetLastError());
    OK(hipStreamEndCapture(s, &graph));
    OK(hipGraphInstantiate(&exec, graph, NULL, NULL, 0));
    OK(hipMemset(c, 0, N * 4));
    OK(hipGraphLaunch(exec, s));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(host, c, sizeof host, hipMemcpyDeviceToHost));
    TRUE(host[0] == 9 && host[N - 1] == 9);
    OK(hipGraphExecDestroy(exec));
    OK(hipGraphDestroy(graph));

    /* Launch errors, in HIP's order. */
    unsigned *null_ptr = NULL;
    EXPECT(hipLaunchKernel((const void *)&fill_u32, grid, block, NULL, 0, s), hipErrorInvalidValue);
    dim3 too_big = {2048, 1, 1}, empty = {0, 1, 1};
    LAUNCH(fill_stub, grid, too_big, 0, s, null_ptr, 0u, 0u);
    EXPECT(hipGetLastError(), hipErrorInvalidConfiguration);
    LAUNCH(fill_stub, empty, block, 0, s, null_ptr, 0u, 0u);
    EXPECT(hipGetLastError(), hipErrorInvalidConfiguration);
    EXPECT(hipLaunchKernel((const void *)&shadow_unregistered, one, one, NULL, 0, s), hipErrorInvalidDeviceFunction);
    /* A function registered against a refused wrapper (NULL handle). */
    LAUNCH(fill_refused_stub, one, one, 0, s, a, 0u, 1u);
    EXPECT(hipGetLastError(), hipErrorInvalidDeviceFunction);
    /* No code object for the device: the bundle holds gfx1100 code only. */
    LAUNCH(fill_wrong_stub, grid, block, 0, s, a, 1u, (unsigned)N);
    EXPECT(hipGetLastError(), hipErrorNoBinaryForGpu);
    LAUNCH(fill_wrong_stub, grid, block, 0, s, a, 1u, (unsigned)N);
    EXPECT(hipGetLastError(), hipErrorNoBinaryForGpu);
    /* An empty configuration stack. */
    dim3 g3, b3;
    size_t shm;
    hipStream_t st;
    EXPECT(__hipPopCallConfiguration(&g3, &b3, &shm, &st), hipErrorMissingConfiguration);
    /* Configurations nest: the innermost <<<>>> pops first. */
    dim3 g123 = {1, 2, 3}, b456 = {4, 5, 6}, g8 = {8, 1, 1}, b9 = {9, 1, 1};
    OK(__hipPushCallConfiguration(g123, b456, 7, s));
    OK(__hipPushCallConfiguration(g8, b9, 0, 0));
    OK(__hipPopCallConfiguration(&g3, &b3, &shm, &st));
    TRUE(g3.x == 8 && b3.x == 9 && shm == 0 && st == 0);
    OK(__hipPopCallConfiguration(&g3, &b3, &shm, &st));
    TRUE(g3.y == 2 && g3.z == 3 && b3.z == 6 && shm == 7 && st == s);

    /* Symbols: unregistered, registered but absent from the code object, no code object. */
    void *p;
    size_t size;
    EXPECT(hipGetSymbolAddress(NULL, &shadow_missing), hipErrorInvalidValue);
    EXPECT(hipGetSymbolSize(NULL, &shadow_missing), hipErrorInvalidValue);
    EXPECT(hipGetSymbolAddress(&p, &shadow_unregistered), hipErrorInvalidSymbol);
    EXPECT(hipGetSymbolSize(&size, &shadow_unregistered), hipErrorInvalidSymbol);
    EXPECT(hipGetSymbolAddress(&p, &shadow_missing), hipErrorInvalidSymbol);
    EXPECT(hipGetSymbolAddress(&p, &shadow_wrong), hipErrorNoBinaryForGpu);
    EXPECT(hipMemcpyToSymbol(&shadow_unregistered, host, 4, 0, hipMemcpyHostToDevice), hipErrorInvalidSymbol);
    EXPECT(hipMemcpyToSymbol(&shadow_missing, host, 4, 0, hipMemcpyDeviceToHost), hipErrorInvalidMemcpyDirection);
    EXPECT(hipMemcpyFromSymbol(host, &shadow_missing, 4, 0, hipMemcpyHostToDevice), hipErrorInvalidMemcpyDirection);
    EXPECT(hipGetLastError(), hipErrorInvalidMemcpyDirection);

    /* What a kernel uses: static LDS and scratch, registers and block limit from the metadata. */
    hipFuncAttributes fa;
    memset(&fa, 0xab, sizeof fa);
    OK(hipFuncGetAttributes(&fa, (const void *)&vector_add));
    TRUE(fa.maxThreadsPerBlock == 256 && fa.numRegs == 8 && fa.sharedSizeBytes == 0 && fa.localSizeBytes == 0);
    TRUE(fa.binaryVersion == 90 && fa.ptxVersion == 90 && fa.maxDynamicSharedSizeBytes == 65536);
    TRUE(fa.constSizeBytes == 0 && fa.cacheModeCA == 0 && fa.preferredShmemCarveout == 0);
    EXPECT(hipFuncGetAttributes(NULL, (const void *)&vector_add), hipErrorInvalidValue);
    EXPECT(hipFuncGetAttributes(&fa, (const void *)&shadow_unregistered), hipErrorInvalidDeviceFunction);
    EXPECT(hipFuncGetAttributes(&fa, (const void *)&fill_u32_wrong), hipErrorInvalidDeviceFunction);
    /* Occupancy: few registers, so 4 SIMDs x 8 waves x 64 = 2048 threads per CU, within the
       kernel's 256-thread limit. */
    int og = 0, ob = 0, per_cu = 0;
    OK(hipOccupancyMaxPotentialBlockSize(&og, &ob, (const void *)&fill_u32, 0, 0));
    TRUE(ob == 256 && og == 104 * 8);
    OK(hipOccupancyMaxPotentialBlockSize(&og, &ob, (const void *)&fill_u32, 0, 128));
    TRUE(ob == 128 && og == 104 * 16);
    OK(hipOccupancyMaxPotentialBlockSize(&og, &ob, (const void *)&fill_u32, 48 << 10, 0));
    TRUE(ob == 256 && og == 104);
    OK(hipOccupancyMaxActiveBlocksPerMultiprocessor(&per_cu, (const void *)&fill_u32, 64, 0));
    TRUE(per_cu == 32);
    OK(hipOccupancyMaxActiveBlocksPerMultiprocessor(&per_cu, (const void *)&fill_u32, 512, 0));
    TRUE(per_cu == 0);
    EXPECT(hipOccupancyMaxActiveBlocksPerMultiprocessor(&per_cu, (const void *)&fill_u32, 0, 0), hipErrorInvalidValue);
    EXPECT(hipOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&per_cu, (const void *)&fill_u32, 64, 0, 2),
           hipErrorInvalidValue);
    OK(hipOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&per_cu, (const void *)&fill_u32, 64, 0, 1));
    TRUE(per_cu == 32);
    EXPECT(hipOccupancyMaxPotentialBlockSize(NULL, &ob, (const void *)&fill_u32, 0, 0), hipErrorInvalidValue);
    EXPECT(hipOccupancyMaxPotentialBlockSize(&og, &ob, (const void *)&shadow_unregistered, 0, 0),
           hipErrorInvalidDeviceFunction);
    (void)hipGetLastError();

    /* Unregistering forgets the binary's kernels. */
    again = __hipRegisterFatBinary(&again_wrapper);
    TRUE(again != NULL && again != good);
    __hipRegisterFunction(again, (const void *)&fill_u32_again, "fill_u32", "fill_u32", (unsigned)-1, 0, 0, 0, 0, 0);
    LAUNCH(fill_again_stub, grid, block, 0, s, b, 5u, (unsigned)N);
    OK(hipGetLastError());
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(host, b, sizeof host, hipMemcpyDeviceToHost));
    TRUE(host[0] == 5 && host[N - 1] == 5);
    __hipUnregisterFatBinary(again);
    LAUNCH(fill_again_stub, grid, block, 0, s, b, 6u, (unsigned)N);
    EXPECT(hipGetLastError(), hipErrorInvalidDeviceFunction);
    /* The first unregistration waited for the device; later work still runs. */
    LAUNCH(fill_stub, grid, block, 0, s, b, 3u, (unsigned)N);
    OK(hipGetLastError());
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(host, b, sizeof host, hipMemcpyDeviceToHost));
    TRUE(host[0] == 3 && host[N - 1] == 3);

    OK(hipFree(a));
    OK(hipFree(b));
    OK(hipFree(c));
    OK(hipStreamDestroy(s));
    DONE("registration");
}
