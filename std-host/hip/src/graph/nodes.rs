//! Building nodes (docs/hip-semantics.md, "Graphs"): `hipGraphAdd*Node`, each node's parameters
//! checked as HIP checks them, into a graph of this layer or a capture's graph in core.

use std::ffi::{c_uint, c_void};

use aqueduct::NodeId;
use aqueduct::{EventHandle, GraphHandle};

use crate::error::{api, Hip, HipResult, INVALID_MEMCPY_DIRECTION, INVALID_VALUE, NOT_SUPPORTED};
use crate::global::{global, lock, Global};
use crate::pitched::Memcpy3DParms;
use crate::register::{check_direction, symbol_range, TO_DEVICE, TO_HOST};
use crate::{put, Handle};

use super::build::*;
use super::model::*;
use super::table::*;

// ----- adding nodes ---------------------------------------------------------------------------

/// Adds `kind` to `graph` after `deps` and writes its handle: to a graph core holds (made by
/// `hipGraphCreate`, while its nodes are ones core holds as they are), to a graph of this
/// layer, or to a capture's graph in core.
///
/// # Safety
/// `node` is NULL or valid for writes; `deps` is NULL or holds `count` handles.
pub(super) unsafe fn add_node(
    node: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    count: usize,
    kind: HipResult<Kind>,
) -> HipResult {
    let g = global()?;
    if node.is_null() || graph.is_null() {
        return Err(INVALID_VALUE);
    }
    // SAFETY: the caller's contract.
    let deps = unsafe { handles(deps, count)? };
    let kind = kind?;
    let h = graph as usize as u64;
    // A graph core holds takes the nodes core holds as they are; any other node, or a call
    // core cannot take, goes to this layer's model (the graph taken over first).
    let id = if let Some(id) = add_in_core(g, h, deps, &kind) {
        id
    } else if is_ours(h) {
        let mut graphs = graphs();
        let gr = graphs.get_mut(h).ok_or(INVALID_VALUE)?;
        let ids = dep_ids(g, h, deps, |i| gr.live(i))?;
        gr.push(kind, &ids)?
    } else {
        let core = GraphHandle(h);
        let n = g.rt.graph_node_count(core)?;
        let ids = dep_ids(g, h, deps, |i| usize::from(i) < n)?;
        let ids: Vec<NodeId> = ids.into_iter().map(NodeId).collect();
        let device = g.rt.device()?;
        Build { g, core, device, staging: None, bodies: Vec::new(), site: Default::default() }.add(&kind, &ids)?.0
    };
    // SAFETY: the caller's contract.
    unsafe { put(node, node_handle(g, h, id)) }
}

/// `hipGraphAddEmptyNode`.
///
/// # Safety
/// `node` is NULL or valid for writes; `deps` is NULL or holds `count` handles.
#[no_mangle]
pub unsafe extern "C" fn hipGraphAddEmptyNode(
    node: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    count: usize,
) -> i32 {
    // SAFETY: forwarded caller contract.
    api(|| unsafe { add_node(node, graph, deps, count, Ok(Kind::Empty)) })
}

pub(super) fn kernel_kind(p: *const KernelNodeParams) -> HipResult<Kind> {
    let g = global()?;
    if p.is_null() {
        return Err(INVALID_VALUE);
    }
    // SAFETY: non-null; the caller of the API vouches for the struct and its argument lists.
    unsafe { KernelNode::new(g, &*p, g.rt.device()?) }.map(Kind::Kernel)
}

/// `hipGraphAddKernelNode`: the arguments are copied now; `func` is a kernel handle (or a
/// `hipFunction_t`), NULL being `hipErrorInvalidValue` and an unknown one
/// `hipErrorInvalidDeviceFunction`.
///
/// # Safety
/// `node` is NULL or valid for writes; `deps` is NULL or holds `count` handles; `p` is NULL or
/// valid, its argument lists as `hipModuleLaunchKernel`'s.
#[no_mangle]
pub unsafe extern "C" fn hipGraphAddKernelNode(
    node: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    count: usize,
    p: *const KernelNodeParams,
) -> i32 {
    // SAFETY: forwarded caller contract.
    api(|| unsafe { add_node(node, graph, deps, count, kernel_kind(p)) })
}

