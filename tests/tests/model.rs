//! Model-based property test: random sequences of stream, event, capture, graph, context
//! (detach) and thread-mode calls, run against the loopback runtime and against a small
//! reference model of HIP's semantics (docs/hip-semantics.md). After every call the result code
//! must match the model's, and so must every observable state: each stream's capture status and
//! detach flag, and the number of times each stream's kernels ran.
//!
//! Each call is made as one of two host threads, and they are two *identities*, not concurrency:
//! the calls of thread 1 run on a worker OS thread (so it has its own thread key, per-thread
//! stream and capture mode, and the thread-mode and wrong-thread rules apply), but every call
//! runs alone, in the generated order, the test waiting for each before sending the next. Races
//! between threads are the stress and loom suites' subject, not this one's.
//!
//! Cases: `AQUEDUCT_PROPTEST_CASES` (default 256; CI runs 10,000 through `scripts/verify
//! model`; a long run is e.g. `AQUEDUCT_PROPTEST_CASES=1000000 cargo test --release -p
//! aqueduct-tests --test model`). Under Miri a handful of cases run.
//!
//! What the model leaves out (so the generator never asks for it): a stream joining a capture
//! through an event recorded in it (fork/join and "unjoined" work, covered by the capture
//! suite), work on the null stream while a capture exists (its implicit-capture rules), graph
//! launches into a capturing stream, and the stream/event tables running full.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;

use aqueduct::loopback::{Loopback, LoopbackMemory};
use aqueduct::{
    CaptureMode, CaptureStatus, ContextHandle, Error, EventHandle, GraphExecHandle, GraphHandle, Runtime, StreamHandle,
};
use aqueduct_tests::{inc_kernel, kernel_launch, StdThreads};
use proptest::prelude::*;
use proptest::test_runner::Config;
use proptest_state_machine::{prop_state_machine, ReferenceStateMachine, StateMachineTest};

/// The default tables with a loopback of 16 queues of 16 packets, 96 signals, 64 KiB of heap.
type Device = aqueduct::Capacities<32, 64, 8, 64, 4, 32, 2, 40, 16, 8, 16, 16, 64, 96, 65536>;
type Mem = LoopbackMemory<Device>;
type Lb = Loopback<'static, Device>;
type Rt = Runtime<Lb, StdThreads, aqueduct::Capacities<16, 24, 4, 32, 4, 32, 2>>;

/// Most live streams, events and contexts the generator asks for (below the tables' sizes).
const MAX_LIVE_STREAMS: usize = 8;
const MAX_LIVE_EVENTS: usize = 8;
const MAX_LIVE_CONTEXTS: usize = 4;
const MAX_CAPTURED_NODES: usize = 24;
const GRAPH_SLOTS: usize = 4;
const EXEC_SLOTS: usize = 2;

// ----- the reference model ------------------------------------------------------------------

/// A stream operand: the null stream or the k-th stream ever created (possibly destroyed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum S {
    Null,
    Idx(usize),
}

/// Which host thread makes the call.
type Th = usize;

#[derive(Debug, Clone)]
enum Op {
    Create { non_blocking: bool },
    Destroy(S),
    Launch(S, Th),
    Sync(S, Th),
    Query(S),
    IsCapturing(S),
    EventCreate,
    EventDestroy(usize),
    Record(usize, S),
    WaitEvent(S, usize),
    EventQuery(usize, Th),
    Begin(S, u32, Th),
    End(S, Th),
    Instantiate(usize),
    GraphLaunch(usize, S),
    GraphDestroy(usize),
    ExecDestroy(usize),
    CtxCreate,
    CtxStreamCreate(usize),
    CtxDestroy(usize),
    ExchangeMode(u32, Th),
}

/// What a call returned, in the terms the model predicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Done,
    Status(CaptureStatus),
    Mode(CaptureMode),
}

type Res = Result<Outcome, Error>;

#[derive(Debug, Clone, Default)]
struct MStream {
    live: bool,
    non_blocking: bool,
    detached: bool,
    ctx: Option<usize>,
    /// The live capture it takes part in.
    cap: Option<usize>,
    /// A detached member of a torn-down capture stays visibly Invalidated.
    sticky_invalidated: bool,
    /// Kernels that ran on it.
    ran: u32,
}

#[derive(Debug, Clone)]
struct MEvent {
    live: bool,
    /// Last recorded inside this (live) capture.
    captured: Option<usize>,
    /// Last recorded on this stream (None: never, or on the null stream).
    recorded_on: Option<S>,
}

