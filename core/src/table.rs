//! Generational handles and the fixed-capacity slot table behind every handle type.
//!
//! A handle is `tag << 48 | generation << 16 | slot`. The tag tells handle kinds apart (a stream
//! handle passed as an event is garbage), the generation tells a live handle from a stale one
//! whose slot was freed and perhaps reused, and values that no table ever issued are garbage.
//! Validation is O(1): one bounds check and one compare.

#![cfg_attr(not(feature = "capture"), allow(dead_code))]

use crate::error::{Error, Result};

/// What a raw handle value turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// A live object in this slot.
    Live(usize),
    /// The handle was issued by this table but its object has been destroyed (possibly the slot
    /// has been reused since).
    Stale,
    /// The value was never issued by this table.
    Garbage,
}

pub(crate) const SLOT_BITS: u32 = 16;
pub(crate) const GEN_BITS: u32 = 32;
const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;
const GEN_MASK: u64 = (1 << GEN_BITS) - 1;

/// Encodes a handle.
#[inline]
pub(crate) const fn encode(tag: u16, generation: u32, slot: usize) -> u64 {
    (tag as u64) << (SLOT_BITS + GEN_BITS) | (generation as u64) << SLOT_BITS | (slot as u64 & SLOT_MASK)
}

/// Splits a handle into (tag, generation, slot).
#[inline]
pub(crate) const fn decode(raw: u64) -> (u16, u32, usize) {
    ((raw >> (SLOT_BITS + GEN_BITS)) as u16, ((raw >> SLOT_BITS) & GEN_MASK) as u32, (raw & SLOT_MASK) as usize)
}

/// The generation bookkeeping of one slot. Generation 0 is never issued, so a zeroed handle
/// body is garbage; a slot's generation grows by one each time its object is destroyed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Generation {
    /// Generation of the current (or next) object in the slot, minus one: a new slot's is 0, so
    /// an empty slot is all zero bytes and a table of them is cleared in place rather than
    /// copied from a constant's image (docs/architecture.md, "Footprint").
    below: u32,
    /// Whether an object lives in the slot now.
    pub live: bool,
}

impl Generation {
    pub(crate) const fn new() -> Self {
        Generation { below: 0, live: false }
    }

    /// Generation of the current (or next) object in the slot (at least 1).
    #[inline]
    pub(crate) fn current(&self) -> u32 {
        self.below + 1
    }

    /// Classifies a handle generation against this slot.
    pub(crate) fn classify(&self, slot: usize, generation: u32) -> Lookup {
        let current = self.current();
        if generation == 0 || generation > current {
            Lookup::Garbage
        } else if generation == current && self.live {
            Lookup::Live(slot)
        } else if generation == current {
            // Issued generations are < current or == current with live set; current-but-free
            // means the value was never issued.
            Lookup::Garbage
        } else {
            Lookup::Stale
        }
    }

    /// Marks the slot live and returns the generation of the new object.
    pub(crate) fn occupy(&mut self) -> u32 {
        self.live = true;
        self.current()
    }

    /// Ends the current object: its handles become stale. Generations wrap past `u32::MAX`
    /// back to 1 (after four billion reuses of one slot a very old handle could alias).
    pub(crate) fn vacate(&mut self) {
        self.live = false;
        self.below = if self.below == u32::MAX - 1 { 0 } else { self.below + 1 };
    }
}

/// Looks `raw` up against `slots` for handles carrying `tag`.
pub(crate) fn lookup<T>(tag: u16, raw: u64, slots: &[T], gen_of: impl Fn(&T) -> Generation) -> Lookup {
    let (t, generation, slot) = decode(raw);
    if t != tag {
        return Lookup::Garbage;
    }
    match slots.get(slot) {
        Some(s) => gen_of(s).classify(slot, generation),
        None => Lookup::Garbage,
    }
}

/// Maps a lookup to a slot index, answering `stale` for stale handles and `garbage` otherwise.
#[inline]
pub(crate) fn require(l: Lookup, stale: Error, garbage: Error) -> Result<usize> {
    match l {
        Lookup::Live(i) => Ok(i),
        Lookup::Stale => Err(stale),
        Lookup::Garbage => Err(garbage),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generations() {
        let mut g = Generation::new();
        assert_eq!(g.classify(3, 1), Lookup::Garbage);
        let first = g.occupy();
        assert_eq!(g.classify(3, first), Lookup::Live(3));
        g.vacate();
        assert_eq!(g.classify(3, first), Lookup::Stale);
        let second = g.occupy();
        assert_ne!(first, second);
        assert_eq!(g.classify(3, first), Lookup::Stale);
        assert_eq!(g.classify(3, second), Lookup::Live(3));
        assert_eq!(g.classify(3, second + 7), Lookup::Garbage);
        assert_eq!(g.classify(3, 0), Lookup::Garbage);
        let raw = encode(0xA51, 77, 12);
        assert_eq!(decode(raw), (0xA51, 77, 12));
    }
}
