//! The driver model: every ioctl validation rule and errno (docs/kfd-aql.md §1, §1.5, §2, §9).

mod common;

use aqueduct_kfd_emu::abi::*;
use aqueduct_kfd_emu::{Emu, EmuConfig, Errno, GpuProfile};
use common::*;

#[test]
fn get_version_defaults_to_1_17_and_is_configurable() {
    let h = Harness::new();
    let mut v = GetVersionArgs::default();
    ioctl(&h.emu, h.kfd, request::GET_VERSION, &mut v).unwrap();
    assert_eq!((v.major_version, v.minor_version), (1, 17));
    let h = Harness::with(EmuConfig::default().version(1, 11));
    ioctl(&h.emu, h.kfd, request::GET_VERSION, &mut v).unwrap();
    assert_eq!((v.major_version, v.minor_version), (1, 11));
}

#[test]
fn dispatch_by_nr_bad_fds_and_bad_pointers() {
    let h = Harness::new();
    let mut v = GetVersionArgs::default();
    // Unknown nr.
    expect_err(ioctl(&h.emu, h.kfd, ioc(3, 0x7f, 8), &mut v), Errno::EINVAL);
    // Not a kfd fd / not an fd.
    expect_err(ioctl(&h.emu, h.render[0], request::GET_VERSION, &mut v), Errno::ENOTTY);
    expect_err(ioctl(&h.emu, 12345, request::GET_VERSION, &mut v), Errno::EBADF);
    // Null argument pointer: copy_to_user fails.
    // SAFETY: a null pointer is rejected before any access.
    let r = unsafe { h.emu.ioctl(h.kfd, request::GET_VERSION, std::ptr::null_mut()) };
    assert_eq!(r, Err(Errno::EFAULT));
    // Matching on nr only: a larger user size works, the kernel fills its part.
    let mut big = [0u32; 4];
    ioctl(&h.emu, h.kfd, ioc(2, 1, 16), &mut big).unwrap();
    assert_eq!(&big[..2], &[1, 17]);
    // Closed fd.
    h.emu.close(h.render[0]).unwrap();
    expect_err(ioctl(&h.emu, h.render[0], request::GET_VERSION, &mut v), Errno::EBADF);
    assert_eq!(h.emu.open("/dev/dri/renderD200", 0), Err(Errno::ENOENT));
    assert_eq!(h.emu.open("/dev/nope", 0), Err(Errno::ENOENT));
}

#[test]
fn forked_child_gets_ebadf_and_may_reopen() {
    let h = Harness::new();
    let child = h.emu.fork_child();
    let mut v = GetVersionArgs::default();
    expect_err(ioctl(&child, h.kfd, request::GET_VERSION, &mut v), Errno::EBADF);
    // The child's own kfd fd works, but it has no VM: allocations fail until it acquires one.
    let fd = child.open("/dev/kfd", 0).unwrap();
    ioctl(&child, fd, request::GET_VERSION, &mut v).unwrap();
    let mut a = AllocMemoryOfGpuArgs {
        va_addr: reserve_va(4096),
        size: 4096,
        gpu_id: h.gpu(),
        flags: GTT,
        ..Default::default()
    };
    expect_err(ioctl(&child, fd, request::ALLOC_MEMORY_OF_GPU, &mut a), Errno::ENODEV);
}

#[test]
fn real_fork_child_gets_ebadf() {
    let h = Harness::new();
    // SAFETY: the child only calls the emulator's pid check (no locks taken first) and _exit.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let mut v = GetVersionArgs::default();
        let r = ioctl(&h.emu, h.kfd, request::GET_VERSION, &mut v);
        // SAFETY: terminating the forked child without running destructors.
        unsafe { libc::_exit(if r == Err(Errno::EBADF) { 0 } else { 1 }) };
    }
    assert!(pid > 0);
    let mut status = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "child saw no EBADF");
}

#[test]
fn process_apertures() {
    let h = Harness::with(EmuConfig::with_gpus(&[GpuProfile::Gfx90a, GpuProfile::Gfx1100]));
    let mut a = GetProcessAperturesNewArgs::default();
    ioctl(&h.emu, h.kfd, request::GET_PROCESS_APERTURES_NEW, &mut a).unwrap();
    assert_eq!(a.num_of_nodes, 2);
    let mut out = [ProcessDeviceApertures::default(); 4];
    a.kfd_process_device_apertures_ptr = out.as_mut_ptr() as u64;
    a.num_of_nodes = 4;
    ioctl(&h.emu, h.kfd, request::GET_PROCESS_APERTURES_NEW, &mut a).unwrap();
    assert_eq!(a.num_of_nodes, 2);
    assert_eq!(out[0].gpu_id, h.gpu_ids[0]);
    assert_eq!(out[1].gpu_id, h.gpu_ids[1]);
    assert_eq!(out[0].lds_base, 1 << 48);
    assert_eq!(out[0].scratch_base, 2 << 48);
    assert!(out[0].gpuvm_base > 0 && out[0].gpuvm_limit == (1 << 47) - 1);
    a.kfd_process_device_apertures_ptr = 0;
    expect_err(ioctl(&h.emu, h.kfd, request::GET_PROCESS_APERTURES_NEW, &mut a), Errno::EFAULT);
}

