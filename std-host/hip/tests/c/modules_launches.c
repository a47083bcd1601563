/* Module queries and the extended and cooperative launches: hipModuleGetGlobal,
   hipModuleLoadDataEx, hipModuleGetTexRef, hipFuncGetAttribute, hipFuncSetAttribute,
   hipFuncSetCacheConfig, hipFuncSetSharedMemConfig, hipModuleOccupancy*, hipExtLaunchKernel,
   hipExtModuleLaunchKernel and hipHccModuleLaunchKernel (C++ names, as HIP 5.2 exports them),
   hipLaunchCooperativeKernel(_spt), hipLaunchCooperativeKernelMultiDevice,
   hipExtLaunchMultiKernelMultiDevice, and newer HIP's hipModuleLaunchCooperativeKernel(MultiDevice). argv[1]: the emulator's gfx90a fixture (fill_u32,
   vector_add); argv[2]: tests/c/hipcc_program.hip's gfx90a code object (`table`, 64 words). */
#include "check.h"

#include <stdint.h>

/* HIP 5.2 declares these two in C++ only; their exported names are the C++ ones. */
hipError_t ext_module_launch(hipFunction_t f, unsigned gx, unsigned gy, unsigned gz, unsigned lx, unsigned ly,
                             unsigned lz, size_t shared, hipStream_t s, void **params, void **extra,
                             hipEvent_t start, hipEvent_t stop, unsigned flags)
    __asm__("_Z24hipExtModuleLaunchKernelP18ihipModuleSymbol_tjjjjjjmP12ihipStream_tPPvS4_P11ihipEvent_tS6_j");
hipError_t hcc_module_launch(hipFunction_t f, unsigned gx, unsigned gy, unsigned gz, unsigned lx, unsigned ly,
                             unsigned lz, size_t shared, hipStream_t s, void **params, void **extra,
                             hipEvent_t start, hipEvent_t stop)
    __asm__("_Z24hipHccModuleLaunchKernelP18ihipModuleSymbol_tjjjjjjmP12ihipStream_tPPvS4_P11ihipEvent_tS6_");

/* add(p, v): p[block * 64 + t] += v. */
static void add(void **args, dim3 blockIdx, dim3 gridDim, dim3 blockDim) {
    unsigned *p = *(unsigned **)args[0], v = *(unsigned *)args[1];
    for (unsigned t = 0; t < blockDim.x; t++) p[blockIdx.x * blockDim.x + t] += v;
}
static char add_symbol, unregistered_symbol;

enum { N = 1024 };

