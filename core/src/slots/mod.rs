//! The runtime's slot types: one file per table, each slot with its `const` empty value
//! ([`Slot`](crate::slot::Slot)), so that [`Config`](crate::config::Config) can name the tables
//! and [`Runtime`](crate::Runtime) hold them without either importing the other's files.
//!
//! The slots' behaviour lives with the runtime (`runtime/*.rs`, one file per HIP behaviour);
//! here are the layouts, their packing and the slot word every stream and event table shares.

#[cfg(feature = "capture")]
pub mod capture;
#[cfg(feature = "capture")]
pub mod context;
pub mod event;
#[cfg(feature = "capture")]
pub mod graph;
pub mod host_signal;
pub mod module;
pub mod stream;
pub mod thread;

use portable_atomic::Ordering;

use crate::table::{self, Lookup};

/// The slot word's atomic: 64 bits where 64-bit atomics are native, 32 bits elsewhere, where a
/// 64-bit access is a short interrupt-free section (docs/architecture.md, "Footprint"); there
/// the generation wraps at `2^30 - 1` instead of `2^32 - 1`.
#[cfg(target_has_atomic = "64")]
type Word = crate::sync::atomic64::AtomicU64;
#[cfg(target_has_atomic = "64")]
type Bits = u64;
#[cfg(not(target_has_atomic = "64"))]
type Word = portable_atomic::AtomicU32;
#[cfg(not(target_has_atomic = "64"))]
type Bits = u32;

/// The largest generation a slot word holds (its state takes the word's two low bits).
#[allow(clippy::unnecessary_cast, reason = "a cast from u64 on hosts")]
const MAX_GENERATION: u32 = (Bits::MAX >> 2) as u32;

// ----- slot words: state and generation in one atomic ---------------------------------------

/// What a slot holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SlotState {
    Free = 0,
    Live = 1,
    /// Destroyed by the user; its work is still pending. Freed once it is done.
    Draining = 2,
}

/// A slot's state and generation: `generation << 2 | state`. The handle of a slot carries
/// `generation + 1` (handles never carry 0), and the generation grows when the object ends, so
/// an all-zero word is a free slot that never held anything.
#[derive(Debug)]
pub(crate) struct SlotWord(Word);

impl SlotWord {
    pub(crate) const fn new() -> Self {
        SlotWord(Word::new(0))
    }

    // Out of line where 64-bit atomics are not native (small images: one copy of the load and
    // the state's decoding instead of one per caller, docs/architecture.md, "Footprint").
    #[cfg_attr(not(target_has_atomic = "64"), inline(never))]
    #[cfg_attr(target_has_atomic = "64", inline)]
    #[allow(clippy::unnecessary_cast, reason = "a cast from u64 on hosts")]
    pub(crate) fn load(&self) -> (u32, SlotState) {
        // Ordering: Acquire pairs with the Release stores below: a reader that sees Live sees the
        // slot's attributes written before it.
        let w = self.0.load(Ordering::Acquire);
        let state = match w & 3 {
            1 => SlotState::Live,
            2 => SlotState::Draining,
            _ => SlotState::Free,
        };
        ((w >> 2) as u32, state)
    }

    #[inline]
    pub(crate) fn state(&self) -> SlotState {
        self.load().1
    }

    /// Whether the slot holds, live, the object whose handles carry `generation`: one load and
    /// one compare against the word that object has (`generation - 1 << 2 | Live`), what
    /// [`classify`](Self::classify) answers `Live` for. Generation 0 is never issued: its
    /// word would hold `u32::MAX`, which [`vacate`](Self::vacate) never stores.
    #[cfg(target_has_atomic = "64")]
    #[inline]
    pub(crate) fn is_live(&self, generation: u32) -> bool {
        // Ordering: Acquire, as in `load`.
        self.0.load(Ordering::Acquire) == u64::from(generation.wrapping_sub(1)) << 2 | SlotState::Live as u64
    }

    /// The generation a handle of the current (or next) object carries.
    #[inline]
    pub(crate) fn handle_generation(&self) -> u32 {
        self.load().0.wrapping_add(1).max(1)
    }

    pub(crate) fn set(&self, generation: u32, state: SlotState) {
        // Ordering: Release; see `load`.
        self.0.store((generation as Bits) << 2 | state as Bits, Ordering::Release);
    }

    /// Marks the slot live; returns the handle generation.
    pub(crate) fn occupy(&self) -> u32 {
        let (g, _) = self.load();
        self.set(g, SlotState::Live);
        g.wrapping_add(1).max(1)
    }

    /// Ends the object: its handles become stale; the slot is `then`.
    pub(crate) fn vacate(&self, then: SlotState) {
        let (g, _) = self.load();
        let next = if g >= MAX_GENERATION - 1 { 0 } else { g + 1 };
        self.set(next, then);
    }

    /// Changes the state, keeping the generation.
    pub(crate) fn set_state(&self, state: SlotState) {
        let (g, _) = self.load();
        self.set(g, state);
    }

    #[inline]
    pub(crate) fn classify(&self, slot: usize, generation: u32) -> Lookup {
        let (g, state) = self.load();
        let current = g.wrapping_add(1).max(1);
        if generation == 0 || generation > current {
            Lookup::Garbage
        } else if generation == current {
            if state == SlotState::Live {
                Lookup::Live(slot)
            } else {
                Lookup::Garbage
            }
        } else {
            Lookup::Stale
        }
    }
}

/// Looks a raw handle up in a table of slots with words.
#[inline]
pub(crate) fn lookup<T>(tag: u16, raw: u64, slots: &[T], word: impl Fn(&T) -> &SlotWord) -> Lookup {
    let (t, generation, slot) = table::decode(raw);
    if t != tag {
        return Lookup::Garbage;
    }
    match slots.get(slot) {
        Some(s) => word(s).classify(slot, generation),
        None => Lookup::Garbage,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generations_wrap_at_the_largest_the_word_holds() {
        let w = SlotWord::new();
        assert_eq!(w.load(), (0, SlotState::Free));
        w.set(MAX_GENERATION - 2, SlotState::Live);
        assert_eq!(w.handle_generation(), MAX_GENERATION - 1);
        w.vacate(SlotState::Draining);
        assert_eq!(w.load(), (MAX_GENERATION - 1, SlotState::Draining));
        assert_eq!(w.handle_generation(), MAX_GENERATION);
        // The last generation's object ends: the word goes back to generation 0, whose handles
        // carry 1, and a handle of the wrapped generation is garbage, not live.
        w.set_state(SlotState::Live);
        assert_eq!(w.classify(3, MAX_GENERATION), Lookup::Live(3));
        w.vacate(SlotState::Free);
        assert_eq!(w.load(), (0, SlotState::Free));
        assert_eq!(w.handle_generation(), 1);
        assert_eq!(w.classify(3, MAX_GENERATION), Lookup::Garbage);
    }
}
