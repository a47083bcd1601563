//! Shared by the CLI tests: the trace-file checker and Debian package checks.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

/// Slices of one track: (name, start ns, end ns).
pub type Track = Vec<(String, i64, i64)>;
/// Tracks by (pid, tid).
pub type Tracks = BTreeMap<(u64, u64), Track>;

/// Fails (never skips) when a Debian package the test needs is missing.
pub fn require(package: &str, file: &str) {
    assert!(
        Path::new(file).exists(),
        "Debian package `{package}` is missing ({file} not found): apt-get install -y {package}"
    );
}

/// Checks a trace file; returns the slices per (pid, tid) track as (name, start ns, end ns).
pub fn check_trace(path: &Path, want_queues: usize) -> Tracks {
    let text = std::fs::read_to_string(path).expect("trace file");
    let v: Value = serde_json::from_str(&text).expect("trace is JSON");
    let events = v["traceEvents"].as_array().expect("traceEvents array");
    assert!(!events.is_empty());
    let slice_meaning = v["otherData"]["slice"].as_str().expect("otherData.slice says what a slice measures");
    assert!(slice_meaning.contains("end_ts"), "{slice_meaning}");
    let mut tracks: Tracks = BTreeMap::new();
    let mut named: BTreeSet<(u64, u64)> = BTreeSet::new();
    let mut processes: BTreeSet<u64> = BTreeSet::new();
    // µs with three decimals back to integer ns.
    let ns = |x: &Value| (x.as_f64().expect("number") * 1000.0).round() as i64;
    for e in events {
        for key in ["ph", "ts", "dur", "pid", "tid", "name"] {
            assert!(e.get(key).is_some(), "event lacks {key}: {e}");
        }
        let (pid, tid) = (e["pid"].as_u64().expect("pid"), e["tid"].as_u64().expect("tid"));
        match e["ph"].as_str().expect("ph") {
            "M" => match e["name"].as_str().unwrap() {
                "thread_name" => {
                    assert!(e["args"]["name"].as_str().unwrap().starts_with("hw queue "), "{e}");
                    named.insert((pid, tid));
                }
                "process_name" => {
                    processes.insert(pid);
                }
                _ => {}
            },
            "X" => {
                let (ts, dur) = (ns(&e["ts"]), ns(&e["dur"]));
                assert!(ts >= 0 && dur >= 0, "{e}");
                tracks.entry((pid, tid)).or_default().push((e["name"].as_str().unwrap().to_owned(), ts, ts + dur));
            }
            other => panic!("unexpected phase {other}: {e}"),
        }
    }
    assert_eq!(tracks.len(), want_queues, "one track per hardware queue used: {:?}", tracks.keys());
    for (track, slices) in &mut tracks {
        assert!(named.contains(track), "track {track:?} has no thread_name");
        assert!(processes.contains(&track.0), "pid {} has no process_name", track.0);
        slices.sort_by_key(|s| s.1);
        for w in slices.windows(2) {
            assert!(w[0].2 <= w[1].1, "slices overlap on track {track:?}: {:?} and {:?}", w[0], w[1]);
        }
    }
    tracks
}

/// The preload library beside the `aqueduct` binary (`target/<profile>/`), built first with
/// `cargo build -p aqueduct-kfd-preload` in the same profile so a test never runs a stale one.
pub fn preload_lib() -> std::path::PathBuf {
    static BUILT: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let exe = Path::new(env!("CARGO_BIN_EXE_aqueduct"));
            let profile = exe.parent().expect("target/<profile>");
            let mut c = std::process::Command::new(env!("CARGO"));
            c.args(["build", "-q", "-p", "aqueduct-kfd-preload"]).current_dir(env!("CARGO_MANIFEST_DIR"));
            if profile.file_name().is_some_and(|n| n == "release") {
                c.arg("--release");
            }
            let out = c.output().expect("cargo build");
            assert!(out.status.success(), "building the preload failed:\n{}", String::from_utf8_lossy(&out.stderr));
            let lib = profile.join("libaqueduct_kfd_preload.so");
            assert!(lib.is_file(), "{} not built", lib.display());
            lib
        })
        .clone()
}

/// Runs `aqueduct run -- aqueduct ARGS` (the tool itself on the emulated gfx90a through the
/// preload), killing it after `timeout`; returns (success, stdout, stderr).
pub fn aqueduct_on_emulator(args: &[&str], timeout: std::time::Duration) -> (bool, String, String) {
    let exe = env!("CARGO_BIN_EXE_aqueduct");
    let mut c = std::process::Command::new(exe);
    c.args(["run", "--gpu", "gfx90a", "--", exe]).args(args).env("AQUEDUCT_PRELOAD_LIB", preload_lib());
    c.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    let mut child = c.spawn().expect("spawn aqueduct run");
    let start = std::time::Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "aqueduct {args:?} under the preload hung for {timeout:?}\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("output");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The Debian packages of ROCm 5.2 these tests run (each missing one fails the test by name).
pub fn require_rocm_packages() {
    require("libhsa-runtime-dev", "/usr/include/hsa/hsa.h");
    require("libhsa-runtime64-1", "/usr/lib/x86_64-linux-gnu/libhsa-runtime64.so.1");
    require("rocminfo", "/usr/bin/rocminfo");
    require("libamdhip64-dev", "/usr/include/hip/hip_runtime_api.h");
}
