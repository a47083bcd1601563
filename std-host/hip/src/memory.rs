//! Memory: allocation, copies and fills (docs/hip-semantics.md, "Memory").
//!
//! Copies between memory of this runtime (`hipMalloc`, `hipHostMalloc`) run on the device. The
//! device cannot reach pageable host memory (`malloc`, the stack), so a copy from or to it goes
//! through pinned staging memory, and the host blocks as HIP's does (docs/hip-semantics.md,
//! "Pageable host memory"):
//!
//! - `hipMemcpyAsync` from pageable memory to the device of at most 1 MiB returns once the
//!   source has been copied into a staging buffer of its own (the source may be reused at once);
//!   the device copy runs in stream order and the buffer is reused after it completes;
//! - larger ones, and every copy to pageable memory, return once the copy has completed, after
//!   the stream's earlier work (chunks through one 4 MiB staging buffer);
//! - synchronous copies always complete before they return.
//!
//! These waits are the runtime's own (HIP's `queue->finish()`), not `hipStreamSynchronize`: an
//! asynchronous copy of pageable memory on a stream that is not capturing is legal while another
//! stream captures, and invalidates nothing. A capturing stream records the copy as it is; the
//! graph stages it at every launch (`crate::graph`).
//!
//! `hipFree` waits for the work of the memory's device before the block goes back, as HIP's
//! does: a kernel still running cannot write into memory handed out again. Memory of a pool
//! (`hipMallocAsync`) goes back to its pool, reusable at once by any stream.
//!
//! Pageable memory registered with `hipHostRegister` (`crate::host_register`) is not staged: a
//! copy or fill of a range inside a registration runs on the device at its device address.

use std::collections::HashMap;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::{LazyLock, Mutex};

use aqueduct::mempool::{Freed, Mark, PoolHost};
use aqueduct::{Backend, CaptureStatus, MemoryKind, StreamHandle};

use crate::error::{
    api, Hip, HipResult, INVALID_MEMCPY_DIRECTION, INVALID_PITCH, INVALID_VALUE, NOT_SUPPORTED, OUT_OF_MEMORY,
};
use crate::global::{global, lock, Global, STAGING_BYTES};
use crate::host_register::{device_view, Registration};
use crate::{put, stream_of, Handle};

/// `hipHostMallocCoherent` / `hipHostMallocNonCoherent`.
const HOST_MALLOC_COHERENT: c_uint = 0x4000_0000;
const HOST_MALLOC_NON_COHERENT: c_uint = 0x8000_0000;
/// Every `hipHostMalloc*` flag bit.
const HOST_MALLOC_FLAGS: c_uint = 0x1 | 0x2 | 0x4 | 0x2000_0000 | HOST_MALLOC_COHERENT | HOST_MALLOC_NON_COHERENT;

/// Allocates `bytes` of device memory (`host`: `None`) or of pinned host memory with the
/// `hipHostMalloc` flags `host`, and writes the address through `ptr` (NULL for zero bytes).
/// More than the backend can give is `hipErrorOutOfMemory`, whatever the size (HIP's answer,
/// `hipMalloc(SIZE_MAX)` too).
pub(crate) fn alloc(ptr: *mut *mut c_void, bytes: usize, host: Option<c_uint>) -> HipResult {
    let g = global()?;
    let device = g.rt.device()?;
    let out_of_memory = |e: aqueduct::Error| match e {
        aqueduct::Error::InvalidValue => OUT_OF_MEMORY,
        e => Hip::from(e),
    };
    let addr = if bytes == 0 {
        // HIP gives NULL for a zero-byte request (after the capture checks an allocation makes).
        g.rt.free(0)?;
        0
    } else if host.is_some() {
        g.rt.host_malloc(bytes).map_err(out_of_memory)?
    } else {
        let total = crate::properties::properties(g, device)?.totalGlobalMem;
        if total != 0 && bytes > total {
            g.rt.free(0)?;
            return Err(OUT_OF_MEMORY);
        }
        g.rt.malloc(bytes).map_err(out_of_memory)?
    };
    if addr != 0 {
        lock(&g.allocs).insert(addr, (bytes as u64, device));
        lock(&HOST_FLAGS).remove(&addr);
        if let Some(flags) = host {
            lock(&HOST_FLAGS).insert(addr, flags);
        }
        let id = crate::global::next_buffer_id();
        lock(&BUFFER_IDS).insert(addr, id);
    }
    // SAFETY: `ptr` was checked non-null by the caller of this helper, which holds the C
    // contract that it is valid for writes.
    unsafe { put(ptr, addr as usize as *mut c_void) }
}

/// The flags of each `hipHostMalloc` allocation (for `hipPointerGetAttributes`).
static HOST_FLAGS: LazyLock<Mutex<HashMap<u64, c_uint>>> = LazyLock::new(Default::default);

/// Each allocation's buffer id (`HIP_POINTER_ATTRIBUTE_BUFFER_ID`).
static BUFFER_IDS: LazyLock<Mutex<HashMap<u64, u32>>> = LazyLock::new(Default::default);

