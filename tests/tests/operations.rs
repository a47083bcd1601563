//! Stream operations (docs/hip-semantics.md §2.2, §2.5, §3 rule 9): host functions in stream order,
//! `hipStreamWrite/WaitValue32/64` with every comparison and their parameter errors, copies and
//! fills, and destroying a stream that still has work.

use std::sync::atomic::{AtomicU32, Ordering};

use aqueduct::{Error, HostFn, StreamHandle};
use aqueduct_tests::*;

const NULL: StreamHandle = StreamHandle::NULL;
const GTE: u32 = 0;
const EQ: u32 = 1;
const AND: u32 = 2;
const NOR: u32 = 3;

fn gate(rt: &Rt, s: StreamHandle) -> &'static AtomicU32 {
    let g = cell32(0);
    rt.wait_value32(s, addr32(g), 1, EQ, u32::MAX).unwrap();
    g
}

fn open(g: &AtomicU32) {
    g.store(1, Ordering::SeqCst);
}

/// One call of [`append_digit`]: the test's own log (never shared with another test) and the
/// digit this call appends to it.
struct Digit {
    log: &'static AtomicU32,
    digit: u32,
}

unsafe extern "C" fn append_digit(data: *mut core::ffi::c_void) {
    // SAFETY: `data` is a leaked Digit (`digit_fn`).
    let d = unsafe { &*(data as *const Digit) };
    let _ = d.log.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| Some(v * 10 + d.digit));
}

/// A host function appending `digit` to `log` as a decimal digit.
fn digit_fn(log: &'static AtomicU32, digit: u32) -> HostFn {
    let d: &'static Digit = leak(Digit { log, digit });
    HostFn::Plain { func: append_digit, data: d as *const Digit as *mut core::ffi::c_void }
}

#[test]
fn host_function_runs_between_prior_and_later_work() {
    let rt = runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    for s in [rt.stream_create(0).unwrap(), rt.stream_create(1).unwrap(), NULL, StreamHandle::PER_THREAD] {
        write32(addr32(c), 0);
        let log = HostLog::watching(addr32(c));
        let g = gate(&rt, s);
        launch(&rt, s, k.inc, addr32(c)).unwrap();
        rt.launch_host_func(s, log.plain()).unwrap();
        launch(&rt, s, k.inc, addr32(c)).unwrap();
        assert_eq!(rt.stream_query(s), Err(Error::NotReady));
        assert_eq!(log.calls(), 0, "{s:?}: blocked behind the wait");
        assert_eq!(read32(addr32(c)), 0);
        open(g);
        rt.stream_synchronize(s).unwrap();
        assert_eq!(log.calls(), 1, "{s:?}");
        assert_eq!(log.seen(), 1, "{s:?}: after the earlier kernel, before the later one");
        assert_eq!(read32(addr32(c)), 2);
    }
    assert!(rt.backend().trace(&mut [aqueduct::loopback::TraceEntry::HostCall; 256]) > 0);
}

#[test]
fn stream_callback_gets_its_stream_and_success() {
    let rt = runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let s = rt.stream_create(0).unwrap();
    let log = HostLog::watching(addr32(c));
    let g = gate(&rt, s);
    rt.launch_host_func(s, log.callback(s)).unwrap();
    launch(&rt, s, k.inc, addr32(c)).unwrap();
    assert_eq!(log.calls(), 0);
    open(g);
    rt.stream_synchronize(s).unwrap();
    assert_eq!(log.calls(), 1);
    assert_eq!(log.seen(), 0, "the later kernel had not run");
    assert_eq!(log.stream.load(Ordering::SeqCst), s.0);
    assert_eq!(log.status.load(Ordering::SeqCst), 0);
    assert_eq!(read32(addr32(c)), 1);
}

#[test]
fn host_functions_keep_stream_order() {
    let rt = runtime();
    let s = rt.stream_create(0).unwrap();
    let g = gate(&rt, s);
    let order = cell32(0);
    for d in 1..=4 {
        rt.launch_host_func(s, digit_fn(order, d)).unwrap();
    }
    assert_eq!(order.load(Ordering::SeqCst), 0);
    open(g);
    rt.stream_synchronize(s).unwrap();
    assert_eq!(order.load(Ordering::SeqCst), 1234);
}

#[test]
fn host_function_orders_other_streams_through_events() {
    let rt = runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let a = rt.stream_create(1).unwrap();
    let b = rt.stream_create(1).unwrap();
    let e = rt.event_create(0).unwrap();
    let log = HostLog::watching(addr32(c));
    let g = gate(&rt, a);
    rt.launch_host_func(a, log.plain()).unwrap();
    rt.event_record(e, a, 0).unwrap();
    rt.stream_wait_event(b, e, 0).unwrap();
    launch(&rt, b, k.inc, addr32(c)).unwrap();
    assert_eq!(read32(addr32(c)), 0);
    open(g);
    rt.stream_synchronize(b).unwrap();
    assert_eq!((log.calls(), log.seen(), read32(addr32(c))), (1, 0, 1));
}

