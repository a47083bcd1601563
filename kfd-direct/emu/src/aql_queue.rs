//! An AQL queue as the device sees it (docs/kfd-aql.md §2, §3.4, §4.1, §4.3): where its ring,
//! doorbell and `amd_queue_t` live, its scheduling parameters, and the two things every engine
//! does to it — complete a packet's signal and retire the packet in order.
//!
//! # Two read indices
//!
//! The packet processor consumes the ring through its private *launch* index
//! ([`RingState::launch`]); the `read_dispatch_id` the process sees (at `amd_queue_t + 128`) is
//! advanced only over a contiguous run of completed packets — in order on completion, the
//! conservative model of docs/kfd-aql.md §3.4. Packets complete out of order when they may (no
//! barrier bit, or work-groups finishing on different workers); [`AqlQueue::retire`] keeps a window
//! of [`WINDOW`] launched packets as a bit mask above the read index, so the producer never reuses
//! a slot before every packet up to it has completed. A slot keeps its packet until it retires
//! (then its header becomes INVALID), so the pending packets of a stopped queue stay readable.

use std::borrow::Cow;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use spin::mutex::{SpinMutex, SpinMutexGuard};

use aqueduct::aql::KernelDispatchPacket;
use aqueduct::AmdSignal;

use crate::abi::queue_properties;
use crate::events::Events;
use crate::hw::{status, Clock, Rng};
use crate::memory::{Translation, VmLock};
use crate::twin::Twin;

/// Most packets of one queue launched and not yet retired (the retirement window).
pub(crate) const WINDOW: u64 = 64;

/// Dword 0 of a retired slot: header type INVALID, setup 0.
const INVALID_HEADER: u32 = 1;

/// The packet processor's view of the ring (replaced by UPDATE_QUEUE under its lock).
pub(crate) struct RingState {
    /// Device-view pointer to slot 0.
    pub(crate) base: NonNull<u8>,
    /// Slots (a power of two).
    pub(crate) packets: u32,
    /// GPU VA and bytes of the ring (UPDATE_QUEUE compares against them).
    pub(crate) va: u64,
    pub(crate) bytes: u64,
    /// The next packet the packet processor looks at.
    pub(crate) launch: u64,
    /// Doorbell value last acted on; `u64::MAX` = never rung.
    pub(crate) last_doorbell: u64,
    /// Doorbell reads in a row that found new packets (the producer streams).
    pub(crate) streak: u8,
    /// The doorbell was written since the processor last found the slot after the announced
    /// packets INVALID: published packets past the announced end are taken (the packet
    /// processor's "Doorbells from several producers").
    pub(crate) look_past: bool,
    /// The dispatch whose scratch the processor asked the queue's runtime for (its index),
    /// until the runtime answers (the packet processor's "Scratch on request").
    pub(crate) scratch_asked: Option<u64>,
    /// Packets with index < limit are announced.
    pub(crate) limit: u64,
    /// Adversarial mode: launched dispatches not yet released to the scheduler, and the
    /// queue's own seeded generator that picks the next one.
    pub(crate) held: Vec<Dispatch<'static>>,
    pub(crate) rng: Rng,
    /// Kernel dispatches launched from this ring (statistics).
    pub(crate) launched: u64,
    /// A dispatch of the queue runs on the packet processor's thread, outside this lock: in
    /// flight, though not counted in [`AqlQueue::in_flight`].
    pub(crate) running_here: bool,
}

// SAFETY: `base` points into a ring BO pinned by the queue; it is only used under the ring's
// mutex.
unsafe impl Send for RingState {}

impl RingState {
    /// Device-view address of the slot of packet `index`.
    pub(crate) fn slot(&self, index: u64) -> *mut u8 {
        let i = (index & (u64::from(self.packets) - 1)) as usize;
        self.base.as_ptr().wrapping_add(i * 64)
    }
}

