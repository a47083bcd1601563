/* A user kernel whose twin lives in the user's own shared library (AQUEDUCT_TWINS): load a
 * clang-built gfx90a code object, launch `aqueduct_scale` by kernelParams, check the result.
 * usage: hip_user_twin CODE_OBJECT */
#include <hip/hip_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(x) do { hipError_t e_ = (x); if (e_ != hipSuccess) { \
    fprintf(stderr, "%s:%d %s = %d (%s)\n", __FILE__, __LINE__, #x, e_, hipGetErrorString(e_)); exit(1); } } while (0)

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const unsigned n = 50000;
    float *h = malloc(n * sizeof(float));
    for (unsigned i = 0; i < n; i++) h[i] = (float)(i % 97);
    float *d;
    CHECK(hipMalloc((void **)&d, n * sizeof(float)));
    CHECK(hipMemcpy(d, h, n * sizeof(float), hipMemcpyHostToDevice));
    hipModule_t m;
    hipFunction_t f;
    CHECK(hipModuleLoad(&m, argv[1]));
    CHECK(hipModuleGetFunction(&f, m, "aqueduct_scale"));
    float a = 2.5f;
    unsigned cnt = n;
    void *params[] = {&d, &a, &cnt};
    CHECK(hipModuleLaunchKernel(f, (n + 255) / 256, 1, 1, 256, 1, 1, 0, 0, params, NULL));
    CHECK(hipMemcpy(h, d, n * sizeof(float), hipMemcpyDeviceToHost));
    for (unsigned i = 0; i < n; i++) {
        float want = 2.5f * (float)(i % 97) + (float)i;
        if (h[i] != want) { fprintf(stderr, "x[%u] = %f, want %f\n", i, h[i], want); return 1; }
    }
    CHECK(hipModuleUnload(m));
    CHECK(hipFree(d));
    printf("user twin ok\n");
    return 0;
}
