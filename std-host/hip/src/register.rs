//! HIP's registration ABI, called as the host code clang's HIP toolchain (hipcc) generates calls
//! it: a module constructor registers the translation unit's fat binary
//! (`__hipRegisterFatBinary`), then each kernel (`__hipRegisterFunction`, keyed by the kernel's
//! *handle*, a global whose symbol is the mangled kernel name) and each device variable
//! (`__hipRegisterVar`, keyed by its host shadow); `kernel<<<grid, block, shmem, stream>>>(…)`
//! becomes `__hipPushCallConfiguration` followed by the device stub, which pops the
//! configuration and calls `hipLaunchKernel(handle, …)`; an `atexit` destructor calls
//! `__hipUnregisterFatBinary`. The older launch path (`hipConfigureCall`, `hipSetupArgument`,
//! `hipLaunchByPtr`) is served too.
//!
//! # Fat binaries and code-object selection
//!
//! The wrapper (`magic` "HIPF", version 1) points at a clang offload bundle
//! (`__CLANG_OFFLOAD_BUNDLE__`, entry count, then per entry offset, size and an id such as
//! `hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-`) or at a bare AMDGPU ELF. Nothing is read at
//! registration: on the first use on a device the entries are walked in bundle order and the
//! first whose target id suits the device's ISA name (`amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-`)
//! is loaded as a module. A target suits the device when the two strings are equal, or when the
//! processors are equal and every feature the code object states (`+` or `-`) is the device's;
//! a feature the code object leaves out matches either setting.
//!
//! When no entry suits the device, the launch (or symbol lookup) answers
//! `hipErrorNoBinaryForGpu` (209), CUDA's `cudaErrorNoKernelImageForDevice`. HIP's releases
//! disagree here: HIP 5.2 aborts the process at initialisation with a message naming that error,
//! clr of 2024 answers `hipErrorInvalidDeviceFunction` at the launch, and the newest clr
//! `hipErrorInvalidImage` at the first launch and `hipErrorInvalidKernelFile` after it (README,
//! "HIP C ABI"). Compressed bundles (`CCOB`) are `hipErrorNotSupported`.
//!
//! On the emulated GPU the chosen code object's kernels run as the host twins registered under
//! their symbol names (see [`crate::global`]).

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use crate::error::{
    api, Hip, HipResult, INVALID_DEVICE_FUNCTION, INVALID_MEMCPY_DIRECTION, INVALID_SYMBOL, INVALID_VALUE,
    MISSING_CONFIGURATION, NOT_SUPPORTED, NO_BINARY_FOR_GPU,
};
use crate::global::{global, global_if_created, lock, Global};
use crate::launch::{
    elf_size, launch_function, load_on, module_function, module_variable, unload, Config, FunctionEntry,
    PARAM_BUFFER_POINTER, PARAM_BUFFER_SIZE, PARAM_END,
};
use crate::memory::{check_capturing, memcpy_on, memcpy_sync};
use crate::{put, stream_of, Dim3, Handle};

/// `__hipFatMAGIC2`: "HIPF".
const FAT_BINARY_MAGIC: u32 = 0x4849_5046;
/// The uncompressed clang offload bundle magic.
const BUNDLE_MAGIC: &[u8; 24] = b"__CLANG_OFFLOAD_BUNDLE__";
/// The compressed bundle magic.
const COMPRESSED_MAGIC: &[u8; 4] = b"CCOB";
/// The triple every AMDHSA target id starts with.
const AMDHSA: &str = "amdgcn-amd-amdhsa--";
/// Bounds on what a bundle header may announce (clang writes a handful of entries).
const MAX_ENTRIES: u64 = 1024;
const MAX_ID: u64 = 1024;

/// `__CudaFatBinaryWrapper` (24 bytes on x86-64).
#[repr(C)]
struct FatBinaryWrapper {
    magic: u32,
    version: u32,
    binary: *const u8,
    unused: *const c_void,
}

/// One code object of a bundle: its target id (`amdgcn-amd-amdhsa--gfx90a:xnack-`) and where
/// its bytes lie, from the bundle's start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BundleEntry {
    pub(crate) target: String,
    pub(crate) offset: usize,
    pub(crate) size: usize,
}

