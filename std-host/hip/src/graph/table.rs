//! The graph table (docs/hip-semantics.md, "Graphs"): graph handles and what they name (a graph
//! of this layer with what it owns, a view of a graph inside a node, a graph core still holds),
//! node handles as (graph, id), the list conventions of HIP's queries, captures into existing
//! graphs' hold on their target, captured graphs taken over when their capture ends, and graphs
//! built node by node in core.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use aqueduct::GraphHandle;
use aqueduct::{Backend, BuiltinKernel, HostFn};
use aqueduct::{NodeId, NodeKind};

use crate::error::{Hip, HipResult, ILLEGAL_STATE, INVALID_VALUE};
use crate::global::{global, lock, Global};
use crate::{handle, put, Handle};

use super::build::*;
use super::model::*;
use super::ownership::*;

/// A graph of this layer, or a view of a graph inside a node of another: the child graph of a
/// child-graph node (`body` `None`), or body `body` of a conditional node; or a graph core still
/// holds ([`CoreHeld`]: captured, or built node by node).
pub(super) enum Entry {
    /// A graph, the memory it owns (captured allocations, shared with its executable), the
    /// capture recording into it, if one does, and its conditional handles.
    Owned {
        graph: Graph,
        memory: Option<Arc<GraphMemory>>,
        recorder: Option<Recorder>,
        /// The conditional handles made on it or a graph inside it.
        conditions: Conditions,
    },
    Child {
        parent: u64,
        node: u16,
        body: Option<usize>,
        recorder: Option<Recorder>,
    },
    Core(Arc<CoreHeld>),
}

impl Entry {
    pub(super) fn owned(graph: Graph, memory: Option<Arc<GraphMemory>>) -> Entry {
        Entry::Owned { graph, memory, recorder: None, conditions: Conditions::default() }
    }

    /// The capture recording into this graph, if it still does.
    pub(super) fn recorder(&self) -> Option<Recorder> {
        match self {
            Entry::Owned { recorder, .. } | Entry::Child { recorder, .. } => recorder.filter(Recorder::records),
            Entry::Core(_) => None,
        }
    }
}

/// A graph core holds until something needs this layer's model of it: one a capture recorded,
/// or one `hipGraphCreate` made while its nodes are ones core holds as they are
/// ([`add_in_core`]). Instantiating it as it is needs no model, so core instantiates its own
/// graph (the figure `hip_capture_instantiate_per_node`). Only graphs whose nodes this layer
/// would rebuild as they are stay so ([`stays_in_core`], [`held_as_is`]); any other call on the
/// graph table takes every waiting graph over first ([`graphs`]). Executables instantiated from
/// one hold it too, and take their snapshot of it when first asked; core's graph goes with the
/// last holder.
pub(super) struct CoreHeld {
    pub(super) core: GraphHandle,
    pub(super) device: u32,
    /// This layer's model of the graph and, per node, what it is in an executable instantiated
    /// from core's graph directly; built once, on first need.
    pub(super) model: std::sync::OnceLock<HipResult<(Graph, Vec<Site>)>>,
}

impl CoreHeld {
    pub(super) fn model(&self) -> HipResult<&(Graph, Vec<Site>)> {
        let built = self.model.get_or_init(|| captured_model(global()?, self.core, self.device));
        built.as_ref().map_err(|e| *e)
    }
}

// SAFETY: shared, a `CoreHeld` is only read: its model is written once, inside the
// `OnceLock`. The raw pointers in it (host functions' data, as in every `Graph`, which is
// `Send`) are the user's, copied and handed back, never dereferenced here.
unsafe impl Sync for CoreHeld {}

impl Drop for CoreHeld {
    fn drop(&mut self) {
        if let Ok(g) = global() {
            let _ = g.rt.graph_destroy(self.core);
        }
    }
}

