//! Capture slots: one capture in progress (`runtime/capture.rs` has its state machine).

use crate::capture::{CaptureMode, CaptureStatus, DepSet};
use crate::slot::Slot;
use crate::thread::ThreadKey;

/// One capture in progress.
#[derive(Debug)]
pub struct CaptureSlot {
    pub(crate) live: bool,
    pub(crate) id: u64,
    pub(crate) status: CaptureStatus,
    pub(crate) mode: CaptureMode,
    pub(crate) thread: Option<ThreadKey>,
    pub(crate) origin: usize,
    pub(crate) graph: usize,
    /// True for `hipStreamBeginCaptureToGraph`: the graph is the user's, not the capture's
    /// (false in an empty slot, which is then all zero bytes: docs/architecture.md,
    /// "Footprint").
    pub(crate) user_graph: bool,
    /// Nodes dropped from a dependency set by a Set update (`removedDependencies_`).
    pub(crate) removed: DepSet,
    /// Nodes below this id were in the graph before the capture began ("manual" nodes).
    pub(crate) manual: u16,
    /// A blocking stream takes part (the legacy stream's implicit dependency would reach in).
    pub(crate) blocking: bool,
}

impl Slot for CaptureSlot {
    const EMPTY: Self = CaptureSlot {
        live: false,
        id: 0,
        status: CaptureStatus::None,
        mode: CaptureMode::Global,
        thread: None,
        origin: 0,
        graph: 0,
        user_graph: false,
        removed: DepSet::EMPTY,
        manual: 0,
        blocking: false,
    };
}
