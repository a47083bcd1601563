//! Graphs: a fixed-capacity DAG of stream operations, and its flattening into AQL packets.
//!
//! A [`Graph`] holds up to `N` nodes, `2 N` dependency edges and `64 N` bytes of kernel
//! arguments (capacities follow from the one const generic so tables of graphs stay simple).
//! Nodes are added with their dependencies (which must already be in the graph), so a graph built
//! through this API cannot hold a cycle; [`Graph::plan`] still checks, because edges can also be
//! added between existing nodes.
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
use crate::backend::HostFn;
use crate::error::{Error, Result};

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
}

/// A fixed-capacity DAG.
pub struct Graph<const N: usize> {
    nodes: [Option<Node>; N],
    len: usize,
    edges: [[(NodeId, NodeId); 2]; N],
    edge_len: usize,
    arena: [[u8; ARG_BYTES_PER_NODE]; N],
    arena_len: usize,
    /// True while every edge came from `add_node`: node ids are then a topological order and
    /// each node's incoming edges are one contiguous run, so planning needs no adjacency build.
    ordered: bool,
}

/// Kernel-argument bytes a graph holds per node of capacity.
pub const ARG_BYTES_PER_NODE: usize = 64;

impl<const N: usize> Default for Graph<N> {
    fn default() -> Self {
        Self::new()
    }
}

/// One step of a flattened graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
        /// Barrier bit.
        barrier: bool,
        /// Its own completion signal slot.
        signal: Option<u16>,
    },
}

impl<const N: usize> Graph<N> {
    /// An empty graph.
    pub const fn new() -> Self {
        Graph {
            nodes: [None; N],
            len: 0,
            edges: [[(NodeId(0), NodeId(0)); 2]; N],
            edge_len: 0,
            arena: [[0; ARG_BYTES_PER_NODE]; N],
            arena_len: 0,
            ordered: true,
        }
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.len
    }

    /// Number of edges.
    pub fn edge_count(&self) -> usize {
        self.edge_len
    }

    /// The node `id`.
    pub fn node(&self, id: NodeId) -> Option<&Node> {
        if usize::from(id.0) >= self.len {
            return None;
        }
        self.nodes.get(usize::from(id.0)).and_then(Option::as_ref)
    }

    /// The edges `(from, to)`: `to` runs after `from`.
    pub fn edges(&self) -> &[(NodeId, NodeId)] {
        self.edges.as_flattened().get(..self.edge_len).unwrap_or(&[])
    }

