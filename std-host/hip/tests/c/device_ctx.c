/* Driver-style device queries and HIP's deprecated contexts: hipInit, the versions, hipDeviceGet,
   name, memory, compute capability, PCI bus id (both ways), UUID, hipChooseDevice, the cache and
   shared-memory hints, device flags, P2P attributes; hipCtx* (a context per device, a stack per
   thread) and hipDevicePrimaryCtx*. Runs on aqueduct and on Debian's HIP 5.2 (the differential
   run); checks of calls 5.2 answers differently, or crashes on, are NEWER_HIP. */
#include "check.h"

#include <pthread.h>

/* The hipCtx* functions are deprecated in HIP's header; this test is about them. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

/* Each context of this test is the one of device 0. */
static hipCtx_t primary;

static void *other_thread(void *arg) {
    (void)arg;
    hipCtx_t c = NULL;
    /* A new thread's stack is empty: its current context is its device's. */
    NEWER_HIP(EXPECT(hipCtxPopCurrent(&c), hipErrorInvalidContext));
    OK(hipCtxGetCurrent(&c));
    TRUE(c == primary);
    return NULL;
}

int main(void) {
    int v = 0, d = -1, n = 0;
    unsigned u = 0;
    size_t sz = 0;

    /* hipInit and the versions (Debian's 5.2.3: 50221153 for both). */
    NEWER_HIP(EXPECT(hipInit(1), hipErrorInvalidValue)); /* 5.2 ignores the flags */
    OK(hipInit(0));
    OK(hipDriverGetVersion(&v));
    TRUE(v == 50221153);
    OK(hipRuntimeGetVersion(&v));
    TRUE(v == 50221153);
    EXPECT(hipDriverGetVersion(NULL), hipErrorInvalidValue);
    EXPECT(hipRuntimeGetVersion(NULL), hipErrorInvalidValue);

    /* Devices by ordinal. */
    OK(hipGetDeviceCount(&n));
    TRUE(n >= 1);
    hipDevice_t dev = -1;
    OK(hipDeviceGet(&dev, 0));
    TRUE(dev == 0);
    EXPECT(hipDeviceGet(&dev, n), hipErrorInvalidDevice);
    EXPECT(hipDeviceGet(&dev, -1), hipErrorInvalidDevice);
    NEWER_HIP(EXPECT(hipDeviceGet(NULL, 0), hipErrorInvalidValue)); /* 5.2: hipErrorInvalidDevice */

    /* Name: the properties' name; a buffer too short for it is hipErrorInvalidValue. */
    hipDeviceProp_t prop;
    OK(hipGetDeviceProperties(&prop, 0));
    char name[256];
    OK(hipDeviceGetName(name, sizeof name, 0));
    TRUE(strcmp(name, prop.name) == 0);
    EXPECT(hipDeviceGetName(name, (int)strlen(prop.name), 0), hipErrorInvalidValue);
    OK(hipDeviceGetName(name, (int)strlen(prop.name) + 1, 0));
    EXPECT(hipDeviceGetName(name, 0, 0), hipErrorInvalidValue);
    EXPECT(hipDeviceGetName(NULL, 10, 0), hipErrorInvalidValue);
    EXPECT(hipDeviceGetName(name, 10, n), hipErrorInvalidDevice);

    OK(hipDeviceTotalMem(&sz, 0));
    TRUE(sz == prop.totalGlobalMem && sz > 0);
    EXPECT(hipDeviceTotalMem(NULL, 0), hipErrorInvalidValue);
    EXPECT(hipDeviceTotalMem(&sz, n), hipErrorInvalidDevice);

    int major = -1, minor = -1;
    OK(hipDeviceComputeCapability(&major, &minor, 0));
    TRUE(major == prop.major && minor == prop.minor);
    EXPECT(hipDeviceComputeCapability(NULL, &minor, 0), hipErrorInvalidValue);
    EXPECT(hipDeviceComputeCapability(&major, &minor, n), hipErrorInvalidDevice);

    /* PCI bus id: domain:bus:device.function, truncated as snprintf truncates; and back. */
    char bus[64], expect_bus[64];
    snprintf(expect_bus, sizeof expect_bus, "%04x:%02x:%02x.0", prop.pciDomainID, prop.pciBusID, prop.pciDeviceID);
    OK(hipDeviceGetPCIBusId(bus, sizeof bus, 0));
    TRUE(strcmp(bus, expect_bus) == 0);
    char short_bus[5];
    OK(hipDeviceGetPCIBusId(short_bus, sizeof short_bus, 0));
    TRUE(strncmp(short_bus, expect_bus, 4) == 0 && short_bus[4] == 0);
    EXPECT(hipDeviceGetPCIBusId(bus, 0, 0), hipErrorInvalidValue);
    EXPECT(hipDeviceGetPCIBusId(NULL, 64, 0), hipErrorInvalidValue);
    EXPECT(hipDeviceGetPCIBusId(bus, 64, n), hipErrorInvalidDevice);
    d = -1;
    OK(hipDeviceGetByPCIBusId(&d, expect_bus));
    TRUE(d == 0);
    EXPECT(hipDeviceGetByPCIBusId(&d, "0000:ff:1f.7"), hipErrorInvalidValue);
    EXPECT(hipDeviceGetByPCIBusId(&d, "garbage"), hipErrorInvalidValue);
    EXPECT(hipDeviceGetByPCIBusId(NULL, expect_bus), hipErrorInvalidValue);
    EXPECT(hipDeviceGetByPCIBusId(&d, NULL), hipErrorInvalidValue);

    /* UUID: 16 hexadecimal digits (ROCr's agent UUID), the same at every call. */
    hipUUID a, b;
    OK(hipDeviceGetUuid(&a, 0));
    OK(hipDeviceGetUuid(&b, 0));
    TRUE(memcmp(&a, &b, sizeof a) == 0);
    for (int i = 0; i < 16; i++) TRUE(strchr("0123456789abcdefABCDEF", a.bytes[i]) != NULL && a.bytes[i] != 0);
    EXPECT(hipDeviceGetUuid(NULL, 0), hipErrorInvalidValue);
    EXPECT(hipDeviceGetUuid(&a, n), hipErrorInvalidDevice);

    /* hipChooseDevice: any device meets an empty wish; the device's own major too. */
    hipDeviceProp_t want;
    memset(&want, 0, sizeof want);
    d = -1;
    OK(hipChooseDevice(&d, &want));
    TRUE(d >= 0 && d < n);
    want.major = prop.major;
    OK(hipChooseDevice(&d, &want));
    TRUE(d == 0 || n > 1);
    EXPECT(hipChooseDevice(NULL, &want), hipErrorInvalidValue);
    EXPECT(hipChooseDevice(&d, NULL), hipErrorInvalidValue);

    /* Cache and shared-memory preferences: hints AMD devices ignore. */
    hipFuncCache_t cache = hipFuncCachePreferL1;
    OK(hipDeviceGetCacheConfig(&cache));
    TRUE(cache == hipFuncCachePreferNone);
    OK(hipDeviceSetCacheConfig(hipFuncCachePreferShared));
    OK(hipDeviceGetCacheConfig(&cache));
    TRUE(cache == hipFuncCachePreferNone);
    EXPECT(hipDeviceGetCacheConfig(NULL), hipErrorInvalidValue);
    hipSharedMemConfig bank = hipSharedMemBankSizeEightByte;
    OK(hipDeviceGetSharedMemConfig(&bank));
    TRUE(bank == hipSharedMemBankSizeFourByte);
    OK(hipDeviceSetSharedMemConfig(hipSharedMemBankSizeEightByte));
    OK(hipDeviceGetSharedMemConfig(&bank));
    TRUE(bank == hipSharedMemBankSizeFourByte);
    EXPECT(hipDeviceGetSharedMemConfig(NULL), hipErrorInvalidValue);

    /* Device flags: spin until set; the scheduling bits are kept; unknown bits refused. */
    OK(hipGetDeviceFlags(&u));
    TRUE(u == hipDeviceScheduleSpin);
    OK(hipSetDeviceFlags(hipDeviceScheduleYield));
    OK(hipGetDeviceFlags(&u));
    TRUE(u == hipDeviceScheduleYield);
    OK(hipSetDeviceFlags(hipDeviceScheduleBlockingSync | hipDeviceMapHost));
    OK(hipGetDeviceFlags(&u));
    TRUE(u == hipDeviceScheduleBlockingSync);
    EXPECT(hipSetDeviceFlags(0x100), hipErrorInvalidValue);
    EXPECT(hipGetDeviceFlags(NULL), hipErrorInvalidValue);
    OK(hipSetDeviceFlags(hipDeviceScheduleSpin));

    /* P2P attributes need two distinct devices. */
    EXPECT(hipDeviceGetP2PAttribute(&v, hipDevP2PAttrAccessSupported, 0, 0), hipErrorInvalidDevice);
    EXPECT(hipDeviceGetP2PAttribute(NULL, hipDevP2PAttrAccessSupported, 0, 0), hipErrorInvalidValue);
    EXPECT(hipDeviceGetP2PAttribute(&v, hipDevP2PAttrAccessSupported, 0, n), hipErrorInvalidDevice);
    unsigned link = 0, hops = 0;
    EXPECT(hipExtGetLinkTypeAndHopCount(0, 0, &link, &hops), hipErrorInvalidValue);
    if (n > 1) {
        OK(hipDeviceGetP2PAttribute(&v, hipDevP2PAttrAccessSupported, 0, 1));
        TRUE(v == 1);
        OK(hipExtGetLinkTypeAndHopCount(0, 1, &link, &hops));
        TRUE(hops >= 1);
    }

    /* Contexts: one per device. With an empty stack the current context is the device's. */
    hipCtx_t c = NULL, c2 = NULL;
    OK(hipCtxGetCurrent(&primary));
    TRUE(primary != NULL);
    NEWER_HIP(EXPECT(hipCtxGetCurrent(NULL), hipErrorInvalidValue)); /* 5.2 dereferences it */
    OK(hipCtxGetDevice(&d));
    TRUE(d == 0);
    OK(hipDevicePrimaryCtxRetain(&c, 0));
    TRUE(c == primary);

    /* hipCtxCreate pushes the device's context and makes it current; pop and push move it. */
    OK(hipCtxCreate(&c, 0, 0));
    TRUE(c == primary);
    EXPECT(hipCtxCreate(&c2, 0, n), hipErrorInvalidValue);
    NEWER_HIP(EXPECT(hipCtxCreate(NULL, 0, 0), hipErrorInvalidValue)); /* 5.2 dereferences it */
    OK(hipCtxGetCurrent(&c2));
    TRUE(c2 == c);
    OK(hipCtxPushCurrent(c));
    EXPECT(hipCtxPushCurrent(NULL), hipErrorInvalidContext);
    OK(hipCtxPopCurrent(&c2));
    TRUE(c2 == c);
    OK(hipCtxPopCurrent(&c2));
    TRUE(c2 == c);
    NEWER_HIP(EXPECT(hipCtxPopCurrent(&c2), hipErrorInvalidContext)); /* the stack is empty */
    OK(hipCtxSetCurrent(c));
    OK(hipCtxGetCurrent(&c2));
    TRUE(c2 == c);
    OK(hipCtxSetCurrent(NULL));
    OK(hipCtxGetCurrent(&c2));
    TRUE(c2 == primary); /* the device's, with the stack empty again */
    OK(hipCtxGetDevice(&d));
    TRUE(d == 0);

    /* Another thread has a stack of its own. */
    OK(hipCtxPushCurrent(c));
    pthread_t t;
    TRUE(pthread_create(&t, NULL, other_thread, NULL) == 0);
    TRUE(pthread_join(t, NULL) == 0);

    /* What HIP's header documents for these (HIP 5.2 answers hipErrorNotSupported). */
    NEWER_HIP(OK(hipCtxGetApiVersion(c, &v)));
    NEWER_HIP(TRUE(v == 4));
    NEWER_HIP(EXPECT(hipCtxGetApiVersion(c, NULL), hipErrorInvalidValue));
    NEWER_HIP(OK(hipCtxGetCacheConfig(&cache)));
    NEWER_HIP(TRUE(cache == hipFuncCachePreferNone));
    NEWER_HIP(OK(hipCtxSetCacheConfig(hipFuncCachePreferL1)));
    NEWER_HIP(OK(hipCtxSetSharedMemConfig(hipSharedMemBankSizeFourByte)));
    NEWER_HIP(OK(hipCtxSynchronize()));
    NEWER_HIP(OK(hipCtxGetFlags(&u)));
    NEWER_HIP(TRUE(u == hipDeviceScheduleSpin));
    OK(hipCtxGetSharedMemConfig(&bank));
    TRUE(bank == hipSharedMemBankSizeFourByte);
    if (n > 1) {
        hipCtx_t other;
        OK(hipDevicePrimaryCtxRetain(&other, 1));
        TRUE(other != c);
        OK(hipCtxEnablePeerAccess(other, 0));
        EXPECT(hipCtxEnablePeerAccess(other, 0), hipErrorPeerAccessAlreadyEnabled);
        OK(hipCtxDisablePeerAccess(other));
        OK(hipDevicePrimaryCtxRelease(1));
    }

    /* Destroying a context pops it from the top of the stack; the device stays usable. */
    OK(hipCtxDestroy(c));
    EXPECT(hipCtxDestroy(NULL), hipErrorInvalidValue);
    void *p;
    OK(hipMalloc(&p, 64));
    OK(hipFree(p));

    /* The primary context: retained above, so its flags cannot change; released, they can. */
    unsigned flags = 99;
    int active = -1;
    OK(hipDevicePrimaryCtxGetState(0, &flags, &active));
    TRUE(flags == 0);
    NEWER_HIP(TRUE(active == 1)); /* 5.2 reports 0 */
    EXPECT(hipDevicePrimaryCtxGetState(n, &flags, &active), hipErrorInvalidDevice);
    EXPECT(hipDevicePrimaryCtxSetFlags(0, hipDeviceScheduleYield), hipErrorContextAlreadyInUse);
    EXPECT(hipDevicePrimaryCtxSetFlags(n, 0), hipErrorInvalidDevice);
    EXPECT(hipDevicePrimaryCtxRetain(NULL, 0), hipErrorInvalidValue);
    EXPECT(hipDevicePrimaryCtxRetain(&c, n), hipErrorInvalidDevice);
    OK(hipDevicePrimaryCtxRelease(0));
    OK(hipDevicePrimaryCtxRelease(0)); /* a release too many: success, as HIP answers */
    EXPECT(hipDevicePrimaryCtxRelease(n), hipErrorInvalidDevice);
    NEWER_HIP(OK(hipDevicePrimaryCtxGetState(0, &flags, &active)));
    NEWER_HIP(TRUE(active == 0));
    NEWER_HIP(OK(hipDevicePrimaryCtxSetFlags(0, hipDeviceScheduleYield)));
    NEWER_HIP(OK(hipDevicePrimaryCtxGetState(0, &flags, &active)));
    NEWER_HIP(TRUE(flags == hipDeviceScheduleYield));
    NEWER_HIP(EXPECT(hipDevicePrimaryCtxSetFlags(0, 0x100), hipErrorInvalidValue));

    /* Reset: the device's memory goes (as hipDeviceReset); flags return to 0. */
    OK(hipMalloc(&p, 64));
    OK(hipDevicePrimaryCtxReset(0));
    NEWER_HIP(EXPECT(hipFree(p), hipErrorInvalidValue));
    NEWER_HIP(OK(hipDevicePrimaryCtxGetState(0, &flags, &active)));
    NEWER_HIP(TRUE(flags == 0));
    NEWER_HIP(EXPECT(hipDevicePrimaryCtxReset(n), hipErrorInvalidDevice)); /* 5.2: success */

    /* hipGetStreamDeviceId. */
    hipStream_t s;
    OK(hipStreamCreate(&s));
    TRUE(hipGetStreamDeviceId(s) == 0);
    TRUE(hipGetStreamDeviceId(NULL) == 0);
    OK(hipStreamDestroy(s));
    DONE("device_ctx");
}
