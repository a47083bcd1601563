//! Test harness: drives the emulator through its syscall surface exactly as a kfd-direct runtime
//! would (open, ioctl with the real structs, mmap of handed-out offsets), and publishes packets
//! with core's `AqlRing`.

#![allow(dead_code, missing_docs)]

use std::ffi::c_void;
use std::ptr::NonNull;
use std::time::{Duration, Instant};

use aqueduct::aql::{AqlRing, KernelDispatchPacket, Packet, DISPATCH_HEADER};
use aqueduct::AmdSignal;
use aqueduct_kfd_emu::abi::*;
use aqueduct_kfd_emu::{Emu, EmuConfig, Errno, Fd, GpuProfile, QueueState, SysResult};
use portable_atomic::AtomicU64 as RingIndex;

pub const GTT: u32 = mem_flags::GTT
    | mem_flags::WRITABLE
    | mem_flags::EXECUTABLE
    | mem_flags::COHERENT
    | mem_flags::UNCACHED
    | mem_flags::NO_SUBSTITUTE;
pub const VRAM: u32 = mem_flags::VRAM | mem_flags::WRITABLE | mem_flags::EXECUTABLE | mem_flags::NO_SUBSTITUTE;

/// Issues an ioctl with a typed argument.
pub fn ioctl<T>(emu: &Emu, fd: Fd, request: u64, arg: &mut T) -> SysResult<i32> {
    // SAFETY: `arg` is a live, writable struct of the request's size.
    unsafe { emu.ioctl(fd, request, (arg as *mut T).cast()) }
}

/// Reserves CPU VA as a runtime does (PROT_NONE anonymous mapping).
pub fn reserve_va(size: u64) -> u64 {
    // SAFETY: a fresh anonymous reservation.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size as usize,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED);
    p as u64
}

#[derive(Debug, Clone, Copy)]
pub struct Buffer {
    pub va: u64,
    pub size: u64,
    pub handle: u64,
    pub mmap_offset: u64,
}

impl Buffer {
    pub fn ptr<T>(&self) -> *mut T {
        std::ptr::with_exposed_provenance_mut(self.va as usize)
    }
}

pub struct Harness {
    pub emu: Emu,
    pub kfd: Fd,
    pub render: Vec<Fd>,
    pub gpu_ids: Vec<u32>,
}

impl Harness {
    pub fn new() -> Harness {
        Harness::with(EmuConfig::default())
    }

    pub fn with(config: EmuConfig) -> Harness {
        let emu = Emu::new(config).expect("emulator");
        let kfd = emu.open("/dev/kfd", libc::O_RDWR | libc::O_CLOEXEC).unwrap();
        let mut render = Vec::new();
        let mut gpu_ids = Vec::new();
        for g in emu.gpus().to_vec() {
            let fd = emu.open(&format!("/dev/dri/renderD{}", g.drm_render_minor), libc::O_RDWR).unwrap();
            let mut a = AcquireVmArgs { drm_fd: fd as u32, gpu_id: g.gpu_id };
            ioctl(&emu, kfd, request::ACQUIRE_VM, &mut a).unwrap();
            render.push(fd);
            gpu_ids.push(g.gpu_id);
        }
        Harness { emu, kfd, render, gpu_ids }
    }

    pub fn profile(p: GpuProfile) -> Harness {
        Harness::with(EmuConfig::with_gpus(&[p]))
    }

    pub fn gpu(&self) -> u32 {
        self.gpu_ids[0]
    }

    /// ALLOC without mapping.
    pub fn alloc_raw(&self, gpu: u32, size: u64, flags: u32) -> SysResult<Buffer> {
        let va = reserve_va(size.next_multiple_of(4096));
        let mut a = AllocMemoryOfGpuArgs { va_addr: va, size, gpu_id: gpu, flags, ..Default::default() };
        ioctl(&self.emu, self.kfd, request::ALLOC_MEMORY_OF_GPU, &mut a)?;
        Ok(Buffer { va, size, handle: a.handle, mmap_offset: a.mmap_offset })
    }

