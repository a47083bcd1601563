//! Fault injection and observation (reliability catalogue, docs/kfd-aql.md §7): failing ioctls,
//! memory faults, device resets, the death of a device's engine, and the state tests read.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::abi::{HwExceptionData, MemoryExceptionData, MemoryExceptionFailure};
use crate::hw::status;
use crate::{EmuStats, Errno, QueueState, SysResult};

use super::{Emu, IoctlFault, Process, QueueHw};

impl Emu {
    pub(super) fn injected_ioctl_fault(&self, nr: u32) -> Option<Errno> {
        // Ordering: Relaxed; a statistics counter.
        self.m.ioctl_count.fetch_add(1, Ordering::Relaxed);
        let mut faults = self.m.ioctl_faults.lock().unwrap_or_else(|e| e.into_inner());
        let mut hit = None;
        for f in faults.iter_mut() {
            if f.nr.is_none_or(|n| n == nr) {
                f.remaining = f.remaining.saturating_sub(1);
                if f.remaining == 0 && hit.is_none() {
                    hit = Some(f.errno);
                }
            }
        }
        faults.retain(|f| f.remaining > 0);
        hit
    }

    /// The device-side state of one of this process's queues (AQL or SDMA).
    pub fn queue_state(&self, qid: u32) -> Option<QueueState> {
        let p = self.process()?;
        let st = p.lock();
        // Ordering: Relaxed; diagnostic reads.
        let (status, ec) = match &st.queues.get(&qid)?.hw {
            QueueHw::Aql(q) => (q.status.load(Ordering::Relaxed), q.exception.load(Ordering::Relaxed)),
            QueueHw::Sdma(q) => (q.status.load(Ordering::Relaxed), q.exception.load(Ordering::Relaxed)),
        };
        Some(match status {
            status::ERROR => QueueState::Error(ec),
            status::HUNG => QueueState::Hung,
            status::EVICTED => QueueState::Evicted(ec),
            _ => QueueState::Active,
        })
    }

    /// Machine-wide engine counters (every process of this machine).
    pub fn stats(&self) -> EmuStats {
        let s = &self.m.sdma_stats;
        // Ordering: Relaxed; statistics counters.
        EmuStats {
            sdma_queues_created: s.queues_created.load(Ordering::Relaxed),
            sdma_packets: s.packets.load(Ordering::Relaxed),
            sdma_copies: s.copies.load(Ordering::Relaxed),
            sdma_bytes: s.bytes.load(Ordering::Relaxed),
            dispatches: self.m.devices.iter().map(|d| d.launched()).sum(),
        }
    }

    /// Makes the `n`th ioctl from now (counting only `nr` if given; `n >= 1`) fail with `errno`
    /// before the driver looks at it.
    pub fn fail_ioctl(&self, n: u64, nr: Option<u32>, errno: Errno) {
        let mut f = self.m.ioctl_faults.lock().unwrap_or_else(|e| e.into_inner());
        f.push(IoctlFault { remaining: n.max(1), nr, errno });
    }

    /// Number of ioctls issued so far.
    pub fn ioctl_count(&self) -> u64 {
        // Ordering: Relaxed; a statistics counter.
        self.m.ioctl_count.load(Ordering::Relaxed)
    }

    /// A GPU memory fault at `va` on `gpu_id` for this process, as the interrupt handler reports
    /// it: every queue of the process on the device is evicted and its MEMORY events are set.
    pub fn inject_memory_fault(&self, gpu_id: u32, va: u64) -> SysResult<()> {
        let idx = self.node_index(gpu_id).ok_or(Errno::EINVAL)?;
        let p = self.process().ok_or(Errno::ESRCH)?;
        self.m.devices[idx].evict(Some(&p.vm));
        p.events.signal_memory_fault(MemoryExceptionData {
            failure: MemoryExceptionFailure { not_present: 1, ..Default::default() },
            va,
            gpu_id,
            error_type: 0,
        });
        Ok(())
    }

    /// A device hang and reset: every queue on the device is evicted and every process's
    /// HW_EXCEPTION events are set (reset cause 0 = hang, memory lost).
    pub fn inject_device_reset(&self, gpu_id: u32) -> SysResult<()> {
        let idx = self.node_index(gpu_id).ok_or(Errno::EINVAL)?;
        self.m.devices[idx].evict(None);
        let procs: Vec<Arc<Process>> =
            self.m.procs.lock().unwrap_or_else(|e| e.into_inner()).values().cloned().collect();
        for p in procs {
            p.events.signal_reset(HwExceptionData { reset_type: 1, reset_cause: 0, memory_lost: 1, gpu_id });
        }
        Ok(())
    }

    /// Kills the engine of a GPU — its packet processor and compute-unit threads; they are not
    /// restarted. The driver then
    /// finds the device hung, as amdkfd's scheduler does when the CP stops answering
    /// (a preemption timeout), and resets it: see [`Emu::inject_device_reset`].
    pub fn kill_command_processor(&self, gpu_id: u32) -> SysResult<()> {
        let idx = self.node_index(gpu_id).ok_or(Errno::EINVAL)?;
        self.m.engines[idx].kill();
        self.inject_device_reset(gpu_id)
    }

    /// Whether a GPU's engine (its packet processor and compute-unit threads) is running.
    pub fn command_processor_alive(&self, gpu_id: u32) -> bool {
        self.node_index(gpu_id).is_some_and(|i| self.m.engines[i].alive())
    }

    /// Work-groups of a GPU's launched dispatches that wait for a compute-unit worker (tests:
    /// "every dispatch is queued behind a busy worker").
    pub fn pending_work_groups(&self, gpu_id: u32) -> SysResult<u64> {
        let idx = self.node_index(gpu_id).ok_or(Errno::EINVAL)?;
        Ok(self.m.engines[idx].pending_work_groups())
    }

    /// Pauses or resumes a GPU's command processor (test hook: publish several queues' packets,
    /// or write a doorbell several times, then let the processor look). Once a pause returns,
    /// no AQL queue of the GPU is looked at until the resume.
    pub fn pause_command_processor(&self, gpu_id: u32, paused: bool) -> SysResult<()> {
        let idx = self.node_index(gpu_id).ok_or(Errno::EINVAL)?;
        self.m.devices[idx].pause(paused);
        Ok(())
    }

    /// The GPU clock (ticks at [`crate::GPU_CLOCK_HZ`]).
    pub fn gpu_clock(&self) -> u64 {
        self.m.clock.gpu_ticks()
    }

    /// Whether a signal event is currently signalled (diagnostics).
    pub fn event_signaled(&self, event_id: u32) -> Option<bool> {
        self.process()?.events.is_signaled(event_id)
    }
}
