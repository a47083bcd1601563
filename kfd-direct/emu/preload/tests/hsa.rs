//! Debian's unmodified ROCr 5.2 on the emulated gfx90a through the preload library
//! (docs/rocm-on-emu.md stages 2 and 3).

mod common;

use std::time::Duration;

use common::*;

const T: Duration = Duration::from_secs(60);

#[test]
fn queue_creation_and_barrier_complete_with_interrupts_on_and_off() {
    let exe = build_hsa("hsa_barrier");
    for interrupts in ["1", "0"] {
        let out = run(&exe, &[], &[("HSA_ENABLE_INTERRUPT", interrupts)], T);
        let text = expect_ok(&out, &format!("HSA_ENABLE_INTERRUPT={interrupts}"));
        assert!(text.contains("barrier ok on gfx90a"), "{text}");
    }
}

#[test]
fn copies_and_fill_verify_with_default_environment_through_sdma() {
    let exe = build_hsa("hsa_copy");
    for interrupts in ["1", "0"] {
        let env = [("AQUEDUCT_EMU_STATS", "1"), ("HSA_ENABLE_INTERRUPT", interrupts)];
        let out = run(&exe, &[], &env, T);
        let text = expect_ok(&out, "default environment");
        assert!(text.contains("copies ok"), "{text}");
        // ROCr's H2D and D2H blits are SDMA queues (H2D created first), and the host↔device
        // copies of the program ran on them.
        let (queues, copies) = sdma_stats(&out);
        assert_eq!(queues, 2, "HSA_ENABLE_INTERRUPT={interrupts}");
        assert!(copies >= 4, "HSA_ENABLE_INTERRUPT={interrupts}: {copies} SDMA copies");
    }
}

#[test]
fn copies_and_fill_verify_with_blit_kernels() {
    let exe = build_hsa("hsa_copy");
    for interrupts in ["1", "0"] {
        let env = [("HSA_ENABLE_SDMA", "0"), ("HSA_ENABLE_INTERRUPT", interrupts), ("AQUEDUCT_EMU_STATS", "1")];
        let out = run(&exe, &[], &env, T);
        let text = expect_ok(&out, "HSA_ENABLE_SDMA=0");
        assert!(text.contains("copies ok"), "{text}");
        assert_eq!(sdma_stats(&out), (0, 0), "no SDMA queue with HSA_ENABLE_SDMA=0");
    }
}

#[test]
fn a_malformed_dispatch_reaches_the_queue_error_callback() {
    let exe = build_hsa("hsa_queue_error");
    let out = run(&exe, &[], &[], T);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(42), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("queue error callback: 0x1001"), "{text}");
}

#[test]
fn a_forked_child_gets_ebadf_on_its_parents_kfd_fd() {
    let exe = build_c("kfd_fork", &[], &[]);
    let text = expect_ok(&run(&exe, &[], &[], T), "kfd_fork");
    assert!(text.contains("fork ok: child EBADF, parent kfd 1.11"), "{text}");
}