struct Retire {
    /// The next index the visible read index will move past.
    next: u64,
    /// Bit `i`: packet `next + i` completed.
    done: u64,
    /// The ring whose slots retirement rewrites (a copy of the ring state's, kept in step by
    /// [`AqlQueue::set_ring`]).
    base: NonNull<u8>,
    packets: u32,
}

/// A hardware AQL queue as the device sees it.
pub(crate) struct AqlQueue {
    pub(crate) gpu_id: u32,
    pub(crate) vm: Arc<VmLock>,
    pub(crate) events: Arc<Events>,
    /// KFD priority 0..=15.
    pub(crate) priority: AtomicU32,
    pub(crate) percentage: AtomicU32,
    /// Enabled CUs after the CU mask (0 parks the queue).
    pub(crate) cu_enabled: AtomicU32,
    /// The compute-unit workers the CU mask allows (bit `w`: worker `w`).
    pub(crate) workers: AtomicU64,
    pub(crate) status: AtomicU8,
    /// The KFD exception code that halted the queue (0 none).
    pub(crate) exception: AtomicU32,
    /// Creation order among the device's queues (ties of priority go to the older queue).
    pub(crate) order: u64,
    /// Set when the ring BO is not GPU-executable: the first fetch faults (NoExecute).
    pub(crate) noexec_ring: Option<u64>,
    pub(crate) cwsr_va: u64,
    /// GPU VA of the queue's `amd_queue_t`.
    pub(crate) queue_va: u64,
    read_dispatch_id: NonNull<AtomicU64>,
    doorbell: NonNull<AtomicU64>,
    /// The doorbell value the packet processor last acted on (lets it peek without locking).
    seen_doorbell: AtomicU64,
    /// [`crate::hw::ticks`] before which the doorbell is not read again (0: no pause): set
    /// while the producer streams, so its doorbell line is pulled away once per pause rather
    /// than once per packet.
    doorbell_pause: AtomicU64,
    queue_properties: NonNull<AtomicU32>,
    /// Spin locks: held for a look at the queue or a retirement only (never while a kernel
    /// runs), and released with a plain store, which matters on a path taken per packet.
    ring: SpinMutex<RingState>,
    retire: SpinMutex<Retire>,
    /// Packets launched and not yet completed.
    in_flight: AtomicU32,
    /// The read index as retirement last stored it: the packet processor's copy, so checking
    /// the retirement window never touches the `amd_queue_t` line the producer polls.
    retired: AtomicU64,
    /// A packet completed since the packet processor last looked (a barrier bit may be met).
    attention: AtomicBool,
    /// The queue's head waits on memory someone else writes (an INVALID slot, an unmet
    /// dependency): the packet processor polls it.
    pub(crate) waits_on_memory: AtomicBool,
    /// The packet processor's last look found every announced packet launched (and none
    /// waiting on memory): until the doorbell rings or a packet completes there is nothing to
    /// look at. Cleared whenever the driver takes the ring.
    drained: AtomicBool,
}

// SAFETY: `base` points into a ring BO pinned by the queue; it is only used under the lock.
unsafe impl Send for Retire {}

// SAFETY: the raw pointers target pool or user memory that outlives the queue (queue buffers are
// pinned by their queue reference count) and are only accessed atomically.
unsafe impl Send for AqlQueue {}
// SAFETY: as for Send; mutable state is atomic or behind a mutex.
unsafe impl Sync for AqlQueue {}

/// Device-view pointers a new queue needs (resolved by the driver under its validation).
pub(crate) struct QueuePtrs {
    pub(crate) ring: *mut u8,
    pub(crate) ring_va: u64,
    pub(crate) ring_packets: u32,
    pub(crate) read_dispatch_id: *mut u8,
    pub(crate) queue_properties: *mut u8,
    /// GPU VA of the queue's `amd_queue_t` (the queue ptr kernels receive).
    pub(crate) queue_va: u64,
    pub(crate) doorbell: *mut u8,
}

