//! The SDMA v4 engine: user-mode SDMA queues as ROCr 5.2's `BlitSdmaV4` drives them
//! (docs/rocm-on-emu.md §3.3, §4.5; packet layouts from ROCr's `sdma_registers.h`, ring protocol
//! from its `amd_blit_sdma.cpp`; queue setup from amdkfd's SDMA MQDs).
//!
//! # Ring protocol
//!
//! The ring is a power-of-two byte array. Its read and write indices are **monotonic byte
//! offsets** (`BlitSdma<uint64_t, HwIndexMonotonic = true, …>`): the producer writes a run of
//! packets, stores the new write offset to its `wptr` word, and then rings the doorbell with the
//! same 64-bit byte offset. The engine consumes from its read offset up to the doorbell value,
//! each packet at `offset & (size - 1)` (a packet never straddles the end: ROCr pads the tail
//! with zero dwords, which are one-dword NOPs), and writes its read offset back to the `rptr`
//! word after every packet, which is what the producer's room check reads.
//!
//! # Packets
//!
//! | op | sub-op | dwords | what the engine does |
//! |---|---|---|---|
//! | 0 NOP | — | 1 + `count` (bits 29:16) | nothing |
//! | 1 COPY | 0 LINEAR | 7 | copy `count + 1` bytes (`count` is 22 bits) |
//! | 1 COPY | 4 LINEAR_RECT | 13 | a 3-D sub-window copy in elements of `1 << element` bytes |
//! | 2 WRITE | 0 LINEAR | 4 + `count + 1` | store the inline dwords |
//! | 5 FENCE | — | 4 | 32-bit store (a signal's mailbox, a fence word) |
//! | 6 TRAP | — | 2 | interrupt with context `int_ctx`: the event of that id, if its mailbox was posted |
//! | 8 POLL_REGMEM | — | 6 | memory form: wait until `(*addr & mask) func value`; register form (ROCr's HDP flush): done |
//! | 10 ATOMIC | op 47 ADD64 | 8 | 64-bit atomic add (ROCr's completion-signal decrement) |
//! | 11 CONST_FILL | — | 5 | fill `count + 1` bytes (rounded to the fill size) with the low bytes of the data |
//! | 13 TIMESTAMP | 0 SET, 1/2 GET | 3 | GET: store the 64-bit GPU clock at the address |
//!
//! Anything else (another opcode, sub-op or atomic operation) halts the queue with a queue
//! error, reported on stderr and through [`crate::Emu::queue_state`]. An address the buffer
//! table cannot translate is a GPU memory fault, reported the way amdkfd reports VM faults
//! (the process's MEMORY events, every queue of the process on the device evicted).

use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::abi::exception;
use crate::events::Events;
use crate::hw::{status, Clock};
use crate::memory::{KernelError, MemView, Pool, VmLock};

/// SDMA opcodes (ROCr `sdma_registers.h`, Linux `vega10_sdma_pkt_open.h`).
pub mod op {
    /// No operation; bits 29:16 count the dwords that follow.
    pub const NOP: u32 = 0;
    /// Copy (sub-ops below).
    pub const COPY: u32 = 1;
    /// Write inline data.
    pub const WRITE: u32 = 2;
    /// 32-bit memory store.
    pub const FENCE: u32 = 5;
    /// Interrupt.
    pub const TRAP: u32 = 6;
    /// Poll a register or memory word.
    pub const POLL_REGMEM: u32 = 8;
    /// Memory atomic.
    pub const ATOMIC: u32 = 10;
    /// Constant fill.
    pub const CONST_FILL: u32 = 11;
    /// Timestamps.
    pub const TIMESTAMP: u32 = 13;
    /// `COPY` sub-op: linear.
    pub const SUB_COPY_LINEAR: u32 = 0;
    /// `COPY` sub-op: linear sub-window.
    pub const SUB_COPY_LINEAR_RECT: u32 = 4;
    /// `ATOMIC` operation: 64-bit add.
    pub const ATOMIC_ADD64: u32 = 47;
}

/// Packets a queue may run per round of the engine thread that also serves the AQL queues.
const BUDGET: u32 = 64;

/// Machine-wide SDMA counters (observable through [`crate::Emu::stats`]).
#[derive(Debug, Default)]
pub(crate) struct SdmaStats {
    pub(crate) queues_created: AtomicU64,
    pub(crate) packets: AtomicU64,
    pub(crate) copies: AtomicU64,
    pub(crate) bytes: AtomicU64,
}

