//! Deterministic stand-in for the `isa_decode` fuzz target (fuzz/fuzz_targets/isa_decode.rs):
//! random words, decoded for gfx90a and gfx940 at every offset and printed, never panic; plus the size budget of `Inst`.

use std::fmt::Write;

use aqueduct_isa::{decode_all_for, decode_for, Inst, Target};

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 16) as u32
    }
}

/// Random words, with the top bits biased toward real encoding prefixes so most decode.
fn words(rng: &mut XorShift, n: usize) -> Vec<u32> {
    const PREFIXES: [(u32, u32); 14] = [
        (0x8000_0000, 2),
        (0xB000_0000, 4),
        (0xBE80_0000, 9),
        (0xBF00_0000, 9),
        (0xBF80_0000, 9),
        (0xC000_0000, 6),
        (0x7E00_0000, 7),
        (0x7C00_0000, 7),
        (0x0000_0000, 1),
        (0xD000_0000, 6),
        (0xD380_0000, 9),
        (0xD800_0000, 6),
        (0xDC00_0000, 6),
        (0xE000_0000, 6),
    ];
    (0..n)
        .map(|_| {
            let r = rng.next();
            let (p, bits) = PREFIXES[(rng.next() % 16) as usize % PREFIXES.len()];
            if rng.next() % 8 == 0 {
                r
            } else {
                p | (r >> bits)
            }
        })
        .collect()
}

#[test]
fn random_words_never_panic() {
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    let mut text = String::new();
    let (mut ok, mut err) = (0usize, 0usize);
    for round in 0..200 {
        // Both instruction sets, alternately (docs/isa.md §2 "CDNA3").
        let target = if round % 2 == 0 { Target::Gfx90a } else { Target::Gfx940 };
        let w = words(&mut rng, 1000);
        for at in 0..w.len() {
            match decode_for(target, &w, at) {
                Ok(inst) => {
                    assert!(at + usize::from(inst.len) <= w.len());
                    text.clear();
                    write!(text, "{}", inst.display()).unwrap();
                    assert!(!text.is_empty());
                    ok += 1;
                }
                Err(e) => {
                    assert_eq!(e.word, at);
                    text.clear();
                    write!(text, "{e}").unwrap();
                    err += 1;
                }
            }
        }
        let _ = decode_all_for(target, &w);
    }
    println!("random words: {ok} decoded, {err} errors");
    assert!(ok > err / 4, "the bias toward real prefixes should make many words decode");
}

#[test]
fn inst_stays_compact() {
    // An interpreter walks arrays of these; keep them within two cache lines' worth of bytes.
    assert!(std::mem::size_of::<Inst>() <= 80, "Inst grew to {} bytes", std::mem::size_of::<Inst>());
    println!("size_of::<Inst>() = {}", std::mem::size_of::<Inst>());
}

