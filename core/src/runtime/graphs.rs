//! Graphs and graph executables on the runtime: create, inspect, instantiate, launch.
//!
//! Instantiation flattens a graph with [`Graph::plan`] into ready AQL packets. A node that a
//! barrier-AND waits on completes a signal of its own; kernel arguments are copied once, at
//! instantiation, into backend memory the packets point at.
//!
//! Launching publishes the stream's implicit dependencies, then one write-value dispatch per node
//! signal that sets it to 1 on the device (in queue order, after the previous launch is done with
//! it, so a launch never waits on the host for an earlier one), then copies the packets into the
//! ring — patching the few that differ per launch (host functions, event records) — with one
//! doorbell per ring-full, and ends with a counted barrier: the stream is idle again when that
//! barrier completes. Launches of one executable are ordered, as CUDA orders them: on another
//! stream, behind a marker on the stream of the previous launch.

use core::sync::atomic::Ordering as CoreOrdering;
use portable_atomic::Ordering;

use super::{
    dep_chunks, lookup_event, push_dep, Batch, Deps, KernelLaunch, Recorded, Runtime, SlotState, Spec, State, MAX_BATCH,
};
use crate::aql::{BarrierPacket, BarrierValuePacket, Condition, FenceScope, Header, PacketType, DEFAULT_ROOM_SPINS};
use crate::aql::{Packet, RawPacket, BARRIER_AND_HEADER};
use crate::backend::{Backend, BuiltinKernel, HostFn, MemoryKind};
use crate::error::{Error, Result};
use crate::graph::{DispatchNode, Graph, NodeId, NodeKind, Planned, WaitValueNode};
use crate::signal::SignalHandle;
use crate::stream::StreamHandle;
use crate::table::{self, Generation, Lookup};
use crate::thread::ThreadKeys;

/// Handle tag of graphs.
const GRAPH_TAG: u16 = 0x6a4f;
/// Handle tag of graph executables.
const EXEC_TAG: u16 = 0x6e8c;
/// Most per-launch patches (host-function and event-record nodes) one executable holds.
const MAX_PATCHES: usize = 16;
/// Packets an executable holds per node of graph capacity.
const PACKETS_PER_NODE: usize = 3;

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

/// `hipGraphInstantiateFlagAutoFreeOnLaunch`.
pub const INSTANTIATE_AUTO_FREE_ON_LAUNCH: u32 = 1;
/// `hipGraphInstantiateFlagUseNodePriority`.
pub const INSTANTIATE_USE_NODE_PRIORITY: u32 = 8;

pub(super) struct GraphSlot<const N: usize> {
    pub(super) generation: Generation,
    /// The capture recording into this graph, if any.
    pub(super) capture: Option<u8>,
    pub(super) graph: Graph<N>,
}

impl<const N: usize> GraphSlot<N> {
    pub(super) const fn new() -> Self {
        GraphSlot { generation: Generation::new(), capture: None, graph: Graph::new() }
    }
}

#[derive(Clone, Copy)]
enum Patch {
    /// A host-function node: its start marker packet and the barrier waiting for it to finish.
    Host { start: u16, done: u16, f: HostFn },
    /// An event-record node: the packet that completes the event's signal.
    Event { index: u16, event: u64 },
    /// An event-wait node: the barrier that depends on the event's signal.
    EventWait { index: u16, event: u64 },
}

pub(super) struct ExecSlot<const N: usize> {
    generation: Generation,
    state: SlotState,
    device: u32,
    packets: [[[RawPacket; PACKETS_PER_NODE]; N]; 1],
    len: usize,
    signals: [[SignalHandle; N]; 1],
    signal_count: usize,
    kernarg: u64,
    patches: heapless::Vec<Patch, MAX_PATCHES>,
    /// Per signal set: the stream slot, its generation and the counted packet that ends the
    /// launch using the set.
    busy: [Option<(usize, u32, u64)>; 2],
    launches: u64,
}

impl<const N: usize> ExecSlot<N> {
    pub(super) const fn new() -> Self {
        ExecSlot {
            generation: Generation::new(),
            state: SlotState::Free,
            device: 0,
            packets: [[[RawPacket([0; 16]); PACKETS_PER_NODE]; N]; 1],
            len: 0,
            signals: [[SignalHandle::NULL; N]; 1],
            signal_count: 0,
            kernarg: 0,
            patches: heapless::Vec::new(),
            busy: [None; 2],
            launches: 0,
        }
    }
}

