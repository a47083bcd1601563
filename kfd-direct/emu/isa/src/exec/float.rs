//! Floating-point and packed-math semantics (docs/executor.md §5): f32 and f64 arithmetic in
//! every MODE rounding mode, the division helpers, transcendentals, f16/i16/u16 operations with
//! VOP3 `op_sel`, VOP3P packed math and `s_getreg`/`s_setreg`.
//!
//! Values travel as bit patterns of their format ([`Fmt`]); [`softfloat`](super::softfloat)
//! rounds exactly in any mode, and the host's IEEE operations are used where they give the same
//! bits (round to nearest even on f32/f64). Transcendentals are computed in f64 with `libm` and
//! rounded once to the destination format.

// Lane loops index several per-lane arrays at once.
#![allow(clippy::needless_range_loop)]

use core::cmp::Ordering;

use super::ops::{
    carry_out, dst, field, float_cond, fma_f32, int_cond, int_mods, op, src, Exe, Handler, CMPX, NEXT, R,
};
use super::softfloat::{self as sf, Fmt, Round, Val, F16, F32, F64};
use super::wave::{float_const_f32, Lanes, Src, Ty, Wave, LANES};
use super::{ExecErrorKind, Group, PRIVATE_APERTURE, SHARED_APERTURE};
use crate::spec::{self, Field};
use crate::{FloatConst, Operand};

type Bits = [u64; LANES];

// ---------------------------------------------------------------------------------------------
// MODE

/// The float environment MODE gives one format: FP_ROUND and FP_DENORM (bits 1:0 and 5:4 for
/// f32, 3:2 and 7:6 for f64 and f16; denorm bit 0 keeps input denormals, bit 1 output ones).
#[derive(Clone, Copy)]
struct Env {
    rm: Round,
    keep_in: bool,
    keep_out: bool,
}

fn env(w: &Wave, f: Fmt) -> Env {
    let (round, denorm) =
        if f == F32 { (w.mode & 3, (w.mode >> 4) & 3) } else { ((w.mode >> 2) & 3, (w.mode >> 6) & 3) };
    Env { rm: Round::from_bits(round), keep_in: denorm & 1 != 0, keep_out: denorm & 2 != 0 }
}

impl Env {
    /// Denormals flushed on input and output whatever MODE says (the f32 transcendentals).
    fn flushing(self) -> Env {
        Env { keep_in: false, keep_out: false, ..self }
    }
    /// Input denormals kept whatever MODE says (the division helpers).
    fn keeping_inputs(self) -> Env {
        Env { keep_in: true, ..self }
    }
}

// ---------------------------------------------------------------------------------------------
// arithmetic on bit patterns: the host where it rounds the same, softfloat otherwise

fn add(f: Fmt, rm: Round, a: u64, b: u64) -> u64 {
    if rm == Round::Even {
        if f == F32 {
            return u64::from((f32::from_bits(a as u32) + f32::from_bits(b as u32)).to_bits());
        }
        if f == F64 {
            return (f64::from_bits(a) + f64::from_bits(b)).to_bits();
        }
    }
    sf::add(f, rm, a, b)
}

fn mul(f: Fmt, rm: Round, a: u64, b: u64) -> u64 {
    if rm == Round::Even {
        if f == F32 {
            return u64::from((f32::from_bits(a as u32) * f32::from_bits(b as u32)).to_bits());
        }
        if f == F64 {
            return (f64::from_bits(a) * f64::from_bits(b)).to_bits();
        }
    }
    sf::mul(f, rm, a, b)
}

fn fma(f: Fmt, rm: Round, a: u64, b: u64, c: u64) -> u64 {
    if rm == Round::Even {
        if f == F32 {
            let (a, b, c) = (f32::from_bits(a as u32), f32::from_bits(b as u32), f32::from_bits(c as u32));
            return u64::from(fma_f32(a, b, c).to_bits());
        }
        if f == F64 {
            return libm::fma(f64::from_bits(a), f64::from_bits(b), f64::from_bits(c)).to_bits();
        }
    }
    sf::fma(f, rm, a, b, c, 0)
}

/// `v_mad_*`: the product rounded, then the sum.
fn mad(f: Fmt, rm: Round, a: u64, b: u64, c: u64) -> u64 {
    add(f, rm, mul(f, rm, a, b), c)
}

/// The DX9 multiply of `v_mul_legacy_f32`/`v_mad_legacy_f32`: ±0 times anything (∞ and NaN
/// included) is +0.
fn mul_legacy(f: Fmt, rm: Round, a: u64, b: u64) -> u64 {
    if f.is_zero(a) || f.is_zero(b) {
        0
    } else {
        mul(f, rm, a, b)
    }
}

fn one(f: Fmt) -> u64 {
    (f.bias() as u64) << f.frac
}

fn cmp(f: Fmt, a: u64, b: u64) -> Option<Ordering> {
    sf::to_f64(f, a).partial_cmp(&sf::to_f64(f, b))
}

/// IEEE minNum/maxNum as the VALU does them in IEEE mode: a NaN operand yields the other
/// (quieted), −0 < +0.
fn minmax(f: Fmt, a: u64, b: u64, max: bool) -> u64 {
    if f.is_nan(a) {
        return f.quiet(b);
    }
    if f.is_nan(b) {
        return f.quiet(a);
    }
    let ord = match cmp(f, a, b) {
        Some(Ordering::Equal) => f.is_neg(b).cmp(&f.is_neg(a)), // -0 < +0
        Some(o) => o,
        None => Ordering::Equal,
    };
    if (ord == Ordering::Greater) == max {
        a
    } else {
        b
    }
}

/// `v_med3_*`: with a NaN operand the minimum of the three, else the median.
fn med3(f: Fmt, a: u64, b: u64, c: u64) -> u64 {
    if f.is_nan(a) || f.is_nan(b) || f.is_nan(c) {
        return minmax(f, minmax(f, a, b, false), c, false);
    }
    let m = minmax(f, minmax(f, a, b, true), c, true);
    let eq = |x: u64| cmp(f, m, x) == Some(Ordering::Equal);
    if eq(a) {
        minmax(f, b, c, true)
    } else if eq(b) {
        minmax(f, a, c, true)
    } else {
        minmax(f, a, b, true)
    }
}

/// Integer rounding of a float (`v_trunc/floor/ceil/rndne_*`): exact, the sign of zero kept.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ToInt {
    Trunc,
    Floor,
    Ceil,
    Even,
}

fn rint(f: Fmt, x: u64, how: ToInt) -> u64 {
    let Val::Fin { neg, m, e } = sf::unpack(f, x) else { return f.quiet(x) };
    if e >= 0 {
        return x;
    }
    let s = (-e) as u32;
    let (q, rem, half) = if s >= 64 { (0, m, u64::MAX) } else { (m >> s, m & ((1 << s) - 1), 1u64 << (s - 1)) };
    let inexact = rem != 0;
    let up = match how {
        ToInt::Trunc => false,
        ToInt::Floor => neg && inexact,
        ToInt::Ceil => !neg && inexact,
        ToInt::Even => s <= 64 && (rem > half || (rem == half && q & 1 == 1)),
    };
    let q = q + u64::from(up);
    if q == 0 {
        f.zero(neg)
    } else {
        sf::from_int(f, Round::Even, neg, q)
    }
}

/// `v_fract_*`: x − floor(x), at most the largest value below 1; NaN for ±∞ and NaN.
fn fract(f: Fmt, rm: Round, x: u64) -> u64 {
    if f.is_nan(x) || f.is_inf(x) {
        return f.default_nan();
    }
    let r = add(f, rm, x, f.neg(rint(f, x, ToInt::Floor)));
    let below_one = one(f) - 1;
    if cmp(f, r, below_one) == Some(Ordering::Greater) {
        below_one
    } else {
        r
    }
}

/// `v_frexp_mant_*`: the significand in [0.5, 1) with the sign; ±∞, NaN and ±0 unchanged.
fn frexp_mant(f: Fmt, x: u64) -> u64 {
    let Val::Fin { neg, m, .. } = sf::unpack(f, x) else { return x };
    let m = m << (f.frac + 1 - (64 - m.leading_zeros()));
    f.zero(neg) | ((f.bias() - 1) as u64) << f.frac | (m & f.frac_mask())
}

/// `v_frexp_exp_*`: the exponent of the significand in [0.5, 1); 0 for ±∞, NaN and ±0.
fn frexp_exp(f: Fmt, x: u64) -> i32 {
    match sf::unpack(f, x) {
        Val::Fin { m, e, .. } => e + (64 - m.leading_zeros()) as i32,
        _ => 0,
    }
}

/// `v_cmp_class_*`: which bit of the class mask the value sets (0 signalling NaN, 1 quiet NaN,
/// 2 −∞, 3 −normal, 4 −denormal, 5 −0, 6 +0, 7 +denormal, 8 +normal, 9 +∞).
fn class(f: Fmt, x: u64) -> u32 {
    if f.is_nan(x) {
        return u32::from(x >> (f.frac - 1) & 1 != 0);
    }
    let neg = f.is_neg(x);
    let k = if f.is_inf(x) {
        0
    } else if f.exponent(x) != 0 {
        1
    } else if f.is_denormal(x) {
        2
    } else {
        3
    };
    if neg {
        2 + k
    } else {
        9 - k
    }
}

/// Clamp to [0, 1] (NaN → +0, DX10_CLAMP; −0 stays −0).
fn clamp01(f: Fmt, x: u64) -> u64 {
    if f.is_nan(x) {
        return 0;
    }
    if f.is_neg(x) && !f.is_zero(x) {
        return 0;
    }
    if cmp(f, x, one(f)) == Some(Ordering::Greater) {
        one(f)
    } else {
        x
    }
}

/// Saturating float → integer of the given range, NaN → 0 (the conversions' rule), after the
/// integer rounding `how`.
fn to_int(f: Fmt, x: u64, how: ToInt, min: i64, max: i64) -> i64 {
    if f.is_nan(x) {
        return 0;
    }
    let v = sf::to_f64(f, rint(f, x, how));
    if v <= min as f64 {
        min
    } else if v >= max as f64 {
        max
    } else {
        v as i64
    }
}

// ---------------------------------------------------------------------------------------------
// operands

fn has_opsel(e: &Exe) -> bool {
    e.inst.op.spec().flags & spec::OPSEL != 0
}

/// `op_sel` is only honoured on the opcodes that have it (VOP3P reads it separately).
fn no_opsel(e: &Exe) -> Result<(), ExecErrorKind> {
    if e.inst.mods.op_sel != 0 && !has_opsel(e) {
        return Err(ExecErrorKind::Unimplemented);
    }
    Ok(())
}

/// A float inline constant as f16 bits.
fn float_const_f16(c: FloatConst) -> u32 {
    match c {
        FloatConst::Half => 0x3800,
        FloatConst::NegHalf => 0xB800,
        FloatConst::One => 0x3C00,
        FloatConst::NegOne => 0xBC00,
        FloatConst::Two => 0x4000,
        FloatConst::NegTwo => 0xC000,
        FloatConst::Four => 0x4400,
        FloatConst::NegFour => 0xC400,
        FloatConst::InvTwoPi => 0x3118,
    }
}

/// The 32 bits a 16-bit (or packed 16-bit) operand reads: registers as they are; an integer
/// constant sign-extended; a float constant as its f16 pattern in the low half, the high half
/// 0; the literal as it is.
fn word16(w: &Wave, o: &Operand) -> Result<Lanes, ExecErrorKind> {
    Ok(match *o {
        Operand::Int(i) => [i32::from(i) as u32; LANES],
        Operand::Float(c) => [float_const_f16(c); LANES],
        Operand::Literal(l) => [l; LANES],
        _ => w.v32(o)?,
    })
}

