//! The SDMA v4 engine, driven as ROCr 5.2's `BlitSdmaV4` drives it: packets written into a
//! byte-addressed ring, the monotonic byte write offset stored to the wptr word and rung on
//! the doorbell, the engine's read offset read back from the rptr word.

mod common;

use std::time::Duration;

use aqueduct_kfd_emu::abi::*;
use aqueduct_kfd_emu::{EmuConfig, Errno, QueueState};
use common::*;

const SHORT: Duration = Duration::from_millis(100);

/// An SDMA queue as libhsakmt builds one: `struct queue` page (wptr at +8, rptr at +16) and a
/// ring from the system allocator.
struct Sdma {
    id: u32,
    ring: Buffer,
    page: Buffer,
    doorbell: *mut u64,
    args: CreateQueueArgs,
    /// Producer's monotonic byte offset.
    wptr: std::cell::Cell<u64>,
}

fn sdma_args(h: &Harness, ty: u32, ring_bytes: u64) -> (CreateQueueArgs, Buffer, Buffer) {
    let page = h.alloc(4096, GTT);
    let ring = h.alloc(ring_bytes, GTT);
    let a = CreateQueueArgs {
        ring_base_address: ring.va,
        write_pointer_address: page.va + 8,
        read_pointer_address: page.va + 16,
        ring_size: ring_bytes as u32,
        gpu_id: h.gpu(),
        queue_type: ty,
        queue_percentage: 100,
        queue_priority: 15,
        ..Default::default()
    };
    (a, page, ring)
}

fn create(h: &Harness, a: &mut CreateQueueArgs) -> Result<i32, Errno> {
    ioctl(&h.emu, h.kfd, request::CREATE_QUEUE, a)
}

fn sdma_queue(h: &Harness, ty: u32, ring_bytes: u64) -> Sdma {
    let (mut args, page, ring) = sdma_args(h, ty, ring_bytes);
    create(h, &mut args).unwrap();
    let base = args.doorbell_offset & !8191;
    // SAFETY: a fresh mapping of the doorbell slice at an address of the kernel's choice.
    let db = unsafe {
        h.emu.mmap(std::ptr::null_mut(), 8192, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, h.kfd, base)
    }
    .unwrap();
    let doorbell = (db as u64 + (args.doorbell_offset & 8191)) as *mut u64;
    Sdma { id: args.queue_id, ring, page, doorbell, args, wptr: std::cell::Cell::new(0) }
}

impl Sdma {
    /// Writes the dwords at the write offset (padding the ring's tail with NOPs if they would
    /// straddle its end, as ROCr does), stores wptr and rings the doorbell.
    fn submit(&self, dws: &[u32]) {
        let size = self.ring.size;
        let bytes = dws.len() as u64 * 4;
        let mut w = self.wptr.get();
        if (w % size) + bytes > size {
            while w % size != 0 {
                self.put(w, 0);
                w += 4;
            }
        }
        for (i, d) in dws.iter().enumerate() {
            self.put(w + 4 * i as u64, *d);
        }
        w += bytes;
        self.wptr.set(w);
        // SAFETY: wptr word inside the CPU-mapped queue page.
        unsafe { std::ptr::write_volatile((self.page.va + 8) as *mut u64, w) };
        // Ordering: Release orders the packets before the doorbell (ROCr's release fence).
        std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
        // SAFETY: the doorbell is inside the mapped slice.
        unsafe { std::ptr::write_volatile(self.doorbell, w) };
    }

    fn put(&self, at: u64, v: u32) {
        // SAFETY: inside the CPU-mapped ring.
        unsafe { std::ptr::write_volatile((self.ring.va + at % self.ring.size) as *mut u32, v) };
    }

    fn rptr(&self) -> u64 {
        // SAFETY: rptr word inside the CPU-mapped queue page.
        unsafe { std::ptr::read_volatile((self.page.va + 16) as *const u64) }
    }

