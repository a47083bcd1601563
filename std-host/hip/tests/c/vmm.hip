// Virtual memory management (docs/architecture.md §2, "Virtual memory"): a reserved range grows
// handle by handle while a kernel (its gfx90a machine code: no twin has its name) reads and
// writes the whole mapped part; a handle mapped a second time aliases the same bytes; copies and
// fills reach mapped memory; and every error CUDA gives. Built like host_register.hip.
#include <hip/hip_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define __global__ __attribute__((global))

extern "C" __global__ void vmm_grow(unsigned *p, unsigned count, unsigned round) {
    unsigned i = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
    if (i < count) p[i] = p[i] * 3u + i + round;
}

static int failures;
#define TRUE(c) do { if (!(c)) { fprintf(stderr, "%s:%d: %s is false\n", __FILE__, __LINE__, #c); failures++; } } while (0)
#define EXPECT(c, want) do { hipError_t e_ = (c); if (e_ != (want)) { fprintf(stderr, "%s:%d: %s = %s, want %s\n", __FILE__, __LINE__, #c, hipGetErrorName(e_), hipGetErrorName(want)); failures++; } } while (0)
#define OK(c) EXPECT(c, hipSuccess)

enum { HANDLES = 3 };

int main(int argc, char **argv) {
    hipMemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = hipMemAllocationTypePinned;
    prop.location.type = hipMemLocationTypeDevice;
    prop.location.id = 0;

    // Granularity: the minimum and the recommended one alike.
    size_t gran = 0, rec = 0;
    EXPECT(hipMemGetAllocationGranularity(NULL, &prop, hipMemAllocationGranularityMinimum), hipErrorInvalidValue);
    EXPECT(hipMemGetAllocationGranularity(&gran, NULL, hipMemAllocationGranularityMinimum), hipErrorInvalidValue);
    EXPECT(hipMemGetAllocationGranularity(&gran, &prop, (hipMemAllocationGranularity_flags)5), hipErrorInvalidValue);
    OK(hipMemGetAllocationGranularity(&gran, &prop, hipMemAllocationGranularityMinimum));
    OK(hipMemGetAllocationGranularity(&rec, &prop, hipMemAllocationGranularityRecommended));
    TRUE(gran == (2u << 20) && rec == gran);

    // Argument checks of hipMemCreate and hipMemAddressReserve.
    hipMemGenericAllocationHandle_t h[HANDLES] = {0}, extra = NULL;
    EXPECT(hipMemCreate(NULL, gran, &prop, 0), hipErrorInvalidValue);
    EXPECT(hipMemCreate(&extra, 0, &prop, 0), hipErrorInvalidValue);
    EXPECT(hipMemCreate(&extra, gran, &prop, 1), hipErrorInvalidValue);
    EXPECT(hipMemCreate(&extra, gran + 4096, &prop, 0), hipErrorInvalidValue);
    prop.location.id = 9;
    EXPECT(hipMemCreate(&extra, gran, &prop, 0), hipErrorInvalidDevice);
    prop.location.id = 0;
    prop.type = hipMemAllocationTypeInvalid;
    EXPECT(hipMemCreate(&extra, gran, &prop, 0), hipErrorInvalidValue);
    prop.type = hipMemAllocationTypePinned;
    void *va = NULL;
    const size_t range = 8 * gran;
    EXPECT(hipMemAddressReserve(NULL, range, 0, NULL, 0), hipErrorInvalidValue);
    EXPECT(hipMemAddressReserve(&va, range, 3, NULL, 0), hipErrorInvalidValue);
    EXPECT(hipMemAddressReserve(&va, range + 4096, 0, NULL, 0), hipErrorInvalidValue);
    EXPECT(hipMemAddressReserve(&va, range, 0, NULL, 1), hipErrorInvalidValue);

    if (argc > 1 && strcmp(argv[1], "unsupported") == 0) {
        // A backend without virtual memory management (ROCr 5.2).
        EXPECT(hipMemCreate(&extra, gran, &prop, 0), hipErrorNotSupported);
        EXPECT(hipMemAddressReserve(&va, range, 0, NULL, 0), hipErrorNotSupported);
        if (failures) return 1;
        printf("vmm: ok\n");
        return 0;
    }

    OK(hipMemAddressReserve(&va, range, 0, NULL, 0));
    TRUE(va != NULL && ((uintptr_t)va % gran) == 0);
    for (int k = 0; k < HANDLES; k++) OK(hipMemCreate(&h[k], gran, &prop, 0));
    TRUE(h[0] != h[1] && h[1] != h[2]);
    hipMemAllocationProp got;
    memset(&got, 0xff, sizeof got);
    OK(hipMemGetAllocationPropertiesFromHandle(&got, h[1]));
    TRUE(got.type == hipMemAllocationTypePinned && got.location.type == hipMemLocationTypeDevice && got.location.id == 0);
    EXPECT(hipMemGetAllocationPropertiesFromHandle(&got, (hipMemGenericAllocationHandle_t)va), hipErrorInvalidValue);

    // Grow the mapping handle by handle; after each, a kernel reads and writes all of it.
    const unsigned per = (unsigned)(gran / sizeof(unsigned));
    unsigned *want = (unsigned *)calloc((size_t)per * HANDLES, sizeof(unsigned));
    unsigned *back = (unsigned *)malloc((size_t)per * HANDLES * sizeof(unsigned));
    unsigned *p = (unsigned *)va;
    hipMemAccessDesc acc = {{hipMemLocationTypeDevice, 0}, hipMemAccessFlagsProtReadWrite};
    for (int k = 0; k < HANDLES; k++) {
        char *at = (char *)va + k * gran;
        EXPECT(hipMemMap(at, gran, 4096, h[k], 0), hipErrorInvalidValue); // offset 0 only
        EXPECT(hipMemMap(at, 2 * gran, 0, h[k], 0), hipErrorInvalidValue); // the handle's size
        OK(hipMemMap(at, gran, 0, h[k], 0));
        EXPECT(hipMemMap(at, gran, 0, h[k], 0), hipErrorInvalidValue); // over a mapping
        unsigned long long flags = 99;
        OK(hipMemGetAccess(&flags, &acc.location, at + 64));
        TRUE(flags == 0);
        OK(hipMemSetAccess(at, gran, &acc, 1));
        OK(hipMemGetAccess(&flags, &acc.location, at + 64));
        TRUE(flags == hipMemAccessFlagsProtReadWrite);
        OK(hipMemsetD32(at, 0, per)); // the new part starts at zero
        unsigned count = per * (unsigned)(k + 1);
        (void)hipGetLastError(); // the expected errors above
        vmm_grow<<<(count + 63) / 64, 64>>>(p, count, (unsigned)k);
        OK(hipGetLastError());
        OK(hipDeviceSynchronize());
        for (unsigned i = 0; i < count; i++) want[i] = want[i] * 3u + i + (unsigned)k;
        OK(hipMemcpy(back, p, (size_t)count * sizeof(unsigned), hipMemcpyDeviceToHost));
        int bad = 0;
        for (unsigned i = 0; i < count; i++) bad += back[i] != want[i];
        TRUE(bad == 0);
    }

    // The pointer queries: device memory, one mapping its range.
    hipPointerAttribute_t attr;
    memset(&attr, 0xff, sizeof attr);
    OK(hipPointerGetAttributes(&attr, p + per + 9));
    TRUE(attr.memoryType == hipMemoryTypeDevice && attr.device == 0 && attr.isManaged == 0);
    TRUE(attr.devicePointer == p + per + 9 && attr.hostPointer == NULL);
    void *base = NULL;
    size_t size = 0;
    OK(hipMemGetAddressRange(&base, &size, p + per + 9));
    TRUE(base == p + per && size == gran);
    EXPECT(hipPointerGetAttributes(&attr, (char *)va + 7 * gran), hipErrorInvalidValue); // unmapped

    // A copy across the edge between handles 0 and 1, a fill across that of 1 and 2.
    unsigned pattern[64];
    for (unsigned i = 0; i < 64; i++) pattern[i] = 0xabc00000u + i;
    OK(hipMemcpy(p + per - 32, pattern, sizeof pattern, hipMemcpyHostToDevice));
    OK(hipMemcpy(back, p + per - 32, sizeof pattern, hipMemcpyDeviceToHost));
    TRUE(memcmp(back, pattern, sizeof pattern) == 0);
    OK(hipMemsetD32(p + 2 * per - 8, 0x5a5a5a5au, 16));
    OK(hipMemcpy(back, p + 2 * per - 8, 16 * sizeof(unsigned), hipMemcpyDeviceToHost));
    for (unsigned i = 0; i < 16; i++) TRUE(back[i] == 0x5a5a5a5au);

    // A second mapping of handle 1, retained by an address inside the first: the same bytes.
    hipMemGenericAllocationHandle_t r = NULL;
    OK(hipMemRetainAllocationHandle(&r, p + per + 5));
    TRUE(r == h[1]);
    EXPECT(hipMemRetainAllocationHandle(&r, (char *)va + 7 * gran), hipErrorInvalidValue); // unmapped
    void *alias = NULL;
    OK(hipMemAddressReserve(&alias, gran, 0, NULL, 0));
    OK(hipMemMap(alias, gran, 0, r, 0));
    OK(hipMemSetAccess(alias, gran, &acc, 1));
    OK(hipMemcpy(back, alias, 64 * sizeof(unsigned), hipMemcpyDeviceToHost));
    TRUE(memcmp(back, pattern + 32, 32 * sizeof(unsigned)) == 0);
    (void)hipGetLastError();
    vmm_grow<<<per / 64, 64>>>((unsigned *)alias, per, 100u);
    OK(hipGetLastError());
    OK(hipDeviceSynchronize());
    for (unsigned i = 0; i < 64; i++) want[per + i] = (i < 32 ? pattern[32 + i] : want[per + i]);
    OK(hipMemcpy(back, p + per, 64 * sizeof(unsigned), hipMemcpyDeviceToHost));
    int bad = 0;
    for (unsigned i = 0; i < 64; i++) bad += back[i] != want[per + i] * 3u + i + 100u;
    TRUE(bad == 0);

    // Errors of unmapping, access and freeing.
    EXPECT(hipMemUnmap(va, gran + 4096), hipErrorInvalidValue); // not whole mappings
    EXPECT(hipMemUnmap((char *)va + 4096, gran), hipErrorInvalidValue);
    EXPECT(hipMemUnmap((char *)va + 3 * gran, gran), hipErrorInvalidValue); // nothing mapped
    EXPECT(hipMemSetAccess((char *)va + 3 * gran, gran, &acc, 1), hipErrorInvalidValue);
    acc.flags = hipMemAccessFlagsProtRead;
    EXPECT(hipMemSetAccess(va, gran, &acc, 1), hipErrorNotSupported);
    acc.flags = (hipMemAccessFlags)2;
    EXPECT(hipMemSetAccess(va, gran, &acc, 1), hipErrorInvalidValue);
    acc.flags = hipMemAccessFlagsProtReadWrite;
    acc.location.id = 5;
    EXPECT(hipMemSetAccess(va, gran, &acc, 1), hipErrorInvalidDevice);
    acc.location.id = 0;
    EXPECT(hipMemAddressFree(va, range), hipErrorInvalidValue); // still mapped
    EXPECT(hipMemAddressFree(va, gran), hipErrorInvalidValue); // not the reservation's size
    EXPECT(hipMemRelease(NULL), hipErrorInvalidValue);
    EXPECT(hipMemRelease((hipMemGenericAllocationHandle_t)va), hipErrorInvalidValue);

    // Unmap: two adjacent mappings at once, then the rest; the handles go after their mappings.
    OK(hipMemUnmap(va, 2 * gran));
    OK(hipMemUnmap((char *)va + 2 * gran, gran));
    EXPECT(hipMemUnmap(va, gran), hipErrorInvalidValue); // once only
    OK(hipMemRelease(h[1])); // the retained reference is left; the alias keeps it mapped
    OK(hipMemcpy(back, alias, 4, hipMemcpyDeviceToHost));
    TRUE(back[0] == want[per] * 3u + 100u);
    OK(hipMemUnmap(alias, gran));
    OK(hipMemRelease(r));
    EXPECT(hipMemRelease(r), hipErrorInvalidValue); // released
    OK(hipMemRelease(h[0]));
    OK(hipMemRelease(h[2]));
    OK(hipMemAddressFree(alias, gran));
    OK(hipMemAddressFree(va, range));
    EXPECT(hipMemAddressFree(va, range), hipErrorInvalidValue);

    // The same address again, as a hint.
    void *again = NULL;
    OK(hipMemAddressReserve(&again, range, 0, va, 0));
    TRUE(again == va);
    OK(hipMemAddressFree(again, range));

    free(want);
    free(back);
    if (failures) {
        fprintf(stderr, "vmm: %d failures\n", failures);
        return 1;
    }
    printf("vmm: ok\n");
    return 0;
}
