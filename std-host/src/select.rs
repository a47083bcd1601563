//! Backend selection: real KFD, ROCr or the emulated GPU behind one [`AnyBackend`].
//!
//! `auto` tries kfd-direct on the real `/dev/kfd` when that file exists, then ROCr (when the
//! `rocr` feature is on and `libhsa-runtime64.so.1` loads and finds a GPU), and otherwise opens
//! the emulated GPU, which is always available. Every backend that was tried and failed is
//! reported with the reason ([`Unavailable`]), so `aqueduct info` can say why.

use std::fmt;

use aqueduct::aql::Condition;
use aqueduct::backend::{
    BuiltinKernel, DeviceInfo, HostFn, KernelSymbol, MemoryKind, QueueDesc, Timeout, VariableSymbol,
};
use aqueduct::{Backend, CuMask, Error, Priority, Result, SignalHandle};
use aqueduct_kfd::{EmuSys, Kfd, KfdConfig, KfdQueue, LinuxSys, WaitMode};
use aqueduct_kfd_emu::{EmuConfig, GpuProfile};

#[cfg(feature = "rocr")]
use crate::rocr::{Rocr, RocrQueue};

/// Which backend to open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendKind {
    /// Real KFD if `/dev/kfd` exists, then ROCr, else the emulator.
    #[default]
    Auto,
    /// kfd-direct on the real `/dev/kfd`.
    Kfd,
    /// ROCr (libhsa-runtime64).
    Rocr,
    /// kfd-direct on the emulated GPU.
    Emu,
}

impl BackendKind {
    /// Its command-line name.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Auto => "auto",
            BackendKind::Kfd => "kfd",
            BackendKind::Rocr => "rocr",
            BackendKind::Emu => "emu",
        }
    }

    /// Parses a command-line name.
    pub fn parse(s: &str) -> Option<BackendKind> {
        Some(match s {
            "auto" => BackendKind::Auto,
            "kfd" => BackendKind::Kfd,
            "rocr" => BackendKind::Rocr,
            "emu" => BackendKind::Emu,
            _ => return None,
        })
    }

    /// What it is, in words.
    pub fn describe(self) -> &'static str {
        match self {
            BackendKind::Auto => "automatic selection",
            BackendKind::Kfd => "kfd-direct on /dev/kfd (kernel bypass)",
            BackendKind::Rocr => "ROCr (libhsa-runtime64)",
            BackendKind::Emu => "kfd-direct on the emulated AMD GPU",
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A backend that could not be opened, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    /// The backend.
    pub kind: BackendKind,
    /// Why, naming the cause.
    pub reason: String,
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.reason)
    }
}

/// No backend could be opened (only possible when one was asked for by name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenError(pub Vec<Unavailable>);

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("no backend could be opened")?;
        for u in &self.0 {
            write!(f, "; {u}")?;
        }
        Ok(())
    }
}

impl std::error::Error for OpenError {}

/// How to open a backend.
#[derive(Debug, Clone)]
pub struct OpenOptions {
    /// Which backend.
    pub kind: BackendKind,
    /// Packets per hardware queue (a power of two; a 1000-node graph launch needs more than 1000).
    pub ring_packets: u32,
    /// How kfd-direct waits.
    pub wait: WaitMode,
    /// The emulated machine's GPUs.
    pub emu_gpus: Vec<GpuProfile>,
    /// Compute-unit workers per emulated GPU (`None`: `AQUEDUCT_EMU_CUS`, else the host's
    /// parallelism; `EmuConfig::cus`).
    pub emu_cus: Option<u32>,
    /// The ROCr library to load instead of the search path (tests).
    pub rocr_library: Option<std::path::PathBuf>,
    /// Hardware queues each device creates before streams share them (`None`: the runtime's
    /// configuration, 4 at HIP scale). Defaults to `AQUEDUCT_MAX_HW_QUEUES` when that is set.
    pub max_hw_queues: Option<u32>,
}

/// The environment variable that sets [`OpenOptions::max_hw_queues`] (as `GPU_MAX_HW_QUEUES`
/// does for HIP; see `docs/queue-pool.md` for the default of 4).
pub const MAX_HW_QUEUES_ENV: &str = "AQUEDUCT_MAX_HW_QUEUES";