/// Where a queue reads packets.
pub(crate) struct SdmaRing {
    /// Device-view pointer to the ring.
    base: NonNull<u8>,
    pub(crate) va: u64,
    pub(crate) bytes: u64,
    /// The engine's monotonic read offset.
    rptr: u64,
}

// SAFETY: `base` points into a BO pinned by the queue; it is only used under the ring's mutex.
unsafe impl Send for SdmaRing {}

/// One user-mode SDMA queue.
pub(crate) struct SdmaQueue {
    pub(crate) gpu_id: u32,
    pub(crate) queue_id: u32,
    /// Engine index (XGMI engines follow the PCIe ones) and queue slot on it.
    pub(crate) engine: u32,
    pub(crate) engine_queue: u32,
    pub(crate) vm: Arc<VmLock>,
    pub(crate) events: Arc<Events>,
    pub(crate) priority: AtomicU32,
    pub(crate) percentage: AtomicU32,
    pub(crate) status: AtomicU8,
    pub(crate) exception: AtomicU32,
    /// Device-view pointer to the 64-bit read-offset write-back word.
    rptr_wb: NonNull<AtomicU64>,
    doorbell: NonNull<AtomicU64>,
    seen_doorbell: AtomicU64,
    /// Packets were left after the last run.
    waiting: AtomicBool,
    ring: Mutex<SdmaRing>,
}

// SAFETY: the raw pointers target pinned BO or pool memory that outlives the queue and are
// only accessed atomically.
unsafe impl Send for SdmaQueue {}
// SAFETY: as for Send; mutable state is atomic or behind `ring`.
unsafe impl Sync for SdmaQueue {}

/// Where a new queue lives (resolved by the driver under its validation).
pub(crate) struct SdmaPtrs {
    pub(crate) ring: *mut u8,
    pub(crate) ring_va: u64,
    pub(crate) ring_bytes: u64,
    pub(crate) rptr: *mut u8,
    pub(crate) doorbell: *mut u8,
}

/// Why a queue stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SdmaFailure {
    /// An illegal packet: the KFD exception code and a description.
    Illegal(u32, String),
    /// A VM fault at this address.
    Memory(u64),
}

impl From<KernelError> for SdmaFailure {
    fn from(e: KernelError) -> SdmaFailure {
        match e {
            KernelError::MemoryFault(va) => SdmaFailure::Memory(va),
            _ => SdmaFailure::Illegal(exception::QUEUE_PACKET_UNSUPPORTED, "engine error".into()),
        }
    }
}

/// What one packet did.
enum Outcome {
    /// Executed; consumed this many bytes.
    Done(u64),
    /// Not runnable yet (a memory poll not satisfied, or the packet not fully published).
    Wait,
}

