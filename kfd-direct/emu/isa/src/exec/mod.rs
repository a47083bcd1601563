//! The wave64 interpreter (stage 1 of the executor; docs/executor.md).
//!
//! Layers, each using only the ones above it:
//!
//! * [`Code`]: a kernel's machine code decoded once — the [`Inst`] array with each instruction's
//!   byte address and, per instruction, the handler that executes it (chosen by mnemonic at
//!   decode time, so the interpreter never matches on names). An instruction without a handler,
//!   or bytes that do not decode, become an error *when executed*, naming the PC and the text.
//! * `wave`: one wave's registers (SGPRs, VGPRs and AGPRs sized from the descriptor, EXEC,
//!   VCC, SCC, M0, MODE, FLAT_SCRATCH) and operand reads and writes with the ISA's inline
//!   constants and literals.
//! * `ops`: the instruction semantics.
//! * [`run_work_group`]: the initial state the AMDHSA ABI and the descriptor define
//!   (docs/code-objects.md §5) and the waves of one work-group, interleaved at `s_barrier`,
//!   over one LDS allocation.
//!
//! Memory goes through the [`Memory`] trait the emulator implements on its GPU translation: a
//! load, store or atomic outside a mapping returns a [`MemFault`] and the work-group stops with
//! [`ExecErrorKind::MemoryFault`]. Every failure is an [`ExecError`]; nothing here panics.

// Lane loops index several per-lane arrays at once.
#![allow(clippy::needless_range_loop)]

mod float;
mod fp8;
mod indexing;
mod lanes;
mod memory;
mod ops;
mod softfloat;
mod wave;

use alloc::boxed::Box;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

use amdhsa::descriptor::SgprInit;
use amdhsa::KernelDescriptor;

use crate::{DecodeError, Inst};

pub use memory::{swizzle_source, SHADER_CLOCKS_PER_TICK};
pub use wave::{Wave, LANES};

/// A memory access outside the GPU's mappings, at this address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemFault(pub u64);

/// The read-modify-write operations of the global/flat/DS atomics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicOp {
    /// Exchange.
    Swap,
    /// Compare and swap (`compare` is the expected value).
    CmpSwap,
    /// Integer add.
    Add,
    /// Integer subtract.
    Sub,
    /// Signed minimum.
    MinI,
    /// Unsigned minimum.
    MinU,
    /// Signed maximum.
    MaxI,
    /// Unsigned maximum.
    MaxU,
    /// Bitwise and.
    And,
    /// Bitwise or.
    Or,
    /// Bitwise xor.
    Xor,
    /// `old >= value ? 0 : old + 1`.
    Inc,
    /// `old == 0 || old > value ? value : old - 1`.
    Dec,
    /// f32 add (32-bit accesses only).
    AddF32,
    /// f64 add (64-bit accesses only).
    AddF64,
    /// Two f16 adds, one per half (32-bit accesses only), each rounded to nearest even.
    PkAddF16,
    /// f64 minimum (IEEE minNum: a NaN operand yields the other; −0 < +0).
    MinF64,
    /// f64 maximum (IEEE maxNum).
    MaxF64,
    /// Two bf16 adds, one per half (32-bit accesses only), each rounded to nearest even
    /// (gfx940; docs/executor.md §8).
    PkAddBf16,
    /// f32 minimum (32-bit accesses; IEEE minNum as [`AtomicOp::MinF64`]).
    MinF32,
    /// f32 maximum (IEEE maxNum).
    MaxF32,
    /// Reverse subtract: `value - old`.
    Rsub,
    /// Masked or: `(old & !compare) | value` (`compare` is the mask).
    MaskOr,
    /// Float compare and store: `value` where `old` equals `compare` as an f32 or f64 (by
    /// size: ±0 equal, a NaN equal to nothing), else `old`.
    CmpStF,
    /// `old >= compare ? old - compare : old + value`.
    Wrap,
}

impl AtomicOp {
    /// The new memory value for `old` (of `size` bytes, 4 or 8).
    pub fn apply(self, old: u64, value: u64, compare: u64, size: u8) -> u64 {
        let mask = if size == 8 { u64::MAX } else { 0xFFFF_FFFF };
        let (o, v) = (old & mask, value & mask);
        let signed = |x: u64| if size == 8 { x as i64 } else { i64::from(x as u32 as i32) };
        let r = match self {
            AtomicOp::Swap => v,
            AtomicOp::CmpSwap => {
                if o == compare & mask {
                    v
                } else {
                    o
                }
            }
            AtomicOp::Add => o.wrapping_add(v),
            AtomicOp::Sub => o.wrapping_sub(v),
            AtomicOp::MinI => {
                if signed(v) < signed(o) {
                    v
                } else {
                    o
                }
            }
            AtomicOp::MaxI => {
                if signed(v) > signed(o) {
                    v
                } else {
                    o
                }
            }
            AtomicOp::MinU => o.min(v),
            AtomicOp::MaxU => o.max(v),
            AtomicOp::And => o & v,
            AtomicOp::Or => o | v,
            AtomicOp::Xor => o ^ v,
            AtomicOp::Inc => {
                if o >= v {
                    0
                } else {
                    o + 1
                }
            }
            AtomicOp::Dec => {
                if o == 0 || o > v {
                    v
                } else {
                    o - 1
                }
            }
            AtomicOp::AddF32 => u64::from((f32::from_bits(o as u32) + f32::from_bits(v as u32)).to_bits()),
            AtomicOp::AddF64 => (f64::from_bits(o) + f64::from_bits(v)).to_bits(),
            AtomicOp::PkAddF16 => {
                let half = |x: u64, s: u32| ((x >> s) & 0xFFFF) as u16;
                let sum = |s: u32| u64::from(f16_add(half(o, s), half(v, s)));
                sum(0) | sum(16) << 16
            }
            AtomicOp::PkAddBf16 => {
                let half = |x: u64, s: u32| ((x >> s) & 0xFFFF) as u16;
                let sum = |s: u32| u64::from(bf16_add(half(o, s), half(v, s)));
                sum(0) | sum(16) << 16
            }
            AtomicOp::Rsub => v.wrapping_sub(o),
            AtomicOp::MaskOr => (o & !compare) | v,
            AtomicOp::CmpStF => {
                if float_of(o, size) == float_of(compare & mask, size) {
                    v
                } else {
                    o
                }
            }
            AtomicOp::Wrap => {
                let d = compare & mask;
                if o >= d {
                    o - d
                } else {
                    o.wrapping_add(v)
                }
            }
            AtomicOp::MinF64 | AtomicOp::MaxF64 | AtomicOp::MinF32 | AtomicOp::MaxF32 => {
                let (a, b) = (float_of(o, size), float_of(v, size));
                let min = matches!(self, AtomicOp::MinF64 | AtomicOp::MinF32);
                let sign = |x: u64| x >> (8 * u32::from(size) - 1) & 1;
                if a.is_nan() {
                    v
                } else if b.is_nan() {
                    o
                } else if a == b {
                    // −0 against +0: the sign decides.
                    if (min && sign(o) != 0) || (!min && sign(o) == 0) {
                        o
                    } else {
                        v
                    }
                } else if (a < b) == min {
                    o
                } else {
                    v
                }
            }
        };
        r & mask
    }
}

