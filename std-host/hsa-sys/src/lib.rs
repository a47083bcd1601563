//! # hsa-sys
//!
//! A hand-written, minimal binding of the HSA runtime (`libhsa-runtime64`, ROCr) and the AMD
//! extensions that aqueduct's ROCr backend calls — the types, the constants and about fifty
//! functions — loaded at run time with `libloading` ([`Hsa::load`]), so nothing links against
//! ROCm and a machine without it still runs everything else.
//!
//! Layouts follow `hsa.h`, `hsa_ext_amd.h` and `amd_hsa_queue.h` (ROCm 5.2, x86-64, large
//! model); `const` asserts pin sizes and offsets here, and a test compares them with the system
//! headers when they are installed (`libhsa-runtime-dev`). Status codes are [`Status`], a newtype
//! with constants, never an enum.

#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_void, CStr};
use std::fmt;
use std::path::{Path, PathBuf};

/// `hsa_status_t`.
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Status(pub u32);

impl Status {
    /// `HSA_STATUS_SUCCESS`.
    pub const SUCCESS: Status = Status(0);
    /// `HSA_STATUS_INFO_BREAK`.
    pub const INFO_BREAK: Status = Status(1);
    /// `HSA_STATUS_ERROR`.
    pub const ERROR: Status = Status(0x1000);
    /// `HSA_STATUS_ERROR_INVALID_ARGUMENT`.
    pub const ERROR_INVALID_ARGUMENT: Status = Status(0x1001);
    /// `HSA_STATUS_ERROR_INVALID_QUEUE_CREATION`.
    pub const ERROR_INVALID_QUEUE_CREATION: Status = Status(0x1002);
    /// `HSA_STATUS_ERROR_INVALID_ALLOCATION`.
    pub const ERROR_INVALID_ALLOCATION: Status = Status(0x1003);
    /// `HSA_STATUS_ERROR_INVALID_AGENT`.
    pub const ERROR_INVALID_AGENT: Status = Status(0x1004);
    /// `HSA_STATUS_ERROR_INVALID_REGION`.
    pub const ERROR_INVALID_REGION: Status = Status(0x1005);
    /// `HSA_STATUS_ERROR_INVALID_SIGNAL`.
    pub const ERROR_INVALID_SIGNAL: Status = Status(0x1006);
    /// `HSA_STATUS_ERROR_INVALID_QUEUE`.
    pub const ERROR_INVALID_QUEUE: Status = Status(0x1007);
    /// `HSA_STATUS_ERROR_OUT_OF_RESOURCES` (what `hsa_init` returns without `/dev/kfd`).
    pub const ERROR_OUT_OF_RESOURCES: Status = Status(0x1008);
    /// `HSA_STATUS_ERROR_INVALID_PACKET_FORMAT`.
    pub const ERROR_INVALID_PACKET_FORMAT: Status = Status(0x1009);
    /// `HSA_STATUS_ERROR_RESOURCE_FREE`.
    pub const ERROR_RESOURCE_FREE: Status = Status(0x100A);
    /// `HSA_STATUS_ERROR_NOT_INITIALIZED`.
    pub const ERROR_NOT_INITIALIZED: Status = Status(0x100B);
    /// `HSA_STATUS_ERROR_INVALID_CODE_OBJECT`.
    pub const ERROR_INVALID_CODE_OBJECT: Status = Status(0x1010);
    /// `HSA_STATUS_ERROR_INVALID_SYMBOL_NAME`.
    pub const ERROR_INVALID_SYMBOL_NAME: Status = Status(0x1013);
    /// `HSA_STATUS_ERROR_EXCEPTION` (a queue error: the packet processor stopped).
    pub const ERROR_EXCEPTION: Status = Status(0x1016);
    /// `HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS`.
    pub const ERROR_INCOMPATIBLE_ARGUMENTS: Status = Status(0x100D);
    /// `HSA_STATUS_ERROR_FATAL`.
    pub const ERROR_FATAL: Status = Status(0x1026);
    /// `HSA_STATUS_ERROR_INVALID_MEMORY_POOL` (AMD).
    pub const ERROR_INVALID_MEMORY_POOL: Status = Status(40);
    /// `HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION` (AMD).
    pub const ERROR_MEMORY_APERTURE_VIOLATION: Status = Status(41);
    /// `HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION` (AMD).
    pub const ERROR_ILLEGAL_INSTRUCTION: Status = Status(42);
    /// `HSA_STATUS_ERROR_MEMORY_FAULT` (AMD).
    pub const ERROR_MEMORY_FAULT: Status = Status(43);

