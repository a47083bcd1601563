//! Typed kernels: host twins on the emulator and kernels of real AMDHSA code objects.

use std::marker::PhantomData;

use aqueduct::{Error, KernelLaunch};
use aqueduct_kfd_emu::{KernelCtx, KernelError, Twin};

use super::{Deferred, Device, Result};

/// Kernel arguments: a `#[repr(C)]` struct laid out as the kernel expects them.
///
/// # Safety
/// The type must be `#[repr(C)]` (or a primitive) with no padding bytes, so that its bytes are
/// all initialised, and must hold no host pointers the kernel would misuse.
pub unsafe trait KernelArgs: Copy + 'static {
    /// The argument bytes.
    fn as_bytes(&self) -> &[u8] {
        // SAFETY: the trait's contract: no padding, so all `size_of` bytes are initialised.
        unsafe { std::slice::from_raw_parts(self as *const Self as *const u8, std::mem::size_of::<Self>()) }
    }
}

// SAFETY: no arguments.
unsafe impl KernelArgs for () {}

/// Grid or work-group dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dim3(pub u32, pub u32, pub u32);

impl Dim3 {
    /// One-dimensional.
    pub const fn x(x: u32) -> Dim3 {
        Dim3(x, 1, 1)
    }
}

impl From<u32> for Dim3 {
    fn from(x: u32) -> Self {
        Dim3::x(x)
    }
}

/// Most kernel-argument bytes a launch carries (HIP's limit; the backends give larger
/// arguments several ring slots' areas).
pub const MAX_KERNARG: usize = 4096;

/// A kernel whose arguments are an `A`.
pub struct Kernel<A: KernelArgs> {
    name: String,
    object: u64,
    group_segment_size: u32,
    private_segment_size: u32,
    /// Bytes the kernel reads (explicit arguments plus hidden ones, zeroed).
    kernarg_size: usize,
    _a: PhantomData<fn(A)>,
}

impl<A: KernelArgs> std::fmt::Debug for Kernel<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel").field("name", &self.name).field("object", &format_args!("{:#x}", self.object)).finish()
    }
}

impl<A: KernelArgs> Kernel<A> {
    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The kernel object (address of the kernel descriptor, or the emulator's twin address).
    pub fn object(&self) -> u64 {
        self.object
    }

    /// Calls `f` with the launch of `args` on `grid` × `block`. Arguments that cover the
    /// kernel's size are borrowed as they are; shorter ones are copied into a zeroed buffer of
    /// the kernel's size on the stack (the hidden arguments a code object's kernel reads past
    /// its explicit ones), sized to the need so that a launch zeroes and copies no more than it
    /// passes on (docs/architecture.md, "The submit path, instruction by instruction").
    pub(crate) fn with_launch<R>(
        &self,
        grid: Dim3,
        block: Dim3,
        args: &[u8],
        f: impl FnOnce(&KernelLaunch<'_>) -> Result<R>,
    ) -> Result<R> {
        let wg = |v: u32| u16::try_from(v).map_err(|_| Error::InvalidValue);
        let workgroup = [wg(block.0)?, wg(block.1)?, wg(block.2)?];
        let base = KernelLaunch {
            kernel_object: self.object,
            grid: [grid.0, grid.1, grid.2],
            workgroup,
            group_segment_size: self.group_segment_size,
            private_segment_size: self.private_segment_size,
            kernarg: &[],
        };
        let len = self.kernarg_size.max(args.len());
        if len > MAX_KERNARG {
            return Err(Error::InvalidValue);
        }
        if len == args.len() {
            return f(&KernelLaunch { kernarg: args, ..base });
        }
        if len <= 512 {
            padded::<512, R>(args, len, |kernarg| f(&KernelLaunch { kernarg, ..base }))
        } else {
            padded::<MAX_KERNARG, R>(args, len, |kernarg| f(&KernelLaunch { kernarg, ..base }))
        }
    }
}

/// Calls `f` with `args` followed by zeros up to `len` bytes (`len <= N`), in a buffer of `N`
/// bytes on the stack.
fn padded<const N: usize, R>(args: &[u8], len: usize, f: impl FnOnce(&[u8]) -> Result<R>) -> Result<R> {
    let mut bytes = [0u8; N];
    bytes.get_mut(..args.len()).ok_or(Error::InvalidValue)?.copy_from_slice(args);
    f(bytes.get(..len).ok_or(Error::InvalidValue)?)
}

/// A loaded code object. Unloaded once the device is next idle after the drop.
pub struct Module<'d> {
    dev: &'d Device,
    handle: aqueduct::ModuleHandle,
}

impl std::fmt::Debug for Module<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Module")
    }
}

type TwinBody = dyn Fn(&KernelCtx<'_>, [u32; 3]) -> std::result::Result<(), KernelError> + Send + Sync;

impl Device {
    /// Registers a host twin as a kernel of its own (emulator only; `NotSupported` elsewhere).
    /// `body` runs once per work-group.
    pub fn host_kernel<A: KernelArgs>(
        &self,
        name: &str,
        body: impl Fn(&KernelCtx<'_>, [u32; 3]) -> std::result::Result<(), KernelError> + Send + Sync + 'static,
    ) -> Result<Kernel<A>> {
        let emu = self.backend().as_emu().ok_or(Error::NotSupported)?;
        let size = std::mem::size_of::<A>() as u32;
        let object = emu.sys().emu().register_kernel(Twin::new(name, size, body));
        Ok(Kernel {
            name: name.to_owned(),
            object,
            group_segment_size: 0,
            private_segment_size: 0,
            kernarg_size: size as usize,
            _a: PhantomData,
        })
    }

    /// On the emulator, binds a host twin to a kernel symbol of code objects loaded later (the
    /// emulator cannot run GPU ISA); elsewhere a no-op, since the hardware runs the code.
    pub fn register_twin<A: KernelArgs>(
        &self,
        name: &str,
        body: impl Fn(&KernelCtx<'_>, [u32; 3]) -> std::result::Result<(), KernelError> + Send + Sync + 'static,
    ) {
        if let Some(emu) = self.backend().as_emu() {
            let b: Box<TwinBody> = Box::new(body);
            emu.sys().emu().register_twin_by_name(Twin::new(name, std::mem::size_of::<A>() as u32, b));
        }
    }

    /// Loads an AMDHSA code object (ELF) for this device: `InvalidImage` for bytes that are not
    /// one, `NoBinaryForGpu` for one built for another target.
    pub fn load_module(&self, elf: &[u8]) -> Result<Module<'_>> {
        let handle = self.shared.rt.module_load(self.index, elf)?;
        Ok(Module { dev: self, handle })
    }
}

impl Module<'_> {
    /// The kernel `name` (without `.kd`), typed by its arguments. `InvalidValue` if the argument
    /// type is larger than the kernel's argument block.
    pub fn kernel<A: KernelArgs>(&self, name: &str) -> Result<Kernel<A>> {
        let k = self.dev.shared.rt.module_kernel(self.handle, name)?;
        if std::mem::size_of::<A>() > k.kernarg_size as usize {
            return Err(Error::InvalidValue);
        }
        Ok(Kernel {
            name: name.to_owned(),
            object: k.kernel_object,
            group_segment_size: k.group_segment_size,
            private_segment_size: k.private_segment_size,
            kernarg_size: (k.kernarg_size as usize).min(MAX_KERNARG),
            _a: PhantomData,
        })
    }
}

impl Drop for Module<'_> {
    fn drop(&mut self) {
        self.dev.defer(Deferred::Module(self.handle));
    }
}
