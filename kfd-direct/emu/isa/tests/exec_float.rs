//! Floating-point and packed-math semantics of the executor (docs/executor.md §5): instructions
//! assembled by `llvm-mc-15` at test time, run on one wave over random lanes and edge cases
//! (NaN, ±∞, denormals, −0, EXEC-masked lanes), checked against values computed here
//! independently of the executor: Rust's IEEE operations (`mul_add` for fused ones), exact
//! error terms (TwoSum, fma residuals) for the directed rounding modes, a separate f16
//! conversion, and the ISA's tables and functional examples.

#![allow(clippy::needless_range_loop, clippy::excessive_precision, clippy::unreadable_literal)]

mod common;

use common::assemble;
use common::rnd;

use aqueduct_isa::exec::{run_wave, Code, ExecErrorKind, Limits, VecMemory, Wave, LANES};

const BASE: u64 = 0x1_0000_0000;

/// The initial MODE of a hipcc kernel: round to nearest even, f32 and f64/f16 denormals kept,
/// DX10_CLAMP and IEEE set.
const MODE: u32 = 0x3F0;

/// A wave with 40 VGPRs, all lanes active, hipcc's MODE.
fn wave() -> Wave {
    let mut w = Wave::new(40, 8);
    w.exec = u64::MAX;
    w.mode = MODE;
    w
}

fn try_run(asm: &str, w: &mut Wave) -> Result<(), aqueduct_isa::exec::ExecError> {
    let code = Code::decode(BASE, &assemble(&format!("{asm}\ns_endpgm")));
    w.pc = 0;
    let mem = VecMemory::new(BASE, 0);
    let mut lds = vec![0u8; 4096];
    run_wave(&code, w, &mem, &mut lds, &Limits { wave_instructions: 10_000 })
}

fn run(asm: &str, w: &mut Wave) {
    try_run(asm, w).unwrap_or_else(|e| panic!("{asm}: {e}"));
}

fn unimplemented(asm: &str, w: &mut Wave) {
    let e = try_run(asm, w).expect_err(asm);
    assert_eq!(e.kind, ExecErrorKind::Unimplemented, "{asm}: {e}");
}

fn set_f32(w: &mut Wave, r: usize, v: &[f32; LANES]) {
    w.vgpr[r] = v.map(f32::to_bits);
}

fn set_f64(w: &mut Wave, r: usize, v: &[f64; LANES]) {
    for l in 0..LANES {
        w.vgpr[r][l] = v[l].to_bits() as u32;
        w.vgpr[r + 1][l] = (v[l].to_bits() >> 32) as u32;
    }
}

fn f32_at(w: &Wave, r: usize, l: usize) -> f32 {
    f32::from_bits(w.vgpr[r][l])
}

fn f64_at(w: &Wave, r: usize, l: usize) -> f64 {
    f64::from_bits(u64::from(w.vgpr[r][l]) | u64::from(w.vgpr[r + 1][l]) << 32)
}

fn sgpr64(w: &Wave, s: usize) -> u64 {
    u64::from(w.sgpr[s]) | u64::from(w.sgpr[s + 1]) << 32
}

/// Bit-equal, or both NaN.
fn same32(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

fn same64(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// ULPs between two finite f32 of any sign (u64::MAX when NaN/∞ differ).
fn ulps32(got: f32, want: f32) -> u64 {
    if got.is_nan() || want.is_nan() || got.is_infinite() || want.is_infinite() {
        return if same32(got, want) { 0 } else { u64::MAX };
    }
    let key = |x: f32| {
        let b = i64::from(x.to_bits());
        if b < 0x8000_0000 {
            b
        } else {
            0x8000_0000 - b
        }
    };
    key(got).abs_diff(key(want))
}

fn ulps64(got: f64, want: f64) -> u64 {
    if got.is_nan() || want.is_nan() || got.is_infinite() || want.is_infinite() {
        return if same64(got, want) { 0 } else { u64::MAX };
    }
    let key = |x: f64| {
        let b = i128::from(x.to_bits());
        if b < 1 << 63 {
            b
        } else {
            (1i128 << 63) - b
        }
    };
    key(got).abs_diff(key(want)) as u64
}

/// Random f32 bit patterns over every exponent (NaNs and infinities included).
fn any_f32(r: &mut impl FnMut() -> u32) -> f32 {
    f32::from_bits(r())
}

fn any_f64(r: &mut impl FnMut() -> u32) -> f64 {
    f64::from_bits(u64::from(r()) << 32 | u64::from(r()))
}

// ---------------------------------------------------------------------------------------------
// reference rounding (independent of the executor)

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Even,
    Up,
    Down,
    Zero,
}

const MODES: [Mode; 4] = [Mode::Even, Mode::Up, Mode::Down, Mode::Zero];

fn next_up64(x: f64) -> f64 {
    if x.is_nan() || x == f64::INFINITY {
        return x;
    }
    if x == 0.0 {
        return f64::from_bits(1);
    }
    let b = x.to_bits();
    f64::from_bits(if x > 0.0 { b + 1 } else { b - 1 })
}

fn next_down64(x: f64) -> f64 {
    -next_up64(-x)
}

fn next_up32(x: f32) -> f32 {
    if x.is_nan() || x == f32::INFINITY {
        return x;
    }
    if x == 0.0 {
        return f32::from_bits(1);
    }
    let b = x.to_bits();
    f32::from_bits(if x > 0.0 { b + 1 } else { b - 1 })
}

fn next_down32(x: f32) -> f32 {
    -next_up32(-x)
}

/// a + b = s + e exactly (Knuth's TwoSum; no overflow).
fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    let e = (a - (s - bb)) + (b - bb);
    (s, e)
}

/// The f64 rounding in `m` of the exact value s + e (s = RNE(s + e), |e| ≤ ulp(s)/2).
fn directed64(m: Mode, s: f64, e: f64) -> f64 {
    if e == 0.0 || !s.is_finite() {
        return s;
    }
    let (lo, hi) = if e > 0.0 { (s, next_up64(s)) } else { (next_down64(s), s) };
    match m {
        Mode::Even => s,
        Mode::Up => hi,
        Mode::Down => lo,
        Mode::Zero => {
            if s > 0.0 || (s == 0.0 && e > 0.0) {
                lo
            } else {
                hi
            }
        }
    }
}

/// The f32 rounding in `m` of the exact value s + e (s, e f64 with s + e exact).
fn directed32(m: Mode, s: f64, e: f64) -> f32 {
    let r = s as f32; // RNE of s, and s + e rounds to the same unless a tie moves
    let rd = f64::from(r);
    // Sign of (rd - (s + e)), exactly: rd - s is exact (close values), compared with e.
    let diff = if r.is_infinite() {
        if r > 0.0 {
            1.0
        } else {
            -1.0
        }
    } else {
        (rd - s) - e
    };
    let diff = if r.is_infinite() {
        diff
    } else {
        let (d0, d1) = two_sum(rd - s, -e);
        d0 + d1
    };
    if diff == 0.0 {
        return r;
    }
    let (lo, hi) = if diff > 0.0 { (next_down32(r), r) } else { (r, next_up32(r)) };
    let even = {
        // RNE of the exact value: the nearer of lo and hi, ties to even.
        let (dl, dh) = (s + e - f64::from(lo), f64::from(hi) - (s + e));
        if hi.is_infinite() {
            if s + e >= f64::from(f32::MAX) + f64::from(f32::MAX - next_down32(f32::MAX)) / 2.0 {
                hi
            } else {
                lo
            }
        } else if lo.is_infinite() {
            if s + e <= -(f64::from(f32::MAX) + f64::from(f32::MAX - next_down32(f32::MAX)) / 2.0) {
                lo
            } else {
                hi
            }
        } else if dl < dh {
            lo
        } else if dh < dl {
            hi
        } else if lo.to_bits() & 1 == 0 {
            lo
        } else {
            hi
        }
    };
    let v = s + e;
    match m {
        Mode::Even => even,
        Mode::Up => hi,
        Mode::Down => lo,
        Mode::Zero => {
            if v > 0.0 {
                lo
            } else {
                hi
            }
        }
    }
}

/// f16 → f64 (exact).
fn h2f(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let e = i32::from((h >> 10) & 0x1F);
    let m = f64::from(h & 0x3FF);
    sign * match e {
        0 => m * 2f64.powi(-24),
        31 => {
            if m == 0.0 {
                f64::INFINITY
            } else {
                f64::NAN
            }
        }
        _ => (1.0 + m / 1024.0) * 2f64.powi(e - 15),
    }
}

/// f64 → f16 rounded to nearest even (NaN → 0x7E00).
fn f2h(x: f64) -> u16 {
    if x.is_nan() {
        return 0x7E00;
    }
    let sign = if x.is_sign_negative() { 0x8000 } else { 0 };
    let a = x.abs();
    if a < 2f64.powi(-14) {
        return sign | (a * 2f64.powi(24)).round_ties_even() as u16;
    }
    if a.is_infinite() {
        return sign | 0x7C00;
    }
    let mut e = ((a.to_bits() >> 52) & 0x7FF) as i32 - 1023;
    let mut q = (a * 2f64.powi(10 - e)).round_ties_even();
    if q == 2048.0 {
        e += 1;
        q = 1024.0;
    }
    if e > 15 {
        return sign | 0x7C00;
    }
    sign | (((e + 15) as u16) << 10) | (q as u16 - 1024)
}

fn is_nan16(h: u16) -> bool {
    h & 0x7C00 == 0x7C00 && h & 0x3FF != 0
}

fn ulps16(got: u16, want: u16) -> u64 {
    if is_nan16(got) || is_nan16(want) {
        return if is_nan16(got) && is_nan16(want) { 0 } else { u64::MAX };
    }
    let key = |h: u16| if h & 0x8000 == 0 { i64::from(h) } else { -i64::from(h & 0x7FFF) };
    key(got).abs_diff(key(want))
}

/// Random f16 patterns of moderate magnitude (2^-6 .. 2^7) with both signs.
fn mid_f16(r: &mut impl FnMut() -> u32) -> u16 {
    let x = r() as u16;
    (x & 0x83FF) | ((x >> 10) % 14 + 9) << 10
}

// ---------------------------------------------------------------------------------------------
// division

/// hipcc -O3's f32 `a / b` for gfx90a (IEEE mode, denormals kept): v1 = a, v2 = b → v1.
const FDIV32: &str = "v_div_scale_f32 v3, s[0:1], v2, v2, v1
v_rcp_f32_e32 v4, v3
v_div_scale_f32 v5, vcc, v1, v2, v1
v_fma_f32 v6, -v3, v4, 1.0
v_fmac_f32_e32 v4, v6, v4
v_mul_f32_e32 v6, v5, v4
v_fma_f32 v7, -v3, v6, v5
v_fmac_f32_e32 v6, v7, v4
v_fma_f32 v3, -v3, v6, v5
v_div_fmas_f32 v3, v3, v4, v6
v_div_fixup_f32 v1, v3, v2, v1";

/// The same with `-fgpu-flush-denormals-to-zero`: denormals switched on with `s_setreg` around
/// the Newton-Raphson steps.
const FDIV32_FTZ: &str = "v_div_scale_f32 v3, s[0:1], v2, v2, v1
v_rcp_f32_e32 v4, v3
v_div_scale_f32 v5, vcc, v1, v2, v1
s_setreg_imm32_b32 hwreg(HW_REG_MODE, 4, 2), 3
v_fma_f32 v6, -v3, v4, 1.0
v_fmac_f32_e32 v4, v6, v4
v_mul_f32_e32 v6, v5, v4
v_fma_f32 v7, -v3, v6, v5
v_fmac_f32_e32 v6, v7, v4
v_fma_f32 v3, -v3, v6, v5
s_setreg_imm32_b32 hwreg(HW_REG_MODE, 4, 2), 0
v_div_fmas_f32 v3, v3, v4, v6
v_div_fixup_f32 v1, v3, v2, v1";

