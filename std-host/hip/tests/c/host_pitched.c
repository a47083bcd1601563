/* Host memory under its older names and what a pointer is (hipHostAlloc, hipMallocHost,
   hipMemAllocHost, hipFreeHost, hipHostGetFlags, hipExtMallocWithFlags, hipMemGetAddressRange,
   hipMemPtrGetInfo, hipPointerGetAttribute, hipDrvPointerGetAttributes), pitched and 3-D memory
   (hipMallocPitch, hipMemAllocPitch, hipMalloc3D, hipMemset2D/3D, hipMemcpyParam2D,
   hipMemcpy3D, hipDrvMemcpy3D, their Async forms in stream order), the _spt forms of the copies
   and fills, and the allocation answers the external suite found (hipMalloc(SIZE_MAX)). */
#include "check.h"

#include <stdint.h>

/* hipHostAlloc, hipMallocHost, hipFreeHost, hipCtxGetCurrent … are deprecated in HIP's header;
   this test is about them too. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

enum { W = 100, H = 10, D = 3 };

/* Every byte of a W x H x D region of `pitch`-byte rows at `p`: value(x, y, z). */
static int region_is(const unsigned char *p, size_t pitch, size_t rows, int depth, unsigned char (*value)(int, int, int)) {
    for (int z = 0; z < depth; z++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                if (p[(z * rows + y) * pitch + x] != value(x, y, z)) return 0;
    return 1;
}
static unsigned char pattern(int x, int y, int z) { return (unsigned char)(x + 3 * y + 7 * z); }
static unsigned char sevens(int x, int y, int z) { (void)x, (void)y, (void)z; return 7; }

int main(void) {
    unsigned flags = 0;
    void *p = NULL, *h = NULL;
    int stack_value = 0;

    /* Allocation answers: more than the device has is hipErrorOutOfMemory, whatever the size. */
    EXPECT(hipMalloc(&p, SIZE_MAX), hipErrorOutOfMemory);
    EXPECT(hipMalloc(&p, (size_t)1 << 50), hipErrorOutOfMemory);
    OK(hipFreeAsync(NULL, 0));

    /* Pinned host memory under every name; hipHostGetFlags answers the flags given. */
    OK(hipHostAlloc(&h, 4096, hipHostMallocMapped | hipHostMallocPortable));
    OK(hipHostGetFlags(&flags, h));
    TRUE(flags == (hipHostMallocMapped | hipHostMallocPortable));
    OK(hipHostGetFlags(&flags, (char *)h + 100)); /* any address inside */
    TRUE(flags == (hipHostMallocMapped | hipHostMallocPortable));
    OK(hipFreeHost(h));
    EXPECT(hipHostGetFlags(&flags, h), hipErrorInvalidValue); /* freed */
    OK(hipMallocHost(&h, 4096));
    OK(hipHostGetFlags(&flags, h));
    TRUE(flags == 0);
    OK(hipFreeHost(h));
    OK(hipMemAllocHost(&h, 64));
    OK(hipHostFree(h));
    OK(hipMallocHost(&h, 0));
    TRUE(h == NULL);
    EXPECT(hipMallocHost(NULL, 16), hipErrorInvalidValue);
    EXPECT(hipHostAlloc(NULL, 16, 0), hipErrorInvalidValue);
    EXPECT(hipHostAlloc(&h, 16, 0x80), hipErrorInvalidValue);
    EXPECT(hipHostGetFlags(NULL, &stack_value), hipErrorInvalidValue);
    EXPECT(hipHostGetFlags(&flags, NULL), hipErrorInvalidValue);
    EXPECT(hipHostGetFlags(&flags, &stack_value), hipErrorInvalidValue);
    OK(hipExtMallocWithFlags(&p, 256, hipDeviceMallocFinegrained));
    EXPECT(hipHostGetFlags(&flags, p), hipErrorInvalidValue); /* device memory */
    OK(hipFree(p));
    EXPECT(hipExtMallocWithFlags(&p, 256, 0x40), hipErrorInvalidValue);

    /* Address ranges and sizes, from any address inside an allocation. */
    void *base = NULL;
    size_t size = 0;
    OK(hipMalloc(&p, 1000));
    OK(hipMemGetAddressRange(&base, &size, (char *)p + 10));
    TRUE(base == p && size == 1000);
    EXPECT(hipMemGetAddressRange(&base, &size, (char *)p + 1000), hipErrorInvalidDevicePointer);
    EXPECT(hipMemGetAddressRange(&base, &size, &stack_value), hipErrorInvalidDevicePointer);
    EXPECT(hipMemGetAddressRange(&base, &size, NULL), hipErrorInvalidDevicePointer);
    EXPECT(hipMemGetAddressRange(NULL, &size, p), hipErrorInvalidValue);
    OK(hipMemPtrGetInfo((char *)p + 8, &size));
    TRUE(size == 1000);
    EXPECT(hipMemPtrGetInfo(&stack_value, &size), hipErrorInvalidValue);
    EXPECT(hipMemPtrGetInfo(NULL, &size), hipErrorInvalidValue);
    EXPECT(hipMemPtrGetInfo(p, NULL), hipErrorInvalidValue);

    /* Pointer attributes, each in HIP 5.2's width. */
    uint64_t word = ~0ull;
    OK(hipPointerGetAttribute(&word, HIP_POINTER_ATTRIBUTE_MEMORY_TYPE, (char *)p + 8));
    TRUE((uint32_t)word == hipMemoryTypeDevice && word >> 32 == 0xffffffffu);
    word = 0;
    OK(hipPointerGetAttribute(&word, HIP_POINTER_ATTRIBUTE_DEVICE_POINTER, (char *)p + 8));
    TRUE(word == (uint64_t)(uintptr_t)((char *)p + 8));
    OK(hipPointerGetAttribute(&word, HIP_POINTER_ATTRIBUTE_RANGE_START_ADDR, (char *)p + 8));
    TRUE(word == (uint64_t)(uintptr_t)p);
    word = 0;
    OK(hipPointerGetAttribute(&word, HIP_POINTER_ATTRIBUTE_RANGE_SIZE, (char *)p + 8));
    TRUE(word == 1000);
    word = ~0ull;
    OK(hipPointerGetAttribute(&word, HIP_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p));
    TRUE((uint32_t)word == 0);
    word = 0;
    OK(hipPointerGetAttribute(&word, HIP_POINTER_ATTRIBUTE_MAPPED, p));
    TRUE(word == 1); /* one byte */
    OK(hipPointerGetAttribute(&word, HIP_POINTER_ATTRIBUTE_IS_MANAGED, p));
    TRUE((word & 0xff) == 0);
    hipCtx_t ctx = NULL, current = NULL;
    OK(hipPointerGetAttribute(&ctx, HIP_POINTER_ATTRIBUTE_CONTEXT, p));
    OK(hipCtxGetCurrent(&current));
    TRUE(ctx == current);
    unsigned id1 = 0, id2 = 0;
    OK(hipPointerGetAttribute(&id1, HIP_POINTER_ATTRIBUTE_BUFFER_ID, p));
    EXPECT(hipPointerGetAttribute(&word, HIP_POINTER_ATTRIBUTE_HOST_POINTER, p), hipErrorInvalidValue);
    EXPECT(hipPointerGetAttribute(&word, HIP_POINTER_ATTRIBUTE_P2P_TOKENS, p), hipErrorNotSupported);
    EXPECT(hipPointerGetAttribute(&word, 99, p), hipErrorInvalidValue);
    EXPECT(hipPointerGetAttribute(&word, HIP_POINTER_ATTRIBUTE_MEMORY_TYPE, &stack_value), hipErrorInvalidValue);
    EXPECT(hipPointerGetAttribute(NULL, HIP_POINTER_ATTRIBUTE_MEMORY_TYPE, p), hipErrorInvalidValue);
    OK(hipHostMalloc(&h, 256, 0));
    word = ~0ull;
    OK(hipPointerGetAttribute(&word, HIP_POINTER_ATTRIBUTE_MEMORY_TYPE, h));
    TRUE((uint32_t)word == hipMemoryTypeHost);
    OK(hipPointerGetAttribute(&word, HIP_POINTER_ATTRIBUTE_HOST_POINTER, h));
    TRUE(word == (uint64_t)(uintptr_t)h);
    OK(hipPointerGetAttribute(&id2, HIP_POINTER_ATTRIBUTE_BUFFER_ID, h));
    TRUE(id1 != id2 && id1 != 0 && id2 != 0);
    hipPointer_attribute attrs[2] = {HIP_POINTER_ATTRIBUTE_MEMORY_TYPE, HIP_POINTER_ATTRIBUTE_RANGE_SIZE};
    unsigned type = 9, range = 0;
    void *outs[2] = {&type, &range};
    OK(hipDrvPointerGetAttributes(2, attrs, outs, h));
    TRUE(type == hipMemoryTypeHost && range == 256);
    OK(hipHostFree(h));
    OK(hipFree(p));

    /* Pitched allocations: rows every 256 bytes (HIP's pitch alignment). */
    size_t pitch = 0;
    OK(hipMallocPitch(&p, &pitch, W, H));
    TRUE(pitch == 256);
    OK(hipMemGetAddressRange(&base, &size, p));
    TRUE(size == 256 * H);
    OK(hipFree(p));
    OK(hipMallocPitch(&p, &pitch, 1000, 1));
    TRUE(pitch == 1024);
    OK(hipFree(p));
    OK(hipMallocPitch(&p, &pitch, 0, H));
    TRUE(p == NULL && pitch == 1024); /* nothing allocated, the pitch untouched */
    EXPECT(hipMallocPitch(NULL, &pitch, W, H), hipErrorInvalidValue);
    EXPECT(hipMallocPitch(&p, NULL, W, H), hipErrorInvalidValue);
    hipDeviceptr_t dp;
    OK(hipMemAllocPitch(&dp, &pitch, W, H, 4));
    TRUE(pitch == 256);
    OK(hipFree(dp));
    hipPitchedPtr pp;
    OK(hipMalloc3D(&pp, make_hipExtent(W, H, 0)));
    TRUE(pp.ptr == NULL && pp.pitch == 0);
    EXPECT(hipMalloc3D(NULL, make_hipExtent(W, H, D)), hipErrorInvalidValue);

    /* 3-D: a pattern copied in from pageable memory with hipMemcpy3D, filled in the middle
       slice with hipMemset3D, and copied back with hipDrvMemcpy3DAsync. */
    OK(hipMalloc3D(&pp, make_hipExtent(W, H, D)));
    TRUE(pp.pitch == 256 && pp.xsize == W && pp.ysize == H);
    static unsigned char host3[D][H][W], back3[D][H][W];
    for (int z = 0; z < D; z++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) host3[z][y][x] = pattern(x, y, z);
    hipMemcpy3DParms c3;
    memset(&c3, 0, sizeof c3);
    c3.srcPtr = make_hipPitchedPtr(host3, W, W, H);
    c3.dstPtr = pp;
    c3.extent = make_hipExtent(W, H, D);
    c3.kind = hipMemcpyHostToDevice;
    OK(hipMemcpy3D(&c3));
    hipPitchedPtr middle = pp;
    middle.ptr = (char *)pp.ptr + pp.pitch * H;
    OK(hipMemset3D(middle, 7, make_hipExtent(W, H, 1)));
    HIP_MEMCPY3D d3;
    memset(&d3, 0, sizeof d3);
    d3.srcMemoryType = hipMemoryTypeDevice;
    d3.srcDevice = pp.ptr;
    d3.srcPitch = (unsigned)pp.pitch;
    d3.srcHeight = H;
    d3.dstMemoryType = hipMemoryTypeHost;
    d3.dstHost = back3;
    d3.dstPitch = W;
    d3.dstHeight = H;
    d3.WidthInBytes = W;
    d3.Height = H;
    d3.Depth = D;
    hipStream_t s;
    OK(hipStreamCreate(&s));
    OK(hipDrvMemcpy3DAsync(&d3, s));
    OK(hipStreamSynchronize(s));
    TRUE(region_is(&back3[0][0][0], W, H, 1, pattern));
    TRUE(region_is(&back3[1][0][0], W, H, 1, sevens));
    TRUE(back3[2][9][99] == pattern(99, 9, 2));
    /* Errors: NULL, a value that is no array, direction, pitch; an empty extent is fine. */
    EXPECT(hipMemcpy3D(NULL), hipErrorInvalidValue);
    hipMemcpy3DParms bad = c3;
    bad.kind = 7;
    EXPECT(hipMemcpy3D(&bad), hipErrorInvalidMemcpyDirection);
    bad = c3;
    bad.srcPtr.pitch = W - 1;
    EXPECT(hipMemcpy3D(&bad), hipErrorInvalidPitchValue);
    bad = c3;
    bad.dstArray = (hipArray *)&stack_value;
    EXPECT(hipMemcpy3D(&bad), hipErrorInvalidValue);
    memset(&bad, 0, sizeof bad);
    EXPECT(hipMemcpy3D(&bad), hipErrorInvalidValue);
    bad = c3;
    bad.extent.depth = 0;
    OK(hipMemcpy3D(&bad));
    EXPECT(hipMemset3D(pp, 1, make_hipExtent(pp.pitch + 1, H, 1)), hipErrorInvalidValue);
    OK(hipMemset3D(pp, 1, make_hipExtent(W, H, 0)));
    OK(hipFree(pp.ptr));

    /* 2-D: fill, then a sub-rectangle out through hipMemcpyParam2D (offsets on both sides). */
    OK(hipMallocPitch(&p, &pitch, W, H));
    OK(hipMemset2D(p, pitch, 0, W, H));
    OK(hipMemset2DAsync((char *)p + pitch + 10, pitch, 7, 20, 3, s)); /* rows 1..3, x 10..29 */
    static unsigned char host2[H][W];
    memset(host2, 0xee, sizeof host2);
    hip_Memcpy2D m;
    memset(&m, 0, sizeof m);
    OK(hipMemcpyParam2D(&m)); /* nothing to copy */
    m.srcMemoryType = hipMemoryTypeDevice;
    m.srcDevice = p;
    m.srcPitch = pitch;
    m.dstMemoryType = hipMemoryTypeHost;
    m.dstHost = host2;
    m.dstPitch = W;
    m.WidthInBytes = W;
    m.Height = H;
    OK(hipMemcpyParam2DAsync(&m, s));
    OK(hipStreamSynchronize(s));
    TRUE(host2[0][10] == 0 && host2[1][9] == 0 && host2[1][10] == 7 && host2[3][29] == 7 && host2[3][30] == 0 &&
         host2[4][10] == 0);
    memset(host2, 0xee, sizeof host2);
    m.srcXInBytes = 10;
    m.srcY = 1;
    m.dstXInBytes = 5;
    m.dstY = 2;
    m.WidthInBytes = 20;
    m.Height = 3;
    OK(hipMemcpyParam2D(&m));
    TRUE(host2[2][5] == 7 && host2[4][24] == 7 && host2[2][4] == 0xee && host2[2][25] == 0xee && host2[1][5] == 0xee);
    OK(hipDrvMemcpy2DUnaligned(&m));
    m.dstPitch = 10; /* shorter than offset + width */
    EXPECT(hipMemcpyParam2D(&m), hipErrorInvalidValue);
    EXPECT(hipMemcpyParam2D(NULL), hipErrorInvalidValue);
    EXPECT(hipMemset2D(p, pitch, 7, pitch + 1, H), hipErrorInvalidValue);
    EXPECT(hipMemset2D(NULL, pitch, 7, W, H), hipErrorInvalidValue);
    OK(hipMemset2D(p, pitch, 7, 0, H));

    /* The _spt forms, called from a build without HIP_API_PER_THREAD_DEFAULT_STREAM by name. */
    OK(hipMemset2D_spt(p, pitch, 9, W, H));
    OK(hipMemcpy2D_spt(host2, W, p, pitch, W, H, hipMemcpyDeviceToHost));
    TRUE(host2[0][0] == 9 && host2[9][99] == 9);
    OK(hipMemset_spt(p, 4, pitch * H));
    OK(hipMemcpy_spt(host2, p, W, hipMemcpyDeviceToHost));
    TRUE(host2[0][0] == 4 && host2[0][99] == 4);
    OK(hipMemcpyAsync_spt(p, host2, W, hipMemcpyHostToDevice, NULL));
    OK(hipStreamSynchronize_spt(NULL));
    OK(hipStreamQuery_spt(NULL));
    OK(hipStreamGetFlags_spt(NULL, &flags));
    TRUE(flags == 0);
    EXPECT(hipStreamGetFlags(NULL, &flags), hipErrorInvalidValue); /* the plain form's answer */
    hipPitchedPtr pq = make_hipPitchedPtr(p, pitch, W, H);
    OK(hipMemset3D_spt(pq, 5, make_hipExtent(W, H, 1)));
    hipMemcpy3DParms back = c3;
    back.srcPtr = pq;
    back.dstPtr = make_hipPitchedPtr(host3, W, W, H);
    back.extent = make_hipExtent(W, H, 1);
    back.kind = hipMemcpyDeviceToHost;
    OK(hipMemcpy3D_spt(&back));
    TRUE(host3[0][0][0] == 5 && host3[0][9][99] == 5);
    hipEvent_t e;
    OK(hipEventCreate(&e));
    OK(hipEventRecord_spt(e, NULL));
    OK(hipStreamWaitEvent_spt(NULL, e, 0));
    OK(hipEventSynchronize(e));
    OK(hipEventDestroy(e));

    /* Synchronous copies refuse to run while a capture is active (all captures invalidated). */
    hipGraph_t g;
    OK(hipStreamBeginCapture(s, hipStreamCaptureModeRelaxed));
    EXPECT(hipMemset2D(p, pitch, 1, W, H), hipErrorStreamCaptureImplicit);
    EXPECT(hipStreamEndCapture(s, &g), hipErrorStreamCaptureInvalidated);
    OK(hipStreamBeginCapture(s, hipStreamCaptureModeRelaxed));
    EXPECT(hipMemcpy_spt(host2, p, W, hipMemcpyDeviceToHost), hipErrorStreamCaptureImplicit);
    EXPECT(hipStreamEndCapture(s, &g), hipErrorStreamCaptureInvalidated);
    /* A capturing stream records the rows of a 2-D fill and copy. */
    OK(hipStreamBeginCapture(s, hipStreamCaptureModeGlobal));
    OK(hipMemset2DAsync(p, pitch, 6, W, H, s));
    m.dstPitch = W;
    OK(hipMemcpyParam2DAsync(&m, s));
    OK(hipStreamEndCapture(s, &g));
    size_t nodes = 0;
    OK(hipGraphGetNodes(g, NULL, &nodes));
    TRUE(nodes == H + 3); /* a fill per row (pitch > width), a copy per row of the 3-row copy */
    hipGraphExec_t x;
    OK(hipGraphInstantiate(&x, g, NULL, NULL, 0));
    memset(host2, 0xee, sizeof host2);
    OK(hipGraphLaunch(x, s));
    OK(hipStreamSynchronize(s));
    TRUE(host2[2][5] == 6 && host2[4][24] == 6 && host2[2][4] == 0xee);
    OK(hipGraphExecDestroy(x));
    OK(hipGraphDestroy(g));

    OK(hipFree(p));
    OK(hipStreamDestroy(s));
    DONE("host_pitched");
}
