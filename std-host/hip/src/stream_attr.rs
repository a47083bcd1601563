//! Stream attributes and the attributes of launches (newer HIP, CUDA's semantics):
//! `hipStreamGetAttribute`, `hipStreamSetAttribute`, `hipStreamCopyAttributes`, and the checks
//! of `hipLaunchKernelExC`'s attributes (the launch itself is `crate::launch_ext`'s).
//!
//! A stream's attributes are what CUDA lets a stream carry: an access policy window and a
//! synchronization policy (both hints: the emulated GPU has no persisting L2 lines to set aside,
//! and every wait here is already the runtime's own), kept per stream in this layer and answered
//! as set; and its priority, which is the stream's creation priority (core fixes it when the
//! stream is created, so setting another one is `hipErrorNotSupported`). Memory synchronization
//! domains (attributes 9 and 10) do not exist on AMD GPUs: `hipErrorNotSupported`. Attributes
//! that belong to launches only (cooperative, cluster dimensions) are `hipErrorInvalidValue` on
//! a stream.

use std::collections::HashMap;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::{LazyLock, Mutex};
use std::thread::ThreadId;

use aqueduct::StreamHandle;

use crate::error::{api, HipResult, INVALID_VALUE, NOT_SUPPORTED};
use crate::global::{global, Global};
use crate::{stream_of, Dim3, Handle};

/// `hipLaunchAttributeAccessPolicyWindow`.
const ACCESS_POLICY_WINDOW: c_int = 1;
/// `hipLaunchAttributeCooperative`.
const COOPERATIVE: c_int = 2;
/// `hipLaunchAttributeSynchronizationPolicy`.
const SYNCHRONIZATION_POLICY: c_int = 3;
/// `hipLaunchAttributePriority`.
const PRIORITY: c_int = 8;
/// `hipLaunchAttributeMemSyncDomainMap`.
const MEM_SYNC_DOMAIN_MAP: c_int = 9;
/// `hipLaunchAttributeMemSyncDomain`.
const MEM_SYNC_DOMAIN: c_int = 10;

/// `hipAccessProperty`: Normal 0, Streaming 1, Persisting 2.
const ACCESS_PERSISTING: c_int = 2;
/// `hipSynchronizationPolicy`: Auto 1 (the default) up to BlockingSync 4.
const SYNC_POLICY_AUTO: c_int = 1;
const SYNC_POLICY_BLOCKING_SYNC: c_int = 4;

/// `hipAccessPolicyWindow` (32 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AccessPolicyWindow {
    /// Start of the window.
    pub base_ptr: *mut c_void,
    /// `hipAccessProperty` of hits.
    pub hit_prop: c_int,
    /// Fraction of the window given `hit_prop`, in [0, 1].
    pub hit_ratio: f32,
    /// `hipAccessProperty` of misses (Normal or Streaming).
    pub miss_prop: c_int,
    /// Length of the window in bytes.
    pub num_bytes: usize,
}
const _: () = assert!(size_of::<AccessPolicyWindow>() == 32);

impl Default for AccessPolicyWindow {
    fn default() -> Self {
        AccessPolicyWindow { base_ptr: std::ptr::null_mut(), hit_prop: 0, hit_ratio: 0.0, miss_prop: 0, num_bytes: 0 }
    }
}

/// `hipLaunchAttributeValue` (newer HIP's 64-byte union; `hipStreamAttrValue` is the same type).
/// Each attribute reads and writes only its own member.
#[repr(C)]
#[derive(Clone, Copy)]
pub union LaunchAttributeValue {
    /// The union's size.
    pub pad: [u8; 64],
    /// `hipLaunchAttributeAccessPolicyWindow`.
    pub access_policy_window: AccessPolicyWindow,
    /// `hipLaunchAttributeCooperative`, `…Priority`, `…SynchronizationPolicy`.
    pub int: c_int,
}
const _: () = assert!(size_of::<LaunchAttributeValue>() == 64);

/// `hipLaunchAttribute`: an id, padding, and its value at offset 8 (72 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct LaunchAttribute {
    /// `hipLaunchAttributeID`.
    pub id: c_int,
    /// Padding up to the value.
    pub pad: [u8; 4],
    /// The value.
    pub value: LaunchAttributeValue,
}
const _: () = assert!(size_of::<LaunchAttribute>() == 72);

