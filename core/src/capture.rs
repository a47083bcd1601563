//! Stream-capture vocabulary: statuses, modes, dependency sets (docs/hip-semantics.md §4).
//!
//! The capture state machine itself lives with the stream table in [`Runtime`](crate::Runtime);
//! this module holds the value types it is made of and its one transition function.

use crate::error::{Error, Result};
use crate::graph::NodeId;

/// `hipStreamCaptureStatus`.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CaptureStatus {
    /// Not capturing.
    #[default]
    None = 0,
    /// Capturing: operations become graph nodes.
    Active = 1,
    /// The capture failed; operations return `StreamCaptureInvalidated` until it is ended.
    Invalidated = 2,
}

/// `hipStreamCaptureMode`.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CaptureMode {
    /// Potentially unsafe calls are prohibited on every thread while the capture lasts.
    #[default]
    Global = 0,
    /// Prohibited on the capturing thread only.
    ThreadLocal = 1,
    /// Never prohibited.
    Relaxed = 2,
}

impl CaptureMode {
    /// Parses HIP's value; anything else is `InvalidValue`.
    pub fn from_raw(raw: u32) -> Result<CaptureMode> {
        Ok(match raw {
            0 => CaptureMode::Global,
            1 => CaptureMode::ThreadLocal,
            2 => CaptureMode::Relaxed,
            _ => return Err(Error::InvalidValue),
        })
    }
}

/// `hipStreamUpdateCaptureDependencies` flags.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DependencyUpdate {
    /// `hipStreamAddCaptureDependencies`: append, deduplicated.
    Add = 0,
    /// `hipStreamSetCaptureDependencies`: replace; the old set moves to the removed set.
    Set = 1,
}

impl DependencyUpdate {
    /// Parses HIP's value; anything else is `InvalidValue`.
    pub fn from_raw(raw: u32) -> Result<DependencyUpdate> {
        match raw {
            0 => Ok(DependencyUpdate::Add),
            1 => Ok(DependencyUpdate::Set),
            _ => Err(Error::InvalidValue),
        }
    }
}

/// Most nodes one dependency set holds.
pub const MAX_DEPS: usize = 16;

/// A small set of graph nodes (a stream's `lastCapturedNodes_`, an event's snapshot).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DepSet {
    nodes: [NodeId; MAX_DEPS],
    len: u8,
}

impl DepSet {
    /// The empty set.
    pub const EMPTY: DepSet = DepSet { nodes: [NodeId(0); MAX_DEPS], len: 0 };

    /// The set `{node}`.
    pub fn one(node: NodeId) -> DepSet {
        let mut s = DepSet::EMPTY;
        if let Some(first) = s.nodes.first_mut() {
            *first = node;
            s.len = 1;
        }
        s
    }

    /// The nodes.
    pub fn as_slice(&self) -> &[NodeId] {
        self.nodes.get(..usize::from(self.len)).unwrap_or(&[])
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether `n` is in the set.
    pub fn contains(&self, n: NodeId) -> bool {
        self.as_slice().contains(&n)
    }

    /// Adds `n` unless present; `OutOfMemory` when full.
    pub fn insert(&mut self, n: NodeId) -> Result<()> {
        if self.contains(n) {
            return Ok(());
        }
        let slot = self.nodes.get_mut(usize::from(self.len)).ok_or(Error::OutOfMemory)?;
        *slot = n;
        self.len += 1;
        Ok(())
    }

    /// Adds every node of `other` (deduplicated).
    pub fn extend(&mut self, other: &DepSet) -> Result<()> {
        for &n in other.as_slice() {
            self.insert(n)?;
        }
        Ok(())
    }
}

/// What `hipStreamGetCaptureInfo_v2` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaptureInfo {
    /// The status.
    pub status: CaptureStatus,
    /// The capture id (meaningful only while Active).
    pub id: u64,
    /// The capture graph's handle (meaningful only while Active).
    pub graph: u64,
    /// The stream's current dependency set (meaningful only while Active).
    pub dependencies: DepSet,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dep_sets_dedupe() {
        let mut s = DepSet::one(NodeId(3));
        s.insert(NodeId(3)).unwrap();
        s.insert(NodeId(1)).unwrap();
        assert_eq!(s.as_slice(), &[NodeId(3), NodeId(1)]);
        let mut t = DepSet::EMPTY;
        for i in 0..MAX_DEPS as u16 {
            t.insert(NodeId(i)).unwrap();
        }
        assert_eq!(t.insert(NodeId(99)), Err(Error::OutOfMemory));
        assert_eq!(CaptureMode::from_raw(3), Err(Error::InvalidValue));
        assert_eq!(DependencyUpdate::from_raw(2), Err(Error::InvalidValue));
    }
}
