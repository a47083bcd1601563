//! HSA signals in the `amd_signal_t` layout (ROCr `amd_hsa_signal.h`).
//!
//! A signal handle is the address of a 64-byte, 64-byte aligned [`AmdSignal`], exactly as
//! `hsa_signal_t.handle` is in ROCr, so packets written by core carry handles the hardware, ROCr
//! and the emulator all understand. Backends own signal memory; core reads and writes it through
//! [`SignalHandle`] only while the backend guarantees it is live (see [`crate::Backend`]).
//!
//! # Protocol
//!
//! [`AmdSignal::complete`] is the packet processor's side: when a packet that names the signal
//! as its completion signal completes, it stores the timestamps (when profiling), decrements
//! `value` by one with `AcqRel`, and then posts `event_id` to `event_mailbox_ptr` when that is
//! non-zero. [`AmdSignal::wait`] is the host's side: it loads `value` with `Acquire`, so
//! everything the completed packet wrote (and the timestamps) is visible once it sees the new
//! value, and it blocks on the signal's event only after seeing an old value. The post comes
//! after the decrement, so a completion's event is set only after its new value is visible, and a
//! waiter that re-reads the value after every wake-up misses none.
//!
//! The loom models in `core/tests/loom_signal.rs` run these functions themselves over loom
//! atomics (`AmdSignal::new_loom` in loom builds, see `core/src/sync.rs`).

use crate::aql::Condition;
use crate::sync::atomic::{AtomicI64, AtomicU32, AtomicU64};
use crate::sync::{unless_planted, Ordering};

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

// The hardware layout; a loom build's atomics are larger (`core/src/sync.rs`).
#[cfg(not(loom))]
const _: () = {
    use core::mem::{offset_of, size_of};
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

    /// A user signal of value `value` whose fields are loom atomics: loom builds only, inside a
    /// model (`core/tests/loom_signal.rs`).
    #[cfg(loom)]
    pub fn new_loom(value: i64) -> Self {
        AmdSignal {
            kind: AtomicI64::new_loom(kind::USER),
            value: AtomicI64::new_loom(value),
            event_mailbox_ptr: AtomicU64::new_loom(0),
            event_id: AtomicU32::new_loom(0),
            reserved1: AtomicU32::new_loom(0),
            start_ts: AtomicU64::new_loom(0),
            end_ts: AtomicU64::new_loom(0),
            queue_ptr: AtomicU64::new_loom(0),
            reserved3: [AtomicU32::new_loom(0), AtomicU32::new_loom(0)],
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
        // Ordering: Acquire pairs with the completion's AcqRel decrement: what the completed
        // packet wrote, and its timestamps, are visible once its value is.
        self.value.load(unless_planted!("relaxed_wait", Ordering::Acquire))
    }

    /// Whether `cond` holds for the current value against `expected`.
    pub fn satisfied(&self, cond: Condition, expected: i64) -> bool {
        cond.holds(self.load(), expected)
    }

    /// Completes the signal for a packet that finished: the packet processor's side of the
    /// protocol (what the CP does at the end of a packet, docs/kfd-aql.md §3.4 "Completion").
    ///
    /// Stores `timestamps` (start, end) when given (profiling), decrements `value` by one, and
    /// then, when the signal has an event mailbox, calls `post(mailbox, event_id)`, which writes
    /// the id to the mailbox slot and raises the interrupt that sets the event.
    pub fn complete(&self, timestamps: Option<(u64, u64)>, post: impl FnOnce(u64, u32)) {
        #[cfg(not(loom_bug = "post_before_decrement"))]
        {
            self.decrement(timestamps);
            self.post_event(post);
        }
        // Planted bug (loom builds): a waiter woken by this post may re-read the old value and
        // block again, and nothing wakes it after the decrement.
        #[cfg(loom_bug = "post_before_decrement")]
        {
            self.post_event(post);
            self.decrement(timestamps);
        }
    }

    fn decrement(&self, timestamps: Option<(u64, u64)>) {
        #[cfg(not(loom_bug = "timestamps_after_decrement"))]
        self.store_timestamps(timestamps);
        // Ordering: AcqRel. Release publishes the packet's effects and the timestamps to a waiter
        // that Acquire-loads the new value; Acquire chains the decrements of one signal by
        // several packets, so the waiter that sees the last one sees what every packet wrote.
        self.value.fetch_sub(1, unless_planted!("relaxed_decrement", Ordering::AcqRel));
        // Planted bug (loom builds): timestamps stored after the decrement that publishes them.
        #[cfg(loom_bug = "timestamps_after_decrement")]
        self.store_timestamps(timestamps);
    }

    fn store_timestamps(&self, timestamps: Option<(u64, u64)>) {
        if let Some((start, end)) = timestamps {
            // Ordering: Relaxed; the AcqRel decrement after them publishes them.
            self.start_ts.store(start, Ordering::Relaxed);
            self.end_ts.store(end, Ordering::Relaxed);
        }
    }

    fn post_event(&self, post: impl FnOnce(u64, u32)) {
        // Ordering: Relaxed; the mailbox and the id are set before the signal is handed to the
        // device.
        let mailbox = self.event_mailbox_ptr.load(Ordering::Relaxed);
        if mailbox != 0 {
            post(mailbox, self.event_id.load(Ordering::Relaxed));
        }
    }

    /// Waits until `cond` holds for the value against `expected`: the host's side of the
    /// protocol. Loads the value (Acquire); while the condition does not hold, calls `block`,
    /// which waits for the signal's event (or spins, or runs the device) and returns `false` to
    /// give up. Returns the value that satisfied the condition, or `None` once `block` gave up.
    ///
    /// The value is re-read after every return of `block`, so an early or stale wake-up costs
    /// one more load and never ends the wait wrongly.
    pub fn wait(&self, cond: Condition, expected: i64, mut block: impl FnMut() -> bool) -> Option<i64> {
        loop {
            let v = self.load();
            if cond.holds(v, expected) {
                return Some(v);
            }
            if !block() {
                return None;
            }
        }
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
