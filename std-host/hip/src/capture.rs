//! Stream capture (docs/hip-semantics.md §2.3, §2.5, §4): begin/end, status queries, dependency
//! updates, the thread's capture mode. The graph a capture records is core's until the capture
//! ends; then [`crate::graph`] takes it over under the same handle. Graph nodes get C handles
//! from the node table in [`crate::global`].

use std::cell::RefCell;
use std::ffi::{c_uint, c_ulonglong};

use aqueduct::{CaptureStatus, NodeId};

use crate::error::{api, Hip, CAPTURE_INVALIDATED, CAPTURE_UNJOINED, INVALID_VALUE};
use crate::global::{global, lock, Global};
use crate::{handle, put, stream_of, Handle};

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
        let adopted = ended.map_err(Hip::from).and_then(|h| crate::graph::adopt_captured(g, h).map(|_| h));
        crate::graph::sweep_capture_owners(g);
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
        let handles: Vec<Handle> = {
            let mut nodes = lock(&g.nodes);
            info.dependencies.as_slice().iter().map(|n| handle(nodes.handle(info.graph, n.0))).collect()
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
                put(graph, handle(info.graph))?;
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
    let nodes = lock(&g.nodes);
    list.iter()
        .map(|&h| match nodes.get(h as usize as u64) {
            Some((gr, n)) if gr == graph => NodeId(n),
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
