//! kfd-direct on the emulated GPU: the ioctl sequence of bring-up and teardown, queue creation,
//! doorbell values, waits with timeouts, injected faults and ioctl failures, code objects from
//! the fixtures, multi-GPU and fork detection.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use aqueduct::aql::Condition;
use aqueduct::{Backend, Error, KernelLaunch, Runtime, SingleThread, Timeout};
use aqueduct_kfd::abi::nr;
use aqueduct_kfd::{Call, DeviceFault, EmuSys, Errno, Kfd, KfdConfig, KfdError, Op, Sys};
use aqueduct_kfd_emu::{EmuConfig, GpuProfile, QueueState, Twin};

fn open(config: EmuConfig) -> Kfd<EmuSys> {
    Kfd::open(EmuSys::new(config).unwrap(), KfdConfig::default()).unwrap()
}

fn launch(k: u64, args: &[u8]) -> KernelLaunch<'_> {
    KernelLaunch {
        kernel_object: k,
        grid: [1, 1, 1],
        workgroup: [1, 1, 1],
        group_segment_size: 0,
        private_segment_size: 0,
        kernarg: args,
    }
}

#[test]
fn bring_up_and_teardown_issue_the_documented_ioctl_sequence() {
    let sys = EmuSys::with_defaults().unwrap();
    sys.set_tracing(true);
    let kfd = Kfd::open(sys.clone(), KfdConfig::default()).unwrap();
    let up = sys.ioctl_trace();
    // §1.2: version, VM, apertures, event page (alloc, map), the three events, the signal
    // pool (alloc, map), the blit code object (alloc, map).
    assert_eq!(
        up,
        vec![
            nr::GET_VERSION,
            nr::ACQUIRE_VM,
            nr::GET_PROCESS_APERTURES_NEW,
            nr::ALLOC_MEMORY_OF_GPU,
            nr::MAP_MEMORY_TO_GPU,
            nr::CREATE_EVENT,
            nr::CREATE_EVENT,
            nr::CREATE_EVENT,
            nr::ALLOC_MEMORY_OF_GPU,
            nr::MAP_MEMORY_TO_GPU,
            nr::ALLOC_MEMORY_OF_GPU,
            nr::MAP_MEMORY_TO_GPU,
        ]
    );
    let calls = sys.calls();
    assert_eq!(calls[0], Call::Open("/dev/kfd".into()));
    assert_eq!(calls[2], Call::Open("/dev/dri/renderD128".into()));
    // A queue: five buffers, CREATE_QUEUE, the doorbell slice once.
    sys.set_tracing(true);
    let q = kfd.queue_create(0, aqueduct::Priority::Normal, None).unwrap();
    let mut want = Vec::new();
    for _ in 0..5 {
        want.extend([nr::ALLOC_MEMORY_OF_GPU, nr::MAP_MEMORY_TO_GPU]);
    }
    want.push(nr::CREATE_QUEUE);
    assert_eq!(sys.ioctl_trace(), want);
    assert!(
        sys.calls().iter().any(|c| matches!(c, Call::MapShared(o) if o >> 62 == 3)),
        "doorbell slice mapped from the kfd fd"
    );
    sys.set_tracing(true);
    kfd.queue_destroy(q);
    let mut want = vec![nr::DESTROY_QUEUE];
    for _ in 0..5 {
        want.extend([nr::UNMAP_MEMORY_FROM_GPU, nr::FREE_MEMORY_OF_GPU]);
    }
    assert_eq!(sys.ioctl_trace(), want, "destroy, then the queue buffers in reverse");
    sys.set_tracing(true);
    drop(kfd);
    let down = sys.ioctl_trace();
    assert_eq!(
        down,
        vec![
            nr::UNMAP_MEMORY_FROM_GPU,
            nr::FREE_MEMORY_OF_GPU,
            nr::UNMAP_MEMORY_FROM_GPU,
            nr::FREE_MEMORY_OF_GPU,
            nr::DESTROY_EVENT,
            nr::DESTROY_EVENT,
            nr::DESTROY_EVENT,
        ],
        "code object, signal pool, events (hw, memory, completion)"
    );
    assert_eq!(sys.open_fds(), 0, "render node and kfd closed");
    assert_eq!(sys.live_mappings(), 0, "every reservation and mapping dropped");
}

