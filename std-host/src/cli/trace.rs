//! `aqueduct trace -o FILE`: runs a small multi-stream workload on the default device and
//! writes a Chrome/Perfetto trace (the Trace Event Format, `{"traceEvents":[...]}`) with one
//! process per device, one thread (track) per hardware queue and one complete (`"X"`) slice
//! per operation.
//!
//! # What a slice measures
//!
//! Core gives every counted packet of a stream the stream's one progress signal, so only the
//! last packet's timestamps survive there. Instead each traced operation is bracketed by two
//! timing events recorded on its stream — `begin`, the operation, `end` — each a barrier-AND
//! packet completing the event's own signal, whose `end_ts` the packet processor (hardware, ROCr
//! or the emulator) writes from the GPU clock when it completes. A slice is
//! `[begin.end_ts, end.end_ts]`, read through core's `event_elapsed_time` against one base event:
//! it starts when the queue reached the operation (everything before it on the stream had
//! completed, cross-stream waits included) and ends when the operation's last packet had
//! completed. It therefore includes the packet processor's per-packet overhead of the operation's
//! packets and of the closing barrier, and for an operation whose packets the host published
//! after the queue had drained, the host's publish latency. A `wait` slice is the time a stream
//! spent blocked on another stream's event. A graph launch is one slice (its packets run back to
//! back on the launching stream's queue).

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use aqueduct::CaptureMode;
use aqueduct_kfd_emu::{KernelCtx, KernelError};
use serde_json::{json, Value};

use crate::api::{Device, Dim3, Event, Kernel, KernelArgs, Stream};
use crate::select::OpenOptions;

/// Elements per buffer.
pub const N: u32 = 8192;
/// Graph launches in the workload.
pub const GRAPH_LAUNCHES: u32 = 3;

/// What a slice measures, as written into the trace's metadata.
pub const SLICE_MEANING: &str = "one slice per stream operation: [end_ts of a timing event recorded just before it, \
end_ts of a timing event recorded just after it] on the operation's stream, from the GPU-clock timestamps the packet \
processor writes into each event's signal; so a slice runs from when the queue reached the operation to when its \
last packet completed (packet-processor overhead included); a `wait` slice is time blocked on another stream";

/// The trace workload's code object for a gfx target (`aqueduct_vadd`, `kernels/trace.cl`).
pub fn trace_code_object(gfx_target_version: u32) -> Option<&'static [u8]> {
    match gfx_target_version {
        90010 => Some(include_bytes!("../../kernels/trace-gfx90a.co")),
        90400 | 90402 => Some(include_bytes!("../../kernels/trace-gfx940.co")),
        110000 => Some(include_bytes!("../../kernels/trace-gfx1100.co")),
        _ => None,
    }
}

/// `aqueduct_vadd(float *c, const float *a, const float *b, uint n)`.
#[repr(C, packed(4))]
#[derive(Debug, Clone, Copy)]
pub struct VaddArgs {
    /// Output.
    pub c: u64,
    /// Input.
    pub a: u64,
    /// Input.
    pub b: u64,
    /// Elements.
    pub n: u32,
}
// SAFETY: repr(C, packed(4)): 3 x 8 + 4 = 28 bytes (the kernel's explicit arguments), no padding.
unsafe impl KernelArgs for VaddArgs {}

/// The host twin of `aqueduct_vadd` (in-process emulator).
fn twin_vadd(ctx: &KernelCtx<'_>, wg: [u32; 3]) -> Result<(), KernelError> {
    let (c, a, b, n) = (ctx.arg_u64(0), ctx.arg_u64(8), ctx.arg_u64(16), ctx.arg_u32(24));
    for i in ctx.items_x(wg) {
        if i < n {
            let off = 4 * u64::from(i);
            let x = f32::from_bits(ctx.mem.read_u32(a + off)?) + f32::from_bits(ctx.mem.read_u32(b + off)?);
            ctx.mem.write_u32(c + off, x.to_bits())?;
        }
    }
    Ok(())
}

/// One traced operation.
#[derive(Debug, Clone, PartialEq)]
pub struct Slice {
    /// What ran.
    pub name: String,
    /// Category: `kernel`, `copy`, `fill`, `wait`, `host`, `graph`.
    pub cat: &'static str,
    /// The stream's name in the workload.
    pub stream: &'static str,
    /// The hardware queue (KFD queue id or ROCr queue id).
    pub queue: u64,
    /// Start in nanoseconds from the trace's origin.
    pub start_ns: i64,
    /// End in nanoseconds from the trace's origin.
    pub end_ns: i64,
}

