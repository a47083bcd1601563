//! Flattening graphs of this layer into core graphs (instantiation; conditional nodes' bodies
//! too), and reading a core graph's nodes back into this layer's model (captured graphs).

use std::ffi::c_void;
use std::sync::Mutex;

use aqueduct::backend::{CopyArgs, FillArgs};
use aqueduct::conditional::{ConditionalHandle, ConditionalNode};
use aqueduct::{Backend, BuiltinKernel, HostFn, KernelLaunch, MemoryKind};
use aqueduct::{GraphExecHandle, GraphHandle};
use aqueduct::{NodeId, NodeKind};

use crate::error::{Hip, HipResult, INVALID_VALUE, NOT_SUPPORTED};
use crate::global::{lock, Global};
use crate::launch::handle_of_object;
use crate::launch::{geometry, resolve};
use crate::Dim3;

use super::model::*;

// ----- building core graphs -------------------------------------------------------------------

/// `dst[..n] = src[..n]` on the host, run as a host node.
pub(super) struct HostCopy {
    pub(super) dst: u64,
    pub(super) src: u64,
    pub(super) bytes: u64,
}

unsafe extern "C" fn host_copy(data: *mut c_void) {
    // SAFETY: `data` is a `HostCopy` an executable owns for as long as it can run.
    let c = unsafe { &*data.cast::<HostCopy>() };
    // SAFETY: the copy's ends are host memory of the graph's user (pageable) and a pinned
    // staging buffer of the executable, each at least `bytes` long.
    unsafe { std::ptr::copy(c.src as usize as *const u8, c.dst as usize as *mut u8, c.bytes as usize) };
}

/// Staging buffers and host-copy records an executable owns.
#[derive(Default)]
pub(super) struct Staging {
    buffers: Vec<u64>,
    /// Boxed: host nodes hold their addresses, which must not move as the list grows.
    #[allow(clippy::vec_box)]
    copies: Vec<Box<HostCopy>>,
}

impl Staging {
    /// Host-copy record `i`, to be rewritten while no launch of its executable runs.
    pub(super) fn copy_mut(&mut self, i: usize) -> Option<&mut HostCopy> {
        self.copies.get_mut(i).map(|c| &mut **c)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.buffers.is_empty() && self.copies.is_empty()
    }

    pub(super) fn free(self, g: &Global) {
        for b in self.buffers {
            let _ = g.rt.backend().memory_free(b);
        }
    }
}

/// Flattens graphs into a core graph.
pub(super) struct Build<'a> {
    pub(super) g: &'a Global,
    pub(super) core: GraphHandle,
    pub(super) device: u32,
    /// `None` while adding to a capture's graph: copies of pageable memory are recorded as
    /// they are then, as a captured copy is.
    pub(super) staging: Option<&'a mut Staging>,
    /// Core graphs of conditional bodies, destroyed once the instantiation has read them.
    pub(super) bodies: Vec<GraphHandle>,
    /// What the node [`Build::add`] last added became (taken by [`Build::flatten`]).
    pub(super) site: Site,
}

/// A one-work-item launch of built-in kernel `kernel` (a copy or a fill) on `device`.
pub(super) fn builtin_launch<'a>(
    g: &Global,
    device: u32,
    kernel: BuiltinKernel,
    args: &'a [u8],
) -> HipResult<KernelLaunch<'a>> {
    Ok(KernelLaunch {
        kernel_object: g.rt.backend().builtin_kernel(device, kernel)?,
        grid: [1, 1, 1],
        workgroup: [1, 1, 1],
        group_segment_size: 0,
        private_segment_size: 0,
        kernarg: args,
    })
}

