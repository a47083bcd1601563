//! Graphs: a fixed-capacity DAG of stream operations, and its flattening into AQL packets.
//!
//! A [`Graph`] keeps its nodes, edges and kernel arguments in backend host memory
//! (a growable array), growing as nodes are added up to a per-graph limit, so a table of graphs costs
//! a few words per slot whatever the limit. Nodes are added with their dependencies (which must
//! already be in the graph), so a graph built through this API cannot hold a cycle;
//! [`Graph::plan`] still checks, because edges can also be added between existing nodes. Planning
//! keeps its working state in the nodes themselves, so it costs the same per node whatever the
//! limit is.
//!
//! # Flattening
//!
//! [`Graph::plan`] orders the nodes topologically and decides, for each node, which packets
//! precede it in a single in-order AQL queue:
//!
//! - the first packet of a launch carries the barrier bit, so the graph starts after the work
//!   enqueued before it on the stream;
//! - a node whose unfinished dependencies are exactly the packets still in flight (a chain link,
//!   or a join of every open branch) carries the barrier bit;
//! - a node that depends on only some of the packets in flight is preceded by barrier-AND
//!   packets on their completion signals (five per packet);
//! - nodes with nothing to wait for carry neither and may overlap what runs before them;
//! - a node some barrier-AND waits on gets a completion signal of its own (a "signal slot");
//! - a final barrier-AND with the barrier bit closes the launch, so later stream work waits for
//!   every node.

use crate::aql::Condition;
use crate::backend::{Backend, HostFn};
use crate::conditional::ConditionalNode;
use crate::error::{Error, Result};
use crate::host_array::HostArray;

/// Index of a node inside its graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NodeId(pub u16);

/// A kernel dispatch node: the packet fields, and where its arguments sit in the arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DispatchNode {
    /// Kernel object.
    pub kernel_object: u64,
    /// Grid size in work-items.
    pub grid: [u32; 3],
    /// Work-group size in work-items.
    pub workgroup: [u16; 3],
    /// Group (LDS) bytes per work-group.
    pub group_segment_size: u32,
    /// Private bytes per work-item.
    pub private_segment_size: u32,
    /// Offset of the arguments in the graph's arena.
    pub arg_offset: u32,
    /// Length of the arguments.
    pub arg_len: u32,
}

/// A wait-value node (`hipStreamWaitValue*`): `(*address & mask) cond value`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitValueNode {
    /// Address of the value.
    pub address: u64,
    /// Compared against.
    pub value: i64,
    /// Applied first.
    pub mask: i64,
    /// The comparison.
    pub cond: Condition,
}

/// What a node does.
#[derive(Debug, Clone, Copy)]
pub enum NodeKind {
    /// Nothing: an ordering point.
    Empty,
    /// A kernel dispatch (kernels, copies, fills, value writes).
    Dispatch(DispatchNode),
    /// A wait on a memory value.
    WaitValue(WaitValueNode),
    /// A host function.
    Host(HostFn),
    /// An event record (`hipEventRecordExternal` during capture): the event's raw handle.
    EventRecord(u64),
    /// A wait on an event (`hipEventWaitExternal` during capture): the event's raw handle.
    EventWait(u64),
    /// A graph memory allocation (a captured `hipMallocAsync`): the block the graph owns. It
    /// runs as an ordering point.
    MemAlloc {
        /// The block.
        address: u64,
        /// Its size.
        bytes: u64,
    },
    /// The free of a graph allocation (a captured `hipFreeAsync`); an ordering point.
    MemFree(u64),
    /// A conditional node (IF, WHILE, SWITCH) and its body graphs (docs/conditional-graphs.md).
    Conditional(ConditionalNode),
}

impl NodeKind {
    /// A short name of the kind.
    pub fn name(&self) -> &'static str {
        match self {
            NodeKind::Empty => "empty",
            NodeKind::Dispatch(_) => "kernel",
            NodeKind::WaitValue(_) => "wait-value",
            NodeKind::Host(_) => "host",
            NodeKind::EventRecord(_) => "event-record",
            NodeKind::EventWait(_) => "event-wait",
            NodeKind::MemAlloc { .. } => "mem-alloc",
            NodeKind::MemFree(_) => "mem-free",
            NodeKind::Conditional(_) => "conditional",
        }
    }
}

