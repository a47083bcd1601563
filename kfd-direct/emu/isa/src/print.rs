//! [`Inst`] to text in `llvm-objdump-15 -d --mcpu=gfx90a` syntax (docs/isa.md §5).
//!
//! The printer exists so the decoder can be compared with LLVM line by line; it follows LLVM's
//! spelling rules: register tuples as `s[0:1]`, constants spelt by the operand's type, modifiers
//! after the operands in LLVM's order, zero-valued optional fields left out.

use core::fmt::{self, Write};

use crate::spec::{self, Class, Field, Slot, Ty};
use crate::{Encoding, Ext, FloatConst, Inst, Operand, Special};

/// Formats an [`Inst`] like `llvm-objdump-15` (see [`Inst::display`]).
pub struct Display<'a>(pub(crate) &'a Inst);

impl fmt::Display for Display<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inst = self.0;
        let spec = inst.op.spec();
        match spec.enc {
            Encoding::Sop2 | Encoding::Sopk | Encoding::Sop1 | Encoding::Sopc | Encoding::Sopp => scalar(f, inst),
            Encoding::Smem => smem(f, inst),
            Encoding::Vop1 | Encoding::Vop2 | Encoding::Vopc => vop32(f, inst),
            Encoding::Vop3 => vop3(f, inst),
            Encoding::Vop3p => vop3p(f, inst),
            Encoding::Ds => ds(f, inst),
            Encoding::Flat | Encoding::Scratch | Encoding::Global => flat(f, inst),
            Encoding::Mubuf | Encoding::Mtbuf => buffer(f, inst),
            Encoding::Mimg => mimg(f, inst),
        }
    }
}

fn range(f: &mut fmt::Formatter<'_>, prefix: &str, reg: u8, count: u8) -> fmt::Result {
    if count <= 1 {
        write!(f, "{prefix}{reg}")
    } else {
        write!(f, "{prefix}[{}:{}]", reg, u16::from(reg) + u16::from(count) - 1)
    }
}

fn special(f: &mut fmt::Formatter<'_>, reg: Special, hi: bool, count: u8) -> fmt::Result {
    let pair = |f: &mut fmt::Formatter<'_>, name: &str| -> fmt::Result {
        if count >= 2 {
            f.write_str(name)
        } else if hi {
            write!(f, "{name}_hi")
        } else {
            write!(f, "{name}_lo")
        }
    };
    match reg {
        Special::FlatScratch => pair(f, "flat_scratch"),
        Special::XnackMask => pair(f, "xnack_mask"),
        Special::Vcc => pair(f, "vcc"),
        Special::Exec => pair(f, "exec"),
        Special::M0 => f.write_str("m0"),
        Special::Vccz => f.write_str("src_vccz"),
        Special::Execz => f.write_str("src_execz"),
        Special::Scc => f.write_str("src_scc"),
        Special::SharedBase => f.write_str("src_shared_base"),
        Special::SharedLimit => f.write_str("src_shared_limit"),
        Special::PrivateBase => f.write_str("src_private_base"),
        Special::PrivateLimit => f.write_str("src_private_limit"),
        Special::PopsExitingWaveId => f.write_str("src_pops_exiting_wave_id"),
        Special::LdsDirect => f.write_str("src_lds_direct"),
        Special::Null => f.write_str("null"),
    }
}

const FLOAT_NAMES: [(FloatConst, &str, u32, u16); 9] = [
    (FloatConst::Half, "0.5", 0x3f00_0000, 0x3800),
    (FloatConst::NegHalf, "-0.5", 0xbf00_0000, 0xb800),
    (FloatConst::One, "1.0", 0x3f80_0000, 0x3c00),
    (FloatConst::NegOne, "-1.0", 0xbf80_0000, 0xbc00),
    (FloatConst::Two, "2.0", 0x4000_0000, 0x4000),
    (FloatConst::NegTwo, "-2.0", 0xc000_0000, 0xc000),
    (FloatConst::Four, "4.0", 0x4080_0000, 0x4400),
    (FloatConst::NegFour, "-4.0", 0xc080_0000, 0xc400),
    (FloatConst::InvTwoPi, "0.15915494", 0x3e22_f983, 0x3118),
];

