//! Scratch, buffers, 16-bit memory forms, SMEM buffer loads and stores, clocks, messages,
//! halts and DS lane shuffles of the executor (docs/executor.md §5): instructions assembled by
//! `llvm-mc-15` at test time and run on one wave, checked against addresses and values the
//! tests compute from the documented layouts (the swizzled private segment, the V# formulas,
//! hand-computed lane permutations).

#![allow(clippy::needless_range_loop)]

mod common;

use aqueduct_isa::exec::{self, run_wave, Code, ExecErrorKind, Limits, VecMemory, Wave, LANES};
use common::assemble;

const BASE: u64 = 0x1_0000_0000;
/// Where the tests put the wave's scratch (FLAT_SCRATCH).
const SCRATCH: u64 = BASE + 0x10000;
const MEM: usize = 0x40000;

fn wave() -> Wave {
    let mut w = Wave::new(32, 0);
    w.exec = u64::MAX;
    w.mode = 0xF0;
    w.flat_scratch = SCRATCH;
    w
}

fn run_on(asm: &str, w: &mut Wave, mem: &VecMemory, lds: &mut Vec<u8>) -> Result<(), exec::ExecError> {
    let code = Code::decode(BASE, &assemble(&format!("{asm}\ns_endpgm")));
    w.pc = 0;
    run_wave(&code, w, mem, lds, &Limits { wave_instructions: 10_000 })
}

fn run(asm: &str, w: &mut Wave, mem: &VecMemory) {
    let mut lds = vec![0u8; 4096];
    run_on(asm, w, mem, &mut lds).unwrap_or_else(|e| panic!("{asm}: {e}"));
}

fn rd32(mem: &VecMemory, addr: u64) -> u32 {
    let b = mem.bytes.borrow();
    let o = (addr - BASE) as usize;
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}

fn wr32(mem: &VecMemory, addr: u64, v: u32) {
    let o = (addr - BASE) as usize;
    mem.bytes.borrow_mut()[o..o + 4].copy_from_slice(&v.to_le_bytes());
}

fn lanes(f: impl Fn(usize) -> u32) -> [u32; LANES] {
    core::array::from_fn(f)
}

/// Private byte `p` of lane `l` (docs/executor.md §5): dwords interleaved across 64 lanes.
fn private(l: usize, p: u32) -> u64 {
    SCRATCH + u64::from(p / 4) * 256 + l as u64 * 4 + u64::from(p % 4)
}

/// The queue's private segment buffer V# word 3 (ELEMENT_SIZE 4, INDEX_STRIDE 64, ADD_TID).
const SCRATCH_WORD3: u32 = 0x00EA_4FAC;

fn set_rsrc(w: &mut Wave, at: usize, base: u64, stride: u32, swizzle: bool, records: u32, word3: u32) {
    w.sgpr[at] = base as u32;
    w.sgpr[at + 1] = ((base >> 32) as u32 & 0xFFFF) | stride << 16 | u32::from(swizzle) << 31;
    w.sgpr[at + 2] = records;
    w.sgpr[at + 3] = word3;
}

