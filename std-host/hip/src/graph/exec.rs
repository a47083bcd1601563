//! Executables: instantiate, launch, destroy, whole-graph update, and the patch-or-rebuild of a
//! changed node that `exec_params.rs` uses.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_ulonglong};
use std::sync::{Arc, LazyLock, Mutex};

use aqueduct::GraphExecHandle;

use crate::error::{api, Hip, HipResult, INVALID_VALUE, NOT_SUPPORTED};
use crate::global::{global, lock, Global};
use crate::{handle, put, stream_of, Handle};

use super::build::{instantiate, Instance, Site, Staging};
use super::model::*;
use super::ownership::*;
use super::patch::{differing, same_params, Patched, Target};
use super::table::*;

// ----- executables ----------------------------------------------------------------------------

/// An executable: core's, the snapshot of the graph it was built from (its parameters follow
/// the `hipGraphExec*` calls), what each node became in core's executable, and the staging
/// buffers it owns.
struct Exec {
    core: GraphExecHandle,
    /// The graph it was instantiated from: node handles of that graph name its nodes.
    source: u64,
    graph: Graph,
    /// What each node of `graph` became (by id).
    sites: Vec<Site>,
    /// The device it was built for.
    device: u32,
    flags: u32,
    staging: Staging,
    /// Staging of earlier builds that launches still enqueued may use.
    retired: Vec<Staging>,
    /// Instantiated by core from a graph it held ([`CoreHeld`]): `graph` and `sites`
    /// are that graph's model, taken when first needed ([`Exec::settle`]).
    captured: Option<Arc<CoreHeld>>,
    /// The memory of the graph it was instantiated from, if that graph owns any (one executable
    /// at a time holds it): launches go through core's pools, and the memory goes with the last
    /// of graph and executable.
    memory: Option<Arc<GraphMemory>>,
}

impl Exec {
    fn new(i: Instance, source: u64, graph: Graph, flags: u32) -> Exec {
        let Instance { core, staging, sites, device } = i;
        Exec { core, source, graph, sites, device, flags, staging, retired: Vec::new(), captured: None, memory: None }
    }

    /// Core's executable of graph `c`, which core holds, as it is.
    fn of_core(core: GraphExecHandle, source: u64, c: Arc<CoreHeld>, flags: u32) -> Exec {
        let (graph, sites, device) = (Graph::default(), Vec::new(), c.device);
        Exec {
            core,
            source,
            graph,
            sites,
            device,
            flags,
            staging: Staging::default(),
            retired: Vec::new(),
            captured: Some(c),
            memory: None,
        }
    }

    /// Takes the snapshot of the captured graph the executable was instantiated from, if it has
    /// not yet: what the calls that read or change its nodes work on.
    fn settle(&mut self) -> HipResult {
        if let Some(c) = &self.captured {
            let (graph, sites) = c.model()?;
            (self.graph, self.sites) = (graph.clone(), sites.clone());
            self.captured = None;
        }
        Ok(())
    }

    /// Sets node `id` (of the child graphs along `path`, then of the executable's graph) to
    /// `new` with stamp `stamp`, in place when it keeps its shape; otherwise leaves it to a
    /// rebuild (`Patched::Rebuild`, nothing changed).
    fn patch(&mut self, g: &Global, path: &[u16], id: u16, new: &Kind, stamp: u64) -> HipResult<Patched> {
        let Exec { core, device, staging, sites, graph, .. } = self;
        let site = site_at(sites, path, id);
        let done = Target { g, core: *core, device: *device, staging }.patch(site, new)?;
        if done == Patched::Done {
            set_node(graph, path, id, Some(new), stamp)?;
        }
        Ok(done)
    }
}

/// The site of node `id` of the child graphs along `path`.
fn site_at<'a>(mut sites: &'a [Site], path: &[u16], id: u16) -> &'a Site {
    for &p in path {
        match sites.get(usize::from(p)) {
            Some(Site::Child(inner)) => sites = inner,
            _ => return &Site::None,
        }
    }
    sites.get(usize::from(id)).unwrap_or(&Site::None)
}

