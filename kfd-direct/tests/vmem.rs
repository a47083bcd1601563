//! Virtual memory management on the emulated GPU (docs/architecture.md §2, "Virtual memory";
//! docs/kfd-aql.md §1.4, "Physical handles"): physical handles are exported buffers, a
//! reservation is address space only, mapping imports a handle's dma-buf at an address of the
//! reservation and access maps it on the GPU. Handles mapped back to back are one range for the
//! device's copies and fills, two mappings of one handle see the same bytes, and the emulator
//! refuses what amdkfd refuses.

use aqueduct::backend::VMEM_GRANULARITY;
use aqueduct::{Backend, Error, Runtime, SingleThread, Timeout};
use aqueduct_kfd::abi::nr;
use aqueduct_kfd::{Call, DeviceFault, EmuSys, Kfd, KfdConfig};

const G: usize = VMEM_GRANULARITY;
const G64: u64 = G as u64;

fn runtime() -> (EmuSys, Runtime<Kfd<EmuSys>, SingleThread>) {
    let sys = EmuSys::with_defaults().unwrap();
    let rt = Runtime::new(Kfd::open(sys.clone(), KfdConfig::default()).unwrap(), SingleThread);
    (sys, rt)
}

/// `close` calls in the trace (a released handle closes its dma-buf).
fn closes(sys: &EmuSys) -> usize {
    sys.calls().iter().filter(|c| matches!(c, Call::Close(_))).count()
}

/// Host memory of the backend, `len` bytes at `at`.
fn host(at: u64, len: usize) -> &'static mut [u8] {
    // SAFETY: `at` is a host allocation of the runtime of at least `len` bytes that the test
    // reads and writes only between completed copies.
    unsafe { std::slice::from_raw_parts_mut(at as usize as *mut u8, len) }
}

