// The side-by-side benchmark: one HIP program, compiled as hipcc compiles one (clang-15: the
// device half to a gfx90a code object, bundled; the host half embedding the bundle, so clang
// emits the fat-binary registration and the <<<>>> launches through
// __hipPushCallConfiguration / hipLaunchKernel). scripts/side-by-side runs this very binary on
// the emulated GPU twice: with Debian's libamdhip64 under the preload, and with aqueduct's
// libamdhip64.so.5. Its kernel runs as the C twin of twins.c (AQUEDUCT_TWINS).
//
// Prints one line per figure: `name ns-per-operation`, the median of its samples; every call is
// checked (a failure exits 1 naming it, so no failing operation passes as a fast one).
#include <hip/hip_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define __global__ __attribute__((global))

// Does nothing: the launch is what is measured.
extern "C" __global__ void side_by_side_empty(unsigned *p) { (void)p; }

#define CHECK(call)                                                                                \
    do {                                                                                           \
        hipError_t e_ = (call);                                                                    \
        if (e_ != hipSuccess) {                                                                    \
            fprintf(stderr, "%s:%d: %s = %s\n", __FILE__, __LINE__, #call, hipGetErrorName(e_));   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static double now_ns() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

enum { SAMPLES = 7 };

static double median(double *v) {
    qsort(v, SAMPLES, sizeof *v, cmp);
    return v[SAMPLES / 2];
}

static void report(const char *name, double *samples) { printf("%s %.1f\n", name, median(samples)); }

int main(int argc, char **argv) {
    int scale = argc > 1 ? atoi(argv[1]) : 1; // 1: full; more: fewer iterations
    if (scale < 1) scale = 1;
    hipStream_t s;
    CHECK(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
    unsigned *buf;
    CHECK(hipMalloc((void **)&buf, 4));
    // Warm up: code object loaded, queues made.
    for (int i = 0; i < 16; i++) side_by_side_empty<<<1, 1, 0, s>>>(buf);
    CHECK(hipGetLastError());
    CHECK(hipStreamSynchronize(s));
    double v[SAMPLES];

    int n = 200 / scale;
    for (int k = 0; k < SAMPLES; k++) {
        double t = now_ns();
        for (int i = 0; i < n; i++) {
            hipStream_t x;
            CHECK(hipStreamCreate(&x));
            CHECK(hipStreamDestroy(x));
        }
        v[k] = (now_ns() - t) / n;
    }
    report("stream_create_destroy", v);

    n = 1000 / scale;
    for (int k = 0; k < SAMPLES; k++) {
        double t = now_ns();
        for (int i = 0; i < n; i++) side_by_side_empty<<<1, 1, 0, s>>>(buf);
        v[k] = (now_ns() - t) / n;
        CHECK(hipGetLastError());
        CHECK(hipStreamSynchronize(s));
    }
    report("launch_enqueue", v);

    n = 500 / scale;
    for (int k = 0; k < SAMPLES; k++) {
        double t = now_ns();
        for (int i = 0; i < n; i++) {
            side_by_side_empty<<<1, 1, 0, s>>>(buf);
            CHECK(hipStreamSynchronize(s));
        }
        v[k] = (now_ns() - t) / n;
    }
    CHECK(hipGetLastError());
    report("launch_synchronize", v);

    hipEvent_t e;
    CHECK(hipEventCreateWithFlags(&e, hipEventDisableTiming));
    for (int k = 0; k < SAMPLES; k++) {
        double t = now_ns();
        for (int i = 0; i < n; i++) {
            CHECK(hipEventRecord(e, s));
            CHECK(hipEventSynchronize(e));
        }
        v[k] = (now_ns() - t) / n;
    }
    report("event_record_synchronize", v);

    const int nodes = 1000;
    hipGraph_t g;
    hipGraphExec_t x;
    CHECK(hipStreamBeginCapture(s, hipStreamCaptureModeGlobal));
    for (int i = 0; i < nodes; i++) side_by_side_empty<<<1, 1, 0, s>>>(buf);
    CHECK(hipStreamEndCapture(s, &g));
    CHECK(hipGraphInstantiate(&x, g, NULL, NULL, 0));
    CHECK(hipGraphLaunch(x, s));
    CHECK(hipStreamSynchronize(s));
    for (int k = 0; k < SAMPLES; k++) {
        double t = now_ns();
        CHECK(hipGraphLaunch(x, s));
        v[k] = (now_ns() - t) / nodes;
        CHECK(hipStreamSynchronize(s));
    }
    report("graph_launch_per_node_1000", v);
    CHECK(hipGraphExecDestroy(x));
    CHECK(hipGraphDestroy(g));

    const int captured = 100;
    for (int k = 0; k < SAMPLES; k++) {
        double t = now_ns();
        CHECK(hipStreamBeginCapture(s, hipStreamCaptureModeGlobal));
        for (int i = 0; i < captured; i++) side_by_side_empty<<<1, 1, 0, s>>>(buf);
        CHECK(hipStreamEndCapture(s, &g));
        CHECK(hipGraphInstantiate(&x, g, NULL, NULL, 0));
        v[k] = (now_ns() - t) / captured;
        CHECK(hipGraphExecDestroy(x));
        CHECK(hipGraphDestroy(g));
    }
    report("capture_instantiate_per_node", v);

    CHECK(hipEventDestroy(e));
    CHECK(hipFree(buf));
    CHECK(hipStreamDestroy(s));
    return 0;
}
