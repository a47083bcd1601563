//! Queue faults (sticky `LaunchFailure` on the faulted stream only), device reset (§2.1: stale
//! streams and events; null and per-thread streams come back), and several devices.

use std::sync::atomic::{AtomicU32, Ordering};

use aqueduct::aql::QueueFault;
use aqueduct::loopback::{LoopbackQueue, TraceEntry};
use aqueduct::{Error, StreamHandle};
use aqueduct_tests::*;

const NULL: StreamHandle = StreamHandle::NULL;
const PT: StreamHandle = StreamHandle::PER_THREAD;
const EQ: u32 = 1;

fn gate(rt: &Rt, s: StreamHandle) -> &'static AtomicU32 {
    let g = cell32(0);
    rt.wait_value32(s, addr32(g), 1, EQ, u32::MAX).unwrap();
    g
}

fn open(g: &AtomicU32) {
    g.store(1, Ordering::SeqCst);
}

#[test]
fn injected_fault_is_sticky_and_local() {
    let rt = runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let bad = rt.stream_create(1).unwrap();
    let good = rt.stream_create(1).unwrap();
    let g = gate(&rt, bad);
    launch(&rt, bad, k.inc, addr32(c)).unwrap();
    let q = queue_of(&rt, bad);
    rt.backend().inject_fault(&LoopbackQueue(q), QueueFault::KernelError);
    open(g);
    assert_eq!(rt.stream_synchronize(bad), Err(Error::LaunchFailure));
    assert_eq!(read32(addr32(c)), 0, "the faulted queue ran nothing more");
    for _ in 0..3 {
        assert_eq!(rt.stream_query(bad), Err(Error::LaunchFailure), "sticky");
        assert_eq!(rt.stream_synchronize(bad), Err(Error::LaunchFailure), "sticky");
        assert_eq!(launch(&rt, bad, k.inc, addr32(c)), Err(Error::LaunchFailure));
    }
    // Other streams are unaffected.
    launch(&rt, good, k.inc, addr32(c)).unwrap();
    rt.stream_synchronize(good).unwrap();
    assert_eq!(rt.stream_query(good), Ok(()));
    assert_eq!(read32(addr32(c)), 1);
    // The faulted stream can still be destroyed; its queue is not handed to the next stream.
    rt.stream_destroy(bad).unwrap();
    let fresh = rt.stream_create(1).unwrap();
    launch(&rt, fresh, k.inc, addr32(c)).unwrap();
    rt.stream_synchronize(fresh).unwrap();
    assert_eq!(read32(addr32(c)), 2);
}

#[test]
fn kernel_error_faults_its_queue() {
    let rt = runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let bad = rt.stream_create(1).unwrap();
    let good = rt.stream_create(0).unwrap();
    launch(&rt, bad, k.inc, addr32(c)).unwrap();
    launch(&rt, bad, k.fail, 0).unwrap();
    // Accepted, because the fault is only known when the queue reaches it... and it did.
    assert_eq!(launch(&rt, bad, k.inc, addr32(c)), Err(Error::LaunchFailure));
    assert_eq!(rt.stream_query(bad), Err(Error::LaunchFailure));
    assert_eq!(rt.stream_synchronize(bad), Err(Error::LaunchFailure));
    assert_eq!(read32(addr32(c)), 1, "work before the fault ran");
    let q = queue_of(&rt, bad);
    let faults: Vec<TraceEntry> =
        trace(rt.backend()).into_iter().filter(|e| matches!(e, TraceEntry::Fault { .. })).collect();
    assert_eq!(faults, vec![TraceEntry::Fault { queue: q, fault: QueueFault::KernelError }]);
    // A blocking stream and the null stream still work.
    launch(&rt, good, k.inc, addr32(c)).unwrap();
    launch(&rt, NULL, k.inc, addr32(c)).unwrap();
    rt.stream_synchronize(good).unwrap();
    rt.stream_synchronize(NULL).unwrap();
    assert_eq!(read32(addr32(c)), 3);
}

#[test]
fn fault_on_the_null_stream() {
    let rt = runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let nb = rt.stream_create(1).unwrap();
    launch(&rt, NULL, k.fail, 0).unwrap();
    assert_eq!(rt.stream_query(NULL), Err(Error::LaunchFailure));
    assert_eq!(rt.stream_query(StreamHandle::LEGACY), Err(Error::LaunchFailure));
    assert_eq!(rt.stream_synchronize(NULL), Err(Error::LaunchFailure));
    launch(&rt, nb, k.inc, addr32(c)).unwrap();
    rt.stream_synchronize(nb).unwrap();
    assert_eq!(read32(addr32(c)), 1);
    // A device reset brings a working null stream back.
    rt.device_reset().unwrap();
    launch(&rt, NULL, k.inc, addr32(c)).unwrap();
    rt.stream_synchronize(NULL).unwrap();
    assert_eq!(read32(addr32(c)), 2);
}

