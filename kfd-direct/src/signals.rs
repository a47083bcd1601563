//! Signals, KFD events and waits of [`Kfd`] (docs/kfd-aql.md §1.6, §4.1): the signal pool's
//! handles, `WAIT_EVENTS` on the completion and fault events, the spin/block wait, `poll` and
//! `notify`.

use portable_atomic::Ordering;

use aqueduct::aql::Condition;
use aqueduct::backend::Timeout;
use aqueduct::{AmdSignal, Error, Result, SignalHandle};

use crate::abi::{self, EventData};
use crate::faults::fault;
use crate::{Kfd, Sys, WaitMode, SIGNALS};

impl<S: Sys> Kfd<S> {
    pub(crate) fn signal_index(&self, h: SignalHandle) -> Option<usize> {
        let pool = self.signal_pool?;
        let off = h.0.checked_sub(pool.va)?;
        (off % 64 == 0 && (off / 64) < SIGNALS as u64).then_some((off / 64) as usize)
    }

    pub(crate) fn signal_ref(&self, h: SignalHandle) -> Result<&AmdSignal> {
        self.signal_index(h).ok_or(Error::InvalidHandle)?;
        // SAFETY: the handle is a 64-byte aligned slot of the CPU-mapped signal pool, which
        // lives as long as `self`.
        Ok(unsafe { h.get() })
    }

    /// Waits in the kernel for the completion event (or a fault event) for at most `ms`.
    pub(crate) fn wait_kfd_events(&self, ms: u32) {
        let age_ok = self.version.1 >= 14;
        // Ordering: Relaxed; the age is a hint (a stale one only causes a spurious wake).
        let age = self.event_age.load(Ordering::Relaxed);
        let mut ev = [
            EventData {
                event_id: self.completion_event,
                payload: [if age_ok { age } else { 0 }, 0, 0, 0],
                ..Default::default()
            },
            EventData { event_id: self.memory_event, ..Default::default() },
            EventData { event_id: self.hw_event, ..Default::default() },
        ];
        if let Ok(abi::wait_result::COMPLETE) = self.drv.wait_events(&mut ev, ms) {
            let [c, m, h] = ev;
            if age_ok && c.last_event_age() != 0 {
                // Ordering: Relaxed; see above.
                self.event_age.fetch_max(c.last_event_age(), Ordering::Relaxed);
            }
            let mem = m.memory_exception();
            if mem.gpu_id != 0 {
                let code = if mem.error_type == 3 { fault::RESET } else { fault::MEMORY };
                self.latch_device(mem.gpu_id, code, mem.va);
            }
            let hw = h.hw_exception();
            if hw.gpu_id != 0 {
                self.latch_device(hw.gpu_id, fault::RESET, 0);
            }
        }
    }

    /// Makes progress without blocking: runs ready host functions (without `std`), latches
    /// faults from the error words and from a zero-time poll of the fault events.
    pub fn poll(&self) {
        #[cfg(not(feature = "std"))]
        self.run_host_calls();
        self.scan_error_words();
        self.wait_kfd_events(0);
    }

    #[cfg(not(feature = "std"))]
    pub(crate) fn run_host_calls(&self) {
        loop {
            let ready = {
                let mut st = self.state.lock();
                let mut found = None;
                for c in st.host_calls.iter_mut() {
                    // SAFETY: start/done are live pool signals until the barrier after the call
                    // completes, which needs `done`.
                    if c.as_ref().is_some_and(|c| unsafe { c.start.get() }.load() == 0) {
                        found = c.take();
                        break;
                    }
                }
                found
            };
            let Some(call) = ready else { break };
            // SAFETY: the enqueuer vouched for the function and its data.
            unsafe { call.f.call() };
            // SAFETY: as above.
            unsafe { call.done.get() }.reset(0);
            let _ = self.drv.set_event(self.completion_event);
        }
    }

    pub(crate) fn wait(
        &self,
        s: &AmdSignal,
        handle: SignalHandle,
        cond: Condition,
        expected: i64,
        timeout: Timeout,
    ) -> Result<i64> {
        let v = s.load();
        if cond.holds(v, expected) {
            return Ok(v);
        }
        if timeout == Timeout::ZERO {
            self.poll();
            let v = s.load();
            if cond.holds(v, expected) {
                return Ok(v);
            }
            return Err(self.dead_signal(handle).unwrap_or(Error::NotReady));
        }
        self.check_process().map_err(Error::from)?;
        let start = self.drv.sys().now_ns();
        let deadline = start.saturating_add(timeout.0);
        let spin_until = match self.config.wait {
            WaitMode::Spin => deadline,
            WaitMode::Block => start,
            WaitMode::Hybrid(ns) => start.saturating_add(ns).min(deadline),
        };
        let mut spins = 0u32;
        loop {
            let v = s.load();
            if cond.holds(v, expected) {
                return Ok(v);
            }
            spins = spins.wrapping_add(1);
            if spins % 256 == 0 {
                let now = self.drv.sys().now_ns();
                if spins % (1 << 16) == 0 {
                    // Even a spinning waiter learns of faults (about every millisecond or so).
                    self.poll();
                    if let Some(e) = self.dead_signal(handle) {
                        return Err(e);
                    }
                }
                if now >= spin_until {
                    break;
                }
            }
            core::hint::spin_loop();
        }
        // Slices bound a lost wake-up when the kernel has no event age (before 1.14).
        let slice_ms: u64 = if self.version.1 >= 14 { 100 } else { 1 };
        loop {
            #[cfg(not(feature = "std"))]
            self.run_host_calls();
            let v = s.load();
            if cond.holds(v, expected) {
                return Ok(v);
            }
            self.scan_error_words();
            if let Some(e) = self.dead_signal(handle) {
                return Err(e);
            }
            let now = self.drv.sys().now_ns();
            if now >= deadline {
                return Err(Error::NotReady);
            }
            let ms = (deadline - now).div_ceil(1_000_000).min(slice_ms) as u32;
            self.wait_kfd_events(ms);
        }
    }

    /// Wakes blocked waiters (after a host-side signal change).
    pub fn notify(&self) {
        let _ = self.drv.set_event(self.completion_event);
    }
}
