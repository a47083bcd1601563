//! The C tests: each `tests/c/<name>.c` is compiled with gcc against Debian's HIP 5.2 header
//! (`libamdhip64-dev`) and `include/aqueduct_hip.h`, linked to `libaqueduct_hip.so` (one also to
//! `libaqueduct_hip.a`), and run on the emulated GPU; it must exit 0 and print `<name>: ok`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Duration;

mod common;

/// Fails (never skips) when a Debian package the tests need is missing.
fn require(package: &str, file: &str) {
    assert!(
        Path::new(file).exists(),
        "Debian package `{package}` is missing ({file} not found): apt-get install -y {package}"
    );
}

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `target/<profile>/`, with `libaqueduct_hip.so` and `.a` freshly built: `cargo test` builds
/// test harnesses, never the cdylib, so the first call runs `cargo build -p aqueduct-hip` with
/// this test's profile (a test never runs a stale library).
fn lib_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let exe = std::env::current_exe().expect("test executable");
        let profile = exe.parent().and_then(Path::parent).expect("target/<profile>").to_path_buf();
        let mut c = Command::new(env!("CARGO"));
        c.args(["build", "-q", "-p", "aqueduct-hip"]).current_dir(manifest());
        if profile.file_name().is_some_and(|n| n == "release") {
            c.arg("--release");
        }
        let out = c.output().expect("cargo build");
        assert!(out.status.success(), "building aqueduct-hip failed:\n{}", String::from_utf8_lossy(&out.stderr));
        assert!(profile.join("libaqueduct_hip.so").is_file(), "libaqueduct_hip.so not built");
        profile
    })
}

/// `target/<profile>/libaqueduct_kfd_preload.so`, freshly built: under `LD_PRELOAD` (with
/// `AQUEDUCT_GPU`) it puts Debian's ROCr on the emulated GPU, for the library's ROCr backend.
fn preload_lib() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let lib = lib_dir().join("libaqueduct_kfd_preload.so");
        let mut c = Command::new(env!("CARGO"));
        c.args(["build", "-q", "-p", "aqueduct-kfd-preload"]).current_dir(manifest());
        if lib_dir().file_name().is_some_and(|n| n == "release") {
            c.arg("--release");
        }
        let out = c.output().expect("cargo build");
        assert!(out.status.success(), "building the preload failed:\n{}", String::from_utf8_lossy(&out.stderr));
        assert!(lib.is_file(), "libaqueduct_kfd_preload.so not built");
        lib
    })
}

/// `target/<profile>/amdhip64/`, holding `libamdhip64.so.5` freshly linked from
/// `libaqueduct_hip.a` by `build-libamdhip64.sh`.
fn amdhip64_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        require("gcc", "/usr/bin/gcc");
        require("binutils", "/usr/bin/nm");
        let lib = lib_dir();
        let out =
            Command::new(manifest().join("build-libamdhip64.sh")).arg(lib).output().expect("build-libamdhip64.sh");
        assert!(out.status.success(), "build-libamdhip64.sh failed:\n{}", String::from_utf8_lossy(&out.stderr));
        let dir = lib.join("amdhip64");
        assert!(dir.join("libamdhip64.so.5").is_file(), "libamdhip64.so.5 not built");
        dir
    })
}

