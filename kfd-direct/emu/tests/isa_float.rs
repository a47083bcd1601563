//! Floating-point kernels compiled by hipcc -O3 run as gfx90a machine code on the emulated GPU
//! (docs/executor.md §5): f32 division (the `v_div_scale`/`v_div_fmas`/`v_div_fixup` macro),
//! the device libraries' `sqrtf`, `expf`, `logf`, `sinf`, `cosf`, `rsqrtf`, double-precision
//! `a * x + y`, division and `sqrt`, and half arithmetic (scalar and packed), each checked
//! against the host within the device libraries' documented ULP bounds (0 where the operation
//! is correctly rounded).

#![allow(clippy::needless_range_loop)]

mod common;

use aqueduct_kfd_emu::{EmuConfig, KernelMode};
use common::*;

/// Runs one dispatch of `grid` work-items in groups of 256 on a fresh queue, to completion.
fn run(h: &Harness, object: u64, kernarg: u64, grid: u32) {
    let q = h.create_queue();
    let sigs = h.signals();
    signal(&sigs, 0).reset(1);
    let mut p = dispatch(object, kernarg, grid, 256, signal_handle(&sigs, 0), true);
    q.submit(std::slice::from_mut(&mut p));
    assert!(wait_signal(signal(&sigs, 0), 0), "the dispatch completes: {:?}", h.emu.queue_state(q.id));
}

fn harness(gpu: Gpu) -> Harness {
    // Machine code only: there are no twins for these kernels anyway.
    Harness::with(gpu.config(EmuConfig { kernels: KernelMode::Isa, ..EmuConfig::default() }))
}

/// Distance in units in the last place between two floats of the same sign class (NaNs and
/// infinities must match exactly: `u64::MAX` otherwise).
fn ulps32(got: f32, want: f32) -> u64 {
    if want.is_nan() || got.is_nan() {
        return if want.is_nan() && got.is_nan() { 0 } else { u64::MAX };
    }
    if want.is_infinite() || got.is_infinite() {
        return if got == want { 0 } else { u64::MAX };
    }
    let key = |x: f32| {
        let b = x.to_bits() as i64;
        if b < 0x8000_0000 {
            b
        } else {
            0x8000_0000 - b
        }
    };
    key(got).abs_diff(key(want))
}

fn ulps64(got: f64, want: f64) -> u64 {
    if want.is_nan() || got.is_nan() {
        return if want.is_nan() && got.is_nan() { 0 } else { u64::MAX };
    }
    if want.is_infinite() || got.is_infinite() {
        return if got == want { 0 } else { u64::MAX };
    }
    let key = |x: f64| {
        let b = x.to_bits() as i128;
        if b < 1 << 63 {
            b
        } else {
            (1i128 << 63) - b
        }
    };
    key(got).abs_diff(key(want)) as u64
}

/// The f32 cases: hand-picked edges (zeros, infinities, NaN, denormals, the extremes, quotients
/// that overflow and underflow, huge arguments for the trigonometric reduction), then random
/// values over many magnitudes.
fn f32_inputs(n: usize) -> (Vec<f32>, Vec<f32>) {
    let edges: &[(f32, f32)] = &[
        (1.0, 3.0),
        (-7.5, 0.1),
        (0.0, 2.0),
        (-0.0, 2.0),
        (5.0, 0.0),
        (-5.0, 0.0),
        (0.0, 0.0),
        (f32::INFINITY, 2.0),
        (2.0, f32::INFINITY),
        (f32::INFINITY, f32::INFINITY),
        (f32::NAN, 1.0),
        (1.0, f32::NAN),
        (f32::MAX, 0.5),
        (f32::MAX, f32::from_bits(1)),
        (1e-30, 1e30),
        (f32::from_bits(1), 3.0),
        (f32::from_bits(0x007F_FFFF), f32::from_bits(0x0000_1234)),
        (1e-38, 7.0),
        (3.0e38, 1e-38),
        (1.0, f32::MIN_POSITIVE),
        (1.0, f32::MAX),
        (123_456.78, 8.0e37),
        (1.0e20, 1.5),
        (-3.0e8, 2.0e-40),
        (6.2831855, 4.0),
        (0.5, 0.25),
        (100.0, 1e-45),
        (-88.0, 1e-3),
        (89.0, 1e38),
        (-104.0, 0.75),
    ];
    let mut r = rnd(0xF1);
    let mut a: Vec<f32> = edges.iter().map(|e| e.0).collect();
    let mut b: Vec<f32> = edges.iter().map(|e| e.1).collect();
    while a.len() < n {
        // Exponents over most of the range, both signs for a; b positive (sqrt, log).
        let x = r();
        let ea = (x >> 23) % 60 + 97; // 2^-30 .. 2^30
        a.push(f32::from_bits((x & 0x807F_FFFF) | ea << 23));
        let y = r();
        let eb = (y >> 23) % 250 + 2;
        b.push(f32::from_bits((y & 0x007F_FFFF) | eb << 23));
    }
    (a, b)
}

