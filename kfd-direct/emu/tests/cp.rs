//! Packet-processor semantics, one test each (docs/kfd-aql.md §3.4, §4.1, §2).

mod common;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aqueduct::aql::{BarrierPacket, FenceScope, Header, KernelDispatchPacket, Packet, PacketType};
use aqueduct::backend::{CopyArgs, FillArgs};
use aqueduct::BuiltinKernel;
use aqueduct_kfd_emu::abi::*;
use aqueduct_kfd_emu::{KernelCtx, Twin};
use common::*;

const SHORT: Duration = Duration::from_millis(50);

/// A twin that appends its first u32 argument to a log.
fn logger(h: &Harness) -> (u64, Arc<Mutex<Vec<u32>>>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let l = Arc::clone(&log);
    let obj = h.emu.register_kernel(Twin::new("log", 8, move |ctx: &KernelCtx<'_>, _| {
        l.lock().unwrap().push(ctx.arg_u32(0));
        Ok(())
    }));
    (obj, log)
}

/// Kernarg slots: slot i holds `value` at +0.
fn kernargs(h: &Harness, values: &[u32]) -> Buffer {
    let k = h.alloc(4096, GTT);
    for (i, v) in values.iter().enumerate() {
        // SAFETY: the kernarg page is CPU-mapped; 64 bytes per slot.
        unsafe { *k.ptr::<u32>().add(i * 16) = *v };
    }
    k
}

#[test]
fn dispatch_geometry_reaches_the_twin() {
    let h = Harness::new();
    let q = h.create_queue();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = Arc::clone(&seen);
    let obj = h.emu.register_kernel(Twin::new("geom", 0, move |ctx: &KernelCtx<'_>, wg| {
        s2.lock().unwrap().push((wg, ctx.items_x(wg), ctx.workgroup_count));
        Ok(())
    }));
    let sigs = h.signals();
    signal(&sigs, 0).reset(1);
    q.submit(&[dispatch(obj, 0, 100, 32, signal_handle(&sigs, 0), true)]);
    assert!(wait_signal(signal(&sigs, 0), 0));
    let mut seen = seen.lock().unwrap();
    // Work-groups run on the compute-unit workers in parallel: in any order.
    seen.sort_by_key(|s| s.0);
    assert_eq!(seen.len(), 4);
    assert_eq!(seen[3].0, [3, 0, 0]);
    assert_eq!(seen[3].1, 96..100, "the last work-group is partial");
    assert_eq!(seen[0].2, [4, 1, 1]);
}

#[test]
fn builtin_copy_and_fill_twins() {
    let h = Harness::new();
    let q = h.create_queue();
    let src = h.alloc(8192, GTT);
    let dst = h.alloc(8192, VRAM);
    for i in 0..8192usize {
        // SAFETY: CPU-mapped source.
        unsafe { *src.ptr::<u8>().add(i) = i as u8 };
    }
    let k = h.alloc(4096, GTT);
    // SAFETY: CPU-mapped kernarg page.
    unsafe {
        *k.ptr::<CopyArgs>() = CopyArgs { dst: dst.va, src: src.va, bytes: 8192 };
        *k.ptr::<FillArgs>().byte_add(64) = FillArgs { dst: dst.va + 16, count: 4, value: 0xabcd, element_bytes: 2 };
    }
    let sigs = h.signals();
    signal(&sigs, 0).reset(2);
    let s = signal_handle(&sigs, 0);
    q.submit(&[
        dispatch(h.emu.builtin_kernel(BuiltinKernel::Copy), k.va, 1, 1, s, true),
        dispatch(h.emu.builtin_kernel(BuiltinKernel::Fill), k.va + 64, 1, 1, s, true),
    ]);
    assert!(wait_signal(signal(&sigs, 0), 0));
    // SAFETY: CPU-mapped destination (large BAR).
    let d = unsafe { std::slice::from_raw_parts(dst.ptr::<u8>(), 8192) };
    assert_eq!(d[5], 5);
    assert_eq!(&d[16..24], &[0xcd, 0xab, 0xcd, 0xab, 0xcd, 0xab, 0xcd, 0xab]);
    assert_eq!(d[24], 24);
}

