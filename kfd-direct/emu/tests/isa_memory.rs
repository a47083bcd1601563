//! Scratch, device calls, traps and clocks of machine-code kernels on the emulated GPU
//! (docs/executor.md §5): the hipcc -O3 kernels of `fixtures/isa/memory.hip` — a recursive
//! `__noinline__` device function (calls outside the kernel's symbol, a stack in scratch), a
//! private array indexed dynamically (MUBUF through the swizzled private segment buffer),
//! `__builtin_trap()` and `assert`, `clock64()`/`wall_clock64()` — each checked against the
//! host.

#![allow(clippy::needless_range_loop)]

mod common;

use std::sync::atomic::Ordering;

use aqueduct_kfd_abi::{event_type, wait_result, AmdQueue};
use aqueduct_kfd_emu::{EmuConfig, KernelMode, QueueState};
use common::*;

/// Two compute-unit workers: work-groups use scratch slots 0..32.
fn harness(gpu: Gpu) -> Harness {
    Harness::with(gpu.config(EmuConfig { kernels: KernelMode::Isa, cus: 2, ..EmuConfig::default() }))
}

/// Bytes of scratch per work-item the test queues get.
const LANE_BYTES: u32 = 1024;
/// Scratch slots (waves) of a queue: 2 workers × 16 waves.
const SLOTS: u32 = 32;

/// A queue whose `amd_queue_t` describes a scratch buffer the way ROCr's `InitScratchSRD`
/// does (docs/code-objects.md §9): the swizzled V#, base, size, per-lane size and
/// COMPUTE_TMPRING_SIZE.
fn queue_with_scratch(h: &Harness) -> (Queue, Buffer) {
    let q = h.create_queue();
    let scratch = give_scratch(h, &q);
    (q, scratch)
}

/// Sets a scratch buffer up in `q`'s `amd_queue_t`, as ROCr's `InitScratchSRD` does.
fn give_scratch(h: &Harness, q: &Queue) -> Buffer {
    let wave_bytes = u64::from(LANE_BYTES) * 64;
    let bytes = wave_bytes * u64::from(SLOTS);
    let scratch = h.alloc(bytes, VRAM);
    // SAFETY: the amd_queue_t page is CPU-mapped; nothing runs on the queue yet.
    let a = unsafe { &mut *q.amd_queue.ptr::<AmdQueue>() };
    a.scratch_resource_descriptor =
        [scratch.va as u32, ((scratch.va >> 32) as u32 & 0xFFFF) | 1 << 31, bytes as u32, 0x00EA_4FAC];
    a.scratch_backing_memory_location = scratch.va;
    a.scratch_backing_memory_byte_size = bytes;
    a.scratch_wave64_lane_byte_size = LANE_BYTES;
    a.compute_tmpring_size = SLOTS | ((wave_bytes / 1024) as u32) << 12;
    scratch
}

/// Runs `packets` on `q`; `Ok` when the signal reached 0, else the queue's state.
fn run_on(
    h: &Harness,
    q: &Queue,
    packets: &mut [aqueduct::aql::KernelDispatchPacket],
) -> Result<(), Option<QueueState>> {
    let sigs = h.signals();
    signal(&sigs, 0).reset(packets.len() as i64);
    for p in packets.iter_mut() {
        p.completion_signal = signal_handle(&sigs, 0);
    }
    q.submit(packets);
    if wait_signal(signal(&sigs, 0), 0) {
        Ok(())
    } else {
        Err(h.emu.queue_state(q.id))
    }
}

/// A dispatch of `object` asking for `private` bytes of scratch per work-item.
fn packet(object: u64, kernarg: u64, grid: u32, wg: u16, private: u32) -> aqueduct::aql::KernelDispatchPacket {
    let mut p = dispatch(object, kernarg, grid, wg, 0, true);
    p.private_segment_size = private;
    p
}

fn recursive_device_function_calls_use_the_scratch_stack(gpu: Gpu) {
    let h = harness(gpu);
    let objects = place_code_object(&h, &hipcc_fixture_for("memory", gpu), &["fib_kernel"]);
    let (q, _scratch) = queue_with_scratch(&h);
    let n = 200usize;
    let out = h.alloc(4 * n as u64, GTT);
    let k = h.alloc(4096, GTT);
    write(&k, 0, out.va);
    write(&k, 8, n as u32);
    // 4 work-groups of 64, the last partial.
    run_on(&h, &q, &mut [packet(objects[0], k.va, 256, 64, LANE_BYTES)]).expect("fib_kernel completes");
    let fib = |m: usize| {
        let (mut a, mut b) = (0u32, 1u32);
        for _ in 0..m {
            (a, b) = (b, a + b);
        }
        a
    };
    let got: Vec<u32> = read_slice(&out, n);
    for i in 0..n {
        assert_eq!(got[i], fib(i % 16), "out[{i}]");
    }
}

