//! Driver-style device queries and settings: `hipInit`, the driver and runtime versions,
//! `hipDeviceGet`, the name, memory, compute capability, PCI location and UUID of a device,
//! `hipChooseDevice`, the cache and shared-memory preferences, device flags and the peer-link
//! attributes (docs/hip-semantics.md §9).
//!
//! Answers follow Debian's HIP 5.2 on the same emulated GPU, except where the newest HIP checks
//! more (README, "Where aqueduct's answer differs from HIP 5.2's"): `hipInit` wants flags 0, and
//! `hipDeviceGet(NULL, …)` is `hipErrorInvalidValue`. The cache and shared-memory
//! configurations are hints AMD devices ignore: any value is accepted, and the answer stays
//! `hipFuncCachePreferNone` and `hipSharedMemBankSizeFourByte`, as HIP's does.

use std::ffi::{c_char, c_int, c_uint, CStr};
use std::sync::atomic::{AtomicU32, Ordering};

use aqueduct::MAX_DEVICES;

use crate::device::checked_device;
use crate::error::{api, HipResult, INVALID_DEVICE, INVALID_VALUE};
use crate::global::{global, Global};
use crate::properties::{properties, topology_value, DeviceProp};
use crate::put;

/// What `hipDriverGetVersion` and `hipRuntimeGetVersion` answer: Debian's HIP 5.2.3
/// (`HIP_VERSION_MAJOR * 10000000 + HIP_VERSION_MINOR * 100000 + HIP_VERSION_PATCH`, the patch
/// being its build number 21153).
pub(crate) const HIP_VERSION: c_int = 50_221_153;

/// `hipInit`: `flags` must be 0 (the newest HIP's check; HIP 5.2 ignores them); brings the
/// runtime up, so a machine without a device answers `hipErrorNoDevice`.
#[no_mangle]
pub extern "C" fn hipInit(flags: c_uint) -> i32 {
    api(|| {
        if flags != 0 {
            return Err(INVALID_VALUE);
        }
        global()?.rt.device_count()?;
        Ok(())
    })
}

/// `hipDriverGetVersion`.
///
/// # Safety
/// `version` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipDriverGetVersion(version: *mut c_int) -> i32 {
    // SAFETY: the caller's contract.
    api(|| unsafe { put(version, HIP_VERSION) })
}

/// `hipRuntimeGetVersion`.
///
/// # Safety
/// `version` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipRuntimeGetVersion(version: *mut c_int) -> i32 {
    // SAFETY: the caller's contract.
    api(|| unsafe { put(version, HIP_VERSION) })
}

/// `hipDeviceGet`: the device of ordinal `ordinal` is `ordinal` itself.
///
/// # Safety
/// `device` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipDeviceGet(device: *mut c_int, ordinal: c_int) -> i32 {
    api(|| {
        let g = global()?;
        if device.is_null() {
            return Err(INVALID_VALUE);
        }
        let d = checked_device(g, ordinal)?;
        // SAFETY: the caller's contract.
        unsafe { put(device, d as c_int) }
    })
}

/// The properties of `device` once the C arguments are known good.
fn props(g: &Global, device: c_int) -> HipResult<std::sync::Arc<DeviceProp>> {
    properties(g, checked_device(g, device)?)
}

/// `hipDeviceGetName`: `len` must hold the whole name and its NUL (HIP 5.2 answers
/// `hipErrorInvalidValue` rather than truncating).
///
/// # Safety
/// `name` is NULL or valid for writing `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn hipDeviceGetName(name: *mut c_char, len: c_int, device: c_int) -> i32 {
    api(|| {
        let g = global()?;
        if name.is_null() || len <= 0 {
            return Err(INVALID_VALUE);
        }
        let p = props(g, device)?;
        // SAFETY: `name` of the properties is NUL-terminated within its 256 bytes.
        let bytes = unsafe { CStr::from_ptr(p.name.as_ptr()) }.to_bytes_with_nul();
        if bytes.len() > len as usize {
            return Err(INVALID_VALUE);
        }
        // SAFETY: `name` holds `len` bytes (the caller's contract), at least `bytes.len()`.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr().cast::<c_char>(), name, bytes.len()) };
        Ok(())
    })
}

/// `hipDeviceTotalMem`: the device's memory, as `totalGlobalMem`.
///
/// # Safety
/// `bytes` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipDeviceTotalMem(bytes: *mut usize, device: c_int) -> i32 {
    api(|| {
        let g = global()?;
        if bytes.is_null() {
            return Err(INVALID_VALUE);
        }
        let total = props(g, device)?.totalGlobalMem;
        // SAFETY: the caller's contract.
        unsafe { put(bytes, total) }
    })
}

