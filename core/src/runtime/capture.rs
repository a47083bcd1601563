//! Stream capture (hip-semantics.md §2.3, §4): the capture table, begin/end, fork and join
//! through events, invalidation, and the thread-mode rule for potentially unsafe calls.
//!
//! Model: the newest HIP one. The stream that begins a capture is its *origin* and owns its
//! graph; streams that wait on an event recorded inside the capture join it (*forks*) and share
//! that graph, each with its own dependency set. Invalidation always covers the whole capture.
//! Every status change goes through [`Runtime::set_capture_status`].

use super::graphs::{check_launch, dispatch_node, wait_value_node, GraphHandle};
use portable_atomic::AtomicU64;
use portable_atomic::Ordering;

use super::{lookup_stream, Command, Recorded, Runtime, State};
use crate::backend::Backend;
use crate::capture::{CaptureInfo, DependencyUpdate};
use crate::capture::{CaptureMode, CaptureStatus, DepSet};
use crate::error::{Error, Result};
use crate::event::EventHandle;
use crate::graph::{NodeId, NodeKind};
use crate::stream::StreamHandle;
use crate::table::Lookup;
use crate::thread::{ThreadKey, ThreadKeys};

static NEXT_CAPTURE_ID: AtomicU64 = AtomicU64::new(1);

pub(super) struct CaptureSlot {
    pub(super) live: bool,
    pub(super) id: u64,
    pub(super) status: CaptureStatus,
    pub(super) mode: CaptureMode,
    pub(super) thread: Option<ThreadKey>,
    pub(super) origin: usize,
    pub(super) graph: usize,
    /// False for `hipStreamBeginCaptureToGraph`: the graph is the user's.
    pub(super) owns_graph: bool,
    /// Nodes dropped from a dependency set by a Set update (`removedDependencies_`).
    pub(super) removed: DepSet,
    /// Nodes below this id were in the graph before the capture began ("manual" nodes).
    pub(super) manual: u16,
}

