//! The fault catalogue (docs/faults.md): each scenario as one test, running the core `Runtime`
//! over kfd-direct on the emulated GPU with its fault injected. `fault_01` to `fault_25` are the
//! catalogue's rows 1 to 25 in order; `fault_26` extends row 11 to a blocking stream whose failure
//! must release dependent null-stream work.
//!
//! Every test checks three things:
//! - the expected outcome on the faulting stream (mapped to aqueduct's HIP codes below);
//! - exactly-once accounting: each accepted command ends once — it ran once (its own cell or log
//!   entry shows it), or it failed with its error reported on its stream and never ran;
//! - an unaffected stream: on the same device where amdkfd's semantics leave one (another stream,
//!   or another process for faults that evict a whole process), on a second emulated GPU where
//!   the fault takes the whole device (reset, a dead command processor).
//!
//! Outcome mapping: `InvalidHandle`/`Destroyed` → `InvalidHandle` (400) / `ContextIsDestroyed`
//! (709); `TableFull` → `OutOfMemory` (2); `QueueFull`/`Timeout` → `NotReady` (600); queue error
//! → `LaunchFailure` (719); `MemoryFault` → `IllegalAddress` (700); `DeviceLost` →
//! `LaunchTimeOut` (702); `Detached` → `StreamDetached` (916); capture codes 900–908;
//! `ProcessForked` → `NotInitialized` (3).

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use aqueduct::aql::{AqlRing, BarrierPacket, Packet, PacketType};
use aqueduct::{Backend, Error, EventHandle, HostFn, KernelLaunch, Runtime, StreamHandle, Timeout};
use aqueduct_kfd::{DeviceFault, EmuSys, Errno, Kfd, KfdConfig, KfdError, Op, WaitMode};
use aqueduct_kfd_emu::{EmuConfig, GpuProfile, QueueState, Twin};
use aqueduct_tests::conformance::{emu_kernels, log_ids, Kernels, LOG_BYTES};
use aqueduct_tests::StdThreads;

type Rt = Runtime<Kfd<EmuSys>, StdThreads>;

/// A short bound for waits that must run out (work that cannot finish yet).
const SHORT: Timeout = Timeout(20_000_000);
/// A generous bound for waits that must end early with an error or success: reaching it
/// (`NotReady`) fails the test, so the result shows the wait did not just run out.
const LONG: Timeout = Timeout(20 * Timeout::SECOND.0);

struct Env {
    rt: Box<Rt>,
    k: Kernels,
    sys: EmuSys,
}

fn env_with(config: EmuConfig, kfd: KfdConfig) -> Env {
    let sys = EmuSys::new(config).expect("emulator");
    let k = emu_kernels(&sys);
    let b = Kfd::open(sys.clone(), KfdConfig { wait: WaitMode::Hybrid(50_000), ..kfd }).expect("kfd-direct");
    Env { rt: Box::new(Runtime::new(b, StdThreads)), k, sys }
}

fn env() -> Env {
    env_with(EmuConfig::default(), KfdConfig::default())
}

fn two_gpus() -> Env {
    env_with(EmuConfig::with_gpus(&[GpuProfile::Gfx90a, GpuProfile::Gfx1100]), KfdConfig::default())
}

/// Another process on the same emulated machine (its own KFD process, VM and queues) with a
/// runtime of its own: what a fault confined to one process must leave alone on the same device.
fn second_process(e: &Env) -> Env {
    let sys = EmuSys::over(e.sys.emu().fork_child());
    let config = KfdConfig { wait: WaitMode::Hybrid(50_000), ..KfdConfig::default() };
    let b = Kfd::open(sys.clone(), config).expect("kfd-direct in a second process");
    Env { rt: Box::new(Runtime::new(b, StdThreads)), k: e.k, sys }
}

fn launch(rt: &Rt, s: StreamHandle, kernel: u64, args: &[u8]) -> aqueduct::Result<()> {
    rt.launch_kernel(s, &kl(kernel, args))
}

/// Launches, retrying while the ring is full (`NotReady` is back-pressure: nothing was
/// reserved, scenario 5).
fn launch_retry(rt: &Rt, s: StreamHandle, kernel: u64, args: &[u8]) -> aqueduct::Result<()> {
    loop {
        match launch(rt, s, kernel, args) {
            Err(Error::NotReady) => std::thread::yield_now(),
            r => return r,
        }
    }
}

fn kl(kernel: u64, args: &[u8]) -> KernelLaunch<'_> {
    KernelLaunch {
        kernel_object: kernel,
        grid: [1, 1, 1],
        workgroup: [1, 1, 1],
        group_segment_size: 0,
        private_segment_size: 0,
        kernarg: args,
    }
}

fn a1(a: u64) -> [u8; 8] {
    a.to_le_bytes()
}

fn a2(a: u64, b: u64) -> [u8; 16] {
    let mut x = [0u8; 16];
    x[..8].copy_from_slice(&a.to_le_bytes());
    x[8..].copy_from_slice(&b.to_le_bytes());
    x
}

/// A zeroed u32 counter in backend host memory.
fn cell(rt: &Rt) -> u64 {
    let a = rt.host_malloc(64).expect("cell");
    // SAFETY: fresh host-visible backend memory.
    unsafe { std::ptr::write_bytes(a as usize as *mut u8, 0, 64) };
    a
}

fn log(rt: &Rt) -> u64 {
    let a = rt.host_malloc(LOG_BYTES).expect("log");
    // SAFETY: fresh host-visible backend memory of LOG_BYTES.
    unsafe { std::ptr::write_bytes(a as usize as *mut u8, 0, LOG_BYTES) };
    a
}

fn get(a: u64) -> u32 {
    // SAFETY: backend host memory owned by the test.
    unsafe { AtomicU32::from_ptr(a as usize as *mut u32) }.load(Ordering::SeqCst)
}

fn set(a: u64, v: u32) {
    // SAFETY: backend host memory owned by the test.
    unsafe { AtomicU32::from_ptr(a as usize as *mut u32) }.store(v, Ordering::SeqCst);
}

/// Makes `s` wait until `*flag == 1` (a stalled command: its completion never arrives until the
/// host writes the flag).
fn stall(rt: &Rt, s: StreamHandle, flag: u64) {
    rt.wait_value32(s, flag, 1, 1, u32::MAX).unwrap();
}

/// Checks that `s` works: `n` increments land, in order, exactly once.
fn assert_healthy(rt: &Rt, k: &Kernels, s: StreamHandle) {
    let l = log(rt);
    for id in 1..=4 {
        launch(rt, s, k.log, &a2(l, id)).unwrap();
    }
    rt.stream_synchronize_timeout(s, LONG).unwrap();
    assert_eq!(log_ids(l), vec![1, 2, 3, 4]);
}

fn write_index(rt: &Rt, s: StreamHandle) -> u64 {
    rt.with_stream_queue(s, |q| rt.backend().queue_desc(q).unwrap().ring.write_index()).unwrap()
}

fn gpu(e: &Env, device: u32) -> u32 {
    e.rt.backend().gpu_id(device).unwrap()
}

/// The emulator's state of the hardware queue behind `s`.
fn queue_state(e: &Env, s: StreamHandle) -> Option<QueueState> {
    let qid = e.rt.with_stream_queue(s, |q| e.rt.backend().queue_id(q)).unwrap().expect("a KFD queue");
    e.sys.emu().queue_state(qid)
}

