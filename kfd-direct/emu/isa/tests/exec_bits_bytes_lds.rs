//! Bit, byte, cube-map and LDS operations (docs/executor.md §5): `s_flbit_i32`, the 64-bit bit sets,
//! quad masks, `v_perm_b32`, the SAD and LERP byte operations, signed add/subtract with clamp,
//! `v_swap_b32`, the LDS reverse-subtract, masked-or, float min/max/compare-store and wrap
//! atomics and the 16-bit (`_d16`) LDS reads and writes — assembled by `llvm-mc-15` at test
//! time, run on one wave with random lanes and checked against values computed here from the
//! ISA's definitions.

#![allow(clippy::needless_range_loop)]

mod common;

use common::{assemble, rnd};

use aqueduct_isa::exec::{run_wave, Code, Limits, VecMemory, Wave, LANES};

const BASE: u64 = 0x1_0000_0000;

fn wave() -> Wave {
    let mut w = Wave::new(32, 8);
    w.exec = u64::MAX;
    w.mode = 0xF0;
    w
}

/// Runs `asm` on `w` with `lds` as the work-group's LDS.
fn run_lds(asm: &str, w: &mut Wave, lds: &mut Vec<u8>) {
    let code = Code::decode(BASE, &assemble(&format!("{asm}\ns_endpgm")));
    assert!(code.unimplemented().is_empty(), "{asm}: {:?}", code.unimplemented());
    w.pc = 0;
    let mem = VecMemory::new(BASE, 0);
    run_wave(&code, w, &mem, lds, &Limits { wave_instructions: 1000 }).unwrap_or_else(|e| panic!("{asm}: {e}"));
}

fn run(asm: &str, w: &mut Wave) {
    run_lds(asm, w, &mut vec![0; 64]);
}

fn random_lanes(r: &mut impl FnMut() -> u32) -> [u32; LANES] {
    core::array::from_fn(|_| r())
}

#[test]
fn flbit_i32_counts_the_bits_equal_to_the_sign_after_it() {
    // By walking the bits: how many below the sign bit equal it before the first that differs.
    fn want(x: u64, bits: u32) -> u32 {
        let bit = |i: u32| x >> i & 1;
        let sign = bit(bits - 1);
        for (n, i) in (0..bits - 1).rev().enumerate() {
            if bit(i) != sign {
                return n as u32 + 1;
            }
        }
        u32::MAX // 0 or all ones
    }
    let mut r = rnd(0x51);
    let mut cases: Vec<u64> = vec![0, u64::MAX, 1, 0x8000_0000, 0x4000_0000, 0xFFFF_FFFE, 0x8000_0000_0000_0000];
    for _ in 0..40 {
        let v = u64::from(r()) << 32 | u64::from(r());
        cases.push(v >> (r() % 64));
        cases.push(!(v >> (r() % 64)));
    }
    for x in cases {
        let mut w = wave();
        w.sgpr[0] = x as u32;
        w.sgpr[2] = x as u32;
        w.sgpr[3] = (x >> 32) as u32;
        w.scc = true;
        run("s_flbit_i32 s10, s0\ns_flbit_i32_i64 s11, s[2:3]", &mut w);
        assert_eq!(w.sgpr[10], want(x & 0xFFFF_FFFF, 32), "s_flbit_i32 {:#x}", x as u32);
        assert_eq!(w.sgpr[11], want(x, 64), "s_flbit_i32_i64 {x:#x}");
        assert!(w.scc, "SCC is not written");
    }
}

