//! [`HostArray`]: a growable array in backend host memory, so graphs and executables hold as
//! many nodes and packets as they need without tables sized for the largest graph.
//!
//! The memory comes from [`Backend::memory_alloc`] with [`MemoryKind::Host`], which the backend
//! contract makes host-accessible and valid until [`Backend::memory_free`]. The array owns its
//! allocation (nobody else knows its address until the runtime puts it into a packet for the
//! device to read), grows by doubling, and is freed explicitly with [`HostArray::free`] (a
//! `Drop` could not reach the backend; a forgotten array only leaks backend memory).

#![cfg_attr(not(feature = "capture"), allow(dead_code))]

use core::marker::PhantomData;
use core::mem::{align_of, size_of};

use crate::backend::{Backend, MemoryKind};
use crate::error::{Error, Result};

/// A growable array of `T` in backend host memory.
#[derive(Debug)]
pub(crate) struct HostArray<T: Copy> {
    block: Block,
    _t: PhantomData<T>,
}

/// The allocation behind a [`HostArray`], without its element type: growing is written once for
/// every `T` ([`Block::grow`]), not once per element type (`docs/architecture.md`, "Footprint").
#[derive(Debug)]
struct Block {
    /// The allocation as the backend returned it (0: none).
    raw: u64,
    /// The first element: `raw` aligned up for the element type.
    addr: u64,
    /// Elements the allocation holds.
    cap: usize,
    /// Elements written.
    len: usize,
}

impl Block {
    /// Makes room for `additional` more elements of `size` bytes aligned to `align` (at most
    /// `max` in all), doubling, and moves the elements written so far.
    #[inline(never)]
    fn grow<B: Backend>(
        &mut self,
        b: &B,
        device: u32,
        additional: usize,
        max: usize,
        size: usize,
        align: usize,
    ) -> Result<()> {
        let need = self.len.checked_add(additional).ok_or(Error::OutOfMemory)?;
        if need > max {
            return Err(Error::OutOfMemory);
        }
        if need <= self.cap {
            return Ok(());
        }
        let cap = need.max(self.cap.saturating_mul(2)).max(8).min(max.max(need));
        let bytes = cap.checked_mul(size).and_then(|b| b.checked_add(align - 1)).ok_or(Error::OutOfMemory)?;
        let raw = b.memory_alloc(device, bytes.max(1), MemoryKind::Host)?;
        if raw == 0 {
            return Err(Error::OutOfMemory);
        }
        // `align` is a power of two (an `align_of`): a mask, not a 64-bit division (which would
        // pull a division routine into a 32-bit image).
        let mask = align as u64 - 1;
        let addr = raw.checked_add(mask).ok_or(Error::OutOfMemory)? & !mask;
        if self.len > 0 {
            let src = core::ptr::with_exposed_provenance::<u8>(self.addr as usize);
            let dst = core::ptr::with_exposed_provenance_mut::<u8>(addr as usize);
            // SAFETY: both are live host allocations of at least `len` elements of `size` bytes
            // (the old one initialised up to len), and distinct allocations do not overlap.
            unsafe { core::ptr::copy_nonoverlapping(src, dst, self.len * size) };
        }
        if self.raw != 0 {
            let _ = b.memory_free(self.raw);
        }
        self.raw = raw;
        self.addr = addr;
        self.cap = cap;
        Ok(())
    }
}

impl<T: Copy> HostArray<T> {
    /// An empty array without memory.
    pub(crate) const fn new() -> Self {
        HostArray { block: Block { raw: 0, addr: 0, cap: 0, len: 0 }, _t: PhantomData }
    }

    /// Number of elements.
    pub(crate) fn len(&self) -> usize {
        self.block.len
    }

    /// The device (and host) address of the elements (0 before the first allocation).
    pub(crate) fn address(&self) -> u64 {
        self.block.addr
    }

    /// The elements.
    pub(crate) fn as_slice(&self) -> &[T] {
        if self.block.len == 0 {
            return &[];
        }
        let p = core::ptr::with_exposed_provenance::<T>(self.block.addr as usize);
        // SAFETY: `addr` is a live host allocation of `cap >= len` elements owned by this array
        // (Backend contract for MemoryKind::Host), aligned for T (`addr` is `raw` aligned up, with
        // room for that in the allocation), and elements 0..len were written by `push`/`extend`;
        // `&self` keeps them unchanged.
        unsafe { core::slice::from_raw_parts(p, self.block.len) }
    }

    /// The elements, mutably.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [T] {
        if self.block.len == 0 {
            return &mut [];
        }
        let p = core::ptr::with_exposed_provenance_mut::<T>(self.block.addr as usize);
        // SAFETY: as in `as_slice`; `&mut self` makes the access exclusive.
        unsafe { core::slice::from_raw_parts_mut(p, self.block.len) }
    }

    /// Forgets the elements, keeping the memory.
    pub(crate) fn clear(&mut self) {
        self.block.len = 0;
    }

    /// Makes room for `additional` more elements (at most `max` in all), doubling.
    #[inline]
    pub(crate) fn reserve<B: Backend>(&mut self, b: &B, device: u32, additional: usize, max: usize) -> Result<()> {
        // On hosts the common case, room in the block, is answered inline without the call
        // (capture appends a node, its edges and its arguments: docs/architecture.md, "The
        // submit path, instruction by instruction"); `grow` makes the same two checks.
        #[cfg(target_has_atomic = "64")]
        if let Some(need) = self.block.len.checked_add(additional) {
            if need <= max && need <= self.block.cap {
                return Ok(());
            }
        }
        self.block.grow(b, device, additional, max, size_of::<T>(), align_of::<T>())
    }

    /// Appends `v` (growing within `max` elements); returns its index.
    pub(crate) fn push<B: Backend>(&mut self, b: &B, device: u32, v: T, max: usize) -> Result<usize> {
        self.reserve(b, device, 1, max)?;
        let at = self.block.len;
        let p = core::ptr::with_exposed_provenance_mut::<T>(self.block.addr as usize);
        // SAFETY: `at < cap` after `reserve`, inside the live, aligned allocation this array
        // owns exclusively.
        unsafe { p.add(at).write(v) };
        self.block.len += 1;
        Ok(at)
    }

    /// Appends `n` copies of `v`.
    pub(crate) fn extend<B: Backend>(&mut self, b: &B, device: u32, v: T, n: usize, max: usize) -> Result<()> {
        self.reserve(b, device, n, max)?;
        let p = core::ptr::with_exposed_provenance_mut::<T>(self.block.addr as usize);
        for k in 0..n {
            // SAFETY: `len + k < cap` after `reserve`, as in `push`.
            unsafe { p.add(self.block.len + k).write(v) };
        }
        self.block.len += n;
        Ok(())
    }

    /// Drops the last element.
    pub(crate) fn pop(&mut self) {
        self.block.len = self.block.len.saturating_sub(1);
    }

    /// Returns the memory to the backend.
    pub(crate) fn free<B: Backend>(&mut self, b: &B) {
        if self.block.raw != 0 {
            let _ = b.memory_free(self.block.raw);
        }
        *self = HostArray::new();
    }
}
