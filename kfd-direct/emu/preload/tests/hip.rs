//! Debian's unmodified HIP 5.2 (libamdhip64) on the emulated gfx90a through the preload
//! library (docs/rocm-on-emu.md stages 4 and 5, and the fault paths).

mod common;

use std::time::Duration;

use common::*;

const T: Duration = Duration::from_secs(90);

#[test]
fn hip_runtime_memory_streams_events_wait_value_and_host_functions() {
    let exe = build_hip("hip_runtime");
    for (env, sdma) in
        [(&[][..], true), (&[("HSA_ENABLE_SDMA", "0")][..], false), (&[("HSA_ENABLE_INTERRUPT", "0")][..], true)]
    {
        let env: Vec<_> = env.iter().copied().chain([("AQUEDUCT_EMU_STATS", "1")]).collect();
        let out = run(&exe, &[], &env, T);
        let text = expect_ok(&out, &format!("hip_runtime {env:?}"));
        assert!(text.contains("AMD Instinct MI210 arch gfx90a"), "{text}");
        assert!(text.contains("hip runtime ok"), "{text}");
        // Pageable hipMemcpy H2D/D2H goes through ROCr's SDMA blits unless disabled.
        let (queues, copies) = sdma_stats(&out);
        if sdma {
            assert!(queues >= 1 && copies >= 1, "{env:?}: {queues} SDMA queues, {copies} copies");
        } else {
            assert_eq!((queues, copies), (0, 0), "{env:?}");
        }
    }
}

#[test]
fn user_kernel_through_hip_module_launch_kernel() {
    let co = build_code_object();
    let exe = build_hip("hip_kernels");
    let text = expect_ok(&run(&exe, &[co.to_str().unwrap(), "module"], &[], T), "module");
    assert!(text.contains("module launch ok"), "{text}");
}

#[test]
fn user_kernel_through_hip_launch_kernel_with_a_registered_fat_binary() {
    let co = build_code_object();
    let exe = build_hip("hip_kernels");
    let text = expect_ok(&run(&exe, &[co.to_str().unwrap(), "fatbin"], &[], T), "fatbin");
    assert!(text.contains("fatbin launch ok"), "{text}");
}

#[test]
fn user_kernel_arguments_are_decoded_from_the_code_object_metadata() {
    let co = build_code_object();
    let exe = build_hip("hip_kernels");
    let text = expect_ok(&run(&exe, &[co.to_str().unwrap(), "mixed"], &[], T), "mixed");
    assert!(text.contains("mixed arguments ok"), "{text}");
}

#[test]
fn a_kernel_without_a_twin_fails_through_hips_queue_error_path() {
    let co = build_code_object();
    let exe = build_hip("hip_kernels");
    // Twins only (`AQUEDUCT_EMU_KERNELS=twin`): by default the emulator would run the kernel's
    // machine code instead (docs/executor.md).
    let out = run(&exe, &[co.to_str().unwrap(), "untwinned"], &[("AQUEDUCT_EMU_KERNELS", "twin")], T);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the program must not succeed: {err}");
    assert!(err.contains("no host twin for kernel `aqueduct_untwinned`"), "{err}");
    assert!(err.contains("callbackQueue aborting with error"), "{err}");
    assert!(err.contains("HSA_STATUS_ERROR_INVALID_CODE_OBJECT"), "{err}");
}

#[test]
fn a_gpu_memory_fault_surfaces_through_rocrs_fault_handler() {
    let co = build_code_object();
    let exe = build_hip("hip_kernels");
    let out = run(&exe, &[co.to_str().unwrap(), "memfault"], &[], T);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the program must not succeed: {err}");
    assert!(err.contains("Memory access fault by GPU node-1"), "{err}");
    assert!(err.contains("0x7ff000000000"), "{err}");
}

#[test]
fn a_user_twin_from_aqueduct_twins_runs_a_clang_built_kernel_under_aqueduct_run() {
    let co = build_code_object();
    let exe = build_hip("hip_user_twin");
    let lib = build_twin_library("scale_twin");
    let lib = lib.to_str().unwrap();
    let text = expect_ok(&aqueduct_run(&exe, &[co.to_str().unwrap()], &[("AQUEDUCT_TWINS", lib)], T), "user twin");
    assert!(text.contains("user twin ok"), "{text}");
    // Without the library, and twins only, the kernel has no twin: the dispatch fails loudly.
    let out = aqueduct_run(&exe, &[co.to_str().unwrap()], &[("AQUEDUCT_EMU_KERNELS", "twin")], T);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "without its twin library the program must fail: {err}");
    assert!(err.contains("no host twin for kernel `aqueduct_scale`"), "{err}");
}

/// The side-by-side HIP API benchmark, first column (Debian's libamdhip64 on the emulator).
/// Figures go to stdout; the test only checks that every measured path completes.
#[test]
fn side_by_side_benchmark_runs_against_debian_hip() {
    let co = build_code_object();
    let exe = build_hip("hip_bench");
    let text = expect_ok(&run(&exe, &[co.to_str().unwrap()], &[], Duration::from_secs(300)), "hip_bench");
    println!("{text}");
    assert!(text.contains("bench ok"), "{text}");
}
