//! The host-function service's pending list, shared by every backend.
//!
//! [`Backend::host_call`](crate::Backend::host_call) hands a backend a function and two signals:
//! run the function once `start` reaches 0, then complete `done`. What every backend needs for
//! that is the same — a bounded list of pending calls, run in submission order as their start
//! signals fire, each outside the list's lock — so it lives here; a backend keeps only the thread
//! (or loop) that calls [`HostCalls::run_ready`] and its way of waiting between rounds.

use portable_atomic::{AtomicUsize, Ordering};

use crate::backend::HostFn;
use crate::error::{Error, Result};
use crate::signal::SignalHandle;

#[derive(Debug, Clone, Copy)]
struct Pending {
    start: SignalHandle,
    done: SignalHandle,
    f: HostFn,
}

/// At most `N` host calls waiting for their start signal, behind a lock of raw mutex `R`.
pub struct HostCalls<R: lock_api::RawMutex, const N: usize> {
    pending: lock_api::Mutex<R, heapless::Vec<Pending, N>>,
    /// Calls pending now (read without the lock by a service deciding how to wait).
    len: AtomicUsize,
}

impl<R: lock_api::RawMutex, const N: usize> Default for HostCalls<R, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<R: lock_api::RawMutex, const N: usize> HostCalls<R, N> {
    /// An empty list (`const`, for statics).
    pub const fn new() -> Self {
        HostCalls { pending: lock_api::Mutex::const_new(R::INIT, heapless::Vec::new()), len: AtomicUsize::new(0) }
    }

    /// Adds a call; `OutOfMemory` when `N` are pending already.
    ///
    /// # Safety
    /// `start` and `done` must be live signals (the [`AmdSignal`](crate::AmdSignal) layout at
    /// their addresses) until `done` has been handed to [`run_ready`](Self::run_ready)'s
    /// `complete`, and `f` must be callable then (the `Backend::host_call` contract).
    pub unsafe fn push(&self, start: SignalHandle, done: SignalHandle, f: HostFn) -> Result<()> {
        let mut p = self.pending.lock();
        p.push(Pending { start, done, f }).map_err(|_| Error::OutOfMemory)?;
        // Ordering: Release; a service that sees the count sees the call under the lock.
        self.len.store(p.len(), Ordering::Release);
        Ok(())
    }

    /// Calls pending now.
    pub fn len(&self) -> usize {
        // Ordering: Acquire pairs with the stores in `push` and `run_ready`.
        self.len.load(Ordering::Acquire)
    }

    /// Whether no call is pending.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The start signal of the oldest pending call (what a service may block on).
    pub fn oldest_start(&self) -> Option<SignalHandle> {
        self.pending.lock().first().map(|c| c.start)
    }

    /// Runs every pending call whose start signal has reached 0, oldest first, each outside the
    /// lock, and hands its done signal to `complete` (which sets it to 0 the backend's way and
    /// wakes waiters). Returns how many ran.
    pub fn run_ready(&self, mut complete: impl FnMut(SignalHandle)) -> usize {
        let mut ran = 0;
        loop {
            let ready = {
                let mut p = self.pending.lock();
                // SAFETY: `push`'s contract keeps every pending call's start signal live.
                let at = p.iter().position(|c| unsafe { c.start.get() }.load() == 0);
                let call = at.map(|i| p.remove(i));
                // Ordering: Release, as in `push`.
                self.len.store(p.len(), Ordering::Release);
                call
            };
            let Some(c) = ready else { return ran };
            // SAFETY: the enqueuer vouched for the function and its data (`push`'s contract).
            unsafe { c.f.call() };
            complete(c.done);
            ran += 1;
        }
    }
}
