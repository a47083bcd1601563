//! One emulated GPU as its engines share it: the node, the memory pool, the twin registry and
//! clock, the lists of AQL and SDMA queues, and what happens when a queue fails
//! (docs/kfd-aql.md §7):
//!
//! - an invalid packet or dispatch halts the queue: the exception mask `1 << (ec - 1)` is ORed
//!   into the 64-bit word at the CWSR header's `err_payload_addr`, the header's `err_event_id`
//!   is set, and the legacy `queue_inactive_signal` of the `amd_queue_t` gets the firmware's
//!   error code; the failing packet is neither completed nor retired;
//! - a kernel memory fault evicts every queue of the process on the device and sets the
//!   process's MEMORY events with the faulting address;
//! - a hung kernel leaves its queue stuck forever;
//! - a device reset evicts every queue of the device.
//!
//! The threads that run the engines live in `scheduler`; the packet processor in
//! `packet_processor`; the SDMA engine in `sdma`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use aqueduct::AmdSignal;

use crate::abi::{exception, CwsrHeader, MemoryExceptionData, MemoryExceptionFailure};
use crate::aql_queue::AqlQueue;
use crate::hw::{status, Clock};
use crate::memory::{KernelError, MemView, Pool, Translation, VmLock};
use crate::registry::Registry;
use crate::sdma::{SdmaFailure, SdmaQueue, SdmaStats};
use crate::topology::GpuNode;

/// The legacy queue code of a scratch request ("insufficient scratch", wave64): ROCr's
/// `DynamicScratchHandler` allocates the dispatch's scratch and stores 0 to resume the queue.
const SCRATCH_REQUEST: i64 = 1;

/// Why an AQL queue stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
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

/// Per-device state shared by the engines and the driver.
pub(crate) struct Device {
    pub(crate) node: GpuNode,
    pub(crate) pool: Arc<Pool>,
    pub(crate) registry: Arc<Registry>,
    pub(crate) clock: Arc<Clock>,
    /// Adversarial scheduling seed.
    pub(crate) adversarial: Option<u64>,
    /// Compute-unit workers.
    pub(crate) cus: u32,
    queues: Mutex<Vec<Arc<AqlQueue>>>,
    sdma: Mutex<Vec<Arc<SdmaQueue>>>,
    pub(crate) sdma_stats: Arc<SdmaStats>,
    /// Kernel dispatches launched from queues since destroyed.
    launched_gone: AtomicU64,
    /// Bumped when a queue list or a priority changes.
    generation: AtomicU64,
    next_order: AtomicU64,
    /// Test hook: the packet processor processes no AQL queue while set ([`Device::pause`]).
    paused: AtomicBool,
}

/// What a new device needs from the machine.
pub(crate) struct DeviceParts {
    pub(crate) pool: Arc<Pool>,
    pub(crate) registry: Arc<Registry>,
    pub(crate) clock: Arc<Clock>,
    pub(crate) adversarial: Option<u64>,
    pub(crate) cus: u32,
    pub(crate) sdma_stats: Arc<SdmaStats>,
}

impl Device {
    pub(crate) fn new(node: GpuNode, p: DeviceParts) -> Device {
        Device {
            node,
            pool: p.pool,
            registry: p.registry,
            clock: p.clock,
            adversarial: p.adversarial,
            cus: p.cus,
            queues: Mutex::new(Vec::new()),
            sdma: Mutex::new(Vec::new()),
            sdma_stats: p.sdma_stats,
            launched_gone: AtomicU64::new(0),
            generation: AtomicU64::new(0),
            next_order: AtomicU64::new(0),
            paused: AtomicBool::new(false),
        }
    }

    /// Pauses or resumes the packet processor (a test hook). A pause holds once this returns: a
    /// look at an AQL queue that began before it ends first (the processor checks the flag
    /// again under each queue's ring lock, which this takes in turn), and none begins after it.
    pub(crate) fn pause(&self, paused: bool) {
        // Ordering: Release, then each ring lock's release: a processor that takes a ring lock
        // after this sees the flag.
        self.paused.store(paused, Ordering::Release);
        if paused {
            for q in self.queues() {
                drop(q.lock_ring());
            }
        }
    }

