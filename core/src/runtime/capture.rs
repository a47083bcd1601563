//! Stream capture (`docs/hip-semantics.md`, "Stream capture"): the capture table, begin/end,
//! fork and join through events, invalidation, and the thread-mode rule for potentially unsafe
//! calls.
//!
//! Model: the newest HIP one. The stream that begins a capture is its *origin* and owns its
//! graph; streams that wait on an event recorded inside the capture join it (*forks*) and share
//! that graph, each with its own dependency set. Invalidation always covers the whole capture.
//! Every status change goes through [`Runtime::set_capture_status`]. A stream remembers the
//! capture it joined as (slot, capture id); once the capture ends the id no longer matches, so
//! ending a capture touches no stream. Everything here runs under the structural lock, and
//! enqueues come here only while `captures_live` is non-zero.

use crate::sync::atomic64::AtomicU64;
use portable_atomic::Ordering;

use super::graphs::dispatch_node;
use super::submit::{check_geometry, Command};
use super::{Runtime, St};
use crate::backend::Backend;
use crate::capture::{CaptureInfo, CaptureMode, CaptureStatus, DepSet, DependencyUpdate};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::event::EventHandle;
use crate::graph::{NodeId, NodeKind, WaitValueNode};
use crate::slot::Table;
use crate::slots::capture::CaptureSlot;
use crate::slots::event::Recorded;
use crate::slots::graph::GraphHandle;
use crate::slots::stream::StreamInner;
use crate::stream::StreamHandle;
use crate::table::Lookup;
use crate::thread::ThreadKeys;

static NEXT_CAPTURE_ID: AtomicU64 = AtomicU64::new(1);

impl<B: Backend, K: ThreadKeys, C: Config> Runtime<B, K, C> {
    // ----- state ---------------------------------------------------------------------------

    /// The live capture a stream (its lock held as `inner`) takes part in.
    pub(super) fn capture_in(st: &St<C>, inner: &StreamInner) -> Option<usize> {
        let (c, id) = inner.capture?;
        let c = usize::from(c);
        st.captures.slots().get(c).filter(|cap| cap.live && cap.id == id).map(|_| c)
    }

    /// The live capture stream slot `i` takes part in.
    pub(super) fn capture_of(&self, st: &St<C>, i: usize) -> Option<usize> {
        let slot = self.stream(i).ok()?;
        let inner = slot.inner.lock();
        Self::capture_in(st, &inner)
    }

    /// The status `hipStreamIsCapturing` reports for slot `i`: its capture's, or Invalidated for
    /// a detached stream whose capture was torn down.
    pub(super) fn capture_status_of(&self, st: &St<C>, i: usize) -> CaptureStatus {
        let Ok(slot) = self.stream(i) else { return CaptureStatus::None };
        let inner = slot.inner.lock();
        match Self::capture_in(st, &inner) {
            Some(c) => st.captures.slots().get(c).map_or(CaptureStatus::None, |cap| cap.status),
            None if inner.capture.is_some() && slot.attrs().detached => CaptureStatus::Invalidated,
            None => CaptureStatus::None,
        }
    }

    /// Whether a capture is Active anywhere.
    pub(super) fn any_active_capture(st: &St<C>) -> bool {
        st.captures.slots().iter().any(|c| c.live && c.status == CaptureStatus::Active)
    }

    /// Whether a blocking stream (any device) is capturing: the legacy stream's implicit
    /// dependency would then reach into a capture.
    fn blocking_stream_capturing(st: &St<C>) -> bool {
        st.captures.slots().iter().any(|c| c.live && c.blocking && c.status == CaptureStatus::Active)
    }

    /// The one transition function of capture statuses: capture `c` (and so all its members).
    pub(super) fn set_capture_status(st: &mut St<C>, c: usize, status: CaptureStatus) {
        let Some(cap) = st.captures.slots_mut().get_mut(c) else { return };
        if !cap.live {
            return;
        }
        trace!("capture {} -> {}", cap.id, status as u32);
        cap.status = status;
    }

    /// Invalidates every live capture.
    pub(super) fn invalidate_all_captures(st: &mut St<C>) {
        for c in 0..st.captures.slots().len() {
            Self::set_capture_status(st, c, CaptureStatus::Invalidated);
        }
    }

