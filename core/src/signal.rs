//! HSA signals in the `amd_signal_t` layout (ROCr `amd_hsa_signal.h`).
//!
//! A signal handle is the address of a 64-byte, 64-byte aligned [`AmdSignal`], exactly as
//! `hsa_signal_t.handle` is in ROCr, so packets written by core carry handles the hardware, ROCr
//! and the emulator all understand. Backends own signal memory; core reads and writes it through
//! [`SignalHandle`] only while the backend guarantees it is live (see [`crate::Backend`]).
//!
//! Protocol. The packet processor decrements `value` by one when a packet that names the signal as
//! its completion signal completes (`AcqRel`), writes `end_ts` first when profiling is on, and then
//! posts `event_id` to `event_mailbox_ptr` when that is non-zero. Host waiters load `value` with
//! `Acquire`, so everything the completed packet wrote is visible once they see the new value.

use core::mem::{offset_of, size_of};
use portable_atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};

use crate::aql::Condition;

/// `amd_signal_kind_t` values.
pub mod kind {
    /// `AMD_SIGNAL_KIND_INVALID`.
    pub const INVALID: i64 = 0;
    /// `AMD_SIGNAL_KIND_USER`: a memory signal.
    pub const USER: i64 = 1;
    /// `AMD_SIGNAL_KIND_DOORBELL`: a GFX9+ hardware doorbell.
    pub const DOORBELL: i64 = -1;
    /// `AMD_SIGNAL_KIND_LEGACY_DOORBELL`.
    pub const LEGACY_DOORBELL: i64 = -2;
}

/// `amd_signal_t`: 64 bytes, 64-byte aligned.
#[repr(C, align(64))]
#[derive(Debug, Default)]
pub struct AmdSignal {
    /// Signal kind ([`kind`]).
    pub kind: AtomicI64,
    /// Current value (a doorbell pointer for doorbell kinds).
    pub value: AtomicI64,
    /// Address of the KFD event slot to post to on completion; 0 = polling only.
    pub event_mailbox_ptr: AtomicU64,
    /// KFD event id posted to the mailbox.
    pub event_id: AtomicU32,
    /// Reserved.
    pub reserved1: AtomicU32,
    /// Start timestamp of the last packet that completed this signal (profiling).
    pub start_ts: AtomicU64,
    /// End timestamp of the last packet that completed this signal (profiling).
    pub end_ts: AtomicU64,
    /// The owning `amd_queue_t` (doorbell signals only).
    pub queue_ptr: AtomicU64,
    /// Reserved.
    pub reserved3: [AtomicU32; 2],
}

const _: () = {
    assert!(size_of::<AmdSignal>() == 64);
    assert!(core::mem::align_of::<AmdSignal>() == 64);
    assert!(offset_of!(AmdSignal, value) == 8);
    assert!(offset_of!(AmdSignal, event_mailbox_ptr) == 16);
    assert!(offset_of!(AmdSignal, event_id) == 24);
    assert!(offset_of!(AmdSignal, start_ts) == 32);
    assert!(offset_of!(AmdSignal, end_ts) == 40);
    assert!(offset_of!(AmdSignal, queue_ptr) == 48);
};

impl AmdSignal {
    /// A user signal with value 0, usable in a `static`.
    pub const fn new() -> Self {
        AmdSignal { kind: AtomicI64::new(kind::USER), ..AmdSignal::zeroed() }
    }

    /// An all-zero signal (kind INVALID): pools start from this so they can live in `.bss`.
    pub const fn zeroed() -> Self {
        AmdSignal {
            kind: AtomicI64::new(kind::INVALID),
            value: AtomicI64::new(0),
            event_mailbox_ptr: AtomicU64::new(0),
            event_id: AtomicU32::new(0),
            reserved1: AtomicU32::new(0),
            start_ts: AtomicU64::new(0),
            end_ts: AtomicU64::new(0),
            queue_ptr: AtomicU64::new(0),
            reserved3: [AtomicU32::new(0), AtomicU32::new(0)],
        }
    }

    /// This signal's handle (its address).
    pub fn handle(&self) -> SignalHandle {
        SignalHandle((self as *const AmdSignal).expose_provenance() as u64)
    }

    /// Resets the signal for reuse: value `v`, timestamps cleared.
    pub fn reset(&self, v: i64) {
        // Ordering: Relaxed for the timestamps; the Release store of the value publishes them.
        self.start_ts.store(0, Ordering::Relaxed);
        self.end_ts.store(0, Ordering::Relaxed);
        self.value.store(v, Ordering::Release);
    }

    /// Loads the value.
    pub fn load(&self) -> i64 {
        // Ordering: Acquire pairs with the processor's AcqRel decrement.
        self.value.load(Ordering::Acquire)
    }

    /// Whether `cond` holds for the current value against `expected`.
    pub fn satisfied(&self, cond: Condition, expected: i64) -> bool {
        cond.holds(self.load(), expected)
    }
}

/// An `hsa_signal_t` handle: the address of an [`AmdSignal`]; 0 is "no signal".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SignalHandle(pub u64);

impl SignalHandle {
    /// The null handle.
    pub const NULL: SignalHandle = SignalHandle(0);

    /// Whether this is the null handle.
    pub const fn is_null(self) -> bool {
        self.0 == 0
    }

    /// The signal behind the handle.
    ///
    /// # Safety
    /// The handle must come from a live signal of a backend (or an [`AmdSignal`] the caller owns)
    /// that stays allocated for `'a`.
    pub unsafe fn get<'a>(self) -> &'a AmdSignal {
        // SAFETY: the caller guarantees the handle is the address of a live, aligned AmdSignal.
        unsafe { &*core::ptr::with_exposed_provenance::<AmdSignal>(self.0 as usize) }
    }
}
