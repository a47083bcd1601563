//! The AMDHSA code-object loader (docs/kfd-aql.md §6), `no_std` over the `object` crate.
//!
//! 1. Checks: ELF64, `EM_AMDGPU`, `ELFOSABI_AMDGPU_HSA`, code object V4–V6, and the
//!    `EF_AMDGPU_MACH` of `e_flags` against the device's gfx target.
//! 2. Load: one executable GPU buffer spans every `PT_LOAD` segment; each is copied to
//!    `base + p_vaddr` and zero-filled to `p_memsz`.
//! 3. Relocate `.rela.dyn`: `R_AMDGPU_RELATIVE64` (`base + A`) and `R_AMDGPU_ABS64`
//!    (`base + S + A`); any other type refuses the object.
//! 4. Kernels: every `<name>.kd` symbol is a 64-byte kernel descriptor; the kernel object is
//!    `base + st_value`, and the descriptor gives the segment sizes and the kernel-argument size.
//!    The kernel-argument alignment is reported as 16, the ABI minimum (§6 item 6; the metadata
//!    note is not parsed), which is what the backend's kernel-argument slots provide.

use object::elf::{EM_AMDGPU, PT_LOAD};
use object::read::elf::{ElfFile64, FileHeader, ProgramHeader};
use object::{Endianness, Object, ObjectSymbol, RelocationFlags, RelocationTarget};

use crate::abi::KernelDescriptor;
use crate::error::{KfdError, KfdResult};

/// `ELFOSABI_AMDGPU_HSA`.
pub const ELFOSABI_AMDGPU_HSA: u8 = 64;
/// `R_AMDGPU_ABS64`.
pub const R_AMDGPU_ABS64: u32 = 3;
/// `R_AMDGPU_RELATIVE64`.
pub const R_AMDGPU_RELATIVE64: u32 = 13;
/// Longest kernel name kept.
pub const MAX_NAME: usize = 64;
/// Kernels kept per code object.
pub const MAX_KERNELS: usize = 32;

/// `EF_AMDGPU_MACH_*` values accepted for a `gfx_target_version`.
pub fn accepted_machs(gfx_target_version: u32) -> &'static [u32] {
    match gfx_target_version {
        90010 => &[0x03f],
        90400 => &[0x040],
        // gfx942: its own code, or the gfx940 build that stands in for it where clang-15 is the
        // only compiler (the blit fixtures).
        90402 => &[0x04c, 0x040],
        110000 => &[0x041],
        _ => &[],
    }
}

/// One kernel of a loaded code object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelInfo {
    /// Symbol name (without `.kd`).
    pub name: heapless::String<MAX_NAME>,
    /// Kernel object: GPU VA of the descriptor.
    pub kernel_object: u64,
    /// Static LDS bytes per work-group.
    pub group_segment_size: u32,
    /// Static scratch bytes per work-item.
    pub private_segment_size: u32,
    /// Kernel-argument bytes (explicit and hidden).
    pub kernarg_size: u32,
    /// Kernel-argument alignment.
    pub kernarg_align: u32,
    /// Whether the kernel runs in wave32.
    pub wave32: bool,
    /// Whether it needs a dynamic stack (scratch the backend does not provide).
    pub dynamic_stack: bool,
}

/// What the parser learnt before loading.
pub(crate) struct Parsed<'d> {
    pub(crate) file: ElfFile64<'d, Endianness>,
    pub(crate) image_size: u64,
}

/// Checks the ELF and the target; returns the parsed file and the bytes its image spans.
pub(crate) fn parse(elf: &[u8], gfx_target_version: u32) -> KfdResult<Parsed<'_>> {
    let file = ElfFile64::<Endianness>::parse(elf).map_err(|_| KfdError::BadCodeObject("not an ELF64 file"))?;
    let hdr = file.elf_header();
    let e = file.endian();
    if hdr.e_machine(e) != EM_AMDGPU {
        return Err(KfdError::BadCodeObject("not EM_AMDGPU"));
    }
    let ident = hdr.e_ident();
    if ident.os_abi != ELFOSABI_AMDGPU_HSA {
        return Err(KfdError::BadCodeObject("not ELFOSABI_AMDGPU_HSA"));
    }
    if !(2..=4).contains(&ident.abi_version) {
        return Err(KfdError::BadCodeObject("unsupported code-object version"));
    }
    let mach = hdr.e_flags(e) & 0xff;
    if !accepted_machs(gfx_target_version).contains(&mach) {
        return Err(KfdError::BadCodeObject("built for another gfx target"));
    }
    let mut end = 0u64;
    for ph in file.elf_program_headers() {
        if ph.p_type(e) == PT_LOAD {
            end = end.max(ph.p_vaddr(e).saturating_add(ph.p_memsz(e)));
        }
    }
    if end == 0 {
        return Err(KfdError::BadCodeObject("no loadable segment"));
    }
    Ok(Parsed { file, image_size: end })
}

