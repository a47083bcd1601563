//! The idiomatic Rust API over the core: [`Device`], [`Stream`], [`Event`], [`Graph`],
//! [`GraphExec`], device and host buffers, and typed kernels.
//!
//! # Ownership (RAII)
//!
//! A [`Device`] owns a runtime over one backend ([`crate::select::AnyBackend`]). Everything
//! created on it borrows it (`Stream<'d>` …), so nothing outlives the runtime. Owning handles are
//! not `Clone`: each has exactly one owner that destroys it once.
//!
//! `Drop` never panics and never blocks: destroying a stream, an event, a graph or an executable
//! returns at once in core (pending work still completes), and freeing memory or unloading a code
//! object is deferred to the next [`Device::synchronize`] (or the device's own drop), when the
//! device can no longer be using it. An error from a `Drop` is *sticky*: the first one is kept and
//! read with [`Device::sticky_error`] / [`Device::take_sticky_error`].

mod buffer;
mod graph;
mod kernel;
mod stream;

pub use buffer::{DeviceBuffer, HostBuffer, Pod};
pub use graph::{Graph, GraphExec};
pub use kernel::{Dim3, Kernel, KernelArgs, Module};
pub use stream::{Event, Stream, StreamOptions};

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aqueduct::{CaptureMode, DeviceInfo, Error, Runtime, Timeout};

use crate::select::{AnyBackend, BackendKind, OpenError, OpenOptions, Unavailable};
use crate::threads::{on_thread_exit, StdThreadKeys, ThreadExit};

/// The capacities of a device's runtime: HIP scale (4096 streams, 16384 events, 256 threads,
/// 256 graphs of up to 16384 nodes; [`aqueduct::config::HipScale`]).
pub type DeviceConfig = aqueduct::config::HipScale;
/// Stream slots of a device's runtime.
pub const MAX_STREAMS: usize = 4352;
/// Event slots.
pub const MAX_EVENTS: usize = 16384;
/// Host threads that may use per-thread streams or capture modes at once.
pub const MAX_THREADS: usize = 256;
/// Nodes per graph.
pub const MAX_GRAPH_NODES: usize = <DeviceConfig as aqueduct::Config>::GRAPH_NODES;

/// The runtime type behind a [`Device`].
pub type DeviceRuntime = Runtime<AnyBackend, StdThreadKeys, DeviceConfig>;

/// A result with core's error.
pub type Result<T> = std::result::Result<T, Error>;

/// What the device frees once it is idle.
enum Deferred {
    Memory(u64),
    Module(aqueduct::ModuleHandle),
}

pub(crate) struct Shared {
    pub(crate) rt: Box<DeviceRuntime>,
    sticky: AtomicI32,
    deferred: Mutex<Vec<Deferred>>,
    /// Host functions enqueued through the Rust API, kept alive with the device (a captured
    /// host node may run again at every graph launch). Boxed: queues hold their addresses.
    #[allow(clippy::vec_box)]
    pub(crate) host_fns: Mutex<Vec<Box<stream::HostClosure>>>,
}

impl ThreadExit for Shared {
    fn thread_exit(&self) {
        self.rt.thread_exit();
    }
}

/// One GPU (real, through ROCr, or emulated) with its own runtime.
pub struct Device {
    shared: Arc<Shared>,
    kind: BackendKind,
    unavailable: Vec<Unavailable>,
    index: u32,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device").field("backend", &self.kind).field("index", &self.index).finish()
    }
}

/// Builds a runtime on a thread with a large stack: `Runtime::new` is a `const fn` returning
/// the whole table (megabytes with 1024-node graphs), which may pass through the stack first.
fn boxed_runtime(backend: AnyBackend) -> std::result::Result<Box<DeviceRuntime>, String> {
    std::thread::Builder::new()
        .name("aqueduct-init".into())
        .stack_size(64 << 20)
        .spawn(move || Box::new(Runtime::new(backend, StdThreadKeys)))
        .map_err(|e| format!("cannot start the init thread: {e}"))?
        .join()
        .map_err(|_| "runtime construction failed".to_string())
}

impl Device {
    /// Opens device 0 of the default backend (`auto`: real KFD, then ROCr, else the emulator).
    pub fn open_default() -> std::result::Result<Device, OpenError> {
        Device::open(&OpenOptions::default())
    }

    /// Opens device 0 of the backend `opts` selects.
    pub fn open(opts: &OpenOptions) -> std::result::Result<Device, OpenError> {
        Device::open_index(opts, 0)
    }

