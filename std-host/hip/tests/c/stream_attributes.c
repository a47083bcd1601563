/* Stream attributes (hipStreamGetAttribute/SetAttribute/CopyAttributes) and attributed launches
   (hipLaunchKernelExC), with CUDA's semantics; argv[1] is the emulator's fixture code object
   (kernel fill_u32(out, value, count): out[i] = value for i < count). */
#include "check.h"

#include <stdint.h>

#define N 4096

static int all(const unsigned *h, unsigned n, unsigned v) {
    for (unsigned i = 0; i < n; i++) {
        if (h[i] != v) {
            return 0;
        }
    }
    return 1;
}

static hipLaunchAttribute attribute(hipLaunchAttributeID id, int v) {
    hipLaunchAttribute a;
    memset(&a, 0, sizeof a);
    a.id = id;
    a.val.priority = v; /* the int member every int-valued attribute shares */
    return a;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: stream_attributes CODE_OBJECT\n");
        return 2;
    }
    hipStream_t s, t, hi;
    OK(hipStreamCreate(&s));
    OK(hipStreamCreate(&t));
    OK(hipStreamCreateWithPriority(&hi, 0, -1));

    /* Defaults: no window, the automatic synchronization policy, the creation priority. */
    hipStreamAttrValue v;
    memset(&v, 0x5a, sizeof v);
    OK(hipStreamGetAttribute(s, hipLaunchAttributeAccessPolicyWindow, &v));
    TRUE(v.accessPolicyWindow.base_ptr == NULL && v.accessPolicyWindow.num_bytes == 0);
    TRUE(v.accessPolicyWindow.hitRatio == 0.0f && v.accessPolicyWindow.hitProp == hipAccessPropertyNormal);
    TRUE(v.accessPolicyWindow.missProp == hipAccessPropertyNormal);
    OK(hipStreamGetAttribute(s, hipLaunchAttributeSynchronizationPolicy, &v));
    TRUE(v.syncPolicy == hipSyncPolicyAuto);
    OK(hipStreamGetAttribute(hi, hipLaunchAttributePriority, &v));
    TRUE(v.priority == -1);
    OK(hipStreamGetAttribute(s, hipLaunchAttributePriority, &v));
    TRUE(v.priority == 0);

    /* A window and a policy are kept per stream and answered as set. */
    static char region[1 << 16];
    hipStreamAttrValue w;
    memset(&w, 0, sizeof w);
    w.accessPolicyWindow.base_ptr = region;
    w.accessPolicyWindow.num_bytes = sizeof region;
    w.accessPolicyWindow.hitRatio = 0.625f;
    w.accessPolicyWindow.hitProp = hipAccessPropertyPersisting;
    w.accessPolicyWindow.missProp = hipAccessPropertyStreaming;
    OK(hipStreamSetAttribute(s, hipLaunchAttributeAccessPolicyWindow, &w));
    hipStreamAttrValue p;
    memset(&p, 0, sizeof p);
    p.syncPolicy = hipSyncPolicyBlockingSync;
    OK(hipStreamSetAttribute(s, hipLaunchAttributeSynchronizationPolicy, &p));
    memset(&v, 0, sizeof v);
    OK(hipStreamGetAttribute(s, hipLaunchAttributeAccessPolicyWindow, &v));
    TRUE(v.accessPolicyWindow.base_ptr == (void *)region && v.accessPolicyWindow.num_bytes == sizeof region);
    TRUE(v.accessPolicyWindow.hitRatio == 0.625f && v.accessPolicyWindow.hitProp == hipAccessPropertyPersisting);
    TRUE(v.accessPolicyWindow.missProp == hipAccessPropertyStreaming);
    OK(hipStreamGetAttribute(s, hipLaunchAttributeSynchronizationPolicy, &v));
    TRUE(v.syncPolicy == hipSyncPolicyBlockingSync);
    /* ... and not on another stream. */
    OK(hipStreamGetAttribute(t, hipLaunchAttributeSynchronizationPolicy, &v));
    TRUE(v.syncPolicy == hipSyncPolicyAuto);

    /* Values CUDA refuses: a hit ratio outside [0, 1], persisting misses, unknown properties and
       policies; a refused value leaves the stream's as it was. */
    hipStreamAttrValue bad = w;
    bad.accessPolicyWindow.hitRatio = 1.5f;
    EXPECT(hipStreamSetAttribute(s, hipLaunchAttributeAccessPolicyWindow, &bad), hipErrorInvalidValue);
    bad = w;
    bad.accessPolicyWindow.missProp = hipAccessPropertyPersisting;
    EXPECT(hipStreamSetAttribute(s, hipLaunchAttributeAccessPolicyWindow, &bad), hipErrorInvalidValue);
    bad = w;
    bad.accessPolicyWindow.hitProp = (hipAccessProperty)3;
    EXPECT(hipStreamSetAttribute(s, hipLaunchAttributeAccessPolicyWindow, &bad), hipErrorInvalidValue);
    p.syncPolicy = (hipSynchronizationPolicy)0;
    EXPECT(hipStreamSetAttribute(s, hipLaunchAttributeSynchronizationPolicy, &p), hipErrorInvalidValue);
    p.syncPolicy = (hipSynchronizationPolicy)5;
    EXPECT(hipStreamSetAttribute(s, hipLaunchAttributeSynchronizationPolicy, &p), hipErrorInvalidValue);
    OK(hipStreamGetAttribute(s, hipLaunchAttributeAccessPolicyWindow, &v));
    TRUE(v.accessPolicyWindow.hitRatio == 0.625f);
    OK(hipStreamGetAttribute(s, hipLaunchAttributeSynchronizationPolicy, &v));
    TRUE(v.syncPolicy == hipSyncPolicyBlockingSync);

    /* Priorities are fixed at creation: the stream's own (after clamping) is accepted, another
       one is not supported. */
    hipStreamAttrValue pr;
    memset(&pr, 0, sizeof pr);
    pr.priority = -1;
    OK(hipStreamSetAttribute(hi, hipLaunchAttributePriority, &pr));
    pr.priority = -7;
    OK(hipStreamSetAttribute(hi, hipLaunchAttributePriority, &pr));
    pr.priority = 1;
    EXPECT(hipStreamSetAttribute(hi, hipLaunchAttributePriority, &pr), hipErrorNotSupported);
    OK(hipStreamGetAttribute(hi, hipLaunchAttributePriority, &v));
    TRUE(v.priority == -1);

    /* Launch-only attributes are not stream attributes; no synchronization domains on AMD. */
    EXPECT(hipStreamGetAttribute(s, hipLaunchAttributeCooperative, &v), hipErrorInvalidValue);
    EXPECT(hipStreamSetAttribute(s, hipLaunchAttributeCooperative, &pr), hipErrorInvalidValue);
    EXPECT(hipStreamGetAttribute(s, (hipStreamAttrID)4, &v), hipErrorInvalidValue);
    EXPECT(hipStreamGetAttribute(s, hipLaunchAttributeMemSyncDomain, &v), hipErrorNotSupported);
    EXPECT(hipStreamSetAttribute(s, hipLaunchAttributeMemSyncDomainMap, &pr), hipErrorNotSupported);
    EXPECT(hipStreamGetAttribute(s, hipLaunchAttributePriority, NULL), hipErrorInvalidValue);
    EXPECT(hipStreamSetAttribute(s, hipLaunchAttributePriority, NULL), hipErrorInvalidValue);

    /* The null stream has attributes of its own. */
    p.syncPolicy = hipSyncPolicyYield;
    OK(hipStreamSetAttribute(NULL, hipLaunchAttributeSynchronizationPolicy, &p));
    OK(hipStreamGetAttribute(NULL, hipLaunchAttributeSynchronizationPolicy, &v));
    TRUE(v.syncPolicy == hipSyncPolicyYield);
    OK(hipStreamGetAttribute(hipStreamLegacy, hipLaunchAttributeSynchronizationPolicy, &v));
    TRUE(v.syncPolicy == hipSyncPolicyYield);

    /* Copying: hi takes s's window and policy, keeps its own priority. */
    OK(hipStreamCopyAttributes(hi, s));
    OK(hipStreamGetAttribute(hi, hipLaunchAttributeAccessPolicyWindow, &v));
    TRUE(v.accessPolicyWindow.base_ptr == (void *)region && v.accessPolicyWindow.hitRatio == 0.625f);
    OK(hipStreamGetAttribute(hi, hipLaunchAttributeSynchronizationPolicy, &v));
    TRUE(v.syncPolicy == hipSyncPolicyBlockingSync);
    OK(hipStreamGetAttribute(hi, hipLaunchAttributePriority, &v));
    TRUE(v.priority == -1);
    /* Copying defaults back over what was set. */
    OK(hipStreamCopyAttributes(s, t));
    OK(hipStreamGetAttribute(s, hipLaunchAttributeSynchronizationPolicy, &v));
    TRUE(v.syncPolicy == hipSyncPolicyAuto);
    OK(hipStreamGetAttribute(s, hipLaunchAttributeAccessPolicyWindow, &v));
    TRUE(v.accessPolicyWindow.base_ptr == NULL);

    /* A destroyed stream is stale for every attribute call. */
    hipStream_t gone;
    OK(hipStreamCreate(&gone));
    OK(hipStreamSetAttribute(gone, hipLaunchAttributeSynchronizationPolicy, &p));
    OK(hipStreamDestroy(gone));
    EXPECT(hipStreamGetAttribute(gone, hipLaunchAttributeSynchronizationPolicy, &v), hipErrorContextIsDestroyed);
    EXPECT(hipStreamSetAttribute(gone, hipLaunchAttributeSynchronizationPolicy, &p), hipErrorContextIsDestroyed);
    EXPECT(hipStreamCopyAttributes(gone, s), hipErrorContextIsDestroyed);
    EXPECT(hipStreamCopyAttributes(s, gone), hipErrorContextIsDestroyed);
    hipStream_t fresh;
    OK(hipStreamCreate(&fresh));
    OK(hipStreamGetAttribute(fresh, hipLaunchAttributeSynchronizationPolicy, &v));
    TRUE(v.syncPolicy == hipSyncPolicyAuto);
    OK(hipStreamDestroy(fresh));

    /* hipLaunchKernelExC: a module function through its hipFunction_t, as hipLaunchKernel takes
       one. */
    hipModule_t mod;
    hipFunction_t fill;
    OK(hipModuleLoad(&mod, argv[1]));
    OK(hipModuleGetFunction(&fill, mod, "fill_u32"));
    unsigned *d = NULL;
    static unsigned h[N + 1];
    OK(hipMalloc((void **)&d, (N + 1) * sizeof(unsigned)));
    unsigned value = 3, count = N;
    void *args[] = {&d, &value, &count};
    hipLaunchConfig_t c;
    memset(&c, 0, sizeof c);
    c.gridDim = (dim3){N / 256, 1, 1};
    c.blockDim = (dim3){256, 1, 1};
    c.stream = s;

    OK(hipMemset(d, 0, (N + 1) * sizeof(unsigned)));
    OK(hipLaunchKernelExC(&c, (const void *)fill, args));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(h, d, sizeof h, hipMemcpyDeviceToHost));
    TRUE(all(h, N, 3) && h[N] == 0);

    /* With attributes: cooperative, the stream's priority, a window, a policy. */
    hipLaunchAttribute attrs[4];
    attrs[0] = attribute(hipLaunchAttributeCooperative, 1);
    attrs[1] = attribute(hipLaunchAttributePriority, -1);
    attrs[2] = attribute(hipLaunchAttributeAccessPolicyWindow, 0);
    attrs[2].val.accessPolicyWindow = w.accessPolicyWindow;
    attrs[3] = attribute(hipLaunchAttributeSynchronizationPolicy, hipSyncPolicySpin);
    c.stream = hi;
    c.attrs = attrs;
    c.numAttrs = 4;
    value = 4;
    OK(hipLaunchKernelExC(&c, (const void *)fill, args));
    OK(hipStreamSynchronize(hi));
    OK(hipMemcpy(h, d, sizeof h, hipMemcpyDeviceToHost));
    TRUE(all(h, N, 4) && h[N] == 0);

    /* Refused launches launch nothing. */
    value = 5;
    attrs[1] = attribute(hipLaunchAttributePriority, 1);
    EXPECT(hipLaunchKernelExC(&c, (const void *)fill, args), hipErrorNotSupported);
    attrs[1] = attribute(hipLaunchAttributeMemSyncDomain, 0);
    EXPECT(hipLaunchKernelExC(&c, (const void *)fill, args), hipErrorNotSupported);
    attrs[1] = attribute((hipLaunchAttributeID)4, 1);
    EXPECT(hipLaunchKernelExC(&c, (const void *)fill, args), hipErrorInvalidValue);
    attrs[1] = attribute(hipLaunchAttributePriority, -1);
    attrs[2].val.accessPolicyWindow.hitRatio = -0.5f;
    EXPECT(hipLaunchKernelExC(&c, (const void *)fill, args), hipErrorInvalidValue);
    attrs[2].val.accessPolicyWindow.hitRatio = 0.5f;
    attrs[3] = attribute(hipLaunchAttributeSynchronizationPolicy, 9);
    EXPECT(hipLaunchKernelExC(&c, (const void *)fill, args), hipErrorInvalidValue);
    attrs[3] = attribute(hipLaunchAttributeSynchronizationPolicy, hipSyncPolicyAuto);
    c.attrs = NULL;
    EXPECT(hipLaunchKernelExC(&c, (const void *)fill, args), hipErrorInvalidValue);
    c.attrs = attrs;
    EXPECT(hipLaunchKernelExC(NULL, (const void *)fill, args), hipErrorInvalidValue);
    EXPECT(hipLaunchKernelExC(&c, NULL, args), hipErrorInvalidValue);
    /* A cooperative grid that cannot be resident at once is refused as
       hipLaunchCooperativeKernel refuses it; without the attribute it launches. */
    int per_cu = 0, cus = 0;
    OK(hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(&per_cu, fill, 256, 0));
    OK(hipDeviceGetAttribute(&cus, hipDeviceAttributeMultiprocessorCount, 0));
    TRUE(per_cu > 0 && cus > 0);
    c.gridDim = (dim3){(unsigned)(per_cu * cus) + 1, 1, 1};
    EXPECT(hipLaunchKernelExC(&c, (const void *)fill, args), hipErrorCooperativeLaunchTooLarge);
    OK(hipStreamSynchronize(hi));
    OK(hipMemcpy(h, d, sizeof h, hipMemcpyDeviceToHost));
    TRUE(all(h, N, 4) && h[N] == 0);
    attrs[0] = attribute(hipLaunchAttributeCooperative, 0);
    OK(hipLaunchKernelExC(&c, (const void *)fill, args));
    OK(hipStreamSynchronize(hi));
    OK(hipMemcpy(h, d, sizeof h, hipMemcpyDeviceToHost));
    TRUE(all(h, N, 5) && h[N] == 0);

    OK(hipFree(d));
    OK(hipModuleUnload(mod));
    OK(hipStreamDestroy(s));
    OK(hipStreamDestroy(t));
    OK(hipStreamDestroy(hi));
    DONE("stream_attributes");
}