/// Reads a bundle's entries through `get(offset, len)`, which answers `None` past the bytes it
/// knows; `None` if the header is malformed. Entries that are not device code (the `host-…`
/// entry clang always writes) are skipped; `hip-`/`hcc-` entries (code object v2/v3 naming) take
/// their target from the ELF header.
pub(crate) fn parse_bundle<'a>(get: impl Fn(usize, usize) -> Option<&'a [u8]>) -> Option<Vec<BundleEntry>> {
    let u64_at = |off: usize| -> Option<u64> { Some(u64::from_le_bytes(get(off, 8)?.try_into().ok()?)) };
    if get(0, 24)? != BUNDLE_MAGIC {
        return None;
    }
    let count = u64_at(24)?;
    if count > MAX_ENTRIES {
        return None;
    }
    let mut at = 32usize;
    let mut out = Vec::new();
    for _ in 0..count {
        let (offset, size, id_len) = (u64_at(at)?, u64_at(at + 8)?, u64_at(at + 16)?);
        if id_len > MAX_ID {
            return None;
        }
        let id = std::str::from_utf8(get(at + 24, id_len as usize)?).ok()?;
        at += 24 + id_len as usize;
        let (offset, size) = (usize::try_from(offset).ok()?, usize::try_from(size).ok()?);
        offset.checked_add(size)?;
        let Some((kind, rest)) = id.split_once('-') else { continue };
        let target = match kind {
            "hipv4" => rest.to_owned(),
            "hip" | "hcc" if size > 0 => elf_target(get(offset, size)?)?,
            _ => continue,
        };
        out.push(BundleEntry { target, offset, size });
    }
    Some(out)
}

/// `EF_AMDGPU_MACH_*` → processor, for the targets aqueduct knows.
const MACHS: [(u32, &str); 8] = [
    (0x02c, "gfx900"),
    (0x02f, "gfx906"),
    (0x030, "gfx908"),
    (0x036, "gfx1030"),
    (0x03f, "gfx90a"),
    (0x040, "gfx940"),
    (0x041, "gfx1100"),
    (0x04c, "gfx942"),
];

/// The target id of an AMDGPU ELF from its header: processor from `EF_AMDGPU_MACH`, `xnack`
/// and `sramecc` from the feature bits of ABI v3 (one bit each: on) or v4+ (two bits: any, off,
/// on). Code object v2 is refused, as HIP refuses it.
fn elf_target(elf: &[u8]) -> Option<String> {
    let header = elf.get(..64)?;
    if header.get(..4)? != b"\x7fELF" || u16::from_le_bytes([header[18], header[19]]) != 224 {
        return None;
    }
    let flags = u32::from_le_bytes(header.get(48..52)?.try_into().ok()?);
    let (_, processor) = MACHS.iter().find(|(m, _)| *m == flags & 0xff)?;
    let mut id = format!("{AMDHSA}{processor}");
    let abi = header[8];
    let mode = |bits: u32| match bits {
        0x2 => Some('-'),
        0x3 => Some('+'),
        _ => None,
    };
    let (sramecc, xnack) = match abi {
        1 => ((flags & 0x200 != 0).then_some('+'), (flags & 0x100 != 0).then_some('+')),
        2.. => (mode((flags >> 10) & 0x3), mode((flags >> 8) & 0x3)),
        _ => return None,
    };
    for (name, sign) in [("sramecc", sramecc), ("xnack", xnack)] {
        if let Some(sign) = sign {
            id.push_str(&format!(":{name}{sign}"));
        }
    }
    Some(id)
}

/// The ISA name of a device of `gfx_target_version` (e.g. 90010), as HSA names the agent's ISA:
/// `amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-`. Processors with SRAM ECC report it on; XNACK is
/// off unless `HSA_XNACK=1`.
pub(crate) fn isa_name(gfx_target_version: u32) -> String {
    let (major, minor, stepping) =
        (gfx_target_version / 10000, gfx_target_version / 100 % 100, gfx_target_version % 100);
    let processor = format!("gfx{major}{minor}{stepping:x}");
    let sramecc = matches!(processor.as_str(), "gfx906" | "gfx908" | "gfx90a" | "gfx940" | "gfx941" | "gfx942");
    let xnack = major == 9;
    let mut id = format!("{AMDHSA}{processor}");
    if sramecc {
        id.push_str(":sramecc+");
    }
    if xnack {
        let on = std::env::var("HSA_XNACK").is_ok_and(|v| v == "1");
        id.push_str(if on { ":xnack+" } else { ":xnack-" });
    }
    id
}

