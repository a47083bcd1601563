//! Graphs built node by node (docs/hip-semantics.md, "Graphs"): kernel, copy, fill, host,
//! child-graph, empty, event and conditional nodes; edges; queries; clones; per-node parameters
//! in graphs and in executables; whole-graph update.
//!
//! # Model
//!
//! A graph made here ([`hipGraphCreate`], [`hipGraphClone`], or a capture once it ends) is a
//! [`Graph`] kept in this layer: nodes with their HIP parameters (kernel arguments deep-copied,
//! as HIP copies them) and edges. Instantiation flattens it — child graphs inlined, multi-row
//! copies and fills split into rows — into a core graph, which core turns into AQL packets; the
//! core graph is dropped at once and the executable keeps a snapshot of the graph and what each
//! node became, so `hipGraphExec*SetParams` and [`hipGraphExecUpdate`] patch the nodes that
//! changed in place, or rebuild the executable behind the same handle when a node's shape changed
//! (`patch.rs`; launches already enqueued keep what they had).
//!
//! While a capture records, its graph is core's; the calls that make sense then (adding nodes,
//! listing nodes and edges, node types) go to core. When the capture ends the graph is taken
//! over here under the same handle, and node handles given out during the capture stay valid.
//! A captured graph of kernels, host functions and events stays core's until a call needs this
//! layer's model of it ([`Captured`]): instantiated as it is, it is core's graph that core
//! instantiates, and the executable takes its snapshot of the graph when first changed.
//!
//! Copies from or to pageable host memory (memory not from `hipMalloc`/`hipHostMalloc`) are
//! staged through pinned buffers the executable owns, in graph order: a host node fills the
//! buffer from the pageable source when the node's dependencies are done, and a device copy
//! moves it on (the other way round for device-to-host), so every launch reads the host memory
//! as it is when the copy's turn comes.
//!
//! Node types use HIP 5.2's numbering (`hipGraphNodeTypeKernel` = 1 …, the header programs are
//! built against); every copy node reports `hipGraphNodeTypeMemcpy`, as the newest HIP does.

use std::collections::{BTreeSet, HashMap};
use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void};
use std::sync::{Arc, LazyLock, Mutex};

use aqueduct::{EventHandle, GraphExecHandle, GraphHandle};
use aqueduct::{NodeId, NodeKind};

use crate::code_objects::FunctionEntry;
use crate::error::{
    api, Hip, HipResult, ILLEGAL_STATE, INVALID_CONFIGURATION, INVALID_MEMCPY_DIRECTION, INVALID_VALUE, NOT_SUPPORTED,
};
use crate::global::{global, lock, Global};
use crate::launch::{fill_hidden, geometry, module_kernarg, resolve};
use crate::pitched::{Extent, Memcpy3DParms, PitchedPtr, Pos};
use crate::register::{check_direction, symbol_range, TO_DEVICE, TO_HOST};
use crate::{handle, put, stream_of, Dim3, Handle};

// ----- HIP's parameter structs ----------------------------------------------------------------

/// `hipKernelNodeParams` (64 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct KernelNodeParams {
    block: Dim3,
    extra: *mut *mut c_void,
    func: *const c_void,
    grid: Dim3,
    kernel_params: *mut *mut c_void,
    shared_mem: c_uint,
}

/// `hipMemsetParams` (48 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MemsetParams {
    dst: *mut c_void,
    element_size: c_uint,
    height: usize,
    pitch: usize,
    value: c_uint,
    width: usize,
}

/// `hipHostNodeParams`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct HostNodeParams {
    func: Option<unsafe extern "C" fn(*mut c_void)>,
    data: *mut c_void,
}

const _: () = assert!(size_of::<KernelNodeParams>() == 64);
const _: () = assert!(size_of::<MemsetParams>() == 48);
const _: () = assert!(size_of::<Memcpy3DParms>() == 160);

/// `hipGraphNodeType` (HIP 5.2's numbering).
const TYPE_KERNEL: c_int = 1;
const TYPE_MEMCPY: c_int = 2;
const TYPE_MEMSET: c_int = 3;
const TYPE_HOST: c_int = 4;
const TYPE_GRAPH: c_int = 5;
const TYPE_EMPTY: c_int = 6;
const TYPE_WAIT_EVENT: c_int = 7;
const TYPE_EVENT_RECORD: c_int = 8;
/// `hipGraphNodeTypeMemAlloc` / `MemFree`: newer HIP's values (HIP 5.2 captures no
/// allocation; its 10 and 11 name symbol copies, which are reported as `Memcpy` here).
const TYPE_MEM_ALLOC: c_int = 10;
const TYPE_MEM_FREE: c_int = 11;
/// `hipGraphNodeTypeConditional` (`aqueduct_hip.h`): CUDA's value, unused in HIP 5.2's numbering.
const TYPE_CONDITIONAL: c_int = 13;

/// `hipMemcpyDefault`, and the largest kind HIP accepts besides `DeviceToDeviceNoCU`.
const MEMCPY_DEFAULT: c_uint = 4;
const MEMCPY_NO_CU: c_uint = 1024;
/// `hipErrorInvalidPitchValue`.
const INVALID_PITCH: Hip = Hip(12);
/// `hipErrorGraphExecUpdateFailure`.
const UPDATE_FAILURE: Hip = Hip(910);

// ----- the model ------------------------------------------------------------------------------

/// A kernel node: what `hipKernelNodeParams` named, resolved, with its arguments packed into a
/// kernel-argument segment owned by the node (what `kernelParams` of
/// `hipGraphKernelNodeGetParams` points into). The segment is shared by the node's copies (a
/// clone, an executable's snapshot): a node's parameters are replaced whole, never written in
/// place, so a copy is a reference count.
#[derive(Clone)]
struct KernelNode {
    func: usize,
    grid: Dim3,
    block: Dim3,
    shared_mem: u32,
    f: FunctionEntry,
    args: Arc<KernelArgs>,
}

/// A kernel node's argument segment and the pointer lists into it that HIP hands out.
struct KernelArgs {
    /// The segment, 16-byte aligned; `len` bytes of it are used.
    seg: Vec<u128>,
    len: usize,
    /// `kernelParams` as returned: one pointer per argument into `seg` (empty in `extra` mode).
    params: Vec<usize>,
    /// `extra` as returned, when the arguments came as a buffer: the five-entry list, whose
    /// size entry points at `size`.
    extra: Option<(Vec<usize>, Box<usize>)>,
}

impl KernelNode {
    /// Validates and deep-copies `p` (resolving `p.func` on `device`).
    ///
    /// # Safety
    /// `p.kernelParams` / `p.extra` are as `hipModuleLaunchKernel`'s.
    unsafe fn new(g: &Global, p: &KernelNodeParams, device: u32) -> HipResult<KernelNode> {
        if p.func.is_null() {
            return Err(INVALID_VALUE);
        }
        let f = resolve(g, p.func, device)?;
        if [p.grid.x, p.grid.y, p.grid.z].contains(&0) {
            return Err(INVALID_VALUE);
        }
        if [p.block.x, p.block.y, p.block.z].contains(&0) {
            return Err(INVALID_CONFIGURATION);
        }
        if u64::from(p.block.x) * u64::from(p.block.y) * u64::from(p.block.z) > 1024 {
            return Err(INVALID_VALUE);
        }
        let (items, workgroup) = geometry(p.grid, p.block)?;
        // SAFETY: the caller's contract.
        let mut bytes = unsafe { module_kernarg(&f, p.kernel_params, p.extra)? };
        fill_hidden(&mut bytes, &f.hidden, items, workgroup, p.shared_mem);
        let by_buffer = p.kernel_params.is_null() && !p.extra.is_null();
        Ok(KernelNode::from_parts(p.func as usize, p.grid, p.block, p.shared_mem, f, &bytes, by_buffer))
    }

    fn from_parts(
        func: usize,
        grid: Dim3,
        block: Dim3,
        shared_mem: u32,
        f: FunctionEntry,
        bytes: &[u8],
        by_buffer: bool,
    ) -> KernelNode {
        let mut seg = vec![0u128; bytes.len().div_ceil(16).max(1)];
        // SAFETY: `seg` holds at least `bytes.len()` bytes.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), seg.as_mut_ptr().cast::<u8>(), bytes.len()) };
        let base = seg.as_ptr() as usize;
        let (params, extra) = if by_buffer {
            let size = Box::new(bytes.len());
            let list = vec![1, base, 2, &*size as *const usize as usize, 3];
            (Vec::new(), Some((list, size)))
        } else {
            (f.args.iter().flatten().map(|&(off, _)| base + off).collect(), None)
        };
        let args = Arc::new(KernelArgs { seg, len: bytes.len(), params, extra });
        KernelNode { func, grid, block, shared_mem, f, args }
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: `seg` holds at least `len` initialised bytes.
        unsafe { std::slice::from_raw_parts(self.args.seg.as_ptr().cast::<u8>(), self.args.len) }
    }