#[test]
fn barrier_and_waits_for_every_dependency() {
    let h = Harness::new();
    let q = h.create_queue();
    let sigs = h.signals();
    let (obj, log) = logger(&h);
    let k = kernargs(&h, &[7]);
    signal(&sigs, 1).reset(1);
    signal(&sigs, 2).reset(0);
    signal(&sigs, 3).reset(1);
    let deps = [signal_handle(&sigs, 1), signal_handle(&sigs, 2), 0, 0, 0];
    q.submit(&[BarrierPacket::and(deps, signal_handle(&sigs, 3))]);
    q.submit(&[dispatch(obj, k.va, 1, 1, 0, true)]);
    std::thread::sleep(SHORT);
    assert_eq!(q.read_index(), 0, "blocked on the unmet dependency");
    assert!(log.lock().unwrap().is_empty());
    signal(&sigs, 1).reset(0);
    assert!(wait_signal(signal(&sigs, 3), 0));
    assert!(wait_until(Duration::from_secs(5), || q.read_index() == 2));
    assert_eq!(*log.lock().unwrap(), [7]);
}

#[test]
fn barrier_or_waits_for_any_dependency() {
    let h = Harness::new();
    let q = h.create_queue();
    let sigs = h.signals();
    signal(&sigs, 1).reset(1);
    signal(&sigs, 2).reset(1);
    signal(&sigs, 3).reset(1);
    let mut p =
        BarrierPacket::and([signal_handle(&sigs, 1), signal_handle(&sigs, 2), 0, 0, 0], signal_handle(&sigs, 3));
    p.header = Header::new(PacketType::BarrierOr, true, FenceScope::System, FenceScope::System).0;
    q.submit(&[p]);
    std::thread::sleep(SHORT);
    assert_eq!(signal(&sigs, 3).load(), 1);
    signal(&sigs, 2).reset(0);
    assert!(wait_signal(signal(&sigs, 3), 0));
}

#[test]
fn invalid_header_stalls_until_published() {
    let h = Harness::new();
    let q = h.create_queue();
    let sigs = h.signals();
    let (obj, log) = logger(&h);
    let k = kernargs(&h, &[0, 1]);
    signal(&sigs, 0).reset(2);
    // Reserve two slots by hand and publish the second one first.
    let first = q.ring.reserve(2, 16).unwrap();
    let base = first.first();
    std::mem::forget(first);
    let write_slot = |i: u64, p: &KernelDispatchPacket| {
        let slot = (q.ring_buf.va + (i % 256) * 64) as *mut u32;
        let w = p.words();
        // SAFETY: the slot lies inside the CPU-mapped ring; body first, header last (Release).
        unsafe {
            std::ptr::copy_nonoverlapping(w.as_ptr().add(1), slot.add(1), 15);
            (*(slot as *const AtomicU32)).store(w[0], Ordering::Release);
        }
    };
    write_slot(base + 1, &dispatch(obj, k.va + 64, 1, 1, signal_handle(&sigs, 0), true));
    q.ring_doorbell(base + 1);
    std::thread::sleep(SHORT);
    assert_eq!(q.read_index(), 0, "the CP stalls on the INVALID slot 0");
    assert!(log.lock().unwrap().is_empty());
    write_slot(base, &dispatch(obj, k.va, 1, 1, signal_handle(&sigs, 0), true));
    assert!(wait_signal(signal(&sigs, 0), 0));
    assert_eq!(*log.lock().unwrap(), [0, 1]);
}

/// The doorbell wakes the processor: published packets wait for a ring, and a ring announces at
/// least the packets up to its value. Packets published past the value are taken as well: a
/// multi-producer queue's doorbell may hold any value (docs/kfd-aql.md §2, §3.4).
#[test]
fn doorbell_wakes_the_processor_for_the_published_packets() {
    let h = Harness::new();
    let q = h.create_queue();
    let (obj, log) = logger(&h);
    let k = kernargs(&h, &[0, 1, 2, 3]);
    let mut r = q.ring.reserve(3, 16).unwrap();
    for i in 0..3 {
        r.write(&dispatch(obj, k.va + 64 * i, 1, 1, 0, true));
    }
    drop(r);
    std::thread::sleep(SHORT);
    assert!(log.lock().unwrap().is_empty(), "nothing runs before the doorbell");
    q.ring_doorbell(0);
    assert!(wait_until(Duration::from_secs(5), || q.read_index() == 3));
    assert_eq!(*log.lock().unwrap(), [0, 1, 2], "packets published past the doorbell value run too");
    q.submit(&[dispatch(obj, k.va + 64 * 3, 1, 1, 0, true)]);
    assert!(wait_until(Duration::from_secs(5), || q.read_index() == 4));
    assert_eq!(*log.lock().unwrap(), [0, 1, 2, 3]);
}

