//! Pitched and 3-D memory: `hipMallocPitch`, `hipMemAllocPitch`, `hipMalloc3D`, copies between
//! pitched regions (`hipMemcpyParam2D` (+`Async`), `hipDrvMemcpy2DUnaligned`, `hipMemcpy3D`
//! (+`Async`), `hipDrvMemcpy3D` (+`Async`)) and fills (`hipMemset2D` / `hipMemset3D` (+`Async`))
//! (docs/hip-semantics.md §6.1).
//!
//! A pitched allocation is linear memory whose rows start every `pitch` bytes, the width rounded
//! up to 256 bytes (HIP's pitch alignment on AMD devices). A pitched copy or fill is a sequence
//! of row copies or fills through `crate::memory` in the stream's order — one operation when the
//! rows are contiguous on every side — so pageable host memory is staged as for `hipMemcpy`, and
//! a capturing stream records the rows. A side may be an array (`crate::array`): its memory at
//! its own pitch and rows, checked to hold the region; `hipMemcpy3D` then counts the extent and
//! the array side's x in elements, as CUDA does.
//!
//! Each synchronous form runs on the null stream or, for the `_spt` forms (`crate::per_thread`),
//! on the calling thread's per-thread stream, through [`crate::memory::synchronously`].

use std::ffi::{c_int, c_uint, c_void};

use aqueduct::StreamHandle;

use crate::array;
use crate::error::{api, HipResult, INVALID_MEMCPY_DIRECTION, INVALID_PITCH, INVALID_VALUE};
use crate::global::{global, Global};
use crate::memory::{alloc, memcpy_on, memset_on, synchronously};
use crate::{put, stream_of, Handle};

/// HIP's pitch alignment on AMD devices, in bytes.
const PITCH_ALIGNMENT: usize = 256;

/// `hipPitchedPtr`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PitchedPtr {
    pub(crate) ptr: *mut c_void,
    pub(crate) pitch: usize,
    pub(crate) xsize: usize,
    pub(crate) ysize: usize,
}

/// `hipExtent`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Extent {
    pub(crate) width: usize,
    pub(crate) height: usize,
    pub(crate) depth: usize,
}

/// `hipPos`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pos {
    pub(crate) x: usize,
    pub(crate) y: usize,
    pub(crate) z: usize,
}

/// `hipMemcpy3DParms` (160 bytes; also a graph copy node's parameters).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Memcpy3DParms {
    pub(crate) src_array: *mut c_void,
    pub(crate) src_pos: Pos,
    pub(crate) src_ptr: PitchedPtr,
    pub(crate) dst_array: *mut c_void,
    pub(crate) dst_pos: Pos,
    pub(crate) dst_ptr: PitchedPtr,
    pub(crate) extent: Extent,
    pub(crate) kind: c_uint,
}

/// `hip_Memcpy2D`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(non_snake_case, missing_docs)]
pub struct Memcpy2D {
    pub srcXInBytes: usize,
    pub srcY: usize,
    pub srcMemoryType: c_int,
    pub srcHost: *const c_void,
    pub srcDevice: *mut c_void,
    pub srcArray: *mut c_void,
    pub srcPitch: usize,
    pub dstXInBytes: usize,
    pub dstY: usize,
    pub dstMemoryType: c_int,
    pub dstHost: *mut c_void,
    pub dstDevice: *mut c_void,
    pub dstArray: *mut c_void,
    pub dstPitch: usize,
    pub WidthInBytes: usize,
    pub Height: usize,
}

