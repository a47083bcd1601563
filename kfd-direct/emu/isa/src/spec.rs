//! The shape of an opcode table row: which encoding fields an opcode uses as operands, in the
//! order LLVM prints them, with their register widths and how constants print for them.
//!
//! The rows themselves live in `tables.rs`, generated from a sweep of `llvm-mc-15` over every
//! opcode field value (docs/isa.md §4).

use crate::Encoding;

/// The encoding field an operand is read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// The destination field (`sdst`, `vdst`, SMEM `sdata`, DS/FLAT `vdst`).
    Dst,
    /// VOP3B carry-out / VOPC-e64 style scalar destination (bits 14:8).
    Sdst,
    /// First source (`ssrc0`, `src0`).
    Src0,
    /// Second source (`ssrc1`, `src1`, VOP2/VOPC `vsrc1`).
    Src1,
    /// Third source (`src2`).
    Src2,
    /// The implicit VCC operand VOP2/VOPC print (carry, mask, compare result).
    Vcc,
    /// A literal constant that the opcode always carries (`v_madak_f32`, `s_setreg_imm32_b32`).
    Literal,
    /// The 16-bit immediate of SOPK/SOPP.
    Simm16,
    /// SMEM base address register tuple.
    Sbase,
    /// SMEM offset (immediate or SGPR).
    Offset,
    /// DS/FLAT address VGPR(s).
    Addr,
    /// DS `data0`, FLAT `data`, MUBUF/MTBUF `vdata` for stores.
    Data0,
    /// DS `data1`.
    Data1,
}

/// Register class of a fixed-class field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// An 8-bit VGPR index.
    Vgpr,
    /// An AGPR (accumulation register) index.
    Agpr,
    /// A 7/8-bit scalar operand code.
    Scalar,
    /// A full 9-bit (or 8-bit scalar) source operand code: register, constant or literal.
    Any,
    /// An immediate, not a register.
    Imm,
}

/// How a constant operand prints (LLVM picks the spelling by the operand's type).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    /// 32-bit operand (integer and float print alike).
    B32,
    /// 64-bit integer operand.
    B64,
    /// 64-bit float operand.
    F64,
    /// 16-bit float operand.
    F16,
    /// 16-bit integer operand: float inline constants print as their f16 bit pattern.
    I16,
    /// `s_waitcnt` counters.
    Waitcnt,
    /// `s_sendmsg` message.
    Sendmsg,
    /// `s_set_gpr_idx_mode` mask.
    GprIdxMode,
    /// An immediate printed only when non-zero (`s_endpgm`).
    Optional16,
    /// A branch offset in dwords.
    Branch,
    /// A plain 16-bit immediate (SOPP: decimal up to 64, hex above).
    Imm16,
    /// A 16-bit immediate always printed in hex (SOPK).
    Hex16,
    /// `hwreg(id, offset, size)`.
    Hwreg,
    /// An 8-bit immediate in a source field (`s_set_gpr_idx_on`: `gpr_idx(…)` mode bits).
    Imm8,
    /// A 7-bit immediate in the SMEM data field (`s_atc_probe`).
    Imm7,
}

/// One operand of an opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    /// Where it is read from.
    pub field: Field,
    /// Width in dwords (registers in the tuple).
    pub width: u8,
    /// Register class.
    pub class: Class,
    /// Constant type.
    pub ty: Ty,
}

/// One row of the opcode table.
#[derive(Clone, Copy, Debug)]
pub struct OpSpec {
    /// LLVM's mnemonic for this encoding (with `_e32`/`_e64` where LLVM prints one).
    pub name: &'static str,
    /// The encoding.
    pub enc: Encoding,
    /// The value of the opcode field.
    pub code: u16,
    /// Operands in print order.
    pub slots: &'static [Slot],
    /// `DPP`, `SDWA`, `MAI`, … bits.
    pub flags: u16,
}

/// VOP1/VOP2/VOPC opcode has a DPP form.
pub const DPP: u16 = 1;
/// VOP1/VOP2/VOPC opcode has an SDWA form.
pub const SDWA: u16 = 2;
/// VOP3P matrix (MFMA) opcode: acc_cd/abid/cbsz/blgp instead of packed-math modifiers.
pub const MAI: u16 = 4;
/// VOP3 opcode accepts abs/neg source modifiers.
pub const SRC_MODS: u16 = 8;
/// DS opcode with two 8-bit offsets.
pub const TWO_OFFSETS: u16 = 16;
/// DS opcode that always runs on GDS.
pub const GDS_ONLY: u16 = 32;
/// GLOBAL opcode without an SGPR-base form.
pub const NO_SADDR: u16 = 64;
/// SMEM opcode without an immediate-offset form; MUBUF opcode without an address.
pub const NO_IMM: u16 = 128;
/// Same bit as [`NO_IMM`], for MUBUF.
pub const NO_ADDR: u16 = 128;
/// VOP3 opcode with `op_sel` (16-bit operand halves).
pub const OPSEL: u16 = 256;
/// VOP3 source 0 takes neg/abs.
pub const MODS_SRC0: u16 = 512;
/// VOP3 source 1 takes neg/abs.
pub const MODS_SRC1: u16 = 1024;
/// VOP3 source 2 takes neg/abs.
pub const MODS_SRC2: u16 = 2048;
/// MIMG opcode with a sampler descriptor (`image_sample`).
pub const MIMG_SAMPLER: u16 = 4096;
/// MIMG atomic: vdata width follows the atomic's data size, not dmask alone.
pub const MIMG_ATOMIC: u16 = 8192;
