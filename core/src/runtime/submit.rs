//! Publishing: one operation becomes a batch of AQL packets in its stream's pooled queue.
//!
//! The fast path takes the stream's lock only: the handle is checked through atomics, the null
//! stream's progress point is read through atomics, and while no capture is alive
//! (`captures_live == 0`) nothing else is looked at. With a capture alive the operation goes
//! through the structural lock, where the capture rules live.
//!
//! This is the one file of `runtime/` with `unsafe`: it writes kernel arguments into the
//! kernel-argument slot of the ring slot it reserved.

use core::sync::atomic::{fence, Ordering as CoreOrdering};
use portable_atomic::Ordering;

use super::{doorbell_fence, Runtime};
use crate::aql::{
    amd_format, AqlRing, BarrierPacket, BarrierValuePacket, Condition, FenceScope, Header, KernelDispatchPacket,
    Packet, PacketType, PacketWords, Reservation, DEFAULT_ROOM_SPINS, DISPATCH_HEADER,
};
use crate::backend::{Backend, HostFn};
#[cfg(feature = "capture")]
use crate::capture::CaptureStatus;
use crate::config::Config;
#[cfg(feature = "capture")]
use crate::config::Table;
use crate::error::{Error, Result};
use crate::live::LiveSignal;
use crate::pool::QueueHw;
use crate::signal::SignalHandle;
use crate::slots::stream::{StreamInner, StreamSlot};
use crate::stream::StreamHandle;
use crate::thread::ThreadKeys;

/// Most packets one publish holds (implicit dependencies beyond it go out in earlier batches).
pub(super) const MAX_BATCH: usize = 8;
/// Packets an operation itself needs at most (after its dependencies).
const MAX_OP_PACKETS: usize = 3;
/// A full ring is waited for this many times (each a bounded spin and a bounded wait on the
/// stream's own work) before an enqueue answers `NotReady`, as HIP waits for room.
const ROOM_ATTEMPTS: u32 = 64;
/// The bound of one wait for room.
const ROOM_WAIT: crate::backend::Timeout = crate::backend::Timeout(10_000_000);

/// One stream operation, before it becomes packets.
#[derive(Clone, Copy)]
pub(super) enum Command<'a> {
    /// A launch, borrowed (not copied onto the submit path's stack).
    Kernel(&'a crate::runtime::KernelLaunch<'a>),
    /// A built-in kernel: `kernel` answers its kernel object on a device (a closure of the API
    /// naming one constant [`BuiltinKernel`](crate::backend::BuiltinKernel), so an image links
    /// only the built-ins it enqueues: docs/architecture.md, "Footprint"), with its arguments.
    Builtin {
        kernel: &'a BuiltinObject<'a>,
        args: [u8; 32],
        len: usize,
    },
    WaitValue {
        address: u64,
        value: i64,
        mask: i64,
        cond: Condition,
    },
    /// A host function (kept for capture, which records it as a node), with the step that
    /// publishes it after the implicit dependencies ([`submit_host_fn`](Runtime::submit_host_fn)
    /// on the stream of the index given): named by `launch_host_func` alone, so an image that
    /// never enqueues a host function does not link that step (docs/architecture.md,
    /// "Footprint").
    HostFn {
        #[cfg(feature = "capture")]
        f: HostFn,
        step: &'a HostStep<'a>,
    },
    EventRecord(LiveSignal),
    WaitEvent(SignalHandle),
    /// Wait for another stream's progress point (signal, count).
    WaitPoint(SignalHandle, u64),
    Marker,
}

/// The host-function step of a [`Command::HostFn`]: stream slot index, its lock's contents and
/// the batch of implicit dependencies.
pub(super) type HostStep<'a> = dyn Fn(usize, &mut StreamInner, &mut Batch<'_>) -> Result<()> + 'a;

/// The kernel object of a [`Command::Builtin`] on a device.
pub(super) type BuiltinObject<'a> = dyn Fn(u32) -> Result<u64> + 'a;

/// Which packet to publish.
#[derive(Clone, Copy)]
pub(super) enum Spec<'a> {
    /// A counted barrier-value packet: waits until `signal < below` (another stream's progress
    /// point).
    Wait(SignalHandle, i64),
    /// A counted barrier-AND on these dependencies.
    Deps([u64; 5]),
    /// A barrier-AND completing `signal` (not counted).
    Mark(SignalHandle),
    /// A counted kernel dispatch with its kernel arguments.
    Dispatch(Dispatch<'a>),
    /// A counted barrier-value packet of the operation (`hipStreamWaitValue*`): waits until
    /// `(*(signal + 8) & mask) cond value`.
    Value { signal: u64, value: i64, mask: i64, cond: Condition },
}