    /// The dependencies of `id`.
    pub fn dependencies(&self, id: NodeId) -> impl Iterator<Item = NodeId> + '_ {
        self.edges().iter().filter(move |e| e.1 == id).map(|e| e.0)
    }

    /// Whether `id` has no dependents.
    pub fn is_leaf(&self, id: NodeId) -> bool {
        !self.edges().iter().any(|e| e.0 == id)
    }

    /// Marks in `out` every node that has a dependent (one pass over the edges).
    pub fn has_dependents(&self, out: &mut [bool; N]) {
        *out = [false; N];
        for e in self.edges() {
            if let Some(f) = out.get_mut(usize::from(e.0 .0)) {
                *f = true;
            }
        }
    }

    /// Removes every node and edge.
    pub fn clear(&mut self) {
        self.len = 0;
        self.edge_len = 0;
        self.arena_len = 0;
        self.ordered = true;
    }

    /// Copies kernel arguments into the arena (16-byte aligned); returns their offset.
    pub fn store_args(&mut self, args: &[u8]) -> Result<u32> {
        let start = self.arena_len.div_ceil(16) * 16;
        let end = start.checked_add(args.len()).ok_or(Error::OutOfMemory)?;
        let dst = self.arena.as_flattened_mut().get_mut(start..end).ok_or(Error::OutOfMemory)?;
        dst.copy_from_slice(args);
        self.arena_len = end;
        u32::try_from(start).map_err(|_| Error::OutOfMemory)
    }

    /// The argument bytes of a dispatch node.
    pub fn args(&self, offset: u32, len: u32) -> &[u8] {
        let start = offset as usize;
        self.arena.as_flattened().get(start..start + len as usize).unwrap_or(&[])
    }

    /// Adds a node after `deps` (each must exist; duplicates are dropped).
    pub fn add_node(&mut self, kind: NodeKind, deps: &[NodeId]) -> Result<NodeId> {
        for d in deps {
            if self.node(*d).is_none() {
                return Err(Error::InvalidValue);
            }
        }
        let distinct = deps.iter().enumerate().filter(|(i, d)| !deps.iter().take(*i).any(|e| e == *d)).count();
        if self.edge_len + distinct > 2 * N {
            return Err(Error::OutOfMemory);
        }
        let index = self.len;
        let id = NodeId(u16::try_from(index).map_err(|_| Error::OutOfMemory)?);
        let in_start = u32::try_from(self.edge_len).map_err(|_| Error::OutOfMemory)?;
        let slot = self.nodes.get_mut(index).ok_or(Error::OutOfMemory)?;
        *slot = Some(Node { kind, in_start, in_len: distinct as u16 });
        self.len += 1;
        for (i, d) in deps.iter().enumerate() {
            // The node is new, so only duplicates within `deps` could repeat an edge.
            if !deps.iter().take(i).any(|e| e == d) {
                self.push_edge(*d, id)?;
            }
        }
        Ok(id)
    }

    fn push_edge(&mut self, from: NodeId, to: NodeId) -> Result<()> {
        let slot = self.edges.as_flattened_mut().get_mut(self.edge_len).ok_or(Error::OutOfMemory)?;
        *slot = (from, to);
        self.edge_len += 1;
        Ok(())
    }

    /// Adds the edge `from → to` (both must exist; an existing edge is not duplicated).
    pub fn add_edge(&mut self, from: NodeId, to: NodeId) -> Result<()> {
        if self.node(from).is_none() || self.node(to).is_none() || from == to {
            return Err(Error::InvalidValue);
        }
        if self.edges().contains(&(from, to)) {
            return Ok(());
        }
        self.ordered = false;
        self.push_edge(from, to)
    }

    /// Removes the last node (and its edges); used to drop a temporary node.
    pub fn pop_node(&mut self) {
        if self.len == 0 {
            return;
        }
        let id = NodeId((self.len - 1) as u16);
        let mut w = 0;
        let edges = self.edges.as_flattened_mut();
        for r in 0..self.edge_len {
            if let Some(&e) = edges.get(r) {
                if e.0 != id && e.1 != id {
                    if let Some(slot) = edges.get_mut(w) {
                        *slot = e;
                    }
                    w += 1;
                }
            }
        }
        self.edge_len = w;
        if let Some(n) = self.nodes.get_mut(self.len - 1) {
            *n = None;
        }
        self.len -= 1;
    }

    /// Topological order of the nodes into `order`; `InvalidValue` for a cycle.
    pub fn topological_order(&self, order: &mut [NodeId; N]) -> Result<()> {
        let succ = Adjacency::<N>::build(self.edges(), false);
        let mut indegree = [0u16; N];
        for e in self.edges() {
            if let Some(d) = indegree.get_mut(usize::from(e.1 .0)) {
                *d += 1;
            }
        }
        let mut head = 0;
        let mut tail = 0;
        for i in 0..self.len {
            if indegree.get(i) == Some(&0) {
                if let Some(o) = order.get_mut(tail) {
                    *o = NodeId(i as u16);
                    tail += 1;
                }
            }
        }
        while head < tail {
            let n = order.get(head).copied().ok_or(Error::InvalidValue)?;
            head += 1;
            for &t in succ.row(n) {
                if let Some(d) = indegree.get_mut(usize::from(t.0)) {
                    *d -= 1;
                    if *d == 0 {
                        if let Some(o) = order.get_mut(tail) {
                            *o = t;
                            tail += 1;
                        }
                    }
                }
            }
        }
        if tail == self.len {
            Ok(())
        } else {
            Err(Error::InvalidValue)
        }
    }

    /// Walks the nodes in topological order deciding how each is ordered in one in-order queue,
    /// and hands every step to `step` with the node that a wait names in place of a slot.
    fn walk(&self, mut step: impl FnMut(Walked) -> Result<()>) -> Result<()> {
        // Built with `add_node` only: ids are a topological order and incoming edges contiguous.
        // Otherwise: Kahn's order and an adjacency of incoming edges.
        let (order, adjacency) = if self.ordered {
            (None, None)
        } else {
            let mut order = [NodeId(0); N];
            self.topological_order(&mut order)?;
            (Some(order), Some(Adjacency::<N>::build(self.edges(), true)))
        };
        let edges = self.edges();
        let preds = |id: NodeId| -> &[(NodeId, NodeId)] {
            match self.node(id) {
                Some(n) => edges.get(n.in_start as usize..n.in_start as usize + usize::from(n.in_len)).unwrap_or(&[]),
                None => &[],
            }
        };
        let pred_ids = |id: NodeId, f: &mut dyn FnMut(NodeId)| match &adjacency {
            Some(a) => a.row(id).iter().for_each(|&d| f(d)),
            None => preds(id).iter().for_each(|e| f(e.0)),
        };
        let node_at = |k: usize| match &order {
            Some(o) => o.get(k).copied().unwrap_or(NodeId(0)),
            None => NodeId(k as u16),
        };
        // Nodes known complete at the current point of the sequence; published nodes not known
        // complete are "in flight" (kept in a list with each node's position in it).
        let mut done = [false; N];
        let mut in_flight = [NodeId(0); N];
        let mut position = [0u16; N];
        let mut flying = 0usize;
        let mut first = true;
        let is_done = |d: NodeId, done: &[bool; N]| done.get(usize::from(d.0)).copied().unwrap_or(true);
        for k in 0..self.len {
            let id = node_at(k);
            let mut count = 0usize;
            pred_ids(id, &mut |d| count += usize::from(!is_done(d, &done)));
            if count > 0 && count == flying {
                // It waits for everything in flight: the barrier bit says exactly that.
                step(Walked::Node { node: id, barrier: true })?;
                for n in in_flight.iter().take(flying) {
                    if let Some(d) = done.get_mut(usize::from(n.0)) {
                        *d = true;
                    }
                }
                flying = 0;
            } else {
                let mut wait = [None; 5];
                let mut k = 0;
                let mut result = Ok(());
                pred_ids(id, &mut |d| {
                    if is_done(d, &done) || result.is_err() {
                        return;
                    }
                    if k == 5 {
                        result = step(Walked::Wait { nodes: wait, barrier: first });
                        first = false;
                        wait = [None; 5];
                        k = 0;
                    }
                    if let Some(w) = wait.get_mut(k) {
                        *w = Some(d);
                    }
                    k += 1;
                });
                result?;
                if k > 0 {
                    step(Walked::Wait { nodes: wait, barrier: first })?;
                    first = false;
                }
                let mut newly_done = |d: NodeId| {
                    let Some(flag) = done.get_mut(usize::from(d.0)) else { return };
                    if *flag {
                        return;
                    }
                    *flag = true;
                    // Swap-remove `d` from the in-flight list.
                    let at = position.get(usize::from(d.0)).copied().map_or(0, usize::from);
                    flying -= 1;
                    let last = in_flight.get(flying).copied().unwrap_or(d);
                    if let Some(slot) = in_flight.get_mut(at) {
                        *slot = last;
                    }
                    if let Some(p) = position.get_mut(usize::from(last.0)) {
                        *p = at as u16;
                    }
                };
                pred_ids(id, &mut newly_done);
                step(Walked::Node { node: id, barrier: first })?;
            }
            first = false;
            if let Some(slot) = in_flight.get_mut(flying) {
                *slot = id;
            }
            if let Some(p) = position.get_mut(usize::from(id.0)) {
                *p = flying as u16;
            }
            flying += 1;
        }
        Ok(())
    }

    /// Which nodes get a completion signal of their own (those a barrier-AND of the plan waits
    /// on): writes the signal slot of each node into `slots` and returns how many there are.
    pub fn signal_slots(&self, slots: &mut [Option<u16>; N]) -> Result<u16> {
        let mut waited = [false; N];
        self.walk(|w| {
            if let Walked::Wait { nodes, .. } = w {
                for n in nodes.iter().flatten() {
                    if let Some(f) = waited.get_mut(usize::from(n.0)) {
                        *f = true;
                    }
                }
            }
            Ok(())
        })?;
        let mut n = 0u16;
        for (s, w) in slots.iter_mut().zip(waited.iter()) {
            *s = None;
            if *w {
                *s = Some(n);
                n += 1;
            }
        }
        Ok(n)
    }

    /// Flattens the graph into an in-order packet sequence (see the module docs), handing each
    /// step to `emit` in publish order.
    pub fn plan(&self, mut emit: impl FnMut(Planned) -> Result<()>) -> Result<()> {
        let mut slot_of = [None::<u16>; N];
        self.signal_slots(&mut slot_of)?;
        let slot = |n: NodeId| slot_of.get(usize::from(n.0)).copied().flatten();
        self.walk(|w| match w {
            Walked::Wait { nodes, barrier } => {
                let mut slots = [None; 5];
                for (s, n) in slots.iter_mut().zip(nodes) {
                    *s = n.and_then(slot);
                }
                emit(Planned::Wait { slots, barrier })
            }
            Walked::Node { node, barrier } => emit(Planned::Node { node, barrier, signal: slot(node) }),
        })?;
        emit(Planned::Wait { slots: [None; 5], barrier: true })
    }
}

