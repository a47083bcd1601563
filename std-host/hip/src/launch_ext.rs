//! Extended and cooperative launches: `hipExtLaunchKernel` and the module forms
//! `hipExtModuleLaunchKernel` / `hipHccModuleLaunchKernel` (a launch between two events),
//! `hipLaunchCooperativeKernel`, `hipLaunchCooperativeKernelMultiDevice` and
//! `hipExtLaunchMultiKernelMultiDevice`, and newer HIP's `hipModuleLaunchCooperativeKernel`,
//! `hipModuleLaunchCooperativeKernelMultiDevice` and `hipLaunchKernelExC` (`aqueduct_hip.h`) (docs/hip-semantics.md §10).
//!
//! A cooperative launch may only ask for a grid whose work-groups can all be resident at once:
//! HIP's occupancy for the block size and dynamic LDS, times the device's CUs; more is
//! `hipErrorCooperativeLaunchTooLarge`. A grid that fits is launched as any other. The
//! multi-device forms launch one kernel per entry, each on its stream, on distinct devices;
//! unless the flags say otherwise every launch first waits for the work already queued on all
//! the entries' streams (`hipCooperativeLaunchMultiDeviceNoPreSync` clears that), and all the
//! streams wait for all the launches afterwards (`…NoPostSync`), through events.
//!
//! `hip_impl::hipLaunchKernelGGLImpl` launches with a ready argument buffer, as HIP 5.2's old
//! header path calls it. `hipExtModuleLaunchKernel` and `hipHccModuleLaunchKernel` take the grid in work-items, as
//! HIP's do (the last work-group of a dimension may be partial). Debian's HIP 5.2 exports both
//! under their C++ names, which is where they are found here too.

use std::ffi::{c_int, c_uint, c_void};

use crate::error::{api, status, Hip, HipResult, INVALID_CONFIGURATION, INVALID_DEVICE, INVALID_VALUE};
use crate::function::occupancy;
use crate::global::{global, Global};
use crate::launch::{geometry, hipLaunchKernel, launch_any, launch_function, launch_function_items, resolve, Config};
use crate::module::module_function_of;
use crate::properties::properties;
use crate::stream::{hipEventCreateWithFlags, hipEventDestroy, hipEventRecord, hipStreamWaitEvent};
use crate::stream_attr::LaunchConfig;
use crate::{stream_of, Dim3, Handle};

/// `hipErrorCooperativeLaunchTooLarge`.
const COOPERATIVE_LAUNCH_TOO_LARGE: Hip = Hip(720);

/// `hipCooperativeLaunchMultiDeviceNoPreSync` / `…NoPostSync`.
const NO_PRE_SYNC: c_uint = 0x1;
const NO_POST_SYNC: c_uint = 0x2;

/// `hipEventDisableTiming`.
const EVENT_DISABLE_TIMING: c_uint = 0x2;

/// `hipLaunchParams`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct LaunchParams {
    /// The kernel handle.
    pub func: *mut c_void,
    /// Blocks.
    pub grid: Dim3,
    /// Threads per block.
    pub block: Dim3,
    /// One pointer per argument.
    pub args: *mut *mut c_void,
    /// Dynamic LDS bytes.
    pub shared_mem: usize,
    /// The stream.
    pub stream: Handle,
}

const _: () = assert!(size_of::<LaunchParams>() == 56);

/// Records `event` on `stream` if it is not NULL.
fn record(event: Handle, stream: Handle) -> HipResult {
    if event.is_null() {
        return Ok(());
    }
    status(hipEventRecord(event, stream))
}

/// `hipExtLaunchKernel`: `hipLaunchKernel` between `start` and `stop` (each recorded on
/// `stream` when not NULL). `flags` (`hipExtAnyOrderLaunch`) allows reordering, which a stream
/// here never does.
///
/// # Safety
/// As `hipLaunchKernel`.
#[no_mangle]
pub unsafe extern "C" fn hipExtLaunchKernel(
    function: *const c_void,
    grid: Dim3,
    block: Dim3,
    args: *mut *mut c_void,
    shared_mem: usize,
    stream: Handle,
    start: Handle,
    stop: Handle,
    _flags: c_int,
) -> i32 {
    api(|| {
        global()?;
        record(start, stream)?;
        // SAFETY: forwarded caller contract.
        status(unsafe { hipLaunchKernel(function, grid, block, args, shared_mem, stream) })?;
        record(stop, stream)
    })
}

