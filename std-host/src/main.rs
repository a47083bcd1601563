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
        /// Whose HIP the program uses: ROCm's (Debian's libamdhip64 under the preload) or
        /// aqueduct's libamdhip64.so.5.
        #[arg(long, default_value = "rocm", value_parser = ["rocm", "aqueduct"])]
        hip: String,
        /// The program and its arguments (after `--`).
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        program: Vec<OsString>,
    },
    /// Every backend and device found, with its properties, and why a backend is unavailable.
    Info,
    /// Streams, kernels, copies, events, a host function and a captured graph on the default
    /// device, every result checked.
    Demo {
        /// Backend: auto (real KFD, then ROCr, else the emulator), kfd, rocr or emu.
        #[arg(long, default_value = "auto", value_parser = parse_backend)]
        backend: BackendKind,
    },
    /// Every figure of the performance budget (docs/architecture.md) beside its floor, measured in
    /// this run.
    Bench {
        /// Backend: auto, kfd, rocr or emu.
        #[arg(long, default_value = "auto", value_parser = parse_backend)]
        backend: BackendKind,
        /// Print one JSON object instead of the table.
        #[arg(long)]
        json: bool,
        /// A short run (smoke test): fewer samples and iterations.
        #[arg(long)]
        short: bool,
        /// Samples per figure (the median is reported).
        #[arg(long, default_value_t = 11)]
        samples: usize,
    },
    /// Run a multi-stream workload (kernels, copies, fills, a cross-stream wait, a host function,
    /// graph launches) and write a Chrome/Perfetto trace: one track per hardware queue, one slice
    /// per operation, from the GPU timestamps of timing events around each operation.
    Trace {
        /// The trace file (Trace Event Format JSON; open it in ui.perfetto.dev or chrome://tracing).
        #[arg(short = 'o', long = "output")]
        output: std::path::PathBuf,
        /// Backend: auto, kfd, rocr or emu.
        #[arg(long, default_value = "auto", value_parser = parse_backend)]
        backend: BackendKind,
    },
}

fn main() {
    let cli = Cli::parse();
    match cli.command {
        Cmd::Run { gpu, hip, program } => {
            match aqueduct_std::launcher::run_with(&gpu, hip == "aqueduct", &program[0], &program[1..]) {
                Ok(code) => std::process::exit(code),
                Err(e) => {
                    eprintln!("aqueduct run: {e}");
                    std::process::exit(127);
                }
            }
        }
        Cmd::Bench { backend, json, short, samples } => {
            let samples = if short { samples.min(3) } else { samples };
            let opts = aqueduct_std::cli::bench::BenchOptions { samples, short };
            match aqueduct_std::cli::bench::run(&OpenOptions::new(backend), opts, !json) {
                Ok(report) => {
                    if json {
                        println!("{}", aqueduct_std::cli::bench::to_json(&report));
                    } else {
                        aqueduct_std::cli::bench::print_table(&report, &mut std::io::stdout());
                    }
                }
                Err(e) => {
                    eprintln!("aqueduct bench: {e}");
                    std::process::exit(1);
                }
            }
        }
        Cmd::Trace { output, backend } => {
            if let Err(e) = aqueduct_std::cli::trace::write(&OpenOptions::new(backend), &output, &mut std::io::stdout())
            {
                eprintln!("aqueduct trace: {e}");
                std::process::exit(1);
            }
        }
        Cmd::Info => {
            aqueduct_std::cli::info::run(&mut std::io::stdout());
        }
        Cmd::Demo { backend } => {
            let mut out = std::io::stdout();
            if let Err(e) = aqueduct_std::cli::demo::run(&OpenOptions::new(backend), &mut out) {
                eprintln!("aqueduct demo: {e}");
                std::process::exit(1);
            }
        }
    }
}
