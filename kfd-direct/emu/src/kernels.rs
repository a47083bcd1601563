//! Kernels on the emulator: host twins (DESIGN.md rule 6; kfd-aql.md §9 "kernels").
//!
//! The emulator cannot run GPU ISA. A kernel is a Rust function bound to a kernel object: either
//! registered directly (the emulator hands out a kernel-object address), or registered by symbol
//! name and matched when a real AMDHSA code object containing that symbol is announced with
//! [`crate::Emu::load_code_object`]. For the latter the command processor recognises the
//! kernel descriptor the loader placed in GPU memory by its contents (the 64 descriptor bytes and
//! the machine code at its entry point), so any loader — kfd-direct's own or the test helper in
//! [`crate::codeobj`] — works without telling the emulator where it put the code.
//!
//! A twin runs once per work-group and receives the dispatch geometry, its work-group id, the
//! kernel-argument bytes and a [`MemView`] of device memory. A twin bound to a kernel of a code
//! object also gets the arguments' layout from the object's metadata ([`KernelCtx::arg`] and
//! friends read arguments by position, [`KernelCtx::hidden_arg`] by hidden kind).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use aqueduct::aql::KernelDispatchPacket;
use aqueduct::backend::{CopyArgs, FillArgs, WriteValueArgs};
use aqueduct::BuiltinKernel;

use crate::memory::{KernelError, MemView};
pub use crate::metadata::KernelArg;

/// What one work-group of a twin sees.
pub struct KernelCtx<'a> {
    /// The dispatch packet.
    pub packet: KernelDispatchPacket,
    /// Grid size in work-items (unused dimensions 1).
    pub grid: [u32; 3],
    /// Work-group size in work-items.
    pub workgroup_size: [u32; 3],
    /// Work-groups per dimension (`ceil(grid / workgroup_size)`).
    pub workgroup_count: [u32; 3],
    /// The kernel-argument bytes (the twin's declared size, or the metadata's
    /// `.kernarg_segment_size`, read at dispatch).
    pub kernarg: &'a [u8],
    /// The arguments' layout from the code object's metadata, in declaration order (explicit,
    /// then hidden); empty when the kernel was not named from a code object with metadata.
    pub args: &'a [KernelArg],
    /// Device memory.
    pub mem: &'a MemView<'a>,
}

impl KernelCtx<'_> {
    /// A little-endian u64 argument at byte offset `off` (0 if out of range).
    pub fn arg_u64(&self, off: usize) -> u64 {
        self.kernarg.get(off..off + 8).map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
    }

    /// A little-endian u32 argument at byte offset `off` (0 if out of range).
    pub fn arg_u32(&self, off: usize) -> u32 {
        self.kernarg.get(off..off + 4).map_or(0, |b| u32::from_le_bytes(b.try_into().unwrap_or_default()))
    }

    /// The bytes of argument `i` (by position, from the metadata), if it exists and lies
    /// inside the kernel-argument bytes.
    pub fn arg_bytes(&self, i: usize) -> Option<&[u8]> {
        let a = self.args.get(i)?;
        self.kernarg.get(a.offset as usize..a.offset as usize + a.size as usize)
    }

    /// Argument `i` (by position, from the metadata) as a little-endian integer of its size,
    /// zero-extended (a `char` reads one byte, a pointer eight); 0 if it does not exist.
    pub fn arg(&self, i: usize) -> u64 {
        self.arg_bytes(i).map_or(0, |b| b.iter().take(8).rev().fold(0, |acc, &x| (acc << 8) | u64::from(x)))
    }

    /// Argument `i` sign-extended from its size (for `char`, `short`, `int` arguments).
    pub fn arg_signed(&self, i: usize) -> i64 {
        let size = self.args.get(i).map_or(8, |a| a.size.clamp(1, 8));
        let shift = 64 - 8 * size;
        ((self.arg(i) << shift) as i64) >> shift
    }

    /// The hidden argument of `.value_kind` `kind` (e.g. `hidden_global_offset_x`), if the
    /// kernel has one.
    pub fn hidden_arg(&self, kind: &str) -> Option<u64> {
        let i = self.args.iter().position(|a| a.value_kind == kind)?;
        self.arg_bytes(i).map(|_| self.arg(i))
    }

    /// The range of global work-item ids (x) covered by work-group `wg` (the last one may be
    /// partial).
    pub fn items_x(&self, wg: [u32; 3]) -> std::ops::Range<u32> {
        let lo = wg[0] * self.workgroup_size[0];
        lo..(lo + self.workgroup_size[0]).min(self.grid[0])
    }
}

