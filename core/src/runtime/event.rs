//! Events: create, record, query, synchronize, elapsed time, stream waits.
//!
//! An event's state sits behind its own lock; recording takes the event's lock, then the
//! stream's. While no capture is alive nothing else is locked.

use portable_atomic::Ordering;

use super::submit::Command;
use super::{ticks_to_ms, Runtime, EVENT_TAG};
use crate::aql::Condition;
use crate::backend::{Backend, Timeout};
#[cfg(feature = "capture")]
use crate::capture::CaptureStatus;
#[cfg(feature = "capture")]
use crate::capture::DepSet;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::event::{check_record_flags, EventFlags, EventHandle};
use crate::live::LiveSignal;
use crate::slot::Table;
use crate::slots::event::{EventInner, Recorded};
use crate::slots::stream::StreamKind;
use crate::slots::SlotState;
use crate::stream::StreamHandle;
use crate::table::{self, Lookup};
use crate::thread::ThreadKeys;

impl<B: Backend, K: ThreadKeys, C: Config> Runtime<B, K, C> {
    /// `hipEventCreateWithFlags` on the current device.
    pub fn event_create(&self, flags: u32) -> Result<EventHandle> {
        let flags = EventFlags::from_raw(flags)?;
        self.device_count()?;
        let device = self.current_device();
        let mut st = self.lock();
        let i = match self.take_event_slot(&mut st) {
            Some(i) => i,
            None => {
                self.reap(&mut st);
                self.take_event_slot(&mut st).ok_or(Error::OutOfMemory)?
            }
        };
        let e = self.events.slots().get(i).ok_or(Error::OutOfMemory)?;
        let mut inner = e.inner.lock();
        if let Some(s) = inner.signal {
            s.get().reset(0);
        }
        *inner = EventInner {
            flags,
            device,
            point: None,
            signal: inner.signal,
            spare: inner.spare,
            recorded: Recorded::Never,
            // A reused slot must not inherit its previous event's capture record.
            #[cfg(feature = "capture")]
            captured: None,
            #[cfg(feature = "capture")]
            snapshot: DepSet::EMPTY,
        };
        let g = e.word.occupy();
        Ok(EventHandle(table::encode(EVENT_TAG, g, i)))
    }

    /// If the event's last record is still pending, makes the drained spare signal (created
    /// on first need) the event's signal, so a new record does not add to the old one's count
    /// (hipEventQuery reflects the latest record only). Returns whether it swapped. Without a
    /// drained spare (or a signal for one) the record shares the pending signal, as before.
    pub(super) fn swap_if_pending(&self, ev: &mut EventInner) -> bool {
        let Some(signal) = ev.signal else { return false };
        if signal.load() <= 0 {
            return false;
        }
        let spare = match ev.spare {
            Some(s) => s,
            None => match LiveSignal::create(&self.backend, 0) {
                Ok(s) => {
                    ev.spare = Some(s);
                    s
                }
                Err(_) => return false,
            },
        };
        if spare.load() > 0 {
            return false;
        }
        spare.get().reset(0);
        core::mem::swap(&mut ev.signal, &mut ev.spare);
        true
    }

    pub(super) fn event_slot(&self, e: EventHandle) -> Result<usize> {
        if e == EventHandle::NULL {
            return Err(Error::InvalidHandle);
        }
        table::require(self.lookup_event(e.0), Error::ContextIsDestroyed, Error::InvalidHandle)
    }

    /// The event slot of `e`, locked and checked live again under its lock.
    fn locked_event(&self, e: EventHandle) -> Result<(usize, lock_api::MutexGuard<'_, K::RawMutex, EventInner>)> {
        let i = self.event_slot(e)?;
        let slot = self.events.slots().get(i).ok_or(Error::InvalidHandle)?;
        let inner = slot.inner.lock();
        table::require(self.lookup_event(e.0), Error::ContextIsDestroyed, Error::InvalidHandle)?;
        Ok((i, inner))
    }

    /// `hipEventDestroy`: null is `InvalidHandle`, a destroyed event `ContextIsDestroyed`. A
    /// pending record still completes.
    pub fn event_destroy(&self, e: EventHandle) -> Result<()> {
        let mut st = self.lock();
        let (i, inner) = self.locked_event(e)?;
        let pending = Self::record_pending(&inner);
        let slot = self.events.slots().get(i).ok_or(Error::InvalidHandle)?;
        slot.word.vacate(if pending { SlotState::Draining } else { SlotState::Free });
        drop(inner);
        let lists = &mut st.events;
        let mut head = if pending { lists.draining } else { lists.free };
        self.push_event(&mut head, i);
        if pending {
            st.events.draining = head;
        } else {
            st.events.free = head;
        }
        Ok(())
    }

