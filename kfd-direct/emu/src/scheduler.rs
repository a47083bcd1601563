//! Compute units and the threads of an emulated GPU (docs/kfd-aql.md §3.4, §9 "concurrency";
//! docs/architecture.md rule 5): the work-group scheduler, and the engine threads that run the
//! packet processor and work-groups.
//!
//! # Compute-unit workers
//!
//! A device has `cus` compute-unit *workers* ([`crate::EmuConfig::cus`]): at most that many
//! work-groups run at once, each holding one worker slot for its duration. A dispatch's
//! work-groups may run on the workers its queue's CU mask allows (CU `c` belongs to worker
//! `c % cus`, [`crate::device::Device::workers_for`]). When several dispatches wait for a free
//! worker, the one of the highest queue priority goes first, then the one launched first. A
//! worker is handed a run of consecutive work-groups of a large dispatch at once (up to
//! [`MAX_RUN`], fewer as it nears its end; `Sched::take`), which it runs in turn: the
//! scheduler's lock and counters are written once per run rather than per work-group.
//!
//! # Threads and the packet-processor role
//!
//! The device runs `cus + 1` threads. They are alike: at any time one of them holds the
//! *packet-processor role* (a token) and polls the queues with its own [`PacketProcessor`]; the
//! others run work-groups or sleep. Holding one more thread than workers guarantees a thread that
//! is not running a work-group, so the packet processor is never starved by long kernels.
//!
//! The role holder runs a work-group itself when a worker is free, keeping the role but marking
//! it *vacant* for the time being: the first single-work-group dispatch a round launched, after
//! the round, and — in the middle of a round — a dispatch that nothing else of its queue may
//! start beside (see the packet processor; one vacancy for all of those in a round). A short
//! kernel thus costs no thread hand-off (the dispatch round trip is one thread's work), while a
//! long one, or a long chain of them, does not stop the packet processor: a *standby* thread,
//! sleeping in short timed naps while the device is busy, takes the role when one vacancy lasted
//! a whole nap. The old holder steps down when it comes back (for a round both may poll; each
//! queue is processed by one thread at a time, under its ring lock). The standby goes to sleep
//! for good after a long quiet spell, and a holder that leaves the role vacant with no standby
//! awake wakes one.
//!
//! # Polling without slowing the producer
//!
//! The role holder polls like the hardware: only the doorbell of each queue (and, while a queue
//! waits on one, the memory a stalled packet waits for; [`PacketProcessor::has_work`]), a
//! doorbell only once the packets it announced before are launched, and a streaming producer's
//! doorbell only every half microsecond or so. While every worker runs a work-group on a host
//! with no more cores than workers, it does not spin but naps [`BUSY_NAP_US`] µs at a time (a
//! spinning holder would take a core from a worker; a worker that frees takes the next
//! work-group itself, and looks at the doorbells for it, waking it if one rang). Otherwise,
//! after work it spins for 50 µs, then naps with the thread's timer slack set to 1 µs: 2 µs naps
//! for the next 2 ms (the doorbell latency between a program's operations), then naps doubling up to [`MAX_NAP_US`] µs, and after 100 ms of quiet
//! [`DEEP_NAP_US`] µs naps (an idle device costs about a per cent of a core). A completed packet,
//! and a process blocking in `WAIT_EVENTS`, wake a napping holder at once.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

use crate::aql_queue::Dispatch;
use crate::device::{Device, Failure};
use crate::memory::MemView;
use crate::packet_processor::{LaunchSink, PacketProcessor};
use crate::twin::KernelCtx;

/// How long the role holder spins after its last work before it naps.
const SPIN: Duration = Duration::from_micros(50);
/// The nap of a role holder idle for less than [`SHORT_NAPS`], in µs: the doorbell latency a
/// program sees between operations.
const FIRST_NAP_US: u64 = 2;
/// How long an idle role holder keeps its naps short.
const SHORT_NAPS: Duration = Duration::from_millis(2);
/// The longest nap of an idle role holder (after 2 ms of quiet its naps double up to it):
/// the most a doorbell waits to be noticed by a device that has been idle for a while.
pub const MAX_NAP_US: u64 = 100;
/// After this long without work the holder naps [`DEEP_NAP_US`] at a time.
const DEEP_IDLE: Duration = Duration::from_millis(100);
/// The nap of a holder idle for longer than 100 ms, in µs.
pub const DEEP_NAP_US: u64 = 1000;
/// The nap of a role holder with nothing to do while every worker runs a work-group on a host
/// whose cores the workers fill, in µs (see [`Shared::crowded`]). Each nap is a context switch
/// on a worker's core; a doorbell rung meanwhile is seen by the next worker to finish its job.
pub const BUSY_NAP_US: u64 = 500;
/// A standby's nap: the longest a vacant role (a long kernel run by the holder) stays vacant.
const STANDBY_NAP: Duration = Duration::from_micros(200);
/// Naps without a new vacancy after which the standby sleeps for good.
const STANDBY_NAPS: u32 = 100;

