//! The layer's model of a graph (docs/hip-semantics.md, "Graphs"): HIP's parameter structs,
//! node kinds with their parameters (kernel arguments deep-copied, as HIP copies them), and a
//! graph's nodes and edges.

use std::collections::BTreeSet;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use aqueduct::conditional::ConditionalKind;
use aqueduct::GraphHandle;
use aqueduct::NodeKind;

use crate::code_objects::FunctionEntry;
use crate::error::{Hip, HipResult, INVALID_CONFIGURATION, INVALID_VALUE};
use crate::global::{global, Global};
use crate::launch::{fill_hidden, geometry, module_kernarg, resolve};
use crate::pitched::{Extent, Memcpy3DParms, PitchedPtr, Pos};
use crate::Dim3;

// ----- HIP's parameter structs ----------------------------------------------------------------

/// `hipKernelNodeParams` (64 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct KernelNodeParams {
    pub(super) block: Dim3,
    pub(super) extra: *mut *mut c_void,
    pub(super) func: *const c_void,
    pub(super) grid: Dim3,
    pub(super) kernel_params: *mut *mut c_void,
    pub(super) shared_mem: c_uint,
}

/// `hipMemsetParams` (48 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MemsetParams {
    pub(super) dst: *mut c_void,
    pub(super) element_size: c_uint,
    pub(super) height: usize,
    pub(super) pitch: usize,
    pub(super) value: c_uint,
    pub(super) width: usize,
}

/// `hipHostNodeParams`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct HostNodeParams {
    pub(super) func: Option<unsafe extern "C" fn(*mut c_void)>,
    pub(super) data: *mut c_void,
}

const _: () = assert!(size_of::<KernelNodeParams>() == 64);
const _: () = assert!(size_of::<MemsetParams>() == 48);
const _: () = assert!(size_of::<Memcpy3DParms>() == 160);

/// `hipGraphNodeType` (HIP 5.2's numbering).
pub(super) const TYPE_KERNEL: c_int = 1;
pub(super) const TYPE_MEMCPY: c_int = 2;
pub(super) const TYPE_MEMSET: c_int = 3;
pub(super) const TYPE_HOST: c_int = 4;
pub(super) const TYPE_GRAPH: c_int = 5;
pub(super) const TYPE_EMPTY: c_int = 6;
pub(super) const TYPE_WAIT_EVENT: c_int = 7;
pub(super) const TYPE_EVENT_RECORD: c_int = 8;
/// `hipGraphNodeTypeMemAlloc` / `MemFree`: newer HIP's values (HIP 5.2 captures no
/// allocation; its 10 and 11 name symbol copies, which are reported as `Memcpy` here).
pub(super) const TYPE_MEM_ALLOC: c_int = 10;
pub(super) const TYPE_MEM_FREE: c_int = 11;
/// `hipGraphNodeTypeConditional` (`aqueduct_hip.h`): CUDA's value, unused in HIP 5.2's numbering.
pub(super) const TYPE_CONDITIONAL: c_int = 13;

/// `hipMemcpyDefault`, and the largest kind HIP accepts besides `DeviceToDeviceNoCU`.
pub(super) const MEMCPY_DEFAULT: c_uint = 4;
pub(super) const MEMCPY_NO_CU: c_uint = 1024;
/// `hipErrorInvalidPitchValue`.
pub(super) const INVALID_PITCH: Hip = Hip(12);
/// `hipErrorGraphExecUpdateFailure`.
pub(super) const UPDATE_FAILURE: Hip = Hip(910);

/// The last stamp handed out.
static STAMPS: AtomicU64 = AtomicU64::new(0);

/// A stamp no node has had.
pub(super) fn new_stamp() -> u64 {
    // Ordering: Relaxed; only uniqueness matters.
    STAMPS.fetch_add(1, Ordering::Relaxed) + 1
}

// ----- the model ------------------------------------------------------------------------------

/// A kernel node: what `hipKernelNodeParams` named, resolved, with its arguments packed into a
/// kernel-argument segment owned by the node (what `kernelParams` of
/// `hipGraphKernelNodeGetParams` points into). The segment is shared by the node's copies (a
/// clone, an executable's snapshot): a node's parameters are replaced whole, never written in
/// place, so a copy is a reference count.
#[derive(Clone)]
pub(super) struct KernelNode {
    pub(super) func: usize,
    pub(super) grid: Dim3,
    pub(super) block: Dim3,
    pub(super) shared_mem: u32,
    pub(super) f: FunctionEntry,
    pub(super) args: Arc<KernelArgs>,
}

