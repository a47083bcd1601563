//! The 64-byte AQL packet layouts (HSA `hsa.h`, AMD `hsa_ext_amd.h`), header and setup encoding.
//!
//! Every packet is `repr(C)`, 64 bytes, 64-byte aligned and made of plain integers, so it can be
//! viewed as sixteen little-endian dwords ([`Packet::words`]). Dword 0 holds `header | setup << 16`;
//! it is the one dword the ring publishes with a release store.

use core::mem::{align_of, offset_of, size_of};

/// Size of one AQL packet in bytes.
pub const PACKET_BYTES: usize = 64;

/// Packet type, header bits 7:0 (`hsa_packet_type_t`).
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum PacketType {
    /// `HSA_PACKET_TYPE_VENDOR_SPECIFIC`: AMD formats (PM4 IB, barrier-value).
    VendorSpecific = 0,
    /// `HSA_PACKET_TYPE_INVALID`: the slot holds no packet; the packet processor stalls on it.
    Invalid = 1,
    /// `HSA_PACKET_TYPE_KERNEL_DISPATCH`.
    KernelDispatch = 2,
    /// `HSA_PACKET_TYPE_BARRIER_AND`.
    BarrierAnd = 3,
    /// `HSA_PACKET_TYPE_AGENT_DISPATCH`.
    AgentDispatch = 4,
    /// `HSA_PACKET_TYPE_BARRIER_OR`.
    BarrierOr = 5,
}

impl PacketType {
    /// Decodes header bits 7:0; `None` for a reserved type.
    pub const fn from_bits(bits: u8) -> Option<PacketType> {
        Some(match bits {
            0 => PacketType::VendorSpecific,
            1 => PacketType::Invalid,
            2 => PacketType::KernelDispatch,
            3 => PacketType::BarrierAnd,
            4 => PacketType::AgentDispatch,
            5 => PacketType::BarrierOr,
            _ => return None,
        })
    }
}

/// Memory-fence scope of an acquire or release fence (`hsa_fence_scope_t`).
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum FenceScope {
    /// No fence.
    None = 0,
    /// Agent scope.
    Agent = 1,
    /// System scope.
    System = 2,
}

/// A packet header (`u16` at offset 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Header(pub u16);

impl Header {
    const TYPE_MASK: u16 = 0xff;
    const BARRIER: u16 = 1 << 8;
    const ACQUIRE_SHIFT: u16 = 9;
    const RELEASE_SHIFT: u16 = 11;

    /// The header of an unpublished or retired slot.
    pub const INVALID: Header = Header(PacketType::Invalid as u16);

    /// Builds a header from its fields.
    pub const fn new(ty: PacketType, barrier: bool, acquire: FenceScope, release: FenceScope) -> Self {
        let mut h = ty as u16;
        if barrier {
            h |= Self::BARRIER;
        }
        h |= (acquire as u16) << Self::ACQUIRE_SHIFT;
        h |= (release as u16) << Self::RELEASE_SHIFT;
        Header(h)
    }

    /// The packet type, `None` for a reserved value.
    pub const fn packet_type(self) -> Option<PacketType> {
        PacketType::from_bits((self.0 & Self::TYPE_MASK) as u8)
    }

    /// Whether the barrier bit is set: the packet waits for all earlier packets of its queue.
    pub const fn barrier(self) -> bool {
        self.0 & Self::BARRIER != 0
    }

    /// The acquire fence scope bits.
    pub const fn acquire_bits(self) -> u16 {
        (self.0 >> Self::ACQUIRE_SHIFT) & 3
    }

    /// The release fence scope bits.
    pub const fn release_bits(self) -> u16 {
        (self.0 >> Self::RELEASE_SHIFT) & 3
    }
}

/// Header HIP uses for an in-order kernel dispatch: barrier, system acquire and release (`0x1502`).
pub const DISPATCH_HEADER: Header =
    Header::new(PacketType::KernelDispatch, true, FenceScope::System, FenceScope::System);
/// Header HIP uses for a barrier-AND marker: barrier, system scopes (`0x1503`).
pub const BARRIER_AND_HEADER: Header =
    Header::new(PacketType::BarrierAnd, true, FenceScope::System, FenceScope::System);
/// A barrier-AND with no fences: the no-op filler for a reserved slot that was not used (`0x0103`).
pub const NOP_HEADER: Header = Header::new(PacketType::BarrierAnd, true, FenceScope::None, FenceScope::None);

