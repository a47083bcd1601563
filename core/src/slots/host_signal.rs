//! The signal pairs of host functions in flight.

use crate::live::LiveSignal;
use crate::slot::Slot;

/// A pair of signals for one host function in flight: `start` completes when the stream reaches
/// the function, the host sets `done` after running it. Reusable once the stream's barrier
/// that reads `done` has completed.
#[derive(Debug, Clone, Copy)]
pub struct HostSignalSlot {
    pub(crate) pair: Option<(LiveSignal, LiveSignal)>,
    pub(crate) busy: bool,
    /// The consuming stream slot and the count its progress must reach before reuse
    /// (`u64::MAX` while the consuming batch is being published).
    pub(crate) consumer: u32,
    pub(crate) release_at: u64,
}

impl Slot for HostSignalSlot {
    const EMPTY: Self = HostSignalSlot { pair: None, busy: false, consumer: 0, release_at: 0 };
}
