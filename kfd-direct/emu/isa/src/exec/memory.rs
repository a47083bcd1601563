//! Scratch, buffers and the system instructions (docs/executor.md §5): the private segment as
//! the queue's swizzled scratch V# lays it out, MUBUF/MTBUF through a buffer resource (V#) with
//! its bounds check, `scratch_*` and FLAT accesses to the private aperture relative to
//! FLAT_SCRATCH, the 16-bit (`d16`) loads and stores, SMEM buffer loads and stores, the clocks,
//! messages, halts and the DS lane shuffles.
//!
//! [`handler_for_name`] is the fallback of `ops::handler_for_name`: a mnemonic the ALU and
//! global-memory table does not know is looked up here.

// Lane loops index several per-lane arrays at once.
#![allow(clippy::needless_range_loop)]

use super::ops::{
    atomic_aux, atomic_op_aux, dst, fault, field, flat_addrs, flat_parts, lds_atomic, lds_read, lds_write, simm16, Exe,
    Handler, NEXT, R, SIGNED,
};
use super::wave::{Lanes, Lanes64, Ty, Wave, LANES};
use super::{AtomicOp, ExecErrorKind, Group};
use crate::spec::Field;
use crate::{Encoding, Operand};

// ---------------------------------------------------------------------------------------------
// aux bits of the vector memory handlers here: bytes (bits 7:0) and `SIGNED` (bit 8) as in ops,
// plus the 16-bit forms.

/// A `_d16` load writes bits 15:0 of the VGPR and keeps 31:16.
const D16: u32 = 1 << 9;
/// A `_d16_hi` load writes bits 31:16 and keeps 15:0; a `_d16_hi` store stores bits 31:16.
const HI: u32 = 1 << 10;

/// The scratch layout of docs/executor.md §5: private byte `p` of `lane` lies at
/// `base + (p / 4) × 256 + lane × 4 + p % 4` (dwords interleaved across the 64 lanes, what the
/// queue's swizzled V# with ELEMENT_SIZE 4 and INDEX_STRIDE 64 produces).
pub(crate) fn private_addr(base: u64, lane: usize, p: u32) -> u64 {
    base.wrapping_add(u64::from(p / 4) * 256).wrapping_add(lane as u64 * 4).wrapping_add(u64::from(p % 4))
}

/// Reads `out.len()` private bytes of `lane` from private address `p`, dword by dword.
pub(crate) fn private_load(g: &Group<'_>, base: u64, lane: usize, p: u32, out: &mut [u8]) -> Result<(), ExecErrorKind> {
    let mut i = 0;
    while i < out.len() {
        let at = p.wrapping_add(i as u32);
        let n = (4 - (at % 4) as usize).min(out.len() - i);
        let chunk = out.get_mut(i..i + n).ok_or(ExecErrorKind::Unimplemented)?;
        g.mem.load(private_addr(base, lane, at), chunk).map_err(fault)?;
        i += n;
    }
    Ok(())
}

/// Writes `data` to private address `p` of `lane`, dword by dword.
pub(crate) fn private_store(g: &Group<'_>, base: u64, lane: usize, p: u32, data: &[u8]) -> Result<(), ExecErrorKind> {
    let mut i = 0;
    while i < data.len() {
        let at = p.wrapping_add(i as u32);
        let n = (4 - (at % 4) as usize).min(data.len() - i);
        let chunk = data.get(i..i + n).ok_or(ExecErrorKind::Unimplemented)?;
        g.mem.store(private_addr(base, lane, at), chunk).map_err(fault)?;
        i += n;
    }
    Ok(())
}

/// An atomic on private address `p` of `lane` (4 or 8 bytes, naturally aligned: an 8-byte one
/// spans two interleaved dwords and is done as a read-modify-write of both, the wave being the
/// only user of its scratch).
#[allow(clippy::too_many_arguments)]
pub(crate) fn private_atomic(
    g: &Group<'_>,
    base: u64,
    lane: usize,
    p: u32,
    size: u8,
    op: AtomicOp,
    value: u64,
    compare: u64,
) -> Result<u64, ExecErrorKind> {
    if p % u32::from(size) != 0 {
        return Err(ExecErrorKind::MemoryFault(private_addr(base, lane, p)));
    }
    if size == 4 {
        return g.mem.atomic(private_addr(base, lane, p), 4, op, value, compare).map_err(fault);
    }
    let mut b = [0u8; 8];
    private_load(g, base, lane, p, &mut b)?;
    let old = u64::from_le_bytes(b);
    private_store(g, base, lane, p, &op.apply(old, value, compare, 8).to_le_bytes())?;
    Ok(old)
}

/// Where one piece (at most a dword) of a lane's access goes.
#[derive(Clone, Copy)]
enum Loc {
    /// A GPU virtual address.
    Mem(u64),
    /// An LDS byte offset (FLAT through the shared aperture).
    Lds(u32),
    /// Private address `p` of `lane` in the scratch at `base` (each dword of a piece apart).
    Private { base: u64, lane: usize, p: u32 },
    /// Outside the buffer's range: a load reads 0, a store is dropped.
    Out,
}

fn piece_load(g: &Group<'_>, loc: Loc, out: &mut [u8]) -> Result<(), ExecErrorKind> {
    match loc {
        Loc::Mem(a) => g.mem.load(a, out).map_err(fault),
        Loc::Lds(a) => lds_read(g, a, out),
        Loc::Private { base, lane, p } => private_load(g, base, lane, p, out),
        Loc::Out => {
            out.fill(0);
            Ok(())
        }
    }
}

fn piece_store(g: &mut Group<'_>, loc: Loc, data: &[u8]) -> Result<(), ExecErrorKind> {
    match loc {
        Loc::Mem(a) => g.mem.store(a, data).map_err(fault),
        Loc::Lds(a) => lds_write(g, a, data),
        Loc::Private { base, lane, p } => private_store(g, base, lane, p, data),
        Loc::Out => Ok(()),
    }
}

