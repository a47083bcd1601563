//! The hardware-queue pool's slots and the binding protocol that lets streams publish into a
//! pooled queue without a lock.
//!
//! A [`QueueSlot`] holds one hardware queue (or none). Streams *bind* to a slot; a slot's queue is
//! created, replaced or destroyed only while no stream is bound to it. Both rules are enforced
//! here: binding, unbinding and replacing need the `PoolWriter`, of which the runtime keeps
//! exactly one, inside its structural lock; reading a slot's queue needs a `Binding`, which
//! only `QueueSlot::bind` makes and only `QueueSlot::unbind` consumes. So a queue never
//! changes under a reader, and readers need no lock. The policy (which slot a stream gets)
//! lives in `runtime/stream.rs`; `docs/queue-pool.md` describes both.

use crate::sync::atomic64::AtomicU64;
use core::cell::UnsafeCell;
use portable_atomic::{AtomicBool, AtomicU32, Ordering};

use crate::backend::QueueDesc;
use crate::slot::Slot;
use crate::stream::{CuMask, Priority};

/// A hardware queue of the pool and what it was created for.
#[derive(Debug)]
pub struct QueueHw<Q> {
    /// The backend queue.
    pub(crate) queue: Q,
    /// Where packets go.
    pub(crate) desc: QueueDesc,
    /// Its device.
    pub(crate) device: u32,
    /// Its priority (part of the pool key).
    pub(crate) priority: Priority,
    /// Its CU mask (part of the pool key).
    pub(crate) cu_mask: Option<CuMask>,
    /// Set once a second stream binds: producers then use the multi-producer protocol. Set by
    /// the binder while it holds the first stream's lock, so every producer agrees on it.
    pub(crate) shared: AtomicBool,
    /// Highest doorbell value + 1 asked for by a producer of a shared queue.
    pub(crate) rung: AtomicU64,
}

/// One slot of the pool.
pub struct QueueSlot<Q> {
    hw: UnsafeCell<Option<QueueHw<Q>>>,
    /// Streams bound to the slot (live and draining).
    bound: AtomicU32,
}

// SAFETY: the cell is written only by the PoolWriter holder while `bound` is 0, and read only by
// holders of a Binding (bound > 0) or by the PoolWriter holder; see the module doc. Q crosses
// threads through it, hence the bounds.
unsafe impl<Q: Send + Sync> Sync for QueueSlot<Q> {}
// SAFETY: as above; the slot owns its Q.
unsafe impl<Q: Send> Send for QueueSlot<Q> {}

impl<Q> Slot for QueueSlot<Q> {
    const EMPTY: Self = QueueSlot { hw: UnsafeCell::new(None), bound: AtomicU32::new(0) };
}

/// Proof of holding the runtime's structural lock: the only way to change the pool.
#[derive(Debug)]
pub(crate) struct PoolWriter(());

impl PoolWriter {
    /// The runtime's one writer; it lives inside the structural lock.
    pub(crate) const fn new() -> Self {
        PoolWriter(())
    }
}

/// A stream's claim on a pool slot; while it exists the slot's queue stays put.
#[derive(Debug)]
pub(crate) struct Binding(u16);

impl Binding {
    /// The slot index.
    #[inline]
    pub(crate) fn index(&self) -> usize {
        usize::from(self.0)
    }
}

impl<Q> QueueSlot<Q> {
    /// The queue, for a bound stream.
    #[inline]
    pub(crate) fn get<'a>(&'a self, _binding: &'a Binding) -> Option<&'a QueueHw<Q>> {
        // SAFETY: a Binding exists, so `bound > 0` and no writer replaces the cell while the
        // binding (borrowed for 'a) lives; shared reads are fine.
        unsafe { (*self.hw.get()).as_ref() }
    }

    /// The queue, for the writer.
    pub(crate) fn peek<'a>(&'a self, _w: &'a PoolWriter) -> Option<&'a QueueHw<Q>> {
        // SAFETY: only the PoolWriter holder writes the cell, and it is borrowed shared here.
        unsafe { (*self.hw.get()).as_ref() }
    }

    /// Streams bound now.
    pub(crate) fn bound(&self) -> u32 {
        // Ordering: Relaxed; changed only under the writer, read for load balancing.
        self.bound.load(Ordering::Relaxed)
    }

    /// Binds a stream (the slot must hold a queue; `index` is this slot's index).
    pub(crate) fn bind(&self, _w: &mut PoolWriter, index: usize) -> Option<Binding> {
        let index = u16::try_from(index).ok()?;
        self.peek(_w)?;
        // Ordering: Relaxed; the writer is the only one changing it (under the structural lock).
        self.bound.fetch_add(1, Ordering::Relaxed);
        Some(Binding(index))
    }

    /// Gives a binding back.
    pub(crate) fn unbind(&self, _w: &mut PoolWriter, b: Binding) {
        let _ = b;
        // Ordering: Relaxed, as in `bind`.
        self.bound.fetch_sub(1, Ordering::Relaxed);
    }

    /// Puts `hw` into the slot and returns what was there, if no stream is bound; otherwise
    /// hands `hw` back as the error.
    #[allow(clippy::result_large_err)]
    pub(crate) fn replace(
        &self,
        _w: &mut PoolWriter,
        hw: Option<QueueHw<Q>>,
    ) -> core::result::Result<Option<QueueHw<Q>>, Option<QueueHw<Q>>> {
        if self.bound() != 0 {
            return Err(hw);
        }
        // SAFETY: no Binding exists (bound == 0) and the writer is borrowed mutably, so nobody
        // else reads or writes the cell now.
        Ok(core::mem::replace(unsafe { &mut *self.hw.get() }, hw))
    }
}
