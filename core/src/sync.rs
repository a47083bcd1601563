//! The atomics and the ring-slot memory that core shares with other agents, in one place so that
//! loom can check the production protocols themselves (the approach of tokio and crossbeam).
//!
//! # Normal builds
//!
//! [`atomic`] re-exports `portable_atomic`'s types, and [`SlotMemory`] is a pointer to raw ring
//! memory whose methods are inlined loads, stores and copies: nothing here costs anything (the
//! `ring` row of `cargo bench -p aqueduct --bench submit` against its packet floor shows it).
//!
//! # `RUSTFLAGS="--cfg loom"`
//!
//! The models in `core/tests/loom_ring.rs` and `core/tests/loom_signal.rs` drive `AqlRing` and
//! `AmdSignal` over memory loom owns:
//!
//! - each atomic in [`atomic`] is loom's atomic when a model creates it with `new_loom`, and a
//!   plain atomic when it is created with the `const fn new` (statics, the loopback's memory), so
//!   the rest of core still runs outside a model in a loom build;
//! - [`SlotMemory`] is raw memory or a `LoomRingMemory`, whose slot headers are loom atomics and
//!   whose 60-byte bodies are `loom::cell::UnsafeCell`s: loom sees every access the ring makes to
//!   a slot and reports a body access that the protocol does not order as a causality violation.
//!
//! # Planted bugs
//!
//! `--cfg loom_bug="NAME"` switches on one deliberate bug inside the production code (an
//! ordering weakened with [`unless_planted!`], or two steps swapped under `#[cfg]`), so that
//! `scripts/verify loom` can check that its model catches it. No other build sets the cfg.

pub use core::sync::atomic::Ordering;

/// `$order`, or `Relaxed` when the planted bug `loom_bug = $bug` is switched on (a constant:
/// normal builds see `$order` alone).
macro_rules! unless_planted {
    ($bug:tt, $order:expr) => {
        if cfg!(loom_bug = $bug) {
            $crate::sync::Ordering::Relaxed
        } else {
            $order
        }
    };
}
pub(crate) use unless_planted;

/// Atomic integers: `portable_atomic`'s normally (its 64-bit ones out of line where they are
/// not native, [`atomic64`]); under `cfg(loom)`, loom's for the objects a model creates.
#[cfg(not(loom))]
pub mod atomic {
    pub use super::atomic64::{AtomicI64, AtomicU64};
    pub use portable_atomic::AtomicU32;
}

/// core's 64-bit atomics outside loom models (ring indices, signal values, handles, counts).
///
/// Where 64-bit atomics are native these are `portable_atomic`'s, inlined. Elsewhere (32-bit
/// targets such as `thumbv7em-none-eabihf`) every 64-bit access is a short interrupt-free
/// section or a lock of `portable_atomic`'s, so each operation here is one out-of-line copy that
/// every caller calls instead of one inlined section per access (docs/architecture.md,
/// "Footprint"). Those copies run every operation `SeqCst`, whatever ordering the caller names:
/// never weaker than asked, and on a single-core image the same code as any other ordering.
pub mod atomic64 {
    #[cfg(target_has_atomic = "64")]
    pub use portable_atomic::{AtomicI64, AtomicU64};

    #[cfg(not(target_has_atomic = "64"))]
    pub use self::out_of_line::{AtomicI64, AtomicU64};

    #[cfg(not(target_has_atomic = "64"))]
    mod out_of_line {
        use core::sync::atomic::Ordering;
        use core::sync::atomic::Ordering::SeqCst;