    fn params(&self) -> KernelNodeParams {
        let a = &*self.args;
        KernelNodeParams {
            block: self.block,
            extra: a.extra.as_ref().map_or(std::ptr::null_mut(), |(l, _)| l.as_ptr() as *mut *mut c_void),
            func: self.func as *const c_void,
            grid: self.grid,
            kernel_params: if a.extra.is_some() { std::ptr::null_mut() } else { a.params.as_ptr() as *mut *mut c_void },
            shared_mem: self.shared_mem,
        }
    }
}

/// A copy: `hipMemcpy3DParms` over linear memory (arrays are not supported), kept as given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CopyNode {
    src: u64,
    src_pos: Pos,
    src_pitch: usize,
    src_ysize: usize,
    dst: u64,
    dst_pos: Pos,
    dst_pitch: usize,
    dst_ysize: usize,
    extent: Extent,
    kind: c_uint,
}

impl CopyNode {
    fn linear(dst: u64, src: u64, count: usize, kind: c_uint) -> CopyNode {
        CopyNode {
            src,
            src_pos: Pos::default(),
            src_pitch: count,
            src_ysize: 1,
            dst,
            dst_pos: Pos::default(),
            dst_pitch: count,
            dst_ysize: 1,
            extent: Extent { width: count, height: 1, depth: 1 },
            kind,
        }
    }

    /// The rows `(dst, src, bytes)` the copy moves; one row when the rows are contiguous on
    /// both sides.
    fn rows(&self) -> Vec<(u64, u64, u64)> {
        let e = self.extent;
        let at = |base: u64, pos: Pos, pitch: usize, ysize: usize, y: usize, z: usize| {
            base + ((pos.z + z) * pitch * ysize + (pos.y + y) * pitch + pos.x) as u64
        };
        let contiguous = |pitch: usize, ysize: usize, pos: Pos| {
            pitch == e.width && pos == Pos::default() && (e.depth <= 1 || ysize == e.height)
        };
        if contiguous(self.src_pitch, self.src_ysize, self.src_pos)
            && contiguous(self.dst_pitch, self.dst_ysize, self.dst_pos)
        {
            return vec![(self.dst, self.src, (e.width * e.height * e.depth) as u64)];
        }
        let mut rows = Vec::new();
        for z in 0..e.depth {
            for y in 0..e.height {
                rows.push((
                    at(self.dst, self.dst_pos, self.dst_pitch, self.dst_ysize, y, z),
                    at(self.src, self.src_pos, self.src_pitch, self.src_ysize, y, z),
                    e.width as u64,
                ));
            }
        }
        rows
    }

    fn params(&self) -> Memcpy3DParms {
        let ptr = |base: u64, pitch: usize, ysize: usize| PitchedPtr {
            ptr: base as usize as *mut c_void,
            pitch,
            xsize: self.extent.width,
            ysize,
        };
        Memcpy3DParms {
            src_array: std::ptr::null_mut(),
            src_pos: self.src_pos,
            src_ptr: ptr(self.src, self.src_pitch, self.src_ysize),
            dst_array: std::ptr::null_mut(),
            dst_pos: self.dst_pos,
            dst_ptr: ptr(self.dst, self.dst_pitch, self.dst_ysize),
            extent: self.extent,
            kind: self.kind,
        }
    }
}

/// A fill: `hipMemsetParams`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct MemsetNode {
    dst: u64,
    element_size: u32,
    height: usize,
    pitch: usize,
    value: u32,
    width: usize,
}

/// A captured operation HIP has no node type for (a wait on a value, a value write, a stream
/// callback): replayed as recorded.
#[derive(Debug, Clone)]
struct RawNode {
    kind: NodeKind,
    args: Vec<u8>,
    /// The type it reports, if HIP 5.2 has one.
    ty: Option<c_int>,
}

#[derive(Clone)]
enum Kind {
    Kernel(KernelNode),
    Copy(CopyNode),
    Memset(MemsetNode),
    Host {
        func: unsafe extern "C" fn(*mut c_void),
        data: usize,
    },
    Child(Box<Graph>),
    Empty,
    EventWait(u64),
    EventRecord(u64),
    /// A graph allocation (captured `hipMallocAsync`): the block the graph owns.
    MemAlloc {
        address: u64,
        bytes: u64,
    },
    /// The free of a graph allocation (captured `hipFreeAsync`).
    MemFree(u64),
    /// IF, WHILE or SWITCH over body graphs (`conditional.rs`).
    Conditional(CondNode),
    Raw(RawNode),
}

impl Kind {
    /// Takes `new`'s parameters: a node keeps its kind, so `new` of another kind is
    /// `hipErrorInvalidValue` (the `hipGraph*NodeSetParams` rule).
    fn replace_with(&mut self, new: Kind) -> HipResult {
        if std::mem::discriminant(self) != std::mem::discriminant(&new) {
            return Err(INVALID_VALUE);
        }
        *self = new;
        Ok(())
    }

    fn ty(&self) -> Option<c_int> {
        Some(match self {
            Kind::Kernel(_) => TYPE_KERNEL,
            Kind::Copy(_) => TYPE_MEMCPY,
            Kind::Memset(_) => TYPE_MEMSET,
            Kind::Host { .. } => TYPE_HOST,
            Kind::Child(_) => TYPE_GRAPH,
            Kind::Empty => TYPE_EMPTY,
            Kind::EventWait(_) => TYPE_WAIT_EVENT,
            Kind::EventRecord(_) => TYPE_EVENT_RECORD,
            Kind::MemAlloc { .. } => TYPE_MEM_ALLOC,
            Kind::MemFree(_) => TYPE_MEM_FREE,
            Kind::Conditional(_) => TYPE_CONDITIONAL,
            Kind::Raw(r) => return r.ty,
        })
    }
}

/// Edges `(from, to)` by node id.
type Edges = Vec<(u16, u16)>;

/// Why an update failed (`hipGraphExecUpdateResult`) and the node of the new graph it failed
/// at.
type Mismatch = (c_int, Option<u16>);

/// A graph: nodes by id (destroyed ones `None`; ids are never reused) and edges `(from, to)`.
#[derive(Clone, Default)]
pub(crate) struct Graph {
    nodes: Vec<Option<Kind>>,
    /// Per node, a stamp that changes whenever the node may have (0: destroyed); clones keep
    /// it, so equal stamps mean equal nodes (`patch.rs`, "Stamps").
    stamps: Vec<u64>,
    edges: Edges,
    /// The graph this one was cloned from (0 if none): node ids carry over.
    origin: u64,
}

impl Graph {
    /// Whether the graph (or a child graph in it) has memory nodes: such a graph owns memory,
    /// so it is neither cloned nor nested, and is instantiated once.
    fn has_memory_nodes(&self) -> bool {
        self.nodes.iter().flatten().any(|k| match k {
            Kind::MemAlloc { .. } | Kind::MemFree(_) => true,
            Kind::Child(c) => c.has_memory_nodes(),
            _ => false,
        })
    }

    fn live(&self, id: u16) -> bool {
        self.nodes.get(usize::from(id)).is_some_and(Option::is_some)
    }

    fn kind(&self, id: u16) -> HipResult<&Kind> {
        self.nodes.get(usize::from(id)).and_then(Option::as_ref).ok_or(INVALID_VALUE)
    }

    fn kind_mut(&mut self, id: u16) -> HipResult<&mut Kind> {
        self.restamp(id);
        self.nodes.get_mut(usize::from(id)).and_then(Option::as_mut).ok_or(INVALID_VALUE)
    }

    fn push(&mut self, kind: Kind, deps: &[u16]) -> HipResult<u16> {
        let id = u16::try_from(self.nodes.len()).map_err(|_| Hip(2))?;
        self.nodes.push(Some(kind));
        self.stamps.resize(self.nodes.len() - 1, 0);
        self.stamps.push(patch::new_stamp());
        self.edges.extend(deps.iter().map(|&d| (d, id)));
        Ok(id)
    }

    fn deps(&self, id: u16) -> Vec<u16> {
        self.edges.iter().filter(|e| e.1 == id).map(|e| e.0).collect()
    }

    fn dependents(&self, id: u16) -> Vec<u16> {
        self.edges.iter().filter(|e| e.0 == id).map(|e| e.1).collect()
    }

    /// The live nodes in topological order (lowest id first among the ready); `None` for a
    /// cycle.
    fn order(&self) -> Option<Vec<u16>> {
        let n = self.nodes.len();
        let mut indegree = vec![0usize; n];
        let mut succ: Vec<Vec<u16>> = vec![Vec::new(); n];
        for &(f, t) in &self.edges {
            indegree[usize::from(t)] += 1;
            succ[usize::from(f)].push(t);
        }
        let mut ready: BTreeSet<u16> =
            (0..n as u16).filter(|&i| self.live(i) && indegree[usize::from(i)] == 0).collect();
        let mut out = Vec::new();
        while let Some(i) = ready.pop_first() {
            out.push(i);
            for &t in &succ[usize::from(i)] {
                indegree[usize::from(t)] -= 1;
                if indegree[usize::from(t)] == 0 {
                    ready.insert(t);
                }
            }
        }
        (out.len() == self.nodes.iter().filter(|k| k.is_some()).count()).then_some(out)
    }
}

