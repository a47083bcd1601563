//! Kernels run as their own gfx90a or gfx940 machine code (docs/architecture.md rule 6;
//! docs/executor.md): a gfx90a device runs gfx90a code, a gfx942 device the gfx940 code clang-15
//! builds for the MI300 family (`device_target`).
//!
//! A code-object kernel the registry cannot bind to a host twin — or every code-object kernel
//! under `AQUEDUCT_EMU_KERNELS=isa` — becomes an `isa_twin`: its code is read from device
//! memory and decoded once, when the kernel object is first resolved (the registry then caches
//! the binding per kernel object beside the twins), and each work-group runs on
//! `aqueduct_isa::exec` with the initial state the descriptor, the dispatch packet and the
//! queue's `amd_queue_t` define. Memory goes through the work-group's [`MemView`], so an access
//! outside a mapping is the memory fault the queue reports for twins; any other executor error
//! (an unimplemented instruction, a trap, the watchdog) is printed with the kernel's name, PC
//! and instruction, and fails the dispatch as a twin's trap does.

use std::sync::Arc;

use aqueduct_isa::exec::{self, AtomicOp, MemFault, Memory};
use aqueduct_isa::Target;

use crate::memory::{KernelError, MemView};
use crate::twin::{KernelCtx, Twin};

/// The instruction set a device of `profile` runs as machine code: gfx90a's, or for the gfx942
/// (MI300X) device gfx940's (CDNA3; the loader accepts gfx940 code objects there, `amdhsa`'s
/// `TargetId::runs_on`); `None` for gfx1100 (RDNA3), whose kernels need twins.
pub(crate) fn device_target(profile: crate::topology::GpuProfile) -> Option<Target> {
    match profile {
        crate::topology::GpuProfile::Gfx90a => Some(Target::Gfx90a),
        crate::topology::GpuProfile::Gfx942 => Some(Target::Gfx940),
        crate::topology::GpuProfile::Gfx1100 => None,
    }
}

/// Which implementation runs a code-object kernel (`AQUEDUCT_EMU_KERNELS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KernelMode {
    /// The host twin if one is bound, else the machine code (the default).
    #[default]
    Auto,
    /// Always the machine code (host kernels and the built-in blits stay twins).
    Isa,
    /// Host twins only: a kernel without one fails its dispatch (the behaviour before the
    /// executor).
    Twin,
    /// Both, where a kernel has a twin: each work-group runs as the twin and as machine code
    /// from the same memory, and any difference fails the dispatch (`crate::check`). Kernels
    /// without a twin run as machine code.
    Check,
}

impl KernelMode {
    /// `AQUEDUCT_EMU_KERNELS` (`isa`, `twin`, `check`, `auto`).
    pub fn from_env() -> KernelMode {
        match std::env::var("AQUEDUCT_EMU_KERNELS").as_deref().map(str::trim) {
            Ok("isa") => KernelMode::Isa,
            Ok("twin") => KernelMode::Twin,
            Ok("check") => KernelMode::Check,
            _ => KernelMode::Auto,
        }
    }
}

/// The watchdog: instructions one wave may run (`AQUEDUCT_EMU_WATCHDOG`, default 2^32).
pub fn watchdog_from_env() -> u64 {
    std::env::var("AQUEDUCT_EMU_WATCHDOG")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(exec::DEFAULT_WATCHDOG)
}

/// Device memory for the executor: the work-group's view of the GPU's translation, with the
/// device's clock and the queue's events.
pub(crate) struct Device<'a>(pub(crate) &'a MemView<'a>, pub(crate) &'a KernelCtx<'a>);

impl Device<'_> {
    /// The dwords of a full-EXEC unit-stride access of `n` dwords per lane, when they lie in
    /// one mapped buffer and are aligned.
    fn span(&self, addrs: &[u64; exec::LANES], mask: u64, n: usize) -> Option<crate::memory::DeviceSlice<'_, u32>> {
        if !exec::unit_stride(addrs, mask, n) {
            return None;
        }
        self.0.slice::<u32>(addrs[0], (n * exec::LANES) as u64).ok()
    }
}

