//! The 64-byte kernel descriptor (docs/code-objects.md §4), fully decoded: segment sizes, the
//! entry offset, every field of `COMPUTE_PGM_RSRC1/2/3` and `kernel_code_properties`, and the
//! initial register layout they ask for.

use crate::error::{Error, Result};

/// Bytes of a kernel descriptor.
pub const SIZE: usize = 64;

/// `COMPUTE_PGM_RSRC1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Rsrc1 {
    /// The raw register value.
    pub raw: u32,
}

/// Float rounding mode (`FLOAT_ROUND_MODE_*`): 0 nearest even, 1 +inf, 2 −inf, 3 toward zero.
pub type RoundMode = u8;
/// Denormal mode (`FLOAT_DENORM_MODE_*`): 0 flush source and destination, 1 flush destination
/// (keep source), 2 flush source (keep destination), 3 keep both.
pub type DenormMode = u8;

const fn bits(v: u32, lo: u32, width: u32) -> u32 {
    (v >> lo) & ((1 << width) - 1)
}

impl Rsrc1 {
    /// `GRANULATED_WORKITEM_VGPR_COUNT` (bits 5:0).
    pub const fn granulated_vgprs(&self) -> u32 {
        bits(self.raw, 0, 6)
    }
    /// `GRANULATED_WAVEFRONT_SGPR_COUNT` (bits 9:6).
    pub const fn granulated_sgprs(&self) -> u32 {
        bits(self.raw, 6, 4)
    }
    /// `PRIORITY` (bits 11:10).
    pub const fn priority(&self) -> u32 {
        bits(self.raw, 10, 2)
    }
    /// `FLOAT_ROUND_MODE_32` (bits 13:12).
    pub const fn round_mode_32(&self) -> RoundMode {
        bits(self.raw, 12, 2) as u8
    }
    /// `FLOAT_ROUND_MODE_16_64` (bits 15:14).
    pub const fn round_mode_16_64(&self) -> RoundMode {
        bits(self.raw, 14, 2) as u8
    }
    /// `FLOAT_DENORM_MODE_32` (bits 17:16).
    pub const fn denorm_mode_32(&self) -> DenormMode {
        bits(self.raw, 16, 2) as u8
    }
    /// `FLOAT_DENORM_MODE_16_64` (bits 19:18).
    pub const fn denorm_mode_16_64(&self) -> DenormMode {
        bits(self.raw, 18, 2) as u8
    }
    /// `PRIV` (bit 20).
    pub const fn privileged(&self) -> bool {
        bits(self.raw, 20, 1) != 0
    }
    /// `ENABLE_DX10_CLAMP` (bit 21).
    pub const fn dx10_clamp(&self) -> bool {
        bits(self.raw, 21, 1) != 0
    }
    /// `DEBUG_MODE` (bit 22).
    pub const fn debug_mode(&self) -> bool {
        bits(self.raw, 22, 1) != 0
    }
    /// `ENABLE_IEEE_MODE` (bit 23).
    pub const fn ieee_mode(&self) -> bool {
        bits(self.raw, 23, 1) != 0
    }
    /// `BULKY` (bit 24).
    pub const fn bulky(&self) -> bool {
        bits(self.raw, 24, 1) != 0
    }
    /// `CDBG_USER` (bit 25).
    pub const fn cdbg_user(&self) -> bool {
        bits(self.raw, 25, 1) != 0
    }
    /// `FP16_OVFL` (bit 26) (GFX9+).
    pub const fn fp16_overflow(&self) -> bool {
        bits(self.raw, 26, 1) != 0
    }
    /// The MODE register a wave starts with (GFX9 layout: round (bits 3:0), denorm (bits 7:4),
    /// DX10_CLAMP (bit 8), IEEE (bit 9)), from the descriptor's fields.
    pub const fn initial_mode(&self) -> u32 {
        bits(self.raw, 12, 8) | (bits(self.raw, 21, 1) << 8) | (bits(self.raw, 23, 1) << 9)
    }
}