/// `HIP_MEMCPY3D`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(non_snake_case, missing_docs)]
pub struct DrvMemcpy3D {
    pub srcXInBytes: c_uint,
    pub srcY: c_uint,
    pub srcZ: c_uint,
    pub srcLOD: c_uint,
    pub srcMemoryType: c_int,
    pub srcHost: *const c_void,
    pub srcDevice: *mut c_void,
    pub srcArray: *mut c_void,
    pub srcPitch: c_uint,
    pub srcHeight: c_uint,
    pub dstXInBytes: c_uint,
    pub dstY: c_uint,
    pub dstZ: c_uint,
    pub dstLOD: c_uint,
    pub dstMemoryType: c_int,
    pub dstHost: *mut c_void,
    pub dstDevice: *mut c_void,
    pub dstArray: *mut c_void,
    pub dstPitch: c_uint,
    pub dstHeight: c_uint,
    pub WidthInBytes: c_uint,
    pub Height: c_uint,
    pub Depth: c_uint,
}

const _: () = assert!(size_of::<Memcpy3DParms>() == 160);
const _: () = assert!(size_of::<Memcpy2D>() == 128);
const _: () = assert!(size_of::<DrvMemcpy3D>() == 128);

/// One side of a pitched copy: where row 0 of slice 0 starts, the row pitch and the rows per
/// slice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Side {
    base: u64,
    pitch: usize,
    rows_per_slice: usize,
}

impl Side {
    fn row(&self, y: usize, z: usize) -> u64 {
        self.base + ((z * self.rows_per_slice + y) * self.pitch) as u64
    }

    /// Whether `width × height × depth` bytes from here are one contiguous range.
    fn contiguous(&self, width: usize, height: usize, depth: usize) -> bool {
        (self.pitch == width || height * depth <= 1) && (depth <= 1 || self.rows_per_slice == height)
    }
}

/// The row copies `(dst, src, bytes)` of a `width × height × depth` copy: one when both sides
/// are contiguous.
fn copy_rows(dst: Side, src: Side, width: usize, height: usize, depth: usize) -> Vec<(u64, u64, u64)> {
    if dst.contiguous(width, height, depth) && src.contiguous(width, height, depth) {
        return vec![(dst.base, src.base, (width * height * depth) as u64)];
    }
    let mut rows = Vec::with_capacity(height * depth);
    for z in 0..depth {
        for y in 0..height {
            rows.push((dst.row(y, z), src.row(y, z), width as u64));
        }
    }
    rows
}

/// The row fills `(dst, bytes)` of a `width × height × depth` fill.
fn fill_rows(dst: Side, width: usize, height: usize, depth: usize) -> Vec<(u64, u64)> {
    if dst.contiguous(width, height, depth) {
        return vec![(dst.base, (width * height * depth) as u64)];
    }
    let mut rows = Vec::with_capacity(height * depth);
    for z in 0..depth {
        for y in 0..height {
            rows.push((dst.row(y, z), width as u64));
        }
    }
    rows
}

/// Where an operation runs: in a stream's order, or complete on return on the null stream or
/// the per-thread stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Order {
    /// `…Async(…, stream)`.
    Async(Handle),
    /// The synchronous form on this stream (`StreamHandle::NULL` or `PER_THREAD`).
    Sync(StreamHandle),
}

/// Runs `rows` of copies in `order`.
fn run_copies(g: &Global, order: Order, rows: &[(u64, u64, u64)]) -> HipResult {
    let copy = |stream: Handle| -> HipResult {
        for &(d, s, n) in rows {
            memcpy_on(g, stream_of(stream), d, s, n)?;
        }
        Ok(())
    };
    match order {
        Order::Async(stream) => copy(stream),
        Order::Sync(stream) => synchronously(g, stream, copy),
    }
}

/// Runs `rows` of byte fills with `value` in `order`.
fn run_fills(g: &Global, order: Order, rows: &[(u64, u64)], value: u8) -> HipResult {
    let fill = |stream: Handle| -> HipResult {
        for &(d, n) in rows {
            memset_on(d as usize as *mut c_void, u32::from(value), 1, n as usize, stream)?;
        }
        Ok(())
    };
    match order {
        Order::Async(stream) => fill(stream),
        Order::Sync(stream) => synchronously(g, stream, fill),
    }
}

