//! The gfx90a and gfx940 decoders on arbitrary words: every start offset must decode to an instruction that
//! fits the stream or to an error value, and every decoded instruction must print; never a panic.
#![no_main]

use std::fmt::Write;

use aqueduct_isa::{decode_all_for, decode_for, Target};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let words: Vec<u32> = data.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    let mut text = String::new();
    for target in [Target::Gfx90a, Target::Gfx940] {
        for at in 0..words.len() {
            match decode_for(target, &words, at) {
                Ok(inst) => {
                    assert!(at + usize::from(inst.len) <= words.len());
                    assert!(inst.len >= 1 && inst.len <= 3);
                    text.clear();
                    let _ = write!(text, "{}", inst.display());
                    assert!(!text.is_empty());
                }
                Err(e) => {
                    assert_eq!(e.word, at);
                    text.clear();
                    let _ = write!(text, "{e}");
                }
            }
        }
        let _ = decode_all_for(target, &words);
    }
});
