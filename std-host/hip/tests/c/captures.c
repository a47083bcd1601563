/* 100 simultaneous captures on 100 streams: all begun before any ends, each recording its own
   work (a fill, a kernel, a copy back, a fork and join through a second stream for every tenth),
   with distinct capture ids; then all ended, instantiated and launched together, each with its
   own result. Then 4 pthreads each hold 25 thread-local captures at once. */
#include "check.h"

#include <pthread.h>

enum { CAPTURES = 100, THREADS = 4 };

/* add(unsigned *p, unsigned v): *p += v. */
static void add(void **args, dim3 b, dim3 g, dim3 d) { **(unsigned **)args[0] += *(unsigned *)args[1]; }
static char add_symbol;

static void run_add(unsigned *p, unsigned v, hipStream_t s) {
    void *args[] = {&p, &v};
    OK(hipLaunchKernel(&add_symbol, (dim3){1, 1, 1}, (dim3){1, 1, 1}, args, 0, s));
}

static unsigned *dev, *host;

/* Records capture i's work on s (fork/join through f for every tenth). */
static void record(int i, hipStream_t s, hipStream_t f, hipEvent_t fork, hipEvent_t join) {
    OK(hipMemsetD32Async(&dev[i], (int)i, 1, s));
    run_add(&dev[i], 1000, s);
    if (i % 10 == 0) {
        OK(hipEventRecord(fork, s));
        OK(hipStreamWaitEvent(f, fork, 0));
        run_add(&dev[i], 20000, f);
        OK(hipEventRecord(join, f));
        OK(hipStreamWaitEvent(s, join, 0));
    }
    OK(hipMemcpyAsync(&host[i], &dev[i], 4, hipMemcpyDeviceToHost, s));
}

static unsigned expected(int i) { return (unsigned)i + 1000 + (i % 10 == 0 ? 20000 : 0); }

/* One fork stream per tenth capture: 110 streams with the null and per-thread ones stay within
   the 128 hardware queues kfd-direct drives (a stream owns one queue). */
static hipStream_t streams[CAPTURES], forks[CAPTURES / 10];
static hipEvent_t fork_ev[CAPTURES], join_ev[CAPTURES];
static hipGraph_t graphs[CAPTURES];
static hipGraphExec_t execs[CAPTURES];

static void *worker(void *arg) {
    int first = (int)(long)arg * (CAPTURES / THREADS);
    for (int i = first; i < first + CAPTURES / THREADS; i++)
        OK(hipStreamBeginCapture(streams[i], hipStreamCaptureModeThreadLocal));
    for (int i = first; i < first + CAPTURES / THREADS; i++) record(i, streams[i], forks[i / 10], fork_ev[i], join_ev[i]);
    for (int i = first; i < first + CAPTURES / THREADS; i++) {
        OK(hipStreamEndCapture(streams[i], &graphs[i]));
        OK(hipGraphInstantiate(&execs[i], graphs[i], NULL, NULL, 0));
        OK(hipGraphLaunch(execs[i], streams[i]));
    }
    for (int i = first; i < first + CAPTURES / THREADS; i++) {
        OK(hipStreamSynchronize(streams[i]));
        OK(hipGraphExecDestroy(execs[i]));
        OK(hipGraphDestroy(graphs[i]));
    }
    return NULL;
}

int main(void) {
    size_t sizes[] = {sizeof(void *), sizeof(unsigned)};
    OK(aqdRegisterHostKernel(&add_symbol, add, 2, sizes));
    OK(hipMalloc((void **)&dev, CAPTURES * 4));
    OK(hipHostMalloc((void **)&host, CAPTURES * 4, 0));
    for (int i = 0; i < CAPTURES; i++) {
        OK(hipStreamCreateWithFlags(&streams[i], hipStreamNonBlocking));
        if (i % 10 == 0) OK(hipStreamCreateWithFlags(&forks[i / 10], hipStreamNonBlocking));
        OK(hipEventCreateWithFlags(&fork_ev[i], hipEventDisableTiming));
        OK(hipEventCreateWithFlags(&join_ev[i], hipEventDisableTiming));
    }

    /* All 100 begin before any ends. */
    unsigned long long ids[CAPTURES];
    for (int i = 0; i < CAPTURES; i++) OK(hipStreamBeginCapture(streams[i], hipStreamCaptureModeGlobal));
    for (int i = 0; i < CAPTURES; i++) record(i, streams[i], forks[i / 10], fork_ev[i], join_ev[i]);
    for (int i = 0; i < CAPTURES; i++) {
        hipStreamCaptureStatus st;
        OK(hipStreamGetCaptureInfo(streams[i], &st, &ids[i]));
        TRUE(st == hipStreamCaptureStatusActive);
        for (int j = 0; j < i; j++) TRUE(ids[j] != ids[i]);
    }
    for (int i = 0; i < CAPTURES; i++) {
        OK(hipStreamEndCapture(streams[i], &graphs[i]));
        size_t n = 0;
        OK(hipGraphGetNodes(graphs[i], NULL, &n));
        TRUE(n == (i % 10 == 0 ? 4u : 3u));
    }
    for (int i = 0; i < CAPTURES; i++) OK(hipGraphInstantiate(&execs[i], graphs[i], NULL, NULL, 0));
    memset(host, 0, CAPTURES * 4);
    for (int i = 0; i < CAPTURES; i++) OK(hipGraphLaunch(execs[i], streams[i]));
    OK(hipDeviceSynchronize());
    for (int i = 0; i < CAPTURES; i++) TRUE(host[i] == expected(i));
    for (int i = 0; i < CAPTURES; i++) {
        OK(hipGraphExecDestroy(execs[i]));
        OK(hipGraphDestroy(graphs[i]));
    }

    /* 4 threads, 25 thread-local captures each, all at once. */
    memset(host, 0, CAPTURES * 4);
    pthread_t t[THREADS];
    for (long k = 0; k < THREADS; k++) pthread_create(&t[k], NULL, worker, (void *)k);
    for (int k = 0; k < THREADS; k++) pthread_join(t[k], NULL);
    for (int i = 0; i < CAPTURES; i++) TRUE(host[i] == expected(i));

    for (int i = 0; i < CAPTURES; i++) {
        OK(hipStreamDestroy(streams[i]));
        if (i % 10 == 0) OK(hipStreamDestroy(forks[i / 10]));
    }
    DONE("captures");
}