#[test]
fn acquire_vm_rules() {
    let emu = Emu::new(EmuConfig::with_gpus(&[GpuProfile::Gfx90a, GpuProfile::Gfx942])).unwrap();
    let kfd = emu.open("/dev/kfd", 0).unwrap();
    let g = emu.gpus().to_vec();
    let r0 = emu.open(&format!("/dev/dri/renderD{}", g[0].drm_render_minor), 0).unwrap();
    let r0b = emu.open(&format!("/dev/dri/renderD{}", g[0].drm_render_minor), 0).unwrap();
    let r1 = emu.open(&format!("/dev/dri/renderD{}", g[1].drm_render_minor), 0).unwrap();
    let mut a = AcquireVmArgs { drm_fd: r1 as u32, gpu_id: g[0].gpu_id };
    expect_err(ioctl(&emu, kfd, request::ACQUIRE_VM, &mut a), Errno::EINVAL);
    a = AcquireVmArgs { drm_fd: 9999, gpu_id: g[0].gpu_id };
    expect_err(ioctl(&emu, kfd, request::ACQUIRE_VM, &mut a), Errno::EINVAL);
    a = AcquireVmArgs { drm_fd: r0 as u32, gpu_id: 0xbad };
    expect_err(ioctl(&emu, kfd, request::ACQUIRE_VM, &mut a), Errno::EINVAL);
    a = AcquireVmArgs { drm_fd: r0 as u32, gpu_id: g[0].gpu_id };
    ioctl(&emu, kfd, request::ACQUIRE_VM, &mut a).unwrap();
    ioctl(&emu, kfd, request::ACQUIRE_VM, &mut a).unwrap();
    a.drm_fd = r0b as u32;
    expect_err(ioctl(&emu, kfd, request::ACQUIRE_VM, &mut a), Errno::EBUSY);
}

