//! HIP's registration ABI, called as the host code clang's HIP toolchain (hipcc) generates calls
//! it: a module constructor registers the translation unit's fat binary
//! (`__hipRegisterFatBinary`), then each kernel (`__hipRegisterFunction`, keyed by the kernel's
//! *handle*, a global whose symbol is the mangled kernel name) and each device variable
//! (`__hipRegisterVar`, keyed by its host shadow) and each managed variable
//! (`__hipRegisterManagedVar`: its managed memory is allocated at once, and its address written
//! into the variable of every module loaded from the binary); `kernel<<<grid, block, shmem, stream>>>(…)`
//! becomes `__hipPushCallConfiguration` followed by the device stub, which pops the
//! configuration and calls `hipLaunchKernel(handle, …)`; an `atexit` destructor calls
//! `__hipUnregisterFatBinary`. The call configuration, and the older launch path
//! (`hipConfigureCall`, `hipSetupArgument`, `hipLaunchByPtr`), are [`crate::launch`]'s; this
//! module resolves the handles they launch ([`function_on`]).
//!
//! # Fat binaries and code-object selection
//!
//! The wrapper (`magic` "HIPF", version 1) points at a clang offload bundle or at a bare AMDGPU
//! ELF (docs/code-objects.md §3; both read by `amdhsa`, the one code-object reader). Nothing is
//! read at registration: on the first use on a device the bundle entry that runs on the device
//! and states the most features is loaded as a module (docs/code-objects.md §2), so a process
//! registering hundreds of fat binaries loads only those it launches from. A code object that
//! cannot be loaded answers the real cause (`hipErrorInvalidImage`, `hipErrorOutOfMemory`, …).
//!
//! When no entry suits the device, the launch (or symbol lookup) answers
//! `hipErrorNoBinaryForGpu` (209), CUDA's `cudaErrorNoKernelImageForDevice`. HIP's releases
//! disagree here: HIP 5.2 aborts the process at initialisation with a message naming that error,
//! clr of 2024 answers `hipErrorInvalidDeviceFunction` at the launch, and the newest clr
//! `hipErrorInvalidImage` at the first launch and `hipErrorInvalidKernelFile` after it (README,
//! "HIP C ABI"). Compressed bundles (`CCOB`) are `hipErrorNotSupported`.
//!
//! On the emulated GPU the chosen code object's kernels execute their machine code (or host
//! twins: `AQUEDUCT_EMU_KERNELS`, docs/executor.md).

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use crate::code_objects::FunctionEntry;
use crate::error::{
    api, Hip, HipResult, INVALID_DEVICE_FUNCTION, INVALID_MEMCPY_DIRECTION, INVALID_SYMBOL, INVALID_VALUE,
    NOT_SUPPORTED, NO_BINARY_FOR_GPU,
};
use crate::global::{global, global_if_created, lock, Global};
use crate::memory::{check_capturing, memcpy_on, memcpy_sync};
use crate::module::{bundle_size, elf_size, entry_for, load_on, module_function, module_variable, unload};
use crate::{put, stream_of, Dim3, Handle};

/// `__hipFatMAGIC2`: "HIPF".
const FAT_BINARY_MAGIC: u32 = 0x4849_5046;