/// A graph of this layer, or a view of a graph inside a node of another: the child graph of a
/// child-graph node (`body` `None`), or body `body` of a conditional node; or a captured graph
/// core still holds ([`Captured`]).
enum Entry {
    /// A graph, the memory it owns (captured allocations, shared with its executable), and the
    /// capture recording into it, if one does.
    Owned {
        graph: Graph,
        memory: Option<Arc<GraphMemory>>,
        recorder: Option<Recorder>,
    },
    Child {
        parent: u64,
        node: u16,
        body: Option<usize>,
        recorder: Option<Recorder>,
    },
    Core(Arc<Captured>),
}

impl Entry {
    fn owned(graph: Graph, memory: Option<Arc<GraphMemory>>) -> Entry {
        Entry::Owned { graph, memory, recorder: None }
    }

    /// The capture recording into this graph, if it still does.
    fn recorder(&self) -> Option<Recorder> {
        match self {
            Entry::Owned { recorder, .. } | Entry::Child { recorder, .. } => recorder.filter(Recorder::records),
            Entry::Core(_) => None,
        }
    }
}

/// A graph a capture recorded, left in core until something needs this layer's model of it:
/// instantiating it as it is needs none, so core instantiates its own graph (the figure
/// `hip_capture_instantiate_per_node`). Only graphs whose nodes this layer would rebuild as
/// they are wait so ([`build::stays_in_core`]); any other call on the graph table takes every
/// waiting graph over first ([`graphs`]). Executables instantiated from one hold it too, and
/// take their snapshot of it when first asked; core's graph goes with the last holder.
struct Captured {
    core: GraphHandle,
    device: u32,
    /// This layer's model of the graph and, per node, what it is in an executable instantiated
    /// from core's graph directly; built once, on first need.
    model: std::sync::OnceLock<HipResult<(Graph, Vec<build::Site>)>>,
}

impl Captured {
    fn model(&self) -> HipResult<&(Graph, Vec<build::Site>)> {
        let built = self.model.get_or_init(|| build::captured_model(global()?, self.core, self.device));
        built.as_ref().map_err(|e| *e)
    }
}

// SAFETY: shared, a `Captured` is only read: its model is written once, inside the
// `OnceLock`. The raw pointers in it (host functions' data, as in every `Graph`, which is
// `Send`) are the user's, copied and handed back, never dereferenced here.
unsafe impl Sync for Captured {}

impl Drop for Captured {
    fn drop(&mut self) {
        if let Ok(g) = global() {
            let _ = g.rt.graph_destroy(self.core);
        }
    }
}

#[derive(Default)]
struct Graphs {
    map: HashMap<u64, Entry>,
    next: u64,
    /// The handles of [`Entry::Core`] entries not yet taken over.
    waiting: Vec<u64>,
}

/// Tag of graph handles made here (core's use another).
const GRAPH_TAG: u64 = 0x4847 << 48;

impl Graphs {
    fn insert(&mut self, g: Graph) -> u64 {
        self.next += 1;
        let h = GRAPH_TAG | self.next;
        self.map.insert(h, Entry::owned(g, None));
        h
    }

    fn get(&self, h: u64) -> Option<&Graph> {
        match self.map.get(&h)? {
            Entry::Owned { graph, .. } => Some(graph),
            Entry::Child { parent, node, body, .. } => match (self.get(*parent)?.kind(*node).ok()?, body) {
                (Kind::Child(c), None) => Some(c),
                (Kind::Conditional(c), Some(b)) => c.bodies.get(*b),
                _ => None,
            },
            Entry::Core(_) => None,
        }
    }

    fn get_mut(&mut self, h: u64) -> Option<&mut Graph> {
        let mut path = Vec::new();
        let mut root = h;
        while let Entry::Child { parent, node, body, .. } = self.map.get(&root)? {
            path.push((*node, *body));
            root = *parent;
            if path.len() > 64 {
                return None;
            }
        }
        let Entry::Owned { graph: root, .. } = self.map.get_mut(&root)? else { return None };
        let mut g: &mut Graph = root;
        for &(node, body) in path.iter().rev() {
            match (g.kind_mut(node).ok()?, body) {
                (Kind::Child(c), None) => g = &mut **c,
                (Kind::Conditional(c), Some(b)) => g = c.bodies.get_mut(b)?,
                _ => return None,
            }
        }
        Some(g)
    }

    /// The handle of the child graph (`body` `None`) or body of node `node` of graph `parent`.
    fn view(&mut self, parent: u64, node: u16, body: Option<usize>) -> u64 {
        let found = self.map.iter().find(
            |(_, e)| matches!(e, Entry::Child { parent: p, node: n, body: b, .. } if *p == parent && *n == node && *b == body),
        );
        if let Some((&h, _)) = found {
            return h;
        }
        self.next += 1;
        let h = GRAPH_TAG | self.next;
        self.map.insert(h, Entry::Child { parent, node, body, recorder: None });
        h
    }
}

// ----- captures into existing graphs ---------------------------------------------------------

/// A capture into an existing graph of this layer (`hipStreamBeginCaptureToGraph`): core
/// records it into a graph of its own whose first `base` nodes are empty stand-ins for the
/// target's node ids `0..base` (so dependencies on the target's nodes are dependencies on
/// them); `hipStreamEndCapture` moves what was captured after them into the target
/// ([`merge_captured`]). The capture keeps it ([`crate::capture`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CaptureInto {
    pub(crate) target: u64,
    pub(crate) base: u16,
}

/// The hold of a capture into an existing graph on its target, kept with the capture: while it
/// lives (and the capture records) the target can be neither destroyed nor recorded into by
/// another capture.
pub(crate) struct TargetLease {
    target: u64,
    recorder: Recorder,
}

/// Marks graph `target` as recorded into by `recorder`: `hipErrorIllegalState` if another
/// capture records into it, `hipErrorInvalidValue` if it is no graph of this layer.
pub(crate) fn lease_target(target: u64, recorder: Recorder) -> HipResult<TargetLease> {
    let mut graphs = graphs();
    let entry = graphs.map.get_mut(&target).ok_or(INVALID_VALUE)?;
    if entry.recorder().is_some() {
        return Err(ILLEGAL_STATE);
    }
    match entry {
        Entry::Owned { recorder: r, .. } | Entry::Child { recorder: r, .. } => *r = Some(recorder),
        Entry::Core(_) => return Err(INVALID_VALUE),
    }
    Ok(TargetLease { target, recorder })
}

impl Drop for TargetLease {
    fn drop(&mut self) {
        let mut graphs = lock(&GRAPHS);
        if let Some(Entry::Owned { recorder: r, .. } | Entry::Child { recorder: r, .. }) =
            graphs.map.get_mut(&self.target)
        {
            if *r == Some(self.recorder) {
                *r = None;
            }
        }
    }
}

// ----- the graph table ------------------------------------------------------------------------

static GRAPHS: LazyLock<Mutex<Graphs>> = LazyLock::new(Default::default);

/// The graph table, every captured graph waiting in core taken over first (its model built,
/// the same handle then naming an owned graph). Lock order: `GRAPHS`, then core's and the
/// function tables'.
fn graphs() -> std::sync::MutexGuard<'static, Graphs> {
    let mut graphs = lock(&GRAPHS);
    for h in std::mem::take(&mut graphs.waiting) {
        let Some(Entry::Core(c)) = graphs.map.get(&h) else { continue };
        // A model that cannot be built leaves the entry in core: only destroying it works.
        if let Ok((model, _)) = c.model() {
            let model = model.clone();
            graphs.map.insert(h, Entry::owned(model, None));
        }
    }
    graphs
}

/// Whether `h` names a graph of this layer (otherwise it is core's: a capture's, or garbage).
fn is_ours(h: u64) -> bool {
    graphs().map.contains_key(&h)
}

fn with_graph<R>(h: Handle, f: impl FnOnce(&Graph) -> HipResult<R>) -> HipResult<R> {
    let graphs = graphs();
    f(graphs.get(h as usize as u64).ok_or(INVALID_VALUE)?)
}

fn with_graph_mut<R>(h: Handle, f: impl FnOnce(&mut Graph) -> HipResult<R>) -> HipResult<R> {
    let mut graphs = graphs();
    f(graphs.get_mut(h as usize as u64).ok_or(INVALID_VALUE)?)
}

