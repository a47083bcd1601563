//! Executables: instantiate, launch, destroy, per-node parameters, whole-graph update.

use super::build::{instantiate, Staging};
use super::*;

// ----- executables ----------------------------------------------------------------------------

/// An executable: core's, the snapshot of the graph it was built from (edited by the
/// `hipGraphExec*` calls, then rebuilt), and the staging buffers it owns.
struct Exec {
    core: GraphExecHandle,
    /// The graph it was instantiated from: node handles of that graph name its nodes.
    source: u64,
    graph: Graph,
    flags: u32,
    staging: Staging,
    /// Staging of earlier builds that launches still enqueued may use.
    retired: Vec<Staging>,
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
        let snapshot = with_graph(graph, |gr| Ok(gr.clone()))?;
        let mut owners = lock(&MEM_OWNERS);
        if owners.get(&source).is_some_and(|o| o.exec.is_some()) {
            return Err(NOT_SUPPORTED);
        }
        let (core, staging) = instantiate(g, &snapshot, flags)?;
        let mut execs = lock(&EXECS);
        execs.next += 1;
        let h = EXEC_TAG | execs.next;
        if let Some(o) = owners.get_mut(&source) {
            o.exec = Some(h);
        }
        execs.map.insert(h, Exec { core, source, graph: snapshot, flags, staging, retired: Vec::new() });
        // SAFETY: the caller's contract.
        unsafe { put(exec, handle(h)) }
    })
}

/// `hipGraphLaunch`.
#[no_mangle]
pub extern "C" fn hipGraphLaunch(exec: Handle, stream: Handle) -> i32 {
    api(|| {
        let g = global()?;
        let (core, source, flags) =
            lock(&EXECS).map.get(&(exec as usize as u64)).map(|x| (x.core, x.source, x.flags)).ok_or(INVALID_VALUE)?;
        let s = stream_of(stream);
        if lock(&MEM_OWNERS).contains_key(&source) {
            let auto_free = flags & 1 != 0;
            return Ok(g.pools.graph_launch(&*g.rt, source, s, auto_free, || g.rt.graph_launch(core, s))?);
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
        if lock(&MEM_OWNERS).get(&x.source).is_some_and(|o| o.exec == Some(exec as usize as u64)) {
            owner_gone(g, x.source, false)?;
        }
        Ok(())
    })
}

/// Edits node `node` of executable `exec` with `edit` (given the node's kind), then rebuilds
/// the executable. The node must be a node of the graph `exec` was instantiated from.
fn edit_exec(exec: Handle, node: Handle, edit: impl FnOnce(&mut Kind) -> HipResult) -> HipResult {
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
    let mut graph = x.graph.clone();
    edit(graph.kind_mut(id)?)?;
    rebuild(g, x, graph)
}

/// Rebuilds `x` from `graph` behind the same handle; on failure `x` is unchanged.
fn rebuild(g: &Global, x: &mut Exec, graph: Graph) -> HipResult {
    let (core, staging) = instantiate(g, &graph, x.flags)?;
    let old = std::mem::replace(&mut x.core, core);
    let _ = g.rt.graph_exec_destroy(old);
    x.retired.push(std::mem::replace(&mut x.staging, staging));
    x.graph = graph;
    Ok(())
}

/// `hipGraphExecKernelNodeSetParams`.
///
/// # Safety
/// `p` is NULL or valid, its argument lists as `hipModuleLaunchKernel`'s.
#[no_mangle]
pub unsafe extern "C" fn hipGraphExecKernelNodeSetParams(
    exec: Handle,
    node: Handle,
    p: *const KernelNodeParams,
) -> i32 {
    api(|| {
        let new = kernel_kind(p)?;
        edit_exec(exec, node, |k| match k {
            Kind::Kernel(_) => {
                *k = new;
                Ok(())
            }
            _ => Err(INVALID_VALUE),
        })
    })
}

fn exec_set_copy(exec: Handle, node: Handle, new: HipResult<Kind>) -> HipResult {
    let new = new?;
    edit_exec(exec, node, |k| match k {
        Kind::Copy(_) => {
            *k = new;
            Ok(())
        }
        _ => Err(INVALID_VALUE),
    })
}

/// `hipGraphExecMemcpyNodeSetParams`.
///
/// # Safety
/// `p` is NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn hipGraphExecMemcpyNodeSetParams(exec: Handle, node: Handle, p: *mut Memcpy3DParms) -> i32 {
    api(|| exec_set_copy(exec, node, copy_3d(p)))
}

