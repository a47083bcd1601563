/* Device management, error reporting (names, strings, per-thread last error) and memory. */
#include "check.h"

int main(void) {
    /* Error names and strings, including codes HIP does not name. */
    TRUE(strcmp(hipGetErrorName(hipSuccess), "hipSuccess") == 0);
    /* HIP 5.2's hipGetErrorString answers the error's name ("hipSuccess"); the newest HIP a
       description ("no error"). */
    NEWER_HIP(TRUE(strcmp(hipGetErrorString(hipSuccess), "no error") == 0));
    TRUE(strcmp(hipGetErrorName(hipErrorInvalidValue), "hipErrorInvalidValue") == 0);
    NEWER_HIP(TRUE(strcmp(hipGetErrorString(hipErrorInvalidValue), "invalid argument") == 0));
    /* hipDrvGetErrorName/String (newer HIP, CUDA's cuGetErrorName/String): an unnamed code is
       hipErrorInvalidValue with the string NULL. */
    if (!expect_hip52()) {
        const char *str = "x";
        OK(hipDrvGetErrorName(hipErrorInvalidValue, &str));
        TRUE(strcmp(str, "hipErrorInvalidValue") == 0);
        OK(hipDrvGetErrorString(hipErrorNoBinaryForGpu, &str));
        TRUE(strcmp(str, hipGetErrorString(hipErrorNoBinaryForGpu)) == 0);
        EXPECT(hipDrvGetErrorName((hipError_t)12345, &str), hipErrorInvalidValue);
        TRUE(str == NULL);
        EXPECT(hipDrvGetErrorString(hipSuccess, NULL), hipErrorInvalidValue);
        (void)hipGetLastError();
    }
    TRUE(strcmp(hipGetErrorName(hipErrorInvalidResourceHandle), "hipErrorInvalidHandle") == 0);
    /* HIP 5.2 has no hipErrorStreamDetached (916). */
    NEWER_HIP(TRUE(strcmp(hipGetErrorName(hipErrorStreamDetached), "hipErrorStreamDetached") == 0));
    TRUE(strcmp(hipGetErrorName(hipErrorStreamCaptureWrongThread), "hipErrorStreamCaptureWrongThread") == 0);
    TRUE(strcmp(hipGetErrorName((hipError_t)909), "hipErrorUnknown") == 0);
    NEWER_HIP(TRUE(strcmp(hipGetErrorString((hipError_t)909), "unknown error") == 0));
    TRUE(strcmp(hipGetErrorName((hipError_t)-5), "hipErrorUnknown") == 0);
    NEWER_HIP(TRUE(strcmp(hipGetErrorString(hipErrorNotReady), "device not ready") == 0));

    /* Last error: failures stick until hipGetLastError reads them; successes and
       hipErrorNotReady leave it alone; hipPeekAtLastError does not reset. */
    EXPECT(hipGetLastError(), hipSuccess);
    EXPECT(hipStreamCreate(NULL), hipErrorInvalidValue);
    EXPECT(hipPeekAtLastError(), hipErrorInvalidValue);
    int count = 0;
    OK(hipGetDeviceCount(&count));
    /* HIP 5.2 records every call's result, successes too: hipGetDeviceCount's success
       replaced the error. */
    EXPECT(hipPeekAtLastError(), expect_hip52() ? hipSuccess : hipErrorInvalidValue);
    EXPECT(hipGetLastError(), expect_hip52() ? hipSuccess : hipErrorInvalidValue);
    EXPECT(hipGetLastError(), hipSuccess);
    EXPECT(hipSetDevice(-1), hipErrorInvalidDevice);
    EXPECT(hipEventDestroy(NULL), hipErrorInvalidHandle);
    EXPECT(hipGetLastError(), hipErrorInvalidHandle);

    /* Devices. */
    EXPECT(hipGetDeviceCount(NULL), hipErrorInvalidValue);
    TRUE(count >= 1);
    EXPECT(hipSetDevice(count), hipErrorInvalidDevice);
    OK(hipSetDevice(0));
    int dev = -1;
    EXPECT(hipGetDevice(NULL), hipErrorInvalidValue);
    OK(hipGetDevice(&dev));
    TRUE(dev == 0);
    int least = 0, greatest = 0;
    OK(hipDeviceGetStreamPriorityRange(NULL, NULL));
    OK(hipDeviceGetStreamPriorityRange(&least, NULL));
    OK(hipDeviceGetStreamPriorityRange(&least, &greatest));
    TRUE(least == 1 && greatest == -1);
    int cus = 0;
    OK(hipDeviceGetAttribute(&cus, hipDeviceAttributeMultiprocessorCount, 0));
    TRUE(cus > 0);
    int v = 0;
    OK(hipDeviceGetAttribute(&v, hipDeviceAttributeMaxThreadsPerBlock, 0));
    TRUE(v == 1024);
    OK(hipDeviceGetAttribute(&v, hipDeviceAttributeWarpSize, 0));
    TRUE(v == 64);
    OK(hipDeviceGetAttribute(&v, hipDeviceAttributeComputeCapabilityMajor, 0));
    TRUE(v == 9);
    EXPECT(hipDeviceGetAttribute(NULL, hipDeviceAttributeMultiprocessorCount, 0), hipErrorInvalidValue);
    EXPECT(hipDeviceGetAttribute(&v, hipDeviceAttributeMultiprocessorCount, count), hipErrorInvalidDevice);
    EXPECT(hipDeviceGetAttribute(&v, (hipDeviceAttribute_t)99999, 0), hipErrorInvalidValue);
    printf("CUs: %d\n", cus);

    /* Allocation. */
    void *d = NULL, *d2 = NULL, *h = NULL;
    EXPECT(hipMalloc(NULL, 16), hipErrorInvalidValue);
    d = (void *)1;
    OK(hipMalloc(&d, 0));
    TRUE(d == NULL);
    OK(hipMalloc(&d, 4096));
    OK(hipMalloc(&d2, 4096));
    TRUE(d != NULL && d2 != NULL);
    EXPECT(hipHostMalloc(NULL, 64, 0), hipErrorInvalidValue);
    EXPECT(hipHostMalloc(&h, 64, hipHostMallocCoherent | hipHostMallocNonCoherent), hipErrorInvalidValue);
    /* HIP 5.2 ignores unknown hipHostMalloc flags. */
    NEWER_HIP(EXPECT(hipHostMalloc(&h, 64, 0x100), hipErrorInvalidValue));
    OK(hipHostMalloc(&h, 4096, hipHostMallocDefault));
    EXPECT(hipFree((void *)0x12345678), hipErrorInvalidValue);
    OK(hipFree(NULL));

    /* Synchronous copies and fills: device, pinned and pageable (stack) memory. */
    unsigned char host[4096], back[4096];
    for (int i = 0; i < 4096; i++) host[i] = (unsigned char)i;
    OK(hipMemset(d, 0xab, 4096));
    OK(hipMemcpy(back, d, 4096, hipMemcpyDeviceToHost));
    TRUE(back[0] == 0xab && back[4095] == 0xab);
    OK(hipMemcpy(d, host, 4096, hipMemcpyHostToDevice));
    OK(hipMemcpy(d2, d, 4096, hipMemcpyDeviceToDevice));
    memset(back, 0, sizeof back);
    OK(hipMemcpy(back, d2, 4096, hipMemcpyDefault));
    TRUE(memcmp(back, host, 4096) == 0);
    OK(hipMemcpy(back, host, 16, hipMemcpyHostToHost));
    OK(hipMemcpy(h, d2, 4096, hipMemcpyDeviceToHost));
    TRUE(((unsigned char *)h)[77] == 77);
    /* HIP 5.2 takes an unknown copy kind for hipMemcpyDefault (copies by the pointers). */
    NEWER_HIP(EXPECT(hipMemcpy(back, d, 16, (hipMemcpyKind)7), hipErrorInvalidMemcpyDirection));
    EXPECT(hipMemcpy(NULL, d, 16, hipMemcpyDeviceToHost), hipErrorInvalidValue);
    EXPECT(hipMemcpy(back, NULL, 16, hipMemcpyDeviceToHost), hipErrorInvalidValue);
    OK(hipMemcpy(back, d, 0, hipMemcpyDeviceToHost));
    EXPECT(hipMemset(NULL, 0, 16), hipErrorInvalidValue);

    /* Asynchronous copies and fills. */
    hipStream_t s;
    OK(hipStreamCreate(&s));
    OK(hipMemsetAsync(d, 0x5a, 4096, s));
    OK(hipMemsetD32Async(d2, 0x01020304, 1024, s));
    OK(hipMemcpyAsync(h, d, 4096, hipMemcpyDeviceToHost, s));
    OK(hipStreamSynchronize(s));
    TRUE(((unsigned char *)h)[100] == 0x5a);
    OK(hipMemcpyAsync(back, d2, 4096, hipMemcpyDeviceToHost, s)); /* pageable: done on return */
    TRUE(((unsigned int *)back)[1023] == 0x01020304);
    OK(hipMemcpyAsync(d, host, 4096, hipMemcpyHostToDevice, s));
    OK(hipMemcpyWithStream(back, d, 4096, hipMemcpyDeviceToHost, s));
    TRUE(memcmp(back, host, 4096) == 0);
    NEWER_HIP(EXPECT(hipMemcpyAsync(back, d, 16, (hipMemcpyKind)9, s), hipErrorInvalidMemcpyDirection));
    NEWER_HIP(EXPECT(hipMemcpyWithStream(back, d, 16, (hipMemcpyKind)9, s), hipErrorInvalidMemcpyDirection));
    EXPECT(hipMemsetAsync(NULL, 0, 16, s), hipErrorInvalidValue);
    /* HIP 5.2 aborts the process on a fill misaligned to its element ("Offseted ptr should
       align with pattern_size"). */
    NEWER_HIP(EXPECT(hipMemsetD32Async((hipDeviceptr_t)((char *)d + 1), 0, 4, s), hipErrorInvalidValue));
    OK(hipMemsetAsync(d, 0, 16, 0));
    OK(hipMemsetD32Async(d, 7, 4, hipStreamPerThread));
    OK(hipDeviceSynchronize());

    /* Stale handles: a destroyed stream answers hipErrorContextIsDestroyed, garbage
       hipErrorInvalidHandle; neither is dereferenced. */
    hipStream_t dead;
    OK(hipStreamCreate(&dead));
    OK(hipStreamDestroy(dead));
    /* HIP 5.2 dereferences a stale or garbage stream handle (the process crashes). */
    NEWER_HIP(EXPECT(hipMemsetAsync(d, 0, 16, dead), hipErrorContextIsDestroyed));
    NEWER_HIP(EXPECT(hipMemsetAsync(d, 0, 16, (hipStream_t)0x7777), hipErrorInvalidHandle));

    EXPECT(hipHostFree((void *)0x1000), hipErrorInvalidValue);
    EXPECT(hipMemcpyAsync(NULL, d, 16, hipMemcpyDeviceToHost, s), hipErrorInvalidValue);
    NEWER_HIP(EXPECT(hipMemcpyWithStream(back, d, 16, hipMemcpyDeviceToHost, dead), hipErrorContextIsDestroyed));
    OK(hipHostFree(h));
    OK(hipFree(d2));
    EXPECT(hipFree(d2), hipErrorInvalidValue);

    /* Reset releases streams and memory; the handles go stale. */
    OK(hipDeviceReset());
    EXPECT(hipStreamQuery(s), hipErrorContextIsDestroyed);
    EXPECT(hipFree(d), hipErrorInvalidValue);
    OK(hipStreamCreate(&s));
    OK(hipStreamDestroy(s));
    DONE("device_memory");
}
