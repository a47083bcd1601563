//! One wave's register state and operand access (reference §8: source codes, inline
//! constants, literals).

use alloc::vec;
use alloc::vec::Vec;

use super::ops::Flow;
use super::{ExecError, ExecErrorKind, Group, Limits, WaveStop, PRIVATE_APERTURE, SHARED_APERTURE};
use crate::{FloatConst, Operand, Special};

/// Lanes of a wave.
pub const LANES: usize = 64;

/// One value per lane.
pub type Lanes = [u32; LANES];
/// One 64-bit value per lane.
pub type Lanes64 = [u64; LANES];

/// A borrowed 32-bit vector source: a register's lanes, or one value for every lane (an SGPR,
/// a special register, a constant or the literal). Reading it copies nothing.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Src<'a> {
    Splat(u32),
    Lanes(&'a Lanes),
}

impl Src<'_> {
    /// Lane `l`'s value (`l` < 64).
    #[inline(always)]
    pub(crate) fn at(self, l: usize) -> u32 {
        match self {
            Src::Splat(v) => v,
            Src::Lanes(a) => a[l & (LANES - 1)],
        }
    }

    /// Every lane's value, copied.
    #[inline]
    pub(crate) fn lanes(self) -> Lanes {
        match self {
            Src::Splat(v) => [v; LANES],
            Src::Lanes(a) => *a,
        }
    }
}

/// A borrowed 64-bit vector source: a register pair (low and high dwords), or one value.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Src64<'a> {
    Splat(u64),
    Pair(&'a Lanes, &'a Lanes),
}

impl Src64<'_> {
    /// Lane `l`'s value (`l` < 64).
    #[inline(always)]
    pub(crate) fn at(self, l: usize) -> u64 {
        match self {
            Src64::Splat(v) => v,
            Src64::Pair(lo, hi) => u64::from(lo[l & (LANES - 1)]) | u64::from(hi[l & (LANES - 1)]) << 32,
        }
    }

    /// Every lane's value, copied.
    #[inline]
    pub(crate) fn lanes(self) -> Lanes64 {
        let mut r = [0u64; LANES];
        for (l, x) in r.iter_mut().enumerate() {
            *x = self.at(l);
        }
        r
    }
}

/// How a constant operand is read: its width and whether float constants are f64.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ty {
    /// 32 bits (integer and f32 alike).
    B32,
    /// 64-bit integer: float constants are f64 patterns, the literal is zero-extended.
    B64,
    /// 64-bit float: float constants are f64, the literal supplies bits 63:32.
    F64,
}

/// The registers of one wave64.
#[derive(Clone, Debug)]
pub struct Wave {
    /// s0–s101.
    pub sgpr: [u32; 102],
    /// ttmp0–ttmp15.
    pub ttmp: [u32; 16],
    /// Architected VGPRs (as many as the descriptor allocates), lanes contiguous.
    pub vgpr: Vec<Lanes>,
    /// AGPRs.
    pub agpr: Vec<Lanes>,
    /// EXEC.
    pub exec: u64,
    /// VCC.
    pub vcc: u64,
    /// SCC.
    pub scc: bool,
    /// M0.
    pub m0: u32,
    /// MODE (hwreg 1).
    pub mode: u32,
    /// FLAT_SCRATCH.
    pub flat_scratch: u64,
    /// XNACK_MASK.
    pub xnack_mask: u64,
    /// The program counter, as an instruction index.
    pub pc: usize,
    /// Instructions run so far.
    pub executed: u64,
    /// Staged source operands of a DPP or SDWA instruction (docs/executor.md §5 "Lanes"):
    /// the base operation reads `Operand::Vgpr { reg: r, count: 0 }` as `stage[r]`.
    pub(crate) stage: [Lanes; STAGES],
    /// The dwords of a GLOBAL load or store between the registers and `Memory::gather` /
    /// `Memory::scatter`: kept per wave so an access neither zeroes nor copies a stack buffer
    /// (docs/executor.md §6 "speed"); only the lanes of the access's mask are meaningful.
    pub(crate) mem_buf: [Lanes; 4],
}

/// Staging registers: two dwords for source 0, two for source 1.
pub(crate) const STAGES: usize = 4;

