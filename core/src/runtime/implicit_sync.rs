//! The null stream's implicit synchronisation (`docs/hip-semantics.md`, "Implicit
//! synchronisation") and the signals of host functions.
//!
//! Rule 1: work on the null stream waits for everything enqueued before it on the device's
//! blocking streams, destroyed ones whose work is still pending included. Rule 2: work on a
//! blocking stream waits for everything enqueued before it on the null stream. Each wait is one
//! counted barrier-value packet on the other stream's progress point (`progress <
//! 1 - submitted`), read from atomics: no lock of the other stream, nothing published into its
//! queue. A stream that is idle adds nothing.

use super::submit::{Batch, Spec};
use super::Runtime;
use crate::aql::Condition;
use crate::backend::{Backend, Timeout};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::live::LiveSignal;
use crate::slot::Table;
use crate::slots::stream::{StreamInner, StreamKind, StreamSlot};
use crate::slots::SlotState;
use crate::thread::ThreadKeys;

/// Bound on waiting for a host-function signal pair to come free.
const HOST_SIGNAL_WAIT: Timeout = Timeout::SECOND;
/// `release_at` of a pair whose consuming batch is not published yet.
const PENDING: u64 = u64::MAX;

impl<B: Backend, K: ThreadKeys, C: Config> Runtime<B, K, C> {
    /// Adds a wait for `p`'s work so far to `batch`, if it has pending work.
    fn wait_for(
        &self,
        p: &StreamSlot<K::RawMutex>,
        slot: &StreamSlot<K::RawMutex>,
        inner: &mut StreamInner,
        batch: &mut Batch<'_>,
    ) -> Result<()> {
        if let Some((signal, n)) = p.point() {
            if signal.load() > -(n as i64) {
                self.flush_if_full(slot, inner, batch)?;
                batch.push(Spec::Wait(signal.handle(), 1 - n as i64))?;
            }
        }
        Ok(())
    }

    /// The implicit dependencies of work on slot `i` (rules 1 and 2), pushed into `batch`
    /// (earlier batches are published when there are many).
    pub(super) fn implicit_deps(
        &self,
        i: usize,
        slot: &StreamSlot<K::RawMutex>,
        inner: &mut StreamInner,
        batch: &mut Batch<'_>,
    ) -> Result<()> {
        let a = slot.attrs();
        match a.kind {
            StreamKind::Null => {
                for (p, ps) in self.stream_slots().iter().enumerate() {
                    if p == i || ps.word.state() == SlotState::Free {
                        continue;
                    }
                    let pa = ps.attrs();
                    if pa.is_blocking_user() && pa.device == a.device {
                        self.wait_for(ps, slot, inner, batch)?;
                    }
                }
            }
            _ if a.flags.is_blocking() => {
                if let Some(n) = self.existing_null_stream(a.device) {
                    if let Ok(ns) = self.stream(n) {
                        self.wait_for(ns, slot, inner, batch)?;
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Whether [`implicit_deps`](Self::implicit_deps) adds nothing for work on `slot`: a
    /// non-blocking stream, or a blocking stream other than the null stream whose device's null
    /// stream has nothing pending. The null stream itself answers `false` (its rule 1 scans the
    /// device's streams).
    #[cfg(target_has_atomic = "64")]
    #[inline]
    pub(super) fn no_implicit_deps(&self, slot: &StreamSlot<K::RawMutex>) -> bool {
        let a = slot.attrs();
        match a.kind {
            StreamKind::Null => false,
            _ if a.flags.is_blocking() => {
                self.existing_null_stream(a.device).and_then(|n| self.stream(n).ok()).is_none_or(StreamSlot::is_idle)
            }
            _ => true,
        }
    }

    // ----- host-function signals -------------------------------------------------------------

    /// A pair of signals (start, done), both at 1, for a host function stream `consumer` is about
    /// to publish; it comes free once the stream's barrier after the call has completed.
    pub(super) fn take_host_signals(&self, consumer: usize) -> Result<(usize, LiveSignal, LiveSignal)> {
        let mut pool = self.host_signals.lock();
        let n = pool.slots.slots().len();
        let mut found = None;
        for round in 0..2 {
            let start = pool.cursor;
            for k in 0..n {
                let idx = (start + k) % n;
                if self.host_pair_free(pool.slots.slots().get(idx)) {
                    found = Some(idx);
                    break;
                }
            }
            if found.is_some() || round == 1 {
                break;
            }
            // Wait (bounded) for the oldest pair's consumer to move on.
            let oldest = pool
                .slots
                .slots()
                .iter()
                .filter(|m| m.busy && m.release_at != PENDING)
                .min_by_key(|m| m.release_at)
                .map(|m| (m.consumer, m.release_at));
            if let Some((consumer, release_at)) = oldest {
                if let Some(p) = self.stream(consumer as usize).ok().and_then(|s| s.progress.get()) {
                    let _ =
                        self.backend.signal_wait(p.handle(), Condition::Lt, 1 - release_at as i64, HOST_SIGNAL_WAIT);
                }
            }
        }
        let idx = found.ok_or(Error::OutOfMemory)?;
        let slot = pool.slots.slots_mut().get_mut(idx).ok_or(Error::OutOfMemory)?;
        let pair = match slot.pair {
            Some((s, d)) => {
                s.get().reset(1);
                d.get().reset(1);
                (s, d)
            }
            None => {
                let s = LiveSignal::create(&self.backend, 1)?;
                let d = LiveSignal::create(&self.backend, 1)?;
                slot.pair = Some((s, d));
                (s, d)
            }
        };
        slot.busy = true;
        slot.consumer = consumer as u32;
        slot.release_at = PENDING;
        pool.cursor = (idx + 1) % n.max(1);
        Ok((idx, pair.0, pair.1))
    }

    /// Sets when pair `idx` comes free: once stream `consumer` has completed `at` counted
    /// packets (`u64::MAX`: now, it was never published).
    pub(super) fn release_host_signals(&self, idx: usize, consumer: usize, at: u64) {
        let mut pool = self.host_signals.lock();
        if let Some(m) = pool.slots.slots_mut().get_mut(idx) {
            if at == u64::MAX {
                m.busy = false;
            } else {
                m.consumer = consumer as u32;
                m.release_at = at;
            }
        }
    }

    /// Whether a pair can be taken: never used, or its consumer's barrier has passed.
    fn host_pair_free(&self, m: Option<&super::HostSignalSlot>) -> bool {
        let Some(m) = m else { return false };
        if !m.busy {
            return true;
        }
        if m.release_at == PENDING {
            return false;
        }
        // Progress counts are cumulative per slot, so a consumer slot that has been reused
        // since still answers for this point.
        self.stream(m.consumer as usize)
            .ok()
            .and_then(|s| s.progress.get())
            .is_some_and(|p| p.load() <= -(m.release_at as i64))
    }
}
