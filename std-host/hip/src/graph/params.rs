//! Node parameters in graphs (docs/hip-semantics.md, "Graphs"): `hipGraph*NodeGetParams` /
//! `SetParams`, event nodes' events, a child-graph node's graph.

use std::ffi::{c_uint, c_void};

use aqueduct::GraphHandle;
use aqueduct::NodeId;

use crate::error::{api, HipResult, INVALID_VALUE, NOT_SUPPORTED};
use crate::global::{global, Global};
use crate::pitched::Memcpy3DParms;
use crate::{handle, put, Handle};

use super::build::captured_kind;
use super::model::*;
use super::nodes::*;
use super::table::*;

// ----- node parameters ------------------------------------------------------------------------

/// Runs `f` on the node a handle names. Nodes of a graph a capture still records into are
/// core's: their parameters are `hipErrorNotSupported` until the capture ends.
pub(super) fn with_node<R>(node: Handle, f: impl FnOnce(&Global, &mut Kind) -> HipResult<R>) -> HipResult<R> {
    let g = global()?;
    let (gh, id) = node_of(g, node)?;
    let mut graphs = graphs();
    match graphs.get_mut(gh) {
        Some(gr) => f(g, gr.kind_mut(id)?),
        None => {
            drop(graphs);
            Err(if g.rt.graph_node_count(GraphHandle(gh)).is_ok() { NOT_SUPPORTED } else { INVALID_VALUE })
        }
    }
}

/// Runs `f` on the parameters of the node a handle names, read back from core's graph while
/// core holds the graph (its kinds are read back whole there: host functions and events, not
/// kernels, whose argument pointers must point at a copy that lives with the node), otherwise
/// as [`with_node`].
fn read_node<R>(node: Handle, f: impl FnOnce(&Kind) -> HipResult<R>) -> HipResult<R> {
    let g = global()?;
    let (gh, id) = node_of(g, node)?;
    match in_core(gh) {
        Some((core, Some(held))) => f(&captured_kind(g, core, NodeId(id), held.device)?),
        _ => with_node(node, |_, k| f(k)),
    }
}

/// `hipGraphKernelNodeGetParams`: `kernelParams` (or `extra`) points at the node's own copy of
/// the arguments.
///
/// # Safety
/// `p` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipGraphKernelNodeGetParams(node: Handle, p: *mut KernelNodeParams) -> i32 {
    api(|| {
        if p.is_null() {
            return Err(INVALID_VALUE);
        }
        let params = with_node(node, |_, k| match k {
            Kind::Kernel(k) => Ok(k.params()),
            _ => Err(INVALID_VALUE),
        })?;
        // SAFETY: the caller's contract.
        unsafe { put(p, params) }
    })
}

/// `hipGraphKernelNodeSetParams`.
///
/// # Safety
/// `p` is NULL or valid, its argument lists as `hipModuleLaunchKernel`'s.
#[no_mangle]
pub unsafe extern "C" fn hipGraphKernelNodeSetParams(node: Handle, p: *const KernelNodeParams) -> i32 {
    api(|| {
        let new = kernel_kind(p)?;
        with_node(node, |_, k| k.replace_with(new))
    })
}

/// `hipGraphMemcpyNodeGetParams`: a 1-D copy reads as a one-row 3-D copy.
///
/// # Safety
/// `p` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipGraphMemcpyNodeGetParams(node: Handle, p: *mut Memcpy3DParms) -> i32 {
    api(|| {
        if p.is_null() {
            return Err(INVALID_VALUE);
        }
        let params = with_node(node, |_, k| match k {
            Kind::Copy(c) => Ok(c.params()),
            _ => Err(INVALID_VALUE),
        })?;
        // SAFETY: the caller's contract.
        unsafe { put(p, params) }
    })
}

/// Replaces a copy node's copy.
pub(super) fn set_copy(node: Handle, new: HipResult<Kind>) -> HipResult {
    let new = new?;
    with_node(node, |_, k| k.replace_with(new))
}

/// `hipGraphMemcpyNodeSetParams`.
///
/// # Safety
/// `p` is NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn hipGraphMemcpyNodeSetParams(node: Handle, p: *const Memcpy3DParms) -> i32 {
    api(|| set_copy(node, copy_3d(p)))
}

/// `hipGraphMemcpyNodeSetParams1D`.
///
/// # Safety
/// `dst` and `src` stay valid for `bytes` bytes while the graph can run.
#[no_mangle]
pub unsafe extern "C" fn hipGraphMemcpyNodeSetParams1D(
    node: Handle,
    dst: *mut c_void,
    src: *const c_void,
    bytes: usize,
    kind: c_uint,
) -> i32 {
    api(|| set_copy(node, copy_1d(global()?, dst as usize as u64, src as usize as u64, bytes, kind)))
}

/// `hipGraphMemcpyNodeSetParamsFromSymbol`.
///
/// # Safety
/// As `hipGraphMemcpyNodeSetParams1D`.
#[no_mangle]
pub unsafe extern "C" fn hipGraphMemcpyNodeSetParamsFromSymbol(
    node: Handle,
    dst: *mut c_void,
    symbol: *const c_void,
    bytes: usize,
    offset: usize,
    kind: c_uint,
) -> i32 {
    api(|| set_copy(node, from_symbol(global()?, dst, symbol, bytes, offset, kind)))
}

