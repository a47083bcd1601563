//! # aqueduct-std
//!
//! The std host of aqueduct. For now it carries the `aqueduct` command-line tool's support
//! code: [`launcher`] runs any program on the emulated AMD GPU by preloading
//! `libaqueduct_kfd_preload.so` (package `aqueduct-kfd-preload`).

pub mod launcher;