/// The raw bits of float source `n` of format `f` (16-bit sources: the half `op_sel` picks).
fn raw(w: &Wave, e: &Exe, n: usize, f: Fmt) -> Result<Bits, ExecErrorKind> {
    let o = src(e, n)?;
    Ok(if f == F64 {
        w.v64(&o, Ty::F64)?
    } else if f == F32 {
        let v = w.v32(&o)?;
        core::array::from_fn(|l| u64::from(v[l]))
    } else {
        let v = word16(w, &o)?;
        let hi = e.inst.mods.op_sel >> n & 1 != 0;
        core::array::from_fn(|l| u64::from(if hi { v[l] >> 16 } else { v[l] & 0xFFFF }))
    })
}

/// Float source `n` with abs/neg applied and, unless `en` keeps them, denormals flushed.
fn fsrc(w: &Wave, e: &Exe, n: usize, f: Fmt, en: Env) -> Result<Bits, ExecErrorKind> {
    let mut v = raw(w, e, n, f)?;
    let m = e.inst.mods;
    let (abs, neg) = (m.abs >> n & 1 != 0, m.neg >> n & 1 != 0);
    for x in v.iter_mut() {
        if abs {
            *x = f.abs(*x);
        }
        if neg {
            *x = f.neg(*x);
        }
        if !en.keep_in {
            *x = f.flush(*x);
        }
    }
    Ok(v)
}

/// The output modifiers on a float result: omod, clamp, then output flushing.
fn fpost(e: &Exe, f: Fmt, en: Env, x: u64) -> u64 {
    let m = e.inst.mods;
    let scale = match m.omod {
        1 => 1,
        2 => 2,
        3 => -1,
        _ => 0,
    };
    let mut x = if scale != 0 { sf::ldexp(f, en.rm, x, scale) } else { x };
    if m.clamp {
        x = clamp01(f, x);
    }
    if !en.keep_out {
        x = f.flush(x);
    }
    x
}

/// Writes a 16-bit result to `d`: the opcodes with `op_sel` write the half `op_sel[3]` picks
/// and keep the other; the rest write the low half and zero the high one (gfx9).
fn put16(w: &mut Wave, e: &Exe, d: &Operand, r: &Bits) -> Result<(), ExecErrorKind> {
    let exec = w.exec;
    let hi = e.inst.mods.op_sel & 8 != 0;
    let v: Lanes = if has_opsel(e) {
        let old = w.v32(d)?;
        core::array::from_fn(|l| {
            let x = r[l] as u32 & 0xFFFF;
            if hi {
                (old[l] & 0xFFFF) | x << 16
            } else {
                (old[l] & 0xFFFF_0000) | x
            }
        })
    } else {
        core::array::from_fn(|l| r[l] as u32 & 0xFFFF)
    };
    w.set_v32k(d, 0, &v, exec)
}

/// Writes results of format `f` to the destination.
fn put(w: &mut Wave, e: &Exe, f: Fmt, r: &Bits) -> Result<(), ExecErrorKind> {
    let d = dst(e)?;
    if f == F64 {
        w.set_v64(&d, r)
    } else if f == F32 {
        let v: Lanes = core::array::from_fn(|l| r[l] as u32);
        w.set_v32(&d, &v)
    } else {
        put16(w, e, &d, r)
    }
}

/// The f32 path of [`vopf`] and [`vmacf`] (docs/executor.md §6 "speed"): the same semantics
/// on borrowed sources — `ops` read in place, abs/neg as the masks `mods` give (`x & and ^
/// xor`), input denormals flushed unless `en` keeps them, `op` on the values widened to the
/// bit patterns `vopf` passes, then [`fpost`] — in one infallible loop over the lanes, the
/// result written to the destination's active lanes.
#[inline(always)]
fn vopf32<const N: usize>(
    w: &mut Wave,
    e: &Exe,
    en: Env,
    ops: [Operand; N],
    mods: [(u32, u32); N],
    op: impl Fn(Env, [u64; N]) -> u64,
) -> R {
    let mut s = [Src::Splat(0); N];
    for (k, o) in ops.iter().enumerate() {
        s[k] = w.src32(o)?;
    }
    let m = e.inst.mods;
    let post = m.omod != 0 || m.clamp || !en.keep_out;
    let mut r = [0u32; LANES];
    for (l, d) in r.iter_mut().enumerate() {
        let mut x = [0u64; N];
        for k in 0..N {
            let b = u64::from((s[k].at(l) & mods[k].0) ^ mods[k].1);
            x[k] = if en.keep_in { b } else { F32.flush(b) };
        }
        let y = op(en, x);
        *d = if post { fpost(e, F32, en, y) } else { y } as u32;
    }
    w.set_v32(&dst(e)?, &r)?;
    NEXT
}

/// `v_fma_f32` and (`mac`) `v_fmac_f32`, the SGEMM and SAXPY inner loops' instruction
/// (docs/executor.md §6 "speed"). In round-to-nearest-even: the sources staged as f32 once
/// (modifiers and flushing as [`vopf32`] applies them), then [`fma_f32`]'s fast case — the f64
/// sum converted — for every lane in a loop without branches the compiler can vectorise, and
/// `fma_f32` itself for the lanes whose sum is an f32 midpoint or below f32's normal range,
/// then [`fpost`]: the same bits as [`vopf32`] with `fma`. Other rounding modes take
/// [`vopf32`] with softfloat.
fn vfma_f32(w: &mut Wave, e: &Exe, mac: bool) -> R {
    no_opsel(e)?;
    let en = env(w, F32);
    let third = if mac { (dst(e)?, (u32::MAX, 0)) } else { (src(e, 2)?, f32_mods(e, 2)) };
    let ops = [src(e, 0)?, src(e, 1)?, third.0];
    let mods = [f32_mods(e, 0), f32_mods(e, 1), third.1];
    if en.rm != Round::Even {
        return vopf32(w, e, en, ops, mods, |en, [a, b, c]| fma(F32, en.rm, a, b, c));
    }
    let mut x = [[0f32; LANES]; 3];
    for k in 0..3 {
        let (and, xor) = mods[k];
        let stage = |b: u32| {
            let b = (b & and) ^ xor;
            // Flushing a denormal keeps its sign (`Fmt::flush`).
            let b = if !en.keep_in && b & 0x7F80_0000 == 0 { b & 0x8000_0000 } else { b };
            f32::from_bits(b)
        };
        match w.src32(&ops[k])? {
            Src::Splat(v) => x[k] = [stage(v); LANES],
            Src::Lanes(r) => {
                for (d, &b) in x[k].iter_mut().zip(r.iter()) {
                    *d = stage(b);
                }
            }
        }
    }
    // With every lane active the result goes straight into the destination (the sources are
    // staged in `x`), else into a lane array and then the EXEC lanes (docs/executor.md §6
    // "speed").
    let d = dst(e)?;
    let exec = w.exec;
    if exec == u64::MAX {
        fma_f32_lanes(e, en, &x, w.dst32_mut(&d)?);
    } else {
        let mut part = [0u32; LANES];
        fma_f32_lanes(e, en, &x, &mut part);
        w.set_v32k(&d, 0, &part, exec)?;
    }
    NEXT
}

/// [`vfma_f32`]'s lanes: `r[l]` is the fused `x[0][l] * x[1][l] + x[2][l]` after the output
/// modifiers. The f64 sum converted is exact unless it is an f32 midpoint (its 29 bits below
/// f32's precision exactly one half) or below f32's normal range (±0 included; a NaN or an
/// infinity converts exactly): both tests on f64 lanes in one loop the compiler vectorises,
/// the lanes flagged redone with [`fma_f32`].
#[inline(always)]
fn fma_f32_lanes(e: &Exe, en: Env, x: &[[f32; LANES]; 3], r: &mut Lanes) {
    let min_normal = f64::from(f32::MIN_POSITIVE);
    let mut slow = [0u8; LANES];
    for l in 0..LANES {
        let s = f64::from(x[0][l]) * f64::from(x[1][l]) + f64::from(x[2][l]);
        let tie = s.to_bits() & 0x1FFF_FFFF == 0x1000_0000;
        let tiny = s.abs() < min_normal;
        slow[l] = u8::from(tie | tiny);
        r[l] = (s as f32).to_bits();
    }
    if slow.iter().any(|&b| b != 0) {
        for l in 0..LANES {
            if slow[l] != 0 {
                r[l] = fma_f32(x[0][l], x[1][l], x[2][l]).to_bits();
            }
        }
    }
    let m = e.inst.mods;
    if m.omod != 0 || m.clamp || !en.keep_out {
        for v in r.iter_mut() {
            *v = fpost(e, F32, en, u64::from(*v)) as u32;
        }
    }
}

/// The `x & and ^ xor` masks of f32 source `n`'s abs and neg bits.
fn f32_mods(e: &Exe, n: usize) -> (u32, u32) {
    let m = e.inst.mods;
    let and = if m.abs >> n & 1 != 0 { 0x7FFF_FFFF } else { u32::MAX };
    let xor = if m.neg >> n & 1 != 0 { 0x8000_0000 } else { 0 };
    (and, xor)
}

/// `D = op(S0 … S(N−1))` on floats of format `f`, with the source and output modifiers.
fn vopf<const N: usize>(w: &mut Wave, e: &Exe, f: Fmt, en: Env, op: impl Fn(Env, [u64; N]) -> u64) -> R {
    no_opsel(e)?;
    if f == F32 {
        let mut ops = [Operand::Off; N];
        let mut mods = [(0, 0); N];
        for k in 0..N {
            ops[k] = src(e, k)?;
            mods[k] = f32_mods(e, k);
        }
        return vopf32(w, e, en, ops, mods, op);
    }
    let mut s = [[0u64; LANES]; N];
    for (k, v) in s.iter_mut().enumerate() {
        *v = fsrc(w, e, k, f, en)?;
    }
    let r: Bits = core::array::from_fn(|l| fpost(e, f, en, op(en, core::array::from_fn(|k| s[k][l]))));
    put(w, e, f, &r)?;
    NEXT
}

fn vop1f(w: &mut Wave, e: &Exe, f: Fmt, op: impl Fn(Env, u64) -> u64) -> R {
    let en = env(w, f);
    vopf::<1>(w, e, f, en, |en, [a]| op(en, a))
}

fn vop2f(w: &mut Wave, e: &Exe, f: Fmt, op: impl Fn(Env, u64, u64) -> u64) -> R {
    let en = env(w, f);
    vopf::<2>(w, e, f, en, |en, [a, b]| op(en, a, b))
}

fn vop3f(w: &mut Wave, e: &Exe, f: Fmt, op: impl Fn(Env, u64, u64, u64) -> u64) -> R {
    let en = env(w, f);
    vopf::<3>(w, e, f, en, |en, [a, b, c]| op(en, a, b, c))
}

/// The destination's current value as a float of format `f` (the addend of `v_mac`/`v_fmac`).
fn dst_as_src(w: &Wave, e: &Exe, f: Fmt, en: Env) -> Result<Bits, ExecErrorKind> {
    let d = dst(e)?;
    let v: Bits = if f == F64 {
        w.v64(&d, Ty::F64)?
    } else {
        let v = w.v32(&d)?;
        core::array::from_fn(|l| u64::from(if f == F16 { v[l] & 0xFFFF } else { v[l] }))
    };
    Ok(if en.keep_in { v } else { v.map(|x| f.flush(x)) })
}