fn hipcc_f32_division_sqrt_and_transcendentals_match_the_host(gpu: Gpu) {
    let (a, b) = f32_inputs(2048);
    check_f32_math(gpu, &a, &b);
}

/// The same over random bit patterns: every exponent, NaNs and infinities, denormals, the
/// trigonometric functions' large-argument reduction.
fn hipcc_f32_math_over_random_bit_patterns_matches_the_host(gpu: Gpu) {
    let mut r = rnd(0xB175);
    let a: Vec<f32> = (0..2048).map(|_| f32::from_bits(r())).collect();
    let b: Vec<f32> = (0..2048).map(|_| f32::from_bits(r())).collect();
    check_f32_math(gpu, &a, &b);
}

fn check_f32_math(gpu: Gpu, xa: &[f32], xb: &[f32]) {
    let h = harness(gpu);
    let objects = place_code_object(&h, &hipcc_fixture_for("float", gpu), &["f32_math"]);
    let n = xa.len();
    let (a, b, out) = (h.alloc(4 * n as u64, GTT), h.alloc(4 * n as u64, GTT), h.alloc(28 * n as u64, GTT));
    for i in 0..n {
        write(&a, 4 * i, xa[i]);
        write(&b, 4 * i, xb[i]);
    }
    let k = h.alloc(4096, GTT);
    write(&k, 0, n as i32);
    write(&k, 8, a.va);
    write(&k, 16, b.va);
    write(&k, 24, out.va);
    run(&h, objects[0], k.va, n as u32);
    let got: Vec<f32> = read_slice(&out, 7 * n);
    // (name, host value in f64 rounded once to f32, ULP bound)
    let mut worst = [0u64; 7];
    for i in 0..n {
        let (x, y) = (xa[i], xb[i]);
        let (xd, yd) = (f64::from(x), f64::from(y));
        let want: [(&str, f32, u64); 7] = [
            // IEEE division: correctly rounded.
            ("x / y", x / y, 0),
            // The device libraries' bounds (HIP's math documentation): sqrtf 1, expf 1, logf 1,
            // sinf/cosf 2, rsqrtf 1 ULP.
            ("sqrtf(y)", yd.sqrt() as f32, 1),
            ("expf(x)", xd.exp() as f32, 1),
            ("logf(y)", yd.ln() as f32, 1),
            ("sinf(x)", xd.sin() as f32, 2),
            ("cosf(x)", xd.cos() as f32, 2),
            ("rsqrtf(y)", (1.0 / yd.sqrt()) as f32, 1),
        ];
        for (k, (name, w, bound)) in want.iter().enumerate() {
            let g = got[7 * i + k];
            let d = ulps32(g, *w);
            // A result that underflows may flush or not: accept either side of the smallest
            // normal within the bound measured in denormal steps.
            assert!(d <= *bound, "{name} for x = {x:e} ({:#010x}), y = {y:e} ({:#010x}): got {g:e} ({:#010x}) want {w:e} ({:#010x}), {d} ULP", x.to_bits(), y.to_bits(), g.to_bits(), w.to_bits());
            worst[k] = worst[k].max(d);
        }
    }
    eprintln!("worst ULP errors (div, sqrt, exp, log, sin, cos, rsqrt): {worst:?}");
}

