//! Modules: code objects loaded on a device (`hipModuleLoad`, `hipModuleLoadData(Ex)`,
//! `hipModuleUnload`), their functions (`hipModuleGetFunction`) and variables
//! (`hipModuleGetGlobal`, through core's `Runtime::module_variable`), and what the registration
//! ABI ([`crate::register`]) loads from a fat binary: the entry of an offload bundle that runs on
//! the device (docs/code-objects.md §2). The tables are [`crate::code_objects`]' types, held by
//! [`crate::global::Global`]; launching is [`crate::launch`]'s.
//!
//! `hipModuleLoadDataEx`'s JIT options are checked and ignored (a finished code object has no
//! use for them). `__hipGetPCH` answers no pre-compiled header. `hipModuleGetTexRef` finds the
//! texture reference's variable as HIP does, then answers `hipErrorNotSupported`: the emulated
//! GPU cannot sample images (README, "HIP C ABI").

use std::ffi::{c_char, c_uint, c_void, CStr};
use std::sync::Arc;

use crate::code_objects::{kernel_metadata, FunctionEntry, ModuleEntry};
use crate::error::{
    api, HipResult, FILE_NOT_FOUND, INVALID_HANDLE, INVALID_IMAGE, INVALID_SYMBOL, INVALID_VALUE, NOT_FOUND,
    NOT_SUPPORTED, NO_BINARY_FOR_GPU,
};
use crate::global::{global, invalidate_launches, lock, Global};
use crate::{handle, put, Handle};

/// Tags of module and function handles (top 16 bits).
const MODULE_TAG: u64 = 0x3d0d << 48;
const FUNCTION_TAG: u64 = 0xf0c7 << 48;
const TAG_MASK: u64 = 0xffff << 48;

fn untag(h: Handle, tag: u64) -> Option<usize> {
    let v = h as usize as u64;
    (v & TAG_MASK == tag).then_some((v & !TAG_MASK) as usize)
}

/// The index in [`Global::functions`] a `hipFunction_t` names, if it is one.
pub(crate) fn function_index(h: Handle) -> Option<usize> {
    untag(h, FUNCTION_TAG)
}

/// The `hipFunction_t` of entry `i` of [`Global::functions`].
pub(crate) fn function_handle(i: usize) -> Handle {
    handle(FUNCTION_TAG | i as u64)
}

/// The size of the ELF image at `image`, from its header tables (`amdhsa::elf::extent`:
/// `hipModuleLoadData` receives no size, so the headers are trusted only as far as they are
/// self-consistent, and nothing is read before the bytes that announce it were checked).
///
/// # Safety
/// `image` points at a readable buffer that starts with `\x7fELF` only if it is a complete
/// ELF64 file (whose header tables lie inside it); any other buffer has at least 4 readable bytes.
pub(crate) unsafe fn elf_size(image: *const u8) -> HipResult<usize> {
    // SAFETY: the caller's contract: the 4 magic bytes are readable, and an ELF file's header
    // and the tables it places are (extent reads nothing else, and each only once the bytes
    // announcing it were checked).
    let read = |off: usize, len: usize| Some(unsafe { std::slice::from_raw_parts(image.add(off), len) });
    amdhsa::elf::extent(read).map_err(|_| INVALID_IMAGE)
}

/// The size of the clang offload bundle at `blob`, from its header.
///
/// # Safety
/// `blob` points at a complete bundle (every offset its header announces is readable).
pub(crate) unsafe fn bundle_size(blob: *const u8) -> HipResult<usize> {
    // SAFETY: the caller's contract.
    let read = |off: usize, len: usize| Some(unsafe { std::slice::from_raw_parts(blob.add(off), len) });
    amdhsa::bundle::extent(read).map_err(|e| if e == amdhsa::Error::Compressed { NOT_SUPPORTED } else { INVALID_IMAGE })
}

/// The code object of `bundle` for `device`: the most specific entry that runs on it
/// (docs/code-objects.md §2), or `hipErrorNoBinaryForGpu`.
pub(crate) fn entry_for<'b>(g: &Global, bundle: &'b [u8], device: u32) -> HipResult<&'b [u8]> {
    let b = amdhsa::Bundle::parse(bundle).map_err(|_| INVALID_IMAGE)?;
    let target = device_target(g, device)?;
    b.best_for(&target).map(|e| e.code).ok_or(NO_BINARY_FOR_GPU)
}

/// What `device` runs as: its processor, SRAM ECC on where it has it, XNACK off.
pub(crate) fn device_target(g: &Global, device: u32) -> HipResult<amdhsa::TargetId> {
    let gfx = g.rt.device_info(device)?.gfx_target_version;
    let processor = amdhsa::Processor::from_gfx_target_version(gfx).ok_or(NO_BINARY_FOR_GPU)?;
    Ok(amdhsa::TargetId::device(processor, false))
}

