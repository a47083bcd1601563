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
