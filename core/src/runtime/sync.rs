//! Query and synchronize: streams, the device, device reset.

use super::{Recorded, Runtime, SlotState, State};
use crate::aql::Condition;
use crate::backend::{Backend, Timeout};
use crate::error::{Error, Result};
use crate::signal::SignalHandle;
use crate::stream::StreamHandle;
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
    // ----- query and synchronize -----------------------------------------------------------

    /// The slots `hipStreamQuery`/`hipStreamSynchronize` must look at for `s`, null stream last.
    pub(super) fn sync_set(
        &self,
        st: &mut State<B::Queue, S, E, T, M, G, N, X>,
        s: StreamHandle,
        out: &mut [usize; S],
    ) -> Result<usize> {
        let i = self.resolve(st, s, Error::ContextIsDestroyed)?;
        if !s.is_null_or_legacy() {
            if st.streams.get(i).is_some_and(|sl| sl.detached) {
                return Err(Error::StreamDetached);
            }
            // `0` and legacy are not capture-checked (HIP differs from CUDA here).
            self.check_sync_target(st, i)?;
        }
        let mut n = 0;
        if s == StreamHandle::NULL {
            // Rule 6/7: the null stream and every blocking stream of the device.
            let device = st.streams.get(i).map_or(0, |sl| sl.device);
            for (p, ps) in st.streams.iter().enumerate() {
                if ps.is_blocking_user() && ps.device == device {
                    if let Some(o) = out.get_mut(n) {
                        *o = p;
                        n += 1;
                    }
                }
            }
        }
        if let Some(o) = out.get_mut(n) {
            *o = i;
            n += 1;
        }
        Ok(n)
    }

    /// `hipStreamQuery`: `Ok` when all work is done, `NotReady` otherwise. For `0` that includes
    /// every blocking stream of the device; `hipStreamLegacy` looks at the null stream only.
    pub fn stream_query(&self, s: StreamHandle) -> Result<()> {
        let mut st = self.state.lock();
        let mut set = [0usize; S];
        let n = self.sync_set(&mut st, s, &mut set)?;
        for &i in set.iter().take(n) {
            self.check_fault(&st, i)?;
            if st.streams.get(i).is_some_and(|sl| !self.poll_idle(sl)) {
                self.check_fault(&st, i)?;
                return Err(Error::NotReady);
            }
        }
        Ok(())
    }

    /// `hipStreamSynchronize` (waits without bound).
    pub fn stream_synchronize(&self, s: StreamHandle) -> Result<()> {
        self.stream_synchronize_timeout(s, Timeout::NEVER)
    }

    /// `hipStreamSynchronize` with a bound: `NotReady` if the work did not finish in time; the
    /// queue's error if it faulted.
    pub fn stream_synchronize_timeout(&self, s: StreamHandle, timeout: Timeout) -> Result<()> {
        let mut targets = [(SignalHandle::NULL, 0i64, 0usize); S];
        let n = {
            let mut st = self.state.lock();
            let mut set = [0usize; S];
            let n = self.sync_set(&mut st, s, &mut set)?;
            for (t, &i) in targets.iter_mut().zip(set.iter().take(n)) {
                if let Some(sl) = st.streams.get(i) {
                    if let Some(hw) = &sl.hw {
                        *t = (hw.signal, 1 - sl.submitted as i64, i);
                    }
                }
            }
            n
        };
        self.wait_targets(targets.get(..n).unwrap_or(&[]), timeout)
    }

    pub(super) fn wait_targets(&self, targets: &[(SignalHandle, i64, usize)], timeout: Timeout) -> Result<()> {
        for &(signal, expected, i) in targets {
            if signal.is_null() {
                continue;
            }
            if let Err(e) = self.backend.signal_wait(signal, Condition::Lt, expected, timeout) {
                let st = self.state.lock();
                self.check_fault(&st, i)?;
                return Err(e);
            }
            let st = self.state.lock();
            self.check_fault(&st, i)?;
        }
        Ok(())
    }

    /// `hipDeviceSynchronize`: waits for every stream of the current device, non-blocking ones
    /// included.
    pub fn device_synchronize(&self) -> Result<()> {
        self.device_synchronize_timeout(Timeout::NEVER)
    }

    /// `hipDeviceSynchronize` with a bound.
    pub fn device_synchronize_timeout(&self, timeout: Timeout) -> Result<()> {
        {
            let mut st = self.state.lock();
            // Any active capture anywhere: unsupported, and every capture is invalidated.
            if Self::any_active_capture(&st) {
                Self::invalidate_all_captures(&mut st);
                return Err(Error::StreamCaptureUnsupported);
            }
        }
        self.wait_device(timeout)
    }

    pub(super) fn wait_device(&self, timeout: Timeout) -> Result<()> {
        let mut targets = [(SignalHandle::NULL, 0i64, 0usize); S];
        let mut n = 0;
        {
            self.device_count()?;
            let st = self.state.lock();
            let device = self.current_device(&st);
            for (i, sl) in st.streams.iter().enumerate() {
                if sl.state != SlotState::Free && sl.device == device {
                    if let (Some(hw), Some(t)) = (&sl.hw, targets.get_mut(n)) {
                        *t = (hw.signal, 1 - sl.submitted as i64, i);
                        n += 1;
                    }
                }
            }
        }
        self.wait_targets(targets.get(..n).unwrap_or(&[]), timeout)?;
        let mut st = self.state.lock();
        self.reap(&mut st);
        Ok(())
    }

    /// `hipDeviceReset` of the current device: waits for its work, then releases every stream
    /// (the null and per-thread streams included) and event of the device. Their handles go
    /// stale; the null and per-thread streams come back on next use.
    pub fn device_reset(&self) -> Result<()> {
        // Work that cannot finish (a faulted queue) does not keep the reset from happening.
        let _ = self.wait_device(Timeout::SECOND);
        let mut st = self.state.lock();
        let device = self.current_device(&st);
        for i in 0..S {
            if st.streams.get(i).is_some_and(|s| s.state != SlotState::Free && s.device == device) {
                Self::capture_on_destroy(&mut st, i);
            }
            let Some(s) = st.streams.get_mut(i) else { continue };
            if s.state == SlotState::Free || s.device != device {
                continue;
            }
            if s.state == SlotState::Live {
                s.generation.vacate();
            }
            s.state = SlotState::Free;
            let faulted = s.hw.as_ref().is_some_and(|hw| self.backend.queue_fault(&hw.queue).is_some());
            if faulted || !self.is_idle(s) {
                if let Some(hw) = s.hw.take() {
                    self.release_hw(hw);
                }
            }
        }
        if let Some(d) = st.devices.get_mut(device as usize) {
            d.null_stream = 0;
        }
        for e in st.events.iter_mut() {
            if e.state != SlotState::Free && e.device == device {
                if e.state == SlotState::Live {
                    e.generation.vacate();
                }
                e.state = SlotState::Free;
                e.recorded = Recorded::Never;
                // SAFETY: event signals stay allocated while cached in the slot.
                unsafe { e.signal.get() }.reset(0);
            }
        }
        Ok(())
    }
}