/// Whether a code object built for target id `code` runs on a device whose ISA is `agent`.
pub(crate) fn compatible(code: &str, agent: &str) -> bool {
    if code == agent {
        return true;
    }
    let (Some(code), Some(agent)) = (code.strip_prefix(AMDHSA), agent.strip_prefix(AMDHSA)) else {
        return false;
    };
    let (mut c, mut a) = (code.split(':'), agent.split(':'));
    if c.next() != a.next() {
        return false;
    }
    let agent_features: Vec<&str> = a.collect();
    c.all(|feature| agent_features.contains(&feature))
}

/// What a fat binary's blob holds.
enum Contents {
    Bundle(Vec<BundleEntry>),
    Elf(usize),
    Compressed,
    Invalid,
}

/// Reads the blob of a fat binary.
///
/// # Safety
/// `blob` points at what clang placed in `.hip_fatbin`: a complete bundle or ELF (every offset
/// its header announces is readable), or at least 24 readable bytes of something else.
unsafe fn contents(blob: *const u8) -> Contents {
    // SAFETY: at least the 24 magic bytes are readable (the caller's contract).
    let head = unsafe { std::slice::from_raw_parts(blob, 24) };
    if head.starts_with(COMPRESSED_MAGIC) {
        return Contents::Compressed;
    }
    if head == BUNDLE_MAGIC {
        // SAFETY: a bundle's header, entries and code objects are readable where it says.
        let get = |off: usize, len: usize| Some(unsafe { std::slice::from_raw_parts(blob.add(off), len) });
        return parse_bundle(get).map_or(Contents::Invalid, Contents::Bundle);
    }
    // SAFETY: the caller's contract: a complete ELF, or 24 readable bytes that are not one.
    match unsafe { elf_size(blob) } {
        Ok(size) => Contents::Elf(size),
        Err(_) => Contents::Invalid,
    }
}

/// A registered fat binary.
struct Binary {
    blob: usize,
    /// Per device: the module loaded from it, or why none could be.
    devices: HashMap<u32, HipResult<usize>>,
}

/// A registered kernel: its fat binary, device-side name and the functions resolved per device.
struct Function {
    binary: usize,
    name: String,
    devices: HashMap<u32, Arc<FunctionEntry>>,
}

/// A registered device variable: its fat binary and device-side name.
struct Variable {
    binary: usize,
    name: String,
}

#[derive(Default)]
struct Registry {
    /// By handle (the address `__hipRegisterFatBinary` returned).
    binaries: HashMap<usize, Binary>,
    /// Handle by blob address (a blob registered twice gets the same handle, as in HIP).
    handles: HashMap<usize, usize>,
    /// By kernel handle.
    functions: HashMap<usize, Function>,
    /// By host shadow address.
    variables: HashMap<usize, Variable>,
}

/// Filled from module constructors, before the runtime exists; nothing here touches a device.
static REGISTRY: LazyLock<Mutex<Registry>> = LazyLock::new(|| Mutex::new(Registry::default()));

/// The module of fat binary `handle` on `device`, loaded on first use; `unknown` answers a
/// handle `__hipRegisterFatBinary` did not return (a refused wrapper's NULL, or garbage).
fn module_on(g: &Global, reg: &mut Registry, handle: usize, device: u32, unknown: Hip) -> HipResult<usize> {
    let b = reg.binaries.get_mut(&handle).ok_or(unknown)?;
    if let Some(r) = b.devices.get(&device) {
        return *r;
    }
    let r = load_for(g, b.blob, device);
    b.devices.insert(device, r);
    r
}

