//! Conditional nodes on the runtime: handles, and the instantiation of conditional nodes into
//! scheduler frames, body queues and prebuilt body packets (the layout is in
//! `docs/conditional-graphs.md`; the scheduler in [`crate::conditional`]).
//!
//! Body queues are dedicated: created through the backend's queue API when an executable is
//! built and destroyed with it, outside the stream pool (the scheduler must be their only
//! producer), and not counted against the streams' queue budget.

use core::sync::atomic::Ordering as CoreOrdering;

use super::submit::{header, raw};
use super::{Runtime, St};
use crate::aql::{BarrierPacket, PacketType, RawPacket};
use crate::backend::{Backend, BuiltinKernel, MemoryKind, WriteValueArgs};
use crate::conditional::{
    single_dispatch, BodyRef, ConditionalCell, ConditionalHandle, ConditionalNode, SchedulerFrame, COND_ASSIGN_DEFAULT,
    MAX_BODIES, MAX_DEPTH,
};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::graph::{NodeId, NodeKind, Planned};
use crate::signal::SignalHandle;
use crate::slot::Table;
use crate::slots::graph::{graph_index, CondParts, GraphHandle, GraphSlot, MAX_COND_NODES};
use crate::stream::Priority;
use crate::thread::ThreadKeys;

/// A built conditional node: its frame and its done signal.
#[derive(Clone, Copy, Default)]
pub(super) struct Built {
    pub(super) frame: u64,
    pub(super) done: u64,
}

/// The conditional nodes of one graph, built: node id and what was built.
pub(super) type BuiltList = heapless::Vec<(NodeId, Built), MAX_COND_NODES>;

fn find(list: &BuiltList, node: NodeId) -> Built {
    list.iter().find(|(n, _)| *n == node).map_or(Built::default(), |(_, b)| *b)
}

/// Writes `v` at host address `at`.
///
/// # Safety
/// `at` is host-visible memory this executable allocated, with room for a `T`.
unsafe fn put<T>(at: u64, v: T) {
    // SAFETY: the caller's contract.
    unsafe { core::ptr::write_unaligned(core::ptr::with_exposed_provenance_mut::<T>(at as usize), v) };
}

impl<B: Backend, K: ThreadKeys, C: Config> Runtime<B, K, C> {
    /// `hipGraphConditionalHandleCreate`: a handle on graph `g` whose word starts at
    /// `default_value`; `flags` is 0 or [`COND_ASSIGN_DEFAULT`] (else `InvalidValue`).
    pub fn graph_conditional_handle_create(
        &self,
        g: GraphHandle,
        default_value: u32,
        flags: u32,
    ) -> Result<ConditionalHandle> {
        if flags & !COND_ASSIGN_DEFAULT != 0 {
            return Err(Error::InvalidValue);
        }
        let device = self.current_device();
        let mut st = self.lock();
        let gi = Self::graph_slot(&st, g)?;
        if st.graphs.slots().get(gi).is_none_or(|s| s.handles.is_full()) {
            return Err(Error::OutOfMemory);
        }
        let at = self.backend.memory_alloc(device, size_of::<ConditionalCell>(), MemoryKind::Host)?;
        let h = ConditionalHandle(at);
        // SAFETY: a fresh host-visible allocation of a cell's size, 16-byte aligned (Backend
        // contract); nothing else refers to it yet.
        let cell = unsafe { h.cell() };
        // Ordering: Relaxed; the cell reaches the device through a launch's doorbell.
        cell.value.store(default_value, CoreOrdering::Relaxed);
        cell.default.store(default_value, CoreOrdering::Relaxed);
        cell.flags.store(flags, CoreOrdering::Relaxed);
        cell.bound.store(0, CoreOrdering::Relaxed);
        cell.refs.store(1, CoreOrdering::Relaxed);
        match st.graphs.slots_mut().get_mut(gi).map(|s| s.handles.push(h)) {
            Some(Ok(())) => Ok(h),
            _ => {
                let _ = self.backend.memory_free(at);
                Err(Error::OutOfMemory)
            }
        }
    }

