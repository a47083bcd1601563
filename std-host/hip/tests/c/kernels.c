/* Host kernels (aqdRegisterHostKernel + hipLaunchKernel, direct and captured) and modules of a
   real AMDHSA code object (argv[1]: the emulator's gfx90a fixture) whose kernels run as their
   host twins on the emulated GPU. */
#include "check.h"

/* saxpy(float a, const float *x, float *y, int n): y = a * x + y. */
static void saxpy(void **args, dim3 blockIdx, dim3 gridDim, dim3 blockDim) {
    float a = *(float *)args[0];
    const float *x = *(const float **)args[1];
    float *y = *(float **)args[2];
    int n = *(int *)args[3];
    for (unsigned t = 0; t < blockDim.x; t++) {
        int i = (int)(blockIdx.x * blockDim.x + t);
        if (i < n) y[i] = a * x[i] + y[i];
    }
    *(int *)args[3] = -1; /* the body's copy: never seen by other work-groups */
}

/* Records each work-group's view of the geometry: out[linear block] = packed ids. */
struct geom_out { unsigned bx, by, bz, gx, gy, gz, dx, dy, dz; };
static void geometry(void **args, dim3 blockIdx, dim3 gridDim, dim3 blockDim) {
    struct geom_out *out = *(struct geom_out **)args[0];
    unsigned char tag = *(unsigned char *)args[1];
    unsigned i = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    struct geom_out g = {blockIdx.x, blockIdx.y, blockIdx.z, gridDim.x, gridDim.y, gridDim.z,
                         blockDim.x + tag, blockDim.y, blockDim.z};
    out[i] = g;
}

/* Replaces geometry's body below: marks out[0] only. */
static void mark(void **args, dim3 blockIdx, dim3 gridDim, dim3 blockDim) {
    struct geom_out *out = *(struct geom_out **)args[0];
    out[0].dx = 1000u + *(unsigned char *)args[1];
}

