//! Bits to [`Inst`]: encoding identification, table lookup, operand and modifier extraction.
//!
//! Field positions are the ones in docs/isa.md §2. Every read of the stream is
//! bounds-checked and every table index is checked, so malformed input yields a
//! [`DecodeError`], never a panic.

use alloc::vec::Vec;

use crate::spec::{self, Class, Field, OpSpec, Slot};
use crate::tables;
use crate::{
    DecodeError, DecodeErrorKind, Dpp, Encoding, EncodingClass, Ext, FloatConst, Inst, Mods, Op, Operand, Sdwa,
    Special, Target, MAX_OPERANDS,
};

/// One target's opcode maps (field value → row of [`tables::OPS`]).
pub(crate) struct Maps {
    sop2: &'static [u16],
    sopk: &'static [u16],
    sop1: &'static [u16],
    sopc: &'static [u16],
    sopp: &'static [u16],
    smem: &'static [u16],
    vop1: &'static [u16],
    vop2: &'static [u16],
    vopc: &'static [u16],
    vop3: &'static [u16],
    vop3p: &'static [u16],
    ds: &'static [u16],
    flat: &'static [u16],
    scratch: &'static [u16],
    global: &'static [u16],
    mubuf: &'static [u16],
    mtbuf: &'static [u16],
    mimg: &'static [u16],
}

impl Maps {
    /// The map of one encoding.
    pub(crate) fn of(&self, enc: Encoding) -> &'static [u16] {
        match enc {
            Encoding::Sop2 => self.sop2,
            Encoding::Sopk => self.sopk,
            Encoding::Sop1 => self.sop1,
            Encoding::Sopc => self.sopc,
            Encoding::Sopp => self.sopp,
            Encoding::Smem => self.smem,
            Encoding::Vop1 => self.vop1,
            Encoding::Vop2 => self.vop2,
            Encoding::Vopc => self.vopc,
            Encoding::Vop3 => self.vop3,
            Encoding::Vop3p => self.vop3p,
            Encoding::Ds => self.ds,
            Encoding::Flat => self.flat,
            Encoding::Scratch => self.scratch,
            Encoding::Global => self.global,
            Encoding::Mubuf => self.mubuf,
            Encoding::Mtbuf => self.mtbuf,
            Encoding::Mimg => self.mimg,
        }
    }
}

static GFX90A: Maps = Maps {
    sop2: &tables::SOP2_MAP,
    sopk: &tables::SOPK_MAP,
    sop1: &tables::SOP1_MAP,
    sopc: &tables::SOPC_MAP,
    sopp: &tables::SOPP_MAP,
    smem: &tables::SMEM_MAP,
    vop1: &tables::VOP1_MAP,
    vop2: &tables::VOP2_MAP,
    vopc: &tables::VOPC_MAP,
    vop3: &tables::VOP3_MAP,
    vop3p: &tables::VOP3P_MAP,
    ds: &tables::DS_MAP,
    flat: &tables::FLAT0_MAP,
    scratch: &tables::FLAT1_MAP,
    global: &tables::FLAT2_MAP,
    mubuf: &tables::MUBUF_MAP,
    mtbuf: &tables::MTBUF_MAP,
    mimg: &tables::MIMG_MAP,
};

static GFX940: Maps = Maps {
    sop2: &tables::SOP2_MAP_GFX940,
    sopk: &tables::SOPK_MAP_GFX940,
    sop1: &tables::SOP1_MAP_GFX940,
    sopc: &tables::SOPC_MAP_GFX940,
    sopp: &tables::SOPP_MAP_GFX940,
    smem: &tables::SMEM_MAP_GFX940,
    vop1: &tables::VOP1_MAP_GFX940,
    vop2: &tables::VOP2_MAP_GFX940,
    vopc: &tables::VOPC_MAP_GFX940,
    vop3: &tables::VOP3_MAP_GFX940,
    vop3p: &tables::VOP3P_MAP_GFX940,
    ds: &tables::DS_MAP_GFX940,
    flat: &tables::FLAT0_MAP_GFX940,
    scratch: &tables::FLAT1_MAP_GFX940,
    global: &tables::FLAT2_MAP_GFX940,
    mubuf: &tables::MUBUF_MAP_GFX940,
    mtbuf: &tables::MTBUF_MAP_GFX940,
    mimg: &tables::MIMG_MAP_GFX940,
};

/// The opcode maps of `target`.
pub(crate) fn maps(target: Target) -> &'static Maps {
    match target {
        Target::Gfx90a => &GFX90A,
        Target::Gfx940 => &GFX940,
    }
}

/// Decodes every instruction of a code stream in order, stopping at the first error.
///
/// The result is the pre-decoded array an interpreter runs; instruction `i` starts at the sum of
/// the `len` of the ones before it.
pub fn decode_all(words: &[u32]) -> Result<Vec<Inst>, DecodeError> {
    decode_all_for(Target::Gfx90a, words)
}

