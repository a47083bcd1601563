//! Stream capture (docs/hip-semantics.md §2.3, §2.5, §4): begin/end (also into an existing
//! graph), status queries, dependency updates, the thread's capture mode. The graph a capture
//! records is core's until the capture ends; then [`crate::graph`] takes it over under the same
//! handle. Graph nodes get C handles from the node table in [`crate::global`].
//!
//! What this layer keeps of a capture beside core ([`Capture`]) lives with the capture, by its
//! origin stream, from begin to end: the memory of its graph allocations and, for a capture into
//! an existing graph, its stand-in graph and hold on the target. The capture ending, or its
//! origin stream's destruction tearing it down, gives them back.

use std::cell::RefCell;
use std::ffi::{c_uint, c_ulonglong};
use std::sync::{LazyLock, Mutex};

use aqueduct::{CaptureStatus, GraphHandle, NodeId};

use crate::error::{api, Hip, HipResult, CAPTURE_INVALIDATED, CAPTURE_UNJOINED, INVALID_VALUE, NOT_SUPPORTED};
use crate::global::{global, lock, Global};
use crate::graph::{lease_target, CaptureInto, GraphMemory, Recorder, TargetLease};
use crate::{handle, put, stream_of, Handle};

/// A capture begun here, as this layer keeps it while it lasts.
struct Capture {
    /// Its origin stream's id (`hipStreamGetId`; a per-thread stream's own).
    stream: u64,
    /// The core graph it records.
    graph: u64,
    /// A capture into an existing graph: the target and how many stand-ins `graph` starts with,
    /// and its hold on the target.
    into: Option<(CaptureInto, TargetLease)>,
    /// The memory of its graph allocations, from the first one on.
    memory: Option<GraphMemory>,
}

impl Drop for Capture {
    /// A capture that never became a graph: its memory goes back (the field's drop), and so
    /// does the stand-in of a capture into an existing graph (core's teardown leaves a graph it
    /// did not make).
    fn drop(&mut self) {
        if self.into.take().is_some() {
            if let Ok(g) = global() {
                let _ = g.rt.graph_destroy(GraphHandle(self.graph));
            }
        }
    }
}

/// The captures begun here and not yet ended, a handful at a time. A leaf lock: nothing is
/// called while it is held, and a [`Capture`] is dropped after it is released.
static CAPTURES: LazyLock<Mutex<Vec<Capture>>> = LazyLock::new(Default::default);

/// Keeps capture `c`, begun on its origin stream. Captures core tore down without this layer
/// seeing it go: one this stream began before (its context destroyed), and any whose graph core
/// no longer has (its per-thread stream gone with its thread, its context destroyed).
fn keep(g: &Global, c: Capture) {
    let graphs: Vec<u64> = lock(&CAPTURES).iter().map(|o| o.graph).collect();
    // Asked outside the leaf lock; a graph core no longer has never comes back.
    let gone: Vec<u64> = graphs.into_iter().filter(|&h| g.rt.graph_node_count(GraphHandle(h)).is_err()).collect();
    let mut captures = lock(&CAPTURES);
    let mut stale = Vec::new();
    let mut k = 0;
    while k < captures.len() {
        let o = &captures[k];
        if (c.stream != 0 && o.stream == c.stream) || gone.contains(&o.graph) {
            stale.push(captures.swap_remove(k));
        } else {
            k += 1;
        }
    }
    captures.push(c);
    drop(captures);
    drop(stale);
}

/// Takes the capture whose origin stream has id `stream`, if this layer keeps one.
fn take_by_stream(stream: u64) -> Option<Capture> {
    let mut captures = lock(&CAPTURES);
    let k = captures.iter().position(|c| c.stream == stream)?;
    Some(captures.swap_remove(k))
}

/// Takes the capture recording core graph `graph`, if this layer keeps it.
fn take_by_graph(graph: u64) -> Option<Capture> {
    let mut captures = lock(&CAPTURES);
    let k = captures.iter().position(|c| c.graph == graph)?;
    Some(captures.swap_remove(k))
}

