//! Register indexing (docs/executor.md §5 "Register indexing"): GPR index mode
//! (`s_set_gpr_idx_on` … `s_set_gpr_idx_off`, which clang emits for a dynamically indexed
//! vector held in VGPRs) and the M0-relative SGPR moves `s_movrels_*` / `s_movreld_*`.
//!
//! In index mode (MODE bit 27, `GPR_IDX_EN`) every VALU instruction reads or writes the VGPRs
//! of the operands M0[15:12] enables — bit 0 src0, bit 1 src1, bit 2 src2, bit 3 the
//! destination — M0[7:0] registers further on. The wave's loop sends an instruction here only
//! while the bit is set ([`indexed`]), so no other instruction pays for it.

use super::ops::{op, Exe, Handler, NEXT, R};
use super::wave::{Ty, Wave};
use super::{ExecErrorKind, Group};
use crate::{Encoding, Operand};

/// MODE's `GPR_IDX_EN` bit.
pub(crate) const GPR_IDX_EN: u32 = 1 << 27;

/// Runs `h` for `e` in index mode: a VALU instruction on a copy whose enabled VGPR operands are
/// offset by M0[7:0]; anything else as it is.
pub(crate) fn indexed(w: &mut Wave, e: &Exe, h: Handler, g: &mut Group<'_>) -> R {
    if !matches!(
        e.inst.op.spec().enc,
        Encoding::Vop1 | Encoding::Vop2 | Encoding::Vopc | Encoding::Vop3 | Encoding::Vop3p
    ) {
        return h(w, e, g);
    }
    let (index, enable) = (w.m0 & 0xFF, w.m0 >> 12 & 0xF);
    let mut moved = *e;
    // Exe::slots: the operand index of Dst, Src0, Src1, Src2; M0's enable bits are src0, src1,
    // src2, dst.
    for (slot, bit) in [(e.slots[1], 0), (e.slots[2], 1), (e.slots[3], 2), (e.slots[0], 3)] {
        if enable >> bit & 1 == 0 || slot == u8::MAX {
            continue;
        }
        let Some(o) = moved.inst.operands.get_mut(usize::from(slot)) else { continue };
        match o {
            Operand::Vgpr { reg, count } if *count > 0 => {
                *reg = u8::try_from(u32::from(*reg) + index).map_err(|_| ExecErrorKind::RegisterOutOfRange)?;
            }
            // Whether the hardware indexes AGPRs too is not documented: not guessed.
            Operand::Agpr { .. } => return Err(ExecErrorKind::Unimplemented),
            _ => {}
        }
    }
    h(w, &moved, g)
}

/// The 32-bit value of SOP operand `k`.
fn s32(w: &Wave, e: &Exe, k: usize) -> Result<u32, ExecErrorKind> {
    w.s32(&op(e, k)?)
}

/// The immediate of operand `k`.
fn imm(e: &Exe, k: usize) -> Result<u32, ExecErrorKind> {
    match op(e, k)? {
        Operand::Imm(v) => Ok(v),
        _ => Err(ExecErrorKind::Unimplemented),
    }
}

/// `s_set_gpr_idx_on S0, mode`: M0[7:0] = S0[7:0], M0[15:12] = mode, index mode on.
fn set_gpr_idx_on(w: &mut Wave, e: &Exe, _g: &mut Group<'_>) -> R {
    let (index, mode) = (s32(w, e, 0)?, imm(e, 1)?);
    w.m0 = (w.m0 & !0xF0FF) | (index & 0xFF) | (mode & 0xF) << 12;
    w.mode |= GPR_IDX_EN;
    NEXT
}

/// `s_set_gpr_idx_off`: index mode off (M0 keeps its value).
fn set_gpr_idx_off(w: &mut Wave, _e: &Exe, _g: &mut Group<'_>) -> R {
    w.mode &= !GPR_IDX_EN;
    NEXT
}

/// `s_set_gpr_idx_idx S0`: M0[7:0] = S0[7:0].
fn set_gpr_idx_idx(w: &mut Wave, e: &Exe, _g: &mut Group<'_>) -> R {
    w.m0 = (w.m0 & !0xFF) | (s32(w, e, 0)? & 0xFF);
    NEXT
}

/// `s_set_gpr_idx_mode mode`: M0[15:12] = mode[3:0].
fn set_gpr_idx_mode(w: &mut Wave, e: &Exe, _g: &mut Group<'_>) -> R {
    w.m0 = (w.m0 & !0xF000) | (imm(e, 0)? & 0xF) << 12;
    NEXT
}

/// The SGPR tuple `o` moved M0 registers on (M0 as an unsigned register offset).
fn relative(w: &Wave, o: Operand) -> Result<Operand, ExecErrorKind> {
    match o {
        Operand::Sgpr { reg, count } => {
            let r = u32::from(reg).checked_add(w.m0).ok_or(ExecErrorKind::RegisterOutOfRange)?;
            // The tuple must lie inside s0–s101.
            if r as usize + usize::from(count) > w.sgpr.len() {
                return Err(ExecErrorKind::RegisterOutOfRange);
            }
            Ok(Operand::Sgpr { reg: r as u8, count })
        }
        _ => Err(ExecErrorKind::Unimplemented),
    }
}

/// `s_movrels_b32/_b64 D, S`: D = the SGPR(s) M0 past S.
fn movrels(w: &mut Wave, e: &Exe, _g: &mut Group<'_>) -> R {
    let (d, s) = (op(e, 0)?, relative(w, op(e, 1)?)?);
    if e.aux == 2 {
        let v = w.s64(&s, Ty::B64)?;
        w.set_s64(&d, v)?;
    } else {
        let v = w.s32(&s)?;
        w.set_s32(&d, v)?;
    }
    NEXT
}

/// `s_movreld_b32/_b64 D, S`: the SGPR(s) M0 past D = S.
fn movreld(w: &mut Wave, e: &Exe, _g: &mut Group<'_>) -> R {
    let d = relative(w, op(e, 0)?)?;
    if e.aux == 2 {
        let v = w.s64(&op(e, 1)?, Ty::B64)?;
        w.set_s64(&d, v)?;
    } else {
        let v = w.s32(&op(e, 1)?)?;
        w.set_s32(&d, v)?;
    }
    NEXT
}

/// Handlers of this module by mnemonic.
pub(crate) fn handler_for_name(name: &str) -> Option<(Handler, u32)> {
    Some(match name {
        "s_set_gpr_idx_on" => (set_gpr_idx_on, 0),
        "s_set_gpr_idx_off" => (set_gpr_idx_off, 0),
        "s_set_gpr_idx_idx" => (set_gpr_idx_idx, 0),
        "s_set_gpr_idx_mode" => (set_gpr_idx_mode, 0),
        "s_movrels_b32" => (movrels, 1),
        "s_movrels_b64" => (movrels, 2),
        "s_movreld_b32" => (movreld, 1),
        "s_movreld_b64" => (movreld, 2),
        _ => return None,
    })
}
