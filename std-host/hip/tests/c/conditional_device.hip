// Device code setting a conditional handle through aqueduct_hip_device.h, compiled by clang-15
// for gfx90a; the test reads the assembly for the release store.
#include <aqueduct_hip_device.h>

#define __global__ __attribute__((global))

extern "C" __global__ void set_condition(hipGraphConditionalHandle handle, const unsigned *value) {
    hipGraphSetConditional(handle, *value);
}
