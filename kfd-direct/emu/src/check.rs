//! `AQUEDUCT_EMU_KERNELS=check`: a kernel with a host twin runs both ways, the twin as the
//! machine code's oracle (docs/executor.md §4).
//!
//! Both run on copies of device memory, so neither sees the other's stores and nothing else
//! that writes device memory meanwhile (the host queueing its next packets and kernel
//! arguments, signals, copy engines) is mistaken for a kernel's store. When a dispatch's first
//! work-group starts, every byte the device maps is copied twice: the *before* image, which
//! the machine code reads under an *overlay* of the pages it writes, and the twin's copy,
//! which the twin reads and writes through a translation of its own. When the last work-group
//! has run, every page either side wrote must hold the same bytes on both sides, and each
//! work-group must have ended the same way both times (done, or the same fault). A difference
//! is printed with the kernel and the first differing address and fails the dispatch as a trap
//! does; otherwise the machine code's stores (the bytes of the overlay that differ from the
//! before image) are written to device memory, and the dispatch completes.
//!
//! Checked work-groups run one at a time (the checker's lock). Costs per dispatch: two copies
//! of mapped memory (the buffers reused from one dispatch to the next) and one comparison.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use aqueduct_isa::exec::{AtomicOp, MemFault, Memory};

use crate::isa::MachineCode;
use crate::memory::{KernelError, MemView, Translation};
use crate::twin::{KernelCtx, Twin};

/// Bytes of one overlay page.
const PAGE: usize = 4096;

/// Every GPU-mapped range of the device that kernels own (not the queues' buffers, doorbells
/// or MMIO), in address order, with its bytes.
#[derive(Default)]
struct Image(Vec<(u64, Vec<u8>)>);

impl Image {
    /// Device memory now, into the buffers of `spare` where their sizes fit (an image is tens
    /// of MiB: reusing one spares the allocation and its page faults).
    fn take(mem: &MemView<'_>, spare: Image) -> Image {
        let mut old = spare.0.into_iter();
        Image(
            mem.tr
                .kernel_ranges()
                .map(|(va, len)| {
                    let mut bytes = match old.next() {
                        Some((_, b)) if b.len() as u64 == len => b,
                        _ => vec![0u8; len as usize],
                    };
                    // A mapped range is readable; one that is not reads as zeros.
                    if mem.read(va, &mut bytes).is_err() {
                        bytes.fill(0);
                    }
                    (va, bytes)
                })
                .collect(),
        )
    }

    /// A copy of this image, into the buffers of `spare` where their sizes fit.
    fn copy_into(&self, spare: Image) -> Image {
        let mut old = spare.0.into_iter();
        Image(
            self.0
                .iter()
                .map(|(va, bytes)| match old.next() {
                    Some((_, mut b)) if b.len() == bytes.len() => {
                        b.copy_from_slice(bytes);
                        (*va, b)
                    }
                    _ => (*va, bytes.clone()),
                })
                .collect(),
        )
    }

    /// The range holding `[addr, addr + len)`: its index and the offset of `addr` in it;
    /// `None` when no range of the image holds it.
    fn find(&self, addr: u64, len: usize) -> Option<(usize, usize)> {
        let i = self.0.partition_point(|(va, _)| *va <= addr).checked_sub(1)?;
        let (va, bytes) = &self.0[i];
        let off = (addr - va) as usize;
        off.checked_add(len).is_some_and(|end| end <= bytes.len()).then_some((i, off))
    }
}

/// The machine code's stores: (range index, page index in the range) → the page's bytes.
type Overlay = HashMap<(usize, usize), Vec<u8>>;

/// One dispatch being checked.
struct Run {
    /// Device memory when the dispatch's first work-group started.
    before: Image,
    /// The twin's copy of it, and the translation that points the twin there.
    twin: Image,
    twin_view: Translation,
    overlay: Overlay,
    /// Work-groups run, and in all.
    done: u64,
    total: u64,
    /// An earlier work-group differed: the dispatch has failed.
    failed: bool,
}

/// The machine code's view of memory: the before image under its overlay, and device memory
/// itself for the engines' ranges (a kernel reads its queue's `amd_queue_t`).
struct Shadow<'a> {
    before: &'a Image,
    overlay: RefCell<Overlay>,
    device: crate::isa::Device<'a>,
}