/// Most work-groups of one dispatch a worker is handed at once (see [`Sched::take`]).
const MAX_RUN: u64 = 8;

/// A dispatch whose work-groups are being handed out. Its counters have a cache line of their
/// own: the workers write them per hand-out while every work-group reads the dispatch (and the
/// `Arc`'s count, written per hand-out too, sits before the struct).
#[repr(C, align(64))]
struct Running {
    hot: RunningCounters,
    d: Dispatch<'static>,
    /// Launch order.
    seq: u64,
}

#[repr(align(64))]
struct RunningCounters {
    /// The next work-group to hand out (under the scheduler's lock).
    next: AtomicU64,
    /// Work-groups not yet finished.
    remaining: AtomicU64,
    /// A work-group failed: the rest are dropped and the dispatch never completes.
    failed: AtomicBool,
}

impl std::ops::Deref for Running {
    type Target = RunningCounters;
    fn deref(&self) -> &RunningCounters {
        &self.hot
    }
}

/// What a thread runs. (`Single` carries the dispatch by value: a move is cheaper than the heap
/// allocation boxing it would cost on every single-work-group dispatch.)
#[allow(clippy::large_enum_variant)]
enum Job {
    /// The only work-group of a dispatch.
    Single { d: Dispatch<'static>, worker: u32 },
    /// Work-groups `n .. n + count` of a running dispatch, in turn on one worker.
    Group { r: Arc<Running>, n: u64, count: u64, worker: u32 },
}

/// The scheduler's list of dispatches with work-groups to hand out.
struct Sched {
    /// By priority (highest first), then launch order.
    list: Vec<Arc<Running>>,
    seq: u64,
}

/// The scheduler's counters, readable without its lock.
///
/// `pending` changes under the scheduler's lock. Only the packet-processor role inserts, so
/// `pending == 0` seen by the role holder stays true until it inserts itself. Worker slots are
/// claimed with a compare-and-swap (by `take` under the lock, or by the role holder for a
/// dispatch it runs itself) and freed with an atomic OR by whoever finished, without the lock.
struct Counters {
    /// Work-groups of listed dispatches not handed out yet.
    pending: AtomicU64,
    /// Free worker slots (bit `w`: worker `w`).
    free: AtomicU64,
    /// Bumped when a dispatch is listed, or a worker freed while work-groups wait: a failed
    /// `take` may succeed now.
    epoch: AtomicU64,
}

impl Counters {
    fn free(&self) -> u64 {
        // Ordering: SeqCst; see `release`.
        self.free.load(Ordering::SeqCst)
    }

    /// Claims one of the workers in `allowed` that is free; returns it.
    fn claim(&self, allowed: u64) -> Option<u32> {
        let mut free = self.free();
        loop {
            let pick = allowed & free;
            if pick == 0 {
                return None;
            }
            let w = pick.trailing_zeros();
            // Ordering: SeqCst; see `release`.
            match self.free.compare_exchange_weak(free, free & !(1 << w), Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => return Some(w),
                Err(now) => free = now,
            }
        }
    }

    /// Frees worker `w`.
    fn release(&self, w: u32) {
        // Ordering: SeqCst, with `pending`'s SeqCst load after it and the lister's SeqCst
        // increment before its `take`: either the lister's `take` sees the freed worker, or this
        // sees its pending work-groups and bumps the epoch so that it tries again.
        self.free.fetch_or(1 << w, Ordering::SeqCst);
        if self.pending() > 0 {
            self.bump();
        }
    }

    fn bump(&self) {
        // Ordering: Release pairs with `epoch()`'s Acquire load.
        self.epoch.fetch_add(1, Ordering::Release);
    }

