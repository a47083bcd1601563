//! Graphs and graph executables on the runtime: create, inspect, instantiate, launch.
//!
//! Instantiation flattens a graph with [`Graph::plan`] into ready AQL packets kept in backend
//! host memory (as many as the plan has). A node that a barrier-AND waits on completes a signal
//! of its own; kernel arguments are copied once, at instantiation, into backend memory the
//! packets point at.
//!
//! Launching publishes the stream's implicit dependencies, then one write-value dispatch per node
//! signal that sets it to 1 on the device (in queue order, after the previous launch is done with
//! it, so a launch never waits on the host for an earlier one), then copies the packets into the
//! ring — patching the few that differ per launch (host functions, event records) — with one
//! doorbell per ring-full, and ends with a counted barrier: the stream is idle again when that
//! barrier completes. Launches of one executable are ordered, as CUDA orders them: on another
//! stream, behind a wait on the progress point of the previous launch.

use super::conditional::{entry_packets, BuiltList};
use super::submit::{dispatch_packet, header, raw, Batch, Dispatch, Spec, MAX_BATCH};
use super::{KernelLaunch, Runtime, St};
use crate::aql::{BarrierPacket, BarrierValuePacket, PacketType, RawPacket};
use crate::backend::{Backend, BuiltinArgs, BuiltinKernel, HostFn, WriteValueArgs};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::graph::{DispatchNode, Graph, NodeId, NodeKind, Planned};
use crate::live::LiveSignal;
use crate::slot::Table;
use crate::slots::event::Recorded;
use crate::slots::graph::{
    graph_index, CondParts, GraphExecHandle, GraphHandle, NodeSite, Patch, SiteKind, EXEC_TAG, GRAPH_TAG,
    MAX_COND_NODES, MAX_PATCHES,
};
use crate::slots::SlotState;
use crate::stream::StreamHandle;
use crate::table::{self, Lookup};
use crate::thread::ThreadKeys;

/// `hipGraphInstantiateFlagAutoFreeOnLaunch`.
pub const INSTANTIATE_AUTO_FREE_ON_LAUNCH: u32 = 1;
/// `hipGraphInstantiateFlagUseNodePriority`.
pub const INSTANTIATE_USE_NODE_PRIORITY: u32 = 8;

/// Writes a 64-bit handle into dwords `word`, `word + 1` of a packet.
fn patch_words(p: Option<&mut RawPacket>, word: usize, value: u64) {
    if let Some(words) = p.map(|p| &mut p.0) {
        if let Some(lo) = words.get_mut(word) {
            *lo = value as u32;
        }
        if let Some(hi) = words.get_mut(word + 1) {
            *hi = (value >> 32) as u32;
        }
    }
}

impl<B: Backend, K: ThreadKeys, C: Config> Runtime<B, K, C> {
    pub(super) fn graph_handle(st: &St<C>, i: usize) -> GraphHandle {
        let g = st.graphs.slots().get(i).map_or(0, |s| s.generation.current());
        GraphHandle(table::encode(GRAPH_TAG, g, i))
    }

    /// The slot of a live graph; null, stale and garbage handles are all `InvalidValue`, as
    /// `hipGraphDestroy` answers them.
    pub(super) fn graph_slot(st: &St<C>, g: GraphHandle) -> Result<usize> {
        graph_index(st.graphs.slots(), g)
    }

    /// Takes a free graph slot with an empty graph.
    pub(super) fn graph_alloc(&self, st: &mut St<C>) -> Result<usize> {
        let i = st.graphs.slots().iter().position(|g| !g.generation.live).ok_or(Error::OutOfMemory)?;
        let slot = st.graphs.slots_mut().get_mut(i).ok_or(Error::OutOfMemory)?;
        slot.generation.occupy();
        slot.capture = None;
        slot.graph.clear();
        slot.handles.clear();
        Ok(i)
    }

    /// Ends graph `i`. Its memory stays with the slot for the next graph (as a `Vec` keeps its
    /// capacity), so creating and destroying graphs does not allocate once warm.
    pub(super) fn graph_free(&self, st: &mut St<C>, i: usize) {
        if let Some(g) = st.graphs.slots_mut().get_mut(i) {
            if g.generation.live {
                g.generation.vacate();
                g.capture = None;
                Self::unbind_handles(g);
                g.graph.clear();
                self.free_handles(g);
            }
        }
    }

