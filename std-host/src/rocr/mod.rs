//! The ROCr backend: core's [`Backend`] over `libhsa-runtime64` (loaded through `hsa-sys`).
//!
//! - Devices are ROCr's GPU agents; device memory comes from each agent's coarse-grained global
//!   pool, host memory from the CPU agent's fine-grained pool (made accessible to every GPU),
//!   kernel arguments from the CPU's kernarg pool.
//! - A queue is `hsa_queue_create` (multi-producer AQL) with its priority
//!   (`hsa_amd_queue_set_priority`), CU mask (`hsa_amd_queue_cu_set_mask`) and profiling on (so
//!   signals carry timestamps). Core's [`aqueduct::aql::AqlRing`] writes packets straight into
//!   ROCr's ring: the indices are `amd_queue_t`'s `write_dispatch_id` (+56) and
//!   `read_dispatch_id` (+128). The doorbell is the queue's doorbell signal.
//! - Signals are ROCr signals (a handle is the address of its `amd_signal_t`); waits are
//!   `hsa_signal_wait_scacquire` in slices, so a queue fault ends a wait instead of hanging it.
//! - The built-in copy/fill/write-value kernels are kfd-direct's blit code objects, loaded as
//!   ROCr executables; user code objects load the same way.
//! - ROCr's queue-error callback and system-event handler (GPU memory faults) latch errors that
//!   [`Backend::queue_fault`] reports as stream errors; nothing aborts the process.
//! - Host functions run on a service thread (the `service` module).
//! - Signal timestamps count the agent's clock, whose frequency (`DeviceInfo::timestamp_frequency`)
//!   is the slope of `hsa_amd_profiling_convert_tick_to_system_domain`, not the system clock's.
//! - Waits notice a queue fault: a signal still named by a packet a faulted queue never ran
//!   ends its wait with the queue's error instead of waiting forever.
//! - Core hands no queue or signal back when its runtime drops, so [`Rocr`]'s drop destroys
//!   what is left before `hsa_shut_down`.
//! - On aqueduct's emulated GPU through `libaqueduct_kfd_preload.so` (`aqueduct run`) the blit
//!   code objects run unchanged: the preload's emulator has their kernels' host twins by name.
//!
//! With ROCr installed but no GPU, [`Rocr::open`] fails with an error naming the cause
//! (`hsa_init`'s status), and backend selection falls back to the emulator.

mod service;

use std::ffi::{c_void, CString};
use std::io::Write;
use std::path::Path;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use aqueduct::aql::{AqlRing, Condition};
use aqueduct::backend::{
    BuiltinKernel, DeviceInfo, HostFn, KernelSymbol, MemoryKind, QueueDesc, Timeout, VariableSymbol,
};
use aqueduct::{Backend, CuMask, Error, Priority, Result, SignalHandle};
use hsa_sys::{
    amd_queue, consts, hsa_agent_t, hsa_amd_event_t, hsa_amd_memory_pool_t, hsa_code_object_reader_t,
    hsa_executable_symbol_t, hsa_executable_t, hsa_queue_t, hsa_signal_t, Hsa, LoadError, Status,
};

/// Kernel-argument bytes per ring slot.
pub const KERNARG_SLOT: u32 = 256;
/// Kernel-argument slots past the ring's end: arguments up to 4 KiB (HIP's limit) span slots.
pub const KERNARG_OVERHANG: u32 = 4096 / KERNARG_SLOT - 1;

/// Why ROCr could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RocrError {
    /// `libhsa-runtime64.so.1` could not be loaded.
    Load(LoadError),
    /// `hsa_init` failed (with ROCr's own description).
    Init(Status, String),
    /// ROCr started but has no GPU agent.
    NoGpu,
    /// A setup call failed.
    Setup(&'static str, Status),
}

impl std::fmt::Display for RocrError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RocrError::Load(e) => write!(f, "ROCr not loadable: {e}"),
            RocrError::Init(s, text) => {
                write!(f, "ROCr's hsa_init failed with {s}: {text}")?;
                if !Path::new("/dev/kfd").exists() {
                    write!(f, " (no GPU: /dev/kfd does not exist)")?;
                }
                Ok(())
            }
            RocrError::NoGpu => write!(f, "ROCr initialised but reports no GPU agent"),
            RocrError::Setup(what, s) => write!(f, "ROCr setup failed in {what}: {s}"),
        }
    }
}

impl std::error::Error for RocrError {}

/// Parses an agent name such as `gfx90a` into `gfx_target_version` (90010).
pub fn gfx_target_version(name: &str) -> Option<u32> {
    let digits = name.strip_prefix("gfx")?;
    let digits = digits.split(':').next()?;
    if digits.len() < 3 {
        return None;
    }
    let (major, rest) = digits.split_at(digits.len() - 2);
    let mut it = rest.chars();
    let minor = it.next()?.to_digit(16)?;
    let step = it.next()?.to_digit(16)?;
    Some(major.parse::<u32>().ok()? * 10000 + minor * 100 + step)
}

#[derive(Debug, Clone)]
struct Gpu {
    agent: hsa_agent_t,
    name: String,
    product: String,
    cu_count: u32,
    gfx: u32,
    /// Frequency of the agent's clock, which signal timestamps count (0: unknown).
    tick_hz: u64,
    clock_mhz: u32,
    device_pool: Option<hsa_amd_memory_pool_t>,
    blit: [u64; 3],
}

/// A ROCr queue as core holds it.
#[derive(Debug)]
pub struct RocrQueue {
    q: NonNull<hsa_queue_t>,
    kernarg: u64,
    state: Arc<QueueState>,
}

// SAFETY: the queue pointer names a live ROCr queue until `queue_destroy` consumes this value;
// ROCr queues are multi-producer and used only through their atomic indices and doorbell signal.
unsafe impl Send for RocrQueue {}
// SAFETY: as above.
unsafe impl Sync for RocrQueue {}

