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
pub type SpinRawMutex = spin::mutex::SpinMutex<()>;

/// A host with one thread of control.
#[derive(Debug, Clone, Copy, Default)]
pub struct SingleThread;

impl ThreadKeys for SingleThread {
    type RawMutex = SpinRawMutex;

    fn current(&self) -> ThreadKey {
        ThreadKey(NonZeroU64::MIN)
    }
}
