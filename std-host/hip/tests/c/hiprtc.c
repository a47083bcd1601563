/* hiprtc: a program with a header and name expressions compiled by the installed clang-15 for
   the device, its lowered names, its log, and its code object loaded with hipModuleLoadData and
   launched (fill_u32 runs as the fixture twin of that name on the emulated GPU). */
#include "check.h"

#include <hip/hiprtc.h>

#define RTC(call, want)                                                                            \
    do {                                                                                           \
        hiprtcResult r_ = (call);                                                                  \
        if (r_ != (want)) {                                                                        \
            fprintf(stderr, "%s:%d: %s = %s, want %s\n", __FILE__, __LINE__, #call,                \
                    hiprtcGetErrorString(r_), hiprtcGetErrorString(want));                          \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static const char *source =
    "#include <hip/hip_runtime.h>\n"
    "#include \"sub/offset.h\"\n"
    "template <typename T> __global__ void scale(T *p, T v) { p[blockIdx.x * blockDim.x + threadIdx.x] *= v; }\n"
    "extern \"C\" __global__ void fill_u32(unsigned *dst, unsigned value, unsigned count) {\n"
    "    __shared__ unsigned s[256];\n"
    "    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    s[threadIdx.x] = value + OFFSET;\n"
    "    __syncthreads();\n"
    "    if (i < count) dst[i] = s[threadIdx.x] - OFFSET + EXTRA;\n"
    "}\n";

int main(void) {
    int major = 0, minor = 0;
    RTC(hiprtcVersion(&major, &minor), HIPRTC_SUCCESS);
    TRUE(major == 5 && minor == 2);
    TRUE(strcmp(hiprtcGetErrorString(HIPRTC_ERROR_COMPILATION), "HIPRTC_ERROR_COMPILATION") == 0);

    const char *headers[] = {"#define OFFSET 5\n"}, *names[] = {"sub/offset.h"};
    hiprtcProgram prog = NULL;
    RTC(hiprtcCreateProgram(NULL, source, "fill.hip", 1, headers, names), HIPRTC_ERROR_INVALID_PROGRAM);
    RTC(hiprtcCreateProgram(&prog, NULL, "fill.hip", 1, headers, names), HIPRTC_ERROR_INVALID_INPUT);
    RTC(hiprtcCreateProgram(&prog, source, "fill.hip", 1, NULL, names), HIPRTC_ERROR_INVALID_INPUT);
    RTC(hiprtcCreateProgram(&prog, source, "fill.hip", 1, headers, names), HIPRTC_SUCCESS);
    RTC(hiprtcAddNameExpression(prog, "scale<float>"), HIPRTC_SUCCESS);
    RTC(hiprtcAddNameExpression(prog, "fill_u32"), HIPRTC_SUCCESS);
    RTC(hiprtcAddNameExpression(prog, NULL), HIPRTC_ERROR_INVALID_INPUT);
    const char *lowered = NULL;
    RTC(hiprtcGetLoweredName(prog, "fill_u32", &lowered), HIPRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION);
    const char *bad_option[] = {"notanoption"};
    RTC(hiprtcCompileProgram(prog, 1, bad_option), HIPRTC_ERROR_INVALID_OPTION);
    const char *options[] = {"-DEXTRA=1", "-std=c++17"};
    hiprtcResult compiled = hiprtcCompileProgram(prog, 2, options);
    RTC(compiled, HIPRTC_SUCCESS);
    if (compiled != HIPRTC_SUCCESS) { /* show why */
        size_t n = 0;
        hiprtcGetProgramLogSize(prog, &n);
        char *text = malloc(n);
        hiprtcGetProgramLog(prog, text);
        fprintf(stderr, "log:\n%s\n", text);
        free(text);
    }
    RTC(hiprtcAddNameExpression(prog, "scale<int>"), HIPRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION);
    RTC(hiprtcGetLoweredName(prog, "scale<float>", &lowered), HIPRTC_SUCCESS);
    TRUE(lowered != NULL && strcmp(lowered, "_Z5scaleIfEvPT_S0_") == 0);
    RTC(hiprtcGetLoweredName(prog, "fill_u32", &lowered), HIPRTC_SUCCESS);
    TRUE(lowered != NULL && strcmp(lowered, "fill_u32") == 0);
    RTC(hiprtcGetLoweredName(prog, "scale<double>", &lowered), HIPRTC_ERROR_NAME_EXPRESSION_NOT_VALID);
    size_t log_size = 0, code_size = 0;
    RTC(hiprtcGetProgramLogSize(prog, &log_size), HIPRTC_SUCCESS);
    TRUE(log_size >= 1);
    RTC(hiprtcGetCodeSize(prog, &code_size), HIPRTC_SUCCESS);
    TRUE(code_size > 0);
    char *code = malloc(code_size);
    RTC(hiprtcGetCode(prog, code), HIPRTC_SUCCESS);
    TRUE(memcmp(code, "\177ELF", 4) == 0);

    /* The code object loads and its kernels are found by their lowered names. */
    hipModule_t m;
    hipFunction_t fill, scale;
    OK(hipModuleLoadData(&m, code));
    OK(hipModuleGetFunction(&fill, m, "fill_u32"));
    RTC(hiprtcGetLoweredName(prog, "scale<float>", &lowered), HIPRTC_SUCCESS);
    OK(hipModuleGetFunction(&scale, m, lowered));
    enum { N = 1000 };
    unsigned *d, h[N];
    OK(hipMalloc((void **)&d, sizeof h));
    unsigned value = 12, count = N;
    void *args[] = {&d, &value, &count};
    OK(hipModuleLaunchKernel(fill, (N + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
    OK(hipDeviceSynchronize());
    OK(hipMemcpy(h, d, sizeof h, hipMemcpyDeviceToHost));
    TRUE(h[0] == 12 && h[N - 1] == 12); /* the twin computes dst[i] = value */
    OK(hipFree(d));
    OK(hipModuleUnload(m));
    free(code);
    RTC(hiprtcDestroyProgram(&prog), HIPRTC_SUCCESS);
    TRUE(prog == NULL);
    RTC(hiprtcDestroyProgram(&prog), HIPRTC_ERROR_INVALID_PROGRAM);

    /* A compilation error: the log has the compiler's message under the program's name. */
    RTC(hiprtcCreateProgram(&prog, "__global__ void broken( { }\n", "broken.hip", 0, NULL, NULL), HIPRTC_SUCCESS);
    RTC(hiprtcCompileProgram(prog, 0, NULL), HIPRTC_ERROR_COMPILATION);
    RTC(hiprtcGetProgramLogSize(prog, &log_size), HIPRTC_SUCCESS);
    char *log = malloc(log_size);
    RTC(hiprtcGetProgramLog(prog, log), HIPRTC_SUCCESS);
    TRUE(strstr(log, "broken.hip") != NULL && strstr(log, "error") != NULL);
    free(log);
    RTC(hiprtcGetCodeSize(prog, &code_size), HIPRTC_SUCCESS);
    TRUE(code_size == 0);
    RTC(hiprtcDestroyProgram(&prog), HIPRTC_SUCCESS);
    DONE("hiprtc");
}