/// The module launch of `hipExtModuleLaunchKernel`: a grid of `global` work-items in
/// work-groups of `local`, between two events.
///
/// # Safety
/// As `hipModuleLaunchKernel`'s `params` and `extra`.
#[allow(clippy::too_many_arguments)]
unsafe fn ext_module_launch(
    function: Handle,
    global_size: [c_uint; 3],
    local: [c_uint; 3],
    shared_mem: usize,
    stream: Handle,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
    start: Handle,
    stop: Handle,
) -> HipResult {
    let g = global()?;
    let f = module_function_of(g, function)?;
    let wg = |v: c_uint| u16::try_from(v).map_err(|_| INVALID_CONFIGURATION);
    let workgroup = [wg(local[0])?, wg(local[1])?, wg(local[2])?];
    let shared_mem = u32::try_from(shared_mem).map_err(|_| INVALID_VALUE)?;
    record(start, stream)?;
    // SAFETY: the caller's contract.
    unsafe { launch_function_items(g, &f, global_size, workgroup, shared_mem, stream, params, extra) }?;
    record(stop, stream)
}

/// `hipExtModuleLaunchKernel` (exported under its C++ name, as Debian's HIP 5.2 does).
///
/// # Safety
/// As `hipModuleLaunchKernel`.
#[export_name = "_Z24hipExtModuleLaunchKernelP18ihipModuleSymbol_tjjjjjjmP12ihipStream_tPPvS4_P11ihipEvent_tS6_j"]
#[allow(clippy::too_many_arguments, non_snake_case)]
pub unsafe extern "C" fn hipExtModuleLaunchKernel(
    function: Handle,
    global_x: c_uint,
    global_y: c_uint,
    global_z: c_uint,
    local_x: c_uint,
    local_y: c_uint,
    local_z: c_uint,
    shared_mem: usize,
    stream: Handle,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
    start: Handle,
    stop: Handle,
    _flags: c_uint,
) -> i32 {
    api(|| {
        let (global_size, local) = ([global_x, global_y, global_z], [local_x, local_y, local_z]);
        // SAFETY: forwarded caller contract.
        unsafe { ext_module_launch(function, global_size, local, shared_mem, stream, params, extra, start, stop) }
    })
}

/// `hipHccModuleLaunchKernel`: `hipExtModuleLaunchKernel` without flags (C++ name, as in HIP
/// 5.2).
///
/// # Safety
/// As `hipModuleLaunchKernel`.
#[export_name = "_Z24hipHccModuleLaunchKernelP18ihipModuleSymbol_tjjjjjjmP12ihipStream_tPPvS4_P11ihipEvent_tS6_"]
#[allow(clippy::too_many_arguments, non_snake_case)]
pub unsafe extern "C" fn hipHccModuleLaunchKernel(
    function: Handle,
    global_x: c_uint,
    global_y: c_uint,
    global_z: c_uint,
    local_x: c_uint,
    local_y: c_uint,
    local_z: c_uint,
    shared_mem: usize,
    stream: Handle,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
    start: Handle,
    stop: Handle,
) -> i32 {
    api(|| {
        let (global_size, local) = ([global_x, global_y, global_z], [local_x, local_y, local_z]);
        // SAFETY: forwarded caller contract.
        unsafe { ext_module_launch(function, global_size, local, shared_mem, stream, params, extra, start, stop) }
    })
}

