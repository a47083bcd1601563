//! Cross-lane forms and the matrix core (docs/executor.md §5 "Lanes"): DPP, SDWA and MFMA
//! instructions assembled by `llvm-mc-15` at test time, run on one wave with random lanes and
//! EXEC masks, and checked against values computed here from the ISA's definitions (lane maps,
//! field selects, a host matrix product over the documented register layouts).

#![allow(clippy::needless_range_loop)]

mod common;

use common::rnd;

use aqueduct_isa::exec::{run_wave, Code, ExecErrorKind, Limits, VecMemory, Wave};
use aqueduct_isa::Target;

const BASE: u64 = 0x1_0000_0000;

fn wave() -> Wave {
    let mut w = Wave::new(64, 64);
    w.exec = u64::MAX;
    w.mode = 0xF0;
    w
}

fn run_words(words: &[u32], w: &mut Wave) -> Result<(), aqueduct_isa::exec::ExecError> {
    let mut all = words.to_vec();
    all.extend(common::assemble("s_endpgm"));
    let code = Code::decode(BASE, &all);
    w.pc = 0;
    let mem = VecMemory::new(BASE, 0);
    let mut lds = vec![0u8; 64];
    run_wave(&code, w, &mem, &mut lds, &Limits { wave_instructions: 1000 })
}

fn run(asm: &str, w: &mut Wave) {
    run_words(&common::assemble(asm), w).unwrap_or_else(|e| panic!("{asm}: {e}"));
}

/// `asm` assembled and decoded for `target`, run on `w`.
fn run_for(target: Target, asm: &str, w: &mut Wave) {
    let mut words = common::assemble_for(target, asm);
    words.extend(common::assemble_for(target, "s_endpgm"));
    let code = Code::decode_for(target, BASE, &words);
    assert!(code.unimplemented().is_empty(), "{asm}: {:?}", code.unimplemented());
    w.pc = 0;
    let mem = VecMemory::new(BASE, 0);
    let mut lds = vec![0u8; 64];
    run_wave(&code, w, &mem, &mut lds, &Limits { wave_instructions: 1000 }).unwrap_or_else(|e| panic!("{asm}: {e}"));
}

// ---------------------------------------------------------------------------------------------
// DPP

#[derive(Clone, Copy, Debug)]
enum Ctrl {
    Quad([usize; 4]),
    RowShl(usize),
    RowShr(usize),
    RowRor(usize),
    WaveShl,
    WaveRol,
    WaveShr,
    WaveRor,
    Mirror,
    HalfMirror,
    Bcast15,
    Bcast31,
    NewBcast(usize),
}

impl Ctrl {
    fn asm(self) -> String {
        match self {
            Ctrl::Quad(q) => format!("quad_perm:[{},{},{},{}]", q[0], q[1], q[2], q[3]),
            Ctrl::RowShl(n) => format!("row_shl:{n}"),
            Ctrl::RowShr(n) => format!("row_shr:{n}"),
            Ctrl::RowRor(n) => format!("row_ror:{n}"),
            Ctrl::WaveShl => "wave_shl:1".into(),
            Ctrl::WaveRol => "wave_rol:1".into(),
            Ctrl::WaveShr => "wave_shr:1".into(),
            Ctrl::WaveRor => "wave_ror:1".into(),
            Ctrl::Mirror => "row_mirror".into(),
            Ctrl::HalfMirror => "row_half_mirror".into(),
            Ctrl::Bcast15 => "row_bcast:15".into(),
            Ctrl::Bcast31 => "row_bcast:31".into(),
            Ctrl::NewBcast(n) => format!("row_newbcast:{n}"),
        }
    }

    /// The source lane of `lane` (None: out of range), from the ISA's descriptions: rows of 16
    /// lanes, shifts move data towards higher lanes for `shr`/`ror`, lower for `shl`/`rol`.
    fn source(self, lane: usize) -> Option<usize> {
        let (row, i) = (lane / 16, lane % 16);
        let within = |j: i64| (0..16).contains(&j).then(|| row * 16 + j as usize);
        match self {
            Ctrl::Quad(q) => Some(lane - lane % 4 + q[lane % 4]),
            Ctrl::RowShl(n) => within(i as i64 + n as i64),
            Ctrl::RowShr(n) => within(i as i64 - n as i64),
            Ctrl::RowRor(n) => Some(row * 16 + (i as i64 - n as i64).rem_euclid(16) as usize),
            Ctrl::WaveShl => (lane + 1 < 64).then_some(lane + 1),
            Ctrl::WaveRol => Some((lane + 1) % 64),
            Ctrl::WaveShr => (lane >= 1).then(|| lane - 1),
            Ctrl::WaveRor => Some((lane + 63) % 64),
            Ctrl::Mirror => Some(row * 16 + 15 - i),
            Ctrl::HalfMirror => Some(lane / 8 * 8 + 7 - lane % 8),
            Ctrl::Bcast15 => (row >= 1).then(|| row * 16 - 1),
            Ctrl::Bcast31 => (row >= 2).then_some(31),
            Ctrl::NewBcast(n) => Some(row * 16 + n),
        }
    }
}

fn all_ctrls(r: &mut impl FnMut() -> u32) -> Vec<Ctrl> {
    let mut v = Vec::new();
    for _ in 0..4 {
        v.push(Ctrl::Quad([0, 1, 2, 3].map(|_| (r() % 4) as usize)));
    }
    for n in 1..16 {
        v.extend([Ctrl::RowShl(n), Ctrl::RowShr(n), Ctrl::RowRor(n)]);
    }
    v.extend([
        Ctrl::WaveShl,
        Ctrl::WaveRol,
        Ctrl::WaveShr,
        Ctrl::WaveRor,
        Ctrl::Mirror,
        Ctrl::HalfMirror,
        Ctrl::Bcast15,
        Ctrl::Bcast31,
    ]);
    for n in [0, 5, 15] {
        v.push(Ctrl::NewBcast(n));
    }
    v
}

/// The expected destination of a DPP op `f(src0 permuted, src1)` under the masks and EXEC.
#[allow(clippy::too_many_arguments)]
fn dpp_expect(
    ctrl: Ctrl,
    row_mask: u32,
    bank_mask: u32,
    bound: bool,
    exec: u64,
    s0: &[u32; 64],
    s1: &[u32; 64],
    old: &[u32; 64],
    f: impl Fn(u32, u32) -> u32,
) -> [u32; 64] {
    core::array::from_fn(|l| {
        let on = exec >> l & 1 == 1 && row_mask >> (l / 16) & 1 == 1 && bank_mask >> (l % 16 / 4) & 1 == 1;
        if !on {
            return old[l];
        }
        match ctrl.source(l) {
            Some(s) if exec >> s & 1 == 1 => f(s0[s], s1[l]),
            _ if bound => f(0, s1[l]),
            _ => old[l],
        }
    })
}

/// Every DPP control on `v_add_u32` and `v_mov_b32`, with random row/bank masks, bound_ctrl
/// and EXEC: inactive or invalid sources read 0 with bound_ctrl, else the lane keeps its value.
#[test]
fn dpp_controls_masks_and_bound_ctrl() {
    let mut r = rnd(0xD1);
    for ctrl in all_ctrls(&mut r) {
        for round in 0..2 {
            let (row_mask, bank_mask) = if round == 0 { (0xF, 0xF) } else { (r() % 16, r() % 16) };
            let bound = r() % 2 == 0;
            let exec = if round == 0 { u64::MAX } else { u64::from(r()) | u64::from(r()) << 32 };
            let b = if bound { " bound_ctrl:0" } else { "" };
            let mods = format!("{} row_mask:{row_mask:#x} bank_mask:{bank_mask:#x}{b}", ctrl.asm());
            let mut w = wave();
            let (s0, s1, old): ([u32; 64], [u32; 64], [u32; 64]) =
                (core::array::from_fn(|_| r()), core::array::from_fn(|_| r()), core::array::from_fn(|_| r()));
            w.vgpr[2] = s0;
            w.vgpr[3] = s1;
            w.vgpr[1] = old;
            w.vgpr[4] = old;
            w.exec = exec;
            run(&format!("v_add_u32_dpp v1, v2, v3 {mods}\nv_mov_b32_dpp v4, v2 {mods}"), &mut w);
            let want = dpp_expect(ctrl, row_mask, bank_mask, bound, exec, &s0, &s1, &old, u32::wrapping_add);
            assert_eq!(w.vgpr[1], want, "v_add_u32_dpp {mods} exec {exec:#x}");
            let want = dpp_expect(ctrl, row_mask, bank_mask, bound, exec, &s0, &s1, &old, |a, _| a);
            assert_eq!(w.vgpr[4], want, "v_mov_b32_dpp {mods} exec {exec:#x}");
            assert_eq!(w.exec, exec, "EXEC restored");
        }
    }
}

