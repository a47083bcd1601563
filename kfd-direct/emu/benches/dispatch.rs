//! Benchmarks of the emulated GPU (docs/architecture.md, "Performance budget"), each beside its
//! floor measured in the same run:
//!
//! - `cp/empty_kernels`: empty-kernel dispatches per second through the packet processor and
//!   the workers (batches of 256 barrier-bit packets, one doorbell per batch, the last one's
//!   completion signal awaited). Target ≥ 5 M/s.
//! - `cp/round_trip`: one dispatch round trip — publish, doorbell, the device runs it, the host
//!   spins on the completion signal until it sees 0. Floor: `floor/ping_pong` (two threads
//!   bouncing one cache line). Target ≤ 2 × floor.
//! - `cp/enqueue`: publishing one dispatch (core's ring protocol, doorbell) while the device
//!   consumes the queue. Floor: the same publish into an identical ring nobody reads. Target
//!   ≤ 3 × floor.
//! - `blit/copy_1mib`, `blit/fill_1mib`: the built-in copy and fill kernels over 1 MiB, dispatch
//!   to completion, in GB/s. Floors: `memcpy` / `memset` of 1 MiB on the host. Target ≥ 2 GB/s.
//!
//! - idle: the process's CPU time while the device has a queue and has had no work for 200 ms,
//!   and the round trip of a dispatch published after 5 ms of quiet (the napping packet processor
//!   finds it).
//!
//! After the criterion groups the bench prints every figure, its floor and the ratio
//! (`AQUEDUCT_BENCH_QUICK=1` prints only that summary).

#[path = "../tests/common/mod.rs"]
mod common;

use std::hint::black_box;
use std::ptr::NonNull;
use std::time::{Duration, Instant};

use aqueduct::aql::{AqlRing, KernelDispatchPacket};
use aqueduct::backend::{CopyArgs, FillArgs};
use aqueduct::BuiltinKernel;
use aqueduct_kfd_emu::floor::{ping_pong, ping_pong_floor};
use aqueduct_kfd_emu::Twin;
use common::*;
use criterion::{Criterion, Throughput};
use portable_atomic::AtomicU64 as RingIndex;

const BATCH: u32 = 256;
const MIB: u64 = 1 << 20;

struct Bench {
    h: Harness,
    q: Queue,
    sigs: Buffer,
    nop: u64,
    src: Buffer,
    dst: Buffer,
    args: Buffer,
}

fn setup() -> Bench {
    let h = Harness::new();
    let q = h.create_queue_with(0, &QueueSpec { packets: 1024, ..Default::default() });
    let sigs = h.signals();
    let nop = h.emu.register_kernel(Twin::new("empty", 0, |_, _| Ok(())));
    let src = h.alloc(MIB, VRAM);
    let dst = h.alloc(MIB, VRAM);
    let args = h.alloc(4096, GTT);
    // SAFETY: CPU-mapped kernarg page.
    unsafe {
        *args.ptr::<CopyArgs>() = CopyArgs { dst: dst.va, src: src.va, bytes: MIB };
        *args.ptr::<FillArgs>().byte_add(64) =
            FillArgs { dst: dst.va, count: MIB / 4, value: 0x5a5a_5a5a, element_bytes: 4 };
    }
    Bench { h, q, sigs, nop, src, dst, args }
}

impl Bench {
    fn run_one(&self, p: KernelDispatchPacket) {
        let s = signal(&self.sigs, 0);
        s.reset(1);
        self.q.submit(&[p]);
        while s.load() != 0 {
            std::hint::spin_loop();
        }
    }

    fn round_trip(&self) {
        self.run_one(dispatch(self.nop, 0, 1, 1, signal_handle(&self.sigs, 0), true));
    }

    fn blit(&self, kernel: BuiltinKernel, kernarg: u64) {
        let k = self.h.emu.builtin_kernel(kernel);
        self.run_one(dispatch(k, kernarg, 1, 1, signal_handle(&self.sigs, 0), true));
    }

    /// A batch of empty-kernel dispatches; the last one's completion signal says it is done.
    fn batch(&self) {
        let s = signal(&self.sigs, 1);
        s.reset(1);
        let mut packets: Vec<_> = (0..BATCH).map(|_| dispatch(self.nop, 0, 1, 1, 0, true)).collect();
        if let Some(last) = packets.last_mut() {
            last.completion_signal = signal_handle(&self.sigs, 1);
        }
        self.q.submit(&packets);
        while s.load() != 0 {
            std::hint::spin_loop();
        }
    }

