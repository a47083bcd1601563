//! Kernels on the emulator, in one place for users: the Rust twin API ([`crate::twin`]) and the
//! built-in twins ([`crate::builtin`]). The twin registry that binds them to kernel objects is
//! `registry`; C twins are [`crate::c_abi`].

pub use crate::builtin::{builtin_object, builtin_twins, rocclr_twins, rocr_blit_twin, DIRECT_KERNEL_OBJECT_BASE};
pub use crate::twin::{KernelArg, KernelCtx, Twin, TwinFn};
