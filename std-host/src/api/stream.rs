//! [`Stream`] and [`Event`]: RAII over core's stream and event handles.

use std::ffi::c_void;
use std::sync::Mutex;
use std::time::Duration;

use aqueduct::{CaptureMode, CaptureStatus, Error, EventHandle, HostFn, KernelLaunch, StreamHandle, Timeout};

use super::graph::Graph;
use super::kernel::{Dim3, Kernel, KernelArgs};
use super::{Device, Result};

fn timeout(d: Duration) -> Timeout {
    Timeout(d.as_nanos().min(u64::MAX as u128) as u64)
}

/// How to create a stream.
#[derive(Debug, Clone, Default)]
pub struct StreamOptions {
    /// HIP priority: -1 high, 0 normal, 1 low (clamped).
    pub priority: i32,
    /// `hipStreamNonBlocking`: no implicit synchronisation with the null stream.
    pub non_blocking: bool,
    /// A CU mask (`hipExtStreamCreateWithCUMask`); overrides the priority (Normal).
    pub cu_mask: Option<Vec<u32>>,
}

/// A stream. Created streams are destroyed on drop (without waiting: pending work completes);
/// the null and per-thread streams are borrowed and left alone.
pub struct Stream<'d> {
    dev: &'d Device,
    handle: StreamHandle,
    owned: bool,
}

impl std::fmt::Debug for Stream<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream").field("handle", &format_args!("{:#x}", self.handle.0)).finish()
    }
}

pub(crate) type HostClosure = Mutex<Box<dyn FnMut() + Send>>;

unsafe extern "C" fn host_trampoline(data: *mut c_void) {
    // SAFETY: `data` is a `HostClosure` kept alive in the device's `host_fns` until the device
    // (and so every queue that could call this) is gone.
    let f = unsafe { &*(data as *const HostClosure) };
    // A panic must not unwind into the backend's service thread.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if let Ok(mut f) = f.lock() {
            f();
        }
    }));
}

impl Device {
    /// Creates a stream.
    pub fn stream(&self) -> Result<Stream<'_>> {
        self.stream_with(&StreamOptions::default())
    }

    /// Creates a stream with a priority (-1 high … 1 low).
    pub fn stream_with_priority(&self, priority: i32) -> Result<Stream<'_>> {
        self.stream_with(&StreamOptions { priority, ..StreamOptions::default() })
    }

    /// Creates a stream with options.
    pub fn stream_with(&self, o: &StreamOptions) -> Result<Stream<'_>> {
        self.enter()?;
        let rt = &self.shared.rt;
        let handle = match &o.cu_mask {
            Some(mask) => rt.stream_create_with_cu_mask(mask)?,
            None => rt.stream_create_with_priority(u32::from(o.non_blocking), o.priority)?,
        };
        Ok(Stream { dev: self, handle, owned: true })
    }

    /// The legacy null stream (borrowed; implicit synchronisation with blocking streams).
    pub fn null_stream(&self) -> Stream<'_> {
        Stream { dev: self, handle: StreamHandle::NULL, owned: false }
    }

    /// The calling thread's per-thread default stream (`hipStreamPerThread`), created on first
    /// use and given back when the thread ends.
    pub fn per_thread_stream(&self) -> Stream<'_> {
        self.touch_thread();
        Stream { dev: self, handle: StreamHandle::PER_THREAD, owned: false }
    }

    /// Creates an event (`timing`: whether elapsed times can be read).
    pub fn event(&self, timing: bool) -> Result<Event<'_>> {
        self.enter()?;
        let flags = if timing { 0 } else { aqueduct::EventFlags::DISABLE_TIMING.bits() };
        let handle = self.shared.rt.event_create(flags)?;
        Ok(Event { dev: self, handle })
    }
}