    pub fn map_gpu(&self, b: &Buffer, gpus: &[u32]) -> SysResult<i32> {
        let mut a = MapMemoryArgs {
            handle: b.handle,
            device_ids_array_ptr: gpus.as_ptr() as u64,
            n_devices: gpus.len() as u32,
            n_success: 0,
        };
        ioctl(&self.emu, self.kfd, request::MAP_MEMORY_TO_GPU, &mut a)
    }

    pub fn unmap_gpu(&self, b: &Buffer, gpus: &[u32]) -> SysResult<i32> {
        let mut a = MapMemoryArgs {
            handle: b.handle,
            device_ids_array_ptr: gpus.as_ptr() as u64,
            n_devices: gpus.len() as u32,
            n_success: 0,
        };
        ioctl(&self.emu, self.kfd, request::UNMAP_MEMORY_FROM_GPU, &mut a)
    }

    pub fn cpu_map(&self, b: &Buffer, gpu_index: usize) {
        // SAFETY: the VA range was reserved by `reserve_va` for this buffer.
        let p = unsafe {
            self.emu.mmap(
                b.va as *mut c_void,
                b.size.next_multiple_of(4096) as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_FIXED,
                self.render[gpu_index],
                b.mmap_offset,
            )
        }
        .unwrap();
        assert_eq!(p as u64, b.va);
    }

    /// ALLOC + MAP + CPU map on GPU 0.
    pub fn alloc(&self, size: u64, flags: u32) -> Buffer {
        self.alloc_on(0, size, flags)
    }

    pub fn alloc_on(&self, gpu_index: usize, size: u64, flags: u32) -> Buffer {
        let gpu = self.gpu_ids[gpu_index];
        let b = self.alloc_raw(gpu, size, flags).unwrap();
        self.map_gpu(&b, &[gpu]).unwrap();
        self.cpu_map(&b, gpu_index);
        b
    }

    pub fn free(&self, b: &Buffer) -> SysResult<i32> {
        let mut a = FreeMemoryOfGpuArgs { handle: b.handle };
        ioctl(&self.emu, self.kfd, request::FREE_MEMORY_OF_GPU, &mut a)
    }

    pub fn event_page(&self) -> Buffer {
        self.alloc(limits::EVENT_PAGE_BYTES, GTT)
    }

    pub fn create_event(&self, ty: u32, auto_reset: bool, page: Option<&Buffer>) -> SysResult<CreateEventArgs> {
        let mut a = CreateEventArgs {
            event_page_offset: page.map_or(0, |p| p.handle),
            event_type: ty,
            auto_reset: auto_reset as u32,
            ..Default::default()
        };
        ioctl(&self.emu, self.kfd, request::CREATE_EVENT, &mut a)?;
        Ok(a)
    }

    pub fn wait_events(&self, ids: &[u32], all: bool, timeout_ms: u32) -> SysResult<(u32, Vec<EventData>)> {
        let mut data: Vec<EventData> = ids.iter().map(|&id| EventData { event_id: id, ..Default::default() }).collect();
        let mut a = WaitEventsArgs {
            events_ptr: data.as_mut_ptr() as u64,
            num_events: ids.len() as u32,
            wait_for_all: all as u32,
            timeout: timeout_ms,
            wait_result: 99,
        };
        ioctl(&self.emu, self.kfd, request::WAIT_EVENTS, &mut a)?;
        Ok((a.wait_result, data))
    }

    pub fn event_op(&self, request: u64, id: u32) -> SysResult<i32> {
        let mut a = EventIdArgs { event_id: id, pad: 0 };
        ioctl(&self.emu, self.kfd, request, &mut a)
    }

    /// Allocates a page of signals; returns the buffer (signals at +64·i).
    pub fn signals(&self) -> Buffer {
        let b = self.alloc(4096, GTT);
        for i in 0..64 {
            // SAFETY: the page is CPU-mapped; AmdSignal is 64 bytes of atomics.
            let s = unsafe { &*b.ptr::<AmdSignal>().add(i) };
            s.kind.store(1, std::sync::atomic::Ordering::Relaxed);
        }
        b
    }
}

pub fn signal(b: &Buffer, i: usize) -> &'static AmdSignal {
    // SAFETY: signal pages stay mapped for the test's duration (never freed).
    unsafe { &*b.ptr::<AmdSignal>().add(i) }
}

