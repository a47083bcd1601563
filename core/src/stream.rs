//! Stream attributes and handles: flags, priorities, CU masks and the special stream values.
//!
//! The stream operations themselves live on [`Runtime`](crate::Runtime); this module holds the
//! value types a caller passes in and reads back.

use crate::error::{Error, Result};

bitflags::bitflags! {
    /// Stream creation flags (`hipStreamDefault`, `hipStreamNonBlocking`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct StreamFlags: u32 {
        /// `hipStreamNonBlocking`: never synchronises with the null stream.
        const NON_BLOCKING = 0x1;
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for StreamFlags {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "StreamFlags({=u32:#x})", self.bits())
    }
}

impl StreamFlags {
    /// `hipStreamDefault`.
    pub const DEFAULT: StreamFlags = StreamFlags::empty();

    /// Parses raw flags: any bit other than `hipStreamNonBlocking` is `InvalidValue`.
    pub fn from_raw(raw: u32) -> Result<StreamFlags> {
        StreamFlags::from_bits(raw).ok_or(Error::InvalidValue)
    }

    /// Whether the stream takes part in the null stream's implicit synchronisation.
    pub fn is_blocking(self) -> bool {
        !self.contains(StreamFlags::NON_BLOCKING)
    }
}

/// Stream priority (`hip::Stream::Priority`); a lower number is a higher priority.
#[repr(i8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Priority {
    /// -1, the greatest priority.
    High = -1,
    /// 0, the priority of every stream created without one.
    #[default]
    Normal = 0,
    /// 1, the least priority.
    Low = 1,
}

impl Priority {
    /// `hipDeviceGetStreamPriorityRange`'s least priority.
    pub const LEAST: i32 = 1;
    /// `hipDeviceGetStreamPriorityRange`'s greatest priority.
    pub const GREATEST: i32 = -1;

    /// Clamps any integer into the range, as `hipStreamCreateWithPriority` does (never an error).
    pub const fn clamp(p: i32) -> Priority {
        if p <= -1 {
            Priority::High
        } else if p >= 1 {
            Priority::Low
        } else {
            Priority::Normal
        }
    }

    /// The numeric value HIP reports.
    pub const fn value(self) -> i32 {
        self as i32
    }

    /// The amdkfd queue priority (0..15) HIP's three levels map to (docs/kfd-aql.md §0 item 8).
    pub const fn kfd_queue_priority(self) -> u32 {
        match self {
            Priority::Low => 0,
            Priority::Normal => 7,
            Priority::High => 11,
        }
    }
}

/// Most compute units a CU mask can describe (MI300X has 304).
pub const MAX_CUS: usize = 320;
/// Dwords of a CU mask.
pub const CU_MASK_WORDS: usize = MAX_CUS / 32;

/// A compute-unit mask: bit `i` enables CU `i`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CuMask {
    words: [u32; CU_MASK_WORDS],
}

impl CuMask {
    /// Dwords needed to describe `cu_count` CUs (`ceil(cu_count / 32)`).
    pub const fn words_for(cu_count: u32) -> usize {
        cu_count.div_ceil(32) as usize
    }

    /// Every CU of a device with `cu_count` CUs enabled.
    pub fn full(cu_count: u32) -> CuMask {
        let mut words = [0u32; CU_MASK_WORDS];
        let cus = (cu_count as usize).min(MAX_CUS);
        for (i, w) in words.iter_mut().enumerate() {
            let lo = i * 32;
            if cus >= lo + 32 {
                *w = u32::MAX;
            } else if cus > lo {
                *w = (1u32 << (cus - lo)) - 1;
            }
        }
        CuMask { words }
    }