#[test]
fn write_values() {
    let rt = runtime();
    let s = rt.stream_create(0).unwrap();
    let a = cell32(0);
    let b = cell64(0);
    let g = gate(&rt, s);
    rt.write_value32(s, addr32(a), 0xabcd_1234, 0).unwrap();
    rt.write_value64(s, addr64(b), 0x0123_4567_89ab_cdef, 0).unwrap();
    assert_eq!((a.load(Ordering::SeqCst), b.load(Ordering::SeqCst)), (0, 0), "in stream order");
    open(g);
    rt.stream_synchronize(s).unwrap();
    assert_eq!(a.load(Ordering::SeqCst), 0xabcd_1234);
    assert_eq!(b.load(Ordering::SeqCst), 0x0123_4567_89ab_cdef);
    // Writing on the null stream, into device memory.
    let d = rt.malloc(8).unwrap();
    rt.write_value32(NULL, d, 7, 0).unwrap();
    rt.write_value32(NULL, d + 4, 9, 0).unwrap();
    rt.stream_synchronize(NULL).unwrap();
    assert_eq!((read32(d), read32(d + 4)), (7, 9));
}

#[test]
fn write_value_errors() {
    let rt = runtime();
    let s = rt.stream_create(0).unwrap();
    let a = cell64(0);
    let p = addr64(a);
    assert_eq!(rt.write_value32(s, 0, 1, 0), Err(Error::InvalidValue));
    assert_eq!(rt.write_value64(s, 0, 1, 0), Err(Error::InvalidValue));
    assert_eq!(rt.write_value32(s, p + 2, 1, 0), Err(Error::InvalidValue));
    assert_eq!(rt.write_value64(s, p + 4, 1, 0), Err(Error::InvalidValue));
    for flags in [1u32, 0x1000, 0x1001, u32::MAX] {
        assert_eq!(rt.write_value32(s, p, 1, flags), Err(Error::InvalidValue), "flags {flags:#x}");
        assert_eq!(rt.write_value64(s, p, 1, flags), Err(Error::InvalidValue), "flags {flags:#x}");
    }
    rt.stream_synchronize(s).unwrap();
    assert_eq!(a.load(Ordering::SeqCst), 0, "nothing was written");
}

/// Enqueues a wait on `cell` with `op`, then a kernel; checks that each value in `blocked`
/// keeps the kernel from running and that `release` lets it run.
fn check_wait32(op: u32, value: u32, mask: u32, start: u32, blocked: &[u32], release: u32) {
    let rt = runtime();
    let k = register(rt.backend());
    let s = rt.stream_create(1).unwrap();
    let cell = cell32(start);
    let c = cell32(0);
    rt.wait_value32(s, addr32(cell), value, op, mask).unwrap();
    launch(&rt, s, k.inc, addr32(c)).unwrap();
    assert_eq!(read32(addr32(c)), 0, "op {op}: blocked at {start:#x}");
    for &v in blocked {
        cell.store(v, Ordering::SeqCst);
        assert_eq!(rt.stream_query(s), Err(Error::NotReady), "op {op}: still blocked at {v:#x}");
        assert_eq!(read32(addr32(c)), 0);
    }
    cell.store(release, Ordering::SeqCst);
    assert_eq!(rt.stream_query(s), Ok(()), "op {op}: released at {release:#x}");
    assert_eq!(read32(addr32(c)), 1);
}

fn check_wait64(op: u32, value: u64, mask: u64, start: u64, blocked: &[u64], release: u64) {
    let rt = runtime();
    let k = register(rt.backend());
    let s = rt.stream_create(1).unwrap();
    let cell = cell64(start);
    let c = cell32(0);
    rt.wait_value64(s, addr64(cell), value, op, mask).unwrap();
    launch(&rt, s, k.inc, addr32(c)).unwrap();
    assert_eq!(read32(addr32(c)), 0, "op {op}: blocked at {start:#x}");
    for &v in blocked {
        cell.store(v, Ordering::SeqCst);
        assert_eq!(rt.stream_query(s), Err(Error::NotReady), "op {op}: still blocked at {v:#x}");
    }
    cell.store(release, Ordering::SeqCst);
    assert_eq!(rt.stream_query(s), Ok(()), "op {op}: released at {release:#x}");
    assert_eq!(read32(addr32(c)), 1);
}