#[derive(Debug, Clone)]
struct MCapture {
    live: bool,
    origin: usize,
    mode: CaptureMode,
    thread: Th,
    invalidated: bool,
    /// The stream each captured kernel increments.
    nodes: Vec<usize>,
}

#[derive(Debug, Clone)]
struct MGraph {
    live: bool,
    nodes: Vec<usize>,
}

#[derive(Debug, Clone, Default)]
struct Model {
    streams: Vec<MStream>,
    null_ran: u32,
    events: Vec<MEvent>,
    caps: Vec<MCapture>,
    graphs: Vec<MGraph>,
    execs: Vec<MGraph>,
    ctxs: Vec<bool>,
    modes: [Option<CaptureMode>; 2],
    /// The result the last call must have had.
    expect: Option<Res>,
}

fn mode_of(raw: u32) -> Option<CaptureMode> {
    match raw {
        0 => Some(CaptureMode::Global),
        1 => Some(CaptureMode::ThreadLocal),
        2 => Some(CaptureMode::Relaxed),
        _ => None,
    }
}

impl Model {
    fn live_cap(&self, i: usize) -> Option<usize> {
        self.streams.get(i)?.cap.filter(|&c| self.caps[c].live)
    }

    fn any_live_cap(&self) -> bool {
        self.caps.iter().any(|c| c.live)
    }

    fn status(&self, i: usize) -> CaptureStatus {
        match self.live_cap(i) {
            Some(c) if self.caps[c].invalidated => CaptureStatus::Invalidated,
            Some(_) => CaptureStatus::Active,
            None if self.streams[i].sticky_invalidated => CaptureStatus::Invalidated,
            None => CaptureStatus::None,
        }
    }

    fn graph_slots_used(&self) -> usize {
        self.caps.iter().filter(|c| c.live).count() + self.graphs.iter().filter(|g| g.live).count()
    }

    fn thread_mode(&self, th: Th) -> CaptureMode {
        self.modes[th].unwrap_or(CaptureMode::Global)
    }

    /// The thread-mode rule for potentially unsafe calls: prohibited calls invalidate the
    /// captures that prohibit them.
    fn check_unsafe(&mut self, th: Th) -> Result<(), Error> {
        let mode = self.thread_mode(th);
        let mut prohibited = false;
        for cap in self.caps.iter_mut().filter(|c| c.live && !c.invalidated) {
            let own = cap.thread == th && cap.mode != CaptureMode::Relaxed;
            let hit = match mode {
                CaptureMode::Global => own || cap.mode == CaptureMode::Global,
                CaptureMode::ThreadLocal => own,
                CaptureMode::Relaxed => false,
            };
            if hit {
                cap.invalidated = true;
                prohibited = true;
            }
        }
        if prohibited {
            Err(Error::StreamCaptureUnsupported)
        } else {
            Ok(())
        }
    }

    fn teardown(&mut self, c: usize, keep_graph: bool) {
        self.caps[c].live = false;
        for s in self.streams.iter_mut().filter(|s| s.cap == Some(c)) {
            s.cap = None;
            s.sticky_invalidated = s.detached;
        }
        for e in self.events.iter_mut().filter(|e| e.captured == Some(c)) {
            e.captured = None;
        }
        if keep_graph {
            let nodes = self.caps[c].nodes.clone();
            self.graphs.push(MGraph { live: true, nodes });
        }
    }

    /// Resolution of a stream operand: `stale` for destroyed streams.
    fn resolve(&self, s: S, stale: Error) -> Result<Option<usize>, Error> {
        match s {
            S::Null => Ok(None),
            S::Idx(i) if self.streams[i].live => Ok(Some(i)),
            S::Idx(_) => Err(stale),
        }
    }

    /// Resolution for async work: stale is `InvalidValue` while any capture exists.
    fn resolve_for_work(&self, s: S) -> Result<Option<usize>, Error> {
        let stale = if self.any_live_cap() { Error::InvalidValue } else { Error::ContextIsDestroyed };
        let i = self.resolve(s, stale)?;
        if i.is_some_and(|i| self.streams[i].detached) {
            return Err(Error::StreamDetached);
        }
        Ok(i)
    }

    fn sync(&mut self, s: S, th: Th) -> Res {
        let Some(i) = self.resolve(s, Error::ContextIsDestroyed)? else { return Ok(Outcome::Done) };
        if self.streams[i].detached {
            return Err(Error::StreamDetached);
        }
        if let Some(c) = self.live_cap(i) {
            self.caps[c].invalidated = true;
            return Err(Error::StreamCaptureUnsupported);
        }
        self.check_unsafe(th)?;
        Ok(Outcome::Done)
    }

