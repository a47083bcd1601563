/* Arrays over linear memory: hipMallocArray, hipMalloc3DArray, hipArrayCreate,
   hipArray3DCreate, hipFreeArray, hipArrayDestroy, hipGetChannelDesc, hipCreateChannelDesc,
   the 2-D copies to and from arrays (and their Async and _spt forms), hipMemcpyToArray,
   hipMemcpyFromArray, hipMemcpyHtoA, hipMemcpyAtoH; mipmapped arrays answer
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
