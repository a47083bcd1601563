//! AMDHSA code objects as ELF (docs/code-objects.md §1): the checks, the loaded image, the
//! dynamic relocations, symbols found by name, kernels, variables and the metadata note.
//!
//! A code object is read the way a dynamic loader reads it: through its program headers and
//! its `PT_DYNAMIC` table (`DT_SYMTAB`, `DT_STRTAB`, `DT_HASH` / `DT_GNU_HASH`, `DT_RELA`),
//! never through section headers. The same reader therefore serves a file and an image a loader
//! already placed in memory ([`CodeObject::from_image`]): lld puts the ELF header, the program
//! headers, the note, `.dynsym`, both hash tables, `.dynstr` and the kernel descriptors in the
//! first `PT_LOAD` segment, so a placed image describes itself, and a loader keeps no table of
//! kernels or names of its own.
//!
//! Every offset, size and count read from the input is bounds-checked; hostile input gets an
//! [`Error`], never a panic, and no loop runs longer than the bytes it walks.

use object::elf::{Dyn64, FileHeader64, ProgramHeader64, Rela64, Sym64};
use object::elf::{ET_DYN, PT_DYNAMIC, PT_LOAD, PT_NOTE, STB_WEAK, STT_FUNC, STT_OBJECT};
use object::pod::{from_bytes, slice_from_bytes};
use object::LittleEndian as LE;

use crate::descriptor::KernelDescriptor;
use crate::error::{Error, Result};
use crate::metadata::Metadata;
use crate::target::TargetId;

/// `EM_AMDGPU`.
pub const EM_AMDGPU: u16 = 224;
/// `ELFOSABI_AMDGPU_HSA`.
pub const ELFOSABI_AMDGPU_HSA: u8 = 64;
/// `NT_AMDGPU_METADATA`: the MessagePack metadata note of code objects v3 and later.
pub const NT_AMDGPU_METADATA: u32 = 32;
/// `R_AMDGPU_NONE`.
pub const R_AMDGPU_NONE: u32 = 0;
/// `R_AMDGPU_ABS64`: `S + A`.
pub const R_AMDGPU_ABS64: u32 = 3;
/// `R_AMDGPU_RELATIVE64`: `B + A`.
pub const R_AMDGPU_RELATIVE64: u32 = 13;
/// The suffix of a kernel descriptor's symbol.
pub const DESCRIPTOR_SUFFIX: &str = ".kd";
/// Largest loaded image accepted. The largest code objects Debian ships (rocSPARSE) span tens
/// of MiB; a header announcing more is malformed rather than an allocation of that size.
pub const MAX_IMAGE_BYTES: u64 = 1 << 30;
/// The page size images are rounded to.
pub const PAGE: u64 = 4096;

const DT_NULL: u64 = 0;
const DT_HASH: u64 = 4;
const DT_STRTAB: u64 = 5;
const DT_SYMTAB: u64 = 6;
const DT_RELA: u64 = 7;
const DT_RELASZ: u64 = 8;
const DT_RELAENT: u64 = 9;
const DT_STRSZ: u64 = 10;
const DT_SYMENT: u64 = 11;
const DT_GNU_HASH: u64 = 0x6fff_fef5;
const SYM_SIZE: u64 = 24;
const RELA_SIZE: u64 = 24;

type Header = FileHeader64<LE>;
type Phdr = ProgramHeader64<LE>;

/// Where a virtual address's bytes are: in a file (through its `PT_LOAD` segments) or in an
/// image placed at offset = address.
#[derive(Debug, Clone, Copy)]
enum Space<'a> {
    File { data: &'a [u8], phdrs: &'a [Phdr] },
    Image(&'a [u8]),
}

