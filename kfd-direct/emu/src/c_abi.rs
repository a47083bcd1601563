//! Host twins written in C (`include/aqueduct_emu.h`): the work-group context and registrar
//! structures, twins from shared libraries named in `AQUEDUCT_TWINS`, and the process-wide list
//! [`aqd_emu_register_twin`] fills for programs linked to aqueduct.
//!
//! # The context
//!
//! A C twin is a [`Twin`] like any other: its Rust body fills an [`AqdEmuCtx`] on the stack
//! (geometry, the kernel-argument bytes, the argument layout as `{offset, size, hidden}`) and
//! calls the C function. Memory goes through `ctx->map`, which translates a range once and
//! returns a host pointer, or NULL after recording the fault; a recorded fault fails the
//! work-group whatever the body returns.
//!
//! # Libraries
//!
//! A library is loaded once per process (`dlopen`, never closed: its functions are bound to
//! kernel names from then on) and its `aqd_emu_twins_init` is called once with a registrar; the
//! twins it adds are kept and handed to every emulated machine the process builds.

use std::cell::Cell;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use crate::memory::KernelError;
use crate::twin::{KernelCtx, Twin};

/// `AQD_EMU_ABI_VERSION`.
pub const ABI_VERSION: u32 = 1;

/// Return values of a C twin (`AQD_EMU_*`).
pub mod ret {
    /// The work-group finished.
    pub const OK: i32 = 0;
    /// A memory access failed.
    pub const FAULT: i32 = 1;
    /// An illegal instruction.
    pub const TRAP: i32 = 2;
    /// The kernel never finishes.
    pub const HANG: i32 = 3;
}

/// `aqd_emu_arg`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AqdEmuArg {
    /// Byte offset in the kernel-argument segment.
    pub offset: u32,
    /// Bytes.
    pub size: u32,
    /// 1 for a `hidden_*` argument.
    pub hidden: u32,
    /// 0.
    pub reserved: u32,
}

/// `aqd_emu_ctx`.
#[repr(C)]
#[derive(Debug)]
pub struct AqdEmuCtx {
    /// [`ABI_VERSION`].
    pub abi_version: u32,
    /// The compute-unit worker.
    pub worker: u32,
    /// This work-group.
    pub workgroup_id: [u32; 3],
    /// Work-items per work-group.
    pub workgroup_size: [u32; 3],
    /// Work-items in the grid.
    pub grid_size: [u32; 3],
    /// Work-groups per dimension.
    pub workgroup_count: [u32; 3],
    /// Entries of `args`.
    pub arg_count: u32,
    /// 0.
    pub reserved: u32,
    /// The kernel-argument segment.
    pub kernarg: *const u8,
    /// Its bytes.
    pub kernarg_size: u64,
    /// The argument layout.
    pub args: *const AqdEmuArg,
    /// Checked device-memory access.
    pub map: unsafe extern "C" fn(*const AqdEmuCtx, u64, u64) -> *mut c_void,
    /// The emulator's: a `*const MapState`.
    pub imp: *mut c_void,
}

/// `aqd_emu_twin_fn`.
pub type AqdEmuTwinFn = unsafe extern "C" fn(*const AqdEmuCtx, *mut c_void) -> c_int;

/// `aqd_emu_registrar`.
#[repr(C)]
#[derive(Debug)]
pub struct AqdEmuRegistrar {
    /// [`ABI_VERSION`].
    pub abi_version: u32,
    /// 0.
    pub reserved: u32,
    /// Registers a twin.
    pub add: unsafe extern "C" fn(*mut AqdEmuRegistrar, *const c_char, Option<AqdEmuTwinFn>, *mut c_void) -> c_int,
    /// The emulator's: a `*mut Vec<Twin>`.
    pub imp: *mut c_void,
}

// The header's layout (checked again from C by the user-twin test library).
const _: () = {
    assert!(size_of::<AqdEmuArg>() == 16);
    assert!(std::mem::offset_of!(AqdEmuCtx, workgroup_id) == 8);
    assert!(std::mem::offset_of!(AqdEmuCtx, arg_count) == 56);
    assert!(std::mem::offset_of!(AqdEmuCtx, kernarg) == 64);
    assert!(std::mem::offset_of!(AqdEmuCtx, args) == 80);
    assert!(std::mem::offset_of!(AqdEmuCtx, map) == 88);
    assert!(std::mem::offset_of!(AqdEmuCtx, imp) == 96);
    assert!(std::mem::offset_of!(AqdEmuRegistrar, add) == 8);
};

/// The Rust side of one C work-group call.
struct MapState<'a, 'c> {
    ctx: &'a KernelCtx<'c>,
    fault: Cell<Option<u64>>,
}