/// `D = op(S0, S1, D)` (`v_mac_*`, `v_fmac_*`).
fn vmacf(w: &mut Wave, e: &Exe, f: Fmt, op: impl Fn(Round, u64, u64, u64) -> u64) -> R {
    no_opsel(e)?;
    let en = env(w, f);
    if f == F32 {
        // D as the addend: no abs/neg, flushed as the sources are (`dst_as_src`).
        let ops = [src(e, 0)?, src(e, 1)?, dst(e)?];
        let mods = [f32_mods(e, 0), f32_mods(e, 1), (u32::MAX, 0)];
        return vopf32(w, e, en, ops, mods, |en, [a, b, c]| op(en.rm, a, b, c));
    }
    let (a, b) = (fsrc(w, e, 0, f, en)?, fsrc(w, e, 1, f, en)?);
    let c = dst_as_src(w, e, f, en)?;
    let r: Bits = core::array::from_fn(|l| fpost(e, f, en, op(en.rm, a[l], b[l], c[l])));
    put(w, e, f, &r)?;
    NEXT
}

/// `v_madmk_* D, S0, K, S1` (K the multiplier) / `v_madak_* D, S0, S1, K` (K the addend).
/// `v_madmk`/`v_madak` (`fused` false: multiply, round, add) and gfx940's `v_fmamk_f32` /
/// `v_fmaak_f32` (`fused`: one rounding): S0 × K + S1, or with `addend` S0 × S1 + K.
fn vmadkf(w: &mut Wave, e: &Exe, f: Fmt, addend: bool, fused: bool) -> R {
    let en = env(w, f);
    let (a, b) = (fsrc(w, e, 0, f, en)?, fsrc(w, e, 1, f, en)?);
    let k = match field(e, Field::Literal, 0)? {
        Operand::Literal(k) => u64::from(if f == F16 { k & 0xFFFF } else { k }),
        _ => return Err(ExecErrorKind::Unimplemented),
    };
    let k = if en.keep_in { k } else { f.flush(k) };
    let r: Bits = core::array::from_fn(|l| {
        let op = if fused { fma } else { mad };
        let v = if addend { op(f, en.rm, a[l], b[l], k) } else { op(f, en.rm, a[l], k, b[l]) };
        fpost(e, f, en, v)
    });
    put(w, e, f, &r)?;
    NEXT
}

/// Integer source `n` of 32 bits.
fn isrc(w: &Wave, e: &Exe, n: usize) -> Result<Lanes, ExecErrorKind> {
    w.v32(&src(e, n)?)
}

/// `v_ldexp_*`: S0 × 2^S1 (S1 an i32; an i16 for f16).
fn vldexp(w: &mut Wave, e: &Exe, f: Fmt) -> R {
    no_opsel(e)?;
    let en = env(w, f);
    let a = fsrc(w, e, 0, f, en)?;
    let n = isrc(w, e, 1)?;
    let r: Bits = core::array::from_fn(|l| {
        let k = if f == F16 { i32::from(n[l] as u16 as i16) } else { n[l] as i32 };
        fpost(e, f, en, sf::ldexp(f, en.rm, a[l], k))
    });
    put(w, e, f, &r)?;
    NEXT
}

/// Float → integer results (no output modifiers).
fn vcvt_out(w: &mut Wave, e: &Exe, f: Fmt, op: impl Fn(u64) -> u32) -> R {
    no_opsel(e)?;
    if e.inst.mods.omod != 0 {
        return Err(ExecErrorKind::Unimplemented);
    }
    let en = env(w, f);
    let a = fsrc(w, e, 0, f, en)?;
    let r: Lanes = core::array::from_fn(|l| op(a[l]));
    w.set_v32(&dst(e)?, &r)?;
    NEXT
}

/// Integer → float results (`v_cvt_f*_[iu]*`; a 16-bit source for f16 results).
fn vcvt_in(w: &mut Wave, e: &Exe, f: Fmt, op: impl Fn(Round, u32) -> u64) -> R {
    no_opsel(e)?;
    if e.inst.mods.neg != 0 || e.inst.mods.abs != 0 {
        return Err(ExecErrorKind::Unimplemented);
    }
    let en = env(w, f);
    let a = if f == F16 { word16(w, &src(e, 0)?)? } else { isrc(w, e, 0)? };
    let r: Bits = core::array::from_fn(|l| fpost(e, f, en, op(en.rm, a[l])));
    put(w, e, f, &r)?;
    NEXT
}

/// Conversions between float formats, rounded in the destination's mode (f16 results in the
/// f64/f16 field, as the ISA says).
fn vcvt_ff(w: &mut Wave, e: &Exe, from: Fmt, to: Fmt) -> R {
    no_opsel(e)?;
    let (ein, eout) = (env(w, from), env(w, to));
    let a = fsrc(w, e, 0, from, ein)?;
    let r: Bits = core::array::from_fn(|l| fpost(e, to, eout, sf::convert(from, to, eout.rm, a[l])));
    put(w, e, to, &r)?;
    NEXT
}

// ---------------------------------------------------------------------------------------------
// transcendentals: f64 host math (libm), rounded once to the destination

/// sin(2πx) (`cos` false) or cos(2πx), exact argument reduction: x minus the nearest integer
/// (exact), folded into [−¼, ¼] turns.
fn sin_turns(x: f64, cos: bool) -> f64 {
    if !x.is_finite() {
        return f64::NAN;
    }
    if x == 0.0 && !cos {
        return x; // keeps the sign
    }
    let r = x - libm::roundeven(x); // [-0.5, 0.5], exact for f32/f16 inputs
    let tau = 2.0 * core::f64::consts::PI;
    if cos {
        // cos(2πr) = sin(2π(¼ − |r|))
        return libm::sin(tau * (0.25 - r.abs()));
    }
    let r = if r > 0.25 {
        0.5 - r
    } else if r < -0.25 {
        -0.5 - r
    } else {
        r
    };
    libm::sin(tau * r)
}

/// A unary function computed in f64 from a value of format `f` and rounded back to it.
fn via_f64(f: Fmt, x: u64, op: impl Fn(f64) -> f64) -> u64 {
    let y = op(sf::to_f64(f, x));
    if y.is_nan() {
        return if f.is_nan(x) { f.quiet(x) } else { f.default_nan() };
    }
    sf::from_f64(f, y)
}

fn rsqrt(x: f64) -> f64 {
    1.0 / libm::sqrt(x)
}

/// The f32 transcendentals: input and output denormals are flushed whatever MODE says (the
/// ISA: "denormals are flushed"); the result is the f64 value rounded to nearest.
fn vtrans32(w: &mut Wave, e: &Exe, op: fn(f64) -> f64) -> R {
    let en = env(w, F32).flushing();
    vopf::<1>(w, e, F32, en, |_, [a]| via_f64(F32, a, op))
}

/// f64 and f16 transcendentals: denormals as MODE says.
fn vtrans(w: &mut Wave, e: &Exe, f: Fmt, op: fn(f64) -> f64) -> R {
    let en = env(w, f);
    vopf::<1>(w, e, f, en, |_, [a]| via_f64(f, a, op))
}

/// 1/x correctly rounded (f32 division by the host; f64 likewise).
fn rcp(f: Fmt, x: u64) -> u64 {
    if f == F32 {
        u64::from((1.0f32 / f32::from_bits(x as u32)).to_bits())
    } else if f == F64 {
        (1.0f64 / f64::from_bits(x)).to_bits()
    } else {
        via_f64(f, x, |v| 1.0 / v)
    }
}

// ---------------------------------------------------------------------------------------------
// division helpers

/// `v_div_scale_f32/f64 D, VCC, S0, S1, S2` (S1 the denominator, S2 the numerator): the ISA's
/// pseudocode, D = S0 scaled by 2^±64 (f32) or 2^±128 (f64) where the quotient or the
/// denominator's reciprocal would be denormal, VCC set where the quotient needs post-scaling.
/// "1 / S1 is denormal" and "S2 / S1 is denormal" are read in the operands' format (read in
/// f64, as the pseudocode's casts suggest, the first could never hold and a denominator above
/// 2^126 would leave `v_rcp_f32` a denormal result to flush).
fn div_scale(w: &mut Wave, e: &Exe, f: Fmt) -> R {
    no_opsel(e)?;
    let en = env(w, f).keeping_inputs();
    let (s0, s1, s2) = (fsrc(w, e, 0, f, en)?, fsrc(w, e, 1, f, en)?, fsrc(w, e, 2, f, en)?);
    let (limit, tiny, k) = if f == F32 { (96, 23, 64) } else { (768, 53, 128) };
    let exec = w.exec;
    let mut vcc = 0u64;
    let mut r = [0u64; LANES];
    for l in 0..LANES {
        let (a, d, n) = (s0[l], s1[l], s2[l]);
        let eq = |x: u64, y: u64| cmp(f, x, y) == Some(Ordering::Equal);
        // "x / y is denormal": the quotient rounded to the format.
        let quot_denorm = |x: u64, y: u64| f.is_denormal(div(f, x, y));
        let (ed, en_) = (f.exponent(d) as i64, f.exponent(n) as i64);
        let (v, c) = if f.is_zero(n) || f.is_zero(d) {
            (f.default_nan() & !f.sign(), false)
        } else if en_ - ed >= limit {
            // N/D near the largest value: scale the denominator only.
            (if eq(a, d) { sf::ldexp(f, en.rm, a, k) } else { a }, true)
        } else if f.is_denormal(d) {
            (sf::ldexp(f, en.rm, a, k), false)
        } else if quot_denorm(one(f), d) && quot_denorm(n, d) {
            // Scale the denominator only, down (the ISA's pseudocode prints 2^+64 here, which
            // overflows a denominator whose reciprocal is denormal: 1 / f32::MAX would be 0).
            (if eq(a, d) { sf::ldexp(f, en.rm, a, -k) } else { a }, true)
        } else if quot_denorm(one(f), d) {
            (sf::ldexp(f, en.rm, a, -k), false)
        } else if quot_denorm(n, d) {
            (if eq(a, n) { sf::ldexp(f, en.rm, a, k) } else { a }, true)
        } else if en_ <= tiny {
            // The numerator is tiny.
            (sf::ldexp(f, en.rm, a, k), false)
        } else {
            (a, false)
        };
        r[l] = fpost(e, f, en, v);
        if c && exec >> l & 1 != 0 {
            vcc |= 1 << l;
        }
    }
    put(w, e, f, &r)?;
    w.set_s64(&carry_out(e)?, vcc)?;
    NEXT
}

/// x / y rounded to nearest (f32 and f64 by the host; the scale tests only).
fn div(f: Fmt, x: u64, y: u64) -> u64 {
    if f == F32 {
        u64::from((f32::from_bits(x as u32) / f32::from_bits(y as u32)).to_bits())
    } else {
        (f64::from_bits(x) / f64::from_bits(y)).to_bits()
    }
}

