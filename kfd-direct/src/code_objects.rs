//! Code objects on [`Kfd`] (docs/kfd-aql.md §6): the embedded blit kernels, loading, looking
//! up and unloading AMDHSA code objects, and launching a kernel by name.

use aqueduct::{Error, Result};

use crate::codeobj::{self, KernelInfo};
use crate::driver::GTT_FLAGS;
use crate::{CodeObject, CodeObjectHandle, Kfd, KfdError, KfdResult, Sys};

impl<S: Sys> Kfd<S> {
    pub(crate) fn load_blit(&mut self, gpu: usize) -> KfdResult<()> {
        let Some(g) = self.gpus.get(gpu) else { return Err(KfdError::InvalidDevice) };
        let Some(elf) = blit_code_object(g.node.props.gfx_target_version) else { return Ok(()) };
        let h = self.load_code_object(gpu as u32, elf)?;
        let st = self.state.lock();
        let co = st.code_objects.get(usize::from(h.0)).and_then(|c| c.as_ref()).ok_or(KfdError::KernelNotFound)?;
        let mut blit = [0u64; 4];
        let names = ["aqueduct_copy", "aqueduct_fill", "aqueduct_write_value", "aqueduct_graph_scheduler"];
        for (slot, name) in blit.iter_mut().zip(names) {
            *slot = co.kernel(name).ok_or(KfdError::KernelNotFound)?.kernel_object;
        }
        drop(st);
        if let Some(g) = self.gpus.get_mut(gpu) {
            g.blit = blit;
        }
        Ok(())
    }

    /// Loads an AMDHSA code object onto `device` (§6): checks the target, places the segments
    /// in one executable GPU buffer, applies the relocations and reads every kernel descriptor.
    pub fn load_code_object(&self, device: u32, elf: &[u8]) -> KfdResult<CodeObjectHandle> {
        self.check_process()?;
        let gpu = self.gpus.get(device as usize).ok_or(KfdError::InvalidDevice)?;
        let parsed = codeobj::parse(elf, gpu.node.props.gfx_target_version)?;
        let free_slot = {
            let st = self.state.lock();
            st.code_objects.iter().position(Option::is_none).ok_or(KfdError::Capacity("code objects"))?
        };
        let bo = self.alloc_bo(device as usize, parsed.image_size, GTT_FLAGS, true)?;
        let result = (|| {
            // SAFETY: the buffer is CPU-mapped, `bo.size >= image_size` bytes, and ours alone
            // until the handle is returned.
            let image = unsafe { core::slice::from_raw_parts_mut(bo.ptr::<u8>(0), parsed.image_size as usize) };
            codeobj::place(&parsed, elf, image, bo.va)?;
            let mut kernels = heapless::Vec::new();
            codeobj::kernels(&parsed, image, bo.va, |k| kernels.push(k).map_err(|_| KfdError::Capacity("kernels")))?;
            Ok(kernels)
        })();
        let kernels = match result {
            Ok(k) => k,
            Err(e) => {
                let _ = self.free_bo(&bo);
                return Err(e);
            }
        };
        self.drv.sys().code_object_loaded(elf);
        let mut st = self.state.lock();
        match st.code_objects.get_mut(free_slot) {
            Some(slot @ None) => {
                *slot = Some(CodeObject { gpu: device as u8, image: bo, kernels });
                Ok(CodeObjectHandle(free_slot as u16))
            }
            _ => {
                drop(st);
                let _ = self.free_bo(&bo);
                Err(KfdError::Capacity("code objects"))
            }
        }
    }

    /// A kernel of a loaded code object, by name.
    pub fn kernel(&self, co: CodeObjectHandle, name: &str) -> KfdResult<KernelInfo> {
        let st = self.state.lock();
        let c = st.code_objects.get(usize::from(co.0)).and_then(|c| c.as_ref()).ok_or(KfdError::InvalidArgument)?;
        c.kernel(name).cloned().ok_or(KfdError::KernelNotFound)
    }

    /// A copy of a loaded code object's description.
    pub fn code_object(&self, co: CodeObjectHandle) -> Option<CodeObject> {
        self.state.lock().code_objects.get(usize::from(co.0)).and_then(|c| c.clone())
    }

    /// Unloads a code object (no dispatch of its kernels may be pending).
    pub fn unload_code_object(&self, co: CodeObjectHandle) -> KfdResult<()> {
        let c = {
            let mut st = self.state.lock();
            st.code_objects.get_mut(usize::from(co.0)).and_then(Option::take).ok_or(KfdError::InvalidArgument)?
        };
        let _ = c.gpu;
        self.free_bo(&c.image)
    }

    /// Launches kernel `name` of a loaded code object on a stream: the descriptor gives the
    /// segment sizes; `kernarg` must hold at least the explicit arguments.
    pub fn launch_by_name<K, C: aqueduct::Config>(
        rt: &aqueduct::Runtime<Kfd<S>, K, C>,
        stream: aqueduct::StreamHandle,
        co: CodeObjectHandle,
        name: &str,
        grid: [u32; 3],
        workgroup: [u16; 3],
        kernarg: &[u8],
    ) -> Result<()>
    where
        K: aqueduct::ThreadKeys,
    {
        let k = rt.backend().kernel(co, name).map_err(Error::from)?;
        if k.dynamic_stack || k.private_segment_size > 0 {
            // No scratch is set up (§4.3 MVP): such kernels are refused, not run wrong.
            return Err(Error::NotSupported);
        }
        rt.launch_kernel(
            stream,
            &aqueduct::KernelLaunch {
                kernel_object: k.kernel_object,
                grid,
                workgroup,
                group_segment_size: k.group_segment_size,
                private_segment_size: k.private_segment_size,
                kernarg,
            },
        )
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