pub fn signal_handle(b: &Buffer, i: usize) -> u64 {
    b.va + 64 * i as u64
}

/// Everything a queue needs, built as ROCr would.
pub struct Queue {
    pub id: u32,
    pub amd_queue: Buffer,
    pub ring_buf: Buffer,
    pub eop: Buffer,
    pub cwsr: Buffer,
    pub ring: AqlRing,
    pub doorbell: *mut u64,
    pub args: CreateQueueArgs,
    pub gpu_index: usize,
    /// The producer's copy of the read index (core's `AqlRing::reserve_hinted`).
    pub read_hint: std::cell::Cell<u64>,
}

pub struct QueueSpec {
    pub packets: u32,
    pub priority: u32,
    pub percentage: u32,
    pub profiling: bool,
    pub ring_flags: u32,
    pub err_payload: u64,
    pub err_event: u32,
}

impl Default for QueueSpec {
    fn default() -> Self {
        QueueSpec {
            packets: 256,
            priority: 7,
            percentage: 100,
            profiling: false,
            ring_flags: GTT,
            err_payload: 0,
            err_event: 0,
        }
    }
}

impl Harness {
    /// Allocates the queue buffers and fills the create-queue arguments (not yet issued).
    pub fn queue_args(&self, gpu_index: usize, spec: &QueueSpec) -> (CreateQueueArgs, [Buffer; 4]) {
        let node = self.emu.gpus()[gpu_index];
        let sizes = node.props.queue_sizes();
        let amd_queue = self.alloc_on(gpu_index, 4096, GTT);
        let ring_bytes = u64::from(spec.packets) * 64;
        let ring_buf = self.alloc_on(gpu_index, ring_bytes, spec.ring_flags);
        let eop = self.alloc_on(gpu_index, 4096, VRAM);
        let cwsr = self.alloc_on(gpu_index, sizes.cwsr_bo_size, VRAM);
        // amd_queue_t as ROCr fills it.
        // SAFETY: the page is CPU-mapped and 4096 bytes long.
        let q = unsafe { &mut *amd_queue.ptr::<AmdQueue>() };
        q.hsa_queue.queue_type = 0;
        q.hsa_queue.features = 1;
        q.hsa_queue.base_address = ring_buf.va;
        q.hsa_queue.size = spec.packets;
        q.read_dispatch_id_field_base_byte_offset = 128;
        q.max_cu_id = node.props.cu_count() - 1;
        q.queue_properties =
            queue_properties::IS_PTR64 | if spec.profiling { queue_properties::ENABLE_PROFILING } else { 0 };
        // Every slot INVALID.
        for i in 0..spec.packets as usize {
            // SAFETY: inside the CPU-mapped ring.
            unsafe { *ring_buf.ptr::<u32>().add(i * 16) = 1 };
        }
        // CWSR header.
        let hdr = CwsrHeader { err_payload_addr: spec.err_payload, err_event_id: spec.err_event, ..Default::default() };
        // SAFETY: the CWSR BO is CPU-mapped (VRAM with a large BAR).
        unsafe { *cwsr.ptr::<CwsrHeader>() = hdr };
        let args = CreateQueueArgs {
            ring_base_address: ring_buf.va,
            write_pointer_address: amd_queue.va + 56,
            read_pointer_address: amd_queue.va + 128,
            ring_size: ring_bytes as u32,
            gpu_id: node.gpu_id,
            queue_type: queue_type::COMPUTE_AQL,
            queue_percentage: spec.percentage,
            queue_priority: spec.priority,
            eop_buffer_address: eop.va,
            eop_buffer_size: 4096,
            ctx_save_restore_address: cwsr.va,
            ctx_save_restore_size: sizes.cwsr_size,
            ctl_stack_size: sizes.ctl_stack_size,
            ..Default::default()
        };
        (args, [amd_queue, ring_buf, eop, cwsr])
    }

