//! kfd-direct on the emulated GPU beside the floors of the performance budget
//! (docs/architecture.md), all measured in this run:
//!
//! - enqueue one kernel dispatch through core and kfd-direct (ring in a GTT buffer, doorbell in
//!   the mapped doorbell slice, the emulated CP consuming) beside the **live packet floor**
//!   (core's `aqueduct::floor::LivePacketFloor`: atomic add on a 64-bit write index, a 64-byte
//!   packet, Release header store, doorbell store, in ordinary memory, with a minimal consumer
//!   thread retiring each packet). Target ≤ 1.5×. The consumer-free **packet floor**
//!   (`aqueduct::floor::PacketFloor`) is printed beside it.
//! - one dispatch round trip (enqueue, the emulated CP runs it, a spinning waiter sees the
//!   stream's signal) beside the **ping-pong floor** (two threads bouncing one cache line).
//!   Target ≤ 2×.
//!
//! Run: `cargo bench -p aqueduct-kfd --features emu --bench kfd`. Each figure is the median of
//! 21 samples.

use std::hint::black_box;
use std::sync::atomic::{fence, Ordering};
use std::time::{Duration, Instant};

use aqueduct::floor::{LivePacketFloor, PacketFloor};
use aqueduct::{KernelLaunch, Runtime, SingleThread, StreamHandle, Timeout};
use aqueduct_kfd::{EmuSys, Kfd, KfdConfig, WaitMode};
use aqueduct_kfd_emu::floor::ping_pong;
use aqueduct_kfd_emu::Twin;

const CHUNK: u64 = 512;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    // A profiling run (docs/architecture.md, "The submit path, instruction by instruction"):
    // `AQUEDUCT_PROFILE_ENQUEUES=N` runs N enqueue chunks of CHUNK launches and nothing else.
    let profile = std::env::var("AQUEDUCT_PROFILE_ENQUEUES").ok().and_then(|v| v.parse::<u64>().ok());
    // The live floor first, before the emulator runs: its two threads need two free cores, and a
    // device that has just been busy keeps threads waking on them (docs/architecture.md,
    // "Performance budget"). 20 warm-up chunks, then 21 timed ones, against one running consumer.
    let packet = [0x1502u32 | (3 << 16), 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let live: Box<LivePacketFloor<1024>> = Box::default();
    let live_chunks: Vec<Duration> = std::thread::scope(|scope| {
        scope.spawn(|| live.consume());
        let mut p = live.producer();
        let chunks = (0..41)
            .map(|_| {
                let t = Instant::now();
                for _ in 0..CHUNK {
                    p.submit(black_box(&packet));
                }
                t.elapsed() / CHUNK as u32
            })
            .collect::<Vec<_>>();
        live.stop();
        chunks.into_iter().skip(20).collect()
    });
    let sys = EmuSys::with_defaults().unwrap();
    let nop = sys.emu().register_kernel(Twin::new("empty", 0, |_, _| Ok(())));
    let cfg = KfdConfig { ring_packets: 1024, wait: WaitMode::Spin, ..KfdConfig::default() };
    let rt: Runtime<_, _> = Runtime::new(Kfd::open(sys, cfg).unwrap(), SingleThread);
    let s = rt.stream_create(1).unwrap();
    let launch = KernelLaunch {
        kernel_object: nop,
        grid: [1, 1, 1],
        workgroup: [1, 1, 1],
        group_segment_size: 0,
        private_segment_size: 0,
        kernarg: &[],
    };
    let enqueue_chunk = |s: StreamHandle| {
        let t = Instant::now();
        for _ in 0..CHUNK {
            rt.launch_kernel(black_box(s), black_box(&launch)).unwrap();
        }
        let d = t.elapsed();
        rt.stream_synchronize_timeout(s, Timeout::SECOND).unwrap();
        d / CHUNK as u32
    };
    if let Some(n) = profile {
        let t: Duration = (0..n).map(|_| enqueue_chunk(s)).sum();
        println!("{} launches: {} ns each", n * CHUNK, t.as_nanos() / u128::from(n.max(1)));
        rt.stream_destroy(s).unwrap();
        return;
    }
    let mut floor: Box<PacketFloor<1024>> = Box::default();
    let mut floor_chunk = || {
        let t = Instant::now();
        for _ in 0..CHUNK {
            floor.submit(black_box(&packet));
        }
        fence(Ordering::SeqCst);
        t.elapsed() / CHUNK as u32
    };
    let round_trip = |n: u32| {
        let t = Instant::now();
        for _ in 0..n {
            rt.launch_kernel(s, &launch).unwrap();
            rt.stream_synchronize(s).unwrap();
        }
        t.elapsed() / n
    };
    // Warm up.
    for _ in 0..20 {
        enqueue_chunk(s);
        floor_chunk();
    }
    round_trip(2000);
    let enq = median((0..21).map(|_| enqueue_chunk(s)).collect());
    let pf = median((0..21).map(|_| floor_chunk()).collect());
    let lf = median(live_chunks);
    let rtt = median((0..21).map(|_| round_trip(1000)).collect());
    let pp = median((0..21).map(|_| ping_pong(2000) / 2000).collect());
    println!("enqueue one dispatch (core + kfd-direct, emulator): {} ns", enq.as_nanos());
    println!("packet floor: {} ns", pf.as_nanos());
    println!("live packet floor: {} ns", lf.as_nanos());
    println!("enqueue / live packet floor = {:.2} (target <= 1.50)", enq.as_secs_f64() / lf.as_secs_f64());
    println!("dispatch round trip (spinning waiter): {} ns", rtt.as_nanos());
    println!("ping-pong floor: {} ns", pp.as_nanos());
    println!("round trip / ping-pong floor = {:.2} (target <= 2.00)", rtt.as_secs_f64() / pp.as_secs_f64());
    rt.stream_destroy(s).unwrap();
}