/// A load of `aux`'s size into `vdst` for the active lanes; `loc(lane, k)` places byte `4k` of
/// the access (each dword, or the whole access when it is smaller, is one piece).
fn load_lanes(
    w: &mut Wave,
    e: &Exe,
    g: &mut Group<'_>,
    vdst: &Operand,
    loc: &dyn Fn(&Wave, usize, u32) -> Result<Loc, ExecErrorKind>,
) -> R {
    let n = (e.aux & 0xFF) as usize;
    let dwords = n.div_ceil(4);
    let mut out = [[0u32; LANES]; 4];
    let exec = w.exec;
    // The 16-bit forms keep the other half of the destination.
    let keep = if e.aux & (D16 | HI) != 0 { w.v32(vdst)? } else { [0; LANES] };
    for l in 0..LANES {
        if exec >> l & 1 == 0 {
            continue;
        }
        let mut buf = [0u8; 16];
        for k in 0..dwords {
            let piece = buf.get_mut(4 * k..(4 * k + 4).min(n)).ok_or(ExecErrorKind::Unimplemented)?;
            piece_load(g, loc(w, l, 4 * k as u32)?, piece)?;
        }
        let word = |k: usize| u32::from_le_bytes([buf[4 * k], buf[4 * k + 1], buf[4 * k + 2], buf[4 * k + 3]]);
        if n < 4 {
            let v = match (n, e.aux & SIGNED != 0) {
                (1, false) => u32::from(buf[0]),
                (1, true) => buf[0] as i8 as i32 as u32,
                (2, false) => u32::from(u16::from_le_bytes([buf[0], buf[1]])),
                _ => u16::from_le_bytes([buf[0], buf[1]]) as i16 as i32 as u32,
            };
            out[0][l] = if e.aux & HI != 0 {
                (keep[l] & 0xFFFF) | v << 16
            } else if e.aux & D16 != 0 {
                (keep[l] & 0xFFFF_0000) | (v & 0xFFFF)
            } else {
                v
            };
        } else {
            for k in 0..dwords {
                out[k][l] = word(k);
            }
        }
    }
    for (k, o) in out.iter().enumerate().take(dwords) {
        w.set_v32k(vdst, k, o, exec)?;
    }
    NEXT
}

/// A store of `aux`'s size from `data` for the active lanes (placed as in [`load_lanes`]).
fn store_lanes(
    w: &mut Wave,
    e: &Exe,
    g: &mut Group<'_>,
    data: &Operand,
    loc: &dyn Fn(&Wave, usize, u32) -> Result<Loc, ExecErrorKind>,
) -> R {
    let n = (e.aux & 0xFF) as usize;
    let dwords = n.div_ceil(4);
    let mut vals = [[0u32; LANES]; 4];
    for (k, v) in vals.iter_mut().enumerate().take(dwords) {
        *v = w.v32k(data, k as u8)?;
    }
    let exec = w.exec;
    for l in 0..LANES {
        if exec >> l & 1 == 0 {
            continue;
        }
        let mut buf = [0u8; 16];
        for k in 0..dwords {
            let v = if e.aux & HI != 0 { vals[k][l] >> 16 } else { vals[k][l] };
            buf[4 * k..4 * k + 4].copy_from_slice(&v.to_le_bytes());
        }
        for k in 0..dwords {
            let piece = buf.get(4 * k..(4 * k + 4).min(n)).ok_or(ExecErrorKind::Unimplemented)?;
            let at = loc(w, l, 4 * k as u32)?;
            piece_store(g, at, piece)?;
        }
    }
    NEXT
}

// ---------------------------------------------------------------------------------------------
// FLAT / GLOBAL 16-bit forms and FLAT through the apertures

/// Where a FLAT/GLOBAL lane address points (docs/executor.md §3 apertures): LDS, the wave's
/// scratch (private aperture, relative to FLAT_SCRATCH) or global memory.
fn flat_loc(w: &Wave, e: &Exe, lane: usize, a: u64) -> Result<Loc, ExecErrorKind> {
    if e.inst.encoding() == Encoding::Flat {
        use super::{PRIVATE_APERTURE, SHARED_APERTURE};
        if (SHARED_APERTURE..SHARED_APERTURE + (1 << 32)).contains(&a) {
            return Ok(Loc::Lds((a - SHARED_APERTURE) as u32));
        }
        if (PRIVATE_APERTURE..PRIVATE_APERTURE + (1 << 32)).contains(&a) {
            let p = (a - PRIVATE_APERTURE) as u32;
            return Ok(Loc::Private { base: w.flat_scratch, lane, p });
        }
    }
    Ok(Loc::Mem(a))
}

fn flat_d16_load(w: &mut Wave, e: &Exe, g: &mut Group<'_>) -> R {
    let (vdst, addr, _, saddr) = flat_parts(e, true);
    let vdst = vdst.ok_or(ExecErrorKind::Unimplemented)?;
    if e.inst.mods.gds_lds {
        return Err(ExecErrorKind::Unimplemented);
    }
    let addrs = flat_addrs(w, e, &addr, saddr)?;
    // At most 2 bytes: one piece, inside one private dword when it is aligned.
    load_lanes(w, e, g, &vdst, &|w, l, _| flat_loc(w, e, l, addrs[l]))
}

fn flat_d16_store(w: &mut Wave, e: &Exe, g: &mut Group<'_>) -> R {
    let (_, addr, data, saddr) = flat_parts(e, false);
    let data = data.ok_or(ExecErrorKind::Unimplemented)?;
    let addrs = flat_addrs(w, e, &addr, saddr)?;
    store_lanes(w, e, g, &data, &|w, l, _| flat_loc(w, e, l, addrs[l]))
}