#[test]
fn handles_mapped_back_to_back_are_one_range_and_aliases_see_the_same_bytes() {
    let (sys, rt) = runtime();
    let kfd = rt.backend();
    let s = rt.stream_create(0).unwrap();
    let maps = sys.live_mappings();

    sys.set_tracing(true);
    let a = kfd.vmem_create(0, G).unwrap();
    assert_eq!(sys.ioctl_trace(), vec![nr::ALLOC_MEMORY_OF_GPU, nr::EXPORT_DMABUF]);
    let b = kfd.vmem_create(0, 2 * G).unwrap();
    assert_ne!(a, 0);
    assert_ne!(a, b);

    sys.set_tracing(true);
    let r = kfd.vmem_reserve(8 * G, 0, 0).unwrap();
    assert_eq!(r % G64, 0, "aligned to the granularity");
    assert_eq!(sys.ioctl_trace(), Vec::<u32>::new(), "address space only");

    sys.set_tracing(true);
    kfd.vmem_map(r, a).unwrap();
    kfd.vmem_map(r + G64, b).unwrap();
    assert_eq!(sys.ioctl_trace(), vec![nr::IMPORT_DMABUF, nr::IMPORT_DMABUF]);

    sys.set_tracing(true);
    kfd.vmem_set_access(r, 0, true).unwrap();
    kfd.vmem_set_access(r + G64, 0, true).unwrap();
    kfd.vmem_set_access(r + G64, 0, true).unwrap();
    assert_eq!(sys.ioctl_trace(), vec![nr::MAP_MEMORY_TO_GPU, nr::MAP_MEMORY_TO_GPU], "granted once each");

    // A fill across the boundary between the two handles, read back by one copy across it.
    let h = rt.host_malloc(4 * G).unwrap();
    let edge = r + G64;
    rt.memset_async(s, r, 0, 1, 3 * G64).unwrap();
    rt.memset_async(s, edge - 100, 0x5a, 1, 200).unwrap();
    rt.memcpy_async(s, h, edge - 300, 600).unwrap();
    rt.stream_synchronize(s).unwrap();
    let got = host(h, 600);
    assert!(got[..200].iter().all(|&x| x == 0), "before the fill");
    assert!(got[200..400].iter().all(|&x| x == 0x5a), "the fill, on both sides of the edge");
    assert!(got[400..].iter().all(|&x| x == 0), "after the fill");

    // A 32-bit fill across the edge.
    rt.memset_async(s, edge - 8, 0x0403_0201, 4, 4).unwrap();
    rt.memcpy_async(s, h, edge - 8, 16).unwrap();
    rt.stream_synchronize(s).unwrap();
    assert_eq!(host(h, 16), &[1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4]);

    // Host → range → host, across the edge in both directions.
    let n = 3 * G / 2;
    let src = host(h, n);
    for (i, x) in src.iter_mut().enumerate() {
        *x = (i * 7 + i / 251) as u8;
    }
    let start = edge - G64 / 2;
    rt.memcpy_async(s, start, h, n as u64).unwrap();
    rt.memcpy_async(s, h + 2 * G64, start, n as u64).unwrap();
    rt.stream_synchronize(s).unwrap();
    let back = host(h + 2 * G64, n);
    assert!(back.iter().enumerate().all(|(i, &x)| x == (i * 7 + i / 251) as u8));

    // A device-to-device copy inside the range, overlapping itself forwards across the edge.
    rt.memcpy_async(s, start + 64, start, 4096).unwrap();
    rt.memcpy_async(s, h + 2 * G64, start, 4096 + 64).unwrap();
    rt.stream_synchronize(s).unwrap();
    let back = host(h + 2 * G64, 4096 + 64);
    let want = |i: usize| (i * 7 + i / 251) as u8;
    assert!((0..64).all(|i| back[i] == want(i)));
    assert!((0..4096).all(|i| back[64 + i] == want(i)), "memmove semantics");

    // A second mapping of `b` in a second reservation: the same bytes, both ways.
    let r2 = kfd.vmem_reserve(2 * G, 0, 0).unwrap();
    kfd.vmem_map(r2, b).unwrap();
    kfd.vmem_set_access(r2, 0, true).unwrap();
    rt.memcpy_async(s, h + 2 * G64, r2, 4096).unwrap();
    rt.stream_synchronize(s).unwrap();
    let via_alias = host(h + 2 * G64, 4096).to_vec();
    rt.memcpy_async(s, h + 3 * G64, edge, 4096).unwrap();
    rt.stream_synchronize(s).unwrap();
    assert_eq!(via_alias, host(h + 3 * G64, 4096));
    assert!(via_alias.iter().any(|&x| x != 0));
    rt.memset_async(s, r2 + G64 + 8, 0xc3, 1, 8).unwrap();
    rt.memcpy_async(s, h, edge + G64, 32).unwrap();
    rt.stream_synchronize(s).unwrap();
    assert_eq!(&host(h, 32)[8..16], &[0xc3; 8], "written through the alias, read through the first mapping");

    // Releasing a mapped handle keeps its memory while a mapping holds it.
    sys.set_tracing(true);
    kfd.vmem_release(b).unwrap();
    assert_eq!(sys.ioctl_trace(), vec![nr::FREE_MEMORY_OF_GPU]);
    assert_eq!(closes(&sys), 1, "the handle's dma-buf is closed");
    rt.memcpy_async(s, h, r2 + G64 + 8, 8).unwrap();
    rt.stream_synchronize(s).unwrap();
    assert_eq!(host(h, 8), &[0xc3; 8]);
    assert_eq!(kfd.vmem_map(r2, b), Err(Error::InvalidValue), "a released handle maps no more");

    // Unmapping: the GPU mapping and the imported buffer go; the address faults again.
    sys.set_tracing(true);
    kfd.vmem_unmap(r2).unwrap();
    assert_eq!(sys.ioctl_trace(), vec![nr::UNMAP_MEMORY_FROM_GPU, nr::FREE_MEMORY_OF_GPU]);
    kfd.vmem_unmap(r).unwrap();
    kfd.vmem_unmap(r + G64).unwrap();
    kfd.vmem_free(r2).unwrap();
    kfd.vmem_free(r).unwrap();
    sys.set_tracing(true);
    kfd.vmem_release(a).unwrap();
    assert_eq!(closes(&sys), 1);
    assert_eq!(sys.live_mappings(), maps + 1, "only the host allocation is left");
    rt.free(h).unwrap();
    assert_eq!(sys.live_mappings(), maps);
    rt.stream_destroy(s).unwrap();
    assert_eq!(sys.live_mappings(), maps);
}