fn float_const(f: &mut fmt::Formatter<'_>, c: FloatConst, ty: Ty) -> fmt::Result {
    for (k, name, _, h) in FLOAT_NAMES {
        if k == c {
            return match ty {
                Ty::I16 => write!(f, "{h:#x}"),
                Ty::B64 | Ty::F64 if k == FloatConst::InvTwoPi => f.write_str("0.15915494309189532"),
                _ => f.write_str(name),
            };
        }
    }
    Ok(())
}

fn literal(f: &mut fmt::Formatter<'_>, v: u32, ty: Ty) -> fmt::Result {
    let as_int = v as i32;
    match ty {
        Ty::B64 | Ty::F64 => {
            if v <= 64 {
                write!(f, "{v}")
            } else {
                write!(f, "{v:#x}")
            }
        }
        Ty::F16 | Ty::I16 => {
            if (-16..=64).contains(&as_int) {
                return write!(f, "{as_int}");
            }
            if ty == Ty::F16 {
                for (_, name, _, h) in FLOAT_NAMES {
                    if u32::from(h) == v {
                        return f.write_str(name);
                    }
                }
            }
            write!(f, "{:#x}", v & 0xffff)
        }
        _ => {
            if (-16..=64).contains(&as_int) {
                return write!(f, "{as_int}");
            }
            for (_, name, bits, _) in FLOAT_NAMES {
                if bits == v {
                    return f.write_str(name);
                }
            }
            write!(f, "{v:#x}")
        }
    }
}

fn operand(f: &mut fmt::Formatter<'_>, op: &Operand, ty: Ty) -> fmt::Result {
    match *op {
        Operand::Sgpr { reg, count } => range(f, "s", reg, count),
        Operand::Vgpr { reg, count } => range(f, "v", reg, count),
        Operand::Agpr { reg, count } => range(f, "a", reg, count),
        Operand::Ttmp { reg, count } => range(f, "ttmp", reg, count),
        Operand::Special { reg, hi, count } => special(f, reg, hi, count),
        Operand::Int(i) => write!(f, "{i}"),
        Operand::Float(c) => float_const(f, c, ty),
        Operand::Literal(v) => literal(f, v, ty),
        Operand::Imm(v) => imm(f, v, ty),
        Operand::Off => f.write_str("off"),
    }
}

fn hex_or_small(f: &mut fmt::Formatter<'_>, v: u32) -> fmt::Result {
    if v <= 64 {
        write!(f, "{v}")
    } else {
        write!(f, "{v:#x}")
    }
}

fn imm(f: &mut fmt::Formatter<'_>, v: u32, ty: Ty) -> fmt::Result {
    match ty {
        Ty::Waitcnt => waitcnt(f, v),
        Ty::Hwreg => hwreg(f, v, false),
        Ty::Sendmsg => sendmsg(f, v),
        Ty::GprIdxMode if v <= 15 => gpr_idx(f, v),
        Ty::GprIdxMode => write!(f, "{v:#x}"),
        Ty::Branch => write!(f, "{}", v & 0xffff),
        Ty::Imm8 if v <= 15 => gpr_idx(f, v),
        Ty::Imm8 | Ty::Hex16 => write!(f, "{v:#x}"),
        Ty::Imm7 => hex_or_small(f, v),
        _ => hex_or_small(f, v),
    }
}

fn waitcnt(f: &mut fmt::Formatter<'_>, v: u32) -> fmt::Result {
    let vm = (v & 0xf) | ((v >> 14) & 3) << 4;
    let exp = (v >> 4) & 7;
    let lgkm = (v >> 8) & 0xf;
    let mut sep = "";
    let mut any = false;
    if vm != 63 {
        write!(f, "vmcnt({vm})")?;
        sep = " ";
        any = true;
    }
    if exp != 7 {
        write!(f, "{sep}expcnt({exp})")?;
        sep = " ";
        any = true;
    }
    if lgkm != 15 {
        write!(f, "{sep}lgkmcnt({lgkm})")?;
        any = true;
    }
    if !any {
        write!(f, "vmcnt({vm}) expcnt({exp}) lgkmcnt({lgkm})")?;
    }
    Ok(())
}