/// `hipGraphExecMemcpyNodeSetParams1D`.
///
/// # Safety
/// `dst` and `src` stay valid for `bytes` bytes while the executable can run.
#[no_mangle]
pub unsafe extern "C" fn hipGraphExecMemcpyNodeSetParams1D(
    exec: Handle,
    node: Handle,
    dst: *mut c_void,
    src: *const c_void,
    bytes: usize,
    kind: c_uint,
) -> i32 {
    api(|| exec_set_copy(exec, node, copy_1d(global()?, dst as usize as u64, src as usize as u64, bytes, kind)))
}

/// `hipGraphExecMemcpyNodeSetParamsFromSymbol`.
///
/// # Safety
/// As `hipGraphExecMemcpyNodeSetParams1D`.
#[no_mangle]
pub unsafe extern "C" fn hipGraphExecMemcpyNodeSetParamsFromSymbol(
    exec: Handle,
    node: Handle,
    dst: *mut c_void,
    symbol: *const c_void,
    bytes: usize,
    offset: usize,
    kind: c_uint,
) -> i32 {
    api(|| exec_set_copy(exec, node, from_symbol(global()?, dst, symbol, bytes, offset, kind)))
}

/// `hipGraphExecMemcpyNodeSetParamsToSymbol`.
///
/// # Safety
/// As `hipGraphExecMemcpyNodeSetParams1D`.
#[no_mangle]
pub unsafe extern "C" fn hipGraphExecMemcpyNodeSetParamsToSymbol(
    exec: Handle,
    node: Handle,
    symbol: *const c_void,
    src: *const c_void,
    bytes: usize,
    offset: usize,
    kind: c_uint,
) -> i32 {
    api(|| exec_set_copy(exec, node, to_symbol(global()?, symbol, src, bytes, offset, kind)))
}

/// `hipGraphExecMemsetNodeSetParams`.
///
/// # Safety
/// `p` is NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn hipGraphExecMemsetNodeSetParams(exec: Handle, node: Handle, p: *const MemsetParams) -> i32 {
    api(|| {
        let new = memset_kind(global()?, p)?;
        edit_exec(exec, node, |k| match k {
            Kind::Memset(_) => {
                *k = new;
                Ok(())
            }
            _ => Err(INVALID_VALUE),
        })
    })
}

/// `hipGraphExecHostNodeSetParams`.
///
/// # Safety
/// `p` is NULL or valid; the function and its data stay valid while the executable can run.
#[no_mangle]
pub unsafe extern "C" fn hipGraphExecHostNodeSetParams(exec: Handle, node: Handle, p: *const HostNodeParams) -> i32 {
    api(|| {
        let new = host_kind(p)?;
        edit_exec(exec, node, |k| match k {
            Kind::Host { .. } => {
                *k = new;
                Ok(())
            }
            _ => Err(INVALID_VALUE),
        })
    })
}

/// `hipGraphExecChildGraphNodeSetParams`: the new child must have the old one's shape (node
/// types pairwise in topological order, and the same edges).
#[no_mangle]
pub extern "C" fn hipGraphExecChildGraphNodeSetParams(exec: Handle, node: Handle, child: Handle) -> i32 {
    api(|| {
        let Kind::Child(new) = child_kind(child)? else { return Err(INVALID_VALUE) };
        edit_exec(exec, node, |k| match k {
            Kind::Child(old) => {
                compare(old, &new).map_err(|_| INVALID_VALUE)?;
                *old = new;
                Ok(())
            }
            _ => Err(INVALID_VALUE),
        })
    })
}

fn exec_set_event(exec: Handle, node: Handle, event: Handle, record: bool) -> HipResult {
    let e = event_of(global()?, event)?;
    edit_exec(exec, node, |k| match (k, record) {
        (Kind::EventRecord(old), true) | (Kind::EventWait(old), false) => {
            *old = e;
            Ok(())
        }
        _ => Err(INVALID_VALUE),
    })
}

/// `hipGraphExecEventRecordNodeSetEvent`.
#[no_mangle]
pub extern "C" fn hipGraphExecEventRecordNodeSetEvent(exec: Handle, node: Handle, event: Handle) -> i32 {
    api(|| exec_set_event(exec, node, event, true))
}

/// `hipGraphExecEventWaitNodeSetEvent`.
#[no_mangle]
pub extern "C" fn hipGraphExecEventWaitNodeSetEvent(exec: Handle, node: Handle, event: Handle) -> i32 {
    api(|| exec_set_event(exec, node, event, false))
}

/// `hipGraphExecUpdateResult` values.
const UPDATE_TOPOLOGY_CHANGED: c_int = 2;
const UPDATE_NODE_TYPE_CHANGED: c_int = 3;
const UPDATE_PARAMETERS_CHANGED: c_int = 5;
const UPDATE_NOT_SUPPORTED: c_int = 6;