/// An allocation of this runtime holding `addr`: its start, bytes, device, `hipHostMalloc`
/// flags (`None` for device memory) and buffer id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Allocation {
    pub(crate) base: u64,
    pub(crate) bytes: u64,
    pub(crate) device: u32,
    pub(crate) host_flags: Option<c_uint>,
    pub(crate) buffer_id: u32,
    /// Managed memory (`hipMallocManaged`, `crate::managed`).
    pub(crate) managed: bool,
    /// Registered host memory (`hipHostRegister`): `base` is the registration's host or device
    /// address, whichever the lookup named.
    pub(crate) registered: Option<Registration>,
}

impl Allocation {
    /// The device address of `ptr` (an address inside this allocation).
    pub(crate) fn device_pointer(&self, ptr: u64) -> u64 {
        match self.registered {
            Some(r) => r.device_address + (ptr - self.base),
            None => ptr,
        }
    }

    /// The host address of `ptr`, for host memory (pinned or registered).
    pub(crate) fn host_pointer(&self, ptr: u64) -> Option<u64> {
        match (self.registered, self.host_flags) {
            (Some(r), _) => Some(r.host + (ptr - self.base)),
            (None, Some(_)) => Some(ptr),
            (None, None) => None,
        }
    }
}

/// The buffer ids of managed allocations (`hipMallocManaged` marks them).
static MANAGED: LazyLock<Mutex<std::collections::HashSet<u32>>> = LazyLock::new(Default::default);

/// Marks the allocation at `base` as managed memory.
pub(crate) fn mark_managed(base: u64) {
    if let Some(&id) = lock(&BUFFER_IDS).get(&base) {
        lock(&MANAGED).insert(id);
    }
}

/// Whether `[addr, addr + bytes)` lies inside one allocation of this runtime, a loaded image,
/// a registration's device range or mapped virtual memory (memory the device can reach);
/// pageable host memory, registered or not, does not (a registered range is reached at its
/// device address).
pub(crate) fn device_reachable(g: &Global, addr: u64, bytes: u64) -> bool {
    let inside = |start: u64, len: u64| addr.saturating_add(bytes) <= start.saturating_add(len.max(1));
    let allocs = lock(&g.allocs);
    if allocs.range(..=addr).next_back().is_some_and(|(&start, &(len, _))| inside(start, len)) {
        return true;
    }
    drop(allocs);
    lock(&g.images).range(..=addr).next_back().is_some_and(|(&start, &len)| inside(start, len))
        || crate::host_register::in_device_range(addr, bytes)
        || crate::virtual_memory::in_mapped_range(addr, bytes)
        || crate::ipc_opened::in_opened_range(addr, bytes)
}

/// The allocation holding `addr` (any address inside it), if any; a registration
/// (`hipHostRegister`) holding it in its host or its device range counts as one, and so does a
/// mapping of virtual memory (`hipMemMap`).
pub(crate) fn allocation_of(g: &Global, addr: u64) -> Option<Allocation> {
    let found = {
        let allocs = lock(&g.allocs);
        allocs.range(..=addr).next_back().filter(|(&base, &(len, _))| addr < base + len.max(1)).map(|(&b, &v)| (b, v))
    };
    let Some((base, (bytes, device))) = found else {
        let (r, base) = match crate::host_register::by_host(addr) {
            Some(r) => (r, r.host),
            None => match crate::host_register::by_device(addr) {
                Some(r) => (r, r.device_address),
                None => {
                    let (base, bytes, device, buffer_id) = match crate::virtual_memory::mapping_of(addr) {
                        Some(m) => (m.base, m.bytes, m.device, m.buffer_id),
                        None => {
                            let o = crate::ipc_opened::holding(addr)?;
                            (o.va, o.bytes, o.device, o.buffer_id)
                        }
                    };
                    return Some(Allocation {
                        base,
                        bytes,
                        device,
                        host_flags: None,
                        buffer_id,
                        managed: false,
                        registered: None,
                    });
                }
            },
        };
        return Some(Allocation {
            base,
            bytes: r.bytes,
            device: r.device,
            host_flags: Some(r.flags),
            buffer_id: r.buffer_id,
            managed: false,
            registered: Some(r),
        });
    };
    let host_flags = lock(&HOST_FLAGS).get(&base).copied();
    let buffer_id = lock(&BUFFER_IDS).get(&base).copied().unwrap_or(0);
    let managed = lock(&MANAGED).contains(&buffer_id);
    Some(Allocation { base, bytes, device, host_flags, buffer_id, managed, registered: None })
}