#[test]
fn scratch_stores_and_loads_use_the_swizzled_private_layout() {
    let mem = VecMemory::new(BASE, MEM);
    let mut w = wave();
    // VGPR offsets (dword-aligned, distinct per lane) plus the instruction offset.
    w.vgpr[1] = lanes(|l| 4 * ((l as u32 * 7) % 32));
    w.vgpr[2] = lanes(|l| 0xA000_0000 | l as u32);
    w.vgpr[3] = lanes(|l| 0xB000_0000 | l as u32);
    w.exec = 0xFFFF_0000_FFFF_FFFF;
    run("scratch_store_dwordx2 v1, v[2:3], off offset:8", &mut w, &mem);
    for l in 0..LANES {
        let p = w.vgpr[1][l] + 8;
        let (lo, hi) = (rd32(&mem, private(l, p)), rd32(&mem, private(l, p + 4)));
        if w.exec >> l & 1 == 1 {
            assert_eq!((lo, hi), (0xA000_0000 | l as u32, 0xB000_0000 | l as u32), "lane {l}");
        } else {
            assert_eq!((lo, hi), (0, 0), "inactive lane {l} stores nothing");
        }
    }
    w.exec = u64::MAX;
    run("scratch_load_dword v4, v1, off offset:12", &mut w, &mem);
    for l in 0..LANES {
        let want = if l / 16 == 2 { 0 } else { 0xB000_0000 | l as u32 };
        assert_eq!(w.vgpr[4][l], want, "lane {l}");
    }
    // SGPR offset form: one private address for every lane, each in its own lane's dword.
    w.sgpr[4] = 0x40;
    w.vgpr[5] = lanes(|l| 0x5000 + l as u32);
    run("scratch_store_dword off, v5, s4 offset:-4\nscratch_load_dword v6, off, s4 offset:-4", &mut w, &mem);
    for l in 0..LANES {
        assert_eq!(rd32(&mem, private(l, 0x3C)), 0x5000 + l as u32);
        assert_eq!(w.vgpr[6][l], 0x5000 + l as u32);
    }
    // Bytes and shorts land inside the lane's dword; the d16 loads keep the other half.
    w.vgpr[7] = lanes(|l| 0x1234_5600 | l as u32);
    w.vgpr[8] = [0xDEAD_BEEF; LANES];
    w.vgpr[9] = [0xCAFE_F00D; LANES];
    w.sgpr[4] = 0x101; // byte 1 of private dword 0x40 (past what the stores above wrote)
    run(
        "scratch_store_byte off, v7, s4\nscratch_store_short_d16_hi off, v7, s4 offset:1\n\
         scratch_load_ubyte_d16_hi v8, off, s4\nscratch_load_short_d16 v9, off, s4 offset:1",
        &mut w,
        &mem,
    );
    for l in 0..LANES {
        let d = rd32(&mem, private(l, 0x100));
        assert_eq!(d, (l as u32) << 8 | 0x1234 << 16, "lane {l} dword {d:#x}");
        assert_eq!(w.vgpr[8][l], 0x0000_BEEF | (l as u32) << 16, "lane {l}");
        assert_eq!(w.vgpr[9][l], 0xCAFE_0000 | 0x1234, "lane {l}");
    }
    // A short at private byte 3 straddles two interleaved dwords: its bytes are 252 bytes apart.
    w.sgpr[4] = 0x203;
    w.vgpr[10] = lanes(|l| 0xA5B6_0000 | (0x100 + l as u32));
    run("scratch_store_short off, v10, s4\nscratch_load_ushort v11, off, s4", &mut w, &mem);
    for l in 0..LANES {
        let (lo, hi) = (rd32(&mem, private(l, 0x200)) >> 24, rd32(&mem, private(l, 0x204)) & 0xFF);
        assert_eq!((lo, hi), (l as u32 & 0xFF, 1), "lane {l}: byte 0x203 and byte 0x204");
        assert_eq!(w.vgpr[11][l], 0x100 + l as u32);
    }
}

#[test]
fn flat_accesses_in_the_private_aperture_go_to_the_wave_scratch() {
    let mem = VecMemory::new(BASE, MEM);
    let mut w = wave();
    let aperture = exec_private_aperture();
    let p = |l: usize| 4 * (63 - l as u32) + 0x100;
    w.vgpr[2] = lanes(|l| (aperture + u64::from(p(l))) as u32);
    w.vgpr[3] = [(aperture >> 32) as u32; LANES];
    w.vgpr[1] = lanes(|l| 0x7700 + l as u32);
    run("flat_store_dword v[2:3], v1\nflat_load_dword v4, v[2:3]\nflat_atomic_add v5, v[2:3], v1 glc", &mut w, &mem);
    for l in 0..LANES {
        assert_eq!(w.vgpr[4][l], 0x7700 + l as u32);
        assert_eq!(w.vgpr[5][l], 0x7700 + l as u32, "the atomic returns the old value");
        assert_eq!(rd32(&mem, private(l, p(l))), 2 * (0x7700 + l as u32));
    }
}

