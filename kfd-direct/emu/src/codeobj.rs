//! AMDHSA code objects (docs/kfd-aql.md §6): ELF checks, kernel descriptors, and a minimal image
//! builder for loaders in tests (place every `PT_LOAD` segment at `base + p_vaddr`, apply
//! `R_AMDGPU_RELATIVE64` / `R_AMDGPU_ABS64` relocations).
//!
//! The emulator parses a code object only to learn its kernels: each `<name>.kd` descriptor and
//! the machine code at its entry point become a fingerprint that [`crate::Emu::load_code_object`]
//! binds to the twin registered under `<name>`.

use object::elf::{FileHeader64, EM_AMDGPU};
use object::read::elf::{ElfFile64, FileHeader};
use object::{
    Endianness, Object, ObjectSection, ObjectSegment, ObjectSymbol, RelocationFlags, RelocationTarget, SymbolKind,
};

use crate::abi::KernelDescriptor;

/// `ELFOSABI_AMDGPU_HSA`.
pub const ELFOSABI_AMDGPU_HSA: u8 = 64;
/// `R_AMDGPU_ABS64`.
pub const R_AMDGPU_ABS64: u32 = 3;
/// `R_AMDGPU_RELATIVE64`.
pub const R_AMDGPU_RELATIVE64: u32 = 13;

/// `EF_AMDGPU_MACH_*` values of the targets the emulator knows.
pub mod mach {
    /// gfx90a.
    pub const GFX90A: u32 = 0x03f;
    /// gfx940.
    pub const GFX940: u32 = 0x040;
    /// gfx1100.
    pub const GFX1100: u32 = 0x041;
    /// gfx942.
    pub const GFX942: u32 = 0x04c;
}

/// Why a file is not a usable code object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CodeObjectError {
    /// Not an ELF64 file the parser accepts.
    Malformed(String),
    /// Not `EM_AMDGPU` / `ELFOSABI_AMDGPU_HSA`, or an unsupported code-object version.
    NotAmdHsa,
    /// A relocation type the minimal loader does not handle.
    Relocation(u32),
}

/// One kernel of a code object.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// Symbol name without `.kd`.
    pub name: String,
    /// Address of the descriptor relative to the load base (`st_value` of `<name>.kd`).
    pub descriptor_offset: u64,
    /// The descriptor.
    pub descriptor: KernelDescriptor,
    /// Its 64 raw bytes.
    pub descriptor_bytes: [u8; 64],
    /// Machine code at the entry point (the function symbol's bytes, at most 4 KiB).
    pub code: Vec<u8>,
    /// The kernel's entry in the object's metadata note (argument layout), if present.
    pub meta: Option<crate::metadata::KernelMeta>,
}

/// A parsed AMDHSA code object.
#[derive(Debug, Clone)]
pub struct CodeObject {
    /// `e_flags & EF_AMDGPU_MACH`.
    pub mach: u32,
    /// Code-object version (`EI_ABIVERSION` + 2: 4, 5 or 6).
    pub version: u8,
    /// Its kernels.
    pub kernels: Vec<Kernel>,
    /// Bytes the loaded image spans (highest `p_vaddr + p_memsz`, page-rounded).
    pub image_size: u64,
}

/// Largest loaded image accepted (real code objects span kilobytes to a few megabytes); a
/// bigger `p_vaddr + p_memsz` is malformed rather than an allocation of that size.
const MAX_IMAGE_BYTES: u64 = 256 << 20;

fn bytes_at(file: &ElfFile64<'_, Endianness>, addr: u64, len: u64) -> Option<Vec<u8>> {
    for s in file.sections() {
        let (a, sz) = (s.address(), s.size());
        if addr >= a && addr - a < sz {
            let data = s.data().ok()?;
            let off = (addr - a) as usize;
            let end = (off + len as usize).min(data.len());
            return Some(data.get(off..end)?.to_vec());
        }
    }
    None
}