impl Wave {
    /// A wave with `vgprs` VGPRs and `agprs` AGPRs, everything zero.
    pub fn new(vgprs: usize, agprs: usize) -> Wave {
        Wave {
            sgpr: [0; 102],
            ttmp: [0; 16],
            vgpr: vec![[0; LANES]; vgprs],
            agpr: vec![[0; LANES]; agprs],
            exec: 0,
            vcc: 0,
            scc: false,
            m0: 0,
            mode: 0,
            flat_scratch: 0,
            xnack_mask: 0,
            pc: 0,
            executed: 0,
            stage: [[0; LANES]; STAGES],
            mem_buf: [[0; LANES]; 4],
        }
    }

    /// Runs until the wave ends or reaches `s_barrier`.
    pub(crate) fn run(&mut self, g: &mut Group<'_>, limits: &Limits) -> Result<WaveStop, ExecError> {
        loop {
            let code = g.code;
            let Some(slot) = code.slot(self.pc) else {
                return Err(code.bad_pc(code.addr_of(self.pc)));
            };
            // The error's address and instruction, built only on the error path (not copied per
            // instruction, docs/executor.md §6 "speed").
            let pc = self.pc;
            let at = |kind| ExecError { kind, pc: code.addr_of(pc), inst: Some(slot.exe.inst) };
            if self.executed >= limits.wave_instructions {
                return Err(at(ExecErrorKind::Watchdog(self.executed)));
            }
            self.executed += 1;
            let Some(h) = slot.handler else { return Err(at(ExecErrorKind::Unimplemented)) };
            // The decoded instruction by reference (the code outlives the group's borrow).
            // GPR index mode (exec/indexing.rs) takes a path of its own: one branch here.
            let r = if self.mode & super::indexing::GPR_IDX_EN == 0 {
                h(self, &slot.exe, g)
            } else {
                super::indexing::indexed(self, &slot.exe, h, g)
            };
            match r.map_err(at)? {
                Flow::Next => self.pc += 1,
                Flow::Jump(i) => self.pc = i,
                Flow::JumpAddr(a) => match code.index_of(a) {
                    Some(i) => self.pc = i,
                    None => return Err(code.bad_pc(a)),
                },
                Flow::End => return Ok(WaveStop::Ended),
                Flow::Barrier => {
                    self.pc += 1;
                    return Ok(WaveStop::Barrier);
                }
            }
        }
    }

    // ---- scalar operands ----

    fn sgpr_at(&self, reg: usize) -> Result<u32, ExecErrorKind> {
        self.sgpr.get(reg).copied().ok_or(ExecErrorKind::RegisterOutOfRange)
    }

    /// Reads dword `k` (0 or 1) of a scalar-register operand.
    fn sreg_dword(&self, op: &Operand, k: u8) -> Result<u32, ExecErrorKind> {
        Ok(match *op {
            Operand::Sgpr { reg, .. } => self.sgpr_at(usize::from(reg) + usize::from(k))?,
            Operand::Ttmp { reg, .. } => {
                self.ttmp.get(usize::from(reg) + usize::from(k)).copied().ok_or(ExecErrorKind::RegisterOutOfRange)?
            }
            Operand::Special { reg, hi, .. } => {
                let half = |v: u64| if hi || k == 1 { (v >> 32) as u32 } else { v as u32 };
                match reg {
                    Special::Vcc => half(self.vcc),
                    Special::Exec => half(self.exec),
                    Special::FlatScratch => half(self.flat_scratch),
                    Special::XnackMask => half(self.xnack_mask),
                    Special::M0 if k == 0 => self.m0,
                    Special::Null => 0,
                    Special::Scc if k == 0 => u32::from(self.scc),
                    Special::Vccz if k == 0 => u32::from(self.vcc == 0),
                    Special::Execz if k == 0 => u32::from(self.exec == 0),
                    Special::SharedBase if k == 0 => (SHARED_APERTURE >> 32) as u32,
                    Special::SharedLimit if k == 0 => ((SHARED_APERTURE + 0xFFFF_FFFF) >> 32) as u32,
                    Special::PrivateBase if k == 0 => (PRIVATE_APERTURE >> 32) as u32,
                    Special::PrivateLimit if k == 0 => ((PRIVATE_APERTURE + 0xFFFF_FFFF) >> 32) as u32,
                    _ => return Err(ExecErrorKind::Unimplemented),
                }
            }
            _ => return Err(ExecErrorKind::Unimplemented),
        })
    }