/// A kernel dispatch as [`publish`](Runtime::publish) takes it: the packet's fields that vary,
/// and the kernel arguments. Smaller than the 64-byte, 64-byte aligned packet it becomes, so a
/// [`Batch`] is small and moves cheaply (`docs/architecture.md`, "Footprint").
#[derive(Clone, Copy)]
pub(super) struct Dispatch<'a> {
    /// Kernel object.
    pub(super) object: u64,
    /// Grid size in work-items.
    pub(super) grid: [u32; 3],
    /// Work-group size.
    pub(super) wg: [u16; 3],
    /// Group (LDS) bytes per work-group.
    pub(super) group: u32,
    /// Private bytes per work-item.
    pub(super) private: u32,
    /// Kernel arguments.
    pub(super) args: &'a [u8],
}

impl<'a> Dispatch<'a> {
    /// A one-work-item dispatch of `object` (the built-in kernels).
    pub(super) fn single(object: u64, args: &'a [u8]) -> Self {
        Dispatch { object, grid: [1, 1, 1], wg: [1, 1, 1], group: 0, private: 0, args }
    }

    /// The launch's dispatch.
    fn launch(k: &crate::runtime::KernelLaunch<'a>) -> Self {
        Dispatch {
            object: k.kernel_object,
            grid: k.grid,
            wg: k.workgroup,
            group: k.group_segment_size,
            private: k.private_segment_size,
            args: k.kernarg,
        }
    }
}

/// The packets of one publish, in order (not initialised ahead: the common batch is one
/// packet).
pub(super) struct Batch<'a>(heapless::Vec<Spec<'a>, MAX_BATCH>);

impl<'a> Batch<'a> {
    #[inline]
    pub(super) fn new() -> Self {
        Batch(heapless::Vec::new())
    }

    #[inline]
    pub(super) fn push(&mut self, spec: Spec<'a>) -> Result<()> {
        self.0.push(spec).map_err(|_| Error::OutOfMemory)
    }

    #[inline]
    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    #[inline]
    pub(super) fn as_slice(&self) -> &[Spec<'a>] {
        &self.0
    }

    #[inline]
    pub(super) fn clear(&mut self) {
        self.0.clear();
    }
}

/// `header` with its barrier bit set to `barrier`.
#[inline]
fn with_barrier(header: u16, barrier: bool) -> u16 {
    (header & !(1 << 8)) | (u16::from(barrier) << 8)
}

/// A header with system-scope fences (every packet core builds for graphs).
#[cfg(feature = "capture")]
pub(super) fn header(ty: PacketType, barrier: bool) -> u16 {
    Header::new(ty, barrier, FenceScope::System, FenceScope::System).0
}

/// A packet's words.
#[cfg(feature = "capture")]
pub(super) fn raw<P: crate::aql::Packet>(p: &P) -> crate::aql::RawPacket {
    crate::aql::RawPacket(*p.words())
}

/// The words of a counted-or-not barrier-AND packet on `deps` completing `completion`, with the
/// barrier bit (what [`publish`](Runtime::publish) writes for a `Deps`, a `Mark` and a no-op).
/// One build of the packet for the three kinds instead of one each, out of line on small
/// images (`docs/architecture.md`, "Footprint"); inlined on hosts.
#[cfg_attr(target_has_atomic = "64", inline)]
#[cfg_attr(not(target_has_atomic = "64"), inline(never))]
fn and_words(deps: [u64; 5], completion: u64) -> PacketWords {
    let mut w = BarrierPacket::and(deps, completion);
    w.header = with_barrier(w.header, true);
    *w.words()
}

/// The words of a barrier-value packet with the barrier bit: waits until
/// `(*(signal + 8) & mask) cond value`, completes `completion` (a `Wait` is `mask = -1`,
/// `cond = Lt`). One out-of-line copy on small images for both kinds; inlined on hosts.
#[cfg_attr(target_has_atomic = "64", inline)]
#[cfg_attr(not(target_has_atomic = "64"), inline(never))]
fn value_words(signal: u64, value: i64, mask: i64, cond: Condition, completion: u64) -> PacketWords {
    let mut v = BarrierValuePacket {
        header: Header::new(PacketType::VendorSpecific, false, FenceScope::System, FenceScope::System).0,
        amd_format: amd_format::BARRIER_VALUE,
        signal,
        value,
        mask,
        cond: cond as u32,
        completion_signal: completion,
        ..Default::default()
    };
    v.header = with_barrier(v.header, true);
    *v.words()
}

/// A kernel dispatch packet (barrier bit set; publishing decides).
#[inline]
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