/// `hipLaunchConfig_t`.
#[repr(C)]
pub struct LaunchConfig {
    /// Grid size in work-groups.
    pub grid_dim: Dim3,
    /// Work-group size.
    pub block_dim: Dim3,
    /// Dynamic LDS bytes.
    pub dynamic_smem_bytes: usize,
    /// The stream.
    pub stream: Handle,
    /// `num_attrs` attributes (NULL when there are none).
    pub attrs: *mut LaunchAttribute,
    /// How many.
    pub num_attrs: c_uint,
}

/// What a stream carries besides what core keeps (its priority).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Attributes {
    window: AccessPolicyWindow,
    sync_policy: c_int,
}

impl Default for Attributes {
    fn default() -> Self {
        Attributes { window: AccessPolicyWindow::default(), sync_policy: SYNC_POLICY_AUTO }
    }
}

// SAFETY: the window's base pointer is an address the user gave, never dereferenced here.
unsafe impl Send for Attributes {}

/// Which stream a handle names: a created stream by its handle; the null stream (and
/// `hipStreamLegacy`) per device; the per-thread stream per device and thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    Created(u64),
    Null(u32),
    PerThread(u32, ThreadId),
}

static ATTRIBUTES: LazyLock<Mutex<HashMap<Key, Attributes>>> = LazyLock::new(Default::default);

fn table() -> std::sync::MutexGuard<'static, HashMap<Key, Attributes>> {
    ATTRIBUTES.lock().unwrap_or_else(|e| e.into_inner())
}

/// The key of a live stream; a destroyed or garbage handle is core's error for it.
fn key(g: &Global, stream: Handle) -> HipResult<Key> {
    let s = stream_of(stream);
    // Core answers a stream that does not exist (the priority is what every stream has).
    g.rt.stream_priority(s)?;
    Ok(if s.is_null_or_legacy() {
        Key::Null(g.rt.stream_device(s)?)
    } else if s == StreamHandle::PER_THREAD {
        Key::PerThread(g.rt.stream_device(s)?, std::thread::current().id())
    } else {
        Key::Created(s.0)
    })
}

/// Forgets what was set on a destroyed stream.
pub(crate) fn forget(stream: Handle) {
    table().remove(&Key::Created(stream_of(stream).0));
}

/// An access policy window as CUDA accepts one: a hit ratio in [0, 1], known properties, and
/// misses that do not persist.
fn check_window(w: &AccessPolicyWindow) -> HipResult {
    let known = |p: c_int| (0..=ACCESS_PERSISTING).contains(&p);
    if !(0.0..=1.0).contains(&w.hit_ratio) || !known(w.hit_prop) || !known(w.miss_prop) {
        return Err(INVALID_VALUE);
    }
    if w.miss_prop == ACCESS_PERSISTING {
        return Err(INVALID_VALUE);
    }
    Ok(())
}

/// `hipStreamGetAttribute`: writes the attribute's member of `*value`.
///
/// # Safety
/// `value` is NULL or valid for writing a `hipLaunchAttributeValue`.
#[no_mangle]
pub unsafe extern "C" fn hipStreamGetAttribute(stream: Handle, attr: c_int, value: *mut LaunchAttributeValue) -> i32 {
    api(|| {
        let g = global()?;
        if value.is_null() {
            return Err(INVALID_VALUE);
        }
        let k = key(g, stream)?;
        let a = table().get(&k).copied().unwrap_or_default();
        match attr {
            ACCESS_POLICY_WINDOW => {
                // SAFETY: the caller's contract; only this member is written.
                unsafe { std::ptr::addr_of_mut!((*value).access_policy_window).write(a.window) };
            }
            SYNCHRONIZATION_POLICY => {
                // SAFETY: as above.
                unsafe { std::ptr::addr_of_mut!((*value).int).write(a.sync_policy) };
            }
            PRIORITY => {
                let p = g.rt.stream_priority(stream_of(stream))?;
                // SAFETY: as above.
                unsafe { std::ptr::addr_of_mut!((*value).int).write(p) };
            }
            MEM_SYNC_DOMAIN_MAP | MEM_SYNC_DOMAIN => return Err(NOT_SUPPORTED),
            _ => return Err(INVALID_VALUE),
        }
        Ok(())
    })
}