/// `v_div_fmas_f32/f64`: fma(S0, S1, S2), scaled (in the same rounding) by 2^64 (f32) or
/// 2^128 (f64) where VCC is set and S2's exponent is above the bias, by 2^−64 / 2^−128 where
/// VCC is set and it is not. (The ISA's pseudocode prints a fixed 2^32 / 2^64; the scale that
/// undoes `v_div_scale` in both directions is the one here, as the division macro needs and
/// as hardware traces show.) Input denormals are not flushed.
fn div_fmas(w: &mut Wave, e: &Exe, f: Fmt) -> R {
    no_opsel(e)?;
    let en = env(w, f).keeping_inputs();
    let (a, b, c) = (fsrc(w, e, 0, f, en)?, fsrc(w, e, 1, f, en)?, fsrc(w, e, 2, f, en)?);
    let vcc = w.vcc;
    let k = if f == F32 { 64 } else { 128 };
    let r: Bits = core::array::from_fn(|l| {
        let v = if vcc >> l & 1 != 0 {
            let s = if f.exponent(c[l]) as i32 > f.bias() { k } else { -k };
            sf::fma(f, en.rm, a[l], b[l], c[l], s)
        } else {
            fma(f, en.rm, a[l], b[l], c[l])
        };
        fpost(e, f, en, v)
    });
    put(w, e, f, &r)?;
    NEXT
}

/// `v_div_fixup_*`: the special cases of S2 / S1 applied to the quotient S0 (the ISA's
/// pseudocode; a NaN quotient from an overflowed estimate becomes ±∞ as on the hardware).
fn div_fixup_one(f: Fmt, rm: Round, q: u64, d: u64, n: u64, ranges: bool) -> u64 {
    let neg = f.is_neg(d) != f.is_neg(n);
    let (ed, en) = (f.exponent(d) as i64, f.exponent(n) as i64);
    // Exponent differences below which the quotient is under half the smallest denormal.
    let under = if f == F32 { -150 } else { -1075 };
    if f.is_nan(n) {
        f.quiet(n)
    } else if f.is_nan(d) {
        f.quiet(d)
    } else if (f.is_zero(d) && f.is_zero(n)) || (f.is_inf(d) && f.is_inf(n)) {
        f.default_nan()
    } else if f.is_zero(d) || f.is_inf(n) {
        f.inf(neg)
    } else if f.is_inf(d) || f.is_zero(n) {
        f.zero(neg)
    } else if ranges && en - ed < under {
        // Below half the smallest denormal: the underflowed result in the rounding mode.
        sf::round(f, rm, neg, 0, 0, true)
    } else if f.is_nan(q) {
        f.inf(neg)
    } else {
        f.abs(q) | f.zero(neg)
    }
}

fn div_fixup(w: &mut Wave, e: &Exe, f: Fmt) -> R {
    let ranges = f != F16;
    vop3f(w, e, f, |en, q, d, n| div_fixup_one(f, en.rm, q, d, n, ranges))
}

/// The legacy f16 forms (`v_mad_legacy_f16`, `v_fma_legacy_f16`, `v_div_fixup_legacy_f16`):
/// `op_sel[3]` writes the high half and keeps the low one, else the low half with the high half
/// zeroed.
fn legacy16(w: &mut Wave, e: &Exe, op: impl Fn(Env, u64, u64, u64) -> u64) -> R {
    let m = e.inst.mods;
    if m.op_sel & 7 != 0 {
        return Err(ExecErrorKind::Unimplemented);
    }
    let en = env(w, F16);
    let (a, b, c) = (fsrc(w, e, 0, F16, en)?, fsrc(w, e, 1, F16, en)?, fsrc(w, e, 2, F16, en)?);
    let d = dst(e)?;
    let old = w.v32(&d)?;
    let hi = m.op_sel & 8 != 0;
    let v: Lanes = core::array::from_fn(|l| {
        let x = fpost(e, F16, en, op(en, a[l], b[l], c[l])) as u32 & 0xFFFF;
        if hi {
            (old[l] & 0xFFFF) | x << 16
        } else {
            x
        }
    });
    let exec = w.exec;
    w.set_v32k(&d, 0, &v, exec)?;
    NEXT
}

/// The 1201 fraction bits of 2/π the hardware's `v_trig_preop_f64` table holds, most
/// significant first (2/π = 0.101000101111…₂), in 19 words (the last 15 bits are zero).
const TWO_OVER_PI: [u64; 19] = [
    0xA2F9_836E_4E44_1529,
    0xFC27_57D1_F534_DDC0,
    0xDB62_9599_3C43_9041,
    0xFE51_63AB_DEBB_C561,
    0xB724_6E3A_424D_D2E0,
    0x0649_2EEA_09D1_921C,
    0xFE1D_EB1C_B129_A73E,
    0xE882_35F5_2EBB_4484,
    0xE99C_7026_B45F_7E41,
    0x3991_D639_8353_39F4,
    0x9C84_5F8B_BDF9_283B,
    0x1FF8_97FF_DE05_980F,
    0xEF2F_118B_5A0A_6D1F,
    0x6D36_7ECF_27CB_09B7,
    0x4F46_3F66_9E5F_EA2D,
    0x7527_BAC7_EBE5_F17B,
    0x3D07_39F7_8A52_92EA,
    0x6BFB_5FB1_1F8D_5D08,
    0x5603_3046_FC7B_0000,
];

/// Bits `at .. at + 53` of 2/π's fraction (bit 0 the first after the point) as an integer;
/// bits past the table's 1201 are 0.
fn two_over_pi_bits(at: u32) -> u64 {
    let mut v = 0u64;
    for i in 0..53 {
        let b = at + i;
        let bit = if b < 1201 { TWO_OVER_PI[(b / 64) as usize] >> (63 - b % 64) & 1 } else { 0 };
        v = v << 1 | bit;
    }
    v
}

/// `v_trig_preop_f64 D, S0, S1`: 53 bits of 2/π from bit `53 × S1[4:0]` on (further on by
/// S0's exponent beyond 1077), scaled to their place (2^128 more for S0's exponent ≥ 1968), as
/// the ISA's pseudocode says.
fn trig_preop(w: &mut Wave, e: &Exe, _g: &mut Group<'_>) -> R {
    no_opsel(e)?;
    let en = env(w, F64);
    let a = fsrc(w, e, 0, F64, en.keeping_inputs())?;
    let seg = isrc(w, e, 1)?;
    let r: Bits = core::array::from_fn(|l| {
        let ex = F64.exponent(a[l]) as i32;
        let shift = (seg[l] & 31) as i32 * 53 + (ex - 1077).max(0);
        let bits = two_over_pi_bits(shift as u32);
        let mut scale = -53 - shift;
        if ex >= 1968 {
            scale += 128;
        }
        fpost(e, F64, en, sf::ldexp(F64, Round::Even, sf::from_int(F64, Round::Even, false, bits), scale))
    });
    put(w, e, F64, &r)?;
    NEXT
}

// ---------------------------------------------------------------------------------------------
// compares and classes

/// aux of a compare: condition (bits 3:0), type (bits 7:4), `CMPX` (bit 8).
const CMP_F16: u32 = 0;
const CMP_I16: u32 = 1;
const CMP_U16: u32 = 2;
/// aux type of `v_cmp_class_*`: the format (bits 7:4: 0 f16, 1 f32, 2 f64).
const CLASS: u32 = 1 << 9;

fn cmp_write(w: &mut Wave, e: &Exe, bits: u64) -> R {
    let bits = bits & w.exec;
    w.set_s64(&op(e, 0)?, bits)?;
    if e.aux & CMPX != 0 {
        w.exec = bits;
    }
    NEXT
}

/// 16-bit compares (`v_cmp[x]_*_f16`, `_i16`, `_u16`).
fn vcmp16(w: &mut Wave, e: &Exe, _g: &mut Group<'_>) -> R {
    let (cond, ty) = (e.aux & 15, (e.aux >> 4) & 15);
    let m = e.inst.mods;
    if m.clamp || m.omod != 0 || m.op_sel != 0 || (ty != CMP_F16 && (m.neg != 0 || m.abs != 0)) {
        return Err(ExecErrorKind::Unimplemented);
    }
    let en = env(w, F16);
    let mut bits = 0u64;
    if ty == CMP_F16 {
        let (a, b) = (fsrc(w, e, 0, F16, en)?, fsrc(w, e, 1, F16, en)?);
        for l in 0..LANES {
            bits |= u64::from(float_cond(cond, cmp(F16, a[l], b[l]))) << l;
        }
    } else {
        let (a, b) = (raw(w, e, 0, F16)?, raw(w, e, 1, F16)?);
        for l in 0..LANES {
            let ord = if ty == CMP_I16 { (a[l] as u16 as i16).cmp(&(b[l] as u16 as i16)) } else { a[l].cmp(&b[l]) };
            bits |= u64::from(int_cond(cond, ord)) << l;
        }
    }
    cmp_write(w, e, bits)
}

/// `v_cmp[x]_class_*`: bit `class(S0)` of the mask S1 (S0's modifiers applied, denormals seen
/// as denormals).
fn vclass(w: &mut Wave, e: &Exe, _g: &mut Group<'_>) -> R {
    let f = [F16, F32, F64][((e.aux >> 4) & 3).min(2) as usize];
    let m = e.inst.mods;
    if m.clamp || m.omod != 0 || m.op_sel != 0 {
        return Err(ExecErrorKind::Unimplemented);
    }
    let a = fsrc(w, e, 0, f, Env { rm: Round::Even, keep_in: true, keep_out: true })?;
    let mask = isrc(w, e, 1)?;
    let mut bits = 0u64;
    for l in 0..LANES {
        bits |= u64::from(mask[l] >> class(f, a[l]) & 1) << l;
    }
    cmp_write(w, e, bits)
}

fn cmp16_aux(name: &str) -> Option<u32> {
    let (x, rest) =
        if let Some(r) = name.strip_prefix("v_cmpx_") { (CMPX, r) } else { (0, name.strip_prefix("v_cmp_")?) };
    let (cond, ty) = rest.split_once('_')?;
    if cond == "class" {
        let f = match ty {
            "f16" => 0,
            "f32" => 1,
            "f64" => 2,
            _ => return None,
        };
        return Some(CLASS | f << 4 | x);
    }
    let ty = match ty {
        "f16" => CMP_F16,
        "i16" => CMP_I16,
        "u16" => CMP_U16,
        _ => return None,
    };
    let conds: &[&str] = if ty == CMP_F16 {
        &["f", "lt", "eq", "le", "gt", "lg", "ge", "o", "u", "nge", "nlg", "ngt", "nle", "neq", "nlt", "tru"]
    } else {
        &["f", "lt", "eq", "le", "gt", "ne", "ge", "t"]
    };
    let c = conds.iter().position(|c| *c == cond)? as u32;
    Some(c | ty << 4 | x)
}

// ---------------------------------------------------------------------------------------------
// 16-bit integers

/// `D = op(S0 … S(N−1), clamp)` on 16-bit integers (op_sel halves where the opcode has it).
fn vop16i<const N: usize>(w: &mut Wave, e: &Exe, op: impl Fn([u16; N], bool) -> u16) -> R {
    no_opsel(e)?;
    let m = e.inst.mods;
    if m.neg != 0 || m.abs != 0 || m.omod != 0 {
        return Err(ExecErrorKind::Unimplemented);
    }
    let mut s = [[0u64; LANES]; N];
    for (k, v) in s.iter_mut().enumerate() {
        *v = raw(w, e, k, F16)?;
    }
    let r: Bits = core::array::from_fn(|l| u64::from(op(core::array::from_fn(|k| s[k][l] as u16), m.clamp)));
    put16(w, e, &dst(e)?, &r)?;
    NEXT
}

fn sat_u16(v: i64, clamp: bool) -> u16 {
    if clamp {
        v.clamp(0, 0xFFFF) as u16
    } else {
        v as u16
    }
}

fn sat_i16(v: i64, clamp: bool) -> u16 {
    if clamp {
        v.clamp(-0x8000, 0x7FFF) as i16 as u16
    } else {
        v as u16
    }
}

fn i16v(x: u16) -> i64 {
    i64::from(x as i16)
}

