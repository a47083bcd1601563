//! [`AqlRing`]: the one producer protocol, and the consumer-side view the packet processor uses.
//!
//! # Publish protocol
//!
//! 1. Check for room: `write - read + n <= size`, re-reading `read` (Acquire) up to a bound. A
//!    ring that stays full is an error before anything is reserved, so a full ring never
//!    overwrites and never leaves a hole.
//! 2. Reserve: `first = write_index.fetch_add(n, AcqRel)`. Indices are `u64` packet counts that
//!    only grow; a slot is `base + (index & mask) * 64`. With several producers another one may
//!    have taken the room seen in step 1, so the producer waits again until `first + n - read <=
//!    size`.
//! 3. Write bytes 4..64 of each packet with plain stores.
//! 4. Publish dword 0 (`header | setup << 16`) of each packet with a Release store, in index
//!    order. The packet processor stops at the first INVALID header, so it never sees a body
//!    before its header.
//! 5. Ring the doorbell with the index of the last packet written (`first + n - 1`); the backend
//!    does that store (or call), after a SeqCst fence.
//!
//! A [`Reservation`] dropped before all its packets were written publishes the rest as no-op
//! barriers, so the consumer never stalls on a reserved hole.
//!
//! # Consumer protocol
//!
//! The consumer reads dword 0 with Acquire; INVALID means "not yet published". After the packet
//! has completed it stores INVALID back (Release) and advances `read_index` by one (Release); the
//! producer's Acquire load of `read_index` therefore orders slot reuse after the consumer is done
//! with the slot, including its kernel arguments.
//!
//! # Checked by loom
//!
//! Every access to a slot goes through [`SlotMemory`] and every index access through
//! [`crate::sync::atomic`], so `core/tests/loom_ring.rs` runs this code itself over loom's memory
//! (`RUSTFLAGS="--cfg loom" cargo test -p aqueduct --release --test loom_ring`). The planted bugs
//! of `scripts/verify loom` are `cfg(loom_bug = "...")` switches in the functions below.

use core::ptr::NonNull;

use crate::aql::packet::{BarrierPacket, Header, Packet, PacketWords, RawPacket, PACKET_BYTES};
use crate::error::{Error, Result};
use crate::sync::atomic::AtomicU64;

/// The index words [`AqlRing::new`] takes: `portable_atomic::AtomicU64`, the type backends
/// name (loom's in loom models).
#[cfg(not(loom))]
pub type IndexWord = portable_atomic::AtomicU64;
/// The index words [`AqlRing::new`] takes: loom's in loom models.
#[cfg(loom)]
pub type IndexWord = AtomicU64;
use crate::sync::{unless_planted, Ordering, SlotMemory};

// The slot memory below `aql` holds packets of exactly this layout.
const _: () = assert!(crate::sync::SLOT_BYTES == PACKET_BYTES && size_of::<crate::sync::SlotWords>() == PACKET_BYTES);

/// How many times a producer re-reads the read index before a full ring is reported.
pub const DEFAULT_ROOM_SPINS: u32 = 1 << 16;

/// A ring's memory as plain addresses (C layout; see [`AqlRing::addresses`]).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RingAddresses {
    /// The first slot (64-byte aligned).
    pub base: u64,
    /// Slots, a power of two.
    pub size: u32,
    /// Reserved, 0.
    pub reserved: u32,
    /// The 64-bit write index.
    pub write_index: u64,
    /// The 64-bit read index.
    pub read_index: u64,
}

impl RingAddresses {
    /// The ring these addresses describe.
    ///
    /// # Safety
    /// The addresses must describe a live ring as [`AqlRing::new`] requires.
    pub unsafe fn ring(&self) -> Result<AqlRing> {
        let base = NonNull::new(core::ptr::with_exposed_provenance_mut::<u8>(self.base as usize));
        let w = NonNull::new(core::ptr::with_exposed_provenance_mut::<IndexWord>(self.write_index as usize));
        let r = NonNull::new(core::ptr::with_exposed_provenance_mut::<IndexWord>(self.read_index as usize));
        let (Some(base), Some(w), Some(r)) = (base, w, r) else { return Err(Error::InvalidValue) };
        // SAFETY: the caller's contract.
        unsafe { AqlRing::new(base, self.size, w, r) }
    }
}

