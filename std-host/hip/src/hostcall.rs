//! Device `printf` through hostcall (docs/executor.md §5): the buffer a kernel's
//! hidden hostcall argument points at, and the listener that serves it as clr's hostcall
//! listener does.
//!
//! The buffer lives in pinned host memory, which the device reads and writes with its 64-bit
//! atomics: a header `{headers, payloads, doorbell, free_stack, ready_stack, index_mask}`
//! (6 × u64), the doorbell signal (an `amd_signal_t` whose value the device increments), the
//! packet headers `{next, activemask, service, control}` (24 bytes each) and the payloads
//! (64 lanes × 8 u64 each). A wave pops a packet from the free stack, fills its lanes' slots,
//! sets READY (control bit 0) and pushes it onto the ready stack; the listener takes the whole
//! ready stack, serves each packet's active lanes, writes each lane's two-word result into its
//! slot and clears READY; the wave then reads the results and returns the packet.
//!
//! Service 2 is `printf`/`fprintf`: each lane sends a message in pieces — slot 0 a descriptor
//! (bit 0 BEGIN, bit 1 END, bits 7:5 the number of valid words in slots 1–7, bits 63:8 the
//! message id the BEGIN piece is answered with) — holding the output stream (0 stdout, 1
//! stderr), the format string (its bytes packed eight to a word, NUL-terminated) and each
//! argument (a word; a `%s` argument as bytes like the format). With the END piece the message
//! is formatted and written, and the lane is answered with the byte count. Other services
//! answer 0.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// Packets of the buffer (a power of two: the index mask is `PACKETS − 1`).
const PACKETS: u64 = 64;
/// Bytes of a packet header.
const HEADER_BYTES: u64 = 24;
/// Bytes of a packet payload: 64 lanes × 8 words.
const PAYLOAD_BYTES: u64 = 64 * 8 * 8;
/// Offsets in the buffer.
const SIGNAL_AT: u64 = 64;
const HEADERS_AT: u64 = 128;
const PAYLOADS_AT: u64 = (HEADERS_AT + PACKETS * HEADER_BYTES).next_multiple_of(64);
/// Bytes of the whole buffer.
const BUFFER_BYTES: u64 = PAYLOADS_AT + PACKETS * PAYLOAD_BYTES;
/// `AMD_SIGNAL_KIND_USER`.
const SIGNAL_KIND_USER: i64 = 1;
/// Control bit 0: the packet waits for the host.
const READY: u32 = 1;
/// The printf service.
const SERVICE_PRINTF: u32 = 2;

/// The process's hostcall buffer, created with its listener on first use; 0 if it cannot be.
static BUFFER: OnceLock<u64> = OnceLock::new();

/// The address of the hostcall buffer for a kernel's hidden hostcall argument (created, and
/// its listener started, by the first launch of a kernel that has one); 0 when no buffer can
/// be made (the kernel's hostcalls then fault, as a missing buffer does on ROCm).
pub(crate) fn buffer() -> u64 {
    *BUFFER.get_or_init(|| create().unwrap_or(0))
}

fn create() -> Option<u64> {
    let g = crate::global::global().ok()?;
    let base = g.rt.runtime_host_malloc(BUFFER_BYTES as usize).ok()?;
    if base % 64 != 0 {
        return None;
    }
    // SAFETY: a fresh pinned host allocation of BUFFER_BYTES bytes, CPU-accessible at its
    // address, that nothing else uses yet.
    unsafe { init(base) };
    std::thread::Builder::new().name("aqueduct-hostcall".into()).spawn(move || listen(base)).ok()?;
    Some(base)
}

fn word(base: u64, off: u64) -> &'static AtomicU64 {
    // SAFETY: `base` is the live hostcall buffer (never freed) and `off` an 8-aligned offset
    // inside it; the device accesses these words only atomically.
    unsafe { AtomicU64::from_ptr((base + off) as *mut u64) }
}

fn half(base: u64, off: u64) -> &'static AtomicU32 {
    // SAFETY: as `word`, a 4-aligned offset.
    unsafe { AtomicU32::from_ptr((base + off) as *mut u32) }
}

