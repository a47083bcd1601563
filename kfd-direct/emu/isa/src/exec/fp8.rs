//! gfx940's 8-bit floats and their conversions (docs/executor.md §8 "fp8 and bf8").
//!
//! Both formats are the "FNUZ" variants: fp8 is E4M3 with bias 8, bf8 is E5M2 with bias 16;
//! neither has an infinity or a negative zero, and 0x80 is their one NaN. A conversion to
//! them rounds to nearest even (`v_cvt_pk_*`) or stochastically with the given random bits
//! (`v_cvt_sr_*`); ±∞, NaN and values beyond the largest finite one become the NaN (the
//! instructions do not saturate), a result that rounds to zero is +0. The MFMA (`lanes.rs`)
//! read their inputs with [`to_f32`].

// Lane loops index several per-lane arrays at once.
#![allow(clippy::needless_range_loop)]

use super::ops::{dst, f32_mode, fout, src, Exe, Handler, NEXT, R};
use super::wave::{Lanes, Wave, LANES};
use super::{ExecErrorKind, Group};

/// One of the two 8-bit float formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum F8 {
    /// E4M3, bias 8 (largest finite 240).
    Fp8,
    /// E5M2, bias 16 (largest finite 57344).
    Bf8,
}

impl F8 {
    /// Mantissa bits.
    const fn man(self) -> i32 {
        match self {
            F8::Fp8 => 3,
            F8::Bf8 => 2,
        }
    }

    const fn bias(self) -> i32 {
        match self {
            F8::Fp8 => 8,
            F8::Bf8 => 16,
        }
    }
}

/// The one NaN of both formats.
pub(crate) const NAN8: u8 = 0x80;

/// The f32 an 8-bit NaN converts to (the canonical quiet NaN; docs/executor.md §8).
pub(crate) const F32_NAN: u32 = 0x7FC0_0000;

/// 2^k as f32 (normal range only: |k| ≤ 126).
fn pow2(k: i32) -> f32 {
    f32::from_bits(((127 + k) as u32) << 23)
}

/// An 8-bit float as f32 (exact; the NaN as [`F32_NAN`]).
pub(crate) fn to_f32(f: F8, b: u8) -> f32 {
    if b == NAN8 {
        return f32::from_bits(F32_NAN);
    }
    let mb = f.man();
    let m = u32::from(b) & ((1 << mb) - 1);
    let e = (i32::from(b) >> mb) & ((1 << (7 - mb)) - 1);
    // Subnormal: m × 2^(1 − bias − mb); normal: (1.m) × 2^(e − bias).
    let mag = if e == 0 { m as f32 * pow2(1 - f.bias() - mb) } else { (m | 1 << mb) as f32 * pow2(e - f.bias() - mb) };
    if b & 0x80 != 0 {
        -mag
    } else {
        mag
    }
}

/// The f32 bit pattern `x` converted to format `f`: rounded to nearest even (`random` None) or
/// stochastically — the value truncated to `23 − mb` bits below the result's last place, the
/// low `23 − mb` bits of `random` added there, and the sum truncated to the result (AMD's
/// reference model of the hardware, docs/executor.md §8).
pub(crate) fn from_f32(f: F8, x: u32, random: Option<u32>) -> u8 {
    let ex = ((x >> 23) & 0xFF) as i32;
    if ex == 0xFF {
        return NAN8;
    }
    let sig = (x & 0x7F_FFFF) | if ex != 0 { 1 << 23 } else { 0 };
    if sig == 0 {
        return 0;
    }
    let mb = f.man();
    let q = ex.max(1) - 150; // the exponent of sig's last bit
    let top = q + 31 - sig.leading_zeros() as i32; // floor(log2 |x|)
    let emin = 1 - f.bias();
    let l = top.max(emin) - mb; // the exponent of the result's last place
    let shift = (l - q) as u32; // ≥ 23 − mb
    let d = (23 - mb) as u32;
    let units = match random {
        None if shift > 25 => 0, // below a quarter of the smallest subnormal
        None => {
            let (u, rem, half) = (sig >> shift, sig & ((1 << shift) - 1), 1u32 << (shift - 1));
            u + u32::from(rem > half || (rem == half && u & 1 == 1))
        }
        Some(r) => {
            let t = shift.saturating_sub(d);
            let kept = if t >= 32 { 0 } else { sig >> t };
            (kept + (r & ((1 << d) - 1))) >> d
        }
    };
    if units == 0 {
        return 0;
    }
    // The code exponent whose last place is 2^l; a carry moves to the next binade.
    let (mut e, mut u) = (l + mb + f.bias(), units);
    if u >> (mb + 1) != 0 {
        u >>= 1;
        e += 1;
    }
    let code = if u < 1 << mb {
        u // subnormal (e is 1 here: exponent field 0)
    } else if e > (1 << (7 - mb)) - 1 {
        return NAN8; // beyond the largest finite value: no infinity, no saturation
    } else {
        (e as u32) << mb | (u - (1 << mb))
    };
    code as u8 | ((x >> 24) as u8 & 0x80)
}