#[test]
fn bitset_quadmask_wqm_and_bitreplicate() {
    let mut r = rnd(0x52);
    for _ in 0..30 {
        let mut w = wave();
        let x = u64::from(r()) << 32 | u64::from(r());
        // Sparse values too, so some quads are empty.
        let mut word = || u64::from(r()) << 32 | u64::from(r());
        let x = if word() % 2 == 0 { x & word() & word() } else { x };
        let b = r();
        w.sgpr[0] = x as u32;
        w.sgpr[1] = (x >> 32) as u32;
        w.sgpr[4] = x as u32;
        w.sgpr[5] = (x >> 32) as u32;
        w.sgpr[6] = x as u32;
        w.sgpr[7] = (x >> 32) as u32;
        w.sgpr[2] = b;
        run("s_bitset0_b64 s[4:5], s2\ns_bitset1_b64 s[6:7], s2", &mut w);
        let pair = |w: &Wave, i: usize| u64::from(w.sgpr[i]) | u64::from(w.sgpr[i + 1]) << 32;
        assert_eq!(pair(&w, 4), x & !(1u64 << (b % 64)));
        assert_eq!(pair(&w, 6), x | 1u64 << (b % 64));

        let quads = |n: u32| -> u64 {
            let mut m = 0;
            for q in 0..n {
                if (x >> (4 * q)) & 0xF != 0 {
                    m |= 1 << q;
                }
            }
            m
        };
        let whole = |n: u32| -> u64 {
            let mut m = 0u64;
            for q in 0..n {
                if (x >> (4 * q)) & 0xF != 0 {
                    m |= 0xF << (4 * q);
                }
            }
            m
        };
        run("s_quadmask_b32 s10, s0", &mut w);
        assert_eq!(u64::from(w.sgpr[10]), quads(8));
        assert_eq!(w.scc, quads(8) != 0);
        run("s_quadmask_b64 s[10:11], s[0:1]", &mut w);
        assert_eq!(pair(&w, 10), quads(16));
        assert_eq!(w.scc, quads(16) != 0);
        run("s_wqm_b32 s12, s0", &mut w);
        assert_eq!(u64::from(w.sgpr[12]), whole(8));
        assert_eq!(w.scc, whole(8) != 0);
        run("s_wqm_b64 s[12:13], s[0:1]", &mut w);
        assert_eq!(pair(&w, 12), whole(16));
        run("s_bitreplicate_b64_b32 s[14:15], s0", &mut w);
        let mut rep = 0u64;
        for i in 0..32 {
            if x >> i & 1 == 1 {
                rep |= 3 << (2 * i);
            }
        }
        assert_eq!(pair(&w, 14), rep, "{:#x}", x as u32);
    }
}

#[test]
fn perm_selects_bytes_signs_and_constants() {
    let mut r = rnd(0x53);
    let mut w = wave();
    w.vgpr[0] = random_lanes(&mut r);
    w.vgpr[1] = random_lanes(&mut r);
    // Selector bytes 0–15 of every kind.
    w.vgpr[2] = core::array::from_fn(|_| u32::from_le_bytes(core::array::from_fn(|_| (r() % 16) as u8)));
    run("v_perm_b32 v3, v0, v1, v2", &mut w);
    for l in 0..LANES {
        // Bytes 0–3 of S1, then 4–7 of S0.
        let mut data = w.vgpr[1][l].to_le_bytes().to_vec();
        data.extend(w.vgpr[0][l].to_le_bytes());
        let want: Vec<u8> = w.vgpr[2][l]
            .to_le_bytes()
            .iter()
            .map(|&s| match s {
                0..=7 => data[s as usize],
                8..=11 => {
                    if (data[2 * (s as usize - 8) + 1] as i8) < 0 {
                        0xFF
                    } else {
                        0
                    }
                }
                12 => 0,
                _ => 0xFF,
            })
            .collect();
        assert_eq!(w.vgpr[3][l].to_le_bytes().to_vec(), want, "lane {l} sel {:#010x}", w.vgpr[2][l]);
    }
    // The byte swap clang builds from it.
    let mut w = wave();
    w.vgpr[0] = random_lanes(&mut r);
    w.sgpr[0] = 0x0001_0203;
    run("v_perm_b32 v1, 0, v0, s0", &mut w);
    for l in 0..LANES {
        assert_eq!(w.vgpr[1][l], w.vgpr[0][l].swap_bytes());
    }
}

