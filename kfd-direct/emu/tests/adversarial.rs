//! Adversarial mode (docs/kfd-aql.md §9 "concurrency"): barrier-less dispatches overlap and
//! complete out of order, seeded and reproducible, so a missing barrier bit fails a test.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use aqueduct_kfd_emu::{EmuConfig, KernelCtx, Twin};
use common::*;

/// Runs "X := 1" then "Y := X" on one queue; returns Y. `barrier` sets the barrier bit on the
/// second packet (the dependency the stream needs).
fn producer_consumer(seed: u64, barrier: bool) -> u32 {
    let h = Harness::with(EmuConfig::default().adversarial(seed));
    let q = h.create_queue();
    let data = h.alloc(4096, GTT);
    let k = h.alloc(4096, GTT);
    // SAFETY: the kernarg page is CPU-mapped.
    unsafe { *k.ptr::<u64>() = data.va };
    let write =
        h.emu.register_kernel(Twin::new("write_x", 8, |ctx: &KernelCtx<'_>, _| ctx.mem.write_u32(ctx.arg_u64(0), 1)));
    let copy = h.emu.register_kernel(Twin::new("copy_x_to_y", 8, |ctx: &KernelCtx<'_>, _| {
        let x = ctx.mem.read_u32(ctx.arg_u64(0))?;
        ctx.mem.write_u32(ctx.arg_u64(0) + 4, x)
    }));
    let sigs = h.signals();
    signal(&sigs, 0).reset(2);
    let s = signal_handle(&sigs, 0);
    q.submit(&[dispatch(write, k.va, 1, 1, s, false), dispatch(copy, k.va, 1, 1, s, barrier)]);
    assert!(wait_signal(signal(&sigs, 0), 0));
    assert!(wait_until(Duration::from_secs(5), || q.read_index() == 2), "read index retires in order");
    // SAFETY: CPU-mapped data page; both packets completed.
    unsafe { *data.ptr::<u32>().add(1) }
}

#[test]
fn a_missing_barrier_bit_fails_under_adversarial_mode_and_passes_with_it() {
    let failing: Vec<u64> = (0..24).filter(|&seed| producer_consumer(seed, false) != 1).collect();
    assert!(!failing.is_empty(), "some seed must run the consumer before the producer");
    // Reproducible: the same seed fails the same way again.
    assert_ne!(producer_consumer(failing[0], false), 1);
    for seed in 0..24 {
        assert_eq!(producer_consumer(seed, true), 1, "seed {seed}: the barrier bit orders the pair");
    }
}

#[test]
fn barrier_less_packets_complete_out_of_order_but_retire_in_order() {
    let mut saw_reorder = false;
    for seed in 0..8 {
        let h = Harness::with(EmuConfig::default().adversarial(seed));
        let q = h.create_queue();
        let log = Arc::new(Mutex::new(Vec::new()));
        let l = Arc::clone(&log);
        let obj = h.emu.register_kernel(Twin::new("log", 4, move |ctx: &KernelCtx<'_>, _| {
            l.lock().unwrap().push(ctx.arg_u32(0));
            Ok(())
        }));
        let k = h.alloc(4096, GTT);
        let sigs = h.signals();
        let packets: Vec<_> = (0..8u32)
            .map(|i| {
                // SAFETY: CPU-mapped kernarg page, 64 bytes per packet.
                unsafe { *k.ptr::<u32>().add(16 * i as usize) = i };
                signal(&sigs, i as usize).reset(1);
                dispatch(obj, k.va + 64 * u64::from(i), 1, 1, signal_handle(&sigs, i as usize), false)
            })
            .collect();
        q.submit(&packets);
        assert!(wait_until(Duration::from_secs(5), || q.read_index() == 8));
        for i in 0..8 {
            assert_eq!(signal(&sigs, i).load(), 0);
        }
        let log = log.lock().unwrap();
        assert_eq!(log.len(), 8);
        saw_reorder |= log.windows(2).any(|w| w[0] > w[1]);
    }
    assert!(saw_reorder, "adversarial mode reorders barrier-less completions");
}