#[test]
fn alloc_memory_rules_handles_and_offsets() {
    let h = Harness::new();
    let gpu = h.gpu();
    let va = reserve_va(1 << 20);
    let mut a = AllocMemoryOfGpuArgs { va_addr: va, size: 0, gpu_id: gpu, flags: GTT, ..Default::default() };
    expect_err(ioctl(&h.emu, h.kfd, request::ALLOC_MEMORY_OF_GPU, &mut a), Errno::EINVAL);
    a.size = 8192;
    a.gpu_id = 0xbad;
    expect_err(ioctl(&h.emu, h.kfd, request::ALLOC_MEMORY_OF_GPU, &mut a), Errno::EINVAL);
    a.gpu_id = gpu;
    a.flags = mem_flags::WRITABLE; // no memory type
    expect_err(ioctl(&h.emu, h.kfd, request::ALLOC_MEMORY_OF_GPU, &mut a), Errno::EINVAL);
    a.flags = GTT;
    a.va_addr = va + 12; // unaligned
    expect_err(ioctl(&h.emu, h.kfd, request::ALLOC_MEMORY_OF_GPU, &mut a), Errno::EINVAL);
    a.va_addr = 0x1000; // below the GPUVM aperture
    expect_err(ioctl(&h.emu, h.kfd, request::ALLOC_MEMORY_OF_GPU, &mut a), Errno::EINVAL);
    a.va_addr = va;
    ioctl(&h.emu, h.kfd, request::ALLOC_MEMORY_OF_GPU, &mut a).unwrap();
    assert_eq!(a.handle >> 32, u64::from(gpu));
    assert!(a.mmap_offset >= aqueduct_kfd_emu::DRM_MMAP_BASE);
    let first = a.handle;
    // Overlapping VA.
    a.va_addr = va + 4096;
    expect_err(ioctl(&h.emu, h.kfd, request::ALLOC_MEMORY_OF_GPU, &mut a), Errno::EINVAL);
    a.va_addr = va + 8192;
    ioctl(&h.emu, h.kfd, request::ALLOC_MEMORY_OF_GPU, &mut a).unwrap();
    assert_eq!(a.handle, first + 1);
    // DOORBELL must be the 8 KiB slice; MMIO_REMAP one page, mmap'd from the kfd fd.
    let mut d = AllocMemoryOfGpuArgs {
        va_addr: va + 65536,
        size: 4096,
        gpu_id: gpu,
        flags: mem_flags::DOORBELL,
        ..Default::default()
    };
    expect_err(ioctl(&h.emu, h.kfd, request::ALLOC_MEMORY_OF_GPU, &mut d), Errno::EINVAL);
    d.size = 8192;
    ioctl(&h.emu, h.kfd, request::ALLOC_MEMORY_OF_GPU, &mut d).unwrap();
    let mut m = AllocMemoryOfGpuArgs {
        va_addr: va + 131072,
        size: 8192,
        gpu_id: gpu,
        flags: mem_flags::MMIO_REMAP,
        ..Default::default()
    };
    expect_err(ioctl(&h.emu, h.kfd, request::ALLOC_MEMORY_OF_GPU, &mut m), Errno::EINVAL);
    m.size = 4096;
    ioctl(&h.emu, h.kfd, request::ALLOC_MEMORY_OF_GPU, &mut m).unwrap();
    assert_eq!(m.mmap_offset, mmap_offset::TYPE_MMIO | mmap_offset::gpu_id(gpu));
    // SAFETY: a fresh mapping of the MMIO page.
    let p = unsafe {
        h.emu.mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            h.kfd,
            m.mmap_offset,
        )
    };
    assert!(p.is_ok());
    // SAFETY: wrong size for the MMIO page.
    let p = unsafe { h.emu.mmap(std::ptr::null_mut(), 8192, libc::PROT_READ, libc::MAP_SHARED, h.kfd, m.mmap_offset) };
    assert_eq!(p, Err(Errno::EINVAL));
    // USERPTR: page-aligned user memory, CPU address in mmap_offset.
    let mut user = vec![0u8; 3 * 4096];
    let addr = (user.as_mut_ptr() as u64).next_multiple_of(4096);
    let mut u = AllocMemoryOfGpuArgs {
        va_addr: addr,
        size: 4096,
        gpu_id: gpu,
        flags: mem_flags::USERPTR,
        mmap_offset: addr,
        ..Default::default()
    };
    ioctl(&h.emu, h.kfd, request::ALLOC_MEMORY_OF_GPU, &mut u).unwrap();
    u.mmap_offset = addr + 1;
    expect_err(ioctl(&h.emu, h.kfd, request::ALLOC_MEMORY_OF_GPU, &mut u), Errno::EFAULT);
    // amdkfd faults the pages in for writing: a hole or an inaccessible page is EFAULT, a
    // read-only page EPERM (docs/kfd-aql.md §1.4).
    // SAFETY: a fresh private mapping of two pages, its second unmapped and its first made
    // read-only; nothing else uses them, and both are unmapped below. It lies far below where
    // the kernel places mappings of its own choice, so no other test's thread maps a page into
    // the hole meanwhile (FIXED_NOREPLACE: nothing mapped there is replaced).
    let pages = unsafe {
        let p = (0x10..0x50u64)
            .map(|k| {
                let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE;
                libc::mmap(
                    (k << 32) as usize as *mut libc::c_void,
                    2 * 4096,
                    libc::PROT_READ | libc::PROT_WRITE,
                    flags,
                    -1,
                    0,
                )
            })
            .find(|&p| p != libc::MAP_FAILED)
            .expect("a free range below 0x50_0000_0000");
        assert_eq!(libc::munmap(p.cast::<u8>().add(4096).cast(), 4096), 0);
        p as u64
    };
    u.va_addr = reserve_va(4096);
    u.mmap_offset = pages + 4096;
    expect_err(ioctl(&h.emu, h.kfd, request::ALLOC_MEMORY_OF_GPU, &mut u), Errno::EFAULT);
    // SAFETY: the mapping above.
    assert_eq!(unsafe { libc::mprotect(pages as usize as *mut libc::c_void, 4096, libc::PROT_NONE) }, 0);
    u.mmap_offset = pages;
    expect_err(ioctl(&h.emu, h.kfd, request::ALLOC_MEMORY_OF_GPU, &mut u), Errno::EFAULT);
    // SAFETY: as above.
    assert_eq!(unsafe { libc::mprotect(pages as usize as *mut libc::c_void, 4096, libc::PROT_READ) }, 0);
    expect_err(ioctl(&h.emu, h.kfd, request::ALLOC_MEMORY_OF_GPU, &mut u), Errno::EPERM);
    // SAFETY: as above.
    unsafe { libc::munmap(pages as usize as *mut libc::c_void, 4096) };
    // VRAM|PUBLIC on a small-BAR machine.
    let small = Harness::with(EmuConfig { large_bar: false, ..Default::default() });
    let mut v = AllocMemoryOfGpuArgs {
        va_addr: reserve_va(4096),
        size: 4096,
        gpu_id: small.gpu(),
        flags: VRAM | mem_flags::PUBLIC,
        ..Default::default()
    };
    expect_err(ioctl(&small.emu, small.kfd, request::ALLOC_MEMORY_OF_GPU, &mut v), Errno::EINVAL);
}

