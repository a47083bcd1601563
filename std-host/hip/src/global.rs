//! The one process-wide runtime behind the C API, created on first use, and the little state
//! the C layer keeps beside core: allocations (to tell device memory from pageable host memory),
//! the staging buffer for pageable copies, and the side tables that give graph nodes, modules,
//! functions and host kernels C handles.
//!
//! Backend: `AQUEDUCT_BACKEND` = `emu` (the default: kfd-direct over the emulated gfx90a), `kfd`,
//! `rocr` or `auto`. A backend that cannot be opened makes every call answer `hipErrorNoDevice`.
//! The emulated machine's GPUs: `AQUEDUCT_EMU_GPUS`, a count of gfx90a (`2`) or a list of models
//! (`gfx90a,gfx942`); one gfx90a by default.

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use aqueduct::{Backend, MemPools, MemoryKind, Runtime};
use aqueduct_kfd_emu::GpuProfile;
use aqueduct_std::select::{AnyBackend, BackendKind, OpenOptions};
use aqueduct_std::threads::{on_thread_exit, StdThreadKeys, ThreadExit};

use crate::error::{Hip, HipResult, NO_DEVICE};
use crate::launch::{FunctionEntry, HostKernel, ModuleEntry};

/// The runtime type, at HIP scale: 4096 streams, 16384 events, 256 threads, 256 graphs of up to
/// 16384 nodes, 256 executables ([`aqueduct::config::HipScale`]).
pub(crate) type HipRuntime = Runtime<AnyBackend, StdThreadKeys, aqueduct::config::HipScale>;

/// The memory pools: 64 pools over 1024 blocks ([`aqueduct::config::HipScale`]'s).
pub(crate) type HipPools = MemPools<aqueduct::config::HipScale>;

/// Bytes of the pinned buffer that pageable copies go through.
pub(crate) const STAGING_BYTES: usize = 4 << 20;

/// The process-wide state.
pub(crate) struct Global {
    pub(crate) rt: Box<HipRuntime>,
    /// Stream-ordered allocation.
    pub(crate) pools: Box<HipPools>,
    /// Live allocations: start → (bytes, device).
    pub(crate) allocs: Mutex<BTreeMap<u64, (u64, u32)>>,
    /// Pinned host memory for copies from and to pageable memory (0 if unavailable).
    pub(crate) staging: Mutex<u64>,
    /// Graph nodes handed to C: index → (graph handle, node id).
    pub(crate) nodes: Mutex<NodeTable>,
    /// Host kernels by symbol address.
    pub(crate) host_kernels: Mutex<HashMap<usize, HostKernel>>,
    /// Loaded modules (index = handle body; `None` once unloaded).
    pub(crate) modules: Mutex<Vec<Option<ModuleEntry>>>,
    /// Functions found in modules.
    pub(crate) functions: Mutex<Vec<FunctionEntry>>,
    /// Loaded code-object images in device memory: base → bytes (their variables are
    /// device memory for copies).
    pub(crate) images: Mutex<BTreeMap<u64, u64>>,
}

impl ThreadExit for Global {
    fn thread_exit(&self) {
        self.rt.thread_exit();
    }
}

/// Locks a mutex, ignoring poisoning (no invariant spans a panic here).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Graph nodes as C handles: each (graph, node) pair gets one index for the process's life.
#[derive(Default)]
pub(crate) struct NodeTable {
    by_key: HashMap<(u64, u16), usize>,
    list: Vec<(u64, u16)>,
}

/// Tag in the top 16 bits of a node handle.
const NODE_TAG: u64 = 0x4e0d << 48;
const TAG_MASK: u64 = 0xffff << 48;

impl NodeTable {
    /// The C handle of node `node` of graph `graph`.
    pub(crate) fn handle(&mut self, graph: u64, node: u16) -> u64 {
        let n = self.list.len();
        let i = *self.by_key.entry((graph, node)).or_insert(n);
        if i == n {
            self.list.push((graph, node));
        }
        NODE_TAG | i as u64
    }

    /// Handles issued for node `from` name node `to` from now on (a node moved to another
    /// graph); `to` keeps the handle it may already have.
    pub(crate) fn rebind(&mut self, from: (u64, u16), to: (u64, u16)) {
        if self.by_key.contains_key(&to) {
            return;
        }
        if let Some(i) = self.by_key.remove(&from) {
            if let Some(slot) = self.list.get_mut(i) {
                *slot = to;
            }
            self.by_key.insert(to, i);
        }
    }

    /// The (graph, node) a handle names; `None` for values never issued.
    pub(crate) fn get(&self, handle: u64) -> Option<(u64, u16)> {
        if handle & TAG_MASK != NODE_TAG {
            return None;
        }
        self.list.get((handle & !TAG_MASK) as usize).copied()
    }
}

