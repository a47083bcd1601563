// A HIP program compiled by clang-15 as hipcc compiles one: the device half to a gfx90a code
// object, bundled by the test harness, and the host half with that bundle embedded, so clang
// itself emits the fat-binary wrapper, the module constructor (__hipRegisterFatBinary,
// __hipRegisterFunction, __hipRegisterVar), the `<<<>>>` launches through
// __hipPushCallConfiguration / __hipPopCallConfiguration / hipLaunchKernel, and
// __hipUnregisterFatBinary at exit. Nothing here knows about aqueduct.
//
// Built with -nogpuinc (Debian has no HIP device library for clang-15): the device attributes
// and work-item builtins are spelled out. On the emulated GPU the kernels run as the host twins
// registered under their names, which compute the same thing.
#include <hip/hip_runtime_api.h>
#include <stdio.h>
#include <string.h>

#define __global__ __attribute__((global))
#define __device__ __attribute__((device))

__device__ unsigned table[64];

__device__ static unsigned global_id_x() {
    return __builtin_amdgcn_workgroup_id_x() * 256 + __builtin_amdgcn_workitem_id_x();
}

extern "C" __global__ void fill_u32(unsigned *dst, unsigned value, unsigned count) {
    unsigned i = global_id_x();
    if (i < count) dst[i] = value;
}

extern "C" __global__ void vector_add(const unsigned *a, const unsigned *b, unsigned *c, unsigned count) {
    unsigned i = global_id_x();
    if (i < count) c[i] = a[i] + b[i];
}

static int failures;
#define CHECK(call)                                                                                \
    do {                                                                                           \
        hipError_t e_ = (call);                                                                    \
        if (e_ != hipSuccess) {                                                                    \
            fprintf(stderr, "%s:%d: %s = %s\n", __FILE__, __LINE__, #call, hipGetErrorName(e_));   \
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

int main() {
    const unsigned n = 64;
    unsigned host[64], *b, *c;
    hipStream_t s;
    CHECK(hipStreamCreate(&s));
    CHECK(hipMalloc((void **)&b, n * 4));
    CHECK(hipMalloc((void **)&c, n * 4));

    // The device variable: its size and address come from the loaded code object.
    size_t size = 0;
    void *addr = nullptr;
    CHECK(hipGetSymbolSize(&size, table));
    CHECK(hipGetSymbolAddress(&addr, table));
    TRUE(size == sizeof table && addr != nullptr);
    for (unsigned i = 0; i < n; i++) host[i] = 1000 * i;
    CHECK(hipMemcpyToSymbol(table, host, sizeof host, 0, hipMemcpyHostToDevice));
    unsigned five[4] = {5, 5, 5, 5};
    CHECK(hipMemcpyToSymbolAsync(table, five, sizeof five, 8 * 4, hipMemcpyHostToDevice, s));
    CHECK(hipStreamSynchronize(s));
    TRUE(hipMemcpyToSymbol(table, host, 8, sizeof table - 4, hipMemcpyHostToDevice) == hipErrorInvalidValue);
    TRUE(hipGetLastError() == hipErrorInvalidValue); // sticky until read

    // Kernels launched with <<<>>>; vector_add reads the variable through its device address.
    fill_u32<<<1, 256, 0, s>>>(b, 7, n);
    CHECK(hipGetLastError());
    vector_add<<<1, 256, 0, s>>>((const unsigned *)addr, b, c, n);
    CHECK(hipGetLastError());
    CHECK(hipStreamSynchronize(s));
    CHECK(hipMemcpy(host, c, sizeof host, hipMemcpyDeviceToHost));
    TRUE(host[0] == 7 && host[1] == 1007 && host[8] == 12 && host[11] == 12 && host[12] == 12007);
    TRUE(host[63] == 63007);

    // Device to host through the symbol, at an offset, synchronously and on a stream.
    unsigned back[4] = {0, 0, 0, 0};
    CHECK(hipMemcpyFromSymbol(back, table, 8, 7 * 4, hipMemcpyDeviceToHost));
    TRUE(back[0] == 7000 && back[1] == 5);
    CHECK(hipMemcpyFromSymbolAsync(back, table, 16, 60 * 4, hipMemcpyDeviceToHost, s));
    CHECK(hipStreamSynchronize(s));
    TRUE(back[0] == 60000 && back[3] == 63000);

    CHECK(hipFree(b));
    CHECK(hipFree(c));
    CHECK(hipStreamDestroy(s));
    if (failures) {
        fprintf(stderr, "hipcc_program: %d failure(s)\n", failures);
        return 1;
    }
    printf("hipcc_program: ok\n");
    return 0;
}