/// The result of a traced run.
#[derive(Debug, Clone)]
pub struct Trace {
    /// The device's index.
    pub device: u32,
    /// Backend name.
    pub backend: &'static str,
    /// gfx name of the device.
    pub gfx: String,
    /// Timestamp frequency (Hz).
    pub timestamp_frequency: u64,
    /// Hardware queues used: (queue id, stream name, priority).
    pub queues: Vec<(u64, &'static str, i32)>,
    /// Slices, in enqueue order.
    pub slices: Vec<Slice>,
    /// Results checked.
    pub checks: u32,
}

struct Pending<'d> {
    name: String,
    cat: &'static str,
    stream: &'static str,
    begin: Event<'d>,
    end: Event<'d>,
}

struct Tracer<'d> {
    dev: &'d Device,
    base: Event<'d>,
    pending: Vec<Pending<'d>>,
}

impl<'d> Tracer<'d> {
    /// Enqueues `f` on `s` between two timing events.
    fn op(
        &mut self,
        s: &Stream<'d>,
        stream: &'static str,
        cat: &'static str,
        name: impl Into<String>,
        f: impl FnOnce() -> crate::api::Result<()>,
    ) -> Result<(), String> {
        let name = name.into();
        let err = |what: &str, e: aqueduct::Error| format!("{name}: {what}: {e}");
        let begin = self.dev.event(true).map_err(|e| err("event", e))?;
        let end = self.dev.event(true).map_err(|e| err("event", e))?;
        s.record(&begin).map_err(|e| err("record", e))?;
        f().map_err(|e| err("enqueue", e))?;
        s.record(&end).map_err(|e| err("record", e))?;
        self.pending.push(Pending { name, cat, stream, begin, end });
        Ok(())
    }

    /// Nanoseconds from the base event's completion to `e`'s (after the device is idle).
    fn ns(&self, e: &Event<'_>) -> Result<i64, String> {
        let ms = self
            .dev
            .runtime()
            .event_elapsed_time(self.base.handle(), e.handle())
            .map_err(|e| format!("event elapsed time: {e}"))?;
        Ok((f64::from(ms) * 1e6).round() as i64)
    }
}

fn e(what: &str) -> impl Fn(aqueduct::Error) -> String + '_ {
    move |err| format!("{what}: {err}")
}

fn check(ok: bool, what: &str, checks: &mut u32) -> Result<(), String> {
    *checks += 1;
    if ok {
        Ok(())
    } else {
        Err(format!("check failed: {what}"))
    }
}

/// Runs the workload on the device `opts` selects and returns its slices; the log goes to `out`.
pub fn run<W: Write>(opts: &OpenOptions, out: &mut W) -> Result<Trace, String> {
    let dev = Device::open(opts).map_err(|e| e.to_string())?;
    let t = run_on(&dev, out);
    if let Some(err) = dev.take_sticky_error() {
        return Err(format!("an object's drop failed: {err}"));
    }
    t
}