/// The hardware-queue budget `AQUEDUCT_MAX_HW_QUEUES` asks for (a positive integer), if any.
pub fn max_hw_queues_from_env() -> Option<u32> {
    std::env::var(MAX_HW_QUEUES_ENV).ok()?.trim().parse().ok().filter(|&n: &u32| n > 0)
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            kind: BackendKind::Auto,
            ring_packets: 2048,
            wait: WaitMode::Hybrid(50_000),
            emu_gpus: vec![GpuProfile::Gfx90a],
            emu_cus: None,
            rocr_library: None,
            max_hw_queues: max_hw_queues_from_env(),
        }
    }
}

impl OpenOptions {
    /// Options for `kind`, defaults otherwise.
    pub fn new(kind: BackendKind) -> Self {
        OpenOptions { kind, ..OpenOptions::default() }
    }

    fn kfd_config(&self) -> KfdConfig {
        KfdConfig { ring_packets: self.ring_packets, wait: self.wait, ..KfdConfig::default() }
    }
}

/// One of the backends, chosen at run time. Each is boxed: kfd-direct's fixed tables make it
/// about 120 KiB, which debug builds would copy on every move of a runtime.
pub enum AnyBackend {
    /// kfd-direct on the emulated GPU.
    Emu(Box<Kfd<EmuSys>>),
    /// kfd-direct on the real `/dev/kfd`.
    Kfd(Box<Kfd<LinuxSys>>),
    /// ROCr.
    #[cfg(feature = "rocr")]
    Rocr(Box<Rocr>),
}

impl fmt::Debug for AnyBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AnyBackend({})", self.kind())
    }
}

impl AnyBackend {
    /// Which backend this is.
    pub fn kind(&self) -> BackendKind {
        match self {
            AnyBackend::Emu(_) => BackendKind::Emu,
            AnyBackend::Kfd(_) => BackendKind::Kfd,
            #[cfg(feature = "rocr")]
            AnyBackend::Rocr(_) => BackendKind::Rocr,
        }
    }

    /// The emulated kfd-direct backend, if this is it.
    pub fn as_emu(&self) -> Option<&Kfd<EmuSys>> {
        match self {
            AnyBackend::Emu(k) => Some(&**k),
            _ => None,
        }
    }

    /// The ROCr backend, if this is it.
    #[cfg(feature = "rocr")]
    pub fn as_rocr(&self) -> Option<&Rocr> {
        match self {
            AnyBackend::Rocr(r) => Some(&**r),
            _ => None,
        }
    }

    /// Exports the allocation starting at `address` for another process: kfd-direct's
    /// dma-buf (`Kfd::ipc_export`; docs/kfd-aql.md §1.4, "Sharing between processes"); ROCr
    /// answers `NotSupported` (its IPC runs its own socket server, which this backend does not
    /// drive).
    pub fn ipc_export(&self, address: u64) -> Result<aqueduct_kfd::IpcExport> {
        match self {
            AnyBackend::Emu(k) => k.ipc_export(address),
            AnyBackend::Kfd(k) => k.ipc_export(address),
            #[cfg(feature = "rocr")]
            AnyBackend::Rocr(_) => Err(Error::NotSupported),
        }
    }

    /// Imports another process's dma-buf `fd` on `device` (`Kfd::ipc_import`): its VA and bytes.
    pub fn ipc_import(&self, device: u32, fd: i32) -> Result<(u64, u64)> {
        match self {
            AnyBackend::Emu(k) => k.ipc_import(device, fd),
            AnyBackend::Kfd(k) => k.ipc_import(device, fd),
            #[cfg(feature = "rocr")]
            AnyBackend::Rocr(_) => Err(Error::NotSupported),
        }
    }

    /// Ends an import of [`AnyBackend::ipc_import`] (`Kfd::ipc_close`).
    pub fn ipc_close(&self, address: u64) -> Result<()> {
        match self {
            AnyBackend::Emu(k) => k.ipc_close(address),
            AnyBackend::Kfd(k) => k.ipc_close(address),
            #[cfg(feature = "rocr")]
            AnyBackend::Rocr(_) => Err(Error::NotSupported),
        }
    }