        macro_rules! out_of_line {
            ($name:ident, $int:ty) => {
                #[doc = concat!("`portable_atomic::", stringify!($name), "`, each operation one out-of-line `SeqCst` copy.")]
                #[repr(transparent)]
                #[derive(Default)]
                pub struct $name(portable_atomic::$name);

                impl core::fmt::Debug for $name {
                    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                        core::fmt::Debug::fmt(&self.0, f)
                    }
                }

                impl $name {
                    /// A new atomic holding `v`.
                    pub const fn new(v: $int) -> Self {
                        $name(portable_atomic::$name::new(v))
                    }

                    /// `load` (`SeqCst`).
                    #[inline(never)]
                    pub fn load(&self, _order: Ordering) -> $int {
                        self.0.load(SeqCst)
                    }

                    /// `store` (`SeqCst`).
                    #[inline(never)]
                    pub fn store(&self, v: $int, _order: Ordering) {
                        self.0.store(v, SeqCst)
                    }

                    /// `swap` (`SeqCst`).
                    #[inline(never)]
                    pub fn swap(&self, v: $int, _order: Ordering) -> $int {
                        self.0.swap(v, SeqCst)
                    }

                    /// `fetch_add` (`SeqCst`).
                    #[inline(never)]
                    pub fn fetch_add(&self, v: $int, _order: Ordering) -> $int {
                        self.0.fetch_add(v, SeqCst)
                    }

                    /// `fetch_sub` (`SeqCst`).
                    #[inline(never)]
                    pub fn fetch_sub(&self, v: $int, _order: Ordering) -> $int {
                        self.0.fetch_sub(v, SeqCst)
                    }

                    /// `fetch_max` (`SeqCst`).
                    #[inline(never)]
                    pub fn fetch_max(&self, v: $int, _order: Ordering) -> $int {
                        self.0.fetch_max(v, SeqCst)
                    }

                    /// `fetch_min` (`SeqCst`).
                    #[inline(never)]
                    pub fn fetch_min(&self, v: $int, _order: Ordering) -> $int {
                        self.0.fetch_min(v, SeqCst)
                    }

                    /// `compare_exchange` (`SeqCst` both ways).
                    #[inline(never)]
                    pub fn compare_exchange(
                        &self,
                        current: $int,
                        new: $int,
                        _success: Ordering,
                        _failure: Ordering,
                    ) -> Result<$int, $int> {
                        self.0.compare_exchange(current, new, SeqCst, SeqCst)
                    }
                }
            };
        }

        out_of_line!(AtomicU64, u64);

        /// `portable_atomic::AtomicI64` over the bits of an [`AtomicU64`]: load, store, swap,
        /// add, sub and compare-exchange are `AtomicU64`'s out-of-line copies (two's complement:
        /// the same bits, the same wrapping), so the image has one copy of each for both types;
        /// only the signed min and max have their own.
        #[repr(transparent)]
        #[derive(Default)]
        pub struct AtomicI64(AtomicU64);

        impl core::fmt::Debug for AtomicI64 {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                core::fmt::Debug::fmt(&self.load(SeqCst), f)
            }
        }

        impl AtomicI64 {
            /// A new atomic holding `v`.
            pub const fn new(v: i64) -> Self {
                AtomicI64(AtomicU64::new(v as u64))
            }

            /// `load` (`SeqCst`).
            #[inline]
            pub fn load(&self, order: Ordering) -> i64 {
                self.0.load(order) as i64
            }

            /// `store` (`SeqCst`).
            #[inline]
            pub fn store(&self, v: i64, order: Ordering) {
                self.0.store(v as u64, order)
            }

            /// `swap` (`SeqCst`).
            #[inline]
            pub fn swap(&self, v: i64, order: Ordering) -> i64 {
                self.0.swap(v as u64, order) as i64
            }

            /// `fetch_add` (`SeqCst`, wrapping).
            #[inline]
            pub fn fetch_add(&self, v: i64, order: Ordering) -> i64 {
                self.0.fetch_add(v as u64, order) as i64
            }

            /// `fetch_sub` (`SeqCst`, wrapping).
            #[inline]
            pub fn fetch_sub(&self, v: i64, order: Ordering) -> i64 {
                self.0.fetch_sub(v as u64, order) as i64
            }

            /// The same memory as `portable_atomic`'s `AtomicI64`, for the signed operations.
            fn signed(&self) -> &portable_atomic::AtomicI64 {
                // SAFETY: the pointer is this atomic's own 8-byte value, aligned as an
                // AtomicU64 (8, as AtomicI64's) and live for `&self`; every access to it is
                // atomic and of the same size, whichever type makes it.
                unsafe { portable_atomic::AtomicI64::from_ptr(self.0 .0.as_ptr().cast::<i64>()) }
            }

            /// `fetch_max` (`SeqCst`, signed).
            #[inline(never)]
            pub fn fetch_max(&self, v: i64, _order: Ordering) -> i64 {
                self.signed().fetch_max(v, SeqCst)
            }

            /// `fetch_min` (`SeqCst`, signed).
            #[inline(never)]
            pub fn fetch_min(&self, v: i64, _order: Ordering) -> i64 {
                self.signed().fetch_min(v, SeqCst)
            }

            /// `compare_exchange` (`SeqCst` both ways).
            #[inline]
            pub fn compare_exchange(
                &self,
                current: i64,
                new: i64,
                success: Ordering,
                failure: Ordering,
            ) -> Result<i64, i64> {
                self.0
                    .compare_exchange(current as u64, new as u64, success, failure)
                    .map(|v| v as i64)
                    .map_err(|v| v as i64)
            }
        }
    }
}

