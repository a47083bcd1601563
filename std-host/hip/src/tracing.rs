//! The profiler and tracing entry points of HIP 5.2: `hipProfilerStart`/`Stop`, the API and
//! activity callbacks (`hipRegisterApiCallback`, `hipRemoveApiCallback`,
//! `hipRegisterActivityCallback`, `hipRemoveActivityCallback`, `hipInitActivityCallback`,
//! `hipEnableActivityCallback`), the names they report (`hipApiName`, `hipGetCmdName`,
//! `hipKernelNameRef`, `hipKernelNameRefByPtr`) and the debugger's build queries
//! (`amd_dbgapi_get_build_name`, `…_git_hash`, `…_build_id`).
//!
//! No profiler or tracer attaches to this library (aqueduct's own tracing is `aqueduct trace`),
//! so starting or stopping one and registering callbacks answer `hipErrorNotSupported` (HIP
//! 5.2's answer to `hipProfilerStart`/`Stop` as well), `hipEnableActivityCallback` answers
//! false and `hipInitActivityCallback` does nothing. The names are real: HIP 5.2's API ids
//! (`crate::api_names`), clr's command names, a function's symbol.

use std::collections::HashMap;
use std::ffi::{c_char, c_void, CString};
use std::sync::{LazyLock, Mutex};

use crate::api_names::API_NAMES;
use crate::error::{api, NOT_SUPPORTED};
use crate::global::{global, lock};
use crate::launch::resolve;
use crate::module::module_function_of;
use crate::{stream_of, Handle};

/// `hipProfilerStart`: no profiler attaches here (`hipErrorNotSupported`, as HIP 5.2).
#[no_mangle]
pub extern "C" fn hipProfilerStart() -> i32 {
    api(|| {
        global()?;
        Err(NOT_SUPPORTED)
    })
}

/// `hipProfilerStop`: as `hipProfilerStart`.
#[no_mangle]
pub extern "C" fn hipProfilerStop() -> i32 {
    hipProfilerStart()
}

/// `hipRegisterApiCallback`: no API callbacks are called here (`hipErrorNotSupported`).
#[no_mangle]
pub extern "C" fn hipRegisterApiCallback(_id: u32, _fun: *mut c_void, _arg: *mut c_void) -> i32 {
    api(|| Err(NOT_SUPPORTED))
}

/// `hipRemoveApiCallback`: as `hipRegisterApiCallback`.
#[no_mangle]
pub extern "C" fn hipRemoveApiCallback(_id: u32) -> i32 {
    api(|| Err(NOT_SUPPORTED))
}

/// `hipRegisterActivityCallback`: no activity records are produced here
/// (`hipErrorNotSupported`).
#[no_mangle]
pub extern "C" fn hipRegisterActivityCallback(_id: u32, _fun: *mut c_void, _arg: *mut c_void) -> i32 {
    api(|| Err(NOT_SUPPORTED))
}

/// `hipRemoveActivityCallback`: as `hipRegisterActivityCallback`.
#[no_mangle]
pub extern "C" fn hipRemoveActivityCallback(_id: u32) -> i32 {
    api(|| Err(NOT_SUPPORTED))
}

/// `hipInitActivityCallback`: nothing to initialise (no activity records).
#[no_mangle]
pub extern "C" fn hipInitActivityCallback(_id_callback: *mut c_void, _op_callback: *mut c_void, _arg: *mut c_void) {}

/// `hipEnableActivityCallback`: false (the callback cannot be enabled: no activity records).
#[no_mangle]
pub extern "C" fn hipEnableActivityCallback(_op: u32, _enable: bool) -> bool {
    false
}

/// A C string for `s` that lives as long as the process (one per distinct string).
fn c_str(s: &str) -> *const c_char {
    static STRINGS: LazyLock<Mutex<HashMap<String, CString>>> = LazyLock::new(Default::default);
    let mut strings = lock(&STRINGS);
    let c = strings.entry(s.to_owned()).or_insert_with(|| CString::new(s.replace('\0', "")).unwrap_or_default());
    // The CString's buffer stays where it is while the map holds it, which is forever.
    c.as_ptr()
}

/// `hipApiName`: the name of a `HIP_API_ID_*` of HIP 5.2, `"unknown"` for any other id.
#[no_mangle]
pub extern "C" fn hipApiName(id: u32) -> *const c_char {
    let name = (id as usize).checked_sub(1).and_then(|i| API_NAMES.get(i)).copied().unwrap_or("unknown");
    c_str(name)
}

/// `hipGetCmdName`: the name of a command kind (`HipVdiCommandKind`, OpenCL's command types) as
/// clr names them; `"Unknown"` for others.
#[no_mangle]
pub extern "C" fn hipGetCmdName(id: u32) -> *const c_char {
    let name = match id {
        0 => "InternalMarker",
        0x11FE => "Marker",
        0x11F0 => "KernelExecution",
        0x11F3 => "CopyDeviceToHost",
        0x11F4 => "CopyHostToDevice",
        0x11F5 => "CopyDeviceToDevice",
        0x1201 => "CopyDeviceToHost2D",
        0x1202 => "CopyHostToDevice2D",
        0x1203 => "CopyDeviceToDevice2D",
        0x1207 => "FillBuffer",
        _ => "Unknown",
    };
    c_str(name)
}

/// `hipKernelNameRef`: the symbol name of a `hipFunction_t`; NULL for anything else.
#[no_mangle]
pub extern "C" fn hipKernelNameRef(function: Handle) -> *const c_char {
    let Ok(g) = global() else { return std::ptr::null() };
    module_function_of(g, function).map_or(std::ptr::null(), |f| c_str(&f.name))
}

/// `hipKernelNameRefByPtr`: the symbol name of the kernel a handle (host kernel, registered
/// kernel, `hipFunction_t`) names on `stream`'s device; NULL when it names none.
#[no_mangle]
pub extern "C" fn hipKernelNameRefByPtr(function: *const c_void, stream: Handle) -> *const c_char {
    let Ok(g) = global() else { return std::ptr::null() };
    if function.is_null() {
        return std::ptr::null();
    }
    let Ok(device) = g.rt.stream_device(stream_of(stream)) else { return std::ptr::null() };
    resolve(g, function, device).map_or(std::ptr::null(), |f| c_str(&f.name))
}

/// `amd_dbgapi_get_build_name`: this library's name and version.
#[no_mangle]
pub extern "C" fn amd_dbgapi_get_build_name() -> *const c_char {
    concat!("aqueduct-hip ", env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// `amd_dbgapi_get_git_hash`: empty (the build records no commit).
#[no_mangle]
pub extern "C" fn amd_dbgapi_get_git_hash() -> *const c_char {
    c"".as_ptr()
}

/// `amd_dbgapi_get_build_id`: 0 (no build number).
#[no_mangle]
pub extern "C" fn amd_dbgapi_get_build_id() -> usize {
    0
}