/// hipcc -O3's f64 `a / b`: v[0:1] = a, v[2:3] = b → v[0:1].
const FDIV64: &str = "v_div_scale_f64 v[4:5], s[0:1], v[2:3], v[2:3], v[0:1]
v_rcp_f64_e32 v[6:7], v[4:5]
v_div_scale_f64 v[8:9], vcc, v[0:1], v[2:3], v[0:1]
v_fma_f64 v[10:11], -v[4:5], v[6:7], 1.0
v_fmac_f64_e32 v[6:7], v[6:7], v[10:11]
v_fma_f64 v[10:11], -v[4:5], v[6:7], 1.0
v_fmac_f64_e32 v[6:7], v[6:7], v[10:11]
v_mul_f64 v[10:11], v[8:9], v[6:7]
v_fma_f64 v[4:5], -v[4:5], v[10:11], v[8:9]
v_div_fmas_f64 v[4:5], v[4:5], v[6:7], v[10:11]
v_div_fixup_f64 v[0:1], v[4:5], v[2:3], v[0:1]";

fn div_edges32() -> Vec<(f32, f32)> {
    let m = f32::MAX;
    let d = f32::from_bits(1);
    let n = f32::MIN_POSITIVE;
    vec![
        (1.0, 3.0),
        (1.0, m),
        (m, m),
        (m, 0.5),
        (m, d),
        (d, m),
        (d, 3.0),
        (d, d),
        (n, 3.0),
        (3.0, n),
        (1.0, 2f32.powi(126)),
        (1.0, 2f32.powi(127) * 1.5),
        (2f32.powi(-100), 2f32.powi(30)),
        (2f32.powi(-110), 2f32.powi(-20)),
        (2f32.powi(100), 2f32.powi(-30)),
        (-0.0, 5.0),
        (0.0, -5.0),
        (7.0, 0.0),
        (-7.0, 0.0),
        (0.0, 0.0),
        (f32::INFINITY, 3.0),
        (3.0, f32::NEG_INFINITY),
        (f32::INFINITY, f32::INFINITY),
        (f32::NAN, 1.0),
        (1.0, f32::NAN),
        (1e-45, 1e38),
        (6e-39, 1.5),
        (1.1754942e-38, 0.9999999),
        (3.4e38, 1e-2),
        (1e30, 1e-10),
    ]
}

fn check_fdiv32(program: &str, mode: u32, flush: bool) {
    let mut r = rnd(0xD1);
    let mut cases = div_edges32();
    while cases.len() < 64 * 12 {
        cases.push((any_f32(&mut r), any_f32(&mut r)));
    }
    for chunk in cases.chunks(LANES) {
        let mut w = wave();
        w.mode = mode;
        for (l, (a, b)) in chunk.iter().enumerate() {
            w.vgpr[1][l] = a.to_bits();
            w.vgpr[2][l] = b.to_bits();
        }
        run(program, &mut w);
        for (l, (a, b)) in chunk.iter().enumerate() {
            let fl = |x: f32| if flush && x.is_subnormal() { 0.0f32.copysign(x) } else { x };
            if flush && (a.is_subnormal() || b.is_subnormal()) {
                continue; // flushed inputs: the macro's contract is for normal operands
            }
            let want = fl(a / b);
            let got = f32_at(&w, 1, l);
            assert!(
                same32(got, want),
                "{a:e} ({:#010x}) / {b:e} ({:#010x}): got {got:e} ({:#010x}) want {want:e} ({:#010x})",
                a.to_bits(),
                b.to_bits(),
                got.to_bits(),
                want.to_bits()
            );
        }
        if !flush {
            assert_eq!(w.mode, mode);
        }
    }
}

#[test]
fn hipcc_f32_division_macro_is_correctly_rounded() {
    check_fdiv32(FDIV32, MODE, false);
}

#[test]
fn hipcc_f32_division_macro_with_denormals_flushed_switches_mode() {
    // f32 denormals flushed (FP_DENORM[1:0] = 0), f64/f16 kept.
    let mode = MODE & !0x30;
    check_fdiv32(FDIV32_FTZ, mode, true);
}

#[test]
fn hipcc_f64_division_macro_is_correctly_rounded() {
    let mut r = rnd(0xD2);
    let mut cases: Vec<(f64, f64)> = vec![
        (1.0, 3.0),
        (1.0, f64::MAX),
        (f64::MAX, 0.5),
        (f64::MAX, f64::from_bits(1)),
        (f64::from_bits(1), f64::MAX),
        (f64::from_bits(1), 3.0),
        (f64::MIN_POSITIVE, 3.0),
        (3.0, f64::MIN_POSITIVE),
        (1.0, 2f64.powi(1022) * 1.5),
        (2f64.powi(-1000), 2f64.powi(60)),
        (2f64.powi(-1000), 2f64.powi(-10)),
        (0.0, 1.0),
        (-1.0, 0.0),
        (0.0, 0.0),
        (f64::INFINITY, 1.0),
        (1.0, f64::INFINITY),
        (f64::NAN, 1.0),
        (1e300, 1e-300),
    ];
    while cases.len() < 64 * 10 {
        cases.push((any_f64(&mut r), any_f64(&mut r)));
    }
    for chunk in cases.chunks(LANES) {
        let mut w = wave();
        for (l, (a, b)) in chunk.iter().enumerate() {
            w.vgpr[0][l] = a.to_bits() as u32;
            w.vgpr[1][l] = (a.to_bits() >> 32) as u32;
            w.vgpr[2][l] = b.to_bits() as u32;
            w.vgpr[3][l] = (b.to_bits() >> 32) as u32;
        }
        run(FDIV64, &mut w);
        for (l, (a, b)) in chunk.iter().enumerate() {
            let (got, want) = (f64_at(&w, 0, l), a / b);
            assert!(
                same64(got, want),
                "{a:e} / {b:e}: got {got:e} ({:#018x}) want {want:e} ({:#018x})",
                got.to_bits(),
                want.to_bits()
            );
        }
    }
}

#[test]
fn div_scale_takes_the_isa_branches() {
    let p = |e: i32| 2f64.powi(e) as f32; // exact down to 2^-149
    let nan = f32::NAN;
    // (numerator, denominator, scaled denominator, scaled numerator, VCC)
    let cases: &[(f32, f32, f32, f32, bool)] = &[
        (3.0, 7.0, 7.0, 3.0, false),
        (0.0, 7.0, nan, nan, false),
        (3.0, 0.0, nan, nan, false),
        // Quotient near the largest value: the denominator up, post-scale.
        (p(100), 1.0, p(64), p(100), true),
        // Denormal denominator (numerator not huge): both up.
        (p(-100), p(-140), p(-76), p(-36), false),
        // 1 / d and n / d denormal: the denominator down, post-scale.
        (1.0, p(127), p(63), 1.0, true),
        // 1 / d denormal only: both down.
        (p(10), p(127), p(63), p(-54), false),
        // n / d denormal only: the numerator up, post-scale.
        (p(-100), p(30), p(30), p(-36), true),
        // A tiny numerator: both up.
        (p(-110), p(-20), p(44), p(-46), false),
    ];
    let mut w = wave();
    for (l, c) in cases.iter().enumerate() {
        w.vgpr[1][l] = c.0.to_bits();
        w.vgpr[2][l] = c.1.to_bits();
    }
    w.exec = (1 << cases.len()) - 1;
    run("v_div_scale_f32 v3, s[0:1], v2, v2, v1\nv_div_scale_f32 v4, vcc, v1, v2, v1", &mut w);
    for (l, c) in cases.iter().enumerate() {
        assert!(same32(f32_at(&w, 3, l), c.2), "case {l} {c:?}: denominator {:e}", f32_at(&w, 3, l));
        assert!(same32(f32_at(&w, 4, l), c.3), "case {l} {c:?}: numerator {:e}", f32_at(&w, 4, l));
        assert_eq!(w.vcc >> l & 1 != 0, c.4, "case {l} {c:?}: VCC");
        assert_eq!(sgpr64(&w, 0) >> l & 1 != 0, c.4, "case {l} {c:?}: the denominator's VCC");
    }
    assert_eq!(w.vcc >> cases.len(), 0, "inactive lanes read 0");
    // f64: thresholds 768 and 53, scale 2^±128.
    let mut w = wave();
    let p = |e: i32| 2f64.powi(e);
    let cases: &[(f64, f64, f64, f64, bool)] = &[
        (p(800), 1.0, p(128), p(800), true),
        (1.0, p(1023), p(895), 1.0, true),
        (p(-1000), p(30), p(30), p(-872), true),
        (p(-1000), p(-10), p(118), p(-872), false),
        (3.0, 5.0, 5.0, 3.0, false),
    ];
    for (l, c) in cases.iter().enumerate() {
        for (r, v) in [(0, c.0), (2, c.1)] {
            w.vgpr[r][l] = v.to_bits() as u32;
            w.vgpr[r + 1][l] = (v.to_bits() >> 32) as u32;
        }
    }
    run(
        "v_div_scale_f64 v[4:5], s[0:1], v[2:3], v[2:3], v[0:1]\nv_div_scale_f64 v[6:7], vcc, v[0:1], v[2:3], v[0:1]",
        &mut w,
    );
    for (l, c) in cases.iter().enumerate() {
        assert_eq!(f64_at(&w, 4, l), c.2, "f64 case {l}");
        assert_eq!(f64_at(&w, 6, l), c.3, "f64 case {l}");
        assert_eq!(w.vcc >> l & 1 != 0, c.4, "f64 case {l}");
    }
}

#[test]
fn div_fmas_scales_by_vcc_with_one_rounding() {
    let mut r = rnd(0xF3);
    let mut w = wave();
    let (mut a, mut b, mut c) = ([0f32; LANES], [0f32; LANES], [0f32; LANES]);
    for l in 0..LANES {
        // Products near 2^-70 (scaled down 2^-64 into the denormal range) and addends of the
        // same magnitude: a·b + c exact in f64.
        a[l] = f32::from_bits((r() & 0x807F_FFFF) | (127 - 35) << 23);
        b[l] = f32::from_bits((r() & 0x007F_FFFF) | (127 - 36) << 23);
        c[l] = f32::from_bits((r() & 0x807F_FFFF) | (127 - 70) << 23);
        if l % 4 == 1 {
            // Exponent of S2 above the bias: scaled up (a huge quotient).
            a[l] = f32::from_bits((r() & 0x807F_FFFF) | (127 + 20) << 23);
            b[l] = f32::from_bits((r() & 0x007F_FFFF) | (127 + 21) << 23);
            c[l] = f32::from_bits((r() & 0x807F_FFFF) | (127 + 41) << 23);
        }
    }
    set_f32(&mut w, 1, &a);
    set_f32(&mut w, 2, &b);
    set_f32(&mut w, 3, &c);
    w.vcc = 0x5555_5555_5555_5555 | 0xAAAA_0000_0000_0000;
    run("v_div_fmas_f32 v4, v1, v2, v3", &mut w);
    for l in 0..LANES {
        let exact = f64::from(a[l]) * f64::from(b[l]) + f64::from(c[l]);
        let scaled = w.vcc >> l & 1 != 0;
        let k = if !scaled {
            0
        } else if (c[l].to_bits() >> 23) & 0xFF > 127 {
            64
        } else {
            -64
        };
        let want = (exact * 2f64.powi(k)) as f32; // exact in f64, then rounded once
        assert_eq!(w.vgpr[4][l], want.to_bits(), "lane {l}: fma({}, {}, {}) × 2^{k}", a[l], b[l], c[l]);
    }
    // f64: 2^±128.
    let mut w = wave();
    set_f64(&mut w, 0, &[1.5; LANES]);
    set_f64(&mut w, 2, &[2f64.powi(-1000); LANES]);
    let cs: [f64; LANES] = core::array::from_fn(|l| if l % 2 == 0 { 2f64.powi(-990) } else { 2f64.powi(1000) });
    set_f64(&mut w, 4, &cs);
    w.vcc = u64::MAX;
    run("v_div_fmas_f64 v[6:7], v[0:1], v[2:3], v[4:5]", &mut w);
    for l in 0..LANES {
        let want = if l % 2 == 0 {
            (1.5 * 2f64.powi(-1000) + 2f64.powi(-990)) * 2f64.powi(-128)
        } else {
            (1.5 * 2f64.powi(-1000) + 2f64.powi(1000)) * 2f64.powi(128)
        };
        assert_eq!(f64_at(&w, 6, l), want, "lane {l}");
    }
}

