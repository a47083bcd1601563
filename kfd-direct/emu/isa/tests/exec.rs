//! Instruction semantics of the executor (docs/executor.md): each case is assembled by
//! `llvm-mc-15 -show-encoding` at test time, run on one wave whose registers the test sets, and
//! checked against values computed here independently (integer identities, Rust's IEEE f32
//! operations, EXEC-masked lanes, carries).

#![allow(clippy::needless_range_loop)]

mod common;

use common::assemble;
use common::rnd;

use aqueduct_isa::exec::{self, run_wave, Code, ExecErrorKind, Limits, VecMemory, Wave, LANES};

const BASE: u64 = 0x1_0000_0000;

/// A wave with 32 VGPRs and 8 AGPRs, all lanes active, at instruction 0.
fn wave() -> Wave {
    let mut w = Wave::new(32, 8);
    w.exec = u64::MAX;
    w.mode = 0xF0; // round to nearest even, f32/f64 denormals kept (hipcc's default)
    w
}

/// Runs `asm` followed by `s_endpgm` on `w` with `mem`.
fn run_on(asm: &str, w: &mut Wave, mem: &VecMemory) -> Result<(), exec::ExecError> {
    let code = Code::decode(BASE, &assemble(&format!("{asm}\ns_endpgm")));
    w.pc = 0;
    let mut lds = vec![0u8; 4096];
    run_wave(&code, w, mem, &mut lds, &Limits { wave_instructions: 10_000 })
}

fn run(asm: &str, w: &mut Wave) {
    let mem = VecMemory::new(BASE, 0);
    run_on(asm, w, &mem).unwrap_or_else(|e| panic!("{asm}: {e}"));
}

fn lanes(f: impl Fn(usize) -> u32) -> [u32; LANES] {
    core::array::from_fn(f)
}

#[test]
fn scalar_alu_carries_and_scc() {
    let mut w = wave();
    w.sgpr[0] = 0xFFFF_FFF0;
    w.sgpr[1] = 0x20;
    run("s_add_u32 s2, s0, s1\ns_addc_u32 s3, 0, 0\ns_sub_u32 s4, s1, s0\ns_subb_u32 s5, 0, 0", &mut w);
    assert_eq!(w.sgpr[2], 0x10);
    assert_eq!(w.sgpr[3], 1, "carry of s_add_u32 into s_addc_u32");
    assert_eq!(w.sgpr[4], 0x30);
    assert_eq!(w.sgpr[5], u32::MAX, "borrow into s_subb_u32");
    let mut w = wave();
    w.sgpr[0] = 0x8000_0000;
    run("s_lshl_b64 s[2:3], s[0:1], 1\ns_cselect_b32 s4, 7, 9\ns_and_b32 s5, s0, 0\ns_cselect_b32 s6, 7, 9", &mut w);
    assert_eq!((w.sgpr[2], w.sgpr[3]), (0, 1));
    assert_eq!(w.sgpr[4], 7, "s_lshl_b64 sets SCC for a non-zero result");
    assert_eq!(w.sgpr[6], 9, "s_and_b32 with a zero result clears SCC");
    let mut w = wave();
    w.sgpr[0] = (-7i32) as u32;
    w.sgpr[7] = 0xabcd_1234;
    run("s_mul_i32 s1, s0, 3\ns_bfe_u32 s2, s7, 0x80004\ns_min_i32 s3, s0, 5\ns_movk_i32 s4, 0x8000", &mut w);
    assert_eq!(w.sgpr[1], (-21i32) as u32);
    assert_eq!(w.sgpr[2], 0x23, "bits 11:4");
    assert_eq!(w.sgpr[3], (-7i32) as u32);
    assert_eq!(w.sgpr[4], 0xFFFF_8000, "s_movk_i32 sign-extends");
}

#[test]
fn saveexec_and_exec_masked_vector_writes() {
    let mut w = wave();
    w.vgpr[0] = lanes(|l| l as u32);
    w.vgpr[1] = lanes(|_| 0xDEAD);
    // Lanes 0..20 take the branch body.
    run("v_cmp_gt_u32_e32 vcc, 20, v0\ns_and_saveexec_b64 s[2:3], vcc\nv_add_u32_e32 v1, 100, v0\ns_or_b64 exec, exec, s[2:3]", &mut w);
    assert_eq!(w.vcc, (1 << 20) - 1);
    assert_eq!((u64::from(w.sgpr[2]) | u64::from(w.sgpr[3]) << 32), u64::MAX, "old EXEC saved");
    assert_eq!(w.exec, u64::MAX, "EXEC restored");
    for l in 0..LANES {
        let want = if l < 20 { 100 + l as u32 } else { 0xDEAD };
        assert_eq!(w.vgpr[1][l], want, "lane {l}");
    }
}

