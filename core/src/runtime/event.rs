//! Events: create, record, query, synchronize, elapsed time, stream waits.
//!
//! An event's state sits behind its own lock; recording takes the event's lock, then the
//! stream's. While no capture is alive nothing else is locked.

use portable_atomic::Ordering;

use super::submit::Command;
use super::{ticks_to_ms, EventInner, EventSlot, Recorded, Runtime, SlotState, StreamKind, EVENT_TAG};
use crate::aql::Condition;
use crate::backend::{Backend, Timeout};
use crate::capture::{CaptureStatus, DepSet};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::event::{check_record_flags, EventFlags, EventHandle};
use crate::live::LiveSignal;
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
        let e = self.events.slots_of().get(i).ok_or(Error::OutOfMemory)?;
        let mut inner = e.inner.lock();
        let signal = match inner.signal {
            Some(s) => {
                s.get().reset(0);
                s
            }
            None => match LiveSignal::create(&self.backend, 0) {
                Ok(s) => s,
                Err(err) => {
                    drop(inner);
                    let mut head = st.events.free;
                    self.push_event(&mut head, i);
                    st.events.free = head;
                    return Err(err);
                }
            },
        };
        *inner = EventInner {
            flags,
            device,
            signal: Some(signal),
            spare: inner.spare,
            recorded: Recorded::Never,
            // A reused slot must not inherit its previous event's capture record.
            captured: None,
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
        let slot = self.events.slots_of().get(i).ok_or(Error::InvalidHandle)?;
        let inner = slot.inner.lock();
        table::require(self.lookup_event(e.0), Error::ContextIsDestroyed, Error::InvalidHandle)?;
        Ok((i, inner))
    }

    /// `hipEventDestroy`: null is `InvalidHandle`, a destroyed event `ContextIsDestroyed`. A
    /// pending record still completes.
    pub fn event_destroy(&self, e: EventHandle) -> Result<()> {
        let mut st = self.lock();
        let (i, inner) = self.locked_event(e)?;
        let pending = inner.signal.is_some_and(|s| s.load() > 0);
        let slot = self.events.slots_of().get(i).ok_or(Error::InvalidHandle)?;
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
        let swapped = self.swap_if_pending(&mut ev);
        let signal = ev.signal.ok_or(Error::InvalidHandle)?;
        let result = {
            let generation = self.generation_of(si);
            let mut inner = slot.inner.lock();
            if !Self::still_live(slot, generation) {
                Err(Error::ContextIsDestroyed)
            } else if a.detached {
                Err(Error::StreamDetached)
            } else {
                self.check_fault(&inner)
                    .and_then(|_| self.submit_locked(si, slot, &mut inner, &Command::EventRecord(signal)))
            }
        };
        match result {
            Ok(()) => {
                ev.recorded = recorded;
                // A record outside any capture makes the event a plain event again: a later wait
                // is an ordinary wait, not a join of the capture it was last recorded in.
                ev.captured = None;
                ev.snapshot = DepSet::EMPTY;
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
        let (signal, recorded) = self.event_for_wait(e)?;
        if recorded == Recorded::Never {
            return Ok(());
        }
        let signal = signal.ok_or(Error::InvalidHandle)?;
        self.backend.signal_wait(signal.handle(), Condition::Lt, 1, Timeout::ZERO).map(|_| ())
    }

    /// The event's signal and record, after the capture checks of `hipEventQuery` and
    /// `hipEventSynchronize`.
    fn event_for_wait(&self, e: EventHandle) -> Result<(Option<LiveSignal>, Recorded)> {
        if self.any_capture() {
            let mut st = self.lock();
            let i = self.event_slot(e)?;
            self.check_event_capture(&mut st, i)?;
        }
        let (_, ev) = self.locked_event(e)?;
        Ok((ev.signal, ev.recorded))
    }

    /// `hipEventSynchronize`.
    pub fn event_synchronize(&self, e: EventHandle) -> Result<()> {
        self.event_synchronize_timeout(e, Timeout::NEVER)
    }

    /// `hipEventSynchronize` with a bound (`NotReady` when it runs out).
    pub fn event_synchronize_timeout(&self, e: EventHandle, timeout: Timeout) -> Result<()> {
        let (signal, recorded) = self.event_for_wait(e)?;
        if recorded == Recorded::Never {
            return Ok(());
        }
        let signal = signal.ok_or(Error::InvalidHandle)?;
        self.backend.signal_wait(signal.handle(), Condition::Lt, 1, timeout).map(|_| ())
    }

    /// `hipEventElapsedTime` in milliseconds from `start` to `stop`.
    pub fn event_elapsed_time(&self, start: EventHandle, stop: EventHandle) -> Result<f32> {
        let a = self.event_snapshot(start)?;
        let b = self.event_snapshot(stop)?;
        if a.1 != b.1 {
            return Err(Error::InvalidHandle);
        }
        let untimed = |e: &(Option<LiveSignal>, u32, Recorded, EventFlags)| {
            e.2 == Recorded::Never || e.3.contains(EventFlags::DISABLE_TIMING)
        };
        if untimed(&a) || untimed(&b) {
            return Err(Error::InvalidHandle);
        }
        let (Some(sa), Some(sb)) = (a.0, b.0) else { return Err(Error::InvalidHandle) };
        for s in [sa, sb] {
            self.backend.signal_wait(s.handle(), Condition::Lt, 1, Timeout::ZERO)?;
        }
        let hz = self.backend.device_info(a.1)?.timestamp_frequency;
        // Ordering: the Acquire loads in signal_wait ordered these after the completions.
        let ticks = sb.get().end_ts.load(Ordering::Relaxed) as i64 - sa.get().end_ts.load(Ordering::Relaxed) as i64;
        Ok(ticks_to_ms(ticks, hz))
    }

    fn event_snapshot(&self, e: EventHandle) -> Result<(Option<LiveSignal>, u32, Recorded, EventFlags)> {
        let (_, ev) = self.locked_event(e)?;
        Ok((ev.signal, ev.device, ev.recorded, ev.flags))
    }

    /// `hipStreamWaitEvent` (`flags` 0 or 1): later work of `s` waits for the event's last
    /// record. An event never recorded, already complete, or recorded on a stream that has since
    /// been destroyed adds no wait (as HIP validates the recording stream).
    pub fn stream_wait_event(&self, s: StreamHandle, e: EventHandle, flags: u32) -> Result<()> {
        if flags > 1 {
            return Err(Error::InvalidValue);
        }
        self.event_slot(e)?;
        let si = self.resolve_for_work(s)?;
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
        let signal = ev.signal.filter(|s| live_source && s.load() > 0);
        drop(ev);
        match signal {
            Some(sig) => self.submit(s, Command::WaitEvent(sig.handle())),
            None => Ok(()),
        }
    }
}

/// Slices of the event table.
trait EventTable<R: lock_api::RawMutex> {
    fn slots_of(&self) -> &[EventSlot<R>];
}

impl<R: lock_api::RawMutex, T: crate::config::Table<EventSlot<R>>> EventTable<R> for T {
    fn slots_of(&self) -> &[EventSlot<R>] {
        self.slots()
    }
}
