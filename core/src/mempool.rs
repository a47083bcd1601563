//! Stream-ordered allocation (`hipMallocAsync`, `hipFreeAsync`, `hipMemPool*`): memory pools
//! over backend memory whose freed blocks are handed out again in stream order
//! (docs/hip-semantics.md, "Stream-ordered allocation").
//!
//! # Model
//!
//! [`MemPools`] holds up to `C::Pools` pools and `C::PoolBlocks` blocks (the `P` and `PB` of
//! [`Capacities`](crate::config::Capacities)); every device has a default pool, created on
//! first use, and a current pool (`hipDeviceSetMemPool`). A block is one backend allocation and
//! is, at any time, *busy* (handed to the user), *free* (kept by its pool for reuse), or owned by
//! a graph (an allocation made while a stream captured). Nothing here names a backend or a
//! stream table: what the pools need from a runtime is the [`PoolHost`] trait, which
//! [`Runtime`](crate::Runtime) implements (`runtime/mempool.rs`).
//!
//! # When a freed block is handed out again
//!
//! `free_async(p, s)` does not wait: the block becomes free at the free's position in stream
//! `s`, a [`Mark`] the host records there. An allocation of `r` bytes (rounded up to 256) on
//! stream `t` takes a free block of its pool whose size lies in `[r, r + r/8]`:
//!
//! 1. at once, when `t` is ordered after the free — `t` is the stream that freed it, or, with
//!    `hipMemPoolReuseFollowEventDependencies`, `t` has since waited on an event recorded on that
//!    stream after the free, or the null stream's implicit synchronisation orders `t` after it
//!    (the null stream after a blocking stream of the device, or the other way round);
//! 2. otherwise, with `hipMemPoolReuseAllowOpportunistic`, when the free has completed (a block
//!    freed by the synchronous path has always completed);
//! 3. otherwise a new backend allocation is made. Only when that fails (the backend is out of
//!    memory, the pool would pass its maximum size, or the block table is full) and
//!    `hipMemPoolReuseAllowInternalDependencies` is on, a free block whose free is still pending
//!    is taken and `t` is made to wait for the free's mark.
//!
//! Event dependencies are followed exactly: frees and event records share one counter, so a wait
//! on an event makes a block safe only if the block's free came before the record in its stream.
//!
//! # Giving memory back
//!
//! Free blocks whose free has completed go back to the backend in [`MemPools::trim_to`] (down to
//! the bytes asked to keep) and at synchronisation points, [`MemPools::release_on_sync`] (down to
//! the pool's release threshold, 0 by default). Blocks still in use are never touched.
//!
//! # Under capture
//!
//! An allocation on a capturing stream is a graph allocation: a new block owned by the capture's
//! graph, recorded as a memory-allocation node, usable by later captured work. A captured free
//! of such a block records a memory-free node; a captured free of anything else is
//! `InvalidValue`. Both nodes run as ordering points: the graph owns the memory for its life.
//! A launch of the graph makes the allocations it does not free itself outstanding: launching
//! again before the user has freed them is `InvalidValue` (unless the graph was instantiated
//! with auto-free-on-launch), and a launch waits for the user's stream-ordered free of them.

use crate::config::{Config, Default as DefaultConfig};
use crate::error::{Error, Result};
use crate::event::EventHandle;
use crate::slot::MAX_DEVICES;
use crate::slot::{FixedVec, Slot, Table};
use crate::stream::StreamHandle;
use crate::table::{self, Generation};

/// Handle tag of pools.
const POOL_TAG: u16 = 0x9e01;
/// Allocation granule: requests are rounded up to it.
const GRANULE: u64 = 256;
/// Streams a free block remembers as ordered after its free (besides the freeing stream).
const FOLLOWERS: usize = 4;
/// Event records remembered for following event dependencies.
const NOTES: usize = 32;

/// A memory pool handle (`hipMemPool_t`'s value); 0 is null.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PoolHandle(pub u64);

impl PoolHandle {
    /// The null pool.
    pub const NULL: PoolHandle = PoolHandle(0);
}

/// `hipMemPoolAttr`.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum PoolAttr {
    /// `hipMemPoolReuseFollowEventDependencies` (an `int`, default 1).
    ReuseFollowEventDependencies = 1,
    /// `hipMemPoolReuseAllowOpportunistic` (an `int`, default 1).
    ReuseAllowOpportunistic = 2,
    /// `hipMemPoolReuseAllowInternalDependencies` (an `int`, default 1).
    ReuseAllowInternalDependencies = 3,
    /// `hipMemPoolAttrReleaseThreshold` (a `uint64_t`, default 0).
    ReleaseThreshold = 4,
    /// `hipMemPoolAttrReservedMemCurrent`: backend bytes the pool holds (read only).
    ReservedMemCurrent = 5,
    /// `hipMemPoolAttrReservedMemHigh`: its high watermark (set to 0 to reset).
    ReservedMemHigh = 6,
    /// `hipMemPoolAttrUsedMemCurrent`: bytes handed out (read only).
    UsedMemCurrent = 7,
    /// `hipMemPoolAttrUsedMemHigh`: its high watermark (set to 0 to reset).
    UsedMemHigh = 8,
}

impl PoolAttr {
    /// Parses HIP's value; anything else is `InvalidValue`.
    pub fn from_raw(raw: u32) -> Result<PoolAttr> {
        Ok(match raw {
            1 => PoolAttr::ReuseFollowEventDependencies,
            2 => PoolAttr::ReuseAllowOpportunistic,
            3 => PoolAttr::ReuseAllowInternalDependencies,
            4 => PoolAttr::ReleaseThreshold,
            5 => PoolAttr::ReservedMemCurrent,
            6 => PoolAttr::ReservedMemHigh,
            7 => PoolAttr::UsedMemCurrent,
            8 => PoolAttr::UsedMemHigh,
            _ => return Err(Error::InvalidValue),
        })
    }

    /// Whether the C value is an `int` (the reuse switches) rather than a `uint64_t`.
    pub const fn is_int(self) -> bool {
        matches!(
            self,
            PoolAttr::ReuseFollowEventDependencies
                | PoolAttr::ReuseAllowOpportunistic
                | PoolAttr::ReuseAllowInternalDependencies
        )
    }
}

/// `hipMemAccessFlags`.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Access {
    /// `hipMemAccessFlagsProtNone`.
    None = 0,
    /// `hipMemAccessFlagsProtRead`.
    Read = 1,
    /// `hipMemAccessFlagsProtReadWrite`.
    ReadWrite = 3,
}

/// Where a free took effect in its stream, as the host recorded it (an opaque value of the
/// host's, for example an event handle).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Mark(pub u64);

/// What the pools need to know of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct StreamInfo {
    /// Unique for the stream's life (`hipStreamGetId`).
    pub id: u64,
    /// Its device.
    pub device: u32,
    /// The null (legacy) stream.
    pub null: bool,
    /// A blocking stream other than the null stream: it synchronises with the null stream.
    pub blocking: bool,
}

/// The capture state of a stream, as far as allocation cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Capturing {
    /// Not capturing: operations run.
    No,
    /// Capturing into the graph with this handle value.
    Into(u64),
}

