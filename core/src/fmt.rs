//! The logging shim: `trace!`, `debug!` and `warn!` forward to `defmt` when the `defmt` feature is
//! on and compile to nothing otherwise (arguments are still type-checked, never evaluated).

#[cfg(feature = "defmt")]
#[allow(unused_macros)]
macro_rules! trace {
    ($($arg:tt)*) => { ::defmt::trace!($($arg)*) };
}
#[cfg(not(feature = "defmt"))]
#[allow(unused_macros)]
macro_rules! trace {
    ($($arg:tt)*) => {{
        if false {
            let _ = ($($arg)*);
        }
    }};
}

#[cfg(feature = "defmt")]
#[allow(unused_macros)]
macro_rules! debug {
    ($($arg:tt)*) => { ::defmt::debug!($($arg)*) };
}
#[cfg(not(feature = "defmt"))]
#[allow(unused_macros)]
macro_rules! debug {
    ($($arg:tt)*) => {{
        if false {
            let _ = ($($arg)*);
        }
    }};
}

#[cfg(feature = "defmt")]
#[allow(unused_macros)]
macro_rules! warn {
    ($($arg:tt)*) => { ::defmt::warn!($($arg)*) };
}
#[cfg(not(feature = "defmt"))]
#[allow(unused_macros)]
macro_rules! warn {
    ($($arg:tt)*) => {{
        if false {
            let _ = ($($arg)*);
        }
    }};
}
