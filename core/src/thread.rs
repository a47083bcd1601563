//! Thread keys: how core tells host threads apart without knowing what a thread is.
//!
//! Per-thread default streams and the current device are kept per thread in a fixed-capacity
//! table keyed by a [`ThreadKey`] that the host supplies through [`ThreadKeys`] (std-host uses a
//! thread-local; firmware with one thread uses [`SingleThread`]). The same trait supplies the raw
//! mutex the runtime's locks are made of (`lock_api` style), so a firmware build can use a
//! critical-section mutex and a std host a spin or parking one.

use core::num::NonZeroU64;

/// Identifies one host thread; unique among the threads alive at the same time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ThreadKey(pub NonZeroU64);

/// The platform under the runtime: the calling thread's key, and the raw mutex of its locks.
pub trait ThreadKeys {
    /// The raw mutex every runtime lock is made of (the structural lock, one per stream and
    /// per event, the host-signal pool's).
    type RawMutex: lock_api::RawMutex;

    /// The key of the calling thread.
    fn current(&self) -> ThreadKey;
}

/// A spinning raw mutex (`spin`'s, `lock_api` style): the default of the hosts in this
/// repository.
///
/// `spin`'s own, with its unlock out of line on targets without native 64-bit atomics: a
/// guard's drop is then one call instead of a barrier and a store at each of the runtime's
/// lock sites (docs/architecture.md, "Footprint"). Hosts inline it as before.
#[derive(Debug)]
pub struct SpinRawMutex(spin::mutex::SpinMutex<()>);

// SAFETY: every method is the wrapped `spin` mutex's own, which implements the trait's contract.
unsafe impl lock_api::RawMutex for SpinRawMutex {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = SpinRawMutex(<spin::mutex::SpinMutex<()> as lock_api::RawMutex>::INIT);

    type GuardMarker = <spin::mutex::SpinMutex<()> as lock_api::RawMutex>::GuardMarker;

    #[cfg_attr(target_has_atomic = "64", inline)]
    #[cfg_attr(not(target_has_atomic = "64"), inline(never))]
    fn lock(&self) {
        lock_api::RawMutex::lock(&self.0);
    }

    #[inline]
    fn try_lock(&self) -> bool {
        lock_api::RawMutex::try_lock(&self.0)
    }

    #[cfg_attr(target_has_atomic = "64", inline)]
    #[cfg_attr(not(target_has_atomic = "64"), inline(never))]
    unsafe fn unlock(&self) {
        // SAFETY: the caller's contract (the lock is held in the current context).
        unsafe { lock_api::RawMutex::unlock(&self.0) }
    }

    #[inline]
    fn is_locked(&self) -> bool {
        lock_api::RawMutex::is_locked(&self.0)
    }
}

/// A host with one thread of control.
#[derive(Debug, Clone, Copy, Default)]
pub struct SingleThread;

impl ThreadKeys for SingleThread {
    type RawMutex = SpinRawMutex;

    fn current(&self) -> ThreadKey {
        ThreadKey(NonZeroU64::MIN)
    }
}
