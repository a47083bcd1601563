//! Multi-threaded stress over kfd-direct on the emulated GPU: several host threads create,
//! use and destroy streams and events, launch kernels, enqueue host functions, record and wait
//! on events across streams, capture (thread-local and relaxed) and launch the captured graphs,
//! synchronise streams, events and the device, and share one stream, all on one runtime. The
//! emulator's command-processor thread consumes the rings, polls the dependency signals and
//! completes the signals while the host threads publish packets and wait, and the runtime's
//! host-function service runs the host functions: every party really runs at once. Run under
//! ThreadSanitizer by `scripts/verify tsan`; in the ordinary test run it is a smoke test.
//! `tests/stress.rs` is the same kind of stress over core's loopback.
//!
//! Checks: no call panics or fails where the API promises success; every launch and host
//! function accepted outside a capture runs exactly once (each thread counts into its own
//! cells, the shared stream into a shared cell); a captured launch runs once per graph launch.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Barrier;

use aqueduct::{Backend, CaptureStatus, Error, HostFn, KernelLaunch, Runtime, StreamHandle, Timeout};
use aqueduct_tests::conformance::{KfdEmuTarget, Target};
use aqueduct_tests::StdThreads;

const THREADS: usize = 4;

/// A bound on every wait, so that a lost completion fails the test instead of hanging it. It is
/// no timing claim: waits end as soon as the work completes (ThreadSanitizer slows every
/// access down several times over, hence the margin).
const HANG: Timeout = Timeout(120 * Timeout::SECOND.0);

