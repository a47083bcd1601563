//! What a kernel uses and what it allows: `hipFuncGetAttributes` / `hipFuncGetAttribute`,
//! `hipFuncSetAttribute`, `hipFuncSetCacheConfig`, `hipFuncSetSharedMemConfig`, and HIP's
//! occupancy calculator for kernel handles (`hipOccupancy*`) and module functions
//! (`hipModuleOccupancy*`).
//!
//! Static LDS and scratch come from the kernel descriptor, registers and the block limit from
//! the code object's metadata (docs/code-objects.md §6). `hipFuncSetAttribute` records the two
//! attributes HIP 5.2 defines (the dynamic LDS a launch may ask for, the shared-memory carveout)
//! per kernel, and `hipFuncGetAttributes` answers what was set. The cache and bank
//! configurations are hints AMD devices ignore: validated and accepted, as HIP does.

use std::collections::HashMap;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::{Arc, LazyLock, Mutex};

use crate::code_objects::FunctionEntry;
use crate::error::{api, HipResult, INVALID_DEVICE_FUNCTION, INVALID_VALUE};
use crate::global::{global, lock, Global};
use crate::launch::resolve;
use crate::module::module_function_of;
use crate::properties::{properties, DeviceProp};
use crate::put;
use crate::register::function_on;

/// `hipFuncAttributes`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[allow(non_snake_case, missing_docs)]
pub struct FuncAttributes {
    pub binaryVersion: c_int,
    pub cacheModeCA: c_int,
    pub constSizeBytes: usize,
    pub localSizeBytes: usize,
    pub maxDynamicSharedSizeBytes: c_int,
    pub maxThreadsPerBlock: c_int,
    pub numRegs: c_int,
    pub preferredShmemCarveout: c_int,
    pub ptxVersion: c_int,
    pub sharedSizeBytes: usize,
}

const _: () = assert!(size_of::<FuncAttributes>() == 56);

/// What `hipFuncSetAttribute` set for a kernel (by kernel object): the dynamic LDS limit and
/// the carveout.
static SETTINGS: LazyLock<Mutex<HashMap<u64, (c_int, c_int)>>> = LazyLock::new(Default::default);

/// `hipFuncAttribute` values HIP 5.2 defines.
const MAX_DYNAMIC_SHARED: c_int = 8;
const PREFERRED_CARVEOUT: c_int = 9;

/// The function behind kernel handle `func` on the calling thread's device, and its device's
/// properties.
fn function(g: &Global, func: *const c_void) -> HipResult<(Arc<FunctionEntry>, Arc<DeviceProp>)> {
    let device = g.rt.device()?;
    let f = function_on(g, func as usize, device)?;
    Ok((f, properties(g, device)?))
}

/// The module function `hipFunction_t` `f` names and its device's properties; anything else is
/// `hipErrorInvalidHandle`.
fn module_fn(g: &Global, f: *mut c_void) -> HipResult<(FunctionEntry, Arc<DeviceProp>)> {
    let f = module_function_of(g, f)?;
    let device = g.rt.device()?;
    Ok((f, properties(g, device)?))
}

/// `hipFuncAttributes` of `f` on a device with properties `p`, with what was set for it.
pub(crate) fn attributes(f: &FunctionEntry, p: &DeviceProp) -> FuncAttributes {
    let version = p.major * 10 + p.minor;
    let r = f.resources;
    let (dynamic, carveout) = lock(&SETTINGS)
        .get(&f.object)
        .copied()
        .unwrap_or((c_int::try_from(p.sharedMemPerBlock.saturating_sub(f.group as usize)).unwrap_or(0), 0));
    FuncAttributes {
        binaryVersion: version,
        cacheModeCA: 0,
        constSizeBytes: 0,
        localSizeBytes: f.private as usize,
        maxDynamicSharedSizeBytes: dynamic,
        maxThreadsPerBlock: r.map_or(p.maxThreadsPerBlock, |r| r.max_threads as c_int),
        numRegs: r.map_or(0, |r| r.vgprs as c_int),
        preferredShmemCarveout: carveout,
        ptxVersion: version,
        sharedSizeBytes: f.group as usize,
    }
}