    /// Whether this is `SUCCESS`.
    pub fn is_ok(self) -> bool {
        self == Status::SUCCESS
    }

    /// `Ok(())` for `SUCCESS`, else `Err(self)`.
    pub fn ok(self) -> Result<(), Status> {
        if self.is_ok() {
            Ok(())
        } else {
            Err(self)
        }
    }

    /// The constant's name, if this is one of the constants above.
    pub fn name(self) -> Option<&'static str> {
        Some(match self {
            Status::SUCCESS => "HSA_STATUS_SUCCESS",
            Status::INFO_BREAK => "HSA_STATUS_INFO_BREAK",
            Status::ERROR => "HSA_STATUS_ERROR",
            Status::ERROR_INVALID_ARGUMENT => "HSA_STATUS_ERROR_INVALID_ARGUMENT",
            Status::ERROR_INVALID_QUEUE_CREATION => "HSA_STATUS_ERROR_INVALID_QUEUE_CREATION",
            Status::ERROR_INVALID_ALLOCATION => "HSA_STATUS_ERROR_INVALID_ALLOCATION",
            Status::ERROR_INVALID_AGENT => "HSA_STATUS_ERROR_INVALID_AGENT",
            Status::ERROR_INVALID_REGION => "HSA_STATUS_ERROR_INVALID_REGION",
            Status::ERROR_INVALID_SIGNAL => "HSA_STATUS_ERROR_INVALID_SIGNAL",
            Status::ERROR_INVALID_QUEUE => "HSA_STATUS_ERROR_INVALID_QUEUE",
            Status::ERROR_OUT_OF_RESOURCES => "HSA_STATUS_ERROR_OUT_OF_RESOURCES",
            Status::ERROR_INVALID_PACKET_FORMAT => "HSA_STATUS_ERROR_INVALID_PACKET_FORMAT",
            Status::ERROR_RESOURCE_FREE => "HSA_STATUS_ERROR_RESOURCE_FREE",
            Status::ERROR_NOT_INITIALIZED => "HSA_STATUS_ERROR_NOT_INITIALIZED",
            Status::ERROR_INVALID_CODE_OBJECT => "HSA_STATUS_ERROR_INVALID_CODE_OBJECT",
            Status::ERROR_INVALID_SYMBOL_NAME => "HSA_STATUS_ERROR_INVALID_SYMBOL_NAME",
            Status::ERROR_EXCEPTION => "HSA_STATUS_ERROR_EXCEPTION",
            Status::ERROR_INCOMPATIBLE_ARGUMENTS => "HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS",
            Status::ERROR_MEMORY_APERTURE_VIOLATION => "HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION",
            Status::ERROR_ILLEGAL_INSTRUCTION => "HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION",
            Status::ERROR_FATAL => "HSA_STATUS_ERROR_FATAL",
            Status::ERROR_INVALID_MEMORY_POOL => "HSA_STATUS_ERROR_INVALID_MEMORY_POOL",
            Status::ERROR_MEMORY_FAULT => "HSA_STATUS_ERROR_MEMORY_FAULT",
            _ => return None,
        })
    }
}