#[test]
fn a_reservation_honours_a_free_aligned_hint_and_a_requested_alignment() {
    let (_sys, rt) = runtime();
    let kfd = rt.backend();
    let r = kfd.vmem_reserve(4 * G, 0, 0).unwrap();
    kfd.vmem_free(r).unwrap();
    assert_eq!(kfd.vmem_reserve(4 * G, 0, r), Ok(r), "the hint, free again");
    let taken = kfd.vmem_reserve(G, 0, r).unwrap();
    assert!(taken >= r + 4 * G64 || taken + G64 <= r, "a hint inside a reservation is not honoured");
    let big = kfd.vmem_reserve(G, 64 * G, 0).unwrap();
    assert_eq!(big % (64 * G64), 0);
    for x in [r, taken, big] {
        kfd.vmem_free(x).unwrap();
    }
}

#[test]
fn every_misuse_is_refused_and_leaves_the_tables_as_they_were() {
    let (sys, rt) = runtime();
    let kfd = rt.backend();
    let maps = sys.live_mappings();
    // Sizes: a positive multiple of the granularity; a device that exists.
    assert_eq!(kfd.vmem_create(0, 0), Err(Error::InvalidValue));
    assert_eq!(kfd.vmem_create(0, G + 4096), Err(Error::InvalidValue));
    assert_eq!(kfd.vmem_create(7, G), Err(Error::InvalidDevice));
    assert_eq!(kfd.vmem_reserve(0, 0, 0), Err(Error::InvalidValue));
    assert_eq!(kfd.vmem_reserve(G / 2, 0, 0), Err(Error::InvalidValue));
    assert_eq!(kfd.vmem_reserve(G, 3 * G, 0), Err(Error::InvalidValue), "alignment not a power of two");
    assert_eq!(sys.live_mappings(), maps);

    let a = kfd.vmem_create(0, G).unwrap();
    let b = kfd.vmem_create(0, 2 * G).unwrap();
    let r = kfd.vmem_reserve(2 * G, 0, 0).unwrap();
    assert_eq!(kfd.vmem_map(r + 100, a), Err(Error::InvalidValue), "an address inside a page");
    assert_eq!(kfd.vmem_map(r, 12345), Err(Error::InvalidValue), "not a handle");
    assert_eq!(kfd.vmem_map(r + G64, b), Err(Error::InvalidValue), "runs past the reservation");
    assert_eq!(kfd.vmem_map(r - 2 * G64, b), Err(Error::InvalidValue), "starts before it");
    assert_eq!(kfd.vmem_map(0x1000, a), Err(Error::InvalidValue), "outside every reservation");
    kfd.vmem_map(r + G64, a).unwrap();
    assert_eq!(kfd.vmem_map(r + G64, a), Err(Error::InvalidValue), "over a mapped page");
    assert_eq!(kfd.vmem_map(r, b), Err(Error::InvalidValue), "its second half over a mapped page");
    assert_eq!(kfd.vmem_unmap(r), Err(Error::InvalidValue), "nothing mapped there");
    assert_eq!(kfd.vmem_unmap(r + G64 + 4096), Err(Error::InvalidValue), "not where a mapping starts");
    assert_eq!(kfd.vmem_set_access(r, 0, true), Err(Error::InvalidValue), "nothing mapped there");
    assert_eq!(kfd.vmem_set_access(r + G64, 7, true), Err(Error::InvalidDevice));
    assert_eq!(kfd.vmem_free(r), Err(Error::InvalidValue), "a reservation with a live mapping");
    assert_eq!(kfd.vmem_free(r + G64), Err(Error::InvalidValue), "not where a reservation starts");
    assert_eq!(kfd.vmem_release(r), Err(Error::InvalidValue), "a reservation is not a handle");

    kfd.vmem_set_access(r + G64, 0, true).unwrap();
    sys.set_tracing(true);
    kfd.vmem_set_access(r + G64, 0, false).unwrap();
    kfd.vmem_set_access(r + G64, 0, false).unwrap();
    assert_eq!(sys.ioctl_trace(), vec![nr::UNMAP_MEMORY_FROM_GPU], "revoked once");
    sys.set_tracing(true);
    kfd.vmem_unmap(r + G64).unwrap();
    assert_eq!(sys.ioctl_trace(), vec![nr::FREE_MEMORY_OF_GPU], "no access left to revoke");
    assert_eq!(kfd.vmem_unmap(r + G64), Err(Error::InvalidValue), "unmapped once only");
    kfd.vmem_release(a).unwrap();
    assert_eq!(kfd.vmem_release(a), Err(Error::InvalidValue), "released once only");
    kfd.vmem_release(b).unwrap();
    kfd.vmem_free(r).unwrap();
    assert_eq!(kfd.vmem_free(r), Err(Error::InvalidValue), "freed once only");
    assert_eq!(sys.live_mappings(), maps);
}

