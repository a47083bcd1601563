//! `aqueduct run`: start a program with the emulated GPU preloaded.
//!
//! The program is executed with `LD_PRELOAD` extended by the preload library, so an
//! unmodified ROCm stack inside it opens the emulator instead of `/dev/kfd`. The library is
//! found, in order, at `$AQUEDUCT_PRELOAD_LIB`, next to the running executable, in its `deps/`
//! folder, and next to its parent folder (Cargo's `target/<profile>` layout).

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
}

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

/// Runs the program to completion and returns its exit code (128 + signal if it was killed).
pub fn run(gpu: &str, program: &OsString, args: &[OsString]) -> Result<i32, LaunchError> {
    let preload = find_preload()?;
    let status = command(gpu, &preload, program, args)?.status().map_err(LaunchError::Spawn)?;
    use std::os::unix::process::ExitStatusExt;
    Ok(status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}