#[test]
fn free_and_map_rules() {
    let h = Harness::new();
    let gpu = h.gpu();
    let b = h.alloc_raw(gpu, 4096, GTT).unwrap();
    // Map argument checks.
    let mut m =
        MapMemoryArgs { handle: b.handle, device_ids_array_ptr: [gpu].as_ptr() as u64, n_devices: 0, n_success: 0 };
    expect_err(ioctl(&h.emu, h.kfd, request::MAP_MEMORY_TO_GPU, &mut m), Errno::EINVAL);
    m.n_devices = 1;
    m.n_success = 2;
    expect_err(ioctl(&h.emu, h.kfd, request::MAP_MEMORY_TO_GPU, &mut m), Errno::EINVAL);
    m.n_success = 0;
    m.device_ids_array_ptr = 0;
    expect_err(ioctl(&h.emu, h.kfd, request::MAP_MEMORY_TO_GPU, &mut m), Errno::EFAULT);
    let ids = [gpu, 0xbad];
    m.device_ids_array_ptr = ids.as_ptr() as u64;
    m.n_devices = 2;
    expect_err(ioctl(&h.emu, h.kfd, request::MAP_MEMORY_TO_GPU, &mut m), Errno::EINVAL);
    assert_eq!(m.n_success, 1, "the first device was mapped");
    m.handle = b.handle + 77;
    m.n_success = 0;
    expect_err(ioctl(&h.emu, h.kfd, request::MAP_MEMORY_TO_GPU, &mut m), Errno::EINVAL);
    // Free: mapped → EBUSY; unmapped → ok; twice → EINVAL.
    expect_err(h.free(&b), Errno::EBUSY);
    h.unmap_gpu(&b, &[gpu]).unwrap();
    expect_err(h.unmap_gpu(&b, &[gpu]), Errno::EINVAL);
    h.free(&b).unwrap();
    expect_err(h.free(&b), Errno::EINVAL);
    // The event page cannot be freed.
    let page = h.event_page();
    h.create_event(event_type::SIGNAL, false, Some(&page)).unwrap();
    h.unmap_gpu(&page, &[gpu]).unwrap();
    expect_err(h.free(&page), Errno::EPERM);
}

#[test]
fn cpu_mapping_is_shared_with_the_device_view() {
    let h = Harness::new();
    let b = h.alloc(8192, GTT);
    // SAFETY: the buffer is CPU-mapped at its VA.
    unsafe { *b.ptr::<u64>() = 42 };
    // A second CPU mapping of the same BO (no MAP_FIXED) sees the same bytes.
    // SAFETY: a fresh mapping of the BO.
    let p = unsafe {
        h.emu.mmap(std::ptr::null_mut(), 8192, libc::PROT_READ, libc::MAP_SHARED, h.render[0], b.mmap_offset)
    }
    .unwrap();
    // SAFETY: mapped just above.
    assert_eq!(unsafe { *(p as *const u64) }, 42);
    // A render offset that names no BO, or a too-long mapping.
    // SAFETY: rejected before mapping.
    let r =
        unsafe { h.emu.mmap(std::ptr::null_mut(), 4096, libc::PROT_READ, libc::MAP_SHARED, h.render[0], 0x1234_0000) };
    assert_eq!(r, Err(Errno::EINVAL));
    // SAFETY: rejected before mapping.
    let r = unsafe {
        h.emu.mmap(std::ptr::null_mut(), 1 << 20, libc::PROT_READ, libc::MAP_SHARED, h.render[0], b.mmap_offset)
    };
    assert_eq!(r, Err(Errno::EINVAL));
    // SAFETY: unmapping our own mapping.
    unsafe { h.emu.munmap(p, 8192) }.unwrap();
}

fn create(h: &Harness, a: &mut CreateQueueArgs) -> Result<i32, Errno> {
    ioctl(&h.emu, h.kfd, request::CREATE_QUEUE, a)
}

