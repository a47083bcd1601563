//! Exact IEEE-754 arithmetic in any of the four rounding modes MODE selects, for the VALU's
//! three formats (f16, f32, f64), on bit patterns.
//!
//! Every operation computes the exact result (a 128-bit significand with a sticky bit for
//! what lies below it) and rounds it once ([`round`]), so add, multiply, fused multiply-add
//! (with an exact power-of-two scale, for `v_div_fmas_*`), conversions and `ldexp` are correctly
//! rounded in every mode and format. The executor uses the host's own operations where they
//! give the same bits (round to nearest even on f32 and f64) and these otherwise.
//!
//! NaNs: an operation with a NaN operand returns the first NaN operand quieted; one that is
//! invalid (∞ − ∞, 0 × ∞) returns the default NaN, sign set (`0xFFC0_0000` for f32, as the
//! hardware's functional examples and x86 both produce).

use core::cmp::Ordering;

/// A rounding mode in MODE's encoding (FP_ROUND: 0 nearest even, 1 +∞, 2 −∞, 3 toward zero).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Round {
    /// Round to nearest, ties to even.
    Even,
    /// Toward +∞.
    Up,
    /// Toward −∞.
    Down,
    /// Toward zero.
    Zero,
}

impl Round {
    /// The mode of a 2-bit FP_ROUND field.
    pub(crate) fn from_bits(b: u32) -> Round {
        match b & 3 {
            0 => Round::Even,
            1 => Round::Up,
            2 => Round::Down,
            _ => Round::Zero,
        }
    }
}

/// A binary floating-point format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fmt {
    /// Exponent bits.
    pub(crate) exp: u32,
    /// Fraction (explicit significand) bits.
    pub(crate) frac: u32,
}

/// IEEE binary16.
pub(crate) const F16: Fmt = Fmt { exp: 5, frac: 10 };
/// IEEE binary32.
pub(crate) const F32: Fmt = Fmt { exp: 8, frac: 23 };
/// IEEE binary64.
pub(crate) const F64: Fmt = Fmt { exp: 11, frac: 52 };

impl Fmt {
    pub(crate) const fn bias(self) -> i32 {
        (1 << (self.exp - 1)) - 1
    }
    pub(crate) const fn sign(self) -> u64 {
        1 << (self.exp + self.frac)
    }
    pub(crate) const fn frac_mask(self) -> u64 {
        (1 << self.frac) - 1
    }
    pub(crate) const fn exp_max(self) -> u64 {
        (1 << self.exp) - 1
    }
    /// The biased exponent field.
    pub(crate) const fn exponent(self, x: u64) -> u64 {
        (x >> self.frac) & self.exp_max()
    }
    pub(crate) const fn inf(self, neg: bool) -> u64 {
        (self.exp_max() << self.frac) | if neg { self.sign() } else { 0 }
    }
    pub(crate) const fn zero(self, neg: bool) -> u64 {
        if neg {
            self.sign()
        } else {
            0
        }
    }
    /// The largest finite value.
    pub(crate) const fn max_finite(self, neg: bool) -> u64 {
        self.inf(neg) - 1
    }
    /// The default NaN (sign set, quiet).
    pub(crate) const fn default_nan(self) -> u64 {
        self.inf(true) | (1 << (self.frac - 1))
    }
    pub(crate) const fn is_nan(self, x: u64) -> bool {
        self.exponent(x) == self.exp_max() && x & self.frac_mask() != 0
    }
    pub(crate) const fn is_inf(self, x: u64) -> bool {
        self.exponent(x) == self.exp_max() && x & self.frac_mask() == 0
    }
    pub(crate) const fn is_zero(self, x: u64) -> bool {
        x & !self.sign() == 0
    }
    pub(crate) const fn is_denormal(self, x: u64) -> bool {
        self.exponent(x) == 0 && x & self.frac_mask() != 0
    }
    pub(crate) const fn is_neg(self, x: u64) -> bool {
        x & self.sign() != 0
    }
    /// A NaN with its quiet bit set (other values unchanged).
    pub(crate) const fn quiet(self, x: u64) -> u64 {
        if self.is_nan(x) {
            x | (1 << (self.frac - 1))
        } else {
            x
        }
    }
    /// A denormal replaced by zero of its sign.
    pub(crate) const fn flush(self, x: u64) -> u64 {
        if self.is_denormal(x) {
            x & self.sign()
        } else {
            x
        }
    }
    pub(crate) const fn abs(self, x: u64) -> u64 {
        x & !self.sign()
    }
    pub(crate) const fn neg(self, x: u64) -> u64 {
        x ^ self.sign()
    }
}

