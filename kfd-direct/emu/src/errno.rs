//! [`Errno`]: the error numbers the emulated syscalls return — the same type the kfd-direct
//! backend receives, from the shared ABI crate.

pub use aqueduct_kfd_abi::Errno;

/// Result of an emulated syscall.
pub type SysResult<T> = Result<T, Errno>;