/// `COMPUTE_PGM_RSRC2`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Rsrc2 {
    /// The raw register value.
    pub raw: u32,
}

impl Rsrc2 {
    /// `ENABLE_PRIVATE_SEGMENT` (bit 0) (on GFX9+: the scratch wave-offset system SGPR).
    pub const fn private_segment(&self) -> bool {
        bits(self.raw, 0, 1) != 0
    }
    /// `USER_SGPR_COUNT` (bits 5:1).
    pub const fn user_sgpr_count(&self) -> u32 {
        bits(self.raw, 1, 5)
    }
    /// `ENABLE_TRAP_HANDLER` (bit 6).
    pub const fn trap_handler(&self) -> bool {
        bits(self.raw, 6, 1) != 0
    }
    /// `ENABLE_SGPR_WORKGROUP_ID_X/Y/Z` (bits 7, 8, 9).
    pub const fn workgroup_id(&self) -> [bool; 3] {
        [bits(self.raw, 7, 1) != 0, bits(self.raw, 8, 1) != 0, bits(self.raw, 9, 1) != 0]
    }
    /// `ENABLE_SGPR_WORKGROUP_INFO` (bit 10).
    pub const fn workgroup_info(&self) -> bool {
        bits(self.raw, 10, 1) != 0
    }
    /// `ENABLE_VGPR_WORKITEM_ID` (bits 12:11): 0 X, 1 X and Y, 2 X, Y and Z.
    pub const fn workitem_id_vgprs(&self) -> u32 {
        bits(self.raw, 11, 2)
    }
    /// `ENABLE_EXCEPTION_ADDRESS_WATCH` (bit 13).
    pub const fn address_watch(&self) -> bool {
        bits(self.raw, 13, 1) != 0
    }
    /// `ENABLE_EXCEPTION_MEMORY` (bit 14).
    pub const fn memory_violation(&self) -> bool {
        bits(self.raw, 14, 1) != 0
    }
    /// `GRANULATED_LDS_SIZE` (bits 23:15) (the CP writes it from the packet; 0 in code objects).
    pub const fn granulated_lds_size(&self) -> u32 {
        bits(self.raw, 15, 9)
    }
    /// `ENABLE_EXCEPTION_*` (bits 30:24): invalid, denormal, divide by zero, overflow, underflow,
    /// inexact, integer divide by zero (bit 0 = invalid).
    pub const fn fp_exceptions(&self) -> u32 {
        bits(self.raw, 24, 7)
    }
}

/// `COMPUTE_PGM_RSRC3` (gfx90a and gfx940 layout).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Rsrc3 {
    /// The raw register value.
    pub raw: u32,
}

impl Rsrc3 {
    /// `ACCUM_OFFSET` (bits 5:0): the first AGPR is unified VGPR `(accum_offset + 1) * 4`.
    pub const fn accum_offset(&self) -> u32 {
        bits(self.raw, 0, 6)
    }
    /// `TG_SPLIT` (bit 16): the waves of a work-group may run on different CUs.
    pub const fn tg_split(&self) -> bool {
        bits(self.raw, 16, 1) != 0
    }
}

/// `kernel_code_properties` bits.
pub mod properties {
    /// `ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER`.
    pub const PRIVATE_SEGMENT_BUFFER: u16 = 1 << 0;
    /// `ENABLE_SGPR_DISPATCH_PTR`.
    pub const DISPATCH_PTR: u16 = 1 << 1;
    /// `ENABLE_SGPR_QUEUE_PTR`.
    pub const QUEUE_PTR: u16 = 1 << 2;
    /// `ENABLE_SGPR_KERNARG_SEGMENT_PTR`.
    pub const KERNARG_SEGMENT_PTR: u16 = 1 << 3;
    /// `ENABLE_SGPR_DISPATCH_ID`.
    pub const DISPATCH_ID: u16 = 1 << 4;
    /// `ENABLE_SGPR_FLAT_SCRATCH_INIT`.
    pub const FLAT_SCRATCH_INIT: u16 = 1 << 5;
    /// `ENABLE_SGPR_PRIVATE_SEGMENT_SIZE`.
    pub const PRIVATE_SEGMENT_SIZE: u16 = 1 << 6;
    /// `ENABLE_WAVEFRONT_SIZE32`.
    pub const WAVEFRONT_SIZE32: u16 = 1 << 10;
    /// `USES_DYNAMIC_STACK`.
    pub const USES_DYNAMIC_STACK: u16 = 1 << 11;
}