impl<'a> Space<'a> {
    /// `len` bytes at virtual address `addr`, if they are all backed by file bytes.
    fn at(&self, addr: u64, len: u64) -> Option<&'a [u8]> {
        let end = addr.checked_add(len)?;
        match *self {
            Space::Image(b) => b.get(usize::try_from(addr).ok()?..usize::try_from(end).ok()?),
            Space::File { data, phdrs } => {
                let ph = phdrs.iter().find(|p| {
                    p.p_type.get(LE) == PT_LOAD
                        && p.p_vaddr.get(LE) <= addr
                        && p.p_vaddr.get(LE).checked_add(p.p_filesz.get(LE)).is_some_and(|e| end <= e)
                })?;
                let off = ph.p_offset.get(LE).checked_add(addr - ph.p_vaddr.get(LE))?;
                data.get(usize::try_from(off).ok()?..usize::try_from(off.checked_add(len)?).ok()?)
            }
        }
    }

    /// The bytes from `addr` to the end of what backs it (a table whose length is learnt while
    /// reading it).
    fn from(&self, addr: u64) -> Option<&'a [u8]> {
        match *self {
            Space::Image(b) => b.get(usize::try_from(addr).ok()?..),
            Space::File { data, phdrs } => {
                let ph = phdrs.iter().find(|p| {
                    p.p_type.get(LE) == PT_LOAD
                        && p.p_vaddr.get(LE) <= addr
                        && p.p_vaddr.get(LE).checked_add(p.p_filesz.get(LE)).is_some_and(|e| addr < e)
                })?;
                let (start, len) = (ph.p_offset.get(LE), ph.p_filesz.get(LE));
                let off = start.checked_add(addr - ph.p_vaddr.get(LE))?;
                data.get(usize::try_from(off).ok()?..usize::try_from(start.checked_add(len)?).ok()?)
            }
        }
    }
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at.checked_add(4)?)?.try_into().ok()?))
}

/// An AMDHSA code object: a file, or an image a loader placed (see the module doc).
#[derive(Debug, Clone, Copy)]
pub struct CodeObject<'a> {
    space: Space<'a>,
    /// The file's bytes (`None` for a placed image).
    file: Option<&'a [u8]>,
    phdrs: &'a [Phdr],
    e_flags: u32,
    abi_version: u8,
    target: TargetId,
}

/// Checks the ELF header of `data` and returns it with its program headers.
fn header(data: &[u8]) -> Result<(&Header, &[Phdr])> {
    let (hdr, _) = from_bytes::<Header>(data).map_err(|()| {
        if data.starts_with(b"\x7fELF") || data.len() < 4 {
            Error::Truncated("ELF header")
        } else {
            Error::NotElf
        }
    })?;
    let id = &hdr.e_ident;
    if id.magic != object::elf::ELFMAG || id.class != object::elf::ELFCLASS64 || id.data != object::elf::ELFDATA2LSB {
        return Err(Error::NotElf);
    }
    if hdr.e_machine.get(LE) != EM_AMDGPU {
        return Err(Error::NotAmdgpu);
    }
    if id.os_abi != ELFOSABI_AMDGPU_HSA {
        return Err(Error::NotHsa);
    }
    if !(1..=4).contains(&id.abi_version) {
        return Err(Error::Version(id.abi_version));
    }
    if hdr.e_type.get(LE) != ET_DYN {
        return Err(Error::NotLoadable);
    }
    let (phoff, phnum, phentsize) = (hdr.e_phoff.get(LE), hdr.e_phnum.get(LE), usize::from(hdr.e_phentsize.get(LE)));
    if phnum == 0 {
        return Err(Error::Malformed("no program headers"));
    }
    if phentsize != core::mem::size_of::<Phdr>() {
        return Err(Error::Malformed("program header entries are not ELF64's size"));
    }
    let table = usize::try_from(phoff).ok().and_then(|o| data.get(o..)).ok_or(Error::Truncated("program headers"))?;
    let (phdrs, _) =
        slice_from_bytes::<Phdr>(table, usize::from(phnum)).map_err(|()| Error::Truncated("program headers"))?;
    Ok((hdr, phdrs))
}

