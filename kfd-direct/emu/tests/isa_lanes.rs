//! Cross-lane kernels run as their own gfx90a machine code (docs/executor.md §5 "Lanes"): the
//! hipcc -O3 kernels of `fixtures/isa/lanes.hip` — warp shuffles (`ds_bpermute_b32`), DPP wave
//! reductions and scans, MFMA products (`v_mfma_f32_16x16x4f32`, `v_mfma_f32_32x32x8f16`, and on
//! gfx940 `v_mfma_f32_16x16x8_xf32`), an LDS-tiled SGEMM and a vector indexed in GPR index mode —
//! each checked against the host.

#![allow(clippy::needless_range_loop)]

mod common;

use aqueduct_kfd_emu::{EmuConfig, KernelMode};
use common::*;

fn harness(gpu: Gpu) -> Harness {
    Harness::with(gpu.config(EmuConfig { kernels: KernelMode::Isa, ..EmuConfig::default() }))
}

fn warp_shuffles_match_the_host(gpu: Gpu) {
    let h = harness(gpu);
    let objects = place_code_object(&h, &hipcc_fixture_for("lanes", gpu), &["shuffles"]);
    let n = 256usize;
    let mut r = rnd(7);
    let xs: Vec<i32> = (0..n).map(|_| r() as i32).collect();
    let (x, out) = (h.alloc((4 * n) as u64, GTT), h.alloc((12 * n) as u64, GTT));
    for i in 0..n {
        write(&x, 4 * i, xs[i]);
    }
    let k = h.alloc(4096, GTT);
    write(&k, 0, x.va);
    write(&k, 8, out.va);
    run_packets(&h, &mut [dispatch(objects[0], k.va, n as u32, 64, 0, true)]).expect("shuffles complete");
    let got: Vec<i32> = read_slice(&out, 3 * n);
    for i in 0..n {
        let (wave, lane) = (i / 64 * 64, i % 64);
        assert_eq!(got[3 * i], xs[wave + (lane * 7 + 3) % 64], "__shfl {i}");
        assert_eq!(got[3 * i + 1], xs[wave + (lane ^ 5)], "__shfl_xor {i}");
        assert_eq!(got[3 * i + 2], if lane + 3 < 64 { xs[i + 3] } else { xs[i] }, "__shfl_down {i}");
    }
}

fn dpp_wave_reductions_and_scans_match_the_host(gpu: Gpu) {
    let h = harness(gpu);
    let objects = place_code_object(&h, &hipcc_fixture_for("lanes", gpu), &["wave_reduce"]);
    let n = 512usize;
    let mut r = rnd(11);
    let xs: Vec<i32> = (0..n).map(|_| (r() % 2001) as i32 - 1000).collect();
    let x = h.alloc((4 * n) as u64, GTT);
    let (rows, scan, total) = (h.alloc((4 * n) as u64, GTT), h.alloc((4 * n) as u64, GTT), h.alloc(4096, GTT));
    for i in 0..n {
        write(&x, 4 * i, xs[i]);
    }
    let k = h.alloc(4096, GTT);
    for (off, b) in [(0, &x), (8, &rows), (16, &scan), (24, &total)] {
        write(&k, off, b.va);
    }
    // Work-groups of 128: two waves each.
    run_packets(&h, &mut [dispatch(objects[0], k.va, n as u32, 128, 0, true)]).expect("wave_reduce completes");
    let (rows, scan, total): (Vec<i32>, Vec<i32>, Vec<i32>) =
        (read_slice(&rows, n), read_slice(&scan, n), read_slice(&total, n / 64));
    for i in 0..n {
        let row = i / 16 * 16;
        assert_eq!(rows[i], xs[row..row + 16].iter().sum::<i32>(), "row sum {i}");
        assert_eq!(scan[i], xs[row..=i].iter().sum::<i32>(), "row scan {i}");
    }
    for w in 0..n / 64 {
        assert_eq!(total[w], xs[64 * w..64 * w + 64].iter().sum::<i32>(), "wave {w}");
    }
}

fn mfma_16x16x4f32_loop_matches_a_host_matmul(gpu: Gpu) {
    let h = harness(gpu);
    let objects = place_code_object(&h, &hipcc_fixture_for("lanes", gpu), &["mfma_16x16"]);
    let kd = 64usize;
    let mut r = rnd(13);
    // Small integers: every summation order gives the same f32.
    let a: Vec<f32> = (0..16 * kd).map(|_| (r() % 17) as f32 - 8.0).collect();
    let b: Vec<f32> = (0..kd * 16).map(|_| (r() % 17) as f32 - 8.0).collect();
    let (ab, bb, db) = (h.alloc(4096 * 2, GTT), h.alloc(4096 * 2, GTT), h.alloc(4096, GTT));
    for i in 0..a.len() {
        write(&ab, 4 * i, a[i]);
        write(&bb, 4 * i, b[i]);
    }
    let k = h.alloc(4096, GTT);
    write(&k, 0, kd as i32);
    write(&k, 8, ab.va);
    write(&k, 16, bb.va);
    write(&k, 24, db.va);
    run_packets(&h, &mut [dispatch(objects[0], k.va, 64, 64, 0, true)]).expect("mfma_16x16 completes");
    let d: Vec<f32> = read_slice(&db, 256);
    for i in 0..16 {
        for j in 0..16 {
            let want: f32 = (0..kd).map(|q| a[i * kd + q] * b[q * 16 + j]).sum();
            assert_eq!(d[i * 16 + j], want, "D[{i}][{j}]");
        }
    }
}