#[test]
fn vector_integer_identities_over_random_lanes() {
    let mut r = rnd(7);
    let a: [u32; LANES] = core::array::from_fn(|_| r());
    let b: [u32; LANES] = core::array::from_fn(|_| r());
    let c: [u32; LANES] = core::array::from_fn(|_| r());
    let mut w = wave();
    (w.vgpr[1], w.vgpr[2], w.vgpr[3]) = (a, b, c);
    (w.sgpr[10], w.sgpr[11]) = (0x1111, 0x2222);
    run(
        "v_add_co_u32_e32 v4, vcc, v1, v2
v_addc_co_u32_e32 v5, vcc, v3, v3, vcc
v_sub_co_u32_e64 v6, s[4:5], v1, v2
v_mul_lo_u32 v7, v1, v2
v_mul_hi_u32 v8, v1, v2
v_mad_u64_u32 v[10:11], s[6:7], v1, v2, v[2:3]
v_lshlrev_b64 v[12:13], 5, v[2:3]
v_ashrrev_i32_e32 v14, 3, v1
v_lshl_add_u32 v15, v1, 4, v2
v_cndmask_b32_e64 v16, v1, v2, s[4:5]
v_readfirstlane_b32 s8, v3
v_pk_mov_b32 v[20:21], v[2:3], v[2:3] op_sel:[1,0]
v_pk_mov_b32 v[22:23], s[10:11], s[10:11] op_sel:[0,1]
v_mul_u32_u24_e32 v17, v1, v2
v_bfe_u32 v18, v1, 3, 9",
        &mut w,
    );
    let mut carry = 0u64;
    let mut borrow = 0u64;
    for l in 0..LANES {
        assert_eq!((w.vgpr[20][l], w.vgpr[21][l]), (c[l], b[l]), "v_pk_mov_b32 op_sel");
        assert_eq!((w.vgpr[22][l], w.vgpr[23][l]), (0x1111, 0x2222), "v_pk_mov_b32 of an SGPR pair");
        let (s, c1) = a[l].overflowing_add(b[l]);
        assert_eq!(w.vgpr[4][l], s);
        let s2 = u64::from(c[l]) * 2 + u64::from(c1);
        assert_eq!(w.vgpr[5][l], s2 as u32, "addc lane {l}");
        carry |= u64::from(s2 >> 32 != 0) << l;
        assert_eq!(w.vgpr[6][l], a[l].wrapping_sub(b[l]));
        borrow |= u64::from(b[l] > a[l]) << l;
        assert_eq!(w.vgpr[7][l], a[l].wrapping_mul(b[l]));
        assert_eq!(w.vgpr[8][l], ((u64::from(a[l]) * u64::from(b[l])) >> 32) as u32);
        let m = u128::from(a[l]) * u128::from(b[l]) + u128::from(u64::from(b[l]) | u64::from(c[l]) << 32);
        assert_eq!(u64::from(w.vgpr[10][l]) | u64::from(w.vgpr[11][l]) << 32, m as u64, "mad_u64_u32 lane {l}");
        let sh = (u64::from(b[l]) | u64::from(c[l]) << 32) << 5;
        assert_eq!((w.vgpr[12][l], w.vgpr[13][l]), (sh as u32, (sh >> 32) as u32));
        assert_eq!(w.vgpr[14][l], ((a[l] as i32) >> 3) as u32);
        assert_eq!(w.vgpr[15][l], (a[l] << 4).wrapping_add(b[l]));
        assert_eq!(w.vgpr[16][l], if b[l] > a[l] { b[l] } else { a[l] }, "cndmask on the borrow mask");
        assert_eq!(w.vgpr[17][l], (a[l] & 0xFF_FFFF).wrapping_mul(b[l] & 0xFF_FFFF));
        assert_eq!(w.vgpr[18][l], (a[l] >> 3) & 0x1FF);
    }
    assert_eq!(w.vcc, carry, "carry-out of v_addc_co_u32");
    assert_eq!(u64::from(w.sgpr[4]) | u64::from(w.sgpr[5]) << 32, borrow);
    assert_eq!(w.sgpr[8], c[0]);
}

