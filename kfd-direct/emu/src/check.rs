//! `AQUEDUCT_EMU_KERNELS=check`: a kernel with a host twin runs both ways, the twin as the
//! machine code's oracle (docs/executor.md §4).
//!
//! The twin runs on device memory as it always does. The machine code runs on a copy: when a
//! dispatch's first work-group starts, every byte the device maps is copied (the dispatch's
//! *before* image), and the machine code reads that copy and writes into pages of its own (the
//! *overlay*), work-group after work-group. When the last work-group has run, device memory —
//! what the twin made of it — must equal the before image with the overlay applied, and each
//! work-group must have ended the same way both times (done, or the same fault). A difference
//! is printed with the kernel and the first differing address, and fails the dispatch as a trap
//! does; an agreeing dispatch leaves the twin's results, which equal the machine code's.
//!
//! Checked work-groups run one at a time (the checker's lock), so the two sides never see each
//! other's stores in between. Engines that are not checked (copies, host kernels, the host)
//! still write device memory meanwhile: check a program with one command in flight at a time,
//! or a concurrent write shows as a difference.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use aqueduct_isa::exec::{AtomicOp, MemFault, Memory};

use crate::isa::MachineCode;
use crate::memory::{KernelError, MemView};
use crate::twin::{KernelCtx, Twin};

/// Bytes of one overlay page.
const PAGE: u64 = 4096;

/// Every GPU-mapped range of the device, in address order, with its bytes.
struct Image(Vec<(u64, Vec<u8>)>);

impl Image {
    fn take(mem: &MemView<'_>) -> Image {
        Image(
            mem.tr
                .mapped_ranges()
                .map(|(va, len)| {
                    let mut bytes = vec![0u8; len as usize];
                    // A mapped range is readable; one that is not leaves zeros on both sides.
                    let _ = mem.read(va, &mut bytes);
                    (va, bytes)
                })
                .collect(),
        )
    }

    /// The range holding `[addr, addr + len)`: its index and the offset of `addr` in it.
    fn find(&self, addr: u64, len: usize) -> Result<(usize, usize), MemFault> {
        let i = self.0.partition_point(|(va, _)| *va <= addr).checked_sub(1).ok_or(MemFault(addr))?;
        let (va, bytes) = &self.0[i];
        let off = (addr - va) as usize;
        if off.checked_add(len).is_some_and(|end| end <= bytes.len()) {
            Ok((i, off))
        } else {
            Err(MemFault(addr))
        }
    }
}

/// One dispatch being checked.
struct Run {
    /// Device memory when the dispatch's first work-group started (`None` once it failed).
    before: Option<Image>,
    /// The machine code's stores: (range index, page index in the range) → the page's bytes.
    overlay: HashMap<(usize, usize), Vec<u8>>,
    /// Work-groups run, and in all.
    done: u64,
    total: u64,
}

/// The machine code's view of memory: the before image under its overlay.
struct Shadow<'a> {
    before: &'a Image,
    overlay: RefCell<HashMap<(usize, usize), Vec<u8>>>,
}

impl Shadow<'_> {
    /// Runs `f` on each piece of `[addr, addr + len)` within one page: (page, offset in page,
    /// offset in the access, bytes), the page copied into the overlay first when `write`.
    fn pieces(&self, addr: u64, len: usize, write: bool, mut f: impl FnMut(&mut [u8], usize)) -> Result<(), MemFault> {
        let (r, off) = self.before.find(addr, len)?;
        let range = &self.before.0[r].1;
        let mut done = 0;
        while done < len {
            let at = off + done;
            let page = at / PAGE as usize;
            let start = page * PAGE as usize;
            let n = (start + PAGE as usize - at).min(len - done);
            let mut overlay = self.overlay.borrow_mut();
            let bytes = match overlay.get_mut(&(r, page)) {
                Some(p) => p,
                None if write => {
                    let end = (start + PAGE as usize).min(range.len());
                    overlay.entry((r, page)).or_insert_with(|| range[start..end].to_vec())
                }
                None => {
                    let mut copy = range[at..at + n].to_vec();
                    drop(overlay);
                    f(&mut copy, done);
                    done += n;
                    continue;
                }
            };
            f(&mut bytes[at - start..at - start + n], done);
            done += n;
        }
        Ok(())
    }
}