/// A kernel node's argument segment and the pointer lists into it that HIP hands out.
pub(super) struct KernelArgs {
    /// The segment, 16-byte aligned; `len` bytes of it are used.
    pub(super) seg: Vec<u128>,
    pub(super) len: usize,
    /// `kernelParams` as returned: one pointer per argument into `seg` (empty in `extra` mode).
    pub(super) params: Vec<usize>,
    /// `extra` as returned, when the arguments came as a buffer: the five-entry list, whose
    /// size entry points at `size`.
    pub(super) extra: Option<(Vec<usize>, Box<usize>)>,
}

impl KernelNode {
    /// Validates and deep-copies `p` (resolving `p.func` on `device`).
    ///
    /// # Safety
    /// `p.kernelParams` / `p.extra` are as `hipModuleLaunchKernel`'s.
    pub(super) unsafe fn new(g: &Global, p: &KernelNodeParams, device: u32) -> HipResult<KernelNode> {
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

    pub(super) fn from_parts(
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

    pub(super) fn bytes(&self) -> &[u8] {
        // SAFETY: `seg` holds at least `len` initialised bytes.
        unsafe { std::slice::from_raw_parts(self.args.seg.as_ptr().cast::<u8>(), self.args.len) }
    }

    pub(super) fn params(&self) -> KernelNodeParams {
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
pub(super) struct CopyNode {
    pub(super) src: u64,
    pub(super) src_pos: Pos,
    pub(super) src_pitch: usize,
    pub(super) src_ysize: usize,
    pub(super) dst: u64,
    pub(super) dst_pos: Pos,
    pub(super) dst_pitch: usize,
    pub(super) dst_ysize: usize,
    pub(super) extent: Extent,
    pub(super) kind: c_uint,
}

impl CopyNode {
    pub(super) fn linear(dst: u64, src: u64, count: usize, kind: c_uint) -> CopyNode {
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
    pub(super) fn rows(&self) -> Vec<(u64, u64, u64)> {
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

    pub(super) fn params(&self) -> Memcpy3DParms {
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
pub(super) struct MemsetNode {
    pub(super) dst: u64,
    pub(super) element_size: u32,
    pub(super) height: usize,
    pub(super) pitch: usize,
    pub(super) value: u32,
    pub(super) width: usize,
}

/// A captured operation HIP has no node type for (a wait on a value, a value write, a stream
/// callback): replayed as recorded.
#[derive(Debug, Clone)]
pub(super) struct RawNode {
    pub(super) kind: NodeKind,
    pub(super) args: Vec<u8>,
    /// The type it reports, if HIP 5.2 has one.
    pub(super) ty: Option<c_int>,
}

#[derive(Clone)]
pub(super) enum Kind {
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
    pub(super) fn replace_with(&mut self, new: Kind) -> HipResult {
        if std::mem::discriminant(self) != std::mem::discriminant(&new) {
            return Err(INVALID_VALUE);
        }
        *self = new;
        Ok(())
    }

    pub(super) fn ty(&self) -> Option<c_int> {
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
pub(super) type Edges = Vec<(u16, u16)>;

/// Why an update failed (`hipGraphExecUpdateResult`) and the node of the new graph it failed
/// at.
pub(super) type Mismatch = (c_int, Option<u16>);

/// A graph: nodes by id (destroyed ones `None`; ids are never reused) and edges `(from, to)`.
#[derive(Clone, Default)]
pub(crate) struct Graph {
    pub(super) nodes: Vec<Option<Kind>>,
    /// Per node, a stamp that changes whenever the node may have (0: destroyed); clones keep
    /// it, so equal stamps mean equal nodes (`patch.rs`, "Stamps").
    pub(super) stamps: Vec<u64>,
    pub(super) edges: Edges,
    /// The graph this one was cloned from (0 if none): node ids carry over.
    pub(super) origin: u64,
}

impl Graph {
    /// Whether the graph (or a child graph in it) has memory nodes: such a graph owns memory,
    /// so it is neither cloned nor nested, and is instantiated once.
    pub(super) fn has_memory_nodes(&self) -> bool {
        self.nodes.iter().flatten().any(|k| match k {
            Kind::MemAlloc { .. } | Kind::MemFree(_) => true,
            Kind::Child(c) => c.has_memory_nodes(),
            _ => false,
        })
    }

    /// Whether the graph (or a child graph in it) has conditional nodes: such a graph is neither
    /// cloned nor nested (CUDA's rules).
    pub(super) fn has_conditional_nodes(&self) -> bool {
        self.nodes.iter().flatten().any(|k| match k {
            Kind::Conditional(_) => true,
            Kind::Child(c) => c.has_conditional_nodes(),
            _ => false,
        })
    }

    pub(super) fn live(&self, id: u16) -> bool {
        self.nodes.get(usize::from(id)).is_some_and(Option::is_some)
    }

    pub(super) fn kind(&self, id: u16) -> HipResult<&Kind> {
        self.nodes.get(usize::from(id)).and_then(Option::as_ref).ok_or(INVALID_VALUE)
    }

    pub(super) fn kind_mut(&mut self, id: u16) -> HipResult<&mut Kind> {
        self.restamp(id);
        self.nodes.get_mut(usize::from(id)).and_then(Option::as_mut).ok_or(INVALID_VALUE)
    }

    pub(super) fn push(&mut self, kind: Kind, deps: &[u16]) -> HipResult<u16> {
        let id = u16::try_from(self.nodes.len()).map_err(|_| Hip(2))?;
        self.nodes.push(Some(kind));
        self.stamps.resize(self.nodes.len() - 1, 0);
        self.stamps.push(new_stamp());
        self.edges.extend(deps.iter().map(|&d| (d, id)));
        Ok(id)
    }

    pub(super) fn deps(&self, id: u16) -> Vec<u16> {
        self.edges.iter().filter(|e| e.1 == id).map(|e| e.0).collect()
    }

    pub(super) fn dependents(&self, id: u16) -> Vec<u16> {
        self.edges.iter().filter(|e| e.0 == id).map(|e| e.1).collect()
    }

    /// The live nodes in topological order (lowest id first among the ready); `None` for a
    /// cycle.
    pub(super) fn order(&self) -> Option<Vec<u16>> {
        topological(self.nodes.len(), |i| self.live(i), &self.edges)
    }
}

impl Graph {
    /// The stamps of every id, when each has one.
    pub(super) fn stamps(&self) -> Option<&[u64]> {
        (self.stamps.len() == self.nodes.len()).then_some(&self.stamps)
    }

    /// Node `id`'s stamp (0 for a destroyed or unknown node).
    pub(super) fn stamp(&self, id: u16) -> u64 {
        self.stamps.get(usize::from(id)).copied().unwrap_or(0)
    }

    pub(super) fn set_stamp(&mut self, id: u16, stamp: u64) {
        if let Some(s) = self.stamps.get_mut(usize::from(id)) {
            *s = stamp;
        }
    }

    /// Node `id` may change: it gets a new stamp.
    pub(super) fn restamp(&mut self, id: u16) {
        if self.live(id) {
            self.set_stamp(id, new_stamp());
        }
    }
}

/// A core graph that owns the cells of one root graph's handles; destroying it drops that
/// ownership (core frees each cell with its last owner).
pub(super) struct Owner(pub(super) GraphHandle);

/// The conditional handles made on a root graph or a graph inside it, kept by the root's table
/// entry (`conditional.rs`): the owner of their cells, made on the first, and each handle with
/// the graph it was made on. They go with the root.
#[derive(Default)]
pub(super) struct Conditions {
    pub(super) owner: Option<Arc<Owner>>,
    pub(super) handles: Vec<(u64, u64)>,
}

impl Drop for Owner {
    fn drop(&mut self) {
        if let Ok(g) = global() {
            let _ = g.rt.graph_destroy(self.0);
        }
    }
}

/// A conditional node: its handle, kind and body graphs.
#[derive(Clone)]
pub(super) struct CondNode {
    pub(super) handle: u64,
    pub(super) kind: ConditionalKind,
    pub(super) bodies: Vec<Graph>,
    /// `phGraph_out`: the handles of the body views, at an address that stays put while the
    /// node lives (a snapshot's copy is never handed out).
    pub(super) out: Box<[usize]>,
    /// The owner of the handle's cell.
    pub(super) _owner: Arc<Owner>,
}

/// The live ones of node ids `0..n` in topological order under `edges` (lowest id first among
/// the ready), the order every node list of a graph comes in, in this layer's model and in
/// core's graph alike; `None` for a cycle.
pub(super) fn topological(n: usize, live: impl Fn(u16) -> bool, edges: &[(u16, u16)]) -> Option<Vec<u16>> {
    let mut indegree = vec![0usize; n];
    let mut succ: Vec<Vec<u16>> = vec![Vec::new(); n];
    for &(f, t) in edges {
        *indegree.get_mut(usize::from(t))? += 1;
        succ.get_mut(usize::from(f))?.push(t);
    }
    let mut ready: BTreeSet<u16> = (0..n as u16).filter(|&i| live(i) && indegree[usize::from(i)] == 0).collect();
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
    (out.len() == (0..n as u16).filter(|&i| live(i)).count()).then_some(out)
}

#[cfg(test)]
pub(super) mod tests {
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
    pub(in crate::graph) fn graph(n: usize, edges: &[(u16, u16)]) -> Graph {
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