/// `__CudaFatBinaryWrapper` (24 bytes on x86-64).
#[repr(C)]
struct FatBinaryWrapper {
    magic: u32,
    version: u32,
    binary: *const u8,
    unused: *const c_void,
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

/// A registered managed variable (`__managed__`): its fat binary, its device-side name (a
/// pointer-sized variable in the code object) and the managed memory behind it.
struct ManagedVariable {
    binary: usize,
    name: String,
    memory: u64,
}

#[derive(Default)]
struct Registry {
    /// By handle (the address `__hipRegisterFatBinary` returned).
    binaries: HashMap<usize, Binary>,
    /// Handle by blob address (a blob registered twice gets the same handle, as in HIP).
    handles: HashMap<usize, usize>,
    /// By kernel handle.
    functions: HashMap<usize, Function>,
    /// Kernel handle by kernel object, for every function resolved on a device: a graph's or a
    /// capture's dispatch read back names its kernel in one lookup, however many are registered.
    by_object: HashMap<u64, usize>,
    /// By host shadow address.
    variables: HashMap<usize, Variable>,
    /// In registration order.
    managed: Vec<ManagedVariable>,
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
    if let Ok(module) = r {
        // Each managed variable of the code object holds the address of its managed memory.
        for v in reg.managed.iter().filter(|v| v.binary == handle) {
            if let Ok((addr, size)) = module_variable(g, module, &v.name) {
                let bytes = v.memory.to_le_bytes();
                let n = size.min(bytes.len() as u64);
                memcpy_sync(g, addr, bytes.as_ptr() as usize as u64, n)?;
            }
        }
    }
    r
}

fn load_for(g: &Global, blob: usize, device: u32) -> HipResult<usize> {
    let blob = blob as *const u8;
    // SAFETY: registered blobs are what clang placed in `.hip_fatbin` (the caller of
    // `__hipRegisterFatBinary` vouched for them): a complete bundle or ELF, or at least 24
    // readable bytes of something else; they stay mapped until unregistered.
    let head = unsafe { std::slice::from_raw_parts(blob, 24) };
    let code = if head.starts_with(amdhsa::bundle::COMPRESSED_MAGIC) {
        return Err(NOT_SUPPORTED);
    } else if head == amdhsa::bundle::MAGIC {
        // SAFETY: as above: a complete bundle.
        let size = unsafe { bundle_size(blob) }?;
        // SAFETY: the bundle spans `size` bytes.
        entry_for(g, unsafe { std::slice::from_raw_parts(blob, size) }, device)?
    } else {
        // SAFETY: as above: a complete ELF, or 24 readable bytes that are not one.
        let size = unsafe { elf_size(blob) }.map_err(|_| NO_BINARY_FOR_GPU)?;
        // SAFETY: a complete ELF of `size` bytes.
        unsafe { std::slice::from_raw_parts(blob, size) }
    };
    load_on(g, device, code)
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
        reg.by_object.insert(entry.object, key);
    }
    Ok(entry)
}

/// The kernel handle whose function (on any device) dispatches `object`.
pub(crate) fn handle_of_object(object: u64) -> Option<usize> {
    lock(&REGISTRY).by_object.get(&object).copied()
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

/// `__hipRegisterManagedVar`: allocates the managed memory of a `__managed__` variable
/// (`hipMallocManaged`), fills it with the initial value, and stores its address in the host's
/// pointer slot; each module loaded from the fat binary gets the address in its device-side
/// variable `name`. A failed allocation leaves the slot NULL (the call returns nothing).
///
/// # Safety
/// `pointer` is NULL or valid for writes; `init` is NULL or valid for reading `size` bytes;
/// `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn __hipRegisterManagedVar(
    modules: *mut c_void,
    pointer: *mut *mut c_void,
    init: *const c_void,
    name: *const c_char,
    size: usize,
    _align: c_uint,
) {
    // SAFETY: the caller's contract.
    let Some(name) = (unsafe { self::name(name) }) else { return };
    if pointer.is_null() || size == 0 {
        return;
    }
    // SAFETY: the caller's contract: `pointer` is valid for writes.
    if unsafe { crate::managed::hipMallocManaged(pointer, size, 1) } != 0 {
        return;
    }
    // SAFETY: just written by `hipMallocManaged`.
    let memory = unsafe { pointer.read() };
    if !init.is_null() {
        // SAFETY: managed memory is host memory of `size` bytes here (crate::managed); `init`
        // holds `size` bytes by the caller's contract.
        unsafe { std::ptr::copy_nonoverlapping(init.cast::<u8>(), memory.cast::<u8>(), size) };
    }
    let mut reg = lock(&REGISTRY);
    reg.managed.push(ManagedVariable { binary: modules as usize, name, memory: memory as usize as u64 });
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
        let Registry { functions, by_object, .. } = &mut *reg;
        by_object.retain(|_, k| functions.contains_key(k));
        reg.variables.retain(|_, v| v.binary != h);
        let managed: Vec<u64> = reg.managed.iter().filter(|v| v.binary == h).map(|v| v.memory).collect();
        reg.managed.retain(|v| v.binary != h);
        (b, managed)
    };
    let (binary, managed) = binary;
    crate::global::invalidate_launches();
    if let Some(g) = global_if_created() {
        if !SYNCHRONIZED.swap(true, Ordering::AcqRel) {
            let _ = g.rt.device_synchronize();
        }
        for module in binary.devices.into_values().flatten() {
            let _ = unload(g, module);
        }
        for memory in managed {
            let _ = crate::memory::free(memory as usize as *mut c_void);
        }
    }
    // SAFETY: `h` came from `Box::into_raw` in `__hipRegisterFatBinary` and was just removed
    // from the registry, so it is freed once.
    drop(unsafe { Box::from_raw(modules) });
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
