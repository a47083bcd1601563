//! Streams and events: creation and destruction, getters, query and synchronisation, event
//! waits, host callbacks and the stream memory operations (docs/hip-semantics.md §2.2, §2.4).

use std::ffi::{c_int, c_uint, c_ulonglong, c_void};

use aqueduct::{EventHandle, HostFn};

use crate::error::{api, INVALID_HANDLE, INVALID_VALUE};
use crate::global::global;
use crate::{handle, put, stream_of, Handle};

fn event_of(e: Handle) -> EventHandle {
    EventHandle(e as usize as u64)
}

/// `hipStreamCreate`.
///
/// # Safety
/// `stream` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipStreamCreate(stream: *mut Handle) -> i32 {
    // SAFETY: forwarded caller contract.
    unsafe { hipStreamCreateWithPriority(stream, 0, 0) }
}

/// `hipStreamCreateWithFlags`: flags 0 (`hipStreamDefault`) or 1 (`hipStreamNonBlocking`).
///
/// # Safety
/// `stream` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipStreamCreateWithFlags(stream: *mut Handle, flags: c_uint) -> i32 {
    // SAFETY: forwarded caller contract.
    unsafe { hipStreamCreateWithPriority(stream, flags, 0) }
}

/// `hipStreamCreateWithPriority`: the priority is clamped into [-1, 1].
///
/// # Safety
/// `stream` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipStreamCreateWithPriority(stream: *mut Handle, flags: c_uint, priority: c_int) -> i32 {
    api(|| {
        let g = global()?;
        if stream.is_null() {
            return Err(INVALID_VALUE);
        }
        let s = g.rt.stream_create_with_priority(flags, priority)?;
        // SAFETY: the caller's contract.
        unsafe { put(stream, handle(s.0)) }
    })
}

/// `hipExtStreamCreateWithCUMask`: a NULL `stream` is `hipErrorInvalidHandle` (as HIP answers).
///
/// # Safety
/// `stream` is NULL or valid for writes; `mask` is NULL or points at `words` dwords.
#[no_mangle]
pub unsafe extern "C" fn hipExtStreamCreateWithCUMask(stream: *mut Handle, words: u32, mask: *const u32) -> i32 {
    api(|| {
        let g = global()?;
        if stream.is_null() {
            return Err(INVALID_HANDLE);
        }
        if words == 0 || mask.is_null() {
            return Err(INVALID_VALUE);
        }
        // SAFETY: the caller's contract: `mask` points at `words` dwords.
        let mask = unsafe { std::slice::from_raw_parts(mask, words as usize) };
        let s = g.rt.stream_create_with_cu_mask(mask)?;
        // SAFETY: the caller's contract.
        unsafe { put(stream, handle(s.0)) }
    })
}

/// `hipExtStreamGetCUMask`: `words` must cover every CU (`ceil(CUs / 32)`).
///
/// # Safety
/// `mask` is NULL or valid for writing `words` dwords.
#[no_mangle]
pub unsafe extern "C" fn hipExtStreamGetCUMask(stream: Handle, words: u32, mask: *mut u32) -> i32 {
    api(|| {
        let g = global()?;
        if mask.is_null() {
            return Err(INVALID_VALUE);
        }
        // SAFETY: the caller's contract: `mask` holds `words` dwords.
        let out = unsafe { std::slice::from_raw_parts_mut(mask, words as usize) };
        Ok(g.rt.stream_cu_mask(stream_of(stream), out)?)
    })
}

/// `hipStreamDestroy`.
#[no_mangle]
pub extern "C" fn hipStreamDestroy(stream: Handle) -> i32 {
    api(|| {
        let g = global()?;
        let origin = crate::capture::origin_of(g, stream);
        g.rt.stream_destroy(stream_of(stream))?;
        crate::stream_attr::forget(stream);
        // A capture torn down with its origin stream gives back what it kept.
        crate::capture::stream_gone(origin);
        Ok(())
    })
}

