//! The GPU runs queues and work-groups concurrently, within the AQL rules (docs/kfd-aql.md §3.4):
//! dispatches of different queues overlap; on one queue a packet without the barrier bit may
//! start while earlier ones run and one with it never does; a blocked barrier-AND holds its own
//! queue only; when workers are busy, higher-priority queues' work-groups start first; a CU mask
//! confines a queue's work-groups to its workers.
//!
//! Overlap is shown by kernels that wait for each other (a bounded spin whose bound only turns a
//! broken rule into a failure instead of a hang), never by wall time.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aqueduct::aql::BarrierPacket;
use aqueduct_kfd_emu::abi::*;
use aqueduct_kfd_emu::{EmuConfig, KernelCtx, KernelError, Twin};
use common::*;

/// The bound of a spin that waits for another kernel: only reached when a rule is broken.
const DEADLOCK_GUARD: Duration = Duration::from_secs(30);

/// Spins until `flag` is set; returns whether it was (false: the guard ran out).
fn wait_for(flag: &AtomicBool) -> bool {
    let end = Instant::now() + DEADLOCK_GUARD;
    while !flag.load(Ordering::Acquire) {
        if Instant::now() > end {
            return false;
        }
        std::thread::yield_now();
    }
    true
}

/// A kernel that waits for `flag` (recording whether it saw it) and one that sets it.
fn waiter_and_setter(h: &Harness) -> (u64, u64, Arc<AtomicBool>) {
    let flag = Arc::new(AtomicBool::new(false));
    let saw = Arc::new(AtomicBool::new(false));
    let (f, s) = (Arc::clone(&flag), Arc::clone(&saw));
    let waiter = h.emu.register_kernel(Twin::new("wait_for_flag", 0, move |_, _| {
        s.store(wait_for(&f), Ordering::Release);
        Ok(())
    }));
    let f = Arc::clone(&flag);
    let setter = h.emu.register_kernel(Twin::new("set_flag", 0, move |_, _| {
        f.store(true, Ordering::Release);
        Ok(())
    }));
    (waiter, setter, saw)
}

#[test]
fn long_kernels_on_two_queues_run_at_the_same_time() {
    let h = Harness::with(EmuConfig::default().cus(2));
    let (waiter, setter, saw) = waiter_and_setter(&h);
    let (q1, q2) = (h.create_queue(), h.create_queue());
    let sigs = h.signals();
    signal(&sigs, 0).reset(1);
    signal(&sigs, 1).reset(1);
    q1.submit(&[dispatch(waiter, 0, 1, 1, signal_handle(&sigs, 0), true)]);
    q2.submit(&[dispatch(setter, 0, 1, 1, signal_handle(&sigs, 1), true)]);
    assert!(wait_until(DEADLOCK_GUARD * 2, || signal(&sigs, 0).load() == 0 && signal(&sigs, 1).load() == 0));
    assert!(saw.load(Ordering::Acquire), "the first queue's kernel saw the second's: they ran together");
}

#[test]
fn on_one_queue_packets_without_the_barrier_bit_may_overlap() {
    let h = Harness::with(EmuConfig::default().cus(2));
    let (waiter, setter, saw) = waiter_and_setter(&h);
    let q = h.create_queue();
    let sigs = h.signals();
    signal(&sigs, 0).reset(2);
    let s = signal_handle(&sigs, 0);
    q.submit(&[dispatch(waiter, 0, 1, 1, s, false), dispatch(setter, 0, 1, 1, s, false)]);
    assert!(wait_until(DEADLOCK_GUARD * 2, || signal(&sigs, 0).load() == 0));
    assert!(saw.load(Ordering::Acquire), "the second packet started while the first ran");
    assert!(wait_until(Duration::from_secs(5), || q.read_index() == 2));
}