impl Build<'_> {
    fn builtin(&mut self, kernel: BuiltinKernel, args: &[u8], deps: &[NodeId]) -> HipResult<NodeId> {
        let launch = builtin_launch(self.g, self.device, kernel, args)?;
        Ok(self.g.rt.graph_add_kernel_node(self.core, deps, &launch)?)
    }

    fn device_copy(&mut self, dst: u64, src: u64, bytes: u64, deps: &[NodeId]) -> HipResult<NodeId> {
        self.builtin(BuiltinKernel::Copy, &copy_args(dst, src, bytes), deps)
    }

    /// A host node copying `bytes` from `src` to `dst`; also returns the index of its record.
    fn host_copy(&mut self, dst: u64, src: u64, bytes: u64, deps: &[NodeId]) -> HipResult<(NodeId, usize)> {
        let staging = self.staging.as_mut().ok_or(NOT_SUPPORTED)?;
        let c = Box::new(HostCopy { dst, src, bytes });
        let data = (&*c as *const HostCopy).cast_mut().cast::<c_void>();
        let record = staging.copies.len();
        staging.copies.push(c);
        let kind = NodeKind::Host(HostFn::Plain { func: host_copy, data });
        Ok((self.g.rt.graph_add_node(self.core, deps, kind)?, record))
    }

    fn stage(&mut self, bytes: u64) -> HipResult<u64> {
        let b = self.g.rt.backend().memory_alloc(self.device, bytes as usize, MemoryKind::Host)?;
        match self.staging.as_mut() {
            Some(s) => {
                s.buffers.push(b);
                Ok(b)
            }
            None => {
                let _ = self.g.rt.backend().memory_free(b);
                Err(NOT_SUPPORTED)
            }
        }
    }

    /// One row of a copy, staged where a side is pageable; returns the node later nodes depend
    /// on and what the row became.
    fn copy_row(&mut self, dst: u64, src: u64, bytes: u64, deps: &[NodeId]) -> HipResult<(NodeId, Row)> {
        match way(self.g, dst, src, bytes, self.staging.is_some()) {
            Way::Empty => Ok((self.g.rt.graph_add_empty_node(self.core, deps)?, Row::Empty)),
            Way::Device => {
                let c = self.device_copy(dst, src, bytes, deps)?;
                Ok((c, Row::Dispatch(c)))
            }
            Way::ToDevice => {
                let buffer = self.stage(bytes)?;
                let (h, record) = self.host_copy(buffer, src, bytes, deps)?;
                let copy = self.device_copy(dst, buffer, bytes, &[h])?;
                Ok((copy, Row::ToDevice { copy, record, buffer, room: bytes }))
            }
            Way::ToHost => {
                let buffer = self.stage(bytes)?;
                let copy = self.device_copy(buffer, src, bytes, deps)?;
                let (h, record) = self.host_copy(dst, buffer, bytes, &[copy])?;
                Ok((h, Row::ToHost { copy, record, buffer, room: bytes }))
            }
            Way::Host => {
                let (h, record) = self.host_copy(dst, src, bytes, deps)?;
                Ok((h, Row::Host { record }))
            }
        }
    }

    /// One node after `deps`; returns the core node later nodes depend on, and leaves what the
    /// node became in `self.site`.
    pub(super) fn add(&mut self, kind: &Kind, deps: &[NodeId]) -> HipResult<NodeId> {
        let rt = &self.g.rt;
        self.site = Site::None;
        match kind {
            Kind::Empty => Ok(rt.graph_add_empty_node(self.core, deps)?),
            Kind::Kernel(k) => {
                let n = rt.graph_add_kernel_node(self.core, deps, &k.launch()?)?;
                self.site = Site::Dispatch(n);
                Ok(n)
            }
            Kind::Copy(c) => {
                let (mut ends, mut rows) = (Vec::new(), Vec::new());
                for (dst, src, bytes) in c.rows() {
                    let (end, row) = self.copy_row(dst, src, bytes, deps)?;
                    ends.push(end);
                    rows.push(row);
                }
                let exit = self.join(ends, deps)?;
                self.site = Site::Rows(rows);
                Ok(exit)
            }
            Kind::Memset(m) => {
                let (mut ends, mut rows) = (Vec::new(), Vec::new());
                for row in 0..m.height {
                    let n = self.builtin(BuiltinKernel::Fill, &fill_args(m, row), deps)?;
                    ends.push(n);
                    rows.push(Row::Dispatch(n));
                }
                let exit = self.join(ends, deps)?;
                self.site = Site::Rows(rows);
                Ok(exit)
            }
            Kind::Host { func, data } => {
                let f = HostFn::Plain { func: *func, data: *data as *mut c_void };
                let n = rt.graph_add_node(self.core, deps, NodeKind::Host(f))?;
                self.site = Site::Host(n);
                Ok(n)
            }
            Kind::EventRecord(e) => {
                let n = rt.graph_add_node(self.core, deps, NodeKind::EventRecord(*e))?;
                self.site = Site::Event(n);
                Ok(n)
            }
            Kind::EventWait(e) => {
                let n = rt.graph_add_node(self.core, deps, NodeKind::EventWait(*e))?;
                self.site = Site::Event(n);
                Ok(n)
            }
            Kind::MemAlloc { address, bytes } => {
                Ok(rt.graph_add_node(self.core, deps, NodeKind::MemAlloc { address: *address, bytes: *bytes })?)
            }
            Kind::MemFree(a) => Ok(rt.graph_add_node(self.core, deps, NodeKind::MemFree(*a))?),
            Kind::Conditional(c) => {
                // Rebuilt, never patched: its bodies' nodes leave no site.
                let n = self.conditional(c, deps)?;
                self.site = Site::None;
                Ok(n)
            }
            Kind::Child(c) => {
                let (leaves, sites) = self.flatten(c, deps)?;
                let exit = self.join(leaves, deps)?;
                self.site = Site::Child(sites);
                Ok(exit)
            }
            Kind::Raw(r) => match r.kind {
                NodeKind::Dispatch(d) => {
                    let launch = KernelLaunch {
                        kernel_object: d.kernel_object,
                        grid: d.grid,
                        workgroup: d.workgroup,
                        group_segment_size: d.group_segment_size,
                        private_segment_size: d.private_segment_size,
                        kernarg: &r.args,
                    };
                    Ok(rt.graph_add_kernel_node(self.core, deps, &launch)?)
                }
                other => Ok(rt.graph_add_node(self.core, deps, other)?),
            },
        }
    }

    /// The one node that follows `ends` (an empty join when there are several; when there are
    /// none, an empty node after `deps`).
    fn join(&mut self, ends: Vec<NodeId>, deps: &[NodeId]) -> HipResult<NodeId> {
        match ends.as_slice() {
            [one] => Ok(*one),
            [] => Ok(self.g.rt.graph_add_empty_node(self.core, deps)?),
            many => Ok(self.g.rt.graph_add_empty_node(self.core, many)?),
        }
    }

    /// Adds `graph` with its roots after `entry`; returns the core nodes of its leaves and what
    /// each of its nodes became (by id). A cycle is `hipErrorInvalidValue`.
    pub(super) fn flatten(&mut self, graph: &Graph, entry: &[NodeId]) -> HipResult<(Vec<NodeId>, Vec<Site>)> {
        let order = graph.order().ok_or(INVALID_VALUE)?;
        let n = graph.nodes.len();
        // Each node's dependencies (in edge order) as runs of one list, and who has dependents.
        let mut start = vec![0usize; n + 1];
        let mut has_dependents = vec![false; n];
        for &(f, t) in &graph.edges {
            start[usize::from(t) + 1] += 1;
            has_dependents[usize::from(f)] = true;
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        let mut preds = vec![0u16; graph.edges.len()];
        let mut fill = start.clone();
        for &(f, t) in &graph.edges {
            preds[fill[usize::from(t)]] = f;
            fill[usize::from(t)] += 1;
        }
        let mut exits: Vec<Option<NodeId>> = vec![None; n];
        let mut sites: Vec<Site> = vec![Site::None; n];
        let mut deps: Vec<NodeId> = Vec::new();
        for &id in &order {
            let i = usize::from(id);
            let mine = &preds[start[i]..start[i + 1]];
            deps.clear();
            if mine.is_empty() {
                deps.extend_from_slice(entry);
            } else {
                deps.extend(mine.iter().filter_map(|&p| exits[usize::from(p)]));
            }
            exits[i] = Some(self.add(graph.kind(id)?, &deps)?);
            sites[i] = std::mem::take(&mut self.site);
        }
        let leaves = order.iter().filter(|&&id| !has_dependents[usize::from(id)]);
        Ok((leaves.filter_map(|&id| exits[usize::from(id)]).collect(), sites))
    }
}

