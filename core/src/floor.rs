//! The packet floor: the least work any AQL submit path does for one packet, which the submit
//! figures of `cargo bench -p aqueduct --bench submit` and of `aqueduct bench` are judged against
//! (docs/architecture.md, "Performance budget").
//!
//! [`PacketFloor::submit`] is the measurement body both use, so the two report the same floor:
//! an `AcqRel` `fetch_add` on a 64-bit write index (the multi-producer reservation), the packet's
//! 60-byte body written with plain stores, a `Release` store of its first dword (the publish) and
//! a `Release` store of the index into an ordinary-memory doorbell. Nothing consumes the ring and
//! nothing checks for room: this is the cost of the protocol's stores and nothing else. Core has
//! no clock, so the caller times a loop of `submit` calls.
//!
//! [`LivePacketFloor`] is the same loop with the ring consumed, the floor of an enqueue whose
//! packet processor is live (the emulated device's `enqueue_dispatch` is judged against it): its
//! [`LiveProducer::submit`] is `submit` plus the producer's wait for room (a cached copy of the
//! read index, reloaded with `Acquire` only when the ring looks full), and a minimal consumer
//! ([`LivePacketFloor::consume`], run on a thread of the caller's) retires each packet as a
//! packet processor must:
//!
//! 1. spin on the slot's header until its type is not INVALID (`Acquire`, pairing with the
//!    producer's `Release` publish);
//! 2. read the packet (header and body);
//! 3. store INVALID back into the header (`Relaxed`), so the slot reads as empty when the ring
//!    wraps round to it;
//! 4. store the read index past it (`Release`: a producer that sees the new read index sees
//!    the slot invalidated, and may reuse it).
//!
//! Steps 3 and 4 come in this order because a producer reuses a slot once it sees the read
//! index past it: invalidating after would race with the producer's next header. Each packet
//! costs the producer one cache line it must take back from the consumer (the slot, last written
//! by the consumer's invalidation) and the consumer one line it must take from the producer (the
//! slot again); the read index's line moves only when the producer finds the ring full
//! (docs/architecture.md, "Performance budget", says what those transfers cost and how a burst
//! behind one doorbell avoids most of them).

use core::cell::UnsafeCell;
use core::sync::atomic::{fence, Ordering};

use portable_atomic::{AtomicBool, AtomicU32, AtomicU64};

use crate::aql::Header;

/// One 64-byte ring slot: the header dword, published atomically, and the 15-dword body.
#[repr(C, align(64))]
struct Slot {
    header: AtomicU32,
    body: [u32; 15],
}

/// A ring of `N` (a power of two) 64-byte slots in ordinary memory, with its write index and
/// doorbell. `N * 64` bytes: box it or make it a `static` for the usual 1024 slots.
#[repr(C, align(64))]
pub struct PacketFloor<const N: usize> {
    slots: [Slot; N],
    write: AtomicU64,
    doorbell: AtomicU64,
}

impl<const N: usize> PacketFloor<N> {
    const MASK: u64 = {
        assert!(N.is_power_of_two(), "the floor ring holds a power-of-two number of packets");
        N as u64 - 1
    };

    /// An empty ring.
    pub const fn new() -> Self {
        PacketFloor {
            slots: [const { Slot { header: AtomicU32::new(0), body: [0; 15] } }; N],
            write: AtomicU64::new(0),
            doorbell: AtomicU64::new(0),
        }
    }

    /// Publishes `packet` into the next slot and rings the doorbell with its index: the body of
    /// the packet-floor measurement. `&mut self`: one producer, so the plain body stores cannot
    /// race (the `fetch_add` is still the atomic one a shared ring needs).
    #[inline]
    pub fn submit(&mut self, packet: &[u32; 16]) {
        let index = self.publish(packet);
        // Ordering: Release; the doorbell follows the header store.
        self.doorbell.store(index, Ordering::Release);
    }

    /// [`submit`](Self::submit) with a `SeqCst` fence before the doorbell store, as a ring in
    /// device memory needs (a reference figure: core's publish needs only the `Release` fence,
    /// free on x86).
    #[inline]
    pub fn submit_fenced(&mut self, packet: &[u32; 16]) {
        let index = self.publish(packet);
        fence(Ordering::SeqCst);
        // Ordering: Release; as in `submit`.
        self.doorbell.store(index, Ordering::Release);
    }

    /// Packets submitted so far.
    pub fn submitted(&self) -> u64 {
        // Ordering: Relaxed; a count read by the single producer.
        self.write.load(Ordering::Relaxed)
    }

    /// The last doorbell value (the index of the last packet submitted).
    pub fn doorbell(&self) -> u64 {
        // Ordering: Acquire, as a consumer reads a doorbell.
        self.doorbell.load(Ordering::Acquire)
    }

