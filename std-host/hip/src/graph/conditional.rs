//! Conditional nodes (docs/conditional-graphs.md, "The C ABI"): handles and `hipGraphAddNode`
//! (every node kind; the one way to add a conditional node). The node itself is in `model.rs`,
//! the flattening of its bodies into core graphs at instantiation in `build.rs`.
//!
//! # Handles and their cells
//!
//! A handle is core's: the device address of a cell core allocates for a core graph and frees
//! with its last owner (docs/conditional-graphs.md, "Semantics"). Graphs of this layer are not
//! core's, so each root graph that creates handles gets an *owner*: a core graph made on the
//! first `hipGraphConditionalHandleCreate` of the root or of a graph inside it, which creates
//! every handle of that tree and so owns their cells. The root's table entry holds the owner
//! and the handles made in its tree ([`Conditions`]) until `hipGraphDestroy`, and every
//! conditional node holds the owner too, so the graphs and executables
//! (whose snapshots hold the nodes) that can still use a cell keep it.
//!
//! At instantiation each conditional node is added to the temporary core graph of the build with
//! its bodies flattened into core graphs of their own. Core lets a handle serve one core node;
//! this layer keeps that rule for its own graphs (a handle serves one node of the tree) and
//! clears core's mark before each build, since every build makes a new core node for the same
//! HIP node.

use std::ffi::{c_int, c_uint, c_ulonglong};
use std::sync::Arc;

use aqueduct::conditional::{ConditionalHandle, ConditionalKind, COND_ASSIGN_DEFAULT, MAX_BODIES};
use aqueduct::GraphHandle;

use crate::error::{api, Hip, HipResult, INVALID_VALUE, NOT_SUPPORTED};
use crate::global::{global, Global};
use crate::pitched::Memcpy3DParms;
use crate::{put, Handle};

use super::model::*;
use super::nodes::*;
use super::table::*;

// ----- C structs --------------------------------------------------------------------------------

/// `hipConditionalNodeParams` (CUDA 12's `cudaConditionalNodeParams`, 24 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ConditionalNodeParams {
    handle: c_ulonglong,
    ty: c_uint,
    size: c_uint,
    graphs_out: *mut Handle,
}

/// `hipMemcpyNodeParams`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MemcpyNodeParams {
    flags: c_int,
    reserved: [c_int; 3],
    copy: Memcpy3DParms,
}

/// The union of `hipGraphNodeParams` (232 bytes); the members this layer reads. The child-graph
/// and event members are one handle each.
#[repr(C)]
#[derive(Clone, Copy)]
pub union NodeParamsUnion {
    reserved: [i64; 29],
    kernel: KernelNodeParams,
    memcpy: MemcpyNodeParams,
    memset: MemsetParams,
    host: HostNodeParams,
    handle: Handle,
    conditional: ConditionalNodeParams,
}

/// `hipGraphNodeParams` (CUDA's and newer HIP's layout, 256 bytes).
#[repr(C)]
pub struct GraphNodeParams {
    ty: c_int,
    reserved0: [c_int; 3],
    params: NodeParamsUnion,
    reserved2: i64,
}

const _: () = assert!(size_of::<ConditionalNodeParams>() == 24);
const _: () = assert!(std::mem::offset_of!(ConditionalNodeParams, graphs_out) == 16);
const _: () = assert!(size_of::<MemcpyNodeParams>() == 176);
const _: () = assert!(size_of::<NodeParamsUnion>() == 232);
const _: () = assert!(std::mem::offset_of!(GraphNodeParams, params) == 16);
const _: () = assert!(std::mem::offset_of!(GraphNodeParams, reserved2) == 248);
const _: () = assert!(size_of::<GraphNodeParams>() == 256);

// ----- the model ----------------------------------------------------------------------------------

impl Graph {
    /// Whether a conditional node in the graph, its child graphs or its bodies uses `handle`.
    fn uses_handle(&self, handle: u64) -> bool {
        self.nodes.iter().flatten().any(|k| match k {
            Kind::Conditional(c) => c.handle == handle || c.bodies.iter().any(|b| b.uses_handle(handle)),
            Kind::Child(c) => c.uses_handle(handle),
            _ => false,
        })
    }
}

impl Graphs {
    /// The conditional handles of root graph `root`.
    fn conditions(&mut self, root: u64) -> Option<&mut Conditions> {
        match self.map.get_mut(&root)? {
            Entry::Owned { conditions, .. } => Some(conditions),
            _ => None,
        }
    }

