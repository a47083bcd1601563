//! Stream operations: kernels, copies, fills, host functions, memory values.

use super::submit::{Batch, Command};
use super::{KernelLaunch, Runtime, WaitValueOp};
use crate::aql::Condition;
use crate::backend::{Backend, BuiltinArgs, CopyArgs, FillArgs, HostFn, MemoryKind, WriteValueArgs};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::slots::stream::StreamInner;
use crate::stream::StreamHandle;
use crate::thread::ThreadKeys;

impl<B: Backend, K: ThreadKeys, C: Config> Runtime<B, K, C> {
    // ----- stream operations ---------------------------------------------------------------

    /// Launches a kernel on `s` (`hipModuleLaunchKernel`); its arguments are copied now.
    /// A zero size or a work-group over 1024 work-items is `InvalidConfiguration`.
    pub fn launch_kernel(&self, s: StreamHandle, launch: &KernelLaunch<'_>) -> Result<()> {
        self.submit_launch(s, launch)
    }

    pub(super) fn builtin<A: BuiltinArgs>(&self, s: StreamHandle, args: A) -> Result<()> {
        let (args, len) = args.to_bytes();
        // `A::KERNEL` is a constant here: the backend's request names that built-in alone.
        let kernel = |device: u32| self.backend.builtin_kernel(device, A::KERNEL);
        self.submit(s, Command::Builtin { kernel: &kernel, args, len })
    }

    /// `hipMemcpyAsync`: copies `bytes` from `src` to `dst` in stream order. Zero bytes is a
    /// no-op; a null address is `InvalidValue`.
    pub fn memcpy_async(&self, s: StreamHandle, dst: u64, src: u64, bytes: u64) -> Result<()> {
        if dst == 0 || src == 0 {
            return Err(Error::InvalidValue);
        }
        if bytes == 0 {
            self.check_work_stream(s)?;
            return Ok(());
        }
        self.builtin(s, CopyArgs { dst, src, bytes })
    }

    /// `hipMemsetAsync` / `hipMemsetD16Async` / `hipMemsetD32Async`: fills `count` elements of
    /// `element_bytes` (1, 2 or 4) with `value`.
    pub fn memset_async(&self, s: StreamHandle, dst: u64, value: u32, element_bytes: u32, count: u64) -> Result<()> {
        if dst == 0 || !matches!(element_bytes, 1 | 2 | 4) || dst % u64::from(element_bytes) != 0 {
            return Err(Error::InvalidValue);
        }
        if count == 0 {
            self.check_work_stream(s)?;
            return Ok(());
        }
        self.builtin(s, FillArgs { dst, count, value, element_bytes })
    }

    /// `hipMemcpy`: a copy on the null stream, then waits for the null stream.
    pub fn memcpy(&self, dst: u64, src: u64, bytes: u64) -> Result<()> {
        self.check_sync_copy()?;
        self.memcpy_async(StreamHandle::NULL, dst, src, bytes)?;
        self.stream_synchronize(StreamHandle::LEGACY)
    }

    /// `hipMemset`: a byte fill on the null stream, then waits for the null stream.
    pub fn memset(&self, dst: u64, value: u8, bytes: u64) -> Result<()> {
        self.check_sync_copy()?;
        self.memset_async(StreamHandle::NULL, dst, u32::from(value), 1, bytes)?;
        self.stream_synchronize(StreamHandle::LEGACY)
    }

    /// Synchronous copies and fills while any capture is active: `StreamCaptureImplicit`, and
    /// every capture is invalidated (HIP differs from CUDA here). Front ends call it before a
    /// synchronous copy or fill on a stream other than the null stream (the per-thread default
    /// stream of HIP's `_spt` functions).
    pub fn check_sync_copy(&self) -> Result<()> {
        #[cfg(feature = "capture")]
        if self.any_capture() {
            let mut st = self.lock();
            if Self::any_active_capture(&st) {
                Self::invalidate_all_captures(&mut st);
                return Err(Error::StreamCaptureImplicit);
            }
        }
        Ok(())
    }

    /// The thread-mode rule for allocation APIs (`CHECK_STREAM_CAPTURE_SUPPORTED`).
    pub(super) fn check_alloc_call(&self) -> Result<()> {
        #[cfg(feature = "capture")]
        if self.any_capture() {
            let mut st = self.lock();
            return self.check_unsafe_call(&mut st, Error::StreamCaptureUnsupported);
        }
        Ok(())
    }

    /// `hipMalloc` on the current device.
    pub fn malloc(&self, bytes: usize) -> Result<u64> {
        self.check_alloc_call()?;
        let device = self.device()?;
        self.backend.memory_alloc(device, bytes, MemoryKind::Device)
    }

