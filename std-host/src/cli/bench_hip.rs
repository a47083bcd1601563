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
//!
//! A third, `hip_capture_instantiate_per_node`: a capture of 100 `hipLaunchKernel`s of the host
//! kernel, then `hipStreamEndCapture`, `hipGraphInstantiate` and both destroys, per node,
//! against `core_capture_instantiate`: `aqdBenchCoreCapture`, the same with core's capture,
//! instantiation and destroys.
//!
//! A fourth, `graph_exec_update_one_of_10000`: `hipGraphExecUpdate` of an executable of a
//! 10,000-node graph (a chain of host-kernel nodes, each storing its value into its own word)
//! after one kernel node of the graph changed (`hipGraphKernelNodeSetParams`, untimed), against
//! `graph_instantiate_10000`: `hipGraphInstantiate` of the same graph (the executable destroyed
//! untimed). Every call's result is checked, the update's `hipGraphExecUpdateResult` and error
//! node too, and the executable is launched at the end: every word must hold the latest value
//! of its node.

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::path::{Path, PathBuf};
use std::time::Instant;

use aqueduct_kfd_emu::c_abi::{AqdEmuCtx, AqdEmuTwinFn};

use super::bench::{Figure, Floor};

/// The function `$name` of the library `$lib` as a `$t`, or the error (`?`) naming it.
macro_rules! sym {
    ($lib:expr, $t:ty, $name:literal) => {
        // SAFETY: the library exports this function with this C signature
        // (include/aqueduct_hip.h, hip_runtime_api.h).
        *unsafe { $lib.get::<$t>($name) }.map_err(|e| format!("{}: {e}", String::from_utf8_lossy($name)))?
    };
}

/// `dim3`.
#[repr(C)]
#[derive(Clone, Copy)]
struct Dim3 {
    x: u32,
    y: u32,
    z: u32,
}

type HostKernel = extern "C" fn(*mut *mut c_void, Dim3, Dim3, Dim3);
type Handle = *mut c_void;
type Malloc = unsafe extern "C" fn(*mut *mut c_void, usize) -> i32;
type Free = unsafe extern "C" fn(*mut c_void) -> i32;
type Memcpy = unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_uint) -> i32;
type GraphCreate = unsafe extern "C" fn(*mut Handle, c_uint) -> i32;
type GraphDestroy = unsafe extern "C" fn(Handle) -> i32;
type AddKernelNode = unsafe extern "C" fn(*mut Handle, Handle, *const Handle, usize, *const KernelNodeParams) -> i32;
type KernelNodeSetParams = unsafe extern "C" fn(Handle, *const KernelNodeParams) -> i32;
type Instantiate = unsafe extern "C" fn(*mut Handle, Handle, *mut Handle, *mut c_char, usize) -> i32;
type ExecUpdate = unsafe extern "C" fn(Handle, Handle, *mut Handle, *mut c_int) -> i32;
type BeginCapture = unsafe extern "C" fn(*mut c_void, c_uint) -> i32;
type EndCapture = unsafe extern "C" fn(*mut c_void, *mut Handle) -> i32;
type GraphLaunch = unsafe extern "C" fn(Handle, *mut c_void) -> i32;
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

/// `hipKernelNodeParams`.
#[repr(C)]
struct KernelNodeParams {
    block: Dim3,
    extra: *mut *mut c_void,
    func: *const c_void,
    grid: Dim3,
    kernel_params: *mut *mut c_void,
    shared_mem: c_uint,
}
const _: () = assert!(size_of::<KernelNodeParams>() == 64);

/// `store(words, index, value)`: `words[index] = value`.
extern "C" fn store_kernel(args: *mut *mut c_void, _b: Dim3, _g: Dim3, _d: Dim3) {
    // SAFETY: the update figure launches this kernel with its three registered arguments: a
    // pointer to a device array of `GRAPH_NODES` words, an index below that, and a value.
    unsafe {
        let words = *(*args).cast::<*mut u32>();
        let index = *(*args.add(1)).cast::<u32>();
        let value = *(*args.add(2)).cast::<u32>();
        *words.add(index as usize) = value;
    }
}

/// Nodes of the update figure's graph.
const GRAPH_NODES: usize = 10_000;

/// The host kernel's symbol and the hipcc-style kernel handle (any unique addresses).
static HOST_SYMBOL: u8 = 0;
static HIPCC_HANDLE: u8 = 0;
static STORE_SYMBOL: u8 = 0;

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