    /// Opens device `index` of the backend `opts` selects.
    pub fn open_index(opts: &OpenOptions, index: u32) -> std::result::Result<Device, OpenError> {
        let (backend, unavailable) = AnyBackend::open(opts)?;
        let kind = backend.kind();
        let count = aqueduct::Backend::device_count(&backend);
        if index >= count {
            let mut u = unavailable;
            u.push(Unavailable { kind, reason: format!("device {index} asked for, {count} present") });
            return Err(OpenError(u));
        }
        let rt = boxed_runtime(backend).map_err(|reason| OpenError(vec![Unavailable { kind, reason }]))?;
        if let Some(n) = opts.max_hw_queues {
            for d in 0..count {
                let _ = rt.set_max_hw_queues(d, n);
            }
        }
        let shared = Arc::new(Shared {
            rt,
            sticky: AtomicI32::new(0),
            deferred: Mutex::new(Vec::new()),
            host_fns: Mutex::new(Vec::new()),
        });
        Ok(Device { shared, kind, unavailable, index })
    }

    /// Which backend drives the device.
    pub fn backend_kind(&self) -> BackendKind {
        self.kind
    }

    /// The backends tried before this one, and why they were not used.
    pub fn unavailable(&self) -> &[Unavailable] {
        &self.unavailable
    }

    /// The device index within its backend.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The runtime (core's HIP-level API), for what this wrapper does not cover.
    pub fn runtime(&self) -> &DeviceRuntime {
        &self.shared.rt
    }

    /// The backend.
    pub fn backend(&self) -> &AnyBackend {
        self.shared.rt.backend()
    }

    /// Facts about the device.
    pub fn info(&self) -> Result<DeviceInfo> {
        self.shared.rt.device_info(self.index)
    }

    /// Makes this device current on the calling thread (core keeps the current device per
    /// thread); called by every operation that creates something.
    pub(crate) fn enter(&self) -> Result<()> {
        if self.index != 0 {
            self.touch_thread();
            self.shared.rt.set_device(self.index)?;
        }
        Ok(())
    }

    /// Registers the calling thread for clean-up at its exit.
    pub(crate) fn touch_thread(&self) {
        let hook: Arc<dyn ThreadExit> = self.shared.clone();
        on_thread_exit(&hook);
    }

    /// `hipDeviceSynchronize`: waits for all work of the device, then frees what the wrappers
    /// released meanwhile.
    pub fn synchronize(&self) -> Result<()> {
        self.enter()?;
        self.shared.rt.device_synchronize()?;
        self.reclaim();
        Ok(())
    }

    /// [`Device::synchronize`] with a bound (`NotReady` when it runs out).
    pub fn synchronize_timeout(&self, timeout: Duration) -> Result<()> {
        self.enter()?;
        self.shared.rt.device_synchronize_timeout(Timeout(timeout.as_nanos().min(u64::MAX as u128) as u64))?;
        self.reclaim();
        Ok(())
    }

    /// `hipThreadExchangeStreamCaptureMode` for the calling thread; returns the previous mode.
    pub fn exchange_capture_mode(&self, mode: CaptureMode) -> Result<CaptureMode> {
        self.touch_thread();
        self.shared.rt.thread_exchange_capture_mode(mode as u32)
    }

    /// The first error a `Drop` of this device's objects met, if any (kept until taken).
    pub fn sticky_error(&self) -> Option<Error> {
        // Ordering: Acquire pairs with the Release in `record_drop_error`.
        Error::from_code(self.shared.sticky.load(Ordering::Acquire))
    }

    /// Returns and clears the sticky error.
    pub fn take_sticky_error(&self) -> Option<Error> {
        // Ordering: AcqRel; take and clear in one step.
        Error::from_code(self.shared.sticky.swap(0, Ordering::AcqRel))
    }

    /// Keeps the first error from a `Drop`; never blocks.
    pub(crate) fn record_drop_error(&self, e: Error) {
        // Ordering: Release publishes the code to `sticky_error`; the first error wins.
        let _ = self.shared.sticky.compare_exchange(0, e.code(), Ordering::Release, Ordering::Relaxed);
    }

    fn defer(&self, d: Deferred) {
        match self.shared.deferred.lock() {
            Ok(mut v) => v.push(d),
            Err(p) => p.into_inner().push(d),
        }
    }

    /// Frees deferred memory and code objects (the device is idle).
    fn reclaim(&self) {
        let items = match self.shared.deferred.lock() {
            Ok(mut v) => std::mem::take(&mut *v),
            Err(p) => std::mem::take(&mut *p.into_inner()),
        };
        for d in items {
            let r = match d {
                Deferred::Memory(a) => self.shared.rt.free(a),
                Deferred::Module(m) => self.shared.rt.module_unload(m),
            };
            if let Err(e) = r {
                self.record_drop_error(e);
            }
        }
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        // No waiting: if the device is idle now, deferred frees run; either way the backend's
        // own teardown (queues, memory, code objects) follows when the runtime drops.
        if self.shared.rt.device_synchronize_timeout(Timeout::ZERO).is_ok() {
            self.reclaim();
        }
    }
}

#[cfg(test)]
mod tests;