/// A host function that counts its calls in the `AtomicU32` its user data points to: each test
/// owns its counter, so tests running in parallel never see each other's calls.
unsafe extern "C" fn count_call(data: *mut core::ffi::c_void) {
    // SAFETY: `counting` passes a counter the test keeps alive until the runtime is gone.
    let calls = unsafe { &*(data as *const AtomicU32) };
    calls.fetch_add(1, Ordering::SeqCst);
}

/// A host function counting into `calls`, which must outlive the runtime it is enqueued on.
fn counting(calls: &AtomicU32) -> HostFn {
    HostFn::Plain { func: count_call, data: calls as *const AtomicU32 as *mut core::ffi::c_void }
}

// ----- 1–4: handles and tables ----------------------------------------------------------------

#[test]
fn fault_01_null_zero_and_out_of_range_handles() {
    let e = env();
    let rt = &*e.rt;
    let s = rt.stream_create(1).unwrap();
    let ev = rt.event_create(0).unwrap();
    let c = cell(rt);
    let before = cell(rt);
    // Work accepted before the bad calls, still pending while they are refused.
    let flag = cell(rt);
    stall(rt, s, flag);
    launch(rt, s, e.k.inc, &a1(before)).unwrap();
    // Null / zero handles.
    assert_eq!(rt.stream_destroy(StreamHandle(0)), Err(Error::InvalidHandle));
    assert_eq!(rt.event_destroy(EventHandle::NULL), Err(Error::InvalidHandle));
    assert_eq!(rt.event_query(EventHandle::NULL), Err(Error::InvalidHandle));
    assert_eq!(rt.event_record(EventHandle::NULL, s, 0), Err(Error::InvalidHandle));
    // Slot index past the table (the low 16 bits of a handle are its slot).
    let far = StreamHandle((s.0 & !0xffff) | 0xfff0);
    let far_ev = EventHandle((ev.0 & !0xffff) | 0xfff0);
    assert_eq!(rt.stream_query(far), Err(Error::InvalidHandle));
    assert_eq!(rt.stream_destroy(far), Err(Error::InvalidHandle));
    assert_eq!(launch(rt, far, e.k.inc, &a1(c)), Err(Error::InvalidHandle));
    assert_eq!(rt.event_query(far_ev), Err(Error::InvalidHandle));
    assert_eq!(rt.event_record(far_ev, s, 0), Err(Error::InvalidHandle));
    assert_eq!(rt.stream_wait_event(s, far_ev, 0), Err(Error::InvalidHandle));
    // Garbage bits.
    assert_eq!(rt.stream_query(StreamHandle(0xdead_beef_dead_beef)), Err(Error::InvalidHandle));
    // No state change: nothing refused ran, the accepted launch runs once, the real objects
    // still work.
    set(flag, 1);
    rt.stream_synchronize_timeout(s, LONG).unwrap();
    assert_eq!((get(c), get(before)), (0, 1));
    assert_healthy(rt, &e.k, s);
    rt.event_record(ev, s, 0).unwrap();
    rt.event_synchronize_timeout(ev, LONG).unwrap();
}

#[test]
fn fault_02_stale_handle_never_acts_on_the_new_occupant() {
    let e = env();
    let rt = &*e.rt;
    let c = cell(rt);
    let accepted = cell(rt);
    let old = rt.stream_create(1).unwrap();
    // Work accepted before the destroy completes once, even though the handle goes stale.
    launch(rt, old, e.k.inc, &a1(accepted)).unwrap();
    rt.stream_destroy(old).unwrap();
    rt.device_synchronize_timeout(LONG).unwrap();
    // The slot is reused by a new stream (same slot bits, newer generation).
    let new = rt.stream_create(1).unwrap();
    assert_eq!(old.0 & 0xffff, new.0 & 0xffff, "the slot was reused");
    assert_ne!(old, new);
    // The new stream may take over the old one's queue, whose index already counts old work.
    let w0 = write_index(rt, new);
    assert_eq!(launch(rt, old, e.k.inc, &a1(c)), Err(Error::ContextIsDestroyed));
    assert_eq!(rt.stream_query(old), Err(Error::ContextIsDestroyed));
    assert_eq!(rt.stream_destroy(old), Err(Error::ContextIsDestroyed));
    assert_eq!(rt.stream_synchronize(old), Err(Error::ContextIsDestroyed));
    // The new occupant saw none of it.
    rt.stream_synchronize_timeout(new, LONG).unwrap();
    assert_eq!(write_index(rt, new), w0, "nothing was published on the new stream");
    rt.device_synchronize_timeout(LONG).unwrap();
    assert_eq!((get(c), get(accepted)), (0, 1));
    assert_healthy(rt, &e.k, new);
    // Events: the same rule.
    let ev_old = rt.event_create(0).unwrap();
    rt.event_destroy(ev_old).unwrap();
    let ev_new = rt.event_create(0).unwrap();
    assert_eq!(rt.event_record(ev_old, new, 0), Err(Error::ContextIsDestroyed));
    assert_eq!(rt.event_query(ev_old), Err(Error::ContextIsDestroyed));
    rt.event_query(ev_new).unwrap();
}

#[test]
fn fault_03_double_destroy() {
    let e = env();
    let rt = &*e.rt;
    let other = rt.stream_create(1).unwrap();
    let s = rt.stream_create(1).unwrap();
    assert_healthy(rt, &e.k, s);
    let c = cell(rt);
    let flag = cell(rt);
    let ev = rt.event_create(0).unwrap();
    // Destroyed twice with work still pending: the work completes once, the second destroy
    // releases nothing.
    stall(rt, s, flag);
    launch(rt, s, e.k.inc, &a1(c)).unwrap();
    rt.event_record(ev, s, 0).unwrap();
    rt.stream_destroy(s).unwrap();
    assert_eq!(rt.stream_destroy(s), Err(Error::ContextIsDestroyed));
    rt.event_destroy(ev).unwrap();
    assert_eq!(rt.event_destroy(ev), Err(Error::ContextIsDestroyed));
    assert_healthy(rt, &e.k, other);
    set(flag, 1);
    rt.device_synchronize_timeout(LONG).unwrap();
    assert_eq!(get(c), 1, "the destroyed stream's work ran exactly once");
    // No double release: the cached queue and signals serve exactly one new owner each, and
    // two new streams never share a queue.
    let a = rt.stream_create(1).unwrap();
    let b = rt.stream_create(1).unwrap();
    let qa = rt.with_stream_queue(a, |q| q.slot()).unwrap();
    let qb = rt.with_stream_queue(b, |q| q.slot()).unwrap();
    assert_ne!(qa, qb);
    assert_healthy(rt, &e.k, a);
    assert_healthy(rt, &e.k, b);
    rt.stream_destroy(a).unwrap();
    rt.stream_destroy(b).unwrap();
}

#[test]
fn fault_04_stream_table_full() {
    let e = env();
    let rt = &*e.rt;
    let first = rt.stream_create(1).unwrap();
    // Work accepted before the table fills, pending while creation is refused.
    let (c, flag) = (cell(rt), cell(rt));
    stall(rt, first, flag);
    launch(rt, first, e.k.inc, &a1(c)).unwrap();
    let mut streams = vec![first];
    let err = loop {
        match rt.stream_create(1) {
            Ok(s) => streams.push(s),
            Err(err) => break err,
        }
        assert!(streams.len() <= 64, "the table is bounded");
    };
    assert_eq!(err, Error::OutOfMemory);
    // Nothing allocated by the refused call.
    let maps = e.sys.live_mappings();
    assert_eq!(rt.stream_create(1), Err(Error::OutOfMemory));
    assert_eq!(e.sys.live_mappings(), maps);
    // Existing streams unaffected; the pending work runs once.
    set(flag, 1);
    rt.stream_synchronize_timeout(first, LONG).unwrap();
    assert_eq!(get(c), 1);
    assert_healthy(rt, &e.k, first);
    assert_healthy(rt, &e.k, *streams.last().unwrap());
    // Freeing one slot makes room again.
    rt.stream_destroy(first).unwrap();
    let again = rt.stream_create(1).unwrap();
    assert_healthy(rt, &e.k, again);
}

