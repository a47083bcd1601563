//! `aqueduct run`: start a program with the emulated GPU preloaded.
//!
//! The program is executed with `LD_PRELOAD` extended by the preload library, so an
//! unmodified ROCm stack inside it opens the emulator instead of `/dev/kfd`. The library is
//! found, in order, at `$AQUEDUCT_PRELOAD_LIB`, next to the running executable, in its `deps/`
//! folder, and next to its parent folder (Cargo's `target/<profile>` layout).
//!
//! With `--hip aqueduct` the program's HIP is aqueduct's instead: `LD_LIBRARY_PATH` starts with
//! the folder of aqueduct's `libamdhip64.so.5` (built by `std-host/hip/build-libamdhip64.sh`
//! into `target/<profile>/amdhip64/`, or named by `$AQUEDUCT_HIP_LIB`), which runs on the
//! emulated GPU in-process; no preload is needed then.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// File name of the preload library.
pub const PRELOAD_LIB: &str = "libaqueduct_kfd_preload.so";

/// GPU models the emulator can present.
pub const GPUS: [&str; 3] = ["gfx90a", "gfx942", "gfx1100"];

/// Why a program could not be started.
#[derive(Debug)]
pub enum LaunchError {
    /// The preload library was not found (the paths tried).
    NoPreload(Vec<PathBuf>),
    /// Unknown `--gpu`.
    UnknownGpu(String),
    /// The program could not be executed.
    Spawn(std::io::Error),
    /// aqueduct's `libamdhip64.so.5` was not found (the paths tried).
    NoHipLib(Vec<PathBuf>),
}

/// File name of aqueduct's HIP library under HIP's soname.
pub const HIP_LIB: &str = "libamdhip64.so.5";

impl std::fmt::Display for LaunchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LaunchError::NoPreload(tried) => {
                write!(
                    f,
                    "{PRELOAD_LIB} not found (build package aqueduct-kfd-preload or set AQUEDUCT_PRELOAD_LIB); tried:"
                )?;
                for t in tried {
                    write!(f, " {}", t.display())?;
                }
                Ok(())
            }
            LaunchError::UnknownGpu(g) => write!(f, "unknown GPU {g:?} (known: {})", GPUS.join(", ")),
            LaunchError::Spawn(e) => write!(f, "cannot run the program: {e}"),
            LaunchError::NoHipLib(tried) => {
                write!(
                    f,
                    "{HIP_LIB} not found (cargo build -p aqueduct-hip, then std-host/hip/build-libamdhip64.sh \
                     target/<profile>, or set AQUEDUCT_HIP_LIB); tried:"
                )?;
                for t in tried {
                    write!(f, " {}", t.display())?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for LaunchError {}

/// Finds the preload library.
pub fn find_preload() -> Result<PathBuf, LaunchError> {
    let mut tried = Vec::new();
    if let Some(p) = std::env::var_os("AQUEDUCT_PRELOAD_LIB") {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(p);
        }
        tried.push(p);
    }
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.parent() {
            let mut cands = vec![dir.join(PRELOAD_LIB), dir.join("deps").join(PRELOAD_LIB)];
            if let Some(up) = dir.parent() {
                cands.push(up.join(PRELOAD_LIB));
            }
            for c in cands {
                if c.is_file() {
                    return Ok(c);
                }
                tried.push(c);
            }
        }
    }
    Err(LaunchError::NoPreload(tried))
}

/// The command that runs `program args…` on the emulated `gpu`.
pub fn command(gpu: &str, preload: &Path, program: &OsString, args: &[OsString]) -> Result<Command, LaunchError> {
    if !GPUS.contains(&gpu) {
        return Err(LaunchError::UnknownGpu(gpu.to_owned()));
    }
    let mut ld = OsString::from(preload.as_os_str());
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|o| !o.is_empty()) {
        ld.push(":");
        ld.push(old);
    }
    let mut c = Command::new(program);
    c.args(args).env("LD_PRELOAD", ld).env("AQUEDUCT_GPU", gpu);
    Ok(c)
}

/// Finds aqueduct's `libamdhip64.so.5`: `$AQUEDUCT_HIP_LIB`, then `amdhip64/` next to the
/// running executable or its parent folder.
pub fn find_hip_lib() -> Result<PathBuf, LaunchError> {
    let mut tried = Vec::new();
    if let Some(p) = std::env::var_os("AQUEDUCT_HIP_LIB") {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(p);
        }
        tried.push(p);
    }
    if let Some(dir) = std::env::current_exe().ok().as_deref().and_then(Path::parent) {
        let mut cands = vec![dir.join("amdhip64").join(HIP_LIB)];
        if let Some(up) = dir.parent() {
            cands.push(up.join("amdhip64").join(HIP_LIB));
        }
        for c in cands {
            if c.is_file() {
                return Ok(c);
            }
            tried.push(c);
        }
    }
    Err(LaunchError::NoHipLib(tried))
}

/// The command that runs `program args…` with aqueduct's `libamdhip64.so.5` (at `hip_lib`) in
/// place of ROCm's, on the emulated `gpu`.
pub fn command_with_aqueduct_hip(
    gpu: &str,
    hip_lib: &Path,
    program: &OsString,
    args: &[OsString],
) -> Result<Command, LaunchError> {
    if !GPUS.contains(&gpu) {
        return Err(LaunchError::UnknownGpu(gpu.to_owned()));
    }
    let mut path = OsString::from(hip_lib.parent().unwrap_or(Path::new(".")).as_os_str());
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|o| !o.is_empty()) {
        path.push(":");
        path.push(old);
    }
    let mut c = Command::new(program);
    c.args(args).env("LD_LIBRARY_PATH", path).env("AQUEDUCT_GPU", gpu);
    Ok(c)
}

/// Runs the program to completion and returns its exit code (128 + signal if it was killed).
pub fn run(gpu: &str, program: &OsString, args: &[OsString]) -> Result<i32, LaunchError> {
    run_with(gpu, false, program, args)
}

/// As [`run`]; `aqueduct_hip` puts aqueduct's HIP in place of ROCm's.
pub fn run_with(gpu: &str, aqueduct_hip: bool, program: &OsString, args: &[OsString]) -> Result<i32, LaunchError> {
    let mut cmd = if aqueduct_hip {
        command_with_aqueduct_hip(gpu, &find_hip_lib()?, program, args)?
    } else {
        command(gpu, &find_preload()?, program, args)?
    };
    let status = cmd.status().map_err(LaunchError::Spawn)?;
    use std::os::unix::process::ExitStatusExt;
    Ok(status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}
