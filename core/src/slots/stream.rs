//! Stream slots: the packed attributes any thread reads without the lock, the state only the
//! lock holder touches, and the progress point (`runtime/mod.rs`, "How streams execute").

use crate::sync::atomic64::AtomicU64;
use portable_atomic::{AtomicU32, Ordering};

use super::SlotWord;
#[cfg(feature = "capture")]
use crate::capture::DepSet;
use crate::live::{LiveSignal, SignalCell};
use crate::pool::Binding;
use crate::slot::Slot;
use crate::stream::{CuMask, Priority, StreamFlags};

/// What a stream slot is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StreamKind {
    Created = 0,
    Null = 1,
    PerThread = 2,
}

/// A stream's fixed attributes, packed into one atomic word so that any thread reads them
/// without the stream's lock: device (bits 0..3), kind (3..5), non-blocking (5), priority + 1
/// (6..8), detached (8), context + 1 (9..13), has a CU mask (13).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Attrs {
    pub(crate) device: u32,
    pub(crate) kind: StreamKind,
    pub(crate) flags: StreamFlags,
    pub(crate) priority: Priority,
    pub(crate) detached: bool,
    pub(crate) context: Option<u8>,
}

/// The detached bit of the packed [`Attrs`].
const DETACHED: u32 = 1 << 8;

impl Attrs {
    pub(crate) fn pack(self) -> u32 {
        (self.device & 7)
            | (self.kind as u32) << 3
            | u32::from(!self.flags.is_blocking()) << 5
            | ((self.priority.value() + 1) as u32 & 3) << 6
            | if self.detached { DETACHED } else { 0 }
            | self.context.map_or(0, |c| u32::from(c) + 1) << 9
    }

    #[inline]
    pub(crate) fn unpack(w: u32) -> Attrs {
        Attrs {
            device: w & 7,
            kind: match (w >> 3) & 3 {
                1 => StreamKind::Null,
                2 => StreamKind::PerThread,
                _ => StreamKind::Created,
            },
            flags: if w >> 5 & 1 == 1 { StreamFlags::NON_BLOCKING } else { StreamFlags::DEFAULT },
            priority: Priority::clamp(((w >> 6) & 3) as i32 - 1),
            detached: w & DETACHED != 0,
            context: match (w >> 9) & 15 {
                0 => None,
                c => Some(c as u8 - 1),
            },
        }
    }

    /// A blocking stream other than the null stream: the null stream synchronises with it.
    #[inline]
    pub(crate) fn is_blocking_user(&self) -> bool {
        self.kind != StreamKind::Null && self.flags.is_blocking()
    }
}

/// A stream's state that only its lock holder touches.
#[derive(Debug)]
#[cfg_attr(not(feature = "capture"), allow(dead_code))]
pub(crate) struct StreamInner {
    /// The pooled queue the stream publishes into.
    pub(crate) binding: Option<Binding>,
    /// This producer's copy of the ring's read index.
    pub(crate) read_hint: u64,
    /// The CU mask the stream was created with.
    pub(crate) cu_mask: Option<CuMask>,
    /// The capture this stream joined: (capture slot, capture id). Stale once that capture
    /// ends (the id no longer matches). Capture builds only, as `capture_deps`.
    #[cfg(feature = "capture")]
    pub(crate) capture: Option<(u8, u64)>,
    /// The dependency set of the next captured node (`lastCapturedNodes_`).
    #[cfg(feature = "capture")]
    pub(crate) capture_deps: DepSet,
}

/// One stream slot (at most 256 bytes: `scripts/footprint` reports it). Cache-line aligned, so
/// threads enqueueing on neighbouring streams do not share a line.
#[repr(align(64))]
pub struct StreamSlot<R: lock_api::RawMutex> {
    pub(crate) word: SlotWord,
    pub(crate) attrs: AtomicU32,
    pub(crate) id: AtomicU64,
    /// Counted packets published by every life of the slot (written under `inner`).
    pub(crate) submitted: AtomicU64,
    pub(crate) progress: SignalCell,
    /// Link of the free and draining lists (slot + 1; 0 ends the list).
    pub(crate) link: AtomicU32,
    pub(crate) inner: lock_api::Mutex<R, StreamInner>,
}

impl<R: lock_api::RawMutex> Slot for StreamSlot<R> {
    const EMPTY: Self = StreamSlot {
        word: SlotWord::new(),
        attrs: AtomicU32::new(0),
        id: AtomicU64::new(0),
        submitted: AtomicU64::new(0),
        progress: SignalCell::new(),
        link: AtomicU32::new(0),
        inner: lock_api::Mutex::const_new(
            R::INIT,
            StreamInner {
                binding: None,
                read_hint: 0,
                cu_mask: None,
                #[cfg(feature = "capture")]
                capture: None,
                #[cfg(feature = "capture")]
                capture_deps: DepSet::EMPTY,
            },
        ),
    };
}

impl<R: lock_api::RawMutex> StreamSlot<R> {
    #[inline]
    pub(crate) fn attrs(&self) -> Attrs {
        // Ordering: Acquire pairs with the Release in `set_attrs`.
        Attrs::unpack(self.attrs.load(Ordering::Acquire))
    }

    /// Whether work on the stream whose handles carry `generation` may take the submit fast
    /// path: the slot holds that stream live, and it is not detached (two loads of the slot's
    /// first line, one branch; docs/architecture.md, "The submit path, instruction by
    /// instruction"). Anything else takes the checked path, which names the error.
    #[cfg(target_has_atomic = "64")]
    #[inline]
    pub(crate) fn enqueues_fast(&self, generation: u32) -> bool {
        // Ordering: Acquire, as in `attrs`.
        let detached = self.attrs.load(Ordering::Acquire) & DETACHED;
        self.word.is_live(generation) & (detached == 0)
    }

    pub(crate) fn set_attrs(&self, a: Attrs) {
        // Ordering: Release; written before the slot word goes Live (and on detach).
        self.attrs.store(a.pack(), Ordering::Release);
    }

    /// Counted packets published so far (Acquire: the packets are in the ring).
    #[inline]
    pub(crate) fn submitted(&self) -> u64 {
        self.submitted.load(Ordering::Acquire)
    }

    /// The point in time "everything published so far": (progress signal, count), or `None`
    /// when the slot never published anything.
    #[inline]
    pub(crate) fn point(&self) -> Option<(LiveSignal, u64)> {
        let n = self.submitted();
        let p = self.progress.get()?;
        (n > 0).then_some((p, n))
    }

    /// Whether everything published so far has completed.
    #[inline]
    pub(crate) fn is_idle(&self) -> bool {
        self.point().is_none_or(|(p, n)| p.load() <= -(n as i64))
    }
}