    #[inline]
    fn publish(&mut self, packet: &[u32; 16]) -> u64 {
        // Ordering: AcqRel, the multi-producer reservation of the AQL protocol.
        let index = self.write.fetch_add(1, Ordering::AcqRel);
        let [header, body @ ..] = packet;
        if let Some(slot) = self.slots.get_mut((index & Self::MASK) as usize) {
            slot.body = *body;
            // Ordering: Release publishes the body stored above.
            slot.header.store(*header, Ordering::Release);
        }
        index
    }
}

impl<const N: usize> Default for PacketFloor<N> {
    fn default() -> Self {
        Self::new()
    }
}

/// The header dword of a slot that holds no packet (`HSA_PACKET_TYPE_INVALID`).
const INVALID: u32 = Header::INVALID.0 as u32;
/// The packet-type bits of a header dword.
const TYPE_MASK: u32 = 0xff;

/// One 64-byte slot of the live ring: the header the consumer spins on and the body the
/// producer writes before publishing it.
#[repr(C, align(64))]
struct LiveSlot {
    header: AtomicU32,
    body: UnsafeCell<[u32; 15]>,
}

/// A value alone on its cache line (and the next one, which x86's adjacent-line prefetcher
/// pairs with it), so the producer's, the consumer's and the doorbell's words do not share.
#[repr(align(128))]
struct Line<T>(T);

/// The live packet floor: a ring of `N` (a power of two) 64-byte slots with a producer
/// ([`producer`](Self::producer)) and a minimal consumer ([`consume`](Self::consume)) that runs on
/// another thread; see the module doc. `N * 64` bytes and more: box it.
#[repr(C, align(128))]
pub struct LivePacketFloor<const N: usize> {
    slots: [LiveSlot; N],
    write: Line<AtomicU64>,
    read: Line<AtomicU64>,
    doorbell: Line<AtomicU64>,
    stop: Line<AtomicBool>,
    consuming: Line<AtomicBool>,
}

// SAFETY: a slot's body is written only by the producer that reserved its index (the `fetch_add`
// hands each index to one producer), between seeing the slot retired (the read index past its
// previous use, `Acquire`) and publishing its header (`Release`), and read only by the one
// consumer (`consuming`) between seeing that header (`Acquire`) and storing the read index past
// it (`Release`); every other field is atomic.
unsafe impl<const N: usize> Sync for LivePacketFloor<N> {}

impl<const N: usize> LivePacketFloor<N> {
    const MASK: u64 = {
        assert!(N.is_power_of_two(), "the floor ring holds a power-of-two number of packets");
        N as u64 - 1
    };

    /// An empty ring: every slot INVALID, both indices 0.
    pub const fn new() -> Self {
        LivePacketFloor {
            slots: [const { LiveSlot { header: AtomicU32::new(INVALID), body: UnsafeCell::new([0; 15]) } }; N],
            write: Line(AtomicU64::new(0)),
            read: Line(AtomicU64::new(0)),
            doorbell: Line(AtomicU64::new(0)),
            stop: Line(AtomicBool::new(false)),
            consuming: Line(AtomicBool::new(false)),
        }
    }

    /// A producer. Several may submit at once: each reserves its own index and writes its slot
    /// only once the consumer has retired that slot's previous packet.
    pub fn producer(&self) -> LiveProducer<'_, N> {
        LiveProducer { floor: self, read_hint: 0 }
    }

    /// The consumer: retires packets in ring order until [`stop`](Self::stop) is called and the
    /// ring is empty; returns how many it retired. Run it on a thread of its own; while one
    /// consumer runs, another returns 0 at once.
    pub fn consume(&self) -> u64 {
        // Ordering: Acquire pairs with the Release below: a second consumer starts after the
        // first one's last read index.
        if self.consuming.0.swap(true, Ordering::Acquire) {
            return 0;
        }
        let mut read = self.read.0.load(Ordering::Relaxed);
        let start = read;
        while self.retire(read) {
            read += 1;
        }
        // Ordering: Release; see above.
        self.consuming.0.store(false, Ordering::Release);
        read - start
    }

    /// Ends [`consume`](Self::consume) once the ring is empty.
    pub fn stop(&self) {
        // Ordering: Release; the packets published before are retired before consume returns.
        self.stop.0.store(true, Ordering::Release);
    }

    /// Packets retired so far.
    pub fn retired(&self) -> u64 {
        // Ordering: Acquire, as the producer reads the read index.
        self.read.0.load(Ordering::Acquire)
    }

    /// The last doorbell value (the index of the last packet submitted).
    pub fn doorbell(&self) -> u64 {
        // Ordering: Acquire, as a consumer reads a doorbell.
        self.doorbell.0.load(Ordering::Acquire)
    }

    /// Waits for packet `read` and retires it (steps 1–4 of the module doc); `false` once
    /// stopped with the slot empty.
    #[inline]
    fn retire(&self, read: u64) -> bool {
        let Some(slot) = self.slots.get((read & Self::MASK) as usize) else { return false };
        loop {
            // Ordering: Acquire pairs with the producer's Release publish: the body is visible.
            let header = slot.header.load(Ordering::Acquire);
            if header & TYPE_MASK != INVALID {
                // SAFETY: the header is published, so the producer wrote the body before it and
                // writes the slot again only after the read index passes it (below).
                let body = unsafe { core::ptr::read(slot.body.get()) };
                core::hint::black_box((header, body));
                // Ordering: Relaxed; the Release store of the read index publishes it.
                slot.header.store(INVALID, Ordering::Relaxed);
                // Ordering: Release; the producer's Acquire load of the read index sees the slot
                // invalidated and the body read before it reuses the slot.
                self.read.0.store(read + 1, Ordering::Release);
                return true;
            }
            // Ordering: Acquire pairs with `stop`; the header is loaded again after it.
            if self.stop.0.load(Ordering::Acquire) && slot.header.load(Ordering::Acquire) & TYPE_MASK == INVALID {
                return false;
            }
            core::hint::spin_loop();
        }
    }
}