#[derive(Debug, Default)]
struct QueueState {
    /// The `hsa_status_t` the queue-error callback reported (0: none).
    fault: AtomicU32,
}

/// A loaded executable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecutableHandle(usize);

struct Executable {
    exec: hsa_executable_t,
    reader: hsa_code_object_reader_t,
    gpu: usize,
}

struct Faults {
    /// The status of the last GPU memory fault (0: none), from the system-event handler.
    memory: AtomicU32,
    address: std::sync::atomic::AtomicU64,
}

/// The ROCr backend.
pub struct Rocr {
    hsa: Arc<Hsa>,
    gpus: Vec<Gpu>,
    cpu: hsa_agent_t,
    host_pool: hsa_amd_memory_pool_t,
    kernarg_pool: hsa_amd_memory_pool_t,
    ts_hz: u64,
    ring_packets: u32,
    faults: Box<Faults>,
    allocations: Mutex<std::collections::HashSet<u64>>,
    /// Registered host memory: the agent address `hsa_amd_memory_lock` gave → the host pointer
    /// it was given (what `hsa_amd_memory_unlock` takes).
    registrations: Mutex<std::collections::HashMap<u64, u64>>,
    /// Live queues (address of the `hsa_queue_t`, its fault latch), so a wait can tell whether
    /// its signal sits behind a faulted queue's stopped packets.
    live_queues: Mutex<Vec<(usize, Arc<QueueState>, u64)>>,
    /// Live signals. Core's runtime hands nothing back when it is dropped, so the backend's
    /// drop destroys what is left (queues and signals) before `hsa_shut_down`, which otherwise
    /// reports them as leaked.
    live_signals: Mutex<std::collections::HashSet<u64>>,
    executables: Mutex<Vec<Option<Executable>>>,
    service: Mutex<Option<service::Service>>,
}

impl std::fmt::Debug for Rocr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rocr").field("library", &self.hsa.path()).field("gpus", &self.gpus.len()).finish()
    }
}

unsafe extern "C" fn collect_agent(agent: hsa_agent_t, data: *mut c_void) -> Status {
    // SAFETY: `data` is the `Vec<hsa_agent_t>` passed by `agents`, alive for the iteration.
    unsafe { &mut *(data as *mut Vec<hsa_agent_t>) }.push(agent);
    Status::SUCCESS
}

unsafe extern "C" fn collect_pool(pool: hsa_amd_memory_pool_t, data: *mut c_void) -> Status {
    // SAFETY: `data` is the `Vec<hsa_amd_memory_pool_t>` passed by `pools`.
    unsafe { &mut *(data as *mut Vec<hsa_amd_memory_pool_t>) }.push(pool);
    Status::SUCCESS
}

unsafe extern "C" fn queue_error(status: Status, _q: *mut hsa_queue_t, data: *mut c_void) {
    if data.is_null() {
        return;
    }
    // SAFETY: `data` is the queue's `QueueState`, kept alive by the `RocrQueue` (and released
    // only after `hsa_queue_destroy`, after which ROCr calls no callback for the queue).
    let st = unsafe { &*(data as *const QueueState) };
    // Ordering: Release pairs with the Acquire in `queue_fault`.
    let _ = st.fault.compare_exchange(0, status.0.max(1), Ordering::Release, Ordering::Relaxed);
}

unsafe extern "C" fn system_event(event: *const hsa_amd_event_t, data: *mut c_void) -> Status {
    if event.is_null() || data.is_null() {
        return Status::SUCCESS;
    }
    // SAFETY: ROCr passes a valid event; `data` is the backend's boxed `Faults`, which lives
    // until after `hsa_shut_down` (no handler runs later).
    let (ev, faults) = unsafe { (&*event, &*(data as *const Faults)) };
    if ev.event_type == consts::GPU_MEMORY_FAULT_EVENT {
        // Ordering: Release pairs with the Acquire loads in `device_fault`.
        faults.address.store(ev.memory_fault.virtual_address, Ordering::Release);
        faults.memory.store(Status::ERROR_MEMORY_FAULT.0, Ordering::Release);
    }
    Status::SUCCESS
}

fn status_error(s: Status) -> Error {
    match s {
        Status::ERROR_OUT_OF_RESOURCES | Status::ERROR_INVALID_ALLOCATION => Error::OutOfMemory,
        Status::ERROR_INVALID_ARGUMENT => Error::InvalidValue,
        Status::ERROR_INVALID_CODE_OBJECT => Error::InvalidValue,
        Status::ERROR_INVALID_SYMBOL_NAME => Error::NotFound,
        Status::ERROR_MEMORY_FAULT | Status::ERROR_MEMORY_APERTURE_VIOLATION => Error::IllegalAddress,
        Status::ERROR_ILLEGAL_INSTRUCTION => Error::LaunchFailure,
        Status::ERROR_EXCEPTION => Error::LaunchFailure,
        _ => Error::Unknown,
    }
}