/// `ds_read_{u8,i8,u16}_d16[_hi]`: one 8- or 16-bit LDS value into a half of each VGPR, the
/// other half kept (as the FLAT `_d16` loads).
fn ds_d16_load(w: &mut Wave, e: &Exe, g: &mut Group<'_>) -> R {
    if e.inst.mods.gds_lds {
        return Err(ExecErrorKind::Unimplemented);
    }
    let addr = w.v32(&field(e, Field::Addr, 0)?)?;
    let off = e.inst.mods.offset as u32 & 0xFFFF;
    load_lanes(w, e, g, &dst(e)?, &|_, l, k| Ok(Loc::Lds(addr[l].wrapping_add(off).wrapping_add(k))))
}

/// `ds_write_{b8,b16}_d16_hi`: the low 8 or 16 bits of each VGPR's upper half to LDS.
fn ds_d16_store(w: &mut Wave, e: &Exe, g: &mut Group<'_>) -> R {
    if e.inst.mods.gds_lds {
        return Err(ExecErrorKind::Unimplemented);
    }
    let addr = w.v32(&field(e, Field::Addr, 0)?)?;
    let off = e.inst.mods.offset as u32 & 0xFFFF;
    store_lanes(w, e, g, &field(e, Field::Data0, 0)?, &|_, l, k| {
        Ok(Loc::Lds(addr[l].wrapping_add(off).wrapping_add(k)))
    })
}

// ---------------------------------------------------------------------------------------------
// SCRATCH

/// The private addresses of a `scratch_*` access: SGPR offset (SADDR), else VGPR offset, plus
/// the signed 13-bit instruction offset; on gfx940 both when both are present (SVS: SADDR and
/// a VGPR address with the SVE bit, docs/isa.md §2 "CDNA3").
fn scratch_offsets(w: &Wave, e: &Exe, addr: &Operand, saddr: Option<Operand>) -> Result<Lanes, ExecErrorKind> {
    let off = e.inst.mods.offset as u32;
    Ok(match (saddr, addr) {
        (
            Some(s @ (Operand::Sgpr { .. } | Operand::Ttmp { .. } | Operand::Special { .. })),
            a @ (Operand::Vgpr { .. } | Operand::Agpr { .. }),
        ) => {
            let (s, v) = (w.s32(&s)?.wrapping_add(off), w.v32(a)?);
            core::array::from_fn(|l| s.wrapping_add(v[l]))
        }
        (Some(s @ (Operand::Sgpr { .. } | Operand::Ttmp { .. } | Operand::Special { .. })), _) => {
            [w.s32(&s)?.wrapping_add(off); LANES]
        }
        (_, a @ (Operand::Vgpr { .. } | Operand::Agpr { .. })) => {
            let v = w.v32(a)?;
            core::array::from_fn(|l| v[l].wrapping_add(off))
        }
        _ => [off; LANES],
    })
}

fn scratch_load(w: &mut Wave, e: &Exe, g: &mut Group<'_>) -> R {
    let (vdst, addr, _, saddr) = flat_parts(e, true);
    let vdst = vdst.ok_or(ExecErrorKind::Unimplemented)?;
    if e.inst.mods.gds_lds {
        return Err(ExecErrorKind::Unimplemented);
    }
    let p = scratch_offsets(w, e, &addr, saddr)?;
    load_lanes(w, e, g, &vdst, &|w, l, k| Ok(Loc::Private { base: w.flat_scratch, lane: l, p: p[l].wrapping_add(k) }))
}

fn scratch_store(w: &mut Wave, e: &Exe, g: &mut Group<'_>) -> R {
    let (_, addr, data, saddr) = flat_parts(e, false);
    let data = data.ok_or(ExecErrorKind::Unimplemented)?;
    let p = scratch_offsets(w, e, &addr, saddr)?;
    store_lanes(w, e, g, &data, &|w, l, k| Ok(Loc::Private { base: w.flat_scratch, lane: l, p: p[l].wrapping_add(k) }))
}

// ---------------------------------------------------------------------------------------------
// MUBUF / MTBUF through a buffer resource

/// A buffer resource (V#), docs/executor.md §5.
#[derive(Clone, Copy, Debug)]
struct Rsrc {
    base: u64,
    stride: u32,
    swizzle: bool,
    num_records: u32,
    /// ELEMENT_SIZE in bytes (2, 4, 8, 16).
    element: u32,
    /// INDEX_STRIDE in lanes (8, 16, 32, 64).
    index_stride: u32,
    add_tid: bool,
    /// Word 3 (DST_SEL, formats).
    word3: u32,
}

impl Rsrc {
    fn from_words(d: [u32; 4]) -> Rsrc {
        Rsrc {
            base: u64::from(d[0]) | u64::from(d[1] & 0xFFFF) << 32,
            stride: (d[1] >> 16) & 0x3FFF,
            swizzle: d[1] >> 31 != 0,
            num_records: d[2],
            element: 2 << ((d[3] >> 19) & 3),
            index_stride: 8 << ((d[3] >> 21) & 3),
            add_tid: d[3] >> 23 & 1 != 0,
            word3: d[3],
        }
    }

    /// The address of the `size`-byte component at `offset` of record `index` with the SGPR
    /// offset `soffset`, or `Out` when the range check drops it: with STRIDE 0 the component
    /// must lie below NUM_RECORDS bytes, else the index must be below NUM_RECORDS (the SGPR
    /// offset is not range-checked).
    fn locate(&self, soffset: u32, offset: u32, index: u32, size: u32) -> Loc {
        let in_range = if self.stride == 0 {
            u64::from(offset) + u64::from(size) <= u64::from(self.num_records)
        } else {
            index < self.num_records
        };
        if !in_range {
            return Loc::Out;
        }
        let (stride, offset, index) = (u64::from(self.stride), u64::from(offset), u64::from(index));
        let rel = if self.swizzle {
            let (es, is) = (u64::from(self.element), u64::from(self.index_stride));
            ((index / is) * stride + (offset / es) * es) * is + (index % is) * es + offset % es
        } else {
            offset + stride * index
        };
        Loc::Mem(self.base.wrapping_add(u64::from(soffset)).wrapping_add(rel))
    }
}

