//! The sysfs topology tree: CPU node plus a configurable number of GPU nodes (docs/kfd-aql.md §5).

use aqueduct_kfd_emu::topology::{parse_properties, TOPOLOGY_CLASS_ROOT, TOPOLOGY_ROOT};
use aqueduct_kfd_emu::{Emu, EmuConfig, Errno, GpuProfile};

fn read(emu: &Emu, path: &str) -> String {
    let mut buf = vec![0u8; 8192];
    let n = emu.read_sysfs(path, &mut buf).unwrap_or_else(|e| panic!("{path}: {e}"));
    String::from_utf8(buf[..n].to_vec()).unwrap()
}

fn prop(text: &str, key: &str) -> u64 {
    parse_properties(text).into_iter().find(|(k, _)| *k == key).unwrap_or_else(|| panic!("no {key}")).1
}

#[test]
fn multi_gpu_tree_reads_like_sysfs() {
    let profiles = [GpuProfile::Gfx90a, GpuProfile::Gfx942, GpuProfile::Gfx1100, GpuProfile::Gfx1100];
    let emu = Emu::new(EmuConfig::with_gpus(&profiles)).unwrap();
    let nodes = emu.list_sysfs(&format!("{TOPOLOGY_ROOT}/nodes")).unwrap();
    assert_eq!(nodes, ["0", "1", "2", "3", "4"]);
    // The /sys/class path reaches the same tree.
    assert_eq!(emu.list_sysfs(&format!("{TOPOLOGY_CLASS_ROOT}/nodes/")).unwrap(), nodes);
    assert_eq!(read(&emu, &format!("{TOPOLOGY_ROOT}/nodes/0/gpu_id")), "0\n");
    assert_eq!(prop(&read(&emu, &format!("{TOPOLOGY_ROOT}/nodes/0/properties")), "simd_count"), 0);
    let mut ids = std::collections::BTreeSet::new();
    let expect =
        [(90010, 416, 4, 64, 1, "gfx90a"), (90402, 1216, 4, 64, 8, "gfx942"), (110000, 192, 2, 32, 1, "gfx1100")];
    for (i, p) in profiles.iter().enumerate() {
        let dir = format!("{TOPOLOGY_ROOT}/nodes/{}", i + 1);
        let text = read(&emu, &format!("{dir}/properties"));
        let gpu_id: u32 = read(&emu, &format!("{dir}/gpu_id")).trim().parse().unwrap();
        assert!(gpu_id != 0 && gpu_id <= 0xffff);
        assert!(ids.insert(gpu_id), "gpu ids are distinct");
        assert_eq!(gpu_id, emu.gpus()[i].gpu_id);
        let e = expect[match p {
            GpuProfile::Gfx90a => 0,
            GpuProfile::Gfx942 => 1,
            GpuProfile::Gfx1100 => 2,
        }];
        assert_eq!(prop(&text, "gfx_target_version"), e.0);
        assert_eq!(prop(&text, "simd_count"), e.1);
        assert_eq!(prop(&text, "simd_per_cu"), e.2);
        assert_eq!(prop(&text, "wave_front_size"), e.3);
        assert_eq!(prop(&text, "num_xcc"), e.4);
        assert_eq!(read(&emu, &format!("{dir}/name")).trim(), e.5);
        assert_eq!(prop(&text, "vendor_id"), 4098);
        assert_eq!(prop(&text, "drm_render_minor"), 128 + i as u64);
        assert_eq!(prop(&text, "local_mem_size"), 0, "amdkfd prints 0; the size is in mem_banks");
        // Doorbell type 2 in capability bits 13:12.
        assert_eq!((prop(&text, "capability") >> 12) & 3, 2);
        let bank = read(&emu, &format!("{dir}/mem_banks/0/properties"));
        assert_eq!(prop(&bank, "heap_type"), 1);
        assert_eq!(prop(&bank, "size_in_bytes"), p.props().vram_bytes);
        // The render node opens.
        emu.open(&format!("/dev/dri/renderD{}", 128 + i), 0).unwrap();
    }
    assert_eq!(emu.read_sysfs(&format!("{TOPOLOGY_ROOT}/nodes/9/properties"), &mut [0; 8]), Err(Errno::ENOENT));
    assert_eq!(emu.read_sysfs(&format!("{TOPOLOGY_ROOT}/nodes"), &mut [0; 8]), Err(Errno::EISDIR));
    assert_eq!(emu.list_sysfs(&format!("{TOPOLOGY_ROOT}/generation_id")), Err(Errno::ENOTDIR));
    // A short buffer reads a prefix, as read(2) does.
    let mut small = [0u8; 4];
    assert_eq!(emu.read_sysfs(&format!("{TOPOLOGY_ROOT}/nodes/1/properties"), &mut small), Ok(4));
}

#[test]
fn gpu_count_is_configurable() {
    for n in [1usize, 2, 8] {
        let emu = Emu::new(EmuConfig::with_gpus(&vec![GpuProfile::Gfx942; n])).unwrap();
        assert_eq!(emu.gpus().len(), n);
        assert_eq!(emu.list_sysfs(&format!("{TOPOLOGY_ROOT}/nodes")).unwrap().len(), n + 1);
    }
}