/// `hipStreamSetAttribute`: later work on the stream carries the value (see the module docs
/// for what each attribute does here).
///
/// # Safety
/// `value` is NULL or valid for reading a `hipLaunchAttributeValue`.
#[no_mangle]
pub unsafe extern "C" fn hipStreamSetAttribute(stream: Handle, attr: c_int, value: *const LaunchAttributeValue) -> i32 {
    api(|| {
        let g = global()?;
        if value.is_null() {
            return Err(INVALID_VALUE);
        }
        let k = key(g, stream)?;
        match attr {
            ACCESS_POLICY_WINDOW => {
                // SAFETY: the caller's contract; only this member is read.
                let w = unsafe { std::ptr::addr_of!((*value).access_policy_window).read() };
                check_window(&w)?;
                table().entry(k).or_default().window = w;
            }
            SYNCHRONIZATION_POLICY => {
                // SAFETY: as above.
                let p = unsafe { std::ptr::addr_of!((*value).int).read() };
                if !(SYNC_POLICY_AUTO..=SYNC_POLICY_BLOCKING_SYNC).contains(&p) {
                    return Err(INVALID_VALUE);
                }
                table().entry(k).or_default().sync_policy = p;
            }
            PRIORITY => {
                // SAFETY: as above.
                let p = unsafe { std::ptr::addr_of!((*value).int).read() };
                same_priority(g, stream, p)?;
            }
            MEM_SYNC_DOMAIN_MAP | MEM_SYNC_DOMAIN => return Err(NOT_SUPPORTED),
            _ => return Err(INVALID_VALUE),
        }
        Ok(())
    })
}

/// A priority asked of `stream` (a stream attribute or a launch's): the stream's own, once
/// clamped into the device's range as `hipStreamCreateWithPriority` clamps, is accepted; any
/// other is `hipErrorNotSupported` (priorities are fixed when core creates the stream).
fn same_priority(g: &Global, stream: Handle, p: c_int) -> HipResult {
    let current = g.rt.stream_priority(stream_of(stream))?;
    let (least, greatest) = g.rt.stream_priority_range();
    if p.clamp(greatest.min(least), greatest.max(least)) == current {
        Ok(())
    } else {
        Err(NOT_SUPPORTED)
    }
}

/// `hipStreamCopyAttributes` (CUDA's `cudaStreamCopyAttributes`): `dst` gets the attributes
/// set on `src` (access policy window, synchronization policy); priorities stay each stream's
/// own.
#[no_mangle]
pub extern "C" fn hipStreamCopyAttributes(dst: Handle, src: Handle) -> i32 {
    api(|| {
        let g = global()?;
        let (d, s) = (key(g, dst)?, key(g, src)?);
        let mut t = table();
        let a = t.get(&s).copied().unwrap_or_default();
        t.insert(d, a);
        Ok(())
    })
}

/// The attributes of a `hipLaunchKernelExC` launch (`crate::launch_ext`), checked:
/// cooperative (returned: non-zero asks for `hipLaunchCooperativeKernel`'s launch and checks),
/// priority (the stream's own only, as [`hipStreamSetAttribute`]), an access policy window (a
/// hint, checked as a stream's) and synchronization policy (checked); memory synchronization
/// domains are `hipErrorNotSupported`, any other id `hipErrorInvalidValue`.
///
/// # Safety
/// `c.attrs` is NULL or holds `c.num_attrs` entries.
pub(crate) unsafe fn launch_attributes(g: &Global, c: &LaunchConfig) -> HipResult<bool> {
    let attrs: &[LaunchAttribute] = match (c.attrs.is_null(), c.num_attrs) {
        (_, 0) => &[],
        (true, _) => return Err(INVALID_VALUE),
        // SAFETY: the caller's contract: `num_attrs` entries.
        (false, n) => unsafe { std::slice::from_raw_parts(c.attrs, n as usize) },
    };
    let mut cooperative = false;
    for a in attrs {
        // SAFETY: the attribute's value as an int and as a window: every byte pattern is
        // valid for both (integers, a float and a raw pointer); each id uses its member.
        let (int, window) = unsafe { (a.value.int, a.value.access_policy_window) };
        match a.id {
            COOPERATIVE => cooperative = int != 0,
            PRIORITY => same_priority(g, c.stream, int)?,
            ACCESS_POLICY_WINDOW => check_window(&window)?,
            SYNCHRONIZATION_POLICY if !(SYNC_POLICY_AUTO..=SYNC_POLICY_BLOCKING_SYNC).contains(&int) => {
                return Err(INVALID_VALUE)
            }
            SYNCHRONIZATION_POLICY => {}
            MEM_SYNC_DOMAIN_MAP | MEM_SYNC_DOMAIN => return Err(NOT_SUPPORTED),
            _ => return Err(INVALID_VALUE),
        }
    }
    Ok(cooperative)
}