impl SdmaQueue {
    /// Builds a queue.
    ///
    /// # Safety
    /// The pointers in `ptrs` must stay valid until the queue is destroyed; `rptr` and
    /// `doorbell` 8-byte aligned, `ring` 4-byte aligned with `ring_bytes` (a power of two) bytes.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn new(
        gpu_id: u32,
        queue_id: u32,
        engine: u32,
        engine_queue: u32,
        vm: Arc<VmLock>,
        events: Arc<Events>,
        ptrs: SdmaPtrs,
        priority: u32,
        percentage: u32,
    ) -> Option<SdmaQueue> {
        let rptr_wb = NonNull::new(ptrs.rptr.cast::<AtomicU64>())?;
        let doorbell = NonNull::new(ptrs.doorbell.cast::<AtomicU64>())?;
        // SAFETY: caller's contract: a live, aligned u64.
        let start = unsafe { rptr_wb.as_ref() }.load(Ordering::Acquire);
        // SAFETY: as above; the doorbell starts "caught up" (a previous queue may have used the
        // slot).
        unsafe { doorbell.as_ref() }.store(start, Ordering::Release);
        Some(SdmaQueue {
            gpu_id,
            queue_id,
            engine,
            engine_queue,
            vm,
            events,
            priority: AtomicU32::new(priority),
            percentage: AtomicU32::new(percentage),
            status: AtomicU8::new(status::ACTIVE),
            exception: AtomicU32::new(0),
            rptr_wb,
            doorbell,
            seen_doorbell: AtomicU64::new(start),
            waiting: AtomicBool::new(false),
            ring: Mutex::new(SdmaRing {
                base: NonNull::new(ptrs.ring)?,
                va: ptrs.ring_va,
                bytes: ptrs.ring_bytes,
                rptr: start,
            }),
        })
    }

    pub(crate) fn lock_ring(&self) -> MutexGuard<'_, SdmaRing> {
        self.ring.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Replaces the ring (UPDATE_QUEUE). The read offset carries over.
    ///
    /// # Safety
    /// As for [`SdmaQueue::new`]'s ring.
    pub(crate) unsafe fn replace_ring(ring: &mut SdmaRing, base: *mut u8, va: u64, bytes: u64) -> bool {
        let Some(base) = NonNull::new(base) else { return false };
        ring.base = base;
        ring.va = va;
        ring.bytes = bytes;
        true
    }

    /// Whether packets are left after the last run (a memory poll not satisfied, or more than a
    /// round's budget).
    pub(crate) fn waiting(&self) -> bool {
        // Ordering: Relaxed; a hint for the engine's polling.
        self.waiting.load(Ordering::Relaxed)
    }

    /// Whether the doorbell changed since the engine last looked (a lock-free peek).
    pub(crate) fn doorbell_rung(&self) -> bool {
        // SAFETY: the doorbell slot is pool memory that lives as long as the machine.
        let d = unsafe { self.doorbell.as_ref() };
        // Ordering: Relaxed; a hint only, `run` reloads with Acquire.
        d.load(Ordering::Relaxed) != self.seen_doorbell.load(Ordering::Relaxed)
    }

    fn runnable(&self) -> bool {
        // Ordering: Relaxed; scheduling flags re-read every round.
        self.status.load(Ordering::Relaxed) == status::ACTIVE && self.percentage.load(Ordering::Relaxed) & 0xff > 0
    }

    /// Runs up to a budget of packets. Returns whether anything happened and why the queue
    /// stopped, if it did.
    pub(crate) fn run(&self, pool: &Pool, clock: &Clock, stats: &SdmaStats) -> (bool, Option<SdmaFailure>) {
        let mut ring = self.lock_ring();
        if !self.runnable() {
            return (false, None);
        }
        // SAFETY: the doorbell slot is pool memory that lives as long as the machine.
        let doorbell = unsafe { self.doorbell.as_ref() };
        // Ordering: Acquire pairs with the producer's release fence before its doorbell store,
        // so the packets up to the value are visible.
        let wptr = doorbell.load(Ordering::Acquire);
        // Ordering: Relaxed; only this thread writes it, the idle loop compares it.
        self.seen_doorbell.store(wptr, Ordering::Relaxed);
        let pending = wptr.wrapping_sub(ring.rptr);
        if pending == 0 {
            return (false, None);
        }
        if pending > ring.bytes || pending % 4 != 0 {
            let msg = format!("doorbell {wptr:#x} is not a dword offset within one ring of rptr {:#x}", ring.rptr);
            return (true, Some(SdmaFailure::Illegal(exception::QUEUE_PACKET_RESERVED, msg)));
        }
        let tr = self.vm.translation(pool, self.gpu_id);
        let mem = MemView::new(&tr);
        let mut progress = false;
        for _ in 0..BUDGET {
            let avail = wptr.wrapping_sub(ring.rptr);
            if avail == 0 {
                break;
            }
            match self.execute(&ring, avail, &mem, clock, stats) {
                Ok(Outcome::Done(n)) => {
                    progress = true;
                    ring.rptr = ring.rptr.wrapping_add(n);
                    // SAFETY: constructor contract: the write-back word is live while the queue is.
                    let wb = unsafe { self.rptr_wb.as_ref() };
                    // Ordering: Release pairs with the producer's Acquire room check: its reuse
                    // of the bytes comes after the engine's reads of them.
                    wb.store(ring.rptr, Ordering::Release);
                }
                Ok(Outcome::Wait) => break,
                Err(f) => return (true, Some(f)),
            }
        }
        // Packets left (a poll not satisfied, or the budget spent): the engine comes back
        // without a new doorbell.
        // Ordering: Relaxed; see `waiting`.
        self.waiting.store(wptr != ring.rptr, Ordering::Relaxed);
        (progress, None)
    }

    /// Executes the packet at the read offset, with `avail` bytes published.
    fn execute(
        &self,
        ring: &SdmaRing,
        avail: u64,
        mem: &MemView<'_>,
        clock: &Clock,
        stats: &SdmaStats,
    ) -> Result<Outcome, SdmaFailure> {
        let mask = ring.bytes - 1;
        let pos = ring.rptr;
        let dw = |i: u64| -> u32 {
            let off = (pos.wrapping_add(4 * i) & mask) as usize;
            // SAFETY: `off + 4 <= bytes` (both dword-aligned, `bytes` a power of two ≥ 4) inside
            // the pinned ring; a volatile read because the producer writes the ring concurrently
            // (before its doorbell release, which the Acquire load ordered).
            unsafe { ring.base.as_ptr().add(off).cast::<u32>().read_volatile() }
        };
        let qword = |lo: u64| u64::from(dw(lo)) | (u64::from(dw(lo + 1)) << 32);
        let header = dw(0);
        let (opcode, sub) = (header & 0xff, (header >> 8) & 0xff);
        let len_dw: u64 = match (opcode, sub) {
            (op::NOP, _) => 1 + u64::from((header >> 16) & 0x3fff),
            (op::COPY, op::SUB_COPY_LINEAR) => 7,
            (op::COPY, op::SUB_COPY_LINEAR_RECT) => 13,
            (op::WRITE, 0) => {
                if avail < 16 {
                    return Ok(Outcome::Wait);
                }
                4 + u64::from(dw(3) & 0xf_ffff) + 1
            }
            (op::FENCE, _) => 4,
            (op::TRAP, _) => 2,
            (op::POLL_REGMEM, _) => 6,
            (op::ATOMIC, _) => 8,
            (op::CONST_FILL, _) => 5,
            (op::TIMESTAMP, 0..=2) => 3,
            _ => {
                let msg = format!("illegal packet: opcode {opcode} sub-op {sub} (header {header:#010x})");
                return Err(SdmaFailure::Illegal(exception::QUEUE_PACKET_UNSUPPORTED, msg));
            }
        };
        let len = len_dw * 4;
        if len > avail {
            return Ok(Outcome::Wait);
        }
        if opcode != op::NOP {
            // Ordering: Relaxed; a statistics counter.
            stats.packets.fetch_add(1, Ordering::Relaxed);
        }
        match opcode {
            op::NOP => {}
            op::COPY if sub == op::SUB_COPY_LINEAR => {
                let bytes = u64::from(dw(1) & 0x3f_ffff) + 1;
                let (src, dst) = (qword(3), qword(5));
                fence(Ordering::Acquire);
                mem.copy(dst, src, bytes)?;
                // Ordering: Relaxed; statistics counters.
                stats.copies.fetch_add(1, Ordering::Relaxed);
                stats.bytes.fetch_add(bytes, Ordering::Relaxed);
            }
            op::COPY => {
                let bytes = copy_rect(mem, &dw)?;
                // Ordering: Relaxed; statistics counters.
                stats.copies.fetch_add(1, Ordering::Relaxed);
                stats.bytes.fetch_add(bytes, Ordering::Relaxed);
            }
            op::WRITE => {
                let dst = qword(1);
                let data: Vec<u8> = (4..len_dw).flat_map(|i| dw(i).to_le_bytes()).collect();
                mem.write(dst, &data)?;
            }
            op::FENCE => {
                let addr = qword(1) & !3;
                let p = mem.ptr(addr, 4)?;
                fence(Ordering::Release);
                // SAFETY: 4 live, aligned bytes inside a mapped BO.
                unsafe { AtomicU32::from_ptr(p.cast()) }.store(dw(3), Ordering::Release);
            }
            op::TRAP => self.events.interrupt_posted(dw(1) & 0x0fff_ffff),
            op::POLL_REGMEM => {
                // Bit 31: memory poll. The register form (ROCr's HDP flush) has no register to
                // wait on here and completes at once.
                if header >> 31 != 0 {
                    let func = (header >> 28) & 7;
                    let addr = qword(1) & !3;
                    let (value, mask) = (dw(3), dw(4));
                    let p = mem.ptr(addr, 4)?;
                    // Ordering: Acquire pairs with the store that satisfies the poll: what the
                    // packets after it read happens after it.
                    // SAFETY: 4 live, aligned bytes inside a mapped BO.
                    let v = unsafe { AtomicU32::from_ptr(p.cast()) }.load(Ordering::Acquire) & mask;
                    let ok = match func {
                        0 => true,
                        1 => v < value,
                        2 => v <= value,
                        3 => v == value,
                        4 => v != value,
                        5 => v >= value,
                        6 => v > value,
                        _ => {
                            let msg = format!("POLL_REGMEM with reserved function {func}");
                            return Err(SdmaFailure::Illegal(exception::QUEUE_PACKET_UNSUPPORTED, msg));
                        }
                    };
                    if !ok {
                        return Ok(Outcome::Wait);
                    }
                }
            }
            op::ATOMIC => {
                let operation = header >> 25;
                if operation != op::ATOMIC_ADD64 {
                    let msg = format!("ATOMIC operation {operation} (only ADD64 = 47 is emulated)");
                    return Err(SdmaFailure::Illegal(exception::QUEUE_PACKET_UNSUPPORTED, msg));
                }
                let addr = qword(1);
                let p = mem.ptr(addr, 8)?;
                if p as usize % 8 != 0 {
                    return Err(SdmaFailure::Memory(addr));
                }
                // Ordering: Release then AcqRel: the copies before it happen-before any waiter
                // that sees the new signal value.
                fence(Ordering::Release);
                // SAFETY: 8 live, aligned bytes inside a mapped BO.
                unsafe { AtomicU64::from_ptr(p.cast()) }.fetch_add(qword(3), Ordering::AcqRel);
            }
            op::CONST_FILL => {
                let size = (header >> 30) & 3;
                if size == 3 {
                    let msg = "CONST_FILL with fill size 3".to_string();
                    return Err(SdmaFailure::Illegal(exception::QUEUE_PACKET_UNSUPPORTED, msg));
                }
                let width = 1u64 << size;
                let bytes = (u64::from(dw(4) & 0x3f_ffff) | (width - 1)) + 1;
                let dst = qword(1);
                let pattern = &dw(3).to_le_bytes()[..width as usize];
                fill(mem, dst, pattern, bytes / width)?;
                // Ordering: Relaxed; a statistics counter.
                stats.bytes.fetch_add(bytes, Ordering::Relaxed);
            }
            op::TIMESTAMP => {
                if sub != 0 {
                    mem.write_u64(qword(1), clock.gpu_ticks())?;
                }
            }
            _ => unreachable!("opcode checked above"),
        }
        Ok(Outcome::Done(len))
    }
}

