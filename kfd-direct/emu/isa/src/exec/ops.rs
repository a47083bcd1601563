//! Instruction semantics (reference §10; AMD's CDNA2 ISA guide for the pseudocode).
//!
//! [`handler`] picks, once per decoded instruction, the function that runs it and a small
//! parameter (`aux`: a compare's condition, a memory access's size, an atomic's operation).
//! Forms the executor does not honour yet — DPP, SDWA, VOP3 modifiers on integer operations —
//! have no handler or fail when executed, so they report the instruction instead of computing
//! something else. The floating-point, 16-bit and packed opcodes are in `float.rs`, which the
//! table falls back to.

// Lane loops index several per-lane arrays at once.
#![allow(clippy::needless_range_loop)]

use super::wave::{Lanes, Lanes64, Src, Src64, Ty, Wave, LANES};
use super::{memory, AtomicOp, ExecErrorKind, Group, MemFault, PRIVATE_APERTURE, SHARED_APERTURE};
use crate::spec::Field;
use crate::{Encoding, Ext, Inst, Operand};

/// What the wave does after an instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flow {
    Next,
    /// To an instruction index.
    Jump(usize),
    /// To a byte address (`s_setpc`, `s_swappc`).
    JumpAddr(u64),
    End,
    Barrier,
}

/// A decoded instruction with its parameter and, for branches, the target index.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Exe {
    pub(crate) inst: Inst,
    pub(crate) aux: u32,
    /// Branch target index (`u32::MAX`: none or outside the code); the address of the next
    /// instruction for `s_getpc`/`s_swappc` is `next`.
    pub(crate) target: u32,
    /// Byte address of the next instruction.
    pub(crate) next: u64,
    /// Branch target address (reported when it names no instruction).
    pub(crate) to: u64,
    /// DPP and SDWA forms: the base operation's handler, which `exec/lanes.rs` runs on the
    /// permuted or selected sources (docs/executor.md §5 "Lanes").
    pub(crate) inner: Option<Handler>,
    /// The operand index of the first slot of `Dst`, `Src0`, `Src1`, `Src2`, then of the
    /// carry-out and of the carry-in / lane mask ([`carry_out`], [`mask_in`]) (`u8::MAX`:
    /// none), from the opcode's slot table at decode time, so [`dst`], [`src`] and those two
    /// do not scan it per execution (docs/executor.md §6 "speed").
    pub(crate) slots: [u8; 6],
}

/// [`Exe::slots`] for an instruction.
pub(crate) fn slot_map(inst: &Inst) -> [u8; 6] {
    let slots = inst.op.spec().slots;
    let count = usize::from(inst.count);
    // The `n`-th slot with field `f` among the operands present.
    let nth = |f: Field, n: usize| slots.iter().enumerate().filter(|(_, s)| s.field == f).nth(n).map(|(k, _)| k);
    let present = |k: Option<usize>| k.filter(|&k| k < count);
    let idx = |k: Option<usize>| k.and_then(|k| u8::try_from(k).ok()).unwrap_or(u8::MAX);
    let first = |f: Field| idx(nth(f, 0));
    // The carry-out: the VOP3B `sdst`, else the VOP2 `vcc` definition.
    let cout = present(nth(Field::Sdst, 0)).or_else(|| present(nth(Field::Vcc, 0)));
    // The carry-in or lane mask: src2 in VOP3, the trailing `vcc` in VOP2.
    let vccs = slots.iter().filter(|s| s.field == Field::Vcc).count();
    let cin = present(nth(Field::Src2, 0)).or_else(|| present(nth(Field::Vcc, vccs.saturating_sub(1))));
    [first(Field::Dst), first(Field::Src0), first(Field::Src1), first(Field::Src2), idx(cout), idx(cin)]
}

/// The operand at a precomputed slot index.
#[inline]
fn op_at(e: &Exe, k: u8) -> Result<Operand, ExecErrorKind> {
    if k == u8::MAX {
        return Err(ExecErrorKind::Unimplemented);
    }
    op(e, usize::from(k))
}

pub(crate) type R = Result<Flow, ExecErrorKind>;