/// The private aperture base the executor uses (`src_private_base` << 32).
fn exec_private_aperture() -> u64 {
    exec_aperture("s_mov_b32 s0, src_private_base")
}

fn exec_aperture(asm: &str) -> u64 {
    let mem = VecMemory::new(BASE, 0);
    let mut w = wave();
    run(asm, &mut w, &mem);
    u64::from(w.sgpr[0]) << 32
}

#[test]
fn buffer_accesses_follow_the_resource_and_its_bounds() {
    let mem = VecMemory::new(BASE, MEM);
    let mut w = wave();
    let buf = BASE + 0x1000;
    for i in 0..64 {
        wr32(&mem, buf + 4 * i, 0x100 + i as u32);
    }
    // Raw buffer: 64 bytes; each lane reads at offset 4·l (+ soffset, which is not checked).
    set_rsrc(&mut w, 0, buf, 0, false, 64, 0);
    w.sgpr[4] = 8;
    w.vgpr[0] = lanes(|l| 4 * l as u32);
    run("buffer_load_dword v1, v0, s[0:3], s4 offen", &mut w, &mem);
    for l in 0..LANES {
        let want = if 4 * l + 4 <= 64 { 0x100 + 2 + l as u32 } else { 0 };
        assert_eq!(w.vgpr[1][l], want, "lane {l}");
    }
    // A dwordx2 straddling the end: the first component stores, the second is dropped.
    w.exec = 1;
    w.vgpr[0][0] = 60;
    w.vgpr[2][0] = 0xAAAA_AAAA;
    w.vgpr[3][0] = 0xBBBB_BBBB;
    run("buffer_store_dwordx2 v[2:3], v0, s[0:3], 0 offen", &mut w, &mem);
    assert_eq!(rd32(&mem, buf + 60), 0xAAAA_AAAA);
    assert_eq!(rd32(&mem, buf + 64), 0x100 + 16, "out of range: dropped");
    // Structured: stride 16, 3 records; index from the VGPR, offset from the instruction.
    w.exec = u64::MAX;
    set_rsrc(&mut w, 0, buf, 16, false, 3, 0);
    w.vgpr[0] = lanes(|l| l as u32 % 5);
    run("buffer_load_dword v1, v0, s[0:3], 0 idxen offset:4", &mut w, &mem);
    for l in 0..LANES {
        let i = l % 5;
        let want = if i < 3 { 0x100 + 4 * i as u32 + 1 } else { 0 };
        assert_eq!(w.vgpr[1][l], want, "lane {l} index {i}");
    }
    // Atomics with glc return the old value; out of range nothing happens.
    set_rsrc(&mut w, 0, buf, 0, false, 16, 0);
    w.vgpr[0] = lanes(|l| 4 * (l as u32 % 8));
    w.vgpr[2] = [1; LANES];
    run("buffer_atomic_add v2, v0, s[0:3], 0 offen glc", &mut w, &mem);
    for i in 0..8u32 {
        let add = if i < 4 { 8 } else { 0 };
        assert_eq!(rd32(&mem, buf + 4 * u64::from(i)), 0x100 + i + add);
    }
    for l in 0..LANES {
        let i = l as u32 % 8;
        if i < 4 {
            // Lanes add in order: lane l sees the 0x100 + i plus one per earlier lane of its word.
            assert_eq!(w.vgpr[2][l], 0x100 + i + (l as u32 / 8), "lane {l}");
        } else {
            assert_eq!(w.vgpr[2][l], 0, "lane {l}: out of range returns 0");
        }
    }
}

