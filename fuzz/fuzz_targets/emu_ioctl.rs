//! The emulator's amdkfd ioctl handlers on arbitrary argument bytes: each input is a sequence of
//! (ioctl, argument bytes) on one `/dev/kfd` fd. Every call must return a result or an errno,
//! never panic or touch memory it should not. Pointer fields inside argument structs are the
//! caller's promise (`Emu::ioctl`'s contract, as with a real kernel), so the harness points them
//! at a scratch buffer and keeps their element counts inside it; every other byte is fuzzed.
#![no_main]

use std::mem::size_of;
use std::sync::OnceLock;

use aqueduct_kfd_emu::abi::{
    self, nr, EventData, GetProcessAperturesNewArgs, MapMemoryArgs, ProcessDeviceApertures, SetCuMaskArgs,
    WaitEventsArgs,
};
use aqueduct_kfd_emu::{Emu, EmuConfig};
use libfuzzer_sys::fuzz_target;

const NRS: [u32; 17] = [
    nr::GET_VERSION,
    nr::CREATE_QUEUE,
    nr::DESTROY_QUEUE,
    nr::GET_CLOCK_COUNTERS,
    nr::UPDATE_QUEUE,
    nr::CREATE_EVENT,
    nr::DESTROY_EVENT,
    nr::SET_EVENT,
    nr::RESET_EVENT,
    nr::WAIT_EVENTS,
    nr::GET_PROCESS_APERTURES_NEW,
    nr::ACQUIRE_VM,
    nr::ALLOC_MEMORY_OF_GPU,
    nr::FREE_MEMORY_OF_GPU,
    nr::MAP_MEMORY_TO_GPU,
    nr::UNMAP_MEMORY_FROM_GPU,
    nr::SET_CU_MASK,
];

/// Scratch memory the pointer fields point into.
const SCRATCH: usize = 1 << 16;

fn emu() -> &'static Emu {
    static EMU: OnceLock<Emu> = OnceLock::new();
    EMU.get_or_init(|| Emu::new(EmuConfig { pool_bytes: 1 << 30, ..EmuConfig::default() }).expect("emulator"))
}

fn put_u64(buf: &mut [u8], at: usize, v: u64) {
    if let Some(b) = buf.get_mut(at..at + 8) {
        b.copy_from_slice(&v.to_ne_bytes());
    }
}

fn clamp_u32(buf: &mut [u8], at: usize, max: u32) {
    if let Some(b) = buf.get_mut(at..at + 4) {
        let v = u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) % (max + 1);
        b.copy_from_slice(&v.to_ne_bytes());
    }
}

fuzz_target!(|data: &[u8]| {
    let emu = emu();
    let Ok(fd) = emu.open("/dev/kfd", 0) else { return };
    let mut scratch = vec![0u64; SCRATCH / 8];
    let scratch_addr = scratch.as_mut_ptr() as usize as u64;
    let mut rest = data;
    let mut calls = 0;
    while let [sel, tail @ ..] = rest {
        if calls == 16 {
            break;
        }
        calls += 1;
        let n = NRS[usize::from(*sel) % NRS.len()];
        let Some(request) = abi::kernel_request(n) else { break };
        let size = ((request >> 16) & 0x3fff) as usize;
        let take = size.min(tail.len());
        let mut arg = vec![0u64; size.div_ceil(8).max(1)];
        // SAFETY: `arg` holds at least `size` bytes.
        let bytes = unsafe { std::slice::from_raw_parts_mut(arg.as_mut_ptr().cast::<u8>(), size) };
        bytes[..take].copy_from_slice(&tail[..take]);
        rest = &tail[take..];
        match n {
            nr::SET_CU_MASK => {
                put_u64(bytes, std::mem::offset_of!(SetCuMaskArgs, cu_mask_ptr), scratch_addr);
                clamp_u32(bytes, std::mem::offset_of!(SetCuMaskArgs, num_cu_mask), (SCRATCH * 8) as u32);
            }
            nr::GET_PROCESS_APERTURES_NEW => {
                put_u64(bytes, std::mem::offset_of!(GetProcessAperturesNewArgs, kfd_process_device_apertures_ptr), scratch_addr);
                clamp_u32(bytes, std::mem::offset_of!(GetProcessAperturesNewArgs, num_of_nodes), (SCRATCH / size_of::<ProcessDeviceApertures>()) as u32);
            }
            nr::MAP_MEMORY_TO_GPU | nr::UNMAP_MEMORY_FROM_GPU => {
                put_u64(bytes, std::mem::offset_of!(MapMemoryArgs, device_ids_array_ptr), scratch_addr);
                clamp_u32(bytes, std::mem::offset_of!(MapMemoryArgs, n_devices), (SCRATCH / 4) as u32);
            }
            nr::WAIT_EVENTS => {
                put_u64(bytes, std::mem::offset_of!(WaitEventsArgs, events_ptr), scratch_addr);
                clamp_u32(bytes, std::mem::offset_of!(WaitEventsArgs, num_events), (SCRATCH / size_of::<EventData>()) as u32);
                // Waits poll: a fuzzed timeout must not stall the run.
                clamp_u32(bytes, std::mem::offset_of!(WaitEventsArgs, timeout), 0);
            }
            _ => {}
        }
        // SAFETY: `arg` is live and `size` bytes long; its pointer fields point into `scratch`
        // with counts that fit (above); other addresses are device addresses the emulator
        // validates itself.
        let _ = unsafe { emu.ioctl(fd, request, arg.as_mut_ptr().cast()) };
    }
    let _ = emu.close(fd);
});
