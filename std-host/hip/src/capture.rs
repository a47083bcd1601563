//! Stream capture (docs/hip-semantics.md §2.3, §2.5, §4): begin/end (also into an existing
//! graph), status queries, dependency updates, the thread's capture mode. The graph a capture records is core's until the capture
//! ends; then [`crate::graph`] takes it over under the same handle. Graph nodes get C handles
//! from the node table in [`crate::global`].

use std::cell::RefCell;
use std::ffi::{c_uint, c_ulonglong};

use aqueduct::{CaptureStatus, GraphHandle, NodeId};

use crate::error::{
    api, Hip, HipResult, CAPTURE_INVALIDATED, CAPTURE_UNJOINED, ILLEGAL_STATE, INVALID_VALUE, NOT_SUPPORTED,
};
use crate::global::{global, lock, Global};
use crate::graph::{capture_into_begin, capture_into_list, capture_into_take, into_of, is_capture_target, CaptureInto};
use crate::{handle, put, stream_of, Handle};

/// Refuses stream-ordered allocation and freeing on a stream capturing into an existing graph:
/// the memory would belong to core's stand-in graph, not to the target.
pub(crate) fn refuse_memory_nodes(g: &Global, stream: Handle) -> HipResult {
    match g.rt.stream_capture_info(stream_of(stream)) {
        Ok(info) if info.status == CaptureStatus::Active && into_of(info.graph).is_some() => Err(NOT_SUPPORTED),
        _ => Ok(()),
    }
}

/// Releases the stand-in graphs of captures into existing graphs that ended without
/// `hipStreamEndCapture` taking them (torn down with their stream, invalidated, unjoined).
pub(crate) fn sweep_into(g: &Global) {
    let listed = capture_into_list();
    let stale = listed
        .into_iter()
        .filter(|&(core, stream)| !g.rt.stream_capture_info(stream_of(handle(stream))).is_ok_and(|c| c.graph == core));
    for (core, _) in stale {
        // Core refuses to destroy a graph a capture still records into: that one stays listed
        // (one already gone does not).
        let core = GraphHandle(core);
        if g.rt.graph_destroy(core).is_ok() || g.rt.graph_node_count(core).is_err() {
            capture_into_take(core.0);
        }
    }
}

/// `hipGraphEdgeData` (newer HIP): the default edge is all zeros.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct EdgeData {
    /// Bytes: from_port, reserved[5], to_port, type.
    pub bytes: [u8; 8],
}

/// `hipStreamBeginCaptureToGraph` (newer HIP, CUDA's `cudaStreamBeginCaptureToGraph`): a
/// capture whose work is added to `graph` (a graph of this layer) after `deps`, its nodes;
/// `hipStreamEndCapture` then answers `graph`. Edge data other than the default edge is
/// `hipErrorNotSupported`; a graph another capture already records into is
/// `hipErrorIllegalState`; stream-ordered allocation on the stream meanwhile is
/// `hipErrorNotSupported`.
///
/// # Safety
/// `deps` is NULL or holds `count` node handles; `data` is NULL or holds `count` entries.
#[no_mangle]
pub unsafe extern "C" fn hipStreamBeginCaptureToGraph(
    stream: Handle,
    graph: Handle,
    deps: *const Handle,
    data: *const EdgeData,
    count: usize,
    mode: c_uint,
) -> i32 {
    api(|| {
        let g = global()?;
        let target = graph as usize as u64;
        let base = crate::graph::slot_count(target)?;
        if count > 0 && deps.is_null() {
            return Err(INVALID_VALUE);
        }
        let list: &[Handle] = if count == 0 {
            &[]
        } else {
            // SAFETY: the caller's contract: `count` handles.
            unsafe { std::slice::from_raw_parts(deps, count) }
        };
        if !data.is_null() && count > 0 {
            // SAFETY: the caller's contract: `count` entries.
            let edges = unsafe { std::slice::from_raw_parts(data, count) };
            if edges.iter().any(|e| e.bytes != [0; 8]) {
                return Err(NOT_SUPPORTED);
            }
        }
        let mut ids: Vec<NodeId> = Vec::with_capacity(list.len());
        for &d in list {
            // Read out first: the node table is not held while the graph table is locked.
            let named = lock(&g.nodes).get(d as usize as u64);
            let id = match named {
                Some((gr, id)) if gr == target && crate::graph::is_live_node(target, id) => NodeId(id),
                _ => return Err(INVALID_VALUE),
            };
            if ids.contains(&id) {
                return Err(INVALID_VALUE);
            }
            ids.push(id);
        }
        if is_capture_target(target) {
            return Err(ILLEGAL_STATE);
        }
        let core = g.rt.graph_create()?;
        let begun = (0..base)
            .try_for_each(|_| g.rt.graph_add_empty_node(core, &[]).map(|_| ()))
            .and_then(|()| g.rt.stream_begin_capture_to_graph(stream_of(stream), core, &ids, mode));
        if let Err(e) = begun {
            let _ = g.rt.graph_destroy(core);
            return Err(e.into());
        }
        capture_into_begin(core.0, CaptureInto { target, base, stream: stream as usize as u64 });
        Ok(())
    })
}