#[test]
fn create_queue_argument_validation() {
    let h = Harness::new();
    let (good, _bufs) = h.queue_args(0, &QueueSpec::default());
    type Edit = Box<dyn Fn(&mut CreateQueueArgs)>;
    let cases: Vec<(&str, Edit, Errno)> = vec![
        ("percentage > 100", Box::new(|a| a.queue_percentage = 101), Errno::EINVAL),
        ("priority > 15", Box::new(|a| a.queue_priority = 16), Errno::EINVAL),
        ("ring size not a power of two", Box::new(|a| a.ring_size = 3000), Errno::EINVAL),
        ("ring beyond user space", Box::new(|a| a.ring_base_address = 1 << 48), Errno::EFAULT),
        ("rptr beyond user space", Box::new(|a| a.read_pointer_address = u64::MAX - 2), Errno::EFAULT),
        ("unknown queue type", Box::new(|a| a.queue_type = 9), Errno::ENOTSUPP),
        ("PM4 queue (not emulated)", Box::new(|a| a.queue_type = queue_type::COMPUTE), Errno::ENOTSUPP),
        ("unknown gpu", Box::new(|a| a.gpu_id = 0xbad), Errno::EINVAL),
        ("ring size differs from the BO", Box::new(|a| a.ring_size /= 2), Errno::EINVAL),
        ("ring not at the BO start", Box::new(|a| a.ring_base_address += 4096), Errno::EINVAL),
        ("rptr not amd_queue+128", Box::new(|a| a.read_pointer_address += 8), Errno::EINVAL),
        ("wptr not amd_queue+56", Box::new(|a| a.write_pointer_address -= 8), Errno::EINVAL),
        ("null rptr", Box::new(|a| a.read_pointer_address = 0), Errno::EINVAL),
        ("EOP size", Box::new(|a| a.eop_buffer_size = 8192), Errno::EINVAL),
        ("ctl stack size", Box::new(|a| a.ctl_stack_size += 4096), Errno::EINVAL),
        ("CWSR too small", Box::new(|a| a.ctx_save_restore_size -= 4096), Errno::EINVAL),
        ("CWSR BO size differs", Box::new(|a| a.ctx_save_restore_size += 4096), Errno::EINVAL),
    ];
    for (what, f, errno) in cases {
        let mut a = good;
        f(&mut a);
        assert_eq!(create(&h, &mut a), Err(errno), "{what}");
    }
    // The untouched arguments work; a 1.16 caller's 88-byte struct works too.
    let mut a = good;
    create(&h, &mut a).unwrap();
    assert_eq!(a.queue_id, 0);
    let db = a.doorbell_offset;
    assert_eq!(db & mmap_offset::TYPE_MASK, mmap_offset::TYPE_DOORBELL);
    assert_eq!(mmap_offset::get_gpu_id(db), h.gpu());
    let (mut b, _bufs2) = h.queue_args(0, &QueueSpec::default());
    ioctl(&h.emu, h.kfd, request::CREATE_QUEUE_88, &mut b).unwrap();
    assert_eq!(b.queue_id, 1);
    assert_eq!(b.doorbell_offset, db + 8, "second queue's doorbell is the next 8-byte slot");
}

#[test]
fn queue_buffers_must_be_gpu_mapped_and_are_pinned() {
    let h = Harness::new();
    let gpu = h.gpu();
    let (mut a, [amd_queue, ring, eop, cwsr]) = h.queue_args(0, &QueueSpec::default());
    h.unmap_gpu(&ring, &[gpu]).unwrap();
    assert_eq!(create(&h, &mut a), Err(Errno::EINVAL));
    h.map_gpu(&ring, &[gpu]).unwrap();
    create(&h, &mut a).unwrap();
    let q = a.queue_id;
    for b in [&amd_queue, &ring, &eop, &cwsr] {
        assert_eq!(h.unmap_gpu(b, &[gpu]), Err(Errno::EBUSY));
    }
    let mut d = DestroyQueueArgs { queue_id: q, pad: 0 };
    ioctl(&h.emu, h.kfd, request::DESTROY_QUEUE, &mut d).unwrap();
    assert_eq!(ioctl(&h.emu, h.kfd, request::DESTROY_QUEUE, &mut d), Err(Errno::EINVAL));
    for b in [&amd_queue, &ring, &eop, &cwsr] {
        h.unmap_gpu(b, &[gpu]).unwrap();
        h.free(b).unwrap();
    }
}

#[test]
fn create_queue_without_vm_is_esrch_and_eop_is_optional() {
    let h = Harness::new();
    let (mut a, _b) = h.queue_args(0, &QueueSpec::default());
    a.eop_buffer_address = 0;
    a.eop_buffer_size = 0;
    create(&h, &mut a).unwrap();
    let child = h.emu.fork_child();
    let fd = child.open("/dev/kfd", 0).unwrap();
    let mut a2 = a;
    assert_eq!(ioctl(&child, fd, request::CREATE_QUEUE, &mut a2), Err(Errno::ESRCH));
}

