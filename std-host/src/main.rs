//! The `aqueduct` command-line tool.

use std::ffi::OsString;

use clap::{Parser, Subcommand};

/// aqueduct: a GPU command-stream runtime for AMD GPUs.
#[derive(Debug, Parser)]
#[command(name = "aqueduct", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
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
    }
}
