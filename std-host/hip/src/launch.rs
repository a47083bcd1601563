//! Kernel launches: host kernels (`aqdRegisterHostKernel` + `hipLaunchKernel`), registered
//! kernels (`hipLaunchKernel` of a handle [`crate::register`] knows, after the `<<<>>>` call
//! configuration `__hipPushCallConfiguration` / `__hipPopCallConfiguration`, or the older
//! `hipConfigureCall` / `hipSetupArgument` / `hipLaunchByPtr`) and functions of modules
//! ([`crate::module`]) with `hipModuleLaunchKernel`.
//!
//! A host kernel is a C function the emulated GPU runs once per work-group in place of GPU code:
//! it is registered with the emulator as a C twin (`aqueduct_emu.h`) with a kernel object of its
//! own, and its arguments travel in the dispatch's kernel-argument segment, each at its natural
//! alignment.
//! A module kernel dispatches the code object's kernel descriptor (modules are also what the
//! registration ABI of [`crate::register`] loads from a program's fat binary); the emulated GPU
//! executes its machine code (or a host twin: `AQUEDUCT_EMU_KERNELS`, docs/executor.md). Module kernel arguments are laid out from the code object's metadata
//! note; a kernel the note does not describe (no note, an unreadable one, or no entry for it)
//! has no known layout, and launching it with `kernelParams` fails with
//! `hipErrorInvalidKernelFile` instead of running it over a zeroed argument segment. Such a
//! kernel can still be launched with a ready buffer through `extra`.

use std::cell::RefCell;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::Arc;

use amdhsa::{HiddenArg, LaunchValues};
use aqueduct::{KernelLaunch, StreamHandle};
use aqueduct_kfd_emu::c_abi::AqdEmuCtx;
use aqueduct_kfd_emu::kernels::Twin;

use crate::code_objects::{FunctionEntry, HostKernel};
use crate::error::{
    api, HipResult, INVALID_CONFIGURATION, INVALID_DEVICE_FUNCTION, INVALID_KERNEL_FILE, INVALID_VALUE,
    MISSING_CONFIGURATION, NOT_SUPPORTED,
};
use crate::global::{global, invalidate_launches, launch_epoch, lock, Global};
use crate::module::{function_handle, function_index, module_function_of};
use crate::register::function_on;
use crate::{put, stream_of, Dim3, Handle};

/// `aqdHostKernel`.
type HostKernelFn = unsafe extern "C" fn(*mut *mut c_void, Dim3, Dim3, Dim3);

impl FunctionEntry {
    /// The private segment a launch asks for: the fixed one, and for a kernel with a dynamic
    /// stack at least the stack-size limit (`hipLimitStackSize`; docs/code-objects.md §7).
    pub(crate) fn launch_private(&self) -> u32 {
        if self.dynamic_stack {
            self.private.max(crate::properties::stack_size_limit())
        } else {
            self.private
        }
    }
}

/// Fills the hidden arguments of a launch of `hidden` into its segment (docs/code-objects.md
/// §7): geometry from the launch, the hostcall buffer (`crate::hostcall`) for a kernel that
/// has the argument, 0 for what the runtime does not provide (global offsets, OpenCL's device
/// enqueue; the heap until a kernel needs it).
pub(crate) fn fill_hidden(seg: &mut [u8], hidden: &[HiddenArg], grid: [u32; 3], block: [u16; 3], dynamic_lds: u32) {
    if hidden.is_empty() {
        return;
    }
    let hostcall = hidden.iter().any(|h| h.kind == amdhsa::metadata::ValueKind::HiddenHostcallBuffer);
    let hostcall_buffer = if hostcall { crate::hostcall::buffer() } else { 0 };
    let values =
        LaunchValues { grid, workgroup: block, dims: 3, dynamic_lds, hostcall_buffer, ..LaunchValues::default() };
    // The segment spans every argument the metadata lists (`module_kernarg`).
    let _ = amdhsa::hidden::fill(seg, hidden.iter().copied(), &values);
}

/// Lays out arguments of `sizes` bytes each at their natural alignment (the largest power of two
/// dividing the size, at most 16); returns the (offset, size) pairs and the total size.
fn layout(sizes: &[usize]) -> (Vec<(usize, usize)>, usize) {
    let mut off = 0usize;
    let args = sizes
        .iter()
        .map(|&size| {
            let align = 1usize << size.trailing_zeros().min(4);
            off = off.div_ceil(align) * align;
            let at = off;
            off += size;
            (at, size)
        })
        .collect();
    (args, off.div_ceil(16) * 16)
}

