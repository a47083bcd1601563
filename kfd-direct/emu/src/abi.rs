//! The amdkfd user ABI, re-exported from [`aqueduct_kfd_abi`] (the crate the kfd-direct backend
//! shares with the emulator; the emulator never depends on the backend itself).

pub use aqueduct_kfd_abi::*;
