//! Cross-lane forms and the matrix core (docs/executor.md §5 "Lanes"): DPP and SDWA wrap the
//! base VOP1/VOP2/VOPC operation — the wrapper stages the permuted (DPP) or selected (SDWA)
//! sources in `Wave::stage`, runs the base handler on them with the lanes that may write, and
//! merges the destination — so each operation has one definition. MFMA computes the blocks of
//! `D = A × B + C` from the register layouts of §5.

// Lane loops index several per-lane arrays at once.
#![allow(clippy::needless_range_loop)]

use super::fp8::{to_f32 as f8_to_f32, F8};
use super::ops::{dst, field, op, Exe, Handler, R};
use super::wave::{Lanes, Ty, Wave, LANES};
use super::{ExecErrorKind, Group};
use crate::spec::Field;
use crate::{Ext, Inst, Operand};

/// The wrapper for an instruction with a DPP or SDWA dword (its base has a handler).
pub(crate) fn ext_handler(inst: &Inst) -> Option<Handler> {
    match inst.mods.ext {
        Ext::Dpp(_) => Some(dpp),
        Ext::Sdwa(_) => Some(sdwa),
        Ext::None => None,
    }
}

/// Operand index of the slot with `f`.
fn slot_of(e: &Exe, f: Field) -> Option<usize> {
    e.inst.op.spec().slots.iter().position(|s| s.field == f)
}

/// A staging operand: `stage[at..]` (see `Wave::stage`).
fn staged(at: u8) -> Operand {
    Operand::Vgpr { reg: at, count: 0 }
}

/// Whether the base operation writes EXEC (`v_cmpx_*`).
fn writes_exec(e: &Exe) -> bool {
    e.inst.op.name().starts_with("v_cmpx")
}

// ---------------------------------------------------------------------------------------------
// DPP

/// The lane `lane` reads under `dpp_ctrl`: `Ok(None)` when the source is out of range,
/// `Err` for a control gfx90a does not define.
fn dpp_source(ctrl: u16, lane: usize) -> Result<Option<usize>, ExecErrorKind> {
    let row = lane & !15;
    let i = lane & 15;
    let n = usize::from(ctrl & 15);
    Ok(match ctrl {
        // quad_perm: lane reads the quad's lane ctrl[2q+1:2q].
        0x000..=0x0FF => Some((lane & !3) | (usize::from(ctrl) >> (2 * (lane & 3)) & 3)),
        // row_shl:n: lane reads lane + n of its row.
        0x101..=0x10F => (i + n < 16).then_some(lane + n),
        // row_shr:n: lane reads lane − n of its row.
        0x111..=0x11F => (i >= n).then(|| lane - n),
        // row_ror:n: lane reads lane − n of its row, rotating.
        0x121..=0x12F => Some(row | ((i + 16 - n) & 15)),
        // wave_shl:1, wave_rol:1, wave_shr:1, wave_ror:1.
        0x130 => (lane < 63).then_some(lane + 1),
        0x134 => Some((lane + 1) % LANES),
        0x138 => lane.checked_sub(1),
        0x13C => Some((lane + LANES - 1) % LANES),
        // row_mirror, row_half_mirror.
        0x140 => Some(row | (15 - i)),
        0x141 => Some((lane & !7) | (7 - (lane & 7))),
        // row_bcast:15: rows 1–3 read the last lane of the row before; row 0 has no source.
        0x142 => (row > 0).then(|| row - 1),
        // row_bcast:31: rows 2 and 3 read lane 31; rows 0 and 1 have no source.
        0x143 => (lane >= 32).then_some(31),
        // row_newbcast:n (gfx90a): every lane of a row reads its lane n.
        0x150..=0x15F => Some(row | n),
        _ => return Err(ExecErrorKind::Unimplemented),
    })
}