fn header(ty: PacketType, barrier: bool) -> u16 {
    Header::new(ty, barrier, FenceScope::System, FenceScope::System).0
}

fn raw<P: Packet>(p: &P) -> RawPacket {
    RawPacket(*p.words())
}

impl<
        B: Backend,
        K: ThreadKeys,
        const S: usize,
        const E: usize,
        const T: usize,
        const M: usize,
        const G: usize,
        const N: usize,
        const X: usize,
    > Runtime<B, K, S, E, T, M, G, N, X>
{
    pub(super) fn graph_handle(st: &State<B::Queue, S, E, T, M, G, N, X>, i: usize) -> GraphHandle {
        let g = st.graphs.get(i).map_or(0, |s| s.generation.current);
        GraphHandle(table::encode(GRAPH_TAG, g, i))
    }

    /// The slot of a live graph; null, stale and garbage handles are all `InvalidValue`, as
    /// `hipGraphDestroy` answers them.
    pub(super) fn graph_slot(st: &State<B::Queue, S, E, T, M, G, N, X>, g: GraphHandle) -> Result<usize> {
        let l = table::lookup(GRAPH_TAG, g.0, &st.graphs, |s| s.generation);
        table::require(l, Error::InvalidValue, Error::InvalidValue)
    }

    /// Takes a free graph slot with an empty graph.
    pub(super) fn graph_alloc(st: &mut State<B::Queue, S, E, T, M, G, N, X>) -> Result<usize> {
        let i = st.graphs.iter().position(|g| !g.generation.live).ok_or(Error::OutOfMemory)?;
        let slot = st.graphs.get_mut(i).ok_or(Error::OutOfMemory)?;
        slot.generation.occupy();
        slot.capture = None;
        slot.graph.clear();
        Ok(i)
    }

    pub(super) fn graph_free(st: &mut State<B::Queue, S, E, T, M, G, N, X>, i: usize) {
        if let Some(g) = st.graphs.get_mut(i) {
            if g.generation.live {
                g.generation.vacate();
                g.capture = None;
                g.graph.clear();
            }
        }
    }

    /// `hipGraphCreate`.
    pub fn graph_create(&self) -> Result<GraphHandle> {
        let mut st = self.state.lock();
        let i = Self::graph_alloc(&mut st)?;
        Ok(Self::graph_handle(&st, i))
    }

    /// `hipGraphDestroy`: null, destroyed and never-issued handles are `InvalidValue`, and so is
    /// a graph a capture is still recording into.
    pub fn graph_destroy(&self, g: GraphHandle) -> Result<()> {
        let mut st = self.state.lock();
        let i = Self::graph_slot(&st, g)?;
        if st.graphs.get(i).is_some_and(|s| s.capture.is_some()) {
            return Err(Error::InvalidValue);
        }
        Self::graph_free(&mut st, i);
        Ok(())
    }

    fn with_graph<R>(&self, g: GraphHandle, f: impl FnOnce(&Graph<N>) -> R) -> Result<R> {
        let st = self.state.lock();
        let i = Self::graph_slot(&st, g)?;
        st.graphs.get(i).map(|s| f(&s.graph)).ok_or(Error::InvalidValue)
    }

    fn with_graph_mut<R>(&self, g: GraphHandle, f: impl FnOnce(&mut Graph<N>) -> Result<R>) -> Result<R> {
        let mut st = self.state.lock();
        let i = Self::graph_slot(&st, g)?;
        st.graphs.get_mut(i).ok_or(Error::InvalidValue).and_then(|s| f(&mut s.graph))
    }

    /// Number of nodes (`hipGraphGetNodes` with a null list).
    pub fn graph_node_count(&self, g: GraphHandle) -> Result<usize> {
        self.with_graph(g, |gr| gr.node_count())
    }

    /// Writes the node ids into `out`; returns how many nodes the graph has.
    pub fn graph_nodes(&self, g: GraphHandle, out: &mut [NodeId]) -> Result<usize> {
        self.with_graph(g, |gr| {
            for (i, o) in out.iter_mut().enumerate().take(gr.node_count()) {
                *o = NodeId(i as u16);
            }
            gr.node_count()
        })
    }

    /// Writes the edges `(from, to)` into `out`; returns how many edges the graph has.
    pub fn graph_edges(&self, g: GraphHandle, out: &mut [(NodeId, NodeId)]) -> Result<usize> {
        self.with_graph(g, |gr| {
            for (o, e) in out.iter_mut().zip(gr.edges()) {
                *o = *e;
            }
            gr.edge_count()
        })
    }

    /// What node `node` does.
    pub fn graph_node_kind(&self, g: GraphHandle, node: NodeId) -> Result<NodeKind> {
        self.with_graph(g, |gr| gr.node(node).map(|n| n.kind))?.ok_or(Error::InvalidValue)
    }

    /// Waits for the work of every stream of the current device, with no capture check (unlike
    /// `device_synchronize`): what must finish before memory that work may touch is released —
    /// an executable's staging buffers, or a block `hipFree` hands back. Work a capture records
    /// does not run, so captures are left as they are.
    pub fn device_wait_idle(&self) -> Result<()> {
        self.wait_device(Timeout::NEVER)
    }

    /// `hipGraphAddEmptyNode`.
    pub fn graph_add_empty_node(&self, g: GraphHandle, deps: &[NodeId]) -> Result<NodeId> {
        self.with_graph_mut(g, |gr| gr.add_node(NodeKind::Empty, deps))
    }

    /// Adds a node that carries no kernel arguments — empty, host function, event record or
    /// wait, wait-value — after `deps`; a dispatch is `InvalidValue` (its arguments go through
    /// [`Self::graph_add_kernel_node`]).
    pub fn graph_add_node(&self, g: GraphHandle, deps: &[NodeId], kind: NodeKind) -> Result<NodeId> {
        if matches!(kind, NodeKind::Dispatch(_)) {
            return Err(Error::InvalidValue);
        }
        self.with_graph_mut(g, |gr| gr.add_node(kind, deps))
    }

    /// The kernel-argument bytes of dispatch node `node`: copies what fits into `out` and
    /// returns their length; a node that is not a dispatch is `InvalidValue`.
    pub fn graph_node_args(&self, g: GraphHandle, node: NodeId, out: &mut [u8]) -> Result<usize> {
        self.with_graph(g, |gr| match gr.node(node).map(|n| n.kind) {
            Some(NodeKind::Dispatch(d)) => {
                let args = gr.args(d.arg_offset, d.arg_len);
                for (o, a) in out.iter_mut().zip(args) {
                    *o = *a;
                }
                Ok(args.len())
            }
            _ => Err(Error::InvalidValue),
        })?
    }

    /// `hipGraphAddKernelNode`: the arguments are copied into the graph.
    pub fn graph_add_kernel_node(&self, g: GraphHandle, deps: &[NodeId], k: &KernelLaunch<'_>) -> Result<NodeId> {
        check_launch(k)?;
        self.with_graph_mut(g, |gr| {
            let node = dispatch_node(
                gr,
                k.kernel_object,
                k.grid,
                k.workgroup,
                k.group_segment_size,
                k.private_segment_size,
                k.kernarg,
            )?;
            gr.add_node(NodeKind::Dispatch(node), deps)
        })
    }

    /// `hipGraphAddDependencies`: `to[k]` runs after `from[k]`. Lists of different lengths,
    /// unknown nodes and self-edges are `InvalidValue` (and add nothing); a cycle is only
    /// detected when the graph is instantiated.
    pub fn graph_add_dependencies(&self, g: GraphHandle, from: &[NodeId], to: &[NodeId]) -> Result<()> {
        if from.len() != to.len() {
            return Err(Error::InvalidValue);
        }
        self.with_graph_mut(g, |gr| {
            if from.iter().zip(to).any(|(f, t)| f == t || gr.node(*f).is_none() || gr.node(*t).is_none()) {
                return Err(Error::InvalidValue);
            }
            for (f, t) in from.iter().zip(to) {
                gr.add_edge(*f, *t)?;
            }
            Ok(())
        })
    }

    // ----- instantiate ---------------------------------------------------------------------

    /// `hipGraphInstantiate`.
    pub fn graph_instantiate(&self, g: GraphHandle) -> Result<GraphExecHandle> {
        self.graph_instantiate_with_flags(g, 0)
    }

    /// `hipGraphInstantiateWithFlags`: flags other than 0, AutoFreeOnLaunch and
    /// UseNodePriority are `InvalidValue`; a null graph and a cyclic one too.
    pub fn graph_instantiate_with_flags(&self, g: GraphHandle, flags: u32) -> Result<GraphExecHandle> {
        if flags & !(INSTANTIATE_AUTO_FREE_ON_LAUNCH | INSTANTIATE_USE_NODE_PRIORITY) != 0 {
            return Err(Error::InvalidValue);
        }
        let mut st = self.state.lock();
        let gi = Self::graph_slot(&st, g)?;
        let device = self.current_device(&st);
        let x = st.execs.iter().position(|e| e.state == SlotState::Free).ok_or(Error::OutOfMemory)?;
        let result = self.build_exec(&mut st, gi, x, device);
        if result.is_err() {
            self.release_exec(&mut st, x);
            return result.map(|_| GraphExecHandle::NULL);
        }
        let e = st.execs.get_mut(x).ok_or(Error::OutOfMemory)?;
        let generation = e.generation.occupy();
        e.state = SlotState::Live;
        Ok(GraphExecHandle(table::encode(EXEC_TAG, generation, x)))
    }

    /// Flattens graph `gi` into exec slot `x`.
    fn build_exec(
        &self,
        st: &mut State<B::Queue, S, E, T, M, G, N, X>,
        gi: usize,
        x: usize,
        device: u32,
    ) -> Result<()> {
        let graph = &st.graphs.get(gi).ok_or(Error::InvalidValue)?.graph;
        let exec = st.execs.get_mut(x).ok_or(Error::OutOfMemory)?;
        exec.len = 0;
        exec.patches.clear();
        exec.busy = [None; 2];
        exec.launches = 0;
        exec.device = device;
        // Node signals, one per node something waits on.
        let mut slot_of = [None::<u16>; N];
        let count = usize::from(graph.signal_slots(&mut slot_of)?);
        for set in 0..1 {
            for k in 0..count {
                let sig = self.backend.signal_create(0)?;
                match exec.signals.get_mut(set).and_then(|s| s.get_mut(k)) {
                    Some(slot) => *slot = sig,
                    None => {
                        self.backend.signal_destroy(sig);
                        return Err(Error::OutOfMemory);
                    }
                }
                exec.signal_count = exec.signal_count.max(k + 1);
            }
        }
        // Kernel arguments, copied once into backend memory in node order; `arg_at` holds each
        // node's offset there, since packets are laid out in plan order, which differs.
        let mut arg_bytes = 0usize;
        let mut arg_at = [0u64; N];
        for id in 0..graph.node_count() {
            if let Some(NodeKind::Dispatch(d)) = graph.node(NodeId(id as u16)).map(|n| n.kind) {
                if let Some(at) = arg_at.get_mut(id) {
                    *at = arg_bytes as u64;
                }
                arg_bytes += (d.arg_len as usize).div_ceil(16) * 16;
            }
        }
        if arg_bytes > 0 {
            exec.kernarg = self.backend.memory_alloc(device, arg_bytes, MemoryKind::Host)?;
        }
        let kernarg = exec.kernarg;
        let signals = exec.signals;
        let mut len = 0usize;
        let mut patches: heapless::Vec<Patch, MAX_PATCHES> = heapless::Vec::new();
        let mut out = [[RawPacket([0; 16]); 2]; PACKETS_PER_NODE];
        let packets = &mut exec.packets;
        let mut emit = |p: [RawPacket; 2], len: &mut usize| -> Result<()> {
            for (set, packet) in p.iter().enumerate().take(packets.len()) {
                let dst =
                    packets.get_mut(set).and_then(|s| s.as_flattened_mut().get_mut(*len)).ok_or(Error::OutOfMemory)?;
                *dst = *packet;
            }
            *len += 1;
            Ok(())
        };
        let sig = |set: usize, slot: Option<u16>| -> u64 {
            slot.and_then(|k| signals.get(set).and_then(|s| s.get(usize::from(k)))).map_or(0, |h| h.0)
        };
        graph.plan(|step| {
            match step {
                Planned::Wait { slots, barrier } => {
                    let p = |set| {
                        let mut deps = [0u64; 5];
                        for (d, s) in deps.iter_mut().zip(slots) {
                            *d = sig(set, s);
                        }
                        let mut b = BarrierPacket::and(deps, 0);
                        b.header = header(PacketType::BarrierAnd, barrier);
                        raw(&b)
                    };
                    emit([p(0), p(1)], &mut len)
                }
                Planned::Node { node, barrier, signal } => {
                    let kind = graph.node(node).map(|n| n.kind).ok_or(Error::InvalidValue)?;
                    let mut n = 0usize;
                    let mut put = |set: usize, k: usize, p: RawPacket| {
                        if let Some(slot) = out.get_mut(k).and_then(|o| o.get_mut(set)) {
                            *slot = p;
                        }
                    };
                    for set in 0..2 {
                        let done = sig(set, signal);
                        match kind {
                            NodeKind::Empty | NodeKind::EventWait(_) => {
                                // An event wait's dependency is patched per launch.
                                let mut b = BarrierPacket::and([0; 5], done);
                                b.header = header(PacketType::BarrierAnd, barrier);
                                put(set, 0, raw(&b));
                                n = 1;
                            }
                            NodeKind::Dispatch(d) => {
                                let at = arg_at.get(usize::from(node.0)).copied().unwrap_or(0);
                                let address = if d.arg_len > 0 { kernarg + at } else { 0 };
                                let mut p = Self::dispatch_packet(
                                    d.kernel_object,
                                    d.grid,
                                    d.workgroup,
                                    d.group_segment_size,
                                    d.private_segment_size,
                                );
                                p.header = header(PacketType::KernelDispatch, barrier);
                                p.kernarg_address = address;
                                p.completion_signal = done;
                                put(set, 0, raw(&p));
                                n = 1;
                            }
                            NodeKind::WaitValue(w) => {
                                let p = BarrierValuePacket {
                                    header: header(PacketType::VendorSpecific, barrier),
                                    amd_format: crate::aql::amd_format::BARRIER_VALUE,
                                    signal: w.address.wrapping_sub(8),
                                    value: w.value,
                                    mask: w.mask,
                                    cond: w.cond as u32,
                                    completion_signal: done,
                                    ..Default::default()
                                };
                                put(set, 0, raw(&p));
                                n = 1;
                            }
                            NodeKind::Host(_) => {
                                // Start marker (completion patched per launch), then the barrier that
                                // waits for the host function (dependency patched per launch).
                                let mut start = BarrierPacket::and([0; 5], 0);
                                start.header = header(PacketType::BarrierAnd, barrier);
                                put(set, 0, raw(&start));
                                let mut wait = BarrierPacket::and([0; 5], done);
                                wait.header = header(PacketType::BarrierAnd, false);
                                put(set, 1, raw(&wait));
                                n = 2;
                            }
                            NodeKind::EventRecord(_) => {
                                let mut mark = BarrierPacket::and([0; 5], 0);
                                mark.header = header(PacketType::BarrierAnd, barrier);
                                put(set, 0, raw(&mark));
                                let mut own = BarrierPacket::and([0; 5], done);
                                own.header = header(PacketType::BarrierAnd, false);
                                put(set, 1, raw(&own));
                                n = 2;
                            }
                        }
                    }
                    let first = len;
                    match kind {
                        NodeKind::Host(f) => patches
                            .push(Patch::Host { start: first as u16, done: first as u16 + 1, f })
                            .map_err(|_| Error::NotSupported)?,
                        NodeKind::EventRecord(event) => patches
                            .push(Patch::Event { index: first as u16, event })
                            .map_err(|_| Error::NotSupported)?,
                        NodeKind::EventWait(event) => patches
                            .push(Patch::EventWait { index: first as u16, event })
                            .map_err(|_| Error::NotSupported)?,
                        _ => {}
                    }
                    for k in 0..n {
                        let pair = out.get(k).copied().ok_or(Error::InvalidValue)?;
                        emit(pair, &mut len)?;
                    }
                    Ok(())
                }
            }
        })?;
        // The plan's closing barrier is published per launch (it completes the stream's signal).
        len = len.saturating_sub(1);
        exec.len = len;
        exec.patches = patches;
        // Kernel arguments into backend memory, in node order (the `arg_at` offsets above).
        let mut cursor = 0u64;
        for id in 0..graph.node_count() {
            if let Some(NodeKind::Dispatch(d)) = graph.node(NodeId(id as u16)).map(|n| n.kind) {
                let args = graph.args(d.arg_offset, d.arg_len);
                let dst = core::ptr::with_exposed_provenance_mut::<u8>((kernarg + cursor) as usize);
                // SAFETY: `kernarg` is a host-accessible allocation of `arg_bytes` bytes
                // (Backend contract for MemoryKind::Host) and cursor + len stays inside it.
                unsafe { core::ptr::copy_nonoverlapping(args.as_ptr(), dst, args.len()) };
                cursor += u64::from(d.arg_len.div_ceil(16) * 16);
            }
        }
        Ok(())
    }

    fn release_exec(&self, st: &mut State<B::Queue, S, E, T, M, G, N, X>, x: usize) {
        let Some(e) = st.execs.get_mut(x) else { return };
        for set in e.signals.iter_mut() {
            for s in set.iter_mut().take(e.signal_count) {
                if !s.is_null() {
                    self.backend.signal_destroy(*s);
                    *s = SignalHandle::NULL;
                }
            }
        }
        e.signal_count = 0;
        if e.kernarg != 0 {
            let _ = self.backend.memory_free(e.kernarg);
            e.kernarg = 0;
        }
        e.state = SlotState::Free;
    }

    fn exec_slot(st: &State<B::Queue, S, E, T, M, G, N, X>, x: GraphExecHandle) -> Result<usize> {
        let l = table::lookup(EXEC_TAG, x.0, &st.execs, |e| e.generation);
        table::require(l, Error::InvalidValue, Error::InvalidValue)
    }

    /// Whether the launch recorded in `busy` has completed (or its stream is gone).
    fn launch_done(st: &State<B::Queue, S, E, T, M, G, N, X>, busy: Option<(usize, u32, u64)>) -> bool {
        let Some((slot, generation, seq)) = busy else { return true };
        match st.streams.get(slot) {
            Some(s) if s.generation.current == generation || s.state == SlotState::Draining => match &s.hw {
                // SAFETY: a bound slot's progress signal is live.
                Some(hw) => unsafe { hw.signal.get() }.load() <= -(seq as i64),
                None => true,
            },
            _ => true,
        }
    }

    /// `hipGraphExecDestroy`: a launch still running completes; the resources go after it.
    pub fn graph_exec_destroy(&self, x: GraphExecHandle) -> Result<()> {
        let mut st = self.state.lock();
        let i = Self::exec_slot(&st, x)?;
        let e = st.execs.get_mut(i).ok_or(Error::InvalidValue)?;
        e.generation.vacate();
        e.state = SlotState::Draining;
        self.reap_execs(&mut st);
        Ok(())
    }

    /// Frees destroyed executables whose launches are done.
    pub(super) fn reap_execs(&self, st: &mut State<B::Queue, S, E, T, M, G, N, X>) {
        for x in 0..X {
            let Some(e) = st.execs.get(x) else { continue };
            if e.state == SlotState::Draining && e.busy.iter().all(|b| Self::launch_done(st, *b)) {
                self.release_exec(st, x);
            }
        }
    }

    // ----- launch --------------------------------------------------------------------------

    /// `hipGraphLaunch`: runs the executable on `s` after the work already there (with the null
    /// stream's implicit synchronisation). An empty graph completes at once.
    pub fn graph_launch(&self, x: GraphExecHandle, s: StreamHandle) -> Result<()> {
        let mut st = self.state.lock();
        let xi = Self::exec_slot(&st, x)?;
        let i = self.resolve(&mut st, s, Error::ContextIsDestroyed)?;
        if st.streams.get(i).is_some_and(|sl| sl.detached) {
            return Err(Error::StreamDetached);
        }
        self.check_fault(&st, i)?;
        if st.execs.get(xi).is_some_and(|e| e.len == 0) {
            return Ok(());
        }
        let result = self.launch_locked(&mut st, xi, i);
        self.release_taken_markers(&mut st, i);
        result
    }

    /// Publishes the launch's dependency barriers and one write-value dispatch per node signal
    /// (value 1), as counted packets; `deps` is left empty.
    fn reset_node_signals(
        &self,
        st: &mut State<B::Queue, S, E, T, M, G, N, X>,
        xi: usize,
        i: usize,
        deps: &mut Deps,
    ) -> Result<()> {
        let (count, device) = st.execs.get(xi).map_or((0, 0), |e| (e.signal_count, e.device));
        if count == 0 {
            return Ok(());
        }
        let object = self.backend.builtin_kernel(device, BuiltinKernel::WriteValue)?;
        let packet = Self::dispatch_packet(object, [1, 1, 1], [1, 1, 1], 0, 0);
        let mut args = [[0u8; 24]; MAX_BATCH];
        let bytes = |dst: u64| {
            let mut b = [0u8; 24];
            let src = dst.to_le_bytes().into_iter().chain(1u64.to_le_bytes()).chain(8u32.to_le_bytes());
            for (o, v) in b.iter_mut().zip(src) {
                *o = v;
            }
            b
        };
        let mut k = 0;
        while k < count {
            let mut batch = Batch::new();
            for chunk in dep_chunks(deps) {
                batch.push(Spec::Deps(chunk))?;
            }
            deps.clear();
            let room = MAX_BATCH - batch.len;
            let n = room.min(count - k);
            for (j, a) in args.iter_mut().enumerate().take(n) {
                // WriteValueArgs { dst: the signal's value (offset 8), value: 1, width: 8 }.
                let sig =
                    st.execs.get(xi).and_then(|e| e.signals.first()).and_then(|s| s.get(k + j)).map_or(0, |h| h.0);
                *a = bytes(sig + 8);
            }
            for a in args.iter().take(n) {
                batch.push(Spec::Dispatch(packet, a))?;
            }
            self.publish(st, i, batch.as_slice())?;
            k += n;
        }
        Ok(())
    }

    /// Writes a 64-bit handle into dwords `word`, `word + 1` of packet `index` of a signal set.
    fn patch(
        st: &mut State<B::Queue, S, E, T, M, G, N, X>,
        xi: usize,
        set: usize,
        index: u16,
        word: usize,
        value: u64,
    ) {
        let packet = st
            .execs
            .get_mut(xi)
            .and_then(|e| e.packets.get_mut(set))
            .and_then(|s| s.as_flattened_mut().get_mut(usize::from(index)));
        if let Some(words) = packet.map(|p| &mut p.0) {
            if let Some(lo) = words.get_mut(word) {
                *lo = value as u32;
            }
            if let Some(hi) = words.get_mut(word + 1) {
                *hi = (value >> 32) as u32;
            }
        }
    }

    fn launch_locked(&self, st: &mut State<B::Queue, S, E, T, M, G, N, X>, xi: usize, i: usize) -> Result<()> {
        let set = 0;
        let previous = st.execs.get(xi).and_then(|e| e.busy.first().copied()).flatten();
        let mut deps = Deps::new();
        self.implicit_deps(st, i, &mut deps)?;
        // Launches of one executable are ordered (as CUDA orders them): behind the previous one
        // on the same stream by the queue's order, on another stream through a marker there.
        if let Some((slot, generation, _)) = previous {
            let other = slot != i || st.streams.get(i).is_none_or(|s| s.generation.current != generation);
            let live = st.streams.get(slot).is_some_and(|s| s.state != SlotState::Free && s.hw.is_some());
            if other && live && !Self::launch_done(st, previous) {
                let m = self.point_in_time(st, slot, i)?;
                push_dep(&mut deps, m.0)?;
            }
        }
        // Per-launch patches: host functions get fresh markers, event records their signals.
        let patches = st.execs.get(xi).map(|e| e.patches.clone()).unwrap_or_default();
        let stream_raw = Self::handle_of(st, i).0;
        let mut hosts: heapless::Vec<(SignalHandle, SignalHandle, HostFn), MAX_PATCHES> = heapless::Vec::new();
        for p in &patches {
            match *p {
                Patch::Host { start, done, f } => {
                    let s0 = self.take_marker(st, i)?;
                    let d0 = self.take_marker(st, i)?;
                    Self::patch(st, xi, set, start, 14, s0.0);
                    Self::patch(st, xi, set, done, 2, d0.0);
                    let _ = hosts.push((s0, d0, f));
                }
                Patch::Event { index, event } => {
                    let sig = match lookup_event(&st.events, event) {
                        Lookup::Live(ev) => st.events.get_mut(ev).map(|slot| {
                            self.swap_if_pending(slot);
                            slot.recorded = Recorded::On(stream_raw);
                            // SAFETY: a live event's signal is live.
                            unsafe { slot.signal.get() }.value.fetch_add(1, Ordering::AcqRel);
                            slot.signal.0
                        }),
                        _ => None,
                    };
                    Self::patch(st, xi, set, index, 14, sig.unwrap_or(0));
                }
                Patch::EventWait { index, event } => {
                    let sig = match lookup_event(&st.events, event) {
                        // SAFETY: a live event's signal is live.
                        Lookup::Live(ev) => st
                            .events
                            .get(ev)
                            .filter(|slot| unsafe { slot.signal.get() }.load() > 0)
                            .map(|slot| slot.signal.0),
                        _ => None,
                    };
                    Self::patch(st, xi, set, index, 2, sig.unwrap_or(0));
                }
            }
        }
        // Node signals start at 1, set on the device by write-value dispatches at the start of
        // the launch (in queue order, after the previous launch is done with them), so a launch
        // never waits on the host for an earlier one.
        self.reset_node_signals(st, xi, i, &mut deps)?;
        let exec = st.execs.get(xi).ok_or(Error::InvalidValue)?;
        let body = exec.packets.get(set).map(|s| s.as_flattened()).and_then(|s| s.get(..exec.len)).unwrap_or(&[]);
        let slot = st.streams.get_mut(i).ok_or(Error::InvalidHandle)?;
        let hw = slot.hw.as_mut().ok_or(Error::InvalidHandle)?;
        let progress = hw.signal.0;
        let ring = hw.desc.ring;
        let mut close = BarrierPacket::and([0; 5], progress);
        close.header = header(PacketType::BarrierAnd, true);
        let counted = deps.len().div_ceil(5) as u64 + 1;
        let mut deps_left = dep_chunks(&deps).map(|d| {
            let mut b = BarrierPacket::and(d, progress);
            b.header = BARRIER_AND_HEADER.0;
            b
        });
        let mut body_left = body;
        let mut close_left = true;
        let total = counted + body.len() as u64;
        let mut left = total;
        while left > 0 {
            let n = left.min(ring.size());
            // SAFETY: a stream's ring has one producer, this runtime, under the state lock.
            let mut res = unsafe { ring.reserve_single_producer(n as u32, DEFAULT_ROOM_SPINS, &mut hw.read_hint) }?;
            while res.remaining() > 0 {
                if let Some(b) = deps_left.next() {
                    res.write(&b);
                } else if !body_left.is_empty() {
                    let k = res.write_batch(body_left);
                    body_left = body_left.get(k..).unwrap_or(&[]);
                } else if close_left {
                    res.write(&close);
                    close_left = false;
                } else {
                    break;
                }
            }
            let last = res.finish();
            left -= n;
            core::sync::atomic::fence(CoreOrdering::Release);
            self.backend.ring_doorbell(&hw.queue, last);
        }
        slot.submitted += counted;
        let record = (i, slot.generation.current, slot.submitted);
        if let Some(e) = st.execs.get_mut(xi) {
            if let Some(b) = e.busy.get_mut(set) {
                *b = Some(record);
            }
            e.launches += 1;
        }
        for (start, done, f) in hosts {
            self.backend.host_call(start, done, f)?;
        }
        Ok(())
    }
}

