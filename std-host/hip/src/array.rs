//! Arrays (`hipArray`): `hipMallocArray`, `hipMalloc3DArray`, `hipArrayCreate`,
//! `hipArray3DCreate`, `hipFreeArray`, `hipArrayDestroy`, `hipGetChannelDesc`,
//! `hipCreateChannelDesc`, and the copies to and from arrays (`hipMemcpy2DToArray`,
//! `hipMemcpy2DFromArray` and their `Async` forms, `hipMemcpyToArray`, `hipMemcpyFromArray`,
//! `hipMemcpyHtoA`, `hipMemcpyAtoH`; `crate::pitched` serves the 3-D and driver-style copies that
//! name arrays through [`layout`]).
//!
//! An array is linear device memory underneath: rows of `width × element size` bytes, packed,
//! `height` rows per layer (1 for a 1-D array), `depth` layers. The handle is HIP 5.2's
//! `hipArray` (its fields are public in the header: `data` points at that memory, `desc`,
//! `width` … as given), and only handles this library created are accepted (a table lookup,
//! never a dereference of a value it did not hand out). Copies go through the 2-D copies of
//! `crate::memory` at the array's pitch, in stream order for the `Async` forms.
//!
//! Mipmapped arrays answer `hipErrorNotSupported`: their levels exist only for sampling, which
//! the emulated GPU cannot do (textures, `crate::texture`).

use std::collections::HashMap;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::{LazyLock, Mutex};

use crate::error::{api, status, HipResult, INVALID_HANDLE, INVALID_VALUE};
use crate::global::{global, lock};
use crate::memory::{hipMemcpy, hipMemcpy2D, hipMemcpy2DAsync};
use crate::{put, Handle};

/// `hipChannelFormatDesc`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChannelFormatDesc {
    /// Bits of each channel.
    pub x: c_int,
    /// .
    pub y: c_int,
    /// .
    pub z: c_int,
    /// .
    pub w: c_int,
    /// `hipChannelFormatKind`.
    pub f: c_int,
}

/// HIP 5.2's `hipArray` (`driver_types.h`), whose fields programs may read.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(non_snake_case, missing_docs)]
pub struct Array {
    pub data: *mut c_void,
    pub desc: ChannelFormatDesc,
    pub type_: c_uint,
    pub width: c_uint,
    pub height: c_uint,
    pub depth: c_uint,
    pub Format: c_int,
    pub NumChannels: c_uint,
    pub isDrv: bool,
    pub textureType: c_uint,
}

const _: () = assert!(size_of::<Array>() == 64);

/// `HIP_ARRAY_DESCRIPTOR`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(non_snake_case, missing_docs)]
pub struct ArrayDescriptor {
    pub Width: usize,
    pub Height: usize,
    pub Format: c_int,
    pub NumChannels: c_uint,
}

/// `HIP_ARRAY3D_DESCRIPTOR`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(non_snake_case, missing_docs)]
pub struct Array3DDescriptor {
    pub Width: usize,
    pub Height: usize,
    pub Depth: usize,
    pub Format: c_int,
    pub NumChannels: c_uint,
    pub Flags: c_uint,
}

/// `hipExtent`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Extent {
    /// Elements per row.
    pub width: usize,
    /// Rows.
    pub height: usize,
    /// Layers.
    pub depth: usize,
}

/// `hipChannelFormatKindSigned`, `…Unsigned`, `…Float`.
const KIND_SIGNED: c_int = 0;
const KIND_UNSIGNED: c_int = 1;
const KIND_FLOAT: c_int = 2;

/// `hipArrayLayered | hipArraySurfaceLoadStore | hipArrayCubemap | hipArrayTextureGather`.
const ARRAY_FLAGS: c_uint = 0xf;

/// `hipTextureType1D`, `…2D`, `…3D`.
const TEXTURE_1D: c_uint = 1;
const TEXTURE_2D: c_uint = 2;
const TEXTURE_3D: c_uint = 3;

/// What the library knows of each array it created, by handle.
#[derive(Debug, Clone, Copy)]
struct Info {
    data: u64,
    /// Bytes per row.
    pitch: usize,
    /// Rows per layer.
    rows: usize,
    depth: usize,
    /// Bytes per element.
    element: usize,
}

static ARRAYS: LazyLock<Mutex<HashMap<usize, Info>>> = LazyLock::new(Default::default);