    /// Graph `h` and the graphs it lies in, up to its root (last); `None` if `h` is no live
    /// graph of this layer.
    fn lineage(&self, h: u64) -> Option<Vec<u64>> {
        self.get(h)?;
        let mut out = vec![h];
        let mut at = h;
        while let Entry::Child { parent, .. } = self.map.get(&at)? {
            at = *parent;
            out.push(at);
            if out.len() > 64 {
                return None;
            }
        }
        Some(out)
    }
}

/// A graph handle that is no graph of this layer: `hipErrorNotSupported` for a graph a capture
/// records into (conditional nodes are not captured), `hipErrorInvalidValue` otherwise.
fn not_ours(g: &Global, h: u64) -> Hip {
    if g.rt.graph_node_count(GraphHandle(h)).is_ok() {
        NOT_SUPPORTED
    } else {
        INVALID_VALUE
    }
}

// ----- the C ABI --------------------------------------------------------------------------------

/// `hipGraphConditionalHandleCreate`: a handle on `graph` (the graph that will hold its node, or
/// one that graph lies in) whose value starts at `default`; `flags` 0 or
/// `hipGraphCondAssignDefault`. A tree of graphs holds at most 16 handles
/// (`hipErrorOutOfMemory` past that).
///
/// # Safety
/// `out` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipGraphConditionalHandleCreate(
    out: *mut c_ulonglong,
    graph: Handle,
    default: c_uint,
    flags: c_uint,
) -> i32 {
    api(|| {
        let g = global()?;
        if out.is_null() || graph.is_null() || flags & !COND_ASSIGN_DEFAULT != 0 {
            return Err(INVALID_VALUE);
        }
        let h = graph as usize as u64;
        let mut graphs = graphs();
        let Some(&root) = graphs.lineage(h).as_ref().and_then(|l| l.last()) else {
            drop(graphs);
            return Err(not_ours(g, h));
        };
        let conds = graphs.conditions(root).ok_or(INVALID_VALUE)?;
        let owner = match &conds.owner {
            Some(o) => o.0,
            None => conds.owner.insert(Arc::new(Owner(g.rt.graph_create()?))).0,
        };
        let c = g.rt.graph_conditional_handle_create(owner, default, flags)?;
        conds.handles.push((c.0, h));
        // SAFETY: the caller's contract.
        unsafe { put(out, c.0) }
    })
}

/// `hipGraphAddNode`: a node of any kind this layer has, from `hipGraphNodeParams` (types in HIP
/// 5.2's numbering, and `hipGraphNodeTypeConditional`), checked as the kind's own
/// `hipGraphAdd…Node` checks it. Memory nodes (10, 11) are `hipErrorNotSupported` (this layer
/// makes them only by capture), other types `hipErrorInvalidValue`.
///
/// # Safety
/// `node` is NULL or valid for writes; `deps` is NULL or holds `count` handles; `p` is NULL or
/// valid for reads and writes, its pointers as the kind's own call takes them.
#[no_mangle]
pub unsafe extern "C" fn hipGraphAddNode(
    node: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    count: usize,
    p: *mut GraphNodeParams,
) -> i32 {
    api(|| {
        let g = global()?;
        if p.is_null() {
            return Err(INVALID_VALUE);
        }
        // SAFETY: non-null; the caller's contract.
        let p = unsafe { &mut *p };
        // Each union read below reads the member `p.ty` names; every member is plain data, valid
        // for any bit pattern.
        let u = &mut p.params;
        let kind = match p.ty {
            // SAFETY: see above.
            TYPE_KERNEL => kernel_kind(unsafe { &u.kernel }),
            // SAFETY: see above.
            TYPE_MEMCPY => match unsafe { u.memcpy } {
                m if m.flags != 0 => Err(INVALID_VALUE),
                m => copy_3d(&m.copy),
            },
            // SAFETY: see above.
            TYPE_MEMSET => memset_kind(g, unsafe { &u.memset }),
            // SAFETY: see above.
            TYPE_HOST => host_kind(unsafe { &u.host }),
            // SAFETY: see above.
            TYPE_GRAPH => child_kind(unsafe { u.handle }),
            TYPE_EMPTY => Ok(Kind::Empty),
            // SAFETY: see above.
            TYPE_WAIT_EVENT => event_of(g, unsafe { u.handle }).map(Kind::EventWait),
            // SAFETY: see above.
            TYPE_EVENT_RECORD => event_of(g, unsafe { u.handle }).map(Kind::EventRecord),
            TYPE_MEM_ALLOC | TYPE_MEM_FREE => Err(NOT_SUPPORTED),
            // SAFETY: see above; the caller's contract for the rest.
            TYPE_CONDITIONAL => return unsafe { add_conditional(g, node, graph, deps, count, &mut u.conditional) },
            _ => Err(INVALID_VALUE),
        };
        // SAFETY: forwarded caller contract.
        unsafe { add_node(node, graph, deps, count, kind) }
    })
}

