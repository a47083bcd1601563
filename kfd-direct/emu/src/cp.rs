//! The command processor: one thread per emulated GPU that consumes every active AQL queue of
//! the device (kfd-aql.md §3.4, §4.1, §7, §9 "packet processor").
//!
//! # What it does
//!
//! Each round, the thread looks at every runnable queue in priority order (higher first; a
//! queue gets `1 + priority` packets per round). It reads the queue's doorbell slot; a changed
//! value `v` means "packets up to index `v` are published" (§2). It then runs core's one
//! packet-processing step, [`aqueduct::aql::step`], with an executor of its own
//! ([`PacketExecutor`]): the step stalls on an INVALID header, waits on the barrier bit and on
//! barrier-AND/OR dependencies (re-polled every round), and calls the executor to run kernels
//! and complete signals. The executor applies the acquire fence before a packet and the release
//! fence before its completion, decrements the completion signal atomically, writes start/end
//! timestamps when the queue's `amd_queue_t` has `ENABLE_PROFILING`, and posts the event mailbox
//! and raises the KFD event when the signal has one.
//!
//! # Two read indices
//!
//! The step consumes the ring through an [`AqlRing`] whose read index is the CP's private
//! *launch* index; the `read_dispatch_id` the process sees (at `amd_queue_t + 128`) is advanced
//! only over a contiguous run of completed packets — in order on completion, the conservative
//! model of §3.4. With in-order execution the two move together. In adversarial mode
//! ([`crate::EmuConfig::adversarial_seed`]) a kernel dispatch without the barrier bit is handed
//! to a pending set instead of running inside the step; pending kernels complete after a seeded
//! random number of rounds, in a seeded random order, so a stream that forgot a barrier bit sees
//! its packets overlap and finish out of order. A packet with the barrier bit waits (the
//! executor's `in_flight` answers true) until the queue's pending set is empty.
//!
//! # Errors (§7)
//!
//! An invalid packet or dispatch halts the queue: the exception mask `1 << (ec - 1)` is ORed into
//! the 64-bit word at the CWSR header's `err_payload_addr`, the header's `err_event_id` is set,
//! and the failing packet is neither completed nor retired. A kernel memory fault evicts every
//! queue of the process on the device and sets the process's MEMORY events with the faulting
//! address. A hung kernel leaves its queue stuck forever. A device reset evicts every queue of
//! the device.

use std::collections::BTreeSet;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use aqueduct::aql::{self, AqlRing, Header, KernelDispatchPacket, Outcome, PacketExecutor, QueueFault, Step};
use aqueduct::AmdSignal;
use portable_atomic::AtomicU64 as RingIndex;

use crate::abi::{exception, queue_properties, CwsrHeader, MemoryExceptionData, MemoryExceptionFailure};
use crate::events::Events;
use crate::kernels::{KernelCtx, Registry, Twin};
use crate::memory::{KernelError, MemView, Pool, Vm};
use crate::sdma::{SdmaFailure, SdmaQueue, SdmaStats};
use crate::topology::GpuNode;

/// Ticks per second of the emulated GPU clock (signal timestamps, `gpu_clock_counter`).
pub const GPU_CLOCK_HZ: u64 = 100_000_000;

/// The emulated clocks.
#[derive(Debug)]
pub(crate) struct Clock {
    start: Instant,
}

impl Clock {
    pub(crate) fn new() -> Clock {
        Clock { start: Instant::now() }
    }

    /// GPU ticks at [`GPU_CLOCK_HZ`].
    pub(crate) fn gpu_ticks(&self) -> u64 {
        (self.start.elapsed().as_nanos() / (1_000_000_000 / u128::from(GPU_CLOCK_HZ))) as u64
    }
}

/// Queue status values.
pub(crate) mod status {
    pub(crate) const ACTIVE: u8 = 0;
    /// Halted by a queue error (exception reported through the CWSR header).
    pub(crate) const ERROR: u8 = 1;
    /// A kernel never finished.
    pub(crate) const HUNG: u8 = 2;
    /// Evicted by a memory fault or a device reset.
    pub(crate) const EVICTED: u8 = 3;
    pub(crate) const DESTROYED: u8 = 4;
}

/// The part of a queue only the CP thread (and destroy/update, which wait for it) touches.
pub(crate) struct CpState {
    pub(crate) ring: AqlRing,
    /// GPU VA and bytes of the current ring (UPDATE_QUEUE compares against them).
    pub(crate) ring_va: u64,
    pub(crate) ring_bytes: u64,
    /// Doorbell value last seen; `u64::MAX` = never rung.
    last_doorbell: u64,
    /// Packets with index < limit are announced.
    limit: u64,
    /// Completed packets not yet retired (out-of-order completions).
    done: BTreeSet<u64>,
    /// The next index the visible read index will move past.
    next_retire: u64,
    /// Pending (adversarial) kernels of this queue.
    pending: usize,
}

/// A hardware queue as the CP sees it.
pub(crate) struct HwQueue {
    pub(crate) gpu_id: u32,
    pub(crate) vm: Arc<RwLock<Vm>>,
    pub(crate) events: Arc<Events>,
    pub(crate) priority: AtomicU32,
    pub(crate) percentage: AtomicU32,
    /// Enabled CUs after the CU mask (0 makes the queue unschedulable).
    pub(crate) cu_enabled: AtomicU32,
    pub(crate) status: AtomicU8,
    /// The KFD exception code that halted the queue (0 none).
    pub(crate) exception: AtomicU32,
    /// The CP's launch index (the ring's read index as the step sees it).
    shadow: Box<RingIndex>,
    /// Device-view pointers, valid while the queue lives (its BOs cannot be unmapped: EBUSY).
    read_dispatch_id: NonNull<AtomicU64>,
    pub(crate) write_dispatch_id: NonNull<RingIndex>,
    doorbell: NonNull<AtomicU64>,
    /// The doorbell value the CP last acted on (lets the idle loop peek without locking).
    seen_doorbell: AtomicU64,
    /// Set when the ring BO is not GPU-executable: the first fetch faults (NoExecute).
    noexec_ring: Option<u64>,
    queue_properties: NonNull<AtomicU32>,
    pub(crate) cwsr_va: u64,
    pub(crate) cp: Mutex<CpState>,
}

