/* hipGetDeviceProperties against HIP 5.2's hipDeviceProp_t as Debian's header lays it out
   (guard bytes around it, every field written), hipDeviceGetAttribute agreeing with it, and
   hipDeviceGetLimit / hipDeviceSetLimit. Prints the name for the harness to check. */
#include "check.h"

#include <stddef.h>

int main(void) {
    struct {
        unsigned char before[64];
        hipDeviceProp_t p;
        unsigned char after[64];
    } box;
    memset(&box, 0xab, sizeof box);
    EXPECT(hipGetDeviceProperties(NULL, 0), hipErrorInvalidValue);
    EXPECT(hipGetDeviceProperties(&box.p, 99), hipErrorInvalidDevice);
    EXPECT(hipGetDeviceProperties(&box.p, -1), hipErrorInvalidDevice);
    OK(hipGetDeviceProperties(&box.p, 0));
    for (int i = 0; i < 64; i++) TRUE(box.before[i] == 0xab && box.after[i] == 0xab);
    hipDeviceProp_t *p = &box.p;
    TRUE(sizeof *p == 792);
    TRUE(p->totalGlobalMem == 64ull << 30);
    TRUE(p->sharedMemPerBlock == 65536 && p->maxSharedMemoryPerMultiProcessor == 65536);
    const int hip52 = expect_hip52();
    /* Registers per block: HIP 5.2 reports 65536; the newest HIP 131072 (gfx90a: 512
       addressable VGPRs x 4 SIMDs x 64 lanes). */
    TRUE(p->regsPerBlock == (hip52 ? 65536 : 131072));
    TRUE(p->warpSize == 64);
    TRUE(p->maxThreadsPerBlock == 1024 && p->maxThreadsDim[0] == 1024 && p->maxThreadsDim[2] == 1024);
    TRUE(p->maxGridSize[0] == 2147483647 && p->maxGridSize[2] == 2147483647);
    TRUE(p->clockRate == 1700000 && p->memoryClockRate == 1600000 && p->memoryBusWidth == 4096);
    TRUE(p->totalConstMem == 2147483647 && p->memPitch == 2147483647);
    TRUE(p->major == 9 && p->minor == 0 && p->gcnArch == 910);
    TRUE(p->multiProcessorCount == 104);
    TRUE(p->l2CacheSize == 8 << 20);
    TRUE(p->maxThreadsPerMultiProcessor == 2048);
    TRUE(p->clockInstructionRate > 0);
    TRUE(p->arch.hasDoubles && p->arch.hasGlobalInt64Atomics && p->arch.has3dGrid && p->arch.hasWarpShuffle);
    TRUE(!p->arch.hasFunnelShift && !p->arch.hasSyncThreadsExt && !p->arch.hasSurfaceFuncs &&
         !p->arch.hasDynamicParallelism);
    TRUE(p->concurrentKernels == 1 && p->canMapHostMemory == 1 && p->integrated == 0);
    TRUE(p->pciDomainID == 0 && p->pciBusID == 3 && p->pciDeviceID == 0);
    TRUE(strncmp(p->gcnArchName, "gfx90a:sramecc+:xnack", 21) == 0);
    /* HIP 5.2 hands out the HDP flush registers, reports textures (maxTexture1D 16384, image
       support), cooperative launch and managed memory; aqueduct maps no HDP register and has
       none of those features, so it answers NULL and 0. */
    NEWER_HIP(TRUE(p->hdpMemFlushCntl == NULL && p->hdpRegFlushCntl == NULL));
    TRUE(p->textureAlignment == 256 && p->maxTexture1D == (hip52 ? 16384 : 0));
    TRUE(p->ECCEnabled == 0 && p->cooperativeLaunch == hip52 && p->managedMemory == 1);
    TRUE(p->pageableMemoryAccess == 0 && p->pageableMemoryAccessUsesHostPageTables == 0);
    printf("name: %s\n", p->name);

    /* Attributes agree with the properties. */
    struct { hipDeviceAttribute_t a; long long want; } attrs[] = {
        {hipDeviceAttributeEccEnabled, p->ECCEnabled},
        {hipDeviceAttributeCanMapHostMemory, p->canMapHostMemory},
        {hipDeviceAttributeClockRate, p->clockRate},
        {hipDeviceAttributeComputeMode, p->computeMode},
        {hipDeviceAttributeConcurrentKernels, p->concurrentKernels},
        {hipDeviceAttributeCooperativeLaunch, p->cooperativeLaunch}, /* see above */
        {hipDeviceAttributeIntegrated, p->integrated},
        {hipDeviceAttributeL2CacheSize, p->l2CacheSize},
        {hipDeviceAttributeComputeCapabilityMajor, p->major},
        {hipDeviceAttributeComputeCapabilityMinor, p->minor},
        {hipDeviceAttributeMaxBlockDimX, 1024},
        {hipDeviceAttributeMaxBlockDimZ, 1024},
        {hipDeviceAttributeMaxGridDimY, 2147483647},
        {hipDeviceAttributeMaxThreadsPerBlock, 1024},
        {hipDeviceAttributeMaxThreadsPerMultiProcessor, 2048},
        {hipDeviceAttributeMaxPitch, 2147483647},
        {hipDeviceAttributeMemoryBusWidth, 4096},
        {hipDeviceAttributeMemoryClockRate, 1600000},
        {hipDeviceAttributeMultiprocessorCount, 104},
        {hipDeviceAttributePciBusId, 3},
        {hipDeviceAttributePciDeviceId, 0},
        {hipDeviceAttributeMaxRegistersPerBlock, p->regsPerBlock},
        {hipDeviceAttributeMaxSharedMemoryPerBlock, 65536},
        {hipDeviceAttributeTotalConstantMemory, 2147483647},
        {hipDeviceAttributeWarpSize, 64},
        {hipDeviceAttributeTextureAlignment, 256},
        {hipDeviceAttributeClockInstructionRate, p->clockInstructionRate},
        {hipDeviceAttributeMaxSharedMemoryPerMultiprocessor, 65536},
        {hipDeviceAttributeCanUseStreamWaitValue, 1},
        {hipDeviceAttributeImageSupport, hip52},
        {hipDeviceAttributePhysicalMultiProcessorCount, 104},
        {hipDeviceAttributeManagedMemory, p->managedMemory},
        {hipDeviceAttributePageableMemoryAccess, 0},
    };
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
        /* HIP 5.2 does not answer hipDeviceAttributeClockInstructionRate (hipErrorInvalidValue). */
        if (hip52 && attrs[i].a == hipDeviceAttributeClockInstructionRate) continue;
        int v = -12345;
        EXPECT(hipDeviceGetAttribute(&v, attrs[i].a, 0), hipSuccess);
        if (v != attrs[i].want) {
            fprintf(stderr, "attribute %d = %d, want %lld\n", (int)attrs[i].a, v, attrs[i].want);
            failures++;
        }
    }
    void *hdp = (void *)1;
    OK(hipDeviceGetAttribute((int *)&hdp, hipDeviceAttributeHdpMemFlushCntl, 0));
    NEWER_HIP(TRUE(hdp == NULL)); /* as hdpMemFlushCntl above */
    int v;
    EXPECT(hipDeviceGetAttribute(NULL, hipDeviceAttributeWarpSize, 0), hipErrorInvalidValue);
    EXPECT(hipDeviceGetAttribute(&v, hipDeviceAttributeWarpSize, 7), hipErrorInvalidDevice);
    EXPECT(hipDeviceGetAttribute(&v, hipDeviceAttributeAsyncEngineCount, 0), hipErrorInvalidValue);
    EXPECT(hipDeviceGetAttribute(&v, hipDeviceAttributeMaxBlocksPerMultiProcessor, 0), hipErrorInvalidValue);
    EXPECT(hipDeviceGetAttribute(&v, (hipDeviceAttribute_t)5555, 0), hipErrorInvalidValue);

    /* Limits. */
    size_t limit = 0;
    EXPECT(hipDeviceGetLimit(NULL, hipLimitMallocHeapSize), hipErrorInvalidValue);
    /* An unknown limit: HIP 5.2 answers hipErrorUnsupportedLimit, the newest HIP
       hipErrorInvalidValue. */
    EXPECT(hipDeviceGetLimit(&limit, (enum hipLimit_t)3), hip52 ? hipErrorUnsupportedLimit : hipErrorInvalidValue);
    EXPECT(hipDeviceGetLimit(&limit, hipLimitPrintfFifoSize), hipErrorUnsupportedLimit);
    OK(hipDeviceGetLimit(&limit, hipLimitMallocHeapSize));
    TRUE(limit == p->totalGlobalMem);
    /* hipLimitStackSize and hipDeviceSetLimit are newer HIP's: HIP 5.2 answers the former
       hipErrorUnsupportedLimit and has not the latter. */
    if (!hip52) {
        OK(hipDeviceGetLimit(&limit, hipLimitStackSize));
        TRUE(limit == 1024); /* the default stack of kernels with a dynamic stack */
        OK(hipDeviceSetLimit(hipLimitMallocHeapSize, 1 << 20));
        EXPECT(hipDeviceSetLimit(hipLimitMallocHeapSize, p->totalGlobalMem + 1), hipErrorInvalidValue);
        EXPECT(hipDeviceSetLimit(hipLimitPrintfFifoSize, 1 << 20), hipErrorUnsupportedLimit);
        OK(hipDeviceSetLimit(hipLimitStackSize, 4096));
        OK(hipDeviceGetLimit(&limit, hipLimitStackSize));
        TRUE(limit == 4096);
        EXPECT(hipDeviceSetLimit(hipLimitStackSize, 128 << 10), hipErrorInvalidValue); /* past 128 KiB - 16 */
        OK(hipDeviceSetLimit(hipLimitStackSize, 1024));
        EXPECT(hipDeviceSetLimit((enum hipLimit_t)3, 0), hipErrorInvalidValue);
    } else {
        EXPECT(hipDeviceGetLimit(&limit, hipLimitStackSize), hipErrorUnsupportedLimit);
    }
    DONE("device_properties");
}