#[test]
fn div_fixup_applies_the_special_cases() {
    let inf = f32::INFINITY;
    let nan = f32::from_bits(0x7FA0_0001); // a signalling NaN: quieted
                                           // (quotient, denominator, numerator, want bits)
    let cases: &[(f32, f32, f32, u32)] = &[
        (0.25, 4.0, 1.0, 0x3E80_0000),
        (0.25, -4.0, 1.0, 0xBE80_0000),
        (-0.25, -4.0, -1.0, 0x3E80_0000),
        (1.0, 2.0, nan, 0x7FE0_0001),
        (1.0, nan, 2.0, 0x7FE0_0001),
        (1.0, 0.0, 0.0, 0xFFC0_0000),
        (1.0, inf, -inf, 0xFFC0_0000),
        (1.0, -0.0, 3.0, 0xFF80_0000),
        (1.0, 3.0, inf, 0x7F80_0000),
        (1.0, -inf, 3.0, 0x8000_0000),
        (1.0, 3.0, -0.0, 0x8000_0000),
        // The quotient's exponent far below: underflow to ±0.
        (1e-30, 2f32.powi(100), 2f32.powi(-60), 0x0000_0000),
        // A NaN estimate of a finite quotient (an overflowed one): ±∞.
        (f32::NAN, -1e-30, 1e30, 0xFF80_0000),
    ];
    let mut w = wave();
    for (l, c) in cases.iter().enumerate() {
        w.vgpr[1][l] = c.0.to_bits();
        w.vgpr[2][l] = c.1.to_bits();
        w.vgpr[3][l] = c.2.to_bits();
    }
    run("v_div_fixup_f32 v4, v1, v2, v3", &mut w);
    for (l, c) in cases.iter().enumerate() {
        assert_eq!(w.vgpr[4][l], c.3, "case {l} {c:?}: {:#010x}", w.vgpr[4][l]);
    }
    // f16: the result in the half op_sel[3] picks, the other half kept; the legacy form zeroes
    // the high half.
    let mut w = wave();
    w.vgpr[1] = [0xABCD_3400; LANES]; // quotient 0.25 low
    w.vgpr[2] = [0x0000_4400; LANES]; // 4.0
    w.vgpr[3] = [0x0000_3C00; LANES]; // 1.0
    w.vgpr[4] = [0x1111_2222; LANES];
    w.vgpr[5] = [0x1111_2222; LANES];
    w.vgpr[6] = [0x1111_2222; LANES];
    run(
        "v_div_fixup_f16 v4, v1, v2, v3\nv_div_fixup_f16 v5, -v1, v2, v3 op_sel:[0,0,0,1]\nv_div_fixup_legacy_f16 v6, v1, v2, v3",
        &mut w,
    );
    assert_eq!(w.vgpr[4][0], 0x1111_3400);
    assert_eq!(w.vgpr[5][0], 0x3400_2222, "sign from the operands, the magnitude from S0");
    assert_eq!(w.vgpr[6][0], 0x0000_3400);
}

#[test]
fn trig_preop_reads_two_over_pi() {
    // (exponent of S0, segment, want bits): 53-bit windows of 2/π computed independently.
    let cases: &[(i32, u32, u64)] = &[
        (0, 0, 0x3fe45f306dc9c882),
        (0, 1, 0x3c94a7f09d5f47d4),
        (0, 2, 0x394a6ee06db14acc),
        (0, 3, 0x35f3c439041fe516),
        (100, 0, 0x3cb529fc2757d1e0),
        (100, 2, 0x3663278872083fca),
        (1000, 1, 0x097e5f17b3d0739f),
        (-1022, 0, 0x3fe45f306dc9c882),
    ];
    let mut w = wave();
    for (l, c) in cases.iter().enumerate() {
        let x = 1.25 * 2f64.powi(c.0);
        w.vgpr[0][l] = x.to_bits() as u32;
        w.vgpr[1][l] = (x.to_bits() >> 32) as u32;
        w.vgpr[2][l] = c.1;
    }
    run("v_trig_preop_f64 v[4:5], v[0:1], v2", &mut w);
    for (l, c) in cases.iter().enumerate() {
        assert_eq!(f64_at(&w, 4, l).to_bits(), c.2, "case {c:?}");
    }
    // The first segments sum to 2/π.
    let s: f64 = (0..3).map(|k| f64::from_bits(cases[k].2)).sum();
    assert_eq!(s, std::f64::consts::FRAC_2_PI);
}

// ---------------------------------------------------------------------------------------------
// f64

#[test]
fn f64_fma_arithmetic_and_rounding_match_rust() {
    let mut r = rnd(0x64);
    let mut w = wave();
    let gen = |r: &mut dyn FnMut() -> u32| {
        let v = u64::from(r()) << 32 | u64::from(r());
        f64::from_bits((v & 0x800F_FFFF_FFFF_FFFF) | ((v >> 52) % 200 + 923) << 52)
    };
    let a: [f64; LANES] = core::array::from_fn(|_| gen(&mut r));
    let b: [f64; LANES] = core::array::from_fn(|_| gen(&mut r));
    let mut c: [f64; LANES] = core::array::from_fn(|_| gen(&mut r));
    // Hard cases: the exact product cancelled.
    for l in 0..8 {
        c[l] = -(a[l] * b[l]);
    }
    c[8] = f64::NAN;
    c[9] = f64::INFINITY;
    set_f64(&mut w, 0, &a);
    set_f64(&mut w, 2, &b);
    set_f64(&mut w, 4, &c);
    set_f64(&mut w, 6, &c);
    run(
        "v_fma_f64 v[8:9], v[0:1], v[2:3], v[4:5]
v_fmac_f64_e32 v[6:7], v[0:1], v[2:3]
v_add_f64 v[10:11], v[0:1], -v[2:3]
v_mul_f64 v[12:13], |v[0:1]|, v[2:3]
v_min_f64 v[14:15], v[0:1], v[2:3]
v_max_f64 v[16:17], v[0:1], v[2:3]
v_fma_f64 v[18:19], v[0:1], 0.5, -1.0
v_mul_f64 v[20:21], v[0:1], v[2:3] mul:2
v_fract_f64_e32 v[22:23], v[0:1]
v_trunc_f64_e32 v[24:25], v[0:1]
v_floor_f64_e32 v[26:27], v[0:1]
v_ceil_f64_e32 v[28:29], v[0:1]
v_rndne_f64_e32 v[30:31], v[0:1]",
        &mut w,
    );
    for l in 0..LANES {
        let (x, y, z) = (a[l], b[l], c[l]);
        assert!(same64(f64_at(&w, 8, l), x.mul_add(y, z)), "fma lane {l}");
        assert!(same64(f64_at(&w, 6, l), x.mul_add(y, z)), "fmac lane {l}");
        assert_eq!(f64_at(&w, 10, l), x - y);
        assert_eq!(f64_at(&w, 12, l), x.abs() * y);
        assert_eq!(f64_at(&w, 14, l), x.min(y));
        assert_eq!(f64_at(&w, 16, l), x.max(y));
        assert_eq!(f64_at(&w, 18, l), x.mul_add(0.5, -1.0));
        assert_eq!(f64_at(&w, 20, l), x * y * 2.0);
        let fr = (x - x.floor()).min(f64::from_bits(0x3FEF_FFFF_FFFF_FFFF));
        assert_eq!(f64_at(&w, 22, l), fr, "fract({x})");
        assert_eq!(f64_at(&w, 24, l).to_bits(), x.trunc().to_bits());
        assert_eq!(f64_at(&w, 26, l).to_bits(), x.floor().to_bits());
        assert_eq!(f64_at(&w, 28, l).to_bits(), x.ceil().to_bits());
        assert_eq!(f64_at(&w, 30, l).to_bits(), x.round_ties_even().to_bits(), "rndne({x})");
    }
    // Edges of min/max and the roundings.
    let mut w = wave();
    let xs = [-0.0, 0.0, f64::NAN, -2.5, 2.5, 0.5, -0.5, 4503599627370497.0, -1e-310, f64::NEG_INFINITY];
    let ys = [0.0, -0.0, 3.0, f64::NAN, -2.5, 1.5, -1.5, 1.0, 2.0, 1.0];
    let mut a = [0.0; LANES];
    let mut b = [0.0; LANES];
    a[..xs.len()].copy_from_slice(&xs);
    b[..ys.len()].copy_from_slice(&ys);
    set_f64(&mut w, 0, &a);
    set_f64(&mut w, 2, &b);
    run(
        "v_min_f64 v[4:5], v[0:1], v[2:3]\nv_max_f64 v[6:7], v[0:1], v[2:3]\nv_rndne_f64_e32 v[8:9], v[0:1]\nv_floor_f64_e32 v[10:11], v[0:1]\nv_fract_f64_e32 v[12:13], v[0:1]",
        &mut w,
    );
    let bits = |w: &Wave, r, l| f64_at(w, r, l).to_bits();
    assert_eq!(bits(&w, 4, 0), (-0.0f64).to_bits(), "min(-0, +0) = -0");
    assert_eq!(bits(&w, 4, 1), (-0.0f64).to_bits());
    assert_eq!(bits(&w, 6, 0), 0.0f64.to_bits(), "max(-0, +0) = +0");
    assert_eq!(f64_at(&w, 4, 2), 3.0, "a NaN operand yields the other");
    assert_eq!(f64_at(&w, 6, 3), -2.5);
    assert_eq!(f64_at(&w, 8, 3), -2.0, "ties to even");
    assert_eq!(f64_at(&w, 8, 4), 2.0);
    assert_eq!(bits(&w, 8, 6), (-0.0f64).to_bits(), "rndne(-0.5) = -0");
    assert_eq!(f64_at(&w, 8, 7), 4503599627370497.0);
    assert_eq!(f64_at(&w, 10, 8), -1.0, "floor of a negative denormal");
    assert_eq!(f64_at(&w, 12, 8), 1.0 - f64::EPSILON / 2.0, "fract clamps below 1");
    assert!(f64_at(&w, 12, 9).is_nan(), "fract(-inf) is NaN");
}