/// `hipFree` / `hipHostFree`: NULL is a no-op (after the capture-mode check an allocation
/// makes); memory not allocated here is `hipErrorInvalidValue`; otherwise the memory's device
/// finishes its work first.
pub(crate) fn free(p: *mut c_void) -> HipResult {
    let g = global()?;
    let addr = p as usize as u64;
    g.rt.free(0)?;
    if addr == 0 {
        return Ok(());
    }
    // The entry is taken before the memory goes back: once it has, another thread's allocation
    // may be handed the same address and record it, and that record must stay.
    let entry = lock(&g.allocs).remove(&addr);
    let restore = || {
        if let Some(v) = entry {
            lock(&g.allocs).insert(addr, v);
        }
    };
    let freed = g.pools.free(&*g.rt, addr).inspect_err(|_| restore())?;
    match freed {
        Freed::Pooled => return Ok(()),
        Freed::Graph => {
            restore();
            return Ok(());
        }
        Freed::NotPooled => {}
    }
    let device = entry.map(|(_, d)| d).ok_or(INVALID_VALUE)?;
    g.wait_idle_on(device).inspect_err(|_| restore())?;
    let host_flags = lock(&HOST_FLAGS).remove(&addr);
    let buffer = lock(&BUFFER_IDS).remove(&addr);
    if let Err(e) = g.rt.free(addr) {
        if let Some(f) = host_flags {
            lock(&HOST_FLAGS).insert(addr, f);
        }
        if let Some(id) = buffer {
            lock(&BUFFER_IDS).insert(addr, id);
        }
        restore();
        return Err(e.into());
    }
    if let Some(id) = buffer {
        lock(&MANAGED).remove(&id);
    }
    Ok(())
}

/// `hipMalloc`: zero bytes gives NULL.
///
/// # Safety
/// `ptr` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipMalloc(ptr: *mut *mut c_void, bytes: usize) -> i32 {
    api(|| {
        global()?;
        if ptr.is_null() {
            return Err(INVALID_VALUE);
        }
        alloc(ptr, bytes, None)
    })
}

/// `hipHostMalloc`: pinned host memory the device can reach.
///
/// # Safety
/// `ptr` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipHostMalloc(ptr: *mut *mut c_void, bytes: usize, flags: c_uint) -> i32 {
    api(|| {
        global()?;
        let both = HOST_MALLOC_COHERENT | HOST_MALLOC_NON_COHERENT;
        if ptr.is_null() || flags & !HOST_MALLOC_FLAGS != 0 || flags & both == both {
            return Err(INVALID_VALUE);
        }
        alloc(ptr, bytes, Some(flags))
    })
}

/// `hipFree`: NULL is a no-op; memory not from `hipMalloc` is `hipErrorInvalidValue`; the
/// memory's device finishes its work before the memory goes.
#[no_mangle]
pub extern "C" fn hipFree(ptr: *mut c_void) -> i32 {
    api(|| free(ptr))
}

/// `hipHostFree`: as `hipFree`.
#[no_mangle]
pub extern "C" fn hipHostFree(ptr: *mut c_void) -> i32 {
    api(|| free(ptr))
}

/// `hipMemcpyKind` values 0 (`HostToHost`) to 4 (`Default`).
pub(crate) fn check_kind(kind: c_uint) -> HipResult {
    if kind > 4 {
        return Err(INVALID_MEMCPY_DIRECTION);
    }
    Ok(())
}

/// Copies through the staging buffer when either side is pageable, running each device copy
/// with `copy(dst, src, bytes)` (which also synchronises). `Ok(false)` when both sides are
/// device-reachable and nothing was done.
fn staged(g: &Global, dst: u64, src: u64, bytes: u64, copy: impl Fn(u64, u64, u64) -> HipResult) -> HipResult<bool> {
    let (dst_dev, src_dev) =
        (crate::memory::device_reachable(g, dst, bytes), crate::memory::device_reachable(g, src, bytes));
    if dst_dev && src_dev {
        return Ok(false);
    }
    if !dst_dev && !src_dev {
        // SAFETY: both ranges are host memory the C caller handed us for this copy.
        unsafe { std::ptr::copy(src as usize as *const u8, dst as usize as *mut u8, bytes as usize) };
        return Ok(true);
    }
    let staging = lock(&g.staging);
    if *staging == 0 {
        return Err(INVALID_VALUE);
    }
    let mut off = 0;
    while off < bytes {
        let n = (bytes - off).min(STAGING_BYTES as u64);
        if src_dev {
            copy(*staging, src + off, n)?;
            // SAFETY: the staging buffer holds `n` bytes just written by the device copy, which
            // has completed; `dst + off` is the caller's host memory.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    *staging as usize as *const u8,
                    (dst + off) as usize as *mut u8,
                    n as usize,
                )
            };
        } else {
            // SAFETY: `src + off` is the caller's host memory; the staging buffer holds `n` bytes
            // and no device copy is using it (the lock is held and earlier copies completed).
            unsafe {
                std::ptr::copy_nonoverlapping(
                    (src + off) as usize as *const u8,
                    *staging as usize as *mut u8,
                    n as usize,
                )
            };
            copy(dst + off, *staging, n)?;
        }
        off += n;
    }
    Ok(true)
}

/// The check of synchronous copies: `hipErrorStreamCaptureImplicit` (and every capture
/// invalidated) while any capture is active. A fill of nothing on the null stream makes exactly
/// that check, and the null stream's own.
pub(crate) fn check_capturing(g: &Global) -> HipResult {
    Ok(g.rt.memset(1, 0, 0)?)
}

/// A synchronous copy on the null stream: device-reachable memory on the device, pageable
/// memory staged; complete on return.
pub(crate) fn memcpy_sync(g: &Global, d: u64, s: u64, n: u64) -> HipResult {
    let (d, s) = (device_view(d, n), device_view(s, n));
    // The capture check, the null-stream ordering and the NULL checks, with nothing to copy.
    g.rt.memcpy(d, s, 0)?;
    if !staged(g, d, s, n, |d, s, n| Ok(g.rt.memcpy(d, s, n)?))? {
        g.rt.memcpy(d, s, n)?;
    }
    Ok(())
}