impl<const N: usize> Default for LivePacketFloor<N> {
    fn default() -> Self {
        Self::new()
    }
}

/// The producer of a [`LivePacketFloor`], with its cached copy of the read index.
pub struct LiveProducer<'a, const N: usize> {
    floor: &'a LivePacketFloor<N>,
    read_hint: u64,
}

impl<const N: usize> LiveProducer<'_, N> {
    /// Publishes `packet` into the next slot, once the consumer has retired the slot's previous
    /// packet, and rings the doorbell with its index: the body of the live-packet-floor
    /// measurement.
    #[inline]
    pub fn submit(&mut self, packet: &[u32; 16]) {
        let f = self.floor;
        // Ordering: AcqRel, the multi-producer reservation of the AQL protocol.
        let index = f.write.0.fetch_add(1, Ordering::AcqRel);
        while index.wrapping_sub(self.read_hint) >= N as u64 {
            // Ordering: Acquire pairs with the consumer's Release store of the read index.
            self.read_hint = f.read.0.load(Ordering::Acquire);
            core::hint::spin_loop();
        }
        let [header, body @ ..] = packet;
        if let Some(slot) = f.slots.get((index & LivePacketFloor::<N>::MASK) as usize) {
            // SAFETY: the read index is past the slot's previous packet, so the consumer is done
            // with it, and no other producer holds this index (the reservation above).
            unsafe { core::ptr::write(slot.body.get(), *body) };
            // Ordering: Release publishes the body stored above.
            slot.header.store(*header, Ordering::Release);
        }
        // Ordering: Release; the doorbell follows the header store.
        f.doorbell.0.store(index, Ordering::Release);
    }

    /// Packets submitted so far.
    pub fn submitted(&self) -> u64 {
        // Ordering: Relaxed; a count read by the single producer.
        self.floor.write.0.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::{LivePacketFloor, PacketFloor, INVALID};

    #[test]
    fn submit_publishes_into_consecutive_slots_and_wraps() {
        let mut f = PacketFloor::<4>::new();
        for i in 0..6u32 {
            let mut p = [i; 16];
            p[0] = 0x1502 | (i << 16);
            f.submit(&p);
            assert_eq!(f.doorbell(), u64::from(i));
        }
        f.submit_fenced(&[9; 16]);
        assert_eq!((f.submitted(), f.doorbell()), (7, 6));
        // Slot 2 holds packet 6 (the fenced one); slot 1 holds packet 5.
        assert_eq!((f.slots[2].header.load(core::sync::atomic::Ordering::Relaxed), f.slots[2].body), (9, [9; 15]));
        assert_eq!(f.slots[1].header.load(core::sync::atomic::Ordering::Relaxed), 0x1502 | (5 << 16));
        assert_eq!(f.slots[1].body, [5; 15]);
    }

    #[test]
    fn live_floor_retires_each_packet_and_invalidates_its_slot() {
        let f = LivePacketFloor::<4>::new();
        let mut p = f.producer();
        for i in 0..3u32 {
            p.submit(&[0x1502 | (i << 16); 16]);
        }
        assert_eq!(p.submitted(), 3);
        f.stop();
        // Stopped, the consumer still drains what was published, then returns.
        assert_eq!(f.consume(), 3);
        assert_eq!((f.retired(), f.doorbell()), (3, 2));
        assert!(f.slots.iter().all(|s| s.header.load(core::sync::atomic::Ordering::Relaxed) == INVALID));
    }
}