/// The function type of a twin: runs one work-group.
pub type TwinFn = dyn Fn(&KernelCtx<'_>, [u32; 3]) -> Result<(), KernelError> + Send + Sync;

/// A kernel's host twin.
#[derive(Clone)]
pub struct Twin {
    /// Name (the symbol without `.kd`).
    pub name: Arc<str>,
    /// Kernel-argument bytes read at dispatch.
    pub kernarg_size: u32,
    /// The function.
    pub f: Arc<TwinFn>,
    /// Argument layout from the code object's metadata (set when the emulator binds the twin
    /// to a kernel it named in a code object; empty otherwise).
    pub args: Arc<[KernelArg]>,
}

impl std::fmt::Debug for Twin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Twin").field("name", &self.name).field("kernarg_size", &self.kernarg_size).finish()
    }
}

impl Twin {
    /// A twin from a closure.
    pub fn new(
        name: &str,
        kernarg_size: u32,
        f: impl Fn(&KernelCtx<'_>, [u32; 3]) -> Result<(), KernelError> + Send + Sync + 'static,
    ) -> Twin {
        Twin { name: Arc::from(name), kernarg_size, f: Arc::new(f), args: Arc::from([]) }
    }
}

/// A kernel recognised by its descriptor and entry code (from a loaded code object).
#[derive(Clone, Debug)]
pub(crate) struct Fingerprint {
    pub(crate) kd: [u8; 64],
    pub(crate) code: Vec<u8>,
    pub(crate) twin: Twin,
}

/// First kernel-object address handed out for directly registered twins. It lies above the
/// 47-bit user space, so it can never collide with a BO.
pub const DIRECT_KERNEL_OBJECT_BASE: u64 = 0xffff_8000_0000_0000;

/// The registry of twins, shared by the driver side and every command processor.
#[derive(Default)]
pub(crate) struct Registry {
    by_object: RwLock<HashMap<u64, Twin>>,
    by_name: RwLock<HashMap<String, Twin>>,
    fingerprints: RwLock<Vec<Fingerprint>>,
    next_direct: std::sync::atomic::AtomicU64,
    /// Bumped whenever an object's binding may change (CP-side caches flush on a change).
    pub(crate) generation: std::sync::atomic::AtomicU64,
}

impl Registry {
    pub(crate) fn new() -> Registry {
        let r = Registry::default();
        for (k, t) in builtin_twins() {
            r.by_object.write().unwrap_or_else(|e| e.into_inner()).insert(builtin_object(k), t);
        }
        for t in crate::naming::rocclr_twins() {
            r.register_name(t);
        }
        r
    }

    pub(crate) fn register_direct(&self, twin: Twin) -> u64 {
        let n = self.next_direct.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let object = DIRECT_KERNEL_OBJECT_BASE + 0x1000 + n * 64;
        self.register_at(object, twin);
        object
    }

    pub(crate) fn register_at(&self, object: u64, twin: Twin) {
        self.by_object.write().unwrap_or_else(|e| e.into_inner()).insert(object, twin);
        // Ordering: Release pairs with the CP's Acquire check of its cache.
        self.generation.fetch_add(1, std::sync::atomic::Ordering::Release);
    }

    pub(crate) fn register_name(&self, twin: Twin) {
        self.by_name.write().unwrap_or_else(|e| e.into_inner()).insert(twin.name.to_string(), twin);
    }