/// Reserves one slot of `q` and publishes `p` in it (body first, header last), without ringing:
/// one producer's part of the publish protocol; returns the packet's index.
fn publish(q: &Queue, p: &KernelDispatchPacket) -> u64 {
    let mut r = q.ring.reserve(1, 16).unwrap();
    let index = r.first();
    r.write(p);
    drop(r);
    index
}

/// Two producers of one queue ring in the order they get there: the later packet's producer
/// first, then the earlier one's, whose lower value overwrites the higher one before the
/// processor reads the doorbell (a paused processor makes that interleaving certain). Both
/// packets run: the processor takes the published packet past the value it read.
#[test]
fn a_higher_doorbell_value_overwritten_by_a_lower_one_still_runs_its_packet() {
    let h = Harness::new();
    let q = h.create_queue();
    let sigs = h.signals();
    let (obj, log) = logger(&h);
    let k = kernargs(&h, &[0, 1]);
    signal(&sigs, 0).reset(2);
    let s = signal_handle(&sigs, 0);
    h.emu.pause_command_processor(h.gpu(), true).unwrap();
    let a = publish(&q, &dispatch(obj, k.va, 1, 1, s, true));
    let b = publish(&q, &dispatch(obj, k.va + 64, 1, 1, s, true));
    q.ring_doorbell(b);
    q.ring_doorbell(a);
    h.emu.pause_command_processor(h.gpu(), false).unwrap();
    assert!(wait_signal(signal(&sigs, 0), 0), "packet {b}, announced only by the overwritten value, never ran");
    assert_eq!(*log.lock().unwrap(), [0, 1]);
}

/// Debian's HIP 5.2 hang (docs/rocm-on-emu.md §4.1): the processor has run a queue's packets
/// 0 and 1 when a late producer's doorbell store of 0 arrives, after the store of another
/// producer that published packet 2 and rang 2 (a paused processor makes the interleaving
/// certain). The low value must not move the announced end below the launched packets: packet
/// 2 runs, and so does packet 3, rung properly afterwards.
#[test]
fn a_doorbell_value_below_the_launched_packets_does_not_stop_the_queue() {
    let h = Harness::new();
    let q = h.create_queue();
    let sigs = h.signals();
    let (obj, log) = logger(&h);
    let k = kernargs(&h, &[0, 1, 2, 3]);
    signal(&sigs, 0).reset(2);
    let s = signal_handle(&sigs, 0);
    q.submit(&[dispatch(obj, k.va, 1, 1, s, true), dispatch(obj, k.va + 64, 1, 1, s, true)]);
    assert!(wait_signal(signal(&sigs, 0), 0));
    assert!(wait_until(Duration::from_secs(5), || q.read_index() == 2));
    signal(&sigs, 0).reset(1);
    h.emu.pause_command_processor(h.gpu(), true).unwrap();
    let c = publish(&q, &dispatch(obj, k.va + 128, 1, 1, s, true));
    q.ring_doorbell(c);
    q.ring_doorbell(0);
    h.emu.pause_command_processor(h.gpu(), false).unwrap();
    assert!(wait_signal(signal(&sigs, 0), 0), "packet {c} never ran after the doorbell went back to 0");
    signal(&sigs, 0).reset(1);
    q.submit(&[dispatch(obj, k.va + 192, 1, 1, s, true)]);
    assert!(wait_signal(signal(&sigs, 0), 0), "a doorbell rung after the low value was ignored");
    assert_eq!(*log.lock().unwrap(), [0, 1, 2, 3]);
}

