// Device output through the hostcall buffer (docs/executor.md §5): each lane of one wave sends
// a printf message built with ockl's message calls directly (the format packed into words by
// hand, so the kernel's code is only the hostcall protocol), served by the runtime's listener.
#include <hip/hip_runtime.h>
#include <stdio.h>

extern "C" __device__ unsigned long __ockl_fprintf_stdout_begin(void);
extern "C" __device__ unsigned long __ockl_fprintf_append_args(unsigned long msg, unsigned n, unsigned long a0,
                                                                unsigned long a1, unsigned long a2, unsigned long a3,
                                                                unsigned long a4, unsigned long a5, unsigned long a6,
                                                                unsigned is_last);

__global__ void hello(int base) {
    unsigned long m = __ockl_fprintf_stdout_begin();
    // "v=%d %x\n" eight bytes to a word, then the NUL word; then the two arguments.
    __ockl_fprintf_append_args(m, 4, 0x0a78252064253d76UL, 0, base + threadIdx.x, 0xbeef0000u + threadIdx.x, 0, 0,
                               0, 1);
}

int main(void) {
    // Buffered (stdout is a pipe): the device's lines must come after it, in the same stream.
    printf("hostcall_printf: before\n");
    hipLaunchKernelGGL(hello, dim3(1), dim3(4), 0, 0, 10);
    hipError_t e = hipDeviceSynchronize();
    if (e != hipSuccess) {
        printf("hostcall_printf: hipDeviceSynchronize: %s\n", hipGetErrorString(e));
        return 1;
    }
    printf("hostcall_printf: ok\n");
    return 0;
}