/// Atomic integers: `portable_atomic`'s normally; under `cfg(loom)`, loom's for the objects a
/// model creates.
#[cfg(loom)]
pub mod atomic {
    use super::Ordering;

    #[derive(Debug)]
    enum Inner<P, L> {
        Plain(P),
        Loom(L),
    }

    macro_rules! loom_or_plain {
        ($name:ident, $int:ty) => {
            #[doc = concat!("`", stringify!($name), "`: loom's when made with `new_loom`, a plain atomic otherwise.")]
            #[derive(Debug)]
            pub struct $name(Inner<portable_atomic::$name, loom::sync::atomic::$name>);

            impl $name {
                /// A plain atomic, invisible to loom (statics, memory shared outside a model).
                pub const fn new(v: $int) -> Self {
                    $name(Inner::Plain(portable_atomic::$name::new(v)))
                }

                /// A loom atomic; only inside a loom model.
                #[track_caller]
                pub fn new_loom(v: $int) -> Self {
                    $name(Inner::Loom(loom::sync::atomic::$name::new(v)))
                }

                /// `load`.
                #[track_caller]
                pub fn load(&self, order: Ordering) -> $int {
                    match &self.0 {
                        Inner::Plain(a) => a.load(order),
                        Inner::Loom(a) => a.load(order),
                    }
                }

                /// `store`.
                #[track_caller]
                pub fn store(&self, v: $int, order: Ordering) {
                    match &self.0 {
                        Inner::Plain(a) => a.store(v, order),
                        Inner::Loom(a) => a.store(v, order),
                    }
                }

                /// `swap`.
                #[track_caller]
                pub fn swap(&self, v: $int, order: Ordering) -> $int {
                    match &self.0 {
                        Inner::Plain(a) => a.swap(v, order),
                        Inner::Loom(a) => a.swap(v, order),
                    }
                }

                /// `fetch_add`.
                #[track_caller]
                pub fn fetch_add(&self, v: $int, order: Ordering) -> $int {
                    match &self.0 {
                        Inner::Plain(a) => a.fetch_add(v, order),
                        Inner::Loom(a) => a.fetch_add(v, order),
                    }
                }

                /// `fetch_sub`.
                #[track_caller]
                pub fn fetch_sub(&self, v: $int, order: Ordering) -> $int {
                    match &self.0 {
                        Inner::Plain(a) => a.fetch_sub(v, order),
                        Inner::Loom(a) => a.fetch_sub(v, order),
                    }
                }

                /// `fetch_max`.
                #[track_caller]
                pub fn fetch_max(&self, v: $int, order: Ordering) -> $int {
                    match &self.0 {
                        Inner::Plain(a) => a.fetch_max(v, order),
                        Inner::Loom(a) => a.fetch_max(v, order),
                    }
                }

                /// `fetch_min`.
                #[track_caller]
                pub fn fetch_min(&self, v: $int, order: Ordering) -> $int {
                    match &self.0 {
                        Inner::Plain(a) => a.fetch_min(v, order),
                        Inner::Loom(a) => a.fetch_min(v, order),
                    }
                }

                /// `compare_exchange`.
                #[track_caller]
                pub fn compare_exchange(
                    &self,
                    current: $int,
                    new: $int,
                    success: Ordering,
                    failure: Ordering,
                ) -> Result<$int, $int> {
                    match &self.0 {
                        Inner::Plain(a) => a.compare_exchange(current, new, success, failure),
                        Inner::Loom(a) => a.compare_exchange(current, new, success, failure),
                    }
                }
            }

            impl Default for $name {
                fn default() -> Self {
                    $name::new(0)
                }
            }
        };
    }

