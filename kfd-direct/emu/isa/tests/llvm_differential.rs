//! Random field values against `llvm-mc-15 -disassemble` (docs/isa.md §7):
//! for every encoding, words with a real opcode and random other fields (seeded, deterministic).
//! Whatever LLVM decodes, this crate must decode to the same length and print identically.
//! Words LLVM rejects but this crate accepts are counted, not failed: the decoder does not
//! re-check assembler-level legality (unused fields, operand classes) that the hardware ignores.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use aqueduct_isa::{decode_for, Encoding, Op, Target};

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 16) as u32
    }
}

/// A word of encoding `e` with opcode `code` and random other fields.
fn word(rng: &mut XorShift, e: Encoding, code: u32) -> [u32; 3] {
    let r = rng.next();
    let w1 = rng.next();
    let w2 = 0xBF80_0000; // s_nop 0 after the longest instruction
    let small_src = |rng: &mut XorShift| -> u32 {
        // Bias 9-bit sources toward registers, constants and the literal/DPP/SDWA markers.
        match rng.next() % 6 {
            0 => rng.next() % 102,
            1 => 128 + rng.next() % 81,
            2 => [240, 242, 248, 255, 250, 249, 106, 126, 124, 253][(rng.next() % 10) as usize],
            _ => 256 + rng.next() % 256,
        }
    };
    let w0 = match e {
        Encoding::Sop2 => 0x8000_0000 | code << 23 | (r & 0x7f_ffff & !0xff) | small_src(rng) & 0xff,
        Encoding::Sopk => 0xB000_0000 | code << 23 | (r & 0x7f_ffff),
        Encoding::Sop1 => 0xBE80_0000 | code << 8 | (r & 0x7f_00ff),
        Encoding::Sopc => 0xBF00_0000 | code << 16 | (r & 0xffff),
        Encoding::Sopp => 0xBF80_0000 | code << 16 | (r & 0xffff),
        Encoding::Smem => 0xC000_0000 | code << 18 | (r & 0x3_ffff & !(1 << 14)),
        Encoding::Vop1 => 0x7E00_0000 | code << 9 | (r & 0x1fe_0000) | small_src(rng),
        Encoding::Vop2 => code << 25 | (r & 0x1ff_fe00) | small_src(rng),
        Encoding::Vopc => 0x7C00_0000 | code << 17 | (r & 0x1_fe00) | small_src(rng),
        Encoding::Vop3 => 0xD000_0000 | code << 16 | (r & 0xffff),
        Encoding::Vop3p => 0xD380_0000 | code << 16 | (r & 0xffff),
        Encoding::Ds => 0xD800_0000 | code << 17 | (r & 0x201_ffff),
        Encoding::Flat => 0xDC00_0000 | code << 18 | (r & 0x3_3fff),
        Encoding::Scratch => 0xDC00_4000 | code << 18 | (r & 0x3_3fff),
        Encoding::Global => 0xDC00_8000 | code << 18 | (r & 0x3_3fff),
        Encoding::Mubuf => 0xE000_0000 | code << 18 | (r & 0x3_ffff),
        Encoding::Mtbuf => 0xE800_0000 | code << 15 | (r & 0x3ff_ffff & !(0xf << 15)),
        Encoding::Mimg => 0xF000_0000 | code << 18 | (r & 0x203_ffff),
    };
    let even = |v: u32| v & !1;
    let w1 = match e {
        Encoding::Vop3 | Encoding::Vop3p => {
            (w1 & 0xf800_0000) | even(small_src(rng)) | even(small_src(rng)) << 9 | even(small_src(rng)) << 18
        }
        Encoding::Ds
        | Encoding::Flat
        | Encoding::Scratch
        | Encoding::Global
        | Encoding::Mubuf
        | Encoding::Mtbuf
        | Encoding::Mimg => {
            // Even registers, a common base register and no AGPR/TFE bits, so LLVM decodes most.
            let w = w1 & !0x0101_0101 & !(1 << 23);
            if rng.next() % 2 == 0 {
                (w & !0x007f_0000) | 0x007f_0000
            } else {
                w
            }
        }
        _ => w1,
    };
    [w0, w1, w2]
}

fn bytes(ws: &[u32]) -> String {
    ws.iter().flat_map(|w| w.to_le_bytes()).map(|b| format!("{b:#04x}")).collect::<Vec<_>>().join(" ")
}

#[test]
fn random_fields_match_llvm() {
    random_fields(Target::Gfx90a);
}

/// The same over gfx940's opcodes against `llvm-mc-15 -mcpu=gfx940` (docs/isa.md §2 "CDNA3").
#[test]
fn random_fields_match_llvm_gfx940() {
    random_fields(Target::Gfx940);
}