/// Deterministic stand-in for the `isa_exec` fuzz target (fuzz/fuzz_targets/isa_exec.rs):
/// random kernel descriptors, dispatch packets and scratch setups around real and random code,
/// each work-group run through `run_work_group` as the emulator runs it. Every outcome is a
/// value — the work-group ends or the dispatch fails with an error — never a panic, a hang (the
/// watchdog bounds each wave) or an allocation the descriptor alone asks for.
#[test]
fn random_descriptors_and_dispatches_end_in_values() {
    use aqueduct_isa::exec::{run_work_group_counted, Code, Dispatch, Kernel, Limits, Scratch, VecMemory};

    const BASE: u64 = 0x1_0000_0000;
    const MEMORY: usize = 1 << 16;
    let mut rng = XorShift(0x2545_F491_4F6C_DD1D);
    let bundle = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/isa/kernels-gfx90a.bundle")).unwrap();
    let bundle = amdhsa::Bundle::parse(&bundle).unwrap();
    let co = bundle.entries().find(|e| e.target().is_some()).unwrap().code;
    let elf = amdhsa::CodeObject::parse(co).unwrap();
    let saxpy = elf.kernel("saxpy").unwrap().unwrap();
    let text = elf.bytes_from(saxpy.entry_address()).unwrap();
    let real: Vec<u32> =
        text[..text.len().min(4096) & !3].chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();

    let (mut ended, mut failed, mut executed) = (0usize, 0usize, 0u64);
    for round in 0..400u32 {
        // The descriptor: the real one with random fields, or all random (reserved bytes zero,
        // as a descriptor must have them to be read at all).
        let mut kd = saxpy.descriptor;
        let pick = rng.next() % 4;
        if pick == 0 {
            let mut raw = [0u8; 64];
            raw.iter_mut().for_each(|b| *b = rng.next() as u8);
            for r in [12..16, 24..44, 60..64] {
                raw[r].fill(0);
            }
            kd = amdhsa::KernelDescriptor::from_bytes(&raw).unwrap();
        } else {
            let flip =
                |v: u32, rng: &mut XorShift| v ^ (1 << (rng.next() % 32)) ^ (rng.next() & (rng.next() | rng.next()));
            match rng.next() % 6 {
                0 => kd.rsrc1.raw = flip(kd.rsrc1.raw, &mut rng),
                1 => kd.rsrc2.raw = flip(kd.rsrc2.raw, &mut rng),
                2 => kd.rsrc3.raw = flip(kd.rsrc3.raw, &mut rng),
                3 => kd.kernel_code_properties ^= rng.next() as u16,
                4 => kd.group_segment_fixed_size = rng.next() << (rng.next() % 16),
                _ => kd.private_segment_fixed_size = rng.next() >> (rng.next() % 32),
            }
        }
        // The code: the real kernel, the real one with flipped bits, or random words.
        let mut code = real.clone();
        match round % 3 {
            0 => {}
            1 => (0..1 + rng.next() % 6).for_each(|_| {
                let i = rng.next() as usize % code.len();
                code[i] ^= 1 << (rng.next() % 32);
            }),
            _ => {
                let n = 1 + rng.next() as usize % 64;
                code = words(&mut rng, n);
            }
        }
        let mem = VecMemory::new(BASE, MEMORY);
        // Memory of small numbers, or of pointers into itself (so that kernarg pointers lead
        // somewhere and the kernel runs on).
        if round % 2 == 0 {
            mem.bytes.borrow_mut().iter_mut().for_each(|b| *b = (rng.next() % 5) as u8);
        } else {
            for c in mem.bytes.borrow_mut().chunks_exact_mut(8) {
                c.copy_from_slice(&(BASE + u64::from((rng.next() % (MEMORY as u32 / 2)) & !7)).to_le_bytes());
            }
        }
        let inside = |rng: &mut XorShift| BASE + u64::from((rng.next() % MEMORY as u32) & !7);
        let anywhere = |rng: &mut XorShift| u64::from(rng.next()) << (rng.next() % 33);
        let addr = |rng: &mut XorShift| if rng.next() % 8 == 0 { anywhere(rng) } else { inside(rng) };
        let small = |rng: &mut XorShift, max: u32| 1 + rng.next() % max;
        let workgroup_size = [small(&mut rng, 256), small(&mut rng, 4), 1 + u32::from(rng.next() % 8 == 0)];
        let grid = workgroup_size.map(|w| w * small(&mut rng, 3) - rng.next() % w);
        let tmpring = (rng.next() % 20) | (rng.next() % 8) << 12;
        let dispatch = Dispatch {
            packet_address: addr(&mut rng),
            queue_address: addr(&mut rng),
            kernarg_address: addr(&mut rng),
            dispatch_id: u64::from(rng.next()),
            grid,
            workgroup_size,
            group_segment_size: if rng.next() % 8 == 0 { rng.next() } else { rng.next() % 8192 },
            private_segment_size: rng.next() % 512,
            scratch: Scratch {
                resource: [rng.next(), rng.next(), rng.next(), rng.next()],
                base: addr(&mut rng),
                bytes: u64::from(rng.next() % MEMORY as u32),
                tmpring,
            },
        };
        let entry = BASE + 4 * u64::from(rng.next() % 16 / 12);
        let kernel = Kernel { code: Code::decode(entry, &code), descriptor: kd, entry };
        let wg = [0, 1, 2].map(|d| rng.next() % grid[d].div_ceil(workgroup_size[d]).max(1));
        let limits = Limits { wave_instructions: 5_000 };
        let lds = dispatch.group_segment_size.max(kd.group_segment_fixed_size);
        match run_work_group_counted(&kernel, &dispatch, wg, rng.next() % 8, &mem, &limits) {
            Ok(n) => {
                ended += 1;
                executed += n;
            }
            Err(e) => {
                failed += 1;
                assert!(!e.to_string().is_empty());
                continue;
            }
        }
        assert!(lds <= aqueduct_isa::exec::MAX_LDS, "a work-group with {lds} bytes of LDS started");
    }
    println!("random dispatches: {ended} ended, {failed} failed, {executed} wave instructions");
    assert!(ended > 0 && failed > 0, "both outcomes must occur: {ended} ended, {failed} failed");
}