    /// A number naming the hardware queue (KFD queue id; ROCr `hsa_queue_t::id`).
    pub fn queue_id(&self, q: &AnyQueue) -> Option<u64> {
        match (self, q) {
            (AnyBackend::Emu(k), AnyQueue::Kfd(q)) => k.queue_id(q).map(u64::from),
            (AnyBackend::Kfd(k), AnyQueue::Kfd(q)) => k.queue_id(q).map(u64::from),
            #[cfg(feature = "rocr")]
            (AnyBackend::Rocr(r), AnyQueue::Rocr(q)) => Some(r.queue_id(q)),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    /// Opens the backend `opts.kind` asks for. With `Auto` the emulator is the last resort, so
    /// this only fails for a backend asked for by name. The second value lists the backends
    /// tried before the one returned and why they failed.
    pub fn open(opts: &OpenOptions) -> std::result::Result<(AnyBackend, Vec<Unavailable>), OpenError> {
        let mut failed = Vec::new();
        let order: &[BackendKind] = match opts.kind {
            BackendKind::Auto => &[BackendKind::Kfd, BackendKind::Rocr, BackendKind::Emu],
            BackendKind::Kfd => &[BackendKind::Kfd],
            BackendKind::Rocr => &[BackendKind::Rocr],
            BackendKind::Emu => &[BackendKind::Emu],
        };
        for &kind in order {
            if opts.kind == BackendKind::Auto && kind == BackendKind::Kfd && !std::path::Path::new("/dev/kfd").exists()
            {
                failed.push(Unavailable { kind, reason: "/dev/kfd does not exist (no amdgpu driver)".into() });
                continue;
            }
            match Self::open_one(kind, opts) {
                Ok(b) => return Ok((b, failed)),
                Err(reason) => failed.push(Unavailable { kind, reason }),
            }
        }
        Err(OpenError(failed))
    }

    /// Opens exactly one backend; the error names the cause. Bring-up runs on a thread with a
    /// large stack: kfd-direct's code-object loader (blit kernels at open) needs more than a
    /// test thread's 2 MiB in debug builds.
    pub fn open_one(kind: BackendKind, opts: &OpenOptions) -> std::result::Result<AnyBackend, String> {
        let opts = opts.clone();
        std::thread::Builder::new()
            .name("aqueduct-open".into())
            .stack_size(32 << 20)
            .spawn(move || Self::open_here(kind, &opts))
            .map_err(|e| format!("cannot start the bring-up thread: {e}"))?
            .join()
            .map_err(|_| format!("{kind}: bring-up panicked"))?
    }

    fn open_here(kind: BackendKind, opts: &OpenOptions) -> std::result::Result<AnyBackend, String> {
        match kind {
            BackendKind::Auto => Err("`auto` is not a backend".into()),
            BackendKind::Kfd => match Kfd::open(LinuxSys, opts.kfd_config()) {
                Ok(k) => Ok(AnyBackend::Kfd(Box::new(k))),
                Err(e) => Err(format!("kfd-direct on /dev/kfd failed: {e}")),
            },
            BackendKind::Emu => {
                let mut config = EmuConfig::with_gpus(&opts.emu_gpus);
                if let Some(cus) = opts.emu_cus {
                    config = config.cus(cus);
                }
                let sys = EmuSys::new(config).map_err(|e| format!("the emulator could not start: {e}"))?;
                Kfd::open(sys, opts.kfd_config())
                    .map(|k| AnyBackend::Emu(Box::new(k)))
                    .map_err(|e| format!("kfd-direct on the emulator failed: {e}"))
            }
            #[cfg(feature = "rocr")]
            BackendKind::Rocr => Rocr::open(opts.rocr_library.as_deref(), opts.ring_packets)
                .map(|r| AnyBackend::Rocr(Box::new(r)))
                .map_err(|e| e.to_string()),
            #[cfg(not(feature = "rocr"))]
            BackendKind::Rocr => Err("built without the `rocr` feature".into()),
        }
    }
}

/// A hardware queue of [`AnyBackend`].
#[derive(Debug)]
pub enum AnyQueue {
    /// A kfd-direct queue (real or emulated).
    Kfd(KfdQueue),
    /// A ROCr queue.
    #[cfg(feature = "rocr")]
    Rocr(RocrQueue),
}

/// A code object loaded by [`AnyBackend`].
#[derive(Debug)]
pub enum AnyModule {
    /// Loaded by kfd-direct (real or emulated).
    Kfd(aqueduct_kfd::KfdModule),
    /// A ROCr executable.
    #[cfg(feature = "rocr")]
    Rocr(crate::rocr::ExecutableHandle),
}

macro_rules! each_m {
    ($self:expr, $m:expr, $b:ident, $mm:ident => $e:expr, $else:expr) => {
        match ($self, $m) {
            (AnyBackend::Emu($b), AnyModule::Kfd($mm)) => $e,
            (AnyBackend::Kfd($b), AnyModule::Kfd($mm)) => $e,
            #[cfg(feature = "rocr")]
            (AnyBackend::Rocr($b), AnyModule::Rocr($mm)) => $e,
            #[allow(unreachable_patterns)]
            _ => $else,
        }
    };
}

macro_rules! each {
    ($self:expr, $b:ident => $e:expr) => {
        match $self {
            AnyBackend::Emu($b) => $e,
            AnyBackend::Kfd($b) => $e,
            #[cfg(feature = "rocr")]
            AnyBackend::Rocr($b) => $e,
        }
    };
}

macro_rules! each_q {
    ($self:expr, $q:expr, $b:ident, $qq:ident => $e:expr, $else:expr) => {
        match ($self, $q) {
            (AnyBackend::Emu($b), AnyQueue::Kfd($qq)) => $e,
            (AnyBackend::Kfd($b), AnyQueue::Kfd($qq)) => $e,
            #[cfg(feature = "rocr")]
            (AnyBackend::Rocr($b), AnyQueue::Rocr($qq)) => $e,
            #[allow(unreachable_patterns)]
            _ => $else,
        }
    };
}

// SAFETY: every call is forwarded to the one backend inside, which upholds the contract; a
// queue is only ever handed back to the backend that created it (the variants pair up, and a
// mismatched pair, which cannot arise, is treated as a faulted or unknown queue).
unsafe impl Backend for AnyBackend {
    type Queue = AnyQueue;
    type Module = AnyModule;

    fn device_count(&self) -> u32 {
        each!(self, b => b.device_count())
    }

    fn device_info(&self, device: u32) -> Result<DeviceInfo> {
        each!(self, b => b.device_info(device))
    }

    fn queue_create(&self, device: u32, priority: Priority, cu_mask: Option<&CuMask>) -> Result<AnyQueue> {
        match self {
            AnyBackend::Emu(b) => b.queue_create(device, priority, cu_mask).map(AnyQueue::Kfd),
            AnyBackend::Kfd(b) => b.queue_create(device, priority, cu_mask).map(AnyQueue::Kfd),
            #[cfg(feature = "rocr")]
            AnyBackend::Rocr(b) => b.queue_create(device, priority, cu_mask).map(AnyQueue::Rocr),
        }
    }

    fn queue_desc(&self, queue: &AnyQueue) -> Result<QueueDesc> {
        each_q!(self, queue, b, q => b.queue_desc(q), Err(Error::InvalidHandle))
    }

    #[inline]
    fn ring_doorbell(&self, queue: &AnyQueue, index: u64) {
        each_q!(self, queue, b, q => b.ring_doorbell(q, index), ())
    }

    fn device_doorbell(&self, queue: &AnyQueue) -> Option<aqueduct::conditional::DeviceDoorbell> {
        each_q!(self, queue, b, q => b.device_doorbell(q), None)
    }

    fn queue_fault(&self, queue: &AnyQueue) -> Option<Error> {
        each_q!(self, queue, b, q => b.queue_fault(q), Some(Error::InvalidHandle))
    }

    fn queue_destroy(&self, queue: AnyQueue) {
        match (self, queue) {
            (AnyBackend::Emu(b), AnyQueue::Kfd(q)) => b.queue_destroy(q),
            (AnyBackend::Kfd(b), AnyQueue::Kfd(q)) => b.queue_destroy(q),
            #[cfg(feature = "rocr")]
            (AnyBackend::Rocr(b), AnyQueue::Rocr(q)) => b.queue_destroy(q),
            #[allow(unreachable_patterns)]
            _ => {}
        }
    }

    fn signal_create(&self, initial: i64) -> Result<SignalHandle> {
        each!(self, b => b.signal_create(initial))
    }

    fn signal_destroy(&self, signal: SignalHandle) {
        each!(self, b => b.signal_destroy(signal))
    }

    #[inline]
    fn signal_wait(&self, signal: SignalHandle, cond: Condition, expected: i64, timeout: Timeout) -> Result<i64> {
        each!(self, b => b.signal_wait(signal, cond, expected, timeout))
    }

    fn memory_alloc(&self, device: u32, bytes: usize, kind: MemoryKind) -> Result<u64> {
        each!(self, b => b.memory_alloc(device, bytes, kind))
    }

    fn memory_free(&self, address: u64) -> Result<()> {
        each!(self, b => b.memory_free(address))
    }

    fn host_register(&self, device: u32, host: u64, bytes: usize) -> Result<u64> {
        each!(self, b => b.host_register(device, host, bytes))
    }

    fn host_unregister(&self, device_address: u64) -> Result<()> {
        each!(self, b => b.host_unregister(device_address))
    }

    fn vmem_create(&self, device: u32, bytes: usize) -> Result<u64> {
        each!(self, b => b.vmem_create(device, bytes))
    }

    fn vmem_release(&self, handle: u64) -> Result<()> {
        each!(self, b => b.vmem_release(handle))
    }

    fn vmem_reserve(&self, bytes: usize, alignment: usize, hint: u64) -> Result<u64> {
        each!(self, b => b.vmem_reserve(bytes, alignment, hint))
    }

    fn vmem_free(&self, address: u64) -> Result<()> {
        each!(self, b => b.vmem_free(address))
    }

    fn vmem_map(&self, address: u64, handle: u64) -> Result<()> {
        each!(self, b => b.vmem_map(address, handle))
    }

    fn vmem_unmap(&self, address: u64) -> Result<()> {
        each!(self, b => b.vmem_unmap(address))
    }

    fn vmem_set_access(&self, address: u64, device: u32, access: bool) -> Result<()> {
        each!(self, b => b.vmem_set_access(address, device, access))
    }

    fn builtin_kernel(&self, device: u32, kernel: BuiltinKernel) -> Result<u64> {
        each!(self, b => b.builtin_kernel(device, kernel))
    }

    fn module_load(&self, device: u32, code_object: &[u8]) -> Result<AnyModule> {
        match self {
            AnyBackend::Emu(b) => b.module_load(device, code_object).map(AnyModule::Kfd),
            AnyBackend::Kfd(b) => b.module_load(device, code_object).map(AnyModule::Kfd),
            #[cfg(feature = "rocr")]
            AnyBackend::Rocr(b) => b.module_load(device, code_object).map(AnyModule::Rocr),
        }
    }

    fn module_kernel(&self, module: &AnyModule, name: &str) -> Result<KernelSymbol> {
        each_m!(self, module, b, m => b.module_kernel(m, name), Err(Error::InvalidHandle))
    }

    fn module_variable(&self, module: &AnyModule, name: &str) -> Result<VariableSymbol> {
        each_m!(self, module, b, m => b.module_variable(m, name), Err(Error::InvalidHandle))
    }

    fn module_image(&self, module: &AnyModule) -> Option<(u64, u64)> {
        each_m!(self, module, b, m => b.module_image(m), None)
    }

    fn module_unload(&self, module: AnyModule) -> Result<()> {
        each_m!(self, module, b, m => b.module_unload(m), Err(Error::InvalidHandle))
    }

    fn reserve_scratch(&self, device: u32, bytes_per_work_item: u32) -> Result<()> {
        each!(self, b => b.reserve_scratch(device, bytes_per_work_item))
    }

    fn host_call(&self, start: SignalHandle, done: SignalHandle, f: HostFn) -> Result<()> {
        each!(self, b => b.host_call(start, done, f))
    }

    fn timestamp(&self) -> u64 {
        each!(self, b => b.timestamp())
    }
}
