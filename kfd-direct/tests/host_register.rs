//! Registered host memory on the emulated GPU (docs/kfd-aql.md §1.4, "Registered host memory"):
//! `Backend::host_register` makes pageable memory a USERPTR buffer at a new GPU VA, device copies
//! read and write the user's own pages through it (and fault once it is gone), and the emulator
//! refuses what amdkfd refuses.

use aqueduct::{Backend, Error, Runtime, SingleThread};
use aqueduct_kfd::abi::nr;
use aqueduct_kfd::{EmuSys, Errno, Kfd, KfdConfig, KfdError, Op};

const PAGE: usize = 4096;

fn runtime() -> (EmuSys, Runtime<Kfd<EmuSys>, SingleThread>) {
    let sys = EmuSys::with_defaults().unwrap();
    let rt = Runtime::new(Kfd::open(sys.clone(), KfdConfig::default()).unwrap(), SingleThread);
    (sys, rt)
}

/// Anonymous pages of the test's own, with `prot`, unmapped on drop.
struct Pages {
    at: *mut u8,
    len: usize,
}

impl Pages {
    /// A private mapping far below where the kernel places mappings of its own choice (it takes
    /// the highest gap that fits, below the stack). A hole punched here stays a hole: other
    /// tests' threads of this process map pages meanwhile, and one of them could land in a hole
    /// at an address of the kernel's choice.
    fn new(len: usize, prot: rustix::mm::ProtFlags) -> Pages {
        use rustix::mm::MapFlags;
        for k in 0..64u64 {
            let hint = ((0x10 + k) << 32) as usize as *mut core::ffi::c_void;
            let flags = MapFlags::PRIVATE | MapFlags::FIXED_NOREPLACE;
            // SAFETY: FIXED_NOREPLACE maps only where nothing is mapped, so nothing is replaced.
            if let Ok(at) = unsafe { rustix::mm::mmap_anonymous(hint, len, prot, flags) } {
                return Pages { at: at.cast(), len };
            }
        }
        panic!("no free range of {len} bytes below 0x50_0000_0000");
    }

    fn addr(&self) -> u64 {
        self.at as u64
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        // SAFETY: the mapping `new` made; nothing uses it any more.
        let _ = unsafe { rustix::mm::munmap(self.at.cast(), self.len) };
    }
}

#[test]
fn registered_pageable_memory_is_reached_by_device_copies_at_its_own_device_address() {
    let (sys, rt) = runtime();
    let kfd = rt.backend();
    let len = PAGE + 1000;
    let s = rt.stream_create(0).unwrap();
    let d = rt.malloc(len).unwrap();
    let back = rt.host_malloc(len).unwrap();
    let maps = sys.live_mappings();
    let mut host = vec![0u8; 4 * PAGE];
    // A range that starts and ends inside pages: the registration covers the three pages.
    let start = host.as_mut_ptr() as u64 + 100;
    let start = start + (PAGE as u64 - start % PAGE as u64) % PAGE as u64 + 100;
    sys.set_tracing(true);
    let dev = kfd.host_register(0, start, len).unwrap();
    assert_eq!(sys.ioctl_trace(), vec![nr::ALLOC_MEMORY_OF_GPU, nr::MAP_MEMORY_TO_GPU]);
    assert_ne!(dev, start, "a new GPU VA over the same pages");
    assert_eq!(dev % PAGE as u64, start % PAGE as u64, "the same offset in its page");
    assert_eq!(sys.live_mappings(), maps + 1, "the VA reservation");

    // Device → registered memory: a fill on the device, copied into the user's pages.
    rt.memset_async(s, d, 0x5a, 1, len as u64).unwrap();
    rt.memcpy_async(s, dev, d, len as u64).unwrap();
    rt.stream_synchronize(s).unwrap();
    let off = (start - host.as_ptr() as u64) as usize;
    assert!(host[off..off + len].iter().all(|&b| b == 0x5a));
    assert_eq!(host[off - 1], 0, "nothing before the range");
    assert_eq!(host[off + len], 0, "nothing after it");

    // Registered memory → device: the host's writes, read by a device copy.
    for (i, b) in host[off..off + len].iter_mut().enumerate() {
        *b = i as u8;
    }
    rt.memcpy_async(s, d, dev, len as u64).unwrap();
    rt.memcpy_async(s, back, d, len as u64).unwrap();
    rt.stream_synchronize(s).unwrap();
    // SAFETY: host memory of the backend, `len` bytes; the copies completed.
    let got = unsafe { std::slice::from_raw_parts(back as usize as *const u8, len) };
    assert!(got.iter().enumerate().all(|(i, &b)| b == i as u8));

    // A device address is not an allocation, nor an allocation a registration.
    assert_eq!(kfd.memory_free(dev), Err(Error::InvalidValue));
    assert_eq!(kfd.host_unregister(d), Err(Error::InvalidValue));
    sys.set_tracing(true);
    kfd.host_unregister(dev).unwrap();
    assert_eq!(sys.ioctl_trace(), vec![nr::UNMAP_MEMORY_FROM_GPU, nr::FREE_MEMORY_OF_GPU]);
    assert_eq!(sys.live_mappings(), maps, "the reservation is gone");
    assert_eq!(kfd.host_unregister(dev), Err(Error::InvalidValue), "once only");
    rt.stream_destroy(s).unwrap();
    rt.free(d).unwrap();
    rt.free(back).unwrap();
}