#[test]
fn retirement_rewrites_headers_and_advances_read_index_on_completion() {
    let h = Harness::new();
    let q = h.create_queue();
    let go = Arc::new(AtomicBool::new(false));
    let g = Arc::clone(&go);
    let obj = h.emu.register_kernel(Twin::new("gate", 0, move |_, _| {
        while !g.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        Ok(())
    }));
    let sigs = h.signals();
    signal(&sigs, 0).reset(1);
    q.submit(&[dispatch(obj, 0, 1, 1, signal_handle(&sigs, 0), true)]);
    std::thread::sleep(SHORT);
    assert_eq!(q.read_index(), 0, "read index never moves before completion");
    go.store(true, Ordering::Release);
    assert!(wait_signal(signal(&sigs, 0), 0));
    assert!(wait_until(Duration::from_secs(5), || q.read_index() == 1));
    // SAFETY: the ring is CPU-mapped.
    let header = unsafe { *q.ring_buf.ptr::<u16>() };
    assert_eq!(header, 1, "consumed slot rewritten to INVALID");
}

#[test]
fn completion_posts_the_event_mailbox() {
    let h = Harness::new();
    let q = h.create_queue();
    let page = h.event_page();
    let e = h.create_event(event_type::SIGNAL, true, Some(&page)).unwrap();
    let sigs = h.signals();
    let s = signal(&sigs, 0);
    s.reset(1);
    s.event_mailbox_ptr.store(page.va + 8 * u64::from(e.event_slot_index), Ordering::Relaxed);
    s.event_id.store(e.event_id, Ordering::Relaxed);
    let nop = h.emu.register_kernel(Twin::new("nop", 0, |_, _| Ok(())));
    std::thread::scope(|sc| {
        let w = sc.spawn(|| h.wait_events(&[e.event_id], false, 5000).unwrap().0);
        std::thread::sleep(SHORT);
        q.submit(&[dispatch(nop, 0, 1, 1, signal_handle(&sigs, 0), true)]);
        assert_eq!(w.join().unwrap(), wait_result::COMPLETE);
    });
    assert_eq!(s.load(), 0);
    // The interrupt handler acknowledged the slot.
    // SAFETY: the event page is CPU-mapped.
    let slot = unsafe { *page.ptr::<u64>().add(e.event_slot_index as usize) };
    assert_eq!(slot, aqueduct_kfd_emu::SLOT_UNSIGNALED);
}

#[test]
fn timestamps_only_with_profiling() {
    let h = Harness::new();
    let nop = h.emu.register_kernel(Twin::new("nop", 0, |_, _| {
        std::thread::sleep(Duration::from_micros(200));
        Ok(())
    }));
    let sigs = h.signals();
    for (i, profiling) in [(0usize, true), (1, false)] {
        let q = h.create_queue_with(0, &QueueSpec { profiling, ..Default::default() });
        let s = signal(&sigs, i);
        s.reset(1);
        let before = h.emu.gpu_clock();
        q.submit(&[dispatch(nop, 0, 1, 1, signal_handle(&sigs, i), true)]);
        assert!(wait_signal(s, 0));
        let (st, en) = (s.start_ts.load(Ordering::Relaxed), s.end_ts.load(Ordering::Relaxed));
        if profiling {
            assert!(st >= before && en > st, "start {st} end {en} before {before}");
            assert!(en - st >= 20_000, "200 µs at 100 MHz is 20000 ticks: {}", en - st);
        } else {
            assert_eq!((st, en), (0, 0));
        }
    }
}

#[test]
fn inactive_queues_percentage_zero_and_empty_cu_mask() {
    let h = Harness::new();
    let (obj, log) = logger(&h);
    let k = kernargs(&h, &[1, 2]);
    let q = h.create_queue_with(0, &QueueSpec { percentage: 0, ..Default::default() });
    q.submit(&[dispatch(obj, k.va, 1, 1, 0, true)]);
    std::thread::sleep(SHORT);
    assert!(log.lock().unwrap().is_empty(), "percentage 0 = inactive");
    let mut u = UpdateQueueArgs {
        ring_base_address: q.ring_buf.va,
        queue_id: q.id,
        ring_size: q.args.ring_size,
        queue_percentage: 100,
        queue_priority: 7,
    };
    ioctl(&h.emu, h.kfd, request::UPDATE_QUEUE, &mut u).unwrap();
    assert!(wait_until(Duration::from_secs(5), || log.lock().unwrap().len() == 1));
    // A CU mask that enables no CU parks the queue; a real one resumes it.
    let zero = [0u32; 4];
    let mut c = SetCuMaskArgs { queue_id: q.id, num_cu_mask: 128, cu_mask_ptr: zero.as_ptr() as u64 };
    ioctl(&h.emu, h.kfd, request::SET_CU_MASK, &mut c).unwrap();
    q.submit(&[dispatch(obj, k.va + 64, 1, 1, 0, true)]);
    std::thread::sleep(SHORT);
    assert_eq!(log.lock().unwrap().len(), 1);
    let one = [1u32, 0, 0, 0];
    c.cu_mask_ptr = one.as_ptr() as u64;
    ioctl(&h.emu, h.kfd, request::SET_CU_MASK, &mut c).unwrap();
    assert!(wait_until(Duration::from_secs(5), || log.lock().unwrap().len() == 2));
}