/// Runs a DPP form: source 0 permuted across lanes, then the base operation in the lanes the
/// row and bank masks enable whose source is valid (or, with `bound_ctrl`, reads 0).
fn dpp(w: &mut Wave, e: &Exe, g: &mut Group<'_>) -> R {
    let Ext::Dpp(d) = e.inst.mods.ext else { return Err(ExecErrorKind::Unimplemented) };
    let inner = e.inner.ok_or(ExecErrorKind::Unimplemented)?;
    let k = slot_of(e, Field::Src0).ok_or(ExecErrorKind::Unimplemented)?;
    let (reg, count) = match op(e, k)? {
        Operand::Vgpr { reg, count } if count >= 1 => (reg, count),
        _ => return Err(ExecErrorKind::Unimplemented),
    };
    // 64-bit operands (DPP64) take only row_newbcast.
    if count > 2 || (count == 2 && !(0x150..=0x15F).contains(&d.ctrl)) {
        return Err(ExecErrorKind::Unimplemented);
    }
    let exec = w.exec;
    let mut write = 0u64;
    let mut src = [[0u32; LANES]; 2];
    for c in 0..usize::from(count) {
        src[c] = *w.vreg(usize::from(reg) + c, false)?;
    }
    let mut map = [usize::MAX; LANES];
    for lane in 0..LANES {
        let enabled = d.row_mask >> (lane / 16) & 1 != 0 && d.bank_mask >> ((lane >> 2) & 3) & 1 != 0;
        if exec >> lane & 1 == 0 || !enabled {
            continue;
        }
        match dpp_source(d.ctrl, lane)? {
            Some(s) if exec >> s & 1 != 0 => {
                map[lane] = s;
                write |= 1 << lane;
            }
            _ if d.bound_ctrl => write |= 1 << lane,
            _ => {}
        }
    }
    for c in 0..usize::from(count) {
        let stage = &mut w.stage[c];
        for lane in 0..LANES {
            stage[lane] = src[c].get(map[lane]).copied().unwrap_or(0);
        }
    }
    let mut base = *e;
    base.inst.operands[k] = staged(0);
    base.inst.mods.ext = Ext::None;
    w.exec = write;
    let r = inner(w, &base, g);
    if !(writes_exec(e) && r.is_ok()) {
        w.exec = exec;
    }
    r
}

// ---------------------------------------------------------------------------------------------
// SDWA

/// SDWA select codes.
const DWORD: u8 = 6;

/// The field `sel` of `v`, zero- or sign-extended.
fn select(v: u32, sel: u8, sext: bool) -> Result<u32, ExecErrorKind> {
    let (shift, bits) = match sel {
        0..=3 => (8 * u32::from(sel), 8),
        4 | 5 => (16 * u32::from(sel - 4), 16),
        DWORD => return Ok(v),
        _ => return Err(ExecErrorKind::Unimplemented),
    };
    let x = (v >> shift) & ((1 << bits) - 1);
    Ok(if sext { ((x << (32 - bits)) as i32 >> (32 - bits)) as u32 } else { x })
}

/// The destination dword: the result's low bits placed at `sel`, the other bits 0 (pad),
/// the field's sign (sext, above the field) or the old value (preserve).
fn place(old: u32, r: u32, sel: u8, unused: u8) -> Result<u32, ExecErrorKind> {
    let (shift, bits) = match sel {
        0..=3 => (8 * u32::from(sel), 8u32),
        4 | 5 => (16 * u32::from(sel - 4), 16),
        DWORD => return Ok(r),
        _ => return Err(ExecErrorKind::Unimplemented),
    };
    let field_mask = ((1u32 << bits) - 1) << shift;
    let v = (r << shift) & field_mask;
    let top = shift + bits; // bits at and above `top` lie above the field
    let above = if top >= 32 { 0 } else { !0u32 << top };
    Ok(match unused {
        0 => v,
        1 if r >> (bits - 1) & 1 != 0 => v | above,
        1 => v,
        2 => (old & !field_mask) | v,
        _ => return Err(ExecErrorKind::Unimplemented),
    })
}

