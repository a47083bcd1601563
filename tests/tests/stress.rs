//! Multi-threaded stress: several host threads create, use and destroy streams, enqueue
//! kernels, record and wait on events, capture (thread-local and relaxed) and launch the
//! captured graphs, synchronise, and share one stream, all on one runtime. Run under
//! ThreadSanitizer by `scripts/verify tsan`; in the ordinary test run it is a smoke test.
//!
//! Checks: no call panics; every launch accepted outside a capture runs exactly once (each
//! thread counts into its own cell, and the shared stream into a shared cell); captured
//! launches run once per graph launch. The counts are compared once every thread has joined:
//! then nothing else pumps the loopback, and one device synchronisation drains it.
//! `tests/stress_kfd.rs` is the same kind of stress over kfd-direct on the emulated GPU.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Barrier;

use aqueduct::{CaptureStatus, Error, StreamHandle, Timeout};
use aqueduct_tests::*;

const THREADS: usize = 4;

fn rounds() -> usize {
    if cfg!(miri) {
        2
    } else {
        std::env::var("AQUEDUCT_STRESS_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(60)
    }
}

/// Synchronises `s`, retrying while another thread is running the loopback's queues (the
/// loopback has no threads of its own: a wait makes progress only when no other thread pumps).
/// While threads run this is best effort: its result is never what a check relies on.
fn sync(rt: &MtRt, s: StreamHandle) -> Result<(), Error> {
    for _ in 0..100_000 {
        match rt.stream_synchronize_timeout(s, Timeout::ZERO) {
            Err(Error::NotReady) => std::thread::yield_now(),
            r => return r,
        }
    }
    Err(Error::NotReady)
}

#[test]
fn threads_enqueue_sync_capture_and_destroy_concurrently() {
    let rt = leaked_mt_runtime();
    let k = register(rt.backend());
    let shared = rt.stream_create(1).unwrap();
    let shared_cell = cell32(0);
    let shared_launches = AtomicU32::new(0);
    let start = Barrier::new(THREADS);
    let accepted: Vec<(&AtomicU32, u32)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|_| {
                let (start, shared_launches) = (&start, &shared_launches);
                scope.spawn(move || {
                    let mine = cell32(0);
                    let mut launched = 0u32;
                    start.wait();
                    for round in 0..rounds() {
                        let s = rt.stream_create((round % 2) as u32).unwrap();
                        let e = rt.event_create(0).unwrap();
                        for _ in 0..3 {
                            if launch(rt, s, k.inc, addr32(mine)).is_ok() {
                                launched += 1;
                            }
                        }
                        if launch(rt, shared, k.inc, addr32(shared_cell)).is_ok() {
                            shared_launches.fetch_add(1, Ordering::SeqCst);
                        }
                        let _ = rt.event_record(e, s, 0);
                        let _ = rt.stream_wait_event(shared, e, 0);
                        // A capture of this thread's stream, launched twice when it ends cleanly.
                        let mode = if round % 3 == 0 { 2 } else { 1 };
                        if rt.stream_begin_capture(s, mode).is_ok() {
                            let captured = launch(rt, s, k.inc, addr32(mine)).is_ok();
                            match rt.stream_end_capture(s) {
                                Ok(g) => {
                                    if let Ok(x) = rt.graph_instantiate(g) {
                                        for _ in 0..2 {
                                            if rt.graph_launch(x, s).is_ok() && captured {
                                                launched += 1;
                                            }
                                        }
                                        let _ = sync(rt, s);
                                        let _ = rt.graph_exec_destroy(x);
                                    }
                                    let _ = rt.graph_destroy(g);
                                }
                                Err(e) => assert!(
                                    matches!(e, Error::StreamCaptureInvalidated | Error::StreamCaptureUnjoined),
                                    "end capture: {e:?}"
                                ),
                            }
                        }
                        assert_eq!(rt.stream_is_capturing(s), Ok(CaptureStatus::None));
                        if round % 4 == 0 {
                            let _ = sync(rt, s);
                            let _ = rt.event_query(e);
                        }
                        rt.event_destroy(e).unwrap();
                        rt.stream_destroy(s).unwrap();
                    }
                    rt.thread_exit();
                    (mine, launched)
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().expect("worker")).collect()
    });
    // Every thread has joined: this thread's pump is the only one, and destroyed streams drain
    // with the rest.
    rt.device_synchronize().unwrap();
    for (t, &(mine, launched)) in accepted.iter().enumerate() {
        assert!(launched as usize >= rounds(), "thread {t}: only {launched} launches accepted");
        assert_eq!(mine.load(Ordering::SeqCst), launched, "thread {t}: runs vs accepted launches");
    }
    assert_eq!(shared_cell.load(Ordering::SeqCst), shared_launches.load(Ordering::SeqCst));
}