/// Whether `[addr, addr + bytes)` starts inside an allocation of this runtime but runs past
/// its end.
pub(super) fn overruns(g: &Global, addr: u64, bytes: u64) -> bool {
    let allocs = lock(&g.allocs);
    allocs
        .range(..=addr)
        .next_back()
        .is_some_and(|(&start, &(len, _))| addr < start + len.max(1) && addr.saturating_add(bytes) > start + len)
}

/// A 1-D copy, checked as HIP checks `hipGraphAddMemcpyNode1D`: zero bytes, NULL ends and a
/// range past an allocation are `hipErrorInvalidValue`, an unknown kind
/// `hipErrorInvalidMemcpyDirection`, and so is a kind that contradicts pageable memory.
pub(super) fn copy_1d(g: &Global, dst: u64, src: u64, count: usize, kind: c_uint) -> HipResult<Kind> {
    if count == 0 || dst == 0 || src == 0 {
        return Err(INVALID_VALUE);
    }
    if kind > MEMCPY_DEFAULT && kind != MEMCPY_NO_CU {
        return Err(INVALID_MEMCPY_DIRECTION);
    }
    let n = count as u64;
    if overruns(g, dst, n) || overruns(g, src, n) {
        return Err(INVALID_VALUE);
    }
    let (d, s) = (crate::memory::device_reachable(g, dst, n), crate::memory::device_reachable(g, src, n));
    if (!s && d && !matches!(kind, TO_DEVICE | MEMCPY_DEFAULT))
        || (!d && s && !matches!(kind, TO_HOST | MEMCPY_DEFAULT))
    {
        return Err(INVALID_VALUE);
    }
    Ok(Kind::Copy(CopyNode::linear(dst, src, count, kind)))
}

/// A 3-D copy of linear memory (arrays are `hipErrorNotSupported`).
pub(super) fn copy_3d(p: *const Memcpy3DParms) -> HipResult<Kind> {
    if p.is_null() {
        return Err(INVALID_VALUE);
    }
    // SAFETY: non-null; the caller of the API vouches for the struct.
    let p = unsafe { &*p };
    if !p.src_array.is_null() || !p.dst_array.is_null() {
        return Err(NOT_SUPPORTED);
    }
    if p.src_ptr.ptr.is_null() || p.dst_ptr.ptr.is_null() {
        return Err(INVALID_VALUE);
    }
    let e = p.extent;
    if p.src_ptr.pitch < e.width + p.src_pos.x || p.dst_ptr.pitch < e.width + p.dst_pos.x {
        return Err(INVALID_PITCH);
    }
    if p.kind > MEMCPY_DEFAULT && p.kind != MEMCPY_NO_CU {
        return Err(INVALID_MEMCPY_DIRECTION);
    }
    if e.width == 0 || e.height == 0 || e.depth == 0 {
        return Err(INVALID_VALUE);
    }
    Ok(Kind::Copy(CopyNode {
        src: p.src_ptr.ptr as usize as u64,
        src_pos: p.src_pos,
        src_pitch: p.src_ptr.pitch,
        src_ysize: p.src_ptr.ysize.max(1),
        dst: p.dst_ptr.ptr as usize as u64,
        dst_pos: p.dst_pos,
        dst_pitch: p.dst_ptr.pitch,
        dst_ysize: p.dst_ptr.ysize.max(1),
        extent: e,
        kind: p.kind,
    }))
}

/// `hipGraphAddMemcpyNode`: linear memory (pitched rows) only.
///
/// # Safety
/// As `hipGraphAddKernelNode`; `p` is NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn hipGraphAddMemcpyNode(
    node: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    count: usize,
    p: *const Memcpy3DParms,
) -> i32 {
    // SAFETY: forwarded caller contract.
    api(|| unsafe { add_node(node, graph, deps, count, copy_3d(p)) })
}