/// `hipMemcpy`: synchronous; any active capture makes it `hipErrorStreamCaptureImplicit`.
///
/// # Safety
/// `dst` and `src` are valid for `bytes` bytes.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpy(dst: *mut c_void, src: *const c_void, bytes: usize, kind: c_uint) -> i32 {
    api(|| {
        let g = global()?;
        check_kind(kind)?;
        memcpy_sync(g, dst as usize as u64, src as usize as u64, bytes as u64)
    })
}

/// Pageable-to-device copies up to this size return once the source is staged.
pub(crate) const ASYNC_STAGED_MAX: u64 = 1 << 20;
/// Staging memory that asynchronous pageable copies may hold in flight at once; past it they
/// wait for their stream as larger copies do.
const ASYNC_STAGING_BUDGET: u64 = 64 << 20;
/// Smallest staging buffer made for them.
const ASYNC_STAGING_MIN: u64 = 64 << 10;

/// A pinned buffer for one asynchronous pageable copy, busy until its mark has passed.
struct AsyncStaging {
    address: u64,
    bytes: u64,
    busy: Option<Mark>,
}

/// The buffers of asynchronous pageable copies (kept for reuse).
static ASYNC_STAGING: LazyLock<Mutex<Vec<AsyncStaging>>> = LazyLock::new(Default::default);

/// A pageable-to-device copy of at most [`ASYNC_STAGED_MAX`] bytes: the source goes into a
/// staging buffer now, the device copy runs in `stream`'s order, and the buffer stays busy until
/// it has. `Ok(false)` when the staging budget is spent (nothing done).
fn staged_async(g: &Global, stream: StreamHandle, d: u64, s: u64, n: u64) -> HipResult<bool> {
    let mut bufs = lock(&ASYNC_STAGING);
    for b in bufs.iter_mut() {
        if let Some(m) = b.busy {
            if g.rt.mark_done(m) {
                g.rt.forget(m);
                b.busy = None;
            }
        }
    }
    let k = match bufs.iter().position(|b| b.busy.is_none() && b.bytes >= n) {
        Some(k) => k,
        None => {
            let bytes = n.max(ASYNC_STAGING_MIN).next_power_of_two();
            let held: u64 = bufs.iter().map(|b| b.bytes).sum();
            if held + bytes > ASYNC_STAGING_BUDGET {
                return Ok(false);
            }
            let address = g.rt.backend().memory_alloc(0, bytes as usize, MemoryKind::Host)?;
            bufs.push(AsyncStaging { address, bytes, busy: None });
            bufs.len() - 1
        }
    };
    let buf = bufs.get_mut(k).ok_or(INVALID_VALUE)?;
    // SAFETY: `s` is the caller's pageable memory of `n` bytes; the buffer holds at least `n`
    // bytes and no device copy uses it (it is not busy).
    unsafe { std::ptr::copy_nonoverlapping(s as usize as *const u8, buf.address as usize as *mut u8, n as usize) };
    g.rt.memcpy_async(stream, d, buf.address, n)?;
    let device = g.rt.stream_device(stream)?;
    buf.busy = g.rt.mark(stream, device)?;
    Ok(true)
}

/// Copies on `stream`: device-reachable memory in stream order; pageable memory as the module
/// docs say. A capturing stream records the copy as it is.
pub(crate) fn memcpy_on(g: &Global, stream: StreamHandle, d: u64, s: u64, n: u64) -> HipResult {
    let (d, s) = (device_view(d, n), device_view(s, n));
    // The stream's checks (stale, detached, invalidated capture) and the NULL checks.
    g.rt.memcpy_async(stream, d, s, 0)?;
    let (dst_dev, src_dev) = (crate::memory::device_reachable(g, d, n), crate::memory::device_reachable(g, s, n));
    let capturing = g.rt.stream_is_capturing(stream).is_ok_and(|st| st != CaptureStatus::None);
    if (dst_dev && src_dev) || capturing || n == 0 {
        return Ok(g.rt.memcpy_async(stream, d, s, n)?);
    }
    if dst_dev && n <= ASYNC_STAGED_MAX && staged_async(g, stream, d, s, n)? {
        return Ok(());
    }
    g.rt.stream_wait_idle(stream)?;
    staged(g, d, s, n, |d, s, n| {
        g.rt.memcpy_async(stream, d, s, n)?;
        Ok(g.rt.stream_wait_idle(stream)?)
    })?;
    Ok(())
}

/// `hipMemcpyAsync`.
///
/// # Safety
/// `dst` and `src` are valid for `bytes` bytes until the copy has run.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyAsync(
    dst: *mut c_void,
    src: *const c_void,
    bytes: usize,
    kind: c_uint,
    stream: Handle,
) -> i32 {
    api(|| {
        let g = global()?;
        check_kind(kind)?;
        memcpy_on(g, stream_of(stream), dst as usize as u64, src as usize as u64, bytes as u64)
    })
}

/// `hipMemLocation`: a location type and an id (hints only here).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MemLocation {
    /// `hipMemLocationType`.
    pub kind: c_int,
    /// Device or NUMA node.
    pub id: c_int,
}

