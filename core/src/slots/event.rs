//! Event slots: the last record's point in time, the signals of timed records, and what a
//! capture saw at the record.

use portable_atomic::AtomicU32;

use super::SlotWord;
#[cfg(feature = "capture")]
use crate::capture::DepSet;
use crate::event::EventFlags;
use crate::live::LiveSignal;
use crate::slot::Slot;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recorded {
    Never,
    /// On the legacy null stream.
    OnNull,
    /// On a created or per-thread stream (its raw handle).
    On(u64),
}

#[derive(Debug)]
pub(crate) struct EventInner {
    pub(crate) flags: EventFlags,
    pub(crate) device: u32,
    /// The last record's progress point on its stream: waits and queries use it, so a later
    /// record never changes what an earlier wait waits for. `None` for a record made by a graph
    /// launch (those use `signal`).
    pub(crate) point: Option<(LiveSignal, u64)>,
    /// The signal a timed record (or a graph's record node) completes: its timestamps give
    /// `hipEventElapsedTime`. Created on first need.
    pub(crate) signal: Option<LiveSignal>,
    /// A second signal, swapped in when the event is recorded again while its last record is
    /// still pending, so the event stands for the latest record only. Reused only once drained.
    pub(crate) spare: Option<LiveSignal>,
    pub(crate) recorded: Recorded,
    /// Set when last recorded inside a capture: (capture slot, capture id). Capture builds
    /// only, as `snapshot` (without capture an event is never recorded in one).
    #[cfg(feature = "capture")]
    pub(crate) captured: Option<(u8, u64)>,
    /// The recording stream's dependency set at that record.
    #[cfg(feature = "capture")]
    pub(crate) snapshot: DepSet,
}

/// One event slot.
pub struct EventSlot<R: lock_api::RawMutex> {
    pub(crate) word: SlotWord,
    pub(crate) link: AtomicU32,
    pub(crate) inner: lock_api::Mutex<R, EventInner>,
}

impl<R: lock_api::RawMutex> Slot for EventSlot<R> {
    const EMPTY: Self = EventSlot {
        word: SlotWord::new(),
        link: AtomicU32::new(0),
        inner: lock_api::Mutex::const_new(
            R::INIT,
            EventInner {
                flags: EventFlags::empty(),
                device: 0,
                point: None,
                signal: None,
                spare: None,
                recorded: Recorded::Never,
                #[cfg(feature = "capture")]
                captured: None,
                #[cfg(feature = "capture")]
                snapshot: DepSet::EMPTY,
            },
        ),
    };
}
