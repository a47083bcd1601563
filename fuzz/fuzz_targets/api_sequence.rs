//! Arbitrary sequences of runtime calls (streams, events, captures, graphs, contexts, copies,
//! fills, waits, host functions) on the loopback runtime. No call may panic or misbehave under
//! ASan; every blocking call is made with a bound; and once every capture is ended and the
//! device synchronised, each kernel launch that was accepted outside a capture has run exactly
//! once (conservation), while rejected launches never ran.
#![no_main]

use std::sync::atomic::{AtomicU32, Ordering};

use aqueduct::loopback::{Dispatch, Loopback, LoopbackMemory};
use aqueduct::aql::QueueFault;
use aqueduct::{KernelLaunch, Runtime, SingleThread, StreamHandle, Timeout};
use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;

/// Small tables over a loopback of 12 queues of 8 packets, 64 signals and 4 KiB of heap.
type Sizes = aqueduct::Capacities<12, 16, 2, 16, 3, 16, 2, 12, 16, 8, 12, 8, 64, 64, 4096>;
type Mem = LoopbackMemory<Sizes>;
type Rt<'m> = Runtime<Loopback<'m, Sizes>, SingleThread, Sizes>;

#[derive(Debug, Arbitrary)]
enum Op {
    Create(u32, i32),
    Destroy(u8),
    Launch(u8),
    LaunchRaw { s: u8, grid: [u32; 3], wg: [u16; 3], args: u8 },
    Memset(u8, u16, u8),
    Memcpy(u8, u16, u16, u16),
    WaitValue(u8, u32, u32),
    WriteValue(u8, u32),
    Sync(u8),
    Query(u8),
    EventCreate(u32),
    EventDestroy(u8),
    Record(u8, u8),
    WaitEvent(u8, u8),
    EventQuery(u8),
    Begin(u8, u32),
    End(u8),
    Instantiate(u8),
    GraphLaunch(u8, u8),
    GraphDestroy(u8),
    ExecDestroy(u8),
    CtxCreate,
    CtxStream(u8),
    CtxDestroy(u8),
    DeviceSync,
    Mode(u32),
}

static RUNS: AtomicU32 = AtomicU32::new(0);

