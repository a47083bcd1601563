//! KFD events (docs/kfd-aql.md §1.6, `kfd_events.c` semantics): the event page and its mailbox
//! slots, signal / memory / hardware-exception events, set/reset, and `WAIT_EVENTS` with
//! any/all, auto-reset, event age and timeouts.
//!
//! The command processor posts a completion by storing the event id into the signal's mailbox
//! slot and calling [`Events::interrupt`], which acknowledges the slot (writes it back to all
//! ones) and sets the event, as the interrupt handler does.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::abi::{event_type, limits, wait_result, EventData, HwExceptionData, MemoryExceptionData};
use crate::Errno;

/// Value of an unsignalled event-page slot.
pub const SLOT_UNSIGNALED: u64 = u64::MAX;

/// Event ids are small integers chosen by the driver: a multiplicative mix is hash enough (the
/// interrupt path looks an event up at every completion with a mailbox).
type IdHash = BuildHasherDefault<IdHasher>;

#[derive(Debug, Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = ((self.0 << 8) | u64::from(*b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.0 = u64::from(v).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

#[derive(Debug)]
struct Event {
    ty: u32,
    auto_reset: bool,
    signaled: bool,
    age: u64,
    memory: Option<MemoryExceptionData>,
    hw: Option<HwExceptionData>,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct EventPage {
    /// Device-view pointer to slot 0.
    pub(crate) ptr: *mut u8,
    /// Number of slots.
    pub(crate) slots: u32,
    /// BO handle (user page) or 0 (kernel-allocated).
    pub(crate) handle: u64,
}

// SAFETY: the page pointer targets pool memory that lives as long as the machine; slots are
// accessed atomically.
unsafe impl Send for EventPage {}

#[derive(Debug, Default)]
struct State {
    page: Option<EventPage>,
    events: HashMap<u32, Event, IdHash>,
    next_nonsignal: u32,
    /// Waiters currently blocked, per event id (for auto-reset consumption).
    waiters: HashMap<u32, u32, IdHash>,
    /// Incremented on every set; waiters re-check on change.
    generation: u64,
    /// Threads blocked in `WAIT_EVENTS` right now (a set wakes them only if there are any: the
    /// CP's interrupt path runs on every completion with a mailbox).
    sleeping: u32,
}

/// The events of one process.
#[derive(Debug, Default)]
pub struct Events {
    st: Mutex<State>,
    cv: Condvar,
}

/// Outcome of a wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WaitOutcome {
    pub(crate) result: u32,
}

impl Events {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes the blocked waiters, if any (the caller holds the lock and changed the state).
    fn wake(&self, st: &State) {
        if st.sleeping > 0 {
            self.cv.notify_all();
        }
    }

    /// Whether the event page has been set.
    pub(crate) fn has_page(&self) -> bool {
        self.lock().page.is_some()
    }

    /// The handle of the user-allocated event page BO (0 if kernel-allocated or none).
    pub(crate) fn page_handle(&self) -> Option<u64> {
        self.lock().page.map(|p| p.handle)
    }

    /// Installs the event page and fills it with all ones (`kfd_event_page_set`).
    pub(crate) fn set_page(&self, page: EventPage) -> Result<(), Errno> {
        let mut st = self.lock();
        if st.page.is_some() {
            return Err(Errno::EINVAL);
        }
        for i in 0..page.slots as usize {
            // SAFETY: the page covers `slots` u64 slots of live pool memory.
            unsafe { slot(page.ptr, i).store(SLOT_UNSIGNALED, Ordering::Relaxed) };
        }
        st.page = Some(page);
        Ok(())
    }

    /// `kfd_event_create`: returns `(event_id, slot_index)`.
    pub(crate) fn create(&self, ty: u32, auto_reset: bool) -> Result<(u32, u32), Errno> {
        let mut st = self.lock();
        let id = match ty {
            event_type::SIGNAL | event_type::DEBUG_EVENT => {
                let page = st.page.ok_or(Errno::EINVAL)?;
                // Slot 0 is reserved; ids are the lowest free slot.
                let id = (1..page.slots.min(limits::SIGNAL_EVENT_LIMIT))
                    .find(|i| !st.events.contains_key(i))
                    .ok_or(Errno::ENOSPC)?;
                // SAFETY: id < slots.
                unsafe { slot(page.ptr, id as usize).store(SLOT_UNSIGNALED, Ordering::Relaxed) };
                id
            }
            event_type::NODECHANGE
            | event_type::DEVICESTATECHANGE
            | event_type::HW_EXCEPTION
            | event_type::SYSTEM_EVENT
            | event_type::PROFILE_EVENT
            | event_type::QUEUE_EVENT
            | event_type::MEMORY => {
                let id = limits::FIRST_NONSIGNAL_EVENT_ID + st.next_nonsignal;
                st.next_nonsignal += 1;
                id
            }
            _ => return Err(Errno::EINVAL),
        };
        st.events.insert(id, Event { ty, auto_reset, signaled: false, age: 1, memory: None, hw: None });
        let slot_index = if id < limits::FIRST_NONSIGNAL_EVENT_ID { id } else { 0 };
        Ok((id, slot_index))
    }