    pub fn create_queue_with(&self, gpu_index: usize, spec: &QueueSpec) -> Queue {
        let (mut args, [amd_queue, ring_buf, eop, cwsr]) = self.queue_args(gpu_index, spec);
        ioctl(&self.emu, self.kfd, request::CREATE_QUEUE, &mut args).unwrap();
        let base = args.doorbell_offset & !8191;
        // SAFETY: a fresh mapping of the doorbell slice at an address of the kernel's choice.
        let db = unsafe {
            self.emu.mmap(
                std::ptr::null_mut(),
                8192,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                self.kfd,
                base,
            )
        }
        .unwrap();
        let doorbell = (db as u64 + (args.doorbell_offset & 8191)) as *mut u64;
        // SAFETY: ring and amd_queue_t are CPU-mapped for the test's duration.
        let ring = unsafe {
            AqlRing::new(
                NonNull::new(ring_buf.ptr::<u8>()).unwrap(),
                spec.packets,
                NonNull::new((amd_queue.va + 56) as *mut RingIndex).unwrap(),
                NonNull::new((amd_queue.va + 128) as *mut RingIndex).unwrap(),
            )
        }
        .unwrap();
        let read_hint = std::cell::Cell::new(ring.read_index());
        Queue { id: args.queue_id, amd_queue, ring_buf, eop, cwsr, ring, doorbell, args, gpu_index, read_hint }
    }

    pub fn create_queue(&self) -> Queue {
        self.create_queue_with(0, &QueueSpec::default())
    }

    pub fn destroy_queue(&self, q: &Queue) -> SysResult<i32> {
        let mut a = DestroyQueueArgs { queue_id: q.id, pad: 0 };
        ioctl(&self.emu, self.kfd, request::DESTROY_QUEUE, &mut a)
    }
}

impl Queue {
    /// Publishes packets with core's protocol and rings the doorbell once.
    pub fn submit<P: Packet>(&self, packets: &[P]) -> u64 {
        let mut hint = self.read_hint.get();
        let mut r = self.ring.reserve_hinted(packets.len() as u32, 1 << 20, &mut hint).unwrap();
        self.read_hint.set(hint);
        for p in packets {
            r.write(p).unwrap();
        }
        let last = r.finish();
        self.ring_doorbell(last);
        last
    }

    pub fn ring_doorbell(&self, value: u64) {
        // Ordering: Release orders the published headers before the doorbell (core's publish).
        std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
        // SAFETY: the doorbell is inside the mapped slice.
        unsafe { std::ptr::write_volatile(self.doorbell, value) };
    }

    pub fn read_index(&self) -> u64 {
        self.ring.read_index()
    }
}

/// A dispatch packet for `object` with a 1-D grid.
pub fn dispatch(object: u64, kernarg: u64, grid: u32, wg: u16, signal: u64, barrier: bool) -> KernelDispatchPacket {
    let mut header = DISPATCH_HEADER.0;
    if !barrier {
        header &= !(1 << 8);
    }
    KernelDispatchPacket {
        header,
        setup: 1,
        workgroup_size_x: wg,
        workgroup_size_y: 1,
        workgroup_size_z: 1,
        grid_size_x: grid,
        grid_size_y: 1,
        grid_size_z: 1,
        kernel_object: object,
        kernarg_address: kernarg,
        completion_signal: signal,
        ..Default::default()
    }
}

/// Spins until `f` holds or `timeout` passes.
pub fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::yield_now();
    }
    f()
}

pub fn wait_signal(s: &AmdSignal, value: i64) -> bool {
    wait_until(Duration::from_secs(5), || s.load() == value)
}

pub fn expect_err(r: SysResult<i32>, e: Errno) {
    assert_eq!(r, Err(e));
}

/// Places the code object `elf` in a GTT buffer of `h` as a loader does (`amdhsa`: segments at
/// `base + p_vaddr`, relocated); returns the kernel objects of `names`.
#[allow(dead_code)]
pub fn place_code_object(h: &Harness, elf: &[u8], names: &[&str]) -> Vec<u64> {
    let co = amdhsa::CodeObject::parse(elf).expect("a code object");
    let code = h.alloc(co.image_size(), GTT);
    let mut image = vec![0u8; co.image_size() as usize];
    co.place(&mut image, code.va).expect("placed");
    // SAFETY: the code BO is CPU-mapped and image_size bytes long.
    unsafe { std::ptr::copy_nonoverlapping(image.as_ptr(), code.ptr::<u8>(), image.len()) };
    names.iter().map(|n| code.va + co.kernel(n).unwrap().expect("the kernel").descriptor_address).collect()
}