/// Sets node `id` of the child graphs along `path` to `new` (if given) and `stamp`. The child
/// nodes along the path get new stamps (their graphs changed).
fn set_node(mut graph: &mut Graph, path: &[u16], id: u16, new: Option<&Kind>, stamp: u64) -> HipResult {
    for &p in path {
        match graph.kind_mut(p)? {
            Kind::Child(c) => graph = &mut **c,
            _ => return Err(INVALID_VALUE),
        }
    }
    let k = graph.kind_mut(id)?;
    if let Some(new) = new {
        *k = new.clone();
    }
    graph.set_stamp(id, stamp);
    Ok(())
}

#[derive(Default)]
struct Execs {
    map: HashMap<u64, Exec>,
    next: u64,
}

/// Tag of executable handles.
const EXEC_TAG: u64 = 0x4858 << 48;

static EXECS: LazyLock<Mutex<Execs>> = LazyLock::new(Default::default);

/// `hipGraphInstantiate`; the error node and log are not produced.
///
/// # Safety
/// `exec` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipGraphInstantiate(
    exec: *mut Handle,
    graph: Handle,
    _error_node: *mut Handle,
    _log: *mut c_char,
    _log_size: usize,
) -> i32 {
    // SAFETY: forwarded caller contract.
    unsafe { hipGraphInstantiateWithFlags(exec, graph, 0) }
}

/// `hipGraphInstantiateWithFlags`: flags 0, `hipGraphInstantiateFlagAutoFreeOnLaunch` or
/// `hipGraphInstantiateFlagUseNodePriority`; a cycle is `hipErrorInvalidValue`.
///
/// # Safety
/// `exec` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipGraphInstantiateWithFlags(exec: *mut Handle, graph: Handle, flags: c_ulonglong) -> i32 {
    api(|| {
        let g = global()?;
        if exec.is_null() || graph.is_null() {
            return Err(INVALID_VALUE);
        }
        let flags = u32::try_from(flags).map_err(|_| INVALID_VALUE)?;
        if flags & !(1 | 8) != 0 {
            return Err(INVALID_VALUE);
        }
        let source = graph as usize as u64;
        // A graph core still holds (captured, or built node by node), on the device it was
        // made on: core's own instantiation of it.
        let captured = match lock(&GRAPHS).map.get(&source) {
            Some(Entry::Core(c)) => Some(Arc::clone(c)),
            _ => None,
        };
        if let Some(c) = captured.filter(|c| g.rt.device().is_ok_and(|d| d == c.device)) {
            let core = g.rt.graph_instantiate_with_flags(c.core, flags)?;
            let mut execs = lock(&EXECS);
            execs.next += 1;
            let h = EXEC_TAG | execs.next;
            execs.map.insert(h, Exec::of_core(core, source, c, flags));
            // SAFETY: the caller's contract.
            return unsafe { put(exec, handle(h)) };
        }
        let (snapshot, memory) = {
            let graphs = graphs();
            let snapshot = graphs.get(source).ok_or(INVALID_VALUE)?.clone();
            let memory = match graphs.map.get(&source) {
                // The entry and an executable hold it: one executable at a time. Taken under the
                // graph table's lock, so two instantiations cannot both take it.
                Some(Entry::Owned { memory: Some(m), .. }) if Arc::strong_count(m) > 1 => return Err(NOT_SUPPORTED),
                Some(Entry::Owned { memory: Some(m), .. }) => Some(Arc::clone(m)),
                _ => None,
            };
            (snapshot, memory)
        };
        let instance = instantiate(g, &snapshot, flags)?;
        let mut execs = lock(&EXECS);
        execs.next += 1;
        let h = EXEC_TAG | execs.next;
        execs.map.insert(h, Exec { memory, ..Exec::new(instance, source, snapshot, flags) });
        // SAFETY: the caller's contract.
        unsafe { put(exec, handle(h)) }
    })
}