/// The arguments of the fill of row `row` of `m`.
pub(super) fn fill_args(m: &MemsetNode, row: usize) -> [u8; size_of::<FillArgs>()] {
    let a = FillArgs {
        dst: m.dst + (row * m.pitch) as u64,
        count: m.width as u64,
        value: m.value,
        element_bytes: m.element_size,
    };
    // SAFETY: FillArgs is two u64s and two u32s, no padding.
    unsafe { std::mem::transmute::<FillArgs, [u8; size_of::<FillArgs>()]>(a) }
}

/// The arguments of a device copy.
pub(super) fn copy_args(dst: u64, src: u64, bytes: u64) -> [u8; size_of::<CopyArgs>()] {
    // SAFETY: CopyArgs is three u64s, no padding.
    unsafe { std::mem::transmute::<CopyArgs, [u8; size_of::<CopyArgs>()]>(CopyArgs { dst, src, bytes }) }
}

impl KernelNode {
    /// The dispatch this node makes.
    pub(super) fn launch(&self) -> HipResult<KernelLaunch<'_>> {
        let (grid, workgroup) = geometry(self.grid, self.block)?;
        Ok(KernelLaunch {
            kernel_object: self.f.object,
            grid,
            workgroup,
            group_segment_size: self.f.group.saturating_add(self.shared_mem),
            private_segment_size: self.f.launch_private(),
            kernarg: self.bytes(),
        })
    }
}

