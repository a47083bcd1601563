/* Two pthreads: per-thread default streams, per-thread last errors, and captures seen across
   threads (the thread-mode rule, the wrong-thread end); then eight threads allocating, filling
   and freeing at once (a freed address handed to another thread at once stays that thread's). */
#include "check.h"

#include <pthread.h>

static pthread_barrier_t step;
static hipStream_t shared;
static unsigned long long pt_ids[2];

static void sync_step(void) { pthread_barrier_wait(&step); }

static void *worker(void *arg) {
    int me = (int)(long)arg;
    unsigned int *buf;
    unsigned int host[256];
    void *p;
    hipGraph_t g;

    /* Per-thread stream: one per thread, blocking, priority 0, usable for work. */
    /* HIP 5.2 has no hipStreamGetId (HIP 6.0 added it). */
    NEWER_HIP(OK(hipStreamGetId(hipStreamPerThread, &pt_ids[me])));
    OK(hipMalloc((void **)&buf, sizeof host));
    OK(hipMemsetD32Async(buf, 100 + me, 256, hipStreamPerThread));
    OK(hipMemcpyAsync(host, buf, sizeof host, hipMemcpyDeviceToHost, hipStreamPerThread));
    OK(hipStreamSynchronize(hipStreamPerThread));
    TRUE(host[0] == (unsigned)(100 + me) && host[255] == (unsigned)(100 + me));
    sync_step(); /* 1 */
    NEWER_HIP(TRUE(pt_ids[0] != 0 && pt_ids[1] != 0 && pt_ids[0] != pt_ids[1]));

    /* Last errors are per thread. */
    if (me == 0) EXPECT(hipStreamCreate(NULL), hipErrorInvalidValue);
    sync_step(); /* 2 */
    EXPECT(hipPeekAtLastError(), me == 0 ? hipErrorInvalidValue : hipSuccess);
    EXPECT(hipGetLastError(), me == 0 ? hipErrorInvalidValue : hipSuccess);

    /* Thread 0's Global capture forbids thread 1's (Global-mode) allocation and is invalidated
       by it; a ThreadLocal capture does not. */
    if (me == 0) OK(hipStreamBeginCapture(shared, hipStreamCaptureModeGlobal));
    sync_step(); /* 3 */
    if (me == 1) EXPECT(hipMalloc(&p, 64), hipErrorStreamCaptureUnsupported);
    sync_step(); /* 4 */
    if (me == 0 && !expect_hip52()) EXPECT(hipStreamEndCapture(shared, &g), hipErrorStreamCaptureInvalidated);
    /* HIP 5.2 refuses the allocation but leaves the capture valid: it ends with a graph. */
    if (me == 0 && expect_hip52()) {
        OK(hipStreamEndCapture(shared, &g));
        OK(hipGraphDestroy(g));
    }
    if (me == 0) OK(hipStreamBeginCapture(shared, hipStreamCaptureModeThreadLocal));
    sync_step(); /* 5 */
    if (me == 1) {
        OK(hipMalloc(&p, 64));
        OK(hipFree(p));
        /* Only the beginning thread may end a non-relaxed capture. */
        EXPECT(hipStreamEndCapture(shared, &g), hipErrorStreamCaptureWrongThread);
    }
    sync_step(); /* 6 */
    if (me == 0) {
        OK(hipStreamEndCapture(shared, &g));
        OK(hipGraphDestroy(g));
        OK(hipStreamBeginCapture(shared, hipStreamCaptureModeRelaxed));
    }
    sync_step(); /* 7 */
    if (me == 1) {
        /* A relaxed capture may be ended from any thread. */
        OK(hipStreamEndCapture(shared, &g));
        OK(hipGraphDestroy(g));
    }
    sync_step(); /* 8 */

    /* The thread's capture mode is its own. */
    hipStreamCaptureMode mode = me == 0 ? hipStreamCaptureModeRelaxed : hipStreamCaptureModeThreadLocal;
    OK(hipThreadExchangeStreamCaptureMode(&mode));
    TRUE(mode == hipStreamCaptureModeGlobal);
    sync_step(); /* 9 */
    mode = hipStreamCaptureModeGlobal;
    OK(hipThreadExchangeStreamCaptureMode(&mode));
    TRUE(mode == (me == 0 ? hipStreamCaptureModeRelaxed : hipStreamCaptureModeThreadLocal));

    OK(hipFree(buf));
    return NULL;
}

static void *worker_exit(void *arg) {
    OK(hipStreamQuery(hipStreamPerThread));
    OK(hipMemsetAsync(NULL, 0, 0, hipStreamPerThread)); /* nothing to fill: HIP checks no pointer */
    return NULL;
}

/* Allocate, fill on an own stream, check, free: many rounds, all threads at once. */
static void *churn(void *arg) {
    unsigned char value = (unsigned char)(long)arg;
    unsigned char host[1024];
    for (int round = 0; round < 30; round++) {
        hipStream_t s;
        void *p = NULL;
        OK(hipStreamCreate(&s));
        OK(hipMalloc(&p, sizeof host));
        OK(hipMemsetAsync(p, value, sizeof host, s));
        OK(hipMemcpyAsync(host, p, sizeof host, hipMemcpyDeviceToHost, s));
        OK(hipStreamSynchronize(s));
        TRUE(host[0] == value && host[sizeof host - 1] == value);
        OK(hipFree(p));
        OK(hipStreamDestroy(s));
    }
    return NULL;
}

int main(void) {
    pthread_t t[2];
    OK(hipStreamCreate(&shared));
    pthread_barrier_init(&step, NULL, 2);
    for (long i = 0; i < 2; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&step);
    /* The main thread's per-thread stream is a third one. */
    unsigned long long mine = 0;
    NEWER_HIP(OK(hipStreamGetId(hipStreamPerThread, &mine))); /* none in HIP 5.2 */
    NEWER_HIP(TRUE(mine != pt_ids[0] && mine != pt_ids[1]));
    /* Threads come and go: their per-thread streams go back to the runtime. */
    for (int round = 0; round < 40; round++) {
        pthread_t u;
        pthread_create(&u, NULL, worker_exit, NULL);
        pthread_join(u, NULL);
    }
    pthread_t c[8];
    for (long i = 0; i < 8; i++) pthread_create(&c[i], NULL, churn, (void *)(i + 1));
    for (int i = 0; i < 8; i++) pthread_join(c[i], NULL);
    OK(hipStreamDestroy(shared));
    DONE("threads");
}
