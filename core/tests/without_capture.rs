//! Streams, events, the queue pool and the null stream's synchronisation on the loopback, and
//! the loopback's built-in kernels and trace, through the public API and without capture: this suite runs with the `capture` feature on and
//! off (`cargo test -p aqueduct --no-default-features --test without_capture`, a CI line).

use std::sync::atomic::{AtomicU32, Ordering};

use aqueduct::aql::QueueFault;
use aqueduct::loopback::{Dispatch, Loopback, LoopbackMemory};
use aqueduct::{Capacities, Error, KernelLaunch, Runtime, SingleThread, StreamHandle};

/// 64 streams over a budget of 2 hardware queues, on a loopback of 8 queues of 64 packets (64
/// kernel-argument bytes each), 160 signals and 4 KiB of heap.
type Sizes = Capacities<64, 16, 2, 8, 1, 8, 1, 8, 2, 8, 8, 64, 64, 160, 4096>;
type Mem = LoopbackMemory<Sizes>;
type Lb = Loopback<'static, Sizes>;
type Rt = Runtime<Lb, SingleThread, Sizes>;

fn runtime() -> (Box<Rt>, u64) {
    let mem: &'static Mem = Box::leak(Box::new(Mem::new()));
    let rt = Box::new(Runtime::new(Loopback::new(mem), SingleThread));
    let k = rt.backend().register_kernel(seq).expect("kernel slot");
    (rt, k)
}

/// `seq(cell, n)`: stores `n` if the cell holds `n - 1`, else marks it broken.
fn seq(d: &Dispatch) -> Result<(), QueueFault> {
    // SAFETY: every launch passes (address of a live, aligned u32, n).
    let (addr, n): (u64, u64) = unsafe { d.args() };
    // SAFETY: as above.
    let c = unsafe { AtomicU32::from_ptr(addr as usize as *mut u32) };
    let v = c.load(Ordering::SeqCst);
    c.store(if u64::from(v) + 1 == n { n as u32 } else { 0x8000_0000 | n as u32 }, Ordering::SeqCst);
    Ok(())
}

fn launch(rt: &Rt, s: StreamHandle, k: u64, cell: &AtomicU32, n: u64) -> aqueduct::Result<()> {
    let mut args = [0u8; 16];
    args[..8].copy_from_slice(&(cell.as_ptr() as usize as u64).to_le_bytes());
    args[8..].copy_from_slice(&n.to_le_bytes());
    rt.launch_kernel(
        s,
        &KernelLaunch {
            kernel_object: k,
            grid: [1, 1, 1],
            workgroup: [1, 1, 1],
            group_segment_size: 0,
            private_segment_size: 0,
            kernarg: &args,
        },
    )
}

#[test]
fn sixty_three_streams_share_two_queues_in_order() {
    let (rt, k) = runtime();
    let cells: Vec<AtomicU32> = (0..63).map(|_| AtomicU32::new(0)).collect();
    let streams: Vec<StreamHandle> = (0..63).map(|_| rt.stream_create(1).unwrap()).collect();
    assert_eq!(rt.hw_queue_count(0), 2);
    for n in 1..=3 {
        for (s, c) in streams.iter().zip(&cells) {
            launch(&rt, *s, k, c, n).unwrap();
        }
    }
    rt.device_synchronize().unwrap();
    assert!(cells.iter().all(|c| c.load(Ordering::SeqCst) == 3));
    for s in streams {
        rt.stream_destroy(s).unwrap();
    }
}

