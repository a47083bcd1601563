//! gfx90a (CDNA2, MI200) and gfx940 (CDNA3, MI300) machine-code decoder for aqueduct's emulated
//! GPU ([`Target`]; docs/isa.md §2 "CDNA3" lists what gfx940 changes).
//!
//! The emulator runs kernels' own machine code (`docs/architecture.md`); this crate is its first
//! stage: it turns a code object's `.text` words into a pre-decoded [`Inst`] array once, so the
//! executor never looks at encoding bits again. Four layers:
//!
//! * **tables** (`tables.rs`, generated, and the row shape in [`spec`]): for every encoding and
//!   opcode field value, LLVM's mnemonic and the operand slots (field, width, register class,
//!   constant type). The rows are facts measured by sweeping `llvm-mc-15 -disassemble` over the
//!   opcode space (docs/isa.md §4).
//! * **decode** ([`decode`], [`decode_all`]): identifies the encoding from the top bits of the
//!   first dword, looks the opcode up, extracts operands (registers, special registers, inline
//!   constants, the 32-bit literal) and modifiers (neg/abs/clamp/omod/op_sel, DPP, SDWA, memory
//!   offsets and cache bits). Anything the tables do not know is a [`DecodeError`] naming the
//!   word offset and the encoding, never a panic.
//! * **program** ([`Program`]): the decoded array of one code stream with each instruction's
//!   word offset, so branch targets become array indices at load time.
//! * **print** ([`Inst::display`]): formats an instruction exactly as `llvm-objdump-15 -d
//!   --mcpu=gfx90a` (or `--mcpu=gfx940`) does, so the decoder can be checked against LLVM over real binaries (the
//!   `llvm_objdump` integration test) and `llvm-mc-15` round trips (`llvm_mc` test).
//!
//! ```
//! use aqueduct_isa::{decode_all, Operand};
//!
//! // s_mov_b32 s0, s1; v_fma_f32 v1, -|v2|, v3, |s4| clamp mul:2
//! let code = [0xBE80_0001, 0xD1CB_8501, 0x2812_0702];
//! let insts = decode_all(&code).unwrap();
//! assert_eq!(insts[0].display().to_string(), "s_mov_b32 s0, s1");
//! assert_eq!(insts[1].len, 2);
//! assert_eq!(insts[1].operands()[1], Operand::Vgpr { reg: 2, count: 1 });
//! assert_eq!(insts[1].display().to_string(), "v_fma_f32 v1, -|v2|, v3, |s4| clamp mul:2");
//! ```
//!
//! Who validates what (docs/isa.md §6): the decoder checks that the encoding and opcode exist on
//! the target, that the instruction fits in the stream and that DPP/SDWA/literal forms are legal for
//! the opcode; it does not re-check assembler-level rules the hardware ignores (non-zero unused
//! fields, constant-bus limits, VGPR tuple alignment): the executor runs what it is given and
//! reports the faults.

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

mod decode;
pub mod exec;
mod print;
mod program;
pub mod spec;
mod tables;

pub use decode::{decode, decode_all, decode_all_for, decode_for};
pub use program::Program;

use core::fmt;

/// Instruction encoding families (docs/isa.md §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Encoding {
    /// Scalar ALU, two sources.
    Sop2,
    /// Scalar ALU with a 16-bit immediate.
    Sopk,
    /// Scalar ALU, one source.
    Sop1,
    /// Scalar compare.
    Sopc,
    /// Scalar program control (branches, waits, messages).
    Sopp,
    /// Scalar memory.
    Smem,
    /// Vector ALU, one source (32-bit encoding).
    Vop1,
    /// Vector ALU, two sources (32-bit encoding).
    Vop2,
    /// Vector compare (32-bit encoding).
    Vopc,
    /// Vector ALU, 64-bit encoding (VOP3A and VOP3B).
    Vop3,
    /// Packed math and matrix (MAI) ops.
    Vop3p,
    /// Local/global data share.
    Ds,
    /// FLAT memory (generic address).
    Flat,
    /// FLAT encoding, scratch segment.
    Scratch,
    /// FLAT encoding, global segment.
    Global,
    /// Untyped buffer memory.
    Mubuf,
    /// Typed buffer memory.
    Mtbuf,
    /// Image memory (gfx90a: load, store, atomics, get_resinfo, sample).
    Mimg,
}

