//! The twin registry (docs/architecture.md rule 6; docs/kfd-aql.md §9 "kernels"): which host twin
//! runs for a dispatched kernel object.
//!
//! A kernel object is resolved, in order:
//!
//! 1. by address: twins registered directly ([`crate::Emu::register_kernel`], the built-in
//!    copy/fill/write-value objects) or bound to an address the caller chose;
//! 2. by fingerprint: the 64 descriptor bytes and the machine code at the entry point of a
//!    kernel of a code object announced with [`crate::Emu::load_code_object`], so any loader
//!    works without telling the emulator where it put the code;
//! 3. by name: ROCr's blit kernels by their code ([`crate::naming::rocr_blit_name`]), every
//!    other kernel by the `.kd` symbol of the loaded image around it
//!    ([`crate::naming::elf_kernel`]), looked up among the twins registered by name — on this
//!    machine, then in the process-wide list the C ABI fills ([`crate::c_abi`]). A twin bound
//!    by name gets the argument layout of the image's metadata.
//!
//! A code-object kernel with no twin (or every code-object kernel under
//! `AQUEDUCT_EMU_KERNELS=isa`) runs its own machine code instead: the binding is a twin made by
//! [`crate::isa::isa_twin`], which decodes the code once (docs/executor.md).
//!
//! Resolutions are remembered per kernel object (the packet processor keeps a cache that
//! [`Registry::generation`] invalidates).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use crate::builtin::{builtin_object, builtin_twins, rocclr_twins, rocr_blit_twin, DIRECT_KERNEL_OBJECT_BASE};
use crate::isa::KernelMode;
use crate::memory::MemView;
use crate::twin::{Layout, Twin};

/// A kernel recognised by its descriptor and entry code (from a loaded code object).
#[derive(Clone, Debug)]
pub(crate) struct Fingerprint {
    pub(crate) kd: [u8; 64],
    pub(crate) code: Vec<u8>,
    pub(crate) twin: Twin,
}

/// The registry of twins, shared by the driver side and every engine of the machine.
#[derive(Default)]
pub(crate) struct Registry {
    by_object: RwLock<HashMap<u64, Twin>>,
    by_name: RwLock<HashMap<String, Twin>>,
    fingerprints: RwLock<Vec<Fingerprint>>,
    next_direct: AtomicU64,
    /// Twins or machine code for code-object kernels.
    mode: KernelMode,
    /// The executor's per-wave instruction bound.
    watchdog: u64,
    /// The dispatches being checked (`KernelMode::Check`, `crate::check`).
    checker: Arc<crate::check::Checker>,
    /// Bumped whenever an object's binding may change (engine-side caches flush on a change).
    pub(crate) generation: AtomicU64,
    /// Decoded code-object texts of machine-code kernels that call device functions.
    texts: crate::isa::TextCache,
}

impl Twin {
    /// This twin bound to a kernel of a code object: the argument layout and segment size of its
    /// metadata entry, or the descriptor's kernarg size when the image has no metadata.
    pub(crate) fn bound_to(mut self, meta: Option<&Layout>, descriptor_kernarg_size: u32) -> Twin {
        if let Some(m) = meta {
            self.kernarg_size = self.kernarg_size.max(m.kernarg_size);
            self.args = m.args.clone().into();
        }
        if self.kernarg_size == 0 {
            self.kernarg_size = descriptor_kernarg_size;
        }
        self
    }
}

impl Registry {
    pub(crate) fn new(mode: KernelMode, watchdog: u64) -> Registry {
        let r = Registry { mode, watchdog, ..Registry::default() };
        for (k, t) in builtin_twins() {
            r.by_object.write().unwrap_or_else(|e| e.into_inner()).insert(builtin_object(k), t);
        }
        for t in rocclr_twins() {
            r.register_name(t);
        }
        r
    }

    pub(crate) fn register_direct(&self, twin: Twin) -> u64 {
        // Ordering: Relaxed; a unique counter.
        let n = self.next_direct.fetch_add(1, Ordering::Relaxed);
        let object = DIRECT_KERNEL_OBJECT_BASE + 0x1000 + n * 64;
        self.register_at(object, twin);
        object
    }

    pub(crate) fn register_at(&self, object: u64, twin: Twin) {
        self.by_object.write().unwrap_or_else(|e| e.into_inner()).insert(object, twin);
        // Ordering: Release pairs with the packet processor's Acquire check of its cache.
        self.generation.fetch_add(1, Ordering::Release);
    }

    pub(crate) fn register_name(&self, twin: Twin) {
        self.by_name.write().unwrap_or_else(|e| e.into_inner()).insert(twin.name.to_string(), twin);
    }

    /// The twin registered under `name` on this machine, else in the process-wide list.
    pub(crate) fn by_name(&self, name: &str) -> Option<Twin> {
        let own = self.by_name.read().unwrap_or_else(|e| e.into_inner()).get(name).cloned();
        own.or_else(|| crate::c_abi::process_twin(name))
    }