/// Writes `v` at byte `off` of the CPU-mapped buffer `b`.
#[allow(dead_code)]
pub fn write<T: Copy>(b: &Buffer, off: usize, v: T) {
    // SAFETY: CPU-mapped test buffer, `off` inside it.
    unsafe { std::ptr::write_unaligned(b.ptr::<u8>().add(off).cast::<T>(), v) }
}

/// The first `n` elements of the CPU-mapped buffer `b`.
#[allow(dead_code)]
pub fn read_slice<T: Copy>(b: &Buffer, n: usize) -> Vec<T> {
    // SAFETY: CPU-mapped test buffer of at least n elements.
    unsafe { std::slice::from_raw_parts(b.ptr::<T>(), n).to_vec() }
}

/// The gfx90a code object of the hipcc fixture `fixtures/isa/<name>.hip`, extracted from the
/// offload bundle `build.sh` wrote (`<name>-gfx90a.bundle`).
#[allow(dead_code)]
pub fn hipcc_fixture(name: &str) -> Vec<u8> {
    hipcc_fixture_for(name, Gpu::Mi210)
}

/// The emulated GPU a machine-code test runs on: the MI210 (gfx90a) or the MI300X (gfx942,
/// which runs the gfx940 code clang-15 builds for the MI300 family; docs/executor.md §8).
#[allow(dead_code)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gpu {
    Mi210,
    Mi300x,
}

#[allow(dead_code)]
impl Gpu {
    pub fn profile(self) -> GpuProfile {
        match self {
            Gpu::Mi210 => GpuProfile::Gfx90a,
            Gpu::Mi300x => GpuProfile::Gfx942,
        }
    }
    /// The processor the fixtures are built for (`gfx90a`, `gfx940`).
    pub fn code_target(self) -> &'static str {
        match self {
            Gpu::Mi210 => "gfx90a",
            Gpu::Mi300x => "gfx940",
        }
    }
    /// `config` with this GPU as the only device.
    pub fn config(self, config: EmuConfig) -> EmuConfig {
        EmuConfig { gpus: vec![self.profile()], ..config }
    }
}

/// The code object of the hipcc fixture `fixtures/isa/<name>.hip` for `gpu`, extracted from the
/// offload bundle `build.sh` wrote (`<name>-gfx90a.bundle`, `<name>-gfx940.bundle`).
#[allow(dead_code)]
pub fn hipcc_fixture_for(name: &str, gpu: Gpu) -> Vec<u8> {
    let t = gpu.code_target();
    let path = format!("{}/fixtures/isa/{name}-{t}.bundle", env!("CARGO_MANIFEST_DIR"));
    let bundle = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let b = amdhsa::Bundle::parse(&bundle).expect("an offload bundle");
    let e = b.entries().find(|e| e.target().is_some_and(|p| p.processor.name == t)).expect("an entry for the target");
    e.code.to_vec()
}

/// Runs a test body `fn name(gpu: Gpu)` on both machine-code GPUs: `gfx90a::name` on the MI210
/// and `gfx942::name` on the MI300X with the gfx940 build of the same fixture.
#[allow(unused_macros)]
macro_rules! on_both_gpus {
    ($($name:ident),* $(,)?) => {
        mod gfx90a {
            $(#[test] fn $name() { super::$name(super::common::Gpu::Mi210) })*
        }
        mod gfx942 {
            $(#[test] fn $name() { super::$name(super::common::Gpu::Mi300x) })*
        }
    };
}
#[allow(unused_imports)]
pub(crate) use on_both_gpus;

/// Runs `packets` on a fresh queue; `Ok` when their signal reached 0, else the queue's state.
#[allow(dead_code)]
pub fn run_packets(h: &Harness, packets: &mut [aqueduct::aql::KernelDispatchPacket]) -> Result<(), Option<QueueState>> {
    let q = h.create_queue();
    let sigs = h.signals();
    signal(&sigs, 0).reset(packets.len() as i64);
    for p in packets.iter_mut() {
        p.completion_signal = signal_handle(&sigs, 0);
    }
    q.submit(packets);
    if wait_signal(signal(&sigs, 0), 0) {
        Ok(())
    } else {
        Err(h.emu.queue_state(q.id))
    }
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
