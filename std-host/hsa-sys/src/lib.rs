//! hsa-sys