#[test]
fn the_private_segment_buffer_swizzles_by_lane() {
    let mem = VecMemory::new(BASE, MEM);
    let mut w = wave();
    // The V# the queue builds, rebased to this wave's scratch, as the kernel prolog does.
    set_rsrc(&mut w, 0, SCRATCH, 0, true, 0x10000, SCRATCH_WORD3);
    w.sgpr[4] = 0x400; // soffset: the stack frame, in bytes of the whole wave (64 × per lane)
    w.vgpr[1] = lanes(|l| 0xC000 + l as u32);
    w.vgpr[0] = lanes(|l| 4 * (l as u32 % 3));
    run(
        "buffer_store_dword v1, v0, s[0:3], s4 offen offset:12\nbuffer_load_dword v2, v0, s[0:3], s4 offen offset:12",
        &mut w,
        &mem,
    );
    for l in 0..LANES {
        let p = 12 + 4 * (l as u32 % 3);
        assert_eq!(rd32(&mem, 0x400 + private(l, p)), 0xC000 + l as u32, "lane {l}");
        assert_eq!(w.vgpr[2][l], 0xC000 + l as u32);
    }
    // scratch_* with FLAT_SCRATCH at the same base reads what the buffer wrote.
    w.flat_scratch = SCRATCH + 0x400;
    w.vgpr[3] = lanes(|l| 12 + 4 * (l as u32 % 3));
    run("scratch_load_dword v4, v3, off", &mut w, &mem);
    assert_eq!(w.vgpr[4], lanes(|l| 0xC000 + l as u32));
}

#[test]
fn buffer_format_loads_of_32_bit_components_are_dword_loads() {
    let mem = VecMemory::new(BASE, MEM);
    let mut w = wave();
    let buf = BASE + 0x2000;
    for i in 0..64 {
        wr32(&mem, buf + 4 * i, 0x900 + i as u32);
    }
    w.vgpr[0] = lanes(|l| 8 * l as u32);
    // tbuffer: format 32_32 (11), uint (4) from the instruction.
    set_rsrc(&mut w, 0, buf, 0, false, 256, 0);
    run(
        "tbuffer_load_format_xy v[2:3], v0, s[0:3], 0 format:[BUF_DATA_FORMAT_32_32,BUF_NUM_FORMAT_UINT] offen",
        &mut w,
        &mem,
    );
    for l in 0..32 {
        assert_eq!((w.vgpr[2][l], w.vgpr[3][l]), (0x900 + 2 * l as u32, 0x901 + 2 * l as u32));
    }
    // A 16-bit format is not a dword load: not implemented, reported.
    let mut lds = vec![0u8; 16];
    let e = run_on(
        "tbuffer_load_format_x v2, v0, s[0:3], 0 format:[BUF_DATA_FORMAT_16,BUF_NUM_FORMAT_UINT] offen",
        &mut w,
        &mem,
        &mut lds,
    )
    .unwrap_err();
    assert_eq!(e.kind, ExecErrorKind::Unimplemented);
}

#[test]
fn smem_buffer_loads_and_scalar_stores() {
    let mem = VecMemory::new(BASE, MEM);
    let mut w = wave();
    let buf = BASE + 0x3000;
    for i in 0..16 {
        wr32(&mem, buf + 4 * i, 0x5500 + i as u32);
    }
    set_rsrc(&mut w, 0, buf, 0, false, 24, 0);
    run("s_buffer_load_dwordx4 s[4:7], s[0:3], 0x10", &mut w, &mem);
    // Bytes 16..24 are in range, 24..32 read 0.
    assert_eq!(&w.sgpr[4..8], &[0x5504, 0x5505, 0, 0]);
    w.sgpr[8] = (buf + 0x40) as u32;
    w.sgpr[9] = ((buf + 0x40) >> 32) as u32;
    w.sgpr[10] = 0x1111;
    w.sgpr[11] = 0x2222;
    w.sgpr[12] = 8;
    run("s_store_dwordx2 s[10:11], s[8:9], s12\ns_dcache_wb", &mut w, &mem);
    assert_eq!((rd32(&mem, buf + 0x48), rd32(&mem, buf + 0x4C)), (0x1111, 0x2222));
}

