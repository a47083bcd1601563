/* Stream-ordered allocation: hipMallocAsync / hipFreeAsync / hipMallocFromPoolAsync, the default
   and current pools, hipMemPool* attributes, access, trim and destruction; a freed block reused
   by the freeing stream at once, by another stream after an event wait or once the free has
   completed, by a stream made to wait when the pool is full; graph allocations under capture,
   relaunched; detached streams; every error path HIP defines.

   Work that must stay pending waits behind a gate (a value in pinned memory); ordering is read
   off the memory: the first owner increments a word, the next doubles it, so 2 means the order
   was kept and 1 that the new owner ran first. */
#include "check.h"

#include <pthread.h>

/* inc(unsigned *p): *p += 1.  twice(unsigned *p): *p *= 2. */
static void inc(void **args, dim3 b, dim3 g, dim3 d) { (**(unsigned **)args[0])++; }
static void twice(void **args, dim3 b, dim3 g, dim3 d) { **(unsigned **)args[0] *= 2; }
static char inc_symbol, twice_symbol;

static void run(const void *symbol, unsigned *p, hipStream_t s) {
    void *args[] = {&p};
    OK(hipLaunchKernel(symbol, (dim3){1, 1, 1}, (dim3){1, 1, 1}, args, 0, s));
}

static unsigned *gates;
static int next_gate;

/* Holds later work of s until open_gate(the returned index). Gates are 8-byte aligned: the
   emulated GPU reads a waited-on value as a 64-bit word (a value at 4 mod 8 faults there). */
static int gate(hipStream_t s) {
    int i = 2 * next_gate++;
    gates[i] = 0;
    OK(hipStreamWaitValue32(s, &gates[i], 1, hipStreamWaitValueEq, 0xffffffffu));
    return i;
}
static void open_gate(int i) { __atomic_store_n(&gates[i], 1, __ATOMIC_SEQ_CST); }

static unsigned value(void *p) {
    unsigned v = 0;
    OK(hipMemcpy(&v, p, 4, hipMemcpyDeviceToHost));
    return v;
}

static unsigned long long attr64(hipMemPool_t pool, hipMemPoolAttr a) {
    unsigned long long v = ~0ull;
    OK(hipMemPoolGetAttribute(pool, a, &v));
    return v;
}

/* Begins a capture on its per-thread stream, allocates in it and exits mid-capture. */
static void *capture_and_exit(void *out) {
    OK(hipStreamBeginCapture(hipStreamPerThread, hipStreamCaptureModeThreadLocal));
    OK(hipMallocAsync((void **)out, 64, hipStreamPerThread));
    return NULL;
}

