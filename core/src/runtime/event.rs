//! Events: create, record, query, synchronize, elapsed time, stream waits.

use portable_atomic::Ordering;

use super::{
    lookup_event, lookup_stream, ticks_to_ms, Command, EventSlot, Recorded, Runtime, SlotState, State, StreamKind,
    EVENT_TAG,
};
use crate::aql::Condition;
use crate::backend::{Backend, Timeout};
use crate::capture::{CaptureStatus, DepSet};
use crate::error::{Error, Result};
use crate::event::{check_record_flags, EventFlags, EventHandle};
use crate::stream::StreamHandle;
use crate::table::{self, Lookup};
use crate::thread::ThreadKeys;

impl<
        B: Backend,
        K: ThreadKeys,
        const S: usize,
        const E: usize,
        const T: usize,
        const M: usize,
        const G: usize,
        const N: usize,
        const X: usize,
    > Runtime<B, K, S, E, T, M, G, N, X>
{
    // ----- events --------------------------------------------------------------------------

    /// `hipEventCreateWithFlags` on the current device.
    pub fn event_create(&self, flags: u32) -> Result<EventHandle> {
        let flags = EventFlags::from_raw(flags)?;
        self.device_count()?;
        let mut st = self.state.lock();
        let device = self.current_device(&st);
        let i = match st.events.iter().position(|e| e.state == SlotState::Free) {
            Some(i) => i,
            None => {
                self.reap(&mut st);
                st.events.iter().position(|e| e.state == SlotState::Free).ok_or(Error::OutOfMemory)?
            }
        };
        let e = st.events.get_mut(i).ok_or(Error::OutOfMemory)?;
        if e.signal.is_null() {
            e.signal = self.backend.signal_create(0)?;
        } else {
            // SAFETY: cached event signals stay allocated.
            unsafe { e.signal.get() }.reset(0);
        }
        let g = e.generation.occupy();
        e.state = SlotState::Live;
        e.flags = flags;
        e.device = device;
        e.recorded = Recorded::Never;
        // A reused slot must not inherit its previous event's capture record.
        e.captured = None;
        e.snapshot = DepSet::EMPTY;
        Ok(EventHandle(table::encode(EVENT_TAG, g, i)))
    }

    /// If the event's last record is still pending, makes the drained spare signal (created
    /// on first need) the event's signal, so a new record does not add to the old one's count
    /// (hipEventQuery reflects the latest record only). Returns whether it swapped. Without a
    /// drained spare (or a signal for one) the record shares the pending signal, as before.
    pub(super) fn swap_if_pending(&self, ev: &mut EventSlot) -> bool {
        // SAFETY: a live event's signal is live.
        if unsafe { ev.signal.get() }.load() <= 0 {
            return false;
        }
        if ev.spare.is_null() {
            match self.backend.signal_create(0) {
                Ok(sig) => ev.spare = sig,
                Err(_) => return false,
            }
        }
        // SAFETY: a spare, once created, stays allocated with its slot.
        let spare = unsafe { ev.spare.get() };
        if spare.load() > 0 {
            return false;
        }
        spare.reset(0);
        core::mem::swap(&mut ev.signal, &mut ev.spare);
        true
    }

    pub(super) fn event_slot(st: &State<B::Queue, S, E, T, M, G, N, X>, e: EventHandle) -> Result<usize> {
        if e == EventHandle::NULL {
            return Err(Error::InvalidHandle);
        }
        table::require(lookup_event(&st.events, e.0), Error::ContextIsDestroyed, Error::InvalidHandle)
    }

    /// `hipEventDestroy`: null is `InvalidHandle`, a destroyed event `ContextIsDestroyed`. A
    /// pending record still completes.
    pub fn event_destroy(&self, e: EventHandle) -> Result<()> {
        let mut st = self.state.lock();
        let i = Self::event_slot(&st, e)?;
        let ev = st.events.get_mut(i).ok_or(Error::InvalidHandle)?;
        ev.generation.vacate();
        // SAFETY: a live event's signal is live.
        let pending = unsafe { ev.signal.get() }.load() > 0;
        ev.state = if pending { SlotState::Draining } else { SlotState::Free };
        Ok(())
    }

    /// `hipEventRecordWithFlags` (`flags` 0 or 1): the event completes once all work enqueued
    /// on `s` so far has completed.
    pub fn event_record(&self, e: EventHandle, s: StreamHandle, flags: u32) -> Result<()> {
        check_record_flags(flags)?;
        let i_recorded = {
            let mut st = self.state.lock();
            let i = Self::event_slot(&st, e)?;
            let si = self.resolve_for_work(&mut st, s)?;
            match Self::capture_status_of(&st, si) {
                CaptureStatus::Active if Self::capture_of(&st, si).is_some() => {
                    return self.capture_event_record(&mut st, si, i, e, flags == 1);
                }
                CaptureStatus::Invalidated if Self::capture_of(&st, si).is_some() => {
                    return Err(Error::StreamCaptureInvalidated);
                }
                _ => {}
            }
            let (sdev, skind) = st.streams.get(si).map(|sl| (sl.device, sl.kind)).ok_or(Error::InvalidHandle)?;
            if st.events.get(i).is_some_and(|ev| ev.device != sdev) {
                return Err(Error::InvalidHandle);
            }
            let recorded =
                if skind == StreamKind::Null { Recorded::OnNull } else { Recorded::On(Self::handle_of(&st, si).0) };
            let swapped = st.events.get_mut(i).is_some_and(|ev| self.swap_if_pending(ev));
            (i, recorded, swapped)
        };
        let (i, recorded, swapped) = i_recorded;
        let result = self.submit(s, Command::EventRecord(i));
        let mut st = self.state.lock();
        if let Some(ev) = st.events.get_mut(i) {
            match result {
                Ok(()) => {
                    ev.recorded = recorded;
                    // A record outside any capture makes the event a plain event again: a
                    // later wait is an ordinary wait, not a join of the capture it was last
                    // recorded in.
                    ev.captured = None;
                    ev.snapshot = DepSet::EMPTY;
                }
                // The record never happened: the event goes back to its previous record.
                Err(_) if swapped => core::mem::swap(&mut ev.signal, &mut ev.spare),
                Err(_) => {}
            }
        }
        result
    }

    /// `hipEventQuery`: `Ok` if complete or never recorded, `NotReady` otherwise.
    pub fn event_query(&self, e: EventHandle) -> Result<()> {
        let mut st = self.state.lock();
        let i = Self::event_slot(&st, e)?;
        self.check_event_capture(&mut st, i)?;
        let ev = st.events.get(i).ok_or(Error::InvalidHandle)?;
        if ev.recorded == Recorded::Never {
            return Ok(());
        }
        self.backend.signal_wait(ev.signal, Condition::Lt, 1, Timeout::ZERO).map(|_| ())
    }

    /// Capture checks of `hipEventQuery`/`hipEventSynchronize`: an event recorded in an active
    /// capture → `CapturedEvent` and that capture invalidated; an event recorded on a created
    /// stream → the thread-mode rule.
    pub(super) fn check_event_capture(&self, st: &mut State<B::Queue, S, E, T, M, G, N, X>, i: usize) -> Result<()> {
        let (captured, recorded) = st.events.get(i).map(|e| (e.captured, e.recorded)).ok_or(Error::InvalidHandle)?;
        if let Some((c, id)) = captured {
            let c = usize::from(c);
            if st.captures.get(c).is_some_and(|cap| cap.live && cap.id == id && cap.status == CaptureStatus::Active) {
                Self::set_capture_status(st, c, CaptureStatus::Invalidated);
                return Err(Error::CapturedEvent);
            }
        }
        match recorded {
            Recorded::Never | Recorded::OnNull => Ok(()),
            Recorded::On(_) => self.check_unsafe_call(st, Error::StreamCaptureUnsupported),
        }
    }

    /// `hipEventSynchronize`.
    pub fn event_synchronize(&self, e: EventHandle) -> Result<()> {
        self.event_synchronize_timeout(e, Timeout::NEVER)
    }

    /// `hipEventSynchronize` with a bound (`NotReady` when it runs out).
    pub fn event_synchronize_timeout(&self, e: EventHandle, timeout: Timeout) -> Result<()> {
        let (signal, recorded) = {
            let mut st = self.state.lock();
            let i = Self::event_slot(&st, e)?;
            self.check_event_capture(&mut st, i)?;
            let ev = st.events.get(i).ok_or(Error::InvalidHandle)?;
            (ev.signal, ev.recorded)
        };
        if recorded == Recorded::Never {
            return Ok(());
        }
        self.backend.signal_wait(signal, Condition::Lt, 1, timeout).map(|_| ())
    }

    /// `hipEventElapsedTime` in milliseconds from `start` to `stop`.
    pub fn event_elapsed_time(&self, start: EventHandle, stop: EventHandle) -> Result<f32> {
        let st = self.state.lock();
        let a = st.events.get(Self::event_slot(&st, start)?).ok_or(Error::InvalidHandle)?;
        let b = st.events.get(Self::event_slot(&st, stop)?).ok_or(Error::InvalidHandle)?;
        if a.device != b.device {
            return Err(Error::InvalidHandle);
        }
        let untimed = |e: &EventSlot| e.recorded == Recorded::Never || e.flags.contains(EventFlags::DISABLE_TIMING);
        if untimed(a) || untimed(b) {
            return Err(Error::InvalidHandle);
        }
        for ev in [a, b] {
            self.backend.signal_wait(ev.signal, Condition::Lt, 1, Timeout::ZERO)?;
        }
        let hz = self.backend.device_info(a.device)?.timestamp_frequency;
        // SAFETY: live events' signals are live.
        let (ta, tb) = unsafe { (a.signal.get(), b.signal.get()) };
        // Ordering: the Acquire loads in signal_wait ordered these after the completions.
        let ticks = tb.end_ts.load(Ordering::Relaxed) as i64 - ta.end_ts.load(Ordering::Relaxed) as i64;
        Ok(ticks_to_ms(ticks, hz))
    }

    /// `hipStreamWaitEvent` (`flags` 0 or 1): later work of `s` waits for the event's last
    /// record. An event never recorded, already complete, or recorded on a stream that has since
    /// been destroyed adds no wait.
    pub fn stream_wait_event(&self, s: StreamHandle, e: EventHandle, flags: u32) -> Result<()> {
        if flags > 1 {
            return Err(Error::InvalidValue);
        }
        let signal = {
            let mut st = self.state.lock();
            let i = Self::event_slot(&st, e)?;
            let si = self.resolve_for_work(&mut st, s)?;
            if self.capture_wait_event(&mut st, s, si, i, e, flags == 1)? {
                return Ok(());
            }
            let ev = st.events.get(i).ok_or(Error::InvalidHandle)?;
            let live_source = match ev.recorded {
                Recorded::Never => false,
                Recorded::OnNull => true,
                Recorded::On(raw) => matches!(lookup_stream(&st.streams, raw), Lookup::Live(_)),
            };
            // SAFETY: a live event's signal is live.
            let pending = unsafe { ev.signal.get() }.load() > 0;
            (live_source && pending).then_some(ev.signal)
        };
        match signal {
            Some(sig) => self.submit(s, Command::WaitEvent(sig)),
            None => Ok(()),
        }
    }
}