/// Bytes per channel of a `hipArray_Format`, and its channel kind.
fn format(f: c_int) -> Option<(usize, c_int)> {
    Some(match f {
        0x01 => (1, KIND_UNSIGNED),
        0x02 => (2, KIND_UNSIGNED),
        0x03 => (4, KIND_UNSIGNED),
        0x08 => (1, KIND_SIGNED),
        0x09 => (2, KIND_SIGNED),
        0x0a => (4, KIND_SIGNED),
        0x10 => (2, KIND_FLOAT),
        0x20 => (4, KIND_FLOAT),
        _ => return None,
    })
}

/// The format and channel count a channel description names: 1, 2 or 4 channels of one size
/// (8, 16 or 32 bits; floats 16 or 32), filled from `x` on.
fn from_channels(d: &ChannelFormatDesc) -> HipResult<(c_int, c_uint)> {
    let bits = [d.x, d.y, d.z, d.w];
    let n = bits.iter().take_while(|&&b| b != 0).count();
    if !matches!(n, 1 | 2 | 4) || bits[n..].iter().any(|&b| b != 0) || bits[..n].iter().any(|&b| b != bits[0]) {
        return Err(INVALID_VALUE);
    }
    let f = match (d.f, bits[0]) {
        (KIND_UNSIGNED, 8) => 0x01,
        (KIND_UNSIGNED, 16) => 0x02,
        (KIND_UNSIGNED, 32) => 0x03,
        (KIND_SIGNED, 8) => 0x08,
        (KIND_SIGNED, 16) => 0x09,
        (KIND_SIGNED, 32) => 0x0a,
        (KIND_FLOAT, 16) => 0x10,
        (KIND_FLOAT, 32) => 0x20,
        _ => return Err(INVALID_VALUE),
    };
    Ok((f, n as c_uint))
}

/// Creates an array of `width × height × depth` elements of format `f` with `channels`
/// channels (`height`, `depth` 0: fewer dimensions) and writes its handle through `out`.
///
/// # Safety
/// `out` is valid for writes.
unsafe fn create(
    out: *mut *mut Array,
    f: c_int,
    channels: c_uint,
    [width, height, depth]: [usize; 3],
    flags: c_uint,
    driver: bool,
) -> HipResult {
    let (size, kind) = format(f).ok_or(INVALID_VALUE)?;
    if !matches!(channels, 1 | 2 | 4) || width == 0 || (height == 0 && depth != 0) || flags & !ARRAY_FLAGS != 0 {
        return Err(INVALID_VALUE);
    }
    let dim = |v: usize| c_uint::try_from(v).map_err(|_| INVALID_VALUE);
    let pitch = width.checked_mul(size * channels as usize).ok_or(INVALID_VALUE)?;
    let (rows, layers) = (height.max(1), depth.max(1));
    let bytes = pitch.checked_mul(rows).and_then(|b| b.checked_mul(layers)).ok_or(INVALID_VALUE)?;
    let mut data: *mut c_void = std::ptr::null_mut();
    crate::memory::alloc(&mut data, bytes, None)?;
    let bits = (size * 8) as c_int;
    let c = |i: c_uint| if i < channels { bits } else { 0 };
    let array = Box::new(Array {
        data,
        desc: ChannelFormatDesc { x: c(0), y: c(1), z: c(2), w: c(3), f: kind },
        type_: flags,
        width: dim(width)?,
        height: dim(height)?,
        depth: dim(depth)?,
        Format: f,
        NumChannels: channels,
        isDrv: driver,
        textureType: if depth > 0 {
            TEXTURE_3D
        } else if height > 0 {
            TEXTURE_2D
        } else {
            TEXTURE_1D
        },
    });
    let h = Box::into_raw(array);
    lock(&ARRAYS).insert(
        h as usize,
        Info { data: data as usize as u64, pitch, rows, depth: layers, element: size * channels as usize },
    );
    // SAFETY: the caller's contract.
    unsafe { put(out, h) }
}

/// The array `h` names (only handles this library created).
fn info(h: *const Array) -> HipResult<Info> {
    lock(&ARRAYS).get(&(h as usize)).copied().ok_or(INVALID_VALUE)
}

/// Where an array's memory lies, for the pitched copies (`crate::pitched`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Row 0 of layer 0.
    pub(crate) data: u64,
    /// Bytes per row.
    pub(crate) pitch: usize,
    /// Rows per layer.
    pub(crate) rows: usize,
    /// Layers.
    pub(crate) depth: usize,
    /// Bytes per element.
    pub(crate) element: usize,
}

/// The layout of the array `h` names; any other value is `hipErrorInvalidValue`.
pub(crate) fn layout(h: *const c_void) -> HipResult<Layout> {
    let i = info(h.cast())?;
    Ok(Layout { data: i.data, pitch: i.pitch, rows: i.rows, depth: i.depth, element: i.element })
}

