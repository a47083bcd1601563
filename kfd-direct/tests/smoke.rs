//! First light: the backend on the emulator through core's runtime, and the real path here.

use aqueduct::{Runtime, SingleThread};
use aqueduct_kfd::{EmuSys, Kfd, KfdConfig, KfdError, LinuxSys};

#[test]
fn real_syscalls_without_dev_kfd_report_no_device() {
    if std::path::Path::new("/dev/kfd").exists() {
        return;
    }
    let r = Kfd::open(LinuxSys, KfdConfig::default());
    assert_eq!(r.err(), Some(KfdError::NoDevice));
}

#[test]
fn memset_memcpy_round_trip_on_the_emulator() {
    let kfd = Kfd::open(EmuSys::with_defaults().unwrap(), KfdConfig::default()).unwrap();
    let rt: Runtime<_, _> = Runtime::new(kfd, SingleThread);
    let s = rt.stream_create(0).unwrap();
    let a = rt.malloc(4096).unwrap();
    let b = rt.malloc(4096).unwrap();
    rt.memset_async(s, a, 0x5a, 1, 4096).unwrap();
    rt.memcpy_async(s, b, a, 4096).unwrap();
    rt.stream_synchronize(s).unwrap();
    // SAFETY: device memory is CPU-mapped (large BAR) and the copy completed.
    let v = unsafe { std::slice::from_raw_parts(b as usize as *const u8, 4096) };
    assert!(v.iter().all(|&x| x == 0x5a));
    rt.stream_destroy(s).unwrap();
}