/// A reduction step reads its own register twice: only source 0 is permuted; float sources
/// take neg/abs after the permutation; a 64-bit source takes row_newbcast.
#[test]
fn dpp_permutes_only_source_0_and_keeps_the_base_semantics() {
    let mut r = rnd(0xD2);
    let mut w = wave();
    let v: [u32; 64] = core::array::from_fn(|_| r() % 1000);
    w.vgpr[1] = v;
    run("v_add_u32_dpp v1, v1, v1 row_shr:1 row_mask:0xf bank_mask:0xf bound_ctrl:0", &mut w);
    let want: [u32; 64] = core::array::from_fn(|l| v[l] + if l % 16 >= 1 { v[l - 1] } else { 0 });
    assert_eq!(w.vgpr[1], want);

    let a: [f32; 64] = core::array::from_fn(|_| (r() % 2001) as f32 / 8.0 - 125.0);
    let b: [f32; 64] = core::array::from_fn(|_| (r() % 2001) as f32 / 4.0 - 250.0);
    w.vgpr[2] = a.map(f32::to_bits);
    w.vgpr[3] = b.map(f32::to_bits);
    run("v_add_f32_dpp v5, -v2, |v3| quad_perm:[3,2,1,0] row_mask:0xf bank_mask:0xf", &mut w);
    for l in 0..64 {
        let want = -a[l - l % 4 + 3 - l % 4] + b[l].abs();
        assert_eq!(f32::from_bits(w.vgpr[5][l]), want, "lane {l}");
    }

    let d: [f64; 64] = core::array::from_fn(|_| (r() % 100_000) as f64 / 16.0);
    w.vgpr[6] = d.map(|x| x.to_bits() as u32);
    w.vgpr[7] = d.map(|x| (x.to_bits() >> 32) as u32);
    run("v_cvt_f32_f64_dpp v8, v[6:7] row_newbcast:5 row_mask:0xf bank_mask:0xf", &mut w);
    for l in 0..64 {
        assert_eq!(f32::from_bits(w.vgpr[8][l]), d[l / 16 * 16 + 5] as f32, "lane {l}");
    }
}

/// VOPC has no DPP form on gfx90a (llvm-mc-15 rejects `v_cmp_*_dpp`; the decoder's table has
/// none): the DPP dword spliced into a compare's `_e32` encoding ends the dispatch.
#[test]
fn dpp_on_a_compare_is_not_a_gfx90a_form() {
    let e32 = common::assemble("v_cmp_lt_u32_e32 vcc, v2, v3");
    let dpp_dword = 2 | 0x111 << 8 | 0xF << 24 | 0xF << 28; // src0 v2, row_shr:1
    let words = [(e32[0] & !0x1FF) | 0xFA, dpp_dword];
    let mut w = wave();
    w.vcc = 0x1234;
    let e = run_words(&words, &mut w).unwrap_err();
    assert!(matches!(e.kind, ExecErrorKind::Illegal(_)), "{e}");
    assert_eq!(e.pc, BASE, "{e}");
    assert_eq!(w.vcc, 0x1234, "nothing written");
}

