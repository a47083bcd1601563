//! Execution (green) contexts and detach (docs/hip-semantics.md §2.6, §4.8).
//!
//! A context owns a subset of a device's CUs and the streams created in it. Destroying the
//! context detaches those streams: a capture they take part in is invalidated with all its
//! branches and torn down (the detached streams keep reporting Invalidated), work and sync APIs
//! on them return `StreamDetached`, getters keep answering with the values from before, and
//! `stream_destroy` still succeeds. Null, legacy and per-thread streams never detach.

use super::stream::NewStream;
use super::{Runtime, St};
use crate::backend::Backend;
use crate::capture::CaptureStatus;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::slot::Table;
use crate::slots::context::{ContextHandle, CONTEXT_TAG};
use crate::slots::stream::StreamKind;
use crate::slots::SlotState;
use crate::stream::{CuMask, Priority, StreamFlags, StreamHandle};
use crate::table;
use crate::thread::ThreadKeys;

impl<B: Backend, K: ThreadKeys, C: Config> Runtime<B, K, C> {
    fn context_slot(st: &St<C>, ctx: ContextHandle) -> Result<usize> {
        let l = table::lookup(CONTEXT_TAG, ctx.0, st.contexts.slots(), |c| c.generation);
        table::require(l, Error::InvalidContext, Error::InvalidContext)
    }

    /// Creates an execution context on the current device owning the CUs in `cu_mask` (an empty
    /// slice means every CU). A mask enabling no CU is `InvalidValue`.
    pub fn context_create(&self, cu_mask: &[u32]) -> Result<ContextHandle> {
        let device = self.device()?;
        self.context_create_on(device, cu_mask)
    }

    /// [`context_create`](Self::context_create) on a given device (`InvalidDevice` if out of
    /// range).
    pub fn context_create_on(&self, device: u32, cu_mask: &[u32]) -> Result<ContextHandle> {
        if device >= self.device_count()? {
            return Err(Error::InvalidDevice);
        }
        let cus = self.backend.device_info(device)?.cu_count;
        let mask = if cu_mask.is_empty() { None } else { Some(CuMask::from_words(cu_mask, cus)?) };
        let mut st = self.lock();
        let i = st.contexts.slots().iter().position(|c| !c.generation.live).ok_or(Error::OutOfMemory)?;
        let slot = st.contexts.slots_mut().get_mut(i).ok_or(Error::OutOfMemory)?;
        let generation = slot.generation.occupy();
        slot.device = device;
        slot.cu_mask = mask;
        Ok(ContextHandle(table::encode(CONTEXT_TAG, generation, i)))
    }

    /// `hipExecutionCtxStreamCreate`: a stream owned by `ctx`, on its device and CUs. Context
    /// streams never synchronise with the null stream (they behave as non-blocking).
    pub fn context_stream_create(&self, ctx: ContextHandle, flags: u32, priority: i32) -> Result<StreamHandle> {
        let priority = Priority::clamp(priority);
        let flags = StreamFlags::from_raw(flags)? | StreamFlags::NON_BLOCKING;
        let mut st = self.lock();
        let c = Self::context_slot(&st, ctx)?;
        let (device, mask) = st.contexts.slots().get(c).map(|c| (c.device, c.cu_mask)).ok_or(Error::InvalidContext)?;
        let i = self.create_slot(
            &mut st,
            NewStream { kind: StreamKind::Created, device, flags, priority, cu_mask: mask, context: Some(c as u8) },
        )?;
        Ok(self.handle_of(i))
    }

    /// Destroys an execution context and detaches every stream it owns.
    pub fn context_destroy(&self, ctx: ContextHandle) -> Result<()> {
        let mut st = self.lock();
        let c = Self::context_slot(&st, ctx)?;
        // Mark every owned stream first, so a capture spanning several of them keeps all of
        // them visibly Invalidated when it is torn down.
        for s in self.stream_slots() {
            let mut a = s.attrs();
            if s.word.state() != SlotState::Free && a.context == Some(c as u8) {
                // The stream's lock orders the flag against an enqueue in flight on it. A capture
                // it took part in that has ended already is forgotten: only one torn down by
                // this detach leaves the stream reporting Invalidated.
                let mut inner = s.inner.lock();
                if Self::capture_in(&st, &inner).is_none() {
                    inner.capture = None;
                }
                a.detached = true;
                a.context = None;
                s.set_attrs(a);
            }
        }
        if self.any_capture() {
            for i in 0..self.stream_slots().len() {
                let detached = self.stream(i).is_ok_and(|s| s.attrs().detached && s.word.state() != SlotState::Free);
                if let Some(cap) = self.capture_of(&st, i).filter(|_| detached) {
                    Self::set_capture_status(&mut st, cap, CaptureStatus::Invalidated);
                    self.teardown_capture(&mut st, cap, false);
                }
            }
        }
        if let Some(slot) = st.contexts.slots_mut().get_mut(c) {
            slot.generation.vacate();
        }
        Ok(())
    }

    /// Whether `s` is detached (its execution context was destroyed).
    pub fn stream_is_detached(&self, s: StreamHandle) -> Result<bool> {
        self.stream_attr(s, Error::ContextIsDestroyed, |a| a.detached)
    }
}