/// The f32 (size 4) or f64 (size 8) whose bits are `x`, as an f64 (exact).
fn float_of(x: u64, size: u8) -> f64 {
    if size == 8 {
        f64::from_bits(x)
    } else {
        f64::from(f32::from_bits(x as u32))
    }
}

/// f16 addition, rounded to nearest even: the f32 sum of two f16 values rounds to f16 as the
/// exact sum would (f32 holds more than twice f16's precision plus two bits).
pub fn f16_add(a: u16, b: u16) -> u16 {
    f32_to_f16(f16_to_f32(a) + f16_to_f32(b))
}

/// bf16 addition, rounded to nearest even, denormals kept: the f32 sum rounds to bf16 as the
/// exact sum would (f32 holds more than twice bf16's precision plus two bits); a NaN stays a
/// NaN (quieted, its sign and high payload kept).
pub fn bf16_add(a: u16, b: u16) -> u16 {
    let s = (f32::from_bits(u32::from(a) << 16) + f32::from_bits(u32::from(b) << 16)).to_bits();
    if f32::from_bits(s).is_nan() {
        return (s >> 16) as u16 | 0x40;
    }
    ((s + 0x7FFF + ((s >> 16) & 1)) >> 16) as u16
}

/// An f16 bit pattern as f32 (exact).
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from(h >> 10) & 0x1F;
    let man = u32::from(h) & 0x3FF;
    let bits = match (exp, man) {
        (0, 0) => sign,
        // Subnormal: man × 2^-24, exact in f32.
        (0, m) => {
            let mag = m as f32 * (1.0 / 16_777_216.0);
            return if sign != 0 { -mag } else { mag };
        }
        (0x1F, 0) => sign | 0x7F80_0000,
        (0x1F, m) => sign | 0x7FC0_0000 | m << 13,
        (e, m) => sign | (e + 112) << 23 | m << 13,
    };
    f32::from_bits(bits)
}

/// An f32 rounded to the nearest f16 (ties to even; overflow to infinity, NaN stays NaN).
pub fn f32_to_f16(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    if x.is_nan() {
        return sign | 0x7E00 | ((b >> 13) & 0x1FF) as u16;
    }
    let a = x.abs();
    if a >= 65520.0 {
        return sign | 0x7C00;
    }
    // Scale so the f16 unit in the last place is 1, round to an integer (ties to even), then
    // the integer is the f16 magnitude's significand at that exponent.
    let e = ((a.to_bits() >> 23) as i32 - 127).max(-14);
    let ulp = e - 10;
    let scaled = a * f32::from_bits(((127 - ulp) as u32) << 23);
    let r = round_ties_even(scaled) as u32;
    // r is in [0, 2^11]; 2^11 carries into the next exponent.
    let (e, r) = if r >= 1 << 11 { (e + 1, r >> 1) } else { (e, r) };
    if r < 1 << 10 {
        // Subnormal (or zero): exponent field 0.
        return sign | r as u16;
    }
    sign | (((e + 15) as u16) << 10) | (r as u16 & 0x3FF)
}

fn round_ties_even(x: f32) -> f32 {
    // x is non-negative and below 2^12: the f32 trick of adding and subtracting 2^23.
    (x + 8_388_608.0) - 8_388_608.0
}

/// Device memory as the executor sees it: GPU virtual addresses, little-endian bytes.
///
/// Implementations make each naturally aligned access of up to 8 bytes single-copy atomic and
/// [`Memory::atomic`] atomic with respect to every other user of the memory (other work-groups
/// on other threads, the host).
pub trait Memory {
    /// Reads `out.len()` (1–64) bytes at `addr`.
    fn load(&self, addr: u64, out: &mut [u8]) -> Result<(), MemFault>;
    /// Writes `data` at `addr`.
    fn store(&self, addr: u64, data: &[u8]) -> Result<(), MemFault>;
    /// Atomically replaces the `size`-byte (4 or 8) value at `addr` with
    /// `op.apply(old, value, compare, size)` and returns `old`.
    fn atomic(&self, addr: u64, size: u8, op: AtomicOp, value: u64, compare: u64) -> Result<u64, MemFault>;
    /// The device's constant clock (`s_memrealtime`): ticks at 100 MHz, never decreasing.
    fn realtime(&self) -> u64;
    /// `s_sendmsg(MSG_INTERRUPT)`: the interrupt with `context` (M0 bits 7:0, the event id the
    /// wave posted to its signal's mailbox).
    fn interrupt(&self, context: u32);
    /// Reads `dwords` (1–4) dwords at `addrs[l]` for each lane `l` set in `mask`, lanes in
    /// order (the first fault ends it), dword `k` into `out[k][l]`: one call per instruction
    /// instead of one per lane. Nothing else of `out` is written (the executor may pass the
    /// destination registers themselves). The default reads lane by lane with
    /// [`Memory::load`].
    fn gather(
        &self,
        addrs: &[u64; LANES],
        mask: u64,
        dwords: usize,
        out: &mut [[u32; LANES]; 4],
    ) -> Result<(), MemFault> {
        gather_by_lane(self, addrs, mask, dwords, out)
    }
    /// Writes `dwords` (1–4) dwords of `data` per lane of `mask`, as [`Memory::gather`] reads.
    fn scatter(
        &self,
        addrs: &[u64; LANES],
        mask: u64,
        dwords: usize,
        data: &[[u32; LANES]; 4],
    ) -> Result<(), MemFault> {
        scatter_by_lane(self, addrs, mask, dwords, data)
    }
}

