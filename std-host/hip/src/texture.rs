//! Textures and surfaces: texture objects (`hipCreateTextureObject`, `hipTexObject*`), texture
//! references (`hipBindTexture*`, `hipTexRef*`, `hipGetTextureReference`), surface objects and
//! the registration of texture and surface references by hipcc's host code
//! (`__hipRegisterTexture`, `__hipRegisterSurface`).
//!
//! All are exported and answer `hipErrorNotSupported`: the emulated GPU cannot sample images or
//! load and store through image descriptors (README, "HIP C ABI"), so a texture object would be
//! a handle no kernel can use. The registrations, which return nothing, record nothing: a
//! program that registers a texture reference starts, and fails where it binds one.

use std::ffi::{c_char, c_int, c_uint, c_void};

use crate::array::{Array, ArrayDescriptor, ChannelFormatDesc};

/// `__hipRegisterTexture`: nothing is recorded (textures are not supported; see the module
/// documentation).
#[no_mangle]
pub extern "C" fn __hipRegisterTexture(
    _modules: *mut c_void,
    _var: *mut c_void,
    _host_var: *mut c_char,
    _device_var: *mut c_char,
    _kind: c_int,
    _norm: c_int,
    _ext: c_int,
) {
}

/// `__hipRegisterSurface`: nothing is recorded (surfaces are not supported).
#[no_mangle]
pub extern "C" fn __hipRegisterSurface(
    _modules: *mut c_void,
    _var: *mut c_void,
    _host_var: *mut c_char,
    _device_var: *mut c_char,
    _kind: c_int,
    _ext: c_int,
) {
}

/// `hipTextureObject_t` / `hipSurfaceObject_t`.
type Object = *mut c_void;
/// `textureReference*`.
type TexRef = *mut c_void;