#[test]
fn ranges_sharing_a_page_are_registered_apart() {
    let (_sys, rt) = runtime();
    let kfd = rt.backend();
    let host = vec![0u8; 2 * PAGE];
    let a = host.as_ptr() as u64;
    let (da, db) = (kfd.host_register(0, a, 64).unwrap(), kfd.host_register(0, a + 64, 64).unwrap());
    assert_ne!(da & !(PAGE as u64 - 1), db & !(PAGE as u64 - 1), "each its own buffer");
    kfd.host_unregister(da).unwrap();
    kfd.host_unregister(db).unwrap();
}

#[test]
fn memory_amdkfd_cannot_fault_in_is_refused_and_leaves_nothing_behind() {
    let (sys, rt) = runtime();
    let kfd = rt.backend();
    let maps = sys.live_mappings();
    assert_eq!(kfd.host_register(0, 0, 64), Err(Error::InvalidValue));
    let buf = [0u8; 64];
    assert_eq!(kfd.host_register(0, buf.as_ptr() as u64, 0), Err(Error::InvalidValue));
    assert_eq!(kfd.host_register(7, buf.as_ptr() as u64, 64), Err(Error::InvalidDevice));

    // Six pages of the test's own: 0 and 1 writable, 2 a hole, 3 without access, 4 read-only.
    use rustix::mm::ProtFlags;
    let pages = Pages::new(6 * PAGE, ProtFlags::READ | ProtFlags::WRITE);
    let page = |i: u64| pages.addr() + i * PAGE as u64;
    // SAFETY: pages of the mapping above, which nothing else uses.
    unsafe {
        rustix::mm::munmap(page(2) as usize as *mut _, PAGE).unwrap();
        rustix::mm::mprotect(page(3) as usize as *mut _, PAGE, rustix::mm::MprotectFlags::empty()).unwrap();
        rustix::mm::mprotect(page(4) as usize as *mut _, PAGE, rustix::mm::MprotectFlags::READ).unwrap();
    }
    for (addr, len, errno) in [
        (page(2), 64, Errno::EFAULT),
        (page(3), 64, Errno::EFAULT),
        (page(4) + 8, 64, Errno::EPERM),
        // The range runs from a writable page into the hole: every page counts.
        (page(1), 2 * PAGE, Errno::EFAULT),
    ] {
        assert_eq!(kfd.host_register(0, addr, len), Err(Error::InvalidValue), "{errno}");
        assert_eq!(kfd.last_error(), Some(KfdError::Sys { op: Op::AllocMemory, errno }));
        assert_eq!(sys.live_mappings(), maps, "{errno}: the reservation is undone");
    }
    let ok = kfd.host_register(0, page(0), 2 * PAGE).unwrap();
    kfd.host_unregister(ok).unwrap();
}

#[test]
fn a_failing_map_frees_the_buffer_and_the_reservation() {
    let (sys, rt) = runtime();
    let kfd = rt.backend();
    let maps = sys.live_mappings();
    let host = vec![0u8; PAGE];
    sys.emu().fail_ioctl(2, None, aqueduct_kfd_emu::Errno::EINVAL);
    sys.set_tracing(true);
    assert_eq!(kfd.host_register(0, host.as_ptr() as u64, PAGE), Err(Error::Unknown));
    assert_eq!(kfd.last_error(), Some(KfdError::Sys { op: Op::MapMemory, errno: Errno::EINVAL }));
    assert_eq!(sys.ioctl_trace(), vec![nr::ALLOC_MEMORY_OF_GPU, nr::MAP_MEMORY_TO_GPU, nr::FREE_MEMORY_OF_GPU]);
    assert_eq!(sys.live_mappings(), maps);
}

#[test]
fn after_unregistering_the_device_address_is_a_memory_fault() {
    let (_sys, rt) = runtime();
    let host = vec![7u8; PAGE];
    let s = rt.stream_create(0).unwrap();
    let d = rt.malloc(64).unwrap();
    let dev = rt.backend().host_register(0, host.as_ptr() as u64, 64).unwrap();
    rt.memcpy_async(s, d, dev, 64).unwrap();
    rt.stream_synchronize(s).unwrap();
    rt.backend().host_unregister(dev).unwrap();
    // The pages are the user's again; the device address names nothing.
    rt.memcpy_async(s, d, dev, 64).unwrap();
    assert_eq!(rt.stream_synchronize_timeout(s, aqueduct::Timeout::SECOND), Err(Error::IllegalAddress));
    assert_eq!(rt.backend().device_fault(0), Some(aqueduct_kfd::DeviceFault::MemoryFault(dev)));
    assert_eq!(host, vec![7u8; PAGE]);
}