/// Scalar atomics: one read-modify-write at base + offset, the old value into the data SGPRs
/// with `glc`; `cmpswap` takes the value then the compare value; buffer forms bounded by
/// NUM_RECORDS (out of range: nothing written, 0 returned); buffer stores dropped past it.
#[test]
fn smem_atomics_and_buffer_stores() {
    let mem = VecMemory::new(BASE, MEM);
    let mut w = wave();
    let at = BASE + 0x5000;
    for i in 0..8 {
        wr32(&mem, at + 4 * i, 100 + i as u32);
    }
    w.sgpr[0] = at as u32;
    w.sgpr[1] = (at >> 32) as u32;
    w.sgpr[4] = 5;
    w.sgpr[5] = 7;
    w.sgpr[6] = 0x1234;
    w.sgpr[7] = 102; // the compare value: equal to dword 2
    w.sgpr[8] = 0x99;
    w.sgpr[9] = 55; // not equal to dword 3
    w.sgpr[10] = 0xFFFF_FFFF;
    w.sgpr[11] = 0x0000_0001; // 64-bit add of 0x1_FFFF_FFFF
    run(
        "s_atomic_add s4, s[0:1], 0x0 glc
         s_atomic_sub s5, s[0:1], 0x4
         s_atomic_cmpswap s[6:7], s[0:1], 0x8 glc
         s_atomic_cmpswap s[8:9], s[0:1], 0xc glc
         s_atomic_add_x2 s[10:11], s[0:1], 0x10 glc",
        &mut w,
        &mem,
    );
    assert_eq!(rd32(&mem, at), 105);
    assert_eq!(w.sgpr[4], 100, "glc: the old value");
    assert_eq!(rd32(&mem, at + 4), 101 - 7);
    assert_eq!(w.sgpr[5], 7, "no glc: the data SGPR kept");
    assert_eq!((rd32(&mem, at + 8), w.sgpr[6]), (0x1234, 102), "compare matched");
    assert_eq!((rd32(&mem, at + 12), w.sgpr[8]), (103, 103), "compare failed: memory kept");
    let old64 = u64::from(104u32) | u64::from(105u32) << 32;
    let new64 = old64 + 0x1_FFFF_FFFF;
    assert_eq!((rd32(&mem, at + 16), rd32(&mem, at + 20)), (new64 as u32, (new64 >> 32) as u32));
    assert_eq!((w.sgpr[10], w.sgpr[11]), (104, 105));

    // Buffer forms: 16 bytes in range.
    let buf = BASE + 0x6000;
    for i in 0..8 {
        wr32(&mem, buf + 4 * i, 0x40 + i as u32);
    }
    set_rsrc(&mut w, 0, buf, 0, false, 16, 0);
    w.sgpr[4] = 0xF0;
    w.sgpr[5] = 0x0F;
    w.sgpr[12] = 0xAAAA;
    w.sgpr[13] = 0xBBBB;
    run(
        "s_buffer_atomic_or s4, s[0:3], 0x4 glc
         s_buffer_atomic_or s5, s[0:3], 0x10 glc
         s_buffer_store_dwordx2 s[12:13], s[0:3], 0xc
         s_dcache_discard s[0:1], 0x0",
        &mut w,
        &mem,
    );
    assert_eq!((rd32(&mem, buf + 4), w.sgpr[4]), (0x41 | 0xF0, 0x41));
    assert_eq!((rd32(&mem, buf + 16), w.sgpr[5]), (0x44, 0), "out of range: nothing, 0 returned");
    assert_eq!((rd32(&mem, buf + 12), rd32(&mem, buf + 16)), (0xAAAA, 0x44), "the dword past NUM_RECORDS dropped");
}

