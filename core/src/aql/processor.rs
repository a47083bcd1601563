//! The one packet-processing step, shared by core's loopback backend and the emulator's command
//! processor (docs/architecture.md rule 3; behaviour as docs/kfd-aql.md §3.4 describes the CP
//! firmware).
//!
//! [`step`] looks at the packet at the read index and either leaves the queue as it is (nothing
//! published, INVALID slot, unmet barrier or dependency), or runs the packet through a
//! [`PacketExecutor`], completes its signal and retires the slot. This model is in-order and runs
//! each packet to completion inside the step, so the barrier bit is always met; an executor that
//! runs packets concurrently keeps its own in-flight set and answers [`PacketExecutor::in_flight`].

use crate::aql::packet::{BarrierPacket, Condition, Decoded, KernelDispatchPacket};
use crate::aql::ring::AqlRing;

/// What the executor reports for a packet it ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Outcome {
    /// The packet completed.
    Done,
    /// The packet failed; the queue enters the error state.
    Fault(QueueFault),
}

/// Why a queue stopped (what the CP would report through the queue-error path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum QueueFault {
    /// A packet type or vendor format the queue does not support.
    UnsupportedPacket,
    /// A dispatch with an invalid geometry (zero sizes, work-group larger than 1024).
    InvalidDispatch,
    /// A kernel object nobody knows how to run.
    UnknownKernel,
    /// A memory access outside any mapping.
    MemoryViolation,
    /// The kernel reported an error.
    KernelError,
}

impl QueueFault {
    /// A non-zero byte naming the fault (for lock-free fault words).
    pub const fn code(self) -> u8 {
        match self {
            QueueFault::UnsupportedPacket => 1,
            QueueFault::InvalidDispatch => 2,
            QueueFault::UnknownKernel => 3,
            QueueFault::MemoryViolation => 4,
            QueueFault::KernelError => 5,
        }
    }

    /// The fault of a [`code`](Self::code); `None` for 0 and unknown values.
    pub const fn from_code(code: u8) -> Option<QueueFault> {
        Some(match code {
            1 => QueueFault::UnsupportedPacket,
            2 => QueueFault::InvalidDispatch,
            3 => QueueFault::UnknownKernel,
            4 => QueueFault::MemoryViolation,
            5 => QueueFault::KernelError,
            _ => return None,
        })
    }
}

/// The device side of packet processing: what the step needs from its surroundings.
pub trait PacketExecutor {
    /// Reads the value of a signal for a dependency or barrier-value check, with `mask` applied
    /// by the caller afterwards. `None` if the handle does not name readable memory.
    fn read_signal(&mut self, handle: u64, mask: i64) -> Option<i64>;
    /// Decrements a completion signal by one, writing `start`/`end` timestamps first when
    /// profiling is on, then posts its event mailbox if it has one: what
    /// [`AmdSignal::complete`](crate::AmdSignal::complete) does once the handle is resolved.
    fn complete_signal(&mut self, handle: u64, start: u64, end: u64);
    /// Runs a kernel dispatch to completion.
    fn dispatch(&mut self, packet: &KernelDispatchPacket, kernarg: u64) -> Outcome;
    /// The current device timestamp.
    fn timestamp(&mut self) -> u64;
    /// Whether earlier packets of this queue are still running (always false for an in-order
    /// executor).
    fn in_flight(&self) -> bool {
        false
    }
}

/// What one [`step`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Step {
    /// The read index reached the doorbell: nothing to do.
    Idle,
    /// The slot at the read index is not published yet (INVALID): the queue stalls.
    Stalled,
    /// The packet waits for its barrier bit or its dependencies.
    Blocked,
    /// The packet at this index ran and was retired.
    Retired(u64),
    /// The packet at this index failed; it is not retired and the queue is stopped.
    Faulted(u64, QueueFault),
}

fn deps_met<E: PacketExecutor>(b: &BarrierPacket, exec: &mut E, any: bool) -> bool {
    let mut live = b.dep_signal.iter().copied().filter(|&d| d != 0).peekable();
    if live.peek().is_none() {
        return true;
    }
    let mut met = live.map(|d| exec.read_signal(d, -1) == Some(0));
    if any {
        met.any(|m| m)
    } else {
        met.all(|m| m)
    }
}

/// Processes at most one packet of `ring`, whose doorbell says packets up to index `limit - 1`
/// (wrapping) are published.
pub fn step<E: PacketExecutor>(ring: &AqlRing, limit: u64, exec: &mut E) -> Step {
    let index = ring.read_index();
    // Indices wrap past u64::MAX: compare by distance, not by value.
    if limit.wrapping_sub(index) as i64 <= 0 {
        return Step::Idle;
    }
    let Some(words) = ring.read(index) else {
        return Step::Stalled;
    };
    let Some(packet) = Decoded::decode(&words) else {
        return Step::Faulted(index, QueueFault::UnsupportedPacket);
    };
    let barrier = crate::aql::Header(words[0] as u16).barrier();
    if barrier && exec.in_flight() {
        return Step::Blocked;
    }
    let start = exec.timestamp();
    let outcome = match &packet {
        Decoded::KernelDispatch(k) => exec.dispatch(k, k.kernarg_address),
        Decoded::BarrierAnd(b) => {
            if !deps_met(b, exec, false) {
                return Step::Blocked;
            }
            Outcome::Done
        }
        Decoded::BarrierOr(b) => {
            if !deps_met(b, exec, true) {
                return Step::Blocked;
            }
            Outcome::Done
        }
        Decoded::BarrierValue(v) => {
            let Some(cond) = Condition::from_bits(v.cond) else {
                return Step::Faulted(index, QueueFault::UnsupportedPacket);
            };
            match exec.read_signal(v.signal, v.mask) {
                Some(value) if cond.holds(value & v.mask, v.value) => Outcome::Done,
                Some(_) => return Step::Blocked,
                None => Outcome::Fault(QueueFault::MemoryViolation),
            }
        }
        // GPU AQL queues advertise KERNEL_DISPATCH only.
        Decoded::AgentDispatch(_) => Outcome::Fault(QueueFault::UnsupportedPacket),
        // PM4 indirect buffers are accepted and ignored; other formats are unsupported.
        Decoded::Vendor(f) if *f == crate::aql::amd_format::PM4_IB => Outcome::Done,
        Decoded::Vendor(_) => Outcome::Fault(QueueFault::UnsupportedPacket),
    };
    match outcome {
        Outcome::Done => {
            let signal = packet.completion_signal();
            if signal != 0 {
                let end = exec.timestamp();
                exec.complete_signal(signal, start, end);
            }
            ring.retire(index);
            Step::Retired(index)
        }
        Outcome::Fault(f) => Step::Faulted(index, f),
    }
}