impl Shadow<'_> {
    /// Runs `f` on each piece of `[addr, addr + len)` within one page, with the piece's offset
    /// in the access; a page is copied into the overlay first when `write`.
    fn pieces(&self, addr: u64, len: usize, write: bool, mut f: impl FnMut(&mut [u8], usize)) -> Result<(), MemFault> {
        let Some((r, off)) = self.before.find(addr, len) else {
            // The engines' memory, or no mapping (then the device view reports the fault).
            let mut bytes = vec![0u8; len];
            if !write {
                self.device.load(addr, &mut bytes)?;
            }
            f(&mut bytes, 0);
            return if write { self.device.store(addr, &bytes) } else { Ok(()) };
        };
        let range = &self.before.0[r].1;
        let mut done = 0;
        while done < len {
            let at = off + done;
            let (page, start) = (at / PAGE, at / PAGE * PAGE);
            let n = (start + PAGE - at).min(len - done);
            let mut overlay = self.overlay.borrow_mut();
            if write && !overlay.contains_key(&(r, page)) {
                let end = (start + PAGE).min(range.len());
                overlay.insert((r, page), range[start..end].to_vec());
            }
            match overlay.get_mut(&(r, page)) {
                Some(p) => f(&mut p[at - start..at - start + n], done),
                None => f(&mut range[at..at + n].to_vec(), done),
            }
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

    fn realtime(&self) -> u64 {
        self.device.realtime()
    }

    fn interrupt(&self, context: u32) {
        self.device.interrupt(context);
    }
}

/// The dispatches being checked on one machine, behind the lock that runs checked
/// work-groups one at a time.
#[derive(Default)]
pub(crate) struct Checker {
    runs: Mutex<HashMap<(u64, u64), Run>>,
    /// The last finished dispatch's images, reused by the next.
    spare: Mutex<(Image, Image)>,
}

/// The first address where the twin's copy and the machine code's view differ, on any page
/// either side wrote, with the u32 each holds there.
fn first_difference(run: &Run) -> Option<(u64, u32, u32)> {
    for (r, ((va, was), (_, twin))) in run.before.0.iter().zip(&run.twin.0).enumerate() {
        for (page, (old, twin)) in was.chunks(PAGE).zip(twin.chunks(PAGE)).enumerate() {
            let code = run.overlay.get(&(r, page)).map_or(old, Vec::as_slice);
            if twin == code {
                continue;
            }
            let i = twin.iter().zip(code).position(|(a, b)| a != b).unwrap_or(0) & !3;
            let word = |v: &[u8]| {
                let mut w = [0u8; 4];
                for (k, b) in w.iter_mut().enumerate() {
                    *b = v.get(i + k).copied().unwrap_or(0);
                }
                u32::from_le_bytes(w)
            };
            return Some((va + (page * PAGE + i) as u64, word(twin), word(code)));
        }
    }
    None
}

/// Writes the machine code's stores to device memory: the overlay's bytes that differ from
/// the before image, in runs.
fn commit(run: &Run, mem: &MemView<'_>) {
    for (&(r, page), bytes) in &run.overlay {
        let (va, was) = &run.before.0[r];
        let start = page * PAGE;
        let old = &was[start..start + bytes.len()];
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == old[i] {
                i += 1;
                continue;
            }
            let end = (i..bytes.len()).find(|&j| bytes[j] == old[j]).unwrap_or(bytes.len());
            let _ = mem.write(va + (start + i) as u64, &bytes[i..end]);
            i = end;
        }
    }
}

/// A twin that runs `twin` and `code` each on its own copy of device memory, and fails the
/// dispatch where they differ.
pub(crate) fn checked(twin: Twin, code: MachineCode, checker: Arc<Checker>) -> Twin {
    let name = twin.name.clone();
    let (args, kernarg_size, label) = (twin.args.clone(), twin.kernarg_size, name.to_string());
    let mut checked = Twin::new(&label, kernarg_size, move |ctx: &KernelCtx<'_>, wg| {
        let mut runs = checker.runs.lock().unwrap_or_else(|e| e.into_inner());
        let key = (ctx.packet_address, ctx.dispatch_id);
        let run = runs.entry(key).or_insert_with(|| {
            let (b, t) = std::mem::take(&mut *checker.spare.lock().unwrap_or_else(|e| e.into_inner()));
            let before = Image::take(ctx.mem, b);
            // A copy of the image, not a second read: the host may write between two reads.
            let mut twin_copy = before.copy_into(t);
            let bases: HashMap<u64, *mut u8> = twin_copy.0.iter_mut().map(|(va, b)| (*va, b.as_mut_ptr())).collect();
            let twin_view = ctx.mem.tr.relocated(|va| bases.get(&va).copied());
            let total = ctx.workgroup_count.iter().map(|&n| u64::from(n)).product();
            Run { before, twin: twin_copy, twin_view, overlay: HashMap::new(), done: 0, total, failed: false }
        });
        run.done += 1;
        let finished = run.done >= run.total;
        let verdict = if run.failed {
            Err(KernelError::Trap)
        } else {
            let view = MemView::new(&run.twin_view);
            let twin_ctx = KernelCtx { mem: &view, ..*ctx };
            let by_twin = (twin.f)(&twin_ctx, wg);
            let shadow = Shadow {
                before: &run.before,
                overlay: RefCell::new(std::mem::take(&mut run.overlay)),
                device: crate::isa::Device(ctx.mem, ctx),
            };
            let by_code = code(ctx, wg, &shadow);
            run.overlay = shadow.overlay.into_inner();
            if by_twin != by_code {
                eprintln!(
                    "aqueduct-kfd-emu: check: kernel `{name}`, work-group {wg:?}: the twin ended {by_twin:?}, \
                     the machine code {by_code:?}: dispatch fails"
                );
                Err(KernelError::Trap)
            } else if finished {
                match first_difference(run) {
                    Some((va, t, c)) => {
                        eprintln!(
                            "aqueduct-kfd-emu: check: kernel `{name}`: memory differs at {va:#x} \
                             (twin {t:#010x}, machine code {c:#010x}): dispatch fails"
                        );
                        Err(KernelError::Trap)
                    }
                    None => {
                        commit(run, ctx.mem);
                        by_code
                    }
                }
            } else {
                by_code
            }
        };
        run.failed |= verdict.is_err();
        if finished {
            if let Some(run) = runs.remove(&key) {
                *checker.spare.lock().unwrap_or_else(|e| e.into_inner()) = (run.before, run.twin);
            }
        } else if verdict.is_err() {
            // The dispatch has failed: keep only the count of its work-groups (`twin_view` is
            // never used again once `failed` is set).
            run.before = Image::default();
            run.twin = Image::default();
            run.overlay.clear();
        }
        verdict
    });
    checked.args = args;
    checked
}
