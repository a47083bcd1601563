//! `aqueduct bench`: every figure of the performance budget (docs/architecture.md) beside its
//! floor, measured in the same run (the methods of core's and kfd-direct's benchmark harnesses).
//!
//! Figures on the selected device: `enqueue_dispatch` (a chunk of launches, then an untimed
//! synchronise), `graph_launch_per_node_1000`, `capture_instantiate_per_node` (100-node
//! captures), `stream_create_destroy`, `roundtrip_emulated` (launch + synchronise, spinning
//! waiter) and `event_record_sync`. Handle validation needs 1024 live streams, more than a
//! device runtime holds, so `validate_handle_1` / `validate_handle_1024` run on core's loopback
//! (as core's benchmark does). Floors: `packet` ([`aqueduct::floor::PacketFloor::submit`], the
//! body core's submit benchmark times too), `live_packet` (the same loop with a minimal consumer
//! thread retiring each packet, [`aqueduct::floor::LivePacketFloor`]; `enqueue_dispatch`, whose
//! device has its packet processor live, is judged against it), `copy` and `copy_100` (copying the same number of
//! 64-byte packets as the 1000-node graph and the 100-node capture), `pingpong` (two threads
//! bouncing one cache line, [`ping_pong_floor`]), and `validate_handle_1` for the 1024 case.
//! Each figure is the median of its samples.
//!
//! The HIP figures (`hip_launch_kernel`, `hip_launch_kernel_hipcc`, each beside core's enqueue of
//! the same launch in the same library; `graph_exec_update_one_of_10000` beside
//! `hipGraphInstantiate` of the same graph) come from [`super::bench_hip`];
//! `while_loop_iteration` (a WHILE loop the device drives, beside the same loop driven by the
//! host) from `bench_cond`; the executor figures (`isa_saxpy_16m`, `isa_sgemm_256` beside the
//! same loops on the host, `isa_wave_instruction`) from `bench_isa`.
//!
//! Every timed operation's result is checked: a failure ends the run with an error naming the
//! operation, so a failing operation can never pass as a fast one. The report names the backend
//! actually selected (not the one asked for) and the device, and lists the floors.

use std::hint::black_box;
use std::io::Write;
use std::time::{Duration, Instant};

use aqueduct::aql::{KernelDispatchPacket, Packet, DISPATCH_HEADER};
use aqueduct::floor::{LivePacketFloor, PacketFloor};
use aqueduct::loopback::{Loopback, LoopbackMemory};
use aqueduct::{CaptureMode, Runtime, SingleThread, StreamHandle};
use aqueduct_kfd::WaitMode;
use aqueduct_kfd_emu::floor::ping_pong_floor;

use crate::api::{Device, Dim3, Kernel};
use crate::cli::demo::{demo_code_object, AddArgs};
use crate::select::OpenOptions;

/// One figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// Name (stable, used in `--json`).
    pub name: &'static str,
    /// Nanoseconds per operation.
    pub ns: f64,
    /// The floor's name.
    pub floor: Option<&'static str>,
    /// The floor in nanoseconds.
    pub floor_ns: Option<f64>,
    /// The target in docs/architecture.md.
    pub target: &'static str,
}

impl Figure {
    /// `ns / floor_ns`.
    pub fn ratio(&self) -> Option<f64> {
        self.floor_ns.filter(|f| *f > 0.0).map(|f| self.ns / f)
    }
}

/// The device the figures were measured on.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceSummary {
    /// Index within the backend.
    pub index: u32,
    /// gfx name, e.g. `gfx90a`.
    pub gfx: String,
    /// `gfx_target_version`, e.g. 90010.
    pub gfx_target_version: u32,
    /// Compute units.
    pub cu_count: u32,
}

/// A floor measured in this run.
#[derive(Debug, Clone, PartialEq)]
pub struct Floor {
    /// Its name, as figures refer to it.
    pub name: &'static str,
    /// Nanoseconds per operation.
    pub ns: f64,
    /// What it measures.
    pub what: &'static str,
}

/// Everything one `aqueduct bench` run measured, and where.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The backend actually selected (`emu`, `kfd` or `rocr`; never `auto`).
    pub backend: &'static str,
    /// The device.
    pub device: DeviceSummary,
    /// The floors.
    pub floors: Vec<Floor>,
    /// The figures.
    pub figures: Vec<Figure>,
}

