//! gfx940 (CDNA3) semantics of the executor (docs/executor.md §8): gfx940's own instructions,
//! assembled by `llvm-mc-15 -mcpu=gfx940` at test time, decoded for gfx940 and run on one wave,
//! checked against values computed here; SCRATCH with both an SGPR and a VGPR address; the
//! cache-maintenance instructions of the gfx940 memory model; and the architected flat scratch
//! a gfx940 wave starts with.

#![allow(clippy::needless_range_loop)]

mod common;

use aqueduct_isa::exec::{self, run_wave, Code, ExecErrorKind, Limits, VecMemory, Wave, LANES};
use aqueduct_isa::Target;
use common::assemble_for;
use common::rnd;

const BASE: u64 = 0x1_0000_0000;
const SCRATCH: u64 = BASE + 0x10000;
const MEM: usize = 0x40000;

fn wave() -> Wave {
    let mut w = Wave::new(32, 8);
    w.exec = u64::MAX;
    w.mode = 0xF0; // round to nearest even, f32/f64 denormals kept
    w.flat_scratch = SCRATCH;
    w
}

fn code(asm: &str) -> Code {
    Code::decode_for(Target::Gfx940, BASE, &assemble_for(Target::Gfx940, &format!("{asm}\ns_endpgm")))
}

fn run_on(asm: &str, w: &mut Wave, mem: &VecMemory) -> Result<(), exec::ExecError> {
    let code = code(asm);
    assert!(code.unimplemented().is_empty(), "{asm}: {:?}", code.unimplemented());
    w.pc = 0;
    let mut lds = vec![0u8; 4096];
    run_wave(&code, w, mem, &mut lds, &Limits { wave_instructions: 10_000 })
}

fn run(asm: &str, w: &mut Wave, mem: &VecMemory) {
    run_on(asm, w, mem).unwrap_or_else(|e| panic!("{asm}: {e}"));
}

fn v64(w: &Wave, r: usize, l: usize) -> u64 {
    u64::from(w.vgpr[r][l]) | u64::from(w.vgpr[r + 1][l]) << 32
}

fn set_v64(w: &mut Wave, r: usize, l: usize, v: u64) {
    w.vgpr[r][l] = v as u32;
    w.vgpr[r + 1][l] = (v >> 32) as u32;
}

#[test]
fn v_mov_b64_moves_registers_constants_and_lanes() {
    let mem = VecMemory::new(BASE, MEM);
    let mut r = rnd(7);
    let mut w = wave();
    let src: Vec<u64> = (0..LANES).map(|_| u64::from(r()) << 32 | u64::from(r())).collect();
    for l in 0..LANES {
        set_v64(&mut w, 2, l, src[l]);
        set_v64(&mut w, 10, l, 0x5555_5555_5555_5555);
    }
    w.sgpr[4] = 0x89AB_CDEF;
    w.sgpr[5] = 0x0123_4567;
    w.exec = 0xF0F0_F0F0_0F0F_0F0F;
    run(
        "v_mov_b64_e32 v[10:11], v[2:3]\nv_mov_b64_e32 v[12:13], s[4:5]\nv_mov_b64_e32 v[14:15], 1.0\n\
         v_mov_b64_e32 v[16:17], -4\nv_mov_b64_e32 v[18:19], 0x12345678\nv_mov_b64_e64 v[20:21], v[2:3]",
        &mut w,
        &mem,
    );
    for l in 0..LANES {
        if w.exec >> l & 1 == 0 {
            assert_eq!(v64(&w, 10, l), 0x5555_5555_5555_5555, "lane {l} is inactive");
            continue;
        }
        assert_eq!(v64(&w, 10, l), src[l]);
        assert_eq!(v64(&w, 12, l), 0x0123_4567_89AB_CDEF);
        assert_eq!(v64(&w, 14, l), 1.0f64.to_bits(), "a float constant of a 64-bit operand is the f64");
        assert_eq!(v64(&w, 16, l), (-4i64) as u64);
        assert_eq!(v64(&w, 18, l), 0x1234_5678, "a 32-bit literal zero-extends");
        assert_eq!(v64(&w, 20, l), src[l]);
    }
    // DPP64: row_newbcast:n hands lane n of each row to the row.
    let mut w = wave();
    for l in 0..LANES {
        set_v64(&mut w, 2, l, src[l]);
    }
    run("v_mov_b64_dpp v[4:5], v[2:3] row_newbcast:5 row_mask:0xf bank_mask:0xf", &mut w, &mem);
    for l in 0..LANES {
        assert_eq!(v64(&w, 4, l), src[(l & !15) | 5], "lane {l}");
    }
}