/// `aqd_emu_register_twin`.
type RegisterTwin = unsafe extern "C" fn(*const c_char, Option<AqdEmuTwinFn>, *mut c_void) -> c_int;

/// The twin of `fill_u32(dst, value, count)` for the launches measured here, which all pass a
/// count of 0: it checks that and touches nothing (any other count fails the dispatch).
unsafe extern "C" fn fill_nothing(ctx: *const AqdEmuCtx, _user: *mut c_void) -> c_int {
    // SAFETY: the emulator passes its live context, whose kernel-argument segment holds
    // `kernarg_size` bytes (fill_u32's: dst at 0, value at 8, count at 12).
    let count = unsafe {
        let ctx = &*ctx;
        if ctx.kernarg_size < 16 {
            return 1;
        }
        ctx.kernarg.add(12).cast::<u32>().read_unaligned()
    };
    c_int::from(count != 0)
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
    let launch = sym!(lib, Launch, b"hipLaunchKernel");
    let core_launch = sym!(lib, CoreLaunch, b"aqdBenchCoreLaunch");
    let stream_create = sym!(lib, StreamCreate, b"hipStreamCreateWithFlags");
    let stream_sync = sym!(lib, StreamFn, b"hipStreamSynchronize");
    let stream_destroy = sym!(lib, StreamFn, b"hipStreamDestroy");
    let register = sym!(lib, Register, b"aqdRegisterHostKernel");
    let register_fat_binary = sym!(lib, RegisterFatBinary, b"__hipRegisterFatBinary");
    let register_function = sym!(lib, RegisterFunction, b"__hipRegisterFunction");
    let register_twin = sym!(lib, RegisterTwin, b"aqd_emu_register_twin");

    let host = (&HOST_SYMBOL as *const u8).cast::<c_void>();
    let hipcc = (&HIPCC_HANDLE as *const u8).cast::<c_void>();
    let arg_size = 8usize;
    // SAFETY: every call below passes what its C declaration asks for; the bundle and wrapper
    // are leaked, so they stay mapped for the process's life as registration requires.
    unsafe {
        check("aqdRegisterHostKernel", register(host, Some(empty_kernel), 1, &arg_size))?;
        // The fixture kernel runs on the emulated GPU as the twin the benchmark supplies (as a
        // user's would come through AQUEDUCT_TWINS), registered in the library's emulator.
        if register_twin(c"fill_u32".as_ptr(), Some(fill_nothing), std::ptr::null_mut()) != 0 {
            return Err("aqd_emu_register_twin refused fill_u32's twin".into());
        }
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
    let (captured, captured_core) = capture_figure(&lib, host, host_args.as_mut_ptr(), stream, samples)?;
    let (update, instantiate) = update_figure(&lib, stream, samples, short)?;
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
        Figure {
            name: "hip_capture_instantiate_per_node",
            ns: captured,
            floor: Some("core_capture_instantiate"),
            floor_ns: Some(captured_core),
            target: "<= 2x core",
        },
        Figure {
            name: "graph_exec_update_one_of_10000",
            ns: update,
            floor: Some("graph_instantiate_10000"),
            floor_ns: Some(instantiate),
            target: "<= 0.01x instantiate",
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
        Floor {
            name: "core_capture_instantiate",
            ns: captured_core,
            what: "core capture + instantiate + destroy of the same 100 host-kernel launches, ns per node",
        },
        Floor {
            name: "graph_instantiate_10000",
            ns: instantiate,
            what: "hipGraphInstantiate of the update figure's 10,000-node graph, ns per instantiation",
        },
    ];
    Ok(Some((figures, floors)))
}

/// Launches per captured graph in `hip_capture_instantiate_per_node`.
const CAPTURED: u32 = 100;

/// `hip_capture_instantiate_per_node` and its floor, in ns per node: the median of
/// `hipStreamBeginCapture`, [`CAPTURED`] `hipLaunchKernel`s of the host kernel,
/// `hipStreamEndCapture`, `hipGraphInstantiate`, `hipGraphExecDestroy` and `hipGraphDestroy`,
/// and of `aqdBenchCoreCapture` doing the same with core's calls. The executables are never
/// launched; every call's result is checked.
fn capture_figure(
    lib: &libloading::Library,
    function: *const c_void,
    args: *mut *mut c_void,
    stream: *mut c_void,
    samples: usize,
) -> Result<(f64, f64), String> {
    let launch = sym!(lib, Launch, b"hipLaunchKernel");
    let begin = sym!(lib, BeginCapture, b"hipStreamBeginCapture");
    let end = sym!(lib, EndCapture, b"hipStreamEndCapture");
    let instantiate = sym!(lib, Instantiate, b"hipGraphInstantiate");
    let exec_destroy = sym!(lib, GraphDestroy, b"hipGraphExecDestroy");
    let graph_destroy = sym!(lib, GraphDestroy, b"hipGraphDestroy");
    let core_capture = sym!(lib, CoreLaunch, b"aqdBenchCoreCapture");
    let one = Dim3 { x: 1, y: 1, z: 1 };
    let (mut c_abi, mut core) = (Vec::new(), Vec::new());
    for i in 0..samples + 2 {
        let t = Instant::now();
        // SAFETY: a live, idle stream; a registered kernel and its argument pointers; the
        // graph and executable the calls before made.
        unsafe {
            check("hipStreamBeginCapture", begin(stream, 0))?;
            for _ in 0..CAPTURED {
                check("hipLaunchKernel (captured)", launch(function, one, one, args, 0, stream))?;
            }
            let (mut graph, mut exec): (Handle, Handle) = (std::ptr::null_mut(), std::ptr::null_mut());
            check("hipStreamEndCapture", end(stream, &mut graph))?;
            check("hipGraphInstantiate", instantiate(&mut exec, graph, std::ptr::null_mut(), std::ptr::null_mut(), 0))?;
            check("hipGraphExecDestroy", exec_destroy(exec))?;
            check("hipGraphDestroy", graph_destroy(graph))?;
        }
        let a = t.elapsed().as_secs_f64() * 1e9 / f64::from(CAPTURED);
        let t = Instant::now();
        // SAFETY: as above.
        check("aqdBenchCoreCapture", unsafe { core_capture(function, one, one, args, 0, stream, CAPTURED) })?;
        let b = t.elapsed().as_secs_f64() * 1e9 / f64::from(CAPTURED);
        if i >= 2 {
            c_abi.push(a);
            core.push(b);
        }
    }
    Ok((median(c_abi), median(core)))
}

/// `graph_exec_update_one_of_10000` and its floor, in ns: the median `hipGraphExecUpdate` after
/// one node of the graph changed, and the median `hipGraphInstantiate` of the same graph.
fn update_figure(
    lib: &libloading::Library,
    stream: *mut c_void,
    samples: usize,
    short: bool,
) -> Result<(f64, f64), String> {
    let register = sym!(lib, Register, b"aqdRegisterHostKernel");
    let malloc = sym!(lib, Malloc, b"hipMalloc");
    let free = sym!(lib, Free, b"hipFree");
    let memcpy = sym!(lib, Memcpy, b"hipMemcpy");
    let graph_create = sym!(lib, GraphCreate, b"hipGraphCreate");
    let graph_destroy = sym!(lib, GraphDestroy, b"hipGraphDestroy");
    let add_kernel_node = sym!(lib, AddKernelNode, b"hipGraphAddKernelNode");
    let set_params = sym!(lib, KernelNodeSetParams, b"hipGraphKernelNodeSetParams");
    let instantiate = sym!(lib, Instantiate, b"hipGraphInstantiate");
    let exec_update = sym!(lib, ExecUpdate, b"hipGraphExecUpdate");
    let exec_destroy = sym!(lib, GraphDestroy, b"hipGraphExecDestroy");
    let graph_launch = sym!(lib, GraphLaunch, b"hipGraphLaunch");
    let stream_sync = sym!(lib, StreamFn, b"hipStreamSynchronize");

    let symbol = (&STORE_SYMBOL as *const u8).cast::<c_void>();
    let sizes = [size_of::<*mut u32>(), 4, 4];
    // SAFETY: a unique symbol, a host kernel reading the three arguments registered.
    check("aqdRegisterHostKernel", unsafe { register(symbol, Some(store_kernel), 3, sizes.as_ptr()) })?;
    let mut words: *mut c_void = std::ptr::null_mut();
    // SAFETY: a valid out-pointer.
    check("hipMalloc", unsafe { malloc(&mut words, GRAPH_NODES * 4) })?;
    let one = Dim3 { x: 1, y: 1, z: 1 };
    // The arguments of node `index` (HIP copies them when the node is added or set).
    let params = |index: &mut u32, value: &mut u32, words: &mut *mut c_void, list: &mut [*mut c_void; 3]| {
        *list = [(words as *mut *mut c_void).cast(), (index as *mut u32).cast(), (value as *mut u32).cast()];
        KernelNodeParams {
            block: one,
            extra: std::ptr::null_mut(),
            func: symbol,
            grid: one,
            kernel_params: list.as_mut_ptr(),
            shared_mem: 0,
        }
    };
    let mut graph: Handle = std::ptr::null_mut();
    // SAFETY: a valid out-pointer, flags 0.
    check("hipGraphCreate", unsafe { graph_create(&mut graph, 0) })?;
    // A chain: node i stores value i into word i.
    let mut expected: Vec<u32> = (0..GRAPH_NODES as u32).collect();
    let mut nodes: Vec<Handle> = Vec::with_capacity(GRAPH_NODES);
    for (i, &v) in expected.iter().enumerate() {
        let (mut index, mut value, mut list) = (i as u32, v, [std::ptr::null_mut(); 3]);
        let p = params(&mut index, &mut value, &mut words, &mut list);
        let mut node: Handle = std::ptr::null_mut();
        let deps = nodes.last().map_or(std::ptr::null(), |n| n as *const Handle);
        // SAFETY: valid out-pointer, graph, dependency list (0 or 1 entries) and parameters.
        check("hipGraphAddKernelNode", unsafe { add_kernel_node(&mut node, graph, deps, usize::from(i > 0), &p) })?;
        nodes.push(node);
    }

    // The floor: instantiate the whole graph.
    let mut floor = Vec::new();
    for _ in 0..samples.max(3) {
        let mut x: Handle = std::ptr::null_mut();
        let t = Instant::now();
        // SAFETY: valid out-pointer and graph; the error node and log are optional.
        let rc = unsafe { instantiate(&mut x, graph, std::ptr::null_mut(), std::ptr::null_mut(), 0) };
        floor.push(t.elapsed().as_secs_f64() * 1e9);
        check("hipGraphInstantiate", rc)?;
        // SAFETY: a live executable, never launched.
        check("hipGraphExecDestroy", unsafe { exec_destroy(x) })?;
    }

    // The figure: one node changed in the graph (untimed), then the executable updated.
    let mut x: Handle = std::ptr::null_mut();
    // SAFETY: as above.
    check("hipGraphInstantiate", unsafe { instantiate(&mut x, graph, std::ptr::null_mut(), std::ptr::null_mut(), 0) })?;
    let rounds = if short { 8 * samples.max(3) } else { 32 * samples.max(3) };
    let mut update = Vec::new();
    for round in 0..rounds {
        let i = (round * 7919 + 13) % GRAPH_NODES;
        expected[i] = 1_000_000 + round as u32;
        let (mut index, mut value, mut list) = (i as u32, expected[i], [std::ptr::null_mut(); 3]);
        let p = params(&mut index, &mut value, &mut words, &mut list);
        // SAFETY: a node of the graph, valid parameters.
        check("hipGraphKernelNodeSetParams", unsafe { set_params(nodes[i], &p) })?;
        let (mut error_node, mut result): (Handle, c_int) = (std::ptr::null_mut(), -1);
        let t = Instant::now();
        // SAFETY: a live executable and graph, valid out-pointers.
        let rc = unsafe { exec_update(x, graph, &mut error_node, &mut result) };
        update.push(t.elapsed().as_secs_f64() * 1e9);
        check("hipGraphExecUpdate", rc)?;
        if result != 0 || !error_node.is_null() {
            return Err(format!("hipGraphExecUpdate: result {result}, error node {error_node:?}"));
        }
    }
    // The executable runs every latest value.
    let mut got = vec![0u32; GRAPH_NODES];
    // SAFETY: a live executable and stream; `got` and the device array hold GRAPH_NODES words.
    unsafe {
        check("hipGraphLaunch", graph_launch(x, stream))?;
        check("hipStreamSynchronize", stream_sync(stream))?;
        check("hipMemcpy", memcpy(got.as_mut_ptr().cast(), words, GRAPH_NODES * 4, 2))?;
        check("hipGraphExecDestroy", exec_destroy(x))?;
        check("hipGraphDestroy", graph_destroy(graph))?;
        check("hipFree", free(words))?;
    }
    if let Some(i) = (0..GRAPH_NODES).find(|&i| got[i] != expected[i]) {
        return Err(format!("after the updates, word {i} is {} where its node stores {}", got[i], expected[i]));
    }
    Ok((median(update), median(floor)))
}