// ----- 5–9: the ring ---------------------------------------------------------------------------

#[test]
fn fault_05_ring_full_refuses_without_overwriting() {
    let e = env_with(EmuConfig::default(), KfdConfig { ring_packets: 64, ..KfdConfig::default() });
    let rt = &*e.rt;
    let s = rt.stream_create(1).unwrap();
    let other = rt.stream_create(1).unwrap();
    let l = log(rt);
    let flag = cell(rt);
    // The consumer is stalled: the first packet never retires until the flag is written.
    stall(rt, s, flag);
    let mut accepted = 0u64;
    let err = loop {
        match launch(rt, s, e.k.log, &a2(l, accepted + 1)) {
            Ok(()) => accepted += 1,
            Err(err) => break err,
        }
        assert!(accepted <= 64, "never more than the ring holds");
    };
    assert_eq!(err, Error::NotReady, "a full ring is NotReady, after a bounded spin");
    assert_eq!(accepted, 63, "64 slots: the stalled wait and 63 launches");
    assert_eq!(launch(rt, s, e.k.log, &a2(l, 999)), Err(Error::NotReady), "still full, nothing reserved");
    assert_eq!(rt.stream_synchronize_timeout(s, SHORT), Err(Error::NotReady));
    // Other streams unaffected.
    assert_healthy(rt, &e.k, other);
    set(flag, 1);
    rt.stream_synchronize_timeout(s, LONG).unwrap();
    // No unconsumed slot was overwritten: every accepted launch ran once, in order.
    assert_eq!(log_ids(l), (1..=accepted as u32).collect::<Vec<_>>());
    assert_healthy(rt, &e.k, s);
}

/// A ring of 8 packets in host memory with its two indices.
#[repr(C, align(64))]
struct RingMem {
    slots: [u8; 8 * 64],
    write: AtomicU64,
    read: AtomicU64,
}

fn host_ring(start: u64) -> (&'static RingMem, AqlRing) {
    let m: &'static RingMem =
        Box::leak(Box::new(RingMem { slots: [0; 512], write: AtomicU64::new(start), read: AtomicU64::new(start) }));
    let base = NonNull::new(m.slots.as_ptr() as *mut u8).unwrap();
    // SAFETY: the memory is leaked (lives for the process) and accessed only through the ring;
    // std's and portable-atomic's AtomicU64 have the same layout.
    let ring = unsafe { AqlRing::new(base, 8, NonNull::from(&m.write).cast(), NonNull::from(&m.read).cast()) }.unwrap();
    ring.invalidate_all();
    (m, ring)
}

fn payload_of(ring: &AqlRing, index: u64) -> Option<u64> {
    ring.read(index).map(|w| BarrierPacket::from_words(&w).dep_signal[0])
}

#[test]
fn fault_06_indices_across_the_u64_wrap() {
    // kfd-direct queues start at index 0 (as KFD creates them), so the u64 wrap is shown on
    // AqlRing itself, the ring code the runtime uses, started at u64::MAX - 5.
    let (_m, ring) = host_ring(u64::MAX - 5);
    let mut next_payload = 1u64;
    let mut expected = 1u64;
    for round in 0..6 {
        // Fill the ring completely, across the wrap.
        let mut hint = ring.read_index();
        let mut n = 0;
        while let Ok(mut r) = ring.reserve_hinted(1, 0, &mut hint) {
            r.write(&BarrierPacket::and([next_payload, 0, 0, 0, 0], 0));
            r.finish();
            next_payload += 1;
            n += 1;
        }
        assert_eq!(n, if round == 0 { 8 } else { 5 }, "round {round}: full is exactly the ring size");
        assert_eq!(ring.write_index().wrapping_sub(ring.read_index()), 8);
        // Drain 5 in FIFO order.
        for _ in 0..5 {
            let i = ring.read_index();
            assert_eq!(payload_of(&ring, i), Some(expected), "round {round}: FIFO across the wrap");
            ring.retire(i);
            expected += 1;
        }
    }
    assert!(ring.write_index() < 64, "the write index wrapped past u64::MAX");
    // Drain the rest; then the ring is empty.
    while ring.read_index() != ring.write_index() {
        let i = ring.read_index();
        assert_eq!(payload_of(&ring, i), Some(expected));
        ring.retire(i);
        expected += 1;
    }
    assert_eq!(expected, next_payload, "every packet consumed exactly once");
    assert_eq!(payload_of(&ring, ring.read_index()), None, "empty: the next slot is INVALID");
    // Through the runtime, the ring buffer itself wraps (64 slots, 200 launches, as kfdtest's
    // queue wrap-around does) while another stream runs beside it: both stay in FIFO order,
    // every launch once.
    let e = env_with(EmuConfig::default(), KfdConfig { ring_packets: 64, ..KfdConfig::default() });
    let rt = &*e.rt;
    let s = rt.stream_create(1).unwrap();
    let other = rt.stream_create(1).unwrap();
    let (l, lo) = (log(rt), log(rt));
    for id in 1..=200u64 {
        launch_retry(rt, s, e.k.log, &a2(l, id)).unwrap();
        if id % 4 == 0 {
            launch_retry(rt, other, e.k.log, &a2(lo, id / 4)).unwrap();
        }
    }
    rt.device_synchronize_timeout(LONG).unwrap();
    assert!(write_index(rt, s) > 3 * 64, "the ring wrapped three times");
    assert_eq!(log_ids(l), (1..=200).collect::<Vec<_>>());
    assert_eq!(log_ids(lo), (1..=50).collect::<Vec<_>>());
    assert_healthy(rt, &e.k, other);
}

/// Consumer of a host ring: reads `total` packets in order, checking each header-published
/// packet's body is complete (payload == the body's check word).
fn consume(ring: AqlRing, total: u64) -> Vec<u64> {
    let mut got = Vec::new();
    while (got.len() as u64) < total {
        let i = ring.read_index();
        if let Some(w) = ring.read(i) {
            let b = BarrierPacket::from_words(&w);
            // The body is written before the header (Release): a published header never comes
            // with a stale or partial body.
            assert_eq!(b.dep_signal[1], !b.dep_signal[0], "a header was visible before its body");
            assert_eq!(b.completion_signal, b.dep_signal[0] ^ 0x5555);
            got.push(b.dep_signal[0]);
            ring.retire(i);
        } else {
            std::hint::spin_loop();
        }
    }
    got
}

fn checked_packet(p: u64) -> BarrierPacket {
    BarrierPacket::and([p, !p, 0, 0, 0], p ^ 0x5555)
}