/// [`Memory::gather`]'s default: lane by lane through [`Memory::load`] (an implementation's
/// fallback when its faster path does not apply).
pub fn gather_by_lane<M: Memory + ?Sized>(
    mem: &M,
    addrs: &[u64; LANES],
    mask: u64,
    dwords: usize,
    out: &mut [[u32; LANES]; 4],
) -> Result<(), MemFault> {
    let n = dwords.min(4);
    for l in 0..LANES {
        if mask >> l & 1 == 0 {
            continue;
        }
        let mut b = [0u8; 16];
        mem.load(addrs[l], &mut b[..4 * n])?;
        for (k, o) in out.iter_mut().enumerate().take(n) {
            o[l] = u32::from_le_bytes([b[4 * k], b[4 * k + 1], b[4 * k + 2], b[4 * k + 3]]);
        }
    }
    Ok(())
}

/// [`Memory::scatter`]'s default: lane by lane through [`Memory::store`].
pub fn scatter_by_lane<M: Memory + ?Sized>(
    mem: &M,
    addrs: &[u64; LANES],
    mask: u64,
    dwords: usize,
    data: &[[u32; LANES]; 4],
) -> Result<(), MemFault> {
    let n = dwords.min(4);
    for l in 0..LANES {
        if mask >> l & 1 == 0 {
            continue;
        }
        let mut b = [0u8; 16];
        for (k, d) in data.iter().enumerate().take(n) {
            b[4 * k..4 * k + 4].copy_from_slice(&d[l].to_le_bytes());
        }
        mem.store(addrs[l], &b[..4 * n])?;
    }
    Ok(())
}

/// Whether an access of `dwords` dwords per lane covers every lane (`mask` all ones) at
/// consecutive addresses from `addrs[0]` (`addrs[l] = addrs[0] + 4 dwords l`): the one span
/// an implementation of [`Memory::gather`] / [`Memory::scatter`] may check and copy at once.
pub fn unit_stride(addrs: &[u64; LANES], mask: u64, dwords: usize) -> bool {
    if mask != u64::MAX || dwords == 0 {
        return false;
    }
    let (a0, step) = (addrs[0], 4 * dwords as u64);
    // Every lane's difference from the ramp or-ed together: one loop on 64-bit lanes the
    // compiler vectorises (docs/executor.md §6 "speed").
    let (mut diff, mut want) = (0u64, a0);
    for a in addrs {
        diff |= *a ^ want;
        want = want.wrapping_add(step);
    }
    diff == 0
}

/// Memory in a `Vec`, at a base address: the software backend tests and doc examples use.
#[derive(Debug)]
pub struct VecMemory {
    /// GPU address of `bytes[0]`.
    pub base: u64,
    /// The contents (interior mutability: the executor takes `&self`).
    pub bytes: core::cell::RefCell<Vec<u8>>,
    /// The clock: each read advances it by one tick.
    pub clock: core::cell::Cell<u64>,
    /// The contexts of the interrupts raised, in order.
    pub interrupts: core::cell::RefCell<Vec<u32>>,
}

impl VecMemory {
    /// `len` zero bytes at `base`.
    pub fn new(base: u64, len: usize) -> VecMemory {
        VecMemory {
            base,
            bytes: core::cell::RefCell::new(vec![0; len]),
            clock: core::cell::Cell::new(0),
            interrupts: core::cell::RefCell::new(Vec::new()),
        }
    }
    fn range(&self, addr: u64, len: usize) -> Result<core::ops::Range<usize>, MemFault> {
        let off = addr.checked_sub(self.base).ok_or(MemFault(addr))?;
        let off = usize::try_from(off).map_err(|_| MemFault(addr))?;
        let end = off.checked_add(len).ok_or(MemFault(addr))?;
        if end > self.bytes.borrow().len() {
            return Err(MemFault(addr));
        }
        Ok(off..end)
    }
}

impl VecMemory {
    /// The byte range of an access whose 64 lanes are all in `mask` and read `n` dwords each at
    /// consecutive addresses (`addrs[l] = addrs[0] + 4 n l`), when all of it lies in the memory.
    fn span_range(&self, len: usize, addrs: &[u64; LANES], mask: u64, n: usize) -> Option<core::ops::Range<usize>> {
        if !unit_stride(addrs, mask, n) {
            return None;
        }
        let a0 = addrs[0];
        let off = usize::try_from(a0.checked_sub(self.base)?).ok()?;
        let end = off.checked_add(4 * n * LANES)?;
        (end <= len).then_some(off..end)
    }
    fn span<'m>(&self, m: &'m [u8], addrs: &[u64; LANES], mask: u64, n: usize) -> Option<&'m [u8]> {
        m.get(self.span_range(m.len(), addrs, mask, n)?)
    }
}