/// The checks an operation of nothing still makes: the stream's (or the synchronous ones).
fn nothing(g: &Global, order: Order) -> HipResult {
    match order {
        Order::Async(stream) => Ok(g.rt.memcpy_async(stream_of(stream), 1, 1, 0)?),
        Order::Sync(stream) => synchronously(g, stream, |_| Ok(())),
    }
}

/// A pitched allocation of `height` rows of `width` bytes (times `depth`): the pitch, and the
/// address through `ptr`. Nothing to allocate gives NULL and leaves the pitch as it was.
fn alloc_pitched(ptr: *mut *mut c_void, width: usize, height: usize, depth: usize) -> HipResult<Option<usize>> {
    if width == 0 || height == 0 || depth == 0 {
        // SAFETY: `ptr` was checked non-null by the callers, valid for writes by their contract.
        unsafe { put(ptr, std::ptr::null_mut())? };
        return Ok(None);
    }
    let pitch = width.checked_next_multiple_of(PITCH_ALIGNMENT).ok_or(crate::error::OUT_OF_MEMORY)?;
    let bytes = pitch.checked_mul(height).and_then(|b| b.checked_mul(depth)).ok_or(crate::error::OUT_OF_MEMORY)?;
    alloc(ptr, bytes, None)?;
    Ok(Some(pitch))
}

/// `hipMallocPitch`: `height` rows of `width` bytes, each row starting `*pitch` bytes after the
/// last (the width rounded up to 256); a zero width or height gives NULL.
///
/// # Safety
/// `ptr` and `pitch` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipMallocPitch(ptr: *mut *mut c_void, pitch: *mut usize, width: usize, height: usize) -> i32 {
    api(|| {
        global()?;
        if ptr.is_null() || pitch.is_null() {
            return Err(INVALID_VALUE);
        }
        if let Some(p) = alloc_pitched(ptr, width, height, 1)? {
            // SAFETY: the caller's contract.
            unsafe { put(pitch, p)? };
        }
        Ok(())
    })
}

/// `hipMemAllocPitch`: as `hipMallocPitch` (the element size does not change the pitch, as in
/// HIP).
///
/// # Safety
/// `ptr` and `pitch` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipMemAllocPitch(
    ptr: *mut *mut c_void,
    pitch: *mut usize,
    width: usize,
    height: usize,
    _element_bytes: c_uint,
) -> i32 {
    // SAFETY: forwarded caller contract.
    unsafe { hipMallocPitch(ptr, pitch, width, height) }
}

/// `hipMalloc3D`: `depth` slices of `height` pitched rows; an empty extent gives a NULL pointer
/// of pitch 0.
///
/// # Safety
/// `pitched` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipMalloc3D(pitched: *mut PitchedPtr, extent: Extent) -> i32 {
    api(|| {
        global()?;
        if pitched.is_null() {
            return Err(INVALID_VALUE);
        }
        let mut ptr = std::ptr::null_mut();
        let pitch = alloc_pitched(&mut ptr, extent.width, extent.height, extent.depth)?.unwrap_or(0);
        let p = PitchedPtr { ptr, pitch, xsize: extent.width, ysize: extent.height };
        // SAFETY: the caller's contract.
        unsafe { put(pitched, p) }
    })
}

/// A 2-D or 3-D fill of `width` bytes per row: nothing to fill still makes the stream's checks;
/// NULL and a width past the pitch are `hipErrorInvalidValue`.
fn fill(g: &Global, order: Order, dst: Side, value: c_int, width: usize, height: usize, depth: usize) -> HipResult {
    if width == 0 || height == 0 || depth == 0 {
        return nothing(g, order);
    }
    if dst.base == 0 || width > dst.pitch {
        return Err(INVALID_VALUE);
    }
    let span = dst.row(height - 1, depth - 1) + width as u64 - dst.base;
    // Registered host memory named by its host address is filled at its device address.
    let dst = Side { base: crate::host_register::device_view(dst.base, span), ..dst };
    if !crate::memory::device_reachable(g, dst.base, span) {
        return Err(INVALID_VALUE);
    }
    run_fills(g, order, &fill_rows(dst, width, height, depth), value as u8)
}

