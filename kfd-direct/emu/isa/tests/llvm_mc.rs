//! Per-encoding round trips through `llvm-mc-15 -show-encoding` (docs/isa.md §7): each
//! instruction string is assembled by LLVM at test time, the bytes are decoded and printed by this
//! crate, and the text must equal LLVM's canonical spelling of the input.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use aqueduct_isa::{decode, decode_for, Encoding, Target};

/// Assembles `lines` and checks every instruction; `enc` is the encoding each must decode as.
fn round_trip(enc: Encoding, lines: &[&str]) {
    round_trip_for(Target::Gfx90a, enc, lines)
}

/// [`round_trip`] for `target` (`-mcpu=gfx940` for gfx940).
fn round_trip_for(target: Target, enc: Encoding, lines: &[&str]) {
    let mc = common::tool("llvm-mc-15", "llvm-15");
    let mut child = Command::new(mc)
        .args(["-arch=amdgcn", "-show-encoding"])
        .arg(format!("-mcpu={}", target.mcpu()))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run llvm-mc-15");
    child.stdin.take().unwrap().write_all(lines.join("\n").as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.is_empty(), "llvm-mc-15 rejected the list:\n{stderr}");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut failures = Vec::new();
    let mut n = 0;
    for l in text.lines() {
        let Some((asm, enc_part)) = l.split_once("; encoding: [") else { continue };
        let want = asm.trim();
        let bytes: Vec<u8> = enc_part
            .trim_end_matches(']')
            .split(',')
            .map(|b| u8::from_str_radix(b.trim().trim_start_matches("0x"), 16).unwrap())
            .collect();
        let words: Vec<u32> = bytes.chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
        n += 1;
        match decode_for(target, &words, 0) {
            Ok(inst) => {
                let got = inst.display().to_string();
                if got != want || usize::from(inst.len) != words.len() || inst.encoding() != enc {
                    failures.push(format!(
                        "`{want}`: ours `{got}` len {} enc {} (want len {} enc {enc})",
                        inst.len,
                        inst.encoding(),
                        words.len()
                    ));
                }
            }
            Err(e) => failures.push(format!("`{want}`: {e}")),
        }
    }
    assert_eq!(n, lines.len(), "llvm-mc-15 printed {n} of {} instructions", lines.len());
    assert!(failures.is_empty(), "{} round-trip failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn sop2() {
    round_trip(
        Encoding::Sop2,
        &[
            "s_add_u32 s0, s1, s2",
            "s_addc_u32 flat_scratch_hi, s9, 0",
            "s_and_b64 s[0:1], exec, vcc",
            "s_lshl_b64 s[4:5], s[6:7], 3",
            "s_mul_i32 s0, s1, 0x12345",
            "s_and_b32 s2, s2, 0xffff",
            "s_cselect_b64 s[0:1], -1, 0",
            "s_xor_b64 exec, exec, s[2:3]",
            "s_add_i32 s0, s1, -16",
            "s_sub_u32 s0, 1.0, s1",
            "s_andn2_b64 s[0:1], s[2:3], 0.5",
            "s_bfe_u32 s0, s1, 0x80008",
            "s_lshl2_add_u32 s0, s1, s2",
            "s_pack_ll_b32_b16 s0, s1, s2",
        ],
    );
}

#[test]
fn sopk_sop1_sopc_sopp() {
    round_trip(
        Encoding::Sopk,
        &["s_movk_i32 s0, 0x1234", "s_cmpk_eq_i32 s1, 0x40", "s_addk_i32 s2, 0x80", "s_movk_i32 s0, 0xfffe"],
    );
    round_trip(
        Encoding::Sopk,
        &[
            "s_getreg_b32 s0, hwreg(HW_REG_SH_MEM_BASES, 0, 16)",
            "s_getreg_b32 s0, hwreg(HW_REG_MODE)",
            "s_setreg_b32 hwreg(HW_REG_MODE, 4, 4), s1",
            "s_setreg_imm32_b32 hwreg(HW_REG_MODE, 0, 4), 0xc",
            "s_call_b64 s[30:31], 16",
        ],
    );
    round_trip(
        Encoding::Sop1,
        &[
            "s_mov_b32 s0, s1",
            "s_mov_b64 s[0:1], exec",
            "s_mov_b64 s[2:3], 0x7fffffff",
            "s_mov_b32 s0, 0x3e22f983",
            "s_not_b32 s0, 0xffffff00",
            "s_and_saveexec_b64 s[2:3], vcc",
            "s_getpc_b64 s[34:35]",
            "s_setpc_b64 s[30:31]",
            "s_swappc_b64 s[30:31], s[34:35]",
            "s_ff1_i32_b32 s0, s1",
            "s_bcnt1_i32_b64 s0, s[2:3]",
            "s_mov_b32 s0, src_shared_base",
            "s_mov_b32 s1, src_private_base",
            "s_mov_b64 s[0:1], ttmp[4:5]",
            "s_mov_b32 s0, ttmp11",
            "s_mov_b32 vcc_lo, exec_hi",
            "s_mov_b32 m0, -1",
        ],
    );
    round_trip(
        Encoding::Sopc,
        &[
            "s_cmp_eq_u32 s0, 0",
            "s_cmp_lg_u64 s[0:1], 0",
            "s_cmp_lt_i32 s0, -1",
            "s_bitcmp1_b32 s0, 5",
            "s_cmp_gt_u32 s0, 0x1000",
        ],
    );
    round_trip(
        Encoding::Sopp,
        &[
            "s_nop 0",
            "s_nop 7",
            "s_endpgm",
            "s_barrier",
            "s_branch 5",
            "s_branch 65530",
            "s_cbranch_execz 12",
            "s_cbranch_vccnz 3",
            "s_cbranch_scc1 1",
            "s_waitcnt vmcnt(0) lgkmcnt(0)",
            "s_waitcnt lgkmcnt(0)",
            "s_waitcnt vmcnt(3)",
            "s_waitcnt expcnt(2)",
            "s_waitcnt vmcnt(63) expcnt(7) lgkmcnt(15)",
            "s_sleep 1",
            "s_sleep 0x41",
            "s_nop 0x41",
            "s_endpgm 3",
            "s_setprio 3",
            "s_trap 2",
            "s_sendmsg sendmsg(MSG_INTERRUPT)",
            "s_icache_inv",
        ],
    );
}

#[test]
fn smem() {
    round_trip(
        Encoding::Smem,
        &[
            "s_load_dword s2, s[4:5], 0x4",
            "s_load_dwordx2 s[0:1], s[4:5], 0x0",
            "s_load_dwordx4 s[8:11], s[6:7], 0x10",
            "s_load_dwordx8 s[8:15], s[6:7], 0x20",
            "s_load_dwordx16 s[16:31], s[6:7], 0x40",
            "s_load_dword s0, s[2:3], s4",
            "s_load_dword s0, s[2:3], 0x8 glc",
            "s_load_dwordx2 s[58:59], s[2:3], -0x8",
            "s_buffer_load_dword s0, s[4:7], 0x0",
            "s_store_dword s0, s[2:3], 0x0",
            "s_memtime s[0:1]",
            "s_memrealtime s[2:3]",
            "s_dcache_inv",
            "s_dcache_wb",
            "s_atomic_add s0, s[2:3], 0x0 glc",
        ],
    );
}

#[test]
fn vop1_vop2_vopc() {
    round_trip(
        Encoding::Vop1,
        &[
            "v_mov_b32_e32 v1, s0",
            "v_mov_b32_e32 v1, 0",
            "v_mov_b32_e32 v1, 0x12345678",
            "v_mov_b32_e32 v1, 1.0",
            "v_mov_b32_e32 v1, -4.0",
            "v_mov_b32_e32 v1, 0.15915494",
            "v_mov_b32_e32 v1, exec_lo",
            "v_readfirstlane_b32 s0, v1",
            "v_cvt_f64_i32_e32 v[0:1], v2",
            "v_cvt_i32_f64_e32 v0, v[2:3]",
            "v_rcp_f64_e32 v[0:1], s[2:3]",
            "v_rcp_f64_e32 v[0:1], 0x40080000",
            "v_cvt_f32_f64_e32 v0, 5",
            "v_cvt_f32_f16_e32 v0, v1",
            "v_sqrt_f16_e32 v0, 0x4248",
            "v_nop",
            "v_accvgpr_mov_b32 a1, a2",
            "v_cvt_f32_ubyte0_e32 v0, v1",
        ],
    );
    round_trip(
        Encoding::Vop2,
        &[
            "v_add_f32_e32 v1, s0, v2",
            "v_add_u32_e32 v0, s8, v0",
            "v_add_co_u32_e32 v0, vcc, s2, v0",
            "v_addc_co_u32_e32 v1, vcc, v2, v1, vcc",
            "v_cndmask_b32_e32 v0, 0, v1, vcc",
            "v_lshlrev_b32_e32 v0, 2, v1",
            "v_mul_f32_e32 v0, 0x40490fdb, v1",
            "v_fmac_f32_e32 v0, v1, v2",
            "v_fmac_f64_e32 v[0:1], v[2:3], v[4:5]",
            "v_madak_f32 v0, v1, v2, 0x41200000",
            "v_madmk_f32 v0, v1, 0x41200000, v2",
            "v_add_u16_e32 v0, 1, v1",
            "v_mul_f16_e32 v0, 1.0, v1",
            "v_mul_f16_e32 v0, 0x4248, v1",
            "v_mul_f16_e32 v0, -1, v1",
            "v_and_b32_e32 v0, 0xff, v1",
        ],
    );
    round_trip(
        Encoding::Vopc,
        &[
            "v_cmp_gt_u32_e32 vcc, s1, v0",
            "v_cmp_eq_u32_e32 vcc, 0, v1",
            "v_cmp_lt_f32_e32 vcc, 0.5, v1",
            "v_cmp_ne_u64_e32 vcc, 0, v[0:1]",
            "v_cmpx_eq_u32_e32 vcc, v0, v1",
            "v_cmp_class_f32_e32 vcc, v0, v1",
            "v_cmp_neq_f64_e32 vcc, 1.0, v[2:3]",
        ],
    );
}

#[test]
fn dpp_sdwa() {
    round_trip(
        Encoding::Vop1,
        &[
            "v_mov_b32_dpp v1, v2 quad_perm:[1,0,3,2] row_mask:0xf bank_mask:0xf",
            "v_mov_b32_dpp v1, v2 row_shr:1 row_mask:0xf bank_mask:0xf bound_ctrl:0",
            "v_mov_b32_dpp v1, v2 row_bcast:15 row_mask:0xa bank_mask:0xf",
            "v_mov_b32_dpp v1, v2 row_bcast:31 row_mask:0xc bank_mask:0xf",
            "v_mov_b32_dpp v1, v2 wave_shr:1 row_mask:0xf bank_mask:0xf",
            "v_mov_b32_dpp v1, v2 row_mirror row_mask:0xf bank_mask:0xf",
            "v_mov_b32_dpp v1, v2 row_newbcast:3 row_mask:0xf bank_mask:0xf",
            "v_cvt_f32_u32_sdwa v9, v8 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:WORD_0",
            "v_cvt_f32_f16_sdwa v8, v8 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:WORD_1",
        ],
    );
    round_trip(
        Encoding::Vop2,
        &[
            "v_add_f32_dpp v0, v1, v2 row_shl:2 row_mask:0xf bank_mask:0x3",
            "v_add_f32_dpp v0, -v1, |v2| row_ror:3 row_mask:0xf bank_mask:0xf",
            "v_mul_u32_u24_sdwa v0, v1, v2 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:WORD_0 src1_sel:WORD_0",
            "v_add_u32_sdwa v0, v1, v2 dst_sel:WORD_1 dst_unused:UNUSED_PRESERVE src0_sel:BYTE_0 src1_sel:DWORD",
            "v_add_f32_sdwa v0, -v1, |v2| clamp dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:DWORD src1_sel:DWORD",
            "v_or_b32_sdwa v0, sext(v1), v2 dst_sel:DWORD dst_unused:UNUSED_SEXT src0_sel:BYTE_1 src1_sel:DWORD",
        ],
    );
    round_trip(
        Encoding::Vopc,
        &[
            "v_cmp_eq_u16_sdwa vcc, v1, v2 src0_sel:BYTE_0 src1_sel:BYTE_0",
            "v_cmp_lt_u16_sdwa s[0:1], v1, v2 src0_sel:BYTE_0 src1_sel:WORD_0",
        ],
    );
}

#[test]
fn vop3() {
    round_trip(
        Encoding::Vop3,
        &[
            "v_fma_f32 v0, -v1, |v2|, 1.0 clamp",
            "v_fma_f32 v1, -|v2|, v3, |s4| clamp mul:2",
            "v_fma_f64 v[0:1], v[2:3], s[4:5], v[6:7] div:2",
            "v_lshlrev_b64 v[0:1], 2, v[0:1]",
            "v_mad_u64_u32 v[0:1], s[2:3], v4, v5, v[6:7]",
            "v_add_co_u32_e64 v0, s[0:1], v1, v2",
            "v_addc_co_u32_e64 v0, vcc, v1, v2, s[4:5]",
            "v_div_scale_f32 v0, vcc, v1, v2, v1",
            "v_cmp_eq_u32_e64 s[0:1], v1, 0",
            "v_cmp_lt_f64_e64 s[2:3], |v[0:1]|, 1.0",
            "v_cndmask_b32_e64 v0, 0, 1, s[0:1]",
            "v_cvt_f32_i32_e64 v0, v1 clamp",
            "v_rcp_f32_e64 v0, -|v1| mul:2",
            "v_add_f32_e64 v0, v1, s2 mul:4",
            "v_readlane_b32 s0, v1, 5",
            "v_writelane_b32 v0, s1, 63",
            "v_mbcnt_lo_u32_b32 v0, -1, 0",
            "v_add3_u32 v0, v1, v2, v3",
            "v_lshl_or_b32 v0, v1, 16, v2",
            "v_bfe_u32 v0, v1, 8, 8",
            "v_mul_lo_u32 v0, v1, s2",
            "v_mul_hi_u32 v0, v1, v2",
            "v_add_f64 v[0:1], v[2:3], -v[4:5]",
            "v_fma_f16 v0, v1, v2, v3 op_sel:[1,0,0,0]",
            "v_pack_b32_f16 v0, v1, v2 op_sel:[0,1,0]",
            "v_ldexp_f64 v[0:1], v[2:3], v4",
            "v_div_fixup_f64 v[0:1], v[2:3], v[4:5], v[6:7]",
            "v_alignbit_b32 v0, v1, v2, 8",
            "v_cvt_pkrtz_f16_f32 v0, v1, v2",
        ],
    );
}

#[test]
fn vop3p_mai() {
    round_trip(
        Encoding::Vop3p,
        &[
            "v_pk_fma_f32 v[0:1], v[2:3], v[4:5], v[6:7]",
            "v_pk_fma_f32 v[0:1], v[2:3], v[4:5], v[6:7] op_sel_hi:[0,1,1]",
            "v_pk_mul_f32 v[0:1], v[2:3], v[4:5] op_sel:[1,0] neg_lo:[1,0]",
            "v_pk_add_f32 v[0:1], v[2:3], s[4:5] neg_hi:[0,1]",
            "v_pk_mov_b32 v[0:1], v[2:3], v[4:5] op_sel:[0,1]",
            "v_pk_add_f16 v0, v1, v2 clamp",
            "v_pk_fma_f16 v0, v1, v2, v3 op_sel:[1,0,0] op_sel_hi:[1,0,1]",
            "v_pk_add_u16 v0, v1, 1",
            "v_fma_mix_f32 v0, v1, v2, v3 op_sel_hi:[1,1,0]",
            "v_fma_mixlo_f16 v0, -v1, |v2|, v3",
            "v_dot2_f32_f16 v0, v1, v2, v3",
            "v_accvgpr_write_b32 a0, v1",
            "v_accvgpr_read_b32 v1, a0",
            "v_accvgpr_write_b32 a1, 0",
            "v_mfma_f32_32x32x8f16 a[0:15], v[0:1], v[2:3], a[0:15]",
            "v_mfma_f32_32x32x1f32 a[0:31], v0, v1, a[0:31] cbsz:1 abid:1 blgp:2",
            "v_mfma_f32_4x4x1f32 v[0:3], v4, v5, v[0:3]",
            "v_mfma_f64_16x16x4f64 a[0:7], v[0:1], v[2:3], a[0:7]",
            "v_mfma_i32_32x32x8i8 a[0:15], a0, a1, a[0:15]",
        ],
    );
}

#[test]
fn ds() {
    round_trip(
        Encoding::Ds,
        &[
            "ds_read_b32 v1, v0",
            "ds_read_b32 v1, v0 offset:16",
            "ds_read2_b32 v[0:1], v2 offset0:1 offset1:2",
            "ds_read2st64_b64 v[0:3], v4 offset1:1",
            "ds_write_b32 v0, v1 offset:65535",
            "ds_write2_b32 v0, v1, v2 offset0:4",
            "ds_write_b128 v0, v[2:5]",
            "ds_read_b128 v[0:3], v4",
            "ds_add_u32 v0, v1",
            "ds_add_rtn_u32 v0, v1, v2",
            "ds_cmpst_rtn_b32 v0, v1, v2, v3",
            "ds_bpermute_b32 v0, v1, v2",
            "ds_swizzle_b32 v0, v1 offset:swizzle(BITMASK_PERM,\"00p11\")",
            "ds_swizzle_b32 v0, v1 offset:swizzle(QUAD_PERM,1,0,3,2)",
            "ds_swizzle_b32 v0, v1 offset:swizzle(SWAP,16)",
            "ds_swizzle_b32 v0, v1 offset:swizzle(BROADCAST,8,2)",
            "ds_swizzle_b32 v0, v1 offset:swizzle(REVERSE,8)",
            "ds_swizzle_b32 v0, v1 offset:0xffff",
            "ds_swizzle_b32 v0, v1",
            "ds_add_f64 v0, v[2:3]",
            "ds_read_b32 a1, v0",
            "ds_write_b64 v0, a[2:3]",
            "ds_append v0",
            "ds_read_u8 v0, v1 offset:3 gds",
        ],
    );
}

#[test]
fn flat_global_scratch() {
    round_trip(
        Encoding::Flat,
        &[
            "flat_load_dword v1, v[2:3] offset:16",
            "flat_store_dword v[0:1], v2",
            "flat_atomic_add v0, v[2:3], v3 glc",
            "flat_load_dwordx4 v[0:3], v[4:5] glc slc",
        ],
    );
    round_trip(
        Encoding::Global,
        &[
            "global_load_dword v1, v0, s[2:3] offset:16",
            "global_load_dword v1, v[2:3], off offset:-8 glc slc",
            "global_store_dword v[0:1], v2, off",
            "global_store_dwordx4 v0, v[2:5], s[0:1] offset:4095",
            "global_atomic_add_f32 v0, v1, s[2:3]",
            "global_atomic_cmpswap v0, v1, v[2:3], s[4:5] glc",
            "global_atomic_cmpswap_x2 v[0:1], v2, v[4:7], s[8:9] offset:8 glc",
            "global_atomic_add_f64 v[0:1], v[2:3], off",
            "global_load_ushort v0, v1, s[2:3]",
            "global_load_short_d16_hi v0, v[2:3], off",
            "global_load_dword a0, v1, s[2:3]",
            "global_store_dwordx2 v0, a[2:3], s[0:1]",
        ],
    );
    round_trip(
        Encoding::Scratch,
        &[
            "scratch_load_dword v1, v0, off offset:4",
            "scratch_load_dword v1, off, s0 offset:4",
            "scratch_store_dword off, v1, s3 offset:-4",
            "scratch_store_dwordx2 v0, v[2:3], off",
        ],
    );
}

#[test]
fn mubuf_mtbuf() {
    round_trip(
        Encoding::Mubuf,
        &[
            "buffer_load_dword v1, off, s[0:3], 0 offset:16",
            "buffer_store_dword v0, v1, s[0:3], s4 offen offset:4",
            "buffer_load_dwordx2 v[0:1], v2, s[0:3], 0 idxen",
            "buffer_load_dword v0, v[2:3], s[4:7], s8 idxen offen glc slc",
            "buffer_store_dword v0, off, s[0:3], s33 offset:8",
            "buffer_atomic_add_f64 v[0:1], v2, s[0:3], 0 offen",
            "buffer_atomic_add v0, v1, s[0:3], 0 offen glc",
            "buffer_load_dword a0, v1, s[0:3], 0 offen",
            "buffer_wbl2",
            "buffer_invl2",
            "buffer_wbinvl1_vol",
        ],
    );
    round_trip(
        Encoding::Mtbuf,
        &["tbuffer_load_format_x v0, v1, s[0:3], 0 format:[BUF_DATA_FORMAT_32,BUF_NUM_FORMAT_UINT] offen offset:16"],
    );
}

#[test]
fn mimg() {
    round_trip(
        Encoding::Mimg,
        &[
            "image_load v[0:3], v4, s[8:15] dmask:0xf unorm glc slc",
            "image_load v[0:1], v4, s[8:15] dmask:0xf unorm d16",
            "image_load v0, v4, s[8:15] dmask:0x1 da",
            "image_load v[0:2], v4, s[8:15] dmask:0x7 a16 lwe",
            "image_load a[0:3], v4, s[8:15] dmask:0xf",
            "image_store v[0:3], v4, s[8:15] dmask:0xf unorm",
            "image_store v[0:1], v4, s[16:23] dmask:0x3 unorm glc",
            "image_sample v[0:3], v10, s[4:11], s[12:15] dmask:0xf",
            "image_sample v0, v10, s[4:11], s[12:15] dmask:0x1 d16",
            "image_atomic_add v0, v4, s[8:15] dmask:0x1 unorm glc",
            "image_atomic_cmpswap v[0:1], v4, s[8:15] dmask:0x3 unorm glc",
            "image_atomic_swap v[0:1], v4, s[8:15] dmask:0x3 unorm",
            "image_get_resinfo v[0:3], v4, s[8:15] dmask:0xf",
        ],
    );
}

#[test]
fn errors_are_values() {
    use aqueduct_isa::{DecodeErrorKind, EncodingClass};
    // Truncated 64-bit instruction.
    let e = decode(&[0xC002_0082], 0).unwrap_err();
    assert_eq!(e.kind, DecodeErrorKind::Truncated);
    assert_eq!(e.encoding, EncodingClass::Known(Encoding::Smem));
    // Literal missing.
    assert_eq!(decode(&[0x7E02_02FF], 0).unwrap_err().kind, DecodeErrorKind::Truncated);
    // An image opcode gfx90a does not have (image_sample_cl, 0x21).
    let e = decode(&[0xF084_0F00, 0x0061_000A], 0).unwrap_err();
    assert_eq!((e.encoding, e.kind), (EncodingClass::Known(Encoding::Mimg), DecodeErrorKind::UnknownOpcode(0x21)));
    // Unknown SOPP opcode, named with its offset.
    let e = decode(&[0xBF80_0000, 0xBFFF_0000], 1).unwrap_err();
    assert_eq!((e.word, e.kind), (1, DecodeErrorKind::UnknownOpcode(0x7f)));
    // Past the end.
    assert_eq!(decode(&[], 0).unwrap_err().kind, DecodeErrorKind::Truncated);
}

/// gfx940 (docs/isa.md §2 "CDNA3"): its new instructions, its cache-bit names, SCRATCH's SVE bit and
/// its hardware registers. (MFMA opcodes gfx908 already had are left out: llvm-mc-15 spells them
/// `v_mfma_f32_16x16x4_f32` when assembling and `v_mfma_f32_16x16x4f32` when disassembling, and
/// this crate, like llvm-objdump-15, uses the latter.)
#[test]
fn gfx940() {
    let t = Target::Gfx940;
    round_trip_for(
        t,
        Encoding::Vop1,
        &[
            "v_mov_b64_e32 v[0:1], v[2:3]",
            "v_mov_b64_e32 v[0:1], s[2:3]",
            "v_mov_b64_e32 v[4:5], 1.0",
            "v_mov_b64_e32 v[4:5], 0x3f800000",
            "v_mov_b64_dpp v[0:1], v[2:3] row_newbcast:1 row_mask:0xf bank_mask:0xf",
            "v_cvt_f32_fp8_e32 v1, v2",
            "v_cvt_pk_f32_bf8_e32 v[2:3], v4",
        ],
    );
    round_trip_for(
        t,
        Encoding::Vop2,
        &["v_fmamk_f32 v1, v2, 0x3f800000, v3", "v_fmaak_f32 v1, v2, v3, 0x3f800000", "v_fmac_f32_e32 v1, v2, v3"],
    );
    round_trip_for(
        t,
        Encoding::Vop3,
        &[
            "v_lshl_add_u64 v[0:1], v[2:3], 2, v[4:5]",
            "v_lshl_add_u64 v[0:1], s[2:3], v4, 0",
            "v_mov_b64_e64 v[0:1], s[2:3]",
            "v_cvt_pk_fp8_f32 v1, v2, v3",
            "v_cvt_sr_bf8_f32 v1, v2, v3",
        ],
    );
    round_trip_for(
        t,
        Encoding::Vop3p,
        &[
            "v_mfma_f32_16x16x8_xf32 a[0:3], v[4:5], v[6:7], a[0:3]",
            "v_mfma_f32_32x32x4_xf32 v[0:15], v[2:3], v[4:5], v[0:15]",
            "v_mfma_i32_16x16x32_i8 v[0:3], v[4:5], v[6:7], v[0:3]",
            "v_mfma_i32_32x32x16_i8 a[0:15], v[4:5], v[6:7], a[0:15] cbsz:1 abid:1 blgp:2",
            "v_mfma_f32_32x32x4_2b_bf16 v[0:31], v[4:5], v[6:7], v[0:31]",
            "v_mfma_f32_16x16x16_bf16 v[0:3], v[4:5], v[6:7], 0",
            "v_mfma_f64_16x16x4_f64 v[0:7], v[4:5], v[6:7], v[0:7]",
            "v_mfma_f64_4x4x4_4b_f64 a[0:1], v[2:3], v[4:5], a[0:1]",
            "v_smfmac_f32_16x16x32_f16 a[0:3], v[4:5], v[6:9], v10",
            "v_smfmac_f32_16x16x32_f16 v[0:3], v[4:5], v[6:9], v10 cbsz:1 abid:2",
            "v_smfmac_i32_32x32x32_i8 v[0:15], v[16:17], v[20:23], v24",
            "v_mfma_f32_16x16x32_fp8_bf8 v[0:3], v[4:5], v[6:7], v[0:3]",
            "v_pk_fma_f32 v[0:1], v[2:3], v[4:5], v[6:7]",
        ],
    );
    round_trip_for(
        t,
        Encoding::Global,
        &[
            "global_load_dword v1, v[2:3], off sc0 nt sc1",
            "global_load_dword v1, v2, s[4:5] offset:-8 nt",
            "global_store_dword v[2:3], v1, off sc0 sc1",
            "global_load_lds_dword v[2:3], off",
            "global_load_lds_ubyte v2, s[2:3] offset:4",
            "global_atomic_add_f32 v1, v[2:3], v4, off sc0",
            "global_atomic_add_f32 v[2:3], v4, off",
            "global_atomic_pk_add_bf16 v1, v[2:3], v4, off sc0",
            "global_atomic_cmpswap_x2 v[0:1], v[2:3], v[4:7], off sc0 sc1",
        ],
    );
    round_trip_for(
        t,
        Encoding::Flat,
        &[
            "flat_load_dword v1, v[2:3] sc1",
            "flat_atomic_add v1, v[2:3], v4 sc0",
            "flat_atomic_add_f32 v[2:3], v4",
            "flat_atomic_pk_add_f16 v1, v[2:3], v4 sc0 nt",
        ],
    );
    round_trip_for(
        t,
        Encoding::Scratch,
        &[
            "scratch_load_dword v1, v2, off",
            "scratch_load_dword v1, off, s2",
            "scratch_load_dword v1, v2, s2 offset:-16",
            "scratch_load_dword v1, off, off offset:8",
            "scratch_store_dword v2, v1, off nt",
            "scratch_store_dwordx2 off, v[4:5], s3 sc0 sc1",
            "scratch_load_lds_dword v2, off",
            "scratch_load_lds_sshort off, s4",
        ],
    );
    round_trip_for(
        t,
        Encoding::Mubuf,
        &[
            "buffer_load_dword v1, off, s[4:7], 0 sc0 nt sc1",
            "buffer_store_dword v1, v2, s[4:7], s5 offen offset:16 nt",
            "buffer_load_dword off, s[4:7], 0 lds",
            "buffer_inv sc0 sc1",
            "buffer_inv",
            "buffer_wbl2 sc1",
            "buffer_wbl2",
            "buffer_wbinvl1",
        ],
    );
    round_trip_for(
        t,
        Encoding::Mtbuf,
        &["tbuffer_load_format_x v1, off, s[4:7], 0 format:[BUF_DATA_FORMAT_32] sc0 sc1"],
    );
    round_trip_for(t, Encoding::Ds, &["ds_pk_add_f16 v1, v2", "ds_pk_add_rtn_bf16 v3, v1, v2 offset:8"]);
    round_trip_for(
        t,
        Encoding::Sopk,
        &["s_getreg_b32 s1, hwreg(HW_REG_XCC_ID)", "s_setreg_b32 hwreg(HW_REG_SQ_PERF_SNAPSHOT_PC_HI, 4, 7), s52"],
    );
    round_trip_for(t, Encoding::Smem, &["s_load_dword s1, s[2:3], 0x0 glc", "s_load_dwordx4 s[4:7], s[2:3], 0x10"]);
}

#[test]
fn gfx940_errors_are_values() {
    use aqueduct_isa::{DecodeErrorKind, EncodingClass};
    let t = Target::Gfx940;
    // v_mac_f32 (VOP2 0x16) and v_mad_f32 (VOP3 0x1c1) are gone on gfx940; v_madmk_f32's code is
    // v_fmamk_f32 there.
    let e = decode_for(t, &[0x2C02_0702], 0).unwrap_err();
    assert_eq!((e.encoding, e.kind), (EncodingClass::Known(Encoding::Vop2), DecodeErrorKind::UnknownOpcode(0x16)));
    assert!(decode_for(t, &[0xD1C1_0001, 0x040E_0502], 0).is_err());
    assert!(decode(&[0xD1C1_0001, 0x040E_0502], 0).is_ok());
    assert_eq!(decode_for(t, &[0x2E02_0702, 0x3F80_0000], 0).unwrap().op.name(), "v_fmamk_f32");
    assert_eq!(decode(&[0x2E02_0702, 0x3F80_0000], 0).unwrap().op.name(), "v_madmk_f32");
    // No images.
    let e = decode_for(t, &[0xF000_0F00, 0x0002_000A], 0).unwrap_err();
    assert_eq!((e.encoding, e.kind), (EncodingClass::Known(Encoding::Mimg), DecodeErrorKind::UnknownOpcode(0)));
    // Bit 13 of a GLOBAL instruction (gfx90a's `lds`) is not defined on gfx940.
    let e = decode_for(t, &[0xDC50_A000, 0x017F_0002], 0).unwrap_err();
    assert_eq!(e.kind, DecodeErrorKind::IllegalForm);
    assert!(decode(&[0xDC50_A000, 0x007F_0002], 0).unwrap().mods.gds_lds);
    // v_mov_b64 and v_lshl_add_u64 are gfx940's own.
    assert!(decode(&[0x7E00_7102], 0).is_err());
    assert_eq!(decode_for(t, &[0x7E00_7102], 0).unwrap().display().to_string(), "v_mov_b64_e32 v[0:1], v[2:3]");
    assert!(decode(&[0xD208_0000, 0x0411_0502], 0).is_err());
    // The ISA names that select gfx940.
    for name in ["gfx940", "gfx941", "gfx942", "amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-"] {
        assert_eq!(Target::from_isa_name(name), Some(Target::Gfx940), "{name}");
    }
    assert_eq!(Target::from_isa_name("gfx90a:xnack+"), Some(Target::Gfx90a));
    assert_eq!(Target::from_isa_name("gfx1100"), None);
}
