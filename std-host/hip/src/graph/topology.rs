//! A graph's shape (docs/hip-semantics.md, "Graphs"): creating and destroying graphs, clones,
//! node and edge queries, adding and removing dependencies, destroying nodes, node types.

use std::ffi::{c_int, c_uint};

use aqueduct::GraphHandle;
use aqueduct::NodeId;

use crate::error::{api, HipResult, INVALID_VALUE, NOT_SUPPORTED};
use crate::global::{global, lock, Global};
use crate::{handle, put, Handle};

use super::build::*;
use super::model::*;
use super::ownership::*;
use super::table::*;

/// `hipGraphCreate`: `flags` must be 0. The graph is core's while its nodes are ones core holds
/// as they are ([`create_in_core`]).
///
/// # Safety
/// `graph` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipGraphCreate(graph: *mut Handle, flags: c_uint) -> i32 {
    api(|| {
        let g = global()?;
        if graph.is_null() || flags != 0 {
            return Err(INVALID_VALUE);
        }
        // Core's graph while there is room in core (docs/hip-semantics.md, "Graphs").
        let h = match create_in_core(g) {
            Some(h) => h,
            None => graphs().insert(Graph::default()),
        };
        // SAFETY: the caller's contract.
        unsafe { put(graph, handle(h)) }
    })
}

/// `hipGraphDestroy`: NULL, destroyed and garbage graphs are `hipErrorInvalidValue`, and so is
/// a graph a capture still records into or the child graph of a node.
#[no_mangle]
pub extern "C" fn hipGraphDestroy(graph: Handle) -> i32 {
    api(|| {
        let g = global()?;
        let h = graph as usize as u64;
        let mut graphs = lock(&GRAPHS);
        match graphs.map.get(&h) {
            Some(Entry::Core(_)) => {
                let gone = graphs.map.remove(&h);
                graphs.waiting.retain(|&w| w != h);
                drop(graphs);
                drop(gone);
                Ok(())
            }
            Some(e @ Entry::Owned { .. }) if e.recorder().is_some() => Err(INVALID_VALUE),
            Some(Entry::Owned { .. }) => {
                // What it owns (memory, conditional handles' cells) goes with it, outside the lock.
                let gone = graphs.map.remove(&h);
                drop(graphs);
                match gone {
                    Some(Entry::Owned { memory: Some(m), .. }) => let_go(m),
                    _ => Ok(()),
                }
            }
            Some(Entry::Child { .. }) => Err(INVALID_VALUE),
            None => {
                drop(graphs);
                Ok(g.rt.graph_destroy(GraphHandle(h))?)
            }
        }
    })
}

/// `hipGraphClone`: a deep copy (child graphs included) whose nodes keep their ids, so
/// `hipGraphNodeFindInClone` finds them. A graph with memory or conditional nodes is
/// `hipErrorNotSupported` (as in CUDA).
///
/// # Safety
/// `clone` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipGraphClone(clone: *mut Handle, graph: Handle) -> i32 {
    api(|| {
        global()?;
        if clone.is_null() || graph.is_null() {
            return Err(INVALID_VALUE);
        }
        let h = graph as usize as u64;
        let mut graphs = graphs();
        let original = graphs.get(h).ok_or(INVALID_VALUE)?;
        if original.has_memory_nodes() || original.has_conditional_nodes() {
            return Err(NOT_SUPPORTED);
        }
        let mut copy = original.clone();
        copy.origin = h;
        let c = graphs.insert(copy);
        // SAFETY: the caller's contract.
        unsafe { put(clone, handle(c)) }
    })
}

/// `hipGraphNodeFindInClone`: the node of `clone` that `original` became.
///
/// # Safety
/// `node` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipGraphNodeFindInClone(node: *mut Handle, original: Handle, clone: Handle) -> i32 {
    api(|| {
        let g = global()?;
        if node.is_null() || original.is_null() || clone.is_null() {
            return Err(INVALID_VALUE);
        }
        let (gh, id) = node_of(g, original)?;
        let ch = clone as usize as u64;
        let found = {
            let graphs = graphs();
            let c = graphs.get(ch).ok_or(INVALID_VALUE)?;
            c.origin == gh && c.live(id)
        };
        if !found {
            return Err(INVALID_VALUE);
        }
        // SAFETY: the caller's contract.
        unsafe { put(node, node_handle(g, ch, id)) }
    })
}

