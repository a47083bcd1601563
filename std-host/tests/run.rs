//! `aqueduct run` on the emulated GPU with Debian's unmodified ROCm 5.2 (docs/rocm-on-emu.md
//! stage 1).

use std::path::Path;
use std::process::Command;

fn require(package: &str, file: &str) {
    assert!(
        Path::new(file).exists(),
        "Debian package `{package}` is missing ({file} not found): apt-get install -y {package}"
    );
}

#[test]
fn rocminfo_lists_the_emulated_gfx90a_agent() {
    require("rocminfo", "/usr/bin/rocminfo");
    let out = Command::new(env!("CARGO_BIN_EXE_aqueduct"))
        .args(["run", "--gpu", "gfx90a", "--", "rocminfo"])
        .output()
        .expect("aqueduct run");
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "rocminfo failed: {:?}\n{text}\n{err}", out.status);
    for want in [
        "Name:                    gfx90a",
        "Marketing Name:          AMD Instinct MI210",
        "amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-",
    ] {
        assert!(text.contains(want), "rocminfo output lacks {want:?}:\n{text}\n{err}");
    }
    assert!(text.contains("Device Type:             GPU"), "{text}");
}

#[test]
fn run_rejects_an_unknown_gpu_and_reports_a_missing_program() {
    let out =
        Command::new(env!("CARGO_BIN_EXE_aqueduct")).args(["run", "--gpu", "gfx9999", "--", "true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(127));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown GPU"));
    let out =
        Command::new(env!("CARGO_BIN_EXE_aqueduct")).args(["run", "--", "/nonexistent/program"]).output().unwrap();
    assert_eq!(out.status.code(), Some(127));
}

#[test]
fn run_with_aqueducts_hip_puts_its_libamdhip64_first_on_the_library_path() {
    let dir = std::env::temp_dir().join(format!("aqueduct-run-hip-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let lib = dir.join("libamdhip64.so.5");
    std::fs::write(&lib, b"").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_aqueduct"))
        .args(["run", "--hip", "aqueduct", "--", "sh", "-c", "echo \"$LD_LIBRARY_PATH|$LD_PRELOAD\""])
        .env("AQUEDUCT_HIP_LIB", &lib)
        .env("LD_LIBRARY_PATH", "/elsewhere")
        .env_remove("LD_PRELOAD")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(text.trim(), format!("{}:/elsewhere|", dir.display()), "no preload; aqueduct's HIP first");
    // Without the library (a copy of the tool with no amdhip64/ beside it): 127 and what to build.
    let tool = dir.join("bin").join("aqueduct");
    std::fs::create_dir_all(tool.parent().unwrap()).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_aqueduct"), &tool).unwrap();
    let out = Command::new(&tool)
        .args(["run", "--hip", "aqueduct", "--", "true"])
        .env("AQUEDUCT_HIP_LIB", dir.join("missing.so"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127));
    assert!(String::from_utf8_lossy(&out.stderr).contains("build-libamdhip64.sh"), "{out:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}
