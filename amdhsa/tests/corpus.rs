//! The crate against code objects nobody here wrote the bytes of: the repository's clang-15
//! objects, HIP programs built by Debian's `hipcc` for the purpose (300 kernels, a
//! 300-character name, variables, a stack, dynamic LDS, two bundles in one `.hip_fatbin`), a
//! rocPRIM program, and the gfx90a code objects Debian ships in `librocrand1` and
//! `librocsparse0`. Every kernel is listed, found by name in the file and in a placed image,
//! and its descriptor decoded; descriptor and metadata agree with `llvm-readelf-15 --notes` and
//! with the `.kd` symbol's bytes as the `object` crate's own ELF reader finds them.
//!
//! The tools and packages come with `scripts/test`; a missing one fails the test with the
//! package to install.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use amdhsa::bundle::Bundles;
use amdhsa::{CodeObject, Processor, TargetId, ValueKind};
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A tool on PATH, or a failure naming the Debian package.
fn tool(name: &str, package: &str) -> PathBuf {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(name))
        .find(|p| p.is_file());
    found.unwrap_or_else(|| panic!("`{name}` is missing: install the Debian package {package} (scripts/test does)"))
}

fn file(path: &str, package: &str) -> Vec<u8> {
    std::fs::read(path)
        .unwrap_or_else(|e| panic!("{path}: {e} — install the Debian package {package} (scripts/test does)"))
}

fn run(cmd: &mut Command) -> Vec<u8> {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

/// Builds a HIP program with hipcc into the test's scratch directory, once per source.
fn hipcc(name: &str, sources: &[(&str, String)]) -> Vec<u8> {
    let hipcc = tool("hipcc", "hipcc");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("amdhsa-{name}"));
    std::fs::create_dir_all(&dir).unwrap();
    let stamp: String = sources.iter().map(|(n, s)| format!("{n}\n{s}")).collect();
    let exe = dir.join(name);
    if std::fs::read_to_string(dir.join("stamp")).ok().as_deref() != Some(&stamp) || !exe.exists() {
        let mut cmd = Command::new(hipcc);
        cmd.args(["-std=c++17", "--offload-arch=gfx90a", "-O2", "-o"]).arg(&exe);
        for (n, s) in sources {
            std::fs::write(dir.join(n), s).unwrap();
            cmd.arg(dir.join(n));
        }
        run(&mut cmd);
        std::fs::write(dir.join("stamp"), &stamp).unwrap();
    }
    std::fs::read(exe).unwrap()
}

/// The `.hip_fatbin` section of a host ELF.
fn hip_fatbin(host: &[u8]) -> &[u8] {
    let f = object::File::parse(host).expect("a host ELF");
    let s = f.section_by_name(".hip_fatbin").expect("a .hip_fatbin section");
    let (off, size) = s.file_range().expect("in the file");
    &host[off as usize..(off + size) as usize]
}

/// The gfx90a code objects of every bundle of a `.hip_fatbin` section, and the bundle count.
fn gfx90a_objects(section: &[u8]) -> (Vec<(String, &[u8])>, usize) {
    let mut out = Vec::new();
    let mut bundles = 0;
    for b in Bundles::new(section) {
        let b = b.expect("every bundle parses");
        bundles += 1;
        for e in b.entries() {
            if e.target().is_some_and(|t| t.processor.name == "gfx90a") {
                out.push((e.id.to_owned(), e.code));
            }
        }
    }
    (out, bundles)
}

/// One kernel of `llvm-readelf-15 --notes`' YAML.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct YamlKernel {
    fields: BTreeMap<String, String>,
    args: Vec<BTreeMap<String, String>>,
}