/// `hipFuncGetAttributes` of a kernel handle registered with `__hipRegisterFunction`: static
/// LDS and scratch from the kernel descriptor, registers and the block limit from the metadata;
/// an unknown handle is `hipErrorInvalidDeviceFunction`.
///
/// # Safety
/// `attr` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipFuncGetAttributes(attr: *mut FuncAttributes, func: *const c_void) -> i32 {
    api(|| {
        let g = global()?;
        if attr.is_null() {
            return Err(INVALID_VALUE);
        }
        let (f, p) = function(g, func).map_err(|_| INVALID_DEVICE_FUNCTION)?;
        // SAFETY: the caller's contract.
        unsafe { put(attr, attributes(&f, &p)) }
    })
}

/// `hipFuncGetAttribute`: one `hipFunction_attribute` of a module function (`hipFunction_t`);
/// an unknown attribute is `hipErrorInvalidValue`, a handle that is no function
/// `hipErrorInvalidHandle`.
///
/// # Safety
/// `value` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipFuncGetAttribute(value: *mut c_int, attr: c_int, function: *mut c_void) -> i32 {
    api(|| {
        let g = global()?;
        if value.is_null() {
            return Err(INVALID_VALUE);
        }
        let (f, p) = module_fn(g, function)?;
        let a = attributes(&f, &p);
        let int = |v: usize| c_int::try_from(v).unwrap_or(c_int::MAX);
        let v = match attr {
            0 => a.maxThreadsPerBlock,
            1 => int(a.sharedSizeBytes),
            2 => int(a.constSizeBytes),
            3 => int(a.localSizeBytes),
            4 => a.numRegs,
            5 => a.ptxVersion,
            6 => a.binaryVersion,
            7 => a.cacheModeCA,
            8 => a.maxDynamicSharedSizeBytes,
            9 => a.preferredShmemCarveout,
            _ => return Err(INVALID_VALUE),
        };
        // SAFETY: the caller's contract.
        unsafe { put(value, v) }
    })
}

/// The function behind any kernel handle HIP takes as `const void*` (a host kernel, a
/// registered kernel, a `hipFunction_t`) on the calling thread's device.
fn any_function(g: &Global, func: *const c_void) -> HipResult<(FunctionEntry, Arc<DeviceProp>)> {
    let device = g.rt.device()?;
    let f = resolve(g, func, device)?;
    Ok((f, properties(g, device)?))
}

/// `hipFuncSetAttribute`: `hipFuncAttributeMaxDynamicSharedMemorySize` (0 up to the LDS a
/// block has beside the kernel's static LDS) or `hipFuncAttributePreferredSharedMemoryCarveout`
/// (-1 for the default, or a percentage); other attributes and values are
/// `hipErrorInvalidValue`, an unknown kernel `hipErrorInvalidDeviceFunction`.
#[no_mangle]
pub extern "C" fn hipFuncSetAttribute(func: *const c_void, attr: c_int, value: c_int) -> i32 {
    api(|| {
        let g = global()?;
        let (f, p) = any_function(g, func)?;
        let current = attributes(&f, &p);
        let limit = p.sharedMemPerBlock.saturating_sub(f.group as usize);
        let setting = match attr {
            MAX_DYNAMIC_SHARED if value >= 0 && value as usize <= limit => (value, current.preferredShmemCarveout),
            PREFERRED_CARVEOUT if (-1..=100).contains(&value) => (current.maxDynamicSharedSizeBytes, value),
            _ => return Err(INVALID_VALUE),
        };
        lock(&SETTINGS).insert(f.object, setting);
        Ok(())
    })
}

