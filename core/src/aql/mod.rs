//! AQL: packet layouts, the ring producer protocol and the packet-processing step.
//!
//! This module is the only place that knows how packets are laid out and published
//! (docs/architecture.md rule 3): every backend, the loopback and the emulator go through
//! [`AqlRing`] and [`step`].

mod packet;
mod processor;
mod ring;

pub use packet::*;
pub use processor::{step, Outcome, PacketExecutor, QueueFault, Step};
pub use ring::{AqlRing, Reservation, RingAddresses, DEFAULT_ROOM_SPINS};
