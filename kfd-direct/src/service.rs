//! The host-function service (`std`): one thread per backend, started with the first host
//! function, that runs each function once its start signal reaches 0, sets its done signal to 0
//! and wakes waiters with `SET_EVENT`. Between rounds it blocks in `WAIT_EVENTS` on the
//! completion event (every signal posts it), so it does not spin.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, RecvTimeoutError, Sender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use std::vec::Vec;

use aqueduct::{Error, Result};

use crate::abi::EventData;
use crate::driver::Driver;
use crate::sys::Sys;
use crate::{HostCall, Kfd};

pub(crate) struct Service {
    tx: Option<Sender<HostCall>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Service {
    fn drop(&mut self) {
        // Ordering: Release; the thread stops at its next round and touches no signal after.
        self.stop.store(true, Ordering::Release);
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

pub(crate) fn submit<S: Sys>(k: &Kfd<S>, call: HostCall) -> Result<()> {
    let mut svc = k.service.lock().unwrap_or_else(|e| e.into_inner());
    if svc.is_none() {
        let (tx, rx) = channel::<HostCall>();
        let stop = Arc::new(AtomicBool::new(false));
        let drv = k.drv.clone();
        let event = k.completion_event;
        let stop2 = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("aqueduct-kfd-host".into())
            .spawn(move || run(&drv, event, &rx, &stop2))
            .map_err(|_| Error::OutOfMemory)?;
        *svc = Some(Service { tx: Some(tx), stop, thread: Some(thread) });
    }
    let tx = svc.as_ref().and_then(|s| s.tx.as_ref()).ok_or(Error::NotInitialized)?;
    tx.send(call).map_err(|_| Error::NotInitialized)
}

fn run<S: Sys>(drv: &Driver<S>, event: u32, rx: &std::sync::mpsc::Receiver<HostCall>, stop: &AtomicBool) {
    let mut pending: Vec<HostCall> = Vec::new();
    loop {
        // Ordering: Acquire pairs with Service::drop.
        if stop.load(Ordering::Acquire) {
            return;
        }
        loop {
            match rx.try_recv() {
                Ok(c) => pending.push(c),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return,
            }
        }
        let mut ran = false;
        pending.retain(|c| {
            // SAFETY: start/done are live pool signals until the barrier after the call
            // completes, which needs `done`; the backend joins this thread before freeing them.
            if unsafe { c.start.get() }.load() != 0 {
                return true;
            }
            // SAFETY: the enqueuer vouched for the function and its data.
            unsafe { c.f.call() };
            // SAFETY: as above.
            unsafe { c.done.get() }.reset(0);
            ran = true;
            false
        });
        if ran {
            let _ = drv.set_event(event);
            continue;
        }
        if pending.is_empty() {
            match rx.recv_timeout(Duration::from_millis(20)) {
                Ok(c) => pending.push(c),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
        } else {
            // Slices of 2 ms: the completion event is auto-reset and shared with waiters, so a
            // wake-up may go to someone else; the slice bounds the delay.
            let mut ev = [EventData { event_id: event, ..Default::default() }];
            let _ = drv.wait_events(&mut ev, 2);
        }
    }
}