/// Edges grouped by one endpoint (compressed rows), built once per walk so that every lookup of
/// a node's neighbours is a slice, not a scan of all edges.
struct Adjacency<const N: usize> {
    start: [u32; N],
    count: [u16; N],
    items: [[NodeId; 2]; N],
}

impl<const N: usize> Adjacency<N> {
    /// Rows by target (items: the sources) when `by_target`, else rows by source.
    fn build(edges: &[(NodeId, NodeId)], by_target: bool) -> Self {
        let mut a = Adjacency { start: [0; N], count: [0; N], items: [[NodeId(0); 2]; N] };
        let key = |e: &(NodeId, NodeId)| if by_target { (e.1, e.0) } else { (e.0, e.1) };
        for e in edges {
            if let Some(c) = a.count.get_mut(usize::from(key(e).0 .0)) {
                *c += 1;
            }
        }
        let mut sum = 0u32;
        for (s, c) in a.start.iter_mut().zip(a.count.iter()) {
            *s = sum;
            sum += u32::from(*c);
        }
        let mut fill = [0u16; N];
        let items = a.items.as_flattened_mut();
        for e in edges {
            let (row, item) = key(e);
            let r = usize::from(row.0);
            let (Some(start), Some(f)) = (a.start.get(r), fill.get_mut(r)) else { continue };
            if let Some(slot) = items.get_mut(*start as usize + usize::from(*f)) {
                *slot = item;
            }
            *f += 1;
        }
        a
    }