    /// `hipEventRecordWithFlags` (`flags` 0 or 1): the event completes once all work enqueued
    /// on `s` so far has completed.
    pub fn event_record(&self, e: EventHandle, s: StreamHandle, flags: u32) -> Result<()> {
        check_record_flags(flags)?;
        self.event_slot(e)?;
        let si = self.resolve_for_work(s)?;
        #[cfg(feature = "capture")]
        if self.any_capture() {
            let mut st = self.lock();
            let i = self.event_slot(e)?;
            match self.capture_status_of(&st, si) {
                CaptureStatus::Active if self.capture_of(&st, si).is_some() => {
                    return self.capture_event_record(&mut st, si, i, e, flags == 1);
                }
                CaptureStatus::Invalidated if self.capture_of(&st, si).is_some() => {
                    return Err(Error::StreamCaptureInvalidated);
                }
                _ => {}
            }
        }
        let (_, mut ev) = self.locked_event(e)?;
        let slot = self.stream(si)?;
        let a = slot.attrs();
        if ev.device != a.device {
            return Err(Error::InvalidHandle);
        }
        let recorded = if a.kind == StreamKind::Null { Recorded::OnNull } else { Recorded::On(self.handle_of(si).0) };
        // A timed event completes a signal of its own (its timestamp); an untimed one needs only
        // the stream's progress point, after a counted no-op that carries the stream's implicit
        // synchronisation.
        let timed = !ev.flags.contains(EventFlags::DISABLE_TIMING);
        if timed && ev.signal.is_none() {
            ev.signal = Some(LiveSignal::create(&self.backend, 0)?);
        }
        let swapped = timed && self.swap_if_pending(&mut ev);
        let cmd = match (timed, ev.signal) {
            (true, Some(signal)) => Command::EventRecord(signal),
            _ => Command::Marker,
        };
        let result = {
            let generation = self.generation_of(si);
            let mut inner = slot.inner.lock();
            if !Self::still_live(slot, generation) {
                Err(Error::ContextIsDestroyed)
            } else if a.detached {
                Err(Error::StreamDetached)
            } else {
                self.check_fault(&inner).and_then(|_| self.submit_locked(si, slot, &mut inner, &cmd))
            }
        };
        match result {
            Ok(()) => {
                ev.recorded = recorded;
                ev.point = slot.point();
                // A record outside any capture makes the event a plain event again: a later wait
                // is an ordinary wait, not a join of the capture it was last recorded in.
                #[cfg(feature = "capture")]
                {
                    ev.captured = None;
                    ev.snapshot = DepSet::EMPTY;
                }
            }
            // The record never happened: the event goes back to its previous record.
            Err(_) if swapped => {
                let ev: &mut EventInner = &mut ev;
                core::mem::swap(&mut ev.signal, &mut ev.spare)
            }
            Err(_) => {}
        }
        result
    }

    /// `hipEventQuery`: `Ok` if complete or never recorded, `NotReady` otherwise.
    pub fn event_query(&self, e: EventHandle) -> Result<()> {
        self.event_wait(e, Timeout::ZERO)
    }

    /// Whether the event's last record has not completed yet.
    pub(super) fn record_pending(ev: &EventInner) -> bool {
        Self::record_target(ev).is_some_and(|(s, below)| s.load() >= below)
    }

    /// What a record is complete on: its progress point, or (a graph's record) its signal at 0.
    fn record_target(ev: &EventInner) -> Option<(LiveSignal, i64)> {
        match (ev.recorded, ev.point, ev.signal) {
            (Recorded::Never, _, _) => None,
            (_, Some((p, n)), _) => Some((p, 1 - n as i64)),
            (_, None, Some(s)) => Some((s, 1)),
            (_, None, None) => None,
        }
    }