    /// A constant operand's value at type `ty`.
    fn constant(op: &Operand, ty: Ty) -> Option<u64> {
        Some(match (*op, ty) {
            (Operand::Int(i), Ty::B32) => u64::from(i32::from(i) as u32),
            (Operand::Int(i), _) => i64::from(i) as u64,
            (Operand::Float(c), Ty::B32) => u64::from(float_const_f32(c)),
            (Operand::Float(c), _) => float_const_f64(c),
            (Operand::Literal(l), Ty::F64) => u64::from(l) << 32,
            (Operand::Literal(l), _) => u64::from(l),
            (Operand::Imm(i), _) => u64::from(i),
            _ => return None,
        })
    }

    /// A scalar source (SGPR, special register, constant, literal) of 32 bits.
    pub(crate) fn s32(&self, op: &Operand) -> Result<u32, ExecErrorKind> {
        if let Some(c) = Wave::constant(op, Ty::B32) {
            return Ok(c as u32);
        }
        self.sreg_dword(op, 0)
    }

    /// A scalar source of 64 bits at type `ty`.
    pub(crate) fn s64(&self, op: &Operand, ty: Ty) -> Result<u64, ExecErrorKind> {
        // The common registers first, each read once (docs/executor.md §6 "speed").
        match *op {
            Operand::Sgpr { reg, .. } => {
                let r = usize::from(reg);
                if let Some(&[lo, hi]) = self.sgpr.get(r..r + 2) {
                    return Ok(u64::from(lo) | u64::from(hi) << 32);
                }
            }
            Operand::Special { reg: Special::Exec, hi: false, .. } => return Ok(self.exec),
            Operand::Special { reg: Special::Vcc, hi: false, .. } => return Ok(self.vcc),
            _ => {}
        }
        if let Some(c) = Wave::constant(op, ty) {
            return Ok(c);
        }
        match *op {
            Operand::Special {
                reg: Special::Vcc | Special::Exec | Special::FlatScratch | Special::XnackMask, ..
            } => Ok(u64::from(self.sreg_dword(op, 0)?) | u64::from(self.sreg_dword(op, 1)?) << 32),
            Operand::Special { .. } => Ok(u64::from(self.sreg_dword(op, 0)?)),
            _ => Ok(u64::from(self.sreg_dword(op, 0)?) | u64::from(self.sreg_dword(op, 1)?) << 32),
        }
    }

    /// Writes a 32-bit scalar destination.
    pub(crate) fn set_s32(&mut self, op: &Operand, v: u32) -> Result<(), ExecErrorKind> {
        match *op {
            Operand::Sgpr { reg, .. } => {
                *self.sgpr.get_mut(usize::from(reg)).ok_or(ExecErrorKind::RegisterOutOfRange)? = v;
            }
            Operand::Ttmp { reg, .. } => {
                *self.ttmp.get_mut(usize::from(reg)).ok_or(ExecErrorKind::RegisterOutOfRange)? = v;
            }
            Operand::Special { reg, hi, .. } => {
                let set = |r: &mut u64| {
                    *r = if hi { (*r & 0xFFFF_FFFF) | u64::from(v) << 32 } else { (*r & !0xFFFF_FFFF) | u64::from(v) }
                };
                match reg {
                    Special::Vcc => set(&mut self.vcc),
                    Special::Exec => set(&mut self.exec),
                    Special::FlatScratch => set(&mut self.flat_scratch),
                    Special::XnackMask => set(&mut self.xnack_mask),
                    Special::M0 => self.m0 = v,
                    Special::Null => {}
                    _ => return Err(ExecErrorKind::Unimplemented),
                }
            }
            _ => return Err(ExecErrorKind::Unimplemented),
        }
        Ok(())
    }

    /// Writes a 64-bit scalar destination (an SGPR pair or a 64-bit special register).
    pub(crate) fn set_s64(&mut self, op: &Operand, v: u64) -> Result<(), ExecErrorKind> {
        match *op {
            Operand::Sgpr { reg, .. } => {
                let r = usize::from(reg);
                let pair = self.sgpr.get_mut(r..r + 2).ok_or(ExecErrorKind::RegisterOutOfRange)?;
                pair[0] = v as u32;
                pair[1] = (v >> 32) as u32;
            }
            Operand::Ttmp { reg, .. } => {
                let r = usize::from(reg);
                let pair = self.ttmp.get_mut(r..r + 2).ok_or(ExecErrorKind::RegisterOutOfRange)?;
                pair[0] = v as u32;
                pair[1] = (v >> 32) as u32;
            }
            Operand::Special { reg, hi: false, .. } => match reg {
                Special::Vcc => self.vcc = v,
                Special::Exec => self.exec = v,
                Special::FlatScratch => self.flat_scratch = v,
                Special::XnackMask => self.xnack_mask = v,
                Special::Null => {}
                _ => return Err(ExecErrorKind::Unimplemented),
            },
            _ => return Err(ExecErrorKind::Unimplemented),
        }
        Ok(())
    }

