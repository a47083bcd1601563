//! The host-function service of the ROCr backend: core's pending list ([`HostCalls`]) and one
//! thread, started with the first host function, that runs the ready calls and stores 0 into
//! each done signal (`hsa_signal_store_screlease`, which also wakes ROCr waiters). Functions
//! become ready in any order (they may sit on different streams), so every pending one is
//! polled; between rounds the thread blocks briefly in `hsa_signal_wait_scacquire` on the oldest,
//! or parks while nothing is pending.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use aqueduct::host_calls::HostCalls;
use aqueduct::{Error, HostFn, Result, SignalHandle, SpinRawMutex};
use hsa_sys::{consts, hsa_signal_t, Hsa};

/// Host functions pending at most.
const PENDING: usize = 1024;

type Calls = HostCalls<SpinRawMutex, PENDING>;

pub(super) struct Service {
    calls: Arc<Calls>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Service {
    pub(super) fn start(hsa: Arc<Hsa>) -> Result<Service> {
        let calls = Arc::new(Calls::new());
        let stop = Arc::new(AtomicBool::new(false));
        let (calls2, stop2) = (Arc::clone(&calls), Arc::clone(&stop));
        let thread = std::thread::Builder::new()
            .name("aqueduct-rocr-host".into())
            .spawn(move || run(&hsa, &calls2, &stop2))
            .map_err(|_| Error::OutOfMemory)?;
        Ok(Service { calls, stop, thread: Some(thread) })
    }

    pub(super) fn submit(&self, start: SignalHandle, done: SignalHandle, f: HostFn) -> Result<()> {
        // SAFETY: start and done are live ROCr signals (amd_signal_t at the handle) until the
        // barrier after the call, which needs `done`, completes; the backend joins this thread
        // before shutting ROCr down. The caller of host_call vouched for the function.
        unsafe { self.calls.push(start, done, f) }?;
        if let Some(t) = &self.thread {
            t.thread().unpark();
        }
        Ok(())
    }
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

fn run(hsa: &Hsa, calls: &Calls, stop: &AtomicBool) {
    loop {
        // Ordering: Acquire pairs with Drop.
        if stop.load(Ordering::Acquire) {
            return;
        }
        let ran = calls.run_ready(|done| {
            // SAFETY: a live ROCr signal (as in `submit`).
            unsafe { (hsa.hsa_signal_store_screlease)(hsa_signal_t { handle: done.0 }, 0) };
        });
        if ran > 0 {
            continue;
        }
        match calls.oldest_start() {
            // SAFETY: a live signal (as in `submit`); a 2 ms bound keeps new submissions moving.
            Some(start) => unsafe {
                (hsa.hsa_signal_wait_scacquire)(
                    hsa_signal_t { handle: start.0 },
                    0,
                    0,
                    2_000_000,
                    consts::WAIT_STATE_BLOCKED,
                );
            },
            None => std::thread::park_timeout(std::time::Duration::from_millis(20)),
        }
    }
}