#[test]
fn v_lshl_add_u64_shifts_and_adds_in_64_bits() {
    let mem = VecMemory::new(BASE, MEM);
    let mut r = rnd(11);
    for shift in 0..=4u32 {
        let mut w = wave();
        let (a, c): (Vec<u64>, Vec<u64>) =
            (0..LANES).map(|_| (u64::from(r()) << 32 | u64::from(r()), u64::from(r()) << 32 | u64::from(r()))).unzip();
        for l in 0..LANES {
            set_v64(&mut w, 2, l, a[l]);
            set_v64(&mut w, 4, l, c[l]);
            w.vgpr[8][l] = shift;
        }
        w.sgpr[6] = 0xFFFF_FFFF;
        w.sgpr[7] = 0x7FFF_FFFF;
        run(
            &format!(
                "v_lshl_add_u64 v[10:11], v[2:3], {shift}, v[4:5]\nv_lshl_add_u64 v[12:13], v[2:3], v8, s[6:7]\n\
                 v_lshl_add_u64 v[14:15], s[6:7], {shift}, 0"
            ),
            &mut w,
            &mem,
        );
        for l in 0..LANES {
            assert_eq!(v64(&w, 10, l), (a[l] << shift).wrapping_add(c[l]), "shift {shift} lane {l}");
            assert_eq!(v64(&w, 12, l), (a[l] << shift).wrapping_add(0x7FFF_FFFF_FFFF_FFFF));
            assert_eq!(v64(&w, 14, l), 0x7FFF_FFFF_FFFF_FFFFu64 << shift);
        }
    }
    // Shifts beyond 4 are not defined by the ISA: an error, not a guess.
    let mut w = wave();
    for l in 0..LANES {
        w.vgpr[8][l] = 5;
    }
    let e = run_on("v_lshl_add_u64 v[10:11], v[2:3], v8, v[4:5]", &mut w, &mem).unwrap_err();
    assert_eq!(e.kind, ExecErrorKind::Unimplemented);
    assert!(e.to_string().contains("v_lshl_add_u64"), "{e}");
}

#[test]
fn v_fmamk_and_v_fmaak_round_once() {
    let mem = VecMemory::new(BASE, MEM);
    let mut r = rnd(3);
    let k = 1.0f32 + f32::EPSILON; // a product that rounds differently fused and unfused
    let mut w = wave();
    let (a, b): (Vec<f32>, Vec<f32>) = (0..LANES)
        .map(|l| {
            if l < 8 {
                // (1 + e)(1 - e) - 1 = -e²: zero when the product is rounded first.
                (1.0 - f32::EPSILON, -1.0)
            } else {
                let f =
                    |x: u32| f32::from_bits(0x3F00_0000 | (x & 0x00FF_FFFF)) * if x >> 31 == 1 { -1.0 } else { 1.0 };
                (f(r()), f(r()))
            }
        })
        .unzip();
    for l in 0..LANES {
        w.vgpr[2][l] = a[l].to_bits();
        w.vgpr[3][l] = b[l].to_bits();
    }
    run(
        &format!("v_fmamk_f32 v4, v2, {:#x}, v3\nv_fmaak_f32 v5, v2, v3, {:#x}", k.to_bits(), k.to_bits()),
        &mut w,
        &mem,
    );
    for l in 0..LANES {
        assert_eq!(w.vgpr[4][l], a[l].mul_add(k, b[l]).to_bits(), "v_fmamk_f32 lane {l}");
        assert_eq!(w.vgpr[5][l], a[l].mul_add(b[l], k).to_bits(), "v_fmaak_f32 lane {l}");
    }
    assert_ne!(w.vgpr[4][0], 0, "the fused result keeps -e²");
}

#[test]
fn cache_maintenance_executes_and_changes_nothing() {
    let mem = VecMemory::new(BASE, MEM);
    let mut w = wave();
    w.sgpr[0] = BASE as u32;
    w.sgpr[1] = (BASE >> 32) as u32;
    for l in 0..LANES {
        w.vgpr[0][l] = 4 * l as u32;
        w.vgpr[1][l] = 1000 + l as u32;
    }
    // The gfx940 release/acquire sequences around a system-scope store and load.
    run(
        "buffer_wbl2 sc0 sc1\ns_waitcnt vmcnt(0)\nglobal_store_dword v0, v1, s[0:1] sc0 sc1\ns_waitcnt vmcnt(0)\n\
         buffer_inv sc0 sc1\nbuffer_inv sc1\nbuffer_inv\nglobal_load_dword v2, v0, s[0:1] sc0 sc1\n\
         s_waitcnt vmcnt(0)\nbuffer_inv sc0\nbuffer_wbl2\nglobal_load_dword v3, v0, s[0:1] nt",
        &mut w,
        &mem,
    );
    for l in 0..LANES {
        assert_eq!(w.vgpr[2][l], 1000 + l as u32);
        assert_eq!(w.vgpr[3][l], 1000 + l as u32);
    }
    assert_eq!(w.executed, 13, "every instruction ran, s_endpgm included");
}

