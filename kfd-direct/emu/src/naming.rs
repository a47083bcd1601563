//! Naming the kernels a foreign runtime dispatches (docs/rocm-on-emu.md §4.2), so they can be bound
//! to host twins without the runtime telling the emulator anything:
//!
//! 1. ROCr's own blit kernels (raw ISA behind a synthetic `amd_kernel_code_t`, entry offset 256)
//!    by the first eight instruction words of their code ([`rocr_blit_name`]).
//! 2. Every kernel a code-object loader placed in device memory, by the `.kd` symbol whose value
//!    is the kernel object: the loader copies the whole span of `PT_LOAD` segments, whose first
//!    page holds the ELF header, so the emulator walks down from the kernel object to the image
//!    base and reads `.dynsym` through `PT_DYNAMIC` ([`elf_kernel_name`]).
//!
//! This module only reads device memory and names; the twin registry (`registry`) looks the names
//! up among the twins registered by name and the built-in ones (`builtin`).

use crate::memory::MemView;
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

/// The name of one of ROCr's blit kernels, recognised from the descriptor and its entry code.
pub fn rocr_blit_name(kd: &[u8; 64], code: &[u8]) -> Option<&'static str> {
    if i64::from_le_bytes(kd[16..24].try_into().ok()?) != 256 {
        return None;
    }
    let words: Vec<u32> =
        code.get(..32)?.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    ROCR_BLITS.iter().find(|(_, w)| w[..] == words[..]).map(|(name, _)| *name)
}

fn rd(mem: &MemView<'_>, va: u64, len: usize) -> Option<Vec<u8>> {
    let mut v = vec![0u8; len];
    mem.read(va, &mut v).ok()?;
    Some(v)
}

// Little-endian fields of headers read from device memory; a field past the end reads as 0
// (a malformed image then fails to name, it never panics the engine).
fn u16le(b: &[u8], o: usize) -> u16 {
    b.get(o..o + 2).map_or(0, |x| u16::from_le_bytes([x[0], x[1]]))
}

fn u32le(b: &[u8], o: usize) -> u32 {
    b.get(o..o + 4).map_or(0, |x| u32::from_le_bytes([x[0], x[1], x[2], x[3]]))
}

fn u64le(b: &[u8], o: usize) -> u64 {
    b.get(o..o + 8).and_then(|x| x.try_into().ok()).map_or(0, u64::from_le_bytes)
}

/// The load base of the AMDGPU image containing `object`: the nearest page at or below it that
/// starts with an AMDGPU ELF header, searched inside the BO (at most 64 MiB down).
pub fn image_base(mem: &MemView<'_>, object: u64) -> Option<u64> {
    let bo_start = mem.tr.range_start(object)?;
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
    let ph = rd(mem, base.wrapping_add(phoff), (ph_end - phoff) as usize)?;
    let note = (0..phnum as usize).map(|i| &ph[i * phentsize as usize..]).find(|p| u32le(p, 0) == 4)?;
    let (off, vaddr, filesz) = (u64le(note, 8), u64le(note, 16), u64le(note, 32));
    if filesz > 1 << 20 || off > 1 << 24 {
        return None;
    }
    let mut buf = vec![0u8; ph_end.max(off + filesz) as usize];
    buf[..64].copy_from_slice(&eh);
    buf[phoff as usize..ph_end as usize].copy_from_slice(&ph);
    mem.read(base.wrapping_add(vaddr), &mut buf[off as usize..(off + filesz) as usize]).ok()?;
    metadata::kernels_from_elf(&buf)
}

fn symbol_at(mem: &MemView<'_>, base: u64, object: u64) -> Option<String> {
    let eh = rd(mem, base, 64)?;
    let (phoff, phentsize, phnum) = (u64le(&eh, 32), u16le(&eh, 54) as u64, u16le(&eh, 56) as u64);
    let ph = rd(mem, base.wrapping_add(phoff), (phentsize * phnum) as usize)?;
    let dynamic = (0..phnum as usize).map(|i| &ph[i * phentsize as usize..]).find(|p| u32le(p, 0) == 2)?;
    let (dyn_vaddr, dyn_size) = (u64le(dynamic, 16), u64le(dynamic, 40));
    let d = rd(mem, base.wrapping_add(dyn_vaddr), dyn_size.min(4096) as usize)?;
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
    let nsyms = u32le(&rd(mem, base.wrapping_add(hash), 8)?, 4) as u64;
    if !(16..=256).contains(&syment) || nsyms > 1 << 20 || strsz > 16 << 20 {
        return None;
    }
    let syms = rd(mem, base.wrapping_add(symtab), (nsyms * syment) as usize)?;
    let strs = rd(mem, base.wrapping_add(strtab), strsz as usize)?;
    let want = object.wrapping_sub(base);
    syms.chunks_exact(syment as usize).find(|s| u64le(s, 8) == want && u32le(s, 0) != 0).and_then(|s| {
        let off = u32le(s, 0) as usize;
        let name = strs.get(off..)?;
        let end = name.iter().position(|&b| b == 0)?;
        String::from_utf8(name[..end].to_vec()).ok()
    })
}
