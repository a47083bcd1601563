//! Shared helpers of the LLVM comparison tests: tool lookup, a minimal ELF and offload-bundle
//! reader, `llvm-objdump-15` output parsing and the line-by-line comparison with coverage.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::Command;

use aqueduct_isa::{decode_for, Ext, Op, Program, Target};

/// Returns the path of `tool`, or panics naming the Debian package that provides it.
pub fn tool(tool: &str, package: &str) -> PathBuf {
    let found = std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|p| p.join(tool)).find(|p| p.is_file()));
    match found {
        Some(p) => p,
        None => panic!("`{tool}` not found: install the Debian package `{package}`"),
    }
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

fn u16le(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}
fn u32le(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}
fn u64le(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

/// A section of an ELF64 file: (file offset, size, address).
pub struct Section {
    pub offset: u64,
    pub size: u64,
    pub addr: u64,
}

/// Finds a section by name, reading only the headers (works on very large files).
pub fn find_section(file: &mut File, name: &str) -> Option<Section> {
    let mut eh = [0u8; 64];
    file.seek(SeekFrom::Start(0)).ok()?;
    file.read_exact(&mut eh).ok()?;
    if &eh[..4] != b"\x7fELF" || eh[4] != 2 {
        return None;
    }
    let shoff = u64le(&eh, 0x28);
    let shentsize = u16le(&eh, 0x3a) as u64;
    let shnum = u16le(&eh, 0x3c) as u64;
    let shstrndx = u16le(&eh, 0x3e) as u64;
    let mut sh = vec![0u8; (shentsize * shnum) as usize];
    file.seek(SeekFrom::Start(shoff)).ok()?;
    file.read_exact(&mut sh).ok()?;
    let hdr = |i: u64| &sh[(i * shentsize) as usize..((i + 1) * shentsize) as usize];
    let strtab = hdr(shstrndx);
    let (str_off, str_size) = (u64le(strtab, 0x18), u64le(strtab, 0x20));
    let mut names = vec![0u8; str_size as usize];
    file.seek(SeekFrom::Start(str_off)).ok()?;
    file.read_exact(&mut names).ok()?;
    for i in 0..shnum {
        let h = hdr(i);
        let n = u32le(h, 0) as usize;
        let end = names[n..].iter().position(|&c| c == 0).map_or(names.len(), |e| n + e);
        if &names[n..end] == name.as_bytes() {
            return Some(Section { addr: u64le(h, 0x10), offset: u64le(h, 0x18), size: u64le(h, 0x20) });
        }
    }
    None
}

pub fn read_at(file: &mut File, offset: u64, size: u64) -> Vec<u8> {
    let mut v = vec![0u8; size as usize];
    file.seek(SeekFrom::Start(offset)).unwrap();
    file.read_exact(&mut v).unwrap();
    v
}

/// One entry of a clang offload bundle: (absolute file offset, size, id).
pub struct BundleEntry {
    pub offset: u64,
    pub size: u64,
    pub id: String,
}

const BUNDLE_MAGIC: &[u8; 24] = b"__CLANG_OFFLOAD_BUNDLE__";

/// Lists the entries of every bundle in `[start, start+size)` (bundles back to back, aligned).
pub fn bundle_entries(file: &mut File, start: u64, size: u64) -> Vec<BundleEntry> {
    let mut out = Vec::new();
    let mut pos = start;
    let end = start + size;
    while pos + 32 <= end {
        let head = read_at(file, pos, 32);
        if &head[..24] != BUNDLE_MAGIC {
            pos += 8; // bundles are aligned; skip padding
            continue;
        }
        let count = u64le(&head, 24);
        let mut p = pos + 32;
        let mut bundle_end = p;
        for _ in 0..count {
            let e = read_at(file, p, 24);
            let (off, sz, idlen) = (u64le(&e, 0), u64le(&e, 8), u64le(&e, 16));
            let id = String::from_utf8_lossy(&read_at(file, p + 24, idlen)).into_owned();
            p += 24 + idlen;
            bundle_end = bundle_end.max(pos + off + sz);
            out.push(BundleEntry { offset: pos + off, size: sz, id });
        }
        pos = bundle_end.max(p);
    }
    out
}

/// Instruction lines of `llvm-objdump-15 -d`: (address, text before the `//` comment, number of
/// dwords LLVM consumed).
pub fn objdump(path: &Path, target: Target) -> Vec<(u64, String, usize)> {
    let objdump = tool("llvm-objdump-15", "llvm-15");
    let out = Command::new(objdump)
        .arg("-d")
        .arg(format!("--mcpu={}", target.mcpu()))
        .arg(path)
        .output()
        .expect("run llvm-objdump-15");
    assert!(out.status.success(), "llvm-objdump-15 failed on {}", path.display());
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = Vec::new();
    for l in text.lines() {
        let Some(pos) = l.rfind("// ") else { continue };
        if !l.starts_with('\t') {
            continue;
        }
        let comment = &l[pos + 3..];
        let Some(colon) = comment.find(':') else { continue };
        let Ok(addr) = u64::from_str_radix(&comment[..colon], 16) else { continue };
        let dwords = comment[colon + 1..]
            .split_whitespace()
            .take_while(|w| w.len() == 8 && w.chars().all(|c| c.is_ascii_hexdigit()))
            .count();
        lines.push((addr, l[..pos].trim().to_string(), dwords));
    }
    lines
}

#[derive(Default)]
pub struct Report {
    /// The instruction set compared (gfx90a unless a test says otherwise).
    pub target: Target,
    pub instructions: usize,
    /// Per encoding label (DPP and SDWA forms apart): opcodes seen and instruction count.
    pub seen: BTreeMap<String, (BTreeSet<Op>, usize)>,
    pub mismatches: Vec<String>,
    pub mismatch_count: usize,
    pub objects: usize,
    pub per_mnemonic: BTreeMap<String, usize>,
    /// Time spent in `Program::decode` (this crate alone, no LLVM).
    pub decode_time: std::time::Duration,
    pub decoded: usize,
    /// gfx940 MFMA lines where LLVM 15 prints AGPRs for a VGPR C/D ([`llvm15_gfx940_mfma`]).
    pub llvm15_mfma_agpr: usize,
}

/// LLVM 15's spelling of a gfx940 MFMA whose opcode gfx908 already had: its disassembler decodes
/// those with gfx908's table, which has only AGPR C and D, so it prints `a[…]` for the destination
/// and a register src2 whatever the instruction's `acc_cd` bit (bit 15) says, and re-encodes them
/// without the bit (`llvm-mc-15 -disassemble -mcpu=gfx940` on `v_mfma_f32_16x16x4f32 v[2:5], v7,
/// v8, v[2:5]` gives `a[2:5]`). The hardware and this crate read the bit (docs/isa.md §2
/// "CDNA3"); the comparison applies LLVM's reading to our decoding and counts the lines where it
/// changes the text. `None` for every other instruction.
pub fn llvm15_gfx940_mfma(inst: &aqueduct_isa::Inst) -> Option<String> {
    let spec = inst.op.spec();
    if inst.mods.target != Target::Gfx940 || spec.flags & aqueduct_isa::spec::MAI == 0 || !inst.op.on(Target::Gfx90a) {
        return None;
    }
    let mut as_llvm = *inst;
    for i in [0, 3] {
        if let Some(aqueduct_isa::Operand::Vgpr { reg, count }) = as_llvm.operands.get(i).copied() {
            as_llvm.operands[i] = aqueduct_isa::Operand::Agpr { reg, count };
        }
    }
    Some(as_llvm.display().to_string())
}

impl Report {
    pub fn print(&self, title: &str) {
        println!("== {title}: {} code objects, {} instructions", self.objects, self.instructions);
        println!("{:<12} {:>8} {:>8} {:>10}", "encoding", "in table", "seen", "instrs");
        let mut total = 0;
        for (label, (ops, n)) in &self.seen {
            let base = label.split('_').next().unwrap_or("");
            let known = Op::all().filter(|o| o.on(self.target) && o.encoding().name() == base).count();
            let known = if label.contains('_') { "-".to_string() } else { known.to_string() };
            println!("{label:<12} {known:>8} {:>8} {n:>10}", ops.len());
            if !label.contains('_') {
                total += ops.len();
            }
        }
        println!(
            "{:<12} {:>8} {:>8}  (every line decoded and compared; mismatches: {})",
            "total",
            Op::all().filter(|o| o.on(self.target)).count(),
            total,
            self.mismatch_count
        );
        if self.llvm15_mfma_agpr > 0 {
            println!(
                "gfx940 MFMA lines LLVM 15 prints with AGPR C/D although acc_cd is clear: {}",
                self.llvm15_mfma_agpr
            );
        }
        let secs = self.decode_time.as_secs_f64();
        println!(
            "decode alone: {} instructions in {:.1} ms ({:.1} M instructions/s, this build's profile)",
            self.decoded,
            secs * 1e3,
            self.decoded as f64 / secs.max(1e-9) / 1e6
        );
        for m in self.mismatches.iter().take(150) {
            println!("MISMATCH {m}");
        }
        let missing = self.unimplemented();
        println!(
            "executor: {} of the {} opcodes seen run as machine code; not implemented: {missing:?}",
            self.seen_opcodes().len() - missing.len(),
            self.seen_opcodes().len()
        );
    }
    /// Every opcode seen (DPP and SDWA forms with their base).
    pub fn seen_opcodes(&self) -> BTreeSet<Op> {
        self.seen.values().flat_map(|(ops, _)| ops.iter().copied()).collect()
    }
    /// The opcodes seen that the executor does not implement.
    pub fn unimplemented(&self) -> Vec<&'static str> {
        let implemented: BTreeSet<&str> = aqueduct_isa::exec::implemented().map(|o| o.name()).collect();
        self.seen_opcodes().iter().map(|o| o.name()).filter(|n| !implemented.contains(n)).collect()
    }
    pub fn assert_clean(&self) {
        assert_eq!(self.mismatch_count, 0, "{} mismatches against llvm-objdump-15", self.mismatch_count);
    }
}

