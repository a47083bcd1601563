//! Shared helpers: Debian package checks, building C programs against Debian's ROCm 5.2
//! headers, and running them with the preload library.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// Fails (never skips) when a Debian package the test needs is missing.
pub fn require(package: &str, file: &str) {
    assert!(
        Path::new(file).exists(),
        "Debian package `{package}` is missing ({file} not found): apt-get install -y {package}"
    );
}

/// The preload library, in `target/<profile>/`. `cargo test` builds test harnesses, never the
/// cdylib itself, so the first call builds it (`cargo build -p aqueduct-kfd-preload` with this
/// test's profile) so that a test never runs a stale library.
pub fn preload_lib() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let exe = std::env::current_exe().expect("test executable");
            let profile = exe.parent().and_then(Path::parent).expect("target/<profile>");
            let mut c = Command::new(env!("CARGO"));
            c.args(["build", "-q", "-p", "aqueduct-kfd-preload"]).current_dir(env!("CARGO_MANIFEST_DIR"));
            if profile.file_name().is_some_and(|n| n == "release") {
                c.arg("--release");
            }
            let out = c.output().expect("cargo build");
            assert!(out.status.success(), "building the preload failed:\n{}", String::from_utf8_lossy(&out.stderr));
            let lib = profile.join("libaqueduct_kfd_preload.so");
            assert!(lib.is_file(), "{} not built", lib.display());
            lib
        })
        .clone()
}

/// The `aqueduct` command-line tool, in `target/<profile>/` (built by the first call, like the
/// preload library).
pub fn aqueduct_cli() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let exe = std::env::current_exe().expect("test executable");
            let profile = exe.parent().and_then(Path::parent).expect("target/<profile>");
            let mut c = Command::new(env!("CARGO"));
            c.args(["build", "-q", "-p", "aqueduct-std", "--bin", "aqueduct"]).current_dir(env!("CARGO_MANIFEST_DIR"));
            if profile.file_name().is_some_and(|n| n == "release") {
                c.arg("--release");
            }
            let out = c.output().expect("cargo build");
            assert!(out.status.success(), "building aqueduct failed:\n{}", String::from_utf8_lossy(&out.stderr));
            let bin = profile.join("aqueduct");
            assert!(bin.is_file(), "{} not built", bin.display());
            bin
        })
        .clone()
}

/// Compiles `tests/c/<name>.c` into a shared library of host twins against the emulator's
/// `include/aqueduct_emu.h` (once per test process).
pub fn build_twin_library(name: &str) -> PathBuf {
    built_once(&format!("lib{name}.so"), || {
        require("gcc", "/usr/bin/gcc");
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
        let lib = out_dir().join(format!("lib{name}.so"));
        let out = Command::new("gcc")
            .args(["-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-I"])
            .arg(dir.join("../include"))
            .arg(dir.join("tests/c").join(format!("{name}.c")))
            .arg("-o")
            .arg(&lib)
            .output()
            .expect("gcc");
        assert!(out.status.success(), "gcc {name}.c failed:\n{}", String::from_utf8_lossy(&out.stderr));
        lib
    })
}

fn out_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("aqueduct-preload-tests-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Tests run in parallel threads of one process and share `out_dir`: each artefact is built
/// once, under this lock, so no test executes a file another is still writing.
static BUILDS: std::sync::Mutex<Vec<(String, PathBuf)>> = std::sync::Mutex::new(Vec::new());

fn built_once(key: &str, build: impl FnOnce() -> PathBuf) -> PathBuf {
    let mut b = BUILDS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, p)) = b.iter().find(|(k, _)| k == key) {
        return p.clone();
    }
    let p = build();
    b.push((key.to_owned(), p.clone()));
    p
}

/// Compiles `tests/c/<name>.c` with gcc against the HSA or HIP headers and libraries (once per
/// test process).
pub fn build_c(name: &str, libs: &[&str], defines: &[&str]) -> PathBuf {
    built_once(name, || build_c_now(name, libs, defines))
}