fn hwreg(f: &mut fmt::Formatter<'_>, v: u32, gfx940: bool) -> fmt::Result {
    let id = v & 0x3f;
    let offset = (v >> 6) & 0x1f;
    let size = ((v >> 11) & 0x1f) + 1;
    let name = match id {
        1 => "HW_REG_MODE",
        2 => "HW_REG_STATUS",
        3 => "HW_REG_TRAPSTS",
        4 => "HW_REG_HW_ID",
        5 => "HW_REG_GPR_ALLOC",
        6 => "HW_REG_LDS_ALLOC",
        7 => "HW_REG_IB_STS",
        15 => "HW_REG_SH_MEM_BASES",
        16 => "HW_REG_TBA_LO",
        17 => "HW_REG_TBA_HI",
        18 => "HW_REG_TMA_LO",
        19 => "HW_REG_TMA_HI",
        // gfx940's registers (docs/isa.md §2 "CDNA3").
        20 if gfx940 => "HW_REG_XCC_ID",
        21 if gfx940 => "HW_REG_SQ_PERF_SNAPSHOT_DATA",
        22 if gfx940 => "HW_REG_SQ_PERF_SNAPSHOT_DATA1",
        23 if gfx940 => "HW_REG_SQ_PERF_SNAPSHOT_PC_LO",
        24 if gfx940 => "HW_REG_SQ_PERF_SNAPSHOT_PC_HI",
        _ => "",
    };
    f.write_str("hwreg(")?;
    if name.is_empty() {
        write!(f, "{id}")?;
    } else {
        f.write_str(name)?;
    }
    if offset != 0 || size != 32 {
        write!(f, ", {offset}, {size}")?;
    }
    f.write_str(")")
}

fn sendmsg(f: &mut fmt::Formatter<'_>, v: u32) -> fmt::Result {
    let id = v & 0xf;
    let op = (v >> 4) & 7;
    let stream = (v >> 8) & 3;
    let name = match id {
        1 => "MSG_INTERRUPT",
        2 => "MSG_GS",
        3 => "MSG_GS_DONE",
        4 => "MSG_SAVEWAVE",
        5 => "MSG_STALL_WAVE_GEN",
        6 => "MSG_HALT_WAVES",
        7 => "MSG_ORDERED_PS_DONE",
        8 => "MSG_EARLY_PRIM_DEALLOC",
        9 => "MSG_GS_ALLOC_REQ",
        10 => "MSG_GET_DOORBELL",
        15 => "MSG_SYSMSG",
        _ => "",
    };
    let has_op = matches!(id, 2 | 3 | 15);
    // LLVM decodes id [3:0], op [6:4] and stream [9:8] and ignores the other bits.
    let valid = !name.is_empty()
        && match id {
            2 => (1..=3).contains(&op),
            3 => op <= 3 && (op != 0 || stream == 0),
            15 => (1..=4).contains(&op) && stream == 0,
            _ => op == 0 && stream == 0,
        };
    if !valid {
        // Fields that re-encode to the same immediate print as a tuple, anything else raw.
        if id | op << 4 | stream << 8 == v {
            return write!(f, "sendmsg({id}, {op}, {stream})");
        }
        return write!(f, "{v}");
    }
    write!(f, "sendmsg({name}")?;
    if has_op {
        let op_name = match (id, op) {
            (2 | 3, 0) => "GS_OP_NOP",
            (2 | 3, 1) => "GS_OP_CUT",
            (2 | 3, 2) => "GS_OP_EMIT",
            (2 | 3, 3) => "GS_OP_EMIT_CUT",
            (15, 1) => "SYSMSG_OP_ECC_ERR_INTERRUPT",
            (15, 2) => "SYSMSG_OP_REG_RD",
            (15, 3) => "SYSMSG_OP_HOST_TRAP_ACK",
            (15, 4) => "SYSMSG_OP_TTRACE_PC",
            _ => "",
        };
        if op_name.is_empty() {
            write!(f, ", {op}")?;
        } else {
            write!(f, ", {op_name}")?;
        }
        if id != 15 && op != 0 {
            write!(f, ", {stream}")?;
        }
    }
    f.write_str(")")
}