    loom_or_plain!(AtomicI64, i64);
    loom_or_plain!(AtomicU32, u32);
    loom_or_plain!(AtomicU64, u64);
}

/// Bytes of one ring slot: one AQL packet (`aql::PACKET_BYTES`; `aql/ring.rs` checks at compile
/// time that the two agree, so this layer needs nothing from `aql`).
pub(crate) const SLOT_BYTES: usize = 64;
/// A ring slot's dwords (`aql::PacketWords`).
pub(crate) type SlotWords = [u32; SLOT_BYTES / 4];

#[cfg(loom)]
pub use slots::LoomRingMemory;
pub use slots::SlotMemory;

#[cfg(not(loom))]
mod slots {
    use core::ptr::NonNull;
    use portable_atomic::AtomicU32;

    use super::Ordering;
    use super::{SlotWords as PacketWords, SLOT_BYTES as PACKET_BYTES};

    /// The slots of an AQL ring: 64-byte packets whose dword 0 (header and setup) is accessed
    /// atomically and whose bytes 4..64 (the body) are plain memory owned by whoever the ring
    /// protocol says. Slot numbers are ring indices masked to the ring size, so every access
    /// stays inside the ring.
    #[derive(Debug, Clone, Copy)]
    pub struct SlotMemory {
        base: NonNull<u8>,
        mask: u64,
    }

    impl SlotMemory {
        /// Raw memory of `mask + 1` slots at `base`.
        ///
        /// # Safety
        /// `base` must be 64-byte aligned and point at `(mask + 1) * 64` bytes that stay valid,
        /// and are accessed only through the ring protocol, for as long as any copy is used.
        #[inline]
        pub(crate) const unsafe fn raw(base: NonNull<u8>, mask: u64) -> Self {
            SlotMemory { base, mask }
        }

        /// Number of slots minus one.
        #[inline(always)]
        pub(crate) fn mask(&self) -> u64 {
            self.mask
        }

        /// The first slot.
        pub(crate) fn base(&self) -> NonNull<u8> {
            self.base
        }

        #[inline(always)]
        fn slot(&self, index: u64) -> *mut u8 {
            // `index & mask < size`, so the slot lies inside the ring (raw's contract).
            self.base.as_ptr().wrapping_add((index & self.mask) as usize * PACKET_BYTES)
        }

        #[inline(always)]
        fn header(&self, index: u64) -> &AtomicU32 {
            // SAFETY: the slot is 64-byte aligned inside live ring memory (raw's contract), and
            // dword 0 is only ever accessed atomically.
            unsafe { AtomicU32::from_ptr(self.slot(index).cast::<u32>()) }
        }

        /// Loads dword 0 of the slot of `index`.
        #[inline(always)]
        pub(crate) fn load_header(&self, index: u64, order: Ordering) -> u32 {
            self.header(index).load(order)
        }

        /// Stores dword 0 of the slot of `index`.
        #[inline(always)]
        pub(crate) fn store_header(&self, index: u64, value: u32, order: Ordering) {
            self.header(index).store(value, order)
        }

