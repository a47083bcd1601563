//! The packet processor: the emulator's reading of the AQL rules (docs/kfd-aql.md §3, §3.4, §9
//! "packet processor"), written for the emulator alone. It shares the packet *layouts* with core
//! (`aqueduct::aql`'s packet structs), never core's processing step: running core's packets here
//! checks core's producer against an independent consumer (docs/architecture.md rule 3).
//!
//! # The rules, as implemented
//!
//! For each runnable queue (active, non-zero percentage, at least one CU enabled), in priority
//! order, the processor reads the doorbell — the index of the last published packet (§2) — and
//! looks at packets from its launch index up to the highest value it has read (and, after a
//! doorbell write, past it while the next slot holds a published packet: "Doorbells from several
//! producers" below):
//!
//! 1. A slot whose type is INVALID stalls the queue (it is re-read on later rounds).
//! 2. Header bits 7:0 give the type; 6..=255 are reserved (queue error `PACKET_RESERVED`);
//!    an agent dispatch or an unknown AMD vendor format is `PACKET_UNSUPPORTED`.
//! 3. Bit 8, the barrier bit: the packet is not launched while any earlier packet of the queue is
//!    in flight. Without it, a packet starts while earlier ones still run.
//! 4. Bits 10:9 (acquire scope): an acquire fence before the packet becomes active. Bits 12:11
//!    (release scope): a release fence after it completes, before its completion signal.
//! 5. A kernel dispatch is validated (dimensions in `setup` bits 1:0 are 1..=3; no zero size;
//!    a work-group of at most 1024 work-items; group segment within the LDS), its twin resolved,
//!    its kernel arguments copied, and it is *launched*: handed to the work-group scheduler
//!    ([`LaunchSink`]), which completes it when its last work-group ends. A dispatch of one
//!    work-group that nothing else of its queue may start beside — the next packet carries the
//!    barrier bit, or is not announced yet — runs on this thread at once, on a worker claimed
//!    as for any other ([`LaunchSink::run_here`]), and the queue goes on with the packet after
//!    it: a chain of dependent dispatches costs no trip through the work-group scheduler and
//!    no round over the other queues per packet (at most `RUN_HERE_PER_VISIT` per visit).
//!    Meanwhile the queue's ring is free, and another engine thread that takes the
//!    packet-processor role sees the dispatch in flight (`running_here`).
//! 6. A barrier-AND completes when every non-null dependency signal is 0, a barrier-OR when any
//!    is (or when it has none); an AMD barrier-value packet when `(value & mask) cond expected`.
//!    Until then it blocks its queue's head only: later packets of that queue wait, other queues
//!    run. A PM4 indirect buffer is accepted and does nothing.
//! 7. `read_dispatch_id` moves in order on completion (`aql_queue`'s two read indices), at most
//!    `WINDOW` packets behind the launch index; a retired slot's header is rewritten to INVALID.
//!
//! When the announced packets are all launched and a packet ran on this thread during the visit,
//! the doorbell is read again before the queue is left: a producer on the device (the
//! conditional-graph scheduler, docs/conditional-graphs.md) rings it from the kernel that just
//! ran, and its next packets are taken at once.
//!
//! # Doorbells from several producers
//!
//! A queue that several threads submit to (HSA_QUEUE_TYPE_MULTI; ROCclr shares one hardware
//! queue among several streams) gets its doorbell written with any value (docs/kfd-aql.md §2):
//! each producer stores the index of its own last packet, so a producer that is slow between
//! its header store and its doorbell store overwrites a later producer's higher value with its
//! lower one. The processor therefore
//!
//! - never moves its announced range back: a doorbell value at or below what it announced before
//!   announces nothing (`read_doorbell`), so the launch index never passes the announced end;
//! - at each doorbell read that finds a new value (lower ones included), also announces the
//!   slots past the announced end while their headers are published (`published_past_doorbell`),
//!   up to the first INVALID one: the higher value that announced them may have been
//!   overwritten before the processor read it, and nobody rings again while the producer waits
//!   for its packet. A published header is the producer's last store to its slot, so such a
//!   packet is complete; and the producer of the higher value published its header before its
//!   doorbell store, which came before the lower store that the processor read, so the header
//!   is visible by then. Without a doorbell write nothing past the announced end is taken, so
//!   packets wait for their ring as before.
//!
//! docs/rocm-on-emu.md §4.1 tells how Debian's HIP 5.2 hung when a lower value moved the
//! announced end back below the launch index.
//!
//! # Scratch on request
//!
//! Before a kernel dispatch is launched, its private memory is checked against the queue's
//! scratch (`scratch_ready`): a dispatch asking for more per wave than `compute_tmpring_size`
//! gives stops the queue there, and the processor asks the queue's runtime for scratch through
//! `queue_inactive_signal` (code 1, with its event), as the CP firmware does for ROCr, which
//! allocates it, rewrites the queue's scratch fields and stores 0 to resume the queue
//! (docs/rocm-on-emu.md §4.7). aqueduct's kfd-direct sets scratch up before it dispatches and
//! names no such signal, so it never asks.
//!
//! Completion of any packet: release fence (if its scope asks), timestamps (profiling queues;
//! into the completion signal, so only for packets that have one), an atomic decrement of the
//! completion signal, its mailbox and interrupt, then retirement.
//!
//! # Adversarial mode
//!
//! With [`crate::EmuConfig::adversarial_seed`], the dispatches of a queue that the rules let run
//! at the same time (no barrier bit between them) are held back and released one at a time in a
//! seeded random order, each after the previous one completed: they run and complete out of
//! order, reproducibly per seed, so a stream that forgot a barrier bit sees its kernels reorder.
//! Queues stay independent of one another.