/// This run's folder for built programs (`aqueduct-hip-tests-<pid>` in the temporary folder).
/// The first call removes the folders of earlier runs whose process is gone: each holds some
/// 50 MB of programs and bundles.
fn out_dir() -> PathBuf {
    static SWEPT: OnceLock<()> = OnceLock::new();
    let tmp = std::env::temp_dir();
    SWEPT.get_or_init(|| {
        for e in std::fs::read_dir(&tmp).into_iter().flatten().flatten() {
            let name = e.file_name();
            let Some(pid) = name.to_str().and_then(|n| n.strip_prefix("aqueduct-hip-tests-")) else { continue };
            if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    });
    let d = tmp.join(format!("aqueduct-hip-tests-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Compiles `tests/c/<name>.c`; `static_lib` links `libaqueduct_hip.a` instead of the `.so`.
fn build(name: &str, static_lib: bool) -> PathBuf {
    build_with(name, static_lib, &[])
}

/// As [`build`], with extra compiler arguments (`-D…`).
fn build_with(name: &str, static_lib: bool, extra: &[String]) -> PathBuf {
    require("libamdhip64-dev", "/usr/include/hip/hip_runtime_api.h");
    require("gcc", "/usr/bin/gcc");
    let lib = lib_dir();
    let _g = common::compiler_turn();
    let exe = out_dir().join(if static_lib { format!("{name}-static") } else { name.to_owned() });
    let mut c = Command::new("gcc");
    c.args(["-O1", "-g", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter", "-D__HIP_PLATFORM_AMD__"])
        .arg("-I/usr/include")
        .arg(format!("-I{}", manifest().join("include").display()))
        .args(extra)
        .arg("-o")
        .arg(&exe)
        .arg(manifest().join("tests/c").join(format!("{name}.c")));
    if static_lib {
        c.arg(lib.join("libaqueduct_hip.a")).args(["-lpthread", "-ldl", "-lm", "-lrt"]);
    } else {
        c.arg(format!("-L{}", lib.display()))
            .arg("-laqueduct_hip")
            .arg(format!("-Wl,-rpath,{}", lib.display()))
            .arg("-lpthread");
    }
    let out = c.output().expect("gcc");
    assert!(out.status.success(), "gcc {name}.c failed:\n{}", String::from_utf8_lossy(&out.stderr));
    exe
}

/// Runs `exe args` on the emulated GPU, killing it after a minute.
fn run(exe: &Path, args: &[&str]) -> Output {
    run_env(exe, args, &[])
}

/// As [`run`], with extra environment variables.
fn run_env(exe: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(exe);
    c.args(args)
        .env("AQUEDUCT_BACKEND", "emu")
        // The fixture kernels' twins come from the test, as a user's would.
        .env("AQUEDUCT_TWINS", common::fixture_twins(&out_dir()))
        .env_remove("AQD_EXPECT_HIP52") // HIP 5.2's allowances never apply to aqueduct
        .envs(env.iter().copied());
    common::run_command(c, Duration::from_secs(60))
}

/// Builds and runs one C test; returns its stdout.
fn c_test(name: &str, args: &[&str]) -> String {
    check(name, &run(&build(name, false), args))
}

fn check(name: &str, out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{name}: {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}", out.status);
    assert!(stdout.contains(&format!("{name}: ok")), "{name} did not finish:\n{stdout}\nstderr:\n{stderr}");
    stdout
}

/// The emulator's clang-15 fixture code object for `target` (`gfx90a`, `gfx1100`).
fn fixture(target: &str) -> Vec<u8> {
    let path = manifest().join(format!("../../kfd-direct/emu/fixtures/kernels-{target}.co"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A clang offload bundle as clang-offload-bundler writes one for hipcc: the magic, the entry
/// count, each entry's offset, size and id, then the code objects at 4096-byte alignment.
fn bundle(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let header: usize = 32 + entries.iter().map(|(id, _)| 24 + id.len()).sum::<usize>();
    let mut at = header.div_ceil(4096) * 4096;
    let mut out = b"__CLANG_OFFLOAD_BUNDLE__".to_vec();
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

/// Writes `bytes` to a file of this test run; returns its path.
fn write_temp(name: &str, bytes: &[u8]) -> PathBuf {
    let path = out_dir().join(name);
    std::fs::write(&path, bytes).expect("write");
    path
}

/// The host entry clang always writes first (its input is /dev/null).
const HOST_ENTRY: &str = "host-x86_64-unknown-linux-gnu";

#[test]
fn hipcc_style_registration_and_launch() {
    let (gfx90a, gfx1100) = (fixture("gfx90a"), fixture("gfx1100"));
    let good = bundle(&[
        (HOST_ENTRY, &[]),
        ("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+", &gfx1100),
        ("hipv4-amdgcn-amd-amdhsa--gfx1100", &gfx1100),
        ("hipv4-amdgcn-amd-amdhsa--gfx90a", &gfx90a),
    ]);
    let wrong = bundle(&[(HOST_ENTRY, &[]), ("hipv4-amdgcn-amd-amdhsa--gfx1100", &gfx1100)]);
    let define = |key: &str, path: PathBuf| format!("-D{key}=\"{}\"", path.display());
    let extra = [
        define("BUNDLE_GOOD", write_temp("registration-good.hipfb", &good)),
        define("BUNDLE_WRONG", write_temp("registration-wrong.hipfb", &wrong)),
    ];
    check("registration", &run(&build_with("registration", false, &extra), &[]));
}

/// `tests/c/hipcc_program.hip` compiled by clang-15 the way hipcc compiles it (device code
/// object, offload bundle, host object embedding it), once per test run; returns the host
/// object.
fn hipcc_program_object() -> PathBuf {
    static OBJECT: OnceLock<PathBuf> = OnceLock::new();
    OBJECT.get_or_init(|| compile_hip_program("hipcc_program")).clone()
}

/// `tests/c/<name>.hip` compiled as [`hipcc_program_object`] compiles `hipcc_program.hip`;
/// returns the host object (`<name>-gfx90a.co` beside it is the device code object).
fn compile_hip_program(name: &str) -> PathBuf {
    compile_hip(name, false)
}

/// Debian's device libraries (ockl: hostcall, printf).
const DEVICE_LIBS: &str = "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode";

/// As [`compile_hip_program`]; `device_libs` links the device code with the ROCm device
/// libraries instead of `-nogpulib`.
fn compile_hip(name: &str, device_libs: bool) -> PathBuf {
    compile_hip_for(name, device_libs, "gfx90a")
}

/// As [`compile_hip`], the device code built for `arch` (`gfx90a`, or `gfx940` for the emulated
/// gfx942, docs/executor.md §8); files of other targets than gfx90a carry the target in their names.
fn compile_hip_for(name: &str, device_libs: bool, arch: &str) -> PathBuf {
    require("clang-15", "/usr/bin/clang-15");
    require("lld-15", "/usr/bin/ld.lld-15");
    require("libamdhip64-dev", "/usr/include/hip/hip_runtime_api.h");
    lib_dir();
    let src = manifest().join(format!("tests/c/{name}.hip"));
    let dir = out_dir();
    let _g = common::compiler_turn();
    let clang = |args: &[&std::ffi::OsStr]| {
        let out = Command::new("clang-15").args(args).output().expect("clang-15");
        assert!(out.status.success(), "clang-15 {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    };
    let stem = if arch == "gfx90a" { name.to_string() } else { format!("{name}-{arch}") };
    let (device, fatbin, host) =
        (dir.join(format!("{name}-{arch}.co")), dir.join(format!("{stem}.hipfb")), dir.join(format!("{stem}.o")));
    let offload_arch = format!("--offload-arch={arch}");
    let bundle_id = format!("hipv4-amdgcn-amd-amdhsa--{arch}");
    let common = ["-x", "hip", "-nogpulib", "-nogpuinc", "-O2", "-D__HIP_PLATFORM_AMD__", "-I/usr/include"];
    let os = |s: &'static str| std::ffi::OsStr::new(s);
    let mut args: Vec<&std::ffi::OsStr> = common.iter().map(|a| os(a)).collect();
    let lib_path = format!("--rocm-device-lib-path={DEVICE_LIBS}");
    if device_libs {
        require("rocm-device-libs", &format!("{DEVICE_LIBS}/ockl.bc"));
        args.retain(|a| a.to_str() != Some("-nogpulib"));
        args.push(std::ffi::OsStr::new(&lib_path));
    }
    args.extend(["--cuda-device-only", "--no-gpu-bundle-output", "-c"].map(os));
    args.push(std::ffi::OsStr::new(&offload_arch));
    args.extend([src.as_os_str(), os("-o"), device.as_os_str()]);
    clang(&args);
    let code = std::fs::read(&device).expect("device code object");
    std::fs::write(&fatbin, bundle(&[(HOST_ENTRY, &[]), (&bundle_id, &code)])).expect("write");
    let mut args: Vec<&std::ffi::OsStr> = common.iter().map(|a| os(a)).collect();
    args.extend(["--cuda-host-only", "-Xclang", "-fcuda-include-gpubinary", "-Xclang"].map(os));
    args.push(fatbin.as_os_str());
    args.extend([os("-c"), src.as_os_str(), os("-o"), host.as_os_str()]);
    clang(&args);
    // The host object calls the registration ABI itself.
    let nm = Command::new("nm").arg("-u").arg(&host).output().expect("nm");
    let undefined = String::from_utf8_lossy(&nm.stdout);
    let calls: &[&str] = if name == "hipcc_program" {
        &["__hipRegisterFatBinary", "__hipRegisterFunction", "__hipRegisterVar", "__hipPushCallConfiguration"]
    } else {
        &["__hipRegisterFatBinary"]
    };
    for f in calls {
        assert!(undefined.contains(f), "clang's host object does not call {f}:\n{undefined}");
    }
    host
}

/// A kernel's printf messages (ockl's hostcall protocol, run as the kernel's machine code on
/// the emulated gfx90a) reach stdout through the runtime's hostcall buffer and listener.
#[test]
fn device_printf_messages_reach_stdout_through_hostcall() {
    let host = compile_hip("hostcall_printf", true);
    let lib = lib_dir();
    let exe = host.with_file_name("hostcall_printf");
    link(
        &exe,
        &[&host],
        &[format!("-L{}", lib.display()), "-laqueduct_hip".into(), format!("-Wl,-rpath,{}", lib.display())],
    );
    let out = check("hostcall_printf", &run(&exe, &[]));
    let lines: String = (0..4).map(|l| format!("v={} {:x}\n", 10 + l, 0xbeef_0000u32 + l)).collect();
    let want = format!("hostcall_printf: before\n{lines}hostcall_printf: ok\n");
    assert!(out.starts_with(&want), "{out:?}, want it to start with {want:?}");
}

/// The same program built for gfx940 (the MI300 family as clang-15 names it) runs on an emulated
/// gfx942 (`AQUEDUCT_EMU_GPUS=gfx942`): HIP's loader picks the gfx940 image for the gfx942
/// device, and the kernel runs as gfx940 machine code (docs/executor.md §8), ockl's hostcall
/// protocol included.
#[test]
fn gfx940_program_runs_on_an_emulated_gfx942() {
    let host = compile_hip_for("hostcall_printf", true, "gfx940");
    let lib = lib_dir();
    let exe = host.with_file_name("hostcall_printf-gfx940");
    link(
        &exe,
        &[&host],
        &[format!("-L{}", lib.display()), "-laqueduct_hip".into(), format!("-Wl,-rpath,{}", lib.display())],
    );
    let out = check("hostcall_printf", &run_env(&exe, &[], &[("AQUEDUCT_EMU_GPUS", "gfx942")]));
    let lines: String = (0..4).map(|l| format!("v={} {:x}\n", 10 + l, 0xbeef_0000u32 + l)).collect();
    let want = format!("hostcall_printf: before\n{lines}hostcall_printf: ok\n");
    assert!(out.starts_with(&want), "{out:?}, want it to start with {want:?}");
}

/// Links `objects` into `exe` with gcc and `libs`.
fn link(exe: &Path, objects: &[&Path], libs: &[String]) {
    let _g = common::compiler_turn();
    let out = Command::new("gcc").args(objects).args(libs).arg("-o").arg(exe).output().expect("gcc");
    assert!(out.status.success(), "linking {} failed:\n{}", exe.display(), String::from_utf8_lossy(&out.stderr));
}

/// The clang-built HIP program linked against `libaqueduct_hip.so`.
#[test]
fn clang_built_hip_program_runs_unmodified() {
    let host = hipcc_program_object();
    let lib = lib_dir();
    let exe = host.with_file_name("hipcc_program");
    link(
        &exe,
        &[&host],
        &[format!("-L{}", lib.display()), "-laqueduct_hip".into(), format!("-Wl,-rpath,{}", lib.display())],
    );
    check("hipcc_program", &run(&exe, &[]));
}

/// The same program linked against Debian's `libamdhip64` (versioned references to
/// `hip_4.2` …), run on aqueduct's `libamdhip64.so.5` through `LD_LIBRARY_PATH`.
#[test]
fn programs_linked_against_debians_hip_run_on_aqueducts_libamdhip64() {
    require("libamdhip64-dev", "/usr/lib/x86_64-linux-gnu/libamdhip64.so");
    let dir = amdhip64_dir();
    let host = hipcc_program_object();
    let exe = host.with_file_name("hipcc_program-amdhip64");
    link(&exe, &[&host], &["-L/usr/lib/x86_64-linux-gnu".into(), "-lamdhip64".into()]);
    let needs = Command::new("objdump").arg("-p").arg(&exe).output().expect("objdump");
    let needs = String::from_utf8_lossy(&needs.stdout);
    assert!(needs.contains("NEEDED               libamdhip64.so.5") && needs.contains("hip_4.2"), "{needs}");
    let twins = common::fixture_twins(&out_dir());
    let with_aqueduct = |exe: &Path, args: &[&str]| {
        Command::new(exe)
            .args(args)
            .env("LD_LIBRARY_PATH", dir)
            .env("AQUEDUCT_BACKEND", "emu")
            .env("AQUEDUCT_TWINS", twins)
            .output()
            .expect("spawn")
    };
    let ldd = Command::new("ldd").arg(&exe).env("LD_LIBRARY_PATH", dir).output().expect("ldd");
    let ldd = String::from_utf8_lossy(&ldd.stdout);
    assert!(ldd.contains(&format!("{}/libamdhip64.so.5", dir.display())), "{ldd}");
    check("hipcc_program", &with_aqueduct(&exe, &[]));

    // The hipcc-style C program too, built against Debian's header and library.
    let (gfx90a, gfx1100) = (fixture("gfx90a"), fixture("gfx1100"));
    let good = bundle(&[(HOST_ENTRY, &[]), ("hipv4-amdgcn-amd-amdhsa--gfx90a", &gfx90a)]);
    let wrong = bundle(&[(HOST_ENTRY, &[]), ("hipv4-amdgcn-amd-amdhsa--gfx1100", &gfx1100)]);
    let define = |key: &str, path: PathBuf| format!("-D{key}=\"{}\"", path.display());
    let src = manifest().join("tests/c/registration.c");
    let exe = out_dir().join("registration-amdhip64");
    {
        let _g = common::compiler_turn();
        let out = Command::new("gcc")
            .args(["-O1", "-D__HIP_PLATFORM_AMD__", "-I/usr/include"])
            .arg(format!("-I{}", manifest().join("include").display()))
            .arg(define("BUNDLE_GOOD", write_temp("amdhip64-good.hipfb", &good)))
            .arg(define("BUNDLE_WRONG", write_temp("amdhip64-wrong.hipfb", &wrong)))
            .arg(&src)
            .args(["-L/usr/lib/x86_64-linux-gnu", "-lamdhip64", "-lpthread", "-o"])
            .arg(&exe)
            .output()
            .expect("gcc");
        assert!(out.status.success(), "gcc registration.c failed:\n{}", String::from_utf8_lossy(&out.stderr));
    }
    check("registration", &with_aqueduct(&exe, &[]));
}

/// The functions of the families served in full: each must be exported in the version node
/// Debian's libamdhip64 5.2.3 gives it.
const FINISHED_FAMILIES: &[(&str, &[&str])] = &[
    (
        "init, versions and device queries",
        &[
            "hipInit",
            "hipDriverGetVersion",
            "hipRuntimeGetVersion",
            "hipDeviceGet",
            "hipDeviceGetName",
            "hipDeviceTotalMem",
            "hipDeviceComputeCapability",
            "hipDeviceGetPCIBusId",
            "hipDeviceGetByPCIBusId",
            "hipDeviceGetUuid",
            "hipChooseDevice",
            "hipDeviceGetCacheConfig",
            "hipDeviceSetCacheConfig",
            "hipDeviceGetSharedMemConfig",
            "hipDeviceSetSharedMemConfig",
            "hipSetDeviceFlags",
            "hipGetDeviceFlags",
            "hipDeviceGetP2PAttribute",
            "hipDeviceCanAccessPeer",
            "hipDeviceGetLimit",
            "hipExtGetLinkTypeAndHopCount",
            "hipGetStreamDeviceId",
        ],
    ),
    (
        "contexts",
        &[
            "hipCtxCreate",
            "hipCtxDestroy",
            "hipCtxPushCurrent",
            "hipCtxPopCurrent",
            "hipCtxSetCurrent",
            "hipCtxGetCurrent",
            "hipCtxGetDevice",
            "hipCtxGetApiVersion",
            "hipCtxGetCacheConfig",
            "hipCtxSetCacheConfig",
            "hipCtxGetSharedMemConfig",
            "hipCtxSetSharedMemConfig",
            "hipCtxSynchronize",
            "hipCtxGetFlags",
            "hipCtxEnablePeerAccess",
            "hipCtxDisablePeerAccess",
            "hipDevicePrimaryCtxGetState",
            "hipDevicePrimaryCtxRelease",
            "hipDevicePrimaryCtxReset",
            "hipDevicePrimaryCtxRetain",
            "hipDevicePrimaryCtxSetFlags",
        ],
    ),
    (
        "the per-thread default stream",
        &[
            "hipStreamSynchronize_spt",
            "hipStreamQuery_spt",
            "hipStreamGetFlags_spt",
            "hipStreamGetPriority_spt",
            "hipStreamWaitEvent_spt",
            "hipLaunchKernel_spt",
            "hipMemcpy_spt",
            "hipMemcpyAsync_spt",
            "hipMemcpy2D_spt",
            "hipMemcpy3D_spt",
            "hipMemcpyToSymbol_spt",
            "hipMemcpyFromSymbol_spt",
            "hipMemset_spt",
            "hipMemset2D_spt",
            "hipMemset3D_spt",
            "hipMemcpy2DToArray_spt",
            "hipMemcpy2DFromArray_spt",
            "hipLaunchCooperativeKernel_spt",
        ],
    ),
    (
        "host memory and pointers",
        &[
            "hipHostMalloc",
            "hipHostAlloc",
            "hipMallocHost",
            "hipMemAllocHost",
            "hipHostFree",
            "hipFreeHost",
            "hipHostGetFlags",
            "hipHostGetDevicePointer",
            "hipExtMallocWithFlags",
            "hipMemGetAddressRange",
            "hipMemPtrGetInfo",
            "hipPointerGetAttribute",
            "hipPointerGetAttributes",
            "hipDrvPointerGetAttributes",
        ],
    ),
    (
        "pitched and 3-D linear memory",
        &[
            "hipMallocPitch",
            "hipMemAllocPitch",
            "hipMalloc3D",
            "hipMemcpy2D",
            "hipMemcpy2DAsync",
            "hipMemcpyParam2D",
            "hipMemcpyParam2DAsync",
            "hipDrvMemcpy2DUnaligned",
            "hipMemcpy3D",
            "hipMemcpy3DAsync",
            "hipDrvMemcpy3D",
            "hipDrvMemcpy3DAsync",
            "hipMemset2D",
            "hipMemset2DAsync",
            "hipMemset3D",
            "hipMemset3DAsync",
            "hipMemsetD8",
            "hipMemsetD8Async",
            "hipMemsetD16",
            "hipMemsetD16Async",
        ],
    ),
    (
        "modules, function attributes and occupancy",
        &[
            "hipModuleGetGlobal",
            "hipModuleLoadDataEx",
            "hipModuleGetTexRef",
            "__hipGetPCH",
            "hipModuleOccupancyMaxPotentialBlockSize",
            "hipModuleOccupancyMaxPotentialBlockSizeWithFlags",
            "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor",
            "hipModuleOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
            "hipFuncGetAttribute",
            "hipFuncGetAttributes",
            "hipFuncSetAttribute",
            "hipFuncSetCacheConfig",
            "hipFuncSetSharedMemConfig",
        ],
    ),
    (
        "extended and cooperative launches",
        &[
            "hipExtLaunchKernel",
            "_Z24hipExtModuleLaunchKernelP18ihipModuleSymbol_tjjjjjjmP12ihipStream_tPPvS4_P11ihipEvent_tS6_j",
            "_Z24hipHccModuleLaunchKernelP18ihipModuleSymbol_tjjjjjjmP12ihipStream_tPPvS4_P11ihipEvent_tS6_",
            "hipLaunchCooperativeKernel",
            "hipLaunchCooperativeKernel_spt",
            "hipLaunchCooperativeKernelMultiDevice",
            "hipExtLaunchMultiKernelMultiDevice",
            "_ZN8hip_impl22hipLaunchKernelGGLImplEmRK4dim3S2_jP12ihipStream_tPPv",
        ],
    ),
    (
        "managed memory",
        &[
            "hipMallocManaged",
            "hipMemAdvise",
            "hipMemPrefetchAsync",
            "hipMemRangeGetAttribute",
            "hipMemRangeGetAttributes",
            "hipStreamAttachMemAsync",
            "__hipRegisterManagedVar",
        ],
    ),
    (
        "arrays (mipmapped ones answer NotSupported)",
        &[
            "hipArray3DCreate",
            "hipArrayCreate",
            "hipArrayDestroy",
            "hipCreateChannelDesc",
            "hipFreeArray",
            "hipFreeMipmappedArray",
            "hipGetChannelDesc",
            "hipGetMipmappedArrayLevel",
            "hipMalloc3DArray",
            "hipMallocArray",
            "hipMallocMipmappedArray",
            "hipMemMapArrayAsync",
            "hipMemcpy2DFromArray",
            "hipMemcpy2DFromArrayAsync",
            "hipMemcpy2DToArray",
            "hipMemcpy2DToArrayAsync",
            "hipMemcpyAtoH",
            "hipMemcpyFromArray",
            "hipMemcpyHtoA",
            "hipMemcpyToArray",
            "hipMipmappedArrayCreate",
            "hipMipmappedArrayDestroy",
            "hipMipmappedArrayGetLevel",
        ],
    ),
    (
        "textures and surfaces (NotSupported)",
        &[
            "_Z22hipCreateSurfaceObjectPP13__hip_surfacePK15hipResourceDesc",
            "_Z23hipDestroySurfaceObjectP13__hip_surface",
            "__hipRegisterSurface",
            "__hipRegisterTexture",
            "hipBindTexture",
            "hipBindTexture2D",
            "hipBindTextureToArray",
            "hipBindTextureToMipmappedArray",
            "hipCreateTextureObject",
            "hipDestroyTextureObject",
            "hipGetTextureAlignmentOffset",
            "hipGetTextureObjectResourceDesc",
            "hipGetTextureObjectResourceViewDesc",
            "hipGetTextureObjectTextureDesc",
            "hipGetTextureReference",
            "hipTexObjectCreate",
            "hipTexObjectDestroy",
            "hipTexObjectGetResourceDesc",
            "hipTexObjectGetResourceViewDesc",
            "hipTexObjectGetTextureDesc",
            "hipTexRefGetAddress",
            "hipTexRefGetAddressMode",
            "hipTexRefGetFilterMode",
            "hipTexRefGetFlags",
            "hipTexRefGetFormat",
            "hipTexRefGetMaxAnisotropy",
            "hipTexRefGetMipmapFilterMode",
            "hipTexRefGetMipmapLevelBias",
            "hipTexRefGetMipmapLevelClamp",
            "hipTexRefSetAddress",
            "hipTexRefSetAddress2D",
            "hipTexRefSetAddressMode",
            "hipTexRefSetArray",
            "hipTexRefSetBorderColor",
            "hipTexRefSetFilterMode",
            "hipTexRefSetFlags",
            "hipTexRefSetFormat",
            "hipTexRefSetMaxAnisotropy",
            "hipTexRefSetMipmapFilterMode",
            "hipTexRefSetMipmapLevelBias",
            "hipTexRefSetMipmapLevelClamp",
            "hipTexRefSetMipmappedArray",
            "hipUnbindTexture",
        ],
    ),
    (
        "GL and external-resource interop (NotSupported)",
        &[
            "hipDestroyExternalMemory",
            "hipDestroyExternalSemaphore",
            "hipExternalMemoryGetMappedBuffer",
            "hipGLGetDevices",
            "hipGraphicsGLRegisterBuffer",
            "hipGraphicsGLRegisterImage",
            "hipGraphicsMapResources",
            "hipGraphicsResourceGetMappedPointer",
            "hipGraphicsSubResourceGetMappedArray",
            "hipGraphicsUnmapResources",
            "hipGraphicsUnregisterResource",
            "hipImportExternalMemory",
            "hipImportExternalSemaphore",
            "hipSignalExternalSemaphoresAsync",
            "hipWaitExternalSemaphoresAsync",
        ],
    ),
    (
        "IPC (NotSupported after argument checks)",
        &[
            "hipIpcCloseMemHandle",
            "hipIpcGetEventHandle",
            "hipIpcGetMemHandle",
            "hipIpcOpenEventHandle",
            "hipIpcOpenMemHandle",
        ],
    ),
    (
        "virtual memory (NotSupported after argument checks)",
        &[
            "hipMemAddressFree",
            "hipMemAddressReserve",
            "hipMemCreate",
            "hipMemExportToShareableHandle",
            "hipMemGetAccess",
            "hipMemGetAllocationGranularity",
            "hipMemGetAllocationPropertiesFromHandle",
            "hipMemImportFromShareableHandle",
            "hipMemMap",
            "hipMemRelease",
            "hipMemRetainAllocationHandle",
            "hipMemSetAccess",
            "hipMemUnmap",
        ],
    ),
    (
        "profiler, tracing and names",
        &[
            "amd_dbgapi_get_build_id",
            "amd_dbgapi_get_build_name",
            "amd_dbgapi_get_git_hash",
            "hipApiName",
            "hipEnableActivityCallback",
            "hipGetCmdName",
            "hipInitActivityCallback",
            "hipKernelNameRef",
            "hipKernelNameRefByPtr",
            "hipProfilerStart",
            "hipProfilerStop",
            "hipRegisterActivityCallback",
            "hipRegisterApiCallback",
            "hipRemoveActivityCallback",
            "hipRemoveApiCallback",
        ],
    ),
    ("half-precision helpers", &["__gnu_f2h_ieee", "__gnu_h2f_ieee"]),
    (
        "hiprtc",
        &[
            "hiprtcAddNameExpression",
            "hiprtcCompileProgram",
            "hiprtcCreateProgram",
            "hiprtcDestroyProgram",
            "hiprtcGetCode",
            "hiprtcGetCodeSize",
            "hiprtcGetErrorString",
            "hiprtcGetLoweredName",
            "hiprtcGetProgramLog",
            "hiprtcGetProgramLogSize",
            "hiprtcVersion",
        ],
    ),
];

/// The `(version node, function)` pairs a library exports (`objdump -T`, defined functions).
fn exported_functions(lib: &Path) -> std::collections::BTreeSet<(String, String)> {
    let out = Command::new("objdump").arg("-T").arg(lib).output().expect("objdump");
    assert!(out.status.success(), "objdump -T {}: {}", lib.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 7 && f[3] == ".text").then(|| (f[f.len() - 2].to_owned(), f[f.len() - 1].to_owned()))
        })
        .collect()
}

/// The export lists of Debian's `libamdhip64.so.5` and of aqueduct's (built by
/// `build-libamdhip64.sh`), compared as the pre-stop hook compares them: prints what is still
/// missing, and fails on any missing function of [`FINISHED_FAMILIES`] (or one exported in
/// another version node than Debian's).
#[test]
fn libamdhip64_exports_debians_functions() {
    require("binutils", "/usr/bin/objdump");
    let debian = Path::new("/usr/lib/x86_64-linux-gnu/libamdhip64.so.5");
    require("libamdhip64-5", "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5");
    let theirs = exported_functions(debian);
    let ours = exported_functions(&amdhip64_dir().join("libamdhip64.so.5"));
    let missing: Vec<&(String, String)> = theirs.difference(&ours).collect();
    println!(
        "{} of Debian's {} exported functions are missing from aqueduct's libamdhip64.so.5:",
        missing.len(),
        theirs.len()
    );
    for (node, name) in &missing {
        println!("  {node} {name}");
    }
    let mut failures = Vec::new();
    for (family, functions) in FINISHED_FAMILIES {
        for f in *functions {
            match theirs.iter().find(|(_, n)| n == f) {
                Some(pair) if !ours.contains(pair) => failures.push(format!("{family}: {} {}", pair.0, pair.1)),
                Some(_) => {}
                None => failures.push(format!("{family}: {f} is not one of Debian's exports")),
            }
        }
    }
    assert!(failures.is_empty(), "missing from aqueduct's libamdhip64.so.5:\n{}", failures.join("\n"));
}

/// `tests/c/per_thread.hip` built by Debian's hipcc three ways, linked against Debian's
/// `libamdhip64` and run on aqueduct's `libamdhip64.so.5`: with `-fgpu-default-stream=per-thread`
/// (`<<<>>>` and the renamed API call the `_spt` functions), with
/// `-DHIP_API_PER_THREAD_DEFAULT_STREAM` (the renamed API; no kernels, which clang cannot stub
/// with the macro alone), and with neither (the legacy default stream). Two threads' default
/// streams do not order against each other in the first two and do in the third; the legacy
/// stream waits for a blocking stream in all three.
#[test]
fn per_thread_default_stream_builds_by_hipcc() {
    require("hipcc", "/usr/bin/hipcc");
    require("libamdhip64-dev", "/usr/lib/x86_64-linux-gnu/libamdhip64.so");
    let dir = amdhip64_dir();
    let src = manifest().join("tests/c/per_thread.hip");
    let builds: [(&str, &[&str], &[&str], &str); 3] = [
        (
            "per_thread-fgpu",
            &["-fgpu-default-stream=per-thread"],
            &["hipLaunchKernel_spt", "hipMemcpyAsync_spt", "hipMemcpy_spt", "hipStreamSynchronize_spt"],
            "per-thread default stream",
        ),
        (
            "per_thread-macro",
            &["-DHIP_API_PER_THREAD_DEFAULT_STREAM", "-DAQD_NO_KERNELS"],
            &["hipMemcpyAsync_spt", "hipStreamQuery_spt", "hipStreamGetFlags_spt"],
            "per-thread default stream",
        ),
        ("per_thread-legacy", &[], &[], "legacy default stream"),
    ];
    for (name, flags, calls, mode) in builds {
        let exe = out_dir().join(name);
        {
            let _g = common::compiler_turn();
            let out = Command::new("hipcc")
                .args(flags)
                .args(["--offload-arch=gfx90a", "-nogpulib", "-nogpuinc", "-O1", "-Wall", "-Werror"])
                .arg(&src)
                .arg("-o")
                .arg(&exe)
                .arg("-lpthread")
                .output()
                .expect("hipcc");
            assert!(out.status.success(), "hipcc {flags:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
        }
        let nm = Command::new("nm").arg("-u").arg(&exe).output().expect("nm");
        let undefined = String::from_utf8_lossy(&nm.stdout);
        for f in calls {
            assert!(undefined.contains(&format!("{f}@hip_5.2")), "{name} does not call {f}@hip_5.2:\n{undefined}");
        }
        assert_eq!(calls.is_empty(), !undefined.contains("_spt"), "{name}:\n{undefined}");
        let mut c = Command::new(&exe);
        c.env("LD_LIBRARY_PATH", dir)
            .env("AQUEDUCT_BACKEND", "emu")
            .env("AQUEDUCT_TWINS", common::fixture_twins(&out_dir()));
        let out = check("per_thread", &common::run_command(c, Duration::from_secs(60)));
        assert!(out.contains(&format!("per_thread: ok ({mode})")), "{name}: {out}");
    }
}

#[test]
fn device_properties_and_attributes() {
    require("libdrm-common", "/usr/share/libdrm/amdgpu.ids");
    let out = c_test("device_properties", &[]);
    // The emulated gfx90a's PCI id, 0x740f, is the MI210 in libdrm's table.
    assert!(out.contains("name: AMD Instinct MI210"), "{out}");
}

/// hipInit, the versions, driver-style device queries and settings, HIP's contexts.
#[test]
fn device_queries_and_contexts() {
    c_test("device_ctx", &[]);
    check("device_ctx", &run_env(&build("device_ctx", false), &[], &[("AQUEDUCT_EMU_GPUS", "2")]));
}

#[test]
fn device_memory_and_errors() {
    let out = c_test("device_memory", &[]);
    assert!(out.contains("CUs: 104"), "the emulated gfx90a has 104 CUs:\n{out}");
}

#[test]
fn static_library_links() {
    check("device_memory", &run(&build("device_memory", true), &[]));
}

#[test]
fn stream_ordered_allocation() {
    c_test("mempool", &[]);
}

#[test]
fn pageable_host_memory() {
    c_test("pageable", &[]);
}

#[test]
fn a_hundred_simultaneous_captures() {
    c_test("captures", &[]);
}

/// Two emulated GPUs.
#[test]
fn peer_access_and_copies_across_two_gpus() {
    check("multigpu", &run_env(&build("multigpu", false), &[], &[("AQUEDUCT_EMU_GPUS", "2")]));
}

#[test]
fn streams_and_events() {
    c_test("streams", &[]);
}

#[test]
fn capture_fork_join_and_graphs() {
    c_test("capture_graph", &[]);
}

#[test]
fn graphs_built_node_by_node() {
    c_test("graph_nodes", &[]);
}

/// One node of a 10,000-node executable changed by update and in place, copy, fill and host
/// nodes changed, launch–change–launch ordering, and refused updates.
#[test]
fn executables_updated_in_place() {
    c_test("graph_update", &[]);
}

#[test]
fn conditional_nodes_if_while_switch() {
    c_test("conditional", &[]);
}

/// `include/aqueduct_hip_device.h` compiled by clang-15 for gfx90a: `hipGraphSetConditional`
/// must become a store to the handle's word with system-scope release order, which on gfx90a
/// is an L2 write-back (`buffer_wbl2`) and a wait before the store.
#[test]
fn device_setter_is_a_system_scope_release_store() {
    require("clang-15", "/usr/bin/clang-15");
    require("libamdhip64-dev", "/usr/include/hip/hip_runtime_api.h");
    let asm = out_dir().join("conditional_device.s");
    {
        let _g = common::compiler_turn();
        let out = Command::new("clang-15")
            .args(["-x", "hip", "-nogpulib", "-nogpuinc", "-O2", "-D__HIP_PLATFORM_AMD__", "-I/usr/include"])
            .arg(format!("-I{}", manifest().join("include").display()))
            .args(["--cuda-device-only", "--offload-arch=gfx90a", "-S", "-o"])
            .arg(&asm)
            .arg(manifest().join("tests/c/conditional_device.hip"))
            .output()
            .expect("clang-15");
        assert!(out.status.success(), "clang-15 failed:\n{}", String::from_utf8_lossy(&out.stderr));
    }
    let text = std::fs::read_to_string(&asm).expect("assembly");
    let body: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("set_condition:"))
        .take_while(|l| !l.contains("s_endpgm"))
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with(';') && !l.starts_with('.'))
        .collect();
    let wb = body.iter().position(|l| l.starts_with("buffer_wbl2"));
    let store = body.iter().rposition(|l| l.contains("_store_dword"));
    assert!(
        matches!((wb, store), (Some(w), Some(s)) if w < s && body[w..s].iter().any(|l| l.starts_with("s_waitcnt"))),
        "no release store in set_condition:\n{}",
        body.join("\n")
    );
}

/// Host memory under its older names, pointer attributes and ranges, pitched and 3-D memory,
/// the `_spt` copies and fills, and allocation answers.
#[test]
fn host_pitched_and_3d_memory() {
    c_test("host_pitched", &[]);
}

#[test]
fn copies_fills_pointers_and_free_lifetime() {
    c_test("memory_api", &[]);
}

#[test]
fn detach_through_execution_contexts() {
    c_test("detach", &[]);
}

#[test]
fn per_thread_streams_from_two_pthreads() {
    c_test("threads", &[]);
}

#[test]
fn host_kernels_and_modules() {
    let fixture = manifest().join("../../kfd-direct/emu/fixtures/kernels-gfx90a.co");
    assert!(fixture.is_file(), "{} missing", fixture.display());
    c_test("kernels", &[fixture.to_str().expect("utf-8 path")]);
}

#[test]
fn modules_without_metadata_or_with_wrapping_headers() {
    let fixture = manifest().join("../../kfd-direct/emu/fixtures/kernels-gfx90a.co");
    assert!(fixture.is_file(), "{} missing", fixture.display());
    c_test("module_metadata", &[fixture.to_str().expect("utf-8 path")]);
}

/// Module globals, JIT-option loads, texture references, function attributes and occupancy,
/// and the extended and cooperative launches (one GPU, then two).
#[test]
fn module_queries_and_extended_and_cooperative_launches() {
    let fixture = manifest().join("../../kfd-direct/emu/fixtures/kernels-gfx90a.co");
    let program = hipcc_program_object().with_file_name("hipcc_program-gfx90a.co");
    let args = [fixture.to_str().expect("utf-8 path"), program.to_str().expect("utf-8 path")];
    let exe = build("modules_launches", false);
    check("modules_launches", &run(&exe, &args));
    let two = check("modules_launches", &run_env(&exe, &args, &[("AQUEDUCT_EMU_GPUS", "2")]));
    assert!(two.contains("two devices"), "{two}");
}

/// `hipMemcpyBatchAsync`: batched copies with per-range source-access attributes.
#[test]
fn batched_copies() {
    c_test("memcpy_batch", &[]);
}

/// `hipStreamBatchMemOp`: batched waits and writes in stream order; a refused batch enqueues
/// nothing.
#[test]
fn batched_stream_memory_operations() {
    c_test("stream_batch", &[]);
}

/// `hipStreamBeginCaptureToGraph`: captures landing in existing graphs, checked by the graphs'
/// shape and by what they compute.
#[test]
fn capture_into_existing_graphs() {
    c_test("capture_to_graph", &[]);
}

/// Stream attributes (`hipStreamGetAttribute`/`SetAttribute`/`CopyAttributes`) and
/// `hipLaunchKernelExC` with its attributes, launching the emulator's fixture kernel.
#[test]
fn stream_attributes_and_attributed_launches() {
    let fixture = manifest().join("../../kfd-direct/emu/fixtures/kernels-gfx90a.co");
    let exe = build("stream_attributes", false);
    check("stream_attributes", &run(&exe, &[fixture.to_str().expect("utf-8 path")]));
}

/// `__managed__` variables of a program clang builds as hipcc does: registered with
/// `__hipRegisterManagedVar`, initialised, reached from the host and from a kernel; linked
/// against `libaqueduct_hip.so`, and against Debian's `libamdhip64` run on aqueduct's.
#[test]
fn managed_variables_of_a_clang_built_program() {
    let host = compile_hip_program("managed_var");
    let nm = Command::new("nm").arg("-u").arg(&host).output().expect("nm");
    assert!(String::from_utf8_lossy(&nm.stdout).contains("__hipRegisterManagedVar"));
    let lib = lib_dir();
    let exe = host.with_file_name("managed_var");
    link(
        &exe,
        &[&host],
        &[format!("-L{}", lib.display()), "-laqueduct_hip".into(), format!("-Wl,-rpath,{}", lib.display())],
    );
    check("managed_var", &run(&exe, &[]));
    require("libamdhip64-dev", "/usr/lib/x86_64-linux-gnu/libamdhip64.so");
    let dir = amdhip64_dir();
    let exe = host.with_file_name("managed_var-amdhip64");
    link(&exe, &[&host], &["-L/usr/lib/x86_64-linux-gnu".into(), "-lamdhip64".into()]);
    let lib_path = dir.to_str().expect("utf-8 path");
    check("managed_var", &run_env(&exe, &[], &[("LD_LIBRARY_PATH", lib_path)]));
}

/// Registered host memory (`hipHostRegister`): malloc'd memory read and written by a kernel's
/// machine code through its device address, copies and fills by either address, the pointer
/// queries and every error; linked against `libaqueduct_hip.so` and run on kfd-direct over the
/// emulator, and on the ROCr backend (Debian's ROCr 5.2 on the emulator under the preload:
/// `hsa_amd_memory_lock`); and linked against Debian's `libamdhip64`, run on aqueduct's
/// `libamdhip64.so.5`.
#[test]
fn registered_host_memory_is_device_memory() {
    let host = compile_hip_program("host_register");
    let lib = lib_dir();
    let exe = host.with_file_name("host_register");
    link(
        &exe,
        &[&host],
        &[format!("-L{}", lib.display()), "-laqueduct_hip".into(), format!("-Wl,-rpath,{}", lib.display())],
    );
    check("host_register", &run(&exe, &[]));
    require("libhsa-runtime64-1", "/usr/lib/x86_64-linux-gnu/libhsa-runtime64.so.1");
    let rocr = Command::new(&exe)
        .env("AQUEDUCT_BACKEND", "rocr")
        .env("LD_PRELOAD", preload_lib())
        .env("AQUEDUCT_GPU", "gfx90a")
        .env_remove("AQUEDUCT_TWINS")
        .output()
        .expect("run under the preload");
    check("host_register", &rocr);
    require("libamdhip64-dev", "/usr/lib/x86_64-linux-gnu/libamdhip64.so");
    let dir = amdhip64_dir();
    let exe = host.with_file_name("host_register-amdhip64");
    link(&exe, &[&host], &["-L/usr/lib/x86_64-linux-gnu".into(), "-lamdhip64".into()]);
    let lib_path = dir.to_str().expect("utf-8 path");
    check("host_register", &run_env(&exe, &[], &[("LD_LIBRARY_PATH", lib_path)]));
}

/// Virtual memory management: a reserved range grown handle by handle while a kernel compiled
/// by clang-15 (its machine code on the emulated GPU) reads and writes the mapped part, an alias
/// of one handle, copies and fills across handles, every error; the ROCr backend (ROCr 5.2 has
/// no `hsa_amd_vmem_*`) answers `hipErrorNotSupported`.
#[test]
fn virtual_memory_grows_a_mapping_under_a_kernel() {
    let host = compile_hip_program("vmm");
    let lib = lib_dir();
    let exe = host.with_file_name("vmm");
    link(
        &exe,
        &[&host],
        &[format!("-L{}", lib.display()), "-laqueduct_hip".into(), format!("-Wl,-rpath,{}", lib.display())],
    );
    check("vmm", &run(&exe, &[]));
    require("libhsa-runtime64-1", "/usr/lib/x86_64-linux-gnu/libhsa-runtime64.so.1");
    let rocr = Command::new(&exe)
        .arg("unsupported")
        .env("AQUEDUCT_BACKEND", "rocr")
        .env("LD_PRELOAD", preload_lib())
        .env("AQUEDUCT_GPU", "gfx90a")
        .env_remove("AQUEDUCT_TWINS")
        .output()
        .expect("run under the preload");
    check("vmm", &rocr);
}

/// Managed memory: allocation, advice, prefetches, range attributes, stream attachment.
#[test]
fn managed_memory() {
    c_test("managed", &[]);
}

/// Arrays over linear memory and the copies to and from them; mipmapped arrays refused.
#[test]
fn arrays_and_their_copies() {
    c_test("arrays", &[]);
}

/// The profiler and tracing entry points, kernel and API names, the half-precision helpers and
/// `hip_impl::hipLaunchKernelGGLImpl`.
#[test]
fn tracing_names_and_helpers() {
    let fixture = manifest().join("../../kfd-direct/emu/fixtures/kernels-gfx90a.co");
    c_test("tracing", &[fixture.to_str().expect("utf-8 path")]);
}

/// Textures, surfaces, GL and external-resource interop and shareable handles of virtual
/// memory: checked, then `hipErrorNotSupported`.
#[test]
fn unsupported_families_answer_not_supported() {
    c_test("unsupported", &[]);
}

/// IPC between two processes on the emulated GPU: the program starts itself again as the child,
/// which opens the parent's memory and event handles; each side sees the other's writes, the
/// child's stream waits for the parent's record, and the error cases of both sides.
#[test]
fn ipc_between_two_processes() {
    c_test("ipc", &[]);
}

/// `hiprtc` compiling with the installed clang-15: headers, name expressions and lowered names,
/// logs, and the code object loaded and launched.
#[test]
fn hiprtc_compiles_loads_and_launches() {
    require("clang-15", "/usr/bin/clang-15");
    require("lld-15", "/usr/bin/ld.lld-15");
    require("llvm-15", "/usr/bin/llvm-cxxfilt-15");
    c_test("hiprtc", &[]);
}

#[test]
fn hip_scale_4096_streams_16384_events_10000_node_graph() {
    let out = c_test("scale", &[]);
    let rss = out.lines().find(|l| l.starts_with("rss:")).expect("the test reports its resident memory");
    println!("{rss}");
}

/// Asserts that README.md shows `tests/c/<name>.c` as one of its C blocks, verbatim but for the
/// line printing `<name>: ok` (which only the test needs), so the README's examples are the
/// programs these tests compile and run.
fn readme_shows(name: &str) {
    let readme = std::fs::read_to_string(manifest().join("../../README.md")).expect("README.md");
    let mut blocks = Vec::new();
    let mut block: Option<String> = None;
    for line in readme.lines() {
        match (&mut block, line) {
            (None, "```c") => block = Some(String::new()),
            (Some(b), "```") => {
                blocks.push(std::mem::take(b));
                block = None;
            }
            (Some(b), l) => {
                b.push_str(l);
                b.push('\n');
            }
            (None, _) => {}
        }
    }
    let file = std::fs::read_to_string(manifest().join(format!("tests/c/{name}.c"))).expect("example");
    let ok = format!("printf(\"{name}: ok\\n\");");
    let shown: String = file.lines().filter(|l| l.trim() != ok).flat_map(|l| [l, "\n"]).collect();
    assert!(blocks.contains(&shown), "README.md does not show tests/c/{name}.c (less its `{ok}` line) as a C block");
}

#[test]
fn readme_example() {
    readme_shows("readme_example");
    let out = c_test("readme_example", &[]);
    assert!(out.contains("4 nodes: host[0] = 111, host[255] = 110"), "{out}");
    assert!(out.contains("last error: hipErrorIllegalState"), "{out}");
}

#[test]
fn readme_while_example() {
    readme_shows("readme_while");
    let out = c_test("readme_while", &[]);
    assert!(out.contains("x = 1 after 19 iterations"), "{out}");
}

/// `aqueduct bench` loads this library and reports `hipLaunchKernel` beside core's enqueue of
/// the same launch, and `hipGraphExecUpdate` of one node of 10,000 beside `hipGraphInstantiate`
/// (values are not judged here: figures live in the benchmark, not in tests).
#[test]
fn bench_reports_the_launch_cost_of_the_c_abi_beside_cores() {
    let lib = lib_dir();
    let mut c = Command::new(env!("CARGO"));
    c.args(["build", "-q", "-p", "aqueduct-std", "--bin", "aqueduct"]).current_dir(manifest());
    if lib.file_name().is_some_and(|n| n == "release") {
        c.arg("--release");
    }
    let out = c.output().expect("cargo build");
    assert!(out.status.success(), "building aqueduct failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let out = Command::new(lib.join("aqueduct"))
        .args(["bench", "--short", "--samples", "1", "--json", "--backend", "emu"])
        .env("AQUEDUCT_HIP_LIB", lib.join("libaqueduct_hip.so"))
        .output()
        .expect("aqueduct bench");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for (figure, floor) in [
        ("hip_launch_kernel", "core_launch"),
        ("hip_launch_kernel_hipcc", "core_launch_hipcc"),
        ("graph_exec_update_one_of_10000", "graph_instantiate_10000"),
    ] {
        let at =
            stdout.find(&format!("\"name\":\"{figure}\"")).unwrap_or_else(|| panic!("{figure} missing:\n{stdout}"));
        let start = stdout[..at].rfind('{').unwrap_or(0);
        let entry = &stdout[start..at + stdout[at..].find('}').unwrap_or(0)];
        assert!(entry.contains(&format!("\"floor\":\"{floor}\"")), "{entry}");
        assert!(!entry.contains("\"ratio\":null") && !entry.contains("\"ns\":null"), "{entry}");
    }
}

/// Debian's rocRAND and rocSPARSE, and a rocPRIM program built by hipcc, load their kernels
/// unmodified through aqueduct's `libamdhip64.so.5`: among the fat binaries they register
/// (rocSPARSE over a hundred) the right bundle entry is loaded for the device, the kernel is
/// found by name in the placed image, its launch reaches the emulated GPU, and the GPU names the
/// kernel from that image. None has a host twin: with twins only (`AQUEDUCT_EMU_KERNELS=twin`)
/// the dispatch fails naming the kernel and the program reports it — a wrong code object, target
/// or symbol would fail earlier, with another error. By default the emulator runs their machine
/// code (docs/executor.md), and each program finishes with its results checked on the host:
/// `differential.rs` `client_libraries_run_their_machine_code_on_both_runtimes` runs them so on
/// this library and on Debian's HIP and compares their output.
#[test]
fn client_libraries_load_their_kernels_through_aqueducts_libamdhip64() {
    require("hipcc", "/usr/bin/hipcc");
    require("librocprim-dev", "/usr/include/rocprim/rocprim.hpp");
    require("librocrand-dev", "/usr/include/rocrand/rocrand.h");
    require("librocsparse-dev", "/usr/include/rocsparse/rocsparse.h");
    let dir = amdhip64_dir();
    let kernels = ["_ZN7rocprim6detail", "_ZN12rocrand_host6detail", "_ZL11init_kernelv"];
    let programs = common::client_programs(&out_dir());
    for ((exe, done), kernel) in programs.into_iter().zip(kernels) {
        let mut c = Command::new(&exe);
        c.env("LD_LIBRARY_PATH", dir).env("AQUEDUCT_BACKEND", "emu").env_remove("AQUEDUCT_TWINS");
        c.env("AQUEDUCT_EMU_KERNELS", "twin");
        let out = common::run_command(c, Duration::from_secs(300));
        let stderr = String::from_utf8_lossy(&out.stderr);
        for wrong in ["hipErrorNoBinaryForGpu", "hipErrorInvalidImage", "hipErrorInvalidDeviceFunction", "cannot name"]
        {
            assert!(!stderr.contains(wrong), "{} (twins only): {wrong}\n{stderr}", exe.display());
        }
        let named = format!("no host twin for kernel `{kernel}");
        assert!(stderr.contains(&named), "{}: its kernel did not reach the GPU:\n{stderr}", exe.display());
        assert!(!out.status.success(), "{}: cannot succeed without its kernels' results ({done})", exe.display());
    }
}
