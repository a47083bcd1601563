//! The twins the emulator brings along (docs/kfd-aql.md §9 "kernels"; docs/rocm-on-emu.md §4.2):
//!
//! - aqueduct's own copy, fill, write-value and conditional-graph scheduler kernels
//!   ([`builtin_twins`]), bound to fixed kernel
//!   objects ([`builtin_object`]) and, by kfd-direct and the preload, to the symbol names of the
//!   blit code objects;
//! - ROCr's blit kernels ([`rocr_blit_twin`]), which the registry recognises by their code;
//! - the OpenCL blit kernels ROCclr compiles for itself ([`rocclr_twins`]), bound by name.
//!
//! Bulk work resolves its buffers once ([`crate::MemView::bytes`]) and moves them with
//! `memcpy`-sized copies.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use aqueduct::backend::{CopyArgs, FillArgs, WriteValueArgs};
use aqueduct::conditional::{run_scheduler, SchedulerArgs, SchedulerFrame};
use aqueduct::BuiltinKernel;

use crate::memory::{KernelError, MemView};
use crate::twin::{KernelCtx, Twin};

/// First kernel-object address handed out for directly registered twins. It lies above the
/// 47-bit user space, so it can never collide with a BO.
pub const DIRECT_KERNEL_OBJECT_BASE: u64 = 0xffff_8000_0000_0000;

/// The kernel object of a built-in blit kernel (the same on every device).
pub const fn builtin_object(k: BuiltinKernel) -> u64 {
    DIRECT_KERNEL_OBJECT_BASE
        + match k {
            BuiltinKernel::Copy => 0,
            BuiltinKernel::Fill => 64,
            BuiltinKernel::WriteValue => 128,
            BuiltinKernel::GraphScheduler => 192,
        }
}

fn read_args<T: Copy>(kernarg: &[u8]) -> Result<T, KernelError> {
    if kernarg.len() < size_of::<T>() {
        return Err(KernelError::Trap);
    }
    // SAFETY: the slice holds at least size_of::<T>() bytes; T is a plain-integer repr(C) struct
    // from core's backend module, valid for every bit pattern.
    Ok(unsafe { std::ptr::read_unaligned(kernarg.as_ptr().cast::<T>()) })
}

/// The built-in copy, fill, write-value and conditional-graph scheduler twins (kernel-argument
/// layouts from core's [`aqueduct::backend`] and [`aqueduct::conditional`]). Each is dispatched
/// as a single work-group.
pub fn builtin_twins() -> [(BuiltinKernel, Twin); 4] {
    [
        (
            BuiltinKernel::GraphScheduler,
            Twin::new("__aqueduct_graph_scheduler", size_of::<SchedulerArgs>() as u32, |ctx, wg| {
                if wg != [0, 0, 0] {
                    return Ok(());
                }
                let a: SchedulerArgs = read_args(ctx.kernarg)?;
                // The frame is device memory mapped on this device, as the kernel's loads need.
                ctx.mem.ptr(a.frame, size_of::<SchedulerFrame>() as u64)?;
                // SAFETY: the frame, its bodies, signals and body queue belong to a live
                // executable (the dispatch is one of its packets). Twins run in the process
                // that owns the memory, where the runtime's host-visible allocations, rings and
                // doorbells sit at the addresses the frame holds: core's scheduler runs as is.
                unsafe { run_scheduler(a) }.map_err(|_| KernelError::Trap)
            }),
        ),
        (
            BuiltinKernel::Copy,
            Twin::new("__aqueduct_copy", size_of::<CopyArgs>() as u32, |ctx, _| {
                let a: CopyArgs = read_args(ctx.kernarg)?;
                ctx.mem.copy(a.dst, a.src, a.bytes)
            }),
        ),
        (
            BuiltinKernel::Fill,
            Twin::new("__aqueduct_fill", size_of::<FillArgs>() as u32, |ctx, _| {
                let a: FillArgs = read_args(ctx.kernarg)?;
                let value = a.value.to_le_bytes();
                match a.element_bytes {
                    1 | 2 | 4 => fill(ctx.mem, a.dst, &value[..a.element_bytes as usize], a.count),
                    _ => Err(KernelError::Trap),
                }
            }),
        ),
        (
            BuiltinKernel::WriteValue,
            Twin::new("__aqueduct_write_value", size_of::<WriteValueArgs>() as u32, |ctx, _| {
                let a: WriteValueArgs = read_args(ctx.kernarg)?;
                match a.width {
                    4 => ctx.mem.write_u32(a.dst, a.value as u32),
                    8 => ctx.mem.write_u64(a.dst, a.value),
                    _ => Err(KernelError::Trap),
                }
            }),
        ),
    ]
}

