//! The gfx90a executor on arbitrary kernels: a kernel descriptor, a dispatch packet's fields,
//! the queue's scratch setup and the code all come from the input, and one work-group runs on a
//! small memory as the emulator runs it. Every outcome is a value (the work-group ends or an
//! error), never a panic; the watchdog bounds each wave, so never a hang.
#![no_main]

use aqueduct_isa::exec::{run_work_group, Code, Dispatch, Kernel, Limits, Scratch, VecMemory};
use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;

const BASE: u64 = 0x1_0000_0000;
const MEMORY: usize = 1 << 14;

#[derive(Arbitrary, Debug)]
struct Input {
    descriptor: [u8; 64],
    /// Offsets into the memory (kept inside it with a modulus) or, when the top bit is set,
    /// any address.
    packet: u32,
    queue: u32,
    kernarg: u32,
    scratch_base: u32,
    scratch_bytes: u16,
    tmpring: u32,
    resource: [u32; 4],
    dispatch_id: u64,
    grid: [u16; 3],
    workgroup_size: [u16; 3],
    group_segment_size: u32,
    private_segment_size: u32,
    wg: [u16; 3],
    slot_base: u8,
    entry: u8,
    fill: u8,
    code: Vec<u32>,
}

fn address(v: u32) -> u64 {
    if v & 0x8000_0000 != 0 {
        u64::from(v) << (v & 31)
    } else {
        BASE + u64::from(v) % MEMORY as u64
    }
}

fuzz_target!(|input: Input| {
    let mut raw = input.descriptor;
    // Reserved bytes must be zero for bytes to be read as a descriptor at all.
    for r in [12..16, 24..44, 60..64] {
        raw[r].fill(0);
    }
    let Ok(descriptor) = amdhsa::KernelDescriptor::from_bytes(&raw) else { return };
    if input.code.is_empty() {
        return;
    }
    let mem = VecMemory::new(BASE, MEMORY);
    mem.bytes.borrow_mut().iter_mut().enumerate().for_each(|(i, b)| *b = input.fill.wrapping_mul(i as u8));
    let entry = BASE + 4 * u64::from(input.entry) % (4 * input.code.len() as u64);
    let kernel = Kernel { code: Code::decode(BASE, &input.code), descriptor, entry };
    let dispatch = Dispatch {
        packet_address: address(input.packet),
        queue_address: address(input.queue),
        kernarg_address: address(input.kernarg),
        dispatch_id: input.dispatch_id,
        grid: input.grid.map(u32::from),
        workgroup_size: input.workgroup_size.map(|w| u32::from(w % 1025)),
        group_segment_size: input.group_segment_size,
        private_segment_size: input.private_segment_size,
        scratch: Scratch {
            resource: input.resource,
            base: address(input.scratch_base),
            bytes: u64::from(input.scratch_bytes),
            tmpring: input.tmpring,
        },
    };
    let limits = Limits { wave_instructions: 2_000 };
    let wg = input.wg.map(u32::from);
    if let Err(e) = run_work_group(&kernel, &dispatch, wg, u32::from(input.slot_base), &mem, &limits) {
        let _ = e.to_string();
    }
});