/// `hipStreamQuery`: `hipSuccess` when the stream's work is done, `hipErrorNotReady` otherwise.
#[no_mangle]
pub extern "C" fn hipStreamQuery(stream: Handle) -> i32 {
    api(|| Ok(global()?.rt.stream_query(stream_of(stream))?))
}

/// `hipStreamSynchronize`.
#[no_mangle]
pub extern "C" fn hipStreamSynchronize(stream: Handle) -> i32 {
    api(|| {
        let g = global()?;
        g.rt.stream_synchronize(stream_of(stream))?;
        g.pools.release_on_sync(&*g.rt);
        Ok(())
    })
}

/// `hipStreamWaitEvent`.
#[no_mangle]
pub extern "C" fn hipStreamWaitEvent(stream: Handle, event: Handle, flags: c_uint) -> i32 {
    api(|| {
        let g = global()?;
        g.pools.wait_event(&*g.rt, stream_of(stream), event_of(event), flags)?;
        // An interprocess event's latest record may be another process's: the stream also
        // waits for its slot on the shared page.
        crate::ipc::stream_wait_event(g, stream_of(stream), event_of(event)).unwrap_or(Ok(()))
    })
}

/// `hipStreamGetFlags`: `0` (and `hipStreamLegacy`) are `hipErrorInvalidValue`, as in HIP.
///
/// # Safety
/// `flags` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipStreamGetFlags(stream: Handle, flags: *mut c_uint) -> i32 {
    api(|| {
        let g = global()?;
        if flags.is_null() || stream.is_null() {
            return Err(INVALID_VALUE);
        }
        let f = g.rt.stream_flags(stream_of(stream))?;
        // SAFETY: the caller's contract.
        unsafe { put(flags, f) }
    })
}

/// `hipStreamGetPriority`.
///
/// # Safety
/// `priority` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipStreamGetPriority(stream: Handle, priority: *mut c_int) -> i32 {
    api(|| {
        let g = global()?;
        if priority.is_null() {
            return Err(INVALID_VALUE);
        }
        let p = g.rt.stream_priority(stream_of(stream))?;
        // SAFETY: the caller's contract.
        unsafe { put(priority, p) }
    })
}

/// `hipStreamGetId` (newer HIP): `0` and `hipStreamLegacy` share the null stream's id.
///
/// # Safety
/// `id` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipStreamGetId(stream: Handle, id: *mut c_ulonglong) -> i32 {
    api(|| {
        let g = global()?;
        if id.is_null() {
            return Err(INVALID_VALUE);
        }
        let v = g.rt.stream_id(stream_of(stream))?;
        // SAFETY: the caller's contract.
        unsafe { put(id, v) }
    })
}

/// `hipStreamGetDevice` (newer HIP).
///
/// # Safety
/// `device` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipStreamGetDevice(stream: Handle, device: *mut c_int) -> i32 {
    api(|| {
        let g = global()?;
        if device.is_null() {
            return Err(INVALID_VALUE);
        }
        let d = g.rt.stream_device(stream_of(stream))?;
        // SAFETY: the caller's contract.
        unsafe { put(device, d as c_int) }
    })
}

/// `hipStreamCallback_t`.
type StreamCallback = unsafe extern "C" fn(u64, i32, *mut c_void);
/// `hipHostFn_t`.
type HostFunction = unsafe extern "C" fn(*mut c_void);

/// `hipStreamAddCallback`: `callback(stream, hipSuccess, user_data)` runs on a host thread after
/// the stream's earlier work; `flags` must be 0.
///
/// # Safety
/// `callback` and `user_data` stay valid until the callback has run.
#[no_mangle]
pub unsafe extern "C" fn hipStreamAddCallback(
    stream: Handle,
    callback: Option<StreamCallback>,
    user_data: *mut c_void,
    flags: c_uint,
) -> i32 {
    api(|| {
        let g = global()?;
        let (Some(func), 0) = (callback, flags) else { return Err(INVALID_VALUE) };
        let f = HostFn::StreamCallback { func, stream: stream as usize as u64, data: user_data };
        Ok(g.rt.launch_host_func(stream_of(stream), f)?)
    })
}