#[test]
fn null_stream_and_events_order_work_across_streams() {
    let (rt, k) = runtime();
    let c = AtomicU32::new(0);
    let gate = AtomicU32::new(0);
    let a = rt.stream_create(0).unwrap();
    let b = rt.stream_create(1).unwrap();
    rt.wait_value32(a, gate.as_ptr() as usize as u64, 1, 1, u32::MAX).unwrap();
    launch(&rt, a, k, &c, 1).unwrap();
    // The null stream waits for the blocking stream a; b waits for the null stream's event.
    launch(&rt, StreamHandle::NULL, k, &c, 2).unwrap();
    let e = rt.event_create(0).unwrap();
    rt.event_record(e, StreamHandle::NULL, 0).unwrap();
    rt.stream_wait_event(b, e, 0).unwrap();
    launch(&rt, b, k, &c, 3).unwrap();
    assert_eq!(rt.event_query(e), Err(Error::NotReady));
    // A destroyed stream's pending work is still waited for.
    rt.stream_destroy(a).unwrap();
    assert_eq!(rt.stream_query(StreamHandle::NULL), Err(Error::NotReady));
    gate.store(1, Ordering::SeqCst);
    rt.stream_synchronize(b).unwrap();
    assert_eq!(c.load(Ordering::SeqCst), 3);
    rt.device_synchronize().unwrap();
    rt.event_destroy(e).unwrap();
}

/// The loopback's built-in kernels: copy, fill and write-value always; the graph scheduler only
/// with capture (without it no graph exists to dispatch it).
#[test]
fn builtin_kernels_follow_the_capture_feature() {
    use aqueduct::{Backend, BuiltinKernel};
    let (rt, _) = runtime();
    let lb = rt.backend();
    let copy = lb.builtin_kernel(0, BuiltinKernel::Copy).expect("copy");
    let fill = lb.builtin_kernel(0, BuiltinKernel::Fill).expect("fill");
    let write = lb.builtin_kernel(0, BuiltinKernel::WriteValue).expect("write value");
    assert!(copy != fill && fill != write && copy != write);
    let scheduler = lb.builtin_kernel(0, BuiltinKernel::GraphScheduler);
    if cfg!(feature = "capture") {
        let s = scheduler.expect("graph scheduler with capture");
        assert!(s != copy && s != fill && s != write);
    } else {
        assert_eq!(scheduler, Err(Error::NotSupported));
    }
    assert_eq!(lb.builtin_kernel(1, BuiltinKernel::Copy), Err(Error::InvalidDevice));
}

/// A trace of `LT` entries keeps the first `LT` and counts the rest as dropped; with `LT` 0
/// every entry is dropped.
fn trace_of<const LT: usize>() -> (usize, usize, Option<aqueduct::loopback::TraceEntry>) {
    type Sizes<const LT: usize> = Capacities<4, 4, 1, 4, 1, 4, 1, 4, 1, 1, 4, 8, 64, 16, 4096, 1, 4, LT>;
    let mem = LoopbackMemory::<Sizes<LT>>::new();
    let rt: Runtime<Loopback<'_, Sizes<LT>>, SingleThread, Sizes<LT>> = Runtime::new(Loopback::new(&mem), SingleThread);
    let s = rt.stream_create(0).unwrap();
    // Each marker is one doorbell and one retired packet: two entries.
    for _ in 0..3 {
        rt.marker(s).unwrap();
    }
    rt.stream_synchronize(s).unwrap();
    let lb = rt.backend();
    (lb.trace_len(), lb.trace_dropped(), lb.trace_entry(0))
}

#[test]
fn trace_capacity_comes_from_the_configuration() {
    use aqueduct::loopback::TraceEntry;
    let (len, dropped, first) = trace_of::<256>();
    assert_eq!((len, dropped), (6, 0));
    assert!(matches!(first, Some(TraceEntry::Doorbell { .. })));
    let (len, dropped, _) = trace_of::<4>();
    assert_eq!((len, dropped), (4, 2));
    let (len, dropped, first) = trace_of::<0>();
    assert_eq!((len, dropped, first), (0, 6, None));
}