impl CaptureSlot {
    pub(super) const fn new() -> Self {
        CaptureSlot {
            live: false,
            id: 0,
            status: CaptureStatus::None,
            mode: CaptureMode::Global,
            thread: None,
            origin: 0,
            graph: 0,
            owns_graph: true,
            removed: DepSet::EMPTY,
            manual: 0,
        }
    }
}

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
    // ----- state ---------------------------------------------------------------------------

    /// The live capture stream slot `i` takes part in.
    pub(super) fn capture_of(st: &State<B::Queue, S, E, T, M, G, N, X>, i: usize) -> Option<usize> {
        let c = usize::from(st.streams.get(i)?.capture?);
        st.captures.get(c).filter(|c| c.live).map(|_| c)
    }

    /// The status `hipStreamIsCapturing` reports for slot `i`.
    pub(super) fn capture_status_of(st: &State<B::Queue, S, E, T, M, G, N, X>, i: usize) -> CaptureStatus {
        st.streams.get(i).map_or(CaptureStatus::None, |s| s.capture_status)
    }

    /// Whether a capture is Active anywhere.
    pub(super) fn any_active_capture(st: &State<B::Queue, S, E, T, M, G, N, X>) -> bool {
        st.captures.iter().any(|c| c.live && c.status == CaptureStatus::Active)
    }

    /// Whether a capture exists anywhere (Active or Invalidated, not yet ended).
    pub(super) fn any_capture(st: &State<B::Queue, S, E, T, M, G, N, X>) -> bool {
        st.captures.iter().any(|c| c.live)
    }

    /// Whether a blocking stream (any device) is capturing: the legacy stream's implicit
    /// dependency would then reach into a capture.
    fn blocking_stream_capturing(st: &State<B::Queue, S, E, T, M, G, N, X>) -> bool {
        st.streams.iter().any(|s| s.is_blocking_user() && s.capture_status == CaptureStatus::Active)
    }

    /// The one transition function of capture statuses: capture `c` and all its members.
    pub(super) fn set_capture_status(st: &mut State<B::Queue, S, E, T, M, G, N, X>, c: usize, status: CaptureStatus) {
        let Some(cap) = st.captures.get_mut(c) else { return };
        if !cap.live {
            return;
        }
        trace!("capture {} -> {}", cap.id, status as u32);
        cap.status = status;
        for s in st.streams.iter_mut().filter(|s| s.capture == Some(c as u8)) {
            s.capture_status = status;
        }
    }

    /// Invalidates every live capture.
    pub(super) fn invalidate_all_captures(st: &mut State<B::Queue, S, E, T, M, G, N, X>) {
        for c in 0..G {
            Self::set_capture_status(st, c, CaptureStatus::Invalidated);
        }
    }

    /// Ends capture `c`: members back to None (detached members stay visibly Invalidated),
    /// captured events forget it, its graph is freed unless `keep_graph`.
    pub(super) fn teardown_capture(st: &mut State<B::Queue, S, E, T, M, G, N, X>, c: usize, keep_graph: bool) {
        let Some(cap) = st.captures.get_mut(c) else { return };
        if !cap.live {
            return;
        }
        cap.live = false;
        let (id, graph, owns) = (cap.id, cap.graph, cap.owns_graph);
        for s in st.streams.iter_mut().filter(|s| s.capture == Some(c as u8)) {
            s.capture = None;
            s.capture_deps = DepSet::EMPTY;
            s.capture_status = if s.detached { CaptureStatus::Invalidated } else { CaptureStatus::None };
        }
        for e in st.events.iter_mut().filter(|e| e.captured == Some((c as u8, id))) {
            e.captured = None;
            e.snapshot = DepSet::EMPTY;
        }
        if let Some(g) = st.graphs.get_mut(graph) {
            g.capture = None;
        }
        if owns && !keep_graph {
            Self::graph_free(st, graph);
        }
    }

    /// The calling thread's capture mode.
    fn thread_mode(&self, st: &State<B::Queue, S, E, T, M, G, N, X>) -> (ThreadKey, CaptureMode) {
        let key = self.keys.current();
        let mode = st.threads.iter().find(|t| t.key == Some(key)).map_or(CaptureMode::Global, |t| t.mode);
        (key, mode)
    }

    /// The thread-mode rule for a potentially unsafe call (§4.7): if prohibited, the captures
    /// that prohibit it are invalidated and `err` is returned.
    pub(super) fn check_unsafe_call(&self, st: &mut State<B::Queue, S, E, T, M, G, N, X>, err: Error) -> Result<()> {
        let (key, mode) = self.thread_mode(st);
        let mut prohibited = false;
        for c in 0..G {
            let Some(cap) = st.captures.get(c) else { continue };
            if !cap.live || cap.status != CaptureStatus::Active {
                continue;
            }
            let own = cap.thread == Some(key) && cap.mode != CaptureMode::Relaxed;
            let hit = match mode {
                CaptureMode::Global => own || cap.mode == CaptureMode::Global,
                CaptureMode::ThreadLocal => own,
                CaptureMode::Relaxed => false,
            };
            if hit {
                Self::set_capture_status(st, c, CaptureStatus::Invalidated);
                prohibited = true;
            }
        }
        if prohibited {
            Err(err)
        } else {
            Ok(())
        }
    }

    /// `hipStreamSynchronize`/`hipStreamQuery` on a created or per-thread stream while
    /// captures exist: a capturing target fails with `StreamCaptureUnsupported` and invalidates
    /// its capture in every mode; an idle one follows the thread-mode rule.
    pub(super) fn check_sync_target(&self, st: &mut State<B::Queue, S, E, T, M, G, N, X>, i: usize) -> Result<()> {
        if let Some(c) = Self::capture_of(st, i) {
            Self::set_capture_status(st, c, CaptureStatus::Invalidated);
            return Err(Error::StreamCaptureUnsupported);
        }
        self.check_unsafe_call(st, Error::StreamCaptureUnsupported)
    }

    /// `hipStreamAddCallback`'s capture checks: a capturing target → `StreamCaptureUnsupported`
    /// and invalidation; the legacy stream while a blocking stream captures →
    /// `StreamCaptureImplicit` and every capture invalidated.
    pub(super) fn check_callback_target(
        &self,
        st: &mut State<B::Queue, S, E, T, M, G, N, X>,
        s: StreamHandle,
        i: usize,
    ) -> Result<()> {
        if s.is_null_or_legacy() {
            if Self::blocking_stream_capturing(st) {
                Self::invalidate_all_captures(st);
                return Err(Error::StreamCaptureImplicit);
            }
            return Ok(());
        }
        if let Some(c) = Self::capture_of(st, i) {
            Self::set_capture_status(st, c, CaptureStatus::Invalidated);
            return Err(Error::StreamCaptureUnsupported);
        }
        Ok(())
    }

    /// Adds a node after stream `i`'s dependency set; the node becomes the new set.
    pub(super) fn add_captured_node(
        st: &mut State<B::Queue, S, E, T, M, G, N, X>,
        i: usize,
        kind: NodeKind,
    ) -> Result<NodeId> {
        let c = Self::capture_of(st, i).ok_or(Error::IllegalState)?;
        let g = st.captures.get(c).map(|c| c.graph).ok_or(Error::IllegalState)?;
        let deps = st.streams.get(i).map(|s| s.capture_deps).unwrap_or_default();
        let graph = &mut st.graphs.get_mut(g).ok_or(Error::IllegalState)?.graph;
        let node = graph.add_node(kind, deps.as_slice())?;
        if let Some(s) = st.streams.get_mut(i) {
            s.capture_deps = DepSet::one(node);
        }
        Ok(node)
    }

    /// Records one stream operation into stream `i`'s capture instead of running it.
    pub(super) fn capture_command(
        &self,
        st: &mut State<B::Queue, S, E, T, M, G, N, X>,
        i: usize,
        cmd: &Command<'_>,
    ) -> Result<()> {
        let kind = match *cmd {
            Command::Kernel(k) => {
                check_launch(&k)?;
                let g = Self::capture_graph(st, i)?;
                NodeKind::Dispatch(dispatch_node(
                    g,
                    k.kernel_object,
                    k.grid,
                    k.workgroup,
                    k.group_segment_size,
                    k.private_segment_size,
                    k.kernarg,
                )?)
            }
            Command::Builtin { kernel, ref args, len } => {
                let device = st.streams.get(i).map_or(0, |s| s.device);
                let object = self.backend.builtin_kernel(device, kernel)?;
                let args = args.get(..len).ok_or(Error::InvalidValue)?;
                let g = Self::capture_graph(st, i)?;
                NodeKind::Dispatch(dispatch_node(g, object, [1, 1, 1], [1, 1, 1], 0, 0, args)?)
            }
            Command::WaitValue { address, value, mask, cond } => {
                NodeKind::WaitValue(wait_value_node(address, value, mask, cond))
            }
            Command::HostFn(f) => NodeKind::Host(f),
            Command::Marker | Command::EventRecord(_) | Command::WaitEvent(_) => NodeKind::Empty,
        };
        Self::add_captured_node(st, i, kind).map(|_| ())
    }

    fn capture_graph(st: &mut State<B::Queue, S, E, T, M, G, N, X>, i: usize) -> Result<&mut crate::graph::Graph<N>> {
        let c = Self::capture_of(st, i).ok_or(Error::IllegalState)?;
        let g = st.captures.get(c).map(|c| c.graph).ok_or(Error::IllegalState)?;
        Ok(&mut st.graphs.get_mut(g).ok_or(Error::IllegalState)?.graph)
    }

    /// Stream `i` joins capture `c` (a fork) with `deps` as its dependency set.
    fn join_capture(st: &mut State<B::Queue, S, E, T, M, G, N, X>, i: usize, c: usize, deps: DepSet) {
        if let Some(s) = st.streams.get_mut(i) {
            s.capture = Some(c as u8);
            s.capture_status = CaptureStatus::Active;
            s.capture_deps = deps;
        }
    }

    /// A stream leaves its capture (a destroyed fork): the capture goes on.
    pub(super) fn leave_capture(st: &mut State<B::Queue, S, E, T, M, G, N, X>, i: usize) {
        if let Some(s) = st.streams.get_mut(i) {
            s.capture = None;
            s.capture_status = CaptureStatus::None;
            s.capture_deps = DepSet::EMPTY;
        }
    }

    /// What a destroyed stream does to its capture: the origin's capture is torn down with its
    /// graph, a fork leaves.
    pub(super) fn capture_on_destroy(st: &mut State<B::Queue, S, E, T, M, G, N, X>, i: usize) {
        if let Some(c) = Self::capture_of(st, i) {
            if st.captures.get(c).is_some_and(|cap| cap.origin == i) {
                Self::teardown_capture(st, c, false);
            } else {
                Self::leave_capture(st, i);
            }
        }
    }

    /// Event record on a capturing stream: the event snapshots the stream's dependency set;
    /// with `external`, an event-record node is added first and becomes the dependency.
    pub(super) fn capture_event_record(
        &self,
        st: &mut State<B::Queue, S, E, T, M, G, N, X>,
        i: usize,
        ev: usize,
        e: EventHandle,
        external: bool,
    ) -> Result<()> {
        let c = Self::capture_of(st, i).ok_or(Error::IllegalState)?;
        if external {
            Self::add_captured_node(st, i, NodeKind::EventRecord(e.0))?;
        }
        let id = st.captures.get(c).map_or(0, |c| c.id);
        let deps = st.streams.get(i).map(|s| s.capture_deps).unwrap_or_default();
        let stream_raw = Self::handle_of(st, i).0;
        let slot = st.events.get_mut(ev).ok_or(Error::InvalidHandle)?;
        slot.captured = Some((c as u8, id));
        slot.snapshot = deps;
        slot.recorded = Recorded::On(stream_raw);
        Ok(())
    }

    /// `hipStreamWaitEvent` with captures in play. Returns `Ok(true)` when the wait was handled
    /// here (joined, merged into a dependency set, recorded as a node), `Ok(false)` when the
    /// ordinary wait applies.
    pub(super) fn capture_wait_event(
        &self,
        st: &mut State<B::Queue, S, E, T, M, G, N, X>,
        s: StreamHandle,
        i: usize,
        ev: usize,
        e: EventHandle,
        external: bool,
    ) -> Result<bool> {
        let status = Self::capture_status_of(st, i);
        let mine = Self::capture_of(st, i);
        if status == CaptureStatus::Invalidated && mine.is_some() {
            return Err(Error::StreamCaptureInvalidated);
        }
        let (captured, snapshot, recorded) =
            st.events.get(ev).map(|e| (e.captured, e.snapshot, e.recorded)).ok_or(Error::InvalidHandle)?;
        let theirs = captured.and_then(|(c, id)| {
            let c = usize::from(c);
            st.captures.get(c).filter(|cap| cap.live && cap.id == id).map(|_| c)
        });
        match (mine, theirs) {
            (Some(a), Some(b)) if a == b => {
                if let Some(sl) = st.streams.get_mut(i) {
                    sl.capture_deps.extend(&snapshot)?;
                }
                if external {
                    Self::add_captured_node(st, i, NodeKind::EventWait(e.0))?;
                }
                Ok(true)
            }
            (Some(a), Some(b)) => {
                Self::set_capture_status(st, a, CaptureStatus::Invalidated);
                Self::set_capture_status(st, b, CaptureStatus::Invalidated);
                Err(Error::StreamCaptureMerge)
            }
            (None, Some(b)) => {
                if s.is_null_or_legacy() {
                    return Err(Error::StreamCaptureImplicit);
                }
                if st.captures.get(b).is_some_and(|cap| cap.status == CaptureStatus::Invalidated) {
                    return Err(Error::InvalidValue);
                }
                Self::join_capture(st, i, b, snapshot);
                if external {
                    Self::add_captured_node(st, i, NodeKind::EventWait(e.0))?;
                }
                Ok(true)
            }
            (Some(_), None) => {
                // A capturing stream waiting on an event recorded (before the capture) on a
                // stream that is capturing now: isolation.
                if let Recorded::On(raw) = recorded {
                    if let Lookup::Live(p) = lookup_stream(&st.streams, raw) {
                        if Self::capture_of(st, p).is_some() {
                            return Err(Error::StreamCaptureIsolation);
                        }
                    }
                }
                if external {
                    Self::add_captured_node(st, i, NodeKind::EventWait(e.0))?;
                }
                // Other non-captured events add nothing to the capture.
                Ok(true)
            }
            (None, None) => Ok(false),
        }
    }

    // ----- the API -------------------------------------------------------------------------

    fn begin_checks(
        &self,
        st: &mut State<B::Queue, S, E, T, M, G, N, X>,
        s: StreamHandle,
        mode: u32,
    ) -> Result<(usize, CaptureMode)> {
        let i = match s {
            StreamHandle::NULL | StreamHandle::LEGACY => {
                self.device_count()?;
                return Err(Error::StreamCaptureUnsupported);
            }
            _ => self.resolve(st, s, Error::ContextIsDestroyed)?,
        };
        if st.streams.get(i).is_some_and(|sl| sl.detached) {
            return Err(Error::StreamDetached);
        }
        let mode = CaptureMode::from_raw(mode)?;
        if Self::capture_of(st, i).is_some() {
            return Err(Error::IllegalState);
        }
        Ok((i, mode))
    }

    fn start_capture(
        &self,
        st: &mut State<B::Queue, S, E, T, M, G, N, X>,
        i: usize,
        mode: CaptureMode,
        graph: usize,
        owns: bool,
    ) -> Result<()> {
        let c = st.captures.iter().position(|c| !c.live).ok_or(Error::OutOfMemory)?;
        let key = self.keys.current();
        let manual = st.graphs.get(graph).map_or(0, |g| g.graph.node_count() as u16);
        let cap = st.captures.get_mut(c).ok_or(Error::OutOfMemory)?;
        // Ordering: Relaxed; ids need only be unique.
        *cap = CaptureSlot {
            live: true,
            id: NEXT_CAPTURE_ID.fetch_add(1, Ordering::Relaxed),
            status: CaptureStatus::Active,
            mode,
            thread: Some(key),
            origin: i,
            graph,
            owns_graph: owns,
            removed: DepSet::EMPTY,
            manual,
        };
        if let Some(g) = st.graphs.get_mut(graph) {
            g.capture = Some(c as u8);
        }
        Self::join_capture(st, i, c, DepSet::EMPTY);
        Ok(())
    }

    /// `hipStreamBeginCapture`: `0`/legacy → `StreamCaptureUnsupported`, a bad mode →
    /// `InvalidValue`, a stream already in a capture → `IllegalState`, a detached stream →
    /// `StreamDetached`.
    pub fn stream_begin_capture(&self, s: StreamHandle, mode: u32) -> Result<()> {
        let mut st = self.state.lock();
        let (i, mode) = self.begin_checks(&mut st, s, mode)?;
        let g = Self::graph_alloc(&mut st)?;
        if let Err(e) = self.start_capture(&mut st, i, mode, g, true) {
            Self::graph_free(&mut st, g);
            return Err(e);
        }
        Ok(())
    }

    /// `hipStreamBeginCaptureToGraph`: captures into the existing graph `g` after `deps` (Set
    /// semantics). Nodes already in `g` never count as unjoined.
    pub fn stream_begin_capture_to_graph(
        &self,
        s: StreamHandle,
        g: GraphHandle,
        deps: &[NodeId],
        mode: u32,
    ) -> Result<()> {
        let mut st = self.state.lock();
        if let Ok(i) = self.resolve(&mut st, s, Error::ContextIsDestroyed) {
            if st.streams.get(i).is_some_and(|sl| sl.detached) {
                return Err(Error::StreamDetached);
            }
        }
        if g == GraphHandle::NULL {
            return Err(Error::InvalidValue);
        }
        let gi = Self::graph_slot(&st, g)?;
        if st.graphs.get(gi).is_some_and(|slot| slot.capture.is_some()) {
            return Err(Error::IllegalState);
        }
        let (i, mode) = self.begin_checks(&mut st, s, mode)?;
        let mut set = DepSet::EMPTY;
        for d in deps {
            if st.graphs.get(gi).and_then(|slot| slot.graph.node(*d)).is_none() {
                return Err(Error::InvalidValue);
            }
            set.insert(*d)?;
        }
        self.start_capture(&mut st, i, mode, gi, false)?;
        if let Some(sl) = st.streams.get_mut(i) {
            sl.capture_deps = set;
        }
        Ok(())
    }

    /// `hipStreamEndCapture`: returns the captured graph. Errors in HIP's order: `0`/legacy →
    /// `IllegalState`; stale → `ContextIsDestroyed`; detached → `StreamDetached`; not capturing
    /// → `IllegalState`; not the origin → `StreamCaptureUnmatched`; another thread's
    /// Global/ThreadLocal capture → `StreamCaptureWrongThread` (the capture survives);
    /// invalidated → `StreamCaptureInvalidated` and unjoined work → `StreamCaptureUnjoined`,
    /// both tearing the capture down.
    pub fn stream_end_capture(&self, s: StreamHandle) -> Result<GraphHandle> {
        let mut st = self.state.lock();
        if s.is_null_or_legacy() {
            return Err(Error::IllegalState);
        }
        let i = self.resolve(&mut st, s, Error::ContextIsDestroyed)?;
        if st.streams.get(i).is_some_and(|sl| sl.detached) {
            return Err(Error::StreamDetached);
        }
        let c = Self::capture_of(&st, i).ok_or(Error::IllegalState)?;
        let cap = st.captures.get(c).ok_or(Error::IllegalState)?;
        if cap.origin != i {
            return Err(Error::StreamCaptureUnmatched);
        }
        if cap.mode != CaptureMode::Relaxed && cap.thread != Some(self.keys.current()) {
            return Err(Error::StreamCaptureWrongThread);
        }
        if cap.status == CaptureStatus::Invalidated {
            Self::teardown_capture(&mut st, c, false);
            return Err(Error::StreamCaptureInvalidated);
        }
        if Self::unjoined(&st, c, i)? {
            Self::teardown_capture(&mut st, c, false);
            return Err(Error::StreamCaptureUnjoined);
        }
        let g = cap.graph;
        Self::teardown_capture(&mut st, c, true);
        Ok(Self::graph_handle(&st, g))
    }

    /// Whether capture `c` has work not joined back into origin `i` (§4.3).
    fn unjoined(st: &State<B::Queue, S, E, T, M, G, N, X>, c: usize, i: usize) -> Result<bool> {
        let cap = st.captures.get(c).ok_or(Error::IllegalState)?;
        let graph = &st.graphs.get(cap.graph).ok_or(Error::IllegalState)?.graph;
        let origin_deps = st.streams.get(i).map(|s| s.capture_deps).unwrap_or_default();
        // A temporary node after the origin's tail: every other leaf is unjoined work.
        let is_tail = |n: NodeId| origin_deps.contains(n);
        let mut has_dependents = [false; N];
        graph.has_dependents(&mut has_dependents);
        let leaf = |n: NodeId| !has_dependents.get(usize::from(n.0)).copied().unwrap_or(false);
        let mut leaves = 1usize; // the temporary node
        let mut any_removed = false;
        for id in 0..graph.node_count() {
            let n = NodeId(id as u16);
            if is_tail(n) || !leaf(n) {
                continue;
            }
            if id < usize::from(cap.manual) {
                continue;
            }
            leaves += 1;
            any_removed |= cap.removed.contains(n);
        }
        // Manual nodes never count (clr drops them from the leaf list when there is more than
        // one leaf, and one leaf is always fine).
        Ok(leaves > 1 && !any_removed)
    }

    fn capture_status_query(
        &self,
        st: &mut State<B::Queue, S, E, T, M, G, N, X>,
        s: StreamHandle,
    ) -> Result<Option<usize>> {
        if s.is_null_or_legacy() {
            self.device_count()?;
            if Self::blocking_stream_capturing(st) {
                return Err(Error::StreamCaptureImplicit);
            }
            return Ok(None);
        }
        self.resolve(st, s, Error::ContextIsDestroyed).map(Some)
    }

    /// `hipStreamIsCapturing`. For `0`/legacy: `StreamCaptureImplicit` while a blocking stream
    /// is capturing (nothing is invalidated), else None.
    pub fn stream_is_capturing(&self, s: StreamHandle) -> Result<CaptureStatus> {
        let mut st = self.state.lock();
        Ok(match self.capture_status_query(&mut st, s)? {
            Some(i) => Self::capture_status_of(&st, i),
            None => CaptureStatus::None,
        })
    }

    /// `hipStreamGetCaptureInfo_v2`: status, and while Active the capture id, graph and the
    /// stream's dependency set.
    pub fn stream_capture_info(&self, s: StreamHandle) -> Result<CaptureInfo> {
        let mut st = self.state.lock();
        let mut info = CaptureInfo { status: CaptureStatus::None, id: 0, graph: 0, dependencies: DepSet::EMPTY };
        if let Some(i) = self.capture_status_query(&mut st, s)? {
            info.status = Self::capture_status_of(&st, i);
            if info.status == CaptureStatus::Active {
                if let Some(c) = Self::capture_of(&st, i) {
                    let (id, g) = st.captures.get(c).map_or((0, 0), |c| (c.id, c.graph));
                    info.id = id;
                    info.graph = Self::graph_handle(&st, g).0;
                    info.dependencies = st.streams.get(i).map(|s| s.capture_deps).unwrap_or_default();
                }
            }
        }
        Ok(info)
    }

    /// `hipStreamUpdateCaptureDependencies`: `flags` 0 adds (deduplicated), 1 sets (the old set
    /// moves to the capture's removed set). Not capturing → `IllegalState`; more nodes than the
    /// graph has, a bad flag or a node outside the capture graph → `InvalidValue`.
    pub fn stream_update_capture_dependencies(&self, s: StreamHandle, deps: &[NodeId], flags: u32) -> Result<()> {
        let mut st = self.state.lock();
        if s.is_null_or_legacy() {
            return Err(Error::IllegalState);
        }
        let i = self.resolve(&mut st, s, Error::ContextIsDestroyed)?;
        let c = Self::capture_of(&st, i).ok_or(Error::IllegalState)?;
        let g = st.captures.get(c).map(|c| c.graph).ok_or(Error::IllegalState)?;
        let graph = &st.graphs.get(g).ok_or(Error::IllegalState)?.graph;
        if deps.len() > graph.node_count() {
            return Err(Error::InvalidValue);
        }
        let update = DependencyUpdate::from_raw(flags)?;
        let mut set = DepSet::EMPTY;
        for d in deps {
            if graph.node(*d).is_none() {
                return Err(Error::InvalidValue);
            }
            set.insert(*d)?;
        }
        let old = st.streams.get(i).map(|s| s.capture_deps).unwrap_or_default();
        match update {
            DependencyUpdate::Add => {
                if let Some(sl) = st.streams.get_mut(i) {
                    sl.capture_deps.extend(&set)?;
                }
            }
            DependencyUpdate::Set => {
                if let Some(cap) = st.captures.get_mut(c) {
                    cap.removed.extend(&old)?;
                }
                if let Some(sl) = st.streams.get_mut(i) {
                    sl.capture_deps = set;
                }
            }
        }
        Ok(())
    }

    /// `hipThreadExchangeStreamCaptureMode`: sets the calling thread's mode and returns the
    /// previous one (initially Global). A bad mode is `InvalidValue`.
    pub fn thread_exchange_capture_mode(&self, mode: u32) -> Result<CaptureMode> {
        let mode = CaptureMode::from_raw(mode)?;
        let mut st = self.state.lock();
        let t = self.thread_slot(&mut st)?;
        let slot = st.threads.get_mut(t).ok_or(Error::OutOfMemory)?;
        Ok(core::mem::replace(&mut slot.mode, mode))
    }
}