    /// Whether the packet processor is paused ([`Device::pause`]).
    pub(crate) fn is_paused(&self) -> bool {
        // Ordering: Acquire pairs with `pause`'s Release store (through the ring locks).
        self.paused.load(Ordering::Acquire)
    }

    fn lock_queues(&self) -> MutexGuard<'_, Vec<Arc<AqlQueue>>> {
        self.queues.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_sdma(&self) -> MutexGuard<'_, Vec<Arc<SdmaQueue>>> {
        self.sdma.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The compute-unit workers a CU mask allows. CU `c` runs on worker `c % cus`: the device's
    /// CUs are dealt round-robin over its workers, so a mask of consecutive CUs spreads over
    /// every worker and a mask of CUs `w, w + cus, w + 2·cus, …` pins a queue to worker `w`.
    pub(crate) fn workers_for(&self, enabled_cus: impl Iterator<Item = u32>) -> u64 {
        let cus = self.cus.clamp(1, 64);
        enabled_cus.fold(0u64, |m, c| m | 1 << (c % cus))
    }

    /// Every worker.
    pub(crate) fn all_workers(&self) -> u64 {
        self.workers_for(0..self.cus.clamp(1, 64))
    }

    /// An order number for a new queue.
    pub(crate) fn next_order(&self) -> u64 {
        // Ordering: Relaxed; a unique counter.
        self.next_order.fetch_add(1, Ordering::Relaxed)
    }

    /// The queue list's generation.
    pub(crate) fn generation(&self) -> u64 {
        // Ordering: Acquire pairs with `touch`'s Release increment.
        self.generation.load(Ordering::Acquire)
    }

