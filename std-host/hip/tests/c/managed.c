/* Managed memory: hipMallocManaged (memory the host and the device both use where it is),
   hipMemAdvise, hipMemPrefetchAsync, hipMemRangeGetAttribute(s) reporting what was advised and
   prefetched, hipStreamAttachMemAsync, and HIP's errors for each. */
#include "check.h"

#include <stdint.h>

/* inc(p): p[block * 64 + t] += 1, on the emulated GPU. */
static void inc(void **args, dim3 blockIdx, dim3 gridDim, dim3 blockDim) {
    unsigned *p = *(unsigned **)args[0];
    for (unsigned t = 0; t < blockDim.x; t++) p[blockIdx.x * blockDim.x + t] += 1;
}
static char inc_symbol;

enum { N = 4096 };

int main(void) {
    hipStream_t s;
    OK(hipStreamCreate(&s));
    size_t sizes[] = {sizeof(unsigned *)};
    OK(aqdRegisterHostKernel(&inc_symbol, inc, 1, sizes));

    /* Allocation: the host writes, the device adds, the host reads, with no copies. */
    unsigned *m = NULL;
    OK(hipMallocManaged((void **)&m, N * sizeof(unsigned), hipMemAttachGlobal));
    TRUE(m != NULL);
    for (int i = 0; i < N; i++) m[i] = (unsigned)i;
    void *args[] = {&m};
    OK(hipLaunchKernel(&inc_symbol, (dim3){N / 64, 1, 1}, (dim3){64, 1, 1}, args, 0, s));
    OK(hipStreamSynchronize(s));
    int good = 1;
    for (int i = 0; i < N; i++) good &= m[i] == (unsigned)i + 1;
    TRUE(good);
    void *base = NULL;
    size_t size = 0;
    OK(hipMemGetAddressRange(&base, &size, m + 10));
    TRUE(base == m && size == N * sizeof(unsigned));
    hipPointerAttribute_t pa;
    OK(hipPointerGetAttributes(&pa, m + 1));
    TRUE(pa.isManaged == 1);
    unsigned char is_managed = 0;
    OK(hipPointerGetAttribute(&is_managed, HIP_POINTER_ATTRIBUTE_IS_MANAGED, m));
    TRUE(is_managed == 1);
    unsigned host_flags = 0;
    EXPECT(hipHostGetFlags(&host_flags, m), hipErrorInvalidValue);
    EXPECT(hipMallocManaged(NULL, 64, hipMemAttachGlobal), hipErrorInvalidValue);
    void *p = NULL;
    EXPECT(hipMallocManaged(&p, 0, hipMemAttachGlobal), hipErrorInvalidValue);
    EXPECT(hipMallocManaged(&p, 64, hipMemAttachSingle), hipErrorInvalidValue);
    EXPECT(hipMallocManaged(&p, 64, 0), hipErrorInvalidValue);
    OK(hipMallocManaged(&p, 64, hipMemAttachHost));

    /* Nothing advised yet. */
    const size_t bytes = N * sizeof(unsigned), half = bytes / 2;
    int v = 7;
    OK(hipMemRangeGetAttribute(&v, 4, hipMemRangeAttributeReadMostly, m, bytes));
    TRUE(v == 0);
    OK(hipMemRangeGetAttribute(&v, 4, hipMemRangeAttributePreferredLocation, m, bytes));
    TRUE(v == hipInvalidDeviceId);
    OK(hipMemRangeGetAttribute(&v, 4, hipMemRangeAttributeLastPrefetchLocation, m, bytes));
    TRUE(v == hipInvalidDeviceId);
    OK(hipMemRangeGetAttribute(&v, 4, hipMemRangeAttributeCoherencyMode, m, bytes));
    TRUE(v == hipMemRangeCoherencyModeFineGrain);

    /* Advice on the first half: reported for that half, mixed over the whole. */
    OK(hipMemAdvise(m, half, hipMemAdviseSetReadMostly, 0));
    OK(hipMemAdvise(m, half, hipMemAdviseSetPreferredLocation, 0));
    OK(hipMemAdvise(m, bytes, hipMemAdviseSetAccessedBy, 0));
    OK(hipMemAdvise(m, half, hipMemAdviseSetAccessedBy, hipCpuDeviceId));
    OK(hipMemAdvise((char *)m + half, half, hipMemAdviseSetCoarseGrain, 0));
    OK(hipMemRangeGetAttribute(&v, 4, hipMemRangeAttributeReadMostly, m, half));
    TRUE(v == 1);
    OK(hipMemRangeGetAttribute(&v, 4, hipMemRangeAttributeReadMostly, (char *)m + 100, 200));
    TRUE(v == 1);
    OK(hipMemRangeGetAttribute(&v, 4, hipMemRangeAttributeReadMostly, m, bytes));
    TRUE(v == 0);
    OK(hipMemRangeGetAttribute(&v, 4, hipMemRangeAttributePreferredLocation, m, half));
    TRUE(v == 0);
    OK(hipMemRangeGetAttribute(&v, 4, hipMemRangeAttributePreferredLocation, m, bytes));
    TRUE(v == hipInvalidDeviceId);
    int by[4] = {9, 9, 9, 9};
    OK(hipMemRangeGetAttribute(by, sizeof by, hipMemRangeAttributeAccessedBy, m, half));
    TRUE(by[0] == hipCpuDeviceId && by[1] == 0 && by[2] == hipInvalidDeviceId && by[3] == hipInvalidDeviceId);
    OK(hipMemRangeGetAttribute(by, sizeof by, hipMemRangeAttributeAccessedBy, (char *)m + half, half));
    TRUE(by[0] == 0 && by[1] == hipInvalidDeviceId);
    OK(hipMemRangeGetAttribute(&v, 4, hipMemRangeAttributeCoherencyMode, m, bytes));
    TRUE(v == hipMemRangeCoherencyModeIndeterminate);
    OK(hipMemRangeGetAttribute(&v, 4, hipMemRangeAttributeCoherencyMode, (char *)m + half, half));
    TRUE(v == hipMemRangeCoherencyModeCoarseGrain);

    /* Undoing advice merges the stretches again. */
    OK(hipMemAdvise(m, half, hipMemAdviseUnsetReadMostly, 0));
    OK(hipMemAdvise(m, bytes, hipMemAdviseUnsetPreferredLocation, 0));
    OK(hipMemAdvise(m, bytes, hipMemAdviseUnsetAccessedBy, hipCpuDeviceId));
    OK(hipMemAdvise(m, bytes, hipMemAdviseUnsetCoarseGrain, 0));
    OK(hipMemRangeGetAttribute(&v, 4, hipMemRangeAttributePreferredLocation, m, bytes));
    TRUE(v == hipInvalidDeviceId);
    OK(hipMemRangeGetAttribute(by, sizeof by, hipMemRangeAttributeAccessedBy, m, bytes));
    TRUE(by[0] == 0 && by[1] == hipInvalidDeviceId);
    OK(hipMemRangeGetAttribute(&v, 4, hipMemRangeAttributeCoherencyMode, m, bytes));
    TRUE(v == hipMemRangeCoherencyModeFineGrain);

    /* Prefetches: recorded as the last prefetch location, in stream order. */
    OK(hipMemPrefetchAsync(m, bytes, 0, s));
    OK(hipMemPrefetchAsync(m, half, hipCpuDeviceId, NULL));
    OK(hipStreamSynchronize(s));
    OK(hipMemRangeGetAttribute(&v, 4, hipMemRangeAttributeLastPrefetchLocation, (char *)m + half, half));
    TRUE(v == 0);
    OK(hipMemRangeGetAttribute(&v, 4, hipMemRangeAttributeLastPrefetchLocation, m, half));
    TRUE(v == hipCpuDeviceId);
    OK(hipMemRangeGetAttribute(&v, 4, hipMemRangeAttributeLastPrefetchLocation, m, bytes));
    TRUE(v == hipInvalidDeviceId);

    /* Several attributes at once. */
    int rm = 5, loc = 5;
    void *data[] = {&rm, &loc};
    size_t data_sizes[] = {4, 4};
    hipMemRangeAttribute attrs[] = {hipMemRangeAttributeReadMostly, hipMemRangeAttributeLastPrefetchLocation};
    OK(hipMemRangeGetAttributes(data, data_sizes, attrs, 2, (char *)m + half, half));
    TRUE(rm == 0 && loc == 0);
    EXPECT(hipMemRangeGetAttributes(data, data_sizes, attrs, 0, m, half), hipErrorInvalidValue);
    EXPECT(hipMemRangeGetAttributes(NULL, data_sizes, attrs, 2, m, half), hipErrorInvalidValue);

    /* Errors. */
    int stack_value = 0;
    unsigned *dev;
    OK(hipMalloc((void **)&dev, 256));
    EXPECT(hipMemAdvise(NULL, 64, hipMemAdviseSetReadMostly, 0), hipErrorInvalidValue);
    EXPECT(hipMemAdvise(m, 0, hipMemAdviseSetReadMostly, 0), hipErrorInvalidValue);
    EXPECT(hipMemAdvise(m, bytes + 1, hipMemAdviseSetReadMostly, 0), hipErrorInvalidValue);
    EXPECT(hipMemAdvise(&stack_value, 4, hipMemAdviseSetReadMostly, 0), hipErrorInvalidValue);
    EXPECT(hipMemAdvise(dev, 256, hipMemAdviseSetReadMostly, 0), hipErrorInvalidValue);
    EXPECT(hipMemAdvise(m, bytes, (hipMemoryAdvise)42, 0), hipErrorInvalidValue);
    EXPECT(hipMemAdvise(m, bytes, hipMemAdviseSetPreferredLocation, 7), hipErrorInvalidDevice);
    EXPECT(hipMemAdvise(m, bytes, hipMemAdviseSetAccessedBy, -5), hipErrorInvalidDevice);
    EXPECT(hipMemPrefetchAsync(m, bytes, 7, s), hipErrorInvalidDevice);
    EXPECT(hipMemPrefetchAsync(m, 0, 0, s), hipErrorInvalidValue);
    EXPECT(hipMemPrefetchAsync(dev, 256, 0, s), hipErrorInvalidValue);
    EXPECT(hipMemRangeGetAttribute(&v, 8, hipMemRangeAttributeReadMostly, m, bytes), hipErrorInvalidValue);
    EXPECT(hipMemRangeGetAttribute(&v, 3, hipMemRangeAttributeAccessedBy, m, bytes), hipErrorInvalidValue);
    EXPECT(hipMemRangeGetAttribute(NULL, 4, hipMemRangeAttributeReadMostly, m, bytes), hipErrorInvalidValue);
    EXPECT(hipMemRangeGetAttribute(&v, 4, (hipMemRangeAttribute)42, m, bytes), hipErrorInvalidValue);
    EXPECT(hipMemRangeGetAttribute(&v, 4, hipMemRangeAttributeReadMostly, dev, 256), hipErrorInvalidValue);

    /* Attaching to a stream: the whole allocation (length 0 or its size). */
    OK(hipStreamAttachMemAsync(s, m, 0, hipMemAttachSingle));
    OK(hipStreamAttachMemAsync(s, m, bytes, hipMemAttachGlobal));
    OK(hipStreamAttachMemAsync(NULL, p, 0, hipMemAttachHost));
    EXPECT(hipStreamAttachMemAsync(s, m, half, hipMemAttachSingle), hipErrorInvalidValue);
    EXPECT(hipStreamAttachMemAsync(s, m + 1, 0, hipMemAttachSingle), hipErrorInvalidValue);
    EXPECT(hipStreamAttachMemAsync(s, m, 0, 0x8), hipErrorInvalidValue);
    EXPECT(hipStreamAttachMemAsync(s, dev, 0, hipMemAttachSingle), hipErrorInvalidValue);

    /* Freed managed memory is no longer managed. */
    OK(hipFree(p));
    EXPECT(hipMemAdvise(p, 64, hipMemAdviseSetReadMostly, 0), hipErrorInvalidValue);
    OK(hipFree(m));
    OK(hipFree(dev));
    OK(hipStreamDestroy(s));
    DONE("managed");
}