/// Runs an SDWA form: the sources' selected fields (sign-extended with `sext`) staged, the base
/// operation run on them, its result placed at `dst_sel`.
fn sdwa(w: &mut Wave, e: &Exe, g: &mut Group<'_>) -> R {
    let Ext::Sdwa(s) = e.inst.mods.ext else { return Err(ExecErrorKind::Unimplemented) };
    let inner = e.inner.ok_or(ExecErrorKind::Unimplemented)?;
    let name = e.inst.op.name();
    // The accumulating forms read their destination as a source: not with a partial select.
    if name.starts_with("v_mac_") || name.starts_with("v_fmac_") {
        return Err(ExecErrorKind::Unimplemented);
    }
    let mut base = *e;
    base.inst.mods.ext = Ext::None;
    for (n, (f, sel)) in [(Field::Src0, s.src0_sel), (Field::Src1, s.src1_sel)].into_iter().enumerate() {
        let Some(k) = slot_of(e, f) else { continue };
        let o = op(e, k)?;
        if matches!(o, Operand::Vgpr { count, .. } | Operand::Sgpr { count, .. } if count != 1) {
            return Err(ExecErrorKind::Unimplemented);
        }
        let v = w.v32(&o)?;
        let sext = s.sext >> n & 1 != 0;
        let mut staged_v = [0u32; LANES];
        for l in 0..LANES {
            staged_v[l] = select(v[l], sel, sext)?;
        }
        w.stage[2 * n] = staged_v;
        base.inst.operands[k] = staged(2 * n as u8);
    }
    // VOPC (and a dword destination) need no merge.
    let d = match slot_of(e, Field::Dst) {
        Some(_) if s.dst_sel != DWORD => Some(dst(e)?),
        _ => None,
    };
    let Some(d) = d else { return inner(w, &base, g) };
    if !matches!(d, Operand::Vgpr { count: 1, .. }) {
        return Err(ExecErrorKind::Unimplemented);
    }
    let old = w.v32(&d)?;
    let r = inner(w, &base, g)?;
    let new = w.v32(&d)?;
    let exec = w.exec;
    let mut out = old;
    for l in 0..LANES {
        if exec >> l & 1 != 0 {
            out[l] = place(old[l], new[l], s.dst_sel, s.dst_unused)?;
        }
    }
    w.set_v32k(&d, 0, &out, u64::MAX)?;
    Ok(r)
}

// ---------------------------------------------------------------------------------------------
// MFMA

/// Input element types of the matrix instructions.
#[derive(Clone, Copy, PartialEq, Eq)]
enum In {
    F32,
    F16,
    Bf16,
    I8,
    F64,
    /// gfx940's 8-bit floats: A's format, B's format (docs/executor.md §8 "fp8 and bf8").
    F8(F8, F8),
    /// gfx940's xf32: f32 registers whose 13 low mantissa bits the product does not see
    /// (docs/executor.md §8 "xf32").
    Xf32,
}

impl In {
    fn bits(self) -> usize {
        match self {
            In::F32 | In::Xf32 => 32,
            In::F16 | In::Bf16 => 16,
            In::I8 | In::F8(..) => 8,
            In::F64 => 64,
        }
    }
}

/// One matrix instruction: `blocks` products of M×K by K×N.
struct Shape {
    name: &'static str,
    m: usize,
    n: usize,
    k: usize,
    blocks: usize,
    ty: In,
}

const fn sh(name: &'static str, m: usize, n: usize, k: usize, blocks: usize, ty: In) -> Shape {
    Shape { name, m, n, k, blocks, ty }
}