#[test]
fn device_reset_makes_handles_stale() {
    let rt = runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let s = rt.stream_create(0).unwrap();
    let e = rt.event_create(0).unwrap();
    let null_id = rt.stream_id(NULL).unwrap();
    let pt_id = rt.stream_id(PT).unwrap();
    launch(&rt, s, k.inc, addr32(c)).unwrap();
    rt.event_record(e, s, 0).unwrap();
    rt.device_reset().unwrap();
    assert_eq!(read32(addr32(c)), 1, "reset waited for the work");
    assert_eq!(rt.stream_query(s), Err(Error::ContextIsDestroyed));
    assert_eq!(rt.stream_destroy(s), Err(Error::ContextIsDestroyed));
    assert_eq!(rt.stream_id(s), Err(Error::InvalidHandle));
    assert_eq!(rt.event_query(e), Err(Error::ContextIsDestroyed));
    assert_eq!(rt.event_destroy(e), Err(Error::ContextIsDestroyed));
    assert!(!rt.stream_exists(0, s));
    // The null and per-thread streams come back, as new streams.
    let null2 = rt.stream_id(NULL).unwrap();
    let pt2 = rt.stream_id(PT).unwrap();
    assert!(null2 != null_id && pt2 != pt_id && null2 != pt2);
    launch(&rt, NULL, k.inc, addr32(c)).unwrap();
    launch(&rt, PT, k.inc, addr32(c)).unwrap();
    rt.stream_synchronize(NULL).unwrap();
    assert_eq!(read32(addr32(c)), 3);
    // And implicit synchronisation works between the new ones.
    let g = gate(&rt, PT);
    launch(&rt, NULL, k.inc, addr32(c)).unwrap();
    assert_eq!(read32(addr32(c)), 3);
    open(g);
    rt.stream_synchronize(NULL).unwrap();
    assert_eq!(read32(addr32(c)), 4);
    // New objects work.
    let s2 = rt.stream_create(0).unwrap();
    let e2 = rt.event_create(0).unwrap();
    rt.event_record(e2, s2, 0).unwrap();
    rt.event_synchronize(e2).unwrap();
}

#[test]
fn device_reset_with_stuck_work() {
    let rt = runtime();
    let k = register(rt.backend());
    let c = cell32(0);
    let s = rt.stream_create(1).unwrap();
    let _g = gate(&rt, s);
    launch(&rt, s, k.inc, addr32(c)).unwrap();
    rt.device_reset().unwrap();
    assert_eq!(rt.stream_query(s), Err(Error::ContextIsDestroyed));
    let s2 = rt.stream_create(1).unwrap();
    launch(&rt, s2, k.inc, addr32(c)).unwrap();
    rt.stream_synchronize(s2).unwrap();
    assert_eq!(read32(addr32(c)), 1);
    rt.device_synchronize().unwrap();
}

#[test]
fn several_devices() {
    let rt = runtime_devices(2);
    let k = register(rt.backend());
    let c = cell32(0);
    assert_eq!(rt.device_count(), Ok(2));
    assert_eq!(rt.device(), Ok(0));
    assert_eq!(rt.set_device(2), Err(Error::InvalidDevice));
    assert_eq!(rt.set_device(u32::MAX), Err(Error::InvalidDevice));
    assert_eq!(rt.device(), Ok(0), "a refused set_device changes nothing");
    assert_eq!(rt.device_info(2).err(), Some(Error::InvalidDevice));
    let s0 = rt.stream_create(0).unwrap();
    let e0 = rt.event_create(0).unwrap();
    let null0 = rt.stream_id(NULL).unwrap();
    rt.set_device(1).unwrap();
    assert_eq!(rt.device(), Ok(1));
    let s1 = rt.stream_create(0).unwrap();
    assert_eq!(rt.stream_device(s0), Ok(0));
    assert_eq!(rt.stream_device(s1), Ok(1));
    assert_eq!(rt.stream_device(NULL), Ok(1));
    assert_eq!(rt.stream_device(PT), Ok(1));
    assert!(rt.stream_exists(1, s1) && !rt.stream_exists(0, s1) && rt.stream_exists(0, s0));
    let null1 = rt.stream_id(NULL).unwrap();
    assert_ne!(null0, null1, "one null stream per device");
    // An event of device 0 cannot be recorded on a stream of device 1.
    assert_eq!(rt.event_record(e0, s1, 0), Err(Error::InvalidHandle));
    rt.event_record(e0, s0, 0).unwrap();
    // Blocking streams of device 0 do not hold up device 1's null stream.
    rt.set_device(0).unwrap();
    let g = gate(&rt, s0);
    rt.set_device(1).unwrap();
    launch(&rt, NULL, k.inc, addr32(c)).unwrap();
    assert_eq!(read32(addr32(c)), 1);
    assert_eq!(rt.stream_query(NULL), Ok(()));
    assert_eq!(rt.device_synchronize_timeout(aqueduct::Timeout::ZERO), Ok(()), "device 1 only");
    // Resetting device 1 leaves device 0 alone.
    rt.device_reset().unwrap();
    assert_eq!(rt.stream_query(s1), Err(Error::ContextIsDestroyed));
    assert_eq!(rt.stream_query(s0), Err(Error::NotReady));
    open(g);
    assert_eq!(rt.stream_query(s0), Ok(()));
    rt.set_device(0).unwrap();
    assert_eq!(rt.stream_id(NULL), Ok(null0));
    rt.event_synchronize(e0).unwrap();
}

#[test]
fn no_device() {
    let rt = runtime_devices(0);
    assert_eq!(rt.device_count(), Err(Error::NoDevice));
    assert_eq!(rt.stream_create(0), Err(Error::NoDevice));
    assert_eq!(rt.event_create(0), Err(Error::NoDevice));
    assert_eq!(rt.stream_query(NULL), Err(Error::NoDevice));
    assert_eq!(rt.stream_synchronize(PT), Err(Error::NoDevice));
    assert_eq!(rt.set_device(0), Err(Error::NoDevice));
    assert_eq!(rt.device_synchronize(), Err(Error::NoDevice));
}