/// The (graph, node id) a node handle names; NULL and garbage are `hipErrorInvalidValue`.
fn node_of(g: &Global, node: Handle) -> HipResult<(u64, u16)> {
    lock(&g.nodes).get(node as usize as u64).ok_or(INVALID_VALUE)
}

fn node_handle(g: &Global, graph: u64, id: u16) -> Handle {
    handle(lock(&g.nodes).handle(graph, id))
}

/// Reads `count` node handles (NULL with `count` > 0 is `hipErrorInvalidValue`).
///
/// # Safety
/// `list` is NULL or holds `count` handles.
unsafe fn handles<'a>(list: *const Handle, count: usize) -> HipResult<&'a [Handle]> {
    if count == 0 {
        return Ok(&[]);
    }
    if list.is_null() {
        return Err(INVALID_VALUE);
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(list, count) })
}

/// Node handles as ids of `graph`: each must be a live node of it, listed once.
fn dep_ids(g: &Global, graph: u64, deps: &[Handle], live: impl Fn(u16) -> bool) -> HipResult<Vec<u16>> {
    let mut out = Vec::with_capacity(deps.len());
    for &d in deps {
        let (gh, id) = node_of(g, d)?;
        if gh != graph || !live(id) || out.contains(&id) {
            return Err(INVALID_VALUE);
        }
        out.push(id);
    }
    Ok(out)
}

/// Writes a list under HIP's convention: with `out` NULL, `*count` becomes the length;
/// otherwise up to `*count` items are written, the rest of a longer buffer set to NULL and
/// `*count` lowered to the length.
///
/// # Safety
/// `count` is valid for reads and writes; `out` is NULL or holds `*count` handles.
unsafe fn write_list(items: &[Handle], out: *mut Handle, count: *mut usize) -> HipResult {
    if count.is_null() {
        return Err(INVALID_VALUE);
    }
    if out.is_null() {
        // SAFETY: the caller's contract.
        return unsafe { put(count, items.len()) };
    }
    // SAFETY: the caller's contract.
    let room = unsafe { count.read() };
    // SAFETY: the caller's contract: `out` holds `room` handles.
    let slots = unsafe { std::slice::from_raw_parts_mut(out, room) };
    for (i, slot) in slots.iter_mut().enumerate() {
        *slot = items.get(i).copied().unwrap_or(std::ptr::null_mut());
    }
    if room > items.len() {
        // SAFETY: the caller's contract.
        unsafe { put(count, items.len())? };
    }
    Ok(())
}

/// How many node ids graph `h` has given out (its next node's id): `hipErrorInvalidValue` for
/// anything but a graph of this layer.
pub(crate) fn slot_count(h: u64) -> HipResult<u16> {
    with_graph(handle(h), |graph| u16::try_from(graph.nodes.len()).map_err(|_| Hip(2)))
}

/// Whether node `id` of graph `h` lives.
pub(crate) fn is_live_node(h: u64, id: u16) -> bool {
    with_graph(handle(h), |graph| Ok(graph.live(id))).unwrap_or(false)
}

mod build;
mod conditional;
mod exec;
mod memory;
mod patch;

pub(crate) use memory::{GraphMemory, Recorder};

pub(crate) use build::{adopt_captured, merge_captured};
use build::{captured_kind, Build};
use conditional::CondNode;

/// `hipGraphCreate`: `flags` must be 0.
///
/// # Safety
/// `graph` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipGraphCreate(graph: *mut Handle, flags: c_uint) -> i32 {
    api(|| {
        global()?;
        if graph.is_null() || flags != 0 {
            return Err(INVALID_VALUE);
        }
        let h = graphs().insert(Graph::default());
        // SAFETY: the caller's contract.
        unsafe { put(graph, handle(h)) }
    })
}

/// `hipGraphDestroy`: NULL, destroyed and garbage graphs are `hipErrorInvalidValue`, and so is
/// a graph a capture still records into or the child graph of a node.
#[no_mangle]
pub extern "C" fn hipGraphDestroy(graph: Handle) -> i32 {
    api(|| {
        let g = global()?;
        let h = graph as usize as u64;
        let mut graphs = lock(&GRAPHS);
        match graphs.map.get(&h) {
            Some(Entry::Core(_)) => {
                let gone = graphs.map.remove(&h);
                graphs.waiting.retain(|&w| w != h);
                drop(graphs);
                drop(gone);
                conditional::graph_gone(h);
                Ok(())
            }
            Some(e @ Entry::Owned { .. }) if e.recorder().is_some() => Err(INVALID_VALUE),
            Some(Entry::Owned { .. }) => {
                let gone = graphs.map.remove(&h);
                drop(graphs);
                conditional::graph_gone(h);
                match gone {
                    Some(Entry::Owned { memory: Some(m), .. }) => memory::let_go(m),
                    _ => Ok(()),
                }
            }
            Some(Entry::Child { .. }) => Err(INVALID_VALUE),
            None => {
                drop(graphs);
                Ok(g.rt.graph_destroy(GraphHandle(h))?)
            }
        }
    })
}

/// `hipGraphClone`: a deep copy (child graphs included) whose nodes keep their ids, so
/// `hipGraphNodeFindInClone` finds them. A graph with memory or conditional nodes is
/// `hipErrorNotSupported` (as in CUDA).
///
/// # Safety
/// `clone` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipGraphClone(clone: *mut Handle, graph: Handle) -> i32 {
    api(|| {
        global()?;
        if clone.is_null() || graph.is_null() {
            return Err(INVALID_VALUE);
        }
        let h = graph as usize as u64;
        let mut graphs = graphs();
        let original = graphs.get(h).ok_or(INVALID_VALUE)?;
        if original.has_memory_nodes() || original.has_conditional_nodes() {
            return Err(NOT_SUPPORTED);
        }
        let mut copy = original.clone();
        copy.origin = h;
        let c = graphs.insert(copy);
        // SAFETY: the caller's contract.
        unsafe { put(clone, handle(c)) }
    })
}

/// `hipGraphNodeFindInClone`: the node of `clone` that `original` became.
///
/// # Safety
/// `node` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipGraphNodeFindInClone(node: *mut Handle, original: Handle, clone: Handle) -> i32 {
    api(|| {
        let g = global()?;
        if node.is_null() || original.is_null() || clone.is_null() {
            return Err(INVALID_VALUE);
        }
        let (gh, id) = node_of(g, original)?;
        let ch = clone as usize as u64;
        let found = {
            let graphs = graphs();
            let c = graphs.get(ch).ok_or(INVALID_VALUE)?;
            c.origin == gh && c.live(id)
        };
        if !found {
            return Err(INVALID_VALUE);
        }
        // SAFETY: the caller's contract.
        unsafe { put(node, node_handle(g, ch, id)) }
    })
}

/// `hipGraphGetNodes`: the nodes in topological order (a cycle is `hipErrorInvalidValue`).
///
/// # Safety
/// `count` is NULL or valid for reads and writes; `nodes` is NULL or holds `*count` handles.
#[no_mangle]
pub unsafe extern "C" fn hipGraphGetNodes(graph: Handle, nodes: *mut Handle, count: *mut usize) -> i32 {
    api(|| {
        let g = global()?;
        if graph.is_null() || count.is_null() {
            return Err(INVALID_VALUE);
        }
        let h = graph as usize as u64;
        let ids: Vec<u16> = if is_ours(h) {
            with_graph(graph, |gr| gr.order().ok_or(INVALID_VALUE))?
        } else {
            let gh = GraphHandle(h);
            let mut ids = vec![NodeId(0); g.rt.graph_node_count(gh)?];
            let n = g.rt.graph_nodes(gh, &mut ids)?;
            ids.iter().take(n).map(|i| i.0).collect()
        };
        let items: Vec<Handle> = ids.iter().map(|&id| node_handle(g, h, id)).collect();
        // SAFETY: the caller's contract.
        unsafe { write_list(&items, nodes, count) }
    })
}

/// `hipGraphGetRootNodes`: nodes without dependencies, in topological order.
///
/// # Safety
/// As `hipGraphGetNodes`.
#[no_mangle]
pub unsafe extern "C" fn hipGraphGetRootNodes(graph: Handle, nodes: *mut Handle, count: *mut usize) -> i32 {
    api(|| {
        let g = global()?;
        if graph.is_null() || count.is_null() {
            return Err(INVALID_VALUE);
        }
        let h = graph as usize as u64;
        let ids: Vec<u16> = if is_ours(h) {
            with_graph(graph, |gr| {
                let order = gr.order().unwrap_or_else(|| (0..gr.nodes.len() as u16).filter(|&i| gr.live(i)).collect());
                Ok(order.into_iter().filter(|&i| gr.deps(i).is_empty()).collect())
            })?
        } else {
            let (nodes, edges) = core_graph(g, GraphHandle(h))?;
            nodes.into_iter().filter(|i| !edges.iter().any(|e| e.1 == *i)).collect()
        };
        let items: Vec<Handle> = ids.iter().map(|&id| node_handle(g, h, id)).collect();
        // SAFETY: the caller's contract.
        unsafe { write_list(&items, nodes, count) }
    })
}

