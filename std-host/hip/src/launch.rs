//! Kernel launches: host kernels (`aqdRegisterHostKernel` + `hipLaunchKernel`) and modules of
//! real AMDHSA code objects (`hipModuleLoad*`, `hipModuleGetFunction`, `hipModuleLaunchKernel`,
//! `hipModuleUnload`).
//!
//! A host kernel is a C function the emulated GPU runs once per work-group in place of GPU code:
//! it is registered with the emulator as a C twin (`aqueduct_emu.h`) with a kernel object of its
//! own, and its arguments travel in the dispatch's kernel-argument segment, each at its natural
//! alignment.
//! A module kernel dispatches the code object's kernel descriptor (modules are also what the
//! registration ABI of [`crate::register`] loads from a program's fat binary); on the emulator the twin
//! registered under the kernel's name runs (the fixture kernels have twins, see
//! [`crate::global`]). Module kernel arguments are laid out from the code object's metadata
//! note; a kernel the note does not describe (no note, an unreadable one, or no entry for it)
//! has no known layout, and launching it with `kernelParams` fails with
//! `hipErrorInvalidKernelFile` instead of running it over a zeroed argument segment. Such a
//! kernel can still be launched with a ready buffer through `extra`.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use aqueduct::{KernelLaunch, StreamHandle};
use aqueduct_kfd_emu::c_abi::AqdEmuCtx;
use aqueduct_kfd_emu::kernels::Twin;
use aqueduct_std::select::AnyBackend;

use crate::error::{
    api, Hip, HipResult, FILE_NOT_FOUND, INVALID_CONFIGURATION, INVALID_DEVICE_FUNCTION, INVALID_HANDLE, INVALID_IMAGE,
    INVALID_KERNEL_FILE, INVALID_SYMBOL, INVALID_VALUE, NOT_FOUND, NOT_SUPPORTED,
};
use crate::global::{global, lock, Global};
use crate::{handle, put, stream_of, Dim3, Handle};

/// `aqdHostKernel`.
type HostKernelFn = unsafe extern "C" fn(*mut *mut c_void, Dim3, Dim3, Dim3);

/// A registered host kernel.
pub(crate) struct HostKernel {
    object: u64,
    /// (offset, size) of each argument in the kernel-argument segment.
    args: Vec<(usize, usize)>,
    kernarg_size: usize,
}

/// The explicit arguments of a kernel: (offset, size) of each in the kernel-argument segment.
type ArgLayout = Vec<(usize, usize)>;

/// A loaded module.
pub(crate) struct ModuleEntry {
    code: Code,
    /// Argument layouts from the code object's metadata note, by kernel name; `None` when the
    /// note is missing or cannot be parsed.
    layouts: Option<Vec<(String, ArgLayout)>>,
    /// The code object's data symbols (device variables): name, offset in the image, size.
    variables: Vec<(String, u64, u64)>,
    /// What the metadata note says each kernel uses, by kernel name.
    resources: Vec<(String, Resources)>,
    /// Where the image sits in device memory (base, bytes); `None` where the backend does not
    /// say (ROCr).
    image: Option<(u64, u64)>,
}

enum Code {
    Kfd(aqueduct_kfd::CodeObjectHandle),
    Rocr(aqueduct_std::rocr::ExecutableHandle),
}

/// A function of a module.
#[derive(Clone)]
pub(crate) struct FunctionEntry {
    pub(crate) module: usize,
    pub(crate) object: u64,
    pub(crate) group: u32,
    pub(crate) private: u32,
    pub(crate) kernarg_size: usize,
    /// `None`: the metadata does not describe this kernel, so `kernelParams` cannot be laid out.
    pub(crate) args: Option<ArgLayout>,
    /// Registers and limits from the metadata (`None` when it does not describe the kernel).
    pub(crate) resources: Option<Resources>,
}

/// What a kernel uses and allows, from its metadata entry (code object v3+).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Resources {
    /// `.vgpr_count`.
    pub(crate) vgprs: u32,
    /// `.sgpr_count`.
    pub(crate) sgprs: u32,
    /// `.max_flat_workgroup_size`.
    pub(crate) max_threads: u32,
    /// `.wavefront_size`.
    pub(crate) wavefront: u32,
}