impl fmt::Debug for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n} ({:#x})", self.0),
            None => write!(f, "hsa_status_t {:#x}", self.0),
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl std::error::Error for Status {}

macro_rules! handle {
    ($($(#[$m:meta])* $name:ident),*) => { $(
        $(#[$m])*
        #[repr(C)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $name {
            /// The opaque handle.
            pub handle: u64,
        }
    )* };
}

handle!(
    /// `hsa_agent_t`.
    hsa_agent_t,
    /// `hsa_signal_t` (its handle is the address of the `amd_signal_t`).
    hsa_signal_t,
    /// `hsa_amd_memory_pool_t`.
    hsa_amd_memory_pool_t,
    /// `hsa_executable_t`.
    hsa_executable_t,
    /// `hsa_executable_symbol_t`.
    hsa_executable_symbol_t,
    /// `hsa_code_object_reader_t`.
    hsa_code_object_reader_t
);

/// `hsa_queue_t` (large model, little endian).
#[repr(C)]
#[derive(Debug)]
pub struct hsa_queue_t {
    /// `hsa_queue_type32_t`.
    pub type_: u32,
    /// `hsa_queue_feature_t` bits.
    pub features: u32,
    /// The ring.
    pub base_address: *mut c_void,
    /// The doorbell signal.
    pub doorbell_signal: hsa_signal_t,
    /// Packets in the ring.
    pub size: u32,
    /// Reserved.
    pub reserved1: u32,
    /// Queue id.
    pub id: u64,
}

/// Offsets inside `amd_queue_t` (`amd_hsa_queue.h`), whose first 40 bytes are the `hsa_queue_t`.
pub mod amd_queue {
    /// `write_dispatch_id` (the AQL write index).
    pub const WRITE_DISPATCH_ID: usize = 56;
    /// `read_dispatch_id` (the AQL read index).
    pub const READ_DISPATCH_ID: usize = 128;
    /// `sizeof(amd_queue_t)`.
    pub const SIZE: usize = 256;
}

/// `hsa_amd_gpu_memory_fault_info_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hsa_amd_gpu_memory_fault_info_t {
    /// The faulting agent.
    pub agent: hsa_agent_t,
    /// The address.
    pub virtual_address: u64,
    /// `hsa_amd_memory_fault_reason_t` bits.
    pub fault_reason_mask: u32,
}

/// `hsa_amd_event_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hsa_amd_event_t {
    /// `hsa_amd_event_type_t`.
    pub event_type: u32,
    /// The union's one member.
    pub memory_fault: hsa_amd_gpu_memory_fault_info_t,
}

const _: () = {
    assert!(std::mem::size_of::<hsa_queue_t>() == 40);
    assert!(std::mem::offset_of!(hsa_queue_t, base_address) == 8);
    assert!(std::mem::offset_of!(hsa_queue_t, doorbell_signal) == 16);
    assert!(std::mem::offset_of!(hsa_queue_t, size) == 24);
    assert!(std::mem::offset_of!(hsa_queue_t, id) == 32);
    assert!(std::mem::size_of::<hsa_amd_gpu_memory_fault_info_t>() == 24);
    assert!(std::mem::size_of::<hsa_amd_event_t>() == 32);
    assert!(std::mem::offset_of!(hsa_amd_event_t, memory_fault) == 8);
    assert!(std::mem::size_of::<hsa_agent_t>() == 8);
    assert!(std::mem::size_of::<Status>() == 4);
};

/// Constants of the enumerations the backend uses.
pub mod consts {
    /// `HSA_DEVICE_TYPE_CPU`.
    pub const DEVICE_TYPE_CPU: u32 = 0;
    /// `HSA_DEVICE_TYPE_GPU`.
    pub const DEVICE_TYPE_GPU: u32 = 1;
    /// `HSA_AGENT_INFO_NAME` (`char[64]`).
    pub const AGENT_INFO_NAME: u32 = 0;
    /// `HSA_AGENT_INFO_PROFILE`.
    pub const AGENT_INFO_PROFILE: u32 = 4;
    /// `HSA_AGENT_INFO_QUEUE_MAX_SIZE`.
    pub const AGENT_INFO_QUEUE_MAX_SIZE: u32 = 14;
    /// `HSA_AGENT_INFO_DEVICE`.
    pub const AGENT_INFO_DEVICE: u32 = 17;
    /// `HSA_AMD_AGENT_INFO_CHIP_ID`.
    pub const AMD_AGENT_INFO_CHIP_ID: u32 = 0xA000;
    /// `HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT`.
    pub const AMD_AGENT_INFO_COMPUTE_UNIT_COUNT: u32 = 0xA002;
    /// `HSA_AMD_AGENT_INFO_MAX_CLOCK_FREQUENCY`.
    pub const AMD_AGENT_INFO_MAX_CLOCK_FREQUENCY: u32 = 0xA003;
    /// `HSA_AMD_AGENT_INFO_PRODUCT_NAME` (`char[64]`).
    pub const AMD_AGENT_INFO_PRODUCT_NAME: u32 = 0xA009;
    /// `HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY`.
    pub const SYSTEM_INFO_TIMESTAMP_FREQUENCY: u32 = 3;
    /// `HSA_QUEUE_TYPE_MULTI`.
    pub const QUEUE_TYPE_MULTI: u32 = 0;
    /// `HSA_WAIT_STATE_BLOCKED`.
    pub const WAIT_STATE_BLOCKED: u32 = 0;
    /// `HSA_WAIT_STATE_ACTIVE`.
    pub const WAIT_STATE_ACTIVE: u32 = 1;
    /// `HSA_PROFILE_BASE`.
    pub const PROFILE_BASE: u32 = 0;
    /// `HSA_PROFILE_FULL`.
    pub const PROFILE_FULL: u32 = 1;
    /// `HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT`.
    pub const FLOAT_ROUNDING_MODE_DEFAULT: u32 = 0;
    /// `HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE`.
    pub const SYMBOL_INFO_KERNARG_SEGMENT_SIZE: u32 = 11;
    /// `HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_GROUP_SEGMENT_SIZE`.
    pub const SYMBOL_INFO_GROUP_SEGMENT_SIZE: u32 = 13;
    /// `HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_PRIVATE_SEGMENT_SIZE`.
    pub const SYMBOL_INFO_PRIVATE_SEGMENT_SIZE: u32 = 14;
    /// `HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT`.
    pub const SYMBOL_INFO_KERNEL_OBJECT: u32 = 22;
    /// `HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS`.
    pub const SYMBOL_INFO_VARIABLE_ADDRESS: u32 = 21;
    /// `HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE`.
    pub const SYMBOL_INFO_VARIABLE_SIZE: u32 = 9;
    /// `HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_ALIGNMENT`.
    pub const SYMBOL_INFO_KERNARG_SEGMENT_ALIGNMENT: u32 = 12;
    /// `HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_DYNAMIC_CALLSTACK`.
    pub const SYMBOL_INFO_KERNEL_DYNAMIC_CALLSTACK: u32 = 15;
    /// `HSA_AMD_MEMORY_POOL_INFO_SEGMENT`.
    pub const POOL_INFO_SEGMENT: u32 = 0;
    /// `HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS`.
    pub const POOL_INFO_GLOBAL_FLAGS: u32 = 1;
    /// `HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED`.
    pub const POOL_INFO_RUNTIME_ALLOC_ALLOWED: u32 = 5;
    /// `HSA_AMD_SEGMENT_GLOBAL`.
    pub const SEGMENT_GLOBAL: u32 = 0;
    /// `HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT`.
    pub const GLOBAL_FLAG_KERNARG_INIT: u32 = 1;
    /// `HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED`.
    pub const GLOBAL_FLAG_FINE_GRAINED: u32 = 2;
    /// `HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED`.
    pub const GLOBAL_FLAG_COARSE_GRAINED: u32 = 4;
    /// `HSA_AMD_GPU_MEMORY_FAULT_EVENT`.
    pub const GPU_MEMORY_FAULT_EVENT: u32 = 0;
    /// `HSA_AMD_QUEUE_PRIORITY_LOW`.
    pub const QUEUE_PRIORITY_LOW: u32 = 0;
    /// `HSA_AMD_QUEUE_PRIORITY_NORMAL`.
    pub const QUEUE_PRIORITY_NORMAL: u32 = 1;
    /// `HSA_AMD_QUEUE_PRIORITY_HIGH`.
    pub const QUEUE_PRIORITY_HIGH: u32 = 2;
}

/// `hsa_queue_create`'s error callback.
pub type QueueCallback = unsafe extern "C" fn(status: Status, source: *mut hsa_queue_t, data: *mut c_void);
/// `hsa_iterate_agents`' callback.
pub type AgentCallback = unsafe extern "C" fn(agent: hsa_agent_t, data: *mut c_void) -> Status;
/// `hsa_amd_agent_iterate_memory_pools`' callback.
pub type PoolCallback = unsafe extern "C" fn(pool: hsa_amd_memory_pool_t, data: *mut c_void) -> Status;
/// `hsa_amd_system_event_callback_t`.
pub type SystemEventCallback = unsafe extern "C" fn(event: *const hsa_amd_event_t, data: *mut c_void) -> Status;

macro_rules! api {
    ($( $(#[$m:meta])* fn $name:ident($($arg:ident: $ty:ty),*) $(-> $ret:ty)?; )*) => {
        /// The entry points, resolved from the loaded library.
        #[allow(missing_docs)]
        pub struct Fns {
            $( pub $name: unsafe extern "C" fn($($ty),*) $(-> $ret)?, )*
        }

        impl Fns {
            /// Resolves every entry point.
            ///
            /// # Safety
            /// `lib` must be an HSA runtime whose functions have these C signatures.
            unsafe fn resolve(lib: &libloading::Library) -> Result<Fns, LoadError> {
                Ok(Fns { $(
                    // SAFETY: the caller vouches that the symbol has this C signature.
                    $name: *unsafe { lib.get::<unsafe extern "C" fn($($ty),*) $(-> $ret)?>(concat!(stringify!($name), "\0").as_bytes()) }
                        .map_err(|e| LoadError::Symbol(stringify!($name), e.to_string()))?,
                )* })
            }
        }
    };
}

api! {
    fn hsa_init() -> Status;
    fn hsa_shut_down() -> Status;
    fn hsa_status_string(status: Status, out: *mut *const c_char) -> Status;
    fn hsa_system_get_info(attribute: u32, value: *mut c_void) -> Status;
    fn hsa_iterate_agents(callback: AgentCallback, data: *mut c_void) -> Status;
    fn hsa_agent_get_info(agent: hsa_agent_t, attribute: u32, value: *mut c_void) -> Status;
    fn hsa_queue_create(agent: hsa_agent_t, size: u32, type_: u32, callback: Option<QueueCallback>, data: *mut c_void, private_segment_size: u32, group_segment_size: u32, queue: *mut *mut hsa_queue_t) -> Status;
    fn hsa_queue_destroy(queue: *mut hsa_queue_t) -> Status;
    fn hsa_queue_load_read_index_scacquire(queue: *const hsa_queue_t) -> u64;
    fn hsa_queue_load_write_index_relaxed(queue: *const hsa_queue_t) -> u64;
    fn hsa_signal_create(initial: i64, num_consumers: u32, consumers: *const hsa_agent_t, signal: *mut hsa_signal_t) -> Status;
    fn hsa_signal_destroy(signal: hsa_signal_t) -> Status;
    fn hsa_signal_load_scacquire(signal: hsa_signal_t) -> i64;
    fn hsa_signal_store_relaxed(signal: hsa_signal_t, value: i64);
    fn hsa_signal_store_screlease(signal: hsa_signal_t, value: i64);
    fn hsa_signal_wait_scacquire(signal: hsa_signal_t, condition: u32, compare: i64, timeout_hint: u64, wait_state: u32) -> i64;
    fn hsa_code_object_reader_create_from_memory(code_object: *const c_void, size: usize, reader: *mut hsa_code_object_reader_t) -> Status;
    fn hsa_code_object_reader_destroy(reader: hsa_code_object_reader_t) -> Status;
    fn hsa_executable_create_alt(profile: u32, rounding: u32, options: *const c_char, executable: *mut hsa_executable_t) -> Status;
    fn hsa_executable_load_agent_code_object(executable: hsa_executable_t, agent: hsa_agent_t, reader: hsa_code_object_reader_t, options: *const c_char, loaded: *mut u64) -> Status;
    fn hsa_executable_freeze(executable: hsa_executable_t, options: *const c_char) -> Status;
    fn hsa_executable_destroy(executable: hsa_executable_t) -> Status;
    fn hsa_executable_get_symbol_by_name(executable: hsa_executable_t, name: *const c_char, agent: *const hsa_agent_t, symbol: *mut hsa_executable_symbol_t) -> Status;
    fn hsa_executable_symbol_get_info(symbol: hsa_executable_symbol_t, attribute: u32, value: *mut c_void) -> Status;
    fn hsa_amd_agent_iterate_memory_pools(agent: hsa_agent_t, callback: PoolCallback, data: *mut c_void) -> Status;
    fn hsa_amd_memory_pool_get_info(pool: hsa_amd_memory_pool_t, attribute: u32, value: *mut c_void) -> Status;
    fn hsa_amd_memory_pool_allocate(pool: hsa_amd_memory_pool_t, size: usize, flags: u32, ptr: *mut *mut c_void) -> Status;
    fn hsa_amd_memory_pool_free(ptr: *mut c_void) -> Status;
    fn hsa_amd_agents_allow_access(num_agents: u32, agents: *const hsa_agent_t, flags: *const u32, ptr: *const c_void) -> Status;
    fn hsa_amd_memory_lock(host_ptr: *mut c_void, size: usize, agents: *mut hsa_agent_t, num_agent: i32, agent_ptr: *mut *mut c_void) -> Status;
    fn hsa_amd_memory_unlock(host_ptr: *mut c_void) -> Status;
    fn hsa_amd_memory_async_copy(dst: *mut c_void, dst_agent: hsa_agent_t, src: *const c_void, src_agent: hsa_agent_t, size: usize, num_dep_signals: u32, dep_signals: *const hsa_signal_t, completion_signal: hsa_signal_t) -> Status;
    fn hsa_amd_memory_fill(ptr: *mut c_void, value: u32, count: usize) -> Status;
    fn hsa_amd_queue_cu_set_mask(queue: *const hsa_queue_t, num_cu_mask_count: u32, cu_mask: *const u32) -> Status;
    fn hsa_amd_queue_set_priority(queue: *mut hsa_queue_t, priority: u32) -> Status;
    fn hsa_amd_profiling_set_profiler_enabled(queue: *mut hsa_queue_t, enable: i32) -> Status;
    fn hsa_amd_profiling_convert_tick_to_system_domain(agent: hsa_agent_t, agent_tick: u64, system_tick: *mut u64) -> Status;
    fn hsa_amd_register_system_event_handler(callback: SystemEventCallback, data: *mut c_void) -> Status;
    fn hsa_amd_signal_async_handler(signal: hsa_signal_t, condition: u32, value: i64, handler: unsafe extern "C" fn(i64, *mut c_void) -> bool, arg: *mut c_void) -> Status;
}

/// Why the library could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadError {
    /// No candidate could be opened: each path tried with the loader's message.
    NotFound(Vec<(PathBuf, String)>),
    /// A symbol is missing (an incompatible library).
    Symbol(&'static str, String),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::NotFound(tried) => {
                write!(f, "{LIBRARY} not found (install ROCm or Debian's libhsa-runtime64-1); tried")?;
                for (p, e) in tried {
                    write!(f, " {} ({e});", p.display())?;
                }
                Ok(())
            }
            LoadError::Symbol(s, e) => write!(f, "{LIBRARY} lacks {s}: {e}"),
        }
    }
}

