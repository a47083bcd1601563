/* hipMemcpyBatchAsync (CUDA's cudaMemcpyBatchAsync): copies in stream order with per-range
   attributes; DuringApiCall reads the source before the call returns. */
#include "check.h"

#include <stdint.h>

#define N 1024

static hipMemcpyAttributes attr(hipMemcpySrcAccessOrder order, unsigned flags) {
    hipMemcpyAttributes a;
    memset(&a, 0, sizeof a);
    a.srcAccessOrder = order;
    a.flags = flags;
    return a;
}

int main(void) {
    TRUE(sizeof(hipMemcpyAttributes) == 24);
    hipStream_t s;
    OK(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
    unsigned *d1, *d2, *pinned;
    OK(hipMalloc((void **)&d1, N * sizeof(unsigned)));
    OK(hipMalloc((void **)&d2, N * sizeof(unsigned)));
    OK(hipHostMalloc((void **)&pinned, N * sizeof(unsigned), 0));
    static unsigned pageable[N], back[N];
    for (unsigned i = 0; i < N; i++) {
        pageable[i] = i * 7 + 1;
    }
    memset(pinned, 0, N * sizeof(unsigned));

    /* pageable -> d1 -> d2 -> pinned, then d2 -> pageable `back`; one range in stream order,
       one where the source may be read in any order. */
    void *dsts[4] = {d1, d2, pinned, back};
    void *srcs[4] = {pageable, d1, d2, d2};
    size_t sizes[4] = {N * 4, N * 4, N * 4, N * 4};
    hipMemcpyAttributes attrs[2] = {attr(hipMemcpySrcAccessOrderStream, 0),
                                    attr(hipMemcpySrcAccessOrderAny, hipMemcpyFlagPreferOverlapWithCompute)};
    size_t idxs[2] = {0, 3};
    size_t fail = 77;
    OK(hipMemcpyBatchAsync(dsts, srcs, sizes, 4, attrs, idxs, 2, &fail, s));
    TRUE(fail == 77); /* untouched on success */
    OK(hipStreamSynchronize(s));
    for (unsigned i = 0; i < N; i++) {
        if (pinned[i] != i * 7 + 1 || back[i] != i * 7 + 1) {
            TRUE(!"copied");
            break;
        }
    }

    /* DuringApiCall: the source may be changed once the call returns. The device source is
       overwritten right after, on the same stream; the copy already has it. */
    OK(hipMemset(d1, 0, N * 4));
    OK(hipMemsetD32(d2, 5, N));
    hipMemcpyAttributes during = attr(hipMemcpySrcAccessOrderDuringApiCall, 0);
    size_t zero = 0;
    void *d3[1] = {d1};
    void *s3[1] = {d2};
    OK(hipMemcpyBatchAsync(d3, s3, sizes, 1, &during, &zero, 1, NULL, s));
    OK(hipMemsetD32Async(d2, 6, N, s));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(back, d1, N * 4, hipMemcpyDeviceToHost));
    TRUE(back[0] == 5 && back[N - 1] == 5);

    /* ... and so may a pageable source and a pinned one, changed on the host at once. */
    for (unsigned i = 0; i < N; i++) {
        pageable[i] = 40 + i;
        pinned[i] = 90 + i;
    }
    void *d4[2] = {d1, d2};
    void *s4[2] = {pageable, pinned};
    OK(hipMemcpyBatchAsync(d4, s4, sizes, 2, &during, &zero, 1, NULL, s));
    memset(pageable, 0, sizeof pageable);
    memset(pinned, 0, N * sizeof(unsigned));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(back, d1, N * 4, hipMemcpyDeviceToHost));
    TRUE(back[0] == 40 && back[N - 1] == 40 + N - 1);
    OK(hipMemcpy(back, d2, N * 4, hipMemcpyDeviceToHost));
    TRUE(back[0] == 90 && back[N - 1] == 90 + N - 1);

    /* Errors: the batch as a whole (*failIdx SIZE_MAX) or one copy (its index); nothing is
       copied. */
    memset(pinned, 0, N * sizeof(unsigned));
    void *dd[2] = {pinned, NULL};
    void *ss[2] = {d1, d1};
    size_t two[2] = {16, 16};
    size_t one_idx = 0;
    hipMemcpyAttributes plain = attr(hipMemcpySrcAccessOrderStream, 0);
    fail = 0;
    EXPECT(hipMemcpyBatchAsync(dd, ss, two, 2, &plain, &one_idx, 1, &fail, s), hipErrorInvalidValue);
    TRUE(fail == 1);
    dd[1] = pinned + 8;
    EXPECT(hipMemcpyBatchAsync(dd, ss, two, 0, &plain, &one_idx, 1, &fail, s), hipErrorInvalidValue);
    TRUE(fail == SIZE_MAX);
    EXPECT(hipMemcpyBatchAsync(dd, ss, two, 2, &plain, &one_idx, 0, &fail, s), hipErrorInvalidValue);
    EXPECT(hipMemcpyBatchAsync(dd, ss, two, 2, &plain, &one_idx, 3, &fail, s), hipErrorInvalidValue);
    size_t late = 1;
    EXPECT(hipMemcpyBatchAsync(dd, ss, two, 2, &plain, &late, 1, &fail, s), hipErrorInvalidValue);
    hipMemcpyAttributes pair[2] = {plain, plain};
    size_t same[2] = {0, 0};
    EXPECT(hipMemcpyBatchAsync(dd, ss, two, 2, pair, same, 2, &fail, s), hipErrorInvalidValue);
    size_t beyond[2] = {0, 2};
    EXPECT(hipMemcpyBatchAsync(dd, ss, two, 2, pair, beyond, 2, &fail, s), hipErrorInvalidValue);
    hipMemcpyAttributes invalid = attr(hipMemcpySrcAccessOrderInvalid, 0);
    EXPECT(hipMemcpyBatchAsync(dd, ss, two, 2, &invalid, &one_idx, 1, &fail, s), hipErrorInvalidValue);
    hipMemcpyAttributes odd_flags = attr(hipMemcpySrcAccessOrderStream, 2);
    EXPECT(hipMemcpyBatchAsync(dd, ss, two, 2, &odd_flags, &one_idx, 1, &fail, s), hipErrorInvalidValue);
    EXPECT(hipMemcpyBatchAsync(NULL, ss, two, 2, &plain, &one_idx, 1, &fail, s), hipErrorInvalidValue);
    EXPECT(hipMemcpyBatchAsync(dd, ss, two, 2, NULL, &one_idx, 1, &fail, s), hipErrorInvalidValue);
    TRUE(fail == SIZE_MAX);
    OK(hipStreamSynchronize(s));
    TRUE(pinned[0] == 0 && pinned[8] == 0);

    /* DuringApiCall cannot be captured (the graph reads the source at each launch). */
    hipGraph_t graph = NULL;
    OK(hipStreamBeginCapture(s, hipStreamCaptureModeGlobal));
    EXPECT(hipMemcpyBatchAsync(d3, s3, sizes, 1, &during, &zero, 1, NULL, s), hipErrorNotSupported);
    OK(hipMemcpyBatchAsync(d3, s3, sizes, 1, &plain, &zero, 1, NULL, s));
    OK(hipStreamEndCapture(s, &graph));
    size_t nodes = 0;
    OK(hipGraphGetNodes(graph, NULL, &nodes));
    TRUE(nodes == 1);
    OK(hipGraphDestroy(graph));

    OK(hipFree(d1));
    OK(hipFree(d2));
    OK(hipHostFree(pinned));
    OK(hipStreamDestroy(s));
    DONE("memcpy_batch");
}