fn count(_: &Dispatch) -> Result<(), QueueFault> {
    RUNS.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

fn pick<T: Copy>(v: &[T], i: u8, none: T) -> T {
    if v.is_empty() {
        none
    } else {
        v[usize::from(i) % v.len()]
    }
}

fn stream(v: &[StreamHandle], i: u8) -> StreamHandle {
    match i {
        0 => StreamHandle::NULL,
        1 => StreamHandle::LEGACY,
        2 => StreamHandle::PER_THREAD,
        3 => StreamHandle(u64::from(i) << 40 | 0x5a71),
        _ => pick(v, i, StreamHandle::NULL),
    }
}

fuzz_target!(|ops: Vec<Op>| {
    let mem = Box::new(Mem::new());
    let rt: Rt<'_> = Runtime::new(Loopback::new(&mem), SingleThread);
    let k = rt.backend().register_kernel(count).expect("register");
    let buf = rt.malloc(1024).expect("malloc");
    let flag = rt.malloc(16).expect("malloc");
    RUNS.store(0, Ordering::SeqCst);
    let (mut streams, mut events, mut graphs, mut execs, mut ctxs) = (vec![], vec![], vec![], vec![], vec![]);
    let mut accepted = 0u32;
    let mut maybe_captured = 0u32;
    for op in ops.iter().take(64) {
        match *op {
            Op::Create(f, p) => {
                if let Ok(s) = rt.stream_create_with_priority(f, p) {
                    streams.push(s);
                }
            }
            Op::Destroy(i) => {
                let _ = rt.stream_destroy(stream(&streams, i));
            }
            Op::Launch(i) => {
                let s = stream(&streams, i);
                let capturing = rt.stream_is_capturing(s).map_or(true, |c| c != aqueduct::CaptureStatus::None);
                if rt.launch_kernel(s, &KernelLaunch { kernel_object: k, grid: [1; 3], workgroup: [1; 3], group_segment_size: 0, private_segment_size: 0, kernarg: &[] }).is_ok() {
                    if capturing {
                        // Saturating: a graph launch before it set the count to "unknown" (MAX).
                        maybe_captured = maybe_captured.saturating_add(1);
                    } else {
                        accepted += 1;
                    }
                }
            }
            Op::LaunchRaw { s, grid, wg, args } => {
                let a = [0u8; 255];
                let _ = rt.launch_kernel(stream(&streams, s), &KernelLaunch { kernel_object: u64::from(s) << 6, grid, workgroup: wg, group_segment_size: 0, private_segment_size: 0, kernarg: &a[..usize::from(args)] });
            }
            Op::Memset(i, off, v) => {
                let off = u64::from(off % 1024);
                let _ = rt.memset_async(stream(&streams, i), buf + off, u32::from(v), 1, 1024 - off);
            }
            Op::Memcpy(i, a, b, n) => {
                let (a, b) = (u64::from(a % 512), u64::from(b % 512));
                let _ = rt.memcpy_async(stream(&streams, i), buf + a, buf + b, u64::from(n % 512));
            }
            Op::WaitValue(i, v, op) => {
                // The flag is always 0: only conditions that hold for 0 keep the stream moving,
                // and synchronisation below is bounded anyway.
                let _ = rt.wait_value32(stream(&streams, i), flag, v, op, u32::MAX);
            }
            Op::WriteValue(i, v) => {
                let _ = rt.write_value32(stream(&streams, i), flag + 8, v, 0);
            }
            Op::Sync(i) => {
                let _ = rt.stream_synchronize_timeout(stream(&streams, i), Timeout::ZERO);
            }
            Op::Query(i) => {
                let _ = rt.stream_query(stream(&streams, i));
            }
            Op::EventCreate(f) => {
                if let Ok(e) = rt.event_create(f) {
                    events.push(e);
                }
            }
            Op::EventDestroy(e) => {
                let _ = rt.event_destroy(pick(&events, e, aqueduct::EventHandle::NULL));
            }
            Op::Record(e, i) => {
                let _ = rt.event_record(pick(&events, e, aqueduct::EventHandle::NULL), stream(&streams, i), 0);
            }
            Op::WaitEvent(i, e) => {
                let _ = rt.stream_wait_event(stream(&streams, i), pick(&events, e, aqueduct::EventHandle::NULL), 0);
            }
            Op::EventQuery(e) => {
                let _ = rt.event_query(pick(&events, e, aqueduct::EventHandle::NULL));
            }
            Op::Begin(i, m) => {
                let _ = rt.stream_begin_capture(stream(&streams, i), m);
            }
            Op::End(i) => {
                if let Ok(g) = rt.stream_end_capture(stream(&streams, i)) {
                    graphs.push(g);
                }
            }
            Op::Instantiate(g) => {
                if let Ok(x) = rt.graph_instantiate(pick(&graphs, g, aqueduct::GraphHandle::NULL)) {
                    execs.push(x);
                }
            }
            Op::GraphLaunch(x, i) => {
                let _ = rt.graph_launch(pick(&execs, x, aqueduct::GraphExecHandle::NULL), stream(&streams, i));
                maybe_captured = u32::MAX;
            }
            Op::GraphDestroy(g) => {
                let _ = rt.graph_destroy(pick(&graphs, g, aqueduct::GraphHandle::NULL));
            }
            Op::ExecDestroy(x) => {
                let _ = rt.graph_exec_destroy(pick(&execs, x, aqueduct::GraphExecHandle::NULL));
            }
            Op::CtxCreate => {
                if let Ok(c) = rt.context_create(&[]) {
                    ctxs.push(c);
                }
            }
            Op::CtxStream(c) => {
                if let Ok(s) = rt.context_stream_create(pick(&ctxs, c, aqueduct::ContextHandle(0)), 0, 0) {
                    streams.push(s);
                }
            }
            Op::CtxDestroy(c) => {
                let _ = rt.context_destroy(pick(&ctxs, c, aqueduct::ContextHandle(0)));
            }
            Op::DeviceSync => {
                let _ = rt.device_synchronize_timeout(Timeout::ZERO);
            }
            Op::Mode(m) => {
                let _ = rt.thread_exchange_capture_mode(m);
            }
        }
    }
    // Conservation: after every capture ends and the device drains, accepted launches ran
    // once each (launches into captures and graph launches only ever add runs).
    for s in &streams {
        let _ = rt.stream_end_capture(*s);
    }
    let _ = rt.device_synchronize_timeout(Timeout::ZERO);
    let runs = RUNS.load(Ordering::SeqCst);
    if maybe_captured == 0 {
        assert!(runs <= accepted, "{runs} kernel runs for {accepted} accepted launches");
    }
    drop(rt);
});