/// Kernel dispatch packet (`hsa_kernel_dispatch_packet_t`).
#[repr(C, align(64))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KernelDispatchPacket {
    /// Packet header.
    pub header: u16,
    /// Bits 1:0: number of grid dimensions.
    pub setup: u16,
    /// Work-group size in work-items, x.
    pub workgroup_size_x: u16,
    /// Work-group size, y.
    pub workgroup_size_y: u16,
    /// Work-group size, z.
    pub workgroup_size_z: u16,
    /// Reserved, 0.
    pub reserved0: u16,
    /// Grid size in work-items, x.
    pub grid_size_x: u32,
    /// Grid size, y.
    pub grid_size_y: u32,
    /// Grid size, z.
    pub grid_size_z: u32,
    /// Private (scratch) bytes per work-item.
    pub private_segment_size: u32,
    /// Group (LDS) bytes per work-group.
    pub group_segment_size: u32,
    /// Address of the 64-byte kernel descriptor.
    pub kernel_object: u64,
    /// Address of the kernel arguments (16-byte aligned).
    pub kernarg_address: u64,
    /// Reserved (ROCclr keeps a correlation id here).
    pub reserved2: u64,
    /// Completion signal handle, 0 for none.
    pub completion_signal: u64,
}

/// Barrier-AND and barrier-OR packet (`hsa_barrier_and_packet_t`, `hsa_barrier_or_packet_t`).
#[repr(C, align(64))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BarrierPacket {
    /// Packet header (type BARRIER_AND or BARRIER_OR).
    pub header: u16,
    /// Reserved, 0.
    pub reserved0: u16,
    /// Reserved, 0.
    pub reserved1: u32,
    /// Dependency signal handles; 0 means "no dependency".
    pub dep_signal: [u64; 5],
    /// Reserved, 0.
    pub reserved2: u64,
    /// Completion signal handle, 0 for none.
    pub completion_signal: u64,
}

/// Agent dispatch packet (`hsa_agent_dispatch_packet_t`).
#[repr(C, align(64))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AgentDispatchPacket {
    /// Packet header.
    pub header: u16,
    /// Application-defined command.
    pub kind: u16,
    /// Reserved, 0.
    pub reserved0: u32,
    /// Where the agent writes its result.
    pub return_address: u64,
    /// Arguments.
    pub arg: [u64; 4],
    /// Reserved, 0.
    pub reserved2: u64,
    /// Completion signal handle, 0 for none.
    pub completion_signal: u64,
}

/// AMD vendor packet format byte (`hsa_amd_packet_type_t`).
pub mod amd_format {
    /// `HSA_AMD_PACKET_TYPE_BARRIER_VALUE`.
    pub const BARRIER_VALUE: u8 = 2;
    /// PM4 indirect buffer (ROCr `ExecutePM4`).
    pub const PM4_IB: u8 = 1;
}

/// Comparison of a barrier-value packet (`hsa_signal_condition_t`).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Condition {
    /// `(value & mask) == expected`.
    Eq = 0,
    /// `(value & mask) != expected`.
    Ne = 1,
    /// `(value & mask) < expected`.
    Lt = 2,
    /// `(value & mask) >= expected`.
    Gte = 3,
}

impl Condition {
    /// Decodes the 32-bit condition field.
    pub const fn from_bits(bits: u32) -> Option<Condition> {
        Some(match bits {
            0 => Condition::Eq,
            1 => Condition::Ne,
            2 => Condition::Lt,
            3 => Condition::Gte,
            _ => return None,
        })
    }

    /// Whether `value` satisfies the condition against `expected` (signed, as HSA compares).
    pub const fn holds(self, value: i64, expected: i64) -> bool {
        match self {
            Condition::Eq => value == expected,
            Condition::Ne => value != expected,
            Condition::Lt => value < expected,
            Condition::Gte => value >= expected,
        }
    }
}

/// AMD barrier-value packet (`hsa_amd_barrier_value_packet_t`): blocks the queue until
/// `(signal.value & mask) cond value`.
#[repr(C, align(64))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BarrierValuePacket {
    /// Packet header (type VENDOR_SPECIFIC).
    pub header: u16,
    /// [`amd_format::BARRIER_VALUE`].
    pub amd_format: u8,
    /// Reserved, 0.
    pub reserved: u8,
    /// Reserved, 0.
    pub reserved0: u32,
    /// Signal whose value (at offset 8) is compared.
    pub signal: u64,
    /// Value compared against.
    pub value: i64,
    /// Mask applied to the signal value first.
    pub mask: i64,
    /// A [`Condition`].
    pub cond: u32,
    /// Reserved, 0.
    pub reserved1: u32,
    /// Reserved, 0.
    pub reserved2: u64,
    /// Reserved, 0.
    pub reserved3: u64,
    /// Completion signal handle, 0 for none.
    pub completion_signal: u64,
}

