/* Stream capture from C: fork/join through events, status queries, dependency updates,
   invalidation, the thread's capture mode; graphs: create, nodes, instantiate, launch. */
#include "check.h"

/* A host function adding its run to the counter its user data points to (no state in statics;
   the main thread reads the counter only after a synchronize). */
static void on_host(void *data) { ++*(int *)data; }

int main(void) {
    hipStream_t s, s2, nb;
    hipEvent_t e1, e2;
    hipGraph_t g = NULL;
    hipGraphExec_t x;
    hipStreamCaptureStatus st;
    unsigned long long id = 0;
    unsigned int *buf;
    OK(hipStreamCreate(&s));
    OK(hipStreamCreate(&s2));
    OK(hipStreamCreateWithFlags(&nb, hipStreamNonBlocking));
    OK(hipEventCreate(&e1));
    OK(hipEventCreate(&e2));
    OK(hipMalloc((void **)&buf, 4 * 1024));
    OK(hipMemset(buf, 0xff, 4 * 1024));

    /* Begin's checks. */
    EXPECT(hipStreamBeginCapture(0, hipStreamCaptureModeGlobal), hipErrorStreamCaptureUnsupported);
    /* HIP 5.2 has no hipStreamLegacy: handle 1 is no stream there (hipErrorInvalidValue). */
    EXPECT(hipStreamBeginCapture(hipStreamLegacy, hipStreamCaptureModeGlobal),
           expect_hip52() ? hipErrorInvalidValue : hipErrorStreamCaptureUnsupported);
    EXPECT(hipStreamBeginCapture(s, (hipStreamCaptureMode)3), hipErrorInvalidValue);
    EXPECT(hipStreamIsCapturing(s, NULL), hipErrorInvalidValue);
    OK(hipStreamIsCapturing(s, &st));
    TRUE(st == hipStreamCaptureStatusNone);
    /* Ending a capture never begun: HIP 5.2 answers hipErrorStreamCaptureUnmatched, and
       hipErrorInvalidValue on the null stream; the newest HIP hipErrorIllegalState. */
    EXPECT(hipStreamEndCapture(s, &g), expect_hip52() ? hipErrorStreamCaptureUnmatched : hipErrorIllegalState);
    EXPECT(hipStreamEndCapture(s, NULL), hipErrorInvalidValue);
    EXPECT(hipStreamEndCapture(0, &g), expect_hip52() ? hipErrorInvalidValue : hipErrorIllegalState);

    /* Fork and join: A on s; s2 joins through e1; B on s, C on s2; s joins C through e2; D. */
    OK(hipStreamBeginCapture(s, hipStreamCaptureModeGlobal));
    EXPECT(hipStreamBeginCapture(s, hipStreamCaptureModeGlobal), hipErrorIllegalState);
    OK(hipStreamIsCapturing(s, &st));
    TRUE(st == hipStreamCaptureStatusActive);
    /* s is blocking; HIP 5.2 does not check the null stream's implicit synchronisation here. */
    NEWER_HIP(EXPECT(hipStreamIsCapturing(0, &st), hipErrorStreamCaptureImplicit));
    OK(hipStreamIsCapturing(nb, &st));
    TRUE(st == hipStreamCaptureStatusNone);
    EXPECT(hipStreamGetCaptureInfo(s, NULL, &id), hipErrorInvalidValue);
    OK(hipStreamGetCaptureInfo(s, &st, NULL));
    OK(hipStreamGetCaptureInfo(s, &st, &id));
    TRUE(st == hipStreamCaptureStatusActive && id != 0);
    OK(hipMemsetD32Async(buf, 1, 256, s));        /* A */
    OK(hipEventRecord(e1, s));
    OK(hipStreamWaitEvent(s2, e1, 0));
    unsigned long long id2 = 0;
    OK(hipStreamGetCaptureInfo(s2, &st, &id2));
    /* HIP 5.2 gives a stream that joins a capture an id of its own. */
    TRUE(st == hipStreamCaptureStatusActive);
    NEWER_HIP(TRUE(id2 == id));
    EXPECT(hipStreamBeginCapture(s2, hipStreamCaptureModeGlobal), hipErrorIllegalState);
    OK(hipMemsetD32Async(buf + 256, 2, 256, s));  /* B */
    OK(hipMemsetD32Async(buf + 512, 3, 256, s2)); /* C */
    OK(hipEventRecord(e2, s2));
    OK(hipStreamWaitEvent(s, e2, 0));
    const hipGraphNode_t *deps = NULL;
    size_t ndeps = 0;
    hipGraph_t cg = NULL;
    OK(hipStreamGetCaptureInfo_v2(s, &st, &id2, &cg, &deps, &ndeps));
    TRUE(st == hipStreamCaptureStatusActive && id2 == id && cg != NULL && ndeps == 2 && deps != NULL);
    OK(hipStreamGetCaptureInfo_v2(s, &st, NULL, NULL, NULL, NULL));
    EXPECT(hipStreamGetCaptureInfo_v2(s, NULL, NULL, NULL, NULL, NULL), hipErrorInvalidValue);
    EXPECT(hipStreamEndCapture(s2, &g), hipErrorStreamCaptureUnmatched);
    /* Async work on a capturing stream is recorded, not run. */
    OK(hipMemsetD32Async(buf + 768, 4, 256, s));  /* D, after B and C */
    OK(hipStreamEndCapture(s, &g));
    TRUE(g != NULL);
    OK(hipStreamIsCapturing(s2, &st));
    /* HIP 5.2 leaves a joined stream capturing after the capture ends. */
    TRUE(st == (expect_hip52() ? hipStreamCaptureStatusActive : hipStreamCaptureStatusNone));
    unsigned int host[1024];
    OK(hipMemcpy(host, buf, sizeof host, hipMemcpyDeviceToHost));
    TRUE(host[0] == 0xffffffffu && host[1023] == 0xffffffffu); /* nothing ran */

    /* The graph: four nodes. */
    size_t n = 0;
    EXPECT(hipGraphGetNodes(NULL, NULL, &n), hipErrorInvalidValue);
    EXPECT(hipGraphGetNodes(g, NULL, NULL), hipErrorInvalidValue);
    OK(hipGraphGetNodes(g, NULL, &n));
    TRUE(n == 4);
    hipGraphNode_t nodes[6] = {0};
    n = 6;
    OK(hipGraphGetNodes(g, nodes, &n));
    TRUE(n == 4 && nodes[0] != NULL && nodes[3] != NULL && nodes[4] == NULL && nodes[5] == NULL);
    n = 2;
    OK(hipGraphGetNodes(g, nodes, &n));
    TRUE(n == 2);

    /* Instantiate and launch twice. */
    EXPECT(hipGraphInstantiate(NULL, g, NULL, NULL, 0), hipErrorInvalidValue);
    EXPECT(hipGraphInstantiate(&x, NULL, NULL, NULL, 0), hipErrorInvalidValue);
    EXPECT(hipGraphInstantiateWithFlags(&x, g, 2), hipErrorInvalidValue);
    EXPECT(hipGraphInstantiateWithFlags(NULL, g, 0), hipErrorInvalidValue);
    OK(hipGraphInstantiate(&x, g, NULL, NULL, 0));
    OK(hipGraphLaunch(x, s));
    OK(hipGraphLaunch(x, nb));
    OK(hipStreamSynchronize(s));
    OK(hipStreamSynchronize(nb));
    OK(hipMemcpy(host, buf, sizeof host, hipMemcpyDeviceToHost));
    TRUE(host[0] == 1 && host[256] == 2 && host[512] == 3 && host[1023] == 4);
    EXPECT(hipGraphLaunch(NULL, s), hipErrorInvalidValue);
    hipStream_t dead;
    OK(hipStreamCreate(&dead));
    OK(hipStreamDestroy(dead));
    /* A destroyed stream: HIP 5.2 answers hipErrorInvalidValue, the newest HIP
       hipErrorContextIsDestroyed. */
    EXPECT(hipGraphLaunch(x, dead), expect_hip52() ? hipErrorInvalidValue : hipErrorContextIsDestroyed);
    OK(hipGraphExecDestroy(x));
    /* HIP 5.2 uses a destroyed graph or executable graph (the process crashes). */
    NEWER_HIP(EXPECT(hipGraphExecDestroy(x), hipErrorInvalidValue));
    NEWER_HIP(EXPECT(hipGraphLaunch(x, s), hipErrorInvalidValue));
    OK(hipGraphDestroy(g));
    NEWER_HIP(EXPECT(hipGraphDestroy(g), hipErrorInvalidValue));
    EXPECT(hipGraphDestroy(NULL), hipErrorInvalidValue);

    /* Empty graphs. */
    EXPECT(hipGraphCreate(NULL, 0), hipErrorInvalidValue);
    EXPECT(hipGraphCreate(&g, 1), hipErrorInvalidValue);
    OK(hipGraphCreate(&g, 0));
    n = 9;
    OK(hipGraphGetNodes(g, NULL, &n));
    TRUE(n == 0);
    OK(hipGraphInstantiateWithFlags(&x, g, hipGraphInstantiateFlagAutoFreeOnLaunch));
    OK(hipGraphLaunch(x, 0));
    OK(hipGraphExecDestroy(x));
    OK(hipGraphDestroy(g));

    /* A captured host function runs at every launch (HIP 5.2 has no hipLaunchHostFunc). */
    if (!expect_hip52()) {
        int host_runs = 0;
        OK(hipStreamBeginCapture(s, hipStreamCaptureModeThreadLocal));
        OK(hipLaunchHostFunc(s, on_host, &host_runs));
        OK(hipStreamEndCapture(s, &g));
        TRUE(host_runs == 0);
        OK(hipGraphInstantiate(&x, g, NULL, NULL, 0));
        OK(hipGraphLaunch(x, s));
        OK(hipGraphLaunch(x, s));
        OK(hipStreamSynchronize(s));
        TRUE(host_runs == 2);
        OK(hipGraphExecDestroy(x));
        OK(hipGraphDestroy(g));
    }

    /* HIP 5.2 differs throughout what follows, so it runs on the newest HIP's side only: 5.2
       leaves s2 in the ended capture above (its work is refused with hipErrorInvalidValue and
       the unjoined capture ends with a graph); it does not invalidate a capture on
       hipStreamSynchronize, a synchronous hipMemcpy, hipDeviceSynchronize or a hipMalloc in
       Global mode (each succeeds and the capture ends with a graph); and
       hipStreamUpdateCaptureDependencies checks neither its flags nor its nodes. */
    void *p;
    if (!expect_hip52()) {
        /* Unjoined work: torn down, NULL graph. */
        g = (hipGraph_t)0x1;
        OK(hipStreamBeginCapture(s, hipStreamCaptureModeGlobal));
        OK(hipEventRecord(e1, s));
        OK(hipStreamWaitEvent(s2, e1, 0));
        OK(hipMemsetAsync(buf, 0, 16, s2));
        EXPECT(hipStreamEndCapture(s, &g), hipErrorStreamCaptureUnjoined);
        TRUE(g == NULL);
        OK(hipStreamIsCapturing(s2, &st));
        TRUE(st == hipStreamCaptureStatusNone);

        /* Invalidation: syncing a capturing stream, then End → invalidated, NULL graph. */
        OK(hipStreamBeginCapture(s, hipStreamCaptureModeGlobal));
        EXPECT(hipStreamSynchronize(s), hipErrorStreamCaptureUnsupported);
        OK(hipStreamIsCapturing(s, &st));
        TRUE(st == hipStreamCaptureStatusInvalidated);
        EXPECT(hipMemsetAsync(buf, 0, 16, s), hipErrorStreamCaptureInvalidated);
        g = (hipGraph_t)0x1;
        EXPECT(hipStreamEndCapture(s, &g), hipErrorStreamCaptureInvalidated);
        TRUE(g == NULL);
        /* A synchronous copy during any capture: implicit, every capture invalidated. */
        OK(hipStreamBeginCapture(nb, hipStreamCaptureModeRelaxed));
        EXPECT(hipMemcpy(host, buf, 16, hipMemcpyDeviceToHost), hipErrorStreamCaptureImplicit);
        EXPECT(hipStreamEndCapture(nb, &g), hipErrorStreamCaptureInvalidated);
        /* hipDeviceSynchronize during any capture: unsupported, every capture invalidated. */
        OK(hipStreamBeginCapture(nb, hipStreamCaptureModeRelaxed));
        EXPECT(hipDeviceSynchronize(), hipErrorStreamCaptureUnsupported);
        EXPECT(hipStreamEndCapture(nb, &g), hipErrorStreamCaptureInvalidated);
        /* Allocation in a Global capture: unsupported, and the capture is invalidated. */
        OK(hipStreamBeginCapture(s, hipStreamCaptureModeGlobal));
        EXPECT(hipMalloc(&p, 64), hipErrorStreamCaptureUnsupported);
        EXPECT(hipStreamEndCapture(s, &g), hipErrorStreamCaptureInvalidated);

        /* Dependency updates. */
        hipGraphNode_t first = NULL;
        EXPECT(hipStreamUpdateCaptureDependencies(s, NULL, 0, 0), hipErrorIllegalState);
        OK(hipStreamBeginCapture(s, hipStreamCaptureModeGlobal));
        OK(hipMemsetAsync(buf, 0, 16, s));
        OK(hipStreamGetCaptureInfo_v2(s, &st, NULL, NULL, &deps, &ndeps));
        TRUE(ndeps == 1);
        first = deps[0];
        OK(hipMemsetAsync(buf, 1, 16, s));
        EXPECT(hipStreamUpdateCaptureDependencies(s, &first, 1, 2), hipErrorInvalidValue);
        EXPECT(hipStreamUpdateCaptureDependencies(s, NULL, 1, 0), hipErrorInvalidValue);
        hipGraphNode_t bogus = (hipGraphNode_t)0x99;
        EXPECT(hipStreamUpdateCaptureDependencies(s, &bogus, 1, 0), hipErrorInvalidValue);
        OK(hipStreamUpdateCaptureDependencies(s, &first, 1, hipStreamAddCaptureDependencies));
        OK(hipStreamGetCaptureInfo_v2(s, &st, NULL, NULL, &deps, &ndeps));
        TRUE(ndeps == 2);
        OK(hipStreamUpdateCaptureDependencies(s, &first, 1, hipStreamSetCaptureDependencies));
        OK(hipStreamGetCaptureInfo_v2(s, &st, NULL, NULL, &deps, &ndeps));
        TRUE(ndeps == 1 && deps[0] == first);
        OK(hipStreamEndCapture(s, &g));
        OK(hipGraphDestroy(g));

    }

    /* The thread's capture mode. */
    hipStreamCaptureMode mode = hipStreamCaptureModeRelaxed;
    EXPECT(hipThreadExchangeStreamCaptureMode(NULL), hipErrorInvalidValue);
    hipStreamCaptureMode bad = (hipStreamCaptureMode)3;
    EXPECT(hipThreadExchangeStreamCaptureMode(&bad), hipErrorInvalidValue);
    OK(hipThreadExchangeStreamCaptureMode(&mode));
    TRUE(mode == hipStreamCaptureModeGlobal);
    /* A Relaxed thread may allocate during its own Global capture. */
    OK(hipStreamBeginCapture(s, hipStreamCaptureModeGlobal));
    OK(hipMalloc(&p, 64));
    OK(hipStreamEndCapture(s, &g));
    OK(hipGraphDestroy(g));
    OK(hipFree(p));
    OK(hipThreadExchangeStreamCaptureMode(&mode));
    TRUE(mode == hipStreamCaptureModeRelaxed);

    OK(hipFree(buf));
    OK(hipEventDestroy(e1));
    OK(hipEventDestroy(e2));
    OK(hipStreamDestroy(s));
    OK(hipStreamDestroy(s2));
    OK(hipStreamDestroy(nb));
    DONE("capture_graph");
}