#[test]
fn update_queue_and_cu_mask_rules() {
    let h = Harness::new();
    let q = h.create_queue();
    let base = UpdateQueueArgs {
        ring_base_address: q.ring_buf.va,
        queue_id: q.id,
        ring_size: q.args.ring_size,
        queue_percentage: 100,
        queue_priority: 7,
    };
    let up = |a: &mut UpdateQueueArgs| ioctl(&h.emu, h.kfd, request::UPDATE_QUEUE, a);
    let mut a = base;
    a.queue_percentage = 101;
    assert_eq!(up(&mut a), Err(Errno::EINVAL));
    a = base;
    a.queue_priority = 16;
    assert_eq!(up(&mut a), Err(Errno::EINVAL));
    a = base;
    a.ring_size = 1000;
    assert_eq!(up(&mut a), Err(Errno::EINVAL));
    a = base;
    a.queue_id = 99;
    assert_eq!(up(&mut a), Err(Errno::EFAULT));
    a = base;
    a.ring_base_address += 4096;
    assert_eq!(up(&mut a), Err(Errno::EINVAL), "a new ring must be an exact GPU-mapped BO");
    a = base;
    a.queue_priority = 11;
    up(&mut a).unwrap();

    let mask = [0xffff_ffffu32; 4];
    let mut c = SetCuMaskArgs { queue_id: q.id, num_cu_mask: 0, cu_mask_ptr: mask.as_ptr() as u64 };
    let set = |c: &mut SetCuMaskArgs| ioctl(&h.emu, h.kfd, request::SET_CU_MASK, c);
    assert_eq!(set(&mut c), Err(Errno::EINVAL));
    c.num_cu_mask = 33;
    assert_eq!(set(&mut c), Err(Errno::EINVAL));
    c.num_cu_mask = 128;
    c.queue_id = 42;
    assert_eq!(set(&mut c), Err(Errno::EFAULT));
    c.queue_id = q.id;
    c.cu_mask_ptr = 0;
    assert_eq!(set(&mut c), Err(Errno::EFAULT));
    c.cu_mask_ptr = mask.as_ptr() as u64;
    set(&mut c).unwrap();
    // More than 1024 bits is truncated, not an error.
    let big = vec![u32::MAX; 64];
    c.num_cu_mask = 2048;
    c.cu_mask_ptr = big.as_ptr() as u64;
    set(&mut c).unwrap();
}

#[test]
fn doorbell_mmap_rules() {
    let h = Harness::new();
    let q = h.create_queue();
    let off = q.args.doorbell_offset & !8191;
    // SAFETY: rejected before mapping (size must be the 8 KiB slice).
    let r = unsafe { h.emu.mmap(std::ptr::null_mut(), 4096, libc::PROT_WRITE, libc::MAP_SHARED, h.kfd, off) };
    assert_eq!(r, Err(Errno::EINVAL));
    // SAFETY: rejected before mapping (unknown gpu in the offset).
    let r = unsafe {
        h.emu.mmap(
            std::ptr::null_mut(),
            8192,
            libc::PROT_WRITE,
            libc::MAP_SHARED,
            h.kfd,
            mmap_offset::TYPE_DOORBELL | mmap_offset::gpu_id(0xbad),
        )
    };
    assert_eq!(r, Err(Errno::EINVAL));
}

#[test]
fn clock_counters() {
    let h = Harness::new();
    let mut a = GetClockCountersArgs { gpu_id: h.gpu(), ..Default::default() };
    ioctl(&h.emu, h.kfd, request::GET_CLOCK_COUNTERS, &mut a).unwrap();
    let first = a;
    std::thread::sleep(std::time::Duration::from_millis(2));
    ioctl(&h.emu, h.kfd, request::GET_CLOCK_COUNTERS, &mut a).unwrap();
    assert!(a.gpu_clock_counter > first.gpu_clock_counter);
    assert!(a.cpu_clock_counter > first.cpu_clock_counter);
    assert_eq!(a.system_clock_freq, 1_000_000_000);
    let gpu_ns = (a.gpu_clock_counter - first.gpu_clock_counter) * 1_000_000_000 / aqueduct_kfd_emu::GPU_CLOCK_HZ;
    assert!(gpu_ns >= 1_000_000, "GPU clock runs at 100 MHz: {gpu_ns} ns");
    a.gpu_id = 0xbad;
    ioctl(&h.emu, h.kfd, request::GET_CLOCK_COUNTERS, &mut a).unwrap();
    assert_eq!(a.gpu_clock_counter, 0);
}