    fn epoch(&self) -> u64 {
        // Ordering: Acquire; see `bump`.
        self.epoch.load(Ordering::Acquire)
    }

    fn pending(&self) -> u64 {
        // Ordering: SeqCst; see `release`.
        self.pending.load(Ordering::SeqCst)
    }
}

impl Sched {
    /// Hands out the next work-groups of the highest-priority dispatch that has a free worker:
    /// a run of a quarter of what is left per allowed worker, 1 to [`MAX_RUN`], so that a large
    /// dispatch costs one hand-out per several work-groups (the scheduler's lock and counters are
    /// lines every worker writes) while its last work-groups still spread one by one, and a
    /// dispatch listed meanwhile waits for at most a run per worker.
    fn take(&mut self, c: &Counters) -> Option<Job> {
        let pending = &c.pending;
        // The free workers as of one moment: workers are freed without this lock, and one freed
        // during the scan must not let a later dispatch go before an earlier one that could
        // have used it (the earlier one's claim failed just before).
        let mut free = c.free();
        let mut i = 0;
        while let Some(r) = self.list.get(i) {
            // Ordering: Relaxed; `next` is only changed under this lock.
            let next = r.next.load(Ordering::Relaxed);
            // Ordering: Relaxed; a failed dispatch's leftovers are dropped.
            if next >= r.d.work_groups || r.failed.load(Ordering::Relaxed) {
                // Ordering: Relaxed; counted under this lock.
                pending.fetch_sub(r.d.work_groups.saturating_sub(next), Ordering::Relaxed);
                self.list.remove(i);
                continue;
            }
            if r.d.workers & free == 0 {
                i += 1;
                continue;
            }
            let Some(worker) = c.claim(r.d.workers & free) else {
                // Claimed meanwhile (by the role holder, for a dispatch it runs itself): scan
                // again from the first dispatch.
                free = c.free();
                i = 0;
                continue;
            };
            let left = r.d.work_groups - next;
            let count = (left / (4 * u64::from(r.d.workers.count_ones()).max(1))).clamp(1, MAX_RUN);
            // Ordering: Relaxed; only changed under this lock.
            r.next.store(next + count, Ordering::Relaxed);
            // Ordering: Relaxed; counted under this lock.
            pending.fetch_sub(count, Ordering::Relaxed);
            let r = Arc::clone(r);
            if next + count == r.d.work_groups {
                self.list.remove(i);
            }
            return Some(Job::Group { r, n: next, count, worker });
        }
        None
    }

    fn insert(&mut self, d: Dispatch<'static>, c: &Counters) {
        self.seq += 1;
        // Ordering: SeqCst; see `Counters::release`.
        c.pending.fetch_add(d.work_groups, Ordering::SeqCst);
        c.bump();
        let at = self.list.partition_point(|r| r.d.priority >= d.priority);
        let total = d.work_groups;
        let r = Running {
            hot: RunningCounters {
                next: AtomicU64::new(0),
                remaining: AtomicU64::new(total),
                failed: AtomicBool::new(false),
            },
            d,
            seq: self.seq,
        };
        debug_assert!(self.list.get(at).is_none_or(|x| x.seq < r.seq));
        self.list.insert(at, Arc::new(r));
    }
}

/// State shared by a device's threads.
struct Shared {
    dev: Arc<Device>,
    /// The packet-processor role: index + 1 of the thread that holds it (0 none).
    holder: AtomicUsize,
    /// Non-zero while the holder runs a work-group: the vacancy's number (each vacancy gets a
    /// new one).
    vacancy: AtomicU64,
    /// Vacancies so far (written by the holder only).
    vacancies: AtomicU64,
    /// The role holder is napping (a completion wakes it).
    holder_napping: AtomicBool,
    /// Index + 1 of the standby thread (0 none).
    standby: AtomicUsize,
    sched: Mutex<Sched>,
    counters: Counters,
    /// Threads parked until woken (bit `i`: thread `i`).
    sleepers: AtomicU64,
    threads: OnceLock<Vec<Thread>>,
    stop: AtomicBool,
    /// Threads still running.
    live: AtomicU32,
    /// The workers fill the host's cores: a spinning role holder takes a core from them.
    crowded: bool,
}

/// The threads of one device.
pub(crate) struct Engine {
    sh: Arc<Shared>,
    handles: Mutex<Vec<JoinHandle<()>>>,
    started: AtomicBool,
    killed: AtomicBool,
}

impl Engine {
    pub(crate) fn new(dev: Arc<Device>) -> Engine {
        let workers = dev.cus.clamp(1, 64);
        let free = if workers == 64 { u64::MAX } else { (1u64 << workers) - 1 };
        let sh = Shared {
            dev,
            vacancy: AtomicU64::new(0),
            vacancies: AtomicU64::new(0),
            holder: AtomicUsize::new(0),
            holder_napping: AtomicBool::new(false),
            standby: AtomicUsize::new(0),
            sched: Mutex::new(Sched { list: Vec::new(), seq: 0 }),
            counters: Counters { pending: AtomicU64::new(0), free: AtomicU64::new(free), epoch: AtomicU64::new(0) },
            sleepers: AtomicU64::new(0),
            threads: OnceLock::new(),
            stop: AtomicBool::new(false),
            live: AtomicU32::new(0),
            crowded: std::thread::available_parallelism().map_or(1, |n| n.get()) <= workers as usize,
        };
        Engine {
            sh: Arc::new(sh),
            handles: Mutex::new(Vec::new()),
            started: AtomicBool::new(false),
            killed: AtomicBool::new(false),
        }
    }