impl Encoding {
    /// The name used in reports and errors (`VOP3P`, `GLOBAL`, …).
    pub const fn name(self) -> &'static str {
        match self {
            Encoding::Sop2 => "SOP2",
            Encoding::Sopk => "SOPK",
            Encoding::Sop1 => "SOP1",
            Encoding::Sopc => "SOPC",
            Encoding::Sopp => "SOPP",
            Encoding::Smem => "SMEM",
            Encoding::Vop1 => "VOP1",
            Encoding::Vop2 => "VOP2",
            Encoding::Vopc => "VOPC",
            Encoding::Vop3 => "VOP3",
            Encoding::Vop3p => "VOP3P",
            Encoding::Ds => "DS",
            Encoding::Flat => "FLAT",
            Encoding::Scratch => "SCRATCH",
            Encoding::Global => "GLOBAL",
            Encoding::Mubuf => "MUBUF",
            Encoding::Mtbuf => "MTBUF",
            Encoding::Mimg => "MIMG",
        }
    }
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The instruction set a code stream is decoded for (docs/isa.md §2 "CDNA3").
///
/// gfx940 (clang-15's name for the MI300 family, CDNA3; code for it runs on gfx942) keeps
/// gfx90a's encodings and most opcodes, renames the cache bits (`sc0`, `sc1`, `nt` instead of
/// `glc`, `scc`, `slc` on FLAT, GLOBAL, SCRATCH and buffers), reads FLAT bit 13 of a scratch
/// instruction as SVE (a VGPR address is present) and has its own opcode map: new instructions
/// (`v_mov_b64`, `v_lshl_add_u64`, `buffer_inv`, LDS DMA loads as opcodes, xf32/i8/fp8 MFMA and
/// `v_smfmac_*`, fp8 conversions, packed bf16 atomics), renamed ones (`v_fmamk_f32`, the bf16 and
/// f64 MFMA) and removed ones (`v_mac_f32`, `v_mad_f32`, the images, the first bf16 MFMA).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Target {
    /// CDNA2 (MI200).
    #[default]
    Gfx90a,
    /// CDNA3 (MI300: gfx940, gfx941, gfx942).
    Gfx940,
}

impl Target {
    /// The target for an ISA name (`gfx90a`, `gfx940`, `gfx941`, `gfx942`, with or without
    /// `amdgcn-amd-amdhsa--` and target features such as `:sramecc+:xnack-`).
    pub fn from_isa_name(name: &str) -> Option<Target> {
        let name = name.rsplit("--").next().unwrap_or(name);
        let proc = name.split(':').next().unwrap_or(name);
        match proc {
            "gfx90a" => Some(Target::Gfx90a),
            "gfx940" | "gfx941" | "gfx942" => Some(Target::Gfx940),
            _ => None,
        }
    }
    /// The `--mcpu` name LLVM uses for it.
    pub const fn mcpu(self) -> &'static str {
        match self {
            Target::Gfx90a => "gfx90a",
            Target::Gfx940 => "gfx940",
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.mcpu())
    }
}

/// What the first dword looked like when decoding failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncodingClass {
    /// A known encoding family.
    Known(Encoding),
    /// Top bits that name no gfx90a/gfx940 encoding.
    Unknown,
}

/// Why an instruction could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeErrorKind {
    /// The opcode field names no instruction of this encoding on the target.
    UnknownOpcode(u16),
    /// The encoding family is not supported or does not exist.
    UnsupportedEncoding,
    /// The instruction (or its literal / DPP / SDWA dword) runs past the end of the stream.
    Truncated,
    /// A DPP or SDWA form of an opcode that has none, or another illegal field combination.
    IllegalForm,
}

/// A decoding failure: where, in which encoding, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeError {
    /// Offset of the instruction's first dword in the stream, in dwords.
    pub word: usize,
    /// The first dword.
    pub raw: u32,
    /// The encoding identified from the top bits.
    pub encoding: EncodingClass,
    /// What is wrong.
    pub kind: DecodeErrorKind,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let enc = match self.encoding {
            EncodingClass::Known(e) => e.name(),
            EncodingClass::Unknown => "unknown encoding",
        };
        write!(f, "word {} ({:#010x}, {}): ", self.word, self.raw, enc)?;
        match self.kind {
            DecodeErrorKind::UnknownOpcode(op) => write!(f, "unknown opcode {op:#x}"),
            DecodeErrorKind::UnsupportedEncoding => f.write_str("encoding not supported"),
            DecodeErrorKind::Truncated => f.write_str("instruction runs past the end"),
            DecodeErrorKind::IllegalForm => f.write_str("illegal field combination"),
        }
    }
}

impl core::error::Error for DecodeError {}

/// An opcode: an index into the generated opcode table (only valid indices can be made).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Op(u16);