/// Scheduling parameters of a new queue.
pub(crate) struct QueueParams {
    pub(crate) priority: u32,
    pub(crate) percentage: u32,
    pub(crate) cu_enabled: u32,
    pub(crate) workers: u64,
    pub(crate) order: u64,
    pub(crate) cwsr_va: u64,
    pub(crate) noexec_ring: Option<u64>,
    /// Adversarial scheduling seed of the queue (None: off).
    pub(crate) adversarial: Option<u64>,
}

impl AqlQueue {
    /// Builds the device side of a queue.
    ///
    /// # Safety
    /// Every pointer in `ptrs` must stay valid (8-byte aligned where it names an index or the
    /// doorbell, 64-byte aligned for the ring of `ring_packets` slots, a power of two) until the
    /// queue is destroyed.
    pub(crate) unsafe fn new(
        gpu_id: u32,
        vm: Arc<VmLock>,
        events: Arc<Events>,
        ptrs: QueuePtrs,
        p: QueueParams,
    ) -> Option<AqlQueue> {
        let read = NonNull::new(ptrs.read_dispatch_id.cast::<AtomicU64>())?;
        // SAFETY: caller's contract: a live, aligned u64.
        let start = unsafe { read.as_ref() }.load(Ordering::Acquire);
        let doorbell = NonNull::new(ptrs.doorbell.cast::<AtomicU64>())?;
        // SAFETY: the doorbell slot is live pool memory; "never rung" marker.
        unsafe { doorbell.as_ref() }.store(u64::MAX, Ordering::Release);
        if !ptrs.ring_packets.is_power_of_two() {
            return None;
        }
        Some(AqlQueue {
            gpu_id,
            vm,
            events,
            priority: AtomicU32::new(p.priority),
            percentage: AtomicU32::new(p.percentage),
            cu_enabled: AtomicU32::new(p.cu_enabled),
            workers: AtomicU64::new(p.workers),
            status: AtomicU8::new(status::ACTIVE),
            exception: AtomicU32::new(0),
            order: p.order,
            noexec_ring: p.noexec_ring,
            cwsr_va: p.cwsr_va,
            queue_va: ptrs.queue_va,
            read_dispatch_id: read,
            doorbell,
            seen_doorbell: AtomicU64::new(u64::MAX),
            doorbell_pause: AtomicU64::new(0),
            queue_properties: NonNull::new(ptrs.queue_properties.cast())?,
            ring: SpinMutex::new(RingState {
                base: NonNull::new(ptrs.ring)?,
                packets: ptrs.ring_packets,
                va: ptrs.ring_va,
                bytes: u64::from(ptrs.ring_packets) * 64,
                launch: start,
                last_doorbell: u64::MAX,
                streak: 0,
                look_past: false,
                scratch_asked: None,
                limit: start,
                held: Vec::new(),
                launched: 0,
                running_here: false,
                rng: Rng::new(p.adversarial.unwrap_or(0) ^ p.order.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            }),
            retire: SpinMutex::new(Retire {
                next: start,
                done: 0,
                base: NonNull::new(ptrs.ring)?,
                packets: ptrs.ring_packets,
            }),
            in_flight: AtomicU32::new(0),
            retired: AtomicU64::new(start),
            attention: AtomicBool::new(false),
            waits_on_memory: AtomicBool::new(false),
            drained: AtomicBool::new(false),
        })
    }

    /// The ring, for the driver (UPDATE_QUEUE and destroy wait for the packet processor to
    /// be done with the queue, as amdkfd preempts it).
    pub(crate) fn lock_ring(&self) -> SpinMutexGuard<'_, RingState> {
        let ring = lock(&self.ring);
        self.set_drained(false);
        ring
    }

    /// Whether the packet processor's last look found nothing left to launch.
    pub(crate) fn drained(&self) -> bool {
        // Ordering: Relaxed; a hint written under the ring lock (see `drained`).
        self.drained.load(Ordering::Relaxed)
    }

