//! Streams whose work must overlap, through core's `Runtime` over kfd-direct on the emulated GPU
//! (which runs queues and work-groups concurrently): the legacy stream does not wait for a
//! non-blocking stream's long kernel, and does wait for a blocking stream's.
//!
//! Kernels signal each other through flags; a spin that waits for a flag has a bound only to
//! turn a broken rule into a failure instead of a hang.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aqueduct::{KernelLaunch, Runtime, SingleThread, StreamHandle};
use aqueduct_kfd::{EmuSys, Kfd, KfdConfig};
use aqueduct_kfd_emu::{EmuConfig, KernelError, Twin};

const DEADLOCK_GUARD: Duration = Duration::from_secs(30);

fn wait_for(flag: &AtomicBool) -> bool {
    let end = Instant::now() + DEADLOCK_GUARD;
    while !flag.load(Ordering::Acquire) {
        if Instant::now() > end {
            return false;
        }
        std::thread::yield_now();
    }
    true
}

fn launch(k: u64) -> KernelLaunch<'static> {
    KernelLaunch {
        kernel_object: k,
        grid: [1, 1, 1],
        workgroup: [1, 1, 1],
        group_segment_size: 0,
        private_segment_size: 0,
        kernarg: &[],
    }
}

/// A long kernel: it starts, waits for `release`, finishes.
#[derive(Default)]
struct Long {
    started: AtomicBool,
    release: AtomicBool,
    finished: AtomicBool,
}

struct Setup {
    rt: Runtime<Kfd<EmuSys>, SingleThread>,
    long: Arc<Long>,
    long_k: u64,
    /// A kernel that records whether the long kernel had finished when it ran.
    probe_k: u64,
    probe_saw_finished: Arc<AtomicBool>,
    probe_ran: Arc<AtomicBool>,
}

fn setup() -> Setup {
    // Two compute-unit workers, so that a long kernel leaves one free whatever the host.
    let sys = EmuSys::new(EmuConfig::default().cus(2)).unwrap();
    let long = Arc::new(Long::default());
    let l = Arc::clone(&long);
    let long_k = sys.emu().register_kernel(Twin::new("long", 0, move |_, _| {
        l.started.store(true, Ordering::Release);
        if !wait_for(&l.release) {
            return Err(KernelError::Trap);
        }
        l.finished.store(true, Ordering::Release);
        Ok(())
    }));
    let (saw, ran) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let (l, s, r) = (Arc::clone(&long), Arc::clone(&saw), Arc::clone(&ran));
    let probe_k = sys.emu().register_kernel(Twin::new("probe", 0, move |_, _| {
        s.store(l.finished.load(Ordering::Acquire), Ordering::Release);
        r.store(true, Ordering::Release);
        Ok(())
    }));
    let rt = Runtime::new(Kfd::open(sys, KfdConfig::default()).unwrap(), SingleThread);
    Setup { rt, long, long_k, probe_k, probe_saw_finished: saw, probe_ran: ran }
}

#[test]
fn the_legacy_stream_does_not_wait_for_a_long_kernel_on_a_non_blocking_stream() {
    let e = setup();
    let s = e.rt.stream_create(aqueduct::StreamFlags::NON_BLOCKING.bits()).unwrap();
    e.rt.launch_kernel(s, &launch(e.long_k)).unwrap();
    assert!(wait_for(&e.long.started));
    // Legacy-stream work runs while the non-blocking stream's kernel still runs, and the legacy
    // stream's synchronize returns: the long kernel is released only afterwards.
    e.rt.launch_kernel(StreamHandle::LEGACY, &launch(e.probe_k)).unwrap();
    e.rt.stream_synchronize(StreamHandle::LEGACY).unwrap();
    assert!(e.probe_ran.load(Ordering::Acquire));
    assert!(!e.probe_saw_finished.load(Ordering::Acquire), "the legacy stream's kernel did not wait");
    assert!(!e.long.finished.load(Ordering::Acquire));
    e.long.release.store(true, Ordering::Release);
    e.rt.stream_synchronize(s).unwrap();
    assert!(e.long.finished.load(Ordering::Acquire));
}

#[test]
fn the_legacy_stream_waits_for_a_long_kernel_on_a_blocking_stream() {
    let e = setup();
    let b = e.rt.stream_create(0).unwrap();
    e.rt.launch_kernel(b, &launch(e.long_k)).unwrap();
    // Enqueued behind the blocking stream's kernel by the legacy stream's implicit
    // synchronization: it must run after it, although a worker is free.
    e.rt.launch_kernel(StreamHandle::LEGACY, &launch(e.probe_k)).unwrap();
    std::thread::scope(|sc| {
        let long = &e.long;
        sc.spawn(move || {
            assert!(wait_for(&long.started));
            long.release.store(true, Ordering::Release);
        });
        e.rt.stream_synchronize(StreamHandle::LEGACY).unwrap();
        assert!(e.long.finished.load(Ordering::Acquire), "the legacy synchronize waited for the kernel");
    });
    assert!(e.probe_ran.load(Ordering::Acquire));
    assert!(e.probe_saw_finished.load(Ordering::Acquire), "the legacy stream's kernel ran after the blocking one");
}
