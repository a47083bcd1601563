//! `aqueduct bench`'s HIP figures: what the C ABI adds to a launch.
//!
//! `libaqueduct_hip.so` is loaded into this process (`$AQUEDUCT_HIP_LIB`, else next to the
//! `aqueduct` executable or in its parent folder, else the `amdhip64/libamdhip64.so.5` that
//! `aqueduct run --hip aqueduct` uses) and runs on its own emulated GPU. Two figures, each beside
//! a floor measured in the same run on the same runtime, stream and kernel:
//!
//! - `hip_launch_kernel`: `hipLaunchKernel` of a host kernel (`aqdRegisterHostKernel`), one
//!   8-byte argument, one work-item;
//! - `hip_launch_kernel_hipcc`: the same for a kernel of a clang offload bundle registered as
//!   hipcc-generated code registers it (`__hipRegisterFatBinary`, `__hipRegisterFunction`; the
//!   emulator's gfx90a fixture `fill_u32` with a count of 0);
//!
//! both against `core_launch` / `core_launch_hipcc`: `aqdBenchCoreLaunch`, which resolves the
//! same launch once and enqueues it with core's `launch_kernel` as many times. Each sample is a
//! chunk of launches, then an untimed, checked synchronise; the figure is the median.

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::bench::{Figure, Floor};

/// `dim3`.
#[repr(C)]
#[derive(Clone, Copy)]
struct Dim3 {
    x: u32,
    y: u32,
    z: u32,
}

type HostKernel = extern "C" fn(*mut *mut c_void, Dim3, Dim3, Dim3);
type Launch = unsafe extern "C" fn(*const c_void, Dim3, Dim3, *mut *mut c_void, usize, *mut c_void) -> i32;
type CoreLaunch = unsafe extern "C" fn(*const c_void, Dim3, Dim3, *mut *mut c_void, usize, *mut c_void, c_uint) -> i32;
type StreamCreate = unsafe extern "C" fn(*mut *mut c_void, c_uint) -> i32;
type StreamFn = unsafe extern "C" fn(*mut c_void) -> i32;
type Register = unsafe extern "C" fn(*const c_void, Option<HostKernel>, c_uint, *const usize) -> i32;
type RegisterFatBinary = unsafe extern "C" fn(*const c_void) -> *mut *mut c_void;
type RegisterFunction = unsafe extern "C" fn(
    *mut *mut c_void,
    *const c_void,
    *mut c_char,
    *const c_char,
    c_uint,
    *mut c_void,
    *mut c_void,
    *mut Dim3,
    *mut Dim3,
    *mut c_int,
) -> ();

extern "C" fn empty_kernel(_args: *mut *mut c_void, _b: Dim3, _g: Dim3, _d: Dim3) {}

/// The host kernel's symbol and the hipcc-style kernel handle (any unique addresses).
static HOST_SYMBOL: u8 = 0;
static HIPCC_HANDLE: u8 = 0;

/// The emulator's gfx90a fixture code object (kernels `fill_u32`, `vector_add`).
static FIXTURE_GFX90A: &[u8] = include_bytes!("../../../kfd-direct/emu/fixtures/kernels-gfx90a.co");

/// HIP's fat-binary wrapper.
#[repr(C)]
struct FatBinaryWrapper {
    magic: u32,
    version: u32,
    binary: *const u8,
    unused: *const c_void,
}

/// A clang offload bundle holding the host entry and `code` for gfx90a, as the driver lays
/// one out for hipcc.
fn bundle(code: &[u8]) -> Vec<u8> {
    let entries: [(&str, &[u8]); 2] =
        [("host-x86_64-unknown-linux-gnu", &[]), ("hipv4-amdgcn-amd-amdhsa--gfx90a", code)];
    let mut out = b"__CLANG_OFFLOAD_BUNDLE__".to_vec();
    out.extend((entries.len() as u64).to_le_bytes());
    let header: usize = 32 + entries.iter().map(|(id, _)| 24 + id.len()).sum::<usize>();
    let mut at = header.div_ceil(4096) * 4096;
    let mut offsets = Vec::new();
    for (id, c) in entries {
        offsets.push(at);
        out.extend((at as u64).to_le_bytes());
        out.extend((c.len() as u64).to_le_bytes());
        out.extend((id.len() as u64).to_le_bytes());
        out.extend(id.as_bytes());
        at += c.len().div_ceil(4096) * 4096;
    }
    for ((_, c), off) in entries.iter().zip(offsets) {
        out.resize(off, 0);
        out.extend(*c);
    }
    out
}