use std::borrow::Cow;
use std::collections::hash_map;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::sync::Arc;

use aqueduct::aql::{BarrierPacket, BarrierValuePacket, KernelDispatchPacket, Packet};

use crate::abi::exception;
use crate::aql_queue::{AqlQueue, Dispatch, Kernarg, RingState, WINDOW};
use crate::device::{Device, Failure};
use crate::memory::{MemView, Translation, TranslationCache};
use crate::sdma::SdmaQueue;
use crate::twin::Twin;

/// AQL header fields (docs/kfd-aql.md §3.1), decoded here from the bit layout.
mod header {
    /// Bits 7:0: the packet type.
    pub(super) const TYPE_MASK: u16 = 0xff;
    /// Bit 8: wait for every earlier packet of the queue to complete.
    pub(super) const BARRIER: u16 = 1 << 8;
    /// Bits 10:9: acquire fence scope.
    pub(super) const ACQUIRE_SHIFT: u16 = 9;
    /// Bits 12:11: release fence scope.
    pub(super) const RELEASE_SHIFT: u16 = 11;
    /// A fence-scope field.
    pub(super) const SCOPE_MASK: u16 = 3;

    pub(super) const VENDOR_SPECIFIC: u16 = 0;
    pub(super) const INVALID: u16 = 1;
    pub(super) const KERNEL_DISPATCH: u16 = 2;
    pub(super) const BARRIER_AND: u16 = 3;
    pub(super) const AGENT_DISPATCH: u16 = 4;
    pub(super) const BARRIER_OR: u16 = 5;

    /// AMD vendor formats (byte 2 of a vendor-specific packet).
    pub(super) const AMD_PM4_IB: u8 = 1;
    pub(super) const AMD_BARRIER_VALUE: u8 = 2;
}