/// `hipGraphMemcpyNodeSetParamsToSymbol`.
///
/// # Safety
/// As `hipGraphMemcpyNodeSetParams1D`.
#[no_mangle]
pub unsafe extern "C" fn hipGraphMemcpyNodeSetParamsToSymbol(
    node: Handle,
    symbol: *const c_void,
    src: *const c_void,
    bytes: usize,
    offset: usize,
    kind: c_uint,
) -> i32 {
    api(|| set_copy(node, to_symbol(global()?, symbol, src, bytes, offset, kind)))
}

/// `hipGraphMemsetNodeGetParams`.
///
/// # Safety
/// `p` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipGraphMemsetNodeGetParams(node: Handle, p: *mut MemsetParams) -> i32 {
    api(|| {
        if p.is_null() {
            return Err(INVALID_VALUE);
        }
        let params = with_node(node, |_, k| match k {
            Kind::Memset(m) => Ok(MemsetParams {
                dst: m.dst as usize as *mut c_void,
                element_size: m.element_size,
                height: m.height,
                pitch: m.pitch,
                value: m.value,
                width: m.width,
            }),
            _ => Err(INVALID_VALUE),
        })?;
        // SAFETY: the caller's contract.
        unsafe { put(p, params) }
    })
}

/// `hipGraphMemsetNodeSetParams`.
///
/// # Safety
/// `p` is NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn hipGraphMemsetNodeSetParams(node: Handle, p: *const MemsetParams) -> i32 {
    api(|| {
        let new = memset_kind(global()?, p)?;
        with_node(node, |_, k| k.replace_with(new))
    })
}

/// `hipGraphHostNodeGetParams`.
///
/// # Safety
/// `p` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipGraphHostNodeGetParams(node: Handle, p: *mut HostNodeParams) -> i32 {
    api(|| {
        if p.is_null() {
            return Err(INVALID_VALUE);
        }
        let params = read_node(node, |k| match k {
            Kind::Host { func, data } => Ok(HostNodeParams { func: Some(*func), data: *data as *mut c_void }),
            _ => Err(INVALID_VALUE),
        })?;
        // SAFETY: the caller's contract.
        unsafe { put(p, params) }
    })
}

/// `hipGraphHostNodeSetParams`.
///
/// # Safety
/// `p` is NULL or valid; the function and its data stay valid while the graph can run.
#[no_mangle]
pub unsafe extern "C" fn hipGraphHostNodeSetParams(node: Handle, p: *const HostNodeParams) -> i32 {
    api(|| {
        let new = host_kind(p)?;
        with_node(node, |_, k| k.replace_with(new))
    })
}

/// The event of an event node (`record` picks the kind).
///
/// # Safety
/// `out` is NULL or valid for writes.
pub(super) unsafe fn get_event(node: Handle, out: *mut Handle, record: bool) -> HipResult {
    if out.is_null() {
        return Err(INVALID_VALUE);
    }
    let e = read_node(node, |k| match (k, record) {
        (Kind::EventRecord(e), true) | (Kind::EventWait(e), false) => Ok(*e),
        _ => Err(INVALID_VALUE),
    })?;
    // SAFETY: the caller's contract.
    unsafe { put(out, handle(e)) }
}

pub(super) fn set_event(node: Handle, event: Handle, record: bool) -> HipResult {
    let e = event_of(global()?, event)?;
    with_node(node, |_, k| match (k, record) {
        (Kind::EventRecord(old), true) | (Kind::EventWait(old), false) => {
            *old = e;
            Ok(())
        }
        _ => Err(INVALID_VALUE),
    })
}

/// `hipGraphEventRecordNodeGetEvent`.
///
/// # Safety
/// `event` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipGraphEventRecordNodeGetEvent(node: Handle, event: *mut Handle) -> i32 {
    // SAFETY: forwarded caller contract.
    api(|| unsafe { get_event(node, event, true) })
}

/// `hipGraphEventRecordNodeSetEvent`.
#[no_mangle]
pub extern "C" fn hipGraphEventRecordNodeSetEvent(node: Handle, event: Handle) -> i32 {
    api(|| set_event(node, event, true))
}

/// `hipGraphEventWaitNodeGetEvent`.
///
/// # Safety
/// `event` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipGraphEventWaitNodeGetEvent(node: Handle, event: *mut Handle) -> i32 {
    // SAFETY: forwarded caller contract.
    api(|| unsafe { get_event(node, event, false) })
}

/// `hipGraphEventWaitNodeSetEvent`.
#[no_mangle]
pub extern "C" fn hipGraphEventWaitNodeSetEvent(node: Handle, event: Handle) -> i32 {
    api(|| set_event(node, event, false))
}

/// `hipGraphChildGraphNodeGetGraph`: the node's own copy, which edits through the returned
/// handle change.
///
/// # Safety
/// `graph` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipGraphChildGraphNodeGetGraph(node: Handle, graph: *mut Handle) -> i32 {
    api(|| {
        let g = global()?;
        if graph.is_null() {
            return Err(INVALID_VALUE);
        }
        let (gh, id) = node_of(g, node)?;
        let mut graphs = graphs();
        match graphs.get(gh).ok_or(INVALID_VALUE)?.kind(id)? {
            Kind::Child(_) => {}
            _ => return Err(INVALID_VALUE),
        }
        let h = graphs.view(gh, id, None);
        // SAFETY: the caller's contract.
        unsafe { put(graph, handle(h)) }
    })
}