/// A graph memory node recorded into a capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum MemNode {
    /// A graph allocation of `bytes` bytes at `address`.
    Alloc {
        /// The block.
        address: u64,
        /// Its size.
        bytes: u64,
    },
    /// The free of the graph allocation at this address.
    Free(u64),
}

/// What a pool needs from the runtime it allocates for.
pub trait PoolHost {
    /// Number of devices (`NoDevice` when there is none).
    fn device_count(&self) -> Result<u32>;
    /// Checks `s` as asynchronous work on it is checked (a stale or detached stream, an
    /// invalidated capture) and describes it.
    fn stream_info(&self, s: StreamHandle) -> Result<StreamInfo>;
    /// Whether `s` is capturing (after [`stream_info`](Self::stream_info) accepted it).
    fn capturing(&self, s: StreamHandle) -> Result<Capturing>;
    /// Whether any capture exists anywhere (pool creation and destruction are refused then).
    fn any_capture(&self) -> bool;
    /// Allocates `bytes` of device memory on `device`.
    fn alloc(&self, device: u32, bytes: u64) -> Result<u64>;
    /// Gives memory from [`alloc`](Self::alloc) back; no work may use it any more.
    fn release(&self, address: u64);
    /// Records the current position of stream `s` (on `device`). `None` when the host could not
    /// and waited for the stream's work instead (the position has then been passed).
    fn mark(&self, s: StreamHandle, device: u32) -> Result<Option<Mark>>;
    /// Whether everything before the mark has completed. Never a capture check.
    fn mark_done(&self, m: Mark) -> bool;
    /// Makes later work of `s` wait for the mark.
    fn wait_mark(&self, s: StreamHandle, m: Mark) -> Result<()>;
    /// Forgets a mark no one will ask about again.
    fn forget(&self, m: Mark);
    /// Waits until the work of `device` has completed (no capture check).
    fn wait_device(&self, device: u32) -> Result<()>;
    /// Records a graph memory node into the capture of `s`, after its current dependencies.
    fn capture_node(&self, s: StreamHandle, node: MemNode) -> Result<()>;
    /// `hipEventRecordWithFlags`.
    fn record_event(&self, e: EventHandle, s: StreamHandle, flags: u32) -> Result<()>;
    /// `hipStreamWaitEvent`.
    fn wait_event(&self, s: StreamHandle, e: EventHandle, flags: u32) -> Result<()>;
}

/// What [`MemPools::free_async`] and [`MemPools::free`] did with an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Freed {
    /// A block of a pool: free now (in stream order).
    Pooled,
    /// A graph allocation: freed as asked, its graph keeps the memory.
    Graph,
    /// Not memory of any pool: the caller frees it its own way.
    NotPooled,
}

/// A block handed out, for the caller's books: its address, size and device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Allocation {
    /// Device address.
    pub address: u64,
    /// Bytes reserved (the request rounded up, or a reused block's size).
    pub size: u64,
    /// Device of the memory.
    pub device: u32,
}

#[derive(Debug, Clone, Copy)]
struct PoolSlot {
    generation: Generation,
    /// Live, or destroyed while blocks of it were still handed out.
    used: bool,
    device: u32,
    /// 0: no limit.
    max_size: u64,
    is_default: bool,
    follow: bool,
    opportunistic: bool,
    internal: bool,
    threshold: u64,
    reserved: u64,
    in_use: u64,
    reserved_high: u64,
    in_use_high: u64,
    access: [Access; MAX_DEVICES],
}

impl Slot for PoolSlot {
    const EMPTY: Self = PoolSlot::new();
}

impl PoolSlot {
    const fn new() -> Self {
        PoolSlot {
            generation: Generation::new(),
            used: false,
            device: 0,
            max_size: 0,
            is_default: false,
            follow: true,
            opportunistic: true,
            internal: true,
            threshold: 0,
            reserved: 0,
            in_use: 0,
            reserved_high: 0,
            in_use_high: 0,
            access: [Access::None; MAX_DEVICES],
        }
    }

    fn add_reserved(&mut self, bytes: u64) {
        self.reserved = self.reserved.saturating_add(bytes);
        self.reserved_high = self.reserved_high.max(self.reserved);
    }

    fn add_in_use(&mut self, bytes: u64) {
        self.in_use = self.in_use.saturating_add(bytes);
        self.in_use_high = self.in_use_high.max(self.in_use);
    }
}

#[derive(Debug, Clone, Copy)]
struct FreeState {
    /// Where the free took effect; `None` once passed for certain.
    mark: Option<Mark>,
    /// The stream that freed the block.
    stream: StreamInfo,
    /// The free's place in the order of frees and event records.
    seq: u64,
    /// Streams that have since waited on an event recorded after the free (0: none).
    followers: [u64; FOLLOWERS],
}

#[derive(Debug, Clone, Copy)]
enum BlockState {
    Busy,
    Free(FreeState),
    /// Owned by the graph `owner`.
    Graph {
        owner: u64,
        /// The graph frees it itself (a captured free).
        freed_in_graph: bool,
        /// Launched and not freed by the user since.
        outstanding: bool,
        /// The user's stream-ordered free since the last launch.
        mark: Option<Mark>,
    },
}

#[derive(Debug, Clone, Copy)]
struct Block {
    address: u64,
    size: u64,
    device: u32,
    /// The pool (index) whose books it is in; graph allocations are in none.
    pool: Option<u16>,
    state: BlockState,
}

#[derive(Debug, Clone, Copy)]
struct Note {
    event: u64,
    stream: u64,
    seq: u64,
}

struct State<C: Config> {
    pools: C::Pools<PoolSlot>,
    /// Every block in existence, densely (order means nothing).
    blocks: C::PoolBlocks<Block>,
    default: [Option<u16>; MAX_DEVICES],
    current: [Option<u16>; MAX_DEVICES],
    /// Frees and event records so far.
    seq: u64,
    notes: [Option<Note>; NOTES],
    next_note: usize,
}

/// Memory pools over blocks of backend memory, as many as `C` says,, with stream-ordered reuse (see the
/// module docs). `const`-constructible, so it can live in a `static`.
pub struct MemPools<C: Config = DefaultConfig> {
    state: spin::Mutex<State<C>>,
}

impl<C: Config> Default for MemPools<C> {
    fn default() -> Self {
        Self::new()
    }
}

/// The request rounded up to the granule; `OutOfMemory` if that overflows.
fn rounded(bytes: u64) -> Result<u64> {
    bytes.checked_add(GRANULE - 1).map(|b| b / GRANULE * GRANULE).ok_or(Error::OutOfMemory)
}

/// Whether a block of `size` bytes serves a request of `r` (rounded) bytes: at most an eighth
/// larger, as HIP's pools accept.
fn fits(size: u64, r: u64) -> bool {
    size >= r && size <= r.saturating_add(r / 8)
}

/// Whether stream `t` is ordered after a free made on stream `f` without any event: the same
/// stream, or the null stream's implicit synchronisation between them.
fn implicitly_after(f: &StreamInfo, t: &StreamInfo, follow: bool) -> bool {
    if f.id == t.id {
        return true;
    }
    follow && f.device == t.device && ((t.null && f.blocking) || (f.null && t.blocking))
}

impl<C: Config> State<C> {
    fn pool(&self, h: PoolHandle) -> Result<usize> {
        let l = table::lookup(POOL_TAG, h.0, self.pools.slots(), |p| p.generation);
        table::require(l, Error::InvalidValue, Error::InvalidValue)
    }

