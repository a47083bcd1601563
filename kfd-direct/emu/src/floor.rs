//! The ping-pong floor (DESIGN.md "Performance budget"): two threads bouncing one cache line.
//! The emulated dispatch round trip and event record + synchronize are judged against it, so
//! every benchmark that reports them measures it with this one function, in the same run.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bounces one cache line between this thread and a spawned peer `iters` times; returns the
/// total time of the `iters` round trips.
pub fn ping_pong(iters: u64) -> Duration {
    #[repr(align(128))]
    struct Line(AtomicU64);
    let line = Arc::new(Line(AtomicU64::new(0)));
    let l2 = Arc::clone(&line);
    let peer = std::thread::spawn(move || {
        for i in 0..iters {
            // Ordering: Acquire/Release pairs with the other side's store.
            while l2.0.load(Ordering::Acquire) != 2 * i + 1 {
                std::hint::spin_loop();
            }
            l2.0.store(2 * i + 2, Ordering::Release);
        }
    });
    let start = Instant::now();
    for i in 0..iters {
        // Ordering: as above.
        line.0.store(2 * i + 1, Ordering::Release);
        while line.0.load(Ordering::Acquire) != 2 * i + 2 {
            std::hint::spin_loop();
        }
    }
    let elapsed = start.elapsed();
    let _ = peer.join();
    elapsed
}