/// gfx90a's matrix instructions, then gfx940's new ones and new names (docs/executor.md §8: the
/// bf16 and f64 shapes renamed, the i8 shapes of twice the depth, the fp8/bf8 shapes).
const SHAPES: [Shape; 46] = [
    sh("v_mfma_f32_32x32x1f32", 32, 32, 1, 2, In::F32),
    sh("v_mfma_f32_16x16x1f32", 16, 16, 1, 4, In::F32),
    sh("v_mfma_f32_4x4x1f32", 4, 4, 1, 16, In::F32),
    sh("v_mfma_f32_32x32x2f32", 32, 32, 2, 1, In::F32),
    sh("v_mfma_f32_16x16x4f32", 16, 16, 4, 1, In::F32),
    sh("v_mfma_f32_32x32x4f16", 32, 32, 4, 2, In::F16),
    sh("v_mfma_f32_16x16x4f16", 16, 16, 4, 4, In::F16),
    sh("v_mfma_f32_4x4x4f16", 4, 4, 4, 16, In::F16),
    sh("v_mfma_f32_32x32x8f16", 32, 32, 8, 1, In::F16),
    sh("v_mfma_f32_16x16x16f16", 16, 16, 16, 1, In::F16),
    sh("v_mfma_i32_32x32x4i8", 32, 32, 4, 2, In::I8),
    sh("v_mfma_i32_16x16x4i8", 16, 16, 4, 4, In::I8),
    sh("v_mfma_i32_4x4x4i8", 4, 4, 4, 16, In::I8),
    sh("v_mfma_i32_32x32x8i8", 32, 32, 8, 1, In::I8),
    sh("v_mfma_i32_16x16x16i8", 16, 16, 16, 1, In::I8),
    sh("v_mfma_f32_32x32x2bf16", 32, 32, 2, 2, In::Bf16),
    sh("v_mfma_f32_16x16x2bf16", 16, 16, 2, 4, In::Bf16),
    sh("v_mfma_f32_4x4x2bf16", 4, 4, 2, 16, In::Bf16),
    sh("v_mfma_f32_32x32x4bf16", 32, 32, 4, 1, In::Bf16),
    sh("v_mfma_f32_16x16x8bf16", 16, 16, 8, 1, In::Bf16),
    sh("v_mfma_f32_32x32x4bf16_1k", 32, 32, 4, 2, In::Bf16),
    sh("v_mfma_f32_16x16x4bf16_1k", 16, 16, 4, 4, In::Bf16),
    sh("v_mfma_f32_4x4x4bf16_1k", 4, 4, 4, 16, In::Bf16),
    sh("v_mfma_f32_32x32x8bf16_1k", 32, 32, 8, 1, In::Bf16),
    sh("v_mfma_f32_16x16x16bf16_1k", 16, 16, 16, 1, In::Bf16),
    sh("v_mfma_f64_16x16x4f64", 16, 16, 4, 1, In::F64),
    sh("v_mfma_f64_4x4x4f64", 4, 4, 4, 4, In::F64),
    sh("v_mfma_f32_32x32x4_2b_bf16", 32, 32, 4, 2, In::Bf16),
    sh("v_mfma_f32_16x16x4_4b_bf16", 16, 16, 4, 4, In::Bf16),
    sh("v_mfma_f32_4x4x4_16b_bf16", 4, 4, 4, 16, In::Bf16),
    sh("v_mfma_f32_32x32x8_bf16", 32, 32, 8, 1, In::Bf16),
    sh("v_mfma_f32_16x16x16_bf16", 16, 16, 16, 1, In::Bf16),
    sh("v_mfma_f64_16x16x4_f64", 16, 16, 4, 1, In::F64),
    sh("v_mfma_f64_4x4x4_4b_f64", 4, 4, 4, 4, In::F64),
    sh("v_mfma_i32_32x32x16_i8", 32, 32, 16, 1, In::I8),
    sh("v_mfma_i32_16x16x32_i8", 16, 16, 32, 1, In::I8),
    sh("v_mfma_f32_16x16x32_fp8_fp8", 16, 16, 32, 1, In::F8(F8::Fp8, F8::Fp8)),
    sh("v_mfma_f32_16x16x32_fp8_bf8", 16, 16, 32, 1, In::F8(F8::Fp8, F8::Bf8)),
    sh("v_mfma_f32_16x16x32_bf8_fp8", 16, 16, 32, 1, In::F8(F8::Bf8, F8::Fp8)),
    sh("v_mfma_f32_16x16x32_bf8_bf8", 16, 16, 32, 1, In::F8(F8::Bf8, F8::Bf8)),
    sh("v_mfma_f32_32x32x16_fp8_fp8", 32, 32, 16, 1, In::F8(F8::Fp8, F8::Fp8)),
    sh("v_mfma_f32_32x32x16_fp8_bf8", 32, 32, 16, 1, In::F8(F8::Fp8, F8::Bf8)),
    sh("v_mfma_f32_32x32x16_bf8_fp8", 32, 32, 16, 1, In::F8(F8::Bf8, F8::Fp8)),
    sh("v_mfma_f32_32x32x16_bf8_bf8", 32, 32, 16, 1, In::F8(F8::Bf8, F8::Bf8)),
    sh("v_mfma_f32_16x16x8_xf32", 16, 16, 8, 1, In::Xf32),
    sh("v_mfma_f32_32x32x4_xf32", 32, 32, 4, 1, In::Xf32),
];