static int all(const unsigned *h, int n, unsigned v) {
    for (int i = 0; i < n; i++)
        if (h[i] != v) return 0;
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: modules_launches FIXTURE HIPCC_CODE_OBJECT\n"); return 2; }
    hipStream_t s;
    OK(hipStreamCreate(&s));
    static unsigned h[N];

    /* hipModuleGetGlobal: the hipcc program's `table`, written and read back. */
    hipModule_t prog, fix, ex;
    OK(hipModuleLoad(&prog, argv[2]));
    hipDeviceptr_t table = NULL;
    size_t bytes = 0;
    OK(hipModuleGetGlobal(&table, &bytes, prog, "table"));
    TRUE(table != NULL && bytes == 64 * sizeof(unsigned));
    bytes = 0;
    OK(hipModuleGetGlobal(NULL, &bytes, prog, "table"));
    TRUE(bytes == 256);
    hipDeviceptr_t again = NULL;
    OK(hipModuleGetGlobal(&again, NULL, prog, "table"));
    TRUE(again == table);
    for (int i = 0; i < 64; i++) h[i] = 1000u + (unsigned)i;
    OK(hipMemcpyHtoD(table, h, 256));
    memset(h, 0, sizeof h);
    OK(hipMemcpyDtoH(h, table, 256));
    TRUE(h[0] == 1000 && h[63] == 1063);
    EXPECT(hipModuleGetGlobal(NULL, NULL, prog, "table"), hipErrorInvalidValue);
    EXPECT(hipModuleGetGlobal(&table, &bytes, prog, NULL), hipErrorInvalidValue);
    EXPECT(hipModuleGetGlobal(&table, &bytes, prog, "no_such_variable"), hipErrorNotFound);
    EXPECT(hipModuleGetGlobal(&table, &bytes, (hipModule_t)0x5555, "table"), hipErrorInvalidHandle);

    /* Texture references: found by name, then not supported (no image sampling here). */
    textureReference *tex = NULL;
    EXPECT(hipModuleGetTexRef(&tex, prog, "table"), hipErrorNotSupported);
    EXPECT(hipModuleGetTexRef(&tex, prog, "no_such_texture"), hipErrorNotFound);
    EXPECT(hipModuleGetTexRef(NULL, prog, "table"), hipErrorInvalidValue);

    /* hipModuleLoadDataEx: JIT options are accepted and ignored. */
    FILE *f = fopen(argv[1], "rb");
    TRUE(f != NULL);
    static char image[1 << 20];
    size_t len = fread(image, 1, sizeof image, f);
    fclose(f);
    TRUE(len > 0 && len < sizeof image);
    hipJitOption opt[1] = {hipJitOptionMaxRegisters};
    void *val[1] = {(void *)(uintptr_t)64};
    OK(hipModuleLoadDataEx(&ex, image, 1, opt, val));
    OK(hipModuleLoadDataEx(&fix, image, 0, NULL, NULL));
    EXPECT(hipModuleLoadDataEx(&fix, image, 1, NULL, NULL), hipErrorInvalidValue);
    EXPECT(hipModuleLoadDataEx(NULL, image, 0, NULL, NULL), hipErrorInvalidValue);
    OK(hipModuleUnload(ex));

    /* Function attributes. */
    hipFunction_t fill;
    OK(hipModuleGetFunction(&fill, fix, "fill_u32"));
    int v = 0;
    OK(hipFuncGetAttribute(&v, HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fill));
    TRUE(v > 0 && v <= 1024);
    OK(hipFuncGetAttribute(&v, HIP_FUNC_ATTRIBUTE_NUM_REGS, fill));
    TRUE(v > 0);
    OK(hipFuncGetAttribute(&v, HIP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fill));
    TRUE(v == 0);
    EXPECT(hipFuncGetAttribute(&v, HIP_FUNC_ATTRIBUTE_MAX, fill), hipErrorInvalidValue);
    EXPECT(hipFuncGetAttribute(NULL, HIP_FUNC_ATTRIBUTE_NUM_REGS, fill), hipErrorInvalidValue);
    EXPECT(hipFuncGetAttribute(&v, HIP_FUNC_ATTRIBUTE_NUM_REGS, (hipFunction_t)0x77), hipErrorInvalidHandle);
    OK(hipFuncSetAttribute((const void *)fill, hipFuncAttributeMaxDynamicSharedMemorySize, 1024));
    OK(hipFuncGetAttribute(&v, HIP_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, fill));
    TRUE(v == 1024);
    OK(hipFuncSetAttribute((const void *)fill, hipFuncAttributePreferredSharedMemoryCarveout, 50));
    OK(hipFuncGetAttribute(&v, HIP_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, fill));
    TRUE(v == 50);
    OK(hipFuncGetAttribute(&v, HIP_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, fill));
    TRUE(v == 1024);
    EXPECT(hipFuncSetAttribute((const void *)fill, hipFuncAttributeMaxDynamicSharedMemorySize, -1), hipErrorInvalidValue);
    EXPECT(hipFuncSetAttribute((const void *)fill, hipFuncAttributeMaxDynamicSharedMemorySize, 1 << 30), hipErrorInvalidValue);
    EXPECT(hipFuncSetAttribute((const void *)fill, hipFuncAttributePreferredSharedMemoryCarveout, 101), hipErrorInvalidValue);
    EXPECT(hipFuncSetAttribute((const void *)fill, hipFuncAttributeMax, 0), hipErrorInvalidValue);
    EXPECT(hipFuncSetAttribute(&unregistered_symbol, hipFuncAttributeMaxDynamicSharedMemorySize, 0),
           hipErrorInvalidDeviceFunction);
    OK(hipFuncSetCacheConfig((const void *)fill, hipFuncCachePreferL1));
    EXPECT(hipFuncSetCacheConfig((const void *)fill, (hipFuncCache_t)7), hipErrorInvalidValue);
    EXPECT(hipFuncSetCacheConfig(&unregistered_symbol, hipFuncCachePreferNone), hipErrorInvalidDeviceFunction);
    OK(hipFuncSetSharedMemConfig((const void *)fill, hipSharedMemBankSizeEightByte));
    EXPECT(hipFuncSetSharedMemConfig((const void *)fill, (hipSharedMemConfig)5), hipErrorInvalidValue);

    /* Occupancy of a module function. */
    int grid = 0, block = 0, per_cu = 0, cus = 0;
    OK(hipModuleOccupancyMaxPotentialBlockSize(&grid, &block, fill, 0, 0));
    TRUE(grid > 0 && block > 0 && block <= 1024);
    OK(hipModuleOccupancyMaxPotentialBlockSizeWithFlags(&grid, &block, fill, 0, 128, hipOccupancyDefault));
    TRUE(block <= 128);
    EXPECT(hipModuleOccupancyMaxPotentialBlockSizeWithFlags(&grid, &block, fill, 0, 0, 2), hipErrorInvalidValue);
    EXPECT(hipModuleOccupancyMaxPotentialBlockSize(NULL, &block, fill, 0, 0), hipErrorInvalidValue);
    OK(hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(&per_cu, fill, 256, 0));
    TRUE(per_cu > 0);
    OK(hipModuleOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&v, fill, 256, 0, 1 /* hipOccupancyDisableCachingOverride */));
    TRUE(v == per_cu);
    EXPECT(hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(&v, fill, 0, 0), hipErrorInvalidValue);
    EXPECT(hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(&v, (hipFunction_t)0x77, 256, 0), hipErrorInvalidHandle);
    OK(hipDeviceGetAttribute(&cus, hipDeviceAttributeMultiprocessorCount, 0));
    TRUE(cus > 0);

    unsigned *d;
    OK(hipMalloc((void **)&d, N * sizeof(unsigned)));

    /* hipExtLaunchKernel between two events. */
    size_t sizes[] = {sizeof(unsigned *), sizeof(unsigned)};
    OK(aqdRegisterHostKernel(&add_symbol, add, 2, sizes));
    OK(hipMemset(d, 0, N * sizeof(unsigned)));
    hipEvent_t start, stop;
    OK(hipEventCreate(&start));
    OK(hipEventCreate(&stop));
    unsigned one = 1;
    void *add_args[] = {&d, &one};
    OK(hipExtLaunchKernel(&add_symbol, (dim3){N / 64, 1, 1}, (dim3){64, 1, 1}, add_args, 0, s, start, stop, 0));
    OK(hipEventSynchronize(stop));
    float ms = -1;
    OK(hipEventElapsedTime(&ms, start, stop));
    TRUE(ms >= 0);
    OK(hipExtLaunchKernel(&add_symbol, (dim3){N / 64, 1, 1}, (dim3){64, 1, 1}, add_args, 0, s, NULL, NULL, 0));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(h, d, sizeof h, hipMemcpyDeviceToHost));
    TRUE(all(h, N, 2));
    EXPECT(hipExtLaunchKernel(&unregistered_symbol, (dim3){1, 1, 1}, (dim3){64, 1, 1}, add_args, 0, s, start, stop, 0),
           hipErrorInvalidDeviceFunction);

    /* The module forms take the grid in work-items; the last work-group may be partial. */
    unsigned value = 7, count = 1000;
    void *fill_args[] = {&d, &value, &count};
    OK(hipMemset(d, 0, N * sizeof(unsigned)));
    OK(ext_module_launch(fill, 1000, 1, 1, 256, 1, 1, 0, s, fill_args, NULL, start, stop, 0));
    OK(hipEventSynchronize(stop));
    OK(hipMemcpy(h, d, sizeof h, hipMemcpyDeviceToHost));
    TRUE(all(h, 1000, 7) && h[1000] == 0);
    value = 8;
    OK(hcc_module_launch(fill, 1000, 1, 1, 250, 1, 1, 0, s, fill_args, NULL, NULL, NULL));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(h, d, sizeof h, hipMemcpyDeviceToHost));
    TRUE(all(h, 1000, 8) && h[1000] == 0);
    EXPECT(ext_module_launch(fill, 1000, 1, 1, 0, 1, 1, 0, s, fill_args, NULL, NULL, NULL, 0), hipErrorInvalidConfiguration);
    EXPECT(ext_module_launch((hipFunction_t)0x77, 64, 1, 1, 64, 1, 1, 0, s, fill_args, NULL, NULL, NULL, 0),
           hipErrorInvalidHandle);

    /* Cooperative launches: every work-group resident at once, or
       hipErrorCooperativeLaunchTooLarge. */
    value = 9;
    count = N;
    unsigned resident = (unsigned)(per_cu * cus);
    OK(hipLaunchCooperativeKernel((const void *)fill, (dim3){N / 256, 1, 1}, (dim3){256, 1, 1}, fill_args, 0, s));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(h, d, sizeof h, hipMemcpyDeviceToHost));
    TRUE(all(h, N, 9));
    OK(hipLaunchCooperativeKernel((const void *)fill, (dim3){resident, 1, 1}, (dim3){256, 1, 1}, fill_args, 0, s));
    EXPECT(hipLaunchCooperativeKernel((const void *)fill, (dim3){resident + 1, 1, 1}, (dim3){256, 1, 1}, fill_args, 0, s),
           hipErrorCooperativeLaunchTooLarge);
    EXPECT(hipLaunchCooperativeKernel((const void *)fill, (dim3){1, 1, 1}, (dim3){256, 1, 1}, fill_args, 1 << 20, s),
           hipErrorCooperativeLaunchTooLarge);
    EXPECT(hipLaunchCooperativeKernel((const void *)fill, (dim3){1, 1, 1}, (dim3){2048, 1, 1}, fill_args, 0, s),
           hipErrorInvalidConfiguration);
    EXPECT(hipLaunchCooperativeKernel(&unregistered_symbol, (dim3){1, 1, 1}, (dim3){64, 1, 1}, fill_args, 0, s),
           hipErrorInvalidDeviceFunction);
    /* Newer HIP's module forms. */
    value = 10;
    OK(hipModuleLaunchCooperativeKernel(fill, N / 256, 1, 1, 256, 1, 1, 0, s, fill_args));
    EXPECT(hipModuleLaunchCooperativeKernel(fill, resident + 1, 1, 1, 256, 1, 1, 0, s, fill_args),
           hipErrorCooperativeLaunchTooLarge);
    EXPECT(hipModuleLaunchCooperativeKernel((hipFunction_t)0x77, 1, 1, 1, 64, 1, 1, 0, s, fill_args),
           hipErrorInvalidHandle);
    hipFunctionLaunchParams flp = {fill, N / 256, 1, 1, 256, 1, 1, 0, s, fill_args};
    OK(hipModuleLaunchCooperativeKernelMultiDevice(&flp, 1, 0));
    EXPECT(hipModuleLaunchCooperativeKernelMultiDevice(&flp, 0, 0), hipErrorInvalidValue);
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(h, d, sizeof h, hipMemcpyDeviceToHost));
    TRUE(all(h, N, 10));
    value = 9;
    OK(hipLaunchCooperativeKernel((const void *)fill, (dim3){N / 256, 1, 1}, (dim3){256, 1, 1}, fill_args, 0, s));
    OK(hipLaunchCooperativeKernel(&add_symbol, (dim3){N / 64, 1, 1}, (dim3){64, 1, 1}, add_args, 0, s));
    OK(hipLaunchCooperativeKernel_spt(&add_symbol, (dim3){N / 64, 1, 1}, (dim3){64, 1, 1}, add_args, 0, NULL));
    OK(hipStreamSynchronize(s));
    OK(hipStreamSynchronize(hipStreamPerThread));
    OK(hipMemcpy(h, d, sizeof h, hipMemcpyDeviceToHost));
    TRUE(all(h, N, 11));

    /* Several devices: one entry per device, each on its own device. */
    int devices = 0;
    OK(hipGetDeviceCount(&devices));
    hipLaunchParams lp[2] = {
        {(void *)&add_symbol, {N / 64, 1, 1}, {64, 1, 1}, add_args, 0, s},
        {(void *)&add_symbol, {N / 64, 1, 1}, {64, 1, 1}, add_args, 0, s},
    };
    OK(hipLaunchCooperativeKernelMultiDevice(lp, 1, 0));
    OK(hipExtLaunchMultiKernelMultiDevice(lp, 1, 0));
    OK(hipLaunchCooperativeKernelMultiDevice(lp, 1, hipCooperativeLaunchMultiDeviceNoPreSync |
                                                        hipCooperativeLaunchMultiDeviceNoPostSync));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(h, d, sizeof h, hipMemcpyDeviceToHost));
    TRUE(all(h, N, 14));
    EXPECT(hipLaunchCooperativeKernelMultiDevice(NULL, 1, 0), hipErrorInvalidValue);
    EXPECT(hipLaunchCooperativeKernelMultiDevice(lp, 0, 0), hipErrorInvalidValue);
    EXPECT(hipLaunchCooperativeKernelMultiDevice(lp, devices + 1, 0), hipErrorInvalidValue);
    EXPECT(hipLaunchCooperativeKernelMultiDevice(lp, 1, 4), hipErrorInvalidValue);
    if (devices >= 2) {
        /* Two entries on one device are refused; on two devices both run. */
        EXPECT(hipLaunchCooperativeKernelMultiDevice(lp, 2, 0), hipErrorInvalidDevice);
        EXPECT(hipExtLaunchMultiKernelMultiDevice(lp, 2, 0), hipErrorInvalidDevice);
        hipStream_t s1;
        unsigned *d1;
        OK(hipSetDevice(1));
        OK(hipStreamCreate(&s1));
        OK(hipMalloc((void **)&d1, N * sizeof(unsigned)));
        OK(hipMemset(d1, 0, N * sizeof(unsigned)));
        OK(hipDeviceSynchronize());
        OK(hipSetDevice(0));
        void *args1[] = {&d1, &one};
        lp[1].args = args1;
        lp[1].stream = s1;
        OK(hipLaunchCooperativeKernelMultiDevice(lp, 2, 0));
        OK(hipExtLaunchMultiKernelMultiDevice(lp, 2, 0));
        OK(hipStreamSynchronize(s));
        OK(hipStreamSynchronize(s1));
        OK(hipMemcpy(h, d, sizeof h, hipMemcpyDeviceToHost));
        TRUE(all(h, N, 16));
        OK(hipMemcpy(h, d1, sizeof h, hipMemcpyDeviceToHost));
        TRUE(all(h, N, 2));
        OK(hipFree(d1));
        OK(hipStreamDestroy(s1));
        printf("two devices\n");
    }

    OK(hipFree(d));
    OK(hipEventDestroy(start));
    OK(hipEventDestroy(stop));
    OK(hipModuleUnload(fix));
    OK(hipModuleUnload(prog));
    OK(hipStreamDestroy(s));
    DONE("modules_launches");
}
