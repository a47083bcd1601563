//! The ROCr backend.