// SAFETY: the raw pointers target pool or user memory that outlives the queue (queue buffers are
// pinned by their queue reference count) and are only accessed atomically.
unsafe impl Send for HwQueue {}
// SAFETY: as for Send; mutable state is atomic or behind `cp`.
unsafe impl Sync for HwQueue {}

/// Device-view pointers a new queue needs (resolved by the driver under its validation).
pub(crate) struct QueuePtrs {
    pub(crate) ring: *mut u8,
    pub(crate) ring_va: u64,
    pub(crate) ring_packets: u32,
    pub(crate) write_dispatch_id: *mut u8,
    pub(crate) read_dispatch_id: *mut u8,
    pub(crate) queue_properties: *mut u8,
    pub(crate) doorbell: *mut u8,
}

impl HwQueue {
    /// Builds the CP side of a queue.
    ///
    /// # Safety
    /// Every pointer in `ptrs` must stay valid (and 8-byte aligned where it names an index or
    /// the doorbell, 64-byte aligned for the ring) until the queue is destroyed.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn new(
        gpu_id: u32,
        vm: Arc<RwLock<Vm>>,
        events: Arc<Events>,
        ptrs: QueuePtrs,
        priority: u32,
        percentage: u32,
        cu_enabled: u32,
        cwsr_va: u64,
        noexec_ring: Option<u64>,
    ) -> Option<HwQueue> {
        let read = NonNull::new(ptrs.read_dispatch_id.cast::<AtomicU64>())?;
        // SAFETY: caller's contract: a live, aligned u64.
        let start = unsafe { read.as_ref() }.load(Ordering::Acquire);
        let shadow = Box::new(RingIndex::new(start));
        let write = NonNull::new(ptrs.write_dispatch_id.cast::<RingIndex>())?;
        // SAFETY: the ring and write index live per the caller's contract; the shadow index is
        // boxed inside the queue and lives as long as any copy of the ring (both are dropped
        // with the queue; the CP only uses the ring while it holds the queue).
        let ring = unsafe { AqlRing::new(NonNull::new(ptrs.ring)?, ptrs.ring_packets, write, NonNull::from(&*shadow)) }
            .ok()?;
        let doorbell = NonNull::new(ptrs.doorbell.cast::<AtomicU64>())?;
        // SAFETY: the doorbell slot is live pool memory; "never rung" marker.
        unsafe { doorbell.as_ref() }.store(u64::MAX, Ordering::Release);
        Some(HwQueue {
            gpu_id,
            vm,
            events,
            priority: AtomicU32::new(priority),
            percentage: AtomicU32::new(percentage),
            cu_enabled: AtomicU32::new(cu_enabled),
            status: AtomicU8::new(status::ACTIVE),
            exception: AtomicU32::new(0),
            shadow,
            read_dispatch_id: read,
            write_dispatch_id: write,
            doorbell,
            seen_doorbell: AtomicU64::new(u64::MAX),
            noexec_ring,
            queue_properties: NonNull::new(ptrs.queue_properties.cast())?,
            cwsr_va,
            cp: Mutex::new(CpState {
                ring,
                ring_va: ptrs.ring_va,
                ring_bytes: u64::from(ptrs.ring_packets) * 64,
                last_doorbell: u64::MAX,
                limit: start,
                done: BTreeSet::new(),
                next_retire: start,
                pending: 0,
            }),
        })
    }

    pub(crate) fn lock_cp(&self) -> MutexGuard<'_, CpState> {
        self.cp.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the doorbell changed since the CP last looked (a lock-free peek).
    fn doorbell_rung(&self) -> bool {
        // SAFETY: the doorbell slot is pool memory that lives as long as the machine.
        let d = unsafe { self.doorbell.as_ref() };
        // Ordering: Relaxed; a hint only, run_queue reloads with Acquire.
        d.load(Ordering::Relaxed) != self.seen_doorbell.load(Ordering::Relaxed)
    }

    fn runnable(&self) -> bool {
        // Ordering: Relaxed; the flags are re-read every round.
        self.status.load(Ordering::Relaxed) == status::ACTIVE
            && self.percentage.load(Ordering::Relaxed) & 0xff > 0
            && self.cu_enabled.load(Ordering::Relaxed) > 0
    }

    fn profiling(&self) -> bool {
        // SAFETY: the amd_queue_t page is live while the queue is (constructor contract).
        let p = unsafe { self.queue_properties.as_ref() };
        // Ordering: Relaxed; the producer's release of the packet header orders earlier writes.
        p.load(Ordering::Relaxed) & queue_properties::ENABLE_PROFILING != 0
    }

    /// Marks `index` complete and moves the visible read index over the completed prefix.
    fn complete(&self, cp: &mut CpState, index: u64) {
        if index == cp.next_retire && cp.done.is_empty() {
            cp.next_retire = cp.next_retire.wrapping_add(1);
        } else {
            cp.done.insert(index);
            while cp.done.remove(&cp.next_retire) {
                cp.next_retire = cp.next_retire.wrapping_add(1);
            }
        }
        // SAFETY: constructor contract: the read index is live while the queue is.
        let read = unsafe { self.read_dispatch_id.as_ref() };
        // Ordering: Release pairs with the producer's Acquire room check: slot reuse after the
        // CP's reads of the slot.
        read.store(cp.next_retire, Ordering::Release);
    }

    /// Replaces the ring (UPDATE_QUEUE). The caller holds `cp`.
    pub(crate) fn replace_ring(cp: &mut CpState, ring: AqlRing, va: u64, bytes: u64) {
        cp.ring = ring;
        cp.ring_va = va;
        cp.ring_bytes = bytes;
    }

    /// The launch index's storage, for building a replacement ring.
    pub(crate) fn shadow(&self) -> NonNull<RingIndex> {
        NonNull::from(&*self.shadow)
    }
}

