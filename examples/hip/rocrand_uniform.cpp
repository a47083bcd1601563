/* A C++ program using Debian's rocRAND (librocrand1): a million uniform floats from Philox,
   checked on the host (every value in (0, 1], mean near 1/2), and the same seed giving the same
   numbers again. Build: hipcc rocrand_uniform.cpp -lrocrand -o rocrand_uniform */
#include <hip/hip_runtime.h>
#include <rocrand/rocrand.h>
#include <stdio.h>
#include <stdlib.h>

#define HIP(call) do { hipError_t e_ = (call); if (e_ != hipSuccess) { \
    fprintf(stderr, "%s: %s\n", #call, hipGetErrorName(e_)); return 1; } } while (0)
#define RAND(call) do { rocrand_status s_ = (call); if (s_ != ROCRAND_STATUS_SUCCESS) { \
    fprintf(stderr, "%s: rocrand status %d\n", #call, (int)s_); return 1; } } while (0)

static int generate(float *dev, size_t n, unsigned long long seed, float *host) {
    rocrand_generator g;
    RAND(rocrand_create_generator(&g, ROCRAND_RNG_PSEUDO_PHILOX4_32_10));
    RAND(rocrand_set_seed(g, seed));
    RAND(rocrand_generate_uniform(g, dev, n));
    HIP(hipDeviceSynchronize());
    HIP(hipMemcpy(host, dev, n * sizeof(float), hipMemcpyDeviceToHost));
    RAND(rocrand_destroy_generator(g));
    return 0;
}

int main(void) {
    const size_t n = 1 << 20;
    float *dev, *a = (float *)malloc(n * sizeof(float)), *b = (float *)malloc(n * sizeof(float));
    HIP(hipMalloc((void **)&dev, n * sizeof(float)));
    if (generate(dev, n, 1234, a) || generate(dev, n, 1234, b)) return 1;
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(a[i] > 0.0f && a[i] <= 1.0f) || a[i] != b[i]) {
            fprintf(stderr, "value %zu: %g, again %g\n", i, a[i], b[i]);
            return 1;
        }
        sum += a[i];
    }
    if (sum / n < 0.49 || sum / n > 0.51) {
        fprintf(stderr, "mean %g\n", sum / n);
        return 1;
    }
    HIP(hipFree(dev));
    printf("rocrand_uniform: ok (mean %.4f)\n", sum / n);
    return 0;
}