    /// `kfd_event_destroy`: waiters wake and fail.
    pub(crate) fn destroy(&self, id: u32) -> Result<(), Errno> {
        let mut st = self.lock();
        st.events.remove(&id).ok_or(Errno::EINVAL)?;
        st.generation += 1;
        self.wake(&st);
        Ok(())
    }

    fn set_locked(st: &mut State, id: u32) -> bool {
        let waiting = st.waiters.get(&id).copied().unwrap_or(0) > 0;
        let Some(ev) = st.events.get_mut(&id) else { return false };
        ev.signaled = !ev.auto_reset || !waiting;
        ev.age = ev.age.wrapping_add(1).max(2);
        st.generation += 1;
        true
    }

    /// `SET_EVENT`: signal events only.
    pub(crate) fn set(&self, id: u32) -> Result<(), Errno> {
        let mut st = self.lock();
        match st.events.get(&id) {
            Some(ev) if ev.ty == event_type::SIGNAL || ev.ty == event_type::DEBUG_EVENT => {}
            _ => return Err(Errno::EINVAL),
        }
        Self::set_locked(&mut st, id);
        self.wake(&st);
        Ok(())
    }

    /// `RESET_EVENT`: signal events only.
    pub(crate) fn reset(&self, id: u32) -> Result<(), Errno> {
        let mut st = self.lock();
        match st.events.get_mut(&id) {
            Some(ev) if ev.ty == event_type::SIGNAL || ev.ty == event_type::DEBUG_EVENT => {
                ev.signaled = false;
                Ok(())
            }
            _ => Err(Errno::EINVAL),
        }
    }

    /// The interrupt path: the CP stored `id` into its mailbox slot. Acknowledges the slot and
    /// sets the event (an unknown id is dropped, as the interrupt handler drops it).
    pub(crate) fn interrupt(&self, id: u32) {
        let mut st = self.lock();
        if let Some(page) = st.page {
            if id < page.slots {
                // SAFETY: id < slots of the live page.
                unsafe { slot(page.ptr, id as usize).store(SLOT_UNSIGNALED, Ordering::Release) };
            }
        }
        if Self::set_locked(&mut st, id) {
            self.wake(&st);
        }
    }

    /// An interrupt whose context carries an event id with 28 valid bits (the SDMA trap):
    /// like `kfd_signal_event_interrupt`'s fast path, it is ignored unless the id's mailbox
    /// slot was posted; otherwise it is [`Events::interrupt`].
    pub(crate) fn interrupt_posted(&self, id: u32) {
        {
            let st = self.lock();
            if let Some(page) = st.page {
                // SAFETY: id < slots of the live page.
                if id < page.slots && unsafe { slot(page.ptr, id as usize) }.load(Ordering::Acquire) == SLOT_UNSIGNALED
                {
                    return;
                }
            }
        }
        self.interrupt(id);
    }

    /// Sets every MEMORY event with the fault data (`kfd_signal_vm_fault_event`).
    pub(crate) fn signal_memory_fault(&self, data: MemoryExceptionData) {
        let mut st = self.lock();
        let ids: Vec<u32> = st.events.iter().filter(|(_, e)| e.ty == event_type::MEMORY).map(|(i, _)| *i).collect();
        for id in ids {
            if let Some(e) = st.events.get_mut(&id) {
                e.memory = Some(data);
            }
            Self::set_locked(&mut st, id);
        }
        self.wake(&st);
    }