/// Private byte `p` of lane `l` (docs/executor.md §5): dwords interleaved across 64 lanes.
fn private(l: usize, p: u32) -> u64 {
    SCRATCH + u64::from(p / 4) * 256 + l as u64 * 4 + u64::from(p % 4)
}

#[test]
fn scratch_adds_an_sgpr_and_a_vgpr_address() {
    let mem = VecMemory::new(BASE, MEM);
    let mut w = wave();
    w.sgpr[2] = 0x40;
    for l in 0..LANES {
        w.vgpr[1][l] = 8 * l as u32;
        w.vgpr[2][l] = 0xC0DE_0000 + l as u32;
    }
    // SVS (v1 + s2 + 4), VGPR only (v1 + 0x44), SGPR only (s2 + 0x100), neither (0x200).
    run(
        "scratch_store_dword v1, v2, s2 offset:4\nscratch_load_dword v3, v1, off offset:68\n\
         scratch_store_dword off, v2, s2 offset:0xc0\nscratch_load_dword v4, off, off offset:0x100\n\
         scratch_store_dword off, v2, off offset:0x200",
        &mut w,
        &mem,
    );
    let b = mem.bytes.borrow();
    let rd = |a: u64| u32::from_le_bytes(b[(a - BASE) as usize..(a - BASE) as usize + 4].try_into().unwrap());
    for l in 0..LANES {
        let v = 0xC0DE_0000 + l as u32;
        assert_eq!(rd(private(l, 8 * l as u32 + 0x44)), v, "SVS store, lane {l}");
        assert_eq!(w.vgpr[3][l], v, "the same address through the VGPR alone");
        assert_eq!(rd(private(l, 0x100)), v);
        assert_eq!(w.vgpr[4][l], v);
        assert_eq!(rd(private(l, 0x200)), v);
    }
}

