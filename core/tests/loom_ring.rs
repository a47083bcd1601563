//! loom model of the AQL ring protocol (`core/src/aql/ring.rs`, "Publish protocol" and
//! "Consumer protocol").
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p aqueduct --release --test loom_ring`
//! (`scripts/verify loom`).
//!
//! # Why a re-statement
//!
//! [`aqueduct::aql::AqlRing`] keeps its ring in raw shared memory the GPU (or the emulator) also
//! writes: the header dword is an `AtomicU32::from_ptr` over slot bytes and the body is copied
//! with `copy_nonoverlapping`. loom can only see accesses made through its own atomics and
//! `UnsafeCell`, so this file restates the protocol step for step over loom types, with the
//! same orderings as ring.rs (each step names the ring.rs function it mirrors). A slot is a
//! header atomic plus a body cell standing for bytes 4..64; loom reports any body access that
//! is not ordered by the header and read-index hand-offs as a causality violation.
//!
//! Every model counts its explored executions and asserts more than one (loom#392 lets a model
//! silently explore a single execution), spawns every endpoint, and has planted-bug variants that
//! are tests expecting the model to FAIL.
#![allow(unexpected_cfgs)]
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize};
use loom::sync::Arc;
use loom::thread;

mod loom_common;
use loom_common::{explore, fails, Explored};

use core::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

/// `Header::INVALID` in dword 0.
const INVALID: u32 = 1;

/// How many times one loop of the model may spin (yield) before its thread gives up. Unbounded
/// spinning makes loom's state space infinite (every spin may re-read a stale value), so each
/// spin loop of the protocol is bounded here; a thread that gives up marks the execution, whose
/// checks then shrink to "nothing consumed twice or torn" (loom's causality checks still apply).
const SPIN_BUDGET: u32 = 3;

struct Budget(u32);

impl Budget {
    fn new() -> Budget {
        Budget(SPIN_BUDGET)
    }

    /// Yields once; false when the budget is spent.
    fn spin(&mut self) -> bool {
        if self.0 == 0 {
            return false;
        }
        self.0 -= 1;
        thread::yield_now();
        true
    }
}

/// Which protocol the producers follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// ring.rs as written.
    Correct,
    /// Planted bug: dword 0 published with a Relaxed store instead of Release.
    RelaxedHeader,
    /// Planted bug: the multi-producer reservation as a load and a store of the write index
    /// instead of the atomic `fetch_add`.
    NonAtomicReserve,
}

struct Slot {
    header: AtomicU32,
    /// Bytes 4..64 of the packet.
    body: UnsafeCell<u64>,
}

struct Ring {
    slots: Vec<Slot>,
    mask: u64,
    write_index: AtomicU64,
    read_index: AtomicU64,
    /// Producers that finished (model bookkeeping, not part of the protocol).
    producers_done: AtomicUsize,
    /// Set by a thread that spent its spin budget (model bookkeeping).
    gave_up: AtomicBool,
}

/// Marks a header as published: a packet type other than INVALID, tagged with the payload so
/// the consumer can check header and body belong together.
fn header_of(payload: u64) -> u32 {
    2 | ((payload as u32) << 8)
}

impl Ring {
    fn new(size: u64, start: u64) -> Ring {
        Ring {
            // `invalidate_all`: every slot starts INVALID.
            slots: (0..size).map(|_| Slot { header: AtomicU32::new(INVALID), body: UnsafeCell::new(0) }).collect(),
            mask: size - 1,
            write_index: AtomicU64::new(start),
            read_index: AtomicU64::new(start),
            producers_done: AtomicUsize::new(0),
            gave_up: AtomicBool::new(false),
        }
    }

    fn size(&self) -> u64 {
        self.mask + 1
    }

    fn slot(&self, index: u64) -> &Slot {
        &self.slots[(index & self.mask) as usize]
    }

    /// `has_room`.
    fn has_room(&self, end: u64, read: u64) -> bool {
        end.wrapping_sub(read) <= self.size()
    }

    /// `read_index()`.
    fn read_index(&self) -> u64 {
        self.read_index.load(Acquire)
    }

    /// `reserve_hinted` (multi-producer). `Err(true)` is `NotReady` (nothing reserved),
    /// `Err(false)` a spent budget after the reservation.
    fn reserve(&self, n: u64, spins: u32, hint: &mut u64, variant: Variant) -> Result<u64, bool> {
        let mut tries = 0u32;
        let w = loop {
            let w = self.write_index.load(Relaxed);
            if self.has_room(w.wrapping_add(n), *hint) {
                break w;
            }
            *hint = self.read_index();
            if self.has_room(w.wrapping_add(n), *hint) {
                break w;
            }
            if tries >= spins {
                return Err(true);
            }
            tries += 1;
            thread::yield_now();
        };
        let first = match variant {
            Variant::NonAtomicReserve => {
                self.write_index.store(w.wrapping_add(n), Relaxed);
                w
            }
            _ => self.write_index.fetch_add(n, AcqRel),
        };
        let mut budget = Budget::new();
        while !self.has_room(first.wrapping_add(n), *hint) {
            *hint = self.read_index();
            if !budget.spin() {
                return Err(false);
            }
        }
        Ok(first)
    }

    /// `reserve_single_producer`.
    fn reserve_single(&self, n: u64, spins: u32, hint: &mut u64) -> Option<u64> {
        let first = self.write_index.load(Relaxed);
        let mut tries = 0u32;
        while !self.has_room(first.wrapping_add(n), *hint) {
            *hint = self.read_index();
            if self.has_room(first.wrapping_add(n), *hint) {
                break;
            }
            if tries >= spins {
                return None;
            }
            tries += 1;
            thread::yield_now();
        }
        self.write_index.store(first.wrapping_add(n), Relaxed);
        Some(first)
    }

    /// `Reservation::write`: body with plain stores, then dword 0 with Release.
    fn write(&self, index: u64, payload: u64, variant: Variant) {
        let slot = self.slot(index);
        slot.body.with_mut(|b| {
            // SAFETY: (model) the slot is reserved by this producer; loom checks the claim.
            unsafe { *b = payload }
        });
        let order = if variant == Variant::RelaxedHeader { Relaxed } else { Release };
        slot.header.store(header_of(payload), order);
    }

    /// `Reservation::write_batch` for two packets: the second slot whole (its header as a
    /// Relaxed store; ring.rs copies it with plain bytes), then the first slot's body, then the
    /// first slot's header with Release.
    fn write_batch2(&self, first: u64, payloads: [u64; 2]) {
        let second = self.slot(first.wrapping_add(1));
        second.body.with_mut(|b| {
            // SAFETY: (model) reserved by this producer.
            unsafe { *b = payloads[1] }
        });
        second.header.store(header_of(payloads[1]), Relaxed);
        let head = self.slot(first);
        head.body.with_mut(|b| {
            // SAFETY: (model) reserved by this producer.
            unsafe { *b = payloads[0] }
        });
        head.header.store(header_of(payloads[0]), Release);
    }

    /// `read` + `retire` at the read index: `None` while the slot is INVALID.
    fn consume(&self) -> Option<u64> {
        let index = self.read_index();
        let slot = self.slot(index);
        let d0 = slot.header.load(Acquire);
        if d0 == INVALID {
            return None;
        }
        let body = slot.body.with(|b| {
            // SAFETY: (model) published (Acquire above); loom checks the claim.
            unsafe { *b }
        });
        assert_eq!(d0, header_of(body), "header and body of one slot disagree");
        slot.header.store(INVALID, Release);
        self.read_index.store(index.wrapping_add(1), Release);
        Some(body)
    }

    /// The consumer loop: consumes until `total` packets arrived, or every producer finished
    /// and nothing more is reserved (so a broken reservation ends the model instead of
    /// spinning).
    fn consumer(&self, total: usize, producers: usize) -> Vec<u64> {
        let mut got = Vec::new();
        let mut budget = Budget::new();
        while got.len() < total {
            match self.consume() {
                Some(v) => got.push(v),
                None => {
                    if self.producers_done.load(Acquire) == producers
                        && self.write_index.load(Acquire) == self.read_index.load(Relaxed)
                    {
                        break;
                    }
                    if !budget.spin() {
                        self.gave_up.store(true, Relaxed);
                        break;
                    }
                }
            }
        }
        got
    }
}

/// Two producers and one consumer on a ring of `size` slots; each producer publishes one
/// packet with the multi-producer reservation. With `size` 1 the ring is full after the first
/// reservation, so the second producer finds no room (NotReady, retried) or waits for room
/// after its `fetch_add`.
fn two_producers(variant: Variant, size: u64, start: u64) -> Explored {
    explore(move || {
        let ring = Arc::new(Ring::new(size, start));
        let producers: Vec<_> = [1u64, 2]
            .into_iter()
            .map(|payload| {
                let ring = ring.clone();
                thread::spawn(move || {
                    let mut hint = ring.read_index();
                    let mut budget = Budget::new();
                    let first = loop {
                        match ring.reserve(1, 0, &mut hint, variant) {
                            Ok(f) => break Some(f),
                            // NotReady on a full ring (spins = 0): retry, as a caller would.
                            Err(true) if budget.spin() => {}
                            Err(_) => break None,
                        }
                    };
                    match first {
                        Some(first) => ring.write(first, payload, variant),
                        None => ring.gave_up.store(true, Relaxed),
                    }
                    ring.producers_done.fetch_add(1, AcqRel);
                })
            })
            .collect();
        let consumer = {
            let ring = ring.clone();
            thread::spawn(move || ring.consumer(2, 2))
        };
        for p in producers {
            p.join().unwrap();
        }
        let mut got = consumer.join().unwrap();
        got.sort_unstable();
        let mut dedup = got.clone();
        dedup.dedup();
        assert_eq!(dedup, got, "a packet was consumed twice");
        if ring.gave_up.load(Relaxed) {
            return false;
        }
        assert_eq!(got, vec![1, 2], "every published packet is consumed exactly once");
        assert_eq!(ring.write_index.load(Relaxed), start.wrapping_add(2));
        assert_eq!(ring.read_index.load(Relaxed), start.wrapping_add(2));
        true
    })
}

/// One producer (the runtime's single-producer reservation) pushes three packets through a
/// ring of two slots whose indices start just below the 64-bit wrap; the ring fills, a
/// reservation on the full ring reports NotReady without moving the write index, and FIFO
/// order holds across the wrap.
fn wrap_and_full(variant: Variant) -> Explored {
    const START: u64 = u64::MAX - 1;
    explore(move || {
        let ring = Arc::new(Ring::new(2, START));
        let producer = {
            let ring = ring.clone();
            thread::spawn(move || {
                let mut hint = ring.read_index();
                let mut budget = Budget::new();
                'packets: for payload in 1..=3u64 {
                    let first = loop {
                        let before = ring.write_index.load(Relaxed);
                        match ring.reserve_single(1, 0, &mut hint) {
                            Some(f) => break f,
                            None => {
                                // A refused reservation has no effect.
                                assert_eq!(ring.write_index.load(Relaxed), before);
                                if !budget.spin() {
                                    ring.gave_up.store(true, Relaxed);
                                    break 'packets;
                                }
                            }
                        }
                    };
                    assert_eq!(first, START.wrapping_add(payload - 1));
                    ring.write(first, payload, variant);
                }
                ring.producers_done.fetch_add(1, AcqRel);
            })
        };
        let consumer = {
            let ring = ring.clone();
            thread::spawn(move || ring.consumer(3, 1))
        };
        producer.join().unwrap();
        let got = consumer.join().unwrap();
        assert!(got.iter().copied().eq(1..=got.len() as u64), "FIFO across the wrap: {got:?}");
        if ring.gave_up.load(Relaxed) {
            return false;
        }
        assert_eq!(got.len(), 3);
        assert_eq!(ring.read_index.load(Relaxed), START.wrapping_add(3));
        true
    })
}

/// A batch of two published "first slot last" across the wrap, against a concurrent consumer.
fn batch_first_slot_last() -> Explored {
    const START: u64 = u64::MAX;
    explore(|| {
        let ring = Arc::new(Ring::new(2, START));
        let producer = {
            let ring = ring.clone();
            thread::spawn(move || {
                let mut hint = ring.read_index();
                let first = ring.reserve_single(2, 0, &mut hint).expect("an empty ring has room");
                ring.write_batch2(first, [1, 2]);
                ring.producers_done.fetch_add(1, AcqRel);
            })
        };
        let consumer = {
            let ring = ring.clone();
            thread::spawn(move || ring.consumer(2, 1))
        };
        producer.join().unwrap();
        let got = consumer.join().unwrap();
        assert!(got.iter().copied().eq(1..=got.len() as u64), "batch order: {got:?}");
        if ring.gave_up.load(Relaxed) {
            return false;
        }
        assert_eq!(got, vec![1, 2]);
        true
    })
}

#[test]
fn two_producers_one_consumer() {
    two_producers(Variant::Correct, 2, 0).assert_explored("two_producers_one_consumer");
}

#[test]
fn two_producers_on_a_full_ring() {
    two_producers(Variant::Correct, 1, u64::MAX).assert_explored("two_producers_on_a_full_ring");
}

#[test]
fn indices_across_the_wrap_and_a_full_ring() {
    wrap_and_full(Variant::Correct).assert_explored("indices_across_the_wrap_and_a_full_ring");
}

#[test]
fn batch_publishes_first_slot_last() {
    batch_first_slot_last().assert_explored("batch_publishes_first_slot_last");
}

#[test]
fn planted_relaxed_header_is_caught() {
    assert!(fails(|| wrap_and_full(Variant::RelaxedHeader)), "a Relaxed header publish went unnoticed");
}

#[test]
fn planted_relaxed_header_with_two_producers_is_caught() {
    assert!(fails(|| two_producers(Variant::RelaxedHeader, 2, 0)), "a Relaxed header publish went unnoticed");
}

#[test]
fn planted_non_atomic_reservation_is_caught() {
    assert!(fails(|| two_producers(Variant::NonAtomicReserve, 2, 0)), "a load+store reservation went unnoticed");
}