fn load_for(g: &Global, blob: usize, device: u32) -> HipResult<usize> {
    let agent = isa_name(g.rt.device_info(device)?.gfx_target_version);
    let blob = blob as *const u8;
    // SAFETY: registered blobs are what clang placed in `.hip_fatbin` (the caller of
    // `__hipRegisterFatBinary` vouched for them) and stay mapped until unregistered.
    let image = match unsafe { contents(blob) } {
        Contents::Bundle(entries) => {
            let e = entries.iter().find(|e| compatible(&e.target, &agent)).ok_or(NO_BINARY_FOR_GPU)?;
            // SAFETY: the entry lies inside the bundle (its header says so).
            unsafe { std::slice::from_raw_parts(blob.add(e.offset), e.size) }
        }
        // SAFETY: a complete ELF of `size` bytes.
        Contents::Elf(size) => unsafe { std::slice::from_raw_parts(blob, size) },
        Contents::Compressed => return Err(NOT_SUPPORTED),
        Contents::Invalid => return Err(NO_BINARY_FOR_GPU),
    };
    load_on(g, device, image).map_err(|_| NO_BINARY_FOR_GPU)
}

/// The function behind kernel handle `key` on `device`.
pub(crate) fn function_on(g: &Global, key: usize, device: u32) -> HipResult<Arc<FunctionEntry>> {
    let mut reg = lock(&REGISTRY);
    let f = reg.functions.get(&key).ok_or(INVALID_DEVICE_FUNCTION)?;
    if let Some(entry) = f.devices.get(&device) {
        return Ok(entry.clone());
    }
    let (binary, name) = (f.binary, f.name.clone());
    let module = module_on(g, &mut reg, binary, device, INVALID_DEVICE_FUNCTION)?;
    let entry = Arc::new(module_function(g, module, &name).map_err(|_| INVALID_DEVICE_FUNCTION)?);
    if let Some(f) = reg.functions.get_mut(&key) {
        f.devices.insert(device, entry.clone());
    }
    Ok(entry)
}

/// The kernel handle whose function (on any device) dispatches `object`.
pub(crate) fn handle_of_object(object: u64) -> Option<usize> {
    let reg = lock(&REGISTRY);
    reg.functions.iter().find(|(_, f)| f.devices.values().any(|e| e.object == object)).map(|(&h, _)| h)
}

/// The device address and size of the variable whose host shadow is `symbol`, on the calling
/// thread's device.
pub(crate) fn variable(g: &Global, symbol: *const c_void) -> HipResult<(u64, u64)> {
    let device = g.rt.device()?;
    let mut reg = lock(&REGISTRY);
    let v = reg.variables.get(&(symbol as usize)).ok_or(INVALID_SYMBOL)?;
    let (binary, name) = (v.binary, v.name.clone());
    let module = module_on(g, &mut reg, binary, device, INVALID_SYMBOL)?;
    drop(reg);
    module_variable(g, module, &name)
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
    let shared_mem = u32::try_from(shared_mem).map_err(|_| INVALID_VALUE)?;
    let c = Config { grid, block, shared_mem, stream };
    // SAFETY: the caller's contract.
    unsafe { launch_function(g, &f, c, args, std::ptr::null_mut()) }
}

/// Reads a NUL-terminated name.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string.
unsafe fn name(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: the caller's contract.
    unsafe { CStr::from_ptr(p) }.to_str().ok().map(str::to_owned)
}

/// `__hipRegisterFatBinary`: records the wrapper's blob and returns its handle; a wrapper with
/// another magic or version is refused with NULL. Nothing is read from the blob until a device
/// first needs it.
///
/// # Safety
/// `data` is NULL or points at a fat-binary wrapper whose blob stays mapped until
/// `__hipUnregisterFatBinary`.
#[no_mangle]
pub unsafe extern "C" fn __hipRegisterFatBinary(data: *const c_void) -> *mut *mut c_void {
    if data.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: the caller's contract: a wrapper.
    let w = unsafe { data.cast::<FatBinaryWrapper>().read_unaligned() };
    if w.magic != FAT_BINARY_MAGIC || w.version != 1 || w.binary.is_null() {
        return std::ptr::null_mut();
    }
    let mut reg = lock(&REGISTRY);
    let blob = w.binary as usize;
    if let Some(&h) = reg.handles.get(&blob) {
        return h as *mut *mut c_void;
    }
    // The handle is a slot of its own, as HIP's is the address of its per-blob slot.
    let h = Box::into_raw(Box::new(std::ptr::null_mut::<c_void>())) as usize;
    reg.handles.insert(blob, h);
    reg.binaries.insert(h, Binary { blob, devices: HashMap::new() });
    h as *mut *mut c_void
}

