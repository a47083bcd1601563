//! Stream-ordered allocation through the public API on the loopback: a freed block is handed out
//! again only in stream order (the freeing stream at once, another stream after an event wait,
//! after the free completed, or made to wait when memory runs out), as the pool's reuse policy
//! allows; graph allocations under capture; detached streams.
//!
//! Work that must stay pending is held behind a gate (a wait on a host word), so every test is
//! deterministic. Ordering is checked on the memory itself: one stream increments a word of the
//! block, the next user doubles it, so the result tells which ran first.

use std::sync::atomic::{AtomicU32, Ordering};

use aqueduct::mempool::{Freed, MemPools, PoolAttr};
use aqueduct::{Error, NodeId, NodeKind, StreamHandle};
use aqueduct_tests::*;

/// The default tables with 4 memory pools over 32 blocks.
type Pools = MemPools<aqueduct::Capacities<32, 64, 8, 64, 4, 32, 2, 40, 16, 8, 40, 64, 256, 160, 65536, 4, 32>>;

/// `hipStreamNonBlocking`.
const NB: u32 = 1;
/// `hipStreamWaitValueEq`.
const EQ: u32 = 1;

/// Holds later work of `s` until the returned word is set to 1.
fn gate(rt: &Rt, s: StreamHandle) -> &'static AtomicU32 {
    let g = cell32(0);
    rt.wait_value32(s, addr32(g), 1, EQ, u32::MAX).unwrap();
    g
}

fn open(g: &AtomicU32) {
    g.store(1, Ordering::SeqCst);
}

fn setup() -> (&'static Rt, Kernels, &'static Pools) {
    let rt = leaked_runtime();
    let k = register(rt.backend());
    (rt, k, leak(Pools::new()))
}

#[test]
fn the_freeing_stream_reuses_at_once_others_after_completion() {
    let (rt, k, pools) = setup();
    let s1 = rt.stream_create(NB).unwrap();
    let s2 = rt.stream_create(NB).unwrap();
    let g = gate(rt, s1);
    let a = pools.malloc_async(rt, s1, 64).unwrap();
    rt.memset_async(s1, a.address, 0, 4, 1).unwrap();
    launch(rt, s1, k.inc, a.address).unwrap();
    assert_eq!(pools.free_async(rt, s1, a.address), Ok(Freed::Pooled));
    // The free is pending behind the gate: s2 gets other memory, s1 the same block.
    let b = pools.malloc_async(rt, s2, 64).unwrap();
    assert_ne!(b.address, a.address);
    let again = pools.malloc_async(rt, s1, 64).unwrap();
    assert_eq!(again.address, a.address);
    // The new owner's work runs after the old owner's, in s1's order.
    launch(rt, s1, k.double, a.address).unwrap();
    pools.free_async(rt, s1, a.address).unwrap();
    open(g);
    rt.stream_synchronize(s1).unwrap();
    assert_eq!(read32(a.address), 2);
    // Completed: any stream may take it (opportunistic reuse).
    assert_eq!(pools.malloc_async(rt, s2, 64).unwrap().address, a.address);
    let pool = pools.current_pool(rt, 0).unwrap();
    assert_eq!(pools.attribute(pool, PoolAttr::UsedMemCurrent), Ok(512));
    assert_eq!(pools.attribute(pool, PoolAttr::ReservedMemCurrent), Ok(512));
}

#[test]
fn opportunistic_reuse_can_be_turned_off_and_sync_gives_memory_back() {
    let (rt, _k, pools) = setup();
    let s1 = rt.stream_create(NB).unwrap();
    let s2 = rt.stream_create(NB).unwrap();
    let pool = pools.default_pool(rt, 0).unwrap();
    pools.set_attribute(pool, PoolAttr::ReuseAllowOpportunistic, 0).unwrap();
    let a = pools.malloc_async(rt, s1, 256).unwrap();
    pools.free_async(rt, s1, a.address).unwrap();
    rt.stream_synchronize(s1).unwrap();
    let b = pools.malloc_async(rt, s2, 256).unwrap();
    assert_ne!(b.address, a.address);
    assert_eq!(pools.attribute(pool, PoolAttr::ReservedMemCurrent), Ok(512));
    // A synchronisation point gives completed free blocks back beyond the threshold (0).
    pools.release_on_sync(rt);
    assert_eq!(pools.attribute(pool, PoolAttr::ReservedMemCurrent), Ok(256));
    assert_eq!(pools.attribute(pool, PoolAttr::ReservedMemHigh), Ok(512));
}

