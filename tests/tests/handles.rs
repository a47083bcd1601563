//! Handle validation (docs/hip-semantics.md §2.1, §2.4): stale handles after destroy and after slot
//! reuse, garbage handles, kinds mixed up, full tables, unique stream ids.

use aqueduct::loopback::Loopback;
use aqueduct::{Capacities, Error, EventHandle, Runtime, SingleThread, StreamHandle};
use aqueduct_tests::*;

const CID: Error = Error::ContextIsDestroyed;
const IH: Error = Error::InvalidHandle;

/// Every stream API that validates a handle, with the error §2.1 gives for a stale one.
fn stale_checks<R>(rt: &R, s: StreamHandle, stale: Error, id_stale: Error)
where
    R: StreamApi,
{
    assert_eq!(rt.query(s), Err(stale), "query");
    assert_eq!(rt.sync(s), Err(stale), "synchronize");
    assert_eq!(rt.destroy(s), Err(stale), "destroy");
    assert_eq!(rt.flags(s), Err(stale), "flags");
    assert_eq!(rt.priority(s), Err(stale), "priority");
    assert_eq!(rt.device(s), Err(stale), "device");
    assert_eq!(rt.id(s), Err(id_stale), "id");
    assert_eq!(rt.mark(s), Err(stale), "marker");
}

/// The stream APIs of a runtime, whatever its capacities.
trait StreamApi {
    fn query(&self, s: StreamHandle) -> aqueduct::Result<()>;
    fn sync(&self, s: StreamHandle) -> aqueduct::Result<()>;
    fn destroy(&self, s: StreamHandle) -> aqueduct::Result<()>;
    fn flags(&self, s: StreamHandle) -> aqueduct::Result<u32>;
    fn priority(&self, s: StreamHandle) -> aqueduct::Result<i32>;
    fn device(&self, s: StreamHandle) -> aqueduct::Result<u32>;
    fn id(&self, s: StreamHandle) -> aqueduct::Result<u64>;
    fn mark(&self, s: StreamHandle) -> aqueduct::Result<()>;
}

impl<const S: usize> StreamApi for Runtime<Lb, SingleThread, Capacities<S>> {
    fn query(&self, s: StreamHandle) -> aqueduct::Result<()> {
        self.stream_query(s)
    }
    fn sync(&self, s: StreamHandle) -> aqueduct::Result<()> {
        self.stream_synchronize(s)
    }
    fn destroy(&self, s: StreamHandle) -> aqueduct::Result<()> {
        self.stream_destroy(s)
    }
    fn flags(&self, s: StreamHandle) -> aqueduct::Result<u32> {
        self.stream_flags(s)
    }
    fn priority(&self, s: StreamHandle) -> aqueduct::Result<i32> {
        self.stream_priority(s)
    }
    fn device(&self, s: StreamHandle) -> aqueduct::Result<u32> {
        self.stream_device(s)
    }
    fn id(&self, s: StreamHandle) -> aqueduct::Result<u64> {
        self.stream_id(s)
    }
    fn mark(&self, s: StreamHandle) -> aqueduct::Result<()> {
        self.marker(s)
    }
}

#[test]
fn stale_after_destroy() {
    let rt = runtime();
    let s = rt.stream_create(0).unwrap();
    rt.marker(s).unwrap();
    rt.stream_destroy(s).unwrap();
    stale_checks(&rt, s, CID, IH);
    let mut out = [0u32; 4];
    assert_eq!(rt.stream_cu_mask(s, &mut out), Err(CID));
    let e = rt.event_create(0).unwrap();
    assert_eq!(rt.event_record(e, s, 0), Err(CID));
    assert_eq!(rt.stream_wait_event(s, e, 0), Err(CID));
    let c = cell32(0);
    assert_eq!(rt.write_value32(s, addr32(c), 1, 0), Err(CID));
    assert_eq!(rt.wait_value32(s, addr32(c), 1, 0, u32::MAX), Err(CID));
    assert_eq!(rt.launch_host_func(s, HostLog::watching(0).plain()), Err(CID));
    assert!(!rt.stream_exists(0, s));
}

