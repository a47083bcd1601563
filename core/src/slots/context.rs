//! Execution-context slots and their handles (`runtime/context.rs` has detach).

use crate::slot::Slot;
use crate::stream::CuMask;
use crate::table::Generation;

/// Handle tag of contexts.
pub(crate) const CONTEXT_TAG: u16 = 0xc7c7;

/// An execution-context handle; 0 is null.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ContextHandle(pub u64);

/// One execution context.
#[derive(Debug)]
pub struct ContextSlot {
    pub(crate) generation: Generation,
    pub(crate) device: u32,
    pub(crate) cu_mask: Option<CuMask>,
}

impl Slot for ContextSlot {
    const EMPTY: Self = ContextSlot { generation: Generation::new(), device: 0, cu_mask: None };
}