/// The carry-in forms (`v_addc_co_u32`, `v_subb_co_u32`, `v_subbrev_co_u32`) against 64-bit
/// sums, over random lanes with a random carry-in mask plus the edge lanes where only the
/// carry-in carries or borrows (all ones plus one, equal operands minus one), and a partial
/// EXEC: lanes outside it keep their values and carry nothing out.
#[test]
fn vector_carry_in_forms_over_random_lanes_and_masks() {
    let mut r = rnd(21);
    let mut a: [u32; LANES] = core::array::from_fn(|_| r());
    let mut b: [u32; LANES] = core::array::from_fn(|_| r());
    (a[0], b[0], a[1], b[1], a[2], b[2]) = (u32::MAX, 0, 5, 5, 0, u32::MAX);
    let cin = u64::from(r()) | u64::from(r()) << 32 | 0b111;
    let exec = !(u64::from(r()) << 40);
    let mut w = wave();
    (w.vgpr[1], w.vgpr[2]) = (a, b);
    for v in 4..7 {
        w.vgpr[v] = lanes(|_| 0xDEAD_BEEF);
    }
    (w.sgpr[4], w.sgpr[5]) = (cin as u32, (cin >> 32) as u32);
    (w.sgpr[12], w.sgpr[13]) = (exec as u32, (exec >> 32) as u32);
    run(
        "s_mov_b64 exec, s[12:13]
v_addc_co_u32_e64 v4, s[6:7], v1, v2, s[4:5]
v_subb_co_u32_e64 v5, s[8:9], v1, v2, s[4:5]
v_subbrev_co_u32_e64 v6, s[10:11], v1, v2, s[4:5]",
        &mut w,
    );
    let (mut add, mut sub, mut subrev) = (0u64, 0u64, 0u64);
    for l in 0..LANES {
        let (x, y, c) = (u64::from(a[l]), u64::from(b[l]), cin >> l & 1);
        if exec >> l & 1 == 0 {
            for v in 4..7 {
                assert_eq!(w.vgpr[v][l], 0xDEAD_BEEF, "v{v} lane {l} outside EXEC");
            }
            continue;
        }
        assert_eq!(w.vgpr[4][l], (x + y + c) as u32, "addc lane {l}");
        add |= u64::from(x + y + c > u64::from(u32::MAX)) << l;
        assert_eq!(w.vgpr[5][l], x.wrapping_sub(y + c) as u32, "subb lane {l}");
        sub |= u64::from(y + c > x) << l;
        assert_eq!(w.vgpr[6][l], y.wrapping_sub(x + c) as u32, "subbrev lane {l}");
        subrev |= u64::from(x + c > y) << l;
    }
    let pair = |k: usize| u64::from(w.sgpr[k]) | u64::from(w.sgpr[k + 1]) << 32;
    assert_eq!(pair(6), add, "carry-out of v_addc_co_u32");
    assert_eq!(pair(8), sub, "borrow-out of v_subb_co_u32");
    assert_eq!(pair(10), subrev, "borrow-out of v_subbrev_co_u32");
    assert_ne!(add & 1, 0, "lane 0 carries only through the carry-in");
    assert_ne!(sub & 2, 0, "lane 1 borrows only through the borrow-in");
}

/// `clamp` on the unsigned add and subtracts saturates (rocPRIM's reductions emit
/// `v_sub_u32_e64 … clamp`); without it they wrap.
#[test]
fn unsigned_add_and_subtract_saturate_with_clamp() {
    let mut r = rnd(11);
    // Half the lanes near the ends of the range, so both overflow and underflow happen.
    let a: [u32; LANES] = core::array::from_fn(|l| if l % 2 == 0 { u32::MAX - (r() & 0xFFFF) } else { r() & 0xFFFF });
    let b: [u32; LANES] = core::array::from_fn(|_| r() & 0x1_FFFF);
    let mut w = wave();
    (w.vgpr[1], w.vgpr[2]) = (a, b);
    run(
        "v_add_u32_e64 v3, v1, v2 clamp
v_sub_u32_e64 v4, v1, v2 clamp
v_subrev_u32_e64 v5, v1, v2 clamp
v_add_u32_e64 v6, v1, v2
v_sub_u32_e64 v7, v1, v2",
        &mut w,
    );
    for l in 0..LANES {
        assert_eq!(w.vgpr[3][l], a[l].saturating_add(b[l]), "add clamp lane {l}");
        assert_eq!(w.vgpr[4][l], a[l].saturating_sub(b[l]), "sub clamp lane {l}");
        assert_eq!(w.vgpr[5][l], b[l].saturating_sub(a[l]), "subrev clamp lane {l}");
        assert_eq!(w.vgpr[6][l], a[l].wrapping_add(b[l]));
        assert_eq!(w.vgpr[7][l], a[l].wrapping_sub(b[l]));
    }
}