#[test]
fn f64_reciprocals_ldexp_frexp_and_conversions() {
    let mut r = rnd(0x65);
    let mut w = wave();
    let mut a: [f64; LANES] = core::array::from_fn(|_| any_f64(&mut r).abs());
    let edges = [
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NAN,
        f64::from_bits(1),
        f64::from_bits(0x000F_FFFF_FFFF_FFFF),
        1.0,
        4.0,
        f64::MAX,
        -3.0,
    ];
    a[..edges.len()].copy_from_slice(&edges);
    set_f64(&mut w, 0, &a);
    let n: [u32; LANES] = core::array::from_fn(|l| (l as i32 * 37 - 1000) as u32);
    w.vgpr[2] = n;
    run(
        "v_rcp_f64_e32 v[4:5], v[0:1]
v_sqrt_f64_e32 v[6:7], v[0:1]
v_rsq_f64_e32 v[8:9], v[0:1]
v_ldexp_f64 v[10:11], v[0:1], v2
v_frexp_mant_f64_e32 v[12:13], v[0:1]
v_frexp_exp_i32_f64_e32 v14, v[0:1]
v_cvt_i32_f64_e32 v15, v[0:1]
v_cvt_u32_f64_e32 v16, v[0:1]
v_cvt_f32_f64_e32 v17, v[0:1]
v_cvt_f64_f32_e32 v[18:19], v17
v_cvt_f64_i32_e32 v[20:21], v2
v_cvt_f64_u32_e32 v[22:23], v2",
        &mut w,
    );
    for l in 0..LANES {
        let x = a[l];
        assert!(same64(f64_at(&w, 4, l), 1.0 / x), "rcp({x:e})");
        assert!(same64(f64_at(&w, 6, l), x.sqrt()), "sqrt({x:e})");
        assert!(ulps64(f64_at(&w, 8, l), 1.0 / x.sqrt()) <= 1, "rsq({x:e}) = {:e}", f64_at(&w, 8, l));
        let k = n[l] as i32;
        // x × 2^k, the power split so each factor is a normal f64 (rounded once at the end).
        let want = if k > 1023 {
            x * 2f64.powi(1023) * 2f64.powi(k - 1023)
        } else if k < -1022 {
            x * 2f64.powi(-1022) * 2f64.powi(k + 1022)
        } else {
            x * 2f64.powi(k)
        };
        // (Two factors below 2^-1022 could round twice: those denormal results are not compared.)
        if !(k < -1022 && want != 0.0 && want.abs() < f64::MIN_POSITIVE) {
            assert!(same64(f64_at(&w, 10, l), want), "ldexp({x:e}, {k}): {:e} want {want:e}", f64_at(&w, 10, l));
        }
        // frexp: x = mant × 2^exp, |mant| in [0.5, 1).
        let (m, e) = (f64_at(&w, 12, l), w.vgpr[14][l] as i32);
        if x.is_finite() && x != 0.0 {
            assert!((0.5..1.0).contains(&m.abs()), "frexp_mant({x:e}) = {m}");
            assert_eq!(m * 2f64.powi(e / 2) * 2f64.powi(e - e / 2), x, "frexp({x:e}) = {m} × 2^{e}");
        } else {
            assert!(same64(m, x), "frexp_mant of a special value is itself");
            assert_eq!(e, 0);
        }
        assert_eq!(w.vgpr[15][l], x as i32 as u32, "cvt_i32_f64({x:e})");
        assert_eq!(w.vgpr[16][l], x as u32, "cvt_u32_f64({x:e})");
        assert!(same32(f32_at(&w, 17, l), x as f32), "cvt_f32_f64({x:e})");
        assert!(same64(f64_at(&w, 18, l), f64::from(x as f32)));
        assert_eq!(f64_at(&w, 20, l), f64::from(n[l] as i32));
        assert_eq!(f64_at(&w, 22, l), f64::from(n[l]));
    }
    // Denormal results of ldexp round once (to nearest even).
    let mut w = wave();
    set_f64(&mut w, 0, &[1.5 + f64::EPSILON; LANES]);
    w.vgpr[2] = [(-1074i32) as u32; LANES];
    run("v_ldexp_f64 v[4:5], v[0:1], v2", &mut w);
    assert_eq!(f64_at(&w, 4, 0).to_bits(), 2, "1.5+ε × 2^-1074 rounds up to 2 denormal steps");
}

#[test]
fn cmp_class_reports_each_class() {
    // One value per class bit: sNaN, qNaN, -inf, -normal, -denormal, -0, +0, +denormal,
    // +normal, +inf.
    let v32: [u32; 10] =
        [0x7FA0_0000, 0x7FC0_0000, 0xFF80_0000, 0xBF80_0000, 0x8000_0001, 0x8000_0000, 0, 1, 0x3F80_0000, 0x7F80_0000];
    let v64: [u64; 10] = [
        0x7FF4_0000_0000_0000,
        0x7FF8_0000_0000_0000,
        0xFFF0_0000_0000_0000,
        0xBFF0_0000_0000_0000,
        0x8000_0000_0000_0001,
        0x8000_0000_0000_0000,
        0,
        1,
        0x3FF0_0000_0000_0000,
        0x7FF0_0000_0000_0000,
    ];
    let v16: [u32; 10] = [0x7D00, 0x7E00, 0xFC00, 0xBC00, 0x8001, 0x8000, 0, 1, 0x3C00, 0x7C00];
    let mut w = wave();
    // Lane 10·k + c: value of class c tested against the mask bit (c + k) % 10.
    for l in 0..60 {
        let (k, c) = (l / 10, l % 10);
        w.vgpr[0][l] = v32[c];
        w.vgpr[1][l] = 1 << ((c + k) % 10);
        w.vgpr[2][l] = v64[c] as u32;
        w.vgpr[3][l] = (v64[c] >> 32) as u32;
        w.vgpr[4][l] = v16[c];
    }
    w.exec = (1 << 60) - 1;
    run(
        "v_cmp_class_f32_e32 vcc, v0, v1
v_cmp_class_f64_e64 s[2:3], v[2:3], v1
v_cmp_class_f16_e64 s[4:5], v4, v1
v_cmp_class_f32_e64 s[6:7], -v0, v1
s_mov_b64 s[8:9], exec
s_movk_i32 s12, 0x3ff
v_cmpx_class_f32_e64 s[10:11], v0, s12",
        &mut w,
    );
    let want: u64 = (0..10).map(|c| 1u64 << c).sum(); // k = 0 matches
    assert_eq!(w.vcc, want, "f32 (VOPC → VCC)");
    assert_eq!(sgpr64(&w, 2), want, "f64");
    assert_eq!(sgpr64(&w, 4), want, "f16");
    // -v0: -inf ↔ +inf etc.; NaNs keep their class. k = 0 lanes that still match: the NaNs.
    let neg = sgpr64(&w, 6);
    assert_eq!(neg & 0x3FF, 0b11, "negated values change class (NaNs do not)");
    // Negation maps class c to 11 - c (c in 2..=9); with k = 1 only -0 → +0 meets bit c + 1.
    assert_eq!(neg >> 10 & 0x3FF, 1 << 5, "k = 1: -(-0) is +0");
    assert_eq!(w.exec, (1 << 60) - 1, "cmpx with every class: EXEC unchanged");
    assert_eq!(sgpr64(&w, 10), (1 << 60) - 1);
    assert_eq!(sgpr64(&w, 8), (1 << 60) - 1);
}

// ---------------------------------------------------------------------------------------------
// f32

#[test]
fn f32_transcendentals_are_within_their_bounds() {
    let mut r = rnd(0x32);
    let mut w = wave();
    let mut a: [f32; LANES] = core::array::from_fn(|_| {
        let x = r();
        f32::from_bits((x & 0x807F_FFFF) | ((x >> 23) % 40 + 107) << 23)
    });
    let edges = [
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        1.0,
        -1.0,
        0.25,
        0.5,
        -f32::MAX,
        1e-40,
        128.0,
        -150.0,
        4.0,
    ];
    a[..edges.len()].copy_from_slice(&edges);
    set_f32(&mut w, 0, &a);
    run(
        "v_exp_f32_e32 v1, v0
v_log_f32_e32 v2, v0
v_sin_f32_e32 v3, v0
v_cos_f32_e32 v4, v0
v_sqrt_f32_e32 v5, v0
v_rsq_f32_e32 v6, v0
v_rcp_f32_e32 v7, v0
v_rcp_iflag_f32_e32 v8, v0",
        &mut w,
    );
    let tau = 2.0 * std::f64::consts::PI;
    // Denormal inputs and results of the f32 transcendentals flush (the ISA); the others are
    // correctly rounded f64 values here (the hardware is within 1 ULP).
    let fl_in = |x: f32| if x.is_subnormal() { 0.0f32.copysign(x) } else { x };
    let fl_out = |x: f64| {
        let y = x as f32;
        if y.is_subnormal() {
            0.0f32.copysign(y)
        } else {
            y
        }
    };
    for l in 0..LANES {
        let x = a[l];
        let xf = f64::from(fl_in(x));
        let reduce = |x: f64| x - x.round_ties_even();
        let fold = |r: f64| {
            if r > 0.25 {
                0.5 - r
            } else if r < -0.25 {
                -0.5 - r
            } else {
                r
            }
        };
        let want: [(f32, u64, &str); 7] = [
            (fl_out(xf.exp2()), 1, "exp"),
            (fl_out(xf.log2()), 1, "log"),
            // sin(2πr) folded into [-¼, ¼] turns: exact zeros at the half turns.
            (if x.is_finite() { (tau * fold(reduce(f64::from(x)))).sin() as f32 } else { f32::NAN }, 1, "sin"),
            // cos(2πr) = sin(2π(¼ − |r|)): exact zeros at the quarter turns.
            (if x.is_finite() { (tau * (0.25 - reduce(f64::from(x)).abs())).sin() as f32 } else { f32::NAN }, 1, "cos"),
            (fl_out(xf.sqrt()), 0, "sqrt"),
            (fl_out(1.0 / xf.sqrt()), 1, "rsq"),
            (fl_out(1.0 / xf), 0, "rcp"),
        ];
        for (k, (v, bound, name)) in want.iter().enumerate() {
            let got = f32_at(&w, k + 1, l);
            // NaN results: any NaN.
            let d = if v.is_nan() && got.is_nan() { 0 } else { ulps32(got, *v) };
            assert!(d <= *bound, "{name}({x:e}) = {got:e} ({:#010x}), want {v:e} ({d} ULP)", got.to_bits());
        }
        assert_eq!(w.vgpr[8][l], w.vgpr[7][l], "rcp_iflag is rcp");
    }
    // The ISA's functional examples.
    let bits = |w: &Wave, r: usize, l: usize| w.vgpr[r][l];
    assert_eq!(bits(&w, 1, 3), 0, "exp(-inf) = 0");
    assert_eq!(bits(&w, 1, 1), 0x3F80_0000, "exp(-0) = 1");
    assert_eq!(bits(&w, 2, 1), 0xFF80_0000, "log(-0) = -inf");
    assert!(f32_at(&w, 2, 6).is_nan(), "log(-1) = NaN");
    assert_eq!(bits(&w, 3, 1), 0x8000_0000, "sin(-0) = -0");
    assert_eq!(bits(&w, 3, 7), 0x3F80_0000, "sin(0.25 turn) = 1");
    assert_eq!(bits(&w, 3, 9), 0, "sin(-MAX) = 0");
    assert_eq!(bits(&w, 4, 9), 0x3F80_0000, "cos(-MAX) = 1");
    assert_eq!(bits(&w, 4, 7), 0, "cos(0.25) = 0");
    assert_eq!(bits(&w, 5, 1), 0x8000_0000, "sqrt(-0) = -0");
    assert_eq!(bits(&w, 6, 13), 0x3F00_0000, "rsq(4) = 0.5");
    assert_eq!(bits(&w, 7, 10), 0x7F80_0000, "rcp of a denormal: flushed, +inf");
    assert_eq!(bits(&w, 1, 12), 0, "exp(-150): a denormal result flushed");
}

