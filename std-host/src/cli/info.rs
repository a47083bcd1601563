//! `aqueduct info`: every backend, whether it opens (and why not), and its devices.

use std::io::Write;

use aqueduct::Backend;
use aqueduct_kfd::{Kfd, Sys};

use crate::select::{AnyBackend, BackendKind, OpenOptions};

fn kfd_devices<S: Sys, W: Write>(k: &Kfd<S>, out: &mut W) {
    let (major, minor) = k.version();
    let _ = writeln!(out, "  KFD interface {major}.{minor}, {} device(s)", k.device_count());
    for d in 0..k.device_count() {
        let (Some(node), Ok(info)) = (k.node(d), k.device_info(d)) else { continue };
        let p = node.props;
        let _ = writeln!(out, "  device {d}: {}", super::gfx_name(info.gfx_target_version));
        let _ = writeln!(out, "    gfx_target_version   {}", info.gfx_target_version);
        let _ = writeln!(out, "    compute units        {}", info.cu_count);
        let _ = writeln!(
            out,
            "    SIMDs                {} ({} per CU, {} waves each)",
            p.simd_count, p.simd_per_cu, p.max_waves_per_simd
        );
        let _ = writeln!(out, "    XCCs                 {}", p.num_xcc);
        let _ = writeln!(out, "    LDS per work-group   {} KiB", p.lds_size_in_kb);
        let _ = writeln!(out, "    VRAM                 {} MiB", p.vram_bytes >> 20);
        let _ = writeln!(
            out,
            "    topology node        {} (gpu_id {:#x}, /dev/dri/renderD{})",
            node.node, node.gpu_id, p.drm_render_minor
        );
        let _ = writeln!(out, "    timestamp frequency  {} MHz", crate::rounded_mhz(info.timestamp_frequency));
        let _ = writeln!(out, "    stream priorities    -1 (high) .. 1 (low); CU masks up to {} bits", info.cu_count);
    }
}

/// Writes the report. Returns how many backends opened.
pub fn run<W: Write>(out: &mut W) -> usize {
    let mut opened = 0;
    let opts = OpenOptions { ring_packets: 256, ..OpenOptions::default() };
    let auto = match AnyBackend::open(&OpenOptions { kind: BackendKind::Auto, ..opts.clone() }) {
        Ok((b, _)) => b.kind().name(),
        Err(_) => "none",
    };
    let _ = writeln!(out, "aqueduct {}: backends (auto selects `{auto}`)", env!("CARGO_PKG_VERSION"));
    for kind in [BackendKind::Kfd, BackendKind::Rocr, BackendKind::Emu] {
        let _ = writeln!(out);
        let _ = write!(out, "{kind}: {} — ", kind.describe());
        if kind == BackendKind::Kfd && !std::path::Path::new("/dev/kfd").exists() {
            let _ = writeln!(out, "unavailable: /dev/kfd does not exist (no amdgpu driver)");
            continue;
        }
        match AnyBackend::open_one(kind, &opts) {
            Err(reason) => {
                let _ = writeln!(out, "unavailable: {reason}");
            }
            Ok(b) => {
                opened += 1;
                let _ = writeln!(out, "available");
                match &b {
                    AnyBackend::Emu(k) => kfd_devices(k, out),
                    AnyBackend::Kfd(k) => kfd_devices(k, out),
                    #[cfg(feature = "rocr")]
                    AnyBackend::Rocr(r) => r.describe(out),
                }
            }
        }
    }
    opened
}