std::thread_local! {
    /// The dependency list `hipStreamGetCaptureInfo_v2` last returned on this thread (valid
    /// until the thread's next call, as HIP's is until the stream's next captured operation).
    static DEPS_OUT: RefCell<Vec<Handle>> = const { RefCell::new(Vec::new()) };
}

/// `hipStreamBeginCapture`.
#[no_mangle]
pub extern "C" fn hipStreamBeginCapture(stream: Handle, mode: c_uint) -> i32 {
    api(|| Ok(global()?.rt.stream_begin_capture(stream_of(stream), mode)?))
}

/// `hipStreamEndCapture`: a NULL `graph` is `hipErrorInvalidValue` before anything else; an
/// invalidated or unjoined capture is torn down and `*graph` set to NULL.
///
/// # Safety
/// `graph` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipStreamEndCapture(stream: Handle, graph: *mut Handle) -> i32 {
    api(|| {
        let g = global()?;
        if graph.is_null() {
            return Err(INVALID_VALUE);
        }
        let ended = g.rt.stream_end_capture(stream_of(stream));
        let adopted = ended.map_err(Hip::from).and_then(|h| {
            // Taken out first: the table of captures into graphs is never held while the graph
            // table is locked (hipGraphDestroy looks at it under that lock).
            let into = capture_into_take(h.0);
            match into {
                Some(into) => crate::graph::merge_captured(g, h, into).map(GraphHandle),
                None => crate::graph::adopt_captured(g, h).map(|_| h),
            }
        });
        crate::graph::sweep_capture_owners(g);
        sweep_into(g);
        match adopted {
            Ok(h) => {
                // SAFETY: the caller's contract.
                unsafe { put(graph, handle(h.0)) }
            }
            Err(e) => {
                if e == CAPTURE_INVALIDATED || e == CAPTURE_UNJOINED {
                    // SAFETY: the caller's contract.
                    unsafe { put(graph, std::ptr::null_mut())? };
                }
                Err(e)
            }
        }
    })
}

/// `hipStreamIsCapturing`.
///
/// # Safety
/// `status` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipStreamIsCapturing(stream: Handle, status: *mut c_uint) -> i32 {
    api(|| {
        let g = global()?;
        if status.is_null() {
            return Err(INVALID_VALUE);
        }
        let st = g.rt.stream_is_capturing(stream_of(stream))?;
        // SAFETY: the caller's contract.
        unsafe { put(status, st as c_uint) }
    })
}

/// `hipStreamGetCaptureInfo`: `*id` is written only while the capture is active; `id` may be
/// NULL.
///
/// # Safety
/// `status` and `id` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipStreamGetCaptureInfo(stream: Handle, status: *mut c_uint, id: *mut c_ulonglong) -> i32 {
    // SAFETY: forwarded caller contract; the other outputs are NULL.
    unsafe {
        hipStreamGetCaptureInfo_v2(stream, status, id, std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut())
    }
}