#[test]
fn sad_and_lerp_work_on_bytes_and_halves() {
    let mut r = rnd(0x54);
    let mut w = wave();
    for v in 0..3 {
        w.vgpr[v] = random_lanes(&mut r);
    }
    run(
        "v_sad_u8 v10, v0, v1, v2\nv_sad_hi_u8 v11, v0, v1, v2\nv_sad_u16 v12, v0, v1, v2\n\
         v_sad_u32 v13, v0, v1, v2\nv_lerp_u8 v14, v0, v1, v2",
        &mut w,
    );
    for l in 0..LANES {
        let (a, b, c) = (w.vgpr[0][l], w.vgpr[1][l], w.vgpr[2][l]);
        let (ab, bb) = (a.to_le_bytes(), b.to_le_bytes());
        let sad8: i64 = (0..4).map(|i| (i64::from(ab[i]) - i64::from(bb[i])).abs()).sum();
        assert_eq!(w.vgpr[10][l], (sad8 as u32).wrapping_add(c), "v_sad_u8 lane {l}");
        assert_eq!(w.vgpr[11][l], ((sad8 as u32) << 16).wrapping_add(c), "v_sad_hi_u8 lane {l}");
        let half = |x: u32, i: u32| i64::from((x >> (16 * i)) as u16);
        let sad16: i64 = (0..2).map(|i| (half(a, i) - half(b, i)).abs()).sum();
        assert_eq!(w.vgpr[12][l], (sad16 as u32).wrapping_add(c), "v_sad_u16 lane {l}");
        let sad32 = (i64::from(a) - i64::from(b)).unsigned_abs() as u32;
        assert_eq!(w.vgpr[13][l], sad32.wrapping_add(c), "v_sad_u32 lane {l}");
        // Each byte: the average of the two, rounded up where S2's bit 8i says.
        let cb = c.to_le_bytes();
        let lerp: Vec<u8> =
            (0..4).map(|i| ((u32::from(ab[i]) + u32::from(bb[i]) + u32::from(cb[i] & 1)) / 2) as u8).collect();
        assert_eq!(w.vgpr[14][l].to_le_bytes().to_vec(), lerp, "v_lerp_u8 lane {l}");
    }
}

#[test]
fn signed_add_and_subtract_wrap_or_saturate_with_clamp() {
    let mut r = rnd(0x55);
    let mut w = wave();
    let edge = [i32::MAX, i32::MIN, -1, 0, 1, i32::MAX - 3, i32::MIN + 3];
    w.vgpr[0] = core::array::from_fn(|l| if l < 7 { edge[l] as u32 } else { r() });
    w.vgpr[1] = core::array::from_fn(|l| if l < 7 { edge[6 - l] as u32 } else { r() });
    run("v_add_i32 v2, v0, v1\nv_add_i32 v3, v0, v1 clamp\nv_sub_i32 v4, v0, v1\nv_sub_i32 v5, v0, v1 clamp", &mut w);
    for l in 0..LANES {
        let (a, b) = (w.vgpr[0][l] as i32, w.vgpr[1][l] as i32);
        assert_eq!(w.vgpr[2][l] as i32, a.wrapping_add(b), "lane {l}");
        assert_eq!(w.vgpr[3][l] as i32, a.saturating_add(b), "lane {l} clamp");
        assert_eq!(w.vgpr[4][l] as i32, a.wrapping_sub(b), "lane {l}");
        assert_eq!(w.vgpr[5][l] as i32, a.saturating_sub(b), "lane {l} clamp");
    }
}

#[test]
fn swap_exchanges_the_active_lanes_only() {
    let mut r = rnd(0x56);
    let mut w = wave();
    w.vgpr[0] = random_lanes(&mut r);
    w.vgpr[1] = random_lanes(&mut r);
    let (a, b) = (w.vgpr[0], w.vgpr[1]);
    w.exec = u64::from(r()) | u64::from(r()) << 32;
    run("v_swap_b32 v0, v1\nv_clrexcp", &mut w);
    for l in 0..LANES {
        let on = w.exec >> l & 1 != 0;
        assert_eq!(w.vgpr[0][l], if on { b[l] } else { a[l] }, "lane {l}");
        assert_eq!(w.vgpr[1][l], if on { a[l] } else { b[l] }, "lane {l}");
    }
}