/// [`decode_all`] for `target`'s instruction set.
pub fn decode_all_for(target: Target, words: &[u32]) -> Result<Vec<Inst>, DecodeError> {
    let mut out = Vec::with_capacity(words.len() / 2 + 1);
    let mut at = 0;
    while at < words.len() {
        let inst = decode_for(target, words, at)?;
        at += usize::from(inst.len);
        out.push(inst);
    }
    Ok(out)
}

/// Decodes the gfx90a instruction that starts at dword `at` of `words`.
pub fn decode(words: &[u32], at: usize) -> Result<Inst, DecodeError> {
    decode_for(Target::Gfx90a, words, at)
}

/// Decodes the instruction of `target`'s instruction set that starts at dword `at` of `words`.
pub fn decode_for(target: Target, words: &[u32], at: usize) -> Result<Inst, DecodeError> {
    let w0 = words.get(at).copied().unwrap_or(0);
    let class = classify(w0);
    let fail = |kind| DecodeError { word: at, raw: w0, encoding: class, kind };
    if words.get(at).is_none() {
        return Err(fail(DecodeErrorKind::Truncated));
    }
    let enc = match class {
        EncodingClass::Known(e) => e,
        _ => return Err(fail(DecodeErrorKind::UnsupportedEncoding)),
    };
    let maps = maps(target);
    let mut d = Decoder { words, at, w0, len: 1, literal: None, mods: Mods::default(), target, maps };
    d.run(enc).map_err(fail)
}

/// Identifies the encoding from the top bits of the first dword (docs/isa.md §2:
/// the 9-bit SOP1/SOPC/SOPP and VOP3P prefixes are checked before the shorter ones they overlap).
fn classify(w0: u32) -> EncodingClass {
    use Encoding::*;
    let e = match w0 >> 23 {
        0x17D => Sop1,
        0x17E => Sopc,
        0x17F => Sopp,
        0x1A7 => Vop3p,
        _ => match w0 >> 28 {
            0xB => Sopk,
            _ if w0 >> 30 == 0b10 => Sop2,
            _ if w0 >> 31 == 0 => match w0 >> 25 {
                0x3F => Vop1,
                0x3E => Vopc,
                _ => Vop2,
            },
            _ => match w0 >> 26 {
                0x30 => Smem,
                0x34 => Vop3,
                0x36 => Ds,
                0x37 => match (w0 >> 14) & 3 {
                    0 => Flat,
                    1 => Scratch,
                    2 => Global,
                    _ => return EncodingClass::Unknown,
                },
                0x38 => Mubuf,
                0x3A => Mtbuf,
                0x3C => Mimg,
                _ => return EncodingClass::Unknown,
            },
        },
    };
    EncodingClass::Known(e)
}

type R<T> = Result<T, DecodeErrorKind>;

struct Decoder<'a> {
    words: &'a [u32],
    at: usize,
    w0: u32,
    /// Length so far in dwords (the literal, if any, is appended at the end).
    len: u8,
    literal: Option<u32>,
    mods: Mods,
    target: Target,
    maps: &'static Maps,
}

/// Bits `lo..lo+n` of `w`.
const fn bits(w: u32, lo: u32, n: u32) -> u32 {
    (w >> lo) & ((1u32 << n) - 1)
}

const fn sext(v: u32, n: u32) -> i32 {
    ((v << (32 - n)) as i32) >> (32 - n)
}

/// Aligns a scalar register tuple the way the hardware addresses it: pairs on even registers,
/// wider tuples on multiples of four.
const fn align_sgpr(reg: u32, width: u8) -> u8 {
    let r = match width {
        0 | 1 => reg,
        2 => reg & !1,
        _ => reg & !3,
    };
    r as u8
}