#[test]
fn destroyed_queue_ignores_its_doorbell() {
    let h = Harness::new();
    let (obj, log) = logger(&h);
    let k = kernargs(&h, &[1]);
    let q = h.create_queue();
    h.destroy_queue(&q).unwrap();
    q.submit(&[dispatch(obj, k.va, 1, 1, 0, true)]);
    std::thread::sleep(SHORT);
    assert!(log.lock().unwrap().is_empty());
}

#[test]
fn queues_on_several_gpus_run_independently() {
    use aqueduct_kfd_emu::{EmuConfig, GpuProfile};
    let h = Harness::with(EmuConfig::with_gpus(&[GpuProfile::Gfx90a, GpuProfile::Gfx942, GpuProfile::Gfx1100]));
    let nop = h.emu.register_kernel(Twin::new("nop", 0, |ctx, _| {
        assert!(ctx.mem.gpu_id() != 0);
        Ok(())
    }));
    for g in 0..3 {
        let q = h.create_queue_with(g, &QueueSpec::default());
        let sigs = h.alloc_on(g, 4096, GTT);
        signal(&sigs, 0).reset(1);
        q.submit(&[dispatch(nop, 0, 1, 1, signal_handle(&sigs, 0), true)]);
        assert!(wait_signal(signal(&sigs, 0), 0), "gpu {g}");
    }
}

/// A dispatch that nothing else of its queue may start beside runs on the packet processor's
/// thread, which then reads the doorbell again for the packets that came meanwhile. Memory
/// mapped before such a packet was announced is the packet's memory: here its kernel arguments
/// and its source live in a buffer mapped while the first dispatch ran.
#[test]
fn a_packet_announced_while_a_dispatch_runs_sees_memory_mapped_before_it() {
    let h = Harness::new();
    let (started, go) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let (st, g) = (Arc::clone(&started), Arc::clone(&go));
    let gate = h.emu.register_kernel(Twin::new("gate", 0, move |_, _| {
        st.store(true, Ordering::Release);
        let end = std::time::Instant::now() + Duration::from_secs(30);
        while !g.load(Ordering::Acquire) && std::time::Instant::now() < end {
            std::thread::yield_now();
        }
        Ok(())
    }));
    let q = h.create_queue();
    let sigs = h.signals();
    signal(&sigs, 0).reset(2);
    let s = signal_handle(&sigs, 0);
    let result = h.alloc(4096, GTT);
    q.submit(&[dispatch(gate, 0, 1, 1, s, true)]);
    assert!(wait_until(Duration::from_secs(30), || started.load(Ordering::Acquire)));
    // While the gate runs: map a new buffer, put a copy's arguments and source in it, publish.
    let fresh = h.alloc(4096, GTT);
    // SAFETY: CPU-mapped, 4096 bytes.
    unsafe {
        *fresh.ptr::<CopyArgs>() = CopyArgs { dst: result.va, src: fresh.va + 64, bytes: 4 };
        *fresh.ptr::<u32>().byte_add(64) = 0x5eed;
    }
    q.submit(&[dispatch(h.emu.builtin_kernel(BuiltinKernel::Copy), fresh.va, 1, 1, s, true)]);
    go.store(true, Ordering::Release);
    assert!(wait_signal(signal(&sigs, 0), 0), "the copy faulted or never ran");
    // SAFETY: CPU-mapped result.
    assert_eq!(unsafe { *result.ptr::<u32>() }, 0x5eed);
}