/// Decodes `.text` of the code object at `path` for `report.target` and compares every line with
/// llvm-objdump-15 for the same target.
pub fn compare(path: &Path, report: &mut Report) {
    let target = report.target;
    let mut file = File::open(path).unwrap();
    let text = find_section(&mut file, ".text").expect(".text section");
    let bytes = read_at(&mut file, text.offset, text.size);
    let words: Vec<u32> = bytes.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
    let lines = objdump(path, target);
    report.objects += 1;
    // The whole stream decodes as one program, and every branch lands on an instruction start.
    let t = std::time::Instant::now();
    let program = Program::decode_for(target, &words).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    report.decode_time += t.elapsed();
    report.decoded += program.insts().len();
    for i in 0..program.insts().len() {
        let inst = &program.insts()[i];
        let name = inst.op.name();
        if name.starts_with("s_branch") || name.starts_with("s_cbranch") {
            assert!(
                program.branch_target(i).is_some(),
                "{}: branch at word {:?} has no target",
                path.display(),
                program.start(i)
            );
        }
    }
    let note = |report: &mut Report, want: &str, s: String| {
        report.mismatch_count += 1;
        let key = want.split(' ').next().unwrap_or("").to_string();
        let n = report.per_mnemonic.entry(key).or_default();
        *n += 1;
        if *n <= 2 && report.mismatches.len() < 400 {
            report.mismatches.push(s);
        }
    };
    for (addr, want, dwords) in lines {
        if addr < text.addr || addr >= text.addr + text.size {
            continue;
        }
        let at = ((addr - text.addr) / 4) as usize;
        report.instructions += 1;
        match decode_for(target, &words, at) {
            Ok(inst) => {
                let label = match inst.mods.ext {
                    Ext::None => inst.encoding().name().to_string(),
                    Ext::Dpp(_) => format!("{}_DPP", inst.encoding().name()),
                    Ext::Sdwa(_) => format!("{}_SDWA", inst.encoding().name()),
                };
                let e = report.seen.entry(label).or_default();
                e.0.insert(inst.op);
                e.1 += 1;
                let mut got = inst.display().to_string();
                if let Some(llvm) = llvm15_gfx940_mfma(&inst) {
                    if got != llvm {
                        report.llvm15_mfma_agpr += 1;
                    }
                    got = llvm;
                }
                if got != want || usize::from(inst.len) != dwords {
                    let raw: Vec<String> = words[at..(at + inst.len as usize).min(words.len())]
                        .iter()
                        .map(|w| format!("{w:08X}"))
                        .collect();
                    note(
                        report,
                        &want,
                        format!(
                            "{}: {:#x}: llvm `{want}` ({dwords} dwords) ours `{got}` ({}) [{}]",
                            path.file_name().unwrap().to_string_lossy(),
                            addr,
                            inst.len,
                            raw.join(" ")
                        ),
                    );
                }
            }
            Err(e) => {
                if want.starts_with("; ") || want.contains("<unknown>") {
                    continue;
                }
                note(
                    report,
                    &want,
                    format!(
                        "{}: {:#x}: llvm `{want}` ours error {e}",
                        path.file_name().unwrap().to_string_lossy(),
                        addr
                    ),
                );
            }
        }
    }
}

