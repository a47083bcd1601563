//! Footprint probe: aqueduct's runtime over the loopback backend with 32 streams on
//! `thumbv7em-none-eabihf`, doing real work so the linker keeps the code. `scripts/footprint`
//! builds it (and `baseline`) and prints the section sizes.

#![no_std]
#![no_main]

mod mem;
mod rt;

use core::mem::MaybeUninit;
use core::ptr;

use aqueduct::aql::QueueFault;
use aqueduct::loopback::{Dispatch, Loopback, LoopbackMemory};
use aqueduct::{Error, KernelLaunch, Runtime, SingleThread, StreamHandle};

/// 34 stream slots, 16 events, 2 threads, 32 host-function signal pairs, 1 graph of 8 nodes,
/// 1 executable, 8 queue slots, 4 hardware queues (the 32 streams share them), 8 code objects;
/// a loopback of 34 queues (32 streams, the null stream, one spare) of 8 packets with 64
/// kernel-argument bytes each, 80 signals, 4 KiB of heap and no packet trace (firmware reads
/// none); the memory pools' default sizes (the probe makes no pool).
type Sizes = aqueduct::Capacities<34, 16, 2, 32, 1, 8, 1, 8, 4, 8, 34, 8, 64, 80, 4096, 16, 256, 0>;
type Mem = LoopbackMemory<Sizes>;
type Backend = Loopback<'static, Sizes>;
type Rt = Runtime<Backend, SingleThread, Sizes>;

const STREAMS: usize = 32;

static MEM: Mem = LoopbackMemory::new();
/// `Loopback::new` is not `const`, so the runtime cannot be a plain `static`: it is written once
/// at start-up into this one, in place (`Runtime::init_with`, `Loopback::init`).
static mut RT: MaybeUninit<Rt> = MaybeUninit::uninit();

#[cfg(feature = "defmt")]
mod logger {
    //! A global logger that drops everything: enough for defmt to link.

    #[defmt::global_logger]
    struct Discard;

    // SAFETY: the logger keeps no state, so any acquire/release pattern is fine.
    unsafe impl defmt::Logger for Discard {
        fn acquire() {}
        unsafe fn flush() {}
        unsafe fn release() {}
        unsafe fn write(_bytes: &[u8]) {}
    }

    defmt::timestamp!("{=u32}", 0);
}

fn add_one(d: &Dispatch) -> Result<(), QueueFault> {
    // SAFETY: `exercise` passes one u64 address of a live u32 as the kernel argument.
    let addr: u64 = unsafe { d.args() };
    let p = addr as usize as *mut u32;
    // SAFETY: as above; the loopback runs kernels on the calling thread.
    unsafe { ptr::write_volatile(p, ptr::read_volatile(p).wrapping_add(1)) };
    Ok(())
}

fn exercise(rt: &Rt) -> Result<u32, Error> {
    let kernel = rt.backend().register_kernel(add_one)?;
    let buf = rt.malloc(STREAMS * 64)?;
    let counter = rt.malloc(4)?;
    let ev = rt.event_create(0)?;
    let mut streams = [StreamHandle::NULL; STREAMS];
    for s in streams.iter_mut() {
        *s = rt.stream_create(0)?;
    }
    let args = counter.to_le_bytes();
    for (k, &s) in streams.iter().enumerate() {
        rt.marker(s)?;
        rt.memset_async(s, buf + (k * 64) as u64, k as u32, 1, 64)?;
        let launch = KernelLaunch {
            kernel_object: kernel,
            grid: [64, 1, 1],
            workgroup: [64, 1, 1],
            group_segment_size: 0,
            private_segment_size: 0,
            kernarg: &args,
        };
        rt.launch_kernel(s, &launch)?;
        rt.event_record(ev, s, 0)?;
        if let Some(&next) = streams.get(k + 1) {
            rt.stream_wait_event(next, ev, 0)?;
        }
    }
    for &s in &streams {
        rt.stream_synchronize(s)?;
    }
    rt.event_synchronize(ev)?;
    rt.device_synchronize()?;
    for &s in &streams {
        rt.stream_destroy(s)?;
    }
    rt.event_destroy(ev)?;
    // SAFETY: loopback device memory is host memory and every stream has completed.
    let result = unsafe { ptr::read_volatile(counter as usize as *const u32) };
    rt.free(counter)?;
    rt.free(buf)?;
    Ok(result)
}

fn run() -> ! {
    // SAFETY: `run` is called once from `Reset`, before anything else touches `RT`.
    let place = unsafe { &mut *ptr::addr_of_mut!(RT) };
    let result = Runtime::init_with(place, SingleThread, |b| Loopback::init(b, &MEM)).and_then(|rt| exercise(rt));
    match result {
        Ok(n) => rt::report(n),
        Err(e) => rt::report(0x8000_0000 | e as u32),
    }
}