fn hipcc_f64_fma_division_and_sqrt_match_the_host(gpu: Gpu) {
    let h = harness(gpu);
    let objects = place_code_object(&h, &hipcc_fixture_for("float", gpu), &["f64_math"]);
    let n = 1024usize;
    let mut r = rnd(0x64);
    let mut r64 = || u64::from(r()) << 32 | u64::from(r());
    let edges: &[(f64, f64)] = &[
        (1.0, 3.0),
        (0.0, 5.0),
        (-0.0, 5.0),
        (7.0, 0.0),
        (0.0, 0.0),
        (f64::INFINITY, 2.0),
        (3.0, f64::INFINITY),
        (f64::NAN, 2.0),
        (f64::MAX, 0.25),
        (f64::from_bits(1), 3.0),
        (1e-300, 1e300),
        (1e300, 1e-300),
        (2.0, f64::from_bits(0x000F_FFFF_FFFF_FFFF)),
        (f64::MIN_POSITIVE, 0.75),
    ];
    let mut xs: Vec<f64> = edges.iter().map(|e| e.0).collect();
    let mut ys: Vec<f64> = edges.iter().map(|e| e.1).collect();
    while xs.len() < n {
        let v = r64();
        let ex = (v >> 52) % 1600 + 200;
        xs.push(f64::from_bits((v & 0x800F_FFFF_FFFF_FFFF) | ex << 52));
        let v = r64();
        let ey = (v >> 52) % 2000 + 20;
        ys.push(f64::from_bits((v & 0x000F_FFFF_FFFF_FFFF) | ey << 52));
    }
    let a = -1.375f64;
    let (x, y, out) = (h.alloc(8 * n as u64, GTT), h.alloc(8 * n as u64, GTT), h.alloc(24 * n as u64, GTT));
    for i in 0..n {
        write(&x, 8 * i, xs[i]);
        write(&y, 8 * i, ys[i]);
    }
    let k = h.alloc(4096, GTT);
    write(&k, 0, n as i32);
    write(&k, 8, a);
    write(&k, 16, x.va);
    write(&k, 24, y.va);
    write(&k, 32, out.va);
    run(&h, objects[0], k.va, n as u32);
    let got: Vec<f64> = read_slice(&out, 3 * n);
    let mut worst = [0u64; 3];
    for i in 0..n {
        let want: [(&str, f64, u64); 3] = [
            // hipcc contracts a * x + y into v_fma_f64: one rounding.
            ("a * x + y", a.mul_add(xs[i], ys[i]), 0),
            // IEEE division and the device libraries' sqrt: correctly rounded.
            ("x / y", xs[i] / ys[i], 0),
            ("sqrt(y)", ys[i].sqrt(), 0),
        ];
        for (k, (name, w, bound)) in want.iter().enumerate() {
            let g = got[3 * i + k];
            let d = ulps64(g, *w);
            assert!(
                d <= *bound,
                "{name} for x = {:e}, y = {:e}: got {g:e} ({:#018x}) want {w:e} ({:#018x}), {d} ULP",
                xs[i],
                ys[i],
                g.to_bits(),
                w.to_bits()
            );
            worst[k] = worst[k].max(d);
        }
    }
    eprintln!("worst ULP errors (fma, div, sqrt): {worst:?}");
}

/// f16 ↔ f64, independent of the executor: exact widening, and narrowing rounded to nearest
/// even (via the f32 conversion of the bits, which is exact for every f16 value).
fn f16_to_f64(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let e = (h >> 10) & 0x1F;
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
        _ => (1.0 + m / 1024.0) * 2f64.powi(i32::from(e) - 15),
    }
}

fn f64_to_f16(x: f64) -> u16 {
    if x.is_nan() {
        return 0x7E00;
    }
    let sign = if x.is_sign_negative() { 0x8000 } else { 0 };
    let a = x.abs();
    if a < 2f64.powi(-14) {
        // Denormal range: multiples of 2^-24 (a rounding up to 1024 of them is the smallest
        // normal, whose encoding is that same integer).
        return sign | (a * 2f64.powi(24)).round_ties_even() as u16;
    }
    let mut e = ((a.to_bits() >> 52) & 0x7FF) as i32 - 1023;
    let mut q = (a * 2f64.powi(10 - e)).round_ties_even(); // [1024, 2048]
    if q == 2048.0 {
        e += 1;
        q = 1024.0;
    }
    if e > 15 {
        return sign | 0x7C00;
    }
    sign | (((e + 15) as u16) << 10) | (q as u16 - 1024)
}