/// gfx940's sparse matrix instructions (docs/executor.md §8 "Sparse matrices"): M × K by
/// K × N, one block, A 4:2 structured-sparse.
const SPARSE: [Shape; 14] = [
    sh("v_smfmac_f32_16x16x32_f16", 16, 16, 32, 1, In::F16),
    sh("v_smfmac_f32_32x32x16_f16", 32, 32, 16, 1, In::F16),
    sh("v_smfmac_f32_16x16x32_bf16", 16, 16, 32, 1, In::Bf16),
    sh("v_smfmac_f32_32x32x16_bf16", 32, 32, 16, 1, In::Bf16),
    sh("v_smfmac_i32_16x16x64_i8", 16, 16, 64, 1, In::I8),
    sh("v_smfmac_i32_32x32x32_i8", 32, 32, 32, 1, In::I8),
    sh("v_smfmac_f32_16x16x64_fp8_fp8", 16, 16, 64, 1, In::F8(F8::Fp8, F8::Fp8)),
    sh("v_smfmac_f32_16x16x64_fp8_bf8", 16, 16, 64, 1, In::F8(F8::Fp8, F8::Bf8)),
    sh("v_smfmac_f32_16x16x64_bf8_fp8", 16, 16, 64, 1, In::F8(F8::Bf8, F8::Fp8)),
    sh("v_smfmac_f32_16x16x64_bf8_bf8", 16, 16, 64, 1, In::F8(F8::Bf8, F8::Bf8)),
    sh("v_smfmac_f32_32x32x32_fp8_fp8", 32, 32, 32, 1, In::F8(F8::Fp8, F8::Fp8)),
    sh("v_smfmac_f32_32x32x32_fp8_bf8", 32, 32, 32, 1, In::F8(F8::Fp8, F8::Bf8)),
    sh("v_smfmac_f32_32x32x32_bf8_fp8", 32, 32, 32, 1, In::F8(F8::Bf8, F8::Fp8)),
    sh("v_smfmac_f32_32x32x32_bf8_bf8", 32, 32, 32, 1, In::F8(F8::Bf8, F8::Bf8)),
];

/// The handler of a matrix instruction (aux: its index in [`SHAPES`] or [`SPARSE`]).
pub(crate) fn mfma_handler(name: &str) -> Option<(Handler, u32)> {
    if let Some(i) = SPARSE.iter().position(|s| s.name == name) {
        return Some((smfmac, i as u32));
    }
    let i = SHAPES.iter().position(|s| s.name == name)?;
    Some((mfma, i as u32))
}

/// An xf32 input as the product sees it (docs/executor.md §8 "xf32"): the f32 truncated toward
/// zero to 10 mantissa bits; a NaN stays a NaN (quieted) rather than becoming an infinity.
fn xf32(bits: u32) -> f32 {
    let v = f32::from_bits(bits);
    if v.is_nan() {
        f32::from_bits(bits | 0x0040_0000)
    } else {
        f32::from_bits(bits & 0xFFFF_E000)
    }
}

/// The exact product of two matrix elements (raw bits of type `ty`): f64 bits, or the i64 of
/// the integer product.
fn product(ty: In, x: u64, y: u64) -> u64 {
    match ty {
        In::F32 => (f64::from(f32::from_bits(x as u32)) * f64::from(f32::from_bits(y as u32))).to_bits(),
        In::Xf32 => (f64::from(xf32(x as u32)) * f64::from(xf32(y as u32))).to_bits(),
        In::F16 => (f64::from(f16_to_f32(x as u16)) * f64::from(f16_to_f32(y as u16))).to_bits(),
        In::Bf16 => {
            (f64::from(f32::from_bits((x as u32) << 16)) * f64::from(f32::from_bits((y as u32) << 16))).to_bits()
        }
        In::I8 => i64::from((x as u8 as i8 as i32) * (y as u8 as i8 as i32)) as u64,
        In::F64 => (f64::from_bits(x) * f64::from_bits(y)).to_bits(),
        In::F8(fa, fb) => (f64::from(f8_to_f32(fa, x as u8)) * f64::from(f8_to_f32(fb, y as u8))).to_bits(),
    }
}