fn fault(e: KernelError, at: u64) -> MemFault {
    match e {
        KernelError::MemoryFault(va) => MemFault(va),
        _ => MemFault(at),
    }
}

impl Memory for Device<'_> {
    fn load(&self, addr: u64, out: &mut [u8]) -> Result<(), MemFault> {
        match out.len() {
            4 if addr % 4 == 0 => {
                out.copy_from_slice(&self.0.read_u32(addr).map_err(|e| fault(e, addr))?.to_le_bytes());
                Ok(())
            }
            8 if addr % 8 == 0 => {
                out.copy_from_slice(&self.0.read_u64(addr).map_err(|e| fault(e, addr))?.to_le_bytes());
                Ok(())
            }
            _ => self.0.read(addr, out).map_err(|e| fault(e, addr)),
        }
    }
    fn store(&self, addr: u64, data: &[u8]) -> Result<(), MemFault> {
        match data.len() {
            4 if addr % 4 == 0 => {
                let v = u32::from_le_bytes([data[0], data[1], data[2], data[3]]);
                self.0.write_u32(addr, v).map_err(|e| fault(e, addr))
            }
            _ => self.0.write(addr, data).map_err(|e| fault(e, addr)),
        }
    }
    fn gather(
        &self,
        addrs: &[u64; exec::LANES],
        mask: u64,
        dwords: usize,
        out: &mut [[u32; exec::LANES]; 4],
    ) -> Result<(), MemFault> {
        // A full-EXEC unit-stride access inside one buffer: one translation for the wave
        // (docs/executor.md §6 "speed"), each dword still one 32-bit access; else lane by
        // lane, so a fault names the same lane's address.
        let n = dwords.min(4);
        if let Some(s) = self.span(addrs, mask, n) {
            for (k, o) in out.iter_mut().enumerate().take(n) {
                for (l, d) in o.iter_mut().enumerate() {
                    *d = s.get(n * l + k).map_err(|e| fault(e, addrs[l]))?;
                }
            }
            return Ok(());
        }
        exec::gather_by_lane(self, addrs, mask, dwords, out)
    }
    fn scatter(
        &self,
        addrs: &[u64; exec::LANES],
        mask: u64,
        dwords: usize,
        data: &[[u32; exec::LANES]; 4],
    ) -> Result<(), MemFault> {
        let n = dwords.min(4);
        if let Some(s) = self.span(addrs, mask, n) {
            for (k, v) in data.iter().enumerate().take(n) {
                for (l, x) in v.iter().enumerate() {
                    s.set(n * l + k, *x).map_err(|e| fault(e, addrs[l]))?;
                }
            }
            return Ok(());
        }
        exec::scatter_by_lane(self, addrs, mask, dwords, data)
    }
    fn atomic(&self, addr: u64, size: u8, op: AtomicOp, value: u64, compare: u64) -> Result<u64, MemFault> {
        self.0.fetch_update(addr, size, |old| op.apply(old, value, compare, size)).map_err(|e| fault(e, addr))
    }
    fn realtime(&self) -> u64 {
        self.1.clock.gpu_ticks()
    }
    fn interrupt(&self, context: u32) {
        // The context carries 8 bits of the event id (docs/executor.md §5): the event is set
        // when that id's mailbox slot was posted, as KFD's interrupt handler does.
        self.1.events.interrupt_posted(context);
    }
}

/// Most code bytes read from the entry point when the image names no function there (the
/// decoder stops earlier at the first word that is not an instruction).
const MAX_CODE: u64 = 1 << 20;