/// Checks that every work-group of a cooperative launch of `function` on `stream`'s device can
/// be resident at once: blocks per CU (HIP's occupancy) × CUs ≥ the grid's blocks.
pub(crate) fn check_cooperative(
    g: &Global,
    function: *const c_void,
    grid: Dim3,
    block: Dim3,
    shared_mem: usize,
    stream: Handle,
) -> HipResult {
    geometry(grid, block)?;
    let device = g.rt.stream_device(stream_of(stream))?;
    let f = resolve(g, function, device)?;
    let p = properties(g, device)?;
    let threads = u64::from(block.x) * u64::from(block.y) * u64::from(block.z);
    if threads == 0 || threads > p.maxThreadsPerBlock as u64 {
        return Err(INVALID_CONFIGURATION);
    }
    let [per_cu, _, _] = occupancy(&f, &p, threads as c_int, shared_mem, false)?;
    let resident = u64::try_from(per_cu).unwrap_or(0) * u64::try_from(p.multiProcessorCount).unwrap_or(0);
    let blocks = u64::from(grid.x) * u64::from(grid.y) * u64::from(grid.z);
    if blocks > resident {
        return Err(COOPERATIVE_LAUNCH_TOO_LARGE);
    }
    Ok(())
}

/// `hipLaunchCooperativeKernel`: a launch whose work-groups all fit on the device at once
/// (else `hipErrorCooperativeLaunchTooLarge`), of a kernel handle or a `hipFunction_t`.
///
/// # Safety
/// As `hipLaunchKernel`.
#[no_mangle]
pub unsafe extern "C" fn hipLaunchCooperativeKernel(
    function: *const c_void,
    grid: Dim3,
    block: Dim3,
    args: *mut *mut c_void,
    shared_mem: c_uint,
    stream: Handle,
) -> i32 {
    api(|| {
        let g = global()?;
        check_cooperative(g, function, grid, block, shared_mem as usize, stream)?;
        // SAFETY: forwarded caller contract.
        unsafe { launch_any(g, function, grid, block, args, shared_mem as usize, stream) }
    })
}

/// The entries of a multi-device launch, checked: 1 up to the device count of them, each on a
/// stream of a device of its own.
///
/// # Safety
/// `list` is NULL or holds `count` entries.
unsafe fn entries<'a>(g: &Global, list: *mut LaunchParams, count: c_int) -> HipResult<&'a [LaunchParams]> {
    let devices = g.rt.device_count()? as usize;
    if list.is_null() || count <= 0 || count as usize > devices {
        return Err(INVALID_VALUE);
    }
    // SAFETY: the caller's contract.
    let list = unsafe { std::slice::from_raw_parts(list, count as usize) };
    let mut seen = Vec::with_capacity(list.len());
    for e in list {
        let d = g.rt.stream_device(stream_of(e.stream))?;
        if seen.contains(&d) {
            return Err(INVALID_DEVICE);
        }
        seen.push(d);
    }
    Ok(list)
}

/// Makes every stream of `list` wait for the work queued so far on all of them (each event
/// created on its stream's device, as recording needs).
fn cross_sync(g: &Global, list: &[LaunchParams]) -> HipResult {
    let current = g.rt.device()?;
    let mut events = Vec::with_capacity(list.len());
    let r = (|| {
        for e in list {
            let mut ev: Handle = std::ptr::null_mut();
            g.rt.set_device(g.rt.stream_device(stream_of(e.stream))?)?;
            // SAFETY: `ev` is valid for writes.
            let created = status(unsafe { hipEventCreateWithFlags(&mut ev, EVENT_DISABLE_TIMING) });
            g.rt.set_device(current)?;
            created?;
            events.push(ev);
            status(hipEventRecord(ev, e.stream))?;
        }
        for e in list {
            for &ev in &events {
                status(hipStreamWaitEvent(e.stream, ev, 0))?;
            }
        }
        Ok(())
    })();
    for ev in events {
        let _ = hipEventDestroy(ev);
    }
    r
}