/// One value the hardware loads into SGPRs before the first instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SgprInit {
    /// The private segment buffer descriptor (4 SGPRs, the queue's scratch V#).
    PrivateSegmentBuffer,
    /// Address of the AQL dispatch packet (2).
    DispatchPtr,
    /// Address of the `amd_queue_t` (2).
    QueuePtr,
    /// Address of the kernel-argument segment (2).
    KernargSegmentPtr,
    /// The 64-bit dispatch id (2).
    DispatchId,
    /// Flat scratch init: the queue's scratch base (2).
    FlatScratchInit,
    /// The packet's private segment size (1).
    PrivateSegmentSize,
    /// Work-group id X, Y or Z (1 each).
    WorkgroupId(u8),
    /// Work-group info (1).
    WorkgroupInfo,
    /// This wave's scratch offset (1), the last system SGPR.
    PrivateSegmentWaveOffset,
}

impl SgprInit {
    /// SGPRs the value takes.
    pub const fn count(&self) -> u32 {
        match self {
            SgprInit::PrivateSegmentBuffer => 4,
            SgprInit::DispatchPtr
            | SgprInit::QueuePtr
            | SgprInit::KernargSegmentPtr
            | SgprInit::DispatchId
            | SgprInit::FlatScratchInit => 2,
            _ => 1,
        }
    }
}

/// A decoded kernel descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct KernelDescriptor {
    /// `GROUP_SEGMENT_FIXED_SIZE`: static LDS bytes per work-group.
    pub group_segment_fixed_size: u32,
    /// `PRIVATE_SEGMENT_FIXED_SIZE`: static scratch bytes per work-item.
    pub private_segment_fixed_size: u32,
    /// `KERNARG_SIZE`: kernel-argument bytes (0: unspecified).
    pub kernarg_size: u32,
    /// `KERNEL_CODE_ENTRY_BYTE_OFFSET`: from the descriptor to the first instruction.
    pub kernel_code_entry_byte_offset: i64,
    /// `COMPUTE_PGM_RSRC3`.
    pub rsrc3: Rsrc3,
    /// `COMPUTE_PGM_RSRC1`.
    pub rsrc1: Rsrc1,
    /// `COMPUTE_PGM_RSRC2`.
    pub rsrc2: Rsrc2,
    /// `kernel_code_properties` ([`properties`]).
    pub kernel_code_properties: u16,
    /// `KERNARG_PRELOAD` (bytes 58–59; 0 before gfx940's preloading).
    pub kernarg_preload: u16,
}

fn le32(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4).and_then(|s| s.try_into().ok()).map_or(0, u32::from_le_bytes)
}

impl KernelDescriptor {
    /// Decodes the first 64 bytes of `b`. Reserved bytes must be zero, as the assembler writes
    /// them, so that bytes that are not a descriptor are caught.
    pub fn from_bytes(b: &[u8]) -> Result<KernelDescriptor> {
        let b = b.get(..SIZE).ok_or(Error::Truncated("kernel descriptor"))?;
        let reserved = [12..16, 24..44, 60..64];
        if reserved.into_iter().any(|r| b.get(r).is_some_and(|r| r.iter().any(|&x| x != 0))) {
            return Err(Error::Malformed("a kernel descriptor's reserved bytes are not zero"));
        }
        let entry = b.get(16..24).and_then(|s| s.try_into().ok()).map_or(0, i64::from_le_bytes);
        Ok(KernelDescriptor {
            group_segment_fixed_size: le32(b, 0),
            private_segment_fixed_size: le32(b, 4),
            kernarg_size: le32(b, 8),
            kernel_code_entry_byte_offset: entry,
            rsrc3: Rsrc3 { raw: le32(b, 44) },
            rsrc1: Rsrc1 { raw: le32(b, 48) },
            rsrc2: Rsrc2 { raw: le32(b, 52) },
            kernel_code_properties: le32(b, 56) as u16,
            kernarg_preload: (le32(b, 56) >> 16) as u16,
        })
    }

