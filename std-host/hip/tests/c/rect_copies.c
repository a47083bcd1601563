/* Pitched 2-D and 3-D copies and fills in every direction, checked against a host model. On
   Debian's HIP these run its own blit kernels (__amd_rocclr_copyBufferRect…, …fillBuffer…);
   the differential run executes them as their gfx90a machine code and in check mode
   (tests/differential.rs). */
#include "check.h"

enum { W = 100, H = 20, D = 3 };

static unsigned char pattern(int x, int y, int z) {
    return (unsigned char)(x * 7 + y * 13 + z * 29 + 1);
}

int main(void) {
    static unsigned char host[D][H][W], back[D][H][W], want[D][H][W];
    for (int z = 0; z < D; z++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) host[z][y][x] = want[z][y][x] = pattern(x, y, z);

    /* 2-D: host -> pitched device, a fill of a sub-rectangle, device -> device, -> host. */
    unsigned char *a = NULL, *b = NULL;
    size_t pa = 0, pb = 0;
    OK(hipMallocPitch((void **)&a, &pa, W, H));
    OK(hipMallocPitch((void **)&b, &pb, W + 64, H));
    TRUE(pa >= W && pb >= W + 64);
    OK(hipMemcpy2D(a, pa, host[0], W, W, H, hipMemcpyHostToDevice));
    OK(hipMemset2D(a + 2 * pa + 10, pa, 0x5c, 30, 5));
    for (int y = 2; y < 7; y++)
        for (int x = 10; x < 40; x++) want[0][y][x] = 0x5c;
    OK(hipMemcpy2D(b + 3, pb, a, pa, W, H, hipMemcpyDeviceToDevice));
    memset(back, 0, sizeof back);
    OK(hipMemcpy2D(back[0], W, b + 3, pb, W, H, hipMemcpyDeviceToHost));
    TRUE(memcmp(back[0], want[0], sizeof back[0]) == 0);

    /* 2-D asynchronously in stream order. */
    hipStream_t s;
    OK(hipStreamCreate(&s));
    OK(hipMemset2DAsync(b, pb, 0x11, W + 64, H, s));
    OK(hipMemcpy2DAsync(b + 64, pb, host[1], W, W, H, hipMemcpyHostToDevice, s));
    static unsigned char wide[H][W + 64];
    OK(hipMemcpy2DAsync(wide, W + 64, b, pb, W + 64, H, hipMemcpyDeviceToHost, s));
    OK(hipStreamSynchronize(s));
    int bad = 0;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W + 64; x++)
            bad += wide[y][x] != (x < 64 ? 0x11 : pattern(x - 64, y, 1));
    TRUE(bad == 0);

    /* 3-D: host -> device, a fill of the middle slice, device -> host. */
    hipPitchedPtr p;
    OK(hipMalloc3D(&p, make_hipExtent(W, H, D)));
    hipMemcpy3DParms c;
    memset(&c, 0, sizeof c);
    c.srcPtr = make_hipPitchedPtr(host, W, W, H);
    c.dstPtr = p;
    c.extent = make_hipExtent(W, H, D);
    c.kind = hipMemcpyHostToDevice;
    OK(hipMemcpy3D(&c));
    hipPitchedPtr middle = p;
    middle.ptr = (char *)p.ptr + p.pitch * H;
    OK(hipMemset3D(middle, 7, make_hipExtent(W, H, 1)));
    memcpy(want, host, sizeof want);
    memset(want[1], 7, sizeof want[1]);
    memset(&c, 0, sizeof c);
    c.srcPtr = p;
    c.dstPtr = make_hipPitchedPtr(back, W, W, H);
    c.extent = make_hipExtent(W, H, D);
    c.kind = hipMemcpyDeviceToHost;
    memset(back, 0, sizeof back);
    OK(hipMemcpy3D(&c));
    TRUE(memcmp(back, want, sizeof back) == 0);

    OK(hipStreamDestroy(s));
    OK(hipFree(a));
    OK(hipFree(b));
    OK(hipFree(p.ptr));
    DONE("rect_copies");
}