/// Loads the code object `elf` onto `device`; returns the module's index. The backend's
/// answer is HIP's: `hipErrorInvalidImage` for bytes that are not a code object,
/// `hipErrorNoBinaryForGpu` for one built for another target, `hipErrorOutOfMemory`.
pub(crate) fn load_on(g: &Global, device: u32, elf: &[u8]) -> HipResult<usize> {
    let handle = g.rt.module_load(device, elf)?;
    let image = g.rt.module_image(handle).ok().flatten();
    if let Some((base, bytes)) = image {
        lock(&g.images).insert(base, bytes);
    }
    let kernels = kernel_metadata(elf);
    let mut modules = lock(&g.modules);
    modules.push(Some(ModuleEntry { handle, kernels, image }));
    Ok(modules.len() - 1)
}

/// `hipModuleLoadData` of a code object or of an offload bundle (as clr takes either).
fn load(g: &Global, image: &[u8]) -> HipResult<Handle> {
    let device = g.rt.device()?;
    let code = if image.starts_with(amdhsa::bundle::MAGIC) { entry_for(g, image, device)? } else { image };
    let i = load_on(g, device, code)?;
    Ok(handle(MODULE_TAG | i as u64))
}

/// The device address and size of data symbol `name` of module `module`:
/// `hipErrorInvalidSymbol` if the code object has no such variable.
pub(crate) fn module_variable(g: &Global, module: usize, name: &str) -> HipResult<(u64, u64)> {
    let h = lock(&g.modules).get(module).and_then(Option::as_ref).map(|m| m.handle).ok_or(INVALID_HANDLE)?;
    let v = g.rt.module_variable(h, name)?;
    Ok((v.address, v.size))
}

/// Unloads module `module` (no launch of its kernels may still be pending).
pub(crate) fn unload(g: &Global, module: usize) -> HipResult {
    let entry = lock(&g.modules).get_mut(module).and_then(Option::take).ok_or(INVALID_HANDLE)?;
    if let Some((base, _)) = entry.image {
        lock(&g.images).remove(&base);
    }
    Ok(g.rt.module_unload(entry.handle)?)
}

/// Function `name` of module `module`: `hipErrorNotFound` if the code object has no such kernel.
pub(crate) fn module_function(g: &Global, module: usize, name: &str) -> HipResult<FunctionEntry> {
    let modules = lock(&g.modules);
    let m = modules.get(module).and_then(Option::as_ref).ok_or(INVALID_HANDLE)?;
    let k = g.rt.module_kernel(m.handle, name)?;
    let meta = m.kernels.as_ref().and_then(|ks| ks.get(name));
    if k.dynamic_stack {
        // The stack comes on top of the fixed private segment: the device's scratch holds it
        // before the first launch (docs/code-objects.md §9).
        let device = g.rt.module_device(m.handle)?;
        g.rt.reserve_scratch(device, k.private_segment_size.max(crate::properties::stack_size_limit()))?;
    }
    Ok(FunctionEntry {
        name: Arc::from(name),
        module,
        object: k.kernel_object,
        group: k.group_segment_size,
        private: k.private_segment_size,
        dynamic_stack: k.dynamic_stack,
        kernarg_size: k.kernarg_size as usize,
        args: meta.map(|m| m.args.clone()),
        hidden: meta.map_or_else(|| Arc::from([]), |m| m.hidden.clone()),
        resources: meta.map(|m| m.resources),
    })
}

/// The module index a `hipModule_t` names (`hipErrorInvalidHandle` for anything else).
pub(crate) fn module_index(module: Handle) -> HipResult<usize> {
    untag(module, MODULE_TAG).ok_or(INVALID_HANDLE)
}

/// The function a `hipFunction_t` names, if its module is still loaded; anything else is
/// `hipErrorInvalidHandle`.
pub(crate) fn module_function_of(g: &Global, function: Handle) -> HipResult<FunctionEntry> {
    let i = untag(function, FUNCTION_TAG).ok_or(INVALID_HANDLE)?;
    let f = lock(&g.functions).get(i).cloned().ok_or(INVALID_HANDLE)?;
    if lock(&g.modules).get(f.module).and_then(Option::as_ref).is_none() {
        return Err(INVALID_HANDLE);
    }
    Ok(f)
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

/// `hipModuleLoadData`: loads the AMDHSA code object (ELF) at `image`, or the device's code
/// object of the clang offload bundle there.
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
        // SAFETY: the caller's contract: a complete ELF file or bundle (its 24 magic bytes are
        // readable either way: an ELF header is 64).
        let bundle = unsafe { std::slice::from_raw_parts(image.cast::<u8>(), 4) } == &amdhsa::bundle::MAGIC[..4];
        let size = if bundle {
            // SAFETY: as above: a complete bundle.
            unsafe { bundle_size(image.cast()) }?
        } else {
            // SAFETY: as above: a complete ELF file.
            unsafe { elf_size(image.cast()) }?
        };
        // SAFETY: as above; the file spans `size` bytes.
        let bytes = unsafe { std::slice::from_raw_parts(image.cast::<u8>(), size) };
        let h = load(g, bytes)?;
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
        let name = unsafe { CStr::from_ptr(name) }.to_str().map_err(|_| crate::error::NOT_FOUND)?;
        if name.is_empty() {
            return Err(INVALID_VALUE);
        }
        let i = untag(module, MODULE_TAG).ok_or(INVALID_HANDLE)?;
        let entry = module_function(g, i, name)?;
        let mut functions = lock(&g.functions);
        functions.push(entry);
        let h = function_handle(functions.len() - 1);
        // SAFETY: the caller's contract.
        unsafe { put(function, h) }
    })
}