    /// `hipHostMalloc`.
    pub fn host_malloc(&self, bytes: usize) -> Result<u64> {
        self.check_alloc_call()?;
        let device = self.device()?;
        self.backend.memory_alloc(device, bytes, MemoryKind::Host)
    }

    /// Pinned host memory the runtime keeps for itself (the HIP layer's hostcall buffer): no
    /// user allocation, so a stream capture in progress is not affected.
    pub fn runtime_host_malloc(&self, bytes: usize) -> Result<u64> {
        let device = self.device()?;
        self.backend.memory_alloc(device, bytes, MemoryKind::Host)
    }

    /// `hipFree`: freeing 0 is a no-op.
    pub fn free(&self, address: u64) -> Result<()> {
        self.check_alloc_call()?;
        if address == 0 {
            return Ok(());
        }
        self.backend.memory_free(address)
    }

    /// `hipLaunchHostFunc` / `hipStreamAddCallback`: runs `f` on the host after all earlier
    /// work of the stream and before any later work.
    pub fn launch_host_func(&self, s: StreamHandle, f: HostFn) -> Result<()> {
        let step = |i: usize, inner: &mut StreamInner, batch: &mut Batch<'_>| self.submit_host_fn(i, inner, batch, f);
        self.submit(
            s,
            Command::HostFn {
                #[cfg(feature = "capture")]
                f,
                step: &step,
            },
        )
    }

    /// Enqueues an empty command (a point the stream passes once everything before it is done).
    pub fn marker(&self, s: StreamHandle) -> Result<()> {
        self.submit(s, Command::Marker)
    }

    pub(super) fn check_value_args(address: u64, flags: u32, align: u64) -> Result<()> {
        if address == 0 || flags != 0 || address % align != 0 {
            return Err(Error::InvalidValue);
        }
        Ok(())
    }

    /// `hipStreamWriteValue32`: stores `value` at `address` in stream order (flags must be 0).
    pub fn write_value32(&self, s: StreamHandle, address: u64, value: u32, flags: u32) -> Result<()> {
        Self::check_value_args(address, flags, 4)?;
        self.builtin(s, WriteValueArgs { dst: address, value: u64::from(value), width: 4, reserved: 0 })
    }

    /// `hipStreamWriteValue64`.
    pub fn write_value64(&self, s: StreamHandle, address: u64, value: u64, flags: u32) -> Result<()> {
        Self::check_value_args(address, flags, 8)?;
        self.builtin(s, WriteValueArgs { dst: address, value, width: 8, reserved: 0 })
    }

    /// `bytes` is the width of the value waited on: 4 or 8.
    pub(super) fn wait_value(
        &self,
        s: StreamHandle,
        address: u64,
        value: u64,
        op: u32,
        mask: u64,
        bytes: u64,
    ) -> Result<()> {
        let op = WaitValueOp::from_raw(op)?;
        Self::check_value_args(address, 0, bytes)?;
        let full = if bytes == 4 { u64::from(u32::MAX) } else { u64::MAX };
        let mask = mask & full;
        let value = value & full;
        let (value, mask, cond) = match op {
            WaitValueOp::Gte => (value, mask, Condition::Gte),
            WaitValueOp::Eq => (value, mask, Condition::Eq),
            WaitValueOp::And => (0, value & mask, Condition::Ne),
            WaitValueOp::Nor => {
                let m = mask & !value & full;
                (m, m, Condition::Ne)
            }
        };
        // The packet compares the 64-bit word at its address: a 32-bit value in the upper half
        // of an 8-byte aligned word is compared there, its mask and value shifted up (a Gte
        // there compares as signed 32-bit when the mask or the value has bit 31 set).
        let (address, value, mask) = if bytes == 4 && address % 8 == 4 {
            (address - 4, value << 32, mask << 32)
        } else {
            (address, value, mask)
        };
        self.submit(s, Command::WaitValue { address, value: value as i64, mask: mask as i64, cond })
    }

    /// `hipStreamWaitValue32`: later work of the stream waits until the condition holds for the
    /// 32-bit value at `address` (`op`: 0 Gte, 1 Eq, 2 And, 3 Nor).
    pub fn wait_value32(&self, s: StreamHandle, address: u64, value: u32, op: u32, mask: u32) -> Result<()> {
        self.wait_value(s, address, u64::from(value), op, u64::from(mask), 4)
    }

    /// `hipStreamWaitValue64`.
    pub fn wait_value64(&self, s: StreamHandle, address: u64, value: u64, op: u32, mask: u64) -> Result<()> {
        self.wait_value(s, address, value, op, mask, 8)
    }
}