fn build_c_now(name: &str, libs: &[&str], defines: &[&str]) -> PathBuf {
    require("gcc", "/usr/bin/gcc");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c").join(format!("{name}.c"));
    let exe = out_dir().join(name);
    let mut c = Command::new("gcc");
    c.arg("-O1").arg("-o").arg(&exe).arg(&src);
    for d in defines {
        c.arg(format!("-D{d}"));
    }
    c.args(libs).arg("-lpthread");
    let out = c.output().expect("gcc");
    assert!(out.status.success(), "gcc {name}.c failed:\n{}", String::from_utf8_lossy(&out.stderr));
    exe
}

/// An HSA program (needs `libhsa-runtime-dev`).
pub fn build_hsa(name: &str) -> PathBuf {
    require("libhsa-runtime-dev", "/usr/include/hsa/hsa.h");
    build_c(name, &["-lhsa-runtime64"], &[])
}

/// A HIP host program (needs `libamdhip64-dev`).
pub fn build_hip(name: &str) -> PathBuf {
    require("libamdhip64-dev", "/usr/include/hip/hip_runtime_api.h");
    build_c(name, &["-lamdhip64"], &["__HIP_PLATFORM_AMD__"])
}

/// Runs `exe args` on the emulated GPU with extra environment, killing it after `timeout`.
pub fn run(exe: &Path, args: &[&str], env: &[(&str, &str)], timeout: Duration) -> Output {
    let mut c = Command::new(exe);
    c.args(args).env("LD_PRELOAD", preload_lib()).env("AQUEDUCT_GPU", "gfx90a");
    for (k, v) in env {
        c.env(k, v);
    }
    run_command(c, timeout)
}

/// Runs `exe args` under `aqueduct run --gpu gfx90a` with extra environment, killing it after
/// `timeout`.
pub fn aqueduct_run(exe: &Path, args: &[&str], env: &[(&str, &str)], timeout: Duration) -> Output {
    let mut c = Command::new(aqueduct_cli());
    c.args(["run", "--gpu", "gfx90a", "--"]).arg(exe).args(args).env("AQUEDUCT_PRELOAD_LIB", preload_lib());
    c.env_remove("AQUEDUCT_TWINS");
    for (k, v) in env {
        c.env(k, v);
    }
    run_command(c, timeout)
}

fn run_command(mut c: Command, timeout: Duration) -> Output {
    let exe = PathBuf::from(c.get_program());
    c.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    let mut child = c.spawn().expect("spawn");
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "{} hung for {timeout:?}\nstdout:\n{}\nstderr:\n{}",
                exe.display(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Asserts a successful run and returns stdout.
pub fn expect_ok(out: &Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what}: {:?}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Builds `tests/c/user_kernels.cl` into a gfx90a code object with clang-15 and lld-15 (once
/// per test process).
pub fn build_code_object() -> PathBuf {
    built_once("user_kernels.co", build_code_object_now)
}

fn build_code_object_now() -> PathBuf {
    require("clang-15", "/usr/bin/clang-15");
    require("lld-15", "/usr/bin/ld.lld-15");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/user_kernels.cl");
    let (obj, co) = (out_dir().join("user_kernels.o"), out_dir().join("user_kernels.co"));
    let out = Command::new("clang-15")
        .args(["-x", "cl", "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa", "-mcpu=gfx90a", "-nogpulib", "-O2", "-c"])
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .output()
        .expect("clang-15");
    assert!(out.status.success(), "clang-15 failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let out = Command::new("ld.lld-15").arg("-shared").arg(&obj).arg("-o").arg(&co).output().expect("ld.lld-15");
    assert!(out.status.success(), "ld.lld-15 failed:\n{}", String::from_utf8_lossy(&out.stderr));
    co
}

/// The emulator's SDMA counters a run printed at exit (`AQUEDUCT_EMU_STATS=1`):
/// `(queues created, copy packets)`.
pub fn sdma_stats(out: &Output) -> (u64, u64) {
    let err = String::from_utf8_lossy(&out.stderr);
    let line = err
        .lines()
        .find(|l| l.starts_with("aqueduct-kfd-emu stats:"))
        .unwrap_or_else(|| panic!("no stats line in stderr:\n{err}"));
    let field = |k: &str| -> u64 {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(k).and_then(|v| v.strip_prefix('=')))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {k} in `{line}`"))
    };
    (field("sdma_queues_created"), field("sdma_copies"))
}
