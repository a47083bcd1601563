//! The conditional-node scheduler (docs/conditional-graphs.md, "Packet layout") driven by hand on
//! the loopback: a frame, a body and a body queue laid out as an executable lays them out, the
//! entry dispatch published on a stream queue, and the device — the scheduler twin — doing the
//! rest: IF, IF/ELSE, SWITCH and WHILE, with one host doorbell per run.

use std::sync::atomic::{AtomicU32, Ordering};

use aqueduct::aql::RawPacket;
use aqueduct::backend::{Backend, BuiltinKernel, MemoryKind, Timeout};
use aqueduct::conditional::{
    set_conditional, single_dispatch, BodyRef, ConditionalHandle, ConditionalKind, SchedulerFrame, MAX_BODIES,
};
use aqueduct::loopback::{Dispatch, Loopback, LoopbackQueue, TraceEntry};
use aqueduct::{Priority, SignalHandle};
use aqueduct_tests::*;

/// Kernel: `*a0 -= 1; set_conditional(a1, *a0 != 0)`; args `[a0, a1]`.
fn countdown(d: &Dispatch) -> Result<(), aqueduct::aql::QueueFault> {
    // SAFETY: the test passes the address of a live u32 and a live condition word.
    let [cell, handle]: [u64; 2] = unsafe { d.args() };
    // SAFETY: as above.
    let c = unsafe { AtomicU32::from_ptr(cell as usize as *mut u32) };
    let left = c.fetch_sub(1, Ordering::SeqCst) - 1;
    // SAFETY: as above.
    unsafe { set_conditional(ConditionalHandle(handle), u32::from(left != 0)) };
    Ok(())
}

/// 64-byte aligned host-visible memory of `bytes`.
fn alloc(lb: &Lb, bytes: usize) -> u64 {
    lb.memory_alloc(0, bytes + 64, MemoryKind::Host).unwrap().div_ceil(64) * 64
}

fn put<T>(at: u64, v: T) {
    // SAFETY: `at` is fresh loopback memory with room for a T, aligned by `alloc`.
    unsafe { (at as usize as *mut T).write(v) };
}

struct Node {
    frame: u64,
    done: SignalHandle,
    queue: LoopbackQueue,
}

/// Lays out a conditional node: bodies (each a run of packets), body queue, frame.
fn node(lb: &Lb, kind: ConditionalKind, word: u64, bodies: &[Vec<RawPacket>]) -> Node {
    let scheduler = lb.builtin_kernel(0, BuiltinKernel::GraphScheduler).unwrap();
    let queue = lb.queue_create(0, Priority::Normal, None).unwrap();
    let desc = lb.queue_desc(&queue).unwrap();
    let done = lb.signal_create(1).unwrap();
    let frame = alloc(lb, size_of::<SchedulerFrame>());
    let mut refs = [BodyRef::default(); MAX_BODIES];
    for (r, b) in refs.iter_mut().zip(bodies) {
        let at = alloc(lb, 64 * b.len().max(1));
        for (k, p) in b.iter().enumerate() {
            put(at + 64 * k as u64, *p);
        }
        *r = BodyRef { packets: at, len: b.len() as u32, reset_len: 0, resets: 0 };
    }
    let doorbell = lb.device_doorbell(&queue).unwrap();
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
    Node { frame, done, queue }
}

/// Publishes `[ENTRY][WAIT on done]` on a stream queue, rings once, waits; returns the host
/// doorbells of the run.
fn run(lb: &Lb, n: &Node) -> usize {
    let scheduler = lb.builtin_kernel(0, BuiltinKernel::GraphScheduler).unwrap();
    let stream = lb.queue_create(0, Priority::Normal, None).unwrap();
    let ring = lb.queue_desc(&stream).unwrap().ring;
    let finished = lb.signal_create(1).unwrap();
    let [entry, wait] = SchedulerFrame::entry_packets(n.frame, scheduler, n.done.0, true, finished.0);
    lb.clear_trace();
    let mut res = ring.reserve(2, 0).unwrap();
    res.write(&entry);
    res.write(&wait);
    let last = res.finish();
    lb.ring_doorbell(&stream, last);
    lb.signal_wait(finished, aqueduct::aql::Condition::Eq, 0, Timeout::NEVER).unwrap();
    let bells = (0..lb.trace_len()).filter(|i| matches!(lb.trace_entry(*i), Some(TraceEntry::Doorbell { .. }))).count();
    lb.queue_destroy(stream);
    lb.queue_destroy(LoopbackQueue(n.queue.0));
    bells
}

type Lb = Loopback<'static, aqueduct::config::Default>;

fn setup() -> (&'static Lb, u64, u64) {
    let lb: &'static Lb = leak(Loopback::new(mem()));
    let inc = register(lb).inc;
    let cd = lb.register_kernel(countdown).unwrap();
    (lb, inc, cd)
}

fn inc_body(lb: &Lb, inc: u64, cell: &AtomicU32) -> Vec<RawPacket> {
    let args = alloc(lb, 8);
    put(args, addr32(cell));
    vec![single_dispatch(inc, args, true)]
}

#[test]
fn if_if_else_and_switch_publish_the_chosen_body_or_only_the_exit() {
    let (lb, inc, _) = setup();
    let word = cell32(0);
    let hits: Vec<&AtomicU32> = (0..3).map(|_| cell32(0)).collect();
    let counts = || hits.iter().map(|c| c.load(Ordering::SeqCst)).collect::<Vec<_>>();
    let cases: [(ConditionalKind, usize, u32, [u32; 3]); 6] = [
        (ConditionalKind::If, 1, 5, [1, 0, 0]),
        (ConditionalKind::If, 1, 0, [1, 0, 0]),
        (ConditionalKind::If, 2, 0, [1, 1, 0]),
        (ConditionalKind::Switch, 3, 2, [1, 1, 1]),
        (ConditionalKind::Switch, 3, 0, [2, 1, 1]),
        (ConditionalKind::Switch, 3, 3, [2, 1, 1]),
    ];
    for (kind, bodies, value, want) in cases {
        let b: Vec<Vec<RawPacket>> = hits.iter().take(bodies).map(|c| inc_body(lb, inc, c)).collect();
        word.store(value, Ordering::SeqCst);
        let n = node(lb, kind, addr32(word), &b);
        assert_eq!(run(lb, &n), 1, "one host doorbell");
        assert_eq!(counts(), want, "{kind:?} with {bodies} bodies, value {value}");
    }
}

#[test]
fn while_loops_on_the_device_in_bounded_ring_space() {
    let (lb, _, cd) = setup();
    for iterations in [0u32, 1, 1000] {
        let word = cell32(u32::from(iterations != 0));
        let left = cell32(iterations);
        let args = alloc(lb, 16);
        put(args, [addr32(left), addr32(word)]);
        let n = node(lb, ConditionalKind::While, addr32(word), &[vec![single_dispatch(cd, args, true)]]);
        // 1000 iterations pass 2001 packets through the 64-slot body queue, with one host doorbell.
        assert_eq!(run(lb, &n), 1, "one host doorbell for {iterations} iterations");
        assert_eq!(left.load(Ordering::SeqCst), 0);
    }
}
