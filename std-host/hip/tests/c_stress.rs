//! The C ABI from four pthreads at once: `tests/c/stress.c`, compiled with gcc against Debian's
//! HIP 5.2 header (`libamdhip64-dev`) and `include/aqueduct_hip.h`, linked to
//! `libaqueduct_hip.so` and run on the emulated GPU; it must exit 0 and print `stress: ok`.
//!
//! Under `scripts/verify tsan`, `AQUEDUCT_HIP_TSAN` names the directory of a
//! `libaqueduct_hip.so` built with `-Zsanitizer=thread`, and `AQUEDUCT_HIP_TSAN_RT` the nightly
//! toolchain's ThreadSanitizer runtime (`librustc-nightly_rt.tsan.a`). The program is then
//! compiled with gcc's `-fsanitize=thread` and linked with that runtime, the one whose
//! instrumentation interface the library was built for (gcc 12's own `libtsan` lacks the
//! `__tsan_memcpy` family that current LLVM emits); it runs with `halt_on_error=1`, and any
//! report fails the test.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

mod common;

/// Fails (never skips) when a Debian package the test needs is missing.
fn require(package: &str, file: &str) {
    assert!(
        Path::new(file).exists(),
        "Debian package `{package}` is missing ({file} not found): apt-get install -y {package}"
    );
}

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `target/<profile>/` with a freshly built `libaqueduct_hip.so` (`cargo test` builds test
/// harnesses, never the cdylib).
fn built_lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    let profile = exe.parent().and_then(Path::parent).expect("target/<profile>").to_path_buf();
    let mut c = Command::new(env!("CARGO"));
    c.args(["build", "-q", "-p", "aqueduct-hip"]).current_dir(manifest());
    if profile.file_name().is_some_and(|n| n == "release") {
        c.arg("--release");
    }
    let out = c.output().expect("cargo build");
    assert!(out.status.success(), "building aqueduct-hip failed:\n{}", String::from_utf8_lossy(&out.stderr));
    profile
}

/// Compiles `tests/c/stress.c` against the library in `lib`; with `tsan_rt`, instrumented by
/// ThreadSanitizer and linked with that runtime.
fn build(lib: &Path, tsan_rt: Option<&Path>) -> PathBuf {
    require("libamdhip64-dev", "/usr/include/hip/hip_runtime_api.h");
    require("gcc", "/usr/bin/gcc");
    assert!(lib.join("libaqueduct_hip.so").is_file(), "no libaqueduct_hip.so in {}", lib.display());
    let dir = std::env::temp_dir().join(format!("aqueduct-hip-stress-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let obj = dir.join("stress.o");
    let exe = dir.join("stress");
    let gcc = |c: &mut Command, what: &str| {
        let out = c.output().expect("gcc");
        assert!(out.status.success(), "gcc ({what}) failed:\n{}", String::from_utf8_lossy(&out.stderr));
    };
    let mut cc = Command::new("gcc");
    cc.args(["-c", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-D__HIP_PLATFORM_AMD__"])
        .arg("-I/usr/include")
        .arg(format!("-I{}", manifest().join("include").display()));
    if tsan_rt.is_some() {
        cc.arg("-fsanitize=thread");
    }
    gcc(cc.arg("-o").arg(&obj).arg(manifest().join("tests/c/stress.c")), "compile");
    let mut ld = Command::new("gcc");
    ld.arg("-o").arg(&exe).arg(&obj);
    if let Some(rt) = tsan_rt {
        assert!(rt.is_file(), "ThreadSanitizer runtime {} missing", rt.display());
        // The executable carries the runtime and exports it to the library (`-rdynamic`),
        // whose instrumentation calls resolve against it.
        ld.arg("-rdynamic").arg("-Wl,--whole-archive").arg(rt).arg("-Wl,--no-whole-archive");
    }
    // DT_RPATH, not DT_RUNPATH: `cargo test` puts target/<profile> on LD_LIBRARY_PATH, which
    // would otherwise load the uninstrumented library in place of `lib`'s.
    ld.arg(format!("-L{}", lib.display()))
        .arg("-laqueduct_hip")
        .arg("-Wl,--disable-new-dtags")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .args(["-lpthread", "-ldl", "-lm", "-lrt"]);
    gcc(&mut ld, "link");
    exe
}

/// Runs `exe` on the emulated GPU, killing it if it hangs.
fn run(exe: &Path, args: &[&str], tsan: bool) -> Output {
    let mut c = Command::new(exe);
    c.args(args).env("AQUEDUCT_BACKEND", "emu").env_remove("LD_LIBRARY_PATH");
    if tsan {
        // The first report ends the run with TSAN's exit code (66).
        let extra = std::env::var("TSAN_OPTIONS").unwrap_or_default();
        c.env("TSAN_OPTIONS", format!("halt_on_error=1 second_deadlock_stack=1 {extra}"));
    }
    // A hang guard, no timing claim: ThreadSanitizer slows the run down several times over.
    common::run_command(c, Duration::from_secs(if tsan { 900 } else { 300 }))
}

#[test]
fn four_pthreads_create_launch_record_wait_synchronize_and_destroy() {
    let tsan = std::env::var_os("AQUEDUCT_HIP_TSAN").map(PathBuf::from);
    let tsan_rt = tsan.as_ref().map(|_| {
        PathBuf::from(std::env::var_os("AQUEDUCT_HIP_TSAN_RT").expect("AQUEDUCT_HIP_TSAN needs AQUEDUCT_HIP_TSAN_RT"))
    });
    let lib = tsan.clone().unwrap_or_else(built_lib_dir);
    let rounds = std::env::var("AQUEDUCT_STRESS_ROUNDS").unwrap_or_else(|_| "24".to_owned());
    let out = run(&build(&lib, tsan_rt.as_deref()), &[&rounds], tsan.is_some());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stress: {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}", out.status);
    assert!(stdout.contains("stress: ok"), "stress did not finish:\nstdout:\n{stdout}\nstderr:\n{stderr}");
    let loaded = stdout.lines().find_map(|l| l.strip_prefix("stress: library ")).expect("the library path");
    let loaded = std::fs::canonicalize(loaded).expect("loaded library");
    let want = std::fs::canonicalize(lib.join("libaqueduct_hip.so")).expect("library");
    assert_eq!(loaded, want, "stress ran another libaqueduct_hip.so than it was built against");
    if tsan.is_some() {
        assert!(stdout.contains("stress: built with ThreadSanitizer"), "not built with ThreadSanitizer:\n{stdout}");
        assert!(!stderr.contains("ThreadSanitizer"), "ThreadSanitizer reports:\n{stderr}");
    }
    println!("{stdout}");
}