#[test]
fn on_one_queue_a_packet_with_the_barrier_bit_never_overlaps_earlier_ones() {
    let h = Harness::with(EmuConfig::default().cus(2));
    let log = Arc::new(Mutex::new(Vec::new()));
    let (started, release) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let (l, st, rel) = (Arc::clone(&log), Arc::clone(&started), Arc::clone(&release));
    let first = h.emu.register_kernel(Twin::new("first", 0, move |_, _| {
        l.lock().unwrap().push("first start");
        st.store(true, Ordering::Release);
        let released = wait_for(&rel);
        l.lock().unwrap().push(if released { "first end" } else { "first gave up" });
        Ok(())
    }));
    let l = Arc::clone(&log);
    let second = h.emu.register_kernel(Twin::new("second", 0, move |_, _| {
        l.lock().unwrap().push("second start");
        Ok(())
    }));
    let q = h.create_queue();
    let sigs = h.signals();
    signal(&sigs, 0).reset(2);
    let s = signal_handle(&sigs, 0);
    let before = h.emu.stats().dispatches;
    q.submit(&[dispatch(first, 0, 1, 1, s, false), dispatch(second, 0, 1, 1, s, true)]);
    assert!(wait_for(&started));
    // Both packets were published with one doorbell: the packet processor looked at the second
    // in the same pass that launched the first, before the first started. It must not have
    // launched it.
    assert_eq!(h.emu.stats().dispatches - before, 1, "the barrier-bit packet waits while the first runs");
    release.store(true, Ordering::Release);
    assert!(wait_signal(signal(&sigs, 0), 0));
    assert_eq!(*log.lock().unwrap(), ["first start", "first end", "second start"]);
}

#[test]
fn a_blocked_barrier_and_holds_only_its_own_queue() {
    let h = Harness::with(EmuConfig::default().cus(2));
    let log = Arc::new(Mutex::new(Vec::new()));
    let l = Arc::clone(&log);
    let obj = h.emu.register_kernel(Twin::new("log", 8, move |ctx: &KernelCtx<'_>, _| {
        l.lock().unwrap().push(ctx.arg_u32(0));
        Ok(())
    }));
    let k = h.alloc(4096, GTT);
    // SAFETY: the kernarg page is CPU-mapped; 64 bytes per slot.
    unsafe {
        *k.ptr::<u32>() = 1;
        *k.ptr::<u32>().add(16) = 2;
    }
    let sigs = h.signals();
    signal(&sigs, 0).reset(1); // the dependency
    signal(&sigs, 1).reset(1); // queue 1's kernel
    signal(&sigs, 2).reset(1); // queue 2's kernel
    let (q1, q2) = (h.create_queue(), h.create_queue());
    q1.submit(&[BarrierPacket::and([signal_handle(&sigs, 0), 0, 0, 0, 0], 0)]);
    q1.submit(&[dispatch(obj, k.va, 1, 1, signal_handle(&sigs, 1), true)]);
    q2.submit(&[dispatch(obj, k.va + 64, 1, 1, signal_handle(&sigs, 2), true)]);
    assert!(wait_signal(signal(&sigs, 2), 0), "the other queue runs");
    assert_eq!(*log.lock().unwrap(), [2], "the blocked queue's kernel waits for the dependency");
    assert_eq!((q1.read_index(), signal(&sigs, 1).load()), (0, 1));
    signal(&sigs, 0).reset(0);
    assert!(wait_signal(signal(&sigs, 1), 0));
    assert_eq!(*log.lock().unwrap(), [2, 1]);
    assert!(wait_until(Duration::from_secs(5), || q1.read_index() == 2));
}

