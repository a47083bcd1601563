/* Two emulated GPUs (AQUEDUCT_EMU_GPUS=2): peer queries, peer access on and off with HIP's
   errors, synchronous and stream-ordered peer copies both ways, a kernel on one device working
   on the other's memory, streams and events across devices, and each device's memory pool. */
#include "check.h"

/* add(unsigned *p, unsigned v): p[0] += v. */
static void add(void **args, dim3 b, dim3 g, dim3 d) { **(unsigned **)args[0] += *(unsigned *)args[1]; }
static char add_symbol;

enum { N = 1024 };

static void expect_all(const unsigned *d, unsigned v) {
    static unsigned back[N];
    OK(hipMemcpy(back, d, sizeof back, hipMemcpyDeviceToHost));
    TRUE(back[0] == v && back[N - 1] == v);
}

int main(void) {
    size_t sizes[] = {sizeof(void *), sizeof(unsigned)};
    OK(aqdRegisterHostKernel(&add_symbol, add, 2, sizes));
    int count = 0;
    OK(hipGetDeviceCount(&count));
    TRUE(count == 2);

    /* Queries. */
    int can = -1;
    OK(hipDeviceCanAccessPeer(&can, 0, 1));
    TRUE(can == 1);
    OK(hipDeviceCanAccessPeer(&can, 1, 0));
    TRUE(can == 1);
    OK(hipDeviceCanAccessPeer(&can, 1, 1));
    TRUE(can == 0);
    EXPECT(hipDeviceCanAccessPeer(&can, 0, 2), hipErrorInvalidDevice);
    EXPECT(hipDeviceCanAccessPeer(&can, -1, 0), hipErrorInvalidDevice);
    EXPECT(hipDeviceCanAccessPeer(NULL, 0, 1), hipErrorInvalidValue);

    /* Peer access from device 0 to 1, and back. */
    OK(hipSetDevice(0));
    OK(hipDeviceEnablePeerAccess(1, 0));
    EXPECT(hipDeviceEnablePeerAccess(1, 0), hipErrorPeerAccessAlreadyEnabled);
    EXPECT(hipDeviceEnablePeerAccess(1, 1), hipErrorInvalidValue);
    EXPECT(hipDeviceEnablePeerAccess(0, 0), hipErrorInvalidDevice);
    EXPECT(hipDeviceEnablePeerAccess(2, 0), hipErrorInvalidDevice);
    OK(hipSetDevice(1));
    EXPECT(hipDeviceDisablePeerAccess(0), hipErrorPeerAccessNotEnabled);
    OK(hipDeviceEnablePeerAccess(0, 0));
    OK(hipDeviceDisablePeerAccess(0));
    OK(hipSetDevice(0));
    OK(hipDeviceDisablePeerAccess(1));
    EXPECT(hipDeviceDisablePeerAccess(1), hipErrorPeerAccessNotEnabled);
    OK(hipDeviceEnablePeerAccess(1, 0));

    /* Memory on each device; synchronous peer copies both ways. */
    unsigned *d0, *d1;
    OK(hipSetDevice(1));
    OK(hipMalloc((void **)&d1, N * 4));
    hipStream_t s1;
    OK(hipStreamCreate(&s1));
    OK(hipSetDevice(0));
    OK(hipMalloc((void **)&d0, N * 4));
    hipPointerAttribute_t pa;
    OK(hipPointerGetAttributes(&pa, d1));
    TRUE(pa.device == 1);
    OK(hipMemsetD32(d0, 0x11, N));
    OK(hipMemcpyPeer(d1, 1, d0, 0, N * 4));
    expect_all(d1, 0x11);
    OK(hipMemsetD32(d1, 0x22, N));
    OK(hipMemcpyPeer(d0, 0, d1, 1, N * 4));
    expect_all(d0, 0x22);
    EXPECT(hipMemcpyPeer(d0, 2, d1, 1, 4), hipErrorInvalidDevice);
    EXPECT(hipMemcpyPeer(d0, 0, d1, -1, 4), hipErrorInvalidDevice);

    /* Stream-ordered: on device 1's stream, a kernel there adds to device 0's memory, then the
       result goes to device 1 and back; device 0's stream waits for device 1's event. */
    int dev = -1;
    OK(hipStreamGetDevice(s1, &dev));
    TRUE(dev == 1);
    unsigned *p = d0;
    unsigned v = 5;
    void *args[] = {&p, &v};
    OK(hipLaunchKernel(&add_symbol, (dim3){1, 1, 1}, (dim3){1, 1, 1}, args, 0, s1));
    OK(hipMemcpyPeerAsync(d1, 1, d0, 0, 4, s1));
    hipEvent_t e;
    OK(hipSetDevice(1));
    OK(hipEventCreate(&e));
    OK(hipEventRecord(e, s1));
    OK(hipSetDevice(0));
    hipStream_t s0;
    OK(hipStreamCreate(&s0));
    OK(hipStreamWaitEvent(s0, e, 0));
    unsigned host = 0;
    OK(hipMemcpyPeerAsync(d0 + 1, 0, d1, 1, 4, s0));
    OK(hipMemcpyAsync(&host, d0 + 1, 4, hipMemcpyDeviceToHost, s0));
    OK(hipStreamSynchronize(s0));
    TRUE(host == 0x22 + 5);

    /* Each device has its own default pool; stream-ordered memory follows the stream's device. */
    hipMemPool_t p0, p1;
    OK(hipDeviceGetDefaultMemPool(&p0, 0));
    OK(hipDeviceGetDefaultMemPool(&p1, 1));
    TRUE(p0 != p1);
    void *a1;
    OK(hipMallocAsync(&a1, 256, s1));
    OK(hipPointerGetAttributes(&pa, a1));
    TRUE(pa.device == 1);
    unsigned long long used = 0;
    OK(hipMemPoolGetAttribute(p1, hipMemPoolAttrUsedMemCurrent, &used));
    TRUE(used == 256);
    EXPECT(hipDeviceSetMemPool(0, p1), hipErrorInvalidDevice);
    hipMemAccessFlags flags = hipMemAccessFlagsProtReadWrite;
    hipMemLocation loc = {hipMemLocationTypeDevice, 1};
    OK(hipMemPoolGetAccess(&flags, p0, &loc));
    TRUE(flags == hipMemAccessFlagsProtNone);
    hipMemAccessDesc desc = {{hipMemLocationTypeDevice, 1}, hipMemAccessFlagsProtReadWrite};
    OK(hipMemPoolSetAccess(p0, &desc, 1));
    OK(hipMemPoolGetAccess(&flags, p0, &loc));
    TRUE(flags == hipMemAccessFlagsProtReadWrite);
    /* Device 0's stream copies from device 1's pool memory. */
    OK(hipMemsetAsync(a1, 0x7f, 256, s1));
    OK(hipStreamSynchronize(s1));
    OK(hipMemcpyPeerAsync(d0, 0, a1, 1, 4, s0));
    OK(hipMemcpyAsync(&host, d0, 4, hipMemcpyDeviceToHost, s0));
    OK(hipStreamSynchronize(s0));
    TRUE(host == 0x7f7f7f7fu);
    OK(hipFreeAsync(a1, s1));
    OK(hipStreamSynchronize(s1));

    OK(hipFree(d0));
    OK(hipFree(d1));
    DONE("multigpu");
}