    /// Records what the packet processor's look found (under the ring lock).
    pub(crate) fn set_drained(&self, drained: bool) {
        // Ordering: Relaxed; see `drained`.
        self.drained.store(drained, Ordering::Relaxed);
    }

    /// The ring for the packet processor, unless another engine thread is processing the queue.
    pub(crate) fn try_lock_ring(&self) -> Option<SpinMutexGuard<'_, RingState>> {
        self.ring.try_lock()
    }

    fn lock_retire(&self) -> SpinMutexGuard<'_, Retire> {
        lock(&self.retire)
    }

    /// Whether the doorbell changed since the packet processor last acted on it (a peek at the
    /// doorbell's cache line and nothing else).
    pub(crate) fn doorbell_rung(&self) -> bool {
        if self.doorbell_paused() {
            return false;
        }
        // SAFETY: the doorbell slot is pool memory that lives as long as the machine.
        let d = unsafe { self.doorbell.as_ref() };
        // Ordering: Relaxed; a hint only, `read_doorbell` reloads with Acquire.
        d.load(Ordering::Relaxed) != self.seen_doorbell.load(Ordering::Relaxed)
    }

    /// Whether the doorbell is not to be read now (see `doorbell_pause`).
    pub(crate) fn doorbell_paused(&self) -> bool {
        // Ordering: Relaxed; a pacing hint of the packet processor's own.
        let until = self.doorbell_pause.load(Ordering::Relaxed);
        until != 0 && crate::hw::ticks() < until
    }

    /// Pauses doorbell reads for `ticks` [`crate::hw::ticks`] (0: no pause).
    pub(crate) fn pause_doorbell(&self, ticks: u64) {
        let until = if ticks == 0 { 0 } else { crate::hw::ticks().wrapping_add(ticks) };
        // Ordering: Relaxed; see `doorbell_paused`.
        self.doorbell_pause.store(until, Ordering::Relaxed);
    }

    /// The doorbell value: packets up to it are published (docs/kfd-aql.md §2).
    pub(crate) fn read_doorbell(&self) -> u64 {
        // SAFETY: as in `doorbell_rung`.
        let d = unsafe { self.doorbell.as_ref() };
        // Ordering: Acquire pairs with the producer's fence before its doorbell store, so the
        // published headers up to the value are visible.
        let v = d.load(Ordering::Acquire);
        // Ordering: Relaxed; only the packet processor writes it, peeks compare it.
        self.seen_doorbell.store(v, Ordering::Relaxed);
        v
    }

    /// Whether the queue may run: active, a non-zero percentage, at least one CU enabled.
    pub(crate) fn runnable(&self) -> bool {
        // Ordering: Relaxed; scheduling flags, re-read every round.
        self.status.load(Ordering::Relaxed) == status::ACTIVE
            && self.percentage.load(Ordering::Relaxed) & 0xff > 0
            && self.cu_enabled.load(Ordering::Relaxed) > 0
    }

    pub(crate) fn active(&self) -> bool {
        // Ordering: Relaxed; a scheduling flag.
        self.status.load(Ordering::Relaxed) == status::ACTIVE
    }

    /// Whether `amd_queue_t.queue_properties` asks for timestamps.
    pub(crate) fn profiling(&self) -> bool {
        // SAFETY: the amd_queue_t page is live while the queue is (constructor contract).
        let p = unsafe { self.queue_properties.as_ref() };
        // Ordering: Relaxed; the producer's release of the packet header orders earlier writes.
        p.load(Ordering::Relaxed) & queue_properties::ENABLE_PROFILING != 0
    }

    /// Device-view address of the queue's `amd_queue_t`.
    pub(crate) fn amd_queue(&self) -> *mut u8 {
        self.queue_properties.as_ptr().cast::<u8>().wrapping_sub(crate::abi::AMD_QUEUE_PROPERTIES as usize)
    }

    /// The read index as retirement last set it (the packet processor's copy).
    pub(crate) fn retired(&self) -> u64 {
        // Ordering: Relaxed; see `retire`.
        self.retired.load(Ordering::Relaxed)
    }

    /// The read index as retirement last set it, with the INVALID headers of the slots it
    /// retired visible (a look at a slot past the announced packets).
    pub(crate) fn retired_acquire(&self) -> u64 {
        // Ordering: Acquire; see `retire`.
        self.retired.load(Ordering::Acquire)
    }

    /// Packets launched and not completed (a barrier-bit packet waits for 0).
    pub(crate) fn in_flight(&self) -> u32 {
        // Ordering: Acquire pairs with `retire`'s AcqRel decrement: a packet launched after
        // seeing 0 happens after the completions that made it 0.
        self.in_flight.load(Ordering::Acquire)
    }

    /// Counts a launched packet as in flight.
    pub(crate) fn begin(&self) {
        // Ordering: Relaxed; only the packet processor increments, and it reads the count itself.
        self.in_flight.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether a completion happened since the packet processor last looked.
    pub(crate) fn attention_pending(&self) -> bool {
        // Ordering: Relaxed, a hint; see `take_attention`.
        self.attention.load(Ordering::Relaxed)
    }

    /// Asks the packet processor to look at the queue again.
    pub(crate) fn attend(&self) {
        // Ordering: Release; a hint, as in `retire`.
        self.attention.store(true, Ordering::Release);
    }

    /// Whether a completion happened since the last call (clears the flag).
    pub(crate) fn take_attention(&self) -> bool {
        // Ordering: Relaxed, a hint; `in_flight` and the read index carry the data.
        self.attention.load(Ordering::Relaxed) && self.attention.swap(false, Ordering::Acquire)
    }

    /// Marks packet `index` complete and moves the visible read index over the completed prefix.
    /// `counted`: the packet was counted by [`AqlQueue::begin`]. A destroyed queue's memory is
    /// not touched any more (destroy takes this lock after setting the status).
    pub(crate) fn retire(&self, index: u64, counted: bool) {
        let mut r = self.lock_retire();
        // Ordering: Relaxed; read under the lock destroy takes after setting it.
        if self.status.load(Ordering::Relaxed) == status::DESTROYED {
            return;
        }
        let bit = index.wrapping_sub(r.next);
        if bit < WINDOW {
            r.done |= 1 << bit;
        }
        let run = r.done.trailing_ones();
        if run > 0 {
            // Retired slots get an INVALID header (docs/kfd-aql.md §3.4 "Retirement"): until then a
            // slot keeps its packet, so a stopped queue's pending packets stay readable.
            for k in 0..u64::from(run) {
                let i = (r.next.wrapping_add(k) & (u64::from(r.packets) - 1)) as usize;
                // SAFETY: slot `i` of the pinned ring (64 live, aligned bytes).
                let dword0 = unsafe { AtomicU32::from_ptr(r.base.as_ptr().add(i * 64).cast()) };
                // Ordering: Relaxed; the Release store of the read index below publishes it.
                dword0.store(INVALID_HEADER, Ordering::Relaxed);
            }
            r.done = if run == 64 { 0 } else { r.done >> run };
            r.next = r.next.wrapping_add(u64::from(run));
            // SAFETY: constructor contract: the read index is live while the queue is.
            let read = unsafe { self.read_dispatch_id.as_ref() };
            // Ordering: Release pairs with the producer's Acquire room check: its reuse of the
            // slots comes after the packet processor's reads of them.
            read.store(r.next, Ordering::Release);
            // Ordering: Release pairs with `retired_acquire`: the INVALID headers stored above
            // are visible to a processor that sees the new value (the window check's Relaxed
            // load needs no more: the in-flight count's AcqRel decrement below orders it before a
            // launch that depends on it).
            self.retired.store(r.next, Ordering::Release);
        }
        drop(r);
        if counted {
            // Ordering: AcqRel; see `in_flight`.
            self.in_flight.fetch_sub(1, Ordering::AcqRel);
        }
        self.attend();
    }

    /// Points retirement at a new ring (UPDATE_QUEUE, under the ring lock).
    pub(crate) fn set_ring(&self, ring: &RingState) {
        let mut r = self.lock_retire();
        r.base = ring.base;
        r.packets = ring.packets;
    }

    /// Waits until no engine is inside `retire` for this queue (destroy, after the status).
    pub(crate) fn fence_retire(&self) {
        drop(self.lock_retire());
    }

    /// Completes a packet's signal (docs/kfd-aql.md §3.4 "Completion", §4.1): timestamps when
    /// `profiling`, an atomic decrement by one, then the event mailbox and the interrupt.
    /// `Err(va)`: the signal or its mailbox is not mapped on the device (a memory fault).
    pub(crate) fn complete_signal(
        &self,
        tr: &Translation,
        handle: u64,
        start: u64,
        end: u64,
        profiling: bool,
    ) -> Result<(), u64> {
        let p = tr.translate(handle, 64)?;
        if p as usize % 64 != 0 {
            return Err(handle);
        }
        // SAFETY: 64 live, 64-byte aligned bytes inside a mapped BO; AmdSignal is all atomics.
        let sig = unsafe { &*p.cast::<AmdSignal>() };
        if profiling {
            // Ordering: Relaxed; the AcqRel decrement below publishes the timestamps.
            sig.start_ts.store(start, Ordering::Relaxed);
            sig.end_ts.store(end, Ordering::Relaxed);
        }
        crate::tsan::release(handle.wrapping_add(8));
        // Ordering: AcqRel: the packet's effects happen-before any waiter that sees the value.
        sig.value.fetch_sub(1, Ordering::AcqRel);
        // Ordering: Relaxed; mailbox and id are set up before the signal is used.
        let mailbox = sig.event_mailbox_ptr.load(Ordering::Relaxed);
        if mailbox != 0 {
            let id = sig.event_id.load(Ordering::Relaxed);
            let m = tr.translate(mailbox, 8).map_err(|_| mailbox)?;
            if m as usize % 8 != 0 {
                return Err(mailbox);
            }
            // SAFETY: 8 live, aligned bytes inside a mapped BO.
            let slot = unsafe { AtomicU64::from_ptr(m.cast()) };
            // Ordering: Release, as the CP's mailbox write.
            slot.store(u64::from(id), Ordering::Release);
            self.events.interrupt(id);
        }
        Ok(())
    }

    /// The value of the signal `handle` (its `value` at +8), for dependencies and barrier-value
    /// packets. `Err(va)`: not mapped on the device.
    pub(crate) fn signal_value(&self, tr: &Translation, handle: u64) -> Result<i64, u64> {
        let p = tr.translate(handle.wrapping_add(8), 8).map_err(|_| handle)?;
        if p as usize % 8 != 0 {
            return Err(handle);
        }
        // SAFETY: 8 live, aligned bytes inside a mapped BO.
        let v = unsafe { std::sync::atomic::AtomicI64::from_ptr(p.cast()) };
        // Ordering: Acquire pairs with the decrement or store that set the value.
        let value = v.load(Ordering::Acquire);
        crate::tsan::acquire(handle.wrapping_add(8));
        Ok(value)
    }
}