    fn handle(&self, i: usize) -> PoolHandle {
        let g = self.pools.slots().get(i).map_or(0, |p| p.generation.current());
        PoolHandle(table::encode(POOL_TAG, g, i))
    }

    fn new_pool(&mut self, device: u32, max_size: u64, is_default: bool) -> Result<usize> {
        let i = self.pools.slots().iter().position(|p| !p.used).ok_or(Error::OutOfMemory)?;
        let slot = self.pools.slots_mut().get_mut(i).ok_or(Error::OutOfMemory)?;
        let generation = slot.generation;
        *slot = PoolSlot { generation, used: true, device, max_size, is_default, ..PoolSlot::new() };
        slot.generation.occupy();
        Ok(i)
    }

    /// The default pool of `device` (< device count), created on first use.
    fn default_pool(&mut self, device: u32) -> Result<usize> {
        let d = device as usize;
        if let Some(Some(i)) = self.default.get(d) {
            return Ok(usize::from(*i));
        }
        let i = self.new_pool(device, 0, true)?;
        let i16 = u16::try_from(i).map_err(|_| Error::OutOfMemory)?;
        if let Some(slot) = self.default.get_mut(d) {
            *slot = Some(i16);
        }
        Ok(i)
    }

    fn current_pool(&mut self, device: u32) -> Result<usize> {
        match self.current.get(device as usize).copied().flatten() {
            Some(i) => Ok(usize::from(i)),
            None => self.default_pool(device),
        }
    }

    fn find(&self, address: u64) -> Option<usize> {
        self.blocks.as_view().iter().position(|b| b.address == address)
    }

    fn pool_mut(&mut self, pool: Option<u16>) -> Option<&mut PoolSlot> {
        pool.and_then(|p| self.pools.slots_mut().get_mut(usize::from(p)))
    }

    /// Removes block `k` and gives its memory back (its pool's books follow).
    fn drop_block(&mut self, host: &impl PoolHost, k: usize) {
        if k >= self.blocks.as_view().len() {
            return;
        }
        let b = self.blocks.as_mut_view().swap_remove(k);
        match b.state {
            BlockState::Free(f) => {
                if let Some(m) = f.mark {
                    host.forget(m);
                }
            }
            BlockState::Graph { mark: Some(m), .. } => host.forget(m),
            _ => {}
        }
        if let Some(p) = self.pool_mut(b.pool) {
            p.reserved = p.reserved.saturating_sub(b.size);
            if matches!(b.state, BlockState::Busy) {
                p.in_use = p.in_use.saturating_sub(b.size);
            }
        }
        host.release(b.address);
        self.retire_pools();
    }

    /// Frees the slots of destroyed pools that hold no block any more.
    fn retire_pools(&mut self) {
        for i in 0..self.pools.slots().len() {
            let Some(p) = self.pools.slots().get(i) else { continue };
            if !p.used || p.generation.live {
                continue;
            }
            let held = self.blocks.as_view().iter().any(|b| b.pool.map(usize::from) == Some(i));
            if !held {
                if let Some(p) = self.pools.slots_mut().get_mut(i) {
                    p.used = false;
                }
            }
        }
    }

    /// Gives back the completed free blocks of pool `pool` until its free bytes are at most
    /// `keep`; blocks that serve a request of `except` bytes are kept when `except` is set.
    fn release_completed(&mut self, host: &impl PoolHost, pool: usize, keep: u64) {
        let mut k = 0;
        while k < self.blocks.as_view().len() {
            let free_bytes = self.pools.slots().get(pool).map_or(0, |p| p.reserved.saturating_sub(p.in_use));
            if free_bytes <= keep {
                return;
            }
            let done = match self.blocks.as_view().get(k) {
                Some(b) if b.pool.map(usize::from) == Some(pool) => match b.state {
                    BlockState::Free(f) => f.mark.is_none_or(|m| host.mark_done(m)),
                    _ => false,
                },
                _ => false,
            };
            if done {
                self.drop_block(host, k);
            } else {
                k += 1;
            }
        }
    }
}

impl<C: Config> MemPools<C> {
    /// No pools yet (each device's default pool is made on first use).
    pub const fn new() -> Self {
        MemPools {
            state: spin::Mutex::new(State {
                pools: <C::Pools<PoolSlot> as Table<PoolSlot>>::EMPTY,
                blocks: <C::PoolBlocks<Block> as FixedVec<Block>>::EMPTY,
                default: [None; MAX_DEVICES],
                current: [None; MAX_DEVICES],
                seq: 0,
                notes: [None; NOTES],
                next_note: 0,
            }),
        }
    }

    fn check_device(host: &impl PoolHost, device: u32, err: Error) -> Result<()> {
        if device >= host.device_count()? {
            return Err(err);
        }
        Ok(())
    }

    // ----- pools ---------------------------------------------------------------------------

    /// `hipDeviceGetDefaultMemPool`: a device out of range is `InvalidDevice`.
    pub fn default_pool(&self, host: &impl PoolHost, device: u32) -> Result<PoolHandle> {
        Self::check_device(host, device, Error::InvalidDevice)?;
        let mut st = self.state.lock();
        let i = st.default_pool(device)?;
        Ok(st.handle(i))
    }

    /// `hipDeviceGetMemPool`: the pool `hipMallocAsync` on `device` allocates from; a device
    /// out of range is `InvalidValue`.
    pub fn current_pool(&self, host: &impl PoolHost, device: u32) -> Result<PoolHandle> {
        Self::check_device(host, device, Error::InvalidValue)?;
        let mut st = self.state.lock();
        let i = st.current_pool(device)?;
        Ok(st.handle(i))
    }

    /// `hipDeviceSetMemPool`: a bad device or pool is `InvalidValue`, a pool of another device
    /// `InvalidDevice`; refused with `StreamCaptureUnsupported` while any capture exists.
    pub fn set_current_pool(&self, host: &impl PoolHost, device: u32, pool: PoolHandle) -> Result<()> {
        Self::check_device(host, device, Error::InvalidValue)?;
        let mut st = self.state.lock();
        let i = st.pool(pool)?;
        if host.any_capture() {
            return Err(Error::StreamCaptureUnsupported);
        }
        if st.pools.slots().get(i).map(|p| p.device) != Some(device) {
            return Err(Error::InvalidDevice);
        }
        let i16 = u16::try_from(i).map_err(|_| Error::InvalidValue)?;
        if let Some(c) = st.current.get_mut(device as usize) {
            *c = Some(i16);
        }
        Ok(())
    }

    /// `hipMemPoolCreate` on `device` (out of range: `InvalidValue`); `max_size` bounds the
    /// bytes the pool may reserve (0: no bound). Refused with `StreamCaptureUnsupported` while
    /// any capture exists; a full table is `OutOfMemory`.
    pub fn create(&self, host: &impl PoolHost, device: u32, max_size: u64) -> Result<PoolHandle> {
        Self::check_device(host, device, Error::InvalidValue)?;
        if host.any_capture() {
            return Err(Error::StreamCaptureUnsupported);
        }
        let mut st = self.state.lock();
        let i = st.new_pool(device, max_size, false)?;
        Ok(st.handle(i))
    }

