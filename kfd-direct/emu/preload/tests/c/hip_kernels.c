/* Stage 5/6: user kernels from a clang-15 gfx90a code object, through hipModuleLaunchKernel and
 * through hipLaunchKernel with a registered fat binary; and the fault paths.
 * usage: hip_kernels CODE_OBJECT (module|fatbin|untwinned|memfault|mixed) */
#include <hip/hip_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(x) do { hipError_t e_ = (x); if (e_ != hipSuccess) { \
    fprintf(stderr, "%s:%d %s = %d (%s)\n", __FILE__, __LINE__, #x, e_, hipGetErrorString(e_)); exit(1); } } while (0)

extern void **__hipRegisterFatBinary(const void *);
extern void __hipRegisterFunction(void **, const void *, char *, const char *, unsigned, void *, void *, void *, void *, int *);

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); exit(1); }
    fseek(f, 0, SEEK_END); *len = ftell(f); fseek(f, 0, SEEK_SET);
    char *b = malloc(*len);
    if (fread(b, 1, *len, f) != *len) exit(1);
    fclose(f);
    return b;
}

/* A clang offload bundle with an empty host entry and the gfx90a code object. */
static char *bundle(const char *co, size_t co_len) {
    const char *triples[2] = {"host-x86_64-unknown-linux", "hipv4-amdgcn-amd-amdhsa--gfx90a"};
    size_t header = 24 + 8, sizes[2] = {0, co_len};
    for (int i = 0; i < 2; i++) header += 24 + strlen(triples[i]);
    size_t data = (header + 4095) & ~(size_t)4095;
    char *b = aligned_alloc(4096, data + co_len + 4096);
    memset(b, 0, data);
    memcpy(b, "__CLANG_OFFLOAD_BUNDLE__", 24);
    uint64_t n = 2, off = 32;
    memcpy(b + 24, &n, 8);
    for (int i = 0; i < 2; i++) {
        uint64_t o = i ? data : 0, s = sizes[i], tl = strlen(triples[i]);
        memcpy(b + off, &o, 8); memcpy(b + off + 8, &s, 8); memcpy(b + off + 16, &tl, 8);
        memcpy(b + off + 24, triples[i], tl);
        off += 24 + tl;
    }
    memcpy(b + data, co, co_len);
    return b;
}

struct fatbin_wrapper { int magic; int version; const void *binary; void *unused; };
static void vadd_stub(void) {}
static void untwinned_stub(void) {}

