//! The code-object reader (`amdhsa`) on arbitrary bytes — as an ELF file, as a placed image and
//! as an offload bundle: every reader returns an error, never panics, overflows or loops
//! without bound.
#![no_main]

use amdhsa::bundle::{extent, Bundle, Bundles};
use amdhsa::CodeObject;
use libfuzzer_sys::fuzz_target;

fn exercise(co: &CodeObject<'_>) {
    if let Ok(kernels) = co.kernels() {
        for k in kernels.flatten().take(64) {
            let _ = co.kernel(k.name);
            let _ = co.bytes_at(k.entry_address(), 64);
        }
    }
    if let Ok(vars) = co.variables() {
        vars.take(64).for_each(drop);
    }
    if let Ok(Some(m)) = co.metadata() {
        for k in m.kernels().take(64) {
            k.args().for_each(drop);
            let _ = m.kernel(k.name);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(co) = CodeObject::parse(data) {
        exercise(&co);
        // Bounded: parse refuses images over 1 GiB, and the fuzzer's inputs are small.
        if co.image_size() <= 1 << 24 {
            let mut image = vec![0u8; co.image_size() as usize];
            if co.place(&mut image, 0x7f00_0000_0000).is_ok() {
                if let Ok(placed) = CodeObject::from_image(&image) {
                    exercise(&placed);
                }
            }
        }
    }
    if let Ok(co) = CodeObject::from_image(data) {
        exercise(&co);
    }
    let _ = amdhsa::elf::extent(|o, l| data.get(o..o.checked_add(l)?));
    let _ = extent(|o, l| data.get(o..o.checked_add(l)?));
    if let Ok(b) = Bundle::parse(data) {
        for e in b.entries() {
            let _ = e.target();
        }
    }
    for b in Bundles::new(data).take(16) {
        let _ = b.map(|b| b.len());
    }
});