impl<'d> Stream<'d> {
    /// The device.
    pub fn device(&self) -> &'d Device {
        self.dev
    }

    /// Core's handle.
    pub fn handle(&self) -> StreamHandle {
        self.handle
    }

    /// `hipStreamGetId`.
    pub fn id(&self) -> Result<u64> {
        self.dev.shared.rt.stream_id(self.handle)
    }

    /// `hipStreamGetPriority`.
    pub fn priority(&self) -> Result<i32> {
        self.dev.shared.rt.stream_priority(self.handle)
    }

    /// The hardware queue behind the stream (KFD queue id or ROCr queue id), once bound.
    pub fn queue_id(&self) -> Option<u64> {
        let b = self.dev.backend();
        self.dev.shared.rt.with_stream_queue(self.handle, |q| b.queue_id(q)).ok().flatten()
    }

    /// Launches a typed kernel.
    pub fn launch<A: KernelArgs>(&self, kernel: &Kernel<A>, grid: Dim3, block: Dim3, args: &A) -> Result<()> {
        kernel.with_launch(grid, block, args.as_bytes(), |l| self.launch_raw(l))
    }

    /// Launches a kernel described in core's terms.
    pub fn launch_raw(&self, launch: &KernelLaunch<'_>) -> Result<()> {
        self.dev.shared.rt.launch_kernel(self.handle, launch)
    }

    /// Copies `bytes` from device address `src` to `dst` (device or host memory of the device).
    pub fn copy_raw(&self, dst: u64, src: u64, bytes: u64) -> Result<()> {
        self.dev.shared.rt.memcpy_async(self.handle, dst, src, bytes)
    }

    /// Fills `count` elements of 1, 2 or 4 bytes at `dst` with `value`.
    pub fn fill_raw(&self, dst: u64, value: u32, element_bytes: u32, count: u64) -> Result<()> {
        self.dev.shared.rt.memset_async(self.handle, dst, value, element_bytes, count)
    }

    /// Runs `f` on the host after everything enqueued so far and before anything later
    /// (`hipLaunchHostFunc`). Inside a capture it becomes a host node that runs at every launch.
    pub fn host_fn(&self, f: impl FnMut() + Send + 'static) -> Result<()> {
        let boxed: Box<HostClosure> = Box::new(Mutex::new(Box::new(f)));
        let data = &*boxed as *const HostClosure as *mut c_void;
        match self.dev.shared.host_fns.lock() {
            Ok(mut v) => v.push(boxed),
            Err(p) => p.into_inner().push(boxed),
        }
        self.dev.shared.rt.launch_host_func(self.handle, HostFn::Plain { func: host_trampoline, data })
    }

    /// Records `event` here (`hipEventRecord`).
    pub fn record(&self, event: &Event<'_>) -> Result<()> {
        self.dev.shared.rt.event_record(event.handle, self.handle, 0)
    }

    /// Makes later work wait for `event`'s last record (`hipStreamWaitEvent`).
    pub fn wait_event(&self, event: &Event<'_>) -> Result<()> {
        self.dev.shared.rt.stream_wait_event(self.handle, event.handle, 0)
    }

    /// Makes later work of `self` wait for everything enqueued on `other` so far (an event
    /// recorded on `other` and waited on here).
    pub fn wait_for(&self, other: &Stream<'_>) -> Result<()> {
        let e = self.dev.event(false)?;
        other.record(&e)?;
        self.wait_event(&e)
    }

    /// Fork/join: each branch waits for `self`'s work so far, `f` enqueues on the branches,
    /// then `self` waits for every branch. Inside a capture this builds a fork/join graph.
    pub fn fork_join<R>(&self, branches: &[&Stream<'_>], f: impl FnOnce(&[&Stream<'_>]) -> Result<R>) -> Result<R> {
        for b in branches {
            b.wait_for(self)?;
        }
        let r = f(branches)?;
        for b in branches {
            self.wait_for(b)?;
        }
        Ok(r)
    }

    /// Whether all work is done (`hipStreamQuery`).
    pub fn is_idle(&self) -> Result<bool> {
        match self.dev.shared.rt.stream_query(self.handle) {
            Ok(()) => Ok(true),
            Err(Error::NotReady) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Waits for all work enqueued so far (`hipStreamSynchronize`; blocks).
    pub fn synchronize(&self) -> Result<()> {
        self.dev.shared.rt.stream_synchronize(self.handle)
    }

    /// [`Stream::synchronize`] with a bound (`NotReady` when it runs out).
    pub fn synchronize_timeout(&self, d: Duration) -> Result<()> {
        self.dev.shared.rt.stream_synchronize_timeout(self.handle, timeout(d))
    }

    /// Begins capturing into a graph.
    pub fn begin_capture(&self, mode: CaptureMode) -> Result<()> {
        self.dev.touch_thread();
        self.dev.shared.rt.stream_begin_capture(self.handle, mode as u32)
    }

    /// Ends the capture and returns the graph.
    pub fn end_capture(&self) -> Result<Graph<'d>> {
        let g = self.dev.shared.rt.stream_end_capture(self.handle)?;
        Ok(Graph::from_handle(self.dev, g))
    }

    /// Captures what `f` enqueues (on this stream and streams it forks to) into a graph. If `f`
    /// fails the capture is ended and its graph dropped.
    pub fn capture(&self, mode: CaptureMode, f: impl FnOnce(&Self) -> Result<()>) -> Result<Graph<'d>> {
        self.begin_capture(mode)?;
        match f(self) {
            Ok(()) => self.end_capture(),
            Err(e) => {
                if let Ok(g) = self.end_capture() {
                    drop(g);
                }
                Err(e)
            }
        }
    }

    /// `hipStreamIsCapturing`.
    pub fn capture_status(&self) -> Result<CaptureStatus> {
        self.dev.shared.rt.stream_is_capturing(self.handle)
    }
}

impl Drop for Stream<'_> {
    fn drop(&mut self) {
        if self.owned {
            if let Err(e) = self.dev.shared.rt.stream_destroy(self.handle) {
                self.dev.record_drop_error(e);
            }
        }
    }
}

/// An event. Destroyed on drop without waiting (a pending record still completes).
pub struct Event<'d> {
    dev: &'d Device,
    handle: EventHandle,
}

impl std::fmt::Debug for Event<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event").field("handle", &format_args!("{:#x}", self.handle.0)).finish()
    }
}

impl Event<'_> {
    /// Core's handle.
    pub fn handle(&self) -> EventHandle {
        self.handle
    }

    /// Whether the last record completed (or the event was never recorded).
    pub fn is_complete(&self) -> Result<bool> {
        match self.dev.shared.rt.event_query(self.handle) {
            Ok(()) => Ok(true),
            Err(Error::NotReady) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Waits for the last record (`hipEventSynchronize`; blocks).
    pub fn synchronize(&self) -> Result<()> {
        self.dev.shared.rt.event_synchronize(self.handle)
    }

    /// [`Event::synchronize`] with a bound.
    pub fn synchronize_timeout(&self, d: Duration) -> Result<()> {
        self.dev.shared.rt.event_synchronize_timeout(self.handle, timeout(d))
    }

    /// Device time from `start` to this event (`hipEventElapsedTime`).
    pub fn elapsed_since(&self, start: &Event<'_>) -> Result<Duration> {
        let ms = self.dev.shared.rt.event_elapsed_time(start.handle, self.handle)?;
        Ok(Duration::from_secs_f64(f64::from(ms.max(0.0)) / 1000.0))
    }
}

impl Drop for Event<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.dev.shared.rt.event_destroy(self.handle) {
            self.dev.record_drop_error(e);
        }
    }
}