fn a_private_array_indexed_dynamically_lives_in_scratch(gpu: Gpu) {
    let h = harness(gpu);
    let objects = place_code_object(&h, &hipcc_fixture_for("memory", gpu), &["private_array"]);
    let (q, _scratch) = queue_with_scratch(&h);
    let (k, check) = private_array_args(&h);
    // Work-groups of 256: 4 waves each, every wave in its own scratch slot.
    run_on(&h, &q, &mut [packet(objects[0], k, 1024, 256, 400)]).expect("private_array completes");
    check();
}

/// The arguments of `private_array` over 1000 pseudo-random indices (the kernarg address), and
/// the check of its output against the host.
fn private_array_args(h: &Harness) -> (u64, impl Fn()) {
    let n = 1000usize;
    let (idx, out) = (h.alloc(4 * n as u64, GTT), h.alloc(4 * n as u64, GTT));
    let idxs: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(2_654_435_761) >> 7).collect();
    for i in 0..n {
        write(&idx, 4 * i, idxs[i]);
    }
    let k = h.alloc(4096, GTT);
    write(&k, 0, idx.va);
    write(&k, 8, out.va);
    write(&k, 16, n as u32);
    let check = move || {
        let got: Vec<u32> = read_slice(&out, n);
        for i in 0..n {
            let a = |k: u32| (i as u32).wrapping_mul(1000).wrapping_add(k * k);
            let want = (0..8u32).fold(0u32, |s, k| s.wrapping_add(a(idxs[i].wrapping_add(7 * k) % 96)));
            assert_eq!(got[i], want, "out[{i}] (idx {})", idxs[i]);
        }
    };
    (k.va, check)
}

/// A queue without scratch whose `amd_queue_t` names a `queue_inactive_signal` (as ROCr's do):
/// the processor stops at a dispatch that needs private memory, after the packets before it
/// retired, and asks for scratch with the code 1 and the signal's event; the test then does
/// what ROCr's handler does (scratch fields written, 0 stored) and the dispatch runs on it. A
/// later dispatch that fits asks nothing; one that needs more per wave asks again.
fn scratch_is_asked_of_the_runtime(gpu: Gpu) {
    let h = harness(gpu);
    let objects = place_code_object(&h, &hipcc_fixture_for("memory", gpu), &["private_array", "clocks"]);
    let q = h.create_queue();
    let page = h.event_page();
    let e = h.create_event(event_type::SIGNAL, true, Some(&page)).unwrap();
    let sigs = h.signals();
    let inactive = signal(&sigs, 1);
    inactive.reset(0);
    inactive.event_mailbox_ptr.store(page.va + 8 * u64::from(e.event_slot_index), Ordering::Relaxed);
    inactive.event_id.store(e.event_id, Ordering::Relaxed);
    // SAFETY: the amd_queue_t page is CPU-mapped; nothing runs on the queue yet.
    unsafe { &mut *q.amd_queue.ptr::<AmdQueue>() }.queue_inactive_signal = signal_handle(&sigs, 1);
    let (k, check) = private_array_args(&h);
    let done = signal(&sigs, 0);
    done.reset(2);
    // A dispatch without private memory first: it runs.
    let (clocks, k0) = (h.alloc(4096, GTT), h.alloc(4096, GTT));
    write(&k0, 0, clocks.va);
    let mut first = packet(objects[1], k0.va, 64, 64, 0);
    first.completion_signal = signal_handle(&sigs, 0);
    let mut p = packet(objects[0], k, 1024, 256, 400);
    p.completion_signal = signal_handle(&sigs, 0);
    q.submit(&[first, p]);
    let (result, _) = h.wait_events(&[e.event_id], false, 10_000).unwrap();
    assert_eq!(result, wait_result::COMPLETE, "the scratch request's event");
    assert_eq!(inactive.load(), 1, "insufficient scratch");
    assert_eq!(q.read_index(), 1, "read_dispatch_id names the dispatch that asks");
    assert_eq!(done.load(), 1, "the first dispatch completed, the second waits");
    // ROCr's part: scratch for the request, then 0 to resume the queue.
    let _scratch = give_scratch(&h, &q);
    inactive.value.store(0, Ordering::Release);
    assert!(wait_signal(done, 0), "the dispatch runs once scratch is given: {:?}", h.emu.queue_state(q.id));
    check();
    // A dispatch that fits the scratch given asks nothing.
    run_on(&h, &q, &mut [packet(objects[0], k, 1024, 256, LANE_BYTES)]).expect("fits");
    assert_eq!(inactive.load(), 0);
    assert_eq!(h.wait_events(&[e.event_id], false, 0).unwrap().0, wait_result::TIMEOUT);
    // One that needs more per wave than the queue has asks again, and fails when the answer
    // does not come: the queue stays at it.
    done.reset(1);
    let mut big = packet(objects[0], k, 64, 64, LANE_BYTES + 16);
    big.completion_signal = signal_handle(&sigs, 0);
    q.submit(&[big]);
    let (result, _) = h.wait_events(&[e.event_id], false, 10_000).unwrap();
    assert_eq!(result, wait_result::COMPLETE, "the second request's event");
    assert_eq!(inactive.load(), 1);
    assert_eq!(done.load(), 1, "waits for the runtime");
}