/// The kernels `llvm-readelf-15 --notes` prints for `code`.
fn readelf_kernels(code: &[u8], scratch: &Path) -> Vec<YamlKernel> {
    std::fs::write(scratch, code).unwrap();
    let out = run(Command::new(tool("llvm-readelf-15", "llvm-15")).arg("--notes").arg(scratch));
    let text = String::from_utf8_lossy(&out);
    let mut kernels: Vec<YamlKernel> = Vec::new();
    let mut in_kernels = false;
    for line in text.lines() {
        if line.starts_with("amdhsa.") {
            in_kernels = line.starts_with("amdhsa.kernels:");
            continue;
        }
        if !in_kernels {
            continue;
        }
        let (indent, body) = if let Some(rest) = line.strip_prefix("  - ") {
            kernels.push(YamlKernel::default());
            (4, rest)
        } else if let Some(rest) = line.strip_prefix("      - ").filter(|r| r.starts_with('.')) {
            if let Some(k) = kernels.last_mut() {
                k.args.push(BTreeMap::new());
            }
            (8, rest)
        } else {
            (line.len() - line.trim_start().len(), line.trim_start())
        };
        let Some((key, value)) = body.split_once(':') else { continue };
        let value = value.trim().trim_matches('\'').to_owned();
        let Some(k) = kernels.last_mut() else { continue };
        match indent {
            4 => {
                k.fields.insert(key.to_owned(), value);
            }
            8 => {
                if let Some(a) = k.args.last_mut() {
                    a.insert(key.to_owned(), value);
                }
            }
            _ => {}
        }
    }
    kernels
}