/// One node.
#[derive(Debug, Clone, Copy)]
pub struct Node {
    /// What it does.
    pub kind: NodeKind,
    /// Where this node's incoming edges start in the edge list (they are contiguous while the
    /// graph is built with [`Graph::add_node`] only).
    in_start: u32,
    in_len: u16,
    /// Planning state (see [`Graph::plan`]); meaningless between plans.
    s: Scratch,
}

/// Per-node planning state, kept in the node so that planning touches only the graph's nodes.
#[derive(Debug, Clone, Copy, Default)]
struct Scratch {
    /// Known complete at the current point of the walk.
    done: bool,
    /// Some barrier-AND of the plan waits on it.
    waited: bool,
    /// Its signal slot + 1 (0: none).
    slot: u16,
    /// Its position in the in-flight list.
    pos: u16,
    /// Entry `k` of the in-flight list lives in node `k` (the list never holds more nodes
    /// than have been walked).
    flight: NodeId,
    /// Entry `k` of the topological order lives in node `k`.
    order: NodeId,
    /// Unfinished predecessors (Kahn's order).
    indeg: u16,
    /// Adjacency rows (non-ordered graphs): start in `Graph::adj` and length, successors then
    /// predecessors.
    succ: (u32, u16),
    pred: (u32, u16),
    /// Items written into each row so far while building it.
    fill: (u16, u16),
}

/// A DAG of stream operations in backend host memory.
#[derive(Debug)]
pub struct Graph {
    nodes: HostArray<Node>,
    edges: HostArray<(NodeId, NodeId)>,
    arena: HostArray<[u8; 16]>,
    /// Adjacency items of a non-ordered graph (built per plan).
    adj: HostArray<NodeId>,
    /// False while every edge came from `add_node`: node ids are then a topological order and
    /// each node's incoming edges are one contiguous run, so planning needs no adjacency build.
    /// (Stored inverted so that an empty graph is all zero bytes: docs/architecture.md,
    /// "Footprint".)
    unordered: bool,
}

impl Default for Graph {
    fn default() -> Self {
        Self::new()
    }
}

/// Kernel-argument bytes a graph holds, on average, per node of its limit.
pub const ARG_BYTES_PER_NODE: usize = 64;

/// One step of a flattened graph.
#[derive(Debug, Clone, Copy)]
pub enum Planned {
    /// A barrier-AND on the signal slots listed (unused entries `None`); `barrier` says whether
    /// the packet carries the barrier bit.
    Wait {
        /// Signal slots to wait for.
        slots: [Option<u16>; 5],
        /// Barrier bit.
        barrier: bool,
    },
    /// The packet of a node; it completes signal slot `signal` if some node waits on it.
    Node {
        /// The node.
        node: NodeId,
        /// What it does.
        kind: NodeKind,
        /// Barrier bit.
        barrier: bool,
        /// Its own completion signal slot.
        signal: Option<u16>,
    },
}

impl Planned {
    /// The step without the node's kind, for comparisons.
    pub fn shape(&self) -> (Option<NodeId>, bool, Option<u16>) {
        match *self {
            Planned::Wait { barrier, slots } => (None, barrier, slots.first().copied().flatten()),
            Planned::Node { node, barrier, signal, .. } => (Some(node), barrier, signal),
        }
    }
}

/// The limit of a graph of at most `max_nodes` nodes: edges.
fn max_edges(max_nodes: usize) -> usize {
    max_nodes.saturating_mul(2)
}

impl Graph {
    /// An empty graph without memory.
    pub const fn new() -> Self {
        Graph {
            nodes: HostArray::new(),
            edges: HostArray::new(),
            arena: HostArray::new(),
            adj: HostArray::new(),
            unordered: false,
        }
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Number of edges.
    pub fn edge_count(&self) -> usize {
        self.edges.len()
    }

    /// The node `id`.
    pub fn node(&self, id: NodeId) -> Option<&Node> {
        self.nodes.as_slice().get(usize::from(id.0))
    }

    /// The edges `(from, to)`: `to` runs after `from`.
    pub fn edges(&self) -> &[(NodeId, NodeId)] {
        self.edges.as_slice()
    }

    /// The dependencies of `id`.
    pub fn dependencies(&self, id: NodeId) -> impl Iterator<Item = NodeId> + '_ {
        self.edges().iter().filter(move |e| e.1 == id).map(|e| e.0)
    }

