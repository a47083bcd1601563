//! Graph and graph-executable slots, with what an executable's conditional nodes own, where
//! both `runtime/graphs.rs` and `runtime/conditional.rs` reach them.

use super::SlotState;
use crate::aql::RawPacket;
use crate::backend::HostFn;
use crate::conditional::{ConditionalHandle, MAX_BODIES};
use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::host_array::HostArray;
use crate::signal::SignalHandle;
use crate::slot::Slot;
use crate::table::{self, Generation};

/// Handle tag of graphs.
pub(crate) const GRAPH_TAG: u16 = 0x6a4f;
/// Handle tag of graph executables.
pub(crate) const EXEC_TAG: u16 = 0x6e8c;
/// Most per-launch patches (host-function and event-record nodes) one executable holds.
pub(crate) const MAX_PATCHES: usize = 16;

/// A graph handle (`hipGraph_t`'s value); 0 is null.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct GraphHandle(pub u64);

impl GraphHandle {
    /// The null graph.
    pub const NULL: GraphHandle = GraphHandle(0);
}

/// A graph executable handle (`hipGraphExec_t`'s value); 0 is null.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct GraphExecHandle(pub u64);

impl GraphExecHandle {
    /// The null executable.
    pub const NULL: GraphExecHandle = GraphExecHandle(0);
}

/// One graph.
#[derive(Debug)]
pub struct GraphSlot {
    pub(crate) generation: Generation,
    /// The capture recording into this graph, if any.
    pub(crate) capture: Option<u8>,
    pub(crate) graph: Graph,
    /// Conditional handles created on this graph (their cells go with it).
    pub(crate) handles: heapless::Vec<ConditionalHandle, MAX_HANDLES>,
}

impl Slot for GraphSlot {
    const EMPTY: Self =
        GraphSlot { generation: Generation::new(), capture: None, graph: Graph::new(), handles: heapless::Vec::new() };
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Patch {
    /// A host-function node: its start marker packet and the barrier waiting for it to finish.
    Host { start: u32, done: u32, f: HostFn },
    /// An event-record node: the packet that completes the event's signal.
    Event { index: u32, event: u64 },
    /// An event-wait node: the barrier that depends on the event's signal.
    EventWait { index: u32, event: u64 },
}

/// What a graph node became in an executable, for patching it in place (`graph_update.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum SiteKind {
    /// Nothing to patch (also what a zeroed record reads as).
    Other = 0,
    /// A kernel dispatch: one packet, and an argument block in `kernarg`.
    Dispatch = 1,
    /// A host function: the start marker and the barrier after it (a [`Patch::Host`]).
    Host = 2,
    /// An event record or wait (a [`Patch::Event`] or [`Patch::EventWait`]).
    Event = 3,
}

/// Where one graph node's packets sit in an executable: the index of its first packet and,
/// for a dispatch, its argument block (offset in `kernarg`, bytes reserved: the arguments
/// rounded up to 16). Kept as one 16-byte record per node after the argument arena, in the
/// same allocation (backend allocations are a bounded resource: kfd-direct has a fixed table).
#[derive(Debug, Clone, Copy)]
pub(crate) struct NodeSite {
    pub(crate) kind: SiteKind,
    pub(crate) packet: u32,
    pub(crate) arg_offset: u32,
    pub(crate) arg_room: u32,
}

impl NodeSite {
    pub(crate) const NONE: NodeSite = NodeSite { kind: SiteKind::Other, packet: 0, arg_offset: 0, arg_room: 0 };

    pub(crate) fn to_record(self) -> [u8; 16] {
        let mut r = [0u8; 16];
        for (d, v) in r.chunks_exact_mut(4).zip([self.packet, self.arg_offset, self.arg_room, self.kind as u32]) {
            d.copy_from_slice(&v.to_le_bytes());
        }
        r
    }

    pub(crate) fn from_record(r: &[u8; 16]) -> NodeSite {
        let word = |i: usize| r.get(4 * i..4 * i + 4).and_then(|w| w.try_into().ok()).map_or(0, u32::from_le_bytes);
        let kind = match word(3) {
            1 => SiteKind::Dispatch,
            2 => SiteKind::Host,
            3 => SiteKind::Event,
            _ => SiteKind::Other,
        };
        NodeSite { kind, packet: word(0), arg_offset: word(1), arg_room: word(2) }
    }
}

