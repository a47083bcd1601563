/* Streams and events: creation, getters, destroy, query/synchronize, waits, callbacks, stream
   memory operations; the error paths in HIP's check order. */
#include "check.h"

/* What the callbacks and host functions saw. Each one gets its record and its amount through its
   user data: no state lives in statics. The main thread reads a record only after a synchronize
   that the callback's completion happens-before. */
struct seen {
    int total;
    hipStream_t stream;
    hipError_t status;
};
struct add {
    struct seen *seen;
    int amount;
};

static void on_callback(hipStream_t stream, hipError_t status, void *data) {
    struct add *a = data;
    a->seen->stream = stream;
    a->seen->status = status;
    a->seen->total += a->amount;
}

static void on_host(void *data) {
    struct add *a = data;
    a->seen->total += a->amount;
}

/* HIP 5.2 has no hipLaunchHostFunc: there a callback adds the amount instead. */
static hipError_t host_func(hipStream_t stream, struct add *a) {
    return expect_hip52() ? hipStreamAddCallback(stream, on_callback, a, 0) : hipLaunchHostFunc(stream, on_host, a);
}

int main(void) {
    hipStream_t s, nb, hi, lo, cu;
    unsigned int flags = 99;
    int prio = 99;

    /* Creation. */
    EXPECT(hipStreamCreate(NULL), hipErrorInvalidValue);
    EXPECT(hipStreamCreateWithFlags(NULL, 0), hipErrorInvalidValue);
    EXPECT(hipStreamCreateWithFlags(&s, 2), hipErrorInvalidValue);
    EXPECT(hipStreamCreateWithPriority(NULL, 0, 0), hipErrorInvalidValue);
    EXPECT(hipStreamCreateWithPriority(&s, 4, 0), hipErrorInvalidValue);
    OK(hipStreamCreate(&s));
    TRUE(s != NULL && s != hipStreamLegacy && s != hipStreamPerThread);
    OK(hipStreamCreateWithFlags(&nb, hipStreamNonBlocking));
    OK(hipStreamCreateWithPriority(&hi, 0, -7));
    OK(hipStreamCreateWithPriority(&lo, hipStreamNonBlocking, 42));
    unsigned int mask[4] = {0x0f, 0, 0, 0};
    EXPECT(hipExtStreamCreateWithCUMask(NULL, 1, mask), hipErrorInvalidHandle);
    EXPECT(hipExtStreamCreateWithCUMask(&cu, 0, mask), hipErrorInvalidValue);
    EXPECT(hipExtStreamCreateWithCUMask(&cu, 1, NULL), hipErrorInvalidValue);
    OK(hipExtStreamCreateWithCUMask(&cu, 1, mask));

    /* Getters. */
    EXPECT(hipStreamGetFlags(s, NULL), hipErrorInvalidValue);
    EXPECT(hipStreamGetFlags(0, &flags), hipErrorInvalidValue);
    OK(hipStreamGetFlags(s, &flags));
    TRUE(flags == hipStreamDefault);
    OK(hipStreamGetFlags(lo, &flags));
    TRUE(flags == hipStreamNonBlocking);
    OK(hipStreamGetFlags(hipStreamPerThread, &flags));
    TRUE(flags == 0);
    EXPECT(hipStreamGetPriority(s, NULL), hipErrorInvalidValue);
    OK(hipStreamGetPriority(hi, &prio));
    TRUE(prio == -1);
    OK(hipStreamGetPriority(lo, &prio));
    TRUE(prio == 1);
    OK(hipStreamGetPriority(0, &prio));
    TRUE(prio == 0);
    OK(hipStreamGetPriority(hipStreamPerThread, &prio));
    TRUE(prio == 0);
    OK(hipStreamGetPriority(cu, &prio));
    TRUE(prio == 0);
    /* hipStreamGetId, hipStreamGetDevice and hipStreamLegacy are newer HIP's (none in 5.2). */
    const int hip52 = expect_hip52();
    unsigned long long id1 = 0, id2 = 0, id0 = 0, idl = 1;
    hipDevice_t dev = -1;
    if (!hip52) {
        EXPECT(hipStreamGetId(s, NULL), hipErrorInvalidValue);
        OK(hipStreamGetId(s, &id1));
        OK(hipStreamGetId(nb, &id2));
        TRUE(id1 != 0 && id2 != 0 && id1 != id2);
        OK(hipStreamGetId(0, &id0));
        OK(hipStreamGetId(hipStreamLegacy, &idl));
        TRUE(id0 == idl);
        EXPECT(hipStreamGetDevice(s, NULL), hipErrorInvalidValue);
        OK(hipStreamGetDevice(s, &dev));
        TRUE(dev == 0);
        OK(hipStreamGetDevice(0, &dev));
        TRUE(dev == 0);
    }
    int cus = 0;
    OK(hipDeviceGetAttribute(&cus, hipDeviceAttributeMultiprocessorCount, 0));
    unsigned int words = (cus + 31) / 32, got[8] = {0};
    EXPECT(hipExtStreamGetCUMask(cu, words, NULL), hipErrorInvalidValue);
    EXPECT(hipExtStreamGetCUMask(cu, 0, got), hipErrorInvalidValue);
    EXPECT(hipExtStreamGetCUMask(cu, words - 1, got), hipErrorInvalidValue);
    OK(hipExtStreamGetCUMask(cu, words, got));
    TRUE(got[0] == 0x0f && got[1] == 0);
    OK(hipExtStreamGetCUMask(0, words, got));
    TRUE(got[0] == 0xffffffffu);

    /* Destroy: 0, legacy and per-thread are not destroyable; a destroyed stream is stale. */
    EXPECT(hipStreamDestroy(0), hipErrorInvalidHandle);
    NEWER_HIP(EXPECT(hipStreamDestroy(hipStreamLegacy), hipErrorInvalidHandle));
    EXPECT(hipStreamDestroy(hipStreamPerThread), hipErrorInvalidHandle);
    OK(hipStreamDestroy(cu));
    /* HIP 5.2 dereferences a stale or garbage stream handle (the process crashes). */
    if (!hip52) {
        EXPECT(hipStreamDestroy(cu), hipErrorContextIsDestroyed);
        EXPECT(hipStreamQuery(cu), hipErrorContextIsDestroyed);
        EXPECT(hipStreamSynchronize(cu), hipErrorContextIsDestroyed);
        EXPECT(hipStreamGetPriority(cu, &prio), hipErrorContextIsDestroyed);
        EXPECT(hipStreamGetId(cu, &id1), hipErrorInvalidHandle);
        EXPECT(hipStreamGetDevice(cu, &dev), hipErrorContextIsDestroyed);
        EXPECT(hipStreamQuery((hipStream_t)0xdead0000), hipErrorInvalidHandle);
    }

    /* Query and synchronize around a stream blocked on a value in pinned memory. */
    unsigned int *flag;
    unsigned long long *word64;
    OK(hipHostMalloc((void **)&flag, 64, 0));
    OK(hipHostMalloc((void **)&word64, 64, 0));
    *flag = 0;
    *word64 = 0;
    OK(hipStreamQuery(s));
    EXPECT(hipStreamWaitValue32(s, NULL, 1, hipStreamWaitValueEq, 0xffffffff), hipErrorInvalidValue);
    /* HIP 5.2 does not check the wait's operation nor the write's flags: it queues the wait
       (which never completes) or the write. */
    NEWER_HIP(EXPECT(hipStreamWaitValue32(s, flag, 1, 9, 0xffffffff), hipErrorInvalidValue));
    OK(hipStreamWaitValue32(s, flag, 1, hipStreamWaitValueEq, 0xffffffff));
    OK(hipStreamWriteValue64(s, word64, 0x1122334455667788ull, 0));
    EXPECT(hipStreamQuery(s), hipErrorNotReady);
    EXPECT(hipStreamQuery(0), hipErrorNotReady); /* 0 covers the blocking streams */
    NEWER_HIP(OK(hipStreamQuery(hipStreamLegacy))); /* legacy: the null stream only */
    OK(hipStreamQuery(nb));
    /* hipErrorNotReady is not recorded; HIP 5.2 records every call's result, successes too. */
    EXPECT(hipGetLastError(), hip52 ? hipSuccess : hipErrorInvalidValue);
    *flag = 1;
    OK(hipStreamSynchronize(s));
    TRUE(*word64 == 0x1122334455667788ull);
    OK(hipStreamWriteValue32(nb, flag, 7, 0));
    EXPECT(hipStreamWriteValue32(nb, NULL, 7, 0), hipErrorInvalidValue);
    NEWER_HIP(EXPECT(hipStreamWriteValue64(nb, word64, 7, 5), hipErrorInvalidValue));
    EXPECT(hipStreamWaitValue64(nb, NULL, 0x10, hipStreamWaitValueGte, ~0ull), hipErrorInvalidValue);
    NEWER_HIP(EXPECT(hipStreamWaitValue64(nb, word64, 0x10, 7, ~0ull), hipErrorInvalidValue));
    OK(hipStreamWaitValue64(nb, word64, 0x10, hipStreamWaitValueGte, ~0ull));
    OK(hipStreamWaitValue32(nb, flag, 4, hipStreamWaitValueAnd, 0xffffffff));
    OK(hipStreamWaitValue64(nb, word64, 0, hipStreamWaitValueNor, 0xff));
    OK(hipStreamSynchronize(nb));
    TRUE(*flag == 7);
    OK(hipStreamSynchronize(0));
    NEWER_HIP(OK(hipStreamSynchronize(hipStreamLegacy)));
    OK(hipStreamSynchronize(hipStreamPerThread));

    /* Callbacks and host functions run in stream order. */
    struct seen seen = {0, NULL, (hipError_t)-1};
    struct add one = {&seen, 1}, ten = {&seen, 10};
    EXPECT(hipStreamAddCallback(s, NULL, &one, 0), hipErrorInvalidValue);
    EXPECT(hipStreamAddCallback(s, on_callback, &one, 1), hipErrorInvalidValue);
    NEWER_HIP(EXPECT(hipLaunchHostFunc(s, NULL, &one), hipErrorInvalidValue));
    *flag = 0;
    OK(hipStreamWaitValue32(s, flag, 1, hipStreamWaitValueEq, 0xffffffff));
    OK(hipStreamAddCallback(s, on_callback, &one, 0));
    OK(host_func(s, &ten));
    TRUE(seen.total == 0);
    *flag = 1;
    OK(hipStreamSynchronize(s));
    TRUE(seen.total == 11);
    TRUE(seen.stream == s && seen.status == hipSuccess);
    OK(host_func(0, &ten));
    OK(hipStreamAddCallback(hipStreamPerThread, on_callback, &one, 0));
    OK(hipDeviceSynchronize());
    TRUE(seen.total == 22);
    /* HIP 5.2 passes a callback on hipStreamPerThread the per-thread stream's own handle. */
    NEWER_HIP(TRUE(seen.stream == hipStreamPerThread));

    /* Events. */
    hipEvent_t a, b, untimed, e;
    EXPECT(hipEventCreate(NULL), hipErrorInvalidValue);
    EXPECT(hipEventCreateWithFlags(NULL, 0), hipErrorInvalidValue);
    EXPECT(hipEventCreateWithFlags(&e, 0x08000000), hipErrorInvalidValue);
    /* HIP 5.2 creates an interprocess event without hipEventDisableTiming. */
    NEWER_HIP(EXPECT(hipEventCreateWithFlags(&e, hipEventInterprocess), hipErrorInvalidValue));
    EXPECT(hipEventCreateWithFlags(&e, hipEventReleaseToDevice | hipEventReleaseToSystem), hipErrorInvalidValue);
    OK(hipEventCreate(&a));
    OK(hipEventCreateWithFlags(&b, hipEventBlockingSync));
    OK(hipEventCreateWithFlags(&untimed, hipEventDisableTiming));
    OK(hipEventCreate(&e));
    OK(hipEventQuery(a)); /* never recorded */
    OK(hipEventSynchronize(a));
    EXPECT(hipEventRecord(NULL, s), hipErrorInvalidHandle);
    NEWER_HIP(EXPECT(hipEventRecordWithFlags(a, s, 2), hipErrorInvalidValue)); /* none in 5.2 */
    NEWER_HIP(EXPECT(hipEventRecordWithFlags(NULL, s, 2), hipErrorInvalidValue));
    float ms = -1;
    EXPECT(hipEventElapsedTime(NULL, a, b), hipErrorInvalidValue);
    EXPECT(hipEventElapsedTime(&ms, NULL, b), hipErrorInvalidHandle);
    EXPECT(hipEventElapsedTime(&ms, a, b), hipErrorInvalidHandle); /* not recorded */
    *flag = 0;
    OK(hipEventRecord(a, s));
    OK(hipStreamWaitValue32(s, flag, 1, hipStreamWaitValueEq, 0xffffffff));
    OK(hip52 ? hipEventRecord(b, s) : hipEventRecordWithFlags(b, s, 0));
    OK(hipEventRecord(untimed, s));
    EXPECT(hipEventQuery(b), hipErrorNotReady);
    EXPECT(hipEventElapsedTime(&ms, a, b), hipErrorNotReady);
    /* A wait on b holds nb back until s passes the record. */
    EXPECT(hipStreamWaitEvent(nb, a, 2), hipErrorInvalidValue);
    /* HIP 5.2 checks the event before the flags. */
    EXPECT(hipStreamWaitEvent(nb, NULL, 2), hip52 ? hipErrorInvalidHandle : hipErrorInvalidValue);
    EXPECT(hipStreamWaitEvent(nb, NULL, 0), hipErrorInvalidHandle);
    OK(hipStreamWaitEvent(nb, b, 0));
    EXPECT(hipStreamQuery(nb), hipErrorNotReady);
    *flag = 1;
    OK(hipEventSynchronize(b));
    OK(hipStreamSynchronize(nb));
    OK(hipEventQuery(b));
    OK(hipEventElapsedTime(&ms, a, b));
    TRUE(ms >= 0);
    OK(hipEventElapsedTime(&ms, a, a));
    TRUE(ms == 0);
    EXPECT(hipEventElapsedTime(&ms, a, untimed), hipErrorInvalidHandle);

    /* Elapsed time over work of known device duration: s is held at a wait between two records
       until the device clock has run 2 ms past the first record, as probe events recorded on
       another stream show; the second record executes after the wait, so its time is at least
       the last probe's. No wall clock: the host waits on the device clock itself. */
    hipEvent_t probe;
    OK(hipEventCreate(&probe));
    *flag = 0;
    OK(hipEventRecord(a, s));
    OK(hipStreamWaitValue32(s, flag, 1, hipStreamWaitValueEq, 0xffffffff));
    OK(hipEventRecord(b, s));
    OK(hipEventSynchronize(a));
    float held = 0;
    long probes = 0;
    while (held < 2.0f && probes < 100000000) {
        probes++;
        if (hipEventRecord(probe, nb) != hipSuccess || hipEventSynchronize(probe) != hipSuccess ||
            hipEventElapsedTime(&held, a, probe) != hipSuccess)
            break;
    }
    EXPECT(hipEventQuery(b), hipErrorNotReady); /* still held at the wait */
    *flag = 1;
    OK(hipEventSynchronize(b));
    OK(hipEventElapsedTime(&ms, a, b));
    TRUE(held >= 2.0f);
    TRUE(ms >= held);
    if (!(held >= 2.0f && ms >= held))
        fprintf(stderr, "elapsed %f ms, device clock held %f ms over %ld probes\n", ms, held, probes);
    OK(hipEventDestroy(probe));
    OK(hipEventRecord(e, 0));
    OK(hipEventRecord(e, hipStreamPerThread));
    OK(hipEventSynchronize(e));
    EXPECT(hipEventDestroy(NULL), hipErrorInvalidHandle);
    OK(hipEventDestroy(e));
    /* HIP 5.2 dereferences a stale or garbage event handle (the process crashes). */
    NEWER_HIP(EXPECT(hipEventDestroy(e), hipErrorContextIsDestroyed));
    NEWER_HIP(EXPECT(hipEventQuery(e), hipErrorContextIsDestroyed));
    NEWER_HIP(EXPECT(hipEventSynchronize((hipEvent_t)0x4242), hipErrorInvalidHandle));
    /* An event recorded on a stream destroyed since: waiting on it is a no-op. */
    OK(hipEventRecord(e = untimed, lo));
    OK(hipStreamDestroy(lo));
    OK(hipStreamWaitEvent(s, e, 0));
    OK(hipStreamSynchronize(s));

    OK(hipEventDestroy(a));
    OK(hipEventDestroy(b));
    OK(hipEventDestroy(untimed));
    OK(hipStreamDestroy(s));
    OK(hipStreamDestroy(nb));
    OK(hipStreamDestroy(hi));
    OK(hipHostFree(flag));
    OK(hipHostFree(word64));
    DONE("streams");
}
