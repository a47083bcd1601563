//! Debian's unmodified HIP 5.2 (libamdhip64) on the emulated gfx90a through the preload
//! library (rocr-on-emu.md stages 4 and 5, and the fault paths).

mod common;

use std::time::Duration;

use common::*;

const T: Duration = Duration::from_secs(90);

#[test]
fn hip_runtime_memory_streams_events_wait_value_and_host_functions() {
    let exe = build_hip("hip_runtime");
    for env in [&[][..], &[("HSA_ENABLE_SDMA", "0")][..], &[("HSA_ENABLE_INTERRUPT", "0")][..]] {
        let text = expect_ok(&run(&exe, &[], env, T), &format!("hip_runtime {env:?}"));
        assert!(text.contains("AMD Instinct MI210 arch gfx90a"), "{text}");
        assert!(text.contains("hip runtime ok"), "{text}");
    }
}
