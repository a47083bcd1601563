//! Naming the kernels a foreign runtime dispatches (docs/rocm-on-emu.md §4.2), so they can be bound
//! to host twins without the runtime telling the emulator anything:
//!
//! 1. ROCr's own blit kernels (raw ISA behind a synthetic `amd_kernel_code_t`, entry offset 256)
//!    by the first eight instruction words of their code ([`rocr_blit_name`]).
//! 2. Every kernel a code-object loader placed in device memory, by the `.kd` symbol whose value
//!    is the kernel object: the loader copies the whole span of `PT_LOAD` segments, whose first
//!    page holds the ELF header, so the emulator walks down from the kernel object to the image
//!    base and reads the image's own tables with `amdhsa`, the one code-object reader
//!    ([`elf_kernel_name`]; docs/code-objects.md §1).
//!
//! This module only reads device memory and names; the twin registry (`registry`) looks the names
//! up among the twins registered by name and the built-in ones (`builtin`).

use crate::memory::MemView;
use crate::twin::Layout;

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

/// The tables of the loaded image at `base` read from device memory: the ELF header and
/// program headers first, then the prefix a reader of a placed image needs
/// (`amdhsa::CodeObject::tables_end`: headers, symbol tables, the note, descriptors).
fn image_tables(mem: &MemView<'_>, base: u64) -> Option<Vec<u8>> {
    let eh = rd(mem, base, 64)?;
    let (phoff, phnum) = (u64le(&eh, 32), u64::from(u16le(&eh, 56)));
    let headers_end = phoff.checked_add(phnum.checked_mul(56)?)?;
    if headers_end > 1 << 16 {
        return None;
    }
    let headers = rd(mem, base, headers_end.max(64) as usize)?;
    let end = amdhsa::CodeObject::from_image(&headers).ok()?.tables_end();
    if end > 64 << 20 {
        return None;
    }
    rd(mem, base, end.max(headers_end) as usize)
}

/// The symbol name (`foo.kd`) of the kernel descriptor at `object` and what the image's
/// metadata note says of the kernel, if it has one.
pub(crate) fn elf_kernel(mem: &MemView<'_>, object: u64) -> Option<(String, Option<Layout>)> {
    let base = image_base(mem, object)?;
    let tables = image_tables(mem, base)?;
    let co = amdhsa::CodeObject::from_image(&tables).ok()?;
    let want = object.wrapping_sub(base);
    let symbols = co.symbols().ok()?;
    let symbol = symbols.iter().find(|s| s.value == want && s.defined && s.name.ends_with(".kd"))?;
    let name = symbol.name.strip_suffix(".kd").unwrap_or(symbol.name);
    let meta = co.metadata().ok().flatten().and_then(|m| m.kernel(name).map(|k| Layout::of(&k)));
    Some((symbol.name.to_owned(), meta))
}

/// Bytes of the function whose code starts at `entry` in the loaded image around `entry` (its
/// ELF symbol's `st_size`), if the image has such a symbol.
pub(crate) fn elf_code_size(mem: &MemView<'_>, entry: u64) -> Option<u64> {
    let base = image_base(mem, entry)?;
    let tables = image_tables(mem, base)?;
    let co = amdhsa::CodeObject::from_image(&tables).ok()?;
    let want = entry.wrapping_sub(base);
    let symbols = co.symbols().ok()?;
    let f = symbols.iter().find(|s| s.value == want && s.defined && s.kind == amdhsa::SymbolKind::Func)?;
    (f.size > 0).then_some(f.size)
}

/// The executable `PT_LOAD` segment (the code object's text) containing `entry` in the loaded
/// image around it: its GPU VA and size in bytes.
pub(crate) fn elf_text_segment(mem: &MemView<'_>, entry: u64) -> Option<(u64, u64)> {
    let base = image_base(mem, entry)?;
    let eh = rd(mem, base, 64)?;
    let (phoff, phnum) = (u64le(&eh, 32), usize::from(u16le(&eh, 56)));
    let ph = rd(mem, base.checked_add(phoff)?, phnum.checked_mul(56)?)?;
    ph.chunks_exact(56).find_map(|h| {
        let (ty, flags) = (u32le(h, 0), u32le(h, 4));
        let (vaddr, memsz) = (u64le(h, 16), u64le(h, 40));
        let start = base.checked_add(vaddr)?;
        // PT_LOAD with PF_X.
        (ty == 1 && flags & 1 != 0 && (start..start.checked_add(memsz)?).contains(&entry)).then_some((start, memsz))
    })
}

fn u32le(b: &[u8], o: usize) -> u32 {
    b.get(o..o + 4).map_or(0, |x| u32::from_le_bytes([x[0], x[1], x[2], x[3]]))
}

/// The symbol name (`foo.kd`) of the kernel descriptor at `object` in a loaded AMDGPU image.
pub fn elf_kernel_name(mem: &MemView<'_>, object: u64) -> Option<String> {
    elf_kernel(mem, object).map(|(name, _)| name)
}