/// The value an xf32 matrix input stands for (docs/executor.md §8 "xf32"): the f32 with its 13
/// low mantissa bits cleared (toward zero).
fn xf32(x: f32) -> f64 {
    f64::from(f32::from_bits(x.to_bits() & 0xFFFF_E000))
}

/// gfx940 only (`v_mfma_f32_16x16x8_xf32` is not a gfx90a instruction): real-valued inputs with
/// all 23 mantissa bits in use, so the result differs from an f32 product unless the inputs are
/// truncated as xf32 reads them; each of the k/8 steps adds its eight exact products to the
/// accumulator and rounds once.
#[test]
fn gfx942_mfma_16x16x8_xf32_loop_matches_a_host_matmul_of_truncated_inputs() {
    let gpu = Gpu::Mi300x;
    let h = harness(gpu);
    let objects = place_code_object(&h, &hipcc_fixture_for("lanes", gpu), &["mfma_16x16_xf32"]);
    let kd = 32usize;
    let mut r = rnd(29);
    let a: Vec<f32> = (0..16 * kd).map(|_| r() as f32 / u32::MAX as f32 * 2.0 - 1.0).collect();
    let b: Vec<f32> = (0..kd * 16).map(|_| r() as f32 / u32::MAX as f32 * 2.0 - 1.0).collect();
    let (ab, bb, db) = (h.alloc(4096, GTT), h.alloc(4096, GTT), h.alloc(4096, GTT));
    for i in 0..a.len() {
        write(&ab, 4 * i, a[i]);
        write(&bb, 4 * i, b[i]);
    }
    let k = h.alloc(4096, GTT);
    write(&k, 0, kd as i32);
    write(&k, 8, ab.va);
    write(&k, 16, bb.va);
    write(&k, 24, db.va);
    run_packets(&h, &mut [dispatch(objects[0], k.va, 64, 64, 0, true)]).expect("mfma_16x16_xf32 completes");
    let d: Vec<f32> = read_slice(&db, 256);
    let mut differs_from_f32 = 0;
    for i in 0..16 {
        for j in 0..16 {
            let mut acc = 0.0f32;
            for step in (0..kd).step_by(8) {
                let sum: f64 = (step..step + 8).map(|q| xf32(a[i * kd + q]) * xf32(b[q * 16 + j])).sum();
                acc = (f64::from(acc) + sum) as f32;
            }
            assert_eq!(d[i * 16 + j].to_bits(), acc.to_bits(), "D[{i}][{j}] = {} want {acc}", d[i * 16 + j]);
            let full: f64 = (0..kd).map(|q| f64::from(a[i * kd + q]) * f64::from(b[q * 16 + j])).sum();
            differs_from_f32 += usize::from(full as f32 != acc);
        }
    }
    // The truncation is visible: most elements differ from the full-precision product.
    assert!(differs_from_f32 > 128, "{differs_from_f32} of 256 differ");
}

/// `dyn_index`: a 16-float vector in VGPRs written and read at a uniform index, which clang
/// compiles to GPR index mode (docs/executor.md §5 "Register indexing"); every work-group picks
/// its own pair of elements.
fn dynamic_vector_index_matches_the_host(gpu: Gpu) {
    let h = harness(gpu);
    let objects = place_code_object(&h, &hipcc_fixture_for("lanes", gpu), &["dyn_index"]);
    let (groups, n) = (8usize, 8 * 64usize);
    let mut r = rnd(23);
    let ins: Vec<f32> = (0..16 * n).map(|_| (r() % 1000) as f32).collect();
    let idx: Vec<i32> = (0..groups).map(|_| (r() % 256) as i32).collect();
    let (ib, xb, ob) = (h.alloc(4096, GTT), h.alloc((64 * n) as u64, GTT), h.alloc((4 * n) as u64, GTT));
    for (i, v) in idx.iter().enumerate() {
        write(&ib, 4 * i, *v);
    }
    for (i, v) in ins.iter().enumerate() {
        write(&xb, 4 * i, *v);
    }
    let k = h.alloc(4096, GTT);
    write(&k, 0, ib.va);
    write(&k, 8, xb.va);
    write(&k, 16, ob.va);
    run_packets(&h, &mut [dispatch(objects[0], k.va, n as u32, 64, 0, true)]).expect("dyn_index completes");
    let out: Vec<f32> = read_slice(&ob, n);
    for t in 0..n {
        let kk = idx[t / 64] as usize;
        let (set, get) = ((kk >> 4) & 15, kk & 15);
        let want = if set == get { 2.0 } else { ins[16 * t + get] };
        assert_eq!(out[t], want, "thread {t}: k = {kk:#x}");
    }
}

