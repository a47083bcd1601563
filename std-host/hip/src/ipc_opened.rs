//! Memory opened from other processes (`hipIpcOpenMemHandle`, [`crate::ipc`]) as the address
//! queries see it: each import's range, device and buffer id. [`crate::ipc`] registers an
//! import when it maps it and removes it when the last reference is closed; [`crate::memory`]'s
//! one address lookup and its device reachability read it. Kept apart from `ipc`'s own table
//! of opens (by handle, with their references, keyed by the same VA) so that the lookup stays
//! below `memory`, which `ipc` builds on.

use std::collections::BTreeMap;
use std::sync::{LazyLock, Mutex};

use crate::global::lock;

/// One import's range.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OpenedRange {
    /// Its VA in this process.
    pub(crate) va: u64,
    /// Its bytes.
    pub(crate) bytes: u64,
    /// The device it was opened on.
    pub(crate) device: u32,
    /// Its buffer id (`HIP_POINTER_ATTRIBUTE_BUFFER_ID`).
    pub(crate) buffer_id: u32,
}

/// The imports by VA.
static RANGES: LazyLock<Mutex<BTreeMap<u64, OpenedRange>>> = LazyLock::new(Default::default);

/// Records import `r`.
pub(crate) fn register(r: OpenedRange) {
    lock(&RANGES).insert(r.va, r);
}

/// Forgets the import at `va`.
pub(crate) fn unregister(va: u64) {
    lock(&RANGES).remove(&va);
}

/// The import holding `addr`.
pub(crate) fn holding(addr: u64) -> Option<OpenedRange> {
    let ranges = lock(&RANGES);
    let (_, r) = ranges.range(..=addr).next_back()?;
    (addr < r.va + r.bytes).then_some(*r)
}

/// Whether `[addr, addr + bytes)` lies inside memory opened from another process (device
/// memory for copies and fills).
pub(crate) fn in_opened_range(addr: u64, bytes: u64) -> bool {
    holding(addr).is_some_and(|r| addr.saturating_add(bytes) <= r.va + r.bytes)
}
