//! `AQUEDUCT_EMU_KERNELS=check` (docs/executor.md §4): a kernel with a twin runs both ways on
//! each work-group and any difference — in memory or in how the work-group ended — fails the
//! dispatch; agreeing runs leave the machine code's results.

mod common;

use aqueduct_kfd_emu::{EmuConfig, KernelCtx, KernelError, KernelMode, QueueState, Twin};
use common::*;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures");

/// `fill_u32(dst, value, count)` as a twin that stores `value + skew` (0: the right twin).
fn fill_twin(skew: u32) -> Twin {
    Twin::new("fill_u32", 16, move |ctx: &KernelCtx<'_>, wg| {
        for i in ctx.items_x(wg).filter(|&i| i < ctx.arg_u32(12)) {
            ctx.mem.write_u32(ctx.arg_u64(0) + 4 * u64::from(i), ctx.arg_u32(8).wrapping_add(skew))?;
        }
        Ok(())
    })
}

/// Runs `fill_u32(c, 0x5a5a5a5a, count)` over `items` work-items with `twin` bound; the
/// outcome and the first 128 words of `c` (which starts as 0xffffffff).
fn fill(twin: Twin, count: u32, items: u32) -> (Result<(), Option<QueueState>>, Vec<u32>) {
    let h = Harness::with(EmuConfig { kernels: KernelMode::Check, ..EmuConfig::default() });
    h.emu.register_twin_by_name(twin);
    let elf = std::fs::read(format!("{FIXTURES}/kernels-gfx90a.co")).expect("fixture");
    let objects = place_code_object(&h, &elf, &["fill_u32"]);
    let c = h.alloc(4096, GTT);
    for i in 0..128 {
        write(&c, 4 * i, u32::MAX);
    }
    let k = h.alloc(4096, GTT);
    write(&k, 0, c.va);
    write(&k, 8, 0x5a5a_5a5au32);
    write(&k, 12, count);
    let q = h.create_queue();
    let sigs = h.signals();
    signal(&sigs, 0).reset(1);
    q.submit(&[dispatch(objects[0], k.va, items, 64, signal_handle(&sigs, 0), true)]);
    // Done, or the queue's error (without waiting out the timeout for a failing dispatch).
    let failed = || matches!(h.emu.queue_state(q.id), Some(QueueState::Error(_) | QueueState::Evicted(_)));
    wait_until(std::time::Duration::from_secs(5), || signal(&sigs, 0).load() == 0 || failed());
    let r = if signal(&sigs, 0).load() == 0 { Ok(()) } else { Err(h.emu.queue_state(q.id)) };
    (r, read_slice(&c, 128))
}

#[test]
fn agreeing_twin_and_machine_code_complete_with_the_results() {
    let (r, c) = fill(fill_twin(0), 100, 128);
    r.expect("both ways agree");
    assert!(c[..100].iter().all(|&v| v == 0x5a5a_5a5a), "{:x?}", &c[..100]);
    assert!(c[100..].iter().all(|&v| v == u32::MAX), "nothing past the count");
}

#[test]
fn a_twin_that_writes_other_values_fails_the_dispatch() {
    let (r, _) = fill(fill_twin(1), 100, 128);
    assert!(matches!(r, Err(Some(QueueState::Error(_) | QueueState::Evicted(_)))), "{r:?}");
}

#[test]
fn a_twin_that_writes_fewer_elements_fails_the_dispatch() {
    // The machine code writes where the twin does not: a store the twin lacks is seen too.
    let short = Twin::new("fill_u32", 16, |ctx: &KernelCtx<'_>, wg| {
        for i in ctx.items_x(wg).filter(|&i| i + 1 < ctx.arg_u32(12)) {
            ctx.mem.write_u32(ctx.arg_u64(0) + 4 * u64::from(i), ctx.arg_u32(8))?;
        }
        Ok(())
    });
    let (r, _) = fill(short, 100, 128);
    assert!(r.is_err(), "{r:?}");
}

#[test]
fn a_twin_that_ends_differently_fails_the_dispatch() {
    let trapping = Twin::new("fill_u32", 16, |_: &KernelCtx<'_>, _| Err(KernelError::Trap));
    let (r, c) = fill(trapping, 100, 128);
    assert!(r.is_err(), "{r:?}");
    // The machine code's stores are what memory holds when it ran last; either way nothing
    // past the count was written.
    assert!(c[100..].iter().all(|&v| v == u32::MAX));
}