#[test]
fn every_ioctl_failure_during_bring_up_names_its_step_and_releases_everything() {
    let probe = EmuSys::with_defaults().unwrap();
    probe.set_tracing(true);
    drop(Kfd::open(probe.clone(), KfdConfig::default()).unwrap());
    let n = probe.ioctl_trace().len() - 7; // the bring-up part (teardown issues 7)
    for step in 1..=n as u64 {
        let sys = EmuSys::with_defaults().unwrap();
        sys.emu().fail_ioctl(step, None, aqueduct_kfd_emu::Errno::ENOMEM);
        let e = Kfd::open(sys.clone(), KfdConfig::default()).expect_err("bring-up fails");
        match e {
            KfdError::Sys { errno, .. } => assert_eq!(errno, Errno::ENOMEM, "step {step}"),
            other => panic!("step {step}: {other:?}"),
        }
        assert_eq!(sys.open_fds(), 0, "step {step}: fds closed");
        assert_eq!(sys.live_mappings(), 0, "step {step}: mappings dropped");
    }
}

#[test]
fn queue_creation_failures_release_their_buffers() {
    let sys = EmuSys::with_defaults().unwrap();
    let kfd = Kfd::open(sys.clone(), KfdConfig::default()).unwrap();
    let base = sys.live_mappings();
    for (k, op) in [(1, Op::AllocMemory), (5, Op::AllocMemory), (6, Op::MapMemory), (11, Op::CreateQueue)] {
        sys.emu().fail_ioctl(k, None, aqueduct_kfd_emu::Errno::EINVAL);
        assert_eq!(kfd.queue_create(0, aqueduct::Priority::High, None).err(), Some(Error::Unknown));
        assert_eq!(kfd.last_error(), Some(KfdError::Sys { op, errno: Errno::EINVAL }));
        assert_eq!(sys.live_mappings(), base, "ioctl {k}: nothing left behind");
    }
    let q = kfd.queue_create(0, aqueduct::Priority::High, None).unwrap();
    assert_eq!(sys.emu().queue_state(kfd.queue_id(&q).unwrap()), Some(QueueState::Active));
    kfd.queue_destroy(q);
}

#[test]
fn doorbell_carries_the_index_of_the_last_packet() {
    let sys = EmuSys::with_defaults().unwrap();
    let nop = sys.emu().register_kernel(Twin::new("nop", 0, |_, _| Ok(())));
    let rt: Runtime<_, _> = Runtime::new(Kfd::open(sys, KfdConfig::default()).unwrap(), SingleThread);
    let s = rt.stream_create(1).unwrap();
    for i in 0..5u64 {
        rt.launch_kernel(s, &launch(nop, &[])).unwrap();
        assert_eq!(rt.with_stream_queue(s, |q| q.doorbell_value()).unwrap(), i);
    }
    rt.stream_synchronize(s).unwrap();
}

#[test]
fn signal_waits_time_out_and_wake_on_host_changes() {
    let kfd = open(EmuConfig::default());
    let s = kfd.signal_create(1).unwrap();
    let t0 = Instant::now();
    assert_eq!(kfd.signal_wait(s, Condition::Eq, 0, Timeout(30_000_000)), Err(Error::NotReady));
    let waited = t0.elapsed();
    assert!(waited >= Duration::from_millis(30) && waited < Duration::from_secs(2), "{waited:?}");
    assert_eq!(kfd.signal_wait(s, Condition::Eq, 0, Timeout::ZERO), Err(Error::NotReady));
    std::thread::scope(|sc| {
        sc.spawn(|| {
            std::thread::sleep(Duration::from_millis(20));
            // SAFETY: a live signal of the backend.
            unsafe { s.get() }.value.store(0, Ordering::Release);
            kfd.notify();
        });
        assert_eq!(kfd.signal_wait(s, Condition::Eq, 0, Timeout::SECOND), Ok(0));
    });
    assert_eq!(
        kfd.signal_wait(aqueduct::SignalHandle(0x1234), Condition::Eq, 0, Timeout::ZERO),
        Err(Error::InvalidHandle)
    );
    kfd.signal_destroy(s);
}