/// `hipMallocArray`: a 1-D (`height` 0) or 2-D array of elements `desc` describes.
///
/// # Safety
/// `array` is NULL or valid for writes; `desc` is NULL or valid for reads.
#[no_mangle]
pub unsafe extern "C" fn hipMallocArray(
    array: *mut *mut Array,
    desc: *const ChannelFormatDesc,
    width: usize,
    height: usize,
    flags: c_uint,
) -> i32 {
    api(|| {
        global()?;
        if array.is_null() || desc.is_null() {
            return Err(INVALID_VALUE);
        }
        // SAFETY: the caller's contract; non-null.
        let (f, n) = from_channels(unsafe { &*desc })?;
        // SAFETY: the caller's contract; non-null.
        unsafe { create(array, f, n, [width, height, 0], flags, false) }
    })
}

/// `hipMalloc3DArray`: an array of `extent` elements (`height`, `depth` 0: fewer dimensions).
///
/// # Safety
/// `array` is NULL or valid for writes; `desc` is NULL or valid for reads.
#[no_mangle]
pub unsafe extern "C" fn hipMalloc3DArray(
    array: *mut *mut Array,
    desc: *const ChannelFormatDesc,
    extent: Extent,
    flags: c_uint,
) -> i32 {
    api(|| {
        global()?;
        if array.is_null() || desc.is_null() {
            return Err(INVALID_VALUE);
        }
        // SAFETY: the caller's contract; non-null.
        let (f, n) = from_channels(unsafe { &*desc })?;
        // SAFETY: the caller's contract; non-null.
        unsafe { create(array, f, n, [extent.width, extent.height, extent.depth], flags, false) }
    })
}

/// `hipArrayCreate`: the driver API's 1-D or 2-D array.
///
/// # Safety
/// `array` is NULL or valid for writes; `desc` is NULL or valid for reads.
#[no_mangle]
pub unsafe extern "C" fn hipArrayCreate(array: *mut *mut Array, desc: *const ArrayDescriptor) -> i32 {
    api(|| {
        global()?;
        if array.is_null() || desc.is_null() {
            return Err(INVALID_VALUE);
        }
        // SAFETY: the caller's contract; non-null.
        let d = unsafe { desc.read() };
        // SAFETY: the caller's contract; non-null.
        unsafe { create(array, d.Format, d.NumChannels, [d.Width, d.Height, 0], 0, true) }
    })
}

/// `hipArray3DCreate`: the driver API's array of up to three dimensions.
///
/// # Safety
/// `array` is NULL or valid for writes; `desc` is NULL or valid for reads.
#[no_mangle]
pub unsafe extern "C" fn hipArray3DCreate(array: *mut *mut Array, desc: *const Array3DDescriptor) -> i32 {
    api(|| {
        global()?;
        if array.is_null() || desc.is_null() {
            return Err(INVALID_VALUE);
        }
        // SAFETY: the caller's contract; non-null.
        let d = unsafe { desc.read() };
        // SAFETY: the caller's contract; non-null.
        unsafe { create(array, d.Format, d.NumChannels, [d.Width, d.Height, d.Depth], d.Flags, true) }
    })
}

/// Frees array `h` (its device's work finishes first, as for `hipFree`).
fn destroy(h: *mut Array, unknown: crate::error::Hip) -> HipResult {
    global()?;
    let i = lock(&ARRAYS).get(&(h as usize)).copied().ok_or(unknown)?;
    status(crate::memory::hipFree(i.data as usize as *mut c_void))?;
    lock(&ARRAYS).remove(&(h as usize));
    // SAFETY: `h` came from `Box::into_raw` in `create` and was just removed from the table,
    // so it is freed once.
    drop(unsafe { Box::from_raw(h) });
    Ok(())
}

/// `hipFreeArray`: NULL and handles this library did not create are `hipErrorInvalidValue`.
#[no_mangle]
pub extern "C" fn hipFreeArray(array: *mut Array) -> i32 {
    api(|| destroy(array, INVALID_VALUE))
}

/// `hipArrayDestroy`: the driver API's `hipFreeArray` (an unknown handle is
/// `hipErrorInvalidHandle`).
#[no_mangle]
pub extern "C" fn hipArrayDestroy(array: *mut Array) -> i32 {
    api(|| destroy(array, INVALID_HANDLE))
}