/// What one node became in an executable.
#[derive(Debug, Clone, Default)]
pub(super) enum Site {
    /// Nothing to patch: an empty, memory or captured node, a destroyed id.
    #[default]
    None,
    /// A kernel: one dispatch.
    Dispatch(NodeId),
    /// A copy or a fill: its rows, in order.
    Rows(Vec<Row>),
    /// A host function.
    Host(NodeId),
    /// An event record or wait.
    Event(NodeId),
    /// A child graph: what each of its nodes became, by id.
    Child(Vec<Site>),
}

/// One row of a copy or fill in an executable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Row {
    /// Zero bytes: an empty node.
    Empty,
    /// One built-in dispatch: a device copy or a fill.
    Dispatch(NodeId),
    /// Pageable to device: the host copies into `buffer` (host-copy record `record`), then the
    /// device copy `copy` moves it on.
    ToDevice { copy: NodeId, record: usize, buffer: u64, room: u64 },
    /// Device to pageable: the device copy `copy` fills `buffer`, then the host copies it out.
    ToHost { copy: NodeId, record: usize, buffer: u64, room: u64 },
    /// Pageable on both sides: the host copies.
    Host { record: usize },
}

/// How a copy row moves its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Way {
    Empty,
    Device,
    ToDevice,
    ToHost,
    Host,
}

/// How `bytes` from `src` to `dst` are copied: by the device when it reaches both sides (or
/// when nothing may be staged: a capture's graph records the copy as it is), otherwise staged
/// through the host.
pub(super) fn way(g: &Global, dst: u64, src: u64, bytes: u64, staged: bool) -> Way {
    if bytes == 0 {
        return Way::Empty;
    }
    let (d, s) = (crate::memory::device_reachable(g, dst, bytes), crate::memory::device_reachable(g, src, bytes));
    match (d, s) {
        _ if (d && s) || !staged => Way::Device,
        (true, false) => Way::ToDevice,
        (false, true) => Way::ToHost,
        _ => Way::Host,
    }
}

/// An executable as instantiated: core's, what it owns, what each node became (by id) and the
/// device it runs on.
pub(super) struct Instance {
    pub(super) core: GraphExecHandle,
    pub(super) staging: Staging,
    pub(super) sites: Vec<Site>,
    pub(super) device: u32,
}

