//! Event flags and handles (`hipEventCreateWithFlags` rules of docs/hip-semantics.md §2.4).

use crate::error::{Error, Result};

bitflags::bitflags! {
    /// Event creation flags.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct EventFlags: u32 {
        /// `hipEventBlockingSync`.
        const BLOCKING_SYNC = 0x1;
        /// `hipEventDisableTiming`.
        const DISABLE_TIMING = 0x2;
        /// `hipEventInterprocess` (requires `DISABLE_TIMING`).
        const INTERPROCESS = 0x4;
        /// `hipEventDisableSystemFence`.
        const DISABLE_SYSTEM_FENCE = 0x2000_0000;
        /// `hipEventReleaseToDevice`.
        const RELEASE_TO_DEVICE = 0x4000_0000;
        /// `hipEventReleaseToSystem`.
        const RELEASE_TO_SYSTEM = 0x8000_0000;
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for EventFlags {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "EventFlags({=u32:#x})", self.bits())
    }
}

impl EventFlags {
    /// Parses and checks raw flags: unknown bits, more than one of the three fence flags, and
    /// `INTERPROCESS` without `DISABLE_TIMING` are `InvalidValue`.
    pub fn from_raw(raw: u32) -> Result<EventFlags> {
        let f = EventFlags::from_bits(raw).ok_or(Error::InvalidValue)?;
        let fences =
            f & (EventFlags::DISABLE_SYSTEM_FENCE | EventFlags::RELEASE_TO_DEVICE | EventFlags::RELEASE_TO_SYSTEM);
        if fences.bits().count_ones() > 1 {
            return Err(Error::InvalidValue);
        }
        if f.contains(EventFlags::INTERPROCESS) && !f.contains(EventFlags::DISABLE_TIMING) {
            return Err(Error::InvalidValue);
        }
        Ok(f)
    }
}

/// An event handle (`hipEvent_t`'s value); `0` is the null event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EventHandle(pub u64);

impl EventHandle {
    /// The null event.
    pub const NULL: EventHandle = EventHandle(0);
}

/// `hipEventRecordWithFlags` flags: only `hipEventRecordDefault` (0) and `hipEventRecordExternal`
/// (1) exist.
pub fn check_record_flags(flags: u32) -> Result<()> {
    if flags > 1 {
        Err(Error::InvalidValue)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_rules() {
        assert!(EventFlags::from_raw(0).is_ok());
        assert!(EventFlags::from_raw(0x3).is_ok());
        assert_eq!(EventFlags::from_raw(0x0800_0000), Err(Error::InvalidValue));
        assert_eq!(EventFlags::from_raw(0x4000_0000 | 0x8000_0000), Err(Error::InvalidValue));
        assert_eq!(EventFlags::from_raw(0x2000_0000 | 0x4000_0000), Err(Error::InvalidValue));
        assert!(EventFlags::from_raw(0x4000_0000).is_ok());
        assert_eq!(EventFlags::from_raw(0x4), Err(Error::InvalidValue));
        assert!(EventFlags::from_raw(0x6).is_ok());
    }
}