#[test]
fn stale_after_slot_reuse() {
    // Four slots: fill them, destroy one, and the next stream must take that very slot.
    let rt: Runtime<Lb, SingleThread, Capacities<4>> = Runtime::new(Loopback::new(mem()), SingleThread);
    let streams: Vec<StreamHandle> = (0..4).map(|_| rt.stream_create(0).unwrap()).collect();
    assert_eq!(rt.stream_create(0), Err(Error::OutOfMemory));
    let old = streams[2];
    let old_id = rt.stream_id(old).unwrap();
    let queues = rt.backend().queues_in_use();
    rt.stream_destroy(old).unwrap();
    let new = rt.stream_create(1).unwrap();
    assert_ne!(new, old);
    assert_eq!(rt.backend().queues_in_use(), queues, "the slot's idle queue was reused");
    assert_eq!(rt.stream_create(0), Err(Error::OutOfMemory), "the table is full again: same slot");
    // The old handle stays stale although its slot is live again.
    stale_checks(&rt, old, CID, IH);
    // The new stream is unaffected by those calls.
    assert_eq!(rt.stream_flags(new), Ok(1));
    assert!(rt.stream_id(new).unwrap() > old_id);
    rt.marker(new).unwrap();
    rt.stream_synchronize(new).unwrap();
    // And the other streams are untouched.
    for s in [streams[0], streams[1], streams[3]] {
        assert_eq!(rt.stream_flags(s), Ok(0));
    }
}

#[test]
fn table_full_and_recovery() {
    let rt: Runtime<Lb, SingleThread, Capacities<3>> = Runtime::new(Loopback::new(mem()), SingleThread);
    let a = rt.stream_create(0).unwrap();
    let b = rt.stream_create(1).unwrap();
    let c = rt.stream_create(0).unwrap();
    assert_eq!(rt.stream_create(0), Err(Error::OutOfMemory));
    assert_eq!(rt.stream_create_with_priority(0, -1), Err(Error::OutOfMemory));
    assert_eq!(rt.stream_create_with_cu_mask(&[1]), Err(Error::OutOfMemory));
    // The null stream needs a slot too.
    assert_eq!(rt.marker(StreamHandle::NULL), Err(Error::OutOfMemory));
    rt.stream_destroy(b).unwrap();
    // The freed slot serves the null stream now...
    rt.marker(StreamHandle::NULL).unwrap();
    assert_eq!(rt.stream_create(0), Err(Error::OutOfMemory));
    rt.stream_destroy(c).unwrap();
    // ...and then a created stream.
    let d = rt.stream_create(0).unwrap();
    rt.marker(d).unwrap();
    rt.stream_synchronize(StreamHandle::NULL).unwrap();
    assert_eq!(rt.stream_flags(a), Ok(0));
}