fn rounds() -> usize {
    std::env::var("AQUEDUCT_STRESS_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(24)
}

/// A zeroed u32 in backend host memory, visible to the emulated GPU.
fn cell<B: Backend>(rt: &Runtime<B, StdThreads>) -> u64 {
    let a = rt.host_malloc(64).expect("cell");
    // SAFETY: fresh host-visible backend memory of 64 bytes, not yet shared with any thread.
    unsafe { std::ptr::write_bytes(a as usize as *mut u8, 0, 64) };
    a
}

fn get(a: u64) -> u32 {
    // SAFETY: a live, aligned cell of backend host memory (`cell`); readers load it only after
    // a synchronisation that orders them after the kernels that wrote it.
    unsafe { AtomicU32::from_ptr(a as usize as *mut u32) }.load(Ordering::SeqCst)
}

fn launch<B: Backend>(rt: &Runtime<B, StdThreads>, s: StreamHandle, kernel: u64, addr: u64) -> aqueduct::Result<()> {
    let args = addr.to_le_bytes();
    rt.launch_kernel(
        s,
        &KernelLaunch {
            kernel_object: kernel,
            grid: [1, 1, 1],
            workgroup: [1, 1, 1],
            group_segment_size: 0,
            private_segment_size: 0,
            kernarg: &args,
        },
    )
}

unsafe extern "C" fn count_host_call(data: *mut c_void) {
    // SAFETY: `data` is the calling thread's counter, which outlives every host function it
    // enqueues (the thread synchronises its streams before it returns).
    let n = unsafe { &*(data as *const AtomicU32) };
    n.fetch_add(1, Ordering::SeqCst);
}

/// What one thread accepted, to compare with what ran.
#[derive(Debug, Default)]
struct Accepted {
    launches: u32,
    host_calls: u32,
    captures_launched: u32,
    invalidated: u32,
    execs_full: u32,
}

fn worker<B: Backend>(
    rt: &Runtime<B, StdThreads>,
    inc: u64,
    mine: u64,
    shared: (StreamHandle, u64, &AtomicU32),
    start: &Barrier,
) -> Accepted {
    let (shared, shared_cell, shared_launches) = shared;
    let host_calls = AtomicU32::new(0);
    let mut acc = Accepted::default();
    start.wait();
    for round in 0..rounds() {
        let s = rt.stream_create((round % 2) as u32).expect("stream create");
        let e = rt.event_create((round % 2) as u32 * 2).expect("event create");
        for _ in 0..3 {
            launch(rt, s, inc, mine).expect("launch");
            acc.launches += 1;
        }
        let f = HostFn::Plain { func: count_host_call, data: &host_calls as *const AtomicU32 as *mut c_void };
        rt.launch_host_func(s, f).expect("host function");
        acc.host_calls += 1;
        launch(rt, shared, inc, shared_cell).expect("launch on the shared stream");
        shared_launches.fetch_add(1, Ordering::SeqCst);
        rt.event_record(e, s, 0).expect("record");
        rt.stream_wait_event(shared, e, 0).expect("wait event");
        // A capture of this thread's stream (thread-local, or relaxed every third round),
        // launched twice when it ends cleanly. Another thread's device synchronisation
        // invalidates it; nothing else may.
        let mode = if round % 3 == 0 { 2 } else { 1 };
        rt.stream_begin_capture(s, mode).expect("begin capture");
        let captured = launch(rt, s, inc, mine);
        match rt.stream_end_capture(s) {
            Ok(g) => {
                captured.expect("launch into a capture");
                // The runtime holds two executable graphs (its `X`): with four threads, an
                // instantiation may find the table full, and the graph never runs.
                match rt.graph_instantiate(g) {
                    Ok(x) => {
                        for _ in 0..2 {
                            rt.graph_launch(x, s).expect("graph launch");
                            acc.launches += 1;
                            acc.captures_launched += 1;
                        }
                        rt.graph_exec_destroy(x).expect("exec destroy");
                    }
                    Err(err) => {
                        assert_eq!(err, Error::OutOfMemory, "instantiate");
                        acc.execs_full += 1;
                    }
                }
                rt.graph_destroy(g).expect("graph destroy");
            }
            Err(err) => {
                assert_eq!(err, Error::StreamCaptureInvalidated, "end capture");
                acc.invalidated += 1;
            }
        }
        assert_eq!(rt.stream_is_capturing(s), Ok(CaptureStatus::None));
        match round % 4 {
            0 => rt.event_synchronize_timeout(e, HANG).expect("event synchronize"),
            1 => {
                let _ = rt.event_query(e);
            }
            2 => match rt.device_synchronize_timeout(HANG) {
                // Refused (and every capture invalidated) while another thread captures.
                Ok(()) | Err(Error::StreamCaptureUnsupported) => {}
                Err(err) => panic!("device synchronize: {err:?}"),
            },
            _ => {}
        }
        // Every round ends with its stream drained, so the counts below are exact.
        rt.stream_synchronize_timeout(s, HANG).expect("stream synchronize");
        rt.event_destroy(e).expect("event destroy");
        rt.stream_destroy(s).expect("stream destroy");
    }
    assert_eq!(get(mine), acc.launches, "runs vs accepted launches");
    assert_eq!(host_calls.load(Ordering::SeqCst), acc.host_calls, "host functions run vs enqueued");
    rt.thread_exit();
    acc
}

#[test]
fn threads_race_the_emulated_command_processor() {
    let (rt, k) = KfdEmuTarget::new().runtime();
    let rt = &*rt;
    let shared = rt.stream_create(1).expect("shared stream");
    let shared_cell = cell(rt);
    let cells: Vec<u64> = (0..THREADS).map(|_| cell(rt)).collect();
    let shared_launches = AtomicU32::new(0);
    let start = Barrier::new(THREADS);
    let accepted: Vec<Accepted> = std::thread::scope(|scope| {
        let workers: Vec<_> = cells
            .iter()
            .map(|&mine| {
                let (start, shared_launches) = (&start, &shared_launches);
                scope.spawn(move || worker(rt, k.inc, mine, (shared, shared_cell, shared_launches), start))
            })
            .collect();
        workers.into_iter().map(|w| w.join().expect("worker")).collect()
    });
    rt.stream_synchronize_timeout(shared, HANG).expect("shared stream synchronize");
    assert_eq!(get(shared_cell), shared_launches.load(Ordering::SeqCst), "shared stream runs vs launches");
    assert_eq!(shared_launches.load(Ordering::SeqCst) as usize, THREADS * rounds());
    // Every capture either ended and its graph ran twice, or a device synchronisation on
    // another thread invalidated it, or the executable-graph table was full (and then its
    // launch never ran: the counts above are exact).
    eprintln!("accepted per thread: {accepted:?}");
    for a in &accepted {
        assert_eq!(a.captures_launched / 2 + a.invalidated + a.execs_full, rounds() as u32, "{a:?}");
    }
    rt.stream_destroy(shared).expect("shared stream destroy");
}
