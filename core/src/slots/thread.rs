//! Host-thread slots (found by hashing the thread key) and per-device state.

use crate::sync::atomic64::AtomicU64;
use portable_atomic::{AtomicU32, AtomicU8};

use crate::slot::{Slot, MAX_DEVICES};

/// Key value of a thread slot that was used and freed (probing continues past it).
pub(crate) const TOMBSTONE: u64 = u64::MAX;

/// One host thread: its key, current device, capture mode and per-thread streams. Found by
/// hashing the key (open addressing), so a lookup does not scan the table.
pub struct ThreadSlot {
    pub(crate) key: AtomicU64,
    pub(crate) device: AtomicU32,
    pub(crate) mode: AtomicU8,
    pub(crate) per_thread: [AtomicU64; MAX_DEVICES],
}

impl Slot for ThreadSlot {
    const EMPTY: Self = ThreadSlot {
        key: AtomicU64::new(0),
        device: AtomicU32::new(0),
        mode: AtomicU8::new(0),
        per_thread: [const { AtomicU64::new(0) }; MAX_DEVICES],
    };
}

/// Per-device state.
pub(crate) struct DeviceSlot {
    /// The null stream's raw handle (0 before first use).
    pub(crate) null_stream: AtomicU64,
    /// Hardware queues the pool creates on this device before streams share them.
    pub(crate) max_hw_queues: AtomicU32,
}