/// The node ids and edges of a core (capturing) graph.
fn core_graph(g: &Global, gh: GraphHandle) -> HipResult<(Vec<u16>, Edges)> {
    let n = g.rt.graph_node_count(gh)?;
    let mut edges = vec![(NodeId(0), NodeId(0)); 2 * n + 16];
    let e = g.rt.graph_edges(gh, &mut edges)?.min(edges.len());
    Ok(((0..n as u16).collect(), edges.iter().take(e).map(|(f, t)| (f.0, t.0)).collect()))
}

/// `hipGraphGetEdges`: `from` and `to` both NULL (the count) or both lists.
///
/// # Safety
/// `count` is NULL or valid for reads and writes; `from` and `to` are NULL or hold `*count`
/// handles each.
#[no_mangle]
pub unsafe extern "C" fn hipGraphGetEdges(graph: Handle, from: *mut Handle, to: *mut Handle, count: *mut usize) -> i32 {
    api(|| {
        let g = global()?;
        if graph.is_null() || count.is_null() || from.is_null() != to.is_null() {
            return Err(INVALID_VALUE);
        }
        let h = graph as usize as u64;
        let edges =
            if is_ours(h) { with_graph(graph, |gr| Ok(gr.edges.clone()))? } else { core_graph(g, GraphHandle(h))?.1 };
        let froms: Vec<Handle> = edges.iter().map(|e| node_handle(g, h, e.0)).collect();
        let tos: Vec<Handle> = edges.iter().map(|e| node_handle(g, h, e.1)).collect();
        if from.is_null() {
            // SAFETY: the caller's contract.
            return unsafe { put(count, edges.len()) };
        }
        // SAFETY: the caller's contract; `*count` is read before either list is written.
        let room = unsafe { count.read() };
        // SAFETY: as above; each list holds `room` handles.
        unsafe {
            write_list(&froms, from, count)?;
            put(count, room)?;
            write_list(&tos, to, count)
        }
    })
}

/// The dependencies (`incoming`) or dependents of a node.
///
/// # Safety
/// As `hipGraphGetNodes`.
unsafe fn neighbours(node: Handle, out: *mut Handle, count: *mut usize, incoming: bool) -> HipResult {
    let g = global()?;
    if count.is_null() {
        return Err(INVALID_VALUE);
    }
    let (gh, id) = node_of(g, node)?;
    let ids = if is_ours(gh) {
        let graphs = graphs();
        let gr = graphs.get(gh).ok_or(INVALID_VALUE)?;
        gr.kind(id)?;
        if incoming {
            gr.deps(id)
        } else {
            gr.dependents(id)
        }
    } else {
        let (_, edges) = core_graph(g, GraphHandle(gh))?;
        if incoming {
            edges.iter().filter(|e| e.1 == id).map(|e| e.0).collect()
        } else {
            edges.iter().filter(|e| e.0 == id).map(|e| e.1).collect()
        }
    };
    let items: Vec<Handle> = ids.iter().map(|&i| node_handle(g, gh, i)).collect();
    // SAFETY: the caller's contract.
    unsafe { write_list(&items, out, count) }
}

/// `hipGraphNodeGetDependencies`.
///
/// # Safety
/// As `hipGraphGetNodes`.
#[no_mangle]
pub unsafe extern "C" fn hipGraphNodeGetDependencies(node: Handle, deps: *mut Handle, count: *mut usize) -> i32 {
    // SAFETY: forwarded caller contract.
    api(|| unsafe { neighbours(node, deps, count, true) })
}

/// `hipGraphNodeGetDependentNodes`.
///
/// # Safety
/// As `hipGraphGetNodes`.
#[no_mangle]
pub unsafe extern "C" fn hipGraphNodeGetDependentNodes(node: Handle, deps: *mut Handle, count: *mut usize) -> i32 {
    // SAFETY: forwarded caller contract.
    api(|| unsafe { neighbours(node, deps, count, false) })
}

/// `hipGraphAddDependencies`: `to[k]` runs after `from[k]`. Every pair is checked first (NULL,
/// a self-edge, a node of another graph: `hipErrorInvalidValue`, nothing added); then an edge
/// that exists already is `hipErrorInvalidValue`, the pairs before it staying added.
///
/// # Safety
/// `from` and `to` are NULL or hold `count` handles each.
#[no_mangle]
pub unsafe extern "C" fn hipGraphAddDependencies(
    graph: Handle,
    from: *const Handle,
    to: *const Handle,
    count: usize,
) -> i32 {
    api(|| {
        let g = global()?;
        if graph.is_null() {
            return Err(INVALID_VALUE);
        }
        if count == 0 {
            return Ok(());
        }
        // SAFETY: the caller's contract.
        let (from, to) = unsafe { (handles(from, count)?, handles(to, count)?) };
        let h = graph as usize as u64;
        let mut pairs = Vec::with_capacity(count);
        for (&f, &t) in from.iter().zip(to) {
            let ((fg, fi), (tg, ti)) = (node_of(g, f)?, node_of(g, t)?);
            if fg != h || tg != h || fi == ti {
                return Err(INVALID_VALUE);
            }
            pairs.push((fi, ti));
        }
        if !is_ours(h) {
            let (f, t): (Vec<NodeId>, Vec<NodeId>) = pairs.iter().map(|&(f, t)| (NodeId(f), NodeId(t))).unzip();
            return Ok(g.rt.graph_add_dependencies(GraphHandle(h), &f, &t)?);
        }
        with_graph_mut(graph, |gr| {
            if pairs.iter().any(|&(f, t)| !gr.live(f) || !gr.live(t)) {
                return Err(INVALID_VALUE);
            }
            for p in pairs {
                if gr.edges.contains(&p) {
                    return Err(INVALID_VALUE);
                }
                gr.edges.push(p);
            }
            Ok(())
        })
    })
}

/// `hipGraphRemoveDependencies`: a pair that is no edge of the graph is `hipErrorInvalidValue`
/// (the pairs before it stay removed).
///
/// # Safety
/// `from` and `to` are NULL or hold `count` handles each.
#[no_mangle]
pub unsafe extern "C" fn hipGraphRemoveDependencies(
    graph: Handle,
    from: *const Handle,
    to: *const Handle,
    count: usize,
) -> i32 {
    api(|| {
        let g = global()?;
        if graph.is_null() {
            return Err(INVALID_VALUE);
        }
        // SAFETY: the caller's contract.
        let (from, to) = unsafe { (handles(from, count)?, handles(to, count)?) };
        let h = graph as usize as u64;
        if count > 0 && !is_ours(h) {
            return Err(NOT_SUPPORTED);
        }
        let mut pairs = Vec::with_capacity(count);
        for (&f, &t) in from.iter().zip(to) {
            let ((fg, fi), (tg, ti)) = (node_of(g, f)?, node_of(g, t)?);
            pairs.push((fg == h && tg == h).then_some((fi, ti)));
        }
        with_graph_mut(graph, |gr| {
            for p in pairs {
                let p = p.ok_or(INVALID_VALUE)?;
                let at = gr.edges.iter().position(|&e| e == p).ok_or(INVALID_VALUE)?;
                gr.edges.remove(at);
            }
            Ok(())
        })
    })
}

/// `hipGraphDestroyNode`: the node goes with its edges.
#[no_mangle]
pub extern "C" fn hipGraphDestroyNode(node: Handle) -> i32 {
    api(|| {
        let g = global()?;
        let (gh, id) = node_of(g, node)?;
        if !is_ours(gh) {
            return Err(NOT_SUPPORTED);
        }
        let mut graphs = graphs();
        let gr = graphs.get_mut(gh).ok_or(INVALID_VALUE)?;
        if matches!(gr.kind(id)?, Kind::MemAlloc { .. } | Kind::MemFree(_)) {
            return Err(NOT_SUPPORTED);
        }
        gr.nodes[usize::from(id)] = None;
        gr.set_stamp(id, 0);
        gr.edges.retain(|e| e.0 != id && e.1 != id);
        Ok(())
    })
}

/// `hipGraphNodeGetType` (HIP 5.2's numbering). A captured operation HIP has no node type for
/// (a wait on or write of a value) is `hipErrorNotSupported`.
///
/// # Safety
/// `ty` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipGraphNodeGetType(node: Handle, ty: *mut c_int) -> i32 {
    api(|| {
        let g = global()?;
        if ty.is_null() {
            return Err(INVALID_VALUE);
        }
        let (gh, id) = node_of(g, node)?;
        let t = if is_ours(gh) {
            with_graph(gh as usize as Handle, |gr| Ok(gr.kind(id)?.ty()))?
        } else {
            captured_kind(g, GraphHandle(gh), NodeId(id), g.rt.device()?)?.ty()
        };
        // SAFETY: the caller's contract.
        unsafe { put(ty, t.ok_or(NOT_SUPPORTED)?) }
    })
}

