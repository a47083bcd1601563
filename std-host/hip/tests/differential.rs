//! The differential run: each C test of `tests/c` that uses only standard HIP API is compiled
//! with gcc against Debian's HIP 5.2 header, linked against Debian's `libamdhip64`, and the same
//! binary runs twice on the emulated gfx90a: on Debian's HIP under the preload library
//! (`libaqueduct_kfd_preload.so`), and on aqueduct's `libamdhip64.so.5` through
//! `LD_LIBRARY_PATH`. Both runs must exit 0 and print `<name>: ok`.
//!
//! Aqueduct follows the newest HIP. The Debian run alone sets `AQD_EXPECT_HIP52`, under which a
//! test skips or accepts the checks where HIP 5.2 behaves differently (`NEWER_HIP` in
//! `tests/c/check.h`, each with a comment naming the difference; README lists them under
//! "Where aqueduct's answer differs from HIP 5.2's"). Aqueduct's run never sets it.
//!
//! Standard-only and run here: `capture_graph`, `device_ctx`, `device_memory`, `device_properties`,
//! `module_metadata`, `rect_copies` (also with the blit kernels as machine code and in check
//! mode), `scale`, `streams`, `threads`, the legacy hipcc build of `per_thread.hip`, and the
//! hipcc build of `private_memory.hip` (kernels that need scratch). Not
//! here:
//! - `captures`, `conditional`, `detach`, `graph_nodes`, `kernels`, `memory_api`, `mempool`,
//!   `multigpu`, `pageable`, `readme_example`, `readme_while` and `stress` call aqueduct's
//!   extensions (host kernels through `aqdRegisterHostKernel`, execution contexts, conditional
//!   nodes), which Debian's HIP has not;
//! - `registration` is standard-only, but it is about the paths where HIP 5.2 ends the process:
//!   a fat binary without a code object for the device (HIP 5.2 aborts with
//!   hipErrorNoBinaryForGpu) and a NULL wrapper handed to `__hipRegisterFatBinary` (HIP 5.2
//!   dereferences it). The hipcc-built program of `c_api.rs` covers the registration ABI on
//!   aqueduct's `libamdhip64.so.5`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Duration;

mod common;
use common::run_command;

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

/// `target/<profile>/`, with the crates this test runs freshly built (`cargo test` builds test
/// harnesses, never cdylibs): `aqueduct-hip` (for `libamdhip64.so.5`) and the preload library.
fn profile_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let exe = std::env::current_exe().expect("test executable");
        let profile = exe.parent().and_then(Path::parent).expect("target/<profile>").to_path_buf();
        let mut c = Command::new(env!("CARGO"));
        c.args(["build", "-q", "-p", "aqueduct-hip", "-p", "aqueduct-kfd-preload"]).current_dir(manifest());
        if profile.file_name().is_some_and(|n| n == "release") {
            c.arg("--release");
        }
        let out = c.output().expect("cargo build");
        assert!(out.status.success(), "cargo build failed:\n{}", String::from_utf8_lossy(&out.stderr));
        for lib in ["libaqueduct_hip.a", "libaqueduct_kfd_preload.so"] {
            assert!(profile.join(lib).is_file(), "{lib} not built");
        }
        profile
    })
}

/// `target/<profile>/amdhip64/`, holding aqueduct's `libamdhip64.so.5` freshly linked by
/// `build-libamdhip64.sh`.
fn amdhip64_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        require("binutils", "/usr/bin/nm");
        let profile = profile_dir();
        let out = Command::new(manifest().join("build-libamdhip64.sh")).arg(profile).output().expect("build script");
        assert!(out.status.success(), "build-libamdhip64.sh failed:\n{}", String::from_utf8_lossy(&out.stderr));
        let dir = profile.join("amdhip64");
        assert!(dir.join("libamdhip64.so.5").is_file(), "libamdhip64.so.5 not built");
        dir
    })
}