/// How long to measure.
#[derive(Debug, Clone, Copy)]
pub struct BenchOptions {
    /// Samples per figure (the median is kept).
    pub samples: usize,
    /// Scale of the iteration counts (1 = full).
    pub short: bool,
}

pub(super) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn per(d: Duration, n: u64) -> f64 {
    d.as_secs_f64() * 1e9 / n.max(1) as f64
}

// ----- floors -------------------------------------------------------------------------------

/// The packet floor: `n` calls of core's floor body, ns per packet.
fn packet_floor_sample(floor: &mut PacketFloor<1024>, packet: &[u32; 16], n: u64) -> f64 {
    let t = Instant::now();
    for _ in 0..n {
        floor.submit(black_box(packet));
    }
    per(t.elapsed(), n)
}

/// The live packet floor: `samples` timed runs of `n` submits each into a ring a minimal consumer
/// thread retires as it goes (core's [`LivePacketFloor`]), after one untimed run that lets the
/// consumer start; ns per packet, one value per run.
fn live_packet_floor_samples(packet: &[u32; 16], samples: usize, n: u64) -> Vec<f64> {
    let floor: Box<LivePacketFloor<1024>> = Box::default();
    std::thread::scope(|scope| {
        scope.spawn(|| floor.consume());
        let mut p = floor.producer();
        let mut runs = Vec::with_capacity(samples);
        for run in 0..=samples {
            let t = Instant::now();
            for _ in 0..n {
                p.submit(black_box(packet));
            }
            if run > 0 {
                runs.push(per(t.elapsed(), n));
            }
        }
        floor.stop();
        runs
    })
}

/// Copying `packets` 64-byte packets: ns per packet.
fn copy_floor(packets: usize, iters: u64) -> f64 {
    let src = vec![[0x5a5a_5a5au32; 16]; packets];
    let mut dst = vec![[0u32; 16]; packets];
    let t = Instant::now();
    for _ in 0..iters {
        dst.copy_from_slice(black_box(&src));
        black_box(&mut dst);
    }
    per(t.elapsed(), iters * packets as u64)
}

// ----- handle validation on core's loopback ----------------------------------------------------

const VALIDATE_S: usize = 1100;
/// `VALIDATE_S` streams, 4 events, 1 thread, 4 host functions (the rest default), on a loopback of
/// `VALIDATE_S` queues of 8 packets, 1200 signals and 4 KiB of heap.
type ValidateSizes = aqueduct::Capacities<VALIDATE_S, 4, 1, 4, 4, 32, 2, 40, 16, 8, VALIDATE_S, 8, 64, 1200, 4096>;
type ValidateMem = LoopbackMemory<ValidateSizes>;
type ValidateRt = Runtime<Loopback<'static, ValidateSizes>, SingleThread, ValidateSizes>;

fn validate_runtime(streams: usize) -> Result<(Box<ValidateRt>, Vec<StreamHandle>), String> {
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(move || {
            let mem: &'static ValidateMem = Box::leak(Box::new(LoopbackMemory::new()));
            let rt: Box<ValidateRt> = Box::new(Runtime::new(Loopback::new(mem), SingleThread));
            let hs: Result<Vec<_>, _> = (0..streams).map(|_| rt.stream_create(0)).collect();
            hs.map(|hs| (rt, hs)).map_err(|e| format!("loopback streams: {e}"))
        })
        .map_err(|e| e.to_string())?
        .join()
        .map_err(|_| "loopback construction failed".to_string())?
}

/// `n` validations of `h`, ns per validation; any failure is an error, not a fast sample.
fn validate_sample(rt: &ValidateRt, h: StreamHandle, n: u64) -> Result<f64, String> {
    let mut failed = 0u64;
    let t = Instant::now();
    for _ in 0..n {
        if black_box(rt.stream_priority(black_box(h))).is_err() {
            failed += 1;
        }
    }
    let ns = per(t.elapsed(), n);
    if failed > 0 {
        return Err(format!("validate_handle: stream_priority failed {failed} of {n} times"));
    }
    Ok(ns)
}

// ----- the device ------------------------------------------------------------------------------

fn bench_kernel(dev: &Device) -> Result<(Kernel<AddArgs>, Option<crate::api::Module<'_>>), String> {
    if let Ok(k) = dev.host_kernel::<AddArgs>("bench_empty", |_, _| Ok(())) {
        return Ok((k, None));
    }
    // Real hardware: the demo code object's add_u32 with n = 0 does nothing.
    let info = dev.info().map_err(|e| e.to_string())?;
    let elf = demo_code_object(info.gfx_target_version).ok_or("no code object for this target")?;
    let m = dev.load_module(elf).map_err(|e| e.to_string())?;
    let k = m.kernel::<AddArgs>("add_u32").map_err(|e| e.to_string())?;
    Ok((k, Some(m)))
}