/// LDS dword `i` of `lds`.
fn dword(lds: &[u8], i: usize) -> u32 {
    u32::from_le_bytes(lds[4 * i..4 * i + 4].try_into().unwrap())
}

#[test]
fn lds_rsub_mskor_wrap_and_float_atomics() {
    let mut r = rnd(0x57);
    let mut lds = vec![0u8; 4 * 4 * LANES];
    let init: Vec<u32> = (0..4 * LANES).map(|_| r()).collect();
    for (i, v) in init.iter().enumerate() {
        lds[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
    }
    let mut w = wave();
    w.vgpr[0] = core::array::from_fn(|l| 4 * l as u32); // one dword per lane in each of 4 rows
    w.vgpr[1] = random_lanes(&mut r);
    w.vgpr[2] = random_lanes(&mut r);
    let row = 4 * LANES as u32;
    run_lds(
        &format!(
            "ds_rsub_rtn_u32 v3, v0, v1\n\
             ds_mskor_rtn_b32 v4, v0, v1, v2 offset:{row}\n\
             ds_wrap_rtn_b32 v5, v0, v1, v2 offset:{}\n\
             ds_rsub_u32 v0, v2 offset:{}",
            2 * row,
            3 * row
        ),
        &mut w,
        &mut lds,
    );
    for l in 0..LANES {
        let (d0, d1) = (w.vgpr[1][l], w.vgpr[2][l]);
        let old = |k: usize| init[k * LANES + l];
        assert_eq!(w.vgpr[3][l], old(0));
        assert_eq!(dword(&lds, l), d0.wrapping_sub(old(0)), "rsub lane {l}");
        assert_eq!(w.vgpr[4][l], old(1));
        assert_eq!(dword(&lds, LANES + l), (old(1) & !d0) | d1, "mskor lane {l}");
        assert_eq!(w.vgpr[5][l], old(2));
        let wrap = if old(2) >= d0 { old(2) - d0 } else { old(2).wrapping_add(d1) };
        assert_eq!(dword(&lds, 2 * LANES + l), wrap, "wrap lane {l}");
        assert_eq!(dword(&lds, 3 * LANES + l), d1.wrapping_sub(old(3)), "rsub (no return) lane {l}");
    }

    // Floats: min/max are IEEE minNum/maxNum (a NaN operand yields the other, −0 < +0);
    // compare-store compares as floats (−0 equals +0, a NaN equals nothing).
    let vals = [1.5f32, -2.0, 0.0, -0.0, f32::NAN, f32::INFINITY, -3.25, 7.0];
    let mut lds = vec![0u8; 3 * 4 * LANES];
    let mut w = wave();
    w.vgpr[0] = core::array::from_fn(|l| 4 * l as u32);
    let (mut olds, mut datas, mut news) = ([0f32; LANES], [0f32; LANES], [0f32; LANES]);
    for l in 0..LANES {
        olds[l] = vals[l % 8];
        datas[l] = vals[(l / 8) % 8];
        news[l] = l as f32;
        for k in 0..3 {
            let at = 4 * (k * LANES + l);
            lds[at..at + 4].copy_from_slice(&olds[l].to_bits().to_le_bytes());
        }
    }
    w.vgpr[1] = datas.map(f32::to_bits);
    w.vgpr[2] = news.map(f32::to_bits);
    run_lds(
        &format!(
            "ds_min_rtn_f32 v3, v0, v1\nds_max_f32 v0, v1 offset:{row}\nds_cmpst_rtn_f32 v4, v0, v1, v2 offset:{}",
            2 * row
        ),
        &mut w,
        &mut lds,
    );
    for l in 0..LANES {
        let (o, d) = (olds[l], datas[l]);
        let pick = |min: bool| -> f32 {
            if o.is_nan() {
                d
            } else if d.is_nan() {
                o
            } else if o == d {
                // −0 and +0: the sign decides; equal values otherwise.
                if min == o.is_sign_negative() {
                    o
                } else {
                    d
                }
            } else if (o < d) == min {
                o
            } else {
                d
            }
        };
        let got = |k: usize| f32::from_bits(dword(&lds, k * LANES + l));
        let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        assert!(same(got(0), pick(true)), "min({o}, {d}) lane {l}: {}", got(0));
        assert_eq!(w.vgpr[3][l], o.to_bits(), "min returns the old value");
        assert!(same(got(1), pick(false)), "max({o}, {d}) lane {l}: {}", got(1));
        let stored = if o == d { news[l] } else { o };
        assert!(same(got(2), stored), "cmpst({o} == {d}) lane {l}: {}", got(2));
        assert_eq!(w.vgpr[4][l], o.to_bits());
    }
}

#[test]
fn lds_f64_min_max_and_compare_store() {
    let mut lds = vec![0u8; 3 * 8 * LANES];
    let vals = [1.5f64, -2.0, 0.0, -0.0, f64::NAN, 1e300, -3.25, 7.0];
    let mut w = wave();
    w.vgpr[0] = core::array::from_fn(|l| 8 * l as u32);
    for l in 0..LANES {
        let (o, d) = (vals[l % 8], vals[(l / 8) % 8]);
        for k in 0..3 {
            let at = 8 * (k * LANES + l);
            lds[at..at + 8].copy_from_slice(&o.to_bits().to_le_bytes());
        }
        w.vgpr[2][l] = d.to_bits() as u32;
        w.vgpr[3][l] = (d.to_bits() >> 32) as u32;
        w.vgpr[4][l] = (l as f64).to_bits() as u32;
        w.vgpr[5][l] = ((l as f64).to_bits() >> 32) as u32;
    }
    let row = 8 * LANES;
    run_lds(
        &format!(
            "ds_min_f64 v0, v[2:3]\nds_max_rtn_f64 v[6:7], v0, v[2:3] offset:{row}\nds_cmpst_f64 v0, v[2:3], v[4:5] offset:{}",
            2 * row
        ),
        &mut w,
        &mut lds,
    );
    let q =
        |k: usize, l: usize| f64::from_bits(u64::from_le_bytes(lds[8 * (k * LANES + l)..][..8].try_into().unwrap()));
    for l in 0..LANES {
        let (o, d) = (vals[l % 8], vals[(l / 8) % 8]);
        let want_min = if o.is_nan() {
            d
        } else if d.is_nan() {
            o
        } else if o == d {
            if o.is_sign_negative() {
                o
            } else {
                d
            }
        } else {
            o.min(d)
        };
        let want_max = if o.is_nan() {
            d
        } else if d.is_nan() {
            o
        } else if o == d {
            if o.is_sign_negative() {
                d
            } else {
                o
            }
        } else {
            o.max(d)
        };
        let same = |a: f64, b: f64| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        assert!(same(q(0, l), want_min), "min({o}, {d}): {}", q(0, l));
        assert!(same(q(1, l), want_max), "max({o}, {d}): {}", q(1, l));
        assert_eq!(u64::from(w.vgpr[6][l]) | u64::from(w.vgpr[7][l]) << 32, o.to_bits());
        assert!(same(q(2, l), if o == d { l as f64 } else { o }), "cmpst({o} == {d})");
    }
}

#[test]
fn lds_d16_reads_fill_one_half_and_d16_hi_writes_store_the_upper_half() {
    let mut r = rnd(0x58);
    let mut lds: Vec<u8> = (0..4 * LANES).map(|_| r() as u8).collect();
    let bytes = lds.clone();
    let mut w = wave();
    w.vgpr[0] = core::array::from_fn(|l| 2 * l as u32 + 1); // odd: byte and unaligned-half reads
    for v in 1..7 {
        w.vgpr[v] = random_lanes(&mut r);
    }
    let keep = w.vgpr.clone();
    run_lds(
        "ds_read_u8_d16 v1, v0\nds_read_u8_d16_hi v2, v0\nds_read_i8_d16 v3, v0\nds_read_i8_d16_hi v4, v0\n\
         ds_read_u16_d16 v5, v0 offset:1\nds_read_u16_d16_hi v6, v0 offset:1",
        &mut w,
        &mut lds,
    );
    for l in 0..LANES {
        let a = 2 * l + 1;
        let (b, sb) = (u32::from(bytes[a]), bytes[a] as i8 as i16 as u16 as u32);
        let h = u32::from(u16::from_le_bytes([bytes[a + 1], bytes[a + 2]]));
        let lo = |v: usize| keep[v][l] & 0xFFFF;
        let hi = |v: usize| keep[v][l] & 0xFFFF_0000;
        assert_eq!(w.vgpr[1][l], hi(1) | b, "u8_d16 lane {l}");
        assert_eq!(w.vgpr[2][l], b << 16 | lo(2), "u8_d16_hi lane {l}");
        assert_eq!(w.vgpr[3][l], hi(3) | sb, "i8_d16 lane {l}");
        assert_eq!(w.vgpr[4][l], sb << 16 | lo(4), "i8_d16_hi lane {l}");
        assert_eq!(w.vgpr[5][l], hi(5) | h, "u16_d16 lane {l}");
        assert_eq!(w.vgpr[6][l], h << 16 | lo(6), "u16_d16_hi lane {l}");
    }
    // Writes: lane l's byte at 4l, its half at 4l + 2.
    let mut w = wave();
    w.vgpr[0] = core::array::from_fn(|l| 4 * l as u32);
    w.vgpr[1] = random_lanes(&mut r);
    let mut lds = vec![0u8; 4 * LANES];
    run_lds("ds_write_b8_d16_hi v0, v1\nds_write_b16_d16_hi v0, v1 offset:2", &mut w, &mut lds);
    for l in 0..LANES {
        let v = w.vgpr[1][l].to_le_bytes();
        assert_eq!(lds[4 * l..4 * l + 4], [v[2], 0, v[2], v[3]], "lane {l}");
    }
}

#[test]
fn lds_wrxchg2_exchanges_two_elements_per_lane() {
    let mut r = rnd(0x59);
    let mut lds: Vec<u8> = (0..8 * 1024).map(|_| r() as u8).collect();
    let before = lds.clone();
    let mut w = wave();
    w.vgpr[0] = core::array::from_fn(|l| 8 * l as u32);
    for v in 1..6 {
        w.vgpr[v] = random_lanes(&mut r);
    }
    // b32: offsets 1 and 3 dwords; b64 st64: offsets 2 and 5 × 64 qwords past 4096.
    w.vgpr[10] = core::array::from_fn(|l| 4096 + 8 * l as u32);
    run_lds(
        "ds_wrxchg2_rtn_b32 v[6:7], v0, v1, v2 offset0:1 offset1:3\n\
         ds_wrxchg2st64_rtn_b64 v[12:15], v10, v[2:3], v[4:5] offset0:2 offset1:5",
        &mut w,
        &mut lds,
    );
    let rd = |m: &[u8], at: usize, n: usize| -> u64 {
        let mut b = [0u8; 8];
        b[..n].copy_from_slice(&m[at..at + n]);
        u64::from_le_bytes(b)
    };
    for l in 0..LANES {
        // Lanes 8 bytes apart, elements 4 apart: lane l's second b32 element (8l + 12) is lane
        // l + 1's first (8(l + 1) + 4): lanes run in order, so each lane sees the previous
        // lane's write.
        let (a0, a1) = (8 * l + 4, 8 * l + 12);
        let old0 = if l == 0 { rd(&before, a0, 4) } else { u64::from(w.vgpr[2][l - 1]) };
        assert_eq!(u64::from(w.vgpr[6][l]), old0, "lane {l} first old");
        assert_eq!(u64::from(w.vgpr[7][l]), rd(&before, a1, 4), "lane {l} second old");
        if l + 1 < LANES {
            assert_eq!(rd(&lds, a0, 4), u64::from(w.vgpr[1][l]), "lane {l} first new");
        } else {
            assert_eq!(rd(&lds, a1, 4), u64::from(w.vgpr[2][l]), "last lane's second new");
        }
        let (b0, b1) = (4096 + 8 * l + 2 * 64 * 8, 4096 + 8 * l + 5 * 64 * 8);
        let pair = |lo: u32, hi: u32| u64::from(lo) | u64::from(hi) << 32;
        assert_eq!(pair(w.vgpr[12][l], w.vgpr[13][l]), rd(&before, b0, 8), "lane {l} b64 first old");
        assert_eq!(pair(w.vgpr[14][l], w.vgpr[15][l]), rd(&before, b1, 8), "lane {l} b64 second old");
        assert_eq!(rd(&lds, b0, 8), pair(w.vgpr[2][l], w.vgpr[3][l]), "lane {l} b64 first new");
        assert_eq!(rd(&lds, b1, 8), pair(w.vgpr[4][l], w.vgpr[5][l]), "lane {l} b64 second new");
    }
}

/// `v_cube*_f32` against the cube-map face table of the OpenGL specification (major axis the
/// largest magnitude, z before y before x on ties; sc/tc per face), −0 on the positive side.
#[test]
fn cube_face_and_coordinates_follow_the_face_table() {
    let mut r = rnd(0x5A);
    let mut dirs: Vec<[f32; 3]> = vec![
        [1.0, 0.0, 0.0],
        [-1.0, 0.0, 0.0],
        [0.0, 2.0, 0.0],
        [0.0, -2.0, 0.0],
        [0.0, 0.0, 3.0],
        [0.0, 0.0, -3.0],
        [1.0, 1.0, 1.0],   // a tie of all three: z
        [-2.0, 2.0, 1.0],  // x and y tie: y
        [0.5, -0.0, -0.0], // x
        [0.0, 0.0, -0.0],  // all zero: +z
    ];
    while dirs.len() < 64 {
        dirs.push(core::array::from_fn(|_| (r() % 2001) as f32 / 100.0 - 10.0));
    }
    let mut w = wave();
    for (l, d) in dirs.iter().enumerate() {
        for k in 0..3 {
            w.vgpr[k][l] = d[k].to_bits();
        }
    }
    run(
        "v_cubeid_f32 v4, v0, v1, v2\nv_cubesc_f32 v5, v0, v1, v2\nv_cubetc_f32 v6, v0, v1, v2\nv_cubema_f32 v7, v0, v1, v2",
        &mut w,
    );
    for (l, &[x, y, z]) in dirs.iter().enumerate() {
        let axis = if z.abs() >= x.abs() && z.abs() >= y.abs() {
            2
        } else if y.abs() >= x.abs() {
            1
        } else {
            0
        };
        let major = [x, y, z][axis];
        let face = 2 * axis + usize::from(major < 0.0);
        // (sc, tc) per face: +x, −x, +y, −y, +z, −z.
        let (sc, tc) = [(-z, -y), (z, -y), (x, z), (x, -z), (x, -y), (-x, -y)][face];
        let got = |v: usize| f32::from_bits(w.vgpr[v][l]);
        assert_eq!(got(4), face as f32, "id of {:?}", dirs[l]);
        assert_eq!(got(5).to_bits(), sc.to_bits(), "sc of {:?}", dirs[l]);
        assert_eq!(got(6).to_bits(), tc.to_bits(), "tc of {:?}", dirs[l]);
        assert_eq!(got(7).to_bits(), (2.0 * major).to_bits(), "ma of {:?}", dirs[l]);
    }
}