    fn lock_handles(&self) -> MutexGuard<'_, Vec<JoinHandle<()>>> {
        self.handles.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts the threads (once; never after a kill).
    pub(crate) fn start(&self) {
        let mut handles = self.lock_handles();
        // Ordering: Relaxed; both flags are only changed under the handles lock.
        if self.started.load(Ordering::Relaxed) || self.killed.load(Ordering::Relaxed) {
            return;
        }
        self.started.store(true, Ordering::Relaxed);
        let n = self.sh.dev.cus.clamp(1, 64) as usize + 1;
        // Ordering: Relaxed; the threads read it only after being spawned.
        self.sh.live.store(n as u32, Ordering::Relaxed);
        let mut threads = Vec::with_capacity(n);
        for i in 0..n {
            let sh = Arc::clone(&self.sh);
            let spawned = std::thread::Builder::new()
                .name(format!("kfd-emu-{:x}-{i}", self.sh.dev.node.gpu_id))
                .spawn(move || sh.thread_main(i));
            match spawned {
                Ok(h) => {
                    threads.push(h.thread().clone());
                    handles.push(h);
                }
                Err(e) => {
                    eprintln!("aqueduct-kfd-emu: cannot start an engine thread: {e}");
                    // Ordering: Relaxed; see above.
                    self.sh.live.fetch_sub(1, Ordering::Relaxed);
                }
            }
        }
        let _ = self.sh.threads.set(threads);
    }

    /// Whether any engine thread runs.
    pub(crate) fn alive(&self) -> bool {
        // Ordering: Acquire pairs with a thread's Release decrement on exit.
        self.sh.live.load(Ordering::Acquire) > 0
    }

    fn stop_and_join(&self) {
        // Ordering: Release pairs with the threads' Acquire loads.
        self.sh.stop.store(true, Ordering::Release);
        self.sh.wake_all();
        let handles = std::mem::take(&mut *self.lock_handles());
        for h in handles {
            let _ = h.join();
        }
    }

    /// Machine teardown.
    pub(crate) fn shutdown(&self) {
        self.stop_and_join();
    }

    /// Fault injection: every thread of the device exits after its current work-group and none
    /// is started again.
    pub(crate) fn kill(&self) {
        {
            let _h = self.lock_handles();
            // Ordering: Relaxed; only changed under the handles lock.
            self.killed.store(true, Ordering::Relaxed);
        }
        self.stop_and_join();
    }

    /// Wakes the role holder if it naps (a process started to wait for the device).
    pub(crate) fn kick(&self) {
        self.sh.wake_holder();
    }

    /// Work-groups launched and not yet handed to a worker (tests: "everything is queued").
    pub(crate) fn pending_work_groups(&self) -> u64 {
        self.sh.counters.pending()
    }
}

/// Launches from one packet-processor round: a dispatch whose queue has nothing else to start
/// runs on the holder at once ([`LaunchSink::run_here`]); of the others, the first
/// single-work-group dispatch may run on the holder after the round, the rest go to the
/// scheduler's list.
struct RoundSink<'a> {
    sh: &'a Shared,
    /// The holder's token.
    token: usize,
    inline: Option<Job>,
    listed: bool,
    /// The worker of the last dispatch run here, kept for the next one while nothing else
    /// needs it (it saves freeing and claiming a worker per dispatch).
    kept: Option<u32>,
    /// A vacancy is announced for the dispatches run here: one for the whole round, so that a
    /// standby takes the role when they keep the holder from the other queues for long.
    vacant: bool,
}