/// The machine code from `entry` on: the function's bytes when the loaded image has its
/// symbol, else whole pages while they are mapped, up to [`MAX_CODE`].
fn read_code(mem: &MemView<'_>, entry: u64) -> Vec<u32> {
    if let Some(size) = crate::naming::elf_code_size(mem, entry).filter(|&s| s <= 64 * MAX_CODE) {
        let mut bytes = vec![0u8; size.next_multiple_of(4) as usize];
        if mem.read(entry, &mut bytes).is_ok() {
            return bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        }
    }
    let mut bytes = Vec::new();
    let mut at = entry;
    while (bytes.len() as u64) < MAX_CODE {
        // To the end of this page, then page by page.
        let n = (4096 - (at % 4096)) as usize;
        let mut page = vec![0u8; n];
        if mem.read(at, &mut page).is_err() {
            break;
        }
        bytes.extend_from_slice(&page);
        at += n as u64;
    }
    bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// Most bytes of a code object's text decoded for kernels that call device functions.
const MAX_TEXT: u64 = 64 << 20;

/// The decoded texts of code objects whose kernels call device functions (docs/executor.md
/// §4): one decode per loaded text, shared by its kernels, keyed by address, size and a hash
/// of the bytes (an image loaded later at the same address decodes anew). The few most
/// recent are kept.
#[derive(Default)]
pub(crate) struct TextCache(std::sync::Mutex<Vec<(u64, u64, u64, exec::Code)>>);

impl std::fmt::Debug for TextCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TextCache")
    }
}

/// Texts a [`TextCache`] keeps.
const TEXTS_KEPT: usize = 8;

fn fnv1a(words: &[u32]) -> u64 {
    words.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &w| (h ^ u64::from(w)).wrapping_mul(0x100_0000_01b3))
}

impl TextCache {
    /// The whole text containing `entry`, decoded from its start and from `entry`; `None`
    /// when the image or its text cannot be read.
    fn text(&self, mem: &MemView<'_>, entry: u64, target: Target) -> Option<exec::Code> {
        let (start, len) = crate::naming::elf_text_segment(mem, entry).filter(|&(_, l)| l <= MAX_TEXT)?;
        let mut bytes = vec![0u8; (len as usize).next_multiple_of(4)];
        mem.read(start, &mut bytes).ok()?;
        let words: Vec<u32> = bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        let hash = fnv1a(&words);
        let mut texts = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = texts.iter().position(|t| t.0 == start && t.1 == len && t.2 == hash && t.3.target() == target)
        {
            let t = texts.remove(i);
            if t.3.index_at(entry).is_some() {
                let code = t.3.clone();
                texts.push(t);
                return Some(code);
            }
        }
        // Decoded from the text's start (a code object's text is all instructions and s_nop
        // padding) and from this entry, should decoding stop before it.
        let code = exec::Code::decode_at_for(target, start, &words, &[entry]);
        code.index_at(entry)?;
        if texts.len() >= TEXTS_KEPT {
            texts.remove(0);
        }
        texts.push((start, len, hash, code.clone()));
        Some(code)
    }
}

/// Offsets in `amd_queue_t` (docs/kfd-aql.md §4.3) of the scratch fields.
const TMPRING: usize = std::mem::offset_of!(crate::abi::AmdQueue, compute_tmpring_size);
const SCRATCH_SRD: usize = std::mem::offset_of!(crate::abi::AmdQueue, scratch_resource_descriptor);
const SCRATCH_BASE: usize = std::mem::offset_of!(crate::abi::AmdQueue, scratch_backing_memory_location);
const SCRATCH_SIZE: usize = std::mem::offset_of!(crate::abi::AmdQueue, scratch_backing_memory_byte_size);

/// The queue's scratch as its `amd_queue_t` describes it (none if it cannot be read).
fn scratch(mem: &MemView<'_>, queue: u64) -> exec::Scratch {
    let mut b = [0u8; SCRATCH_SIZE + 8 - TMPRING];
    if queue == 0 || mem.read(queue + TMPRING as u64, &mut b).is_err() {
        return exec::Scratch::default();
    }
    let u32_at =
        |o: usize| u32::from_le_bytes([b[o - TMPRING], b[o - TMPRING + 1], b[o - TMPRING + 2], b[o - TMPRING + 3]]);
    let u64_at = |o: usize| u64::from(u32_at(o)) | u64::from(u32_at(o + 4)) << 32;
    exec::Scratch {
        resource: [0, 4, 8, 12].map(|k| u32_at(SCRATCH_SRD + k)),
        base: u64_at(SCRATCH_BASE),
        bytes: u64_at(SCRATCH_SIZE),
        tmpring: u32_at(TMPRING),
    }
}