/// `hipFuncSetCacheConfig`: a `hipFuncCache_t` (0–3) for a known kernel; a hint AMD devices
/// ignore.
#[no_mangle]
pub extern "C" fn hipFuncSetCacheConfig(func: *const c_void, config: c_int) -> i32 {
    api(|| {
        let g = global()?;
        any_function(g, func)?;
        if !(0..=3).contains(&config) {
            return Err(INVALID_VALUE);
        }
        Ok(())
    })
}

/// `hipFuncSetSharedMemConfig`: a `hipSharedMemConfig` (0–2) for a known kernel; a hint AMD
/// devices ignore (their LDS banks are four bytes wide).
#[no_mangle]
pub extern "C" fn hipFuncSetSharedMemConfig(func: *const c_void, config: c_int) -> i32 {
    api(|| {
        let g = global()?;
        any_function(g, func)?;
        if !(0..=2).contains(&config) {
            return Err(INVALID_VALUE);
        }
        Ok(())
    })
}

/// HIP's occupancy model (clr's `ihipOccupancyMaxActiveBlocksPerMultiprocessor`): waves per
/// SIMD limited by the VGPRs and SGPRs a wave uses, blocks per CU by LDS. Returns (blocks per
/// CU, blocks per grid, best block size) for `block` threads, or — with `potential` — for the
/// block size that fills a CU (up to `block`, or up to 1024 if `block` is out of range).
pub(crate) fn occupancy(
    f: &FunctionEntry,
    p: &DeviceProp,
    block: c_int,
    dynamic_lds: usize,
    potential: bool,
) -> HipResult<[c_int; 3]> {
    // A block over the kernel's own limit (`.max_flat_workgroup_size`) cannot launch.
    let kernel_max = f.resources.map_or(0, |r| r.max_threads as c_int);
    let max_block = if kernel_max > 0 { p.maxThreadsPerBlock.min(kernel_max) } else { p.maxThreadsPerBlock };
    let mut block = block;
    if potential {
        if block <= 0 || block > max_block {
            block = max_block;
        }
    } else if block <= 0 {
        return Err(INVALID_VALUE);
    } else if block > max_block {
        return Ok([0, 0, 0]);
    }
    let gfx_major = p.major as usize;
    let waves_per_simd: usize = if gfx_major <= 9 { 8 } else { 16 };
    let (max_vgprs, granule): (usize, usize) = match (gfx_major, p.minor, p.gcnArch) {
        (9, 0, 910) => (512, 8),
        (0..=9, _, _) => (256, 4),
        _ => (1024, 8),
    };
    let align = |v: usize, a: usize| v.div_ceil(a.max(1)) * a.max(1);
    let r = f.resources;
    let (vgprs, sgprs) = r.map_or((0, 0), |r| (r.vgprs as usize, r.sgprs as usize));
    let wave =
        r.map_or(p.warpSize as usize, |r| if r.wavefront == 0 { p.warpSize as usize } else { r.wavefront as usize });
    let mut gpr_waves = waves_per_simd;
    if sgprs > 0 {
        let vgpr_waves = max_vgprs / align(vgprs, granule).max(granule);
        let max_sgprs = if gfx_major < 10 { 800 } else { usize::MAX };
        gpr_waves = vgpr_waves.min(max_sgprs / align(sgprs, 16));
    }
    let simd_per_cu = (p.maxThreadsPerMultiProcessor as usize / wave.max(1) / waves_per_simd).max(1);
    let alu_threads = simd_per_cu * waves_per_simd.min(gpr_waves) * wave;
    let lds_used = f.group as usize + dynamic_lds;
    let lds_blocks = p.sharedMemPerBlock.checked_div(lds_used).unwrap_or(usize::MAX);
    let per_cu = (alu_threads / align(block as usize, wave)).min(lds_blocks);
    let best = alu_threads.min(align(block as usize, wave)).max(1);
    let best_per_cu = (alu_threads / best).min(lds_blocks);
    let int = |v: usize| c_int::try_from(v).unwrap_or(c_int::MAX);
    Ok([int(per_cu), int(p.multiProcessorCount as usize * best_per_cu), int(best)])
}

