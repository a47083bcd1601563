//! Scratch — private segment memory — of kfd-direct queues (docs/code-objects.md §9), set up
//! the way ROCr sets it up in `amd_queue_t`: a buffer per queue, the private segment buffer
//! descriptor (the V# every kernel receives in `s[0:3]`), the backing location and size, the
//! per-lane size and `COMPUTE_TMPRING_SIZE`.
//!
//! A device's scratch grows when a kernel that needs more is looked up (core's
//! `module_kernel`) or a front end asks for a stack (`Runtime::reserve_scratch`), before any
//! dispatch of it is published: every queue of the device gets a buffer of the new size, and
//! queues created later get it at creation. Sizes per work-item double from 1 KiB, so a queue
//! goes through at most [`SCRATCH_STEPS`] buffers; a replaced buffer stays mapped until the
//! queue is destroyed, since dispatches published before the growth may still be using it.

use aqueduct_kfd_abi::AmdQueue;
use portable_atomic::{fence, Ordering};

use crate::driver::{Bo, GTT_FLAGS, VRAM_FLAGS};
use crate::{Kfd, KfdError, KfdResult, QueueRec, Sys, MAX_QUEUES};

/// Smallest per-work-item size a queue's scratch is given.
const MIN_LANE_BYTES: u32 = 1024;
/// Largest: `COMPUTE_TMPRING_SIZE.WAVESIZE` counts KiB per wave in 13 bits (8191 KiB per wave
/// of 64 lanes), which is also HIP's stack-size limit, 128 KiB − 16.
pub const MAX_LANE_BYTES: u32 = 8191 * 1024 / 64;
/// Scratch slots per CU (ROCr's `MaxSlotsScratchCU`).
const SLOTS_PER_CU: u32 = 32;
/// `COMPUTE_TMPRING_SIZE.WAVES` is 12 bits.
const MAX_WAVES: u32 = 4095;
/// Buffers one queue goes through at most: 1 KiB doubling to 64 KiB, then the maximum.
pub(crate) const SCRATCH_STEPS: usize = 8;
/// Word 3 of the private segment buffer descriptor on GFX9 dGPUs: DST_SEL XYZW, NUM_FORMAT
/// uint, DATA_FORMAT 32, ELEMENT_SIZE 4 bytes, INDEX_STRIDE 64, ADD_TID_ENABLE.
const GFX9_SRD_WORD3: u32 = 0x00ea_4fac;

/// The per-work-item size a request of `bytes` is rounded to (a growth step).
pub(crate) fn lane_bytes(bytes: u32) -> KfdResult<u32> {
    if bytes > MAX_LANE_BYTES {
        return Err(KfdError::Capacity("scratch per work-item (128 KiB - 16 bytes)"));
    }
    Ok(bytes
        .next_multiple_of(16)
        .max(MIN_LANE_BYTES)
        .checked_next_power_of_two()
        .unwrap_or(u32::MAX)
        .min(MAX_LANE_BYTES))
}

fn step_of(lane: u32) -> usize {
    if lane >= MAX_LANE_BYTES {
        return SCRATCH_STEPS - 1;
    }
    ((lane / MIN_LANE_BYTES).max(1).ilog2() as usize).min(SCRATCH_STEPS - 1)
}

/// What `amd_queue_t` says of a queue's scratch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScratchSetup {
    /// `scratch_resource_descriptor`.
    pub descriptor: [u32; 4],
    /// `scratch_backing_memory_location` (GFX9+: the absolute base).
    pub base: u64,
    /// `scratch_backing_memory_byte_size`.
    pub bytes: u64,
    /// `scratch_wave64_lane_byte_size`: bytes per work-item.
    pub lane: u32,
    /// `compute_tmpring_size`: WAVES (bits 11:0), WAVESIZE in KiB (bits 24:12).
    pub tmpring: u32,
}