/// `__hipRegisterFunction`: binds kernel handle `host_function` to kernel `device_name` of the
/// fat binary; a second registration of the same handle is ignored (as in HIP).
///
/// # Safety
/// `device_name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn __hipRegisterFunction(
    modules: *mut *mut c_void,
    host_function: *const c_void,
    _device_function: *mut c_char,
    device_name: *const c_char,
    _thread_limit: c_uint,
    _tid: *mut c_void,
    _bid: *mut c_void,
    _block_dim: *mut Dim3,
    _grid_dim: *mut Dim3,
    _w_size: *mut c_int,
) {
    // SAFETY: the caller's contract.
    let Some(name) = (unsafe { name(device_name) }) else { return };
    let mut reg = lock(&REGISTRY);
    let f = Function { binary: modules as usize, name, devices: HashMap::new() };
    reg.functions.entry(host_function as usize).or_insert(f);
}

/// `__hipRegisterVar`: binds host shadow `var` to device variable `host_var` of the fat
/// binary. The address and size come from the loaded code object, not from `size`.
///
/// # Safety
/// `host_var` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn __hipRegisterVar(
    modules: *mut *mut c_void,
    var: *mut c_void,
    host_var: *mut c_char,
    _device_var: *mut c_char,
    _ext: c_int,
    _size: usize,
    _constant: c_int,
    _global: c_int,
) {
    // SAFETY: the caller's contract.
    let Some(name) = (unsafe { name(host_var) }) else { return };
    let mut reg = lock(&REGISTRY);
    reg.variables.insert(var as usize, Variable { binary: modules as usize, name });
}

/// `__hipUnregisterFatBinary`: the first call of the process waits for the device (as HIP
/// does), then the fat binary's kernels and variables are forgotten and its modules unloaded.
///
/// # Safety
/// `modules` is a handle from `__hipRegisterFatBinary`, unregistered once.
#[no_mangle]
pub unsafe extern "C" fn __hipUnregisterFatBinary(modules: *mut *mut c_void) {
    static SYNCHRONIZED: AtomicBool = AtomicBool::new(false);
    let h = modules as usize;
    let binary = {
        let mut reg = lock(&REGISTRY);
        let Some(b) = reg.binaries.remove(&h) else { return };
        reg.handles.retain(|_, v| *v != h);
        reg.functions.retain(|_, f| f.binary != h);
        reg.variables.retain(|_, v| v.binary != h);
        b
    };
    crate::launch::invalidate_launches();
    if let Some(g) = global_if_created() {
        if !SYNCHRONIZED.swap(true, Ordering::AcqRel) {
            let _ = g.rt.device_synchronize();
        }
        for module in binary.devices.into_values().flatten() {
            let _ = unload(g, module);
        }
    }
    // SAFETY: `h` came from `Box::into_raw` in `__hipRegisterFatBinary` and was just removed
    // from the registry, so it is freed once.
    drop(unsafe { Box::from_raw(modules) });
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

/// `hipGetSymbolAddress`: the device address of a registered variable on the calling thread's
/// device; an unregistered `symbol` is `hipErrorInvalidSymbol`.
///
/// # Safety
/// `dev_ptr` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipGetSymbolAddress(dev_ptr: *mut *mut c_void, symbol: *const c_void) -> i32 {
    api(|| {
        let g = global()?;
        if dev_ptr.is_null() {
            return Err(INVALID_VALUE);
        }
        let (addr, _) = variable(g, symbol)?;
        // SAFETY: the caller's contract.
        unsafe { put(dev_ptr, addr as usize as *mut c_void) }
    })
}