#[test]
fn an_event_wait_orders_another_stream_after_the_free() {
    let (rt, k, pools) = setup();
    let s1 = rt.stream_create(NB).unwrap();
    let s2 = rt.stream_create(NB).unwrap();
    let e = rt.event_create(0).unwrap();
    let g = gate(rt, s1);
    let a = pools.malloc_async(rt, s1, 64).unwrap();
    rt.memset_async(s1, a.address, 0, 4, 1).unwrap();
    launch(rt, s1, k.inc, a.address).unwrap();
    pools.free_async(rt, s1, a.address).unwrap();
    pools.record_event(rt, e, s1, 0).unwrap();
    pools.wait_event(rt, s2, e, 0).unwrap();
    let b = pools.malloc_async(rt, s2, 64).unwrap();
    assert_eq!(b.address, a.address, "s2 is ordered after the free");
    launch(rt, s2, k.double, b.address).unwrap();
    open(g);
    rt.stream_synchronize(s2).unwrap();
    assert_eq!(read32(b.address), 2, "s2's work ran after s1's");
    // Without following event dependencies, the same sequence gets new memory.
    let pool = pools.default_pool(rt, 0).unwrap();
    pools.set_attribute(pool, PoolAttr::ReuseFollowEventDependencies, 0).unwrap();
    pools.set_attribute(pool, PoolAttr::ReuseAllowOpportunistic, 0).unwrap();
    let g = gate(rt, s1);
    let c = pools.malloc_async(rt, s1, 64).unwrap();
    pools.free_async(rt, s1, c.address).unwrap();
    pools.record_event(rt, e, s1, 0).unwrap();
    pools.wait_event(rt, s2, e, 0).unwrap();
    assert_ne!(pools.malloc_async(rt, s2, 64).unwrap().address, c.address);
    open(g);
    rt.device_synchronize().unwrap();
}

#[test]
fn a_full_pool_makes_the_allocating_stream_wait_for_a_pending_free() {
    let (rt, k, pools) = setup();
    let s1 = rt.stream_create(NB).unwrap();
    let s2 = rt.stream_create(NB).unwrap();
    let pool = pools.create(rt, 0, 256).unwrap();
    let g = gate(rt, s1);
    let a = pools.malloc_from_pool_async(rt, pool, s1, 200).unwrap();
    rt.memset_async(s1, a.address, 0, 4, 1).unwrap();
    launch(rt, s1, k.inc, a.address).unwrap();
    pools.free_async(rt, s1, a.address).unwrap();
    // The pool may hold 256 bytes: s2 takes the pending block and waits for s1's free.
    let b = pools.malloc_from_pool_async(rt, pool, s2, 256).unwrap();
    assert_eq!(b.address, a.address);
    launch(rt, s2, k.double, b.address).unwrap();
    open(g);
    rt.stream_synchronize(s2).unwrap();
    assert_eq!(read32(b.address), 2);
    // Without internal dependencies a pending block cannot be taken: out of memory.
    pools.set_attribute(pool, PoolAttr::ReuseAllowInternalDependencies, 0).unwrap();
    pools.set_attribute(pool, PoolAttr::ReuseAllowOpportunistic, 0).unwrap();
    let g = gate(rt, s2);
    pools.free_async(rt, s2, b.address).unwrap();
    assert_eq!(pools.malloc_from_pool_async(rt, pool, s1, 256).map(|a| a.address), Err(Error::OutOfMemory));
    open(g);
    rt.device_synchronize().unwrap();
    // Trimming gives the completed block back; the pool is empty.
    pools.trim_to(rt, pool, 0).unwrap();
    assert_eq!(pools.attribute(pool, PoolAttr::ReservedMemCurrent), Ok(0));
    pools.destroy(rt, pool).unwrap();
    assert_eq!(pools.trim_to(rt, pool, 0), Err(Error::InvalidValue));
}