/// Takes a spin lock, giving the core away between tries (its holder may be a thread the
/// machine's cores are shared with).
fn lock<T>(m: &SpinMutex<T>) -> SpinMutexGuard<'_, T> {
    loop {
        if let Some(g) = m.try_lock() {
            return g;
        }
        std::thread::yield_now();
    }
}

/// Kernel-argument bytes of a launched dispatch.
pub(crate) enum Kernarg {
    Inline { len: u8, bytes: [u8; 128] },
    Heap(Box<[u8]>),
}

impl Kernarg {
    pub(crate) fn new(len: usize) -> Kernarg {
        if len <= 128 {
            Kernarg::Inline { len: len as u8, bytes: [0; 128] }
        } else {
            Kernarg::Heap(vec![0; len].into_boxed_slice())
        }
    }

    pub(crate) fn as_mut(&mut self) -> &mut [u8] {
        match self {
            Kernarg::Inline { len, bytes } => &mut bytes[..usize::from(*len)],
            Kernarg::Heap(b) => b,
        }
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            Kernarg::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Kernarg::Heap(b) => b,
        }
    }
}

/// A launched kernel dispatch: everything its work-groups and its completion need. Its queue,
/// twin and memory are borrowed from the packet processor while it runs the dispatch itself
/// (`PacketProcessor::process`), and owned ([`Dispatch::into_owned`]) once it is handed to the
/// work-group scheduler.
pub(crate) struct Dispatch<'a> {
    pub(crate) queue: Cow<'a, Arc<AqlQueue>>,
    pub(crate) index: u64,
    /// GPU VA of the packet's ring slot (the dispatch ptr kernels receive).
    pub(crate) packet_va: u64,
    pub(crate) twin: Cow<'a, Arc<Twin>>,
    pub(crate) packet: KernelDispatchPacket,
    pub(crate) kernarg: Kernarg,
    pub(crate) grid: [u32; 3],
    pub(crate) workgroup_size: [u32; 3],
    pub(crate) workgroup_count: [u32; 3],
    /// Work-groups in all.
    pub(crate) work_groups: u64,
    /// The queue's memory as of the launch.
    pub(crate) tr: Cow<'a, Arc<Translation>>,
    pub(crate) start_ts: u64,
    pub(crate) profiling: bool,
    /// The queue's priority at launch (higher first).
    pub(crate) priority: u32,
    /// Workers the queue's CU mask allows.
    pub(crate) workers: u64,
    /// The packet's release scope asks for a release fence before completion.
    pub(crate) release_fence: bool,
    /// Counted in the queue's in-flight packets ([`AqlQueue::begin`]).
    pub(crate) counted: bool,
}