    /// ns per publish of `n` dispatches one at a time (the device consumes meanwhile); the
    /// completion is waited for untimed.
    fn enqueue(&self, n: u32) -> f64 {
        let p = dispatch(self.nop, 0, 1, 1, 0, true);
        let end = self.q.read_index() + u64::from(n);
        let t = Instant::now();
        for _ in 0..n {
            self.q.submit(std::slice::from_ref(black_box(&p)));
        }
        let ns = t.elapsed().as_nanos() as f64 / f64::from(n);
        while self.q.read_index() != end {
            std::hint::spin_loop();
        }
        ns
    }
}

/// The same publish into a ring in ordinary memory that nobody reads: reserve (hinted), write,
/// release the header, store the doorbell. The read index is moved by hand, untimed.
struct PrivateRing {
    _mem: Vec<KernelDispatchPacket>,
    read: Box<RingIndex>,
    write: Box<RingIndex>,
    doorbell: Box<u64>,
    ring: AqlRing,
}

impl PrivateRing {
    fn new(packets: u32) -> PrivateRing {
        let mut mem = vec![KernelDispatchPacket::default(); packets as usize];
        let read = Box::new(RingIndex::new(0));
        let write = Box::new(RingIndex::new(0));
        // SAFETY: the slots and both indices are owned by the returned value and outlive the ring.
        let ring = unsafe {
            AqlRing::new(
                NonNull::new(mem.as_mut_ptr().cast()).unwrap(),
                packets,
                NonNull::from(&*write),
                NonNull::from(&*read),
            )
        }
        .unwrap();
        PrivateRing { _mem: mem, read, write, doorbell: Box::new(0), ring }
    }