#[test]
fn garbage_stream_handles() {
    let rt = runtime();
    let live = rt.stream_create(0).unwrap();
    let e = rt.event_create(0).unwrap();
    let garbage = [
        StreamHandle(3),
        StreamHandle(0xdead_beef),
        StreamHandle(u64::MAX),
        StreamHandle(live.0 + 1),                 // the next slot, never issued
        StreamHandle(live.0 + (1 << 16)),         // a future generation of the live slot
        StreamHandle(live.0 & !0xffff_ffff_0000), // generation 0
        StreamHandle(e.0),                        // an event handle
    ];
    for g in garbage {
        assert_eq!(rt.stream_query(g), Err(IH), "{g:?}");
        assert_eq!(rt.stream_synchronize(g), Err(IH), "{g:?}");
        assert_eq!(rt.stream_destroy(g), Err(IH), "{g:?}");
        assert_eq!(rt.stream_flags(g), Err(IH), "{g:?}");
        assert_eq!(rt.stream_priority(g), Err(IH), "{g:?}");
        assert_eq!(rt.stream_id(g), Err(IH), "{g:?}");
        assert_eq!(rt.stream_device(g), Err(IH), "{g:?}");
        assert_eq!(rt.marker(g), Err(IH), "{g:?}");
        assert_eq!(rt.event_record(e, g, 0), Err(IH), "{g:?}");
        assert_eq!(rt.stream_wait_event(g, e, 0), Err(IH), "{g:?}");
    }
    // A stream handle passed as an event is garbage too.
    assert_eq!(rt.event_query(EventHandle(live.0)), Err(IH));
    assert_eq!(rt.event_destroy(EventHandle(live.0)), Err(IH));
    assert_eq!(rt.event_record(EventHandle(live.0), live, 0), Err(IH));
    assert_eq!(rt.event_query(EventHandle(0xdead_beef)), Err(IH));
    // The live objects survived.
    rt.event_record(e, live, 0).unwrap();
    rt.event_synchronize(e).unwrap();
    rt.stream_destroy(live).unwrap();
}

#[test]
fn event_handles() {
    let rt = runtime();
    assert_eq!(rt.event_destroy(EventHandle::NULL), Err(IH));
    assert_eq!(rt.event_query(EventHandle::NULL), Err(IH));
    assert_eq!(rt.event_synchronize(EventHandle::NULL), Err(IH));
    assert_eq!(rt.event_record(EventHandle::NULL, StreamHandle::NULL, 0), Err(IH));
    let e = rt.event_create(0).unwrap();
    rt.event_destroy(e).unwrap();
    assert_eq!(rt.event_destroy(e), Err(CID), "double destroy");
    assert_eq!(rt.event_query(e), Err(CID));
    assert_eq!(rt.event_synchronize(e), Err(CID));
    assert_eq!(rt.event_record(e, StreamHandle::NULL, 0), Err(CID));
    assert_eq!(rt.stream_wait_event(StreamHandle::NULL, e, 0), Err(CID));
    // Slot reuse: the new event works, the old handle stays stale.
    let e2 = rt.event_create(0).unwrap();
    assert_ne!(e2, e);
    assert_eq!(rt.event_destroy(e), Err(CID));
    rt.event_record(e2, StreamHandle::NULL, 0).unwrap();
    rt.event_synchronize(e2).unwrap();
    rt.event_destroy(e2).unwrap();
}

#[test]
fn event_table_full_and_recovery() {
    let rt: Runtime<Lb, SingleThread, Capacities<8, 3>> = Runtime::new(Loopback::new(mem()), SingleThread);
    let evs: Vec<EventHandle> = (0..3).map(|_| rt.event_create(0).unwrap()).collect();
    assert_eq!(rt.event_create(0), Err(Error::OutOfMemory));
    rt.event_destroy(evs[1]).unwrap();
    let e = rt.event_create(2).unwrap();
    assert_eq!(rt.event_create(0), Err(Error::OutOfMemory));
    assert_eq!(rt.event_query(evs[1]), Err(CID));
    rt.event_record(e, StreamHandle::NULL, 0).unwrap();
    assert_eq!(rt.event_query(e), Ok(()));
}

#[test]
fn stream_ids_unique_and_increasing() {
    let rt = runtime();
    let mut last = rt.stream_id(StreamHandle::NULL).unwrap();
    let mut seen = vec![last];
    for round in 0..40 {
        let s = rt.stream_create(round % 2).unwrap();
        let id = rt.stream_id(s).unwrap();
        assert!(id > last, "ids grow: {id} after {last}");
        assert!(!seen.contains(&id));
        seen.push(id);
        last = id;
        // Destroying and recreating in the same slot still gives a new id.
        rt.stream_destroy(s).unwrap();
    }
    let pt = rt.stream_id(StreamHandle::PER_THREAD).unwrap();
    assert!(!seen.contains(&pt));
}