impl Rocr {
    /// Loads ROCr (from `library`, or the usual places), initialises it and finds its GPUs.
    pub fn open(library: Option<&Path>, ring_packets: u32) -> std::result::Result<Rocr, RocrError> {
        let hsa = Arc::new(Hsa::load(library).map_err(RocrError::Load)?);
        // SAFETY: hsa_init takes no arguments; it is reference counted against hsa_shut_down.
        let s = unsafe { (hsa.hsa_init)() };
        if !s.is_ok() {
            return Err(RocrError::Init(s, hsa.status_string(s)));
        }
        // From here on, a failure must shut ROCr down again.
        let shut = |e: RocrError| {
            // SAFETY: balances the successful hsa_init above.
            unsafe { (hsa.hsa_shut_down)() };
            e
        };
        let agents = Self::agents(&hsa).map_err(|s| shut(RocrError::Setup("hsa_iterate_agents", s)))?;
        let mut cpu = None;
        let mut gpus = Vec::new();
        for a in agents {
            match Self::info_u32(&hsa, a, consts::AGENT_INFO_DEVICE) {
                Ok(consts::DEVICE_TYPE_CPU) if cpu.is_none() => cpu = Some(a),
                Ok(consts::DEVICE_TYPE_GPU) => {
                    let name = Self::info_str(&hsa, a, consts::AGENT_INFO_NAME);
                    gpus.push(Gpu {
                        agent: a,
                        gfx: gfx_target_version(&name).unwrap_or(0),
                        product: Self::info_str(&hsa, a, consts::AMD_AGENT_INFO_PRODUCT_NAME),
                        name,
                        cu_count: Self::info_u32(&hsa, a, consts::AMD_AGENT_INFO_COMPUTE_UNIT_COUNT).unwrap_or(0),
                        clock_mhz: Self::info_u32(&hsa, a, consts::AMD_AGENT_INFO_MAX_CLOCK_FREQUENCY).unwrap_or(0),
                        device_pool: None,
                        blit: [0; 3],
                        tick_hz: 0,
                    });
                }
                _ => {}
            }
        }
        if gpus.is_empty() {
            return Err(shut(RocrError::NoGpu));
        }
        let cpu = cpu.ok_or_else(|| shut(RocrError::Setup("finding the CPU agent", Status::ERROR_INVALID_AGENT)))?;
        let cpu_pools = Self::pools(&hsa, cpu).map_err(|s| shut(RocrError::Setup("CPU memory pools", s)))?;
        let flags = |p| Self::pool_u32(&hsa, p, consts::POOL_INFO_GLOBAL_FLAGS).unwrap_or(0);
        let host_pool = cpu_pools
            .iter()
            .copied()
            .find(|&p| {
                flags(p) & consts::GLOBAL_FLAG_FINE_GRAINED != 0 && flags(p) & consts::GLOBAL_FLAG_KERNARG_INIT == 0
            })
            .or_else(|| cpu_pools.first().copied())
            .ok_or_else(|| shut(RocrError::Setup("host memory pool", Status::ERROR_INVALID_MEMORY_POOL)))?;
        let kernarg_pool =
            cpu_pools.iter().copied().find(|&p| flags(p) & consts::GLOBAL_FLAG_KERNARG_INIT != 0).unwrap_or(host_pool);
        for g in &mut gpus {
            let pools = Self::pools(&hsa, g.agent).unwrap_or_default();
            g.device_pool = pools.into_iter().find(|&p| {
                Self::pool_u32(&hsa, p, consts::POOL_INFO_SEGMENT) == Ok(consts::SEGMENT_GLOBAL)
                    && Self::pool_u32(&hsa, p, consts::POOL_INFO_RUNTIME_ALLOC_ALLOWED).unwrap_or(0) != 0
            });
        }
        let mut ts_hz = 0u64;
        // SAFETY: TIMESTAMP_FREQUENCY is a uint64_t.
        let _ = unsafe {
            (hsa.hsa_system_get_info)(consts::SYSTEM_INFO_TIMESTAMP_FREQUENCY, &mut ts_hz as *mut u64 as *mut c_void)
        };
        for g in &mut gpus {
            g.tick_hz = Self::agent_tick_hz(&hsa, g.agent, ts_hz);
        }
        let faults = Box::new(Faults { memory: AtomicU32::new(0), address: std::sync::atomic::AtomicU64::new(0) });
        // SAFETY: `faults` is boxed (stable address) and outlives the runtime (dropped after
        // hsa_shut_down in Drop).
        let _ = unsafe {
            (hsa.hsa_amd_register_system_event_handler)(system_event, &*faults as *const Faults as *mut c_void)
        };
        let mut r = Rocr {
            hsa,
            gpus,
            cpu,
            host_pool,
            kernarg_pool,
            ts_hz,
            ring_packets: ring_packets.clamp(64, 1 << 17).next_power_of_two(),
            faults,
            allocations: Mutex::new(Default::default()),
            registrations: Mutex::new(Default::default()),
            live_queues: Mutex::new(Vec::new()),
            live_signals: Mutex::new(Default::default()),
            executables: Mutex::new(Vec::new()),
            service: Mutex::new(None),
        };
        for i in 0..r.gpus.len() {
            // Without a blit object for the target, copies and fills are NotSupported.
            if let Some(elf) = r.gpus.get(i).and_then(|g| aqueduct_kfd::blit_code_object(g.gfx)) {
                if let Ok(x) = r.load_executable(i as u32, elf) {
                    let mut blit = [0u64; 3];
                    for (slot, name) in blit.iter_mut().zip(["aqueduct_copy", "aqueduct_fill", "aqueduct_write_value"])
                    {
                        *slot = r.kernel(x, name).map(|k| k.kernel_object).unwrap_or(0);
                    }
                    if let Some(g) = r.gpus.get_mut(i) {
                        g.blit = blit;
                    }
                }
            }
        }
        Ok(r)
    }

    /// The agent clock's frequency. Signal timestamps are agent (GPU) ticks, not the system
    /// clock `HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY` counts, and ROCr 5.2 has no agent attribute
    /// for it: it is the slope of ROCr's own agent-to-system conversion over 10^9 agent ticks.
    fn agent_tick_hz(hsa: &Hsa, agent: hsa_agent_t, system_hz: u64) -> u64 {
        const SPAN: u64 = 1_000_000_000;
        let (mut a, mut b) = (0u64, 0u64);
        // SAFETY: a live agent and valid out-pointers.
        let ok = unsafe {
            (hsa.hsa_amd_profiling_convert_tick_to_system_domain)(agent, SPAN, &mut a).is_ok()
                && (hsa.hsa_amd_profiling_convert_tick_to_system_domain)(agent, 2 * SPAN, &mut b).is_ok()
        };
        let system_ticks = b.saturating_sub(a);
        if !ok || system_ticks == 0 || system_hz == 0 {
            return 0;
        }
        ((u128::from(SPAN) * u128::from(system_hz) + u128::from(system_ticks) / 2) / u128::from(system_ticks)) as u64
    }

