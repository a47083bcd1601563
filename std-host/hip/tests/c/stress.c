/* Four pthreads on HIP's C ABI at once: each creates streams and events, launches a host kernel,
   enqueues a host function, records events and makes a shared stream wait on them, captures
   and launches the captured graph, synchronises (event, stream, device) and destroys what it
   created, round after round, while the emulated GPU's command processor runs the work.

   The counters the kernels and host functions bump are plain memory, read by the host threads
   only after a synchronisation: under ThreadSanitizer (scripts/verify tsan builds the library
   and this program with it), a completion that does not order the work before the waiter is a
   reported race. Checks: every accepted launch and host function ran exactly once.

   argv[1]: rounds per thread (default 24). */
#define _GNU_SOURCE
#include "aqueduct_hip.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

enum { THREADS = 4 };

/* The failure count is shared by the threads: atomic, unlike check.h's. */
static int failures;

static void fail_at(const char *file, int line, const char *what, hipError_t got, hipError_t want) {
    fprintf(stderr, "%s:%d: %s = %s (%d), want %s (%d)\n", file, line, what, hipGetErrorName(got), (int)got,
            hipGetErrorName(want), (int)want);
    __atomic_fetch_add(&failures, 1, __ATOMIC_SEQ_CST);
}

#define EXPECT(call, want)                                                                         \
    do {                                                                                           \
        hipError_t e_ = (call), w_ = (want);                                                       \
        if (e_ != w_) fail_at(__FILE__, __LINE__, #call, e_, w_);                                  \
    } while (0)
#define OK(call) EXPECT(call, hipSuccess)
/* `call` must return `a` or `b`; returns which (1 for `a`). */
#define EITHER(call, a, b) either_((call), (a), (b), __FILE__, __LINE__, #call)
#define TRUE(cond)                                                                                 \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: %s is false\n", __FILE__, __LINE__, #cond);                     \
            __atomic_fetch_add(&failures, 1, __ATOMIC_SEQ_CST);                                    \
        }                                                                                          \
    } while (0)

static int either_(hipError_t got, hipError_t a, hipError_t b, const char *file, int line, const char *what) {
    if (got != a && got != b) fail_at(file, line, what, got, a);
    return got == a;
}

/* inc(unsigned *counter): ++*counter, one work-item. */
static void inc(void **args, dim3 blockIdx, dim3 gridDim, dim3 blockDim) {
    (void)blockIdx, (void)gridDim, (void)blockDim;
    unsigned *counter = *(unsigned **)args[0];
    ++*counter;
}
static char inc_symbol;

static void count_host_call(void *counter) { ++*(unsigned *)counter; }

static int rounds = 24;
static hipStream_t shared;
static unsigned *shared_counter; /* host memory the shared stream's kernels bump */
static unsigned shared_launches; /* atomic */
static pthread_barrier_t start;

struct worker {
    int me;
    unsigned *counter; /* host memory this thread's kernels bump */
    unsigned host_calls;
    unsigned launched, graphs_run, invalidated;
};

static hipError_t launch_inc(unsigned *counter, hipStream_t s) {
    void *args[] = {&counter};
    dim3 one = {1, 1, 1};
    return hipLaunchKernel(&inc_symbol, one, one, args, 0, s);
}

