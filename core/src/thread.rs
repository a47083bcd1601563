//! Thread keys: how core tells host threads apart without knowing what a thread is.
//!
//! Per-thread default streams and the current device are kept per thread in a fixed-capacity
//! table keyed by a [`ThreadKey`] that the host supplies through [`ThreadKeys`] (std-host uses a
//! thread-local; firmware with one thread uses [`SingleThread`]).

use core::num::NonZeroU64;

/// Identifies one host thread; unique among the threads alive at the same time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ThreadKey(pub NonZeroU64);

/// Supplies the calling thread's key.
pub trait ThreadKeys {
    /// The key of the calling thread.
    fn current(&self) -> ThreadKey;
}

/// A host with one thread of control.
#[derive(Debug, Clone, Copy, Default)]
pub struct SingleThread;

impl ThreadKeys for SingleThread {
    fn current(&self) -> ThreadKey {
        ThreadKey(NonZeroU64::MIN)
    }
}