fn u16v(x: u16) -> i64 {
    i64::from(x)
}

/// `v_mad_u32_u16` / `v_mad_i32_i16`: 16-bit factors (op_sel halves), a 32-bit addend.
fn vmad32_16(w: &mut Wave, e: &Exe, signed: bool) -> R {
    let m = e.inst.mods;
    if m.neg != 0 || m.abs != 0 || m.omod != 0 || m.op_sel & 0xC != 0 {
        return Err(ExecErrorKind::Unimplemented);
    }
    let (a, b) = (raw(w, e, 0, F16)?, raw(w, e, 1, F16)?);
    let c = isrc(w, e, 2)?;
    let r: Lanes = core::array::from_fn(|l| {
        let (x, y) = (a[l] as u16, b[l] as u16);
        if signed {
            let p = i64::from(x as i16) * i64::from(y as i16) + i64::from(c[l] as i32);
            if m.clamp {
                p.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32 as u32
            } else {
                p as u32
            }
        } else {
            let p = u64::from(x) * u64::from(y) + u64::from(c[l]);
            if m.clamp {
                p.min(u64::from(u32::MAX)) as u32
            } else {
                p as u32
            }
        }
    });
    w.set_v32(&dst(e)?, &r)?;
    NEXT
}

// ---------------------------------------------------------------------------------------------
// packed math (VOP3P)

/// The (low, high) halves of packed source `n`: op_sel picks the half the low lane reads,
/// op_sel_hi the one the high lane reads; neg_lo/neg_hi flip the sign bits when `float`.
fn pk16(w: &Wave, e: &Exe, n: usize, float: bool) -> Result<[(u16, u16); LANES], ExecErrorKind> {
    let m = e.inst.mods;
    let v = word16(w, &src(e, n)?)?;
    let (sl, sh) = (m.op_sel >> n & 1 != 0, m.op_sel_hi >> n & 1 != 0);
    let (nl, nh) = (m.neg >> n & 1 != 0, m.abs >> n & 1 != 0);
    if !float && (nl || nh) {
        return Err(ExecErrorKind::Unimplemented);
    }
    let half = |x: u32, hi: bool| if hi { (x >> 16) as u16 } else { x as u16 };
    Ok(core::array::from_fn(|l| {
        let (mut lo, mut hi) = (half(v[l], sl), half(v[l], sh));
        if nl {
            lo ^= 0x8000;
        }
        if nh {
            hi ^= 0x8000;
        }
        (lo, hi)
    }))
}

/// `D.lo = op(S*.lo)`, `D.hi = op(S*.hi)` over N packed 16-bit sources.
fn vpk16<const N: usize>(w: &mut Wave, e: &Exe, float: bool, op: impl Fn(Env, [u16; N], bool) -> u16) -> R {
    let m = e.inst.mods;
    let en = env(w, F16);
    let mut s = [[(0u16, 0u16); LANES]; N];
    for (k, v) in s.iter_mut().enumerate() {
        *v = pk16(w, e, k, float)?;
    }
    let fl = |x: u16| if float && !en.keep_in { F16.flush(u64::from(x)) as u16 } else { x };
    let post = |x: u16| {
        if !float {
            return x;
        }
        let mut x = u64::from(x);
        if m.clamp {
            x = clamp01(F16, x);
        }
        if !en.keep_out {
            x = F16.flush(x);
        }
        x as u16
    };
    let r: Lanes = core::array::from_fn(|l| {
        let lo = post(op(en, core::array::from_fn(|k| fl(s[k][l].0)), m.clamp));
        let hi = post(op(en, core::array::from_fn(|k| fl(s[k][l].1)), m.clamp));
        u32::from(lo) | u32::from(hi) << 16
    });
    w.set_v32(&dst(e)?, &r)?;
    NEXT
}

fn f16op2(op: fn(Fmt, Round, u64, u64) -> u64) -> impl Fn(Env, [u16; 2], bool) -> u16 {
    move |en, [a, b], _| op(F16, en.rm, u64::from(a), u64::from(b)) as u16
}

/// The (low, high) dwords of a 64-bit packed-f32 source: op_sel / op_sel_hi pick the dword,
/// neg_lo / neg_hi flip the signs. A float constant is its f32 pattern in the low dword and 0
/// in the high one; an integer constant is sign-extended.
fn pk32(w: &Wave, e: &Exe, n: usize) -> Result<[(u32, u32); LANES], ExecErrorKind> {
    let m = e.inst.mods;
    let o = src(e, n)?;
    let (d0, d1): (Lanes, Lanes) = match o {
        Operand::Float(c) => ([float_const_f32(c); LANES], [0; LANES]),
        Operand::Int(i) => ([i32::from(i) as u32; LANES], [if i < 0 { u32::MAX } else { 0 }; LANES]),
        Operand::Literal(_) => return Err(ExecErrorKind::Unimplemented),
        _ => (w.v32k(&o, 0)?, w.v32k(&o, 1)?),
    };
    let (sl, sh) = (m.op_sel >> n & 1 != 0, m.op_sel_hi >> n & 1 != 0);
    let (nl, nh) = (m.neg >> n & 1 != 0, m.abs >> n & 1 != 0);
    Ok(core::array::from_fn(|l| {
        let pick = |hi: bool| if hi { d1[l] } else { d0[l] };
        let (mut lo, mut hi) = (pick(sl), pick(sh));
        if nl {
            lo ^= 0x8000_0000;
        }
        if nh {
            hi ^= 0x8000_0000;
        }
        (lo, hi)
    }))
}

/// `v_pk_{fma,mul,add}_f32`: two f32 operations on register pairs.
fn vpk32<const N: usize>(w: &mut Wave, e: &Exe, op: impl Fn(Round, [u64; N]) -> u64) -> R {
    let en = env(w, F32);
    let mut s = [[(0u32, 0u32); LANES]; N];
    for (k, v) in s.iter_mut().enumerate() {
        *v = pk32(w, e, k)?;
    }
    let m = e.inst.mods;
    let fl = |x: u32| if en.keep_in { u64::from(x) } else { F32.flush(u64::from(x)) };
    let post = |x: u64| {
        let mut x = x;
        if m.clamp {
            x = clamp01(F32, x);
        }
        if !en.keep_out {
            x = F32.flush(x);
        }
        x as u32
    };
    let lo: Lanes = core::array::from_fn(|l| post(op(en.rm, core::array::from_fn(|k| fl(s[k][l].0)))));
    let hi: Lanes = core::array::from_fn(|l| post(op(en.rm, core::array::from_fn(|k| fl(s[k][l].1)))));
    let d = dst(e)?;
    let exec = w.exec;
    w.set_v32k(&d, 0, &lo, exec)?;
    w.set_v32k(&d, 1, &hi, exec)?;
    NEXT
}

/// `v_fma_mix_f32` / `v_fma_mixlo_f16` / `v_fma_mixhi_f16`: each source an f32 (op_sel_hi 0)
/// or the f16 half op_sel picks, converted; neg_lo negates and neg_hi takes the absolute value;
/// fma in f32, then (lo/hi) converted to f16 into that half of D, the other half kept.
fn fma_mix(w: &mut Wave, e: &Exe, out: u32) -> R {
    let m = e.inst.mods;
    let (e32, e16) = (env(w, F32), env(w, F16));
    let mut s = [[0u64; LANES]; 3];
    for (n, v) in s.iter_mut().enumerate() {
        let o = src(e, n)?;
        let f16 = m.op_sel_hi >> n & 1 != 0;
        let words: Lanes = if f16 {
            word16(w, &o)?
        } else {
            match o {
                Operand::Float(c) => [float_const_f32(c); LANES],
                _ => w.v32(&o)?,
            }
        };
        let hi = m.op_sel >> n & 1 != 0;
        for l in 0..LANES {
            let mut x = if f16 {
                let h = u64::from(if hi { words[l] >> 16 } else { words[l] & 0xFFFF });
                let h = if e16.keep_in { h } else { F16.flush(h) };
                sf::convert(F16, F32, Round::Even, h)
            } else {
                let x = u64::from(words[l]);
                if e32.keep_in {
                    x
                } else {
                    F32.flush(x)
                }
            };
            if m.abs >> n & 1 != 0 {
                x = F32.abs(x);
            }
            if m.neg >> n & 1 != 0 {
                x = F32.neg(x);
            }
            v[l] = x;
        }
    }
    let d = dst(e)?;
    let old = w.v32(&d)?;
    let r: Lanes = core::array::from_fn(|l| {
        let x = fma(F32, e32.rm, s[0][l], s[1][l], s[2][l]);
        if out == 0 {
            let mut x = if m.clamp { clamp01(F32, x) } else { x };
            if !e32.keep_out {
                x = F32.flush(x);
            }
            return x as u32;
        }
        let mut h = sf::convert(F32, F16, e16.rm, x);
        if m.clamp {
            h = clamp01(F16, h);
        }
        if !e16.keep_out {
            h = F16.flush(h);
        }
        let h = h as u32 & 0xFFFF;
        if out == 1 {
            (old[l] & 0xFFFF_0000) | h
        } else {
            (old[l] & 0xFFFF) | h << 16
        }
    });
    let exec = w.exec;
    w.set_v32k(&d, 0, &r, exec)?;
    NEXT
}

/// `v_pk_fmac_f16 D, S0, S1`: D.lo/hi = fma(S0, S1, D) per half (VOP2: no modifiers).
fn pk_fmac16(w: &mut Wave, e: &Exe, _g: &mut Group<'_>) -> R {
    let en = env(w, F16);
    let (a, b) = (word16(w, &src(e, 0)?)?, isrc(w, e, 1)?);
    let d = dst(e)?;
    let c = w.v32(&d)?;
    let fl = |x: u32| if en.keep_in { u64::from(x & 0xFFFF) } else { F16.flush(u64::from(x & 0xFFFF)) };
    let post = |x: u64| (if en.keep_out { x } else { F16.flush(x) }) as u32;
    let r: Lanes = core::array::from_fn(|l| {
        let lo = post(sf::fma(F16, en.rm, fl(a[l]), fl(b[l]), fl(c[l]), 0));
        let hi = post(sf::fma(F16, en.rm, fl(a[l] >> 16), fl(b[l] >> 16), fl(c[l] >> 16), 0));
        lo | hi << 16
    });
    w.set_v32(&d, &r)?;
    NEXT
}

/// The integer dot products: `v_dot2_[iu]32_[iu]16` (16-bit halves, op_sel/op_sel_hi picking
/// them), `v_dot4_*_8` (bytes), `v_dot8_*_4` (nibbles) of S0 and S1, plus S2 (VOP3P) or D (the
/// VOP2 `c` forms), exact; `clamp` saturates the 32-bit result.
fn vdot(w: &mut Wave, e: &Exe, bits: u32, signed: bool, acc: bool) -> R {
    let m = e.inst.mods;
    if m.neg != 0 || m.abs != 0 || (bits != 16 && m.op_sel != 0) {
        return Err(ExecErrorKind::Unimplemented);
    }
    // VOP3P: op_sel/op_sel_hi pick the 16-bit halves; the VOP2 forms read them in place.
    let (a, b): (Lanes, Lanes) = if bits == 16 && !acc {
        let (x, y) = (pk16(w, e, 0, false)?, pk16(w, e, 1, false)?);
        let join = |v: [(u16, u16); LANES]| core::array::from_fn(|l| u32::from(v[l].0) | u32::from(v[l].1) << 16);
        (join(x), join(y))
    } else {
        (w.v32(&src(e, 0)?)?, w.v32(&src(e, 1)?)?)
    };
    let d = dst(e)?;
    let c = if acc { w.v32(&d)? } else { w.v32(&src(e, 2)?)? };
    let n = 32 / bits;
    let mask = (1u32 << bits) - 1;
    let r: Lanes = core::array::from_fn(|l| {
        let mut sum = if signed { i64::from(c[l] as i32) } else { i64::from(c[l]) };
        for k in 0..n {
            let (x, y) = ((a[l] >> (k * bits)) & mask, (b[l] >> (k * bits)) & mask);
            let ext =
                |v: u32| if signed { i64::from(((v << (32 - bits)) as i32) >> (32 - bits)) } else { i64::from(v) };
            sum += ext(x) * ext(y);
        }
        if !m.clamp {
            sum as u32
        } else if signed {
            sum.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32 as u32
        } else {
            sum.clamp(0, i64::from(u32::MAX)) as u32
        }
    });
    w.set_v32(&d, &r)?;
    NEXT
}