    /// Whether `id` has no dependents.
    pub fn is_leaf(&self, id: NodeId) -> bool {
        !self.edges().iter().any(|e| e.0 == id)
    }

    /// Calls `f` with every node that has no dependent (one pass over the edges).
    pub fn leaves(&mut self, mut f: impl FnMut(NodeId)) {
        let nodes = self.nodes.as_mut_slice();
        for n in nodes.iter_mut() {
            n.s.done = false;
        }
        for e in self.edges.as_slice() {
            if let Some(n) = nodes.get_mut(usize::from(e.0 .0)) {
                n.s.done = true;
            }
        }
        for (i, n) in nodes.iter().enumerate() {
            if !n.s.done {
                f(NodeId(i as u16));
            }
        }
    }

    /// Removes every node and edge (keeping the memory).
    pub fn clear(&mut self) {
        self.nodes.clear();
        self.edges.clear();
        self.arena.clear();
        self.unordered = false;
    }

    /// Returns the graph's memory to the backend.
    pub fn free<B: Backend>(&mut self, b: &B) {
        self.nodes.free(b);
        self.edges.free(b);
        self.arena.free(b);
        self.adj.free(b);
        self.unordered = false;
    }

    /// Copies kernel arguments into the arena (16-byte aligned); returns their offset.
    pub fn store_args<B: Backend>(&mut self, b: &B, args: &[u8], max_nodes: usize) -> Result<u32> {
        let start = self.arena.len();
        let chunks = args.len().div_ceil(16);
        let max = max_nodes.saturating_mul(ARG_BYTES_PER_NODE) / 16;
        self.arena.extend(b, 0, [0; 16], chunks, max)?;
        let dst = self.arena.as_mut_slice().get_mut(start..start + chunks).ok_or(Error::OutOfMemory)?;
        for (d, s) in dst.iter_mut().zip(args.chunks(16)) {
            if let Some(d) = d.get_mut(..s.len()) {
                d.copy_from_slice(s);
            }
        }
        u32::try_from(start * 16).map_err(|_| Error::OutOfMemory)
    }

    /// The argument bytes of a dispatch node.
    pub fn args(&self, offset: u32, len: u32) -> &[u8] {
        let start = offset as usize;
        self.arena.as_slice().as_flattened().get(start..start + len as usize).unwrap_or(&[])
    }

    /// The whole argument arena (every node's arguments at their offsets).
    pub fn arena(&self) -> &[u8] {
        self.arena.as_slice().as_flattened()
    }

    /// Adds a node after `deps` (each must exist; duplicates are dropped).
    pub fn add_node<B: Backend>(&mut self, b: &B, kind: NodeKind, deps: &[NodeId], max_nodes: usize) -> Result<NodeId> {
        for d in deps {
            if self.node(*d).is_none() {
                return Err(Error::InvalidValue);
            }
        }
        let distinct = deps.iter().enumerate().filter(|(i, d)| !deps.iter().take(*i).any(|e| e == *d)).count();
        let max_nodes = max_nodes.min(usize::from(u16::MAX));
        if self.nodes.len() >= max_nodes || self.edges.len() + distinct > max_edges(max_nodes) {
            return Err(Error::OutOfMemory);
        }
        self.edges.reserve(b, 0, distinct, max_edges(max_nodes))?;
        let index = self.nodes.len();
        let id = NodeId(u16::try_from(index).map_err(|_| Error::OutOfMemory)?);
        let in_start = u32::try_from(self.edges.len()).map_err(|_| Error::OutOfMemory)?;
        let node = Node { kind, in_start, in_len: distinct as u16, s: Scratch::default() };
        self.nodes.push(b, 0, node, max_nodes)?;
        for (i, d) in deps.iter().enumerate() {
            // The node is new, so only duplicates within `deps` could repeat an edge.
            if !deps.iter().take(i).any(|e| e == d) {
                self.edges.push(b, 0, (*d, id), max_edges(max_nodes))?;
            }
        }
        Ok(id)
    }