/// Runs one instruction.
pub(crate) type Handler = fn(&mut Wave, &Exe, &mut Group<'_>) -> R;

pub(crate) const NEXT: R = Ok(Flow::Next);

// ---------------------------------------------------------------------------------------------
// operand positions

pub(crate) fn op(e: &Exe, k: usize) -> Result<Operand, ExecErrorKind> {
    e.inst.operands().get(k).copied().ok_or(ExecErrorKind::Unimplemented)
}

/// The operand of the `n`-th slot with `field`.
pub(crate) fn field(e: &Exe, f: Field, n: usize) -> Result<Operand, ExecErrorKind> {
    let slots = e.inst.op.spec().slots;
    let k = slots.iter().enumerate().filter(|(_, s)| s.field == f).nth(n).map(|(k, _)| k);
    k.map_or(Err(ExecErrorKind::Unimplemented), |k| op(e, k))
}

fn has_field(e: &Exe, f: Field) -> bool {
    e.inst.op.spec().slots.iter().any(|s| s.field == f)
}

pub(crate) fn dst(e: &Exe) -> Result<Operand, ExecErrorKind> {
    op_at(e, e.slots[0])
}

pub(crate) fn src(e: &Exe, n: usize) -> Result<Operand, ExecErrorKind> {
    op_at(e, e.slots[1 + n.min(2)])
}

/// The carry-out / compare destination of a VOP2/VOP3B instruction (`vcc` or an SGPR pair).
/// (Resolved at decode time, [`Exe::slots`].)
pub(super) fn carry_out(e: &Exe) -> Result<Operand, ExecErrorKind> {
    op_at(e, e.slots[4])
}

/// The carry-in or lane mask: src2 in VOP3, the trailing `vcc` in VOP2 ([`Exe::slots`]).
fn mask_in(e: &Exe) -> Result<Operand, ExecErrorKind> {
    op_at(e, e.slots[5])
}

/// Integer VALU operations take no float modifiers.
pub(super) fn int_mods(e: &Exe) -> Result<(), ExecErrorKind> {
    let m = &e.inst.mods;
    if m.neg != 0 || m.abs != 0 || m.clamp || m.omod != 0 || m.op_sel != 0 {
        return Err(ExecErrorKind::Unimplemented);
    }
    Ok(())
}

pub(crate) fn simm16(e: &Exe) -> u32 {
    match e.inst.operands().iter().find(|o| matches!(o, Operand::Imm(_))) {
        Some(Operand::Imm(i)) => *i & 0xFFFF,
        _ => 0,
    }
}

// ---------------------------------------------------------------------------------------------
// scalar ALU

/// A scalar value at slot `k` (32 or 64 bits by the slot's width).
fn sget(w: &Wave, e: &Exe, k: usize) -> Result<u64, ExecErrorKind> {
    let s = e.inst.op.spec().slots.get(k).ok_or(ExecErrorKind::Unimplemented)?;
    let o = op(e, k)?;
    if s.width >= 2 {
        w.s64(&o, if s.ty == crate::spec::Ty::F64 { Ty::F64 } else { Ty::B64 })
    } else {
        w.s32(&o).map(u64::from)
    }
}

fn sset(w: &mut Wave, e: &Exe, k: usize, v: u64) -> Result<(), ExecErrorKind> {
    let s = e.inst.op.spec().slots.get(k).ok_or(ExecErrorKind::Unimplemented)?;
    let o = op(e, k)?;
    if s.width >= 2 {
        w.set_s64(&o, v)
    } else {
        w.set_s32(&o, v as u32)
    }
}

/// `D = f(S0, S1, SCC)`, SCC updated when `f` says so.
fn sop2(w: &mut Wave, e: &Exe, f: impl Fn(u64, u64, bool) -> (u64, Option<bool>)) -> R {
    let (a, b) = (sget(w, e, 1)?, sget(w, e, 2)?);
    let (r, scc) = f(a, b, w.scc);
    sset(w, e, 0, r)?;
    if let Some(s) = scc {
        w.scc = s;
    }
    NEXT
}

fn sop1(w: &mut Wave, e: &Exe, f: impl Fn(u64, bool) -> (u64, Option<bool>)) -> R {
    let a = sget(w, e, 1)?;
    let (r, scc) = f(a, w.scc);
    sset(w, e, 0, r)?;
    if let Some(s) = scc {
        w.scc = s;
    }
    NEXT
}

fn sopc(w: &mut Wave, e: &Exe, f: impl Fn(u64, u64) -> bool) -> R {
    let (a, b) = (sget(w, e, 0)?, sget(w, e, 1)?);
    w.scc = f(a, b);
    NEXT
}

/// SOPK: `D = f(D, simm16)`.
fn sopk(w: &mut Wave, e: &Exe, f: impl Fn(u32, u32, bool) -> (Option<u32>, Option<bool>)) -> R {
    let d = op(e, 0)?;
    let cur = w.s32(&d).unwrap_or(0);
    let (r, scc) = f(cur, simm16(e), w.scc);
    if let Some(r) = r {
        w.set_s32(&d, r)?;
    }
    if let Some(s) = scc {
        w.scc = s;
    }
    NEXT
}

fn sext16(i: u32) -> u32 {
    i as u16 as i16 as i32 as u32
}

fn bfe32(a: u32, b: u32, signed: bool) -> u32 {
    let off = b & 31;
    let width = (b >> 16) & 0x7F;
    if width == 0 {
        return 0;
    }
    if signed {
        let width = width.min(32 - off);
        (((a >> off) << (32 - width)) as i32 >> (32 - width)) as u32
    } else if width >= 32 {
        a >> off
    } else {
        (a >> off) & ((1 << width) - 1)
    }
}

fn bfe64(a: u64, b: u64, signed: bool) -> u64 {
    let off = (b & 63) as u32;
    let width = ((b >> 16) & 0x7F) as u32;
    if width == 0 {
        return 0;
    }
    if signed {
        let width = width.min(64 - off);
        (((a >> off) << (64 - width)) as i64 >> (64 - width)) as u64
    } else if width >= 64 {
        a >> off
    } else {
        (a >> off) & ((1 << width) - 1)
    }
}

fn saveexec(w: &mut Wave, e: &Exe, f: fn(u64, u64) -> u64) -> R {
    let s = sget(w, e, 1)?;
    let old = w.exec;
    w.exec = f(s, old);
    w.scc = w.exec != 0;
    sset(w, e, 0, old)?;
    NEXT
}

fn wrexec(w: &mut Wave, e: &Exe, f: fn(u64, u64) -> u64) -> R {
    let s = sget(w, e, 1)?;
    w.exec = f(s, w.exec);
    w.scc = w.exec != 0;
    let x = w.exec;
    sset(w, e, 0, x)?;
    NEXT
}

fn branch(e: &Exe, taken: bool) -> R {
    if !taken {
        return NEXT;
    }
    if e.target == u32::MAX {
        return Ok(Flow::JumpAddr(e.to));
    }
    Ok(Flow::Jump(e.target as usize))
}

fn smem_load(w: &mut Wave, e: &Exe, g: &mut Group<'_>) -> R {
    let d = op(e, 0)?;
    let base = w.s64(&op(e, 1)?, Ty::B64)?;
    let off = match op(e, 2)? {
        Operand::Imm(_) => e.inst.mods.offset as i64 as u64,
        o => u64::from(w.s32(&o)?),
    };
    let addr = base.wrapping_add(off) & !3;
    let n = e.inst.op.spec().slots.first().map_or(0, |s| usize::from(s.width));
    let mut buf = [0u8; 64];
    let bytes = buf.get_mut(..4 * n).ok_or(ExecErrorKind::Unimplemented)?;
    g.mem.load(addr, bytes).map_err(fault)?;
    for k in 0..n {
        let v = u32::from_le_bytes([buf[4 * k], buf[4 * k + 1], buf[4 * k + 2], buf[4 * k + 3]]);
        w.set_sgpr_dword(&d, k, v)?;
    }
    NEXT
}

pub(crate) fn fault(f: MemFault) -> ExecErrorKind {
    ExecErrorKind::MemoryFault(f.0)
}

// ---------------------------------------------------------------------------------------------
// vector ALU: integer

/// One value per lane from `f(lane)`: a plain loop the compiler inlines and unrolls (the hot
/// path of every VALU operation; docs/executor.md §6 "speed").
#[inline(always)]
fn per_lane<T: Copy + Default>(mut f: impl FnMut(usize) -> T) -> [T; LANES] {
    let mut r = [T::default(); LANES];
    for (l, x) in r.iter_mut().enumerate() {
        *x = f(l);
    }
    r
}

fn lanes_map2(a: Src<'_>, b: Src<'_>, f: impl Fn(u32, u32) -> u32) -> Lanes {
    per_lane(|l| f(a.at(l), b.at(l)))
}

/// `D = f(S0, S1)` per lane.
fn vop2_u32(w: &mut Wave, e: &Exe, f: impl Fn(u32, u32) -> u32) -> R {
    int_mods(e)?;
    let (a, b) = (w.src32(&src(e, 0)?)?, w.src32(&src(e, 1)?)?);
    if let (Src::Splat(x), Src::Splat(y)) = (a, b) {
        let exec = w.exec;
        w.fill_v32(&dst(e)?, f(x, y), exec)?;
        return NEXT;
    }
    let r = lanes_map2(a, b, f);
    w.set_v32(&dst(e)?, &r)?;
    NEXT
}

/// `v_add_u32`, `v_sub_u32`, `v_subrev_u32`: wrapping, or with the VOP3 `clamp` bit saturated
/// to the unsigned range (`sat` where the operation overflows).
fn vaddsub_u32(w: &mut Wave, e: &Exe, f: impl Fn(u32, u32) -> (u32, bool), sat: u32) -> R {
    let m = &e.inst.mods;
    if m.neg != 0 || m.abs != 0 || m.omod != 0 || m.op_sel != 0 {
        return Err(ExecErrorKind::Unimplemented);
    }
    let clamp = m.clamp;
    let (a, b) = (w.src32(&src(e, 0)?)?, w.src32(&src(e, 1)?)?);
    let r = lanes_map2(a, b, |x, y| match f(x, y) {
        (_, true) if clamp => sat,
        (v, _) => v,
    });
    w.set_v32(&dst(e)?, &r)?;
    NEXT
}

/// `v_add_i32`, `v_sub_i32` (VOP3): wrapping, or with `clamp` saturated to the signed range.
fn vaddsub_i32(w: &mut Wave, e: &Exe, f: impl Fn(i32, i32) -> (i32, bool)) -> R {
    let m = &e.inst.mods;
    if m.neg != 0 || m.abs != 0 || m.omod != 0 || m.op_sel != 0 {
        return Err(ExecErrorKind::Unimplemented);
    }
    let clamp = m.clamp;
    let (a, b) = (w.src32(&src(e, 0)?)?, w.src32(&src(e, 1)?)?);
    let r = lanes_map2(a, b, |x, y| match f(x as i32, y as i32) {
        // Overflow toward the sign the true result has: the wrapped one's opposite.
        (v, true) if clamp => (if v < 0 { i32::MAX } else { i32::MIN }) as u32,
        (v, _) => v as u32,
    });
    w.set_v32(&dst(e)?, &r)?;
    NEXT
}

/// `v_swap_b32 D, S`: the two VGPRs exchange their EXEC lanes.
fn vswap(w: &mut Wave, e: &Exe, _g: &mut Group<'_>) -> R {
    int_mods(e)?;
    let (d, s) = (dst(e)?, src(e, 0)?);
    let (dv, sv) = (w.v32(&d)?, w.v32(&s)?);
    let exec = w.exec;
    w.set_v32k(&d, 0, &sv, exec)?;
    w.set_v32k(&s, 0, &dv, exec)?;
    NEXT
}

fn vop1_u32(w: &mut Wave, e: &Exe, f: impl Fn(u32) -> u32) -> R {
    int_mods(e)?;
    let a = w.src32(&src(e, 0)?)?;
    if let Src::Splat(x) = a {
        // A scalar source (`v_mov_b32 v1, s1`): one value into the EXEC lanes.
        let exec = w.exec;
        w.fill_v32(&dst(e)?, f(x), exec)?;
        return NEXT;
    }
    let r: Lanes = per_lane(|l| f(a.at(l)));
    w.set_v32(&dst(e)?, &r)?;
    NEXT
}

fn vop3_u32(w: &mut Wave, e: &Exe, f: impl Fn(u32, u32, u32) -> u32) -> R {
    int_mods(e)?;
    let (a, b, c) = (w.src32(&src(e, 0)?)?, w.src32(&src(e, 1)?)?, w.src32(&src(e, 2)?)?);
    let r: Lanes = per_lane(|l| f(a.at(l), b.at(l), c.at(l)));
    w.set_v32(&dst(e)?, &r)?;
    NEXT
}

/// 64-bit shifts: `D = f(S1 (64-bit), S0 (shift))`.
fn vshift64(w: &mut Wave, e: &Exe, f: impl Fn(u64, u32) -> u64) -> R {
    int_mods(e)?;
    let s = w.src32(&src(e, 0)?)?;
    let v = w.src64(&src(e, 1)?, Ty::B64)?;
    let r: Lanes64 = per_lane(|l| f(v.at(l), s.at(l) & 63));
    w.set_v64(&dst(e)?, &r)?;
    NEXT
}

/// gfx940's `v_mov_b64` (VOP1, VOP3, DPP64; docs/executor.md §8): a 64-bit move.
fn vmov64(w: &mut Wave, e: &Exe, _: &mut Group<'_>) -> R {
    int_mods(e)?;
    let v = w.v64(&src(e, 0)?, Ty::B64)?;
    w.set_v64(&dst(e)?, &v)?;
    NEXT
}

/// gfx940's `v_lshl_add_u64 D, S0, S1, S2` (docs/executor.md §8): D = (S0 << S1) + S2 in 64 bits.
/// The MI300 ISA defines shifts of 0–4 only (LLVM emits nothing else); any other shift is an
/// error rather than a guess.
fn vlshl_add64(w: &mut Wave, e: &Exe, _: &mut Group<'_>) -> R {
    int_mods(e)?;
    let a = w.v64(&src(e, 0)?, Ty::B64)?;
    let s = w.v32(&src(e, 1)?)?;
    let c = w.v64(&src(e, 2)?, Ty::B64)?;
    let exec = w.exec;
    if (0..LANES).any(|l| exec >> l & 1 != 0 && s[l] > 4) {
        return Err(ExecErrorKind::Unimplemented);
    }
    let r: Lanes64 = per_lane(|l| (a[l] << (s[l] & 7)).wrapping_add(c[l]));
    w.set_v64(&dst(e)?, &r)?;
    NEXT
}

/// Packs 64 per-lane 0/1 bytes into a lane mask (bit `l` = `bits[l]`): eight lanes per
/// multiply (lane 8k + 7 in the low byte, so the product's top byte holds the eight bits in
/// lane order) instead of one shift and or per lane (docs/executor.md §6 "speed").
#[inline(always)]
fn pack_mask(bits: &[u8; LANES]) -> u64 {
    let mut m = 0u64;
    for (k, c) in bits.chunks_exact(8).enumerate() {
        let x = u64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        m |= (x.wrapping_mul(0x8040_2010_0804_0201) >> 56) << (8 * k);
    }
    m
}

/// A lane mask as 64 per-lane 0/1 bytes (byte `l` = bit `l`), `pack_mask`'s inverse: eight
/// lanes per multiply (the mask's byte copied into every byte, each byte keeping its own bit,
/// then each nonzero byte turned into 1) instead of a variable shift per lane, which the lane
/// loops reading it cannot vectorise (docs/executor.md §6 "speed").
#[inline(always)]
fn unpack_mask(m: u64) -> [u8; LANES] {
    let mut r = [0u8; LANES];
    for (k, c) in r.chunks_exact_mut(8).enumerate() {
        let y = ((m >> (8 * k)) & 0xFF).wrapping_mul(0x0101_0101_0101_0101) & 0x8040_2010_0804_0201;
        // Each byte is 0 or one bit (at most 0x80): adding 0x7F sets its top bit exactly when
        // it is nonzero, without a carry into the next byte.
        let v = ((y + 0x7F7F_7F7F_7F7F_7F7F) & 0x8080_8080_8080_8080) >> 7;
        c.copy_from_slice(&v.to_le_bytes());
    }
    r
}

/// Add/subtract with carry-out (and carry-in): `f(a, b, cin) -> (result, cout)`.
fn vcarry(w: &mut Wave, e: &Exe, cin: bool, f: impl Fn(u32, u32, u32) -> (u32, bool)) -> R {
    int_mods(e)?;
    let (a, b) = (w.src32(&src(e, 0)?)?, w.src32(&src(e, 1)?)?);
    let c = if cin { unpack_mask(w.s64(&mask_in(e)?, Ty::B64)?) } else { [0; LANES] };
    let exec = w.exec;
    let mut out = [0u32; LANES];
    let mut carries = [0u8; LANES];
    // Branch-free: every lane's carry, packed into the mask, then EXEC applied once.
    for l in 0..LANES {
        let (r, carry) = f(a.at(l), b.at(l), u32::from(c[l]));
        out[l] = r;
        carries[l] = u8::from(carry);
    }
    w.set_v32(&dst(e)?, &out)?;
    w.set_s64(&carry_out(e)?, pack_mask(&carries) & exec)?;
    NEXT
}

fn vcndmask(w: &mut Wave, e: &Exe, _g: &mut Group<'_>) -> R {
    // Float abs/neg on the sources of the VOP3 form.
    let m = e.inst.mods;
    if m.clamp || m.omod != 0 {
        return Err(ExecErrorKind::Unimplemented);
    }
    let (a, b) = (w.src32(&src(e, 0)?)?, w.src32(&src(e, 1)?)?);
    // abs clears, neg flips the sign bit of source k.
    let bits = |k: u32| {
        (if m.abs >> k & 1 != 0 { 0x7FFF_FFFF } else { u32::MAX }, if m.neg >> k & 1 != 0 { 0x8000_0000 } else { 0 })
    };
    let ((and_a, xor_a), (and_b, xor_b)) = (bits(0), bits(1));
    let mask = w.s64(&mask_in(e)?, Ty::B64)?;
    let r: Lanes = per_lane(|l| if mask >> l & 1 != 0 { (b.at(l) & and_b) ^ xor_b } else { (a.at(l) & and_a) ^ xor_a });
    w.set_v32(&dst(e)?, &r)?;
    NEXT
}

fn vmad64(w: &mut Wave, e: &Exe, signed: bool) -> R {
    if e.inst.mods.clamp {
        return Err(ExecErrorKind::Unimplemented);
    }
    let (a, b) = (w.v32(&src(e, 0)?)?, w.v32(&src(e, 1)?)?);
    let c = w.v64(&src(e, 2)?, Ty::B64)?;
    let exec = w.exec;
    let mut out = [0u64; LANES];
    let mut co = 0u64;
    for l in 0..LANES {
        let (r, carry) = if signed {
            let p = i128::from(a[l] as i32) * i128::from(b[l] as i32) + i128::from(c[l] as i64);
            (p as u64, p != i128::from(p as i64))
        } else {
            let p = u128::from(a[l]) * u128::from(b[l]) + u128::from(c[l]);
            (p as u64, p >> 64 != 0)
        };
        out[l] = r;
        if carry && exec >> l & 1 != 0 {
            co |= 1 << l;
        }
    }
    w.set_v64(&dst(e)?, &out)?;
    w.set_s64(&carry_out(e)?, co)?;
    NEXT
}

/// `v_pk_mov_b32 D, S0, S1 op_sel:[a,b]`: D.lo = S0 dword a, D.hi = S1 dword b (register
/// pairs, or the constant 0; other constants are not honoured yet).
fn pk_mov(w: &mut Wave, e: &Exe, _g: &mut Group<'_>) -> R {
    let m = e.inst.mods;
    if m.neg != 0 || m.abs != 0 || m.clamp || m.op_sel & !3 != 0 {
        return Err(ExecErrorKind::Unimplemented);
    }
    let part = |w: &Wave, o: Operand, k: u8| -> Result<Lanes, ExecErrorKind> {
        match o {
            Operand::Int(0) => Ok([0; LANES]),
            Operand::Vgpr { .. } | Operand::Agpr { .. } | Operand::Sgpr { .. } | Operand::Ttmp { .. } => w.v32k(&o, k),
            _ => Err(ExecErrorKind::Unimplemented),
        }
    };
    let lo = part(w, src(e, 0)?, m.op_sel & 1)?;
    let hi = part(w, src(e, 1)?, (m.op_sel >> 1) & 1)?;
    let d = dst(e)?;
    let exec = w.exec;
    w.set_v32k(&d, 0, &lo, exec)?;
    w.set_v32k(&d, 1, &hi, exec)?;
    NEXT
}

fn readfirstlane(w: &mut Wave, e: &Exe, _g: &mut Group<'_>) -> R {
    let a = w.v32(&src(e, 0)?)?;
    let lane = if w.exec == 0 { 0 } else { w.exec.trailing_zeros() as usize };
    w.set_s32(&dst(e)?, a[lane])?;
    NEXT
}

fn readlane(w: &mut Wave, e: &Exe, _g: &mut Group<'_>) -> R {
    let a = w.v32(&src(e, 0)?)?;
    let lane = (w.s32(&src(e, 1)?)? & 63) as usize;
    w.set_s32(&dst(e)?, a[lane])?;
    NEXT
}

fn writelane(w: &mut Wave, e: &Exe, _g: &mut Group<'_>) -> R {
    let v = w.s32(&src(e, 0)?)?;
    let lane = (w.s32(&src(e, 1)?)? & 63) as usize;
    let mut cur = w.v32(&dst(e)?)?;
    cur[lane] = v;
    w.set_v32k(&dst(e)?, 0, &cur, 1 << lane)?;
    NEXT
}

fn mbcnt(w: &mut Wave, e: &Exe, hi: bool) -> R {
    int_mods(e)?;
    let (a, b) = (w.v32(&src(e, 0)?)?, w.v32(&src(e, 1)?)?);
    let r: Lanes = per_lane(|l| {
        let below = if hi {
            let n = l.saturating_sub(32);
            if l < 32 {
                0
            } else {
                u64::from(a[l]) & ((1u64 << n) - 1)
            }
        } else {
            let n = l.min(32);
            u64::from(a[l]) & ((1u64 << n) - 1)
        };
        (below.count_ones()).wrapping_add(b[l])
    });
    w.set_v32(&dst(e)?, &r)?;
    NEXT
}

// ---------------------------------------------------------------------------------------------
// vector ALU: floating point

/// The f32 environment MODE asks for: `Err` if it is one the executor does not honour.
#[derive(Clone, Copy)]
pub(crate) struct F32Mode {
    flush_in: bool,
    flush_out: bool,
}

pub(crate) fn f32_mode(w: &Wave) -> Result<F32Mode, ExecErrorKind> {
    // The f32 operations left here (min/max, compares, the integer roundings, conversions to
    // integers and of bytes) are exact, so MODE's rounding field does not change them; the
    // rounding ones are in `float.rs`.
    let d = (w.mode >> 4) & 3;
    Ok(F32Mode { flush_in: d & 1 == 0, flush_out: d & 2 == 0 })
}

fn flush(x: f32) -> f32 {
    if x.is_subnormal() {
        f32::from_bits(x.to_bits() & 0x8000_0000)
    } else {
        x
    }
}

/// Float source `n` with abs/neg applied and input denormals flushed as MODE says.
fn fsrc(w: &Wave, e: &Exe, n: usize, m: F32Mode) -> Result<[f32; LANES], ExecErrorKind> {
    let v = w.v32(&src(e, n)?)?;
    let mods = e.inst.mods;
    let (abs, neg) = (mods.abs >> n & 1 != 0, mods.neg >> n & 1 != 0);
    Ok(per_lane(|l| {
        let mut b = v[l];
        if abs {
            b &= 0x7FFF_FFFF;
        }
        if neg {
            b ^= 0x8000_0000;
        }
        let x = f32::from_bits(b);
        if m.flush_in {
            flush(x)
        } else {
            x
        }
    }))
}

/// omod, clamp and output flushing.
pub(crate) fn fout(e: &Exe, m: F32Mode, x: f32) -> u32 {
    let mods = e.inst.mods;
    let mut x = match mods.omod {
        1 => x * 2.0,
        2 => x * 4.0,
        3 => x * 0.5,
        _ => x,
    };
    if mods.clamp {
        // clamp to [0, 1]; NaN becomes 0 (DX10_CLAMP).
        x = if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) };
    }
    if m.flush_out {
        x = flush(x);
    }
    x.to_bits()
}

