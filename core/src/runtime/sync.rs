//! Query and synchronize: streams, the device, device reset.
//!
//! Waits read progress points through atomics and wait on the progress signals without any
//! lock held. The null stream's synchronisation (`0`) and the device's cover destroyed streams
//! whose work is still pending: that work is still the device's.

use portable_atomic::Ordering;

use super::Runtime;
use crate::aql::Condition;
use crate::backend::{Backend, Timeout};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::slots::stream::StreamSlot;
use crate::slots::SlotState;
use crate::stream::StreamHandle;
use crate::thread::ThreadKeys;

impl<B: Backend, K: ThreadKeys, C: Config> Runtime<B, K, C> {
    /// The checks of `hipStreamQuery`/`hipStreamSynchronize` on `s`; returns its slot.
    fn sync_target(&self, s: StreamHandle) -> Result<usize> {
        let i = self.resolve(s, Error::ContextIsDestroyed)?;
        if s.is_null_or_legacy() {
            // `0` and legacy are not capture-checked (HIP differs from CUDA here).
            return Ok(i);
        }
        if self.stream(i)?.attrs().detached {
            return Err(Error::StreamDetached);
        }
        #[cfg(feature = "capture")]
        if self.any_capture() {
            let mut st = self.lock();
            self.check_sync_target(&mut st, i)?;
        }
        Ok(i)
    }

    /// Calls `f` with every slot `hipStreamQuery`/`hipStreamSynchronize` must look at for `s`
    /// (found as slot `i`), null stream last: for `0`, every blocking stream of the device,
    /// destroyed ones with pending work included.
    pub(super) fn for_sync_set(&self, s: StreamHandle, i: usize, mut f: impl FnMut(usize) -> Result<()>) -> Result<()> {
        if s == StreamHandle::NULL {
            let device = self.stream(i)?.attrs().device;
            for (p, ps) in self.stream_slots().iter().enumerate() {
                let a = ps.attrs();
                if p != i && ps.word.state() != SlotState::Free && a.is_blocking_user() && a.device == device {
                    f(p)?;
                }
            }
        }
        f(i)
    }

    /// The fault of the queue behind slot `p` (none if it is no longer bound).
    fn fault_of(&self, p: &StreamSlot<K::RawMutex>) -> Result<()> {
        let inner = p.inner.lock();
        if inner.binding.is_none() {
            return Ok(());
        }
        self.check_fault(&inner)
    }

    /// `hipStreamQuery`: `Ok` when all work is done, `NotReady` otherwise. For `0` that includes
    /// every blocking stream of the device; `hipStreamLegacy` looks at the null stream only.
    pub fn stream_query(&self, s: StreamHandle) -> Result<()> {
        let i = self.sync_target(s)?;
        self.for_sync_set(s, i, |p| {
            let ps = self.stream(p)?;
            self.fault_of(ps)?;
            if let Some((signal, n)) = ps.point() {
                let done = signal.load() <= -(n as i64)
                    || self.backend.signal_wait(signal.handle(), Condition::Lt, 1 - n as i64, Timeout::ZERO).is_ok();
                if !done {
                    self.fault_of(ps)?;
                    return Err(Error::NotReady);
                }
            }
            Ok(())
        })
    }

    /// `hipStreamSynchronize` (waits without bound).
    pub fn stream_synchronize(&self, s: StreamHandle) -> Result<()> {
        self.stream_synchronize_timeout(s, Timeout::NEVER)
    }

    /// `hipStreamSynchronize` with a bound: `NotReady` if the work did not finish in time; the
    /// queue's error if it faulted.
    pub fn stream_synchronize_timeout(&self, s: StreamHandle, timeout: Timeout) -> Result<()> {
        let i = self.sync_target(s)?;
        self.for_sync_set(s, i, |p| self.wait_slot(p, timeout))
    }

