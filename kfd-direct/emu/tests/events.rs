//! KFD events: the user event page, signal events, set/reset, WAIT_EVENTS (docs/kfd-aql.md §1.6).

mod common;

use std::time::{Duration, Instant};

use aqueduct_kfd_emu::abi::*;
use aqueduct_kfd_emu::{Errno, SLOT_UNSIGNALED};
use common::*;

#[test]
fn event_page_and_signal_event_ids() {
    let h = Harness::new();
    let page = h.event_page();
    // SAFETY: the page is CPU-mapped.
    unsafe { std::ptr::write_bytes(page.ptr::<u8>(), 0, 64) };
    let e1 = h.create_event(event_type::SIGNAL, false, Some(&page)).unwrap();
    assert_eq!(e1.event_id, 1, "id 0 is reserved");
    assert_eq!((e1.event_slot_index, e1.event_trigger_data), (1, 1));
    // The kernel filled the page with all ones.
    // SAFETY: the page is CPU-mapped.
    assert_eq!(unsafe { *page.ptr::<u64>().add(1) }, SLOT_UNSIGNALED);
    let e2 = h.create_event(event_type::SIGNAL, true, None).unwrap();
    assert_eq!(e2.event_id, 2);
    // The page may be given once only.
    assert_eq!(h.create_event(event_type::SIGNAL, false, Some(&page)).map(|_| ()), Err(Errno::EINVAL));
    // Non-signal events get ids from 0x40000000 and no slot.
    let m = h.create_event(event_type::MEMORY, false, None).unwrap();
    assert!(m.event_id >= 0x4000_0000);
    assert_eq!(h.create_event(99, false, None).map(|_| ()), Err(Errno::EINVAL));
    // SET/RESET only on signal events; unknown ids fail.
    expect_err(h.event_op(request::SET_EVENT, m.event_id), Errno::EINVAL);
    expect_err(h.event_op(request::RESET_EVENT, m.event_id), Errno::EINVAL);
    expect_err(h.event_op(request::SET_EVENT, 777), Errno::EINVAL);
    expect_err(h.event_op(request::DESTROY_EVENT, 777), Errno::EINVAL);
    h.event_op(request::DESTROY_EVENT, e1.event_id).unwrap();
    // The freed id is reused.
    assert_eq!(h.create_event(event_type::SIGNAL, false, None).unwrap().event_id, 1);
}

#[test]
fn wait_events_timeouts_any_all_and_reset() {
    let h = Harness::new();
    let page = h.event_page();
    let a = h.create_event(event_type::SIGNAL, false, Some(&page)).unwrap().event_id;
    let b = h.create_event(event_type::SIGNAL, false, None).unwrap().event_id;
    // Poll (timeout 0) and a short timeout.
    assert_eq!(h.wait_events(&[a], false, 0).unwrap().0, wait_result::TIMEOUT);
    let t = Instant::now();
    assert_eq!(h.wait_events(&[a], false, 20).unwrap().0, wait_result::TIMEOUT);
    assert!(t.elapsed() >= Duration::from_millis(20));
    h.event_op(request::SET_EVENT, a).unwrap();
    assert_eq!(h.wait_events(&[a, b], false, 0).unwrap().0, wait_result::COMPLETE);
    assert_eq!(h.wait_events(&[a, b], true, 0).unwrap().0, wait_result::TIMEOUT);
    h.event_op(request::SET_EVENT, b).unwrap();
    assert_eq!(h.wait_events(&[a, b], true, 0).unwrap().0, wait_result::COMPLETE);
    // Manual-reset events stay set until RESET_EVENT.
    h.event_op(request::RESET_EVENT, a).unwrap();
    assert_eq!(h.wait_events(&[a], false, 0).unwrap().0, wait_result::TIMEOUT);
    // Unknown ids and bad pointers.
    assert_eq!(h.wait_events(&[999], false, 0).map(|r| r.0), Err(Errno::EINVAL));
    let mut w = WaitEventsArgs { events_ptr: 0, num_events: 1, wait_for_all: 0, timeout: 0, wait_result: 0 };
    expect_err(ioctl(&h.emu, h.kfd, request::WAIT_EVENTS, &mut w), Errno::EFAULT);
}

#[test]
fn auto_reset_is_consumed_by_one_wait() {
    let h = Harness::new();
    let page = h.event_page();
    let e = h.create_event(event_type::SIGNAL, true, Some(&page)).unwrap().event_id;
    h.event_op(request::SET_EVENT, e).unwrap();
    assert_eq!(h.wait_events(&[e], false, 0).unwrap().0, wait_result::COMPLETE);
    assert_eq!(h.wait_events(&[e], false, 0).unwrap().0, wait_result::TIMEOUT);
}

#[test]
fn infinite_wait_wakes_on_set_and_fails_on_destroy() {
    let h = Harness::new();
    let page = h.event_page();
    let e = h.create_event(event_type::SIGNAL, true, Some(&page)).unwrap().event_id;
    std::thread::scope(|s| {
        let waiter = s.spawn(|| h.wait_events(&[e], false, limits::TIMEOUT_INFINITE).unwrap().0);
        std::thread::sleep(Duration::from_millis(20));
        h.event_op(request::SET_EVENT, e).unwrap();
        assert_eq!(waiter.join().unwrap(), wait_result::COMPLETE);
        let waiter = s.spawn(|| h.wait_events(&[e], false, limits::TIMEOUT_INFINITE).unwrap().0);
        std::thread::sleep(Duration::from_millis(20));
        h.event_op(request::DESTROY_EVENT, e).unwrap();
        assert_eq!(waiter.join().unwrap(), wait_result::FAIL);
    });
}

#[test]
fn event_age_closes_the_lost_wakeup_race() {
    let h = Harness::new();
    let page = h.event_page();
    let e = h.create_event(event_type::SIGNAL, true, Some(&page)).unwrap().event_id;
    // Learn the current age.
    h.event_op(request::SET_EVENT, e).unwrap();
    let mut d = [EventData { event_id: e, payload: [1, 0, 0, 0], ..Default::default() }];
    let mut w = WaitEventsArgs {
        events_ptr: d.as_mut_ptr() as u64,
        num_events: 1,
        wait_for_all: 0,
        timeout: 0,
        wait_result: 0,
    };
    ioctl(&h.emu, h.kfd, request::WAIT_EVENTS, &mut w).unwrap();
    assert_eq!(w.wait_result, wait_result::COMPLETE);
    let age = d[0].last_event_age();
    assert!(age > 1);
    // A set we "missed" (age moved on) completes the wait at once even though auto-reset
    // already consumed the signalled state.
    h.event_op(request::SET_EVENT, e).unwrap();
    h.wait_events(&[e], false, 0).unwrap();
    d[0].payload[0] = age;
    w.events_ptr = d.as_mut_ptr() as u64;
    ioctl(&h.emu, h.kfd, request::WAIT_EVENTS, &mut w).unwrap();
    assert_eq!(w.wait_result, wait_result::COMPLETE);
}