/// `hipDeviceComputeCapability`: `major` and `minor` of the properties (9.0 for gfx90a).
///
/// # Safety
/// Each pointer is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipDeviceComputeCapability(major: *mut c_int, minor: *mut c_int, device: c_int) -> i32 {
    api(|| {
        let g = global()?;
        if major.is_null() || minor.is_null() {
            return Err(INVALID_VALUE);
        }
        let p = props(g, device)?;
        // SAFETY: the caller's contract.
        unsafe {
            put(major, p.major)?;
            put(minor, p.minor)
        }
    })
}

/// `domain:bus:device.function` of `device`, as HIP prints it (`0000:03:00.0`).
fn pci_bus_id(g: &Global, device: u32) -> HipResult<String> {
    let p = properties(g, device)?;
    let function = topology_value(g, device, "location_id").unwrap_or(0) & 7;
    Ok(format!("{:04x}:{:02x}:{:02x}.{:x}", p.pciDomainID, p.pciBusID, p.pciDeviceID, function))
}

/// `hipDeviceGetPCIBusId`: truncated to `len - 1` characters and a NUL when `len` is short, as
/// `snprintf` does (HIP's answer).
///
/// # Safety
/// `bus_id` is NULL or valid for writing `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn hipDeviceGetPCIBusId(bus_id: *mut c_char, len: c_int, device: c_int) -> i32 {
    api(|| {
        let g = global()?;
        if bus_id.is_null() || len <= 0 {
            return Err(INVALID_VALUE);
        }
        let text = pci_bus_id(g, checked_device(g, device)?)?;
        let n = text.len().min(len as usize - 1);
        // SAFETY: `bus_id` holds `len` bytes (the caller's contract): `n` characters and a NUL.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr().cast::<c_char>(), bus_id, n);
            bus_id.add(n).write(0);
        }
        Ok(())
    })
}

/// `(domain, bus, device, function)` of `[domain:]bus:device.function`, hexadecimal.
fn parse_bus_id(s: &str) -> Option<(u64, u64, u64, u64)> {
    let hex = |t: &str| u64::from_str_radix(t.trim(), 16).ok();
    let (head, function) = s.trim_end_matches('\0').rsplit_once('.')?;
    let parts: Vec<&str> = head.split(':').collect();
    let (domain, bus, dev) = match parts.as_slice() {
        [d, b, v] => (hex(d)?, hex(b)?, hex(v)?),
        [b, v] => (0, hex(b)?, hex(v)?),
        _ => return None,
    };
    Some((domain, bus, dev, hex(function)?))
}

/// `hipDeviceGetByPCIBusId`: the device at `[domain:]bus:device.function`; a string naming no
/// device is `hipErrorInvalidValue`.
///
/// # Safety
/// `device` is NULL or valid for writes; `bus_id` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn hipDeviceGetByPCIBusId(device: *mut c_int, bus_id: *const c_char) -> i32 {
    api(|| {
        let g = global()?;
        if device.is_null() || bus_id.is_null() {
            return Err(INVALID_VALUE);
        }
        // SAFETY: the caller's contract: a NUL-terminated string.
        let wanted = unsafe { CStr::from_ptr(bus_id) }.to_str().ok().and_then(parse_bus_id).ok_or(INVALID_VALUE)?;
        for d in 0..g.rt.device_count()? {
            if parse_bus_id(&pci_bus_id(g, d)?) == Some(wanted) {
                // SAFETY: the caller's contract.
                return unsafe { put(device, d as c_int) };
            }
        }
        Err(INVALID_VALUE)
    })
}

/// `hipUUID`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Uuid {
    bytes: [c_char; 16],
}

/// `hipDeviceGetUuid`: as ROCr's agent UUID, the 16 hexadecimal digits of the topology node's
/// `unique_id` (as characters, which is what HIP 5.2 copies into the 16 bytes).
///
/// # Safety
/// `uuid` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipDeviceGetUuid(uuid: *mut Uuid, device: c_int) -> i32 {
    api(|| {
        let g = global()?;
        if uuid.is_null() {
            return Err(INVALID_VALUE);
        }
        let d = checked_device(g, device)?;
        let id = format!("{:016x}", topology_value(g, d, "unique_id").unwrap_or(0));
        let mut bytes = [0 as c_char; 16];
        for (b, c) in bytes.iter_mut().zip(id.bytes()) {
            *b = c as c_char;
        }
        // SAFETY: the caller's contract.
        unsafe { put(uuid, Uuid { bytes }) }
    })
}