/// Reads `n` consecutive SGPRs of a scalar tuple operand.
/// Dword `k` of the SGPR (or trap temporary) tuple `o`.
fn sdword(w: &Wave, o: &Operand, k: usize) -> Result<u32, ExecErrorKind> {
    let (file, reg): (&[u32], u8) = match *o {
        Operand::Sgpr { reg, .. } => (&w.sgpr, reg),
        Operand::Ttmp { reg, .. } => (&w.ttmp, reg),
        _ => return Err(ExecErrorKind::Unimplemented),
    };
    file.get(usize::from(reg) + k).copied().ok_or(ExecErrorKind::RegisterOutOfRange)
}

fn sdwords<const N: usize>(w: &Wave, o: &Operand) -> Result<[u32; N], ExecErrorKind> {
    let (file, reg): (&[u32], u8) = match *o {
        Operand::Sgpr { reg, .. } => (&w.sgpr, reg),
        Operand::Ttmp { reg, .. } => (&w.ttmp, reg),
        _ => return Err(ExecErrorKind::Unimplemented),
    };
    let r = usize::from(reg);
    let s = file.get(r..r + N).ok_or(ExecErrorKind::RegisterOutOfRange)?;
    let mut out = [0u32; N];
    out.copy_from_slice(s);
    Ok(out)
}

/// The operands of a MUBUF/MTBUF instruction: (vdata, vaddr, srsrc, soffset).
fn buffer_parts(e: &Exe) -> Result<(Option<Operand>, Operand, Operand, Operand), ExecErrorKind> {
    let o = e.inst.operands();
    let lds = e.inst.mods.gds_lds && e.inst.encoding() == Encoding::Mubuf;
    let (vdata, rest) = if lds { (None, o) } else { (o.first().copied(), o.get(1..).unwrap_or(&[])) };
    match rest {
        [vaddr, srsrc, soffset, ..] => Ok((vdata, *vaddr, *srsrc, *soffset)),
        _ => Err(ExecErrorKind::Unimplemented),
    }
}

/// Per-lane (index, offset) of a buffer access: VGPR index (`idxen`, first address VGPR) plus
/// the lane id when the V# adds it; VGPR offset (`offen`, the last address VGPR) plus the
/// instruction offset.
fn buffer_lanes(w: &Wave, e: &Exe, r: &Rsrc, vaddr: &Operand) -> Result<([u32; LANES], Lanes), ExecErrorKind> {
    let m = e.inst.mods;
    let idx = if m.idxen { w.v32k(vaddr, 0)? } else { [0; LANES] };
    let off = if m.offen { w.v32k(vaddr, u8::from(m.idxen))? } else { [0; LANES] };
    let inst = (m.offset as u32) & 0xFFF;
    let index = core::array::from_fn(|l| idx[l].wrapping_add(if r.add_tid { l as u32 } else { 0 }));
    let offset = core::array::from_fn(|l| off[l].wrapping_add(inst));
    Ok((index, offset))
}

/// A buffer instruction's vdata, V#, soffset and per-lane index and offset.
struct BufferAccess {
    vdata: Option<Operand>,
    r: Rsrc,
    so: u32,
    index: [u32; LANES],
    offset: Lanes,
}

fn buffer_setup(w: &Wave, e: &Exe) -> Result<BufferAccess, ExecErrorKind> {
    let (vdata, vaddr, srsrc, soffset) = buffer_parts(e)?;
    let r = Rsrc::from_words(sdwords::<4>(w, &srsrc)?);
    let so = w.s32(&soffset)?;
    let (index, offset) = buffer_lanes(w, e, &r, &vaddr)?;
    Ok(BufferAccess { vdata, r, so, index, offset })
}

fn buffer_load(w: &mut Wave, e: &Exe, g: &mut Group<'_>) -> R {
    let BufferAccess { vdata, r, so, index, offset } = buffer_setup(w, e)?;
    let n = e.aux & 0xFF;
    let piece = n.min(4);
    let Some(vdst) = vdata else {
        return buffer_load_lds(w, e, g, &r, so, &index, &offset);
    };
    load_lanes(w, e, g, &vdst, &|_, l, k| Ok(r.locate(so, offset[l].wrapping_add(k), index[l], piece)))
}

/// `lds`: each active lane's data goes to LDS instead of a VGPR (docs/executor.md §5, §8
/// "LDS DMA").
fn buffer_load_lds(
    w: &mut Wave,
    e: &Exe,
    g: &mut Group<'_>,
    r: &Rsrc,
    so: u32,
    index: &[u32; LANES],
    offset: &Lanes,
) -> R {
    let n = (e.aux & 0xFF) as usize;
    lds_dma(w, e, g, (e.inst.mods.offset as u32) & 0xFFF, &|_, l| Ok(r.locate(so, offset[l], index[l], n as u32)))
}

/// The LDS DMA loads (MUBUF `lds`, gfx940's `global_load_lds_*` and `scratch_load_lds_*`): each
/// active lane's byte, short or dword, zero- or sign-extended to a dword, is written to LDS at
/// M0 + `inst_offset` + lane × 4 (the instruction offset applies to both addresses, as LLVM's
/// `llvm.amdgcn.global.load.lds` defines it); no VGPR is written.
fn lds_dma(
    w: &mut Wave,
    e: &Exe,
    g: &mut Group<'_>,
    inst_offset: u32,
    loc: &dyn Fn(&Wave, usize) -> Result<Loc, ExecErrorKind>,
) -> R {
    let n = (e.aux & 0xFF) as usize;
    if !matches!(n, 1 | 2 | 4) || e.aux & (D16 | HI) != 0 {
        return Err(ExecErrorKind::Unimplemented);
    }
    let lds_base = w.m0.wrapping_add(inst_offset);
    for l in 0..LANES {
        if w.exec >> l & 1 == 0 {
            continue;
        }
        let mut b = [0u8; 4];
        piece_load(g, loc(w, l)?, &mut b[..n])?;
        let v = match (n, e.aux & SIGNED != 0) {
            (1, true) => b[0] as i8 as i32 as u32,
            (2, true) => i16::from_le_bytes([b[0], b[1]]) as i32 as u32,
            _ => u32::from_le_bytes(b),
        };
        lds_write(g, lds_base.wrapping_add(4 * l as u32), &v.to_le_bytes())?;
    }
    NEXT
}