/// A kernel waiting to complete in adversarial mode.
struct Job {
    queue: Arc<HwQueue>,
    index: u64,
    twin: Twin,
    packet: KernelDispatchPacket,
    kernarg: Vec<u8>,
    signal: u64,
    start: u64,
    rounds: u32,
}

/// Per-device command-processor state shared with the driver.
pub(crate) struct Device {
    pub(crate) node: GpuNode,
    queues: Mutex<Vec<Arc<HwQueue>>>,
    /// The device's SDMA queues (served by the same thread, after the AQL queues).
    sdma: Mutex<Vec<Arc<SdmaQueue>>>,
    pub(crate) sdma_stats: Arc<SdmaStats>,
    generation: AtomicU64,
    stop: AtomicBool,
    pub(crate) paused: AtomicBool,
    kill: AtomicBool,
    pub(crate) alive: AtomicBool,
    thread: Mutex<Option<JoinHandle<()>>>,
    pool: Arc<Pool>,
    registry: Arc<Registry>,
    clock: Arc<Clock>,
    adversarial: Option<u64>,
}

impl Device {
    pub(crate) fn new(
        node: GpuNode,
        pool: Arc<Pool>,
        registry: Arc<Registry>,
        clock: Arc<Clock>,
        adversarial: Option<u64>,
        sdma_stats: Arc<SdmaStats>,
    ) -> Device {
        Device {
            node,
            queues: Mutex::new(Vec::new()),
            sdma: Mutex::new(Vec::new()),
            sdma_stats,
            generation: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            paused: AtomicBool::new(false),
            kill: AtomicBool::new(false),
            alive: AtomicBool::new(false),
            thread: Mutex::new(None),
            pool,
            registry,
            clock,
            adversarial,
        }
    }

    fn lock_queues(&self) -> MutexGuard<'_, Vec<Arc<HwQueue>>> {
        self.queues.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_sdma(&self) -> MutexGuard<'_, Vec<Arc<SdmaQueue>>> {
        self.sdma.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a queue and starts the CP thread if needed.
    pub(crate) fn add_queue(self: &Arc<Self>, q: Arc<HwQueue>) {
        self.lock_queues().push(q);
        self.start();
    }

    /// The device's SDMA queues.
    pub(crate) fn sdma_queues(&self) -> Vec<Arc<SdmaQueue>> {
        self.lock_sdma().clone()
    }

    /// Adds an SDMA queue built by `make` from the device's current SDMA queues (so the engine
    /// slot is chosen under the list's lock).
    pub(crate) fn add_sdma_queue(
        self: &Arc<Self>,
        make: impl FnOnce(&[Arc<SdmaQueue>]) -> crate::SysResult<Arc<SdmaQueue>>,
    ) -> crate::SysResult<Arc<SdmaQueue>> {
        let mut list = self.lock_sdma();
        let q = make(&list)?;
        list.push(Arc::clone(&q));
        drop(list);
        // Ordering: Relaxed; a statistics counter.
        self.sdma_stats.queues_created.fetch_add(1, Ordering::Relaxed);
        self.start();
        Ok(q)
    }