#[test]
fn dmabuf_export_import_rules_and_aliasing() {
    let h = Harness::new();
    let gpu = h.gpu();
    let size = 2 << 20;
    let b = h.alloc_raw(gpu, size, VRAM).unwrap();
    let mut e = ExportDmabufArgs { handle: b.handle + 99, flags: libc::O_CLOEXEC as u32, dmabuf_fd: 0 };
    expect_err(ioctl(&h.emu, h.kfd, request::EXPORT_DMABUF, &mut e), Errno::EINVAL);
    e.handle = 0xbad << 32;
    expect_err(ioctl(&h.emu, h.kfd, request::EXPORT_DMABUF, &mut e), Errno::EINVAL);
    // A USERPTR buffer is refused as amdgpu_gem_prime_export refuses it.
    let mut host = vec![0u8; 3 * 4096];
    let page = (host.as_mut_ptr() as u64).next_multiple_of(4096);
    let mut u = AllocMemoryOfGpuArgs {
        va_addr: reserve_va(4096),
        size: 4096,
        gpu_id: gpu,
        flags: mem_flags::USERPTR | mem_flags::WRITABLE,
        mmap_offset: page,
        ..Default::default()
    };
    ioctl(&h.emu, h.kfd, request::ALLOC_MEMORY_OF_GPU, &mut u).unwrap();
    e.handle = u.handle;
    expect_err(ioctl(&h.emu, h.kfd, request::EXPORT_DMABUF, &mut e), Errno::EPERM);
    e.handle = b.handle;
    ioctl(&h.emu, h.kfd, request::EXPORT_DMABUF, &mut e).unwrap();
    let fd = e.dmabuf_fd;
    let mut info = GetDmabufInfoArgs { dmabuf_fd: fd, ..Default::default() };
    ioctl(&h.emu, h.kfd, request::GET_DMABUF_INFO, &mut info).unwrap();
    assert_eq!((info.size, info.gpu_id, info.flags, info.metadata_size), (size, gpu, VRAM, 0));
    info.dmabuf_fd = h.render[0] as u32;
    expect_err(ioctl(&h.emu, h.kfd, request::GET_DMABUF_INFO, &mut info), Errno::EINVAL);
    // A dma-buf fd takes no kfd ioctl.
    let mut v = GetVersionArgs::default();
    expect_err(ioctl(&h.emu, fd as i32, request::GET_VERSION, &mut v), Errno::ENOTTY);

    // Import: device, fd, VA.
    let va = reserve_va(2 * size);
    let mut i = ImportDmabufArgs { va_addr: va, handle: 0, gpu_id: 0xbad, dmabuf_fd: fd };
    expect_err(ioctl(&h.emu, h.kfd, request::IMPORT_DMABUF, &mut i), Errno::EINVAL);
    i.gpu_id = gpu;
    i.dmabuf_fd = 9999;
    expect_err(ioctl(&h.emu, h.kfd, request::IMPORT_DMABUF, &mut i), Errno::EBADF);
    i.dmabuf_fd = h.kfd as u32;
    expect_err(ioctl(&h.emu, h.kfd, request::IMPORT_DMABUF, &mut i), Errno::EINVAL);
    i.dmabuf_fd = fd;
    i.va_addr = va + 1;
    expect_err(ioctl(&h.emu, h.kfd, request::IMPORT_DMABUF, &mut i), Errno::EINVAL);
    i.va_addr = b.va;
    expect_err(ioctl(&h.emu, h.kfd, request::IMPORT_DMABUF, &mut i), Errno::EINVAL);
    // A process without a VM on the device.
    let child = h.emu.fork_child();
    let ckfd = child.open("/dev/kfd", 0).unwrap();
    i.va_addr = va;
    expect_err(ioctl(&child, ckfd, request::IMPORT_DMABUF, &mut i), Errno::EBADF);

    // Two imports at two VAs: one set of pages.
    ioctl(&h.emu, h.kfd, request::IMPORT_DMABUF, &mut i).unwrap();
    let first = Buffer { va, size, handle: i.handle, mmap_offset: 0 };
    i.va_addr = va + size;
    ioctl(&h.emu, h.kfd, request::IMPORT_DMABUF, &mut i).unwrap();
    let second = Buffer { va: va + size, size, handle: i.handle, mmap_offset: 0 };
    assert_ne!(first.handle, second.handle);
    h.map_gpu(&first, &[gpu]).unwrap();
    h.map_gpu(&second, &[gpu]).unwrap();
    // The exporter and its fd go; the imports keep the pages.
    h.free(&b).unwrap();
    h.emu.close(fd as i32).unwrap();
    // (An import through the closed fd's number is not tried: the number is free for the next
    // fd any thread of the test process opens. A number nobody opened is EBADF, above.)
    // The dma-buf's pages, seen through a CPU mapping of each import's GEM offset.
    let mut m = ExportDmabufArgs { handle: first.handle, ..Default::default() };
    ioctl(&h.emu, h.kfd, request::EXPORT_DMABUF, &mut m).unwrap();
    // SAFETY: fresh mappings of the dma-buf's pages, unmapped below.
    let (p, q) = unsafe {
        let rw = libc::PROT_READ | libc::PROT_WRITE;
        let p = h.emu.mmap(std::ptr::null_mut(), size as usize, rw, libc::MAP_SHARED, m.dmabuf_fd as i32, 0).unwrap();
        let q = h.emu.mmap(std::ptr::null_mut(), 4096, rw, libc::MAP_SHARED, m.dmabuf_fd as i32, 0).unwrap();
        (p.cast::<u64>(), q.cast::<u64>())
    };
    // SAFETY: two live mappings of the same pages.
    unsafe {
        p.add(1).write_volatile(0x1234_5678);
        assert_eq!(q.add(1).read_volatile(), 0x1234_5678);
    }
    // SAFETY: rejected before mapping: an offset, or more than the dma-buf.
    let r =
        unsafe { h.emu.mmap(std::ptr::null_mut(), 4096, libc::PROT_READ, libc::MAP_SHARED, m.dmabuf_fd as i32, 4096) };
    assert_eq!(r, Err(Errno::EINVAL));
    // SAFETY: the mappings above.
    unsafe {
        h.emu.munmap(p.cast(), size as usize).unwrap();
        h.emu.munmap(q.cast(), 4096).unwrap();
    }
    h.emu.close(m.dmabuf_fd as i32).unwrap();
    expect_err(h.emu.close(m.dmabuf_fd as i32).map(|()| 0), Errno::EBADF);
    for b in [first, second] {
        expect_err(h.free(&b), Errno::EBUSY);
        h.unmap_gpu(&b, &[gpu]).unwrap();
        h.free(&b).unwrap();
    }
}