/// `hipMemset2D` and its forms.
pub(crate) fn memset_2d(
    order: Order,
    dst: *mut c_void,
    pitch: usize,
    value: c_int,
    width: usize,
    height: usize,
) -> HipResult {
    let g = global()?;
    let side = Side { base: dst as usize as u64, pitch, rows_per_slice: height };
    fill(g, order, side, value, width, height, 1)
}

/// `hipMemset3D` and its forms.
pub(crate) fn memset_3d(order: Order, p: PitchedPtr, value: c_int, extent: Extent) -> HipResult {
    let g = global()?;
    let rows_per_slice = if p.ysize == 0 { extent.height } else { p.ysize };
    let side = Side { base: p.ptr as usize as u64, pitch: p.pitch, rows_per_slice };
    fill(g, order, side, value, extent.width, extent.height, extent.depth)
}

/// `hipMemset2D`: synchronous byte fill of `height` rows of `width` bytes.
///
/// # Safety
/// `dst` is device-reachable memory of `height` rows of `pitch` bytes.
#[no_mangle]
pub unsafe extern "C" fn hipMemset2D(dst: *mut c_void, pitch: usize, value: c_int, width: usize, height: usize) -> i32 {
    api(|| memset_2d(Order::Sync(StreamHandle::NULL), dst, pitch, value, width, height))
}

/// `hipMemset2DAsync`.
///
/// # Safety
/// As `hipMemset2D`, until the fill has run.
#[no_mangle]
pub unsafe extern "C" fn hipMemset2DAsync(
    dst: *mut c_void,
    pitch: usize,
    value: c_int,
    width: usize,
    height: usize,
    stream: Handle,
) -> i32 {
    api(|| memset_2d(Order::Async(stream), dst, pitch, value, width, height))
}

/// `hipMemset3D`: synchronous byte fill of `extent` in a pitched allocation.
///
/// # Safety
/// `p` names device-reachable memory covering `extent`.
#[no_mangle]
pub unsafe extern "C" fn hipMemset3D(p: PitchedPtr, value: c_int, extent: Extent) -> i32 {
    api(|| memset_3d(Order::Sync(StreamHandle::NULL), p, value, extent))
}

/// `hipMemset3DAsync`.
///
/// # Safety
/// As `hipMemset3D`, until the fill has run.
#[no_mangle]
pub unsafe extern "C" fn hipMemset3DAsync(p: PitchedPtr, value: c_int, extent: Extent, stream: Handle) -> i32 {
    api(|| memset_3d(Order::Async(stream), p, value, extent))
}

/// `hipMemoryType` (HIP 5.2): host, device, array, unified.
const MEMORY_HOST: c_int = 0;
const MEMORY_DEVICE: c_int = 1;
const MEMORY_ARRAY: c_int = 2;
const MEMORY_UNIFIED: c_int = 3;

/// The address one side of a driver-style copy names by its memory type, and the layout of the
/// array it names (whose pitch and rows replace the ones given).
fn by_type(
    kind: c_int,
    host: *const c_void,
    device: *mut c_void,
    array: *mut c_void,
) -> HipResult<(u64, Option<array::Layout>)> {
    match kind {
        MEMORY_HOST => Ok((host as usize as u64, None)),
        MEMORY_DEVICE | MEMORY_UNIFIED => Ok((device as usize as u64, None)),
        MEMORY_ARRAY => {
            let l = array::layout(array)?;
            Ok((l.data, Some(l)))
        }
        _ => Err(INVALID_VALUE),
    }
}

