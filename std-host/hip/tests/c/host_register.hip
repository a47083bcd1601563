// Registered host memory (docs/hip-semantics.md §6.2): hipHostRegister makes the program's own
// malloc'd memory device memory at a device address of its own; a kernel (its gfx90a machine
// code: no twin has its name) reads and writes it through that address, copies and fills name
// it by either address, the pointer queries answer for it, and every error HIP gives.
// Built like hipcc_program.hip (-nogpuinc: the attributes are spelled out).
#include <hip/hip_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define __global__ __attribute__((global))

extern "C" __global__ void registered_scale(const unsigned *src, unsigned *dst, unsigned factor, unsigned count) {
    unsigned i = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
    if (i < count) dst[i] = src[i] * factor + i;
}

static int failures;
#define TRUE(c) do { if (!(c)) { fprintf(stderr, "%s:%d: %s is false\n", __FILE__, __LINE__, #c); failures++; } } while (0)
#define EXPECT(c, want) do { hipError_t e_ = (c); if (e_ != (want)) { fprintf(stderr, "%s:%d: %s = %s, want %s\n", __FILE__, __LINE__, #c, hipGetErrorName(e_), hipGetErrorName(want)); failures++; } } while (0)
#define OK(c) EXPECT(c, hipSuccess)

enum { N = 3000 }; // 12000 bytes: three or four pages, neither end page-aligned