/// This run's folder for built programs (`aqueduct-hip-tests-<pid>`, the name `c_api.rs` uses:
/// its first run removes the folders of processes that are gone, these included).
fn out_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("aqueduct-hip-tests-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Compiles `tests/c/<name>.c` against Debian's HIP header and links it against Debian's
/// `libamdhip64` (`AQD_LINK_HIP52`: the newest HIP's functions 5.2 lacks are weak references).
/// `include/aqueduct_hip.h` comes along only for the newest HIP's declarations the 5.2 header
/// lacks; none of these tests calls an aqueduct extension (checked: no `aqd` symbol is undefined).
fn build(name: &str) -> PathBuf {
    require("libamdhip64-dev", "/usr/include/hip/hip_runtime_api.h");
    require("libamdhip64-dev", "/usr/lib/x86_64-linux-gnu/libamdhip64.so");
    require("gcc", "/usr/bin/gcc");
    let _g = common::compiler_turn();
    let exe = out_dir().join(name);
    let out = Command::new("gcc")
        .args(["-O1", "-g", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter"])
        .args(["-D__HIP_PLATFORM_AMD__", "-DAQD_LINK_HIP52", "-I/usr/include"])
        .arg(format!("-I{}", manifest().join("include").display()))
        .arg(manifest().join("tests/c").join(format!("{name}.c")))
        .args(["-L/usr/lib/x86_64-linux-gnu", "-lamdhip64", "-lpthread", "-o"])
        .arg(&exe)
        .output()
        .expect("gcc");
    assert!(out.status.success(), "gcc {name}.c failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let nm = Command::new("nm").arg("-u").arg(&exe).output().expect("nm");
    let undefined = String::from_utf8_lossy(&nm.stdout);
    assert!(!undefined.contains(" aqd"), "{name} calls an aqueduct extension:\n{undefined}");
    let needs = Command::new("objdump").arg("-p").arg(&exe).output().expect("objdump");
    let needs = String::from_utf8_lossy(&needs.stdout);
    assert!(needs.contains("NEEDED               libamdhip64.so.5"), "{needs}");
    exe
}

fn check(name: &str, runtime: &str, out: &Output) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{name} on {runtime}: {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}", out.status);
    assert!(stdout.contains(&format!("{name}: ok")), "{name} on {runtime} did not finish:\n{stdout}\n{stderr}");
}

fn fixture_twins() -> &'static Path {
    common::fixture_twins(&out_dir())
}

/// The emulator's clang-15 gfx90a fixture code object.
fn fixture() -> String {
    let path = manifest().join("../../kfd-direct/emu/fixtures/kernels-gfx90a.co");
    assert!(path.is_file(), "{} missing", path.display());
    path.to_str().expect("utf-8 path").to_owned()
}

/// Builds `tests/c/<name>.c` once and runs the binary on both runtimes; `env` is extra
/// environment for both runs (twins, which both runtimes take alike).
fn differential(name: &str, args: &[&str]) {
    differential_env(name, args, &[]);
}

fn differential_env(name: &str, args: &[&str], env: &[(&str, &Path)]) {
    run_both(name, &build(name), args, env);
}

/// Runs the built program `exe` (printing `<name>: ok`) on both runtimes, with `env` on both;
/// returns what each printed (aqueduct's first).
fn run_both(name: &str, exe: &Path, args: &[&str], env: &[(&str, &Path)]) -> [String; 2] {
    // Aqueduct's libamdhip64.so.5, as `aqueduct run --hip aqueduct` loads it; never under
    // AQD_EXPECT_HIP52.
    let dir = amdhip64_dir();
    let ldd = Command::new("ldd").arg(exe).env("LD_LIBRARY_PATH", dir).output().expect("ldd");
    let ldd = String::from_utf8_lossy(&ldd.stdout);
    assert!(ldd.contains(&format!("{}/libamdhip64.so.5", dir.display())), "{ldd}");
    let mut c = Command::new(exe);
    c.args(args).env("LD_LIBRARY_PATH", dir).env("AQUEDUCT_BACKEND", "emu").env_remove("AQD_EXPECT_HIP52");
    c.env_remove("LD_PRELOAD").env_remove("AQUEDUCT_TWINS");
    c.envs(env.iter().copied());
    let ours = run_command(c, Duration::from_secs(120));
    check(name, "aqueduct", &ours);

    // Debian's HIP 5.2 on the emulated gfx90a under the preload library.
    let mut c = Command::new(exe);
    c.args(args)
        .env("LD_PRELOAD", profile_dir().join("libaqueduct_kfd_preload.so"))
        .env("AQUEDUCT_GPU", "gfx90a")
        .env("AQD_EXPECT_HIP52", "1")
        .env_remove("LD_LIBRARY_PATH")
        .env_remove("AQUEDUCT_TWINS");
    c.envs(env.iter().copied());
    let theirs = run_command(c, Duration::from_secs(300));
    check(name, "Debian's HIP 5.2", &theirs);
    [ours, theirs].map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
}

#[test]
fn capture_graph_on_both_runtimes() {
    differential("capture_graph", &[]);
}

#[test]
fn device_properties_on_both_runtimes() {
    require("libdrm-common", "/usr/share/libdrm/amdgpu.ids");
    differential("device_properties", &[]);
}

#[test]
fn module_metadata_on_both_runtimes() {
    differential_env("module_metadata", &[&fixture()], &[("AQUEDUCT_TWINS", fixture_twins())]);
}

#[test]
fn device_queries_and_contexts_on_both_runtimes() {
    differential("device_ctx", &[]);
}

/// `tests/c/per_thread.hip` built by Debian's hipcc for the legacy default stream (its kernel
/// runs as the emulator's C twin of `fill_u32` on Debian's side). The per-thread builds run on
/// aqueduct only (`c_api.rs`): HIP 5.2 crashes in `hipStreamWaitValue32(hipStreamPerThread, …)`.
#[test]
fn per_thread_program_legacy_build_on_both_runtimes() {
    require("hipcc", "/usr/bin/hipcc");
    let exe = out_dir().join("per_thread-legacy-differential");
    {
        let _g = common::compiler_turn();
        let out = Command::new("hipcc")
            .args(["--offload-arch=gfx90a", "-nogpulib", "-nogpuinc", "-O1", "-Wall", "-Werror"])
            .arg(manifest().join("tests/c/per_thread.hip"))
            .arg("-o")
            .arg(&exe)
            .arg("-lpthread")
            .output()
            .expect("hipcc");
        assert!(out.status.success(), "hipcc failed:\n{}", String::from_utf8_lossy(&out.stderr));
    }
    run_both("per_thread", &exe, &[], &[("AQUEDUCT_TWINS", fixture_twins())]);
}

/// Kernels that need scratch (`tests/c/private_memory.hip`, built by hipcc with the device
/// libraries): device `printf` with a format and arguments, a private array indexed by data and
/// a recursive device function, as their own machine code. Debian's HIP 5.2 gives its queues
/// scratch only when the command processor asks for it (docs/rocm-on-emu.md §4.7); both
/// runtimes must print the same lines.
#[test]
fn private_memory_on_both_runtimes() {
    require("hipcc", "/usr/bin/hipcc");
    require("rocm-device-libs", "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode/ockl.bc");
    let exe = out_dir().join("private_memory-differential");
    {
        let _g = common::compiler_turn();
        let out = Command::new("hipcc")
            .args(["--offload-arch=gfx90a", "-O2", "-Wall", "-Werror"])
            .arg(manifest().join("tests/c/private_memory.hip"))
            .arg("-o")
            .arg(&exe)
            .output()
            .expect("hipcc");
        assert!(out.status.success(), "hipcc failed:\n{}", String::from_utf8_lossy(&out.stderr));
    }
    let lines: String = (0..4).map(|l| format!("lane {l} says hello {:x}\n", 0x100 + l)).collect();
    let want = format!("private_memory: before\n{lines}private_memory: ok\n");
    for (out, runtime) in run_both("private_memory", &exe, &[], &[]).iter().zip(["aqueduct", "Debian's HIP 5.2"]) {
        assert_eq!(out, &want, "on {runtime}");
    }
}

/// Pitched 2-D and 3-D copies and fills. Debian's HIP runs them as its own blit kernels
/// (`__amd_rocclr_copyBufferRect…`, `…fillBuffer…`): by default as the emulator's twins of
/// them, under `AQUEDUCT_EMU_KERNELS=isa` as their gfx90a machine code, under `check` both
/// ways with the twins as the oracle (docs/executor.md §4).
#[test]
fn rect_copies_on_both_runtimes_as_twins_machine_code_and_checked() {
    let exe = build("rect_copies");
    for mode in ["auto", "isa", "check"] {
        run_both("rect_copies", &exe, &[], &[("AQUEDUCT_EMU_KERNELS", Path::new(mode))]);
    }
}

/// The client-library programs (`examples/hip`: rocPRIM's radix sort, scan and reduction built
/// by hipcc; Debian's rocRAND with Philox, XORWOW and MRG32k3a; Debian's rocSPARSE with plain
/// and adaptive csrmv) on aqueduct's `libamdhip64.so.5` and on Debian's HIP under the preload
/// library, their kernels as their own gfx90a machine code (no twins). Each checks its results
/// on the host (Philox bit-equal to a host Philox, the others by their statistics and host
/// products) and prints a digest of every byte it generated: the two runtimes must print the same.
#[test]
fn client_libraries_run_their_machine_code_on_both_runtimes() {
    require("hipcc", "/usr/bin/hipcc");
    require("librocprim-dev", "/usr/include/rocprim/rocprim.hpp");
    require("librocrand-dev", "/usr/include/rocrand/rocrand.h");
    require("librocsparse-dev", "/usr/include/rocsparse/rocsparse.h");
    for (exe, done) in common::client_programs(&out_dir()) {
        let mut on_aqueduct = Command::new(&exe);
        on_aqueduct.env("LD_LIBRARY_PATH", amdhip64_dir()).env("AQUEDUCT_BACKEND", "emu");
        let mut on_debian = Command::new(&exe);
        on_debian
            .env("LD_PRELOAD", profile_dir().join("libaqueduct_kfd_preload.so"))
            .env("AQUEDUCT_GPU", "gfx90a")
            .env_remove("LD_LIBRARY_PATH");
        let mut lines = Vec::new();
        for (runtime, mut c) in [("aqueduct", on_aqueduct), ("Debian's HIP", on_debian)] {
            c.env_remove("AQUEDUCT_TWINS").env_remove("AQUEDUCT_EMU_KERNELS");
            let out = run_command(c, Duration::from_secs(600));
            let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            assert!(
                out.status.success() && stdout.contains(done),
                "{} on {runtime}: {stdout}\n{stderr}",
                exe.display()
            );
            lines.push(stdout.into_owned());
        }
        assert_eq!(lines[0], lines[1], "{}: aqueduct's output, then Debian's HIP's", exe.display());
    }
}

#[test]
fn streams_on_both_runtimes() {
    differential("streams", &[]);
}

#[test]
fn device_memory_on_both_runtimes() {
    differential("device_memory", &[]);
}

#[test]
fn scale_on_both_runtimes() {
    differential("scale", &[]);
}

#[test]
fn threads_on_both_runtimes() {
    differential("threads", &[]);
}