/// An array side must hold `[x, x + width)` of rows `[y, y + height)` of layers `[z, z + depth)`.
fn check_array(
    l: &array::Layout,
    x: usize,
    y: usize,
    z: usize,
    (width, height, depth): (usize, usize, usize),
) -> HipResult {
    let fits = |a: usize, n: usize, limit: usize| a.checked_add(n).is_some_and(|e| e <= limit);
    if fits(x, width, l.pitch) && fits(y, height, l.rows) && fits(z, depth, l.depth) {
        Ok(())
    } else {
        Err(INVALID_VALUE)
    }
}

/// A copy of `width × height × depth` bytes between two sides, each at an offset: nothing to
/// copy still makes the stream's checks; NULL sides are `hipErrorInvalidValue`, and so is a
/// row that does not fit its pitch (`pitch_error`).
#[allow(clippy::too_many_arguments)]
fn copy(
    g: &Global,
    order: Order,
    dst: Side,
    dst_x: usize,
    src: Side,
    src_x: usize,
    (width, height, depth): (usize, usize, usize),
    pitch_error: crate::error::Hip,
) -> HipResult {
    if width == 0 || height == 0 || depth == 0 {
        return nothing(g, order);
    }
    if dst.base == 0 || src.base == 0 {
        return Err(INVALID_VALUE);
    }
    if dst_x + width > dst.pitch || src_x + width > src.pitch {
        return Err(pitch_error);
    }
    let shift = |s: Side, x: usize| Side { base: s.base + x as u64, ..s };
    run_copies(g, order, &copy_rows(shift(dst, dst_x), shift(src, src_x), width, height, depth))
}

/// `hipMemcpyParam2D` and its forms.
///
/// # Safety
/// `p` is NULL or a valid `hip_Memcpy2D`.
pub(crate) unsafe fn memcpy_param_2d(order: Order, p: *const Memcpy2D) -> HipResult {
    let g = global()?;
    if p.is_null() {
        return Err(INVALID_VALUE);
    }
    // SAFETY: non-null; the caller vouches for the struct.
    let p = unsafe { &*p };
    if p.WidthInBytes == 0 || p.Height == 0 {
        return nothing(g, order);
    }
    let (src, src_array) = by_type(p.srcMemoryType, p.srcHost, p.srcDevice, p.srcArray)?;
    let (dst, dst_array) = by_type(p.dstMemoryType, p.dstHost.cast_const(), p.dstDevice, p.dstArray)?;
    let region = (p.WidthInBytes, p.Height, 1);
    let side = |base: u64, x: usize, y: usize, pitch: usize, array: Option<array::Layout>| -> HipResult<Side> {
        let pitch = match array {
            Some(l) => {
                check_array(&l, x, y, 0, region)?;
                l.pitch
            }
            None => pitch,
        };
        Ok(Side { base: base + (y * pitch) as u64, pitch, rows_per_slice: p.Height })
    };
    copy(
        g,
        order,
        side(dst, p.dstXInBytes, p.dstY, p.dstPitch, dst_array)?,
        p.dstXInBytes,
        side(src, p.srcXInBytes, p.srcY, p.srcPitch, src_array)?,
        p.srcXInBytes,
        (p.WidthInBytes, p.Height, 1),
        INVALID_VALUE,
    )
}

/// `hipMemcpyParam2D`: the driver-style 2-D copy, synchronous.
///
/// # Safety
/// `p` is NULL or a valid `hip_Memcpy2D` whose regions are valid.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyParam2D(p: *const Memcpy2D) -> i32 {
    // SAFETY: forwarded caller contract.
    api(|| unsafe { memcpy_param_2d(Order::Sync(StreamHandle::NULL), p) })
}

/// `hipMemcpyParam2DAsync`.
///
/// # Safety
/// As `hipMemcpyParam2D`, until the copy has run.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyParam2DAsync(p: *const Memcpy2D, stream: Handle) -> i32 {
    // SAFETY: forwarded caller contract.
    api(|| unsafe { memcpy_param_2d(Order::Async(stream), p) })
}