/// The resources of every kernel the metadata note of `elf` describes.
fn kernel_resources(elf: &[u8]) -> Vec<(String, Resources)> {
    use aqueduct_kfd_emu::metadata::{decode, Value, NT_AMDGPU_METADATA};
    use object::read::elf::{FileHeader, ProgramHeader};
    let Ok(hdr) = object::elf::FileHeader64::<object::Endianness>::parse(elf) else { return Vec::new() };
    let Ok(endian) = hdr.endian() else { return Vec::new() };
    let Ok(headers) = hdr.program_headers(endian, elf) else { return Vec::new() };
    for ph in headers.iter().filter(|ph| ph.p_type(endian) == object::elf::PT_NOTE) {
        let Ok(Some(mut notes)) = ph.notes(endian, elf) else { continue };
        while let Ok(Some(note)) = notes.next() {
            if note.name() != b"AMDGPU" || note.n_type(endian) != NT_AMDGPU_METADATA {
                continue;
            }
            let Some(Value::Array(kernels)) = decode(note.desc()).and_then(|v| v.get("amdhsa.kernels").cloned()) else {
                return Vec::new();
            };
            let u32_of = |k: &Value, key: &str| k.get(key).and_then(Value::as_u64).map_or(0, |v| v as u32);
            return kernels
                .iter()
                .filter_map(|k| {
                    let name = k.get(".name").and_then(Value::as_str)?.to_owned();
                    let r = Resources {
                        vgprs: u32_of(k, ".vgpr_count"),
                        sgprs: u32_of(k, ".sgpr_count"),
                        max_threads: u32_of(k, ".max_flat_workgroup_size"),
                        wavefront: u32_of(k, ".wavefront_size"),
                    };
                    Some((name, r))
                })
                .collect();
        }
    }
    Vec::new()
}

/// Tags of module and function handles (top 16 bits).
const MODULE_TAG: u64 = 0x3d0d << 48;
const FUNCTION_TAG: u64 = 0xf0c7 << 48;
const TAG_MASK: u64 = 0xffff << 48;

fn untag(h: Handle, tag: u64) -> Option<usize> {
    let v = h as usize as u64;
    (v & TAG_MASK == tag).then_some((v & !TAG_MASK) as usize)
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
            let r = unsafe { crate::register::launch_registered(g, function, grid, block, args, shared_mem, stream) };
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

/// Moves on whenever a resolution could change.
static LAUNCH_EPOCH: AtomicU64 = AtomicU64::new(0);

/// Forgets every thread's remembered resolutions.
pub(crate) fn invalidate_launches() {
    // Ordering: Release pairs with the Acquire load in `launch_resolved`: a thread that sees the
    // new epoch also sees the table change that moved it.
    LAUNCH_EPOCH.fetch_add(1, Ordering::Release);
}

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
    let epoch = LAUNCH_EPOCH.load(Ordering::Acquire);
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
        })
    });
}

