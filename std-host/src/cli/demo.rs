//! `aqueduct demo`: a tour of the runtime on the default device, every result checked.
//!
//! Several streams with priorities; kernels (a host twin registered directly on the emulator,
//! and kernels of a real clang-built AMDHSA code object — run by the hardware, on the emulated
//! gfx90a as their own machine code, on other emulated targets by twins bound to their symbol
//! names); copies in every direction; fills; events across
//! streams; a host function; and a fork/join graph captured once and relaunched many times.
//! Each step prints what ran, on which hardware queue, and how long it took (host wall time from
//! enqueue to completion).

use std::io::Write;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aqueduct::CaptureMode;
use aqueduct_kfd_emu::{KernelCtx, KernelError};

use crate::api::{Device, Dim3, Kernel, KernelArgs, Stream};
use crate::select::OpenOptions;

/// Elements per buffer.
pub const N: u32 = 4096;
/// Graph relaunches.
pub const GRAPH_LAUNCHES: u32 = 100;

/// The demo code object for a gfx target (`gfx_target_version`).
pub fn demo_code_object(gfx_target_version: u32) -> Option<&'static [u8]> {
    match gfx_target_version {
        90010 => Some(include_bytes!("../../kernels/demo-gfx90a.co")),
        90400 | 90402 => Some(include_bytes!("../../kernels/demo-gfx940.co")),
        110000 => Some(include_bytes!("../../kernels/demo-gfx1100.co")),
        _ => None,
    }
}

/// `iota_u32(dst, n, scale)`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct IotaArgs {
    /// Destination.
    pub dst: u64,
    /// Elements.
    pub n: u32,
    /// Multiplier.
    pub scale: u32,
}
// SAFETY: repr(C), 8 + 4 + 4 bytes, no padding.
unsafe impl KernelArgs for IotaArgs {}

/// `axpy_u32(x, y, a, n)`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct AxpyArgs {
    /// Input.
    pub x: u64,
    /// Input and output.
    pub y: u64,
    /// Multiplier.
    pub a: u32,
    /// Elements.
    pub n: u32,
}
// SAFETY: repr(C), 8 + 8 + 4 + 4 bytes, no padding.
unsafe impl KernelArgs for AxpyArgs {}

/// `add_u32(dst, n, v)`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct AddArgs {
    /// Destination.
    pub dst: u64,
    /// Elements.
    pub n: u32,
    /// Addend.
    pub v: u32,
}
// SAFETY: repr(C), 8 + 4 + 4 bytes, no padding.
unsafe impl KernelArgs for AddArgs {}

// Each twin resolves its buffer once per work-group (a bounds-checked device slice) and then
// touches only the work-group's elements.

fn twin_iota(ctx: &KernelCtx<'_>, wg: [u32; 3]) -> Result<(), KernelError> {
    let (dst, n, scale) = (ctx.arg_u64(0), ctx.arg_u32(8), ctx.arg_u32(12));
    let items = ctx.items_x(wg);
    let (lo, hi) = (items.start.min(n), items.end.min(n));
    let d = ctx.mem.slice::<u32>(dst + 4 * u64::from(lo), u64::from(hi - lo))?;
    for (k, i) in (lo..hi).enumerate() {
        d.set(k, i.wrapping_mul(scale))?;
    }
    Ok(())
}

fn twin_axpy(ctx: &KernelCtx<'_>, wg: [u32; 3]) -> Result<(), KernelError> {
    let (x, y, a, n) = (ctx.arg_u64(0), ctx.arg_u64(8), ctx.arg_u32(16), ctx.arg_u32(20));
    let items = ctx.items_x(wg);
    let (lo, hi) = (items.start.min(n), items.end.min(n));
    let len = u64::from(hi - lo);
    let xs = ctx.mem.slice::<u32>(x + 4 * u64::from(lo), len)?;
    let ys = ctx.mem.slice::<u32>(y + 4 * u64::from(lo), len)?;
    for k in 0..ys.len() {
        ys.set(k, a.wrapping_mul(xs.get(k)?).wrapping_add(ys.get(k)?))?;
    }
    Ok(())
}