impl CodeObject {
    /// Parses and checks an AMDHSA code object.
    pub fn parse(data: &[u8]) -> Result<CodeObject, CodeObjectError> {
        let file = ElfFile64::<Endianness>::parse(data).map_err(|e| CodeObjectError::Malformed(e.to_string()))?;
        let hdr: &FileHeader64<Endianness> = file.elf_header();
        let endian = file.endian();
        let ident = hdr.e_ident();
        if hdr.e_machine(endian) != EM_AMDGPU
            || ident.os_abi != ELFOSABI_AMDGPU_HSA
            || !(2..=4).contains(&ident.abi_version)
        {
            return Err(CodeObjectError::NotAmdHsa);
        }
        let mach = hdr.e_flags(endian) & 0xff;
        let mut image_size = 0;
        for seg in file.segments() {
            let end = seg.address().checked_add(seg.size());
            image_size = image_size.max(end.ok_or_else(|| CodeObjectError::Malformed("segment end overflows".into()))?);
        }
        if image_size > MAX_IMAGE_BYTES {
            return Err(CodeObjectError::Malformed("image too large".into()));
        }
        let metadata = crate::metadata::kernels_from_elf(data).unwrap_or_default();
        let mut kernels = Vec::new();
        for sym in file.symbols() {
            let Ok(name) = sym.name() else { continue };
            let Some(base) = name.strip_suffix(".kd") else { continue };
            let Some(kd) = bytes_at(&file, sym.address(), 64).filter(|b| b.len() == 64) else { continue };
            let mut descriptor_bytes = [0u8; 64];
            descriptor_bytes.copy_from_slice(&kd);
            // SAFETY: 64 bytes into a plain-integer repr(C) struct of 64 bytes.
            let descriptor: KernelDescriptor = unsafe { std::ptr::read_unaligned(kd.as_ptr().cast()) };
            let entry = sym.address().wrapping_add_signed(descriptor.kernel_code_entry_byte_offset);
            let len = file
                .symbols()
                .find(|s| s.kind() == SymbolKind::Text && s.address() == entry && s.size() > 0)
                .map_or(256, |s| s.size())
                .min(4096);
            let code = bytes_at(&file, entry, len).unwrap_or_default();
            kernels.push(Kernel {
                name: base.to_owned(),
                descriptor_offset: sym.address(),
                descriptor,
                descriptor_bytes,
                code,
                meta: crate::metadata::find(&metadata, base).cloned(),
            });
        }
        kernels.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(CodeObject { mach, version: ident.abi_version + 2, kernels, image_size: image_size.next_multiple_of(4096) })
    }

    /// The kernel named `name`.
    pub fn kernel(&self, name: &str) -> Option<&Kernel> {
        self.kernels.iter().find(|k| k.name == name)
    }

    /// Builds the loaded image for load address `base`: segments at `p_vaddr`, zero fill,
    /// dynamic relocations applied.
    pub fn image(data: &[u8], base: u64) -> Result<Vec<u8>, CodeObjectError> {
        let file = ElfFile64::<Endianness>::parse(data).map_err(|e| CodeObjectError::Malformed(e.to_string()))?;
        let co = CodeObject::parse(data)?;
        let mut img = vec![0u8; co.image_size as usize];
        for seg in file.segments() {
            let bytes = seg.data().map_err(|e| CodeObjectError::Malformed(e.to_string()))?;
            let at = seg.address() as usize;
            img.get_mut(at..)
                .and_then(|img| img.get_mut(..bytes.len()))
                .ok_or_else(|| CodeObjectError::Malformed("segment outside image".into()))?
                .copy_from_slice(bytes);
        }
        if let Some(relocs) = file.dynamic_relocations() {
            for (off, r) in relocs {
                let RelocationFlags::Elf { r_type } = r.flags() else { continue };
                let value = match r_type {
                    R_AMDGPU_RELATIVE64 => base.wrapping_add_signed(r.addend()),
                    R_AMDGPU_ABS64 => {
                        let s = match r.target() {
                            RelocationTarget::Symbol(i) => file.symbol_by_index(i).map(|s| s.address()).unwrap_or(0),
                            _ => 0,
                        };
                        base.wrapping_add(s).wrapping_add_signed(r.addend())
                    }
                    t => return Err(CodeObjectError::Relocation(t)),
                };
                let at = off as usize;
                img.get_mut(at..)
                    .and_then(|img| img.get_mut(..8))
                    .ok_or_else(|| CodeObjectError::Malformed("relocation outside image".into()))?
                    .copy_from_slice(&value.to_le_bytes());
            }
        }
        Ok(img)
    }
}
