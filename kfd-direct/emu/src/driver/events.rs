//! Events (docs/kfd-aql.md §1.6): the event page (user-allocated or the kernel's), creation and
//! `WAIT_EVENTS`; the event model itself is `crate::events`.

use crate::abi::{self, limits, mmap_offset, CreateEventArgs, EventData, WaitEventsArgs};
use crate::events::EventPage;
use crate::{Errno, SysResult};

use super::{args, copy_in, copy_out, put, Emu, Process};

impl Emu {
    pub(super) fn create_event(&self, proc: &Process, a: &mut CreateEventArgs) -> SysResult<()> {
        let st = proc.lock();
        if a.event_page_offset != 0 {
            if proc.events.has_page() {
                return Err(Errno::EINVAL);
            }
            let gpu = (a.event_page_offset >> 32) as u32;
            self.node_index(gpu).ok_or(Errno::EINVAL)?;
            let vm = proc.vm.read();
            let bo = vm.bos.get(&a.event_page_offset).ok_or(Errno::EINVAL)?;
            let ptr = bo.backing.base(&self.m.pool);
            let slots = (bo.size / 8).min(u64::from(limits::SIGNAL_EVENT_LIMIT)) as u32;
            proc.events.set_page(EventPage { ptr, slots, handle: a.event_page_offset })?;
        }
        drop(st);
        let signal = matches!(a.event_type, abi::event_type::SIGNAL | abi::event_type::DEBUG_EVENT);
        if signal && !proc.events.has_page() {
            // The APU path: the kernel allocates the page, to be mmapped from the kfd fd.
            let mut st = proc.lock();
            let off = self.m.pool.alloc(limits::EVENT_PAGE_BYTES).ok_or(Errno::ENOMEM)?;
            st.kernel_event_page = Some(off);
            proc.events.set_page(EventPage {
                ptr: self.m.pool.ptr(off),
                slots: limits::SIGNAL_EVENT_LIMIT,
                handle: 0,
            })?;
        }
        let (id, slot) = proc.events.create(a.event_type, a.auto_reset != 0)?;
        a.event_id = id;
        if signal {
            a.event_trigger_data = id;
            a.event_slot_index = slot;
            a.event_page_offset = mmap_offset::TYPE_EVENTS;
        }
        Ok(())
    }

    pub(super) fn wait_events(&self, proc: &Process, a: &mut WaitEventsArgs) -> SysResult<()> {
        if a.num_events > limits::MAX_WAIT_EVENTS {
            return Err(Errno::EINVAL);
        }
        let n = a.num_events as usize;
        let raw = copy_in(a.events_ptr, n * size_of::<EventData>())?;
        // A process that blocks for the device has likely just rung a doorbell: wake napping
        // packet processors rather than letting the doorbell wait for the end of a nap.
        if a.timeout != 0 {
            for e in &self.m.engines {
                e.kick();
            }
        }
        let mut data: Vec<EventData> = raw.chunks_exact(size_of::<EventData>()).map(args::<EventData>).collect();
        let out = proc.events.wait(&mut data, a.wait_for_all != 0, a.timeout)?;
        a.wait_result = out.result;
        let mut bytes = vec![0u8; n * size_of::<EventData>()];
        for (d, chunk) in data.iter().zip(bytes.chunks_exact_mut(size_of::<EventData>())) {
            put(chunk, d);
        }
        copy_out(a.events_ptr, &bytes)
    }
}