impl RoundSink<'_> {
    /// Frees the kept worker.
    fn let_go(&mut self) {
        if let Some(w) = self.kept.take() {
            self.sh.counters.release(w);
        }
    }
}

impl LaunchSink for RoundSink<'_> {
    fn launch(&mut self, d: Dispatch<'static>) {
        self.let_go();
        let sh = self.sh;
        let c = &sh.counters;
        // Nothing waits for a worker (else it goes first), and one is free: run it here. (Only
        // this role lists work-groups, so `pending` cannot grow behind this check's back.)
        if self.inline.is_none() && d.work_groups == 1 && c.pending() == 0 {
            if let Some(worker) = c.claim(d.workers) {
                self.inline = Some(Job::Single { d, worker });
                return;
            }
        }
        sh.lock_sched().insert(d, c);
        self.listed = true;
    }

    fn claim(&mut self, d: &Dispatch<'_>) -> Option<u32> {
        let c = &self.sh.counters;
        // As for `inline`: nothing waits for a worker (only this role lists work-groups, and
        // it lets the kept worker go first), and one is free.
        if d.work_groups != 1 || c.pending() != 0 {
            return None;
        }
        match self.kept.take() {
            Some(w) if d.workers & (1 << w) != 0 => Some(w),
            Some(w) => {
                c.release(w);
                c.claim(d.workers)
            }
            None => c.claim(d.workers),
        }
    }

    fn run_here(&mut self, d: &Dispatch<'_>, worker: u32) -> bool {
        if !self.vacant {
            self.sh.announce_vacancy();
            self.vacant = true;
        }
        let outcome = run_work_group(&self.sh.dev, d, 0, worker, &MemView::new(&d.tr));
        self.kept = Some(worker);
        self.sh.complete(d, Some(outcome));
        // Ordering: Relaxed; a standby took the role meanwhile (see `run_cp`).
        let holder = self.sh.holder.load(Ordering::Relaxed) == self.token;
        if !holder {
            self.let_go();
        }
        holder
    }
}

#[allow(clippy::large_enum_variant)]
enum Exit {
    /// The engine stops.
    Stop,
    /// Another thread took the role.
    Demoted,
    /// Run this work-group here.
    Run(Job),
}

impl Shared {
    fn lock_sched(&self) -> MutexGuard<'_, Sched> {
        self.sched.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn stopping(&self) -> bool {
        // Ordering: Acquire pairs with stop_and_join's Release store.
        self.stop.load(Ordering::Acquire)
    }

    fn thread(&self, i: usize) -> Option<&Thread> {
        self.threads.get().and_then(|t| t.get(i))
    }

    fn wake_all(&self) {
        if let Some(ts) = self.threads.get() {
            for t in ts {
                t.unpark();
            }
        }
    }

    /// Wakes up to `n` parked threads.
    fn wake(&self, mut n: u32) {
        while n > 0 {
            // Ordering: Acquire pairs with a sleeper's Release registration.
            let s = self.sleepers.load(Ordering::Acquire);
            if s == 0 {
                return;
            }
            let i = s.trailing_zeros() as usize;
            // Ordering: AcqRel; whoever clears the bit unparks the thread.
            if self.sleepers.fetch_and(!(1 << i), Ordering::AcqRel) & (1 << i) != 0 {
                if let Some(t) = self.thread(i) {
                    t.unpark();
                }
                n -= 1;
            }
        }
    }

    /// How many work-groups could start now, at most (pending, with a free worker).
    fn startable(&self) -> u32 {
        let c = &self.counters;
        let pending = c.pending();
        if pending == 0 {
            return 0;
        }
        c.free().count_ones().min(u32::try_from(pending).unwrap_or(u32::MAX))
    }

    fn take(&self) -> Option<Job> {
        if self.counters.pending() == 0 || self.counters.free() == 0 {
            return None;
        }
        self.lock_sched().take(&self.counters)
    }