impl ScratchSetup {
    /// The setup for `lane` bytes per work-item on a device of `cus` CUs whose shader engines
    /// are `engines`: as many waves as the device holds at once (32 slots per CU), fewer if the
    /// buffer would pass 4 GiB (the V#'s NUM_RECORDS) or the 12-bit wave count, a multiple of
    /// the engine count as the hardware requires.
    pub fn new(base: u64, lane: u32, cus: u32, engines: u32) -> ScratchSetup {
        let wave_kib = (lane * 64).div_ceil(1024);
        let wave_bytes = u64::from(wave_kib) * 1024;
        let fit = (u64::from(u32::MAX) / wave_bytes) as u32;
        let engines = engines.max(1);
        let waves = (cus.max(1) * SLOTS_PER_CU).min(MAX_WAVES).min(fit);
        let waves = (waves / engines * engines).max(1);
        let bytes = u64::from(waves) * wave_bytes;
        ScratchSetup {
            descriptor: [base as u32, ((base >> 32) as u32 & 0xffff) | 1 << 31, bytes as u32, GFX9_SRD_WORD3],
            base,
            bytes,
            lane,
            tmpring: waves | (wave_kib << 12),
        }
    }

    /// Reads the setup from an `amd_queue_t`.
    pub fn of(q: &AmdQueue) -> ScratchSetup {
        ScratchSetup {
            descriptor: q.scratch_resource_descriptor,
            base: q.scratch_backing_memory_location,
            bytes: q.scratch_backing_memory_byte_size,
            lane: q.scratch_wave64_lane_byte_size,
            tmpring: q.compute_tmpring_size,
        }
    }
}

/// A queue's scratch buffers, the current one last grown into.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QueueScratch {
    pub(crate) bos: [Option<Bo>; SCRATCH_STEPS],
    pub(crate) lane: u32,
}

impl QueueScratch {
    pub(crate) const NONE: QueueScratch = QueueScratch { bos: [None; SCRATCH_STEPS], lane: 0 };
}

impl<S: Sys> Kfd<S> {
    /// Makes every queue of `device`, and those created later, hold `bytes` of scratch per
    /// work-item for every wave the device runs at once.
    pub fn reserve_scratch_on(&self, device: u32, bytes: u32) -> KfdResult<()> {
        if bytes == 0 {
            return Ok(());
        }
        let gi = device as usize;
        let g = self.gpus.get(gi).ok_or(KfdError::InvalidDevice)?;
        if g.node.props.gfx_target_version / 10000 != 9 {
            // The V# word 3 differs on GFX10+; its scratch is not set up here.
            return Err(KfdError::Unsupported("scratch on GFX10+ queues"));
        }
        let lane = lane_bytes(bytes)?;
        let slots: heapless::Vec<usize, MAX_QUEUES> = {
            let mut st = self.state.lock();
            let Some(want) = st.scratch_lane.get_mut(gi) else { return Err(KfdError::InvalidDevice) };
            if *want >= lane {
                return Ok(());
            }
            *want = lane;
            (0..MAX_QUEUES)
                .filter(|&i| st.queues.get(i).and_then(|q| q.as_ref()).is_some_and(|q| usize::from(q.gpu) == gi))
                .collect()
        };
        for slot in slots {
            self.grow_queue_scratch(slot, lane)?;
        }
        Ok(())
    }

    /// Gives queue `slot` a scratch buffer of `lane` bytes per work-item, unless it has one as
    /// large; the buffer it had stays until the queue is destroyed.
    pub(crate) fn grow_queue_scratch(&self, slot: usize, lane: u32) -> KfdResult<()> {
        let rec: QueueRec = {
            let st = self.state.lock();
            let cur = st.scratch.get(slot).map_or(0, |s| s.lane);
            match st.queues.get(slot).and_then(|q| *q) {
                Some(r) if cur < lane => r,
                _ => return Ok(()),
            }
        };
        let gi = usize::from(rec.gpu);
        let g = self.gpus.get(gi).ok_or(KfdError::InvalidDevice)?;
        let props = g.node.props;
        let engines = match props.simd_arrays_per_engine {
            0 => 1,
            per => props.array_count / per,
        };
        let sized = ScratchSetup::new(0, lane, props.cu_count(), engines);
        let flags = if props.vram_bytes > 0 { VRAM_FLAGS } else { GTT_FLAGS };
        let bo = self.alloc_bo(gi, sized.bytes, flags, false)?;
        let setup = ScratchSetup::new(bo.va, lane, props.cu_count(), engines);
        let installed = {
            let mut st = self.state.lock();
            let live = st.queues.get(slot).and_then(|q| *q).is_some_and(|q| q.queue_id == rec.queue_id);
            match st.scratch.get_mut(slot) {
                Some(s) if live && s.lane < lane => {
                    if let Some(b) = s.bos.get_mut(step_of(lane)) {
                        // A step holds one buffer; an earlier one of the same step (the queue
                        // slot reused) was freed with its queue.
                        *b = Some(bo);
                    }
                    s.lane = lane;
                    // SAFETY: the queue's amd_queue_t page is CPU-mapped while it is in the
                    // table (we hold the lock, so it is not being destroyed).
                    unsafe { write_setup(rec.amd_queue.ptr::<AmdQueue>(0), &setup) };
                    true
                }
                _ => false,
            }
        };
        if !installed {
            self.free_bo(&bo)?;
        }
        Ok(())
    }