/// `hipLaunchHostFunc`.
///
/// # Safety
/// `func` and `user_data` stay valid until the function has run (at every launch of a graph
/// that captured it).
#[no_mangle]
pub unsafe extern "C" fn hipLaunchHostFunc(stream: Handle, func: Option<HostFunction>, user_data: *mut c_void) -> i32 {
    api(|| {
        let g = global()?;
        let Some(func) = func else { return Err(INVALID_VALUE) };
        Ok(g.rt.launch_host_func(stream_of(stream), HostFn::Plain { func, data: user_data })?)
    })
}

/// `hipStreamWriteValue32`.
///
/// # Safety
/// `ptr` is memory the device can write.
#[no_mangle]
pub unsafe extern "C" fn hipStreamWriteValue32(stream: Handle, ptr: *mut c_void, value: u32, flags: c_uint) -> i32 {
    api(|| Ok(global()?.rt.write_value32(stream_of(stream), ptr as usize as u64, value, flags)?))
}

/// `hipStreamWriteValue64`.
///
/// # Safety
/// `ptr` is memory the device can write.
#[no_mangle]
pub unsafe extern "C" fn hipStreamWriteValue64(stream: Handle, ptr: *mut c_void, value: u64, flags: c_uint) -> i32 {
    api(|| Ok(global()?.rt.write_value64(stream_of(stream), ptr as usize as u64, value, flags)?))
}

/// `hipStreamWaitValue32`: `flags` is the comparison (`hipStreamWaitValueGte` … `Nor`).
///
/// # Safety
/// `ptr` is memory the device can read.
#[no_mangle]
pub unsafe extern "C" fn hipStreamWaitValue32(
    stream: Handle,
    ptr: *mut c_void,
    value: u32,
    flags: c_uint,
    mask: u32,
) -> i32 {
    api(|| Ok(global()?.rt.wait_value32(stream_of(stream), ptr as usize as u64, value, flags, mask)?))
}

/// `hipStreamWaitValue64`.
///
/// # Safety
/// `ptr` is memory the device can read.
#[no_mangle]
pub unsafe extern "C" fn hipStreamWaitValue64(
    stream: Handle,
    ptr: *mut c_void,
    value: u64,
    flags: c_uint,
    mask: u64,
) -> i32 {
    api(|| Ok(global()?.rt.wait_value64(stream_of(stream), ptr as usize as u64, value, flags, mask)?))
}

/// `hipStreamBatchMemOpParams` (newer HIP, CUDA's `CUstreamBatchMemOpParams`; 48 bytes): the
/// operation; a barrier's or flush's flags right after it (offset 4); for the value operations
/// the address (offset 8), the value (16, 32 or 64 bits) and the flags (24); the alias (32) is
/// unused.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct BatchMemOp {
    /// `hipStreamBatchMemOpType`.
    pub operation: c_uint,
    /// A barrier's or flush's flags (padding of the value operations).
    pub op_flags: c_uint,
    /// The address of a value operation.
    pub address: u64,
    /// The value (the low 32 bits for the 32-bit operations).
    pub value: u64,
    /// A wait's comparison (plus CUDA's flush bit) or a write's flags.
    pub flags: c_uint,
    /// CUDA's alias address (unused).
    pub alias: u64,
    /// The rest of the union.
    pub pad: u64,
}
const _: () = assert!(size_of::<BatchMemOp>() == 48);