unsafe extern "C" fn map(ctx: *const AqdEmuCtx, va: u64, bytes: u64) -> *mut c_void {
    if ctx.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: `ctx` is the context `call` built on its stack for this call (C only receives
    // it during the call); its `imp` points at the MapState living just as long.
    let state = unsafe { &*(*ctx).imp.cast::<MapState<'_, '_>>() };
    match state.ctx.mem.ptr(va, bytes) {
        Ok(p) => p.cast(),
        Err(e) => {
            if state.fault.get().is_none() {
                state.fault.set(Some(match e {
                    KernelError::MemoryFault(at) => at,
                    _ => va,
                }));
            }
            std::ptr::null_mut()
        }
    }
}

/// The registered body and its user pointer.
#[derive(Clone, Copy)]
struct CBody {
    f: AqdEmuTwinFn,
    user: *mut c_void,
}

// SAFETY: registering a body promises it may be called from any thread (the header says twins
// run on several workers at once); the user pointer is only passed back to it.
unsafe impl Send for CBody {}
// SAFETY: as for Send.
unsafe impl Sync for CBody {}

/// Most arguments laid out on the stack per call (more go to the heap).
const STACK_ARGS: usize = 32;

impl CBody {
    fn call(&self, ctx: &KernelCtx<'_>, wg: [u32; 3]) -> Result<(), KernelError> {
        let mut stack = [AqdEmuArg::default(); STACK_ARGS];
        let heap: Vec<AqdEmuArg>;
        let convert = |a: &crate::twin::KernelArg| AqdEmuArg {
            offset: a.offset,
            size: a.size,
            hidden: u32::from(a.is_hidden()),
            reserved: 0,
        };
        let args: &[AqdEmuArg] = if ctx.args.len() <= STACK_ARGS {
            for (d, a) in stack.iter_mut().zip(ctx.args) {
                *d = convert(a);
            }
            &stack[..ctx.args.len()]
        } else {
            heap = ctx.args.iter().map(convert).collect();
            &heap
        };
        let state = MapState { ctx, fault: Cell::new(None) };
        let c = AqdEmuCtx {
            abi_version: ABI_VERSION,
            worker: ctx.worker,
            workgroup_id: wg,
            workgroup_size: ctx.workgroup_size,
            grid_size: ctx.grid,
            workgroup_count: ctx.workgroup_count,
            arg_count: args.len() as u32,
            reserved: 0,
            kernarg: ctx.kernarg.as_ptr(),
            kernarg_size: ctx.kernarg.len() as u64,
            args: args.as_ptr(),
            map,
            imp: (&state as *const MapState<'_, '_>).cast_mut().cast(),
        };
        // SAFETY: the registering code vouched for the body's C signature; every pointer in
        // `c` stays valid for the call.
        let r = unsafe { (self.f)(&c, self.user) };
        if let Some(va) = state.fault.get() {
            return Err(KernelError::MemoryFault(va));
        }
        match r {
            ret::OK => Ok(()),
            ret::HANG => Err(KernelError::Hang),
            ret::FAULT => Err(KernelError::MemoryFault(0)),
            _ => Err(KernelError::Trap),
        }
    }
}

impl Twin {
    /// A twin whose body is a C function (`aqd_emu_twin_fn`), called with `user`.
    ///
    /// # Safety
    /// `body` must have the C signature of `aqd_emu_twin_fn`, stay callable for the process's
    /// life, and be callable from several threads at once with `user`.
    pub unsafe fn from_c(name: &str, body: AqdEmuTwinFn, user: *mut c_void) -> Twin {
        let b = CBody { f: body, user };
        Twin::new(name, 0, move |ctx, wg| b.call(ctx, wg))
    }
}

/// The twins registered in-process with [`aqd_emu_register_twin`].
fn process_twins() -> &'static Mutex<Vec<Twin>> {
    static TWINS: Mutex<Vec<Twin>> = Mutex::new(Vec::new());
    &TWINS
}

/// The process-wide twin registered under `name`, if any.
pub(crate) fn process_twin(name: &str) -> Option<Twin> {
    let list = process_twins().lock().unwrap_or_else(|e| e.into_inner());
    list.iter().rev().find(|t| &*t.name == name).cloned()
}

/// A C string argument as a symbol name.
///
/// # Safety
/// `symbol` is NULL or a NUL-terminated string.
unsafe fn symbol_name(symbol: *const c_char) -> Option<String> {
    if symbol.is_null() {
        return None;
    }
    // SAFETY: the caller's contract.
    let s = unsafe { CStr::from_ptr(symbol) }.to_str().ok()?;
    (!s.is_empty()).then(|| s.to_owned())
}