/// The words of dispatch packet `d` in ring slot `index` of `hw`: `args` copied into the slot's
/// kernel-argument slot and `d` completed with their address, `signal` and the barrier bit. The
/// one finish of a dispatch packet, for [`Runtime::publish`] and the fast path's
/// [`Runtime::launch_fast`].
///
/// # Safety
/// `index` is reserved by the caller, and the kernel-argument slots from `index`'s on, as many as
/// the arguments span, are the caller's until the packet retires (QueueDesc contract).
#[inline(always)]
unsafe fn dispatch_words<Q>(
    hw: &QueueHw<Q>,
    index: u64,
    d: &mut KernelDispatchPacket,
    args: &[u8],
    signal: u64,
) -> PacketWords {
    let desc = &hw.desc;
    let off = (index & (desc.ring.size() - 1)) * u64::from(desc.kernarg_slot_bytes);
    // SAFETY: the caller's contract; the area runs `kernarg_overhang_slots` past the ring's last
    // slot, so arguments spanning several slots stay inside it.
    unsafe { copy_args(args, desc.kernarg_host.as_ptr().add(off as usize)) };
    d.kernarg_address = desc.kernarg_device + off;
    d.completion_signal = signal;
    d.header = with_barrier(d.header, true);
    *d.words()
}

impl<B: Backend, K: ThreadKeys, C: Config> Runtime<B, K, C> {
    // ----- publishing ----------------------------------------------------------------------