#[test]
fn a_failing_export_or_import_undoes_its_steps() {
    let (sys, rt) = runtime();
    let kfd = rt.backend();
    let maps = sys.live_mappings();
    sys.emu().fail_ioctl(1, Some(nr::EXPORT_DMABUF), aqueduct_kfd_emu::Errno::ENOMEM);
    sys.set_tracing(true);
    assert!(kfd.vmem_create(0, G).is_err());
    assert_eq!(sys.ioctl_trace(), vec![nr::ALLOC_MEMORY_OF_GPU, nr::EXPORT_DMABUF, nr::FREE_MEMORY_OF_GPU]);
    assert_eq!(sys.live_mappings(), maps);

    let a = kfd.vmem_create(0, G).unwrap();
    let r = kfd.vmem_reserve(G, 0, 0).unwrap();
    sys.emu().fail_ioctl(1, Some(nr::IMPORT_DMABUF), aqueduct_kfd_emu::Errno::EINVAL);
    assert!(kfd.vmem_map(r, a).is_err());
    kfd.vmem_map(r, a).unwrap();
    kfd.vmem_unmap(r).unwrap();
    kfd.vmem_free(r).unwrap();
    kfd.vmem_release(a).unwrap();
    assert_eq!(sys.live_mappings(), maps);
}

#[test]
fn without_access_and_after_unmapping_the_address_is_a_memory_fault() {
    for unmapped in [false, true] {
        let (_sys, rt) = runtime();
        let kfd = rt.backend();
        let s = rt.stream_create(0).unwrap();
        let h = rt.host_malloc(64).unwrap();
        let a = kfd.vmem_create(0, G).unwrap();
        let r = kfd.vmem_reserve(G, 0, 0).unwrap();
        kfd.vmem_map(r, a).unwrap();
        if unmapped {
            kfd.vmem_set_access(r, 0, true).unwrap();
            rt.memcpy_async(s, h, r, 64).unwrap();
            rt.stream_synchronize(s).unwrap();
            kfd.vmem_unmap(r).unwrap();
        }
        rt.memcpy_async(s, h, r + 64, 64).unwrap();
        assert_eq!(rt.stream_synchronize_timeout(s, Timeout::SECOND), Err(Error::IllegalAddress), "{unmapped}");
        assert_eq!(kfd.device_fault(0), Some(DeviceFault::MemoryFault(r + 64)), "{unmapped}");
    }
}