/// `hipGraphGetNodes`: the nodes in topological order (a cycle is `hipErrorInvalidValue`).
///
/// # Safety
/// `count` is NULL or valid for reads and writes; `nodes` is NULL or holds `*count` handles.
#[no_mangle]
pub unsafe extern "C" fn hipGraphGetNodes(graph: Handle, nodes: *mut Handle, count: *mut usize) -> i32 {
    api(|| {
        let g = global()?;
        if graph.is_null() || count.is_null() {
            return Err(INVALID_VALUE);
        }
        let h = graph as usize as u64;
        let ids: Vec<u16> = match in_core(h) {
            None => with_graph(graph, |gr| gr.order().ok_or(INVALID_VALUE))?,
            // A graph core holds: the order of this layer's lists, over core's edges.
            Some((gh, Some(_held))) => {
                let (nodes, edges) = core_graph(g, gh)?;
                topological(nodes.len(), |_| true, &edges).ok_or(INVALID_VALUE)?
            }
            // A capture's graph: its ids are in topological order.
            Some((gh, None)) => {
                let mut ids = vec![NodeId(0); g.rt.graph_node_count(gh)?];
                let n = g.rt.graph_nodes(gh, &mut ids)?;
                ids.iter().take(n).map(|i| i.0).collect()
            }
        };
        let items: Vec<Handle> = ids.iter().map(|&id| node_handle(g, h, id)).collect();
        // SAFETY: the caller's contract.
        unsafe { write_list(&items, nodes, count) }
    })
}

/// `hipGraphGetRootNodes`: nodes without dependencies, in topological order.
///
/// # Safety
/// As `hipGraphGetNodes`.
#[no_mangle]
pub unsafe extern "C" fn hipGraphGetRootNodes(graph: Handle, nodes: *mut Handle, count: *mut usize) -> i32 {
    api(|| {
        let g = global()?;
        if graph.is_null() || count.is_null() {
            return Err(INVALID_VALUE);
        }
        let h = graph as usize as u64;
        let ids: Vec<u16> = match in_core(h) {
            None => with_graph(graph, |gr| {
                let order = gr.order().unwrap_or_else(|| (0..gr.nodes.len() as u16).filter(|&i| gr.live(i)).collect());
                Ok(order.into_iter().filter(|&i| gr.deps(i).is_empty()).collect())
            })?,
            // Roots come in id order in a topological order too.
            Some((gh, _held)) => {
                let (nodes, edges) = core_graph(g, gh)?;
                let mut has_dep = vec![false; nodes.len()];
                for &(_, t) in &edges {
                    if let Some(d) = has_dep.get_mut(usize::from(t)) {
                        *d = true;
                    }
                }
                nodes.into_iter().filter(|&i| !has_dep.get(usize::from(i)).copied().unwrap_or(false)).collect()
            }
        };
        let items: Vec<Handle> = ids.iter().map(|&id| node_handle(g, h, id)).collect();
        // SAFETY: the caller's contract.
        unsafe { write_list(&items, nodes, count) }
    })
}

/// The node ids and edges of a core graph (a capture's, or one core holds).
pub(super) fn core_graph(g: &Global, gh: GraphHandle) -> HipResult<(Vec<u16>, Edges)> {
    let n = g.rt.graph_node_count(gh)?;
    let mut edges = vec![(NodeId(0), NodeId(0)); g.rt.graph_edges(gh, &mut [])?];
    let e = g.rt.graph_edges(gh, &mut edges)?.min(edges.len());
    Ok(((0..n as u16).collect(), edges.iter().take(e).map(|(f, t)| (f.0, t.0)).collect()))
}