    /// `hipMemPoolDestroy`: the handle goes stale at once; completed free blocks go back, and
    /// the rest of the pool follows once its last block is freed and its frees complete. A
    /// default pool, a destroyed or garbage handle are `InvalidValue`; refused with
    /// `StreamCaptureUnsupported` while any capture exists. A destroyed current pool gives way to
    /// the device's default pool.
    pub fn destroy(&self, host: &impl PoolHost, pool: PoolHandle) -> Result<()> {
        if host.any_capture() {
            return Err(Error::StreamCaptureUnsupported);
        }
        let mut st = self.state.lock();
        let i = st.pool(pool)?;
        let (device, is_default) =
            st.pools.slots().get(i).map(|p| (p.device, p.is_default)).ok_or(Error::InvalidValue)?;
        if is_default {
            return Err(Error::InvalidValue);
        }
        if let Some(p) = st.pools.slots_mut().get_mut(i) {
            p.generation.vacate();
        }
        if st.current.get(device as usize).copied().flatten().map(usize::from) == Some(i) {
            if let Some(c) = st.current.get_mut(device as usize) {
                *c = None;
            }
        }
        st.release_completed(host, i, 0);
        st.retire_pools();
        Ok(())
    }

    /// The device of a pool.
    pub fn pool_device(&self, pool: PoolHandle) -> Result<u32> {
        let st = self.state.lock();
        let i = st.pool(pool)?;
        st.pools.slots().get(i).map(|p| p.device).ok_or(Error::InvalidValue)
    }

    /// `hipMemPoolGetAttribute`.
    pub fn attribute(&self, pool: PoolHandle, attr: PoolAttr) -> Result<u64> {
        let st = self.state.lock();
        let p = st.pools.slots().get(st.pool(pool)?).ok_or(Error::InvalidValue)?;
        Ok(match attr {
            PoolAttr::ReuseFollowEventDependencies => u64::from(p.follow),
            PoolAttr::ReuseAllowOpportunistic => u64::from(p.opportunistic),
            PoolAttr::ReuseAllowInternalDependencies => u64::from(p.internal),
            PoolAttr::ReleaseThreshold => p.threshold,
            PoolAttr::ReservedMemCurrent => p.reserved,
            PoolAttr::ReservedMemHigh => p.reserved_high,
            PoolAttr::UsedMemCurrent => p.in_use,
            PoolAttr::UsedMemHigh => p.in_use_high,
        })
    }

    /// `hipMemPoolSetAttribute`: the current-usage attributes are read only and the watermarks
    /// only take 0 (a reset to the current value): anything else is `InvalidValue`.
    pub fn set_attribute(&self, pool: PoolHandle, attr: PoolAttr, value: u64) -> Result<()> {
        let mut st = self.state.lock();
        let i = st.pool(pool)?;
        let p = st.pools.slots_mut().get_mut(i).ok_or(Error::InvalidValue)?;
        match attr {
            PoolAttr::ReuseFollowEventDependencies => p.follow = value != 0,
            PoolAttr::ReuseAllowOpportunistic => p.opportunistic = value != 0,
            PoolAttr::ReuseAllowInternalDependencies => p.internal = value != 0,
            PoolAttr::ReleaseThreshold => p.threshold = value,
            PoolAttr::ReservedMemHigh if value == 0 => p.reserved_high = p.reserved,
            PoolAttr::UsedMemHigh if value == 0 => p.in_use_high = p.in_use,
            _ => return Err(Error::InvalidValue),
        }
        Ok(())
    }

    /// `hipMemPoolSetAccess` for one device: `flags` is 0 (none), 1 (read) or 3 (read-write),
    /// anything above 3 `InvalidValue`; revoking (0) is `InvalidDevice`, as HIP answers it; a
    /// device out of range is `InvalidDevice`. The pool's own device always has read-write.
    pub fn set_access(&self, host: &impl PoolHost, pool: PoolHandle, device: u32, flags: u32) -> Result<()> {
        let mut st = self.state.lock();
        let i = st.pool(pool)?;
        Self::check_device(host, device, Error::InvalidDevice)?;
        let access = match flags {
            0 => return Err(Error::InvalidDevice),
            1 | 2 => Access::Read,
            3 => Access::ReadWrite,
            _ => return Err(Error::InvalidValue),
        };
        let p = st.pools.slots_mut().get_mut(i).ok_or(Error::InvalidValue)?;
        if p.device != device {
            if let Some(a) = p.access.get_mut(device as usize) {
                *a = access;
            }
        }
        Ok(())
    }

    /// `hipMemPoolGetAccess`: read-write for the pool's own device, what was set for others.
    pub fn access(&self, host: &impl PoolHost, pool: PoolHandle, device: u32) -> Result<Access> {
        let st = self.state.lock();
        let p = st.pools.slots().get(st.pool(pool)?).ok_or(Error::InvalidValue)?;
        Self::check_device(host, device, Error::InvalidValue)?;
        if p.device == device {
            return Ok(Access::ReadWrite);
        }
        Ok(p.access.get(device as usize).copied().unwrap_or(Access::None))
    }

    /// `hipMemPoolTrimTo`: gives completed free blocks back until the pool's free bytes are at
    /// most `keep`. Blocks in use, and blocks whose free is still pending, stay.
    pub fn trim_to(&self, host: &impl PoolHost, pool: PoolHandle, keep: u64) -> Result<()> {
        let mut st = self.state.lock();
        let i = st.pool(pool)?;
        st.release_completed(host, i, keep);
        Ok(())
    }

    /// What a synchronisation point (`hipStreamSynchronize`, `hipEventSynchronize`,
    /// `hipDeviceSynchronize`) does to every pool: completed free blocks go back until the
    /// pool's free bytes are at most its release threshold (all of a destroyed pool's).
    pub fn release_on_sync(&self, host: &impl PoolHost) {
        let mut st = self.state.lock();
        for i in 0..st.pools.slots().len() {
            let Some(p) = st.pools.slots().get(i) else { continue };
            if !p.used {
                continue;
            }
            let keep = if p.generation.live { p.threshold } else { 0 };
            st.release_completed(host, i, keep);
        }
        st.retire_pools();
    }

    // ----- allocation ----------------------------------------------------------------------

    /// `hipMallocAsync`: `bytes` from the current pool of the stream's device, in the order of
    /// `s`. Zero bytes gives address 0. On a capturing stream: a graph allocation.
    pub fn malloc_async(&self, host: &impl PoolHost, s: StreamHandle, bytes: u64) -> Result<Allocation> {
        let info = host.stream_info(s)?;
        let mut st = self.state.lock();
        let pool = st.current_pool(info.device)?;
        self.allocate(&mut st, host, pool, s, &info, bytes)
    }

    /// `hipMallocFromPoolAsync`: as [`malloc_async`](Self::malloc_async) from `pool` (a stale
    /// or garbage handle is `InvalidValue`), which may belong to another device than `s`.
    pub fn malloc_from_pool_async(
        &self,
        host: &impl PoolHost,
        pool: PoolHandle,
        s: StreamHandle,
        bytes: u64,
    ) -> Result<Allocation> {
        let pool = self.state.lock().pool(pool)?;
        let info = host.stream_info(s)?;
        let mut st = self.state.lock();
        self.allocate(&mut st, host, pool, s, &info, bytes)
    }