fn builtin_trap_fails_the_dispatch_with_the_trap_error(gpu: Gpu) {
    let h = harness(gpu);
    let objects = place_code_object(&h, &hipcc_fixture_for("memory", gpu), &["trap_kernel"]);
    let q = h.create_queue();
    let out = h.alloc(4096, GTT);
    let k = h.alloc(4096, GTT);
    write(&k, 0, out.va);
    let e = run_on(&h, &q, &mut [packet(objects[0], k.va, 64, 64, 0)]).expect_err("s_trap 2 stops the queue");
    // EC_QUEUE_WAVE_TRAP.
    assert!(matches!(e, Some(QueueState::Error(2))), "{e:?}");
    // The store before the trap happened in every lane.
    assert_eq!(read_slice::<u32>(&out, 64), vec![1u32; 64]);
}

fn assert_that_holds_completes_and_one_that_fails_stops_the_queue(gpu: Gpu) {
    let h = harness(gpu);
    let objects = place_code_object(&h, &hipcc_fixture_for("memory", gpu), &["assert_kernel"]);
    let (q, _scratch) = queue_with_scratch(&h);
    let out = h.alloc(4096, GTT);
    // kernarg: out, v, then the hidden arguments (the hostcall buffer among them, 0 here).
    let k = h.alloc(4096, GTT);
    write(&k, 0, out.va);
    write(&k, 8, 0u32);
    run_on(&h, &q, &mut [packet(objects[0], k.va, 64, 64, LANE_BYTES)]).expect("assert(v == 0) with v = 0 holds");
    assert_eq!(read_slice::<u32>(&out, 64), vec![2u32; 64]);
    // v = 1: __assert_fail runs (device calls, printf through hostcall, then s_trap): without
    // a hostcall buffer the dispatch fails before the trap, but it never completes.
    let (q2, _scratch2) = queue_with_scratch(&h);
    write(&k, 8, 1u32);
    let e = run_on(&h, &q2, &mut [packet(objects[0], k.va, 64, 64, LANE_BYTES)]).expect_err("assert fails");
    assert!(matches!(e, Some(QueueState::Error(_) | QueueState::Evicted(_))), "{e:?}");
}

fn clock64_and_wall_clock64_read_the_device_clocks(gpu: Gpu) {
    let h = harness(gpu);
    let objects = place_code_object(&h, &hipcc_fixture_for("memory", gpu), &["clocks"]);
    let q = h.create_queue();
    let out = h.alloc(4096, GTT);
    let k = h.alloc(4096, GTT);
    write(&k, 0, out.va);
    run_on(&h, &q, &mut [packet(objects[0], k.va, 64, 64, 0)]).expect("clocks completes");
    let first: Vec<u64> = read_slice(&out, 4);
    run_on(&h, &q, &mut [packet(objects[0], k.va, 64, 64, 0)]).expect("clocks completes");
    let second: Vec<u64> = read_slice(&out, 4);
    // In program order: clock64 a, wall_clock64 w, clock64 b, wall_clock64 w2; the shader
    // clock counts SHADER_CLOCKS_PER_TICK per tick of the 100 MHz constant clock.
    let r = aqueduct_isa::exec::SHADER_CLOCKS_PER_TICK;
    for s in [&first, &second] {
        let (a, b, w, w2) = (s[0], s[1], s[2], s[3]);
        assert!(a <= w * r && w * r <= b && b <= w2 * r, "{s:?}");
    }
    // The clocks never go back between dispatches.
    assert!(second[0] >= first[1] && second[2] >= first[3], "{first:?} then {second:?}");
}

on_both_gpus!(
    recursive_device_function_calls_use_the_scratch_stack,
    a_private_array_indexed_dynamically_lives_in_scratch,
    scratch_is_asked_of_the_runtime,
    builtin_trap_fails_the_dispatch_with_the_trap_error,
    assert_that_holds_completes_and_one_that_fails_stops_the_queue,
    clock64_and_wall_clock64_read_the_device_clocks
);