impl Op {
    /// The opcode with table index `index`, if there is one.
    pub fn from_index(index: u16) -> Option<Op> {
        (usize::from(index) < tables::OPS.len()).then_some(Op(index))
    }
    /// Its table index (dense, `0..Op::count()`: usable to index an executor's own tables).
    pub fn index(self) -> u16 {
        self.0
    }
    /// Every opcode the tables know.
    pub fn all() -> impl Iterator<Item = Op> {
        (0..tables::OPS.len() as u16).map(Op)
    }
    /// The table row.
    pub fn spec(self) -> &'static spec::OpSpec {
        // An `Op` only exists for a valid index (`from_index`, `all`, the decoder); `get` keeps
        // this panic-free regardless.
        tables::OPS.get(usize::from(self.0)).unwrap_or(&tables::OPS[0])
    }
    /// LLVM's mnemonic (for the base encoding; DPP/SDWA forms print `_dpp`/`_sdwa`).
    pub fn name(self) -> &'static str {
        self.spec().name
    }
    /// The encoding family.
    pub fn encoding(self) -> Encoding {
        self.spec().enc
    }
    /// Number of opcodes the tables know (both targets).
    pub fn count() -> usize {
        tables::OPS.len()
    }
    /// Whether the opcode exists on `target` (some field value of its encoding decodes to it).
    pub fn on(self, target: Target) -> bool {
        decode::maps(target).of(self.encoding()).contains(&self.0)
    }
}

/// Special scalar registers and read-only sources (docs/isa.md §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Special {
    /// FLAT_SCRATCH (code 102/103).
    FlatScratch,
    /// XNACK_MASK (104/105).
    XnackMask,
    /// VCC (106/107).
    Vcc,
    /// M0 (124).
    M0,
    /// EXEC (126/127).
    Exec,
    /// VCCZ as 0/1 (251).
    Vccz,
    /// EXECZ as 0/1 (252).
    Execz,
    /// SCC as 0/1 (253).
    Scc,
    /// Shared aperture base, high 32 bits (235).
    SharedBase,
    /// Shared aperture limit (236).
    SharedLimit,
    /// Private aperture base (237).
    PrivateBase,
    /// Private aperture limit (238).
    PrivateLimit,
    /// POPS exiting wave id (239).
    PopsExitingWaveId,
    /// LDS direct (254; not usable on gfx90a, printed as LLVM does).
    LdsDirect,
    /// The null register (125; reads 0, writes are dropped).
    Null,
}

/// Float inline constants (codes 240–248).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloatConst {
    /// 0.5
    Half,
    /// -0.5
    NegHalf,
    /// 1.0
    One,
    /// -1.0
    NegOne,
    /// 2.0
    Two,
    /// -2.0
    NegTwo,
    /// 4.0
    Four,
    /// -4.0
    NegFour,
    /// 1/(2π)
    InvTwoPi,
}

/// A decoded operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operand {
    /// SGPR tuple `s[reg .. reg+count]`.
    Sgpr {
        /// First register.
        reg: u8,
        /// Registers in the tuple.
        count: u8,
    },
    /// VGPR tuple.
    Vgpr {
        /// First register.
        reg: u8,
        /// Registers in the tuple.
        count: u8,
    },
    /// AGPR (accumulation register) tuple.
    Agpr {
        /// First register.
        reg: u8,
        /// Registers in the tuple.
        count: u8,
    },
    /// Trap temporary tuple `ttmp[reg ..]`.
    Ttmp {
        /// First register.
        reg: u8,
        /// Registers in the tuple.
        count: u8,
    },
    /// A special register; `hi` selects the upper half of a 64-bit one (`vcc_hi`), `count` 2 the pair.
    Special {
        /// Which register.
        reg: Special,
        /// Upper half of a pair.
        hi: bool,
        /// Width in dwords.
        count: u8,
    },
    /// Integer inline constant −16…64.
    Int(i8),
    /// Float inline constant, in the operand's type.
    Float(FloatConst),
    /// The 32-bit literal that follows the instruction.
    Literal(u32),
    /// An immediate field (SOPK/SOPP simm16, SMEM offset, …).
    Imm(u32),
    /// `off`: no address/base register.
    Off,
}

/// DPP modifiers (docs/isa.md §3 "DPP").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dpp {
    /// dpp_ctrl (9 bits).
    pub ctrl: u16,
    /// Row enable mask.
    pub row_mask: u8,
    /// Bank enable mask.
    pub bank_mask: u8,
    /// Out-of-range lanes read 0.
    pub bound_ctrl: bool,
}

/// SDWA modifiers (docs/isa.md §3 "SDWA").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sdwa {
    /// Destination select (0–3 bytes, 4/5 words, 6 dword).
    pub dst_sel: u8,
    /// Destination unused bits: 0 pad, 1 sign-extend, 2 preserve.
    pub dst_unused: u8,
    /// Source 0 select.
    pub src0_sel: u8,
    /// Source 1 select.
    pub src1_sel: u8,
    /// Sign-extend bits per source (bit 0 src0, bit 1 src1).
    pub sext: u8,
}

