//! Device and host buffers. Freed when the device is next idle (never in `Drop` itself, which
//! must not wait for work that may still use the memory).

use std::marker::PhantomData;

use aqueduct::Error;

use super::stream::Stream;
use super::{Deferred, Device, Result};

/// Plain old data: any bit pattern is a valid value and there are no padding bytes.
///
/// # Safety
/// The type must have no padding, no invalid bit patterns and no pointers that must stay valid.
pub unsafe trait Pod: Copy + Send + Sync + 'static {}

macro_rules! pod {
    ($($t:ty),*) => { $(
        // SAFETY: a primitive number: no padding, every bit pattern valid.
        unsafe impl Pod for $t {}
    )* };
}
pod!(u8, u16, u32, u64, i8, i16, i32, i64, f32, f64);

// SAFETY: an array of Pod has no padding between elements and no invalid values.
unsafe impl<T: Pod, const N: usize> Pod for [T; N] {}

fn bytes_of<T>(len: usize) -> Result<usize> {
    len.checked_mul(std::mem::size_of::<T>()).filter(|&b| b > 0).ok_or(Error::InvalidValue)
}

/// `len` elements of `T` in device memory.
pub struct DeviceBuffer<'d, T: Pod> {
    dev: &'d Device,
    address: u64,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: Pod> std::fmt::Debug for DeviceBuffer<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("address", &format_args!("{:#x}", self.address))
            .field("len", &self.len)
            .finish()
    }
}

impl Device {
    /// Allocates `len` elements of device memory (`hipMalloc`).
    pub fn alloc<T: Pod>(&self, len: usize) -> Result<DeviceBuffer<'_, T>> {
        self.enter()?;
        let address = self.shared.rt.malloc(bytes_of::<T>(len)?)?;
        Ok(DeviceBuffer { dev: self, address, len, _t: PhantomData })
    }

    /// Allocates `len` elements of host memory the device reaches (`hipHostMalloc`), zeroed.
    pub fn alloc_host<T: Pod>(&self, len: usize) -> Result<HostBuffer<'_, T>> {
        self.enter()?;
        let bytes = bytes_of::<T>(len)?;
        let address = self.shared.rt.host_malloc(bytes)?;
        // SAFETY: fresh, CPU-accessible host memory of `bytes` bytes that no work uses yet.
        unsafe { std::ptr::write_bytes(address as usize as *mut u8, 0, bytes) };
        Ok(HostBuffer { dev: self, address, len, _t: PhantomData })
    }

    /// Allocates host memory holding a copy of `data`.
    pub fn host_from<T: Pod>(&self, data: &[T]) -> Result<HostBuffer<'_, T>> {
        let b = self.alloc_host::<T>(data.len())?;
        b.write(data);
        Ok(b)
    }
}

impl<T: Pod> DeviceBuffer<'_, T> {
    /// The device address.
    pub fn address(&self) -> u64 {
        self.address
    }

    /// Elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no elements (never: allocations are at least one element).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes.
    pub fn bytes(&self) -> u64 {
        (self.len * std::mem::size_of::<T>()) as u64
    }

    /// Enqueues a copy of all of `src` (host or device memory of the same length) into this buffer.
    pub fn copy_from(&self, stream: &Stream<'_>, src: &impl Buffer<T>) -> Result<()> {
        if src.len() != self.len {
            return Err(Error::InvalidValue);
        }
        stream.copy_raw(self.address, src.address(), self.bytes())
    }

    /// Enqueues a fill of every element with `value` (`T` of 1, 2 or 4 bytes).
    pub fn fill(&self, stream: &Stream<'_>, value: T) -> Result<()> {
        let size = std::mem::size_of::<T>();
        let mut raw = [0u8; 4];
        if size > 4 {
            return Err(Error::InvalidValue);
        }
        // SAFETY: `T: Pod` has no padding; `size <= 4` bytes are read from `value`.
        unsafe { std::ptr::copy_nonoverlapping(&value as *const T as *const u8, raw.as_mut_ptr(), size) };
        stream.fill_raw(self.address, u32::from_le_bytes(raw), size as u32, self.len as u64)
    }
}

impl<T: Pod> Drop for DeviceBuffer<'_, T> {
    fn drop(&mut self) {
        self.dev.defer(Deferred::Memory(self.address));
    }
}

/// `len` elements of `T` in host memory the device reaches.
pub struct HostBuffer<'d, T: Pod> {
    dev: &'d Device,
    address: u64,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: Pod> std::fmt::Debug for HostBuffer<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostBuffer")
            .field("address", &format_args!("{:#x}", self.address))
            .field("len", &self.len)
            .finish()
    }
}

impl<T: Pod> HostBuffer<'_, T> {
    /// The address (host and device).
    pub fn address(&self) -> u64 {
        self.address
    }

    /// Elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no elements (never).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies the contents out. Synchronise first with the work that writes it: values read
    /// while the device writes are unspecified (the reads are volatile, never torn into UB).
    pub fn to_vec(&self) -> Vec<T> {
        let p = self.address as usize as *const T;
        // SAFETY: `len` initialised (zeroed at allocation) Pod elements at an aligned host
        // address of this live allocation; volatile reads tolerate concurrent device writes.
        (0..self.len).map(|i| unsafe { std::ptr::read_volatile(p.add(i)) }).collect()
    }

    /// One element (`None` past the end).
    pub fn get(&self, i: usize) -> Option<T> {
        // SAFETY: as in `to_vec`, for one in-bounds element.
        (i < self.len).then(|| unsafe { std::ptr::read_volatile((self.address as usize as *const T).add(i)) })
    }

    /// Overwrites the first `data.len()` elements (at most `len`). Do not race with device work.
    pub fn write(&self, data: &[T]) {
        let p = self.address as usize as *mut T;
        for (i, v) in data.iter().take(self.len).enumerate() {
            // SAFETY: in bounds of this live, aligned host allocation; volatile because the
            // device may read it.
            unsafe { std::ptr::write_volatile(p.add(i), *v) };
        }
    }
}

impl<T: Pod> Drop for HostBuffer<'_, T> {
    fn drop(&mut self) {
        self.dev.defer(Deferred::Memory(self.address));
    }
}

/// Memory a copy can read.
pub trait Buffer<T: Pod> {
    /// Its device address.
    fn address(&self) -> u64;
    /// Its length in elements.
    fn len(&self) -> usize;
}

impl<T: Pod> Buffer<T> for DeviceBuffer<'_, T> {
    fn address(&self) -> u64 {
        self.address
    }
    fn len(&self) -> usize {
        self.len
    }
}

impl<T: Pod> Buffer<T> for HostBuffer<'_, T> {
    fn address(&self) -> u64 {
        self.address
    }
    fn len(&self) -> usize {
        self.len
    }
}

impl<T: Pod> HostBuffer<'_, T> {
    /// Enqueues a copy of all of `src` (same length) into this buffer.
    pub fn copy_from(&self, stream: &Stream<'_>, src: &impl Buffer<T>) -> Result<()> {
        if src.len() != self.len {
            return Err(Error::InvalidValue);
        }
        stream.copy_raw(self.address, src.address(), (self.len * std::mem::size_of::<T>()) as u64)
    }
}