/// `hipGraphGetEdges`: `from` and `to` both NULL (the count) or both lists.
///
/// # Safety
/// `count` is NULL or valid for reads and writes; `from` and `to` are NULL or hold `*count`
/// handles each.
#[no_mangle]
pub unsafe extern "C" fn hipGraphGetEdges(graph: Handle, from: *mut Handle, to: *mut Handle, count: *mut usize) -> i32 {
    api(|| {
        let g = global()?;
        if graph.is_null() || count.is_null() || from.is_null() != to.is_null() {
            return Err(INVALID_VALUE);
        }
        let h = graph as usize as u64;
        let edges = match in_core(h) {
            None => with_graph(graph, |gr| Ok(gr.edges.clone()))?,
            Some((gh, _held)) => core_graph(g, gh)?.1,
        };
        let froms: Vec<Handle> = edges.iter().map(|e| node_handle(g, h, e.0)).collect();
        let tos: Vec<Handle> = edges.iter().map(|e| node_handle(g, h, e.1)).collect();
        if from.is_null() {
            // SAFETY: the caller's contract.
            return unsafe { put(count, edges.len()) };
        }
        // SAFETY: the caller's contract; `*count` is read before either list is written.
        let room = unsafe { count.read() };
        // SAFETY: as above; each list holds `room` handles.
        unsafe {
            write_list(&froms, from, count)?;
            put(count, room)?;
            write_list(&tos, to, count)
        }
    })
}

/// The dependencies (`incoming`) or dependents of a node.
///
/// # Safety
/// As `hipGraphGetNodes`.
pub(super) unsafe fn neighbours(node: Handle, out: *mut Handle, count: *mut usize, incoming: bool) -> HipResult {
    let g = global()?;
    if count.is_null() {
        return Err(INVALID_VALUE);
    }
    let (gh, id) = node_of(g, node)?;
    let ids = if let Some((core, _held)) = in_core(gh) {
        let (_, edges) = core_graph(g, core)?;
        if incoming {
            edges.iter().filter(|e| e.1 == id).map(|e| e.0).collect()
        } else {
            edges.iter().filter(|e| e.0 == id).map(|e| e.1).collect()
        }
    } else {
        let graphs = graphs();
        let gr = graphs.get(gh).ok_or(INVALID_VALUE)?;
        gr.kind(id)?;
        if incoming {
            gr.deps(id)
        } else {
            gr.dependents(id)
        }
    };
    let items: Vec<Handle> = ids.iter().map(|&i| node_handle(g, gh, i)).collect();
    // SAFETY: the caller's contract.
    unsafe { write_list(&items, out, count) }
}

/// `hipGraphNodeGetDependencies`.
///
/// # Safety
/// As `hipGraphGetNodes`.
#[no_mangle]
pub unsafe extern "C" fn hipGraphNodeGetDependencies(node: Handle, deps: *mut Handle, count: *mut usize) -> i32 {
    // SAFETY: forwarded caller contract.
    api(|| unsafe { neighbours(node, deps, count, true) })
}

/// `hipGraphNodeGetDependentNodes`.
///
/// # Safety
/// As `hipGraphGetNodes`.
#[no_mangle]
pub unsafe extern "C" fn hipGraphNodeGetDependentNodes(node: Handle, deps: *mut Handle, count: *mut usize) -> i32 {
    // SAFETY: forwarded caller contract.
    api(|| unsafe { neighbours(node, deps, count, false) })
}

/// `hipGraphAddDependencies`: `to[k]` runs after `from[k]`. Every pair is checked first (NULL,
/// a self-edge, a node of another graph: `hipErrorInvalidValue`, nothing added); then an edge
/// that exists already is `hipErrorInvalidValue`, the pairs before it staying added.
///
/// # Safety
/// `from` and `to` are NULL or hold `count` handles each.
#[no_mangle]
pub unsafe extern "C" fn hipGraphAddDependencies(
    graph: Handle,
    from: *const Handle,
    to: *const Handle,
    count: usize,
) -> i32 {
    api(|| {
        let g = global()?;
        if graph.is_null() {
            return Err(INVALID_VALUE);
        }
        if count == 0 {
            return Ok(());
        }
        // SAFETY: the caller's contract.
        let (from, to) = unsafe { (handles(from, count)?, handles(to, count)?) };
        let h = graph as usize as u64;
        let mut pairs = Vec::with_capacity(count);
        for (&f, &t) in from.iter().zip(to) {
            let ((fg, fi), (tg, ti)) = (node_of(g, f)?, node_of(g, t)?);
            if fg != h || tg != h || fi == ti {
                return Err(INVALID_VALUE);
            }
            pairs.push((fi, ti));
        }
        if let Some(added) = add_edges_in_core(g, h, &pairs) {
            return added;
        }
        if !is_ours(h) {
            let (f, t): (Vec<NodeId>, Vec<NodeId>) = pairs.iter().map(|&(f, t)| (NodeId(f), NodeId(t))).unzip();
            return Ok(g.rt.graph_add_dependencies(GraphHandle(h), &f, &t)?);
        }
        with_graph_mut(graph, |gr| {
            if pairs.iter().any(|&(f, t)| !gr.live(f) || !gr.live(t)) {
                return Err(INVALID_VALUE);
            }
            for p in pairs {
                if gr.edges.contains(&p) {
                    return Err(INVALID_VALUE);
                }
                gr.edges.push(p);
            }
            Ok(())
        })
    })
}