/// Builds graph `graph` into a core graph and instantiates it on the calling thread's device.
pub(super) fn instantiate(g: &Global, graph: &Graph, flags: u32) -> HipResult<Instance> {
    let device = g.rt.device()?;
    let _bind = graph.has_conditional_nodes().then(|| lock(&BIND));
    let core = g.rt.graph_create()?;
    let mut staging = Staging::default();
    let mut build = Build { g, core, device, staging: Some(&mut staging), bodies: Vec::new(), site: Site::None };
    let built = build.flatten(graph, &[]);
    let result = built.and_then(|(_, sites)| Ok((g.rt.graph_instantiate_with_flags(core, flags)?, sites)));
    for body in build.bodies.into_iter().chain([core]) {
        let _ = g.rt.graph_destroy(body);
    }
    match result {
        Ok((core, sites)) => Ok(Instance { core, staging, sites, device }),
        Err(e) => {
            staging.free(g);
            Err(e)
        }
    }
}

// ----- captured graphs --------------------------------------------------------------------------

/// What core node `id` of captured graph `core` is, as a node of this layer.
pub(super) fn captured_kind(g: &Global, core: GraphHandle, id: NodeId, device: u32) -> HipResult<Kind> {
    let kind = g.rt.graph_node_kind(core, id)?;
    let raw = |args: Vec<u8>, ty| Kind::Raw(RawNode { kind, args, ty });
    Ok(match kind {
        NodeKind::Empty => Kind::Empty,
        NodeKind::EventRecord(e) => Kind::EventRecord(e),
        NodeKind::EventWait(e) => Kind::EventWait(e),
        NodeKind::MemAlloc { address, bytes } => Kind::MemAlloc { address, bytes },
        NodeKind::MemFree(a) => Kind::MemFree(a),
        NodeKind::Host(HostFn::Plain { func, data }) => Kind::Host { func, data: data as usize },
        NodeKind::Host(_) => raw(Vec::new(), Some(TYPE_HOST)),
        NodeKind::WaitValue(_) | NodeKind::Conditional(_) => raw(Vec::new(), None),
        NodeKind::Dispatch(d) => {
            let mut args = vec![0u8; d.arg_len as usize];
            g.rt.graph_node_args(core, id, &mut args)?;
            let backend = g.rt.backend();
            let builtin = |k| backend.builtin_kernel(device, k).ok() == Some(d.kernel_object);
            if builtin(BuiltinKernel::Copy) && args.len() >= size_of::<CopyArgs>() {
                // SAFETY: the arguments of a copy dispatch are a CopyArgs (length checked).
                let a: CopyArgs = unsafe { std::ptr::read_unaligned(args.as_ptr().cast()) };
                return Ok(Kind::Copy(CopyNode::linear(a.dst, a.src, a.bytes as usize, MEMCPY_DEFAULT)));
            }
            if builtin(BuiltinKernel::Fill) && args.len() >= size_of::<FillArgs>() {
                // SAFETY: the arguments of a fill dispatch are a FillArgs (length checked).
                let a: FillArgs = unsafe { std::ptr::read_unaligned(args.as_ptr().cast()) };
                let width = a.count as usize;
                let m = MemsetNode {
                    dst: a.dst,
                    element_size: a.element_bytes,
                    height: 1,
                    pitch: width,
                    value: a.value,
                    width,
                };
                return Ok(Kind::Memset(m));
            }
            let Some(func) = handle_of_object(g, d.kernel_object) else { return Ok(raw(args, None)) };
            let Ok(f) = resolve(g, func, device) else { return Ok(raw(args, None)) };
            let w = d.workgroup.map(|w| u32::from(w).max(1));
            let block = Dim3 { x: w[0], y: w[1], z: w[2] };
            let grid = Dim3 { x: d.grid[0] / w[0], y: d.grid[1] / w[1], z: d.grid[2] / w[2] };
            let shared = d.group_segment_size.saturating_sub(f.group);
            let by_buffer = f.args.is_none();
            Kind::Kernel(KernelNode::from_parts(func as usize, grid, block, shared, f, &args, by_buffer))
        }
    })
}

