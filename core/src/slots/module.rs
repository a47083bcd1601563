//! Loaded code-object slots and their handles (`runtime/modules.rs` loads and looks up).

use crate::slot::Slot;
use crate::table::Generation;

/// Handle tag of modules.
pub(crate) const MODULE_TAG: u16 = 0xc0de;

/// A loaded code object's handle; 0 is null.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ModuleHandle(pub u64);

/// One loaded code object.
#[derive(Debug)]
pub struct ModuleSlot<M> {
    pub(crate) generation: Generation,
    pub(crate) device: u32,
    pub(crate) module: Option<M>,
}

impl<M> Slot for ModuleSlot<M> {
    const EMPTY: Self = ModuleSlot { generation: Generation::new(), device: 0, module: None };
}