static void check_vadd(const float *c, const float *a, const float *b, unsigned n, const char *what) {
    for (unsigned i = 0; i < n; i++)
        if (c[i] != a[i] + b[i]) { fprintf(stderr, "%s: c[%u] = %f, want %f\n", what, i, c[i], a[i] + b[i]); exit(1); }
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    size_t co_len;
    char *co = slurp(argv[1], &co_len);
    const char *mode = argv[2];
    const unsigned n = 100000;
    float *a = malloc(n * 4), *b = malloc(n * 4), *c = malloc(n * 4);
    for (unsigned i = 0; i < n; i++) { a[i] = (float)i; b[i] = 0.5f * i; }
    float *da, *db, *dc;
    CHECK(hipMalloc((void **)&da, n * 4));
    CHECK(hipMalloc((void **)&db, n * 4));
    CHECK(hipMalloc((void **)&dc, n * 4));
    CHECK(hipMemcpy(da, a, n * 4, hipMemcpyHostToDevice));
    CHECK(hipMemcpy(db, b, n * 4, hipMemcpyHostToDevice));
    struct { float *c; const float *a; const float *b; unsigned n; } args = {dc, da, db, n};
    if (!strcmp(mode, "module") || !strcmp(mode, "untwinned") || !strcmp(mode, "memfault") || !strcmp(mode, "mixed")) {
        hipModule_t m;
        hipFunction_t f;
        CHECK(hipModuleLoadData(&m, co));
        if (!strcmp(mode, "untwinned")) {
            CHECK(hipModuleGetFunction(&f, m, "aqueduct_untwinned"));
            void *p = dc;
            void *cfg[] = {HIP_LAUNCH_PARAM_BUFFER_POINTER, &p, HIP_LAUNCH_PARAM_BUFFER_SIZE, &(size_t){8}, HIP_LAUNCH_PARAM_END};
            CHECK(hipModuleLaunchKernel(f, 1, 1, 1, 64, 1, 1, 0, 0, NULL, cfg));
            hipError_t e = hipDeviceSynchronize();
            printf("untwinned kernel: sync returned %d (%s)\n", e, hipGetErrorString(e));
            return e == hipSuccess ? 0 : 3;
        }
        if (!strcmp(mode, "memfault")) {
            CHECK(hipModuleGetFunction(&f, m, "aqueduct_poke"));
            struct { void *p; unsigned v; } pa = {(void *)0x7ff000000000ull, 1};
            size_t sz = sizeof(pa);
            void *cfg[] = {HIP_LAUNCH_PARAM_BUFFER_POINTER, &pa, HIP_LAUNCH_PARAM_BUFFER_SIZE, &sz, HIP_LAUNCH_PARAM_END};
            CHECK(hipModuleLaunchKernel(f, 1, 1, 1, 64, 1, 1, 0, 0, NULL, cfg));
            hipError_t e = hipDeviceSynchronize();
            printf("memory fault: sync returned %d (%s)\n", e, hipGetErrorString(e));
            return e == hipSuccess ? 0 : 3;
        }
        if (!strcmp(mode, "mixed")) {
            /* Arguments by kernelParams: ROCclr lays them out from the metadata. */
            CHECK(hipModuleGetFunction(&f, m, "aqueduct_mixed"));
            char ch = -3;
            short sh = 1000;
            int *dp = (int *)dc;
            struct { unsigned char x, y; } v = {7, 250};
            unsigned cnt = 5000;
            void *params[] = {&ch, &sh, &dp, &v, &cnt};
            CHECK(hipModuleLaunchKernel(f, (cnt + 63) / 64, 1, 1, 64, 1, 1, 0, 0, params, NULL));
            int *out = malloc(cnt * 4);
            CHECK(hipMemcpy(out, dp, cnt * 4, hipMemcpyDeviceToHost));
            for (unsigned i = 0; i < cnt; i++)
                if (out[i] != -3 + 1000 + 7 + 250 + (int)i) { fprintf(stderr, "mixed: p[%u] = %d\n", i, out[i]); return 1; }
            printf("mixed arguments ok\n");
            return 0;
        }
        CHECK(hipModuleGetFunction(&f, m, "aqueduct_vadd"));
        for (int round = 0; round < 2; round++) {
            size_t sz = sizeof(args);
            void *cfg[] = {HIP_LAUNCH_PARAM_BUFFER_POINTER, &args, HIP_LAUNCH_PARAM_BUFFER_SIZE, &sz, HIP_LAUNCH_PARAM_END};
            CHECK(hipMemset(dc, 0, n * 4));
            CHECK(hipModuleLaunchKernel(f, (n + 255) / 256, 1, 1, 256, 1, 1, 0, 0, NULL, cfg));
            CHECK(hipMemcpy(c, dc, n * 4, hipMemcpyDeviceToHost));
            check_vadd(c, a, b, n, "hipModuleLaunchKernel");
        }
        CHECK(hipModuleUnload(m));
        printf("module launch ok\n");
    } else {
        static struct fatbin_wrapper w;
        w.magic = 0x48495046; w.version = 1; w.binary = bundle(co, co_len); w.unused = NULL;
        void **h = __hipRegisterFatBinary(&w);
        __hipRegisterFunction(h, (const void *)vadd_stub, "aqueduct_vadd", "aqueduct_vadd", (unsigned)-1, 0, 0, 0, 0, 0);
        __hipRegisterFunction(h, (const void *)untwinned_stub, "aqueduct_untwinned", "aqueduct_untwinned", (unsigned)-1, 0, 0, 0, 0, 0);
        void *kargs[] = {&args.c, &args.a, &args.b, &args.n};
        dim3 grid = {(n + 127) / 128, 1, 1}, block = {128, 1, 1};
        CHECK(hipLaunchKernel((const void *)vadd_stub, grid, block, kargs, 0, 0));
        CHECK(hipMemcpy(c, dc, n * 4, hipMemcpyDeviceToHost));
        check_vadd(c, a, b, n, "hipLaunchKernel");
        printf("fatbin launch ok\n");
    }
    CHECK(hipFree(da)); CHECK(hipFree(db)); CHECK(hipFree(dc));
    return 0;
}
