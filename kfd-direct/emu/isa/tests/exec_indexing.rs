//! Register indexing (docs/executor.md §5 "Register indexing"): GPR index mode and the
//! M0-relative SGPR moves, assembled by `llvm-mc-15` at test time and checked against the
//! registers the ISA's definition names.

mod common;

use common::assemble;

use aqueduct_isa::exec::{run_wave, Code, ExecError, ExecErrorKind, Limits, VecMemory, Wave, LANES};

const BASE: u64 = 0x1_0000_0000;

fn wave() -> Wave {
    let mut w = Wave::new(32, 8);
    w.exec = u64::MAX;
    w.mode = 0xF0;
    for r in 0..32 {
        w.vgpr[r] = core::array::from_fn(|l| (r as u32) << 16 | l as u32);
    }
    for (i, s) in w.sgpr.iter_mut().enumerate() {
        *s = 0x5000 + i as u32;
    }
    w
}

fn try_run(asm: &str, w: &mut Wave) -> Result<(), ExecError> {
    let code = Code::decode(BASE, &assemble(&format!("{asm}\ns_endpgm")));
    assert!(code.unimplemented().is_empty(), "{asm}: {:?}", code.unimplemented());
    w.pc = 0;
    let mem = VecMemory::new(BASE, 0);
    let mut lds = vec![0u8; 64];
    run_wave(&code, w, &mem, &mut lds, &Limits { wave_instructions: 1000 })
}

fn run(asm: &str, w: &mut Wave) {
    try_run(asm, w).unwrap_or_else(|e| panic!("{asm}: {e}"));
}

/// The value `wave()` put in v`r`, lane `l`.
fn init(r: u32, l: usize) -> u32 {
    r << 16 | l as u32
}

#[test]
fn gpr_index_mode_offsets_the_enabled_operands_until_it_is_turned_off() {
    let mut w = wave();
    w.sgpr[0] = 0x103; // M0[7:0] takes the low byte only: an index of 3
    w.m0 = 0xFFFF_0000;
    run(
        "s_set_gpr_idx_on s0, gpr_idx(SRC0)\n\
         v_mov_b32_e32 v20, v1\n\
         s_set_gpr_idx_off\n\
         v_mov_b32_e32 v21, v1",
        &mut w,
    );
    for l in 0..LANES {
        assert_eq!(w.vgpr[20][l], init(4, l), "indexed source: v1 + 3 = v4");
        assert_eq!(w.vgpr[21][l], init(1, l), "index mode off: v1 itself");
    }
    // M0[15:12] = the mode, M0[7:0] = the index, the rest of M0 kept; MODE's bit 27 clear again.
    assert_eq!(w.m0, 0xFFFF_1003);
    assert_eq!(w.mode & 1 << 27, 0);

    // The destination and two sources at once, with s_set_gpr_idx_idx / _mode changing them.
    let mut w = wave();
    w.sgpr[0] = 2;
    w.sgpr[1] = 5;
    w.exec = 0xFFFF_0000_FFFF_0000;
    run(
        "s_set_gpr_idx_on s0, gpr_idx(SRC1,DST)\n\
         v_add_u32_e32 v10, v1, v2\n\
         s_set_gpr_idx_idx s1\n\
         s_set_gpr_idx_mode gpr_idx(SRC0,SRC2)\n\
         v_mad_u32_u24 v11, v1, 1, v3\n\
         s_set_gpr_idx_off",
        &mut w,
    );
    for l in 0..LANES {
        let on = w.exec >> l & 1 != 0;
        // v12 = v1 + v(2+2); v11 = v(1+5)·1 + v(3+5) (24-bit product of the low bits).
        let add = init(1, l).wrapping_add(init(4, l));
        assert_eq!(w.vgpr[12][l], if on { add } else { init(12, l) }, "lane {l}: v10 + 2");
        assert_eq!(w.vgpr[10][l], init(10, l), "v10 itself untouched");
        let mad = (init(6, l) & 0xFF_FFFF).wrapping_add(init(8, l));
        assert_eq!(w.vgpr[11][l], if on { mad } else { init(11, l) }, "lane {l}: unindexed destination");
    }
}

#[test]
fn gpr_index_mode_leaves_scalar_and_memory_operands_and_reaches_register_pairs() {
    let mut w = wave();
    w.sgpr[0] = 2;
    // SALU in the region is not indexed; the 64-bit source pair moves as a whole.
    run(
        "s_set_gpr_idx_on s0, gpr_idx(SRC1)\n\
         s_mov_b32 s10, s3\n\
         v_lshlrev_b64 v[20:21], 4, v[2:3]\n\
         s_set_gpr_idx_off",
        &mut w,
    );
    assert_eq!(w.sgpr[10], 0x5003);
    for l in 0..LANES {
        let v = (u64::from(init(5, l)) << 32 | u64::from(init(4, l))) << 4;
        assert_eq!((w.vgpr[20][l], w.vgpr[21][l]), (v as u32, (v >> 32) as u32), "lane {l}: v[4:5] << 4");
    }
}

#[test]
fn gpr_index_past_the_register_file_is_an_error_naming_the_instruction() {
    let mut w = wave();
    w.sgpr[0] = 40; // v1 + 40 = v41: the wave has 32
    let e = try_run("s_set_gpr_idx_on s0, gpr_idx(SRC0)\nv_mov_b32_e32 v20, v1", &mut w).unwrap_err();
    assert!(matches!(e.kind, ExecErrorKind::RegisterOutOfRange), "{e}");
    assert!(e.to_string().contains("v_mov_b32"), "{e}");
    assert_eq!(e.pc, BASE + 4, "the indexed instruction's PC");
}

#[test]
fn movrels_and_movreld_address_sgprs_relative_to_m0() {
    let mut w = wave();
    w.sgpr[20] = 0xAAAA;
    w.sgpr[21] = 0xBBBB;
    w.sgpr[22] = 0xCCCC;
    w.m0 = 4;
    run(
        "s_movrels_b32 s1, s16\n\
         s_movrels_b64 s[2:3], s[18:19]\n\
         s_movreld_b32 s30, 0x77\n\
         s_movreld_b64 s[40:41], s[20:21]",
        &mut w,
    );
    assert_eq!(w.sgpr[1], 0xAAAA, "s16 + 4 = s20");
    assert_eq!((w.sgpr[2], w.sgpr[3]), (0xCCCC, 0x5000 + 23), "s[22:23]");
    assert_eq!(w.sgpr[34], 0x77, "s30 + 4");
    assert_eq!(w.sgpr[30], 0x5000 + 30, "s30 itself untouched");
    assert_eq!((w.sgpr[44], w.sgpr[45]), (0xAAAA, 0xBBBB), "s[44:45]");
    // Past s101: an error, not a write elsewhere.
    let mut w = wave();
    w.m0 = 100;
    let e = try_run("s_movreld_b32 s10, 1", &mut w).unwrap_err();
    assert!(matches!(e.kind, ExecErrorKind::RegisterOutOfRange), "{e}");
}