#[test]
fn f32_arithmetic_is_ieee_round_to_nearest() {
    let mut r = rnd(99);
    let f = |x: u32| f32::from_bits((x & 0x807F_FFFF) | (((x >> 23) % 40 + 107) << 23));
    let a: [f32; LANES] = core::array::from_fn(|_| f(r()));
    let b: [f32; LANES] = core::array::from_fn(|_| f(r()));
    let c: [f32; LANES] = core::array::from_fn(|_| f(r()));
    let mut w = wave();
    w.vgpr[1] = a.map(f32::to_bits);
    w.vgpr[2] = b.map(f32::to_bits);
    w.vgpr[3] = c.map(f32::to_bits);
    w.vgpr[9] = c.map(f32::to_bits);
    run(
        "v_add_f32_e32 v4, v1, v2
v_mul_f32_e32 v5, v1, v2
v_fma_f32 v6, v1, v2, v3
v_fmac_f32_e32 v9, v1, v2
v_sub_f32_e64 v7, -v1, |v2|
v_max_f32_e32 v8, v1, v2
v_cvt_i32_f32_e32 v10, v1
v_cvt_f32_u32_e32 v11, v12
v_cmp_lt_f32_e64 s[0:1], v1, v2
v_mul_f32_e64 v13, v1, 2.0 clamp",
        &mut w,
    );
    let mut lt = 0u64;
    for l in 0..LANES {
        let bits = |r: usize| w.vgpr[r][l];
        assert_eq!(bits(4), (a[l] + b[l]).to_bits());
        assert_eq!(bits(5), (a[l] * b[l]).to_bits());
        assert_eq!(bits(6), a[l].mul_add(b[l], c[l]).to_bits(), "fma lane {l}");
        assert_eq!(bits(9), a[l].mul_add(b[l], c[l]).to_bits(), "fmac lane {l}");
        assert_eq!(bits(7), (-a[l] - b[l].abs()).to_bits());
        assert_eq!(bits(8), a[l].max(b[l]).to_bits());
        assert_eq!(bits(10), a[l] as i32 as u32);
        assert_eq!(bits(11), 0f32.to_bits());
        assert_eq!(bits(13), (a[l] * 2.0).clamp(0.0, 1.0).to_bits());
        lt |= u64::from(a[l] < b[l]) << l;
    }
    assert_eq!(u64::from(w.sgpr[0]) | u64::from(w.sgpr[1]) << 32, lt);
}

#[test]
fn fma_rounds_once_on_hard_cases() {
    // Products whose exact sum sits near a rounding boundary of f32.
    let cases = [
        (1.0 + f32::EPSILON, 1.0 - f32::EPSILON / 2.0, -1.0),
        (3.0, 1.0 / 3.0, -1.0),
        (1e-20, 1e-20, 1e-38),
        (f32::MAX, 2.0, -f32::MAX),
        (1.5, f32::from_bits(1), 0.0),
        (-0.0, 5.0, 0.0),
    ];
    let mut r = rnd(3);
    let mut all: Vec<(f32, f32, f32)> = cases.to_vec();
    while all.len() < LANES {
        let x = f32::from_bits(r() & 0xBFFF_FFFF);
        let y = f32::from_bits(r() & 0xBFFF_FFFF);
        all.push((x, y, -(x * y)));
    }
    let mut w = wave();
    for (l, (a, b, c)) in all.iter().enumerate() {
        w.vgpr[1][l] = a.to_bits();
        w.vgpr[2][l] = b.to_bits();
        w.vgpr[3][l] = c.to_bits();
    }
    run("v_fma_f32 v4, v1, v2, v3", &mut w);
    for (l, (a, b, c)) in all.iter().enumerate() {
        let want = a.mul_add(*b, *c);
        assert!(
            w.vgpr[4][l] == want.to_bits() || (want.is_nan() && f32::from_bits(w.vgpr[4][l]).is_nan()),
            "fma({a}, {b}, {c}) lane {l}"
        );
    }
}