    /// Ends capture `c`: its members go back to None (detached members stay visibly
    /// Invalidated), captured events forget it (their record names a capture id that no longer
    /// lives), its graph is freed unless `keep_graph`.
    pub(super) fn teardown_capture(&self, st: &mut St<C>, c: usize, keep_graph: bool) {
        let Some(cap) = st.captures.slots_mut().get_mut(c) else { return };
        if !cap.live {
            return;
        }
        cap.live = false;
        let (graph, owns) = (cap.graph, !cap.user_graph);
        // Ordering: Release pairs with the Acquire in `any_capture`.
        self.captures_live.fetch_sub(1, Ordering::Release);
        if let Some(g) = st.graphs.slots_mut().get_mut(graph) {
            g.capture = None;
        }
        if owns && !keep_graph {
            self.graph_free(st, graph);
        }
    }

    /// The thread-mode rule for a potentially unsafe call (§4.7): if prohibited, the captures
    /// that prohibit it are invalidated and `err` is returned.
    pub(super) fn check_unsafe_call(&self, st: &mut St<C>, err: Error) -> Result<()> {
        let (key, mode) = self.thread_mode();
        let mut prohibited = false;
        for c in 0..st.captures.slots().len() {
            let Some(cap) = st.captures.slots().get(c) else { continue };
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
    pub(super) fn check_sync_target(&self, st: &mut St<C>, i: usize) -> Result<()> {
        if let Some(c) = self.capture_of(st, i) {
            Self::set_capture_status(st, c, CaptureStatus::Invalidated);
            return Err(Error::StreamCaptureUnsupported);
        }
        self.check_unsafe_call(st, Error::StreamCaptureUnsupported)
    }

    /// `hipStreamAddCallback`'s capture checks: a capturing target → `StreamCaptureUnsupported`
    /// and invalidation; the legacy stream while a blocking stream captures →
    /// `StreamCaptureImplicit` and every capture invalidated.
    pub(super) fn check_callback_target(&self, st: &mut St<C>, s: StreamHandle, i: usize) -> Result<()> {
        if s.is_null_or_legacy() {
            if Self::blocking_stream_capturing(st) {
                Self::invalidate_all_captures(st);
                return Err(Error::StreamCaptureImplicit);
            }
            return Ok(());
        }
        if let Some(c) = self.capture_of(st, i) {
            Self::set_capture_status(st, c, CaptureStatus::Invalidated);
            return Err(Error::StreamCaptureUnsupported);
        }
        Ok(())
    }

    /// Adds a node after stream `i`'s dependency set; the node becomes the new set.
    pub(super) fn add_captured_node(&self, st: &mut St<C>, i: usize, kind: NodeKind) -> Result<NodeId> {
        let slot = self.stream(i)?;
        let mut inner = slot.inner.lock();
        self.add_node_locked(st, &mut inner, kind)
    }

    /// [`add_captured_node`](Self::add_captured_node) with the stream's lock held.
    fn add_node_locked(&self, st: &mut St<C>, inner: &mut StreamInner, kind: NodeKind) -> Result<NodeId> {
        let c = Self::capture_in(st, inner).ok_or(Error::IllegalState)?;
        let g = st.captures.slots().get(c).map(|c| c.graph).ok_or(Error::IllegalState)?;
        let graph = &mut st.graphs.slots_mut().get_mut(g).ok_or(Error::IllegalState)?.graph;
        let node = graph.add_node(&self.backend, kind, inner.capture_deps.as_slice(), C::GRAPH_NODES)?;
        inner.capture_deps = DepSet::one(node);
        Ok(node)
    }

    /// Records one stream operation into the capture of stream `i` (its lock held as `inner`)
    /// instead of running it.
    pub(super) fn capture_command(
        &self,
        st: &mut St<C>,
        i: usize,
        inner: &mut StreamInner,
        cmd: &Command<'_>,
    ) -> Result<()> {
        let c = Self::capture_in(st, inner).ok_or(Error::IllegalState)?;
        let g = st.captures.slots().get(c).map(|c| c.graph).ok_or(Error::IllegalState)?;
        // A launch and a built-in are one dispatch node each, made by one call.
        let dispatch = match *cmd {
            Command::Kernel(k) => {
                check_geometry(k.grid, k.workgroup, k.kernel_object)?;
                Some((k.kernel_object, k.grid, k.workgroup, k.group_segment_size, k.private_segment_size, k.kernarg))
            }
            Command::Builtin { kernel, ref args, len } => {
                let device = self.stream(i)?.attrs().device;
                let object = kernel(device)?;
                Some((object, [1, 1, 1], [1, 1, 1], 0, 0, args.get(..len).ok_or(Error::InvalidValue)?))
            }
            _ => None,
        };
        let kind = match *cmd {
            Command::Kernel(_) | Command::Builtin { .. } => {
                let (object, grid, wg, group, private, args) = dispatch.ok_or(Error::IllegalState)?;
                NodeKind::Dispatch(dispatch_node(
                    &self.backend,
                    &mut st.graphs.slots_mut().get_mut(g).ok_or(Error::IllegalState)?.graph,
                    object,
                    grid,
                    wg,
                    group,
                    private,
                    args,
                    C::GRAPH_NODES,
                )?)
            }
            Command::WaitValue { address, value, mask, cond } => {
                NodeKind::WaitValue(WaitValueNode { address, value, mask, cond })
            }
            Command::HostFn { f, .. } => NodeKind::Host(f),
            Command::Marker | Command::EventRecord(_) | Command::WaitEvent(_) | Command::WaitPoint(..) => {
                NodeKind::Empty
            }
        };
        self.add_node_locked(st, inner, kind).map(|_| ())
    }

    /// Stream `i` joins capture `c` (a fork) with `deps` as its dependency set.
    fn join_capture(&self, st: &mut St<C>, i: usize, c: usize, deps: DepSet) {
        let Ok(slot) = self.stream(i) else { return };
        let blocking = slot.attrs().is_blocking_user();
        let Some(cap) = st.captures.slots_mut().get_mut(c) else { return };
        cap.blocking |= blocking;
        let mut inner = slot.inner.lock();
        inner.capture = Some((c as u8, cap.id));
        inner.capture_deps = deps;
    }

    /// A stream leaves its capture (a destroyed fork): the capture goes on.
    fn leave_capture(&self, i: usize) {
        if let Ok(slot) = self.stream(i) {
            let mut inner = slot.inner.lock();
            inner.capture = None;
            inner.capture_deps = DepSet::EMPTY;
        }
    }

    /// What a destroyed stream does to its capture: the origin's capture is torn down with its
    /// graph, a fork leaves.
    pub(super) fn capture_on_destroy(&self, st: &mut St<C>, i: usize) {
        if !self.any_capture() {
            return;
        }
        if let Some(c) = self.capture_of(st, i) {
            if st.captures.slots().get(c).is_some_and(|cap| cap.origin == i) {
                self.teardown_capture(st, c, false);
            } else {
                self.leave_capture(i);
            }
        }
    }

    /// Event record on a capturing stream: the event snapshots the stream's dependency set;
    /// with `external`, an event-record node is added first and becomes the dependency.
    pub(super) fn capture_event_record(
        &self,
        st: &mut St<C>,
        i: usize,
        ev: usize,
        e: EventHandle,
        external: bool,
    ) -> Result<()> {
        let c = self.capture_of(st, i).ok_or(Error::IllegalState)?;
        if external {
            self.add_captured_node(st, i, NodeKind::EventRecord(e.0))?;
        }
        let id = st.captures.slots().get(c).map_or(0, |c| c.id);
        let deps = self.stream(i)?.inner.lock().capture_deps;
        let stream_raw = self.handle_of(i).0;
        let slot = self.events.slots().get(ev).ok_or(Error::InvalidHandle)?;
        let mut inner = slot.inner.lock();
        inner.captured = Some((c as u8, id));
        inner.snapshot = deps;
        inner.recorded = Recorded::On(stream_raw);
        inner.point = None;
        Ok(())
    }

    /// Capture checks of `hipEventQuery`/`hipEventSynchronize`: an event recorded in an active
    /// capture → `CapturedEvent` and that capture invalidated; an event recorded on a created
    /// stream → the thread-mode rule.
    pub(super) fn check_event_capture(&self, st: &mut St<C>, i: usize) -> Result<()> {
        let (captured, recorded) = {
            let inner = self.events.slots().get(i).ok_or(Error::InvalidHandle)?.inner.lock();
            (inner.captured, inner.recorded)
        };
        if let Some((c, id)) = captured {
            let c = usize::from(c);
            if st
                .captures
                .slots()
                .get(c)
                .is_some_and(|cap| cap.live && cap.id == id && cap.status == CaptureStatus::Active)
            {
                Self::set_capture_status(st, c, CaptureStatus::Invalidated);
                return Err(Error::CapturedEvent);
            }
        }
        match recorded {
            Recorded::Never | Recorded::OnNull => Ok(()),
            Recorded::On(_) => self.check_unsafe_call(st, Error::StreamCaptureUnsupported),
        }
    }

    /// `hipStreamWaitEvent` with captures in play. Returns `Ok(true)` when the wait was handled
    /// here (joined, merged into a dependency set, recorded as a node), `Ok(false)` when the
    /// ordinary wait applies.
    pub(super) fn capture_wait_event(
        &self,
        st: &mut St<C>,
        s: StreamHandle,
        i: usize,
        ev: usize,
        e: EventHandle,
        external: bool,
    ) -> Result<bool> {
        let status = self.capture_status_of(st, i);
        let mine = self.capture_of(st, i);
        if status == CaptureStatus::Invalidated && mine.is_some() {
            return Err(Error::StreamCaptureInvalidated);
        }
        let (captured, snapshot, recorded) = {
            let inner = self.events.slots().get(ev).ok_or(Error::InvalidHandle)?.inner.lock();
            (inner.captured, inner.snapshot, inner.recorded)
        };
        let theirs = captured.and_then(|(c, id)| {
            let c = usize::from(c);
            st.captures.slots().get(c).filter(|cap| cap.live && cap.id == id).map(|_| c)
        });
        match (mine, theirs) {
            (Some(a), Some(b)) if a == b => {
                self.stream(i)?.inner.lock().capture_deps.extend(&snapshot)?;
                if external {
                    self.add_captured_node(st, i, NodeKind::EventWait(e.0))?;
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
                if st.captures.slots().get(b).is_some_and(|cap| cap.status == CaptureStatus::Invalidated) {
                    return Err(Error::InvalidValue);
                }
                self.join_capture(st, i, b, snapshot);
                if external {
                    self.add_captured_node(st, i, NodeKind::EventWait(e.0))?;
                }
                Ok(true)
            }
            (Some(_), None) => {
                // A capturing stream waiting on an event recorded (before the capture) on a
                // stream that is capturing now: isolation.
                if let Recorded::On(raw) = recorded {
                    if let Lookup::Live(p) = self.lookup_stream(raw) {
                        if self.capture_of(st, p).is_some() {
                            return Err(Error::StreamCaptureIsolation);
                        }
                    }
                }
                if external {
                    self.add_captured_node(st, i, NodeKind::EventWait(e.0))?;
                }
                // Other non-captured events add nothing to the capture.
                Ok(true)
            }
            (None, None) => Ok(false),
        }
    }

    // ----- the API -------------------------------------------------------------------------

    fn begin_checks(&self, st: &St<C>, s: StreamHandle, i: usize, mode: u32) -> Result<CaptureMode> {
        if s.is_null_or_legacy() {
            return Err(Error::StreamCaptureUnsupported);
        }
        if self.stream(i)?.attrs().detached {
            return Err(Error::StreamDetached);
        }
        let mode = CaptureMode::from_raw(mode)?;
        if self.capture_of(st, i).is_some() {
            return Err(Error::IllegalState);
        }
        Ok(mode)
    }

    /// Resolves the stream of a capture API before the structural lock is taken (`0`/legacy
    /// resolve to nothing: the callers answer for them).
    fn capture_stream(&self, s: StreamHandle) -> Result<usize> {
        if s.is_null_or_legacy() {
            self.device_count()?;
            return Ok(usize::MAX);
        }
        self.resolve(s, Error::ContextIsDestroyed)
    }

    fn start_capture(&self, st: &mut St<C>, i: usize, mode: CaptureMode, graph: usize, owns: bool) -> Result<()> {
        let c = st.captures.slots().iter().position(|c| !c.live).ok_or(Error::OutOfMemory)?;
        let key = self.keys.current();
        let manual = st.graphs.slots().get(graph).map_or(0, |g| g.graph.node_count() as u16);
        let cap = st.captures.slots_mut().get_mut(c).ok_or(Error::OutOfMemory)?;
        // Ordering: Relaxed; ids need only be unique.
        *cap = CaptureSlot {
            live: true,
            id: NEXT_CAPTURE_ID.fetch_add(1, Ordering::Relaxed),
            status: CaptureStatus::Active,
            mode,
            thread: Some(key),
            origin: i,
            graph,
            user_graph: !owns,
            removed: DepSet::EMPTY,
            manual,
            blocking: false,
        };
        if let Some(g) = st.graphs.slots_mut().get_mut(graph) {
            g.capture = Some(c as u8);
        }
        // Ordering: Release; enqueues that see it take the capture path. The origin's lock in
        // `join_capture` orders an enqueue in flight on it before the capture.
        self.captures_live.fetch_add(1, Ordering::Release);
        self.join_capture(st, i, c, DepSet::EMPTY);
        Ok(())
    }

    /// `hipStreamBeginCapture`: `0`/legacy → `StreamCaptureUnsupported`, a bad mode →
    /// `InvalidValue`, a stream already in a capture → `IllegalState`, a detached stream →
    /// `StreamDetached`.
    pub fn stream_begin_capture(&self, s: StreamHandle, mode: u32) -> Result<()> {
        let i = self.capture_stream(s)?;
        let mut st = self.lock();
        let mode = self.begin_checks(&st, s, i, mode)?;
        let g = self.graph_alloc(&mut st)?;
        if let Err(e) = self.start_capture(&mut st, i, mode, g, true) {
            self.graph_free(&mut st, g);
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
        let resolved = self.capture_stream(s);
        let mut st = self.lock();
        if let Ok(i) = resolved {
            if i != usize::MAX && self.stream(i)?.attrs().detached {
                return Err(Error::StreamDetached);
            }
        }
        if g == GraphHandle::NULL {
            return Err(Error::InvalidValue);
        }
        let gi = Self::graph_slot(&st, g)?;
        if st.graphs.slots().get(gi).is_some_and(|slot| slot.capture.is_some()) {
            return Err(Error::IllegalState);
        }
        let i = resolved?;
        let mode = self.begin_checks(&st, s, i, mode)?;
        let mut set = DepSet::EMPTY;
        for d in deps {
            if st.graphs.slots().get(gi).and_then(|slot| slot.graph.node(*d)).is_none() {
                return Err(Error::InvalidValue);
            }
            set.insert(*d)?;
        }
        self.start_capture(&mut st, i, mode, gi, false)?;
        self.stream(i)?.inner.lock().capture_deps = set;
        Ok(())
    }

    /// `hipStreamEndCapture`: returns the captured graph. Errors in HIP's order: `0`/legacy →
    /// `IllegalState`; stale → `ContextIsDestroyed`; detached → `StreamDetached`; not capturing
    /// → `IllegalState`; not the origin → `StreamCaptureUnmatched`; another thread's
    /// Global/ThreadLocal capture → `StreamCaptureWrongThread` (the capture survives);
    /// invalidated → `StreamCaptureInvalidated` and unjoined work → `StreamCaptureUnjoined`,
    /// both tearing the capture down.
    pub fn stream_end_capture(&self, s: StreamHandle) -> Result<GraphHandle> {
        if s.is_null_or_legacy() {
            return Err(Error::IllegalState);
        }
        let i = self.resolve(s, Error::ContextIsDestroyed)?;
        let mut st = self.lock();
        if self.stream(i)?.attrs().detached {
            return Err(Error::StreamDetached);
        }
        let c = self.capture_of(&st, i).ok_or(Error::IllegalState)?;
        let cap = st.captures.slots().get(c).ok_or(Error::IllegalState)?;
        if cap.origin != i {
            return Err(Error::StreamCaptureUnmatched);
        }
        if cap.mode != CaptureMode::Relaxed && cap.thread != Some(self.keys.current()) {
            return Err(Error::StreamCaptureWrongThread);
        }
        if cap.status == CaptureStatus::Invalidated {
            self.teardown_capture(&mut st, c, false);
            return Err(Error::StreamCaptureInvalidated);
        }
        let g = cap.graph;
        if self.unjoined(&mut st, c, i)? {
            self.teardown_capture(&mut st, c, false);
            return Err(Error::StreamCaptureUnjoined);
        }
        self.teardown_capture(&mut st, c, true);
        Ok(Self::graph_handle(&st, g))
    }

    /// Whether capture `c` has work not joined back into origin `i` (§4.3).
    fn unjoined(&self, st: &mut St<C>, c: usize, i: usize) -> Result<bool> {
        let (graph, manual, removed) =
            st.captures.slots().get(c).map(|c| (c.graph, c.manual, c.removed)).ok_or(Error::IllegalState)?;
        let origin_deps = self.stream(i)?.inner.lock().capture_deps;
        let graph = &mut st.graphs.slots_mut().get_mut(graph).ok_or(Error::IllegalState)?.graph;
        // A temporary node after the origin's tail: every other leaf is unjoined work.
        let mut leaves = 1usize;
        let mut any_removed = false;
        graph.leaves(|n| {
            // Manual nodes never count (clr drops them from the leaf list when there is more
            // than one leaf, and one leaf is always fine).
            if origin_deps.contains(n) || n.0 < manual {
                return;
            }
            leaves += 1;
            any_removed |= removed.contains(n);
        });
        Ok(leaves > 1 && !any_removed)
    }

    fn capture_status_query(&self, st: &St<C>, s: StreamHandle, i: usize) -> Result<Option<usize>> {
        if s.is_null_or_legacy() {
            if Self::blocking_stream_capturing(st) {
                return Err(Error::StreamCaptureImplicit);
            }
            return Ok(None);
        }
        Ok(Some(i))
    }

    /// `hipStreamIsCapturing`. For `0`/legacy: `StreamCaptureImplicit` while a blocking stream
    /// is capturing (nothing is invalidated), else None.
    pub fn stream_is_capturing(&self, s: StreamHandle) -> Result<CaptureStatus> {
        let i = self.capture_stream(s)?;
        if !self.any_capture() && !self.stream(i).is_ok_and(|sl| sl.inner.lock().capture.is_some()) {
            return Ok(CaptureStatus::None);
        }
        let st = self.lock();
        Ok(match self.capture_status_query(&st, s, i)? {
            Some(i) => self.capture_status_of(&st, i),
            None => CaptureStatus::None,
        })
    }

    /// `hipStreamGetCaptureInfo_v2`: status, and while Active the capture id, graph and the
    /// stream's dependency set.
    pub fn stream_capture_info(&self, s: StreamHandle) -> Result<CaptureInfo> {
        let i = self.capture_stream(s)?;
        let st = self.lock();
        let mut info = CaptureInfo { status: CaptureStatus::None, id: 0, graph: 0, dependencies: DepSet::EMPTY };
        if let Some(i) = self.capture_status_query(&st, s, i)? {
            info.status = self.capture_status_of(&st, i);
            if info.status == CaptureStatus::Active {
                if let Some(c) = self.capture_of(&st, i) {
                    let (id, g) = st.captures.slots().get(c).map_or((0, 0), |c| (c.id, c.graph));
                    info.id = id;
                    info.graph = Self::graph_handle(&st, g).0;
                    info.dependencies = self.stream(i)?.inner.lock().capture_deps;
                }
            }
        }
        Ok(info)
    }

    /// `hipStreamUpdateCaptureDependencies`: `flags` 0 adds (deduplicated), 1 sets (the old set
    /// moves to the capture's removed set). Not capturing → `IllegalState`; more nodes than the
    /// graph has, a bad flag or a node outside the capture graph → `InvalidValue`.
    pub fn stream_update_capture_dependencies(&self, s: StreamHandle, deps: &[NodeId], flags: u32) -> Result<()> {
        if s.is_null_or_legacy() {
            return Err(Error::IllegalState);
        }
        let i = self.resolve(s, Error::ContextIsDestroyed)?;
        let mut st = self.lock();
        let c = self.capture_of(&st, i).ok_or(Error::IllegalState)?;
        let g = st.captures.slots().get(c).map(|c| c.graph).ok_or(Error::IllegalState)?;
        let graph = &st.graphs.slots().get(g).ok_or(Error::IllegalState)?.graph;
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
        let slot = self.stream(i)?;
        let mut inner = slot.inner.lock();
        match update {
            DependencyUpdate::Add => inner.capture_deps.extend(&set)?,
            DependencyUpdate::Set => {
                let old = inner.capture_deps;
                if let Some(cap) = st.captures.slots_mut().get_mut(c) {
                    cap.removed.extend(&old)?;
                }
                inner.capture_deps = set;
            }
        }
        Ok(())
    }

    /// `hipThreadExchangeStreamCaptureMode`: sets the calling thread's mode and returns the
    /// previous one (initially Global). A bad mode is `InvalidValue`.
    pub fn thread_exchange_capture_mode(&self, mode: u32) -> Result<CaptureMode> {
        let mode = CaptureMode::from_raw(mode)?;
        let t = self.thread_slot()?;
        // Ordering: Relaxed; the calling thread's own slot (read under the structural lock by
        // the same thread only).
        let old = t.mode.swap(mode as u8, Ordering::Relaxed);
        Ok(super::mode_of(old))
    }
}
