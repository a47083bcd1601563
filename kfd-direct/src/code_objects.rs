//! Code objects on [`Kfd`] (docs/code-objects.md §1, §8): the embedded blit kernels and the
//! backend's code-object role.
//!
//! A loaded code object is one executable GPU buffer holding its placed image (`amdhsa` places
//! and relocates it). Kernels and variables are found by name in the image itself, through the
//! ELF's own hash table, so nothing here is sized by a count of kernels, names or code objects:
//! core's module table holds the [`KfdModule`]s.

use aqueduct::backend::{KernelSymbol, VariableSymbol};

use amdhsa::{CodeObject, Processor, TargetId};

use crate::driver::{Bo, GTT_FLAGS};
use crate::on_drop::OnDrop;
use crate::{Kfd, KfdError, KfdResult, Sys};

/// The names of the blit kernels, in `BuiltinKernel` order.
const BLIT_KERNELS: [&str; 4] = ["aqueduct_copy", "aqueduct_fill", "aqueduct_write_value", "aqueduct_graph_scheduler"];

/// A code object loaded onto a GPU.
#[derive(Debug)]
pub struct KfdModule {
    gpu: u8,
    image: Bo,
    /// Bytes of the image its readers need (`CodeObject::tables_end`): headers, symbol tables,
    /// the note, descriptors and code, never written once placed.
    tables: u64,
}

impl KfdModule {
    /// The GPU VA of the loaded image.
    pub fn base(&self) -> u64 {
        self.image.va
    }

    /// The device index.
    pub fn device(&self) -> u32 {
        u32::from(self.gpu)
    }

    /// The image's GPU VA and its buffer's size.
    pub fn image_range(&self) -> (u64, u64) {
        (self.image.va, self.image.size)
    }
}

impl<S: Sys> Kfd<S> {
    pub(crate) fn load_blit(&mut self, gpu: usize) -> KfdResult<()> {
        let Some(g) = self.gpus.get(gpu) else { return Err(KfdError::InvalidDevice) };
        let Some(elf) = blit_code_object(g.node.props.gfx_target_version) else { return Ok(()) };
        let m = self.load_module(gpu as u32, elf)?;
        let mut blit = [0u64; 4];
        for (slot, name) in blit.iter_mut().zip(BLIT_KERNELS) {
            match self.kernel_of(&m, name) {
                Ok(k) => *slot = k.kernel_object,
                Err(e) => {
                    let _ = self.free_bo(&m.image);
                    return Err(e);
                }
            }
        }
        if let Some(g) = self.gpus.get_mut(gpu) {
            g.blit = blit;
            g.blit_image = Some(m.image);
        }
        Ok(())
    }

    /// Loads an AMDHSA code object onto `device`: checks it is one and built for the device,
    /// places its segments in one executable GPU buffer and applies its relocations.
    pub fn load_module(&self, device: u32, elf: &[u8]) -> KfdResult<KfdModule> {
        self.check_process()?;
        let gpu = self.gpus.get(device as usize).ok_or(KfdError::InvalidDevice)?;
        let co = CodeObject::parse(elf).map_err(KfdError::CodeObject)?;
        let processor =
            Processor::from_gfx_target_version(gpu.node.props.gfx_target_version).ok_or(KfdError::WrongTarget)?;
        // kfd-direct queues run without XNACK (no retried page faults).
        if !co.target().runs_on(&TargetId::device(processor, false)) {
            return Err(KfdError::WrongTarget);
        }
        let size = co.image_size();
        let bo = self.alloc_bo(device as usize, size, GTT_FLAGS, true)?;
        let release = OnDrop::new(|| {
            let _ = self.free_bo(&bo);
        });
        // SAFETY: the buffer is CPU-mapped, at least `size` bytes (`alloc_bo` rounds up), and
        // ours alone until the module is returned.
        let image = unsafe { core::slice::from_raw_parts_mut(bo.ptr::<u8>(0), size as usize) };
        co.place(image, bo.va).map_err(KfdError::CodeObject)?;
        release.defuse();
        self.drv.sys().code_object_loaded(elf);
        Ok(KfdModule { gpu: device as u8, image: bo, tables: co.tables_end() })
    }

    /// The placed image of `m`, as the code-object reader sees it.
    fn view<'m>(&self, m: &'m KfdModule) -> KfdResult<CodeObject<'m>> {
        // SAFETY: the image is CPU-mapped for the module's life (`m` borrows it), and its first
        // `tables` bytes — headers, symbol and hash tables, strings, the note, descriptors and
        // code — are written only by `place`, before the module existed: device variables,
        // which kernels and copies write, lie in the writable segments past them
        // (docs/code-objects.md §1).
        let bytes = unsafe { core::slice::from_raw_parts(m.image.ptr::<u8>(0), m.tables as usize) };
        CodeObject::from_image(bytes).map_err(KfdError::CodeObject)
    }

    /// The kernel `name` of a loaded code object.
    pub fn kernel_of(&self, m: &KfdModule, name: &str) -> KfdResult<KernelSymbol> {
        let co = self.view(m)?;
        let k = co.kernel(name).map_err(KfdError::CodeObject)?.ok_or(KfdError::KernelNotFound)?;
        // A note that cannot be read leaves the descriptor's sizes (the front end then knows no
        // argument layout, and says so at the launch).
        let meta = co.metadata().ok().flatten();
        let meta = meta.as_ref().and_then(|md| md.kernel(name));
        let d = k.descriptor;
        let kernarg_size = meta.map_or(d.kernarg_size, |m| m.kernarg_bytes()).max(d.kernarg_size);
        let kernarg_align = meta.map_or(16, |m| m.kernarg_segment_align).max(16);
        Ok(KernelSymbol {
            kernel_object: m.image.va.wrapping_add(k.descriptor_address),
            group_segment_size: d.group_segment_fixed_size,
            private_segment_size: d.private_segment_fixed_size,
            kernarg_size,
            kernarg_align,
            dynamic_stack: d.uses_dynamic_stack(),
        })
    }

    /// The device variable `name` of a loaded code object.
    pub fn variable_of(&self, m: &KfdModule, name: &str) -> KfdResult<VariableSymbol> {
        let co = self.view(m)?;
        let symbols = co.symbols().map_err(KfdError::CodeObject)?;
        let s = symbols
            .by_name(name)
            .filter(|s| s.defined && s.kind == amdhsa::SymbolKind::Object)
            .ok_or(KfdError::SymbolNotFound)?;
        Ok(VariableSymbol { address: m.image.va.wrapping_add(s.value), size: s.size })
    }

    /// Unloads a code object (no dispatch of its kernels may be pending).
    pub fn unload_module(&self, m: KfdModule) -> KfdResult<()> {
        self.free_bo(&m.image)
    }
}

/// The embedded blit code object for a gfx target, if the crate carries one.
pub fn blit_code_object(gfx_target_version: u32) -> Option<&'static [u8]> {
    match gfx_target_version {
        90010 => Some(include_bytes!("../blit/blit-gfx90a.co")),
        90400 | 90402 => Some(include_bytes!("../blit/blit-gfx940.co")),
        110000 => Some(include_bytes!("../blit/blit-gfx1100.co")),
        _ => None,
    }
}