#[test]
fn memory_fault_fails_the_device_streams_and_reports_the_address() {
    let sys = EmuSys::with_defaults().unwrap();
    let bad = 0x7000_dead_0000u64;
    let oob = sys.emu().register_kernel(Twin::new("oob", 0, move |ctx, _| ctx.mem.write_u32(bad, 1)));
    let rt: Runtime<_, _> = Runtime::new(Kfd::open(sys, KfdConfig::default()).unwrap(), SingleThread);
    let s1 = rt.stream_create(1).unwrap();
    let s2 = rt.stream_create(1).unwrap();
    rt.launch_kernel(s1, &launch(oob, &[])).unwrap();
    assert_eq!(rt.stream_synchronize_timeout(s1, Timeout::SECOND), Err(Error::IllegalAddress));
    assert_eq!(rt.backend().device_fault(0), Some(DeviceFault::MemoryFault(bad)));
    // KFD evicted every queue of the process on the device: s2 fails too (sticky).
    assert_eq!(rt.stream_query(s2), Err(Error::IllegalAddress));
    let buf = rt.malloc(64).unwrap();
    assert_eq!(rt.memset_async(s2, buf, 0, 1, 1), Err(Error::IllegalAddress));
}

#[test]
fn device_reset_fails_every_stream_of_that_device_only() {
    let sys = EmuSys::new(EmuConfig::with_gpus(&[GpuProfile::Gfx90a, GpuProfile::Gfx1100])).unwrap();
    let emu = sys.emu().clone();
    let rt: Runtime<_, _> = Runtime::new(Kfd::open(sys, KfdConfig::default()).unwrap(), SingleThread);
    let a = rt.stream_create(1).unwrap();
    rt.set_device(1).unwrap();
    let b = rt.stream_create(1).unwrap();
    let buf = rt.malloc(4096).unwrap();
    emu.inject_device_reset(rt.backend().gpu_id(0).unwrap()).unwrap();
    rt.set_device(0).unwrap();
    // Work accepted before the backend has seen the reset fails instead of hanging.
    let abuf = rt.malloc(64).unwrap();
    let _ = rt.memset_async(a, abuf, 1, 1, 64);
    assert_eq!(rt.stream_synchronize(a), Err(Error::LaunchTimeOut));
    assert_eq!(rt.stream_query(a), Err(Error::LaunchTimeOut), "sticky");
    assert_eq!(rt.backend().device_fault(0), Some(DeviceFault::Reset));
    rt.memset_async(b, buf, 3, 1, 4096).unwrap();
    rt.stream_synchronize(b).unwrap();
    assert_eq!(rt.backend().device_fault(1), None);
}

#[test]
fn queue_error_through_the_cwsr_header_wakes_the_waiter() {
    let sys = EmuSys::with_defaults().unwrap();
    let rt: Runtime<_, _> = Runtime::new(Kfd::open(sys, KfdConfig::default()).unwrap(), SingleThread);
    let s = rt.stream_create(1).unwrap();
    // An unknown kernel object: the CP raises DISPATCH_CODE_INVALID through the CWSR header.
    rt.launch_kernel(s, &launch(0x7777_0000, &[])).unwrap();
    let t0 = Instant::now();
    assert_eq!(rt.stream_synchronize(s), Err(Error::LaunchFailure));
    assert!(t0.elapsed() < Duration::from_secs(2));
    assert_eq!(rt.stream_synchronize(s), Err(Error::LaunchFailure), "sticky");
}