    /// Waits (up to `timeout`) for the event's last record, after the capture checks of
    /// `hipEventQuery` and `hipEventSynchronize`.
    fn event_wait(&self, e: EventHandle, timeout: Timeout) -> Result<()> {
        #[cfg(feature = "capture")]
        if self.any_capture() {
            let mut st = self.lock();
            let i = self.event_slot(e)?;
            self.check_event_capture(&mut st, i)?;
        }
        let target = {
            let (_, ev) = self.locked_event(e)?;
            Self::record_target(&ev)
        };
        match target {
            Some((s, below)) => self.backend.signal_wait(s.handle(), Condition::Lt, below, timeout).map(|_| ()),
            None => Ok(()),
        }
    }

    /// `hipEventSynchronize`.
    pub fn event_synchronize(&self, e: EventHandle) -> Result<()> {
        self.event_synchronize_timeout(e, Timeout::NEVER)
    }

    /// `hipEventSynchronize` with a bound (`NotReady` when it runs out).
    pub fn event_synchronize_timeout(&self, e: EventHandle, timeout: Timeout) -> Result<()> {
        self.event_wait(e, timeout)
    }

    /// `hipEventElapsedTime` in milliseconds from `start` to `stop`.
    pub fn event_elapsed_time(&self, start: EventHandle, stop: EventHandle) -> Result<f32> {
        let a = self.event_snapshot(start)?;
        let b = self.event_snapshot(stop)?;
        if a.device != b.device {
            return Err(Error::InvalidHandle);
        }
        let untimed = |e: &EventInner| e.recorded == Recorded::Never || e.flags.contains(EventFlags::DISABLE_TIMING);
        if untimed(&a) || untimed(&b) {
            return Err(Error::InvalidHandle);
        }
        for ev in [&a, &b] {
            if let Some((s, below)) = Self::record_target(ev) {
                self.backend.signal_wait(s.handle(), Condition::Lt, below, Timeout::ZERO)?;
            }
        }
        let (Some(sa), Some(sb)) = (a.signal, b.signal) else { return Err(Error::InvalidHandle) };
        let hz = self.backend.device_info(a.device)?.timestamp_frequency;
        // Ordering: the Acquire loads in signal_wait ordered these after the completions.
        let ticks = sb.get().end_ts.load(Ordering::Relaxed) as i64 - sa.get().end_ts.load(Ordering::Relaxed) as i64;
        Ok(ticks_to_ms(ticks, hz))
    }

    fn event_snapshot(&self, e: EventHandle) -> Result<EventInner> {
        let (_, ev) = self.locked_event(e)?;
        Ok(EventInner {
            flags: ev.flags,
            device: ev.device,
            point: ev.point,
            signal: ev.signal,
            spare: ev.spare,
            recorded: ev.recorded,
            #[cfg(feature = "capture")]
            captured: ev.captured,
            #[cfg(feature = "capture")]
            snapshot: ev.snapshot,
        })
    }

    /// `hipStreamWaitEvent` (`flags` 0 or 1): later work of `s` waits for the event's last
    /// record. An event never recorded, already complete, or recorded on a stream that has since
    /// been destroyed adds no wait (as HIP validates the recording stream).
    #[cfg_attr(not(feature = "capture"), allow(unused_variables))]
    pub fn stream_wait_event(&self, s: StreamHandle, e: EventHandle, flags: u32) -> Result<()> {
        if flags > 1 {
            return Err(Error::InvalidValue);
        }
        self.event_slot(e)?;
        let si = self.resolve_for_work(s)?;
        #[cfg(feature = "capture")]
        if self.any_capture() {
            let mut st = self.lock();
            let i = self.event_slot(e)?;
            if self.capture_wait_event(&mut st, s, si, i, e, flags == 1)? {
                return Ok(());
            }
        }
        let (_, ev) = self.locked_event(e)?;
        let live_source = match ev.recorded {
            Recorded::Never => false,
            Recorded::OnNull => true,
            Recorded::On(raw) => matches!(self.lookup_stream(raw), Lookup::Live(_)),
        };
        let cmd = match (live_source, ev.point, ev.signal) {
            (false, _, _) => None,
            (true, Some((p, n)), _) => (p.load() > -(n as i64)).then_some(Command::WaitPoint(p.handle(), n)),
            (true, None, Some(sig)) => (sig.load() > 0).then_some(Command::WaitEvent(sig.handle())),
            (true, None, None) => None,
        };
        drop(ev);
        match cmd {
            Some(cmd) => self.submit(s, cmd),
            None => Ok(()),
        }
    }
}
