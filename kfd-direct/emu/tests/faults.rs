//! Fault injection, each with its observable outcome (docs/kfd-aql.md §7).

mod common;

use std::time::Duration;

use aqueduct::aql::{AgentDispatchPacket, FenceScope, Header, PacketType};
use aqueduct::backend::CopyArgs;
use aqueduct::BuiltinKernel;
use aqueduct_kfd_emu::abi::*;
use aqueduct_kfd_emu::{Errno, KernelError, QueueState, Twin};
use common::*;

const SHORT: Duration = Duration::from_millis(50);

#[test]
fn kernel_memory_fault_sets_memory_events_with_the_address() {
    let h = Harness::new();
    let q = h.create_queue();
    let page = h.event_page();
    let mem_ev = h.create_event(event_type::MEMORY, false, Some(&page)).unwrap().event_id;
    let bad = 0x7000_dead_0000u64;
    let obj = h.emu.register_kernel(Twin::new("oob", 0, move |ctx, _| ctx.mem.write_u32(bad + 4, 1)));
    let sigs = h.signals();
    signal(&sigs, 0).reset(1);
    q.submit(&[dispatch(obj, 0, 1, 1, signal_handle(&sigs, 0), true)]);
    let (r, data) = h.wait_events(&[mem_ev], false, 5000).unwrap();
    assert_eq!(r, wait_result::COMPLETE);
    let m = data[0].memory_exception();
    assert_eq!(m.va, bad + 4);
    assert_eq!(m.gpu_id, h.gpu());
    assert_eq!(m.failure.not_present, 1);
    assert!(matches!(h.emu.queue_state(q.id), Some(QueueState::Evicted(_))));
    assert_eq!(signal(&sigs, 0).load(), 1, "the faulting packet never completes");
    assert_eq!(q.read_index(), 0);
}

#[test]
fn builtin_copy_from_an_unmapped_buffer_faults() {
    let h = Harness::new();
    let q = h.create_queue();
    let page = h.event_page();
    let mem_ev = h.create_event(event_type::MEMORY, false, Some(&page)).unwrap().event_id;
    let dst = h.alloc(4096, GTT);
    let src = h.alloc(4096, GTT);
    h.unmap_gpu(&src, &[h.gpu()]).unwrap();
    let k = h.alloc(4096, GTT);
    // SAFETY: CPU-mapped kernarg page.
    unsafe { *k.ptr::<CopyArgs>() = CopyArgs { dst: dst.va, src: src.va, bytes: 64 } };
    q.submit(&[dispatch(h.emu.builtin_kernel(BuiltinKernel::Copy), k.va, 1, 1, 0, true)]);
    let (r, data) = h.wait_events(&[mem_ev], false, 5000).unwrap();
    assert_eq!(r, wait_result::COMPLETE);
    assert_eq!(data[0].memory_exception().va, src.va, "GPU access needs MAP_MEMORY_TO_GPU");
}