impl Dispatch<'_> {
    /// The same dispatch, owning its queue, twin and memory.
    pub(crate) fn into_owned(self) -> Dispatch<'static> {
        Dispatch {
            queue: Cow::Owned(self.queue.into_owned()),
            twin: Cow::Owned(self.twin.into_owned()),
            tr: Cow::Owned(self.tr.into_owned()),
            ..self
        }
    }

    /// The work-group id of linear work-group `n` (x fastest).
    pub(crate) fn work_group(&self, n: u64) -> [u32; 3] {
        let [cx, cy, _] = self.workgroup_count.map(u64::from);
        [(n % cx) as u32, ((n / cx) % cy) as u32, (n / (cx * cy)) as u32]
    }

    /// Completes the dispatch after its last work-group (docs/kfd-aql.md §3.4 "Completion"), on
    /// whichever engine thread ran that work-group. A queue that stopped meanwhile gets nothing
    /// more. `Err(va)`: the signal or its mailbox is not mapped (a VM fault, reported by the
    /// caller after the packet retired).
    pub(crate) fn complete(&self, clock: &Clock) -> Result<(), u64> {
        let q = &self.queue;
        if !q.active() {
            return Ok(());
        }
        if self.release_fence {
            fence(Ordering::Release);
        }
        let signal = self.packet.completion_signal;
        let mut done = Ok(());
        if signal != 0 {
            let end = if self.profiling { clock.gpu_ticks() } else { 0 };
            done = q.complete_signal(&self.tr, signal, self.start_ts, end, self.profiling);
        }
        q.retire(self.index, self.counted);
        done
    }
}