/// `hipGetChannelDesc`: the array's channel description.
///
/// # Safety
/// `desc` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipGetChannelDesc(desc: *mut ChannelFormatDesc, array: *const Array) -> i32 {
    api(|| {
        global()?;
        info(array)?;
        // SAFETY: a handle this library created and has not freed.
        let d = unsafe { (*array).desc };
        // SAFETY: the caller's contract.
        unsafe { put(desc, d) }
    })
}

/// `hipCreateChannelDesc`: the channel description of the arguments (nothing is checked, as
/// in HIP).
#[no_mangle]
pub extern "C" fn hipCreateChannelDesc(x: c_int, y: c_int, z: c_int, w: c_int, f: c_int) -> ChannelFormatDesc {
    ChannelFormatDesc { x, y, z, w, f }
}

/// The address of byte `x` of row `y` (of all the array's rows, layer after layer), after
/// checking that `width` bytes of `height` rows from there lie inside the array.
fn at(i: &Info, x: usize, y: usize, width: usize, height: usize) -> HipResult<u64> {
    let rows = i.rows * i.depth;
    let fits = x.checked_add(width).is_some_and(|e| e <= i.pitch) && y.checked_add(height).is_some_and(|e| e <= rows);
    if !fits {
        return Err(INVALID_VALUE);
    }
    Ok(i.data + (y * i.pitch + x) as u64)
}

/// The address of byte `offset` of row `y` for a linear copy of `count` bytes, after checking
/// that they lie inside the array.
fn at_linear(i: &Info, x: usize, y: usize, count: usize) -> HipResult<u64> {
    let total = i.pitch * i.rows * i.depth;
    let start = y.checked_mul(i.pitch).and_then(|s| s.checked_add(x)).ok_or(INVALID_VALUE)?;
    if x > i.pitch || start.checked_add(count).is_none_or(|e| e > total) {
        return Err(INVALID_VALUE);
    }
    Ok(i.data + start as u64)
}

fn ptr(a: u64) -> *mut c_void {
    a as usize as *mut c_void
}

/// `hipMemcpy2DToArray`: `height` rows of `width` bytes from `src` (rows `spitch` apart) to the
/// array at byte `x` of row `y`.
///
/// # Safety
/// `src` is valid for `height` rows of `spitch` bytes.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpy2DToArray(
    dst: *mut Array,
    x: usize,
    y: usize,
    src: *const c_void,
    spitch: usize,
    width: usize,
    height: usize,
    kind: c_uint,
) -> i32 {
    api(|| {
        global()?;
        let i = info(dst)?;
        let d = at(&i, x, y, width, height)?;
        // SAFETY: forwarded caller contract; `d` is inside the array.
        status(unsafe { hipMemcpy2D(ptr(d), i.pitch, src, spitch, width, height, kind) })
    })
}

/// `hipMemcpy2DToArrayAsync`: in `stream`'s order.
///
/// # Safety
/// `src` is valid for `height` rows of `spitch` bytes until the copy has run.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpy2DToArrayAsync(
    dst: *mut Array,
    x: usize,
    y: usize,
    src: *const c_void,
    spitch: usize,
    width: usize,
    height: usize,
    kind: c_uint,
    stream: Handle,
) -> i32 {
    api(|| {
        global()?;
        let i = info(dst)?;
        let d = at(&i, x, y, width, height)?;
        // SAFETY: forwarded caller contract; `d` is inside the array.
        status(unsafe { hipMemcpy2DAsync(ptr(d), i.pitch, src, spitch, width, height, kind, stream) })
    })
}

/// `hipMemcpy2DFromArray`: `height` rows of `width` bytes of the array from byte `x` of row
/// `y` to `dst` (rows `dpitch` apart).
///
/// # Safety
/// `dst` is valid for `height` rows of `dpitch` bytes.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpy2DFromArray(
    dst: *mut c_void,
    dpitch: usize,
    src: *const Array,
    x: usize,
    y: usize,
    width: usize,
    height: usize,
    kind: c_uint,
) -> i32 {
    api(|| {
        global()?;
        let i = info(src)?;
        let s = at(&i, x, y, width, height)?;
        // SAFETY: forwarded caller contract; `s` is inside the array.
        status(unsafe { hipMemcpy2D(dst, dpitch, ptr(s), i.pitch, width, height, kind) })
    })
}