    /// Publishes `specs` on stream `slot` (its lock held as `inner`) as one reservation and rings
    /// the doorbell once.
    ///
    /// Every packet carries the barrier bit, so a queue runs its packets in order and a
    /// stream's counted packets complete in order on any queue. On a queue only this stream
    /// uses, the ring is reserved single-producer and the doorbell rung plainly; on a shared
    /// queue, with the multi-producer reservation and the monotonic doorbell protocol of
    /// [`ring`](Self::ring) (`docs/queue-pool.md`, "Serialization rules").
    ///
    /// Inlined on hosts, where the fast path's one-dispatch list is then a constant the compiler
    /// folds (no loop, no match: docs/architecture.md, "The submit path, instruction by
    /// instruction"); one out-of-line copy on small images.
    #[cfg_attr(target_has_atomic = "64", inline(always))]
    pub(super) fn publish(
        &self,
        slot: &StreamSlot<K::RawMutex>,
        inner: &mut StreamInner,
        specs: &[Spec<'_>],
    ) -> Result<()> {
        if specs.is_empty() {
            return Ok(());
        }
        let b = inner.binding.as_ref().ok_or(Error::InvalidHandle)?;
        let hw = self.queue_of(b)?;
        // Refused input publishes nothing: check kernel arguments before reserving. Arguments
        // larger than a slot take the slots of no-op barriers after their dispatch.
        let slot_bytes = hw.desc.kernarg_slot_bytes as usize;
        let mut extra = 0usize;
        for s in specs {
            if let Spec::Dispatch(Dispatch { args, .. }) = s {
                if args.len() > slot_bytes {
                    let k = args.len().div_ceil(slot_bytes.max(1)) - 1;
                    if k > hw.desc.kernarg_overhang_slots as usize {
                        return Err(Error::InvalidValue);
                    }
                    extra += k;
                }
            }
        }
        let progress = slot.progress.get().ok_or(Error::InvalidHandle)?;
        // Ordering: Acquire pairs with the Release store of the binder, made under this
        // stream's lock (held here).
        let shared = hw.shared.load(Ordering::Acquire);
        // Ordering: Relaxed; this lock holder is the only writer.
        let before = slot.submitted.load(Ordering::Relaxed);
        let n = u32::try_from(specs.len() + extra).map_err(|_| Error::InvalidValue)?;
        let ring = &hw.desc.ring;
        let mut attempt = 0;
        let mut res = loop {
            // SAFETY: `shared` was loaded under this stream's lock, held throughout.
            let r = unsafe { reserve(ring, shared, n, &mut inner.read_hint) };
            match r {
                Err(Error::NotReady) if attempt < ROOM_ATTEMPTS => {
                    attempt += 1;
                    self.wait_for_room(progress, before);
                }
                r => break r?,
            }
        };
        let p = progress.handle().0;
        let mut counted = 0u64;
        for spec in specs {
            let index = res.next_index();
            // Each spec becomes one packet's words (and, for a dispatch with long arguments, the
            // no-op barriers after it), written by the one `write` below.
            let (words, counts, nops) = match *spec {
                Spec::Wait(signal, below) => (value_words(signal.0, below, -1, Condition::Lt, p), true, 0),
                Spec::Deps(deps) => (and_words(deps, p), true, 0),
                Spec::Mark(signal) => (and_words([0; 5], signal.0), false, 0),
                Spec::Dispatch(k) => {
                    let mut d = dispatch_packet(k.object, k.grid, k.wg, k.group, k.private);
                    // SAFETY: the kernarg slots of reserved ring slots belong to this producer
                    // until their packets retire (QueueDesc contract); the dispatch's arguments
                    // span its slot and those of the `slots - 1` no-op barriers reserved after it
                    // (checked against the overhang above), contiguous in the area, which runs
                    // `kernarg_overhang_slots` past the ring's last slot. Retirement is in order,
                    // so those slots stay this dispatch's until it has completed.
                    let words = unsafe { dispatch_words(hw, index, &mut d, k.args, p) };
                    // No division on the common path: arguments within one slot take one.
                    let args = k.args.len();
                    let slots = if args <= slot_bytes { 1 } else { args.div_ceil(slot_bytes.max(1)) };
                    (words, true, slots - 1)
                }
                Spec::Value { signal, value, mask, cond } => (value_words(signal, value, mask, cond, p), true, 0),
            };
            res.write_words(&words);
            counted += u64::from(counts);
            for _ in 0..nops {
                res.write_words(&and_words([0; 5], 0));
            }
        }
        let last = res.finish();
        // Ordering: Release: whoever reads the new count (another stream's implicit
        // synchronisation, a synchronize) sees the packets it counts in the ring.
        slot.submitted.store(before + counted, Ordering::Release);
        doorbell_fence();
        self.ring(hw, shared, last);
        Ok(())
    }

    /// Publishes prepared packets (a graph launch's body) and then a counted barrier with the
    /// barrier bit, in reservations of at most a ring each with one doorbell per reservation.
    /// The body's first packet carries the barrier bit (the plan's rule), which orders it after
    /// the stream's earlier work on any queue.
    #[cfg(feature = "capture")]
    pub(super) fn publish_raw(
        &self,
        slot: &StreamSlot<K::RawMutex>,
        inner: &mut StreamInner,
        body: &[crate::aql::RawPacket],
    ) -> Result<()> {
        let b = inner.binding.as_ref().ok_or(Error::InvalidHandle)?;
        let hw = self.queue_of(b)?;
        let progress = slot.progress.get().ok_or(Error::InvalidHandle)?;
        // Ordering: Acquire, as in `publish`.
        let shared = hw.shared.load(Ordering::Acquire);
        // Ordering: Relaxed; this lock holder is the only writer.
        let before = slot.submitted.load(Ordering::Relaxed);
        let ring = &hw.desc.ring;
        let mut close = BarrierPacket::and([0; 5], progress.handle().0);
        close.header = with_barrier(close.header, true);
        let mut left_body = body;
        let mut close_left = true;
        while close_left {
            let n = (left_body.len() as u64 + 1).min(ring.size());
            let n = u32::try_from(n).map_err(|_| Error::InvalidValue)?;
            // Once part of the launch is out, the rest must follow: wait for room as long as it
            // takes (the packets ahead depend on nothing after them).
            let first = left_body.len() == body.len();
            let mut attempt = 0;
            let mut res = loop {
                // SAFETY: as in `publish`: `shared` loaded under this stream's lock, held.
                let r = unsafe { reserve(ring, shared, n, &mut inner.read_hint) };
                match r {
                    Err(Error::NotReady) if !first || attempt < ROOM_ATTEMPTS => {
                        attempt += 1;
                        self.wait_for_room(progress, before);
                    }
                    r => break r?,
                }
            };
            while res.remaining() > 0 {
                if !left_body.is_empty() {
                    let k = res.write_batch(left_body);
                    left_body = left_body.get(k..).unwrap_or(&[]);
                } else if close_left {
                    res.write(&close);
                    close_left = false;
                } else {
                    break;
                }
            }
            let last = res.finish();
            if !close_left {
                // Ordering: Release, as in `publish`.
                slot.submitted.store(before + 1, Ordering::Release);
            }
            doorbell_fence();
            self.ring(hw, shared, last);
        }
        Ok(())
    }

    /// Lets the device drain a full ring: waits (boundedly) for the stream's own earlier work,
    /// which also gives a backend without its own thread (the loopback) the chance to run.
    fn wait_for_room(&self, progress: LiveSignal, before: u64) {
        let _ = self.backend.signal_wait(progress.handle(), Condition::Lt, 1 - before as i64, ROOM_WAIT);
    }

    /// Rings `hw`'s doorbell with `last`. On a shared queue several producers ring; the
    /// doorbell must not go backwards (a packet processor may stop at the last value it read),
    /// so each producer raises `rung` and rings until the value it rang is the highest asked
    /// for.
    ///
    /// Inlined on hosts with the shared queue's loop out of line.
    #[cfg_attr(target_has_atomic = "64", inline(always))]
    pub(super) fn ring(&self, hw: &QueueHw<B::Queue>, shared: bool, last: u64) {
        if !shared {
            self.backend.ring_doorbell(&hw.queue, last);
            return;
        }
        self.ring_shared(hw, last);
    }

    /// [`ring`](Self::ring) on a shared queue.
    #[cfg_attr(target_has_atomic = "64", inline(never))]
    #[cfg_attr(not(target_has_atomic = "64"), inline(always))]
    fn ring_shared(&self, hw: &QueueHw<B::Queue>, last: u64) {
        // Ordering: AcqRel; the highest value wins.
        hw.rung.fetch_max(last.wrapping_add(1), Ordering::AcqRel);
        loop {
            // Ordering: Acquire pairs with the other producers' fetch_max.
            let t = hw.rung.load(Ordering::Acquire);
            self.backend.ring_doorbell(&hw.queue, t.wrapping_sub(1));
            // Ordering: SeqCst between the doorbell store and the re-read: a producer that
            // stored an older value after ours sees the newer `rung` and rings again.
            fence(CoreOrdering::SeqCst);
            if hw.rung.load(Ordering::Acquire) == t {
                break;
            }
        }
    }

    /// Checks the queue behind a stream for a fault (sticky: the stream keeps failing).
    #[inline]
    pub(super) fn check_fault(&self, inner: &StreamInner) -> Result<()> {
        let b = inner.binding.as_ref().ok_or(Error::InvalidHandle)?;
        match self.backend.queue_fault(&self.queue_of(b)?.queue) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    // ----- submission ------------------------------------------------------------------------

    /// Enqueues one operation on stream `s` with its implicit and explicit dependencies.
    ///
    /// On hosts the fast path ([`fast_lock`](Self::fast_lock)) runs first; whatever it does
    /// not take goes the checked path, which resolves the handle as every stream API does and
    /// names the error. Small images have the checked path only.
    #[inline]
    pub(super) fn submit(&self, s: StreamHandle, cmd: Command<'_>) -> Result<()> {
        #[cfg(target_has_atomic = "64")]
        if let Some((i, slot, mut inner)) = self.fast_lock(s) {
            return self.check_fault(&inner).and_then(|()| self.submit_locked(i, slot, &mut inner, &cmd));
        }
        self.submit_checked(s, cmd)
    }

    /// [`submit`](Self::submit) of a launch: on the fast path, [`launch_fast`](Self::launch_fast)
    /// publishes it straight from `launch`, no [`Command`] built (an enum that lives in memory).
    /// Small images have the checked path only, so this is [`submit`](Self::submit) there.
    #[inline]
    pub(super) fn submit_launch(&self, s: StreamHandle, launch: &crate::runtime::KernelLaunch<'_>) -> Result<()> {
        #[cfg(target_has_atomic = "64")]
        if let Some((i, slot, mut inner)) = self.fast_lock(s) {
            if let Some(r) = self.launch_fast(slot, &mut inner, launch) {
                return r;
            }
            let cmd = Command::Kernel(launch);
            return self.check_fault(&inner).and_then(|()| self.submit_locked(i, slot, &mut inner, &cmd));
        }
        #[cfg(target_has_atomic = "64")]
        return self.submit_checked(s, Command::Kernel(launch));
        #[cfg(not(target_has_atomic = "64"))]
        self.submit(s, Command::Kernel(launch))
    }

    /// The submit fast path's checks: a created stream's handle, no capture alive, the slot
    /// holding that stream live and attached ([`StreamSlot::enqueues_fast`]), checked under the
    /// stream's lock (the stream may be destroyed or detached, or a capture begin, until it is
    /// held; whether a capture is alive is also read first, so a capturing process does not
    /// take the lock twice). Returns the slot with its lock held; then the queue's fault check
    /// and the publish follow, as on the checked path. `None` (nothing published) hands the
    /// operation to the checked path: the null and per-thread streams, a stale or garbage
    /// handle, a detached stream, captures.
    ///
    /// What it skips is what a live created stream makes redundant: the device count (a stream
    /// exists only on a device that does), the null and per-thread lookups, the classification
    /// of the handle (only `Live` continues) and the repeated reads of the attribute word.
    #[cfg(target_has_atomic = "64")]
    #[inline(always)]
    #[allow(clippy::type_complexity)]
    fn fast_lock(
        &self,
        s: StreamHandle,
    ) -> Option<(usize, &StreamSlot<K::RawMutex>, lock_api::MutexGuard<'_, K::RawMutex, StreamInner>)> {
        if self.any_capture() {
            return None;
        }
        let (tag, generation, i) = crate::table::decode(s.0);
        if tag != super::STREAM_TAG {
            return None;
        }
        let slot = self.stream(i).ok()?;
        // Checked once, under the lock (where it must be): a stale or detached slot costs a
        // lock, then the checked path; a live one pays nothing twice.
        let inner = slot.inner.lock();
        if !slot.enqueues_fast(generation) || self.any_capture() {
            return None;
        }
        Some((i, slot, inner))
    }

    /// The fast path's launch: the queue looked up once for the fault check and the publish, one
    /// packet reserved single-producer and written from the launch as it is, the doorbell rung
    /// plainly. `None` (nothing published) when the launch needs more than that — a shared
    /// queue, implicit dependencies, arguments longer than a kernel-argument slot, a full ring —
    /// and the general publish takes it, under the same lock. Keeping the launch's fields out of
    /// an intermediate list keeps them out of the stack, whose stores the next enqueue's lock
    /// would wait for (docs/architecture.md, "The submit path, instruction by instruction").
    #[cfg(target_has_atomic = "64")]
    #[inline(always)]
    fn launch_fast(
        &self,
        slot: &StreamSlot<K::RawMutex>,
        inner: &mut StreamInner,
        k: &crate::runtime::KernelLaunch<'_>,
    ) -> Option<Result<()>> {
        let hw = self.queue_of(inner.binding.as_ref()?).ok()?;
        if let Some(e) = self.backend.queue_fault(&hw.queue) {
            return Some(Err(e));
        }
        // Ordering: Acquire, as in `publish`.
        if hw.shared.load(Ordering::Acquire) || !self.no_implicit_deps(slot) {
            return None;
        }
        if let Err(e) = check_geometry(k.grid, k.workgroup, k.kernel_object) {
            return Some(Err(e));
        }
        let mut d = dispatch_packet(k.kernel_object, k.grid, k.workgroup, k.group_segment_size, k.private_segment_size);
        if k.kernarg.len() > hw.desc.kernarg_slot_bytes as usize {
            return None;
        }
        let signal = slot.progress.get()?.handle().0;
        // SAFETY: the queue is not shared (read above under this stream's lock, as in `publish`),
        // so this is the ring's only producer. No spin: a full ring is the general publish's,
        // which waits for room.
        let mut res = unsafe { hw.desc.ring.reserve_single_producer(1, 0, &mut inner.read_hint) }.ok()?;
        // SAFETY: the slot is reserved above and the arguments fit its kernel-argument slot.
        let words = unsafe { dispatch_words(hw, res.next_index(), &mut d, k.kernarg, signal) };
        res.write_words(&words);
        let last = res.finish();
        // Ordering: Relaxed; this lock holder is the only writer.
        let before = slot.submitted.load(Ordering::Relaxed);
        // Ordering: Release, as in `publish`.
        slot.submitted.store(before + 1, Ordering::Release);
        doorbell_fence();
        self.backend.ring_doorbell(&hw.queue, last);
        Some(Ok(()))
    }

    /// [`submit`](Self::submit) with every check of the handle and the stream in full.
    #[cfg_attr(target_has_atomic = "64", inline(never))]
    #[cfg_attr(not(target_has_atomic = "64"), inline(always))]
    fn submit_checked(&self, s: StreamHandle, cmd: Command<'_>) -> Result<()> {
        #[cfg(feature = "capture")]
        if self.any_capture() {
            return self.submit_captured(s, cmd);
        }
        let i = self.resolve_for_work(s)?;
        let generation = self.generation_of(i);
        let slot = self.stream(i)?;
        let mut inner = slot.inner.lock();
        if !Self::still_live(slot, generation) {
            return Err(Error::ContextIsDestroyed);
        }
        #[cfg(feature = "capture")]
        if self.any_capture() {
            // A capture began since the check above: its rules apply.
            drop(inner);
            return self.submit_captured(s, cmd);
        }
        if slot.attrs().detached {
            return Err(Error::StreamDetached);
        }
        self.check_fault(&inner)?;
        self.submit_locked(i, slot, &mut inner, &cmd)
    }

    /// [`submit`](Self::submit) while captures are alive: the capture rules run under the
    /// structural lock. Out of line and cold on hosts: the fast path never runs it.
    #[cfg(feature = "capture")]
    #[cfg_attr(target_has_atomic = "64", cold, inline(never))]
    fn submit_captured(&self, s: StreamHandle, cmd: Command<'_>) -> Result<()> {
        let i = self.resolve_for_work(s)?;
        let generation = self.generation_of(i);
        let mut st = self.lock();
        let slot = self.stream(i)?;
        if !Self::still_live(slot, generation) {
            return Err(Error::ContextIsDestroyed);
        }
        if matches!(cmd, Command::HostFn { f: HostFn::StreamCallback { .. }, .. }) {
            self.check_callback_target(&mut st, s, i)?;
        }
        let mut inner = slot.inner.lock();
        if let Some(c) = Self::capture_in(&st, &inner) {
            return match st.captures.slots().get(c).map(|c| c.status) {
                Some(CaptureStatus::Active) => self.capture_command(&mut st, i, &mut inner, &cmd),
                _ => Err(Error::StreamCaptureInvalidated),
            };
        }
        drop(st);
        self.check_fault(&inner)?;
        self.submit_locked(i, slot, &mut inner, &cmd)
    }

    /// Resolves the stream of an async work API (`STREAM_CAPTURE` in clr): an invalid handle is
    /// `InvalidValue` while any capture exists, a detached stream `StreamDetached`.
    #[inline]
    pub(super) fn resolve_for_work(&self, s: StreamHandle) -> Result<usize> {
        let i = match self.resolve(s, Error::ContextIsDestroyed) {
            Ok(i) => i,
            Err(e @ (Error::ContextIsDestroyed | Error::InvalidHandle)) => {
                return Err(if self.any_capture() { Error::InvalidValue } else { e });
            }
            Err(e) => return Err(e),
        };
        if self.stream(i)?.attrs().detached {
            return Err(Error::StreamDetached);
        }
        Ok(i)
    }

    /// The checks an async work API makes on its stream when there is nothing to enqueue
    /// (a zero-byte copy): the stream must resolve and must not be detached.
    pub(super) fn check_work_stream(&self, s: StreamHandle) -> Result<()> {
        let _i = self.resolve_for_work(s)?;
        #[cfg(feature = "capture")]
        if self.any_capture() {
            let st = self.lock();
            return match self.capture_status_of(&st, _i) {
                CaptureStatus::Invalidated if self.capture_of(&st, _i).is_some() => {
                    Err(Error::StreamCaptureInvalidated)
                }
                _ => Ok(()),
            };
        }
        Ok(())
    }

    /// Publishes one operation on slot `i` (lock held as `inner`): its implicit dependencies
    /// (possibly in earlier batches), its explicit ones, then its packets.
    ///
    /// On hosts a launch with no implicit dependency publishes its one packet here, inline in
    /// the fast path; everything else is [`submit_batch`](Self::submit_batch), out of line.
    #[inline]
    pub(super) fn submit_locked(
        &self,
        i: usize,
        slot: &StreamSlot<K::RawMutex>,
        inner: &mut StreamInner,
        cmd: &Command<'_>,
    ) -> Result<()> {
        #[cfg(target_has_atomic = "64")]
        if let Command::Kernel(k) = cmd {
            if self.no_implicit_deps(slot) {
                check_geometry(k.grid, k.workgroup, k.kernel_object)?;
                return self.publish(slot, inner, &[Spec::Dispatch(Dispatch::launch(k))]);
            }
        }
        self.submit_batch(i, slot, inner, cmd)
    }

    /// [`submit_locked`](Self::submit_locked) through a batch: the implicit dependencies, then
    /// the operation's packets.
    #[cfg_attr(target_has_atomic = "64", inline(never))]
    #[cfg_attr(not(target_has_atomic = "64"), inline(always))]
    fn submit_batch(
        &self,
        i: usize,
        slot: &StreamSlot<K::RawMutex>,
        inner: &mut StreamInner,
        cmd: &Command<'_>,
    ) -> Result<()> {
        let device = slot.attrs().device;
        let mut batch = Batch::new();
        self.implicit_deps(i, slot, inner, &mut batch)?;
        // The common case, a launch with nothing to wait for, publishes one packet directly.
        if let Command::Kernel(k) = cmd {
            check_geometry(k.grid, k.workgroup, k.kernel_object)?;
            if batch.len() == 0 {
                return self.publish(slot, inner, &[Spec::Dispatch(Dispatch::launch(k))]);
            }
        }
        match *cmd {
            Command::Kernel(k) => batch.push(Spec::Dispatch(Dispatch::launch(k)))?,
            Command::Builtin { kernel, ref args, len } => {
                let object = kernel(device)?;
                batch.push(Spec::Dispatch(Dispatch::single(object, args.get(..len).ok_or(Error::InvalidValue)?)))?;
            }
            Command::WaitValue { address, value, mask, cond } => {
                // The packet reads the value at signal + 8, where a signal keeps its value.
                batch.push(Spec::Value { signal: address.wrapping_sub(8), value, mask, cond })?;
            }
            Command::HostFn { step, .. } => return step(i, inner, &mut batch),
            Command::EventRecord(sig) => {
                batch.push(Spec::Mark(sig.handle()))?;
                batch.push(Spec::Deps([0; 5]))?;
                // Ordering: AcqRel; the record's Mark packet takes this back.
                sig.get().value.fetch_add(1, Ordering::AcqRel);
                let r = self.publish(slot, inner, batch.as_slice());
                if r.is_err() {
                    // Ordering: AcqRel; the record never happened.
                    sig.get().value.fetch_sub(1, Ordering::AcqRel);
                }
                return r;
            }
            Command::WaitEvent(sig) => batch.push(Spec::Deps([sig.0, 0, 0, 0, 0]))?,
            Command::WaitPoint(sig, n) => batch.push(Spec::Wait(sig, 1 - n as i64))?,
            Command::Marker => batch.push(Spec::Deps([0; 5]))?,
        }
        self.publish(slot, inner, batch.as_slice())
    }

    /// A host function after `batch` (the implicit dependencies): a mark of its start signal,
    /// a barrier on its done signal, then the call handed to the backend. Out of line and cold,
    /// one copy beside the batch path (docs/architecture.md, "Footprint").
    #[cold]
    #[inline(never)]
    pub(super) fn submit_host_fn(
        &self,
        i: usize,
        inner: &mut StreamInner,
        batch: &mut Batch<'_>,
        f: HostFn,
    ) -> Result<()> {
        let slot = self.stream(i)?;
        let (idx, start, done) = self.take_host_signals(i)?;
        let result = batch
            .push(Spec::Mark(start.handle()))
            .and_then(|_| batch.push(Spec::Deps([done.handle().0, 0, 0, 0, 0])))
            .and_then(|_| self.publish(slot, inner, batch.as_slice()));
        if let Err(e) = result {
            // Never published: the pool gets the pair back now.
            self.release_host_signals(idx, i, u64::MAX);
            return Err(e);
        }
        self.release_host_signals(idx, i, slot.submitted());
        if let Err(e) = self.backend.host_call(start.handle(), done.handle(), f) {
            // The barrier after the call waits on `done`, which nobody will complete now:
            // complete it so the stream's later work is not stuck behind a call that never
            // runs.
            done.get().reset(0);
            return Err(e);
        }
        Ok(())
    }

    /// Flushes `batch` as its own publish when the operation's packets would not fit after it.
    pub(super) fn flush_if_full(
        &self,
        slot: &StreamSlot<K::RawMutex>,
        inner: &mut StreamInner,
        batch: &mut Batch<'_>,
    ) -> Result<()> {
        if batch.len() + MAX_OP_PACKETS >= MAX_BATCH {
            self.publish(slot, inner, batch.as_slice())?;
            batch.clear();
        }
        Ok(())
    }
}

/// Reserves `n` slots of a stream's ring for its publish: on a queue only this stream uses
/// (`shared` false), the single-producer reservation, else the multi-producer one. Small
/// images take the multi-producer reservation for both (correct for one producer too): one
/// reservation routine in the image instead of two (docs/architecture.md, "Footprint").
///
/// # Safety
/// The caller holds the publishing stream's lock and loaded `shared` (the queue's flag) under
/// it: `shared` is set, under the lock of every stream bound to the queue, before a second
/// stream can publish into it, so an unshared queue has this one producer now.
#[inline(always)]
unsafe fn reserve<'r>(ring: &'r AqlRing, shared: bool, n: u32, read_hint: &mut u64) -> Result<Reservation<'r>> {
    #[cfg(target_has_atomic = "64")]
    if !shared {
        // SAFETY: the caller's contract: an unshared queue has this one producer.
        return unsafe { ring.reserve_single_producer(n, DEFAULT_ROOM_SPINS, read_hint) };
    }
    #[cfg(not(target_has_atomic = "64"))]
    let _ = shared;
    ring.reserve_hinted(n, DEFAULT_ROOM_SPINS, read_hint)
}