const FIGURES: u64 = 12;

/// Measures every figure on the device `opts` selects (its wait mode is forced to spinning, as
/// the round-trip budget assumes a spinning waiter). Any failed operation fails the run.
pub fn run(opts: &OpenOptions, bench: BenchOptions, progress: bool) -> Result<Report, String> {
    let samples = bench.samples.max(1);
    let k = |full: u64, short: u64| if bench.short { short } else { full };
    // The packet floors first, before the device runs anything: the live floor's two threads
    // need two free cores, and a device that has just been busy keeps threads waking on them
    // (docs/architecture.md, "Performance budget").
    let mut pf: Box<PacketFloor<1024>> = Box::default();
    let floor_packet =
        *KernelDispatchPacket { header: DISPATCH_HEADER.0, setup: 3, grid_size_x: 1, ..Default::default() }.words();
    let chunk = 512u64;
    let packet =
        median((0..samples).map(|_| packet_floor_sample(&mut pf, &floor_packet, k(chunk * 8, chunk))).collect());
    let live_packet = median(live_packet_floor_samples(&floor_packet, samples, k(chunk * 8, chunk)));
    let opts = OpenOptions { wait: WaitMode::Spin, ring_packets: opts.ring_packets.max(2048), ..opts.clone() };
    let dev = Device::open(&opts).map_err(|e| e.to_string())?;
    let info = dev.info().map_err(|e| format!("device info: {e}"))?;
    let device = DeviceSummary {
        index: dev.index(),
        gfx: crate::cli::gfx_name(info.gfx_target_version),
        gfx_target_version: info.gfx_target_version,
        cu_count: info.cu_count,
    };
    let bar = if progress {
        let b = indicatif::ProgressBar::new(FIGURES);
        if let Ok(style) = indicatif::ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {msg}") {
            b.set_style(style.progress_chars("=> "));
        }
        b.set_prefix(format!("bench on {}", dev.backend_kind()));
        b
    } else {
        indicatif::ProgressBar::hidden()
    };
    let e = |what: &'static str| move |err: aqueduct::Error| format!("{what}: {err}");
    let mut figures = Vec::new();
    let (kernel, _module) = bench_kernel(&dev)?;
    let args = AddArgs { dst: 0, n: 0, v: 0 };
    let s = dev.stream().map_err(e("stream"))?;

    bar.inc(1);

    bar.set_message("enqueue_dispatch");
    let one = Dim3::x(1);
    let mut enq = Vec::new();
    for _ in 0..samples + 2 {
        let t = Instant::now();
        for _ in 0..chunk {
            s.launch(&kernel, one, one, black_box(&args)).map_err(e("launch"))?;
        }
        enq.push(per(t.elapsed(), chunk));
        s.synchronize().map_err(e("sync"))?;
    }
    enq.drain(..2);
    figures.push(Figure {
        name: "enqueue_dispatch",
        ns: median(enq),
        floor: Some("live_packet"),
        floor_ns: Some(live_packet),
        target: "<= 1.5x live packet floor",
    });
    bar.inc(1);

    bar.set_message("graph_launch_per_node_1000");
    let nodes = 1000u32;
    let g = s
        .capture(CaptureMode::Global, |c| {
            for _ in 0..nodes {
                c.launch(&kernel, one, one, &args)?;
            }
            Ok(())
        })
        .map_err(e("capture 1000"))?;
    let x = g.instantiate().map_err(e("instantiate 1000"))?;
    let mut gl = Vec::new();
    for _ in 0..samples + 1 {
        let t = Instant::now();
        x.launch(&s).map_err(e("graph launch"))?;
        gl.push(per(t.elapsed(), u64::from(nodes)));
        s.synchronize().map_err(e("sync"))?;
    }
    gl.remove(0);
    drop(x);
    drop(g);
    let copy = median((0..samples).map(|_| copy_floor(nodes as usize + 1, k(200, 20))).collect());
    figures.push(Figure {
        name: "graph_launch_per_node_1000",
        ns: median(gl),
        floor: Some("copy"),
        floor_ns: Some(copy),
        target: "<= 2 ns per node",
    });
    bar.inc(1);

    bar.set_message("capture_instantiate_per_node");
    let cn = 100u32;
    let mut ci = Vec::new();
    for _ in 0..samples {
        let t = Instant::now();
        let g = s
            .capture(CaptureMode::Global, |c| {
                for _ in 0..cn {
                    c.launch(&kernel, one, one, &args)?;
                }
                Ok(())
            })
            .map_err(e("capture"))?;
        let x = g.instantiate().map_err(e("instantiate"))?;
        ci.push(per(t.elapsed(), u64::from(cn)));
        drop(x);
        drop(g);
    }
    let copy100 = median((0..samples).map(|_| copy_floor(cn as usize, k(2000, 200))).collect());
    figures.push(Figure {
        name: "capture_instantiate_per_node",
        ns: median(ci),
        floor: Some("copy_100"),
        floor_ns: Some(copy100),
        target: "<= 100 ns per node",
    });
    bar.inc(1);

    bar.set_message("stream_create_destroy");
    let rt = dev.runtime();
    // Warm the slot's cached queue.
    for _ in 0..4 {
        let h = rt.stream_create(0).map_err(e("stream create"))?;
        rt.stream_destroy(h).map_err(e("stream destroy"))?;
    }
    let n = k(20_000, 1_000);
    let mut cds = Vec::new();
    for _ in 0..samples {
        let t = Instant::now();
        for _ in 0..n {
            let h = rt.stream_create(black_box(0)).map_err(e("stream create"))?;
            rt.stream_destroy(black_box(h)).map_err(e("stream destroy"))?;
        }
        cds.push(per(t.elapsed(), n));
    }
    let cd = median(cds);
    figures.push(Figure { name: "stream_create_destroy", ns: cd, floor: None, floor_ns: None, target: "<= 200 ns" });
    bar.inc(1);

    bar.set_message("validate_handle (loopback)");
    let (one_rt, one_h) = validate_runtime(1)?;
    bar.inc(1);
    let (many_rt, many_h) = validate_runtime(1024)?;
    bar.inc(1);
    let n = k(1_000_000, 20_000);
    let v1 = median((0..samples).map(|_| validate_sample(&one_rt, one_h[0], n)).collect::<Result<_, _>>()?);
    let last = *many_h.last().ok_or("no stream")?;
    let v1024 = median((0..samples).map(|_| validate_sample(&many_rt, last, n)).collect::<Result<_, _>>()?);
    figures.push(Figure { name: "validate_handle_1", ns: v1, floor: None, floor_ns: None, target: "O(1)" });
    figures.push(Figure {
        name: "validate_handle_1024",
        ns: v1024,
        floor: Some("validate_handle_1"),
        floor_ns: Some(v1),
        target: "flat: ~1x",
    });
    bar.inc(1);

    bar.set_message("pingpong floor");
    let pp = ping_pong_floor(samples.max(5), k(20_000, 1_000)).as_secs_f64() * 1e9;
    bar.inc(1);

    bar.set_message("roundtrip_emulated");
    let n = k(2_000, 100);
    let mut rtt = Vec::new();
    for _ in 0..samples {
        let t = Instant::now();
        for _ in 0..n {
            s.launch(&kernel, one, one, &args).map_err(e("launch"))?;
            s.synchronize().map_err(e("sync"))?;
        }
        rtt.push(per(t.elapsed(), n));
    }
    figures.push(Figure {
        name: "roundtrip_emulated",
        ns: median(rtt),
        floor: Some("pingpong"),
        floor_ns: Some(pp),
        target: "<= 2x ping-pong floor",
    });
    bar.inc(1);

    bar.set_message("event_record_sync");
    let ev = dev.event(false).map_err(e("event"))?;
    let mut ers = Vec::new();
    for _ in 0..samples {
        let t = Instant::now();
        for _ in 0..n {
            s.record(&ev).map_err(e("record"))?;
            ev.synchronize().map_err(e("event sync"))?;
        }
        ers.push(per(t.elapsed(), n));
    }
    figures.push(Figure {
        name: "event_record_sync",
        ns: median(ers),
        floor: Some("pingpong"),
        floor_ns: Some(pp),
        target: "<= 2x ping-pong floor",
    });
    bar.inc(1);
    figures.extend(device_engine_figures(&dev, &s, &kernel, bench)?);
    let cond = super::bench_cond::figures(&dev, &s, bench)?;
    bar.finish_and_clear();
    drop(ev);
    drop(s);
    dev.synchronize().map_err(e("device synchronize"))?;
    if let Some(err) = dev.take_sticky_error() {
        return Err(format!("a drop failed: {err}"));
    }
    let mut floors = vec![
        Floor { name: "packet", ns: packet, what: "aqueduct::floor::PacketFloor::submit, ns per packet" },
        Floor {
            name: "live_packet",
            ns: live_packet,
            what: "aqueduct::floor::LiveProducer::submit with a consumer thread retiring, ns per packet",
        },
        Floor { name: "copy", ns: copy, what: "copying 1001 64-byte packets, ns per packet" },
        Floor { name: "copy_100", ns: copy100, what: "copying 100 64-byte packets, ns per packet" },
        Floor { name: "pingpong", ns: pp, what: "one cache line between two threads, ns per round trip" },
    ];
    floors.extend(cond.as_ref().map(|(_, f)| f.clone()));
    figures.extend(cond.map(|(f, _)| f));
    // The queue pool and the lock-free submit path, on core's loopback.
    figures.extend(super::bench_pool::figures(samples, bench.short, packet)?);
    // The gfx90a executor's speed against the same loops on the host, one thread each.
    let (isa_figures, isa_floors) = super::bench_isa::figures(samples, bench.short)?;
    figures.extend(isa_figures);
    floors.extend(isa_floors);
    // How its work-groups spread over the emulated GPU's compute-unit workers.
    let (scaling, one_worker) = super::bench_isa::scaling_figures(samples, bench.short)?;
    figures.push(scaling);
    floors.push(one_worker);
    // The HIP library's launch cost against core's, in that library's own runtime.
    if let Some((hip_figures, hip_floors)) = super::bench_hip::figures(samples, bench.short)? {
        figures.extend(hip_figures);
        floors.extend(hip_floors);
    }
    Ok(Report { backend: dev.backend_kind().name(), device, floors, figures })
}