impl<'a> CodeObject<'a> {
    /// Checks an AMDHSA code object file: ELF64 little-endian, `EM_AMDGPU`,
    /// `ELFOSABI_AMDGPU_HSA`, code object v3 to v6, a shared object, a processor this crate
    /// knows, every `PT_LOAD` segment inside the file and the image within
    /// [`MAX_IMAGE_BYTES`].
    pub fn parse(data: &'a [u8]) -> Result<CodeObject<'a>> {
        let (hdr, phdrs) = header(data)?;
        let mut any_load = false;
        for ph in phdrs.iter().filter(|p| p.p_type.get(LE) == PT_LOAD) {
            any_load = true;
            let (off, filesz, memsz) = (ph.p_offset.get(LE), ph.p_filesz.get(LE), ph.p_memsz.get(LE));
            let end = off.checked_add(filesz).ok_or(Error::Malformed("segment end overflows"))?;
            if end > data.len() as u64 {
                return Err(Error::Truncated("a loadable segment"));
            }
            if memsz < filesz {
                return Err(Error::Malformed("a segment's memory size is below its file size"));
            }
            let vend = ph.p_vaddr.get(LE).checked_add(memsz).ok_or(Error::Malformed("segment end overflows"))?;
            if vend > MAX_IMAGE_BYTES {
                return Err(Error::Malformed("the image would exceed 1 GiB"));
            }
        }
        if !any_load {
            return Err(Error::Malformed("no loadable segment"));
        }
        let (e_flags, abi_version) = (hdr.e_flags.get(LE), hdr.e_ident.abi_version);
        let target = TargetId::from_e_flags(e_flags, abi_version).ok_or(Error::Malformed("unknown EF_AMDGPU_MACH"))?;
        Ok(CodeObject { space: Space::File { data, phdrs }, file: Some(data), phdrs, e_flags, abi_version, target })
    }

    /// Reads an image a loader placed (segments at their `p_vaddr` from the image's start, as
    /// [`CodeObject::place`] lays them out): the header and tables are read from the image
    /// itself.
    pub fn from_image(image: &'a [u8]) -> Result<CodeObject<'a>> {
        let (hdr, phdrs) = header(image)?;
        let (e_flags, abi_version) = (hdr.e_flags.get(LE), hdr.e_ident.abi_version);
        let target = TargetId::from_e_flags(e_flags, abi_version).ok_or(Error::Malformed("unknown EF_AMDGPU_MACH"))?;
        Ok(CodeObject { space: Space::Image(image), file: None, phdrs, e_flags, abi_version, target })
    }

    /// The target the code object is built for.
    pub fn target(&self) -> TargetId {
        self.target
    }

    /// `e_flags`.
    pub fn e_flags(&self) -> u32 {
        self.e_flags
    }

    /// The code-object version (3 to 6).
    pub fn version(&self) -> u8 {
        self.abi_version + 2
    }

    /// Bytes the loaded image spans: the end of the highest `PT_LOAD` segment in memory,
    /// rounded up to a page.
    pub fn image_size(&self) -> u64 {
        let end = self.loads().map(|p| p.p_vaddr.get(LE).saturating_add(p.p_memsz.get(LE))).max().unwrap_or(0);
        end.div_ceil(PAGE) * PAGE
    }

    /// The image bytes, from its start, that reading a placed image needs: up to the end of the
    /// last read-only `PT_LOAD` segment (headers, symbol and hash tables, strings, descriptors,
    /// code), of `PT_DYNAMIC` and of `PT_NOTE`, whichever is last. lld gives the writable data
    /// (device variables) segments of their own past these, so a loader can read this prefix of
    /// an image whose variables the device or the host are writing.
    pub fn tables_end(&self) -> u64 {
        self.phdrs
            .iter()
            .filter(|p| match p.p_type.get(LE) {
                PT_LOAD => p.p_flags.get(LE) & object::elf::PF_W == 0,
                PT_DYNAMIC | PT_NOTE => true,
                _ => false,
            })
            .map(|p| p.p_vaddr.get(LE).saturating_add(p.p_filesz.get(LE)))
            .max()
            .unwrap_or(0)
            .min(self.image_size())
    }

    fn loads(&self) -> impl Iterator<Item = &'a Phdr> + 'a {
        self.phdrs.iter().filter(|p| p.p_type.get(LE) == PT_LOAD)
    }

    /// Places the code object into `image` (the CPU view of device memory at `base`, at least
    /// [`image_size`](CodeObject::image_size) bytes): zeroes it, copies every `PT_LOAD`
    /// segment to its `p_vaddr` (the rest of `p_memsz` stays zero) and applies the dynamic
    /// relocations for load address `base`.
    pub fn place(&self, image: &mut [u8], base: u64) -> Result<()> {
        let Some(data) = self.file else { return Err(Error::Malformed("a placed image cannot be placed again")) };
        if (image.len() as u64) < self.image_size() {
            return Err(Error::ImageTooSmall);
        }
        image.fill(0);
        for ph in self.loads() {
            // Checked by `parse`: the segment is inside the file and the image.
            let (off, filesz, vaddr) =
                (ph.p_offset.get(LE) as usize, ph.p_filesz.get(LE) as usize, ph.p_vaddr.get(LE) as usize);
            let src = data.get(off..off + filesz).ok_or(Error::Truncated("a loadable segment"))?;
            image.get_mut(vaddr..vaddr + filesz).ok_or(Error::ImageTooSmall)?.copy_from_slice(src);
        }
        let dynamic = self.dynamic()?;
        let Some((rela, size)) = dynamic.rela else { return Ok(()) };
        let symbols = self.symbols()?;
        let table = self.space.at(rela, size).ok_or(Error::Truncated("relocation table"))?;
        let (relas, _) = slice_from_bytes::<Rela64<LE>>(table, (size / RELA_SIZE) as usize)
            .map_err(|()| Error::Truncated("relocation table"))?;
        for r in relas {
            let info = r.r_info.get(LE);
            let (sym, kind) = ((info >> 32) as u32, info as u32);
            let addend = r.r_addend.get(LE);
            let value = match kind {
                R_AMDGPU_NONE => continue,
                R_AMDGPU_RELATIVE64 => base.wrapping_add_signed(addend),
                R_AMDGPU_ABS64 => {
                    let s = symbols.get(sym).ok_or(Error::Malformed("a relocation names no symbol"))?;
                    let resolved = if s.defined {
                        base.wrapping_add(s.value)
                    } else if s.weak {
                        0
                    } else {
                        return Err(Error::Malformed("a relocation refers to an undefined symbol"));
                    };
                    resolved.wrapping_add_signed(addend)
                }
                t => return Err(Error::Relocation(t)),
            };
            let at =
                usize::try_from(r.r_offset.get(LE)).map_err(|_| Error::Malformed("relocation outside the image"))?;
            let slot = image
                .get_mut(at..at.saturating_add(8))
                .filter(|s| s.len() == 8)
                .ok_or(Error::Malformed("relocation outside the image"))?;
            slot.copy_from_slice(&value.to_le_bytes());
        }
        Ok(())
    }

    /// The `PT_DYNAMIC` facts.
    fn dynamic(&self) -> Result<Dynamic> {
        let ph = self
            .phdrs
            .iter()
            .find(|p| p.p_type.get(LE) == PT_DYNAMIC)
            .ok_or(Error::Malformed("no PT_DYNAMIC segment"))?;
        let bytes =
            self.space.at(ph.p_vaddr.get(LE), ph.p_filesz.get(LE)).ok_or(Error::Truncated("dynamic section"))?;
        let (entries, _) =
            slice_from_bytes::<Dyn64<LE>>(bytes, bytes.len() / 16).map_err(|()| Error::Truncated("dynamic section"))?;
        let mut d = Dynamic::default();
        let (mut rela, mut relasz, mut relaent) = (None, 0, RELA_SIZE);
        for e in entries {
            let (tag, val) = (e.d_tag.get(LE), e.d_val.get(LE));
            match tag {
                DT_NULL => break,
                DT_HASH => d.hash = Some(val),
                DT_GNU_HASH => d.gnu_hash = Some(val),
                DT_STRTAB => d.strtab = Some(val),
                DT_STRSZ => d.strsz = val,
                DT_SYMTAB => d.symtab = Some(val),
                DT_SYMENT if val != SYM_SIZE => return Err(Error::Malformed("DT_SYMENT is not 24")),
                DT_RELA => rela = Some(val),
                DT_RELASZ => relasz = val,
                DT_RELAENT => relaent = val,
                _ => {}
            }
        }
        if rela.is_some() && relaent != RELA_SIZE {
            return Err(Error::Malformed("DT_RELAENT is not 24"));
        }
        d.rela = rela.map(|r| (r, relasz));
        Ok(d)
    }

    /// The dynamic symbol table, found by name through the ELF's own hash table.
    pub fn symbols(&self) -> Result<Symbols<'a>> {
        let d = self.dynamic()?;
        let symtab = d.symtab.ok_or(Error::Malformed("no DT_SYMTAB"))?;
        let strtab = d.strtab.ok_or(Error::Malformed("no DT_STRTAB"))?;
        let strings = self.space.at(strtab, d.strsz).ok_or(Error::Truncated("dynamic string table"))?;
        let table = self.space.from(symtab).ok_or(Error::Truncated("dynamic symbol table"))?;
        let hash = match (d.hash, d.gnu_hash) {
            (Some(h), _) => Hash::sysv(self.space.from(h).ok_or(Error::Truncated("hash table"))?)?,
            (None, Some(h)) => Hash::gnu(self.space.from(h).ok_or(Error::Truncated("GNU hash table"))?)?,
            (None, None) => return Err(Error::Malformed("no DT_HASH or DT_GNU_HASH")),
        };
        let count = hash.symbol_count();
        let max = table.len() / SYM_SIZE as usize;
        if count as usize > max {
            return Err(Error::Truncated("dynamic symbol table"));
        }
        let (syms, _) = slice_from_bytes::<Sym64<LE>>(table, count as usize)
            .map_err(|()| Error::Truncated("dynamic symbol table"))?;
        Ok(Symbols { syms, strings, hash })
    }

    /// The kernel named `name` (its descriptor is the symbol `<name>.kd`).
    pub fn kernel(&self, name: &str) -> Result<Option<Kernel<'a>>> {
        let symbols = self.symbols()?;
        let Some(sym) = symbols.find(&[name.as_bytes(), DESCRIPTOR_SUFFIX.as_bytes()]) else { return Ok(None) };
        self.kernel_of(sym).map(Some)
    }