/// Copies each argument's bytes (`args[i]` points at `size` bytes) into a segment of `total`
/// bytes at its offset.
///
/// # Safety
/// `args` is NULL only if `layout` is empty; otherwise it holds one pointer per argument, each
/// valid for reading its size.
unsafe fn pack(args: *const *const c_void, layout: &[(usize, usize)], total: usize) -> HipResult<Vec<u8>> {
    let mut seg = vec![0u8; total];
    if layout.is_empty() {
        return Ok(seg);
    }
    if args.is_null() {
        return Err(INVALID_VALUE);
    }
    for (i, &(off, size)) in layout.iter().enumerate() {
        // SAFETY: the caller's contract: `args` holds one pointer per argument.
        let p = unsafe { *args.add(i) };
        if p.is_null() {
            return Err(INVALID_VALUE);
        }
        let dst = seg.get_mut(off..off + size).ok_or(INVALID_VALUE)?;
        // SAFETY: the caller's contract: `p` is valid for `size` bytes.
        dst.copy_from_slice(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), size) });
    }
    Ok(seg)
}

/// AQL geometry from HIP's blocks and threads per block.
pub(crate) fn geometry(grid: Dim3, block: Dim3) -> HipResult<([u32; 3], [u16; 3])> {
    let wg = |v: u32| u16::try_from(v).map_err(|_| INVALID_CONFIGURATION);
    let items = |g: u32, b: u32| g.checked_mul(b).ok_or(INVALID_CONFIGURATION);
    Ok((
        [items(grid.x, block.x)?, items(grid.y, block.y)?, items(grid.z, block.z)?],
        [wg(block.x)?, wg(block.y)?, wg(block.z)?],
    ))
}

/// What a dispatch runs: the kernel object and its static segment sizes.
struct Target {
    object: u64,
    group: u32,
    private: u32,
}

fn launch(g: &Global, stream: Handle, t: Target, grid: Dim3, block: Dim3, kernarg: &[u8]) -> HipResult {
    let (grid, workgroup) = geometry(grid, block)?;
    launch_items(g, stream, t, grid, workgroup, kernarg)
}

/// A dispatch of `grid` work-items in work-groups of `workgroup`.
fn launch_items(
    g: &Global,
    stream: Handle,
    t: Target,
    grid: [u32; 3],
    workgroup: [u16; 3],
    kernarg: &[u8],
) -> HipResult {
    let launch = KernelLaunch {
        kernel_object: t.object,
        grid,
        workgroup,
        group_segment_size: t.group,
        private_segment_size: t.private,
        kernarg,
    };
    Ok(g.rt.launch_kernel(stream_of(stream), &launch)?)
}

/// A registered host kernel's body and argument layout, as its C twin sees it.
struct HostBody {
    body: HostKernelFn,
    offsets: Vec<usize>,
    size: usize,
}

/// The C twin of every host kernel: a private, 16-byte aligned copy of the kernel-argument
/// segment per work-group (the body may modify its arguments, and pointers to them are aligned
/// as the types need), then the body with one pointer per argument.
unsafe extern "C" fn host_body(ctx: *const AqdEmuCtx, user: *mut c_void) -> c_int {
    // SAFETY: the emulator passes its live context for the call, and `user` is the leaked
    // HostBody of `aqdRegisterHostKernel`.
    let (ctx, hb) = unsafe { (&*ctx, &*user.cast::<HostBody>()) };
    let mut seg = vec![0u128; hb.size.div_ceil(16)];
    let base = seg.as_mut_ptr().cast::<u8>();
    let n = (ctx.kernarg_size as usize).min(hb.size);
    // SAFETY: `seg` holds `size >= n` bytes; the context's segment holds `kernarg_size >= n`.
    unsafe { std::ptr::copy_nonoverlapping(ctx.kernarg, base, n) };
    // SAFETY: every offset is inside the segment (from `layout`).
    let mut ptrs: Vec<*mut c_void> = hb.offsets.iter().map(|&o| unsafe { base.add(o) }.cast()).collect();
    let d = |v: [u32; 3]| Dim3 { x: v[0], y: v[1], z: v[2] };
    // SAFETY: the registering caller vouched for `body`; the pointers stay valid for the call
    // (the segment lives until the end of this function).
    unsafe { (hb.body)(ptrs.as_mut_ptr(), d(ctx.workgroup_id), d(ctx.workgroup_count), d(ctx.workgroup_size)) };
    0
}