/// A packet as sixteen dwords: the form the ring copies and the packet processor decodes.
pub type PacketWords = [u32; 16];

/// Implemented by every packet layout of this module.
///
/// # Safety
/// The implementing type must be `repr(C)`, exactly 64 bytes, 64-byte aligned, without padding,
/// and made of integers only, so every bit pattern is a valid value.
pub unsafe trait Packet: Copy {
    /// The packet viewed as dwords.
    fn words(&self) -> &PacketWords {
        // SAFETY: the trait contract: 64 bytes, no padding, alignment 64 >= 4.
        unsafe { &*(self as *const Self as *const PacketWords) }
    }

    /// Rebuilds the packet from its dwords.
    fn from_words(words: &PacketWords) -> Self {
        // SAFETY: the trait contract: same size, every bit pattern valid; read_unaligned because
        // `words` is only 4-byte aligned.
        unsafe { core::ptr::read_unaligned(words as *const PacketWords as *const Self) }
    }

    /// The header (low half of dword 0).
    fn header(&self) -> Header {
        Header(self.words()[0] as u16)
    }
}

/// Any packet as raw dwords, 64-byte aligned: what a graph executable stores, ready to copy.
#[repr(C, align(64))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RawPacket(pub PacketWords);

macro_rules! packet_layout {
    ($ty:ty) => {
        // SAFETY: checked below: repr(C), 64 bytes, align 64, integer fields whose sizes add up
        // to 64 (no padding).
        unsafe impl Packet for $ty {}
        const _: () = assert!(size_of::<$ty>() == PACKET_BYTES && align_of::<$ty>() == 64);
    };
}
packet_layout!(KernelDispatchPacket);
packet_layout!(BarrierPacket);
packet_layout!(AgentDispatchPacket);
packet_layout!(BarrierValuePacket);
packet_layout!(RawPacket);

// Offsets as in hsa.h / hsa_ext_amd.h (checked against the headers by the tests crate too).
const _: () = {
    assert!(offset_of!(KernelDispatchPacket, setup) == 2);
    assert!(offset_of!(KernelDispatchPacket, workgroup_size_x) == 4);
    assert!(offset_of!(KernelDispatchPacket, reserved0) == 10);
    assert!(offset_of!(KernelDispatchPacket, grid_size_x) == 12);
    assert!(offset_of!(KernelDispatchPacket, grid_size_z) == 20);
    assert!(offset_of!(KernelDispatchPacket, private_segment_size) == 24);
    assert!(offset_of!(KernelDispatchPacket, group_segment_size) == 28);
    assert!(offset_of!(KernelDispatchPacket, kernel_object) == 32);
    assert!(offset_of!(KernelDispatchPacket, kernarg_address) == 40);
    assert!(offset_of!(KernelDispatchPacket, reserved2) == 48);
    assert!(offset_of!(KernelDispatchPacket, completion_signal) == 56);
    assert!(offset_of!(BarrierPacket, dep_signal) == 8);
    assert!(offset_of!(BarrierPacket, reserved2) == 48);
    assert!(offset_of!(BarrierPacket, completion_signal) == 56);
    assert!(offset_of!(AgentDispatchPacket, kind) == 2);
    assert!(offset_of!(AgentDispatchPacket, return_address) == 8);
    assert!(offset_of!(AgentDispatchPacket, arg) == 16);
    assert!(offset_of!(AgentDispatchPacket, completion_signal) == 56);
    assert!(offset_of!(BarrierValuePacket, amd_format) == 2);
    assert!(offset_of!(BarrierValuePacket, signal) == 8);
    assert!(offset_of!(BarrierValuePacket, value) == 16);
    assert!(offset_of!(BarrierValuePacket, mask) == 24);
    assert!(offset_of!(BarrierValuePacket, cond) == 32);
    assert!(offset_of!(BarrierValuePacket, completion_signal) == 56);
};

impl KernelDispatchPacket {
    /// Dword 0 for this packet's header and setup.
    pub const fn header_setup(&self) -> u32 {
        self.header as u32 | (self.setup as u32) << 16
    }
}