not_supported! {
    /// `hipCreateTextureObject`: not supported (no image sampling).
    fn hipCreateTextureObject(object: *mut Object, res: *const c_void, tex: *const c_void, view: *const c_void);
    /// `hipDestroyTextureObject`: not supported (no texture object exists).
    fn hipDestroyTextureObject(object: Object);
    /// `hipGetTextureObjectResourceDesc`: not supported.
    fn hipGetTextureObjectResourceDesc(desc: *mut c_void, object: Object);
    /// `hipGetTextureObjectResourceViewDesc`: not supported.
    fn hipGetTextureObjectResourceViewDesc(desc: *mut c_void, object: Object);
    /// `hipGetTextureObjectTextureDesc`: not supported.
    fn hipGetTextureObjectTextureDesc(desc: *mut c_void, object: Object);
    /// `hipTexObjectCreate`: not supported (no image sampling).
    fn hipTexObjectCreate(object: *mut Object, res: *const c_void, tex: *const c_void, view: *const c_void);
    /// `hipTexObjectDestroy`: not supported.
    fn hipTexObjectDestroy(object: Object);
    /// `hipTexObjectGetResourceDesc`: not supported.
    fn hipTexObjectGetResourceDesc(desc: *mut c_void, object: Object);
    /// `hipTexObjectGetResourceViewDesc`: not supported.
    fn hipTexObjectGetResourceViewDesc(desc: *mut c_void, object: Object);
    /// `hipTexObjectGetTextureDesc`: not supported.
    fn hipTexObjectGetTextureDesc(desc: *mut c_void, object: Object);
    /// `hipBindTexture`: not supported (no image sampling).
    fn hipBindTexture(offset: *mut usize, tex: TexRef, ptr: *const c_void, desc: *const ChannelFormatDesc, size: usize);
    /// `hipBindTexture2D`: not supported.
    fn hipBindTexture2D(
        offset: *mut usize,
        tex: TexRef,
        ptr: *const c_void,
        desc: *const ChannelFormatDesc,
        width: usize,
        height: usize,
        pitch: usize,
    );
    /// `hipBindTextureToArray`: not supported.
    fn hipBindTextureToArray(tex: TexRef, array: *const Array, desc: *const ChannelFormatDesc);
    /// `hipBindTextureToMipmappedArray`: not supported.
    fn hipBindTextureToMipmappedArray(tex: TexRef, array: *const c_void, desc: *const ChannelFormatDesc);
    /// `hipUnbindTexture`: not supported.
    fn hipUnbindTexture(tex: TexRef);
    /// `hipGetTextureAlignmentOffset`: not supported.
    fn hipGetTextureAlignmentOffset(offset: *mut usize, tex: TexRef);
    /// `hipGetTextureReference`: not supported (no texture reference is registered).
    fn hipGetTextureReference(tex: *mut TexRef, symbol: *const c_void);
    /// `hipTexRefGetAddress`: not supported.
    fn hipTexRefGetAddress(ptr: *mut *mut c_void, tex: TexRef);
    /// `hipTexRefGetAddressMode`: not supported.
    fn hipTexRefGetAddressMode(mode: *mut c_int, tex: TexRef, dim: c_int);
    /// `hipTexRefGetFilterMode`: not supported.
    fn hipTexRefGetFilterMode(mode: *mut c_int, tex: TexRef);
    /// `hipTexRefGetFlags`: not supported.
    fn hipTexRefGetFlags(flags: *mut c_uint, tex: TexRef);
    /// `hipTexRefGetFormat`: not supported.
    fn hipTexRefGetFormat(format: *mut c_int, channels: *mut c_int, tex: TexRef);
    /// `hipTexRefGetMaxAnisotropy`: not supported.
    fn hipTexRefGetMaxAnisotropy(value: *mut c_int, tex: TexRef);
    /// `hipTexRefGetMipmapFilterMode`: not supported.
    fn hipTexRefGetMipmapFilterMode(mode: *mut c_int, tex: TexRef);
    /// `hipTexRefGetMipmapLevelBias`: not supported.
    fn hipTexRefGetMipmapLevelBias(bias: *mut f32, tex: TexRef);
    /// `hipTexRefGetMipmapLevelClamp`: not supported.
    fn hipTexRefGetMipmapLevelClamp(min: *mut f32, max: *mut f32, tex: TexRef);
    /// `hipTexRefSetAddress`: not supported.
    fn hipTexRefSetAddress(offset: *mut usize, tex: TexRef, ptr: *mut c_void, bytes: usize);
    /// `hipTexRefSetAddress2D`: not supported.
    fn hipTexRefSetAddress2D(tex: TexRef, desc: *const ArrayDescriptor, ptr: *mut c_void, pitch: usize);
    /// `hipTexRefSetAddressMode`: not supported.
    fn hipTexRefSetAddressMode(tex: TexRef, dim: c_int, mode: c_int);
    /// `hipTexRefSetArray`: not supported.
    fn hipTexRefSetArray(tex: TexRef, array: *const Array, flags: c_uint);
    /// `hipTexRefSetBorderColor`: not supported.
    fn hipTexRefSetBorderColor(tex: TexRef, color: *mut f32);
    /// `hipTexRefSetFilterMode`: not supported.
    fn hipTexRefSetFilterMode(tex: TexRef, mode: c_int);
    /// `hipTexRefSetFlags`: not supported.
    fn hipTexRefSetFlags(tex: TexRef, flags: c_uint);
    /// `hipTexRefSetFormat`: not supported.
    fn hipTexRefSetFormat(tex: TexRef, format: c_int, components: c_int);
    /// `hipTexRefSetMaxAnisotropy`: not supported.
    fn hipTexRefSetMaxAnisotropy(tex: TexRef, value: c_uint);
    /// `hipTexRefSetMipmapFilterMode`: not supported.
    fn hipTexRefSetMipmapFilterMode(tex: TexRef, mode: c_int);
    /// `hipTexRefSetMipmapLevelBias`: not supported.
    fn hipTexRefSetMipmapLevelBias(tex: TexRef, bias: f32);
    /// `hipTexRefSetMipmapLevelClamp`: not supported.
    fn hipTexRefSetMipmapLevelClamp(tex: TexRef, min: f32, max: f32);
    /// `hipTexRefSetMipmappedArray`: not supported.
    fn hipTexRefSetMipmappedArray(tex: TexRef, array: *mut c_void, flags: c_uint);
}

/// `hipCreateSurfaceObject` (exported under its C++ name, as Debian's HIP 5.2 does): not
/// supported (no image load/store).
#[export_name = "_Z22hipCreateSurfaceObjectPP13__hip_surfacePK15hipResourceDesc"]
pub extern "C" fn hip_create_surface_object(_object: *mut Object, _res: *const c_void) -> i32 {
    crate::error::api(|| {
        crate::global::global()?;
        Err(crate::error::NOT_SUPPORTED)
    })
}

/// `hipDestroySurfaceObject` (C++ name, as HIP 5.2): not supported.
#[export_name = "_Z23hipDestroySurfaceObjectP13__hip_surface"]
pub extern "C" fn hip_destroy_surface_object(_object: Object) -> i32 {
    crate::error::api(|| {
        crate::global::global()?;
        Err(crate::error::NOT_SUPPORTED)
    })
}
