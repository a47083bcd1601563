//! Executables changed in place through core's `Runtime` over kfd-direct on the emulated GPU:
//! one node of a 1000-node chain patched and relaunched, a patch issued while a launch runs
//! (that launch keeps the old arguments, the next one gets the new), and a kernel swapped
//! while a launch waits behind a gate.

use std::sync::atomic::{AtomicU32, Ordering};

use aqueduct::{Backend, Capacities, GraphExecHandle, KernelLaunch, MemoryKind, NodeId, Runtime, SingleThread};
use aqueduct::{GraphHandle, StreamHandle};
use aqueduct_kfd::{EmuSys, Kfd, KfdConfig};
use aqueduct_kfd_emu::{EmuConfig, Twin};

/// Nodes of the chain.
const NODES: usize = 1000;

type Rt = Runtime<Kfd<EmuSys>, SingleThread, Capacities<32, 64, 8, 64, 4, 1024, 2>>;

struct Setup {
    rt: Rt,
    /// `*(u32*)a0 = a1`.
    store: u64,
    /// `*(u32*)a0 = a1 + 1000`.
    store_plus: u64,
    /// One u32 per node.
    cells: u64,
}

fn setup() -> Setup {
    let sys = EmuSys::new(EmuConfig::default().cus(2)).unwrap();
    let emu = sys.emu();
    let store =
        emu.register_kernel(Twin::new("store", 16, |ctx, _| ctx.mem.write_u32(ctx.arg_u64(0), ctx.arg_u64(8) as u32)));
    let store_plus = emu.register_kernel(Twin::new("store_plus", 16, |ctx, _| {
        ctx.mem.write_u32(ctx.arg_u64(0), ctx.arg_u64(8) as u32 + 1000)
    }));
    let rt = Runtime::new(Kfd::open(sys, KfdConfig::default()).unwrap(), SingleThread);
    let cells = rt.backend().memory_alloc(0, NODES * 4, MemoryKind::Host).unwrap();
    Setup { rt, store, store_plus, cells }
}

fn words(w: [u64; 2]) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[..8].copy_from_slice(&w[0].to_le_bytes());
    a[8..].copy_from_slice(&w[1].to_le_bytes());
    a
}

fn launch(k: u64, args: &[u8]) -> KernelLaunch<'_> {
    KernelLaunch {
        kernel_object: k,
        grid: [1, 1, 1],
        workgroup: [1, 1, 1],
        group_segment_size: 0,
        private_segment_size: 0,
        kernarg: args,
    }
}

fn cell(a: u64) -> &'static AtomicU32 {
    // SAFETY: a live, aligned u32 of host-visible memory the test allocated and never frees.
    unsafe { AtomicU32::from_ptr(a as usize as *mut u32) }
}

impl Setup {
    fn at(&self, i: usize) -> u64 {
        self.cells + 4 * i as u64
    }

    fn values(&self) -> Vec<u32> {
        (0..NODES).map(|i| cell(self.at(i)).load(Ordering::SeqCst)).collect()
    }

    fn reset(&self) {
        for i in 0..NODES {
            cell(self.at(i)).store(u32::MAX, Ordering::SeqCst);
        }
    }

    /// A chain of `n` stores, node `i` writing `i` into cell `i`.
    fn chain(&self, n: usize) -> (GraphHandle, Vec<NodeId>) {
        let g = self.rt.graph_create().unwrap();
        let mut nodes: Vec<NodeId> = Vec::new();
        for i in 0..n {
            let deps: Vec<NodeId> = nodes.last().copied().into_iter().collect();
            let a = words([self.at(i), i as u64]);
            nodes.push(self.rt.graph_add_kernel_node(g, &deps, &launch(self.store, &a)).unwrap());
        }
        (g, nodes)
    }

    fn run(&self, x: GraphExecHandle, s: StreamHandle) {
        self.rt.graph_launch(x, s).unwrap();
        self.rt.stream_synchronize(s).unwrap();
    }
}

#[test]
fn one_node_of_a_thousand_patched_and_relaunched() {
    let e = setup();
    let s = e.rt.stream_create(0).unwrap();
    let (g, nodes) = e.chain(NODES);
    let x = e.rt.graph_instantiate(g).unwrap();
    e.reset();
    e.run(x, s);
    let first: Vec<u32> = (0..NODES as u32).collect();
    assert_eq!(e.values(), first);
    e.rt.graph_exec_set_dispatch(x, nodes[500], &launch(e.store, &words([e.at(500), 5000]))).unwrap();
    for _ in 0..2 {
        e.reset();
        e.run(x, s);
        let mut want = first.clone();
        want[500] = 5000;
        assert_eq!(e.values(), want, "every later launch runs the new arguments, and only there");
    }
    e.rt.graph_exec_destroy(x).unwrap();
    e.rt.graph_destroy(g).unwrap();
}

#[test]
fn a_patch_during_a_launch_leaves_that_launch_its_old_arguments() {
    let e = setup();
    let s = e.rt.stream_create(0).unwrap();
    let (g, nodes) = e.chain(NODES);
    let x = e.rt.graph_instantiate(g).unwrap();
    e.reset();
    let last = NODES - 1;
    // Launch, then patch the last node at once: the patch waits for the launch, which then has
    // written the old value; the next launch writes the new one.
    e.rt.graph_launch(x, s).unwrap();
    e.rt.graph_exec_set_dispatch(x, nodes[last], &launch(e.store, &words([e.at(last), 77]))).unwrap();
    assert_eq!(cell(e.at(last)).load(Ordering::SeqCst), last as u32, "the launch in flight ran the old arguments");
    e.rt.stream_synchronize(s).unwrap();
    e.run(x, s);
    assert_eq!(cell(e.at(last)).load(Ordering::SeqCst), 77);
    assert_eq!(cell(e.at(0)).load(Ordering::SeqCst), 0);

    e.rt.graph_exec_destroy(x).unwrap();
    e.rt.graph_destroy(g).unwrap();

    // A new kernel with the same arguments changes no argument block: it applies at once,
    // without waiting, while a launch is held behind a gate — and that launch keeps the old one.
    // (A short graph: a held launch must fit in the ring.)
    let (g, nodes) = e.chain(16);
    let x = e.rt.graph_instantiate(g).unwrap();
    let gate = e.rt.backend().memory_alloc(0, 16, MemoryKind::Host).unwrap();
    cell(gate).store(0, Ordering::SeqCst);
    e.rt.wait_value32(s, gate, 1, 1, u32::MAX).unwrap();
    e.reset();
    e.rt.graph_launch(x, s).unwrap();
    e.rt.graph_exec_set_dispatch(x, nodes[10], &launch(e.store_plus, &words([e.at(10), 10]))).unwrap();
    assert_eq!(cell(e.at(0)).load(Ordering::SeqCst), u32::MAX, "the gate still holds the launch");
    cell(gate).store(1, Ordering::SeqCst);
    e.rt.stream_synchronize(s).unwrap();
    assert_eq!(cell(e.at(10)).load(Ordering::SeqCst), 10);
    e.run(x, s);
    assert_eq!(cell(e.at(10)).load(Ordering::SeqCst), 1010);
    e.rt.graph_exec_wait(x).unwrap();
    e.rt.graph_exec_destroy(x).unwrap();
    e.rt.graph_destroy(g).unwrap();
}
