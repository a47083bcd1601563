//! # amdhsa — AMDHSA code objects, read in one place
//!
//! The only reader of AMD GPU code objects in aqueduct: kfd-direct's loader, the emulated GPU,
//! the ROCr backend and the HIP library all use it (docs/code-objects.md). `no_std`, no
//! allocation: every reader borrows the caller's bytes and answers an [`Error`] for bad or
//! hostile input, never a panic.
//!
//! ## Layers, from the outside in
//!
//! - [`bundle`]: clang offload bundles — the container hipcc places a translation unit's code
//!   objects in — and the several bundles of a linked `.hip_fatbin` section.
//! - [`target`]: target ids (`amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-`), the processor table
//!   and the matching rule that picks a bundle entry for a device.
//! - [`elf`]: the code object itself — header checks, the loaded image and its relocations,
//!   dynamic symbols found through the ELF's own hash table, kernels and variables — read
//!   through the program headers the way a dynamic loader reads it, so the same code reads a
//!   file and an image already placed in device memory.
//! - [`descriptor`]: the 64-byte kernel descriptor, every field decoded, and the initial SGPR
//!   layout it asks for.
//! - [`metadata`]: the `NT_AMDGPU_METADATA` MessagePack note (through `rmp`): per kernel its
//!   argument layout, sizes and limits.
//! - [`hidden`]: the hidden kernel arguments a launch fills from its geometry and queue.
//!
//! ## Who validates what
//!
//! Parsing checks structure (bounds, overflow, types) once; accessors after that cannot fail.
//! Whether a code object suits a device ([`target::TargetId::runs_on`]) is the caller's
//! question; so is where its image lives.

#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod bundle;
pub mod descriptor;
pub mod elf;
mod error;
pub mod hidden;
pub mod metadata;
pub mod target;

pub use bundle::{Bundle, Bundles};
pub use descriptor::KernelDescriptor;
pub use elf::{CodeObject, Kernel, Symbol, SymbolKind, Symbols};
pub use error::{Error, Result};
pub use hidden::{HiddenArg, LaunchValues};
pub use metadata::{Arg, KernelMeta, Metadata, ValueKind};
pub use target::{Processor, Setting, TargetId};