/// `v_smfmac_* D, A, B, I`: D += A × B with A 4:2 sparse (docs/executor.md §8). Lane group q
/// (lanes q·M … q·M + M − 1, the same rows in A and I, columns in B) holds k = q·e … q·e + e − 1
/// (e the dense elements per B lane); each group of four k is stored in A as two values,
/// compressed element 2g + v of the lane, whose position in the group is bits `[2v+1:2v]` of
/// the index nibble g + abid·(e/4) of I. cbsz and blgp are not honoured (errors).
fn smfmac(w: &mut Wave, e: &Exe, _g: &mut Group<'_>) -> R {
    let s = SPARSE.get(e.aux as usize).ok_or(ExecErrorKind::Unimplemented)?;
    let m = e.inst.mods;
    let (cbsz, abid, blgp) = (m.abs, m.op_sel, m.neg);
    let bits = s.ty.bits();
    let sets = if bits == 16 { 4 } else { 2 };
    if w.exec != u64::MAX || cbsz != 0 || blgp != 0 || abid >= sets {
        return Err(ExecErrorKind::Unimplemented);
    }
    let groups = LANES / s.m; // lane groups
    let per_b = s.k / groups; // dense elements per B lane
    let per_a = per_b / 2; // compressed elements per A lane
    let a = msrc(w, &field(e, Field::Src0, 0)?, (per_a * bits).div_ceil(32))?;
    let bop = field(e, Field::Src1, 0)?;
    let mut b = [[0u32; LANES]; 4];
    for (k, x) in b.iter_mut().enumerate().take((per_b * bits).div_ceil(32)) {
        *x = w.v32k(&bop, k as u8)?;
    }
    let idx = w.v32(&field(e, Field::Src2, 0)?)?;
    let d = dst(e)?;
    let out_dwords = s.m * s.n / LANES;
    let mut acc_regs = [[0u32; LANES]; MAX_MFMA_DWORDS];
    let acc = acc_regs.get_mut(..out_dwords).ok_or(ExecErrorKind::Unimplemented)?;
    for (r, x) in acc.iter_mut().enumerate() {
        *x = w.v32k(&d, r as u8)?;
    }
    let mask = (1u64 << bits) - 1;
    let a_elem = |lane: usize, c: usize| (a[lane] >> (bits * c)) & mask;
    let b_elem = |lane: usize, c: usize| {
        let at = bits * c;
        b.get(at / 32).map_or(0, |r| u64::from(r[lane] >> (at % 32)) & mask)
    };
    let mut prods = [0u64; 64];
    for i in 0..s.m {
        for j in 0..s.n {
            let (reg, lane) = out_pos(s, false, 0, i, j);
            let mut n = 0;
            for q in 0..groups {
                let (la, lb) = (q * s.m + i, q * s.n + j);
                for g in 0..per_a / 2 {
                    let nib = (idx[la] >> (4 * (g + usize::from(abid) * per_a / 2))) & 0xF;
                    let (p0, p1) = ((nib & 3) as usize, (nib >> 2) as usize);
                    // Two values in one position: not a 4:2 compression.
                    if p0 == p1 {
                        return Err(ExecErrorKind::Unimplemented);
                    }
                    for (v, pos) in [(0, p0), (1, p1)] {
                        if let Some(p) = prods.get_mut(n) {
                            *p = product(s.ty, a_elem(la, 2 * g + v), b_elem(lb, 4 * g + pos));
                        }
                        n += 1;
                    }
                }
            }
            let ks = prods.get(..n).ok_or(ExecErrorKind::Unimplemented)?;
            let old = acc.get(reg).map(|x| x[lane]).ok_or(ExecErrorKind::Unimplemented)?;
            let new = if s.ty == In::I8 {
                ks.iter().fold(old as i32, |t, &p| t.wrapping_add(p as i64 as i32)) as u32
            } else {
                let sum = ks.iter().fold(f64::from(f32::from_bits(old)), |t, &p| t + f64::from_bits(p));
                (sum as f32).to_bits()
            };
            if let Some(x) = acc.get_mut(reg) {
                x[lane] = new;
            }
        }
    }
    for (r, v) in acc.iter().enumerate() {
        w.set_v32k(&d, r, v, u64::MAX)?;
    }
    super::ops::NEXT
}

