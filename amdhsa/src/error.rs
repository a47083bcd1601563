//! Why bytes are not a usable code object, bundle or metadata note.

use core::fmt;

/// What is wrong with the input. Every reader of this crate answers one of these for bad or
/// hostile bytes; none panics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Error {
    /// The bytes end before the named structure does.
    Truncated(&'static str),
    /// Not an ELF64 little-endian file.
    NotElf,
    /// An ELF file for another machine (`e_machine` is not `EM_AMDGPU`).
    NotAmdgpu,
    /// An AMDGPU ELF for another OS ABI (not `ELFOSABI_AMDGPU_HSA`, e.g. Mesa's PAL).
    NotHsa,
    /// A code-object version this crate does not read (the value is the ELF's
    /// `EI_ABIVERSION`; v2's `amd_kernel_code_t` objects are refused, as HIP refuses them).
    Version(u8),
    /// A relocatable object or an executable where a shared object (`ET_DYN`) is required.
    NotLoadable,
    /// An inconsistency in the ELF structures, named.
    Malformed(&'static str),
    /// A dynamic relocation type the loader does not apply (lld resolves every other type in
    /// a shared code object).
    Relocation(u32),
    /// The image buffer given to the loader is smaller than the image.
    ImageTooSmall,
    /// The `NT_AMDGPU_METADATA` note is not the MessagePack map it must be; names what is off.
    Metadata(&'static str),
    /// A clang offload bundle whose header is inconsistent; names what is off.
    Bundle(&'static str),
    /// A compressed offload bundle (`CCOB`), which this crate does not inflate.
    Compressed,
    /// A capacity of the caller's buffer ran out (the value names it).
    Capacity(&'static str),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Truncated(what) => write!(f, "the bytes end inside the {what}"),
            Error::NotElf => f.write_str("not an ELF64 little-endian file"),
            Error::NotAmdgpu => f.write_str("not an AMDGPU ELF (e_machine is not EM_AMDGPU)"),
            Error::NotHsa => f.write_str("not an AMDHSA code object (EI_OSABI is not ELFOSABI_AMDGPU_HSA)"),
            Error::Version(v) => write!(f, "code-object ABI version {v} is not supported (v3 to v6 are)"),
            Error::NotLoadable => f.write_str("not a shared object (ET_DYN), so it cannot be loaded"),
            Error::Malformed(what) => write!(f, "malformed ELF: {what}"),
            Error::Relocation(t) => write!(f, "dynamic relocation type {t} is not supported"),
            Error::ImageTooSmall => f.write_str("the image buffer is smaller than the loaded image"),
            Error::Metadata(what) => write!(f, "malformed metadata note: {what}"),
            Error::Bundle(what) => write!(f, "malformed offload bundle: {what}"),
            Error::Compressed => f.write_str("compressed offload bundles (CCOB) are not supported"),
            Error::Capacity(what) => write!(f, "capacity exhausted: {what}"),
        }
    }
}

impl core::error::Error for Error {}

/// A result with this crate's error.
pub type Result<T> = core::result::Result<T, Error>;