#[test]
fn global_16_bit_forms_keep_the_other_half() {
    let mem = VecMemory::new(BASE, MEM);
    let mut w = wave();
    let at = BASE + 0x4000;
    wr32(&mem, at, 0x8765_F0E1);
    w.vgpr[2] = [at as u32; LANES];
    w.vgpr[3] = [(at >> 32) as u32; LANES];
    w.vgpr[4] = [0x1111_2222; LANES];
    w.vgpr[5] = [0x3333_4444; LANES];
    w.vgpr[6] = [0x5555_6666; LANES];
    run(
        "global_load_short_d16_hi v4, v[2:3], off\nglobal_load_sbyte_d16 v5, v[2:3], off\n\
         global_load_ubyte_d16_hi v6, v[2:3], off offset:1",
        &mut w,
        &mem,
    );
    assert_eq!(w.vgpr[4][0], 0xF0E1_2222);
    assert_eq!(w.vgpr[5][0], 0x3333_FFE1, "sign-extended to 16 bits");
    assert_eq!(w.vgpr[6][0], 0x00F0_6666);
    w.exec = 1;
    w.vgpr[7] = [0xABCD_0123; LANES];
    run("global_store_short_d16_hi v[2:3], v7, off offset:4", &mut w, &mem);
    assert_eq!(rd32(&mem, at + 4) & 0xFFFF, 0xABCD);
}

#[test]
fn packed_f16_and_f64_min_max_atomics() {
    let mem = VecMemory::new(BASE, MEM);
    let mut w = wave();
    let at = BASE + 0x5000;
    // f16 halves: 1.5 + 2.25 = 3.75 (exact); 2048 + 3 = 2051 ties to even: 2052.
    wr32(&mem, at, 0x3E00 | 0x6800 << 16);
    w.exec = 1;
    w.vgpr[2] = [at as u32; LANES];
    w.vgpr[3] = [(at >> 32) as u32; LANES];
    w.vgpr[1] = [0x4080 | 0x4200 << 16; LANES];
    run("global_atomic_pk_add_f16 v[2:3], v1, off", &mut w, &mem);
    assert_eq!(rd32(&mem, at), 0x4380 | 0x6802 << 16);
    // 2048 + 1 = 2049 ties to even: 2048; a subnormal sum stays exact (2^-24 + 2^-24).
    wr32(&mem, at, 0x0001 | 0x6800 << 16);
    w.vgpr[1] = [0x0001 | 0x3C00 << 16; LANES];
    run("global_atomic_pk_add_f16 v[2:3], v1, off", &mut w, &mem);
    assert_eq!(rd32(&mem, at), 0x0002 | 0x6800 << 16);
    // f64 min/max: NaN yields the other operand, -0 < +0.
    let cases: [(f64, f64); 5] = [(1.5, -2.0), (f64::NAN, 3.0), (4.0, f64::NAN), (0.0, -0.0), (-0.0, 0.0)];
    for (old, v) in cases {
        for (name, min) in [("min", true), ("max", false)] {
            let o = at + 8;
            let write64 = |x: f64| {
                wr32(&mem, o, x.to_bits() as u32);
                wr32(&mem, o + 4, (x.to_bits() >> 32) as u32);
            };
            write64(old);
            w.vgpr[2] = [o as u32; LANES];
            w.vgpr[4] = [v.to_bits() as u32; LANES];
            w.vgpr[5] = [(v.to_bits() >> 32) as u32; LANES];
            run(&format!("global_atomic_{name}_f64 v[6:7], v[2:3], v[4:5], off glc"), &mut w, &mem);
            let got = f64::from_bits(u64::from(rd32(&mem, o)) | u64::from(rd32(&mem, o + 4)) << 32);
            let want = if old.is_nan() {
                v
            } else if v.is_nan() {
                old
            } else if old == v {
                // Signed zeros: min takes the negative one, max the positive one.
                if min == old.is_sign_negative() {
                    old
                } else {
                    v
                }
            } else if (old < v) == min {
                old
            } else {
                v
            };
            assert_eq!(got.to_bits(), want.to_bits(), "{name}({old}, {v})");
            let ret = f64::from_bits(u64::from(w.vgpr[6][0]) | u64::from(w.vgpr[7][0]) << 32);
            assert_eq!(ret.to_bits(), old.to_bits(), "glc returns the old value");
        }
    }
}