    fn allocate(
        &self,
        st: &mut State<C>,
        host: &impl PoolHost,
        pool: usize,
        s: StreamHandle,
        info: &StreamInfo,
        bytes: u64,
    ) -> Result<Allocation> {
        let p = *st.pools.slots().get(pool).ok_or(Error::InvalidValue)?;
        if !p.generation.live {
            return Err(Error::InvalidValue);
        }
        if bytes == 0 {
            return Ok(Allocation { address: 0, size: 0, device: p.device });
        }
        let r = rounded(bytes)?;
        if let Capturing::Into(graph) = host.capturing(s)? {
            return Self::graph_alloc(st, host, s, p.device, graph, r);
        }
        let pool16 = u16::try_from(pool).map_err(|_| Error::OutOfMemory)?;
        let mine = |b: &Block| b.pool == Some(pool16) && fits(b.size, r);
        // 1. A free block this stream is ordered after.
        let ordered = st.blocks.as_view().iter().position(|b| {
            mine(b)
                && match b.state {
                    BlockState::Free(f) => {
                        implicitly_after(&f.stream, info, p.follow)
                            || (p.follow && f.followers.contains(&info.id) && info.id != 0)
                    }
                    _ => false,
                }
        });
        // 2. A free block whose free has completed (always, when nothing records the free).
        let pick = ordered.or_else(|| {
            st.blocks.as_view().iter().position(|b| {
                mine(b)
                    && match b.state {
                        BlockState::Free(f) => match f.mark {
                            None => true,
                            Some(m) => p.opportunistic && host.mark_done(m),
                        },
                        _ => false,
                    }
            })
        });
        if let Some(k) = pick {
            return Ok(Self::take(st, host, k));
        }
        // 3. New memory.
        match Self::fresh(st, host, pool, pool16, r) {
            Ok(a) => return Ok(a),
            Err(Error::OutOfMemory) => {}
            Err(e) => return Err(e),
        }
        // Room: give back completed free blocks of the pool that do not fit, then try again.
        st.release_completed(host, pool, 0);
        match Self::fresh(st, host, pool, pool16, r) {
            Ok(a) => return Ok(a),
            Err(Error::OutOfMemory) => {}
            Err(e) => return Err(e),
        }
        // 4. A block whose free is pending, the stream made to wait for the free.
        if p.internal {
            let pending = st.blocks.as_view().iter().position(|b| mine(b) && matches!(b.state, BlockState::Free(_)));
            if let Some(k) = pending {
                if let Some(BlockState::Free(FreeState { mark: Some(m), .. })) =
                    st.blocks.as_view().get(k).map(|b| b.state)
                {
                    host.wait_mark(s, m)?;
                }
                return Ok(Self::take(st, host, k));
            }
        }
        Err(Error::OutOfMemory)
    }

    /// Hands free block `k` out.
    fn take(st: &mut State<C>, host: &impl PoolHost, k: usize) -> Allocation {
        let Some(b) = st.blocks.as_mut_view().get_mut(k) else { return Allocation { address: 0, size: 0, device: 0 } };
        if let BlockState::Free(FreeState { mark: Some(m), .. }) = b.state {
            host.forget(m);
        }
        b.state = BlockState::Busy;
        let a = Allocation { address: b.address, size: b.size, device: b.device };
        let pool = b.pool;
        if let Some(p) = st.pool_mut(pool) {
            p.add_in_use(a.size);
        }
        a
    }

    /// A new busy block of `r` bytes for pool `pool`; `OutOfMemory` when the backend, the
    /// pool's maximum size or the block table says no.
    fn fresh(st: &mut State<C>, host: &impl PoolHost, pool: usize, pool16: u16, r: u64) -> Result<Allocation> {
        let p = st.pools.slots().get(pool).ok_or(Error::InvalidValue)?;
        let device = p.device;
        if p.max_size != 0 && p.reserved.saturating_add(r) > p.max_size {
            return Err(Error::OutOfMemory);
        }
        if st.blocks.as_view().is_full() {
            return Err(Error::OutOfMemory);
        }
        let address = host.alloc(device, r)?;
        let block = Block { address, size: r, device, pool: Some(pool16), state: BlockState::Busy };
        if st.blocks.as_mut_view().push(block).is_err() {
            host.release(address);
            return Err(Error::OutOfMemory);
        }
        if let Some(p) = st.pools.slots_mut().get_mut(pool) {
            p.add_reserved(r);
            p.add_in_use(r);
        }
        Ok(Allocation { address, size: r, device })
    }

    /// A graph allocation of `r` bytes on `device`, recorded into the capture of `s`.
    fn graph_alloc(
        st: &mut State<C>,
        host: &impl PoolHost,
        s: StreamHandle,
        device: u32,
        graph: u64,
        r: u64,
    ) -> Result<Allocation> {
        if st.blocks.as_view().is_full() {
            return Err(Error::OutOfMemory);
        }
        let address = host.alloc(device, r)?;
        if let Err(e) = host.capture_node(s, MemNode::Alloc { address, bytes: r }) {
            host.release(address);
            return Err(e);
        }
        let state = BlockState::Graph { owner: graph, freed_in_graph: false, outstanding: false, mark: None };
        if st.blocks.as_mut_view().push(Block { address, size: r, device, pool: None, state }).is_err() {
            host.release(address);
            return Err(Error::OutOfMemory);
        }
        Ok(Allocation { address, size: r, device })
    }

    // ----- frees ---------------------------------------------------------------------------

    /// `hipFreeAsync`: the block becomes free at this point of `s`. A block already free (a
    /// double free) is `InvalidValue`; so is, on a capturing stream, anything but a graph
    /// allocation of that capture not yet freed in it (which records a memory-free node).
    /// Memory of no pool is [`Freed::NotPooled`] (nothing done).
    pub fn free_async(&self, host: &impl PoolHost, s: StreamHandle, address: u64) -> Result<Freed> {
        let info = host.stream_info(s)?;
        let capturing = host.capturing(s)?;
        let mut st = self.state.lock();
        let Some(k) = st.find(address) else {
            return match capturing {
                Capturing::Into(_) => Err(Error::InvalidValue),
                Capturing::No => Ok(Freed::NotPooled),
            };
        };
        let b = *st.blocks.as_view().get(k).ok_or(Error::InvalidValue)?;
        match (b.state, capturing) {
            (BlockState::Busy, Capturing::No) => {
                let mark = host.mark(s, info.device)?;
                st.seq += 1;
                let free = FreeState { mark, stream: info, seq: st.seq, followers: [0; FOLLOWERS] };
                if let Some(blk) = st.blocks.as_mut_view().get_mut(k) {
                    blk.state = BlockState::Free(free);
                }
                if let Some(p) = st.pool_mut(b.pool) {
                    p.in_use = p.in_use.saturating_sub(b.size);
                }
                Ok(Freed::Pooled)
            }
            (BlockState::Graph { owner, freed_in_graph: false, outstanding, mark }, Capturing::Into(g))
                if owner == g =>
            {
                host.capture_node(s, MemNode::Free(address))?;
                if let Some(blk) = st.blocks.as_mut_view().get_mut(k) {
                    blk.state = BlockState::Graph { owner, freed_in_graph: true, outstanding, mark };
                }
                Ok(Freed::Graph)
            }
            (BlockState::Graph { owner, freed_in_graph, outstanding: true, mark: None }, Capturing::No) => {
                let mark = host.mark(s, info.device)?;
                if let Some(blk) = st.blocks.as_mut_view().get_mut(k) {
                    blk.state = BlockState::Graph { owner, freed_in_graph, outstanding: false, mark };
                }
                Ok(Freed::Graph)
            }
            _ => Err(Error::InvalidValue),
        }
    }