/// This layer's model of captured graph `core` (node ids kept), and per node what it is in an
/// executable core instantiates from that graph as it is.
pub(super) fn captured_model(g: &Global, core: GraphHandle, device: u32) -> HipResult<(Graph, Vec<Site>)> {
    let count = g.rt.graph_node_count(core)?;
    let mut graph = Graph::default();
    graph.nodes.reserve(count);
    graph.stamps.reserve(count);
    let mut sites = Vec::with_capacity(count);
    for i in 0..count {
        let id = NodeId(u16::try_from(i).map_err(|_| Hip(2))?);
        let kind = captured_kind(g, core, id, device)?;
        sites.push(match kind {
            Kind::Kernel(_) => Site::Dispatch(id),
            Kind::Host { .. } => Site::Host(id),
            Kind::EventRecord(_) | Kind::EventWait(_) => Site::Event(id),
            _ => Site::None,
        });
        graph.push(kind, &[])?;
    }
    let mut edges = vec![(NodeId(0), NodeId(0)); 2 * count + 16];
    let n = g.rt.graph_edges(core, &mut edges)?;
    if n > edges.len() {
        edges.resize(n, (NodeId(0), NodeId(0)));
        g.rt.graph_edges(core, &mut edges)?;
    }
    graph.edges = edges.iter().take(n).map(|(f, t)| (f.0, t.0)).collect();
    Ok((graph, sites))
}

// ----- graphs ----------------------------------------------------------------------------------

/// Held across an instantiation of a graph with conditional nodes: each build adds the HIP
/// node's core node to a fresh core graph, and core lets a handle serve one live node, freed
/// when that core graph is destroyed at the end of the build; two builds of one graph at once
/// would otherwise collide there.
pub(super) static BIND: Mutex<()> = Mutex::new(());

impl Graph {
    /// Checks what a body may hold (CUDA's rule, applied through child graphs): kernel, copy,
    /// fill, empty, child-graph and conditional nodes, copies only between memory the device
    /// reaches (no pageable staging). Anything else is `hipErrorInvalidValue`, as CUDA answers
    /// the instantiation.
    pub(super) fn check_body(&self, g: &Global) -> HipResult {
        for kind in self.nodes.iter().flatten() {
            let allowed = match kind {
                Kind::Kernel(_) | Kind::Memset(_) | Kind::Empty | Kind::Conditional(_) => true,
                Kind::Copy(c) => c.rows().iter().all(|&(dst, src, bytes)| {
                    bytes == 0
                        || (crate::memory::device_reachable(g, dst, bytes)
                            && crate::memory::device_reachable(g, src, bytes))
                }),
                Kind::Child(c) => {
                    c.check_body(g)?;
                    true
                }
                Kind::Raw(r) => matches!(r.kind, NodeKind::Dispatch(_)),
                Kind::Host { .. }
                | Kind::EventWait(_)
                | Kind::EventRecord(_)
                | Kind::MemAlloc { .. }
                | Kind::MemFree(_) => false,
            };
            if !allowed {
                return Err(INVALID_VALUE);
            }
        }
        Ok(())
    }
}

// ----- instantiation ----------------------------------------------------------------------------

impl Build<'_> {
    /// Adds conditional node `c` after `deps`: each body is checked, flattened into a core graph
    /// of its own (kept in `self.bodies` until the instantiation has read it), and the core
    /// conditional node names them.
    pub(super) fn conditional(&mut self, c: &CondNode, deps: &[NodeId]) -> HipResult<NodeId> {
        let mut bodies = Vec::with_capacity(c.bodies.len());
        for body in &c.bodies {
            body.check_body(self.g)?;
            let core = self.g.rt.graph_create()?;
            self.bodies.push(core);
            let parent = std::mem::replace(&mut self.core, core);
            let staging = self.staging.take();
            let built = self.flatten(body, &[]);
            self.core = parent;
            self.staging = staging;
            built?;
            bodies.push(core.0);
        }
        let node = ConditionalNode::new(ConditionalHandle(c.handle), c.kind, &bodies)?;
        Ok(self.g.rt.graph_add_conditional_node(self.core, deps, node)?)
    }
}
