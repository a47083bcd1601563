//! Host twins written in C (`include/aqueduct_emu.h`): from a shared library named in the
//! machine's configuration (what `AQUEDUCT_TWINS` sets), and registered in-process with
//! `aqd_emu_register_twin`. They run the kernels of a real clang-built code object, with the
//! arguments the code object's metadata lays out and memory through the checked map.

mod common;

use std::ffi::{c_int, c_void};
use std::path::{Path, PathBuf};
use std::process::Command;

use aqueduct_kfd_emu::c_abi::{aqd_emu_register_twin, AqdEmuCtx};
use aqueduct_kfd_emu::{EmuConfig, QueueState};
use common::*;

const MANIFEST: &str = env!("CARGO_MANIFEST_DIR");

/// Builds `tests/c/twins.c` into a shared library (once per test process).
fn twin_library() -> PathBuf {
    static LIB: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    LIB.get_or_init(|| {
        assert!(Path::new("/usr/bin/gcc").exists(), "Debian package `gcc` is missing: apt-get install -y gcc");
        let dir = std::env::temp_dir().join(format!("kfd-emu-c-twins-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let lib = dir.join("libtwins.so");
        let out = Command::new("gcc")
            .args(["-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-std=c11", "-I"])
            .arg(Path::new(MANIFEST).join("include"))
            .arg(Path::new(MANIFEST).join("tests/c/twins.c"))
            .arg("-o")
            .arg(&lib)
            .output()
            .expect("gcc");
        assert!(out.status.success(), "gcc twins.c failed:\n{}", String::from_utf8_lossy(&out.stderr));
        lib
    })
    .clone()
}

/// The gfx90a fixture loaded at a BO of `h`: the kernel objects of `fill_u32` and `vector_add`.
fn load_fixture(h: &Harness) -> (u64, u64) {
    let elf = std::fs::read(format!("{MANIFEST}/fixtures/kernels-gfx90a.co")).unwrap();
    let bound = h.emu.load_code_object(&elf).unwrap();
    assert_eq!(bound, ["fill_u32", "vector_add"], "both kernels have a twin");
    let objects = place_code_object(h, &elf, &["fill_u32", "vector_add"]);
    (objects[0], objects[1])
}

/// Runs `fill_u32(c, 0x5a5a5a5a, n + 24)` then `vector_add(a, b, c, n)`; returns `c`.
fn run_fixture(h: &Harness, fill: u64, add: u64, n: u32, a_va: Option<u64>) -> (Vec<u32>, Queue) {
    let a = h.alloc(4096, GTT);
    let b = h.alloc(4096, GTT);
    let c = h.alloc(4096, VRAM);
    for i in 0..n as usize {
        // SAFETY: CPU-mapped inputs.
        unsafe {
            *a.ptr::<u32>().add(i) = i as u32;
            *b.ptr::<u32>().add(i) = 1000 * i as u32;
        }
    }
    let k = h.alloc(4096, GTT);
    // SAFETY: CPU-mapped kernarg page: fill_u32 at +0, vector_add at +256.
    unsafe {
        let p = k.ptr::<u8>();
        std::ptr::write_unaligned(p.cast::<u64>(), c.va);
        std::ptr::write_unaligned(p.add(8).cast::<u32>(), 0x5a5a_5a5a);
        std::ptr::write_unaligned(p.add(12).cast::<u32>(), n + 24);
        for (off, v) in [(0usize, a_va.unwrap_or(a.va)), (8, b.va), (16, c.va)] {
            std::ptr::write_unaligned(p.add(256 + off).cast::<u64>(), v);
        }
        std::ptr::write_unaligned(p.add(256 + 24).cast::<u32>(), n);
    }
    let q = h.create_queue();
    let sigs = h.signals();
    signal(&sigs, 0).reset(2);
    let s = signal_handle(&sigs, 0);
    q.submit(&[dispatch(fill, k.va, n + 24, 64, s, true), dispatch(add, k.va + 256, n, 64, s, true)]);
    if a_va.is_none() {
        assert!(wait_signal(signal(&sigs, 0), 0), "{:?}", h.emu.queue_state(q.id));
    }
    // SAFETY: CPU-mapped output (large BAR).
    let out = unsafe { std::slice::from_raw_parts(c.ptr::<u32>(), n as usize + 24) }.to_vec();
    (out, q)
}

#[test]
fn twins_from_a_shared_library_run_a_code_objects_kernels() {
    let config = EmuConfig { twin_libraries: vec![twin_library()], ..EmuConfig::default() };
    let h = Harness::with(config);
    let (fill, add) = load_fixture(&h);
    let (c, _q) = run_fixture(&h, fill, add, 1000, None);
    assert_eq!((c[7], c[999]), (7007, 999_999));
    assert_eq!(c[1000], 0x5a5a_5a5a, "the fill covered the tail");
}

#[test]
fn in_check_mode_the_c_twins_and_the_machine_code_agree() {
    // Each work-group runs as the C twin and as the kernel's own gfx90a code from the same
    // memory; a difference would fail the dispatch (docs/executor.md §4).
    let config = EmuConfig {
        twin_libraries: vec![twin_library()],
        kernels: aqueduct_kfd_emu::KernelMode::Check,
        ..EmuConfig::default()
    };
    let h = Harness::with(config);
    let (fill, add) = load_fixture(&h);
    let (c, _q) = run_fixture(&h, fill, add, 1000, None);
    assert_eq!((c[7], c[999]), (7007, 999_999));
    assert_eq!(c[1000], 0x5a5a_5a5a, "the fill covered the tail");
}

#[test]
fn a_c_twin_that_cannot_map_its_buffer_is_a_gpu_memory_fault() {
    let config = EmuConfig { twin_libraries: vec![twin_library()], ..EmuConfig::default() };
    let h = Harness::with(config);
    let page = h.event_page();
    let mem = h.create_event(aqueduct_kfd_emu::abi::event_type::MEMORY, false, Some(&page)).unwrap().event_id;
    let (fill, add) = load_fixture(&h);
    let bad = 0x7000_dead_0000u64;
    let (_, q) = run_fixture(&h, fill, add, 100, Some(bad));
    let (r, data) = h.wait_events(&[mem], false, 5000).unwrap();
    assert_eq!(r, aqueduct_kfd_emu::abi::wait_result::COMPLETE);
    // Two work-groups of 64 read `a` on different workers; the fault reported is whichever load
    // reached the unmapped range first, as on a GPU, so any address the kernel reads is right.
    let va = data[0].memory_exception().va;
    assert!((bad..bad + 4 * 100).contains(&va), "{va:#x} is not an address the kernel reads");
    assert!(matches!(h.emu.queue_state(q.id), Some(QueueState::Evicted(_))));
}

#[test]
fn a_library_that_cannot_be_loaded_fails_the_machine_naming_it() {
    let missing = PathBuf::from("/nonexistent/libno-twins.so");
    let e = aqueduct_kfd_emu::Emu::new(EmuConfig { twin_libraries: vec![missing], ..EmuConfig::default() })
        .expect_err("a missing twin library is an error");
    let msg = e.to_string();
    assert!(msg.contains("AQUEDUCT_TWINS") && msg.contains("/nonexistent/libno-twins.so"), "{msg}");
}

/// `fill_u32` as an in-process C-ABI body: writes the value (+ `*user`) over its work-items.
unsafe extern "C" fn fill_plus(ctx: *const AqdEmuCtx, user: *mut c_void) -> c_int {
    // SAFETY: the emulator passes a live context for the call; `user` is the u32 registered.
    let (ctx, add) = unsafe { (&*ctx, *user.cast::<u32>()) };
    let kernarg = |off: usize, n: usize| {
        let mut v = [0u8; 8];
        if (off + n) as u64 <= ctx.kernarg_size {
            // SAFETY: `off + n` lies inside the kernel-argument segment (checked above).
            unsafe { std::ptr::copy_nonoverlapping(ctx.kernarg.add(off), v.as_mut_ptr(), n) };
        }
        u64::from_le_bytes(v)
    };
    // SAFETY: `args` holds `arg_count` entries.
    let args = unsafe { std::slice::from_raw_parts(ctx.args, ctx.arg_count as usize) };
    let arg = |i: usize| args.get(i).map_or(0, |a| kernarg(a.offset as usize, a.size.min(8) as usize));
    let (dst, value, count) = (arg(0), arg(1) as u32, arg(2) as u32);
    let lo = ctx.workgroup_id[0] * ctx.workgroup_size[0];
    let hi = (lo + ctx.workgroup_size[0]).min(count);
    if lo >= hi {
        return 0;
    }
    // SAFETY: the map function of the live context.
    let p = unsafe { (ctx.map)(ctx, dst + 4 * u64::from(lo), 4 * u64::from(hi - lo)) }.cast::<u32>();
    if p.is_null() {
        return 1;
    }
    for i in 0..(hi - lo) as usize {
        // SAFETY: the map covered `hi - lo` u32s.
        unsafe { p.add(i).write(value + add) };
    }
    0
}

#[test]
fn a_twin_registered_in_process_through_the_c_abi_runs_for_every_machine() {
    static ADD: u32 = 1;
    // SAFETY: a NUL-terminated symbol, a body with the C twin signature, a user pointer to a
    // static the body only reads.
    let rc =
        unsafe { aqd_emu_register_twin(c"fill_u32".as_ptr(), Some(fill_plus), (&ADD as *const u32).cast_mut().cast()) };
    assert_eq!(rc, 0);
    // SAFETY: a NULL symbol is refused, not dereferenced.
    assert_eq!(unsafe { aqd_emu_register_twin(std::ptr::null(), Some(fill_plus), std::ptr::null_mut()) }, -1);
    let h = Harness::new();
    let elf = std::fs::read(format!("{MANIFEST}/fixtures/kernels-gfx90a.co")).unwrap();
    // vector_add has no twin on this machine; fill_u32 has the process-wide one.
    assert_eq!(h.emu.load_code_object(&elf).unwrap(), ["fill_u32"]);
    let fill = place_code_object(&h, &elf, &["fill_u32"])[0];
    let c = h.alloc(4096, VRAM);
    let k = h.alloc(4096, GTT);
    // SAFETY: CPU-mapped kernarg page.
    unsafe {
        let p = k.ptr::<u8>();
        std::ptr::write_unaligned(p.cast::<u64>(), c.va);
        std::ptr::write_unaligned(p.add(8).cast::<u32>(), 41);
        std::ptr::write_unaligned(p.add(12).cast::<u32>(), 200);
    }
    let q = h.create_queue();
    let sigs = h.signals();
    signal(&sigs, 0).reset(1);
    q.submit(&[dispatch(fill, k.va, 256, 64, signal_handle(&sigs, 0), true)]);
    assert!(wait_signal(signal(&sigs, 0), 0));
    // SAFETY: CPU-mapped output.
    let out = unsafe { std::slice::from_raw_parts(c.ptr::<u32>(), 256) };
    assert_eq!((out[0], out[199], out[200]), (42, 42, 0));
}