/// What a runtime does from its first state: the kernel object a registration gets, the
/// hardware-queue budget, the queue pool, fills, ordered launches, events and the trace's
/// packet types.
fn first_steps(rt: &Rt) -> (u64, u32, usize, Vec<u32>, Vec<Option<aqueduct::aql::PacketType>>) {
    let k = rt.backend().register_kernel(seq).expect("kernel slot");
    let cells: Vec<AtomicU32> = (0..3).map(|_| AtomicU32::new(0)).collect();
    let streams: Vec<StreamHandle> = (0..3).map(|_| rt.stream_create(0).unwrap()).collect();
    let buf = rt.malloc(16).unwrap();
    rt.memset_async(streams[0], buf, 0x5a, 1, 16).unwrap();
    let ev = rt.event_create(0).unwrap();
    for n in 1..=2 {
        for (s, c) in streams.iter().zip(&cells) {
            launch(rt, *s, k, c, n).unwrap();
        }
    }
    rt.event_record(ev, streams[2], 0).unwrap();
    rt.stream_wait_event(streams[0], ev, 0).unwrap();
    rt.device_synchronize().unwrap();
    // SAFETY: loopback device memory is host memory and the fill has completed.
    let filled = unsafe { std::slice::from_raw_parts(buf as usize as *const u8, 16) }.iter().all(|&b| b == 0x5a);
    assert!(filled);
    let values = cells.iter().map(|c| c.load(Ordering::SeqCst)).collect();
    let lb = rt.backend();
    let kinds = (0..lb.trace_len()).map(|i| lb.trace_entry(i).and_then(|e| e.packet_type())).collect();
    (k, rt.max_hw_queues(0).unwrap(), rt.hw_queue_count(0), values, kinds)
}

/// `Runtime::init_with` and `Loopback::init` build in place, over memory full of garbage, the
/// runtime `Runtime::new(Loopback::new(..))` builds: it behaves the same from its first call
/// (docs/architecture.md, "Footprint"); so does `Runtime::init` with a backend moved in.
#[test]
fn runtime_built_in_place_behaves_as_a_new_one() {
    let mem: &'static Mem = Box::leak(Box::new(Mem::new()));
    let fresh = first_steps(&Box::new(Runtime::new(Loopback::new(mem), SingleThread)));
    assert_eq!(fresh.3, [2, 2, 2], "each stream's two launches ran in order");
    let mut place: Box<std::mem::MaybeUninit<Rt>> = Box::new_uninit();
    // Garbage where the runtime goes: a field the initialiser skipped would show.
    // SAFETY: `place` is `size_of::<Rt>()` writable bytes; a MaybeUninit holds any bytes.
    unsafe { std::ptr::write_bytes(place.as_mut_ptr().cast::<u8>(), 0xa5, std::mem::size_of::<Rt>()) };
    let mem: &'static Mem = Box::leak(Box::new(Mem::new()));
    let rt = Runtime::init_with(&mut place, SingleThread, |b| Loopback::init(b, mem)).expect("in place");
    assert_eq!(first_steps(rt), fresh);

    let mut place: Box<std::mem::MaybeUninit<Rt>> = Box::new_uninit();
    // SAFETY: as above.
    unsafe { std::ptr::write_bytes(place.as_mut_ptr().cast::<u8>(), 0x5a, std::mem::size_of::<Rt>()) };
    let mem: &'static Mem = Box::leak(Box::new(Mem::new()));
    let rt = Runtime::init(&mut place, Loopback::new(mem), SingleThread);
    assert_eq!(first_steps(rt), fresh);
}

/// `Runtime::init_with` refuses a backend initialiser that returns another slot than the one it
/// was given (the runtime's own would stay uninitialised).
#[test]
fn runtime_in_place_refuses_a_backend_built_elsewhere() {
    let mem: &'static Mem = Box::leak(Box::new(Mem::new()));
    let elsewhere: &'static mut Lb = Box::leak(Box::new(Loopback::new(mem)));
    let mut place: Box<std::mem::MaybeUninit<Rt>> = Box::new_uninit();
    let r = Runtime::init_with(&mut place, SingleThread, |_| elsewhere);
    assert!(matches!(r, Err(Error::InvalidValue)));
}