static GLOBAL: OnceLock<Result<Arc<Global>, Hip>> = OnceLock::new();

std::thread_local! {
    static HOOKED: Cell<bool> = const { Cell::new(false) };
}

/// The process-wide state, created on first use; registers the calling thread for clean-up at
/// its exit (its per-thread streams go back to the runtime).
pub(crate) fn global() -> HipResult<&'static Global> {
    let g = GLOBAL.get_or_init(init).as_ref().map_err(|e| *e)?;
    if !HOOKED.try_with(|h| h.replace(true)).unwrap_or(true) {
        let hook: Arc<dyn ThreadExit> = g.clone();
        on_thread_exit(&hook);
    }
    Ok(g)
}

/// The process-wide state if it has been created (never creates it).
pub(crate) fn global_if_created() -> Option<&'static Global> {
    GLOBAL.get().and_then(|g| g.as_ref().ok()).map(|g| &**g)
}

fn backend_kind() -> BackendKind {
    std::env::var("AQUEDUCT_BACKEND").ok().as_deref().and_then(BackendKind::parse).unwrap_or(BackendKind::Emu)
}

/// The emulated GPUs `AQUEDUCT_EMU_GPUS` names (`None`: the default machine; unknown models and
/// counts outside 1..=8 are ignored, as if unset).
fn emu_gpus() -> Option<Vec<GpuProfile>> {
    let spec = std::env::var("AQUEDUCT_EMU_GPUS").ok()?;
    let gpus: Vec<GpuProfile> = match spec.trim().parse::<usize>() {
        Ok(n) => vec![GpuProfile::Gfx90a; n],
        Err(_) => spec
            .split(',')
            .map(|m| match m.trim() {
                "gfx90a" => Some(GpuProfile::Gfx90a),
                "gfx942" => Some(GpuProfile::Gfx942),
                "gfx1100" => Some(GpuProfile::Gfx1100),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()?,
    };
    (1..=aqueduct::MAX_DEVICES).contains(&gpus.len()).then_some(gpus)
}

fn init() -> Result<Arc<Global>, Hip> {
    let mut options = OpenOptions::new(backend_kind());
    if let Some(gpus) = emu_gpus() {
        options.emu_gpus = gpus;
    }
    let (backend, _) = AnyBackend::open(&options).map_err(|_| NO_DEVICE)?;
    // `Runtime::new` returns the whole table by value; build it where the stack is large.
    let rt = std::thread::Builder::new()
        .name("aqueduct-hip-init".into())
        .stack_size(64 << 20)
        .spawn(move || Box::new(Runtime::new(backend, StdThreadKeys)))
        .map_err(|_| NO_DEVICE)?
        .join()
        .map_err(|_| NO_DEVICE)?;
    // The queue pool's budget: AQUEDUCT_MAX_HW_QUEUES, else the configuration's (4).
    if let Some(n) = options.max_hw_queues {
        for d in 0..rt.backend().device_count() {
            let _ = rt.set_max_hw_queues(d, n);
        }
    }
    let staging = rt.backend().memory_alloc(0, STAGING_BYTES, MemoryKind::Host).unwrap_or(0);
    Ok(Arc::new(Global {
        rt,
        pools: Box::new(HipPools::new()),
        allocs: Mutex::new(BTreeMap::new()),
        staging: Mutex::new(staging),
        nodes: Mutex::new(NodeTable::default()),
        host_kernels: Mutex::new(HashMap::new()),
        modules: Mutex::new(Vec::new()),
        functions: Mutex::new(Vec::new()),
        images: Mutex::new(BTreeMap::new()),
    }))
}

impl Global {
    /// Whether `[addr, addr + bytes)` lies inside one allocation of this runtime, a loaded image
    /// a registration's device range or mapped virtual memory (memory the device can reach); pageable host memory,
    /// registered or not, does not (a registered range is reached at its device address).
    pub(crate) fn is_device_reachable(&self, addr: u64, bytes: u64) -> bool {
        let inside = |start: u64, len: u64| addr.saturating_add(bytes) <= start.saturating_add(len.max(1));
        let allocs = lock(&self.allocs);
        if allocs.range(..=addr).next_back().is_some_and(|(&start, &(len, _))| inside(start, len)) {
            return true;
        }
        drop(allocs);
        lock(&self.images).range(..=addr).next_back().is_some_and(|(&start, &len)| inside(start, len))
            || crate::host_register::in_device_range(addr, bytes)
            || crate::virtual_memory::in_mapped_range(addr, bytes)
            || crate::ipc::in_opened_range(addr, bytes)
    }
}