/// `aqdRegisterHostKernel`: binds `body` to `symbol` (emulated device only; elsewhere
/// `hipErrorNotSupported`). Registering a symbol again replaces its body.
///
/// # Safety
/// `arg_sizes` is NULL or holds `arg_count` sizes; `body` stays callable for the process's life.
#[no_mangle]
pub unsafe extern "C" fn aqdRegisterHostKernel(
    symbol: *const c_void,
    body: Option<HostKernelFn>,
    arg_count: c_uint,
    arg_sizes: *const usize,
) -> i32 {
    api(|| {
        let g = global()?;
        let Some(body) = body else { return Err(INVALID_VALUE) };
        if symbol.is_null() || (arg_count > 0 && arg_sizes.is_null()) {
            return Err(INVALID_VALUE);
        }
        let sizes: &[usize] = if arg_count == 0 {
            &[]
        } else {
            // SAFETY: the caller's contract: `arg_sizes` holds `arg_count` sizes.
            unsafe { std::slice::from_raw_parts(arg_sizes, arg_count as usize) }
        };
        if sizes.contains(&0) {
            return Err(INVALID_VALUE);
        }
        let emu = g.rt.backend().as_emu().ok_or(NOT_SUPPORTED)?;
        let (args, kernarg_size) = layout(sizes);
        let name = format!("aqd_host_kernel_{:#x}", symbol as usize);
        let size = u32::try_from(kernarg_size).map_err(|_| INVALID_VALUE)?;
        // A C twin of the emulator (the aqueduct_emu.h mechanism) whose body adapts its context
        // to the host kernel's signature. The body lives as long as the process (a registration
        // is never undone; registering again replaces the binding).
        let host = Box::new(HostBody { body, offsets: args.iter().map(|a| a.0).collect(), size: kernarg_size });
        // SAFETY: `host_body` has the C twin signature and only reads the HostBody it gets,
        // which is leaked (lives for the process) and immutable, so it may run on many threads.
        let mut twin = unsafe { Twin::from_c(&name, host_body, Box::into_raw(host).cast()) };
        twin.kernarg_size = size;
        let object = emu.sys().emu().register_kernel(twin);
        lock(&g.host_kernels).insert(symbol as usize, HostKernel { object, args, kernarg_size });
        invalidate_launches();
        Ok(())
    })
}

/// `hipLaunchKernel` of a host kernel registered with `aqdRegisterHostKernel`, or of a kernel
/// handle registered with `__hipRegisterFunction` (see [`crate::register`]); any other
/// `function` is `hipErrorInvalidDeviceFunction`.
///
/// # Safety
/// `args` holds one pointer per kernel argument, each valid for the argument's size.
#[no_mangle]
pub unsafe extern "C" fn hipLaunchKernel(
    function: *const c_void,
    grid: Dim3,
    block: Dim3,
    args: *mut *mut c_void,
    shared_mem: usize,
    stream: Handle,
) -> i32 {
    api(|| {
        let g = global()?;
        // SAFETY: the caller's contract.
        if let Some(r) = unsafe { launch_resolved(g, function, grid, block, args, shared_mem, stream) } {
            return r;
        }
        if !lock(&g.host_kernels).contains_key(&(function as usize)) {
            // SAFETY: the caller's contract.
            let r = unsafe { launch_registered(g, function, grid, block, args, shared_mem, stream) };
            if r.is_ok() {
                remember_registered(g, function, stream);
            }
            return r;
        }
        let (object, seg) = {
            let kernels = lock(&g.host_kernels);
            let k = kernels.get(&(function as usize)).ok_or(INVALID_DEVICE_FUNCTION)?;
            // SAFETY: the caller's contract.
            (k.object, unsafe { pack(args as *const *const c_void, &k.args, k.kernarg_size)? })
        };
        let group = u32::try_from(shared_mem).map_err(|_| INVALID_VALUE)?;
        launch(g, stream, Target { object, group, private: 0 }, grid, block, &seg)?;
        remember_host_kernel(g, function, stream);
        Ok(())
    })
}

// ----- the launch fast path ----------------------------------------------------------------------
//
// `hipLaunchKernel` resolves a kernel handle to what its dispatch needs (kernel object, segment
// sizes, argument layout) under the library's tables' locks. The calling thread remembers the
// last few resolutions, each for a (handle, device) pair and stamped with an epoch that every
// change to the tables (a host kernel registered again, a fat binary unregistered, a module
// unloaded, a device reset) moves on; it also remembers the device of the last stream it
// launched on (a handle value names one stream for its whole life) and its own current device.
// A launch that finds all three goes straight to core, packing the arguments into a buffer the
// thread reuses.

/// A kernel handle resolved for one device.
struct Resolved {
    key: usize,
    device: u32,
    epoch: u64,
    object: u64,
    group: u32,
    private: u32,
    /// Bytes of the kernel-argument segment.
    total: usize,
    layout: Arc<[(usize, usize)]>,
    hidden: Arc<[HiddenArg]>,
}

/// Resolutions a thread remembers.
const REMEMBERED: usize = 8;

/// What the calling thread remembers for its launches.
struct LaunchCache {
    resolved: Vec<Resolved>,
    /// (stream handle, its device) of the last created stream launched on.
    stream_device: (u64, u32),
    /// The thread's current device as `hipSetDevice` left it (`None`: not known yet).
    current_device: Option<u32>,
    /// The kernel-argument segment of the last launch, and the kernel it was laid out for: the
    /// bytes no argument covers are still zero, so the next launch of that kernel only writes
    /// its arguments.
    seg: Vec<u8>,
    seg_key: Option<(usize, u32, u64)>,
}

std::thread_local! {
    static LAUNCH_CACHE: RefCell<LaunchCache> = const {
        RefCell::new(LaunchCache {
            resolved: Vec::new(),
            stream_device: (0, 0),
            current_device: None,
            seg: Vec::new(),
            seg_key: None,
        })
    };
}

