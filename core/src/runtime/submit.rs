//! Publishing: one operation becomes a batch of AQL packets in its stream's ring.

use core::sync::atomic::Ordering as CoreOrdering;
use portable_atomic::Ordering;

use super::{dep_chunks, push_dep, Batch, Command, Deps, KernelLaunch, Runtime, Spec, State, PENDING};
use crate::aql::{
    BarrierPacket, BarrierValuePacket, FenceScope, Header, KernelDispatchPacket, PacketType, DEFAULT_ROOM_SPINS,
    DISPATCH_HEADER,
};
use crate::backend::{Backend, HostFn};
use crate::capture::CaptureStatus;
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
    // ----- publishing ----------------------------------------------------------------------

    /// Publishes `specs` on stream slot `i` as one batch and rings its doorbell once.
    pub(super) fn publish(
        &self,
        st: &mut State<B::Queue, S, E, T, M, G, N, X>,
        i: usize,
        specs: &[Spec<'_>],
    ) -> Result<()> {
        let slot = st.streams.get_mut(i).ok_or(Error::InvalidHandle)?;
        let hw = slot.hw.as_mut().ok_or(Error::InvalidHandle)?;
        let desc = hw.desc;
        let progress = hw.signal.0;
        let n = u32::try_from(specs.len()).map_err(|_| Error::InvalidValue)?;
        // SAFETY: a stream's ring has one producer, this runtime, which publishes into it only
        // while holding the state lock (held here through `st`).
        let mut res = unsafe { desc.ring.reserve_single_producer(n, DEFAULT_ROOM_SPINS, &mut hw.read_hint) }?;
        let mut counted = 0u64;
        for spec in specs {
            let index = res.next_index();
            match *spec {
                Spec::Deps(deps) => {
                    res.write(&BarrierPacket::and(deps, progress));
                    counted += 1;
                }
                Spec::Mark(signal) => {
                    res.write(&BarrierPacket::and([0; 5], signal.0));
                }
                Spec::Dispatch(mut p, args) => {
                    let off = (index & (desc.ring.size() - 1)) * u64::from(desc.kernarg_slot_bytes);
                    // SAFETY: the kernarg slot of a reserved ring slot belongs to this producer
                    // until the packet retires (QueueDesc contract); `args` fits (checked by
                    // the caller against kernarg_slot_bytes).
                    unsafe {
                        let dst = desc.kernarg_host.as_ptr().add(off as usize);
                        core::ptr::copy_nonoverlapping(args.as_ptr(), dst, args.len());
                    }
                    p.kernarg_address = desc.kernarg_device + off;
                    p.completion_signal = progress;
                    res.write(&p);
                    counted += 1;
                }
                Spec::Value(mut p) => {
                    p.completion_signal = progress;
                    res.write(&p);
                    counted += 1;
                }
            }
        }
        let last = res.finish();
        slot.submitted += counted;
        // Ordering: a Release fence orders the headers before the doorbell store (kfd-aql.md §2);
        // a backend whose doorbell or ring sits in write-combined memory adds its own store fence.
        core::sync::atomic::fence(CoreOrdering::Release);
        self.backend.ring_doorbell(&hw.queue, last);
        Ok(())
    }

    /// Takes a marker signal (value 1) that stream `consumer` will read in the barrier it
    /// publishes next; it comes free once that barrier has completed.
    /// Checks the queue behind slot `i` for a fault (sticky: the stream keeps failing).
    pub(super) fn check_fault(&self, st: &State<B::Queue, S, E, T, M, G, N, X>, i: usize) -> Result<()> {
        match st.streams.get(i).and_then(|s| s.hw.as_ref()) {
            Some(hw) => match self.backend.queue_fault(&hw.queue) {
                Some(e) => Err(e),
                None => Ok(()),
            },
            None => Err(Error::InvalidHandle),
        }
    }

    /// Enqueues one operation on stream `s` with its implicit and explicit dependencies.
    pub(super) fn submit(&self, s: StreamHandle, cmd: Command<'_>) -> Result<()> {
        let mut st = self.state.lock();
        let i = self.resolve_for_work(&mut st, s)?;
        if matches!(cmd, Command::HostFn(HostFn::StreamCallback { .. })) {
            self.check_callback_target(&mut st, s, i)?;
        }
        match Self::capture_status_of(&st, i) {
            CaptureStatus::Active if Self::capture_of(&st, i).is_some() => {
                return self.capture_command(&mut st, i, &cmd);
            }
            CaptureStatus::Invalidated if Self::capture_of(&st, i).is_some() => {
                return Err(Error::StreamCaptureInvalidated);
            }
            _ => {}
        }
        self.check_fault(&st, i)?;
        let result = self.submit_locked(&mut st, i, &cmd);
        self.release_taken_markers(&mut st, i);
        result
    }

    /// Resolves the stream of an async work API (`STREAM_CAPTURE` in clr): an invalid handle is
    /// `InvalidValue` while any capture exists, a detached stream `StreamDetached`.
    pub(super) fn resolve_for_work(
        &self,
        st: &mut State<B::Queue, S, E, T, M, G, N, X>,
        s: StreamHandle,
    ) -> Result<usize> {
        let i = match self.resolve(st, s, Error::ContextIsDestroyed) {
            Ok(i) => i,
            Err(e @ (Error::ContextIsDestroyed | Error::InvalidHandle)) => {
                return Err(if Self::any_capture(st) { Error::InvalidValue } else { e });
            }
            Err(e) => return Err(e),
        };
        if st.streams.get(i).is_some_and(|sl| sl.detached) {
            return Err(Error::StreamDetached);
        }
        Ok(i)
    }

    /// The checks an async work API makes on its stream when there is nothing to enqueue
    /// (a zero-byte copy): the stream must resolve and must not be detached.
    pub(super) fn check_work_stream(&self, s: StreamHandle) -> Result<()> {
        let mut st = self.state.lock();
        let i = self.resolve_for_work(&mut st, s)?;
        match Self::capture_status_of(&st, i) {
            CaptureStatus::Invalidated if Self::capture_of(&st, i).is_some() => Err(Error::StreamCaptureInvalidated),
            _ => Ok(()),
        }
    }

    /// Markers taken for the operation just submitted on slot `i` are released after its last
    /// counted packet (or at once if nothing was published); `take_marker` left them pending.
    pub(super) fn release_taken_markers(&self, st: &mut State<B::Queue, S, E, T, M, G, N, X>, i: usize) {
        if st.markers_taken > 0 {
            st.markers_taken = 0;
            let submitted = st.streams.get(i).map_or(0, |sl| sl.submitted);
            for m in st.markers.iter_mut().filter(|m| m.busy && m.consumer == i && m.release_at == PENDING) {
                m.release_at = submitted;
            }
        }
    }

    pub(super) fn submit_locked(
        &self,
        st: &mut State<B::Queue, S, E, T, M, G, N, X>,
        i: usize,
        cmd: &Command<'_>,
    ) -> Result<()> {
        let device = st.streams.get(i).map_or(0, |sl| sl.device);
        let mut deps = Deps::new();
        self.implicit_deps(st, i, &mut deps)?;
        // The common case, a dispatch with nothing to wait for, skips the batch.
        if deps.is_empty() {
            match cmd {
                Command::Kernel(k) => {
                    let spec = self.dispatch_spec(st, i, *k)?;
                    return self.publish(st, i, core::slice::from_ref(&spec));
                }
                Command::Builtin { kernel, args, len } => {
                    let spec = Spec::Dispatch(
                        Self::dispatch_packet(
                            self.backend.builtin_kernel(device, *kernel)?,
                            [1, 1, 1],
                            [1, 1, 1],
                            0,
                            0,
                        ),
                        args.get(..*len).ok_or(Error::InvalidValue)?,
                    );
                    return self.publish(st, i, core::slice::from_ref(&spec));
                }
                _ => {}
            }
        }
        let mut host: Option<(SignalHandle, SignalHandle, HostFn)> = None;
        match *cmd {
            Command::WaitEvent(sig) => push_dep(&mut deps, sig.0)?,
            Command::HostFn(f) => {
                let start = self.take_marker(st, i)?;
                let done = match self.take_marker(st, i) {
                    Ok(d) => d,
                    Err(e) => {
                        // Never published: nothing will complete it, so complete it here.
                        // SAFETY: pool markers stay allocated for the runtime's life.
                        unsafe { start.get() }.reset(0);
                        return Err(e);
                    }
                };
                host = Some((start, done, f));
            }
            _ => {}
        }
        let mut batch = Batch::new();
        for chunk in dep_chunks(&deps) {
            batch.push(Spec::Deps(chunk))?;
        }
        match cmd {
            Command::Kernel(k) => batch.push(self.dispatch_spec(st, i, *k)?)?,
            Command::Builtin { kernel, args, len } => {
                let object = self.backend.builtin_kernel(device, *kernel)?;
                let packet = Self::dispatch_packet(object, [1, 1, 1], [1, 1, 1], 0, 0);
                batch.push(Spec::Dispatch(packet, args.get(..*len).ok_or(Error::InvalidValue)?))?;
            }
            Command::WaitValue { address, value, mask, cond } => {
                batch.push(Spec::Value(BarrierValuePacket {
                    header: Header::new(PacketType::VendorSpecific, true, FenceScope::System, FenceScope::System).0,
                    amd_format: crate::aql::amd_format::BARRIER_VALUE,
                    // The packet reads the value at signal + 8, where a signal keeps its value.
                    signal: address.wrapping_sub(8),
                    value: *value,
                    mask: *mask,
                    cond: *cond as u32,
                    ..Default::default()
                }))?;
            }
            Command::HostFn(_) => {
                if let Some((start, done, _)) = host {
                    batch.push(Spec::Mark(start))?;
                    batch.push(Spec::Deps([done.0, 0, 0, 0, 0]))?;
                }
            }
            Command::EventRecord(e) => {
                let sig = st.events.get(*e).map(|ev| ev.signal).ok_or(Error::InvalidHandle)?;
                batch.push(Spec::Mark(sig))?;
                batch.push(Spec::Deps([0; 5]))?;
                // SAFETY: a live event's signal is a live backend signal.
                unsafe { sig.get() }.value.fetch_add(1, Ordering::AcqRel);
            }
            Command::WaitEvent(_) => {}
            Command::Marker => batch.push(Spec::Deps([0; 5]))?,
        }
        if batch.is_empty() {
            // Nothing to wait for and nothing to run.
            return Ok(());
        }
        if let Err(e) = self.publish(st, i, batch.as_slice()) {
            if let Some((start, done, _)) = host {
                // SAFETY: pool markers stay allocated for the runtime's life.
                unsafe {
                    start.get().reset(0);
                    done.get().reset(0);
                }
            }
            if let Command::EventRecord(ev) = cmd {
                if let Some(sig) = st.events.get(*ev).map(|ev| ev.signal) {
                    // SAFETY: as above.
                    unsafe { sig.get() }.value.fetch_sub(1, Ordering::AcqRel);
                }
            }
            return Err(e);
        }
        if let Some((start, done, f)) = host {
            if let Err(e) = self.backend.host_call(start, done, f) {
                // The barrier after the call waits on `done`, which nobody will complete now:
                // complete it so the stream's later work is not stuck behind a call that never
                // runs.
                // SAFETY: pool markers stay allocated for the runtime's life.
                unsafe { done.get() }.reset(0);
                return Err(e);
            }
        }
        Ok(())
    }

    pub(super) fn dispatch_packet(
        object: u64,
        grid: [u32; 3],
        wg: [u16; 3],
        group: u32,
        private: u32,
    ) -> KernelDispatchPacket {
        KernelDispatchPacket {
            header: DISPATCH_HEADER.0,
            setup: 3,
            workgroup_size_x: wg[0],
            workgroup_size_y: wg[1],
            workgroup_size_z: wg[2],
            reserved0: 0,
            grid_size_x: grid[0],
            grid_size_y: grid[1],
            grid_size_z: grid[2],
            private_segment_size: private,
            group_segment_size: group,
            kernel_object: object,
            kernarg_address: 0,
            reserved2: 0,
            completion_signal: 0,
        }
    }

    pub(super) fn dispatch_spec<'a>(
        &self,
        st: &State<B::Queue, S, E, T, M, G, N, X>,
        i: usize,
        k: KernelLaunch<'a>,
    ) -> Result<Spec<'a>> {
        // u64: three u16 sizes overflow u32 (and a wrapped product could pass the 1024 check).
        let wg_items: u64 = k.workgroup.iter().map(|&w| u64::from(w)).product();
        if k.workgroup.contains(&0) || k.grid.contains(&0) || wg_items > 1024 {
            return Err(Error::InvalidConfiguration);
        }
        if k.kernel_object == 0 {
            return Err(Error::InvalidValue);
        }
        let slot_bytes = st.streams.get(i).and_then(|s| s.hw.as_ref()).map_or(0, |hw| hw.desc.kernarg_slot_bytes);
        if k.kernarg.len() > slot_bytes as usize {
            return Err(Error::InvalidValue);
        }
        Ok(Spec::Dispatch(
            Self::dispatch_packet(k.kernel_object, k.grid, k.workgroup, k.group_segment_size, k.private_segment_size),
            k.kernarg,
        ))
    }
}