    fn thread_main(self: Arc<Self>, me: usize) {
        // A doorbell should be noticed within a nap of a few µs: the default timer slack
        // (50 µs) would stretch every nap to that.
        // SAFETY: PR_SET_TIMERSLACK only changes this thread's timer slack.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong) };
        let mut pp = PacketProcessor::new(Arc::clone(&self.dev));
        let token = me + 1;
        loop {
            if self.stopping() {
                break;
            }
            // Ordering: Acquire pairs with the Release of whoever set the role last.
            let h = self.holder.load(Ordering::Acquire);
            // Ordering: AcqRel/Relaxed; taking an unheld role.
            if h == token
                || (h == 0 && self.holder.compare_exchange(0, token, Ordering::AcqRel, Ordering::Relaxed).is_ok())
            {
                // Ordering: Release pairs with the standby's Acquire load of the vacancy.
                self.vacancy.store(0, Ordering::Release);
                // Ordering: Relaxed; a standby that became the holder stops being the standby.
                if self.standby.load(Ordering::Relaxed) == token {
                    self.standby.store(0, Ordering::Relaxed);
                }
                match self.run_cp(&mut pp, token) {
                    Exit::Stop => break,
                    Exit::Demoted => {}
                    Exit::Run(job) => self.run_as_holder(job),
                }
                continue;
            }
            if let Some(job) = self.take().or_else(|| self.idle(me)) {
                self.execute(job);
                // While the workers fill the cores the holder naps long: the workers look at the
                // doorbells between jobs for it.
                // Ordering: SeqCst; as in run_cp.
                if self.crowded && self.holder_napping.load(Ordering::SeqCst) && pp.has_work(false) {
                    self.wake_holder();
                }
            }
        }
        // Ordering: Release pairs with Engine::alive's Acquire load.
        self.live.fetch_sub(1, Ordering::Release);
    }

    /// The role holder's loop: rounds of the packet processor until there is a work-group to
    /// run here.
    fn run_cp(&self, cp: &mut PacketProcessor, token: usize) -> Exit {
        // When the holder last did something (read lazily: once per idle spell).
        let mut last_work: Option<Instant> = None;
        let mut nap = FIRST_NAP_US;
        let mut spins = 0u32;
        loop {
            if self.stopping() {
                return Exit::Stop;
            }
            // Ordering: Relaxed; a standby took the role (two pollers for a round are harmless).
            if self.holder.load(Ordering::Relaxed) != token {
                return Exit::Demoted;
            }
            let epoch = self.counters.epoch();
            let mut sink = RoundSink { sh: self, token, inline: None, listed: false, kept: None, vacant: false };
            let progress = cp.round(&mut sink);
            sink.let_go();
            let RoundSink { inline, listed, vacant, .. } = sink;
            if vacant {
                // Ordering: Release pairs with the standby's Acquire load: the vacancy is over.
                self.vacancy.store(0, Ordering::Release);
            }
            if listed {
                // Helpers for the listed work-groups (this thread takes one itself).
                let n = self.startable();
                self.wake(n.saturating_sub(u32::from(inline.is_none())));
            }
            if let Some(job) = inline.or_else(|| self.take()) {
                return Exit::Run(job);
            }
            if progress {
                last_work = None;
                nap = FIRST_NAP_US;
                spins = 0;
                continue;
            }
            let idle_since = *last_work.get_or_insert_with(Instant::now);
            // Idle: peek until something arrives (a doorbell, a completion, a freed worker).
            loop {
                if self.stopping() {
                    return Exit::Stop;
                }
                // Every worker runs a work-group and the workers fill the host's cores: nothing
                // could run here before a worker frees, and whoever frees one takes the next
                // work-group itself, so the holder naps instead of spinning on their cores.
                if self.crowded && self.counters.free() == 0 {
                    // Ordering: SeqCst; as below.
                    self.holder_napping.store(true, Ordering::SeqCst);
                    if !cp.has_work(true) && self.counters.free() == 0 {
                        std::thread::park_timeout(Duration::from_micros(BUSY_NAP_US));
                    }
                    // Ordering: Relaxed; only this thread sets it.
                    self.holder_napping.store(false, Ordering::Relaxed);
                    if cp.has_work(true) {
                        break;
                    }
                    continue;
                }
                spins = spins.wrapping_add(1);
                // Stalled packets wait on memory others write: look at it every 64th peek.
                if cp.has_work(spins % 64 == 0) || self.counters.epoch() != epoch {
                    break;
                }
                // The clock is read every 64th peek only.
                if spins % 64 != 0 || idle_since.elapsed() < SPIN {
                    std::hint::spin_loop();
                    continue;
                }
                // Ordering: SeqCst, with a completion's SeqCst load of the flag after its
                // retirement: either it sees the nap coming or the re-check below sees the
                // completion.
                self.holder_napping.store(true, Ordering::SeqCst);
                if !cp.has_work(true) && self.counters.epoch() == epoch {
                    std::thread::park_timeout(Duration::from_micros(nap));
                    let idle = idle_since.elapsed();
                    if idle > DEEP_IDLE {
                        nap = DEEP_NAP_US;
                    } else if idle > SHORT_NAPS {
                        nap = (nap * 2).min(MAX_NAP_US);
                    }
                }
                // Ordering: Relaxed; only this thread sets it.
                self.holder_napping.store(false, Ordering::Relaxed);
            }
        }
    }