#[test]
fn memory_loads_stores_and_atomics() {
    let mem = VecMemory::new(BASE, 4096);
    let mut w = wave();
    // s[0:1] = BASE; v0 = lane * 4.
    (w.sgpr[0], w.sgpr[1]) = (BASE as u32, (BASE >> 32) as u32);
    w.vgpr[0] = lanes(|l| 4 * l as u32);
    w.vgpr[1] = lanes(|l| 1000 + l as u32);
    w.vgpr[2] = lanes(|_| 1);
    w.vgpr[3] = lanes(|_| 0);
    w.exec = 0xFFFF_FFFF_0000_FFFF; // lanes 16..32 off
    run_on(
        "global_store_dword v0, v1, s[0:1]
global_load_dword v4, v0, s[0:1] offset:4
s_load_dwordx2 s[4:5], s[0:1], 0x8
global_atomic_add v3, v2, s[0:1] offset:1024
global_atomic_add v5, v3, v2, s[0:1] offset:1024 glc
s_waitcnt vmcnt(0) lgkmcnt(0)",
        &mut w,
        &mem,
    )
    .unwrap();
    let m = mem.bytes.borrow();
    let word = |i: usize| u32::from_le_bytes(m[4 * i..4 * i + 4].try_into().unwrap());
    for l in 0..LANES {
        let active = w.exec >> l & 1 != 0;
        assert_eq!(word(l), if active { 1000 + l as u32 } else { 0 }, "store lane {l}");
        if active {
            let next = if l < 63 && (w.exec >> (l + 1)) & 1 != 0 { 1001 + l as u32 } else { 0 };
            assert_eq!(w.vgpr[4][l], if l == 63 { 0 } else { next }, "load lane {l}");
        }
    }
    assert_eq!((w.sgpr[4], w.sgpr[5]), (1002, 1003));
    // 48 active lanes added 1 twice to the same word; the glc form returns distinct old values.
    assert_eq!(word(256), 96);
    let mut olds: Vec<u32> = (0..LANES).filter(|l| w.exec >> l & 1 != 0).map(|l| w.vgpr[5][l]).collect();
    olds.sort_unstable();
    assert_eq!(olds, (48..96).collect::<Vec<u32>>());
}

#[test]
fn lds_reads_writes_and_bpermute() {
    let mut w = wave();
    w.vgpr[0] = lanes(|l| 4 * l as u32);
    w.vgpr[1] = lanes(|l| 7 * l as u32);
    w.vgpr[2] = lanes(|l| 4 * (63 - l as u32));
    run("ds_write_b32 v0, v1 offset:256\nds_read_b32 v3, v2 offset:256\nds_bpermute_b32 v4, v2, v1\ns_waitcnt lgkmcnt(0)", &mut w);
    for l in 0..LANES {
        assert_eq!(w.vgpr[3][l], 7 * (63 - l as u32));
        assert_eq!(w.vgpr[4][l], 7 * (63 - l as u32));
    }
}

#[test]
fn errors_name_the_pc_and_the_instruction() {
    let mem = VecMemory::new(BASE, 16);
    // An unimplemented instruction: its PC and text.
    let mut w = wave();
    let e = run_on("s_nop 0\nv_screen_partition_4se_b32_e32 v1, v2", &mut w, &mem).unwrap_err();
    assert_eq!(e.kind, ExecErrorKind::Unimplemented);
    assert_eq!(e.pc, BASE + 4);
    let text = e.to_string();
    assert!(text.contains("v_screen_partition_4se_b32_e32 v1, v2") && text.contains("0x100000004"), "{text}");
    // A fault: the address.
    let mut w = wave();
    w.vgpr[0] = lanes(|_| 0x40);
    let e = run_on("global_load_dword v1, v[0:1], off", &mut w, &mem).unwrap_err();
    assert_eq!(e.kind, ExecErrorKind::MemoryFault(0x40));
    // A wave that never ends: the watchdog.
    let code = Code::decode(BASE, &assemble("s_branch 0xffff"));
    let mut w = wave();
    let mut lds = Vec::new();
    let e = run_wave(&code, &mut w, &mem, &mut lds, &Limits { wave_instructions: 500 }).unwrap_err();
    assert_eq!(e.kind, ExecErrorKind::Watchdog(500));
    // Bytes that are not an instruction, reached by a branch.
    let mut words = assemble("s_branch 0");
    words.push(0xFFFF_FFFF);
    let code = Code::decode(BASE, &words);
    let mut w = wave();
    let e = run_wave(&code, &mut w, &mem, &mut lds, &Limits::default()).unwrap_err();
    assert!(matches!(e.kind, ExecErrorKind::Illegal(_)), "{e}");
    assert_eq!(e.pc, BASE + 4);
}

