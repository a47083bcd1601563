// `__managed__` variables as hipcc compiles them: clang's module constructor registers each
// with __hipRegisterManagedVar (its initial value, its host pointer slot, its device-side name),
// host code reaches the variable through that slot, and a kernel writes it through its address.
// Built like hipcc_program.hip (-nogpuinc: the attributes are spelled out); on the emulated GPU
// the kernel runs as the fixture twin registered under its name (fill_u32: dst[i] = value).
#include <hip/hip_runtime_api.h>
#include <stdio.h>

#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __managed__ __attribute__((managed))

__managed__ unsigned counter = 41;
__managed__ unsigned long long table[4] = {1, 2, 3, 4};

extern "C" __global__ void fill_u32(unsigned *dst, unsigned value, unsigned count) {
    unsigned i = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
    if (i < count) dst[i] = value;
}

static int failures;
#define TRUE(c) do { if (!(c)) { fprintf(stderr, "%s:%d: %s is false\n", __FILE__, __LINE__, #c); failures++; } } while (0)
#define OK(c) do { hipError_t e_ = (c); if (e_ != hipSuccess) { fprintf(stderr, "%s:%d: %s = %s\n", __FILE__, __LINE__, #c, hipGetErrorName(e_)); failures++; } } while (0)

int main() {
    // The initial values, read by the host through the registered memory.
    TRUE(counter == 41);
    TRUE(table[0] == 1 && table[3] == 4);
    counter = 7;
    table[2] = 30;
    TRUE(counter == 7 && table[2] == 30);

    // The variables live in managed memory of the runtime.
    size_t size = 0;
    OK(hipMemPtrGetInfo(&counter, &size));
    TRUE(size == sizeof counter);
    OK(hipMemPtrGetInfo(table, &size));
    TRUE(size == sizeof table);
    OK(hipMemAdvise(&counter, sizeof counter, hipMemAdviseSetReadMostly, 0));
    int read_mostly = 0;
    OK(hipMemRangeGetAttribute(&read_mostly, 4, hipMemRangeAttributeReadMostly, &counter, sizeof counter));
    TRUE(read_mostly == 1);

    // A kernel writes the variable where the host reads it.
    fill_u32<<<1, 64>>>(&counter, 99u, 1u);
    OK(hipGetLastError());
    OK(hipDeviceSynchronize());
    TRUE(counter == 99);

    if (failures) {
        fprintf(stderr, "managed_var: %d failure(s)\n", failures);
        return 1;
    }
    printf("managed_var: ok\n");
    return 0;
}