        /// Copies `words[1..16]` into the body of the slot of `index`.
        ///
        /// # Safety
        /// The caller owns the slot's body: reserved by it and not published yet.
        #[inline(always)]
        pub(crate) unsafe fn write_body(&self, index: u64, words: &PacketWords) {
            // SAFETY: bytes 4..64 of a slot inside the ring, owned by the caller; `words` is 16
            // dwords, so 15 from index 1 are in bounds.
            unsafe { core::ptr::copy_nonoverlapping(words.as_ptr().add(1), self.slot(index).add(4).cast::<u32>(), 15) }
        }

        /// Copies the body of the slot of `index` into `words[1..16]`.
        ///
        /// # Safety
        /// The slot is published (its header seen with Acquire) and not retired yet.
        #[inline(always)]
        pub(crate) unsafe fn read_body(&self, index: u64, words: &mut PacketWords) {
            // SAFETY: bytes 4..64 of a slot inside the ring that no producer writes until it is
            // retired; `words` has room for 15 dwords from index 1.
            unsafe {
                core::ptr::copy_nonoverlapping(self.slot(index).add(4).cast::<u32>(), words.as_mut_ptr().add(1), 15)
            }
        }

        /// The busy-wait hint of a producer that waits for room.
        #[inline(always)]
        pub(crate) fn spin_loop(&self) {
            core::hint::spin_loop();
        }
    }
}

#[cfg(loom)]
mod slots {
    use core::ptr::NonNull;

    use super::atomic::AtomicU64;
    use super::Ordering;
    use super::{SlotWords as PacketWords, SLOT_BYTES as PACKET_BYTES};

    /// One slot of a [`LoomRingMemory`].
    struct LoomSlot {
        header: loom::sync::atomic::AtomicU32,
        body: loom::cell::UnsafeCell<[u32; 15]>,
    }

    /// The memory of an AQL ring of `N` slots with its two indices, owned by a loom model.
    pub struct LoomRingMemory<const N: usize> {
        slots: [LoomSlot; N],
        /// The ring's write index.
        pub write_index: AtomicU64,
        /// The ring's read index.
        pub read_index: AtomicU64,
    }

    impl<const N: usize> LoomRingMemory<N> {
        /// Slots with header 0 (`invalidate_all` makes them INVALID) and both indices at `start`.
        /// Only inside a loom model.
        pub fn new(start: u64) -> Self {
            LoomRingMemory {
                slots: core::array::from_fn(|_| LoomSlot {
                    header: loom::sync::atomic::AtomicU32::new(0),
                    body: loom::cell::UnsafeCell::new([0; 15]),
                }),
                write_index: AtomicU64::new_loom(start),
                read_index: AtomicU64::new_loom(start),
            }
        }

        /// The slots, for `SlotMemory::loom`.
        pub(crate) fn base(&self) -> NonNull<u8> {
            NonNull::from(&self.slots).cast()
        }
    }

    #[derive(Debug, Clone, Copy)]
    enum Kind {
        /// Raw memory of 64-byte slots (the loopback, tests outside a model).
        Raw(NonNull<u8>),
        /// The slots of a `LoomRingMemory`.
        Loom(NonNull<u8>),
    }

    /// The slots of an AQL ring: raw memory, or a [`LoomRingMemory`]'s (loom build).
    #[derive(Debug, Clone, Copy)]
    pub struct SlotMemory {
        kind: Kind,
        mask: u64,
    }

    impl SlotMemory {
        /// Raw memory of `mask + 1` slots at `base`.
        ///
        /// # Safety
        /// As in normal builds: `base` is 64-byte aligned and points at `(mask + 1) * 64` bytes
        /// that stay valid, and are accessed only through the ring protocol, while used.
        pub(crate) const unsafe fn raw(base: NonNull<u8>, mask: u64) -> Self {
            SlotMemory { kind: Kind::Raw(base), mask }
        }