    fn step(&mut self, op: &Op) -> Res {
        match *op {
            Op::Create { non_blocking } => {
                self.streams.push(MStream { live: true, non_blocking, ..MStream::default() });
                Ok(Outcome::Done)
            }
            Op::Destroy(s) => {
                let S::Idx(i) = s else { return Err(Error::InvalidHandle) };
                if !self.streams[i].live {
                    return Err(Error::ContextIsDestroyed);
                }
                if let Some(c) = self.live_cap(i) {
                    if self.caps[c].origin == i {
                        self.teardown(c, false);
                    } else {
                        self.streams[i].cap = None;
                    }
                }
                self.streams[i].live = false;
                Ok(Outcome::Done)
            }
            Op::Launch(s, _) => {
                let Some(i) = self.resolve_for_work(s)? else {
                    self.null_ran += 1;
                    return Ok(Outcome::Done);
                };
                match self.live_cap(i) {
                    Some(c) if self.caps[c].invalidated => Err(Error::StreamCaptureInvalidated),
                    Some(c) => {
                        self.caps[c].nodes.push(i);
                        Ok(Outcome::Done)
                    }
                    None => {
                        self.streams[i].ran += 1;
                        Ok(Outcome::Done)
                    }
                }
            }
            Op::Sync(s, th) => self.sync(s, th),
            Op::Query(s) => self.sync(s, 0),
            Op::IsCapturing(s) => match self.resolve(s, Error::ContextIsDestroyed)? {
                None => {
                    let blocking_capturing = self
                        .streams
                        .iter()
                        .enumerate()
                        .any(|(i, st)| st.live && !st.non_blocking && self.status(i) == CaptureStatus::Active);
                    if blocking_capturing {
                        Err(Error::StreamCaptureImplicit)
                    } else {
                        Ok(Outcome::Status(CaptureStatus::None))
                    }
                }
                Some(i) => Ok(Outcome::Status(self.status(i))),
            },
            Op::EventCreate => {
                self.events.push(MEvent { live: true, captured: None, recorded_on: None });
                Ok(Outcome::Done)
            }
            Op::EventDestroy(e) => {
                if !self.events[e].live {
                    return Err(Error::ContextIsDestroyed);
                }
                self.events[e].live = false;
                Ok(Outcome::Done)
            }
            Op::Record(e, s) => {
                if !self.events[e].live {
                    return Err(Error::ContextIsDestroyed);
                }
                let i = self.resolve_for_work(s)?;
                let cap = i.and_then(|i| self.live_cap(i));
                match cap {
                    Some(c) if self.caps[c].invalidated => Err(Error::StreamCaptureInvalidated),
                    Some(c) => {
                        self.events[e].captured = Some(c);
                        self.events[e].recorded_on = Some(s);
                        Ok(Outcome::Done)
                    }
                    None => {
                        // A record outside any capture makes the event a plain event again.
                        self.events[e].captured = None;
                        self.events[e].recorded_on = i.map(|_| s);
                        Ok(Outcome::Done)
                    }
                }
            }
            Op::WaitEvent(s, e) => {
                if !self.events[e].live {
                    return Err(Error::ContextIsDestroyed);
                }
                let i = self.resolve_for_work(s)?;
                let mine = i.and_then(|i| self.live_cap(i));
                if let Some(a) = mine {
                    if self.caps[a].invalidated {
                        return Err(Error::StreamCaptureInvalidated);
                    }
                }
                let theirs = self.events[e].captured.filter(|&c| self.caps[c].live);
                match (mine, theirs) {
                    (Some(a), Some(b)) if a == b => Ok(Outcome::Done),
                    (Some(a), Some(b)) => {
                        self.caps[a].invalidated = true;
                        self.caps[b].invalidated = true;
                        Err(Error::StreamCaptureMerge)
                    }
                    (None, Some(b)) => {
                        // Only the null stream reaches here (joins are not generated).
                        if self.caps[b].invalidated {
                            Err(Error::InvalidValue)
                        } else {
                            Err(Error::StreamCaptureImplicit)
                        }
                    }
                    (Some(_), None) => match self.events[e].recorded_on {
                        Some(S::Idx(p)) if self.streams[p].live && self.live_cap(p).is_some() => {
                            Err(Error::StreamCaptureIsolation)
                        }
                        _ => Ok(Outcome::Done),
                    },
                    (None, None) => Ok(Outcome::Done),
                }
            }
            Op::EventQuery(e, th) => {
                if !self.events[e].live {
                    return Err(Error::ContextIsDestroyed);
                }
                if let Some(c) = self.events[e].captured.filter(|&c| self.caps[c].live && !self.caps[c].invalidated) {
                    self.caps[c].invalidated = true;
                    return Err(Error::CapturedEvent);
                }
                if matches!(self.events[e].recorded_on, Some(S::Idx(_))) {
                    self.check_unsafe(th)?;
                }
                Ok(Outcome::Done)
            }
            Op::Begin(s, raw, th) => {
                let S::Idx(i) = s else { return Err(Error::StreamCaptureUnsupported) };
                if !self.streams[i].live {
                    return Err(Error::ContextIsDestroyed);
                }
                if self.streams[i].detached {
                    return Err(Error::StreamDetached);
                }
                let mode = mode_of(raw).ok_or(Error::InvalidValue)?;
                if self.live_cap(i).is_some() {
                    return Err(Error::IllegalState);
                }
                if self.graph_slots_used() >= GRAPH_SLOTS {
                    return Err(Error::OutOfMemory);
                }
                self.caps.push(MCapture { live: true, origin: i, mode, thread: th, invalidated: false, nodes: vec![] });
                self.streams[i].cap = Some(self.caps.len() - 1);
                self.streams[i].sticky_invalidated = false;
                Ok(Outcome::Done)
            }
            Op::End(s, th) => {
                let S::Idx(i) = s else { return Err(Error::IllegalState) };
                if !self.streams[i].live {
                    return Err(Error::ContextIsDestroyed);
                }
                if self.streams[i].detached {
                    return Err(Error::StreamDetached);
                }
                let c = self.live_cap(i).ok_or(Error::IllegalState)?;
                if self.caps[c].origin != i {
                    return Err(Error::StreamCaptureUnmatched);
                }
                if self.caps[c].mode != CaptureMode::Relaxed && self.caps[c].thread != th {
                    return Err(Error::StreamCaptureWrongThread);
                }
                if self.caps[c].invalidated {
                    self.teardown(c, false);
                    return Err(Error::StreamCaptureInvalidated);
                }
                self.teardown(c, true);
                Ok(Outcome::Done)
            }
            Op::Instantiate(g) => {
                if !self.graphs[g].live {
                    return Err(Error::InvalidValue);
                }
                if self.execs.iter().filter(|x| x.live).count() >= EXEC_SLOTS {
                    return Err(Error::OutOfMemory);
                }
                let nodes = self.graphs[g].nodes.clone();
                self.execs.push(MGraph { live: true, nodes });
                Ok(Outcome::Done)
            }
            Op::GraphLaunch(x, s) => {
                if !self.execs[x].live {
                    return Err(Error::InvalidValue);
                }
                let i = self.resolve(s, Error::ContextIsDestroyed)?;
                if let Some(i) = i {
                    if self.streams[i].detached {
                        return Err(Error::StreamDetached);
                    }
                }
                let nodes = self.execs[x].nodes.clone();
                for n in nodes {
                    self.streams[n].ran += 1;
                }
                Ok(Outcome::Done)
            }
            Op::GraphDestroy(g) => {
                if !self.graphs[g].live {
                    return Err(Error::InvalidValue);
                }
                self.graphs[g].live = false;
                Ok(Outcome::Done)
            }
            Op::ExecDestroy(x) => {
                if !self.execs[x].live {
                    return Err(Error::InvalidValue);
                }
                self.execs[x].live = false;
                Ok(Outcome::Done)
            }
            Op::CtxCreate => {
                self.ctxs.push(true);
                Ok(Outcome::Done)
            }
            Op::CtxStreamCreate(c) => {
                if !self.ctxs[c] {
                    return Err(Error::InvalidContext);
                }
                self.streams.push(MStream { live: true, non_blocking: true, ctx: Some(c), ..MStream::default() });
                Ok(Outcome::Done)
            }
            Op::CtxDestroy(c) => {
                if !self.ctxs[c] {
                    return Err(Error::InvalidContext);
                }
                for s in self.streams.iter_mut().filter(|s| s.live && s.ctx == Some(c)) {
                    s.detached = true;
                    s.ctx = None;
                }
                for i in 0..self.streams.len() {
                    if self.streams[i].live && self.streams[i].detached {
                        if let Some(cap) = self.live_cap(i) {
                            self.caps[cap].invalidated = true;
                            self.teardown(cap, false);
                        }
                    }
                }
                self.ctxs[c] = false;
                Ok(Outcome::Done)
            }
            Op::ExchangeMode(raw, th) => {
                let mode = mode_of(raw).ok_or(Error::InvalidValue)?;
                let old = self.thread_mode(th);
                self.modes[th] = Some(mode);
                Ok(Outcome::Mode(old))
            }
        }
    }