#[derive(Default)]
pub(super) struct Graphs {
    pub(super) map: HashMap<u64, Entry>,
    pub(super) next: u64,
    /// The handles of [`Entry::Core`] entries not yet taken over.
    pub(super) waiting: Vec<u64>,
}

/// Tag of graph handles made here (core's use another).
const GRAPH_TAG: u64 = 0x4847 << 48;

impl Graphs {
    pub(super) fn insert(&mut self, g: Graph) -> u64 {
        self.next += 1;
        let h = GRAPH_TAG | self.next;
        self.map.insert(h, Entry::owned(g, None));
        h
    }

    pub(super) fn get(&self, h: u64) -> Option<&Graph> {
        match self.map.get(&h)? {
            Entry::Owned { graph, .. } => Some(graph),
            Entry::Child { parent, node, body, .. } => match (self.get(*parent)?.kind(*node).ok()?, body) {
                (Kind::Child(c), None) => Some(c),
                (Kind::Conditional(c), Some(b)) => c.bodies.get(*b),
                _ => None,
            },
            Entry::Core(_) => None,
        }
    }

    pub(super) fn get_mut(&mut self, h: u64) -> Option<&mut Graph> {
        let mut path = Vec::new();
        let mut root = h;
        while let Entry::Child { parent, node, body, .. } = self.map.get(&root)? {
            path.push((*node, *body));
            root = *parent;
            if path.len() > 64 {
                return None;
            }
        }
        let Entry::Owned { graph: root, .. } = self.map.get_mut(&root)? else { return None };
        let mut g: &mut Graph = root;
        for &(node, body) in path.iter().rev() {
            match (g.kind_mut(node).ok()?, body) {
                (Kind::Child(c), None) => g = &mut **c,
                (Kind::Conditional(c), Some(b)) => g = c.bodies.get_mut(b)?,
                _ => return None,
            }
        }
        Some(g)
    }

    /// The handle of the child graph (`body` `None`) or body of node `node` of graph `parent`.
    pub(super) fn view(&mut self, parent: u64, node: u16, body: Option<usize>) -> u64 {
        let found = self.map.iter().find(
            |(_, e)| matches!(e, Entry::Child { parent: p, node: n, body: b, .. } if *p == parent && *n == node && *b == body),
        );
        if let Some((&h, _)) = found {
            return h;
        }
        self.next += 1;
        let h = GRAPH_TAG | self.next;
        self.map.insert(h, Entry::Child { parent, node, body, recorder: None });
        h
    }
}

// ----- captures into existing graphs ---------------------------------------------------------

/// A capture into an existing graph of this layer (`hipStreamBeginCaptureToGraph`): core
/// records it into a graph of its own whose first `base` nodes are empty stand-ins for the
/// target's node ids `0..base` (so dependencies on the target's nodes are dependencies on
/// them); `hipStreamEndCapture` moves what was captured after them into the target
/// ([`merge_captured`]). The capture keeps it ([`crate::capture`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CaptureInto {
    pub(crate) target: u64,
    pub(crate) base: u16,
}

/// The hold of a capture into an existing graph on its target, kept with the capture: while it
/// lives (and the capture records) the target can be neither destroyed nor recorded into by
/// another capture.
pub(crate) struct TargetLease {
    pub(super) target: u64,
    pub(super) recorder: Recorder,
}

/// Marks graph `target` as recorded into by `recorder`: `hipErrorIllegalState` if another
/// capture records into it, `hipErrorInvalidValue` if it is no graph of this layer.
pub(crate) fn lease_target(target: u64, recorder: Recorder) -> HipResult<TargetLease> {
    let mut graphs = graphs();
    let entry = graphs.map.get_mut(&target).ok_or(INVALID_VALUE)?;
    if entry.recorder().is_some() {
        return Err(ILLEGAL_STATE);
    }
    match entry {
        Entry::Owned { recorder: r, .. } | Entry::Child { recorder: r, .. } => *r = Some(recorder),
        Entry::Core(_) => return Err(INVALID_VALUE),
    }
    Ok(TargetLease { target, recorder })
}