impl BarrierPacket {
    /// A barrier-AND on up to five dependencies.
    pub const fn and(deps: [u64; 5], completion_signal: u64) -> Self {
        BarrierPacket {
            header: BARRIER_AND_HEADER.0,
            reserved0: 0,
            reserved1: 0,
            dep_signal: deps,
            reserved2: 0,
            completion_signal,
        }
    }

    /// The no-op filler published into a reserved slot that could not be used.
    pub const fn nop() -> Self {
        BarrierPacket {
            header: NOP_HEADER.0,
            reserved0: 0,
            reserved1: 0,
            dep_signal: [0; 5],
            reserved2: 0,
            completion_signal: 0,
        }
    }
}

/// A decoded packet, as the packet processor sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoded {
    /// A kernel dispatch.
    KernelDispatch(KernelDispatchPacket),
    /// A barrier-AND.
    BarrierAnd(BarrierPacket),
    /// A barrier-OR.
    BarrierOr(BarrierPacket),
    /// An agent dispatch.
    AgentDispatch(AgentDispatchPacket),
    /// An AMD barrier-value packet.
    BarrierValue(BarrierValuePacket),
    /// A vendor packet of another AMD format (the byte at offset 2).
    Vendor(u8),
}

impl Decoded {
    /// Decodes a published packet; `None` for INVALID or a reserved type.
    pub fn decode(words: &PacketWords) -> Option<Decoded> {
        let header = Header(words[0] as u16);
        Some(match header.packet_type()? {
            PacketType::Invalid => return None,
            PacketType::KernelDispatch => Decoded::KernelDispatch(Packet::from_words(words)),
            PacketType::BarrierAnd => Decoded::BarrierAnd(Packet::from_words(words)),
            PacketType::BarrierOr => Decoded::BarrierOr(Packet::from_words(words)),
            PacketType::AgentDispatch => Decoded::AgentDispatch(Packet::from_words(words)),
            PacketType::VendorSpecific => match (words[0] >> 16) as u8 {
                amd_format::BARRIER_VALUE => Decoded::BarrierValue(Packet::from_words(words)),
                other => Decoded::Vendor(other),
            },
        })
    }

    /// The completion signal of the packet (0 for none).
    pub fn completion_signal(&self) -> u64 {
        match self {
            Decoded::KernelDispatch(p) => p.completion_signal,
            Decoded::BarrierAnd(p) | Decoded::BarrierOr(p) => p.completion_signal,
            Decoded::AgentDispatch(p) => p.completion_signal,
            Decoded::BarrierValue(p) => p.completion_signal,
            Decoded::Vendor(_) => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_match_hip() {
        assert_eq!(DISPATCH_HEADER.0, 0x1502);
        assert_eq!(BARRIER_AND_HEADER.0, 0x1503);
        assert_eq!(NOP_HEADER.0, 0x0103);
        assert_eq!(Header::new(PacketType::KernelDispatch, false, FenceScope::Agent, FenceScope::Agent).0, 0x0a02);
        assert!(DISPATCH_HEADER.barrier());
        assert_eq!(DISPATCH_HEADER.acquire_bits(), 2);
        assert_eq!(DISPATCH_HEADER.release_bits(), 2);
        assert_eq!(Header(0x00ff).packet_type(), None);
    }

    #[test]
    fn words_round_trip() {
        let p = KernelDispatchPacket {
            header: DISPATCH_HEADER.0,
            setup: 3,
            workgroup_size_x: 64,
            workgroup_size_y: 1,
            workgroup_size_z: 1,
            grid_size_x: 1024,
            grid_size_y: 1,
            grid_size_z: 1,
            kernel_object: 0xdead_beef,
            kernarg_address: 0x1000,
            completion_signal: 0x40,
            ..Default::default()
        };
        assert_eq!(p.words()[0], 0x0003_1502);
        assert_eq!(p.words()[8], 0xdead_beef);
        assert_eq!(Decoded::decode(p.words()), Some(Decoded::KernelDispatch(p)));
        let b = BarrierValuePacket {
            header: Header::new(PacketType::VendorSpecific, true, FenceScope::None, FenceScope::None).0,
            amd_format: amd_format::BARRIER_VALUE,
            signal: 8,
            value: 5,
            mask: -1,
            cond: Condition::Gte as u32,
            ..Default::default()
        };
        assert_eq!(Decoded::decode(b.words()), Some(Decoded::BarrierValue(b)));
        assert_eq!(Decoded::decode(&[1; 16]), None);
    }
}
