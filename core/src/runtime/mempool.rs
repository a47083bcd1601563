//! The runtime under the memory pools ([`crate::mempool`]): [`PoolHost`] for [`Runtime`].
//!
//! A free's position in its stream is an untimed event recorded there; whether it has passed is
//! read from the event's record target without the capture checks of `hipEventQuery` (an
//! allocation must not invalidate another thread's capture). Making a stream wait for a free is
//! an event wait. Graph memory nodes go into the capture of the stream after its current
//! dependencies.
//!
//! Only [`PoolHost::mark_done`], [`PoolHost::any_capture`] and [`PoolHost::capture_node`] reach
//! into the runtime's tables; everything else goes through its public API.

use super::Runtime;
use crate::aql::Condition;
use crate::backend::{Backend, MemoryKind, Timeout};
#[cfg(feature = "capture")]
use crate::capture::CaptureStatus;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::event::{EventFlags, EventHandle};
#[cfg(feature = "capture")]
use crate::graph::NodeKind;
use crate::mempool::{Capturing, Mark, MemNode, PoolHost, StreamInfo};
use crate::slots::event::Recorded;
use crate::stream::StreamHandle;
use crate::thread::ThreadKeys;

/// `hipStreamNonBlocking`.
const NON_BLOCKING: u32 = 1;

impl<B: Backend, K: ThreadKeys, C: Config> Runtime<B, K, C> {
    /// Runs `f` with `device` as the calling thread's device, then switches back.
    fn on_device<R>(&self, device: u32, f: impl FnOnce() -> Result<R>) -> Result<R> {
        let current = self.device()?;
        if current == device {
            return f();
        }
        self.set_device(device)?;
        let r = f();
        self.set_device(current)?;
        r
    }

    /// Whether event `e`'s last record has completed (a stale event counts as completed),
    /// without any capture check.
    fn event_passed(&self, e: EventHandle) -> bool {
        let Ok(i) = self.event_slot(e) else { return true };
        let Some(slot) = self.event_slots().get(i) else { return true };
        let target = {
            let ev = slot.inner.lock();
            match (ev.recorded, ev.point, ev.signal) {
                (Recorded::Never, _, _) => None,
                (_, Some((p, n)), _) => Some((p, 1 - n as i64)),
                (_, None, Some(s)) => Some((s, 1)),
                (_, None, None) => None,
            }
        };
        match target {
            None => true,
            Some((s, below)) => {
                s.load() < below || self.backend.signal_wait(s.handle(), Condition::Lt, below, Timeout::ZERO).is_ok()
            }
        }
    }
}

impl<B: Backend, K: ThreadKeys, C: Config> PoolHost for Runtime<B, K, C> {
    fn device_count(&self) -> Result<u32> {
        Runtime::device_count(self)
    }

    fn stream_info(&self, s: StreamHandle) -> Result<StreamInfo> {
        // The checks of asynchronous work with nothing to enqueue: stale, detached, invalidated.
        self.memcpy_async(s, 1, 1, 0)?;
        let null = s.is_null_or_legacy();
        let blocking = !null && self.stream_flags(s)? & NON_BLOCKING == 0;
        Ok(StreamInfo { id: self.stream_id(s)?, device: self.stream_device(s)?, null, blocking })
    }

    #[cfg(feature = "capture")]
    fn capturing(&self, s: StreamHandle) -> Result<Capturing> {
        let info = self.stream_capture_info(s)?;
        Ok(match info.status {
            CaptureStatus::Active => Capturing::Into(info.graph),
            CaptureStatus::Invalidated => return Err(Error::StreamCaptureInvalidated),
            CaptureStatus::None => Capturing::No,
        })
    }

    #[cfg(not(feature = "capture"))]
    fn capturing(&self, _s: StreamHandle) -> Result<Capturing> {
        Ok(Capturing::No)
    }

    fn any_capture(&self) -> bool {
        Runtime::any_capture(self)
    }

    fn alloc(&self, device: u32, bytes: u64) -> Result<u64> {
        let bytes = usize::try_from(bytes).map_err(|_| Error::OutOfMemory)?;
        self.backend.memory_alloc(device, bytes, MemoryKind::Device)
    }

    fn release(&self, address: u64) {
        let _ = self.backend.memory_free(address);
    }

    fn mark(&self, s: StreamHandle, device: u32) -> Result<Option<Mark>> {
        let recorded = self.on_device(device, || {
            let e = self.event_create(EventFlags::DISABLE_TIMING.bits())?;
            match self.event_record(e, s, 0) {
                Ok(()) => Ok(e),
                Err(err) => {
                    let _ = self.event_destroy(e);
                    Err(err)
                }
            }
        });
        match recorded {
            Ok(e) => Ok(Some(Mark(e.0))),
            // No event to spare: wait for the stream's device instead; the position has passed.
            Err(Error::OutOfMemory) => {
                PoolHost::wait_device(self, device)?;
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    fn mark_done(&self, m: Mark) -> bool {
        self.event_passed(EventHandle(m.0))
    }

    fn wait_mark(&self, s: StreamHandle, m: Mark) -> Result<()> {
        self.stream_wait_event(s, EventHandle(m.0), 0)
    }

    fn forget(&self, m: Mark) {
        let _ = self.event_destroy(EventHandle(m.0));
    }

    fn wait_device(&self, device: u32) -> Result<()> {
        self.on_device(device, || self.device_wait_idle())
    }

    #[cfg(feature = "capture")]
    fn capture_node(&self, s: StreamHandle, node: MemNode) -> Result<()> {
        let kind = match node {
            MemNode::Alloc { address, bytes } => NodeKind::MemAlloc { address, bytes },
            MemNode::Free(address) => NodeKind::MemFree(address),
        };
        let i = self.resolve_for_work(s)?;
        let mut st = self.lock();
        match self.capture_status_of(&st, i) {
            CaptureStatus::Active if self.capture_of(&st, i).is_some() => {
                self.add_captured_node(&mut st, i, kind).map(|_| ())
            }
            CaptureStatus::Invalidated => Err(Error::StreamCaptureInvalidated),
            _ => Err(Error::IllegalState),
        }
    }

    #[cfg(not(feature = "capture"))]
    fn capture_node(&self, _s: StreamHandle, _node: MemNode) -> Result<()> {
        Err(Error::NotSupported)
    }

    fn record_event(&self, e: EventHandle, s: StreamHandle, flags: u32) -> Result<()> {
        self.event_record(e, s, flags)
    }

    fn wait_event(&self, s: StreamHandle, e: EventHandle, flags: u32) -> Result<()> {
        self.stream_wait_event(s, e, flags)
    }
}