/// `hipGraphAddMemcpyNode1D`.
///
/// # Safety
/// As `hipGraphAddKernelNode`; `dst` and `src` stay valid for `bytes` bytes while the graph can
/// run.
#[no_mangle]
pub unsafe extern "C" fn hipGraphAddMemcpyNode1D(
    node: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    count: usize,
    dst: *mut c_void,
    src: *const c_void,
    bytes: usize,
    kind: c_uint,
) -> i32 {
    api(|| {
        let g = global()?;
        let k = copy_1d(g, dst as usize as u64, src as usize as u64, bytes, kind);
        // SAFETY: forwarded caller contract.
        unsafe { add_node(node, graph, deps, count, k) }
    })
}

pub(super) fn from_symbol(
    g: &Global,
    dst: *mut c_void,
    symbol: *const c_void,
    bytes: usize,
    offset: usize,
    kind: c_uint,
) -> HipResult<Kind> {
    check_direction(kind, TO_HOST)?;
    let src = symbol_range(g, symbol, bytes, offset)?;
    copy_1d(g, dst as usize as u64, src, bytes, kind)
}

pub(super) fn to_symbol(
    g: &Global,
    symbol: *const c_void,
    src: *const c_void,
    bytes: usize,
    offset: usize,
    kind: c_uint,
) -> HipResult<Kind> {
    check_direction(kind, TO_DEVICE)?;
    let dst = symbol_range(g, symbol, bytes, offset)?;
    copy_1d(g, dst, src as usize as u64, bytes, kind)
}

/// `hipGraphAddMemcpyNodeFromSymbol`: the variable's address is taken on the calling thread's
/// device now.
///
/// # Safety
/// As `hipGraphAddMemcpyNode1D`.
#[no_mangle]
pub unsafe extern "C" fn hipGraphAddMemcpyNodeFromSymbol(
    node: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    count: usize,
    dst: *mut c_void,
    symbol: *const c_void,
    bytes: usize,
    offset: usize,
    kind: c_uint,
) -> i32 {
    api(|| {
        let g = global()?;
        let k = from_symbol(g, dst, symbol, bytes, offset, kind);
        // SAFETY: forwarded caller contract.
        unsafe { add_node(node, graph, deps, count, k) }
    })
}

/// `hipGraphAddMemcpyNodeToSymbol`.
///
/// # Safety
/// As `hipGraphAddMemcpyNode1D`.
#[no_mangle]
pub unsafe extern "C" fn hipGraphAddMemcpyNodeToSymbol(
    node: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    count: usize,
    symbol: *const c_void,
    src: *const c_void,
    bytes: usize,
    offset: usize,
    kind: c_uint,
) -> i32 {
    api(|| {
        let g = global()?;
        let k = to_symbol(g, symbol, src, bytes, offset, kind);
        // SAFETY: forwarded caller contract.
        unsafe { add_node(node, graph, deps, count, k) }
    })
}

/// A fill, checked as HIP checks `hipMemsetParams`: `height` 0, an element size other than 1,
/// 2 or 4, NULL, a pitch shorter than a row of several, or a range past an allocation are
/// `hipErrorInvalidValue`.
pub(super) fn memset_kind(g: &Global, p: *const MemsetParams) -> HipResult<Kind> {
    if p.is_null() {
        return Err(INVALID_VALUE);
    }
    // SAFETY: non-null; the caller of the API vouches for the struct.
    let p = unsafe { *p };
    let row = p.width.checked_mul(p.element_size as usize).ok_or(INVALID_VALUE)?;
    if p.height == 0 || !matches!(p.element_size, 1 | 2 | 4) || p.dst.is_null() || (p.height > 1 && p.pitch < row) {
        return Err(INVALID_VALUE);
    }
    let dst = p.dst as usize as u64;
    let span = (p.height - 1).checked_mul(p.pitch).and_then(|v| v.checked_add(row)).ok_or(INVALID_VALUE)?;
    if overruns(g, dst, span as u64) || dst % u64::from(p.element_size) != 0 {
        return Err(INVALID_VALUE);
    }
    Ok(Kind::Memset(MemsetNode {
        dst,
        element_size: p.element_size,
        height: p.height,
        pitch: p.pitch,
        value: p.value,
        width: p.width,
    }))
}

