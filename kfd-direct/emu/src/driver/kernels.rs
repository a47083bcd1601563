//! Kernels on the machine: twins registered directly or by name, and code objects whose kernels
//! bind to twins by name (the twin registry is `crate::registry`).

use aqueduct::BuiltinKernel;

use crate::builtin::builtin_object;
use crate::registry::Fingerprint;
use crate::twin::{Layout, Twin};

/// Bytes of entry code a fingerprint compares besides the descriptor.
const FINGERPRINT_CODE: usize = 256;
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
    /// Returns the names that were bound, sorted. Fails with `EINVAL` for a file that is not an AMDGPU
    /// HSA code object.
    pub fn load_code_object(&self, elf: &[u8]) -> SysResult<Vec<String>> {
        let co = amdhsa::CodeObject::parse(elf).map_err(|_| Errno::EINVAL)?;
        let meta = co.metadata().ok().flatten();
        let mut bound = Vec::new();
        for k in co.kernels().map_err(|_| Errno::EINVAL)? {
            let k = k.map_err(|_| Errno::EINVAL)?;
            let Some(twin) = self.m.registry.by_name(k.name) else { continue };
            let layout = meta.as_ref().and_then(|m| m.kernel(k.name)).map(|m| Layout::of(&m));
            let twin = twin.bound_to(layout.as_ref(), k.descriptor.kernarg_size);
            // The fingerprint: the descriptor and up to 256 bytes of code at the entry.
            let code = co.bytes_from(k.entry_address()).unwrap_or(&[]);
            let code = code.get(..code.len().min(FINGERPRINT_CODE)).unwrap_or(&[]).to_vec();
            self.m.registry.add_fingerprint(Fingerprint { kd: k.descriptor.to_bytes(), code, twin });
            bound.push(k.name.to_owned());
        }
        bound.sort();
        Ok(bound)
    }

    /// The kernel object of a built-in blit kernel.
    pub fn builtin_kernel(&self, kernel: BuiltinKernel) -> u64 {
        builtin_object(kernel)
    }
}