    fn kernel_of(&self, sym: Symbol<'a>) -> Result<Kernel<'a>> {
        let name = sym.name.strip_suffix(DESCRIPTOR_SUFFIX).unwrap_or(sym.name);
        let bytes = self.space.at(sym.value, 64).ok_or(Error::Truncated("kernel descriptor"))?;
        let descriptor = KernelDescriptor::from_bytes(bytes)?;
        Ok(Kernel { name, descriptor_address: sym.value, descriptor })
    }

    /// Every kernel, in symbol-table order.
    pub fn kernels(&self) -> Result<impl Iterator<Item = Result<Kernel<'a>>> + 'a> {
        let symbols = self.symbols()?;
        let this = *self;
        Ok(symbols
            .iter()
            .filter(|s| s.defined && s.kind == SymbolKind::Object && s.name.ends_with(DESCRIPTOR_SUFFIX))
            .map(move |s| this.kernel_of(s)))
    }

    /// The device variables: defined data symbols other than kernel descriptors.
    pub fn variables(&self) -> Result<impl Iterator<Item = Symbol<'a>> + 'a> {
        Ok(self
            .symbols()?
            .iter()
            .filter(|s| s.defined && s.kind == SymbolKind::Object && !s.name.ends_with(DESCRIPTOR_SUFFIX)))
    }

    /// `len` bytes of the loaded image at `addr` (relative to the load base), where the file
    /// (or image) backs them: machine code at a kernel's entry point, a descriptor.
    pub fn bytes_at(&self, addr: u64, len: u64) -> Option<&'a [u8]> {
        self.space.at(addr, len)
    }