/// How well `have` meets the non-zero fields of `want` (larger is better); `None` when it
/// falls short of one (a different `major`/`minor`, or less of a resource).
fn fit(want: &DeviceProp, have: &DeviceProp) -> Option<u32> {
    let mut score = 0;
    let mut at_least = |w: usize, h: usize| {
        if w != 0 {
            if h < w {
                return false;
            }
            score += 1;
        }
        true
    };
    let int = |v: c_int| v.max(0) as usize;
    let ok = at_least(want.totalGlobalMem, have.totalGlobalMem)
        && at_least(want.sharedMemPerBlock, have.sharedMemPerBlock)
        && at_least(int(want.regsPerBlock), int(have.regsPerBlock))
        && at_least(int(want.maxThreadsPerBlock), int(have.maxThreadsPerBlock))
        && at_least(want.totalConstMem, have.totalConstMem)
        && at_least(int(want.multiProcessorCount), int(have.multiProcessorCount))
        && at_least(int(want.maxThreadsPerMultiProcessor), int(have.maxThreadsPerMultiProcessor))
        && at_least(int(want.clockRate), int(have.clockRate))
        && at_least(int(want.memoryClockRate), int(have.memoryClockRate))
        && at_least(int(want.memoryBusWidth), int(have.memoryBusWidth))
        && at_least(int(want.l2CacheSize), int(have.l2CacheSize))
        && at_least(want.maxSharedMemoryPerMultiProcessor, have.maxSharedMemoryPerMultiProcessor);
    for (w, h) in [(want.major, have.major), (want.minor, have.minor)] {
        if w != 0 {
            if w != h {
                return None;
            }
            score += 1;
        }
    }
    ok.then_some(score)
}

/// `hipChooseDevice`: the device meeting most of the non-zero fields of `prop` (the first
/// such, and device 0 when none meets them all).
///
/// # Safety
/// `device` is NULL or valid for writes; `prop` is NULL or a valid `hipDeviceProp_t`.
#[no_mangle]
pub unsafe extern "C" fn hipChooseDevice(device: *mut c_int, prop: *const DeviceProp) -> i32 {
    api(|| {
        let g = global()?;
        if device.is_null() || prop.is_null() {
            return Err(INVALID_VALUE);
        }
        // SAFETY: non-null, and a valid struct by the caller's contract.
        let want = unsafe { &*prop };
        let mut best: Option<(u32, u32)> = None;
        for d in 0..g.rt.device_count()? {
            if let Some(score) = fit(want, &*properties(g, d)?) {
                if best.is_none_or(|(_, s)| score > s) {
                    best = Some((d, score));
                }
            }
        }
        // SAFETY: the caller's contract.
        unsafe { put(device, best.map_or(0, |(d, _)| d as c_int)) }
    })
}

/// `hipFuncCachePreferNone`.
const CACHE_PREFER_NONE: c_int = 0;
/// `hipSharedMemBankSizeFourByte`.
const BANK_FOUR_BYTE: c_int = 1;

/// `hipDeviceGetCacheConfig`: always `hipFuncCachePreferNone` (AMD caches are not split).
///
/// # Safety
/// `config` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipDeviceGetCacheConfig(config: *mut c_int) -> i32 {
    api(|| {
        global()?;
        // SAFETY: the caller's contract.
        unsafe { put(config, CACHE_PREFER_NONE) }
    })
}

/// `hipDeviceSetCacheConfig`: a hint AMD devices ignore; accepted.
#[no_mangle]
pub extern "C" fn hipDeviceSetCacheConfig(_config: c_int) -> i32 {
    api(|| {
        global()?.rt.device()?;
        Ok(())
    })
}

/// `hipDeviceGetSharedMemConfig`: always `hipSharedMemBankSizeFourByte`.
///
/// # Safety
/// `config` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipDeviceGetSharedMemConfig(config: *mut c_int) -> i32 {
    api(|| {
        global()?;
        // SAFETY: the caller's contract.
        unsafe { put(config, BANK_FOUR_BYTE) }
    })
}

/// `hipDeviceSetSharedMemConfig`: a hint AMD devices ignore; accepted.
#[no_mangle]
pub extern "C" fn hipDeviceSetSharedMemConfig(_config: c_int) -> i32 {
    api(|| {
        global()?.rt.device()?;
        Ok(())
    })
}