/// The initial state of a gfx940 wave: FLAT_SCRATCH is the queue's scratch plus the wave's slot,
/// set by the hardware; no scratch wave-offset SGPR follows the system SGPRs; and a descriptor
/// asking for the flat scratch init or private segment buffer SGPRs (not supported with an
/// architected flat scratch) does not start.
#[test]
fn architected_flat_scratch() {
    use amdhsa::descriptor::{Rsrc1, Rsrc2, Rsrc3};
    let asm = "s_mov_b64 s[10:11], flat_scratch\nv_mov_b32_e32 v2, s10\nv_mov_b32_e32 v3, s11\nv_mov_b32_e32 v4, s5\n\
               v_mov_b32_e32 v1, 0\nv_mov_b32_e32 v5, s4\nglobal_store_dwordx4 v1, v[2:5], s[0:1]\n\
               v_mov_b32_e32 v6, 0x1234\nscratch_store_dword off, v6, off offset:8\ns_waitcnt vmcnt(0)\ns_endpgm";
    let words = assemble_for(Target::Gfx940, asm);
    let mem = VecMemory::new(BASE, MEM);
    let code_at = BASE + 0x8000;
    let scratch = exec::Scratch { resource: [0; 4], base: BASE + 0x20000, bytes: 8 * 4096, tmpring: 8 | 4 << 12 };
    let descriptor = |props: u16| amdhsa::KernelDescriptor {
        group_segment_fixed_size: 0,
        private_segment_fixed_size: 16,
        kernarg_size: 0,
        kernel_code_entry_byte_offset: 0,
        rsrc3: Rsrc3 { raw: 7 },
        rsrc1: Rsrc1 { raw: 7 | 0xF0 << 12 },
        // ENABLE_PRIVATE_SEGMENT, 4 user SGPRs (dispatch ptr is off: kernarg ptr, then 2 spare
        // announced), work-group id x.
        rsrc2: Rsrc2 { raw: 1 | 4 << 1 | 1 << 7 },
        kernel_code_properties: props,
        kernarg_preload: 0,
    };
    let dispatch = exec::Dispatch {
        kernarg_address: BASE,
        grid: [64, 1, 1],
        workgroup_size: [64, 1, 1],
        private_segment_size: 16,
        scratch,
        ..exec::Dispatch::default()
    };
    // Kernarg pointer in s[0:1] (bit 3), then work-group id x in s4; s5 would be the wave offset.
    let kernel = exec::Kernel {
        code: Code::decode_for(Target::Gfx940, code_at, &words),
        descriptor: descriptor(1 << 3),
        entry: code_at,
    };
    exec::run_work_group(&kernel, &dispatch, [0, 0, 0], 5, &mem, &Limits::default()).unwrap();
    let want_fs = scratch.base + 5 * scratch.wave_bytes();
    {
        let b = mem.bytes.borrow();
        let rd = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        assert_eq!(u64::from(rd(0)) | u64::from(rd(4)) << 32, want_fs, "FLAT_SCRATCH: scratch base + slot 5");
        assert_eq!(rd(8), 0, "no scratch wave-offset SGPR after the work-group id");
        assert_eq!(rd(12), 0, "work-group id x");
        let at = (want_fs - BASE) as usize + 2 * 256; // private dword 2 of lane 0
        assert_eq!(rd(at), 0x1234, "the scratch store went to the wave's own slot");
    }
    // Decoded as gfx90a (without the scratch store, whose encoding means another address
    // there), the wave starts with FLAT_SCRATCH 0 and the offset SGPR set.
    let mem = VecMemory::new(BASE, MEM);
    let no_scratch = asm.replace("scratch_store_dword off, v6, off offset:8\n", "");
    let words90a = common::assemble(&no_scratch);
    let kernel =
        exec::Kernel { code: Code::decode(code_at, &words90a), descriptor: descriptor(1 << 3), entry: code_at };
    exec::run_work_group(&kernel, &dispatch, [0, 0, 0], 5, &mem, &Limits::default()).unwrap();
    {
        let b = mem.bytes.borrow();
        let rd = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        assert_eq!((rd(0), rd(4)), (0, 0));
        assert_eq!(u64::from(rd(8)), 5 * scratch.wave_bytes());
    }
    // Flat scratch init (bit 5) or the private segment buffer (bit 0): not supported on gfx940.
    for props in [1 << 3 | 1 << 5, 1 | 1 << 3] {
        let kernel = exec::Kernel {
            code: Code::decode_for(Target::Gfx940, code_at, &words),
            descriptor: descriptor(props),
            entry: code_at,
        };
        let e = exec::run_work_group(&kernel, &dispatch, [0, 0, 0], 0, &mem, &Limits::default()).unwrap_err();
        assert_eq!(e.kind, ExecErrorKind::Setup, "properties {props:#x}");
    }
}

#[test]
fn gfx940_hardware_registers_20_to_24_are_not_gfx90a_ones() {
    let mem = VecMemory::new(BASE, MEM);
    let mut w = wave();
    let e = run_on("s_getreg_b32 s1, hwreg(HW_REG_XCC_ID)", &mut w, &mem).unwrap_err();
    assert_eq!(e.kind, ExecErrorKind::Unimplemented);
    run("s_getreg_b32 s1, hwreg(HW_REG_MODE)", &mut w, &mem);
    assert_eq!(w.sgpr[1], 0xF0);
}

/// Every gfx940-only opcode the executor implements runs on random registers and modifier bits
/// and ends in a value or an error, never a panic.
#[test]
fn gfx940_opcodes_on_random_words_end_in_a_value() {
    let mem = VecMemory::new(BASE, MEM);
    let mut r = rnd(99);
    let ops: Vec<aqueduct_isa::Op> = exec::implemented().filter(|o| !o.on(Target::Gfx90a)).collect();
    assert!(ops.len() >= 6, "{ops:?}");
    for _ in 0..300 {
        let op = ops[(r() as usize) % ops.len()];
        let s = op.spec();
        let w0 = match s.enc {
            aqueduct_isa::Encoding::Vop1 => 0x7E00_0000 | u32::from(s.code) << 9 | (r() & 0x1fe_01ff),
            aqueduct_isa::Encoding::Vop2 => u32::from(s.code) << 25 | (r() & 0x1ff_ffff),
            aqueduct_isa::Encoding::Vop3 => 0xD000_0000 | u32::from(s.code) << 16 | (r() & 0xffff),
            aqueduct_isa::Encoding::Mubuf => 0xE000_0000 | u32::from(s.code) << 18 | (r() & 0x3_ffff),
            aqueduct_isa::Encoding::Flat => 0xDC00_0000 | u32::from(s.code) << 18 | (r() & 0x3_1fff),
            _ => continue,
        };
        let words = [w0, r(), r(), 0xBF81_0000];
        let code = Code::decode_for(Target::Gfx940, BASE, &words);
        let mut w = wave();
        for reg in w.vgpr.iter_mut() {
            for v in reg.iter_mut() {
                *v = r();
            }
        }
        for s in w.sgpr.iter_mut() {
            *s = r();
        }
        w.exec = u64::from(r()) << 32 | u64::from(r());
        let mut lds = vec![0u8; 4096];
        let _ = run_wave(&code, &mut w, &mem, &mut lds, &Limits { wave_instructions: 100 });
    }
}