/// Copies the segments into `image` (the CPU view of the GPU buffer at `base`, `image.len()`
/// bytes) and applies the relocations.
pub(crate) fn place(p: &Parsed<'_>, elf: &[u8], image: &mut [u8], base: u64) -> KfdResult<()> {
    let e = p.file.endian();
    image.fill(0);
    for ph in p.file.elf_program_headers() {
        if ph.p_type(e) != PT_LOAD {
            continue;
        }
        let (off, filesz, vaddr) = (ph.p_offset(e) as usize, ph.p_filesz(e) as usize, ph.p_vaddr(e) as usize);
        let src = elf.get(off..off.saturating_add(filesz)).ok_or(KfdError::BadCodeObject("segment out of file"))?;
        let dst = image
            .get_mut(vaddr..vaddr.saturating_add(filesz))
            .ok_or(KfdError::BadCodeObject("segment out of image"))?;
        dst.copy_from_slice(src);
    }
    if let Some(relocs) = p.file.dynamic_relocations() {
        for (offset, r) in relocs {
            let RelocationFlags::Elf { r_type } = r.flags() else {
                return Err(KfdError::BadCodeObject("relocation kind"));
            };
            let value = match r_type {
                R_AMDGPU_RELATIVE64 => base.wrapping_add(r.addend() as u64),
                R_AMDGPU_ABS64 => {
                    let s = match r.target() {
                        RelocationTarget::Symbol(i) => p
                            .file
                            .symbol_by_index(i)
                            .map_err(|_| KfdError::BadCodeObject("relocation symbol"))?
                            .address(),
                        RelocationTarget::Absolute => 0,
                        _ => return Err(KfdError::BadCodeObject("relocation target")),
                    };
                    base.wrapping_add(s).wrapping_add(r.addend() as u64)
                }
                _ => return Err(KfdError::BadCodeObject("unsupported relocation type")),
            };
            let o = offset as usize;
            let slot =
                image.get_mut(o..o.saturating_add(8)).ok_or(KfdError::BadCodeObject("relocation out of image"))?;
            slot.copy_from_slice(&value.to_le_bytes());
        }
    }
    Ok(())
}

/// Calls `f` for every kernel of the placed image.
pub(crate) fn kernels(
    p: &Parsed<'_>,
    image: &[u8],
    base: u64,
    mut f: impl FnMut(KernelInfo) -> KfdResult<()>,
) -> KfdResult<()> {
    let syms = p.file.dynamic_symbols().chain(p.file.symbols());
    let mut seen: heapless::Vec<u64, MAX_KERNELS> = heapless::Vec::new();
    for sym in syms {
        let Ok(name) = sym.name() else { continue };
        let Some(kname) = name.strip_suffix(".kd") else { continue };
        let at = sym.address();
        if seen.contains(&at) {
            continue;
        }
        seen.push(at).map_err(|_| KfdError::Capacity("kernels per code object"))?;
        let bytes =
            image.get(at as usize..at as usize + 64).ok_or(KfdError::BadCodeObject("descriptor out of image"))?;
        // SAFETY: 64 bytes read unaligned into a plain-integer repr(C) struct of 64 bytes.
        let kd: KernelDescriptor = unsafe { core::ptr::read_unaligned(bytes.as_ptr().cast()) };
        let mut n = heapless::String::new();
        n.push_str(kname).map_err(|_| KfdError::Capacity("kernel name length"))?;
        f(KernelInfo {
            name: n,
            kernel_object: base + at,
            group_segment_size: kd.group_segment_fixed_size,
            private_segment_size: kd.private_segment_fixed_size,
            kernarg_size: kd.kernarg_size,
            kernarg_align: 16,
            wave32: kd.kernel_code_properties & (1 << 10) != 0,
            dynamic_stack: kd.kernel_code_properties & (1 << 11) != 0,
        })?;
    }
    Ok(())
}