/// `hipStreamMemOpWaitValue32` … `…Barrier`.
const OP_WAIT_VALUE_32: c_uint = 1;
const OP_WRITE_VALUE_32: c_uint = 2;
const OP_FLUSH_REMOTE_WRITES: c_uint = 3;
const OP_WAIT_VALUE_64: c_uint = 4;
const OP_WRITE_VALUE_64: c_uint = 5;
const OP_BARRIER: c_uint = 6;
/// CUDA's `CU_STREAM_WAIT_VALUE_FLUSH`: flush remote writes before the wait.
const WAIT_FLUSH: c_uint = 1 << 30;
/// CUDA's `CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER`.
const WRITE_NO_MEMORY_BARRIER: c_uint = 1;

/// Whether batch entry `op` is one the device can take: a known operation; for the value
/// operations a non-zero address aligned to the value's size, a wait's comparison Gte … Nor
/// (with CUDA's flush bit or not), a write's flags 0 or no-memory-barrier; a barrier's scope
/// system or device; a flush's flags 0.
fn batch_op_ok(op: &BatchMemOp) -> bool {
    let aligned = |size: u64| op.address != 0 && op.address % size == 0;
    match op.operation {
        OP_WAIT_VALUE_32 => aligned(4) && op.flags & !WAIT_FLUSH <= 3,
        OP_WAIT_VALUE_64 => aligned(8) && op.flags & !WAIT_FLUSH <= 3,
        OP_WRITE_VALUE_32 => aligned(4) && op.flags <= WRITE_NO_MEMORY_BARRIER,
        OP_WRITE_VALUE_64 => aligned(8) && op.flags <= WRITE_NO_MEMORY_BARRIER,
        OP_BARRIER => op.op_flags <= 1,
        OP_FLUSH_REMOTE_WRITES => op.op_flags == 0,
        _ => false,
    }
}

/// `hipStreamBatchMemOp` (newer HIP, CUDA's `cuStreamBatchMemOp`): the `count` operations of
/// `params` in stream order, each as `hipStreamWaitValue32/64` (mask all ones) and
/// `hipStreamWriteValue32/64` do it. Every entry is checked before any is enqueued (a refused
/// batch enqueues nothing): `flags` other than 0, NULL `params` for `count` > 0 or an entry
/// [`batch_op_ok`] refuses is `hipErrorInvalidValue`. A write always orders the device's
/// earlier memory accesses (CUDA's no-memory-barrier flag only allows less); memory barriers and
/// remote-write flushes enqueue nothing: the stream's operations already see each other's
/// memory in order, and no remote (RDMA) writer exists here to flush.
///
/// # Safety
/// `params` is NULL or holds `count` entries; each value operation's address is memory the
/// device can read or write.
#[no_mangle]
pub unsafe extern "C" fn hipStreamBatchMemOp(
    stream: Handle,
    count: c_uint,
    params: *const BatchMemOp,
    flags: c_uint,
) -> i32 {
    api(|| {
        let g = global()?;
        if flags != 0 || (count > 0 && params.is_null()) {
            return Err(INVALID_VALUE);
        }
        let ops: &[BatchMemOp] = if count == 0 {
            &[]
        } else {
            // SAFETY: the caller's contract: `count` entries.
            unsafe { std::slice::from_raw_parts(params, count as usize) }
        };
        if !ops.iter().all(batch_op_ok) {
            return Err(INVALID_VALUE);
        }
        // The stream's own checks (a stale stream enqueues nothing).
        g.rt.stream_priority(stream_of(stream))?;
        let s = stream_of(stream);
        for op in ops {
            let compare = op.flags & !WAIT_FLUSH;
            match op.operation {
                OP_WAIT_VALUE_32 => g.rt.wait_value32(s, op.address, op.value as u32, compare, u32::MAX)?,
                OP_WAIT_VALUE_64 => g.rt.wait_value64(s, op.address, op.value, compare, u64::MAX)?,
                OP_WRITE_VALUE_32 => g.rt.write_value32(s, op.address, op.value as u32, 0)?,
                OP_WRITE_VALUE_64 => g.rt.write_value64(s, op.address, op.value, 0)?,
                _ => {}
            }
        }
        Ok(())
    })
}