    /// Adds a conditional node after `deps`. The handle must be one a live graph created and
    /// not used by another node; bodies must be live graphs other than `g`. Graph `g` then
    /// holds a reference to the handle's cell as well.
    pub fn graph_add_conditional_node(&self, g: GraphHandle, deps: &[NodeId], node: ConditionalNode) -> Result<NodeId> {
        let mut st = self.lock();
        let gi = Self::graph_slot(&st, g)?;
        for b in node.bodies() {
            if Self::graph_slot(&st, GraphHandle(*b))? == gi {
                return Err(Error::InvalidValue);
            }
        }
        let owned = st.graphs.slots().iter().any(|s| s.generation.live && s.handles.contains(&node.handle));
        if !owned {
            return Err(Error::InvalidValue);
        }
        // SAFETY: the handle is one of a live graph's cells (checked above).
        let cell = unsafe { node.handle.cell() };
        // Ordering: Relaxed; the structural lock orders node additions.
        if cell.bound.load(CoreOrdering::Relaxed) != 0 {
            return Err(Error::InvalidValue);
        }
        let slot = st.graphs.slots_mut().get_mut(gi).ok_or(Error::InvalidValue)?;
        // The node's graph owns the cell too (the handle may be another graph's, the parent of
        // a body), so the cell outlives whichever of them goes first.
        let shared = !slot.handles.contains(&node.handle);
        if shared {
            slot.handles.push(node.handle).map_err(|_| Error::OutOfMemory)?;
        }
        let id = match slot.graph.add_node(&self.backend, NodeKind::Conditional(node), deps, C::GRAPH_NODES) {
            Ok(id) => id,
            Err(e) => {
                if shared {
                    slot.handles.pop();
                }
                return Err(e);
            }
        };
        if shared {
            cell.acquire();
        }
        cell.bound.store(1, CoreOrdering::Relaxed);
        Ok(id)
    }

    /// Graph `slot` is going: the handles its conditional nodes use may serve a node again
    /// (in another graph; a layer that rebuilds its graphs into fresh core graphs relies on
    /// it). Called before [`Self::free_handles`], while the graph still owns the cells.
    pub(super) fn unbind_handles(slot: &GraphSlot) {
        for id in 0..slot.graph.node_count() {
            if let Some(NodeKind::Conditional(c)) = slot.graph.node(NodeId(id as u16)).map(|n| n.kind) {
                // SAFETY: the graph holding a conditional node owns a reference to its cell
                // (taken when the node was added), so the cell is live.
                let cell = unsafe { c.handle.cell() };
                // Ordering: Relaxed; the structural lock orders node additions and removals.
                cell.bound.store(0, CoreOrdering::Relaxed);
            }
        }
    }

    /// Drops a graph's ownership of its conditional handles (when the graph goes); cells no
    /// executable uses any more are freed.
    pub(super) fn free_handles(&self, slot: &mut GraphSlot) {
        while let Some(h) = slot.handles.pop() {
            // SAFETY: a live graph's handles are live cells (it owns one reference).
            if unsafe { h.cell() }.release() {
                let _ = self.backend.memory_free(h.0);
            }
        }
    }

    /// Builds every conditional node of graph `gi` (recursively) for executable slot `x`.
    pub(super) fn build_conditionals(
        &self,
        st: &mut St<C>,
        gi: usize,
        x: usize,
        device: u32,
        parts: &mut CondParts,
        built: &mut BuiltList,
    ) -> Result<()> {
        let graphs = st.graphs.slots_mut();
        let nodes = Self::conditional_nodes(graphs, gi, false)?;
        for (id, c) in nodes {
            let b = self.build_node(graphs, &c, x, device, 1, parts)?;
            built.push((id, b)).map_err(|_| Error::NotSupported)?;
            let _ = parts.top_done.push(SignalHandle(b.done));
        }
        Ok(())
    }