    /// The bytes from `addr` to the end of the segment (or image) that backs it.
    pub fn bytes_from(&self, addr: u64) -> Option<&'a [u8]> {
        self.space.from(addr)
    }

    /// The `NT_AMDGPU_METADATA` note's MessagePack bytes, if the code object has one.
    pub fn metadata_note(&self) -> Result<Option<&'a [u8]>> {
        for ph in self.phdrs.iter().filter(|p| p.p_type.get(LE) == PT_NOTE) {
            let (vaddr, off, size) = (ph.p_vaddr.get(LE), ph.p_offset.get(LE), ph.p_filesz.get(LE));
            let bytes = match (self.space, self.file) {
                (Space::File { .. }, Some(data)) => usize::try_from(off)
                    .ok()
                    .zip(usize::try_from(off.saturating_add(size)).ok())
                    .and_then(|(a, b)| data.get(a..b)),
                _ => self.space.at(vaddr, size),
            }
            .ok_or(Error::Truncated("note segment"))?;
            if let Some(desc) = find_note(bytes, b"AMDGPU", NT_AMDGPU_METADATA)? {
                return Ok(Some(desc));
            }
        }
        Ok(None)
    }

    /// The metadata note, parsed and checked; `None` if the code object has none.
    pub fn metadata(&self) -> Result<Option<Metadata<'a>>> {
        self.metadata_note()?.map(Metadata::parse).transpose()
    }
}

/// The descriptor of note `name`/`kind` in a note segment.
fn find_note<'a>(mut notes: &'a [u8], name: &[u8], kind: u32) -> Result<Option<&'a [u8]>> {
    while notes.len() >= 12 {
        let (namesz, descsz, n_type) = match (u32_at(notes, 0), u32_at(notes, 4), u32_at(notes, 8)) {
            (Some(a), Some(b), Some(c)) => (a as usize, b as usize, c),
            _ => return Err(Error::Truncated("note header")),
        };
        let name_end = 12usize.checked_add(namesz).ok_or(Error::Truncated("note"))?;
        let desc_at = name_end.checked_next_multiple_of(4).ok_or(Error::Truncated("note"))?;
        let desc_end = desc_at.checked_add(descsz).ok_or(Error::Truncated("note"))?;
        let n = notes.get(12..name_end).ok_or(Error::Truncated("note name"))?;
        let desc = notes.get(desc_at..desc_end).ok_or(Error::Truncated("note descriptor"))?;
        let owner = n.strip_suffix(b"\0").unwrap_or(n);
        if owner == name && n_type == kind {
            return Ok(Some(desc));
        }
        notes = notes.get(desc_end.checked_next_multiple_of(4).unwrap_or(usize::MAX)..).unwrap_or(&[]);
    }
    Ok(None)
}