// ----- events ----------------------------------------------------------------------------------

/// `hipEventCreate`.
///
/// # Safety
/// `event` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipEventCreate(event: *mut Handle) -> i32 {
    // SAFETY: forwarded caller contract.
    unsafe { hipEventCreateWithFlags(event, 0) }
}

/// `hipEventCreateWithFlags`.
///
/// # Safety
/// `event` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipEventCreateWithFlags(event: *mut Handle, flags: c_uint) -> i32 {
    api(|| {
        let g = global()?;
        if event.is_null() {
            return Err(INVALID_VALUE);
        }
        let e = g.rt.event_create(flags)?;
        crate::ipc::event_created(e, flags);
        // SAFETY: the caller's contract.
        unsafe { put(event, handle(e.0)) }
    })
}

/// `hipEventDestroy`: NULL is `hipErrorInvalidHandle`, a destroyed event
/// `hipErrorContextIsDestroyed`.
#[no_mangle]
pub extern "C" fn hipEventDestroy(event: Handle) -> i32 {
    api(|| {
        let g = global()?;
        g.rt.event_destroy(event_of(event))?;
        crate::ipc::event_destroyed(g, event_of(event));
        Ok(())
    })
}

/// `hipEventRecord`.
#[no_mangle]
pub extern "C" fn hipEventRecord(event: Handle, stream: Handle) -> i32 {
    hipEventRecordWithFlags(event, stream, 0)
}

/// `hipEventRecordWithFlags` (newer HIP): flags `hipEventRecordDefault` or `…External`.
#[no_mangle]
pub extern "C" fn hipEventRecordWithFlags(event: Handle, stream: Handle, flags: c_uint) -> i32 {
    api(|| {
        let g = global()?;
        g.pools.record_event(&*g.rt, event_of(event), stream_of(stream), flags)?;
        crate::ipc::event_recorded(g, event_of(event), stream_of(stream))
    })
}

/// `hipEventQuery`.
#[no_mangle]
pub extern "C" fn hipEventQuery(event: Handle) -> i32 {
    api(|| {
        let g = global()?;
        let r = g.rt.event_query(event_of(event));
        // An interprocess event answers for its latest record in either process.
        match crate::ipc::event_query(event_of(event)) {
            Some(ipc) if r.is_ok() || r == Err(aqueduct::Error::NotReady) => ipc,
            _ => Ok(r?),
        }
    })
}

/// `hipEventSynchronize`.
#[no_mangle]
pub extern "C" fn hipEventSynchronize(event: Handle) -> i32 {
    api(|| {
        let g = global()?;
        g.rt.event_synchronize(event_of(event))?;
        crate::ipc::event_synchronize(event_of(event));
        g.pools.release_on_sync(&*g.rt);
        Ok(())
    })
}

/// `hipEventElapsedTime` in milliseconds.
///
/// # Safety
/// `ms` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipEventElapsedTime(ms: *mut f32, start: Handle, stop: Handle) -> i32 {
    api(|| {
        let g = global()?;
        if ms.is_null() {
            return Err(INVALID_VALUE);
        }
        let t = g.rt.event_elapsed_time(event_of(start), event_of(stop))?;
        // SAFETY: the caller's contract.
        unsafe { put(ms, t) }
    })
}

/// `hipGetStreamDeviceId`: the device of `stream` (the null stream: the calling thread's), or
/// -1 when the stream is not valid.
#[no_mangle]
pub extern "C" fn hipGetStreamDeviceId(stream: Handle) -> c_int {
    let Ok(g) = global() else { return -1 };
    let device = if stream.is_null() { g.rt.device() } else { g.rt.stream_device(stream_of(stream)) };
    device.map_or(-1, |d| d as c_int)
}