fn num(v: Option<f64>) -> serde_json::Value {
    match v {
        Some(x) if x.is_finite() => serde_json::json!((x * 1000.0).round() / 1000.0),
        _ => serde_json::Value::Null,
    }
}

/// `{"figures":[{"name", "ns", "floor", "floor_ns", "ratio"}, …], "backend", "device":{"index",
/// "gfx", "gfx_target_version", "cu_count"}, "floors":{name: ns, …}}`.
pub fn to_json(report: &Report) -> String {
    let figures: Vec<serde_json::Value> = report
        .figures
        .iter()
        .map(|f| {
            serde_json::json!({
                "name": f.name,
                "ns": num(Some(f.ns)),
                "floor": f.floor,
                "floor_ns": num(f.floor_ns),
                "ratio": num(f.ratio()),
            })
        })
        .collect();
    let floors: serde_json::Map<String, serde_json::Value> =
        report.floors.iter().map(|f| (f.name.to_string(), num(Some(f.ns)))).collect();
    let d = &report.device;
    let v = serde_json::json!({
        "figures": figures,
        "backend": report.backend,
        "device": {
            "index": d.index,
            "gfx": d.gfx,
            "gfx_target_version": d.gfx_target_version,
            "cu_count": d.cu_count,
        },
        "floors": floors,
    });
    v.to_string()
}