/// `hipDeviceScheduleMask`, and every bit `hipSetDeviceFlags` accepts (the scheduling bits,
/// `hipDeviceMapHost` 0x8 and `hipDeviceLmemResizeToMax`, whose value HIP defines as 0x16).
const SCHEDULE_MASK: c_uint = 0x7;
const DEVICE_FLAGS: c_uint = SCHEDULE_MASK | 0x8 | 0x16;
/// `hipDeviceScheduleSpin`: what a device starts with (as HIP's devices do).
const SCHEDULE_SPIN: c_uint = 0x1;

/// Each device's flags.
static FLAGS: [AtomicU32; MAX_DEVICES] = [const { AtomicU32::new(SCHEDULE_SPIN) }; MAX_DEVICES];

/// The flags of `device`.
pub(crate) fn device_flags(device: u32) -> c_uint {
    // Ordering: an independent setting; no other memory is published with it.
    FLAGS.get(device as usize).map_or(SCHEDULE_SPIN, |f| f.load(Ordering::Relaxed))
}

/// `hipSetDeviceFlags` for the calling thread's device: unknown bits are
/// `hipErrorInvalidValue`; the scheduling bits are kept (mapping host memory is always on, and
/// HIP keeps no other bit either). Waits are spins either way.
#[no_mangle]
pub extern "C" fn hipSetDeviceFlags(flags: c_uint) -> i32 {
    api(|| {
        let g = global()?;
        if flags & !DEVICE_FLAGS != 0 {
            return Err(INVALID_VALUE);
        }
        let device = g.rt.device()?;
        let slot = FLAGS.get(device as usize).ok_or(INVALID_DEVICE)?;
        // Ordering: as in `device_flags`.
        slot.store(flags & SCHEDULE_MASK, Ordering::Relaxed);
        Ok(())
    })
}

/// `hipGetDeviceFlags`: the calling thread's device's flags (`hipDeviceScheduleSpin` until set).
///
/// # Safety
/// `flags` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipGetDeviceFlags(flags: *mut c_uint) -> i32 {
    api(|| {
        let g = global()?;
        if flags.is_null() {
            return Err(INVALID_VALUE);
        }
        let f = device_flags(g.rt.device()?);
        // SAFETY: the caller's contract.
        unsafe { put(flags, f) }
    })
}

/// Two distinct existing devices; otherwise `hipErrorInvalidDevice` (a device and itself too,
/// as HIP answers).
fn peer_pair(g: &Global, a: c_int, b: c_int) -> HipResult<(u32, u32)> {
    let (a, b) = (checked_device(g, a)?, checked_device(g, b)?);
    if a == b {
        return Err(INVALID_DEVICE);
    }
    Ok((a, b))
}

/// `hipDeviceGetP2PAttribute`: performance rank 0, access supported 1 (every GPU of the
/// process reaches every other's memory, `crate::peer`), native atomics 0 and array access 0
/// (no arrays). NULL and unknown attributes are `hipErrorInvalidValue`.
///
/// # Safety
/// `value` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipDeviceGetP2PAttribute(value: *mut c_int, attr: c_int, src: c_int, dst: c_int) -> i32 {
    api(|| {
        let g = global()?;
        if value.is_null() {
            return Err(INVALID_VALUE);
        }
        peer_pair(g, src, dst)?;
        let v = match attr {
            0 => 0,
            1 => 1,
            2 | 3 => 0,
            _ => return Err(INVALID_VALUE),
        };
        // SAFETY: the caller's contract.
        unsafe { put(value, v) }
    })
}

/// `HSA_AMD_LINK_INFO_TYPE_PCIE`.
const LINK_PCIE: u32 = 2;

/// `hipExtGetLinkTypeAndHopCount`: two distinct devices reach each other over PCIe through the
/// host, two hops; a device and itself is `hipErrorInvalidValue` (HIP's answer).
///
/// # Safety
/// Each pointer is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipExtGetLinkTypeAndHopCount(
    device1: c_int,
    device2: c_int,
    link_type: *mut u32,
    hop_count: *mut u32,
) -> i32 {
    api(|| {
        let g = global()?;
        if link_type.is_null() || hop_count.is_null() || device1 == device2 {
            return Err(INVALID_VALUE);
        }
        peer_pair(g, device1, device2)?;
        // SAFETY: the caller's contract.
        unsafe {
            put(link_type, LINK_PCIE)?;
            put(hop_count, 2)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::parse_bus_id;

    #[test]
    fn bus_ids_parse_with_and_without_domain() {
        assert_eq!(parse_bus_id("0000:03:00.0"), Some((0, 3, 0, 0)));
        assert_eq!(parse_bus_id("03:1f.7"), Some((0, 3, 0x1f, 7)));
        assert_eq!(parse_bus_id("garbage"), None);
        assert_eq!(parse_bus_id("invalid:bus:id"), None);
    }
}