/// `hipMemcpyAttributes` (newer HIP, CUDA's `cudaMemcpyAttributes`; 24 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MemcpyAttributes {
    /// `hipMemcpySrcAccessOrder`: Stream 1, DuringApiCall 2, Any 3 (0 is invalid).
    pub src_access_order: c_int,
    /// Where the source lies (a hint).
    pub src_loc_hint: MemLocation,
    /// Where the destination lies (a hint).
    pub dst_loc_hint: MemLocation,
    /// 0 or `hipMemcpyFlagPreferOverlapWithCompute` (1, a hint).
    pub flags: c_uint,
}
const _: () = assert!(size_of::<MemcpyAttributes>() == 24);

/// `hipMemcpySrcAccessOrderStream` … `…Any`.
const ORDER_STREAM: c_int = 1;
const ORDER_DURING_API_CALL: c_int = 2;
const ORDER_ANY: c_int = 3;

/// `hipMemcpyBatchAsync` (newer HIP, CUDA's `cudaMemcpyBatchAsync`): copies `i` of `count`
/// (`sizes[i]` bytes from `srcs[i]` to `dsts[i]`, direction from the pointers) on `stream` in
/// order, each with the attributes of the last `attrs_idxs` entry at or before it
/// (`attrs_idxs[0]` is 0, the indices increase, `num_attrs` is 1 to `count`). Source order
/// Stream and Any read the source in stream order; DuringApiCall reads it before the call
/// returns: pageable memory as every copy of it does (staged, or copied, before the return), a
/// source the device reaches by a copy that waits for the stream's earlier work and completes
/// before the return (stronger than CUDA's out-of-order read: a stream still waiting for the
/// host then blocks the call); on a capturing stream `hipErrorNotSupported`. Location hints and the overlap flag are hints. Errors are
/// `hipErrorInvalidValue` with `*fail_idx` (if not NULL) the failing copy's index, or
/// `SIZE_MAX` for one of the batch as a whole; the attributes and every copy's pointers are
/// checked before any copy is enqueued. Empty copies move nothing.
///
/// # Safety
/// `dsts`, `srcs` and `sizes` are NULL or hold `count` entries, `attrs` and `attrs_idxs` NULL
/// or `num_attrs`; `fail_idx` is NULL or valid for writes; each copy's memory is valid for its
/// size until the copy has run.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn hipMemcpyBatchAsync(
    dsts: *const *mut c_void,
    srcs: *const *const c_void,
    sizes: *const usize,
    count: usize,
    attrs: *const MemcpyAttributes,
    attrs_idxs: *const usize,
    num_attrs: usize,
    fail_idx: *mut usize,
    stream: Handle,
) -> i32 {
    let failed = std::cell::Cell::new(usize::MAX);
    let code = api(|| {
        let g = global()?;
        let fail_at = |i: usize| {
            failed.set(i);
            INVALID_VALUE
        };
        if count == 0 || dsts.is_null() || srcs.is_null() || sizes.is_null() {
            return Err(INVALID_VALUE);
        }
        if num_attrs == 0 || num_attrs > count || attrs.is_null() || attrs_idxs.is_null() {
            return Err(INVALID_VALUE);
        }
        // SAFETY: the caller's contract: `count` and `num_attrs` entries.
        let (dsts, srcs, sizes, attrs, idxs) = unsafe {
            (
                std::slice::from_raw_parts(dsts, count),
                std::slice::from_raw_parts(srcs, count),
                std::slice::from_raw_parts(sizes, count),
                std::slice::from_raw_parts(attrs, num_attrs),
                std::slice::from_raw_parts(attrs_idxs, num_attrs),
            )
        };
        if idxs[0] != 0 || idxs.windows(2).any(|w| w[0] >= w[1]) || idxs[num_attrs - 1] >= count {
            return Err(INVALID_VALUE);
        }
        let known = |a: &MemcpyAttributes| (ORDER_STREAM..=ORDER_ANY).contains(&a.src_access_order) && a.flags <= 1;
        if !attrs.iter().all(known) {
            return Err(INVALID_VALUE);
        }
        for i in 0..count {
            if sizes[i] > 0 && (dsts[i].is_null() || srcs[i].is_null()) {
                return Err(fail_at(i));
            }
        }
        let s = stream_of(stream);
        // The stream's checks before anything is enqueued (an empty copy between non-NULL
        // addresses moves nothing).
        g.rt.memcpy_async(s, 1, 1, 0)?;
        let capturing = g.rt.stream_is_capturing(s).is_ok_and(|st| st != CaptureStatus::None);
        if capturing && attrs.iter().any(|a| a.src_access_order == ORDER_DURING_API_CALL) {
            return Err(NOT_SUPPORTED);
        }
        let mut a = 0;
        for i in 0..count {
            while a + 1 < num_attrs && idxs[a + 1] <= i {
                a += 1;
            }
            let (d, src, n) = (dsts[i] as usize as u64, srcs[i] as usize as u64, sizes[i] as u64);
            if n == 0 {
                continue;
            }
            // A pageable source is read before memcpy_on returns (staged or copied); a source
            // the device reaches (registered memory too) is read by the device, so the copy
            // completes before the return.
            let during = attrs[a].src_access_order == ORDER_DURING_API_CALL;
            let copied = if during && crate::memory::device_reachable(g, device_view(src, n), n) {
                g.rt.stream_wait_idle(s)
                    .map_err(Into::into)
                    .and_then(|()| memcpy_on(g, s, d, src, n))
                    .and_then(|()| Ok(g.rt.stream_wait_idle(s)?))
            } else {
                memcpy_on(g, s, d, src, n)
            };
            if let Err(e) = copied {
                failed.set(i);
                return Err(e);
            }
        }
        Ok(())
    });
    if code != 0 && !fail_idx.is_null() {
        // SAFETY: the caller's contract.
        unsafe { fail_idx.write(failed.get()) };
    }
    code
}

