//! What a graph owns beside its nodes (docs/hip-semantics.md §7, "Under capture", and §8,
//! "Clones"), each held by the object it belongs to, never listed process-wide: the memory of
//! its captured allocations ([`GraphMemory`]), and the capture recording into it
//! ([`Recorder`]).

use std::sync::Arc;

use crate::error::HipResult;
use crate::global::{global, lock};

/// The memory of a graph's allocations (captured `hipMallocAsync`), which core's pools name by
/// `owner`, the handle of the graph the capture recorded. The capture holds it while it records
/// (`crate::capture`), then the graph's table entry, shared ([`Arc`]) with the executable
/// instantiated from it: the memory goes back when its last holder lets go — the graph and its
/// executable both gone, or the capture torn down before it became a graph.
pub(crate) struct GraphMemory {
    owner: u64,
}

impl GraphMemory {
    /// The memory of graph `owner`'s allocations.
    pub(crate) fn new(owner: u64) -> GraphMemory {
        GraphMemory { owner }
    }

    /// The owner core's pools name.
    pub(crate) fn owner(&self) -> u64 {
        self.owner
    }
}

/// Drops one holder of `m`: the last gives the memory back, answering what core answers (an
/// error of `hipGraphDestroy` / `hipGraphExecDestroy`).
pub(crate) fn let_go(m: Arc<GraphMemory>) -> HipResult {
    let Some(m) = Arc::into_inner(m) else { return Ok(()) };
    let owner = m.owner;
    std::mem::forget(m);
    release(owner)
}

impl Drop for GraphMemory {
    fn drop(&mut self) {
        let _ = release(self.owner);
    }
}

/// Gives the memory of graph `owner` back: allocations not handed to the user leave the
/// allocation table.
fn release(owner: u64) -> HipResult {
    let g = global()?;
    Ok(g.pools.graph_release(&*g.rt, owner, |a| {
        lock(&g.allocs).remove(&a);
    })?)
}

/// The capture recording into a graph of this layer (`hipStreamBeginCaptureToGraph`), as the
/// graph's table entry keeps it while the capture lasts: its origin stream and the core graph
/// core records into (a stand-in for the target, `crate::capture`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Recorder {
    pub(crate) stream: u64,
    pub(crate) core: u64,
}

impl Recorder {
    /// Whether the capture still holds the target: its origin stream captures into `core`, or
    /// its capture is invalidated (not yet ended). A capture torn down without
    /// `hipStreamEndCapture` (its context destroyed, a device reset) holds it no longer.
    pub(crate) fn records(&self) -> bool {
        global().is_ok_and(|g| {
            g.rt.stream_capture_info(crate::stream_of(crate::handle(self.stream))).is_ok_and(|c| match c.status {
                aqueduct::CaptureStatus::Active => c.graph == self.core,
                aqueduct::CaptureStatus::Invalidated => true,
                aqueduct::CaptureStatus::None => false,
            })
        })
    }
}
