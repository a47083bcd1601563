//! Build script: compiles `tests/c/layout.c` against the system's `linux/kfd_ioctl.h` and ROCr's
//! `hsa/*.h` when they are installed, so the layout test can compare against the real headers.
//! When a header is missing the test is told which Debian package provides it and fails.

use std::path::Path;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(emu_layout_headers)");
    println!("cargo::rerun-if-changed=tests/c/layout.c");
    println!("cargo::rerun-if-changed=build.rs");
    let kfd = Path::new("/usr/include/linux/kfd_ioctl.h");
    let hsa = Path::new("/usr/include/hsa/amd_hsa_queue.h");
    let mut missing = Vec::new();
    if !kfd.exists() {
        missing.push("linux-libc-dev (/usr/include/linux/kfd_ioctl.h)");
    }
    if !hsa.exists() {
        missing.push("libhsa-runtime-dev (/usr/include/hsa/*.h)");
    }
    if missing.is_empty() {
        // Rebuilt when an installed header changes (drm.h only decides the stand-in below).
        for header in [kfd, hsa, Path::new("/usr/include/drm/drm.h")] {
            if header.exists() {
                println!("cargo::rerun-if-changed={}", header.display());
            }
        }
        let mut b = cc::Build::new();
        b.file("tests/c/layout.c").include("/usr/include/hsa").warnings(false);
        // kfd_ioctl.h includes <drm/drm.h> only for the __u32/__u64 types; Debian ships that
        // header in libdrm-dev, not linux-libc-dev, so stand in for it when it is absent.
        if !Path::new("/usr/include/drm/drm.h").exists() {
            let out = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default()).join("stub");
            let _ = std::fs::create_dir_all(out.join("drm"));
            let _ = std::fs::write(out.join("drm/drm.h"), "#include <linux/types.h>\n");
            b.include(out);
        }
        match b.try_compile("aqueduct_emu_layout") {
            Ok(()) => {
                println!("cargo::rustc-cfg=emu_layout_headers");
                return;
            }
            Err(e) => missing.push(Box::leak(format!("a working C compiler ({e})").into_boxed_str())),
        }
    }
    // While a header is missing the script runs again at every build (a path that never exists
    // is always out of date), so installing the package later — CI lints before the test
    // command installs it — is seen: a header's own mtime is the package's, older than this run.
    let never = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default()).join("headers-missing");
    println!("cargo::rerun-if-changed={}", never.display());
    println!("cargo::rustc-env=EMU_LAYOUT_MISSING=missing: {}", missing.join(", "));
}