/// Everything the crate says about one code object, checked; returns its kernel count.
fn check(code: &[u8], readelf: Option<&Path>) -> usize {
    let co = CodeObject::parse(code).expect("the code object parses");
    let meta = co.metadata().expect("the note parses").expect("a metadata note");
    let kernels: Vec<_> = co.kernels().expect("symbols").map(|k| k.expect("a descriptor")).collect();
    assert_eq!(kernels.len(), meta.len(), "one descriptor per metadata entry");

    // The object crate's own reader: the .kd symbols' bytes, through the section headers.
    let f = object::File::parse(code).unwrap();
    let mut kd_bytes = BTreeMap::new();
    for s in f.dynamic_symbols() {
        if let Some(name) = s.name().ok().and_then(|n| n.strip_suffix(".kd")) {
            let sec = f.section_by_index(s.section_index().unwrap()).unwrap();
            let data = sec.data().unwrap();
            let at = (s.address() - sec.address()) as usize;
            kd_bytes.insert(name.to_owned(), data[at..at + 64].to_vec());
        }
    }
    assert_eq!(kd_bytes.len(), kernels.len());

    for k in &kernels {
        let by_name = co.kernel(k.name).unwrap().expect("found by name through the hash table");
        assert_eq!(&by_name, k);
        assert_eq!(kd_bytes[k.name], k.descriptor.to_bytes(), "{}: descriptor bytes", k.name);
        let m = meta.kernel(k.name).unwrap_or_else(|| panic!("{}: a metadata entry", k.name));
        let d = &k.descriptor;
        assert_eq!(d.group_segment_fixed_size, m.group_segment_fixed_size, "{}", k.name);
        assert_eq!(d.private_segment_fixed_size, m.private_segment_fixed_size, "{}", k.name);
        assert_eq!(d.kernarg_size, m.kernarg_segment_size, "{}", k.name);
        assert_eq!(d.uses_dynamic_stack(), m.uses_dynamic_stack, "{}", k.name);
        assert_eq!(if d.wave32() { 32 } else { 64 }, m.wavefront_size, "{}", k.name);
        // Granulated register counts cover what the metadata counts (on gfx90a `.vgpr_count` is
        // the unified VGPR + AGPR count), within one granule.
        let (vgprs, want) = (d.vgprs(true), m.vgpr_count.max(1));
        assert!(vgprs >= want && vgprs < want + 8, "{}: {vgprs} VGPRs for {want}", k.name);
        assert!(d.sgprs() >= m.sgpr_count, "{}: {} SGPRs for {}", k.name, d.sgprs(), m.sgpr_count);
        assert!(d.rsrc2.user_sgpr_count() >= d.enabled_user_sgprs(), "{}: user SGPRs", k.name);
        assert!(d.entry_offset_ok(), "{}: entry", k.name);
        // Hidden arguments start at the 8-aligned end of the explicit ones and lie inside the
        // segment; a launch fills them there.
        let explicit_end = m.explicit_args().map(|a| a.end()).max().unwrap_or(0);
        let mut hidden = m.hidden_args().peekable();
        if let Some(first) = hidden.peek() {
            assert_eq!(first.offset, explicit_end.next_multiple_of(8), "{}: hidden block start", k.name);
        }
        let mut seg = vec![0u8; m.kernarg_bytes() as usize];
        let v = amdhsa::LaunchValues { grid: [256, 1, 1], workgroup: [64, 1, 1], dims: 3, ..Default::default() };
        amdhsa::hidden::fill(&mut seg, hidden.map(amdhsa::HiddenArg::from), &v).expect("hidden args fit");
    }

    // Variables agree with the object crate's reading.
    let ours: BTreeMap<String, (u64, u64)> =
        co.variables().unwrap().map(|s| (s.name.to_owned(), (s.value, s.size))).collect();
    let theirs: BTreeMap<String, (u64, u64)> = f
        .dynamic_symbols()
        .filter(|s| s.kind() == object::SymbolKind::Data && !s.is_undefined())
        .filter_map(|s| Some((s.name().ok()?.to_owned(), (s.address(), s.size()))))
        .filter(|(n, _)| !n.ends_with(".kd"))
        .collect();
    assert_eq!(ours, theirs, "variables");
    // Writable variables (written by kernels and copies) lie past the tables a loader reads in
    // place; what lies inside them is read-only data (constants).
    for (name, (value, _)) in &ours {
        if *value < co.tables_end() {
            let seg = f.segments().find(|g| g.address() <= *value && *value < g.address() + g.size());
            let flags = seg.map(|g| g.flags());
            let writable =
                matches!(flags, Some(object::SegmentFlags::Elf { p_flags }) if p_flags & object::elf::PF_W != 0);
            assert!(!writable, "{name} at {value:#x} is writable inside the tables (end {:#x})", co.tables_end());
        }
    }

    // The placed image describes itself: same kernels, same metadata, found without the file.
    let mut image = vec![0u8; co.image_size() as usize];
    co.place(&mut image, 0x7f00_0000_0000).expect("placed");
    let placed = CodeObject::from_image(&image[..co.tables_end() as usize]).expect("the image's tables read");
    for k in &kernels {
        assert_eq!(placed.kernel(k.name).unwrap().as_ref(), Some(k));
    }
    assert_eq!(placed.metadata().unwrap().unwrap().len(), meta.len());

    if let Some(scratch) = readelf {
        let yaml = readelf_kernels(code, scratch);
        assert_eq!(yaml.len(), meta.len(), "readelf lists as many kernels");
        for (y, m) in yaml.iter().zip(meta.kernels()) {
            let num = |key: &str| y.fields.get(key).map(|v| v.parse::<u32>().unwrap());
            assert_eq!(y.fields.get(".name").map(String::as_str), Some(m.name));
            assert_eq!(y.fields.get(".symbol").map(String::as_str), Some(m.symbol));
            assert_eq!(num(".kernarg_segment_size"), Some(m.kernarg_segment_size), "{}", m.name);
            assert_eq!(num(".kernarg_segment_align"), Some(m.kernarg_segment_align), "{}", m.name);
            assert_eq!(num(".group_segment_fixed_size"), Some(m.group_segment_fixed_size), "{}", m.name);
            assert_eq!(num(".private_segment_fixed_size"), Some(m.private_segment_fixed_size), "{}", m.name);
            assert_eq!(num(".sgpr_count"), Some(m.sgpr_count), "{}", m.name);
            assert_eq!(num(".vgpr_count"), Some(m.vgpr_count), "{}", m.name);
            assert_eq!(num(".agpr_count").unwrap_or(0), m.agpr_count, "{}", m.name);
            assert_eq!(num(".max_flat_workgroup_size"), Some(m.max_flat_workgroup_size), "{}", m.name);
            assert_eq!(num(".wavefront_size"), Some(m.wavefront_size), "{}", m.name);
            let dynamic = y.fields.get(".uses_dynamic_stack").map(|v| v == "true");
            assert_eq!(dynamic.unwrap_or(false), m.uses_dynamic_stack, "{}", m.name);
            let args: Vec<(u32, u32, String)> = y
                .args
                .iter()
                .map(|a| (a[".offset"].parse().unwrap(), a[".size"].parse().unwrap(), a[".value_kind"].clone()))
                .collect();
            let ours: Vec<(u32, u32, String)> = m.args().map(|a| (a.offset, a.size, a.value_kind.to_owned())).collect();
            assert_eq!(args, ours, "{}: arguments", m.name);
            for a in m.args() {
                assert_ne!(a.kind, ValueKind::Other, "{}: unknown value kind {}", m.name, a.value_kind);
            }
        }
    }
    kernels.len()
}