/// A conditional node of `p.size` new empty bodies after `deps`, with CUDA's checks: a type
/// other than IF, WHILE, SWITCH or a size against its rule (WHILE one body, IF one or two,
/// SWITCH one or more) is `hipErrorInvalidValue`, more than 8 bodies `hipErrorNotSupported`; the
/// handle must have been created on `graph` or a graph it lies in, and serve no other node
/// (`hipErrorInvalidValue`). Points `p.phGraph_out` at the node's array of body views.
///
/// # Safety
/// As `hipGraphAddNode`.
unsafe fn add_conditional(
    g: &Global,
    node: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    count: usize,
    p: &mut ConditionalNodeParams,
) -> HipResult {
    if node.is_null() || graph.is_null() {
        return Err(INVALID_VALUE);
    }
    let kind = ConditionalKind::from_raw(p.ty).ok_or(INVALID_VALUE)?;
    let size = p.size as usize;
    let fits = match kind {
        ConditionalKind::While => size == 1,
        ConditionalKind::If => matches!(size, 1 | 2),
        ConditionalKind::Switch => size >= 1,
    };
    if !fits {
        return Err(INVALID_VALUE);
    }
    if size > MAX_BODIES {
        return Err(NOT_SUPPORTED);
    }
    // SAFETY: the caller's contract.
    let deps = unsafe { handles(deps, count)? };
    let h = graph as usize as u64;
    let mut graphs = graphs();
    let Some(lineage) = graphs.lineage(h) else {
        drop(graphs);
        return Err(not_ours(g, h));
    };
    let root = lineage.last().copied().unwrap_or(h);
    let owner = {
        let conds = graphs.conditions(root).ok_or(INVALID_VALUE)?;
        conds.handles.iter().find(|&&(c, made_on)| c == p.handle && lineage.contains(&made_on)).ok_or(INVALID_VALUE)?;
        conds.owner.clone().ok_or(INVALID_VALUE)?
    };
    if graphs.get(root).is_none_or(|r| r.uses_handle(p.handle)) {
        return Err(INVALID_VALUE);
    }
    let gr = graphs.get_mut(h).ok_or(INVALID_VALUE)?;
    let ids = dep_ids(g, h, deps, |i| gr.live(i))?;
    let c = CondNode {
        handle: p.handle,
        kind,
        bodies: vec![Graph::default(); size],
        out: vec![0; size].into_boxed_slice(),
        _owner: owner,
    };
    let id = gr.push(Kind::Conditional(c), &ids)?;
    let views: Vec<usize> = (0..size).map(|b| graphs.view(h, id, Some(b)) as usize).collect();
    let Ok(Kind::Conditional(c)) = graphs.get_mut(h).ok_or(INVALID_VALUE)?.kind_mut(id) else {
        return Err(INVALID_VALUE);
    };
    c.out.copy_from_slice(&views);
    p.graphs_out = c.out.as_mut_ptr().cast::<Handle>();
    drop(graphs);
    // SAFETY: the caller's contract.
    unsafe { put(node, node_handle(g, h, id)) }
}

/// `aqdGraphSetConditional`: sets a handle's value with a release store, as device code does
/// (`hipGraphSetConditional` of `aqueduct_hip_device.h`); what host kernels on the emulated GPU
/// call. Like the device's store it checks nothing but NULL.
///
/// # Safety
/// `handle` is 0 or a live conditional handle.
#[no_mangle]
pub unsafe extern "C" fn aqdGraphSetConditional(handle: c_ulonglong, value: c_uint) {
    if handle != 0 {
        // SAFETY: the caller's contract.
        unsafe { aqueduct::conditional::set_conditional(ConditionalHandle(handle), value) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_params_have_cuda_offsets() {
        assert_eq!(std::mem::offset_of!(ConditionalNodeParams, ty), 8);
        assert_eq!(std::mem::offset_of!(ConditionalNodeParams, size), 12);
        assert_eq!(std::mem::offset_of!(MemcpyNodeParams, copy), 16);
        assert_eq!(std::mem::offset_of!(GraphNodeParams, reserved0), 4);
    }
}
