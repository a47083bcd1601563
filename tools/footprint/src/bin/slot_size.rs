//! Measures the RAM of one stream slot: two runtimes that differ only in their stream capacity
//! (1 and 2 slots), whose sizes `scripts/footprint` reads from the symbol table.

#![no_std]
#![no_main]

#[path = "../rt.rs"]
mod rt;

use core::mem::MaybeUninit;
use core::ptr;

use aqueduct::loopback::Loopback;
use aqueduct::{Runtime, SingleThread};

/// The default tables with the footprint binary's loopback (34 queues of 8 packets, 64
/// kernel-argument bytes each, 80 signals, 4 KiB of heap).
type Device = aqueduct::Capacities<32, 64, 8, 64, 4, 32, 2, 40, 16, 8, 34, 8, 64, 80, 4096>;
type Backend = Loopback<'static, Device>;

#[no_mangle]
static mut RUNTIME_S1: MaybeUninit<Runtime<Backend, SingleThread, aqueduct::Capacities<1, 16, 2, 32, 1, 8, 1, 8, 4>>> =
    MaybeUninit::uninit();
#[no_mangle]
static mut RUNTIME_S2: MaybeUninit<Runtime<Backend, SingleThread, aqueduct::Capacities<2, 16, 2, 32, 1, 8, 1, 8, 4>>> =
    MaybeUninit::uninit();

fn run() -> ! {
    // Taking both addresses keeps both statics in the image.
    let a = ptr::addr_of!(RUNTIME_S1) as usize;
    let b = ptr::addr_of!(RUNTIME_S2) as usize;
    rt::report((a ^ b) as u32)
}