/// Lays out the buffer: the header, the doorbell and the free stack of every packet.
///
/// # Safety
/// `base` is a CPU-accessible allocation of `BUFFER_BYTES` bytes, 64-byte aligned.
unsafe fn init(base: u64) {
    // SAFETY: the caller's contract.
    unsafe { std::ptr::write_bytes(base as *mut u8, 0, BUFFER_BYTES as usize) };
    let mask = PACKETS - 1;
    word(base, 0).store(base + HEADERS_AT, Ordering::Relaxed);
    word(base, 8).store(base + PAYLOADS_AT, Ordering::Relaxed);
    word(base, 16).store(base + SIGNAL_AT, Ordering::Relaxed);
    word(base, SIGNAL_AT).store(SIGNAL_KIND_USER as u64, Ordering::Relaxed);
    // Free stack: packet i links to i − 1; packet 1 to packet 0 with tag 1 (a pointer of 0
    // would be the empty stack); packet 0 ends it.
    for i in 1..PACKETS {
        let next = if i == 1 { mask + 1 } else { i - 1 };
        word(base, HEADERS_AT + i * HEADER_BYTES).store(next, Ordering::Relaxed);
    }
    word(base, 24).store(PACKETS - 1, Ordering::Relaxed);
    word(base, 32).store(0, Ordering::Relaxed);
    // Ordering: Release publishes the layout before the buffer's address is handed out.
    word(base, 40).store(mask, Ordering::Release);
}