#[test]
fn closing_the_backend_ends_every_mapping_handle_and_reservation() {
    let count_after_close = |use_vmem: bool| {
        let sys = EmuSys::with_defaults().unwrap();
        {
            let kfd = Kfd::open(sys.clone(), KfdConfig::default()).unwrap();
            if use_vmem {
                let a = kfd.vmem_create(0, G).unwrap();
                let b = kfd.vmem_create(0, G).unwrap();
                let r = kfd.vmem_reserve(4 * G, 0, 0).unwrap();
                kfd.vmem_map(r, a).unwrap();
                kfd.vmem_map(r + G64, b).unwrap();
                kfd.vmem_map(r + 2 * G64, a).unwrap();
                kfd.vmem_set_access(r, 0, true).unwrap();
                kfd.vmem_release(b).unwrap();
            }
            sys.set_tracing(true);
        }
        let closes = closes(&sys);
        let frees = sys.ioctl_trace().iter().filter(|&&n| n == nr::FREE_MEMORY_OF_GPU).count();
        (sys.live_mappings(), closes, frees)
    };
    let (maps, closes_plain, frees_plain) = count_after_close(false);
    let (maps_vmem, closes_vmem, frees_vmem) = count_after_close(true);
    assert_eq!(maps_vmem, maps, "no reservation is left");
    assert_eq!(closes_vmem, closes_plain + 1, "the live handle's dma-buf is closed");
    assert_eq!(frees_vmem, frees_plain + 4, "three imports and the live handle's buffer");
}

#[test]
fn access_is_granted_and_revoked_per_device() {
    use aqueduct_kfd_emu::{EmuConfig, GpuProfile};
    let sys = EmuSys::new(EmuConfig::with_gpus(&[GpuProfile::Gfx90a, GpuProfile::Gfx90a])).unwrap();
    let rt: Runtime<_, _> = Runtime::new(Kfd::open(sys.clone(), KfdConfig::default()).unwrap(), SingleThread);
    let kfd = rt.backend();
    let s0 = rt.stream_create(0).unwrap();
    rt.set_device(1).unwrap();
    let s1 = rt.stream_create(0).unwrap();
    let h = rt.host_malloc(64).unwrap();
    let a = kfd.vmem_create(0, G).unwrap();
    let r = kfd.vmem_reserve(G, 0, 0).unwrap();
    kfd.vmem_map(r, a).unwrap();
    kfd.vmem_set_access(r, 0, true).unwrap();
    kfd.vmem_set_access(r, 1, true).unwrap();
    // Device 0 writes, device 1 reads the same memory.
    rt.memset_async(s0, r, 0x77, 1, 64).unwrap();
    rt.stream_synchronize(s0).unwrap();
    rt.memcpy_async(s1, h, r, 64).unwrap();
    rt.stream_synchronize(s1).unwrap();
    assert_eq!(host(h, 64), &[0x77; 64]);

    // Revoking device 0 leaves device 1's mapping; unmapping ends that one.
    sys.set_tracing(true);
    kfd.vmem_set_access(r, 0, false).unwrap();
    assert_eq!(sys.ioctl_trace(), vec![nr::UNMAP_MEMORY_FROM_GPU]);
    rt.memcpy_async(s1, h, r, 64).unwrap();
    rt.stream_synchronize(s1).unwrap();
    sys.set_tracing(true);
    kfd.vmem_unmap(r).unwrap();
    assert_eq!(sys.ioctl_trace(), vec![nr::UNMAP_MEMORY_FROM_GPU, nr::FREE_MEMORY_OF_GPU]);
    assert_eq!(kfd.vmem_set_access(r, 1, true), Err(Error::InvalidValue), "unmapped");

    // Device 0 without access faults; device 1 keeps working.
    kfd.vmem_map(r, a).unwrap();
    kfd.vmem_set_access(r, 1, true).unwrap();
    rt.memcpy_async(s0, h, r, 64).unwrap();
    assert_eq!(rt.stream_synchronize_timeout(s0, Timeout::SECOND), Err(Error::IllegalAddress));
    assert_eq!(kfd.device_fault(0), Some(DeviceFault::MemoryFault(r)));
    rt.memcpy_async(s1, h, r, 64).unwrap();
    rt.stream_synchronize(s1).unwrap();
    assert_eq!(kfd.device_fault(1), None);
}
