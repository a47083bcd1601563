//! `aqueduct bench`: every figure of DESIGN.md's performance budget beside its floor, measured
//! in the same run (the methods of core's and kfd-direct's benchmark harnesses).
//!
//! Figures on the selected device: `enqueue_dispatch` (a chunk of launches, then an untimed
//! synchronise), `graph_launch_per_node_1000`, `capture_instantiate_per_node` (100-node
//! captures), `stream_create_destroy`, `roundtrip_emulated` (launch + synchronise, spinning
//! waiter) and `event_record_sync`. Handle validation needs 1024 live streams, more than a
//! device runtime holds, so `validate_handle_1` / `validate_handle_1024` run on core's loopback
//! (as core's benchmark does). Floors: `packet` (reserve, 64-byte packet, release header,
//! doorbell in ordinary memory), `copy` (copying the same number of 64-byte packets),
//! `pingpong` (two threads bouncing one cache line), and `validate_handle_1` for the 1024 case.
//! Each figure is the median of its samples.

use std::hint::black_box;
use std::io::Write;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use aqueduct::loopback::{Loopback, LoopbackMemory};
use aqueduct::{CaptureMode, Runtime, SingleThread, StreamHandle};
use aqueduct_kfd::WaitMode;
use aqueduct_kfd_emu::floor::ping_pong;

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
    /// DESIGN.md's target.
    pub target: &'static str,
}

impl Figure {
    /// `ns / floor_ns`.
    pub fn ratio(&self) -> Option<f64> {
        self.floor_ns.filter(|f| *f > 0.0).map(|f| self.ns / f)
    }
}

/// How long to measure.
#[derive(Debug, Clone, Copy)]
pub struct BenchOptions {
    /// Samples per figure (the median is kept).
    pub samples: usize,
    /// Scale of the iteration counts (1 = full).
    pub short: bool,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn per(d: Duration, n: u64) -> f64 {
    d.as_secs_f64() * 1e9 / n.max(1) as f64
}

// ----- floors -------------------------------------------------------------------------------

#[repr(C, align(64))]
struct Slot([AtomicU32; 16]);

struct PacketFloor {
    ring: Vec<Slot>,
    write: AtomicU64,
    doorbell: AtomicU64,
}

impl PacketFloor {
    fn new() -> Self {
        PacketFloor {
            ring: (0..1024).map(|_| Slot(std::array::from_fn(|_| AtomicU32::new(0)))).collect(),
            write: AtomicU64::new(0),
            doorbell: AtomicU64::new(0),
        }
    }

    #[inline]
    fn submit(&self, p: &[u32; 16]) {
        // Ordering: AcqRel, the multi-producer reservation.
        let i = self.write.fetch_add(1, Ordering::AcqRel);
        let Some(slot) = self.ring.get((i as usize) & (self.ring.len() - 1)) else { return };
        for (d, s) in slot.0.iter().zip(p).skip(1) {
            // Ordering: Relaxed; the body is published by the header store.
            d.store(*s, Ordering::Relaxed);
        }
        // Ordering: Release publishes the body.
        slot.0[0].store(p[0], Ordering::Release);
        // Ordering: Release; the doorbell follows the header.
        self.doorbell.store(i, Ordering::Release);
    }