fn gpr_idx(f: &mut fmt::Formatter<'_>, v: u32) -> fmt::Result {
    f.write_str("gpr_idx(")?;
    let mut sep = "";
    for (bit, name) in [(1, "SRC0"), (2, "SRC1"), (4, "SRC2"), (8, "DST")] {
        if v & bit != 0 {
            write!(f, "{sep}{name}")?;
            sep = ",";
        }
    }
    f.write_str(")")
}

/// Writes `name op, op, …`; `each` may wrap an operand (source modifiers).
fn operands(
    f: &mut fmt::Formatter<'_>,
    name: &str,
    inst: &Inst,
    mut each: impl FnMut(&mut fmt::Formatter<'_>, &Slot, &Operand) -> fmt::Result,
) -> fmt::Result {
    f.write_str(name)?;
    let slots = inst.op.spec().slots;
    for (i, (s, o)) in slots.iter().zip(inst.operands()).enumerate() {
        f.write_str(if i == 0 { " " } else { ", " })?;
        each(f, s, o)?;
    }
    Ok(())
}

fn plain(f: &mut fmt::Formatter<'_>, s: &Slot, o: &Operand) -> fmt::Result {
    operand(f, o, s.ty)
}

fn scalar(f: &mut fmt::Formatter<'_>, inst: &Inst) -> fmt::Result {
    let spec = inst.op.spec();
    f.write_str(spec.name)?;
    let mut first = true;
    for (s, o) in spec.slots.iter().zip(inst.operands()) {
        if s.ty == Ty::Optional16 {
            if *o != Operand::Imm(0) {
                if let Operand::Imm(v) = o {
                    write!(f, " {v}")?;
                }
            }
            continue;
        }
        f.write_str(if first { " " } else { ", " })?;
        first = false;
        match (s.ty, o) {
            (Ty::Hwreg, Operand::Imm(v)) => hwreg(f, *v, inst.mods.target == crate::Target::Gfx940)?,
            _ => operand(f, o, s.ty)?,
        }
    }
    Ok(())
}

fn smem(f: &mut fmt::Formatter<'_>, inst: &Inst) -> fmt::Result {
    operands(f, inst.op.name(), inst, |f, s, o| match (s.field, o) {
        (Field::Offset, Operand::Imm(_)) if inst.mods.offset < 0 => {
            write!(f, "-{:#x}", inst.mods.offset.unsigned_abs())
        }
        (Field::Offset, Operand::Imm(_)) => write!(f, "{:#x}", inst.mods.offset),
        _ => plain(f, s, o),
    })?;
    let slots = inst.op.spec().slots;
    let data = slots.len() == 3 && slots.first().is_some_and(|s| s.class != Class::Imm);
    if inst.mods.glc && data {
        f.write_str(" glc")?;
    }
    Ok(())
}

/// Source index (0–2) of a slot, for per-source modifier bits.
fn src_index(field: Field) -> Option<u8> {
    match field {
        Field::Src0 => Some(0),
        Field::Src1 => Some(1),
        Field::Src2 => Some(2),
        _ => None,
    }
}

fn with_mods(f: &mut fmt::Formatter<'_>, s: &Slot, o: &Operand, neg: u8, abs: u8) -> fmt::Result {
    let (n, a) = match src_index(s.field) {
        Some(i) => (neg >> i & 1 == 1, abs >> i & 1 == 1),
        None => (false, false),
    };
    let imm = matches!(o, Operand::Int(_) | Operand::Float(_) | Operand::Literal(_));
    if n && imm && !a {
        // LLVM spells a negated constant `neg(c)` so it cannot be read as the constant `-c`.
        f.write_str("neg(")?;
        operand(f, o, s.ty)?;
        return f.write_str(")");
    }
    if n {
        f.write_str("-")?;
    }
    if a {
        f.write_str("|")?;
    }
    operand(f, o, s.ty)?;
    if a {
        f.write_str("|")?;
    }
    Ok(())
}

fn base_name(name: &str) -> &str {
    name.strip_suffix("_e32").unwrap_or(name)
}

fn clamp_omod(f: &mut fmt::Formatter<'_>, inst: &Inst) -> fmt::Result {
    if inst.mods.clamp {
        f.write_str(" clamp")?;
    }
    match inst.mods.omod {
        1 => f.write_str(" mul:2"),
        2 => f.write_str(" mul:4"),
        3 => f.write_str(" div:2"),
        _ => Ok(()),
    }
}

const SDWA_SEL: [&str; 8] = ["BYTE_0", "BYTE_1", "BYTE_2", "BYTE_3", "WORD_0", "WORD_1", "DWORD", "7"];

fn vop32(f: &mut fmt::Formatter<'_>, inst: &Inst) -> fmt::Result {
    let spec = inst.op.spec();
    let m = &inst.mods;
    match m.ext {
        // With a mandatory K literal (v_madmk_f16), a literal src0 is that same dword and LLVM
        // prints all 32 bits of it.
        Ext::None if spec.slots.iter().any(|s| s.field == Field::Literal) => {
            // (v_madak_f16's src0 literal prints as any f16 source: its low half.)
            operands(f, spec.name, inst, |f, s, o| match o {
                // The K constant, and a madmk's literal src0, print in hex even when inline-valued.
                Operand::Literal(v) if !spec.name.starts_with("v_madak") || s.field != Field::Src0 => {
                    write!(f, "{v:#x}")
                }
                _ => plain(f, s, o),
            })
        }
        Ext::None => operands(f, spec.name, inst, plain),
        Ext::Dpp(d) => {
            f.write_str(base_name(spec.name))?;
            f.write_str("_dpp")?;
            let mut first = true;
            // LLVM reads the DPP neg/abs bits of integer sources as none (v_cndmask_b32, the
            // integer dot products) or as `sext` (v_ldexp_f16's exponent).
            let base = base_name(spec.name);
            let int_srcs = matches!(base, "v_cndmask_b32" | "v_dot2c_i32_i16" | "v_dot4c_i32_i8" | "v_dot8c_i32_i4");
            for (s, o) in spec.slots.iter().zip(inst.operands()) {
                f.write_str(if first { " " } else { ", " })?;
                first = false;
                if int_srcs {
                    operand(f, o, s.ty)?;
                } else if base == "v_ldexp_f16" && s.field == Field::Src1 {
                    if m.neg & 2 != 0 {
                        f.write_str("sext(")?;
                        operand(f, o, s.ty)?;
                        f.write_str(")")?;
                    } else {
                        operand(f, o, s.ty)?;
                    }
                } else {
                    with_mods(f, s, o, m.neg, m.abs)?;
                }
            }
            f.write_char(' ')?;
            dpp_ctrl(f, d.ctrl)?;
            write!(f, " row_mask:{:#x} bank_mask:{:#x}", d.row_mask, d.bank_mask)?;
            if d.bound_ctrl {
                f.write_str(" bound_ctrl:1")?;
            }
            Ok(())
        }
        Ext::Sdwa(sd) => {
            f.write_str(base_name(spec.name))?;
            f.write_str("_sdwa")?;
            let mut first = true;
            for (s, o) in spec.slots.iter().zip(inst.operands()) {
                f.write_str(if first { " " } else { ", " })?;
                first = false;
                let sx = src_index(s.field).is_some_and(|i| sd.sext >> i & 1 == 1);
                if sx {
                    f.write_str("sext(")?;
                }
                with_mods(f, s, o, m.neg, m.abs)?;
                if sx {
                    f.write_str(")")?;
                }
            }
            clamp_omod(f, inst)?;
            if spec.enc != Encoding::Vopc {
                write!(f, " dst_sel:{}", SDWA_SEL[usize::from(sd.dst_sel & 7)])?;
                let unused = ["UNUSED_PAD", "UNUSED_SEXT", "UNUSED_PRESERVE", "3"];
                write!(f, " dst_unused:{}", unused[usize::from(sd.dst_unused & 3)])?;
            }
            write!(f, " src0_sel:{}", SDWA_SEL[usize::from(sd.src0_sel & 7)])?;
            if spec.slots.iter().any(|s| s.field == Field::Src1) {
                write!(f, " src1_sel:{}", SDWA_SEL[usize::from(sd.src1_sel & 7)])?;
            }
            Ok(())
        }
    }
}

fn dpp_ctrl(f: &mut fmt::Formatter<'_>, c: u16) -> fmt::Result {
    match c {
        0x00..=0xff => write!(f, "quad_perm:[{},{},{},{}]", c & 3, (c >> 2) & 3, (c >> 4) & 3, (c >> 6) & 3),
        0x101..=0x10f => write!(f, "row_shl:{}", c & 0xf),
        0x111..=0x11f => write!(f, "row_shr:{}", c & 0xf),
        0x121..=0x12f => write!(f, "row_ror:{}", c & 0xf),
        0x130 => f.write_str("wave_shl:1"),
        0x134 => f.write_str("wave_rol:1"),
        0x138 => f.write_str("wave_shr:1"),
        0x13c => f.write_str("wave_ror:1"),
        0x140 => f.write_str("row_mirror"),
        0x141 => f.write_str("row_half_mirror"),
        0x142 => f.write_str("row_bcast:15"),
        0x143 => f.write_str("row_bcast:31"),
        0x150..=0x15f => write!(f, "row_newbcast:{}", c & 0xf),
        _ => write!(f, "/* invalid dpp_ctrl {c:#x} */"),
    }
}

fn bit_list(f: &mut fmt::Formatter<'_>, label: &str, v: u8, n: usize) -> fmt::Result {
    write!(f, " {label}:[")?;
    for i in 0..n {
        if i > 0 {
            f.write_char(',')?;
        }
        write!(f, "{}", v >> i & 1)?;
    }
    f.write_char(']')
}

fn n_srcs(inst: &Inst) -> usize {
    inst.op.spec().slots.iter().filter(|s| src_index(s.field).is_some()).count()
}

fn vop3(f: &mut fmt::Formatter<'_>, inst: &Inst) -> fmt::Result {
    let m = &inst.mods;
    let flags = inst.op.spec().flags;
    // Opcodes without source modifiers or op_sel ignore those bits, and so does LLVM's printer.
    // Only sources that take modifiers print them (LLVM ignores the bits elsewhere);
    // v_cvt_pk_u8_f32's integer sources read their neg bit as sext.
    let mods = ((flags / spec::MODS_SRC0) & 7) as u8;
    let sext_srcs: u8 = if inst.op.name() == "v_cvt_pk_u8_f32" { 0b110 } else { 0 };
    let (neg, abs) = (m.neg & (mods | sext_srcs), m.abs & mods);
    operands(f, inst.op.name(), inst, |f, s, o| {
        let i = src_index(s.field).unwrap_or(3);
        if sext_srcs >> i & 1 == 1 {
            if neg >> i & 1 == 1 {
                f.write_str("sext(")?;
                operand(f, o, s.ty)?;
                return f.write_str(")");
            }
            return operand(f, o, s.ty);
        }
        with_mods(f, s, o, neg, abs)
    })?;
    if m.op_sel != 0 && flags & spec::OPSEL != 0 {
        let n = n_srcs(inst);
        // op_sel bits: one per source, then bit 3 for the destination.
        let v = (m.op_sel & ((1 << n) - 1)) | ((m.op_sel >> 3 & 1) << n);
        bit_list(f, "op_sel", v, n + 1)?;
    }
    clamp_omod(f, inst)
}

fn vop3p(f: &mut fmt::Formatter<'_>, inst: &Inst) -> fmt::Result {
    let spec = inst.op.spec();
    let m = &inst.mods;
    if spec.flags & spec::MAI != 0 {
        operands(f, spec.name, inst, plain)?;
        if m.abs != 0 {
            write!(f, " cbsz:{}", m.abs)?;
        }
        if m.op_sel != 0 {
            write!(f, " abid:{}", m.op_sel)?;
        }
        if m.neg != 0 {
            write!(f, " blgp:{}", m.neg)?;
        }
        return Ok(());
    }
    if spec.slots.iter().any(|s| s.class == Class::Agpr) {
        // v_accvgpr_read/write: no packed-math modifiers.
        return operands(f, spec.name, inst, plain);
    }
    let n = n_srcs(inst);
    let mask = (1u8 << n) - 1;
    let mix = spec.name.starts_with("v_fma_mix");
    if mix {
        operands(f, spec.name, inst, |f, s, o| with_mods(f, s, o, m.neg, m.abs))?;
    } else {
        operands(f, spec.name, inst, plain)?;
    }
    if m.op_sel & mask != 0 {
        bit_list(f, "op_sel", m.op_sel, n)?;
    }
    let hi = m.op_sel_hi & mask;
    if (mix && hi != 0) || (!mix && hi != mask) {
        bit_list(f, "op_sel_hi", hi, n)?;
    }
    if !mix {
        if m.neg & mask != 0 {
            bit_list(f, "neg_lo", m.neg, n)?;
        }
        if m.abs & mask != 0 {
            bit_list(f, "neg_hi", m.abs, n)?;
        }
    }
    if m.clamp {
        f.write_str(" clamp")?;
    }
    Ok(())
}

fn ds(f: &mut fmt::Formatter<'_>, inst: &Inst) -> fmt::Result {
    let spec = inst.op.spec();
    let m = &inst.mods;
    operands(f, spec.name, inst, plain)?;
    if spec.name == "ds_swizzle_b32" {
        swizzle(f, m.offset as u32)?;
    } else if spec.flags & spec::TWO_OFFSETS != 0 {
        if m.offset != 0 {
            write!(f, " offset0:{}", m.offset)?;
        }
        if m.offset1 != 0 {
            write!(f, " offset1:{}", m.offset1)?;
        }
    } else if m.offset != 0 {
        write!(f, " offset:{}", m.offset)?;
    }
    if m.gds_lds || spec.flags & spec::GDS_ONLY != 0 {
        f.write_str(" gds")?;
    }
    Ok(())
}

/// `ds_swizzle_b32` offsets in LLVM's symbolic form (docs/isa.md §5 "DS").
fn swizzle(f: &mut fmt::Formatter<'_>, v: u32) -> fmt::Result {
    if v == 0 {
        return Ok(());
    }
    if v & 0xff00 == 0x8000 {
        let l = |i: u32| (v >> (2 * i)) & 3;
        return write!(f, " offset:swizzle(QUAD_PERM,{},{},{},{})", l(0), l(1), l(2), l(3));
    }
    if v & 0x8000 != 0 {
        return write!(f, " offset:{v}");
    }
    let and = v & 0x1f;
    let or = (v >> 5) & 0x1f;
    let xor = (v >> 10) & 0x1f;
    if and == 0x1f && or == 0 && xor.count_ones() == 1 {
        return write!(f, " offset:swizzle(SWAP,{xor})");
    }
    if and == 0x1f && or == 0 && xor > 0 && (xor + 1).is_power_of_two() {
        return write!(f, " offset:swizzle(REVERSE,{})", xor + 1);
    }
    let group = 0x1f - and + 1;
    if group > 1 && group.is_power_of_two() && or < group && xor == 0 {
        return write!(f, " offset:swizzle(BROADCAST,{group},{or})");
    }
    f.write_str(" offset:swizzle(BITMASK_PERM,\"")?;
    let p0 = or ^ xor;
    let p1 = (0x1f & and | or) ^ xor;
    for bit in (0..5).rev() {
        let (a, b) = (p0 >> bit & 1, p1 >> bit & 1);
        f.write_str(match (a == b, a) {
            (true, 0) => "0",
            (true, _) => "1",
            (false, 0) => "p",
            (false, _) => "i",
        })?;
    }
    f.write_str("\")")
}

fn flat(f: &mut fmt::Formatter<'_>, inst: &Inst) -> fmt::Result {
    let m = &inst.mods;
    f.write_str(inst.op.name())?;
    for (i, o) in inst.operands().iter().enumerate() {
        f.write_str(if i == 0 { " " } else { ", " })?;
        operand(f, o, Ty::B32)?;
    }
    if m.offset != 0 {
        write!(f, " offset:{}", m.offset)?;
    }
    cache_bits(f, inst)?;
    if m.gds_lds {
        f.write_str(" lds")?;
    }
    Ok(())
}

/// The cache bits of FLAT, GLOBAL, SCRATCH and buffer instructions: gfx90a's `glc slc scc`, or
/// gfx940's names for the same three bits, `sc0 nt sc1` (docs/isa.md §5).
fn cache_bits(f: &mut fmt::Formatter<'_>, inst: &Inst) -> fmt::Result {
    let m = &inst.mods;
    let [glc, slc, scc] = match inst.mods.target {
        crate::Target::Gfx90a => [" glc", " slc", " scc"],
        crate::Target::Gfx940 => [" sc0", " nt", " sc1"],
    };
    if m.glc {
        f.write_str(glc)?;
    }
    if m.slc {
        f.write_str(slc)?;
    }
    if m.scc {
        f.write_str(scc)?;
    }
    Ok(())
}

fn mimg(f: &mut fmt::Formatter<'_>, inst: &Inst) -> fmt::Result {
    let m = &inst.mods;
    f.write_str(inst.op.name())?;
    for (i, o) in inst.operands().iter().enumerate() {
        f.write_str(if i == 0 { " " } else { ", " })?;
        operand(f, o, Ty::B32)?;
    }
    if m.dmask != 0 {
        write!(f, " dmask:{:#x}", m.dmask)?;
    }
    let flag = |f: &mut fmt::Formatter<'_>, bit: u8, name: &str| -> fmt::Result {
        if m.image & bit != 0 {
            write!(f, " {name}")?;
        }
        Ok(())
    };
    flag(f, crate::IMAGE_UNORM, "unorm")?;
    if m.glc {
        f.write_str(" glc")?;
    }
    if m.slc {
        f.write_str(" slc")?;
    }
    if m.scc {
        f.write_str(" scc")?;
    }
    flag(f, crate::IMAGE_A16, "a16")?;
    flag(f, crate::IMAGE_LWE, "lwe")?;
    flag(f, crate::IMAGE_DA, "da")?;
    flag(f, crate::IMAGE_D16, "d16")
}