/// gfx940's `global_load_lds_*` (§8 "LDS DMA").
fn global_load_lds(w: &mut Wave, e: &Exe, g: &mut Group<'_>) -> R {
    let (_, addr, _, saddr) = flat_parts(e, false);
    let addrs = flat_addrs(w, e, &addr, saddr)?;
    lds_dma(w, e, g, e.inst.mods.offset as u32, &|_, l| Ok(Loc::Mem(addrs[l])))
}

/// gfx940's `scratch_load_lds_*` (§8 "LDS DMA").
fn scratch_load_lds(w: &mut Wave, e: &Exe, g: &mut Group<'_>) -> R {
    let (_, addr, _, saddr) = flat_parts(e, false);
    let p = scratch_offsets(w, e, &addr, saddr)?;
    lds_dma(w, e, g, e.inst.mods.offset as u32, &|w, l| Ok(Loc::Private { base: w.flat_scratch, lane: l, p: p[l] }))
}

fn buffer_store(w: &mut Wave, e: &Exe, g: &mut Group<'_>) -> R {
    let BufferAccess { vdata, r, so, index, offset } = buffer_setup(w, e)?;
    let data = vdata.ok_or(ExecErrorKind::Unimplemented)?;
    let piece = (e.aux & 0xFF).min(4);
    store_lanes(w, e, g, &data, &|_, l, k| Ok(r.locate(so, offset[l].wrapping_add(k), index[l], piece)))
}

/// The component count of a 32-bit-per-component buffer data format (`BUF_DATA_FORMAT` 32,
/// 32_32, 32_32_32, 32_32_32_32) with an integer or float number format, else `None`.
fn format_dwords(dfmt: u32, nfmt: u32) -> Option<u32> {
    let n = match dfmt {
        4 => 1,
        11 => 2,
        13 => 3,
        14 => 4,
        _ => return None,
    };
    // uint, sint, float: the bits pass unchanged.
    matches!(nfmt, 4 | 5 | 7).then_some(n)
}

/// `buffer_*_format_*` (format from the V#, DST_SEL identity) and `tbuffer_*_format_*` (format
/// from the instruction) when the format is 32 bits per component with at least the
/// instruction's components: then they are dword loads and stores.
fn format_access(w: &mut Wave, e: &Exe, g: &mut Group<'_>) -> R {
    let (_, _, srsrc, _) = buffer_parts(e)?;
    let r = Rsrc::from_words(sdwords::<4>(w, &srsrc)?);
    let (dfmt, nfmt) = if e.inst.encoding() == Encoding::Mtbuf {
        let f = u32::from(e.inst.mods.offset1);
        (f & 0xF, f >> 4)
    } else {
        // DST_SEL X, Y, Z, W must be 4, 5, 6, 7 (identity).
        if r.word3 & 0xFFF != 0xFAC {
            return Err(ExecErrorKind::Unimplemented);
        }
        ((r.word3 >> 15) & 0xF, (r.word3 >> 12) & 7)
    };
    let comps = format_dwords(dfmt, nfmt).ok_or(ExecErrorKind::Unimplemented)?;
    let want = (e.aux & 0xFF) / 4;
    if comps < want {
        return Err(ExecErrorKind::Unimplemented);
    }
    if e.aux & STORE != 0 {
        buffer_store(w, e, g)
    } else {
        buffer_load(w, e, g)
    }
}

/// aux bit of [`format_access`]: a store.
const STORE: u32 = 1 << 11;

fn buffer_atomic(w: &mut Wave, e: &Exe, g: &mut Group<'_>) -> R {
    let (op, size) = atomic_aux(e.aux)?;
    let BufferAccess { vdata, r, so, index, offset } = buffer_setup(w, e)?;
    let data = vdata.ok_or(ExecErrorKind::Unimplemented)?;
    let d64 = size == 8;
    let rd = |k: u8| -> Result<Lanes64, ExecErrorKind> {
        if d64 {
            let (lo, hi) = (w.v32k(&data, 2 * k)?, w.v32k(&data, 2 * k + 1)?);
            Ok(core::array::from_fn(|l| u64::from(lo[l]) | u64::from(hi[l]) << 32))
        } else {
            let v = w.v32k(&data, k)?;
            Ok(core::array::from_fn(|l| u64::from(v[l])))
        }
    };
    let val = rd(0)?;
    let cmp = if op == AtomicOp::CmpSwap { rd(1)? } else { [0; LANES] };
    let exec = w.exec;
    let mut old = [0u64; LANES];
    for l in 0..LANES {
        if exec >> l & 1 == 0 {
            continue;
        }
        // Atomics are range-checked whole: out of range, nothing happens and 0 returns.
        old[l] = match r.locate(so, offset[l], index[l], u32::from(size)) {
            Loc::Mem(a) => g.mem.atomic(a, size, op, val[l], cmp[l]).map_err(fault)?,
            Loc::Lds(a) => lds_atomic(g, a, size, op, val[l], cmp[l])?,
            Loc::Private { base, lane, p } => private_atomic(g, base, lane, p, size, op, val[l], cmp[l])?,
            Loc::Out => 0,
        };
    }
    if e.inst.mods.glc {
        let lo: Lanes = core::array::from_fn(|l| old[l] as u32);
        w.set_v32k(&data, 0, &lo, exec)?;
        if d64 {
            let hi: Lanes = core::array::from_fn(|l| (old[l] >> 32) as u32);
            w.set_v32k(&data, 1, &hi, exec)?;
        }
    }
    NEXT
}