    /// The conditional nodes of graph `gi`; in a body, nodes other than kernel, empty and
    /// conditional ones are `NotSupported` (as in CUDA).
    fn conditional_nodes(
        graphs: &[GraphSlot],
        gi: usize,
        body: bool,
    ) -> Result<heapless::Vec<(NodeId, ConditionalNode), MAX_COND_NODES>> {
        let graph = &graphs.get(gi).ok_or(Error::InvalidValue)?.graph;
        let mut out = heapless::Vec::new();
        for id in 0..graph.node_count() {
            let id = NodeId(id as u16);
            match graph.node(id).map(|n| n.kind) {
                Some(NodeKind::Conditional(c)) => out.push((id, c)).map_err(|_| Error::NotSupported)?,
                Some(NodeKind::Empty | NodeKind::Dispatch(_)) => {}
                _ if body => return Err(Error::NotSupported),
                _ => {}
            }
        }
        Ok(out)
    }

    /// Allocates host-visible memory the executable owns; the address returned is 64-byte
    /// aligned (packets and frames live there).
    fn cond_alloc(&self, device: u32, bytes: usize, parts: &mut CondParts) -> Result<u64> {
        if parts.memory.is_full() {
            return Err(Error::NotSupported);
        }
        let at = self.backend.memory_alloc(device, bytes.max(16) + 64, MemoryKind::Host)?;
        let _ = parts.memory.push(at);
        Ok(at.div_ceil(64) * 64)
    }

    fn cond_signal(&self, initial: i64, parts: &mut CondParts) -> Result<SignalHandle> {
        if parts.signals.is_full() {
            return Err(Error::NotSupported);
        }
        let s = self.backend.signal_create(initial)?;
        let _ = parts.signals.push(s);
        Ok(s)
    }

    /// Builds one conditional node: its body queue, bodies and frame.
    fn build_node(
        &self,
        graphs: &mut [GraphSlot],
        c: &ConditionalNode,
        x: usize,
        device: u32,
        depth: usize,
        parts: &mut CondParts,
    ) -> Result<Built> {
        if depth > MAX_DEPTH {
            return Err(Error::NotSupported);
        }
        // SAFETY: handles reach a node only through graph_add_conditional_node, which checked
        // that a live graph owns the cell; cells are freed only when their last owner goes.
        let cell = unsafe { c.handle.cell() };
        parts.handles.push(c.handle).map_err(|_| Error::NotSupported)?;
        cell.acquire();
        // Ordering: Relaxed; host-side fields, written under the structural lock.
        if cell.flags.load(CoreOrdering::Relaxed) & COND_ASSIGN_DEFAULT != 0 {
            let d = cell.default.load(CoreOrdering::Relaxed);
            parts.defaults.push((c.handle, d)).map_err(|_| Error::NotSupported)?;
        }
        let scheduler = self.backend.builtin_kernel(device, BuiltinKernel::GraphScheduler)?;
        let (desc, doorbell) = self.body_queue(x, device, parts)?;
        let done = self.cond_signal(1, parts)?;
        let frame_at = self.cond_alloc(device, size_of::<SchedulerFrame>(), parts)?;
        let mut bodies = [BodyRef::default(); MAX_BODIES];
        for (slot, b) in bodies.iter_mut().zip(c.bodies()) {
            let bi = graph_index(graphs, GraphHandle(*b))?;
            *slot = self.build_body(graphs, bi, x, device, depth, scheduler, parts)?;
            // The body, the scheduler or exit after it, and the scheduler being run.
            if u64::from(slot.len) + 2 > desc.ring.size() {
                return Err(Error::NotSupported);
            }
        }
        let used = bodies.get(..usize::from(c.count)).ok_or(Error::InvalidValue)?;
        let frame =
            SchedulerFrame::new(frame_at, scheduler, c.handle.0, c.kind, used, desc.ring.addresses(), doorbell, done.0);
        // SAFETY: a fresh host-visible allocation of a frame's size, 64-byte aligned by
        // `cond_alloc`.
        unsafe { put(frame_at, frame) };
        Ok(Built { frame: frame_at, done: done.0 })
    }