/// A dma-buf is a real fd that another machine (another process's emulated GPU) imports:
/// GET_DMABUF_INFO and IMPORT_DMABUF read its descriptor through the fd; the importer refuses
/// to export the import again; the pages stay while the importer holds them and are gone once
/// nobody does. (That both machines' devices see the same bytes is kfd-direct/tests/ipc.rs.)
#[test]
fn dmabuf_fds_are_real_and_import_into_another_machine() {
    let (a, b) = (Harness::new(), Harness::new());
    let (ga, gb) = (a.gpu(), b.gpu());
    let size = 2 << 20;
    let buf = a.alloc(size, VRAM);
    let mut e = ExportDmabufArgs { handle: buf.handle, flags: libc::O_CLOEXEC as u32, dmabuf_fd: 0 };
    ioctl(&a.emu, a.kfd, request::EXPORT_DMABUF, &mut e).unwrap();
    let fd = e.dmabuf_fd as i32;
    assert!(fd < aqueduct_kfd_emu::FIRST_FD, "a real fd number");
    // SAFETY: fcntl of an fd number.
    assert!(unsafe { libc::fcntl(fd, libc::F_GETFD) } & libc::FD_CLOEXEC != 0, "O_CLOEXEC as asked");

    // The other machine answers for it through the fd alone.
    let mut info = GetDmabufInfoArgs { dmabuf_fd: fd as u32, ..Default::default() };
    ioctl(&b.emu, b.kfd, request::GET_DMABUF_INFO, &mut info).unwrap();
    assert_eq!((info.size, info.gpu_id, info.flags), (size, ga, VRAM));
    let va = reserve_va(size);
    let mut i = ImportDmabufArgs { va_addr: va, handle: 0, gpu_id: gb, dmabuf_fd: fd as u32 };
    ioctl(&b.emu, b.kfd, request::IMPORT_DMABUF, &mut i).unwrap();
    let imported = Buffer { va, size, handle: i.handle, mmap_offset: 0 };
    b.map_gpu(&imported, &[gb]).unwrap();
    // An import of another machine's pages is not exported again, nor CPU-mapped through it.
    let mut again = ExportDmabufArgs { handle: imported.handle, ..Default::default() };
    expect_err(ioctl(&b.emu, b.kfd, request::EXPORT_DMABUF, &mut again), Errno::EINVAL);

    // A regular file, and a number no fd has, are no dma-bufs. (Not a closed fd's number: the
    // next fd another thread of the test process opens may take it.)
    // SAFETY: a fresh memfd of our own.
    let memfd = unsafe { libc::memfd_create(c"plain".as_ptr(), 0) };
    i.dmabuf_fd = memfd as u32;
    i.va_addr = reserve_va(size);
    expect_err(ioctl(&b.emu, b.kfd, request::IMPORT_DMABUF, &mut i), Errno::EINVAL);
    // SAFETY: closing our own memfd.
    unsafe { libc::close(memfd) };
    i.dmabuf_fd = 9999;
    expect_err(ioctl(&b.emu, b.kfd, request::IMPORT_DMABUF, &mut i), Errno::EBADF);

    // The exporter lets go entirely; the importer keeps the pages (its import stands), and a
    // new import through a kept fd of the dma-buf still works while it does.
    // SAFETY: dup of an open fd.
    let kept = unsafe { libc::dup(fd) };
    a.unmap_gpu(&buf, &[ga]).unwrap();
    a.free(&buf).unwrap();
    a.emu.close(fd).unwrap();
    i.dmabuf_fd = kept as u32;
    ioctl(&b.emu, b.kfd, request::IMPORT_DMABUF, &mut i).unwrap();
    let second = Buffer { va: i.va_addr, size, handle: i.handle, mmap_offset: 0 };
    b.unmap_gpu(&imported, &[gb]).unwrap();
    for x in [&imported, &second] {
        b.free(x).unwrap();
    }
    // Now no process holds the pages: the kept fd imports nothing.
    i.va_addr = reserve_va(size);
    expect_err(ioctl(&b.emu, b.kfd, request::IMPORT_DMABUF, &mut i), Errno::EINVAL);
    // SAFETY: closing our own fd.
    unsafe { libc::close(kept) };
}
