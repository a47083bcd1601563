//! The ping-pong floor (docs/architecture.md, "Performance budget"): two threads bouncing one
//! cache line. The emulated dispatch round trip and event record + synchronize are judged
//! against it, so every benchmark that reports them measures it with this module, in the same run.
//!
//! The clock starts only once both threads are running: the peer announces itself on the line
//! (a start barrier through the line itself, so the peer is spinning, not waking up, when the
//! first timed round trip begins), and [`ping_pong_floor`] reports the median of several timed
//! rounds against the same running peer, so one descheduling does not move the floor.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The cache line the two threads bounce, alone on its (pair of) lines.
#[repr(align(128))]
struct Line(AtomicU64);

/// Values on the line: the peer stores `READY` once it runs; then round trip `i` (counted over
/// every round) is the main thread's `ping(i)` answered by the peer's `ping(i) + 1`.
const READY: u64 = 1;
const fn ping(i: u64) -> u64 {
    2 * i + 2
}

fn spin_until(line: &Line, value: u64) {
    // Ordering: Acquire pairs with the other side's Release store.
    while line.0.load(Ordering::Acquire) != value {
        std::hint::spin_loop();
    }
}

/// Runs `rounds` timed rounds of `iters` round trips each against one peer thread, after the
/// start barrier; returns each round's total time.
fn rounds(rounds: usize, iters: u64) -> Vec<Duration> {
    let line = Line(AtomicU64::new(0));
    let total = rounds as u64 * iters;
    std::thread::scope(|s| {
        s.spawn(|| {
            // Ordering: Release; announces the running peer (the start barrier).
            line.0.store(READY, Ordering::Release);
            for i in 0..total {
                spin_until(&line, ping(i));
                // Ordering: Release; the answer.
                line.0.store(ping(i) + 1, Ordering::Release);
            }
        });
        spin_until(&line, READY);
        let mut times = Vec::with_capacity(rounds);
        let mut i = 0;
        for _ in 0..rounds {
            let start = Instant::now();
            for _ in 0..iters {
                // Ordering: Release; the ping.
                line.0.store(ping(i), Ordering::Release);
                spin_until(&line, ping(i) + 1);
                i += 1;
            }
            times.push(start.elapsed());
        }
        times
    })
}

/// Bounces one cache line between this thread and a peer `iters` times, the clock started once
/// the peer runs; returns the total time of the `iters` round trips (criterion's `iter_custom`).
pub fn ping_pong(iters: u64) -> Duration {
    rounds(1, iters).pop().unwrap_or_default()
}

/// The ping-pong floor: the median over `rounds` timed rounds (each of `iters` round trips, all
/// against one running peer) of the time of one round trip.
pub fn ping_pong_floor(rounds: usize, iters: u64) -> Duration {
    let iters = iters.max(1);
    let mut per_trip: Vec<Duration> = self::rounds(rounds.max(1), iters)
        .into_iter()
        .map(|d| Duration::from_secs_f64(d.as_secs_f64() / iters as f64))
        .collect();
    per_trip.sort();
    per_trip[per_trip.len() / 2]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_round_is_timed_against_one_peer() {
        // 5 rounds of 10 trips: the peer answers all 50 pings (or this would never return).
        assert_eq!(rounds(5, 10).len(), 5);
        assert!(ping_pong_floor(3, 10) > Duration::ZERO);
    }
}