    fn wait_idle(&self) -> bool {
        wait_until(Duration::from_secs(5), || self.rptr() == self.wptr.get())
    }
}

fn lo(a: u64) -> u32 {
    a as u32
}

fn hi(a: u64) -> u32 {
    (a >> 32) as u32
}

fn copy_linear(dst: u64, src: u64, bytes: u32) -> [u32; 7] {
    [1, bytes - 1, 0, lo(src), hi(src), lo(dst), hi(dst)]
}

fn fill(dst: u64, value: u32, dwords: u32) -> [u32; 5] {
    [11 | (2 << 30), lo(dst), hi(dst), value, (dwords - 1) * 4]
}

fn fence(addr: u64, value: u32) -> [u32; 4] {
    [5, lo(addr), hi(addr), value]
}

fn atomic_add64(addr: u64, v: u64) -> [u32; 8] {
    [10 | (47 << 25), lo(addr), hi(addr), lo(v), hi(v), 0, 0, 0]
}

fn poll_eq(addr: u64, value: u32) -> [u32; 6] {
    [8 | (3 << 28) | (1 << 31), lo(addr), hi(addr), value, 0xffff_ffff, 0x0fff_0004]
}

/// ROCr's HDP flush: the register form of POLL_REGMEM.
const HDP_FLUSH: [u32; 6] = [8, 0, 0x8000_0000, 0, 0, 0];

fn bytes_of(b: &Buffer, off: u64, n: usize) -> Vec<u8> {
    // SAFETY: inside a CPU-mapped buffer.
    unsafe { std::slice::from_raw_parts((b.va + off) as *const u8, n) }.to_vec()
}

fn write_bytes(b: &Buffer, off: u64, data: &[u8]) {
    // SAFETY: inside a CPU-mapped buffer.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), (b.va + off) as *mut u8, data.len()) };
}

#[test]
fn rocr_copy_sequence_copies_decrements_the_signal_and_wakes_the_waiter() {
    let h = Harness::new();
    let q = sdma_queue(&h, queue_type::SDMA, 1 << 20);
    let src = h.alloc(1 << 20, GTT);
    let dst = h.alloc(1 << 20, VRAM);
    let data: Vec<u8> = (0..(1u32 << 20) - 3).map(|i| (i * 13 + 1) as u8).collect();
    write_bytes(&src, 0, &data);
    // An interrupt signal: value 1, mailbox slot posted by the FENCE, then TRAP.
    let page = h.event_page();
    let ev = h.create_event(event_type::SIGNAL, false, Some(&page)).unwrap();
    let sigs = h.signals();
    let s = signal(&sigs, 0);
    s.reset(1);
    let mailbox = page.va + 8 * u64::from(ev.event_slot_index);
    let mut p = Vec::new();
    p.extend(HDP_FLUSH);
    p.extend(copy_linear(dst.va + 1, src.va, (1 << 20) - 3));
    p.extend(atomic_add64(signal_handle(&sigs, 0) + 8, u64::MAX));
    p.extend(fence(mailbox, ev.event_id));
    p.extend([6, ev.event_id]);
    q.submit(&p);
    let (r, _) = h.wait_events(&[ev.event_id], false, 5000).unwrap();
    assert_eq!(r, wait_result::COMPLETE);
    assert_eq!(s.load(), 0);
    assert!(q.wait_idle(), "rptr {} wptr {}", q.rptr(), q.wptr.get());
    assert_eq!(bytes_of(&dst, 1, data.len()), data);
    let st = h.emu.stats();
    assert_eq!((st.sdma_queues_created, st.sdma_copies), (1, 1));
    assert_eq!(st.sdma_packets, 5);
}