impl Drop for TargetLease {
    fn drop(&mut self) {
        let mut graphs = lock(&GRAPHS);
        if let Some(Entry::Owned { recorder: r, .. } | Entry::Child { recorder: r, .. }) =
            graphs.map.get_mut(&self.target)
        {
            if *r == Some(self.recorder) {
                *r = None;
            }
        }
    }
}

// ----- the graph table ------------------------------------------------------------------------

pub(super) static GRAPHS: LazyLock<Mutex<Graphs>> = LazyLock::new(Default::default);

/// The graph table, every graph waiting in core taken over first (its model built,
/// the same handle then naming an owned graph). Lock order: `GRAPHS`, then core's and the
/// function tables'.
pub(super) fn graphs() -> std::sync::MutexGuard<'static, Graphs> {
    let mut graphs = lock(&GRAPHS);
    for h in std::mem::take(&mut graphs.waiting) {
        let Some(Entry::Core(c)) = graphs.map.get(&h) else { continue };
        // A model that cannot be built leaves the entry in core: only destroying it works.
        if let Ok((model, _)) = c.model() {
            let model = model.clone();
            graphs.map.insert(h, Entry::owned(model, None));
        }
    }
    graphs
}

/// Where graph `h` lives, for the calls that read it without taking it over: core's graph
/// (`Some`) while core holds it — a [`CoreHeld`] one (returned too, so that core's graph lives
/// while it is read) or a capture's (or garbage, which core refuses) — or this layer's (`None`).
pub(super) fn in_core(h: u64) -> Option<(GraphHandle, Option<Arc<CoreHeld>>)> {
    match lock(&GRAPHS).map.get(&h) {
        Some(Entry::Core(c)) => Some((c.core, Some(Arc::clone(c)))),
        Some(_) => None,
        None => Some((GraphHandle(h), None)),
    }
}

/// Whether `h` names a graph of this layer (otherwise it is core's: a capture's, or garbage).
pub(super) fn is_ours(h: u64) -> bool {
    graphs().map.contains_key(&h)
}

pub(super) fn with_graph<R>(h: Handle, f: impl FnOnce(&Graph) -> HipResult<R>) -> HipResult<R> {
    let graphs = graphs();
    f(graphs.get(h as usize as u64).ok_or(INVALID_VALUE)?)
}

pub(super) fn with_graph_mut<R>(h: Handle, f: impl FnOnce(&mut Graph) -> HipResult<R>) -> HipResult<R> {
    let mut graphs = graphs();
    f(graphs.get_mut(h as usize as u64).ok_or(INVALID_VALUE)?)
}

/// The (graph, node id) a node handle names; NULL and garbage are `hipErrorInvalidValue`.
pub(super) fn node_of(g: &Global, node: Handle) -> HipResult<(u64, u16)> {
    lock(&g.nodes).get(node as usize as u64).ok_or(INVALID_VALUE)
}

pub(super) fn node_handle(g: &Global, graph: u64, id: u16) -> Handle {
    handle(lock(&g.nodes).handle(graph, id))
}

/// Reads `count` node handles (NULL with `count` > 0 is `hipErrorInvalidValue`).
///
/// # Safety
/// `list` is NULL or holds `count` handles.
pub(super) unsafe fn handles<'a>(list: *const Handle, count: usize) -> HipResult<&'a [Handle]> {
    if count == 0 {
        return Ok(&[]);
    }
    if list.is_null() {
        return Err(INVALID_VALUE);
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(list, count) })
}

/// Node handles as ids of `graph`: each must be a live node of it, listed once.
pub(super) fn dep_ids(g: &Global, graph: u64, deps: &[Handle], live: impl Fn(u16) -> bool) -> HipResult<Vec<u16>> {
    let mut out = Vec::with_capacity(deps.len());
    for &d in deps {
        let (gh, id) = node_of(g, d)?;
        if gh != graph || !live(id) || out.contains(&id) {
            return Err(INVALID_VALUE);
        }
        out.push(id);
    }
    Ok(out)
}

