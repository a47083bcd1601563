//! Managed memory: `hipMallocManaged`, `hipMemAdvise`, `hipMemPrefetchAsync`,
//! `hipMemRangeGetAttribute(s)` and `hipStreamAttachMemAsync` (docs/hip-semantics.md §6.3);
//! `crate::register` gives `__managed__` variables such memory.
//!
//! A managed allocation is pinned host memory: the host and every device reach it where it
//! is, so nothing migrates (pointer attributes say it is managed; the devices report
//! `hipDeviceAttributeManagedMemory` 1, as HIP 5.2 does, and
//! `hipDeviceAttributeConcurrentManagedAccess` 0: no page faults, no migration). Advice and prefetches are validated with HIP's error codes and
//! recorded per byte range, and `hipMemRangeGetAttribute` answers what was recorded:
//! read-mostly where every byte of the range was so advised, the preferred and the last
//! prefetch location where every byte agrees (else `hipInvalidDeviceId`), the devices advised
//! to access any byte, and the coherency mode (fine-grained unless advised coarse). A
//! prefetch moves nothing: it is an empty operation in its stream's order, and records its
//! target as the last prefetch location.

use std::collections::BTreeMap;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::{LazyLock, Mutex};

use crate::error::{api, HipResult, INVALID_DEVICE, INVALID_VALUE};
use crate::global::{global, lock, Global};
use crate::memory::{alloc, allocation_of, mark_managed};
use crate::stream_of;
use crate::Handle;

/// `hipMemAttachGlobal`, `hipMemAttachHost`, `hipMemAttachSingle`.
const ATTACH_GLOBAL: c_uint = 0x1;
const ATTACH_HOST: c_uint = 0x2;
const ATTACH_SINGLE: c_uint = 0x4;

/// `hipCpuDeviceId` and `hipInvalidDeviceId`.
const CPU_DEVICE: c_int = -1;
const INVALID_DEVICE_ID: c_int = -2;

/// What was advised and prefetched for one stretch of managed memory.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Advice {
    read_mostly: bool,
    preferred: c_int,
    /// Devices (and `hipCpuDeviceId`) advised to access it.
    accessed_by: Vec<c_int>,
    last_prefetch: c_int,
    coarse: bool,
}

const NONE: Advice = Advice {
    read_mostly: false,
    preferred: INVALID_DEVICE_ID,
    accessed_by: Vec::new(),
    last_prefetch: INVALID_DEVICE_ID,
    coarse: false,
};

/// A managed allocation: its buffer id (`HIP_POINTER_ATTRIBUTE_BUFFER_ID`, unique per
/// allocation, so memory allocated again at a freed managed block's address is not taken for
/// it), its attach flags and its advice, as stretches (each key starts one, which lasts until
/// the next key or the allocation's end).
struct Managed {
    buffer_id: u32,
    bytes: u64,
    attach: c_uint,
    advice: BTreeMap<u64, Advice>,
}

/// Managed allocations by base address.
static MANAGED: LazyLock<Mutex<BTreeMap<u64, Managed>>> = LazyLock::new(Default::default);

/// `hipMallocManaged`: `size` bytes the host and every device reach. `flags` is
/// `hipMemAttachGlobal` or `hipMemAttachHost`; zero bytes is `hipErrorInvalidValue` (as CUDA).
///
/// # Safety
/// `ptr` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipMallocManaged(ptr: *mut *mut c_void, size: usize, flags: c_uint) -> i32 {
    api(|| {
        let g = global()?;
        if ptr.is_null() || size == 0 || (flags != ATTACH_GLOBAL && flags != ATTACH_HOST) {
            return Err(INVALID_VALUE);
        }
        alloc(ptr, size, Some(0))?;
        // SAFETY: `alloc` wrote the address through `ptr`.
        let base = unsafe { ptr.read() } as usize as u64;
        mark_managed(base);
        let a = allocation_of(g, base).ok_or(INVALID_VALUE)?;
        let mut m = lock(&MANAGED);
        // Forget managed allocations freed since.
        m.retain(|&b, x| live(g, b, x));
        let advice = BTreeMap::from([(base, NONE)]);
        m.insert(base, Managed { buffer_id: a.buffer_id, bytes: a.bytes, attach: flags, advice });
        Ok(())
    })
}

/// Whether managed allocation `x` at `base` is still allocated.
fn live(g: &Global, base: u64, x: &Managed) -> bool {
    allocation_of(g, base).is_some_and(|a| a.base == base && a.buffer_id == x.buffer_id)
}