fn remember_registered(g: &Global, function: *const c_void, stream: Handle) {
    // Ordering: as in `remember_host_kernel`.
    let epoch = LAUNCH_EPOCH.load(Ordering::Acquire);
    remember(g, stream, epoch, |device| {
        let f = crate::register::function_on(g, function as usize, device).ok()?;
        let args = f.args.as_ref()?;
        let explicit_end = args.iter().map(|&(o, s)| o.saturating_add(s)).max().unwrap_or(0);
        Some(Resolved {
            key: function as usize,
            device,
            epoch,
            object: f.object,
            group: f.group,
            private: f.private,
            total: f.kernarg_size.max(explicit_end),
            layout: args.clone().into(),
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
    let epoch = LAUNCH_EPOCH.load(Ordering::Acquire);
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
    api(|| {
        let g = global()?;
        let s = stream_of(stream);
        let f = resolve(g, function, g.rt.stream_device(s)?)?;
        // SAFETY: the caller's contract.
        let seg = unsafe { module_kernarg(&f, args, std::ptr::null_mut())? };
        let (grid, workgroup) = geometry(grid, block)?;
        let shared = u32::try_from(shared_mem).map_err(|_| INVALID_VALUE)?;
        let launch = KernelLaunch {
            kernel_object: f.object,
            grid,
            workgroup,
            group_segment_size: f.group.saturating_add(shared),
            private_segment_size: f.private,
            kernarg: &seg,
        };
        for _ in 0..count {
            g.rt.launch_kernel(s, &launch)?;
        }
        Ok(())
    })
}

/// ELF64 sizes: file header, program header entry, section header entry.
const EHDR_SIZE: usize = 64;
const PHDR_SIZE: u64 = 56;
const SHDR_SIZE: u64 = 64;

/// The size of the ELF image at `image`, from its header tables: the largest end of the file
/// header, the two header tables, every segment's file bytes and every section's file bytes.
///
/// `hipModuleLoadData` receives no size, so the headers are trusted only as far as they are
/// self-consistent: every sum and product is checked (a wrap is `hipErrorInvalidImage`, never a
/// small size), a table entry smaller than its ELF64 record is refused (the record would be read
/// past the entry), and nothing is read before the bytes that announce it have been checked: the
/// four magic bytes first, then the 64-byte header, then the tables the header places.
///
/// # Safety
/// `image` points at a readable buffer that starts with `\x7fELF` only if it is a complete
/// ELF64 file (whose header tables lie inside it); any other buffer has at least 4 readable bytes.
pub(crate) unsafe fn elf_size(image: *const u8) -> HipResult<usize> {
    // SAFETY: the caller's contract: at least the 4 magic bytes are readable.
    let magic = unsafe { std::slice::from_raw_parts(image, 4) };
    if magic != b"\x7fELF" {
        return Err(INVALID_IMAGE);
    }
    // SAFETY: an ELF file (magic checked) has its 64-byte header (caller's contract).
    let hdr = unsafe { std::slice::from_raw_parts(image, EHDR_SIZE) };
    if hdr[4] != 2 {
        return Err(INVALID_IMAGE);
    }
    let u64_at = |b: &[u8], o: usize| b.get(o..o + 8).and_then(|b| b.try_into().ok()).map_or(0, u64::from_le_bytes);
    let u32_at = |b: &[u8], o: usize| b.get(o..o + 4).and_then(|b| b.try_into().ok()).map_or(0, u32::from_le_bytes);
    let u16_at = |b: &[u8], o: usize| b.get(o..o + 2).and_then(|b| b.try_into().ok()).map_or(0, u16::from_le_bytes);
    let (phoff, shoff) = (u64_at(hdr, 0x20), u64_at(hdr, 0x28));
    let (phentsize, phnum) = (u64::from(u16_at(hdr, 0x36)), u64::from(u16_at(hdr, 0x38)));
    let (shentsize, shnum) = (u64::from(u16_at(hdr, 0x3a)), u64::from(u16_at(hdr, 0x3c)));
    if (phnum > 0 && phentsize < PHDR_SIZE) || (shnum > 0 && shentsize < SHDR_SIZE) {
        return Err(INVALID_IMAGE);
    }
    // `end` of a table or a range: `off + n * len`, with every step checked and the result
    // addressable (an offset handed to `ptr::add` must stay below `isize::MAX`).
    let end_of = |off: u64, n: u64, len: u64| -> HipResult<u64> {
        n.checked_mul(len)
            .and_then(|bytes| off.checked_add(bytes))
            .filter(|&end| end <= isize::MAX as u64)
            .ok_or(INVALID_IMAGE)
    };
    let ph_end = end_of(phoff, phnum, phentsize)?;
    let sh_end = end_of(shoff, shnum, shentsize)?;
    let mut end = (EHDR_SIZE as u64).max(ph_end).max(sh_end);
    // The whole table is read once its end is known not to wrap.
    let table = |off: u64, table_end: u64| -> &[u8] {
        if table_end == off {
            return &[];
        }
        // SAFETY: the table lies inside the file (the caller's contract: the header describes
        // the file); `off..table_end` neither wraps nor leaves the address space (checked).
        unsafe { std::slice::from_raw_parts(image.add(off as usize), (table_end - off) as usize) }
    };
    for ph in table(phoff, ph_end).chunks_exact(phentsize.max(1) as usize) {
        // p_offset + p_filesz.
        end = end.max(end_of(u64_at(ph, 8), 1, u64_at(ph, 32))?);
    }
    for sh in table(shoff, sh_end).chunks_exact(shentsize.max(1) as usize) {
        // SHT_NOBITS (8) sections occupy no file bytes; the others end at sh_offset + sh_size.
        if u32_at(sh, 4) != 8 {
            end = end.max(end_of(u64_at(sh, 0x18), 1, u64_at(sh, 0x20))?);
        }
    }
    usize::try_from(end).map_err(|_| INVALID_IMAGE)
}

/// Loads the code object `elf` onto `device`; returns the module's index.
pub(crate) fn load_on(g: &Global, device: u32, elf: &[u8]) -> HipResult<usize> {
    let variables = data_symbols(elf).ok_or(INVALID_IMAGE)?;
    let (code, image) = match g.rt.backend() {
        AnyBackend::Emu(k) => {
            let co = k.load_code_object(device, elf).map_err(|_| INVALID_IMAGE)?;
            (Code::Kfd(co), k.code_object(co).map(|c| (c.base(), image_bytes(elf))))
        }
        AnyBackend::Kfd(k) => {
            let co = k.load_code_object(device, elf).map_err(|_| INVALID_IMAGE)?;
            (Code::Kfd(co), k.code_object(co).map(|c| (c.base(), image_bytes(elf))))
        }
        AnyBackend::Rocr(r) => (Code::Rocr(r.load_executable(device, elf).map_err(|_| INVALID_IMAGE)?), None),
    };
    let layouts = aqueduct_kfd_emu::metadata::kernels_from_elf(elf).map(|kernels| {
        kernels
            .into_iter()
            .map(|k| {
                let args =
                    k.args.iter().filter(|a| !a.is_hidden()).map(|a| (a.offset as usize, a.size as usize)).collect();
                (k.name, args)
            })
            .collect()
    });
    if let Some((base, bytes)) = image {
        lock(&g.images).insert(base, bytes);
    }
    let resources = kernel_resources(elf);
    let mut modules = lock(&g.modules);
    modules.push(Some(ModuleEntry { code, layouts, variables, resources, image }));
    Ok(modules.len() - 1)
}

fn load(g: &Global, elf: &[u8]) -> HipResult<Handle> {
    let i = load_on(g, g.rt.device()?, elf)?;
    Ok(handle(MODULE_TAG | i as u64))
}

/// The data symbols of an AMDGPU ELF (`STT_OBJECT` with a size, kernel descriptors excluded):
/// name, value (offset in the loaded image) and size. `None` if the ELF cannot be read.
fn data_symbols(elf: &[u8]) -> Option<Vec<(String, u64, u64)>> {
    use object::{Object, ObjectSymbol, SymbolKind};
    let file = object::read::elf::ElfFile64::<object::Endianness>::parse(elf).ok()?;
    let mut out = Vec::new();
    for sym in file.dynamic_symbols().chain(file.symbols()) {
        let Ok(name) = sym.name() else { continue };
        if sym.kind() != SymbolKind::Data || sym.is_undefined() || name.ends_with(".kd") {
            continue;
        }
        if !out.iter().any(|(n, _, _): &(String, u64, u64)| n == name) {
            out.push((name.to_owned(), sym.address(), sym.size()));
        }
    }
    Some(out)
}

/// Bytes the loaded image of `elf` spans: the end of its last `PT_LOAD` segment in memory.
fn image_bytes(elf: &[u8]) -> u64 {
    use object::read::elf::{FileHeader, ProgramHeader};
    let Ok(file) = object::read::elf::ElfFile64::<object::Endianness>::parse(elf) else { return 0 };
    let e = file.endian();
    let Ok(headers) = file.elf_header().program_headers(e, elf) else { return 0 };
    headers
        .iter()
        .filter(|ph| ph.p_type(e) == object::elf::PT_LOAD)
        .map(|ph| ph.p_vaddr(e).saturating_add(ph.p_memsz(e)))
        .max()
        .unwrap_or(0)
}

/// The device address and size of data symbol `name` of module `module`: `hipErrorInvalidSymbol`
/// if the code object has no such symbol, `hipErrorNotSupported` where the backend does not say
/// where the image lies.
pub(crate) fn module_variable(g: &Global, module: usize, name: &str) -> HipResult<(u64, u64)> {
    let modules = lock(&g.modules);
    let m = modules.get(module).and_then(Option::as_ref).ok_or(INVALID_HANDLE)?;
    let &(_, value, size) = m.variables.iter().find(|(n, _, _)| n == name).ok_or(INVALID_SYMBOL)?;
    let (base, _) = m.image.ok_or(NOT_SUPPORTED)?;
    Ok((base + value, size))
}

/// Unloads module `module` (no launch of its kernels may still be pending).
pub(crate) fn unload(g: &Global, module: usize) -> HipResult {
    let entry = lock(&g.modules).get_mut(module).and_then(Option::take).ok_or(INVALID_HANDLE)?;
    if let Some((base, _)) = entry.image {
        lock(&g.images).remove(&base);
    }
    match (entry.code, g.rt.backend()) {
        (Code::Kfd(co), AnyBackend::Emu(k)) => k.unload_code_object(co).map_err(|_| INVALID_HANDLE),
        (Code::Kfd(co), AnyBackend::Kfd(k)) => k.unload_code_object(co).map_err(|_| INVALID_HANDLE),
        (Code::Rocr(x), AnyBackend::Rocr(r)) => r.unload_executable(x).map_err(Hip::from),
        _ => Err(INVALID_HANDLE),
    }
}

/// Function `name` of module `module`: `hipErrorNotFound` if the code object has no such kernel.
pub(crate) fn module_function(g: &Global, module: usize, name: &str) -> HipResult<FunctionEntry> {
    let modules = lock(&g.modules);
    let m = modules.get(module).and_then(Option::as_ref).ok_or(INVALID_HANDLE)?;
    let (object, group, private, kernarg) = match (&m.code, g.rt.backend()) {
        (Code::Kfd(co), AnyBackend::Emu(k)) => {
            let info = k.kernel(*co, name).map_err(|_| NOT_FOUND)?;
            (info.kernel_object, info.group_segment_size, info.private_segment_size, info.kernarg_size)
        }
        (Code::Kfd(co), AnyBackend::Kfd(k)) => {
            let info = k.kernel(*co, name).map_err(|_| NOT_FOUND)?;
            (info.kernel_object, info.group_segment_size, info.private_segment_size, info.kernarg_size)
        }
        (Code::Rocr(x), AnyBackend::Rocr(r)) => r.kernel(*x, name).map_err(|_| NOT_FOUND)?,
        _ => return Err(INVALID_HANDLE),
    };
    let args = m.layouts.as_ref().and_then(|l| l.iter().find(|(n, _)| n == name)).map(|(_, a)| a.clone());
    let resources = m.resources.iter().find(|(n, _)| n == name).map(|&(_, r)| r);
    Ok(FunctionEntry { module, object, group, private, kernarg_size: kernarg as usize, args, resources })
}

/// What a kernel handle passed to HIP names on `device`, as a function: a host kernel of
/// `aqdRegisterHostKernel`, a kernel handle of `__hipRegisterFunction`, or a `hipFunction_t` of
/// `hipModuleGetFunction` (in that order, as HIP tries the registered handle before taking the
/// pointer for a `hipFunction_t`). Anything else is `hipErrorInvalidDeviceFunction`.
pub(crate) fn resolve(g: &Global, func: *const c_void, device: u32) -> HipResult<FunctionEntry> {
    if let Some(k) = lock(&g.host_kernels).get(&(func as usize)) {
        return Ok(FunctionEntry {
            module: usize::MAX,
            object: k.object,
            group: 0,
            private: 0,
            kernarg_size: k.kernarg_size,
            args: Some(k.args.clone()),
            resources: None,
        });
    }
    if let Ok(f) = crate::register::function_on(g, func as usize, device) {
        return Ok((*f).clone());
    }
    if let Some(i) = untag(func as Handle, FUNCTION_TAG) {
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
    Some((FUNCTION_TAG | i as u64) as usize as *const c_void)
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
    let seg = unsafe { module_kernarg(f, params, extra)? };
    let t = Target { object: f.object, group: f.group.saturating_add(c.shared_mem), private: f.private };
    launch(g, c.stream, t, c.grid, c.block, &seg)
}

/// `hipModuleLoad`: loads an AMDHSA code object file.
///
/// # Safety
/// `module` is NULL or valid for writes; `path` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn hipModuleLoad(module: *mut Handle, path: *const c_char) -> i32 {
    api(|| {
        let g = global()?;
        if module.is_null() || path.is_null() {
            return Err(INVALID_VALUE);
        }
        // SAFETY: the caller's contract: a NUL-terminated string.
        let path = unsafe { CStr::from_ptr(path) };
        let path = path.to_str().map_err(|_| FILE_NOT_FOUND)?;
        let elf = std::fs::read(path).map_err(|_| FILE_NOT_FOUND)?;
        let h = load(g, &elf)?;
        // SAFETY: the caller's contract.
        unsafe { put(module, h) }
    })
}

/// `hipModuleLoadData`: loads the AMDHSA code object (ELF) at `image`.
///
/// # Safety
/// `module` is NULL or valid for writes; `image` is NULL or points at a complete ELF file.
#[no_mangle]
pub unsafe extern "C" fn hipModuleLoadData(module: *mut Handle, image: *const c_void) -> i32 {
    api(|| {
        let g = global()?;
        if module.is_null() || image.is_null() {
            return Err(INVALID_VALUE);
        }
        // SAFETY: the caller's contract: a complete ELF file.
        let size = unsafe { elf_size(image.cast()) }?;
        // SAFETY: as above; the file spans `size` bytes.
        let elf = unsafe { std::slice::from_raw_parts(image.cast::<u8>(), size) };
        let h = load(g, elf)?;
        // SAFETY: the caller's contract.
        unsafe { put(module, h) }
    })
}

/// `hipModuleUnload`: no launch of the module's kernels may still be pending.
#[no_mangle]
pub extern "C" fn hipModuleUnload(module: Handle) -> i32 {
    api(|| {
        let g = global()?;
        let i = untag(module, MODULE_TAG).ok_or(INVALID_HANDLE)?;
        invalidate_launches();
        unload(g, i)
    })
}

/// `hipModuleGetFunction`: an unknown name is `hipErrorNotFound`.
///
/// # Safety
/// `function` is NULL or valid for writes; `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn hipModuleGetFunction(function: *mut Handle, module: Handle, name: *const c_char) -> i32 {
    api(|| {
        let g = global()?;
        if function.is_null() || name.is_null() {
            return Err(INVALID_VALUE);
        }
        // SAFETY: the caller's contract: a NUL-terminated string.
        let name = unsafe { CStr::from_ptr(name) }.to_str().map_err(|_| NOT_FOUND)?;
        if name.is_empty() {
            return Err(INVALID_VALUE);
        }
        let i = untag(module, MODULE_TAG).ok_or(INVALID_HANDLE)?;
        let entry = module_function(g, i, name)?;
        let mut functions = lock(&g.functions);
        functions.push(entry);
        let h = handle(FUNCTION_TAG | (functions.len() - 1) as u64);
        // SAFETY: the caller's contract.
        unsafe { put(function, h) }
    })
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
        let i = untag(function, FUNCTION_TAG).ok_or(INVALID_HANDLE)?;
        let f = lock(&g.functions).get(i).cloned().ok_or(INVALID_HANDLE)?;
        if lock(&g.modules).get(f.module).and_then(Option::as_ref).is_none() {
            return Err(INVALID_HANDLE);
        }
        let grid = Dim3 { x: grid_x, y: grid_y, z: grid_z };
        let block = Dim3 { x: block_x, y: block_y, z: block_z };
        let c = Config { grid, block, shared_mem, stream };
        // SAFETY: the caller's contract.
        unsafe { launch_function(g, &f, c, params, extra) }
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
    fn elf_size_of_the_fixture_is_its_file_length() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../kfd-direct/emu/fixtures/kernels-gfx90a.co");
        let elf = std::fs::read(path).expect("the emulator's gfx90a fixture");
        // SAFETY: a complete ELF file.
        assert_eq!(unsafe { elf_size(elf.as_ptr()) }, Ok(elf.len()));
        let mut wrapped = elf[..64].to_vec();
        wrapped[0x28..0x30].copy_from_slice(&(u64::MAX - 64).to_le_bytes());
        wrapped[0x3c..0x3e].copy_from_slice(&2u16.to_le_bytes());
        // SAFETY: the section table's end wraps, which is refused before any table is read.
        assert_eq!(unsafe { elf_size(wrapped.as_ptr()) }, Err(INVALID_IMAGE));
    }

    #[test]
    fn geometry_multiplies_blocks_by_threads() {
        let d = |x, y, z| Dim3 { x, y, z };
        assert_eq!(geometry(d(4, 2, 1), d(64, 1, 1)), Ok(([256, 2, 1], [64, 1, 1])));
        assert_eq!(geometry(d(1, 1, 1), d(70000, 1, 1)), Err(INVALID_CONFIGURATION));
        assert_eq!(geometry(d(u32::MAX, 1, 1), d(2, 1, 1)), Err(INVALID_CONFIGURATION));
    }
}