/// The extension dword of a VOP1/VOP2/VOPC instruction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Ext {
    /// Plain `_e32` form.
    #[default]
    None,
    /// `_dpp` form.
    Dpp(Dpp),
    /// `_sdwa` form.
    Sdwa(Sdwa),
}

/// Modifiers and memory flags. Fields that an encoding does not have stay 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mods {
    /// Negate per source (bit n = source n); VOP3P: `neg_lo`; MAI: `blgp`.
    pub neg: u8,
    /// Absolute value per source; VOP3P: `neg_hi`; MAI: `cbsz`.
    pub abs: u8,
    /// VOP3/VOP3P: `op_sel` (bit 3 = destination); MAI: `abid`.
    pub op_sel: u8,
    /// VOP3P: `op_sel_hi`.
    pub op_sel_hi: u8,
    /// Output modifier: 1 ×2, 2 ×4, 3 ÷2.
    pub omod: u8,
    /// Clamp the result.
    pub clamp: bool,
    /// Memory: GLC (return pre-op value for atomics); gfx940 `sc0` (same bit).
    pub glc: bool,
    /// Memory: SLC; gfx940 `nt` (same bit).
    pub slc: bool,
    /// Memory: SCC (system coherence; MUBUF bit 15, MTBUF bit 53, FLAT bit 25, MIMG bit 7); gfx940
    /// `sc1` (same bits).
    pub scc: bool,
    /// DS: GDS; MUBUF and FLAT: LDS (the load goes to LDS, no VGPR destination).
    pub gds_lds: bool,
    /// MUBUF/MTBUF: offen.
    pub offen: bool,
    /// MUBUF/MTBUF: idxen.
    pub idxen: bool,
    /// DS second offset (two-address forms); MTBUF: dfmt | nfmt << 4.
    pub offset1: u8,
    /// MIMG: dmask (channels read or written).
    pub dmask: u8,
    /// MIMG: [`IMAGE_UNORM`], [`IMAGE_DA`], [`IMAGE_A16`], [`IMAGE_LWE`], [`IMAGE_D16`] bits.
    pub image: u8,
    /// Memory or SMEM offset in bytes (signed for GLOBAL/SCRATCH); DS: offset0 / 16-bit offset.
    pub offset: i32,
    /// DPP or SDWA extension.
    pub ext: Ext,
    /// The instruction set the instruction was decoded for (the printer spells cache bits and
    /// hardware registers by it; kept here, where it costs no space).
    pub target: Target,
}

/// MIMG: unnormalised coordinates.
pub const IMAGE_UNORM: u8 = 1;
/// MIMG: array resource (`da`).
pub const IMAGE_DA: u8 = 2;
/// MIMG: 16-bit addresses (`a16`, the r128 bit on gfx90a).
pub const IMAGE_A16: u8 = 4;
/// MIMG: LOD warning enable.
pub const IMAGE_LWE: u8 = 8;
/// MIMG: packed 16-bit data (`d16`).
pub const IMAGE_D16: u8 = 16;

/// Most operands any instruction has (v_addc_co_u32_e64: vdst, sdst, 3 sources).
pub const MAX_OPERANDS: usize = 6;

/// A decoded instruction, ready for an interpreter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inst {
    /// The opcode.
    pub op: Op,
    /// Length in dwords (1–3).
    pub len: u8,
    /// Number of valid entries in `operands`.
    pub count: u8,
    /// Operands in LLVM's print order (definitions first). SOP*, SMEM, VOP*, DS: operand `i` is
    /// slot `i` of `op.spec().slots`. FLAT/GLOBAL/SCRATCH: `[vdst] addr|off [data] [saddr|off]`
    /// (vdst for loads and for atomics with `glc`, none for LDS loads; saddr not for FLAT).
    /// MUBUF/MTBUF: `[vdata] vaddr|off srsrc soffset` (no vdata for LDS loads, nothing at all for
    /// the cache-maintenance ops). MIMG: `vdata vaddr srsrc [ssamp]`.
    pub operands: [Operand; MAX_OPERANDS],
    /// Modifiers and memory flags.
    pub mods: Mods,
}

impl Inst {
    /// The valid operands.
    pub fn operands(&self) -> &[Operand] {
        let n = usize::from(self.count).min(MAX_OPERANDS);
        &self.operands[..n]
    }
    /// The encoding family.
    pub fn encoding(&self) -> Encoding {
        self.op.encoding()
    }
    /// A value that prints the instruction in `llvm-objdump-15` syntax.
    pub fn display(&self) -> print::Display<'_> {
        print::Display(self)
    }
}

pub use print::Display;