    fn agents(hsa: &Hsa) -> std::result::Result<Vec<hsa_agent_t>, Status> {
        let mut v: Vec<hsa_agent_t> = Vec::new();
        // SAFETY: the callback only pushes into `v`, which outlives the call.
        unsafe { (hsa.hsa_iterate_agents)(collect_agent, &mut v as *mut _ as *mut c_void) }.ok()?;
        Ok(v)
    }

    fn pools(hsa: &Hsa, agent: hsa_agent_t) -> std::result::Result<Vec<hsa_amd_memory_pool_t>, Status> {
        let mut v: Vec<hsa_amd_memory_pool_t> = Vec::new();
        // SAFETY: as in `agents`.
        unsafe { (hsa.hsa_amd_agent_iterate_memory_pools)(agent, collect_pool, &mut v as *mut _ as *mut c_void) }
            .ok()?;
        Ok(v)
    }

    fn info_u32(hsa: &Hsa, agent: hsa_agent_t, attr: u32) -> std::result::Result<u32, Status> {
        let mut v = 0u32;
        // SAFETY: every attribute asked this way is a 32-bit value.
        unsafe { (hsa.hsa_agent_get_info)(agent, attr, &mut v as *mut u32 as *mut c_void) }.ok()?;
        Ok(v)
    }

    fn info_str(hsa: &Hsa, agent: hsa_agent_t, attr: u32) -> String {
        let mut buf = [0u8; 64];
        // SAFETY: name attributes are char[64].
        let s = unsafe { (hsa.hsa_agent_get_info)(agent, attr, buf.as_mut_ptr() as *mut c_void) };
        if !s.is_ok() {
            return String::new();
        }
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(buf.get(..end).unwrap_or(&[])).into_owned()
    }

    fn pool_u32(hsa: &Hsa, pool: hsa_amd_memory_pool_t, attr: u32) -> std::result::Result<u32, Status> {
        let mut v = 0u32;
        // SAFETY: the attributes asked this way are 32-bit (segment, flags, bool as u32 is
        // over-sized for RUNTIME_ALLOC_ALLOWED, and the zeroed upper bytes keep it correct).
        unsafe { (hsa.hsa_amd_memory_pool_get_info)(pool, attr, &mut v as *mut u32 as *mut c_void) }.ok()?;
        Ok(v)
    }

    /// The loaded library's path.
    pub fn library(&self) -> &Path {
        self.hsa.path()
    }

    /// `hsa_queue_t::id` of a queue.
    pub fn queue_id(&self, q: &RocrQueue) -> u64 {
        // SAFETY: a live queue.
        unsafe { q.q.as_ref() }.id
    }

    /// Writes the agents and their properties (for `aqueduct info`).
    pub fn describe<W: Write>(&self, out: &mut W) {
        let _ = writeln!(out, "  library {}, {} GPU agent(s)", self.hsa.path().display(), self.gpus.len());
        for (i, g) in self.gpus.iter().enumerate() {
            let _ = writeln!(out, "  device {i}: {} ({})", g.name, g.product);
            let _ = writeln!(out, "    gfx_target_version   {}", g.gfx);
            let _ = writeln!(out, "    compute units        {}", g.cu_count);
            let _ = writeln!(out, "    max clock            {} MHz", g.clock_mhz);
            let _ = writeln!(
                out,
                "    timestamp frequency  {} MHz (system {} MHz)",
                crate::rounded_mhz(g.tick_hz),
                crate::rounded_mhz(self.ts_hz)
            );
            let _ = writeln!(
                out,
                "    blit kernels         {}",
                if g.blit[0] != 0 { "loaded" } else { "none for this target" }
            );
        }
    }

    fn alloc(&self, pool: hsa_amd_memory_pool_t, bytes: usize) -> Result<u64> {
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: a valid pool and out-pointer.
        unsafe { (self.hsa.hsa_amd_memory_pool_allocate)(pool, bytes, 0, &mut p) }.ok().map_err(status_error)?;
        let agents: Vec<hsa_agent_t> = self.gpus.iter().map(|g| g.agent).chain([self.cpu]).collect();
        // SAFETY: `p` was just allocated; every agent may access it (errors are harmless: a
        // pool already accessible everywhere refuses nothing).
        let _ = unsafe {
            (self.hsa.hsa_amd_agents_allow_access)(agents.len() as u32, agents.as_ptr(), std::ptr::null(), p)
        };
        Ok(p as u64)
    }

    fn free(&self, address: u64) {
        // SAFETY: an address from `alloc`, freed once.
        let _ = unsafe { (self.hsa.hsa_amd_memory_pool_free)(address as usize as *mut c_void) };
    }