    /// Runs a job on the role holder, which keeps the role.
    fn run_as_holder(&self, job: Job) {
        self.announce_vacancy();
        self.execute(job);
    }

    /// The role holder is about to run a work-group: the vacancy tells a standby to take the
    /// role if the work-group runs long.
    fn announce_vacancy(&self) {
        // Only the holder writes the counter.
        // Ordering: Relaxed; see above.
        let n = self.vacancies.load(Ordering::Relaxed) + 1;
        // Ordering: Relaxed; see above.
        self.vacancies.store(n, Ordering::Relaxed);
        // Ordering: Release; the standby compares numbers only.
        self.vacancy.store(n, Ordering::Release);
        // Ordering: Acquire pairs with a standby's registration.
        if self.standby.load(Ordering::Acquire) == 0 {
            self.wake(1);
        }
    }

    /// Runs a job, frees its worker, completes its dispatch if this was the last work-group.
    fn execute(&self, job: Job) {
        let (worker, outcome) = match &job {
            Job::Single { d, worker } => {
                (*worker, Some(run_work_group(&self.dev, d, 0, *worker, &MemView::new(&d.tr))))
            }
            // Ordering: Relaxed; a failed dispatch's remaining work-groups are skipped.
            Job::Group { r, .. } if r.failed.load(Ordering::Relaxed) => (job_worker(&job), None),
            Job::Group { r, n, count, worker } => (*worker, run_group_run(&self.dev, r, *n, *count, *worker)),
        };
        let d = match &job {
            Job::Single { d, .. } => d,
            Job::Group { r, .. } => &r.d,
        };
        self.finish(d, worker, outcome);
    }

    /// After a work-group of `d` ran on `worker`: frees the worker and completes the dispatch.
    fn finish(&self, d: &Dispatch<'_>, worker: u32, outcome: Option<Result<(), crate::KernelError>>) {
        self.counters.release(worker);
        self.complete(d, outcome);
    }

    /// With the `outcome` of a dispatch's work-groups (`None` while others remain), completes it
    /// or fails its queue.
    fn complete(&self, d: &Dispatch<'_>, outcome: Option<Result<(), crate::KernelError>>) {
        let dev = &*self.dev;
        match outcome {
            Some(Ok(())) => {
                if let Err(va) = d.complete(&dev.clock) {
                    dev.fail(&d.queue, Failure::Memory(va));
                }
            }
            Some(Err(e)) => dev.fail(&d.queue, Failure::from(e)),
            None => return,
        }
        // A completion may unblock a barrier bit: wake a napping role holder.
        self.wake_holder();
    }

    /// Unparks the role holder if it naps.
    fn wake_holder(&self) {
        // Ordering: SeqCst; see run_cp.
        if self.holder_napping.load(Ordering::SeqCst) {
            // Ordering: Relaxed; a hint for whom to wake.
            let h = self.holder.load(Ordering::Relaxed);
            if let Some(t) = h.checked_sub(1).and_then(|i| self.thread(i)) {
                t.unpark();
            }
        }
    }