    fn enqueue(&mut self, n: u32, p: &KernelDispatchPacket) -> f64 {
        let mut hint = self.ring.read_index();
        let t = Instant::now();
        for _ in 0..n {
            let mut r = self.ring.reserve_hinted(1, 1 << 20, &mut hint).unwrap();
            r.write(black_box(p)).unwrap();
            let last = r.finish();
            std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
            // SAFETY: our own doorbell word.
            unsafe { std::ptr::write_volatile(&mut *self.doorbell, last) };
        }
        let ns = t.elapsed().as_nanos() as f64 / f64::from(n);
        // Consume untimed: mark every slot INVALID again and move the read index.
        let w = self.write.load(std::sync::atomic::Ordering::Acquire);
        let mut r = self.read.load(std::sync::atomic::Ordering::Relaxed);
        while r != w {
            self.ring.retire(r);
            r += 1;
        }
        ns
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn per_iter(d: Duration, n: u32) -> f64 {
    d.as_nanos() as f64 / f64::from(n)
}

fn main() {
    let b = setup();
    if std::env::var_os("AQUEDUCT_BENCH_QUICK").is_none() {
        let mut c = Criterion::default()
            .configure_from_args()
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(3));
        {
            let mut g = c.benchmark_group("cp");
            g.throughput(Throughput::Elements(u64::from(BATCH)));
            g.bench_function("empty_kernels", |it| it.iter(|| b.batch()));
            g.throughput(Throughput::Elements(1));
            g.bench_function("round_trip", |it| it.iter(|| b.round_trip()));
            g.finish();
        }
        {
            let mut g = c.benchmark_group("blit");
            g.throughput(Throughput::Bytes(MIB));
            g.bench_function("copy_1mib", |it| it.iter(|| b.blit(BuiltinKernel::Copy, b.args.va)));
            g.bench_function("fill_1mib", |it| it.iter(|| b.blit(BuiltinKernel::Fill, b.args.va + 64)));
            g.finish();
        }
        c.benchmark_group("floor").bench_function("ping_pong", |it| it.iter_custom(|n| ping_pong(black_box(n))));
        c.final_summary();
    }

    // Side by side, measured in this run.
    const SAMPLES: usize = 15;
    let pps = median(
        (0..SAMPLES)
            .map(|_| {
                let t = Instant::now();
                for _ in 0..20 {
                    b.batch();
                }
                f64::from(20 * BATCH) / t.elapsed().as_secs_f64()
            })
            .collect(),
    );
    let rt = median(
        (0..SAMPLES)
            .map(|_| {
                let t = Instant::now();
                for _ in 0..1000 {
                    b.round_trip();
                }
                per_iter(t.elapsed(), 1000)
            })
            .collect(),
    );
    let pp = ping_pong_floor(SAMPLES, 1000).as_nanos() as f64;
    // Warm up the device's queue after the idle ping-pong phase (its engine threads sleep by
    // then), as criterion warms up its groups.
    for _ in 0..300 {
        b.enqueue(256);
    }
    // Short samples, interleaved with their floor's, many of them: a preemption spoils one.
    let mut private = PrivateRing::new(1024);
    let p = dispatch(b.nop, 0, 1, 1, 0, true);
    let (mut enq, mut floor) = (Vec::new(), Vec::new());
    for _ in 0..10 * SAMPLES {
        enq.push(b.enqueue(256));
        floor.push(private.enqueue(256, &p));
    }
    let (enq, floor) = (median(enq), median(floor));
    let gbps = |f: &dyn Fn()| {
        median(
            (0..SAMPLES)
                .map(|_| {
                    let t = Instant::now();
                    for _ in 0..10 {
                        f();
                    }
                    (10 * MIB) as f64 / t.elapsed().as_secs_f64() / 1e9
                })
                .collect(),
        )
    };
    let copy = gbps(&|| b.blit(BuiltinKernel::Copy, b.args.va));
    let fill = gbps(&|| b.blit(BuiltinKernel::Fill, b.args.va + 64));
    let host_src = vec![0x5au8; MIB as usize];
    let mut host_dst = vec![0u8; MIB as usize];
    let memcpy = gbps(&|| {
        // SAFETY: two distinct live 1 MiB vectors (the destination is only written here).
        unsafe {
            std::ptr::copy_nonoverlapping(black_box(host_src.as_ptr()), host_dst.as_ptr().cast_mut(), MIB as usize)
        }
    });
    let memset = gbps(&|| {
        // SAFETY: as above.
        unsafe { std::ptr::write_bytes(black_box(host_dst.as_ptr().cast_mut()), 0x5a, MIB as usize) }
    });
    black_box(&mut host_dst);
    // Idle: the process's CPU time while its device has a queue and nothing to do, and the
    // round trip of a dispatch that arrives after such a quiet spell (the doorbell found by a
    // napping packet processor).
    let cpu = || {
        // SAFETY: getrusage writes the struct we own.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
        let t = |v: libc::timeval| Duration::new(v.tv_sec as u64, v.tv_usec as u32 * 1000);
        t(u.ru_utime) + t(u.ru_stime)
    };
    std::thread::sleep(Duration::from_millis(200));
    let (c0, t0) = (cpu(), Instant::now());
    std::thread::sleep(Duration::from_secs(1));
    let idle_cpu = (cpu() - c0).as_secs_f64() / t0.elapsed().as_secs_f64();
    let woken = median(
        (0..SAMPLES)
            .map(|_| {
                std::thread::sleep(Duration::from_millis(5));
                let t = Instant::now();
                b.round_trip();
                t.elapsed().as_nanos() as f64
            })
            .collect(),
    );
    println!();
    println!("figure                     value              floor                    ratio   target");
    println!("empty-kernel dispatches    {:>8.2} M/s       -                        -       >= 5 M/s", pps / 1e6);
    println!("dispatch round trip        {rt:>8.0} ns        ping-pong {pp:>8.0} ns     {:>5.2}x  <= 2x", rt / pp);
    println!(
        "enqueue (device live)      {enq:>8.1} ns        idle ring {floor:>8.1} ns     {:>5.2}x  <= 3x",
        enq / floor
    );
    println!(
        "built-in copy, 1 MiB       {copy:>8.2} GB/s      memcpy {memcpy:>8.2} GB/s     {:>5.2}x  >= 2 GB/s",
        copy / memcpy
    );
    println!(
        "built-in fill, 1 MiB       {fill:>8.2} GB/s      memset {memset:>8.2} GB/s     {:>5.2}x  >= 2 GB/s",
        fill / memset
    );
    println!("idle device (200 ms quiet) {:>8.1} % of a core", idle_cpu * 100.0);
    println!(
        "round trip after 5 ms idle {woken:>8.0} ns        (a doorbell waits at most one nap, <= {} us)",
        aqueduct_kfd_emu::MAX_NAP_US
    );
    let _ = (&b.src, &b.dst);
}