// ---------------------------------------------------------------------------------------------
// packing conversions

/// f32 → normalised 16-bit integer: clamp to [−1, 1] (snorm) or [0, 1] (unorm), scale by
/// 32767 / 65535, round to nearest even; NaN → 0.
fn norm16(f: Fmt, x: u64, signed: bool) -> u16 {
    if f.is_nan(x) {
        return 0;
    }
    let v = sf::to_f64(f, x);
    if signed {
        libm::roundeven(v.clamp(-1.0, 1.0) * 32767.0) as i16 as u16
    } else {
        libm::roundeven(v.clamp(0.0, 1.0) * 65535.0) as u16
    }
}

/// `v_cvt_pknorm_*_f32` / `_f16`, `v_cvt_pkrtz_f16_f32`, `v_pack_b32_f16`: D = {op(S1), op(S0)}.
fn vpack(w: &mut Wave, e: &Exe, from: Fmt, op: impl Fn(Env, u64) -> u16) -> R {
    if e.inst.mods.clamp || e.inst.mods.omod != 0 || e.inst.mods.op_sel & 8 != 0 {
        return Err(ExecErrorKind::Unimplemented);
    }
    no_opsel(e)?;
    let en = env(w, from);
    let (a, b) = (fsrc(w, e, 0, from, en)?, fsrc(w, e, 1, from, en)?);
    let r: Lanes = core::array::from_fn(|l| u32::from(op(en, a[l])) | u32::from(op(en, b[l])) << 16);
    w.set_v32(&dst(e)?, &r)?;
    NEXT
}

/// `v_cvt_pk_u8_f32 D, S0, S1, S2`: S2 with byte S1[1:0] replaced by S0 rounded to an unsigned
/// byte (nearest even, saturated, NaN → 0).
fn cvt_pk_u8(w: &mut Wave, e: &Exe, _g: &mut Group<'_>) -> R {
    no_opsel(e)?;
    if e.inst.mods.clamp || e.inst.mods.omod != 0 || e.inst.mods.neg & 6 != 0 || e.inst.mods.abs & 6 != 0 {
        return Err(ExecErrorKind::Unimplemented);
    }
    let en = env(w, F32);
    let a = fsrc(w, e, 0, F32, en)?;
    let (sel, base) = (isrc(w, e, 1)?, isrc(w, e, 2)?);
    let r: Lanes = core::array::from_fn(|l| {
        let byte = to_int(F32, a[l], ToInt::Even, 0, 255) as u32;
        let sh = (sel[l] & 3) * 8;
        (base[l] & !(0xFF << sh)) | byte << sh
    });
    w.set_v32(&dst(e)?, &r)?;
    NEXT
}

/// `v_cvt_off_f32_i4`: S0[3:0] as a signed 4-bit integer / 16.
fn cvt_off(x: u32) -> u64 {
    let i = ((x << 28) as i32) >> 28;
    u64::from((i as f32 / 16.0).to_bits())
}

// ---------------------------------------------------------------------------------------------
// s_getreg / s_setreg

const HW_REG_MODE: u32 = 1;
const HW_REG_STATUS: u32 = 2;
const HW_REG_TRAPSTS: u32 = 3;
const HW_REG_HW_ID: u32 = 4;
const HW_REG_GPR_ALLOC: u32 = 5;
const HW_REG_LDS_ALLOC: u32 = 6;
const HW_REG_IB_STS: u32 = 7;
const HW_REG_SH_MEM_BASES: u32 = 15;
const HW_REG_TBA_LO: u32 = 16;
const HW_REG_TMA_HI: u32 = 19;
const HW_REG_FLAT_SCR_LO: u32 = 20;
const HW_REG_FLAT_SCR_HI: u32 = 21;
const HW_REG_XNACK_MASK: u32 = 22;

/// The MODE bits a program may change: FP_ROUND, FP_DENORM, DX10_CLAMP, IEEE, LOD_CLAMPED.
/// The others (exception traps, debug, FP16_OVFL, VSKIP, CSP, …) are not honoured, so setting
/// them is an error.
const MODE_WRITABLE: u32 = 0x7FF;

/// (id, offset, size) of a `hwreg(…)` immediate.
fn hwreg(e: &Exe) -> (u32, u32, u32) {
    let imm = e.inst.operands().iter().find_map(|o| if let Operand::Imm(i) = o { Some(*i) } else { None });
    let s = imm.unwrap_or(0) & 0xFFFF;
    (s & 0x3F, (s >> 6) & 0x1F, ((s >> 11) & 0x1F) + 1)
}

fn field_mask(offset: u32, size: u32) -> u32 {
    (((1u64 << size) - 1) << offset) as u32
}

/// The value `s_getreg_b32` reads from hardware register `id` (docs/executor.md §5).
fn read_hwreg(w: &Wave, g: &Group<'_>, id: u32) -> Result<u32, ExecErrorKind> {
    Ok(match id {
        HW_REG_MODE => w.mode,
        // SCC, EXECZ, VCCZ, VALID.
        HW_REG_STATUS => u32::from(w.scc) | u32::from(w.exec == 0) << 9 | u32::from(w.vcc == 0) << 10 | 1 << 16,
        // No exceptions are recorded; every wave reports hardware id 0; nothing is outstanding.
        HW_REG_TRAPSTS | HW_REG_HW_ID | HW_REG_IB_STS => 0,
        HW_REG_TBA_LO..=HW_REG_TMA_HI => 0,
        HW_REG_GPR_ALLOC => {
            // VGPR_SIZE (13:8) in granules of 8 (the unified VGPR+AGPR file), SGPR_SIZE (27:24)
            // in granules of 16 (the 102 SGPRs, VCC and the trap registers: 128).
            let v = (w.vgpr.len() + w.agpr.len()).div_ceil(8).max(1) - 1;
            ((v as u32) & 0x3F) << 8 | 7 << 24
        }
        // LDS_SIZE (20:12) in granules of 128 dwords.
        HW_REG_LDS_ALLOC => ((g.lds.len().div_ceil(512) as u32) & 0x1FF) << 12,
        HW_REG_SH_MEM_BASES => ((SHARED_APERTURE >> 48) as u32) << 16 | (PRIVATE_APERTURE >> 48) as u32,
        HW_REG_FLAT_SCR_LO => w.flat_scratch as u32,
        HW_REG_FLAT_SCR_HI => (w.flat_scratch >> 32) as u32,
        HW_REG_XNACK_MASK => w.xnack_mask as u32,
        _ => return Err(ExecErrorKind::Unimplemented),
    })
}

fn getreg(w: &mut Wave, e: &Exe, g: &mut Group<'_>) -> R {
    let (id, off, size) = hwreg(e);
    // gfx940 numbers 20–24 as XCC_ID and the SQ perf snapshot registers, which the emulator
    // does not model (docs/executor.md §8): not gfx90a's FLAT_SCR and XNACK_MASK.
    if e.inst.mods.target == crate::Target::Gfx940 && (20..=24).contains(&id) {
        return Err(ExecErrorKind::Unimplemented);
    }
    let v = (read_hwreg(w, g, id)? & field_mask(off, size)) >> off;
    w.set_s32(&dst(e)?, v)?;
    NEXT
}

/// `s_setreg_b32` / `s_setreg_imm32_b32`: MODE's writable fields only.
fn setreg(w: &mut Wave, e: &Exe, _g: &mut Group<'_>) -> R {
    let (id, off, size) = hwreg(e);
    let v = match field(e, Field::Literal, 0) {
        Ok(Operand::Literal(l)) => l,
        _ => w.s32(&dst(e)?)?,
    };
    if id != HW_REG_MODE {
        return Err(ExecErrorKind::Unimplemented);
    }
    let mask = field_mask(off, size);
    let new = (w.mode & !mask) | (v << off & mask);
    if new & !MODE_WRITABLE != w.mode & !MODE_WRITABLE {
        return Err(ExecErrorKind::Unimplemented);
    }
    w.mode = new;
    NEXT
}

// ---------------------------------------------------------------------------------------------
// the table

fn f16(x: u16) -> u64 {
    u64::from(x)
}