#[test]
fn fill_fence_write_and_timestamp() {
    let h = Harness::new();
    let q = sdma_queue(&h, queue_type::SDMA, 4096);
    let b = h.alloc(8192, GTT);
    let mut p = Vec::new();
    p.extend(fill(b.va + 64, 0xdead_beef, 100));
    p.extend(fence(b.va, 2015));
    p.extend([2, lo(b.va + 1024), hi(b.va + 1024), 1, 0x1111_1111, 0x2222_2222]);
    p.extend([13 | (2 << 8), lo(b.va + 2048), hi(b.va + 2048)]);
    q.submit(&p);
    assert!(q.wait_idle());
    let words = |off: u64, n: usize| -> Vec<u32> {
        bytes_of(&b, off, n * 4).chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect()
    };
    assert!(words(64, 100).iter().all(|&w| w == 0xdead_beef));
    assert_eq!(words(64 + 400, 1), [0], "the fill stops after 100 dwords");
    assert_eq!(words(0, 1), [2015]);
    assert_eq!(words(1024, 2), [0x1111_1111, 0x2222_2222]);
    let ts = u64::from_le_bytes(bytes_of(&b, 2048, 8).try_into().unwrap());
    assert!(ts > 0 && ts <= h.emu.gpu_clock());
}

#[test]
fn rect_copy_moves_a_sub_window() {
    let h = Harness::new();
    let q = sdma_queue(&h, queue_type::SDMA, 4096);
    let src = h.alloc(1 << 16, GTT);
    let dst = h.alloc(1 << 16, GTT);
    let data: Vec<u8> = (0..1u32 << 16).map(|i| (i * 7) as u8).collect();
    write_bytes(&src, 0, &data);
    // 4-byte elements; source pitch 64 elements, window at (2, 3); 5 × 4 elements, 2 slices of
    // 1024 elements; destination pitch 16 at (1, 1, 0), slice 256.
    let (sp, ss, dp, ds) = (64u32, 1024u32, 16u32, 256u32);
    let p = [
        1 | (4 << 8) | (2 << 29),
        lo(src.va),
        hi(src.va),
        2 | (3 << 16),
        (sp - 1) << 13,
        ss - 1,
        lo(dst.va),
        hi(dst.va),
        1 | (1 << 16),
        (dp - 1) << 13,
        ds - 1,
        4 | (3 << 16),
        1,
    ];
    q.submit(&p);
    assert!(q.wait_idle());
    let out = bytes_of(&dst, 0, 1 << 16);
    for z in 0..2u64 {
        for y in 0..4u64 {
            let s = ((2 + (3 + y) * 64 + z * 1024) * 4) as usize;
            let d = ((1 + (1 + y) * 16 + z * 256) * 4) as usize;
            assert_eq!(out[d..d + 20], data[s..s + 20], "row {y} slice {z}");
            assert_eq!(out[d + 20..d + 24], [0; 4], "nothing past the row");
        }
    }
}

#[test]
fn a_memory_poll_holds_the_queue_until_the_value_arrives() {
    let h = Harness::new();
    let q = sdma_queue(&h, queue_type::SDMA, 4096);
    let b = h.alloc(4096, GTT);
    // ROCr polls the high then the low half of a dependency signal for 0.
    // SAFETY: inside the CPU-mapped buffer.
    let word = |i: usize| unsafe { &*((b.va + 4 * i as u64) as *const std::sync::atomic::AtomicU32) };
    word(0).store(1, std::sync::atomic::Ordering::Release);
    let mut p = Vec::new();
    p.extend(poll_eq(b.va + 4, 0));
    p.extend(poll_eq(b.va, 0));
    p.extend(fence(b.va + 64, 7));
    q.submit(&p);
    std::thread::sleep(SHORT);
    assert_eq!(word(16).load(std::sync::atomic::Ordering::Acquire), 0, "the fence waits behind the poll");
    assert_eq!(q.rptr(), 24, "the first poll is satisfied, the second waits");
    word(0).store(0, std::sync::atomic::Ordering::Release);
    assert!(q.wait_idle());
    assert_eq!(word(16).load(std::sync::atomic::Ordering::Acquire), 7);
}