    /// Whether the generator may ask for `op` in this state (the model's domain).
    fn allows(&self, op: &Op) -> bool {
        let stream_ok = |s: &S| match s {
            S::Null => true,
            S::Idx(i) => *i < self.streams.len(),
        };
        let capturing = |s: &S| matches!(s, S::Idx(i) if self.live_cap(*i).is_some());
        let live_streams = self.streams.iter().filter(|s| s.live).count();
        match op {
            Op::Create { .. } => live_streams < MAX_LIVE_STREAMS,
            Op::CtxStreamCreate(c) => *c < self.ctxs.len() && live_streams < MAX_LIVE_STREAMS,
            Op::CtxCreate => self.ctxs.iter().filter(|c| **c).count() < MAX_LIVE_CONTEXTS,
            Op::CtxDestroy(c) => *c < self.ctxs.len(),
            Op::EventCreate => self.events.iter().filter(|e| e.live).count() < MAX_LIVE_EVENTS,
            Op::EventDestroy(e) | Op::EventQuery(e, _) => *e < self.events.len(),
            Op::Launch(s, _) => {
                stream_ok(s)
                    && !(*s == S::Null && self.any_live_cap())
                    && !matches!(s, S::Idx(i) if self.live_cap(*i)
                        .is_some_and(|c| self.caps[c].nodes.len() >= MAX_CAPTURED_NODES))
            }
            Op::Record(e, s) => *e < self.events.len() && stream_ok(s) && !(*s == S::Null && self.any_live_cap()),
            Op::WaitEvent(s, e) => {
                *e < self.events.len()
                    && stream_ok(s)
                    && !(*s == S::Null && self.any_live_cap())
                    // No joins: a stream outside a capture never waits on an event inside one.
                    && (capturing(s) || !self.events[*e].captured.is_some_and(|c| self.caps[c].live))
            }
            Op::Destroy(s)
            | Op::Sync(s, _)
            | Op::Query(s)
            | Op::IsCapturing(s)
            | Op::Begin(s, _, _)
            | Op::End(s, _) => stream_ok(s),
            Op::Instantiate(g) | Op::GraphDestroy(g) => *g < self.graphs.len(),
            Op::ExecDestroy(x) => *x < self.execs.len(),
            Op::GraphLaunch(x, s) => {
                *x < self.execs.len() && stream_ok(s) && !capturing(s) && !(*s == S::Null && self.any_live_cap())
            }
            Op::ExchangeMode(..) => true,
        }
    }
}