// ---------------------------------------------------------------------------------------------
// SMEM

/// The byte offset of an SMEM instruction: the immediate or the SGPR.
fn smem_offset(w: &Wave, e: &Exe) -> Result<u32, ExecErrorKind> {
    Ok(match field(e, Field::Offset, 0)? {
        Operand::Imm(_) => e.inst.mods.offset as u32,
        o => w.s32(&o)?,
    })
}

fn dword_count(e: &Exe) -> usize {
    e.inst.op.spec().slots.first().map_or(0, |s| usize::from(s.width))
}

/// `s_buffer_load_dword*`: dwords of the buffer at base + offset (rounded down to 4); a dword
/// at or past NUM_RECORDS bytes reads 0.
fn s_buffer_load(w: &mut Wave, e: &Exe, g: &mut Group<'_>) -> R {
    let d = dst(e)?;
    let r = Rsrc::from_words(sdwords::<4>(w, &field(e, Field::Sbase, 0)?)?);
    let off = smem_offset(w, e)? & !3;
    for k in 0..dword_count(e) {
        let at = off.wrapping_add(4 * k as u32);
        let mut b = [0u8; 4];
        if u64::from(at) + 4 <= u64::from(r.num_records) {
            g.mem.load(r.base.wrapping_add(u64::from(at)), &mut b).map_err(fault)?;
        }
        w.set_sgpr_dword(&d, k, u32::from_le_bytes(b))?;
    }
    NEXT
}

/// `s_store_dword*`: the SGPRs to base + offset (rounded down to 4).
fn s_store(w: &mut Wave, e: &Exe, g: &mut Group<'_>) -> R {
    let data = dst(e)?;
    let base = w.s64(&field(e, Field::Sbase, 0)?, Ty::B64)?;
    let addr = base.wrapping_add(u64::from(smem_offset(w, e)?)) & !3;
    let n = dword_count(e);
    let vals: [u32; 4] = match n {
        1 => {
            let [a] = sdwords::<1>(w, &data)?;
            [a, 0, 0, 0]
        }
        2 => {
            let [a, b] = sdwords::<2>(w, &data)?;
            [a, b, 0, 0]
        }
        _ => sdwords::<4>(w, &data)?,
    };
    let mut buf = [0u8; 16];
    for k in 0..4 {
        buf[4 * k..4 * k + 4].copy_from_slice(&vals[k].to_le_bytes());
    }
    g.mem.store(addr, buf.get(..4 * n).ok_or(ExecErrorKind::Unimplemented)?).map_err(fault)?;
    NEXT
}

/// `s_buffer_store_dword*`: the SGPRs to the buffer at base + offset (rounded down to 4); a
/// dword at or past NUM_RECORDS bytes is dropped.
fn s_buffer_store(w: &mut Wave, e: &Exe, g: &mut Group<'_>) -> R {
    let data = dst(e)?;
    let r = Rsrc::from_words(sdwords::<4>(w, &field(e, Field::Sbase, 0)?)?);
    let off = smem_offset(w, e)? & !3;
    for k in 0..dword_count(e) {
        let at = off.wrapping_add(4 * k as u32);
        let v = sdword(w, &data, k)?;
        if u64::from(at) + 4 <= u64::from(r.num_records) {
            g.mem.store(r.base.wrapping_add(u64::from(at)), &v.to_le_bytes()).map_err(fault)?;
        }
    }
    NEXT
}

/// aux bit of the scalar atomics: the address is in a buffer (`s_buffer_atomic_*`).
const SBUFFER: u32 = 1 << 16;

/// `s_atomic_*` / `s_buffer_atomic_*` (aux: the operation and size of [`atomic_op_aux`], and
/// [`SBUFFER`]): one atomic on the 4- or 8-byte value at base + offset, atomic with respect to
/// every other worker as the vector atomics are; the data SGPRs hold the value (then, for
/// `cmpswap`, the compare value); with `glc` the first of them receive the old value. A buffer
/// atomic at or past NUM_RECORDS does nothing and returns 0.
fn s_atomic(w: &mut Wave, e: &Exe, g: &mut Group<'_>) -> R {
    let (op, size) = atomic_aux(e.aux & !SBUFFER)?;
    let data = dst(e)?;
    let dwords = usize::from(size / 4);
    let word = |w: &Wave, k: usize| -> Result<u64, ExecErrorKind> {
        let lo = u64::from(sdword(w, &data, k)?);
        Ok(if dwords == 2 { lo | u64::from(sdword(w, &data, k + 1)?) << 32 } else { lo })
    };
    let val = word(w, 0)?;
    let cmp = if op == AtomicOp::CmpSwap { word(w, dwords)? } else { 0 };
    let off = smem_offset(w, e)?;
    let addr = if e.aux & SBUFFER != 0 {
        let r = Rsrc::from_words(sdwords::<4>(w, &field(e, Field::Sbase, 0)?)?);
        (u64::from(off) + u64::from(size) <= u64::from(r.num_records)).then(|| r.base.wrapping_add(u64::from(off)))
    } else {
        Some(w.s64(&field(e, Field::Sbase, 0)?, Ty::B64)?.wrapping_add(u64::from(off)))
    };
    let old = match addr {
        Some(a) => g.mem.atomic(a, size, op, val, cmp).map_err(fault)?,
        None => 0,
    };
    if e.inst.mods.glc {
        for k in 0..dwords {
            w.set_sgpr_dword(&data, k, (old >> (32 * k)) as u32)?;
        }
    }
    NEXT
}

/// The engine clock over the 100 MHz constant clock: gfx90a's 1700 MHz (docs/executor.md §5).
pub const SHADER_CLOCKS_PER_TICK: u64 = 17;

fn s_memtime(w: &mut Wave, e: &Exe, g: &mut Group<'_>) -> R {
    let t = g.mem.realtime().wrapping_mul(SHADER_CLOCKS_PER_TICK);
    w.set_s64(&dst(e)?, t)?;
    NEXT
}