fn vop2_f32(w: &mut Wave, e: &Exe, f: impl Fn(f32, f32) -> f32) -> R {
    let m = f32_mode(w)?;
    let (a, b) = (fsrc(w, e, 0, m)?, fsrc(w, e, 1, m)?);
    let r: Lanes = per_lane(|l| fout(e, m, f(a[l], b[l])));
    w.set_v32(&dst(e)?, &r)?;
    NEXT
}

fn vop3_f32(w: &mut Wave, e: &Exe, f: impl Fn(f32, f32, f32) -> f32) -> R {
    let m = f32_mode(w)?;
    let (a, b, c) = (fsrc(w, e, 0, m)?, fsrc(w, e, 1, m)?, fsrc(w, e, 2, m)?);
    let r: Lanes = per_lane(|l| fout(e, m, f(a[l], b[l], c[l])));
    w.set_v32(&dst(e)?, &r)?;
    NEXT
}

/// Fused multiply-add of f32, rounded once (the exact product in f64, the sum rounded to odd
/// in f64, then to f32: correct rounding without a hardware FMA).
#[inline(always)]
pub(crate) fn fma_f32(a: f32, b: f32, c: f32) -> f32 {
    let p = f64::from(a) * f64::from(b); // exact: 48 significant bits
    let c = f64::from(c);
    let s = p + c;
    // The f64 sum rounds to the same f32 as the exact value unless it lies exactly halfway
    // between two f32s (bits 28:0 = 1 << 28) or in f32's subnormal range (fewer bits kept).
    // Integer tests only, so the lane loop stays branch-light; |s| >= 2^-126 (f64 bits
    // 0x3810…) also admits infinities and NaNs, which convert as they are.
    let bits = s.to_bits();
    if bits & 0x1FFF_FFFF != 0x1000_0000 && bits & !(1 << 63) >= 0x3810_0000_0000_0000 {
        return s as f32;
    }
    fma_f32_exact(p, c, s)
}

/// The rare cases of [`fma_f32`]: the sum's error recovered and the sum rounded to odd.
#[inline(never)]
fn fma_f32_exact(p: f64, c: f64, s: f64) -> f32 {
    if !s.is_finite() || p == 0.0 || c == 0.0 {
        return s as f32;
    }
    // TwoSum: s + err == p + c exactly.
    let bp = s - c;
    let bc = s - bp;
    let err = (p - bp) + (c - bc);
    let mut bits = s.to_bits();
    if err != 0.0 && bits & 1 == 0 {
        // Round to odd: move one ulp towards the exact value.
        let towards_zero = (err < 0.0) == (s > 0.0);
        bits = if towards_zero { bits - 1 } else { bits + 1 };
    }
    f64::from_bits(bits) as f32
}

/// IEEE-754 minNum/maxNum as the VALU does them in IEEE mode: a NaN operand yields the other.
fn fmin(a: f32, b: f32) -> f32 {
    if a.is_nan() {
        return quiet(b);
    }
    if b.is_nan() {
        return quiet(a);
    }
    if a == b {
        // -0 < +0
        return if a.is_sign_negative() { a } else { b };
    }
    if a < b {
        a
    } else {
        b
    }
}

fn fmax(a: f32, b: f32) -> f32 {
    if a.is_nan() {
        return quiet(b);
    }
    if b.is_nan() {
        return quiet(a);
    }
    if a == b {
        return if a.is_sign_negative() { b } else { a };
    }
    if a > b {
        a
    } else {
        b
    }
}

fn quiet(x: f32) -> f32 {
    if x.is_nan() {
        f32::from_bits(x.to_bits() | 0x0040_0000)
    } else {
        x
    }
}

fn vop1_f32(w: &mut Wave, e: &Exe, f: impl Fn(f32) -> f32) -> R {
    let m = f32_mode(w)?;
    let a = fsrc(w, e, 0, m)?;
    let r: Lanes = per_lane(|l| fout(e, m, f(a[l])));
    w.set_v32(&dst(e)?, &r)?;
    NEXT
}

/// Conversions from f32 to integers (saturating; NaN → 0, as Rust's `as`).
fn vcvt_from_f32(w: &mut Wave, e: &Exe, f: impl Fn(f32) -> u32) -> R {
    let m = f32_mode(w)?;
    if e.inst.mods.clamp || e.inst.mods.omod != 0 {
        return Err(ExecErrorKind::Unimplemented);
    }
    let a = fsrc(w, e, 0, m)?;
    let r: Lanes = per_lane(|l| f(a[l]));
    w.set_v32(&dst(e)?, &r)?;
    NEXT
}

fn vcvt_to_f32(w: &mut Wave, e: &Exe, f: impl Fn(u32) -> f32) -> R {
    let m = f32_mode(w)?;
    if e.inst.mods.neg != 0 || e.inst.mods.abs != 0 {
        return Err(ExecErrorKind::Unimplemented);
    }
    let a = w.v32(&src(e, 0)?)?;
    let r: Lanes = per_lane(|l| fout(e, m, f(a[l])));
    w.set_v32(&dst(e)?, &r)?;
    NEXT
}

fn fsrc64(w: &Wave, e: &Exe, n: usize) -> Result<[f64; LANES], ExecErrorKind> {
    let v = w.v64(&src(e, n)?, Ty::F64)?;
    let mods = e.inst.mods;
    let (abs, neg) = (mods.abs >> n & 1 != 0, mods.neg >> n & 1 != 0);
    Ok(per_lane(|l| {
        let mut b = v[l];
        if abs {
            b &= !(1 << 63);
        }
        if neg {
            b ^= 1 << 63;
        }
        f64::from_bits(b)
    }))
}

// ---------------------------------------------------------------------------------------------
// vector compares

/// Integer condition codes (aux bits 3:0): f lt eq le gt ne ge t.
pub(super) fn int_cond(c: u32, ord: core::cmp::Ordering) -> bool {
    use core::cmp::Ordering::*;
    match c {
        0 => false,
        1 => ord == Less,
        2 => ord == Equal,
        3 => ord != Greater,
        4 => ord == Greater,
        5 => ord != Equal,
        6 => ord != Less,
        _ => true,
    }
}

/// Float condition codes: f lt eq le gt lg ge o u nge nlg ngt nle neq nlt tru.
pub(super) fn float_cond(c: u32, ord: Option<core::cmp::Ordering>) -> bool {
    use core::cmp::Ordering::*;
    match c {
        0 => false,
        1 => ord == Some(Less),
        2 => ord == Some(Equal),
        3 => matches!(ord, Some(Less | Equal)),
        4 => ord == Some(Greater),
        5 => matches!(ord, Some(Less | Greater)),
        6 => matches!(ord, Some(Greater | Equal)),
        7 => ord.is_some(),
        8 => ord.is_none(),
        9 => !matches!(ord, Some(Greater | Equal)),
        10 => !matches!(ord, Some(Less | Greater)),
        11 => ord != Some(Greater),
        12 => !matches!(ord, Some(Less | Equal)),
        13 => ord != Some(Equal),
        14 => ord != Some(Less),
        _ => true,
    }
}

/// Compare types (aux bits 7:4).
const CMP_I32: u32 = 0;
const CMP_U32: u32 = 1;
const CMP_I64: u32 = 2;
const CMP_U64: u32 = 3;
const CMP_F32: u32 = 4;
const CMP_F64: u32 = 5;
/// aux bit 8: `v_cmpx` (also writes EXEC).
pub(super) const CMPX: u32 = 1 << 8;

fn vcmp(w: &mut Wave, e: &Exe, _g: &mut Group<'_>) -> R {
    let cond = e.aux & 15;
    let ty = (e.aux >> 4) & 15;
    let m = e.inst.mods;
    if m.clamp || m.omod != 0 || (ty < CMP_F32 && (m.neg != 0 || m.abs != 0)) {
        return Err(ExecErrorKind::Unimplemented);
    }
    let (s0, s1) = (src(e, 0)?, src(e, 1)?);
    let mut bits = 0u64;
    match ty {
        CMP_I32 | CMP_U32 => {
            let (a, b) = (w.src32(&s0)?, w.src32(&s1)?);
            // Signed compares as unsigned ones with the sign bit flipped; the condition's truth
            // table as three 0/1 bytes, applied to each lane's less / equal / greater bytes
            // with ands and ors, into one byte array and one `pack_mask` (two arrays packed
            // apart cost twice the instructions, docs/executor.md §6 "speed").
            let flip = if ty == CMP_I32 { 0x8000_0000 } else { 0 };
            let want = |o: core::cmp::Ordering| u8::from(int_cond(cond, o));
            let (wl, we, wg) =
                (want(core::cmp::Ordering::Less), want(core::cmp::Ordering::Equal), want(core::cmp::Ordering::Greater));
            let mut res = [0u8; LANES];
            for l in 0..LANES {
                let (x, y) = (a.at(l) ^ flip, b.at(l) ^ flip);
                let (lt, gt) = (u8::from(x < y), u8::from(x > y));
                let eq = 1 ^ (lt | gt);
                res[l] = (lt & wl) | (eq & we) | (gt & wg);
            }
            bits = pack_mask(&res);
        }
        CMP_I64 | CMP_U64 => {
            let (a, b) = (w.src64(&s0, Ty::B64)?, w.src64(&s1, Ty::B64)?);
            let flip = if ty == CMP_I64 { 1 << 63 } else { 0 };
            for l in 0..LANES {
                let ord = (a.at(l) ^ flip).cmp(&(b.at(l) ^ flip));
                bits |= u64::from(int_cond(cond, ord)) << l;
            }
        }
        CMP_F32 => {
            // Compares do not flush denormals on input only when MODE keeps them; flushing
            // cannot change an ordering except between a denormal and zero.
            let md = f32_mode(w)?;
            let (a, b) = (fsrc(w, e, 0, md)?, fsrc(w, e, 1, md)?);
            for l in 0..LANES {
                bits |= u64::from(float_cond(cond, a[l].partial_cmp(&b[l]))) << l;
            }
        }
        CMP_F64 => {
            if (w.mode >> 6) & 3 != 3 {
                return Err(ExecErrorKind::Unimplemented);
            }
            let (a, b) = (fsrc64(w, e, 0)?, fsrc64(w, e, 1)?);
            for l in 0..LANES {
                bits |= u64::from(float_cond(cond, a[l].partial_cmp(&b[l]))) << l;
            }
        }
        _ => return Err(ExecErrorKind::Unimplemented),
    }
    bits &= w.exec;
    w.set_s64(&op(e, 0)?, bits)?;
    if e.aux & CMPX != 0 {
        w.exec = bits;
    }
    NEXT
}

// ---------------------------------------------------------------------------------------------
// vector memory

/// aux for loads and stores: bytes (bits 7:0), sign-extend (bit 8).
pub(crate) const SIGNED: u32 = 1 << 8;

/// Where a FLAT/GLOBAL lane's address points.
enum Target {
    Global(u64),
    Lds(u32),
    /// A private address of the lane's scratch (docs/executor.md §5, `memory.rs`).
    Private(u32),
}

/// The operands of a FLAT/GLOBAL instruction: (vdst, addr, data, saddr).
pub(crate) fn flat_parts(e: &Exe, returns: bool) -> (Option<Operand>, Operand, Option<Operand>, Option<Operand>) {
    let o = e.inst.operands();
    let mut i = 0;
    let mut next = || {
        let v = o.get(i).copied().unwrap_or(Operand::Off);
        i += 1;
        v
    };
    let vdst = returns.then(&mut next);
    let addr = next();
    let data = has_field(e, Field::Data0).then(&mut next);
    let saddr = (e.inst.encoding() != Encoding::Flat).then(next);
    (vdst, addr, data, saddr)
}

/// Per-lane addresses of a FLAT/GLOBAL access (inlined: the array is built in the caller's
/// frame, not copied out of a `Result`).
#[inline(always)]
pub(crate) fn flat_addrs(w: &Wave, e: &Exe, addr: &Operand, saddr: Option<Operand>) -> Result<Lanes64, ExecErrorKind> {
    let mut out = [0u64; LANES];
    flat_addrs_into(w, e, addr, saddr, &mut out)?;
    Ok(out)
}

/// [`flat_addrs`] into `out` (the work-group's `Group::addrs` on the GLOBAL paths: the
/// 512-byte array neither returned nor copied, docs/executor.md §6 "speed").
#[inline(always)]
pub(crate) fn flat_addrs_into(
    w: &Wave,
    e: &Exe,
    addr: &Operand,
    saddr: Option<Operand>,
    out: &mut Lanes64,
) -> Result<(), ExecErrorKind> {
    let off = e.inst.mods.offset as i64 as u64;
    match saddr {
        Some(s @ (Operand::Sgpr { .. } | Operand::Ttmp { .. } | Operand::Special { .. })) => {
            let base = w.s64(&s, Ty::B64)?;
            match w.src32(addr)? {
                Src::Splat(v) => out.fill(base.wrapping_add(u64::from(v)).wrapping_add(off)),
                Src::Lanes(v) => {
                    for (o, x) in out.iter_mut().zip(v.iter()) {
                        *o = base.wrapping_add(u64::from(*x)).wrapping_add(off);
                    }
                }
            }
        }
        _ => match w.src64(addr, Ty::B64)? {
            Src64::Splat(v) => out.fill(v.wrapping_add(off)),
            Src64::Pair(lo, hi) => {
                for l in 0..LANES {
                    out[l] = (u64::from(lo[l]) | u64::from(hi[l]) << 32).wrapping_add(off);
                }
            }
        },
    }
    Ok(())
}