// ----- adding nodes ---------------------------------------------------------------------------

/// Adds `kind` to `graph` after `deps` and writes its handle: to a graph of this layer, or to a
/// capture's graph in core.
///
/// # Safety
/// `node` is NULL or valid for writes; `deps` is NULL or holds `count` handles.
unsafe fn add_node(
    node: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    count: usize,
    kind: HipResult<Kind>,
) -> HipResult {
    let g = global()?;
    if node.is_null() || graph.is_null() {
        return Err(INVALID_VALUE);
    }
    // SAFETY: the caller's contract.
    let deps = unsafe { handles(deps, count)? };
    let kind = kind?;
    let h = graph as usize as u64;
    let id = if is_ours(h) {
        let mut graphs = graphs();
        let gr = graphs.get_mut(h).ok_or(INVALID_VALUE)?;
        let ids = dep_ids(g, h, deps, |i| gr.live(i))?;
        gr.push(kind, &ids)?
    } else {
        let core = GraphHandle(h);
        let n = g.rt.graph_node_count(core)?;
        let ids = dep_ids(g, h, deps, |i| usize::from(i) < n)?;
        let ids: Vec<NodeId> = ids.into_iter().map(NodeId).collect();
        let device = g.rt.device()?;
        Build { g, core, device, staging: None, bodies: Vec::new(), site: Default::default() }.add(&kind, &ids)?.0
    };
    // SAFETY: the caller's contract.
    unsafe { put(node, node_handle(g, h, id)) }
}

/// `hipGraphAddEmptyNode`.
///
/// # Safety
/// `node` is NULL or valid for writes; `deps` is NULL or holds `count` handles.
#[no_mangle]
pub unsafe extern "C" fn hipGraphAddEmptyNode(
    node: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    count: usize,
) -> i32 {
    // SAFETY: forwarded caller contract.
    api(|| unsafe { add_node(node, graph, deps, count, Ok(Kind::Empty)) })
}

fn kernel_kind(p: *const KernelNodeParams) -> HipResult<Kind> {
    let g = global()?;
    if p.is_null() {
        return Err(INVALID_VALUE);
    }
    // SAFETY: non-null; the caller of the API vouches for the struct and its argument lists.
    unsafe { KernelNode::new(g, &*p, g.rt.device()?) }.map(Kind::Kernel)
}

/// `hipGraphAddKernelNode`: the arguments are copied now; `func` is a kernel handle (or a
/// `hipFunction_t`), NULL being `hipErrorInvalidValue` and an unknown one
/// `hipErrorInvalidDeviceFunction`.
///
/// # Safety
/// `node` is NULL or valid for writes; `deps` is NULL or holds `count` handles; `p` is NULL or
/// valid, its argument lists as `hipModuleLaunchKernel`'s.
#[no_mangle]
pub unsafe extern "C" fn hipGraphAddKernelNode(
    node: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    count: usize,
    p: *const KernelNodeParams,
) -> i32 {
    // SAFETY: forwarded caller contract.
    api(|| unsafe { add_node(node, graph, deps, count, kernel_kind(p)) })
}

/// Whether `[addr, addr + bytes)` starts inside an allocation of this runtime but runs past
/// its end.
fn overruns(g: &Global, addr: u64, bytes: u64) -> bool {
    let allocs = lock(&g.allocs);
    allocs
        .range(..=addr)
        .next_back()
        .is_some_and(|(&start, &(len, _))| addr < start + len.max(1) && addr.saturating_add(bytes) > start + len)
}

/// A 1-D copy, checked as HIP checks `hipGraphAddMemcpyNode1D`: zero bytes, NULL ends and a
/// range past an allocation are `hipErrorInvalidValue`, an unknown kind
/// `hipErrorInvalidMemcpyDirection`, and so is a kind that contradicts pageable memory.
fn copy_1d(g: &Global, dst: u64, src: u64, count: usize, kind: c_uint) -> HipResult<Kind> {
    if count == 0 || dst == 0 || src == 0 {
        return Err(INVALID_VALUE);
    }
    if kind > MEMCPY_DEFAULT && kind != MEMCPY_NO_CU {
        return Err(INVALID_MEMCPY_DIRECTION);
    }
    let n = count as u64;
    if overruns(g, dst, n) || overruns(g, src, n) {
        return Err(INVALID_VALUE);
    }
    let (d, s) = (crate::memory::device_reachable(g, dst, n), crate::memory::device_reachable(g, src, n));
    if (!s && d && !matches!(kind, TO_DEVICE | MEMCPY_DEFAULT))
        || (!d && s && !matches!(kind, TO_HOST | MEMCPY_DEFAULT))
    {
        return Err(INVALID_VALUE);
    }
    Ok(Kind::Copy(CopyNode::linear(dst, src, count, kind)))
}

/// A 3-D copy of linear memory (arrays are `hipErrorNotSupported`).
fn copy_3d(p: *const Memcpy3DParms) -> HipResult<Kind> {
    if p.is_null() {
        return Err(INVALID_VALUE);
    }
    // SAFETY: non-null; the caller of the API vouches for the struct.
    let p = unsafe { &*p };
    if !p.src_array.is_null() || !p.dst_array.is_null() {
        return Err(NOT_SUPPORTED);
    }
    if p.src_ptr.ptr.is_null() || p.dst_ptr.ptr.is_null() {
        return Err(INVALID_VALUE);
    }
    let e = p.extent;
    if p.src_ptr.pitch < e.width + p.src_pos.x || p.dst_ptr.pitch < e.width + p.dst_pos.x {
        return Err(INVALID_PITCH);
    }
    if p.kind > MEMCPY_DEFAULT && p.kind != MEMCPY_NO_CU {
        return Err(INVALID_MEMCPY_DIRECTION);
    }
    if e.width == 0 || e.height == 0 || e.depth == 0 {
        return Err(INVALID_VALUE);
    }
    Ok(Kind::Copy(CopyNode {
        src: p.src_ptr.ptr as usize as u64,
        src_pos: p.src_pos,
        src_pitch: p.src_ptr.pitch,
        src_ysize: p.src_ptr.ysize.max(1),
        dst: p.dst_ptr.ptr as usize as u64,
        dst_pos: p.dst_pos,
        dst_pitch: p.dst_ptr.pitch,
        dst_ysize: p.dst_ptr.ysize.max(1),
        extent: e,
        kind: p.kind,
    }))
}

/// `hipGraphAddMemcpyNode`: linear memory (pitched rows) only.
///
/// # Safety
/// As `hipGraphAddKernelNode`; `p` is NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn hipGraphAddMemcpyNode(
    node: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    count: usize,
    p: *const Memcpy3DParms,
) -> i32 {
    // SAFETY: forwarded caller contract.
    api(|| unsafe { add_node(node, graph, deps, count, copy_3d(p)) })
}

/// `hipGraphAddMemcpyNode1D`.
///
/// # Safety
/// As `hipGraphAddKernelNode`; `dst` and `src` stay valid for `bytes` bytes while the graph can
/// run.
#[no_mangle]
pub unsafe extern "C" fn hipGraphAddMemcpyNode1D(
    node: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    count: usize,
    dst: *mut c_void,
    src: *const c_void,
    bytes: usize,
    kind: c_uint,
) -> i32 {
    api(|| {
        let g = global()?;
        let k = copy_1d(g, dst as usize as u64, src as usize as u64, bytes, kind);
        // SAFETY: forwarded caller contract.
        unsafe { add_node(node, graph, deps, count, k) }
    })
}

fn from_symbol(
    g: &Global,
    dst: *mut c_void,
    symbol: *const c_void,
    bytes: usize,
    offset: usize,
    kind: c_uint,
) -> HipResult<Kind> {
    check_direction(kind, TO_HOST)?;
    let src = symbol_range(g, symbol, bytes, offset)?;
    copy_1d(g, dst as usize as u64, src, bytes, kind)
}

fn to_symbol(
    g: &Global,
    symbol: *const c_void,
    src: *const c_void,
    bytes: usize,
    offset: usize,
    kind: c_uint,
) -> HipResult<Kind> {
    check_direction(kind, TO_DEVICE)?;
    let dst = symbol_range(g, symbol, bytes, offset)?;
    copy_1d(g, dst, src as usize as u64, bytes, kind)
}

/// `hipGraphAddMemcpyNodeFromSymbol`: the variable's address is taken on the calling thread's
/// device now.
///
/// # Safety
/// As `hipGraphAddMemcpyNode1D`.
#[no_mangle]
pub unsafe extern "C" fn hipGraphAddMemcpyNodeFromSymbol(
    node: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    count: usize,
    dst: *mut c_void,
    symbol: *const c_void,
    bytes: usize,
    offset: usize,
    kind: c_uint,
) -> i32 {
    api(|| {
        let g = global()?;
        let k = from_symbol(g, dst, symbol, bytes, offset, kind);
        // SAFETY: forwarded caller contract.
        unsafe { add_node(node, graph, deps, count, k) }
    })
}

