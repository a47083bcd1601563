//! Signals the runtime reads while they live, with a safe accessor.
//!
//! The runtime reads signal values straight from memory (progress counts, event records, host
//! calls). A [`LiveSignal`] is a signal created by the backend for the runtime that is never
//! returned to the backend while the runtime lives: the runtime keeps each one in a table slot
//! and reuses it. By the [`Backend`] contract its memory then stays valid as long as the backend,
//! which the runtime owns, so reading it needs no `unsafe` at the call site.

use crate::sync::atomic64::AtomicU64;
use portable_atomic::Ordering;

use crate::backend::Backend;
use crate::error::Result;
use crate::signal::{AmdSignal, SignalHandle};

/// A backend signal the runtime keeps for its whole life (never passed to `signal_destroy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LiveSignal(SignalHandle);

impl LiveSignal {
    /// Creates a signal with `initial`. The caller keeps it for the backend's life and never
    /// destroys it (that is what makes [`get`](Self::get) safe).
    pub(crate) fn create<B: Backend>(backend: &B, initial: i64) -> Result<LiveSignal> {
        backend.signal_create(initial).map(LiveSignal)
    }

    /// The handle, for packets and backend calls.
    #[inline]
    pub(crate) fn handle(self) -> SignalHandle {
        self.0
    }

    /// The signal.
    #[inline]
    pub(crate) fn get<'a>(self) -> &'a AmdSignal {
        // SAFETY: a LiveSignal comes from `Backend::signal_create` and is never destroyed while
        // the runtime (which owns the backend) lives, so the backend keeps the 64-byte aligned
        // AmdSignal at this address valid (Backend contract); every LiveSignal is used only
        // inside the runtime, during a call that borrows it.
        unsafe { self.0.get() }
    }

    /// The value (Acquire). One out-of-line copy on small images (docs/architecture.md,
    /// "Footprint"); inlined on hosts.
    #[cfg_attr(target_has_atomic = "64", inline)]
    #[cfg_attr(not(target_has_atomic = "64"), inline(never))]
    pub(crate) fn load(self) -> i64 {
        self.get().load()
    }
}

/// A slot's signal, created on the slot's first use and kept for the runtime's life: a
/// write-once atomic handle that can be read without a lock.
#[derive(Debug)]
pub(crate) struct SignalCell(AtomicU64);

impl SignalCell {
    pub(crate) const fn new() -> Self {
        SignalCell(AtomicU64::new(0))
    }

    /// The signal, if created (inline on hosts, where a 64-bit load is one instruction).
    #[cfg_attr(target_has_atomic = "64", inline)]
    pub(crate) fn get(&self) -> Option<LiveSignal> {
        // Ordering: Acquire pairs with the Release in `get_or_create`: the signal's initial value
        // is visible to whoever sees the handle.
        match self.0.load(Ordering::Acquire) {
            0 => None,
            h => Some(LiveSignal(SignalHandle(h))),
        }
    }

    /// The signal, created with `initial` on first use. Called only under a lock that
    /// serializes creation for this slot.
    pub(crate) fn get_or_create<B: Backend>(&self, backend: &B, initial: i64) -> Result<LiveSignal> {
        if let Some(s) = self.get() {
            return Ok(s);
        }
        let s = LiveSignal::create(backend, initial)?;
        // Ordering: Release publishes the initialised signal with its handle.
        self.0.store(s.handle().0, Ordering::Release);
        Ok(s)
    }
}
