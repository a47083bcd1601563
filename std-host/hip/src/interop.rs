//! Graphics and external-resource interoperability: OpenGL (`hipGLGetDevices`,
//! `hipGraphicsGLRegisterBuffer`/`Image`, `hipGraphicsMapResources`/`Unmap…`,
//! `hipGraphicsResourceGetMappedPointer`, `hipGraphicsSubResourceGetMappedArray`,
//! `hipGraphicsUnregisterResource`) and external memory and semaphores (`hipImportExternalMemory`,
//! `hipExternalMemoryGetMappedBuffer`, `hipDestroyExternalMemory`, `hipImportExternalSemaphore`,
//! `hipSignalExternalSemaphoresAsync`, `hipWaitExternalSemaphoresAsync`,
//! `hipDestroyExternalSemaphore`).
//!
//! All answer `hipErrorNotSupported`: there is no OpenGL context to share with (no display
//! driver on this machine), and importing memory or semaphores another driver exported (an
//! opaque file descriptor of a Vulkan or DRM buffer) is not wired up: kfd-direct's dma-buf import
//! serves HIP's IPC (`crate::ipc`), and the emulated GPU knows no other driver's dma-bufs.

use std::ffi::{c_int, c_uint, c_void};

use crate::Handle;

not_supported! {
    /// `hipGLGetDevices`: not supported (no OpenGL).
    fn hipGLGetDevices(count: *mut c_uint, devices: *mut c_int, capacity: c_uint, list: c_int);
    /// `hipGraphicsGLRegisterBuffer`: not supported (no OpenGL).
    fn hipGraphicsGLRegisterBuffer(resource: *mut *mut c_void, buffer: c_uint, flags: c_uint);
    /// `hipGraphicsGLRegisterImage`: not supported (no OpenGL).
    fn hipGraphicsGLRegisterImage(resource: *mut *mut c_void, image: c_uint, target: c_uint, flags: c_uint);
    /// `hipGraphicsMapResources`: not supported (no graphics resource exists).
    fn hipGraphicsMapResources(count: c_int, resources: *mut *mut c_void, stream: Handle);
    /// `hipGraphicsUnmapResources`: not supported.
    fn hipGraphicsUnmapResources(count: c_int, resources: *mut *mut c_void, stream: Handle);
    /// `hipGraphicsResourceGetMappedPointer`: not supported.
    fn hipGraphicsResourceGetMappedPointer(ptr: *mut *mut c_void, size: *mut usize, resource: *mut c_void);
    /// `hipGraphicsSubResourceGetMappedArray`: not supported.
    fn hipGraphicsSubResourceGetMappedArray(array: *mut *mut c_void, resource: *mut c_void, index: c_uint, level: c_uint);
    /// `hipGraphicsUnregisterResource`: not supported.
    fn hipGraphicsUnregisterResource(resource: *mut c_void);
    /// `hipImportExternalMemory`: not supported (no DMA-buf import).
    fn hipImportExternalMemory(memory: *mut *mut c_void, desc: *const c_void);
    /// `hipExternalMemoryGetMappedBuffer`: not supported.
    fn hipExternalMemoryGetMappedBuffer(ptr: *mut *mut c_void, memory: *mut c_void, desc: *const c_void);
    /// `hipDestroyExternalMemory`: not supported.
    fn hipDestroyExternalMemory(memory: *mut c_void);
    /// `hipImportExternalSemaphore`: not supported (no external semaphore import).
    fn hipImportExternalSemaphore(semaphore: *mut *mut c_void, desc: *const c_void);
    /// `hipSignalExternalSemaphoresAsync`: not supported.
    fn hipSignalExternalSemaphoresAsync(semaphores: *const *mut c_void, params: *const c_void, count: c_uint, stream: Handle);
    /// `hipWaitExternalSemaphoresAsync`: not supported.
    fn hipWaitExternalSemaphoresAsync(semaphores: *const *mut c_void, params: *const c_void, count: c_uint, stream: Handle);
    /// `hipDestroyExternalSemaphore`: not supported.
    fn hipDestroyExternalSemaphore(semaphore: *mut c_void);
}