const DFMT: [&str; 16] = [
    "INVALID",
    "8",
    "16",
    "8_8",
    "32",
    "16_16",
    "10_11_11",
    "11_11_10",
    "10_10_10_2",
    "2_10_10_10",
    "8_8_8_8",
    "32_32",
    "16_16_16_16",
    "32_32_32",
    "32_32_32_32",
    "RESERVED_15",
];
const NFMT: [&str; 8] = ["UNORM", "SNORM", "USCALED", "SSCALED", "UINT", "SINT", "RESERVED_6", "FLOAT"];

fn buffer(f: &mut fmt::Formatter<'_>, inst: &Inst) -> fmt::Result {
    let m = &inst.mods;
    let spec = inst.op.spec();
    f.write_str(spec.name)?;
    if spec.enc == Encoding::Mubuf && spec.flags & spec::NO_ADDR != 0 {
        // Cache-maintenance ops (buffer_wbl2, buffer_invl2, buffer_wbinvl1*) print no operands;
        // on gfx940 `buffer_wbl2` and `buffer_inv` print their scope bits (`sc0 sc1`, not `nt`).
        if inst.mods.target == crate::Target::Gfx940 && matches!(spec.name, "buffer_wbl2" | "buffer_inv") {
            if m.glc {
                f.write_str(" sc0")?;
            }
            if m.scc {
                f.write_str(" sc1")?;
            }
        }
        return Ok(());
    }
    for (i, o) in inst.operands().iter().enumerate() {
        f.write_str(if i == 0 { " " } else { ", " })?;
        operand(f, o, Ty::B32)?;
    }
    if spec.enc == Encoding::Mtbuf {
        let dfmt = usize::from(m.offset1 & 0xf);
        let nfmt = usize::from(m.offset1 >> 4 & 7);
        // LLVM leaves out the default halves (data format 8, number format UNORM).
        match (dfmt != 1, nfmt != 0) {
            (true, true) => write!(f, " format:[BUF_DATA_FORMAT_{},BUF_NUM_FORMAT_{}]", DFMT[dfmt], NFMT[nfmt])?,
            (true, false) => write!(f, " format:[BUF_DATA_FORMAT_{}]", DFMT[dfmt])?,
            (false, true) => write!(f, " format:[BUF_NUM_FORMAT_{}]", NFMT[nfmt])?,
            (false, false) => {}
        }
    }
    if m.idxen {
        f.write_str(" idxen")?;
    }
    if m.offen {
        f.write_str(" offen")?;
    }
    if m.offset != 0 {
        write!(f, " offset:{}", m.offset)?;
    }
    cache_bits(f, inst)?;
    if m.gds_lds {
        f.write_str(" lds")?;
    }
    Ok(())
}
