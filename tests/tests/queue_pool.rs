//! The hardware-queue pool (`docs/queue-pool.md`) through the public API, on core's loopback
//! and on kfd-direct over the emulated GPU (in order and adversarial): many streams over a small
//! budget each run in order and complete; priorities and CU masks reach the queues they must;
//! streams sharing one queue keep their order and never deadlock, with event waits both ways;
//! two threads on two streams each account every operation exactly once; a destroyed stream's
//! pending work is covered by the null stream's and the device's synchronisation.
//!
//! Order is checked with a `seq(cell, n)` kernel: it stores `n` if the cell holds `n - 1`, and
//! otherwise marks the cell as broken (`0x8000_0000 | n`), so a reordered, repeated or lost
//! operation shows in the final value.

use std::sync::atomic::{AtomicU32, Ordering};

use aqueduct::aql::QueueFault;
use aqueduct::loopback::{Dispatch, Loopback, LoopbackMemory, LoopbackQueue};
use aqueduct::{Backend, Capacities, Config, Error, KernelLaunch, Priority, Runtime, StreamHandle, Timeout};
use aqueduct_kfd::{EmuSys, Kfd, KfdConfig, WaitMode};
use aqueduct_kfd_emu::{EmuConfig, Twin};
use aqueduct_tests::StdThreads;

/// 1100 stream slots, 256 events, 8 threads, 64 host functions, 2 graphs of 32 nodes, 2
/// executables, 40 queue slots, a budget of 4 hardware queues per device.
type Big = Capacities<1100, 256, 8, 64, 2, 32, 2, 40, 4>;

const BROKEN: u32 = 0x8000_0000;

/// Loopback memory: 16 queues of 1024 packets, 1200 signals, 64 KiB of heap.
/// The default tables with a loopback of 16 queues of 1024 packets, 1200 signals, 64 KiB of heap.
type Device = aqueduct::Capacities<32, 64, 8, 64, 4, 32, 2, 40, 16, 8, 16, 1024, 64, 1200, 65536>;
type Mem = LoopbackMemory<Device>;
type Lb = Loopback<'static, Device>;

fn seq_lb(d: &Dispatch) -> Result<(), QueueFault> {
    // SAFETY: `seq` launches pass (address of a live, aligned u32 in backend memory, n).
    let (addr, n): (u64, u64) = unsafe { d.args() };
    // SAFETY: as above.
    let c = unsafe { AtomicU32::from_ptr(addr as usize as *mut u32) };
    let v = c.load(Ordering::SeqCst);
    c.store(if u64::from(v) + 1 == n { n as u32 } else { BROKEN | n as u32 }, Ordering::SeqCst);
    Ok(())
}

/// A runtime of configuration `C` on one of the backends, with its `seq` kernel.
trait Target: Sync {
    type B: Backend<Queue: Send + Sync> + Send + Sync + 'static;
    fn name(&self) -> &'static str;
    fn runtime<C: Config>(&self) -> (Box<Runtime<Self::B, StdThreads, C>>, u64);
}

struct LoopbackTarget;

impl Target for LoopbackTarget {
    type B = Lb;

    fn name(&self) -> &'static str {
        "loopback"
    }

    fn runtime<C: Config>(&self) -> (Box<Runtime<Lb, StdThreads, C>>, u64) {
        // The memory is a few MiB: zeroed on the heap, not built on the test's stack.
        let layout = std::alloc::Layout::new::<Mem>();
        // SAFETY: the layout is Mem's (not zero-sized); all-zero is LoopbackMemory's initial
        // state (`LoopbackMemory::new` is zeros: atomics, byte cells and zeroed signals), and the
        // allocation is leaked for the rest of the process.
        let mem: &'static Mem = unsafe {
            let p = std::alloc::alloc_zeroed(layout).cast::<Mem>();
            assert!(!p.is_null(), "out of memory");
            &*p
        };
        let rt = Box::new(Runtime::new(Loopback::new(mem), StdThreads));
        let k = rt.backend().register_kernel(seq_lb).expect("kernel slot");
        (rt, k)
    }
}

struct EmuTarget(EmuConfig);

impl Target for EmuTarget {
    type B = Kfd<EmuSys>;