    /// The 64 bytes of this descriptor.
    pub fn to_bytes(&self) -> [u8; SIZE] {
        let mut b = [0u8; SIZE];
        let mut put = |at: usize, v: &[u8]| b[at..at + v.len()].copy_from_slice(v);
        put(0, &self.group_segment_fixed_size.to_le_bytes());
        put(4, &self.private_segment_fixed_size.to_le_bytes());
        put(8, &self.kernarg_size.to_le_bytes());
        put(16, &self.kernel_code_entry_byte_offset.to_le_bytes());
        put(44, &self.rsrc3.raw.to_le_bytes());
        put(48, &self.rsrc1.raw.to_le_bytes());
        put(52, &self.rsrc2.raw.to_le_bytes());
        put(56, &self.kernel_code_properties.to_le_bytes());
        put(58, &self.kernarg_preload.to_le_bytes());
        b
    }

    fn has(&self, bit: u16) -> bool {
        self.kernel_code_properties & bit != 0
    }

    /// The kernel runs in wave32 (never on GFX9).
    pub fn wave32(&self) -> bool {
        self.has(properties::WAVEFRONT_SIZE32)
    }

    /// The kernel needs a stack whose size the compiler could not bound (recursion, calls
    /// through pointers): the runtime adds its stack-size limit to the private segment.
    pub fn uses_dynamic_stack(&self) -> bool {
        self.has(properties::USES_DYNAMIC_STACK)
    }

    /// Whether the kernel uses scratch: a fixed private segment, a dynamic stack, or the
    /// scratch wave offset enabled.
    pub fn uses_scratch(&self) -> bool {
        self.private_segment_fixed_size > 0 || self.uses_dynamic_stack() || self.rsrc2.private_segment()
    }

    /// Architected VGPRs per work-item the granulated count reserves. On gfx90a the count is the
    /// unified (VGPR + AGPR) one in granules of 8; elsewhere granules of 4 (wave64).
    pub fn vgprs(&self, gfx90a_unified: bool) -> u32 {
        let granule = if gfx90a_unified || self.wave32() { 8 } else { 4 };
        (self.rsrc1.granulated_vgprs() + 1) * granule
    }

    /// SGPRs the granulated count reserves on GFX9 (`2 * (count + 1) * 8` rounded as the
    /// assembler encodes it: granules of 16).
    pub fn sgprs(&self) -> u32 {
        (self.rsrc1.granulated_sgprs() / 2 + 1) * 16
    }

    /// First AGPR in the unified register file (gfx90a/gfx940), in VGPRs.
    pub fn accum_offset(&self) -> u32 {
        (self.rsrc3.accum_offset() + 1) * 4
    }

