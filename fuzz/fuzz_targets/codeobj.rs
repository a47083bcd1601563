//! The emulator's AMDHSA code-object loader on arbitrary bytes: parsing and building the loaded
//! image must return an error, never panic, overflow or allocate without bound.
#![no_main]

use aqueduct_kfd_emu::codeobj::CodeObject;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(co) = CodeObject::parse(data) {
        for k in &co.kernels {
            let _ = co.kernel(&k.name);
        }
        let _ = CodeObject::image(data, 0x7f00_0000_0000);
    }
});