    /// Adds the edge `from → to` (both must exist; an existing edge is not duplicated).
    pub fn add_edge<B: Backend>(&mut self, b: &B, from: NodeId, to: NodeId, max_nodes: usize) -> Result<()> {
        if self.node(from).is_none() || self.node(to).is_none() || from == to {
            return Err(Error::InvalidValue);
        }
        if self.edges().contains(&(from, to)) {
            return Ok(());
        }
        self.edges.push(b, 0, (from, to), max_edges(max_nodes))?;
        self.unordered = true;
        Ok(())
    }

    /// Removes the last node (and its edges); used to drop a temporary node.
    pub fn pop_node(&mut self) {
        let Some(last) = self.nodes.len().checked_sub(1) else { return };
        let id = NodeId(last as u16);
        let edges = self.edges.as_mut_slice();
        let mut w = 0;
        for r in 0..edges.len() {
            if let Some(&e) = edges.get(r) {
                if e.0 != id && e.1 != id {
                    if let Some(slot) = edges.get_mut(w) {
                        *slot = e;
                    }
                    w += 1;
                }
            }
        }
        while self.edges.len() > w {
            self.edges.pop();
        }
        self.nodes.pop();
    }

    /// Builds the adjacency rows of a non-ordered graph (successors and predecessors of each
    /// node, in `adj`) and Kahn's topological order (in the nodes' `order` entries);
    /// `InvalidValue` for a cycle.
    fn build_order<B: Backend>(&mut self, b: &B) -> Result<()> {
        let e = self.edges.len();
        self.adj.clear();
        self.adj.extend(b, 0, NodeId(0), 2 * e, 4 * e.max(1))?;
        let nodes = self.nodes.as_mut_slice();
        for n in nodes.iter_mut() {
            n.s.succ = (0, 0);
            n.s.pred = (0, 0);
            n.s.fill = (0, 0);
            n.s.indeg = 0;
        }
        for &(f, t) in self.edges.as_slice() {
            if let Some(n) = nodes.get_mut(usize::from(f.0)) {
                n.s.succ.1 += 1;
            }
            if let Some(n) = nodes.get_mut(usize::from(t.0)) {
                n.s.pred.1 += 1;
                n.s.indeg += 1;
            }
        }
        let mut sum = 0u32;
        for n in nodes.iter_mut() {
            n.s.succ.0 = sum;
            sum += u32::from(n.s.succ.1);
        }
        for n in nodes.iter_mut() {
            n.s.pred.0 = sum;
            sum += u32::from(n.s.pred.1);
        }
        let adj = self.adj.as_mut_slice();
        for &(f, t) in self.edges.as_slice() {
            if let Some(n) = nodes.get_mut(usize::from(f.0)) {
                if let Some(a) = adj.get_mut(n.s.succ.0 as usize + usize::from(n.s.fill.0)) {
                    *a = t;
                }
                n.s.fill.0 += 1;
            }
            if let Some(n) = nodes.get_mut(usize::from(t.0)) {
                if let Some(a) = adj.get_mut(n.s.pred.0 as usize + usize::from(n.s.fill.1)) {
                    *a = f;
                }
                n.s.fill.1 += 1;
            }
        }
        // Kahn: the order list grows in the nodes' `order` entries.
        let len = nodes.len();
        let mut tail = 0usize;
        for i in 0..len {
            if nodes.get(i).is_some_and(|n| n.s.indeg == 0) {
                if let Some(o) = nodes.get_mut(tail) {
                    o.s.order = NodeId(i as u16);
                }
                tail += 1;
            }
        }
        let mut head = 0usize;
        while head < tail {
            let n = nodes.get(head).map(|o| o.s.order).ok_or(Error::InvalidValue)?;
            head += 1;
            let (start, count) = nodes.get(usize::from(n.0)).map_or((0, 0), |x| x.s.succ);
            for k in 0..usize::from(count) {
                let t = adj.get(start as usize + k).copied().ok_or(Error::InvalidValue)?;
                let Some(tn) = nodes.get_mut(usize::from(t.0)) else { continue };
                tn.s.indeg -= 1;
                if tn.s.indeg == 0 {
                    if let Some(o) = nodes.get_mut(tail) {
                        o.s.order = t;
                    }
                    tail += 1;
                }
            }
        }
        if tail == len {
            Ok(())
        } else {
            Err(Error::InvalidValue)
        }
    }

