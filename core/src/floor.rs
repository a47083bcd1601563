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

use core::sync::atomic::{fence, Ordering};

use portable_atomic::{AtomicU32, AtomicU64};

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

#[cfg(test)]
mod tests {
    use super::PacketFloor;

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
}