    /// The scratch a queue's `amd_queue_t` describes now.
    pub fn queue_scratch(&self, queue: &crate::KfdQueue) -> Option<ScratchSetup> {
        let st = self.state.lock();
        let rec = st.queues.get(usize::from(queue.slot())).and_then(|q| q.as_ref())?;
        // SAFETY: as in `grow_queue_scratch`: the page is mapped while the queue is live.
        Some(ScratchSetup::of(unsafe { &*rec.amd_queue.ptr::<AmdQueue>(0) }))
    }

    /// Frees a destroyed queue's scratch buffers.
    pub(crate) fn free_queue_scratch(&self, slot: usize) {
        let bos = {
            let mut st = self.state.lock();
            match st.scratch.get_mut(slot) {
                Some(s) => core::mem::replace(s, QueueScratch::NONE).bos,
                None => return,
            }
        };
        for bo in bos.iter().flatten() {
            let _ = self.free_bo(bo);
        }
    }
}

/// Writes a scratch setup into an `amd_queue_t`: the descriptor, location, size and lane size
/// first, `compute_tmpring_size` last, after a release fence, so a command processor that reads
/// the ring size with acquire sees the rest.
///
/// # Safety
/// `q` points at a live, CPU-mapped `amd_queue_t`.
unsafe fn write_setup(q: *mut AmdQueue, s: &ScratchSetup) {
    // SAFETY: the caller's contract; each field is written in place with a volatile store (the
    // device reads the page concurrently).
    unsafe {
        core::ptr::addr_of_mut!((*q).scratch_resource_descriptor).write_volatile(s.descriptor);
        core::ptr::addr_of_mut!((*q).scratch_backing_memory_location).write_volatile(s.base);
        core::ptr::addr_of_mut!((*q).scratch_backing_memory_byte_size).write_volatile(s.bytes);
        core::ptr::addr_of_mut!((*q).scratch_wave64_lane_byte_size).write_volatile(s.lane);
        // Ordering: Release, so the fields above are visible before the tmpring size.
        fence(Ordering::Release);
        core::ptr::addr_of_mut!((*q).compute_tmpring_size).write_volatile(s.tmpring);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setups_follow_rocr() {
        // gfx90a, 104 CUs, 8 engines, 1 KiB per work-item: 3328 waves of 64 KiB.
        let s = ScratchSetup::new(0x7f12_3456_7000, 1024, 104, 8);
        assert_eq!(s.tmpring & 0xfff, 3328);
        assert_eq!(s.tmpring >> 12, 64);
        assert_eq!(s.bytes, 3328 * 64 * 1024);
        assert_eq!(s.descriptor, [0x3456_7000, 0x7f12 | 1 << 31, (3328 * 64 * 1024) as u32, 0x00ea_4fac]);
        // The largest lane fits 4 GiB with fewer waves, a multiple of the engines.
        let big = ScratchSetup::new(0, MAX_LANE_BYTES, 104, 8);
        assert!(big.bytes <= u64::from(u32::MAX));
        assert_eq!((big.tmpring & 0xfff) % 8, 0);
        assert_eq!(big.tmpring >> 12, 8191);
        assert_eq!(lane_bytes(1), Ok(1024));
        assert_eq!(lane_bytes(1025), Ok(2048));
        assert_eq!(lane_bytes(70000), Ok(MAX_LANE_BYTES));
        assert!(lane_bytes(MAX_LANE_BYTES + 1).is_err());
        assert_eq!(step_of(1024), 0);
        assert_eq!(step_of(64 << 10), 6);
        assert_eq!(step_of(MAX_LANE_BYTES), SCRATCH_STEPS - 1);
    }
}
