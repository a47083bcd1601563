//! The ROCr backend's load, init and selection paths. Both machines are covered: without a GPU
//! (no `/dev/kfd`, as on the machines we build on) ROCr's init must fail clearly and selection
//! fall back to the emulator; with one, ROCr must open and selection pick the real device.
//! ROCr itself (Debian's `libhsa-runtime64-1`) is a prerequisite: missing, the tests fail.

#![cfg(feature = "rocr")]

mod common;

use std::path::Path;

use aqueduct::Backend;
use aqueduct_std::rocr::{Rocr, RocrError};
use aqueduct_std::select::{AnyBackend, BackendKind, OpenOptions};
use aqueduct_std::Device;

fn gpu_present() -> bool {
    Path::new("/dev/kfd").exists()
}

fn require_rocr() {
    common::require("libhsa-runtime64-1", "/usr/lib/x86_64-linux-gnu/libhsa-runtime64.so.1");
}

#[test]
fn a_missing_library_is_a_load_error_naming_it() {
    let e = Rocr::open(Some(Path::new("/nonexistent/libhsa-runtime64.so.1")), 256).unwrap_err();
    assert!(matches!(e, RocrError::Load(_)), "{e:?}");
    let text = e.to_string();
    assert!(text.contains("libhsa-runtime64.so.1") && text.contains("/nonexistent/"), "{text}");
}

#[test]
fn a_library_that_is_not_rocr_is_refused_by_symbol() {
    // libc loads but has none of the HSA entry points.
    let e = Rocr::open(Some(Path::new("libc.so.6")), 256).unwrap_err();
    assert!(e.to_string().contains("lacks hsa_"), "{e}");
}

#[test]
fn hsa_init_fails_clearly_without_a_gpu_and_opens_with_one() {
    require_rocr();
    if let Err(e) = hsa_sys::Hsa::load(None) {
        panic!("libhsa-runtime64.so.1 is installed but does not load: {e:?}");
    }
    if gpu_present() {
        let r = Rocr::open(None, 256).unwrap_or_else(|e| panic!("/dev/kfd exists but ROCr does not open: {e}"));
        assert!(r.device_count() > 0, "ROCr found no GPU agent");
        let dev = Device::open(&OpenOptions::new(BackendKind::Rocr)).unwrap();
        assert_eq!(dev.backend_kind(), BackendKind::Rocr);
        return;
    }
    let e = Rocr::open(None, 256).unwrap_err();
    match &e {
        RocrError::Init(status, _) => assert_eq!(*status, hsa_sys::Status::ERROR_OUT_OF_RESOURCES),
        other => panic!("expected an hsa_init failure, got {other:?}"),
    }
    let text = e.to_string();
    assert!(text.contains("hsa_init failed") && text.contains("/dev/kfd does not exist"), "{text}");
    // Asked for by name, opening fails and says why.
    let err = Device::open(&OpenOptions::new(BackendKind::Rocr)).unwrap_err();
    assert!(err.to_string().contains("rocr: ROCr's hsa_init failed"), "{err}");
}

#[test]
fn auto_selects_the_real_gpu_or_falls_back_to_the_emulator_and_says_why() {
    require_rocr();
    let (b, unavailable) = AnyBackend::open(&OpenOptions::default()).unwrap();
    if gpu_present() {
        // kfd-direct on the real /dev/kfd comes first.
        assert_eq!(b.kind(), BackendKind::Kfd, "tried before: {unavailable:?}");
        assert!(unavailable.is_empty(), "{unavailable:?}");
        assert_eq!(Device::open_default().unwrap().backend_kind(), BackendKind::Kfd);
        return;
    }
    assert_eq!(b.kind(), BackendKind::Emu);
    let kinds: Vec<_> = unavailable.iter().map(|u| u.kind).collect();
    assert_eq!(kinds, vec![BackendKind::Kfd, BackendKind::Rocr]);
    assert!(unavailable[1].reason.contains("ROCr"), "{}", unavailable[1].reason);
    let dev = Device::open_default().unwrap();
    assert_eq!(dev.backend_kind(), BackendKind::Emu);
}