/// Copies a dispatch's kernel arguments to `dst`, its kernel-argument slot. On hosts, arguments
/// of 8 to 32 bytes (most launches) are two loads and two stores of 8 or 16 bytes, the second
/// pair ending at the last byte (the two may overlap), instead of a call to `memcpy`
/// (docs/architecture.md, "The submit path, instruction by instruction").
///
/// # Safety
/// `dst` must be valid for `args.len()` bytes of writes and must not overlap `args`.
#[inline(always)]
unsafe fn copy_args(args: &[u8], dst: *mut u8) {
    let (src, len) = (args.as_ptr(), args.len());
    #[cfg(target_has_atomic = "64")]
    {
        if (16..=32).contains(&len) {
            // SAFETY: bytes 0..16 and len-16..len lie inside both `args` and the caller's `dst`.
            unsafe {
                dst.cast::<[u8; 16]>().write_unaligned(src.cast::<[u8; 16]>().read_unaligned());
                dst.add(len - 16)
                    .cast::<[u8; 16]>()
                    .write_unaligned(src.add(len - 16).cast::<[u8; 16]>().read_unaligned());
            }
            return;
        }
        if (8..16).contains(&len) {
            // SAFETY: bytes 0..8 and len-8..len lie inside both `args` and the caller's `dst`.
            unsafe {
                dst.cast::<u64>().write_unaligned(src.cast::<u64>().read_unaligned());
                dst.add(len - 8).cast::<u64>().write_unaligned(src.add(len - 8).cast::<u64>().read_unaligned());
            }
            return;
        }
    }
    // SAFETY: the caller's contract.
    unsafe { core::ptr::copy_nonoverlapping(src, dst, len) }
}

/// Checks a launch's geometry: zero sizes or a work-group over 1024 work-items are
/// `InvalidConfiguration`, a null kernel `InvalidValue`.
#[inline]
pub(super) fn check_geometry(grid: [u32; 3], workgroup: [u16; 3], kernel_object: u64) -> Result<()> {
    // u64: three u16 sizes overflow u32 (and a wrapped product could pass the 1024 check). A
    // zero size makes the product 0, which the subtraction wraps past 1024: one compare for both.
    let wg_items = u64::from(workgroup[0]) * u64::from(workgroup[1]) * u64::from(workgroup[2]);
    if wg_items.wrapping_sub(1) >= 1024 || grid[0] == 0 || grid[1] == 0 || grid[2] == 0 {
        return Err(Error::InvalidConfiguration);
    }
    if kernel_object == 0 {
        return Err(Error::InvalidValue);
    }
    Ok(())
}
