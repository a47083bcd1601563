//! Stream slots, the hardware-queue pool's policy, and the stream-management API
//! (`hipStreamCreate*`, `hipStreamDestroy`, the getters).

use portable_atomic::Ordering;

use super::{Lists, Runtime, St, Structure};
use crate::backend::Backend;
#[cfg(feature = "capture")]
use crate::capture::DepSet;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::pool::{Binding, QueueHw};
use crate::slot::Table;
use crate::slots::stream::{Attrs, StreamInner, StreamKind, StreamSlot};
use crate::slots::SlotState;
use crate::stream::{CuMask, Priority, StreamFlags, StreamHandle};
use crate::table::{self, Lookup};
use crate::thread::ThreadKeys;

/// What a new stream is.
#[derive(Debug, Clone, Copy)]
pub(super) struct NewStream {
    pub(super) kind: StreamKind,
    pub(super) device: u32,
    pub(super) flags: StreamFlags,
    pub(super) priority: Priority,
    pub(super) cu_mask: Option<CuMask>,
    pub(super) context: Option<u8>,
}

/// Takes a slot: the free list first, then a never-used one (raising `high`).
fn take(
    lists: &mut Lists,
    links: impl Fn(usize) -> Option<u32>,
    high: &portable_atomic::AtomicU32,
    len: usize,
) -> Option<usize> {
    if lists.free != 0 {
        let i = (lists.free - 1) as usize;
        lists.free = links(i)?;
        return Some(i);
    }
    // Ordering: Relaxed load under the structural lock; Release so lock-free scans that read the
    // new bound also see the slot's initialisation (published again by its word).
    let h = high.load(Ordering::Relaxed) as usize;
    if h < len {
        high.store(h as u32 + 1, Ordering::Release);
        return Some(h);
    }
    None
}

impl<B: Backend, K: ThreadKeys, C: Config> Runtime<B, K, C> {
    // ----- slot lists ----------------------------------------------------------------------

    fn push_stream(&self, head: &mut u32, i: usize) {
        if let Some(s) = self.streams.slots().get(i) {
            // Ordering: Relaxed; links change only under the structural lock.
            s.link.store(*head, Ordering::Relaxed);
            *head = i as u32 + 1;
        }
    }

    pub(super) fn push_event(&self, head: &mut u32, i: usize) {
        if let Some(e) = self.events.slots().get(i) {
            // Ordering: Relaxed, as above.
            e.link.store(*head, Ordering::Relaxed);
            *head = i as u32 + 1;
        }
    }

    fn take_stream_slot(&self, st: &mut St<C>) -> Option<usize> {
        let slots = self.streams.slots();
        // Ordering: Relaxed; links change only under the structural lock.
        let links = |i: usize| slots.get(i).map(|s| s.link.load(Ordering::Relaxed));
        take(&mut st.streams, links, &self.stream_high, slots.len())
    }

    pub(super) fn take_event_slot(&self, st: &mut St<C>) -> Option<usize> {
        let slots = self.events.slots();
        // Ordering: Relaxed, as above.
        let links = |i: usize| slots.get(i).map(|e| e.link.load(Ordering::Relaxed));
        take(&mut st.events, links, &self.event_high, slots.len())
    }

    // ----- the queue pool --------------------------------------------------------------------

    /// The pooled queue behind a binding.
    #[inline]
    pub(super) fn queue_of<'a>(&'a self, b: &'a Binding) -> Result<&'a QueueHw<B::Queue>> {
        self.queues.slots().get(b.index()).and_then(|q| q.get(b)).ok_or(Error::InvalidHandle)
    }

    /// Destroys the queue in slot `q` if no stream is bound to it.
    fn drop_queue(&self, st: &mut St<C>, q: usize) -> bool {
        let Some(slot) = self.queues.slots().get(q) else { return false };
        match slot.replace(&mut st.pool, None) {
            Ok(Some(hw)) => {
                trace!("queue slot {} destroyed", q);
                self.backend.queue_destroy(hw.queue);
                true
            }
            Ok(None) => false,
            Err(_) => false,
        }
    }

