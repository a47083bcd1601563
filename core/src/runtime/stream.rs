//! Stream slots, their hardware, and the stream-management API (`hipStreamCreate*`,
//! `hipStreamDestroy`, the getters).

use super::{lookup_stream, next_stream_id, Hw, Runtime, SlotState, State, StreamKind, StreamSlot, STREAM_TAG};
use crate::aql::Condition;
use crate::backend::{Backend, Timeout};
use crate::capture::{CaptureStatus, DepSet};
use crate::error::{Error, Result};
use crate::stream::{CuMask, Priority, StreamFlags, StreamHandle};
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
    // ----- stream slots and hardware -------------------------------------------------------

    /// Binds hardware to slot `i`, reusing the slot's cached queue when it matches.
    pub(super) fn bind(
        &self,
        st: &mut State<B::Queue, S, E, T, M, G, N, X>,
        i: usize,
        device: u32,
        priority: Priority,
        cu_mask: Option<CuMask>,
    ) -> Result<()> {
        let slot = st.streams.get_mut(i).ok_or(Error::InvalidHandle)?;
        if let Some(hw) = &slot.hw {
            let healthy = self.backend.queue_fault(&hw.queue).is_none();
            if healthy && hw.device == device && hw.priority == priority && hw.cu_mask == cu_mask {
                // SAFETY: the signal belongs to this slot's hardware and is live until destroyed.
                unsafe { hw.signal.get() }.reset(0);
                slot.submitted = 0;
                return Ok(());
            }
        }
        if let Some(hw) = slot.hw.take() {
            self.release_hw(hw);
        }
        let hw = loop {
            match self.create_hw(device, priority, cu_mask.as_ref()) {
                Ok(hw) => break hw,
                Err(Error::OutOfMemory) => {
                    // Give back one cached queue of a free slot and try again.
                    let cached = st.streams.iter_mut().find(|s| s.state == SlotState::Free && s.hw.is_some());
                    match cached.and_then(|s| s.hw.take()) {
                        Some(old) => self.release_hw(old),
                        None => return Err(Error::OutOfMemory),
                    }
                }
                Err(e) => return Err(e),
            }
        };
        let slot = st.streams.get_mut(i).ok_or(Error::InvalidHandle)?;
        slot.hw = Some(hw);
        slot.submitted = 0;
        Ok(())
    }

    pub(super) fn create_hw(&self, device: u32, priority: Priority, cu_mask: Option<&CuMask>) -> Result<Hw<B::Queue>> {
        let queue = self.backend.queue_create(device, priority, cu_mask)?;
        let desc = match self.backend.queue_desc(&queue) {
            Ok(d) => d,
            Err(e) => {
                self.backend.queue_destroy(queue);
                return Err(e);
            }
        };
        let signal = match self.backend.signal_create(0) {
            Ok(s) => s,
            Err(e) => {
                self.backend.queue_destroy(queue);
                return Err(e);
            }
        };
        let read_hint = desc.ring.read_index();
        Ok(Hw { queue, desc, signal, device, priority, cu_mask: cu_mask.copied(), read_hint })
    }

    pub(super) fn release_hw(&self, hw: Hw<B::Queue>) {
        self.backend.signal_destroy(hw.signal);
        self.backend.queue_destroy(hw.queue);
    }

    /// Takes a free slot (reaping drained ones if needed) and makes it a live stream.
    pub(super) fn create_slot(
        &self,
        st: &mut State<B::Queue, S, E, T, M, G, N, X>,
        kind: StreamKind,
        device: u32,
        flags: StreamFlags,
        priority: Priority,
        cu_mask: Option<CuMask>,
    ) -> Result<usize> {
        let free = |st: &State<B::Queue, S, E, T, M, G, N, X>| {
            // Prefer a slot whose cached queue already matches.
            st.streams
                .iter()
                .position(|s| {
                    s.state == SlotState::Free
                        && s.hw
                            .as_ref()
                            .is_some_and(|h| h.device == device && h.priority == priority && h.cu_mask == cu_mask)
                })
                .or_else(|| st.streams.iter().position(|s| s.state == SlotState::Free))
        };
        let i = match free(st) {
            Some(i) => i,
            None => {
                self.reap(st);
                free(st).ok_or(Error::OutOfMemory)?
            }
        };
        self.bind(st, i, device, priority, cu_mask)?;
        let slot = st.streams.get_mut(i).ok_or(Error::OutOfMemory)?;
        slot.generation.occupy();
        slot.state = SlotState::Live;
        slot.kind = kind;
        slot.device = device;
        slot.flags = flags;
        slot.priority = priority;
        slot.cu_mask = cu_mask;
        slot.id = next_stream_id();
        slot.capture = None;
        slot.capture_status = CaptureStatus::None;
        slot.capture_deps = DepSet::EMPTY;
        slot.context = None;
        slot.detached = false;
        debug!("stream slot {} live, id {}", i, slot.id);
        Ok(i)
    }

    pub(super) fn handle_of(st: &State<B::Queue, S, E, T, M, G, N, X>, i: usize) -> StreamHandle {
        let g = st.streams.get(i).map_or(0, |s| s.generation.current);
        StreamHandle(table::encode(STREAM_TAG, g, i))
    }

    /// Ends a live stream: handles go stale now; the slot frees now if its work is done, else
    /// once it is (see [`reap`](Self::reap)).
    pub(super) fn retire_stream(&self, st: &mut State<B::Queue, S, E, T, M, G, N, X>, i: usize) {
        Self::capture_on_destroy(st, i);
        let idle = st.streams.get(i).is_some_and(|s| self.is_idle(s));
        if let Some(s) = st.streams.get_mut(i) {
            s.generation.vacate();
            s.state = if idle { SlotState::Free } else { SlotState::Draining };
        }
    }

    /// Frees draining slots whose queues are idle (or dead).
    pub(super) fn reap(&self, st: &mut State<B::Queue, S, E, T, M, G, N, X>) {
        for i in 0..S {
            let Some(s) = st.streams.get(i) else { continue };
            if s.state != SlotState::Draining {
                continue;
            }
            let dead = s.hw.as_ref().is_none_or(|hw| self.backend.queue_fault(&hw.queue).is_some());
            if dead || self.is_idle(s) {
                if let Some(s) = st.streams.get_mut(i) {
                    s.state = SlotState::Free;
                    if dead {
                        if let Some(hw) = s.hw.take() {
                            self.release_hw(hw);
                        }
                    }
                }
            }
        }
        for e in st.events.iter_mut() {
            // SAFETY: a draining event keeps its backend signal until it is freed.
            if e.state == SlotState::Draining && unsafe { e.signal.get() }.load() <= 0 {
                e.state = SlotState::Free;
            }
        }
    }

    /// Whether every counted packet of the stream has completed, read straight from the
    /// progress signal (no backend call: bookkeeping paths use this).
    pub(super) fn is_idle(&self, s: &StreamSlot<B::Queue>) -> bool {
        match &s.hw {
            // SAFETY: a bound slot's progress signal is live until its hardware is released.
            Some(hw) => unsafe { hw.signal.get() }.load() <= -(s.submitted as i64),
            None => true,
        }
    }

    /// Like [`is_idle`](Self::is_idle), but lets the backend make progress first (a zero-time
    /// wait): the answer `hipStreamQuery` gives.
    pub(super) fn poll_idle(&self, s: &StreamSlot<B::Queue>) -> bool {
        match &s.hw {
            Some(hw) => {
                self.is_idle(s)
                    || self.backend.signal_wait(hw.signal, Condition::Lt, 1 - s.submitted as i64, Timeout::ZERO).is_ok()
            }
            None => true,
        }
    }

    pub(super) fn null_stream(&self, st: &mut State<B::Queue, S, E, T, M, G, N, X>, device: u32) -> Result<usize> {
        let raw = st.devices.get(device as usize).ok_or(Error::InvalidDevice)?.null_stream;
        if let Lookup::Live(i) = lookup_stream(&st.streams, raw) {
            return Ok(i);
        }
        let i = self.create_slot(st, StreamKind::Null, device, StreamFlags::DEFAULT, Priority::Normal, None)?;
        let h = Self::handle_of(st, i);
        if let Some(d) = st.devices.get_mut(device as usize) {
            d.null_stream = h.0;
        }
        Ok(i)
    }

    pub(super) fn per_thread_stream(&self, st: &mut State<B::Queue, S, E, T, M, G, N, X>) -> Result<usize> {
        let t = self.thread_slot(st)?;
        let ts = st.threads.get(t).copied().ok_or(Error::OutOfMemory)?;
        let device = ts.device;
        let raw = ts.per_thread.get(device as usize).copied().ok_or(Error::InvalidDevice)?;
        if let Lookup::Live(i) = lookup_stream(&st.streams, raw) {
            return Ok(i);
        }
        let i = self.create_slot(st, StreamKind::PerThread, device, StreamFlags::DEFAULT, Priority::Normal, None)?;
        let h = Self::handle_of(st, i);
        if let Some(p) = st.threads.get_mut(t).and_then(|ts| ts.per_thread.get_mut(device as usize)) {
            *p = h.0;
        }
        Ok(i)
    }

    /// Resolves a handle to a live slot: `0`/`hipStreamLegacy` to the current device's null
    /// stream, `hipStreamPerThread` to the calling thread's stream; stale handles answer
    /// `stale`, never-issued ones `InvalidHandle`.
    pub(super) fn resolve(
        &self,
        st: &mut State<B::Queue, S, E, T, M, G, N, X>,
        s: StreamHandle,
        stale: Error,
    ) -> Result<usize> {
        self.device_count()?;
        match s {
            StreamHandle::NULL | StreamHandle::LEGACY => {
                let d = self.current_device(st);
                self.null_stream(st, d)
            }
            StreamHandle::PER_THREAD => self.per_thread_stream(st),
            StreamHandle(raw) => table::require(lookup_stream(&st.streams, raw), stale, Error::InvalidHandle),
        }
    }

    // ----- stream management ---------------------------------------------------------------

    /// `hipStreamCreateWithFlags`: unknown flag bits are `InvalidValue`.
    pub fn stream_create(&self, flags: u32) -> Result<StreamHandle> {
        self.stream_create_with_priority(flags, 0)
    }

    /// `hipStreamCreateWithPriority`: the priority is clamped into [-1, 1], never an error.
    pub fn stream_create_with_priority(&self, flags: u32, priority: i32) -> Result<StreamHandle> {
        let priority = Priority::clamp(priority);
        let flags = StreamFlags::from_raw(flags)?;
        self.device_count()?;
        let mut st = self.state.lock();
        let device = self.current_device(&st);
        let i = self.create_slot(&mut st, StreamKind::Created, device, flags, priority, None)?;
        Ok(Self::handle_of(&st, i))
    }

    /// `hipExtStreamCreateWithCUMask`: flags 0, Normal priority, the given CU mask (bits past
    /// the device's CUs ignored; an empty mask or one enabling no CU is `InvalidValue`).
    pub fn stream_create_with_cu_mask(&self, mask: &[u32]) -> Result<StreamHandle> {
        if mask.is_empty() {
            return Err(Error::InvalidValue);
        }
        self.device_count()?;
        let mut st = self.state.lock();
        let device = self.current_device(&st);
        let info = self.backend.device_info(device)?;
        let cu_mask = CuMask::from_words(mask, info.cu_count)?;
        let i = self.create_slot(
            &mut st,
            StreamKind::Created,
            device,
            StreamFlags::DEFAULT,
            Priority::Normal,
            Some(cu_mask),
        )?;
        Ok(Self::handle_of(&st, i))
    }

    /// `hipStreamDestroy`: returns at once; pending work still completes and the queue is
    /// reused or released afterwards. `0`, `hipStreamLegacy` and `hipStreamPerThread` are
    /// `InvalidHandle`; a stale handle is `ContextIsDestroyed`.
    pub fn stream_destroy(&self, s: StreamHandle) -> Result<()> {
        if s.0 <= 2 {
            return Err(Error::InvalidHandle);
        }
        let mut st = self.state.lock();
        let i = table::require(lookup_stream(&st.streams, s.0), Error::ContextIsDestroyed, Error::InvalidHandle)?;
        if st.streams.get(i).is_some_and(|sl| sl.kind != StreamKind::Created) {
            return Err(Error::InvalidHandle);
        }
        self.retire_stream(&mut st, i);
        trace!("stream {} destroyed", s.0);
        Ok(())
    }

    /// `hipStreamGetFlags`: `0` and `hipStreamLegacy` are `InvalidValue` (HIP differs from CUDA
    /// here); the per-thread stream reports 0.
    pub fn stream_flags(&self, s: StreamHandle) -> Result<u32> {
        if s.is_null_or_legacy() {
            return Err(Error::InvalidValue);
        }
        self.stream_attr(s, Error::ContextIsDestroyed, |sl| sl.flags.bits())
    }

    /// `hipStreamGetPriority`: 0 for the null stream and the per-thread stream.
    pub fn stream_priority(&self, s: StreamHandle) -> Result<i32> {
        if s.is_null_or_legacy() {
            self.device_count()?;
            return Ok(0);
        }
        self.stream_attr(s, Error::ContextIsDestroyed, |sl| sl.priority.value())
    }

    /// `hipStreamGetDevice`: the current device for `0`/`hipStreamLegacy`.
    pub fn stream_device(&self, s: StreamHandle) -> Result<u32> {
        if s.is_null_or_legacy() {
            return self.device();
        }
        self.stream_attr(s, Error::ContextIsDestroyed, |sl| sl.device)
    }

    /// `hipStreamGetId`: `0` and `hipStreamLegacy` share the null stream's id; stale handles are
    /// `InvalidHandle`.
    pub fn stream_id(&self, s: StreamHandle) -> Result<u64> {
        self.stream_attr(s, Error::InvalidHandle, |sl| sl.id)
    }

    /// `hipExtStreamGetCUMask`: the stream's mask, or every CU of the device when it has none
    /// (always for `0`, `hipStreamLegacy` and the per-thread stream). `out` must hold
    /// `ceil(CUs / 32)` dwords.
    pub fn stream_cu_mask(&self, s: StreamHandle, out: &mut [u32]) -> Result<()> {
        let (device, mask) = if s.0 <= 2 {
            (self.device()?, None)
        } else {
            self.stream_attr(s, Error::ContextIsDestroyed, |sl| (sl.device, sl.cu_mask))?
        };
        let cus = self.backend.device_info(device)?.cu_count;
        mask.unwrap_or_else(|| CuMask::full(cus)).write_to(out, cus)
    }

    pub(super) fn stream_attr<R>(
        &self,
        s: StreamHandle,
        stale: Error,
        f: impl FnOnce(&StreamSlot<B::Queue>) -> R,
    ) -> Result<R> {
        let mut st = self.state.lock();
        let i = self.resolve(&mut st, s, stale)?;
        st.streams.get(i).map(f).ok_or(Error::InvalidHandle)
    }

    /// Runs `f` on the hardware queue behind `s` (resolving `0`, `hipStreamLegacy` and
    /// `hipStreamPerThread` as work submission does). For tests and fault injection.
    #[doc(hidden)]
    pub fn with_stream_queue<R>(&self, s: StreamHandle, f: impl FnOnce(&B::Queue) -> R) -> Result<R> {
        let mut st = self.state.lock();
        let i = self.resolve(&mut st, s, Error::ContextIsDestroyed)?;
        let hw = st.streams.get(i).and_then(|sl| sl.hw.as_ref()).ok_or(Error::InvalidHandle)?;
        Ok(f(&hw.queue))
    }

    /// Whether `s` is a live created stream of `device` (the device's stream set).
    pub fn stream_exists(&self, device: u32, s: StreamHandle) -> bool {
        let st = self.state.lock();
        match lookup_stream(&st.streams, s.0) {
            Lookup::Live(i) => {
                st.streams.get(i).is_some_and(|sl| sl.device == device && sl.kind == StreamKind::Created)
            }
            _ => false,
        }
    }

    /// Writes the live created streams of `device` into `out`; returns how many there are.
    pub fn device_streams(&self, device: u32, out: &mut [StreamHandle]) -> usize {
        let st = self.state.lock();
        let mut n = 0;
        for (i, sl) in st.streams.iter().enumerate() {
            if sl.state == SlotState::Live && sl.kind == StreamKind::Created && sl.device == device {
                if let Some(o) = out.get_mut(n) {
                    *o = Self::handle_of(&st, i);
                }
                n += 1;
            }
        }
        n
    }
}