    /// `hipGraphCreate`.
    pub fn graph_create(&self) -> Result<GraphHandle> {
        let mut st = self.lock();
        let i = self.graph_alloc(&mut st)?;
        Ok(Self::graph_handle(&st, i))
    }

    /// `hipGraphDestroy`: null, destroyed and never-issued handles are `InvalidValue`, and so is
    /// a graph a capture is still recording into.
    pub fn graph_destroy(&self, g: GraphHandle) -> Result<()> {
        let mut st = self.lock();
        let i = Self::graph_slot(&st, g)?;
        if st.graphs.slots().get(i).is_some_and(|s| s.capture.is_some()) {
            return Err(Error::InvalidValue);
        }
        self.graph_free(&mut st, i);
        Ok(())
    }

    fn with_graph<R>(&self, g: GraphHandle, f: impl FnOnce(&Graph) -> R) -> Result<R> {
        let st = self.lock();
        let i = Self::graph_slot(&st, g)?;
        st.graphs.slots().get(i).map(|s| f(&s.graph)).ok_or(Error::InvalidValue)
    }

    fn with_graph_mut<R>(&self, g: GraphHandle, f: impl FnOnce(&B, &mut Graph) -> Result<R>) -> Result<R> {
        let mut st = self.lock();
        let i = Self::graph_slot(&st, g)?;
        st.graphs.slots_mut().get_mut(i).ok_or(Error::InvalidValue).and_then(|s| f(&self.backend, &mut s.graph))
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

    /// `hipGraphAddEmptyNode`.
    pub fn graph_add_empty_node(&self, g: GraphHandle, deps: &[NodeId]) -> Result<NodeId> {
        self.with_graph_mut(g, |b, gr| gr.add_node(b, NodeKind::Empty, deps, C::GRAPH_NODES))
    }

    /// Adds a node that carries no kernel arguments — empty, host function, event record or
    /// wait, wait-value — after `deps`; a dispatch is `InvalidValue` (its arguments go through
    /// [`Self::graph_add_kernel_node`]), and so is a conditional node (through
    /// [`Self::graph_add_conditional_node`]).
    pub fn graph_add_node(&self, g: GraphHandle, deps: &[NodeId], kind: NodeKind) -> Result<NodeId> {
        if matches!(kind, NodeKind::Dispatch(_) | NodeKind::Conditional(_)) {
            return Err(Error::InvalidValue);
        }
        self.with_graph_mut(g, |b, gr| gr.add_node(b, kind, deps, C::GRAPH_NODES))
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
        self.with_graph_mut(g, |b, gr| {
            let node = dispatch_node(
                b,
                gr,
                k.kernel_object,
                k.grid,
                k.workgroup,
                k.group_segment_size,
                k.private_segment_size,
                k.kernarg,
                C::GRAPH_NODES,
            )?;
            gr.add_node(b, NodeKind::Dispatch(node), deps, C::GRAPH_NODES)
        })
    }

    /// `hipGraphAddDependencies`: `to[k]` runs after `from[k]`. Lists of different lengths,
    /// unknown nodes and self-edges are `InvalidValue` (and add nothing); a cycle is only
    /// detected when the graph is instantiated.
    pub fn graph_add_dependencies(&self, g: GraphHandle, from: &[NodeId], to: &[NodeId]) -> Result<()> {
        if from.len() != to.len() {
            return Err(Error::InvalidValue);
        }
        self.with_graph_mut(g, |b, gr| {
            if from.iter().zip(to).any(|(f, t)| f == t || gr.node(*f).is_none() || gr.node(*t).is_none()) {
                return Err(Error::InvalidValue);
            }
            for (f, t) in from.iter().zip(to) {
                gr.add_edge(b, *f, *t, C::GRAPH_NODES)?;
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
        let device = self.current_device();
        let mut st = self.lock();
        let gi = Self::graph_slot(&st, g)?;
        let x = match st.execs.slots().iter().position(|e| e.state == SlotState::Free) {
            Some(x) => x,
            None => {
                self.reap_execs(&mut st);
                st.execs.slots().iter().position(|e| e.state == SlotState::Free).ok_or(Error::OutOfMemory)?
            }
        };
        let result = self.build_exec(&mut st, gi, x, device);
        if result.is_err() {
            self.release_exec(&mut st, x);
            return result.map(|_| GraphExecHandle::NULL);
        }
        let e = st.execs.slots_mut().get_mut(x).ok_or(Error::OutOfMemory)?;
        let generation = e.generation.occupy();
        e.state = SlotState::Live;
        Ok(GraphExecHandle(table::encode(EXEC_TAG, generation, x)))
    }

    /// Flattens graph `gi` into exec slot `x`.
    fn build_exec(&self, st: &mut St<C>, gi: usize, x: usize, device: u32) -> Result<()> {
        let b = &self.backend;
        // Conditional nodes first: their body queues, frames and bodies.
        let mut cond = CondParts::new();
        let mut built = BuiltList::new();
        let mut defaults: heapless::Vec<RawPacket, MAX_COND_NODES> = heapless::Vec::new();
        let made = self.build_conditionals(st, gi, x, device, &mut cond, &mut built).and_then(|()| {
            self.default_packets(device, &mut cond, |p| defaults.push(p).map_err(|_| Error::NotSupported))
        });
        let scheduler = match made {
            Ok(()) if !built.is_empty() => b.builtin_kernel(device, BuiltinKernel::GraphScheduler),
            Ok(()) => Ok(0),
            Err(e) => Err(e),
        };
        if let Some(e) = st.execs.slots_mut().get_mut(x) {
            e.cond = cond;
        }
        let scheduler = scheduler?;
        let super::Structure { graphs, execs, .. } = st;
        let graph = &mut graphs.slots_mut().get_mut(gi).ok_or(Error::InvalidValue)?.graph;
        let exec = execs.slots_mut().get_mut(x).ok_or(Error::OutOfMemory)?;
        exec.packets.clear();
        exec.kernarg.clear();
        exec.patches.clear();
        exec.busy = None;
        exec.launches = 0;
        exec.device = device;
        let nodes = graph.node_count();
        // Node signals, one per node something waits on.
        // Node signals, one per node something waits on; the slot keeps those of its previous
        // executable (their launches are done) and adds what is missing.
        let count = usize::from(graph.signal_slots(b)?);
        exec.used_signals = count;
        while exec.signals.len() < count {
            let sig = b.signal_create(0)?;
            if let Err(e) = exec.signals.push(b, device, sig, usize::MAX) {
                b.signal_destroy(sig);
                return Err(e);
            }
        }
        // Kernel arguments: the arena, copied once into backend memory; the node sites after it.
        let arena = graph.arena();
        let chunks = arena.len().div_ceil(16);
        let records = chunks.saturating_add(nodes);
        exec.sites_at = chunks;
        if records > 0 {
            exec.kernarg.extend(b, device, [0; 16], records, records)?;
            for (d, s) in exec.kernarg.as_mut_slice().iter_mut().zip(arena.chunks(16)) {
                if let Some(d) = d.get_mut(..s.len()) {
                    d.copy_from_slice(s);
                }
            }
        }
        let kernarg = exec.kernarg.address();
        let max_packets = nodes.saturating_mul(4).saturating_add(16 + defaults.len());
        exec.packets.reserve(b, device, nodes + 1, max_packets)?;
        let signals = exec.signals.as_slice().get(..count).unwrap_or(&[]);
        let sig = |slot: Option<u16>| -> u64 { slot.and_then(|k| signals.get(usize::from(k))).map_or(0, |h| h.0) };
        let packets = &mut exec.packets;
        let patches = &mut exec.patches;
        let sites = exec.kernarg.as_mut_slice().get_mut(exec.sites_at..).unwrap_or(&mut []);
        for p in &defaults {
            packets.push(b, device, *p, max_packets)?;
        }
        graph.plan(|step| {
            match step {
                Planned::Wait { slots, barrier } => {
                    let mut deps = [0u64; 5];
                    for (d, s) in deps.iter_mut().zip(slots) {
                        *d = sig(s);
                    }
                    let mut w = BarrierPacket::and(deps, 0);
                    w.header = header(PacketType::BarrierAnd, barrier);
                    packets.push(b, device, raw(&w), max_packets)?;
                }
                Planned::Node { node, kind, barrier, signal } => {
                    let done = sig(signal);
                    let first = packets.len() as u32;
                    if let Some(record) = sites.get_mut(usize::from(node.0)) {
                        let site = match kind {
                            NodeKind::Dispatch(d) => NodeSite {
                                kind: SiteKind::Dispatch,
                                packet: first,
                                arg_offset: d.arg_offset,
                                arg_room: d.arg_len.div_ceil(16).saturating_mul(16),
                            },
                            NodeKind::Host(_) => NodeSite { kind: SiteKind::Host, packet: first, ..NodeSite::NONE },
                            NodeKind::EventRecord(_) | NodeKind::EventWait(_) => {
                                NodeSite { kind: SiteKind::Event, packet: first, ..NodeSite::NONE }
                            }
                            _ => NodeSite { packet: first, ..NodeSite::NONE },
                        };
                        *record = site.to_record();
                    }
                    match kind {
                        NodeKind::Conditional(_) => {
                            let b0 = built.iter().find(|(n, _)| *n == node).map(|(_, b)| *b).unwrap_or_default();
                            for p in entry_packets(scheduler, b0, barrier, done) {
                                packets.push(b, device, p, max_packets)?;
                            }
                        }
                        NodeKind::Empty | NodeKind::EventWait(_) | NodeKind::MemAlloc { .. } | NodeKind::MemFree(_) => {
                            // An event wait's dependency is patched per launch.
                            let mut w = BarrierPacket::and([0; 5], done);
                            w.header = header(PacketType::BarrierAnd, barrier);
                            packets.push(b, device, raw(&w), max_packets)?;
                        }
                        NodeKind::Dispatch(d) => {
                            let address = if d.arg_len > 0 { kernarg + u64::from(d.arg_offset) } else { 0 };
                            let mut p = dispatch_packet(
                                d.kernel_object,
                                d.grid,
                                d.workgroup,
                                d.group_segment_size,
                                d.private_segment_size,
                            );
                            p.header = header(PacketType::KernelDispatch, barrier);
                            p.kernarg_address = address;
                            p.completion_signal = done;
                            packets.push(b, device, raw(&p), max_packets)?;
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
                            packets.push(b, device, raw(&p), max_packets)?;
                        }
                        NodeKind::Host(_) | NodeKind::EventRecord(_) => {
                            // Host: the start marker (completion patched per launch), then the
                            // barrier waiting for the function (dependency patched per launch).
                            // Event record: the packet completing the event's signal (patched),
                            // then the node's own completion.
                            let mut first_p = BarrierPacket::and([0; 5], 0);
                            first_p.header = header(PacketType::BarrierAnd, barrier);
                            packets.push(b, device, raw(&first_p), max_packets)?;
                            let mut second = BarrierPacket::and([0; 5], done);
                            second.header = header(PacketType::BarrierAnd, false);
                            packets.push(b, device, raw(&second), max_packets)?;
                        }
                    }
                    match kind {
                        NodeKind::Host(f) => patches
                            .push(Patch::Host { start: first, done: first + 1, f })
                            .map_err(|_| Error::NotSupported)?,
                        NodeKind::EventRecord(event) => {
                            patches.push(Patch::Event { index: first, event }).map_err(|_| Error::NotSupported)?
                        }
                        NodeKind::EventWait(event) => {
                            patches.push(Patch::EventWait { index: first, event }).map_err(|_| Error::NotSupported)?
                        }
                        _ => {}
                    }
                }
            }
            Ok(())
        })?;
        // The plan's closing barrier is published per launch (it completes the stream's signal).
        exec.packets.pop();
        Ok(())
    }

    /// Ends executable `x` (its launches are done). Its memory and node signals stay with the
    /// slot for the next executable.
    fn release_exec(&self, st: &mut St<C>, x: usize) {
        let Some(e) = st.execs.slots_mut().get_mut(x) else { return };
        let mut cond = core::mem::replace(&mut e.cond, CondParts::new());
        self.release_conditionals(x, &mut cond);
        let Some(e) = st.execs.slots_mut().get_mut(x) else { return };
        e.packets.clear();
        e.kernarg.clear();
        e.sites_at = 0;
        e.used_signals = 0;
        e.busy = None;
        e.state = SlotState::Free;
    }

    pub(super) fn exec_slot(st: &St<C>, x: GraphExecHandle) -> Result<usize> {
        let l = table::lookup(EXEC_TAG, x.0, st.execs.slots(), |e| e.generation);
        table::require(l, Error::InvalidValue, Error::InvalidValue)
    }

    /// Whether the launch recorded in `busy` has completed (progress counts are cumulative per
    /// slot, so a slot reused since still answers).
    pub(super) fn launch_done(&self, busy: Option<(usize, u64)>) -> bool {
        let Some((slot, count)) = busy else { return true };
        self.stream(slot).ok().and_then(|s| s.progress.get()).is_none_or(|p| p.load() <= -(count as i64))
    }

    /// `hipGraphExecDestroy`: a launch still running completes; the resources go after it.
    pub fn graph_exec_destroy(&self, x: GraphExecHandle) -> Result<()> {
        let mut st = self.lock();
        let i = Self::exec_slot(&st, x)?;
        let e = st.execs.slots_mut().get_mut(i).ok_or(Error::InvalidValue)?;
        e.generation.vacate();
        e.state = SlotState::Draining;
        self.reap_execs(&mut st);
        Ok(())
    }

    /// Frees destroyed executables whose launches are done.
    pub(super) fn reap_execs(&self, st: &mut St<C>) {
        for x in 0..st.execs.slots().len() {
            let Some(e) = st.execs.slots().get(x) else { continue };
            if e.state == SlotState::Draining && self.launch_done(e.busy) {
                self.release_exec(st, x);
            }
        }
    }

    // ----- launch --------------------------------------------------------------------------

    /// `hipGraphLaunch`: runs the executable on `s` after the work already there (with the null
    /// stream's implicit synchronisation). An empty graph completes at once.
    pub fn graph_launch(&self, x: GraphExecHandle, s: StreamHandle) -> Result<()> {
        // The executable is checked first.
        Self::exec_slot(&self.lock(), x)?;
        let i = self.resolve(s, Error::ContextIsDestroyed)?;
        let generation = self.generation_of(i);
        let mut st = self.lock();
        let xi = Self::exec_slot(&st, x)?;
        let slot = self.stream(i)?;
        if slot.attrs().detached {
            return Err(Error::StreamDetached);
        }
        if st.execs.slots().get(xi).is_some_and(|e| e.packets.len() == 0) {
            return Ok(());
        }
        self.launch_locked(&mut st, xi, i, generation)
    }

    fn launch_locked(&self, st: &mut St<C>, xi: usize, i: usize, generation: u32) -> Result<()> {
        let previous = st.execs.slots().get(xi).and_then(|e| e.busy);
        // Per-launch patches (event locks before the stream's): host functions get fresh
        // signal pairs, event records their signals.
        let patches = st.execs.slots().get(xi).map(|e| e.patches.clone()).unwrap_or_default();
        let stream_raw = self.handle_of(i).0;
        let mut hosts: heapless::Vec<(usize, LiveSignal, LiveSignal, HostFn), MAX_PATCHES> = heapless::Vec::new();
        let exec = st.execs.slots_mut().get_mut(xi).ok_or(Error::InvalidValue)?;
        for p in &patches {
            match *p {
                Patch::Host { start, done, f } => {
                    let (idx, s0, d0) = self.take_host_signals(i)?;
                    patch_words(exec.packets.as_mut_slice().get_mut(start as usize), 14, s0.handle().0);
                    patch_words(exec.packets.as_mut_slice().get_mut(done as usize), 2, d0.handle().0);
                    let _ = hosts.push((idx, s0, d0, f));
                }
                Patch::Event { index, event } => {
                    let sig = match self.lookup_event(event) {
                        Lookup::Live(ev) => self.events.slots().get(ev).and_then(|slot| {
                            let mut inner = slot.inner.lock();
                            if inner.signal.is_none() {
                                inner.signal = LiveSignal::create(&self.backend, 0).ok();
                            }
                            self.swap_if_pending(&mut inner);
                            inner.recorded = Recorded::On(stream_raw);
                            inner.point = None;
                            let s = inner.signal?;
                            // Ordering: AcqRel; the node's packet takes this back.
                            s.get().value.fetch_add(1, portable_atomic::Ordering::AcqRel);
                            Some(s.handle().0)
                        }),
                        _ => None,
                    };
                    patch_words(exec.packets.as_mut_slice().get_mut(index as usize), 14, sig.unwrap_or(0));
                }
                Patch::EventWait { index, event } => {
                    let sig = match self.lookup_event(event) {
                        Lookup::Live(ev) => self
                            .events
                            .slots()
                            .get(ev)
                            .and_then(|slot| slot.inner.lock().signal)
                            .filter(|s| s.load() > 0)
                            .map(|s| s.handle().0),
                        _ => None,
                    };
                    patch_words(exec.packets.as_mut_slice().get_mut(index as usize), 2, sig.unwrap_or(0));
                }
            }
        }
        let slot = self.stream(i)?;
        let mut inner = slot.inner.lock();
        if !Self::still_live(slot, generation) {
            return Err(Error::ContextIsDestroyed);
        }
        self.check_fault(&inner)?;
        let mut batch = Batch::new();
        self.implicit_deps(i, slot, &mut inner, &mut batch)?;
        // Launches of one executable are ordered (as CUDA orders them): behind the previous one
        // on the same stream by the queue's order, on another stream through its progress.
        if let Some((p, count)) = previous {
            if p != i && !self.launch_done(previous) {
                if let Some(sig) = self.stream(p).ok().and_then(|s| s.progress.get()) {
                    self.flush_if_full(slot, &mut inner, &mut batch)?;
                    batch.push(Spec::Wait(sig.handle(), 1 - count as i64))?;
                }
            }
        }
        // Node signals start at 1, set on the device by write-value dispatches at the start of
        // the launch (in queue order, after the previous launch is done with them), so a launch
        // never waits on the host for an earlier one.
        let exec = st.execs.slots().get(xi).ok_or(Error::InvalidValue)?;
        let used = exec.signals.as_slice().get(..exec.used_signals).unwrap_or(&[]);
        // The done signals of top-level conditional nodes are reset with the node signals.
        let top = exec.cond.top_done.as_slice();
        let object = if !used.is_empty() || !top.is_empty() {
            self.backend.builtin_kernel(exec.device, BuiltinKernel::WriteValue)?
        } else {
            0
        };
        self.publish(slot, &mut inner, batch.as_slice())?;
        for chunk in used.chunks(MAX_BATCH).chain(top.chunks(MAX_BATCH)) {
            // WriteValueArgs { dst: the signal's value (offset 8), value: 1, width: 8 }.
            let mut args = [[0u8; 32]; MAX_BATCH];
            for (a, s) in args.iter_mut().zip(chunk) {
                *a = WriteValueArgs { dst: s.0 + 8, value: 1, width: 8, reserved: 0 }.to_bytes().0;
            }
            let mut writes = Batch::new();
            for a in args.iter().take(chunk.len()) {
                writes.push(Spec::Dispatch(Dispatch::single(object, a.get(..24).unwrap_or(&[]))))?;
            }
            self.publish(slot, &mut inner, writes.as_slice())?;
        }
        // The body, then the closing counted barrier.
        let body = exec.packets.as_slice();
        self.publish_raw(slot, &mut inner, body)?;
        let record = (i, slot.submitted());
        if let Some(e) = st.execs.slots_mut().get_mut(xi) {
            e.busy = Some(record);
            e.launches += 1;
        }
        drop(inner);
        for (idx, start, done, f) in hosts {
            self.release_host_signals(idx, i, record.1);
            if let Err(e) = self.backend.host_call(start.handle(), done.handle(), f) {
                done.get().reset(0);
                return Err(e);
            }
        }
        Ok(())
    }
}

/// Checks a launch's geometry: zero sizes or a work-group over 1024 work-items are
/// `InvalidConfiguration`, a null kernel `InvalidValue`.
pub(super) fn check_launch(k: &KernelLaunch<'_>) -> Result<()> {
    super::submit::check_geometry(k.grid, k.workgroup, k.kernel_object)
}

/// A dispatch node whose arguments are copied into `g`'s arena.
#[allow(clippy::too_many_arguments)]
pub(super) fn dispatch_node<B: Backend>(
    b: &B,
    g: &mut Graph,
    kernel_object: u64,
    grid: [u32; 3],
    workgroup: [u16; 3],
    group_segment_size: u32,
    private_segment_size: u32,
    args: &[u8],
    max_nodes: usize,
) -> Result<DispatchNode> {
    let arg_offset = g.store_args(b, args, max_nodes)?;
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
