//! Naming the kernels a foreign runtime dispatches (rocr-on-emu.md §4.2), so they can be bound
//! to host twins without the runtime telling the emulator anything:
//!
//! 1. ROCr's own blit kernels (raw ISA behind a synthetic `amd_kernel_code_t`, entry offset 256)
//!    by the first eight instruction words of their code ([`rocr_blit`]).
//! 2. Every kernel a code-object loader placed in device memory, by the `.kd` symbol whose value
//!    is the kernel object: the loader copies the whole span of `PT_LOAD` segments, whose first
//!    page holds the ELF header, so the emulator walks down from the kernel object to the image
//!    base and reads `.dynsym` through `PT_DYNAMIC` ([`elf_kernel_name`]).
//!
//! A named kernel is then looked up among the twins registered by name; ROCclr's blit kernels
//! (`__amd_rocclr_*`) have built-in twins here ([`rocclr_twins`]).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::kernels::{KernelCtx, Twin};
use crate::memory::{KernelError, MemView};
use crate::metadata::{self, KernelMeta};

/// `EM_AMDGPU`.
const EM_AMDGPU: u16 = 224;

/// ROCr's blit kernels, by the first eight instruction words at the entry (shared by its
/// gfx8, gfx9 and gfx90a variants).
const ROCR_BLITS: [(&str, [u32; 8]); 3] = [
    ("rocr_CopyAligned", [0xC00A0100, 0, 0xC00A0200, 0x10, 0xC00A0300, 0x20, 0xC00A0400, 0x30]),
    ("rocr_CopyMisaligned", [0xC00A0100, 0, 0xC00A0200, 0x10, 0xC00A0300, 0x20, 0xC0020400, 0x30]),
    ("rocr_Fill", [0xC00A0100, 0, 0xC00A0200, 0x10, 0xBF8C007F, 0x8E028602, 0x32000002, 0x7E08020A]),
];

/// Twin for one of ROCr's blit kernels, recognised from the descriptor and its entry code.
pub fn rocr_blit(kd: &[u8; 64], code: &[u8]) -> Option<Twin> {
    if i64::from_le_bytes(kd[16..24].try_into().ok()?) != 256 || code.len() < 32 {
        return None;
    }
    let words: Vec<u32> = code[..32].chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    let (name, _) = ROCR_BLITS.iter().find(|(_, w)| w[..] == words[..])?;
    Some(match *name {
        // CopyAligned: phase1 src/dst at 0/8, phase4 src end at 64 (the copy is one range).
        "rocr_CopyAligned" => Twin::new(name, 88, |ctx, wg| {
            if wg != [0, 0, 0] {
                return Ok(());
            }
            let (src, dst, end) = (ctx.arg_u64(0), ctx.arg_u64(8), ctx.arg_u64(64));
            ctx.mem.copy(dst, src, end.saturating_sub(src))
        }),
        // CopyMisaligned: phase1 src/dst at 0/8, phase2 src end at 32.
        "rocr_CopyMisaligned" => Twin::new(name, 56, |ctx, wg| {
            if wg != [0, 0, 0] {
                return Ok(());
            }
            let (src, dst, end) = (ctx.arg_u64(0), ctx.arg_u64(8), ctx.arg_u64(32));
            ctx.mem.copy(dst, src, end.saturating_sub(src))
        }),
        // Fill: dst at 0, end at 16, the u32 value at 24.
        _ => Twin::new(name, 32, |ctx, wg| {
            if wg != [0, 0, 0] {
                return Ok(());
            }
            let (dst, end, value) = (ctx.arg_u64(0), ctx.arg_u64(16), ctx.arg_u32(24));
            fill(ctx.mem, dst, &value.to_le_bytes(), end.saturating_sub(dst) / 4)
        }),
    })
}

/// Writes `count` copies of `pattern` at `dst`.
fn fill(mem: &MemView<'_>, dst: u64, pattern: &[u8], count: u64) -> Result<(), KernelError> {
    let total = count.checked_mul(pattern.len() as u64).ok_or(KernelError::MemoryFault(dst))?;
    if total == 0 {
        return Ok(());
    }
    let p = mem.ptr(dst, total)?;
    for i in 0..count as usize {
        // SAFETY: `ptr` checked `total` live bytes at `dst`.
        unsafe { std::ptr::copy_nonoverlapping(pattern.as_ptr(), p.add(i * pattern.len()), pattern.len()) };
    }
    Ok(())
}

fn rd(mem: &MemView<'_>, va: u64, len: usize) -> Option<Vec<u8>> {
    let mut v = vec![0u8; len];
    mem.read(va, &mut v).ok()?;
    Some(v)
}

fn u16le(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}