    fn name(&self) -> &'static str {
        if self.0.adversarial_seed.is_some() {
            "kfd-direct on the adversarial emulator"
        } else {
            "kfd-direct on the emulator"
        }
    }

    fn runtime<C: Config>(&self) -> (Box<Runtime<Kfd<EmuSys>, StdThreads, C>>, u64) {
        let sys = EmuSys::new(self.0.clone()).expect("emulator");
        let k = sys.emu().register_kernel(Twin::new("seq", 16, |ctx, _| {
            let (a, n) = (ctx.arg_u64(0), ctx.arg_u64(8));
            let v = ctx.mem.read_u32(a)?;
            ctx.mem.write_u32(a, if u64::from(v) + 1 == n { n as u32 } else { BROKEN | n as u32 })
        }));
        let kfd = Kfd::open(sys, KfdConfig { wait: WaitMode::Hybrid(50_000), ..KfdConfig::default() })
            .expect("kfd-direct on the emulator");
        (Box::new(Runtime::new(kfd, StdThreads)), k)
    }
}

/// Object-safe dispatch over the targets (the scenarios are generic).
trait AnyTarget {
    fn visit(&self, s: &dyn Scenario);
}

trait Scenario {
    fn on_loopback(&self, t: &LoopbackTarget);
    fn on_emu(&self, t: &EmuTarget);
}

impl AnyTarget for LoopbackTarget {
    fn visit(&self, s: &dyn Scenario) {
        s.on_loopback(self)
    }
}

impl AnyTarget for EmuTarget {
    fn visit(&self, s: &dyn Scenario) {
        s.on_emu(self)
    }
}

/// Runs `scenario` on every target.
macro_rules! on_every_target {
    ($scenario:ident) => {{
        struct S;
        impl Scenario for S {
            fn on_loopback(&self, t: &LoopbackTarget) {
                $scenario(t)
            }
            fn on_emu(&self, t: &EmuTarget) {
                $scenario(t)
            }
        }
        for t in [
            &LoopbackTarget as &dyn AnyTarget,
            &EmuTarget(EmuConfig::default()),
            &EmuTarget(EmuConfig::default().adversarial(7)),
        ] {
            t.visit(&S);
        }
    }};
}

fn seq<B: Backend, C: Config>(
    rt: &Runtime<B, StdThreads, C>,
    s: StreamHandle,
    k: u64,
    cell: u64,
    n: u64,
) -> aqueduct::Result<()> {
    let mut args = [0u8; 16];
    args[..8].copy_from_slice(&cell.to_le_bytes());
    args[8..].copy_from_slice(&n.to_le_bytes());
    let l = KernelLaunch {
        kernel_object: k,
        grid: [1, 1, 1],
        workgroup: [1, 1, 1],
        group_segment_size: 0,
        private_segment_size: 0,
        kernarg: &args,
    };
    retry(|| rt.launch_kernel(s, &l))
}

/// Runs `f` until the ring has room (a full ring answers NotReady: the work ahead drains).
fn retry(mut f: impl FnMut() -> aqueduct::Result<()>) -> aqueduct::Result<()> {
    loop {
        match f() {
            Err(Error::NotReady) => std::thread::yield_now(),
            r => return r,
        }
    }
}

/// `n` zeroed u32 cells in backend host memory.
fn cells<B: Backend, C: Config>(rt: &Runtime<B, StdThreads, C>, n: usize) -> u64 {
    let a = rt.host_malloc(4 * n).unwrap();
    for i in 0..n {
        write(a + 4 * i as u64, 0);
    }
    a
}

fn read(addr: u64) -> u32 {
    // SAFETY: callers pass cells from `cells` (live, aligned, host-accessible backend memory).
    unsafe { AtomicU32::from_ptr(addr as usize as *mut u32) }.load(Ordering::SeqCst)
}

fn write(addr: u64, v: u32) {
    // SAFETY: as in `read`.
    unsafe { AtomicU32::from_ptr(addr as usize as *mut u32) }.store(v, Ordering::SeqCst)
}

/// Holds later work of `s` until the returned cell is set to 1.
fn gate<B: Backend, C: Config>(rt: &Runtime<B, StdThreads, C>, s: StreamHandle) -> u64 {
    let g = cells(rt, 1);
    rt.wait_value32(s, g, 1, 1, u32::MAX).unwrap();
    g
}

// ----- many streams over a small budget ----------------------------------------------------------

fn thousand_streams<T: Target>(t: &T) {
    let (rt, k) = t.runtime::<Big>();
    assert_eq!(rt.max_hw_queues(0), Ok(4));
    let n = 1000;
    let c = cells(&rt, n);
    let streams: Vec<StreamHandle> = (0..n).map(|_| rt.stream_create(1).unwrap()).collect();
    assert_eq!(rt.hw_queue_count(0), 4, "{}: streams beyond the budget share", t.name());
    for round in 1..=3u64 {
        for (i, &s) in streams.iter().enumerate() {
            seq(&rt, s, k, c + 4 * i as u64, round).unwrap();
        }
    }
    for &s in &streams {
        rt.stream_synchronize(s).unwrap();
    }
    for i in 0..n {
        assert_eq!(read(c + 4 * i as u64), 3, "{}: stream {i} ran its three operations in order", t.name());
    }
    for s in streams {
        rt.stream_destroy(s).unwrap();
    }
    rt.device_synchronize().unwrap();
}