    fn row(&self, n: NodeId) -> &[NodeId] {
        let r = usize::from(n.0);
        let (Some(&start), Some(&count)) = (self.start.get(r), self.count.get(r)) else { return &[] };
        self.items.as_flattened().get(start as usize..start as usize + usize::from(count)).unwrap_or(&[])
    }
}

/// One decision of [`Graph::walk`].
enum Walked {
    Wait { nodes: [Option<NodeId>; 5], barrier: bool },
    Node { node: NodeId, barrier: bool },
}

#[cfg(test)]
mod tests {
    use super::*;

    type G = Graph<16>;

    fn plan_of(g: &G) -> Result<([Option<Planned>; 16], usize)> {
        let mut steps = [None; 16];
        let mut n = 0;
        g.plan(|p| {
            let slot = steps.get_mut(n).ok_or(Error::OutOfMemory)?;
            *slot = Some(p);
            n += 1;
            Ok(())
        })?;
        Ok((steps, n))
    }

    fn empty(g: &mut G, deps: &[NodeId]) -> NodeId {
        g.add_node(NodeKind::Empty, deps).unwrap()
    }

    #[test]
    fn fork_join_plan() {
        // A → B, A → C, {B, C} → D: barrier bits do all the work.
        let mut g = G::new();
        let a = empty(&mut g, &[]);
        let b = empty(&mut g, &[a]);
        let c = empty(&mut g, &[a]);
        let d = empty(&mut g, &[b, c, b]);
        assert_eq!(g.node_count(), 4);
        assert_eq!(g.edge_count(), 4);
        let (steps, len) = plan_of(&g).unwrap();
        assert_eq!(g.signal_slots(&mut [None; 16]).unwrap(), 0);
        assert_eq!(steps[0], Some(Planned::Node { node: a, barrier: true, signal: None }));
        assert_eq!(steps[1], Some(Planned::Node { node: b, barrier: true, signal: None }));
        // C's dependency A is already known complete: C may overlap B.
        assert_eq!(steps[2], Some(Planned::Node { node: c, barrier: false, signal: None }));
        // D joins everything in flight.
        assert_eq!(steps[3], Some(Planned::Node { node: d, barrier: true, signal: None }));
        assert_eq!(steps[4], Some(Planned::Wait { slots: [None; 5], barrier: true }));
        assert_eq!(len, 5);
    }