/// Writes `count` copies of `pattern` at `dst`.
fn fill(mem: &MemView<'_>, dst: u64, pattern: &[u8], count: u64) -> Result<(), KernelError> {
    let total = count.checked_mul(pattern.len() as u64).ok_or(KernelError::MemoryFault(dst))?;
    mem.fill_pattern(dst, pattern, total)
}

/// COPY_LINEAR_RECT: `rect_x × rect_y × rect_z` elements of `1 << element` bytes from one
/// pitched window to another. Offsets, pitches and slice pitches are in elements; the packet
/// stores pitch, slice pitch and rectangle sizes minus one. Returns the bytes copied.
fn copy_rect(mem: &MemView<'_>, dw: &dyn Fn(u64) -> u32) -> Result<u64, KernelError> {
    let esize = 1u64 << ((dw(0) >> 29) & 7);
    let window = |base_dw: u64| {
        let base = u64::from(dw(base_dw)) | (u64::from(dw(base_dw + 1)) << 32);
        let (p1, p2, p3) = (dw(base_dw + 2), dw(base_dw + 3), dw(base_dw + 4));
        let (x, y, z) = (u64::from(p1 & 0x3fff), u64::from((p1 >> 16) & 0x3fff), u64::from(p2 & 0x7ff));
        let pitch = u64::from(p2 >> 13) + 1;
        let slice = u64::from(p3 & 0x0fff_ffff) + 1;
        (base, x, y, z, pitch, slice)
    };
    let (sbase, sx, sy, sz, spitch, sslice) = window(1);
    let (dbase, dx, dy, dz, dpitch, dslice) = window(6);
    let rx = u64::from(dw(11) & 0x3fff) + 1;
    let ry = u64::from((dw(11) >> 16) & 0x3fff) + 1;
    let rz = u64::from(dw(12) & 0x7ff) + 1;
    fence(Ordering::Acquire);
    for z in 0..rz {
        for y in 0..ry {
            let s = sbase + (sx + (sy + y) * spitch + (sz + z) * sslice) * esize;
            let d = dbase + (dx + (dy + y) * dpitch + (dz + z) * dslice) * esize;
            mem.copy(d, s, rx * esize)?;
        }
    }
    Ok(rx * ry * rz * esize)
}