#[test]
fn f32_frexp_ldexp_med3_and_conversions() {
    let mut r = rnd(0x33);
    let mut w = wave();
    let mut a: [f32; LANES] = core::array::from_fn(|_| any_f32(&mut r));
    let mut b: [f32; LANES] = core::array::from_fn(|_| any_f32(&mut r));
    let c: [f32; LANES] = core::array::from_fn(|_| any_f32(&mut r));
    let edges = [0.0, -0.0, 0.5, 1.5, -1.5, 2.5, -2.5, f32::NAN, 1e-40, -1e-40, 3e9, -3e9, 0.49999997];
    a[..edges.len()].copy_from_slice(&edges);
    b[2] = f32::NAN;
    set_f32(&mut w, 0, &a);
    set_f32(&mut w, 1, &b);
    set_f32(&mut w, 2, &c);
    let n: [u32; LANES] = core::array::from_fn(|l| (l as i32 * 9 - 280) as u32);
    w.vgpr[3] = n;
    w.vgpr[10] = core::array::from_fn(|l| 0xA5A5_A5A5 ^ l as u32);
    run(
        "v_frexp_mant_f32_e32 v4, v0
v_frexp_exp_i32_f32_e32 v5, v0
v_ldexp_f32 v6, v0, v3
v_med3_f32 v7, v0, v1, v2
v_cvt_rpi_i32_f32_e32 v8, v0
v_cvt_flr_i32_f32_e32 v9, v0
v_cvt_pk_u8_f32 v10, v0, 2, v10
v_cvt_off_f32_i4_e32 v11, v3
v_cvt_pkrtz_f16_f32 v12, v0, v1
v_cvt_pknorm_i16_f32 v13, v0, v1
v_cvt_pknorm_u16_f32 v14, v0, v1
v_cvt_pk_u16_u32 v15, v3, v5
v_cvt_pk_i16_i32 v16, v3, v5
v_mad_legacy_f32 v17, v0, 0, v2",
        &mut w,
    );
    for l in 0..LANES {
        let x = a[l];
        let (m, e) = (f32_at(&w, 4, l), w.vgpr[5][l] as i32);
        if x.is_finite() && x != 0.0 {
            assert!((0.5..1.0).contains(&m.abs()), "frexp_mant({x:e}) = {m}");
            assert_eq!(f64::from(m) * 2f64.powi(e), f64::from(x), "frexp({x:e})");
        } else {
            assert!(same32(m, x));
            assert_eq!(e, 0);
        }
        let k = n[l] as i32;
        let want = (f64::from(x) * 2f64.powi(k)) as f32;
        assert!(same32(f32_at(&w, 6, l), want), "ldexp({x:e}, {k})");
        // med3 (no NaN: the median; a NaN: min3).
        let (p, q, s) = (a[l], b[l], c[l]);
        let want = if p.is_nan() || q.is_nan() || s.is_nan() { p.min(q).min(s) } else { p.max(q).min(p.min(q).max(s)) };
        assert!(same32(f32_at(&w, 7, l), want) || (want == 0.0 && f32_at(&w, 7, l) == 0.0), "med3({p}, {q}, {s})");
        let sat = |v: f64| if v.is_nan() { 0 } else { v.clamp(-2147483648.0, 2147483647.0) as i32 };
        let rpi = (x + 0.5).floor();
        assert_eq!(w.vgpr[8][l] as i32, sat(f64::from(rpi)), "cvt_rpi({x:e})");
        assert_eq!(w.vgpr[9][l] as i32, sat(f64::from(x.floor())), "cvt_flr({x:e})");
        let byte = if x.is_nan() { 0 } else { x.round_ties_even().clamp(0.0, 255.0) as u32 };
        assert_eq!(w.vgpr[10][l], ((0xA5A5_A5A5 ^ l as u32) & !0xFF_0000) | byte << 16, "cvt_pk_u8({x:e})");
        let i4 = ((n[l] << 28) as i32) >> 28;
        assert_eq!(f32_at(&w, 11, l), i4 as f32 / 16.0, "cvt_off_f32_i4");
        let rtz = |x: f32| {
            let h = f2h(f64::from(x));
            if is_nan16(h) || h & 0x7FFF == 0x7C00 && x.is_infinite() {
                return h;
            }
            // Toward zero: step back when RNE rounded away from zero (or to ∞).
            if h2f(h).abs() > f64::from(x).abs() {
                h - 1
            } else {
                h
            }
        };
        let (lo, hi) = (w.vgpr[12][l] as u16, (w.vgpr[12][l] >> 16) as u16);
        if !x.is_nan() {
            assert_eq!(lo, rtz(x), "pkrtz({x:e})");
        }
        if !b[l].is_nan() {
            assert_eq!(hi, rtz(b[l]), "pkrtz({:e})", b[l]);
        }
        let snorm = |x: f32| {
            if x.is_nan() {
                0
            } else {
                (f64::from(x).clamp(-1.0, 1.0) * 32767.0).round_ties_even() as i16 as u16
            }
        };
        let unorm =
            |x: f32| if x.is_nan() { 0 } else { (f64::from(x).clamp(0.0, 1.0) * 65535.0).round_ties_even() as u16 };
        assert_eq!(w.vgpr[13][l], u32::from(snorm(x)) | u32::from(snorm(b[l])) << 16);
        assert_eq!(w.vgpr[14][l], u32::from(unorm(x)) | u32::from(unorm(b[l])) << 16);
        let (p, q) = (n[l], w.vgpr[5][l]);
        assert_eq!(w.vgpr[15][l], p.min(0xFFFF) | q.min(0xFFFF) << 16);
        let s16 = |v: u32| u32::from((v as i32).clamp(-32768, 32767) as i16 as u16);
        assert_eq!(w.vgpr[16][l], s16(p) | s16(q) << 16);
        assert!(same32(f32_at(&w, 17, l), 0.0 + c[l]), "mad_legacy: 0 × x = 0 for every x");
    }
}

#[test]
fn inactive_lanes_keep_their_values() {
    let mut w = wave();
    w.vgpr[0] = [2.0f32.to_bits(); LANES];
    w.vgpr[1] = [0x3C00_3C00; LANES];
    for r in 2..8 {
        w.vgpr[r] = [0xDEAD_BEEF; LANES];
    }
    w.exec = 0x0F0F_0F0F_0F0F_0F0F;
    run(
        "v_sqrt_f32_e32 v2, v0\nv_div_scale_f32 v3, vcc, v0, v0, v0\nv_pk_add_f16 v4, v1, v1\nv_fma_f16 v5, v1, v1, v1 op_sel:[0,0,0,1]\nv_frexp_exp_i32_f32_e32 v6, v0\nv_cvt_f16_f32_e32 v7, v0",
        &mut w,
    );
    for l in 0..LANES {
        let on = w.exec >> l & 1 != 0;
        for r in 2..8 {
            assert_eq!(w.vgpr[r][l] == 0xDEAD_BEEF, !on, "v{r} lane {l}");
        }
    }
    assert_eq!(w.vcc & !w.exec, 0);
}

// ---------------------------------------------------------------------------------------------
// MODE

#[test]
fn setreg_rounding_modes_round_add_mul_and_fma() {
    let mut r = rnd(0x77);
    let mut a32 = [0f32; LANES];
    let mut b32 = [0f32; LANES];
    let mut c32 = [0f32; LANES];
    let mut a64 = [0f64; LANES];
    let mut b64 = [0f64; LANES];
    let mut c64 = [0f64; LANES];
    for l in 0..LANES {
        // f32 operands within 2^20 of each other's exponent: sums exact in f64.
        let e = |x: u32| (x >> 23) % 20 + 117;
        let (x, y, z) = (r(), r(), r());
        a32[l] = f32::from_bits((x & 0x807F_FFFF) | e(x) << 23);
        b32[l] = f32::from_bits((y & 0x807F_FFFF) | e(y) << 23);
        c32[l] = f32::from_bits((z & 0x807F_FFFF) | (e(z) + 10) << 23);
        // f64 operands with 26-bit significands (products exact) of nearby exponents.
        let g = |r: &mut dyn FnMut() -> u32, shift: u64| {
            let v = u64::from(r()) << 32 | u64::from(r());
            f64::from_bits((v & 0x800F_FFFF_C000_0000) | ((v >> 52) % 30 + 1000 + shift) << 52)
        };
        a64[l] = g(&mut r, 0);
        b64[l] = g(&mut r, 0);
        c64[l] = g(&mut r, 10);
    }
    // Edges: overflow in each direction, exact zeros.
    a32[0] = f32::MAX;
    b32[0] = f32::MAX;
    a32[1] = -f32::MAX;
    b32[1] = f32::MAX;
    c32[2] = -(a32[2] * b32[2]);
    a64[0] = f64::MAX;
    b64[0] = 2.0;
    c64[1] = -(a64[1] * b64[1]);
    for (k, m) in MODES.iter().enumerate() {
        let mut w = wave();
        set_f32(&mut w, 0, &a32);
        set_f32(&mut w, 1, &b32);
        set_f32(&mut w, 2, &c32);
        set_f64(&mut w, 10, &a64);
        set_f64(&mut w, 12, &b64);
        set_f64(&mut w, 14, &c64);
        w.vgpr[9] = c32.map(f32::to_bits);
        let setmode = format!("s_setreg_imm32_b32 hwreg(HW_REG_MODE, 0, 4), {}", k * 5);
        run(
            &format!(
                "{setmode}
v_add_f32_e32 v3, v0, v1
v_mul_f32_e32 v4, v0, v1
v_fma_f32 v5, v0, v1, v2
v_sub_f32_e32 v6, v0, v1
v_fmac_f32_e32 v9, v0, v1
v_add_f64 v[16:17], v[10:11], v[12:13]
v_mul_f64 v[18:19], v[10:11], v[12:13]
v_fma_f64 v[20:21], v[10:11], v[12:13], v[14:15]
v_pk_add_f32 v[22:23], v[0:1], v[0:1] op_sel_hi:[0,1]
s_getreg_b32 s0, hwreg(HW_REG_MODE, 0, 4)"
            ),
            &mut w,
        );
        assert_eq!(w.sgpr[0], k as u32 * 5, "MODE's round fields read back");
        assert_eq!(w.mode, (MODE & !0xF) | (k as u32 * 5));
        for l in 0..LANES {
            let (x, y, z) = (f64::from(a32[l]), f64::from(b32[l]), f64::from(c32[l]));
            let (s, e) = two_sum(x, y);
            assert_eq!(f32_at(&w, 3, l), directed32(*m, s, e), "{m:?}: {x:e} + {y:e}");
            let p = x * y; // exact (48 bits)
            assert_eq!(f32_at(&w, 4, l).to_bits(), directed32(*m, p, 0.0).to_bits(), "{m:?}: {x:e} × {y:e}");
            let (s, e) = two_sum(p, z);
            let want = directed32(*m, s, e);
            let want = if want == 0.0 && s == 0.0 && e == 0.0 {
                // An exact zero sum: −0 in round-down, +0 otherwise.
                if *m == Mode::Down {
                    -0.0
                } else {
                    0.0
                }
            } else {
                want
            };
            assert_eq!(f32_at(&w, 5, l).to_bits(), want.to_bits(), "{m:?}: fma({x:e}, {y:e}, {z:e})");
            assert_eq!(f32_at(&w, 9, l).to_bits(), want.to_bits(), "{m:?}: fmac");
            let (s, e) = two_sum(x, -y);
            assert_eq!(f32_at(&w, 6, l), directed32(*m, s, e), "{m:?}: {x:e} - {y:e}");
            let (s, e) = two_sum(x, x);
            assert_eq!(f32_at(&w, 22, l), directed32(*m, s, e), "{m:?}: pk_add lo");
            let (s, e) = two_sum(x, y);
            assert_eq!(f32_at(&w, 23, l), directed32(*m, s, e), "{m:?}: pk_add hi (op_sel_hi: lo(S0) + hi(S1))");
            // f64 (round field 3:2 is the same mode).
            let (x, y, z) = (a64[l], b64[l], c64[l]);
            let (s, e) = two_sum(x, y);
            assert_eq!(f64_at(&w, 16, l), directed64(*m, s, e), "{m:?}: {x:e} + {y:e}");
            let p = x * y;
            let pe = if p.is_finite() { x.mul_add(y, -p) } else { 0.0 };
            let want = if p.is_infinite() {
                match m {
                    Mode::Even | Mode::Up => f64::INFINITY,
                    _ => f64::MAX,
                }
            } else {
                directed64(*m, p, pe)
            };
            assert_eq!(f64_at(&w, 18, l), want, "{m:?}: {x:e} × {y:e}");
            if p.is_finite() {
                // p + pe is the exact product (52 bits here), so the sum is exact in two parts.
                let (s, e) = two_sum(p, z);
                let (s2, e2) = two_sum(s, pe);
                let (s3, e3) = two_sum(s2, e + e2);
                let want = if s3 == 0.0 && e3 == 0.0 {
                    if *m == Mode::Down {
                        -0.0
                    } else {
                        0.0
                    }
                } else {
                    directed64(*m, s3, e3)
                };
                assert_eq!(f64_at(&w, 20, l).to_bits(), want.to_bits(), "{m:?}: fma({x:e}, {y:e}, {z:e})");
            }
        }
    }
}