    /// The fault of a faulted queue that still holds an unprocessed packet completing `signal`
    /// (its packet processor stopped, so the signal will never move), if any.
    fn dead_signal(&self, signal: hsa_signal_t) -> Option<Error> {
        let live = self.live_queues.lock().ok()?;
        for (q, state, _) in live.iter() {
            // Ordering: Acquire pairs with the error callback's Release.
            let status = state.fault.load(Ordering::Acquire);
            if status == 0 {
                continue;
            }
            // SAFETY: a live queue (removed from the list before hsa_queue_destroy).
            let hq = unsafe { &*(*q as *const hsa_queue_t) };
            let amd = *q as *const u8;
            // SAFETY: amd_queue_t's 64-bit dispatch ids at fixed offsets (as in queue_desc).
            let (w, r) = unsafe {
                (
                    (*(amd.add(amd_queue::WRITE_DISPATCH_ID) as *const std::sync::atomic::AtomicU64))
                        .load(Ordering::Acquire),
                    (*(amd.add(amd_queue::READ_DISPATCH_ID) as *const std::sync::atomic::AtomicU64))
                        .load(Ordering::Acquire),
                )
            };
            let pending = w.wrapping_sub(r).min(u64::from(hq.size));
            for k in 0..pending {
                let slot = (r.wrapping_add(k) % u64::from(hq.size.max(1))) as usize;
                // SAFETY: slot < size: a 64-byte packet of the ring; the completion signal of
                // every AQL packet type is the u64 at byte 56. The stopped processor no longer
                // writes the slots.
                let completion = unsafe {
                    std::ptr::read_volatile((hq.base_address as *const u8).add(slot * 64 + 56) as *const u64)
                };
                if completion == signal.handle {
                    return Some(status_error(Status(status)));
                }
            }
        }
        None
    }

    fn memory_fault(&self) -> Option<Error> {
        // Ordering: Acquire pairs with the handler's Release.
        (self.faults.memory.load(Ordering::Acquire) != 0).then_some(Error::IllegalAddress)
    }

    /// Loads a code object as an executable on `device`.
    pub fn load_executable(&self, device: u32, elf: &[u8]) -> Result<ExecutableHandle> {
        let gi = device as usize;
        let g = self.gpus.get(gi).ok_or(Error::InvalidDevice)?;
        let h = &self.hsa;
        let mut reader = hsa_code_object_reader_t::default();
        // SAFETY: `elf` outlives the reader (destroyed with the executable; ROCr copies the
        // segments at load, and the reader is only read during the load).
        unsafe { (h.hsa_code_object_reader_create_from_memory)(elf.as_ptr() as *const c_void, elf.len(), &mut reader) }
            .ok()
            .map_err(status_error)?;
        let mut exec = hsa_executable_t::default();
        let r = (|| {
            // SAFETY: valid out-pointer; null options.
            unsafe {
                (h.hsa_executable_create_alt)(
                    consts::PROFILE_FULL,
                    consts::FLOAT_ROUNDING_MODE_DEFAULT,
                    std::ptr::null(),
                    &mut exec,
                )
            }
            .ok()?;
            // SAFETY: a fresh executable, a live reader and agent.
            unsafe {
                (h.hsa_executable_load_agent_code_object)(exec, g.agent, reader, std::ptr::null(), std::ptr::null_mut())
            }
            .ok()?;
            // SAFETY: as above.
            unsafe { (h.hsa_executable_freeze)(exec, std::ptr::null()) }.ok()
        })();
        if let Err(s) = r {
            // SAFETY: releasing what was created above.
            unsafe {
                if exec.handle != 0 {
                    (h.hsa_executable_destroy)(exec);
                }
                (h.hsa_code_object_reader_destroy)(reader);
            }
            return Err(status_error(s));
        }
        let mut xs = self.executables.lock().map_err(|_| Error::Unknown)?;
        xs.push(Some(Executable { exec, reader, gpu: gi }));
        Ok(ExecutableHandle(xs.len() - 1))
    }

    /// The symbol `name` of an executable on its agent.
    fn symbol(&self, x: ExecutableHandle, name: &str, missing: Error) -> Result<hsa_executable_symbol_t> {
        let xs = self.executables.lock().map_err(|_| Error::Unknown)?;
        let e = xs.get(x.0).and_then(|e| e.as_ref()).ok_or(Error::InvalidHandle)?;
        let agent = self.gpus.get(e.gpu).ok_or(Error::InvalidDevice)?.agent;
        let cname = CString::new(name).map_err(|_| missing)?;
        let mut sym = hsa_executable_symbol_t::default();
        // SAFETY: a live executable, a NUL-terminated name, valid out-pointer.
        unsafe { (self.hsa.hsa_executable_get_symbol_by_name)(e.exec, cname.as_ptr(), &agent, &mut sym) }
            .ok()
            .map_err(|_| missing)?;
        Ok(sym)
    }

    /// A kernel of an executable, as ROCr's loader placed it.
    pub fn kernel(&self, x: ExecutableHandle, name: &str) -> Result<KernelSymbol> {
        let sym = self.symbol(x, &format!("{name}.kd"), Error::NotFound)?;
        let mut object = 0u64;
        let (mut group, mut private, mut kernarg, mut align) = (0u32, 0u32, 0u32, 16u32);
        let mut dynamic = false;
        // SAFETY: KERNEL_OBJECT is u64, the segment sizes and alignment u32, the call-stack
        // flag a bool, as hsa.h documents each attribute.
        unsafe {
            let f = self.hsa.hsa_executable_symbol_get_info;
            f(sym, consts::SYMBOL_INFO_KERNEL_OBJECT, &mut object as *mut u64 as *mut c_void)
                .ok()
                .map_err(status_error)?;
            f(sym, consts::SYMBOL_INFO_GROUP_SEGMENT_SIZE, &mut group as *mut u32 as *mut c_void);
            f(sym, consts::SYMBOL_INFO_PRIVATE_SEGMENT_SIZE, &mut private as *mut u32 as *mut c_void);
            f(sym, consts::SYMBOL_INFO_KERNARG_SEGMENT_SIZE, &mut kernarg as *mut u32 as *mut c_void);
            f(sym, consts::SYMBOL_INFO_KERNARG_SEGMENT_ALIGNMENT, &mut align as *mut u32 as *mut c_void);
            f(sym, consts::SYMBOL_INFO_KERNEL_DYNAMIC_CALLSTACK, &mut dynamic as *mut bool as *mut c_void);
        }
        Ok(KernelSymbol {
            kernel_object: object,
            group_segment_size: group,
            private_segment_size: private,
            kernarg_size: kernarg,
            kernarg_align: align.max(16),
            dynamic_stack: dynamic,
        })
    }