#[test]
fn wait_value32_gte() {
    check_wait32(GTE, 5, u32::MAX, 0, &[1, 4], 5);
    check_wait32(GTE, 5, u32::MAX, 0, &[4], 0x8000_0000);
    // The mask applies before the comparison: 0x105 & 0xff = 5 ≥ 5, 0x104 & 0xff = 4 < 5.
    check_wait32(GTE, 5, 0xff, 0, &[0x104, 0xf00], 0x105);
}

#[test]
fn wait_value32_eq() {
    check_wait32(EQ, 7, u32::MAX, 0, &[6, 8, 0x1_0007 & 0xffff_fff7], 7);
    check_wait32(EQ, 7, 0xf, 0, &[0x16, 0xf8], 0xabc7);
    check_wait32(EQ, 0xffff_ffff, u32::MAX, 0, &[0xffff_fffe], 0xffff_ffff);
}

#[test]
fn wait_value32_and() {
    // (*p & value & mask) != 0.
    check_wait32(AND, 0b100, u32::MAX, 0, &[0b011, 0b1000], 0b110);
    check_wait32(AND, 0b1100, 0b0100, 0, &[0b1000, 0b1011], 0b0100);
}

#[test]
fn wait_value32_nor() {
    // ~(*p | value) & mask != 0.
    check_wait32(NOR, 0b0011, 0b1111, 0b1100, &[0b1111, 0b1101, 0xffff_fffc], 0b0100);
    check_wait32(NOR, 0, u32::MAX, u32::MAX, &[], 0xffff_fffe);
}

#[test]
fn wait_value64_all_ops() {
    let big = 0x1_0000_0000u64;
    check_wait64(GTE, big + 5, u64::MAX, 0, &[5, big + 4, 0xffff_ffff], big + 5);
    check_wait64(EQ, big | 7, u64::MAX, 0, &[7, big | 6], big | 7);
    check_wait64(AND, big << 4, u64::MAX, 0, &[0xffff_ffff, big], big << 4 | 1);
    check_wait64(NOR, 0, big, big, &[u64::MAX], u64::MAX - big);
}

#[test]
fn wait_value_errors() {
    let rt = runtime();
    let s = rt.stream_create(0).unwrap();
    let a = cell64(0);
    let p = addr64(a);
    for op in [4u32, 5, 0x100, u32::MAX] {
        assert_eq!(rt.wait_value32(s, p, 0, op, u32::MAX), Err(Error::InvalidValue), "op {op}");
        assert_eq!(rt.wait_value64(s, p, 0, op, u64::MAX), Err(Error::InvalidValue), "op {op}");
    }
    assert_eq!(rt.wait_value32(s, 0, 0, GTE, u32::MAX), Err(Error::InvalidValue));
    assert_eq!(rt.wait_value64(s, 0, 0, GTE, u64::MAX), Err(Error::InvalidValue));
    assert_eq!(rt.wait_value32(s, p + 1, 0, GTE, u32::MAX), Err(Error::InvalidValue));
    assert_eq!(rt.wait_value32(s, p + 2, 0, GTE, u32::MAX), Err(Error::InvalidValue));
    assert_eq!(rt.wait_value64(s, p + 4, 0, GTE, u64::MAX), Err(Error::InvalidValue));
    // None of them was enqueued.
    assert_eq!(rt.stream_query(s), Ok(()));
    // A 32-bit wait at a 4-aligned address is fine.
    rt.wait_value32(s, p + 4, 0, EQ, u32::MAX).unwrap();
    assert_eq!(rt.stream_query(s), Ok(()));
}

#[test]
fn copies_and_fills() {
    let rt = runtime();
    let s = rt.stream_create(0).unwrap();
    let src = rt.malloc(64).unwrap();
    let dst = rt.malloc(64).unwrap();
    let g = gate(&rt, s);
    rt.memset_async(s, src, 0x5a, 1, 64).unwrap();
    rt.memset_async(s, src + 8, 0xbeef, 2, 4).unwrap();
    rt.memcpy_async(s, dst, src, 64).unwrap();
    assert_ne!(read32(dst), 0x5a5a_5a5a);
    open(g);
    rt.stream_synchronize(s).unwrap();
    assert_eq!(read32(dst), 0x5a5a_5a5a);
    assert_eq!((read32(dst + 8), read32(dst + 12)), (0xbeef_beef, 0xbeef_beef));
    assert_eq!(read32(dst + 60), 0x5a5a_5a5a);
    // Parameter errors.
    assert_eq!(rt.memset_async(s, src, 0, 3, 1), Err(Error::InvalidValue));
    assert_eq!(rt.memset_async(s, src + 1, 0, 2, 1), Err(Error::InvalidValue));
    assert_eq!(rt.memset_async(s, 0, 0, 1, 1), Err(Error::InvalidValue));
    assert_eq!(rt.memcpy_async(s, 0, src, 4), Err(Error::InvalidValue));
    assert_eq!(rt.memcpy_async(s, dst, 0, 4), Err(Error::InvalidValue));
    // Zero-size operations still validate the stream.
    rt.stream_destroy(s).unwrap();
    assert_eq!(rt.memcpy_async(s, dst, src, 0), Err(Error::ContextIsDestroyed));
    assert_eq!(rt.memset_async(s, dst, 0, 1, 0), Err(Error::ContextIsDestroyed));
    // Synchronous versions on the null stream.
    rt.memset(dst, 0x11, 4).unwrap();
    assert_eq!(read32(dst), 0x1111_1111);
    rt.memcpy(dst + 4, dst, 4).unwrap();
    assert_eq!(read32(dst + 4), 0x1111_1111);
}