/// gfx940's FLAT f32 and packed-f16 atomic adds (the GLOBAL forms' handlers): `sc0` returns the
/// old value.
#[test]
fn flat_float_atomics() {
    let mem = VecMemory::new(BASE, MEM);
    let mut w = wave();
    let at = BASE + 0x100;
    {
        let mut b = mem.bytes.borrow_mut();
        b[0x100..0x104].copy_from_slice(&1.5f32.to_bits().to_le_bytes());
        // f16 pair (1.0, -2.0).
        b[0x104..0x108].copy_from_slice(&(0x3C00u32 | 0xC000 << 16).to_le_bytes());
    }
    w.exec = 1;
    w.vgpr[2][0] = at as u32;
    w.vgpr[3][0] = (at >> 32) as u32;
    w.vgpr[6][0] = (at + 4) as u32;
    w.vgpr[7][0] = ((at + 4) >> 32) as u32;
    w.vgpr[4][0] = 0.25f32.to_bits();
    w.vgpr[5][0] = 0x3800 | 0x3C00 << 16; // (0.5, 1.0)
    run(
        "flat_atomic_add_f32 v1, v[2:3], v4 sc0\nflat_atomic_pk_add_f16 v8, v[6:7], v5 sc0\ns_waitcnt vmcnt(0) lgkmcnt(0)",
        &mut w,
        &mem,
    );
    let b = mem.bytes.borrow();
    assert_eq!(w.vgpr[1][0], 1.5f32.to_bits(), "the old value");
    assert_eq!(u32::from_le_bytes(b[0x100..0x104].try_into().unwrap()), 1.75f32.to_bits());
    assert_eq!(w.vgpr[8][0], 0x3C00 | 0xC000 << 16);
    assert_eq!(u32::from_le_bytes(b[0x104..0x108].try_into().unwrap()), 0x3E00 | 0xBC00 << 16, "(1.5, -1.0)");
}

/// gfx940's `ds_pk_add_f16` and `ds_pk_add_rtn_f16`: both halves of an LDS dword add with one
/// f16 rounding each (as the GLOBAL `pk_add_f16` atomic), the `_rtn` form returning the old dword.
#[test]
fn lds_packed_f16_add() {
    let mem = VecMemory::new(BASE, MEM);
    let code = code("ds_pk_add_f16 v0, v1\nds_pk_add_rtn_f16 v2, v0, v1 offset:4\ns_waitcnt lgkmcnt(0)");
    assert!(code.unimplemented().is_empty(), "{:?}", code.unimplemented());
    let mut w = wave();
    let mut lds = vec![0u8; 4096];
    for l in 0..LANES {
        w.vgpr[0][l] = 8 * l as u32;
        // Dword 0: (1.0, -2.0); dword 1: (2048.0, the smallest subnormal).
        lds[8 * l..8 * l + 4].copy_from_slice(&(0x3C00u32 | 0xC000 << 16).to_le_bytes());
        lds[8 * l + 4..8 * l + 8].copy_from_slice(&(0x6800u32 | 0x0001 << 16).to_le_bytes());
        w.vgpr[1][l] = 0x3800 | 0x3C00 << 16; // (0.5, 1.0)
    }
    w.pc = 0;
    run_wave(&code, &mut w, &mem, &mut lds, &Limits { wave_instructions: 100 }).unwrap();
    for l in 0..LANES {
        let at = |o: usize| u32::from_le_bytes(lds[8 * l + o..8 * l + o + 4].try_into().unwrap());
        assert_eq!(at(0), 0x3E00 | 0xBC00 << 16, "(1.5, -1.0), lane {l}");
        // 2048 + 0.5 is a tie at f16 precision (spacing 2): even, 2048; the subnormal 2^-24 + 1.0
        // rounds to 1.0.
        assert_eq!(at(4), 0x6800 | 0x3C00 << 16, "lane {l}");
        assert_eq!(w.vgpr[2][l], 0x6800 | 0x0001 << 16, "the old dword");
    }
}
