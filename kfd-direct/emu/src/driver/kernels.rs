//! Kernels on the machine: twins registered directly or by name, and code objects whose kernels
//! bind to twins by name (the twin registry is `crate::registry`).

use aqueduct::BuiltinKernel;

use crate::builtin::builtin_object;
use crate::registry::Fingerprint;
use crate::twin::Twin;
use crate::{Errno, SysResult};

use super::Emu;

impl Emu {
    /// Registers a host twin and returns the kernel object that names it in dispatch packets.
    pub fn register_kernel(&self, twin: Twin) -> u64 {
        self.m.registry.register_direct(twin)
    }

    /// Binds a twin to a kernel object address the caller chose.
    pub fn register_kernel_at(&self, kernel_object: u64, twin: Twin) {
        self.m.registry.register_at(kernel_object, twin);
    }

    /// Registers a twin under a kernel symbol name (without `.kd`), to be matched when a code
    /// object containing that kernel is announced with [`Emu::load_code_object`].
    pub fn register_twin_by_name(&self, twin: Twin) {
        self.m.registry.register_name(twin);
    }

    /// Announces an AMDHSA code object (ELF bytes): every kernel descriptor in it whose
    /// symbol has a twin registered by name becomes recognisable wherever a loader places it.
    /// Returns the names that were bound. Fails with `EINVAL` for a file that is not an AMDGPU
    /// HSA code object.
    pub fn load_code_object(&self, elf: &[u8]) -> SysResult<Vec<String>> {
        let co = crate::codeobj::CodeObject::parse(elf).map_err(|_| Errno::EINVAL)?;
        let mut bound = Vec::new();
        for k in &co.kernels {
            if let Some(mut twin) = self.m.registry.by_name(&k.name) {
                if let Some(m) = &k.meta {
                    twin.kernarg_size = twin.kernarg_size.max(m.kernarg_segment_size);
                    twin.args = m.args.clone().into();
                }
                if twin.kernarg_size == 0 {
                    twin.kernarg_size = k.descriptor.kernarg_size;
                }
                self.m.registry.add_fingerprint(Fingerprint { kd: k.descriptor_bytes, code: k.code.clone(), twin });
                bound.push(k.name.clone());
            }
        }
        Ok(bound)
    }

    /// The kernel object of a built-in blit kernel.
    pub fn builtin_kernel(&self, kernel: BuiltinKernel) -> u64 {
        builtin_object(kernel)
    }
}
