//! ThreadSanitizer's view of the emulated GPU's memory.
//!
//! The packet processor and the compute-unit workers reach device memory through the pool's own
//! mapping, the process through its mapping of the same pages at the buffer's VA (the render-node
//! `mmap`). ThreadSanitizer tells memory apart by address, so it cannot pair the process's release
//! store of a packet header or acquire load of a signal at the VA with the emulator's loads and
//! decrements at the pool address: every hand-over through device memory would look unordered,
//! and a host kernel's writes (C host kernels use host pointers) would race with the host's reads
//! after a synchronisation. So, built with `--cfg aqueduct_tsan` (`scripts/verify tsan`), the
//! emulator also tells ThreadSanitizer about the synchronisation the AQL protocol gives, keyed by
//! the VA the process uses (kfd-direct and the thunk map host-visible buffers at their VA): it
//! acquires a packet's header once it sees the packet published, acquires a signal after reading
//! it, and releases a signal before completing it (docs/kfd-aql.md, "Ring publish protocol" and
//! "Signals and queue descriptors"). Without the cfg these functions are empty.

#[cfg(aqueduct_tsan)]
mod imp {
    use core::ffi::c_void;

    extern "C" {
        fn __tsan_acquire(addr: *mut c_void);
        fn __tsan_release(addr: *mut c_void);
    }

    pub(crate) fn acquire(va: u64) {
        // SAFETY: the runtime only uses the address as the key of a synchronisation object; it
        // never dereferences it.
        unsafe { __tsan_acquire(core::ptr::without_provenance_mut(va as usize)) }
    }

    pub(crate) fn release(va: u64) {
        // SAFETY: as in `acquire`.
        unsafe { __tsan_release(core::ptr::without_provenance_mut(va as usize)) }
    }
}

#[cfg(not(aqueduct_tsan))]
mod imp {
    #[inline(always)]
    pub(crate) fn acquire(_va: u64) {}

    #[inline(always)]
    pub(crate) fn release(_va: u64) {}
}

/// The emulated GPU has seen what the process published at `va` (a packet header, a
/// signal value) and depends on it.
pub(crate) use imp::acquire;
/// The emulated GPU's work so far happens-before whoever next observes `va` (a signal
/// value it is about to change).
pub(crate) use imp::release;