fn target(e: &Exe, a: u64) -> Result<Target, ExecErrorKind> {
    if e.inst.encoding() == Encoding::Flat {
        if (SHARED_APERTURE..SHARED_APERTURE + (1 << 32)).contains(&a) {
            return Ok(Target::Lds((a - SHARED_APERTURE) as u32));
        }
        if (PRIVATE_APERTURE..PRIVATE_APERTURE + (1 << 32)).contains(&a) {
            return Ok(Target::Private((a - PRIVATE_APERTURE) as u32));
        }
    }
    Ok(Target::Global(a))
}

fn lds_range(g: &Group<'_>, at: u32, n: usize) -> Result<core::ops::Range<usize>, ExecErrorKind> {
    let s = at as usize;
    let end = s.checked_add(n).ok_or(ExecErrorKind::LdsOutOfRange(at))?;
    if end > g.lds.len() {
        return Err(ExecErrorKind::LdsOutOfRange(at));
    }
    Ok(s..end)
}

pub(crate) fn lds_read(g: &Group<'_>, at: u32, out: &mut [u8]) -> Result<(), ExecErrorKind> {
    let r = lds_range(g, at, out.len())?;
    out.copy_from_slice(g.lds.get(r).ok_or(ExecErrorKind::LdsOutOfRange(at))?);
    Ok(())
}

pub(crate) fn lds_write(g: &mut Group<'_>, at: u32, data: &[u8]) -> Result<(), ExecErrorKind> {
    let r = lds_range(g, at, data.len())?;
    g.lds.get_mut(r).ok_or(ExecErrorKind::LdsOutOfRange(at))?.copy_from_slice(data);
    Ok(())
}

fn widen(buf: &[u8; 16], n: usize, signed: bool) -> u32 {
    match (n, signed) {
        (1, false) => u32::from(buf[0]),
        (1, true) => buf[0] as i8 as i32 as u32,
        (2, false) => u32::from(u16::from_le_bytes([buf[0], buf[1]])),
        (2, true) => u16::from_le_bytes([buf[0], buf[1]]) as i16 as i32 as u32,
        _ => u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]),
    }
}

fn dword(buf: &[u8; 16], k: usize) -> u32 {
    let b = |i: usize| buf.get(4 * k + i).copied().unwrap_or(0);
    u32::from_le_bytes([b(0), b(1), b(2), b(3)])
}

fn flat_load(w: &mut Wave, e: &Exe, g: &mut Group<'_>) -> R {
    let (vdst, addr, _, saddr) = flat_parts(e, true);
    let vdst = vdst.ok_or(ExecErrorKind::Unimplemented)?;
    if e.inst.mods.gds_lds {
        return Err(ExecErrorKind::Unimplemented);
    }
    let n = (e.aux & 0xFF) as usize;
    let signed = e.aux & SIGNED != 0;
    let dwords = n.div_ceil(4);
    let exec = w.exec;
    if n % 4 == 0 && e.inst.encoding() != Encoding::Flat {
        // GLOBAL dwords: the addresses in the work-group's buffer, one gather into the wave's
        // (docs/executor.md §6 "speed").
        flat_addrs_into(w, e, &addr, saddr, &mut g.addrs)?;
        // Straight into the destination when four registers from its first lie in its file
        // (`gather` writes only the mask's lanes of the first `dwords`; a fault ends the
        // dispatch, so a partly written destination is never seen), else through the wave's
        // buffer: no 256-byte copy per dword (docs/executor.md §6 "speed").
        if let Some(regs) = w.vregs4_mut(&vdst) {
            g.mem.gather(&g.addrs, exec, dwords, regs).map_err(fault)?;
            return NEXT;
        }
        g.mem.gather(&g.addrs, exec, dwords, &mut w.mem_buf).map_err(fault)?;
        w.set_from_buf(&vdst, dwords, exec)?;
        return NEXT;
    }
    let addrs = flat_addrs(w, e, &addr, saddr)?;
    let mut out = [[0u32; LANES]; 4];
    for l in 0..LANES {
        if exec >> l & 1 == 0 {
            continue;
        }
        let mut buf = [0u8; 16];
        let b = buf.get_mut(..n).ok_or(ExecErrorKind::Unimplemented)?;
        match target(e, addrs[l])? {
            Target::Global(a) => g.mem.load(a, b).map_err(fault)?,
            Target::Lds(a) => lds_read(g, a, b)?,
            Target::Private(p) => memory::private_load(g, w.flat_scratch, l, p, b)?,
        }
        if n < 4 {
            out[0][l] = widen(&buf, n, signed);
        } else {
            for (k, o) in out.iter_mut().enumerate().take(dwords) {
                o[l] = dword(&buf, k);
            }
        }
    }
    for (k, o) in out.iter().enumerate().take(dwords) {
        w.set_v32k(&vdst, k, o, exec)?;
    }
    NEXT
}

fn flat_store(w: &mut Wave, e: &Exe, g: &mut Group<'_>) -> R {
    let (_, addr, data, saddr) = flat_parts(e, false);
    let data = data.ok_or(ExecErrorKind::Unimplemented)?;
    let n = (e.aux & 0xFF) as usize;
    let dwords = n.div_ceil(4);
    let exec = w.exec;
    if n % 4 == 0 && e.inst.encoding() != Encoding::Flat {
        flat_addrs_into(w, e, &addr, saddr, &mut g.addrs)?;
        let addrs = &g.addrs;
        // GLOBAL dwords: one scatter, from the registers themselves when four of them from
        // the data's first lie in its file (`scatter` reads the first `dwords`), else from the
        // data staged in the wave's buffer (docs/executor.md §6 "speed").
        if let Some(regs) = w.vregs4(&data) {
            g.mem.scatter(addrs, exec, dwords, regs).map_err(fault)?;
            return NEXT;
        }
        for k in 0..dwords.min(4) {
            w.buf_from(&data, k as u8)?;
        }
        g.mem.scatter(addrs, exec, dwords, &w.mem_buf).map_err(fault)?;
        return NEXT;
    }
    let addrs = flat_addrs(w, e, &addr, saddr)?;
    let mut vals = [[0u32; LANES]; 4];
    for (k, v) in vals.iter_mut().enumerate().take(dwords) {
        *v = w.src32k(&data, k as u8)?.lanes();
    }
    for l in 0..LANES {
        if exec >> l & 1 == 0 {
            continue;
        }
        let mut buf = [0u8; 16];
        for k in 0..dwords {
            buf[4 * k..4 * k + 4].copy_from_slice(&vals[k][l].to_le_bytes());
        }
        let b = buf.get(..n).ok_or(ExecErrorKind::Unimplemented)?;
        match target(e, addrs[l])? {
            Target::Global(a) => g.mem.store(a, b).map_err(fault)?,
            Target::Lds(a) => lds_write(g, a, b)?,
            Target::Private(p) => memory::private_store(g, w.flat_scratch, l, p, b)?,
        }
    }
    NEXT
}

/// aux for atomics: the operation's index in [`ATOMIC_OPS`] (bits 7:0), bytes (bits 15:8).
const ATOMIC_OPS: [AtomicOp; 25] = [
    AtomicOp::Swap,
    AtomicOp::CmpSwap,
    AtomicOp::Add,
    AtomicOp::Sub,
    AtomicOp::MinI,
    AtomicOp::MinU,
    AtomicOp::MaxI,
    AtomicOp::MaxU,
    AtomicOp::And,
    AtomicOp::Or,
    AtomicOp::Xor,
    AtomicOp::Inc,
    AtomicOp::Dec,
    AtomicOp::AddF32,
    AtomicOp::AddF64,
    AtomicOp::PkAddF16,
    AtomicOp::MinF64,
    AtomicOp::MaxF64,
    AtomicOp::PkAddBf16,
    AtomicOp::MinF32,
    AtomicOp::MaxF32,
    AtomicOp::Rsub,
    AtomicOp::MaskOr,
    AtomicOp::CmpStF,
    AtomicOp::Wrap,
];

pub(crate) fn atomic_aux(a: u32) -> Result<(AtomicOp, u8), ExecErrorKind> {
    let op = *ATOMIC_OPS.get((a & 0xFF) as usize).ok_or(ExecErrorKind::Unimplemented)?;
    Ok((op, ((a >> 8) & 0xFF) as u8))
}

fn flat_atomic(w: &mut Wave, e: &Exe, g: &mut Group<'_>) -> R {
    let (op, size) = atomic_aux(e.aux)?;
    let glc = e.inst.mods.glc;
    let (vdst, addr, data, saddr) = flat_parts(e, glc);
    let data = data.ok_or(ExecErrorKind::Unimplemented)?;
    let addrs = flat_addrs(w, e, &addr, saddr)?;
    let d64 = size == 8;
    let (val, cmp) = if d64 {
        let v = w.v64(&data, Ty::B64)?;
        let c = if op == AtomicOp::CmpSwap {
            let (lo, hi) = (w.v32k(&data, 2)?, w.v32k(&data, 3)?);
            per_lane(|l| u64::from(lo[l]) | u64::from(hi[l]) << 32)
        } else {
            [0; LANES]
        };
        (v, c)
    } else {
        let v = w.v32(&data)?;
        let c = if op == AtomicOp::CmpSwap { w.v32k(&data, 1)? } else { [0; LANES] };
        (per_lane(|l| u64::from(v[l])), per_lane(|l| u64::from(c[l])))
    };
    let exec = w.exec;
    let mut old = [0u64; LANES];
    for l in 0..LANES {
        if exec >> l & 1 == 0 {
            continue;
        }
        old[l] = match target(e, addrs[l])? {
            Target::Global(a) => g.mem.atomic(a, size, op, val[l], cmp[l]).map_err(fault)?,
            Target::Lds(a) => lds_atomic(g, a, size, op, val[l], cmp[l])?,
            Target::Private(p) => memory::private_atomic(g, w.flat_scratch, l, p, size, op, val[l], cmp[l])?,
        };
    }
    if let Some(d) = vdst {
        if d64 {
            w.set_v64(&d, &old)?;
        } else {
            let o: Lanes = per_lane(|l| old[l] as u32);
            w.set_v32(&d, &o)?;
        }
    }
    NEXT
}

pub(crate) fn lds_atomic(
    g: &mut Group<'_>,
    at: u32,
    size: u8,
    op: AtomicOp,
    v: u64,
    cmp: u64,
) -> Result<u64, ExecErrorKind> {
    if at % u32::from(size) != 0 {
        return Err(ExecErrorKind::LdsOutOfRange(at));
    }
    let n = usize::from(size).min(8);
    let mut b = [0u8; 8];
    lds_read(g, at, &mut b[..n])?;
    let old = u64::from_le_bytes(b);
    let new = op.apply(old, v, cmp, size);
    lds_write(g, at, &new.to_le_bytes()[..n])?;
    Ok(old)
}

// ---------------------------------------------------------------------------------------------
// LDS (DS)

/// aux for DS: bytes per element (bits 7:0), sign-extend (bit 8), two addresses (bit 9),
/// stride 64 (bit 10).
const DS_TWO: u32 = 1 << 9;
const DS_ST64: u32 = 1 << 10;

fn ds_addrs<'w>(w: &'w Wave, e: &Exe) -> Result<Src<'w>, ExecErrorKind> {
    if e.inst.mods.gds_lds {
        return Err(ExecErrorKind::Unimplemented);
    }
    w.src32(&field(e, Field::Addr, 0)?)
}

/// The (up to two) byte offsets of a DS access of elements of `n` bytes.
fn ds_offsets(e: &Exe, n: usize) -> [u32; 2] {
    let m = e.inst.mods;
    if e.aux & DS_TWO != 0 {
        let scale = n as u32 * if e.aux & DS_ST64 != 0 { 64 } else { 1 };
        [m.offset as u32 * scale, u32::from(m.offset1) * scale]
    } else {
        [m.offset as u32 & 0xFFFF, 0]
    }
}

/// `D` dwords per address of a DS read at `parts` (1 or 2) offsets, for the lanes of `exec` in
/// order into `out` (`parts × D` ≤ 4); the first address out of range ends it.
#[inline(always)]
fn ds_read_dwords<const D: usize>(
    lds: &[u8],
    addrs: Src<'_>,
    offs: [u32; 2],
    parts: usize,
    exec: u64,
    out: &mut [Lanes; 4],
) -> Result<(), ExecErrorKind> {
    let mut active = exec;
    while active != 0 {
        let l = active.trailing_zeros() as usize;
        active &= active - 1;
        for (part, off) in offs.iter().enumerate().take(parts) {
            let at = addrs.at(l).wrapping_add(*off);
            let s = at as usize;
            let src = s.checked_add(4 * D).and_then(|end| lds.get(s..end)).ok_or(ExecErrorKind::LdsOutOfRange(at))?;
            for k in 0..D {
                let c = [src[4 * k], src[4 * k + 1], src[4 * k + 2], src[4 * k + 3]];
                out[(part * D + k) & 3][l] = u32::from_le_bytes(c);
            }
        }
    }
    Ok(())
}