/// The twin of one of ROCr's blit kernels, by the name [`crate::naming::rocr_blit_name`] gave it.
pub fn rocr_blit_twin(name: &str) -> Option<Twin> {
    Some(match name {
        // CopyAligned: phase1 src/dst at 0/8, phase4 src end at 64 (the copy is one range).
        "rocr_CopyAligned" => Twin::new("rocr_CopyAligned", 88, |ctx, wg| {
            if wg != [0, 0, 0] {
                return Ok(());
            }
            let (src, dst, end) = (ctx.arg_u64(0), ctx.arg_u64(8), ctx.arg_u64(64));
            ctx.mem.copy(dst, src, end.saturating_sub(src))
        }),
        // CopyMisaligned: phase1 src/dst at 0/8, phase2 src end at 32.
        "rocr_CopyMisaligned" => Twin::new("rocr_CopyMisaligned", 56, |ctx, wg| {
            if wg != [0, 0, 0] {
                return Ok(());
            }
            let (src, dst, end) = (ctx.arg_u64(0), ctx.arg_u64(8), ctx.arg_u64(32));
            ctx.mem.copy(dst, src, end.saturating_sub(src))
        }),
        // Fill: dst at 0, end at 16, the u32 value at 24.
        "rocr_Fill" => Twin::new("rocr_Fill", 32, |ctx, wg| {
            if wg != [0, 0, 0] {
                return Ok(());
            }
            let (dst, end, value) = (ctx.arg_u64(0), ctx.arg_u64(16), ctx.arg_u32(24));
            fill(ctx.mem, dst, &value.to_le_bytes(), end.saturating_sub(dst) / 4)
        }),
        _ => return None,
    })
}

/// Writes `count` copies of `pattern` at `dst`: the buffer is resolved once, the first copy
/// stored, and the filled prefix doubled with `memcpy`s.
fn fill(mem: &MemView<'_>, dst: u64, pattern: &[u8], count: u64) -> Result<(), KernelError> {
    let total = count.checked_mul(pattern.len() as u64).ok_or(KernelError::MemoryFault(dst))?;
    if total == 0 {
        return Ok(());
    }
    mem.fill_pattern(dst, pattern, total)
}

/// Global work-item ids (x) of work-group `wg`, clipped to `limit`.
fn ids(ctx: &KernelCtx<'_>, wg: [u32; 3], limit: u64) -> std::ops::Range<u64> {
    let r = ctx.items_x(wg);
    let lo = u64::from(r.start).min(limit);
    lo..u64::from(r.end).min(limit)
}