fn s_memrealtime(w: &mut Wave, e: &Exe, g: &mut Group<'_>) -> R {
    let t = g.mem.realtime();
    w.set_s64(&dst(e)?, t)?;
    NEXT
}

// ---------------------------------------------------------------------------------------------
// messages and halts

/// `s_sendmsg`: MSG_INTERRUPT (1) raises the interrupt with M0[7:0] as its context (the
/// hostcall doorbell's event id); MSG_SAVEWAVE (4) only tells a trap handler the wave saved
/// its state, nothing for the executor. Graphics messages and the rest are not implemented.
fn sendmsg(w: &mut Wave, e: &Exe, g: &mut Group<'_>) -> R {
    match simm16(e) & 0xF {
        1 => g.mem.interrupt(w.m0 & 0xFF),
        4 => {}
        _ => return Err(ExecErrorKind::Unimplemented),
    }
    NEXT
}

fn sendmsghalt(w: &mut Wave, e: &Exe, g: &mut Group<'_>) -> R {
    sendmsg(w, e, g)?;
    Err(ExecErrorKind::Halted)
}

/// `s_sethalt 1` halts the wave until a debugger resumes it, which never happens here: the
/// dispatch ends with the error. `s_sethalt 0` (resume) is a no-op.
fn sethalt(_w: &mut Wave, e: &Exe, _g: &mut Group<'_>) -> R {
    if simm16(e) & 1 != 0 {
        return Err(ExecErrorKind::Halted);
    }
    NEXT
}

// ---------------------------------------------------------------------------------------------
// DS lane shuffles and counters

/// The source lane of lane `l` for `ds_swizzle_b32` with `offset`: bit 15 set, a quad
/// permute (lane `l` reads lane `(l & !3) | offset[2(l&3)+1 : 2(l&3)]`); clear, the bit-mask
/// mode over groups of 32 lanes (`((l & and) | or) ^ xor` with and = `offset[4:0]`, or =
/// `offset[9:5]`, xor = `offset[14:10]`).
pub fn swizzle_source(offset: u16, l: usize) -> usize {
    let o = usize::from(offset);
    if o & 0x8000 != 0 {
        (l & !3) | (o >> (2 * (l & 3)) & 3)
    } else {
        let (and, or, xor) = (o & 0x1F, o >> 5 & 0x1F, o >> 10 & 0x1F);
        (l & 0x20) | (((l & and) | or) ^ xor)
    }
}

fn ds_swizzle(w: &mut Wave, e: &Exe, _g: &mut Group<'_>) -> R {
    if e.inst.mods.gds_lds {
        return Err(ExecErrorKind::Unimplemented);
    }
    let data = w.v32(&field(e, Field::Addr, 0)?)?;
    let offset = (e.inst.mods.offset as u32 & 0xFFFF) as u16;
    let exec = w.exec;
    // An inactive source lane reads 0, as for ds_bpermute_b32.
    let r: Lanes = core::array::from_fn(|l| {
        let from = swizzle_source(offset, l) & 63;
        if exec >> from & 1 != 0 {
            data[from]
        } else {
            0
        }
    });
    w.set_v32(&dst(e)?, &r)?;
    NEXT
}

/// `ds_permute_b32`: every active lane sends its data to lane `(addr + offset) / 4 mod 64`
/// (the highest sending lane wins); every active lane then reads what it was sent, 0 if
/// nothing.
fn ds_permute(w: &mut Wave, e: &Exe, _g: &mut Group<'_>) -> R {
    if e.inst.mods.gds_lds {
        return Err(ExecErrorKind::Unimplemented);
    }
    let addrs = w.v32(&field(e, Field::Addr, 0)?)?;
    let data = w.v32(&field(e, Field::Data0, 0)?)?;
    let off = e.inst.mods.offset as u32 & 0xFFFF;
    let exec = w.exec;
    let mut r = [0u32; LANES];
    for l in 0..LANES {
        if exec >> l & 1 != 0 {
            r[((addrs[l].wrapping_add(off) / 4) & 63) as usize] = data[l];
        }
    }
    w.set_v32(&dst(e)?, &r)?;
    NEXT
}

/// `ds_append` / `ds_consume`: the dword at LDS M0 + offset grows (shrinks) by the number of
/// active lanes; every active lane gets the value before.
fn ds_counter(w: &mut Wave, e: &Exe, g: &mut Group<'_>) -> R {
    if e.inst.mods.gds_lds {
        return Err(ExecErrorKind::Unimplemented);
    }
    let at = w.m0.wrapping_add(e.inst.mods.offset as u32 & 0xFFFF);
    let n = u64::from(w.exec.count_ones());
    let op = if e.aux != 0 { AtomicOp::Sub } else { AtomicOp::Add };
    let old = if n == 0 { 0 } else { lds_atomic(g, at, 4, op, n, 0)? as u32 };
    w.set_v32(&dst(e)?, &[old; LANES])?;
    NEXT
}

// ---------------------------------------------------------------------------------------------
// the table

fn load_aux(kind: &str) -> Option<u32> {
    Some(match kind {
        "ubyte" => 1,
        "sbyte" => 1 | SIGNED,
        "ushort" => 2,
        "sshort" => 2 | SIGNED,
        "dword" => 4,
        "dwordx2" => 8,
        "dwordx3" => 12,
        "dwordx4" => 16,
        "ubyte_d16" => 1 | D16,
        "ubyte_d16_hi" => 1 | HI,
        "sbyte_d16" => 1 | SIGNED | D16,
        "sbyte_d16_hi" => 1 | SIGNED | HI,
        "short_d16" => 2 | D16,
        "short_d16_hi" => 2 | HI,
        _ => return None,
    })
}

fn store_aux(kind: &str) -> Option<u32> {
    Some(match kind {
        "byte" => 1,
        "short" => 2,
        "dword" => 4,
        "dwordx2" => 8,
        "dwordx3" => 12,
        "dwordx4" => 16,
        "byte_d16_hi" => 1 | HI,
        "short_d16_hi" => 2 | HI,
        _ => return None,
    })
}