/// `hipOccupancyMaxPotentialBlockSize`: the block size (up to `block_size_limit`) that fills a
/// CU and the grid that fills the device with it. Unlike HIP, which offers up to 1024 threads,
/// the block stays within the kernel's `.max_flat_workgroup_size`, the largest that launches.
///
/// # Safety
/// `grid_size` and `block_size` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipOccupancyMaxPotentialBlockSize(
    grid_size: *mut c_int,
    block_size: *mut c_int,
    func: *const c_void,
    dynamic_lds: usize,
    block_size_limit: c_int,
) -> i32 {
    api(|| {
        let g = global()?;
        if grid_size.is_null() || block_size.is_null() {
            return Err(INVALID_VALUE);
        }
        let (f, p) = function(g, func).map_err(|_| INVALID_DEVICE_FUNCTION)?;
        let [_, grid, best] = occupancy(&f, &p, block_size_limit, dynamic_lds, true)?;
        // SAFETY: the caller's contract; both are non-null.
        unsafe {
            put(block_size, best)?;
            put(grid_size, grid)
        }
    })
}

/// `hipOccupancyMaxActiveBlocksPerMultiprocessor`.
///
/// # Safety
/// `blocks` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipOccupancyMaxActiveBlocksPerMultiprocessor(
    blocks: *mut c_int,
    func: *const c_void,
    block_size: c_int,
    dynamic_lds: usize,
) -> i32 {
    api(|| {
        let g = global()?;
        if blocks.is_null() {
            return Err(INVALID_VALUE);
        }
        let (f, p) = function(g, func).map_err(|_| INVALID_DEVICE_FUNCTION)?;
        let [per_cu, _, _] = occupancy(&f, &p, block_size, dynamic_lds, false)?;
        // SAFETY: the caller's contract.
        unsafe { put(blocks, per_cu) }
    })
}

/// `hipOccupancyMaxActiveBlocksPerMultiprocessorWithFlags`: `flags` is `hipOccupancyDefault`
/// (0) or `hipOccupancyDisableCachingOverride` (1).
///
/// # Safety
/// `blocks` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    blocks: *mut c_int,
    func: *const c_void,
    block_size: c_int,
    dynamic_lds: usize,
    flags: c_uint,
) -> i32 {
    if flags > 1 {
        return api(|| {
            global()?;
            Err(INVALID_VALUE)
        });
    }
    // SAFETY: forwarded caller contract.
    unsafe { hipOccupancyMaxActiveBlocksPerMultiprocessor(blocks, func, block_size, dynamic_lds) }
}

/// `hipOccupancyDefault` / `hipOccupancyDisableCachingOverride`: the occupancy flags.
fn check_occupancy_flags(flags: c_uint) -> HipResult {
    if flags > 1 {
        return Err(INVALID_VALUE);
    }
    Ok(())
}

/// `hipModuleOccupancyMaxPotentialBlockSize`: as `hipOccupancyMaxPotentialBlockSize` for a
/// module function.
///
/// # Safety
/// `grid_size` and `block_size` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipModuleOccupancyMaxPotentialBlockSize(
    grid_size: *mut c_int,
    block_size: *mut c_int,
    function: *mut c_void,
    dynamic_lds: usize,
    block_size_limit: c_int,
) -> i32 {
    // SAFETY: forwarded caller contract.
    unsafe {
        hipModuleOccupancyMaxPotentialBlockSizeWithFlags(
            grid_size,
            block_size,
            function,
            dynamic_lds,
            block_size_limit,
            0,
        )
    }
}