/// `hipDrvMemcpy2DUnaligned`: as `hipMemcpyParam2D` (no alignment is needed here).
///
/// # Safety
/// As `hipMemcpyParam2D`.
#[no_mangle]
pub unsafe extern "C" fn hipDrvMemcpy2DUnaligned(p: *const Memcpy2D) -> i32 {
    // SAFETY: forwarded caller contract.
    unsafe { hipMemcpyParam2D(p) }
}

/// `hipMemcpy3D` and its forms: pitched memory or arrays on either side (with an array, the
/// extent and the array side's x count elements); a pitch shorter than the row is
/// `hipErrorInvalidPitchValue`, a region past an array `hipErrorInvalidValue`.
///
/// # Safety
/// `p` is NULL or a valid `hipMemcpy3DParms`.
pub(crate) unsafe fn memcpy_3d(order: Order, p: *const Memcpy3DParms) -> HipResult {
    let g = global()?;
    if p.is_null() {
        return Err(INVALID_VALUE);
    }
    // SAFETY: non-null; the caller vouches for the struct.
    let p = unsafe { &*p };
    let array_of = |a: *mut c_void| if a.is_null() { Ok(None) } else { array::layout(a).map(Some) };
    let (src_array, dst_array) = (array_of(p.src_array)?, array_of(p.dst_array)?);
    if (src_array.is_none() && p.src_ptr.ptr.is_null()) || (dst_array.is_none() && p.dst_ptr.ptr.is_null()) {
        return Err(INVALID_VALUE);
    }
    if p.kind > 4 {
        return Err(INVALID_MEMCPY_DIRECTION);
    }
    let e = p.extent;
    // With an array taking part, the extent counts its elements.
    let element = src_array.or(dst_array).map_or(1, |l| l.element);
    let region = (e.width.checked_mul(element).ok_or(INVALID_VALUE)?, e.height, e.depth);
    let side = |ptr: PitchedPtr, pos: Pos, array: Option<array::Layout>| -> HipResult<(Side, usize)> {
        if let Some(l) = array {
            let x = pos.x.checked_mul(l.element).ok_or(INVALID_VALUE)?;
            check_array(&l, x, pos.y, pos.z, region)?;
            let base = l.data + ((pos.z * l.rows + pos.y) * l.pitch) as u64;
            return Ok((Side { base, pitch: l.pitch, rows_per_slice: l.rows }, x));
        }
        let rows_per_slice = if ptr.ysize == 0 { e.height } else { ptr.ysize };
        let base = ptr.ptr as usize as u64 + ((pos.z * rows_per_slice + pos.y) * ptr.pitch) as u64;
        Ok((Side { base, pitch: ptr.pitch, rows_per_slice }, pos.x))
    };
    let (dst, dst_x) = side(p.dst_ptr, p.dst_pos, dst_array)?;
    let (src, src_x) = side(p.src_ptr, p.src_pos, src_array)?;
    copy(g, order, dst, dst_x, src, src_x, region, INVALID_PITCH)
}

/// `hipMemcpy3D`: synchronous.
///
/// # Safety
/// `p` is NULL or a valid `hipMemcpy3DParms` whose regions are valid.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpy3D(p: *const Memcpy3DParms) -> i32 {
    // SAFETY: forwarded caller contract.
    api(|| unsafe { memcpy_3d(Order::Sync(StreamHandle::NULL), p) })
}

/// `hipMemcpy3DAsync`.
///
/// # Safety
/// As `hipMemcpy3D`, until the copy has run.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpy3DAsync(p: *const Memcpy3DParms, stream: Handle) -> i32 {
    // SAFETY: forwarded caller contract.
    api(|| unsafe { memcpy_3d(Order::Async(stream), p) })
}