fn format_aux(kind: &str) -> Option<u32> {
    Some(match kind {
        "x" => 4,
        "xy" => 8,
        "xyz" => 12,
        "xyzw" => 16,
        _ => return None,
    })
}

/// Handlers of this module by mnemonic (without `_e32`/`_e64`), or `None`.
pub(crate) fn handler_for_name(base: &str) -> Option<(Handler, u32)> {
    // The DS `_d16` forms are the FLAT ones under DS's names (u8/i8/u16 for ubyte/sbyte/short on
    // reads, b8/b16 for byte/short on writes).
    if let Some(k) = base.strip_prefix("ds_read_").filter(|k| k.contains("_d16")) {
        let flat = k.replacen("u8", "ubyte", 1).replacen("i8", "sbyte", 1).replacen("u16", "short", 1);
        return load_aux(&flat).map(|a| (ds_d16_load as Handler, a));
    }
    if let Some(k) = base.strip_prefix("ds_write_").filter(|k| k.contains("_d16")) {
        let flat = k.replacen("b8", "byte", 1).replacen("b16", "short", 1);
        return store_aux(&flat).map(|a| (ds_d16_store as Handler, a));
    }
    if base == "ds_nop" {
        return Some((|_, _, _| NEXT, 0));
    }
    if let Some(rest) = base.strip_prefix("scratch_") {
        if let Some(k) = rest.strip_prefix("load_lds_") {
            return load_aux(k).filter(|a| a & !SIGNED <= 4).map(|a| (scratch_load_lds as Handler, a));
        }
        if let Some(k) = rest.strip_prefix("load_") {
            return load_aux(k).map(|a| (scratch_load as Handler, a));
        }
        return store_aux(rest.strip_prefix("store_")?).map(|a| (scratch_store as Handler, a));
    }
    for seg in ["flat_", "global_"] {
        if let Some(rest) = base.strip_prefix(seg) {
            if let Some(k) = rest.strip_prefix("load_lds_").filter(|_| seg == "global_") {
                return load_aux(k).filter(|a| a & !SIGNED <= 4).map(|a| (global_load_lds as Handler, a));
            }
            if let Some(k) = rest.strip_prefix("load_").filter(|k| k.contains("_d16")) {
                return load_aux(k).map(|a| (flat_d16_load as Handler, a));
            }
            if let Some(k) = rest.strip_prefix("store_").filter(|k| k.contains("_d16")) {
                return store_aux(k).map(|a| (flat_d16_store as Handler, a));
            }
            return None;
        }
    }
    if let Some(rest) = base.strip_prefix("buffer_") {
        if let Some(a) = rest.strip_prefix("atomic_") {
            return atomic_op_aux(a).map(|a| (buffer_atomic as Handler, a));
        }
        if let Some(f) = rest.strip_prefix("load_format_") {
            return format_aux(f).map(|a| (format_access as Handler, a));
        }
        if let Some(f) = rest.strip_prefix("store_format_") {
            return format_aux(f).map(|a| (format_access as Handler, a | STORE));
        }
        if let Some(k) = rest.strip_prefix("load_") {
            return load_aux(k).map(|a| (buffer_load as Handler, a));
        }
        if let Some(k) = rest.strip_prefix("store_") {
            return store_aux(k).map(|a| (buffer_store as Handler, a));
        }
        // Cache write-backs and invalidations (gfx940's `buffer_inv` and `buffer_wbl2` with their
        // sc0/sc1 scopes too): the emulator's memory is coherent and every access completes
        // before the next one, so each runs and changes nothing (docs/executor.md §8).
        return matches!(rest, "wbl2" | "invl2" | "inv" | "wbinvl1" | "wbinvl1_vol").then_some((|_, _, _| NEXT, 0));
    }
    if let Some(op) = base.strip_prefix("s_buffer_atomic_") {
        return atomic_op_aux(op).filter(|a| a & 0xFF <= 12).map(|a| (s_atomic as Handler, a | SBUFFER));
    }
    if let Some(op) = base.strip_prefix("s_atomic_") {
        return atomic_op_aux(op).filter(|a| a & 0xFF <= 12).map(|a| (s_atomic as Handler, a));
    }
    if let Some(f) = base.strip_prefix("tbuffer_load_format_") {
        return format_aux(f).map(|a| (format_access as Handler, a));
    }
    if let Some(f) = base.strip_prefix("tbuffer_store_format_") {
        return format_aux(f).map(|a| (format_access as Handler, a | STORE));
    }
    let h: Handler = match base {
        "s_buffer_load_dword"
        | "s_buffer_load_dwordx2"
        | "s_buffer_load_dwordx4"
        | "s_buffer_load_dwordx8"
        | "s_buffer_load_dwordx16" => s_buffer_load,
        "s_store_dword" | "s_store_dwordx2" | "s_store_dwordx4" => s_store,
        "s_buffer_store_dword" | "s_buffer_store_dwordx2" | "s_buffer_store_dwordx4" => s_buffer_store,
        // Discarding lines leaves their contents undefined; memory here has no cache to drop
        // them from, and keeping them is one of the outcomes the ISA allows.
        "s_dcache_discard" | "s_dcache_discard_x2" => |_, _, _| NEXT,
        "s_memtime" => s_memtime,
        "s_memrealtime" => s_memrealtime,
        // A translation probe: only a hint to the address translation cache.
        "s_atc_probe" | "s_atc_probe_buffer" => |_, _, _| NEXT,
        "s_sendmsg" => sendmsg,
        "s_sendmsghalt" => sendmsghalt,
        "s_sethalt" => sethalt,
        "ds_swizzle_b32" => ds_swizzle,
        "ds_permute_b32" => ds_permute,
        "ds_append" => ds_counter,
        "ds_consume" => return Some((ds_counter, 1)),
        _ => return None,
    };
    Some((h, 0))
}