struct Reference;

fn stream_operand(n: usize) -> BoxedStrategy<S> {
    if n == 0 {
        Just(S::Null).boxed()
    } else {
        prop_oneof![1 => Just(S::Null), 6 => (0..n).prop_map(S::Idx)].boxed()
    }
}

impl ReferenceStateMachine for Reference {
    type State = Model;
    type Transition = Op;

    fn init_state() -> BoxedStrategy<Model> {
        Just(Model::default()).boxed()
    }

    fn transitions(m: &Model) -> BoxedStrategy<Op> {
        let s = || stream_operand(m.streams.len());
        let th = || 0..2usize;
        let (ne, ng, nx, nc) = (m.events.len(), m.graphs.len(), m.execs.len(), m.ctxs.len());
        let mut arms: Vec<(u32, BoxedStrategy<Op>)> = vec![
            (3, any::<bool>().prop_map(|non_blocking| Op::Create { non_blocking }).boxed()),
            (1, s().prop_map(Op::Destroy).boxed()),
            (6, (s(), th()).prop_map(|(s, t)| Op::Launch(s, t)).boxed()),
            (2, (s(), th()).prop_map(|(s, t)| Op::Sync(s, t)).boxed()),
            (1, s().prop_map(Op::Query).boxed()),
            (1, s().prop_map(Op::IsCapturing).boxed()),
            (2, Just(Op::EventCreate).boxed()),
            (
                4,
                (s(), prop_oneof![6 => 0..3u32, 1 => Just(3u32)], th())
                    .prop_map(|(s, m, t)| Op::Begin(s, m, t))
                    .boxed(),
            ),
            (4, (s(), th()).prop_map(|(s, t)| Op::End(s, t)).boxed()),
            (1, Just(Op::CtxCreate).boxed()),
            (1, (prop_oneof![6 => 0..3u32, 1 => Just(7u32)], th()).prop_map(|(m, t)| Op::ExchangeMode(m, t)).boxed()),
        ];
        // Operations on events, graphs, executables and contexts only once one exists.
        if ne > 0 {
            arms.push((1, (0..ne).prop_map(Op::EventDestroy).boxed()));
            arms.push((3, (0..ne, s()).prop_map(|(e, s)| Op::Record(e, s)).boxed()));
            arms.push((3, (s(), 0..ne).prop_map(|(s, e)| Op::WaitEvent(s, e)).boxed()));
            arms.push((1, (0..ne, th()).prop_map(|(e, t)| Op::EventQuery(e, t)).boxed()));
        }
        if ng > 0 {
            arms.push((2, (0..ng).prop_map(Op::Instantiate).boxed()));
            arms.push((1, (0..ng).prop_map(Op::GraphDestroy).boxed()));
        }
        if nx > 0 {
            arms.push((3, (0..nx, s()).prop_map(|(x, s)| Op::GraphLaunch(x, s)).boxed()));
            arms.push((1, (0..nx).prop_map(Op::ExecDestroy).boxed()));
        }
        if nc > 0 {
            arms.push((2, (0..nc).prop_map(Op::CtxStreamCreate).boxed()));
            arms.push((1, (0..nc).prop_map(Op::CtxDestroy).boxed()));
        }
        proptest::strategy::Union::new_weighted(arms).boxed()
    }