/// A view of an AQL ring buffer and its two indices in shared memory.
///
/// `AqlRing` is a plain descriptor (pointers and a size); copies of it describe the same ring.
#[derive(Debug, Clone, Copy)]
pub struct AqlRing {
    slots: SlotMemory,
    write_index: NonNull<AtomicU64>,
    read_index: NonNull<AtomicU64>,
}

// SAFETY: the ring only touches shared memory through atomics (indices, dword 0) and through the
// slot-ownership protocol documented above; the pointers stay valid per `AqlRing::new`'s contract.
unsafe impl Send for AqlRing {}
// SAFETY: as for Send: every shared access is atomic or owned through a reservation.
unsafe impl Sync for AqlRing {}

impl AqlRing {
    /// Describes a ring of `size` packets at `base` with its write and read indices.
    ///
    /// Fails with `InvalidValue` if `size` is not a power of two or `base` is not 64-byte aligned.
    ///
    /// # Safety
    /// `base` must point at `size * 64` bytes, and the indices at live `u64`s, that all stay
    /// valid and are accessed only through this protocol for as long as any copy of the ring is
    /// used.
    pub unsafe fn new(
        base: NonNull<u8>,
        size: u32,
        write_index: NonNull<IndexWord>,
        read_index: NonNull<IndexWord>,
    ) -> Result<Self> {
        if size == 0 || !size.is_power_of_two() || base.as_ptr() as usize % PACKET_BYTES != 0 {
            return Err(Error::InvalidValue);
        }
        // SAFETY: the caller's contract is SlotMemory::raw's.
        let slots = unsafe { SlotMemory::raw(base, u64::from(size) - 1) };
        // The same type where 64-bit atomics are native; elsewhere core's out-of-line wrapper,
        // `repr(transparent)` over the caller's type.
        Ok(AqlRing { slots, write_index: write_index.cast(), read_index: read_index.cast() })
    }

    /// Describes the ring of a loom model's memory (loom builds only; see `core/src/sync.rs`).
    ///
    /// Fails with `InvalidValue` if `N` is not a power of two.
    ///
    /// # Safety
    /// `mem` must outlive every copy of the ring.
    #[cfg(loom)]
    pub unsafe fn new_loom<const N: usize>(mem: &crate::sync::LoomRingMemory<N>) -> Result<Self> {
        if N == 0 || !N.is_power_of_two() {
            return Err(Error::InvalidValue);
        }
        Ok(AqlRing {
            // SAFETY: the caller keeps `mem` alive while the ring is used.
            slots: unsafe { SlotMemory::loom(mem) },
            write_index: NonNull::from(&mem.write_index),
            read_index: NonNull::from(&mem.read_index),
        })
    }

    /// The ring's memory as addresses, for a producer that is not this process's code (the
    /// conditional-node scheduler on the device): slots, size in packets, write and read index.
    pub fn addresses(&self) -> RingAddresses {
        RingAddresses {
            base: self.slots.base().as_ptr().expose_provenance() as u64,
            size: self.size() as u32,
            reserved: 0,
            write_index: self.write_index.as_ptr().expose_provenance() as u64,
            read_index: self.read_index.as_ptr().expose_provenance() as u64,
        }
    }

    /// Ring size in packets.
    pub fn size(&self) -> u64 {
        self.slots.mask() + 1
    }

    fn write_index_atomic(&self) -> &AtomicU64 {
        // SAFETY: `new`'s contract keeps the index alive while the ring is used.
        unsafe { self.write_index.as_ref() }
    }

    fn read_index_atomic(&self) -> &AtomicU64 {
        // SAFETY: `new`'s contract keeps the index alive while the ring is used.
        unsafe { self.read_index.as_ref() }
    }

    /// The current write index (packets reserved so far).
    pub fn write_index(&self) -> u64 {
        // Ordering: Acquire, so a consumer that sees a new index also sees earlier reservations.
        self.write_index_atomic().load(Ordering::Acquire)
    }

    /// The current read index (packets retired so far).
    pub fn read_index(&self) -> u64 {
        // Ordering: Acquire pairs with the consumer's Release advance (slot reuse).
        self.read_index_atomic().load(Ordering::Acquire)
    }

    fn has_room(&self, end: u64, read: u64) -> bool {
        end.wrapping_sub(read) <= self.size()
    }