#[test]
fn setreg_denormal_modes_flush_and_getreg_reads_the_registers() {
    let d = f32::from_bits(0x0000_1234);
    let mut w = wave();
    w.vgpr[0] = [d.to_bits(); LANES];
    w.vgpr[10] = [(f64::from_bits(7)).to_bits() as u32; LANES];
    w.vgpr[11] = [0; LANES];
    w.scc = true;
    w.flat_scratch = 0x1234_5678_9ABC_DEF0;
    run(
        "v_add_f32_e32 v3, v0, v0
s_setreg_imm32_b32 hwreg(HW_REG_MODE, 4, 4), 0
v_add_f32_e32 v4, v0, v0
v_mul_f32_e32 v5, 0x3f000000, v0
v_add_f64 v[6:7], v[10:11], v[10:11]
s_mov_b32 s20, 2
s_setreg_b32 hwreg(HW_REG_MODE, 4, 2), s20
v_add_f32_e32 v8, v0, v0
v_mul_f32_e32 v9, 1.0, v0
s_getreg_b32 s0, hwreg(HW_REG_MODE)
s_getreg_b32 s1, hwreg(HW_REG_STATUS, 0, 1)
s_getreg_b32 s2, hwreg(HW_REG_HW_ID)
s_getreg_b32 s3, hwreg(HW_REG_SH_MEM_BASES)
s_getreg_b32 s4, hwreg(HW_REG_GPR_ALLOC, 8, 6)
s_getreg_b32 s5, hwreg(HW_REG_LDS_ALLOC, 12, 9)
s_getreg_b32 s6, hwreg(HW_REG_IB_STS)
s_getreg_b32 s7, hwreg(HW_REG_TRAPSTS)
s_getreg_b32 s8, hwreg(20)
s_getreg_b32 s9, hwreg(21)",
        &mut w,
    );
    assert_eq!(w.vgpr[3][0], 0x0000_2468, "denormals kept");
    assert_eq!(w.vgpr[4][0], 0, "inputs flushed (FP_DENORM = 0)");
    assert_eq!(w.vgpr[5][0], 0);
    assert_eq!(w.vgpr[6][0], 0, "f64 denormals flushed too");
    assert_eq!(w.vgpr[8][0], 0, "outputs kept, inputs flushed (FP_DENORM[1:0] = 2): the input is flushed");
    assert_eq!(w.sgpr[0], (MODE & !0xF0) | 0x20);
    assert_eq!(w.sgpr[1], 1, "STATUS.SCC");
    assert_eq!(w.sgpr[2], 0, "HW_ID");
    assert_eq!(w.sgpr[3], 0x0001_0002, "shared and private aperture bases");
    assert_eq!(w.sgpr[4], 5, "48 registers in granules of 8, minus one");
    assert_eq!(w.sgpr[5], 8, "4096 bytes of LDS in 512-byte granules");
    assert_eq!((w.sgpr[6], w.sgpr[7]), (0, 0));
    assert_eq!((w.sgpr[8], w.sgpr[9]), (0x9ABC_DEF0, 0x1234_5678), "FLAT_SCRATCH");
    // Keeping outputs but flushing inputs: a denormal result of normal inputs survives.
    let mut w = wave();
    w.vgpr[0] = [f32::MIN_POSITIVE.to_bits(); LANES];
    run("s_setreg_imm32_b32 hwreg(HW_REG_MODE, 4, 2), 2\nv_mul_f32_e32 v1, 0.5, v0", &mut w);
    assert_eq!(w.vgpr[1][0], 0x0040_0000);
    // MODE fields the executor does not honour cannot be set; other registers cannot be written.
    let mut w = wave();
    unimplemented("s_setreg_imm32_b32 hwreg(HW_REG_MODE, 12, 7), 1", &mut w);
    unimplemented("s_setreg_imm32_b32 hwreg(HW_REG_TRAPSTS), 0", &mut w);
    // In a directed rounding mode the conversions of integers round in the mode, and the exact
    // operations (compares, min/max, integer roundings, byte conversions) are unchanged.
    let mut w = wave();
    w.vgpr[0] = [0x0100_0001; LANES]; // 2^24 + 1
    w.vgpr[5] = [(-2.5f32).to_bits(); LANES];
    run(
        "s_setreg_imm32_b32 hwreg(HW_REG_MODE, 0, 2), 1
v_cvt_f32_u32_e32 v1, v0
v_cvt_f32_i32_e32 v2, v0
v_cvt_f32_ubyte0_e32 v3, v0
v_rndne_f32_e32 v4, v5
v_cmp_lt_f32_e64 s[0:1], v5, v3
v_max_f32_e32 v6, v5, v3
v_cvt_i32_f32_e32 v7, v5
s_setreg_imm32_b32 hwreg(HW_REG_MODE, 0, 2), 3
v_cvt_f32_u32_e32 v8, v0
v_cvt_f32_i32_e64 v9, -1",
        &mut w,
    );
    assert_eq!(f32_at(&w, 1, 0), 16777218.0, "round up");
    assert_eq!(f32_at(&w, 2, 0), 16777218.0);
    assert_eq!(f32_at(&w, 3, 0), 1.0);
    assert_eq!(f32_at(&w, 4, 0), -2.0);
    assert_eq!(sgpr64(&w, 0), u64::MAX);
    assert_eq!(f32_at(&w, 6, 0), 1.0);
    assert_eq!(w.vgpr[7][0] as i32, -2);
    assert_eq!(f32_at(&w, 8, 0), 16777216.0, "toward zero");
    assert_eq!(f32_at(&w, 9, 0), -1.0);
}

// ---------------------------------------------------------------------------------------------
// f16 and 16-bit integers

#[test]
fn f16_arithmetic_is_correctly_rounded_and_zeroes_the_high_half() {
    let mut r = rnd(0x16);
    let mut w = wave();
    let a: [u16; LANES] = core::array::from_fn(|_| mid_f16(&mut r));
    let b: [u16; LANES] = core::array::from_fn(|_| mid_f16(&mut r));
    let c: [u16; LANES] = core::array::from_fn(|_| mid_f16(&mut r));
    // Garbage in the high halves: 16-bit operations read the low half only.
    w.vgpr[0] = core::array::from_fn(|l| 0xBEEF_0000 | u32::from(a[l]));
    w.vgpr[1] = core::array::from_fn(|l| 0xBEEF_0000 | u32::from(b[l]));
    w.vgpr[2] = core::array::from_fn(|l| 0xBEEF_0000 | u32::from(c[l]));
    w.vgpr[12] = w.vgpr[2];
    for r in 3..12 {
        w.vgpr[r] = [0xFFFF_FFFF; LANES];
    }
    run(
        "v_add_f16_e32 v3, v0, v1
v_sub_f16_e32 v4, v0, v1
v_mul_f16_e32 v5, v0, v1
v_fma_f16 v6, v0, v1, v2
v_mad_f16 v7, v0, v1, v2
v_mac_f16_e32 v12, v0, v1
v_madak_f16 v8, v0, v1, 0x4200
v_max_f16_e32 v9, v0, v1
v_min_f16_e64 v10, -v0, |v1|
v_ldexp_f16_e64 v11, v0, 3",
        &mut w,
    );
    for l in 0..LANES {
        let (x, y, z) = (h2f(a[l]), h2f(b[l]), h2f(c[l]));
        let lo = |r: usize| w.vgpr[r][l] as u16;
        let hi = |r: usize| w.vgpr[r][l] >> 16;
        assert_eq!(lo(3), f2h(x + y), "{x} + {y}");
        assert_eq!(lo(4), f2h(x - y), "{x} - {y}");
        assert_eq!(lo(5), f2h(x * y), "{x} × {y}");
        assert_eq!(lo(6), f2h(x * y + z), "fma({x}, {y}, {z})");
        assert_eq!(lo(7), f2h(h2f(f2h(x * y)) + z), "mad({x}, {y}, {z}): two roundings");
        assert_eq!(lo(12), f2h(h2f(f2h(x * y)) + z), "mac");
        assert_eq!(lo(8), f2h(h2f(f2h(x * y)) + 3.0), "madak (K = 0x4200 = 3.0)");
        assert_eq!(lo(9), f2h(x.max(y)));
        assert_eq!(lo(10), f2h((-x).min(y.abs())));
        assert_eq!(lo(11), f2h(x * 8.0));
        for r in [3, 4, 5, 9, 10, 11, 12] {
            assert_eq!(hi(r), 0, "VOP1/VOP2 16-bit results zero the high half (v{r})");
        }
        for r in [6, 7] {
            assert_eq!(hi(r), 0xFFFF, "v_fma_f16/v_mad_f16 keep the high half (v{r})");
        }
    }
}

#[test]
fn f16_op_sel_constants_and_conversions() {
    let mut w = wave();
    // v0 = {hi: 2.0, lo: 3.0}, v1 = {hi: 0.5, lo: -1.0}
    w.vgpr[0] = [0x4000_4200; LANES];
    w.vgpr[1] = [0x3800_BC00; LANES];
    w.vgpr[2] = [0x1234_5678; LANES];
    w.vgpr[3] = [0x1234_5678; LANES];
    w.vgpr[4] = [0x1234_5678; LANES];
    w.vgpr[5] = [0x1234_5678; LANES];
    w.vgpr[20] = [(-3.75f32).to_bits(); LANES];
    w.vgpr[21] = [0xFFFF_8000 | 300; LANES];
    run(
        "v_fma_f16 v2, v0, v1, 1.0 op_sel:[1,1,0,0]
v_fma_f16 v3, v0, v1, 1.0 op_sel:[0,1,0,1]
v_mad_u16 v4, v0, 2, v1 op_sel:[1,0,0,1]
v_max3_f16 v5, v0, v1, -4.0 op_sel:[0,1,0,1]
v_add_f16_e32 v6, 0.5, v0
v_add_f16_e32 v7, 0x3c00, v0
v_mul_f16_e32 v8, 2, v0
v_cvt_f16_f32_e32 v9, v20
v_cvt_f32_f16_e32 v10, v0
v_cvt_f32_f16_e64 v11, -v0 mul:2
v_cvt_i16_f16_e32 v12, v9
v_cvt_u16_f16_e32 v13, v0
v_cvt_f16_i16_e32 v14, v21
v_cvt_f16_u16_e32 v15, v21
v_frexp_exp_i16_f16_e32 v16, v0
v_frexp_mant_f16_e32 v17, v0
v_pack_b32_f16 v18, v0, -v1 op_sel:[1,0]
v_cvt_norm_i16_f16_e32 v19, v1",
        &mut w,
    );
    let v = |r: usize| w.vgpr[r][0];
    assert_eq!(v(2), 0x1234_4000, "hi(v0) × hi(v1) + 1.0 into the low half");
    assert_eq!(v(3), 0x4100_5678, "lo(v0) × hi(v1) + 1.0 into the high half");
    assert_eq!(v(4), 0x3C00_5678, "v_mad_u16: 0x4000 × 2 + 0xBC00 (mod 2^16) into the high half");
    assert_eq!(v(5), 0x4200_5678, "v_max3_f16(3.0, 0.5, -4.0)");
    assert_eq!(v(6), 0x4300, "0.5 is the f16 constant");
    assert_eq!(v(7), 0x4400, "a 16-bit literal");
    assert_eq!(v(8), 0x0006, "an integer constant is a bit pattern: 2 × 2^-24 × 3");
    assert_eq!(v(9), 0xC380, "-3.75");
    assert_eq!(v(10), 3.0f32.to_bits());
    assert_eq!(v(11), (-6.0f32).to_bits(), "neg and omod on the f32 result");
    assert_eq!(v(12), 0xFFFD, "trunc(-3.75) = -3");
    assert_eq!(v(13), 3);
    assert_eq!(v(14), u32::from(f2h(-32468.0)));
    assert_eq!(v(15), u32::from(f2h(33068.0)));
    assert_eq!(v(16), 2, "3.0 = 0.75 × 2^2");
    assert_eq!(v(17), 0x3A00);
    assert_eq!(v(18), 0x3C00_4000, "v_pack_b32_f16 {{-lo(v1), hi(v0)}}");
    assert_eq!(v(19), 0x8001, "snorm(-1.0) = -32767");
}