/// `hipStreamGetCaptureInfo_v2`: every output but `status` is optional and written only while
/// the capture is active. `*deps` stays valid until this thread's next call of this function.
///
/// # Safety
/// Each pointer is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipStreamGetCaptureInfo_v2(
    stream: Handle,
    status: *mut c_uint,
    id: *mut c_ulonglong,
    graph: *mut Handle,
    deps: *mut *const Handle,
    count: *mut usize,
) -> i32 {
    api(|| {
        let g = global()?;
        if status.is_null() {
            return Err(INVALID_VALUE);
        }
        let info = g.rt.stream_capture_info(stream_of(stream))?;
        // SAFETY: the caller's contract for every pointer; NULL optional outputs are skipped.
        unsafe { put(status, info.status as c_uint)? };
        if info.status != CaptureStatus::Active {
            return Ok(());
        }
        // A capture into an existing graph answers that graph, and its nodes for the stand-ins.
        let into = into_of(info.graph);
        let (shown, base) = into.map_or((info.graph, 0), |i| (i.target, i.base));
        let handles: Vec<Handle> = {
            let mut nodes = lock(&g.nodes);
            let mut of = |n: NodeId| {
                let gr = if n.0 < base { shown } else { info.graph };
                handle(nodes.handle(gr, n.0))
            };
            info.dependencies.as_slice().iter().map(|&n| of(n)).collect()
        };
        let n = handles.len();
        let list = DEPS_OUT
            .try_with(|d| {
                let mut d = d.borrow_mut();
                *d = handles;
                d.as_ptr() as *const Handle
            })
            .unwrap_or(std::ptr::null());
        // SAFETY: the caller's contract; NULL optional outputs are skipped.
        unsafe {
            if !id.is_null() {
                put(id, info.id)?;
            }
            if !graph.is_null() {
                put(graph, handle(shown))?;
            }
            if !deps.is_null() {
                put(deps, list)?;
            }
            if !count.is_null() {
                put(count, n)?;
            }
        }
        Ok(())
    })
}

/// A node id that no graph has (the core rejects it with `hipErrorInvalidValue`).
const NO_NODE: NodeId = NodeId(u16::MAX);

/// Node handles as ids of `graph`; handles of other graphs, NULL and garbage become [`NO_NODE`].
fn node_ids(g: &Global, graph: u64, list: &[Handle]) -> Vec<NodeId> {
    // A capture into an existing graph: that graph's nodes below `base` are the stand-ins.
    let into = into_of(graph);
    let nodes = lock(&g.nodes);
    list.iter()
        .map(|&h| match (nodes.get(h as usize as u64), into) {
            (Some((gr, n)), _) if gr == graph => NodeId(n),
            (Some((gr, n)), Some(i)) if gr == i.target && n < i.base => NodeId(n),
            _ => NO_NODE,
        })
        .collect()
}

/// `hipStreamUpdateCaptureDependencies`: flags `hipStreamAddCaptureDependencies` (0) or
/// `hipStreamSetCaptureDependencies` (1).
///
/// # Safety
/// `deps` is NULL or points at `count` node handles.
#[no_mangle]
pub unsafe extern "C" fn hipStreamUpdateCaptureDependencies(
    stream: Handle,
    deps: *mut Handle,
    count: usize,
    flags: c_uint,
) -> i32 {
    api(|| {
        let g = global()?;
        let s = stream_of(stream);
        let graph =
            g.rt.stream_capture_info(s).ok().filter(|i| i.status == CaptureStatus::Active).map_or(0, |i| i.graph);
        let ids = if deps.is_null() {
            // Checked by core after the stream's state, like HIP: a NULL list of n > 0 nodes.
            vec![NO_NODE; count.min(u16::MAX as usize)]
        } else {
            // SAFETY: the caller's contract: `deps` points at `count` handles.
            let list = unsafe { std::slice::from_raw_parts(deps, count) };
            node_ids(g, graph, list)
        };
        Ok(g.rt.stream_update_capture_dependencies(s, &ids, flags)?)
    })
}

/// `hipThreadExchangeStreamCaptureMode`: swaps the calling thread's mode with `*mode`.
///
/// # Safety
/// `mode` is NULL or valid for reads and writes.
#[no_mangle]
pub unsafe extern "C" fn hipThreadExchangeStreamCaptureMode(mode: *mut c_uint) -> i32 {
    api(|| {
        let g = global()?;
        if mode.is_null() {
            return Err(INVALID_VALUE);
        }
        // SAFETY: non-null and valid by the caller's contract.
        let new = unsafe { mode.read() };
        let old = g.rt.thread_exchange_capture_mode(new)?;
        // SAFETY: as above.
        unsafe { put(mode, old as c_uint) }
    })
}
