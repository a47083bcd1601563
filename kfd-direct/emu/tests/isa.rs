//! Kernels without host twins run their own machine code (docs/executor.md;
//! docs/architecture.md rule 6): the clang-15 fixtures, a hipcc -O3 SAXPY (grid-stride loop)
//! and an LDS reduction with `__syncthreads` and `atomicAdd`, each checked against the host on
//! the gfx90a device and, built for gfx940, on the gfx942 device (`gfx942::…`); a faulting kernel
//! and an unimplemented instruction fail their dispatch.

#![allow(clippy::needless_range_loop)]

mod common;

use aqueduct_kfd_emu::{EmuConfig, KernelCtx, KernelMode, QueueState, Twin};
use common::*;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures");

fn harness(mode: KernelMode) -> Harness {
    harness_on(mode, Gpu::Mi210)
}

fn harness_on(mode: KernelMode, gpu: Gpu) -> Harness {
    Harness::with(gpu.config(EmuConfig { kernels: mode, ..EmuConfig::default() }))
}

/// The clang-15 OpenCL fixture for `gpu` (`kernels-gfx90a.co`, `kernels-gfx940.co`).
fn clang_fixture_for(gpu: Gpu) -> Vec<u8> {
    std::fs::read(format!("{FIXTURES}/kernels-{}.co", gpu.code_target())).expect("fixture")
}

fn clang_fixture() -> Vec<u8> {
    clang_fixture_for(Gpu::Mi210)
}

fn clang_fixtures_run_as_machine_code_without_twins(gpu: Gpu) {
    let h = harness_on(KernelMode::Auto, gpu);
    let elf = clang_fixture_for(gpu);
    let objects = place_code_object(&h, &elf, &["fill_u32", "vector_add"]);
    let n = 1000u32;
    let (a, b, c) = (h.alloc(4096, GTT), h.alloc(4096, GTT), h.alloc(8192, VRAM));
    for i in 0..n as usize {
        write(&a, 4 * i, i as u32);
        write(&b, 4 * i, 1000 * i as u32 + 7);
    }
    let k = h.alloc(4096, GTT);
    write(&k, 0, c.va);
    write(&k, 8, 0x5a5a_5a5au32);
    write(&k, 12, n + 24);
    for (off, v) in [(0usize, a.va), (8, b.va), (16, c.va)] {
        write(&k, 256 + off, v);
    }
    write(&k, 256 + 24, n);
    // 1024 + 24 work-items over work-groups of 64 (the last partial) then 1000 (partial).
    run_packets(
        &h,
        &mut [dispatch(objects[0], k.va, n + 24, 64, 0, true), dispatch(objects[1], k.va + 256, n, 64, 0, true)],
    )
    .expect("both dispatches complete");
    let out: Vec<u32> = read_slice(&c, n as usize + 32);
    for i in 0..n as usize {
        assert_eq!(out[i], 1001 * i as u32 + 7, "vector_add element {i}");
    }
    for (i, v) in out.iter().enumerate().take(n as usize + 24).skip(n as usize) {
        assert_eq!(*v, 0x5a5a_5a5a, "fill element {i}");
    }
    assert_eq!(out[n as usize + 24], 0, "nothing written past the count");
}

fn hipcc_saxpy_grid_stride_loop_matches_the_host(gpu: Gpu) {
    let h = harness_on(KernelMode::Auto, gpu);
    let elf = hipcc_fixture_for("kernels", gpu);
    let objects = place_code_object(&h, &elf, &["saxpy"]);
    // More elements than work-items: each work-item loops (grid-stride).
    let n = 40_000usize;
    let (x, y) = (h.alloc((4 * n) as u64, GTT), h.alloc((4 * n) as u64, GTT));
    let a = 1.75f32;
    let xs: Vec<f32> = (0..n).map(|i| (i as f32) * 0.25 - 3.0).collect();
    let ys: Vec<f32> = (0..n).map(|i| 1.0 / (1.0 + i as f32)).collect();
    for i in 0..n {
        write(&x, 4 * i, xs[i]);
        write(&y, 4 * i, ys[i]);
    }
    let k = h.alloc(4096, GTT);
    write(&k, 0, n as i32);
    write(&k, 4, a);
    write(&k, 8, x.va);
    write(&k, 16, y.va);
    // 16 work-groups of 256: 4096 work-items for 40 000 elements.
    run_packets(&h, &mut [dispatch(objects[0], k.va, 16 * 256, 256, 0, true)]).expect("saxpy completes");
    let got: Vec<f32> = read_slice(&y, n);
    for i in 0..n {
        // v_fmac_f32: one rounding, as f32::mul_add.
        let want = a.mul_add(xs[i], ys[i]);
        assert_eq!(got[i].to_bits(), want.to_bits(), "y[{i}] = {} want {want}", got[i]);
    }
}

