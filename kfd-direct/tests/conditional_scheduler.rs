//! The conditional-node scheduler (docs/conditional-graphs.md, "Packet layout") on the emulated
//! GPU: the blit code object's `aqueduct_graph_scheduler`, run by its twin, reads the condition
//! word and publishes bodies into a body queue whose doorbell it rings itself (kfd-direct's
//! `device_doorbell` under the emulator). Frames and bodies are laid out by hand, as an
//! executable lays them out; the host publishes two packets and rings once per run.

use std::sync::atomic::{AtomicU32, Ordering};

use aqueduct::aql::{Condition, RawPacket};
use aqueduct::backend::{Backend, BuiltinKernel, MemoryKind, Timeout};
use aqueduct::conditional::{single_dispatch, BodyRef, ConditionalKind, SchedulerFrame, MAX_BODIES};
use aqueduct::{Priority, SignalHandle};
use aqueduct_kfd::{EmuSys, Kfd, KfdConfig};
use aqueduct_kfd_emu::{EmuConfig, Twin};

type K = Kfd<EmuSys>;

/// 64-byte aligned host-visible memory of `bytes` (its device address is its host address).
fn alloc(k: &K, bytes: usize) -> u64 {
    k.memory_alloc(0, bytes + 64, MemoryKind::Host).unwrap().div_ceil(64) * 64
}

fn put<T>(at: u64, v: T) {
    // SAFETY: `at` is fresh host-visible memory with room for a T, aligned by `alloc`.
    unsafe { (at as usize as *mut T).write(v) };
}

fn cell(k: &K, v: u32) -> u64 {
    let a = alloc(k, 4);
    put(a, v);
    a
}

fn read(a: u64) -> u32 {
    // SAFETY: a live, aligned u32 from `cell`.
    unsafe { AtomicU32::from_ptr(a as usize as *mut u32) }.load(Ordering::SeqCst)
}

/// Lays out a conditional node and runs `[ENTRY][WAIT on done]` on a stream queue; the
/// host rings its doorbell once and waits.
fn run(k: &K, kind: ConditionalKind, word: u64, bodies: &[Vec<RawPacket>]) {
    let scheduler = k.builtin_kernel(0, BuiltinKernel::GraphScheduler).unwrap();
    let body_q = k.queue_create(0, Priority::Normal, None).unwrap();
    let desc = k.queue_desc(&body_q).unwrap();
    let done = k.signal_create(1).unwrap();
    let frame = alloc(k, size_of::<SchedulerFrame>());
    let mut refs = [BodyRef::default(); MAX_BODIES];
    for (r, b) in refs.iter_mut().zip(bodies) {
        let at = alloc(k, 64 * b.len().max(1));
        for (i, p) in b.iter().enumerate() {
            put(at + 64 * i as u64, *p);
        }
        *r = BodyRef { packets: at, len: b.len() as u32, reset_len: 0, resets: 0 };
    }
    let doorbell = k.device_doorbell(&body_q).expect("the emulator lets device code ring doorbells");
    let frame_value = SchedulerFrame::new(
        frame,
        scheduler,
        word,
        kind,
        &refs[..bodies.len()],
        desc.ring.addresses(),
        doorbell,
        done.0,
    );
    put(frame, frame_value);
    let stream = k.queue_create(0, Priority::Normal, None).unwrap();
    let ring = k.queue_desc(&stream).unwrap().ring;
    let finished: SignalHandle = k.signal_create(1).unwrap();
    let [entry, wait] = SchedulerFrame::entry_packets(frame, scheduler, done.0, true, finished.0);
    let mut res = ring.reserve(2, 0).unwrap();
    res.write(&entry);
    res.write(&wait);
    let last = res.finish();
    k.ring_doorbell(&stream, last);
    let seconds = Timeout::SECOND;
    let mut waited = 0;
    while k.signal_wait(finished, Condition::Eq, 0, seconds).is_err() {
        waited += 1;
        assert!(waited < 60, "the conditional node did not finish");
    }
    k.queue_destroy(stream);
    k.queue_destroy(body_q);
}

fn setup() -> (K, u64, u64) {
    let sys = EmuSys::new(EmuConfig::default().cus(2)).unwrap();
    let inc = sys.emu().register_kernel(Twin::new("inc", 8, |ctx, _| {
        let a = ctx.arg_u64(0);
        ctx.mem.write_u32(a, ctx.mem.read_u32(a)? + 1)
    }));
    // `*a0 -= 1; word(a1) = *a0 != 0`: what a kernel calling aqdGraphSetConditional does.
    let countdown = sys.emu().register_kernel(Twin::new("countdown", 16, |ctx, _| {
        let (a, word) = (ctx.arg_u64(0), ctx.arg_u64(8));
        let left = ctx.mem.read_u32(a)? - 1;
        ctx.mem.write_u32(a, left)?;
        ctx.mem.write_u32(word, u32::from(left != 0))
    }));
    (Kfd::open(sys, KfdConfig::default()).unwrap(), inc, countdown)
}

#[test]
fn if_else_and_switch_on_the_emulated_gpu() {
    let (k, inc, _) = setup();
    let word = cell(&k, 0);
    let hits: Vec<u64> = (0..3).map(|_| cell(&k, 0)).collect();
    let body = |c: u64| {
        let args = alloc(&k, 8);
        put(args, c);
        vec![single_dispatch(inc, args, true)]
    };
    let bodies: Vec<Vec<RawPacket>> = hits.iter().map(|c| body(*c)).collect();
    let counts = || hits.iter().map(|c| read(*c)).collect::<Vec<_>>();
    let cases: [(ConditionalKind, usize, u32, [u32; 3]); 5] = [
        (ConditionalKind::If, 2, 0, [0, 1, 0]),
        (ConditionalKind::If, 2, 4, [1, 1, 0]),
        (ConditionalKind::If, 1, 0, [1, 1, 0]),
        (ConditionalKind::Switch, 3, 2, [1, 1, 1]),
        (ConditionalKind::Switch, 3, 9, [1, 1, 1]),
    ];
    for (kind, n, value, want) in cases {
        put(word, value);
        run(&k, kind, word, &bodies[..n]);
        assert_eq!(counts(), want, "{kind:?} with {n} bodies, value {value}");
    }
}

#[test]
fn while_runs_zero_one_and_a_thousand_iterations_on_the_emulated_gpu() {
    let (k, _, countdown) = setup();
    for iterations in [0u32, 1, 1000] {
        let word = cell(&k, u32::from(iterations != 0));
        let left = cell(&k, iterations);
        let args = alloc(&k, 16);
        put(args, [left, word]);
        run(&k, ConditionalKind::While, word, &[vec![single_dispatch(countdown, args, true)]]);
        assert_eq!(read(left), 0, "{iterations} iterations");
    }
}
