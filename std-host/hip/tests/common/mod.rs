//! Helpers shared by the C-program test harnesses of this crate.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// Runs `c`, killing it after `timeout`.
pub fn run_command(mut c: Command, timeout: Duration) -> Output {
    let exe = PathBuf::from(c.get_program());
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
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

/// A turn at the compiler: one gcc/clang run at a time within a test process (tests run on
/// parallel threads and the machine is small). The lock guards no data, so a test that
/// panicked while holding it leaves nothing behind.
#[allow(dead_code)] // c_stress.rs builds its one program alone
pub fn compiler_turn() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

/// The C twins of the emulator's fixture kernels (`fill_u32`, `vector_add`), built once into
/// `dir` as a shared library for `AQUEDUCT_TWINS`: the tests supply them, the library never
/// registers test kernels of its own.
#[allow(dead_code)] // c_stress.rs runs no fixture kernel
pub fn fixture_twins(dir: &Path) -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let emu = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../kfd-direct/emu");
        let lib = dir.join("libfixture_twins.so");
        let _g = compiler_turn();
        let out = Command::new("gcc")
            .args(["-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-I"])
            .arg(emu.join("include"))
            .arg(emu.join("tests/c/twins.c"))
            .arg("-o")
            .arg(&lib)
            .output()
            .expect("gcc");
        assert!(out.status.success(), "gcc twins.c failed:\n{}", String::from_utf8_lossy(&out.stderr));
        lib
    })
}

/// Builds `examples/hip/<source>` with `compiler`, `args` and then `libs` into `dir`.
#[allow(dead_code)] // c_stress.rs builds no example
pub fn build_example(dir: &Path, source: &str, compiler: &str, args: &[&str], libs: &[&str]) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/hip").join(source);
    let exe = dir.join(source.split('.').next().unwrap_or(source));
    let _g = compiler_turn();
    let out = Command::new(compiler).args(args).arg(&src).args(libs).arg("-o").arg(&exe).output().expect(compiler);
    assert!(out.status.success(), "{compiler} {source} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    exe
}

/// The client-library programs of `examples/hip`, built into `dir`, each with the line it
/// prints when its host checks pass: a rocPRIM program built by hipcc, and programs calling
/// Debian's rocRAND and rocSPARSE.
#[allow(dead_code)] // c_stress.rs builds no example
pub fn client_programs(dir: &Path) -> Vec<(PathBuf, &'static str)> {
    let hipcc = ["-std=c++17", "--offload-arch=gfx90a", "-O2"];
    vec![
        (build_example(dir, "rocprim_sort.hip", "hipcc", &hipcc, &[]), "sorted, scanned and reduced"),
        (build_example(dir, "rocrand_generators.cpp", "hipcc", &hipcc, &["-lrocrand"]), "rocrand_generators: ok"),
        (
            build_example(
                dir,
                "rocsparse_csrmv.c",
                "gcc",
                &["-D__HIP_PLATFORM_AMD__"],
                &["-lrocsparse", "-lamdhip64", "-lm"],
            ),
            "rocsparse_csrmv: ok",
        ),
    ]
}
