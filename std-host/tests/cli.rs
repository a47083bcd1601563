//! The `aqueduct` subcommands, run as a user would (on this machine: the emulated GPU).

use std::process::{Command, Output};

fn aqueduct(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_aqueduct")).args(args).output().expect("run aqueduct")
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn info_lists_every_backend_and_the_emulated_device() {
    let o = aqueduct(&["info"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    for want in ["kfd:", "rocr:", "emu:", "device 0: gfx90a", "compute units        104", "auto selects"] {
        assert!(out.contains(want), "info lacks {want:?}:\n{out}");
    }
    if !std::path::Path::new("/dev/kfd").exists() {
        assert!(out.contains("/dev/kfd does not exist"), "{out}");
    }
}

#[test]
fn demo_runs_and_checks_everything_on_the_emulator() {
    let o = aqueduct(&["demo", "--backend", "emu"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    for want in [
        "backend `emu`",
        "kernel iota_u32 (host twin)",
        "kernel axpy_u32 (code object)",
        "host function",
        "graph launch x100",
        "queue ",
        "checks passed",
    ] {
        assert!(out.contains(want), "demo output lacks {want:?}:\n{out}");
    }
}

#[test]
fn demo_by_default_falls_back_to_the_emulator_without_a_gpu() {
    if std::path::Path::new("/dev/kfd").exists() {
        return;
    }
    let o = aqueduct(&["demo"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("backend `emu`"), "{out}");
    assert!(out.contains("(not used: kfd: /dev/kfd does not exist"), "{out}");
    assert!(out.contains("(not used: rocr:"), "{out}");
}

#[test]
fn bench_json_has_every_figure_with_its_floor() {
    let o = aqueduct(&["bench", "--short", "--json", "--backend", "emu"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    let line = out.trim();
    assert!(line.starts_with("{\"figures\":[") && line.ends_with("]}"), "{line}");
    for (name, floor) in [
        ("enqueue_dispatch", Some("packet")),
        ("graph_launch_per_node_1000", Some("copy")),
        ("capture_instantiate_per_node", None),
        ("stream_create_destroy", None),
        ("validate_handle_1", None),
        ("validate_handle_1024", None),
        ("roundtrip_emulated", Some("pingpong")),
        ("event_record_sync", Some("pingpong")),
    ] {
        let at = line.find(&format!("{{\"name\":\"{name}\",")).unwrap_or_else(|| panic!("{name} missing: {line}"));
        let obj = &line[at..at + line[at..].find('}').unwrap()];
        for key in ["\"ns\":", "\"floor\":", "\"floor_ns\":", "\"ratio\":"] {
            assert!(obj.contains(key), "{obj} lacks {key}");
        }
        if let Some(f) = floor {
            assert!(obj.contains(&format!("\"floor\":\"{f}\"")), "{obj}");
        }
        let ns: f64 = obj.split("\"ns\":").nth(1).unwrap().split(',').next().unwrap().parse().unwrap();
        assert!(ns > 0.0 && ns.is_finite(), "{obj}");
    }
}

#[test]
fn bench_table_is_readable() {
    let o = aqueduct(&["bench", "--short", "--backend", "emu", "--samples", "1"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("figure") && out.contains("ratio") && out.contains("enqueue_dispatch"), "{out}");
}

#[test]
fn an_unknown_backend_is_refused() {
    let o = aqueduct(&["demo", "--backend", "cuda"]);
    assert!(!o.status.success());
    assert!(text(&o).1.contains("unknown backend"));
}