/// The clang-15 `vector_add` fixture on a software memory, with the initial state built from a
/// descriptor and a dispatch packet placed in that memory.
#[test]
fn clang_fixture_kernel_runs_on_a_software_memory() {
    let elf = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/kernels-gfx90a.co")).unwrap();
    let co = amdhsa::CodeObject::parse(&elf).unwrap();
    let size = co.image_size() as usize;
    let mem = VecMemory::new(BASE, size + 0x10000);
    let mut image = vec![0u8; size];
    co.place(&mut image, BASE).unwrap();
    mem.bytes.borrow_mut()[..size].copy_from_slice(&image);
    let k = co.kernel("vector_add").unwrap().unwrap();
    let object = BASE + k.descriptor_address;
    let entry = object.wrapping_add_signed(k.descriptor.kernel_code_entry_byte_offset);
    let words: Vec<u32> =
        image[(entry - BASE) as usize..].chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
    let kernel = exec::Kernel { code: Code::decode(entry, &words), descriptor: k.descriptor, entry };
    // Packet, kernarg and buffers after the image.
    let at = |o: u64| BASE + size as u64 + o;
    let put = |addr: u64, b: &[u8]| {
        let o = (addr - BASE) as usize;
        mem.bytes.borrow_mut()[o..o + b.len()].copy_from_slice(b);
    };
    let n = 100u32;
    put(at(4), &64u16.to_le_bytes()); // workgroup_size_x
    put(at(12), &n.to_le_bytes()); // grid_size_x
    let (a, b, c) = (at(0x1000), at(0x2000), at(0x3000));
    for i in 0..n as u64 {
        put(a + 4 * i, &(i as u32).to_le_bytes());
        put(b + 4 * i, &(3 * i as u32).to_le_bytes());
    }
    let kernarg = at(0x100);
    for (o, v) in [(0, a), (8, b), (16, c)] {
        put(kernarg + o, &v.to_le_bytes());
    }
    put(kernarg + 24, &n.to_le_bytes());
    let d = exec::Dispatch {
        packet_address: at(0),
        kernarg_address: kernarg,
        grid: [n, 1, 1],
        workgroup_size: [64, 1, 1],
        ..Default::default()
    };
    for wg in 0..2 {
        exec::run_work_group(&kernel, &d, [wg, 0, 0], 0, &mem, &Limits::default()).unwrap();
    }
    let m = mem.bytes.borrow();
    for i in 0..n as usize + 4 {
        let o = (c - BASE) as usize + 4 * i;
        let got = u32::from_le_bytes(m[o..o + 4].try_into().unwrap());
        assert_eq!(got, if i < n as usize { 4 * i as u32 } else { 0 }, "c[{i}]");
    }
}

/// docs/executor.md lists every opcode the executor implements (and the count).
#[test]
fn implemented_opcodes_are_listed_in_the_docs() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../docs/executor.md")).unwrap();
    let gfx90a = aqueduct_isa::Target::Gfx90a;
    let names: Vec<&str> = exec::implemented().filter(|op| op.on(gfx90a)).map(|op| op.name()).collect();
    // gfx940's own rows (opcodes gfx90a does not have, or has under another name), §8.
    let cdna3: Vec<&str> = exec::implemented().filter(|op| !op.on(gfx90a)).map(|op| op.name()).collect();
    if std::env::var_os("PRINT_OPCODES").is_some() {
        println!("{} {}", names.len(), names.join(" "));
        println!("{} {}", cdna3.len(), cdna3.join(" "));
    }
    let missing: Vec<&&str> = names.iter().chain(&cdna3).filter(|n| !doc.contains(&format!("`{n}`"))).collect();
    assert!(missing.is_empty(), "not in docs/executor.md: {missing:?}");
    assert!(doc.contains(&format!("{} opcodes", names.len())), "docs/executor.md states the count {}", names.len());
    assert!(
        doc.contains(&format!("{} gfx940 opcodes", cdna3.len())),
        "docs/executor.md states the gfx940 count {}",
        cdna3.len()
    );
    // §6 lists the rest, by name and count, in its first sentence.
    let rest = doc.split("## 6. Not implemented yet").nth(1).unwrap();
    let list =
        rest.split(" are not implemented — ").nth(1).and_then(|t| t.split(" (every gfx940 opcode").next()).unwrap();
    let implemented: std::collections::HashSet<&str> = names.iter().copied().collect();
    let missing: Vec<&str> = aqueduct_isa::Op::all()
        .filter(|op| op.on(gfx90a) && !implemented.contains(op.name()))
        .map(|op| op.name())
        .collect();
    let unlisted: Vec<&&str> = missing.iter().filter(|n| !list.contains(&format!("`{n}`"))).collect();
    assert!(unlisted.is_empty(), "not implemented, not listed in docs/executor.md §6: {unlisted:?}");
    let listed_but_implemented: Vec<&&str> = names.iter().filter(|n| list.contains(&format!("`{n}`"))).collect();
    assert!(
        listed_but_implemented.is_empty(),
        "docs/executor.md §6 lists implemented opcodes: {listed_but_implemented:?}"
    );
    assert!(
        rest.contains(&format!("{} are not implemented", missing.len())),
        "docs/executor.md §6 states the count {}",
        missing.len()
    );
}