    #[test]
    fn partial_dependency_waits_on_a_signal() {
        // A and B independent; C after A only, published after B: C must wait for A alone.
        let mut g = G::new();
        let a = empty(&mut g, &[]);
        let b = empty(&mut g, &[]);
        let c = empty(&mut g, &[a]);
        let (steps, len) = plan_of(&g).unwrap();
        assert_eq!(g.signal_slots(&mut [None; 16]).unwrap(), 1);
        assert_eq!(steps[0], Some(Planned::Node { node: a, barrier: true, signal: Some(0) }));
        assert_eq!(steps[1], Some(Planned::Node { node: b, barrier: false, signal: None }));
        assert_eq!(steps[2], Some(Planned::Wait { slots: [Some(0), None, None, None, None], barrier: false }));
        assert_eq!(steps[3], Some(Planned::Node { node: c, barrier: false, signal: None }));
        assert_eq!(len, 5);
    }

    #[test]
    fn cycles_and_bad_edges() {
        let mut g = G::new();
        let a = empty(&mut g, &[]);
        let b = empty(&mut g, &[a]);
        assert_eq!(g.add_edge(a, a), Err(Error::InvalidValue));
        assert_eq!(g.add_node(NodeKind::Empty, &[NodeId(9)]).err(), Some(Error::InvalidValue));
        g.add_edge(b, a).unwrap();
        assert_eq!(plan_of(&g).err(), Some(Error::InvalidValue));
        g.pop_node();
        assert_eq!(g.node_count(), 1);
        assert_eq!(g.edge_count(), 0);
        let off = g.store_args(&[1, 2, 3]).unwrap();
        let off2 = g.store_args(&[4]).unwrap();
        assert_eq!((off, off2), (0, 16));
        assert_eq!(g.args(off2, 1), &[4]);
    }

    #[test]
    fn wide_partial_join_splits_waits() {
        // Seven roots, then one more root, then a join of the first seven only.
        let mut g = G::new();
        let roots: [NodeId; 7] = core::array::from_fn(|_| g.add_node(NodeKind::Empty, &[]).unwrap());
        let _other = empty(&mut g, &[]);
        let j = empty(&mut g, &roots);
        let (steps, len) = plan_of(&g).unwrap();
        let steps = &steps[..len];
        let waits = steps.iter().flatten().filter(|p| matches!(p, Planned::Wait { barrier: false, .. })).count();
        assert_eq!(waits, 2);
        assert_eq!(g.signal_slots(&mut [None; 16]).unwrap(), 7);
        assert!(steps.contains(&Some(Planned::Node { node: j, barrier: false, signal: None })));
    }

    #[test]
    fn chain_uses_barrier_bits_only() {
        let mut g = G::new();
        let mut prev = empty(&mut g, &[]);
        for _ in 0..9 {
            prev = empty(&mut g, &[prev]);
        }
        let (steps, len) = plan_of(&g).unwrap();
        assert_eq!(len, 11);
        assert!(steps[..10].iter().flatten().all(|p| matches!(p, Planned::Node { barrier: true, signal: None, .. })));
    }
}