/// A kernel's machine code, decoded: runs one work-group against the memory it is given.
pub(crate) type MachineCode =
    Arc<dyn Fn(&KernelCtx<'_>, [u32; 3], &dyn Memory) -> Result<(), KernelError> + Send + Sync>;

/// The kernel object's machine code, or `None` (reported on stderr) when the descriptor is not
/// one the executor can run.
pub(crate) fn machine_code(
    name: &str,
    object: u64,
    kd: &[u8; 64],
    mem: &MemView<'_>,
    watchdog: u64,
    texts: &TextCache,
    target: Target,
) -> Option<MachineCode> {
    let descriptor = match amdhsa::KernelDescriptor::from_bytes(kd) {
        Ok(d) => d,
        Err(e) => {
            eprintln!(
                "aqueduct-kfd-emu: kernel `{name}` at {object:#x}: not a kernel descriptor ({e}): dispatch fails"
            );
            return None;
        }
    };
    if descriptor.wave32() {
        eprintln!("aqueduct-kfd-emu: kernel `{name}` at {object:#x} is wave32: the executor runs wave64 only");
        return None;
    }
    let entry = object.checked_add_signed(descriptor.kernel_code_entry_byte_offset)?;
    let mut code = exec::Code::decode_for(target, entry, &read_code(mem, entry));
    // A kernel that calls device functions (or jumps through a register) runs on its code
    // object's whole text, so the callees are decoded too.
    if code.has_calls() {
        if let Some(text) = texts.text(mem, entry, target) {
            code = text;
        }
    }
    let kernel = exec::Kernel { code, descriptor, entry };
    let limits = exec::Limits { wave_instructions: watchdog };
    let label: Arc<str> = Arc::from(name);
    Some(Arc::new(move |ctx: &KernelCtx<'_>, wg, m: &dyn Memory| run(&kernel, &label, &limits, ctx, wg, m)))
}

/// A twin that runs the kernel object's machine code on device memory (see [`machine_code`]).
pub(crate) fn isa_twin(
    name: &str,
    object: u64,
    kd: &[u8; 64],
    mem: &MemView<'_>,
    watchdog: u64,
    texts: &TextCache,
    target: Target,
) -> Option<Twin> {
    let code = machine_code(name, object, kd, mem, watchdog, texts, target)?;
    let mut twin = Twin::new(name, 0, move |ctx: &KernelCtx<'_>, wg| code(ctx, wg, &Device(ctx.mem, ctx)));
    twin.machine_code = true;
    Some(twin)
}

fn run(
    kernel: &exec::Kernel,
    name: &str,
    limits: &exec::Limits,
    ctx: &KernelCtx<'_>,
    wg: [u32; 3],
    mem: &dyn Memory,
) -> Result<(), KernelError> {
    let d = exec::Dispatch {
        packet_address: ctx.packet_address,
        queue_address: ctx.queue_address,
        kernarg_address: ctx.packet.kernarg_address,
        dispatch_id: ctx.dispatch_id,
        grid: ctx.grid,
        workgroup_size: ctx.workgroup_size,
        group_segment_size: ctx.packet.group_segment_size,
        private_segment_size: ctx.packet.private_segment_size,
        scratch: scratch(ctx.mem, ctx.queue_address),
    };
    let slot_base = ctx.worker.saturating_mul(exec::MAX_WAVES);
    exec::run_work_group(kernel, &d, wg, slot_base, mem, limits).map_err(|e| {
        eprintln!("aqueduct-kfd-emu: kernel `{name}` (machine code), work-group {wg:?}: {e}: dispatch fails");
        match e.kind {
            exec::ExecErrorKind::MemoryFault(va) => KernelError::MemoryFault(va),
            _ => KernelError::Trap,
        }
    })
}