/// The gfx90a code objects inside a host library's `.hip_fatbin`, written to temporary files.
pub fn gfx90a_objects(lib: &Path, package: &str) -> Vec<(String, PathBuf)> {
    gfx90a_objects_filtered(lib, package, |_, _| true)
}

/// As [`gfx90a_objects`], keeping the `n`-th gfx90a image (counted over the whole section) when
/// `keep(n, id)` says so; only kept images are read.
pub fn gfx90a_objects_filtered(
    lib: &Path,
    package: &str,
    mut keep: impl FnMut(usize, &str) -> bool,
) -> Vec<(String, PathBuf)> {
    let Ok(mut file) = File::open(lib) else {
        panic!("{} not found: install the Debian package `{package}`", lib.display());
    };
    let sec = find_section(&mut file, ".hip_fatbin").expect(".hip_fatbin section");
    let entries = bundle_entries(&mut file, sec.offset, sec.size);
    let dir = temp_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let stem = lib.file_name().unwrap().to_string_lossy().into_owned();
    let mut out = Vec::new();
    let mut n = 0;
    for (i, e) in entries.iter().enumerate() {
        if !e.id.contains("gfx90a") || e.size == 0 {
            continue;
        }
        n += 1;
        if !keep(n - 1, &e.id) {
            continue;
        }
        let path = dir.join(format!("{stem}-{i}-{}.co", e.id.replace([':', '+'], "_")));
        std::fs::write(&path, read_at(&mut file, e.offset, e.size)).unwrap();
        out.push((e.id.clone(), path));
    }
    out
}