impl Memory for Shadow<'_> {
    fn load(&self, addr: u64, out: &mut [u8]) -> Result<(), MemFault> {
        let len = out.len();
        self.pieces(addr, len, false, |b, at| out[at..at + b.len()].copy_from_slice(b))
    }

    fn store(&self, addr: u64, data: &[u8]) -> Result<(), MemFault> {
        self.pieces(addr, data.len(), true, |b, at| b.copy_from_slice(&data[at..at + b.len()]))
    }

    fn atomic(&self, addr: u64, size: u8, op: AtomicOp, value: u64, compare: u64) -> Result<u64, MemFault> {
        // Checked work-groups run one at a time: a read and a write are atomic here.
        let mut old = [0u8; 8];
        let n = usize::from(size.min(8));
        self.load(addr, &mut old[..n])?;
        let old = u64::from_le_bytes(old);
        let new = op.apply(old, value, compare, size).to_le_bytes();
        self.store(addr, &new[..n])?;
        Ok(old)
    }
}

/// The dispatches being checked on one machine, behind the lock that runs checked
/// work-groups one at a time.
#[derive(Default)]
pub(crate) struct Checker {
    runs: Mutex<HashMap<(u64, u64), Run>>,
}

/// The first address where device memory differs from `before` under `overlay`, with the u32
/// the twin and the machine code left there.
fn first_difference(
    mem: &MemView<'_>,
    before: &Image,
    overlay: &HashMap<(usize, usize), Vec<u8>>,
) -> Option<(u64, u32, u32)> {
    let now = Image::take(mem);
    for (r, (va, was)) in before.0.iter().enumerate() {
        let Some((_, is)) = now.0.iter().find(|(v, b)| v == va && b.len() == was.len()) else { continue };
        for (page, twin) in is.chunks(PAGE as usize).enumerate() {
            let start = page * PAGE as usize;
            let code = overlay.get(&(r, page)).map_or(&was[start..start + twin.len()], Vec::as_slice);
            if twin == code {
                continue;
            }
            if let Some(i) = twin.iter().zip(code).position(|(a, b)| a != b) {
                let word = |v: &[u8]| {
                    let at = i & !3;
                    let mut w = [0u8; 4];
                    for (k, b) in w.iter_mut().enumerate() {
                        *b = v.get(at + k).copied().unwrap_or(0);
                    }
                    u32::from_le_bytes(w)
                };
                return Some((va + (start + (i & !3)) as u64, word(twin), word(code)));
            }
        }
    }
    None
}

/// A twin that runs `twin` on device memory and `code` on the dispatch's copy, and fails the
/// dispatch where they differ.
pub(crate) fn checked(twin: Twin, code: MachineCode, checker: Arc<Checker>) -> Twin {
    let name = twin.name.clone();
    let (args, kernarg_size, label) = (twin.args.clone(), twin.kernarg_size, name.to_string());
    let mut checked = Twin::new(&label, kernarg_size, move |ctx: &KernelCtx<'_>, wg| {
        let mut runs = checker.runs.lock().unwrap_or_else(|e| e.into_inner());
        let key = (ctx.packet_address, ctx.dispatch_id);
        let total = ctx.workgroup_count.iter().map(|&n| u64::from(n)).product();
        let run = runs.entry(key).or_insert_with(|| Run {
            before: Some(Image::take(ctx.mem)),
            overlay: HashMap::new(),
            done: 0,
            total,
        });
        run.done += 1;
        let finished = run.done >= run.total;
        let Some(before) = run.before.as_ref() else {
            // An earlier work-group of this dispatch differed: it has failed already.
            if finished {
                runs.remove(&key);
            }
            return Err(KernelError::Trap);
        };
        let by_twin = (twin.f)(ctx, wg);
        let shadow = Shadow { before, overlay: RefCell::new(std::mem::take(&mut run.overlay)) };
        let by_code = code(ctx, wg, &shadow);
        run.overlay = shadow.overlay.into_inner();
        let verdict = if by_twin != by_code {
            eprintln!(
                "aqueduct-kfd-emu: check: kernel `{name}`, work-group {wg:?}: the twin ended {by_twin:?}, \
                 the machine code {by_code:?}: dispatch fails"
            );
            Err(KernelError::Trap)
        } else if finished {
            match first_difference(ctx.mem, before, &run.overlay) {
                Some((va, t, c)) => {
                    eprintln!(
                        "aqueduct-kfd-emu: check: kernel `{name}`: memory differs at {va:#x} \
                         (twin {t:#010x}, machine code {c:#010x}): dispatch fails"
                    );
                    Err(KernelError::Trap)
                }
                None => by_twin,
            }
        } else {
            by_twin
        };
        if finished {
            runs.remove(&key);
        } else if verdict.is_err() {
            run.before = None;
            run.overlay.clear();
        }
        verdict
    });
    checked.args = args;
    checked
}