#[test]
fn fault_07_header_is_published_after_the_body() {
    // The exhaustive check is core's loom models of the ring (`core/tests/loom_ring.rs`): they
    // explore every interleaving of reserve, write and publish, and a planted Relaxed header
    // store must fail there. Here the same assertion (a consumer that sees a
    // header sees the whole body) runs on real threads through the public AqlRing API, and
    // the same protocol delivers every runtime packet to the emulated CP, whose checks reject
    // any torn packet as a queue error (none occurs over thousands of packets).
    let (_m, ring) = host_ring(u64::MAX - 100);
    const N: u64 = 20_000;
    let consumer = std::thread::spawn(move || consume(ring, N));
    let mut hint = ring.read_index();
    for p in 1..=N {
        let mut r = loop {
            match ring.reserve_hinted(1, 1000, &mut hint) {
                Ok(r) => break r,
                Err(_) => std::thread::yield_now(),
            }
        };
        r.write(&checked_packet(p));
        r.finish();
    }
    assert_eq!(consumer.join().unwrap(), (1..=N).collect::<Vec<_>>());
    // On the emulator: many packets, all executed once, and another stream's beside them.
    let e = env();
    let rt = &*e.rt;
    let s = rt.stream_create(1).unwrap();
    let other = rt.stream_create(1).unwrap();
    let (c, co) = (cell(rt), cell(rt));
    for i in 0..2000 {
        launch_retry(rt, s, e.k.inc, &a1(c)).unwrap();
        if i % 10 == 0 {
            launch_retry(rt, other, e.k.inc, &a1(co)).unwrap();
        }
    }
    rt.device_synchronize_timeout(LONG).unwrap();
    assert_eq!((get(c), get(co)), (2000, 200));
    assert_healthy(rt, &e.k, other);
}