#[test]
fn the_ring_wraps_through_nop_padding() {
    // ROCm 5.2's KFD (1.11) takes a ring smaller than its BO.
    let h = Harness::with(EmuConfig::default().version(1, 11));
    let q = sdma_queue(&h, queue_type::SDMA, 1024);
    let b = h.alloc(4096, GTT);
    for i in 0..200u32 {
        // 20-byte WRITE packets: 1024 is no multiple of 20, so the tail gets NOP padding.
        let at = b.va + 4 * u64::from(i % 16);
        q.submit(&[2, lo(at), hi(at), 0, i]);
        if i % 8 == 7 {
            assert!(q.wait_idle());
        }
    }
    assert!(q.wait_idle());
    assert!(q.rptr() > 1024, "the monotonic read offset passed the ring size: {}", q.rptr());
    let last = u32::from_le_bytes(bytes_of(&b, 4 * (199 % 16), 4).try_into().unwrap());
    assert_eq!(last, 199);
}

#[test]
fn an_unknown_opcode_halts_the_queue_with_a_queue_error() {
    let h = Harness::new();
    let q = sdma_queue(&h, queue_type::SDMA, 4096);
    let b = h.alloc(4096, GTT);
    let mut p = Vec::new();
    p.extend(fence(b.va, 1));
    p.push(0x3f);
    p.extend(fence(b.va + 4, 2));
    q.submit(&p);
    assert!(wait_until(Duration::from_secs(5), || h.emu.queue_state(q.id) != Some(QueueState::Active)));
    assert_eq!(h.emu.queue_state(q.id), Some(QueueState::Error(exception::QUEUE_PACKET_UNSUPPORTED)));
    std::thread::sleep(SHORT);
    assert_eq!(q.rptr(), 16, "the engine stops at the illegal packet");
    assert_eq!(bytes_of(&b, 0, 8), [1, 0, 0, 0, 0, 0, 0, 0]);
    // An unsupported atomic operation is an error too.
    let q2 = sdma_queue(&h, queue_type::SDMA, 4096);
    q2.submit(&[10 | (8 << 25), lo(b.va), hi(b.va), 1, 0, 0, 0, 0]);
    assert!(wait_until(Duration::from_secs(5), || h.emu.queue_state(q2.id) != Some(QueueState::Active)));
    assert_eq!(h.emu.queue_state(q2.id), Some(QueueState::Error(exception::QUEUE_PACKET_UNSUPPORTED)));
}

#[test]
fn a_copy_from_an_unmapped_address_is_a_vm_fault() {
    let h = Harness::new();
    let page = h.event_page();
    let mem_ev = h.create_event(event_type::MEMORY, false, Some(&page)).unwrap().event_id;
    let q = sdma_queue(&h, queue_type::SDMA, 4096);
    let b = h.alloc(4096, GTT);
    let bad = 0x7000_beef_0000u64;
    q.submit(&copy_linear(b.va, bad, 64));
    let (r, data) = h.wait_events(&[mem_ev], false, 5000).unwrap();
    assert_eq!(r, wait_result::COMPLETE);
    assert_eq!(data[0].memory_exception().va, bad);
    assert!(matches!(h.emu.queue_state(q.id), Some(QueueState::Evicted(_))));
}