#[derive(Debug, Default)]
struct Dynamic {
    symtab: Option<u64>,
    strtab: Option<u64>,
    strsz: u64,
    hash: Option<u64>,
    gnu_hash: Option<u64>,
    rela: Option<(u64, u64)>,
}

/// The hash section a symbol is looked up through.
#[derive(Debug, Clone, Copy)]
enum Hash<'a> {
    /// `DT_HASH`: bucket and chain arrays.
    SysV { buckets: &'a [u8], chains: &'a [u8], nbucket: u32, nchain: u32 },
    /// `DT_GNU_HASH`: buckets and hash values from `symoffset` on.
    Gnu { buckets: &'a [u8], values: &'a [u8], nbucket: u32, symoffset: u32, count: u32 },
}

fn sysv_hash(parts: &[&[u8]]) -> u32 {
    let mut h: u32 = 0;
    for &c in parts.iter().flat_map(|p| p.iter()) {
        h = (h << 4).wrapping_add(u32::from(c));
        let g = h & 0xf000_0000;
        if g != 0 {
            h ^= g >> 24;
        }
        h &= !g;
    }
    h
}

fn gnu_hash(parts: &[&[u8]]) -> u32 {
    parts.iter().flat_map(|p| p.iter()).fold(5381u32, |h, &c| h.wrapping_mul(33).wrapping_add(u32::from(c)))
}

impl<'a> Hash<'a> {
    fn sysv(t: &'a [u8]) -> Result<Hash<'a>> {
        let (nbucket, nchain) = u32_at(t, 0).zip(u32_at(t, 4)).ok_or(Error::Truncated("hash table"))?;
        let b_end = 8 + nbucket as usize * 4;
        let c_end = b_end.checked_add(nchain as usize * 4).ok_or(Error::Truncated("hash table"))?;
        let buckets = t.get(8..b_end).ok_or(Error::Truncated("hash table"))?;
        let chains = t.get(b_end..c_end).ok_or(Error::Truncated("hash table"))?;
        if nbucket == 0 && nchain > 1 {
            return Err(Error::Malformed("a hash table without buckets"));
        }
        Ok(Hash::SysV { buckets, chains, nbucket, nchain })
    }

    fn gnu(t: &'a [u8]) -> Result<Hash<'a>> {
        let fields = (u32_at(t, 0), u32_at(t, 4), u32_at(t, 8));
        let (Some(nbucket), Some(symoffset), Some(bloom)) = fields else {
            return Err(Error::Truncated("GNU hash table"));
        };
        let b_at = 16usize.checked_add(bloom as usize * 8).ok_or(Error::Truncated("GNU hash table"))?;
        let b_end = b_at.checked_add(nbucket as usize * 4).ok_or(Error::Truncated("GNU hash table"))?;
        let buckets = t.get(b_at..b_end).ok_or(Error::Truncated("GNU hash table"))?;
        let values = t.get(b_end..).unwrap_or(&[]);
        // The symbol count: past the highest bucket's chain, which ends at a value with bit 0.
        let highest = (0..nbucket as usize).filter_map(|i| u32_at(buckets, i * 4)).max().unwrap_or(0);
        let count = if highest < symoffset {
            symoffset
        } else {
            let mut i = highest;
            loop {
                let v = u32_at(values, (i - symoffset) as usize * 4).ok_or(Error::Truncated("GNU hash chain"))?;
                if v & 1 == 1 {
                    break i + 1;
                }
                i = i.checked_add(1).ok_or(Error::Malformed("GNU hash chain"))?;
            }
        };
        Ok(Hash::Gnu { buckets, values, nbucket, symoffset, count })
    }

    fn symbol_count(&self) -> u32 {
        match *self {
            Hash::SysV { nchain, .. } => nchain,
            Hash::Gnu { count, .. } => count,
        }
    }
}

/// A dynamic symbol table with its hash.
#[derive(Debug, Clone, Copy)]
pub struct Symbols<'a> {
    syms: &'a [Sym64<LE>],
    strings: &'a [u8],
    hash: Hash<'a>,
}

/// What a symbol names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SymbolKind {
    /// `STT_OBJECT`: data, kernel descriptors.
    Object,
    /// `STT_FUNC`.
    Func,
    /// Anything else.
    Other,
}

