//! The `aqueduct` command-line tool.

use std::ffi::OsString;

use aqueduct_std::select::{BackendKind, OpenOptions};
use clap::{Parser, Subcommand};

/// aqueduct: a GPU command-stream runtime for AMD GPUs.
#[derive(Debug, Parser)]
#[command(name = "aqueduct", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

fn parse_backend(s: &str) -> Result<BackendKind, String> {
    BackendKind::parse(s).ok_or_else(|| format!("unknown backend {s:?} (auto, kfd, rocr, emu)"))
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Run a program (e.g. an unmodified ROCm/HIP program or rocminfo) on the emulated GPU.
    Run {
        /// GPU model to emulate.
        #[arg(long, default_value = "gfx90a")]
        gpu: String,
        /// The program and its arguments (after `--`).
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        program: Vec<OsString>,
    },
    /// Streams, kernels, copies, events, a host function and a captured graph on the default
    /// device, every result checked.
    Demo {
        /// Backend: auto (real KFD, then ROCr, else the emulator), kfd, rocr or emu.
        #[arg(long, default_value = "auto", value_parser = parse_backend)]
        backend: BackendKind,
    },
}

fn main() {
    let cli = Cli::parse();
    match cli.command {
        Cmd::Run { gpu, program } => match aqueduct_std::launcher::run(&gpu, &program[0], &program[1..]) {
            Ok(code) => std::process::exit(code),
            Err(e) => {
                eprintln!("aqueduct run: {e}");
                std::process::exit(127);
            }
        },
        Cmd::Demo { backend } => {
            let mut out = std::io::stdout();
            if let Err(e) = aqueduct_std::cli::demo::run(&OpenOptions::new(backend), &mut out) {
                eprintln!("aqueduct demo: {e}");
                std::process::exit(1);
            }
        }
    }
}
