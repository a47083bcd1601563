// Kernels that need private memory (scratch): device printf with a format and arguments (the
// message built on the stack), a private array indexed by data, and a recursive device
// function (a stack in scratch). Run by Debian's HIP 5.2, whose ROCr gives a queue scratch only
// when the command processor asks for it (docs/rocm-on-emu.md §4.7), and by aqueduct's
// library; each result is checked against the host.
#include <hip/hip_runtime.h>
#include <stdio.h>

#define N 4096

__global__ void greet(int base) { printf("lane %d says %s %x\n", (int)threadIdx.x, "hello", base + threadIdx.x); }

__global__ void private_array(const unsigned* idx, unsigned* out, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned a[96];
    for (unsigned k = 0; k < 96; ++k) a[k] = i * 1000u + k * k;
    unsigned s = 0;
    for (unsigned k = 0; k < 8; ++k) s += a[(idx[i] + 7u * k) % 96u];
    out[i] = s;
}

__device__ __noinline__ unsigned fib(unsigned n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

__global__ void recursive(unsigned* out, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = fib(i % 16);
}

static unsigned host_fib(unsigned n) { return n < 2 ? n : host_fib(n - 1) + host_fib(n - 2); }

#define CHECK(e)                                                                    \
    do {                                                                            \
        hipError_t err_ = (e);                                                      \
        if (err_ != hipSuccess) {                                                   \
            printf("private_memory: %s: %s\n", #e, hipGetErrorString(err_));        \
            return 1;                                                               \
        }                                                                           \
    } while (0)

int main(void) {
    static unsigned idx[N], out[N];
    for (unsigned i = 0; i < N; ++i) idx[i] = (i * 2654435761u) >> 7;
    unsigned *d_idx, *d_out;
    CHECK(hipMalloc((void**)&d_idx, sizeof idx));
    CHECK(hipMalloc((void**)&d_out, sizeof out));
    CHECK(hipMemcpy(d_idx, idx, sizeof idx, hipMemcpyHostToDevice));

    printf("private_memory: before\n");
    fflush(stdout);
    hipLaunchKernelGGL(greet, dim3(1), dim3(4), 0, 0, 0x100);
    CHECK(hipDeviceSynchronize());
    fflush(stdout);

    hipLaunchKernelGGL(private_array, dim3(N / 256), dim3(256), 0, 0, d_idx, d_out, N);
    CHECK(hipMemcpy(out, d_out, sizeof out, hipMemcpyDeviceToHost));
    for (unsigned i = 0; i < N; ++i) {
        unsigned s = 0;
        for (unsigned k = 0; k < 8; ++k) {
            unsigned j = (idx[i] + 7u * k) % 96u;
            s += i * 1000u + j * j;
        }
        if (out[i] != s) {
            printf("private_memory: private_array out[%u] = %u, want %u\n", i, out[i], s);
            return 1;
        }
    }

    hipLaunchKernelGGL(recursive, dim3(N / 256), dim3(256), 0, 0, d_out, N);
    CHECK(hipMemcpy(out, d_out, sizeof out, hipMemcpyDeviceToHost));
    for (unsigned i = 0; i < N; ++i) {
        if (out[i] != host_fib(i % 16)) {
            printf("private_memory: recursive out[%u] = %u, want %u\n", i, out[i], host_fib(i % 16));
            return 1;
        }
    }
    CHECK(hipFree(d_idx));
    CHECK(hipFree(d_out));
    printf("private_memory: ok\n");
    return 0;
}