/// Notes the calling thread's current device (after a successful `hipSetDevice`).
pub(crate) fn note_current_device(device: u32) {
    let _ = LAUNCH_CACHE.try_with(|c| c.borrow_mut().current_device = Some(device));
}

/// The device work on `stream` runs on, from what the thread remembers when it can.
fn device_of(g: &Global, c: &mut LaunchCache, stream: StreamHandle) -> HipResult<u32> {
    if stream.0 <= 2 {
        if let Some(d) = c.current_device {
            return Ok(d);
        }
        let d = g.rt.device()?;
        c.current_device = Some(d);
        return Ok(d);
    }
    if c.stream_device.0 == stream.0 {
        return Ok(c.stream_device.1);
    }
    let d = g.rt.stream_device(stream)?;
    c.stream_device = (stream.0, d);
    Ok(d)
}

/// Remembers a resolution for the stream's device (`None`: nothing to remember).
fn remember(g: &Global, stream: Handle, epoch: u64, resolve: impl FnOnce(u32) -> Option<Resolved>) {
    let _ = LAUNCH_CACHE.try_with(|c| {
        let mut c = c.borrow_mut();
        let Ok(device) = device_of(g, &mut c, stream_of(stream)) else { return };
        let Some(mut r) = resolve(device) else { return };
        r.epoch = epoch;
        c.resolved.retain(|x| !(x.key == r.key && x.device == r.device));
        if c.resolved.len() >= REMEMBERED {
            c.resolved.remove(0);
        }
        c.resolved.push(r);
    });
}

fn remember_host_kernel(g: &Global, function: *const c_void, stream: Handle) {
    // Ordering: Acquire, as in `launch_resolved`; read before the tables, so a change made in
    // between leaves this resolution already stale.
    let epoch = launch_epoch();
    remember(g, stream, epoch, |device| {
        let kernels = lock(&g.host_kernels);
        let k = kernels.get(&(function as usize))?;
        Some(Resolved {
            key: function as usize,
            device,
            epoch,
            object: k.object,
            group: 0,
            private: 0,
            total: k.kernarg_size,
            layout: k.args.clone().into(),
            hidden: Arc::from([]),
        })
    });
}

fn remember_registered(g: &Global, function: *const c_void, stream: Handle) {
    // Ordering: as in `remember_host_kernel`.
    let epoch = launch_epoch();
    remember(g, stream, epoch, |device| {
        let f = function_on(g, function as usize, device).ok()?;
        let args = f.args.as_ref()?;
        let explicit_end = args.iter().map(|&(o, s)| o.saturating_add(s)).max().unwrap_or(0);
        Some(Resolved {
            key: function as usize,
            device,
            epoch,
            object: f.object,
            group: f.group,
            private: f.launch_private(),
            total: f.kernarg_size.max(explicit_end),
            layout: args.clone().into(),
            hidden: f.hidden.clone(),
        })
    });
}

/// `hipLaunchKernel` through what the thread remembers; `None` when it does not remember this
/// kernel for the stream's device (the caller takes the full path, which reports any error).
///
/// # Safety
/// As `hipLaunchKernel`.
unsafe fn launch_resolved(
    g: &Global,
    function: *const c_void,
    grid: Dim3,
    block: Dim3,
    args: *mut *mut c_void,
    shared_mem: usize,
    stream: Handle,
) -> Option<HipResult> {
    let s = stream_of(stream);
    let shared = u32::try_from(shared_mem).ok()?;
    // Ordering: Acquire pairs with `invalidate_launches`.
    let epoch = launch_epoch();
    LAUNCH_CACHE
        .try_with(|c| {
            let mut c = c.borrow_mut();
            let device = device_of(g, &mut c, s).ok()?;
            let c = &mut *c;
            let r = c.resolved.iter().find(|r| r.key == function as usize && r.device == device && r.epoch == epoch)?;
            let key = (r.key, r.device, r.epoch);
            if c.seg_key != Some(key) || c.seg.len() != r.total {
                c.seg.clear();
                c.seg.resize(r.total, 0);
                c.seg_key = Some(key);
            }
            let seg = &mut c.seg;
            let packed = (|| {
                if !r.layout.is_empty() {
                    if args.is_null() {
                        return Err(INVALID_VALUE);
                    }
                    for (i, &(off, size)) in r.layout.iter().enumerate() {
                        // SAFETY: the caller's contract: `args` holds one pointer per argument.
                        let p = unsafe { *args.add(i) };
                        if p.is_null() {
                            return Err(INVALID_VALUE);
                        }
                        let dst = seg.get_mut(off..off + size).ok_or(INVALID_VALUE)?;
                        // SAFETY: the caller's contract: `p` is valid for `size` bytes.
                        dst.copy_from_slice(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), size) });
                    }
                }
                Ok(())
            })();
            Some(packed.and_then(|()| {
                let (grid, workgroup) = geometry(grid, block)?;
                fill_hidden(seg, &r.hidden, grid, workgroup, shared);
                let launch = KernelLaunch {
                    kernel_object: r.object,
                    grid,
                    workgroup,
                    group_segment_size: r.group.saturating_add(shared),
                    private_segment_size: r.private,
                    kernarg: seg,
                };
                Ok(g.rt.launch_kernel(s, &launch)?)
            }))
        })
        .ok()
        .flatten()
}

