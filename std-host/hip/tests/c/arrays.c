/* Arrays over linear memory: hipMallocArray, hipMalloc3DArray, hipArrayCreate,
   hipArray3DCreate, hipFreeArray, hipArrayDestroy, hipGetChannelDesc, hipCreateChannelDesc,
   the 2-D copies to and from arrays (and their Async and _spt forms), hipMemcpyToArray,
   hipMemcpyFromArray, hipMemcpyHtoA, hipMemcpyAtoH, hipMemcpy3D(Async), hipMemcpyParam2D and
   hipDrvMemcpy3D naming arrays; mipmapped arrays answer
   hipErrorNotSupported. */
#include "check.h"

#include <stdint.h>

/* hipMemcpyToArray and hipMemcpyFromArray are deprecated in HIP's header; tested here too. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

enum { W = 37, H = 11 };

int main(void) {
    hipStream_t s;
    OK(hipStreamCreate(&s));

    /* A 2-D array of float2: its public fields say what was asked for. */
    hipChannelFormatDesc desc = hipCreateChannelDesc(32, 32, 0, 0, hipChannelFormatKindFloat);
    TRUE(desc.x == 32 && desc.y == 32 && desc.z == 0 && desc.f == hipChannelFormatKindFloat);
    hipArray *a = NULL;
    OK(hipMallocArray(&a, &desc, W, H, hipArrayDefault));
    TRUE(a != NULL && a->data != NULL && a->width == W && a->height == H && a->depth == 0);
    TRUE(a->Format == HIP_AD_FORMAT_FLOAT && a->NumChannels == 2 && !a->isDrv);
    hipChannelFormatDesc got;
    OK(hipGetChannelDesc(&got, a));
    TRUE(memcmp(&got, &desc, sizeof desc) == 0);

    /* Host → array → host through the 2-D copies, at offsets, with pitched host rows. */
    const size_t row = W * 8, hpitch = row + 24;
    static unsigned char host[H * (W * 8 + 24)], back[H * (W * 8 + 24)];
    for (size_t i = 0; i < sizeof host; i++) host[i] = (unsigned char)(i * 7 + 1);
    OK(hipMemcpy2DToArray(a, 0, 0, host, hpitch, row, H, hipMemcpyHostToDevice));
    memset(back, 0, sizeof back);
    OK(hipMemcpy2DFromArray(back, hpitch, a, 0, 0, row, H, hipMemcpyDeviceToHost));
    int same = 1;
    for (int y = 0; y < H; y++) same &= memcmp(back + y * hpitch, host + y * hpitch, row) == 0;
    TRUE(same);
    /* A sub-rectangle: bytes 16..16+40 of rows 3..3+4. */
    unsigned char sub[4 * 40];
    memset(sub, 0xAB, sizeof sub);
    OK(hipMemcpy2DToArrayAsync(a, 16, 3, sub, 40, 40, 4, hipMemcpyHostToDevice, s));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy2DFromArrayAsync(back, hpitch, a, 0, 0, row, H, hipMemcpyDeviceToHost, s));
    OK(hipStreamSynchronize(s));
    TRUE(back[3 * hpitch + 16] == 0xAB && back[6 * hpitch + 55] == 0xAB);
    TRUE(back[3 * hpitch + 15] == host[3 * hpitch + 15] && back[7 * hpitch + 16] == host[7 * hpitch + 16]);
    OK(hipMemcpy2DToArray_spt(a, 0, 0, host, hpitch, row, H, hipMemcpyHostToDevice));
    OK(hipMemcpy2DFromArray_spt(back, hpitch, a, 0, 0, row, H, hipMemcpyDeviceToHost));
    TRUE(back[3 * hpitch + 16] == host[3 * hpitch + 16]);
    /* Past the array, pitches, kinds. */
    EXPECT(hipMemcpy2DToArray(a, 8, 0, host, hpitch, row, H, hipMemcpyHostToDevice), hipErrorInvalidValue);
    EXPECT(hipMemcpy2DToArray(a, 0, 1, host, hpitch, row, H, hipMemcpyHostToDevice), hipErrorInvalidValue);
    EXPECT(hipMemcpy2DToArray(a, 0, 0, host, row - 1, row, H, hipMemcpyHostToDevice), hipErrorInvalidPitchValue);
    EXPECT(hipMemcpy2DFromArray(back, hpitch, a, 0, 0, row, H, (hipMemcpyKind)7), hipErrorInvalidMemcpyDirection);
    EXPECT(hipMemcpy2DToArray((hipArray *)&desc, 0, 0, host, hpitch, row, H, hipMemcpyHostToDevice), hipErrorInvalidValue);

    /* Linear copies run on across rows. */
    unsigned char lin[100];
    for (int i = 0; i < 100; i++) lin[i] = (unsigned char)(200 - i);
    OK(hipMemcpyToArray(a, 8, 2, lin, sizeof lin, hipMemcpyHostToDevice));
    unsigned char lin2[100] = {0};
    OK(hipMemcpyFromArray(lin2, a, 8, 2, sizeof lin2, hipMemcpyDeviceToHost));
    TRUE(memcmp(lin, lin2, sizeof lin) == 0);
    OK(hipMemcpyAtoH(lin2, a, 2 * row + 8, 50));
    TRUE(memcmp(lin, lin2, 50) == 0);
    OK(hipMemcpyHtoA(a, row * H - 10, lin, 10));
    OK(hipMemcpyAtoH(lin2, a, row * H - 10, 10));
    TRUE(memcmp(lin, lin2, 10) == 0);
    EXPECT(hipMemcpyHtoA(a, row * H - 10, lin, 11), hipErrorInvalidValue);
    EXPECT(hipMemcpyToArray(a, 0, H, lin, 1, hipMemcpyHostToDevice), hipErrorInvalidValue);

    /* Creation errors. */
    hipChannelFormatDesc odd = hipCreateChannelDesc(8, 16, 0, 0, hipChannelFormatKindUnsigned);
    hipChannelFormatDesc three = hipCreateChannelDesc(8, 8, 8, 0, hipChannelFormatKindUnsigned);
    hipChannelFormatDesc half_float = hipCreateChannelDesc(8, 0, 0, 0, hipChannelFormatKindFloat);
    hipArray *b = NULL;
    EXPECT(hipMallocArray(NULL, &desc, W, H, 0), hipErrorInvalidValue);
    EXPECT(hipMallocArray(&b, NULL, W, H, 0), hipErrorInvalidValue);
    EXPECT(hipMallocArray(&b, &desc, 0, H, 0), hipErrorInvalidValue);
    EXPECT(hipMallocArray(&b, &odd, W, H, 0), hipErrorInvalidValue);
    EXPECT(hipMallocArray(&b, &three, W, H, 0), hipErrorInvalidValue);
    EXPECT(hipMallocArray(&b, &half_float, W, H, 0), hipErrorInvalidValue);
    EXPECT(hipMallocArray(&b, &desc, W, H, 0x100), hipErrorInvalidValue);

    /* A 1-D array, a 3-D array, and the driver forms. */
    hipChannelFormatDesc u8 = hipCreateChannelDesc(8, 0, 0, 0, hipChannelFormatKindUnsigned);
    OK(hipMallocArray(&b, &u8, 4096, 0, 0));
    TRUE(b->height == 0 && b->textureType == hipTextureType1D);
    OK(hipMemcpyHtoA(b, 0, host, 4096));
    OK(hipFreeArray(b));
    hipArray *c = NULL;
    OK(hipMalloc3DArray(&c, &desc, make_hipExtent(8, 4, 3), 0));
    TRUE(c->depth == 3 && c->textureType == hipTextureType3D);
    OK(hipMemcpyHtoA(c, 0, host, 8 * 8 * 4 * 3));
    EXPECT(hipMemcpyHtoA(c, 1, host, 8 * 8 * 4 * 3), hipErrorInvalidValue);
    OK(hipFreeArray(c));
    HIP_ARRAY_DESCRIPTOR ad = {64, 16, HIP_AD_FORMAT_UNSIGNED_INT16, 4};
    OK(hipArrayCreate(&b, &ad));
    TRUE(b->isDrv && b->NumChannels == 4 && b->desc.x == 16 && b->desc.w == 16 && b->desc.f == hipChannelFormatKindUnsigned);
    OK(hipArrayDestroy(b));
    EXPECT(hipArrayDestroy(b), hipErrorInvalidHandle);
    HIP_ARRAY_DESCRIPTOR bad = {64, 16, 0x55, 4};
    EXPECT(hipArrayCreate(&b, &bad), hipErrorInvalidValue);
    bad.Format = HIP_AD_FORMAT_FLOAT;
    bad.NumChannels = 3;
    EXPECT(hipArrayCreate(&b, &bad), hipErrorInvalidValue);
    HIP_ARRAY3D_DESCRIPTOR ad3 = {16, 16, 16, HIP_AD_FORMAT_HALF, 1, 0};
    OK(hipArray3DCreate(&b, &ad3));
    TRUE(b->depth == 16 && b->desc.x == 16 && b->desc.f == hipChannelFormatKindFloat);
    OK(hipArrayDestroy(b));
    EXPECT(hipArray3DCreate(NULL, &ad3), hipErrorInvalidValue);

    OK(hipFreeArray(a));
    EXPECT(hipFreeArray(a), hipErrorInvalidValue);
    EXPECT(hipFreeArray(NULL), hipErrorInvalidValue);
    EXPECT(hipGetChannelDesc(&got, a), hipErrorInvalidValue);

    /* hipMemcpy3D with arrays: the extent and the array side's x count elements (uint here). */
    {
        hipChannelFormatDesc u32 = hipCreateChannelDesc(32, 0, 0, 0, hipChannelFormatKindUnsigned);
        hipArray *v = NULL;
        enum { X = 10, Y = 6, Z = 3 };
        OK(hipMalloc3DArray(&v, &u32, make_hipExtent(X, Y, Z), 0));
        static unsigned src3[Z][Y][X], dst3[Z][Y][X];
        for (int z = 0; z < Z; z++)
            for (int y = 0; y < Y; y++)
                for (int x = 0; x < X; x++) src3[z][y][x] = (unsigned)(z * 10000 + y * 100 + x);
        hipMemcpy3DParms p3;
        memset(&p3, 0, sizeof p3);
        p3.srcPtr = make_hipPitchedPtr(src3, X * 4, X, Y);
        p3.dstArray = v;
        p3.extent = make_hipExtent(X, Y, Z);
        p3.kind = hipMemcpyHostToDevice;
        OK(hipMemcpy3D(&p3));
        memset(&p3, 0, sizeof p3);
        p3.srcArray = v;
        p3.srcPos = make_hipPos(2, 1, 1); /* element 2 of row 1 of layer 1 */
        p3.dstPtr = make_hipPitchedPtr(dst3, X * 4, X, Y);
        p3.extent = make_hipExtent(X - 2, Y - 1, Z - 1);
        p3.kind = hipMemcpyDeviceToHost;
        OK(hipMemcpy3DAsync(&p3, s));
        OK(hipStreamSynchronize(s));
        TRUE(dst3[0][0][0] == 10102 && dst3[1][4][7] == 20509);
        p3.extent = make_hipExtent(X - 1, Y - 1, Z - 1); /* one element past the row */
        EXPECT(hipMemcpy3D(&p3), hipErrorInvalidValue);
        /* The driver forms: x in bytes; the array's own pitch and rows. */
        hip_Memcpy2D m2;
        memset(&m2, 0, sizeof m2);
        m2.srcMemoryType = hipMemoryTypeArray;
        m2.srcArray = v;
        m2.srcXInBytes = 4;
        m2.srcY = 2;
        m2.dstMemoryType = hipMemoryTypeHost;
        m2.dstHost = dst3;
        m2.dstPitch = X * 4;
        m2.WidthInBytes = 8;
        m2.Height = 2;
        OK(hipMemcpyParam2D(&m2));
        TRUE(dst3[0][0][0] == 201 && dst3[0][0][1] == 202 && dst3[0][1][0] == 301);
        m2.Height = Y - 2;
        OK(hipMemcpyParam2D(&m2));
        m2.Height = Y - 1; /* one row past the layer */
        EXPECT(hipMemcpyParam2D(&m2), hipErrorInvalidValue);
        HIP_MEMCPY3D d3;
        memset(&d3, 0, sizeof d3);
        d3.srcMemoryType = hipMemoryTypeArray;
        d3.srcArray = v;
        d3.srcZ = 2;
        d3.dstMemoryType = hipMemoryTypeHost;
        d3.dstHost = dst3;
        d3.dstPitch = X * 4;
        d3.dstHeight = Y;
        d3.WidthInBytes = X * 4;
        d3.Height = Y;
        d3.Depth = 1;
        OK(hipDrvMemcpy3D(&d3));
        TRUE(dst3[0][0][0] == 20000 && dst3[0][5][9] == 20509);
        d3.Depth = 2;
        EXPECT(hipDrvMemcpy3D(&d3), hipErrorInvalidValue);
        OK(hipFreeArray(v));
    }

    /* Mipmapped arrays: sampling only, so not supported. */
    hipMipmappedArray_t mm = NULL;
    EXPECT(hipMallocMipmappedArray(&mm, &desc, make_hipExtent(8, 8, 0), 3, 0), hipErrorNotSupported);
    EXPECT(hipMipmappedArrayCreate(&mm, &ad3, 3), hipErrorNotSupported);
    hipArray_t level = NULL;
    EXPECT(hipGetMipmappedArrayLevel(&level, mm, 0), hipErrorNotSupported);
    EXPECT(hipFreeMipmappedArray(mm), hipErrorNotSupported);

    OK(hipStreamDestroy(s));
    DONE("arrays");
}
