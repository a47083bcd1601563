//! Baseline of the footprint probe: the same start-up code, panic handler and linker script
//! as `footprint`, without aqueduct. `scripts/footprint` subtracts its sizes.

#![no_std]
#![no_main]

#[path = "../rt.rs"]
mod rt;

fn run() -> ! {
    rt::report(0)
}