impl Memory for VecMemory {
    fn load(&self, addr: u64, out: &mut [u8]) -> Result<(), MemFault> {
        let r = self.range(addr, out.len())?;
        let m = self.bytes.borrow();
        let src = m.get(r).ok_or(MemFault(addr))?;
        // Dwords (the common access) without a variable-length copy.
        match (<&mut [u8; 4]>::try_from(&mut *out), <&[u8; 4]>::try_from(src)) {
            (Ok(d), Ok(s)) => *d = *s,
            _ => out.copy_from_slice(src),
        }
        Ok(())
    }
    fn store(&self, addr: u64, data: &[u8]) -> Result<(), MemFault> {
        let r = self.range(addr, data.len())?;
        let mut m = self.bytes.borrow_mut();
        let dst = m.get_mut(r).ok_or(MemFault(addr))?;
        match (<&mut [u8; 4]>::try_from(&mut *dst), <&[u8; 4]>::try_from(data)) {
            (Ok(d), Ok(s)) => *d = *s,
            _ => dst.copy_from_slice(data),
        }
        Ok(())
    }
    fn gather(
        &self,
        addrs: &[u64; LANES],
        mask: u64,
        dwords: usize,
        out: &mut [[u32; LANES]; 4],
    ) -> Result<(), MemFault> {
        let m = self.bytes.borrow();
        let n = dwords.min(4);
        // All lanes on consecutive addresses (the common unit-stride access): one bounds check
        // and one copy; otherwise (or when the span is not all inside) lane by lane, so a
        // fault names the same lane's address as before.
        if let Some(src) = self.span(&m, addrs, mask, n) {
            for (l, c) in src.chunks_exact(4 * n).enumerate() {
                for (k, w) in c.chunks_exact(4).enumerate() {
                    if let (Some(o), Some(w)) = (out.get_mut(k), <[u8; 4]>::try_from(w).ok()) {
                        o[l] = u32::from_le_bytes(w);
                    }
                }
            }
            return Ok(());
        }
        for l in 0..LANES {
            if mask >> l & 1 == 0 {
                continue;
            }
            let a = addrs[l];
            let src = a
                .checked_sub(self.base)
                .and_then(|o| usize::try_from(o).ok())
                .and_then(|o| m.get(o..o.checked_add(4 * n)?))
                .ok_or(MemFault(a))?;
            for (k, c) in src.chunks_exact(4).enumerate() {
                if let Some(o) = out.get_mut(k) {
                    o[l] = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                }
            }
        }
        Ok(())
    }
    fn scatter(
        &self,
        addrs: &[u64; LANES],
        mask: u64,
        dwords: usize,
        data: &[[u32; LANES]; 4],
    ) -> Result<(), MemFault> {
        let mut m = self.bytes.borrow_mut();
        let n = dwords.min(4);
        // Consecutive addresses: one bounds check and one pass, as in `gather`.
        if let Some(r) = self.span_range(m.len(), addrs, mask, n) {
            if let Some(dst) = m.get_mut(r) {
                if n == 1 {
                    for (c, v) in dst.chunks_exact_mut(4).zip(data[0].iter()) {
                        c.copy_from_slice(&v.to_le_bytes());
                    }
                    return Ok(());
                }
                for (l, c) in dst.chunks_exact_mut(4 * n).enumerate() {
                    for (k, w) in c.chunks_exact_mut(4).enumerate() {
                        if let Some(d) = data.get(k) {
                            w.copy_from_slice(&d[l].to_le_bytes());
                        }
                    }
                }
                return Ok(());
            }
        }
        for l in 0..LANES {
            if mask >> l & 1 == 0 {
                continue;
            }
            let a = addrs[l];
            let base = self.base;
            let dst = a
                .checked_sub(base)
                .and_then(|o| usize::try_from(o).ok())
                .and_then(|o| m.get_mut(o..o.checked_add(4 * n)?))
                .ok_or(MemFault(a))?;
            for (k, c) in dst.chunks_exact_mut(4).enumerate() {
                if let Some(d) = data.get(k) {
                    c.copy_from_slice(&d[l].to_le_bytes());
                }
            }
        }
        Ok(())
    }
    fn atomic(&self, addr: u64, size: u8, op: AtomicOp, value: u64, compare: u64) -> Result<u64, MemFault> {
        if addr % u64::from(size) != 0 {
            return Err(MemFault(addr));
        }
        let mut b = [0u8; 8];
        let n = usize::from(size).min(8);
        self.load(addr, &mut b[..n])?;
        let old = u64::from_le_bytes(b);
        let new = op.apply(old, value, compare, size);
        self.store(addr, &new.to_le_bytes()[..n])?;
        Ok(old)
    }
    fn realtime(&self) -> u64 {
        let t = self.clock.get().wrapping_add(1);
        self.clock.set(t);
        t
    }
    fn interrupt(&self, context: u32) {
        self.interrupts.borrow_mut().push(context);
    }
}

/// Why a wave stopped the dispatch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExecErrorKind {
    /// The instruction decodes but the executor does not implement it (or this form of it:
    /// DPP, SDWA, a modifier or MODE setting it does not honour yet).
    Unimplemented,
    /// The bytes at the PC are not a gfx90a instruction.
    Illegal(DecodeError),
    /// The PC left the decoded code (a jump outside it or into the middle of an instruction).
    PcOutOfCode,
    /// A memory access outside the GPU's mappings.
    MemoryFault(u64),
    /// An LDS access outside the work-group's allocation.
    LdsOutOfRange(u32),
    /// A register index past what the descriptor allocates.
    RegisterOutOfRange,
    /// `s_trap` with this trap id.
    Trap(u16),
    /// The wave halted (`s_sethalt 1`, `s_sendmsghalt`): nothing resumes it.
    Halted,
    /// The wave ran more instructions than the watchdog allows.
    Watchdog(u64),
    /// Every live wave of the work-group waits at a barrier that can never open, or the
    /// work-group is larger than the executor runs.
    Barrier,
    /// The dispatch asks for state the executor cannot build (e.g. more waves than scratch
    /// slots).
    Setup,
}

