//! `__gnu_f2h_ieee` and `__gnu_h2f_ieee`: IEEE binary32 ↔ binary16 conversions, the compiler
//! runtime helpers Debian's libamdhip64 exports (HIP's `__half` host code calls them).

/// `__gnu_f2h_ieee`: `value` as binary16 bits, rounded to nearest even; overflow gives
/// infinity, NaN stays NaN (quiet, payload's top bits kept).
#[no_mangle]
pub extern "C" fn __gnu_f2h_ieee(value: f32) -> u16 {
    f32_to_f16(value)
}

/// `__gnu_h2f_ieee`: binary16 bits `bits` as a float (exact).
#[no_mangle]
pub extern "C" fn __gnu_h2f_ieee(bits: u16) -> f32 {
    f16_to_f32(bits)
}

fn f32_to_f16(value: f32) -> u16 {
    let x = value.to_bits();
    let sign = ((x >> 16) & 0x8000) as u16;
    let exp = ((x >> 23) & 0xff) as i32;
    let man = x & 0x7f_ffff;
    if exp == 0xff {
        // Infinity, or NaN kept quiet with the payload's top bits.
        return sign | 0x7c00 | if man != 0 { 0x200 | (man >> 13) as u16 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        // Subnormal or zero: shift the full significand into place, rounding to nearest even.
        if e < -10 {
            return sign;
        }
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rest = m & ((1u32 << shift) - 1);
        let mut h = m >> shift;
        if rest > half || (rest == half && h & 1 == 1) {
            h += 1;
        }
        return sign | h as u16;
    }
    let mut h = ((e as u32) << 10) | (man >> 13);
    let rest = man & 0x1fff;
    if rest > 0x1000 || (rest == 0x1000 && h & 1 == 1) {
        // May carry into the exponent, up to infinity: still correct.
        h += 1;
    }
    sign | h as u16
}

fn f16_to_f32(bits: u16) -> f32 {
    let sign = u32::from(bits & 0x8000) << 16;
    let exp = u32::from((bits >> 10) & 0x1f);
    let man = u32::from(bits & 0x3ff);
    let x = match (exp, man) {
        (0, 0) => sign,
        (0, m) => {
            // Subnormal: normalise.
            let shift = m.leading_zeros() - 21;
            sign | ((113 - shift) << 23) | ((m << shift) & 0x3ff) << 13
        }
        (0x1f, m) => sign | 0x7f80_0000 | (m << 13),
        (e, m) => sign | ((e + 112) << 23) | (m << 13),
    };
    f32::from_bits(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_half_round_trips_and_rounding_is_to_nearest_even() {
        for bits in 0..=u16::MAX {
            let f = f16_to_f32(bits);
            if f.is_nan() {
                assert!(f16_to_f32(f32_to_f16(f)).is_nan());
            } else {
                assert_eq!(f32_to_f16(f), bits, "{bits:#x} = {f}");
            }
        }
        assert_eq!(f32_to_f16(1.0), 0x3c00);
        assert_eq!(f32_to_f16(65504.0), 0x7bff);
        assert_eq!(f32_to_f16(65520.0), 0x7c00); // rounds up to infinity
        assert_eq!(f32_to_f16(1.0 + 1.0 / 2048.0), 0x3c00); // tie, to even
        assert_eq!(f32_to_f16(1.0 + 3.0 / 2048.0), 0x3c02); // tie, to even
        assert_eq!(f32_to_f16(5.960_464_5e-8), 0x0001); // smallest subnormal
        assert_eq!(f32_to_f16(2.0e-8), 0x0000);
        assert_eq!(f16_to_f32(0x0001), 5.960_464_5e-8);
        assert_eq!(f32_to_f16(-0.0), 0x8000);
    }
}