#[test]
fn code_objects_from_the_fixtures_load_and_dispatch_by_name() {
    let sys = EmuSys::with_defaults().unwrap();
    sys.emu().register_twin_by_name(Twin::new("fill_u32", 16, |ctx, wg| {
        let (dst, value, count) = (ctx.arg_u64(0), ctx.arg_u32(8), ctx.arg_u32(12));
        for i in ctx.items_x(wg) {
            if i < count {
                ctx.mem.write_u32(dst + 4 * u64::from(i), value)?;
            }
        }
        Ok(())
    }));
    let rt: Runtime<_, _> = Runtime::new(Kfd::open(sys, KfdConfig::default()).unwrap(), SingleThread);
    let elf = include_bytes!("../emu/fixtures/kernels-gfx90a.co");
    let co = rt.module_load(0, elf).unwrap();
    let k = rt.module_kernel(co, "fill_u32").unwrap();
    assert_eq!(k.kernarg_size % 8, 0);
    assert!(k.kernarg_size >= 16);
    assert!(k.kernarg_align >= 16);
    assert!(rt.module_kernel(co, "vector_add").is_ok());
    assert_eq!(rt.module_kernel(co, "nope"), Err(Error::NotFound));
    assert_eq!(rt.backend().last_error(), Some(KfdError::KernelNotFound));
    assert_eq!(rt.module_variable(co, "nope"), Err(Error::InvalidSymbol));
    let (base, bytes) = rt.module_image(co).unwrap().unwrap();
    assert!(k.kernel_object > base && k.kernel_object < base + bytes);
    let buf = rt.malloc(4096).unwrap();
    let s = rt.stream_create(1).unwrap();
    let mut args = [0u8; 16];
    args[..8].copy_from_slice(&buf.to_le_bytes());
    args[8..12].copy_from_slice(&0xabcdu32.to_le_bytes());
    args[12..].copy_from_slice(&1000u32.to_le_bytes());
    let launch = aqueduct::KernelLaunch {
        kernel_object: k.kernel_object,
        grid: [1024, 1, 1],
        workgroup: [256, 1, 1],
        group_segment_size: k.group_segment_size,
        private_segment_size: k.private_segment_size,
        kernarg: &args,
    };
    rt.launch_kernel(s, &launch).unwrap();
    rt.stream_synchronize(s).unwrap();
    // SAFETY: CPU-visible device memory, the kernel completed.
    let v = unsafe { std::slice::from_raw_parts(buf as usize as *const u32, 1024) };
    assert!(v[..1000].iter().all(|&x| x == 0xabcd));
    assert!(v[1000..].iter().all(|&x| x == 0));
    // A code object for another target, and bytes that are none, are refused with HIP's codes.
    let other = include_bytes!("../emu/fixtures/kernels-gfx1100.co");
    assert_eq!(rt.module_load(0, other), Err(Error::NoBinaryForGpu));
    assert_eq!(rt.backend().last_error(), Some(KfdError::WrongTarget));
    assert_eq!(rt.module_load(0, b"not an elf"), Err(Error::InvalidImage));
    assert_eq!(rt.backend().last_error(), Some(KfdError::CodeObject(amdhsa::Error::NotElf)));
    assert_eq!(rt.module_load(7, elf), Err(Error::InvalidDevice));
    rt.module_unload(co).unwrap();
    assert_eq!(rt.module_kernel(co, "fill_u32"), Err(Error::InvalidHandle), "stale after unload");
    assert_eq!(rt.module_unload(co), Err(Error::InvalidHandle));
}

#[test]
fn more_code_objects_than_any_fixed_table_held_load_at_once() {
    // The old loader stopped at 16 code objects per process; core's module table is sized by
    // the configuration (here 128; HIP scale: 16384), and kfd-direct keeps nothing per code
    // object but its image. The table's end is `OutOfMemory`, and the refused load is undone.
    let sys = EmuSys::with_defaults().unwrap();
    let rt: Runtime<_, _, aqueduct::Capacities<32, 64, 8, 64, 4, 32, 2, 40, 16, 100>> =
        Runtime::new(Kfd::open(sys, KfdConfig::default()).unwrap(), SingleThread);
    let elf = include_bytes!("../emu/fixtures/kernels-gfx90a.co");
    let modules: Vec<_> = (0..100).map(|_| rt.module_load(0, elf).unwrap()).collect();
    let objects: std::collections::BTreeSet<u64> =
        modules.iter().map(|&m| rt.module_kernel(m, "fill_u32").unwrap().kernel_object).collect();
    assert_eq!(objects.len(), 100, "each load is its own image");
    assert_eq!(rt.module_load(0, elf), Err(Error::OutOfMemory));
    for m in modules {
        rt.module_unload(m).unwrap();
    }
}