    /// A thread with nothing to do: the standby naps and watches the role; others park until
    /// woken. Returns work if some turned up.
    fn idle(&self, me: usize) -> Option<Job> {
        // Ordering: AcqRel; at most one standby.
        if self.standby.compare_exchange(0, me + 1, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
            let mut seen = 0;
            let mut quiet = 0;
            let mut epoch = u64::MAX;
            // Ordering: Relaxed; a counter compared with itself.
            let mut vacancies = self.vacancies.load(Ordering::Relaxed);
            let job = loop {
                if self.stopping() {
                    break None;
                }
                let e = self.counters.epoch();
                if e != epoch {
                    epoch = e;
                    if let Some(job) = self.take() {
                        break Some(job);
                    }
                }
                // Ordering: Acquire pairs with the Release of whoever set the role last.
                let h = self.holder.load(Ordering::Acquire);
                // Ordering: Acquire pairs with the holder's Release stores (see thread_main).
                let v = self.vacancy.load(Ordering::Acquire);
                if h == 0 || (v != 0 && v == seen) {
                    // Nobody holds the role, or the holder has run one work-group for a whole
                    // nap: take the role. (If the holder came back meanwhile, both poll for a
                    // round and it steps down.)
                    // Ordering: AcqRel; see above.
                    let _ = self.holder.compare_exchange(h, me + 1, Ordering::AcqRel, Ordering::Relaxed);
                    break None;
                }
                seen = v;
                // Quiet: the holder left the role for no work-group since the last nap.
                // Ordering: Relaxed; see above.
                let n = self.vacancies.load(Ordering::Relaxed);
                quiet = if n == vacancies { quiet + 1 } else { 0 };
                vacancies = n;
                if quiet > STANDBY_NAPS {
                    break None;
                }
                std::thread::park_timeout(STANDBY_NAP);
            };
            let _ = self.standby.compare_exchange(me + 1, 0, Ordering::AcqRel, Ordering::Relaxed);
            if job.is_some() || quiet <= STANDBY_NAPS {
                return job;
            }
        }
        // Park until woken.
        // Ordering: AcqRel; registration before the re-check below (a waker that misses the bit
        // has made the re-check see its work).
        self.sleepers.fetch_or(1 << me, Ordering::AcqRel);
        // Ordering: Relaxed; a hint (the main loop takes an unheld role).
        let unheld = self.holder.load(Ordering::Relaxed) == 0;
        let job = self.take();
        if job.is_none() && !self.stopping() && !unheld {
            std::thread::park();
        }
        // Ordering: AcqRel; see above.
        self.sleepers.fetch_and(!(1 << me), Ordering::AcqRel);
        job
    }
}

/// Runs work-groups `n .. n + count` of `r` in turn on `worker`: the dispatch's outcome if
/// this ended it (its last work-group, or a failure), else `None`. A failure elsewhere drops
/// the rest of the run. The run's work-groups share one view of memory, and so its hints.
fn run_group_run(dev: &Device, r: &Running, n: u64, count: u64, worker: u32) -> Option<Result<(), crate::KernelError>> {
    let mem = MemView::new(&r.d.tr);
    for m in n..n + count {
        // Ordering: Relaxed; a failed dispatch's remaining work-groups are skipped.
        if m > n && r.failed.load(Ordering::Relaxed) {
            return None;
        }
        if let Err(e) = run_work_group(dev, &r.d, m, worker, &mem) {
            // Ordering: Relaxed; see above.
            r.failed.store(true, Ordering::Relaxed);
            return Some(Err(e));
        }
    }
    // Ordering: AcqRel: every work-group's writes happen-before the completion the last one
    // performs.
    (r.remaining.fetch_sub(count, Ordering::AcqRel) == count).then_some(Ok(()))
}

fn job_worker(job: &Job) -> u32 {
    match job {
        Job::Single { worker, .. } | Job::Group { worker, .. } => *worker,
    }
}

/// Runs work-group `n` of `d` on `worker` of `dev`, through `mem` (a view of `d`'s memory).
fn run_work_group(
    dev: &Device,
    d: &Dispatch<'_>,
    n: u64,
    worker: u32,
    mem: &MemView<'_>,
) -> Result<(), crate::KernelError> {
    let ctx = KernelCtx {
        packet: d.packet,
        grid: d.grid,
        workgroup_size: d.workgroup_size,
        workgroup_count: d.workgroup_count,
        kernarg: d.kernarg.as_slice(),
        args: &d.twin.args,
        mem,
        packet_address: d.packet_va,
        queue_address: d.queue.queue_va,
        dispatch_id: d.index,
        worker,
        clock: &dev.clock,
        events: &d.queue.events,
    };
    (d.twin.f)(&ctx, d.work_group(n))
}