#[test]
fn engines_and_doorbells_are_assigned_as_amdkfd_assigns_them() {
    let h = Harness::new();
    let gpu = h.emu.gpus()[0];
    let (pcie, xgmi) = (gpu.props.num_sdma_engines, gpu.props.num_sdma_xgmi_engines);
    // Bit b is engine b % engines, queue b / engines; doorbell 0x100 + 10·engine, odd queues in
    // the mirror half.
    let mut queues = Vec::new();
    for b in 0..pcie * 8 {
        let q = sdma_queue(&h, queue_type::SDMA, 4096);
        let (e, n) = (b % pcie, b / pcie);
        let slot = 0x100 + e * 10 + (n & 1) * 512 + (n >> 1);
        assert_eq!(q.args.doorbell_offset & 8191, u64::from(slot) * 8, "queue {b}");
        queues.push(q);
    }
    let (mut a, _p, _r) = sdma_args(&h, queue_type::SDMA, 4096);
    assert_eq!(create(&h, &mut a), Err(Errno::ENOMEM), "every PCIe SDMA queue is taken");
    let x = sdma_queue(&h, queue_type::SDMA_XGMI, 4096);
    assert_eq!(x.args.doorbell_offset & 8191, u64::from(0x100 + pcie * 10) * 8);
    assert!(xgmi > 0);
    // Destroying one frees its slot.
    let mut d = DestroyQueueArgs { queue_id: queues[3].id, pad: 0 };
    ioctl(&h.emu, h.kfd, request::DESTROY_QUEUE, &mut d).unwrap();
    let again = sdma_queue(&h, queue_type::SDMA, 4096);
    assert_eq!(again.args.doorbell_offset, queues[3].args.doorbell_offset);
    // Each queue still works.
    let b = h.alloc(4096, GTT);
    again.submit(&fence(b.va, 9));
    x.submit(&fence(b.va + 4, 10));
    assert!(again.wait_idle() && x.wait_idle());
    assert_eq!(bytes_of(&b, 0, 8), [9, 0, 0, 0, 10, 0, 0, 0]);
}

#[test]
fn sdma_queue_creation_is_validated() {
    let h = Harness::new();
    let (good, _p, _r) = sdma_args(&h, queue_type::SDMA, 4096);
    type Edit = Box<dyn Fn(&mut CreateQueueArgs)>;
    let cases: Vec<(&str, Edit, Errno)> = vec![
        ("ring size differs from the BO", Box::new(|a| a.ring_size /= 2), Errno::EINVAL),
        ("ring not mapped", Box::new(|a| a.ring_base_address = 0x7000_0000_0000), Errno::EINVAL),
        ("rptr not mapped", Box::new(|a| a.read_pointer_address = 0x7000_0000_0010), Errno::EINVAL),
        ("wptr not mapped", Box::new(|a| a.write_pointer_address = 0x7000_0000_0008), Errno::EINVAL),
        ("ring size not a power of two", Box::new(|a| a.ring_size = 3000), Errno::EINVAL),
        ("priority > 15", Box::new(|a| a.queue_priority = 16), Errno::EINVAL),
        ("unknown gpu", Box::new(|a| a.gpu_id = 0xbad), Errno::EINVAL),
        (
            "engine id beyond the engines",
            Box::new(|a| {
                a.queue_type = queue_type::SDMA_BY_ENG_ID;
                a.sdma_engine_id = 99;
            }),
            Errno::EINVAL,
        ),
    ];
    for (what, f, errno) in cases {
        let mut a = good;
        f(&mut a);
        assert_eq!(create(&h, &mut a), Err(errno), "{what}");
    }
    // By engine id on engine 1.
    let mut a = good;
    a.queue_type = queue_type::SDMA_BY_ENG_ID;
    a.sdma_engine_id = 1;
    create(&h, &mut a).unwrap();
    assert_eq!(a.doorbell_offset & 8191, (0x100 + 10) * 8);
    // Before 1.17 the by-engine type does not exist; ROCm 5.2's 1.11 accepts unexact BOs.
    let old = Harness::with(EmuConfig::default().version(1, 11));
    let (mut a, _p, _r) = sdma_args(&old, queue_type::SDMA_BY_ENG_ID, 4096);
    assert_eq!(create(&old, &mut a), Err(Errno::ENOTSUPP));
    let (mut a, _p, _r) = sdma_args(&old, queue_type::SDMA, 8192);
    a.ring_size = 4096;
    create(&old, &mut a).unwrap();
    // No XGMI engines on gfx1100.
    let navi = Harness::profile(aqueduct_kfd_emu::GpuProfile::Gfx1100);
    let (mut a, _p, _r) = sdma_args(&navi, queue_type::SDMA_XGMI, 4096);
    assert_eq!(create(&navi, &mut a), Err(Errno::ENOMEM));
}