/// One dynamic symbol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Symbol<'a> {
    /// Its name.
    pub name: &'a str,
    /// `st_value`: its address relative to the load base.
    pub value: u64,
    /// `st_size`.
    pub size: u64,
    /// `STT_*`.
    pub kind: SymbolKind,
    /// Defined in this object (`st_shndx` is not `SHN_UNDEF`).
    pub defined: bool,
    /// `STB_WEAK`.
    pub weak: bool,
}

impl<'a> Symbols<'a> {
    /// Number of entries (including the null symbol 0).
    pub fn len(&self) -> usize {
        self.syms.len()
    }

    /// Whether the table holds only the null symbol.
    pub fn is_empty(&self) -> bool {
        self.syms.len() <= 1
    }

    /// Symbol `index`; `None` out of range or for a name outside the string table.
    pub fn get(&self, index: u32) -> Option<Symbol<'a>> {
        let s = self.syms.get(index as usize)?;
        let at = s.st_name.get(LE) as usize;
        let rest = self.strings.get(at..)?;
        let len = rest.iter().position(|&b| b == 0)?;
        let name = core::str::from_utf8(rest.get(..len)?).ok()?;
        let kind = match s.st_info & 0xf {
            STT_OBJECT => SymbolKind::Object,
            STT_FUNC => SymbolKind::Func,
            _ => SymbolKind::Other,
        };
        Some(Symbol {
            name,
            value: s.st_value.get(LE),
            size: s.st_size.get(LE),
            kind,
            defined: s.st_shndx.get(LE) != 0,
            weak: s.st_info >> 4 == STB_WEAK,
        })
    }

    /// Every symbol but the null one, in table order (entries whose name is not readable are
    /// skipped).
    pub fn iter(&self) -> impl Iterator<Item = Symbol<'a>> + 'a {
        let this = *self;
        (1..self.syms.len() as u32).filter_map(move |i| this.get(i))
    }

    /// The symbol named by the concatenation of `parts`, through the hash table.
    pub fn find(&self, parts: &[&[u8]]) -> Option<Symbol<'a>> {
        let matches = |i: u32| {
            let s = self.get(i)?;
            let mut rest = s.name.as_bytes();
            for p in parts {
                rest = rest.strip_prefix(*p)?;
            }
            rest.is_empty().then_some(s)
        };
        match self.hash {
            Hash::SysV { buckets, chains, nbucket, nchain } => {
                if nbucket == 0 {
                    return None;
                }
                let h = sysv_hash(parts);
                let mut i = u32_at(buckets, (h % nbucket) as usize * 4)?;
                // A hostile chain may loop: never take more steps than there are symbols.
                for _ in 0..nchain {
                    if i == 0 {
                        return None;
                    }
                    if let Some(s) = matches(i) {
                        return Some(s);
                    }
                    i = u32_at(chains, i as usize * 4)?;
                }
                None
            }
            Hash::Gnu { buckets, values, nbucket, symoffset, count } => {
                if nbucket == 0 {
                    return None;
                }
                let h = gnu_hash(parts);
                let mut i = u32_at(buckets, (h % nbucket) as usize * 4)?;
                if i < symoffset {
                    return None;
                }
                while i < count {
                    let v = u32_at(values, (i - symoffset) as usize * 4)?;
                    if v | 1 == h | 1 {
                        if let Some(s) = matches(i) {
                            return Some(s);
                        }
                    }
                    if v & 1 == 1 {
                        return None;
                    }
                    i += 1;
                }
                None
            }
        }
    }

    /// The symbol named `name`.
    pub fn by_name(&self, name: &str) -> Option<Symbol<'a>> {
        self.find(&[name.as_bytes()])
    }
}

/// One kernel of a code object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kernel<'a> {
    /// The kernel's symbol name without `.kd`.
    pub name: &'a str,
    /// Address of the descriptor relative to the load base: the kernel object is
    /// `base + descriptor_address`.
    pub descriptor_address: u64,
    /// The descriptor, decoded.
    pub descriptor: KernelDescriptor,
}

impl Kernel<'_> {
    /// Address of the first instruction relative to the load base.
    pub fn entry_address(&self) -> u64 {
        self.descriptor_address.wrapping_add_signed(self.descriptor.kernel_code_entry_byte_offset)
    }
}