#[test]
fn destroy_with_pending_work_returns_at_once_and_work_completes() {
    let rt = runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let s = rt.stream_create(0).unwrap();
    rt.marker(NULL).unwrap();
    let g = gate(&rt, s);
    for _ in 0..3 {
        launch(&rt, s, k.inc, addr32(c)).unwrap();
    }
    let queues = rt.backend().queues_in_use();
    rt.stream_destroy(s).unwrap();
    assert_eq!(read32(addr32(c)), 0, "destroy did not wait");
    assert_eq!(rt.stream_query(s), Err(Error::ContextIsDestroyed));
    // A destroyed stream's pending work is still the device's: the null stream waits for it.
    assert_eq!(rt.stream_query(NULL), Err(Error::NotReady));
    assert_eq!(rt.device_synchronize_timeout(aqueduct::Timeout::ZERO), Err(Error::NotReady));
    open(g);
    rt.device_synchronize().unwrap();
    assert_eq!(read32(addr32(c)), 3);
    // The drained queue serves the next stream.
    let s2 = rt.stream_create(0).unwrap();
    assert_eq!(rt.backend().queues_in_use(), queues, "queue reused");
    launch(&rt, s2, k.inc, addr32(c)).unwrap();
    rt.stream_synchronize(s2).unwrap();
    assert_eq!(read32(addr32(c)), 4);
}

#[test]
fn destroy_with_pending_work_seen_through_an_event() {
    let rt = runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let s = rt.stream_create(1).unwrap();
    let other = rt.stream_create(1).unwrap();
    let e = rt.event_create(0).unwrap();
    let g = gate(&rt, s);
    launch(&rt, s, k.inc, addr32(c)).unwrap();
    rt.event_record(e, s, 0).unwrap();
    rt.stream_destroy(s).unwrap();
    // New streams do not take the draining stream's queue.
    let busy_q = rt.backend().queues_in_use();
    let s3 = rt.stream_create(1).unwrap();
    assert_eq!(rt.backend().queues_in_use(), busy_q + 1);
    launch(&rt, s3, k.inc, addr32(c)).unwrap();
    assert_eq!(read32(addr32(c)), 1, "s3 ran; s is still blocked");
    open(g);
    rt.event_synchronize(e).unwrap();
    assert_eq!(read32(addr32(c)), 2);
    rt.stream_synchronize(other).unwrap();
}

#[test]
fn refused_host_function_does_not_wedge_the_stream() {
    // The loopback's host-call service holds 32 pending calls; the 33rd is refused. Two
    // streams, so neither ring fills first; 128 marker signals, so the pool does not either.
    let rt: aqueduct::Runtime<Lb, aqueduct::SingleThread, aqueduct::Capacities<32, 64, 8, 128>> =
        aqueduct::Runtime::new(aqueduct::loopback::Loopback::new(mem()), aqueduct::SingleThread);
    let k = register(rt.backend());
    let c = cell32(0);
    let streams = [rt.stream_create(1).unwrap(), rt.stream_create(1).unwrap()];
    let log = HostLog::watching(addr32(c));
    let gates: Vec<&AtomicU32> = streams
        .iter()
        .map(|&s| {
            let g = cell32(0);
            rt.wait_value32(s, addr32(g), 1, EQ, u32::MAX).unwrap();
            g
        })
        .collect();
    let mut accepted = 0u32;
    let mut refused = None;
    for i in 0..40 {
        let s = streams[i % 2];
        match rt.launch_host_func(s, log.plain()) {
            Ok(()) => accepted += 1,
            Err(e) => {
                refused = Some((s, e));
                break;
            }
        }
    }
    let (s, err) = refused.expect("the host-call service filled up");
    assert_eq!(err, Error::OutOfMemory);
    assert_eq!(accepted, 32);
    launch(&rt, s, k.inc, addr32(c)).unwrap();
    for g in gates {
        open(g);
    }
    for s in streams {
        rt.stream_synchronize(s).unwrap();
    }
    assert_eq!(log.calls(), accepted, "the refused function never ran");
    assert_eq!(read32(addr32(c)), 1, "work after the refused call still ran");
}