fn ds_read(w: &mut Wave, e: &Exe, g: &mut Group<'_>) -> R {
    let n = (e.aux & 0xFF) as usize;
    let signed = e.aux & SIGNED != 0;
    let two = e.aux & DS_TWO != 0;
    let addrs = ds_addrs(w, e)?;
    let offs = ds_offsets(e, n);
    let d = dst(e)?;
    let per = n.div_ceil(4);
    let mut out = [[0u32; LANES]; 4];
    let exec = w.exec;
    let total = if two { 2 * per } else { per };
    if n % 4 == 0 && total <= 4 {
        // Whole dwords, read in place, lane by lane over EXEC (the first lane out of range
        // ends it, as below).
        let (lds, parts) = (&g.lds[..], if two { 2 } else { 1 });
        match per {
            1 => ds_read_dwords::<1>(lds, addrs, offs, parts, exec, &mut out)?,
            2 => ds_read_dwords::<2>(lds, addrs, offs, parts, exec, &mut out)?,
            3 => ds_read_dwords::<3>(lds, addrs, offs, parts, exec, &mut out)?,
            _ => ds_read_dwords::<4>(lds, addrs, offs, parts, exec, &mut out)?,
        }
        for (k, o) in out.iter().enumerate().take(total) {
            w.set_v32k(&d, k, o, exec)?;
        }
        return NEXT;
    }
    for l in 0..LANES {
        if exec >> l & 1 == 0 {
            continue;
        }
        for (part, off) in offs.iter().enumerate().take(if two { 2 } else { 1 }) {
            let at = addrs.at(l).wrapping_add(*off);
            if n % 4 == 0 {
                // Whole dwords, read in place.
                let src = g.lds.get(lds_range(g, at, n)?).ok_or(ExecErrorKind::LdsOutOfRange(at))?;
                for (k, c) in src.chunks_exact(4).enumerate() {
                    if let Some(o) = out.get_mut(part * per + k) {
                        o[l] = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                    }
                }
                continue;
            }
            let mut buf = [0u8; 16];
            lds_read(g, at, buf.get_mut(..n).ok_or(ExecErrorKind::Unimplemented)?)?;
            if n < 4 {
                out[0][l] = widen(&buf, n, signed);
            } else {
                for k in 0..per {
                    if let Some(o) = out.get_mut(part * per + k) {
                        o[l] = dword(&buf, k);
                    }
                }
            }
        }
    }
    for (k, o) in out.iter().enumerate().take(total) {
        w.set_v32k(&d, k, o, exec)?;
    }
    NEXT
}

fn ds_write(w: &mut Wave, e: &Exe, g: &mut Group<'_>) -> R {
    let n = (e.aux & 0xFF) as usize;
    let two = e.aux & DS_TWO != 0;
    let addrs = ds_addrs(w, e)?;
    let offs = ds_offsets(e, n);
    let per = n.div_ceil(4);
    let mut datas = [[Src::Splat(0); 4]; 2];
    let fields = [Field::Data0, Field::Data1];
    for (part, f) in fields.iter().enumerate().take(if two { 2 } else { 1 }) {
        let o = field(e, *f, 0)?;
        for k in 0..per.min(4) {
            datas[part][k] = w.src32k(&o, k as u8)?;
        }
    }
    let exec = w.exec;
    for l in 0..LANES {
        if exec >> l & 1 == 0 {
            continue;
        }
        for (part, off) in offs.iter().enumerate().take(if two { 2 } else { 1 }) {
            let at = addrs.at(l).wrapping_add(*off);
            if n % 4 == 0 {
                // Whole dwords, written in place.
                let r = lds_range(g, at, n)?;
                let dst = g.lds.get_mut(r).ok_or(ExecErrorKind::LdsOutOfRange(at))?;
                for (k, c) in dst.chunks_exact_mut(4).enumerate() {
                    c.copy_from_slice(&datas[part][k.min(3)].at(l).to_le_bytes());
                }
                continue;
            }
            let mut buf = [0u8; 16];
            for k in 0..per {
                buf[4 * k..4 * k + 4].copy_from_slice(&datas[part][k].at(l).to_le_bytes());
            }
            lds_write(g, at, buf.get(..n).ok_or(ExecErrorKind::Unimplemented)?)?;
        }
    }
    NEXT
}

fn ds_atomic(w: &mut Wave, e: &Exe, g: &mut Group<'_>) -> R {
    let (op, size) = atomic_aux(e.aux)?;
    let addrs = ds_addrs(w, e)?;
    let off = e.inst.mods.offset as u32 & 0xFFFF;
    let d64 = size == 8;
    let rd = |w: &Wave, f: Field| -> Result<Lanes64, ExecErrorKind> {
        let o = field(e, f, 0)?;
        if d64 {
            w.v64(&o, Ty::B64)
        } else {
            let v = w.v32(&o)?;
            Ok(per_lane(|l| u64::from(v[l])))
        }
    };
    // ds_cmpst: data0 is the compare value, data1 the new one; ds_mskor: data0 the mask,
    // data1 the bits; ds_wrap: data0 the bound, data1 the step.
    let (val, cmp) = if matches!(op, AtomicOp::CmpSwap | AtomicOp::CmpStF | AtomicOp::MaskOr | AtomicOp::Wrap) {
        (rd(w, Field::Data1)?, rd(w, Field::Data0)?)
    } else {
        (rd(w, Field::Data0)?, [0; LANES])
    };
    let exec = w.exec;
    let mut old = [0u64; LANES];
    for l in 0..LANES {
        if exec >> l & 1 != 0 {
            old[l] = lds_atomic(g, addrs.at(l).wrapping_add(off), size, op, val[l], cmp[l])?;
        }
    }
    if has_field(e, Field::Dst) {
        let d = dst(e)?;
        if d64 {
            w.set_v64(&d, &old)?;
        } else {
            let o: Lanes = per_lane(|l| old[l] as u32);
            w.set_v32(&d, &o)?;
        }
    }
    NEXT
}

/// `ds_wrxchg2[st64]_rtn_b32/_b64`: at each of the two offsets (scaled as `ds_write2`'s),
/// data0 and data1 replace the element, whose old values return in the destination's two
/// halves; lanes in order, each lane's first address before its second.
fn ds_wrxchg2(w: &mut Wave, e: &Exe, g: &mut Group<'_>) -> R {
    let n = (e.aux & 0xFF) as usize;
    let size = n as u8;
    let addrs = ds_addrs(w, e)?;
    let offs = ds_offsets(e, n);
    let per = n / 4;
    let rd = |w: &Wave, f: Field| -> Result<Lanes64, ExecErrorKind> {
        let o = field(e, f, 0)?;
        if per == 2 {
            w.v64(&o, Ty::B64)
        } else {
            let v = w.v32(&o)?;
            Ok(per_lane(|l| u64::from(v[l])))
        }
    };
    let data = [rd(w, Field::Data0)?, rd(w, Field::Data1)?];
    let exec = w.exec;
    let mut out = [[0u32; LANES]; 4];
    for l in 0..LANES {
        if exec >> l & 1 == 0 {
            continue;
        }
        for part in 0..2 {
            let at = addrs.at(l).wrapping_add(offs[part]);
            let old = lds_atomic(g, at, size, AtomicOp::Swap, data[part][l], 0)?;
            for k in 0..per {
                out[part * per + k][l] = (old >> (32 * k)) as u32;
            }
        }
    }
    let d = dst(e)?;
    for (k, o) in out.iter().enumerate().take(2 * per) {
        w.set_v32k(&d, k, o, exec)?;
    }
    NEXT
}

fn ds_bpermute(w: &mut Wave, e: &Exe, _g: &mut Group<'_>) -> R {
    let addrs = ds_addrs(w, e)?;
    let data = w.v32(&field(e, Field::Data0, 0)?)?;
    let off = e.inst.mods.offset as u32 & 0xFFFF;
    let exec = w.exec;
    let r: Lanes = per_lane(|l| {
        let from = ((addrs.at(l).wrapping_add(off) / 4) & 63) as usize;
        if exec >> from & 1 != 0 {
            data[from]
        } else {
            0
        }
    });
    w.set_v32(&dst(e)?, &r)?;
    NEXT
}

// ---------------------------------------------------------------------------------------------
// the table

/// The handler and parameter for an instruction, or `None` when the executor does not run it.
pub(crate) fn handler(inst: &Inst) -> Option<(Handler, u32)> {
    if inst.mods.ext != Ext::None {
        // DPP and SDWA forms wrap the base operation (exec/lanes.rs).
        let (_, aux) = handler_for_name(inst.op.name())?;
        return super::lanes::ext_handler(inst).map(|h| (h, aux));
    }
    handler_for_name(inst.op.name())
}

/// The base operation a DPP or SDWA form wraps (`Exe::inner`).
pub(crate) fn inner_handler(inst: &Inst) -> Option<Handler> {
    if inst.mods.ext == Ext::None {
        return None;
    }
    handler_for_name(inst.op.name()).map(|h| h.0)
}

fn cmp_aux(name: &str) -> Option<u32> {
    let (x, rest) =
        if let Some(r) = name.strip_prefix("v_cmpx_") { (CMPX, r) } else { (0, name.strip_prefix("v_cmp_")?) };
    let (cond, ty) = rest.split_once('_')?;
    let ty = match ty {
        "i32" => CMP_I32,
        "u32" => CMP_U32,
        "i64" => CMP_I64,
        "u64" => CMP_U64,
        "f32" => CMP_F32,
        "f64" => CMP_F64,
        _ => return None,
    };
    let conds: &[&str] = if ty >= CMP_F32 {
        &["f", "lt", "eq", "le", "gt", "lg", "ge", "o", "u", "nge", "nlg", "ngt", "nle", "neq", "nlt", "tru"]
    } else {
        &["f", "lt", "eq", "le", "gt", "ne", "ge", "t"]
    };
    let c = conds.iter().position(|c| *c == cond)? as u32;
    Some(c | ty << 4 | x)
}

pub(crate) fn atomic_op_aux(name: &str) -> Option<u32> {
    let (base, size) = match name.strip_suffix("_x2") {
        Some(b) => (b, 8),
        None => (name, 4),
    };
    let i = match base {
        "swap" => 0,
        "cmpswap" => 1,
        "add" => 2,
        "sub" => 3,
        "smin" => 4,
        "umin" => 5,
        "smax" => 6,
        "umax" => 7,
        "and" => 8,
        "or" => 9,
        "xor" => 10,
        "inc" => 11,
        "dec" => 12,
        "add_f32" => 13,
        "add_f64" => return Some(14 | 8 << 8),
        "pk_add_f16" => 15,
        "min_f64" => return Some(16 | 8 << 8),
        "max_f64" => return Some(17 | 8 << 8),
        // gfx940 (docs/executor.md §8).
        "pk_add_bf16" => 18,
        _ => return None,
    };
    Some(i | size << 8)
}

fn ds_atomic_aux(name: &str) -> Option<u32> {
    let base = name.strip_prefix("ds_")?;
    let base = base.replace("_rtn", "");
    let (op, ty) = base.rsplit_once('_')?;
    let size = match ty {
        // gfx940's ds_pk_add_f16/bf16: two 16-bit floats in one dword.
        "u32" | "i32" | "b32" | "f32" | "f16" | "bf16" => 4,
        "u64" | "i64" | "b64" | "f64" => 8,
        _ => return None,
    };
    let i = match (op, ty) {
        ("wrxchg", _) => 0,
        ("pk_add", "f16") => 15,
        ("pk_add", "bf16") => 18,
        ("cmpst", "b32" | "b64") => 1,
        ("add", "u32" | "u64") => 2,
        ("sub", "u32" | "u64") => 3,
        ("min", "i32" | "i64") => 4,
        ("min", "u32" | "u64") => 5,
        ("max", "i32" | "i64") => 6,
        ("max", "u32" | "u64") => 7,
        ("and", _) => 8,
        ("or", _) => 9,
        ("xor", _) => 10,
        ("inc", "u32" | "u64") => 11,
        ("dec", "u32" | "u64") => 12,
        ("add", "f32") => 13,
        ("add", "f64") => 14,
        ("min", "f64") => 16,
        ("max", "f64") => 17,
        ("min", "f32") => 19,
        ("max", "f32") => 20,
        ("rsub", "u32" | "u64") => 21,
        ("mskor", _) => 22,
        ("cmpst", "f32" | "f64") => 23,
        ("wrap", "b32") => 24,
        _ => return None,
    };
    Some(i | size << 8)
}