#[test]
fn work_groups_of_a_higher_priority_queue_start_first_when_workers_are_busy() {
    // One worker, held by a gate kernel while both queues' dispatches are launched.
    let h = Harness::with(EmuConfig::default().cus(1));
    let (started, release) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let (st, rel) = (Arc::clone(&started), Arc::clone(&release));
    let gate = h.emu.register_kernel(Twin::new("gate", 0, move |_, _| {
        st.store(true, Ordering::Release);
        if wait_for(&rel) {
            Ok(())
        } else {
            Err(KernelError::Trap)
        }
    }));
    let log = Arc::new(Mutex::new(Vec::new()));
    let l = Arc::clone(&log);
    let obj = h.emu.register_kernel(Twin::new("log", 8, move |ctx: &KernelCtx<'_>, wg| {
        l.lock().unwrap().push((ctx.arg_u32(0), wg[0]));
        Ok(())
    }));
    let k = h.alloc(4096, GTT);
    // SAFETY: the kernarg page is CPU-mapped; 64 bytes per slot.
    unsafe {
        *k.ptr::<u32>() = 0;
        *k.ptr::<u32>().add(16) = 15;
    }
    let sigs = h.signals();
    for i in 0..3 {
        signal(&sigs, i).reset(1);
    }
    let busy = h.create_queue_with(0, &QueueSpec { priority: 7, ..Default::default() });
    let normal = h.create_queue_with(0, &QueueSpec { priority: 0, ..Default::default() });
    let high = h.create_queue_with(0, &QueueSpec { priority: 15, ..Default::default() });
    busy.submit(&[dispatch(gate, 0, 1, 1, signal_handle(&sigs, 0), true)]);
    assert!(wait_for(&started));
    // The normal queue's dispatch is queued first, then the high-priority one: 4 work-groups each.
    normal.submit(&[dispatch(obj, k.va, 4, 1, signal_handle(&sigs, 1), true)]);
    assert!(wait_until(DEADLOCK_GUARD, || h.emu.pending_work_groups(h.gpu()) == Ok(4)));
    high.submit(&[dispatch(obj, k.va + 64, 4, 1, signal_handle(&sigs, 2), true)]);
    assert!(wait_until(DEADLOCK_GUARD, || h.emu.pending_work_groups(h.gpu()) == Ok(8)));
    release.store(true, Ordering::Release);
    for i in 0..3 {
        assert!(wait_signal(signal(&sigs, i), 0), "dispatch {i}");
    }
    let log = log.lock().unwrap();
    let order: Vec<u32> = log.iter().map(|&(p, _)| p).collect();
    assert_eq!(order, [15, 15, 15, 15, 0, 0, 0, 0], "{log:?}");
}

/// Sets a queue's CU mask to the CUs `cu` of the device for which `on(cu)` holds.
fn set_cu_mask(h: &Harness, q: &Queue, on: impl Fn(u32) -> bool) {
    let mut words = [0u32; 4];
    for cu in 0..128 {
        if on(cu) {
            words[(cu / 32) as usize] |= 1 << (cu % 32);
        }
    }
    let mut a = SetCuMaskArgs { queue_id: q.id, num_cu_mask: 128, cu_mask_ptr: words.as_ptr() as u64 };
    ioctl(&h.emu, h.kfd, request::SET_CU_MASK, &mut a).unwrap();
}

/// Runs a 32-work-group dispatch on `q`; returns the workers that ran its work-groups.
fn workers_used(h: &Harness, q: &Queue, obj: u64, seen: &Mutex<Vec<u32>>) -> Vec<u32> {
    seen.lock().unwrap().clear();
    let sigs = h.signals();
    signal(&sigs, 0).reset(1);
    q.submit(&[dispatch(obj, 0, 32, 1, signal_handle(&sigs, 0), true)]);
    assert!(wait_signal(signal(&sigs, 0), 0));
    let mut w = seen.lock().unwrap().clone();
    assert_eq!(w.len(), 32);
    w.sort_unstable();
    w.dedup();
    w
}

#[test]
fn a_cu_mask_restricts_work_groups_to_its_workers() {
    // Four workers: CU c runs on worker c % 4.
    let h = Harness::with(EmuConfig::default().cus(4));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = Arc::clone(&seen);
    let running = Arc::new(AtomicU32::new(0));
    let r = Arc::clone(&running);
    let obj = h.emu.register_kernel(Twin::new("where", 0, move |ctx: &KernelCtx<'_>, _| {
        // Stay a moment so several workers would be used if the mask allowed it.
        r.fetch_add(1, Ordering::AcqRel);
        std::thread::yield_now();
        r.fetch_sub(1, Ordering::AcqRel);
        s.lock().unwrap().push(ctx.worker);
        Ok(())
    }));
    let q = h.create_queue();
    set_cu_mask(&h, &q, |cu| cu % 4 == 1);
    assert_eq!(workers_used(&h, &q, obj, &seen), [1], "CUs 1, 5, 9, … are worker 1's");
    set_cu_mask(&h, &q, |cu| cu % 4 >= 2);
    let w = workers_used(&h, &q, obj, &seen);
    assert!(!w.is_empty() && w.iter().all(|&x| x == 2 || x == 3), "workers {w:?} outside {{2, 3}}");
    set_cu_mask(&h, &q, |cu| cu < 104);
    let w = workers_used(&h, &q, obj, &seen);
    assert!(w.iter().all(|&x| x < 4), "{w:?}");
}