#[test]
fn a_hosted_backend_holds_more_live_allocations_than_the_fixed_table() {
    // Without `std` kfd-direct's allocation table is `MAX_ALLOCATIONS` slots; hosted, it grows,
    // so a program's live buffers are not capped. Each buffer is its own device memory (a fill
    // of one shows in it alone), freed slots are used again, and teardown frees every buffer.
    let sys = EmuSys::with_defaults().unwrap();
    let rt: Runtime<_, _> = Runtime::new(Kfd::open(sys.clone(), KfdConfig::default()).unwrap(), SingleThread);
    let n = aqueduct_kfd::MAX_ALLOCATIONS + 100;
    let bufs: Vec<u64> = (0..n).map(|_| rt.malloc(64).unwrap()).collect();
    assert_eq!(bufs.iter().collect::<std::collections::BTreeSet<_>>().len(), n);
    for (i, &b) in bufs.iter().enumerate().step_by(97) {
        rt.memset(b, i as u8, 64).unwrap();
    }
    let host = rt.host_malloc(64).unwrap();
    for (i, &b) in bufs.iter().enumerate().step_by(97) {
        rt.memcpy(host, b, 64).unwrap();
        // SAFETY: 64 bytes of pinned host memory, written by the copy that completed.
        let out = unsafe { std::slice::from_raw_parts(host as usize as *const u8, 64) };
        assert!(out.iter().all(|&x| x == i as u8), "buffer {i}");
    }
    for &b in &bufs[..50] {
        rt.free(b).unwrap();
    }
    let again: Vec<u64> = (0..50).map(|_| rt.malloc(64).unwrap()).collect();
    assert!(again.iter().all(|a| !bufs[50..].contains(a)));
    drop(rt);
    let alloc = nr::ALLOC_MEMORY_OF_GPU;
    let free = nr::FREE_MEMORY_OF_GPU;
    let trace = sys.ioctl_trace();
    let count = |nr| trace.iter().filter(|&&x| x == nr).count();
    assert_eq!(count(alloc), count(free), "teardown frees every buffer");
}