/// `hipGraphLaunch`.
#[no_mangle]
pub extern "C" fn hipGraphLaunch(exec: Handle, stream: Handle) -> i32 {
    api(|| {
        let g = global()?;
        let (core, owner, flags) = lock(&EXECS)
            .map
            .get(&(exec as usize as u64))
            .map(|x| (x.core, x.memory.as_ref().map(|m| m.owner()), x.flags))
            .ok_or(INVALID_VALUE)?;
        let s = stream_of(stream);
        if let Some(owner) = owner {
            let auto_free = flags & 1 != 0;
            return Ok(g.pools.graph_launch(&*g.rt, owner, s, auto_free, || g.rt.graph_launch(core, s))?);
        }
        Ok(g.rt.graph_launch(core, s)?)
    })
}

/// Frees staging buffers once the device is idle (launches still enqueued may use them).
fn release_staging(g: &Global, staging: Vec<Staging>) {
    if staging.iter().all(Staging::is_empty) {
        return;
    }
    let _ = g.rt.device_wait_idle();
    for s in staging {
        s.free(g);
    }
}

/// `hipGraphExecDestroy`: launches still running complete; an executable that stages pageable
/// copies waits for the device before its buffers go.
#[no_mangle]
pub extern "C" fn hipGraphExecDestroy(exec: Handle) -> i32 {
    api(|| {
        let g = global()?;
        let x = lock(&EXECS).map.remove(&(exec as usize as u64)).ok_or(INVALID_VALUE)?;
        g.rt.graph_exec_destroy(x.core)?;
        let mut staging = x.retired;
        staging.push(x.staging);
        release_staging(g, staging);
        match x.memory {
            Some(m) => let_go(m),
            None => Ok(()),
        }
    })
}

/// Sets node `node` of executable `exec` (a node of the graph `exec` was instantiated from)
/// to `new`, given by `edit` from the node's current kind (which it checks): patched in place
/// when the node keeps its shape, otherwise the executable is rebuilt.
pub(super) fn edit_exec(exec: Handle, node: Handle, edit: impl FnOnce(&Kind) -> HipResult<Kind>) -> HipResult {
    let g = global()?;
    if exec.is_null() {
        return Err(INVALID_VALUE);
    }
    let (gh, id) = node_of(g, node)?;
    let mut execs = lock(&EXECS);
    let x = execs.map.get_mut(&(exec as usize as u64)).ok_or(INVALID_VALUE)?;
    if gh != x.source {
        return Err(INVALID_VALUE);
    }
    x.settle()?;
    let new = edit(x.graph.kind(id)?)?;
    if let Kind::Child(c) = &new {
        // A child graph of the same shape: its changed nodes one by one.
        let Kind::Child(old) = x.graph.kind(id)? else { return Err(INVALID_VALUE) };
        let pairing = compare(old, c).map_err(|_| INVALID_VALUE)?;
        let mut found = Vec::new();
        changes(old, c, &pairing, &mut vec![id], id, &mut found).map_err(|_| INVALID_VALUE)?;
        return apply(g, x, &found).map_err(|(_, e)| e);
    }
    // A stamp of its own: the node now differs from the graph's.
    match x.patch(g, &[], id, &new, new_stamp())? {
        Patched::Done => Ok(()),
        Patched::Rebuild => {
            let mut graph = x.graph.clone();
            *graph.kind_mut(id)? = new;
            rebuild(g, x, graph)
        }
    }
}

/// Rebuilds `x` from `graph` behind the same handle; on failure `x` is unchanged.
fn rebuild(g: &Global, x: &mut Exec, graph: Graph) -> HipResult {
    let instance = instantiate(g, &graph, x.flags)?;
    let old = std::mem::replace(&mut x.core, instance.core);
    let _ = g.rt.graph_exec_destroy(old);
    x.retired.push(std::mem::replace(&mut x.staging, instance.staging));
    x.sites = instance.sites;
    x.device = instance.device;
    x.graph = graph;
    Ok(())
}