    /// Sets every HW_EXCEPTION event with the reset data, and every MEMORY event with a "GPU hang"
    /// error type (`kfd_signal_reset_event`).
    pub(crate) fn signal_reset(&self, data: HwExceptionData) {
        let mut st = self.lock();
        let ids: Vec<(u32, u32)> = st.events.iter().map(|(i, e)| (*i, e.ty)).collect();
        for (id, ty) in ids {
            match ty {
                event_type::HW_EXCEPTION => {
                    if let Some(e) = st.events.get_mut(&id) {
                        e.hw = Some(data);
                    }
                }
                event_type::MEMORY => {
                    if let Some(e) = st.events.get_mut(&id) {
                        e.memory =
                            Some(MemoryExceptionData { gpu_id: data.gpu_id, error_type: 3, ..Default::default() });
                    }
                }
                _ => continue,
            }
            Self::set_locked(&mut st, id);
        }
        self.wake(&st);
    }

    /// `kfd_wait_on_events` over the caller's array (already copied in; copied back by the
    /// caller). `timeout_ms`: 0 polls, `u32::MAX` is infinite.
    pub(crate) fn wait(&self, data: &mut [EventData], all: bool, timeout_ms: u32) -> Result<WaitOutcome, Errno> {
        let deadline = match timeout_ms {
            limits::TIMEOUT_INFINITE => None,
            ms => Some(Instant::now() + Duration::from_millis(u64::from(ms))),
        };
        let mut st = self.lock();
        // Initialise the waiters: take the signalled state (consuming auto-reset events).
        let mut activated = vec![false; data.len()];
        for (d, act) in data.iter().zip(activated.iter_mut()) {
            let Some(ev) = st.events.get_mut(&d.event_id) else {
                return Err(Errno::EINVAL);
            };
            *act = ev.signaled;
            ev.signaled = ev.signaled && !ev.auto_reset;
            let age = d.last_event_age();
            if ev.ty == event_type::SIGNAL && age != 0 && age != ev.age {
                *act = true;
            }
        }
        for d in data.iter() {
            *st.waiters.entry(d.event_id).or_insert(0) += 1;
        }
        let mut ages: Vec<u64> = data.iter().map(|d| st.events.get(&d.event_id).map_or(0, |e| e.age)).collect();
        let result = loop {
            // Activate waiters whose event was set since we looked.
            let mut failed = false;
            for (i, d) in data.iter().enumerate() {
                match st.events.get_mut(&d.event_id) {
                    None => failed = true,
                    Some(ev) => {
                        if ev.age != ages[i] {
                            ages[i] = ev.age;
                            activated[i] = true;
                        }
                    }
                }
            }
            if failed {
                break wait_result::FAIL;
            }
            let done = if all { activated.iter().all(|a| *a) } else { activated.iter().any(|a| *a) };
            if done {
                break wait_result::COMPLETE;
            }
            let now = Instant::now();
            match deadline {
                Some(d) if now >= d => break wait_result::TIMEOUT,
                Some(d) => {
                    st.sleeping += 1;
                    st = self.cv.wait_timeout(st, d - now).unwrap_or_else(|e| e.into_inner()).0;
                    st.sleeping -= 1;
                }
                None => {
                    st.sleeping += 1;
                    st = self.cv.wait(st).unwrap_or_else(|e| e.into_inner());
                    st.sleeping -= 1;
                }
            }
        };
        for d in data.iter() {
            if let Some(n) = st.waiters.get_mut(&d.event_id) {
                *n = n.saturating_sub(1);
            }
        }
        if result == wait_result::COMPLETE {
            for (d, act) in data.iter_mut().zip(&activated) {
                let Some(ev) = st.events.get(&d.event_id) else { continue };
                match ev.ty {
                    event_type::MEMORY if *act => {
                        if let Some(m) = ev.memory {
                            d.set_memory_exception(m);
                        }
                    }
                    event_type::HW_EXCEPTION if *act => {
                        if let Some(h) = ev.hw {
                            d.set_hw_exception(h);
                        }
                    }
                    event_type::SIGNAL if d.last_event_age() != 0 => d.payload[0] = ev.age,
                    _ => {}
                }
            }
        }
        Ok(WaitOutcome { result })
    }

    /// Whether an event is currently signalled (tests).
    pub(crate) fn is_signaled(&self, id: u32) -> Option<bool> {
        self.lock().events.get(&id).map(|e| e.signaled)
    }
}

/// The `i`th u64 slot of an event page.
///
/// # Safety
/// `base` must point at a live event page with more than `i` slots.
unsafe fn slot<'a>(base: *mut u8, i: usize) -> &'a AtomicU64 {
    // SAFETY: caller's contract; pool pages are 4096-aligned so every slot is 8-aligned.
    unsafe { AtomicU64::from_ptr(base.add(i * 8).cast()) }
}