int main(void) {
    size_t one = sizeof(void *);
    OK(aqdRegisterHostKernel(&inc_symbol, inc, 1, &one));
    OK(aqdRegisterHostKernel(&twice_symbol, twice, 1, &one));
    OK(hipHostMalloc((void **)&gates, 128 * sizeof *gates, 0));
    hipStream_t s1, s2;
    OK(hipStreamCreateWithFlags(&s1, hipStreamNonBlocking));
    OK(hipStreamCreateWithFlags(&s2, hipStreamNonBlocking));

    /* Default and current pools. */
    hipMemPool_t def, cur;
    OK(hipDeviceGetDefaultMemPool(&def, 0));
    OK(hipDeviceGetMemPool(&cur, 0));
    TRUE(def != NULL && cur == def);
    EXPECT(hipDeviceGetDefaultMemPool(NULL, 0), hipErrorInvalidValue);
    EXPECT(hipDeviceGetDefaultMemPool(&cur, 1), hipErrorInvalidDevice);
    EXPECT(hipDeviceGetDefaultMemPool(&cur, -1), hipErrorInvalidDevice);
    EXPECT(hipDeviceGetMemPool(&cur, 1), hipErrorInvalidValue);
    EXPECT(hipDeviceSetMemPool(0, NULL), hipErrorInvalidValue);
    EXPECT(hipMemPoolDestroy(def), hipErrorInvalidValue);
    int on = -1;
    OK(hipMemPoolGetAttribute(def, hipMemPoolReuseFollowEventDependencies, &on));
    TRUE(on == 1);
    OK(hipMemPoolGetAttribute(def, hipMemPoolReuseAllowOpportunistic, &on));
    TRUE(on == 1);
    OK(hipMemPoolGetAttribute(def, hipMemPoolReuseAllowInternalDependencies, &on));
    TRUE(on == 1);
    TRUE(attr64(def, hipMemPoolAttrReleaseThreshold) == 0);

    /* Argument errors. */
    void *p, *q, *r;
    EXPECT(hipMallocAsync(NULL, 64, s1), hipErrorInvalidValue);
    OK(hipMallocAsync(&p, 0, s1));
    TRUE(p == NULL);
    /* Freeing nothing succeeds, as in the newest HIP and CUDA (HIP 5.2: hipErrorInvalidValue). */
    OK(hipFreeAsync(NULL, s1));
    unsigned local;
    EXPECT(hipFreeAsync(&local, s1), hipErrorInvalidValue);
    EXPECT(hipMallocFromPoolAsync(&p, 64, NULL, s1), hipErrorInvalidValue);
    EXPECT(hipMallocFromPoolAsync(NULL, 64, def, s1), hipErrorInvalidValue);
    EXPECT(hipMemPoolSetAttribute(def, hipMemPoolAttrReservedMemCurrent, &on), hipErrorInvalidValue);
    unsigned long long five = 5, zero = 0;
    EXPECT(hipMemPoolSetAttribute(def, hipMemPoolAttrUsedMemHigh, &five), hipErrorInvalidValue);
    OK(hipMemPoolSetAttribute(def, hipMemPoolAttrUsedMemHigh, &zero));
    EXPECT(hipMemPoolSetAttribute(def, (hipMemPoolAttr)99, &zero), hipErrorInvalidValue);
    EXPECT(hipMemPoolGetAttribute(def, hipMemPoolAttrUsedMemCurrent, NULL), hipErrorInvalidValue);
    EXPECT(hipMemPoolGetAttribute(NULL, hipMemPoolAttrUsedMemCurrent, &five), hipErrorInvalidValue);
    EXPECT(hipMemPoolTrimTo(NULL, 0), hipErrorInvalidValue);

    /* The freeing stream reuses a block at once, even while its free is still pending; another
       stream gets new memory. The new owner's work runs after the old owner's. */
    int g = gate(s1);
    OK(hipMallocAsync(&p, 1000, s1));
    OK(hipMemsetAsync(p, 0, 4, s1));
    run(&inc_symbol, p, s1);
    OK(hipFreeAsync(p, s1));
    EXPECT(hipFreeAsync(p, s1), hipErrorInvalidValue); /* double free */
    OK(hipMallocAsync(&q, 1000, s2));
    TRUE(q != p);
    OK(hipMallocAsync(&r, 1024, s1));
    TRUE(r == p);
    run(&twice_symbol, r, s1);
    open_gate(g);
    OK(hipStreamSynchronize(s1));
    TRUE(value(r) == 2);
    hipPointerAttribute_t pa;
    OK(hipPointerGetAttributes(&pa, r));
    TRUE(pa.memoryType == hipMemoryTypeDevice && pa.device == 0);
    TRUE(attr64(def, hipMemPoolAttrUsedMemCurrent) == 2048);
    OK(hipFreeAsync(q, s2));
    OK(hipFreeAsync(r, s1));

    /* An event wait orders another stream after the free: it takes the block at once. */
    hipEvent_t e;
    OK(hipEventCreateWithFlags(&e, hipEventDisableTiming));
    g = gate(s1);
    OK(hipMallocAsync(&p, 4096, s1));
    OK(hipMemsetAsync(p, 0, 4, s1));
    run(&inc_symbol, p, s1);
    OK(hipFreeAsync(p, s1));
    OK(hipEventRecord(e, s1));
    OK(hipStreamWaitEvent(s2, e, 0));
    OK(hipMallocAsync(&q, 4096, s2));
    TRUE(q == p);
    run(&twice_symbol, q, s2);
    open_gate(g);
    OK(hipStreamSynchronize(s2));
    TRUE(value(q) == 2);
    /* A free after the record is not covered by the wait: new memory. */
    OK(hipMemPoolSetAttribute(def, hipMemPoolReuseAllowOpportunistic, &(int){0}));
    g = gate(s1);
    OK(hipMallocAsync(&p, 4096, s1));
    OK(hipEventRecord(e, s1));
    OK(hipFreeAsync(p, s1));
    OK(hipStreamWaitEvent(s2, e, 0));
    OK(hipMallocAsync(&r, 4096, s2));
    TRUE(r != p);
    open_gate(g);
    OK(hipDeviceSynchronize());
    OK(hipFreeAsync(q, s2));
    OK(hipFreeAsync(r, s2));

    /* Completed frees: with opportunistic reuse off, another stream does not take them; on, it
       does. A synchronisation point gives completed blocks back beyond the release threshold. */
    unsigned long long keep = 1 << 20;
    OK(hipMemPoolSetAttribute(def, hipMemPoolAttrReleaseThreshold, &keep));
    TRUE(attr64(def, hipMemPoolAttrReleaseThreshold) == keep);
    OK(hipMallocAsync(&p, 256, s1));
    OK(hipFreeAsync(p, s1));
    OK(hipStreamSynchronize(s1));
    OK(hipMallocAsync(&q, 256, s2));
    TRUE(q != p);
    OK(hipMemPoolSetAttribute(def, hipMemPoolReuseAllowOpportunistic, &(int){1}));
    OK(hipMallocAsync(&r, 256, s2));
    TRUE(r == p);
    OK(hipFreeAsync(q, s2));
    OK(hipFreeAsync(r, s2));
    OK(hipStreamSynchronize(s2));
    TRUE(attr64(def, hipMemPoolAttrReservedMemCurrent) > 0 && attr64(def, hipMemPoolAttrUsedMemCurrent) == 0);
    OK(hipMemPoolTrimTo(def, 0));
    TRUE(attr64(def, hipMemPoolAttrReservedMemCurrent) == 0);
    TRUE(attr64(def, hipMemPoolAttrReservedMemHigh) >= 2 * 4096);
    OK(hipMemPoolSetAttribute(def, hipMemPoolAttrReleaseThreshold, &zero));

    /* hipFree of pool memory, hipFreeAsync of hipMalloc memory. */
    OK(hipMallocAsync(&p, 64, s1));
    OK(hipFree(p));
    OK(hipMalloc(&q, 64));
    OK(hipFreeAsync(q, s1));
    EXPECT(hipFree(q), hipErrorInvalidValue);

    /* A created pool with a bound (newer HIP's maxSize, the first bytes of 5.2's reserved): full,
       the allocating stream waits for a pending free and takes its block. */
    hipMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = hipMemAllocationTypePinned;
    props.location.type = hipMemLocationTypeDevice;
    props.location.id = 0;
    size_t max_size = 4096;
    memcpy(props.reserved, &max_size, sizeof max_size);
    hipMemPool_t pool;
    EXPECT(hipMemPoolCreate(NULL, &props), hipErrorInvalidValue);
    EXPECT(hipMemPoolCreate(&pool, NULL), hipErrorInvalidValue);
    props.allocType = hipMemAllocationTypeInvalid;
    EXPECT(hipMemPoolCreate(&pool, &props), hipErrorInvalidValue);
    props.allocType = hipMemAllocationTypePinned;
    props.location.id = 3;
    EXPECT(hipMemPoolCreate(&pool, &props), hipErrorInvalidValue);
    props.location.id = 0;
    props.location.type = hipMemLocationTypeInvalid;
    EXPECT(hipMemPoolCreate(&pool, &props), hipErrorInvalidValue);
    props.location.type = hipMemLocationTypeDevice;
    OK(hipMemPoolCreate(&pool, &props));
    g = gate(s1);
    OK(hipMallocFromPoolAsync(&p, 4000, pool, s1));
    OK(hipMemsetAsync(p, 0, 4, s1));
    run(&inc_symbol, p, s1);
    OK(hipFreeAsync(p, s1));
    OK(hipMallocFromPoolAsync(&q, 4096, pool, s2));
    TRUE(q == p);
    run(&twice_symbol, q, s2);
    open_gate(g);
    OK(hipStreamSynchronize(s2));
    TRUE(value(q) == 2);
    OK(hipMemPoolSetAttribute(pool, hipMemPoolReuseAllowInternalDependencies, &(int){0}));
    OK(hipMemPoolSetAttribute(pool, hipMemPoolReuseAllowOpportunistic, &(int){0}));
    g = gate(s2);
    OK(hipFreeAsync(q, s2));
    EXPECT(hipMallocFromPoolAsync(&r, 4096, pool, s1), hipErrorOutOfMemory);
    open_gate(g);
    OK(hipDeviceSynchronize());

    /* The created pool as the device's current one; destroying it brings the default back. */
    OK(hipDeviceSetMemPool(0, pool));
    OK(hipDeviceGetMemPool(&cur, 0));
    TRUE(cur == pool);
    OK(hipMallocAsync(&p, 100, s1));
    TRUE(attr64(pool, hipMemPoolAttrUsedMemCurrent) == 256);
    OK(hipMemPoolDestroy(pool));
    OK(hipDeviceGetMemPool(&cur, 0));
    TRUE(cur == def);
    EXPECT(hipMallocFromPoolAsync(&q, 64, pool, s1), hipErrorInvalidValue);
    EXPECT(hipMemPoolDestroy(pool), hipErrorInvalidValue);
    OK(hipFreeAsync(p, s1)); /* memory outlives its pool's handle */
    OK(hipStreamSynchronize(s1));

    /* Access: read-write for the own device; one device here. */
    hipMemAccessDesc desc = {{hipMemLocationTypeDevice, 0}, hipMemAccessFlagsProtReadWrite};
    OK(hipMemPoolSetAccess(def, &desc, 1));
    EXPECT(hipMemPoolSetAccess(def, &desc, 2), hipErrorInvalidDevice);
    EXPECT(hipMemPoolSetAccess(def, NULL, 1), hipErrorInvalidValue);
    desc.flags = hipMemAccessFlagsProtNone;
    EXPECT(hipMemPoolSetAccess(def, &desc, 1), hipErrorInvalidDevice);
    desc.flags = hipMemAccessFlagsProtReadWrite;
    desc.location.id = 4;
    EXPECT(hipMemPoolSetAccess(def, &desc, 1), hipErrorInvalidDevice);
    desc.location.type = hipMemLocationTypeInvalid;
    EXPECT(hipMemPoolSetAccess(def, &desc, 1), hipErrorInvalidValue);
    hipMemAccessFlags flags = hipMemAccessFlagsProtNone;
    hipMemLocation loc = {hipMemLocationTypeDevice, 0};
    OK(hipMemPoolGetAccess(&flags, def, &loc));
    TRUE(flags == hipMemAccessFlagsProtReadWrite);
    loc.id = 2;
    EXPECT(hipMemPoolGetAccess(&flags, def, &loc), hipErrorInvalidValue);

    /* Pools are not shared between processes here. */
    int fd;
    hipMemPoolPtrExportData data;
    EXPECT(hipMemPoolExportToShareableHandle(&fd, def, hipMemHandleTypePosixFileDescriptor, 0), hipErrorNotSupported);
    EXPECT(hipMemPoolExportToShareableHandle(&fd, def, hipMemHandleTypePosixFileDescriptor, 1), hipErrorInvalidValue);
    EXPECT(hipMemPoolImportFromShareableHandle(&cur, &fd, hipMemHandleTypePosixFileDescriptor, 0), hipErrorNotSupported);
    EXPECT(hipMemPoolExportPointer(&data, gates), hipErrorNotSupported);
    EXPECT(hipMemPoolImportPointer(&p, def, &data), hipErrorNotSupported);

    /* Under capture: graph allocations, freed in the graph or by the user; the graph relaunched. */
    unsigned *out;
    OK(hipHostMalloc((void **)&out, 4, 0));
    void *plain;
    OK(hipMallocAsync(&plain, 64, s1));
    OK(hipStreamSynchronize(s1));
    OK(hipStreamBeginCapture(s1, hipStreamCaptureModeGlobal));
    void *ga, *kept;
    OK(hipMallocAsync(&ga, 64, s1));
    OK(hipMemsetAsync(ga, 0, 4, s1));
    run(&inc_symbol, ga, s1);
    run(&inc_symbol, ga, s1);
    OK(hipMemcpyAsync(out, ga, 4, hipMemcpyDeviceToHost, s1));
    EXPECT(hipFreeAsync(plain, s1), hipErrorInvalidValue); /* not a graph allocation */
    OK(hipFreeAsync(ga, s1));
    EXPECT(hipFreeAsync(ga, s1), hipErrorInvalidValue);
    OK(hipMallocAsync(&kept, 64, s1));
    OK(hipMemsetAsync(kept, 7, 4, s1));
    hipGraph_t graph;
    OK(hipStreamEndCapture(s1, &graph));
    size_t n = 0;
    OK(hipGraphGetNodes(graph, NULL, &n));
    TRUE(n == 8);
    hipGraphNode_t nodes[8];
    OK(hipGraphGetNodes(graph, nodes, &n));
    hipGraphNodeType t;
    OK(hipGraphNodeGetType(nodes[0], &t));
    TRUE(t == 10); /* hipGraphNodeTypeMemAlloc (newer HIP's value) */
    OK(hipGraphNodeGetType(nodes[5], &t));
    TRUE(t == 11); /* hipGraphNodeTypeMemFree */
    hipGraph_t copy;
    EXPECT(hipGraphClone(&copy, graph), hipErrorNotSupported);
    EXPECT(hipGraphDestroyNode(nodes[0]), hipErrorNotSupported);
    hipGraphExec_t exec, again;
    OK(hipGraphInstantiate(&exec, graph, NULL, NULL, 0));
    EXPECT(hipGraphInstantiate(&again, graph, NULL, NULL, 0), hipErrorNotSupported);
    for (int i = 0; i < 3; i++) {
        *out = 99;
        OK(hipGraphLaunch(exec, s2));
        OK(hipStreamSynchronize(s2));
        TRUE(*out == 2);
        TRUE(value(kept) == 0x07070707u);
        /* kept is the user's after a launch: a relaunch before freeing it is refused. */
        EXPECT(hipGraphLaunch(exec, s2), hipErrorInvalidValue);
        OK(hipFreeAsync(kept, s1));
    }
    OK(hipGraphExecDestroy(exec));
    OK(hipGraphDestroy(graph));
    OK(hipFreeAsync(plain, s1));

    /* A capture that fails gives its graph allocations back; so does one torn down with its
       stream. */
    void *base;
    size_t span;
    OK(hipStreamBeginCapture(s1, hipStreamCaptureModeGlobal));
    OK(hipMallocAsync(&ga, 64, s1));
    OK(hipMemGetAddressRange(&base, &span, ga));
    EXPECT(hipStreamSynchronize(s1), hipErrorStreamCaptureUnsupported);
    EXPECT(hipStreamEndCapture(s1, &graph), hipErrorStreamCaptureInvalidated);
    EXPECT(hipFreeAsync(ga, s1), hipErrorInvalidValue);
    EXPECT(hipMemGetAddressRange(&base, &span, ga), hipErrorInvalidDevicePointer);
    hipStream_t s3, s5;
    OK(hipStreamCreate(&s3));
    OK(hipStreamCreate(&s5));
    OK(hipStreamBeginCapture(s3, hipStreamCaptureModeGlobal));
    /* Allocated on a fork: still the capture's memory, given back with its origin stream. */
    hipEvent_t forked;
    OK(hipEventCreate(&forked));
    OK(hipEventRecord(forked, s3));
    OK(hipStreamWaitEvent(s5, forked, 0));
    OK(hipMallocAsync(&ga, 64, s5));
    OK(hipMemGetAddressRange(&base, &span, ga));
    OK(hipStreamDestroy(s5));
    OK(hipMemGetAddressRange(&base, &span, ga));
    OK(hipStreamDestroy(s3));
    EXPECT(hipFreeAsync(ga, s1), hipErrorInvalidValue);
    EXPECT(hipMemGetAddressRange(&base, &span, ga), hipErrorInvalidDevicePointer);
    OK(hipEventDestroy(forked));

    /* A graph's memory goes with the last of graph and executable. */
    OK(hipStreamBeginCapture(s1, hipStreamCaptureModeGlobal));
    OK(hipMallocAsync(&ga, 64, s1));
    OK(hipFreeAsync(ga, s1));
    OK(hipStreamEndCapture(s1, &graph));
    OK(hipGraphInstantiate(&exec, graph, NULL, NULL, 0));
    OK(hipGraphDestroy(graph));
    OK(hipGraphLaunch(exec, s1));
    OK(hipStreamSynchronize(s1));
    OK(hipMemGetAddressRange(&base, &span, ga));
    OK(hipGraphExecDestroy(exec));
    EXPECT(hipMemGetAddressRange(&base, &span, ga), hipErrorInvalidDevicePointer);

    /* A capture whose per-thread stream went with its thread gives its memory back: by the
       next capture begun, at the latest. */
    pthread_t exiting;
    void *orphan = NULL;
    TRUE(pthread_create(&exiting, NULL, capture_and_exit, &orphan) == 0);
    TRUE(pthread_join(exiting, NULL) == 0);
    TRUE(orphan != NULL);
    OK(hipStreamBeginCapture(s1, hipStreamCaptureModeGlobal));
    OK(hipStreamEndCapture(s1, &graph));
    OK(hipGraphDestroy(graph));
    EXPECT(hipMemGetAddressRange(&base, &span, orphan), hipErrorInvalidDevicePointer);

    /* Detached and destroyed streams. */
    aqdExecCtx_t ctx;
    hipStream_t cs;
    OK(aqdExecCtxCreate(&ctx, 0));
    OK(aqdExecCtxStreamCreate(ctx, &cs, 0, 0));
    OK(hipMallocAsync(&p, 64, cs));
    OK(aqdExecCtxDestroy(ctx));
    EXPECT(hipMallocAsync(&q, 64, cs), hipErrorStreamDetached);
    EXPECT(hipFreeAsync(p, cs), hipErrorStreamDetached);
    OK(hipFreeAsync(p, 0));
    hipStream_t dead;
    OK(hipStreamCreate(&dead));
    OK(hipStreamDestroy(dead));
    EXPECT(hipMallocAsync(&q, 64, dead), hipErrorContextIsDestroyed);

    /* A stream that allocated and freed in stream order is destroyed like any other (HIP 5.2's
       hipStreamDestroy never returns here: README, "Side by side with Debian's HIP"). */
    hipStream_t s4;
    OK(hipStreamCreate(&s4));
    OK(hipMallocAsync(&p, 1 << 20, s4));
    OK(hipMemsetAsync(p, 7, 1 << 20, s4));
    OK(hipFreeAsync(p, s4));
    OK(hipStreamSynchronize(s4));
    OK(hipStreamDestroy(s4));

    OK(hipDeviceSynchronize());
    OK(hipMemPoolTrimTo(def, 0));
    TRUE(attr64(def, hipMemPoolAttrReservedMemCurrent) == 0);
    DONE("mempool");
}