/// `hipModuleOccupancyMaxPotentialBlockSizeWithFlags`.
///
/// # Safety
/// `grid_size` and `block_size` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipModuleOccupancyMaxPotentialBlockSizeWithFlags(
    grid_size: *mut c_int,
    block_size: *mut c_int,
    function: *mut c_void,
    dynamic_lds: usize,
    block_size_limit: c_int,
    flags: c_uint,
) -> i32 {
    api(|| {
        let g = global()?;
        if grid_size.is_null() || block_size.is_null() {
            return Err(INVALID_VALUE);
        }
        check_occupancy_flags(flags)?;
        let (f, p) = module_fn(g, function)?;
        let [_, grid, best] = occupancy(&f, &p, block_size_limit, dynamic_lds, true)?;
        // SAFETY: the caller's contract; both are non-null.
        unsafe {
            put(block_size, best)?;
            put(grid_size, grid)
        }
    })
}

/// `hipModuleOccupancyMaxActiveBlocksPerMultiprocessor`.
///
/// # Safety
/// `blocks` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(
    blocks: *mut c_int,
    function: *mut c_void,
    block_size: c_int,
    dynamic_lds: usize,
) -> i32 {
    // SAFETY: forwarded caller contract.
    unsafe { hipModuleOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(blocks, function, block_size, dynamic_lds, 0) }
}

/// `hipModuleOccupancyMaxActiveBlocksPerMultiprocessorWithFlags`.
///
/// # Safety
/// `blocks` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipModuleOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    blocks: *mut c_int,
    function: *mut c_void,
    block_size: c_int,
    dynamic_lds: usize,
    flags: c_uint,
) -> i32 {
    api(|| {
        let g = global()?;
        if blocks.is_null() {
            return Err(INVALID_VALUE);
        }
        check_occupancy_flags(flags)?;
        let (f, p) = module_fn(g, function)?;
        let [per_cu, _, _] = occupancy(&f, &p, block_size, dynamic_lds, false)?;
        // SAFETY: the caller's contract.
        unsafe { put(blocks, per_cu) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::offset_of;

    #[test]
    fn func_attributes_have_hip_5_2_offsets() {
        assert_eq!(offset_of!(FuncAttributes, sharedSizeBytes), 48);
    }

    fn gfx90a() -> DeviceProp {
        // SAFETY: all-zero is a valid DeviceProp (integers, arrays and NULL pointers).
        let mut p: DeviceProp = unsafe { std::mem::zeroed() };
        p.major = 9;
        p.gcnArch = 910;
        p.warpSize = 64;
        p.maxThreadsPerBlock = 1024;
        p.maxThreadsPerMultiProcessor = 2048;
        p.sharedMemPerBlock = 65536;
        p.multiProcessorCount = 104;
        p
    }

    fn kernel(vgprs: u32, sgprs: u32, group: u32) -> FunctionEntry {
        FunctionEntry {
            name: Arc::from("kernel"),
            module: 0,
            object: 0,
            group,
            private: 0,
            dynamic_stack: false,
            kernarg_size: 0,
            args: None,
            hidden: Arc::from([]),
            resources: Some(crate::code_objects::Resources { vgprs, sgprs, max_threads: 1024, wavefront: 64 }),
        }
    }

    #[test]
    fn occupancy_follows_registers_and_lds() {
        let p = gfx90a();
        // Few registers: 4 SIMDs × 8 waves × 64 = 2048 threads per CU.
        assert_eq!(occupancy(&kernel(8, 16, 0), &p, 0, 0, true), Ok([2, 208, 1024]));
        assert_eq!(occupancy(&kernel(8, 16, 0), &p, 256, 0, false), Ok([8, 832, 256]));
        // 128 VGPRs: 512 / 128 = 4 waves per SIMD → 1024 threads per CU.
        assert_eq!(occupancy(&kernel(128, 16, 0), &p, 1024, 0, true), Ok([1, 104, 1024]));
        // 40 KiB of LDS per block: one block per CU.
        assert_eq!(occupancy(&kernel(8, 16, 40 << 10), &p, 256, 0, false), Ok([1, 104, 256]));
        assert_eq!(occupancy(&kernel(8, 16, 0), &p, 0, 0, false), Err(INVALID_VALUE));
        assert_eq!(occupancy(&kernel(8, 16, 0), &p, 2048, 0, false), Ok([0, 0, 0]));
    }
}