#[test]
fn ds_swizzle_matches_hand_computed_permutations() {
    let mem = VecMemory::new(BASE, 0);
    let data = lanes(|l| 1000 + l as u32);
    // (offset, source lane of lane l)
    type Source = fn(usize) -> usize;
    let cases: [(u32, Source); 5] = [
        // Quad permute [3, 2, 1, 0]: reverse each quad.
        (0x801B, |l| (l & !3) + [3, 2, 1, 0][l & 3]),
        // Quad permute [1, 1, 1, 1]: broadcast lane 1 of each quad.
        (0x8055, |l| (l & !3) + 1),
        // Bit masks: and 0x1F, xor 1 — swap neighbours.
        (0x1F | 1 << 10, |l| l ^ 1),
        // and 0x1F, xor 0x10 — swap the 16-lane halves of each 32.
        (0x1F | 0x10 << 10, |l| l ^ 16),
        // and 0x18, or 0x02 — broadcast lane 2 of each group of 8.
        (0x18 | 0x02 << 5, |l| (l & 0x38) | 2),
    ];
    for (offset, src) in cases {
        let mut w = wave();
        w.vgpr[0] = data;
        run(&format!("ds_swizzle_b32 v1, v0 offset:{offset:#x}"), &mut w, &mem);
        for l in 0..LANES {
            assert_eq!(w.vgpr[1][l], 1000 + src(l) as u32, "offset {offset:#x} lane {l}");
        }
    }
    // An inactive source lane reads 0; inactive destinations are untouched.
    let mut w = wave();
    w.vgpr[0] = data;
    w.vgpr[1] = [7; LANES];
    w.exec = !0b10; // lane 1 off
    run("ds_swizzle_b32 v1, v0 offset:0x801b", &mut w, &mem);
    assert_eq!(&w.vgpr[1][..4], &[1003, 7, 0, 1000]);
}

#[test]
fn ds_permute_sends_forward_and_ds_append_counts_lanes() {
    let mem = VecMemory::new(BASE, 0);
    let mut w = wave();
    // Lane l sends to lane 5l mod 64 (a bijection): lane d receives from 13d mod 64 (5·13 = 65).
    w.vgpr[0] = lanes(|l| 4 * ((5 * l as u32) % 64) + 256);
    w.vgpr[1] = lanes(|l| 2000 + l as u32);
    run("ds_permute_b32 v2, v0, v1 offset:0", &mut w, &mem);
    for d in 0..LANES {
        assert_eq!(w.vgpr[2][d], 2000 + ((13 * d) % 64) as u32, "lane {d}");
    }
    // Every lane sends to lane 0 (the highest wins); the others receive nothing.
    w.vgpr[0] = [0; LANES];
    w.exec = 0x0000_00FF_0000_0000;
    run("ds_permute_b32 v3, v0, v1", &mut w, &mem);
    assert_eq!(w.vgpr[3][32], 0, "lane 32 is sent nothing");
    // ds_append / ds_consume on the LDS dword at M0.
    let mut lds = vec![0u8; 64];
    lds[16..20].copy_from_slice(&100u32.to_le_bytes());
    w.m0 = 12;
    w.exec = 0x3FF; // 10 lanes
    run_on("ds_append v4 offset:4\nds_consume v5 offset:4\nds_consume v6 offset:4", &mut w, &mem, &mut lds).unwrap();
    assert_eq!(&w.vgpr[4][..10], &[100; 10]);
    assert_eq!(&w.vgpr[5][..10], &[110; 10]);
    assert_eq!(&w.vgpr[6][..10], &[100; 10]);
    assert_eq!(u32::from_le_bytes(lds[16..20].try_into().unwrap()), 90);
}

