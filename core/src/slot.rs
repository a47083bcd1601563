//! The two traits every fixed-capacity table is built from: [`Slot`], a slot type with a `const`
//! empty value, and [`Table`], an array of slots seen as a slice.
//!
//! [`Config`](crate::config::Config) names each table as `[T; N]` of a slot type; the runtime
//! and the loopback see only [`Table::slots`], so no `impl` carries a capacity. The one capacity
//! every configuration shares, [`MAX_DEVICES`], is here too, below the slot types that use it.

/// A fixed-capacity table: an array of slots behind a slice.
///
/// Implemented for `[T; N]` of every slot type; the runtime sees only the slice.
pub trait Table<T>: Sized {
    /// The table with every slot empty (`const`, so a runtime can live in a `static`).
    const EMPTY: Self;
    /// The slots.
    fn slots(&self) -> &[T];
    /// The slots, mutably.
    fn slots_mut(&mut self) -> &mut [T];
}

/// A slot type with a `const` empty value.
pub trait Slot: Sized {
    /// The empty slot.
    const EMPTY: Self;
}

impl<T: Slot, const N: usize> Table<T> for [T; N] {
    const EMPTY: Self = [const { T::EMPTY }; N];

    fn slots(&self) -> &[T] {
        self
    }

    fn slots_mut(&mut self) -> &mut [T] {
        self
    }
}

/// Most devices one runtime drives (a fixed size of per-device arrays in several slot types;
/// every [`Config`](crate::config::Config) shares it).
pub const MAX_DEVICES: usize = 8;
