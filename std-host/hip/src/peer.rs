//! Several GPUs (docs/hip-semantics.md, "Devices"): `hipDeviceCanAccessPeer`,
//! `hipDeviceEnablePeerAccess` / `hipDeviceDisablePeerAccess`, `hipMemcpyPeer` (+Async).
//!
//! kfd-direct maps every allocation on every GPU of the process, so any two distinct devices
//! can reach each other's memory, and a peer copy is a device copy run by the current device's
//! null stream (or the given stream). Peer access is recorded per (device, peer) pair for HIP's
//! answers (enabling twice, disabling what was never enabled); it gates nothing, as the memory is
//! mapped either way. On the emulated machine the GPUs come from `AQUEDUCT_EMU_GPUS`
//! (`crate::global`).

use std::collections::BTreeSet;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::{LazyLock, Mutex};

use crate::error::{api, Hip, HipResult, INVALID_DEVICE, INVALID_VALUE};
use crate::global::{global, lock, Global};
use crate::memory::{check_capturing, memcpy_on, memcpy_sync};
use crate::{put, stream_of, Handle};

/// `hipErrorPeerAccessAlreadyEnabled`.
const PEER_ACCESS_ALREADY_ENABLED: Hip = Hip(704);
/// `hipErrorPeerAccessNotEnabled`.
const PEER_ACCESS_NOT_ENABLED: Hip = Hip(705);

/// Enabled (device, peer) pairs.
static ENABLED: LazyLock<Mutex<BTreeSet<(u32, u32)>>> = LazyLock::new(Default::default);

/// Whether `device` can reach `peer`'s memory: distinct devices that both exist. Out-of-range
/// devices are `hipErrorInvalidDevice`.
fn can_access(g: &Global, device: c_int, peer: c_int) -> HipResult<bool> {
    if device == peer {
        return Ok(false);
    }
    let count = g.rt.device_count()?;
    let ok = |d: c_int| u32::try_from(d).is_ok_and(|d| d < count);
    if !ok(device) || !ok(peer) {
        return Err(INVALID_DEVICE);
    }
    Ok(true)
}

/// `hipDeviceCanAccessPeer`: 1 for two distinct devices, 0 for a device and itself.
///
/// # Safety
/// `can` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipDeviceCanAccessPeer(can: *mut c_int, device: c_int, peer: c_int) -> i32 {
    api(|| {
        let g = global()?;
        if can.is_null() {
            return Err(INVALID_VALUE);
        }
        let yes = can_access(g, device, peer)?;
        // SAFETY: the caller's contract.
        unsafe { put(can, c_int::from(yes)) }
    })
}

/// The calling thread's device and `peer`, when the device can reach it (else
/// `hipErrorInvalidDevice`).
fn pair(g: &Global, peer: c_int) -> HipResult<(u32, u32)> {
    let device = g.rt.device()?;
    if !can_access(g, device as c_int, peer).map_err(|_| INVALID_DEVICE)? {
        return Err(INVALID_DEVICE);
    }
    Ok((device, peer as u32))
}

/// `hipDeviceEnablePeerAccess`: `flags` must be 0; the device itself or one out of range is
/// `hipErrorInvalidDevice`; a second enable `hipErrorPeerAccessAlreadyEnabled`.
#[no_mangle]
pub extern "C" fn hipDeviceEnablePeerAccess(peer: c_int, flags: c_uint) -> i32 {
    api(|| {
        let g = global()?;
        if flags != 0 {
            return Err(INVALID_VALUE);
        }
        let p = pair(g, peer)?;
        if !lock(&ENABLED).insert(p) {
            return Err(PEER_ACCESS_ALREADY_ENABLED);
        }
        Ok(())
    })
}

/// `hipDeviceDisablePeerAccess`: access never enabled is `hipErrorPeerAccessNotEnabled`.
#[no_mangle]
pub extern "C" fn hipDeviceDisablePeerAccess(peer: c_int) -> i32 {
    api(|| {
        let g = global()?;
        let p = pair(g, peer)?;
        if !lock(&ENABLED).remove(&p) {
            return Err(PEER_ACCESS_NOT_ENABLED);
        }
        Ok(())
    })
}

/// Both devices of a peer copy must exist.
fn check_devices(g: &Global, dst_device: c_int, src_device: c_int) -> HipResult {
    let count = g.rt.device_count()?;
    let ok = |d: c_int| u32::try_from(d).is_ok_and(|d| d < count);
    if !ok(dst_device) || !ok(src_device) {
        return Err(INVALID_DEVICE);
    }
    Ok(())
}

/// `hipMemcpyPeer`: a synchronous copy between the memory of two devices (bad devices:
/// `hipErrorInvalidDevice`).
///
/// # Safety
/// `dst` and `src` are valid for `bytes` bytes.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyPeer(
    dst: *mut c_void,
    dst_device: c_int,
    src: *const c_void,
    src_device: c_int,
    bytes: usize,
) -> i32 {
    api(|| {
        let g = global()?;
        check_devices(g, dst_device, src_device)?;
        check_capturing(g)?;
        memcpy_sync(g, dst as usize as u64, src as usize as u64, bytes as u64)
    })
}

/// `hipMemcpyPeerAsync`: the copy in `stream`'s order.
///
/// # Safety
/// `dst` and `src` are valid for `bytes` bytes until the copy has run.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyPeerAsync(
    dst: *mut c_void,
    dst_device: c_int,
    src: *const c_void,
    src_device: c_int,
    bytes: usize,
    stream: Handle,
) -> i32 {
    api(|| {
        let g = global()?;
        check_devices(g, dst_device, src_device)?;
        memcpy_on(g, stream_of(stream), dst as usize as u64, src as usize as u64, bytes as u64)
    })
}
