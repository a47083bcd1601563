//! The ROCr backend's load, init-failure and fallback paths (this machine has ROCr, Debian's
//! libhsa-runtime64-1, and no GPU).

#![cfg(feature = "rocr")]

use std::path::Path;

use aqueduct_std::rocr::{Rocr, RocrError};
use aqueduct_std::select::{AnyBackend, BackendKind, OpenOptions};
use aqueduct_std::Device;

fn no_gpu() -> bool {
    !Path::new("/dev/kfd").exists()
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
fn without_a_gpu_hsa_init_fails_with_a_clear_error() {
    if !no_gpu() || hsa_sys::Hsa::load(None).is_err() {
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
fn auto_falls_back_to_the_emulator_and_says_why() {
    if !no_gpu() {
        return;
    }
    let (b, unavailable) = AnyBackend::open(&OpenOptions::default()).unwrap();
    assert_eq!(b.kind(), BackendKind::Emu);
    let kinds: Vec<_> = unavailable.iter().map(|u| u.kind).collect();
    assert_eq!(kinds, vec![BackendKind::Kfd, BackendKind::Rocr]);
    assert!(unavailable[1].reason.contains("ROCr"), "{}", unavailable[1].reason);
    let dev = Device::open_default().unwrap();
    assert_eq!(dev.backend_kind(), BackendKind::Emu);
}