    /// Waits for everything slot `p` has published so far.
    pub(super) fn wait_slot(&self, p: usize, timeout: Timeout) -> Result<()> {
        let ps = self.stream(p)?;
        let waited = match ps.point() {
            Some((signal, n)) => self.backend.signal_wait(signal.handle(), Condition::Lt, 1 - n as i64, timeout),
            None => Ok(0),
        };
        // A fault comes first, then the wait's own error.
        self.fault_of(ps)?;
        waited.map(|_| ())
    }

    /// `hipDeviceSynchronize`: waits for every stream of the current device, non-blocking and
    /// destroyed ones included.
    pub fn device_synchronize(&self) -> Result<()> {
        self.device_synchronize_timeout(Timeout::NEVER)
    }

    /// `hipDeviceSynchronize` with a bound.
    pub fn device_synchronize_timeout(&self, timeout: Timeout) -> Result<()> {
        #[cfg(feature = "capture")]
        if self.any_capture() {
            let mut st = self.lock();
            // Any active capture anywhere: unsupported, and every capture is invalidated.
            if Self::any_active_capture(&st) {
                Self::invalidate_all_captures(&mut st);
                return Err(Error::StreamCaptureUnsupported);
            }
        }
        self.wait_device(timeout)
    }

    /// Waits for the work of every stream of the current device, with no capture check (unlike
    /// `device_synchronize`): what must finish before memory that work may touch is released —
    /// an executable's staging buffers, or a block `hipFree` hands back. Work a capture records
    /// does not run, so captures are left as they are.
    pub fn device_wait_idle(&self) -> Result<()> {
        self.wait_device(Timeout::NEVER)
    }

    pub(super) fn wait_device(&self, timeout: Timeout) -> Result<()> {
        self.device_count()?;
        let device = self.current_device();
        for (p, ps) in self.stream_slots().iter().enumerate() {
            if ps.word.state() != SlotState::Free && ps.attrs().device == device {
                self.wait_slot(p, timeout)?;
            }
        }
        let mut st = self.lock();
        self.reap(&mut st);
        Ok(())
    }

    /// `hipDeviceReset` of the current device: waits for its work, then releases every stream
    /// (the null and per-thread streams included) and event of the device. Their handles go
    /// stale; the null and per-thread streams come back on next use. The device's queues are
    /// destroyed (work still stuck in them is abandoned) and created again on demand.
    pub fn device_reset(&self) -> Result<()> {
        // Work that cannot finish (a faulted queue) does not keep the reset from happening.
        let _ = self.wait_device(Timeout::SECOND);
        let device = self.current_device();
        let mut st = self.lock();
        // Work that did not finish is abandoned with the device's queues: counted as done, so
        // nothing waits on it, and its streams are freed.
        for i in 0..self.stream_slots().len() {
            let Ok(s) = self.stream(i) else { continue };
            if s.word.state() == SlotState::Free || s.attrs().device != device {
                continue;
            }
            Self::settle(s);
            if s.word.state() == SlotState::Live {
                self.retire_stream(&mut st, i);
            }
        }
        if let Some(d) = self.devices.get(device as usize) {
            // Ordering: Release; a stale handle either way.
            d.null_stream.store(0, Ordering::Release);
        }
        for i in 0..self.event_slots().len() {
            let Some(e) = self.event_slots().get(i) else { continue };
            let mut inner = e.inner.lock();
            if inner.device != device || e.word.state() == SlotState::Free {
                continue;
            }
            if let Some(sig) = inner.signal {
                sig.get().reset(0);
            }
            inner.point = None;
            inner.recorded = crate::slots::event::Recorded::Never;
            if e.word.state() == SlotState::Live {
                e.word.vacate(SlotState::Draining);
                drop(inner);
                let mut head = st.events.draining;
                self.push_event(&mut head, i);
                st.events.draining = head;
            }
        }
        self.reap(&mut st);
        self.drop_device_queues(&mut st, device);
        Ok(())
    }
}