fn hipcc_lds_reduction_with_barriers_and_atomic_add(gpu: Gpu) {
    let h = harness_on(KernelMode::Auto, gpu);
    let elf = hipcc_fixture_for("kernels", gpu);
    let objects = place_code_object(&h, &elf, &["reduce_sum"]);
    let n = 10_000usize;
    let x = h.alloc((4 * n) as u64, GTT);
    let xs: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(2_654_435_761) >> 20).collect();
    for (i, v) in xs.iter().enumerate() {
        write(&x, 4 * i, *v);
    }
    let out = h.alloc(4096, GTT);
    let k = h.alloc(4096, GTT);
    write(&k, 0, x.va);
    write(&k, 8, n as u32);
    write(&k, 16, out.va);
    let groups = n.div_ceil(256) as u32;
    let mut p = dispatch(objects[0], k.va, groups * 256, 256, 0, true);
    p.group_segment_size = 1024;
    run_packets(&h, &mut [p]).expect("reduce_sum completes");
    let sum: u32 = xs.iter().fold(0u32, |s, v| s.wrapping_add(*v));
    assert_eq!(read_slice::<u32>(&out, 1)[0], sum);
}

#[test]
fn isa_mode_runs_machine_code_even_when_a_twin_is_bound() {
    for (mode, want) in [(KernelMode::Isa, 0x5a5a_5a5a), (KernelMode::Auto, 0x1234)] {
        let h = harness(mode);
        // A twin that writes something else: which one ran shows in the output.
        h.emu.register_twin_by_name(Twin::new("fill_u32", 16, |ctx: &KernelCtx<'_>, wg| {
            for i in ctx.items_x(wg).filter(|&i| i < ctx.arg_u32(12)) {
                ctx.mem.write_u32(ctx.arg_u64(0) + 4 * u64::from(i), 0x1234)?;
            }
            Ok(())
        }));
        let elf = clang_fixture();
        let objects = place_code_object(&h, &elf, &["fill_u32"]);
        let c = h.alloc(4096, GTT);
        let k = h.alloc(4096, GTT);
        write(&k, 0, c.va);
        write(&k, 8, 0x5a5a_5a5au32);
        write(&k, 12, 100u32);
        run_packets(&h, &mut [dispatch(objects[0], k.va, 100, 64, 0, true)]).expect("fill completes");
        assert_eq!(read_slice::<u32>(&c, 100)[99], want, "{mode:?}");
    }
}

#[test]
fn twin_mode_keeps_failing_a_kernel_without_a_twin() {
    let h = harness(KernelMode::Twin);
    let objects = place_code_object(&h, &clang_fixture(), &["fill_u32"]);
    let k = h.alloc(4096, GTT);
    let e = run_packets(&h, &mut [dispatch(objects[0], k.va, 64, 64, 0, true)]).expect_err("no twin");
    assert!(matches!(e, Some(QueueState::Error(_))), "{e:?}");
}

#[test]
fn a_faulting_kernel_reports_the_memory_violation() {
    let h = harness(KernelMode::Auto);
    let objects = place_code_object(&h, &clang_fixture(), &["fill_u32"]);
    let k = h.alloc(4096, GTT);
    // dst in no mapping.
    write(&k, 0, 0x7000_0000_0000u64);
    write(&k, 8, 1u32);
    write(&k, 12, 64u32);
    let e = run_packets(&h, &mut [dispatch(objects[0], k.va, 64, 64, 0, true)]).expect_err("faults");
    let violation = aqueduct_kfd_emu::abi::exception::QUEUE_WAVE_MEMORY_VIOLATION;
    assert!(
        matches!(e, Some(QueueState::Evicted(c) | QueueState::Error(c)) if c == violation),
        "{e:?} (want the memory violation {violation})"
    );
}

#[test]
fn an_unimplemented_instruction_fails_the_dispatch() {
    let h = harness(KernelMode::Auto);
    let elf = clang_fixture();
    let co = amdhsa::CodeObject::parse(&elf).unwrap();
    let objects = place_code_object(&h, &elf, &["fill_u32"]);
    // Patch `v_mov_b32_e32 v1, 0` (the first of its kind after the entry) into
    // `v_screen_partition_4se_b32_e32 v1, 0`, which the executor does not implement.
    let kernel = co.kernel("fill_u32").unwrap().unwrap();
    let entry = objects[0].wrapping_add_signed(kernel.descriptor.kernel_code_entry_byte_offset);
    let words = entry as *mut u32;
    // SAFETY: the code BO is CPU-mapped; the kernel is shorter than 64 words.
    unsafe {
        let at = (0..64).find(|&i| words.add(i).read() == 0x7E02_0280).expect("v_mov_b32 v1, 0");
        words.add(at).write(0x7E02_6E80);
    }
    let k = h.alloc(4096, GTT);
    let c = h.alloc(4096, GTT);
    write(&k, 0, c.va);
    write(&k, 8, 1u32);
    write(&k, 12, 64u32);
    let e = run_packets(&h, &mut [dispatch(objects[0], k.va, 64, 64, 0, true)]).expect_err("unimplemented");
    assert!(matches!(e, Some(QueueState::Error(_))), "{e:?}");
    assert_eq!(read_slice::<u32>(&c, 1)[0], 0, "nothing was stored");
}

on_both_gpus!(
    clang_fixtures_run_as_machine_code_without_twins,
    hipcc_saxpy_grid_stride_loop_matches_the_host,
    hipcc_lds_reduction_with_barriers_and_atomic_add
);
