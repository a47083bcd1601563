//! Quick start: several streams on the loopback device.
//!
//! A producer stream fills a buffer, a consumer stream waits for it through an event and runs a
//! kernel that sums it, a non-blocking stream works on its own, a host function reports when the
//! consumer is done, and work on the null stream waits (implicitly) for the blocking streams. The
//! example prints every packet the device processed.

use core::ffi::c_void;
use std::sync::atomic::{AtomicU32, Ordering};

use aqueduct::aql::{PacketType, QueueFault};
use aqueduct::loopback::{Dispatch, Loopback, LoopbackMemory, TraceEntry, TRACE_CAPACITY};
use aqueduct::{HostFn, KernelLaunch, Runtime, SingleThread, StreamHandle};

/// Kernel arguments of `sum_u32`.
#[repr(C)]
#[derive(Clone, Copy)]
struct SumArgs {
    input: u64,
    count: u64,
    output: u64,
}

/// Host twin of a kernel that sums `count` u32 values into `*output`.
fn sum_u32(d: &Dispatch) -> Result<(), QueueFault> {
    // SAFETY: the launch below passes SumArgs.
    let a: SumArgs = unsafe { d.args() };
    let mut total = 0u32;
    for i in 0..a.count as usize {
        // SAFETY: the launch passes a live buffer of `count` u32s (loopback memory is host memory).
        total = total.wrapping_add(unsafe { *(a.input as usize as *const u32).add(i) });
    }
    // SAFETY: as above, `output` is a live u32.
    unsafe { *(a.output as usize as *mut u32) = total };
    Ok(())
}

static CALLBACKS: AtomicU32 = AtomicU32::new(0);

unsafe extern "C" fn report(data: *mut c_void) {
    // SAFETY: `data` is the address of the result u32, written by the kernel before this runs.
    let sum = unsafe { *(data as *const u32) };
    CALLBACKS.fetch_add(1, Ordering::SeqCst);
    println!("  host function: consumer finished, sum = {sum}");
}

fn main() -> Result<(), aqueduct::Error> {
    let mem: Box<LoopbackMemory<aqueduct::config::Default>> = Box::new(LoopbackMemory::new());
    let rt: Runtime<_, _> = Runtime::new(Loopback::new(&mem), SingleThread);
    let sum_kernel = rt.backend().register_kernel(sum_u32)?;

    let producer = rt.stream_create(0)?;
    let consumer = rt.stream_create_with_priority(0, -1)?;
    let side = rt.stream_create(1)?; // hipStreamNonBlocking
    let ready = rt.event_create(0)?;
    let n = 256u64;
    let input = rt.malloc((n * 4) as usize)?;
    let output = rt.malloc(4)?;
    let scratch = rt.malloc(64)?;
    let gate = rt.host_malloc(4)?;

    println!("aqueduct quickstart on the loopback device ({} device(s))", rt.device_count()?);
    // Producer: wait until the host opens the gate, fill the input with 3s, record an event.
    rt.wait_value32(producer, gate, 1, aqueduct::WaitValueOp::Eq as u32, u32::MAX)?;
    rt.memset_async(producer, input, 3, 4, n)?;
    rt.event_record(ready, producer, 0)?;
    // Consumer: wait for the event, sum, then report on the host.
    rt.stream_wait_event(consumer, ready, 0)?;
    let args = SumArgs { input, count: n, output };
    // SAFETY: SumArgs is repr(C) plain data.
    let bytes = unsafe { std::slice::from_raw_parts(&args as *const SumArgs as *const u8, size_of::<SumArgs>()) };
    rt.launch_kernel(
        consumer,
        &KernelLaunch {
            kernel_object: sum_kernel,
            grid: [1, 1, 1],
            workgroup: [1, 1, 1],
            group_segment_size: 0,
            private_segment_size: 0,
            kernarg: bytes,
        },
    )?;
    rt.launch_host_func(consumer, HostFn::Plain { func: report, data: output as usize as *mut c_void })?;
    // A non-blocking stream, independent of everything else.
    rt.memset_async(side, scratch, 0x5a, 1, 64)?;
    // The null stream implicitly waits for the blocking streams' pending work.
    rt.write_value32(StreamHandle::NULL, scratch, 0xc0ffee, 0)?;
    println!("  before the gate opens: null stream query = {:?}", rt.stream_query(StreamHandle::NULL));
    // SAFETY: loopback memory is host memory; the device only reads the gate.
    unsafe { std::ptr::write_volatile(gate as usize as *mut u32, 1) };
    rt.stream_synchronize(StreamHandle::NULL)?;
    rt.device_synchronize()?;

    // SAFETY: every stream is synchronised; loopback memory is host memory.
    let (sum, first) = unsafe { (*(output as usize as *const u32), *(scratch as usize as *const u32)) };
    println!(
        "  sum of {n} threes = {sum}; scratch word 0 = {first:#x}; host functions run: {}",
        CALLBACKS.load(Ordering::SeqCst)
    );
    let start = rt.event_create(0)?;
    let stop = rt.event_create(0)?;
    rt.event_record(start, consumer, 0)?;
    rt.memcpy_async(consumer, scratch, input, 64)?;
    rt.event_record(stop, consumer, 0)?;
    rt.event_synchronize(stop)?;
    println!("  copy on the consumer stream took {:.3} ms of device time", rt.event_elapsed_time(start, stop)?);

    println!("packets the device processed:");
    let lb = rt.backend();
    let mut trace = [TraceEntry::HostCall; TRACE_CAPACITY];
    let len = lb.trace(&mut trace);
    for e in trace.iter().take(len) {
        match e {
            TraceEntry::Doorbell { queue, value } => println!("  queue {queue}: doorbell {value}"),
            TraceEntry::Packet { queue, index, words } => {
                let kind = match e.packet_type() {
                    Some(PacketType::KernelDispatch) => "kernel dispatch",
                    Some(PacketType::BarrierAnd) if words[2..12].iter().any(|w| *w != 0) => {
                        "barrier-AND (with dependencies)"
                    }
                    Some(PacketType::BarrierAnd) => "barrier-AND",
                    Some(PacketType::VendorSpecific) => "barrier-value",
                    _ => "other",
                };
                println!("  queue {queue}: packet {index}: {kind}");
            }
            TraceEntry::HostCall => println!("  host call"),
            TraceEntry::Fault { queue, fault } => println!("  queue {queue}: fault {fault:?}"),
        }
    }
    for s in [producer, consumer, side] {
        rt.stream_destroy(s)?;
    }
    for e in [ready, start, stop] {
        rt.event_destroy(e)?;
    }
    assert_eq!(sum, 3 * n as u32, "the consumer summed the producer's data");
    assert_eq!(CALLBACKS.load(Ordering::SeqCst), 1);
    println!("done");
    Ok(())
}