/// Launches each entry of `list` (cooperatively: each checked first), with the synchronization
/// `flags` ask for.
///
/// # Safety
/// As `hipLaunchKernel`, for each entry.
unsafe fn multi_device(list: *mut LaunchParams, count: c_int, flags: c_uint, cooperative: bool) -> HipResult {
    let g = global()?;
    if flags & !(NO_PRE_SYNC | NO_POST_SYNC) != 0 {
        return Err(INVALID_VALUE);
    }
    // SAFETY: the caller's contract.
    let list = unsafe { entries(g, list, count) }?;
    if cooperative {
        let first = list[0];
        for e in list {
            // Every device runs the same launch (CUDA's rule).
            let same = e.func == first.func
                && e.grid == first.grid
                && e.block == first.block
                && e.shared_mem == first.shared_mem;
            if !same {
                return Err(INVALID_VALUE);
            }
            check_cooperative(g, e.func, e.grid, e.block, e.shared_mem, e.stream)?;
        }
    }
    if flags & NO_PRE_SYNC == 0 {
        cross_sync(g, list)?;
    }
    for e in list {
        // SAFETY: the caller's contract.
        unsafe { launch_any(g, e.func, e.grid, e.block, e.args, e.shared_mem, e.stream) }?;
    }
    if flags & NO_POST_SYNC == 0 {
        cross_sync(g, list)?;
    }
    Ok(())
}

/// `hipFunctionLaunchParams` (newer HIP; `aqueduct_hip.h`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct FunctionLaunchParams {
    /// The `hipFunction_t`.
    pub function: Handle,
    /// Blocks.
    pub grid: [c_uint; 3],
    /// Threads per block.
    pub block: [c_uint; 3],
    /// Dynamic LDS bytes.
    pub shared_mem: c_uint,
    /// The stream.
    pub stream: Handle,
    /// One pointer per argument.
    pub params: *mut *mut c_void,
}

const _: () = assert!(size_of::<FunctionLaunchParams>() == 56);

/// `hipModuleLaunchCooperativeKernel` (newer HIP): `hipLaunchCooperativeKernel` of a module
/// function, with `kernelParams`.
///
/// # Safety
/// `params` holds one pointer per kernel argument.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn hipModuleLaunchCooperativeKernel(
    function: Handle,
    grid_x: c_uint,
    grid_y: c_uint,
    grid_z: c_uint,
    block_x: c_uint,
    block_y: c_uint,
    block_z: c_uint,
    shared_mem: c_uint,
    stream: Handle,
    params: *mut *mut c_void,
) -> i32 {
    api(|| {
        let g = global()?;
        module_function_of(g, function)?;
        let grid = Dim3 { x: grid_x, y: grid_y, z: grid_z };
        let block = Dim3 { x: block_x, y: block_y, z: block_z };
        check_cooperative(g, function, grid, block, shared_mem as usize, stream)?;
        // SAFETY: the caller's contract.
        unsafe { launch_any(g, function, grid, block, params, shared_mem as usize, stream) }
    })
}

/// `hipModuleLaunchCooperativeKernelMultiDevice` (newer HIP): the multi-device cooperative
/// launch of module functions.
///
/// # Safety
/// `list` is NULL or holds `count` entries, each as `hipModuleLaunchCooperativeKernel`'s
/// arguments.
#[no_mangle]
pub unsafe extern "C" fn hipModuleLaunchCooperativeKernelMultiDevice(
    list: *mut FunctionLaunchParams,
    count: c_uint,
    flags: c_uint,
) -> i32 {
    api(|| {
        let g = global()?;
        let count = c_int::try_from(count).map_err(|_| INVALID_VALUE)?;
        if list.is_null() || count <= 0 {
            return Err(INVALID_VALUE);
        }
        // SAFETY: the caller's contract: `count` entries.
        let entries = unsafe { std::slice::from_raw_parts(list, count as usize) };
        let mut converted = Vec::with_capacity(entries.len());
        for e in entries {
            module_function_of(g, e.function)?;
            let d = |v: [c_uint; 3]| Dim3 { x: v[0], y: v[1], z: v[2] };
            converted.push(LaunchParams {
                func: e.function,
                grid: d(e.grid),
                block: d(e.block),
                args: e.params,
                shared_mem: e.shared_mem as usize,
                stream: e.stream,
            });
        }
        // SAFETY: forwarded caller contract, entry by entry.
        unsafe { multi_device(converted.as_mut_ptr(), count, flags, true) }
    })
}