/// An executor failure: which instruction, where, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExecError {
    /// What went wrong.
    pub kind: ExecErrorKind,
    /// Byte address of the instruction (0 when not tied to one).
    pub pc: u64,
    /// The instruction, when it decoded.
    pub inst: Option<Inst>,
}

impl ExecError {
    pub(crate) fn bare(kind: ExecErrorKind) -> ExecError {
        ExecError { kind, pc: 0, inst: None }
    }
}

impl fmt::Display for ExecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pc {:#x}", self.pc)?;
        if let Some(i) = &self.inst {
            write!(f, " `{}`", i.display())?;
        }
        f.write_str(": ")?;
        match self.kind {
            ExecErrorKind::Unimplemented => f.write_str("instruction not implemented by the executor"),
            ExecErrorKind::Illegal(e) => write!(f, "illegal instruction ({e})"),
            ExecErrorKind::PcOutOfCode => f.write_str("the program counter left the kernel's code"),
            ExecErrorKind::MemoryFault(a) => write!(f, "memory violation at {a:#x}"),
            ExecErrorKind::LdsOutOfRange(a) => write!(f, "LDS access at {a:#x} outside the work-group's allocation"),
            ExecErrorKind::RegisterOutOfRange => f.write_str("register outside the descriptor's allocation"),
            ExecErrorKind::Trap(t) => write!(f, "s_trap {t}"),
            ExecErrorKind::Halted => f.write_str("the wave halted and nothing resumes it"),
            ExecErrorKind::Watchdog(n) => write!(f, "watchdog: the wave ran {n} instructions without ending"),
            ExecErrorKind::Barrier => f.write_str("s_barrier can never be satisfied"),
            ExecErrorKind::Setup => f.write_str("the dispatch's initial state cannot be built"),
        }
    }
}

impl core::error::Error for ExecError {}

/// One decoded instruction and how it runs.
#[derive(Clone, Copy)]
pub(crate) struct Slot {
    pub(crate) exe: ops::Exe,
    pub(crate) handler: Option<ops::Handler>,
}

/// A kernel's machine code, decoded once (the pre-decoded array the interpreter runs). Cloning
/// shares the decoded instructions (kernels of one code object calling its device functions
/// share the decoded text, docs/executor.md §4).
#[derive(Clone)]
pub struct Code {
    /// GPU byte address of the first instruction.
    base: u64,
    slots: Arc<[Slot]>,
    /// Byte offset of each instruction from `base`.
    starts: Arc<[u32]>,
    /// Where each run of decoding stopped before the end of the bytes.
    stops: Vec<DecodeError>,
    /// Instructions without a handler (by table index, deduplicated), for reports.
    missing: Vec<crate::Op>,
    /// The instruction set it was decoded for (gfx940 waves start with an architected flat
    /// scratch, §3 and §8 of docs/executor.md).
    target: crate::Target,
}

impl fmt::Debug for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Code").field("base", &self.base).field("insts", &self.slots.len()).finish()
    }
}

impl Code {
    /// Decodes `words` placed at GPU address `base` up to the first word that does not decode
    /// (code objects put data after `.text`; a jump there is reported when executed).
    pub fn decode(base: u64, words: &[u32]) -> Code {
        Code::decode_at(base, words, &[])
    }

    /// [`Code::decode`] for `target`'s instruction set.
    pub fn decode_for(target: crate::Target, base: u64, words: &[u32]) -> Code {
        Code::decode_at_for(target, base, words, &[])
    }

    /// Decodes `words` placed at `base` from the start and from each address of `entries`
    /// (kernel entry points inside a code object's text): each run goes on until a word that
    /// does not decode, and an entry already reached by an earlier run starts nothing.
    pub fn decode_at(base: u64, words: &[u32], entries: &[u64]) -> Code {
        Code::decode_at_for(crate::Target::Gfx90a, base, words, entries)
    }

    /// [`Code::decode_at`] for `target`'s instruction set (gfx940 code: docs/executor.md §8).
    pub fn decode_at_for(target: crate::Target, base: u64, words: &[u32], entries: &[u64]) -> Code {
        let mut runs: Vec<usize> = entries
            .iter()
            .filter_map(|&a| usize::try_from(a.checked_sub(base)? / 4).ok().filter(|&w| w < words.len()))
            .collect();
        runs.push(0);
        runs.sort_unstable();
        runs.dedup();
        let (mut slots, mut starts) = (Vec::new(), Vec::new());
        let (mut stops, mut missing) = (Vec::new(), Vec::new());
        let mut at = 0;
        for &run in &runs {
            if run < at || u32::try_from(run * 4).is_err() {
                continue;
            }
            at = run;
            while at < words.len() && u32::try_from(at * 4).is_ok() {
                match crate::decode_for(target, words, at) {
                    Ok(inst) => {
                        let h = ops::handler(&inst);
                        if h.is_none() && !missing.contains(&inst.op) {
                            missing.push(inst.op);
                        }
                        starts.push((at * 4) as u32);
                        at += usize::from(inst.len);
                        let next = base.wrapping_add(4 * at as u64);
                        let inner = ops::inner_handler(&inst);
                        let exe = ops::Exe {
                            slots: ops::slot_map(&inst),
                            inst,
                            aux: h.map_or(0, |h| h.1),
                            target: u32::MAX,
                            next,
                            to: 0,
                            inner,
                        };
                        slots.push(Slot { exe, handler: h.map(|h| h.0) });
                    }
                    Err(e) => {
                        stops.push(e);
                        break;
                    }
                }
            }
        }
        let mut c = Code { base, slots: Arc::from([]), starts: Arc::from(starts), stops, missing, target };
        // Branch targets: PC + 4 + 4 × simm16, resolved to indices once.
        for i in 0..slots.len() {
            let e = slots[i].exe;
            let name = e.inst.op.name();
            if e.inst.encoding() != crate::Encoding::Sopp
                || !(name.starts_with("s_branch") || name.starts_with("s_cbranch"))
            {
                continue;
            }
            let Some(crate::Operand::Imm(imm)) = e.inst.operands().first().copied() else { continue };
            let to = e.next.wrapping_add_signed(4 * i64::from(imm as u16 as i16));
            let t = c.index_of(to);
            if let Some(s) = slots.get_mut(i) {
                s.exe.to = to;
                s.exe.target = t.map_or(u32::MAX, |t| t as u32);
            }
        }
        c.slots = Arc::from(slots);
        c
    }