    /// Creates a queue for (device, priority, mask) into an empty slot (or one freed from an
    /// idle queue), retrying once after giving back every idle queue if the backend is out of
    /// queues. Returns the slot.
    fn create_queue(&self, st: &mut St<C>, device: u32, priority: Priority, mask: Option<CuMask>) -> Result<usize> {
        let mut retried = false;
        loop {
            let slots = self.queues.slots();
            let empty = slots.iter().position(|q| q.peek(&st.pool).is_none());
            let q = match empty {
                Some(q) => q,
                None => {
                    // Reuse the slot of an idle queue (one no stream is bound to).
                    let idle = slots.iter().position(|q| q.bound() == 0 && q.peek(&st.pool).is_some());
                    let q = idle.ok_or(Error::OutOfMemory)?;
                    self.drop_queue(st, q);
                    q
                }
            };
            match self.backend.queue_create(device, priority, mask.as_ref()) {
                Ok(queue) => {
                    let desc = match self.backend.queue_desc(&queue) {
                        Ok(d) => d,
                        Err(e) => {
                            self.backend.queue_destroy(queue);
                            return Err(e);
                        }
                    };
                    let hw = QueueHw {
                        queue,
                        desc,
                        device,
                        priority,
                        cu_mask: mask,
                        shared: portable_atomic::AtomicBool::new(false),
                        rung: crate::sync::atomic64::AtomicU64::new(0),
                    };
                    let slot = slots.get(q).ok_or(Error::OutOfMemory)?;
                    if let Err(Some(hw)) = slot.replace(&mut st.pool, Some(hw)) {
                        self.backend.queue_destroy(hw.queue);
                        return Err(Error::OutOfMemory);
                    }
                    debug!("queue slot {} created on device {}", q, device);
                    return Ok(q);
                }
                Err(Error::OutOfMemory) if !retried => {
                    retried = true;
                    let mut freed = false;
                    for q in 0..slots.len() {
                        if slots.get(q).is_some_and(|s| s.bound() == 0) {
                            freed |= self.drop_queue(st, q);
                        }
                    }
                    if !freed {
                        return Err(Error::OutOfMemory);
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The pool's policy (`docs/queue-pool.md`): an idle queue of the stream's key, else a new
    /// queue while the device is under its budget, else the least-loaded queue of the key. A key
    /// with no queue gets one even past the budget (reclaiming an idle queue of another key
    /// first), so creating a stream never fails for lack of queues while the backend has one.
    fn bind_queue(&self, st: &mut St<C>, device: u32, priority: Priority, mask: Option<CuMask>) -> Result<Binding> {
        let budget = self.max_hw_queues(device)?;
        let slots = self.queues.slots();
        let mut idle_same = None;
        let mut least: Option<(usize, u32)> = None;
        let mut on_device = 0u32;
        let mut idle_other = None;
        for (q, slot) in slots.iter().enumerate() {
            let Some(hw) = slot.peek(&st.pool) else { continue };
            let faulted = self.backend.queue_fault(&hw.queue).is_some();
            let same = hw.device == device && hw.priority == priority && hw.cu_mask == mask;
            if hw.device == device {
                on_device += 1;
            }
            if slot.bound() == 0 && (faulted || !same) && hw.device == device {
                idle_other.get_or_insert(q);
            }
            if faulted || !same {
                continue;
            }
            if slot.bound() == 0 {
                idle_same.get_or_insert(q);
            }
            if least.is_none_or(|(_, n)| slot.bound() < n) {
                least = Some((q, slot.bound()));
            }
        }
        let q = match (idle_same, least) {
            (Some(q), _) => q,
            (None, Some((q, _))) if on_device >= budget => q,
            (None, least) => {
                if least.is_none() && on_device >= budget {
                    // A new key past the budget: give back an idle queue of another key first.
                    if let Some(q) = idle_other {
                        self.drop_queue(st, q);
                    }
                }
                match self.create_queue(st, device, priority, mask) {
                    Ok(q) => q,
                    // Out of queues with a queue of this key: share it.
                    Err(Error::OutOfMemory) if least.is_some() => least.map_or(0, |(q, _)| q),
                    Err(e) => return Err(e),
                }
            }
        };
        let slot = slots.get(q).ok_or(Error::OutOfMemory)?;
        if slot.bound() == 0 {
            if let Some(hw) = slot.peek(&st.pool) {
                // No stream uses the queue: the next one is its only producer.
                hw.shared.store(false, Ordering::Release);
            }
        } else if let Some(hw) = slot.peek(&st.pool) {
            if !hw.shared.load(Ordering::Acquire) {
                // From one producer to several: every stream bound now must see `shared`
                // before its next publish, so set it under their locks (a stream's publish
                // holds its lock throughout).
                for s in self.stream_slots() {
                    let inner = s.inner.lock();
                    if inner.binding.as_ref().is_some_and(|b| b.index() == q) {
                        // Ordering: Release under the stream's lock, read with Acquire there.
                        hw.shared.store(true, Ordering::Release);
                    }
                }
                hw.shared.store(true, Ordering::Release);
            }
        }
        slot.bind(&mut st.pool, q).ok_or(Error::OutOfMemory)
    }

    /// Gives a stream's binding back to the pool. A faulted queue nobody uses any more is
    /// destroyed: its packets will never run, and no new stream may get it.
    fn unbind(&self, st: &mut St<C>, inner: &mut StreamInner) {
        if let Some(b) = inner.binding.take() {
            let q = b.index();
            if let Some(slot) = self.queues.slots().get(q) {
                slot.unbind(&mut st.pool, b);
                let faulted = slot.peek(&st.pool).is_some_and(|hw| self.backend.queue_fault(&hw.queue).is_some());
                if faulted && slot.bound() == 0 {
                    self.drop_queue(st, q);
                }
            }
        }
    }

    // ----- stream slots ----------------------------------------------------------------------

    /// Takes a free slot (reaping drained ones if needed), binds it to a pooled queue and makes
    /// it a live stream.
    pub(super) fn create_slot(&self, st: &mut St<C>, n: NewStream) -> Result<usize> {
        let i = match self.take_stream_slot(st) {
            Some(i) => i,
            None => {
                self.reap(st);
                self.take_stream_slot(st).ok_or(Error::OutOfMemory)?
            }
        };
        let result = self.init_slot(st, i, n);
        if result.is_err() {
            let mut head = st.streams.free;
            self.push_stream(&mut head, i);
            st.streams.free = head;
        }
        result.map(|_| i)
    }

    fn init_slot(&self, st: &mut St<C>, i: usize, n: NewStream) -> Result<()> {
        let slot = self.stream(i)?;
        slot.progress.get_or_create(&self.backend, 0)?;
        let binding = self.bind_queue(st, n.device, n.priority, n.cu_mask)?;
        let read_hint = self.queue_of(&binding).map(|hw| hw.desc.ring.read_index()).unwrap_or(0);
        let mut inner = slot.inner.lock();
        *inner = StreamInner {
            binding: Some(binding),
            read_hint,
            cu_mask: n.cu_mask,
            #[cfg(feature = "capture")]
            capture: None,
            #[cfg(feature = "capture")]
            capture_deps: DepSet::EMPTY,
        };
        slot.set_attrs(Attrs {
            device: n.device,
            kind: n.kind,
            flags: n.flags,
            priority: n.priority,
            detached: false,
            context: n.context,
        });
        // Ordering: Relaxed; published by the word's Release store.
        slot.id.store(super::next_stream_id(), Ordering::Relaxed);
        slot.word.occupy();
        drop(inner);
        debug!("stream slot {} live", i);
        Ok(())
    }

    /// Ends a live stream: its handles go stale now; the slot frees now if its work is done,
    /// else once it is ([`reap`](Self::reap)). Its pending work stays the device's work.
    pub(super) fn retire_stream(&self, st: &mut St<C>, i: usize) {
        #[cfg(feature = "capture")]
        self.capture_on_destroy(st, i);
        let Some(slot) = self.streams.slots().get(i) else { return };
        let mut inner = slot.inner.lock();
        if slot.word.state() != SlotState::Live {
            return;
        }
        let idle = self.release_if_idle(st, slot, &mut inner);
        slot.word.vacate(if idle { SlotState::Free } else { SlotState::Draining });
        if idle {
            drop(inner);
            let mut head = st.streams.free;
            self.push_stream(&mut head, i);
            st.streams.free = head;
        } else {
            drop(inner);
            let mut head = st.streams.draining;
            self.push_stream(&mut head, i);
            st.streams.draining = head;
        }
    }

    /// The end of a stream's life that retiring and reaping share (its lock held as `inner`):
    /// work that can never complete is counted done ([`settle`](Self::settle)), and an idle
    /// slot gives its binding back. Returns whether it was idle. One copy for both
    /// (docs/architecture.md, "Footprint").
    #[cfg_attr(not(target_has_atomic = "64"), inline(never))]
    fn release_if_idle(&self, st: &mut St<C>, slot: &StreamSlot<K::RawMutex>, inner: &mut StreamInner) -> bool {
        if self.queue_faulted(inner) {
            Self::settle(slot);
        }
        let idle = slot.is_idle();
        if idle {
            self.unbind(st, inner);
        }
        idle
    }

    /// Counts everything slot `slot` published as done: for work that can never complete (its
    /// queue faulted or was destroyed by a device reset), so nothing waits on it and the slot's
    /// next life starts idle.
    pub(super) fn settle(slot: &StreamSlot<K::RawMutex>) {
        if let Some((p, n)) = slot.point() {
            // Ordering: AcqRel, as the packet processor's decrements.
            p.get().value.fetch_min(-(n as i64), Ordering::AcqRel);
        }
    }

    /// Whether the queue a stream is bound to has faulted (its work will never complete).
    pub(super) fn queue_faulted(&self, inner: &StreamInner) -> bool {
        inner
            .binding
            .as_ref()
            .and_then(|b| self.queue_of(b).ok())
            .is_some_and(|hw| self.backend.queue_fault(&hw.queue).is_some())
    }

    /// Frees draining streams and events whose work is done (or can never be).
    pub(super) fn reap(&self, st: &mut Structure<C>) {
        let mut keep = 0u32;
        let mut cur = st.streams.draining;
        st.streams.draining = 0;
        while cur != 0 {
            let i = (cur - 1) as usize;
            let Some(slot) = self.streams.slots().get(i) else { break };
            // Ordering: Relaxed; links change only under the structural lock.
            cur = slot.link.load(Ordering::Relaxed);
            let mut inner = slot.inner.lock();
            if slot.word.state() != SlotState::Draining {
                // Freed meanwhile (device reset): no longer on this list.
                continue;
            }
            if self.release_if_idle(st, slot, &mut inner) {
                slot.word.set_state(SlotState::Free);
                drop(inner);
                let mut head = st.streams.free;
                self.push_stream(&mut head, i);
                st.streams.free = head;
            } else {
                drop(inner);
                self.push_stream(&mut keep, i);
            }
        }
        st.streams.draining = keep;
        self.reap_events(st);
    }

    fn reap_events(&self, st: &mut Structure<C>) {
        let mut keep = 0u32;
        let mut cur = st.events.draining;
        st.events.draining = 0;
        while cur != 0 {
            let i = (cur - 1) as usize;
            let Some(e) = self.events.slots().get(i) else { break };
            // Ordering: Relaxed; links change only under the structural lock.
            cur = e.link.load(Ordering::Relaxed);
            let pending = Self::record_pending(&e.inner.lock());
            if pending {
                self.push_event(&mut keep, i);
            } else {
                e.word.set_state(SlotState::Free);
                let mut head = st.events.free;
                self.push_event(&mut head, i);
                st.events.free = head;
            }
        }
        st.events.draining = keep;
    }

    fn null_stream(&self, device: u32) -> Result<usize> {
        let d = self.devices.get(device as usize).ok_or(Error::InvalidDevice)?;
        self.lazy_stream(&d.null_stream, StreamKind::Null, device)
    }

    /// The stream whose handle `cell` keeps, created (of `kind`, on `device`, default flags and
    /// priority) if it is not live: the null stream of a device and the per-thread streams.
    fn lazy_stream(&self, cell: &crate::sync::atomic64::AtomicU64, kind: StreamKind, device: u32) -> Result<usize> {
        // Ordering: Acquire pairs with the Release store below.
        if let Lookup::Live(i) = self.lookup_stream(cell.load(Ordering::Acquire)) {
            return Ok(i);
        }
        let mut st = self.lock();
        // Ordering: Acquire, as above; another thread may have created it meanwhile.
        if let Lookup::Live(i) = self.lookup_stream(cell.load(Ordering::Acquire)) {
            return Ok(i);
        }
        let i = self.create_slot(
            &mut st,
            NewStream {
                kind,
                device,
                flags: StreamFlags::DEFAULT,
                priority: Priority::Normal,
                cu_mask: None,
                context: None,
            },
        )?;
        // Ordering: Release publishes the live slot with its handle.
        cell.store(self.handle_of(i).0, Ordering::Release);
        Ok(i)
    }

    /// The null stream of `device` if it exists (never creates it).
    pub(super) fn existing_null_stream(&self, device: u32) -> Option<usize> {
        let d = self.devices.get(device as usize)?;
        // Ordering: Acquire pairs with the Release in `null_stream`.
        match self.lookup_stream(d.null_stream.load(Ordering::Acquire)) {
            Lookup::Live(i) => Some(i),
            _ => None,
        }
    }

    fn per_thread_stream(&self) -> Result<usize> {
        let t = self.thread_slot()?;
        // Ordering: Relaxed; the calling thread's own slot.
        let device = t.device.load(Ordering::Relaxed);
        let p = t.per_thread.get(device as usize).ok_or(Error::InvalidDevice)?;
        self.lazy_stream(p, StreamKind::PerThread, device)
    }

    /// Resolves a handle to a live slot and the handle generation it was found with: `0` and
    /// `hipStreamLegacy` to the current device's null stream, `hipStreamPerThread` to the
    /// calling thread's stream; stale handles answer `stale`, never-issued ones
    /// `InvalidHandle`. No lock unless the null or per-thread stream must be created.
    ///
    /// A created stream's handle is looked up inline; the null and per-thread streams, which
    /// find the calling thread's slot, are out of line on hosts (docs/architecture.md, "The
    /// submit path, instruction by instruction").
    #[inline]
    pub(super) fn resolve(&self, s: StreamHandle, stale: Error) -> Result<usize> {
        self.device_count()?;
        match s {
            StreamHandle::NULL | StreamHandle::LEGACY => self.resolve_default(false),
            StreamHandle::PER_THREAD => self.resolve_default(true),
            StreamHandle(raw) => table::require(self.lookup_stream(raw), stale, Error::InvalidHandle),
        }
    }

    /// [`resolve`](Self::resolve) of `0` and `hipStreamLegacy` (the null stream), or of
    /// `hipStreamPerThread`.
    #[cfg_attr(target_has_atomic = "64", inline(never))]
    #[cfg_attr(not(target_has_atomic = "64"), inline(always))]
    fn resolve_default(&self, per_thread: bool) -> Result<usize> {
        if per_thread {
            self.per_thread_stream()
        } else {
            self.null_stream(self.current_device())
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
        let device = self.current_device();
        let mut st = self.lock();
        let i = self.create_slot(
            &mut st,
            NewStream { kind: StreamKind::Created, device, flags, priority, cu_mask: None, context: None },
        )?;
        Ok(self.handle_of(i))
    }

    /// `hipExtStreamCreateWithCUMask`: flags 0, Normal priority, the given CU mask (bits past
    /// the device's CUs ignored; an empty mask or one enabling no CU is `InvalidValue`).
    pub fn stream_create_with_cu_mask(&self, mask: &[u32]) -> Result<StreamHandle> {
        if mask.is_empty() {
            return Err(Error::InvalidValue);
        }
        self.device_count()?;
        let device = self.current_device();
        let info = self.backend.device_info(device)?;
        let cu_mask = CuMask::from_words(mask, info.cu_count)?;
        let mut st = self.lock();
        let i = self.create_slot(
            &mut st,
            NewStream {
                kind: StreamKind::Created,
                device,
                flags: StreamFlags::DEFAULT,
                priority: Priority::Normal,
                cu_mask: Some(cu_mask),
                context: None,
            },
        )?;
        Ok(self.handle_of(i))
    }

    /// `hipStreamDestroy`: returns at once; pending work still completes, the null stream and
    /// device synchronisation still wait for it, and the slot is reused afterwards. `0`,
    /// `hipStreamLegacy` and `hipStreamPerThread` are `InvalidHandle`; a stale handle is
    /// `ContextIsDestroyed`.
    pub fn stream_destroy(&self, s: StreamHandle) -> Result<()> {
        if s.0 <= 2 {
            return Err(Error::InvalidHandle);
        }
        let mut st = self.lock();
        let i = table::require(self.lookup_stream(s.0), Error::ContextIsDestroyed, Error::InvalidHandle)?;
        if self.stream(i)?.attrs().kind != StreamKind::Created {
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
        self.stream_attr(s, Error::ContextIsDestroyed, |a| a.flags.bits())
    }

    /// `hipStreamGetPriority`: 0 for the null stream and the per-thread stream.
    pub fn stream_priority(&self, s: StreamHandle) -> Result<i32> {
        if s.is_null_or_legacy() {
            self.device_count()?;
            return Ok(0);
        }
        self.stream_attr(s, Error::ContextIsDestroyed, |a| a.priority.value())
    }

    /// `hipStreamGetDevice`: the current device for `0`/`hipStreamLegacy`.
    pub fn stream_device(&self, s: StreamHandle) -> Result<u32> {
        if s.is_null_or_legacy() {
            return self.device();
        }
        self.stream_attr(s, Error::ContextIsDestroyed, |a| a.device)
    }

    /// `hipStreamGetId`: `0` and `hipStreamLegacy` share the null stream's id; stale handles are
    /// `InvalidHandle`.
    pub fn stream_id(&self, s: StreamHandle) -> Result<u64> {
        let i = self.resolve(s, Error::InvalidHandle)?;
        // Ordering: Relaxed; published with the slot word (Acquire in the lookup).
        Ok(self.stream(i)?.id.load(Ordering::Relaxed))
    }

    /// `hipExtStreamGetCUMask`: the stream's mask, or every CU of the device when it has none
    /// (always for `0`, `hipStreamLegacy` and the per-thread stream). `out` must hold
    /// `ceil(CUs / 32)` dwords.
    pub fn stream_cu_mask(&self, s: StreamHandle, out: &mut [u32]) -> Result<()> {
        let (device, mask) = if s.0 <= 2 {
            (self.device()?, None)
        } else {
            let i = self.resolve(s, Error::ContextIsDestroyed)?;
            let slot = self.stream(i)?;
            (slot.attrs().device, slot.inner.lock().cu_mask)
        };
        let cus = self.backend.device_info(device)?.cu_count;
        mask.unwrap_or_else(|| CuMask::full(cus)).write_to(out, cus)
    }

    pub(super) fn stream_attr<R>(&self, s: StreamHandle, stale: Error, f: impl FnOnce(Attrs) -> R) -> Result<R> {
        let i = self.resolve(s, stale)?;
        Ok(f(self.stream(i)?.attrs()))
    }

    /// Runs `f` on the hardware queue behind `s` (resolving `0`, `hipStreamLegacy` and
    /// `hipStreamPerThread` as work submission does). For tests and fault injection.
    #[doc(hidden)]
    pub fn with_stream_queue<R>(&self, s: StreamHandle, f: impl FnOnce(&B::Queue) -> R) -> Result<R> {
        let i = self.resolve(s, Error::ContextIsDestroyed)?;
        let inner = self.stream(i)?.inner.lock();
        let b = inner.binding.as_ref().ok_or(Error::InvalidHandle)?;
        Ok(f(&self.queue_of(b)?.queue))
    }

    /// Hardware queues the pool holds on `device` now (created lazily, kept while idle).
    pub fn hw_queue_count(&self, device: u32) -> usize {
        let st = self.lock();
        self.queues.slots().iter().filter(|q| q.peek(&st.pool).is_some_and(|hw| hw.device == device)).count()
    }

    /// Whether `s` is a live created stream of `device` (the device's stream set).
    pub fn stream_exists(&self, device: u32, s: StreamHandle) -> bool {
        match self.lookup_stream(s.0) {
            Lookup::Live(i) => self
                .streams
                .slots()
                .get(i)
                .is_some_and(|sl| sl.attrs().device == device && sl.attrs().kind == StreamKind::Created),
            _ => false,
        }
    }

    /// Writes the live created streams of `device` into `out`; returns how many there are.
    pub fn device_streams(&self, device: u32, out: &mut [StreamHandle]) -> usize {
        let mut n = 0;
        for (i, sl) in self.stream_slots().iter().enumerate() {
            let a = sl.attrs();
            if sl.word.state() == SlotState::Live && a.kind == StreamKind::Created && a.device == device {
                if let Some(o) = out.get_mut(n) {
                    *o = self.handle_of(i);
                }
                n += 1;
            }
        }
        n
    }

    /// Checks that slot `i` still holds the stream found with handle generation `generation`.
    #[inline]
    pub(super) fn still_live(slot: &StreamSlot<K::RawMutex>, generation: u32) -> bool {
        slot.word.state() == SlotState::Live && slot.word.handle_generation() == generation
    }

    /// Slot `i`'s handle generation (what `resolve` saw).
    #[inline]
    pub(super) fn generation_of(&self, i: usize) -> u32 {
        self.streams.slots().get(i).map_or(0, |s| s.word.handle_generation())
    }
}

impl<B: Backend, K: ThreadKeys, C: Config> Runtime<B, K, C> {
    /// Destroys the queues of `device` no stream uses any more.
    pub(super) fn drop_device_queues(&self, st: &mut St<C>, device: u32) {
        for q in 0..self.queues.slots().len() {
            let on_device =
                self.queues.slots().get(q).and_then(|s| s.peek(&st.pool)).is_some_and(|hw| hw.device == device);
            if on_device {
                self.drop_queue(st, q);
            }
        }
    }
}