/// The size of the ELF file read through `read(offset, len)` (which answers `None` past what
/// it knows) from its header tables: the largest end of the file header, the program and
/// section header tables, every segment's and every section's file bytes. For a code object
/// known only by its address (`hipModuleLoadData` receives no size): every sum is checked, a
/// table entry smaller than its ELF64 record is refused, and nothing is read before the bytes
/// that announce it have been checked.
pub fn extent<'a>(read: impl Fn(usize, usize) -> Option<&'a [u8]>) -> Result<usize> {
    let magic = read(0, 4).ok_or(Error::Truncated("ELF header"))?;
    if magic != b"\x7fELF" {
        return Err(Error::NotElf);
    }
    let hdr = read(0, 64).ok_or(Error::Truncated("ELF header"))?;
    if hdr.get(4) != Some(&2) {
        return Err(Error::NotElf);
    }
    let u64_at = |b: &[u8], o: usize| b.get(o..o + 8).and_then(|b| b.try_into().ok()).map_or(0, u64::from_le_bytes);
    let u16_at = |b: &[u8], o: usize| b.get(o..o + 2).and_then(|b| b.try_into().ok()).map_or(0, u16::from_le_bytes);
    let (phoff, shoff) = (u64_at(hdr, 0x20), u64_at(hdr, 0x28));
    let (phentsize, phnum) = (u64::from(u16_at(hdr, 0x36)), u64::from(u16_at(hdr, 0x38)));
    let (shentsize, shnum) = (u64::from(u16_at(hdr, 0x3a)), u64::from(u16_at(hdr, 0x3c)));
    if (phnum > 0 && phentsize < 56) || (shnum > 0 && shentsize < 64) {
        return Err(Error::Malformed("header table entries smaller than ELF64's"));
    }
    let end_of = |off: u64, n: u64, len: u64| -> Result<u64> {
        n.checked_mul(len)
            .and_then(|bytes| off.checked_add(bytes))
            .filter(|&end| end <= isize::MAX as u64)
            .ok_or(Error::Malformed("a table or range end overflows"))
    };
    let (ph_end, sh_end) = (end_of(phoff, phnum, phentsize)?, end_of(shoff, shnum, shentsize)?);
    let mut end = 64u64.max(ph_end).max(sh_end);
    let table = |off: u64, table_end: u64| -> Result<&'a [u8]> {
        if table_end == off {
            return Ok(&[]);
        }
        read(off as usize, (table_end - off) as usize).ok_or(Error::Truncated("header table"))
    };
    for ph in table(phoff, ph_end)?.chunks_exact(phentsize.max(1) as usize) {
        end = end.max(end_of(u64_at(ph, 8), 1, u64_at(ph, 32))?);
    }
    for sh in table(shoff, sh_end)?.chunks_exact(shentsize.max(1) as usize) {
        // SHT_NOBITS (8) sections occupy no file bytes.
        if sh.get(4..8) != Some(&8u32.to_le_bytes()[..]) {
            end = end.max(end_of(u64_at(sh, 0x18), 1, u64_at(sh, 0x20))?);
        }
    }
    usize::try_from(end).map_err(|_| Error::Malformed("the file does not fit the address space"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_the_elf_ones() {
        // Values from the System V ABI and the GNU hash's definition.
        assert_eq!(sysv_hash(&[b""]), 0);
        assert_eq!(sysv_hash(&[b"printf"]), 0x077905a6);
        assert_eq!(sysv_hash(&[b"pri", b"ntf"]), 0x077905a6);
        assert_eq!(gnu_hash(&[b""]), 5381);
        assert_eq!(gnu_hash(&[b"printf"]), 0x156b2bb8);
    }

    #[test]
    fn garbage_is_refused() {
        assert_eq!(CodeObject::parse(b"").unwrap_err(), Error::Truncated("ELF header"));
        assert_eq!(CodeObject::parse(&[0u8; 64]).unwrap_err(), Error::NotElf);
        let mut h = [0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 2;
        h[5] = 1;
        h[18] = 62; // x86-64
        assert_eq!(CodeObject::parse(&h).unwrap_err(), Error::NotAmdgpu);
        h[18] = 224;
        assert_eq!(CodeObject::parse(&h).unwrap_err(), Error::NotHsa);
        h[7] = 64;
        assert_eq!(CodeObject::parse(&h).unwrap_err(), Error::Version(0));
        h[8] = 2;
        assert_eq!(CodeObject::parse(&h).unwrap_err(), Error::NotLoadable);
        h[16] = 3;
        assert_eq!(CodeObject::parse(&h).unwrap_err(), Error::Malformed("no program headers"));
        assert_eq!(extent(|o, l| h.get(o..o + l)), Ok(64));
    }
}