    pub(crate) fn add_fingerprint(&self, fp: Fingerprint) {
        self.fingerprints.write().unwrap_or_else(|e| e.into_inner()).push(fp);
    }

    fn lookup(&self, object: u64) -> Option<Twin> {
        self.by_object.read().unwrap_or_else(|e| e.into_inner()).get(&object).cloned()
    }

    /// The twin of the kernel object `object`, read through `mem` when it is not registered by
    /// address: a host twin, or (on a device whose instruction set the executor runs, `isa`:
    /// gfx90a and gfx942, see [`KernelMode`]) the kernel's machine code. A kernel that can run neither way is reported on stderr (the dispatch then fails
    /// with a queue error).
    pub(crate) fn resolve(&self, object: u64, mem: &MemView<'_>, target: Option<aqueduct_isa::Target>) -> Option<Twin> {
        let runs_code = target.is_some();
        if let Some(t) = self.lookup(object) {
            return Some(t);
        }
        let mut kd = [0u8; 64];
        mem.read(object, &mut kd).ok()?;
        let entry_off = i64::from_le_bytes(kd[16..24].try_into().ok()?);
        let entry = object.checked_add_signed(entry_off)?;
        let code_at = |len: usize| {
            let mut v = vec![0u8; len];
            mem.read(entry, &mut v).ok().map(|()| v)
        };
        let isa = runs_code && self.mode != KernelMode::Twin;
        let found = if self.mode == KernelMode::Isa && runs_code {
            None
        } else {
            let fps = self.fingerprints.read().unwrap_or_else(|e| e.into_inner());
            fps.iter()
                .find(|fp| fp.kd == kd && code_at(fp.code.len()).as_deref() == Some(fp.code.as_slice()))
                .map(|fp| fp.twin.clone())
        };
        let twin = match found {
            Some(t) => t,
            None => {
                let code = code_at(32).unwrap_or_default();
                let named = if self.mode == KernelMode::Isa && runs_code {
                    Err(self.kernel_name(object, &kd, &code, mem))
                } else {
                    self.by_symbol(object, &kd, code, mem, !isa)
                };
                match named {
                    Ok(t) => t,
                    Err(name) if isa => {
                        let target = target?;
                        crate::isa::isa_twin(&name, object, &kd, mem, self.watchdog, &self.texts, target)?
                    }
                    Err(_) => return None,
                }
            }
        };
        // Check mode: a kernel that has a twin runs both ways (a machine-code twin is its own).
        let twin = if let (KernelMode::Check, Some(target), false) = (self.mode, target, twin.machine_code) {
            match crate::isa::machine_code(&twin.name, object, &kd, mem, self.watchdog, &self.texts, target) {
                Some(code) => crate::check::checked(twin, code, self.checker.clone()),
                None => twin,
            }
        } else {
            twin
        };
        self.register_at(object, twin.clone());
        Some(twin)
    }

    /// A name for a kernel object in reports: ROCr's blit name, the `.kd` symbol, or its address.
    fn kernel_name(&self, object: u64, kd: &[u8; 64], code: &[u8], mem: &MemView<'_>) -> String {
        if let Some(n) = crate::naming::rocr_blit_name(kd, code) {
            return n.to_owned();
        }
        match crate::naming::elf_kernel_name(mem, object) {
            Some(s) => s.strip_suffix(".kd").unwrap_or(&s).to_owned(),
            None => format!("kernel object {object:#x}"),
        }
    }

    /// Names a kernel a foreign loader placed (ROCr blit code or `.kd` symbol) and binds it to
    /// the twin registered under that name; `Err(name)` when there is none (reported on stderr
    /// when `report`: the dispatch fails).
    fn by_symbol(
        &self,
        object: u64,
        kd: &[u8; 64],
        code: Vec<u8>,
        mem: &MemView<'_>,
        report: bool,
    ) -> Result<Twin, String> {
        if let Some(n) = crate::naming::rocr_blit_name(kd, &code) {
            return rocr_blit_twin(n).ok_or_else(|| n.to_owned());
        }
        let Some((symbol, meta)) = crate::naming::elf_kernel(mem, object) else {
            if report {
                eprintln!(
                    "aqueduct-kfd-emu: cannot name the kernel at {object:#x} (no ELF image or symbol): dispatch fails"
                );
            }
            return Err(format!("kernel object {object:#x}"));
        };
        let name = symbol.strip_suffix(".kd").unwrap_or(&symbol);
        let Some(twin) = self.by_name(name) else {
            if report {
                eprintln!("aqueduct-kfd-emu: no host twin for kernel `{name}` at {object:#x}: dispatch fails");
            }
            return Err(name.to_owned());
        };
        Ok(twin.bound_to(meta.as_ref(), u32::from_le_bytes([kd[8], kd[9], kd[10], kd[11]])))
    }
}