#[test]
fn f16_transcendentals_compares_and_classes() {
    let mut r = rnd(0x17);
    let mut w = wave();
    let mut a: [u16; LANES] = core::array::from_fn(|_| mid_f16(&mut r));
    let b: [u16; LANES] = core::array::from_fn(|_| mid_f16(&mut r));
    let edges = [0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0x0001, 0x3C00, 0xBC00, 0x3400];
    a[..edges.len()].copy_from_slice(&edges);
    w.vgpr[0] = a.map(u32::from);
    w.vgpr[1] = b.map(u32::from);
    run(
        "v_sqrt_f16_e32 v2, v0
v_rcp_f16_e32 v3, v0
v_rsq_f16_e32 v4, v0
v_exp_f16_e32 v5, v0
v_log_f16_e32 v6, v0
v_sin_f16_e32 v7, v0
v_cos_f16_e32 v8, v0
v_floor_f16_e32 v9, v0
v_ceil_f16_e32 v10, v0
v_trunc_f16_e32 v11, v0
v_rndne_f16_e32 v12, v0
v_fract_f16_e32 v13, v0
v_cmp_lt_f16_e32 vcc, v0, v1
v_cmp_neq_f16_e64 s[0:1], v0, v1
v_cmp_u_f16_e64 s[2:3], v0, v0
v_cmp_gt_i16_e64 s[4:5], v0, v1
v_cmp_lt_u16_e64 s[6:7], v0, v1",
        &mut w,
    );
    let tau = 2.0 * std::f64::consts::PI;
    for l in 0..LANES {
        let x = h2f(a[l]);
        let red = x - x.round_ties_even();
        let fold = |r: f64| {
            if r > 0.25 {
                0.5 - r
            } else if r < -0.25 {
                -0.5 - r
            } else {
                r
            }
        };
        let checks: [(usize, f64, u64, &str); 12] = [
            (2, x.sqrt(), 1, "sqrt"),
            (3, 1.0 / x, 1, "rcp"),
            (4, 1.0 / x.sqrt(), 1, "rsq"),
            (5, x.exp2(), 1, "exp"),
            (6, x.log2(), 1, "log"),
            (7, if x.is_finite() { (tau * fold(red)).sin() } else { f64::NAN }, 1, "sin"),
            (8, if x.is_finite() { (tau * (0.25 - red.abs())).sin() } else { f64::NAN }, 1, "cos"),
            (9, x.floor(), 0, "floor"),
            (10, x.ceil(), 0, "ceil"),
            (11, x.trunc(), 0, "trunc"),
            (12, x.round_ties_even(), 0, "rndne"),
            (13, if x.is_finite() { (x - x.floor()).min(h2f(0x3BFF)) } else { f64::NAN }, 0, "fract"),
        ];
        for (r, want, bound, name) in checks {
            let got = w.vgpr[r][l] as u16;
            let d = ulps16(got, f2h(want));
            assert!(d <= bound, "{name}({x}) [{:#06x}] = {got:#06x} want {:#06x}", a[l], f2h(want));
            assert_eq!(w.vgpr[r][l] >> 16, 0);
        }
        let (p, q) = (h2f(a[l]), h2f(b[l]));
        assert_eq!(w.vcc >> l & 1 != 0, p < q, "lt {p} {q}");
        assert_eq!(sgpr64(&w, 0) >> l & 1 != 0, p != q || p.is_nan());
        assert_eq!(sgpr64(&w, 2) >> l & 1 != 0, p.is_nan());
        assert_eq!(sgpr64(&w, 4) >> l & 1 != 0, (a[l] as i16) > (b[l] as i16));
        assert_eq!(sgpr64(&w, 6) >> l & 1 != 0, a[l] < b[l]);
    }
    assert_eq!(w.vgpr[13][8], 0x3400, "fract(0.25)");
    assert_eq!(w.vgpr[9][1], 0x8000, "floor(-0) = -0");
}

#[test]
fn i16_u16_arithmetic_shifts_and_saturation() {
    let mut r = rnd(0x18);
    let mut w = wave();
    let a: [u16; LANES] = core::array::from_fn(|_| r() as u16);
    let b: [u16; LANES] = core::array::from_fn(|_| r() as u16);
    let c: [u16; LANES] = core::array::from_fn(|_| r() as u16);
    w.vgpr[0] = core::array::from_fn(|l| u32::from(a[l]) | u32::from(c[l]) << 16);
    w.vgpr[1] = b.map(u32::from);
    w.vgpr[2] = c.map(u32::from);
    for r in 3..20 {
        w.vgpr[r] = [0x5A5A_5A5A; LANES];
    }
    run(
        "v_add_u16_e32 v3, v0, v1
v_sub_u16_e32 v4, v0, v1
v_subrev_u16_e32 v5, v0, v1
v_mul_lo_u16_e32 v6, v0, v1
v_lshlrev_b16_e32 v7, v0, v1
v_lshrrev_b16_e32 v8, v0, v1
v_ashrrev_i16_e32 v9, v0, v1
v_max_i16_e32 v10, v0, v1
v_min_u16_e32 v11, v0, v1
v_add_u16_e64 v12, v0, v1 clamp
v_sub_i16 v13, v0, v1 clamp
v_add_i16 v14, v0, v1 op_sel:[1,0,1]
v_mad_i16 v15, v0, v1, v2 clamp
v_med3_i16 v16, v0, v1, v2
v_mad_u32_u16 v17, v0, v1, v2 op_sel:[1,0,0]
v_mad_i32_i16 v18, v0, v1, v2",
        &mut w,
    );
    for l in 0..LANES {
        let (x, y, z) = (a[l], b[l], c[l]);
        let (xi, yi, zi) = (x as i16, y as i16, z as i16);
        let lo = |r: usize| w.vgpr[r][l];
        assert_eq!(lo(3), u32::from(x.wrapping_add(y)));
        assert_eq!(lo(4), u32::from(x.wrapping_sub(y)));
        assert_eq!(lo(5), u32::from(y.wrapping_sub(x)));
        assert_eq!(lo(6), u32::from(x.wrapping_mul(y)));
        assert_eq!(lo(7), u32::from(y << (x & 15)));
        assert_eq!(lo(8), u32::from(y >> (x & 15)));
        assert_eq!(lo(9), u32::from((yi >> (x & 15)) as u16));
        assert_eq!(lo(10), u32::from(xi.max(yi) as u16));
        assert_eq!(lo(11), u32::from(x.min(y)));
        assert_eq!(lo(12), u32::from(x.saturating_add(y)), "v_add_u16 clamp saturates");
        assert_eq!(lo(13) & 0xFFFF, u32::from(xi.saturating_sub(yi) as u16), "v_sub_i16 clamp");
        assert_eq!(lo(13) >> 16, 0x5A5A, "op_sel opcodes keep the other half");
        assert_eq!(lo(14), u32::from(zi.wrapping_add(yi) as u16) << 16 | 0x5A5A, "hi(v0) + lo(v1) into the high half");
        let m = (i32::from(xi) * i32::from(yi) + i32::from(zi)).clamp(-32768, 32767);
        assert_eq!(lo(15), 0x5A5A_0000 | u32::from(m as i16 as u16), "v_mad_i16 clamp");
        assert_eq!(lo(16) & 0xFFFF, u32::from(xi.max(yi).min(xi.min(yi).max(zi)) as u16));
        assert_eq!(lo(17), u32::from(z) * u32::from(y) + u32::from(z), "v_mad_u32_u16 with hi(v0)");
        assert_eq!(lo(18), (i32::from(xi) * i32::from(yi)).wrapping_add(i32::from(z)) as u32);
    }
}

// ---------------------------------------------------------------------------------------------
// packed math

#[test]
fn packed_f16_and_i16_with_op_sel_and_negation() {
    let mut r = rnd(0x19);
    let mut w = wave();
    let h: Vec<[u16; LANES]> = (0..6).map(|_| core::array::from_fn(|_| mid_f16(&mut r))).collect();
    let pack = |lo: &[u16; LANES], hi: &[u16; LANES]| -> [u32; LANES] {
        core::array::from_fn(|l| u32::from(lo[l]) | u32::from(hi[l]) << 16)
    };
    w.vgpr[0] = pack(&h[0], &h[1]);
    w.vgpr[1] = pack(&h[2], &h[3]);
    w.vgpr[2] = pack(&h[4], &h[5]);
    w.vgpr[3] = w.vgpr[2];
    let u: Vec<[u16; LANES]> = (0..4).map(|_| core::array::from_fn(|_| r() as u16)).collect();
    w.vgpr[10] = pack(&u[0], &u[1]);
    w.vgpr[11] = pack(&u[2], &u[3]);
    run(
        "v_pk_add_f16 v4, v0, v1
v_pk_mul_f16 v5, v0, v1 op_sel:[1,0] op_sel_hi:[0,1]
v_pk_fma_f16 v6, v0, v1, v2 neg_lo:[1,0,0] neg_hi:[0,0,1]
v_pk_max_f16 v7, v0, v1
v_pk_min_f16 v8, v0, 1.0 op_sel_hi:[1,0]
v_pk_fmac_f16_e32 v3, v0, v1
v_pk_add_u16 v12, v10, v11
v_pk_sub_i16 v13, v10, v11 clamp
v_pk_mul_lo_u16 v14, v10, v11 op_sel:[1,1] op_sel_hi:[0,0]
v_pk_lshlrev_b16 v15, v11, v10
v_pk_ashrrev_i16 v16, v11, v10
v_pk_max_u16 v17, v10, v11
v_pk_mad_u16 v18, v10, v11, v10 clamp
v_pk_add_u16 v19, v10, 1",
        &mut w,
    );
    let f = |v: u16| h2f(v);
    for l in 0..LANES {
        let (a0, a1, b0, b1, c0, c1) = (f(h[0][l]), f(h[1][l]), f(h[2][l]), f(h[3][l]), f(h[4][l]), f(h[5][l]));
        let lohi = |r: usize| (w.vgpr[r][l] as u16, (w.vgpr[r][l] >> 16) as u16);
        assert_eq!(lohi(4), (f2h(a0 + b0), f2h(a1 + b1)));
        assert_eq!(
            lohi(5),
            (f2h(a1 * b0), f2h(a0 * b1)),
            "op_sel picks hi(v0) for the low lane, op_sel_hi lo(v0) for the high"
        );
        assert_eq!(lohi(6), (f2h(-a0 * b0 + c0), f2h(a1 * b1 - c1)));
        assert_eq!(lohi(7), (f2h(a0.max(b0)), f2h(a1.max(b1))));
        assert_eq!(
            lohi(8),
            (f2h(a0.min(1.0)), f2h(a1.min(1.0))),
            "1.0 in the low half; op_sel_hi 0 reads it for the high lane"
        );
        assert_eq!(lohi(3), (f2h(a0 * b0 + c0), f2h(a1 * b1 + c1)), "v_pk_fmac_f16");
        let (x0, x1, y0, y1) = (u[0][l], u[1][l], u[2][l], u[3][l]);
        assert_eq!(lohi(12), (x0.wrapping_add(y0), x1.wrapping_add(y1)));
        assert_eq!(
            lohi(13),
            ((x0 as i16).saturating_sub(y0 as i16) as u16, (x1 as i16).saturating_sub(y1 as i16) as u16)
        );
        assert_eq!(lohi(14), (x1.wrapping_mul(y1), x0.wrapping_mul(y0)));
        assert_eq!(lohi(15), (x0 << (y0 & 15), x1 << (y1 & 15)));
        assert_eq!(lohi(16), (((x0 as i16) >> (y0 & 15)) as u16, ((x1 as i16) >> (y1 & 15)) as u16));
        assert_eq!(lohi(17), (x0.max(y0), x1.max(y1)));
        let mad = |a: u16, b: u16| (u32::from(a) * u32::from(b) + u32::from(a)).min(0xFFFF) as u16;
        assert_eq!(lohi(18), (mad(x0, y0), mad(x1, y1)));
        assert_eq!(lohi(19), (x0.wrapping_add(1), x1), "an integer constant: 1 in the low half, 0 in the high one");
    }
    // Integer packed operations take no negation.
    let mut w = wave();
    unimplemented("v_pk_add_u16 v0, v1, v2 neg_lo:[1,0]", &mut w);
}