#[test]
fn a_thousand_streams_over_four_hardware_queues_each_run_in_order() {
    on_every_target!(thousand_streams);
}

// ----- keys: priority and CU mask -----------------------------------------------------------------

#[test]
fn priorities_and_cu_masks_reach_the_queues_they_must() {
    let (rt, _) = LoopbackTarget.runtime::<Big>();
    rt.set_max_hw_queues(0, 1).unwrap();
    let lb = rt.backend();
    let q = |s: StreamHandle| rt.with_stream_queue(s, |q| q.0).unwrap();
    let high = rt.stream_create_with_priority(0, -1).unwrap();
    let low = rt.stream_create_with_priority(0, 1).unwrap();
    let normal = rt.stream_create(0).unwrap();
    let normal2 = rt.stream_create(0).unwrap();
    let high2 = rt.stream_create_with_priority(0, -5).unwrap();
    let m1 = rt.stream_create_with_cu_mask(&[0xf]).unwrap();
    let m1b = rt.stream_create_with_cu_mask(&[0xf]).unwrap();
    let m2 = rt.stream_create_with_cu_mask(&[0xf0]).unwrap();
    // Each key got a queue even past the budget of one; streams of a key share it.
    assert_eq!(lb.queue_priority(&LoopbackQueue(q(high))), Priority::High);
    assert_eq!(lb.queue_priority(&LoopbackQueue(q(low))), Priority::Low);
    assert_eq!(lb.queue_priority(&LoopbackQueue(q(normal))), Priority::Normal);
    assert_eq!(q(normal), q(normal2));
    assert_eq!(q(high), q(high2));
    assert_ne!(q(high), q(low));
    // A CU-masked stream shares only with the identical mask (and priority).
    assert_eq!(q(m1), q(m1b));
    assert_ne!(q(m1), q(m2));
    assert_ne!(q(m1), q(normal));
    assert_eq!(lb.queue_cu_mask(&LoopbackQueue(q(m1))).map(|m| m.words()[0]), Some(0xf));
    assert_eq!(lb.queue_cu_mask(&LoopbackQueue(q(m2))).map(|m| m.words()[0]), Some(0xf0));
    assert_eq!(lb.queue_cu_mask(&LoopbackQueue(q(normal))), None);
    assert_eq!(rt.hw_queue_count(0), 5);
}

// ----- one shared queue ---------------------------------------------------------------------------

fn shared_queue_order<T: Target>(t: &T) {
    let (rt, k) = t.runtime::<Big>();
    rt.set_max_hw_queues(0, 1).unwrap();
    let a = rt.stream_create(1).unwrap();
    let b = rt.stream_create(1).unwrap();
    let same = rt.with_stream_queue(a, |qa| rt.with_stream_queue(b, |qb| std::ptr::eq(qa, qb)).unwrap()).unwrap();
    assert!(same || rt.hw_queue_count(0) == 1, "{}: both streams on the one queue", t.name());
    let (ca, cb) = (cells(&rt, 1), cells(&rt, 1));
    let ea = rt.event_create(0).unwrap();
    let eb = rt.event_create(0).unwrap();
    // a is held by a wait: on the shared queue b's later packets wait too (streams sharing a
    // queue are serialized: docs/queue-pool.md, "Head-of-line effects").
    let g = gate(&rt, a);
    seq(&rt, a, k, ca, 1).unwrap();
    retry(|| rt.event_record(ea, a, 0)).unwrap();
    for n in 1..=3 {
        seq(&rt, b, k, cb, n).unwrap();
    }
    // b waits for a's record, a for b's: both directions, all published while held.
    retry(|| rt.stream_wait_event(b, ea, 0)).unwrap();
    seq(&rt, b, k, cb, 4).unwrap();
    retry(|| rt.event_record(eb, b, 0)).unwrap();
    retry(|| rt.stream_wait_event(a, eb, 0)).unwrap();
    seq(&rt, a, k, ca, 2).unwrap();
    assert_eq!(rt.stream_query(b), Err(Error::NotReady), "{}: held behind a's wait", t.name());
    assert_eq!((read(ca), read(cb)), (0, 0));
    write(g, 1);
    rt.stream_synchronize(a).unwrap();
    rt.stream_synchronize(b).unwrap();
    assert_eq!((read(ca), read(cb)), (2, 4), "{}: each stream in order, no deadlock", t.name());
    // Waits both ways, alternating, without a hold.
    for n in 0..50u64 {
        seq(&rt, a, k, ca, 3 + n).unwrap();
        retry(|| rt.event_record(ea, a, 0)).unwrap();
        retry(|| rt.stream_wait_event(b, ea, 0)).unwrap();
        seq(&rt, b, k, cb, 5 + n).unwrap();
        retry(|| rt.event_record(eb, b, 0)).unwrap();
        retry(|| rt.stream_wait_event(a, eb, 0)).unwrap();
    }
    rt.device_synchronize().unwrap();
    assert_eq!((read(ca), read(cb)), (52, 54), "{}", t.name());
    // Many alternating operations on the one queue.
    for n in 55..=200 {
        seq(&rt, b, k, cb, n).unwrap();
        seq(&rt, a, k, ca, n - 2).unwrap();
    }
    rt.device_synchronize().unwrap();
    assert_eq!((read(ca), read(cb)), (198, 200), "{}", t.name());
}