        /// The slots of `mem`, `mask + 1 == N`.
        ///
        /// # Safety
        /// `mem` outlives every copy of the result.
        pub(crate) unsafe fn loom<const N: usize>(mem: &LoomRingMemory<N>) -> Self {
            SlotMemory { kind: Kind::Loom(mem.base()), mask: N as u64 - 1 }
        }

        pub(crate) fn mask(&self) -> u64 {
            self.mask
        }

        /// The first slot.
        pub(crate) fn base(&self) -> NonNull<u8> {
            match self.kind {
                Kind::Raw(b) | Kind::Loom(b) => b,
            }
        }

        fn raw_slot(base: NonNull<u8>, index: u64, mask: u64) -> *mut u8 {
            base.as_ptr().wrapping_add((index & mask) as usize * PACKET_BYTES)
        }

        fn loom_slot(&self, base: NonNull<u8>, index: u64) -> &LoomSlot {
            // SAFETY: `base` is the slot array of a live LoomRingMemory of mask + 1 slots
            // (loom's contract), and `index & mask` is inside it.
            unsafe { &*base.cast::<LoomSlot>().as_ptr().add((index & self.mask) as usize) }
        }

        fn raw_header(&self, base: NonNull<u8>, index: u64) -> &portable_atomic::AtomicU32 {
            // SAFETY: as in normal builds (raw's contract).
            unsafe { portable_atomic::AtomicU32::from_ptr(Self::raw_slot(base, index, self.mask).cast::<u32>()) }
        }

        pub(crate) fn load_header(&self, index: u64, order: Ordering) -> u32 {
            match self.kind {
                Kind::Raw(base) => self.raw_header(base, index).load(order),
                Kind::Loom(base) => self.loom_slot(base, index).header.load(order),
            }
        }

        pub(crate) fn store_header(&self, index: u64, value: u32, order: Ordering) {
            match self.kind {
                Kind::Raw(base) => self.raw_header(base, index).store(value, order),
                Kind::Loom(base) => self.loom_slot(base, index).header.store(value, order),
            }
        }

        /// # Safety
        /// As in normal builds: the caller owns the slot's body.
        pub(crate) unsafe fn write_body(&self, index: u64, words: &PacketWords) {
            let src = words.as_ptr().wrapping_add(1);
            match self.kind {
                // SAFETY: as in normal builds.
                Kind::Raw(base) => unsafe {
                    core::ptr::copy_nonoverlapping(src, Self::raw_slot(base, index, self.mask).add(4).cast::<u32>(), 15)
                },
                Kind::Loom(base) => self.loom_slot(base, index).body.with_mut(|body| {
                    // SAFETY: loom checks the caller's claim that nobody else accesses the body.
                    unsafe { core::ptr::copy_nonoverlapping(src, body.cast::<u32>(), 15) }
                }),
            }
        }

        /// # Safety
        /// As in normal builds: the slot is published and not retired.
        pub(crate) unsafe fn read_body(&self, index: u64, words: &mut PacketWords) {
            let dst = words.as_mut_ptr().wrapping_add(1);
            match self.kind {
                // SAFETY: as in normal builds.
                Kind::Raw(base) => unsafe {
                    core::ptr::copy_nonoverlapping(Self::raw_slot(base, index, self.mask).add(4).cast::<u32>(), dst, 15)
                },
                Kind::Loom(base) => self.loom_slot(base, index).body.with(|body| {
                    // SAFETY: loom checks the caller's claim that no producer writes the body.
                    unsafe { core::ptr::copy_nonoverlapping(body.cast::<u32>(), dst, 15) }
                }),
            }
        }

        /// The busy-wait hint; a yield to loom's scheduler for loom memory.
        pub(crate) fn spin_loop(&self) {
            match self.kind {
                Kind::Raw(_) => core::hint::spin_loop(),
                Kind::Loom(_) => loom::hint::spin_loop(),
            }
        }
    }
}