    /// Calls `f` with each predecessor of node `id`.
    fn for_each_pred(&self, id: NodeId, mut f: impl FnMut(NodeId)) {
        let Some(n) = self.node(id) else { return };
        if !self.unordered {
            let start = n.in_start as usize;
            for e in self.edges.as_slice().get(start..start + usize::from(n.in_len)).unwrap_or(&[]) {
                f(e.0);
            }
        } else {
            let (start, count) = n.s.pred;
            for &d in self.adj.as_slice().get(start as usize..start as usize + usize::from(count)).unwrap_or(&[]) {
                f(d);
            }
        }
    }

    fn node_at(&self, k: usize) -> NodeId {
        if !self.unordered {
            NodeId(k as u16)
        } else {
            self.nodes.as_slice().get(k).map_or(NodeId(0), |n| n.s.order)
        }
    }

    fn is_done(&self, d: NodeId) -> bool {
        self.node(d).is_none_or(|n| n.s.done)
    }

    fn scratch(&mut self, id: NodeId) -> Option<&mut Scratch> {
        self.nodes.as_mut_slice().get_mut(usize::from(id.0)).map(|n| &mut n.s)
    }

    /// Walks the nodes in topological order deciding how each is ordered in one in-order queue,
    /// and hands every step to `step` with the node that a wait names in place of a slot.
    fn walk(&mut self, mut step: impl FnMut(&mut Self, Walked) -> Result<()>) -> Result<()> {
        for n in self.nodes.as_mut_slice() {
            n.s.done = false;
        }
        // Nodes known complete at the current point of the sequence; published nodes not known
        // complete are "in flight" (kept in a list with each node's position in it).
        let mut flying = 0usize;
        let mut first = true;
        for k in 0..self.nodes.len() {
            let id = self.node_at(k);
            let mut count = 0usize;
            self.for_each_pred(id, |d| count += usize::from(!self.is_done(d)));
            if count > 0 && count == flying {
                // It waits for everything in flight: the barrier bit says exactly that.
                step(self, Walked::Node { node: id, barrier: true })?;
                for j in 0..flying {
                    let n = self.nodes.as_slice().get(j).map_or(NodeId(0), |x| x.s.flight);
                    if let Some(s) = self.scratch(n) {
                        s.done = true;
                    }
                }
                flying = 0;
            } else {
                let mut wait = [None; 5];
                let mut w = 0;
                let mut waits: heapless::Vec<[Option<NodeId>; 5], 4> = heapless::Vec::new();
                let mut pending = [NodeId(0); 16];
                let mut np = 0usize;
                let mut overflow = false;
                self.for_each_pred(id, |d| {
                    if self.is_done(d) {
                        return;
                    }
                    if w == 5 {
                        overflow |= waits.push(wait).is_err();
                        wait = [None; 5];
                        w = 0;
                    }
                    if let Some(x) = wait.get_mut(w) {
                        *x = Some(d);
                    }
                    w += 1;
                    match pending.get_mut(np) {
                        Some(p) => {
                            *p = d;
                            np += 1;
                        }
                        None => overflow = true,
                    }
                });
                if overflow {
                    // More unfinished dependencies than one node's waits hold: wait for
                    // everything in flight instead (correct, less parallel).
                    step(self, Walked::Node { node: id, barrier: true })?;
                    for j in 0..flying {
                        let n = self.nodes.as_slice().get(j).map_or(NodeId(0), |x| x.s.flight);
                        if let Some(s) = self.scratch(n) {
                            s.done = true;
                        }
                    }
                    flying = 0;
                } else {
                    if w > 0 {
                        let _ = waits.push(wait);
                    }
                    for nodes in waits {
                        step(self, Walked::Wait { nodes, barrier: first })?;
                        first = false;
                    }
                    for d in pending.iter().take(np).copied() {
                        let Some(s) = self.scratch(d) else { continue };
                        if s.done {
                            continue;
                        }
                        s.done = true;
                        // Swap-remove `d` from the in-flight list.
                        let at = usize::from(s.pos);
                        flying -= 1;
                        let last = self.nodes.as_slice().get(flying).map_or(d, |x| x.s.flight);
                        if let Some(n) = self.nodes.as_mut_slice().get_mut(at) {
                            n.s.flight = last;
                        }
                        if let Some(s) = self.scratch(last) {
                            s.pos = at as u16;
                        }
                    }
                    step(self, Walked::Node { node: id, barrier: first })?;
                }
            }
            first = false;
            if let Some(n) = self.nodes.as_mut_slice().get_mut(flying) {
                n.s.flight = id;
            }
            if let Some(s) = self.scratch(id) {
                s.pos = flying as u16;
            }
            flying += 1;
        }
        Ok(())
    }

