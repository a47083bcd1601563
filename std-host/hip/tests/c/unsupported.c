/* What this library exports but cannot serve answers hipErrorNotSupported, after HIP's
   argument checks: texture objects and references, surfaces, OpenGL interop, external memory
   and semaphores, shareable handles of virtual memory (ipc.c has IPC, vmm.hip the rest of
   virtual memory). Never a silent success. */
#include "check.h"

#include <stdint.h>

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

/* HIP 5.2 declares these in C++ only; exported under these names. */
hipError_t create_surface(hipSurfaceObject_t *o, const hipResourceDesc *d)
    __asm__("_Z22hipCreateSurfaceObjectPP13__hip_surfacePK15hipResourceDesc");
hipError_t destroy_surface(hipSurfaceObject_t o) __asm__("_Z23hipDestroySurfaceObjectP13__hip_surface");

int main(void) {
    void *d = NULL;
    OK(hipMalloc(&d, 1 << 20));

    /* Textures and surfaces. */
    hipResourceDesc res;
    memset(&res, 0, sizeof res);
    res.resType = hipResourceTypeLinear;
    res.res.linear.devPtr = d;
    res.res.linear.desc = hipCreateChannelDesc(32, 0, 0, 0, hipChannelFormatKindFloat);
    res.res.linear.sizeInBytes = 1 << 20;
    hipTextureDesc td;
    memset(&td, 0, sizeof td);
    hipTextureObject_t tex = 0;
    EXPECT(hipCreateTextureObject(&tex, &res, &td, NULL), hipErrorNotSupported);
    EXPECT(hipDestroyTextureObject(tex), hipErrorNotSupported);
    EXPECT(hipTexObjectCreate(&tex, NULL, NULL, NULL), hipErrorNotSupported);
    hipSurfaceObject_t surf = 0;
    EXPECT(create_surface(&surf, &res), hipErrorNotSupported);
    EXPECT(destroy_surface(surf), hipErrorNotSupported);
    textureReference ref;
    memset(&ref, 0, sizeof ref);
    size_t off = 0;
    EXPECT(hipBindTexture(&off, &ref, d, &res.res.linear.desc, 1 << 20), hipErrorNotSupported);
    EXPECT(hipUnbindTexture(&ref), hipErrorNotSupported);
    EXPECT(hipTexRefSetFlags(&ref, 0), hipErrorNotSupported);
    EXPECT(hipTexRefSetMipmapLevelClamp(&ref, 0.0f, 1.0f), hipErrorNotSupported);

    /* OpenGL and external resources. */
    unsigned count = 0;
    int devices[1];
    EXPECT(hipGLGetDevices(&count, devices, 1, hipGLDeviceListAll), hipErrorNotSupported);
    hipExternalMemoryHandleDesc emd;
    memset(&emd, 0, sizeof emd);
    emd.type = hipExternalMemoryHandleTypeOpaqueFd;
    emd.handle.fd = 0;
    emd.size = 4096;
    hipExternalMemory_t em = NULL;
    EXPECT(hipImportExternalMemory(&em, &emd), hipErrorNotSupported);
    hipExternalSemaphoreHandleDesc esd;
    memset(&esd, 0, sizeof esd);
    hipExternalSemaphore_t es = NULL;
    EXPECT(hipImportExternalSemaphore(&es, &esd), hipErrorNotSupported);

    /* Shareable handles of virtual memory (vmm.hip has the rest): checked, then not supported. */
    int fd = -1;
    EXPECT(hipMemExportToShareableHandle(NULL, (hipMemGenericAllocationHandle_t)d, hipMemHandleTypePosixFileDescriptor, 0), hipErrorInvalidValue);
    EXPECT(hipMemExportToShareableHandle(&fd, (hipMemGenericAllocationHandle_t)d, hipMemHandleTypePosixFileDescriptor, 1), hipErrorInvalidValue);
    EXPECT(hipMemExportToShareableHandle(&fd, (hipMemGenericAllocationHandle_t)d, hipMemHandleTypePosixFileDescriptor, 0), hipErrorNotSupported);
    hipMemGenericAllocationHandle_t imported = NULL;
    EXPECT(hipMemImportFromShareableHandle(&imported, NULL, hipMemHandleTypePosixFileDescriptor), hipErrorInvalidValue);
    EXPECT(hipMemImportFromShareableHandle(&imported, &fd, hipMemHandleTypePosixFileDescriptor), hipErrorNotSupported);

    OK(hipFree(d));
    DONE("unsupported");
}