/// Every user and system SGPR the ABI defines, and the packed work-item ids, as a wave starts
/// (docs/code-objects.md §5): the program stores them through the kernarg pointer.
#[test]
fn initial_state_follows_the_descriptor_packet_and_queue() {
    use amdhsa::descriptor::{Rsrc1, Rsrc2, Rsrc3};
    let mut asm = String::new();
    for i in 0..20 {
        asm += &format!("v_mov_b32_e32 v1, s{i}\nglobal_store_dword v2, v1, s[8:9] offset:{}\n", 4 * i);
    }
    asm += "v_mbcnt_lo_u32_b32 v4, -1, 0\nv_mbcnt_hi_u32_b32 v4, -1, v4\nv_lshlrev_b32_e32 v4, 2, v4\n";
    asm += "global_store_dword v4, v0, s[8:9] offset:256\ns_endpgm";
    let words = assemble(&asm);
    let mem = VecMemory::new(BASE, 0x10000);
    let code_at = BASE + 0x8000;
    let descriptor = amdhsa::KernelDescriptor {
        group_segment_fixed_size: 0,
        private_segment_fixed_size: 16,
        kernarg_size: 0,
        kernel_code_entry_byte_offset: 0,
        rsrc3: Rsrc3 { raw: 7 },                                        // ACCUM_OFFSET: 32 VGPRs
        rsrc1: Rsrc1 { raw: 7 | 0xF0 << 12 },                           // 64 unified registers, f32/f64 denormals kept
        rsrc2: Rsrc2 { raw: 1 | 15 << 1 | 7 << 7 | 1 << 10 | 2 << 11 }, // scratch, 15 user SGPRs, ids
        kernel_code_properties: 0x7F,                                   // all seven user SGPRs
        kernarg_preload: 0,
    };
    let kernel = exec::Kernel { code: Code::decode(code_at, &words), descriptor, entry: code_at };
    let d = exec::Dispatch {
        packet_address: 0x1111_2222_3333_4440,
        queue_address: 0x5555_6666_7777_8800,
        kernarg_address: BASE,
        dispatch_id: 0x9_0000_0007,
        grid: [8, 8, 8],
        workgroup_size: [4, 4, 4],
        group_segment_size: 0,
        private_segment_size: 14,
        scratch: exec::Scratch {
            resource: [0xA0, 0xA1, 0xA2, 0x00EA_4FAC],
            base: 0x7_0000_0000,
            bytes: 64 * 4096,
            tmpring: 64 | 4 << 12,
        },
    };
    exec::run_work_group(&kernel, &d, [1, 1, 0], 3, &mem, &Limits::default()).unwrap();
    let m = mem.bytes.borrow();
    let word = |i: usize| u32::from_le_bytes(m[4 * i..4 * i + 4].try_into().unwrap());
    let want = [
        0xA0,
        0xA1,
        0xA2,
        0x00EA_4FAC, // private segment buffer
        0x3333_4440,
        0x1111_2222, // dispatch ptr
        0x7777_8800,
        0x5555_6666, // queue ptr
        BASE as u32,
        (BASE >> 32) as u32, // kernarg ptr
        7,
        9, // dispatch id
        0,
        7,  // flat scratch init
        16, // private segment size, rounded up to 4
        1,
        1,
        0,           // work-group id x, y, z
        1 << 31 | 1, // first wave, one wave
        3 * 4096,    // scratch wave offset: slot 3
    ];
    for (i, w) in want.iter().enumerate() {
        assert_eq!(word(i), *w, "s{i}");
    }
    for lane in 0..LANES as u32 {
        let (x, y, z) = (lane % 4, (lane / 4) % 4, lane / 16);
        assert_eq!(word(64 + lane as usize), x | y << 10 | z << 20, "v0 lane {lane}");
    }
}

/// Rounding and conversions against Rust's own (`f32::trunc` & co. are exact operations).
#[test]
fn rounding_and_conversions_match_rust() {
    let mut r = rnd(11);
    let mut xs: Vec<f32> =
        vec![0.5, 1.5, 2.5, -0.5, -1.5, -2.5, -0.0, 8_388_607.5, -8_388_609.0, f32::INFINITY, 0.49999997, 1e-40];
    while xs.len() < LANES {
        let v = r();
        xs.push(f32::from_bits((v & 0x80FF_FFFF) | (((v >> 24) % 30 + 112) << 23)));
    }
    let mut w = wave();
    w.vgpr[1] = core::array::from_fn(|l| xs[l].to_bits());
    run(
        "v_trunc_f32_e32 v2, v1
v_floor_f32_e32 v3, v1
v_ceil_f32_e32 v4, v1
v_rndne_f32_e32 v5, v1
v_cvt_f64_f32_e32 v[6:7], v1
v_cvt_f32_f64_e32 v8, v[6:7]
v_fract_f32_e32 v9, v1",
        &mut w,
    );
    for (l, x) in xs.iter().enumerate() {
        assert_eq!(w.vgpr[2][l], x.trunc().to_bits(), "trunc {x}");
        assert_eq!(w.vgpr[3][l], x.floor().to_bits(), "floor {x}");
        assert_eq!(w.vgpr[4][l], x.ceil().to_bits(), "ceil {x}");
        assert_eq!(w.vgpr[5][l], x.round_ties_even().to_bits(), "rndne {x}");
        let d = u64::from(w.vgpr[6][l]) | u64::from(w.vgpr[7][l]) << 32;
        assert_eq!(d, f64::from(*x).to_bits());
        assert_eq!(w.vgpr[8][l], x.to_bits());
        if x.is_finite() {
            assert_eq!(w.vgpr[9][l], (x - x.floor()).min(f32::from_bits(0x3F7F_FFFF)).to_bits(), "fract {x}");
        }
    }
}