/// A node of the executable's graph (the child-graph nodes leading to its graph, then its id)
/// whose stamp changes: to new parameters (`None`: the same ones, or a child graph whose nodes
/// changed one by one before it), and the top-level node of the new graph holding it
/// (reported when the change fails).
struct Change<'a> {
    path: Vec<u16>,
    id: u16,
    new: Option<&'a Kind>,
    stamp: u64,
    top: u16,
}

/// Collects the nodes of `new` whose stamps differ from those of their pair in `old`: whose
/// parameters changed, or may have (child graphs compared node by node). `path` leads to `old`
/// and `top` is the top-level node of the new graph holding it (unused at the top).
fn changes<'a>(
    old: &Graph,
    new: &'a Graph,
    pairing: &Pairing,
    path: &mut Vec<u16>,
    top: u16,
    out: &mut Vec<Change<'a>>,
) -> Result<(), Mismatch> {
    let at_top = path.is_empty();
    pairing.for_each(old, new, |i, j| {
        let stamp = new.stamp(j);
        if (stamp != 0 && stamp == old.stamp(i)) || !old.live(i) {
            return Ok(());
        }
        let (a, b) =
            (old.kind(i).map_err(|_| (UPDATE_ERROR, Some(j)))?, new.kind(j).map_err(|_| (UPDATE_ERROR, Some(j)))?);
        let top = if at_top { j } else { top };
        let changed = match (a, b) {
            (Kind::Child(x), Kind::Child(y)) => {
                let inner = compare(x, y).map_err(|(r, _)| (r, Some(j)))?;
                path.push(i);
                changes(x, y, &inner, path, top, out)?;
                path.pop();
                None
            }
            _ if same_params(a, b) => None,
            _ => Some(b),
        };
        out.push(Change { path: path.clone(), id: i, new: changed, stamp, top });
        Ok(())
    })
}

/// Makes `changes` in executable `x`: each patched in place, until one cannot be; from there
/// on the executable is rebuilt with the rest. On failure: the `hipGraphExecUpdateResult`,
/// the node of the new graph it failed at, and the error (the changes before it stay made).
fn apply(g: &Global, x: &mut Exec, changes: &[Change]) -> Result<(), (Mismatch, Hip)> {
    for (k, c) in changes.iter().enumerate() {
        let Some(new) = c.new else {
            set_node(&mut x.graph, &c.path, c.id, None, c.stamp).map_err(|e| ((UPDATE_ERROR, None), e))?;
            continue;
        };
        match x.patch(g, &c.path, c.id, new, c.stamp) {
            Ok(Patched::Done) => {}
            Ok(Patched::Rebuild) => {
                let mut graph = x.graph.clone();
                for c in changes.iter().skip(k) {
                    set_node(&mut graph, &c.path, c.id, c.new, c.stamp).map_err(|e| ((UPDATE_ERROR, None), e))?;
                }
                return rebuild(g, x, graph).map_err(|e| ((UPDATE_ERROR, None), e));
            }
            // HIP's answers to a node's SetParams failing during an update.
            Err(e) if e == INVALID_VALUE => return Err(((UPDATE_PARAMETERS_CHANGED, Some(c.top)), e)),
            Err(e) => return Err(((UPDATE_NOT_SUPPORTED, Some(c.top)), e)),
        }
    }
    Ok(())
}

/// `hipGraphExecUpdateResult` values.
const UPDATE_ERROR: c_int = 1;
const UPDATE_TOPOLOGY_CHANGED: c_int = 2;
const UPDATE_NODE_TYPE_CHANGED: c_int = 3;
const UPDATE_PARAMETERS_CHANGED: c_int = 5;
const UPDATE_NOT_SUPPORTED: c_int = 6;

/// How the nodes of two graphs of the same shape pair up.
#[derive(Debug, PartialEq)]
enum Pairing {
    /// Each node with the node of the same id (the graphs have the same ids, edges and
    /// destroyed nodes, and each id has a stamp).
    Same,
    /// `(old id, new id)`, in topological order.
    Pairs(Edges),
}