/// `hipDrvMemcpy3D` and its async form.
///
/// # Safety
/// `p` is NULL or a valid `HIP_MEMCPY3D`.
unsafe fn drv_memcpy_3d(order: Order, p: *const DrvMemcpy3D) -> HipResult {
    let g = global()?;
    if p.is_null() {
        return Err(INVALID_VALUE);
    }
    // SAFETY: non-null; the caller vouches for the struct.
    let p = unsafe { &*p };
    let (w, h, d) = (p.WidthInBytes as usize, p.Height as usize, p.Depth as usize);
    if w == 0 || h == 0 || d == 0 {
        return nothing(g, order);
    }
    let (src, src_array) = by_type(p.srcMemoryType, p.srcHost, p.srcDevice, p.srcArray)?;
    let (dst, dst_array) = by_type(p.dstMemoryType, p.dstHost.cast_const(), p.dstDevice, p.dstArray)?;
    let side =
        |base: u64, x: c_uint, y: c_uint, z: c_uint, pitch: c_uint, rows: c_uint, array: Option<array::Layout>| {
            let (x, y, z) = (x as usize, y as usize, z as usize);
            let (pitch, rows) = match array {
                Some(l) => {
                    check_array(&l, x, y, z, (w, h, d))?;
                    (l.pitch, l.rows)
                }
                None => (pitch as usize, if rows == 0 { h } else { rows as usize }),
            };
            Ok::<_, crate::error::Hip>(Side {
                base: base + ((z * rows + y) * pitch) as u64,
                pitch,
                rows_per_slice: rows,
            })
        };
    copy(
        g,
        order,
        side(dst, p.dstXInBytes, p.dstY, p.dstZ, p.dstPitch, p.dstHeight, dst_array)?,
        p.dstXInBytes as usize,
        side(src, p.srcXInBytes, p.srcY, p.srcZ, p.srcPitch, p.srcHeight, src_array)?,
        p.srcXInBytes as usize,
        (w, h, d),
        INVALID_VALUE,
    )
}

/// `hipDrvMemcpy3D`: the driver-style 3-D copy, synchronous.
///
/// # Safety
/// `p` is NULL or a valid `HIP_MEMCPY3D` whose regions are valid.
#[no_mangle]
pub unsafe extern "C" fn hipDrvMemcpy3D(p: *const DrvMemcpy3D) -> i32 {
    // SAFETY: forwarded caller contract.
    api(|| unsafe { drv_memcpy_3d(Order::Sync(StreamHandle::NULL), p) })
}

/// `hipDrvMemcpy3DAsync`.
///
/// # Safety
/// As `hipDrvMemcpy3D`, until the copy has run.
#[no_mangle]
pub unsafe extern "C" fn hipDrvMemcpy3DAsync(p: *const DrvMemcpy3D, stream: Handle) -> i32 {
    // SAFETY: forwarded caller contract.
    api(|| unsafe { drv_memcpy_3d(Order::Async(stream), p) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_hip_5_2() {
        assert_eq!(std::mem::offset_of!(Memcpy2D, dstXInBytes), 56);
        assert_eq!(std::mem::offset_of!(Memcpy2D, WidthInBytes), 112);
        assert_eq!(std::mem::offset_of!(DrvMemcpy3D, srcHost), 24);
        assert_eq!(std::mem::offset_of!(DrvMemcpy3D, dstXInBytes), 56);
        assert_eq!(std::mem::offset_of!(DrvMemcpy3D, WidthInBytes), 112);
        assert_eq!(std::mem::offset_of!(Memcpy3DParms, extent), 128);
    }

    #[test]
    fn rows_merge_when_contiguous_and_split_otherwise() {
        let side = |base, pitch, rows_per_slice| Side { base, pitch, rows_per_slice };
        assert_eq!(copy_rows(side(0x1000, 16, 4), side(0x2000, 16, 4), 16, 4, 2), vec![(0x1000, 0x2000, 128)]);
        let rows = copy_rows(side(0x1000, 256, 4), side(0x2000, 16, 4), 16, 4, 2);
        assert_eq!(rows.len(), 8);
        assert_eq!(rows[5], (0x1000 + 5 * 256, 0x2000 + 5 * 16, 16));
        assert_eq!(fill_rows(side(0x1000, 256, 10), 100, 1, 1), vec![(0x1000, 100)]);
    }
}