static char saxpy_symbol, geometry_symbol, unregistered_symbol;

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: kernels CODE_OBJECT\n"); return 2; }
    hipStream_t s;
    OK(hipStreamCreate(&s));
    enum { N = 1000 };
    float *x, *y;
    float hx[N], hy[N];
    for (int i = 0; i < N; i++) { hx[i] = (float)i; hy[i] = 1.0f; }
    OK(hipMalloc((void **)&x, sizeof hx));
    OK(hipMalloc((void **)&y, sizeof hy));
    OK(hipMemcpy(x, hx, sizeof hx, hipMemcpyHostToDevice));
    OK(hipMemcpy(y, hy, sizeof hy, hipMemcpyHostToDevice));

    /* Registration. */
    size_t saxpy_sizes[] = {sizeof(float), sizeof(float *), sizeof(float *), sizeof(int)};
    EXPECT(aqdRegisterHostKernel(NULL, saxpy, 4, saxpy_sizes), hipErrorInvalidValue);
    EXPECT(aqdRegisterHostKernel(&saxpy_symbol, NULL, 4, saxpy_sizes), hipErrorInvalidValue);
    EXPECT(aqdRegisterHostKernel(&saxpy_symbol, saxpy, 4, NULL), hipErrorInvalidValue);
    OK(aqdRegisterHostKernel(&saxpy_symbol, saxpy, 4, saxpy_sizes));
    size_t geometry_sizes[] = {sizeof(void *), 1};
    OK(aqdRegisterHostKernel(&geometry_symbol, geometry, 2, geometry_sizes));

    /* Launch: y = 2x + y over 16 blocks of 64. */
    float a = 2.0f;
    int n = N;
    void *args[] = {&a, &x, &y, &n};
    dim3 grid = {(N + 63) / 64, 1, 1}, block = {64, 1, 1};
    OK(hipLaunchKernel(&saxpy_symbol, grid, block, args, 0, s));
    OK(hipStreamSynchronize(s));
    TRUE(n == N);
    OK(hipMemcpy(hy, y, sizeof hy, hipMemcpyDeviceToHost));
    TRUE(hy[0] == 1.0f && hy[10] == 21.0f && hy[N - 1] == 2.0f * (N - 1) + 1.0f);

    /* Error paths. */
    EXPECT(hipLaunchKernel(&unregistered_symbol, grid, block, args, 0, s), hipErrorInvalidDeviceFunction);
    EXPECT(hipLaunchKernel(&saxpy_symbol, grid, block, NULL, 0, s), hipErrorInvalidValue);
    dim3 too_big = {2048, 1, 1}, zero = {0, 1, 1};
    EXPECT(hipLaunchKernel(&saxpy_symbol, grid, too_big, args, 0, s), hipErrorInvalidConfiguration);
    EXPECT(hipLaunchKernel(&saxpy_symbol, zero, block, args, 0, s), hipErrorInvalidConfiguration);
    hipStream_t dead;
    OK(hipStreamCreate(&dead));
    OK(hipStreamDestroy(dead));
    EXPECT(hipLaunchKernel(&saxpy_symbol, grid, block, args, 0, dead), hipErrorContextIsDestroyed);

    /* 3-D geometry as each work-group sees it, on the null and per-thread streams. */
    struct geom_out *out;
    OK(hipHostMalloc((void **)&out, 24 * sizeof *out, 0));
    unsigned char tag = 1;
    void *gargs[] = {&out, &tag};
    dim3 g3 = {4, 3, 2}, b3 = {8, 2, 1};
    OK(hipLaunchKernel(&geometry_symbol, g3, b3, gargs, 0, 0));
    OK(hipStreamSynchronize(0));
    TRUE(out[23].bx == 3 && out[23].by == 2 && out[23].bz == 1);
    TRUE(out[5].bx == 1 && out[5].by == 1 && out[5].bz == 0);
    TRUE(out[0].gx == 4 && out[0].gy == 3 && out[0].gz == 2 && out[0].dx == 9 && out[0].dy == 2);
    tag = 2;
    OK(hipLaunchKernel(&geometry_symbol, g3, b3, gargs, 0, hipStreamPerThread));
    OK(hipStreamSynchronize(hipStreamPerThread));
    TRUE(out[7].dx == 10);
    /* Registering a symbol again replaces its body, also for the launches that follow at once. */
    OK(aqdRegisterHostKernel(&geometry_symbol, mark, 2, geometry_sizes));
    tag = 3;
    OK(hipLaunchKernel(&geometry_symbol, g3, b3, gargs, 0, hipStreamPerThread));
    OK(hipStreamSynchronize(hipStreamPerThread));
    TRUE(out[0].dx == 1003 && out[7].dx == 10);

    /* Captured: the graph runs the kernel at each launch, with the captured arguments. */
    hipGraph_t g;
    hipGraphExec_t xg;
    OK(hipMemcpy(y, hy, sizeof hy, hipMemcpyHostToDevice));
    OK(hipStreamBeginCapture(s, hipStreamCaptureModeGlobal));
    a = 1.0f;
    OK(hipLaunchKernel(&saxpy_symbol, grid, block, args, 0, s));
    a = 100.0f; /* arguments were copied at capture */
    OK(hipStreamEndCapture(s, &g));
    OK(hipGraphInstantiate(&xg, g, NULL, NULL, 0));
    OK(hipGraphLaunch(xg, s));
    OK(hipGraphLaunch(xg, s));
    OK(hipStreamSynchronize(s));
    float after[N];
    OK(hipMemcpy(after, y, sizeof after, hipMemcpyDeviceToHost));
    TRUE(after[10] == hy[10] + 20.0f && after[N - 1] == hy[N - 1] + 2.0f * (N - 1));
    OK(hipGraphExecDestroy(xg));
    OK(hipGraphDestroy(g));

    /* Modules: the fixture's fill_u32 and vector_add. */
    hipModule_t m, m2;
    hipFunction_t fill, add;
    EXPECT(hipModuleLoad(NULL, argv[1]), hipErrorInvalidValue);
    EXPECT(hipModuleLoad(&m, NULL), hipErrorInvalidValue);
    EXPECT(hipModuleLoad(&m, "/nonexistent/kernels.co"), hipErrorFileNotFound);
    OK(hipModuleLoad(&m, argv[1]));
    FILE *f = fopen(argv[1], "rb");
    TRUE(f != NULL);
    static char image[1 << 20];
    size_t len = fread(image, 1, sizeof image, f);
    fclose(f);
    TRUE(len > 0 && len < sizeof image);
    EXPECT(hipModuleLoadData(NULL, image), hipErrorInvalidValue);
    EXPECT(hipModuleLoadData(&m2, NULL), hipErrorInvalidValue);
    static char not_elf[64] = "this is not an ELF file";
    EXPECT(hipModuleLoadData(&m2, not_elf), hipErrorInvalidImage);
    OK(hipModuleLoadData(&m2, image));
    EXPECT(hipModuleGetFunction(NULL, m, "fill_u32"), hipErrorInvalidValue);
    EXPECT(hipModuleGetFunction(&fill, m, NULL), hipErrorInvalidValue);
    EXPECT(hipModuleGetFunction(&fill, m, "no_such_kernel"), hipErrorNotFound);
    EXPECT(hipModuleGetFunction(&fill, (hipModule_t)0x5555, "fill_u32"), hipErrorInvalidHandle);
    OK(hipModuleGetFunction(&fill, m, "fill_u32"));
    OK(hipModuleGetFunction(&add, m2, "vector_add"));

    unsigned int *ua, *ub, *uc, hu[N];
    OK(hipMalloc((void **)&ua, N * 4));
    OK(hipMalloc((void **)&ub, N * 4));
    OK(hipMalloc((void **)&uc, N * 4));
    unsigned value = 7, count = N;
    void *fill_args[] = {&ua, &value, &count};
    OK(hipModuleLaunchKernel(fill, (N + 255) / 256, 1, 1, 256, 1, 1, 0, s, fill_args, NULL));
    value = 35;
    void *fill_b[] = {&ub, &value, &count};
    OK(hipModuleLaunchKernel(fill, (N + 255) / 256, 1, 1, 256, 1, 1, 0, s, fill_b, NULL));
    /* vector_add through `extra`: one packed argument buffer. */
    struct { unsigned *a, *b, *c; unsigned n; } packed = {ua, ub, uc, N};
    size_t packed_size = sizeof packed;
    void *extra[] = {HIP_LAUNCH_PARAM_BUFFER_POINTER, &packed, HIP_LAUNCH_PARAM_BUFFER_SIZE, &packed_size,
                     HIP_LAUNCH_PARAM_END};
    OK(hipModuleLaunchKernel(add, (N + 63) / 64, 1, 1, 64, 1, 1, 0, s, NULL, extra));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(hu, uc, sizeof hu, hipMemcpyDeviceToHost));
    TRUE(hu[0] == 42 && hu[N - 1] == 42);
    EXPECT(hipModuleLaunchKernel(add, 1, 1, 1, 64, 1, 1, 0, s, fill_args, extra), hipErrorInvalidValue);
    EXPECT(hipModuleLaunchKernel(add, 1, 1, 1, 64, 1, 1, 0, s, NULL, NULL), hipErrorInvalidValue);
    EXPECT(hipModuleLaunchKernel(add, 1, 1, 1, 4096, 1, 1, 0, s, NULL, extra), hipErrorInvalidConfiguration);
    EXPECT(hipModuleLaunchKernel((hipFunction_t)0x77, 1, 1, 1, 64, 1, 1, 0, s, NULL, extra), hipErrorInvalidHandle);

    OK(hipModuleUnload(m));
    EXPECT(hipModuleUnload(m), hipErrorInvalidHandle);
    EXPECT(hipModuleLaunchKernel(fill, 1, 1, 1, 64, 1, 1, 0, s, fill_args, NULL), hipErrorInvalidHandle);
    EXPECT(hipModuleGetFunction(&fill, m, "fill_u32"), hipErrorInvalidHandle);
    OK(hipModuleUnload(m2));

    OK(hipFree(ua));
    OK(hipFree(ub));
    OK(hipFree(uc));
    OK(hipHostFree(out));
    OK(hipFree(x));
    OK(hipFree(y));
    OK(hipStreamDestroy(s));
    DONE("kernels");
}