/// The target of the capture recording core graph `graph`, if it records into an existing
/// graph.
fn into_of(graph: u64) -> Option<CaptureInto> {
    lock(&CAPTURES).iter().find(|c| c.graph == graph).and_then(|c| c.into.as_ref().map(|i| i.0))
}

/// The capture recording core graph `graph` made a graph allocation: from now on it holds the
/// memory that core's pools name by `graph`.
fn note_allocation(graph: u64) {
    let mut captures = lock(&CAPTURES);
    if let Some(c) = captures.iter_mut().find(|c| c.graph == graph) {
        c.memory.get_or_insert_with(|| GraphMemory::new(graph));
    }
}

/// Refuses stream-ordered allocation and freeing on a stream capturing into an existing graph:
/// the memory would belong to core's stand-in graph, not to the target.
pub(crate) fn refuse_memory_nodes(g: &Global, stream: Handle) -> HipResult {
    match g.rt.stream_capture_info(stream_of(stream)) {
        Ok(info) if info.status == CaptureStatus::Active && into_of(info.graph).is_some() => Err(NOT_SUPPORTED),
        _ => Ok(()),
    }
}

/// An allocation made on `stream` (origin or fork of a capture) is a graph allocation of its
/// capture: the capture holds its memory until it becomes a graph, or gives it back.
pub(crate) fn note_graph_allocation(g: &Global, stream: Handle) {
    if let Ok(info) = g.rt.stream_capture_info(stream_of(stream)) {
        if info.status == CaptureStatus::Active {
            note_allocation(info.graph);
        }
    }
}

/// The id a capture whose origin is `stream` is kept by (0, matching none, for a stale
/// stream).
pub(crate) fn origin_of(g: &Global, stream: Handle) -> u64 {
    g.rt.stream_id(stream_of(stream)).unwrap_or(0)
}

/// The stream with id `stream` was destroyed: a capture it was the origin of was torn down
/// with it (a fork's destruction leaves the capture), and goes here too.
pub(crate) fn stream_gone(stream: u64) {
    if stream != 0 {
        drop(take_by_stream(stream));
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
        let core = g.rt.graph_create()?;
        let lease = match lease_target(target, Recorder { stream: stream as usize as u64, core: core.0 }) {
            Ok(lease) => lease,
            Err(e) => {
                let _ = g.rt.graph_destroy(core);
                return Err(e);
            }
        };
        let begun = (0..base)
            .try_for_each(|_| g.rt.graph_add_empty_node(core, &[]).map(|_| ()))
            .and_then(|()| g.rt.stream_begin_capture_to_graph(stream_of(stream), core, &ids, mode));
        if let Err(e) = begun {
            drop(lease);
            let _ = g.rt.graph_destroy(core);
            return Err(e.into());
        }
        let into = Some((CaptureInto { target, base }, lease));
        keep(g, Capture { stream: origin_of(g, stream), graph: core.0, into, memory: None });
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
    api(|| {
        let g = global()?;
        g.rt.stream_begin_capture(stream_of(stream), mode)?;
        let graph = g.rt.stream_capture_info(stream_of(stream)).map_or(0, |i| i.graph);
        keep(g, Capture { stream: origin_of(g, stream), graph, into: None, memory: None });
        Ok(())
    })
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
        let adopted = match g.rt.stream_end_capture(stream_of(stream)) {
            Ok(h) => {
                // What the capture kept goes to the graph it became.
                let mut kept = take_by_graph(h.0);
                let (into, memory) = kept.as_mut().map_or((None, None), |c| (c.into.take(), c.memory.take()));
                drop(kept);
                match into {
                    Some((into, lease)) => {
                        let merged = crate::graph::merge_captured(g, h, into).map(GraphHandle);
                        drop(lease);
                        merged
                    }
                    None => crate::graph::adopt_captured(g, h, memory).map(|_| h),
                }
            }
            Err(e) => {
                let e = Hip::from(e);
                // Core tore the capture down: what it kept goes back.
                if e == CAPTURE_INVALIDATED || e == CAPTURE_UNJOINED {
                    drop(take_by_stream(origin_of(g, stream)));
                }
                Err(e)
            }
        };
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