/// Random instruction words on random register state: every outcome is a value (done or an
/// error), never a panic or a hang (the watchdog bounds each run).
#[test]
fn random_code_and_state_end_in_values() {
    let mut r = rnd(2024);
    // Real code to mutate: the .text of the hipcc fixture (saxpy, reduce_sum).
    let bundle = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/isa/kernels-gfx90a.bundle")).unwrap();
    let b = amdhsa::Bundle::parse(&bundle).unwrap();
    let co = b.entries().find(|e| e.target().is_some()).unwrap().code;
    let elf = amdhsa::CodeObject::parse(co).unwrap();
    let k = elf.kernel("saxpy").unwrap().unwrap();
    let text = elf.bytes_from(k.entry_address()).unwrap();
    let real: Vec<u32> =
        text[..text.len() & !3].chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
    let mut outcomes = [0usize; 2];
    let mut executed = 0u64;
    for round in 0..3000u32 {
        let n = 1 + (r() % 12) as usize;
        let mut words: Vec<u32> = (0..n).map(|_| r()).collect();
        // Bias towards encodings the executor implements: scalar, VOP1/2/C, VOP3, DS, FLAT.
        for w in words.iter_mut().step_by(2) {
            let prefix = [0x8000_0000, 0xBE80_0000, 0x7E00_0000, 0x0000_0000, 0xD000_0000, 0xD800_0000, 0xDC00_0000];
            let p = prefix[(r() % prefix.len() as u32) as usize];
            *w = p | (*w & (if p == 0 { 0x7FFF_FFFF } else { 0x03FF_FFFF }));
        }
        if round % 2 == 0 {
            // The real code with a few bits flipped.
            words = real.iter().take(96).copied().collect();
            for _ in 0..(r() % 4) {
                let i = (r() as usize) % words.len();
                words[i] ^= 1 << (r() % 32);
            }
        }
        let code = Code::decode(BASE.wrapping_mul(u64::from(round % 3)), &words);
        let mut w = Wave::new(256, 8);
        for s in w.sgpr.iter_mut() {
            *s = if r() % 2 == 0 { r() } else { (BASE as u32).wrapping_add(r() % 4096) };
        }
        // Pointer pairs into the memory (dispatch and kernarg pointers of the real code).
        for p in [0usize, 4, 6] {
            (w.sgpr[p], w.sgpr[p + 1]) = ((BASE as u32).wrapping_add((r() % 2048) & !3), (BASE >> 32) as u32);
        }
        for v in w.vgpr.iter_mut() {
            *v = core::array::from_fn(|_| r() % 8192);
        }
        w.exec = u64::from(r()) | u64::from(r()) << 32;
        w.vcc = u64::from(r());
        w.mode = if r() % 4 == 0 { r() & 0xFF } else { 0xF0 };
        let mem = VecMemory::new(BASE, 8192);
        mem.bytes.borrow_mut().iter_mut().for_each(|b| *b = (r() % 7) as u8);
        let mut lds = vec![0u8; (r() % 2048) as usize];
        let res = run_wave(&code, &mut w, &mem, &mut lds, &Limits { wave_instructions: 200 });
        outcomes[usize::from(res.is_err())] += 1;
        executed += w.executed;
    }
    assert!(outcomes[0] > 0 && outcomes[1] > 0 && executed > 10_000, "{outcomes:?} {executed}");
}

/// `s_call_b64`: the return address (the next instruction) into the SGPR pair, a jump of
/// 4 × simm16 bytes from there; `s_setpc_b64` comes back.
#[test]
fn s_call_saves_the_return_address_and_jumps() {
    let mut w = wave();
    run(
        "s_call_b64 s[4:5], 2\n\
         s_mov_b32 s10, 1\n\
         s_endpgm\n\
         s_mov_b32 s11, 2\n\
         s_setpc_b64 s[4:5]",
        &mut w,
    );
    assert_eq!(u64::from(w.sgpr[4]) | u64::from(w.sgpr[5]) << 32, BASE + 4);
    assert_eq!((w.sgpr[10], w.sgpr[11]), (1, 2), "the callee ran, then the caller went on");
}