/// Handlers by mnemonic (the `_e32`/`_e64` suffix ignored).
pub(crate) fn handler_for_name(name: &str) -> Option<(Handler, u32)> {
    let base = name.strip_suffix("_e32").or_else(|| name.strip_suffix("_e64")).unwrap_or(name);
    if base.starts_with("v_cmp") {
        return cmp_aux(base).map(|a| (vcmp as Handler, a)).or_else(|| super::float::handler_for_name(base));
    }
    if base.starts_with("v_mfma") || base.starts_with("v_smfmac") {
        return super::lanes::mfma_handler(base);
    }
    for seg in ["flat_", "global_"] {
        if let Some(rest) = base.strip_prefix(seg) {
            if let Some(op) = rest.strip_prefix("atomic_") {
                return atomic_op_aux(op).map(|a| (flat_atomic as Handler, a));
            }
            let (h, aux): (Handler, u32) = match rest {
                "load_ubyte" => (flat_load, 1),
                "load_sbyte" => (flat_load, 1 | SIGNED),
                "load_ushort" => (flat_load, 2),
                "load_sshort" => (flat_load, 2 | SIGNED),
                "load_dword" => (flat_load, 4),
                "load_dwordx2" => (flat_load, 8),
                "load_dwordx3" => (flat_load, 12),
                "load_dwordx4" => (flat_load, 16),
                "store_byte" => (flat_store, 1),
                "store_short" => (flat_store, 2),
                "store_dword" => (flat_store, 4),
                "store_dwordx2" => (flat_store, 8),
                "store_dwordx3" => (flat_store, 12),
                "store_dwordx4" => (flat_store, 16),
                _ => return memory::handler_for_name(base),
            };
            return Some((h, aux));
        }
    }
    if base.starts_with("ds_") {
        let (h, aux): (Handler, u32) = match base {
            "ds_read_u8" => (ds_read, 1),
            "ds_read_i8" => (ds_read, 1 | SIGNED),
            "ds_read_u16" => (ds_read, 2),
            "ds_read_i16" => (ds_read, 2 | SIGNED),
            "ds_read_b32" => (ds_read, 4),
            "ds_read_b64" => (ds_read, 8),
            "ds_read_b96" => (ds_read, 12),
            "ds_read_b128" => (ds_read, 16),
            "ds_read2_b32" => (ds_read, 4 | DS_TWO),
            "ds_read2_b64" => (ds_read, 8 | DS_TWO),
            "ds_read2st64_b32" => (ds_read, 4 | DS_TWO | DS_ST64),
            "ds_read2st64_b64" => (ds_read, 8 | DS_TWO | DS_ST64),
            "ds_write_b8" => (ds_write, 1),
            "ds_write_b16" => (ds_write, 2),
            "ds_write_b32" => (ds_write, 4),
            "ds_write_b64" => (ds_write, 8),
            "ds_write_b96" => (ds_write, 12),
            "ds_write_b128" => (ds_write, 16),
            "ds_write2_b32" => (ds_write, 4 | DS_TWO),
            "ds_write2_b64" => (ds_write, 8 | DS_TWO),
            "ds_write2st64_b32" => (ds_write, 4 | DS_TWO | DS_ST64),
            "ds_write2st64_b64" => (ds_write, 8 | DS_TWO | DS_ST64),
            "ds_bpermute_b32" => (ds_bpermute, 0),
            "ds_wrxchg2_rtn_b32" => (ds_wrxchg2, 4 | DS_TWO),
            "ds_wrxchg2_rtn_b64" => (ds_wrxchg2, 8 | DS_TWO),
            "ds_wrxchg2st64_rtn_b32" => (ds_wrxchg2, 4 | DS_TWO | DS_ST64),
            "ds_wrxchg2st64_rtn_b64" => (ds_wrxchg2, 8 | DS_TWO | DS_ST64),
            _ => {
                return ds_atomic_aux(base)
                    .map(|a| (ds_atomic as Handler, a))
                    .or_else(|| memory::handler_for_name(base))
            }
        };
        return Some((h, aux));
    }
    let h: Handler = match base {
        // ---- SOPP ----
        "s_nop" | "s_waitcnt" | "s_setprio" | "s_sleep" | "s_icache_inv" | "s_incperflevel" | "s_decperflevel" => {
            |_, _, _| NEXT
        }
        "s_endpgm" => |_, _, _| Ok(Flow::End),
        "s_barrier" => |_, _, _| Ok(Flow::Barrier),
        "s_trap" => |_, e, _| Err(ExecErrorKind::Trap((simm16(e) & 0xFF) as u16)),
        "s_branch" => |_, e, _| branch(e, true),
        "s_cbranch_scc0" => |w, e, _| branch(e, !w.scc),
        "s_cbranch_scc1" => |w, e, _| branch(e, w.scc),
        "s_cbranch_vccz" => |w, e, _| branch(e, w.vcc == 0),
        "s_cbranch_vccnz" => |w, e, _| branch(e, w.vcc != 0),
        "s_cbranch_execz" => |w, e, _| branch(e, w.exec == 0),
        "s_cbranch_execnz" => |w, e, _| branch(e, w.exec != 0),
        // ---- SMEM ----
        "s_load_dword" | "s_load_dwordx2" | "s_load_dwordx4" | "s_load_dwordx8" | "s_load_dwordx16" => smem_load,
        "s_dcache_inv" | "s_dcache_wb" | "s_dcache_inv_vol" | "s_dcache_wb_vol" => |_, _, _| NEXT,
        // ---- SOP2 ----
        "s_add_u32" => |w, e, _| {
            sop2(w, e, |a, b, _| {
                let (r, c) = (a as u32).overflowing_add(b as u32);
                (r.into(), Some(c))
            })
        },
        "s_sub_u32" => |w, e, _| {
            sop2(w, e, |a, b, _| {
                let (r, c) = (a as u32).overflowing_sub(b as u32);
                (r.into(), Some(c))
            })
        },
        "s_add_i32" => |w, e, _| {
            sop2(w, e, |a, b, _| {
                let (r, o) = (a as i32).overflowing_add(b as i32);
                (u64::from(r as u32), Some(o))
            })
        },
        "s_sub_i32" => |w, e, _| {
            sop2(w, e, |a, b, _| {
                let (r, o) = (a as i32).overflowing_sub(b as i32);
                (u64::from(r as u32), Some(o))
            })
        },
        "s_addc_u32" => |w, e, _| {
            sop2(w, e, |a, b, c| {
                let s = a as u32 as u64 + b as u32 as u64 + u64::from(c);
                (s & 0xFFFF_FFFF, Some(s >> 32 != 0))
            })
        },
        "s_subb_u32" => |w, e, _| {
            sop2(w, e, |a, b, c| {
                let (a, b) = (a as u32 as u64, b as u32 as u64 + u64::from(c));
                (a.wrapping_sub(b) & 0xFFFF_FFFF, Some(b > a))
            })
        },
        "s_min_i32" => {
            |w, e, _| sop2(w, e, |a, b, _| if (a as i32) < (b as i32) { (a, Some(true)) } else { (b, Some(false)) })
        }
        "s_min_u32" => {
            |w, e, _| sop2(w, e, |a, b, _| if (a as u32) < (b as u32) { (a, Some(true)) } else { (b, Some(false)) })
        }
        "s_max_i32" => {
            |w, e, _| sop2(w, e, |a, b, _| if (a as i32) > (b as i32) { (a, Some(true)) } else { (b, Some(false)) })
        }
        "s_max_u32" => {
            |w, e, _| sop2(w, e, |a, b, _| if (a as u32) > (b as u32) { (a, Some(true)) } else { (b, Some(false)) })
        }
        "s_cselect_b32" | "s_cselect_b64" => |w, e, _| sop2(w, e, |a, b, c| (if c { a } else { b }, None)),
        "s_and_b32" | "s_and_b64" => |w, e, _| sop2(w, e, |a, b, _| (a & b, Some(a & b != 0))),
        "s_or_b32" | "s_or_b64" => |w, e, _| sop2(w, e, |a, b, _| (a | b, Some(a | b != 0))),
        "s_xor_b32" | "s_xor_b64" => |w, e, _| sop2(w, e, |a, b, _| (a ^ b, Some(a ^ b != 0))),
        "s_andn2_b32" => |w, e, _| sop2(w, e, |a, b, _| lo(a & !b)),
        "s_andn2_b64" => |w, e, _| sop2(w, e, |a, b, _| (a & !b, Some(a & !b != 0))),
        "s_orn2_b32" => |w, e, _| sop2(w, e, |a, b, _| lo(a | !b)),
        "s_orn2_b64" => |w, e, _| sop2(w, e, |a, b, _| (a | !b, Some(a | !b != 0))),
        "s_nand_b32" => |w, e, _| sop2(w, e, |a, b, _| lo(!(a & b))),
        "s_nand_b64" => |w, e, _| sop2(w, e, |a, b, _| (!(a & b), Some(!(a & b) != 0))),
        "s_nor_b32" => |w, e, _| sop2(w, e, |a, b, _| lo(!(a | b))),
        "s_nor_b64" => |w, e, _| sop2(w, e, |a, b, _| (!(a | b), Some(!(a | b) != 0))),
        "s_xnor_b32" => |w, e, _| sop2(w, e, |a, b, _| lo(!(a ^ b))),
        "s_xnor_b64" => |w, e, _| sop2(w, e, |a, b, _| (!(a ^ b), Some(!(a ^ b) != 0))),
        "s_lshl_b32" => |w, e, _| sop2(w, e, |a, b, _| lo(((a as u32) << (b & 31)).into())),
        "s_lshl_b64" => |w, e, _| sop2(w, e, |a, b, _| (a << (b & 63), Some(a << (b & 63) != 0))),
        "s_lshr_b32" => |w, e, _| sop2(w, e, |a, b, _| lo(((a as u32) >> (b & 31)).into())),
        "s_lshr_b64" => |w, e, _| sop2(w, e, |a, b, _| (a >> (b & 63), Some(a >> (b & 63) != 0))),
        "s_ashr_i32" => |w, e, _| sop2(w, e, |a, b, _| lo(((a as i32) >> (b & 31)) as u32 as u64)),
        "s_ashr_i64" => |w, e, _| {
            sop2(w, e, |a, b, _| {
                let r = ((a as i64) >> (b & 63)) as u64;
                (r, Some(r != 0))
            })
        },
        "s_bfm_b32" => |w, e, _| sop2(w, e, |a, b, _| ((((1u64 << (a & 31)) - 1) << (b & 31)) & 0xFFFF_FFFF, None)),
        "s_bfm_b64" => |w, e, _| sop2(w, e, |a, b, _| (((1u64 << (a & 63)).wrapping_sub(1)) << (b & 63), None)),
        "s_mul_i32" => |w, e, _| sop2(w, e, |a, b, _| (u64::from((a as u32).wrapping_mul(b as u32)), None)),
        "s_mul_hi_u32" => |w, e, _| sop2(w, e, |a, b, _| ((a as u32 as u64 * b as u32 as u64) >> 32, None)),
        "s_mul_hi_i32" => {
            |w, e, _| sop2(w, e, |a, b, _| ((((a as i32 as i64) * (b as i32 as i64)) >> 32) as u32 as u64, None))
        }
        "s_bfe_u32" => |w, e, _| sop2(w, e, |a, b, _| lo(bfe32(a as u32, b as u32, false).into())),
        "s_bfe_i32" => |w, e, _| sop2(w, e, |a, b, _| lo(bfe32(a as u32, b as u32, true).into())),
        "s_bfe_u64" => |w, e, _| sop2(w, e, |a, b, _| (bfe64(a, b, false), Some(bfe64(a, b, false) != 0))),
        "s_bfe_i64" => |w, e, _| sop2(w, e, |a, b, _| (bfe64(a, b, true), Some(bfe64(a, b, true) != 0))),
        "s_absdiff_i32" => {
            |w, e, _| sop2(w, e, |a, b, _| lo(u64::from((a as i32).wrapping_sub(b as i32).unsigned_abs())))
        }
        "s_lshl1_add_u32" => |w, e, _| sop2(w, e, |a, b, _| shl_add(a, b, 1)),
        "s_lshl2_add_u32" => |w, e, _| sop2(w, e, |a, b, _| shl_add(a, b, 2)),
        "s_lshl3_add_u32" => |w, e, _| sop2(w, e, |a, b, _| shl_add(a, b, 3)),
        "s_lshl4_add_u32" => |w, e, _| sop2(w, e, |a, b, _| shl_add(a, b, 4)),
        "s_pack_ll_b32_b16" => |w, e, _| sop2(w, e, |a, b, _| ((a & 0xFFFF) | (b & 0xFFFF) << 16, None)),
        "s_pack_lh_b32_b16" => |w, e, _| sop2(w, e, |a, b, _| ((a & 0xFFFF) | (b & 0xFFFF_0000), None)),
        "s_pack_hh_b32_b16" => |w, e, _| sop2(w, e, |a, b, _| ((a >> 16 & 0xFFFF) | (b & 0xFFFF_0000), None)),
        // ---- SOPK ----
        "s_movk_i32" => |w, e, _| sopk(w, e, |_, k, _| (Some(sext16(k)), None)),
        "s_cmovk_i32" => |w, e, _| sopk(w, e, |d, k, c| (Some(if c { sext16(k) } else { d }), None)),
        "s_addk_i32" => |w, e, _| {
            sopk(w, e, |d, k, _| {
                let (r, o) = (d as i32).overflowing_add(sext16(k) as i32);
                (Some(r as u32), Some(o))
            })
        },
        "s_mulk_i32" => |w, e, _| sopk(w, e, |d, k, _| (Some(d.wrapping_mul(sext16(k))), None)),
        "s_cmpk_eq_i32" => |w, e, _| sopk(w, e, |d, k, _| (None, Some(d as i32 == sext16(k) as i32))),
        "s_cmpk_lg_i32" => |w, e, _| sopk(w, e, |d, k, _| (None, Some(d as i32 != sext16(k) as i32))),
        "s_cmpk_gt_i32" => |w, e, _| sopk(w, e, |d, k, _| (None, Some(d as i32 > sext16(k) as i32))),
        "s_cmpk_ge_i32" => |w, e, _| sopk(w, e, |d, k, _| (None, Some(d as i32 >= sext16(k) as i32))),
        "s_cmpk_lt_i32" => |w, e, _| sopk(w, e, |d, k, _| (None, Some((d as i32) < sext16(k) as i32))),
        "s_cmpk_le_i32" => |w, e, _| sopk(w, e, |d, k, _| (None, Some(d as i32 <= sext16(k) as i32))),
        "s_cmpk_eq_u32" => |w, e, _| sopk(w, e, |d, k, _| (None, Some(d == k))),
        "s_cmpk_lg_u32" => |w, e, _| sopk(w, e, |d, k, _| (None, Some(d != k))),
        "s_cmpk_gt_u32" => |w, e, _| sopk(w, e, |d, k, _| (None, Some(d > k))),
        "s_cmpk_ge_u32" => |w, e, _| sopk(w, e, |d, k, _| (None, Some(d >= k))),
        "s_cmpk_lt_u32" => |w, e, _| sopk(w, e, |d, k, _| (None, Some(d < k))),
        "s_cmpk_le_u32" => |w, e, _| sopk(w, e, |d, k, _| (None, Some(d <= k))),
        // ---- SOP1 ----
        "s_mov_b32" | "s_mov_b64" => |w, e, _| sop1(w, e, |a, _| (a, None)),
        "s_cmov_b32" | "s_cmov_b64" => |w, e, _| {
            if w.scc {
                sop1(w, e, |a, _| (a, None))
            } else {
                NEXT
            }
        },
        "s_not_b32" => |w, e, _| sop1(w, e, |a, _| lo(!a)),
        "s_not_b64" => |w, e, _| sop1(w, e, |a, _| (!a, Some(!a != 0))),
        "s_brev_b32" => |w, e, _| sop1(w, e, |a, _| ((a as u32).reverse_bits().into(), None)),
        "s_brev_b64" => |w, e, _| sop1(w, e, |a, _| (a.reverse_bits(), None)),
        "s_bcnt0_i32_b32" => |w, e, _| sop1(w, e, |a, _| lo((a as u32).count_zeros().into())),
        "s_bcnt0_i32_b64" => |w, e, _| sop1(w, e, |a, _| lo(a.count_zeros().into())),
        "s_bcnt1_i32_b32" => |w, e, _| sop1(w, e, |a, _| lo((a as u32).count_ones().into())),
        "s_bcnt1_i32_b64" => |w, e, _| sop1(w, e, |a, _| lo(a.count_ones().into())),
        "s_ff1_i32_b32" => |w, e, _| sop1(w, e, |a, _| (ff1(a as u32 as u64, 32), None)),
        "s_ff1_i32_b64" => |w, e, _| sop1(w, e, |a, _| (ff1(a, 64), None)),
        "s_ff0_i32_b32" => |w, e, _| sop1(w, e, |a, _| (ff1(!a & 0xFFFF_FFFF, 32), None)),
        "s_ff0_i32_b64" => |w, e, _| sop1(w, e, |a, _| (ff1(!a, 64), None)),
        "s_flbit_i32_b32" => |w, e, _| {
            sop1(w, e, |a, _| (if a as u32 == 0 { 0xFFFF_FFFF } else { u64::from((a as u32).leading_zeros()) }, None))
        },
        "s_flbit_i32_b64" => {
            |w, e, _| sop1(w, e, |a, _| (if a == 0 { 0xFFFF_FFFF } else { u64::from(a.leading_zeros()) }, None))
        }
        "s_sext_i32_i8" => |w, e, _| sop1(w, e, |a, _| (a as u8 as i8 as i32 as u32 as u64, None)),
        "s_sext_i32_i16" => |w, e, _| sop1(w, e, |a, _| (a as u16 as i16 as i32 as u32 as u64, None)),
        "s_abs_i32" => |w, e, _| sop1(w, e, |a, _| lo((a as i32).unsigned_abs().into())),
        "s_bitset0_b32" => |w, e, _| {
            let d = op(e, 0)?;
            let (cur, b) = (w.s32(&d)?, sget(w, e, 1)?);
            w.set_s32(&d, cur & !(1 << (b & 31)))?;
            NEXT
        },
        "s_bitset1_b32" => |w, e, _| {
            let d = op(e, 0)?;
            let (cur, b) = (w.s32(&d)?, sget(w, e, 1)?);
            w.set_s32(&d, cur | 1 << (b & 31))?;
            NEXT
        },
        "s_flbit_i32" => |w, e, _| sop1(w, e, |a, _| (u64::from(flbit_i32(i64::from(a as u32 as i32), 32)), None)),
        "s_flbit_i32_i64" => |w, e, _| sop1(w, e, |a, _| (u64::from(flbit_i32(a as i64, 64)), None)),
        "s_bitset0_b64" => |w, e, _| {
            let d = op(e, 0)?;
            let (cur, b) = (w.s64(&d, Ty::B64)?, sget(w, e, 1)?);
            w.set_s64(&d, cur & !(1 << (b & 63)))?;
            NEXT
        },
        "s_bitset1_b64" => |w, e, _| {
            let d = op(e, 0)?;
            let (cur, b) = (w.s64(&d, Ty::B64)?, sget(w, e, 1)?);
            w.set_s64(&d, cur | 1 << (b & 63))?;
            NEXT
        },
        "s_quadmask_b32" => |w, e, _| sop1(w, e, |a, _| nonzero(quadmask(a & 0xFFFF_FFFF, 8))),
        "s_quadmask_b64" => |w, e, _| sop1(w, e, |a, _| nonzero(quadmask(a, 16))),
        "s_wqm_b32" => |w, e, _| sop1(w, e, |a, _| nonzero(wqm(a & 0xFFFF_FFFF))),
        "s_wqm_b64" => |w, e, _| sop1(w, e, |a, _| nonzero(wqm(a))),
        "s_bitreplicate_b64_b32" => {
            |w, e, _| sop1(w, e, |a, _| ((0..32).fold(0u64, |r, i| r | ((a >> i & 1) * (3 << (2 * i)))), None))
        }
        "s_and_saveexec_b64" => |w, e, _| saveexec(w, e, |s, x| s & x),
        "s_or_saveexec_b64" => |w, e, _| saveexec(w, e, |s, x| s | x),
        "s_xor_saveexec_b64" => |w, e, _| saveexec(w, e, |s, x| s ^ x),
        "s_andn2_saveexec_b64" => |w, e, _| saveexec(w, e, |s, x| s & !x),
        "s_orn2_saveexec_b64" => |w, e, _| saveexec(w, e, |s, x| s | !x),
        "s_nand_saveexec_b64" => |w, e, _| saveexec(w, e, |s, x| !(s & x)),
        "s_nor_saveexec_b64" => |w, e, _| saveexec(w, e, |s, x| !(s | x)),
        "s_xnor_saveexec_b64" => |w, e, _| saveexec(w, e, |s, x| !(s ^ x)),
        "s_andn1_saveexec_b64" => |w, e, _| saveexec(w, e, |s, x| !s & x),
        "s_orn1_saveexec_b64" => |w, e, _| saveexec(w, e, |s, x| !s | x),
        "s_andn1_wrexec_b64" => |w, e, _| wrexec(w, e, |s, x| !s & x),
        "s_andn2_wrexec_b64" => |w, e, _| wrexec(w, e, |s, x| s & !x),
        "s_getpc_b64" => |w, e, _| {
            sset(w, e, 0, e.next)?;
            NEXT
        },
        "s_setpc_b64" => |w, e, _| Ok(Flow::JumpAddr(sget(w, e, 0)?)),
        // SOPK: D = the next instruction's address; PC = that + 4 × simm16.
        "s_call_b64" => |w, e, _| {
            sset(w, e, 0, e.next)?;
            Ok(Flow::JumpAddr(e.next.wrapping_add_signed(4 * i64::from(simm16(e) as u16 as i16))))
        },
        "s_swappc_b64" => |w, e, _| {
            let to = sget(w, e, 1)?;
            sset(w, e, 0, e.next)?;
            Ok(Flow::JumpAddr(to))
        },
        // ---- SOPC ----
        "s_cmp_eq_i32" | "s_cmp_eq_u32" | "s_cmp_eq_u64" => |w, e, _| sopc(w, e, |a, b| a == b),
        "s_cmp_lg_i32" | "s_cmp_lg_u32" | "s_cmp_lg_u64" => |w, e, _| sopc(w, e, |a, b| a != b),
        "s_cmp_gt_i32" => |w, e, _| sopc(w, e, |a, b| (a as i32) > (b as i32)),
        "s_cmp_ge_i32" => |w, e, _| sopc(w, e, |a, b| (a as i32) >= (b as i32)),
        "s_cmp_lt_i32" => |w, e, _| sopc(w, e, |a, b| (a as i32) < (b as i32)),
        "s_cmp_le_i32" => |w, e, _| sopc(w, e, |a, b| (a as i32) <= (b as i32)),
        "s_cmp_gt_u32" => |w, e, _| sopc(w, e, |a, b| a > b),
        "s_cmp_ge_u32" => |w, e, _| sopc(w, e, |a, b| a >= b),
        "s_cmp_lt_u32" => |w, e, _| sopc(w, e, |a, b| a < b),
        "s_cmp_le_u32" => |w, e, _| sopc(w, e, |a, b| a <= b),
        "s_bitcmp0_b32" => |w, e, _| sopc(w, e, |a, b| a >> (b & 31) & 1 == 0),
        "s_bitcmp1_b32" => |w, e, _| sopc(w, e, |a, b| a >> (b & 31) & 1 == 1),
        "s_bitcmp0_b64" => |w, e, _| sopc(w, e, |a, b| a >> (b & 63) & 1 == 0),
        "s_bitcmp1_b64" => |w, e, _| sopc(w, e, |a, b| a >> (b & 63) & 1 == 1),
        // ---- VOP1 ----
        "v_nop" => |_, _, _| NEXT,
        "v_mov_b32" => |w, e, _| vop1_u32(w, e, |a| a),
        "v_mov_b64" => vmov64,
        "v_not_b32" => |w, e, _| vop1_u32(w, e, |a| !a),
        "v_bfrev_b32" => |w, e, _| vop1_u32(w, e, u32::reverse_bits),
        "v_ffbh_u32" => |w, e, _| vop1_u32(w, e, |a| if a == 0 { u32::MAX } else { a.leading_zeros() }),
        "v_ffbl_b32" => |w, e, _| vop1_u32(w, e, |a| if a == 0 { u32::MAX } else { a.trailing_zeros() }),
        "v_ffbh_i32" => |w, e, _| {
            vop1_u32(w, e, |a| {
                let x = if (a as i32) < 0 { !a } else { a };
                if a == 0 || a == u32::MAX {
                    u32::MAX
                } else {
                    x.leading_zeros()
                }
            })
        },
        "v_pk_mov_b32" => pk_mov,
        "v_swap_b32" => vswap,
        // Float exceptions are not recorded (docs/executor.md §6): nothing to clear.
        "v_clrexcp" => |_, e, _| {
            int_mods(e)?;
            NEXT
        },
        "v_readfirstlane_b32" => readfirstlane,
        "v_accvgpr_read_b32" | "v_accvgpr_write_b32" | "v_accvgpr_mov_b32" => |w, e, _| {
            let a = w.v32(&src(e, 0)?)?;
            w.set_v32(&dst(e)?, &a)?;
            NEXT
        },
        "v_cvt_f32_ubyte0" => |w, e, _| vcvt_to_f32(w, e, |a| (a & 0xFF) as f32),
        "v_cvt_f32_ubyte1" => |w, e, _| vcvt_to_f32(w, e, |a| (a >> 8 & 0xFF) as f32),
        "v_cvt_f32_ubyte2" => |w, e, _| vcvt_to_f32(w, e, |a| (a >> 16 & 0xFF) as f32),
        "v_cvt_f32_ubyte3" => |w, e, _| vcvt_to_f32(w, e, |a| (a >> 24) as f32),
        "v_cvt_i32_f32" => |w, e, _| vcvt_from_f32(w, e, |a| a as i32 as u32),
        "v_cvt_u32_f32" => |w, e, _| vcvt_from_f32(w, e, |a| a as u32),
        "v_trunc_f32" => |w, e, _| vop1_f32(w, e, trunc_f32),
        "v_floor_f32" => |w, e, _| vop1_f32(w, e, floor_f32),
        "v_ceil_f32" => |w, e, _| vop1_f32(w, e, ceil_f32),
        "v_rndne_f32" => |w, e, _| vop1_f32(w, e, rndne_f32),
        "v_fract_f32" => |w, e, _| {
            // S0 - floor(S0), at most the largest f32 below 1 (NaN and infinities: NaN).
            vop1_f32(
                w,
                e,
                |x| if x.is_finite() { (x - floor_f32(x)).min(f32::from_bits(0x3F7F_FFFF)) } else { f32::NAN },
            )
        },
        // ---- VOP2 / VOP3 integer ----
        "v_add_u32" => |w, e, _| vaddsub_u32(w, e, u32::overflowing_add, u32::MAX),
        "v_sub_u32" => |w, e, _| vaddsub_u32(w, e, u32::overflowing_sub, 0),
        "v_subrev_u32" => |w, e, _| vaddsub_u32(w, e, |a, b| b.overflowing_sub(a), 0),
        "v_and_b32" => |w, e, _| vop2_u32(w, e, |a, b| a & b),
        "v_or_b32" => |w, e, _| vop2_u32(w, e, |a, b| a | b),
        "v_xor_b32" => |w, e, _| vop2_u32(w, e, |a, b| a ^ b),
        "v_xnor_b32" => |w, e, _| vop2_u32(w, e, |a, b| !(a ^ b)),
        "v_lshlrev_b32" => |w, e, _| vop2_u32(w, e, |a, b| b << (a & 31)),
        "v_lshrrev_b32" => |w, e, _| vop2_u32(w, e, |a, b| b >> (a & 31)),
        "v_ashrrev_i32" => |w, e, _| vop2_u32(w, e, |a, b| ((b as i32) >> (a & 31)) as u32),
        "v_min_i32" => |w, e, _| vop2_u32(w, e, |a, b| (a as i32).min(b as i32) as u32),
        "v_max_i32" => |w, e, _| vop2_u32(w, e, |a, b| (a as i32).max(b as i32) as u32),
        "v_min_u32" => |w, e, _| vop2_u32(w, e, u32::min),
        "v_max_u32" => |w, e, _| vop2_u32(w, e, u32::max),
        "v_mul_u32_u24" => |w, e, _| vop2_u32(w, e, |a, b| (a & 0xFF_FFFF).wrapping_mul(b & 0xFF_FFFF)),
        "v_mul_hi_u32_u24" => {
            |w, e, _| vop2_u32(w, e, |a, b| ((u64::from(a & 0xFF_FFFF) * u64::from(b & 0xFF_FFFF)) >> 32) as u32)
        }
        "v_mul_i32_i24" => |w, e, _| vop2_u32(w, e, |a, b| (i24(a) as i32).wrapping_mul(i24(b) as i32) as u32),
        "v_mul_hi_i32_i24" => |w, e, _| vop2_u32(w, e, |a, b| ((i24(a) * i24(b)) >> 32) as u32),
        "v_mul_lo_u32" | "v_mul_lo_i32" => |w, e, _| vop2_u32(w, e, u32::wrapping_mul),
        "v_mul_hi_u32" => |w, e, _| vop2_u32(w, e, |a, b| ((u64::from(a) * u64::from(b)) >> 32) as u32),
        "v_mul_hi_i32" => |w, e, _| vop2_u32(w, e, |a, b| ((i64::from(a as i32) * i64::from(b as i32)) >> 32) as u32),
        "v_bcnt_u32_b32" => |w, e, _| vop2_u32(w, e, |a, b| a.count_ones().wrapping_add(b)),
        "v_mbcnt_lo_u32_b32" => |w, e, _| mbcnt(w, e, false),
        "v_mbcnt_hi_u32_b32" => |w, e, _| mbcnt(w, e, true),
        "v_bfm_b32" => |w, e, _| vop2_u32(w, e, |a, b| ((1u64 << (a & 31)) as u32).wrapping_sub(1) << (b & 31)),
        "v_add_co_u32" => |w, e, _| vcarry(w, e, false, |a, b, _| a.overflowing_add(b)),
        "v_sub_co_u32" => |w, e, _| vcarry(w, e, false, |a, b, _| a.overflowing_sub(b)),
        "v_subrev_co_u32" => |w, e, _| vcarry(w, e, false, |a, b, _| b.overflowing_sub(a)),
        // Carry-in forms in 32-bit lanes, the two steps' carries or-ed (one of them at most
        // is set): four u32 lanes per vector operation instead of two u64 ones
        // (docs/executor.md §6 "speed").
        "v_addc_co_u32" => |w, e, _| {
            vcarry(w, e, true, |a, b, c| {
                let (t, c0) = a.overflowing_add(b);
                let (r, c1) = t.overflowing_add(c);
                (r, c0 | c1)
            })
        },
        "v_subb_co_u32" => |w, e, _| {
            vcarry(w, e, true, |a, b, c| {
                let (t, b0) = a.overflowing_sub(b);
                let (r, b1) = t.overflowing_sub(c);
                (r, b0 | b1)
            })
        },
        "v_subbrev_co_u32" => |w, e, _| {
            vcarry(w, e, true, |a, b, c| {
                let (t, b0) = b.overflowing_sub(a);
                let (r, b1) = t.overflowing_sub(c);
                (r, b0 | b1)
            })
        },
        "v_cndmask_b32" => vcndmask,
        "v_mad_u32_u24" => {
            |w, e, _| vop3_u32(w, e, |a, b, c| (a & 0xFF_FFFF).wrapping_mul(b & 0xFF_FFFF).wrapping_add(c))
        }
        "v_mad_i32_i24" => |w, e, _| {
            vop3_u32(w, e, |a, b, c| (i24(a) as i32).wrapping_mul(i24(b) as i32).wrapping_add(c as i32) as u32)
        },
        "v_bfe_u32" => |w, e, _| vop3_u32(w, e, |a, b, c| bfe32(a, (b & 31) | (c & 31) << 16, false)),
        "v_bfe_i32" => |w, e, _| vop3_u32(w, e, |a, b, c| bfe32(a, (b & 31) | (c & 31) << 16, true)),
        "v_bfi_b32" => |w, e, _| vop3_u32(w, e, |a, b, c| (a & b) | (!a & c)),
        "v_alignbit_b32" => {
            |w, e, _| vop3_u32(w, e, |a, b, c| ((u64::from(a) << 32 | u64::from(b)) >> (c & 31)) as u32)
        }
        "v_alignbyte_b32" => {
            |w, e, _| vop3_u32(w, e, |a, b, c| ((u64::from(a) << 32 | u64::from(b)) >> (8 * (c & 3))) as u32)
        }
        "v_min3_i32" => |w, e, _| vop3_u32(w, e, |a, b, c| (a as i32).min(b as i32).min(c as i32) as u32),
        "v_max3_i32" => |w, e, _| vop3_u32(w, e, |a, b, c| (a as i32).max(b as i32).max(c as i32) as u32),
        "v_min3_u32" => |w, e, _| vop3_u32(w, e, |a, b, c| a.min(b).min(c)),
        "v_max3_u32" => |w, e, _| vop3_u32(w, e, |a, b, c| a.max(b).max(c)),
        "v_med3_i32" => |w, e, _| vop3_u32(w, e, |a, b, c| med3(a as i32, b as i32, c as i32) as u32),
        "v_med3_u32" => |w, e, _| vop3_u32(w, e, med3),
        "v_add3_u32" => |w, e, _| vop3_u32(w, e, |a, b, c| a.wrapping_add(b).wrapping_add(c)),
        "v_lshl_add_u32" => |w, e, _| vop3_u32(w, e, |a, b, c| (a << (b & 31)).wrapping_add(c)),
        "v_add_lshl_u32" => |w, e, _| vop3_u32(w, e, |a, b, c| a.wrapping_add(b) << (c & 31)),
        "v_lshl_or_b32" => |w, e, _| vop3_u32(w, e, |a, b, c| (a << (b & 31)) | c),
        "v_and_or_b32" => |w, e, _| vop3_u32(w, e, |a, b, c| (a & b) | c),
        "v_or3_b32" => |w, e, _| vop3_u32(w, e, |a, b, c| a | b | c),
        "v_xad_u32" => |w, e, _| vop3_u32(w, e, |a, b, c| (a ^ b).wrapping_add(c)),
        "v_perm_b32" => |w, e, _| vop3_u32(w, e, perm),
        "v_add_i32" => |w, e, _| vaddsub_i32(w, e, i32::overflowing_add),
        "v_sub_i32" => |w, e, _| vaddsub_i32(w, e, i32::overflowing_sub),
        "v_sad_u8" => |w, e, _| vop3_u32(w, e, |a, b, c| sad(a, b, 8).wrapping_add(c)),
        "v_sad_hi_u8" => |w, e, _| vop3_u32(w, e, |a, b, c| (sad(a, b, 8) << 16).wrapping_add(c)),
        "v_sad_u16" => |w, e, _| vop3_u32(w, e, |a, b, c| sad(a, b, 16).wrapping_add(c)),
        "v_sad_u32" => |w, e, _| vop3_u32(w, e, |a, b, c| a.abs_diff(b).wrapping_add(c)),
        "v_lerp_u8" => |w, e, _| {
            vop3_u32(w, e, |a, b, c| {
                (0..4).fold(0, |r, i| {
                    let byte = |x: u32| (x >> (8 * i)) & 0xFF;
                    r | ((byte(a) + byte(b) + (c >> (8 * i) & 1)) >> 1) << (8 * i)
                })
            })
        },
        "v_mad_u64_u32" => |w, e, _| vmad64(w, e, false),
        "v_mad_i64_i32" => |w, e, _| vmad64(w, e, true),
        "v_lshlrev_b64" => |w, e, _| vshift64(w, e, |v, s| v << s),
        "v_lshl_add_u64" => vlshl_add64,
        "v_lshrrev_b64" => |w, e, _| vshift64(w, e, |v, s| v >> s),
        "v_ashrrev_i64" => |w, e, _| vshift64(w, e, |v, s| ((v as i64) >> s) as u64),
        "v_readlane_b32" => readlane,
        "v_writelane_b32" => writelane,
        // ---- VOP2 / VOP3 f32 ----
        "v_min_f32" => |w, e, _| vop2_f32(w, e, fmin),
        "v_max_f32" => |w, e, _| vop2_f32(w, e, fmax),
        "v_min3_f32" => |w, e, _| vop3_f32(w, e, |a, b, c| fmin(fmin(a, b), c)),
        "v_max3_f32" => |w, e, _| vop3_f32(w, e, |a, b, c| fmax(fmax(a, b), c)),
        "v_cubeid_f32" => |w, e, _| vop3_f32(w, e, |x, y, z| cube(x, y, z).0),
        "v_cubesc_f32" => |w, e, _| vop3_f32(w, e, |x, y, z| cube(x, y, z).1),
        "v_cubetc_f32" => |w, e, _| vop3_f32(w, e, |x, y, z| cube(x, y, z).2),
        "v_cubema_f32" => |w, e, _| vop3_f32(w, e, |x, y, z| cube(x, y, z).3),
        _ => {
            return memory::handler_for_name(base)
                .or_else(|| super::indexing::handler_for_name(base))
                .or_else(|| super::float::handler_for_name(base))
                .or_else(|| super::fp8::handler_for_name(base))
        }
    };
    Some((h, 0))
}