/// `v_cvt_f32_fp8`/`_bf8` (`pk` false: byte 0 of S0; SDWA's `src0_sel` picks another byte,
/// `exec/lanes.rs`) and `v_cvt_pk_f32_fp8`/`_bf8` (bytes 0 and 1 to D and D+1; SDWA
/// `WORD_1` picks bytes 2 and 3). clamp and omod apply to the f32 results.
fn cvt_to_f32(w: &mut Wave, e: &Exe, f: F8, pk: bool) -> R {
    let m = e.inst.mods;
    if m.neg != 0 || m.abs != 0 || m.op_sel != 0 {
        return Err(ExecErrorKind::Unimplemented);
    }
    let mode = f32_mode(w)?;
    let a = w.v32(&src(e, 0)?)?;
    let d = dst(e)?;
    let exec = w.exec;
    for k in 0..if pk { 2 } else { 1 } {
        let r: Lanes = core::array::from_fn(|l| fout(e, mode, to_f32(f, (a[l] >> (8 * k)) as u8)));
        w.set_v32k(&d, k, &r, exec)?;
    }
    NEXT
}

/// f32 source `n` with its abs and neg modifiers.
fn fsrc_bits(w: &Wave, e: &Exe, n: usize) -> Result<Lanes, ExecErrorKind> {
    let m = e.inst.mods;
    let (abs, neg) = (m.abs >> n & 1 != 0, m.neg >> n & 1 != 0);
    let mut v = w.v32(&src(e, n)?)?;
    for x in v.iter_mut() {
        if abs {
            *x &= 0x7FFF_FFFF;
        }
        if neg {
            *x ^= 0x8000_0000;
        }
    }
    Ok(v)
}

/// `v_cvt_pk_fp8_f32`/`_bf8_f32 D, S0, S1`: S0 and S1 rounded to nearest even into bytes 0
/// and 1 of the word `op_sel[3]` picks (0 the low word); D's other word is kept.
fn cvt_pk_from_f32(w: &mut Wave, e: &Exe, f: F8) -> R {
    let m = e.inst.mods;
    if m.clamp || m.omod != 0 || m.op_sel & 7 != 0 {
        return Err(ExecErrorKind::Unimplemented);
    }
    let (a, b) = (fsrc_bits(w, e, 0)?, fsrc_bits(w, e, 1)?);
    let d = dst(e)?;
    let old = w.v32(&d)?;
    let hi = m.op_sel & 8 != 0;
    let r: Lanes = core::array::from_fn(|l| {
        let p = u32::from(from_f32(f, a[l], None)) | u32::from(from_f32(f, b[l], None)) << 8;
        if hi {
            (old[l] & 0xFFFF) | p << 16
        } else {
            (old[l] & 0xFFFF_0000) | p
        }
    });
    w.set_v32(&d, &r)?;
    NEXT
}

/// `v_cvt_sr_fp8_f32`/`_bf8_f32 D, S0, S1`: S0 rounded stochastically with the random bits
/// S1 into byte `op_sel[3:2]` of D; D's other bytes are kept.
fn cvt_sr_from_f32(w: &mut Wave, e: &Exe, f: F8) -> R {
    let m = e.inst.mods;
    if m.clamp || m.omod != 0 || m.op_sel & 3 != 0 || m.neg & !1 != 0 || m.abs & !1 != 0 {
        return Err(ExecErrorKind::Unimplemented);
    }
    let a = fsrc_bits(w, e, 0)?;
    let rnd = w.v32(&src(e, 1)?)?;
    let d = dst(e)?;
    let old = w.v32(&d)?;
    let shift = 8 * u32::from(m.op_sel >> 2 & 3);
    let mut r = [0u32; LANES];
    for l in 0..LANES {
        let b = u32::from(from_f32(f, a[l], Some(rnd[l])));
        r[l] = (old[l] & !(0xFF << shift)) | b << shift;
    }
    w.set_v32(&d, &r)?;
    NEXT
}

/// Handlers by mnemonic (the `_e32`/`_e64` suffix already removed).
pub(crate) fn handler_for_name(base: &str) -> Option<(Handler, u32)> {
    let h: Handler = match base {
        "v_cvt_f32_fp8" => |w, e, _: &mut Group<'_>| cvt_to_f32(w, e, F8::Fp8, false),
        "v_cvt_f32_bf8" => |w, e, _| cvt_to_f32(w, e, F8::Bf8, false),
        "v_cvt_pk_f32_fp8" => |w, e, _| cvt_to_f32(w, e, F8::Fp8, true),
        "v_cvt_pk_f32_bf8" => |w, e, _| cvt_to_f32(w, e, F8::Bf8, true),
        "v_cvt_pk_fp8_f32" => |w, e, _| cvt_pk_from_f32(w, e, F8::Fp8),
        "v_cvt_pk_bf8_f32" => |w, e, _| cvt_pk_from_f32(w, e, F8::Bf8),
        "v_cvt_sr_fp8_f32" => |w, e, _| cvt_sr_from_f32(w, e, F8::Fp8),
        "v_cvt_sr_bf8_f32" => |w, e, _| cvt_sr_from_f32(w, e, F8::Bf8),
        _ => return None,
    };
    Some((h, 0))
}
