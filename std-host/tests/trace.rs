//! `aqueduct trace -o FILE`: the file is Trace Event Format JSON that Perfetto loads — every
//! event has ph/ts/dur/pid/tid, one named track per hardware queue used, slices on one track do
//! not overlap, and the metadata says what a slice measures.

mod common;

use std::process::{Command, Output};

use common::check_trace;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_aqueduct")).args(args).output().expect("run aqueduct")
}

#[test]
fn trace_writes_a_perfetto_json_with_one_track_per_queue() {
    let dir = std::env::temp_dir().join(format!("aqueduct-trace-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("trace.json");
    let o = run(&["trace", "--backend", "emu", "-o", file.to_str().unwrap()]);
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("trace: 14 slices on 4 hardware queues, all 3 checks passed"), "{out}");
    let tracks = check_trace(&file, 4);
    let names: Vec<&str> = tracks.values().flatten().map(|s| s.0.as_str()).collect();
    for want in ["copy host -> a (H2D)", "fill c with 0", "kernel aqueduct_vadd: c = a + b", "host function"] {
        assert!(names.contains(&want), "no slice {want:?}: {names:?}");
    }
    assert_eq!(names.iter().filter(|n| n.starts_with("graph launch")).count(), 3, "{names:?}");
    // The cross-stream wait ends no earlier than the uploads it waits for.
    let all: Vec<_> = tracks.values().flatten().collect();
    let upload_end = all.iter().filter(|s| s.0.contains("H2D")).map(|s| s.2).max().unwrap();
    let wait = all.iter().find(|s| s.0 == "wait for upload's event").unwrap();
    assert!(wait.2 >= upload_end, "the wait ended at {} before the upload at {upload_end}", wait.2);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn trace_without_output_is_refused_and_an_unwritable_path_fails() {
    let o = run(&["trace", "--backend", "emu"]);
    assert!(!o.status.success());
    let o = run(&["trace", "--backend", "emu", "-o", "/nonexistent/dir/trace.json"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot write /nonexistent/dir/trace.json"));
}