/// Checks a launch's geometry: zero sizes or a work-group over 1024 work-items are
/// `InvalidConfiguration`, a null kernel `InvalidValue`.
pub(super) fn check_launch(k: &KernelLaunch<'_>) -> Result<()> {
    // u64: three u16 sizes overflow u32 (and a wrapped product could pass the 1024 check).
    let wg_items: u64 = k.workgroup.iter().map(|&w| u64::from(w)).product();
    if k.workgroup.contains(&0) || k.grid.contains(&0) || wg_items > 1024 {
        return Err(Error::InvalidConfiguration);
    }
    if k.kernel_object == 0 {
        return Err(Error::InvalidValue);
    }
    Ok(())
}

/// A dispatch node whose arguments are copied into `g`'s arena.
pub(super) fn dispatch_node<const N: usize>(
    g: &mut Graph<N>,
    kernel_object: u64,
    grid: [u32; 3],
    workgroup: [u16; 3],
    group_segment_size: u32,
    private_segment_size: u32,
    args: &[u8],
) -> Result<DispatchNode> {
    let arg_offset = g.store_args(args)?;
    Ok(DispatchNode {
        kernel_object,
        grid,
        workgroup,
        group_segment_size,
        private_segment_size,
        arg_offset,
        arg_len: u32::try_from(args.len()).map_err(|_| Error::InvalidValue)?,
    })
}

/// A wait-value node.
pub(super) fn wait_value_node(address: u64, value: i64, mask: i64, cond: Condition) -> WaitValueNode {
    WaitValueNode { address, value, mask, cond }
}
