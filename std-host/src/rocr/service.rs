//! The host-function service of the ROCr backend: one thread, started with the first host
//! function, that runs each function once its start signal reaches 0 and then stores 0 into its
//! done signal (`hsa_signal_store_screlease`, which also wakes ROCr waiters). Functions become
//! ready in any order (they may sit on different streams), so every pending one is polled;
//! between rounds the thread blocks briefly in `hsa_signal_wait_scacquire` on the oldest.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;

use aqueduct::{Error, HostFn, Result, SignalHandle};
use hsa_sys::{consts, hsa_signal_t, Hsa};

struct Call {
    start: hsa_signal_t,
    done: hsa_signal_t,
    f: HostFn,
}

pub(super) struct Service {
    tx: Option<Sender<Call>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Service {
    pub(super) fn start(hsa: Arc<Hsa>) -> Result<Service> {
        let (tx, rx) = channel();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("aqueduct-rocr-host".into())
            .spawn(move || run(&hsa, &rx, &stop2))
            .map_err(|_| Error::OutOfMemory)?;
        Ok(Service { tx: Some(tx), stop, thread: Some(thread) })
    }

    pub(super) fn submit(&self, start: SignalHandle, done: SignalHandle, f: HostFn) -> Result<()> {
        let call = Call { start: hsa_signal_t { handle: start.0 }, done: hsa_signal_t { handle: done.0 }, f };
        self.tx.as_ref().ok_or(Error::NotInitialized)?.send(call).map_err(|_| Error::NotInitialized)
    }
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

fn run(hsa: &Hsa, rx: &Receiver<Call>, stop: &AtomicBool) {
    let mut pending: Vec<Call> = Vec::new();
    loop {
        // Ordering: Acquire pairs with Drop.
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
        pending.retain(|c| {
            // SAFETY: start/done are live ROCr signals until the barrier after the call, which
            // needs `done`, completes; the backend joins this thread before shutting ROCr down.
            if unsafe { (hsa.hsa_signal_load_scacquire)(c.start) } != 0 {
                return true;
            }
            // SAFETY: the enqueuer vouched for the function and its data.
            unsafe { c.f.call() };
            // SAFETY: as above.
            unsafe { (hsa.hsa_signal_store_screlease)(c.done, 0) };
            false
        });
        match pending.first() {
            // SAFETY: a live signal (as above); a 2 ms bound keeps new submissions moving.
            Some(c) => unsafe {
                (hsa.hsa_signal_wait_scacquire)(c.start, 0, 0, 2_000_000, consts::WAIT_STATE_BLOCKED);
            },
            None => match rx.recv_timeout(std::time::Duration::from_millis(20)) {
                Ok(c) => pending.push(c),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return,
            },
        }
    }
}