fn twin_add(ctx: &KernelCtx<'_>, wg: [u32; 3]) -> Result<(), KernelError> {
    let (dst, n, v) = (ctx.arg_u64(0), ctx.arg_u32(8), ctx.arg_u32(12));
    let items = ctx.items_x(wg);
    let (lo, hi) = (items.start.min(n), items.end.min(n));
    let d = ctx.mem.slice::<u32>(dst + 4 * u64::from(lo), u64::from(hi - lo))?;
    for k in 0..d.len() {
        d.set(k, d.get(k)?.wrapping_add(v))?;
    }
    Ok(())
}

/// What the demo did.
#[derive(Debug, Default)]
pub struct DemoReport {
    /// Steps run.
    pub steps: u32,
    /// Results checked.
    pub checks: u32,
}

struct Log<'w, W: Write> {
    out: &'w mut W,
    report: DemoReport,
}

impl<W: Write> Log<'_, W> {
    fn step(&mut self, what: &str, stream: &str, queue: Option<u64>, took: Duration) {
        self.report.steps += 1;
        let q = queue.map_or("-".to_string(), |q| format!("queue {q}"));
        let _ =
            writeln!(self.out, "  [{:>2}] {what:<58} {stream:<8} {q:<9} {:>10.1} µs", self.report.steps, micros(took));
    }

    fn check(&mut self, what: &str, ok: bool) -> Result<(), String> {
        self.report.checks += 1;
        if ok {
            Ok(())
        } else {
            let _ = writeln!(self.out, "  CHECK FAILED: {what}");
            Err(format!("check failed: {what}"))
        }
    }
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn e(what: &str) -> impl Fn(aqueduct::Error) -> String + '_ {
    move |err| format!("{what}: {err}")
}

/// Times `f` and then the synchronisation of `s`.
fn timed(s: &Stream<'_>, f: impl FnOnce() -> crate::api::Result<()>) -> crate::api::Result<Duration> {
    let t = Instant::now();
    f()?;
    s.synchronize()?;
    Ok(t.elapsed())
}

/// Runs the demo on the device `opts` selects, writing the log to `out`.
pub fn run<W: Write>(opts: &OpenOptions, out: &mut W) -> Result<DemoReport, String> {
    let dev = Device::open(opts).map_err(|e| e.to_string())?;
    let r = run_on(&dev, out);
    if let Some(err) = dev.take_sticky_error() {
        return Err(format!("an object's drop failed: {err}"));
    }
    r
}