    /// The SGPRs loaded before the first instruction, in order from s0: the user SGPRs the
    /// code properties enable, then the system SGPRs `COMPUTE_PGM_RSRC2` enables (AMDHSA ABI;
    /// docs/code-objects.md §5). Calls `f(sgpr, value)` for each.
    pub fn initial_sgprs(&self, mut f: impl FnMut(u32, SgprInit)) {
        use properties::*;
        let user = [
            (PRIVATE_SEGMENT_BUFFER, SgprInit::PrivateSegmentBuffer),
            (DISPATCH_PTR, SgprInit::DispatchPtr),
            (QUEUE_PTR, SgprInit::QueuePtr),
            (KERNARG_SEGMENT_PTR, SgprInit::KernargSegmentPtr),
            (DISPATCH_ID, SgprInit::DispatchId),
            (FLAT_SCRATCH_INIT, SgprInit::FlatScratchInit),
            (PRIVATE_SEGMENT_SIZE, SgprInit::PrivateSegmentSize),
        ];
        let mut at = 0;
        for (bit, v) in user {
            if self.has(bit) {
                f(at, v);
                at += v.count();
            }
        }
        // The system SGPRs follow the user SGPRs USER_SGPR_COUNT announces (which may count
        // more than the enabled ones: preloaded kernel arguments).
        at = at.max(self.rsrc2.user_sgpr_count());
        for (i, on) in self.rsrc2.workgroup_id().into_iter().enumerate() {
            if on {
                f(at, SgprInit::WorkgroupId(i as u8));
                at += 1;
            }
        }
        if self.rsrc2.workgroup_info() {
            f(at, SgprInit::WorkgroupInfo);
            at += 1;
        }
        if self.rsrc2.private_segment() {
            f(at, SgprInit::PrivateSegmentWaveOffset);
        }
    }

    /// User SGPRs the enabled code properties take (what `USER_SGPR_COUNT` must be at least).
    pub fn enabled_user_sgprs(&self) -> u32 {
        let mut n = 0;
        self.initial_sgprs(|at, v| {
            if !matches!(v, SgprInit::WorkgroupId(_) | SgprInit::WorkgroupInfo | SgprInit::PrivateSegmentWaveOffset) {
                n = at + v.count();
            }
        });
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_and_layout() {
        // A clang-15 gfx90a kernel with scratch and flat scratch: rsrc1 0x00AF0081-ish.
        let kd = KernelDescriptor {
            group_segment_fixed_size: 4096,
            private_segment_fixed_size: 16,
            kernarg_size: 64,
            kernel_code_entry_byte_offset: 0x10c0,
            rsrc3: Rsrc3 { raw: 0x0000_0003 },
            rsrc1: Rsrc1 { raw: 0x00af_0081 },
            rsrc2: Rsrc2 { raw: 0x0000_0095 },
            kernel_code_properties: 0x2b,
            kernarg_preload: 0,
        };
        let b = kd.to_bytes();
        assert_eq!(KernelDescriptor::from_bytes(&b), Ok(kd));
        assert_eq!((kd.rsrc1.granulated_vgprs(), kd.rsrc1.granulated_sgprs()), (1, 2));
        assert_eq!((kd.rsrc1.denorm_mode_32(), kd.rsrc1.denorm_mode_16_64()), (3, 3));
        assert!(kd.rsrc1.dx10_clamp() && kd.rsrc1.ieee_mode());
        assert_eq!(kd.rsrc1.initial_mode(), 0x3f0);
        assert_eq!(kd.rsrc2.user_sgpr_count(), 10);
        assert_eq!(kd.rsrc2.workgroup_id(), [true, false, false]);
        assert!(kd.rsrc2.private_segment());
        assert_eq!(kd.accum_offset(), 16);
        let mut got = [(0u32, SgprInit::WorkgroupInfo); 6];
        let mut n = 0;
        kd.initial_sgprs(|at, v| {
            got[n] = (at, v);
            n += 1;
        });
        assert_eq!(
            &got[..n],
            &[
                (0, SgprInit::PrivateSegmentBuffer),
                (4, SgprInit::DispatchPtr),
                (6, SgprInit::KernargSegmentPtr),
                (8, SgprInit::FlatScratchInit),
                (10, SgprInit::WorkgroupId(0)),
                (11, SgprInit::PrivateSegmentWaveOffset),
            ]
        );
        assert_eq!(kd.enabled_user_sgprs(), 10);
        let mut bad = b;
        bad[30] = 1;
        assert!(KernelDescriptor::from_bytes(&bad).is_err());
        assert!(KernelDescriptor::from_bytes(&b[..63]).is_err());
    }
}