/// `hipLaunchCooperativeKernelMultiDevice`: the same cooperative launch on several devices.
///
/// # Safety
/// `list` is NULL or holds `count` entries, each as `hipLaunchKernel`'s arguments.
#[no_mangle]
pub unsafe extern "C" fn hipLaunchCooperativeKernelMultiDevice(
    list: *mut LaunchParams,
    count: c_int,
    flags: c_uint,
) -> i32 {
    // SAFETY: forwarded caller contract.
    api(|| unsafe { multi_device(list, count, flags, true) })
}

/// `hipExtLaunchMultiKernelMultiDevice`: a kernel per device, each on its stream.
///
/// # Safety
/// `list` is NULL or holds `count` entries, each as `hipLaunchKernel`'s arguments.
#[no_mangle]
pub unsafe extern "C" fn hipExtLaunchMultiKernelMultiDevice(
    list: *mut LaunchParams,
    count: c_int,
    flags: c_uint,
) -> i32 {
    // SAFETY: forwarded caller contract.
    api(|| unsafe { multi_device(list, count, flags, false) })
}

/// `hip_impl::hipLaunchKernelGGLImpl` (HIP 5.2's C++ entry point of the old
/// `hipLaunchKernelGGL` header path): launches the kernel handle `function` with a ready
/// argument buffer (`kernarg` is an `extra` list). It returns nothing: a failure is the
/// thread's last error (`hipGetLastError`).
///
/// # Safety
/// `grid` and `block` point at `dim3`s; `kernarg` is a `HIP_LAUNCH_PARAM_*` list ending in
/// `HIP_LAUNCH_PARAM_END`.
#[export_name = "_ZN8hip_impl22hipLaunchKernelGGLImplEmRK4dim3S2_jP12ihipStream_tPPv"]
pub unsafe extern "C" fn hip_launch_kernel_ggl_impl(
    function: usize,
    grid: *const Dim3,
    block: *const Dim3,
    shared_mem: c_uint,
    stream: Handle,
    kernarg: *mut *mut c_void,
) {
    api(|| {
        let g = global()?;
        if grid.is_null() || block.is_null() || kernarg.is_null() {
            return Err(INVALID_VALUE);
        }
        // SAFETY: the caller's contract: both point at a dim3.
        let (grid, block) = unsafe { (grid.read(), block.read()) };
        let device = g.rt.stream_device(stream_of(stream))?;
        let f = resolve(g, function as *const c_void, device)?;
        let c = Config { grid, block, shared_mem, stream };
        // SAFETY: the caller's contract: an `extra` list.
        unsafe { launch_function(g, &f, c, std::ptr::null_mut(), kernarg) }
    });
}

/// `hipLaunchKernelExC`: a launch of `function` (a kernel handle, a host kernel or a
/// `hipFunction_t`, as `hipLaunchCooperativeKernel` takes) with `config`'s dimensions, LDS and
/// stream, and its attributes as [`crate::stream_attr::launch_attributes`] checks them (a
/// cooperative one launches as `hipLaunchCooperativeKernel`).
///
/// # Safety
/// `config` is NULL or valid, its `attrs` NULL or holding `num_attrs` entries; `args` as for
/// `hipLaunchKernel`.
#[no_mangle]
pub unsafe extern "C" fn hipLaunchKernelExC(
    config: *const LaunchConfig,
    function: *const c_void,
    args: *mut *mut c_void,
) -> i32 {
    api(|| {
        let g = global()?;
        if config.is_null() || function.is_null() {
            return Err(INVALID_VALUE);
        }
        // SAFETY: the caller's contract.
        let c = unsafe { &*config };
        // SAFETY: the caller's contract on `attrs`.
        let cooperative = unsafe { crate::stream_attr::launch_attributes(g, c) }?;
        let (grid, block, lds, stream) = (c.grid_dim, c.block_dim, c.dynamic_smem_bytes, c.stream);
        if cooperative {
            check_cooperative(g, function, grid, block, lds, stream)?;
        }
        // SAFETY: forwarded caller contract.
        unsafe { launch_any(g, function, grid, block, args, lds, stream) }
    })
}