    /// `hipFree` of pool memory: the block's device finishes its work, then the block is free
    /// at once (reusable by any stream). [`Freed::NotPooled`] for memory of no pool; a block
    /// already free is `InvalidValue`.
    pub fn free(&self, host: &impl PoolHost, address: u64) -> Result<Freed> {
        let mut st = self.state.lock();
        let Some(k) = st.find(address) else { return Ok(Freed::NotPooled) };
        let b = *st.blocks.as_view().get(k).ok_or(Error::InvalidValue)?;
        match b.state {
            BlockState::Busy => {
                host.wait_device(b.device)?;
                st.seq += 1;
                let stream = StreamInfo { device: b.device, ..StreamInfo::default() };
                let free = FreeState { mark: None, stream, seq: st.seq, followers: [0; FOLLOWERS] };
                if let Some(blk) = st.blocks.as_mut_view().get_mut(k) {
                    blk.state = BlockState::Free(free);
                }
                if let Some(p) = st.pool_mut(b.pool) {
                    p.in_use = p.in_use.saturating_sub(b.size);
                }
                Ok(Freed::Pooled)
            }
            BlockState::Graph { owner, freed_in_graph, outstanding: true, mark: None } => {
                host.wait_device(b.device)?;
                if let Some(blk) = st.blocks.as_mut_view().get_mut(k) {
                    blk.state = BlockState::Graph { owner, freed_in_graph, outstanding: false, mark: None };
                }
                Ok(Freed::Graph)
            }
            _ => Err(Error::InvalidValue),
        }
    }

    // ----- event dependencies --------------------------------------------------------------

    /// `hipEventRecordWithFlags`, remembered so that a later wait on the event can follow it:
    /// frees before this record are ordered before whoever waits on it.
    pub fn record_event(&self, host: &impl PoolHost, e: EventHandle, s: StreamHandle, flags: u32) -> Result<()> {
        let mut st = self.state.lock();
        let seq = st.seq;
        host.record_event(e, s, flags)?;
        // A record into a capture is no point of any stream's execution.
        if let (Ok(Capturing::No), Ok(info)) = (host.capturing(s), host.stream_info(s)) {
            let at = st.next_note % NOTES;
            if let Some(n) = st.notes.get_mut(at) {
                *n = Some(Note { event: e.0, stream: info.id, seq });
            }
            st.next_note = (at + 1) % NOTES;
            // A newer record of the same event replaces the older one.
            for (j, n) in st.notes.iter_mut().enumerate() {
                if j != at && n.is_some_and(|n| n.event == e.0) {
                    *n = None;
                }
            }
        }
        Ok(())
    }

    /// `hipStreamWaitEvent`: with the wait made, blocks freed on the event's stream before its
    /// record become reusable on `s` at once (pools following event dependencies).
    pub fn wait_event(&self, host: &impl PoolHost, s: StreamHandle, e: EventHandle, flags: u32) -> Result<()> {
        let mut st = self.state.lock();
        host.wait_event(s, e, flags)?;
        let Some(note) = st.notes.iter().flatten().find(|n| n.event == e.0).copied() else { return Ok(()) };
        let (Ok(Capturing::No), Ok(info)) = (host.capturing(s), host.stream_info(s)) else { return Ok(()) };
        for b in st.blocks.as_mut_view().iter_mut() {
            if let BlockState::Free(f) = &mut b.state {
                if f.stream.id == note.stream && f.seq <= note.seq && !f.followers.contains(&info.id) {
                    if let Some(slot) = f.followers.iter_mut().find(|x| **x == 0) {
                        *slot = info.id;
                    }
                }
            }
        }
        Ok(())
    }

    // ----- graph allocations ---------------------------------------------------------------

    /// Whether graph `owner` owns any allocation.
    pub fn graph_owns_memory(&self, owner: u64) -> bool {
        let st = self.state.lock();
        st.blocks.as_view().iter().any(|b| matches!(b.state, BlockState::Graph { owner: o, .. } if o == owner))
    }

    /// Moves the graph allocations of `from` to `to` (a graph handed over under a new owner).
    pub fn graph_rename(&self, from: u64, to: u64) {
        let mut st = self.state.lock();
        for b in st.blocks.as_mut_view().iter_mut() {
            if let BlockState::Graph { owner, .. } = &mut b.state {
                if *owner == from {
                    *owner = to;
                }
            }
        }
    }

    /// Launches graph `owner` on `s` through `launch`: its allocations that the graph does not
    /// free itself must not be outstanding from an earlier launch (`InvalidValue`) unless
    /// `auto_free`; `s` first waits for the user's stream-ordered frees of them. After the
    /// launch they are outstanding until the user frees them.
    pub fn graph_launch(
        &self,
        host: &impl PoolHost,
        owner: u64,
        s: StreamHandle,
        auto_free: bool,
        launch: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let mut st = self.state.lock();
        let ours = |b: &Block| matches!(b.state, BlockState::Graph { owner: o, .. } if o == owner);
        if !auto_free
            && st.blocks.as_view().iter().any(|b| {
                ours(b) && matches!(b.state, BlockState::Graph { freed_in_graph: false, outstanding: true, .. })
            })
        {
            return Err(Error::InvalidValue);
        }
        for b in st.blocks.as_view().iter() {
            if let BlockState::Graph { owner: o, mark: Some(m), .. } = b.state {
                if o == owner {
                    host.wait_mark(s, m)?;
                }
            }
        }
        launch()?;
        for b in st.blocks.as_mut_view().iter_mut() {
            if let BlockState::Graph { owner: o, freed_in_graph, outstanding, mark } = &mut b.state {
                if *o == owner {
                    if let Some(m) = mark.take() {
                        host.forget(m);
                    }
                    *outstanding = !*freed_in_graph;
                }
            }
        }
        Ok(())
    }

    /// Graph `owner` and everything instantiated from it are gone: its allocations go back to
    /// the backend once their devices are idle (`dropped` hears of each), except those still
    /// outstanding, which become ordinary allocations of their device's default pool (freed by
    /// the user later).
    pub fn graph_release(&self, host: &impl PoolHost, owner: u64, mut dropped: impl FnMut(u64)) -> Result<()> {
        let mut st = self.state.lock();
        let mut waited = [false; MAX_DEVICES];
        let mut k = 0;
        while k < st.blocks.as_view().len() {
            let Some(b) = st.blocks.as_view().get(k).copied() else { break };
            let BlockState::Graph { owner: o, outstanding, mark, .. } = b.state else {
                k += 1;
                continue;
            };
            if o != owner {
                k += 1;
                continue;
            }
            if let Some(w) = waited.get_mut(b.device as usize) {
                if !*w {
                    host.wait_device(b.device)?;
                    *w = true;
                }
            }
            if outstanding {
                let pool = st.default_pool(b.device)?;
                let pool16 = u16::try_from(pool).map_err(|_| Error::OutOfMemory)?;
                if let Some(m) = mark {
                    host.forget(m);
                }
                if let Some(blk) = st.blocks.as_mut_view().get_mut(k) {
                    blk.pool = Some(pool16);
                    blk.state = BlockState::Busy;
                }
                if let Some(p) = st.pools.slots_mut().get_mut(pool) {
                    p.add_reserved(b.size);
                    p.add_in_use(b.size);
                }
                k += 1;
            } else {
                dropped(b.address);
                st.drop_block(host, k);
            }
        }
        Ok(())
    }