    /// Reserves `n` consecutive slots (steps 1 and 2 of the protocol), waiting at most `spins`
    /// re-reads of the read index for room. `n` must be between 1 and the ring size.
    pub fn reserve(&self, n: u32, spins: u32) -> Result<Reservation<'_>> {
        let mut hint = self.read_index();
        self.reserve_hinted(n, spins, &mut hint)
    }

    /// [`reserve`](Self::reserve) with a producer-side copy of the read index: the room check
    /// trusts `read_hint` (a value this producer loaded before with Acquire; the index only
    /// grows, so a stale hint only underestimates the room) and reloads the shared index, which
    /// the consumer keeps writing, only when the hint says the ring is full.
    pub fn reserve_hinted(&self, n: u32, spins: u32, read_hint: &mut u64) -> Result<Reservation<'_>> {
        let n = u64::from(n);
        if n == 0 || n > self.size() {
            return Err(Error::InvalidValue);
        }
        let mut tries = 0u32;
        loop {
            // Ordering: Relaxed is enough for the room estimate; the reservation itself is the
            // AcqRel fetch_add below.
            let w = self.write_index_atomic().load(Ordering::Relaxed);
            if self.has_room(w.wrapping_add(n), *read_hint) {
                break;
            }
            *read_hint = self.read_index();
            if self.has_room(w.wrapping_add(n), *read_hint) {
                break;
            }
            if tries >= spins {
                return Err(Error::NotReady);
            }
            tries += 1;
            self.slots.spin_loop();
        }
        // Ordering: AcqRel, the multi-producer reservation (HSA add_write_index_acq_rel).
        #[cfg(not(loom_bug = "non_atomic_reserve"))]
        let first = self.write_index_atomic().fetch_add(n, Ordering::AcqRel);
        // Planted bug (loom builds): a load and a store instead of the atomic add, so two
        // producers can reserve the same slots.
        #[cfg(loom_bug = "non_atomic_reserve")]
        let first = {
            let w = self.write_index_atomic().load(Ordering::Acquire);
            self.write_index_atomic().store(w.wrapping_add(n), Ordering::Release);
            w
        };
        // Another producer may have taken the room; its reservation is ahead of ours and will be
        // consumed, so this wait ends once the consumer runs.
        while !self.has_room(first.wrapping_add(n), *read_hint) {
            *read_hint = self.read_index();
            self.slots.spin_loop();
        }
        Ok(Reservation { ring: self, first, n, written: 0 })
    }

    /// The single-producer reservation HSA allows for a queue only one agent writes
    /// (`hsa_queue_store_write_index` instead of the atomic add; docs/kfd-aql.md, "Ring publish
    /// protocol"): a load and a store of the write index, with the room check of
    /// [`reserve_hinted`](Self::reserve_hinted). A full ring is `NotReady` and reserves nothing.
    ///
    /// # Safety
    /// No other producer may reserve in this ring until the returned reservation is dropped
    /// (core's runtime publishes into a stream's ring only under its lock).
    // Inlined on hosts, so the reservation stays in registers in the caller (returned through
    // memory it cost store-forwarding stalls: docs/architecture.md, "The submit path,
    // instruction by instruction"), with the room check inline and the wait out of line.
    #[cfg_attr(target_has_atomic = "64", inline(always))]
    pub unsafe fn reserve_single_producer(&self, n: u32, spins: u32, read_hint: &mut u64) -> Result<Reservation<'_>> {
        let n = u64::from(n);
        if n == 0 || n > self.size() {
            return Err(Error::InvalidValue);
        }
        // Ordering: Relaxed; this producer is the only writer of the index.
        let first = self.write_index_atomic().load(Ordering::Relaxed);
        let end = first.wrapping_add(n);
        #[cfg(target_has_atomic = "64")]
        if !self.has_room(end, *read_hint) {
            self.wait_for_room(end, spins, read_hint)?;
        }
        #[cfg(not(target_has_atomic = "64"))]
        self.wait_for_room(end, spins, read_hint)?;
        // Ordering: Relaxed; packets are published by their Release headers and the doorbell,
        // not by the write index.
        self.write_index_atomic().store(end, Ordering::Relaxed);
        Ok(Reservation { ring: self, first, n, written: 0 })
    }

    /// The room wait of [`reserve_single_producer`](Self::reserve_single_producer): until the
    /// slots up to `end` are free by `read_hint`, re-reads the read index into it, at most
    /// `spins` times after the first re-read (`NotReady` then). Out of line and cold on hosts
    /// (their caller checks the hint first); inside the one reservation on small images.
    #[cfg_attr(target_has_atomic = "64", cold, inline(never))]
    #[cfg_attr(not(target_has_atomic = "64"), inline(always))]
    fn wait_for_room(&self, end: u64, spins: u32, read_hint: &mut u64) -> Result<()> {
        let mut tries = 0u32;
        while !self.has_room(end, *read_hint) {
            *read_hint = self.read_index();
            if self.has_room(end, *read_hint) {
                break;
            }
            if tries >= spins {
                return Err(Error::NotReady);
            }
            tries += 1;
            self.slots.spin_loop();
        }
        Ok(())
    }

    /// Reads the published packet at `index` (consumer side): `None` while the slot is INVALID.
    pub fn read(&self, index: u64) -> Option<PacketWords> {
        // Ordering: Acquire pairs with the producer's Release publish of dword 0.
        let d0 = self.slots.load_header(index, Ordering::Acquire);
        if Header(d0 as u16) == Header::INVALID {
            return None;
        }
        let mut words = [0u32; 16];
        words[0] = d0;
        // SAFETY: the slot is published (seen above with Acquire) and owned by the consumer until
        // it retires it.
        unsafe { self.slots.read_body(index, &mut words) };
        Some(words)
    }

    /// Retires the packet at `index` (consumer side): header back to INVALID, read index + 1.
    /// `index` must equal the current read index.
    pub fn retire(&self, index: u64) {
        // Ordering: Release, so a later producer that reuses the slot sees the INVALID header
        // only after the consumer's reads of the slot.
        self.slots.store_header(index, u32::from(Header::INVALID.0), Ordering::Release);
        // Ordering: Release pairs with the producer's Acquire room check, which orders the
        // producer's writes to the slot after the consumer's reads.
        self.read_index_atomic().store(index.wrapping_add(1), unless_planted!("relaxed_retire", Ordering::Release));
    }

    /// Fills every slot with an INVALID header, as a new queue is (HSA `hsa_queue_create`).
    /// Call only while no consumer or producer uses the ring.
    pub fn invalidate_all(&self) {
        for i in 0..self.size() {
            // Ordering: Relaxed; the queue is not in use yet.
            self.slots.store_header(i, u32::from(Header::INVALID.0), Ordering::Relaxed);
        }
    }
}