/// Rounds toward zero (exact, by clearing the fraction bits).
pub(crate) fn trunc_f32(x: f32) -> f32 {
    let b = x.to_bits();
    let e = ((b >> 23) & 0xFF) as i32 - 127;
    if e >= 23 {
        return x; // integral, infinite or NaN
    }
    if e < 0 {
        return f32::from_bits(b & 0x8000_0000);
    }
    f32::from_bits(b & !((1u32 << (23 - e)) - 1))
}

pub(crate) fn floor_f32(x: f32) -> f32 {
    let t = trunc_f32(x);
    if t > x {
        t - 1.0
    } else {
        t
    }
}

pub(crate) fn ceil_f32(x: f32) -> f32 {
    let t = trunc_f32(x);
    if t < x {
        t + 1.0
    } else {
        t
    }
}

/// Rounds to the nearest integer, ties to even (adding and removing 2^23 rounds exactly so).
pub(crate) fn rndne_f32(x: f32) -> f32 {
    if !x.is_finite() || x.abs() >= 8_388_608.0 {
        return x;
    }
    let r = (x.abs() + 8_388_608.0) - 8_388_608.0;
    if x.is_sign_negative() {
        -r
    } else {
        r
    }
}

fn lo(v: u64) -> (u64, Option<bool>) {
    let r = v & 0xFFFF_FFFF;
    (r, Some(r != 0))
}

