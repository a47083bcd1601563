//! The decoder and printer against `llvm-objdump-15 -d --mcpu=gfx90a` over real gfx90a code
//! objects (`docs/isa.md`, "How it is checked").

mod common;

use common::{compare, repo_root, Report};

#[test]
fn repository_code_objects() {
    let root = repo_root();
    let mut report = Report::default();
    let mut paths =
        vec![root.join("kfd-direct/emu/fixtures/kernels-gfx90a.co"), root.join("kfd-direct/blit/blit-gfx90a.co")];
    for e in std::fs::read_dir(root.join("std-host/kernels")).unwrap() {
        let p = e.unwrap().path();
        if p.to_string_lossy().ends_with("-gfx90a.co") {
            paths.push(p);
        }
    }
    paths.sort();
    for p in &paths {
        compare(p, &mut report);
    }
    report.print("repository code objects");
    report.assert_clean();
}

/// Every gfx90a code object of Debian's rocRAND (`librocrand1`).
#[test]
fn rocrand() {
    let objects =
        common::gfx90a_objects(std::path::Path::new("/usr/lib/x86_64-linux-gnu/librocrand.so.1"), "librocrand1");
    assert!(!objects.is_empty(), "no gfx90a code object in librocrand.so.1");
    let mut report = Report::default();
    for (_, p) in &objects {
        compare(p, &mut report);
        let _ = std::fs::remove_file(p);
    }
    report.print("rocRAND gfx90a");
    report.assert_clean();
}

/// Debian's rocSPARSE (`librocsparse0`): 111 bundles with two gfx90a images each (xnack- and
/// xnack+, 354 MB, 13.2 M instructions). By default the test checks the `xnack-` image of every
/// bundle (6.6 M instructions, ~40 s in a debug build); the `xnack+` images are the same kernels
/// built for XNACK replay. `AQUEDUCT_ISA_ROCSPARSE_ALL=1` adds them (~80 s);
/// `AQUEDUCT_ISA_ROCSPARSE_STRIDE=n` keeps only every n-th bundle for a quick run.
#[test]
fn rocsparse() {
    let stride: usize =
        std::env::var("AQUEDUCT_ISA_ROCSPARSE_STRIDE").ok().and_then(|s| s.parse().ok()).unwrap_or(1).max(1);
    let all = std::env::var_os("AQUEDUCT_ISA_ROCSPARSE_ALL").is_some();
    let lib = std::path::Path::new("/usr/lib/x86_64-linux-gnu/librocsparse.so.0");
    let objects = common::gfx90a_objects_filtered(lib, "librocsparse0", |i, id| {
        (all || id.ends_with("xnack-")) && (i / 2) % stride == 0
    });
    assert!(!objects.is_empty(), "no gfx90a code object in librocsparse.so.0");
    let mut report = Report::default();
    for (_, p) in &objects {
        compare(p, &mut report);
        let _ = std::fs::remove_file(p);
    }
    report
        .print(&format!("rocSPARSE gfx90a (every {stride}. bundle{})", if all { ", both images" } else { ", xnack-" }));
    report.assert_clean();
}
