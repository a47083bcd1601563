//! The `aqueduct` subcommands, run as a user would (on this machine: the emulated GPU).

use std::process::{Command, Output};

fn aqueduct(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_aqueduct")).args(args).output().expect("run aqueduct")
}

fn gpu_present() -> bool {
    std::path::Path::new("/dev/kfd").exists()
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
    if gpu_present() {
        assert!(out.contains("auto selects `kfd`"), "{out}");
        assert!(out.contains("kfd: kfd-direct on /dev/kfd (kernel bypass) — available"), "{out}");
    } else {
        assert!(out.contains("auto selects `emu`"), "{out}");
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
        "kernel axpy_u32 (code object, machine code)",
        "host function",
        "graph launch x100",
        "queue ",
        "checks passed",
    ] {
        assert!(out.contains(want), "demo output lacks {want:?}:\n{out}");
    }
}

/// The default device: the real GPU where there is one, the emulator otherwise.
#[test]
fn demo_by_default_runs_on_the_real_gpu_or_falls_back_to_the_emulator() {
    let o = aqueduct(&["demo"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("checks passed"), "{out}");
    if gpu_present() {
        assert!(out.contains("backend `kfd`"), "{out}");
        assert!(!out.contains("(not used:"), "{out}");
        return;
    }
    assert!(out.contains("backend `emu`"), "{out}");
    assert!(out.contains("(not used: kfd: /dev/kfd does not exist"), "{out}");
    assert!(out.contains("(not used: rocr:"), "{out}");
}

#[test]
fn bench_json_has_every_figure_with_its_floor_the_backend_and_the_device() {
    let o = aqueduct(&["bench", "--short", "--json", "--backend", "emu"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v["backend"], "emu", "the backend actually selected: {v}");
    assert_eq!(v["device"]["gfx"], "gfx90a", "{v}");
    assert_eq!(v["device"]["gfx_target_version"], 90010, "{v}");
    assert_eq!(v["device"]["cu_count"], 104, "{v}");
    let floors = v["floors"].as_object().unwrap_or_else(|| panic!("no floors: {v}"));
    for name in ["packet", "live_packet", "copy", "copy_100", "pingpong"] {
        let ns = floors.get(name).and_then(serde_json::Value::as_f64).unwrap_or_else(|| panic!("{name}: {v}"));
        assert!(ns > 0.0 && ns.is_finite(), "floor {name}: {ns}");
    }
    let figures = v["figures"].as_array().unwrap_or_else(|| panic!("no figures: {v}"));
    for (name, floor) in [
        ("enqueue_dispatch", Some("live_packet")),
        ("graph_launch_per_node_1000", Some("copy")),
        ("capture_instantiate_per_node", Some("copy_100")),
        ("stream_create_destroy", None),
        ("validate_handle_1", None),
        ("validate_handle_1024", Some("validate_handle_1")),
        ("roundtrip_emulated", Some("pingpong")),
        ("event_record_sync", Some("pingpong")),
    ] {
        let f = figures.iter().find(|f| f["name"] == name).unwrap_or_else(|| panic!("{name} missing: {v}"));
        let ns = f["ns"].as_f64().unwrap_or_else(|| panic!("{f}"));
        assert!(ns > 0.0 && ns.is_finite(), "{f}");
        match floor {
            Some(name) => {
                assert_eq!(f["floor"], name, "{f}");
                let floor_ns = f["floor_ns"].as_f64().unwrap_or_else(|| panic!("{f}"));
                if let Some(listed) = floors.get(name) {
                    assert_eq!(listed.as_f64(), Some(floor_ns), "a figure's floor is the listed floor: {f}");
                }
                assert!(f["ratio"].as_f64().is_some(), "{f}");
            }
            None => assert!(f["floor"].is_null() && f["floor_ns"].is_null() && f["ratio"].is_null(), "{f}"),
        }
    }
}

#[test]
fn bench_table_is_readable() {
    let o = aqueduct(&["bench", "--short", "--backend", "auto", "--samples", "1"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("figure") && out.contains("ratio") && out.contains("enqueue_dispatch"), "{out}");
    assert!(out.contains("floors:") && out.contains("pingpong"), "{out}");
    // The header names the backend `auto` selected, never `auto` itself, and the device.
    assert!(!out.contains("bench on `auto`") && out.contains(", device 0 (gfx"), "{out}");
}

#[test]
fn an_unknown_backend_is_refused() {
    let o = aqueduct(&["demo", "--backend", "cuda"]);
    assert!(!o.status.success());
    assert!(text(&o).1.contains("unknown backend"));
}