fn ulps16(got: u16, want: u16) -> u64 {
    let nan = |h: u16| h & 0x7C00 == 0x7C00 && h & 0x3FF != 0;
    if nan(got) || nan(want) {
        return if nan(got) && nan(want) { 0 } else { u64::MAX };
    }
    let key = |h: u16| if h & 0x8000 == 0 { i64::from(h) } else { -i64::from(h & 0x7FFF) };
    key(got).abs_diff(key(want))
}

/// f16 values of moderate magnitude (so a × b + c is exact in f64), with edges.
fn f16_inputs(n: usize, seed: u32) -> Vec<u16> {
    let mut v = vec![0x3C00, 0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0x0001, 0x03FF, 0x7BFF, 0x4248, 0xC500, 0x3555];
    let mut r = rnd(seed);
    while v.len() < n {
        let x = r() as u16;
        let e = (x >> 10) % 12 + 10; // 2^-5 .. 2^6
        v.push((x & 0x83FF) | e << 10);
    }
    v
}

fn hipcc_half_arithmetic_matches_the_host(gpu: Gpu) {
    let h = harness(gpu);
    let objects = place_code_object(&h, &hipcc_fixture_for("float", gpu), &["f16_math", "f16x2_math"]);
    let n = 1024usize;
    let (xa, xb) = (f16_inputs(n, 5), f16_inputs(n, 9));
    let (a, b, out) = (h.alloc(2 * n as u64, GTT), h.alloc(2 * n as u64, GTT), h.alloc(10 * n as u64, GTT));
    for i in 0..n {
        write(&a, 2 * i, xa[i]);
        write(&b, 2 * i, xb[i]);
    }
    let k = h.alloc(4096, GTT);
    write(&k, 0, n as i32);
    write(&k, 8, a.va);
    write(&k, 16, b.va);
    write(&k, 24, out.va);
    run(&h, objects[0], k.va, n as u32);
    let got: Vec<u16> = read_slice(&out, 5 * n);
    for i in 0..n {
        let (x, y) = (f16_to_f64(xa[i]), f16_to_f64(xb[i]));
        let want: [(&str, u16, u64); 5] = [
            ("__hadd", f64_to_f16(x + y), 0),
            ("__hmul", f64_to_f16(x * y), 0),
            ("__hfma", f64_to_f16(x * y + x), 0),
            // f32 reciprocal, product and the f16 fixup: within 1 ULP.
            ("__hdiv", f64_to_f16(x / y), 1),
            ("hsqrt", f64_to_f16(y.sqrt()), 1),
        ];
        for (k, (name, w, bound)) in want.iter().enumerate() {
            let g = got[5 * i + k];
            let d = ulps16(g, *w);
            assert!(d <= *bound, "{name} for {:#06x}, {:#06x}: got {g:#06x} want {w:#06x} ({d} ULP)", xa[i], xb[i]);
        }
    }
    // Packed: the same on both halves of each __half2.
    let m = n / 2;
    let out2 = h.alloc(8 * m as u64, GTT);
    let k2 = h.alloc(4096, GTT);
    write(&k2, 0, m as i32);
    write(&k2, 8, a.va);
    write(&k2, 16, b.va);
    write(&k2, 24, out2.va);
    run(&h, objects[1], k2.va, m as u32);
    let got: Vec<u16> = read_slice(&out2, 4 * m);
    for i in 0..m {
        for half in 0..2 {
            let (p, q) = (xa[2 * i + half], xb[2 * i + half]);
            let (x, y) = (f16_to_f64(p), f16_to_f64(q));
            let add = got[4 * i + half];
            let fma = got[4 * i + 2 + half];
            assert_eq!(ulps16(add, f64_to_f16(x + y)), 0, "__hadd2 half {half} of {p:#06x} + {q:#06x}: {add:#06x}");
            assert_eq!(ulps16(fma, f64_to_f16(x * y + x)), 0, "__hfma2 half {half} of {p:#06x}, {q:#06x}: {fma:#06x}");
        }
    }
}

on_both_gpus!(
    hipcc_f32_division_sqrt_and_transcendentals_match_the_host,
    hipcc_f32_math_over_random_bit_patterns_matches_the_host,
    hipcc_f64_fma_division_and_sqrt_match_the_host,
    hipcc_half_arithmetic_matches_the_host
);