    pub(crate) fn by_name(&self, name: &str) -> Option<Twin> {
        self.by_name.read().unwrap_or_else(|e| e.into_inner()).get(name).cloned()
    }

    pub(crate) fn add_fingerprint(&self, fp: Fingerprint) {
        self.fingerprints.write().unwrap_or_else(|e| e.into_inner()).push(fp);
    }

    pub(crate) fn lookup(&self, object: u64) -> Option<Twin> {
        self.by_object.read().unwrap_or_else(|e| e.into_inner()).get(&object).cloned()
    }

    /// Matches a kernel descriptor read from device memory against loaded code objects;
    /// `code_at(len)` reads `len` bytes at the descriptor's entry point.
    pub(crate) fn match_descriptor(
        &self,
        kd: &[u8; 64],
        mut code_at: impl FnMut(usize) -> Option<Vec<u8>>,
    ) -> Option<Twin> {
        let fps = self.fingerprints.read().unwrap_or_else(|e| e.into_inner());
        fps.iter()
            .find(|fp| &fp.kd == kd && code_at(fp.code.len()).as_deref() == Some(fp.code.as_slice()))
            .map(|fp| fp.twin.clone())
    }
}

/// The kernel object of a built-in blit kernel (the same on every device).
pub const fn builtin_object(k: BuiltinKernel) -> u64 {
    DIRECT_KERNEL_OBJECT_BASE
        + match k {
            BuiltinKernel::Copy => 0,
            BuiltinKernel::Fill => 64,
            BuiltinKernel::WriteValue => 128,
        }
}

fn read_args<T: Copy>(kernarg: &[u8]) -> Result<T, KernelError> {
    if kernarg.len() < size_of::<T>() {
        return Err(KernelError::Trap);
    }
    // SAFETY: the slice holds at least size_of::<T>() bytes; T is a plain-integer repr(C) struct
    // from core's backend module, valid for every bit pattern.
    Ok(unsafe { std::ptr::read_unaligned(kernarg.as_ptr().cast::<T>()) })
}

/// The built-in copy, fill and write-value twins (kernel-argument layouts from core's
/// [`aqueduct::backend`]). Each is dispatched as a single work-group.
pub fn builtin_twins() -> [(BuiltinKernel, Twin); 3] {
    [
        (
            BuiltinKernel::Copy,
            Twin::new("__aqueduct_copy", size_of::<CopyArgs>() as u32, |ctx, _| {
                let a: CopyArgs = read_args(ctx.kernarg)?;
                ctx.mem.copy(a.dst, a.src, a.bytes)
            }),
        ),
        (
            BuiltinKernel::Fill,
            Twin::new("__aqueduct_fill", size_of::<FillArgs>() as u32, |ctx, _| {
                let a: FillArgs = read_args(ctx.kernarg)?;
                let size = a.element_bytes as usize;
                if !matches!(size, 1 | 2 | 4) {
                    return Err(KernelError::Trap);
                }
                let total = a.count.checked_mul(size as u64).ok_or(KernelError::Trap)?;
                if total == 0 {
                    return Ok(());
                }
                let p = ctx.mem.ptr(a.dst, total)?;
                let pattern = a.value.to_le_bytes();
                for i in 0..a.count as usize {
                    // SAFETY: `ptr` checked `count * size` bytes at dst.
                    unsafe { std::ptr::copy_nonoverlapping(pattern.as_ptr(), p.add(i * size), size) };
                }
                Ok(())
            }),
        ),
        (
            BuiltinKernel::WriteValue,
            Twin::new("__aqueduct_write_value", size_of::<WriteValueArgs>() as u32, |ctx, _| {
                let a: WriteValueArgs = read_args(ctx.kernarg)?;
                match a.width {
                    4 => ctx.mem.write_u32(a.dst, a.value as u32),
                    8 => ctx.mem.write_u64(a.dst, a.value),
                    _ => Err(KernelError::Trap),
                }
            }),
        ),
    ]
}
