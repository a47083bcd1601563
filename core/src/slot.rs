//! The traits every fixed-capacity table is built from: [`Slot`], a slot type with a `const`
//! empty value, and [`Table`], an array of slots seen as a slice; [`Bytes`], a fixed-size byte
//! area, and [`FixedVec`], a fixed-capacity list.
//!
//! [`Config`](crate::config::Config) names each table as `[T; N]` of a slot type (or
//! `[u8; N]`, or `heapless::Vec<T, N>`); the runtime, the loopback and the memory pools see only
//! slices, so no `impl` carries a capacity. The one capacity every configuration shares,
//! [`MAX_DEVICES`], is here too, below the slot types that use it.

/// A fixed-capacity table: an array of slots behind a slice.
///
/// Implemented for `[T; N]` of every slot type; the runtime sees only the slice.
pub trait Table<T>: Sized {
    /// The table with every slot empty (`const`, so a runtime can live in a `static`).
    const EMPTY: Self;
    /// Its number of slots.
    const LEN: usize;
    /// The slots.
    fn slots(&self) -> &[T];
    /// The slots, mutably.
    fn slots_mut(&mut self) -> &mut [T];
    /// Writes the empty table into `place` slot by slot and returns it: an in-place
    /// [`EMPTY`](Self::EMPTY), with no table-sized temporary to copy (`Runtime::init`,
    /// docs/architecture.md, "Footprint").
    fn init_empty(place: &mut core::mem::MaybeUninit<Self>) -> &mut Self;
}

/// A slot type with a `const` empty value.
pub trait Slot: Sized {
    /// The empty slot.
    const EMPTY: Self;
}

impl<T: Slot, const N: usize> Table<T> for [T; N] {
    const EMPTY: Self = [const { T::EMPTY }; N];
    const LEN: usize = N;

    fn slots(&self) -> &[T] {
        self
    }

    fn slots_mut(&mut self) -> &mut [T] {
        self
    }

    fn init_empty(place: &mut core::mem::MaybeUninit<Self>) -> &mut Self {
        let first = place.as_mut_ptr().cast::<T>();
        for i in 0..N {
            // SAFETY: `i < N`: slot `i` of the array `place` holds, valid for writes and aligned
            // (an array's elements are contiguous, `T`-aligned).
            unsafe { first.add(i).write(T::EMPTY) };
        }
        // SAFETY: all `N` slots were written above.
        unsafe { place.assume_init_mut() }
    }
}

/// A fixed-size byte area (`[u8; N]`): a loopback ring slot's kernel arguments, its heap.
pub trait Bytes: Sized {
    /// All zeros (`const`, so the memory can live in a `static`).
    const ZERO: Self;
    /// Its size in bytes.
    const LEN: usize;
}

impl<const N: usize> Bytes for [u8; N] {
    const ZERO: Self = [0; N];
    const LEN: usize = N;
}

/// A list of at most a fixed number of `T` (`heapless::Vec<T, N>`), seen without its capacity.
pub trait FixedVec<T>: Sized {
    /// The empty list (`const`).
    const EMPTY: Self;
    /// The list.
    fn as_view(&self) -> &heapless::vec::VecView<T>;
    /// The list, mutably.
    fn as_mut_view(&mut self) -> &mut heapless::vec::VecView<T>;
}

impl<T, const N: usize> FixedVec<T> for heapless::Vec<T, N> {
    const EMPTY: Self = heapless::Vec::new();

    fn as_view(&self) -> &heapless::vec::VecView<T> {
        heapless::Vec::as_view(self)
    }

    fn as_mut_view(&mut self) -> &mut heapless::vec::VecView<T> {
        heapless::Vec::as_mut_view(self)
    }
}

/// Most devices one runtime drives (a fixed size of per-device arrays in several slot types;
/// every [`Config`](crate::config::Config) shares it).
pub const MAX_DEVICES: usize = 8;