/// `hipMemcpyWithStream`: a copy on `stream` that has completed on return; as a synchronous
/// copy it is `hipErrorStreamCaptureImplicit` while any capture is active.
///
/// # Safety
/// `dst` and `src` are valid for `bytes` bytes.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyWithStream(
    dst: *mut c_void,
    src: *const c_void,
    bytes: usize,
    kind: c_uint,
    stream: Handle,
) -> i32 {
    api(|| {
        let g = global()?;
        check_kind(kind)?;
        let (d, s) = (dst as usize as u64, src as usize as u64);
        g.rt.memcpy(d, s, 0)?;
        let stream = stream_of(stream);
        memcpy_on(g, stream, d, s, bytes as u64)?;
        Ok(g.rt.stream_synchronize(stream)?)
    })
}

/// HIP's check of a fill: nothing to fill is fine; NULL, memory not allocated here and a
/// range past the allocation are `hipErrorInvalidValue`.
fn check_fill(g: &Global, dst: u64, bytes: u64) -> HipResult<bool> {
    if bytes == 0 {
        return Ok(false);
    }
    if dst == 0 || !crate::memory::device_reachable(g, dst, bytes) {
        return Err(INVALID_VALUE);
    }
    Ok(true)
}

/// A synchronous fill of `count` elements of `size` bytes: capture check, then on the null
/// stream, complete on return.
fn memset_sync(dst: *mut c_void, value: u32, size: u32, count: usize) -> HipResult {
    let g = global()?;
    check_capturing(g)?;
    let bytes = count as u64 * u64::from(size);
    let dst = device_view(dst as usize as u64, bytes);
    if !check_fill(g, dst, bytes)? {
        return Ok(());
    }
    g.rt.memset_async(StreamHandle::NULL, dst, value, size, count as u64)?;
    Ok(g.rt.stream_synchronize(StreamHandle::LEGACY)?)
}

/// A fill in `stream`'s order (recorded when it captures).
pub(crate) fn memset_on(dst: *mut c_void, value: u32, size: u32, count: usize, stream: Handle) -> HipResult {
    let g = global()?;
    let bytes = count as u64 * u64::from(size);
    let dst = device_view(dst as usize as u64, bytes);
    if !check_fill(g, dst, bytes)? {
        // The stream's own checks still apply.
        return Ok(g.rt.memset_async(stream_of(stream), 1, 0, 1, 0)?);
    }
    Ok(g.rt.memset_async(stream_of(stream), dst, value, size, count as u64)?)
}

/// A synchronous operation in `stream`'s order, `stream` being the null stream or the
/// calling thread's per-thread stream (HIP's `_spt` functions): the check of synchronous
/// copies (any active capture: `hipErrorStreamCaptureImplicit`), `work` on the stream, then a
/// wait for the stream (for the null stream, as `hipStreamSynchronize(hipStreamLegacy)`).
pub(crate) fn synchronously(g: &Global, stream: StreamHandle, work: impl FnOnce(Handle) -> HipResult) -> HipResult {
    g.rt.check_sync_copy()?;
    work(crate::handle(stream.0))?;
    let wait = if stream == StreamHandle::NULL { StreamHandle::LEGACY } else { stream };
    g.rt.stream_synchronize(wait)?;
    g.pools.release_on_sync(&*g.rt);
    Ok(())
}

/// `hipMemset`: synchronous byte fill.
///
/// # Safety
/// `dst` is device-reachable memory of at least `bytes` bytes.
#[no_mangle]
pub unsafe extern "C" fn hipMemset(dst: *mut c_void, value: c_int, bytes: usize) -> i32 {
    api(|| memset_sync(dst, u32::from(value as u8), 1, bytes))
}

/// `hipMemsetAsync`: byte fill in stream order.
///
/// # Safety
/// `dst` is device-reachable memory of at least `bytes` bytes.
#[no_mangle]
pub unsafe extern "C" fn hipMemsetAsync(dst: *mut c_void, value: c_int, bytes: usize, stream: Handle) -> i32 {
    api(|| memset_on(dst, u32::from(value as u8), 1, bytes, stream))
}

/// `hipMemsetD8`: `count` bytes, synchronous.
#[no_mangle]
pub extern "C" fn hipMemsetD8(dst: *mut c_void, value: u8, count: usize) -> i32 {
    api(|| memset_sync(dst, u32::from(value), 1, count))
}