/// `hipGraphAddMemcpyNodeToSymbol`.
///
/// # Safety
/// As `hipGraphAddMemcpyNode1D`.
#[no_mangle]
pub unsafe extern "C" fn hipGraphAddMemcpyNodeToSymbol(
    node: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    count: usize,
    symbol: *const c_void,
    src: *const c_void,
    bytes: usize,
    offset: usize,
    kind: c_uint,
) -> i32 {
    api(|| {
        let g = global()?;
        let k = to_symbol(g, symbol, src, bytes, offset, kind);
        // SAFETY: forwarded caller contract.
        unsafe { add_node(node, graph, deps, count, k) }
    })
}

/// A fill, checked as HIP checks `hipMemsetParams`: `height` 0, an element size other than 1,
/// 2 or 4, NULL, a pitch shorter than a row of several, or a range past an allocation are
/// `hipErrorInvalidValue`.
fn memset_kind(g: &Global, p: *const MemsetParams) -> HipResult<Kind> {
    if p.is_null() {
        return Err(INVALID_VALUE);
    }
    // SAFETY: non-null; the caller of the API vouches for the struct.
    let p = unsafe { *p };
    let row = p.width.checked_mul(p.element_size as usize).ok_or(INVALID_VALUE)?;
    if p.height == 0 || !matches!(p.element_size, 1 | 2 | 4) || p.dst.is_null() || (p.height > 1 && p.pitch < row) {
        return Err(INVALID_VALUE);
    }
    let dst = p.dst as usize as u64;
    let span = (p.height - 1).checked_mul(p.pitch).and_then(|v| v.checked_add(row)).ok_or(INVALID_VALUE)?;
    if overruns(g, dst, span as u64) || dst % u64::from(p.element_size) != 0 {
        return Err(INVALID_VALUE);
    }
    Ok(Kind::Memset(MemsetNode {
        dst,
        element_size: p.element_size,
        height: p.height,
        pitch: p.pitch,
        value: p.value,
        width: p.width,
    }))
}

/// `hipGraphAddMemsetNode`.
///
/// # Safety
/// As `hipGraphAddKernelNode`; `p` is NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn hipGraphAddMemsetNode(
    node: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    count: usize,
    p: *const MemsetParams,
) -> i32 {
    api(|| {
        let g = global()?;
        let k = memset_kind(g, p);
        // SAFETY: forwarded caller contract.
        unsafe { add_node(node, graph, deps, count, k) }
    })
}

fn host_kind(p: *const HostNodeParams) -> HipResult<Kind> {
    if p.is_null() {
        return Err(INVALID_VALUE);
    }
    // SAFETY: non-null; the caller of the API vouches for the struct.
    let p = unsafe { *p };
    let func = p.func.ok_or(INVALID_VALUE)?;
    Ok(Kind::Host { func, data: p.data as usize })
}

/// `hipGraphAddHostNode`: `fn(userData)` runs on a host thread when the node's dependencies
/// are done, and the nodes after it wait for it.
///
/// # Safety
/// As `hipGraphAddKernelNode`; `p` is NULL or valid; the function and its data stay valid while
/// the graph can run.
#[no_mangle]
pub unsafe extern "C" fn hipGraphAddHostNode(
    node: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    count: usize,
    p: *const HostNodeParams,
) -> i32 {
    // SAFETY: forwarded caller contract.
    api(|| unsafe { add_node(node, graph, deps, count, host_kind(p)) })
}

/// A live event's raw handle; NULL and destroyed events are `hipErrorInvalidValue`.
fn event_of(g: &Global, event: Handle) -> HipResult<u64> {
    let e = event as usize as u64;
    match g.rt.event_query(EventHandle(e)) {
        Ok(()) => Ok(e),
        Err(err) if Hip::from(err) == Hip(600) => Ok(e),
        Err(_) => Err(INVALID_VALUE),
    }
}

/// `hipGraphAddEventRecordNode`.
///
/// # Safety
/// As `hipGraphAddEmptyNode`.
#[no_mangle]
pub unsafe extern "C" fn hipGraphAddEventRecordNode(
    node: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    count: usize,
    event: Handle,
) -> i32 {
    api(|| {
        let g = global()?;
        let k = event_of(g, event).map(Kind::EventRecord);
        // SAFETY: forwarded caller contract.
        unsafe { add_node(node, graph, deps, count, k) }
    })
}

/// `hipGraphAddEventWaitNode`.
///
/// # Safety
/// As `hipGraphAddEmptyNode`.
#[no_mangle]
pub unsafe extern "C" fn hipGraphAddEventWaitNode(
    node: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    count: usize,
    event: Handle,
) -> i32 {
    api(|| {
        let g = global()?;
        let k = event_of(g, event).map(Kind::EventWait);
        // SAFETY: forwarded caller contract.
        unsafe { add_node(node, graph, deps, count, k) }
    })
}

fn child_kind(child: Handle) -> HipResult<Kind> {
    if child.is_null() {
        return Err(INVALID_VALUE);
    }
    with_graph(child, |c| {
        if c.has_memory_nodes() || c.has_conditional_nodes() {
            return Err(NOT_SUPPORTED);
        }
        Ok(Kind::Child(Box::new(Graph { origin: 0, ..c.clone() })))
    })
}

/// `hipGraphAddChildGraphNode`: the child is copied now; `hipGraphChildGraphNodeGetGraph`
/// returns the copy. A child with memory or conditional nodes is `hipErrorNotSupported` (CUDA
/// refuses both).
///
/// # Safety
/// As `hipGraphAddEmptyNode`.
#[no_mangle]
pub unsafe extern "C" fn hipGraphAddChildGraphNode(
    node: *mut Handle,
    graph: Handle,
    deps: *const Handle,
    count: usize,
    child: Handle,
) -> i32 {
    // SAFETY: forwarded caller contract.
    api(|| unsafe { add_node(node, graph, deps, count, child_kind(child)) })
}

// ----- node parameters ------------------------------------------------------------------------

/// Runs `f` on the node a handle names. Nodes of a graph a capture still records into are
/// core's: their parameters are `hipErrorNotSupported` until the capture ends.
fn with_node<R>(node: Handle, f: impl FnOnce(&Global, &mut Kind) -> HipResult<R>) -> HipResult<R> {
    let g = global()?;
    let (gh, id) = node_of(g, node)?;
    let mut graphs = graphs();
    match graphs.get_mut(gh) {
        Some(gr) => f(g, gr.kind_mut(id)?),
        None => {
            drop(graphs);
            Err(if g.rt.graph_node_count(GraphHandle(gh)).is_ok() { NOT_SUPPORTED } else { INVALID_VALUE })
        }
    }
}

/// `hipGraphKernelNodeGetParams`: `kernelParams` (or `extra`) points at the node's own copy of
/// the arguments.
///
/// # Safety
/// `p` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipGraphKernelNodeGetParams(node: Handle, p: *mut KernelNodeParams) -> i32 {
    api(|| {
        if p.is_null() {
            return Err(INVALID_VALUE);
        }
        let params = with_node(node, |_, k| match k {
            Kind::Kernel(k) => Ok(k.params()),
            _ => Err(INVALID_VALUE),
        })?;
        // SAFETY: the caller's contract.
        unsafe { put(p, params) }
    })
}

/// `hipGraphKernelNodeSetParams`.
///
/// # Safety
/// `p` is NULL or valid, its argument lists as `hipModuleLaunchKernel`'s.
#[no_mangle]
pub unsafe extern "C" fn hipGraphKernelNodeSetParams(node: Handle, p: *const KernelNodeParams) -> i32 {
    api(|| {
        let new = kernel_kind(p)?;
        with_node(node, |_, k| k.replace_with(new))
    })
}

/// `hipGraphMemcpyNodeGetParams`: a 1-D copy reads as a one-row 3-D copy.
///
/// # Safety
/// `p` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipGraphMemcpyNodeGetParams(node: Handle, p: *mut Memcpy3DParms) -> i32 {
    api(|| {
        if p.is_null() {
            return Err(INVALID_VALUE);
        }
        let params = with_node(node, |_, k| match k {
            Kind::Copy(c) => Ok(c.params()),
            _ => Err(INVALID_VALUE),
        })?;
        // SAFETY: the caller's contract.
        unsafe { put(p, params) }
    })
}

/// Replaces a copy node's copy.
fn set_copy(node: Handle, new: HipResult<Kind>) -> HipResult {
    let new = new?;
    with_node(node, |_, k| k.replace_with(new))
}