/// Compares graphs for an update, node by node in topological order: a different node count
/// or dependency count is `TopologyChanged`, a different type `NodeTypeChanged`, a copy of
/// another kind or a conditional node of another handle, type or body count
/// `ParametersChanged`; child graphs and bodies compare the same way. On success, the pairs
/// (old id, new id).
fn compare(old: &Graph, new: &Graph) -> Result<Edges, Mismatch> {
    let (Some(a), Some(b)) = (old.order(), new.order()) else { return Err((UPDATE_TOPOLOGY_CHANGED, None)) };
    if a.len() != b.len() {
        return Err((UPDATE_TOPOLOGY_CHANGED, None));
    }
    for (&i, &j) in a.iter().zip(&b) {
        let (ka, kb) = (old.kind(i).map_err(|_| (1, Some(j)))?, new.kind(j).map_err(|_| (1, Some(j)))?);
        if ka.ty() != kb.ty() || std::mem::discriminant(ka) != std::mem::discriminant(kb) {
            return Err((UPDATE_NODE_TYPE_CHANGED, Some(j)));
        }
        if let (Kind::Copy(x), Kind::Copy(y)) = (ka, kb) {
            if x.kind != y.kind {
                return Err((UPDATE_PARAMETERS_CHANGED, Some(j)));
            }
        }
        let moved = match (ka, kb) {
            (Kind::MemAlloc { address: x, .. }, Kind::MemAlloc { address: y, .. }) => x != y,
            (Kind::MemFree(x), Kind::MemFree(y)) => x != y,
            _ => false,
        };
        if moved {
            return Err((UPDATE_NOT_SUPPORTED, Some(j)));
        }
        if let (Kind::Child(x), Kind::Child(y)) = (ka, kb) {
            compare(x, y).map_err(|(r, _)| (r, Some(j)))?;
        }
        if let (Kind::Conditional(x), Kind::Conditional(y)) = (ka, kb) {
            if (x.handle, x.kind, x.bodies.len()) != (y.handle, y.kind, y.bodies.len()) {
                return Err((UPDATE_PARAMETERS_CHANGED, Some(j)));
            }
            for (bx, by) in x.bodies.iter().zip(&y.bodies) {
                compare(bx, by).map_err(|(r, _)| (r, Some(j)))?;
            }
        }
        if old.deps(i).len() != new.deps(j).len() {
            return Err((UPDATE_TOPOLOGY_CHANGED, Some(j)));
        }
    }
    Ok(a.into_iter().zip(b).collect())
}

/// `hipGraphExecUpdate`: takes the parameters of `graph`'s nodes into the executable, pairing
/// nodes in topological order. A graph of another shape leaves the executable as it was and
/// answers `hipErrorGraphExecUpdateFailure` with the reason in `*result` and the first
/// offending node of `graph` in `*error_node` (NULL for a count mismatch).
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
        let new = with_graph(graph, |gr| Ok(gr.clone()))?;
        let mut execs = lock(&EXECS);
        let x = execs.map.get_mut(&(exec as usize as u64)).ok_or(INVALID_VALUE)?;
        let outcome = compare(&x.graph, &new).map_err(|(r, j)| (r, j.map(|j| node_handle(g, gh, j))));
        let (code, node) = match outcome {
            Ok(pairs) => {
                let mut updated = x.graph.clone();
                for (i, j) in pairs {
                    *updated.kind_mut(i)? = new.kind(j)?.clone();
                }
                match rebuild(g, x, updated) {
                    Ok(()) => (0, None),
                    Err(_) => (1, None),
                }
            }
            Err((r, n)) => (r, n),
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
    use super::*;

    fn graph(n: usize, edges: &[(u16, u16)]) -> Graph {
        Graph { nodes: (0..n).map(|_| Some(Kind::Empty)).collect(), edges: edges.to_vec(), origin: 0 }
    }

    #[test]
    fn updates_pair_nodes_and_refuse_other_shapes() {
        let a = graph(2, &[(0, 1)]);
        assert_eq!(compare(&a, &graph(2, &[(0, 1)])), Ok(vec![(0, 0), (1, 1)]));
        assert_eq!(compare(&a, &graph(3, &[(0, 1)])), Err((UPDATE_TOPOLOGY_CHANGED, None)));
        assert_eq!(compare(&a, &graph(2, &[])), Err((UPDATE_TOPOLOGY_CHANGED, Some(1))));
        let mut b = graph(2, &[(0, 1)]);
        b.nodes[1] = Some(Kind::EventRecord(5));
        assert_eq!(compare(&a, &b), Err((UPDATE_NODE_TYPE_CHANGED, Some(1))));
    }
}
