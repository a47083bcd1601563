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
    for _ in 0..1500 {
        let op = ops[(r() as usize) % ops.len()];
        let s = op.spec();
        let w0 = match s.enc {
            aqueduct_isa::Encoding::Vop1 => 0x7E00_0000 | u32::from(s.code) << 9 | (r() & 0x1fe_01ff),
            aqueduct_isa::Encoding::Vop2 => u32::from(s.code) << 25 | (r() & 0x1ff_ffff),
            aqueduct_isa::Encoding::Vop3 => 0xD000_0000 | u32::from(s.code) << 16 | (r() & 0xffff),
            aqueduct_isa::Encoding::Mubuf => 0xE000_0000 | u32::from(s.code) << 18 | (r() & 0x3_ffff),
            aqueduct_isa::Encoding::Flat => 0xDC00_0000 | u32::from(s.code) << 18 | (r() & 0x3_1fff),
            aqueduct_isa::Encoding::Global => 0xDC00_8000 | u32::from(s.code) << 18 | (r() & 0x3_3fff),
            aqueduct_isa::Encoding::Scratch => 0xDC00_4000 | u32::from(s.code) << 18 | (r() & 0x3_3fff),
            aqueduct_isa::Encoding::Ds => 0xD800_0000 | u32::from(s.code) << 17 | (r() & 0x1_ffff),
            aqueduct_isa::Encoding::Vop3p => 0xD380_0000 | u32::from(s.code) << 16 | (r() & 0xffff),
            _ => continue,
        };
        let mut words = [w0, r(), r(), 0xBF81_0000];
        if s.enc == aqueduct_isa::Encoding::Vop3p && r() % 2 == 0 {
            // Matrix forms without cbsz/abid/blgp, on registers inside the allocation, so they
            // reach their arithmetic.
            words[0] = (w0 & !0x3FFF) | (r() % 24) | (r() & 0x8000);
            words[1] = (256 + r() % 24) | (256 + r() % 24) << 9 | (256 + r() % 24) << 18 | (r() & 0x1800_0000);
        }
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
        // A full EXEC now and then, so the matrix instructions run past their EXEC check.
        w.exec = if r() % 4 == 0 { u64::MAX } else { u64::from(r()) << 32 | u64::from(r()) };
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

// ---------------------------------------------------------------------------------------------
// fp8 and bf8 (docs/executor.md §8 "fp8 and bf8")

/// The two FNUZ formats: (mantissa bits, bias).
const FP8: (i32, i32) = (3, 8);
const BF8: (i32, i32) = (2, 16);

/// A reference decoder written from the formats' definition: sign, exponent field, mantissa;
/// no infinities, no negative zero, 0x80 the one NaN; `None` for the NaN.
fn ref_f8(fmt: (i32, i32), b: u8) -> Option<f64> {
    let (mb, bias) = fmt;
    if b == 0x80 {
        return None;
    }
    let e = i32::from(b & 0x7F) >> mb;
    let m = f64::from(i32::from(b) & ((1 << mb) - 1)) / f64::from(1 << mb);
    let v = if e == 0 { m * 2f64.powi(1 - bias) } else { (1.0 + m) * 2f64.powi(e - bias) };
    Some(if b & 0x80 != 0 { -v } else { v })
}

/// Round to nearest even by search over every code: the nearest finite value, a tie to the
/// code with an even mantissa; at or beyond the midpoint above the largest value, the NaN.
fn ref_rne(fmt: (i32, i32), x: f32) -> u8 {
    if !x.is_finite() {
        return 0x80;
    }
    let x = f64::from(x);
    let max = ref_f8(fmt, 0x7F).unwrap();
    let top_ulp = 2f64.powi((1 << (7 - fmt.0)) - 1 - fmt.1 - fmt.0);
    if x.abs() >= max + top_ulp / 2.0 {
        return 0x80;
    }
    let mut best = 0u8;
    for c in 0u8..=0xFF {
        let Some(v) = ref_f8(fmt, c) else { continue };
        let b = ref_f8(fmt, best).unwrap();
        let (dc, db) = ((v - x).abs(), (b - x).abs());
        if dc < db || (dc == db && c & 1 == 0 && best & 1 == 1) {
            best = c;
        }
    }
    if ref_f8(fmt, best) == Some(0.0) {
        0
    } else {
        best
    }
}

/// Stochastic rounding as AMD's reference model defines it: with u the result's last place at
/// |x| (its binade's, or the subnormals'), |x| / u truncated to 23 − mb fraction bits, the low
/// 23 − mb random bits added as a fraction, and the sum truncated; the code found by search.
fn ref_sr(fmt: (i32, i32), x: f32, rnd: u32) -> u8 {
    if !x.is_finite() {
        return 0x80;
    }
    let (mb, bias) = fmt;
    let a = f64::from(x).abs();
    if a == 0.0 {
        return 0;
    }
    let e = (a.log2().floor() as i32).max(1 - bias);
    // log2 may round up just below a power of two: fix the binade exactly.
    let e = if a < 2f64.powi(e) && e > 1 - bias { e - 1 } else { e };
    let u = 2f64.powi(e - mb);
    let d = 23 - mb;
    let t = (a / u * 2f64.powi(d)).floor();
    let r = f64::from(rnd & ((1 << d) - 1));
    let v = ((t + r) / 2f64.powi(d)).floor() * u;
    if v == 0.0 {
        return 0;
    }
    let want = if x < 0.0 { -v } else { v };
    (0u8..=0xFF).find(|&c| ref_f8(fmt, c) == Some(want)).unwrap_or(0x80)
}

fn ref_f32(fmt: (i32, i32), b: u8) -> u32 {
    ref_f8(fmt, b).map_or(0x7FC0_0000, |v| (v as f32).to_bits())
}

/// Every fp8 and bf8 code to f32 through every byte position: VOP1, VOP3, SDWA `BYTE_0..3`
/// (also from an SGPR), the packed forms with SDWA `WORD_1`, clamp and omod, over a partial EXEC.
#[test]
fn fp8_and_bf8_codes_convert_exactly_to_f32() {
    let mem = VecMemory::new(BASE, MEM);
    let asm = "v_cvt_f32_fp8_e32 v10, v1\nv_cvt_f32_fp8_sdwa v11, v1 src0_sel:BYTE_1\n\
               v_cvt_f32_fp8_sdwa v12, v1 src0_sel:BYTE_2\nv_cvt_f32_fp8_sdwa v13, v1 src0_sel:BYTE_3\n\
               v_cvt_f32_bf8_e64 v14, v1\nv_cvt_f32_bf8_sdwa v15, v1 src0_sel:BYTE_1\n\
               v_cvt_f32_bf8_sdwa v16, v1 src0_sel:BYTE_2\nv_cvt_f32_bf8_sdwa v17, v1 src0_sel:BYTE_3\n\
               v_cvt_pk_f32_fp8_e32 v[18:19], v1\nv_cvt_pk_f32_fp8_sdwa v[20:21], v1 src0_sel:WORD_1\n\
               v_cvt_pk_f32_bf8_e64 v[22:23], v1\nv_cvt_pk_f32_bf8_sdwa v[24:25], v1 src0_sel:WORD_1\n\
               v_cvt_f32_fp8_sdwa v26, s4 src0_sel:BYTE_2\nv_cvt_f32_bf8_e64 v27, v1 clamp\n\
               v_cvt_f32_fp8_e64 v28, v1 mul:4\nv_cvt_f32_fp8_sdwa v29, v1 clamp src0_sel:BYTE_3";
    let mut r = rnd(21);
    for base in (0..256).step_by(LANES) {
        let mut w = wave();
        w.exec = 0xFFFF_7FFF_FFFF_FFFE;
        // Byte k of lane l holds code base + l + 64k (mod 256): every code in every byte.
        let code_at = |l: usize, k: usize| ((base + l + 64 * k) % 256) as u8;
        for l in 0..LANES {
            w.vgpr[1][l] = (0..4).map(|k| u32::from(code_at(l, k)) << (8 * k)).sum();
            for reg in 10..30 {
                w.vgpr[reg][l] = 0xDEAD_0000 | reg as u32;
            }
        }
        w.sgpr[4] = r();
        run(asm, &mut w, &mem);
        let sgpr_byte = (w.sgpr[4] >> 16) as u8;
        for l in 0..LANES {
            if w.exec >> l & 1 == 0 {
                for reg in 10..30 {
                    assert_eq!(w.vgpr[reg][l], 0xDEAD_0000 | reg as u32, "lane {l} is inactive");
                }
                continue;
            }
            for k in 0..4 {
                let c = code_at(l, k);
                assert_eq!(w.vgpr[10 + k][l], ref_f32(FP8, c), "fp8 {c:#04x} from byte {k}");
                assert_eq!(w.vgpr[14 + k][l], ref_f32(BF8, c), "bf8 {c:#04x} from byte {k}");
            }
            let pk = |fmt, k: usize| [ref_f32(fmt, code_at(l, k)), ref_f32(fmt, code_at(l, k + 1))];
            assert_eq!([w.vgpr[18][l], w.vgpr[19][l]], pk(FP8, 0));
            assert_eq!([w.vgpr[20][l], w.vgpr[21][l]], pk(FP8, 2));
            assert_eq!([w.vgpr[22][l], w.vgpr[23][l]], pk(BF8, 0));
            assert_eq!([w.vgpr[24][l], w.vgpr[25][l]], pk(BF8, 2));
            assert_eq!(w.vgpr[26][l], ref_f32(FP8, sgpr_byte), "an SGPR source");
            // clamp: [0, 1], the NaN to 0; omod ×4 exact.
            let clamped = ref_f8(BF8, code_at(l, 0)).map_or(0.0, |v| v.clamp(0.0, 1.0)) as f32;
            assert_eq!(w.vgpr[27][l], clamped.to_bits(), "clamp of bf8 {:#04x}", code_at(l, 0));
            let times4 = ref_f8(FP8, code_at(l, 0)).map_or(0x7FC0_0000, |v| ((v * 4.0) as f32).to_bits());
            assert_eq!(w.vgpr[28][l], times4);
            let clamped = ref_f8(FP8, code_at(l, 3)).map_or(0.0, |v| v.clamp(0.0, 1.0)) as f32;
            assert_eq!(w.vgpr[29][l], clamped.to_bits(), "SDWA clamp");
        }
    }
}

/// The f32 inputs of the f32 → fp8/bf8 tests: ±0, ±∞, NaNs, every code's value, the midpoints
/// of neighbouring codes and one f32 ulp either side, the overflow thresholds, f32 subnormals,
/// then random bit patterns over the formats' exponent range and beyond.
fn f8_inputs(r: &mut impl FnMut() -> u32) -> Vec<u32> {
    let mut v: Vec<u32> = vec![
        0,
        0x8000_0000,
        0x7F80_0000,
        0xFF80_0000,
        0x7FC0_0000,
        0xFFC0_0001,
        0x7F80_0001,
        1,
        0x8000_0001,
        0x007F_FFFF,
    ];
    for fmt in [FP8, BF8] {
        let vals: Vec<f64> = (0u8..0x80).filter_map(|c| ref_f8(fmt, c)).collect();
        let max = *vals.last().unwrap();
        let top_ulp = 2f64.powi((1 << (7 - fmt.0)) - 1 - fmt.1 - fmt.0);
        let mut pts = vals.clone();
        pts.extend(vals.windows(2).map(|p| (p[0] + p[1]) / 2.0));
        pts.extend([max + top_ulp / 2.0, max + top_ulp, max * 4.0, vals[1] / 2.0, vals[1] / 4.0, vals[1] * 0.75]);
        for p in pts {
            let b = (p as f32).to_bits();
            for x in [b, b + 1, b.wrapping_sub(1)] {
                v.extend([x, x | 0x8000_0000]);
            }
        }
    }
    for _ in 0..4096 {
        // Exponents 2^-30 .. 2^20 mostly, any exponent sometimes.
        let x = r();
        let e = if x & 7 == 0 { (x >> 3) & 0xFF } else { 97 + (x >> 3) % 50 };
        v.push((x & 0x807F_FFFF) | (e << 23));
    }
    v
}

/// f32 → fp8/bf8, round to nearest even (`v_cvt_pk_*_f32`, both words, neg/abs, an inline
/// constant) and stochastic with random bits (`v_cvt_sr_*_f32`, every byte), against the search
/// references above; the untouched word and bytes of D kept, inactive lanes untouched.
#[test]
fn f32_converts_to_fp8_and_bf8_as_rounded_by_the_references() {
    let mem = VecMemory::new(BASE, MEM);
    let mut r = rnd(33);
    let inputs = f8_inputs(&mut r);
    let asm = "v_cvt_pk_fp8_f32 v3, v1, v2\nv_cvt_pk_bf8_f32 v4, v1, v2 op_sel:[0,0,1]\n\
               v_cvt_pk_fp8_f32 v5, -v1, |v2| op_sel:[0,0,1]\nv_cvt_pk_bf8_f32 v6, v2, 1.0\n\
               v_cvt_sr_fp8_f32 v7, v1, v9\nv_cvt_sr_fp8_f32 v8, v2, v9 op_sel:[0,0,1,1]\n\
               v_cvt_sr_bf8_f32 v10, v1, v9 op_sel:[0,0,1,0]\nv_cvt_sr_bf8_f32 v11, -v2, v9 op_sel:[0,0,0,1]\n\
               v_cvt_sr_fp8_f32 v12, v1, 0\nv_cvt_sr_fp8_f32 v13, v1, -1";
    let code = code(asm);
    assert!(code.unimplemented().is_empty(), "{:?}", code.unimplemented());
    let mut checked = 0;
    for chunk in inputs.chunks(LANES) {
        let mut w = wave();
        w.exec = u64::from(r()) << 32 | u64::from(r()) | 1;
        let mut old = [[0u32; LANES]; 14];
        let mut b = [0u32; LANES];
        for l in 0..LANES {
            w.vgpr[1][l] = chunk[l % chunk.len()];
            b[l] = inputs[r() as usize % inputs.len()];
            w.vgpr[2][l] = b[l];
            w.vgpr[9][l] = r();
            for reg in [3, 4, 5, 6, 7, 8, 10, 11, 12, 13] {
                old[reg][l] = r();
                w.vgpr[reg][l] = old[reg][l];
            }
        }
        w.pc = 0;
        let mut lds = vec![0u8; 64];
        run_wave(&code, &mut w, &mem, &mut lds, &Limits { wave_instructions: 100 }).unwrap();
        for l in 0..LANES {
            if w.exec >> l & 1 == 0 {
                for reg in [3, 4, 5, 6, 7, 8, 10, 11, 12, 13] {
                    assert_eq!(w.vgpr[reg][l], old[reg][l], "lane {l} is inactive");
                }
                continue;
            }
            checked += 1;
            let (a, b, rn) = (f32::from_bits(w.vgpr[1][l]), f32::from_bits(b[l]), w.vgpr[9][l]);
            let pk = |fmt, x: f32, y: f32| u32::from(ref_rne(fmt, x)) | u32::from(ref_rne(fmt, y)) << 8;
            let lo = |o: u32, p: u32| (o & 0xFFFF_0000) | p;
            let hi = |o: u32, p: u32| (o & 0xFFFF) | p << 16;
            let byte = |o: u32, k: u32, c: u8| (o & !(0xFF << (8 * k))) | u32::from(c) << (8 * k);
            let ctx = format!("lane {l}: a {:#010x} b {:#010x} rnd {rn:#010x}", a.to_bits(), b.to_bits());
            assert_eq!(w.vgpr[3][l], lo(old[3][l], pk(FP8, a, b)), "pk fp8 {ctx}");
            assert_eq!(w.vgpr[4][l], hi(old[4][l], pk(BF8, a, b)), "pk bf8 {ctx}");
            assert_eq!(w.vgpr[5][l], hi(old[5][l], pk(FP8, -a, b.abs())), "pk fp8 neg/abs {ctx}");
            assert_eq!(w.vgpr[6][l], lo(old[6][l], pk(BF8, b, 1.0)), "pk bf8 constant {ctx}");
            assert_eq!(w.vgpr[7][l], byte(old[7][l], 0, ref_sr(FP8, a, rn)), "sr fp8 {ctx}");
            assert_eq!(w.vgpr[8][l], byte(old[8][l], 3, ref_sr(FP8, b, rn)), "sr fp8 byte 3 {ctx}");
            assert_eq!(w.vgpr[10][l], byte(old[10][l], 1, ref_sr(BF8, a, rn)), "sr bf8 byte 1 {ctx}");
            assert_eq!(w.vgpr[11][l], byte(old[11][l], 2, ref_sr(BF8, -b, rn)), "sr bf8 byte 2 {ctx}");
            // No random bits: truncation toward zero; all ones: up unless exact.
            assert_eq!(w.vgpr[12][l], byte(old[12][l], 0, ref_sr(FP8, a, 0)), "sr fp8 rnd 0 {ctx}");
            assert_eq!(w.vgpr[13][l], byte(old[13][l], 0, ref_sr(FP8, a, u32::MAX)), "sr fp8 rnd -1 {ctx}");
        }
    }
    assert!(checked > 2000, "{checked}");
}

/// Integer identities of stochastic rounding, independent of the reference: the result is one
/// of the two codes around x (or the NaN past the largest), random bits 0 truncate and the
/// frequency of rounding up over all 2^20 fractions matches x's position between them.
#[test]
fn stochastic_rounding_picks_a_neighbour_in_proportion() {
    let mem = VecMemory::new(BASE, MEM);
    let code = code("v_cvt_sr_fp8_f32 v3, v1, v2");
    // x = 1 + 1/16 + 1/64: between 1.0 and 1.125 (fp8 spacing 1/8 in [1, 2)), 5/8 of the way.
    let x = 1.0f32 + 0.0625 + 0.015625;
    let mut up = 0u64;
    let steps = 1u32 << 14;
    for chunk in 0..steps / LANES as u32 {
        let mut w = wave();
        for l in 0..LANES {
            w.vgpr[1][l] = x.to_bits();
            // Random fractions spread over the 20 used bits (the high 12 bits are ignored).
            w.vgpr[2][l] = (chunk * LANES as u32 + l as u32) << 6 | 0xABC0_0000;
        }
        w.pc = 0;
        let mut lds = vec![0u8; 64];
        run_wave(&code, &mut w, &mem, &mut lds, &Limits { wave_instructions: 10 }).unwrap();
        for l in 0..LANES {
            match w.vgpr[3][l] & 0xFF {
                0x40 => {}       // 1.0
                0x41 => up += 1, // 1.125
                c => panic!("code {c:#x} is not a neighbour of {x}"),
            }
        }
    }
    assert_eq!(up * 8, u64::from(steps) * 5, "5/8 of the fractions round up");
}

// ---------------------------------------------------------------------------------------------
// LDS DMA (docs/executor.md §8 "LDS DMA")

fn run_lds(asm: &str, w: &mut Wave, mem: &VecMemory, lds: &mut Vec<u8>) {
    let code = code(asm);
    assert!(code.unimplemented().is_empty(), "{asm}: {:?}", code.unimplemented());
    w.pc = 0;
    run_wave(&code, w, mem, lds, &Limits { wave_instructions: 10_000 }).unwrap_or_else(|e| panic!("{asm}: {e}"));
}

/// `global_load_lds_*` (VGPR and SGPR + VGPR addresses, a negative offset), `scratch_load_lds_*`
/// and MUBUF `lds` loads of bytes, shorts and dwords: each active lane's value, zero- or
/// sign-extended, lands in the LDS dword at M0 + offset + 4 × lane; inactive lanes' dwords and
/// every VGPR keep their values.
#[test]
fn lds_dma_loads_write_extended_lane_dwords_at_m0() {
    let mem = VecMemory::new(BASE, MEM);
    let mut r = rnd(0x1D5);
    {
        let mut b = mem.bytes.borrow_mut();
        for x in b[..0x2000].iter_mut() {
            *x = r() as u8;
        }
    }
    let word = |at: usize, n: usize, signed: bool| -> u32 {
        let b = mem.bytes.borrow();
        let v = b[at..at + n].iter().rev().fold(0u32, |t, &x| t << 8 | u32::from(x));
        match (n, signed) {
            (1, true) => v as u8 as i8 as i32 as u32,
            (2, true) => v as u16 as i16 as i32 as u32,
            _ => v,
        }
    };
    let kinds =
        [("ubyte", 1, false), ("sbyte", 1, true), ("ushort", 2, false), ("sshort", 2, true), ("dword", 4, false)];
    for (kind, n, signed) in kinds {
        let mut w = wave();
        w.exec = u64::from(r()) << 32 | u64::from(r()) | 1;
        let m0 = 0x40 + 4 * (r() % 16);
        w.m0 = m0;
        let offs: Vec<u32> = (0..LANES).map(|_| r() % 0x1000).collect();
        for l in 0..LANES {
            // v[2:3]: a 64-bit address; v4: an offset from s[4:5].
            set_v64(&mut w, 2, l, BASE + u64::from(offs[l]) + 8);
            w.vgpr[4][l] = offs[l] + 0x800;
        }
        w.sgpr[4] = BASE as u32;
        w.sgpr[5] = (BASE >> 32) as u32;
        let before: Vec<Vec<u32>> = (0..8).map(|r| w.vgpr[r].to_vec()).collect();
        let mut lds = vec![0xA5u8; 4096];
        let asm = format!(
            "global_load_lds_{kind} v[2:3], off offset:-8\ns_add_u32 m0, m0, 0x400\n\
             global_load_lds_{kind} v4, s[4:5] offset:16\ns_waitcnt vmcnt(0)"
        );
        run_lds(&asm, &mut w, &mem, &mut lds);
        let at = |o: u32| u32::from_le_bytes(lds[o as usize..o as usize + 4].try_into().unwrap());
        for l in 0..LANES {
            let (a, b) = (m0 - 8 + 4 * l as u32, m0 + 0x400 + 16 + 4 * l as u32);
            if w.exec >> l & 1 == 0 {
                assert_eq!((at(a), at(b)), (0xA5A5_A5A5, 0xA5A5_A5A5), "{kind}: lane {l} is inactive");
                continue;
            }
            assert_eq!(at(a), word(offs[l] as usize, n, signed), "{kind}: lane {l}");
            assert_eq!(at(b), word(offs[l] as usize + 0x810, n, signed), "{kind}: lane {l}");
        }
        for r in 0..8 {
            assert_eq!(w.vgpr[r].to_vec(), before[r], "{kind}: v{r} unchanged");
        }
    }
    // Scratch: a dword stored per lane, read back as each width into LDS.
    for (kind, n, signed) in kinds {
        let mut w = wave();
        let vals: Vec<u32> = (0..LANES).map(|_| r()).collect();
        for l in 0..LANES {
            w.vgpr[1][l] = vals[l];
            w.vgpr[2][l] = 16;
        }
        w.m0 = 0x100;
        let mut lds = vec![0u8; 4096];
        run_lds(
            &format!("scratch_store_dword v2, v1, off\ns_waitcnt vmcnt(0)\nscratch_load_lds_{kind} v2, off\ns_waitcnt vmcnt(0)"),
            &mut w,
            &mem,
            &mut lds,
        );
        for l in 0..LANES {
            let o = 0x100 + 4 * l;
            let got = u32::from_le_bytes(lds[o..o + 4].try_into().unwrap());
            let v = vals[l] & if n == 4 { u32::MAX } else { (1 << (8 * n)) - 1 };
            let want = match (n, signed) {
                (1, true) => v as u8 as i8 as i32 as u32,
                (2, true) => v as u16 as i16 as i32 as u32,
                _ => v,
            };
            assert_eq!(got, want, "scratch {kind}: lane {l}");
        }
    }
    // MUBUF: a raw buffer at BASE, offen, the instruction offset applied to both addresses.
    for (kind, n, signed) in kinds {
        let mut w = wave();
        w.sgpr[8] = BASE as u32;
        w.sgpr[9] = (BASE >> 32) as u32;
        w.sgpr[10] = 0x2000; // NUM_RECORDS
        w.sgpr[11] = 0x0002_7000; // 32-bit data format
        let offs: Vec<u32> = (0..LANES).map(|_| r() % 0x1000).collect();
        w.vgpr[1].copy_from_slice(&offs);
        w.m0 = 0x200;
        let mut lds = vec![0u8; 4096];
        run_lds(
            &format!("buffer_load_{kind} v1, s[8:11], 0 offen offset:12 lds\ns_waitcnt vmcnt(0)"),
            &mut w,
            &mem,
            &mut lds,
        );
        for l in 0..LANES {
            let o = 0x200 + 12 + 4 * l;
            let got = u32::from_le_bytes(lds[o..o + 4].try_into().unwrap());
            assert_eq!(got, word(offs[l] as usize + 12, n, signed), "buffer {kind}: lane {l}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// bf16 packed adds (docs/executor.md §8)

/// bf16 a + b by the definition: the f64 sum (two bf16 are at most 2^262 apart, f64 rounds it
/// with more than twice bf16's precision, so no double-rounding error) rounded to 8 significant
/// bits, ties to even, in f64 arithmetic; subnormals below 2^-126, infinities beyond 2^128.
fn ref_bf16_add(a: u16, b: u16) -> u16 {
    let (x, y) = (f64::from(f32::from_bits(u32::from(a) << 16)), f64::from(f32::from_bits(u32::from(b) << 16)));
    let s = x + y;
    if s.is_nan() {
        return 0x7FC0; // checked as "a NaN" below
    }
    if s.is_infinite() || s == 0.0 {
        return ((s as f32).to_bits() >> 16) as u16;
    }
    let e = (s.abs().log2().floor() as i32).max(-126);
    let e = if s.abs() < 2f64.powi(e) && e > -126 { e - 1 } else { e };
    let q = 2f64.powi(e - 7);
    let n = s.abs() / q;
    let fl = n.floor();
    let r = if n - fl > 0.5 || (n - fl == 0.5 && fl % 2.0 == 1.0) { fl + 1.0 } else { fl } * q;
    let r = if s < 0.0 { -r } else { r };
    if r.abs() >= 2f64.powi(128) {
        return if r < 0.0 { 0xFF80 } else { 0x7F80 };
    }
    ((r as f32).to_bits() >> 16) as u16
}

fn bf16_pair_ok(got: u32, a: u32, b: u32) -> bool {
    (0..2).all(|h| {
        let (g, x, y) = ((got >> (16 * h)) as u16, (a >> (16 * h)) as u16, (b >> (16 * h)) as u16);
        let want = ref_bf16_add(x, y);
        if want == 0x7FC0 {
            g & 0x7F80 == 0x7F80 && g & 0x7F != 0
        } else {
            g == want
        }
    })
}

/// Random bf16: any finite or special pattern, biased to nearby exponents so sums round, plus
/// ties and subnormals.
fn rnd_bf16(r: &mut impl FnMut() -> u32) -> u16 {
    let x = r();
    match x % 8 {
        0 => (x >> 16) as u16,
        1 => (x >> 16) as u16 & 0x807F,            // subnormals
        2 => 0x7F7F | ((x >> 16) as u16 & 0x8000), // the largest finite
        _ => (x >> 16) as u16 & 0x80FF | 0x3F00,   // [0.5, 4)
    }
}

/// `ds_pk_add_bf16` and `_rtn`, `global_atomic_pk_add_bf16` (with and without `sc0`, an SGPR
/// base) and `flat_atomic_pk_add_bf16`: both halves of each dword rounded once to bf16 as the
/// reference above says; the returning forms yield the old dword; inactive lanes touch nothing.
#[test]
fn bf16_packed_adds_round_each_half_once() {
    let mem = VecMemory::new(BASE, MEM);
    let mut r = rnd(0xBF16);
    for _ in 0..8 {
        let mut w = wave();
        w.exec = u64::from(r()) << 32 | u64::from(r()) | 1;
        let mut lds = vec![0u8; 4096];
        let word = |r: &mut dyn FnMut() -> u32| {
            let mut r2 = || r();
            u32::from(rnd_bf16(&mut r2)) | u32::from(rnd_bf16(&mut r2)) << 16
        };
        let (mut l0, mut l1, mut m0, mut m1, mut add) = ([0u32; 64], [0u32; 64], [0u32; 64], [0u32; 64], [0u32; 64]);
        for l in 0..LANES {
            (l0[l], l1[l], m0[l], m1[l], add[l]) =
                (word(&mut r), word(&mut r), word(&mut r), word(&mut r), word(&mut r));
            lds[8 * l..8 * l + 4].copy_from_slice(&l0[l].to_le_bytes());
            lds[8 * l + 4..8 * l + 8].copy_from_slice(&l1[l].to_le_bytes());
            w.vgpr[0][l] = 8 * l as u32;
            w.vgpr[1][l] = add[l];
            set_v64(&mut w, 2, l, BASE + 0x1000 + 8 * l as u64);
            w.vgpr[6][l] = 0x1004 + 8 * l as u32;
            w.vgpr[7][l] = 0x5555_5555;
            w.vgpr[8][l] = 0x5555_5555;
        }
        {
            let mut b = mem.bytes.borrow_mut();
            for l in 0..LANES {
                b[0x1000 + 8 * l..0x1004 + 8 * l].copy_from_slice(&m0[l].to_le_bytes());
                b[0x1004 + 8 * l..0x1008 + 8 * l].copy_from_slice(&m1[l].to_le_bytes());
            }
        }
        w.sgpr[4] = BASE as u32;
        w.sgpr[5] = (BASE >> 32) as u32;
        run_lds(
            "ds_pk_add_bf16 v0, v1\nds_pk_add_rtn_bf16 v5, v0, v1 offset:4\nglobal_atomic_pk_add_bf16 v[2:3], v1, off\n\
             global_atomic_pk_add_bf16 v7, v6, v1, s[4:5] sc0\nflat_atomic_pk_add_bf16 v8, v[2:3], v1 sc0\n\
             s_waitcnt vmcnt(0) lgkmcnt(0)",
            &mut w,
            &mem,
            &mut lds,
        );
        let b = mem.bytes.borrow();
        for l in 0..LANES {
            let at = |m: &[u8], o: usize| u32::from_le_bytes(m[o..o + 4].try_into().unwrap());
            let (g0, g1) = (at(&lds, 8 * l), at(&lds, 8 * l + 4));
            let (h0, h1) = (at(&b, 0x1000 + 8 * l), at(&b, 0x1004 + 8 * l));
            if w.exec >> l & 1 == 0 {
                assert_eq!((g0, g1, h0, h1), (l0[l], l1[l], m0[l], m1[l]), "lane {l} is inactive");
                assert_eq!((w.vgpr[7][l], w.vgpr[8][l]), (0x5555_5555, 0x5555_5555));
                continue;
            }
            let ctx = format!("lane {l}: {:#010x} + {:#010x}", l0[l], add[l]);
            assert!(bf16_pair_ok(g0, l0[l], add[l]), "ds_pk_add_bf16 {g0:#010x} {ctx}");
            assert!(bf16_pair_ok(g1, l1[l], add[l]), "ds_pk_add_rtn_bf16 {g1:#010x}");
            assert_eq!(w.vgpr[5][l], l1[l], "the old LDS dword");
            // Memory dword 0: two adds (global, then flat sc0 returning the sum between);
            // dword 1: one (global sc0 through s[4:5] + v6, returning the old dword).
            let mid = w.vgpr[8][l];
            assert!(bf16_pair_ok(mid, m0[l], add[l]), "global {mid:#010x}");
            assert!(bf16_pair_ok(h0, mid, add[l]), "flat sc0 {h0:#010x}");
            assert_eq!(w.vgpr[7][l], m1[l], "the old dword");
            assert!(bf16_pair_ok(h1, m1[l], add[l]), "global sc0 {h1:#010x}");
        }
    }
}