/// The managed allocation holding all of `[ptr, ptr + count)`, by base; anything else (NULL, 0
/// bytes, memory that is not managed, a range past the allocation) is `hipErrorInvalidValue`.
fn managed_range(g: &Global, ptr: *const c_void, count: usize) -> HipResult<(u64, u64, u64)> {
    let start = ptr as usize as u64;
    if start == 0 || count == 0 {
        return Err(INVALID_VALUE);
    }
    let a = allocation_of(g, start).ok_or(INVALID_VALUE)?;
    let end = start.checked_add(count as u64).ok_or(INVALID_VALUE)?;
    let m = lock(&MANAGED);
    match m.get(&a.base) {
        Some(x) if a.buffer_id == x.buffer_id && end <= a.base + x.bytes => Ok((a.base, start, end)),
        _ => Err(INVALID_VALUE),
    }
}

/// Applies `change` to the advice of `[start, end)` of the managed allocation at `base`.
fn paint(base: u64, start: u64, end: u64, change: impl Fn(&mut Advice)) {
    let mut all = lock(&MANAGED);
    let Some(m) = all.get_mut(&base) else { return };
    let at = |adv: &BTreeMap<u64, Advice>, x: u64| adv.range(..=x).next_back().map_or(NONE, |(_, a)| a.clone());
    // Split at both ends, then change every stretch inside.
    let tail = at(&m.advice, end);
    if end < base + m.bytes {
        m.advice.entry(end).or_insert(tail);
    }
    let head = at(&m.advice, start);
    m.advice.entry(start).or_insert(head);
    for (_, a) in m.advice.range_mut(start..end) {
        change(a);
    }
    // Merge neighbours that became equal.
    let mut previous: Option<Advice> = None;
    let mut same = Vec::new();
    for (&k, a) in &m.advice {
        if previous.as_ref() == Some(a) {
            same.push(k);
        } else {
            previous = Some(a.clone());
        }
    }
    for k in same {
        m.advice.remove(&k);
    }
}

/// The stretches of advice over `[start, end)` of the managed allocation at `base`.
fn stretches(base: u64, start: u64, end: u64) -> Vec<Advice> {
    let all = lock(&MANAGED);
    let Some(m) = all.get(&base) else { return Vec::new() };
    let first = m.advice.range(..=start).next_back().map(|(_, a)| a.clone());
    first.into_iter().chain(m.advice.range(start + 1..end).map(|(_, a)| a.clone())).collect()
}

/// A device a location argument may name: a device of this machine or `hipCpuDeviceId`.
fn check_location(g: &Global, device: c_int) -> HipResult {
    if device == CPU_DEVICE {
        return Ok(());
    }
    let count = g.rt.device_count()?;
    if device < 0 || device as usize >= count as usize {
        return Err(INVALID_DEVICE);
    }
    Ok(())
}

/// `hipMemAdvise`: records `advice` (`hipMemoryAdvise`) for a range of managed memory. The
/// location advices check `device` (a device or `hipCpuDeviceId`, else
/// `hipErrorInvalidDevice`); an unknown advice is `hipErrorInvalidValue`.
#[no_mangle]
pub extern "C" fn hipMemAdvise(ptr: *const c_void, count: usize, advice: c_int, device: c_int) -> i32 {
    api(|| {
        let g = global()?;
        let (base, start, end) = managed_range(g, ptr, count)?;
        if matches!(advice, 3 | 5 | 6) {
            check_location(g, device)?;
        }
        match advice {
            1 => paint(base, start, end, |a| a.read_mostly = true),
            2 => paint(base, start, end, |a| a.read_mostly = false),
            3 => paint(base, start, end, |a| a.preferred = device),
            4 => paint(base, start, end, |a| a.preferred = INVALID_DEVICE_ID),
            5 => paint(base, start, end, |a| {
                if !a.accessed_by.contains(&device) {
                    a.accessed_by.push(device);
                    a.accessed_by.sort_unstable();
                }
            }),
            6 => paint(base, start, end, |a| a.accessed_by.retain(|&d| d != device)),
            100 => paint(base, start, end, |a| a.coarse = true),
            101 => paint(base, start, end, |a| a.coarse = false),
            _ => return Err(INVALID_VALUE),
        }
        Ok(())
    })
}

/// `hipMemPrefetchAsync`: checks the range and the target (a device or `hipCpuDeviceId`),
/// queues a copy of nothing in the stream's order (the memory is already where every device
/// reaches it) and records the target as the range's last prefetch location.
#[no_mangle]
pub extern "C" fn hipMemPrefetchAsync(ptr: *const c_void, count: usize, device: c_int, stream: Handle) -> i32 {
    api(|| {
        let g = global()?;
        let (base, start, end) = managed_range(g, ptr, count)?;
        check_location(g, device)?;
        // A copy of nothing, in the stream's order (recorded by a capturing stream).
        g.rt.memcpy_async(stream_of(stream), 1, 1, 0)?;
        paint(base, start, end, |a| a.last_prefetch = device);
        Ok(())
    })
}