/// A clang-15 code object whose kernel keeps a dynamically indexed local array in scratch.
fn scratch_code_object() -> Vec<u8> {
    let dir = std::env::temp_dir().join(format!("kfd-scratch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("scratch.cl");
    std::fs::write(
        &src,
        "kernel void local_array(global int* p, int i) {\n\
         int a[256]; for (int j = 0; j < 256; j++) a[j] = p[j] * i;\n\
         p[__builtin_amdgcn_workitem_id_x()] = a[(i + __builtin_amdgcn_workitem_id_x()) & 255]; }\n",
    )
    .unwrap();
    let out = dir.join("scratch.co");
    let st = std::process::Command::new("clang-15")
        .args(["-x", "cl", "-target", "amdgcn-amd-amdhsa", "-mcpu=gfx90a", "-nogpulib", "-O2", "-o"])
        .arg(&out)
        .arg(&src)
        .output()
        .expect("clang-15 is missing: install the Debian packages clang-15 and lld-15 (scripts/test does)");
    assert!(st.status.success(), "{}", String::from_utf8_lossy(&st.stderr));
    let elf = std::fs::read(&out).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    elf
}

#[test]
fn a_kernel_with_a_private_segment_gets_scratch_on_every_queue_of_its_device() {
    let rt: Runtime<_, _> = Runtime::new(open(EmuConfig::default()), SingleThread);
    let kfd = rt.backend();
    let before = kfd.queue_create(0, aqueduct::Priority::Normal, None).unwrap();
    assert_eq!(kfd.queue_scratch(&before).unwrap().bytes, 0, "no scratch until a kernel needs it");
    let co = rt.module_load(0, &scratch_code_object()).unwrap();
    let k = rt.module_kernel(co, "local_array").unwrap();
    assert!(k.private_segment_size >= 1024, "the array lives in scratch: {}", k.private_segment_size);
    let after = kfd.queue_create(0, aqueduct::Priority::Normal, None).unwrap();
    let node = kfd.node(0).unwrap().props;
    for q in [&before, &after] {
        let s = kfd.queue_scratch(q).unwrap();
        // What the descriptor asks, as ROCr sets it up: at least the private segment per
        // work-item, 64 lanes per wave, a whole number of KiB per wave, waves for every slot.
        assert!(s.lane >= k.private_segment_size);
        let (waves, wave_kib) = (s.tmpring & 0xfff, s.tmpring >> 12);
        assert_eq!(wave_kib, s.lane * 64 / 1024);
        assert_eq!(waves, node.cu_count() * 32);
        assert_eq!(s.bytes, u64::from(waves) * u64::from(wave_kib) * 1024);
        assert_eq!(s.descriptor[0], s.base as u32);
        assert_eq!(s.descriptor[1], (s.base >> 32) as u32 & 0xffff | 1 << 31, "swizzled");
        assert_eq!(u64::from(s.descriptor[2]), s.bytes);
        assert_eq!(s.descriptor[3], 0x00ea_4fac);
    }
    assert_ne!(kfd.queue_scratch(&before).unwrap().base, kfd.queue_scratch(&after).unwrap().base);
    // A larger stack grows it; a smaller request leaves it.
    let lane = kfd.queue_scratch(&before).unwrap().lane;
    rt.reserve_scratch(0, lane * 4).unwrap();
    assert_eq!(kfd.queue_scratch(&before).unwrap().lane, lane * 4);
    rt.reserve_scratch(0, 16).unwrap();
    assert_eq!(kfd.queue_scratch(&after).unwrap().lane, lane * 4);
    assert_eq!(rt.reserve_scratch(0, aqueduct_kfd::MAX_LANE_BYTES + 1), Err(Error::OutOfMemory));
    kfd.queue_destroy(before);
    kfd.queue_destroy(after);
    rt.module_unload(co).unwrap();
}

#[test]
fn kernel_arguments_larger_than_a_slot_span_the_slots_after_it_across_ring_wraps() {
    // 1000-byte arguments take four 256-byte slots (the dispatch and three no-op barriers);
    // 300 launches wrap a 256-packet ring several times, running into the overhang at its end.
    const BYTES: usize = 1000;
    let sys = EmuSys::with_defaults().unwrap();
    let object = sys.emu().register_kernel(Twin::new("big_args", BYTES as u32, |ctx, _wg| {
        let (dst, n) = (ctx.arg_u64(0), ctx.arg_u32(8));
        let sum = ctx.kernarg[12..BYTES].iter().fold(0u32, |s, &b| s.wrapping_mul(31).wrapping_add(u32::from(b)));
        ctx.mem.write_u32(dst + 4 * u64::from(n), sum)
    }));
    let rt: Runtime<_, _> = Runtime::new(Kfd::open(sys, KfdConfig::default()).unwrap(), SingleThread);
    let out = rt.malloc(4 * 300).unwrap();
    let s = rt.stream_create(1).unwrap();
    let mut want = Vec::new();
    for n in 0..300u32 {
        let mut args = [0u8; BYTES];
        args[..8].copy_from_slice(&out.to_le_bytes());
        args[8..12].copy_from_slice(&n.to_le_bytes());
        for (i, b) in args[12..].iter_mut().enumerate() {
            *b = (i as u32 ^ n.wrapping_mul(2654435761)) as u8;
        }
        want.push(args[12..].iter().fold(0u32, |s, &b| s.wrapping_mul(31).wrapping_add(u32::from(b))));
        rt.launch_kernel(s, &launch(object, &args)).unwrap();
    }
    rt.stream_synchronize(s).unwrap();
    // SAFETY: CPU-visible device memory; every dispatch completed.
    let got = unsafe { std::slice::from_raw_parts(out as usize as *const u32, 300) };
    assert_eq!(got, &want[..]);
    // HIP's 4 KiB fit; past them the launch is refused and nothing is published.
    let mut max = [0u8; 4096];
    max[..8].copy_from_slice(&out.to_le_bytes());
    max[8..12].copy_from_slice(&7u32.to_le_bytes());
    rt.launch_kernel(s, &launch(object, &max)).unwrap();
    assert_eq!(rt.launch_kernel(s, &launch(object, &[0u8; 4097])), Err(Error::InvalidValue));
    rt.stream_synchronize(s).unwrap();
    // SAFETY: as above.
    assert_eq!(unsafe { *(out as usize as *const u32).add(7) }, 0, "the sum of zero bytes");
}

#[test]
fn a_32_bit_wait_value_in_the_upper_half_of_an_8_byte_word_compares_only_its_word() {
    let rt: Runtime<_, _> = Runtime::new(open(EmuConfig::default()), SingleThread);
    let buf = rt.malloc(64).unwrap();
    let (lo, hi) = (buf as usize as *mut u32, (buf + 4) as usize as *mut u32);
    // SAFETY: CPU-visible device memory of 64 bytes; the device only reads it.
    unsafe {
        lo.write_volatile(0xdead_beef);
        hi.write_volatile(5);
    }
    let s = rt.stream_create(1).unwrap();
    rt.wait_value32(s, buf + 4, 5, 1 /* Eq */, u32::MAX).unwrap();
    rt.wait_value32(s, buf + 4, 3, 0 /* Gte */, u32::MAX).unwrap();
    rt.wait_value32(s, buf + 4, 4, 2 /* And */, u32::MAX).unwrap();
    rt.stream_synchronize_timeout(s, Timeout(Duration::from_secs(5).as_nanos() as u64)).unwrap();
    // A wait that does not hold yet blocks the stream until the word changes.
    rt.wait_value32(s, buf + 4, 6, 1 /* Eq */, u32::MAX).unwrap();
    assert_eq!(
        rt.stream_synchronize_timeout(s, Timeout(Duration::from_millis(50).as_nanos() as u64)),
        Err(Error::NotReady)
    );
    // SAFETY: as above.
    unsafe { hi.write_volatile(6) };
    rt.stream_synchronize_timeout(s, Timeout(Duration::from_secs(5).as_nanos() as u64)).unwrap();
}

#[test]
fn multi_gpu_streams_and_blits_on_each_profile() {
    let sys =
        EmuSys::new(EmuConfig::with_gpus(&[GpuProfile::Gfx90a, GpuProfile::Gfx942, GpuProfile::Gfx1100])).unwrap();
    let rt: Runtime<_, _> = Runtime::new(Kfd::open(sys, KfdConfig::default()).unwrap(), SingleThread);
    assert_eq!(rt.device_count(), Ok(3));
    let gfx: Vec<u32> = (0..3).map(|d| rt.device_info(d).unwrap().gfx_target_version).collect();
    assert_eq!(gfx, vec![90010, 90402, 110000]);
    for d in 0..3 {
        rt.set_device(d).unwrap();
        let s = rt.stream_create(0).unwrap();
        let a = rt.malloc(256).unwrap();
        let b = rt.host_malloc(256).unwrap();
        rt.memset_async(s, a, 0x40 + d, 1, 256).unwrap();
        rt.memcpy_async(s, b, a, 256).unwrap();
        rt.stream_synchronize(s).unwrap();
        // SAFETY: host memory of the backend; the copy completed.
        assert_eq!(unsafe { *(b as usize as *const u8).add(255) }, 0x40 + d as u8);
        rt.stream_destroy(s).unwrap();
    }
}

#[test]
fn use_after_fork_is_refused() {
    let sys = EmuSys::with_defaults().unwrap();
    let rt: Runtime<_, _> = Runtime::new(Kfd::open(sys.clone(), KfdConfig::default()).unwrap(), SingleThread);
    sys.simulate_fork();
    assert_eq!(rt.stream_create(0).err(), Some(Error::NotInitialized));
    assert_eq!(rt.backend().last_error(), Some(KfdError::Forked));
    assert_eq!(rt.malloc(64).err(), Some(Error::NotInitialized));
    assert_ne!(sys.process_id(), std::process::id());
}
