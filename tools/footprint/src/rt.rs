//! The few start-up pieces a bare-metal binary needs, without extra crates: the reset vector,
//! `.data`/`.bss` initialisation, FPU enable and a panic handler. `Reset` calls `crate::run`.

use core::panic::PanicInfo;
use core::ptr;

extern "C" {
    static mut _sbss: u32;
    static mut _ebss: u32;
    static mut _sdata: u32;
    static mut _edata: u32;
    static _sidata: u32;
}

/// Cortex-M entry point (ENTRY in link.x, second word of the vector table).
///
/// # Safety
/// Called once by the hardware out of reset, with nothing else running.
#[no_mangle]
pub unsafe extern "C" fn Reset() -> ! {
    // SAFETY: the linker script defines these symbols around word-aligned RAM sections that
    // nothing uses yet; `.data`'s load image is `_edata - _sdata` bytes at `_sidata`.
    unsafe {
        let mut p = ptr::addr_of_mut!(_sbss);
        let end = ptr::addr_of_mut!(_ebss);
        while p < end {
            ptr::write_volatile(p, 0);
            p = p.add(1);
        }
        let mut d = ptr::addr_of_mut!(_sdata);
        let end = ptr::addr_of_mut!(_edata);
        let mut s = ptr::addr_of!(_sidata);
        while d < end {
            ptr::write_volatile(d, ptr::read(s));
            d = d.add(1);
            s = s.add(1);
        }
        // CPACR: full access to CP10/CP11 (the FPU); the hard-float ABI needs it.
        let cpacr = 0xE000_ED88 as *mut u32;
        ptr::write_volatile(cpacr, ptr::read_volatile(cpacr) | (0xF << 20));
    }
    crate::run()
}

/// The reset vector (the stack pointer word before it comes from link.x).
#[link_section = ".vector_table.reset_vector"]
#[no_mangle]
pub static __RESET_VECTOR: unsafe extern "C" fn() -> ! = Reset;

#[panic_handler]
fn panic(_: &PanicInfo) -> ! {
    loop {
        core::hint::spin_loop();
    }
}

/// Where the probe leaves its result, so the optimiser keeps the work that computed it.
pub fn report(value: u32) -> ! {
    static mut RESULT: u32 = 0;
    // SAFETY: single-threaded; a volatile store to a plain static.
    unsafe { ptr::write_volatile(ptr::addr_of_mut!(RESULT), value) };
    loop {
        core::hint::spin_loop();
    }
}