#[test]
fn fault_08_two_producers_on_one_ring() {
    // AqlRing's multi-producer reservation is a fetch_add, checked exhaustively with two
    // producers by core's loom models of the ring (`core/tests/loom_ring.rs`). Here: two real
    // producer threads on one small ring; the consumer
    // sees every packet exactly once, each producer's in its order, none torn.
    let (_m, ring) = host_ring(u64::MAX - 3);
    const PER: u64 = 10_000;
    let consumer = std::thread::spawn(move || consume(ring, 2 * PER));
    let producers: Vec<_> = (0..2u64)
        .map(|t| {
            std::thread::spawn(move || {
                for k in 0..PER {
                    let p = (t << 32) | (k + 1);
                    let mut r = loop {
                        match ring.reserve(1, 1000) {
                            Ok(r) => break r,
                            Err(_) => std::thread::yield_now(),
                        }
                    };
                    r.write(&checked_packet(p));
                    r.finish();
                }
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    let got = consumer.join().unwrap();
    for t in 0..2u64 {
        let mine: Vec<u64> = got.iter().filter(|&&p| p >> 32 == t).map(|&p| p & 0xffff_ffff).collect();
        assert_eq!(mine, (1..=PER).collect::<Vec<_>>(), "producer {t}: all, once, in order");
    }
    // Through the runtime: two threads enqueueing on the same stream (the runtime is the ring's
    // one producer and serialises them); every launch runs exactly once.
    // A third thread feeds another stream meanwhile, unaffected.
    let e = env();
    let rt = &*e.rt;
    let s = rt.stream_create(1).unwrap();
    let other = rt.stream_create(1).unwrap();
    let (c, co) = (cell(rt), cell(rt));
    let inc = e.k.inc;
    std::thread::scope(|sc| {
        for _ in 0..2 {
            sc.spawn(|| {
                for _ in 0..500 {
                    launch_retry(rt, s, inc, &a1(c)).unwrap();
                }
            });
        }
        sc.spawn(|| {
            for _ in 0..300 {
                launch_retry(rt, other, inc, &a1(co)).unwrap();
            }
        });
    });
    rt.device_synchronize_timeout(LONG).unwrap();
    assert_eq!((get(c), get(co)), (1000, 300));
    assert_healthy(rt, &e.k, other);
}

#[test]
fn fault_09_reserved_then_abandoned_slots_become_nops() {
    let (_m, ring) = host_ring(u64::MAX - 1);
    {
        let mut r = ring.reserve(3, 0).unwrap();
        r.write(&checked_packet(7));
        // The producer errors out (or unwinds) here: dropping the reservation publishes no-op
        // barriers into the two slots it never wrote.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            let _r = r;
            panic!("producer fails mid-batch");
        }));
    }
    let mut r = ring.reserve(1, 0).unwrap();
    r.write(&checked_packet(8));
    r.finish();
    // The consumer advances through all four slots, never blocking on an INVALID header.
    let mut seen = Vec::new();
    for _ in 0..4 {
        let i = ring.read_index();
        let w = ring.read(i).expect("published");
        seen.push(aqueduct::aql::Header(w[0] as u16).packet_type());
        ring.retire(i);
    }
    assert_eq!(
        seen,
        vec![
            Some(PacketType::BarrierAnd),
            Some(PacketType::BarrierAnd),
            Some(PacketType::BarrierAnd),
            Some(PacketType::BarrierAnd)
        ]
    );
    assert_eq!(ring.read_index(), ring.write_index());
    // In the runtime, operations that fail before publishing have no side effects: nothing is
    // reserved, the command is reported failed to its caller, the stream goes on.
    let e = env();
    let rt = &*e.rt;
    let s = rt.stream_create(1).unwrap();
    let other = rt.stream_create(1).unwrap();
    let c = cell(rt);
    launch(rt, s, e.k.inc, &a1(c)).unwrap();
    let before = write_index(rt, s);
    // Past HIP's 4 KiB of kernel arguments on every backend (the loopback takes one slot's).
    let too_long = [0u8; 4097];
    assert_eq!(launch(rt, s, e.k.inc, &too_long), Err(Error::InvalidValue));
    assert_eq!(write_index(rt, s), before);
    rt.stream_synchronize_timeout(s, LONG).unwrap();
    assert_eq!(get(c), 1, "the launch accepted before the refused one ran once");
    assert_healthy(rt, &e.k, s);
    assert_healthy(rt, &e.k, other);
}

// ----- 10–14: bad packets, queue errors, faults, hangs -------------------------------------------

#[test]
fn fault_10_malformed_launches_are_refused_before_publishing() {
    let e = env();
    let rt = &*e.rt;
    let s = rt.stream_create(1).unwrap();
    let other = rt.stream_create(1).unwrap();
    let c = cell(rt);
    let args = a1(c);
    let bad = [
        (KernelLaunch { grid: [0, 1, 1], ..kl(e.k.inc, &args) }, Error::InvalidConfiguration),
        (KernelLaunch { grid: [1, 0, 1], ..kl(e.k.inc, &args) }, Error::InvalidConfiguration),
        (KernelLaunch { workgroup: [0, 1, 1], ..kl(e.k.inc, &args) }, Error::InvalidConfiguration),
        (KernelLaunch { workgroup: [1024, 2, 1], ..kl(e.k.inc, &args) }, Error::InvalidConfiguration),
        (KernelLaunch { workgroup: [u16::MAX, u16::MAX, u16::MAX], ..kl(e.k.inc, &args) }, Error::InvalidConfiguration),
        (kl(0, &args), Error::InvalidValue),
    ];
    // Past HIP's 4 KiB of kernel arguments on every backend (the loopback takes one slot's).
    let big = [0u8; 4097];
    let before = write_index(rt, s);
    for (launch_, want) in &bad {
        assert_eq!(rt.launch_kernel(s, launch_), Err(*want), "{launch_:?}");
        assert_eq!(write_index(rt, s), before, "nothing published for {launch_:?}");
    }
    assert_eq!(launch(rt, s, e.k.inc, &big), Err(Error::InvalidValue), "oversize kernel arguments");
    assert_eq!(write_index(rt, s), before);
    // The stream is not poisoned by refused input; nothing refused ran.
    rt.stream_query(s).unwrap();
    launch(rt, s, e.k.inc, &args).unwrap();
    rt.stream_synchronize_timeout(s, LONG).unwrap();
    assert_eq!(get(c), 1);
    assert_healthy(rt, &e.k, other);
}

#[test]
fn fault_11_queue_error_is_sticky_fails_later_work_and_spares_other_streams() {
    let e = env();
    let rt = &*e.rt;
    let bad = rt.stream_create(1).unwrap();
    let good = rt.stream_create(1).unwrap();
    let c = cell(rt);
    let flag = cell(rt);
    let after = rt.event_create(0).unwrap();
    // Hold the queue so the failing kernel and the work after it are all pending together.
    stall(rt, bad, flag);
    launch(rt, bad, e.k.fail, &[]).unwrap();
    for _ in 0..3 {
        launch(rt, bad, e.k.inc, &a1(c)).unwrap();
    }
    rt.event_record(after, bad, 0).unwrap();
    set(flag, 1);
    assert_eq!(rt.stream_synchronize_timeout(bad, LONG), Err(Error::LaunchFailure));
    // The later pending commands failed with it (never ran), and their completion (the event)
    // reports the queue's error instead of hanging.
    assert_eq!(get(c), 0);
    assert_eq!(rt.event_synchronize_timeout(after, LONG), Err(Error::LaunchFailure));
    // Sticky.
    assert_eq!(rt.stream_query(bad), Err(Error::LaunchFailure));
    assert_eq!(launch(rt, bad, e.k.inc, &a1(c)), Err(Error::LaunchFailure));
    assert_eq!(rt.stream_synchronize_timeout(bad, LONG), Err(Error::LaunchFailure));
    // Other streams unaffected.
    assert_healthy(rt, &e.k, good);
    // Explicit reset: destroying the stream drops the faulted queue; a new stream works.
    rt.stream_destroy(bad).unwrap();
    let fresh = rt.stream_create(1).unwrap();
    assert_healthy(rt, &e.k, fresh);
    assert_eq!(get(c), 0, "the failed commands never ran, not even later");
}

#[test]
fn fault_12_vm_fault_fails_the_device_queues_and_reports_the_address() {
    let e = two_gpus();
    let rt = &*e.rt;
    let bad_va = 0x7000_dead_0000u64;
    let oob = e.sys.emu().register_kernel(Twin::new("oob", 0, move |ctx, _| ctx.mem.write_u32(bad_va, 1)));
    let s = rt.stream_create(1).unwrap();
    let sibling = rt.stream_create(1).unwrap();
    rt.set_device(1).unwrap();
    let other_gpu = rt.stream_create(1).unwrap();
    rt.set_device(0).unwrap();
    // Another process on the same GPU: amdkfd evicts only the faulting process's queues.
    let neighbour = second_process(&e);
    let n = neighbour.rt.stream_create(1).unwrap();
    // One cell per kernel, so each one's fate is seen on its own.
    let (after_fault, on_sibling) = (cell(rt), cell(rt));
    let (flag, sibling_flag) = (cell(rt), cell(rt));
    stall(rt, s, flag);
    launch(rt, s, oob, &[]).unwrap();
    launch(rt, s, e.k.inc, &a1(after_fault)).unwrap();
    // The sibling's kernel is held until after the fault, so it is still pending at eviction.
    stall(rt, sibling, sibling_flag);
    launch(rt, sibling, e.k.inc, &a1(on_sibling)).unwrap();
    let n_cell = cell(&neighbour.rt);
    let n_flag = cell(&neighbour.rt);
    stall(&neighbour.rt, n, n_flag);
    launch(&neighbour.rt, n, neighbour.k.inc, &a1(n_cell)).unwrap();
    set(flag, 1);
    assert_eq!(rt.stream_synchronize_timeout(s, LONG), Err(Error::IllegalAddress));
    assert_eq!(rt.backend().device_fault(0), Some(DeviceFault::MemoryFault(bad_va)), "VA recorded");
    // KFD evicts every queue of the process on that device: the sibling's pending work fails.
    assert_eq!(rt.stream_synchronize_timeout(sibling, LONG), Err(Error::IllegalAddress));
    assert!(matches!(queue_state(&e, sibling), Some(QueueState::Evicted(_))), "{:?}", queue_state(&e, sibling));
    set(sibling_flag, 1);
    assert_eq!(launch(rt, s, e.k.inc, &a1(after_fault)), Err(Error::IllegalAddress), "sticky");
    assert_eq!(launch(rt, sibling, e.k.inc, &a1(on_sibling)), Err(Error::IllegalAddress), "sticky");
    // No abort. The other process's pending work on the same GPU completes once, after the
    // fault; the other device is unaffected.
    set(n_flag, 1);
    neighbour.rt.stream_synchronize_timeout(n, LONG).unwrap();
    assert_eq!(get(n_cell), 1);
    assert_healthy(&neighbour.rt, &neighbour.k, n);
    assert_eq!(rt.backend().device_fault(1), None);
    rt.set_device(1).unwrap();
    assert_healthy(rt, &e.k, other_gpu);
    // The faulting stream's later kernel and the evicted sibling's kernel never ran.
    assert_eq!((get(after_fault), get(on_sibling)), (0, 0));
}

#[test]
fn fault_13_device_reset_fails_every_stream_of_the_device_promptly() {
    let e = two_gpus();
    let rt = &*e.rt;
    let a = rt.stream_create(1).unwrap();
    let b = rt.stream_create(0).unwrap();
    let ev = rt.event_create(0).unwrap();
    rt.set_device(1).unwrap();
    let other = rt.stream_create(1).unwrap();
    rt.set_device(0).unwrap();
    let c = cell(rt);
    let flag = cell(rt);
    stall(rt, a, flag);
    launch(rt, a, e.k.inc, &a1(c)).unwrap();
    rt.event_record(ev, a, 0).unwrap();
    stall(rt, b, flag);
    e.sys.emu().inject_device_reset(gpu(&e, 0)).unwrap();
    // Every wait returns the device error, not a timeout (LONG is never reached).
    assert_eq!(rt.stream_synchronize_timeout(a, LONG), Err(Error::LaunchTimeOut));
    assert_eq!(rt.stream_synchronize_timeout(b, LONG), Err(Error::LaunchTimeOut));
    assert_eq!(rt.event_synchronize_timeout(ev, LONG), Err(Error::LaunchTimeOut));
    assert_eq!(rt.device_synchronize_timeout(LONG), Err(Error::LaunchTimeOut));
    assert_eq!(rt.backend().device_fault(0), Some(DeviceFault::Reset));
    assert!(matches!(queue_state(&e, a), Some(QueueState::Evicted(_))), "{:?}", queue_state(&e, a));
    // Sticky: new work on the device is refused, on old streams and on a new one.
    assert_eq!(launch(rt, a, e.k.inc, &a1(c)), Err(Error::LaunchTimeOut));
    // A stream can still be created (a table slot), but the device refuses its work.
    let late = rt.stream_create(1).expect("stream creation after a reset");
    assert_eq!(launch(rt, late, e.k.inc, &a1(c)), Err(Error::LaunchTimeOut));
    assert_eq!(rt.stream_synchronize_timeout(late, LONG), Err(Error::LaunchTimeOut));
    set(flag, 1);
    assert_eq!(get(c), 0, "evicted work never ran");
    rt.set_device(1).unwrap();
    assert_healthy(rt, &e.k, other);
    assert_eq!(rt.backend().device_fault(1), None);
}

#[test]
fn fault_14_missing_completion_times_out_and_the_command_stays_in_flight() {
    let e = env();
    let rt = &*e.rt;
    let s = rt.stream_create(1).unwrap();
    let other = rt.stream_create(1).unwrap();
    let c = cell(rt);
    let flag = cell(rt);
    let ev = rt.event_create(0).unwrap();
    stall(rt, s, flag);
    launch(rt, s, e.k.inc, &a1(c)).unwrap();
    rt.event_record(ev, s, 0).unwrap();
    // Every wait is bounded and says NotReady.
    assert_eq!(rt.stream_synchronize_timeout(s, SHORT), Err(Error::NotReady));
    assert_eq!(rt.event_synchronize_timeout(ev, SHORT), Err(Error::NotReady));
    assert_eq!(rt.device_synchronize_timeout(SHORT), Err(Error::NotReady));
    assert_eq!(rt.stream_query(s), Err(Error::NotReady));
    assert_eq!(rt.event_query(ev), Err(Error::NotReady));
    assert_eq!(get(c), 0);
    assert_healthy(rt, &e.k, other);
    // Still in flight, not lost: it completes later, exactly once.
    set(flag, 1);
    rt.stream_synchronize_timeout(s, LONG).unwrap();
    rt.event_synchronize_timeout(ev, LONG).unwrap();
    assert_eq!(get(c), 1);
}

// ----- 15–17: destroy while in use ----------------------------------------------------------------

#[test]
fn fault_15_destroyed_event_signal_is_not_reused_under_the_gpu() {
    let e = env();
    let rt = &*e.rt;
    let s = rt.stream_create(1).unwrap();
    let other = rt.stream_create(1).unwrap();
    let flag = cell(rt);
    let c = cell(rt);
    let ev = rt.event_create(0).unwrap();
    stall(rt, s, flag);
    rt.event_record(ev, s, 0).unwrap();
    launch(rt, s, e.k.inc, &a1(c)).unwrap();
    // Destroyed while its record is pending: the slot drains; its signal is kept until the
    // packet retires, so new events get other signals and complete on their own.
    rt.event_destroy(ev).unwrap();
    let mut fresh = Vec::new();
    for _ in 0..8 {
        let n = rt.event_create(0).unwrap();
        rt.event_record(n, other, 0).unwrap();
        fresh.push(n);
    }
    for n in &fresh {
        rt.event_synchronize_timeout(*n, LONG).unwrap();
    }
    assert_eq!(rt.event_query(ev), Err(Error::ContextIsDestroyed));
    assert_eq!(rt.stream_synchronize_timeout(s, SHORT), Err(Error::NotReady), "the record still pends");
    set(flag, 1);
    rt.stream_synchronize_timeout(s, LONG).unwrap();
    assert_eq!(get(c), 1);
    for n in fresh {
        rt.event_query(n).unwrap();
        rt.event_destroy(n).unwrap();
    }
    assert_healthy(rt, &e.k, other);
}

#[test]
fn fault_16_destroy_with_work_in_flight_defers_release() {
    let e = env();
    let rt = &*e.rt;
    let other = rt.stream_create(1).unwrap();
    let s = rt.stream_create(1).unwrap();
    let c = cell(rt);
    let flag = cell(rt);
    let ev = rt.event_create(0).unwrap();
    stall(rt, s, flag);
    for _ in 0..3 {
        launch(rt, s, e.k.inc, &a1(c)).unwrap();
    }
    rt.event_record(ev, s, 0).unwrap();
    // Documented choice: hipStreamDestroy returns at once; the work still completes.
    rt.stream_destroy(s).unwrap();
    assert_eq!(launch(rt, s, e.k.inc, &a1(c)), Err(Error::ContextIsDestroyed));
    // A new stream does not take over the draining queue.
    let n = rt.stream_create(1).unwrap();
    assert_healthy(rt, &e.k, n);
    assert_healthy(rt, &e.k, other);
    assert_eq!(rt.event_query(ev), Err(Error::NotReady));
    set(flag, 1);
    rt.event_synchronize_timeout(ev, LONG).unwrap();
    rt.device_synchronize_timeout(LONG).unwrap();
    assert_eq!(get(c), 3, "each command of the destroyed stream completed exactly once");
}

#[test]
fn fault_17_concurrent_destroy_and_enqueue_or_wait() {
    let e = env();
    let rt = &*e.rt;
    let c = cell(rt);
    let inc = e.k.inc;
    let other = rt.stream_create(1).unwrap();
    for _round in 0..10 {
        set(c, 0);
        let s = rt.stream_create(1).unwrap();
        let ok = AtomicU32::new(0);
        let started = AtomicU32::new(0);
        std::thread::scope(|sc| {
            let enq = sc.spawn(|| loop {
                started.store(1, Ordering::SeqCst);
                match launch_retry(rt, s, inc, &a1(c)) {
                    Ok(()) => {
                        ok.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(err) => return err,
                }
            });
            let waiter = sc.spawn(|| loop {
                match rt.stream_synchronize_timeout(s, LONG) {
                    Ok(()) => {}
                    Err(err) => return err,
                }
            });
            while started.load(Ordering::SeqCst) == 0 {
                std::hint::spin_loop();
            }
            rt.stream_destroy(s).unwrap();
            assert_eq!(enq.join().unwrap(), Error::ContextIsDestroyed);
            assert_eq!(waiter.join().unwrap(), Error::ContextIsDestroyed);
        });
        rt.device_synchronize_timeout(LONG).unwrap();
        assert_eq!(get(c), ok.load(Ordering::SeqCst), "every accepted launch ran exactly once");
        assert_healthy(rt, &e.k, other);
    }
}

// ----- 18–20: capture and detach ------------------------------------------------------------------

#[test]
fn fault_18_capture_misuse() {
    let e = env();
    let rt = &*e.rt;
    let s = rt.stream_create(1).unwrap();
    let bystander = rt.stream_create(1).unwrap();
    let c = cell(rt);
    // EndCapture on a stream that is not capturing.
    assert_eq!(rt.stream_end_capture(s).err(), Some(Error::IllegalState));
    rt.stream_begin_capture(s, 0).unwrap();
    // BeginCapture twice.
    assert_eq!(rt.stream_begin_capture(s, 0), Err(Error::IllegalState));
    // EndCapture on the wrong stream.
    assert_eq!(rt.stream_end_capture(bystander).err(), Some(Error::IllegalState));
    launch(rt, s, e.k.inc, &a1(c)).unwrap();
    // Sync during capture: unsupported, and the capture is invalidated (never run silently).
    assert_eq!(rt.stream_synchronize(s), Err(Error::StreamCaptureUnsupported));
    assert_eq!(launch(rt, s, e.k.inc, &a1(c)), Err(Error::StreamCaptureInvalidated));
    // Invalidating twice is harmless.
    assert_eq!(rt.stream_synchronize(s), Err(Error::StreamCaptureUnsupported));
    assert_eq!(rt.stream_end_capture(s).err(), Some(Error::StreamCaptureInvalidated));
    assert_eq!(rt.stream_is_capturing(s), Ok(aqueduct::CaptureStatus::None), "reset to None");
    assert_eq!(get(c), 0, "captured work never ran");
    // Nothing poisoned: both streams work, and capture works again.
    assert_healthy(rt, &e.k, s);
    assert_healthy(rt, &e.k, bystander);
    rt.stream_begin_capture(s, 0).unwrap();
    launch(rt, s, e.k.inc, &a1(c)).unwrap();
    let g = rt.stream_end_capture(s).unwrap();
    let x = rt.graph_instantiate(g).unwrap();
    rt.graph_launch(x, s).unwrap();
    rt.stream_synchronize_timeout(s, LONG).unwrap();
    assert_eq!(get(c), 1);
}

#[test]
fn fault_19_destroying_a_capturing_stream_ends_the_capture() {
    let e = env();
    let rt = &*e.rt;
    let c = cell(rt);
    // A stream that is not capturing, with work held across the destroys.
    let other = rt.stream_create(1).unwrap();
    let (co, flag) = (cell(rt), cell(rt));
    stall(rt, other, flag);
    launch(rt, other, e.k.inc, &a1(co)).unwrap();
    // More rounds than the graph and capture tables hold: each partial graph is released.
    for _ in 0..12 {
        let s = rt.stream_create(1).unwrap();
        rt.stream_begin_capture(s, 0).unwrap();
        launch(rt, s, e.k.inc, &a1(c)).unwrap();
        rt.stream_destroy(s).unwrap();
        assert_eq!(rt.stream_is_capturing(s), Err(Error::ContextIsDestroyed));
    }
    assert_eq!(get(c), 0);
    let s = rt.stream_create(1).unwrap();
    assert_eq!(rt.stream_is_capturing(s), Ok(aqueduct::CaptureStatus::None));
    rt.stream_begin_capture(s, 0).unwrap();
    launch(rt, s, e.k.inc, &a1(c)).unwrap();
    let g = rt.stream_end_capture(s).unwrap();
    let x = rt.graph_instantiate(g).unwrap();
    rt.graph_launch(x, s).unwrap();
    rt.stream_synchronize_timeout(s, LONG).unwrap();
    assert_eq!(get(c), 1);
    assert_eq!(rt.stream_is_capturing(other), Ok(aqueduct::CaptureStatus::None));
    set(flag, 1);
    rt.stream_synchronize_timeout(other, LONG).unwrap();
    assert_eq!(get(co), 1);
    assert_healthy(rt, &e.k, other);
}

#[test]
fn fault_20_detached_stream() {
    let e = env();
    let rt = &*e.rt;
    let c = cell(rt);
    let flag = cell(rt);
    let other = rt.stream_create(1).unwrap();
    let ctx = rt.context_create(&[0xffff]).unwrap();
    let s = rt.context_stream_create(ctx, 0, 0).unwrap();
    let ev = rt.event_create(0).unwrap();
    stall(rt, s, flag);
    launch(rt, s, e.k.inc, &a1(c)).unwrap();
    rt.event_record(ev, s, 0).unwrap();
    rt.context_destroy(ctx).unwrap();
    assert_eq!(rt.stream_is_detached(s), Ok(true));
    assert_eq!(launch(rt, s, e.k.inc, &a1(c)), Err(Error::StreamDetached));
    assert_eq!(rt.event_record(ev, s, 0), Err(Error::StreamDetached));
    assert_eq!(rt.stream_wait_event(s, ev, 0), Err(Error::StreamDetached));
    assert_eq!(rt.memset_async(s, c, 0, 1, 4), Err(Error::StreamDetached));
    // Work accepted before the detach is accounted for exactly once (it completes).
    set(flag, 1);
    rt.event_synchronize_timeout(ev, LONG).unwrap();
    assert_eq!(get(c), 1);
    assert_healthy(rt, &e.k, other);
}

// ----- 21–25: the OS, the process, the CP -------------------------------------------------------

#[test]
fn fault_21_ioctl_failure_at_each_step_of_stream_creation() {
    let e = env();
    let rt = &*e.rt;
    let keep = rt.stream_create(1).unwrap();
    let base = e.sys.live_mappings();
    // Queue creation: 5 × (ALLOC, MAP), CREATE_QUEUE (the doorbell slice is already mapped);
    // the progress signal comes from the pool (no ioctl).
    for (errno, want) in [
        (Errno::EINVAL, Error::Unknown),
        (Errno::EFAULT, Error::Unknown),
        (Errno::ENOMEM, Error::OutOfMemory),
        (Errno::EBUSY, Error::Unknown),
    ] {
        for step in 1..=11u64 {
            let emu_errno = aqueduct_kfd_emu::Errno(errno.0);
            e.sys.emu().fail_ioctl(step, None, emu_errno);
            match rt.stream_create(1) {
                // Out of memory for a new hardware queue, the stream shares `keep`'s (the queue
                // pool's rule: creation does not fail for lack of queues).
                Ok(s) if want == Error::OutOfMemory => rt.stream_destroy(s).unwrap(),
                r => assert_eq!(r, Err(want), "{errno:?} at step {step}"),
            }
            let op = match step {
                11 => Op::CreateQueue,
                s if s % 2 == 1 => Op::AllocMemory,
                _ => Op::MapMemory,
            };
            assert_eq!(rt.backend().last_error(), Some(KfdError::Sys { op, errno }), "step {step}");
            assert_eq!(e.sys.live_mappings(), base, "{errno:?} at step {step}: released in reverse");
        }
    }
    // The table slots came back: as many streams as before can be created, and they work.
    let mut made = Vec::new();
    while let Ok(s) = rt.stream_create(1) {
        made.push(s);
    }
    assert!(made.len() >= 30, "{} slots free", made.len());
    assert_healthy(rt, &e.k, keep);
    assert_healthy(rt, &e.k, made[0]);
}

#[test]
fn fault_22_use_after_fork_is_refused() {
    let e = env();
    let rt = &*e.rt;
    let s = rt.stream_create(1).unwrap();
    let c = cell(rt);
    launch(rt, s, e.k.inc, &a1(c)).unwrap();
    rt.stream_synchronize_timeout(s, LONG).unwrap();
    // Another process on the same GPU, with work pending across the fork.
    let neighbour = second_process(&e);
    let n = neighbour.rt.stream_create(1).unwrap();
    let (n_cell, n_flag) = (cell(&neighbour.rt), cell(&neighbour.rt));
    stall(&neighbour.rt, n, n_flag);
    launch(&neighbour.rt, n, neighbour.k.inc, &a1(n_cell)).unwrap();
    e.sys.simulate_fork();
    assert_eq!(rt.stream_create(1), Err(Error::NotInitialized));
    assert_eq!(rt.malloc(64), Err(Error::NotInitialized));
    assert_eq!(launch(rt, s, e.k.inc, &a1(c)), Err(Error::NotInitialized), "inherited queue untouched");
    assert_eq!(rt.stream_synchronize_timeout(s, LONG), Err(Error::NotInitialized));
    assert_eq!(rt.backend().last_error(), Some(KfdError::Forked));
    assert_eq!(get(c), 1, "the work before the fork ran once, nothing after it");
    set(n_flag, 1);
    neighbour.rt.stream_synchronize_timeout(n, LONG).unwrap();
    assert_eq!(get(n_cell), 1);
    assert_healthy(&neighbour.rt, &neighbour.k, n);
}

#[test]
fn fault_23_command_processor_dies() {
    let e = two_gpus();
    let rt = &*e.rt;
    let s = rt.stream_create(1).unwrap();
    let ev = rt.event_create(0).unwrap();
    rt.set_device(1).unwrap();
    let other = rt.stream_create(1).unwrap();
    rt.set_device(0).unwrap();
    let c = cell(rt);
    let flag = cell(rt);
    stall(rt, s, flag);
    launch(rt, s, e.k.inc, &a1(c)).unwrap();
    rt.event_record(ev, s, 0).unwrap();
    e.sys.emu().kill_command_processor(gpu(&e, 0)).unwrap();
    assert!(!e.sys.emu().command_processor_alive(gpu(&e, 0)));
    // The CP thread is gone (joined): nothing on the device can run any more.
    set(flag, 1);
    // Waiters wake with the device error; nothing hangs.
    assert_eq!(rt.stream_synchronize_timeout(s, LONG), Err(Error::LaunchTimeOut));
    assert_eq!(rt.event_synchronize_timeout(ev, LONG), Err(Error::LaunchTimeOut));
    assert_eq!(launch(rt, s, e.k.inc, &a1(c)), Err(Error::LaunchTimeOut));
    assert_eq!(rt.backend().device_fault(0), Some(DeviceFault::Reset));
    assert_eq!(get(c), 0, "the accepted kernel failed with its stream and never ran");
    rt.set_device(1).unwrap();
    assert_healthy(rt, &e.k, other);
}

#[test]
fn fault_24_drop_with_live_streams_pending_work_and_host_functions() {
    // Declared before the runtime, so it outlives it.
    let host_calls = AtomicU32::new(0);
    let e = env();
    let sys = e.sys.clone();
    // Another process on the same GPU, with work pending across the teardown.
    let neighbour = second_process(&e);
    let n = neighbour.rt.stream_create(1).unwrap();
    let (n_cell, n_flag) = (cell(&neighbour.rt), cell(&neighbour.rt));
    stall(&neighbour.rt, n, n_flag);
    launch(&neighbour.rt, n, neighbour.k.inc, &a1(n_cell)).unwrap();
    {
        let rt = &*e.rt;
        let s = rt.stream_create(1).unwrap();
        let t = rt.stream_create(0).unwrap();
        let c = cell(rt);
        let flag = cell(rt);
        let ev = rt.event_create(0).unwrap();
        // Work that completed before the teardown is accounted once.
        launch(rt, t, e.k.inc, &a1(c)).unwrap();
        rt.launch_host_func(t, counting(&host_calls)).unwrap();
        rt.stream_synchronize_timeout(t, LONG).unwrap();
        assert_eq!((get(c), host_calls.load(Ordering::SeqCst)), (1, 1));
        stall(rt, s, flag);
        launch(rt, s, e.k.inc, &a1(c)).unwrap();
        rt.launch_host_func(s, counting(&host_calls)).unwrap();
        rt.event_record(ev, s, 0).unwrap();
        rt.stream_wait_event(t, ev, 0).unwrap();
        launch(rt, t, e.k.inc, &a1(c)).unwrap();
        let _ = rt.malloc(4096).unwrap();
    }
    // Drop with all of it pending: ordered teardown, no hang, nothing left behind.
    drop(e);
    assert_eq!(sys.open_fds(), 0, "fds closed");
    assert_eq!(sys.live_mappings(), 0, "every queue, signal and buffer released");
    assert_eq!(host_calls.load(Ordering::SeqCst), 1, "the pending host function was not run after teardown");
    // The other process is untouched: its pending work completes once, and it goes on.
    set(n_flag, 1);
    neighbour.rt.stream_synchronize_timeout(n, LONG).unwrap();
    assert_eq!(get(n_cell), 1);
    assert_healthy(&neighbour.rt, &neighbour.k, n);
}

#[test]
fn fault_25_doorbells_are_monotonic_last_packet_indices() {
    // Only the runtime writes doorbells (the API has no way to name a value). Sampling the
    // doorbell slot the emulated CP reads after every operation shows each write is the index
    // of the last packet published so far, and never goes backwards — across batches (event
    // records, waits, host functions) and refused operations.
    let host_calls = AtomicU32::new(0);
    let e = env_with(EmuConfig::default(), KfdConfig { ring_packets: 64, ..KfdConfig::default() });
    let rt = &*e.rt;
    let s = rt.stream_create(0).unwrap();
    // A non-blocking stream beside it: its doorbell follows its own packets only.
    let other = rt.stream_create(1).unwrap();
    let (c, co) = (cell(rt), cell(rt));
    let ev = rt.event_create(0).unwrap();
    let mut last: Option<u64> = None;
    let mut last_other: Option<u64> = None;
    let check = |s: StreamHandle, last: &mut Option<u64>| {
        let db = rt.with_stream_queue(s, |q| q.doorbell_value()).unwrap();
        let w = write_index(rt, s);
        assert_eq!(db, w - 1, "the doorbell names the last packet written");
        if let Some(l) = *last {
            assert!(db >= l, "doorbell went backwards: {l} -> {db}");
        }
        *last = Some(db);
    };
    for round in 0..40u32 {
        launch(rt, s, e.k.inc, &a1(c)).unwrap();
        check(s, &mut last);
        match round % 4 {
            0 => rt.event_record(ev, s, 0).unwrap(),
            1 => rt.stream_wait_event(s, ev, 0).unwrap(),
            2 => rt.launch_host_func(s, counting(&host_calls)).unwrap(),
            _ => {
                // Refused (kernel object 0): nothing published, the doorbell unchanged.
                assert_eq!(rt.launch_kernel(s, &kl(0, &[])), Err(Error::InvalidValue));
            }
        }
        check(s, &mut last);
        launch(rt, other, e.k.inc, &a1(co)).unwrap();
        check(other, &mut last_other);
        rt.stream_synchronize_timeout(s, LONG).unwrap();
    }
    assert!(last.unwrap() >= 64, "the doorbell went through the ring several times");
    rt.stream_synchronize_timeout(other, LONG).unwrap();
    assert_eq!((get(c), get(co), host_calls.load(Ordering::SeqCst)), (40, 40, 10), "each once");
    assert_healthy(rt, &e.k, other);
}

// ----- 26: a queue error with dependent work on another stream ----------------------------------

/// Row 11 across streams: the failing command's dependants on the null stream (held behind it by
/// the implicit synchronisation) fail with its error instead of hanging, and never run.
#[test]
fn fault_26_queue_error_on_a_blocking_stream_releases_the_null_stream() {
    let e = env();
    let rt = &*e.rt;
    let blocking = rt.stream_create(0).unwrap();
    let non_blocking = rt.stream_create(1).unwrap();
    let c = cell(rt);
    let flag = cell(rt);
    stall(rt, blocking, flag);
    launch(rt, blocking, e.k.fail, &[]).unwrap();
    // Null-stream work waits (through a marker) for the blocking stream's work.
    launch(rt, StreamHandle::NULL, e.k.inc, &a1(c)).unwrap();
    set(flag, 1);
    assert_eq!(rt.stream_synchronize_timeout(blocking, LONG), Err(Error::LaunchFailure));
    // The dependent null-stream work must end (with the producer's error), not hang.
    assert_eq!(rt.stream_synchronize_timeout(StreamHandle::LEGACY, LONG), Err(Error::LaunchFailure));
    assert_eq!(get(c), 0, "it never ran after a failed dependency");
    // A non-blocking stream does not synchronise with the null stream: unaffected.
    assert_healthy(rt, &e.k, non_blocking);
    assert_eq!(get(c), 0, "not even later");
}