/// `hipGraphAddMemsetNode`.
///
/// # Safety
/// As `hipGraphAddKernelNode`; `p` is NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn hipGraphAddMemsetNode(
    node: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    count: usize,
    p: *const MemsetParams,
) -> i32 {
    api(|| {
        let g = global()?;
        let k = memset_kind(g, p);
        // SAFETY: forwarded caller contract.
        unsafe { add_node(node, graph, deps, count, k) }
    })
}

pub(super) fn host_kind(p: *const HostNodeParams) -> HipResult<Kind> {
    if p.is_null() {
        return Err(INVALID_VALUE);
    }
    // SAFETY: non-null; the caller of the API vouches for the struct.
    let p = unsafe { *p };
    let func = p.func.ok_or(INVALID_VALUE)?;
    Ok(Kind::Host { func, data: p.data as usize })
}

/// `hipGraphAddHostNode`: `fn(userData)` runs on a host thread when the node's dependencies
/// are done, and the nodes after it wait for it.
///
/// # Safety
/// As `hipGraphAddKernelNode`; `p` is NULL or valid; the function and its data stay valid while
/// the graph can run.
#[no_mangle]
pub unsafe extern "C" fn hipGraphAddHostNode(
    node: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    count: usize,
    p: *const HostNodeParams,
) -> i32 {
    // SAFETY: forwarded caller contract.
    api(|| unsafe { add_node(node, graph, deps, count, host_kind(p)) })
}

/// A live event's raw handle; NULL and destroyed events are `hipErrorInvalidValue`.
pub(super) fn event_of(g: &Global, event: Handle) -> HipResult<u64> {
    let e = event as usize as u64;
    match g.rt.event_query(EventHandle(e)) {
        Ok(()) => Ok(e),
        Err(err) if Hip::from(err) == Hip(600) => Ok(e),
        Err(_) => Err(INVALID_VALUE),
    }
}

/// `hipGraphAddEventRecordNode`.
///
/// # Safety
/// As `hipGraphAddEmptyNode`.
#[no_mangle]
pub unsafe extern "C" fn hipGraphAddEventRecordNode(
    node: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    count: usize,
    event: Handle,
) -> i32 {
    api(|| {
        let g = global()?;
        let k = event_of(g, event).map(Kind::EventRecord);
        // SAFETY: forwarded caller contract.
        unsafe { add_node(node, graph, deps, count, k) }
    })
}

/// `hipGraphAddEventWaitNode`.
///
/// # Safety
/// As `hipGraphAddEmptyNode`.
#[no_mangle]
pub unsafe extern "C" fn hipGraphAddEventWaitNode(
    node: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    count: usize,
    event: Handle,
) -> i32 {
    api(|| {
        let g = global()?;
        let k = event_of(g, event).map(Kind::EventWait);
        // SAFETY: forwarded caller contract.
        unsafe { add_node(node, graph, deps, count, k) }
    })
}

pub(super) fn child_kind(child: Handle) -> HipResult<Kind> {
    if child.is_null() {
        return Err(INVALID_VALUE);
    }
    with_graph(child, |c| {
        if c.has_memory_nodes() || c.has_conditional_nodes() {
            return Err(NOT_SUPPORTED);
        }
        Ok(Kind::Child(Box::new(Graph { origin: 0, ..c.clone() })))
    })
}

/// `hipGraphAddChildGraphNode`: the child is copied now; `hipGraphChildGraphNodeGetGraph`
/// returns the copy. A child with memory or conditional nodes is `hipErrorNotSupported` (CUDA
/// refuses both).
///
/// # Safety
/// As `hipGraphAddEmptyNode`.
#[no_mangle]
pub unsafe extern "C" fn hipGraphAddChildGraphNode(
    node: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    count: usize,
    child: Handle,
) -> i32 {
    // SAFETY: forwarded caller contract.
    api(|| unsafe { add_node(node, graph, deps, count, child_kind(child)) })
}