fn u32le(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

fn u64le(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(a)
}

/// The load base of the AMDGPU image containing `object`: the nearest page at or below it that
/// starts with an AMDGPU ELF header, searched inside the BO (at most 64 MiB down).
pub fn image_base(mem: &MemView<'_>, object: u64) -> Option<u64> {
    let bo_start = mem.vm.bo_at(object)?.va;
    let mut page = object & !0xfff;
    loop {
        if let Some(h) = rd(mem, page, 20) {
            if h[..4] == *b"\x7fELF" && h[4] == 2 && u16le(&h, 18) == EM_AMDGPU {
                return Some(page);
            }
        }
        if page <= bo_start || object - page >= 64 << 20 {
            return None;
        }
        page -= 0x1000;
    }
}

/// The symbol name (`foo.kd`) of the kernel descriptor at `object` in a loaded AMDGPU image.
pub fn elf_kernel_name(mem: &MemView<'_>, object: u64) -> Option<String> {
    let base = image_base(mem, object)?;
    symbol_at(mem, base, object)
}

/// The symbol name (`foo.kd`) of the kernel descriptor at `object` and the kernel's entry in
/// the image's metadata note, if it has one.
pub fn elf_kernel(mem: &MemView<'_>, object: u64) -> Option<(String, Option<KernelMeta>)> {
    let base = image_base(mem, object)?;
    let symbol = symbol_at(mem, base, object)?;
    let name = symbol.strip_suffix(".kd").unwrap_or(&symbol);
    let meta = image_metadata(mem, base).and_then(|ks| metadata::find(&ks, name).cloned());
    Some((symbol, meta))
}

/// The metadata of the loaded image at `base`: the ELF header, program headers and `PT_NOTE`
/// contents are read from device memory (the note at its `p_vaddr`) into a buffer laid out by
/// file offset, which the ELF reader then walks.
fn image_metadata(mem: &MemView<'_>, base: u64) -> Option<Vec<KernelMeta>> {
    let eh = rd(mem, base, 64)?;
    let (phoff, phentsize, phnum) = (u64le(&eh, 32), u16le(&eh, 54) as u64, u16le(&eh, 56) as u64);
    let ph_end = phoff.checked_add(phentsize.checked_mul(phnum)?)?;
    if ph_end > 1 << 16 {
        return None;
    }
    let ph = rd(mem, base + phoff, (ph_end - phoff) as usize)?;
    let note = (0..phnum as usize).map(|i| &ph[i * phentsize as usize..]).find(|p| u32le(p, 0) == 4)?;
    let (off, vaddr, filesz) = (u64le(note, 8), u64le(note, 16), u64le(note, 32));
    if filesz > 1 << 20 || off > 1 << 24 {
        return None;
    }
    let mut buf = vec![0u8; ph_end.max(off + filesz) as usize];
    buf[..64].copy_from_slice(&eh);
    buf[phoff as usize..ph_end as usize].copy_from_slice(&ph);
    mem.read(base + vaddr, &mut buf[off as usize..(off + filesz) as usize]).ok()?;
    metadata::kernels_from_elf(&buf)
}

fn symbol_at(mem: &MemView<'_>, base: u64, object: u64) -> Option<String> {
    let eh = rd(mem, base, 64)?;
    let (phoff, phentsize, phnum) = (u64le(&eh, 32), u16le(&eh, 54) as u64, u16le(&eh, 56) as u64);
    let ph = rd(mem, base + phoff, (phentsize * phnum) as usize)?;
    let dynamic = (0..phnum as usize).map(|i| &ph[i * phentsize as usize..]).find(|p| u32le(p, 0) == 2)?;
    let (dyn_vaddr, dyn_size) = (u64le(dynamic, 16), u64le(dynamic, 40));
    let d = rd(mem, base + dyn_vaddr, dyn_size.min(4096) as usize)?;
    let (mut symtab, mut strtab, mut strsz, mut hash, mut syment) = (0, 0, 0, 0, 24);
    for e in d.chunks_exact(16) {
        let (tag, val) = (u64le(e, 0), u64le(e, 8));
        match tag {
            0 => break,
            4 => hash = val,
            5 => strtab = val,
            6 => symtab = val,
            10 => strsz = val,
            11 => syment = val,
            _ => {}
        }
    }
    if symtab == 0 || strtab == 0 || hash == 0 {
        return None;
    }
    let nsyms = u32le(&rd(mem, base + hash, 8)?, 4) as u64;
    let syms = rd(mem, base + symtab, (nsyms * syment) as usize)?;
    let strs = rd(mem, base + strtab, strsz as usize)?;
    let want = object - base;
    syms.chunks_exact(syment as usize).find(|s| u64le(s, 8) == want && u32le(s, 0) != 0).and_then(|s| {
        let off = u32le(s, 0) as usize;
        let end = strs[off..].iter().position(|&b| b == 0)? + off;
        String::from_utf8(strs[off..end].to_vec()).ok()
    })
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
