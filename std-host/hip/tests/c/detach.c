/* Execution contexts: destroying one detaches its streams (hipErrorStreamDetached), invalidates
   their captures, leaves getters and destroy working, and leaves other streams alone. */
#include "check.h"

int main(void) {
    aqdExecCtx_t ctx, other;
    hipStream_t s, s2, plain;
    hipEvent_t e, before;
    hipGraph_t g = NULL;
    hipGraphExec_t x;
    void *buf;
    OK(hipMalloc(&buf, 4096));

    EXPECT(aqdExecCtxCreate(NULL, 0), hipErrorInvalidValue);
    EXPECT(aqdExecCtxCreate(&ctx, 7), hipErrorInvalidDevice);
    EXPECT(aqdExecCtxCreate(&ctx, -1), hipErrorInvalidDevice);
    OK(aqdExecCtxCreate(&ctx, 0));
    OK(aqdExecCtxCreate(&other, 0));
    EXPECT(aqdExecCtxStreamCreate(ctx, NULL, 0, 0), hipErrorInvalidValue);
    EXPECT(aqdExecCtxStreamCreate(ctx, &s, 4, 0), hipErrorInvalidValue);
    OK(aqdExecCtxStreamCreate(ctx, &s, 0, -1));
    OK(aqdExecCtxStreamCreate(ctx, &s2, 0, 0));
    OK(aqdExecCtxStreamCreate(other, &plain, 0, 0));
    OK(hipMemsetAsync(buf, 1, 4096, s));
    OK(hipStreamSynchronize(s));
    OK(hipEventCreate(&e));
    OK(hipEventCreate(&before));
    OK(hipEventRecord(before, s));

    /* A graph to launch later, and a capture live at destruction across s and s2. */
    OK(hipStreamBeginCapture(plain, hipStreamCaptureModeGlobal));
    OK(hipMemsetAsync(buf, 2, 16, plain));
    OK(hipStreamEndCapture(plain, &g));
    OK(hipGraphInstantiate(&x, g, NULL, NULL, 0));
    OK(hipStreamBeginCapture(s, hipStreamCaptureModeRelaxed));
    OK(hipMemsetAsync(buf, 3, 16, s));
    OK(hipEventRecord(e, s));
    OK(hipStreamWaitEvent(s2, e, 0));
    unsigned long long id0 = 0, id1 = 0;
    OK(hipStreamGetId(s, &id0));

    OK(aqdExecCtxDestroy(ctx));
    EXPECT(aqdExecCtxDestroy(ctx), hipErrorInvalidContext);
    EXPECT(aqdExecCtxStreamCreate(ctx, &s, 0, 0), hipErrorInvalidContext);

    /* Guarded APIs: detached. Earlier argument checks still win. */
    EXPECT(hipStreamSynchronize(s), hipErrorStreamDetached);
    EXPECT(hipStreamQuery(s), hipErrorStreamDetached);
    EXPECT(hipStreamWaitEvent(s, before, 0), hipErrorStreamDetached);
    EXPECT(hipStreamWaitEvent(s, before, 5), hipErrorInvalidValue);
    EXPECT(hipMemsetAsync(buf, 0, 16, s), hipErrorStreamDetached);
    EXPECT(hipMemsetD32Async(buf, 0, 4, s), hipErrorStreamDetached);
    EXPECT(hipMemcpyAsync(buf, buf, 16, hipMemcpyDeviceToDevice, s), hipErrorStreamDetached);
    EXPECT(hipEventRecord(e, s), hipErrorStreamDetached);
    EXPECT(hipEventRecord(NULL, s), hipErrorInvalidHandle);
    EXPECT(hipEventRecordWithFlags(e, s, 0), hipErrorStreamDetached);
    EXPECT(hipLaunchHostFunc(s, (hipHostFn_t)free, NULL), hipErrorStreamDetached);
    EXPECT(hipStreamWriteValue32(s, buf, 1, 0), hipErrorStreamDetached);
    EXPECT(hipStreamWaitValue32(s, buf, 1, hipStreamWaitValueEq, 0xffffffff), hipErrorStreamDetached);
    EXPECT(hipGraphLaunch(x, s), hipErrorStreamDetached);
    EXPECT(hipGraphLaunch(NULL, s), hipErrorInvalidValue);
    EXPECT(hipStreamBeginCapture(s2, hipStreamCaptureModeGlobal), hipErrorStreamDetached);
    EXPECT(hipStreamEndCapture(s, NULL), hipErrorInvalidValue);
    EXPECT(hipStreamEndCapture(s, &g), hipErrorStreamDetached);

    /* Getters and status queries keep answering; the capture shows Invalidated. */
    unsigned int flags = 99;
    int prio = 99;
    hipStreamCaptureStatus st;
    OK(hipStreamGetFlags(s, &flags));
    OK(hipStreamGetPriority(s, &prio));
    TRUE(prio == -1);
    OK(hipStreamGetId(s, &id1));
    TRUE(id0 == id1);
    hipDevice_t dev = -1;
    OK(hipStreamGetDevice(s, &dev));
    TRUE(dev == 0);
    OK(hipStreamGetCaptureInfo(s, &st, NULL));
    TRUE(st == hipStreamCaptureStatusInvalidated);
    OK(hipStreamIsCapturing(s2, &st));
    TRUE(st == hipStreamCaptureStatusInvalidated);

    /* Events recorded before the detach still work; other contexts' streams are untouched. */
    OK(hipEventSynchronize(before));
    OK(hipEventQuery(before));
    OK(hipStreamWaitEvent(plain, before, 0));
    OK(hipGraphLaunch(x, plain));
    OK(hipStreamSynchronize(plain));
    OK(hipStreamSynchronize(hipStreamPerThread));
    OK(hipStreamSynchronize(0));

    OK(hipStreamDestroy(s));
    OK(hipStreamDestroy(s2));
    EXPECT(hipStreamDestroy(s), hipErrorContextIsDestroyed);
    OK(hipStreamDestroy(plain));
    OK(aqdExecCtxDestroy(other));
    OK(hipGraphExecDestroy(x));
    OK(hipGraphDestroy(g));
    OK(hipEventDestroy(e));
    OK(hipEventDestroy(before));
    OK(hipFree(buf));
    DONE("detach");
}