/// Slots reserved in an [`AqlRing`], to be written in order with [`Reservation::write`].
#[derive(Debug)]
pub struct Reservation<'r> {
    ring: &'r AqlRing,
    first: u64,
    n: u64,
    written: u64,
}

impl Reservation<'_> {
    /// Index of the first reserved slot.
    pub fn first(&self) -> u64 {
        self.first
    }

    /// Index of the next slot [`write`](Self::write) fills.
    pub fn next_index(&self) -> u64 {
        self.first.wrapping_add(self.written)
    }

    /// Number of slots still to write.
    pub fn remaining(&self) -> u64 {
        self.n - self.written
    }

    /// Writes and publishes the next packet (steps 3 and 4). Returns its index, or `None` if
    /// every reserved slot is already written.
    #[inline]
    pub fn write<P: Packet>(&mut self, packet: &P) -> Option<u64> {
        self.write_words(packet.words())
    }

    /// [`write`](Self::write) of a packet given as its 16 dwords (one copy of the code for every
    /// packet type; inlined on hosts, one out-of-line copy on small images).
    #[cfg_attr(target_has_atomic = "64", inline)]
    pub fn write_words(&mut self, words: &PacketWords) -> Option<u64> {
        if self.written == self.n {
            return None;
        }
        let index = self.next_index();
        // SAFETY: the slot is reserved by this reservation (fetch_add) and retired by the
        // consumer (room check), so nobody else accesses its body until dword 0 is published.
        unsafe { self.ring.slots.write_body(index, words) };
        // Ordering: Release publishes the body written above (step 4).
        self.ring.slots.store_header(index, words[0], unless_planted!("relaxed_header", Ordering::Release));
        self.written += 1;
        Some(index)
    }

    /// Writes and publishes `packets` (at most [`remaining`](Self::remaining)) as one batch:
    /// every packet but the first is written whole (its header with a Relaxed store), then the
    /// first packet's body, and last the first packet's header with a Release store. The
    /// consumer stops at the first INVALID header, so it sees none of the batch before that
    /// store, and the store orders every other write before it (docs/kfd-aql.md, "Ring publish
    /// protocol": the first slot is published last). Returns how many packets were written.
    pub fn write_batch(&mut self, packets: &[RawPacket]) -> usize {
        let n = packets.len().min(self.remaining() as usize);
        let Some((first, rest)) = packets.get(..n).and_then(<[RawPacket]>::split_first) else { return 0 };
        let start = self.next_index();
        // Planted bug (loom builds): the first slot published before the rest of the batch.
        #[cfg(loom_bug = "batch_first_slot_first")]
        self.publish(start, &first.0);
        for (k, p) in rest.iter().enumerate() {
            let index = start.wrapping_add(1 + k as u64);
            // SAFETY: slots start+1 .. start+n are reserved by this reservation and retired by
            // the consumer; nobody reads them before the first slot's header is published below.
            unsafe { self.ring.slots.write_body(index, &p.0) };
            // Ordering: Relaxed; the first slot's Release header below publishes this one.
            self.ring.slots.store_header(index, p.0[0], Ordering::Relaxed);
        }
        #[cfg(not(loom_bug = "batch_first_slot_first"))]
        self.publish(start, &first.0);
        self.written += n as u64;
        n
    }

    /// The body, then with Release the header, of the reserved slot `index`.
    fn publish(&self, index: u64, words: &PacketWords) {
        // SAFETY: the slot is reserved by this reservation, as in `write`.
        unsafe { self.ring.slots.write_body(index, words) };
        // Ordering: Release publishes this body and everything this producer wrote before.
        self.ring.slots.store_header(index, words[0], Ordering::Release);
    }

    /// The doorbell value for what was written so far: the index of the last packet written.
    pub fn doorbell_value(&self) -> Option<u64> {
        (self.written > 0).then(|| self.next_index().wrapping_sub(1))
    }

    /// Publishes no-op barriers into the slots not written yet and returns the doorbell value
    /// (the last reserved index).
    #[cfg_attr(target_has_atomic = "64", inline(always))]
    pub fn finish(mut self) -> u64 {
        self.fill_rest();
        self.first.wrapping_add(self.n).wrapping_sub(1)
    }

    #[inline]
    fn fill_rest(&mut self) {
        #[cfg(target_has_atomic = "64")]
        if self.written == self.n {
            return;
        }
        self.fill_rest_slow();
    }

    /// No-op barriers into the slots not written yet (out of line on hosts: a publish writes
    /// every slot it reserves).
    #[cfg_attr(target_has_atomic = "64", cold, inline(never))]
    #[cfg_attr(not(target_has_atomic = "64"), inline(always))]
    fn fill_rest_slow(&mut self) {
        let nop = BarrierPacket::nop();
        while self.write(&nop).is_some() {}
    }
}