    /// A device variable of an executable.
    pub fn variable(&self, x: ExecutableHandle, name: &str) -> Result<VariableSymbol> {
        let sym = self.symbol(x, name, Error::InvalidSymbol)?;
        let (mut address, mut size) = (0u64, 0u32);
        // SAFETY: VARIABLE_ADDRESS is u64, VARIABLE_SIZE u32 (hsa.h).
        unsafe {
            let f = self.hsa.hsa_executable_symbol_get_info;
            f(sym, consts::SYMBOL_INFO_VARIABLE_ADDRESS, &mut address as *mut u64 as *mut c_void)
                .ok()
                .map_err(|_| Error::InvalidSymbol)?;
            f(sym, consts::SYMBOL_INFO_VARIABLE_SIZE, &mut size as *mut u32 as *mut c_void);
        }
        Ok(VariableSymbol { address, size: u64::from(size) })
    }

    /// Destroys an executable (no dispatch of its kernels may be pending).
    pub fn unload_executable(&self, x: ExecutableHandle) -> Result<()> {
        let e = {
            let mut xs = self.executables.lock().map_err(|_| Error::Unknown)?;
            xs.get_mut(x.0).and_then(Option::take).ok_or(Error::InvalidHandle)?
        };
        // SAFETY: a live executable and reader, destroyed once.
        unsafe {
            (self.hsa.hsa_executable_destroy)(e.exec);
            (self.hsa.hsa_code_object_reader_destroy)(e.reader);
        }
        Ok(())
    }
}

impl Drop for Rocr {
    fn drop(&mut self) {
        if let Ok(mut s) = self.service.lock() {
            drop(s.take());
        }
        let xs = self.executables.get_mut().map(std::mem::take).unwrap_or_default();
        for e in xs.into_iter().flatten() {
            // SAFETY: live executables and readers, destroyed once.
            unsafe {
                (self.hsa.hsa_executable_destroy)(e.exec);
                (self.hsa.hsa_code_object_reader_destroy)(e.reader);
            }
        }
        let queues = self.live_queues.get_mut().map(std::mem::take).unwrap_or_default();
        for (q, _, kernarg) in queues {
            // SAFETY: a queue core never handed back (its runtime is gone), destroyed once.
            unsafe { (self.hsa.hsa_queue_destroy)(q as *mut hsa_queue_t) };
            self.free(kernarg);
        }
        let signals = self.live_signals.get_mut().map(std::mem::take).unwrap_or_default();
        for handle in signals {
            // SAFETY: a signal core never handed back, destroyed once; no queue is left to use it.
            unsafe { (self.hsa.hsa_signal_destroy)(hsa_signal_t { handle }) };
        }
        let allocs = self.allocations.get_mut().map(std::mem::take).unwrap_or_default();
        for a in allocs {
            self.free(a);
        }
        let registered = self.registrations.get_mut().map(std::mem::take).unwrap_or_default();
        for host in registered.into_values() {
            // SAFETY: a pointer locked by `host_register` and not unlocked since.
            unsafe { (self.hsa.hsa_amd_memory_unlock)(host as usize as *mut c_void) };
        }
        // SAFETY: balances the hsa_init of `open`; no ROCr object of ours is used after this.
        unsafe { (self.hsa.hsa_shut_down)() };
    }
}

fn hsa_priority(p: Priority) -> u32 {
    match p {
        Priority::High => consts::QUEUE_PRIORITY_HIGH,
        Priority::Normal => consts::QUEUE_PRIORITY_NORMAL,
        Priority::Low => consts::QUEUE_PRIORITY_LOW,
    }
}

/// Wait slices: a fault is noticed within one.
const SLICE_NS: u64 = 10_000_000;

// SAFETY: signals are ROCr signals, whose handles are the addresses of live `amd_signal_t`s in
// host memory until `hsa_signal_destroy`; a queue's ring, indices (`amd_queue_t` +56/+128) and
// kernel-argument area stay valid until `hsa_queue_destroy` in `queue_destroy`; ROCr's packet
// processor consumes published packets, or its error callback latches the fault that
// `queue_fault` reports.
unsafe impl Backend for Rocr {
    type Queue = RocrQueue;
    type Module = ExecutableHandle;

    fn module_load(&self, device: u32, code_object: &[u8]) -> Result<ExecutableHandle> {
        // The checks are the code-object reader's (precise errors), the load ROCr's own.
        let g = self.gpus.get(device as usize).ok_or(Error::InvalidDevice)?;
        let co = amdhsa::CodeObject::parse(code_object).map_err(|_| Error::InvalidImage)?;
        let processor = amdhsa::Processor::from_gfx_target_version(g.gfx).ok_or(Error::NoBinaryForGpu)?;
        let xnack = std::env::var("HSA_XNACK").is_ok_and(|v| v == "1");
        if !co.target().runs_on(&amdhsa::TargetId::device(processor, xnack)) {
            return Err(Error::NoBinaryForGpu);
        }
        self.load_executable(device, code_object)
    }

    fn module_kernel(&self, module: &ExecutableHandle, name: &str) -> Result<KernelSymbol> {
        self.kernel(*module, name)
    }

    fn module_variable(&self, module: &ExecutableHandle, name: &str) -> Result<VariableSymbol> {
        self.variable(*module, name)
    }

    fn module_image(&self, _module: &ExecutableHandle) -> Option<(u64, u64)> {
        None
    }

    fn module_unload(&self, module: ExecutableHandle) -> Result<()> {
        self.unload_executable(module)
    }

    fn device_count(&self) -> u32 {
        self.gpus.len() as u32
    }