    /// `hipDeviceReset` of `device`: every block of the device goes back to the backend
    /// (`dropped` hears of each), its pools hold nothing, and its current pool is the default
    /// again. The caller has waited for the device's work.
    pub fn device_reset(&self, host: &impl PoolHost, device: u32, mut dropped: impl FnMut(u64)) {
        let mut st = self.state.lock();
        let mut k = 0;
        while k < st.blocks.as_view().len() {
            match st.blocks.as_view().get(k) {
                Some(b) if b.device == device => {
                    dropped(b.address);
                    st.drop_block(host, k);
                }
                _ => k += 1,
            }
        }
        if let Some(c) = st.current.get_mut(device as usize) {
            *c = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::cell::{Cell, RefCell};

    /// A host that records what the pools ask of it. Streams: handle n has id n; 0 is the null
    /// stream (id 100); odd handles are blocking. Marks complete when `done` says so.
    #[derive(Default)]
    struct Fake {
        next: Cell<u64>,
        released: RefCell<heapless::Vec<u64, 64>>,
        done: RefCell<heapless::Vec<u64, 64>>,
        waits: RefCell<heapless::Vec<(u64, u64), 16>>,
        forgotten: Cell<u32>,
        capture: Cell<Option<u64>>,
        nodes: RefCell<heapless::Vec<MemNode, 16>>,
        limit: Cell<u64>,
        allocated: Cell<u64>,
    }

    impl PoolHost for Fake {
        fn device_count(&self) -> Result<u32> {
            Ok(2)
        }
        fn stream_info(&self, s: StreamHandle) -> Result<StreamInfo> {
            let null = s.0 == 0;
            Ok(StreamInfo { id: if null { 100 } else { s.0 }, device: 0, null, blocking: !null && s.0 % 2 == 1 })
        }
        fn capturing(&self, _s: StreamHandle) -> Result<Capturing> {
            Ok(self.capture.get().map_or(Capturing::No, Capturing::Into))
        }
        fn any_capture(&self) -> bool {
            self.capture.get().is_some()
        }
        fn alloc(&self, _device: u32, bytes: u64) -> Result<u64> {
            if self.limit.get() != 0 && self.allocated.get() + bytes > self.limit.get() {
                return Err(Error::OutOfMemory);
            }
            self.allocated.set(self.allocated.get() + bytes);
            self.next.set(self.next.get() + 0x10000);
            Ok(self.next.get())
        }
        fn release(&self, address: u64) {
            self.released.borrow_mut().push(address).unwrap();
        }
        fn mark(&self, s: StreamHandle, _device: u32) -> Result<Option<Mark>> {
            self.next.set(self.next.get() + 1);
            Ok(Some(Mark(self.next.get() << 8 | s.0)))
        }
        fn mark_done(&self, m: Mark) -> bool {
            self.done.borrow().contains(&m.0)
        }
        fn wait_mark(&self, s: StreamHandle, m: Mark) -> Result<()> {
            self.waits.borrow_mut().push((s.0, m.0)).unwrap();
            Ok(())
        }
        fn forget(&self, _m: Mark) {
            self.forgotten.set(self.forgotten.get() + 1);
        }
        fn wait_device(&self, _device: u32) -> Result<()> {
            Ok(())
        }
        fn capture_node(&self, _s: StreamHandle, node: MemNode) -> Result<()> {
            self.nodes.borrow_mut().push(node).unwrap();
            Ok(())
        }
        fn record_event(&self, _e: EventHandle, _s: StreamHandle, _flags: u32) -> Result<()> {
            Ok(())
        }
        fn wait_event(&self, _s: StreamHandle, _e: EventHandle, _flags: u32) -> Result<()> {
            Ok(())
        }
    }

    /// The default tables with 4 pools over 8 blocks.
    type Small = crate::config::Capacities<32, 64, 8, 64, 4, 32, 2, 40, 16, 8, 40, 64, 256, 160, 65536, 4, 8>;
    type Pools = MemPools<Small>;

    const A: StreamHandle = StreamHandle(3);
    const C: StreamHandle = StreamHandle(5);
    const NB: StreamHandle = StreamHandle(4);
    const NULL: StreamHandle = StreamHandle(0);

    fn complete_all(h: &Fake, pools: &Pools) {
        let st = pools.state.lock();
        for b in st.blocks.as_view().iter() {
            if let BlockState::Free(FreeState { mark: Some(m), .. }) = b.state {
                h.done.borrow_mut().push(m.0).unwrap();
            }
        }
    }

    #[test]
    fn same_stream_reuses_at_once_other_streams_do_not() {
        let (h, p) = (Fake::default(), Pools::new());
        let a = p.malloc_async(&h, A, 1000).unwrap();
        assert_eq!(a.size, 1024);
        assert_eq!(p.free_async(&h, A, a.address).unwrap(), Freed::Pooled);
        // Pending free: another stream gets new memory; the freeing stream the same block.
        let c = p.malloc_async(&h, NB, 1000).unwrap();
        assert_ne!(c.address, a.address);
        assert_eq!(p.malloc_async(&h, A, 1024).unwrap().address, a.address);
        // A block more than an eighth too big is not reused.
        p.free_async(&h, NB, c.address).unwrap();
        let d = p.malloc_async(&h, NB, 512).unwrap();
        assert_ne!(d.address, c.address);
        assert_eq!(p.free_async(&h, A, 0x1234).unwrap(), Freed::NotPooled);
        assert_eq!(p.free_async(&h, NB, d.address).unwrap(), Freed::Pooled);
        assert_eq!(p.free_async(&h, NB, d.address), Err(Error::InvalidValue));
        let pool = p.current_pool(&h, 0).unwrap();
        assert_eq!(p.attribute(pool, PoolAttr::UsedMemCurrent).unwrap(), 1024);
        assert_eq!(p.attribute(pool, PoolAttr::ReservedMemCurrent).unwrap(), 2 * 1024 + 512);
    }

    #[test]
    fn opportunistic_reuse_waits_for_completion_and_can_be_turned_off() {
        let (h, p) = (Fake::default(), Pools::new());
        let a = p.malloc_async(&h, A, 256).unwrap();
        p.free_async(&h, A, a.address).unwrap();
        complete_all(&h, &p);
        assert_eq!(p.malloc_async(&h, NB, 256).unwrap().address, a.address);
        let pool = p.default_pool(&h, 0).unwrap();
        p.set_attribute(pool, PoolAttr::ReuseAllowOpportunistic, 0).unwrap();
        p.free_async(&h, NB, a.address).unwrap();
        complete_all(&h, &p);
        assert_ne!(p.malloc_async(&h, A, 256).unwrap().address, a.address);
    }

    #[test]
    fn event_dependencies_are_followed_exactly() {
        let (h, p) = (Fake::default(), Pools::new());
        const W: StreamHandle = StreamHandle(6);
        let x = p.malloc_async(&h, NB, 256).unwrap();
        let y = p.malloc_async(&h, NB, 256).unwrap();
        p.free_async(&h, NB, x.address).unwrap();
        p.record_event(&h, EventHandle(77), NB, 0).unwrap();
        p.free_async(&h, NB, y.address).unwrap();
        p.wait_event(&h, W, EventHandle(77), 0).unwrap();
        // x was freed before the record: W may take it; y after: not.
        assert_eq!(p.malloc_async(&h, W, 256).unwrap().address, x.address);
        assert_ne!(p.malloc_async(&h, W, 256).unwrap().address, y.address);
        // The null stream is ordered after a blocking stream's free, not a non-blocking one's.
        let z = p.malloc_async(&h, C, 256).unwrap();
        p.free_async(&h, C, z.address).unwrap();
        assert_eq!(p.malloc_async(&h, NULL, 256).unwrap().address, z.address);
        let pool = p.default_pool(&h, 0).unwrap();
        p.set_attribute(pool, PoolAttr::ReuseFollowEventDependencies, 0).unwrap();
        p.free_async(&h, C, z.address).unwrap();
        assert_ne!(p.malloc_async(&h, NULL, 256).unwrap().address, z.address);
    }

    #[test]
    fn internal_dependencies_only_when_memory_runs_out() {
        let (h, p) = (Fake::default(), Pools::new());
        h.limit.set(512);
        let a = p.malloc_async(&h, A, 512).unwrap();
        p.free_async(&h, A, a.address).unwrap();
        // Out of backend memory: NB waits for A's free and takes the block.
        assert_eq!(p.malloc_async(&h, NB, 512).unwrap().address, a.address);
        assert_eq!(h.waits.borrow().len(), 1);
        assert_eq!(h.waits.borrow()[0].0, NB.0);
        p.free_async(&h, NB, a.address).unwrap();
        let pool = p.default_pool(&h, 0).unwrap();
        p.set_attribute(pool, PoolAttr::ReuseAllowInternalDependencies, 0).unwrap();
        assert_eq!(p.malloc_async(&h, A, 512).map(|a| a.address), Err(Error::OutOfMemory));
    }

    #[test]
    fn trim_and_sync_release_completed_blocks_only() {
        let (h, p) = (Fake::default(), Pools::new());
        let pool = p.default_pool(&h, 0).unwrap();
        let a = p.malloc_async(&h, A, 256).unwrap();
        let b = p.malloc_async(&h, A, 512).unwrap();
        let c = p.malloc_async(&h, A, 1024).unwrap();
        for x in [a, b, c] {
            p.free_async(&h, A, x.address).unwrap();
        }
        p.trim_to(&h, pool, 0).unwrap();
        assert!(h.released.borrow().is_empty());
        complete_all(&h, &p);
        p.trim_to(&h, pool, 1024).unwrap();
        let left = p.attribute(pool, PoolAttr::ReservedMemCurrent).unwrap();
        assert!(left > 0 && left <= 1024, "{left}");
        p.set_attribute(pool, PoolAttr::ReleaseThreshold, 256).unwrap();
        p.release_on_sync(&h);
        assert_eq!(p.attribute(pool, PoolAttr::ReservedMemCurrent).unwrap(), 0);
        assert_eq!(p.attribute(pool, PoolAttr::ReservedMemHigh).unwrap(), 1792);
        p.set_attribute(pool, PoolAttr::ReservedMemHigh, 0).unwrap();
        assert_eq!(p.attribute(pool, PoolAttr::ReservedMemHigh).unwrap(), 0);
        assert_eq!(p.set_attribute(pool, PoolAttr::UsedMemHigh, 5), Err(Error::InvalidValue));
        assert_eq!(p.set_attribute(pool, PoolAttr::UsedMemCurrent, 0), Err(Error::InvalidValue));
        assert_eq!(h.released.borrow().len(), 3);
    }

    #[test]
    fn pools_default_current_destroy() {
        let (h, p) = (Fake::default(), Pools::new());
        let d0 = p.default_pool(&h, 0).unwrap();
        assert_eq!(p.default_pool(&h, 2), Err(Error::InvalidDevice));
        assert_eq!(p.current_pool(&h, 2), Err(Error::InvalidValue));
        assert_eq!(p.destroy(&h, d0), Err(Error::InvalidValue));
        let mine = p.create(&h, 0, 0).unwrap();
        assert_eq!(p.set_current_pool(&h, 1, mine), Err(Error::InvalidDevice));
        p.set_current_pool(&h, 0, mine).unwrap();
        let a = p.malloc_async(&h, A, 256).unwrap();
        assert_eq!(p.attribute(mine, PoolAttr::UsedMemCurrent).unwrap(), 256);
        p.destroy(&h, mine).unwrap();
        assert_eq!(p.current_pool(&h, 0).unwrap(), d0);
        assert_eq!(p.attribute(mine, PoolAttr::UsedMemCurrent), Err(Error::InvalidValue));
        assert_eq!(p.malloc_from_pool_async(&h, mine, A, 16).map(|a| a.address), Err(Error::InvalidValue));
        // The block outlives the pool's handle; freeing it and completing lets the pool go.
        p.free_async(&h, A, a.address).unwrap();
        complete_all(&h, &p);
        p.release_on_sync(&h);
        assert_eq!(h.released.borrow().len(), 1);
        assert!(p.state.lock().pools.slots().iter().filter(|s| s.used).count() == 1);
        h.capture.set(Some(9));
        assert_eq!(p.create(&h, 0, 0), Err(Error::StreamCaptureUnsupported));
    }

    #[test]
    fn graph_allocations_follow_their_graph() {
        let (h, p) = (Fake::default(), Pools::new());
        let plain = p.malloc_async(&h, A, 256).unwrap();
        h.capture.set(Some(42));
        let g = p.malloc_async(&h, A, 256).unwrap();
        let kept = p.malloc_async(&h, A, 256).unwrap();
        assert_eq!(p.free_async(&h, A, plain.address), Err(Error::InvalidValue));
        p.free_async(&h, A, g.address).unwrap();
        assert_eq!(p.free_async(&h, A, g.address), Err(Error::InvalidValue));
        assert_eq!(h.nodes.borrow().len(), 3);
        h.capture.set(None);
        assert!(p.graph_owns_memory(42));
        let launches = Cell::new(0);
        p.graph_launch(&h, 42, A, false, || {
            launches.set(launches.get() + 1);
            Ok(())
        })
        .unwrap();
        // `kept` is outstanding: a second launch before the user frees it is refused.
        assert_eq!(p.graph_launch(&h, 42, A, false, || Ok(())), Err(Error::InvalidValue));
        p.free_async(&h, NB, kept.address).unwrap();
        p.graph_launch(&h, 42, A, false, || {
            launches.set(launches.get() + 1);
            Ok(())
        })
        .unwrap();
        assert_eq!(launches.get(), 2);
        assert_eq!(h.waits.borrow().len(), 1);
        p.graph_release(&h, 42, |_| {}).unwrap();
        // g went back; kept (outstanding again) is an ordinary block now.
        assert_eq!(h.released.borrow().len(), 1);
        assert_eq!(p.free_async(&h, A, kept.address).unwrap(), Freed::Pooled);
        assert!(!p.graph_owns_memory(42));
    }
}