trait EntryOk {
    fn entry_offset_ok(&self) -> bool;
}

impl EntryOk for amdhsa::KernelDescriptor {
    /// The entry point is 256-byte aligned relative to a 64-byte aligned descriptor.
    fn entry_offset_ok(&self) -> bool {
        self.kernel_code_entry_byte_offset % 64 == 0
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("amdhsa-readelf");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

#[test]
fn repository_code_objects() {
    let mut n = 0;
    for dir in ["kfd-direct/emu/fixtures", "std-host/kernels", "kfd-direct/blit"] {
        for e in std::fs::read_dir(repo().join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "co") {
                let code = std::fs::read(&p).unwrap();
                let co = CodeObject::parse(&code).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                let gfx90a = co.target().processor.name == "gfx90a";
                let readelf = gfx90a.then(|| scratch("repo.co"));
                n += check(&code, readelf.as_deref());
            }
        }
    }
    assert!(n > 0);
    // Renaming the note's owner hides the metadata; the kernels stay readable.
    let mut elf = std::fs::read(repo().join("kfd-direct/emu/fixtures/kernels-gfx90a.co")).unwrap();
    let at = elf.windows(7).position(|w| w == b"AMDGPU\0").unwrap();
    elf[at] = b'X';
    let co = CodeObject::parse(&elf).unwrap();
    assert_eq!(co.metadata().unwrap(), None);
    assert_eq!(co.kernels().unwrap().count(), 2);
}

#[test]
fn purpose_built_hip_program() {
    let long = format!("k{}", "x".repeat(299));
    let mut a =
        String::from("#include <hip/hip_runtime.h>\n__device__ int var_a[64];\n__constant__ float table[16];\n");
    for i in 0..300 {
        a += &format!("__global__ void many_{i}(int* p) {{ p[threadIdx.x] = {i}; }}\n");
    }
    a +=
        &format!("extern \"C\" __global__ void {long}(int* p) {{ p[threadIdx.x] = var_a[threadIdx.x] + table[1]; }}\n");
    a += "__device__ __attribute__((noinline)) int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }\n\
          extern \"C\" __global__ void recursive(int* p) { p[threadIdx.x] = fib(p[threadIdx.x]); }\n\
          extern \"C\" __global__ void local_array(int* p, int i) { int a[64]; for (int j = 0; j < 64; j++) a[j] = p[j] * i;\n\
          p[threadIdx.x] = a[(i + threadIdx.x) & 63]; }\n\
          extern \"C\" __global__ void dyn_lds(float* p) { extern __shared__ float dyn[]; dyn[threadIdx.x] = p[threadIdx.x];\n\
          __syncthreads(); p[threadIdx.x] = dyn[blockDim.x - 1 - threadIdx.x]; }\n\
          int main() { return 0; }\n";
    let b = "#include <hip/hip_runtime.h>\nextern \"C\" __global__ void other_unit(int* p) { p[threadIdx.x] = 7; }\n";
    let host = hipcc("purpose", &[("a.hip", a), ("b.hip", b.to_owned())]);
    let (objects, bundles) = gfx90a_objects(hip_fatbin(&host));
    assert_eq!(bundles, 2, "one bundle per translation unit");
    assert_eq!(objects.len(), 2);
    let mut total = 0;
    for (_, code) in &objects {
        total += check(code, Some(&scratch("purpose.co")));
    }
    assert_eq!(total, 300 + 4 + 1);
    let a =
        objects.iter().map(|(_, c)| CodeObject::parse(c).unwrap()).find(|c| c.kernel("recursive").unwrap().is_some());
    let a = a.expect("translation unit a");
    let k = |n: &str| a.kernel(n).unwrap().unwrap_or_else(|| panic!("{n}"));
    assert_eq!(k(&long).name.len(), 300);
    assert!(k("recursive").descriptor.uses_dynamic_stack());
    assert!(k("local_array").descriptor.private_segment_fixed_size >= 256);
    assert!(k("local_array").descriptor.uses_scratch());
    assert_eq!(k("dyn_lds").descriptor.group_segment_fixed_size, 0, "dynamic LDS comes from the packet");
    let vars: BTreeMap<&str, u64> = a.variables().unwrap().map(|s| (s.name, s.size)).collect();
    assert_eq!(vars.get("var_a"), Some(&256));
    assert_eq!(vars.get("table"), Some(&64));
}

#[test]
fn rocprim_program() {
    let src = std::fs::read_to_string(repo().join("examples/hip/rocprim_sort.hip")).unwrap();
    assert!(Path::new("/usr/include/rocprim/rocprim.hpp").exists(), "install the Debian package librocprim-dev");
    let host = hipcc("rocprim", &[("rocprim_sort.hip", src)]);
    let (objects, _) = gfx90a_objects(hip_fatbin(&host));
    let n: usize = objects.iter().map(|(_, c)| check(c, Some(&scratch("rocprim.co")))).sum();
    assert!(n > 32, "rocPRIM's radix sort has more kernels than the old 32-kernel cap: {n}");
}

#[test]
fn debian_rocrand() {
    let lib = file("/usr/lib/x86_64-linux-gnu/librocrand.so.1", "librocrand1");
    let (objects, _) = gfx90a_objects(hip_fatbin(&lib));
    assert!(!objects.is_empty(), "rocRAND ships gfx90a code");
    let dev = TargetId::device(Processor::from_name("gfx90a").unwrap(), false);
    assert!(objects.iter().any(|(id, _)| TargetId::parse(id.trim_start_matches("hipv4-")).unwrap().runs_on(&dev)));
    let mut total = 0;
    for (id, code) in &objects {
        let n = check(code, Some(&scratch("rocrand.co")));
        total += n;
        let longest = CodeObject::parse(code).unwrap().kernels().unwrap().map(|k| k.unwrap().name.len()).max();
        assert!(longest.unwrap() > 64, "{id}: names beyond the old 64-character cap");
    }
    assert!(total >= 160, "{total} kernels");
}

#[test]
fn debian_rocsparse() {
    let lib = file("/usr/lib/x86_64-linux-gnu/librocsparse.so.0", "librocsparse0");
    let (objects, bundles) = gfx90a_objects(hip_fatbin(&lib));
    assert!(bundles > 100, "one bundle per translation unit: {bundles}");
    let mut total = 0;
    for (i, (_, code)) in objects.iter().enumerate() {
        // llvm-readelf is slow on the largest notes: every object is checked by this crate and
        // the object crate, and every eighth one against llvm-readelf too.
        let readelf = (i % 8 == 0).then(|| scratch("rocsparse.co"));
        total += check(code, readelf.as_deref());
    }
    assert!(total > 10_000, "{total} kernels");
}

#[test]
fn processor_table_agrees_with_clang() {
    let clang = tool("clang-15", "clang-15");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("amdhsa-mach");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("k.cl");
    std::fs::write(&src, "kernel void k(global int* p) { p[0] = 1; }\n").unwrap();
    let mut checked = 0;
    for p in amdhsa::target::PROCESSORS {
        let out = dir.join(format!("{}.co", p.name));
        let status = Command::new(&clang)
            .args(["-x", "cl", "-target", "amdgcn-amd-amdhsa", &format!("-mcpu={}", p.name), "-nogpulib", "-o"])
            .arg(&out)
            .arg(&src)
            .output()
            .unwrap();
        if !status.status.success() {
            // clang-15 predates gfx941/gfx942: only those may be unknown to it.
            assert!(["gfx941", "gfx942"].contains(&p.name), "clang-15 refuses {}", p.name);
            continue;
        }
        let code = std::fs::read(&out).unwrap();
        let co = CodeObject::parse(&code).unwrap();
        assert_eq!(co.target().processor, *p, "{}", p.name);
        checked += 1;
    }
    assert!(checked >= 35);
}