/// `hipMemsetD16`: `count` 16-bit words, synchronous.
#[no_mangle]
pub extern "C" fn hipMemsetD16(dst: *mut c_void, value: u16, count: usize) -> i32 {
    api(|| memset_sync(dst, u32::from(value), 2, count))
}

/// `hipMemsetD32`: `count` 32-bit words, synchronous.
#[no_mangle]
pub extern "C" fn hipMemsetD32(dst: *mut c_void, value: c_int, count: usize) -> i32 {
    api(|| memset_sync(dst, value as u32, 4, count))
}

/// `hipMemsetD8Async`.
#[no_mangle]
pub extern "C" fn hipMemsetD8Async(dst: *mut c_void, value: u8, count: usize, stream: Handle) -> i32 {
    api(|| memset_on(dst, u32::from(value), 1, count, stream))
}

/// `hipMemsetD16Async`.
#[no_mangle]
pub extern "C" fn hipMemsetD16Async(dst: *mut c_void, value: u16, count: usize, stream: Handle) -> i32 {
    api(|| memset_on(dst, u32::from(value), 2, count, stream))
}

/// `hipMemsetD32Async`: `count` 32-bit words in stream order.
#[no_mangle]
pub extern "C" fn hipMemsetD32Async(dst: *mut c_void, value: c_int, count: usize, stream: Handle) -> i32 {
    api(|| memset_on(dst, value as u32, 4, count, stream))
}

/// A synchronous copy of a fixed direction (`hipMemcpyHtoD` …): capture check, then as
/// `hipMemcpy`.
fn copy_sync(dst: *mut c_void, src: *const c_void, bytes: usize) -> HipResult {
    let g = global()?;
    check_capturing(g)?;
    memcpy_sync(g, dst as usize as u64, src as usize as u64, bytes as u64)
}

fn copy_on(dst: *mut c_void, src: *const c_void, bytes: usize, stream: Handle) -> HipResult {
    let g = global()?;
    memcpy_on(g, stream_of(stream), dst as usize as u64, src as usize as u64, bytes as u64)
}

/// `hipMemcpyHtoD`.
///
/// # Safety
/// `dst` and `src` are valid for `bytes` bytes.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyHtoD(dst: *mut c_void, src: *mut c_void, bytes: usize) -> i32 {
    api(|| copy_sync(dst, src, bytes))
}

/// `hipMemcpyDtoH`.
///
/// # Safety
/// `dst` and `src` are valid for `bytes` bytes.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyDtoH(dst: *mut c_void, src: *mut c_void, bytes: usize) -> i32 {
    api(|| copy_sync(dst, src, bytes))
}

/// `hipMemcpyDtoD`.
///
/// # Safety
/// `dst` and `src` are valid for `bytes` bytes.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyDtoD(dst: *mut c_void, src: *mut c_void, bytes: usize) -> i32 {
    api(|| copy_sync(dst, src, bytes))
}

/// `hipMemcpyHtoDAsync`.
///
/// # Safety
/// `dst` and `src` are valid for `bytes` bytes until the copy has run.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyHtoDAsync(dst: *mut c_void, src: *mut c_void, bytes: usize, stream: Handle) -> i32 {
    api(|| copy_on(dst, src, bytes, stream))
}

/// `hipMemcpyDtoHAsync`.
///
/// # Safety
/// `dst` and `src` are valid for `bytes` bytes until the copy has run.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyDtoHAsync(dst: *mut c_void, src: *mut c_void, bytes: usize, stream: Handle) -> i32 {
    api(|| copy_on(dst, src, bytes, stream))
}

/// `hipMemcpyDtoDAsync`.
///
/// # Safety
/// `dst` and `src` are valid for `bytes` bytes until the copy has run.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyDtoDAsync(dst: *mut c_void, src: *mut c_void, bytes: usize, stream: Handle) -> i32 {
    api(|| copy_on(dst, src, bytes, stream))
}

/// The rows `(dst, src, bytes)` of a 2-D copy: one when both pitches equal the width.
fn rows_2d(dst: u64, dpitch: usize, src: u64, spitch: usize, width: usize, height: usize) -> Vec<(u64, u64, u64)> {
    if dpitch == width && spitch == width {
        return vec![(dst, src, (width * height) as u64)];
    }
    (0..height).map(|r| (dst + (r * dpitch) as u64, src + (r * spitch) as u64, width as u64)).collect()
}

/// HIP's checks of a 2-D copy, after the kind: nothing to copy is fine; a width past either
/// pitch is `hipErrorInvalidPitchValue`.
fn check_2d(kind: c_uint, dpitch: usize, spitch: usize, width: usize, height: usize) -> HipResult<bool> {
    if kind > 4 && kind != 1024 {
        return Err(INVALID_MEMCPY_DIRECTION);
    }
    if width == 0 || height == 0 {
        return Ok(false);
    }
    if width > dpitch || width > spitch {
        return Err(INVALID_PITCH);
    }
    Ok(true)
}

/// `hipMemcpy2D`: synchronous, row by row where the pitches differ from the width.
///
/// # Safety
/// `dst` and `src` are valid for `height` rows of their pitch.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpy2D(
    dst: *mut c_void,
    dpitch: usize,
    src: *const c_void,
    spitch: usize,
    width: usize,
    height: usize,
    kind: c_uint,
) -> i32 {
    api(|| {
        let g = global()?;
        check_capturing(g)?;
        if !check_2d(kind, dpitch, spitch, width, height)? {
            return Ok(());
        }
        for (d, s, n) in rows_2d(dst as usize as u64, dpitch, src as usize as u64, spitch, width, height) {
            memcpy_sync(g, d, s, n)?;
        }
        Ok(())
    })
}