    fn preconditions(m: &Model, op: &Op) -> bool {
        m.allows(op)
    }

    fn apply(mut m: Model, op: &Op) -> Model {
        let r = m.step(op);
        m.expect = Some(r);
        m
    }
}

// ----- the system under test ----------------------------------------------------------------

type Job = Box<dyn FnOnce() + Send>;

/// The second host thread: runs calls sent to it, keeping one thread identity.
struct Worker {
    tx: Option<mpsc::Sender<Job>>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Worker {
    fn new() -> Worker {
        let (tx, rx) = mpsc::channel::<Job>();
        let handle = std::thread::spawn(move || {
            for job in rx {
                job();
            }
        });
        Worker { tx: Some(tx), handle: Some(handle) }
    }

    fn run<R: Send + 'static>(&self, f: impl FnOnce() -> R + Send + 'static) -> R {
        let (rtx, rrx) = mpsc::channel();
        let job: Job = Box::new(move || {
            let _ = rtx.send(f());
        });
        self.tx.as_ref().expect("worker running").send(job).expect("worker alive");
        rrx.recv().expect("worker answered")
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Runtime and memory of one case, freed at teardown (10,000 cases must not leak).
struct Sut {
    /// `Box::into_raw` of the runtime and of its memory. No reference to either is kept in
    /// the struct: a reference field would outlive the free in `drop` (Miri: protected tag).
    rt_ptr: *mut Rt,
    mem: *mut Mem,
    worker: Worker,
    inc: u64,
    streams: Vec<StreamHandle>,
    /// Boxed: kernels hold their addresses while the vector grows.
    #[allow(clippy::vec_box)]
    cells: Vec<Box<AtomicU32>>,
    null_cell: Box<AtomicU32>,
    events: Vec<EventHandle>,
    graphs: Vec<GraphHandle>,
    execs: Vec<GraphExecHandle>,
    ctxs: Vec<ContextHandle>,
}

impl Sut {
    fn new() -> Sut {
        let mem_ptr = Box::into_raw(Box::new(Mem::new()));
        // SAFETY: freshly boxed; freed only in `drop`, after the runtime that borrows it.
        let mem: &'static Mem = unsafe { &*mem_ptr };
        let rt_ptr = Box::into_raw(Box::new(Runtime::new(Loopback::new(mem), StdThreads)));
        // SAFETY: freshly boxed and live.
        let inc = unsafe { &*rt_ptr }.backend().register_kernel(inc_kernel).expect("register");
        Sut {
            rt_ptr,
            mem: mem_ptr,
            worker: Worker::new(),
            inc,
            streams: vec![],
            cells: vec![],
            null_cell: Box::new(AtomicU32::new(0)),
            events: vec![],
            graphs: vec![],
            execs: vec![],
            ctxs: vec![],
        }
    }

    fn rt(&self) -> &Rt {
        // SAFETY: live until `drop`, which runs after every use through `&self`.
        unsafe { &*self.rt_ptr }
    }

    fn stream(&self, s: S) -> StreamHandle {
        match s {
            S::Null => StreamHandle::NULL,
            S::Idx(i) => self.streams[i],
        }
    }

    fn cell_addr(&self, s: S) -> u64 {
        let c: &AtomicU32 = match s {
            S::Null => &self.null_cell,
            S::Idx(i) => &self.cells[i],
        };
        c.as_ptr() as usize as u64
    }

    /// Runs `f` on host thread `th` (0: this thread, 1: the worker).
    fn on<R: Send + 'static>(&self, th: Th, f: impl FnOnce(&'static Rt) -> R + Send + 'static) -> R {
        // SAFETY: the runtime outlives every call made here: `on` returns only after `f` ran,
        // and the worker is joined before the runtime is freed.
        let rt: &'static Rt = unsafe { &*self.rt_ptr };
        if th == 0 {
            f(rt)
        } else {
            self.worker.run(move || f(rt))
        }
    }