#[test]
fn queue_error_reports_through_the_cwsr_header() {
    let h = Harness::new();
    let page = h.event_page();
    let err_ev = h.create_event(event_type::SIGNAL, false, Some(&page)).unwrap().event_id;
    let sigs = h.signals();
    // ROCr points err_payload_addr at its exception signal's value.
    let payload = signal_handle(&sigs, 10) + 8;
    let spec = QueueSpec { err_payload: payload, err_event: err_ev, ..Default::default() };
    let nop = h.emu.register_kernel(Twin::new("nop", 0, |_, _| Ok(())));
    let mut bad_dims = dispatch(nop, 0, 1, 1, 0, true);
    bad_dims.setup = 0;
    let mut bad_wg = dispatch(nop, 0, 64, 1, 0, true);
    bad_wg.workgroup_size_x = 1024;
    bad_wg.workgroup_size_y = 2;
    type Submit = Box<dyn Fn(&Queue, u64)>;
    let cases: [(&str, Submit, u32); 4] = [
        (
            "agent dispatch on a GPU queue",
            Box::new(|q: &Queue, s| {
                let p = AgentDispatchPacket {
                    header: Header::new(PacketType::AgentDispatch, true, FenceScope::None, FenceScope::None).0,
                    completion_signal: s,
                    ..Default::default()
                };
                q.submit(&[p]);
            }),
            exception::QUEUE_PACKET_UNSUPPORTED,
        ),
        (
            "unknown kernel object",
            Box::new(move |q: &Queue, s| {
                q.submit(&[dispatch(0x7777_0000, 0, 1, 1, s, true)]);
            }),
            exception::QUEUE_PACKET_DISPATCH_CODE_INVALID,
        ),
        (
            "zero dimensions",
            Box::new(move |q: &Queue, s| {
                let mut p = bad_dims;
                p.completion_signal = s;
                q.submit(&[p]);
            }),
            exception::QUEUE_PACKET_DISPATCH_DIM_INVALID,
        ),
        (
            "work-group larger than 1024",
            Box::new(move |q: &Queue, s| {
                let mut p = bad_wg;
                p.completion_signal = s;
                q.submit(&[p]);
            }),
            exception::QUEUE_PACKET_DISPATCH_WORK_GROUP_SIZE_INVALID,
        ),
    ];
    for (i, (what, submit, ec)) in cases.iter().enumerate() {
        signal(&sigs, 10).reset(0);
        h.event_op(request::RESET_EVENT, err_ev).unwrap();
        let q = h.create_queue_with(0, &spec);
        signal(&sigs, i).reset(1);
        submit(&q, signal_handle(&sigs, i));
        let (r, _) = h.wait_events(&[err_ev], false, 5000).unwrap();
        assert_eq!(r, wait_result::COMPLETE, "{what}: error event");
        assert_eq!(signal(&sigs, 10).load() as u64, exception::mask(*ec), "{what}: error mask");
        assert_eq!(h.emu.queue_state(q.id), Some(QueueState::Error(*ec)), "{what}");
        assert_eq!(signal(&sigs, i).load(), 1, "{what}: the failing packet's signal is never decremented");
        assert_eq!(q.read_index(), 0, "{what}: nor retired");
        // The queue stays halted.
        q.submit(&[dispatch(nop, 0, 1, 1, signal_handle(&sigs, i), true)]);
        std::thread::sleep(SHORT);
        assert_eq!(signal(&sigs, i).load(), 1, "{what}: halted");
    }
}

#[test]
fn hung_kernel_stalls_its_queue_only() {
    let h = Harness::new();
    let hang = h.emu.register_kernel(Twin::new("hang", 0, |_, _| Err(KernelError::Hang)));
    let nop = h.emu.register_kernel(Twin::new("nop", 0, |_, _| Ok(())));
    let sigs = h.signals();
    let q1 = h.create_queue();
    let q2 = h.create_queue();
    signal(&sigs, 0).reset(1);
    signal(&sigs, 1).reset(1);
    signal(&sigs, 2).reset(1);
    q1.submit(&[
        dispatch(hang, 0, 1, 1, signal_handle(&sigs, 0), true),
        dispatch(nop, 0, 1, 1, signal_handle(&sigs, 1), true),
    ]);
    q2.submit(&[dispatch(nop, 0, 1, 1, signal_handle(&sigs, 2), true)]);
    assert!(wait_signal(signal(&sigs, 2), 0), "other queues keep running");
    std::thread::sleep(SHORT);
    assert_eq!(h.emu.queue_state(q1.id), Some(QueueState::Hung));
    assert_eq!((signal(&sigs, 0).load(), signal(&sigs, 1).load()), (1, 1));
    assert_eq!(q1.read_index(), 0);
    // Detection from user mode is by timeout only; destroying the queue still works.
    h.destroy_queue(&q1).unwrap();
}

#[test]
fn device_reset_raises_hw_exception_events() {
    let h = Harness::new();
    let page = h.event_page();
    let hw = h.create_event(event_type::HW_EXCEPTION, false, Some(&page)).unwrap().event_id;
    let mem = h.create_event(event_type::MEMORY, false, None).unwrap().event_id;
    let q = h.create_queue();
    std::thread::scope(|s| {
        let w = s.spawn(|| h.wait_events(&[hw], false, 5000).unwrap());
        std::thread::sleep(SHORT);
        h.emu.inject_device_reset(h.gpu()).unwrap();
        let (r, data) = w.join().unwrap();
        assert_eq!(r, wait_result::COMPLETE);
        let d = data[0].hw_exception();
        assert_eq!((d.reset_cause, d.memory_lost, d.gpu_id), (0, 1, h.gpu()));
    });
    let (r, data) = h.wait_events(&[mem], false, 0).unwrap();
    assert_eq!(r, wait_result::COMPLETE);
    assert_eq!(data[0].memory_exception().error_type, 3, "GPU hang");
    assert_eq!(h.emu.queue_state(q.id), Some(QueueState::Evicted(0)));
    let sigs = h.signals();
    signal(&sigs, 0).reset(1);
    let nop = h.emu.register_kernel(Twin::new("nop", 0, |_, _| Ok(())));
    q.submit(&[dispatch(nop, 0, 1, 1, signal_handle(&sigs, 0), true)]);
    std::thread::sleep(SHORT);
    assert_eq!(signal(&sigs, 0).load(), 1, "evicted queues stay dead");
}

