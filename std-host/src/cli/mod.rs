//! The subcommands of the `aqueduct` tool, as library functions the binary and the tests call.

pub mod bench;
mod bench_cond;
pub mod bench_hip;
mod bench_isa;
mod bench_pool;
pub mod demo;
pub mod info;
pub mod trace;

/// The gfx name of a `gfx_target_version` (e.g. 90010 → `gfx90a`).
pub fn gfx_name(v: u32) -> String {
    let (major, minor, step) = (v / 10000, (v / 100) % 100, v % 100);
    format!("gfx{major}{minor:x}{step:x}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn gfx_names() {
        assert_eq!(super::gfx_name(90010), "gfx90a");
        assert_eq!(super::gfx_name(90402), "gfx942");
        assert_eq!(super::gfx_name(110000), "gfx1100");
    }
}
