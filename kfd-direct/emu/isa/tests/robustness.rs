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