impl std::error::Error for LoadError {}

/// The library's file name.
pub const LIBRARY: &str = "libhsa-runtime64.so.1";

/// The HSA runtime, loaded.
pub struct Hsa {
    fns: Fns,
    path: PathBuf,
    _lib: libloading::Library,
}

impl fmt::Debug for Hsa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hsa").field("path", &self.path).finish()
    }
}

impl std::ops::Deref for Hsa {
    type Target = Fns;
    fn deref(&self) -> &Fns {
        &self.fns
    }
}

impl Hsa {
    /// Where the library is looked for: `$ROCM_PATH/lib`, `/opt/rocm/lib`, then the system
    /// library path (the bare name, resolved by the dynamic loader).
    pub fn candidates() -> Vec<PathBuf> {
        let mut v = Vec::new();
        if let Some(root) = std::env::var_os("ROCM_PATH") {
            v.push(Path::new(&root).join("lib").join(LIBRARY));
        }
        v.push(Path::new("/opt/rocm/lib").join(LIBRARY));
        v.push(PathBuf::from(LIBRARY));
        v
    }

    /// Loads the first candidate that opens, or `path` if given.
    pub fn load(path: Option<&Path>) -> Result<Hsa, LoadError> {
        let list = match path {
            Some(p) => vec![p.to_path_buf()],
            None => Self::candidates(),
        };
        let mut tried = Vec::new();
        for p in list {
            // SAFETY: loading the HSA runtime runs its initialisers, which only set up its own
            // state (hsa_init is a separate call).
            match unsafe { libloading::Library::new(&p) } {
                Ok(lib) => {
                    // SAFETY: the library is the HSA runtime, whose C API has these signatures.
                    let fns = unsafe { Fns::resolve(&lib) }?;
                    return Ok(Hsa { fns, path: p, _lib: lib });
                }
                Err(e) => tried.push((p, e.to_string())),
            }
        }
        Err(LoadError::NotFound(tried))
    }

    /// The path that was loaded.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The runtime's description of a status (`hsa_status_string`).
    pub fn status_string(&self, s: Status) -> String {
        let mut p: *const c_char = std::ptr::null();
        // SAFETY: `p` is a valid out-pointer; the runtime returns a static string or an error.
        let r = unsafe { (self.fns.hsa_status_string)(s, &mut p) };
        if r.is_ok() && !p.is_null() {
            // SAFETY: a NUL-terminated static string owned by the runtime.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        } else {
            s.to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_codes_have_names_and_unknown_ones_print_their_number() {
        assert_eq!(Status(0x1008).to_string(), "HSA_STATUS_ERROR_OUT_OF_RESOURCES (0x1008)");
        assert_eq!(Status(0x7777).to_string(), "hsa_status_t 0x7777");
        assert!(Status::SUCCESS.ok().is_ok());
        assert_eq!(Status::ERROR.ok(), Err(Status::ERROR));
    }

    #[test]
    fn a_missing_library_is_reported_with_the_paths_tried() {
        let e = Hsa::load(Some(Path::new("/nonexistent/libhsa-runtime64.so.1"))).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("not found") && text.contains("/nonexistent/"), "{text}");
    }
}