    fn apply(&mut self, op: &Op) -> Res {
        let done = |r: Result<(), Error>| r.map(|()| Outcome::Done);
        match *op {
            Op::Create { non_blocking } => {
                let r = self.rt().stream_create(u32::from(non_blocking));
                if let Ok(h) = r {
                    self.streams.push(h);
                    self.cells.push(Box::new(AtomicU32::new(0)));
                }
                r.map(|_| Outcome::Done)
            }
            Op::Destroy(s) => done(self.rt().stream_destroy(self.stream(s))),
            Op::Launch(s, th) => {
                let (h, args, k) = (self.stream(s), self.cell_addr(s).to_le_bytes(), self.inc);
                done(self.on(th, move |rt| rt.launch_kernel(h, &kernel_launch(k, &args))))
            }
            Op::Sync(s, th) => {
                let h = self.stream(s);
                done(self.on(th, move |rt| rt.stream_synchronize(h)))
            }
            Op::Query(s) => done(self.rt().stream_query(self.stream(s))),
            Op::IsCapturing(s) => self.rt().stream_is_capturing(self.stream(s)).map(Outcome::Status),
            Op::EventCreate => {
                let r = self.rt().event_create(0);
                if let Ok(e) = r {
                    self.events.push(e);
                }
                r.map(|_| Outcome::Done)
            }
            Op::EventDestroy(e) => done(self.rt().event_destroy(self.events[e])),
            Op::Record(e, s) => done(self.rt().event_record(self.events[e], self.stream(s), 0)),
            Op::WaitEvent(s, e) => done(self.rt().stream_wait_event(self.stream(s), self.events[e], 0)),
            Op::EventQuery(e, th) => {
                let e = self.events[e];
                done(self.on(th, move |rt| rt.event_query(e)))
            }
            Op::Begin(s, mode, th) => {
                let h = self.stream(s);
                done(self.on(th, move |rt| rt.stream_begin_capture(h, mode)))
            }
            Op::End(s, th) => {
                let h = self.stream(s);
                let r = self.on(th, move |rt| rt.stream_end_capture(h));
                if let Ok(g) = r {
                    self.graphs.push(g);
                }
                r.map(|_| Outcome::Done)
            }
            Op::Instantiate(g) => {
                let r = self.rt().graph_instantiate(self.graphs[g]);
                if let Ok(x) = r {
                    self.execs.push(x);
                }
                r.map(|_| Outcome::Done)
            }
            Op::GraphLaunch(x, s) => done(self.rt().graph_launch(self.execs[x], self.stream(s))),
            Op::GraphDestroy(g) => done(self.rt().graph_destroy(self.graphs[g])),
            Op::ExecDestroy(x) => done(self.rt().graph_exec_destroy(self.execs[x])),
            Op::CtxCreate => {
                let r = self.rt().context_create(&[]);
                if let Ok(c) = r {
                    self.ctxs.push(c);
                }
                r.map(|_| Outcome::Done)
            }
            Op::CtxStreamCreate(c) => {
                let r = self.rt().context_stream_create(self.ctxs[c], 0, 0);
                if let Ok(h) = r {
                    self.streams.push(h);
                    self.cells.push(Box::new(AtomicU32::new(0)));
                }
                r.map(|_| Outcome::Done)
            }
            Op::CtxDestroy(c) => done(self.rt().context_destroy(self.ctxs[c])),
            Op::ExchangeMode(mode, th) => {
                self.on(th, move |rt| rt.thread_exchange_capture_mode(mode)).map(Outcome::Mode)
            }
        }
    }
}

impl Drop for Sut {
    fn drop(&mut self) {
        // The worker goes first (it may hold a reference to the runtime), then the runtime,
        // then the memory it borrows.
        drop(std::mem::replace(&mut self.worker, Worker { tx: None, handle: None }));
        // SAFETY: `rt_ptr` and `mem` came from Box::into_raw in `new`; nothing uses them after
        // this point (the worker is joined, and the handles are plain integers), and the
        // runtime, which borrows the memory, is freed first.
        unsafe {
            drop(Box::from_raw(self.rt_ptr));
            drop(Box::from_raw(self.mem));
        }
    }
}

