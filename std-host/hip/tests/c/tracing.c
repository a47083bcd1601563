/* The profiler and tracing entry points and the small helpers: hipProfilerStart/Stop and the
   callbacks (no profiler attaches: hipErrorNotSupported), hipApiName, hipGetCmdName,
   hipKernelNameRef(ByPtr), amd_dbgapi_get_build_*, __hipGetPCH, __gnu_f2h_ieee /
   __gnu_h2f_ieee, and hip_impl::hipLaunchKernelGGLImpl. argv[1]: the emulator's gfx90a
   fixture. */
#include "check.h"

#include <hip/amd_detail/hip_prof_str.h>
#include <hip/amd_detail/hip_runtime_prof.h>
#include <stdbool.h>
#include <stdint.h>

/* hipProfilerStart/Stop are deprecated in HIP's header; tested here too. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

/* Declared by HIP 5.2 in C++ only (or not at all); exported under these names. */
unsigned short __gnu_f2h_ieee(float);
float __gnu_h2f_ieee(unsigned short);
void __hipGetPCH(const char **pch, unsigned int *size);
const char *amd_dbgapi_get_build_name(void);
const char *amd_dbgapi_get_git_hash(void);
size_t amd_dbgapi_get_build_id(void);
void launch_ggl(uintptr_t function, const dim3 *grid, const dim3 *block, uint32_t shared, hipStream_t s, void **kernarg)
    __asm__("_ZN8hip_impl22hipLaunchKernelGGLImplEmRK4dim3S2_jP12ihipStream_tPPv");

/* add(p, v): p[block * 64 + t] += v. */
static void add(void **args, dim3 blockIdx, dim3 gridDim, dim3 blockDim) {
    unsigned *p = *(unsigned **)args[0], v = *(unsigned *)args[1];
    for (unsigned t = 0; t < blockDim.x; t++) p[blockIdx.x * blockDim.x + t] += v;
}
static char add_symbol;

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: tracing FIXTURE\n"); return 2; }
    EXPECT(hipProfilerStart(), hipErrorNotSupported);
    EXPECT(hipProfilerStop(), hipErrorNotSupported);
    EXPECT(hipRegisterApiCallback(HIP_API_ID_hipMalloc, NULL, NULL), hipErrorNotSupported);
    EXPECT(hipRemoveApiCallback(HIP_API_ID_hipMalloc), hipErrorNotSupported);
    EXPECT(hipRegisterActivityCallback(HIP_API_ID_hipMalloc, NULL, NULL), hipErrorNotSupported);
    EXPECT(hipRemoveActivityCallback(HIP_API_ID_hipMalloc), hipErrorNotSupported);
    hipInitActivityCallback(NULL, NULL, NULL);
    TRUE(!hipEnableActivityCallback(kHipVdiOpIdDispatch, true));

    /* Names: HIP 5.2's API ids, clr's command kinds. */
    TRUE(strcmp(hipApiName(HIP_API_ID_hipMalloc), "hipMalloc") == 0);
    TRUE(strcmp(hipApiName(HIP_API_ID___hipPopCallConfiguration), "__hipPopCallConfiguration") == 0);
    TRUE(strcmp(hipApiName(HIP_API_ID_LAST), hip_api_name(HIP_API_ID_LAST)) == 0);
    int all_names = 1;
    for (uint32_t id = HIP_API_ID_FIRST; id <= HIP_API_ID_LAST; id++) all_names &= strcmp(hipApiName(id), hip_api_name(id)) == 0;
    TRUE(all_names);
    TRUE(strcmp(hipApiName(0), "unknown") == 0 && strcmp(hipApiName(100000), "unknown") == 0);
    TRUE(strcmp(hipGetCmdName(kHipVdiCommandKernel), "KernelExecution") == 0);
    TRUE(strcmp(hipGetCmdName(kHipVdiMemcpyDeviceToHost), "CopyDeviceToHost") == 0);
    TRUE(strcmp(hipGetCmdName(kHipVdiFillMemory), "FillBuffer") == 0);

    /* Kernel names. */
    hipModule_t m;
    hipFunction_t fill;
    OK(hipModuleLoad(&m, argv[1]));
    OK(hipModuleGetFunction(&fill, m, "fill_u32"));
    TRUE(hipKernelNameRef(fill) != NULL && strcmp(hipKernelNameRef(fill), "fill_u32") == 0);
    TRUE(hipKernelNameRef((hipFunction_t)0x77) == NULL);
    TRUE(hipKernelNameRefByPtr((const void *)fill, NULL) != NULL);
    TRUE(hipKernelNameRefByPtr(NULL, NULL) == NULL);
    TRUE(hipKernelNameRefByPtr(&argc, NULL) == NULL);

    /* The debugger's build queries and the (absent) pre-compiled header. */
    TRUE(strncmp(amd_dbgapi_get_build_name(), "aqueduct-hip ", 13) == 0);
    TRUE(amd_dbgapi_get_git_hash() != NULL);
    TRUE(amd_dbgapi_get_build_id() == 0);
    const char *pch = "x";
    unsigned pch_size = 7;
    __hipGetPCH(&pch, &pch_size);
    TRUE(pch == NULL && pch_size == 0);

    /* Half-precision helpers. */
    TRUE(__gnu_f2h_ieee(1.0f) == 0x3c00 && __gnu_f2h_ieee(-2.5f) == 0xc100 && __gnu_f2h_ieee(1e6f) == 0x7c00);
    TRUE(__gnu_h2f_ieee(0x3c00) == 1.0f && __gnu_h2f_ieee(0xc100) == -2.5f && __gnu_h2f_ieee(0x0001) == 5.9604645e-8f);

    /* hip_impl::hipLaunchKernelGGLImpl: a ready argument buffer; failures become the last error. */
    size_t sizes[] = {sizeof(unsigned *), sizeof(unsigned)};
    OK(aqdRegisterHostKernel(&add_symbol, add, 2, sizes));
    unsigned *d, h[256];
    OK(hipMalloc((void **)&d, sizeof h));
    OK(hipMemset(d, 0, sizeof h));
    struct { unsigned *p; unsigned v; } buf = {d, 5};
    size_t buf_size = sizeof buf;
    void *extra[] = {HIP_LAUNCH_PARAM_BUFFER_POINTER, &buf, HIP_LAUNCH_PARAM_BUFFER_SIZE, &buf_size, HIP_LAUNCH_PARAM_END};
    dim3 grid = {4, 1, 1}, block = {64, 1, 1};
    (void)hipGetLastError();
    launch_ggl((uintptr_t)&add_symbol, &grid, &block, 0, NULL, extra);
    OK(hipGetLastError());
    OK(hipDeviceSynchronize());
    OK(hipMemcpy(h, d, sizeof h, hipMemcpyDeviceToHost));
    TRUE(h[0] == 5 && h[255] == 5);
    launch_ggl((uintptr_t)&argc, &grid, &block, 0, NULL, extra);
    EXPECT(hipGetLastError(), hipErrorInvalidDeviceFunction);

    OK(hipFree(d));
    OK(hipModuleUnload(m));
    DONE("tracing");
}