    fn device_info(&self, device: u32) -> Result<DeviceInfo> {
        let g = self.gpus.get(device as usize).ok_or(Error::InvalidDevice)?;
        // Signal timestamps count agent ticks; the system clock's frequency only as a fallback.
        let hz = if g.tick_hz != 0 { g.tick_hz } else { self.ts_hz };
        Ok(DeviceInfo { cu_count: g.cu_count, gfx_target_version: g.gfx, timestamp_frequency: hz })
    }

    fn queue_create(&self, device: u32, priority: Priority, cu_mask: Option<&CuMask>) -> Result<RocrQueue> {
        let g = self.gpus.get(device as usize).ok_or(Error::InvalidDevice)?;
        let state = Arc::new(QueueState::default());
        let mut q: *mut hsa_queue_t = std::ptr::null_mut();
        // SAFETY: a live agent; the callback's data is the queue's state, kept alive by the
        // returned RocrQueue until after hsa_queue_destroy.
        unsafe {
            (self.hsa.hsa_queue_create)(
                g.agent,
                self.ring_packets,
                consts::QUEUE_TYPE_MULTI,
                Some(queue_error),
                Arc::as_ptr(&state) as *mut c_void,
                u32::MAX,
                u32::MAX,
                &mut q,
            )
        }
        .ok()
        .map_err(status_error)?;
        let q = NonNull::new(q).ok_or(Error::OutOfMemory)?;
        let destroy = |e: Error| {
            // SAFETY: the queue just created, destroyed once.
            unsafe { (self.hsa.hsa_queue_destroy)(q.as_ptr()) };
            e
        };
        // SAFETY: a live queue (these only tune it; a refusal is reported).
        unsafe {
            (self.hsa.hsa_amd_profiling_set_profiler_enabled)(q.as_ptr(), 1);
            (self.hsa.hsa_amd_queue_set_priority)(q.as_ptr(), hsa_priority(priority))
                .ok()
                .map_err(|s| destroy(status_error(s)))?;
            if let Some(m) = cu_mask {
                let words = CuMask::words_for(g.cu_count).min(m.words().len());
                (self.hsa.hsa_amd_queue_cu_set_mask)(q.as_ptr(), (words * 32) as u32, m.words().as_ptr())
                    .ok()
                    .map_err(|s| destroy(status_error(s)))?;
            }
        }
        let kernarg_bytes = ((self.ring_packets + KERNARG_OVERHANG) * KERNARG_SLOT) as usize;
        let kernarg = self.alloc(self.kernarg_pool, kernarg_bytes).map_err(destroy)?;
        if let Ok(mut live) = self.live_queues.lock() {
            live.push((q.as_ptr() as usize, Arc::clone(&state), kernarg));
        }
        Ok(RocrQueue { q, kernarg, state })
    }

    fn queue_desc(&self, queue: &RocrQueue) -> Result<QueueDesc> {
        // SAFETY: a live queue.
        let hq = unsafe { queue.q.as_ref() };
        let base = NonNull::new(hq.base_address as *mut u8).ok_or(Error::InvalidHandle)?;
        let amd = queue.q.as_ptr() as *mut u8;
        // SAFETY: the hsa_queue_t is the head of ROCr's amd_queue_t (amd_hsa_queue.h), whose
        // write_dispatch_id and read_dispatch_id are 64-bit indices at fixed offsets.
        let (w, r) = unsafe { (amd.add(amd_queue::WRITE_DISPATCH_ID), amd.add(amd_queue::READ_DISPATCH_ID)) };
        let (w, r) = (NonNull::new(w).ok_or(Error::InvalidHandle)?, NonNull::new(r).ok_or(Error::InvalidHandle)?);
        // SAFETY: ROCr's ring of `size` packets and its indices live until hsa_queue_destroy;
        // ROCr's packet processor and core's producers follow the AQL protocol on them.
        let ring = unsafe { AqlRing::new(base, hq.size, w.cast(), r.cast()) }?;
        Ok(QueueDesc {
            ring,
            kernarg_host: NonNull::new(queue.kernarg as usize as *mut u8).ok_or(Error::InvalidHandle)?,
            kernarg_device: queue.kernarg,
            kernarg_slot_bytes: KERNARG_SLOT,
            kernarg_overhang_slots: KERNARG_OVERHANG,
        })
    }

    fn ring_doorbell(&self, queue: &RocrQueue, index: u64) {
        // SAFETY: a live queue's doorbell signal; ROCr stores the index to the hardware doorbell.
        unsafe { (self.hsa.hsa_signal_store_screlease)(queue.q.as_ref().doorbell_signal, index as i64) };
    }

    fn queue_fault(&self, queue: &RocrQueue) -> Option<Error> {
        // Ordering: Acquire pairs with the callback's Release.
        match queue.state.fault.load(Ordering::Acquire) {
            0 => self.memory_fault(),
            s => Some(status_error(Status(s))),
        }
    }

    fn queue_destroy(&self, queue: RocrQueue) {
        if let Ok(mut live) = self.live_queues.lock() {
            live.retain(|(q, _, _)| *q != queue.q.as_ptr() as usize);
        }
        // SAFETY: a live queue, destroyed once; its callback data (`state`) drops after.
        unsafe { (self.hsa.hsa_queue_destroy)(queue.q.as_ptr()) };
        self.free(queue.kernarg);
    }

    fn signal_create(&self, initial: i64) -> Result<SignalHandle> {
        let mut s = hsa_signal_t::default();
        // SAFETY: valid out-pointer; any consumer.
        unsafe { (self.hsa.hsa_signal_create)(initial, 0, std::ptr::null(), &mut s) }.ok().map_err(status_error)?;
        if let Ok(mut live) = self.live_signals.lock() {
            live.insert(s.handle);
        }
        Ok(SignalHandle(s.handle))
    }