/// The launch `hipLaunchKernel(function, grid, block, args, shared_mem, stream)` would make,
/// resolved and packed once, handed to `body` with the runtime and the stream: what the bench
/// floors below enqueue through core alone.
///
/// # Safety
/// As `hipLaunchKernel`.
unsafe fn bench_launch(
    function: *const c_void,
    (grid, block): (Dim3, Dim3),
    args: *mut *mut c_void,
    shared_mem: usize,
    stream: Handle,
    body: impl FnOnce(&Global, aqueduct::StreamHandle, &KernelLaunch<'_>) -> HipResult,
) -> i32 {
    api(|| {
        let g = global()?;
        let s = stream_of(stream);
        let f = resolve(g, function, g.rt.stream_device(s)?)?;
        // SAFETY: the caller's contract.
        let mut seg = unsafe { module_kernarg(&f, args, std::ptr::null_mut())? };
        let (grid, workgroup) = geometry(grid, block)?;
        let shared = u32::try_from(shared_mem).map_err(|_| INVALID_VALUE)?;
        fill_hidden(&mut seg, &f.hidden, grid, workgroup, shared);
        let launch = KernelLaunch {
            kernel_object: f.object,
            grid,
            workgroup,
            group_segment_size: f.group.saturating_add(shared),
            private_segment_size: f.launch_private(),
            kernarg: &seg,
        };
        body(g, s, &launch)
    })
}

/// `aqdBenchCoreLaunch`: the floor `aqueduct bench` puts beside `hipLaunchKernel` — `count`
/// launches of the same kernel, geometry and arguments on `stream`, resolved and packed once
/// here and then enqueued by core's `launch_kernel` alone.
///
/// # Safety
/// As `hipLaunchKernel`.
#[no_mangle]
pub unsafe extern "C" fn aqdBenchCoreLaunch(
    function: *const c_void,
    grid: Dim3,
    block: Dim3,
    args: *mut *mut c_void,
    shared_mem: usize,
    stream: Handle,
    count: c_uint,
) -> i32 {
    // SAFETY: the caller's contract.
    unsafe {
        bench_launch(function, (grid, block), args, shared_mem, stream, |g, s, launch| {
            for _ in 0..count {
                g.rt.launch_kernel(s, launch)?;
            }
            Ok(())
        })
    }
}

/// `aqdBenchCoreCapture`: the floor `aqueduct bench` puts beside capture + instantiate through
/// the C ABI — `count` launches as `aqdBenchCoreLaunch` makes them, captured on `stream` by
/// core's own capture, the graph instantiated by core, then the executable and graph destroyed.
///
/// # Safety
/// As `hipLaunchKernel`.
#[no_mangle]
pub unsafe extern "C" fn aqdBenchCoreCapture(
    function: *const c_void,
    grid: Dim3,
    block: Dim3,
    args: *mut *mut c_void,
    shared_mem: usize,
    stream: Handle,
    count: c_uint,
) -> i32 {
    // SAFETY: the caller's contract.
    unsafe {
        bench_launch(function, (grid, block), args, shared_mem, stream, |g, s, launch| {
            // hipStreamCaptureModeGlobal.
            g.rt.stream_begin_capture(s, 0)?;
            for _ in 0..count {
                if let Err(e) = g.rt.launch_kernel(s, launch) {
                    let _ = g.rt.stream_end_capture(s).map(|graph| g.rt.graph_destroy(graph));
                    return Err(e.into());
                }
            }
            let graph = g.rt.stream_end_capture(s)?;
            let exec = g.rt.graph_instantiate(graph);
            let destroyed = g.rt.graph_destroy(graph);
            g.rt.graph_exec_destroy(exec?)?;
            Ok(destroyed?)
        })
    }
}

/// What a kernel handle passed to HIP names on `device`, as a function: a host kernel of
/// `aqdRegisterHostKernel`, a kernel handle of `__hipRegisterFunction`, or a `hipFunction_t` of
/// `hipModuleGetFunction` (in that order, as HIP tries the registered handle before taking the
/// pointer for a `hipFunction_t`). Anything else is `hipErrorInvalidDeviceFunction`.
pub(crate) fn resolve(g: &Global, func: *const c_void, device: u32) -> HipResult<FunctionEntry> {
    if let Some(k) = lock(&g.host_kernels).get(&(func as usize)) {
        return Ok(FunctionEntry {
            name: Arc::from(format!("aqd_host_kernel_{:#x}", func as usize)),
            module: usize::MAX,
            object: k.object,
            group: 0,
            private: 0,
            dynamic_stack: false,
            kernarg_size: k.kernarg_size,
            args: Some(k.args.clone()),
            hidden: Arc::from([]),
            resources: None,
        });
    }
    if let Ok(f) = function_on(g, func as usize, device) {
        return Ok((*f).clone());
    }
    if let Some(i) = function_index(func as Handle) {
        return lock(&g.functions).get(i).cloned().ok_or(INVALID_DEVICE_FUNCTION);
    }
    Err(INVALID_DEVICE_FUNCTION)
}

/// The kernel handle (as [`resolve`] takes it) whose function dispatches `object`, if any.
pub(crate) fn handle_of_object(g: &Global, object: u64) -> Option<*const c_void> {
    if let Some((&symbol, _)) = lock(&g.host_kernels).iter().find(|(_, k)| k.object == object) {
        return Some(symbol as *const c_void);
    }
    if let Some(h) = crate::register::handle_of_object(object) {
        return Some(h as *const c_void);
    }
    let functions = lock(&g.functions);
    let i = functions.iter().position(|f| f.object == object)?;
    Some(function_handle(i) as *const c_void)
}

/// A launch's configuration: blocks, threads per block, dynamic LDS bytes, stream.
#[derive(Clone, Copy)]
pub(crate) struct Config {
    pub(crate) grid: Dim3,
    pub(crate) block: Dim3,
    pub(crate) shared_mem: u32,
    pub(crate) stream: Handle,
}

/// Launches function `f` with `kernelParams` (`params`) or a ready buffer (`extra`).
///
/// # Safety
/// As `hipModuleLaunchKernel`'s `params` and `extra`.
pub(crate) unsafe fn launch_function(
    g: &Global,
    f: &FunctionEntry,
    c: Config,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> HipResult {
    // SAFETY: the caller's contract.
    let mut seg = unsafe { module_kernarg(f, params, extra)? };
    let (items, workgroup) = geometry(c.grid, c.block)?;
    fill_hidden(&mut seg, &f.hidden, items, workgroup, c.shared_mem);
    let t = Target { object: f.object, group: f.group.saturating_add(c.shared_mem), private: f.launch_private() };
    launch(g, c.stream, t, c.grid, c.block, &seg)
}

/// Launches function `f` over `items` work-items in work-groups of `workgroup` (HIP's
/// `hipExtModuleLaunchKernel` geometry: the last work-group of a dimension may be partial).
///
/// # Safety
/// As `hipModuleLaunchKernel`'s `params` and `extra`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn launch_function_items(
    g: &Global,
    f: &FunctionEntry,
    items: [u32; 3],
    workgroup: [u16; 3],
    shared_mem: u32,
    stream: Handle,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> HipResult {
    if items.contains(&0) || workgroup.contains(&0) {
        return Err(INVALID_CONFIGURATION);
    }
    // SAFETY: the caller's contract.
    let mut seg = unsafe { module_kernarg(f, params, extra)? };
    fill_hidden(&mut seg, &f.hidden, items, workgroup, shared_mem);
    let t = Target { object: f.object, group: f.group.saturating_add(shared_mem), private: f.launch_private() };
    launch_items(g, stream, t, items, workgroup, &seg)
}

/// `HIP_LAUNCH_PARAM_BUFFER_POINTER`, `…_SIZE`, `…_END`.
pub(crate) const PARAM_BUFFER_POINTER: usize = 1;
pub(crate) const PARAM_BUFFER_SIZE: usize = 2;
pub(crate) const PARAM_END: usize = 3;

/// The argument segment of a module launch, from `kernelParams` (one pointer per explicit
/// argument, laid out by the metadata) or from `extra` (a ready buffer). Without a layout from
/// the metadata only `extra` can describe the arguments: `kernelParams`, or no arguments at all,
/// is `hipErrorInvalidKernelFile`.
///
/// # Safety
/// As `hipModuleLaunchKernel`'s `params` and `extra`.
pub(crate) unsafe fn module_kernarg(
    f: &FunctionEntry,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> HipResult<Vec<u8>> {
    let explicit_end = f.args.iter().flatten().map(|&(o, s)| o.saturating_add(s)).max().unwrap_or(0);
    let total = f.kernarg_size.max(explicit_end);
    match (params.is_null(), extra.is_null(), &f.args) {
        (false, false, _) => Err(INVALID_VALUE),
        (_, true, None) => Err(INVALID_KERNEL_FILE),
        // SAFETY: the caller's contract: one pointer per explicit argument.
        (false, true, Some(args)) => unsafe { pack(params as *const *const c_void, args, total) },
        (true, true, Some(args)) if args.is_empty() => Ok(vec![0; total]),
        (true, true, Some(_)) => Err(INVALID_VALUE),
        (true, false, _) => {
            let (mut buf, mut size): (*const u8, usize) = (std::ptr::null(), 0);
            let mut i = 0;
            loop {
                // SAFETY: the caller's contract: `extra` is a key/value list ending in END.
                let key = unsafe { *extra.add(i) } as usize;
                match key {
                    PARAM_END => break,
                    // SAFETY: as above; the value follows its key.
                    PARAM_BUFFER_POINTER => buf = unsafe { *extra.add(i + 1) }.cast::<u8>(),
                    PARAM_BUFFER_SIZE => {
                        // SAFETY: as above; the value points at a size_t.
                        let p = unsafe { *extra.add(i + 1) }.cast::<usize>();
                        if p.is_null() {
                            return Err(INVALID_VALUE);
                        }
                        // SAFETY: non-null and valid by the caller's contract.
                        size = unsafe { p.read() };
                    }
                    _ => return Err(INVALID_VALUE),
                }
                i += 2;
            }
            if buf.is_null() && size > 0 {
                return Err(INVALID_VALUE);
            }
            let mut seg = vec![0u8; total.max(size)];
            if size > 0 {
                // SAFETY: the caller's contract: the buffer holds `size` bytes.
                seg[..size].copy_from_slice(unsafe { std::slice::from_raw_parts(buf, size) });
            }
            Ok(seg)
        }
    }
}

/// `hipModuleLaunchKernel`.
///
/// # Safety
/// `params` is NULL or holds one pointer per explicit kernel argument; `extra` is NULL or a
/// `HIP_LAUNCH_PARAM_*` list ending in `HIP_LAUNCH_PARAM_END`.
#[no_mangle]
pub unsafe extern "C" fn hipModuleLaunchKernel(
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
    extra: *mut *mut c_void,
) -> i32 {
    api(|| {
        let g = global()?;
        let f = module_function_of(g, function)?;
        let grid = Dim3 { x: grid_x, y: grid_y, z: grid_z };
        let block = Dim3 { x: block_x, y: block_y, z: block_z };
        let c = Config { grid, block, shared_mem, stream };
        // SAFETY: the caller's contract.
        unsafe { launch_function(g, &f, c, params, extra) }
    })
}

/// `hipLaunchKernel` of a registered kernel handle: the kernel of the fat binary's code object
/// for the stream's device, with `args` laid out by the code object's metadata.
///
/// # Safety
/// `args` holds one pointer per kernel argument, each valid for the argument's size.
pub(crate) unsafe fn launch_registered(
    g: &Global,
    function: *const c_void,
    grid: Dim3,
    block: Dim3,
    args: *mut *mut c_void,
    shared_mem: usize,
    stream: Handle,
) -> HipResult {
    let device = g.rt.stream_device(stream_of(stream))?;
    let f = function_on(g, function as usize, device)?;
    // SAFETY: the caller's contract.
    unsafe { launch_params(g, &f, grid, block, args, shared_mem, stream) }
}

/// Launches any kernel handle HIP takes as `const void*` (a host kernel, a registered kernel, a
/// `hipFunction_t`) with `kernelParams`.
///
/// # Safety
/// As `hipLaunchKernel`.
pub(crate) unsafe fn launch_any(
    g: &Global,
    function: *const c_void,
    grid: Dim3,
    block: Dim3,
    args: *mut *mut c_void,
    shared_mem: usize,
    stream: Handle,
) -> HipResult {
    let device = g.rt.stream_device(stream_of(stream))?;
    let f = resolve(g, function, device)?;
    // SAFETY: the caller's contract.
    unsafe { launch_params(g, &f, grid, block, args, shared_mem, stream) }
}

/// Launches `f` with `kernelParams` `args` (one pointer per argument), `shared_mem` bytes of
/// dynamic LDS, on `stream`.
///
/// # Safety
/// As `hipLaunchKernel`'s `args`.
unsafe fn launch_params(
    g: &Global,
    f: &FunctionEntry,
    grid: Dim3,
    block: Dim3,
    args: *mut *mut c_void,
    shared_mem: usize,
    stream: Handle,
) -> HipResult {
    let shared_mem = u32::try_from(shared_mem).map_err(|_| INVALID_VALUE)?;
    // SAFETY: the caller's contract.
    unsafe { launch_function(g, f, Config { grid, block, shared_mem, stream }, args, std::ptr::null_mut()) }
}

/// A launch configuration pushed by `<<<>>>` (or `hipConfigureCall`), with the argument buffer
/// `hipSetupArgument` fills.
struct Call {
    grid: Dim3,
    block: Dim3,
    shared_mem: usize,
    stream: Handle,
    args: Vec<u8>,
}

std::thread_local! {
    /// The calling thread's pushed configurations (HIP keeps a thread-local stack).
    static CALLS: RefCell<Vec<Call>> = const { RefCell::new(Vec::new()) };
}

fn push_call(grid: Dim3, block: Dim3, shared_mem: usize, stream: Handle) -> HipResult {
    let call = Call { grid, block, shared_mem, stream, args: Vec::new() };
    CALLS.try_with(|c| c.borrow_mut().push(call)).map_err(|_| INVALID_VALUE)
}

fn pop_call() -> HipResult<Call> {
    CALLS.try_with(|c| c.borrow_mut().pop()).ok().flatten().ok_or(MISSING_CONFIGURATION)
}

/// `__hipPushCallConfiguration`: pushes the launch configuration of a `<<<>>>` call.
#[no_mangle]
pub extern "C" fn __hipPushCallConfiguration(grid: Dim3, block: Dim3, shared_mem: usize, stream: Handle) -> i32 {
    api(|| push_call(grid, block, shared_mem, stream))
}

/// `__hipPopCallConfiguration`: pops the configuration the device stub launches with. An empty
/// stack is `hipErrorMissingConfiguration` (HIP reads past its stack there).
///
/// # Safety
/// Each pointer is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn __hipPopCallConfiguration(
    grid: *mut Dim3,
    block: *mut Dim3,
    shared_mem: *mut usize,
    stream: *mut Handle,
) -> i32 {
    api(|| {
        if grid.is_null() || block.is_null() || shared_mem.is_null() || stream.is_null() {
            return Err(INVALID_VALUE);
        }
        let c = pop_call()?;
        // SAFETY: the caller's contract; all four are non-null.
        unsafe {
            put(grid, c.grid)?;
            put(block, c.block)?;
            put(shared_mem, c.shared_mem)?;
            put(stream, c.stream)
        }
    })
}

/// `hipConfigureCall` (the launch API before `__hipPushCallConfiguration`).
#[no_mangle]
pub extern "C" fn hipConfigureCall(grid: Dim3, block: Dim3, shared_mem: usize, stream: Handle) -> i32 {
    api(|| push_call(grid, block, shared_mem, stream))
}

/// `hipSetupArgument`: copies `size` bytes of `arg` to `offset` of the pending launch's argument
/// buffer.
///
/// # Safety
/// `arg` is valid for reading `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn hipSetupArgument(arg: *const c_void, size: usize, offset: usize) -> i32 {
    api(|| {
        if arg.is_null() && size > 0 {
            return Err(INVALID_VALUE);
        }
        let end = offset.checked_add(size).ok_or(INVALID_VALUE)?;
        CALLS
            .try_with(|c| {
                let mut calls = c.borrow_mut();
                let call = calls.last_mut().ok_or(MISSING_CONFIGURATION)?;
                if call.args.len() < end {
                    call.args.resize(end, 0);
                }
                if size > 0 {
                    // SAFETY: the caller's contract.
                    let src = unsafe { std::slice::from_raw_parts(arg.cast::<u8>(), size) };
                    call.args[offset..end].copy_from_slice(src);
                }
                Ok(())
            })
            .map_err(|_| INVALID_VALUE)?
    })
}

/// `hipLaunchByPtr`: launches the kernel of handle `function` with the configuration and
/// argument buffer of `hipConfigureCall` / `hipSetupArgument`.
#[no_mangle]
pub extern "C" fn hipLaunchByPtr(function: *const c_void) -> i32 {
    api(|| {
        let g = global()?;
        let mut c = pop_call()?;
        let device = g.rt.stream_device(stream_of(c.stream))?;
        let f = function_on(g, function as usize, device)?;
        let mut size = c.args.len();
        let key = std::ptr::without_provenance_mut::<c_void>;
        let mut extra: [*mut c_void; 5] = [
            key(PARAM_BUFFER_POINTER),
            c.args.as_mut_ptr().cast(),
            key(PARAM_BUFFER_SIZE),
            (&mut size as *mut usize).cast(),
            key(PARAM_END),
        ];
        let shared_mem = u32::try_from(c.shared_mem).map_err(|_| INVALID_VALUE)?;
        let config = Config { grid: c.grid, block: c.block, shared_mem, stream: c.stream };
        // SAFETY: `extra` is a well-formed list over the call's buffer, which outlives the call.
        unsafe { launch_function(g, &f, config, std::ptr::null_mut(), extra.as_mut_ptr()) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_sit_at_their_natural_alignment() {
        let (args, total) = layout(&[1, 8, 2, 12, 16, 4]);
        assert_eq!(args, [(0, 1), (8, 8), (16, 2), (20, 12), (32, 16), (48, 4)]);
        assert_eq!(total, 64);
        assert_eq!(layout(&[]), (vec![], 0));
    }

    #[test]
    fn geometry_multiplies_blocks_by_threads() {
        let d = |x, y, z| Dim3 { x, y, z };
        assert_eq!(geometry(d(4, 2, 1), d(64, 1, 1)), Ok(([256, 2, 1], [64, 1, 1])));
        assert_eq!(geometry(d(1, 1, 1), d(70000, 1, 1)), Err(INVALID_CONFIGURATION));
        assert_eq!(geometry(d(u32::MAX, 1, 1), d(2, 1, 1)), Err(INVALID_CONFIGURATION));
    }
}