#[test]
fn integer_dot_products() {
    let mut r = rnd(0x1C);
    let mut w = wave();
    let a: [u32; LANES] = core::array::from_fn(|_| r());
    let b: [u32; LANES] = core::array::from_fn(|_| r());
    let c: [u32; LANES] = core::array::from_fn(|l| if l < 4 { 0x7FFF_FFF0 } else { r() });
    w.vgpr[0] = a;
    w.vgpr[1] = b;
    w.vgpr[2] = c;
    w.vgpr[9] = c;
    run(
        "v_dot2_i32_i16 v3, v0, v1, v2
v_dot2_u32_u16 v4, v0, v1, v2 op_sel:[1,0] op_sel_hi:[0,1]
v_dot4_i32_i8 v5, v0, v1, v2 clamp
v_dot4_u32_u8 v6, v0, v1, v2
v_dot8_i32_i4 v7, v0, v1, v2
v_dot8_u32_u4 v8, v0, v1, v2 clamp
v_dot2c_i32_i16_e32 v9, v0, v1",
        &mut w,
    );
    let parts = |x: u32, bits: u32, signed: bool| -> Vec<i64> {
        (0..32 / bits)
            .map(|k| {
                let v = (x >> (k * bits)) & ((1u32 << bits) - 1);
                if signed {
                    i64::from(((v << (32 - bits)) as i32) >> (32 - bits))
                } else {
                    i64::from(v)
                }
            })
            .collect()
    };
    let dot = |x: u32, y: u32, bits: u32, signed: bool| -> i64 {
        parts(x, bits, signed).iter().zip(parts(y, bits, signed)).map(|(p, q)| p * q).sum()
    };
    for l in 0..LANES {
        let (x, y) = (a[l], b[l]);
        let (ci, cu) = (i64::from(c[l] as i32), i64::from(c[l]));
        assert_eq!(w.vgpr[3][l], (dot(x, y, 16, true) + ci) as u32);
        // op_sel: the low lane reads hi(S0), op_sel_hi 0: the high lane reads lo(S0).
        let swapped = x.rotate_left(16);
        assert_eq!(w.vgpr[4][l], (dot(swapped, y, 16, false) + cu) as u32);
        assert_eq!(w.vgpr[5][l], (dot(x, y, 8, true) + ci).clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as u32);
        assert_eq!(w.vgpr[6][l], (dot(x, y, 8, false) + cu) as u32);
        assert_eq!(w.vgpr[7][l], (dot(x, y, 4, true) + ci) as u32);
        assert_eq!(w.vgpr[8][l], (dot(x, y, 4, false) + cu).min(i64::from(u32::MAX)) as u32);
        assert_eq!(w.vgpr[9][l], (dot(x, y, 16, true) + ci) as u32, "v_dot2c accumulates into D");
    }
}

#[test]
fn packed_f32_and_mixed_precision_fma() {
    let mut r = rnd(0x1A);
    let mut w = wave();
    let g = |r: &mut dyn FnMut() -> u32| {
        let x = r();
        f32::from_bits((x & 0x807F_FFFF) | ((x >> 23) % 30 + 112) << 23)
    };
    let v: Vec<[f32; LANES]> = (0..6).map(|_| core::array::from_fn(|_| g(&mut r))).collect();
    for k in 0..6 {
        set_f32(&mut w, k, &v[k]);
    }
    let hs: [u16; LANES] = core::array::from_fn(|_| mid_f16(&mut r));
    let hh: [u16; LANES] = core::array::from_fn(|_| mid_f16(&mut r));
    w.vgpr[10] = core::array::from_fn(|l| u32::from(hs[l]) | u32::from(hh[l]) << 16);
    w.vgpr[14] = [0x7777_7777; LANES];
    w.vgpr[15] = [0x7777_7777; LANES];
    run(
        "v_pk_fma_f32 v[6:7], v[0:1], v[2:3], v[4:5]
v_pk_mul_f32 v[8:9], v[0:1], v[2:3] op_sel:[1,0] op_sel_hi:[0,1] neg_lo:[0,1]
v_pk_add_f32 v[12:13], v[0:1], 1.0 op_sel_hi:[1,0]
v_fma_mix_f32 v11, v0, v10, v10 op_sel:[0,0,1] op_sel_hi:[0,1,1]
v_fma_mixlo_f16 v14, v10, v10, v1 op_sel_hi:[1,1,0]
v_fma_mixhi_f16 v15, -v10, v10, v1 op_sel:[1,0,0] op_sel_hi:[1,1,0]",
        &mut w,
    );
    for l in 0..LANES {
        let x = |k: usize| v[k][l];
        assert_eq!(f32_at(&w, 6, l), x(0).mul_add(x(2), x(4)));
        assert_eq!(f32_at(&w, 7, l), x(1).mul_add(x(3), x(5)));
        assert_eq!(f32_at(&w, 8, l), x(1) * -x(2), "lo: hi(S0) × -lo(S1)");
        assert_eq!(f32_at(&w, 9, l), x(0) * x(3), "hi: lo(S0) × hi(S1)");
        assert_eq!(f32_at(&w, 12, l), x(0) + 1.0);
        assert_eq!(f32_at(&w, 13, l), x(1) + 1.0, "1.0 in the low dword, read by both lanes");
        let (lo16, hi16) = (h2f(hs[l]) as f32, h2f(hh[l]) as f32);
        assert_eq!(f32_at(&w, 11, l), x(0).mul_add(lo16, hi16), "f32 × f16(lo) + f16(hi)");
        let lo = (w.vgpr[14][l] & 0xFFFF) as u16;
        assert_eq!(w.vgpr[14][l] >> 16, 0x7777, "mixlo keeps the high half");
        assert_eq!(lo, f2h(f64::from(lo16.mul_add(lo16, x(1)))), "f16(f32 fma)");
        let hi = (w.vgpr[15][l] >> 16) as u16;
        assert_eq!(w.vgpr[15][l] & 0xFFFF, 0x7777, "mixhi keeps the low half");
        assert_eq!(hi, f2h(f64::from((-hi16).mul_add(lo16, x(1)))));
    }
}

#[test]
fn f32_arithmetic_keeps_its_semantics_in_nearest_even() {
    // The f32 operations moved to the float module keep the bits of Rust's operations.
    let mut r = rnd(0x1B);
    let mut w = wave();
    let a: [f32; LANES] = core::array::from_fn(|_| any_f32(&mut r));
    let b: [f32; LANES] = core::array::from_fn(|_| any_f32(&mut r));
    let c: [f32; LANES] = core::array::from_fn(|_| any_f32(&mut r));
    set_f32(&mut w, 0, &a);
    set_f32(&mut w, 1, &b);
    set_f32(&mut w, 2, &c);
    w.vgpr[9] = c.map(f32::to_bits);
    w.vgpr[10] = c.map(f32::to_bits);
    run(
        "v_add_f32_e32 v3, v0, v1
v_subrev_f32_e32 v4, v0, v1
v_mul_f32_e64 v5, -v0, |v1| mul:4
v_fma_f32 v6, v0, v1, v2 clamp
v_mad_f32 v7, v0, v1, v2
v_madak_f32 v8, v0, v1, 0x40490fdb
v_fmac_f32_e32 v9, v0, v1
v_mac_f32_e32 v10, v0, v1
v_mul_legacy_f32 v11, v0, v1",
        &mut w,
    );
    for l in 0..LANES {
        let (x, y, z) = (a[l], b[l], c[l]);
        let clamp = |v: f32| if v.is_nan() { 0.0 } else { v.clamp(0.0, 1.0) };
        assert!(same32(f32_at(&w, 3, l), x + y));
        assert!(same32(f32_at(&w, 4, l), y - x));
        assert!(same32(f32_at(&w, 5, l), -x * y.abs() * 4.0));
        assert!(same32(f32_at(&w, 6, l), clamp(x.mul_add(y, z))));
        assert!(same32(f32_at(&w, 7, l), x * y + z));
        assert!(same32(f32_at(&w, 8, l), x * y + std::f32::consts::PI));
        assert!(same32(f32_at(&w, 9, l), x.mul_add(y, z)));
        assert!(same32(f32_at(&w, 10, l), x * y + z));
        let legacy = if x == 0.0 || y == 0.0 { 0.0 } else { x * y };
        assert!(same32(f32_at(&w, 11, l), legacy));
    }
}

// ---------------------------------------------------------------------------------------------
// robustness

/// Every implemented VALU opcode with random operand fields and modifiers, on random registers
/// and a random MODE (every rounding and denormal mode), ends in a value or an error, never a
/// panic.
#[test]
fn every_valu_opcode_on_random_state_never_panics() {
    use aqueduct_isa::{Encoding, Op};
    let implemented: std::collections::HashSet<Op> = aqueduct_isa::exec::implemented().collect();
    let mut r = rnd(0xC0FFEE);
    let (mut runs, mut errors) = (0usize, 0usize);
    for op in Op::all().filter(|o| implemented.contains(o)) {
        let code = u32::from(op.spec().code);
        let place = |r: &mut dyn FnMut() -> u32| -> Option<[u32; 3]> {
            let (a, b) = (r(), r());
            Some(match op.encoding() {
                Encoding::Vop1 => [0x7E00_0000 | (a & 0x01FE_01FF) | code << 9, b, r()],
                Encoding::Vop2 => [(a & 0x01FF_FFFF) | code << 25, b, r()],
                Encoding::Vopc => [0x7C00_0000 | (a & 0x0001_FFFF) | code << 17, b, r()],
                Encoding::Vop3 => [0xD000_0000 | (a & 0xFFFF) | code << 16, b, r()],
                Encoding::Vop3p => [0xD380_0000 | (a & 0xFFFF) | (code & 0x7F) << 16, b, r()],
                _ => return None,
            })
        };
        for _ in 0..24 {
            let Some(words) = place(&mut r) else { break };
            let Ok(inst) = aqueduct_isa::decode(&words, 0) else { continue };
            if inst.op != op {
                continue;
            }
            let mut program = words[..usize::from(inst.len)].to_vec();
            program.push(0xBF81_0000); // s_endpgm
            let code = Code::decode(BASE, &program);
            let mut w = Wave::new(256, 256);
            for reg in w.vgpr.iter_mut().chain(w.agpr.iter_mut()) {
                for x in reg.iter_mut() {
                    *x = r();
                }
            }
            for s in w.sgpr.iter_mut() {
                *s = r();
            }
            w.exec = u64::from(r()) << 32 | u64::from(r());
            w.vcc = u64::from(r()) << 32 | u64::from(r());
            w.mode = (r() & 0xFF) | (MODE & !0xFF);
            let mem = VecMemory::new(BASE, 64);
            let mut lds = vec![0u8; 256];
            runs += 1;
            if run_wave(&code, &mut w, &mem, &mut lds, &Limits { wave_instructions: 100 }).is_err() {
                errors += 1;
            }
        }
    }
    println!("{runs} runs, {errors} errors");
    // Errors are modifiers an opcode does not take, op_sel where it has none, MODE bits…
    assert!(runs > 5000 && errors < runs * 3 / 4, "{runs} runs, {errors} errors");
}
