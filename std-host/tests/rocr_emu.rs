//! The ROCr backend end to end on the emulated gfx90a: `aqueduct run -- aqueduct …` puts
//! Debian's unmodified ROCr 5.2 (libhsakmt, libhsa-runtime64) on the emulator through
//! `libaqueduct_kfd_preload.so`, and the tool's ROCr backend then creates queues in ROCr's ring,
//! writes AQL packets with core's `AqlRing`, rings the doorbell signal, waits on ROCr signals,
//! copies and fills, runs a kernel of a code object loaded as a ROCr executable, a host function
//! and graph launches — every result checked, and the trace of it valid.

#![cfg(feature = "rocr")]

mod common;

use std::time::Duration;

use common::*;

const T: Duration = Duration::from_secs(120);

#[test]
fn info_under_the_preload_selects_rocr_with_the_emulated_gfx90a() {
    require_rocm_packages();
    let (ok, out, err) = aqueduct_on_emulator(&["info"], T);
    assert!(ok, "{out}\n{err}");
    for want in [
        "auto selects `rocr`",
        "rocr: ROCr (libhsa-runtime64) — available",
        "device 0: gfx90a (AMD Instinct MI210)",
        "timestamp frequency  100 MHz (system 1000 MHz)",
        "blit kernels         loaded",
    ] {
        assert!(out.contains(want), "info lacks {want:?}:\n{out}\n{err}");
    }
}

#[test]
fn the_trace_workload_runs_on_the_rocr_backend_under_the_preload() {
    require_rocm_packages();
    let dir = std::env::temp_dir().join(format!("aqueduct-rocr-emu-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("rocr-trace.json");
    let (ok, out, err) = aqueduct_on_emulator(&["trace", "--backend", "rocr", "-o", file.to_str().unwrap()], T);
    assert!(ok, "{out}\n{err}");
    for want in [
        "backend `rocr` (ROCr (libhsa-runtime64)): gfx90a, GPU clock 100 MHz",
        "copy host -> a (H2D)",
        "fill c with 0",
        "kernel aqueduct_vadd: c = a + b",
        "wait for compute's event",
        "host function",
        "graph launch 3 (3 nodes)",
        "trace: 14 slices on 4 hardware queues, all 3 checks passed",
    ] {
        assert!(out.contains(want), "output lacks {want:?}:\n{out}\n{err}");
    }
    // Everything the runtime created was handed back to ROCr before hsa_shut_down.
    assert!(!err.contains("leak"), "{err}");
    check_trace(&file, 4);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_kernel_the_emulator_cannot_run_is_a_stream_error_not_a_hang() {
    // The demo's code-object kernels (iota_u32, axpy_u32, add_u32) have no host twin in the
    // preload: the emulator runs their machine code (docs/executor.md), and if that fails (or,
    // with `AQUEDUCT_EMU_KERNELS=twin`, there is no twin) their dispatch stops the queue: ROCr's
    // queue-error callback latches it and the waiting synchronise returns the error (it used to
    // wait forever). The steps before it — a fill and a device-to-host copy on ROCr queues — ran.
    require_rocm_packages();
    let (ok, out, err) = aqueduct_on_emulator(&["demo", "--backend", "rocr"], T);
    assert!(out.contains("backend `rocr`"), "{out}\n{err}");
    assert!(out.contains("fill x (4096 x u32) with 0xdeadbeef"), "{out}\n{err}");
    assert!(out.contains("copy x -> host (device to host)"), "{out}\n{err}");
    if !ok {
        // The emulator names the kernel it could not run: no twin, or the executor's error.
        assert!(err.contains("kernel `iota_u32`") && err.contains("aqueduct demo: iota:"), "{err}");
    } else {
        assert!(out.contains("checks passed"), "{out}");
    }
}