/// A value taken apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Val {
    Nan,
    Inf(bool),
    Zero(bool),
    /// `(−1)^neg × m × 2^e`, `m` with its hidden bit.
    Fin {
        neg: bool,
        m: u64,
        e: i32,
    },
}

pub(crate) fn unpack(f: Fmt, x: u64) -> Val {
    let neg = f.is_neg(x);
    let be = f.exponent(x);
    let fr = x & f.frac_mask();
    if be == f.exp_max() {
        return if fr == 0 { Val::Inf(neg) } else { Val::Nan };
    }
    if be == 0 {
        if fr == 0 {
            return Val::Zero(neg);
        }
        return Val::Fin { neg, m: fr, e: 1 - f.bias() - f.frac as i32 };
    }
    Val::Fin { neg, m: fr | (1 << f.frac), e: be as i32 - f.bias() - f.frac as i32 }
}

/// Rounds `(−1)^neg × (m + δ) × 2^e` to `f`, where δ is 0 when `sticky` is false and some value
/// strictly between 0 and 1 when it is true (bits lost below `m`).
pub(crate) fn round(f: Fmt, rm: Round, neg: bool, m: u128, e: i32, sticky: bool) -> u64 {
    let sign = f.zero(neg);
    if m == 0 && !sticky {
        return sign;
    }
    let emin = 1 - f.bias();
    let frac = f.frac as i32;
    let bits = 128 - m.leading_zeros() as i32;
    // Exponent of the leading bit (a lone sticky value is below every bit of m).
    let top = if m == 0 { i32::MIN / 2 } else { e.saturating_add(bits - 1) };
    let mut lsb = top.max(emin) - frac;
    let shift = i64::from(lsb) - i64::from(e);
    let (q, rem, rem_nonzero) = if shift <= 0 {
        let s = (-shift) as u32;
        // m << s fits: the result has at most frac + 1 bits.
        (if s >= 128 { 0 } else { m << s }, Ordering::Less, false)
    } else if shift > 128 {
        (0, Ordering::Less, m != 0)
    } else if shift == 128 {
        (0, m.cmp(&(1u128 << 127)), m != 0)
    } else {
        let s = shift as u32;
        let r = m & ((1u128 << s) - 1);
        (m >> s, r.cmp(&(1u128 << (s - 1))), r != 0)
    };
    let inexact = rem_nonzero || sticky;
    let inc = match rm {
        Round::Even => rem == Ordering::Greater || (rem == Ordering::Equal && (sticky || q & 1 == 1)),
        Round::Up => inexact && !neg,
        Round::Down => inexact && neg,
        Round::Zero => false,
    };
    let mut q = q + u128::from(inc);
    if q >> (frac + 1) != 0 {
        q >>= 1;
        lsb += 1;
    }
    if q == 0 {
        return sign;
    }
    if q >> frac == 0 {
        // Denormal (lsb is emin - frac).
        return sign | q as u64;
    }
    let biased = i64::from(lsb) + i64::from(frac) + i64::from(f.bias());
    if biased >= f.exp_max() as i64 {
        let inf = match rm {
            Round::Even => true,
            Round::Up => !neg,
            Round::Down => neg,
            Round::Zero => false,
        };
        return if inf { f.inf(neg) } else { f.max_finite(neg) };
    }
    sign | (biased as u64) << f.frac | (q as u64 & f.frac_mask())
}

