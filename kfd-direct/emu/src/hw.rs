//! State every engine of an emulated GPU shares: the GPU clock, the status word of a hardware
//! queue (AQL or SDMA), and the seeded generator of the adversarial scheduler.

use std::time::Instant;

/// Ticks per second of the emulated GPU clock (signal timestamps, `gpu_clock_counter`).
pub const GPU_CLOCK_HZ: u64 = 100_000_000;

/// The emulated clocks.
#[derive(Debug)]
pub(crate) struct Clock {
    start: Instant,
}

impl Clock {
    pub(crate) fn new() -> Clock {
        Clock { start: Instant::now() }
    }

    /// GPU ticks at [`GPU_CLOCK_HZ`].
    ///
    /// In u64 arithmetic: a u128 division (`as_nanos() / 10`) is a library call that cost about
    /// 5 ns of the 30 ns a read takes, and a profiling queue reads the clock twice per dispatch,
    /// on the round trip's path (docs/architecture.md §6). u64 seconds times 10^8 overflows
    /// after some 5800 years of uptime.
    pub(crate) fn gpu_ticks(&self) -> u64 {
        const NS_PER_TICK: u32 = (1_000_000_000 / GPU_CLOCK_HZ) as u32;
        let e = self.start.elapsed();
        e.as_secs().wrapping_mul(GPU_CLOCK_HZ).wrapping_add(u64::from(e.subsec_nanos() / NS_PER_TICK))
    }
}

/// A cheap, monotonic-enough tick count for short pacing decisions (the TSC on x86-64, where
/// it is invariant; nanoseconds elsewhere). Never used for timestamps.
#[inline]
pub(crate) fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC has no preconditions; it only reads the time-stamp counter.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// Queue status values (one `AtomicU8` per queue).
pub(crate) mod status {
    /// Consuming packets.
    pub(crate) const ACTIVE: u8 = 0;
    /// Halted by a queue error (exception reported through the CWSR header).
    pub(crate) const ERROR: u8 = 1;
    /// A kernel never finished.
    pub(crate) const HUNG: u8 = 2;
    /// Evicted by a memory fault or a device reset.
    pub(crate) const EVICTED: u8 = 3;
    /// Destroyed by the driver: no engine touches the queue's memory any more.
    pub(crate) const DESTROYED: u8 = 4;
}

/// A small seeded generator (SplitMix64) for adversarial scheduling.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}