    /// Writes SGPR `reg + k` (SMEM destinations).
    pub(crate) fn set_sgpr_dword(&mut self, op: &Operand, k: usize, v: u32) -> Result<(), ExecErrorKind> {
        match *op {
            Operand::Sgpr { reg, .. } => {
                *self.sgpr.get_mut(usize::from(reg) + k).ok_or(ExecErrorKind::RegisterOutOfRange)? = v;
            }
            Operand::Ttmp { reg, .. } => {
                *self.ttmp.get_mut(usize::from(reg) + k).ok_or(ExecErrorKind::RegisterOutOfRange)? = v;
            }
            _ if k < 2 => {
                // A 64-bit special destination written dword by dword.
                let full = self.s64(op, Ty::B64).unwrap_or(0);
                let new = if k == 0 {
                    (full & !0xFFFF_FFFF) | u64::from(v)
                } else {
                    (full & 0xFFFF_FFFF) | u64::from(v) << 32
                };
                return self.set_s64(op, new);
            }
            _ => return Err(ExecErrorKind::Unimplemented),
        }
        Ok(())
    }

    // ---- vector operands ----

    /// VGPR `reg` (or AGPR when `acc`).
    pub(crate) fn vreg(&self, reg: usize, acc: bool) -> Result<&Lanes, ExecErrorKind> {
        let file = if acc { &self.agpr } else { &self.vgpr };
        file.get(reg).ok_or(ExecErrorKind::RegisterOutOfRange)
    }

    /// VGPR `reg` for writing.
    pub(crate) fn vreg_mut(&mut self, reg: usize, acc: bool) -> Result<&mut Lanes, ExecErrorKind> {
        let file = if acc { &mut self.agpr } else { &mut self.vgpr };
        file.get_mut(reg).ok_or(ExecErrorKind::RegisterOutOfRange)
    }

