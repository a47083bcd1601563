//! Loaded code objects (docs/code-objects.md §8): a generational table of the backend's
//! modules, like every other table here, so a stale or foreign module handle is an error and a
//! front end never names the backend it runs on.
//!
//! Loading runs outside every lock (the backend copies the image into device memory); only the
//! table update takes the module lock, which no submit path touches.

use super::Runtime;
use crate::backend::{Backend, KernelSymbol, VariableSymbol};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::slot::Table;
use crate::slots::module::{ModuleHandle, ModuleSlot, MODULE_TAG};
use crate::table;
use crate::thread::ThreadKeys;

impl<B: Backend, K: ThreadKeys, C: Config> Runtime<B, K, C> {
    fn module_slot(slots: &[ModuleSlot<B::Module>], h: ModuleHandle) -> Result<usize> {
        let l = table::lookup(MODULE_TAG, h.0, slots, |m| m.generation);
        table::require(l, Error::InvalidHandle, Error::InvalidHandle)
    }

    /// With the module behind `h`.
    fn with_module<T>(&self, h: ModuleHandle, f: impl FnOnce(&B::Module, u32) -> Result<T>) -> Result<T> {
        let modules = self.modules.lock();
        let i = Self::module_slot(modules.slots(), h)?;
        let slot = modules.slots().get(i).ok_or(Error::InvalidHandle)?;
        f(slot.module.as_ref().ok_or(Error::InvalidHandle)?, slot.device)
    }

    /// Loads the AMDHSA code object `code_object` onto `device` (`hipModuleLoadData`). The
    /// backend's errors pass through (`InvalidImage`, `NoBinaryForGpu`, `OutOfMemory`, …); a full
    /// module table (the configuration's `Modules` capacity) is `OutOfMemory`.
    pub fn module_load(&self, device: u32, code_object: &[u8]) -> Result<ModuleHandle> {
        if device >= self.device_count()? {
            return Err(Error::InvalidDevice);
        }
        let module = self.backend.module_load(device, code_object)?;
        let mut modules = self.modules.lock();
        let Some(i) = modules.slots().iter().position(|m| !m.generation.live) else {
            let capacity = modules.slots().len();
            drop(modules);
            warn!("module table full: {} code objects loaded (the configuration's Modules capacity)", capacity);
            let _ = self.backend.module_unload(module);
            return Err(Error::OutOfMemory);
        };
        let slot = modules.slots_mut().get_mut(i).ok_or(Error::OutOfMemory)?;
        let generation = slot.generation.occupy();
        slot.device = device;
        slot.module = Some(module);
        Ok(ModuleHandle(table::encode(MODULE_TAG, generation, i)))
    }

    /// The kernel `name` of a loaded code object (`hipModuleGetFunction`): `NotFound` if it has
    /// none. The device is then ready to run it: its queues' scratch holds the kernel's fixed
    /// private segment (a dynamic stack is the caller's to reserve, with
    /// [`reserve_scratch`](Self::reserve_scratch)).
    pub fn module_kernel(&self, h: ModuleHandle, name: &str) -> Result<KernelSymbol> {
        let (k, device) = self.with_module(h, |m, d| Ok((self.backend.module_kernel(m, name)?, d)))?;
        if k.private_segment_size > 0 {
            self.backend.reserve_scratch(device, k.private_segment_size)?;
        }
        Ok(k)
    }

    /// Makes `device` ready to run dispatches asking for `bytes_per_work_item` of private
    /// segment (scratch), e.g. a kernel with a dynamic stack given HIP's stack-size limit.
    pub fn reserve_scratch(&self, device: u32, bytes_per_work_item: u32) -> Result<()> {
        if device >= self.device_count()? {
            return Err(Error::InvalidDevice);
        }
        self.backend.reserve_scratch(device, bytes_per_work_item)
    }

    /// The device variable `name` (`hipModuleGetGlobal`): `InvalidSymbol` if there is none.
    pub fn module_variable(&self, h: ModuleHandle, name: &str) -> Result<VariableSymbol> {
        self.with_module(h, |m, _| self.backend.module_variable(m, name))
    }

    /// Where the loaded image lies in device memory, where the backend says.
    pub fn module_image(&self, h: ModuleHandle) -> Result<Option<(u64, u64)>> {
        self.with_module(h, |m, _| Ok(self.backend.module_image(m)))
    }

    /// The device a module was loaded onto.
    pub fn module_device(&self, h: ModuleHandle) -> Result<u32> {
        self.with_module(h, |_, d| Ok(d))
    }

    /// Unloads a code object (`hipModuleUnload`); none of its kernels' dispatches may still be
    /// pending. The handle is stale afterwards.
    pub fn module_unload(&self, h: ModuleHandle) -> Result<()> {
        let module = {
            let mut modules = self.modules.lock();
            let i = Self::module_slot(modules.slots(), h)?;
            let slot = modules.slots_mut().get_mut(i).ok_or(Error::InvalidHandle)?;
            slot.generation.vacate();
            slot.module.take().ok_or(Error::InvalidHandle)?
        };
        self.backend.module_unload(module)
    }
}