    /// Prepares planning and decides which nodes get a completion signal of their own (those a
    /// barrier-AND of the plan waits on); returns how many there are. Call before
    /// [`plan`](Self::plan); the backend supplies scratch memory for graphs with added edges.
    pub fn signal_slots<B: Backend>(&mut self, b: &B) -> Result<u16> {
        if self.unordered {
            self.build_order(b)?;
        }
        for n in self.nodes.as_mut_slice() {
            n.s.waited = false;
        }
        self.walk(|g, w| {
            if let Walked::Wait { nodes, .. } = w {
                for n in nodes.iter().flatten() {
                    if let Some(s) = g.scratch(*n) {
                        s.waited = true;
                    }
                }
            }
            Ok(())
        })?;
        let mut count = 0u16;
        for n in self.nodes.as_mut_slice() {
            n.s.slot = 0;
            if n.s.waited {
                count += 1;
                n.s.slot = count;
            }
        }
        Ok(count)
    }

    /// Flattens the graph into an in-order packet sequence (see the module docs), handing each
    /// step to `emit` in publish order. [`signal_slots`](Self::signal_slots) must have run since
    /// the graph last changed.
    pub fn plan(&mut self, mut emit: impl FnMut(Planned) -> Result<()>) -> Result<()> {
        let slot = |g: &Self, n: NodeId| g.node(n).and_then(|x| x.s.slot.checked_sub(1));
        self.walk(|g, w| match w {
            Walked::Wait { nodes, barrier } => {
                let mut slots = [None; 5];
                for (s, n) in slots.iter_mut().zip(nodes) {
                    *s = n.and_then(|n| slot(g, n));
                }
                emit(Planned::Wait { slots, barrier })
            }
            Walked::Node { node, barrier } => {
                let kind = g.node(node).map(|n| n.kind).ok_or(Error::InvalidValue)?;
                emit(Planned::Node { node, kind, barrier, signal: slot(g, node) })
            }
        })?;
        emit(Planned::Wait { slots: [None; 5], barrier: true })
    }
}

/// One decision of [`Graph::walk`].
enum Walked {
    Wait { nodes: [Option<NodeId>; 5], barrier: bool },
    Node { node: NodeId, barrier: bool },
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::loopback::{Loopback, LoopbackMemory};
    use std::boxed::Box;
    use std::vec::Vec;

    type G = Graph;
    type Shape = (Option<NodeId>, bool, Option<u16>);

    /// The default tables with a loopback of 1 queue of 8 packets and 8 signals.
    type Device = crate::config::Capacities<32, 64, 8, 64, 4, 32, 2, 40, 16, 8, 1, 8, 64, 8, 65536>;