    /// The instruction set the code was decoded for.
    pub fn target(&self) -> crate::Target {
        self.target
    }

    /// Whether the code holds a call or an indirect jump (`s_swappc_b64`, `s_setpc_b64`), whose
    /// target may lie outside it.
    pub fn has_calls(&self) -> bool {
        self.insts().any(|i| matches!(i.op.name(), "s_swappc_b64" | "s_setpc_b64"))
    }

    /// GPU address of the first instruction.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// The decoded instructions.
    pub fn insts(&self) -> impl Iterator<Item = &Inst> {
        self.slots.iter().map(|s| &s.exe.inst)
    }

    /// The opcodes in this code that the executor does not implement.
    pub fn unimplemented(&self) -> &[crate::Op] {
        &self.missing
    }

    /// Index of the instruction at byte address `addr`.
    pub fn index_at(&self, addr: u64) -> Option<usize> {
        self.index_of(addr)
    }

    /// Index of the instruction at byte address `addr`.
    pub(crate) fn index_of(&self, addr: u64) -> Option<usize> {
        let off = u32::try_from(addr.checked_sub(self.base)?).ok()?;
        self.starts.binary_search(&off).ok()
    }

    /// Byte address of instruction `index`; one past the last instruction, where decoding
    /// stopped (so running off the end reports the word there, docs/executor.md §2).
    pub(crate) fn addr_of(&self, index: usize) -> u64 {
        match self.starts.get(index) {
            Some(&o) => self.base.wrapping_add(u64::from(o)),
            None if index == self.starts.len() => self.slots.last().map_or(self.base, |s| s.exe.next),
            None => self.base.wrapping_add(u64::from(u32::MAX)),
        }
    }

    /// The error for a PC that names no instruction: the decode error if it is where decoding
    /// stopped, else "left the code".
    pub(crate) fn bad_pc(&self, addr: u64) -> ExecError {
        let stop = self.stops.iter().find(|e| self.base.wrapping_add(4 * e.word as u64) == addr);
        let kind = match stop {
            Some(e) => ExecErrorKind::Illegal(*e),
            None => ExecErrorKind::PcOutOfCode,
        };
        ExecError { kind, pc: addr, inst: None }
    }

    pub(crate) fn slot(&self, index: usize) -> Option<&Slot> {
        self.slots.get(index)
    }
}

/// A kernel ready to run: its code, its descriptor and where it starts.
#[derive(Debug)]
pub struct Kernel {
    /// The decoded code (from the entry point on).
    pub code: Code,
    /// The kernel descriptor.
    pub descriptor: KernelDescriptor,
    /// Byte address of the entry point.
    pub entry: u64,
}

/// The scratch (private segment) the queue provides (docs/code-objects.md §9).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Scratch {
    /// `amd_queue_t.scratch_resource_descriptor`: the V# every kernel gets in `s[0:3]`.
    pub resource: [u32; 4],
    /// `scratch_backing_memory_location`.
    pub base: u64,
    /// `scratch_backing_memory_byte_size`.
    pub bytes: u64,
    /// `compute_tmpring_size`: WAVES (bits 11:0), WAVESIZE in KiB (bits 24:12).
    pub tmpring: u32,
}

impl Scratch {
    /// Bytes of one wave's slot.
    pub fn wave_bytes(&self) -> u64 {
        u64::from((self.tmpring >> 12) & 0x1FFF) * 1024
    }
    /// Slots the buffer holds.
    pub fn waves(&self) -> u32 {
        self.tmpring & 0xFFF
    }
}

/// What a work-group's initial state is built from: the dispatch packet (by address and
/// fields) and the queue's `amd_queue_t`, as the command processor reads them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dispatch {
    /// GPU address of the AQL packet (the dispatch ptr).
    pub packet_address: u64,
    /// GPU address of the queue's `amd_queue_t` (the queue ptr).
    pub queue_address: u64,
    /// The packet's `kernarg_address`.
    pub kernarg_address: u64,
    /// The packet's index in the ring (the dispatch id).
    pub dispatch_id: u64,
    /// The packet's grid size (unused dimensions 1).
    pub grid: [u32; 3],
    /// The packet's work-group size (unused dimensions 1).
    pub workgroup_size: [u32; 3],
    /// The packet's `group_segment_size` (LDS bytes, including the descriptor's fixed size).
    pub group_segment_size: u32,
    /// The packet's `private_segment_size` (scratch bytes per work-item).
    pub private_segment_size: u32,
    /// The queue's scratch.
    pub scratch: Scratch,
}

/// Bounds on execution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Instructions one wave may run before the watchdog stops the dispatch.
    pub wave_instructions: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { wave_instructions: DEFAULT_WATCHDOG }
    }
}

/// The default watchdog bound: 2^32 instructions per wave.
pub const DEFAULT_WATCHDOG: u64 = 1 << 32;

/// The most waves a work-group has (1024 work-items in wave64).
pub const MAX_WAVES: u32 = 16;

/// The most LDS a work-group may have on gfx90a: 64 KiB (a descriptor or packet asking for
/// more cannot start).
pub const MAX_LDS: u32 = 64 << 10;

/// Shared aperture base (LDS through flat addresses), as the emulated device's KFD apertures
/// place it (docs/kfd-aql.md §1.3).
pub const SHARED_APERTURE: u64 = 1 << 48;
/// Private aperture base (scratch through flat addresses).
pub const PRIVATE_APERTURE: u64 = 2 << 48;