/// Serves the buffer at `base` forever: polls the ready stack (the doorbell's value only
/// hints; clr's listener also wakes on a timeout).
fn listen(base: u64) {
    let mut printer = Printer::default();
    loop {
        if !serve_ready(base, &mut printer, &mut |stream, bytes| emit(stream, bytes)) {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

extern "C" {
    static stdout: *mut c_void;
    static stderr: *mut c_void;
    fn fwrite(data: *const c_void, size: usize, n: usize, stream: *mut c_void) -> usize;
}

/// Writes a message to the C library's `stdout` (stream 0) or `stderr` (1), as clr's listener
/// does, so it keeps its place among the program's own stdio output.
fn emit(stream: u64, bytes: &[u8]) {
    // SAFETY: `stdout`/`stderr` are the C library's initialised `FILE *` streams (read by
    // value); `fwrite` reads `bytes.len()` bytes from `bytes` and locks the stream itself.
    unsafe {
        let f = if stream == 1 { stderr } else { stdout };
        if !f.is_null() {
            fwrite(bytes.as_ptr().cast(), 1, bytes.len(), f);
        }
    }
}

/// Takes the ready stack of the buffer at `base` and serves every packet on it; `out`
/// receives each formatted message with its stream. Whether there was any.
fn serve_ready(base: u64, printer: &mut Printer, out: &mut dyn FnMut(u64, &[u8])) -> bool {
    // Ordering: Acquire pairs with the device's release push of a filled packet.
    let mut ptr = word(base, 32).swap(0, Ordering::Acquire);
    if ptr == 0 {
        return false;
    }
    // Ordering: Relaxed; set before the buffer was handed out.
    let mask = word(base, 40).load(Ordering::Relaxed);
    while ptr != 0 {
        let i = ptr & mask;
        let h = HEADERS_AT + i * HEADER_BYTES;
        // Ordering: Relaxed; the packet's fields were published by the swap above.
        let next = word(base, h).load(Ordering::Relaxed);
        let active = word(base, h + 8).load(Ordering::Relaxed);
        let service = half(base, h + 16).load(Ordering::Relaxed);
        let payload = PAYLOADS_AT + i * PAYLOAD_BYTES;
        for lane in 0..64 {
            if active >> lane & 1 == 0 {
                continue;
            }
            let slot = payload + lane * 64;
            let mut args = [0u64; 8];
            for (k, a) in args.iter_mut().enumerate() {
                // Ordering: Relaxed; as above.
                *a = word(base, slot + 8 * k as u64).load(Ordering::Relaxed);
            }
            let result = if service == SERVICE_PRINTF { printer.piece(&args, out) } else { 0 };
            // Ordering: Relaxed; published by the release below.
            word(base, slot).store(result, Ordering::Relaxed);
            word(base, slot + 8).store(0, Ordering::Relaxed);
        }
        let control = half(base, h + 20);
        // Ordering: Release: the results before the wave sees READY clear.
        control.fetch_and(!READY, Ordering::Release);
        ptr = next;
    }
    true
}

/// The printf messages being received, by id.
#[derive(Default)]
struct Printer {
    messages: HashMap<u64, Vec<u64>>,
    next_id: u64,
}

impl Printer {
    /// One piece of a message (slot 0 the descriptor, 1–7 the words); the answer to it.
    fn piece(&mut self, args: &[u64; 8], out: &mut dyn FnMut(u64, &[u8])) -> u64 {
        let d = args[0];
        let n = ((d >> 5) & 7).min(7) as usize;
        let id = if d & 1 != 0 {
            self.next_id += 1;
            self.messages.insert(self.next_id, Vec::new());
            self.next_id
        } else {
            d >> 8
        };
        let Some(m) = self.messages.get_mut(&id) else { return 0 };
        m.extend_from_slice(&args[1..1 + n]);
        if d & 2 == 0 {
            return id << 8;
        }
        let m = self.messages.remove(&id).unwrap_or_default();
        let (stream, words) = m.split_first().map_or((0, &[][..]), |(s, w)| (*s, w));
        let text = format(words);
        out(stream, &text);
        text.len() as u64
    }
}

/// The bytes of a string packed eight to a word from `words[at..]`, up to its NUL; the index
/// of the word after it.
fn string(words: &[u64], mut at: usize) -> (Vec<u8>, usize) {
    let mut s = Vec::new();
    while let Some(w) = words.get(at) {
        at += 1;
        for b in w.to_le_bytes() {
            if b == 0 {
                return (s, at);
            }
            s.push(b);
        }
    }
    (s, at)
}

extern "C" {
    fn snprintf(buf: *mut c_char, n: usize, fmt: *const c_char, ...) -> c_int;
}

/// One C conversion `spec` (e.g. `%-8.3lx`) of one argument, by the C library's `snprintf`.
enum Arg {
    Int(i64),
    Float(f64),
    Str(CString),
}

fn convert(spec: &str, arg: &Arg) -> Vec<u8> {
    let Ok(fmt) = CString::new(spec) else { return Vec::new() };
    let mut buf = vec![0u8; 512];
    for _ in 0..2 {
        let p = buf.as_mut_ptr().cast::<c_char>();
        // SAFETY: `buf` holds `buf.len()` writable bytes; `fmt` is a NUL-terminated conversion
        // of exactly one argument, whose C type matches the value passed (the length modifier
        // was rewritten to `ll` for integers, none for doubles, none for strings).
        let n = unsafe {
            match arg {
                Arg::Int(v) => snprintf(p, buf.len(), fmt.as_ptr(), *v as std::ffi::c_longlong),
                Arg::Float(v) => snprintf(p, buf.len(), fmt.as_ptr(), *v),
                Arg::Str(s) => snprintf(p, buf.len(), fmt.as_ptr(), s.as_ptr()),
            }
        };
        let Ok(n) = usize::try_from(n) else { return Vec::new() };
        if n < buf.len() {
            buf.truncate(n);
            return buf;
        }
        buf.resize(n + 1, 0);
    }
    Vec::new()
}

/// The arguments of a message, in order.
struct Cursor<'a> {
    words: &'a [u64],
    at: usize,
}

impl Cursor<'_> {
    /// The next word (0 past the end: a message with too few arguments).
    fn next(&mut self) -> u64 {
        let v = self.words.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        v
    }
}

/// Formats a printf message: the format string, then its arguments, as `words` holds them.
fn format(words: &[u64]) -> Vec<u8> {
    let (fmt, at) = string(words, 0);
    let mut args = Cursor { words, at };
    let mut out = Vec::new();
    let mut i = 0;
    while i < fmt.len() {
        if fmt[i] != b'%' {
            out.push(fmt[i]);
            i += 1;
            continue;
        }
        if fmt.get(i + 1) == Some(&b'%') {
            out.push(b'%');
            i += 2;
            continue;
        }
        // %[flags][width][.precision][length]conversion
        let start = i;
        i += 1;
        let mut spec = String::from("%");
        while let Some(&c) = fmt.get(i).filter(|c| b"-+ #0".contains(c)) {
            spec.push(c as char);
            i += 1;
        }
        let number = |i: &mut usize, spec: &mut String, args: &mut Cursor<'_>| {
            if fmt.get(*i) == Some(&b'*') {
                *i += 1;
                spec.push_str(&(args.next() as u32 as i32).to_string());
            }
            while let Some(&c) = fmt.get(*i).filter(|c| c.is_ascii_digit()) {
                spec.push(c as char);
                *i += 1;
            }
        };
        number(&mut i, &mut spec, &mut args);
        if fmt.get(i) == Some(&b'.') {
            spec.push('.');
            i += 1;
            number(&mut i, &mut spec, &mut args);
        }
        // Length modifiers: `h` (16 bits), `hh` (8), any of `l ll L q j z t` (64).
        let (mut short, mut wide) = (0, false);
        while let Some(&c) = fmt.get(i).filter(|c| b"hlLqjzt".contains(c)) {
            if c == b'h' {
                short += 1;
            } else {
                wide = true;
            }
            i += 1;
        }
        let Some(&conv) = fmt.get(i) else {
            out.extend_from_slice(&fmt[start..]);
            break;
        };
        i += 1;
        match conv {
            b'd' | b'i' | b'u' | b'o' | b'x' | b'X' | b'c' => {
                let raw = args.next();
                let signed = matches!(conv, b'd' | b'i');
                // The argument's width: 64 bits with a wide modifier, else a promoted int
                // narrowed by `h`/`hh`.
                let v = match (conv, wide, short, signed) {
                    (b'c', ..) => i64::from(raw as u8),
                    (_, true, _, _) => raw as i64,
                    (_, false, 0, true) => i64::from(raw as u32 as i32),
                    (_, false, 0, false) => i64::from(raw as u32),
                    (_, false, 1, true) => i64::from(raw as u16 as i16),
                    (_, false, 1, false) => i64::from(raw as u16),
                    (_, false, _, true) => i64::from(raw as u8 as i8),
                    (_, false, _, false) => i64::from(raw as u8),
                };
                if conv == b'c' {
                    spec.push('c');
                } else {
                    spec.push_str("ll");
                    spec.push(conv as char);
                }
                out.extend(convert(&spec, &Arg::Int(v)));
            }
            b'p' => {
                spec.push_str("llx");
                let mut s = convert(&spec, &Arg::Int(args.next() as i64));
                out.extend_from_slice(b"0x");
                out.append(&mut s);
            }
            b'f' | b'F' | b'e' | b'E' | b'g' | b'G' | b'a' | b'A' => {
                spec.push(conv as char);
                out.extend(convert(&spec, &Arg::Float(f64::from_bits(args.next()))));
            }
            b's' => {
                let (s, after) = string(words, args.at);
                args.at = after;
                let s = CString::new(s).unwrap_or_default();
                spec.push('s');
                out.extend(convert(&spec, &Arg::Str(s)));
            }
            _ => out.extend_from_slice(&fmt[start..i]),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packs `s` with its NUL eight bytes to a word, as the device's string appends do.
    fn pack(s: &str) -> Vec<u64> {
        let mut b = s.as_bytes().to_vec();
        b.push(0);
        b.chunks(8)
            .map(|c| {
                let mut w = [0u8; 8];
                w[..c.len()].copy_from_slice(c);
                u64::from_le_bytes(w)
            })
            .collect()
    }

    #[test]
    fn formats_like_c_printf() {
        let mut words = pack("a=%d b=%5u c=%-4x| d=%08.3f e=%e s=[%s] %c %ld %% %lld %hd");
        words.extend([(-7i32) as u32 as u64, 42, 0xbeef, 2.71875f64.to_bits(), 1e10f64.to_bits()]);
        words.extend(pack("hi"));
        words.extend([b'Z' as u64, (-5i64) as u64, 1 << 40, 0x1_ffff]);
        let want = format!(
            "a={} b={:>5} c={:<4x}| d={:08.3} e={} s=[{}] {} {} % {} {}",
            -7,
            42,
            0xbeef,
            2.71875,
            "1.000000e+10",
            "hi",
            'Z',
            -5,
            1u64 << 40,
            -1i16
        );
        assert_eq!(String::from_utf8(format(&words)).unwrap(), want);
    }

    /// A device's side of the protocol, played on the host: pop a free packet, fill lanes,
    /// push it ready; the listener serves it; the results come back in the slots.
    #[test]
    fn serves_printf_packets_pushed_as_a_wave_pushes_them() {
        let mut mem = vec![0u64; (BUFFER_BYTES as usize).div_ceil(8) + 8];
        let base = (mem.as_mut_ptr() as u64).next_multiple_of(64);
        // SAFETY: `mem` holds BUFFER_BYTES bytes from the 64-aligned `base` and outlives the test.
        unsafe { init(base) };
        let mask = word(base, 40).load(Ordering::Relaxed);
        let mut printer = Printer::default();
        let mut printed: Vec<(u64, String)> = Vec::new();
        // One call of `service` on lanes `active` with per-lane args; returns each lane's result.
        let call =
            |printer: &mut Printer, printed: &mut Vec<(u64, String)>, active: u64, args: &dyn Fn(u64) -> [u64; 8]| {
                let top = word(base, 24).load(Ordering::Relaxed);
                let i = top & mask;
                let h = HEADERS_AT + i * HEADER_BYTES;
                let next = word(base, h).load(Ordering::Relaxed);
                word(base, 24).store(next, Ordering::Relaxed);
                word(base, h + 8).store(active, Ordering::Relaxed);
                half(base, h + 16).store(SERVICE_PRINTF, Ordering::Relaxed);
                half(base, h + 20).store(READY, Ordering::Relaxed);
                for lane in 0..64 {
                    for (k, a) in args(lane).iter().enumerate() {
                        word(base, PAYLOADS_AT + i * PAYLOAD_BYTES + lane * 64 + 8 * k as u64)
                            .store(*a, Ordering::Relaxed);
                    }
                }
                word(base, h).store(0, Ordering::Relaxed);
                word(base, 32).store(top, Ordering::Release);
                assert!(serve_ready(base, printer, &mut |s, b| printed.push((s, String::from_utf8_lossy(b).into()))));
                assert_eq!(half(base, h + 20).load(Ordering::Acquire) & READY, 0, "READY cleared");
                let r: Vec<u64> = (0..64)
                    .map(|lane| word(base, PAYLOADS_AT + i * PAYLOAD_BYTES + lane * 64).load(Ordering::Relaxed))
                    .collect();
                // The packet goes back with its tag incremented.
                word(base, h).store(word(base, 24).load(Ordering::Relaxed), Ordering::Relaxed);
                word(base, 24).store(top + mask + 1, Ordering::Relaxed);
                r
            };
        let active = 0b1011u64;
        // BEGIN with the stream word (stdout).
        let ids = call(&mut printer, &mut printed, active, &|_| [1 | 1 << 5, 0, 0, 0, 0, 0, 0, 0]);
        let fmt = pack("lane %d of %s\n");
        // The format (2 words), then the argument and the string, with END.
        let r = call(&mut printer, &mut printed, active, &|l| {
            let id = ids[l as usize];
            [id | 2 << 5, fmt[0], fmt[1], 0, 0, 0, 0, 0]
        });
        assert!(printed.is_empty() && r.iter().enumerate().all(|(l, &v)| active >> l & 1 == 0 || v == ids[l]));
        let name = pack("wave");
        let r = call(&mut printer, &mut printed, active, &|l| {
            let id = ids[l as usize];
            [id | 2 | 2 << 5, 100 + l, name[0], 0, 0, 0, 0, 0]
        });
        let want: Vec<(u64, String)> =
            [0u64, 1, 3].iter().map(|l| (0, format!("lane {} of wave\n", 100 + l))).collect();
        assert_eq!(printed, want);
        for l in [0usize, 1, 3] {
            assert_eq!(r[l], want[0].1.len() as u64, "lane {l} gets the byte count");
        }
        // Distinct ids per lane.
        assert!(ids[0] != ids[1] && ids[1] != ids[3] && ids[0] >> 8 != 0);
        drop(mem);
    }
}