#[test]
fn captured_allocations_become_graph_memory_nodes() {
    let (rt, k, pools) = setup();
    let s = rt.stream_create(NB).unwrap();
    let plain = pools.malloc_async(rt, s, 64).unwrap();
    rt.stream_begin_capture(s, 0).unwrap();
    let a = pools.malloc_async(rt, s, 64).unwrap();
    rt.memset_async(s, a.address, 0, 4, 1).unwrap();
    launch(rt, s, k.inc, a.address).unwrap();
    // Only a graph allocation of this capture may be freed in it.
    assert_eq!(pools.free_async(rt, s, plain.address), Err(Error::InvalidValue));
    assert_eq!(pools.free_async(rt, s, 0x1000), Err(Error::InvalidValue));
    let kept = pools.malloc_async(rt, s, 64).unwrap();
    pools.free_async(rt, s, a.address).unwrap();
    assert_eq!(pools.free_async(rt, s, a.address), Err(Error::InvalidValue));
    let graph = rt.stream_end_capture(s).unwrap();
    assert!(
        matches!(rt.graph_node_kind(graph, NodeId(0)), Ok(NodeKind::MemAlloc { address, bytes: 256 }) if address == a.address)
    );
    assert!(matches!(rt.graph_node_kind(graph, NodeId(4)), Ok(NodeKind::MemFree(x)) if x == a.address));
    assert!(pools.graph_owns_memory(graph.0));
    let x = rt.graph_instantiate(graph).unwrap();
    pools.graph_launch(rt, graph.0, s, false, || rt.graph_launch(x, s)).unwrap();
    rt.stream_synchronize(s).unwrap();
    assert_eq!(read32(a.address), 1);
    // `kept` is outstanding until the user frees it; then the graph runs again.
    assert_eq!(pools.graph_launch(rt, graph.0, s, false, || rt.graph_launch(x, s)), Err(Error::InvalidValue));
    pools.free_async(rt, s, kept.address).unwrap();
    pools.graph_launch(rt, graph.0, s, false, || rt.graph_launch(x, s)).unwrap();
    rt.stream_synchronize(s).unwrap();
    assert_eq!(read32(a.address), 1, "the fill runs before the increment at every launch");
    rt.graph_exec_destroy(x).unwrap();
    rt.graph_destroy(graph).unwrap();
    let mut dropped = Vec::new();
    pools.graph_release(rt, graph.0, |a| dropped.push(a)).unwrap();
    assert_eq!(dropped, [a.address]);
    assert!(!pools.graph_owns_memory(graph.0));
    // The outstanding allocation stayed the user's: an ordinary block now.
    assert_eq!(pools.free_async(rt, s, kept.address), Ok(Freed::Pooled));
}

#[test]
fn detached_and_stale_streams_are_refused() {
    let (rt, _k, pools) = setup();
    let ctx = rt.context_create(&[u32::MAX]).unwrap();
    let s = rt.context_stream_create(ctx, 0, 0).unwrap();
    let a = pools.malloc_async(rt, s, 64).unwrap();
    rt.context_destroy(ctx).unwrap();
    assert_eq!(pools.malloc_async(rt, s, 64).map(|a| a.address), Err(Error::StreamDetached));
    assert_eq!(pools.free_async(rt, s, a.address), Err(Error::StreamDetached));
    let t = rt.stream_create(0).unwrap();
    rt.stream_destroy(t).unwrap();
    assert_eq!(pools.malloc_async(rt, t, 64).map(|a| a.address), Err(Error::ContextIsDestroyed));
    // The null stream works; zero bytes is address 0.
    assert_eq!(pools.malloc_async(rt, StreamHandle::NULL, 0).map(|a| a.address), Ok(0));
    assert_eq!(pools.free_async(rt, StreamHandle::NULL, a.address), Ok(Freed::Pooled));
}