/// Handlers by mnemonic (the `_e32`/`_e64` suffix already removed), for the opcodes this module
/// owns.
pub(crate) fn handler_for_name(base: &str) -> Option<(Handler, u32)> {
    if base.starts_with("v_cmp") {
        return cmp16_aux(base).map(|a| (if a & CLASS != 0 { vclass as Handler } else { vcmp16 as Handler }, a));
    }
    let h: Handler = match base {
        // ---- f32 arithmetic (every rounding mode) ----
        "v_add_f32" => |w, e, _| vop2f(w, e, F32, |en, a, b| add(F32, en.rm, a, b)),
        "v_sub_f32" => |w, e, _| vop2f(w, e, F32, |en, a, b| add(F32, en.rm, a, F32.neg(b))),
        "v_subrev_f32" => |w, e, _| vop2f(w, e, F32, |en, a, b| add(F32, en.rm, b, F32.neg(a))),
        "v_mul_f32" => |w, e, _| vop2f(w, e, F32, |en, a, b| mul(F32, en.rm, a, b)),
        "v_mul_legacy_f32" => |w, e, _| vop2f(w, e, F32, |en, a, b| mul_legacy(F32, en.rm, a, b)),
        "v_fma_f32" => |w, e, _| vfma_f32(w, e, false),
        "v_mad_f32" => |w, e, _| vop3f(w, e, F32, |en, a, b, c| mad(F32, en.rm, a, b, c)),
        "v_mad_legacy_f32" => {
            |w, e, _| vop3f(w, e, F32, |en, a, b, c| add(F32, en.rm, mul_legacy(F32, en.rm, a, b), c))
        }
        "v_fmac_f32" => |w, e, _| vfma_f32(w, e, true),
        "v_mac_f32" => |w, e, _| vmacf(w, e, F32, |rm, a, b, c| mad(F32, rm, a, b, c)),
        "v_madmk_f32" => |w, e, _| vmadkf(w, e, F32, false, false),
        "v_madak_f32" => |w, e, _| vmadkf(w, e, F32, true, false),
        // gfx940 (docs/executor.md §8).
        "v_fmamk_f32" => |w, e, _| vmadkf(w, e, F32, false, true),
        "v_fmaak_f32" => |w, e, _| vmadkf(w, e, F32, true, true),
        "v_med3_f32" => |w, e, _| vop3f(w, e, F32, |_, a, b, c| med3(F32, a, b, c)),
        "v_ldexp_f32" => |w, e, _| vldexp(w, e, F32),
        "v_frexp_mant_f32" => |w, e, _| vop1f(w, e, F32, |_, a| frexp_mant(F32, a)),
        "v_frexp_exp_i32_f32" => |w, e, _| vcvt_out(w, e, F32, |a| frexp_exp(F32, a) as u32),
        "v_cvt_rpi_i32_f32" => |w, e, _| {
            // floor(S0 + 0.5)
            vcvt_out(w, e, F32, |a| {
                let h = add(F32, Round::Even, a, 0x3F00_0000);
                to_int(F32, h, ToInt::Floor, i64::from(i32::MIN), i64::from(i32::MAX)) as u32
            })
        },
        "v_cvt_flr_i32_f32" => |w, e, _| {
            vcvt_out(w, e, F32, |a| to_int(F32, a, ToInt::Floor, i64::from(i32::MIN), i64::from(i32::MAX)) as u32)
        },
        "v_cvt_off_f32_i4" => |w, e, _| vcvt_in(w, e, F32, |_, a| cvt_off(a)),
        "v_cvt_f32_i32" => |w, e, _| {
            vcvt_in(w, e, F32, |rm, a| sf::from_int(F32, rm, (a as i32) < 0, u64::from((a as i32).unsigned_abs())))
        },
        "v_cvt_f32_u32" => |w, e, _| vcvt_in(w, e, F32, |rm, a| sf::from_int(F32, rm, false, u64::from(a))),
        "v_cvt_f32_f64" => |w, e, _| vcvt_ff(w, e, F64, F32),
        "v_cvt_f64_f32" => |w, e, _| vcvt_ff(w, e, F32, F64),
        "v_cvt_f16_f32" => |w, e, _| vcvt_ff(w, e, F32, F16),
        "v_cvt_f32_f16" => |w, e, _| vcvt_ff(w, e, F16, F32),
        "v_cvt_pkrtz_f16_f32" => |w, e, _| vpack(w, e, F32, |_, a| sf::convert(F32, F16, Round::Zero, a) as u16),
        "v_cvt_pknorm_i16_f32" => |w, e, _| vpack(w, e, F32, |_, a| norm16(F32, a, true)),
        "v_cvt_pknorm_u16_f32" => |w, e, _| vpack(w, e, F32, |_, a| norm16(F32, a, false)),
        "v_cvt_pknorm_i16_f16" => |w, e, _| vpack(w, e, F16, |_, a| norm16(F16, a, true)),
        "v_cvt_pknorm_u16_f16" => |w, e, _| vpack(w, e, F16, |_, a| norm16(F16, a, false)),
        "v_pack_b32_f16" => |w, e, _| vpack(w, e, F16, |_, a| a as u16),
        "v_cvt_pk_u8_f32" => cvt_pk_u8,
        "v_cvt_pk_u16_u32" => |w, e, _| {
            int_mods(e)?;
            let (a, b) = (isrc(w, e, 0)?, isrc(w, e, 1)?);
            let r: Lanes = core::array::from_fn(|l| a[l].min(0xFFFF) | b[l].min(0xFFFF) << 16);
            w.set_v32(&dst(e)?, &r)?;
            NEXT
        },
        "v_cvt_pk_i16_i32" => |w, e, _| {
            int_mods(e)?;
            let (a, b) = (isrc(w, e, 0)?, isrc(w, e, 1)?);
            let s = |x: u32| u32::from((x as i32).clamp(-0x8000, 0x7FFF) as i16 as u16);
            let r: Lanes = core::array::from_fn(|l| s(a[l]) | s(b[l]) << 16);
            w.set_v32(&dst(e)?, &r)?;
            NEXT
        },
        // ---- f32 transcendentals ----
        "v_rcp_f32" | "v_rcp_iflag_f32" => |w, e, _| {
            let en = env(w, F32).flushing();
            vopf::<1>(w, e, F32, en, |_, [a]| rcp(F32, a))
        },
        // In f64 and rounded once: correctly rounded (53 ≥ 2 × 24 + 2 bits).
        "v_sqrt_f32" => |w, e, _| vtrans32(w, e, libm::sqrt),
        "v_rsq_f32" => |w, e, _| vtrans32(w, e, rsqrt),
        "v_exp_f32" => |w, e, _| vtrans32(w, e, libm::exp2),
        "v_log_f32" => |w, e, _| vtrans32(w, e, libm::log2),
        "v_sin_f32" => |w, e, _| {
            let en = env(w, F32);
            vopf::<1>(w, e, F32, en, |_, [a]| via_f64(F32, a, |x| sin_turns(x, false)))
        },
        "v_cos_f32" => |w, e, _| {
            let en = env(w, F32);
            vopf::<1>(w, e, F32, en, |_, [a]| via_f64(F32, a, |x| sin_turns(x, true)))
        },
        // ---- division helpers ----
        "v_div_scale_f32" => |w, e, _| div_scale(w, e, F32),
        "v_div_scale_f64" => |w, e, _| div_scale(w, e, F64),
        "v_div_fmas_f32" => |w, e, _| div_fmas(w, e, F32),
        "v_div_fmas_f64" => |w, e, _| div_fmas(w, e, F64),
        "v_div_fixup_f32" => |w, e, _| div_fixup(w, e, F32),
        "v_div_fixup_f64" => |w, e, _| div_fixup(w, e, F64),
        "v_div_fixup_f16" => |w, e, _| div_fixup(w, e, F16),
        "v_div_fixup_legacy_f16" => |w, e, _| legacy16(w, e, |en, q, d, n| div_fixup_one(F16, en.rm, q, d, n, false)),
        "v_trig_preop_f64" => trig_preop,
        // ---- f64 ----
        "v_add_f64" => |w, e, _| vop2f(w, e, F64, |en, a, b| add(F64, en.rm, a, b)),
        "v_mul_f64" => |w, e, _| vop2f(w, e, F64, |en, a, b| mul(F64, en.rm, a, b)),
        "v_fma_f64" => |w, e, _| vop3f(w, e, F64, |en, a, b, c| fma(F64, en.rm, a, b, c)),
        "v_fmac_f64" => |w, e, _| vmacf(w, e, F64, |rm, a, b, c| fma(F64, rm, a, b, c)),
        "v_min_f64" => |w, e, _| vop2f(w, e, F64, |_, a, b| minmax(F64, a, b, false)),
        "v_max_f64" => |w, e, _| vop2f(w, e, F64, |_, a, b| minmax(F64, a, b, true)),
        "v_ldexp_f64" => |w, e, _| vldexp(w, e, F64),
        "v_rcp_f64" => |w, e, _| vop1f(w, e, F64, |_, a| rcp(F64, a)),
        "v_rsq_f64" => |w, e, _| vtrans(w, e, F64, rsqrt),
        "v_sqrt_f64" => |w, e, _| vtrans(w, e, F64, libm::sqrt),
        "v_frexp_mant_f64" => |w, e, _| vop1f(w, e, F64, |_, a| frexp_mant(F64, a)),
        "v_frexp_exp_i32_f64" => |w, e, _| vcvt_out(w, e, F64, |a| frexp_exp(F64, a) as u32),
        "v_fract_f64" => |w, e, _| vop1f(w, e, F64, |en, a| fract(F64, en.rm, a)),
        "v_trunc_f64" => |w, e, _| vop1f(w, e, F64, |_, a| rint(F64, a, ToInt::Trunc)),
        "v_floor_f64" => |w, e, _| vop1f(w, e, F64, |_, a| rint(F64, a, ToInt::Floor)),
        "v_ceil_f64" => |w, e, _| vop1f(w, e, F64, |_, a| rint(F64, a, ToInt::Ceil)),
        "v_rndne_f64" => |w, e, _| vop1f(w, e, F64, |_, a| rint(F64, a, ToInt::Even)),
        "v_cvt_f64_i32" => |w, e, _| vcvt_in(w, e, F64, |_, a| f64::from(a as i32).to_bits()),
        "v_cvt_f64_u32" => |w, e, _| vcvt_in(w, e, F64, |_, a| f64::from(a).to_bits()),
        "v_cvt_i32_f64" => |w, e, _| {
            vcvt_out(w, e, F64, |a| to_int(F64, a, ToInt::Trunc, i64::from(i32::MIN), i64::from(i32::MAX)) as u32)
        },
        "v_cvt_u32_f64" => {
            |w, e, _| vcvt_out(w, e, F64, |a| to_int(F64, a, ToInt::Trunc, 0, i64::from(u32::MAX)) as u32)
        }
        // ---- f16 (VOP1, VOP2, VOP3) ----
        "v_add_f16" => |w, e, _| vop2f(w, e, F16, |en, a, b| sf::add(F16, en.rm, a, b)),
        "v_sub_f16" => |w, e, _| vop2f(w, e, F16, |en, a, b| sf::add(F16, en.rm, a, F16.neg(b))),
        "v_subrev_f16" => |w, e, _| vop2f(w, e, F16, |en, a, b| sf::add(F16, en.rm, b, F16.neg(a))),
        "v_mul_f16" => |w, e, _| vop2f(w, e, F16, |en, a, b| sf::mul(F16, en.rm, a, b)),
        "v_min_f16" => |w, e, _| vop2f(w, e, F16, |_, a, b| minmax(F16, a, b, false)),
        "v_max_f16" => |w, e, _| vop2f(w, e, F16, |_, a, b| minmax(F16, a, b, true)),
        "v_ldexp_f16" => |w, e, _| vldexp(w, e, F16),
        "v_mac_f16" => |w, e, _| vmacf(w, e, F16, |rm, a, b, c| mad(F16, rm, a, b, c)),
        "v_madmk_f16" => |w, e, _| vmadkf(w, e, F16, false, false),
        "v_madak_f16" => |w, e, _| vmadkf(w, e, F16, true, false),
        "v_mad_f16" => |w, e, _| vop3f(w, e, F16, |en, a, b, c| mad(F16, en.rm, a, b, c)),
        "v_fma_f16" => |w, e, _| vop3f(w, e, F16, |en, a, b, c| sf::fma(F16, en.rm, a, b, c, 0)),
        "v_mad_legacy_f16" => |w, e, _| legacy16(w, e, |en, a, b, c| mad(F16, en.rm, a, b, c)),
        "v_fma_legacy_f16" => |w, e, _| legacy16(w, e, |en, a, b, c| sf::fma(F16, en.rm, a, b, c, 0)),
        "v_min3_f16" => |w, e, _| vop3f(w, e, F16, |_, a, b, c| minmax(F16, minmax(F16, a, b, false), c, false)),
        "v_max3_f16" => |w, e, _| vop3f(w, e, F16, |_, a, b, c| minmax(F16, minmax(F16, a, b, true), c, true)),
        "v_med3_f16" => |w, e, _| vop3f(w, e, F16, |_, a, b, c| med3(F16, a, b, c)),
        "v_sqrt_f16" => |w, e, _| vtrans(w, e, F16, libm::sqrt),
        "v_rcp_f16" => |w, e, _| vop1f(w, e, F16, |_, a| rcp(F16, a)),
        "v_rsq_f16" => |w, e, _| vtrans(w, e, F16, rsqrt),
        "v_exp_f16" => |w, e, _| vtrans(w, e, F16, libm::exp2),
        "v_log_f16" => |w, e, _| vtrans(w, e, F16, libm::log2),
        "v_sin_f16" => |w, e, _| vtrans(w, e, F16, |x| sin_turns(x, false)),
        "v_cos_f16" => |w, e, _| vtrans(w, e, F16, |x| sin_turns(x, true)),
        "v_floor_f16" => |w, e, _| vop1f(w, e, F16, |_, a| rint(F16, a, ToInt::Floor)),
        "v_ceil_f16" => |w, e, _| vop1f(w, e, F16, |_, a| rint(F16, a, ToInt::Ceil)),
        "v_trunc_f16" => |w, e, _| vop1f(w, e, F16, |_, a| rint(F16, a, ToInt::Trunc)),
        "v_rndne_f16" => |w, e, _| vop1f(w, e, F16, |_, a| rint(F16, a, ToInt::Even)),
        "v_fract_f16" => |w, e, _| vop1f(w, e, F16, |en, a| fract(F16, en.rm, a)),
        "v_frexp_mant_f16" => |w, e, _| vop1f(w, e, F16, |_, a| frexp_mant(F16, a)),
        "v_frexp_exp_i16_f16" => |w, e, _| {
            no_opsel(e)?;
            let en = env(w, F16);
            let a = fsrc(w, e, 0, F16, en)?;
            let r: Bits = core::array::from_fn(|l| u64::from(frexp_exp(F16, a[l]) as i16 as u16));
            put16(w, e, &dst(e)?, &r)?;
            NEXT
        },
        "v_cvt_f16_u16" => |w, e, _| vcvt_in(w, e, F16, |rm, a| sf::from_int(F16, rm, false, u64::from(a & 0xFFFF))),
        "v_cvt_f16_i16" => |w, e, _| {
            vcvt_in(w, e, F16, |rm, a| {
                let v = a as u16 as i16;
                sf::from_int(F16, rm, v < 0, u64::from(v.unsigned_abs()))
            })
        },
        "v_cvt_u16_f16" => |w, e, _| vcvt16_out(w, e, |a| to_int(F16, a, ToInt::Trunc, 0, 0xFFFF) as u16),
        "v_cvt_i16_f16" => |w, e, _| vcvt16_out(w, e, |a| to_int(F16, a, ToInt::Trunc, -0x8000, 0x7FFF) as u16),
        "v_cvt_norm_i16_f16" => |w, e, _| vcvt16_out(w, e, |a| norm16(F16, a, true)),
        "v_cvt_norm_u16_f16" => |w, e, _| vcvt16_out(w, e, |a| norm16(F16, a, false)),
        "v_sat_pk_u8_i16" => |w, e, _| {
            int_mods(e)?;
            let a = isrc(w, e, 0)?;
            let s = |x: u32| (x as u16 as i16).clamp(0, 255) as u32;
            let r: Bits = core::array::from_fn(|l| u64::from(s(a[l]) | s(a[l] >> 16) << 8));
            put16(w, e, &dst(e)?, &r)?;
            NEXT
        },
        // ---- i16 / u16 ----
        "v_add_u16" => |w, e, _| vop16i::<2>(w, e, |[a, b], c| sat_u16(u16v(a) + u16v(b), c)),
        "v_sub_u16" => |w, e, _| vop16i::<2>(w, e, |[a, b], c| sat_u16(u16v(a) - u16v(b), c)),
        "v_subrev_u16" => |w, e, _| vop16i::<2>(w, e, |[a, b], c| sat_u16(u16v(b) - u16v(a), c)),
        "v_add_i16" => |w, e, _| vop16i::<2>(w, e, |[a, b], c| sat_i16(i16v(a) + i16v(b), c)),
        "v_sub_i16" => |w, e, _| vop16i::<2>(w, e, |[a, b], c| sat_i16(i16v(a) - i16v(b), c)),
        "v_mul_lo_u16" => |w, e, _| vop16i::<2>(w, e, |[a, b], _| a.wrapping_mul(b)),
        "v_lshlrev_b16" => |w, e, _| vop16i::<2>(w, e, |[a, b], _| b << (a & 15)),
        "v_lshrrev_b16" => |w, e, _| vop16i::<2>(w, e, |[a, b], _| b >> (a & 15)),
        "v_ashrrev_i16" => |w, e, _| vop16i::<2>(w, e, |[a, b], _| ((b as i16) >> (a & 15)) as u16),
        "v_max_u16" => |w, e, _| vop16i::<2>(w, e, |[a, b], _| a.max(b)),
        "v_min_u16" => |w, e, _| vop16i::<2>(w, e, |[a, b], _| a.min(b)),
        "v_max_i16" => |w, e, _| vop16i::<2>(w, e, |[a, b], _| (a as i16).max(b as i16) as u16),
        "v_min_i16" => |w, e, _| vop16i::<2>(w, e, |[a, b], _| (a as i16).min(b as i16) as u16),
        "v_mad_u16" | "v_mad_legacy_u16" => {
            |w, e, _| vop16i::<3>(w, e, |[a, b, c], s| sat_u16(u16v(a) * u16v(b) + u16v(c), s))
        }
        "v_mad_i16" | "v_mad_legacy_i16" => {
            |w, e, _| vop16i::<3>(w, e, |[a, b, c], s| sat_i16(i16v(a) * i16v(b) + i16v(c), s))
        }
        "v_min3_u16" => |w, e, _| vop16i::<3>(w, e, |[a, b, c], _| a.min(b).min(c)),
        "v_max3_u16" => |w, e, _| vop16i::<3>(w, e, |[a, b, c], _| a.max(b).max(c)),
        "v_med3_u16" => |w, e, _| vop16i::<3>(w, e, |[a, b, c], _| a.max(b).min(a.min(b).max(c))),
        "v_min3_i16" => |w, e, _| vop16i::<3>(w, e, |[a, b, c], _| (a as i16).min(b as i16).min(c as i16) as u16),
        "v_max3_i16" => |w, e, _| vop16i::<3>(w, e, |[a, b, c], _| (a as i16).max(b as i16).max(c as i16) as u16),
        "v_med3_i16" => |w, e, _| {
            vop16i::<3>(w, e, |[a, b, c], _| {
                let (a, b, c) = (a as i16, b as i16, c as i16);
                a.max(b).min(a.min(b).max(c)) as u16
            })
        },
        "v_mad_u32_u16" => |w, e, _| vmad32_16(w, e, false),
        "v_mad_i32_i16" => |w, e, _| vmad32_16(w, e, true),
        // ---- VOP3P packed 16-bit ----
        "v_pk_add_f16" => |w, e, _| vpk16::<2>(w, e, true, f16op2(sf::add)),
        "v_pk_mul_f16" => |w, e, _| vpk16::<2>(w, e, true, f16op2(sf::mul)),
        "v_pk_min_f16" => |w, e, _| vpk16::<2>(w, e, true, |_, [a, b], _| minmax(F16, f16(a), f16(b), false) as u16),
        "v_pk_max_f16" => |w, e, _| vpk16::<2>(w, e, true, |_, [a, b], _| minmax(F16, f16(a), f16(b), true) as u16),
        "v_pk_fma_f16" => {
            |w, e, _| vpk16::<3>(w, e, true, |en, [a, b, c], _| sf::fma(F16, en.rm, f16(a), f16(b), f16(c), 0) as u16)
        }
        "v_pk_add_u16" => |w, e, _| vpk16::<2>(w, e, false, |_, [a, b], c| sat_u16(u16v(a) + u16v(b), c)),
        "v_pk_sub_u16" => |w, e, _| vpk16::<2>(w, e, false, |_, [a, b], c| sat_u16(u16v(a) - u16v(b), c)),
        "v_pk_add_i16" => |w, e, _| vpk16::<2>(w, e, false, |_, [a, b], c| sat_i16(i16v(a) + i16v(b), c)),
        "v_pk_sub_i16" => |w, e, _| vpk16::<2>(w, e, false, |_, [a, b], c| sat_i16(i16v(a) - i16v(b), c)),
        "v_pk_mul_lo_u16" => |w, e, _| vpk16::<2>(w, e, false, |_, [a, b], _| a.wrapping_mul(b)),
        "v_pk_mad_u16" => |w, e, _| vpk16::<3>(w, e, false, |_, [a, b, c], s| sat_u16(u16v(a) * u16v(b) + u16v(c), s)),
        "v_pk_mad_i16" => |w, e, _| vpk16::<3>(w, e, false, |_, [a, b, c], s| sat_i16(i16v(a) * i16v(b) + i16v(c), s)),
        "v_pk_min_u16" => |w, e, _| vpk16::<2>(w, e, false, |_, [a, b], _| a.min(b)),
        "v_pk_max_u16" => |w, e, _| vpk16::<2>(w, e, false, |_, [a, b], _| a.max(b)),
        "v_pk_min_i16" => |w, e, _| vpk16::<2>(w, e, false, |_, [a, b], _| (a as i16).min(b as i16) as u16),
        "v_pk_max_i16" => |w, e, _| vpk16::<2>(w, e, false, |_, [a, b], _| (a as i16).max(b as i16) as u16),
        "v_pk_lshlrev_b16" => |w, e, _| vpk16::<2>(w, e, false, |_, [a, b], _| b << (a & 15)),
        "v_pk_lshrrev_b16" => |w, e, _| vpk16::<2>(w, e, false, |_, [a, b], _| b >> (a & 15)),
        "v_pk_ashrrev_i16" => |w, e, _| vpk16::<2>(w, e, false, |_, [a, b], _| ((b as i16) >> (a & 15)) as u16),
        "v_pk_fmac_f16" => pk_fmac16,
        "v_dot2_i32_i16" => |w, e, _| vdot(w, e, 16, true, false),
        "v_dot2_u32_u16" => |w, e, _| vdot(w, e, 16, false, false),
        "v_dot4_i32_i8" => |w, e, _| vdot(w, e, 8, true, false),
        "v_dot4_u32_u8" => |w, e, _| vdot(w, e, 8, false, false),
        "v_dot8_i32_i4" => |w, e, _| vdot(w, e, 4, true, false),
        "v_dot8_u32_u4" => |w, e, _| vdot(w, e, 4, false, false),
        "v_dot2c_i32_i16" => |w, e, _| vdot(w, e, 16, true, true),
        "v_dot4c_i32_i8" => |w, e, _| vdot(w, e, 8, true, true),
        "v_dot8c_i32_i4" => |w, e, _| vdot(w, e, 4, true, true),
        // ---- VOP3P packed f32 and mixed precision ----
        "v_pk_fma_f32" => |w, e, _| vpk32::<3>(w, e, |rm, [a, b, c]| fma(F32, rm, a, b, c)),
        "v_pk_mul_f32" => |w, e, _| vpk32::<2>(w, e, |rm, [a, b]| mul(F32, rm, a, b)),
        "v_pk_add_f32" => |w, e, _| vpk32::<2>(w, e, |rm, [a, b]| add(F32, rm, a, b)),
        "v_fma_mix_f32" => |w, e, _| fma_mix(w, e, 0),
        "v_fma_mixlo_f16" => |w, e, _| fma_mix(w, e, 1),
        "v_fma_mixhi_f16" => |w, e, _| fma_mix(w, e, 2),
        // ---- hardware registers ----
        "s_getreg_b32" => getreg,
        "s_setreg_b32" | "s_setreg_imm32_b32" => setreg,
        _ => return None,
    };
    Some((h, 0))
}

/// f16 → 16-bit integer results (the low half written, the high half zeroed).
fn vcvt16_out(w: &mut Wave, e: &Exe, op: impl Fn(u64) -> u16) -> R {
    no_opsel(e)?;
    if e.inst.mods.omod != 0 {
        return Err(ExecErrorKind::Unimplemented);
    }
    let en = env(w, F16);
    let a = fsrc(w, e, 0, F16, en)?;
    let r: Bits = core::array::from_fn(|l| u64::from(op(a[l])));
    put16(w, e, &dst(e)?, &r)?;
    NEXT
}
