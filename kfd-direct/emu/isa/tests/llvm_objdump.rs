//! The decoder and printer against `llvm-objdump-15 -d --mcpu=gfx90a` over real gfx90a code
//! objects (docs/isa.md §7), and the executor's coverage of them: every opcode of Debian's
//! rocRAND and rocSPARSE, the repository's code objects and the gfx940 corpus runs as machine
//! code (docs/executor.md §7).

mod common;

use aqueduct_isa::Target;
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
    assert!(report.unimplemented().is_empty(), "opcodes the executor lacks: {:?}", report.unimplemented());
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
    common::remove_temp_dir();
    report.print("rocRAND gfx90a");
    report.assert_clean();
    assert!(report.unimplemented().is_empty(), "rocRAND opcodes the executor lacks: {:?}", report.unimplemented());
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
    assert!(report.unimplemented().is_empty(), "rocSPARSE opcodes the executor lacks: {:?}", report.unimplemented());
}

/// Kernels written for this test (`tests/kernels/isa-test.{cl,hip}`), compiled now with clang-15
/// (OpenCL) and hipcc (HIP) at several optimisation levels, to reach MFMA/AGPR, DPP, swizzle,
/// packed-math, f16/f64, atomic, LDS, scratch, printf and clock code.
#[test]
fn compiled_kernels() {
    let (dir, objects) = compile_test_kernels(Target::Gfx90a);
    let mut report = Report::default();
    for p in &objects {
        compare(p, &mut report);
    }
    let _ = std::fs::remove_dir_all(&dir);
    report.print("test kernels (clang-15 OpenCL, hipcc HIP)");
    report.assert_clean();
    // The OpenCL image kernel's MIMG instructions are the one gap (docs/executor.md §6).
    let gaps: Vec<_> = report.unimplemented().into_iter().filter(|n| !n.starts_with("image_")).collect();
    assert!(gaps.is_empty(), "opcodes the executor lacks: {gaps:?}");
}

/// gfx940 (CDNA3, docs/isa.md §2 "CDNA3") against `llvm-objdump-15 -d --mcpu=gfx940`: the
/// repository's gfx940 fixtures (`kernels-gfx940.co`, the gfx940 images of the executor's hipcc
/// bundles `fixtures/isa/*-gfx940.bundle`) and the test kernels compiled now for gfx940 (the
/// OpenCL image kernel left out: gfx940 has no image instructions).
#[test]
fn gfx940_code_objects() {
    let root = repo_root();
    let (dir, mut objects) = compile_test_kernels(Target::Gfx940);
    objects.push(root.join("kfd-direct/emu/fixtures/kernels-gfx940.co"));
    let isa = root.join("kfd-direct/emu/fixtures/isa");
    let mut bundles: Vec<_> = std::fs::read_dir(&isa)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with("-gfx940.bundle"))
        .collect();
    bundles.sort();
    assert_eq!(bundles.len(), 5, "the five gfx940 bundles of fixtures/isa/build.sh");
    for b in &bundles {
        let data = std::fs::read(b).unwrap();
        let bundle = amdhsa::Bundle::parse(&data).expect("an offload bundle");
        let e = bundle
            .entries()
            .find(|e| e.target().is_some_and(|t| t.processor.name == "gfx940"))
            .expect("a gfx940 entry");
        let out = dir.join(b.file_name().unwrap()).with_extension("co");
        std::fs::write(&out, e.code).unwrap();
        objects.push(out);
    }
    let mut report = Report { target: Target::Gfx940, ..Report::default() };
    for p in &objects {
        compare(p, &mut report);
    }
    let _ = std::fs::remove_dir_all(&dir);
    report.print("gfx940: fixtures and test kernels (clang-15 OpenCL, hipcc HIP)");
    report.assert_clean();
    assert!(report.unimplemented().is_empty(), "gfx940 opcodes the executor lacks: {:?}", report.unimplemented());
    // The corpus reaches gfx940's own spellings and opcodes, not only what gfx90a shares.
    let seen: std::collections::BTreeSet<&str> =
        report.seen.values().flat_map(|(ops, _)| ops.iter().map(|o| o.name())).collect();
    for name in ["v_mov_b64_e32", "v_fmac_f32_e32", "buffer_inv", "buffer_wbl2"] {
        assert!(seen.contains(name), "{name} not in the gfx940 corpus");
    }
}

/// Compiles `tests/kernels/isa-test.{cl,hip}` for `target` into a temporary directory: clang-15
/// OpenCL at -O3 and -O1, hipcc at -O3, -O0 and -O2 with code object v5.
fn compile_test_kernels(target: Target) -> (std::path::PathBuf, Vec<std::path::PathBuf>) {
    let clang = common::tool("clang-15", "clang-15");
    let hipcc = common::tool("hipcc", "hipcc");
    common::tool("ld.lld-15", "lld-15");
    let libs = std::path::Path::new("/usr/lib/x86_64-linux-gnu/amdgcn/bitcode");
    assert!(
        libs.join("ockl.bc").is_file(),
        "ROCm device libraries missing: install the Debian package `rocm-device-libs`"
    );
    let mcpu = target.mcpu();
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kernels");
    let dir = std::env::temp_dir().join(format!("aqueduct-isa-kernels-{mcpu}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut objects = Vec::new();
    for opt in ["-O3", "-O1"] {
        let out = dir.join(format!("cl{opt}.co"));
        let mut cmd = std::process::Command::new(&clang);
        cmd.args(["-x", "cl", "-Xclang", "-finclude-default-header", "-target", "amdgcn-amd-amdhsa"])
            .arg(format!("-mcpu={mcpu}"))
            .arg(format!("--rocm-device-lib-path={}", libs.display()));
        if target == Target::Gfx940 {
            cmd.arg("-DAQUEDUCT_NO_IMAGES");
        }
        let st = cmd.arg(opt).arg(src.join("isa-test.cl")).arg("-o").arg(&out).status().expect("run clang-15");
        assert!(st.success(), "clang-15 failed on isa-test.cl {opt} for {mcpu}");
        objects.push(out);
    }
    for (opt, extra) in [("-O3", ""), ("-O0", ""), ("-O2", "-mcode-object-version=5")] {
        let out = dir.join(format!("hip{opt}{extra}.co"));
        let mut cmd = std::process::Command::new(&hipcc);
        cmd.arg(format!("--offload-arch={mcpu}"));
        cmd.args(["--cuda-device-only", "--no-gpu-bundle-output", "-c", "-w", opt]);
        if !extra.is_empty() {
            cmd.arg(extra);
        }
        let st = cmd.arg(src.join("isa-test.hip")).arg("-o").arg(&out).status().expect("run hipcc");
        assert!(st.success(), "hipcc failed on isa-test.hip {opt} {extra} for {mcpu}");
        objects.push(out);
    }
    (dir, objects)
}