/// `hipGetSymbolSize`: the size of a registered variable, from the loaded code object.
///
/// # Safety
/// `size` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipGetSymbolSize(size: *mut usize, symbol: *const c_void) -> i32 {
    api(|| {
        let g = global()?;
        if size.is_null() {
            return Err(INVALID_VALUE);
        }
        let (_, bytes) = variable(g, symbol)?;
        // SAFETY: the caller's contract.
        unsafe { put(size, bytes as usize) }
    })
}

/// `hipMemcpyHostToDevice`, `…DeviceToHost`, `…DeviceToDevice`, `…DeviceToDeviceNoCU`.
pub(crate) const TO_DEVICE: c_uint = 1;
pub(crate) const TO_HOST: c_uint = 2;
const DEVICE_TO_DEVICE: c_uint = 3;
const DEVICE_TO_DEVICE_NO_CU: c_uint = 1024;

/// `[address + offset, + bytes)` of a variable: past its end is `hipErrorInvalidValue`.
pub(crate) fn symbol_range(g: &Global, symbol: *const c_void, bytes: usize, offset: usize) -> HipResult<u64> {
    let (addr, size) = variable(g, symbol)?;
    let end = offset.checked_add(bytes).ok_or(INVALID_VALUE)?;
    if end as u64 > size {
        return Err(INVALID_VALUE);
    }
    Ok(addr + offset as u64)
}

pub(crate) fn check_direction(kind: c_uint, allowed: c_uint) -> HipResult {
    if kind != allowed && kind != DEVICE_TO_DEVICE && kind != DEVICE_TO_DEVICE_NO_CU {
        return Err(INVALID_MEMCPY_DIRECTION);
    }
    Ok(())
}

/// `hipMemcpyToSymbol`: synchronous, so `hipErrorStreamCaptureImplicit` while any capture is
/// active; `kind` must be host-to-device or device-to-device.
///
/// # Safety
/// `src` is valid for reading `bytes` bytes.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyToSymbol(
    symbol: *const c_void,
    src: *const c_void,
    bytes: usize,
    offset: usize,
    kind: c_uint,
) -> i32 {
    api(|| {
        let g = global()?;
        check_capturing(g)?;
        check_direction(kind, TO_DEVICE)?;
        let dst = symbol_range(g, symbol, bytes, offset)?;
        memcpy_sync(g, dst, src as usize as u64, bytes as u64)
    })
}

/// `hipMemcpyFromSymbol`: `kind` must be device-to-host or device-to-device.
///
/// # Safety
/// `dst` is valid for writing `bytes` bytes.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyFromSymbol(
    dst: *mut c_void,
    symbol: *const c_void,
    bytes: usize,
    offset: usize,
    kind: c_uint,
) -> i32 {
    api(|| {
        let g = global()?;
        check_capturing(g)?;
        check_direction(kind, TO_HOST)?;
        let src = symbol_range(g, symbol, bytes, offset)?;
        memcpy_sync(g, dst as usize as u64, src, bytes as u64)
    })
}

/// `hipMemcpyToSymbolAsync`: the copy in `stream`'s order (recorded when it captures).
///
/// # Safety
/// `src` is valid for reading `bytes` bytes until the copy has run.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyToSymbolAsync(
    symbol: *const c_void,
    src: *const c_void,
    bytes: usize,
    offset: usize,
    kind: c_uint,
    stream: Handle,
) -> i32 {
    api(|| {
        let g = global()?;
        check_direction(kind, TO_DEVICE)?;
        let dst = symbol_range(g, symbol, bytes, offset)?;
        memcpy_on(g, stream_of(stream), dst, src as usize as u64, bytes as u64)
    })
}