/// IEEE binary16 bits to f32 (exact).
fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from(h >> 10) & 0x1F;
    let man = u32::from(h) & 0x3FF;
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, m) => {
            // Subnormal: m × 2^-24, exact in f32.
            let v = m as f32 * f32::from_bits(0x3380_0000);
            return if sign != 0 { -v } else { v };
        }
        (0x1F, 0) => sign | 0x7F80_0000,
        (0x1F, m) => sign | 0x7FC0_0000 | (m << 13),
        (e, m) => sign | ((e + 112) << 23) | (m << 13),
    };
    f32::from_bits(bits)
}

/// The output register and lane of element (i, j) of block b (docs/executor.md §5 "Lanes"):
/// registers in units of the output element (1 or 2 dwords).
fn out_pos(s: &Shape, wide: bool, b: usize, i: usize, j: usize) -> (usize, usize) {
    let height = if wide { 1 } else { 4 };
    let rows = LANES / s.n; // row groups per register
    let bpr = LANES.div_ceil(s.n * s.m / height); // blocks per register
    let reg = b * (s.m * s.n / LANES) + (i / (height * rows)) * height + i % height;
    let lane = (b % bpr) * s.n + ((i / height) % rows) * bpr * s.n + j;
    (reg, lane)
}

/// The lane of BLGP pattern `blgp` a B-matrix lane reads.
fn blgp_lane(lane: usize, blgp: u8) -> usize {
    match blgp {
        1 => lane % 32,
        2 => 32 + lane % 32,
        3 => (lane + 16) % 64,
        4..=7 => 16 * usize::from(blgp - 4) + lane % 16,
        _ => lane,
    }
}

/// A matrix source (A or B) as one value per lane: up to 64 bits.
fn msrc(w: &Wave, o: &Operand, dwords: usize) -> Result<[u64; LANES], ExecErrorKind> {
    let lo = w.v32k(o, 0)?;
    let hi = if dwords > 1 { w.v32k(o, 1)? } else { [0; LANES] };
    Ok(core::array::from_fn(|l| u64::from(lo[l]) | u64::from(hi[l]) << 32))
}

/// The most result dwords an MFMA shape has (`v_mfma_f32_32x32x1f32`: 32 × 32 × 2 blocks / 64).
const MAX_MFMA_DWORDS: usize = 32;

