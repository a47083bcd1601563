//! Hidden kernel arguments (docs/code-objects.md §7): the values a runtime writes after the
//! explicit arguments, at the offsets and sizes the metadata lists, as clr 5.2 fills them.
//!
//! A launch describes itself once ([`LaunchValues`]); [`fill`] writes every hidden argument a
//! kernel's metadata lists, and anything it does not list stays zero.

use crate::error::{Error, Result};
use crate::metadata::{Arg, ValueKind};

/// One hidden argument, as a launch path keeps it (no borrow of the note).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct HiddenArg {
    /// Its kind.
    pub kind: ValueKind,
    /// Byte offset in the kernel-argument segment.
    pub offset: u32,
    /// Bytes (1 to 8).
    pub size: u32,
}

impl From<Arg<'_>> for HiddenArg {
    fn from(a: Arg<'_>) -> HiddenArg {
        HiddenArg { kind: a.kind, offset: a.offset, size: a.size }
    }
}

/// What a launch gives the hidden arguments.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LaunchValues {
    /// Work-items per dimension (the AQL packet's `grid_size_*`).
    pub grid: [u32; 3],
    /// Work-items per work-group (`workgroup_size_*`).
    pub workgroup: [u16; 3],
    /// NDRange dimensions (3 for every HIP launch).
    pub dims: u16,
    /// The launch's global offset per dimension (0 for HIP).
    pub global_offset: [u64; 3],
    /// The queue's hostcall buffer (device `printf`), 0 if there is none.
    pub hostcall_buffer: u64,
    /// OpenCL's printf buffer, 0 for HIP.
    pub printf_buffer: u64,
    /// The device heap (`malloc` in kernels, code object v5), 0 if there is none.
    pub heap: u64,
    /// 0 for an ordinary launch, 1 for a cooperative one, else the multi-device sync block.
    pub multigrid_sync: u64,
    /// OpenCL device-enqueue queue, 0 for HIP.
    pub default_queue: u64,
    /// OpenCL device-enqueue completion action, 0 for HIP.
    pub completion_action: u64,
    /// The `amd_queue_t` address.
    pub queue_ptr: u64,
    /// `amd_queue_t.private_segment_aperture_base_hi`.
    pub private_base: u32,
    /// `amd_queue_t.group_segment_aperture_base_hi`.
    pub shared_base: u32,
    /// Dynamic LDS bytes of the launch.
    pub dynamic_lds: u32,
}

impl LaunchValues {
    /// The value of a hidden argument of kind `kind`; `None` for an explicit kind.
    pub fn value(&self, kind: ValueKind) -> Option<u64> {
        use ValueKind::*;
        let dim = |d: usize| (u64::from(self.grid[d]), u64::from(self.workgroup[d]).max(1));
        Some(match kind {
            HiddenGlobalOffsetX => self.global_offset[0],
            HiddenGlobalOffsetY => self.global_offset[1],
            HiddenGlobalOffsetZ => self.global_offset[2],
            HiddenPrintfBuffer => self.printf_buffer,
            HiddenHostcallBuffer => self.hostcall_buffer,
            HiddenDefaultQueue => self.default_queue,
            HiddenCompletionAction => self.completion_action,
            HiddenMultigridSyncArg => self.multigrid_sync,
            HiddenHeapV1 => self.heap,
            HiddenBlockCountX | HiddenBlockCountY | HiddenBlockCountZ => {
                let (g, w) = dim(kind as usize - HiddenBlockCountX as usize);
                g / w
            }
            HiddenGroupSizeX | HiddenGroupSizeY | HiddenGroupSizeZ => {
                u64::from(self.workgroup[kind as usize - HiddenGroupSizeX as usize])
            }
            HiddenRemainderX | HiddenRemainderY | HiddenRemainderZ => {
                let (g, w) = dim(kind as usize - HiddenRemainderX as usize);
                g % w
            }
            HiddenGridDims => u64::from(self.dims),
            HiddenPrivateBase => u64::from(self.private_base),
            HiddenSharedBase => u64::from(self.shared_base),
            HiddenQueuePtr => self.queue_ptr,
            HiddenDynamicLdsSize => u64::from(self.dynamic_lds),
            HiddenNone | HiddenOther => 0,
            ByValue | GlobalBuffer | DynamicSharedPointer | Sampler | Image | Pipe | Queue | Other => return None,
        })
    }
}

/// Writes every hidden argument of `args` into `segment` (little-endian, the low `size` bytes
/// of its value). An argument outside the segment is an error; explicit ones are skipped.
pub fn fill(segment: &mut [u8], args: impl IntoIterator<Item = HiddenArg>, v: &LaunchValues) -> Result<()> {
    for a in args {
        let Some(value) = v.value(a.kind) else { continue };
        let (at, size) = (a.offset as usize, (a.size as usize).min(8));
        let dst = segment
            .get_mut(at..at.saturating_add(size))
            .filter(|d| d.len() == size)
            .ok_or(Error::Capacity("kernel-argument segment"))?;
        dst.copy_from_slice(value.to_le_bytes().get(..size).unwrap_or(&[]));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v5_block_counts_sizes_and_remainders() {
        let v = LaunchValues { grid: [1000, 64, 1], workgroup: [256, 16, 1], dims: 3, ..LaunchValues::default() };
        let k = |kind, offset, size| HiddenArg { kind, offset, size };
        let args = [
            k(ValueKind::HiddenBlockCountX, 0, 4),
            k(ValueKind::HiddenBlockCountY, 4, 4),
            k(ValueKind::HiddenGroupSizeX, 12, 2),
            k(ValueKind::HiddenRemainderX, 18, 2),
            k(ValueKind::HiddenRemainderY, 20, 2),
            k(ValueKind::HiddenGridDims, 64, 2),
            k(ValueKind::ByValue, 70, 4),
        ];
        let mut seg = [0xffu8; 72];
        fill(&mut seg, args, &v).unwrap();
        let u32_at = |o: usize| u32::from_le_bytes(seg[o..o + 4].try_into().unwrap());
        let u16_at = |o: usize| u16::from_le_bytes(seg[o..o + 2].try_into().unwrap());
        assert_eq!((u32_at(0), u32_at(4)), (3, 4));
        assert_eq!((u16_at(12), u16_at(18), u16_at(20), u16_at(64)), (256, 1000 % 256, 0, 3));
        assert_eq!(u32_at(68), u32::MAX, "explicit arguments are left alone");
        assert!(fill(&mut seg, [k(ValueKind::HiddenQueuePtr, 68, 8)], &v).is_err());
    }
}
