//! Faults of [`Kfd`] (docs/kfd-aql.md §7): the per-queue and per-device latches, the scan of the
//! queues' error words, and the check that ends a wait no faulted queue can complete.

use core::ptr::NonNull;
use portable_atomic::{AtomicU64, Ordering};

use aqueduct::aql::Decoded;
use aqueduct::{Error, SignalHandle};

use crate::abi;
use crate::{DeviceFault, Kfd, State, Sys, ERROR_WORD_OFFSET};

/// The fault codes of the latches (a higher code outranks a lower one).
pub(crate) mod fault {
    pub(crate) const NONE: u8 = 0;
    pub(crate) const QUEUE_ERROR: u8 = 1;
    pub(crate) const MEMORY: u8 = 2;
    pub(crate) const RESET: u8 = 3;
}

fn fault_error(code: u8) -> Option<Error> {
    match code {
        fault::QUEUE_ERROR => Some(Error::LaunchFailure),
        fault::MEMORY => Some(Error::IllegalAddress),
        fault::RESET => Some(Error::LaunchTimeOut),
        _ => None,
    }
}

impl<S: Sys> Kfd<S> {
    /// The latched fault of a device, if it stopped.
    pub fn device_fault(&self, device: u32) -> Option<DeviceFault> {
        let i = device as usize;
        // Ordering: Acquire pairs with the Release latch in `latch_device`.
        match self.device_faults.get(i)?.load(Ordering::Acquire) {
            fault::MEMORY => Some(DeviceFault::MemoryFault(self.device_fault_va.get(i)?.load(Ordering::Acquire))),
            fault::RESET => Some(DeviceFault::Reset),
            _ => None,
        }
    }

    /// The fault of the queue in `slot` (latched, from its error word, or from its device).
    pub(crate) fn slot_fault(&self, slot: usize, gpu: usize, error_word: Option<&AtomicU64>) -> Option<Error> {
        // Ordering: Acquire pairs with the Release latches.
        if let Some(e) = self.device_faults.get(gpu).and_then(|d| fault_error(d.load(Ordering::Acquire))) {
            return Some(e);
        }
        // Ordering: as above.
        if let Some(e) = self.queue_faults.get(slot).and_then(|f| fault_error(f.load(Ordering::Acquire))) {
            return Some(e);
        }
        // Ordering: Acquire; the kernel ORs the exception mask in before setting the event.
        let word = error_word.map_or(0, |w| w.load(Ordering::Acquire));
        if word != 0 {
            let code = if word & abi::exception::mask(abi::exception::QUEUE_WAVE_MEMORY_VIOLATION) != 0
                || word & abi::exception::mask(abi::exception::DEVICE_MEMORY_VIOLATION) != 0
            {
                fault::MEMORY
            } else {
                fault::QUEUE_ERROR
            };
            if let Some(f) = self.queue_faults.get(slot) {
                // Ordering: Release publishes the latch (sticky).
                f.store(code, Ordering::Release);
            }
            // Ordering: Release; see any_fault readers.
            self.any_fault.store(true, Ordering::Release);
            return fault_error(code);
        }
        None
    }

    pub(crate) fn latch_device(&self, gpu_id: u32, code: u8, va: u64) {
        if let Some(i) = self.gpu_ids.iter().position(|&g| g == gpu_id) {
            if let (Some(d), Some(v)) = (self.device_faults.get(i), self.device_fault_va.get(i)) {
                // Ordering: Release, VA first, so a reader that sees the code sees the address.
                v.store(va, Ordering::Release);
                // Ordering: Release; a reset outranks an earlier memory fault.
                d.fetch_max(code, Ordering::Release);
            }
            // Ordering: Release; see any_fault readers.
            self.any_fault.store(true, Ordering::Release);
        }
    }

    /// Checks the error words of every queue (cheap loads) so faults are latched.
    pub(crate) fn scan_error_words(&self) {
        let st = self.state.lock();
        for (slot, q) in st.queues.iter().enumerate() {
            if let Some(q) = q {
                let w = NonNull::new(q.amd_queue.ptr::<AtomicU64>(ERROR_WORD_OFFSET));
                // SAFETY: the error word lives in the queue's CPU-mapped page while the queue does.
                let w = w.map(|p| unsafe { p.as_ref() });
                let _ = self.slot_fault(slot, usize::from(q.gpu), w);
            }
        }
    }

    /// The error of a faulted queue holding a pending packet that would complete `signal`.
    pub(crate) fn dead_signal(&self, signal: SignalHandle) -> Option<Error> {
        // Ordering: Acquire pairs with the latches' Release stores.
        if !self.any_fault.load(Ordering::Acquire) {
            return None;
        }
        let st = self.state.lock();
        if let Some(e) = self.faulted_completer(&st, signal.0) {
            return Some(e);
        }
        // One step further: a healthy queue whose pending packet would complete `signal` only
        // after a barrier-AND on a signal a faulted queue would complete (a cross-stream marker
        // or event of the faulted stream) never gets there: the wait ends with that error.
        for q in st.queues.iter().flatten() {
            let (rd, wr) = (q.ring.read_index(), q.ring.write_index());
            let n = wr.wrapping_sub(rd).min(q.ring.size());
            let mut blocked: Option<Error> = None;
            for k in 0..n {
                let Some(words) = q.ring.read(rd.wrapping_add(k)) else { break };
                let Some(d) = Decoded::decode(&words) else { continue };
                match d {
                    Decoded::BarrierAnd(b) => {
                        for &dep in b.dep_signal.iter().filter(|&&x| x != 0) {
                            blocked = blocked.or_else(|| self.faulted_completer(&st, dep));
                        }
                    }
                    // A wait on another stream's progress point (core's implicit
                    // synchronisation) whose packets sit in a faulted queue.
                    Decoded::BarrierValue(v) => blocked = blocked.or_else(|| self.faulted_completer(&st, v.signal)),
                    _ => {}
                }
                if blocked.is_some() && d.completion_signal() == signal.0 {
                    return blocked;
                }
            }
        }
        None
    }

    /// The error of a faulted queue holding a pending packet that would complete `signal`.
    pub(crate) fn faulted_completer(&self, st: &State, signal: u64) -> Option<Error> {
        for (slot, q) in st.queues.iter().enumerate() {
            let Some(q) = q else { continue };
            let Some(err) = self.slot_fault(slot, usize::from(q.gpu), None) else { continue };
            let (rd, wr) = (q.ring.read_index(), q.ring.write_index());
            let n = wr.wrapping_sub(rd).min(q.ring.size());
            for k in 0..n {
                // The CP of a faulted queue has stopped: its pending slots are stable.
                let Some(words) = q.ring.read(rd.wrapping_add(k)) else { break };
                if Decoded::decode(&words).is_some_and(|d| d.completion_signal() == signal) {
                    return Some(err);
                }
            }
        }
        None
    }
}