impl Drop for Reservation<'_> {
    // Inline on hosts: after `finish` it is one compare (a call per publish otherwise).
    #[cfg_attr(target_has_atomic = "64", inline)]
    fn drop(&mut self) {
        self.fill_rest();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aql::Decoded;

    #[repr(C, align(64))]
    struct Mem([u8; 8 * 64]);

    #[test]
    fn batch_across_the_wrap_publishes_in_order() {
        let mut mem = Mem([0; 8 * 64]);
        let write = AtomicU64::new(u64::MAX - 2);
        let read = AtomicU64::new(u64::MAX - 2);
        let base = NonNull::new(mem.0.as_mut_ptr()).unwrap();
        // SAFETY: `mem` outlives the ring; the indices are live atomics.
        let ring = unsafe { AqlRing::new(base, 8, NonNull::from(&write), NonNull::from(&read)) }.unwrap();
        ring.invalidate_all();
        let packets: [RawPacket; 6] = core::array::from_fn(|i| {
            let mut b = BarrierPacket::and([i as u64 + 1, 0, 0, 0, 0], 0);
            b.header = crate::aql::BARRIER_AND_HEADER.0;
            RawPacket(*b.words())
        });
        let mut res = ring.reserve(6, 0).unwrap();
        assert_eq!(res.write_batch(&packets), 6);
        assert_eq!(res.finish(), 2);
        for (k, p) in packets.iter().enumerate() {
            let index = (u64::MAX - 2).wrapping_add(k as u64);
            let words = ring.read(index).unwrap();
            assert_eq!(&words, &p.0);
            assert!(matches!(Decoded::decode(&words), Some(Decoded::BarrierAnd(b)) if b.dep_signal[0] == k as u64 + 1));
            ring.retire(index);
        }
        assert_eq!(ring.read_index(), 3);
        // A full ring refuses without reserving.
        let _r = ring.reserve(8, 0).unwrap();
        assert_eq!(ring.reserve(1, 3).err(), Some(Error::NotReady));
    }
}