/// The value of `hipMemRangeAttribute` `attr` over `[ptr, ptr + count)`, written into `data`
/// of `size` bytes: 4 bytes for every attribute but `hipMemRangeAttributeAccessedBy`, which
/// takes a multiple of 4 and is filled with the devices, then `hipInvalidDeviceId`.
///
/// # Safety
/// `data` is valid for writing `size` bytes.
unsafe fn range_attribute(
    g: &Global,
    data: *mut c_void,
    size: usize,
    attr: c_int,
    ptr: *const c_void,
    count: usize,
) -> HipResult {
    if data.is_null() || size == 0 {
        return Err(INVALID_VALUE);
    }
    let (base, start, end) = managed_range(g, ptr, count)?;
    let s = stretches(base, start, end);
    let agree = |f: fn(&Advice) -> c_int| {
        let v = s.first().map_or(INVALID_DEVICE_ID, f);
        if s.iter().all(|a| f(a) == v) {
            v
        } else {
            INVALID_DEVICE_ID
        }
    };
    let words: Vec<c_int> = match attr {
        1 => vec![c_int::from(s.iter().all(|a| a.read_mostly))],
        2 => vec![agree(|a| a.preferred)],
        3 => {
            if size % 4 != 0 {
                return Err(INVALID_VALUE);
            }
            let mut devices: Vec<c_int> = s.iter().flat_map(|a| a.accessed_by.iter().copied()).collect();
            devices.sort_unstable();
            devices.dedup();
            devices.resize((size / 4).max(devices.len()), INVALID_DEVICE_ID);
            devices.truncate(size / 4);
            devices
        }
        4 => vec![agree(|a| a.last_prefetch)],
        100 => {
            let coarse = s.iter().filter(|a| a.coarse).count();
            vec![if coarse == 0 {
                0
            } else if coarse == s.len() {
                1
            } else {
                2
            }]
        }
        _ => return Err(INVALID_VALUE),
    };
    if attr != 3 && size != 4 {
        return Err(INVALID_VALUE);
    }
    // SAFETY: the caller's contract: `size` bytes, and `words` holds `size / 4` values.
    unsafe { std::ptr::copy_nonoverlapping(words.as_ptr().cast::<u8>(), data.cast::<u8>(), words.len() * 4) };
    Ok(())
}

/// `hipMemRangeGetAttribute`.
///
/// # Safety
/// `data` is NULL or valid for writing `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn hipMemRangeGetAttribute(
    data: *mut c_void,
    size: usize,
    attr: c_int,
    ptr: *const c_void,
    count: usize,
) -> i32 {
    // SAFETY: forwarded caller contract.
    api(|| unsafe { range_attribute(global()?, data, size, attr, ptr, count) })
}

/// `hipMemRangeGetAttributes`: `hipMemRangeGetAttribute` for each of `n` attributes.
///
/// # Safety
/// `data`, `sizes` and `attrs` are NULL or hold `n` entries, each `data[i]` valid for writing
/// `sizes[i]` bytes.
#[no_mangle]
pub unsafe extern "C" fn hipMemRangeGetAttributes(
    data: *mut *mut c_void,
    sizes: *mut usize,
    attrs: *mut c_int,
    n: usize,
    ptr: *const c_void,
    count: usize,
) -> i32 {
    api(|| {
        let g = global()?;
        if data.is_null() || sizes.is_null() || attrs.is_null() || n == 0 {
            return Err(INVALID_VALUE);
        }
        for i in 0..n {
            // SAFETY: the caller's contract: `n` entries each.
            let (d, size, attr) = unsafe { (*data.add(i), *sizes.add(i), *attrs.add(i)) };
            // SAFETY: the caller's contract.
            unsafe { range_attribute(g, d, size, attr, ptr, count) }?;
        }
        Ok(())
    })
}

/// `hipStreamAttachMemAsync`: attaches managed memory to `stream` (`hipMemAttachSingle`), to
/// the host or to every stream; `length` is 0 or the whole allocation, `ptr` its start. The
/// flags are recorded; every device and the host reach the memory whatever they say.
#[no_mangle]
pub extern "C" fn hipStreamAttachMemAsync(stream: Handle, ptr: *mut c_void, length: usize, flags: c_uint) -> i32 {
    api(|| {
        let g = global()?;
        if !matches!(flags, ATTACH_GLOBAL | ATTACH_HOST | ATTACH_SINGLE) {
            return Err(INVALID_VALUE);
        }
        g.rt.stream_device(stream_of(stream))?;
        let base = ptr as usize as u64;
        let mut m = lock(&MANAGED);
        let x = m.get_mut(&base).filter(|x| live(g, base, x)).ok_or(INVALID_VALUE)?;
        if length != 0 && length as u64 != x.bytes {
            return Err(INVALID_VALUE);
        }
        x.attach = flags;
        Ok(())
    })
}