/// `aqd_emu_register_twin`: binds `body` to the kernel named `symbol` for every emulated GPU of
/// the process. 0 on success, -1 for a NULL, empty or non-UTF-8 symbol or a NULL body.
///
/// # Safety
/// `symbol` is NULL or a NUL-terminated string; `body` satisfies [`Twin::from_c`]'s contract.
#[no_mangle]
pub unsafe extern "C" fn aqd_emu_register_twin(
    symbol: *const c_char,
    body: Option<AqdEmuTwinFn>,
    user: *mut c_void,
) -> c_int {
    // SAFETY: the caller's contract.
    let (Some(name), Some(body)) = (unsafe { symbol_name(symbol) }, body) else { return -1 };
    // SAFETY: the caller's contract.
    let twin = unsafe { Twin::from_c(&name, body, user) };
    let mut list = process_twins().lock().unwrap_or_else(|e| e.into_inner());
    list.retain(|t| *t.name != *name);
    list.push(twin);
    0
}

unsafe extern "C" fn registrar_add(
    r: *mut AqdEmuRegistrar,
    symbol: *const c_char,
    body: Option<AqdEmuTwinFn>,
    user: *mut c_void,
) -> c_int {
    if r.is_null() {
        return -1;
    }
    // SAFETY: the caller's contract (the header's): a NUL-terminated symbol.
    let (Some(name), Some(body)) = (unsafe { symbol_name(symbol) }, body) else { return -1 };
    // SAFETY: `r` is the registrar `load_library` handed to the init function, whose `imp` is
    // its twin list, alive for the init call.
    let twins = unsafe { &mut *(*r).imp.cast::<Vec<Arc<Twin>>>() };
    // SAFETY: the library's body is a C twin (the header's contract for `add`).
    twins.push(Arc::new(unsafe { Twin::from_c(&name, body, user) }));
    0
}

/// The name a library exports.
const INIT_SYMBOL: &[u8] = b"aqd_emu_twins_init\0";

fn load_library(path: &Path) -> Result<Vec<Arc<Twin>>, String> {
    // SAFETY: loading a library runs its initialisers; naming it in AQUEDUCT_TWINS is the
    // user's request to do exactly that.
    let lib = unsafe { libloading::Library::new(path) }.map_err(|e| format!("cannot load {}: {e}", path.display()))?;
    type Init = unsafe extern "C" fn(*mut AqdEmuRegistrar) -> c_int;
    // SAFETY: the header declares the symbol with this signature.
    let init = unsafe { lib.get::<Init>(INIT_SYMBOL) }
        .map_err(|e| format!("{} does not export aqd_emu_twins_init: {e}", path.display()))?;
    let mut twins: Vec<Arc<Twin>> = Vec::new();
    let mut r = AqdEmuRegistrar {
        abi_version: ABI_VERSION,
        reserved: 0,
        add: registrar_add,
        imp: (&mut twins as *mut Vec<Arc<Twin>>).cast(),
    };
    // SAFETY: the library's init function with the registrar it expects, alive for the call.
    let rc = unsafe { init(&mut r) };
    if rc != 0 {
        return Err(format!("aqd_emu_twins_init of {} returned {rc}", path.display()));
    }
    // The twins call into the library for the rest of the process's life.
    std::mem::forget(lib);
    Ok(twins)
}

/// The twins of the libraries at `paths`, each loaded (and initialised) once per process.
pub(crate) fn library_twins(paths: &[PathBuf]) -> Result<Vec<Twin>, String> {
    type Loaded = Vec<(PathBuf, Vec<Arc<Twin>>)>;
    static LOADED: OnceLock<Mutex<Loaded>> = OnceLock::new();
    let loaded = LOADED.get_or_init(Mutex::default);
    let mut loaded = loaded.lock().unwrap_or_else(|e| e.into_inner());
    let mut out = Vec::new();
    for p in paths {
        if let Some((_, twins)) = loaded.iter().find(|(q, _)| q == p) {
            out.extend(twins.iter().map(|t| Twin::clone(t)));
            continue;
        }
        let twins = load_library(p)?;
        out.extend(twins.iter().map(|t| Twin::clone(t)));
        loaded.push((p.clone(), twins));
    }
    Ok(out)
}

/// The libraries `AQUEDUCT_TWINS` names (colon-separated; empty entries ignored).
pub fn twin_libraries_from_env() -> Vec<PathBuf> {
    std::env::var_os("AQUEDUCT_TWINS")
        .map(|v| std::env::split_paths(&v).filter(|p| !p.as_os_str().is_empty()).collect())
        .unwrap_or_default()
}