/// Twins for the OpenCL blit kernels ROCclr 5.2 compiles for itself (`device/rocm/rocblit*`),
/// with the semantics of the device library's `__amd_*` helpers. Arguments are laid out with
/// natural alignment (pointers and `ulong` 8 bytes, `uint` 4).
pub fn rocclr_twins() -> Vec<Twin> {
    vec![
        // copyBuffer(uchar* src, uchar* dst, ulong srcOrigin, ulong dstOrigin, ulong size,
        // uint remain): remain == 8 → `size` bytes; else (size - 1) dwords + `remain` bytes.
        Twin::new("__amd_rocclr_copyBuffer", 44, |ctx, wg| {
            let src = ctx.arg_u64(0).wrapping_add(ctx.arg_u64(16));
            let dst = ctx.arg_u64(8).wrapping_add(ctx.arg_u64(24));
            let (size, remain) = (ctx.arg_u64(32), u64::from(ctx.arg_u32(40)));
            let r = ids(ctx, wg, size);
            if r.is_empty() {
                return Ok(());
            }
            if remain == 8 {
                return ctx.mem.copy(dst + r.start, src + r.start, r.end - r.start);
            }
            let full = r.start..r.end.min(size - 1);
            if !full.is_empty() {
                ctx.mem.copy(dst + full.start * 4, src + full.start * 4, (full.end - full.start) * 4)?;
            }
            if r.contains(&(size - 1)) {
                ctx.mem.copy(dst + (size - 1) * 4, src + (size - 1) * 4, remain)?;
            }
            Ok(())
        }),
        // copyBufferAligned(uint* src, uint* dst, ulong srcOrigin, ulong dstOrigin, ulong size,
        // uint alignment): `size` elements of `alignment` bytes; origins in bytes.
        Twin::new("__amd_rocclr_copyBufferAligned", 44, |ctx, wg| {
            let src = ctx.arg_u64(0).wrapping_add(ctx.arg_u64(16));
            let dst = ctx.arg_u64(8).wrapping_add(ctx.arg_u64(24));
            let (size, align) = (ctx.arg_u64(32), u64::from(ctx.arg_u32(40)).max(1));
            let r = ids(ctx, wg, size);
            if r.is_empty() {
                return Ok(());
            }
            ctx.mem.copy(dst + r.start * align, src + r.start * align, (r.end - r.start) * align)
        }),
        // fillBufferAligned(uchar*, ushort*, uint*, ulong*, pattern, uint patternSize,
        // ulong offset, ulong size): item i writes the pattern at element offset + i·patternSize.
        Twin::new("__amd_rocclr_fillBufferAligned", 64, |ctx, wg| {
            let bufs = [(ctx.arg_u64(24), 8u64), (ctx.arg_u64(16), 4), (ctx.arg_u64(8), 2), (ctx.arg_u64(0), 1)];
            let Some(&(buf, width)) = bufs.iter().find(|(b, _)| *b != 0) else { return Ok(()) };
            let (pattern, psize, offset, size) =
                (ctx.arg_u64(32), u64::from(ctx.arg_u32(40)), ctx.arg_u64(48), ctx.arg_u64(56));
            let r = ids(ctx, wg, size);
            if r.is_empty() || psize == 0 {
                return Ok(());
            }
            let mut pat = vec![0u8; (psize * width) as usize];
            ctx.mem.read(pattern, &mut pat)?;
            fill(ctx.mem, buf + (offset + r.start * psize) * width, &pat, r.end - r.start)
        }),
        // streamOpsWrite(uint* ptrInt, ulong* ptrUlong, ulong value, ...).
        Twin::new("__amd_rocclr_streamOpsWrite", 24, |ctx, wg| {
            if wg != [0, 0, 0] {
                return Ok(());
            }
            let (p32, p64, value) = (ctx.arg_u64(0), ctx.arg_u64(8), ctx.arg_u64(16));
            if p64 != 0 {
                let p = ctx.mem.ptr(p64, 8)?;
                if p as usize % 8 != 0 {
                    return Err(KernelError::MemoryFault(p64));
                }
                // SAFETY: 8 live, aligned bytes inside a mapped BO.
                unsafe { AtomicU64::from_ptr(p.cast()) }.store(value, Ordering::Release);
            } else {
                let p = ctx.mem.ptr(p32, 4)?;
                if p as usize % 4 != 0 {
                    return Err(KernelError::MemoryFault(p32));
                }
                // SAFETY: 4 live, aligned bytes inside a mapped BO.
                unsafe { AtomicU32::from_ptr(p.cast()) }.store(value as u32, Ordering::Release);
            }
            Ok(())
        }),
        // streamOpsWait(uint* ptrInt, ulong* ptrUlong, ulong value, ulong flags, ulong mask):
        // spins until the condition holds (0 GTE, 1 EQ, 2 AND, 3 NOR).
        Twin::new("__amd_rocclr_streamOpsWait", 40, |ctx, wg| {
            if wg != [0, 0, 0] {
                return Ok(());
            }
            let (p32, p64, value, flags, mask) =
                (ctx.arg_u64(0), ctx.arg_u64(8), ctx.arg_u64(16), ctx.arg_u64(24), ctx.arg_u64(32));
            let read = || -> Result<u64, KernelError> {
                if p64 != 0 {
                    ctx.mem.read_u64(p64)
                } else {
                    ctx.mem.read_u32(p32).map(u64::from)
                }
            };
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            loop {
                let v = read()? & mask;
                let ok = match flags {
                    0 => v >= value,
                    1 => v == value,
                    2 => v & value != 0,
                    _ => !(v | value) != 0,
                };
                if ok {
                    return Ok(());
                }
                if std::time::Instant::now() > deadline {
                    return Err(KernelError::Hang);
                }
                std::thread::sleep(std::time::Duration::from_micros(20));
            }
        }),
    ]
}