/// `hipGraphMemcpyNodeSetParams`.
///
/// # Safety
/// `p` is NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn hipGraphMemcpyNodeSetParams(node: Handle, p: *const Memcpy3DParms) -> i32 {
    api(|| set_copy(node, copy_3d(p)))
}

/// `hipGraphMemcpyNodeSetParams1D`.
///
/// # Safety
/// `dst` and `src` stay valid for `bytes` bytes while the graph can run.
#[no_mangle]
pub unsafe extern "C" fn hipGraphMemcpyNodeSetParams1D(
    node: Handle,
    dst: *mut c_void,
    src: *const c_void,
    bytes: usize,
    kind: c_uint,
) -> i32 {
    api(|| set_copy(node, copy_1d(global()?, dst as usize as u64, src as usize as u64, bytes, kind)))
}

/// `hipGraphMemcpyNodeSetParamsFromSymbol`.
///
/// # Safety
/// As `hipGraphMemcpyNodeSetParams1D`.
#[no_mangle]
pub unsafe extern "C" fn hipGraphMemcpyNodeSetParamsFromSymbol(
    node: Handle,
    dst: *mut c_void,
    symbol: *const c_void,
    bytes: usize,
    offset: usize,
    kind: c_uint,
) -> i32 {
    api(|| set_copy(node, from_symbol(global()?, dst, symbol, bytes, offset, kind)))
}

/// `hipGraphMemcpyNodeSetParamsToSymbol`.
///
/// # Safety
/// As `hipGraphMemcpyNodeSetParams1D`.
#[no_mangle]
pub unsafe extern "C" fn hipGraphMemcpyNodeSetParamsToSymbol(
    node: Handle,
    symbol: *const c_void,
    src: *const c_void,
    bytes: usize,
    offset: usize,
    kind: c_uint,
) -> i32 {
    api(|| set_copy(node, to_symbol(global()?, symbol, src, bytes, offset, kind)))
}

/// `hipGraphMemsetNodeGetParams`.
///
/// # Safety
/// `p` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipGraphMemsetNodeGetParams(node: Handle, p: *mut MemsetParams) -> i32 {
    api(|| {
        if p.is_null() {
            return Err(INVALID_VALUE);
        }
        let params = with_node(node, |_, k| match k {
            Kind::Memset(m) => Ok(MemsetParams {
                dst: m.dst as usize as *mut c_void,
                element_size: m.element_size,
                height: m.height,
                pitch: m.pitch,
                value: m.value,
                width: m.width,
            }),
            _ => Err(INVALID_VALUE),
        })?;
        // SAFETY: the caller's contract.
        unsafe { put(p, params) }
    })
}

/// `hipGraphMemsetNodeSetParams`.
///
/// # Safety
/// `p` is NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn hipGraphMemsetNodeSetParams(node: Handle, p: *const MemsetParams) -> i32 {
    api(|| {
        let new = memset_kind(global()?, p)?;
        with_node(node, |_, k| k.replace_with(new))
    })
}

/// `hipGraphHostNodeGetParams`.
///
/// # Safety
/// `p` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipGraphHostNodeGetParams(node: Handle, p: *mut HostNodeParams) -> i32 {
    api(|| {
        if p.is_null() {
            return Err(INVALID_VALUE);
        }
        let params = with_node(node, |_, k| match k {
            Kind::Host { func, data } => Ok(HostNodeParams { func: Some(*func), data: *data as *mut c_void }),
            _ => Err(INVALID_VALUE),
        })?;
        // SAFETY: the caller's contract.
        unsafe { put(p, params) }
    })
}

/// `hipGraphHostNodeSetParams`.
///
/// # Safety
/// `p` is NULL or valid; the function and its data stay valid while the graph can run.
#[no_mangle]
pub unsafe extern "C" fn hipGraphHostNodeSetParams(node: Handle, p: *const HostNodeParams) -> i32 {
    api(|| {
        let new = host_kind(p)?;
        with_node(node, |_, k| k.replace_with(new))
    })
}

/// The event of an event node (`record` picks the kind).
///
/// # Safety
/// `out` is NULL or valid for writes.
unsafe fn get_event(node: Handle, out: *mut Handle, record: bool) -> HipResult {
    if out.is_null() {
        return Err(INVALID_VALUE);
    }
    let e = with_node(node, |_, k| match (k, record) {
        (Kind::EventRecord(e), true) | (Kind::EventWait(e), false) => Ok(*e),
        _ => Err(INVALID_VALUE),
    })?;
    // SAFETY: the caller's contract.
    unsafe { put(out, handle(e)) }
}

fn set_event(node: Handle, event: Handle, record: bool) -> HipResult {
    let e = event_of(global()?, event)?;
    with_node(node, |_, k| match (k, record) {
        (Kind::EventRecord(old), true) | (Kind::EventWait(old), false) => {
            *old = e;
            Ok(())
        }
        _ => Err(INVALID_VALUE),
    })
}

/// `hipGraphEventRecordNodeGetEvent`.
///
/// # Safety
/// `event` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipGraphEventRecordNodeGetEvent(node: Handle, event: *mut Handle) -> i32 {
    // SAFETY: forwarded caller contract.
    api(|| unsafe { get_event(node, event, true) })
}

/// `hipGraphEventRecordNodeSetEvent`.
#[no_mangle]
pub extern "C" fn hipGraphEventRecordNodeSetEvent(node: Handle, event: Handle) -> i32 {
    api(|| set_event(node, event, true))
}

/// `hipGraphEventWaitNodeGetEvent`.
///
/// # Safety
/// `event` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipGraphEventWaitNodeGetEvent(node: Handle, event: *mut Handle) -> i32 {
    // SAFETY: forwarded caller contract.
    api(|| unsafe { get_event(node, event, false) })
}

/// `hipGraphEventWaitNodeSetEvent`.
#[no_mangle]
pub extern "C" fn hipGraphEventWaitNodeSetEvent(node: Handle, event: Handle) -> i32 {
    api(|| set_event(node, event, false))
}

/// `hipGraphChildGraphNodeGetGraph`: the node's own copy, which edits through the returned
/// handle change.
///
/// # Safety
/// `graph` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn hipGraphChildGraphNodeGetGraph(node: Handle, graph: *mut Handle) -> i32 {
    api(|| {
        let g = global()?;
        if graph.is_null() {
            return Err(INVALID_VALUE);
        }
        let (gh, id) = node_of(g, node)?;
        let mut graphs = graphs();
        match graphs.get(gh).ok_or(INVALID_VALUE)?.kind(id)? {
            Kind::Child(_) => {}
            _ => return Err(INVALID_VALUE),
        }
        let h = graphs.view(gh, id, None);
        // SAFETY: the caller's contract.
        unsafe { put(graph, handle(h)) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameter_structs_have_hip_offsets() {
        assert_eq!(std::mem::offset_of!(KernelNodeParams, extra), 16);
        assert_eq!(std::mem::offset_of!(KernelNodeParams, grid), 32);
        assert_eq!(std::mem::offset_of!(KernelNodeParams, kernel_params), 48);
        assert_eq!(std::mem::offset_of!(KernelNodeParams, shared_mem), 56);
        assert_eq!(std::mem::offset_of!(MemsetParams, width), 40);
        assert_eq!(std::mem::offset_of!(Memcpy3DParms, dst_array), 64);
        assert_eq!(std::mem::offset_of!(Memcpy3DParms, extent), 128);
        assert_eq!(std::mem::offset_of!(Memcpy3DParms, kind), 152);
    }

    /// `n` empty nodes with `edges`.
    pub(super) fn graph(n: usize, edges: &[(u16, u16)]) -> Graph {
        let mut g = Graph::default();
        for _ in 0..n {
            g.push(Kind::Empty, &[]).unwrap();
        }
        g.edges = edges.to_vec();
        g
    }

    #[test]
    fn order_is_topological_and_finds_cycles() {
        assert_eq!(graph(4, &[(2, 0), (0, 1), (3, 1)]).order(), Some(vec![2, 0, 3, 1]));
        assert_eq!(graph(3, &[(0, 1), (1, 2), (2, 0)]).order(), None);
        let mut g = graph(3, &[(0, 2)]);
        g.nodes[1] = None;
        assert_eq!(g.order(), Some(vec![0, 2]));
    }

    #[test]
    fn copies_split_into_rows_unless_contiguous() {
        let c = CopyNode::linear(0x1000, 0x2000, 64, 1);
        assert_eq!(c.rows(), vec![(0x1000, 0x2000, 64)]);
        let mut p = c;
        p.extent = Extent { width: 16, height: 2, depth: 1 };
        p.src_pitch = 32;
        p.dst_pitch = 16;
        p.src_pos = Pos { x: 4, y: 1, z: 0 };
        assert_eq!(p.rows(), vec![(0x1000, 0x2000 + 32 + 4, 16), (0x1010, 0x2000 + 64 + 4, 16)]);
    }
}