/// Where launched dispatches go (the work-group scheduler).
pub(crate) trait LaunchSink {
    /// Takes a dispatch whose work-groups may now run.
    fn launch(&mut self, d: Dispatch<'static>);
    /// Claims a compute-unit worker for the single work-group of `d`, to run it on this thread
    /// at once ([`LaunchSink::run_here`]); `None` when it must wait its turn ([`LaunchSink::launch`]).
    fn claim(&mut self, d: &Dispatch<'_>) -> Option<u32>;
    /// Runs the single work-group of `d` on the claimed `worker` here, and completes it; returns
    /// whether this thread still holds the packet-processor role.
    fn run_here(&mut self, d: &Dispatch<'_>, worker: u32) -> bool;
}

fn header_field(h: u16, shift: u16) -> u16 {
    (h >> shift) & header::SCOPE_MASK
}

/// Kernel objects are 64-byte aligned addresses: mixing the bits is hash enough.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
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

/// The packet processor's own kernel-object → twin cache (no lock on the hot path).
#[derive(Default)]
struct TwinCache {
    generation: u64,
    map: HashMap<u64, Arc<Twin>, BuildHasherDefault<IdHasher>>,
}

/// How long (in [`crate::hw::ticks`]) the doorbell of a streaming producer is left alone after a
/// read: about half a microsecond on a current x86 core, tens of packets of a fast producer.
const STREAMING_PAUSE: u64 = 1500;

/// Most dispatches one visit of a queue runs on the packet processor's thread (see
/// `PacketProcessor::process`) before the other queues get their turn.
const RUN_HERE_PER_VISIT: u32 = 64;

/// An engine thread's view of one queue (its own caches; the queue's state is in the queue).
struct Entry {
    q: Arc<AqlQueue>,
    tr: TranslationCache,
}

/// The packet processor of one device, as one engine thread runs it: the thread's caches of
/// the queue list, translations and twins. Everything a queue's processing changes lives in the
/// queue under its ring lock, so the engine thread that holds the packet-processor role can
/// change (`scheduler`), and two may briefly poll at once, each queue being processed by one
/// thread at a time.
pub(crate) struct PacketProcessor {
    dev: Arc<Device>,
    generation: u64,
    queues: Vec<Entry>,
    sdma: Vec<Arc<SdmaQueue>>,
    twins: TwinCache,
}

impl PacketProcessor {
    pub(crate) fn new(dev: Arc<Device>) -> PacketProcessor {
        PacketProcessor { dev, generation: u64::MAX, queues: Vec::new(), sdma: Vec::new(), twins: TwinCache::default() }
    }

    /// Picks up a changed queue list (keeping the state of queues that remain).
    fn refresh(&mut self) {
        let g = self.dev.generation();
        if g == self.generation {
            return;
        }
        self.generation = g;
        let mut old = std::mem::take(&mut self.queues);
        let mut list = self.dev.queues();
        // Higher priority first; ties by creation order.
        // Ordering: Relaxed; priorities are re-read at the next change.
        list.sort_by_key(|q| (std::cmp::Reverse(q.priority.load(Ordering::Relaxed)), q.order));
        for q in list {
            let e = match old.iter().position(|e| Arc::ptr_eq(&e.q, &q)) {
                Some(i) => old.swap_remove(i),
                None => Entry { q, tr: TranslationCache::default() },
            };
            self.queues.push(e);
        }
        self.sdma = self.dev.sdma_queues();
    }

    /// Whether a round would find something: a doorbell rang, a packet completed, or (with
    /// `poll_memory`) a queue waits on memory someone else writes.
    pub(crate) fn has_work(&mut self, poll_memory: bool) -> bool {
        self.refresh();
        if self.dev.is_paused() {
            return false;
        }
        self.queues.iter().any(|e| {
            // Ordering: Relaxed; a hint, the round reads the queue under its lock.
            e.q.doorbell_rung()
                || e.q.attention_pending()
                || (poll_memory && e.q.waits_on_memory.load(Ordering::Relaxed))
        }) || self.sdma.iter().any(|q| q.doorbell_rung() || (poll_memory && q.waiting()))
    }

    /// One round over every queue of the device; returns whether anything happened.
    pub(crate) fn round(&mut self, sink: &mut dyn LaunchSink) -> bool {
        self.refresh();
        if self.dev.is_paused() {
            return false;
        }
        let mut progress = false;
        for i in 0..self.queues.len() {
            // A queue with nothing left to launch has news only through its doorbell or a
            // completion (what `has_work` peeks at too).
            if self.queues.get(i).is_some_and(|e| e.q.drained() && !e.q.doorbell_rung() && !e.q.attention_pending()) {
                continue;
            }
            progress |= self.process(i, sink);
        }
        for q in &self.sdma {
            if !q.doorbell_rung() && !q.waiting() {
                continue;
            }
            let (p, failure) = q.run(&self.dev.pool, &self.dev.clock, &self.dev.sdma_stats);
            progress |= p;
            if let Some(f) = failure {
                self.dev.fail_sdma(q, f);
            }
        }
        progress
    }

    /// Processes queue `i` as far as the rules allow.
    fn process(&mut self, i: usize, sink: &mut dyn LaunchSink) -> bool {
        let PacketProcessor { dev, queues, twins, .. } = self;
        let dev: &Device = dev;
        let Some(e) = queues.get_mut(i) else { return false };
        let q = &e.q;
        // The driver changes scheduling parameters and the ring under this lock (as amdkfd
        // preempts and reloads a queue), so look at them after taking it. Another engine thread
        // processing the queue right now does this round's work.
        let Some(mut ring) = q.try_lock_ring() else { return false };
        // A pause that began after this round's first look (`Device::pause`) holds from here on.
        if dev.is_paused() {
            return false;
        }
        q.take_attention();
        if !q.active() {
            // A dead queue's held dispatches are dropped with their completions.
            ring.held.clear();
            return false;
        }
        if !q.runnable() {
            return false;
        }
        if ring.launch == ring.limit && !q.doorbell_paused() {
            read_doorbell(q, &mut ring, false);
        }
        if let Some(va) = q.noexec_ring {
            if ring.limit.wrapping_sub(ring.launch) as i64 > 0 {
                drop(ring);
                dev.fail(q, Failure::NoExecute(va));
                return true;
            }
        }
        let mut waits = false;
        let mut progress = false;
        // Dispatches run here and now this visit, and whether the last packet that ran or
        // completed here may have rung the queue's own doorbell (see `read_doorbell`).
        let mut ran = 0u32;
        let mut fresh = false;
        let failure = loop {
            if !q.active() {
                break None;
            }
            let index = ring.launch;
            // Consecutive packets: a packet that ran here may have published the next ones (a
            // device-side producer), so look at the doorbell again before leaving the queue; and
            // a look past the announced end that the last doorbell read had to leave for later
            // (the slot's previous packet not retired then) is made now.
            if ring.limit.wrapping_sub(index) as i64 <= 0
                && !(std::mem::take(&mut fresh) && read_doorbell(q, &mut ring, true))
                && !published_past_doorbell(q, &mut ring, index)
            {
                break None;
            }
            if index.wrapping_sub(q.retired()) >= WINDOW {
                break None;
            }
            // The memory as of the doorbell read that announced the packet: the producer maps
            // what its packets use before it rings (one load while nothing changed).
            let tr = e.tr.get(&q.vm, &dev.pool, q.gpu_id);
            let slot = ring.slot(index);
            // SAFETY: the slot is 64 live, 64-byte aligned bytes of the pinned ring.
            let dword0 = unsafe { AtomicU32::from_ptr(slot.cast()) };
            // Ordering: Acquire pairs with the producer's Release store of the header: the body
            // written before it is visible below.
            let h = dword0.load(Ordering::Acquire) as u16;
            let ty = h & header::TYPE_MASK;
            if ty == header::INVALID {
                waits = true;
                break None;
            }
            // The same hand-over at the VA the producer stored to (ThreadSanitizer builds only).
            crate::tsan::acquire(ring.va.wrapping_add((index & (u64::from(ring.packets) - 1)) * 64));
            if ty > header::BARRIER_OR {
                break Some(Failure::Queue(exception::QUEUE_PACKET_RESERVED));
            }
            if h & header::BARRIER != 0 && (q.in_flight() > 0 || ring.running_here) {
                break None;
            }
            let words = read_packet(slot);
            if header_field(h, header::ACQUIRE_SHIFT) != 0 {
                fence(Ordering::Acquire);
            }
            let profiling = q.profiling();
            let outcome = match ty {
                header::KERNEL_DISPATCH => {
                    let tr = match scratch_ready(dev, q, tr, &mut ring, index, &words) {
                        Scratch::Waits => {
                            waits = true;
                            break None;
                        }
                        Scratch::Ready => tr,
                        // The runtime mapped the scratch it gave after the doorbell: the
                        // memory as of its answer.
                        Scratch::Granted => e.tr.get(&q.vm, &dev.pool, q.gpu_id),
                    };
                    let packet_va = ring.va.wrapping_add((index & (u64::from(ring.packets) - 1)) * 64);
                    let mut d = match launch(dev, twins, q, tr, (index, packet_va), &words, profiling) {
                        Ok(d) => d,
                        Err(f) => break Some(f),
                    };
                    consume(&mut ring);
                    progress = true;
                    ring.launched += 1;
                    if dev.adversarial.is_some() {
                        q.begin();
                        ring.held.push(d.into_owned());
                        continue;
                    }
                    // Nothing else of the queue can start beside a dispatch whose next packet
                    // waits for it (barrier bit) or is not announced: its one work-group runs
                    // here and now, and the queue goes on with the packet after it. A bounded
                    // number per visit, so that one queue cannot keep the others waiting.
                    let alone = d.work_groups == 1 && ran < RUN_HERE_PER_VISIT && !next_may_overlap(&ring, index);
                    let Some(worker) = alone.then(|| sink.claim(&d)).flatten() else {
                        q.begin();
                        sink.launch(d.into_owned());
                        continue;
                    };
                    ran += 1;
                    // The ring is not needed while it runs (another engine thread that takes the
                    // packet-processor role meanwhile may process the queue, and sees the
                    // dispatch in flight through `running_here`).
                    ring.running_here = true;
                    drop(ring);
                    d.counted = false;
                    let holder = sink.run_here(&d, worker);
                    fresh = true;
                    // Other holders of the lock hold it for a round's look at the queue only.
                    ring = q.lock_ring();
                    ring.running_here = false;
                    if !holder {
                        // The thread that took the role may have looked at the queue meanwhile
                        // and found the dispatch in flight: it is to look again.
                        q.attend();
                        return true;
                    }
                    // The driver may have parked the queue meanwhile (it changes scheduling
                    // parameters under the ring lock), or a test paused the processor.
                    if !q.runnable() || dev.is_paused() {
                        break None;
                    }
                    continue;
                }
                header::BARRIER_AND | header::BARRIER_OR => {
                    let b = BarrierPacket::from_words(&words);
                    match deps_met(q, tr, &b.dep_signal, ty == header::BARRIER_OR) {
                        Ok(true) => Ok(b.completion_signal),
                        Ok(false) => Err(None),
                        Err(va) => Err(Some(Failure::Memory(va))),
                    }
                }
                header::VENDOR_SPECIFIC => match (words[0] >> 16) as u8 {
                    header::AMD_BARRIER_VALUE => {
                        let v = BarrierValuePacket::from_words(&words);
                        match barrier_value_met(q, tr, &v) {
                            Ok(Some(true)) => Ok(v.completion_signal),
                            Ok(Some(false)) => Err(None),
                            Ok(None) => Err(Some(Failure::Queue(exception::QUEUE_PACKET_UNSUPPORTED))),
                            Err(va) => Err(Some(Failure::Memory(va))),
                        }
                    }
                    header::AMD_PM4_IB => Ok(0),
                    _ => Err(Some(Failure::Queue(exception::QUEUE_PACKET_UNSUPPORTED))),
                },
                // GPU AQL queues advertise KERNEL_DISPATCH only (docs/kfd-aql.md §3.2).
                header::AGENT_DISPATCH => Err(Some(Failure::Queue(exception::QUEUE_PACKET_UNSUPPORTED))),
                _ => Err(Some(Failure::Queue(exception::QUEUE_PACKET_RESERVED))),
            };
            match outcome {
                // Not met yet: the queue's head blocks.
                Err(None) => {
                    waits = true;
                    break None;
                }
                Err(Some(f)) => break Some(f),
                Ok(signal) => {
                    // A barrier or vendor packet starts and completes here and now.
                    consume(&mut ring);
                    progress = true;
                    if header_field(h, header::RELEASE_SHIFT) != 0 {
                        fence(Ordering::Release);
                    }
                    let mut fault = None;
                    if signal != 0 {
                        let now = if profiling { dev.clock.gpu_ticks() } else { 0 };
                        fault = q.complete_signal(tr, signal, now, now, profiling).err();
                    }
                    q.retire(index, false);
                    if let Some(va) = fault {
                        break Some(Failure::Memory(va));
                    }
                    // As after a dispatch run here: its completion may be what the producer
                    // waits for before its next packet, so the doorbell is read again, and a
                    // producer in lock step with its barriers is not taken for a streaming one.
                    fresh = true;
                }
            }
        };
        // Ordering: Relaxed; a polling hint (see `has_work`).
        q.waits_on_memory.store(waits, Ordering::Relaxed);
        q.set_drained(!waits && ring.launch == ring.limit && ring.held.is_empty());
        if let Some(f) = failure {
            drop(ring);
            dev.fail(q, f);
            return true;
        }
        // Adversarial mode: release one held dispatch, at random, when none of the queue's runs.
        let held = ring.held.len();
        if held > 0 && q.in_flight() as usize == held && q.active() {
            let pick = ring.rng.below(held);
            let d = ring.held.swap_remove(pick);
            sink.launch(d);
            progress = true;
        }
        progress
    }
}

/// Reads the doorbell of `q` and announces the packets up to it; returns whether there are new
/// ones. A value at or below the announced end is a late producer's store (see "Doorbells from
/// several producers"): it announces nothing and the announced end stays where it is.
///
/// The doorbell's line is the producer's: each read makes its next doorbell store wait for the
/// line. A round reads it only when the packets it announced before are all launched, and while
/// the producer streams (a read found several new packets, or two reads in a row found new
/// ones) not again for a short pause, so that it pays one transfer per pause instead of one per
/// packet. A producer that publishes one packet and waits for it (a round trip) is never paused:
/// the read after each completion finds nothing new. A `consecutive` read, right after a packet
/// of the queue ran or completed on this thread (a dispatch run here, a barrier or vendor
/// packet), ignores the pause and sets none.
fn read_doorbell(q: &AqlQueue, ring: &mut RingState, consecutive: bool) -> bool {
    let db = q.read_doorbell();
    if db == ring.last_doorbell {
        ring.streak = 0;
        return false;
    }
    ring.last_doorbell = db;
    let before = ring.limit;
    let end = db.wrapping_add(1);
    // Packets the value announces beyond those announced before (indices are u64 counts that
    // only grow; the difference is signed so that a lower value counts as none).
    let new = end.wrapping_sub(ring.limit) as i64;
    if new > 0 {
        if !consecutive {
            ring.streak = ring.streak.saturating_add(1);
            q.pause_doorbell(if new >= 2 || ring.streak >= 2 { STREAMING_PAUSE } else { 0 });
        }
        ring.limit = end;
    } else {
        ring.streak = 0;
    }
    // A higher value that this one overwrote may have announced the packets past it: they are
    // taken now, at the doorbell read, while their producer waits for them (a look deferred to
    // the end of the announced packets would race with a producer already writing its next
    // ones, slot line by slot line).
    ring.look_past = true;
    while published_past_doorbell(q, ring, ring.limit) {}
    ring.limit != before
}

/// Past the announced packets, after a doorbell write: whether the slot of packet `index` holds
/// a published packet, which is then announced (see "Doorbells from several producers"). The
/// slot's previous packet, `index - packets`, must have retired: until then the header is that
/// packet's, and the look is left for later (`look_past` stays set; the processing loop asks
/// again when it gets to the slot). An INVALID slot ends the look until the next doorbell write.
fn published_past_doorbell(q: &AqlQueue, ring: &mut RingState, index: u64) -> bool {
    if !ring.look_past {
        return false;
    }
    // Ordering: Acquire (in `retired_acquire`) pairs with retirement's Release store: the INVALID
    // header it wrote into the slot of `index - packets` is visible below.
    if index.wrapping_sub(q.retired_acquire()) >= u64::from(ring.packets) {
        return false;
    }
    // SAFETY: the slot is 64 live, 64-byte aligned bytes of the pinned ring.
    let dword0 = unsafe { AtomicU32::from_ptr(ring.slot(index).cast()) };
    // Ordering: Relaxed; the processing loop reads the header again with Acquire before it reads
    // the body.
    let h = dword0.load(Ordering::Relaxed) as u16;
    if h & header::TYPE_MASK == header::INVALID {
        ring.look_past = false;
        return false;
    }
    ring.limit = index.wrapping_add(1);
    true
}

/// Whether the packet after `index` is announced and could start while packet `index` runs: its
/// header is published without the barrier bit.
fn next_may_overlap(ring: &RingState, index: u64) -> bool {
    let next = index.wrapping_add(1);
    if ring.limit.wrapping_sub(next) as i64 <= 0 {
        return false;
    }
    // SAFETY: the slot is 64 live, 64-byte aligned bytes of the pinned ring.
    let dword0 = unsafe { AtomicU32::from_ptr(ring.slot(next).cast()) };
    // Ordering: Relaxed; a scheduling choice only (the packet is read with Acquire when it is
    // processed).
    let h = dword0.load(Ordering::Relaxed) as u16;
    h & header::TYPE_MASK != header::INVALID && h & header::BARRIER == 0
}

/// Copies the 16 dwords of the slot at `slot` (dword 0 already acquired by the caller).
fn read_packet(slot: *mut u8) -> [u32; 16] {
    let mut words = [0u32; 16];
    for (i, w) in words.iter_mut().enumerate() {
        // SAFETY: the slot is 64 live, aligned bytes of the pinned ring. The producer does not
        // write a published slot until the read index passes it.
        *w = unsafe { AtomicU32::from_ptr(slot.cast::<u32>().add(i)) }.load(Ordering::Relaxed);
    }
    words
}

/// Moves the launch index past a consumed slot (its header becomes INVALID at retirement).
fn consume(ring: &mut RingState) {
    ring.launch = ring.launch.wrapping_add(1);
}

/// Barrier-AND (`any` false) / barrier-OR (`any` true) over the non-null dependencies.
fn deps_met(q: &AqlQueue, tr: &Translation, deps: &[u64; 5], any: bool) -> Result<bool, u64> {
    let mut live = 0;
    let mut met = 0;
    for &d in deps.iter().filter(|&&d| d != 0) {
        live += 1;
        if q.signal_value(tr, d)? == 0 {
            met += 1;
        }
    }
    Ok(if any { live == 0 || met > 0 } else { met == live })
}

/// An AMD barrier-value packet's condition (`Ok(None)` for an unknown condition code).
fn barrier_value_met(q: &AqlQueue, tr: &Translation, v: &BarrierValuePacket) -> Result<Option<bool>, u64> {
    let value = q.signal_value(tr, v.signal)? & v.mask;
    // hsa_signal_condition_t, signed comparisons.
    Ok(match v.cond {
        0 => Some(value == v.value),
        1 => Some(value != v.value),
        2 => Some(value < v.value),
        3 => Some(value >= v.value),
        _ => None,
    })
}

/// Whether the dispatch at `index` may start as far as scratch goes ("Scratch on request").
///
/// A dispatch that asks for private memory (`private_segment_size` bytes per work-item) needs
/// waves of at least that times 64 bytes, in whole KiB, from the queue's
/// `compute_tmpring_size` (WAVESIZE, bits 24:12, KiB per wave; WAVES, bits 11:0). When the queue
/// has less, the CP firmware stops at the dispatch and asks the queue's runtime through its
/// `queue_inactive_signal` ([`Device::request_scratch`]), with `read_dispatch_id` naming the
/// dispatch, so the emulated one first lets the queue's earlier packets retire; it starts the
/// dispatch once the runtime has stored 0 there ([`Device::scratch_granted`]), reading the new
/// scratch fields as every work-group does. A queue without the signal (nobody to ask) starts
/// the dispatch as it is, whose work-groups then fail to set up without scratch.
fn scratch_ready(
    dev: &Device,
    q: &AqlQueue,
    tr: &Translation,
    ring: &mut RingState,
    index: u64,
    words: &[u32; 16],
) -> Scratch {
    let private = KernelDispatchPacket::from_words(words).private_segment_size;
    if private == 0 {
        ring.scratch_asked = None;
        return Scratch::Ready;
    }
    // Once the request is out, only the runtime's answer starts the dispatch: the runtime
    // writes the scratch fields (`compute_tmpring_size` among them) while the queue waits, and
    // a `compute_tmpring_size` seen before the answer may come before the fields it describes.
    if ring.scratch_asked == Some(index) {
        if dev.scratch_granted(q, tr) {
            ring.scratch_asked = None;
            return Scratch::Granted;
        }
        return Scratch::Waits;
    }
    // SAFETY: the amd_queue_t is live while the queue is (its constructor's contract); the
    // field lies inside the 256-byte struct and is 4-byte aligned.
    let tmpring = unsafe { AtomicU32::from_ptr(q.amd_queue().add(TMPRING).cast()) }.load(Ordering::Acquire);
    let (waves, wave_kib) = (tmpring & 0xfff, (tmpring >> 12) & 0x1fff);
    if waves > 0 && u64::from(wave_kib) * 1024 >= u64::from(private) * 64 {
        ring.scratch_asked = None;
        return Scratch::Ready;
    }
    if q.retired() != index {
        return Scratch::Waits;
    }
    if !dev.request_scratch(q) {
        return Scratch::Ready;
    }
    ring.scratch_asked = Some(index);
    Scratch::Waits
}

/// What [`scratch_ready`] found.
enum Scratch {
    /// The dispatch waits (for earlier packets to retire, or for the runtime's answer).
    Waits,
    /// It may start on the memory as of the doorbell read.
    Ready,
    /// The runtime answered a request: it starts on the memory as of the answer, which may
    /// have mapped the scratch it gave.
    Granted,
}

/// Offset of `compute_tmpring_size` in `amd_queue_t` (docs/kfd-aql.md §4.3).
const TMPRING: usize = std::mem::offset_of!(crate::abi::AmdQueue, compute_tmpring_size);

/// Validates a kernel dispatch and builds what its work-groups need.
fn launch<'a>(
    dev: &Device,
    twins: &'a mut TwinCache,
    q: &'a Arc<AqlQueue>,
    tr: &'a Arc<Translation>,
    (index, packet_va): (u64, u64),
    words: &[u32; 16],
    profiling: bool,
) -> Result<Dispatch<'a>, Failure> {
    let p = KernelDispatchPacket::from_words(words);
    // Timestamps go into the completion signal: without one there is nothing to stamp.
    let profiling = profiling && p.completion_signal != 0;
    let start = if profiling { dev.clock.gpu_ticks() } else { 0 };
    let dims = p.setup & 3;
    let mut grid = [p.grid_size_x, p.grid_size_y, p.grid_size_z];
    let mut wg = [p.workgroup_size_x, p.workgroup_size_y, p.workgroup_size_z].map(u32::from);
    if dims == 0 || grid.contains(&0) {
        return Err(Failure::Queue(exception::QUEUE_PACKET_DISPATCH_DIM_INVALID));
    }
    // The product in u64: three u16 sizes overflow u32.
    if wg.contains(&0) || wg.iter().map(|&w| u64::from(w)).product::<u64>() > 1024 {
        return Err(Failure::Queue(exception::QUEUE_PACKET_DISPATCH_WORK_GROUP_SIZE_INVALID));
    }
    if u64::from(p.group_segment_size) > u64::from(dev.node.props.lds_size_in_kb) * 1024 {
        return Err(Failure::Queue(exception::QUEUE_PACKET_DISPATCH_GROUP_SEGMENT_SIZE_INVALID));
    }
    // Dimensions beyond `dims` are 1 whatever the packet says.
    for d in usize::from(dims)..3 {
        grid[d] = 1;
        wg[d] = 1;
    }
    let mem = MemView::new(tr);
    let twin = find_twin(dev, twins, p.kernel_object, &mem)
        .ok_or(Failure::Queue(exception::QUEUE_PACKET_DISPATCH_CODE_INVALID))?;
    let mut kernarg = Kernarg::new(twin.kernarg_size as usize);
    let args = kernarg.as_mut();
    if !args.is_empty() {
        mem.read(p.kernarg_address, args).map_err(Failure::from)?;
    }
    let count = [0, 1, 2].map(|i| grid[i].div_ceil(wg[i]));
    // Ordering: Relaxed; scheduling parameters, read at each launch.
    let (priority, workers) = (q.priority.load(Ordering::Relaxed), q.workers.load(Ordering::Relaxed));
    Ok(Dispatch {
        queue: Cow::Borrowed(q),
        index,
        packet_va,
        twin: Cow::Borrowed(twin),
        packet: p,
        kernarg,
        grid,
        workgroup_size: wg,
        workgroup_count: count,
        work_groups: count.iter().map(|&c| u64::from(c)).product(),
        tr: Cow::Borrowed(tr),
        start_ts: start,
        profiling,
        priority,
        workers,
        release_fence: header_field(p.header, header::RELEASE_SHIFT) != 0,
        counted: true,
    })
}

fn find_twin<'a>(dev: &Device, cache: &'a mut TwinCache, object: u64, mem: &MemView<'_>) -> Option<&'a Arc<Twin>> {
    // Ordering: Acquire pairs with the registry's Release increment on every new binding.
    let g = dev.registry.generation.load(Ordering::Acquire);
    if g != cache.generation {
        cache.map.clear();
        cache.generation = g;
    }
    match cache.map.entry(object) {
        hash_map::Entry::Occupied(e) => Some(e.into_mut()),
        hash_map::Entry::Vacant(e) => {
            let target = crate::isa::device_target(dev.node.profile);
            let t = Arc::new(dev.registry.resolve(object, mem, target)?);
            // Ordering: Acquire; see above (resolve may have bumped the generation).
            cache.generation = dev.registry.generation.load(Ordering::Acquire);
            Some(e.insert(t))
        }
    }
}