/// One graph executable.
#[derive(Debug)]
pub struct ExecSlot {
    pub(crate) generation: Generation,
    pub(crate) state: SlotState,
    pub(crate) device: u32,
    /// The plan's packets, without the closing barrier (published per launch).
    pub(crate) packets: HostArray<RawPacket>,
    /// Node signals (kept with the slot; never read by the host); the first `used_signals`
    /// belong to the current executable.
    pub(crate) signals: HostArray<SignalHandle>,
    pub(crate) used_signals: usize,
    /// Kernel arguments: the graph's argument arena, at the same offsets; then, from chunk
    /// `sites_at`, one [`NodeSite`] record per graph node (by id).
    pub(crate) kernarg: HostArray<[u8; 16]>,
    pub(crate) sites_at: usize,
    pub(crate) patches: heapless::Vec<Patch, MAX_PATCHES>,
    /// The stream slot of the last launch and the count its progress reaches when the launch
    /// is done.
    pub(crate) busy: Option<(usize, u64)>,
    pub(crate) launches: u64,
    /// What the conditional nodes own (frames, bodies, their signals; body queues are in the
    /// runtime's body-queue table).
    pub(crate) cond: CondParts,
}

impl Slot for ExecSlot {
    const EMPTY: Self = ExecSlot {
        generation: Generation::new(),
        state: SlotState::Free,
        device: 0,
        packets: HostArray::new(),
        signals: HostArray::new(),
        used_signals: 0,
        kernarg: HostArray::new(),
        sites_at: 0,
        patches: heapless::Vec::new(),
        busy: None,
        launches: 0,
        cond: CondParts::new(),
    };
}

/// The slot of a live graph among `slots`.
pub(crate) fn graph_index(slots: &[GraphSlot], g: GraphHandle) -> Result<usize> {
    let l = table::lookup(GRAPH_TAG, g.0, slots, |s| s.generation);
    table::require(l, Error::InvalidValue, Error::InvalidValue)
}

// ----- conditional nodes ---------------------------------------------------------------------

/// Most conditional nodes (nested ones included) one executable holds.
pub(crate) const MAX_COND_NODES: usize = 8;
/// Most body queues alive at once, over all executables.
pub(crate) const MAX_BODY_QUEUES: usize = 16;
/// Most conditional handles one graph creates.
pub const MAX_HANDLES: usize = 16;
pub(crate) const MAX_COND_MEMORY: usize = MAX_COND_NODES * (MAX_BODIES + 2);
pub(crate) const MAX_COND_SIGNALS: usize = 64;

/// The body queues alive: the executable slot owning each, and the queue.
pub(crate) type BodyQueues<Q> = heapless::Vec<(u32, Q), MAX_BODY_QUEUES>;

/// What an executable's conditional nodes own, body queues aside (those live in the runtime's
/// body-queue table): host-visible memory (frames, body packets, kernel arguments, reset lists,
/// default-value arguments), the signals of body nodes and the done signals of conditional
/// nodes, and one reference to each node's handle cell.
#[derive(Debug)]
pub(crate) struct CondParts {
    pub(crate) memory: heapless::Vec<u64, MAX_COND_MEMORY>,
    pub(crate) signals: heapless::Vec<SignalHandle, MAX_COND_SIGNALS>,
    /// Done signals of the top-level conditional nodes, set to 1 at every launch with the node
    /// signals.
    pub(crate) top_done: heapless::Vec<SignalHandle, MAX_COND_NODES>,
    /// Handles whose value is set to the default at every launch, with their defaults.
    pub(crate) defaults: heapless::Vec<(ConditionalHandle, u32), MAX_COND_NODES>,
    /// The handles of the conditional nodes, each holding one reference to its cell.
    pub(crate) handles: heapless::Vec<ConditionalHandle, MAX_COND_NODES>,
    /// Body queues made for this executable.
    pub(crate) queues: u32,
}

impl CondParts {
    pub(crate) const fn new() -> Self {
        CondParts {
            memory: heapless::Vec::new(),
            signals: heapless::Vec::new(),
            top_done: heapless::Vec::new(),
            defaults: heapless::Vec::new(),
            handles: heapless::Vec::new(),
            queues: 0,
        }
    }
}
