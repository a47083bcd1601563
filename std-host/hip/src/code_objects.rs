//! The one table of loaded code, as data: modules (code objects loaded on a device), the
//! functions found in them, host kernels, and what a kernel's metadata note says (argument
//! layout, hidden arguments, resources; docs/code-objects.md §6–7).
//!
//! [`crate::global::Global`] holds the tables; [`crate::module`] loads and unloads modules and
//! finds their functions, [`crate::register`] loads them for registered fat binaries, and
//! [`crate::launch`] resolves kernel handles to these entries. This module depends on none of
//! them, so the state can name its types without an import cycle.

use std::collections::HashMap;
use std::sync::Arc;

use amdhsa::HiddenArg;

/// A registered host kernel.
pub(crate) struct HostKernel {
    pub(crate) object: u64,
    /// (offset, size) of each argument in the kernel-argument segment.
    pub(crate) args: Vec<(usize, usize)>,
    pub(crate) kernarg_size: usize,
}

/// The explicit arguments of a kernel: (offset, size) of each in the kernel-argument segment.
pub(crate) type ArgLayout = Vec<(usize, usize)>;

/// A loaded module: core's handle, what the code object's metadata note says of each kernel,
/// and where the image lies in device memory.
pub(crate) struct ModuleEntry {
    pub(crate) handle: aqueduct::ModuleHandle,
    /// By kernel name; `None` when the note is missing or cannot be parsed.
    pub(crate) kernels: Option<HashMap<String, KernelMeta>>,
    /// Where the image sits in device memory (base, bytes); `None` where the backend does not
    /// say (ROCr).
    pub(crate) image: Option<(u64, u64)>,
}

/// What a kernel's metadata entry says, kept from the note (docs/code-objects.md §6).
#[derive(Debug, Clone)]
pub(crate) struct KernelMeta {
    pub(crate) args: ArgLayout,
    pub(crate) hidden: Arc<[HiddenArg]>,
    pub(crate) resources: Resources,
}

/// A function of a module.
#[derive(Clone)]
pub(crate) struct FunctionEntry {
    /// The kernel's symbol name (`hipKernelNameRef`).
    pub(crate) name: Arc<str>,
    pub(crate) module: usize,
    pub(crate) object: u64,
    pub(crate) group: u32,
    /// The descriptor's fixed private segment per work-item.
    pub(crate) private: u32,
    /// The kernel needs a dynamic stack.
    pub(crate) dynamic_stack: bool,
    pub(crate) kernarg_size: usize,
    /// `None`: the metadata does not describe this kernel, so `kernelParams` cannot be laid out.
    pub(crate) args: Option<ArgLayout>,
    /// The hidden arguments a launch fills (docs/code-objects.md §7).
    pub(crate) hidden: Arc<[HiddenArg]>,
    /// Registers and limits from the metadata (`None` when it does not describe the kernel).
    pub(crate) resources: Option<Resources>,
}

/// What a kernel uses and allows, from its metadata entry (code object v3+).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Resources {
    /// `.vgpr_count`.
    pub(crate) vgprs: u32,
    /// `.sgpr_count`.
    pub(crate) sgprs: u32,
    /// `.max_flat_workgroup_size`.
    pub(crate) max_threads: u32,
    /// `.wavefront_size`.
    pub(crate) wavefront: u32,
}

/// What the metadata note of `elf` says of every kernel; `None` without a readable note.
pub(crate) fn kernel_metadata(elf: &[u8]) -> Option<HashMap<String, KernelMeta>> {
    let co = amdhsa::CodeObject::parse(elf).ok()?;
    let meta = co.metadata().ok()??;
    Some(
        meta.kernels()
            .map(|k| {
                let args = k.explicit_args().map(|a| (a.offset as usize, a.size as usize)).collect();
                let hidden = k.hidden_args().map(HiddenArg::from).collect();
                let resources = Resources {
                    vgprs: k.vgpr_count,
                    sgprs: k.sgpr_count,
                    max_threads: k.max_flat_workgroup_size,
                    wavefront: k.wavefront_size,
                };
                (k.name.to_owned(), KernelMeta { args, hidden, resources })
            })
            .collect(),
    )
}