int main() {
    unsigned *src = (unsigned *)malloc(N * sizeof(unsigned));
    unsigned *dst = (unsigned *)malloc(N * sizeof(unsigned) + 64);
    for (unsigned i = 0; i < N; i++) src[i] = i;
    memset(dst, 0, N * sizeof(unsigned) + 64);
    const size_t bytes = N * sizeof(unsigned);

    // Argument checks.
    EXPECT(hipHostRegister(NULL, bytes, 0), hipErrorInvalidValue);
    EXPECT(hipHostRegister(src, 0, 0), hipErrorInvalidValue);
    EXPECT(hipHostRegister(src, bytes, 16), hipErrorInvalidValue);
    EXPECT(hipHostRegister(src, bytes, 0x80000000u), hipErrorInvalidValue);
    EXPECT(hipHostUnregister(NULL), hipErrorInvalidValue);
    EXPECT(hipHostUnregister(src), hipErrorHostMemoryNotRegistered);

    // Registration; twice, or overlapping, is refused, as is memory of the runtime.
    OK(hipHostRegister(src, bytes, hipHostRegisterDefault));
    OK(hipHostRegister(dst, bytes, hipHostRegisterMapped | hipHostRegisterPortable));
    EXPECT(hipHostRegister(src, bytes, 0), hipErrorHostMemoryAlreadyRegistered);
    EXPECT(hipHostRegister(src + 100, 16, 0), hipErrorHostMemoryAlreadyRegistered);
    EXPECT(hipHostRegister((char *)src - 8, 16, 0), hipErrorHostMemoryAlreadyRegistered);
    void *pinned = NULL;
    OK(hipHostMalloc(&pinned, 4096, 0));
    EXPECT(hipHostRegister(pinned, 4096, 0), hipErrorHostMemoryAlreadyRegistered);
    // The bytes just past a registration are free to register.
    OK(hipHostRegister((char *)dst + bytes, 64, hipHostRegisterIoMemory));
    OK(hipHostUnregister((char *)dst + bytes));

    // Device pointers: the registration's device address, at the same offset.
    unsigned *dsrc = NULL, *ddst = NULL, *inner = NULL;
    OK(hipHostGetDevicePointer((void **)&dsrc, src, 0));
    OK(hipHostGetDevicePointer((void **)&ddst, dst, 0));
    OK(hipHostGetDevicePointer((void **)&inner, src + 5, 0));
    TRUE(dsrc != NULL && ddst != NULL);
    TRUE(inner == dsrc + 5);
    TRUE(((uintptr_t)dsrc & 4095) == ((uintptr_t)src & 4095));
    EXPECT(hipHostGetDevicePointer((void **)&dsrc, src, 1), hipErrorInvalidValue);
    EXPECT(hipHostGetDevicePointer(NULL, src, 0), hipErrorInvalidValue);
    unsigned flags = 0;
    EXPECT(hipHostGetFlags(&flags, src), hipErrorInvalidValue); // hipHostMalloc memory only

    // Pointer attributes, by the host and by the device address of a byte inside.
    hipPointerAttribute_t attr;
    memset(&attr, 0xff, sizeof attr);
    OK(hipPointerGetAttributes(&attr, dst + 7));
    TRUE(attr.memoryType == hipMemoryTypeHost);
    TRUE(attr.device == 0);
    TRUE(attr.hostPointer == dst + 7);
    TRUE(attr.devicePointer == ddst + 7);
    TRUE(attr.isManaged == 0);
    TRUE(attr.allocationFlags == (hipHostRegisterMapped | hipHostRegisterPortable));
    memset(&attr, 0xff, sizeof attr);
    OK(hipPointerGetAttributes(&attr, ddst + 7));
    TRUE(attr.hostPointer == dst + 7 && attr.devicePointer == ddst + 7);
    void *p = NULL;
    OK(hipPointerGetAttribute(&p, HIP_POINTER_ATTRIBUTE_DEVICE_POINTER, (hipDeviceptr_t)(src + 9)));
    TRUE(p == dsrc + 9);
    OK(hipPointerGetAttribute(&p, HIP_POINTER_ATTRIBUTE_HOST_POINTER, (hipDeviceptr_t)(dsrc + 9)));
    TRUE(p == src + 9);
    void *base = NULL;
    size_t size = 0;
    OK(hipMemGetAddressRange(&base, &size, src + 9));
    TRUE(base == src && size == bytes);

    // A kernel reads and writes the registered memory through its device addresses.
    (void)hipGetLastError(); // the expected errors above
    registered_scale<<<(N + 63) / 64, 64>>>(dsrc, ddst, 3u, (unsigned)N);
    OK(hipGetLastError());
    OK(hipDeviceSynchronize());
    int bad = 0;
    for (unsigned i = 0; i < N; i++) bad += dst[i] != 4 * i;
    TRUE(bad == 0);
    TRUE(dst[N] == 0); // nothing past the range

    // Copies and fills, naming the memory by its host or its device address.
    unsigned *d = NULL;
    OK(hipMalloc((void **)&d, bytes));
    OK(hipMemcpy(d, src, bytes, hipMemcpyHostToDevice));
    OK(hipMemset(dst, 0, bytes));
    for (unsigned i = 0; i < N; i++) bad += dst[i] != 0;
    TRUE(bad == 0);
    OK(hipMemcpy(dst, d, bytes, hipMemcpyDeviceToHost));
    for (unsigned i = 0; i < N; i++) bad += dst[i] != i;
    TRUE(bad == 0);
    hipStream_t s;
    OK(hipStreamCreate(&s));
    OK(hipMemsetD32Async(ddst, 0x01020304, N, s));
    OK(hipMemcpyAsync(src, ddst, bytes, hipMemcpyDefault, s));
    OK(hipStreamSynchronize(s));
    for (unsigned i = 0; i < N; i++) bad += src[i] != 0x01020304u || dst[i] != 0x01020304u;
    TRUE(bad == 0);
    OK(hipStreamDestroy(s));
    OK(hipMemset2D(dst, 64, 0x11, 48, 4)); // pitched: rows of 48 of every 64 bytes
    const unsigned char *b = (const unsigned char *)dst;
    for (unsigned i = 0; i < 256; i++) bad += b[i] != (i % 64 < 48 ? 0x11 : (i % 4 == 3 ? 0x01 : i % 4 == 2 ? 0x02 : i % 4 == 1 ? 0x03 : 0x04));
    TRUE(bad == 0);
    OK(hipFree(d));
    EXPECT(hipFree(src), hipErrorInvalidValue); // not an allocation

    // Unregistering: by any address inside, once.
    OK(hipHostUnregister(src));
    EXPECT(hipHostUnregister(src), hipErrorHostMemoryNotRegistered);
    OK(hipHostUnregister(dst + 10));
    EXPECT(hipHostGetDevicePointer((void **)&p, src, 0), hipErrorInvalidValue);
    EXPECT(hipPointerGetAttributes(&attr, dst), hipErrorInvalidValue);
    // Registration and unregistration in a loop, as the hip-cts stress case does.
    for (int i = 0; i < 100; i++) {
        OK(hipHostRegister(src, 4096, 0));
        OK(hipHostUnregister(src));
    }

    // Memory the device cannot be given: an unmapped range, read-only pages.
    long page = sysconf(_SC_PAGESIZE);
    char *m = (char *)mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    TRUE(m != MAP_FAILED);
    TRUE(munmap(m + page, page) == 0);
    EXPECT(hipHostRegister(m + page, 64, 0), hipErrorInvalidValue);
    EXPECT(hipHostRegister(m, 2 * page, 0), hipErrorInvalidValue); // runs into the hole
    TRUE(mprotect(m, page, PROT_READ) == 0);
    EXPECT(hipHostRegister(m, 64, 0), hipErrorInvalidValue);
    TRUE(mprotect(m, page, PROT_READ | PROT_WRITE) == 0);
    OK(hipHostRegister(m, 64, 0));
    OK(hipHostUnregister(m));
    munmap(m, page);

    OK(hipHostFree(pinned));
    free(src);
    free(dst);
    if (failures) {
        fprintf(stderr, "host_register: %d failures\n", failures);
        return 1;
    }
    printf("host_register: ok\n");
    return 0;
}