#[test]
fn two_streams_sharing_one_queue_keep_order_and_wait_on_each_other_both_ways() {
    on_every_target!(shared_queue_order);
}

// ----- two threads, two streams each ---------------------------------------------------------------

fn two_threads<T: Target>(t: &T, budget: u32, ops: u64) {
    let (rt, k) = t.runtime::<Big>();
    rt.set_max_hw_queues(0, budget).unwrap();
    let c = cells(&rt, 4);
    let rt = &*rt;
    std::thread::scope(|sc| {
        for th in 0..2u64 {
            sc.spawn(move || {
                let s = [rt.stream_create(1).unwrap(), rt.stream_create(1).unwrap()];
                for n in 1..=ops {
                    for (j, &sj) in s.iter().enumerate() {
                        seq(rt, sj, k, c + 4 * (2 * th + j as u64), n).unwrap();
                    }
                }
                for sj in s {
                    rt.stream_synchronize(sj).unwrap();
                    rt.stream_destroy(sj).unwrap();
                }
            });
        }
    });
    for i in 0..4 {
        assert_eq!(
            u64::from(read(c + 4 * i)),
            ops,
            "{} (budget {budget}): stream {i}, every operation once, in order",
            t.name()
        );
    }
}

fn two_threads_dedicated<T: Target>(t: &T) {
    two_threads(t, 4, 100_000);
}

fn two_threads_one_queue<T: Target>(t: &T) {
    two_threads(t, 1, 20_000);
}

#[test]
fn two_threads_two_streams_a_hundred_thousand_operations_each_exactly_once() {
    on_every_target!(two_threads_dedicated);
}

#[test]
fn two_threads_four_streams_on_one_shared_queue_exactly_once() {
    on_every_target!(two_threads_one_queue);
}

// ----- destroyed streams' work ------------------------------------------------------------------------

fn destroyed_work<T: Target>(t: &T) {
    let (rt, k) = t.runtime::<Big>();
    let c = cells(&rt, 2);
    let s = rt.stream_create(0).unwrap();
    // The "long kernel": held until the test opens the gate.
    let g = gate(&rt, s);
    seq(&rt, s, k, c, 1).unwrap();
    rt.stream_destroy(s).unwrap();
    assert_eq!(rt.stream_query(s), Err(Error::ContextIsDestroyed));
    // Null-stream work waits for it (implicit synchronisation), and so do the syncs.
    seq(&rt, StreamHandle::NULL, k, c + 4, 1).unwrap();
    assert_eq!(rt.stream_query(StreamHandle::NULL), Err(Error::NotReady));
    assert_eq!(rt.stream_synchronize_timeout(StreamHandle::NULL, Timeout(1_000_000)), Err(Error::NotReady));
    assert_eq!(rt.device_synchronize_timeout(Timeout(1_000_000)), Err(Error::NotReady));
    assert_eq!((read(c), read(c + 4)), (0, 0), "{}: nothing ran past the held work", t.name());
    write(g, 1);
    rt.stream_synchronize(StreamHandle::NULL).unwrap();
    assert_eq!((read(c), read(c + 4)), (1, 1), "{}", t.name());
    rt.device_synchronize().unwrap();
    // The destroyed stream's slot came back once its work was done.
    let again: Vec<StreamHandle> = (0..1099).map(|_| rt.stream_create(1).unwrap()).collect();
    assert_eq!(again.len(), 1099);
}

#[test]
fn a_destroyed_streams_pending_work_is_covered_by_null_stream_and_device_sync() {
    on_every_target!(destroyed_work);
}