    fn sample(&self, n: u64) -> f64 {
        let packet = [0x1502u32 | (3 << 16), 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        let t = Instant::now();
        for _ in 0..n {
            self.submit(black_box(&packet));
        }
        per(t.elapsed(), n)
    }
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
type ValidateMem = LoopbackMemory<VALIDATE_S, 8, 64, 1200, 4096>;
type ValidateRt = Runtime<Loopback<'static, VALIDATE_S, 8, 64, 1200, 4096>, SingleThread, VALIDATE_S, 4, 1, 4>;

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

fn validate_sample(rt: &ValidateRt, h: StreamHandle, n: u64) -> f64 {
    let t = Instant::now();
    for _ in 0..n {
        let _ = black_box(rt.stream_priority(black_box(h)));
    }
    per(t.elapsed(), n)
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
/// the round-trip budget assumes a spinning waiter).
pub fn run(opts: &OpenOptions, bench: BenchOptions, progress: bool) -> Result<Vec<Figure>, String> {
    let opts = OpenOptions { wait: WaitMode::Spin, ring_packets: opts.ring_packets.max(2048), ..opts.clone() };
    let dev = Device::open(&opts).map_err(|e| e.to_string())?;
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
    let samples = bench.samples.max(1);
    let k = |full: u64, short: u64| if bench.short { short } else { full };
    let mut figures = Vec::new();
    let (kernel, _module) = bench_kernel(&dev)?;
    let args = AddArgs { dst: 0, n: 0, v: 0 };
    let s = dev.stream().map_err(e("stream"))?;

    bar.set_message("packet floor");
    let pf = PacketFloor::new();
    let chunk = 512u64;
    let packet = median((0..samples).map(|_| pf.sample(k(chunk * 8, chunk))).collect());
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
        floor: Some("packet"),
        floor_ns: Some(packet),
        target: "<= 2x packet floor",
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
        floor: Some("copy"),
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
    let cd = median(
        (0..samples)
            .map(|_| {
                let t = Instant::now();
                for _ in 0..n {
                    if let Ok(h) = rt.stream_create(black_box(0)) {
                        let _ = rt.stream_destroy(black_box(h));
                    }
                }
                per(t.elapsed(), n)
            })
            .collect(),
    );
    figures.push(Figure { name: "stream_create_destroy", ns: cd, floor: None, floor_ns: None, target: "<= 200 ns" });
    bar.inc(1);

    bar.set_message("validate_handle (loopback)");
    let (one_rt, one_h) = validate_runtime(1)?;
    bar.inc(1);
    let (many_rt, many_h) = validate_runtime(1024)?;
    bar.inc(1);
    let n = k(1_000_000, 20_000);
    let v1 = median((0..samples).map(|_| validate_sample(&one_rt, one_h[0], n)).collect());
    let last = *many_h.last().ok_or("no stream")?;
    let v1024 = median((0..samples).map(|_| validate_sample(&many_rt, last, n)).collect());
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
    let pp = median(
        (0..samples)
            .map(|_| {
                let n = k(20_000, 1_000);
                per(ping_pong(n), n)
            })
            .collect(),
    );
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
    bar.finish_and_clear();
    drop(ev);
    drop(s);
    dev.synchronize().map_err(e("device synchronize"))?;
    if let Some(err) = dev.take_sticky_error() {
        return Err(format!("a drop failed: {err}"));
    }
    Ok(figures)
}

fn num(v: Option<f64>) -> String {
    match v {
        Some(x) if x.is_finite() => format!("{x:.3}"),
        _ => "null".into(),
    }
}

/// `{"figures":[{"name":…, "ns":…, "floor":…, "floor_ns":…, "ratio":…}, …]}`.
pub fn to_json(figures: &[Figure]) -> String {
    let items: Vec<String> = figures
        .iter()
        .map(|f| {
            let floor = f.floor.map_or("null".to_string(), |n| format!("\"{n}\""));
            format!(
                "{{\"name\":\"{}\",\"ns\":{},\"floor\":{},\"floor_ns\":{},\"ratio\":{}}}",
                f.name,
                num(Some(f.ns)),
                floor,
                num(f.floor_ns),
                num(f.ratio())
            )
        })
        .collect();
    format!("{{\"figures\":[{}]}}", items.join(","))
}

/// The readable table.
pub fn print_table<W: Write>(figures: &[Figure], backend: &str, out: &mut W) {
    let _ = writeln!(out, "aqueduct bench on `{backend}` (median ns per operation; floors measured in this run)");
    let _ = writeln!(out, "{:<30} {:>12} {:<18} {:>12} {:>8}  target", "figure", "ns", "floor", "floor ns", "ratio");
    for f in figures {
        let _ = writeln!(
            out,
            "{:<30} {:>12.2} {:<18} {:>12} {:>8}  {}",
            f.name,
            f.ns,
            f.floor.unwrap_or("-"),
            f.floor_ns.map_or("-".into(), |v| format!("{v:.2}")),
            f.ratio().map_or("-".into(), |r| format!("{r:.2}x")),
            f.target
        );
    }
}