    fn lb() -> Loopback<'static, Device> {
        Loopback::new(Box::leak(Box::new(LoopbackMemory::new())))
    }

    fn plan_of<B: Backend>(g: &mut G, b: &B) -> Result<(Vec<Shape>, u16)> {
        let slots = g.signal_slots(b)?;
        let mut steps = Vec::new();
        g.plan(|p| {
            steps.push(p.shape());
            Ok(())
        })?;
        Ok((steps, slots))
    }

    fn empty<B: Backend>(g: &mut G, b: &B, deps: &[NodeId]) -> NodeId {
        g.add_node(b, NodeKind::Empty, deps, 64).unwrap()
    }

    #[test]
    fn fork_join_plan() {
        // A → B, A → C, {B, C} → D: barrier bits do all the work.
        let b = lb();
        let mut g = G::new();
        let a = empty(&mut g, &b, &[]);
        let bb = empty(&mut g, &b, &[a]);
        let c = empty(&mut g, &b, &[a]);
        let d = empty(&mut g, &b, &[bb, c, bb]);
        assert_eq!(g.node_count(), 4);
        assert_eq!(g.edge_count(), 4);
        let (steps, slots) = plan_of(&mut g, &b).unwrap();
        assert_eq!(slots, 0);
        assert_eq!(steps[0], (Some(a), true, None));
        assert_eq!(steps[1], (Some(bb), true, None));
        // C's dependency A is already known complete: C may overlap B.
        assert_eq!(steps[2], (Some(c), false, None));
        // D joins everything in flight.
        assert_eq!(steps[3], (Some(d), true, None));
        assert_eq!(steps[4], (None, true, None));
        assert_eq!(steps.len(), 5);
    }

    #[test]
    fn partial_dependency_waits_on_a_signal() {
        // A and B independent; C after A only, published after B: C must wait for A alone.
        let b = lb();
        let mut g = G::new();
        let a = empty(&mut g, &b, &[]);
        let bb = empty(&mut g, &b, &[]);
        let c = empty(&mut g, &b, &[a]);
        let (steps, slots) = plan_of(&mut g, &b).unwrap();
        assert_eq!(slots, 1);
        assert_eq!(steps[0], (Some(a), true, Some(0)));
        assert_eq!(steps[1], (Some(bb), false, None));
        assert_eq!(steps[2], (None, false, Some(0)));
        assert_eq!(steps[3], (Some(c), false, None));
        assert_eq!(steps.len(), 5);
    }

    #[test]
    fn cycles_and_bad_edges() {
        let b = lb();
        let mut g = G::new();
        let a = empty(&mut g, &b, &[]);
        let n2 = empty(&mut g, &b, &[a]);
        assert_eq!(g.add_edge(&b, a, a, 64), Err(Error::InvalidValue));
        assert_eq!(g.add_node(&b, NodeKind::Empty, &[NodeId(9)], 64).err(), Some(Error::InvalidValue));
        g.add_edge(&b, n2, a, 64).unwrap();
        assert_eq!(plan_of(&mut g, &b).err(), Some(Error::InvalidValue));
        g.pop_node();
        assert_eq!(g.node_count(), 1);
        assert_eq!(g.edge_count(), 0);
        let off = g.store_args(&b, &[1, 2, 3], 64).unwrap();
        let off2 = g.store_args(&b, &[4], 64).unwrap();
        assert_eq!((off, off2), (0, 16));
        assert_eq!(g.args(off2, 1), &[4]);
    }

    #[test]
    fn wide_partial_join_splits_waits() {
        // Seven roots, then one more root, then a join of the first seven only.
        let b = lb();
        let mut g = G::new();
        let roots: Vec<NodeId> = (0..7).map(|_| g.add_node(&b, NodeKind::Empty, &[], 64).unwrap()).collect();
        let _other = empty(&mut g, &b, &[]);
        let j = empty(&mut g, &b, &roots);
        let (steps, slots) = plan_of(&mut g, &b).unwrap();
        let waits = steps.iter().filter(|p| p.0.is_none() && !p.1).count();
        assert_eq!(waits, 2);
        assert_eq!(slots, 7);
        assert!(steps.contains(&(Some(j), false, None)));
    }

    #[test]
    fn chain_uses_barrier_bits_only() {
        let b = lb();
        let mut g = G::new();
        let mut prev = empty(&mut g, &b, &[]);
        for _ in 0..9 {
            prev = empty(&mut g, &b, &[prev]);
        }
        let (steps, _) = plan_of(&mut g, &b).unwrap();
        assert_eq!(steps.len(), 11);
        assert!(steps[..10].iter().all(|p| p.0.is_some() && p.1 && p.2.is_none()));
    }

    #[test]
    fn limit_and_added_edges() {
        let b = lb();
        let mut g = G::new();
        let a = empty(&mut g, &b, &[]);
        let c = empty(&mut g, &b, &[]);
        let d = empty(&mut g, &b, &[]);
        // Edges between existing nodes: planning builds its own order.
        g.add_edge(&b, d, a, 64).unwrap();
        g.add_edge(&b, a, c, 64).unwrap();
        let (steps, _) = plan_of(&mut g, &b).unwrap();
        let order: Vec<NodeId> = steps.iter().filter_map(|s| s.0).collect();
        assert_eq!(order, [d, a, c]);
        let mut small = G::new();
        empty(&mut small, &b, &[]);
        assert_eq!(small.add_node(&b, NodeKind::Empty, &[], 1).err(), Some(Error::OutOfMemory));
        g.free(&b);
        small.free(&b);
    }
}