    /// Removes an SDMA queue: after this returns the engine no longer touches it.
    pub(crate) fn remove_sdma_queue(&self, q: &Arc<SdmaQueue>) {
        // Ordering: Relaxed, then the ring lock orders everything after the engine's last packet.
        q.status.store(status::DESTROYED, Ordering::Relaxed);
        drop(q.lock_ring());
        self.lock_sdma().retain(|x| !Arc::ptr_eq(x, q));
        // Ordering: Release; see start.
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Publishes a changed queue list and starts the CP thread if needed.
    fn start(self: &Arc<Self>) {
        // Ordering: Release publishes the new list to the CP's Acquire check.
        self.generation.fetch_add(1, Ordering::Release);
        let mut t = self.thread.lock().unwrap_or_else(|e| e.into_inner());
        // Ordering: Relaxed; `kill` is a test hook read by the CP itself.
        if t.is_none() && !self.kill.load(Ordering::Relaxed) {
            let dev = Arc::clone(self);
            // Ordering: Release; the flag is read by observers with Acquire.
            self.alive.store(true, Ordering::Release);
            *t = std::thread::Builder::new()
                .name(format!("kfd-emu-cp-{:x}", self.node.gpu_id))
                .spawn(move || dev.run())
                .ok();
        }
    }

    /// Re-sorts the queues at the next round (a priority changed).
    pub(crate) fn touch(&self) {
        // Ordering: Release; see add_queue.
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Removes a queue (DESTROY_QUEUE): after this returns the CP no longer touches it.
    pub(crate) fn remove_queue(&self, q: &Arc<HwQueue>) {
        // Ordering: Relaxed, then the cp lock below orders everything after the CP's last step.
        q.status.store(status::DESTROYED, Ordering::Relaxed);
        drop(q.lock_cp());
        self.lock_queues().retain(|x| !Arc::ptr_eq(x, q));
        // Ordering: Release; see add_queue.
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Every queue of the device.
    pub(crate) fn queues(&self) -> Vec<Arc<HwQueue>> {
        self.lock_queues().clone()
    }

    /// Stops the thread (machine teardown).
    pub(crate) fn shutdown(&self) {
        // Ordering: Release pairs with the CP's Acquire load.
        self.stop.store(true, Ordering::Release);
        let t = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = t {
            let _ = t.join();
        }
    }

    /// Fault injection: the CP thread dies at its next round (and is not restarted).
    pub(crate) fn kill(&self) {
        // Ordering: Release pairs with the CP's Acquire load.
        self.kill.store(true, Ordering::Release);
        let t = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = t {
            let _ = t.join();
        }
    }

    /// Evicts every queue of the device (reset) or of one process (`vm`).
    pub(crate) fn evict(&self, vm: Option<&Arc<RwLock<Vm>>>) {
        for q in self.queues() {
            if vm.is_none_or(|v| Arc::ptr_eq(v, &q.vm)) {
                let _ = q.status.compare_exchange(status::ACTIVE, status::EVICTED, Ordering::AcqRel, Ordering::Relaxed);
            }
        }
        for q in self.sdma_queues() {
            if vm.is_none_or(|v| Arc::ptr_eq(v, &q.vm)) {
                let _ = q.status.compare_exchange(status::ACTIVE, status::EVICTED, Ordering::AcqRel, Ordering::Relaxed);
            }
        }
    }

    /// Stops an SDMA queue for `f` and reports it.
    fn fail_sdma(&self, q: &SdmaQueue, f: SdmaFailure) {
        match f {
            SdmaFailure::Illegal(ec, msg) => {
                eprintln!(
                    "aqueduct-kfd-emu: SDMA queue {} (gpu {:#x}, engine {} queue {}): {msg}: queue halted",
                    q.queue_id, q.gpu_id, q.engine, q.engine_queue
                );
                // Ordering: Relaxed; diagnostic state.
                q.exception.store(ec, Ordering::Relaxed);
                q.status.store(status::ERROR, Ordering::Relaxed);
            }
            SdmaFailure::Memory(va) => {
                // Ordering: Relaxed; diagnostic state.
                q.exception.store(exception::QUEUE_WAVE_MEMORY_VIOLATION, Ordering::Relaxed);
                self.evict(Some(&q.vm));
                q.events.signal_memory_fault(MemoryExceptionData {
                    failure: MemoryExceptionFailure { not_present: 1, ..Default::default() },
                    va,
                    gpu_id: self.node.gpu_id,
                    error_type: 0,
                });
            }
        }
    }

    fn run(self: Arc<Self>) {
        let mut snapshot: Vec<Arc<HwQueue>> = Vec::new();
        let mut sdma: Vec<Arc<SdmaQueue>> = Vec::new();
        let mut seen_gen = u64::MAX;
        let mut idle = 0u32;
        let mut rng = Rng::new(self.adversarial.unwrap_or(0) ^ u64::from(self.node.gpu_id));
        let mut jobs: Vec<Job> = Vec::new();
        let mut twins = TwinCache::default();
        loop {
            // Ordering: Acquire pairs with shutdown/kill's Release store.
            if self.stop.load(Ordering::Acquire) || self.kill.load(Ordering::Acquire) {
                break;
            }
            // Ordering: Relaxed; pausing is a test hook with no data attached.
            if self.paused.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_micros(50));
                continue;
            }
            // Ordering: Acquire pairs with add/remove_queue's Release increment.
            let g = self.generation.load(Ordering::Acquire);
            if g != seen_gen {
                seen_gen = g;
                snapshot = self.queues();
                // Higher priority first; stable by creation order.
                snapshot.sort_by_key(|q| std::cmp::Reverse(q.priority.load(Ordering::Relaxed)));
                sdma = self.sdma_queues();
            }
            // While idle, only peek at the doorbells; a full pass (which also re-polls barrier
            // dependencies and stalled headers) runs on a doorbell or every 64th idle round.
            if idle > 0
                && idle % 64 != 0
                && jobs.is_empty()
                && !snapshot.iter().any(|q| q.doorbell_rung())
                && !sdma.iter().any(|q| q.doorbell_rung())
            {
                idle = idle.saturating_add(1);
                std::hint::spin_loop();
                if idle >= 20_000 {
                    idle = idle.next_multiple_of(64);
                }
                continue;
            }
            let mut progress = false;
            for q in &snapshot {
                progress |= self.run_queue(q, &mut jobs, &mut rng, &mut twins);
            }
            if !jobs.is_empty() {
                progress |= self.run_jobs(&mut jobs, &mut rng, &mut twins);
            }
            for q in &sdma {
                let (p, failure) = q.run(&self.pool, &self.clock, &self.sdma_stats);
                progress |= p;
                if let Some(f) = failure {
                    self.fail_sdma(q, f);
                }
            }
            if progress {
                idle = 0;
            } else {
                idle = idle.saturating_add(1);
                if idle < 20_000 {
                    std::hint::spin_loop();
                } else if idle < 20_100 {
                    std::thread::yield_now();
                } else {
                    std::thread::sleep(Duration::from_micros(if idle < 21_000 { 20 } else { 200 }));
                }
            }
        }
        // Ordering: Release; observers read the flag with Acquire.
        self.alive.store(false, Ordering::Release);
    }

    fn run_queue(&self, q: &Arc<HwQueue>, jobs: &mut Vec<Job>, rng: &mut Rng, twins: &mut TwinCache) -> bool {
        // The driver changes scheduling parameters under the cp lock (as amdkfd preempts and
        // reloads the queue), so check them after taking it.
        let mut cp = q.lock_cp();
        if !q.runnable() {
            return false;
        }
        // SAFETY: the doorbell slot is pool memory that lives as long as the machine.
        let doorbell = unsafe { q.doorbell.as_ref() };
        // Ordering: Acquire pairs with the producer's doorbell store (after its SeqCst fence), so
        // the published headers up to the value are visible.
        let db = doorbell.load(Ordering::Acquire);
        // Ordering: Relaxed; only this thread writes it, the idle loop compares it.
        q.seen_doorbell.store(db, Ordering::Relaxed);
        if db != cp.last_doorbell {
            cp.last_doorbell = db;
            cp.limit = db.wrapping_add(1);
        }
        if let Some(va) = q.noexec_ring {
            // Ordering: Relaxed; the shadow index is only written by this thread.
            if cp.limit.wrapping_sub(q.shadow.load(Ordering::Relaxed)) as i64 > 0 {
                drop(cp);
                self.fail(q, Failure::NoExecute(va));
                return true;
            }
        }
        let budget = 4 * (1 + q.priority.load(Ordering::Relaxed));
        let max_pending = q.cu_enabled.load(Ordering::Relaxed).clamp(1, 8) as usize;
        let vm = q.vm.read().unwrap_or_else(|e| e.into_inner());
        let mut progress = false;
        let mut failure = None;
        for _ in 0..budget {
            if q.status.load(Ordering::Relaxed) != status::ACTIVE {
                break;
            }
            // Ordering: Relaxed; the shadow index is only written by this thread.
            let index = q.shadow.load(Ordering::Relaxed);
            let mut exec = Exec {
                dev: self,
                q,
                vm: &vm,
                in_flight: cp.pending > 0,
                adversarial: self.adversarial.is_some() && cp.pending < max_pending,
                deferred: None,
                error: None,
                profiling: q.profiling(),
                twins: &mut *twins,
            };
            let step = aql::step(&cp.ring, cp.limit, &mut exec);
            let Exec { deferred, error, .. } = exec;
            match step {
                Step::Retired(i) => {
                    debug_assert_eq!(i, index);
                    progress = true;
                    if let Some(mut job) = deferred {
                        job.index = i;
                        job.rounds = (rng.next() % 4) as u32;
                        cp.pending += 1;
                        jobs.push(job);
                    } else {
                        q.complete(&mut cp, i);
                    }
                    if let Some(err) = error {
                        // A signal or mailbox the CP could not reach: a VM fault after retiring.
                        failure = Some(err);
                        break;
                    }
                }
                Step::Faulted(i, f) => {
                    progress = true;
                    let err = error.unwrap_or(match f {
                        QueueFault::UnsupportedPacket => {
                            let words = cp.ring.read(i).unwrap_or([0; 16]);
                            if Header(words[0] as u16).packet_type().is_none() {
                                Failure::Queue(exception::QUEUE_PACKET_RESERVED)
                            } else {
                                Failure::Queue(exception::QUEUE_PACKET_UNSUPPORTED)
                            }
                        }
                        QueueFault::InvalidDispatch => Failure::Queue(exception::QUEUE_PACKET_DISPATCH_DIM_INVALID),
                        QueueFault::UnknownKernel => Failure::Queue(exception::QUEUE_PACKET_DISPATCH_CODE_INVALID),
                        QueueFault::MemoryViolation => Failure::Memory(0),
                        QueueFault::KernelError => Failure::Queue(2),
                    });
                    failure = Some(err);
                    break;
                }
                Step::Idle | Step::Stalled | Step::Blocked => break,
            }
        }
        drop(vm);
        if let Some(f) = failure {
            self.fail(q, f);
        }
        progress
    }

    fn run_jobs(&self, jobs: &mut Vec<Job>, rng: &mut Rng, twins: &mut TwinCache) -> bool {
        let mut progress = false;
        for j in jobs.iter_mut() {
            j.rounds = j.rounds.saturating_sub(1);
        }
        // Jobs of queues that died are dropped with their completions.
        jobs.retain(|j| {
            let live = j.queue.status.load(Ordering::Relaxed) == status::ACTIVE;
            if !live {
                let mut cp = j.queue.lock_cp();
                cp.pending = cp.pending.saturating_sub(1);
            }
            live
        });
        loop {
            let ready: Vec<usize> = jobs.iter().enumerate().filter(|(_, j)| j.rounds == 0).map(|(i, _)| i).collect();
            if ready.is_empty() {
                break;
            }
            let pick = ready[(rng.next() % ready.len() as u64) as usize];
            let job = jobs.swap_remove(pick);
            progress = true;
            let q = Arc::clone(&job.queue);
            let mut cp = q.lock_cp();
            cp.pending = cp.pending.saturating_sub(1);
            if q.status.load(Ordering::Relaxed) != status::ACTIVE {
                continue;
            }
            let vm = q.vm.read().unwrap_or_else(|e| e.into_inner());
            let mut exec = Exec {
                dev: self,
                q: &q,
                vm: &vm,
                in_flight: false,
                adversarial: false,
                deferred: None,
                error: None,
                profiling: q.profiling(),
                twins: &mut *twins,
            };
            match exec.run_twin(&job.twin, &job.packet, &job.kernarg) {
                Ok(()) => {
                    if job.signal != 0 {
                        let end = self.clock.gpu_ticks();
                        exec.release(&job.packet);
                        exec.finish_signal(job.signal, job.start, end);
                    }
                    let err = exec.error.take();
                    drop(vm);
                    q.complete(&mut cp, job.index);
                    if let Some(e) = err {
                        drop(cp);
                        self.fail(&q, e);
                    }
                }
                Err(e) => {
                    drop(vm);
                    drop(cp);
                    self.fail(&q, Failure::from(e));
                }
            }
        }
        progress
    }

    /// Stops a queue for `f` and reports it.
    fn fail(&self, q: &HwQueue, f: Failure) {
        match f {
            Failure::Hang => {
                // Ordering: Relaxed; the status is only a scheduling flag.
                q.status.store(status::HUNG, Ordering::Relaxed);
            }
            Failure::Queue(ec) => {
                q.status.store(status::ERROR, Ordering::Relaxed);
                q.exception.store(ec, Ordering::Relaxed);
                self.report_queue_exception(q, ec);
            }
            Failure::Memory(va) | Failure::NoExecute(va) => {
                q.exception.store(exception::QUEUE_WAVE_MEMORY_VIOLATION, Ordering::Relaxed);
                self.evict(Some(&q.vm));
                let failure = if matches!(f, Failure::NoExecute(_)) {
                    MemoryExceptionFailure { no_execute: 1, ..Default::default() }
                } else {
                    MemoryExceptionFailure { not_present: 1, ..Default::default() }
                };
                q.events.signal_memory_fault(MemoryExceptionData {
                    failure,
                    va,
                    gpu_id: self.node.gpu_id,
                    error_type: 0,
                });
            }
        }
    }

    /// The KFD ≥ 1.13 exception path: OR the mask into `*err_payload_addr`, set `err_event_id`.
    fn report_queue_exception(&self, q: &HwQueue, ec: u32) {
        let vm = q.vm.read().unwrap_or_else(|e| e.into_inner());
        let Ok(h) = vm.translate(&self.pool, q.gpu_id, q.cwsr_va, size_of::<CwsrHeader>() as u64) else {
            return;
        };
        // SAFETY: translate checked 40 live bytes; read_unaligned copies the header out.
        let header = unsafe { std::ptr::read_unaligned(h.cast::<CwsrHeader>()) };
        if header.err_payload_addr != 0 {
            if let Ok(p) = vm.translate(&self.pool, q.gpu_id, header.err_payload_addr, 8) {
                if p as usize % 8 == 0 {
                    // SAFETY: 8 live, aligned bytes inside a mapped BO.
                    let word = unsafe { AtomicU64::from_ptr(p.cast()) };
                    // Ordering: Release, so a host that sees the bit sees the queue's state.
                    word.fetch_or(exception::mask(ec), Ordering::Release);
                }
            }
        }
        drop(vm);
        if header.err_event_id != 0 {
            q.events.interrupt(header.err_event_id);
        }
        self.report_legacy(q, ec);
    }

    /// What the CP firmware itself does on a queue error (the path ROCr uses when the driver
    /// has no exception reporting): store a legacy error code into the `amd_queue_t`'s
    /// `queue_inactive_signal` and post its event (kfd-aql.md §7).
    fn report_legacy(&self, q: &HwQueue, ec: u32) {
        let code: i64 = match ec {
            exception::QUEUE_PACKET_DISPATCH_DIM_INVALID => 0x2,
            exception::QUEUE_PACKET_DISPATCH_GROUP_SEGMENT_SIZE_INVALID => 0x4,
            exception::QUEUE_PACKET_DISPATCH_CODE_INVALID => 0x8,
            exception::QUEUE_PACKET_RESERVED | exception::QUEUE_PACKET_UNSUPPORTED => 0x20,
            exception::QUEUE_PACKET_DISPATCH_WORK_GROUP_SIZE_INVALID => 0x40,
            exception::QUEUE_WAVE_MEMORY_VIOLATION => 0x2000_0000,
            _ => 0x4000_0000,
        };
        // SAFETY: queue_properties points at amd_queue_t + 180 inside the live amd_queue_t
        // (constructor contract); the signal handle at + 192 lies in the same 256-byte struct.
        let handle = unsafe {
            let base = self_queue_base(q);
            AtomicU64::from_ptr(base.add(192).cast()).load(Ordering::Acquire)
        };
        if handle == 0 {
            return;
        }
        let vm = q.vm.read().unwrap_or_else(|e| e.into_inner());
        let Ok(p) = vm.translate(&self.pool, q.gpu_id, handle, 64) else { return };
        if p as usize % 64 != 0 {
            return;
        }
        // SAFETY: 64 live, aligned bytes inside a mapped BO; AmdSignal is all atomics.
        let sig = unsafe { &*p.cast::<AmdSignal>() };
        // Ordering: Release, so the host that sees the code sees the queue's state.
        sig.value.store(code, Ordering::Release);
        // Ordering: Relaxed; mailbox and id are set up before the signal is used.
        let mailbox = sig.event_mailbox_ptr.load(Ordering::Relaxed);
        if mailbox != 0 {
            let id = sig.event_id.load(Ordering::Relaxed);
            if let Ok(m) = vm.translate(&self.pool, q.gpu_id, mailbox, 8) {
                if m as usize % 8 == 0 {
                    // SAFETY: 8 live, aligned bytes inside a mapped BO.
                    unsafe { AtomicU64::from_ptr(m.cast()) }.store(u64::from(id), Ordering::Release);
                    drop(vm);
                    q.events.interrupt(id);
                }
            }
        }
    }
}

/// Device-view address of a queue's `amd_queue_t`.
///
/// # Safety
/// The queue's `queue_properties` pointer must be live (it is while the queue exists).
unsafe fn self_queue_base(q: &HwQueue) -> *mut u8 {
    q.queue_properties.as_ptr().cast::<u8>().wrapping_sub(crate::abi::AMD_QUEUE_PROPERTIES as usize)
}

/// Why a queue stopped, as the CP reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    /// Queue exception with this KFD code.
    Queue(u32),
    /// VM fault at this address.
    Memory(u64),
    /// Instruction fetch from a non-executable page at this address.
    NoExecute(u64),
    /// The kernel never completes.
    Hang,
}