/// Per-work-group state shared by its waves.
pub(crate) struct Group<'a> {
    pub(crate) mem: &'a dyn Memory,
    pub(crate) lds: Vec<u8>,
    pub(crate) code: &'a Code,
    /// A GLOBAL load's or store's lane addresses, built here rather than returned (the waves
    /// run one at a time).
    pub(crate) addrs: [u64; LANES],
}

/// How a wave stands after running until it blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WaveStop {
    Ended,
    Barrier,
}

/// Runs work-group `wg` of `dispatch` to completion. `slot_base` is the first scratch slot the
/// caller reserved for this work-group's waves (it must own slots `slot_base ..
/// slot_base + MAX_WAVES` while the work-group runs).
pub fn run_work_group(
    kernel: &Kernel,
    dispatch: &Dispatch,
    wg: [u32; 3],
    slot_base: u32,
    mem: &dyn Memory,
    limits: &Limits,
) -> Result<(), ExecError> {
    run_work_group_counted(kernel, dispatch, wg, slot_base, mem, limits).map(|_| ())
}

/// [`run_work_group`], returning the wave instructions the work-group's waves ran (for speed
/// figures).
pub fn run_work_group_counted(
    kernel: &Kernel,
    dispatch: &Dispatch,
    wg: [u32; 3],
    slot_base: u32,
    mem: &dyn Memory,
    limits: &Limits,
) -> Result<u64, ExecError> {
    let kd = &kernel.descriptor;
    let entry = kernel.code.index_of(kernel.entry).ok_or_else(|| kernel.code.bad_pc(kernel.entry))?;
    // Work-items of this (possibly partial) work-group per dimension.
    let mut size = [0u32; 3];
    for d in 0..3 {
        let wsz = dispatch.workgroup_size[d].max(1);
        let first = wg[d].saturating_mul(wsz);
        size[d] = wsz.min(dispatch.grid[d].saturating_sub(first));
    }
    let items = size.iter().map(|&s| u64::from(s)).product::<u64>();
    let waves = items.div_ceil(LANES as u64);
    if items == 0 || waves > u64::from(MAX_WAVES) {
        return Err(ExecError::bare(ExecErrorKind::Setup));
    }
    let waves = waves as u32;
    let lds_bytes = dispatch.group_segment_size.max(kd.group_segment_fixed_size);
    if lds_bytes > MAX_LDS {
        return Err(ExecError::bare(ExecErrorKind::Setup));
    }
    let mut group = Group { mem, lds: vec![0; lds_bytes as usize], code: &kernel.code, addrs: [0; LANES] };

    let vgprs = kd.accum_offset().min(256);
    let total = kd.vgprs(true).min(512);
    let agprs = total.saturating_sub(vgprs).min(256);
    let mut ws: Vec<Box<Wave>> = Vec::with_capacity(waves as usize);
    for w in 0..waves {
        let mut wave = Box::new(Wave::new(vgprs as usize, agprs as usize));
        wave.pc = entry;
        wave.mode = kd.rsrc1.initial_mode();
        init_wave(&mut wave, kernel, dispatch, wg, size, w, waves, slot_base)?;
        ws.push(wave);
    }
    let mut state: Vec<Option<WaveStop>> = vec![None; ws.len()];
    loop {
        let mut progressed = false;
        for (i, w) in ws.iter_mut().enumerate() {
            if state[i].is_none() {
                state[i] = Some(w.run(&mut group, limits)?);
                progressed = true;
            }
        }
        let live = state.iter().filter(|s| **s != Some(WaveStop::Ended)).count();
        if live == 0 {
            return Ok(ws.iter().map(|w| w.executed).sum());
        }
        // Every live wave is at the barrier: open it.
        if state.iter().all(|s| matches!(s, Some(WaveStop::Ended | WaveStop::Barrier))) {
            for s in state.iter_mut() {
                if *s == Some(WaveStop::Barrier) {
                    *s = None;
                }
            }
        } else if !progressed {
            return Err(ExecError::bare(ExecErrorKind::Barrier));
        }
    }
}