impl StateMachineTest for Sut {
    type SystemUnderTest = Sut;
    type Reference = Reference;

    fn init_test(_: &Model) -> Sut {
        Sut::new()
    }

    fn apply(mut sut: Sut, m: &Model, op: Op) -> Sut {
        let got = sut.apply(&op);
        assert_eq!(Some(got), m.expect, "{op:?}");
        sut
    }

    fn check_invariants(sut: &Sut, m: &Model) {
        for (i, ms) in m.streams.iter().enumerate() {
            let h = sut.streams[i];
            if !ms.live {
                assert_eq!(sut.rt().stream_is_capturing(h), Err(Error::ContextIsDestroyed), "stream {i} destroyed");
                continue;
            }
            assert_eq!(sut.rt().stream_is_capturing(h), Ok(m.status(i)), "capture status of stream {i}");
            assert_eq!(sut.rt().stream_is_detached(h), Ok(ms.detached), "detach flag of stream {i}");
            assert_eq!(sut.cells[i].load(Ordering::SeqCst), ms.ran, "kernels run on stream {i}");
        }
        assert_eq!(sut.null_cell.load(Ordering::SeqCst), m.null_ran, "kernels run on the null stream");
    }
}

fn cases() -> u32 {
    if cfg!(miri) {
        return 2;
    }
    std::env::var("AQUEDUCT_PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256)
}

prop_state_machine! {
    #![proptest_config(Config {
        cases: cases(),
        failure_persistence: None,
        max_shrink_iters: 4096,
        max_local_rejects: 10_000_000,
        .. Config::default()
    })]

    #[test]
    fn runtime_matches_the_reference_model(sequential 1..40 => Sut);
}

// ----- regressions the model found -------------------------------------------------------------

/// An event recorded inside a capture and then again on a stream outside it is a plain event:
/// waiting on it is an ordinary wait, not a join of the capture.
#[test]
fn event_recorded_again_outside_a_capture_is_a_plain_event() {
    let rt = aqueduct_tests::runtime();
    let (a, b) = (rt.stream_create(0).unwrap(), rt.stream_create(0).unwrap());
    let e = rt.event_create(0).unwrap();
    rt.stream_begin_capture(a, 2).unwrap();
    rt.event_record(e, a, 0).unwrap();
    rt.event_record(e, b, 0).unwrap();
    rt.stream_wait_event(b, e, 0).unwrap();
    assert_eq!(rt.stream_is_capturing(b), Ok(CaptureStatus::None));
    assert_eq!(rt.event_query(e), Ok(()));
    assert!(rt.stream_end_capture(a).is_ok());
}

/// A new event in the slot of a destroyed one does not inherit its capture record.
#[test]
fn a_reused_event_slot_forgets_the_capture() {
    let rt = aqueduct_tests::runtime();
    let (a, b) = (rt.stream_create(0).unwrap(), rt.stream_create(0).unwrap());
    let e = rt.event_create(0).unwrap();
    rt.stream_begin_capture(a, 2).unwrap();
    rt.event_record(e, a, 0).unwrap();
    rt.event_destroy(e).unwrap();
    let fresh = rt.event_create(0).unwrap();
    assert_eq!(rt.event_query(fresh), Ok(()));
    rt.stream_wait_event(b, fresh, 0).unwrap();
    assert_eq!(rt.stream_is_capturing(b), Ok(CaptureStatus::None));
    assert_eq!(rt.stream_is_capturing(a), Ok(CaptureStatus::Active));
    assert!(rt.stream_end_capture(a).is_ok());
}

/// A work-group whose size product does not fit in u32 is invalid (found by the api_sequence
/// fuzz target: the product overflowed, panicking in debug builds and wrapping to an accepted
/// size in release builds).
#[test]
fn a_work_group_product_past_u32_is_an_invalid_configuration() {
    let rt = aqueduct_tests::runtime();
    let k = aqueduct_tests::register(rt.backend());
    let s = rt.stream_create(0).unwrap();
    let mut l = kernel_launch(k.inc, &[]);
    l.workgroup = [1024, 1024, 4096];
    assert_eq!(rt.launch_kernel(s, &l), Err(Error::InvalidConfiguration));
    let g = rt.graph_create().unwrap();
    assert_eq!(rt.graph_add_kernel_node(g, &[], &l).map(|_| ()), Err(Error::InvalidConfiguration));
    rt.stream_begin_capture(s, 2).unwrap();
    assert_eq!(rt.launch_kernel(s, &l), Err(Error::InvalidConfiguration));
}