impl Pairing {
    /// Calls `f(old id, new id)` for every pair whose stamps may differ (for `Same`, the ids
    /// whose stamps do).
    fn for_each<E>(&self, old: &Graph, new: &Graph, mut f: impl FnMut(u16, u16) -> Result<(), E>) -> Result<(), E> {
        match (self, old.stamps(), new.stamps()) {
            (Pairing::Same, Some(a), Some(b)) => differing(a, b, |i| f(i, i)),
            (Pairing::Same, _, _) => (0..old.nodes.len() as u16).try_for_each(|i| f(i, i)),
            (Pairing::Pairs(p), _, _) => p.iter().try_for_each(|&(i, j)| f(i, j)),
        }
    }
}

/// Whether node kinds `a` (old) and `b` (new) may pair in an update: the same type, a copy
/// of the same kind, graph memory at the same place, a child graph of the same shape, a
/// conditional node of the same handle, type and bodies.
fn pairable(a: &Kind, b: &Kind) -> Result<(), c_int> {
    if a.ty() != b.ty() || std::mem::discriminant(a) != std::mem::discriminant(b) {
        return Err(UPDATE_NODE_TYPE_CHANGED);
    }
    match (a, b) {
        (Kind::Copy(x), Kind::Copy(y)) if x.kind != y.kind => Err(UPDATE_PARAMETERS_CHANGED),
        (Kind::MemAlloc { address: x, .. }, Kind::MemAlloc { address: y, .. }) if x != y => Err(UPDATE_NOT_SUPPORTED),
        (Kind::MemFree(x), Kind::MemFree(y)) if x != y => Err(UPDATE_NOT_SUPPORTED),
        (Kind::Child(x), Kind::Child(y)) => compare(x, y).map(|_| ()).map_err(|(r, _)| r),
        (Kind::Conditional(x), Kind::Conditional(y)) => {
            if (x.handle, x.kind, x.bodies.len()) != (y.handle, y.kind, y.bodies.len()) {
                return Err(UPDATE_PARAMETERS_CHANGED);
            }
            x.bodies.iter().zip(&y.bodies).try_for_each(|(bx, by)| compare(bx, by).map(|_| ()).map_err(|(r, _)| r))
        }
        _ => Ok(()),
    }
}

/// Whether two edge lists are equal (branch-free over the pairs, which compiles to vector
/// compares).
fn same_edges(a: &Edges, b: &Edges) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0, |d, (x, y)| d | (x.0 ^ y.0) | (x.1 ^ y.1)) == 0
}

/// Compares graphs for an update, node by node in topological order: a different node count
/// or dependency count is `TopologyChanged`, a different type `NodeTypeChanged`, a copy of
/// another kind or a conditional node of another handle, type or body count
/// `ParametersChanged`, moved graph memory `NotSupported`; child graphs and bodies compare the
/// same way. Graphs with the same
/// ids and edges (an updated graph against the executable built from it, or a clone of it)
/// pair each node with itself, which one scan checks; the topological pairing is needed only
/// when they differ, or to name the first node that does not pair.
fn compare(old: &Graph, new: &Graph) -> Result<Pairing, Mismatch> {
    // Nodes with the same stamp are the same node (or both destroyed); only the others are
    // looked at.
    if let (Some(a), Some(b)) = (old.stamps(), new.stamps()) {
        let pair = |i: u16| match (old.kind(i), new.kind(i)) {
            (Ok(a), Ok(b)) => pairable(a, b),
            _ => Err(UPDATE_TOPOLOGY_CHANGED),
        };
        if a.len() == b.len() && same_edges(&old.edges, &new.edges) && differing(a, b, pair).is_ok() {
            return Ok(Pairing::Same);
        }
    }
    let (Some(a), Some(b)) = (old.order(), new.order()) else { return Err((UPDATE_TOPOLOGY_CHANGED, None)) };
    if a.len() != b.len() {
        return Err((UPDATE_TOPOLOGY_CHANGED, None));
    }
    let indegree = |g: &Graph| {
        let mut d = vec![0usize; g.nodes.len()];
        for &(_, t) in &g.edges {
            d[usize::from(t)] += 1;
        }
        d
    };
    let (da, db) = (indegree(old), indegree(new));
    for (&i, &j) in a.iter().zip(&b) {
        let (ka, kb) =
            (old.kind(i).map_err(|_| (UPDATE_ERROR, Some(j)))?, new.kind(j).map_err(|_| (UPDATE_ERROR, Some(j)))?);
        pairable(ka, kb).map_err(|r| (r, Some(j)))?;
        if da[usize::from(i)] != db[usize::from(j)] {
            return Err((UPDATE_TOPOLOGY_CHANGED, Some(j)));
        }
    }
    Ok(Pairing::Pairs(a.into_iter().zip(b).collect()))
}

