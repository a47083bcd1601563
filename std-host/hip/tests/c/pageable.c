/* Pageable host memory (static and stack arrays, malloc) as HIP treats it: an asynchronous
   pageable-to-device copy of at most 1 MiB returns once its source is staged (before the stream's
   earlier work has run, and the source may change at once); larger ones and copies to pageable
   memory return complete; asynchronous pageable copies on a stream that is not capturing are
   legal while another stream captures, and leave that capture valid; captured pageable copies
   replay with the host data of each launch, staged in graph order (after a host node that
   writes the source), also past the 4 MiB staging buffer. */
#include "check.h"

/* add1(unsigned *p, unsigned n): p[i] += 1. */
static void add1(void **args, dim3 b, dim3 g, dim3 d) {
    unsigned *p = *(unsigned **)args[0];
    unsigned n = *(unsigned *)args[1];
    for (unsigned i = 0; i < n; i++) p[i] += 1;
}
static char add1_symbol;

static void run_add1(unsigned *p, unsigned n, hipStream_t s) {
    void *args[] = {&p, &n};
    OK(hipLaunchKernel(&add1_symbol, (dim3){1, 1, 1}, (dim3){1, 1, 1}, args, 0, s));
}

/* A host node's work: fill the pageable source with round * 100 + i. */
static unsigned round_no;
enum { N = 256 };
static unsigned src[N], dst[N];
static void produce(void *arg) {
    (void)arg;
    for (unsigned i = 0; i < N; i++) src[i] = round_no * 100 + i;
}

int main(void) {
    size_t sizes[] = {sizeof(void *), sizeof(unsigned)};
    OK(aqdRegisterHostKernel(&add1_symbol, add1, 2, sizes));
    unsigned *gate, *d;
    OK(hipHostMalloc((void **)&gate, 64, 0));
    OK(hipMalloc((void **)&d, N * 4));
    hipStream_t s, c;
    OK(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
    OK(hipStreamCreateWithFlags(&c, hipStreamNonBlocking));

    /* A small pageable-to-device copy returns with its source staged, before the stream's
       earlier (held) work: the stream is still busy, and changing the source changes nothing. */
    unsigned stack_src[N];
    for (unsigned i = 0; i < N; i++) stack_src[i] = i;
    *gate = 0;
    OK(hipStreamWaitValue32(s, gate, 1, hipStreamWaitValueEq, 0xffffffffu));
    OK(hipMemcpyAsync(d, stack_src, sizeof stack_src, hipMemcpyHostToDevice, s));
    EXPECT(hipStreamQuery(s), hipErrorNotReady);
    for (unsigned i = 0; i < N; i++) stack_src[i] = 9999;
    __atomic_store_n(gate, 1, __ATOMIC_SEQ_CST);
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(dst, d, sizeof dst, hipMemcpyDeviceToHost));
    TRUE(dst[0] == 0 && dst[N - 1] == N - 1);

    /* Copies to pageable memory, and large ones from it, return complete. */
    run_add1(d, N, s);
    memset(dst, 0, sizeof dst);
    OK(hipMemcpyAsync(dst, d, sizeof dst, hipMemcpyDeviceToHost, s));
    OK(hipStreamQuery(s));
    TRUE(dst[0] == 1 && dst[N - 1] == N);
    enum { BIG = 5 << 20 }; /* more than the 4 MiB staging buffer */
    unsigned char *big = malloc(BIG), *big_back = malloc(BIG), *dbig;
    for (int i = 0; i < BIG; i++) big[i] = (unsigned char)(i * 7);
    OK(hipMalloc((void **)&dbig, BIG));
    OK(hipMemcpyAsync(dbig, big, BIG, hipMemcpyHostToDevice, s));
    OK(hipStreamQuery(s));
    OK(hipMemcpyAsync(big_back, dbig, BIG, hipMemcpyDeviceToHost, s));
    TRUE(memcmp(big, big_back, BIG) == 0);

    /* While c captures (global mode, this very thread), pageable copies on s are legal and
       leave the capture valid. */
    OK(hipStreamBeginCapture(c, hipStreamCaptureModeGlobal));
    run_add1(d, N, c);
    for (unsigned i = 0; i < N; i++) src[i] = 5 * i;
    OK(hipMemcpyAsync(d, src, sizeof src, hipMemcpyHostToDevice, s));
    OK(hipMemcpyAsync(dst, d, sizeof dst, hipMemcpyDeviceToHost, s));
    TRUE(dst[7] == 35);
    OK(hipMemcpyAsync(big_back, big, 64, hipMemcpyHostToHost, s));
    hipStreamCaptureStatus status;
    OK(hipStreamIsCapturing(c, &status));
    TRUE(status == hipStreamCaptureStatusActive);
    /* A synchronous copy is still refused (and invalidates the capture). */
    EXPECT(hipMemcpy(dst, d, sizeof dst, hipMemcpyDeviceToHost), hipErrorStreamCaptureImplicit);
    hipGraph_t graph;
    EXPECT(hipStreamEndCapture(c, &graph), hipErrorStreamCaptureInvalidated);
    OK(hipStreamBeginCapture(c, hipStreamCaptureModeGlobal));
    OK(hipMemcpyAsync(d, src, sizeof src, hipMemcpyHostToDevice, s));
    OK(hipStreamEndCapture(c, &graph));
    OK(hipGraphDestroy(graph));

    /* Captured pageable copies replay with each launch's host data, the source written by a
       host node before the copy reads it. */
    OK(hipStreamBeginCapture(c, hipStreamCaptureModeGlobal));
    OK(hipLaunchHostFunc(c, produce, NULL));
    OK(hipMemcpyAsync(d, src, sizeof src, hipMemcpyHostToDevice, c));
    run_add1(d, N, c);
    OK(hipMemcpyAsync(dst, d, sizeof dst, hipMemcpyDeviceToHost, c));
    OK(hipMemcpyAsync(dbig, big, BIG, hipMemcpyHostToDevice, c));
    OK(hipMemcpyAsync(big_back, dbig, BIG, hipMemcpyDeviceToHost, c));
    OK(hipStreamEndCapture(c, &graph));
    hipGraphExec_t exec;
    OK(hipGraphInstantiate(&exec, graph, NULL, NULL, 0));
    for (round_no = 1; round_no <= 4; round_no++) {
        memset(dst, 0, sizeof dst);
        for (int i = 0; i < BIG; i += 4096) big[i] = (unsigned char)(round_no + i / 4096);
        memset(big_back, 0, BIG);
        OK(hipGraphLaunch(exec, s));
        OK(hipStreamSynchronize(s));
        TRUE(dst[0] == round_no * 100 + 1 && dst[N - 1] == round_no * 100 + N);
        TRUE(memcmp(big, big_back, BIG) == 0);
    }
    OK(hipGraphExecDestroy(exec));
    OK(hipGraphDestroy(graph));

    OK(hipFree(dbig));
    OK(hipFree(d));
    free(big);
    free(big_back);
    DONE("pageable");
}