#[test]
fn injected_memory_fault_evicts_the_process_queues() {
    let h = Harness::new();
    let page = h.event_page();
    let mem = h.create_event(event_type::MEMORY, false, Some(&page)).unwrap().event_id;
    let q = h.create_queue();
    h.emu.inject_memory_fault(h.gpu(), 0x1000_2000).unwrap();
    let (r, data) = h.wait_events(&[mem], false, 0).unwrap();
    assert_eq!(r, wait_result::COMPLETE);
    assert_eq!(data[0].memory_exception().va, 0x1000_2000);
    assert!(matches!(h.emu.queue_state(q.id), Some(QueueState::Evicted(_))));
}

#[test]
fn ioctl_fails_at_step_n_with_the_chosen_errno() {
    let h = Harness::new();
    let mut v = GetVersionArgs::default();
    let before = h.emu.ioctl_count();
    h.emu.fail_ioctl(3, None, Errno::EIO);
    ioctl(&h.emu, h.kfd, request::GET_VERSION, &mut v).unwrap();
    ioctl(&h.emu, h.kfd, request::GET_VERSION, &mut v).unwrap();
    expect_err(ioctl(&h.emu, h.kfd, request::GET_VERSION, &mut v), Errno::EIO);
    ioctl(&h.emu, h.kfd, request::GET_VERSION, &mut v).unwrap();
    assert_eq!(h.emu.ioctl_count(), before + 4);
    // Counting one command only: the second ALLOC fails with ENOMEM.
    h.emu.fail_ioctl(2, Some(nr::ALLOC_MEMORY_OF_GPU), Errno::ENOMEM);
    h.alloc_raw(h.gpu(), 4096, GTT).unwrap();
    ioctl(&h.emu, h.kfd, request::GET_VERSION, &mut v).unwrap();
    assert_eq!(h.alloc_raw(h.gpu(), 4096, GTT).map(|_| ()), Err(Errno::ENOMEM));
    h.alloc_raw(h.gpu(), 4096, GTT).unwrap();
}

#[test]
fn command_processor_death_leaves_packets_unprocessed() {
    let h = Harness::new();
    let q = h.create_queue();
    let nop = h.emu.register_kernel(Twin::new("nop", 0, |_, _| Ok(())));
    let sigs = h.signals();
    signal(&sigs, 0).reset(1);
    q.submit(&[dispatch(nop, 0, 1, 1, signal_handle(&sigs, 0), true)]);
    assert!(wait_signal(signal(&sigs, 0), 0));
    assert!(h.emu.command_processor_alive(h.gpu()));
    h.emu.kill_command_processor(h.gpu()).unwrap();
    assert!(!h.emu.command_processor_alive(h.gpu()));
    signal(&sigs, 0).reset(1);
    q.submit(&[dispatch(nop, 0, 1, 1, signal_handle(&sigs, 0), true)]);
    std::thread::sleep(SHORT);
    assert_eq!(signal(&sigs, 0).load(), 1);
    assert_eq!(q.read_index(), 1);
}

#[test]
fn non_executable_ring_faults_on_fetch() {
    let h = Harness::new();
    let page = h.event_page();
    let mem = h.create_event(event_type::MEMORY, false, Some(&page)).unwrap().event_id;
    let spec = QueueSpec { ring_flags: GTT & !mem_flags::EXECUTABLE, ..Default::default() };
    let q = h.create_queue_with(0, &spec);
    let nop = h.emu.register_kernel(Twin::new("nop", 0, |_, _| Ok(())));
    q.submit(&[dispatch(nop, 0, 1, 1, 0, true)]);
    let (r, data) = h.wait_events(&[mem], false, 5000).unwrap();
    assert_eq!(r, wait_result::COMPLETE);
    let m = data[0].memory_exception();
    assert_eq!((m.va, m.failure.no_execute), (q.ring_buf.va, 1));
}
