//! Real AMDHSA code objects (built by fixtures/build-fixtures.sh with clang-15 and lld-15) load
//! and dispatch their host twins (docs/kfd-aql.md §6; docs/architecture.md rule 6).

mod common;

use std::path::Path;

use amdhsa::CodeObject;
use aqueduct_kfd_emu::{GpuProfile, KernelCtx, Twin};
use common::*;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures");

fn fixture(target: &str) -> Vec<u8> {
    std::fs::read(format!("{FIXTURES}/kernels-{target}.co")).expect("fixture")
}

/// The device profile a code-object target runs on (gfx940 objects stand in for gfx942:
/// clang-15 predates gfx942).
fn profile_for(target: &str) -> GpuProfile {
    match target {
        "gfx90a" => GpuProfile::Gfx90a,
        "gfx940" => GpuProfile::Gfx942,
        _ => GpuProfile::Gfx1100,
    }
}

#[test]
fn fixtures_are_amdhsa_code_objects_for_their_targets() {
    for t in ["gfx90a", "gfx940", "gfx1100"] {
        let elf = fixture(t);
        let co = CodeObject::parse(&elf).unwrap();
        assert_eq!(co.target().processor.name, t);
        assert!((4..=6).contains(&co.version()));
        let mut kernels: Vec<_> = co.kernels().unwrap().map(Result::unwrap).collect();
        kernels.sort_by_key(|k| k.name);
        let names: Vec<_> = kernels.iter().map(|k| k.name).collect();
        assert_eq!(names, ["fill_u32", "vector_add"], "{t}");
        for k in &kernels {
            assert!(k.descriptor.kernarg_size >= 16, "{t} {}", k.name);
            assert_eq!(k.descriptor.private_segment_fixed_size, 0);
            assert!(co.bytes_from(k.entry_address()).is_some_and(|c| !c.is_empty()));
            // wave32 on gfx11 (kernel_code_properties bit 10).
            assert_eq!(k.descriptor.wave32(), t == "gfx1100", "{t} wave size");
        }
    }
    assert!(CodeObject::parse(b"not an elf").is_err());
}

fn twins(h: &Harness) {
    h.emu.register_twin_by_name(Twin::new("fill_u32", 0, |ctx: &KernelCtx<'_>, wg| {
        let (dst, value, count) = (ctx.arg_u64(0), ctx.arg_u32(8), ctx.arg_u32(12));
        for i in ctx.items_x(wg).filter(|&i| i < count) {
            ctx.mem.write_u32(dst + 4 * u64::from(i), value)?;
        }
        Ok(())
    }));
    h.emu.register_twin_by_name(Twin::new("vector_add", 0, |ctx: &KernelCtx<'_>, wg| {
        let (a, b, c, count) = (ctx.arg_u64(0), ctx.arg_u64(8), ctx.arg_u64(16), ctx.arg_u32(24));
        for i in ctx.items_x(wg).filter(|&i| i < count) {
            let off = 4 * u64::from(i);
            let s = ctx.mem.read_u32(a + off)?.wrapping_add(ctx.mem.read_u32(b + off)?);
            ctx.mem.write_u32(c + off, s)?;
        }
        Ok(())
    }));
}

#[test]
fn loaded_code_objects_dispatch_their_twins() {
    for t in ["gfx90a", "gfx940", "gfx1100"] {
        let h = Harness::profile(profile_for(t));
        twins(&h);
        let elf = fixture(t);
        let bound = h.emu.load_code_object(&elf).unwrap();
        assert_eq!(bound, ["fill_u32", "vector_add"]);
        // Load as a runtime would: one executable BO, segments at base + p_vaddr, relocated.
        let objects = place_code_object(&h, &elf, &["fill_u32", "vector_add"]);
        let object = |name: &str| objects[usize::from(name == "vector_add")];

        let n = 1000u32;
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
            for (off, v) in [(0usize, a.va), (8, b.va), (16, c.va)] {
                std::ptr::write_unaligned(p.add(256 + off).cast::<u64>(), v);
            }
            std::ptr::write_unaligned(p.add(256 + 24).cast::<u32>(), n);
        }
        let q = h.create_queue();
        let sigs = h.signals();
        signal(&sigs, 0).reset(2);
        let s = signal_handle(&sigs, 0);
        q.submit(&[
            dispatch(object("fill_u32"), k.va, n + 24, 64, s, true),
            dispatch(object("vector_add"), k.va + 256, n, 64, s, true),
        ]);
        assert!(wait_signal(signal(&sigs, 0), 0), "{t}: {:?}", h.emu.queue_state(q.id));
        // SAFETY: CPU-mapped output (large BAR).
        let out = unsafe { std::slice::from_raw_parts(c.ptr::<u32>(), n as usize + 24) };
        assert_eq!(out[7], 7007, "{t}");
        assert_eq!(out[999], 999_999, "{t}");
        assert_eq!(out[1000], 0x5a5a_5a5a, "{t}: the fill covered the tail");
    }
}

/// The committed fixtures are what the script builds from kernels.cl today.
#[test]
fn fixtures_are_reproducible_with_clang_15() {
    for tool in ["clang-15", "ld.lld-15"] {
        let ok = std::process::Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success());
        let pkg = if tool == "clang-15" { "clang-15" } else { "lld-15" };
        assert!(ok, "{tool} is missing: install the Debian package {pkg} (`apt-get install clang-15 lld-15`)");
    }
    let tmp = std::env::temp_dir().join(format!("kfd-emu-fixtures-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    for f in ["kernels.cl", "build-fixtures.sh"] {
        std::fs::copy(Path::new(FIXTURES).join(f), tmp.join(f)).unwrap();
    }
    let st = std::process::Command::new("bash").arg(tmp.join("build-fixtures.sh")).output().unwrap();
    assert!(st.status.success(), "{}", String::from_utf8_lossy(&st.stderr));
    for t in ["gfx90a", "gfx940", "gfx1100"] {
        let built = std::fs::read(tmp.join(format!("kernels-{t}.co"))).unwrap();
        assert!(built == fixture(t), "fixtures/kernels-{t}.co is stale: run fixtures/build-fixtures.sh");
    }
    let _ = std::fs::remove_dir_all(&tmp);
}