    /// Builds a mask from user dwords for a device with `cu_count` CUs. Bits past the last CU are
    /// ignored (as ROCr's `hsa_amd_queue_cu_set_mask` truncates); an empty list or a mask that
    /// enables no existing CU is `InvalidValue`.
    pub fn from_words(user: &[u32], cu_count: u32) -> Result<CuMask> {
        if user.is_empty() {
            return Err(Error::InvalidValue);
        }
        let full = CuMask::full(cu_count);
        let mut words = [0u32; CU_MASK_WORDS];
        for ((w, u), f) in words.iter_mut().zip(user).zip(full.words.iter()) {
            *w = u & f;
        }
        let mask = CuMask { words };
        if mask.count() == 0 {
            return Err(Error::InvalidValue);
        }
        Ok(mask)
    }

    /// The mask dwords.
    pub fn words(&self) -> &[u32; CU_MASK_WORDS] {
        &self.words
    }

    /// Number of enabled CUs.
    pub fn count(&self) -> u32 {
        self.words.iter().map(|w| w.count_ones()).sum()
    }

    /// Whether CU `cu` is enabled.
    pub fn contains(&self, cu: u32) -> bool {
        self.words.get(cu as usize / 32).is_some_and(|w| w & (1 << (cu % 32)) != 0)
    }

    /// Writes the mask into `out` as `hipExtStreamGetCUMask` does: `out` must hold at least
    /// `ceil(cu_count / 32)` dwords (else `InvalidValue`); dwords past the mask are zeroed.
    pub fn write_to(&self, out: &mut [u32], cu_count: u32) -> Result<()> {
        if out.len() < CuMask::words_for(cu_count) {
            return Err(Error::InvalidValue);
        }
        for (i, o) in out.iter_mut().enumerate() {
            *o = self.words.get(i).copied().unwrap_or(0);
        }
        Ok(())
    }
}

/// A stream handle as the HIP API sees it (`hipStream_t`'s value).
///
/// `0` is the device's legacy null stream, `1` is `hipStreamLegacy`, `2` is
/// `hipStreamPerThread`; created streams carry a generational handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct StreamHandle(pub u64);

impl StreamHandle {
    /// `0`: the legacy null stream of the current device.
    pub const NULL: StreamHandle = StreamHandle(0);
    /// `hipStreamLegacy` (`(hipStream_t)1`).
    pub const LEGACY: StreamHandle = StreamHandle(1);
    /// `hipStreamPerThread` (`(hipStream_t)2`).
    pub const PER_THREAD: StreamHandle = StreamHandle(2);

    /// Whether this is `0` or `hipStreamLegacy`.
    pub const fn is_null_or_legacy(self) -> bool {
        self.0 == 0 || self.0 == 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priority_clamps() {
        assert_eq!(Priority::clamp(i32::MIN), Priority::High);
        assert_eq!(Priority::clamp(-7), Priority::High);
        assert_eq!(Priority::clamp(0), Priority::Normal);
        assert_eq!(Priority::clamp(5), Priority::Low);
        assert_eq!(Priority::clamp(i32::MAX).value(), 1);
    }

    #[test]
    fn cu_masks() {
        let full = CuMask::full(104);
        assert_eq!(full.count(), 104);
        assert_eq!(full.words()[3], 0xff);
        assert!(full.contains(103) && !full.contains(104));
        assert_eq!(CuMask::from_words(&[], 104), Err(Error::InvalidValue));
        assert_eq!(CuMask::from_words(&[0, 0, 0, 0x100], 104), Err(Error::InvalidValue));
        let m = CuMask::from_words(&[0xf, 0, 0, 0xffff_ffff, 7], 104).unwrap();
        assert_eq!(m.count(), 4 + 8);
        let mut out = [9u32; 2];
        assert_eq!(m.write_to(&mut out, 104), Err(Error::InvalidValue));
        let mut out = [9u32; 6];
        m.write_to(&mut out, 104).unwrap();
        assert_eq!(out, [0xf, 0, 0, 0xff, 0, 0]);
        assert_eq!(StreamFlags::from_raw(2), Err(Error::InvalidValue));
        assert_eq!(StreamFlags::from_raw(1).map(|f| f.is_blocking()), Ok(false));
    }
}