/// `hipGraphRemoveDependencies`: a pair that is no edge of the graph is `hipErrorInvalidValue`
/// (the pairs before it stay removed).
///
/// # Safety
/// `from` and `to` are NULL or hold `count` handles each.
#[no_mangle]
pub unsafe extern "C" fn hipGraphRemoveDependencies(
    graph: Handle,
    from: *const Handle,
    to: *const Handle,
    count: usize,
) -> i32 {
    api(|| {
        let g = global()?;
        if graph.is_null() {
            return Err(INVALID_VALUE);
        }
        // SAFETY: the caller's contract.
        let (from, to) = unsafe { (handles(from, count)?, handles(to, count)?) };
        let h = graph as usize as u64;
        if count > 0 && !is_ours(h) {
            return Err(NOT_SUPPORTED);
        }
        let mut pairs = Vec::with_capacity(count);
        for (&f, &t) in from.iter().zip(to) {
            let ((fg, fi), (tg, ti)) = (node_of(g, f)?, node_of(g, t)?);
            pairs.push((fg == h && tg == h).then_some((fi, ti)));
        }
        with_graph_mut(graph, |gr| {
            for p in pairs {
                let p = p.ok_or(INVALID_VALUE)?;
                let at = gr.edges.iter().position(|&e| e == p).ok_or(INVALID_VALUE)?;
                gr.edges.remove(at);
            }
            Ok(())
        })
    })
}

/// `hipGraphDestroyNode`: the node goes with its edges.
#[no_mangle]
pub extern "C" fn hipGraphDestroyNode(node: Handle) -> i32 {
    api(|| {
        let g = global()?;
        let (gh, id) = node_of(g, node)?;
        if !is_ours(gh) {
            return Err(NOT_SUPPORTED);
        }
        let mut graphs = graphs();
        let gr = graphs.get_mut(gh).ok_or(INVALID_VALUE)?;
        if matches!(gr.kind(id)?, Kind::MemAlloc { .. } | Kind::MemFree(_)) {
            return Err(NOT_SUPPORTED);
        }
        gr.nodes[usize::from(id)] = None;
        gr.set_stamp(id, 0);
        gr.edges.retain(|e| e.0 != id && e.1 != id);
        Ok(())
    })
}

/// `hipGraphNodeGetType` (HIP 5.2's numbering). A captured operation HIP has no node type for
/// (a wait on or write of a value) is `hipErrorNotSupported`.
///
/// # Safety
/// `ty` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipGraphNodeGetType(node: Handle, ty: *mut c_int) -> i32 {
    api(|| {
        let g = global()?;
        if ty.is_null() {
            return Err(INVALID_VALUE);
        }
        let (gh, id) = node_of(g, node)?;
        let t = match in_core(gh) {
            None => with_graph(gh as usize as Handle, |gr| Ok(gr.kind(id)?.ty()))?,
            Some((core, held)) => {
                let device = held.as_ref().map_or_else(|| g.rt.device(), |c| Ok(c.device))?;
                captured_kind(g, core, NodeId(id), device)?.ty()
            }
        };
        // SAFETY: the caller's contract.
        unsafe { put(ty, t.ok_or(NOT_SUPPORTED)?) }
    })
}
