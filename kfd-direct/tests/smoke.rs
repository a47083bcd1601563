//! First light: the backend on the emulator through core's runtime, and the real path here
//! (a real `/dev/kfd` where there is one, the "no device" report where there is none).

use aqueduct::{Backend, Runtime, SingleThread};
use aqueduct_kfd::{EmuSys, Kfd, KfdConfig, KfdError, LinuxSys};

#[test]
fn real_syscalls_open_dev_kfd_or_report_no_device() {
    let r = Kfd::open(LinuxSys, KfdConfig::default());
    if std::path::Path::new("/dev/kfd").exists() {
        // A real GPU: the real syscalls bring it up and run a fill and a copy on it.
        let kfd = r.unwrap_or_else(|e| panic!("/dev/kfd exists but kfd-direct cannot open it: {e}"));
        assert!(kfd.device_count() > 0, "a KFD without GPU nodes");
        let rt: Runtime<_, _> = Runtime::new(kfd, SingleThread);
        let s = rt.stream_create(0).unwrap();
        let a = rt.malloc(4096).unwrap();
        // Host memory: readable by the CPU whatever the GPU's BAR size.
        let b = rt.host_malloc(4096).unwrap();
        rt.memset_async(s, a, 0x5a, 1, 4096).unwrap();
        rt.memcpy_async(s, b, a, 4096).unwrap();
        rt.stream_synchronize(s).unwrap();
        // SAFETY: host memory of 4096 bytes; the copy completed.
        let v = unsafe { std::slice::from_raw_parts(b as usize as *const u8, 4096) };
        assert!(v.iter().all(|&x| x == 0x5a));
        rt.stream_destroy(s).unwrap();
    } else {
        assert_eq!(r.err(), Some(KfdError::NoDevice));
    }
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