/// `hipMemcpy2DAsync`.
///
/// # Safety
/// `dst` and `src` are valid for `height` rows of their pitch until the copy has run.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpy2DAsync(
    dst: *mut c_void,
    dpitch: usize,
    src: *const c_void,
    spitch: usize,
    width: usize,
    height: usize,
    kind: c_uint,
    stream: Handle,
) -> i32 {
    api(|| {
        let g = global()?;
        if !check_2d(kind, dpitch, spitch, width, height)? {
            return Ok(g.rt.memcpy_async(stream_of(stream), 1, 1, 0)?);
        }
        for (d, s, n) in rows_2d(dst as usize as u64, dpitch, src as usize as u64, spitch, width, height) {
            memcpy_on(g, stream_of(stream), d, s, n)?;
        }
        Ok(())
    })
}

/// `hipHostGetDevicePointer`: memory of this runtime has the same address on the device;
/// registered memory (`hipHostRegister`) has the registration's device address, at the same
/// offset; `flags` must be 0; other memory is `hipErrorInvalidValue`.
///
/// # Safety
/// `device_ptr` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipHostGetDevicePointer(
    device_ptr: *mut *mut c_void,
    host: *mut c_void,
    flags: c_uint,
) -> i32 {
    api(|| {
        let g = global()?;
        if device_ptr.is_null() || flags != 0 {
            return Err(INVALID_VALUE);
        }
        let addr = host as usize as u64;
        if let Some(r) = crate::host_register::by_host(addr) {
            let device = (r.device_address + (addr - r.host)) as usize as *mut c_void;
            // SAFETY: the caller's contract.
            return unsafe { put(device_ptr, device) };
        }
        if host.is_null() || !crate::memory::device_reachable(g, addr, 1) {
            return Err(INVALID_VALUE);
        }
        // SAFETY: the caller's contract.
        unsafe { put(device_ptr, host) }
    })
}

/// `hipPointerAttribute_t` of HIP 5.2.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PointerAttributes {
    memory_type: c_int,
    device: c_int,
    device_pointer: *mut c_void,
    host_pointer: *mut c_void,
    is_managed: c_int,
    allocation_flags: c_uint,
}

/// `hipMemoryTypeHost` / `hipMemoryTypeDevice` (HIP 5.2's numbering).
const MEMORY_HOST: c_int = 0;
const MEMORY_DEVICE: c_int = 1;

/// `hipPointerGetAttributes`: for memory of this runtime (any address inside an allocation or a
/// registration, by its host or device address), its type, device and addresses (registered
/// memory: host memory, its host and device addresses at the same offset, the `hipHostRegister`
/// flags); NULL and other memory are `hipErrorInvalidValue` (HIP 5.2's
/// answer: its memory-type enum has no "unregistered").
///
/// # Safety
/// `attr` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipPointerGetAttributes(attr: *mut PointerAttributes, ptr: *const c_void) -> i32 {
    api(|| {
        let g = global()?;
        if attr.is_null() || ptr.is_null() {
            return Err(INVALID_VALUE);
        }
        let addr = ptr as usize as u64;
        let a = allocation_of(g, addr).ok_or(INVALID_VALUE)?;
        let a = PointerAttributes {
            memory_type: if a.host_flags.is_some() { MEMORY_HOST } else { MEMORY_DEVICE },
            device: a.device as c_int,
            device_pointer: a.device_pointer(addr) as usize as *mut c_void,
            host_pointer: a.host_pointer(addr).map_or(std::ptr::null_mut(), |h| h as usize as *mut c_void),
            is_managed: c_int::from(a.managed),
            allocation_flags: a.host_flags.unwrap_or(0),
        };
        // SAFETY: the caller's contract.
        unsafe { put(attr, a) }
    })
}

/// `hipMemGetInfo`: the device's memory, and what of it this process has not allocated; either
/// pointer may be NULL.
///
/// # Safety
/// Each pointer is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipMemGetInfo(free: *mut usize, total: *mut usize) -> i32 {
    api(|| {
        let g = global()?;
        if free.is_null() && total.is_null() {
            return Ok(());
        }
        let device = g.rt.device()?;
        let size = crate::properties::properties(g, device)?.totalGlobalMem as u64;
        let used: u64 = {
            let host = lock(&HOST_FLAGS);
            lock(&g.allocs)
                .iter()
                .filter(|(a, &(_, d))| d == device && !host.contains_key(a))
                .map(|(_, &(n, _))| n)
                .sum()
        };
        // SAFETY: the caller's contract; NULL pointers are skipped.
        unsafe {
            if !free.is_null() {
                put(free, size.saturating_sub(used) as usize)?;
            }
            if !total.is_null() {
                put(total, size as usize)?;
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn host_malloc_flags_cover_hips() {
        assert_eq!(super::HOST_MALLOC_FLAGS, 0xe000_0007);
    }
}
