//! State every engine of an emulated GPU shares: the GPU clock, the status word of a hardware
//! queue (AQL or SDMA), and the seeded generator of the adversarial scheduler.

use std::time::Instant;

/// Ticks per second of the emulated GPU clock (signal timestamps, `gpu_clock_counter`).
pub const GPU_CLOCK_HZ: u64 = 100_000_000;

/// The emulated clocks.
#[derive(Debug)]
pub(crate) struct Clock {
    start: Instant,
    /// The time-stamp counter at `start`, when the GPU clock counts it (see [`tsc_scale`]).
    start_tsc: u64,
    /// GPU ticks per TSC tick, times 2^32; 0 when the clock reads `Instant`.
    scale: u64,
}

impl Clock {
    pub(crate) fn new() -> Clock {
        let scale = tsc_scale();
        // The two readings are taken together: the few ns between them are below a tick.
        Clock { start: Instant::now(), start_tsc: if scale != 0 { ordered_tsc() } else { 0 }, scale }
    }

    /// GPU ticks at [`GPU_CLOCK_HZ`].
    ///
    /// A profiling queue reads the clock twice per dispatch, on the round trip's path
    /// (docs/architecture.md §6). Where the kernel keeps its clock on the TSC, the GPU clock is
    /// the TSC scaled (an ordered `rdtsc` and one multiply, about 22 ns on the 2-core VM against
    /// 33–37 ns for `Instant::elapsed`); elsewhere `Instant` in u64 arithmetic (a u128 division
    /// would be a library call). u64 seconds times 10^8 overflows after some 5800 years.
    pub(crate) fn gpu_ticks(&self) -> u64 {
        if self.scale != 0 {
            let d = ordered_tsc().saturating_sub(self.start_tsc);
            return ((u128::from(d) * u128::from(self.scale)) >> 32) as u64;
        }
        const NS_PER_TICK: u32 = (1_000_000_000 / GPU_CLOCK_HZ) as u32;
        let e = self.start.elapsed();
        e.as_secs().wrapping_mul(GPU_CLOCK_HZ).wrapping_add(u64::from(e.subsec_nanos() / NS_PER_TICK))
    }
}

/// The TSC, read after every earlier instruction has completed (`lfence; rdtsc`, as the
/// kernel's own clock reads it): a timestamp taken after observing another thread's completion
/// is not taken before it. 0 where there is no TSC.
#[inline]
fn ordered_tsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: LFENCE and RDTSC have no preconditions; they only order and read the counter.
        unsafe {
            core::arch::x86_64::_mm_lfence();
            core::arch::x86_64::_rdtsc()
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    0
}

/// GPU ticks per TSC tick times 2^32, measured once per process, or 0: the GPU clock then reads
/// `Instant`. The TSC is used only where the kernel's clock source is `tsc` (it found the counter
/// invariant and synchronised across CPUs). Its rate is measured against `Instant` over 2 ms,
/// each end the pair of readings bracketed most tightly by two TSC reads, so the rate is off by
/// about 10^-5 — the tolerance of a GPU's own crystal (and ROCr translates ticks to host time
/// from pairs of `GET_CLOCK_COUNTERS` samples, not from the nominal rate).
fn tsc_scale() -> u64 {
    static SCALE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *SCALE.get_or_init(|| {
        let source = std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource");
        if cfg!(not(target_arch = "x86_64")) || !source.is_ok_and(|s| s.trim() == "tsc") {
            return 0;
        }
        // (tsc at the midpoint, the Instant) of the most tightly bracketed of 16 readings.
        let pair = || {
            (0..16)
                .map(|_| {
                    let a = ordered_tsc();
                    let i = Instant::now();
                    let b = ordered_tsc();
                    (b.wrapping_sub(a), a / 2 + b / 2, i)
                })
                .min_by_key(|&(width, ..)| width)
                .map(|(_, tsc, i)| (tsc, i))
        };
        let Some((t0, i0)) = pair() else { return 0 };
        while i0.elapsed() < std::time::Duration::from_millis(2) {
            std::hint::spin_loop();
        }
        let Some((t1, i1)) = pair() else { return 0 };
        let ns = i1.duration_since(i0).as_nanos();
        let tsc = u128::from(t1.saturating_sub(t0));
        if tsc == 0 {
            return 0;
        }
        // ticks per TSC tick = ns / 10 / tsc.
        let per = 1_000_000_000 / u128::from(GPU_CLOCK_HZ);
        u64::try_from((ns << 32) / (per * tsc)).unwrap_or(0)
    })
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