/// A dpp_ctrl gfx90a does not define ends the dispatch naming the instruction.
#[test]
fn dpp_undefined_control_is_an_error() {
    let e32 = common::assemble("v_mov_b32_e32 v1, v2");
    for ctrl in [0x100u32, 0x110, 0x144, 0x160, 0x1FF] {
        let words = [(e32[0] & !0x1FF) | 0xFA, 2 | ctrl << 8 | 0xFF << 24];
        let mut w = wave();
        if let Err(e) = run_words(&words, &mut w) {
            assert!(matches!(e.kind, ExecErrorKind::Unimplemented | ExecErrorKind::Illegal(_)), "ctrl {ctrl:#x}: {e}");
        } else {
            panic!("ctrl {ctrl:#x} ran");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// SDWA

const SELS: [&str; 7] = ["BYTE_0", "BYTE_1", "BYTE_2", "BYTE_3", "WORD_0", "WORD_1", "DWORD"];
const UNUSED: [&str; 3] = ["UNUSED_PAD", "UNUSED_SEXT", "UNUSED_PRESERVE"];

/// (offset, width) of a select.
fn sel_bits(sel: usize) -> (u32, u32) {
    match sel {
        0..=3 => (8 * sel as u32, 8),
        4 | 5 => (16 * (sel as u32 - 4), 16),
        _ => (0, 32),
    }
}

fn extract(v: u32, sel: usize, sext: bool) -> u32 {
    let (off, width) = sel_bits(sel);
    let x = if width == 32 { v } else { (v >> off) & ((1 << width) - 1) };
    if sext && width < 32 && x >> (width - 1) & 1 == 1 {
        x | (u32::MAX << width)
    } else {
        x
    }
}

fn insert(old: u32, r: u32, sel: usize, unused: usize) -> u32 {
    let (off, width) = sel_bits(sel);
    if width == 32 {
        return r;
    }
    let low = r & ((1 << width) - 1);
    let fieldv = low << off;
    let mask = ((1u32 << width) - 1) << off;
    match unused {
        0 => fieldv,
        1 => {
            if low >> (width - 1) & 1 == 1 && off + width < 32 {
                fieldv | (u32::MAX << (off + width))
            } else {
                fieldv
            }
        }
        _ => (old & !mask) | fieldv,
    }
}

/// Integer SDWA: every source select with and without sext, every destination select and
/// unused mode, on `v_add_u32`, `v_and_b32`, `v_mov_b32` (from an SGPR too), with EXEC.
#[test]
fn sdwa_selects_sext_and_destination_modes() {
    let mut r = rnd(0x5D);
    for case in 0..60 {
        let (s0, s1, ds) = ((r() % 7) as usize, (r() % 7) as usize, (r() % 7) as usize);
        let un = (r() % 3) as usize;
        let (x0, x1) = (s0 != 6 && r() % 2 == 0, s1 != 6 && r() % 2 == 0);
        let op = ["v_add_u32", "v_and_b32", "v_mov_b32"][case % 3];
        let a0 = if x0 { "sext(v2)" } else { "v2" };
        let a1 = if x1 { "sext(v3)" } else { "v3" };
        let (asm, src1) = if op == "v_mov_b32" {
            (format!("{op}_sdwa v1, {a0} dst_sel:{} dst_unused:{} src0_sel:{}", SELS[ds], UNUSED[un], SELS[s0]), false)
        } else {
            (
                format!(
                    "{op}_sdwa v1, {a0}, {a1} dst_sel:{} dst_unused:{} src0_sel:{} src1_sel:{}",
                    SELS[ds], UNUSED[un], SELS[s0], SELS[s1]
                ),
                true,
            )
        };
        let mut w = wave();
        let (a, b, old): ([u32; 64], [u32; 64], [u32; 64]) =
            (core::array::from_fn(|_| r()), core::array::from_fn(|_| r()), core::array::from_fn(|_| r()));
        w.vgpr[2] = a;
        w.vgpr[3] = b;
        w.vgpr[1] = old;
        let exec = u64::from(r()) | u64::from(r()) << 32;
        w.exec = exec;
        run(&asm, &mut w);
        for l in 0..64 {
            let want = if exec >> l & 1 == 0 {
                old[l]
            } else {
                let p = extract(a[l], s0, x0);
                let q = if src1 { extract(b[l], s1, x1) } else { 0 };
                let res = match op {
                    "v_add_u32" => p.wrapping_add(q),
                    "v_and_b32" => p & q,
                    _ => p,
                };
                insert(old[l], res, ds, un)
            };
            assert_eq!(w.vgpr[1][l], want, "{asm} lane {l}");
        }
    }
    // An SGPR source.
    let mut w = wave();
    w.sgpr[2] = 0xA1B2_C3D4;
    w.vgpr[1] = [0x1111_1111; 64];
    run("v_mov_b32_sdwa v1, s2 dst_sel:BYTE_2 dst_unused:UNUSED_PRESERVE src0_sel:BYTE_3", &mut w);
    assert_eq!(w.vgpr[1], [0x11A1_1111; 64]);
}

/// Float SDWA: the selected field is the operand, neg/abs and clamp apply as in the base op;
/// a compare with SDWA writes its SGPR pair.
#[test]
fn sdwa_float_modifiers_and_compares() {
    let mut r = rnd(0x5E);
    let mut w = wave();
    let a: [f32; 64] = core::array::from_fn(|_| (r() % 4001) as f32 / 1000.0 - 2.0);
    let b: [f32; 64] = core::array::from_fn(|_| (r() % 4001) as f32 / 1000.0 - 2.0);
    w.vgpr[2] = a.map(f32::to_bits);
    w.vgpr[3] = b.map(f32::to_bits);
    run("v_add_f32_sdwa v1, -v2, |v3| clamp dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:DWORD src1_sel:DWORD", &mut w);
    for l in 0..64 {
        let want = (-a[l] + b[l].abs()).clamp(0.0, 1.0);
        assert_eq!(f32::from_bits(w.vgpr[1][l]), want, "lane {l}");
    }
    let (x, y): ([u32; 64], [u32; 64]) = (core::array::from_fn(|_| r()), core::array::from_fn(|_| r()));
    w.vgpr[4] = x;
    w.vgpr[5] = y;
    let exec = u64::from(r()) | u64::from(r()) << 32;
    w.exec = exec;
    run("v_cmp_eq_u32_sdwa s[6:7], v4, v5 src0_sel:BYTE_0 src1_sel:BYTE_3", &mut w);
    let mut want = 0u64;
    for l in 0..64 {
        if exec >> l & 1 == 1 && x[l] & 0xFF == y[l] >> 24 {
            want |= 1 << l;
        }
    }
    assert_eq!(u64::from(w.sgpr[6]) | u64::from(w.sgpr[7]) << 32, want);
    // The low byte equal in some lanes, so both outcomes occur.
    w.vgpr[5] = core::array::from_fn(|l| if l % 2 == 0 { x[l] << 24 } else { y[l] });
    w.exec = u64::MAX;
    run("v_cmp_eq_u32_sdwa vcc, v4, v5 src0_sel:BYTE_0 src1_sel:BYTE_3", &mut w);
    for l in (0..64).step_by(2) {
        assert_eq!(w.vcc >> l & 1, 1, "lane {l}");
    }
}

// ---------------------------------------------------------------------------------------------
// MFMA

#[derive(Clone, Copy, PartialEq, Debug)]
enum T {
    F32,
    F16,
    Bf16,
    I8,
    F64,
    /// gfx940's FNUZ 8-bit floats: E4M3 bias 8, E5M2 bias 16.
    Fp8,
    Bf8,
    /// gfx940's xf32: f32 bits, read truncated toward zero to 10 mantissa bits.
    Xf32,
}

struct Mfma {
    name: &'static str,
    m: usize,
    k: usize,
    blocks: usize,
    /// A's element type (and B's, but for the mixed fp8/bf8 shapes).
    t: T,
    tb: T,
}

const fn mf(name: &'static str, m: usize, k: usize, blocks: usize, t: T) -> Mfma {
    Mfma { name, m, k, blocks, t, tb: t }
}

const fn mf8(name: &'static str, m: usize, k: usize, t: T, tb: T) -> Mfma {
    Mfma { name, m, k, blocks: 1, t, tb }
}

/// gfx940's own matrix instructions (docs/executor.md §8), and three it shares with gfx90a
/// (under the gfx908 spellings llvm-mc-15 accepts for gfx940 too).
const MFMAS_GFX940: [Mfma; 22] = [
    mf("v_mfma_f32_32x32x4_2b_bf16", 32, 4, 2, T::Bf16),
    mf("v_mfma_f32_16x16x4_4b_bf16", 16, 4, 4, T::Bf16),
    mf("v_mfma_f32_4x4x4_16b_bf16", 4, 4, 16, T::Bf16),
    mf("v_mfma_f32_32x32x8_bf16", 32, 8, 1, T::Bf16),
    mf("v_mfma_f32_16x16x16_bf16", 16, 16, 1, T::Bf16),
    mf("v_mfma_f64_16x16x4_f64", 16, 4, 1, T::F64),
    mf("v_mfma_f64_4x4x4_4b_f64", 4, 4, 4, T::F64),
    mf("v_mfma_i32_32x32x16_i8", 32, 16, 1, T::I8),
    mf("v_mfma_i32_16x16x32_i8", 16, 32, 1, T::I8),
    mf("v_mfma_f32_16x16x4f32", 16, 4, 1, T::F32),
    mf("v_mfma_f32_32x32x8f16", 32, 8, 1, T::F16),
    mf("v_mfma_i32_4x4x4i8", 4, 4, 16, T::I8),
    mf8("v_mfma_f32_16x16x32_fp8_fp8", 16, 32, T::Fp8, T::Fp8),
    mf8("v_mfma_f32_16x16x32_fp8_bf8", 16, 32, T::Fp8, T::Bf8),
    mf8("v_mfma_f32_16x16x32_bf8_fp8", 16, 32, T::Bf8, T::Fp8),
    mf8("v_mfma_f32_16x16x32_bf8_bf8", 16, 32, T::Bf8, T::Bf8),
    mf8("v_mfma_f32_32x32x16_fp8_fp8", 32, 16, T::Fp8, T::Fp8),
    mf8("v_mfma_f32_32x32x16_fp8_bf8", 32, 16, T::Fp8, T::Bf8),
    mf8("v_mfma_f32_32x32x16_bf8_fp8", 32, 16, T::Bf8, T::Fp8),
    mf8("v_mfma_f32_32x32x16_bf8_bf8", 32, 16, T::Bf8, T::Bf8),
    mf("v_mfma_f32_16x16x8_xf32", 16, 8, 1, T::Xf32),
    mf("v_mfma_f32_32x32x4_xf32", 32, 4, 1, T::Xf32),
];

const MFMAS: [Mfma; 27] = [
    mf("v_mfma_f32_32x32x1f32", 32, 1, 2, T::F32),
    mf("v_mfma_f32_16x16x1f32", 16, 1, 4, T::F32),
    mf("v_mfma_f32_4x4x1f32", 4, 1, 16, T::F32),
    mf("v_mfma_f32_32x32x2f32", 32, 2, 1, T::F32),
    mf("v_mfma_f32_16x16x4f32", 16, 4, 1, T::F32),
    mf("v_mfma_f32_32x32x4f16", 32, 4, 2, T::F16),
    mf("v_mfma_f32_16x16x4f16", 16, 4, 4, T::F16),
    mf("v_mfma_f32_4x4x4f16", 4, 4, 16, T::F16),
    mf("v_mfma_f32_32x32x8f16", 32, 8, 1, T::F16),
    mf("v_mfma_f32_16x16x16f16", 16, 16, 1, T::F16),
    mf("v_mfma_i32_32x32x4i8", 32, 4, 2, T::I8),
    mf("v_mfma_i32_16x16x4i8", 16, 4, 4, T::I8),
    mf("v_mfma_i32_4x4x4i8", 4, 4, 16, T::I8),
    mf("v_mfma_i32_32x32x8i8", 32, 8, 1, T::I8),
    mf("v_mfma_i32_16x16x16i8", 16, 16, 1, T::I8),
    mf("v_mfma_f32_32x32x2bf16", 32, 2, 2, T::Bf16),
    mf("v_mfma_f32_16x16x2bf16", 16, 2, 4, T::Bf16),
    mf("v_mfma_f32_4x4x2bf16", 4, 2, 16, T::Bf16),
    mf("v_mfma_f32_32x32x4bf16", 32, 4, 1, T::Bf16),
    mf("v_mfma_f32_16x16x8bf16", 16, 8, 1, T::Bf16),
    mf("v_mfma_f32_32x32x4bf16_1k", 32, 4, 2, T::Bf16),
    mf("v_mfma_f32_16x16x4bf16_1k", 16, 4, 4, T::Bf16),
    mf("v_mfma_f32_4x4x4bf16_1k", 4, 4, 16, T::Bf16),
    mf("v_mfma_f32_32x32x8bf16_1k", 32, 8, 1, T::Bf16),
    mf("v_mfma_f32_16x16x16bf16_1k", 16, 16, 1, T::Bf16),
    mf("v_mfma_f64_16x16x4f64", 16, 4, 1, T::F64),
    mf("v_mfma_f64_4x4x4f64", 4, 4, 4, T::F64),
];

impl Mfma {
    fn bits(&self) -> usize {
        match self.t {
            T::F32 | T::Xf32 => 32,
            T::F16 | T::Bf16 => 16,
            T::I8 | T::Fp8 | T::Bf8 => 8,
            T::F64 => 64,
        }
    }
    /// Elements of k one lane holds: the lanes hold M × blocks rows, k-groups repeat them.
    fn per_lane(&self) -> usize {
        self.k * self.m * self.blocks / 64
    }
    fn in_regs(&self) -> usize {
        (self.per_lane() * self.bits()).div_ceil(32)
    }
    fn out_regs(&self) -> usize {
        self.m * self.m * self.blocks * if self.t == T::F64 { 2 } else { 1 } / 64
    }
    /// A[b][i][k] (or B[b][k][j] with i = j): lane and element index within the lane.
    fn input_at(&self, b: usize, i: usize, k: usize) -> (usize, usize) {
        let pl = self.per_lane();
        (i + self.m * b + self.m * self.blocks * (k / pl), k % pl)
    }
    /// D[b][i][j]: (register in output elements, lane), per the CDNA2 layouts.
    fn output_at(&self, b: usize, i: usize, j: usize) -> (usize, usize) {
        match (self.t, self.m) {
            (T::F64, 16) => (i / 4, j + 16 * (i % 4)),
            (T::F64, _) => (0, j + 4 * b + 16 * i),
            (_, 32) => (16 * b + 4 * (i / 8) + i % 4, j + 32 * ((i / 4) % 2)),
            (_, 16) => (4 * b + i % 4, j + 16 * (i / 4)),
            _ => (i, j + 4 * b),
        }
    }
}

/// A small integer as f16 bits (exact for |x| ≤ 2048).
fn f16_of(x: i32) -> u16 {
    if x == 0 {
        return 0;
    }
    let s = if x < 0 { 0x8000 } else { 0 };
    let a = x.unsigned_abs();
    let e = 31 - a.leading_zeros(); // a in [2^e, 2^(e+1))
    let man = (a << (10 - e)) & 0x3FF;
    s | ((e + 15) as u16) << 10 | man as u16
}

/// The value of element `code` (a small integer, or any i8) of type t, as f64.
fn value_of(t: T, raw: u64) -> f64 {
    match t {
        T::F32 => f64::from(f32::from_bits(raw as u32)),
        // The sign, the exponent and the top 10 mantissa bits (never a NaN here).
        T::Xf32 => f64::from(f32::from_bits(raw as u32 & 0xFFFF_E000)),
        T::F64 => f64::from_bits(raw),
        T::Bf16 => f64::from(f32::from_bits((raw as u32) << 16)),
        T::I8 => f64::from(raw as u8 as i8),
        // From the formats' definition; 0x80 (the NaN) is never generated.
        T::Fp8 | T::Bf8 => {
            let (mb, bias) = if t == T::Fp8 { (3, 8) } else { (2, 16) };
            let b = raw as u8;
            let e = i32::from(b & 0x7F) >> mb;
            let m = f64::from(b & ((1 << mb) - 1)) / f64::from(1 << mb);
            let v = if e == 0 { m * 2f64.powi(1 - bias) } else { (1.0 + m) * 2f64.powi(e - bias) };
            if b & 0x80 != 0 {
                -v
            } else {
                v
            }
        }
        T::F16 => {
            let h = raw as u16;
            let e = i32::from(h >> 10 & 0x1F);
            let m = f64::from(h & 0x3FF);
            let v = if e == 0 { m * 2f64.powi(-24) } else { (1.0 + m / 1024.0) * 2f64.powi(e - 15) };
            if h >> 15 == 1 {
                -v
            } else {
                v
            }
        }
    }
}

fn encode(t: T, x: i32) -> u64 {
    match t {
        T::F32 => u64::from((x as f32).to_bits()),
        // Small integers with low mantissa bits set that the product must not see.
        T::Xf32 => u64::from((x as f32).to_bits() | if x == 0 { 0 } else { (x as u32).wrapping_mul(0x9E5) & 0x1FFF }),
        T::F64 => (x as f64).to_bits(),
        T::Bf16 => u64::from((x as f32).to_bits() >> 16),
        T::I8 => u64::from(x as i8 as u8),
        T::Fp8 | T::Bf8 => u64::from(x as u8),
        T::F16 => u64::from(f16_of(x)),
    }
}

/// Runs `s` on random A, B, C (VGPR or AGPR destination and C, C a constant 0 once) and
/// compares with the host product, for cbsz/abid/blgp.
fn check_mfma(s: &Mfma, seed: u32, acc: bool, c_zero: bool, cbsz: u32, abid: u32, blgp: u32) {
    check_mfma_on(Target::Gfx90a, s, seed, acc, c_zero, cbsz, abid, blgp)
}

#[allow(clippy::too_many_arguments)]
fn check_mfma_on(target: Target, s: &Mfma, seed: u32, acc: bool, c_zero: bool, cbsz: u32, abid: u32, blgp: u32) {
    let mut r = rnd(seed);
    let bits = s.bits();
    let pl = s.per_lane();
    let (ri, ro) = (s.in_regs(), s.out_regs());
    // A in v[0..], B in v[8..], C and D at v[16..] or a[0..].
    let mut a = vec![vec![vec![0u64; s.k]; s.m]; s.blocks];
    let mut bm = vec![vec![vec![0u64; s.k]; s.m]; s.blocks];
    let mut w = wave();
    let small = |r: &mut dyn FnMut() -> u32| -> i32 {
        if s.t == T::I8 {
            r() as u8 as i8 as i32
        } else if matches!(s.t, T::Fp8 | T::Bf8) {
            // Any code but the NaN.
            match r() as u8 {
                0x80 => 0,
                c => i32::from(c),
            }
        } else {
            (r() % 17) as i32 - 8
        }
    };
    let put = |w: &mut Wave, base: usize, lane: usize, idx: usize, v: u64| {
        let bit = idx * bits;
        let mut packed = 0u64;
        for k in 0..ri {
            packed |= u64::from(w.vgpr[base + k][lane]) << (32 * k);
        }
        let mask = if bits == 64 { u64::MAX } else { ((1u64 << bits) - 1) << bit };
        packed = (packed & !mask) | (v << bit) & mask;
        for k in 0..ri {
            w.vgpr[base + k][lane] = (packed >> (32 * k)) as u32;
        }
    };
    for b in 0..s.blocks {
        for i in 0..s.m {
            for k in 0..s.k {
                let (x, y) = (encode(s.t, small(&mut r)), encode(s.tb, small(&mut r)));
                a[b][i][k] = x;
                bm[b][i][k] = y;
                let (lane, idx) = s.input_at(b, i, k);
                assert!(idx < pl);
                put(&mut w, 0, lane, idx, x);
                put(&mut w, 8, lane, idx, y);
            }
        }
    }
    // B as registers hold it: the value at each lane, for the BLGP patterns.
    let b_reg: Vec<Vec<u32>> = (0..ri).map(|k| w.vgpr[8 + k].to_vec()).collect();
    let c: Vec<[u32; 64]> = (0..ro)
        .map(|_| {
            core::array::from_fn(|_| {
                if c_zero {
                    0
                } else {
                    match s.t {
                        T::I8 => r(),
                        T::F64 => r() % 2, // bit patterns combine into f64 pairs below
                        _ => ((r() % 33) as f32 - 16.0).to_bits(),
                    }
                }
            })
        })
        .collect();
    let mut c = c;
    if s.t == T::F64 && !c_zero {
        for reg in 0..ro / 2 {
            for l in 0..64 {
                let v = ((r() % 33) as f64 - 16.0).to_bits();
                c[2 * reg][l] = v as u32;
                c[2 * reg + 1][l] = (v >> 32) as u32;
            }
        }
    }
    for (k, v) in c.iter().enumerate() {
        if acc {
            w.agpr[k] = *v;
        } else {
            w.vgpr[16 + k] = *v;
        }
    }
    let reg = |base: &str, at: usize, n: usize| {
        if n == 1 {
            format!("{base}{at}")
        } else {
            format!("{base}[{at}:{}]", at + n - 1)
        }
    };
    let d = if acc { reg("a", 0, ro) } else { reg("v", 16, ro) };
    let cs = if c_zero { "0".to_string() } else { d.clone() };
    let mods = match (cbsz, abid, blgp) {
        (0, 0, 0) => String::new(),
        _ => format!(" cbsz:{cbsz} abid:{abid} blgp:{blgp}"),
    };
    let asm = format!("{} {d}, {}, {}, {cs}{mods}", s.name, reg("v", 0, ri), reg("v", 8, ri));
    run_for(target, &asm, &mut w);
    // B's value for (block, k, j) after BLGP: the lane the pattern maps its lane to.
    let blgp_lane = |lane: usize| -> usize {
        match blgp {
            1 => lane % 32,
            2 => lane % 32 + 32,
            3 => (lane + 16) % 64,
            4 => lane % 16,
            5 => lane % 16 + 16,
            6 => lane % 16 + 32,
            7 => lane % 16 + 48,
            _ => lane,
        }
    };
    let b_at = |b: usize, k: usize, j: usize| -> u64 {
        let (lane, idx) = s.input_at(b, j, k);
        let l = blgp_lane(lane);
        let mut packed = 0u64;
        for q in 0..ri {
            packed |= u64::from(b_reg[q][l]) << (32 * q);
        }
        if bits == 64 {
            packed
        } else {
            (packed >> (idx * bits)) & ((1 << bits) - 1)
        }
    };
    let group = 1usize << cbsz;
    for blk in 0..s.blocks {
        let ablk = blk / group * group + abid as usize;
        for i in 0..s.m {
            for j in 0..s.m {
                let (oreg, lane) = s.output_at(blk, i, j);
                let get = |regs: &dyn Fn(usize) -> u32, q: usize| regs(q);
                let out = |q: usize| if acc { w.agpr[q][lane] } else { w.vgpr[16 + q][lane] };
                match s.t {
                    T::I8 => {
                        let mut sum = c[oreg][lane] as i32;
                        for k in 0..s.k {
                            let p = value_of(T::I8, a[ablk][i][k]) as i32 * value_of(T::I8, b_at(blk, k, j)) as i32;
                            sum = sum.wrapping_add(p);
                        }
                        assert_eq!(get(&out, oreg) as i32, sum, "{asm}: D[{blk}][{i}][{j}]");
                    }
                    T::F64 => {
                        let cv = f64::from_bits(u64::from(c[2 * oreg][lane]) | u64::from(c[2 * oreg + 1][lane]) << 32);
                        let mut sum = cv;
                        for k in 0..s.k {
                            sum += value_of(T::F64, a[ablk][i][k]) * value_of(T::F64, b_at(blk, k, j));
                        }
                        let got = f64::from_bits(u64::from(out(2 * oreg)) | u64::from(out(2 * oreg + 1)) << 32);
                        assert_eq!(got, sum, "{asm}: D[{blk}][{i}][{j}]");
                    }
                    t => {
                        let mut sum = f64::from(f32::from_bits(c[oreg][lane]));
                        for k in 0..s.k {
                            sum += value_of(t, a[ablk][i][k]) * value_of(s.tb, b_at(blk, k, j));
                        }
                        assert_eq!(f32::from_bits(out(oreg)), sum as f32, "{asm}: D[{blk}][{i}][{j}]");
                    }
                }
            }
        }
    }
}

/// Every gfx90a matrix instruction against a host product of random (exactly representable)
/// matrices, with VGPR and AGPR destinations and C, and C the constant 0.
#[test]
fn mfma_matches_a_host_matrix_product() {
    for (n, s) in MFMAS.iter().enumerate() {
        let seed = 0x3F00 + n as u32;
        check_mfma(s, seed, true, false, 0, 0, 0);
        check_mfma(s, seed + 100, false, false, 0, 0, 0);
        check_mfma(s, seed + 200, false, true, 0, 0, 0);
    }
}

/// gfx940's sparse matrix instructions (docs/executor.md §8 "Sparse matrices").
const SMFMACS: [Mfma; 14] = [
    mf("v_smfmac_f32_16x16x32_f16", 16, 32, 1, T::F16),
    mf("v_smfmac_f32_32x32x16_f16", 32, 16, 1, T::F16),
    mf("v_smfmac_f32_16x16x32_bf16", 16, 32, 1, T::Bf16),
    mf("v_smfmac_f32_32x32x16_bf16", 32, 16, 1, T::Bf16),
    mf("v_smfmac_i32_16x16x64_i8", 16, 64, 1, T::I8),
    mf("v_smfmac_i32_32x32x32_i8", 32, 32, 1, T::I8),
    mf8("v_smfmac_f32_16x16x64_fp8_fp8", 16, 64, T::Fp8, T::Fp8),
    mf8("v_smfmac_f32_16x16x64_fp8_bf8", 16, 64, T::Fp8, T::Bf8),
    mf8("v_smfmac_f32_16x16x64_bf8_fp8", 16, 64, T::Bf8, T::Fp8),
    mf8("v_smfmac_f32_16x16x64_bf8_bf8", 16, 64, T::Bf8, T::Bf8),
    mf8("v_smfmac_f32_32x32x32_fp8_fp8", 32, 32, T::Fp8, T::Fp8),
    mf8("v_smfmac_f32_32x32x32_fp8_bf8", 32, 32, T::Fp8, T::Bf8),
    mf8("v_smfmac_f32_32x32x32_bf8_fp8", 32, 32, T::Bf8, T::Fp8),
    mf8("v_smfmac_f32_32x32x32_bf8_bf8", 32, 32, T::Bf8, T::Bf8),
];

/// A random dense A with two non-zero elements in every group of four k (at two random distinct
/// positions), compressed into registers as AMD's matrix instruction calculator lays sparse A
/// and its index out: lane group q = k / e (e the k one B lane holds) holds rows in lanes q·M + i,
/// the two values of group g of the lane are its compressed elements 2g and 2g + 1, and their
/// positions are bits `[1:0]` and `[3:2]` of index nibble g + abid·(e/4); checked against
/// `C + A × B` on the host for VGPR and AGPR accumulators and every abid.
fn check_smfmac(s: &Mfma, seed: u32, acc: bool, abid: usize) {
    let mut r = rnd(seed);
    let bits = s.bits();
    let groups = 64 / s.m;
    let per_b = s.k / groups;
    let per_a = per_b / 2;
    let random = |r: &mut dyn FnMut() -> u32, t: T| -> u64 {
        match t {
            T::I8 => u64::from(r() as u8),
            T::Fp8 | T::Bf8 => match r() as u8 {
                0x80 => 0x08,
                c => u64::from(c),
            },
            t => encode(t, (r() % 17) as i32 - 8),
        }
    };
    let mut w = wave();
    // A (compressed) in v[0:1], B in v[2:5], the index in v6 (random bits outside the set).
    let mut dense = vec![vec![0u64; s.k]; s.m];
    for l in 0..64 {
        w.vgpr[6][l] = r();
    }
    let set = |w: &mut Wave, base: usize, lane: usize, c: usize, v: u64| {
        let at = bits * c;
        let (reg, sh) = (base + at / 32, at % 32);
        let m = (((1u64 << bits) - 1) << sh) as u32;
        w.vgpr[reg][lane] = (w.vgpr[reg][lane] & !m) | ((v << sh) as u32 & m);
    };
    for i in 0..s.m {
        for q in 0..groups {
            let lane = q * s.m + i;
            for g in 0..per_a / 2 {
                let p0 = (r() % 4) as usize;
                let p1 = (p0 + 1 + (r() % 3) as usize) % 4;
                let nib_at = 4 * (g + abid * per_a / 2);
                w.vgpr[6][lane] = (w.vgpr[6][lane] & !(0xF << nib_at)) | ((p0 | p1 << 2) as u32) << nib_at;
                for (v, p) in [(0, p0), (1, p1)] {
                    let x = random(&mut r, s.t);
                    dense[i][q * per_b + 4 * g + p] = x;
                    set(&mut w, 0, lane, 2 * g + v, x);
                }
            }
        }
    }
    let mut bm = vec![vec![0u64; s.m]; s.k];
    for k in 0..s.k {
        for j in 0..s.m {
            let y = random(&mut r, s.tb);
            bm[k][j] = y;
            set(&mut w, 2, (k / per_b) * s.m + j, k % per_b, y);
        }
    }
    let ro = s.out_regs();
    let c: Vec<[u32; 64]> = (0..ro)
        .map(|_| core::array::from_fn(|_| if s.t == T::I8 { r() } else { ((r() % 33) as f32 - 16.0).to_bits() }))
        .collect();
    for (k, v) in c.iter().enumerate() {
        if acc {
            w.agpr[k] = *v;
        } else {
            w.vgpr[16 + k] = *v;
        }
    }
    let d = if acc { format!("a[0:{}]", ro - 1) } else { format!("v[16:{}]", 16 + ro - 1) };
    let asm = format!("{} {d}, v[0:1], v[2:5], v6 abid:{abid}", s.name);
    run_for(Target::Gfx940, &asm, &mut w);
    for i in 0..s.m {
        for j in 0..s.m {
            let (oreg, lane) = s.output_at(0, i, j);
            let got = if acc { w.agpr[oreg][lane] } else { w.vgpr[16 + oreg][lane] };
            if s.t == T::I8 {
                let sum = (0..s.k).fold(c[oreg][lane] as i32, |t, k| {
                    t.wrapping_add(value_of(T::I8, dense[i][k]) as i32 * value_of(T::I8, bm[k][j]) as i32)
                });
                assert_eq!(got as i32, sum, "{asm}: D[{i}][{j}]");
            } else {
                // Zeros contribute nothing: the sum over the stored elements, in k order.
                let mut sum = f64::from(f32::from_bits(c[oreg][lane]));
                for k in 0..s.k {
                    sum += value_of(s.t, dense[i][k]) * value_of(s.tb, bm[k][j]);
                }
                assert_eq!(f32::from_bits(got), sum as f32, "{asm}: D[{i}][{j}]");
            }
        }
    }
}

#[test]
fn smfmac_matches_a_host_product_of_the_expanded_sparse_matrix() {
    for (n, s) in SMFMACS.iter().enumerate() {
        let sets = if s.bits() == 16 { 4 } else { 2 };
        check_smfmac(s, 0x5A00 + n as u32, true, 0);
        check_smfmac(s, 0x5B00 + n as u32, false, sets - 1);
    }
    // Two values at one position, and cbsz (not honoured): errors naming the instruction.
    let mut w = wave();
    let words = common::assemble_for(Target::Gfx940, "v_smfmac_f32_16x16x32_f16 v[16:19], v[0:1], v[2:5], v6");
    let mut all = words.clone();
    all.extend(common::assemble_for(Target::Gfx940, "s_endpgm"));
    let code = Code::decode_for(Target::Gfx940, BASE, &all);
    let mem = VecMemory::new(BASE, 0);
    let mut lds = vec![0u8; 64];
    w.vgpr[6] = [0x55; 64];
    let e = aqueduct_isa::exec::run_wave(&code, &mut w, &mem, &mut lds, &aqueduct_isa::exec::Limits::default())
        .unwrap_err();
    assert!(matches!(e.kind, ExecErrorKind::Unimplemented) && e.to_string().contains("v_smfmac"), "{e}");
    let all: Vec<u32> =
        common::assemble_for(Target::Gfx940, "v_smfmac_f32_16x16x32_f16 v[16:19], v[0:1], v[2:5], v6 cbsz:1\ns_endpgm");
    let code = Code::decode_for(Target::Gfx940, BASE, &all);
    w.vgpr[6] = [0xE4E4_E4E4; 64];
    w.pc = 0;
    let e = aqueduct_isa::exec::run_wave(&code, &mut w, &mem, &mut lds, &aqueduct_isa::exec::Limits::default())
        .unwrap_err();
    assert!(matches!(e.kind, ExecErrorKind::Unimplemented), "{e}");
}

/// An fp8 NaN (0x80) in A makes its row of D NaN and leaves the others finite; blgp, which the
/// fp8/bf8 shapes do not have, is an error.
#[test]
fn fp8_mfma_propagates_the_nan_and_rejects_blgp() {
    let mut w = wave();
    // A = B = 1.0 (fp8 0x40) everywhere but A[3][5] (lane 3, byte 5) the NaN.
    w.vgpr[0] = [0x4040_4040; 64];
    w.vgpr[1] = [0x4040_4040; 64];
    w.vgpr[1][3] = 0x4040_8040;
    w.vgpr[2] = [0x4040_4040; 64];
    w.vgpr[3] = [0x4040_4040; 64];
    run_for(Target::Gfx940, "v_mfma_f32_16x16x32_fp8_fp8 v[16:19], v[0:1], v[2:3], 0", &mut w);
    let s = mf8("v_mfma_f32_16x16x32_fp8_fp8", 16, 32, T::Fp8, T::Fp8);
    for i in 0..16 {
        for j in 0..16 {
            let (reg, lane) = s.output_at(0, i, j);
            let d = f32::from_bits(w.vgpr[16 + reg][lane]);
            if i == 3 {
                assert!(d.is_nan(), "D[3][{j}] = {d}");
            } else {
                assert_eq!(d, 32.0, "D[{i}][{j}]");
            }
        }
    }
    let mut words =
        common::assemble_for(Target::Gfx940, "v_mfma_f32_16x16x32_fp8_fp8 v[16:19], v[0:1], v[2:3], 0 blgp:1");
    words.extend(common::assemble_for(Target::Gfx940, "s_endpgm"));
    let code = Code::decode_for(Target::Gfx940, BASE, &words);
    let mem = VecMemory::new(BASE, 0);
    let mut lds = vec![0u8; 64];
    w.pc = 0;
    let e = aqueduct_isa::exec::run_wave(&code, &mut w, &mem, &mut lds, &aqueduct_isa::exec::Limits::default())
        .unwrap_err();
    assert!(matches!(e.kind, ExecErrorKind::Unimplemented), "{e}");
}

/// xf32 (docs/executor.md §8 "xf32"): each input loses its 13 low mantissa bits toward zero —
/// positive, negative, subnormal — before an exact product; C is added at full f32 precision; a
/// NaN whose payload lies only in those bits stays a NaN; blgp is refused.
#[test]
fn xf32_mfma_truncates_its_inputs_toward_zero() {
    let mut w = wave();
    // v_mfma_f32_16x16x8_xf32: A[i][k] in lane i + 16·⌊k/2⌋, dword k mod 2; B[k][j] likewise.
    let cases: [(u32, f32); 6] = [
        (0x3F80_1FFF, 1.0),                         // 1 + (2^13 - 1)·2^-23 → 1
        (0x3F80_2001, 1.0 + 2f32.powi(-10)),        // the 10th bit stays, the last is gone
        (0xBF80_1FFF, -1.0),                        // toward zero, not down
        (0x0000_1FFF, 0.0),                         // a subnormal below 2^-136 → 0
        (0x0080_3FFF, f32::from_bits(0x0080_2000)), // a normal near the bottom
        (0x7F80_0001, f32::NAN),                    // a NaN, not an infinity
    ];
    // A = 1 everywhere but A[c][0] (lane c, dword 0) = case c; B[0][c] = 1 (lane c, dword 0)
    // for the cases' columns and every other B element 0, so D[c][c] = xf32(case c) + C and
    // the columns no case reads are C.
    w.vgpr[0] = [1f32.to_bits(); 64];
    w.vgpr[1] = [1f32.to_bits(); 64];
    w.vgpr[2] = [0; 64];
    w.vgpr[3] = [0; 64];
    for (c, (bits, _)) in cases.iter().enumerate() {
        w.vgpr[0][c] = *bits;
        w.vgpr[2][c] = 1f32.to_bits();
    }
    // C = 2^-20 in every element (kept at full precision: not truncated as an input is).
    let cval = 2f32.powi(-20);
    for r in 0..4 {
        w.vgpr[16 + r] = [cval.to_bits(); 64];
    }
    run_for(Target::Gfx940, "v_mfma_f32_16x16x8_xf32 v[16:19], v[0:1], v[2:3], v[16:19]", &mut w);
    let s = mf("v_mfma_f32_16x16x8_xf32", 16, 8, 1, T::Xf32);
    for (c, (_, want)) in cases.iter().enumerate() {
        let (reg, lane) = s.output_at(0, c, c);
        let d = f32::from_bits(w.vgpr[16 + reg][lane]);
        if want.is_nan() {
            assert!(d.is_nan(), "case {c}: {d}");
        } else {
            assert_eq!(d, want + cval, "case {c}");
        }
    }
    // D[i][j] for a column no case reads: 0 + C.
    let (reg, lane) = s.output_at(0, 1, 10);
    assert_eq!(f32::from_bits(w.vgpr[16 + reg][lane]), cval);
    let mut words = common::assemble_for(Target::Gfx940, "v_mfma_f32_16x16x8_xf32 v[16:19], v[0:1], v[2:3], 0 blgp:1");
    words.extend(common::assemble_for(Target::Gfx940, "s_endpgm"));
    let code = Code::decode_for(Target::Gfx940, BASE, &words);
    let mem = VecMemory::new(BASE, 0);
    let mut lds = vec![0u8; 64];
    w.pc = 0;
    let e = aqueduct_isa::exec::run_wave(&code, &mut w, &mem, &mut lds, &aqueduct_isa::exec::Limits::default())
        .unwrap_err();
    assert!(matches!(e.kind, ExecErrorKind::Unimplemented), "{e}");
}

/// cbsz/abid broadcast one block of A to its group; blgp swizzles B's lanes.
#[test]
fn gfx940_mfma_matches_a_host_matrix_product() {
    for (n, s) in MFMAS_GFX940.iter().enumerate() {
        let seed = 900 + n as u32;
        check_mfma_on(Target::Gfx940, s, seed, true, false, 0, 0, 0);
        check_mfma_on(Target::Gfx940, s, seed + 50, false, false, 0, 0, 0);
        check_mfma_on(Target::Gfx940, s, seed + 100, true, true, 0, 0, 0);
        if s.t != T::F64 && s.blocks > 1 {
            check_mfma_on(Target::Gfx940, s, seed + 150, false, false, 1, 1, 2);
        }
    }
}

#[test]
fn mfma_broadcast_and_lane_group_modifiers() {
    let mut r = rnd(0xB1);
    for s in MFMAS.iter().filter(|s| s.t != T::F64) {
        let max_cbsz = s.blocks.trailing_zeros().min(4);
        for _ in 0..2 {
            let cbsz = r() % (max_cbsz + 1);
            let abid = r() % (1 << cbsz);
            let blgp = r() % 8;
            check_mfma(s, r(), r() % 2 == 0, false, cbsz, abid, blgp);
        }
    }
}

/// Real-valued inputs: the result is within the f32 rounding of the exact product.
#[test]
fn mfma_real_inputs_within_rounding() {
    let mut r = rnd(0xF3);
    let mut w = wave();
    let a: [f32; 64] = core::array::from_fn(|_| (r() as f32 / u32::MAX as f32) * 2.0 - 1.0);
    let b: [f32; 64] = core::array::from_fn(|_| (r() as f32 / u32::MAX as f32) * 2.0 - 1.0);
    w.vgpr[0] = a.map(f32::to_bits);
    w.vgpr[1] = b.map(f32::to_bits);
    run("v_mfma_f32_16x16x4f32 v[4:7], v0, v1, 0", &mut w);
    for i in 0..16 {
        for j in 0..16 {
            let want: f64 = (0..4).map(|k| f64::from(a[i + 16 * k]) * f64::from(b[j + 16 * k])).sum();
            let got = f32::from_bits(w.vgpr[4 + i % 4][j + 16 * (i / 4)]);
            assert!(
                (f64::from(got) - want).abs() <= 4.0 * f64::from(f32::EPSILON) * want.abs().max(1e-3),
                "D[{i}][{j}]"
            );
        }
    }
}

/// A partial EXEC is not honoured by the matrix instructions: the dispatch ends naming it.
#[test]
fn mfma_with_partial_exec_is_an_error() {
    let mut w = wave();
    w.exec = u64::MAX >> 1;
    let words = common::assemble("v_mfma_f32_4x4x1f32 a[0:3], v0, v1, a[0:3]");
    let e = run_words(&words, &mut w).unwrap_err();
    assert!(matches!(e.kind, ExecErrorKind::Unimplemented), "{e}");
    assert!(e.to_string().contains("v_mfma_f32_4x4x1f32"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// fast paths of the hot loop (docs/executor.md §6 "speed")

/// `v_fma_f32` takes the f64 sum directly unless it lands on an f32 midpoint: sums a tiny
/// addend pushes just off a midpoint (where f64 rounding lands on it), in the subnormal range,
/// and random ones, against Rust's correctly rounded `f32::mul_add`.
#[test]
fn fma_fast_path_keeps_single_rounding_at_midpoints() {
    let one = 1.0 + 2f32.powi(-12); // squared: 1 + 2^-11 + 2^-24, an f32 midpoint
    let mut cases = vec![
        (one, one, 2f32.powi(-60)),
        (one, one, -(2f32.powi(-60))),
        (-one, one, 2f32.powi(-70)),
        (one * 2f32.powi(-70), one * 2f32.powi(-60), 2f32.powi(-149)),
        (f32::from_bits(0x0080_0001), 0.75, -(2f32.powi(-149))),
        (3.0, f32::from_bits(0x0055_5555), 0.0),
    ];
    let mut r = rnd(0xFA);
    while cases.len() < 64 {
        let x = f32::from_bits(r() & 0xBFFF_FFFF);
        let y = f32::from_bits(r() % 0x3F80_0000);
        let z = f32::from_bits(r() & 0x8FFF_FFFF);
        cases.push((x, y, z));
    }
    let mut w = wave();
    for (l, (a, b, c)) in cases.iter().enumerate() {
        w.vgpr[1][l] = a.to_bits();
        w.vgpr[2][l] = b.to_bits();
        w.vgpr[3][l] = c.to_bits();
    }
    run("v_fma_f32 v4, v1, v2, v3", &mut w);
    for (l, (a, b, c)) in cases.iter().enumerate() {
        let want = a.mul_add(*b, *c);
        assert!(
            w.vgpr[4][l] == want.to_bits() || (want.is_nan() && f32::from_bits(w.vgpr[4][l]).is_nan()),
            "fma({a:e}, {b:e}, {c:e}) lane {l}: {:e} want {want:e}",
            f32::from_bits(w.vgpr[4][l])
        );
    }
}

/// GLOBAL dword loads and stores go through `Memory::gather`/`scatter` in one call: masked
/// lanes, x2/x4 widths and a fault in a middle lane (the lanes before it stored, the address
/// reported) behave as the lane-by-lane path.
#[test]
fn global_gather_and_scatter_follow_exec_and_fault_in_lane_order() {
    let mem = VecMemory::new(BASE, 0x10000);
    {
        let mut m = mem.bytes.borrow_mut();
        for (i, b) in m.iter_mut().enumerate() {
            *b = (i * 7 + 3) as u8;
        }
    }
    let mut r = rnd(0x6A);
    let mut w = wave();
    let exec = u64::from(r()) | u64::from(r()) << 32;
    w.exec = exec;
    let offs: [u32; 64] = core::array::from_fn(|_| (r() % 0x3F00) & !3);
    w.vgpr[1] = offs;
    w.sgpr[2] = BASE as u32;
    w.sgpr[3] = (BASE >> 32) as u32;
    w.vgpr[4] = [0xEEEE_EEEE; 64];
    w.vgpr[5] = [0xEEEE_EEEE; 64];
    w.vgpr[6] = [0xEEEE_EEEE; 64];
    w.vgpr[7] = [0xEEEE_EEEE; 64];
    let words = common::assemble("global_load_dwordx4 v[4:7], v1, s[2:3]");
    let code = Code::decode(BASE, &[words, common::assemble("s_endpgm")].concat());
    w.pc = 0;
    run_wave(&code, &mut w, &mem, &mut vec![0; 64], &Limits { wave_instructions: 100 }).unwrap();
    let byte = |a: usize| (a * 7 + 3) as u8;
    for l in 0..64 {
        for k in 0..4 {
            let a = offs[l] as usize + 4 * k;
            let want = if exec >> l & 1 == 1 {
                u32::from_le_bytes([byte(a), byte(a + 1), byte(a + 2), byte(a + 3)])
            } else {
                0xEEEE_EEEE
            };
            assert_eq!(w.vgpr[4 + k][l], want, "lane {l} dword {k}");
        }
    }
    // A store whose lane 40 points outside the memory: lanes below it store, then the fault.
    w.exec = u64::MAX;
    w.vgpr[1] = core::array::from_fn(|l| if l == 40 { 0xFFFF_0000 } else { 0x8000 + 8 * l as u32 });
    w.vgpr[8] = core::array::from_fn(|l| 0x1000_0000 + l as u32);
    w.vgpr[9] = core::array::from_fn(|l| 0x2000_0000 + l as u32);
    let words = common::assemble("global_store_dwordx2 v1, v[8:9], s[2:3]");
    let code = Code::decode(BASE, &[words, common::assemble("s_endpgm")].concat());
    w.pc = 0;
    let e = run_wave(&code, &mut w, &mem, &mut vec![0; 64], &Limits { wave_instructions: 100 }).unwrap_err();
    assert!(matches!(e.kind, ExecErrorKind::MemoryFault(a) if a == BASE + 0xFFFF_0000), "{e}");
    let m = mem.bytes.borrow();
    for l in 0..64usize {
        if l == 40 {
            continue;
        }
        let o = 0x8000 + 8 * l;
        let got = u32::from_le_bytes([m[o], m[o + 1], m[o + 2], m[o + 3]]);
        let want = if l < 40 {
            0x1000_0000 + l as u32
        } else {
            u32::from_le_bytes([byte(o), byte(o + 1), byte(o + 2), byte(o + 3)])
        };
        assert_eq!(got, want, "lane {l}");
    }
}

/// Random DPP and SDWA dwords on VOP1/VOP2/VOPC bases and random MFMA modifier bits, on random
/// registers and EXEC: every run ends in a value (done or an error), never a panic.
#[test]
fn random_lane_forms_end_in_values() {
    let bases = common::assemble(
        "v_add_u32_e32 v1, v2, v3
v_mov_b32_e32 v1, v2
v_add_f32_e32 v1, v2, v3
v_cvt_f32_f64_e32 v1, v[2:3]
v_fmac_f32_e32 v1, v2, v3
v_add_co_u32_e32 v1, vcc, v2, v3
v_cmp_lt_f32_e32 vcc, v2, v3
v_cmpx_eq_u32_e32 vcc, v2, v3
v_cndmask_b32_e32 v1, v2, v3, vcc",
    );
    let mfma = common::assemble(
        "v_mfma_f32_32x32x1f32 a[0:31], v1, v2, a[0:31]
v_mfma_f32_4x4x4f16 v[4:7], v[0:1], v[2:3], v[4:7]
v_mfma_i32_16x16x16i8 a[0:3], v0, v1, 0
v_mfma_f64_4x4x4f64 v[0:1], v[2:3], v[4:5], v[0:1]",
    );
    let mut r = rnd(0xF0F0);
    for round in 0..400 {
        let mut w = wave();
        for v in w.vgpr.iter_mut().chain(w.agpr.iter_mut()) {
            *v = core::array::from_fn(|_| r());
        }
        w.exec = if round % 3 == 0 { u64::MAX } else { u64::from(r()) | u64::from(r()) << 32 };
        let words: Vec<u32> = if round % 8 == 7 {
            let k = (r() % 4) as usize * 2;
            // cbsz (bits 10:8), abid (14:11) of the first word, blgp (31:29) of the second.
            vec![mfma[k] ^ (r() & 0x7F00), mfma[k + 1] ^ (r() & 0xE000_0000)]
        } else {
            let base = bases[(r() % 9) as usize];
            let ext = r();
            let marker = if r() % 2 == 0 { 0xFA } else { 0xF9 };
            vec![(base & !0x1FF) | marker, ext]
        };
        let _ = run_words(&words, &mut w);
    }
}

/// `v_fmac_f32` (D the addend, an SGPR source broadcast) and `v_fma_f32` with abs/neg take the
/// same vectorised fma path as the plain form: each lane bit-equal to `f32::mul_add` of the
/// modified sources, inactive lanes untouched.
#[test]
fn fmac_sgpr_and_modifier_forms_round_once() {
    let mut r = rnd(0xFC);
    let mut w = wave();
    for l in 0..64 {
        w.vgpr[1][l] = r() & 0xBFFF_FFFF;
        w.vgpr[2][l] = (r() % 0x3F80_0000) | (r() & 0x8000_0000);
        w.vgpr[3][l] = r() & 0x8FFF_FFFF;
    }
    // Lane 0: a product whose f64 sum lands on an f32 midpoint (the exact correction).
    let one = 1.0 + 2f32.powi(-12);
    (w.vgpr[1][0], w.vgpr[2][0], w.vgpr[3][0]) = (one.to_bits(), one.to_bits(), 2f32.powi(-60).to_bits());
    w.sgpr[6] = 1.5f32.to_bits();
    let exec = u64::from(r()) | u64::from(r()) << 32 | 1;
    w.exec = exec;
    w.vgpr[5] = w.vgpr[3];
    w.vgpr[7] = w.vgpr[3];
    w.vgpr[8] = [0xEEEE_EEEE; 64];
    run("v_fmac_f32_e32 v5, v1, v2\nv_fmac_f32_e32 v7, s6, v2\nv_fma_f32 v8, -v1, |v2|, -|v3|", &mut w);
    let f = f32::from_bits;
    for l in 0..64 {
        let (a, b, c) = (f(w.vgpr[1][l]), f(w.vgpr[2][l]), f(w.vgpr[3][l]));
        let want = [a.mul_add(b, c), 1.5f32.mul_add(b, c), (-a).mul_add(b.abs(), -c.abs())];
        for (k, reg) in [5, 7, 8].into_iter().enumerate() {
            let got = w.vgpr[reg][l];
            if exec >> l & 1 == 0 {
                let old = if reg == 8 { 0xEEEE_EEEE } else { c.to_bits() };
                assert_eq!(got, old, "v{reg} lane {l} inactive");
            } else {
                assert!(
                    got == want[k].to_bits() || (want[k].is_nan() && f(got).is_nan()),
                    "v{reg} lane {l}: {:e} want {:e}",
                    f(got),
                    want[k]
                );
            }
        }
    }
}

/// The integer compares (every condition, signed and unsigned, VOP3 into an SGPR pair and
/// `v_cmpx` into EXEC) over lanes with equal, sign-crossing and random values, an SGPR operand
/// and a partial EXEC: bit `l` is the condition on lane `l`, 0 for inactive lanes.
#[test]
fn integer_compares_follow_every_condition() {
    let mut r = rnd(0xC3);
    type Cond = (&'static str, fn(core::cmp::Ordering) -> bool);
    let conds: [Cond; 8] = [
        ("f", |_| false),
        ("lt", |o| o.is_lt()),
        ("eq", |o| o.is_eq()),
        ("le", |o| o.is_le()),
        ("gt", |o| o.is_gt()),
        ("ne", |o| o.is_ne()),
        ("ge", |o| o.is_ge()),
        ("t", |_| true),
    ];
    for (cond, holds) in conds {
        for ty in ["i32", "u32"] {
            let mut w = wave();
            for l in 0..64 {
                let small = |x: u32| ((x % 5) as i32 - 2) as u32;
                (w.vgpr[1][l], w.vgpr[2][l]) =
                    if l % 2 == 0 { (small(r()), small(r())) } else { (r(), r() | (r() & 0x8000_0000)) };
            }
            w.sgpr[8] = 0xFFFF_FFFF; // -1 signed, the maximum unsigned
            let exec = u64::from(r()) | u64::from(r()) << 32;
            w.exec = exec;
            let asm = format!(
                "v_cmp_{cond}_{ty}_e64 s[4:5], v1, v2\nv_cmp_{cond}_{ty}_e64 s[10:11], s8, v2\nv_cmpx_{cond}_{ty}_e64 s[12:13], v2, v1"
            );
            run(&asm, &mut w);
            let ord = |a: u32, b: u32| if ty == "i32" { (a as i32).cmp(&(b as i32)) } else { a.cmp(&b) };
            let mask = |f: &dyn Fn(usize) -> bool| (0..64).fold(0u64, |m, l| m | u64::from(f(l)) << l) & exec;
            let want = [
                mask(&|l| holds(ord(w.vgpr[1][l], w.vgpr[2][l]))),
                mask(&|l| holds(ord(0xFFFF_FFFF, w.vgpr[2][l]))),
                mask(&|l| holds(ord(w.vgpr[2][l], w.vgpr[1][l]))),
            ];
            let got = [4, 10, 12].map(|s| u64::from(w.sgpr[s]) | u64::from(w.sgpr[s + 1]) << 32);
            assert_eq!(got, want, "{asm}");
            assert_eq!(w.exec, want[2], "{asm}: EXEC");
        }
    }
}

/// DS dword reads (`ds_read_b32/b64/b96/b128`, `ds_read2_b32`, `ds_read2st64_b32`,
/// `ds_read2_b64`) read LDS in place over EXEC as the byte-wise path reads it; an address past
/// the allocation in a middle lane ends the instruction with that lane's address and leaves the
/// destination as it was.
#[test]
fn lds_dword_reads_follow_exec_and_report_the_first_lane_out_of_range() {
    const LDS: usize = 4096;
    let mut r = rnd(0xD5);
    let lds: Vec<u8> = (0..LDS).map(|i| (i * 13 + 5) as u8).collect();
    let word = |at: usize| u32::from_le_bytes([lds[at], lds[at + 1], lds[at + 2], lds[at + 3]]);
    let run_lds = |asm: &str, w: &mut Wave| {
        let mut words = common::assemble(asm);
        words.extend(common::assemble("s_endpgm"));
        let code = Code::decode(BASE, &words);
        w.pc = 0;
        let mut l = lds.clone();
        run_wave(&code, w, &VecMemory::new(BASE, 0), &mut l, &Limits { wave_instructions: 100 })
    };
    // (instruction, dwords per address, byte offsets of the addresses)
    let cases: [(&str, usize, &[usize]); 7] = [
        ("ds_read_b32 v4, v1 offset:12", 1, &[12]),
        ("ds_read_b64 v[4:5], v1 offset:8", 2, &[8]),
        ("ds_read_b96 v[4:6], v1", 3, &[0]),
        ("ds_read_b128 v[4:7], v1 offset:16", 4, &[16]),
        ("ds_read2_b32 v[4:5], v1 offset0:1 offset1:7", 1, &[4, 28]),
        ("ds_read2st64_b32 v[4:5], v1 offset0:1 offset1:2", 1, &[256, 512]),
        ("ds_read2_b64 v[4:7], v1 offset0:3 offset1:5", 2, &[24, 40]),
    ];
    for (asm, per, offs) in cases {
        let mut w = wave();
        let exec = u64::from(r()) | u64::from(r()) << 32;
        w.exec = exec;
        w.vgpr[1] = core::array::from_fn(|_| (r() % 2048) & !15);
        for k in 4..8 {
            w.vgpr[k] = [0xEEEE_EEEE; 64];
        }
        run_lds(asm, &mut w).unwrap_or_else(|e| panic!("{asm}: {e}"));
        for l in 0..64 {
            for (p, off) in offs.iter().enumerate() {
                for k in 0..per {
                    let want = if exec >> l & 1 != 0 { word(w.vgpr[1][l] as usize + off + 4 * k) } else { 0xEEEE_EEEE };
                    assert_eq!(w.vgpr[4 + p * per + k][l], want, "{asm} lane {l} dword {}", p * per + k);
                }
            }
        }
        // Lanes 20 and 40 out of range: lane 20's address is reported, nothing is written.
        w.exec = u64::MAX;
        w.vgpr[1][20] = (LDS - 4) as u32;
        w.vgpr[1][40] = LDS as u32;
        let before: Vec<[u32; 64]> = w.vgpr[4..8].to_vec();
        let e = run_lds(asm, &mut w).unwrap_err();
        let last = (LDS - 4 + offs[offs.len() - 1]) as u32;
        let first = (LDS - 4 + offs[0]) as u32;
        // The first part whose access does not fit is the one reported.
        let at = if (LDS - 4 + offs[0] + 4 * per) > LDS { first } else { last };
        assert!(matches!(e.kind, ExecErrorKind::LdsOutOfRange(a) if a == at), "{asm}: {e}");
        assert_eq!(w.vgpr[4..8].to_vec(), before, "{asm}: destination written on a fault");
    }
}