/// `hipMemcpy2DFromArrayAsync`: in `stream`'s order.
///
/// # Safety
/// `dst` is valid for `height` rows of `dpitch` bytes until the copy has run.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpy2DFromArrayAsync(
    dst: *mut c_void,
    dpitch: usize,
    src: *const Array,
    x: usize,
    y: usize,
    width: usize,
    height: usize,
    kind: c_uint,
    stream: Handle,
) -> i32 {
    api(|| {
        global()?;
        let i = info(src)?;
        let s = at(&i, x, y, width, height)?;
        // SAFETY: forwarded caller contract; `s` is inside the array.
        status(unsafe { hipMemcpy2DAsync(dst, dpitch, ptr(s), i.pitch, width, height, kind, stream) })
    })
}

/// `hipMemcpyToArray` (deprecated): `count` bytes from `src` to the array's memory from byte
/// `x` of row `y` on, running on into the following rows.
///
/// # Safety
/// `src` is valid for reading `count` bytes.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyToArray(
    dst: *mut Array,
    x: usize,
    y: usize,
    src: *const c_void,
    count: usize,
    kind: c_uint,
) -> i32 {
    api(|| {
        global()?;
        let d = at_linear(&info(dst)?, x, y, count)?;
        // SAFETY: forwarded caller contract; the range is inside the array.
        status(unsafe { hipMemcpy(ptr(d), src, count, kind) })
    })
}

/// `hipMemcpyFromArray` (deprecated): `count` bytes of the array's memory from byte `x` of row
/// `y` on to `dst`.
///
/// # Safety
/// `dst` is valid for writing `count` bytes.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyFromArray(
    dst: *mut c_void,
    src: *const Array,
    x: usize,
    y: usize,
    count: usize,
    kind: c_uint,
) -> i32 {
    api(|| {
        global()?;
        let s = at_linear(&info(src)?, x, y, count)?;
        // SAFETY: forwarded caller contract; the range is inside the array.
        status(unsafe { hipMemcpy(dst, ptr(s), count, kind) })
    })
}

/// `hipMemcpyHtoA`: `count` bytes of host memory to the array from byte `offset` on.
///
/// # Safety
/// `src` is valid for reading `count` bytes.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyHtoA(dst: *mut Array, offset: usize, src: *const c_void, count: usize) -> i32 {
    api(|| {
        global()?;
        let i = info(dst)?;
        let d = i.data;
        if offset.checked_add(count).is_none_or(|e| e > i.pitch * i.rows * i.depth) {
            return Err(INVALID_VALUE);
        }
        // SAFETY: forwarded caller contract; the range is inside the array.
        status(unsafe { hipMemcpy(ptr(d + offset as u64), src, count, crate::register::TO_DEVICE) })
    })
}

/// `hipMemcpyAtoH`: `count` bytes of the array from byte `offset` on to host memory.
///
/// # Safety
/// `dst` is valid for writing `count` bytes.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyAtoH(dst: *mut c_void, src: *mut Array, offset: usize, count: usize) -> i32 {
    api(|| {
        global()?;
        let i = info(src)?;
        if offset.checked_add(count).is_none_or(|e| e > i.pitch * i.rows * i.depth) {
            return Err(INVALID_VALUE);
        }
        // SAFETY: forwarded caller contract; the range is inside the array.
        status(unsafe { hipMemcpy(dst, ptr(i.data + offset as u64), count, crate::register::TO_HOST) })
    })
}

not_supported! {
    /// `hipMallocMipmappedArray`: not supported (mipmaps are for sampling).
    fn hipMallocMipmappedArray(array: *mut *mut c_void, desc: *const ChannelFormatDesc, extent: Extent, levels: c_uint, flags: c_uint);
    /// `hipFreeMipmappedArray`: not supported (no mipmapped array exists).
    fn hipFreeMipmappedArray(array: *mut c_void);
    /// `hipGetMipmappedArrayLevel`: not supported (no mipmapped array exists).
    fn hipGetMipmappedArrayLevel(level_array: *mut *mut Array, array: *const c_void, level: c_uint);
    /// `hipMipmappedArrayCreate`: not supported (mipmaps are for sampling).
    fn hipMipmappedArrayCreate(array: *mut *mut c_void, desc: *mut Array3DDescriptor, levels: c_uint);
    /// `hipMipmappedArrayDestroy`: not supported (no mipmapped array exists).
    fn hipMipmappedArrayDestroy(array: *mut c_void);
    /// `hipMipmappedArrayGetLevel`: not supported (no mipmapped array exists).
    fn hipMipmappedArrayGetLevel(level_array: *mut *mut Array, array: *mut c_void, level: c_uint);
    /// `hipMemMapArrayAsync`: not supported (sparse arrays need virtual memory mappings,
    /// `crate::virtual_memory`).
    fn hipMemMapArrayAsync(list: *mut c_void, count: c_uint, stream: Handle);
}