/// An exact sum of two finite values (significands below 2^110): `(neg, m, e, sticky)`, or
/// `None` for an exact zero.
fn add_exact(n1: bool, m1: u128, e1: i32, n2: bool, m2: u128, e2: i32) -> Option<(bool, u128, i32, bool)> {
    if m1 == 0 {
        return (m2 != 0).then_some((n2, m2, e2, false));
    }
    if m2 == 0 {
        return Some((n1, m1, e1, false));
    }
    let top = |m: u128, e: i32| e + (128 - m.leading_zeros() as i32);
    let t = top(m1, e1).max(top(m2, e2));
    // Align both at 2^base, the larger one taking up to 126 bits (room for a carry).
    let base = t - 126;
    let align = |m: u128, e: i32| -> (u128, bool) {
        if e >= base {
            (m << (e - base), false)
        } else {
            let d = (base - e) as u32;
            if d >= 128 {
                (0, true)
            } else {
                (m >> d, m & ((1u128 << d) - 1) != 0)
            }
        }
    };
    let (a, sa) = align(m1, e1);
    let (b, sb) = align(m2, e2);
    // At most one operand lost bits, and it is far the smaller one (its top is more than 16
    // bits below the other's).
    let sticky = sa || sb;
    if n1 == n2 {
        return Some((n1, a + b, base, sticky));
    }
    let (big, nb, small, small_sticky) = match a.cmp(&b) {
        Ordering::Greater => (a, n1, b, sb),
        Ordering::Less => (b, n2, a, sa),
        Ordering::Equal => return None, // neither lost bits when they are this close
    };
    if small_sticky {
        // big − (small + δ) = (big − small − 1) + (1 − δ).
        Some((nb, big - small - 1, base, true))
    } else {
        Some((nb, big - small, base, sticky))
    }
}

/// The sign of an exact zero sum of `a` and `b` (of signs `na`, `nb`).
fn zero_sum_sign(rm: Round, na: bool, nb: bool) -> bool {
    if na == nb {
        na
    } else {
        rm == Round::Down
    }
}

/// `a + b`, rounded once.
pub(crate) fn add(f: Fmt, rm: Round, a: u64, b: u64) -> u64 {
    match (unpack(f, a), unpack(f, b)) {
        (Val::Nan, _) => f.quiet(a),
        (_, Val::Nan) => f.quiet(b),
        (Val::Inf(x), Val::Inf(y)) => {
            if x == y {
                a
            } else {
                f.default_nan()
            }
        }
        (Val::Inf(_), _) => a,
        (_, Val::Inf(_)) => b,
        (Val::Zero(x), Val::Zero(y)) => f.zero(zero_sum_sign(rm, x, y)),
        (Val::Zero(_), _) => b,
        (_, Val::Zero(_)) => a,
        (Val::Fin { neg: n1, m: m1, e: e1 }, Val::Fin { neg: n2, m: m2, e: e2 }) => {
            match add_exact(n1, m1.into(), e1, n2, m2.into(), e2) {
                Some((n, m, e, s)) => round(f, rm, n, m, e, s),
                None => f.zero(rm == Round::Down),
            }
        }
    }
}

/// `a × b`, rounded once.
pub(crate) fn mul(f: Fmt, rm: Round, a: u64, b: u64) -> u64 {
    let neg = f.is_neg(a) != f.is_neg(b);
    match (unpack(f, a), unpack(f, b)) {
        (Val::Nan, _) => f.quiet(a),
        (_, Val::Nan) => f.quiet(b),
        (Val::Inf(_), Val::Zero(_)) | (Val::Zero(_), Val::Inf(_)) => f.default_nan(),
        (Val::Inf(_), _) | (_, Val::Inf(_)) => f.inf(neg),
        (Val::Zero(_), _) | (_, Val::Zero(_)) => f.zero(neg),
        (Val::Fin { m: m1, e: e1, .. }, Val::Fin { m: m2, e: e2, .. }) => {
            round(f, rm, neg, u128::from(m1) * u128::from(m2), e1 + e2, false)
        }
    }
}