    /// Re-sorts the queues at the packet processor's next round (a list or a priority changed).
    pub(crate) fn touch(&self) {
        // Ordering: Release publishes the new list to `generation`'s Acquire load.
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Adds a queue (the caller starts the engine).
    pub(crate) fn add_queue(&self, q: Arc<AqlQueue>) {
        self.lock_queues().push(q);
        self.touch();
    }

    /// Kernel dispatches launched on the device so far.
    pub(crate) fn launched(&self) -> u64 {
        // Ordering: Relaxed; a statistics counter (destroy adds a queue's count under its lock).
        let gone = self.launched_gone.load(Ordering::Relaxed);
        gone + self.queues().iter().map(|q| q.lock_ring().launched).sum::<u64>()
    }

    /// Every AQL queue of the device.
    pub(crate) fn queues(&self) -> Vec<Arc<AqlQueue>> {
        self.lock_queues().clone()
    }

    /// The device's SDMA queues.
    pub(crate) fn sdma_queues(&self) -> Vec<Arc<SdmaQueue>> {
        self.lock_sdma().clone()
    }

    /// Adds an SDMA queue built by `make` from the device's current SDMA queues (so the engine
    /// slot is chosen under the list's lock).
    pub(crate) fn add_sdma_queue(
        &self,
        make: impl FnOnce(&[Arc<SdmaQueue>]) -> crate::SysResult<Arc<SdmaQueue>>,
    ) -> crate::SysResult<Arc<SdmaQueue>> {
        let mut list = self.lock_sdma();
        let q = make(&list)?;
        list.push(Arc::clone(&q));
        drop(list);
        // Ordering: Relaxed; a statistics counter.
        self.sdma_stats.queues_created.fetch_add(1, Ordering::Relaxed);
        self.touch();
        Ok(q)
    }

    /// Removes a queue (DESTROY_QUEUE): after this returns no engine touches its memory; its
    /// packets not yet launched are dropped, work-groups already running finish unobserved.
    pub(crate) fn remove_queue(&self, q: &Arc<AqlQueue>) {
        // Ordering: Relaxed, then the locks below order everything after the engines' last use.
        q.status.store(status::DESTROYED, Ordering::Relaxed);
        let mut ring = q.lock_ring();
        // Held dispatches (adversarial mode) are dropped with the queue.
        ring.held.clear();
        // Ordering: Relaxed; a statistics counter.
        self.launched_gone.fetch_add(ring.launched, Ordering::Relaxed);
        drop(ring);
        q.fence_retire();
        self.lock_queues().retain(|x| !Arc::ptr_eq(x, q));
        self.touch();
    }

    /// Removes an SDMA queue: after this returns the engine no longer touches it.
    pub(crate) fn remove_sdma_queue(&self, q: &Arc<SdmaQueue>) {
        // Ordering: Relaxed, then the ring lock orders everything after the engine's last packet.
        q.status.store(status::DESTROYED, Ordering::Relaxed);
        drop(q.lock_ring());
        self.lock_sdma().retain(|x| !Arc::ptr_eq(x, q));
        self.touch();
    }

    /// Evicts every queue of the device (reset) or of one process (`vm`).
    pub(crate) fn evict(&self, vm: Option<&Arc<VmLock>>) {
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

    /// Stops an AQL queue for `f` and reports it (once: a queue that already stopped stays as
    /// it is).
    pub(crate) fn fail(&self, q: &AqlQueue, f: Failure) {
        match f {
            Failure::Hang => {
                let _ = q.status.compare_exchange(status::ACTIVE, status::HUNG, Ordering::AcqRel, Ordering::Relaxed);
            }
            Failure::Queue(ec) => {
                if q.status.compare_exchange(status::ACTIVE, status::ERROR, Ordering::AcqRel, Ordering::Relaxed).is_ok()
                {
                    // Ordering: Relaxed; diagnostic state, read after the status.
                    q.exception.store(ec, Ordering::Relaxed);
                    self.report_queue_exception(q, ec);
                }
            }
            Failure::Memory(va) | Failure::NoExecute(va) => {
                if !q.active() {
                    return;
                }
                // Ordering: Relaxed; diagnostic state.
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

    /// Stops an SDMA queue for `f` and reports it.
    pub(crate) fn fail_sdma(&self, q: &SdmaQueue, f: SdmaFailure) {
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

    /// The KFD ≥ 1.13 exception path: OR the mask into `*err_payload_addr`, set `err_event_id`.
    fn report_queue_exception(&self, q: &AqlQueue, ec: u32) {
        let tr = q.vm.translation(&self.pool, q.gpu_id);
        let mem = MemView::new(&tr);
        let mut raw = [0u8; size_of::<CwsrHeader>()];
        if mem.read(q.cwsr_va, &mut raw).is_err() {
            return;
        }
        // SAFETY: `raw` holds a whole CwsrHeader (plain integers, any bit pattern is valid).
        let header = unsafe { std::ptr::read_unaligned(raw.as_ptr().cast::<CwsrHeader>()) };
        if header.err_payload_addr != 0 {
            if let Ok(p) = tr.translate(header.err_payload_addr, 8) {
                if p as usize % 8 == 0 {
                    // SAFETY: 8 live, aligned bytes inside a mapped BO.
                    let word = unsafe { AtomicU64::from_ptr(p.cast()) };
                    // Ordering: Release, so a host that sees the bit sees the queue's state.
                    word.fetch_or(exception::mask(ec), Ordering::Release);
                }
            }
        }
        if header.err_event_id != 0 {
            q.events.interrupt(header.err_event_id);
        }
        self.report_legacy(q, ec);
    }

    /// What the CP firmware itself does on a queue error (the path ROCr uses when the driver
    /// has no exception reporting): store a legacy error code into the `amd_queue_t`'s
    /// `queue_inactive_signal` and post its event (docs/kfd-aql.md §7).
    fn report_legacy(&self, q: &AqlQueue, ec: u32) {
        let code: i64 = match ec {
            exception::QUEUE_PACKET_DISPATCH_DIM_INVALID => 0x2,
            exception::QUEUE_PACKET_DISPATCH_GROUP_SEGMENT_SIZE_INVALID => 0x4,
            exception::QUEUE_PACKET_DISPATCH_CODE_INVALID => 0x8,
            exception::QUEUE_PACKET_RESERVED | exception::QUEUE_PACKET_UNSUPPORTED => 0x20,
            exception::QUEUE_PACKET_DISPATCH_WORK_GROUP_SIZE_INVALID => 0x40,
            exception::QUEUE_WAVE_MEMORY_VIOLATION => 0x2000_0000,
            _ => 0x4000_0000,
        };
        self.signal_inactive(q, code);
    }

    /// The queue's `queue_inactive_signal`, if its `amd_queue_t` names one the device can
    /// reach (a 64-byte aligned `amd_signal_t`).
    fn inactive_signal<'t>(&self, q: &AqlQueue, tr: &'t Translation) -> Option<&'t AmdSignal> {
        // SAFETY: the amd_queue_t is live while the queue is (its constructor's contract); the
        // signal handle at +192 lies inside the 256-byte struct and is 8-byte aligned.
        let handle = unsafe { AtomicU64::from_ptr(q.amd_queue().add(192).cast()) }.load(Ordering::Acquire);
        if handle == 0 {
            return None;
        }
        let p = tr.translate(handle, 64).ok()?;
        if p as usize % 64 != 0 {
            return None;
        }
        // SAFETY: 64 live, aligned bytes inside a mapped BO, which the translation keeps
        // mapped for its life; AmdSignal is all atomics.
        Some(unsafe { &*p.cast::<AmdSignal>() })
    }

    /// Stores `code` into the queue's `queue_inactive_signal` and posts the signal's event, as
    /// the CP firmware does; `false` when the queue has no such signal.
    fn signal_inactive(&self, q: &AqlQueue, code: i64) -> bool {
        let tr = q.vm.translation(&self.pool, q.gpu_id);
        let Some(sig) = self.inactive_signal(q, &tr) else { return false };
        // Ordering: Release, so the host that sees the code sees the queue's state.
        sig.value.store(code, Ordering::Release);
        // Ordering: Relaxed; mailbox and id are set up before the signal is used.
        let mailbox = sig.event_mailbox_ptr.load(Ordering::Relaxed);
        if mailbox != 0 {
            let id = sig.event_id.load(Ordering::Relaxed);
            if let Ok(m) = tr.translate(mailbox, 8) {
                if m as usize % 8 == 0 {
                    // SAFETY: 8 live, aligned bytes inside a mapped BO.
                    unsafe { AtomicU64::from_ptr(m.cast()) }.store(u64::from(id), Ordering::Release);
                    q.events.interrupt(id);
                }
            }
        }
        true
    }

    /// Asks the queue's runtime for scratch, as the CP firmware does when a dispatch needs more
    /// private memory per wave than the queue's `compute_tmpring_size` gives (docs/rocm-on-emu.md
    /// §4.7): the code 1 ("insufficient scratch") in `queue_inactive_signal` and its event.
    /// `false` when the queue has no such signal (nobody to ask).
    pub(crate) fn request_scratch(&self, q: &AqlQueue) -> bool {
        self.signal_inactive(q, SCRATCH_REQUEST)
    }

    /// Whether the runtime has answered a scratch request: `queue_inactive_signal` back at 0
    /// (ROCr stores 0 once the queue's scratch is set up, and leaves another value on failure,
    /// when it also suspends the queue).
    pub(crate) fn scratch_granted(&self, q: &AqlQueue, tr: &Translation) -> bool {
        // Ordering: Acquire pairs with the runtime's release store of 0 after it wrote the
        // queue's scratch fields.
        self.inactive_signal(q, tr).is_none_or(|s| s.value.load(Ordering::Acquire) == 0)
    }
}
