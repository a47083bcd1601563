//! Benchmarks of the emulated command processor (DESIGN.md "Performance budget"):
//!
//! - `cp/empty_kernels`: empty-kernel dispatch packets per second through the command processor
//!   (batches of 256, one doorbell per batch);
//! - `cp/round_trip`: one dispatch round trip — publish, doorbell, CP runs it, host spins on the
//!   completion signal until it sees 0;
//! - `floor/ping_pong`: two threads bouncing one cache line (the floor the round trip is judged
//!   against, measured in the same run). Target: round trip ≤ 2 × ping-pong.
//!
//! After the criterion groups the bench prints both medians and their ratio.

#[path = "../tests/common/mod.rs"]
mod common;

use std::hint::black_box;
use std::time::{Duration, Instant};

use aqueduct_kfd_emu::floor::ping_pong;
use aqueduct_kfd_emu::Twin;
use common::*;
use criterion::{Criterion, Throughput};

const BATCH: u32 = 256;

struct Bench {
    h: Harness,
    q: Queue,
    sigs: Buffer,
    nop: u64,
}

fn setup() -> Bench {
    let h = Harness::new();
    let q = h.create_queue_with(0, &QueueSpec { packets: 1024, ..Default::default() });
    let sigs = h.signals();
    let nop = h.emu.register_kernel(Twin::new("empty", 0, |_, _| Ok(())));
    Bench { h, q, sigs, nop }
}

impl Bench {
    fn round_trip(&self) {
        let s = signal(&self.sigs, 0);
        s.reset(1);
        self.q.submit(&[dispatch(self.nop, 0, 1, 1, signal_handle(&self.sigs, 0), true)]);
        while s.load() != 0 {
            std::hint::spin_loop();
        }
    }

    fn batch(&self) {
        let packets: Vec<_> = (0..BATCH).map(|_| dispatch(self.nop, 0, 1, 1, 0, true)).collect();
        let end = self.q.read_index() + u64::from(BATCH);
        self.q.submit(&packets);
        while self.q.read_index() != end {
            std::hint::spin_loop();
        }
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let mut c = Criterion::default()
        .configure_from_args()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    let b = setup();
    {
        let mut g = c.benchmark_group("cp");
        g.throughput(Throughput::Elements(u64::from(BATCH)));
        g.bench_function("empty_kernels", |it| it.iter(|| b.batch()));
        g.throughput(Throughput::Elements(1));
        g.bench_function("round_trip", |it| it.iter(|| b.round_trip()));
        g.finish();
    }
    c.benchmark_group("floor").bench_function("ping_pong", |it| it.iter_custom(|n| ping_pong(black_box(n))));

    // Side by side, measured in this run.
    let rt = median(
        (0..21)
            .map(|_| {
                let t = Instant::now();
                for _ in 0..2000 {
                    b.round_trip();
                }
                t.elapsed() / 2000
            })
            .collect(),
    );
    let floor = median((0..21).map(|_| ping_pong(2000) / 2000).collect());
    let pps = {
        let t = Instant::now();
        for _ in 0..200 {
            b.batch();
        }
        f64::from(200 * BATCH) / t.elapsed().as_secs_f64()
    };
    println!();
    println!("empty-kernel packets through the CP: {:.2} M packets/s", pps / 1e6);
    println!("dispatch round trip (spinning waiter): {} ns", rt.as_nanos());
    println!("ping-pong floor (two threads, one line): {} ns", floor.as_nanos());
    println!("round trip / floor = {:.2} (target <= 2.00)", rt.as_secs_f64() / floor.as_secs_f64());
    drop(b.h);
    c.final_summary();
}