/// Runs the workload on an open device.
pub fn run_on<W: Write>(dev: &Device, out: &mut W) -> Result<Trace, String> {
    let info = dev.info().map_err(e("device info"))?;
    let gfx = crate::cli::gfx_name(info.gfx_target_version);
    let _ = writeln!(
        out,
        "aqueduct trace on device {} of backend `{}` ({}): {gfx}, GPU clock {} MHz",
        dev.index(),
        dev.backend_kind(),
        dev.backend_kind().describe(),
        crate::rounded_mhz(info.timestamp_frequency)
    );
    if info.timestamp_frequency == 0 {
        return Err("the device reports no timestamp frequency".into());
    }
    let mut checks = 0;
    let n = N as usize;
    let (grid, block) = (Dim3::x(N), Dim3::x(256));

    dev.register_twin::<VaddArgs>("aqueduct_vadd", twin_vadd);
    let elf = trace_code_object(info.gfx_target_version)
        .ok_or_else(|| format!("no trace code object for gfx target {}", info.gfx_target_version))?;
    let module = dev.load_module(elf).map_err(e("load code object"))?;
    let vadd: Kernel<VaddArgs> = module.kernel("aqueduct_vadd").map_err(e("kernel aqueduct_vadd"))?;

    let upload = dev.stream_with_priority(-1).map_err(e("stream"))?;
    let compute = dev.stream_with_priority(0).map_err(e("stream"))?;
    let readback = dev.stream_with_priority(1).map_err(e("stream"))?;
    let graph_s = dev.stream().map_err(e("stream"))?;
    let (b1, b2) = (dev.stream().map_err(e("stream"))?, dev.stream().map_err(e("stream"))?);

    let a = dev.alloc::<f32>(n).map_err(e("alloc"))?;
    let b = dev.alloc::<f32>(n).map_err(e("alloc"))?;
    let c = dev.alloc::<f32>(n).map_err(e("alloc"))?;
    let d = dev.alloc::<f32>(n).map_err(e("alloc"))?;
    let ha = dev.host_from(&(0..N).map(|i| i as f32).collect::<Vec<_>>()).map_err(e("host alloc"))?;
    let hb = dev.host_from(&(0..N).map(|i| (2 * i) as f32).collect::<Vec<_>>()).map_err(e("host alloc"))?;
    let hc = dev.alloc_host::<f32>(n).map_err(e("host alloc"))?;
    let hd = dev.alloc_host::<f32>(n).map_err(e("host alloc"))?;

    // The graph, captured before tracing starts: fork/join of two half-size vadds (d = a + b)
    // on two branches, joined back, then the main stream adds b again (d = d + b).
    let half = N / 2;
    let graph = graph_s
        .capture(CaptureMode::Global, |m| {
            m.fork_join(&[&b1, &b2], |br| {
                let [x, y] = br else { return Err(aqueduct::Error::InvalidValue) };
                let args =
                    |off: u64, n: u32| VaddArgs { c: d.address() + off, a: a.address() + off, b: b.address() + off, n };
                x.launch(&vadd, Dim3::x(half), block, &args(0, half))?;
                y.launch(&vadd, Dim3::x(half), block, &args(4 * u64::from(half), half))
            })?;
            m.launch(&vadd, grid, block, &VaddArgs { c: d.address(), a: d.address(), b: b.address(), n: N })
        })
        .map_err(e("capture"))?;
    let nodes = graph.node_count().map_err(e("graph"))?;
    let exec = graph.instantiate().map_err(e("instantiate"))?;

    let base = dev.event(true).map_err(e("event"))?;
    upload.record(&base).map_err(e("record"))?;
    let mut tr = Tracer { dev, base, pending: Vec::new() };

    // upload: a, b from the host; then an event the compute stream waits for.
    tr.op(&upload, "upload", "copy", "copy host -> a (H2D)", || a.copy_from(&upload, &ha))?;
    tr.op(&upload, "upload", "copy", "copy host -> b (H2D)", || b.copy_from(&upload, &hb))?;
    let uploaded = dev.event(false).map_err(e("event"))?;
    upload.record(&uploaded).map_err(e("record"))?;

    // compute: clear c (independent of the upload), wait for it, two kernels.
    tr.op(&compute, "compute", "fill", "fill c with 0", || c.fill(&compute, 0.0))?;
    tr.op(&compute, "compute", "wait", "wait for upload's event", || compute.wait_event(&uploaded))?;
    let args = VaddArgs { c: c.address(), a: a.address(), b: b.address(), n: N };
    tr.op(&compute, "compute", "kernel", "kernel aqueduct_vadd: c = a + b", || {
        compute.launch(&vadd, grid, block, &args)
    })?;
    let args2 = VaddArgs { c: c.address(), a: c.address(), b: a.address(), n: N };
    tr.op(&compute, "compute", "kernel", "kernel aqueduct_vadd: c = c + a", || {
        compute.launch(&vadd, grid, block, &args2)
    })?;
    let computed = dev.event(false).map_err(e("event"))?;
    compute.record(&computed).map_err(e("record"))?;

    // readback: wait for compute, copy c back, a host function.
    tr.op(&readback, "readback", "wait", "wait for compute's event", || readback.wait_event(&computed))?;
    tr.op(&readback, "readback", "copy", "copy c -> host (D2H)", || hc.copy_from(&readback, &c))?;
    let ran = Arc::new(AtomicU32::new(0));
    let ran2 = ran.clone();
    tr.op(&readback, "readback", "host", "host function", || {
        readback.host_fn(move || {
            ran2.fetch_add(1, Ordering::SeqCst);
        })
    })?;

    // graph: independent of the others except for the uploaded inputs.
    tr.op(&graph_s, "graph", "wait", "wait for upload's event", || graph_s.wait_event(&uploaded))?;
    for k in 0..GRAPH_LAUNCHES {
        tr.op(&graph_s, "graph", "graph", format!("graph launch {} ({nodes} nodes)", k + 1), || exec.launch(&graph_s))?;
    }
    tr.op(&graph_s, "graph", "copy", "copy d -> host (D2H)", || hd.copy_from(&graph_s, &d))?;

    dev.synchronize().map_err(e("device synchronize"))?;

    let hc = hc.to_vec();
    check(hc.iter().enumerate().all(|(i, &v)| v == (4 * i) as f32), "c = 2a + b", &mut checks)?;
    let hd = hd.to_vec();
    check(hd.iter().enumerate().all(|(i, &v)| v == (5 * i) as f32), "graph: d = a + 2b", &mut checks)?;
    check(ran.load(Ordering::SeqCst) == 1, "host function ran once", &mut checks)?;

    let mut queues: Vec<(u64, &'static str, i32)> = Vec::new();
    for (s, name) in [(&upload, "upload"), (&compute, "compute"), (&readback, "readback"), (&graph_s, "graph")] {
        let q = s.queue_id().ok_or_else(|| format!("stream {name} has no hardware queue"))?;
        queues.push((q, name, s.priority().unwrap_or(0)));
    }
    let queue_of = |name: &str| queues.iter().find(|q| q.1 == name).map_or(0, |q| q.0);
    let mut slices = Vec::new();
    for p in &tr.pending {
        let (start_ns, end_ns) = (tr.ns(&p.begin)?, tr.ns(&p.end)?);
        slices.push(Slice {
            name: p.name.clone(),
            cat: p.cat,
            stream: p.stream,
            queue: queue_of(p.stream),
            start_ns,
            end_ns: end_ns.max(start_ns),
        });
    }
    // The origin is the earliest slice start (streams run independently of the base event).
    let origin = slices.iter().map(|s| s.start_ns).min().unwrap_or(0);
    for s in &mut slices {
        s.start_ns -= origin;
        s.end_ns -= origin;
    }
    for s in &slices {
        let _ = writeln!(
            out,
            "  {:<40} {:<9} queue {:<4} {:>10.3} µs .. {:>10.3} µs ({:.3} µs)",
            s.name,
            s.stream,
            s.queue,
            s.start_ns as f64 / 1e3,
            s.end_ns as f64 / 1e3,
            (s.end_ns - s.start_ns) as f64 / 1e3
        );
    }
    drop(tr);
    Ok(Trace {
        device: dev.index(),
        backend: dev.backend_kind().name(),
        gfx,
        timestamp_frequency: info.timestamp_frequency,
        queues,
        slices,
        checks,
    })
}

/// Nanoseconds as microseconds with exactly three decimals (exact in decimal).
fn us(ns: i64) -> Value {
    let v: f64 = format!("{}.{:03}", ns.div_euclid(1000), ns.rem_euclid(1000)).parse().unwrap_or(0.0);
    json!(v)
}

/// The trace in the Trace Event Format: `pid` = device index + 1, `tid` = hardware queue id + 1
/// (Perfetto treats 0 specially), metadata events naming them, `"X"` slices with `ts`/`dur` in
/// microseconds.
pub fn to_json(t: &Trace) -> Value {
    let pid = u64::from(t.device) + 1;
    let mut events = vec![
        json!({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "ts": 0, "dur": 0,
               "args": {"name": format!("device {} ({}, {})", t.device, t.gfx, t.backend)}}),
        json!({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "ts": 0, "dur": 0,
               "args": {"sort_index": t.device}}),
    ];
    for (i, (q, stream, prio)) in t.queues.iter().enumerate() {
        events.push(json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": q + 1, "ts": 0, "dur": 0,
            "args": {"name": format!("hw queue {q} (stream {stream}, priority {prio})")}}));
        events.push(json!({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": q + 1, "ts": 0, "dur": 0,
            "args": {"sort_index": i}}));
    }
    for s in &t.slices {
        events.push(json!({"ph": "X", "name": s.name, "cat": s.cat, "pid": pid, "tid": s.queue + 1,
            "ts": us(s.start_ns), "dur": us(s.end_ns - s.start_ns),
            "args": {"stream": s.stream, "queue": s.queue}}));
    }
    json!({
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "tool": "aqueduct trace",
            "backend": t.backend,
            "device": format!("{} {}", t.device, t.gfx),
            "timestamp_frequency_hz": t.timestamp_frequency,
            "slice": SLICE_MEANING,
        }
    })
}

/// Runs the workload and writes the trace to `path`.
pub fn write<W: Write>(opts: &OpenOptions, path: &Path, out: &mut W) -> Result<Trace, String> {
    let t = run(opts, out)?;
    let text = serde_json::to_string(&to_json(&t)).map_err(|e| format!("json: {e}"))?;
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    let _ = writeln!(
        out,
        "trace: {} slices on {} hardware queues, all {} checks passed, written to {}",
        t.slices.len(),
        t.queues.len(),
        t.checks,
        path.display()
    );
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn microseconds_are_exact_three_decimals() {
        assert_eq!(us(1234567), json!(1234.567));
        assert_eq!(us(5), json!(0.005));
        assert_eq!(us(0), json!(0.0));
    }
}