fn shl_add(a: u64, b: u64, n: u32) -> (u64, Option<bool>) {
    let s = ((a as u32 as u64) << n) + (b as u32 as u64);
    (s & 0xFFFF_FFFF, Some(s >> 32 != 0))
}

/// The cube-map face of the direction (x, y, z) and its coordinates (docs/executor.md §5
/// "Bytes and bits"): (face id, sc, tc, 2 × major axis). The z face wins ties, then y; a face's
/// negative side only for a value below zero (−0 and NaN count as positive).
fn cube(x: f32, y: f32, z: f32) -> (f32, f32, f32, f32) {
    let neg = |v: f32| v < 0.0;
    if z.abs() >= x.abs() && z.abs() >= y.abs() {
        let (id, sc) = if neg(z) { (5.0, -x) } else { (4.0, x) };
        (id, sc, -y, z + z)
    } else if y.abs() >= x.abs() {
        let (id, tc) = if neg(y) { (3.0, -z) } else { (2.0, z) };
        (id, x, tc, y + y)
    } else {
        let (id, sc) = if neg(x) { (1.0, z) } else { (0.0, -z) };
        (id, sc, -y, x + x)
    }
}

fn nonzero(r: u64) -> (u64, Option<bool>) {
    (r, Some(r != 0))
}

/// The bits of `x` (`bits` wide, sign-extended in `x`) after its sign bit that equal it, counted
/// from the top; −1 for 0 and −1 (`s_flbit_i32`, as `v_ffbh_i32`).
fn flbit_i32(x: i64, bits: u32) -> u32 {
    if x == 0 || x == -1 {
        return u32::MAX;
    }
    let v = (if x < 0 { !x } else { x }) as u64;
    v.leading_zeros() - (64 - bits)
}

/// Bit i of the result: whether quad i (bits 4i…4i+3) of `a` has a bit set.
fn quadmask(a: u64, quads: u32) -> u64 {
    (0..quads).fold(0, |r, i| r | u64::from(a >> (4 * i) & 0xF != 0) << i)
}

/// Every quad of `a` with a bit set becomes 0xF (whole quad mode).
fn wqm(a: u64) -> u64 {
    (0..16).fold(0, |r, i| r | if a >> (4 * i) & 0xF != 0 { 0xF << (4 * i) } else { 0 })
}

/// `v_perm_b32`: byte k of the result is selector byte k of S2 applied to the eight bytes of
/// {S0, S1} (S1 the low dword): 0–7 a byte, 8–11 the sign of byte 1, 3, 5 or 7 spread over the
/// byte, 12 zero, 13 and up 0xFF.
fn perm(a: u32, b: u32, sel: u32) -> u32 {
    let data = u64::from(a) << 32 | u64::from(b);
    let byte = |s: u32| -> u32 {
        match s {
            0..=7 => (data >> (8 * s) & 0xFF) as u32,
            8..=11 => ((data >> (16 * (s - 8) + 15) & 1) * 0xFF) as u32,
            12 => 0,
            _ => 0xFF,
        }
    };
    (0..4).fold(0, |r, k| r | byte(sel >> (8 * k) & 0xFF) << (8 * k))
}

/// Sum of the absolute differences of the unsigned `width`-bit fields of `a` and `b`.
fn sad(a: u32, b: u32, width: u32) -> u32 {
    let mask = (1u32 << width) - 1;
    (0..32 / width).map(|i| ((a >> (i * width)) & mask).abs_diff((b >> (i * width)) & mask)).sum()
}

fn ff1(a: u64, bits: u32) -> u64 {
    if a == 0 {
        0xFFFF_FFFF
    } else {
        u64::from(a.trailing_zeros().min(bits))
    }
}

fn i24(a: u32) -> i64 {
    i64::from(((a << 8) as i32) >> 8)
}

fn med3<T: Ord + Copy>(a: T, b: T, c: T) -> T {
    a.max(b).min(a.min(b).max(c))
}

#[cfg(test)]
mod tests {
    use super::{pack_mask, unpack_mask, LANES};
    use alloc::vec;

    /// `unpack_mask` against one shift per lane, and back through `pack_mask`: every single
    /// bit, none, all, and pseudo-random masks (an LCG, so the run is the same every time).
    #[test]
    fn unpack_mask_puts_bit_l_in_lane_l() {
        let mut cases = vec![0u64, u64::MAX];
        cases.extend((0..LANES).map(|l| 1u64 << l));
        cases.extend((0..LANES).map(|l| !(1u64 << l)));
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..200 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            cases.push(x);
        }
        for &m in &cases {
            let b = unpack_mask(m);
            for (l, &v) in b.iter().enumerate() {
                assert_eq!(u64::from(v), m >> l & 1, "mask {m:#x} lane {l}");
            }
            assert_eq!(pack_mask(&b), m);
        }
    }

    /// `pack_mask` against one shift and or per lane: every single lane, none, all, and
    /// pseudo-random patterns (an LCG, so the run is the same every time).
    #[test]
    fn pack_mask_puts_lane_l_in_bit_l() {
        let naive = |b: &[u8; LANES]| (0..LANES).fold(0u64, |m, l| m | u64::from(b[l]) << l);
        let mut cases = vec![[0u8; LANES], [1u8; LANES]];
        for l in 0..LANES {
            let mut b = [0u8; LANES];
            b[l] = 1;
            cases.push(b);
        }
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..200 {
            let mut b = [0u8; LANES];
            for v in b.iter_mut() {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                *v = (x >> 63) as u8;
            }
            cases.push(b);
        }
        for b in &cases {
            assert_eq!(pack_mask(b), naive(b), "{b:?}");
        }
    }
}