/// Runs the demo on an open device.
pub fn run_on<W: Write>(dev: &Device, out: &mut W) -> Result<DemoReport, String> {
    let info = dev.info().map_err(e("device info"))?;
    let _ = writeln!(
        out,
        "aqueduct demo on device {} of backend `{}` ({}): {} ({} CUs)",
        dev.index(),
        dev.backend_kind(),
        dev.backend_kind().describe(),
        crate::cli::gfx_name(info.gfx_target_version),
        info.cu_count
    );
    for u in dev.unavailable() {
        let _ = writeln!(out, "  (not used: {u})");
    }
    let mut log = Log { out, report: DemoReport::default() };
    let n = N as usize;
    let grid = Dim3::x(N);
    let block = Dim3::x(256);

    // Streams with priorities.
    let high = dev.stream_with_priority(-1).map_err(e("stream"))?;
    let normal = dev.stream_with_priority(0).map_err(e("stream"))?;
    let low = dev.stream_with_priority(1).map_err(e("stream"))?;
    for (s, want) in [(&high, -1), (&normal, 0), (&low, 1)] {
        log.check("stream priority", s.priority() == Ok(want))?;
    }

    // Kernels: the code object for this target. The emulated gfx90a runs their own machine
    // code (docs/executor.md); other emulated targets run twins bound by name; hardware runs
    // the code itself.
    let machine_code = info.gfx_target_version == 90010 || dev.backend().as_emu().is_none();
    if !machine_code {
        dev.register_twin::<AxpyArgs>("axpy_u32", twin_axpy);
        dev.register_twin::<AddArgs>("add_u32", twin_add);
        dev.register_twin::<IotaArgs>("iota_u32", twin_iota);
    }
    let code_kind = if machine_code { "code object, machine code" } else { "code object, host twin" };
    let elf = demo_code_object(info.gfx_target_version)
        .ok_or_else(|| format!("no demo code object for gfx target {}", info.gfx_target_version))?;
    let t = Instant::now();
    let module = dev.load_module(elf).map_err(e("load code object"))?;
    let axpy: Kernel<AxpyArgs> = module.kernel("axpy_u32").map_err(e("kernel axpy_u32"))?;
    let add: Kernel<AddArgs> = module.kernel("add_u32").map_err(e("kernel add_u32"))?;
    log.step(
        &format!("load code object ({} bytes): axpy_u32, add_u32, iota_u32", elf.len()),
        "host",
        None,
        t.elapsed(),
    );
    // A host twin registered directly (emulator), or the code object's iota elsewhere.
    let (iota, iota_kind): (Kernel<IotaArgs>, &str) = match dev.host_kernel::<IotaArgs>("iota_u32 (twin)", twin_iota) {
        Ok(k) => (k, "host twin"),
        Err(_) => (module.kernel("iota_u32").map_err(e("kernel iota_u32"))?, "code object"),
    };

    // Buffers.
    let x = dev.alloc::<u32>(n).map_err(e("alloc"))?;
    let y = dev.alloc::<u32>(n).map_err(e("alloc"))?;
    let z = dev.alloc::<u32>(n).map_err(e("alloc"))?;
    let host_in: Vec<u32> = (0..N).map(|i| 3 * i + 1).collect();
    let h_in = dev.host_from(&host_in).map_err(e("host alloc"))?;
    let h_out = dev.alloc_host::<u32>(n).map_err(e("host alloc"))?;

    // Fill and iota on the high-priority stream.
    let took = timed(&high, || x.fill(&high, 0xdead_beef_u32)).map_err(e("fill"))?;
    log.step(&format!("fill x ({N} x u32) with 0xdeadbeef"), "high", high.queue_id(), took);
    let took = timed(&high, || {
        h_out.copy_from(&high, &x)?;
        Ok(())
    })
    .map_err(e("copy"))?;
    log.step("copy x -> host (device to host)", "high", high.queue_id(), took);
    log.check("fill", h_out.to_vec().iter().all(|&v| v == 0xdead_beef))?;
    let took = timed(&high, || high.launch(&iota, grid, block, &IotaArgs { dst: x.address(), n: N, scale: 2 }))
        .map_err(e("iota"))?;
    log.step(&format!("kernel iota_u32 ({iota_kind}): x[i] = 2i"), "high", high.queue_id(), took);

    // Host to device on the normal stream, then axpy in code-object form.
    let took = timed(&normal, || y.copy_from(&normal, &h_in)).map_err(e("copy"))?;
    log.step("copy host -> y (host to device)", "normal", normal.queue_id(), took);
    let took =
        timed(&normal, || normal.launch(&axpy, grid, block, &AxpyArgs { x: x.address(), y: y.address(), a: 5, n: N }))
            .map_err(e("axpy"))?;
    log.step(&format!("kernel axpy_u32 ({code_kind}): y = 5x + y"), "normal", normal.queue_id(), took);

    // Events across streams: low waits for normal's copy y -> z, then reads z back.
    let ev = dev.event(true).map_err(e("event"))?;
    let start = dev.event(true).map_err(e("event"))?;
    let t = Instant::now();
    normal.record(&start).map_err(e("record"))?;
    z.fill(&normal, 0u32).map_err(e("fill"))?;
    z.copy_from(&normal, &y).map_err(e("copy"))?;
    normal.record(&ev).map_err(e("record"))?;
    low.wait_event(&ev).map_err(e("wait event"))?;
    h_out.copy_from(&low, &z).map_err(e("copy"))?;
    low.synchronize().map_err(e("sync"))?;
    let took = t.elapsed();
    log.step("copy y -> z on normal, event, low waits, z -> host", "normal+low", low.queue_id(), took);
    let want: Vec<u32> = (0..N).map(|i| (5 * 2 * i).wrapping_add(3 * i + 1)).collect();
    log.check("axpy result through events", h_out.to_vec() == want)?;
    let dt = ev.elapsed_since(&start).map_err(e("elapsed"))?;
    let _ = writeln!(log.out, "       event elapsed time on the device: {:.1} µs", micros(dt));
    log.check("event complete", ev.is_complete() == Ok(true))?;

    // A host function between two kernels.
    let flag = Arc::new(AtomicU32::new(0));
    let seen = Arc::new(AtomicU32::new(u32::MAX));
    let (f2, s2) = (flag.clone(), seen.clone());
    let h_probe = dev.alloc_host::<u32>(1).map_err(e("host alloc"))?;
    let probe = h_probe.address();
    let took = timed(&low, || {
        low.fill_raw(probe, 7, 4, 1)?;
        low.host_fn(move || {
            // SAFETY: a live host allocation; the fill before this function completed.
            let v = unsafe { std::ptr::read_volatile(probe as usize as *const u32) };
            s2.store(v, Ordering::SeqCst);
            f2.fetch_add(1, Ordering::SeqCst);
        })?;
        low.fill_raw(probe, 9, 4, 1)
    })
    .map_err(e("host function"))?;
    log.step("fill 7, host function reads it, fill 9", "low", low.queue_id(), took);
    log.check(
        "host function ran once, in order",
        flag.load(Ordering::SeqCst) == 1 && seen.load(Ordering::SeqCst) == 7,
    )?;
    log.check("fill after the host function", h_probe.get(0) == Some(9))?;

    // A captured fork/join graph: main forks to two branches that add to each half, joins, and
    // main adds 1 to the whole buffer; relaunched many times.
    let main = dev.stream().map_err(e("stream"))?;
    let b1 = dev.stream_with_priority(-1).map_err(e("stream"))?;
    let b2 = dev.stream_with_priority(1).map_err(e("stream"))?;
    let acc = dev.alloc::<u32>(n).map_err(e("alloc"))?;
    let half = N / 2;
    let t = Instant::now();
    let graph = main
        .capture(CaptureMode::Global, |m| {
            m.fork_join(&[&b1, &b2], |br| {
                let [a, b] = br else { return Err(aqueduct::Error::InvalidValue) };
                a.launch(&add, Dim3::x(half), block, &AddArgs { dst: acc.address(), n: half, v: 2 })?;
                b.launch(
                    &add,
                    Dim3::x(half),
                    block,
                    &AddArgs { dst: acc.address() + 4 * u64::from(half), n: half, v: 3 },
                )
            })?;
            m.launch(&add, grid, block, &AddArgs { dst: acc.address(), n: N, v: 1 })
        })
        .map_err(e("capture"))?;
    let nodes = graph.node_count().map_err(e("graph"))?;
    let exec = graph.instantiate().map_err(e("instantiate"))?;
    log.step(&format!("capture fork/join graph ({nodes} nodes) + instantiate"), "main", None, t.elapsed());
    let took = timed(&main, || acc.fill(&main, 0u32)).map_err(e("fill"))?;
    log.step("fill acc with 0", "main", main.queue_id(), took);
    let t = Instant::now();
    for _ in 0..GRAPH_LAUNCHES {
        exec.launch(&main).map_err(e("graph launch"))?;
    }
    let enq = t.elapsed();
    main.synchronize().map_err(e("sync"))?;
    let took = t.elapsed();
    log.step(
        &format!("graph launch x{GRAPH_LAUNCHES} (enqueue {:.1} µs each)", micros(enq) / f64::from(GRAPH_LAUNCHES)),
        "main",
        main.queue_id(),
        took,
    );
    let h_acc = dev.alloc_host::<u32>(n).map_err(e("host alloc"))?;
    let took = timed(&main, || h_acc.copy_from(&main, &acc)).map_err(e("copy"))?;
    log.step("copy acc -> host", "main", main.queue_id(), took);
    let got = h_acc.to_vec();
    let ok = got.iter().enumerate().all(|(i, &v)| v == GRAPH_LAUNCHES * if (i as u32) < half { 3 } else { 4 });
    log.check("graph result after relaunches", ok)?;

    // The per-thread stream from two threads.
    let t = Instant::now();
    std::thread::scope(|sc| -> Result<(), String> {
        let hs: Vec<_> = (0..2)
            .map(|k| {
                let y = &y;
                sc.spawn(move || {
                    let s = dev.per_thread_stream();
                    y.fill(&s, 0u32)?;
                    s.synchronize()?;
                    let _ = k;
                    s.id()
                })
            })
            .collect();
        let ids: Vec<_> = hs.into_iter().map(|h| h.join().unwrap_or(Err(aqueduct::Error::Unknown))).collect();
        log.check("per-thread streams differ between threads", ids[0].is_ok() && ids[0] != ids[1])
    })?;
    log.step("per-thread default streams on two threads", "per-thread", None, t.elapsed());

    dev.synchronize().map_err(e("device synchronize"))?;
    let report = std::mem::take(&mut log.report);
    let _ = writeln!(log.out, "demo: {} steps, all {} checks passed", report.steps, report.checks);
    Ok(report)
}