fn random_fields(target: Target) {
    let mc = common::tool("llvm-mc-15", "llvm-15");
    let mut rng = XorShift(0x2545_F491_4F6C_DD1D);
    let mut probes: Vec<[u32; 3]> = Vec::new();
    let ops: Vec<Op> = Op::all().filter(|o| o.on(target)).collect();
    for _ in 0..40 {
        for &op in &ops {
            let s = op.spec();
            if s.flags & aqueduct_isa::spec::MAI != 0 {
                continue; // llvm-mc-15 crashes on many random MAI encodings; MFMA is covered elsewhere
            }
            probes.push(word(&mut rng, s.enc, u32::from(s.code)));
        }
    }
    let mut crashed = 0;
    let mut llvm = Vec::new();
    for chunk in probes.chunks(1024) {
        llvm.extend(llvm_decode_all(&mc, target, chunk, &mut crashed));
    }
    let mut mismatches = Vec::new();
    let (mut agree, mut lenient, mut both_reject) = (0, 0, 0);
    for (i, p) in probes.iter().enumerate() {
        let ours = decode_for(target, p, 0);
        match (llvm[i].as_ref(), ours) {
            (Some((text, _)), _) if text.contains("/*") => both_reject += 1,
            (Some((text, len)), Ok(inst)) => {
                let got = inst.display().to_string();
                // `-show-encoding` re-encodes: an f16 bit pattern in an i16 operand comes back
                // as a literal, so a longer LLVM length with the same text is not a mismatch.
                if &got == text && (usize::from(inst.len) == *len || (inst.len == 1 && *len == 2)) {
                    agree += 1;
                } else {
                    mismatches.push(format!("[{}] llvm `{text}` ({len}) ours `{got}` ({})", bytes(&p[..2]), inst.len));
                }
            }
            (Some((text, _)), Err(e)) => mismatches.push(format!("[{}] llvm `{text}` ours {e}", bytes(&p[..2]))),
            (None, Ok(_)) => lenient += 1,
            (None, Err(_)) => both_reject += 1,
        }
    }
    println!(
        "{target}: {} probes: {agree} identical, {lenient} accepted only by us, {both_reject} rejected by LLVM \
         ({crashed} crash llvm-mc-15), {} mismatches",
        probes.len(),
        mismatches.len()
    );
    for m in mismatches.iter().take(80) {
        println!("MISMATCH {m}");
    }
    assert!(agree > 1000, "too few probes decoded by LLVM ({agree}): the marker walk is off");
    assert!(mismatches.is_empty(), "{} mismatches against llvm-mc-15", mismatches.len());
}

/// LLVM's decoding of each probe (`None`: rejected), or `None` if llvm-mc-15 crashed on the batch.
fn llvm_decode(mc: &std::path::Path, target: Target, probes: &[[u32; 3]]) -> Option<Vec<Option<(String, usize)>>> {
    // Each probe on its own line, then two `s_nop <i>` markers (a leftover word that starts a
    // 64-bit instruction can swallow one).
    let mut input = String::new();
    for (i, p) in probes.iter().enumerate() {
        let marker = 0xBF80_0000 | (i as u32 % 0x8000 + 0x100);
        input.push_str(&format!("{}\n{}\n{}\n", bytes(p), bytes(&[marker]), bytes(&[marker])));
    }
    let mut child = Command::new(mc)
        .args(["-disassemble", "-show-encoding", "-triple=amdgcn-amd-amdhsa"])
        .arg(format!("-mcpu={}", target.mcpu()))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run llvm-mc-15");
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().unwrap();
    let _ = writer.join();
    if !out.status.success() {
        return None; // llvm-mc-15 15.0.6 crashes on some MAI encodings
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut rejected = std::collections::BTreeSet::new();
    for l in stderr.lines() {
        if let Some(rest) = l.strip_prefix("<stdin>:") {
            let mut it = rest.split(':');
            if let (Some(line), Some("1")) = (it.next(), it.next()) {
                if let Ok(line) = line.parse::<usize>() {
                    rejected.insert(line);
                }
            }
        }
    }
    // Walk stdout: the first instruction after the markers of probe i-1 is LLVM's decoding of probe i.
    let mut llvm: Vec<Option<(String, usize)>> = vec![None; probes.len()];
    let mut next = 0usize;
    let mut want_first = true;
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        let Some((asm, enc)) = l.split_once("; encoding: [") else { continue };
        let asm = asm.trim();
        let len = enc.trim_end_matches(']').split(',').count() / 4;
        if let Some(n) = asm.strip_prefix("s_nop ") {
            let v = if let Some(h) = n.strip_prefix("0x") { u32::from_str_radix(h, 16).ok() } else { n.parse().ok() };
            if let Some(v) = v {
                if v >= 0x100 && (v - 0x100) as usize == next % 0x8000 && !want_first {
                    next += 1;
                    want_first = true;
                    continue;
                }
                if v >= 0x100 && next > 0 && (v - 0x100) as usize == (next - 1) % 0x8000 {
                    continue; // the second marker
                }
            }
        }
        if want_first && next < probes.len() {
            want_first = false;
            if !rejected.contains(&(3 * next + 1)) {
                llvm[next] = Some((asm.to_string(), len));
            }
        }
    }
    Some(llvm)
}

/// Runs [`llvm_decode`] in batches, isolating probes that crash llvm-mc-15 (reported as `Err`).
fn llvm_decode_all(
    mc: &std::path::Path,
    target: Target,
    probes: &[[u32; 3]],
    crashed: &mut usize,
) -> Vec<Option<(String, usize)>> {
    if probes.is_empty() {
        return Vec::new();
    }
    if let Some(v) = llvm_decode(mc, target, probes) {
        return v;
    }
    if probes.len() == 1 {
        *crashed += 1;
        return vec![Some(("/* llvm-mc crashed */".to_string(), 0))];
    }
    let (a, b) = probes.split_at(probes.len() / 2);
    let mut v = llvm_decode_all(mc, target, a, crashed);
    v.extend(llvm_decode_all(mc, target, b, crashed));
    v
}
