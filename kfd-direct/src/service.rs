//! The host-function service (`std`): core's pending list ([`HostCalls`]) and one thread per
//! backend, started with the first host function, that runs the ready calls, sets each done
//! signal to 0 and wakes waiters with `SET_EVENT`. Between rounds it blocks in `WAIT_EVENTS` on
//! the completion event (every signal posts it), or parks while nothing is pending.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use aqueduct::host_calls::HostCalls;
use aqueduct::{Error, Result, SpinRawMutex};

use crate::abi::EventData;
use crate::driver::Driver;
use crate::sys::Sys;
use crate::{HostCall, Kfd};

/// Host functions pending at most.
const PENDING: usize = 1024;

type Calls = HostCalls<SpinRawMutex, PENDING>;

pub(crate) struct Service {
    calls: Arc<Calls>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Service {
    fn drop(&mut self) {
        // Ordering: Release; the thread stops at its next round and touches no signal after.
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

pub(crate) fn submit<S: Sys>(k: &Kfd<S>, call: HostCall) -> Result<()> {
    let mut svc = k.service.lock().unwrap_or_else(|e| e.into_inner());
    if svc.is_none() {
        let calls = Arc::new(Calls::new());
        let stop = Arc::new(AtomicBool::new(false));
        let drv = k.drv.clone();
        let event = k.completion_event;
        let (calls2, stop2) = (Arc::clone(&calls), Arc::clone(&stop));
        let thread = std::thread::Builder::new()
            .name("aqueduct-kfd-host".into())
            .spawn(move || run(&drv, event, &calls2, &stop2))
            .map_err(|_| Error::OutOfMemory)?;
        *svc = Some(Service { calls, stop, thread: Some(thread) });
    }
    let s = svc.as_ref().ok_or(Error::NotInitialized)?;
    // SAFETY: start and done are pool signals of this backend, live until the barrier after the
    // call completes, which needs `done`; the backend joins this thread (Service::drop) before it
    // frees the pool. The caller of host_call vouched for the function.
    unsafe { s.calls.push(call.start, call.done, call.f) }?;
    if let Some(t) = &s.thread {
        t.thread().unpark();
    }
    Ok(())
}

fn run<S: Sys>(drv: &Driver<S>, event: u32, calls: &Calls, stop: &AtomicBool) {
    loop {
        // Ordering: Acquire pairs with Service::drop.
        if stop.load(Ordering::Acquire) {
            return;
        }
        let ran = calls.run_ready(|done| {
            // SAFETY: as in `submit`: `done` is live until the barrier that waits on it completes.
            unsafe { done.get() }.reset(0);
        });
        if ran > 0 {
            let _ = drv.set_event(event);
            continue;
        }
        if calls.is_empty() {
            std::thread::park_timeout(Duration::from_millis(20));
        } else {
            // Slices of 2 ms: the completion event is auto-reset and shared with waiters, so a
            // wake-up may go to someone else; the slice bounds the delay.
            let mut ev = [EventData { event_id: event, ..Default::default() }];
            let _ = drv.wait_events(&mut ev, 2);
        }
    }
}