static void *work(void *arg) {
    struct worker *w = arg;
    pthread_barrier_wait(&start);
    for (int round = 0; round < rounds; round++) {
        hipStream_t s;
        hipEvent_t e;
        OK(hipStreamCreateWithFlags(&s, round % 2 ? hipStreamNonBlocking : hipStreamDefault));
        OK(hipEventCreateWithFlags(&e, round % 2 ? hipEventDisableTiming : hipEventDefault));
        for (int i = 0; i < 3; i++) {
            OK(launch_inc(w->counter, s));
            w->launched++;
        }
        OK(hipLaunchHostFunc(s, count_host_call, &w->host_calls));
        OK(launch_inc(shared_counter, shared));
        __atomic_fetch_add(&shared_launches, 1, __ATOMIC_SEQ_CST);
        OK(hipEventRecord(e, s));
        OK(hipStreamWaitEvent(shared, e, 0));

        /* A capture of this thread's stream, launched twice; another thread's
           hipDeviceSynchronize may invalidate it (and then its kernel never runs). */
        hipStreamCaptureMode mode = round % 3 ? hipStreamCaptureModeThreadLocal : hipStreamCaptureModeRelaxed;
        hipGraph_t g = NULL;
        hipGraphExec_t x;
        OK(hipStreamBeginCapture(s, mode));
        EITHER(launch_inc(w->counter, s), hipSuccess, hipErrorStreamCaptureInvalidated);
        if (EITHER(hipStreamEndCapture(s, &g), hipSuccess, hipErrorStreamCaptureInvalidated)) {
            OK(hipGraphInstantiate(&x, g, NULL, NULL, 0));
            OK(hipGraphLaunch(x, s));
            OK(hipGraphLaunch(x, s));
            w->launched += 2;
            w->graphs_run += 2;
            OK(hipGraphExecDestroy(x));
            OK(hipGraphDestroy(g));
        } else {
            w->invalidated++;
        }

        switch (round % 4) {
        case 0: OK(hipEventSynchronize(e)); break;
        case 1: EITHER(hipEventQuery(e), hipSuccess, hipErrorNotReady); break;
        case 2: EITHER(hipDeviceSynchronize(), hipSuccess, hipErrorStreamCaptureUnsupported); break;
        default: OK(hipStreamQuery(hipStreamPerThread)); break;
        }
        OK(hipStreamSynchronize(s));
        OK(hipEventDestroy(e));
        OK(hipStreamDestroy(s));
    }
    /* Every stream was synchronised before it was destroyed: all this thread's work ran. */
    TRUE(*w->counter == w->launched);
    TRUE(w->host_calls == (unsigned)rounds);
    TRUE(w->graphs_run / 2 + w->invalidated == (unsigned)rounds);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) rounds = atoi(argv[1]);
    if (rounds <= 0) { fprintf(stderr, "usage: stress [ROUNDS]\n"); return 2; }
    size_t sizes[] = {sizeof(unsigned *)};
    OK(aqdRegisterHostKernel(&inc_symbol, inc, 1, sizes));
    OK(hipStreamCreateWithFlags(&shared, hipStreamNonBlocking));
    OK(hipHostMalloc((void **)&shared_counter, sizeof *shared_counter, 0));
    *shared_counter = 0;
    struct worker w[THREADS] = {{0}};
    pthread_t t[THREADS];
    pthread_barrier_init(&start, NULL, THREADS);
    for (int i = 0; i < THREADS; i++) {
        w[i].me = i;
        OK(hipHostMalloc((void **)&w[i].counter, sizeof *w[i].counter, 0));
        *w[i].counter = 0;
    }
    for (int i = 0; i < THREADS; i++) TRUE(pthread_create(&t[i], NULL, work, &w[i]) == 0);
    for (int i = 0; i < THREADS; i++) TRUE(pthread_join(t[i], NULL) == 0);
    pthread_barrier_destroy(&start);
    OK(hipStreamSynchronize(shared));
    TRUE(*shared_counter == shared_launches);
    TRUE(shared_launches == (unsigned)(THREADS * rounds));
    for (int i = 0; i < THREADS; i++) {
        printf("thread %d: %u launches ran (%u from graphs), %u host functions, %u captures invalidated\n", i,
               *w[i].counter, w[i].graphs_run, w[i].host_calls, w[i].invalidated);
        OK(hipHostFree(w[i].counter));
    }
    OK(hipHostFree(shared_counter));
    OK(hipStreamDestroy(shared));
#if defined(__SANITIZE_THREAD__)
    printf("stress: built with ThreadSanitizer\n");
#endif
    /* Which libaqueduct_hip ran (the runner checks it is the one it built against). */
    Dl_info info;
    if (dladdr((void *)hipStreamCreate, &info) && info.dli_fname) printf("stress: library %s\n", info.dli_fname);
    if (__atomic_load_n(&failures, __ATOMIC_SEQ_CST)) {
        fprintf(stderr, "stress: %d failure(s)\n", failures);
        return 1;
    }
    printf("stress: ok\n");
    return 0;
}