/// `hipMemcpyFromSymbolAsync`.
///
/// # Safety
/// `dst` is valid for writing `bytes` bytes until the copy has run.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyFromSymbolAsync(
    dst: *mut c_void,
    symbol: *const c_void,
    bytes: usize,
    offset: usize,
    kind: c_uint,
    stream: Handle,
) -> i32 {
    api(|| {
        let g = global()?;
        check_direction(kind, TO_HOST)?;
        let src = symbol_range(g, symbol, bytes, offset)?;
        memcpy_on(g, stream_of(stream), dst as usize as u64, src, bytes as u64)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let header: usize = 32 + entries.iter().map(|(id, _)| 24 + id.len()).sum::<usize>();
        let mut at = header.div_ceil(4096) * 4096;
        let mut out = BUNDLE_MAGIC.to_vec();
        out.extend((entries.len() as u64).to_le_bytes());
        let mut offsets = Vec::new();
        for (id, code) in entries {
            offsets.push(at);
            out.extend((at as u64).to_le_bytes());
            out.extend((code.len() as u64).to_le_bytes());
            out.extend((id.len() as u64).to_le_bytes());
            out.extend(id.as_bytes());
            at += code.len().div_ceil(4096) * 4096;
        }
        for ((_, code), off) in entries.iter().zip(offsets) {
            out.resize(off, 0);
            out.extend(*code);
        }
        out
    }

    fn fixture(name: &str) -> Vec<u8> {
        let path = format!("{}/../../kfd-direct/emu/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read(path).expect("the emulator's fixture code objects")
    }

    #[test]
    fn bundles_parse_and_skip_the_host_entry() {
        let co = fixture("kernels-gfx90a.co");
        let b = bundle(&[
            ("host-x86_64-unknown-linux-gnu", &[]),
            ("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+", b"abc"),
            ("hip-amdgcn-amd-amdhsa-gfx90a", &co),
        ]);
        let entries = parse_bundle(|o, l| b.get(o..o.checked_add(l)?)).expect("a bundle");
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].target, "amdgcn-amd-amdhsa--gfx90a:xnack+");
        assert_eq!(&b[entries[0].offset..][..entries[0].size], b"abc");
        // The v2/v3 naming takes the target from the ELF header (clang-15 fixture: v4, any).
        assert_eq!(entries[1].target, "amdgcn-amd-amdhsa--gfx90a");
        assert_eq!(&b[entries[1].offset..][..entries[1].size], &co[..]);
        // Truncated or foreign headers are refused, never read past.
        assert_eq!(parse_bundle(|o, l| b.get(o..o.checked_add(l)?.min(60))), None);
        assert_eq!(parse_bundle(|o, l| co.get(o..o.checked_add(l)?)), None);
    }

    #[test]
    fn targets_match_by_processor_and_stated_features() {
        let agent = "amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-";
        assert!(compatible(agent, agent));
        assert!(compatible("amdgcn-amd-amdhsa--gfx90a", agent));
        assert!(compatible("amdgcn-amd-amdhsa--gfx90a:xnack-", agent));
        assert!(compatible("amdgcn-amd-amdhsa--gfx90a:sramecc+", agent));
        assert!(!compatible("amdgcn-amd-amdhsa--gfx90a:xnack+", agent));
        assert!(!compatible("amdgcn-amd-amdhsa--gfx90a:sramecc-:xnack-", agent));
        assert!(!compatible("amdgcn-amd-amdhsa--gfx1100", agent));
        assert!(!compatible("amdgcn-amd-amdhsa--gfx908", agent));
        assert!(!compatible("spirv64-amd-amdhsa--amdgcnspirv", agent));
    }

    #[test]
    fn isa_names_follow_hsa() {
        assert!(isa_name(90010).starts_with("amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack"));
        assert!(isa_name(90402).starts_with("amdgcn-amd-amdhsa--gfx942:sramecc+:xnack"));
        assert_eq!(isa_name(110000), "amdgcn-amd-amdhsa--gfx1100");
    }

    #[test]
    fn elf_targets_come_from_the_header() {
        assert_eq!(elf_target(&fixture("kernels-gfx1100.co")).as_deref(), Some("amdgcn-amd-amdhsa--gfx1100"));
        let mut co = fixture("kernels-gfx90a.co");
        // ABI v4 feature bits: sramecc on (0xc00), xnack off (0x200).
        let flags = (u32::from_le_bytes(co[48..52].try_into().unwrap()) & !0xf00) | 0xe00;
        co[48..52].copy_from_slice(&flags.to_le_bytes());
        assert_eq!(elf_target(&co).as_deref(), Some("amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-"));
        assert_eq!(elf_target(b"not an ELF"), None);
    }
}