/// A small integer as IEEE binary16 bits (exact for |x| ≤ 2048).
fn f16_bits(x: i32) -> u16 {
    if x == 0 {
        return 0;
    }
    let s: u16 = if x < 0 { 0x8000 } else { 0 };
    let a = x.unsigned_abs();
    let e = 31 - a.leading_zeros();
    s | ((e + 15) as u16) << 10 | ((a << (10 - e)) & 0x3FF) as u16
}

fn mfma_32x32x8f16_matches_a_host_matmul(gpu: Gpu) {
    let h = harness(gpu);
    let objects = place_code_object(&h, &hipcc_fixture_for("lanes", gpu), &["mfma_32x32_f16"]);
    let mut r = rnd(17);
    let a: Vec<i32> = (0..32 * 8).map(|_| (r() % 15) as i32 - 7).collect();
    let b: Vec<i32> = (0..8 * 32).map(|_| (r() % 15) as i32 - 7).collect();
    let (ab, bb, db) = (h.alloc(4096, GTT), h.alloc(4096, GTT), h.alloc(4096, GTT));
    for i in 0..a.len() {
        write(&ab, 2 * i, f16_bits(a[i]));
        write(&bb, 2 * i, f16_bits(b[i]));
    }
    let k = h.alloc(4096, GTT);
    write(&k, 0, ab.va);
    write(&k, 8, bb.va);
    write(&k, 16, db.va);
    run_packets(&h, &mut [dispatch(objects[0], k.va, 64, 64, 0, true)]).expect("mfma_32x32_f16 completes");
    let d: Vec<f32> = read_slice(&db, 1024);
    for i in 0..32 {
        for j in 0..32 {
            let want: i32 = (0..8).map(|q| a[i * 8 + q] * b[q * 32 + j]).sum();
            assert_eq!(d[i * 32 + j], want as f32, "D[{i}][{j}]");
        }
    }
}

/// The host loop of `sgemm_tiled`: the same products in the same order (tile by tile, k within
/// the tile), each fused as `__builtin_fmaf` — so the result is bit-equal.
pub fn host_sgemm_tiled(n: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
    for row in 0..n {
        for col in 0..n {
            let mut acc = 0.0f32;
            for t in (0..n).step_by(16) {
                for k in 0..16 {
                    acc = a[row * n + t + k].mul_add(b[(t + k) * n + col], acc);
                }
            }
            c[row * n + col] = acc;
        }
    }
}

fn lds_tiled_sgemm_is_bit_equal_to_the_host(gpu: Gpu) {
    let h = harness(gpu);
    let objects = place_code_object(&h, &hipcc_fixture_for("lanes", gpu), &["sgemm_tiled"]);
    let n = 64usize;
    let mut r = rnd(19);
    let a: Vec<f32> = (0..n * n).map(|_| r() as f32 / u32::MAX as f32 - 0.5).collect();
    let b: Vec<f32> = (0..n * n).map(|_| r() as f32 / u32::MAX as f32 - 0.5).collect();
    let bytes = (4 * n * n) as u64;
    let (ab, bb, cb) = (h.alloc(bytes, GTT), h.alloc(bytes, GTT), h.alloc(bytes, GTT));
    for i in 0..n * n {
        write(&ab, 4 * i, a[i]);
        write(&bb, 4 * i, b[i]);
    }
    let k = h.alloc(4096, GTT);
    write(&k, 0, n as i32);
    write(&k, 8, ab.va);
    write(&k, 16, bb.va);
    write(&k, 24, cb.va);
    let tiles = (n / 16) as u32;
    let mut p = dispatch(objects[0], k.va, tiles * tiles * 256, 256, 0, true);
    p.group_segment_size = 2 * 16 * 16 * 4;
    run_packets(&h, &mut [p]).expect("sgemm_tiled completes");
    let got: Vec<f32> = read_slice(&cb, n * n);
    let mut want = vec![0.0f32; n * n];
    host_sgemm_tiled(n, &a, &b, &mut want);
    for i in 0..n * n {
        assert_eq!(got[i].to_bits(), want[i].to_bits(), "C[{}][{}] = {} want {}", i / n, i % n, got[i], want[i]);
    }
}

on_both_gpus!(
    warp_shuffles_match_the_host,
    dpp_wave_reductions_and_scans_match_the_host,
    mfma_16x16x4f32_loop_matches_a_host_matmul,
    mfma_32x32x8f16_matches_a_host_matmul,
    lds_tiled_sgemm_is_bit_equal_to_the_host,
    dynamic_vector_index_matches_the_host
);