    fn signal_destroy(&self, signal: SignalHandle) {
        if let Ok(mut live) = self.live_signals.lock() {
            live.remove(&signal.0);
        }
        // SAFETY: a signal from signal_create, destroyed once (core's contract).
        unsafe { (self.hsa.hsa_signal_destroy)(hsa_signal_t { handle: signal.0 }) };
    }

    fn signal_wait(&self, signal: SignalHandle, cond: Condition, expected: i64, timeout: Timeout) -> Result<i64> {
        let s = hsa_signal_t { handle: signal.0 };
        let start = std::time::Instant::now();
        loop {
            let left = timeout.0.saturating_sub(start.elapsed().as_nanos() as u64);
            let slice = left.min(SLICE_NS);
            // SAFETY: a live signal.
            let v = unsafe {
                (self.hsa.hsa_signal_wait_scacquire)(s, cond as u32, expected, slice, consts::WAIT_STATE_BLOCKED)
            };
            if cond.holds(v, expected) {
                return Ok(v);
            }
            if let Some(e) = self.memory_fault().or_else(|| self.dead_signal(s)) {
                return Err(e);
            }
            if left <= slice {
                return Err(Error::NotReady);
            }
        }
    }

    fn memory_alloc(&self, device: u32, bytes: usize, kind: MemoryKind) -> Result<u64> {
        let g = self.gpus.get(device as usize).ok_or(Error::InvalidDevice)?;
        if bytes == 0 {
            return Err(Error::InvalidValue);
        }
        let pool = match kind {
            MemoryKind::Device => g.device_pool.unwrap_or(self.host_pool),
            MemoryKind::Host => self.host_pool,
        };
        let a = self.alloc(pool, bytes)?;
        if let Ok(mut set) = self.allocations.lock() {
            set.insert(a);
        }
        Ok(a)
    }

    fn memory_free(&self, address: u64) -> Result<()> {
        let known = self.allocations.lock().map(|mut s| s.remove(&address)).unwrap_or(false);
        if !known {
            return Err(Error::InvalidValue);
        }
        self.free(address);
        Ok(())
    }

    /// `hsa_amd_memory_lock` for every GPU agent: ROCr pins the pages (on amdkfd a USERPTR
    /// buffer at a new GPU VA) and answers the agent address of `host`. Its generic error (the
    /// thunk's, when amdkfd refuses the pages) is `InvalidValue`, as the trait asks for memory
    /// that cannot be registered.
    fn host_register(&self, device: u32, host: u64, bytes: usize) -> Result<u64> {
        if device as usize >= self.gpus.len() {
            return Err(Error::InvalidDevice);
        }
        if host == 0 || bytes == 0 {
            return Err(Error::InvalidValue);
        }
        let mut agents: Vec<hsa_agent_t> = self.gpus.iter().map(|g| g.agent).collect();
        let mut agent_ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: ROCr pins the range itself (refusing memory it cannot pin) and writes only
        // `agent_ptr`; the agent array holds `agents.len()` agents of this runtime.
        unsafe {
            (self.hsa.hsa_amd_memory_lock)(
                host as usize as *mut c_void,
                bytes,
                agents.as_mut_ptr(),
                agents.len() as i32,
                &mut agent_ptr,
            )
        }
        .ok()
        .map_err(|s| if s == Status::ERROR { Error::InvalidValue } else { status_error(s) })?;
        let address = agent_ptr as u64;
        if let Ok(mut map) = self.registrations.lock() {
            map.insert(address, host);
        }
        Ok(address)
    }

    fn host_unregister(&self, device_address: u64) -> Result<()> {
        let host = self.registrations.lock().ok().and_then(|mut m| m.remove(&device_address));
        let host = host.ok_or(Error::InvalidValue)?;
        // SAFETY: the pointer `host_register` locked, unlocked once.
        unsafe { (self.hsa.hsa_amd_memory_unlock)(host as usize as *mut c_void) }.ok().map_err(status_error)
    }

    fn builtin_kernel(&self, device: u32, kernel: BuiltinKernel) -> Result<u64> {
        let g = self.gpus.get(device as usize).ok_or(Error::InvalidDevice)?;
        let i = match kernel {
            BuiltinKernel::Copy => 0,
            BuiltinKernel::Fill => 1,
            BuiltinKernel::WriteValue => 2,
            // No blit scheduler kernel yet: conditional graph nodes run on the loopback only.
            BuiltinKernel::GraphScheduler => return Err(Error::NotSupported),
        };
        match g.blit.get(i).copied() {
            Some(0) | None => Err(Error::NotSupported),
            Some(k) => Ok(k),
        }
    }

    fn host_call(&self, start: SignalHandle, done: SignalHandle, f: HostFn) -> Result<()> {
        let mut svc = self.service.lock().map_err(|_| Error::Unknown)?;
        if svc.is_none() {
            *svc = Some(service::Service::start(Arc::clone(&self.hsa))?);
        }
        svc.as_ref().ok_or(Error::NotInitialized)?.submit(start, done, f)
    }

    fn timestamp(&self) -> u64 {
        // ROCr's system timestamp (same clock as signal timestamps, scaled to ticks).
        let mut ts = 0u64;
        // SAFETY: HSA_SYSTEM_INFO_TIMESTAMP (1) is a uint64_t.
        let _ = unsafe { (self.hsa.hsa_system_get_info)(1, &mut ts as *mut u64 as *mut c_void) };
        ts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gfx_names_parse() {
        assert_eq!(gfx_target_version("gfx90a"), Some(90010));
        assert_eq!(gfx_target_version("gfx1100"), Some(110000));
        assert_eq!(gfx_target_version("gfx942"), Some(90402));
        assert_eq!(gfx_target_version("gfx90a:sramecc+:xnack-"), Some(90010));
        assert_eq!(gfx_target_version("cpu"), None);
    }
}
