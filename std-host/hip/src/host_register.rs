//! Registered host memory: `hipHostRegister` and `hipHostUnregister`, and the lookups the rest
//! of the library makes of registered ranges (docs/hip-semantics.md §6.2).
//!
//! Registering hands the program's own pageable memory to the backend
//! ([`aqueduct::Backend::host_register`]: on amdkfd a USERPTR buffer over the range's pages at a
//! new GPU VA), which answers the range's device address. The program keeps using its host
//! pointer on the host and passes the device pointer (`hipHostGetDevicePointer`) to kernels, as
//! with HIP on amdkfd, where the two differ too. Copies and fills name either: a range inside a
//! registration, given by its host address, runs on the device at its device address
//! ([`device_view`]), and the device range counts as device-reachable memory
//! ([`in_device_range`]), so neither is staged as pageable memory is.
//!
//! HIP's answers: NULL, zero bytes or a flag outside `hipHostRegisterPortable` (1), `…Mapped`
//! (2), `…IoMemory` (4) and `…ReadOnly` / `hipExtHostRegisterCoarseGrained` (8) are
//! `hipErrorInvalidValue`; a range that overlaps a registration or an allocation of this runtime
//! is `hipErrorHostMemoryAlreadyRegistered`; memory the device cannot be given (unmapped, or not
//! writable: amdkfd faults the pages in for writing) is `hipErrorInvalidValue`, as clr's failed
//! `mem->create` is. `hipHostUnregister` takes any address inside a registration (clr finds the
//! memory object holding it), waits for the registering device's work, then ends it; anything
//! else is `hipErrorHostMemoryNotRegistered`.

use std::collections::BTreeMap;
use std::ffi::{c_uint, c_void};
use std::sync::{LazyLock, Mutex};

use aqueduct::Backend;

use crate::error::{api, Hip, INVALID_VALUE};
use crate::global::{global, lock};

/// `hipHostRegisterPortable | …Mapped | …IoMemory | …ReadOnly` (the last is also
/// `hipExtHostRegisterCoarseGrained`).
const REGISTER_FLAGS: c_uint = 0x1 | 0x2 | 0x4 | 0x8;
/// `hipErrorHostMemoryAlreadyRegistered`.
const ALREADY_REGISTERED: Hip = Hip(712);
/// `hipErrorHostMemoryNotRegistered`.
const NOT_REGISTERED: Hip = Hip(713);

/// One registered range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Registration {
    /// The host address registered.
    pub(crate) host: u64,
    /// Its device address (the backend's answer).
    pub(crate) device_address: u64,
    /// Bytes registered.
    pub(crate) bytes: u64,
    /// The `hipHostRegister` flags.
    pub(crate) flags: c_uint,
    /// The device that was current.
    pub(crate) device: u32,
    /// Its buffer id (`HIP_POINTER_ATTRIBUTE_BUFFER_ID`).
    pub(crate) buffer_id: u32,
}

impl Registration {
    /// Whether `[addr, addr + bytes)` lies inside the host range.
    fn holds_host(&self, addr: u64, bytes: u64) -> bool {
        addr >= self.host && addr.saturating_add(bytes.max(1)) <= self.host + self.bytes
    }

    /// Whether `[addr, addr + bytes)` lies inside the device range.
    fn holds_device(&self, addr: u64, bytes: u64) -> bool {
        addr >= self.device_address && addr.saturating_add(bytes.max(1)) <= self.device_address + self.bytes
    }
}

/// The registrations by host address.
static REGISTRATIONS: LazyLock<Mutex<BTreeMap<u64, Registration>>> = LazyLock::new(Default::default);

/// The registration whose host range holds `addr`.
pub(crate) fn by_host(addr: u64) -> Option<Registration> {
    let regs = lock(&REGISTRATIONS);
    let (_, r) = regs.range(..=addr).next_back()?;
    r.holds_host(addr, 1).then_some(*r)
}

/// The registration whose device range holds `addr`.
pub(crate) fn by_device(addr: u64) -> Option<Registration> {
    lock(&REGISTRATIONS).values().find(|r| r.holds_device(addr, 1)).copied()
}

/// The address a device operation on `[addr, addr + bytes)` uses: the device address when the
/// range lies inside one registration's host range, else `addr` itself.
pub(crate) fn device_view(addr: u64, bytes: u64) -> u64 {
    let regs = lock(&REGISTRATIONS);
    match regs.range(..=addr).next_back() {
        Some((_, r)) if r.holds_host(addr, bytes) => r.device_address + (addr - r.host),
        _ => addr,
    }
}

/// Whether `[addr, addr + bytes)` lies inside one registration's device range.
pub(crate) fn in_device_range(addr: u64, bytes: u64) -> bool {
    lock(&REGISTRATIONS).values().any(|r| r.holds_device(addr, bytes))
}

/// `hipHostRegister`: the module docs' checks, then the backend's registration.
///
/// # Safety
/// `ptr` names `bytes` of the caller's memory, which stays mapped until it is unregistered.
#[no_mangle]
pub unsafe extern "C" fn hipHostRegister(ptr: *mut c_void, bytes: usize, flags: c_uint) -> i32 {
    api(|| {
        let g = global()?;
        // The capture-mode check an allocation makes.
        g.rt.free(0)?;
        let host = ptr as usize as u64;
        if host == 0 || bytes == 0 || flags & !REGISTER_FLAGS != 0 {
            return Err(INVALID_VALUE);
        }
        let end = host.checked_add(bytes as u64).ok_or(INVALID_VALUE)?;
        let mut regs = lock(&REGISTRATIONS);
        let overlaps_registration = regs.range(..end).next_back().is_some_and(|(_, r)| r.host + r.bytes > host);
        let overlaps_allocation =
            lock(&g.allocs).range(..end).next_back().is_some_and(|(&a, &(len, _))| a + len.max(1) > host);
        if overlaps_registration || overlaps_allocation {
            return Err(ALREADY_REGISTERED);
        }
        let device = g.rt.device()?;
        let device_address = g.rt.backend().host_register(device, host, bytes).map_err(|e| match e {
            aqueduct::Error::InvalidValue => INVALID_VALUE,
            e => Hip::from(e),
        })?;
        let buffer_id = crate::global::next_buffer_id();
        regs.insert(host, Registration { host, device_address, bytes: bytes as u64, flags, device, buffer_id });
        Ok(())
    })
}

/// `hipHostUnregister`: the module docs' rules.
#[no_mangle]
pub extern "C" fn hipHostUnregister(ptr: *mut c_void) -> i32 {
    api(|| {
        let g = global()?;
        g.rt.free(0)?;
        if ptr.is_null() {
            return Err(INVALID_VALUE);
        }
        let r = by_host(ptr as usize as u64).ok_or(NOT_REGISTERED)?;
        // No work of the device may still reach the pages once they go back.
        g.wait_idle_on(r.device)?;
        lock(&REGISTRATIONS).remove(&r.host).ok_or(NOT_REGISTERED)?;
        if let Err(e) = g.rt.backend().host_unregister(r.device_address) {
            lock(&REGISTRATIONS).insert(r.host, r);
            return Err(e.into());
        }
        Ok(())
    })
}