    /// A dedicated body queue for executable `x`, outside the stream pool: its ring and device
    /// doorbell.
    fn body_queue(
        &self,
        x: usize,
        device: u32,
        parts: &mut CondParts,
    ) -> Result<(crate::backend::QueueDesc, crate::conditional::DeviceDoorbell)> {
        let q = self.backend.queue_create(device, Priority::Normal, None)?;
        let desc = self.backend.queue_desc(&q);
        let bell = self.backend.device_doorbell(&q);
        let mut table = self.body_queues.lock();
        if let Err((_, q)) = table.push((x as u32, q)) {
            self.backend.queue_destroy(q);
            return Err(Error::NotSupported);
        }
        parts.queues += 1;
        Ok((desc?, bell.ok_or(Error::NotSupported)?))
    }

    /// Flattens body graph `bi` into packets in host-visible memory: `[packets][kernel
    /// arguments][reset list]`.
    #[allow(clippy::too_many_arguments)]
    fn build_body(
        &self,
        graphs: &mut [GraphSlot],
        bi: usize,
        x: usize,
        device: u32,
        depth: usize,
        scheduler: u64,
        parts: &mut CondParts,
    ) -> Result<BodyRef> {
        let mut built = BuiltList::new();
        for (id, c) in Self::conditional_nodes(graphs, bi, true)? {
            let b = self.build_node(graphs, &c, x, device, depth + 1, parts)?;
            built.push((id, b)).map_err(|_| Error::NotSupported)?;
        }
        let graph = &mut graphs.get_mut(bi).ok_or(Error::InvalidValue)?.graph;
        // Node signals (a barrier-AND waits on them): set to 1 by the scheduler before every
        // publication of the body, as the launch sets the top-level ones.
        let count = usize::from(graph.signal_slots(&self.backend)?);
        let first = parts.signals.len();
        for _ in 0..count {
            self.cond_signal(1, parts)?;
        }
        // Packets: plan steps, one more for conditional nodes, minus the closing barrier (the
        // follow packet, with its barrier bit, closes the body).
        let mut len = 0usize;
        graph.plan(|p| {
            len += match p {
                Planned::Node { kind: NodeKind::Conditional(_), .. } => 2,
                _ => 1,
            };
            Ok(())
        })?;
        let len = len.saturating_sub(1);
        let resets = count + built.len();
        let packets_bytes = len * 64;
        let arena_bytes = graph.arena().len().div_ceil(16) * 16;
        let block = self.cond_alloc(device, packets_bytes + arena_bytes + resets * 8, parts)?;
        let kernarg = block + packets_bytes as u64;
        let reset_at = kernarg + arena_bytes as u64;
        let signals = parts.signals.get(first..first + count).unwrap_or(&[]);
        let sig = |s: Option<u16>| s.and_then(|k| signals.get(usize::from(k))).map_or(0, |h| h.0);
        let mut k = 0usize;
        let mut emit = |p: RawPacket| {
            if k < len {
                // SAFETY: slot k < len of the block's packet area.
                unsafe { put(block + 64 * k as u64, p) };
            }
            k += 1;
        };
        graph.plan(|p| {
            match p {
                Planned::Wait { slots, barrier } => {
                    let mut deps = [0u64; 5];
                    for (d, s) in deps.iter_mut().zip(slots) {
                        *d = sig(s);
                    }
                    let mut b = BarrierPacket::and(deps, 0);
                    b.header = header(PacketType::BarrierAnd, barrier);
                    emit(raw(&b));
                }
                Planned::Node { node, kind, barrier, signal } => {
                    let done = sig(signal);
                    match kind {
                        NodeKind::Dispatch(d) => {
                            let mut p = super::submit::dispatch_packet(
                                d.kernel_object,
                                d.grid,
                                d.workgroup,
                                d.group_segment_size,
                                d.private_segment_size,
                            );
                            p.header = header(PacketType::KernelDispatch, barrier);
                            p.kernarg_address = if d.arg_len > 0 { kernarg + u64::from(d.arg_offset) } else { 0 };
                            p.completion_signal = done;
                            emit(raw(&p));
                        }
                        NodeKind::Conditional(_) => {
                            let [entry, wait] = entry_packets(scheduler, find(&built, node), barrier, done);
                            emit(entry);
                            emit(wait);
                        }
                        _ => {
                            let mut b = BarrierPacket::and([0; 5], done);
                            b.header = header(PacketType::BarrierAnd, barrier);
                            emit(raw(&b));
                        }
                    }
                }
            }
            Ok(())
        })?;
        // Kernel arguments: the graph's arena, at the same offsets.
        for (i, byte) in graph.arena().iter().enumerate() {
            // SAFETY: inside the block's argument area (sized from the arena).
            unsafe { put(kernarg + i as u64, *byte) };
        }
        // The reset list: node signals, then the done signals of nested conditional nodes.
        let listed = signals.iter().map(|s| s.0).chain(built.iter().map(|(_, b)| b.done));
        for (r, h) in listed.enumerate() {
            // SAFETY: inside the block's reset list (`resets` entries).
            unsafe { put(reset_at + 8 * r as u64, h) };
        }
        Ok(BodyRef { packets: block, len: len as u32, reset_len: resets as u32, resets: reset_at })
    }