/// Writes a list under HIP's convention: with `out` NULL, `*count` becomes the length;
/// otherwise up to `*count` items are written, the rest of a longer buffer set to NULL and
/// `*count` lowered to the length.
///
/// # Safety
/// `count` is valid for reads and writes; `out` is NULL or holds `*count` handles.
pub(super) unsafe fn write_list(items: &[Handle], out: *mut Handle, count: *mut usize) -> HipResult {
    if count.is_null() {
        return Err(INVALID_VALUE);
    }
    if out.is_null() {
        // SAFETY: the caller's contract.
        return unsafe { put(count, items.len()) };
    }
    // SAFETY: the caller's contract.
    let room = unsafe { count.read() };
    // SAFETY: the caller's contract: `out` holds `room` handles.
    let slots = unsafe { std::slice::from_raw_parts_mut(out, room) };
    for (i, slot) in slots.iter_mut().enumerate() {
        *slot = items.get(i).copied().unwrap_or(std::ptr::null_mut());
    }
    if room > items.len() {
        // SAFETY: the caller's contract.
        unsafe { put(count, items.len())? };
    }
    Ok(())
}

/// How many node ids graph `h` has given out (its next node's id): `hipErrorInvalidValue` for
/// anything but a graph of this layer.
pub(crate) fn slot_count(h: u64) -> HipResult<u16> {
    with_graph(handle(h), |graph| u16::try_from(graph.nodes.len()).map_err(|_| Hip(2)))
}

/// Whether node `id` of graph `h` lives.
pub(crate) fn is_live_node(h: u64, id: u16) -> bool {
    with_graph(handle(h), |graph| Ok(graph.live(id))).unwrap_or(false)
}

// ----- captured graphs taken over ---------------------------------------------------------------