/// The readable table, after the backend, the device and the floors.
pub fn print_table<W: Write>(report: &Report, out: &mut W) {
    let d = &report.device;
    let _ = writeln!(
        out,
        "aqueduct bench on `{}`, device {} ({}, {} CUs); median ns per operation, floors measured in this run",
        report.backend, d.index, d.gfx, d.cu_count
    );
    let _ = writeln!(out, "floors:");
    for f in &report.floors {
        let _ = writeln!(out, "  {:<19} {:>10.2} ns  {}", f.name, f.ns, f.what);
    }
    let _ = writeln!(out, "{:<30} {:>12} {:<18} {:>12} {:>8}  target", "figure", "ns", "floor", "floor ns", "ratio");
    for f in &report.figures {
        let _ = writeln!(
            out,
            "{:<30} {:>12.2} {:<18} {:>12} {:>8}  {}",
            f.name,
            f.ns,
            f.floor.unwrap_or("-"),
            f.floor_ns.map_or("-".into(), |v| format!("{v:.2}")),
            f.ratio().map_or("-".into(), |r| if r < 0.1 { format!("{r:.4}x") } else { format!("{r:.2}x") }),
            f.target
        );
    }
}

// ----- the device's engines (the emulated GPU's targets) ----------------------------------------

/// Throughput figures of the device's engines, each beside its floor from this run:
/// `empty_kernel_dispatch` (batches of 1024 empty kernels run to completion through core, per
/// dispatch: every packet decrements the stream's progress signal, on which the synchronize
/// spins; ≥ 5 M/s is ≤ 200 ns), and `copy_1mib` / `fill_1mib`
/// (the built-in copy and fill of 1 MiB on the device, against `memcpy` / `memset` of 1 MiB on
/// the host; ≥ 2 GB/s is ≤ 524 288 ns). (Enqueue with the device live is `enqueue_dispatch`.)
fn device_engine_figures(
    dev: &Device,
    s: &crate::api::Stream<'_>,
    kernel: &Kernel<AddArgs>,
    bench: BenchOptions,
) -> Result<Vec<Figure>, String> {
    let e = |what: &'static str| move |err: aqueduct::Error| format!("{what}: {err}");
    let samples = bench.samples.max(1);
    let k = |full: u64, short: u64| if bench.short { short } else { full };
    let args = AddArgs { dst: 0, n: 0, v: 0 };
    let one = Dim3::x(1);
    let mut out = Vec::new();

    let batch = k(1024, 128);
    let rounds = k(5, 2);
    let mut empty = Vec::new();
    for _ in 0..samples {
        let t = Instant::now();
        for _ in 0..rounds {
            for _ in 0..batch {
                s.launch(kernel, one, one, &args).map_err(e("launch"))?;
            }
            s.synchronize().map_err(e("sync"))?;
        }
        empty.push(per(t.elapsed(), batch * rounds));
    }
    out.push(Figure {
        name: "empty_kernel_dispatch",
        ns: median(empty),
        floor: None,
        floor_ns: None,
        target: "emulated device: >= 5 M/s (<= 200 ns)",
    });

    const MIB: usize = 1 << 20;
    let src = dev.alloc::<u32>(MIB / 4).map_err(e("alloc"))?;
    let dst = dev.alloc::<u32>(MIB / 4).map_err(e("alloc"))?;
    src.fill(s, 7).map_err(e("fill"))?;
    s.synchronize().map_err(e("sync"))?;
    let reps = k(20, 4);
    let timed = |f: &dyn Fn() -> crate::api::Result<()>| -> Result<f64, String> {
        let mut v = Vec::new();
        for _ in 0..samples {
            let t = Instant::now();
            for _ in 0..reps {
                f().map_err(|err| format!("blit: {err}"))?;
                s.synchronize().map_err(|err| format!("sync: {err}"))?;
            }
            v.push(per(t.elapsed(), reps));
        }
        Ok(median(v))
    };
    let copy = timed(&|| dst.copy_from(s, &src))?;
    let fill = timed(&|| dst.fill(s, 0x5a5a_5a5a))?;
    let host_src = vec![0x5au8; MIB];
    let mut host_dst = vec![0u8; MIB];
    let host = |f: &mut dyn FnMut()| {
        median(
            (0..samples)
                .map(|_| {
                    let t = Instant::now();
                    for _ in 0..reps {
                        f();
                    }
                    per(t.elapsed(), reps)
                })
                .collect(),
        )
    };
    let memcpy = host(&mut || host_dst.copy_from_slice(black_box(&host_src)));
    let memset = host(&mut || black_box(&mut host_dst).fill(0x5a));
    out.push(Figure {
        name: "copy_1mib",
        ns: copy,
        floor: Some("memcpy_1mib"),
        floor_ns: Some(memcpy),
        target: "emulated device: >= 2 GB/s (<= 524288 ns)",
    });
    out.push(Figure {
        name: "fill_1mib",
        ns: fill,
        floor: Some("memset_1mib"),
        floor_ns: Some(memset),
        target: "emulated device: >= 2 GB/s (<= 524288 ns)",
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_validation_is_an_error_not_a_fast_sample() {
        let (rt, hs) = validate_runtime(1).expect("loopback runtime");
        assert!(validate_sample(&rt, hs[0], 10).is_ok());
        rt.stream_destroy(hs[0]).expect("destroy");
        let err = validate_sample(&rt, hs[0], 10).expect_err("a stale handle fails every validation");
        assert!(err.contains("failed 10 of 10"), "{err}");
    }
}