    /// Releases what [`Self::build_conditionals`] made for executable slot `x`.
    pub(super) fn release_conditionals(&self, x: usize, parts: &mut CondParts) {
        if parts.queues > 0 {
            let mut table = self.body_queues.lock();
            let mut i = 0;
            while i < table.len() {
                if table.get(i).is_some_and(|(e, _)| *e == x as u32) {
                    let (_, q) = table.swap_remove(i);
                    self.backend.queue_destroy(q);
                } else {
                    i += 1;
                }
            }
            parts.queues = 0;
        }
        while let Some(m) = parts.memory.pop() {
            let _ = self.backend.memory_free(m);
        }
        while let Some(s) = parts.signals.pop() {
            self.backend.signal_destroy(s);
        }
        parts.top_done.clear();
        parts.defaults.clear();
        while let Some(h) = parts.handles.pop() {
            // SAFETY: the executable holds a reference to the cell (taken in build_node).
            if unsafe { h.cell() }.release() {
                let _ = self.backend.memory_free(h.0);
            }
        }
    }

    /// The write-value dispatches that set handles to their defaults at the start of every
    /// launch (arguments in one host-visible block); the first carries the barrier bit, so the
    /// previous launch is done with the words.
    pub(super) fn default_packets(
        &self,
        device: u32,
        parts: &mut CondParts,
        mut emit: impl FnMut(RawPacket) -> Result<()>,
    ) -> Result<()> {
        if parts.defaults.is_empty() {
            return Ok(());
        }
        let object = self.backend.builtin_kernel(device, BuiltinKernel::WriteValue)?;
        let n = parts.defaults.len();
        let block = self.cond_alloc(device, n * size_of::<WriteValueArgs>(), parts)?;
        for (k, (h, d)) in parts.defaults.iter().enumerate() {
            let at = block + (k * size_of::<WriteValueArgs>()) as u64;
            // SAFETY: inside the fresh block of `n` argument structs.
            unsafe { put(at, WriteValueArgs { dst: h.0, value: u64::from(*d), width: 4, reserved: 0 }) };
            emit(single_dispatch(object, at, k == 0))?;
        }
        Ok(())
    }
}

/// The two packets of a conditional node built as `b` in its parent sequence
/// ([`SchedulerFrame::entry_packets`]).
pub(super) fn entry_packets(scheduler: u64, b: Built, barrier: bool, completion: u64) -> [RawPacket; 2] {
    SchedulerFrame::entry_packets(b.frame, scheduler, b.done, barrier, completion)
}