    /// A vector source of 32 bits per lane (dword `k` of a tuple), borrowed: a register's lanes
    /// in place, a scalar or constant as one value (docs/executor.md §6 "speed").
    #[inline]
    pub(crate) fn src32k(&self, op: &Operand, k: u8) -> Result<Src<'_>, ExecErrorKind> {
        match *op {
            Operand::Vgpr { reg, count: 0 } => self
                .stage
                .get(usize::from(reg) + usize::from(k))
                .map(Src::Lanes)
                .ok_or(ExecErrorKind::RegisterOutOfRange),
            Operand::Vgpr { reg, .. } => self.vreg(usize::from(reg) + usize::from(k), false).map(Src::Lanes),
            Operand::Agpr { reg, .. } => self.vreg(usize::from(reg) + usize::from(k), true).map(Src::Lanes),
            _ if k == 0 => Ok(Src::Splat(self.s32(op)?)),
            _ => Ok(Src::Splat(self.sreg_dword(op, k)?)),
        }
    }

    /// A borrowed 32-bit vector source.
    #[inline]
    pub(crate) fn src32(&self, op: &Operand) -> Result<Src<'_>, ExecErrorKind> {
        self.src32k(op, 0)
    }

    /// A borrowed 64-bit vector source at type `ty`: a register pair's two dwords, or one value.
    #[inline]
    pub(crate) fn src64(&self, op: &Operand, ty: Ty) -> Result<Src64<'_>, ExecErrorKind> {
        match *op {
            Operand::Vgpr { .. } | Operand::Agpr { .. } => match (self.src32k(op, 0)?, self.src32k(op, 1)?) {
                (Src::Lanes(lo), Src::Lanes(hi)) => Ok(Src64::Pair(lo, hi)),
                _ => Err(ExecErrorKind::RegisterOutOfRange),
            },
            _ => Ok(Src64::Splat(self.s64(op, ty)?)),
        }
    }

    /// A vector source of 32 bits per lane (dword `k` of a tuple), copied; scalars are
    /// broadcast.
    pub(crate) fn v32k(&self, op: &Operand, k: u8) -> Result<Lanes, ExecErrorKind> {
        self.src32k(op, k).map(|s| s.lanes())
    }

    /// A 32-bit vector source, copied.
    pub(crate) fn v32(&self, op: &Operand) -> Result<Lanes, ExecErrorKind> {
        self.v32k(op, 0)
    }

    /// A 64-bit vector source at type `ty`, copied.
    pub(crate) fn v64(&self, op: &Operand, ty: Ty) -> Result<Lanes64, ExecErrorKind> {
        self.src64(op, ty).map(|s| s.lanes())
    }

    /// Writes dword `k` of a vector destination in the lanes of `mask`.
    pub(crate) fn set_v32k(&mut self, op: &Operand, k: usize, v: &Lanes, mask: u64) -> Result<(), ExecErrorKind> {
        let (reg, acc) = match *op {
            Operand::Vgpr { reg, .. } => (reg, false),
            Operand::Agpr { reg, .. } => (reg, true),
            _ => return Err(ExecErrorKind::Unimplemented),
        };
        let dst = self.vreg_mut(usize::from(reg) + k, acc)?;
        if mask == u64::MAX {
            *dst = *v;
        } else {
            for (l, d) in dst.iter_mut().enumerate() {
                if mask >> l & 1 != 0 {
                    *d = v[l];
                }
            }
        }
        Ok(())
    }

    /// A 32-bit vector destination's register, for a result written in place when every lane
    /// is written (docs/executor.md §6 "speed"): the errors `set_v32k` gives.
    pub(crate) fn dst32_mut(&mut self, op: &Operand) -> Result<&mut Lanes, ExecErrorKind> {
        match *op {
            Operand::Vgpr { reg, .. } => self.vreg_mut(usize::from(reg), false),
            Operand::Agpr { reg, .. } => self.vreg_mut(usize::from(reg), true),
            _ => Err(ExecErrorKind::Unimplemented),
        }
    }

    /// Writes `v` to every lane of `mask` of a 32-bit vector destination: a uniform result (all
    /// sources scalar) without a lane array to build and copy (docs/executor.md §6 "speed").
    pub(crate) fn fill_v32(&mut self, op: &Operand, v: u32, mask: u64) -> Result<(), ExecErrorKind> {
        let (reg, acc) = match *op {
            Operand::Vgpr { reg, .. } => (reg, false),
            Operand::Agpr { reg, .. } => (reg, true),
            _ => return Err(ExecErrorKind::Unimplemented),
        };
        let dst = self.vreg_mut(usize::from(reg), acc)?;
        if mask == u64::MAX {
            *dst = [v; LANES];
            return Ok(());
        }
        for (l, d) in dst.iter_mut().enumerate() {
            if mask >> l & 1 != 0 {
                *d = v;
            }
        }
        Ok(())
    }

    /// Four registers from a VGPR or AGPR operand's first, borrowed (a GLOBAL store's data read
    /// in place); `None` for other operands and when the four run past the file.
    pub(crate) fn vregs4(&self, op: &Operand) -> Option<&[Lanes; 4]> {
        let (file, reg) = match *op {
            Operand::Vgpr { reg, count } if count > 0 => (&self.vgpr, reg),
            Operand::Agpr { reg, .. } => (&self.agpr, reg),
            _ => return None,
        };
        let r = usize::from(reg);
        file.get(r..r.checked_add(4)?).and_then(|w| <&[Lanes; 4]>::try_from(w).ok())
    }

    /// Four registers from a VGPR or AGPR destination's first, for writing (a GLOBAL load
    /// gathered straight into its destination); `None` when the four run past the file.
    pub(crate) fn vregs4_mut(&mut self, op: &Operand) -> Option<&mut [Lanes; 4]> {
        let (file, reg) = match *op {
            Operand::Vgpr { reg, count } if count > 0 => (&mut self.vgpr, reg),
            Operand::Agpr { reg, .. } => (&mut self.agpr, reg),
            _ => return None,
        };
        let r = usize::from(reg);
        file.get_mut(r..r.checked_add(4)?).and_then(|w| <&mut [Lanes; 4]>::try_from(w).ok())
    }

    /// Copies dword `k` (< 4) of a vector source into `mem_buf[k]`, broadcasting a scalar
    /// (what `v32k` returns, without the copy through the stack).
    pub(crate) fn buf_from(&mut self, op: &Operand, k: u8) -> Result<(), ExecErrorKind> {
        let slot = usize::from(k) & 3;
        let at = |reg: u8| usize::from(reg) + usize::from(k);
        let v = match *op {
            Operand::Vgpr { reg, count: 0 } => self.stage.get(at(reg)),
            Operand::Vgpr { reg, .. } => self.vgpr.get(at(reg)),
            Operand::Agpr { reg, .. } => self.agpr.get(at(reg)),
            _ => {
                let x = if k == 0 { self.s32(op)? } else { self.sreg_dword(op, k)? };
                self.mem_buf[slot] = [x; LANES];
                return Ok(());
            }
        };
        self.mem_buf[slot] = *v.ok_or(ExecErrorKind::RegisterOutOfRange)?;
        Ok(())
    }

    /// Writes `mem_buf[0..dwords]` to dwords `0..dwords` of a vector destination in the lanes
    /// of `mask` (`set_v32k` for each, in order).
    pub(crate) fn set_from_buf(&mut self, op: &Operand, dwords: usize, mask: u64) -> Result<(), ExecErrorKind> {
        let (reg, acc) = match *op {
            Operand::Vgpr { reg, .. } => (reg, false),
            Operand::Agpr { reg, .. } => (reg, true),
            _ => return Err(ExecErrorKind::Unimplemented),
        };
        let file = if acc { &mut self.agpr } else { &mut self.vgpr };
        for (k, v) in self.mem_buf.iter().enumerate().take(dwords) {
            let dst = file.get_mut(usize::from(reg) + k).ok_or(ExecErrorKind::RegisterOutOfRange)?;
            if mask == u64::MAX {
                *dst = *v;
            } else {
                for (l, d) in dst.iter_mut().enumerate() {
                    if mask >> l & 1 != 0 {
                        *d = v[l];
                    }
                }
            }
        }
        Ok(())
    }

    /// Writes a 32-bit vector destination in the active lanes.
    pub(crate) fn set_v32(&mut self, op: &Operand, v: &Lanes) -> Result<(), ExecErrorKind> {
        let m = self.exec;
        self.set_v32k(op, 0, v, m)
    }

    /// Writes a 64-bit vector destination in the active lanes.
    pub(crate) fn set_v64(&mut self, op: &Operand, v: &Lanes64) -> Result<(), ExecErrorKind> {
        let m = self.exec;
        // Both halves written in place (no lane arrays built and copied, docs/executor.md §6
        // "speed").
        let (reg, acc) = match *op {
            Operand::Vgpr { reg, .. } => (reg, false),
            Operand::Agpr { reg, .. } => (reg, true),
            _ => return Err(ExecErrorKind::Unimplemented),
        };
        let file = if acc { &mut self.agpr } else { &mut self.vgpr };
        let r = usize::from(reg);
        let Some([lo, hi]) = file.get_mut(r..r + 2).and_then(|p| <&mut [Lanes; 2]>::try_from(p).ok()) else {
            // The pair runs past the file: the low half as before, then the error.
            let lo: Lanes = core::array::from_fn(|l| v[l] as u32);
            self.set_v32k(op, 0, &lo, m)?;
            return Err(ExecErrorKind::RegisterOutOfRange);
        };
        if m == u64::MAX {
            for l in 0..LANES {
                lo[l] = v[l] as u32;
                hi[l] = (v[l] >> 32) as u32;
            }
            return Ok(());
        }
        for l in 0..LANES {
            if m >> l & 1 != 0 {
                lo[l] = v[l] as u32;
                hi[l] = (v[l] >> 32) as u32;
            }
        }
        Ok(())
    }
}

/// A float inline constant as f32 bits.
pub(crate) fn float_const_f32(c: FloatConst) -> u32 {
    match c {
        FloatConst::Half => 0x3F00_0000,
        FloatConst::NegHalf => 0xBF00_0000,
        FloatConst::One => 0x3F80_0000,
        FloatConst::NegOne => 0xBF80_0000,
        FloatConst::Two => 0x4000_0000,
        FloatConst::NegTwo => 0xC000_0000,
        FloatConst::Four => 0x4080_0000,
        FloatConst::NegFour => 0xC080_0000,
        FloatConst::InvTwoPi => 0x3E22_F983,
    }
}

/// A float inline constant as f64 bits.
pub(crate) fn float_const_f64(c: FloatConst) -> u64 {
    match c {
        FloatConst::InvTwoPi => 0x3FC4_5F30_6DC9_C882,
        c => f64::from(f32::from_bits(float_const_f32(c))).to_bits(),
    }
}
