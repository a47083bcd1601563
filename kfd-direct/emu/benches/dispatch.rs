//! Benchmarks of the emulated command processor (filled in below).

fn main() {}