/// A name from C: NULL or empty is `hipErrorInvalidValue`, and one that is not UTF-8 names
/// nothing (`hipErrorNotFound`).
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
unsafe fn name<'a>(name: *const c_char) -> HipResult<&'a str> {
    if name.is_null() {
        return Err(INVALID_VALUE);
    }
    // SAFETY: the caller's contract.
    let s = unsafe { CStr::from_ptr(name) }.to_str().map_err(|_| NOT_FOUND)?;
    if s.is_empty() {
        return Err(INVALID_VALUE);
    }
    Ok(s)
}

/// The device address and size of variable `name` of `module`; a name the code object does
/// not define is `hipErrorNotFound` (CUDA's `CUDA_ERROR_NOT_FOUND`).
fn variable(module: Handle, name: &str) -> HipResult<(u64, u64)> {
    let g = global()?;
    let i = module_index(module)?;
    module_variable(g, i, name).map_err(|e| if e == INVALID_SYMBOL { NOT_FOUND } else { e })
}

/// `hipModuleGetGlobal`: the device address and size of a module's variable; either
/// out-pointer may be NULL (it is then not written, as in CUDA), but not both.
///
/// # Safety
/// `dptr` and `bytes` are NULL or valid for writes; `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn hipModuleGetGlobal(
    dptr: *mut *mut c_void,
    bytes: *mut usize,
    module: Handle,
    name: *const c_char,
) -> i32 {
    api(|| {
        global()?;
        if dptr.is_null() && bytes.is_null() {
            return Err(INVALID_VALUE);
        }
        // SAFETY: the caller's contract.
        let name = unsafe { self::name(name) }?;
        let (addr, size) = variable(module, name)?;
        if !dptr.is_null() {
            // SAFETY: the caller's contract; non-null.
            unsafe { put(dptr, addr as usize as *mut c_void) }?;
        }
        if !bytes.is_null() {
            // SAFETY: the caller's contract; non-null.
            unsafe { put(bytes, size as usize) }?;
        }
        Ok(())
    })
}

/// `hipModuleLoadDataEx`: `hipModuleLoadData`; the JIT options (`hipJitOption`) are checked to
/// be readable and ignored, as HIP ignores them (the image is a finished code object).
///
/// # Safety
/// As `hipModuleLoadData`; `options` and `values` are NULL or hold `count` entries.
#[no_mangle]
pub unsafe extern "C" fn hipModuleLoadDataEx(
    module: *mut Handle,
    image: *const c_void,
    count: c_uint,
    options: *mut c_uint,
    values: *mut *mut c_void,
) -> i32 {
    if count > 0 && (options.is_null() || values.is_null()) {
        return api(|| {
            global()?;
            Err(INVALID_VALUE)
        });
    }
    // SAFETY: forwarded caller contract.
    unsafe { hipModuleLoadData(module, image) }
}

/// `hipModuleGetTexRef`: the texture reference `name` of `module`: NULL arguments are
/// `hipErrorInvalidValue`, a name the code object lacks `hipErrorNotFound`, and one it has
/// `hipErrorNotSupported` (no texture sampling on this device).
///
/// # Safety
/// `tex_ref` is NULL or valid for writes; `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn hipModuleGetTexRef(tex_ref: *mut *mut c_void, module: Handle, name: *const c_char) -> i32 {
    api(|| {
        global()?;
        if tex_ref.is_null() {
            return Err(INVALID_VALUE);
        }
        // SAFETY: the caller's contract.
        let name = unsafe { self::name(name) }?;
        variable(module, name)?;
        Err(NOT_SUPPORTED)
    })
}

/// `__hipGetPCH`: the pre-compiled header HIP's online compiler (`hiprtc`) uses; this library
/// carries none, so NULL and 0 bytes.
///
/// # Safety
/// `pch` and `size` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn __hipGetPCH(pch: *mut *const c_char, size: *mut c_uint) {
    if !pch.is_null() {
        // SAFETY: the caller's contract; non-null.
        unsafe { pch.write(std::ptr::null()) };
    }
    if !size.is_null() {
        // SAFETY: the caller's contract; non-null.
        unsafe { size.write(0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