/// The wave's initial SGPRs, VGPR v0 and EXEC (docs/code-objects.md §5).
#[allow(clippy::too_many_arguments)]
fn init_wave(
    w: &mut Wave,
    kernel: &Kernel,
    d: &Dispatch,
    wg: [u32; 3],
    size: [u32; 3],
    index: u32,
    waves: u32,
    slot_base: u32,
) -> Result<(), ExecError> {
    let kd = &kernel.descriptor;
    let mut err = None;
    // The wave's scratch slot. A kernel that needs private memory (a fixed segment or a dynamic
    // stack) cannot start without one; one that only enables the offset SGPR gets 0.
    let slot = slot_base.saturating_add(index);
    let has_slot = slot < d.scratch.waves();
    if !has_slot && (kd.private_segment_fixed_size > 0 || kd.uses_dynamic_stack()) {
        err = Some(ExecError::bare(ExecErrorKind::Setup));
    }
    let wave_offset = if has_slot { u64::from(slot) * d.scratch.wave_bytes() } else { 0 };
    let lo = |v: u64| v as u32;
    let hi = |v: u64| (v >> 32) as u32;
    // gfx940 has an architected flat scratch (docs/executor.md §8): with ENABLE_PRIVATE_SEGMENT
    // the hardware sets FLAT_SCRATCH to the wave's scratch base (the queue's backing memory plus
    // the wave's slot) and passes no scratch wave-offset SGPR; the private segment buffer and
    // flat scratch init user SGPRs are not supported there and must not be enabled.
    let architected = kernel.code.target() == crate::Target::Gfx940;
    if architected {
        let mut unsupported = false;
        kd.initial_sgprs(|_, v| unsupported |= matches!(v, SgprInit::PrivateSegmentBuffer | SgprInit::FlatScratchInit));
        if unsupported {
            return Err(ExecError::bare(ExecErrorKind::Setup));
        }
        if kd.rsrc2.private_segment() {
            w.flat_scratch = d.scratch.base.wrapping_add(wave_offset);
        }
    }
    kd.initial_sgprs(|at, what| {
        let vals: &[u32] = match what {
            SgprInit::PrivateSegmentWaveOffset if architected => return,
            SgprInit::PrivateSegmentBuffer => &d.scratch.resource,
            SgprInit::DispatchPtr => &[lo(d.packet_address), hi(d.packet_address)],
            SgprInit::QueuePtr => &[lo(d.queue_address), hi(d.queue_address)],
            SgprInit::KernargSegmentPtr => &[lo(d.kernarg_address), hi(d.kernarg_address)],
            SgprInit::DispatchId => &[lo(d.dispatch_id), hi(d.dispatch_id)],
            SgprInit::FlatScratchInit => &[lo(d.scratch.base), hi(d.scratch.base)],
            SgprInit::PrivateSegmentSize => &[d.private_segment_size.next_multiple_of(4)],
            SgprInit::WorkgroupId(i) => &[wg[usize::from(i).min(2)]],
            SgprInit::WorkgroupInfo => &[(u32::from(index == 0) << 31) | (waves & 0x3F)],
            SgprInit::PrivateSegmentWaveOffset => &[wave_offset as u32],
        };
        for (k, &v) in vals.iter().enumerate() {
            match w.sgpr.get_mut(at as usize + k) {
                Some(s) => *s = v,
                None => err = Some(ExecError::bare(ExecErrorKind::RegisterOutOfRange)),
            }
        }
    });
    if let Some(e) = err {
        return Err(e);
    }
    // Work-item ids, x fastest, packed in v0 (the dimensions the descriptor enables).
    let dims = kd.rsrc2.workitem_id_vgprs();
    let (sx, sy) = (size[0].max(1), size[1].max(1));
    let mut exec = 0u64;
    let v0 = w.vgpr.get_mut(0).ok_or(ExecError::bare(ExecErrorKind::RegisterOutOfRange))?;
    let items = size.iter().map(|&s| u64::from(s)).product::<u64>();
    for lane in 0..LANES {
        let flat = u64::from(index) * LANES as u64 + lane as u64;
        if flat >= items {
            continue;
        }
        exec |= 1 << lane;
        let flat = flat as u32;
        let x = flat % sx;
        let y = (flat / sx) % sy;
        let z = flat / (sx * sy);
        let mut v = x;
        if dims >= 1 {
            v |= y << 10;
        }
        if dims >= 2 {
            v |= z << 20;
        }
        v0[lane] = v;
    }
    w.exec = exec;
    Ok(())
}

/// Runs one wave from its PC (an instruction index into `code`; see [`Code::index_at`]) until
/// `s_endpgm`, with `lds` as its work-group's LDS (`s_barrier` does not wait: the wave is
/// alone). For tests and tools; dispatches use [`run_work_group`].
pub fn run_wave(
    code: &Code,
    wave: &mut Wave,
    mem: &dyn Memory,
    lds: &mut Vec<u8>,
    limits: &Limits,
) -> Result<(), ExecError> {
    let mut group = Group { mem, lds: core::mem::take(lds), code, addrs: [0; LANES] };
    let r = loop {
        match wave.run(&mut group, limits) {
            Ok(WaveStop::Ended) => break Ok(()),
            Ok(WaveStop::Barrier) => continue,
            Err(e) => break Err(e),
        }
    };
    *lds = group.lds;
    r
}

/// Names of the opcodes the executor implements, for documentation and reports.
pub fn implemented() -> impl Iterator<Item = crate::Op> {
    crate::Op::all().filter(|op| ops::handler_for_name(op.name()).is_some())
}

/// A short text listing a code's unimplemented opcodes (for error reports).
pub fn unimplemented_list(code: &Code) -> String {
    let mut s = String::new();
    for (i, op) in code.unimplemented().iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        s.push_str(op.name());
    }
    s
}

#[cfg(test)]
mod tests {
    use super::{MemFault, Memory, VecMemory, LANES};

    /// The unit-stride path of `VecMemory::gather`/`scatter` gives what the lane-by-lane one
    /// gives, and a span that runs past the end faults at the first lane outside.
    #[test]
    fn unit_stride_gather_and_scatter_match_lanes_and_fault_at_the_first_lane_outside() {
        let m = VecMemory::new(0x1000, 64 * 8);
        let data: [[u32; LANES]; 4] = core::array::from_fn(|k| core::array::from_fn(|l| (k * 1000 + l) as u32));
        let addrs: [u64; LANES] = core::array::from_fn(|l| 0x1000 + 8 * l as u64);
        m.scatter(&addrs, u64::MAX, 2, &data).unwrap();
        let mut b = [0u8; 4];
        m.load(0x1000 + 8 * 5 + 4, &mut b).unwrap();
        assert_eq!(u32::from_le_bytes(b), 1005);
        let mut out = [[0u32; LANES]; 4];
        m.gather(&addrs, u64::MAX, 2, &mut out).unwrap();
        assert_eq!(out[0], data[0]);
        assert_eq!(out[1], data[1]);
        let shifted: [u64; LANES] = core::array::from_fn(|l| 0x1000 + 4 + 8 * l as u64);
        assert_eq!(m.gather(&shifted, u64::MAX, 2, &mut out), Err(MemFault(0x1000 + 4 + 8 * 63)));
        assert_eq!(m.scatter(&shifted, u64::MAX, 2, &data), Err(MemFault(0x1000 + 4 + 8 * 63)));
        // The lanes before the faulting one were written, as lane by lane.
        m.load(0x1000 + 4 + 8 * 62, &mut b).unwrap();
        assert_eq!(u32::from_le_bytes(b), 62);
    }
}
