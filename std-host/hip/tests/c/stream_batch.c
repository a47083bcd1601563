/* hipStreamBatchMemOp (CUDA's cuStreamBatchMemOp): waits and writes in stream order, every entry
   checked before any is enqueued. Host-visible memory: the test releases the waits itself. */
#include "check.h"

#include <stdatomic.h>

static hipStreamBatchMemOpParams wait32(void *addr, uint32_t v, unsigned flags) {
    hipStreamBatchMemOpParams p;
    memset(&p, 0, sizeof p);
    p.waitValue.operation = hipStreamMemOpWaitValue32;
    p.waitValue.address = addr;
    p.waitValue.value = v;
    p.waitValue.flags = flags;
    return p;
}

static hipStreamBatchMemOpParams wait64(void *addr, uint64_t v, unsigned flags) {
    hipStreamBatchMemOpParams p = wait32(addr, 0, flags);
    p.waitValue.operation = hipStreamMemOpWaitValue64;
    p.waitValue.value64 = v;
    return p;
}

static hipStreamBatchMemOpParams write32(void *addr, uint32_t v, unsigned flags) {
    hipStreamBatchMemOpParams p;
    memset(&p, 0, sizeof p);
    p.writeValue.operation = hipStreamMemOpWriteValue32;
    p.writeValue.address = addr;
    p.writeValue.value = v;
    p.writeValue.flags = flags;
    return p;
}

static hipStreamBatchMemOpParams write64(void *addr, uint64_t v) {
    hipStreamBatchMemOpParams p = write32(addr, 0, 0);
    p.writeValue.operation = hipStreamMemOpWriteValue64;
    p.writeValue.value64 = v;
    return p;
}

static hipStreamBatchMemOpParams plain(hipStreamBatchMemOpType op, unsigned flags) {
    hipStreamBatchMemOpParams p;
    memset(&p, 0, sizeof p);
    p.memoryBarrier.operation = op;
    p.memoryBarrier.flags = flags;
    return p;
}

int main(void) {
    TRUE(sizeof(hipStreamBatchMemOpParams) == 48);
    uint64_t *m = NULL;
    OK(hipHostMalloc((void **)&m, 16 * sizeof(uint64_t), 0));
    memset(m, 0, 16 * sizeof(uint64_t));
    uint32_t *w = (uint32_t *)&m[8];
    hipStream_t s;
    OK(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));

    /* write, write, wait (m[2] >= 7), barrier, flush, wait (m[3] == 0x1_0000_0000), write. */
    hipStreamBatchMemOpParams ops[7] = {
        write32(&w[0], 5, 0),
        write64(&m[1], 0x100000002ull),
        wait32(&m[2], 7, hipStreamWaitValueGte),
        plain(hipStreamMemOpBarrier, 0),
        plain(hipStreamMemOpFlushRemoteWrites, 0),
        wait64(&m[3], 0x100000000ull, hipStreamWaitValueEq),
        write32(&w[1], 9, 1 /* CUDA's no-memory-barrier flag */),
    };
    OK(hipStreamBatchMemOp(s, 7, ops, 0));
    /* The last write waits for both values; nothing releases them yet. */
    EXPECT(hipStreamQuery(s), hipErrorNotReady);
    TRUE(atomic_load((_Atomic uint32_t *)&w[1]) == 0);
    atomic_store((_Atomic uint64_t *)&m[2], 6); /* 6 < 7: still waiting */
    atomic_store((_Atomic uint64_t *)&m[3], 0x100000000ull);
    EXPECT(hipStreamQuery(s), hipErrorNotReady);
    TRUE(atomic_load((_Atomic uint32_t *)&w[1]) == 0);
    atomic_store((_Atomic uint64_t *)&m[2], 8);
    OK(hipStreamSynchronize(s));
    TRUE(w[0] == 5 && m[1] == 0x100000002ull && w[1] == 9);

    /* AND and NOR, with CUDA's flush bit. */
    hipStreamBatchMemOpParams more[3] = {
        wait32(&m[4], 0x10, hipStreamWaitValueAnd | (1u << 30)),
        wait64(&m[5], ~0x3ull, hipStreamWaitValueNor),
        write32(&w[2], 11, 0),
    };
    OK(hipStreamBatchMemOp(s, 3, more, 0));
    atomic_store((_Atomic uint64_t *)&m[5], 0x1); /* ~(1 | ~3) = 2: NOR holds */
    EXPECT(hipStreamQuery(s), hipErrorNotReady);
    atomic_store((_Atomic uint64_t *)&m[4], 0x30); /* 0x30 & 0x10 != 0 */
    OK(hipStreamSynchronize(s));
    TRUE(w[2] == 11);

    /* A refused batch enqueues nothing: its valid first write never happens. */
    hipStreamBatchMemOpParams bad[2] = {write32(&w[3], 1, 0), write32((char *)&w[4] + 1, 1, 0)};
    EXPECT(hipStreamBatchMemOp(s, 2, bad, 0), hipErrorInvalidValue);
    bad[1] = write64(&w[5], 1); /* 4-aligned, not 8 */
    EXPECT(hipStreamBatchMemOp(s, 2, bad, 0), hipErrorInvalidValue);
    bad[1] = wait32(&w[4], 1, 4);
    EXPECT(hipStreamBatchMemOp(s, 2, bad, 0), hipErrorInvalidValue);
    bad[1] = write32(NULL, 1, 0);
    EXPECT(hipStreamBatchMemOp(s, 2, bad, 0), hipErrorInvalidValue);
    bad[1] = write32(&w[4], 1, 2);
    EXPECT(hipStreamBatchMemOp(s, 2, bad, 0), hipErrorInvalidValue);
    bad[1] = plain((hipStreamBatchMemOpType)7, 0);
    EXPECT(hipStreamBatchMemOp(s, 2, bad, 0), hipErrorInvalidValue);
    bad[1] = plain(hipStreamMemOpBarrier, 2);
    EXPECT(hipStreamBatchMemOp(s, 2, bad, 0), hipErrorInvalidValue);
    bad[1] = plain(hipStreamMemOpFlushRemoteWrites, 1);
    EXPECT(hipStreamBatchMemOp(s, 2, bad, 0), hipErrorInvalidValue);
    EXPECT(hipStreamBatchMemOp(s, 1, bad, 1), hipErrorInvalidValue);
    EXPECT(hipStreamBatchMemOp(s, 1, NULL, 0), hipErrorInvalidValue);
    OK(hipStreamBatchMemOp(s, 0, NULL, 0));
    OK(hipStreamSynchronize(s));
    TRUE(w[3] == 0);

    /* A destroyed stream takes nothing. */
    hipStream_t gone;
    OK(hipStreamCreate(&gone));
    OK(hipStreamDestroy(gone));
    EXPECT(hipStreamBatchMemOp(gone, 1, bad, 0), hipErrorContextIsDestroyed);
    OK(hipDeviceSynchronize());
    TRUE(w[3] == 0);

    OK(hipStreamDestroy(s));
    OK(hipHostFree(m));
    DONE("stream_batch");
}