#[test]
fn clocks_are_monotonic_and_messages_reach_the_memory() {
    let mem = VecMemory::new(BASE, 0);
    let mut w = wave();
    run("s_memtime s[0:1]\ns_memrealtime s[2:3]\ns_memtime s[4:5]\ns_memrealtime s[6:7]", &mut w, &mem);
    let v = |i: usize| u64::from(w.sgpr[i]) | u64::from(w.sgpr[i + 1]) << 32;
    let r = exec::SHADER_CLOCKS_PER_TICK;
    assert!(v(0) < v(2) * r && v(2) * r < v(4) && v(4) < v(6) * r, "{} {} {} {}", v(0), v(2), v(4), v(6));
    w.m0 = 0x1234_5678;
    run("s_sendmsg sendmsg(MSG_INTERRUPT)\ns_sethalt 0", &mut w, &mem);
    assert_eq!(*mem.interrupts.borrow(), vec![0x78]);
    let mut lds = Vec::new();
    let e = run_on("s_sethalt 1", &mut w, &mem, &mut lds).unwrap_err();
    assert_eq!(e.kind, ExecErrorKind::Halted);
    let e = run_on("s_sendmsghalt sendmsg(MSG_INTERRUPT)", &mut w, &mem, &mut lds).unwrap_err();
    assert_eq!(e.kind, ExecErrorKind::Halted);
    assert_eq!(mem.interrupts.borrow().len(), 2);
    let e = run_on("s_sendmsg sendmsg(MSG_GS, GS_OP_EMIT, 0)", &mut w, &mem, &mut lds).unwrap_err();
    assert_eq!(e.kind, ExecErrorKind::Unimplemented, "graphics messages are reported");
    let e = run_on("s_trap 2", &mut w, &mem, &mut lds).unwrap_err();
    assert_eq!(e.kind, ExecErrorKind::Trap(2));
}

#[test]
fn calls_reach_functions_past_an_undecodable_word_and_return() {
    // Word 0 is not an instruction; the kernel starts at +4 and calls the function placed right
    // after it (s_getpc_b64 yields the address after itself: 5 one-word instructions before
    // the callee).
    let kernel = assemble(
        "s_getpc_b64 s[4:5]\ns_add_u32 s4, s4, 20\ns_addc_u32 s5, s5, 0\ns_swappc_b64 s[30:31], s[4:5]\n\
         v_add_u32 v0, 1, v0\ns_endpgm",
    );
    assert_eq!(kernel.len(), 6, "one word each");
    let callee = assemble("v_lshlrev_b32 v0, 4, v0\ns_setpc_b64 s[30:31]");
    let mut words = vec![0xFFFF_FFFFu32];
    words.extend(&kernel);
    words.extend(&callee);
    let entry = BASE + 4;
    let code = Code::decode_at(BASE, &words, &[entry]);
    let mut w = wave();
    w.vgpr[0] = lanes(|l| l as u32);
    w.pc = code.index_at(entry).expect("the entry decodes");
    let mem = VecMemory::new(BASE, 0);
    let mut lds = Vec::new();
    run_wave(&code, &mut w, &mem, &mut lds, &Limits { wave_instructions: 100 }).unwrap();
    assert_eq!(w.vgpr[0], lanes(|l| ((l as u32) << 4) + 1));
    // Decoded from the start only, nothing is reached.
    assert!(Code::decode(BASE, &words).index_at(entry).is_none());
}