/// `hipGraphExecUpdate`: takes the parameters of `graph`'s nodes into the executable, pairing
/// nodes in topological order, and changes only the nodes whose parameters differ — in place
/// where they keep their shape, otherwise by rebuilding the executable. A graph of another
/// shape leaves the executable as it was and answers `hipErrorGraphExecUpdateFailure` with the
/// reason in `*result` and the first offending node of `graph` in `*error_node` (NULL for a
/// count mismatch).
///
/// # Safety
/// `error_node` and `result` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipGraphExecUpdate(
    exec: Handle,
    graph: Handle,
    error_node: *mut Handle,
    result: *mut c_int,
) -> i32 {
    api(|| {
        let g = global()?;
        if exec.is_null() || graph.is_null() || error_node.is_null() || result.is_null() {
            return Err(INVALID_VALUE);
        }
        let gh = graph as usize as u64;
        // Lock order: graphs, then executables.
        let graphs = graphs();
        let new = graphs.get(gh).ok_or(INVALID_VALUE)?;
        let mut execs = lock(&EXECS);
        let x = execs.map.get_mut(&(exec as usize as u64)).ok_or(INVALID_VALUE)?;
        x.settle()?;
        let outcome = compare(&x.graph, new).and_then(|pairing| {
            let mut found = Vec::new();
            changes(&x.graph, new, &pairing, &mut Vec::new(), 0, &mut found)?;
            apply(g, x, &found).map_err(|(m, _)| m)
        });
        let (code, node) = match outcome {
            Ok(()) => (0, None),
            Err((r, j)) => (r, j.map(|j| node_handle(g, gh, j))),
        };
        // SAFETY: the caller's contract; both are non-null.
        unsafe {
            put(result, code)?;
            put(error_node, node.unwrap_or(std::ptr::null_mut()))?;
        }
        if code != 0 {
            return Err(UPDATE_FAILURE);
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::super::model::tests::graph;
    use super::*;

    #[test]
    fn updates_pair_nodes_and_refuse_other_shapes() {
        let a = graph(2, &[(0, 1)]);
        assert_eq!(compare(&a, &graph(2, &[(0, 1)])), Ok(Pairing::Same));
        // The same shape with other ids: paired in topological order.
        let mut c = graph(3, &[(2, 0)]);
        c.nodes[1] = None;
        c.set_stamp(1, 0);
        assert_eq!(compare(&a, &c), Ok(Pairing::Pairs(vec![(0, 2), (1, 0)])));
        assert_eq!(compare(&a, &graph(3, &[(0, 1)])), Err((UPDATE_TOPOLOGY_CHANGED, None)));
        assert_eq!(compare(&a, &graph(2, &[])), Err((UPDATE_TOPOLOGY_CHANGED, Some(1))));
        let mut b = graph(2, &[(0, 1)]);
        b.nodes[1] = Some(Kind::EventRecord(5));
        assert_eq!(compare(&a, &b), Err((UPDATE_NODE_TYPE_CHANGED, Some(1))));
    }
}
