//! RAII and sticky errors of the Rust API, on the emulator.

use std::time::Duration;

use aqueduct::{CaptureMode, CaptureStatus, Error};

use super::*;
use crate::select::{BackendKind, OpenOptions};

fn emu() -> Device {
    Device::open(&OpenOptions::new(BackendKind::Emu)).expect("the emulator opens")
}

#[test]
fn drops_destroy_streams_events_graphs_and_free_memory_at_the_next_sync() {
    let dev = emu();
    let (s_handle, e_handle);
    {
        let s = dev.stream().unwrap();
        let e = dev.event(false).unwrap();
        let buf = dev.alloc::<u32>(1024).unwrap();
        buf.fill(&s, 5).unwrap();
        s.record(&e).unwrap();
        s_handle = s.handle();
        e_handle = e.handle();
        let g = s.capture(CaptureMode::Global, |s| buf.fill(s, 1)).unwrap();
        let x = g.instantiate().unwrap();
        x.launch(&s).unwrap();
        // Drops run here in reverse order, with the fill and the launch maybe still pending.
    }
    assert_eq!(dev.sticky_error(), None);
    assert_eq!(dev.runtime().stream_priority(s_handle), Err(Error::ContextIsDestroyed));
    assert_eq!(dev.runtime().event_query(e_handle), Err(Error::ContextIsDestroyed));
    dev.synchronize().unwrap();
    assert_eq!(dev.take_sticky_error(), None);
}

#[test]
fn an_error_in_drop_is_sticky_until_taken() {
    let dev = emu();
    let s = dev.stream().unwrap();
    // Destroy the stream behind the wrapper's back: its drop then fails, without panicking.
    dev.runtime().stream_destroy(s.handle()).unwrap();
    drop(s);
    assert_eq!(dev.sticky_error(), Some(Error::ContextIsDestroyed));
    // The first error wins and stays until taken.
    let e = dev.event(false).unwrap();
    dev.runtime().event_destroy(e.handle()).unwrap();
    drop(e);
    assert_eq!(dev.sticky_error(), Some(Error::ContextIsDestroyed));
    assert_eq!(dev.take_sticky_error(), Some(Error::ContextIsDestroyed));
    assert_eq!(dev.sticky_error(), None);
}

#[test]
fn drop_does_not_wait_for_pending_work() {
    let dev = emu();
    let gate = dev.alloc_host::<u32>(1).unwrap();
    let s = dev.stream().unwrap();
    // The stream blocks on a value nobody writes yet.
    dev.runtime().wait_value32(s.handle(), gate.address(), 1, 1, u32::MAX).unwrap();
    let t = std::time::Instant::now();
    drop(s);
    assert!(t.elapsed() < Duration::from_millis(200), "a stream drop waited");
    gate.write(&[1]);
    dev.synchronize_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(dev.sticky_error(), None);
}

#[test]
fn host_functions_and_fork_join_capture() {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;
    let dev = emu();
    let main = dev.stream().unwrap();
    let a = dev.stream().unwrap();
    let b = dev.stream().unwrap();
    let hits = Arc::new(AtomicU32::new(0));
    let h = hits.clone();
    let buf = dev.alloc::<u32>(64).unwrap();
    let g = main
        .capture(CaptureMode::ThreadLocal, |m| {
            assert_eq!(m.capture_status(), Ok(CaptureStatus::Active));
            m.fork_join(&[&a, &b], |br| {
                br[0].host_fn(move || {
                    h.fetch_add(1, Ordering::SeqCst);
                })?;
                buf.fill(br[1], 3)
            })
        })
        .unwrap();
    assert!(g.node_count().unwrap() >= 2);
    let x = g.instantiate().unwrap();
    for _ in 0..5 {
        x.launch(&main).unwrap();
    }
    main.synchronize().unwrap();
    assert_eq!(hits.load(Ordering::SeqCst), 5);
}

#[test]
fn per_thread_streams_are_per_thread_and_given_back_at_thread_exit() {
    let dev = emu();
    let id_here = dev.per_thread_stream().id().unwrap();
    let id_there = std::thread::scope(|s| s.spawn(|| dev.per_thread_stream().id().unwrap()).join().unwrap());
    assert_ne!(id_here, id_there);
    // More threads than the thread table holds, one after another: exits free their slots.
    for _ in 0..(MAX_THREADS + 4) {
        std::thread::scope(|s| {
            s.spawn(|| {
                let st = dev.per_thread_stream();
                st.synchronize().unwrap();
                st.id().unwrap()
            })
            .join()
            .unwrap();
        });
    }
}

#[test]
fn typed_host_kernel_launch() {
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Args {
        dst: u64,
        v: u32,
        n: u32,
    }
    // SAFETY: repr(C), no padding.
    unsafe impl KernelArgs for Args {}
    let dev = emu();
    let k: Kernel<Args> = dev
        .host_kernel("set", |ctx, wg| {
            for i in ctx.items_x(wg) {
                if i < ctx.arg_u32(12) {
                    ctx.mem.write_u32(ctx.arg_u64(0) + 4 * u64::from(i), ctx.arg_u32(8))?;
                }
            }
            Ok(())
        })
        .unwrap();
    let out = dev.alloc_host::<u32>(100).unwrap();
    let s = dev.stream().unwrap();
    s.launch(&k, Dim3::x(128), Dim3::x(64), &Args { dst: out.address(), v: 42, n: 100 }).unwrap();
    s.synchronize().unwrap();
    assert!(out.to_vec().iter().all(|&v| v == 42));
}