/// Whether instantiating captured graph `core` as it is gives what instantiating this layer's
/// model of it gives, so that it may stay in core until needed ([`CoreHeld`]): every node a
/// kernel dispatch (not a built-in copy or fill, which the model stages where a side is
/// pageable), a plain host function, an event record or wait, or empty.
fn stays_in_core(g: &Global, core: GraphHandle, device: u32) -> HipResult<bool> {
    let backend = g.rt.backend();
    let builtins = [BuiltinKernel::Copy, BuiltinKernel::Fill].map(|k| backend.builtin_kernel(device, k).ok());
    for i in 0..g.rt.graph_node_count(core)? {
        let id = NodeId(u16::try_from(i).map_err(|_| Hip(2))?);
        let plain = match g.rt.graph_node_kind(core, id)? {
            NodeKind::Dispatch(d) => !builtins.contains(&Some(d.kernel_object)),
            NodeKind::Host(HostFn::Plain { .. }) | NodeKind::EventRecord(_) | NodeKind::EventWait(_) => true,
            NodeKind::Empty => true,
            _ => false,
        };
        if !plain {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Takes over the graph a capture recorded, with the memory of the capture's allocations: the
/// same handle then names a graph of this layer, with the same node ids (so node handles given
/// out during the capture stay valid), owning that memory. A graph that may stay in core does,
/// until needed ([`CoreHeld`]); otherwise its model is built now and core's graph is released.
/// On failure the memory goes back.
pub(crate) fn adopt_captured(g: &Global, core: GraphHandle, memory: Option<GraphMemory>) -> HipResult {
    let device = g.rt.device()?;
    if stays_in_core(g, core, device)? {
        let captured = Arc::new(CoreHeld { core, device, model: std::sync::OnceLock::new() });
        let mut graphs = lock(&GRAPHS);
        graphs.map.insert(core.0, Entry::Core(captured));
        graphs.waiting.push(core.0);
        return Ok(());
    }
    let (graph, _) = captured_model(g, core, device)?;
    g.rt.graph_destroy(core)?;
    graphs().map.insert(core.0, Entry::owned(graph, memory.map(Arc::new)));
    Ok(())
}

/// Moves what a capture into an existing graph recorded into that graph
/// (`hipStreamBeginCaptureToGraph`): core graph `core`'s nodes after the `base` stand-ins
/// become new nodes of the target, edges from a stand-in become edges from the target's node
/// of that id (if it still lives), and node handles given out during the capture name the new
/// nodes. Core's graph is released. Returns the target.
pub(crate) fn merge_captured(g: &Global, core: GraphHandle, into: CaptureInto) -> HipResult<u64> {
    let merged = merge(g, core, into);
    let _ = g.rt.graph_destroy(core);
    merged
}

fn merge(g: &Global, core: GraphHandle, into: CaptureInto) -> HipResult<u64> {
    let device = g.rt.device()?;
    let base = usize::from(into.base);
    let count = g.rt.graph_node_count(core)?;
    let kinds = (base..count)
        .map(|i| captured_kind(g, core, NodeId(u16::try_from(i).map_err(|_| Hip(2))?), device))
        .collect::<HipResult<Vec<_>>>()?;
    let mut edges = vec![(NodeId(0), NodeId(0)); 2 * count + 16];
    let n = g.rt.graph_edges(core, &mut edges)?;
    if n > edges.len() {
        edges.resize(n, (NodeId(0), NodeId(0)));
        g.rt.graph_edges(core, &mut edges)?;
    }
    let mut graphs = graphs();
    let graph = graphs.get_mut(into.target).ok_or(INVALID_VALUE)?;
    let mut ids = Vec::with_capacity(kinds.len());
    for kind in kinds {
        ids.push(graph.push(kind, &[])?);
    }
    for &(from, to) in edges.iter().take(n) {
        let Some(&to) = usize::from(to.0).checked_sub(base).and_then(|k| ids.get(k)) else { continue };
        let from = match usize::from(from.0).checked_sub(base) {
            Some(k) => ids.get(k).copied(),
            None => graph.live(from.0).then_some(from.0),
        };
        if let Some(from) = from {
            graph.edges.push((from, to));
        }
    }
    drop(graphs);
    let mut nodes = lock(&g.nodes);
    for (k, &id) in ids.iter().enumerate() {
        if let Ok(old) = u16::try_from(base + k) {
            nodes.rebind((core.0, old), (into.target, id));
        }
    }
    Ok(into.target)
}

// ----- graphs built node by node in core ----------------------------------------------------------

/// Most graphs that wait in core at once ([`CoreHeld`], captured ones included) for
/// `hipGraphCreate` to make one more there: a quarter of the HIP library's 256 core graph slots
/// (`aqueduct::config::HipScale`), so that captures and instantiations (which build in core
/// graphs of their own) always find slots; beyond them a new graph is this layer's from the
/// start, as every graph was before (docs/hip-semantics.md, "Graphs").
const CORE_BUILT: usize = 64;

/// Most edges one core graph holds (core's limit: twice its most nodes).
const CORE_EDGES: usize = 2 * <aqueduct::config::HipScale as aqueduct::Config>::GRAPH_NODES;

/// `hipGraphCreate`'s graph made in core, if there is room: its handle, held as a captured
/// graph is ([`CoreHeld`]) until a call needs this layer's model of it.
pub(super) fn create_in_core(g: &Global) -> Option<u64> {
    let device = g.rt.device().ok()?;
    let mut graphs = lock(&GRAPHS);
    if graphs.waiting.len() >= CORE_BUILT {
        return None;
    }
    let core = g.rt.graph_create().ok()?;
    graphs.map.insert(core.0, Entry::Core(Arc::new(CoreHeld { core, device, model: std::sync::OnceLock::new() })));
    graphs.waiting.push(core.0);
    Some(core.0)
}

/// Whether core holds node `kind` as it is: reading the node back from core's graph
/// ([`captured_kind`]) gives `kind` again — an empty node, a host function, an event record or
/// wait, or a kernel whose handle is the one core's kernel object maps back to and whose
/// arguments came as the kernel's metadata lays them out (`kernelParams` for a kernel the
/// metadata describes, `extra` for one it does not).
pub(super) fn held_as_is(g: &Global, kind: &Kind) -> bool {
    match kind {
        Kind::Empty | Kind::Host { .. } | Kind::EventRecord(_) | Kind::EventWait(_) => true,
        Kind::Kernel(k) => {
            k.args.extra.is_some() == k.f.args.is_none()
                && crate::launch::handle_of_object(g, k.f.object) == Some(k.func as *const std::ffi::c_void)
        }
        _ => false,
    }
}

/// The core graph of `h` if core holds it and it may still change there: no executable was
/// instantiated from it and its model was never built (both read core's graph as it was), on
/// the calling thread's device.
fn changeable(g: &Global, graphs: &Graphs, h: u64) -> Option<GraphHandle> {
    let Some(Entry::Core(c)) = graphs.map.get(&h) else { return None };
    let alone = Arc::strong_count(c) == 1 && c.model.get().is_none();
    (alone && g.rt.device().ok() == Some(c.device)).then_some(c.core)
}

/// Adds `kind` after `deps` to graph `h` in core, if core holds `h` and the node as they are:
/// the node's id. `None` leaves the call to this layer's model (which takes the graph over
/// first), and so does any failure, so that errors are the model's.
pub(super) fn add_in_core(g: &Global, h: u64, deps: &[Handle], kind: &Kind) -> Option<u16> {
    let graphs = lock(&GRAPHS);
    let core = changeable(g, &graphs, h)?;
    if !held_as_is(g, kind) {
        return None;
    }
    let n = g.rt.graph_node_count(core).ok()?;
    let ids = dep_ids(g, h, deps, |i| usize::from(i) < n).ok()?;
    let ids: Vec<NodeId> = ids.into_iter().map(NodeId).collect();
    let device = g.rt.device().ok()?;
    let mut build = Build { g, core, device, staging: None, bodies: Vec::new(), site: Default::default() };
    let id = build.add(kind, &ids).ok()?;
    drop(graphs);
    Some(id.0)
}

/// Adds the edges `pairs` (checked: same graph, no self-edge) to graph `h` in core, if core
/// holds it, as `hipGraphAddDependencies` does in this layer's model: an unknown node is
/// `hipErrorInvalidValue` with nothing added, an edge that exists already
/// `hipErrorInvalidValue` with the pairs before it added. `None` leaves the call to the model
/// (also when core's edge limit would be reached).
pub(super) fn add_edges_in_core(g: &Global, h: u64, pairs: &[(u16, u16)]) -> Option<HipResult> {
    let graphs = lock(&GRAPHS);
    let core = changeable(g, &graphs, h)?;
    let n = g.rt.graph_node_count(core).ok()?;
    if pairs.iter().any(|&(f, t)| usize::from(f) >= n || usize::from(t) >= n) {
        return Some(Err(INVALID_VALUE));
    }
    let count = g.rt.graph_edges(core, &mut []).ok()?;
    if count + pairs.len() > CORE_EDGES {
        return None;
    }
    let mut edges = vec![(NodeId(0), NodeId(0)); count];
    g.rt.graph_edges(core, &mut edges).ok()?;
    for &(f, t) in pairs {
        let e = (NodeId(f), NodeId(t));
        if edges.contains(&e) {
            return Some(Err(INVALID_VALUE));
        }
        if let Err(err) = g.rt.graph_add_dependencies(core, &[e.0], &[e.1]) {
            return Some(Err(err.into()));
        }
        edges.push(e);
    }
    Some(Ok(()))
}