/// Where the HIP library is, if anywhere; and the places looked at.
fn find_library() -> Result<PathBuf, Vec<PathBuf>> {
    let mut tried = Vec::new();
    if let Some(p) = std::env::var_os("AQUEDUCT_HIP_LIB") {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(p);
        }
        tried.push(p);
    }
    if let Some(dir) = std::env::current_exe().ok().as_deref().and_then(Path::parent) {
        for c in [Some(dir.join("libaqueduct_hip.so")), dir.parent().map(|d| d.join("libaqueduct_hip.so"))]
            .into_iter()
            .flatten()
        {
            if c.is_file() {
                return Ok(c);
            }
            tried.push(c);
        }
    }
    crate::launcher::find_hip_lib().map_err(|e| match e {
        crate::launcher::LaunchError::NoHipLib(more) => tried.into_iter().chain(more).collect(),
        _ => tried,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Fails with the call and HIP's code unless `code` is `hipSuccess`.
fn check(what: &str, code: i32) -> Result<(), String> {
    if code == 0 {
        Ok(())
    } else {
        Err(format!("{what}: hipError {code}"))
    }
}

/// Figures and the floors they are measured against.
pub type Measured = (Vec<Figure>, Vec<Floor>);

/// The HIP figures and their floors; `Ok(None)` (and a note on stderr) when the library is not
/// built. Every call's result is checked: a failure ends the run.
pub fn figures(samples: usize, short: bool) -> Result<Option<Measured>, String> {
    let path = match find_library() {
        Ok(p) => p,
        Err(tried) => {
            let tried: Vec<String> = tried.iter().map(|p| p.display().to_string()).collect();
            eprintln!(
                "aqueduct bench: HIP figures skipped: libaqueduct_hip.so not found (cargo build -p aqueduct-hip, or \
                 set AQUEDUCT_HIP_LIB); tried: {}",
                tried.join(" ")
            );
            return Ok(None);
        }
    };
    // SAFETY: loading aqueduct's own HIP library, whose initialisers only set up its tables.
    let lib = unsafe { libloading::Library::new(&path) }.map_err(|e| format!("{}: {e}", path.display()))?;
    macro_rules! sym {
        ($t:ty, $name:literal) => {
            // SAFETY: the library exports this function with this C signature
            // (include/aqueduct_hip.h, hip_runtime_api.h).
            *unsafe { lib.get::<$t>($name) }.map_err(|e| format!("{}: {e}", String::from_utf8_lossy($name)))?
        };
    }
    let launch = sym!(Launch, b"hipLaunchKernel");
    let core_launch = sym!(CoreLaunch, b"aqdBenchCoreLaunch");
    let stream_create = sym!(StreamCreate, b"hipStreamCreateWithFlags");
    let stream_sync = sym!(StreamFn, b"hipStreamSynchronize");
    let stream_destroy = sym!(StreamFn, b"hipStreamDestroy");
    let register = sym!(Register, b"aqdRegisterHostKernel");
    let register_fat_binary = sym!(RegisterFatBinary, b"__hipRegisterFatBinary");
    let register_function = sym!(RegisterFunction, b"__hipRegisterFunction");

    let host = (&HOST_SYMBOL as *const u8).cast::<c_void>();
    let hipcc = (&HIPCC_HANDLE as *const u8).cast::<c_void>();
    let arg_size = 8usize;
    // SAFETY: every call below passes what its C declaration asks for; the bundle and wrapper
    // are leaked, so they stay mapped for the process's life as registration requires.
    unsafe {
        check("aqdRegisterHostKernel", register(host, Some(empty_kernel), 1, &arg_size))?;
        let blob: &'static [u8] = Box::leak(bundle(FIXTURE_GFX90A).into_boxed_slice());
        let wrapper: &'static FatBinaryWrapper = Box::leak(Box::new(FatBinaryWrapper {
            magic: 0x4849_5046,
            version: 1,
            binary: blob.as_ptr(),
            unused: std::ptr::null(),
        }));
        let modules = register_fat_binary((wrapper as *const FatBinaryWrapper).cast());
        if modules.is_null() {
            return Err("__hipRegisterFatBinary refused the bundle".into());
        }
        let name = c"fill_u32";
        register_function(
            modules,
            hipcc,
            name.as_ptr().cast_mut(),
            name.as_ptr(),
            u32::MAX,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        );
    }
    let mut stream = std::ptr::null_mut();
    // SAFETY: a valid out-pointer; flags hipStreamNonBlocking.
    check("hipStreamCreateWithFlags", unsafe { stream_create(&mut stream, 1) })?;

    let one = Dim3 { x: 1, y: 1, z: 1 };
    let chunk: u32 = if short { 256 } else { 512 };
    // Host kernel: one pointer argument. fill_u32(dst, value, count): count 0 touches nothing.
    let mut word: u64 = 0;
    let (mut dst, mut value, mut count) = (0u64, 0u32, 0u32);
    let mut host_args = [(&mut word as *mut u64).cast::<c_void>()];
    let mut hipcc_args = [
        (&mut dst as *mut u64).cast::<c_void>(),
        (&mut value as *mut u32).cast::<c_void>(),
        (&mut count as *mut u32).cast::<c_void>(),
    ];
    let measure = |function: *const c_void, args: *mut *mut c_void, what: &str| -> Result<(f64, f64), String> {
        let (mut c_abi, mut core) = (Vec::new(), Vec::new());
        for i in 0..samples + 2 {
            let t = Instant::now();
            for _ in 0..chunk {
                // SAFETY: a registered kernel, its argument pointers, a live stream.
                check(what, unsafe { launch(function, one, one, args, 0, stream) })?;
            }
            let a = t.elapsed().as_secs_f64() * 1e9 / f64::from(chunk);
            // SAFETY: a live stream.
            check("hipStreamSynchronize", unsafe { stream_sync(stream) })?;
            let t = Instant::now();
            // SAFETY: as above.
            check("aqdBenchCoreLaunch", unsafe { core_launch(function, one, one, args, 0, stream, chunk) })?;
            let b = t.elapsed().as_secs_f64() * 1e9 / f64::from(chunk);
            // SAFETY: a live stream.
            check("hipStreamSynchronize", unsafe { stream_sync(stream) })?;
            if i >= 2 {
                c_abi.push(a);
                core.push(b);
            }
        }
        Ok((median(c_abi), median(core)))
    };
    let (hk, hk_core) = measure(host, host_args.as_mut_ptr(), "hipLaunchKernel (host kernel)")?;
    let (hc, hc_core) = measure(hipcc, hipcc_args.as_mut_ptr(), "hipLaunchKernel (registered fill_u32)")?;
    // SAFETY: the stream is live and idle.
    check("hipStreamDestroy", unsafe { stream_destroy(stream) })?;
    // The library stays loaded: its runtime's threads and tables live for the process.
    std::mem::forget(lib);
    let figures = vec![
        Figure {
            name: "hip_launch_kernel",
            ns: hk,
            floor: Some("core_launch"),
            floor_ns: Some(hk_core),
            target: "<= 2x core enqueue",
        },
        Figure {
            name: "hip_launch_kernel_hipcc",
            ns: hc,
            floor: Some("core_launch_hipcc"),
            floor_ns: Some(hc_core),
            target: "<= 2x core enqueue",
        },
    ];
    let floors = vec![
        Floor {
            name: "core_launch",
            ns: hk_core,
            what: "core launch_kernel of the same host-kernel launch in libaqueduct_hip's runtime, ns per launch",
        },
        Floor {
            name: "core_launch_hipcc",
            ns: hc_core,
            what: "core launch_kernel of the same registered-kernel launch, ns per launch",
        },
    ];
    Ok(Some((figures, floors)))
}