impl Decoder<'_> {
    fn word(&self, i: usize) -> R<u32> {
        self.words.get(self.at + i).copied().ok_or(DecodeErrorKind::Truncated)
    }

    fn lookup(map: &[u16], code: u32) -> R<Op> {
        let idx = map.get(code as usize).copied().unwrap_or(u16::MAX);
        if usize::from(idx) >= tables::OPS.len() {
            return Err(DecodeErrorKind::UnknownOpcode(code as u16));
        }
        Ok(Op(idx))
    }

    fn take_literal(&mut self) -> R<u32> {
        if let Some(v) = self.literal {
            return Ok(v);
        }
        let v = self.word(usize::from(self.len))?;
        self.literal = Some(v);
        Ok(v)
    }

    /// A source operand code (8-bit scalar or 9-bit vector) of `width` dwords. SGPR and TTMP
    /// tuples are aligned down (pairs even, wider tuples on multiples of four) as the hardware
    /// and LLVM do; a special-register pair must start at its low half.
    fn src(&mut self, code: u32, width: u8) -> R<Operand> {
        let w = width.max(1);
        let code = match code {
            0..=101 => u32::from(align_sgpr(code, w)),
            108..=123 => 108 + u32::from(align_sgpr(code - 108, w)),
            102..=107 | 126 | 127 if w > 1 && code & 1 == 1 => return Err(DecodeErrorKind::IllegalForm),
            124 if w > 1 => return Err(DecodeErrorKind::IllegalForm),
            125 => return Ok(Operand::Special { reg: Special::Null, hi: false, count: w }),
            _ => code,
        };
        self.src_unchecked(code, w)
    }

    fn src_unchecked(&mut self, code: u32, w: u8) -> R<Operand> {
        Ok(match code {
            0..=101 => Operand::Sgpr { reg: align_sgpr(code, w), count: w },
            102..=107 | 124 | 126 | 127 => {
                let reg = match code {
                    102 | 103 => Special::FlatScratch,
                    104 | 105 => Special::XnackMask,
                    106 | 107 => Special::Vcc,
                    124 => Special::M0,
                    _ => Special::Exec,
                };
                Operand::Special { reg, hi: code & 1 == 1 && code != 124, count: w }
            }
            108..=123 => Operand::Ttmp { reg: align_sgpr(code - 108, w), count: w },
            128..=192 => Operand::Int((code - 128) as i8),
            193..=208 => Operand::Int(-((code - 192) as i8)),
            235 => Operand::Special { reg: Special::SharedBase, hi: false, count: 1 },
            236 => Operand::Special { reg: Special::SharedLimit, hi: false, count: 1 },
            237 => Operand::Special { reg: Special::PrivateBase, hi: false, count: 1 },
            238 => Operand::Special { reg: Special::PrivateLimit, hi: false, count: 1 },
            239 => Operand::Special { reg: Special::PopsExitingWaveId, hi: false, count: 1 },
            240..=248 => Operand::Float(match code {
                240 => FloatConst::Half,
                241 => FloatConst::NegHalf,
                242 => FloatConst::One,
                243 => FloatConst::NegOne,
                244 => FloatConst::Two,
                245 => FloatConst::NegTwo,
                246 => FloatConst::Four,
                247 => FloatConst::NegFour,
                _ => FloatConst::InvTwoPi,
            }),
            251 => Operand::Special { reg: Special::Vccz, hi: false, count: 1 },
            252 => Operand::Special { reg: Special::Execz, hi: false, count: 1 },
            253 => Operand::Special { reg: Special::Scc, hi: false, count: 1 },
            254 => Operand::Special { reg: Special::LdsDirect, hi: false, count: 1 },
            255 => Operand::Literal(self.take_literal()?),
            256..=511 => Operand::Vgpr { reg: (code - 256) as u8, count: w },
            _ => return Err(DecodeErrorKind::IllegalForm),
        })
    }

    /// An operand of a fixed-class field.
    fn fixed(&mut self, class: Class, code: u32, width: u8) -> R<Operand> {
        let w = width.max(1);
        match class {
            Class::Vgpr => Ok(Operand::Vgpr { reg: code as u8, count: w }),
            Class::Agpr => Ok(Operand::Agpr { reg: code as u8, count: w }),
            Class::Scalar => self.src(code, w),
            Class::Any => self.src(code, w),
            Class::Imm => Ok(Operand::Imm(code)),
        }
    }

    fn finish(&self, op: Op, ops: &[Operand]) -> Inst {
        let mut operands = [Operand::Off; MAX_OPERANDS];
        let n = ops.len().min(MAX_OPERANDS);
        operands[..n].copy_from_slice(&ops[..n]);
        let len = self.len + u8::from(self.literal.is_some());
        Inst { op, len, count: n as u8, operands, mods: Mods { target: self.target, ..self.mods } }
    }

    fn run(&mut self, enc: Encoding) -> R<Inst> {
        match enc {
            Encoding::Sop2 | Encoding::Sopk | Encoding::Sop1 | Encoding::Sopc | Encoding::Sopp => self.scalar(enc),
            Encoding::Smem => self.smem(),
            Encoding::Vop1 | Encoding::Vop2 | Encoding::Vopc => self.vop32(enc),
            Encoding::Vop3 => self.vop3(),
            Encoding::Vop3p => self.vop3p(),
            Encoding::Ds => self.ds(),
            Encoding::Flat | Encoding::Scratch | Encoding::Global => self.flat(enc),
            Encoding::Mubuf | Encoding::Mtbuf => self.buffer(enc),
            Encoding::Mimg => self.mimg(),
        }
    }

    fn scalar(&mut self, enc: Encoding) -> R<Inst> {
        let w = self.w0;
        let op = match enc {
            Encoding::Sop2 => Self::lookup(self.maps.sop2, bits(w, 23, 7))?,
            Encoding::Sopk => Self::lookup(self.maps.sopk, bits(w, 23, 5))?,
            Encoding::Sop1 => Self::lookup(self.maps.sop1, bits(w, 8, 8))?,
            Encoding::Sopc => Self::lookup(self.maps.sopc, bits(w, 16, 7))?,
            _ => Self::lookup(self.maps.sopp, bits(w, 16, 7))?,
        };
        let spec = op.spec();
        if enc == Encoding::Sopp && spec.slots.is_empty() && bits(w, 0, 16) != 0 {
            return Err(DecodeErrorKind::IllegalForm);
        }
        let mut ops = [Operand::Off; MAX_OPERANDS];
        for (i, s) in spec.slots.iter().enumerate().take(MAX_OPERANDS) {
            ops[i] = match s.field {
                Field::Dst => self.src(bits(w, 16, 7), s.width)?,
                Field::Src0 => self.src(bits(w, 0, 8), s.width)?,
                Field::Src1 if s.class == Class::Imm => Operand::Imm(bits(w, 8, 8)),
                Field::Src1 => self.src(bits(w, 8, 8), s.width)?,
                Field::Simm16 => Operand::Imm(bits(w, 0, 16)),
                Field::Literal => Operand::Literal(self.take_literal()?),
                _ => return Err(DecodeErrorKind::IllegalForm),
            };
        }
        Ok(self.finish(op, &ops[..spec.slots.len().min(MAX_OPERANDS)]))
    }

    fn smem(&mut self) -> R<Inst> {
        let w0 = self.w0;
        let w1 = self.word(1)?;
        self.len = 2;
        let op = Self::lookup(self.maps.smem, bits(w0, 18, 8))?;
        let spec = op.spec();
        let imm = bits(w0, 17, 1) == 1;
        if bits(w0, 14, 1) == 1 {
            // SOE (SGPR offset plus immediate) is not emitted by clang-15 for gfx90a.
            return Err(DecodeErrorKind::IllegalForm);
        }
        self.mods.glc = bits(w0, 16, 1) == 1;
        let mut ops = [Operand::Off; MAX_OPERANDS];
        for (i, s) in spec.slots.iter().enumerate().take(MAX_OPERANDS) {
            ops[i] = match s.field {
                Field::Dst if s.class == Class::Imm => Operand::Imm(bits(w0, 6, 7)),
                Field::Dst => self.src(bits(w0, 6, 7), s.width)?,
                Field::Sbase => self.src(bits(w0, 0, 6) * 2, s.width)?,
                Field::Offset if imm => {
                    self.mods.offset = sext(bits(w1, 0, 21), 21);
                    Operand::Imm(bits(w1, 0, 21))
                }
                Field::Offset => self.src(bits(w1, 0, 7), 1)?,
                _ => return Err(DecodeErrorKind::IllegalForm),
            };
        }
        Ok(self.finish(op, &ops[..spec.slots.len().min(MAX_OPERANDS)]))
    }

    fn vop32(&mut self, enc: Encoding) -> R<Inst> {
        let w = self.w0;
        let op = match enc {
            Encoding::Vop1 => Self::lookup(self.maps.vop1, bits(w, 9, 8))?,
            Encoding::Vop2 => Self::lookup(self.maps.vop2, bits(w, 25, 6))?,
            _ => Self::lookup(self.maps.vopc, bits(w, 17, 8))?,
        };
        let spec = op.spec();
        let mut src0 = bits(w, 0, 9);
        let mut src1_sgpr = false;
        let mut vcc_dst: Option<Operand> = None;
        // 0xFA/0xF9 select DPP/SDWA only where src0 is a general source (not v_accvgpr_mov's AGPR).
        let general_src0 = spec.slots.iter().any(|s| s.field == Field::Src0 && s.class == Class::Any);
        if (src0 == 0xFA || src0 == 0xF9) && general_src0 {
            let has_src0 = true;
            let ext = self.word(1)?;
            self.len = 2;
            if src0 == 0xFA {
                if spec.flags & spec::DPP == 0 || !has_src0 {
                    return Err(DecodeErrorKind::IllegalForm);
                }
                src0 = 256 + bits(ext, 0, 8);
                self.mods.neg = (bits(ext, 20, 1) | bits(ext, 22, 1) << 1) as u8;
                self.mods.abs = (bits(ext, 21, 1) | bits(ext, 23, 1) << 1) as u8;
                self.mods.ext = Ext::Dpp(Dpp {
                    ctrl: bits(ext, 8, 9) as u16,
                    bound_ctrl: bits(ext, 19, 1) == 1,
                    bank_mask: bits(ext, 24, 4) as u8,
                    row_mask: bits(ext, 28, 4) as u8,
                });
            } else {
                if spec.flags & spec::SDWA == 0 || !has_src0 {
                    return Err(DecodeErrorKind::IllegalForm);
                }
                src0 = bits(ext, 0, 8) + if bits(ext, 23, 1) == 1 { 0 } else { 256 };
                src1_sgpr = bits(ext, 31, 1) == 1;
                self.mods.neg = (bits(ext, 20, 1) | bits(ext, 28, 1) << 1) as u8;
                self.mods.abs = (bits(ext, 21, 1) | bits(ext, 29, 1) << 1) as u8;
                let sext = (bits(ext, 19, 1) | bits(ext, 27, 1) << 1) as u8;
                if enc == Encoding::Vopc {
                    // VOPC has no clamp/omod here: bits 14:8 are the scalar destination.
                    if bits(ext, 15, 1) == 1 {
                        vcc_dst = Some(self.src(bits(ext, 8, 7), 2)?);
                    }
                    self.mods.ext = Ext::Sdwa(Sdwa {
                        dst_sel: 6,
                        dst_unused: 0,
                        src0_sel: bits(ext, 16, 3) as u8,
                        src1_sel: bits(ext, 24, 3) as u8,
                        sext,
                    });
                } else {
                    self.mods.clamp = bits(ext, 13, 1) == 1;
                    self.mods.omod = bits(ext, 14, 2) as u8;
                    self.mods.ext = Ext::Sdwa(Sdwa {
                        dst_sel: bits(ext, 8, 3) as u8,
                        dst_unused: bits(ext, 11, 2) as u8,
                        src0_sel: bits(ext, 16, 3) as u8,
                        src1_sel: bits(ext, 24, 3) as u8,
                        sext,
                    });
                }
            }
        }
        let mut ops = [Operand::Off; MAX_OPERANDS];
        let mut vcc_seen = false;
        for (i, s) in spec.slots.iter().enumerate().take(MAX_OPERANDS) {
            ops[i] = match s.field {
                Field::Dst => self.fixed(s.class, bits(w, 17, 8), s.width)?,
                Field::Src0 if s.class == Class::Vgpr => Operand::Vgpr { reg: src0 as u8, count: s.width.max(1) },
                Field::Src0 if s.class == Class::Agpr => Operand::Agpr { reg: src0 as u8, count: s.width.max(1) },
                Field::Src0 => {
                    let o = self.src(src0, s.width)?;
                    match (s.class, o) {
                        (Class::Agpr, Operand::Vgpr { reg, count }) => Operand::Agpr { reg, count },
                        _ => o,
                    }
                }
                Field::Src1 if src1_sgpr => self.src(bits(w, 9, 8), s.width)?,
                Field::Src1 => self.fixed(s.class, bits(w, 9, 8), s.width)?,
                Field::Vcc => {
                    let first = !vcc_seen;
                    vcc_seen = true;
                    match vcc_dst {
                        Some(d) if first && enc == Encoding::Vopc => d,
                        _ => Operand::Special { reg: Special::Vcc, hi: false, count: 2 },
                    }
                }
                Field::Literal => Operand::Literal(self.take_literal()?),
                _ => return Err(DecodeErrorKind::IllegalForm),
            };
        }
        if self.literal.is_some() && self.mods.ext != Ext::None {
            return Err(DecodeErrorKind::IllegalForm);
        }
        Ok(self.finish(op, &ops[..spec.slots.len().min(MAX_OPERANDS)]))
    }

    fn vop3_src(&mut self, s: &Slot, code: u32) -> R<Operand> {
        if code == 255 || code == 0xF9 || code == 0xFA {
            // gfx90a has no VOP3 literals and no VOP3 DPP/SDWA.
            return Err(DecodeErrorKind::IllegalForm);
        }
        self.src(code, s.width)
    }

    fn vop3(&mut self) -> R<Inst> {
        let w0 = self.w0;
        let w1 = self.word(1)?;
        self.len = 2;
        let op = Self::lookup(self.maps.vop3, bits(w0, 16, 10))?;
        let spec = op.spec();
        let vop3b = spec.slots.iter().any(|s| s.field == Field::Sdst);
        self.mods.clamp = bits(w0, 15, 1) == 1;
        if !vop3b {
            self.mods.op_sel = bits(w0, 11, 4) as u8;
            self.mods.abs = bits(w0, 8, 3) as u8;
        }
        self.mods.omod = bits(w1, 27, 2) as u8;
        self.mods.neg = bits(w1, 29, 3) as u8;
        let mut ops = [Operand::Off; MAX_OPERANDS];
        for (i, s) in spec.slots.iter().enumerate().take(MAX_OPERANDS) {
            ops[i] = match s.field {
                Field::Dst => self.fixed(s.class, bits(w0, 0, 8), s.width)?,
                Field::Sdst => self.src(bits(w0, 8, 7), s.width)?,
                Field::Src0 => self.vop3_src(s, bits(w1, 0, 9))?,
                Field::Src1 => self.vop3_src(s, bits(w1, 9, 9))?,
                Field::Src2 => self.vop3_src(s, bits(w1, 18, 9))?,
                _ => return Err(DecodeErrorKind::IllegalForm),
            };
        }
        Ok(self.finish(op, &ops[..spec.slots.len().min(MAX_OPERANDS)]))
    }

    fn vop3p(&mut self) -> R<Inst> {
        let w0 = self.w0;
        let w1 = self.word(1)?;
        self.len = 2;
        let op = Self::lookup(self.maps.vop3p, bits(w0, 16, 7))?;
        let spec = op.spec();
        let mai = spec.flags & spec::MAI != 0;
        let mut acc = [false; 4]; // dst, src0, src1, src2
        if mai {
            let acc_cd = bits(w0, 15, 1) == 1;
            // A sparse MFMA's (`v_smfmac_*`, gfx940) src2 is its index VGPR: C is the destination.
            let sparse = spec.name.starts_with("v_smfmac");
            acc = [acc_cd, bits(w1, 27, 1) == 1, bits(w1, 28, 1) == 1, acc_cd && !sparse];
            self.mods.op_sel = bits(w0, 11, 4) as u8; // abid
            self.mods.abs = bits(w0, 8, 3) as u8; // cbsz
            self.mods.neg = bits(w1, 29, 3) as u8; // blgp
        } else {
            self.mods.clamp = bits(w0, 15, 1) == 1;
            self.mods.op_sel = bits(w0, 11, 3) as u8;
            self.mods.op_sel_hi = (bits(w1, 27, 2) | bits(w0, 14, 1) << 2) as u8;
            self.mods.abs = bits(w0, 8, 3) as u8; // neg_hi
            self.mods.neg = bits(w1, 29, 3) as u8; // neg_lo
        }
        let mut ops = [Operand::Off; MAX_OPERANDS];
        for (i, s) in spec.slots.iter().enumerate().take(MAX_OPERANDS) {
            let (o, a) = match s.field {
                Field::Dst => (self.fixed(s.class, bits(w0, 0, 8), s.width)?, acc[0]),
                Field::Src0 => (self.vop3_src(s, bits(w1, 0, 9))?, acc[1] || s.class == Class::Agpr),
                Field::Src1 => (self.vop3_src(s, bits(w1, 9, 9))?, acc[2]),
                Field::Src2 => (self.vop3_src(s, bits(w1, 18, 9))?, acc[3]),
                _ => return Err(DecodeErrorKind::IllegalForm),
            };
            ops[i] = match (a, o) {
                (true, Operand::Vgpr { reg, count }) => Operand::Agpr { reg, count },
                _ => o,
            };
        }
        Ok(self.finish(op, &ops[..spec.slots.len().min(MAX_OPERANDS)]))
    }

    fn ds(&mut self) -> R<Inst> {
        let w0 = self.w0;
        let w1 = self.word(1)?;
        self.len = 2;
        let op = Self::lookup(self.maps.ds, bits(w0, 17, 8))?;
        let spec = op.spec();
        let acc = bits(w0, 25, 1) == 1;
        self.mods.gds_lds = bits(w0, 16, 1) == 1;
        if spec.flags & spec::TWO_OFFSETS != 0 {
            self.mods.offset = bits(w0, 0, 8) as i32;
            self.mods.offset1 = bits(w0, 8, 8) as u8;
        } else {
            self.mods.offset = bits(w0, 0, 16) as i32;
        }
        let mut ops = [Operand::Off; MAX_OPERANDS];
        for (i, s) in spec.slots.iter().enumerate().take(MAX_OPERANDS) {
            let (code, a) = match s.field {
                Field::Addr => (bits(w1, 0, 8), false),
                Field::Data0 => (bits(w1, 8, 8), acc),
                Field::Data1 => (bits(w1, 16, 8), acc),
                Field::Dst => (bits(w1, 24, 8), acc),
                _ => return Err(DecodeErrorKind::IllegalForm),
            };
            let w = s.width.max(1);
            ops[i] = if a {
                Operand::Agpr { reg: code as u8, count: w }
            } else {
                Operand::Vgpr { reg: code as u8, count: w }
            };
        }
        Ok(self.finish(op, &ops[..spec.slots.len().min(MAX_OPERANDS)]))
    }

    fn flat(&mut self, enc: Encoding) -> R<Inst> {
        let w0 = self.w0;
        let w1 = self.word(1)?;
        self.len = 2;
        let map = self.maps.of(enc);
        let op = Self::lookup(map, bits(w0, 18, 7))?;
        let spec: &OpSpec = op.spec();
        // gfx90a: bit 13 is `lds` (the load goes to LDS). gfx940 has LDS loads as opcodes of their
        // own; there bit 13 of a scratch instruction is SVE (a VGPR address is present), and of a
        // FLAT or GLOBAL one is not defined (LLVM rejects it).
        let gfx940 = self.target == Target::Gfx940;
        let bit13 = bits(w0, 13, 1) == 1;
        if gfx940 && bit13 && enc != Encoding::Scratch {
            return Err(DecodeErrorKind::IllegalForm);
        }
        let lds = bit13 && !gfx940;
        let sve = bit13 && gfx940;
        self.mods.gds_lds = lds;
        self.mods.scc = bits(w0, 25, 1) == 1;
        self.mods.slc = bits(w0, 17, 1) == 1;
        self.mods.glc = bits(w0, 16, 1) == 1;
        self.mods.offset = match enc {
            Encoding::Flat => bits(w0, 0, 13) as i32,
            _ => sext(bits(w0, 0, 13), 13),
        };
        let acc = bits(w1, 23, 1) == 1;
        let saddr = bits(w1, 16, 7);
        let reg = |code: u32, w: u8, a: bool| {
            if a {
                Operand::Agpr { reg: code as u8, count: w.max(1) }
            } else {
                Operand::Vgpr { reg: code as u8, count: w.max(1) }
            }
        };
        let mut ops = [Operand::Off; MAX_OPERANDS];
        let mut n = 0;
        let atomic_ret = spec.name.contains("_atomic_") && self.mods.glc;
        let data_w = spec.slots.iter().find(|s| s.field == Field::Data0).map_or(1, |s| s.width);
        if atomic_ret {
            let w = if spec.name.contains("cmpswap") { data_w / 2 } else { data_w };
            ops[n] = reg(bits(w1, 24, 8), w, acc);
            n += 1;
        }
        for s in spec.slots.iter() {
            if n >= MAX_OPERANDS {
                break;
            }
            ops[n] = match s.field {
                // LDS DMA loads write LDS, not a VGPR.
                Field::Dst if lds => continue,
                Field::Dst => reg(bits(w1, 24, 8), s.width, acc),
                Field::Data0 => reg(bits(w1, 8, 8), s.width, acc),
                Field::Addr => match enc {
                    Encoding::Flat => reg(bits(w1, 0, 8), s.width, false),
                    Encoding::Global if saddr != 0x7F => reg(bits(w1, 0, 8), 1, false),
                    Encoding::Global => reg(bits(w1, 0, 8), 2, false),
                    _ if gfx940 && sve => reg(bits(w1, 0, 8), 1, false),
                    _ if gfx940 || saddr != 0x7F => Operand::Off,
                    _ => reg(bits(w1, 0, 8), 1, false),
                },
                _ => return Err(DecodeErrorKind::IllegalForm),
            };
            n += 1;
        }
        if enc != Encoding::Flat && n < MAX_OPERANDS {
            ops[n] = match (enc, saddr) {
                (_, 0x7F) => Operand::Off,
                (Encoding::Global, s) => self.src(s, 2)?,
                (_, s) => self.src(s, 1)?,
            };
            n += 1;
        }
        if enc == Encoding::Global && saddr != 0x7F && spec.flags & spec::NO_SADDR != 0 {
            return Err(DecodeErrorKind::IllegalForm);
        }
        Ok(self.finish(op, &ops[..n]))
    }

    /// MIMG: the vdata width comes from dmask (halved for packed d16), or for atomics from the
    /// data size; LLVM, having no address-size field on GFX9, prints vaddr as one VGPR.
    fn mimg(&mut self) -> R<Inst> {
        let w0 = self.w0;
        let w1 = self.word(1)?;
        self.len = 2;
        let op = Self::lookup(self.maps.mimg, bits(w0, 18, 7))?;
        let spec = op.spec();
        let dmask = bits(w0, 8, 4);
        let d16 = bits(w1, 31, 1) == 1;
        let acc = bits(w0, 16, 1) == 1; // the TFE bit selects AGPR data on gfx90a
        self.mods.dmask = dmask as u8;
        self.mods.glc = bits(w0, 13, 1) == 1;
        self.mods.slc = bits(w0, 25, 1) == 1;
        self.mods.scc = bits(w0, 7, 1) == 1;
        self.mods.image = (bits(w0, 12, 1)
            | bits(w0, 14, 1) << 1
            | bits(w0, 15, 1) << 2
            | bits(w0, 17, 1) << 3
            | u32::from(d16) << 4) as u8;
        let n = dmask.count_ones() as u8;
        let width = if spec.flags & spec::MIMG_ATOMIC != 0 {
            let cmpswap = spec.name.contains("cmpswap");
            match (cmpswap, n) {
                (true, 2 | 4) | (false, 1 | 2) => n,
                (true, _) => 2,
                (false, _) => 1,
            }
        } else if d16 {
            n.max(1).div_ceil(2)
        } else {
            n.max(1)
        };
        let vdata = bits(w1, 8, 8) as u8;
        let mut ops = [Operand::Off; MAX_OPERANDS];
        ops[0] =
            if acc { Operand::Agpr { reg: vdata, count: width } } else { Operand::Vgpr { reg: vdata, count: width } };
        ops[1] = Operand::Vgpr { reg: bits(w1, 0, 8) as u8, count: 1 };
        ops[2] = self.src(bits(w1, 16, 5) * 4, 8)?;
        let mut n_ops = 3;
        if spec.flags & spec::MIMG_SAMPLER != 0 {
            ops[3] = self.src(bits(w1, 21, 5) * 4, 4)?;
            n_ops = 4;
        }
        Ok(self.finish(op, &ops[..n_ops]))
    }

    fn buffer(&mut self, enc: Encoding) -> R<Inst> {
        let w0 = self.w0;
        let w1 = self.word(1)?;
        self.len = 2;
        let op = if enc == Encoding::Mubuf {
            self.mods.slc = bits(w0, 17, 1) == 1;
            self.mods.gds_lds = bits(w0, 16, 1) == 1;
            Self::lookup(self.maps.mubuf, bits(w0, 18, 7))?
        } else {
            self.mods.slc = bits(w1, 22, 1) == 1;
            self.mods.offset1 = (bits(w0, 19, 4) | bits(w0, 23, 3) << 4) as u8;
            Self::lookup(self.maps.mtbuf, bits(w0, 15, 4))?
        };
        let spec = op.spec();
        self.mods.glc = bits(w0, 14, 1) == 1;
        // SCC: MUBUF bit 15; MTBUF bit 53 (bit 15 belongs to its opcode there).
        self.mods.scc = if enc == Encoding::Mubuf { bits(w0, 15, 1) == 1 } else { bits(w1, 21, 1) == 1 };
        self.mods.idxen = bits(w0, 13, 1) == 1;
        self.mods.offen = bits(w0, 12, 1) == 1;
        self.mods.offset = bits(w0, 0, 12) as i32;
        if spec.flags & spec::NO_ADDR != 0 && enc == Encoding::Mubuf {
            return Ok(self.finish(op, &[]));
        }
        let acc = bits(w1, 23, 1) == 1;
        let data_w = spec.slots.iter().find(|s| s.field == Field::Data0).map_or(1, |s| s.width);
        let vdata = bits(w1, 8, 8);
        let mut ops = [Operand::Off; MAX_OPERANDS];
        let mut n = 0;
        // An LDS load (`lds`) writes LDS instead of vdata, which is then not an operand.
        if !(enc == Encoding::Mubuf && self.mods.gds_lds) {
            ops[n] = if acc {
                Operand::Agpr { reg: vdata as u8, count: data_w.max(1) }
            } else {
                Operand::Vgpr { reg: vdata as u8, count: data_w.max(1) }
            };
            n += 1;
        }
        let addr_w = u8::from(self.mods.idxen) + u8::from(self.mods.offen);
        ops[n] = if addr_w == 0 { Operand::Off } else { Operand::Vgpr { reg: bits(w1, 0, 8) as u8, count: addr_w } };
        ops[n + 1] = self.src(bits(w1, 16, 5) * 4, 4)?;
        ops[n + 2] = self.src(bits(w1, 24, 8), 1)?;
        if matches!(ops[n + 2], Operand::Literal(_)) {
            return Err(DecodeErrorKind::IllegalForm);
        }
        Ok(self.finish(op, &ops[..n + 3]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every opcode map entry of both targets points at a row of its own encoding and opcode
    /// value, each row is reached at most once per target and at least once, the gfx90a map
    /// reaches exactly the gfx90a rows, and slot lists fit `MAX_OPERANDS`.
    #[test]
    fn tables_are_consistent() {
        let encs = [
            Encoding::Sop2,
            Encoding::Sopk,
            Encoding::Sop1,
            Encoding::Sopc,
            Encoding::Sopp,
            Encoding::Smem,
            Encoding::Vop1,
            Encoding::Vop2,
            Encoding::Vopc,
            Encoding::Vop3,
            Encoding::Vop3p,
            Encoding::Ds,
            Encoding::Flat,
            Encoding::Scratch,
            Encoding::Global,
            Encoding::Mubuf,
            Encoding::Mtbuf,
            Encoding::Mimg,
        ];
        let mut any = alloc::vec![false; tables::OPS.len()];
        for target in [Target::Gfx90a, Target::Gfx940] {
            let mut seen = alloc::vec![0u8; tables::OPS.len()];
            for enc in encs {
                for (code, &idx) in maps(target).of(enc).iter().enumerate() {
                    if idx == u16::MAX {
                        continue;
                    }
                    let row = &tables::OPS[usize::from(idx)];
                    assert_eq!((row.enc, usize::from(row.code)), (enc, code), "{}", row.name);
                    seen[usize::from(idx)] += 1;
                    any[usize::from(idx)] = true;
                }
            }
            assert!(seen.iter().all(|&n| n <= 1), "{target}: every row is reached at most once");
            if target == Target::Gfx90a {
                let reached: usize = seen.iter().map(|&n| usize::from(n)).sum();
                assert_eq!(reached, tables::GFX90A_ROWS);
                assert!(seen[..tables::GFX90A_ROWS].iter().all(|&n| n == 1));
            }
        }
        assert!(any.iter().all(|&b| b), "every row belongs to a target");
        for row in tables::OPS.iter() {
            assert!(row.slots.len() <= MAX_OPERANDS, "{}", row.name);
            assert!(row.slots.iter().all(|s| (1..=32).contains(&s.width)), "{}", row.name);
        }
    }

    #[test]
    fn vop3_literal_and_dpp_codes_are_errors() {
        // v_fma_f32 v0, <255>, v1, v2: gfx90a has no VOP3 literal.
        let e = decode(&[0xD1CB_0000, 0x0402_02FF, 0x3F80_0000], 0).unwrap_err();
        assert_eq!(e.kind, DecodeErrorKind::IllegalForm);
        // v_readfirstlane_b32 with a DPP marker: that opcode has no DPP form.
        let e = decode(&[0x7E00_04FA, 0xFF00_0101], 0).unwrap_err();
        assert_eq!(e.kind, DecodeErrorKind::IllegalForm);
    }
}