fn temp_dir() -> PathBuf {
    std::env::temp_dir().join(format!("aqueduct-isa-{}", std::process::id()))
}

/// Removes the directory [`gfx90a_objects`] extracts into, once it is empty.
pub fn remove_temp_dir() {
    let _ = std::fs::remove_dir(temp_dir());
}

/// Assembles `asm` (one gfx90a instruction per line) with `llvm-mc-15 -show-encoding` into
/// words (the executor tests' assembler).
pub fn assemble(asm: &str) -> Vec<u32> {
    assemble_for(Target::Gfx90a, asm)
}

/// [`assemble`] for `target` (`-mcpu=gfx940` for gfx940).
pub fn assemble_for(target: Target, asm: &str) -> Vec<u32> {
    use std::io::Write;
    use std::process::Stdio;
    let mc = tool("llvm-mc-15", "llvm-15");
    let mut child = Command::new(mc)
        .args(["-arch=amdgcn", "-show-encoding"])
        .arg(format!("-mcpu={}", target.mcpu()))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run llvm-mc-15");
    child.stdin.take().unwrap().write_all(asm.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.is_empty(), "llvm-mc-15 rejected:\n{asm}\n{stderr}");
    let mut bytes = Vec::new();
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        let Some((_, enc)) = l.split_once("; encoding: [") else { continue };
        for b in enc.trim_end_matches(']').split(',') {
            bytes.push(u8::from_str_radix(b.trim().trim_start_matches("0x"), 16).unwrap());
        }
    }
    bytes.chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// Pseudo-random u32s (xorshift), seeded.
pub fn rnd(seed: u32) -> impl FnMut() -> u32 {
    let mut x = seed.max(1);
    move || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x
    }
}