/// `(a × b + c) × 2^scale`, rounded once.
pub(crate) fn fma(f: Fmt, rm: Round, a: u64, b: u64, c: u64, scale: i32) -> u64 {
    let (ua, ub, uc) = (unpack(f, a), unpack(f, b), unpack(f, c));
    if ua == Val::Nan {
        return f.quiet(a);
    }
    if ub == Val::Nan {
        return f.quiet(b);
    }
    if uc == Val::Nan {
        return f.quiet(c);
    }
    let pneg = f.is_neg(a) != f.is_neg(b);
    let p_inf = matches!(ua, Val::Inf(_)) || matches!(ub, Val::Inf(_));
    let p_zero = matches!(ua, Val::Zero(_)) || matches!(ub, Val::Zero(_));
    if p_inf && p_zero {
        return f.default_nan();
    }
    if p_inf {
        return match uc {
            Val::Inf(cn) if cn != pneg => f.default_nan(),
            _ => f.inf(pneg),
        };
    }
    if let Val::Inf(_) = uc {
        return c;
    }
    let scale = scale.clamp(-4096, 4096);
    let (pm, pe) = match (ua, ub) {
        (Val::Fin { m: m1, e: e1, .. }, Val::Fin { m: m2, e: e2, .. }) => (u128::from(m1) * u128::from(m2), e1 + e2),
        _ => (0, 0),
    };
    match uc {
        Val::Zero(cn) => {
            if p_zero {
                f.zero(zero_sum_sign(rm, pneg, cn))
            } else {
                round(f, rm, pneg, pm, pe + scale, false)
            }
        }
        Val::Fin { neg: cn, m: cm, e: ce } => {
            if p_zero {
                return round(f, rm, cn, cm.into(), ce + scale, false);
            }
            match add_exact(pneg, pm, pe, cn, cm.into(), ce) {
                Some((n, m, e, s)) => round(f, rm, n, m, e + scale, s),
                None => f.zero(rm == Round::Down),
            }
        }
        _ => f.default_nan(),
    }
}

/// `x × 2^n`, rounded once.
pub(crate) fn ldexp(f: Fmt, rm: Round, x: u64, n: i32) -> u64 {
    match unpack(f, x) {
        Val::Nan => f.quiet(x),
        Val::Inf(_) | Val::Zero(_) => x,
        Val::Fin { neg, m, e } => round(f, rm, neg, m.into(), e + n.clamp(-4096, 4096), false),
    }
}

/// `x` of format `from` converted to `to`, rounded once. NaNs keep their sign and the top of
/// their payload, quieted.
pub(crate) fn convert(from: Fmt, to: Fmt, rm: Round, x: u64) -> u64 {
    match unpack(from, x) {
        Val::Nan => {
            let payload = x & from.frac_mask();
            let p =
                if to.frac >= from.frac { payload << (to.frac - from.frac) } else { payload >> (from.frac - to.frac) };
            to.inf(from.is_neg(x)) | p | (1 << (to.frac - 1))
        }
        Val::Inf(n) => to.inf(n),
        Val::Zero(n) => to.zero(n),
        Val::Fin { neg, m, e } => round(to, rm, neg, m.into(), e, false),
    }
}

/// The integer `±mag` converted to `to`, rounded once (+0 for 0).
pub(crate) fn from_int(to: Fmt, rm: Round, neg: bool, mag: u64) -> u64 {
    round(to, rm, neg && mag != 0, mag.into(), 0, false)
}

/// `x` as a value of `f` in f64 (exact: f16 and f32 values are f64 values).
pub(crate) fn to_f64(f: Fmt, x: u64) -> f64 {
    f64::from_bits(convert(f, F64, Round::Even, x))
}

/// An f64 value rounded to `f` (to nearest even).
pub(crate) fn from_f64(f: Fmt, x: f64) -> u64 {
    convert(F64, f, Round::Even, x.to_bits())
}
