//! A table of live entries, each slot `Option<T>`: `N` slots without `std` (running out is
//! the caller's `OutOfMemory`), and as many as the program needs with it, so that no hosted
//! program meets a capacity (docs/architecture.md §2, "Backend tables").
//!
//! It reads as a slice of its slots; [`Slots::vacant`] hands out a free one.

use core::ops::{Deref, DerefMut};

pub(crate) struct Slots<T, const N: usize> {
    #[cfg(feature = "std")]
    slots: std::vec::Vec<Option<T>>,
    #[cfg(not(feature = "std"))]
    slots: [Option<T>; N],
}

impl<T: Copy, const N: usize> Slots<T, N> {
    /// No entries.
    pub(crate) const EMPTY: Self = Slots {
        #[cfg(feature = "std")]
        slots: std::vec::Vec::new(),
        #[cfg(not(feature = "std"))]
        slots: [None; N],
    };

    /// Whether every slot is taken (never with `std`: the table grows).
    pub(crate) fn is_full(&self) -> bool {
        !cfg!(feature = "std") && self.slots.iter().all(Option::is_some)
    }

    /// A free slot, `None` when the table is full.
    pub(crate) fn vacant(&mut self) -> Option<&mut Option<T>> {
        #[cfg(feature = "std")]
        if self.slots.iter().all(Option::is_some) {
            self.slots.push(None);
        }
        self.slots.iter_mut().find(|s| s.is_none())
    }

    /// Takes every entry out, leaving the table empty.
    pub(crate) fn take_all(&mut self) -> Self {
        core::mem::replace(self, Self::EMPTY)
    }
}

impl<T, const N: usize> Deref for Slots<T, N> {
    type Target = [Option<T>];
    fn deref(&self) -> &[Option<T>] {
        &self.slots
    }
}

impl<T, const N: usize> DerefMut for Slots<T, N> {
    fn deref_mut(&mut self) -> &mut [Option<T>] {
        &mut self.slots
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_reused_and_grow_with_std() {
        let mut t: Slots<u32, 2> = Slots::EMPTY;
        for i in 0..5u32 {
            match t.vacant() {
                Some(s) => *s = Some(i),
                None => assert!(!cfg!(feature = "std") && i >= 2, "slot {i} refused"),
            }
        }
        let live = if cfg!(feature = "std") { 5 } else { 2 };
        assert_eq!(t.iter().flatten().count(), live);
        assert_eq!(t.is_full(), !cfg!(feature = "std"));
        if let Some(s) = t.first_mut() {
            *s = None;
        }
        *t.vacant().unwrap() = Some(9);
        assert_eq!(t.first().copied().flatten(), Some(9), "a freed slot is used again first");
        let all = t.take_all();
        assert_eq!(all.iter().flatten().count(), live);
        assert!(t.iter().flatten().next().is_none());
    }
}