fn mfma(w: &mut Wave, e: &Exe, _g: &mut Group<'_>) -> R {
    let s = SHAPES.get(e.aux as usize).ok_or(ExecErrorKind::Unimplemented)?;
    let m = e.inst.mods;
    let (cbsz, abid, blgp) = (m.abs, m.op_sel, m.neg);
    // Every lane holds part of the matrices: a partial EXEC is not honoured.
    if w.exec != u64::MAX || cbsz > 4 || u32::from(abid) >= 1 << cbsz || (1usize << cbsz) > s.blocks {
        return Err(ExecErrorKind::Unimplemented);
    }
    if s.ty == In::F64 && (cbsz != 0 || abid != 0 || blgp != 0) {
        return Err(ExecErrorKind::Unimplemented);
    }
    // AMD's matrix instruction calculator lists no blgp for the fp8/bf8 shapes (§8), nor is
    // one defined for xf32.
    if matches!(s.ty, In::F8(..) | In::Xf32) && blgp != 0 {
        return Err(ExecErrorKind::Unimplemented);
    }
    // Elements of k each lane holds, packed in one or two dwords.
    let per_lane = (s.k / (LANES / (s.m * s.blocks)).max(1)).max(1);
    let in_dwords = (per_lane * s.ty.bits()).div_ceil(32);
    let a = msrc(w, &field(e, Field::Src0, 0)?, in_dwords)?;
    let b = msrc(w, &field(e, Field::Src1, 0)?, in_dwords)?;
    let (d, c) = (dst(e)?, field(e, Field::Src2, 0)?);
    let wide = s.ty == In::F64;
    let out_dwords = s.m * s.n * s.blocks * if wide { 2 } else { 1 } / LANES;
    // C: registers, or one constant for every element.
    let cval = |w: &Wave, r: usize| -> Result<Lanes, ExecErrorKind> {
        match c {
            Operand::Vgpr { .. } | Operand::Agpr { .. } => w.v32k(&c, r as u8),
            _ if wide => {
                let v = w.s64(&c, Ty::F64)?;
                Ok([if r % 2 == 0 { v as u32 } else { (v >> 32) as u32 }; LANES])
            }
            _ => Ok([w.s32(&c)?; LANES]),
        }
    };
    // D's registers on the stack (no heap allocation per instruction): at most 32, the
    // 32 × 32 two-block shapes.
    let mut acc_regs = [[0u32; LANES]; MAX_MFMA_DWORDS];
    let acc = acc_regs.get_mut(..out_dwords).ok_or(ExecErrorKind::Unimplemented)?;
    for (r, a) in acc.iter_mut().enumerate() {
        *a = cval(w, r)?;
    }
    let bits = s.ty.bits();
    let elem = |v: &[u64; LANES], lane: usize, idx: usize| -> u64 {
        let x = v[lane % LANES] >> (bits * idx);
        if bits == 64 {
            x
        } else {
            x & ((1u64 << bits) - 1)
        }
    };
    // Input position of element k of row i (A) or column j (B) in block blk.
    let in_pos = |outer: usize, idx: usize, k: usize, blk: usize| -> (usize, usize) {
        (blk * outer + (k / per_lane) * outer * s.blocks + idx, k % per_lane)
    };
    let group = 1usize << cbsz;
    for blk in 0..s.blocks {
        let ablk = (blk / group) * group + usize::from(abid);
        for i in 0..s.m {
            for j in 0..s.n {
                let (reg, lane) = out_pos(s, wide, blk, i, j);
                let (rlo, rhi) = if wide { (2 * reg, 2 * reg + 1) } else { (reg, reg) };
                let lo = acc.get(rlo).map(|x| x[lane]).ok_or(ExecErrorKind::Unimplemented)?;
                let hi = acc.get(rhi).map(|x| x[lane]).ok_or(ExecErrorKind::Unimplemented)?;
                let mut prods = [0u64; 32];
                for k in 0..s.k.min(32) {
                    let (la, ia) = in_pos(s.m, i, k, ablk);
                    let (lb, ib) = in_pos(s.n, j, k, blk);
                    let (x, y) = (elem(&a, la, ia), elem(&b, blgp_lane(lb, blgp), ib));
                    prods[k] = product(s.ty, x, y);
                }
                let ks = &prods[..s.k.min(32)];
                let (nlo, nhi) = match s.ty {
                    In::I8 => {
                        let sum = ks.iter().fold(lo as i32, |t, &p| t.wrapping_add(p as i64 as i32));
                        (sum as u32, sum as u32)
                    }
                    In::F64 => {
                        let cv = f64::from_bits(u64::from(lo) | u64::from(hi) << 32);
                        let sum = ks.iter().fold(cv, |t, &p| t + f64::from_bits(p));
                        (sum.to_bits() as u32, (sum.to_bits() >> 32) as u32)
                    }
                    _ => {
                        let sum = ks.iter().fold(f64::from(f32::from_bits(lo)), |t, &p| t + f64::from_bits(p));
                        let r = (sum as f32).to_bits();
                        (r, r)
                    }
                };
                if let Some(x) = acc.get_mut(rlo) {
                    x[lane] = nlo;
                }
                if wide {
                    if let Some(x) = acc.get_mut(rhi) {
                        x[lane] = nhi;
                    }
                }
            }
        }
    }
    for (r, v) in acc.iter().enumerate() {
        w.set_v32k(&d, r, v, u64::MAX)?;
    }
    super::ops::NEXT
}