impl From<KernelError> for Failure {
    fn from(e: KernelError) -> Failure {
        match e {
            KernelError::MemoryFault(va) => Failure::Memory(va),
            KernelError::Hang => Failure::Hang,
            KernelError::Trap => Failure::Queue(2),
        }
    }
}

/// The executor the step calls into.
struct Exec<'a> {
    dev: &'a Device,
    q: &'a Arc<HwQueue>,
    vm: &'a Vm,
    in_flight: bool,
    /// Defer a barrier-less dispatch (adversarial mode with room in the pending set).
    adversarial: bool,
    deferred: Option<Job>,
    error: Option<Failure>,
    profiling: bool,
    twins: &'a mut TwinCache,
}

/// The CP thread's own kernel-object → twin cache (no lock, no SipHash on the hot path).
#[derive(Default)]
struct TwinCache {
    generation: u64,
    map: std::collections::HashMap<u64, Twin, std::hash::BuildHasherDefault<IdHasher>>,
}

/// Kernel objects are 64-byte aligned addresses: mixing the bits is hash enough.
#[derive(Default)]
struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (v >> 6).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

impl Exec<'_> {
    fn signal(&self, handle: u64) -> Result<&AmdSignal, u64> {
        let p = self.vm.translate(&self.dev.pool, self.q.gpu_id, handle, 64)?;
        if p as usize % 64 != 0 {
            return Err(handle);
        }
        // SAFETY: 64 live, 64-byte aligned bytes inside a mapped BO; AmdSignal is all atomics.
        Ok(unsafe { &*p.cast::<AmdSignal>() })
    }

    fn acquire(&self, header: u16) {
        if Header(header).acquire_bits() != 0 {
            fence(Ordering::Acquire);
        }
    }

    fn release(&self, packet: &KernelDispatchPacket) {
        if Header(packet.header).release_bits() != 0 {
            fence(Ordering::Release);
        }
    }

    fn finish_signal(&mut self, handle: u64, start: u64, end: u64) {
        let sig = match self.signal(handle) {
            Ok(s) => s,
            Err(va) => {
                self.error = Some(Failure::Memory(va));
                return;
            }
        };
        if self.profiling {
            // Ordering: Relaxed; the AcqRel decrement below publishes the timestamps.
            sig.start_ts.store(start, Ordering::Relaxed);
            sig.end_ts.store(end, Ordering::Relaxed);
        }
        // Ordering: AcqRel: the packet's effects happen-before any waiter that sees the value.
        sig.value.fetch_sub(1, Ordering::AcqRel);
        // Ordering: Relaxed; mailbox and id are set up before the signal is used.
        let mailbox = sig.event_mailbox_ptr.load(Ordering::Relaxed);
        if mailbox != 0 {
            let id = sig.event_id.load(Ordering::Relaxed);
            match self.vm.translate(&self.dev.pool, self.q.gpu_id, mailbox, 8) {
                Ok(p) if p as usize % 8 == 0 => {
                    // SAFETY: 8 live, aligned bytes inside a mapped BO.
                    let slot = unsafe { AtomicU64::from_ptr(p.cast()) };
                    // Ordering: Release, as the CP's mailbox write.
                    slot.store(u64::from(id), Ordering::Release);
                    self.q.events.interrupt(id);
                }
                _ => self.error = Some(Failure::Memory(mailbox)),
            }
        }
    }

    fn validate(&self, p: &KernelDispatchPacket) -> Result<(), u32> {
        let dims = p.setup & 3;
        if dims == 0 {
            return Err(exception::QUEUE_PACKET_DISPATCH_DIM_INVALID);
        }
        let wg = [p.workgroup_size_x, p.workgroup_size_y, p.workgroup_size_z].map(u32::from);
        let grid = [p.grid_size_x, p.grid_size_y, p.grid_size_z];
        if grid.contains(&0) {
            return Err(exception::QUEUE_PACKET_DISPATCH_DIM_INVALID);
        }
        // The product in u64: three u16 sizes overflow u32.
        if wg.contains(&0) || wg.iter().map(|&w| u64::from(w)).product::<u64>() > 1024 {
            return Err(exception::QUEUE_PACKET_DISPATCH_WORK_GROUP_SIZE_INVALID);
        }
        if u64::from(p.group_segment_size) > u64::from(self.dev.node.props.lds_size_in_kb) * 1024 {
            return Err(exception::QUEUE_PACKET_DISPATCH_GROUP_SEGMENT_SIZE_INVALID);
        }
        Ok(())
    }

    fn find_twin(&mut self, object: u64) -> Option<Twin> {
        // Ordering: Acquire pairs with register_at's Release increment.
        let g = self.dev.registry.generation.load(Ordering::Acquire);
        if g != self.twins.generation {
            self.twins.map.clear();
            self.twins.generation = g;
        }
        if let Some(t) = self.twins.map.get(&object) {
            return Some(t.clone());
        }
        let t = self.find_twin_slow(object)?;
        self.twins.map.insert(object, t.clone());
        Some(t)
    }

    fn find_twin_slow(&self, object: u64) -> Option<Twin> {
        if let Some(t) = self.dev.registry.lookup(object) {
            return Some(t);
        }
        let p = self.vm.translate(&self.dev.pool, self.q.gpu_id, object, 64).ok()?;
        let mut kd = [0u8; 64];
        // SAFETY: 64 live bytes inside a mapped BO.
        unsafe { std::ptr::copy_nonoverlapping(p, kd.as_mut_ptr(), 64) };
        let entry_off = i64::from_le_bytes(kd[16..24].try_into().ok()?);
        let entry = object.checked_add_signed(entry_off)?;
        let code_at = |len: usize| {
            let p = self.vm.translate(&self.dev.pool, self.q.gpu_id, entry, len as u64).ok()?;
            let mut v = vec![0u8; len];
            // SAFETY: `len` live bytes inside a mapped BO.
            unsafe { std::ptr::copy_nonoverlapping(p, v.as_mut_ptr(), len) };
            Some(v)
        };
        let twin = match self.dev.registry.match_descriptor(&kd, code_at) {
            Some(t) => t,
            None => self.name_kernel(object, &kd, code_at(32).unwrap_or_default())?,
        };
        self.dev.registry.register_at(object, twin.clone());
        Some(twin)
    }

    /// Names a kernel a foreign loader placed (ROCr blit fingerprint or `.kd` symbol) and
    /// binds it to the twin registered under that name. A kernel that cannot be named or has no
    /// twin is reported on stderr and fails its dispatch.
    fn name_kernel(&self, object: u64, kd: &[u8; 64], code: Vec<u8>) -> Option<Twin> {
        if let Some(t) = crate::naming::rocr_blit(kd, &code) {
            return Some(t);
        }
        let mem = MemView { vm: self.vm, pool: &self.dev.pool, gpu_id: self.q.gpu_id };
        let Some((symbol, meta)) = crate::naming::elf_kernel(&mem, object) else {
            eprintln!(
                "aqueduct-kfd-emu: cannot name the kernel at {object:#x} (no ELF image or symbol): dispatch fails"
            );
            return None;
        };
        let name = symbol.strip_suffix(".kd").unwrap_or(&symbol);
        let Some(mut twin) = self.dev.registry.by_name(name) else {
            eprintln!("aqueduct-kfd-emu: no host twin for kernel `{name}` at {object:#x}: dispatch fails");
            return None;
        };
        if let Some(m) = meta {
            twin.kernarg_size = twin.kernarg_size.max(m.kernarg_segment_size);
            twin.args = m.args.into();
        }
        if twin.kernarg_size == 0 {
            twin.kernarg_size = u32::from_le_bytes([kd[8], kd[9], kd[10], kd[11]]);
        }
        Some(twin)
    }

    fn run_twin(&self, twin: &Twin, p: &KernelDispatchPacket, kernarg: &[u8]) -> Result<(), KernelError> {
        let mem = MemView { vm: self.vm, pool: &self.dev.pool, gpu_id: self.q.gpu_id };
        let grid = [p.grid_size_x, p.grid_size_y, p.grid_size_z];
        let wg = [p.workgroup_size_x, p.workgroup_size_y, p.workgroup_size_z].map(u32::from);
        let count = [0, 1, 2].map(|i| grid[i].div_ceil(wg[i]));
        let ctx = KernelCtx {
            packet: *p,
            grid,
            workgroup_size: wg,
            workgroup_count: count,
            kernarg,
            args: &twin.args,
            mem: &mem,
        };
        for z in 0..count[2] {
            for y in 0..count[1] {
                for x in 0..count[0] {
                    (twin.f)(&ctx, [x, y, z])?;
                }
            }
        }
        Ok(())
    }
}

impl PacketExecutor for Exec<'_> {
    fn read_signal(&mut self, handle: u64, _mask: i64) -> Option<i64> {
        let p = match self.vm.translate(&self.dev.pool, self.q.gpu_id, handle.wrapping_add(8), 8) {
            Ok(p) if p as usize % 8 == 0 => p,
            _ => {
                self.error = Some(Failure::Memory(handle));
                return None;
            }
        };
        // SAFETY: 8 live, aligned bytes inside a mapped BO.
        let v = unsafe { AtomicI64::from_ptr(p.cast()) };
        // Ordering: Acquire pairs with the AcqRel decrement / Release store that satisfied it.
        Some(v.load(Ordering::Acquire))
    }

    fn complete_signal(&mut self, handle: u64, start: u64, end: u64) {
        if let Some(job) = self.deferred.as_mut() {
            job.signal = handle;
            return;
        }
        fence(Ordering::Release);
        self.finish_signal(handle, start, end);
    }

    fn dispatch(&mut self, packet: &KernelDispatchPacket, kernarg: u64) -> Outcome {
        self.acquire(packet.header);
        if let Err(ec) = self.validate(packet) {
            self.error = Some(Failure::Queue(ec));
            return Outcome::Fault(QueueFault::InvalidDispatch);
        }
        let Some(twin) = self.find_twin(packet.kernel_object) else {
            return Outcome::Fault(QueueFault::UnknownKernel);
        };
        let len = twin.kernarg_size as usize;
        let mut small = [0u8; 256];
        let mut large = Vec::new();
        let args: &mut [u8] = if len <= small.len() {
            &mut small[..len]
        } else {
            large.resize(len, 0);
            &mut large
        };
        if !args.is_empty() {
            match self.vm.translate(&self.dev.pool, self.q.gpu_id, kernarg, args.len() as u64) {
                // SAFETY: `args.len()` live bytes inside a mapped BO.
                Ok(p) => unsafe { std::ptr::copy_nonoverlapping(p, args.as_mut_ptr(), args.len()) },
                Err(va) => {
                    self.error = Some(Failure::Memory(va));
                    return Outcome::Fault(QueueFault::MemoryViolation);
                }
            }
        }
        let args: &[u8] = args;
        if self.adversarial && !Header(packet.header).barrier() {
            self.deferred = Some(Job {
                queue: Arc::clone(self.q),
                index: 0,
                twin,
                packet: *packet,
                kernarg: args.to_vec(),
                signal: 0,
                start: self.dev.clock.gpu_ticks(),
                rounds: 0,
            });
            return Outcome::Done;
        }
        match self.run_twin(&twin, packet, args) {
            Ok(()) => {
                self.release(packet);
                Outcome::Done
            }
            Err(e) => {
                self.error = Some(Failure::from(e));
                Outcome::Fault(match e {
                    KernelError::MemoryFault(_) => QueueFault::MemoryViolation,
                    _ => QueueFault::KernelError,
                })
            }
        }
    }

    fn timestamp(&mut self) -> u64 {
        // Only profiling queues get timestamps; skip the clock read otherwise.
        if self.profiling {
            self.dev.clock.gpu_ticks()
        } else {
            0
        }
    }

    fn in_flight(&self) -> bool {
        self.in_flight
    }
}

/// A small seeded generator (SplitMix64) for adversarial scheduling.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}
