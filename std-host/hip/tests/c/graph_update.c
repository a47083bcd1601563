/* Executables changed after instantiation: one kernel node of a 10,000-node graph changed through
   hipGraphExecUpdate (from the graph itself and from a clone) and through
   hipGraphExecKernelNodeSetParams, every one of the 10,000 results checked after each relaunch;
   arguments that outgrow their node (the executable is rebuilt); copy, fill and host nodes
   changed in executables, directly and by update; a launch enqueued before a change keeps the
   old parameters; updates refused for another node count, other edges, another node type
   or another copy kind, with HIP's result and error node, the executable left as it was; and
   executables of captured graphs instantiated as captured, then changed through the executable
   before anything read the graph, through hipGraphExecUpdate after the graph changed, and
   launched after their graph was destroyed. */
#include "check.h"

/* store(words, index, value): words[index] = value. */
static void store(void **args, dim3 blockIdx, dim3 gridDim, dim3 blockDim) {
    unsigned *words = *(unsigned **)args[0];
    words[*(unsigned *)args[1]] = *(unsigned *)args[2];
}
/* store_wide(words, index, value, add): words[index] = value + add (longer arguments). */
static void store_wide(void **args, dim3 blockIdx, dim3 gridDim, dim3 blockDim) {
    unsigned *words = *(unsigned **)args[0];
    words[*(unsigned *)args[1]] = *(unsigned *)args[2] + (unsigned)*(unsigned long long *)args[3];
}
/* append(log, value): the value at the end of the log. */
struct log {
    unsigned n, values[16];
};
static void append(void **args, dim3 blockIdx, dim3 gridDim, dim3 blockDim) {
    struct log *l = *(struct log **)args[0];
    if (l->n < 16) l->values[l->n++] = *(unsigned *)args[1];
}
static char store_symbol, wide_symbol, append_symbol;

static int runs_a, runs_b;
static void host_a(void *data) { runs_a += *(int *)data; }
static void host_b(void *data) { runs_b += *(int *)data; }

enum { NODES = 10000, M = 64 };
static unsigned expected[NODES], got[NODES];
static unsigned pageable_a[M], pageable_b[M];

/* The parameters of a store node: its argument list lives in `slot`. */
struct args {
    unsigned *words;
    unsigned index, value;
    unsigned long long add;
    void *list[4];
};
static hipKernelNodeParams store_params(struct args *a, unsigned *words, unsigned index, unsigned value) {
    a->words = words;
    a->index = index;
    a->value = value;
    a->list[0] = &a->words;
    a->list[1] = &a->index;
    a->list[2] = &a->value;
    a->list[3] = &a->add;
    hipKernelNodeParams p = {{1, 1, 1}, NULL, &store_symbol, {1, 1, 1}, a->list, 0};
    return p;
}

/* Launches `x` on `s`, waits, and compares all NODES words with `expected`. */
static void run_and_check(hipGraphExec_t x, hipStream_t s, unsigned *words, int line) {
    OK(hipGraphLaunch(x, s));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(got, words, sizeof got, hipMemcpyDeviceToHost));
    int bad = 0;
    for (unsigned i = 0; i < NODES; i++) {
        if (got[i] != expected[i] && bad++ < 3)
            fprintf(stderr, "line %d: word %u is %u, want %u\n", line, i, got[i], expected[i]);
    }
    TRUE(bad == 0);
}
#define RUN_AND_CHECK(x) run_and_check(x, s, words, __LINE__)

static hipGraphExecUpdateResult update(hipGraphExec_t x, hipGraph_t g, hipGraphNode_t *err, hipError_t want) {
    hipGraphExecUpdateResult res = (hipGraphExecUpdateResult)-1;
    *err = (hipGraphNode_t)1;
    EXPECT(hipGraphExecUpdate(x, g, err, &res), want);
    return res;
}

int main(void) {
    size_t sizes[] = {sizeof(void *), 4, 4}, wide_sizes[] = {sizeof(void *), 4, 4, 8};
    size_t append_sizes[] = {sizeof(void *), 4};
    OK(aqdRegisterHostKernel(&store_symbol, store, 3, sizes));
    OK(aqdRegisterHostKernel(&wide_symbol, store_wide, 4, wide_sizes));
    OK(aqdRegisterHostKernel(&append_symbol, append, 2, append_sizes));
    hipStream_t s;
    OK(hipStreamCreate(&s));
    unsigned *words;
    OK(hipMalloc((void **)&words, sizeof expected));
    OK(hipMemset(words, 0, sizeof expected));
    hipGraphNode_t err;
    struct args a = {0};
    hipKernelNodeParams p;

    /* A chain of 10,000 stores: node i stores i into word i. */
    hipGraph_t g;
    OK(hipGraphCreate(&g, 0));
    static hipGraphNode_t nodes[NODES];
    for (unsigned i = 0; i < NODES; i++) {
        expected[i] = i;
        p = store_params(&a, words, i, i);
        OK(hipGraphAddKernelNode(&nodes[i], g, i ? &nodes[i - 1] : NULL, i ? 1 : 0, &p));
    }
    hipGraphExec_t x;
    OK(hipGraphInstantiate(&x, g, NULL, NULL, 0));
    RUN_AND_CHECK(x);

    /* One node changed in the graph, taken in by hipGraphExecUpdate. */
    p = store_params(&a, words, 5000, 55555);
    OK(hipGraphKernelNodeSetParams(nodes[5000], &p));
    expected[5000] = 55555;
    TRUE(update(x, g, &err, hipSuccess) == hipGraphExecUpdateSuccess && err == NULL);
    RUN_AND_CHECK(x);
    RUN_AND_CHECK(x); /* and every launch after */

    /* From a clone, changed in one node. */
    hipGraph_t clone;
    OK(hipGraphClone(&clone, g));
    hipGraphNode_t c7000;
    OK(hipGraphNodeFindInClone(&c7000, nodes[7000], clone));
    p = store_params(&a, words, 7000, 77777);
    OK(hipGraphKernelNodeSetParams(c7000, &p));
    expected[7000] = 77777;
    TRUE(update(x, clone, &err, hipSuccess) == hipGraphExecUpdateSuccess && err == NULL);
    RUN_AND_CHECK(x);

    /* Directly in the executable: the graph keeps its own parameters. */
    p = store_params(&a, words, 9999, 99999);
    OK(hipGraphExecKernelNodeSetParams(x, nodes[9999], &p));
    expected[9999] = 99999;
    RUN_AND_CHECK(x);
    hipKernelNodeParams back;
    OK(hipGraphKernelNodeGetParams(nodes[9999], &back));
    TRUE(*(unsigned *)back.kernelParams[2] == 9999);

    /* Updating from the graph again brings its parameters back into both changed nodes. */
    expected[7000] = 7000;
    expected[9999] = 9999;
    TRUE(update(x, g, &err, hipSuccess) == hipGraphExecUpdateSuccess && err == NULL);
    RUN_AND_CHECK(x);

    /* Arguments longer than the node's (another kernel): the executable is rebuilt, correctly. */
    p = store_params(&a, words, 3, 300);
    p.func = &wide_symbol;
    a.add = 33;
    OK(hipGraphExecKernelNodeSetParams(x, nodes[3], &p));
    expected[3] = 333;
    RUN_AND_CHECK(x);
    p = store_params(&a, words, 3, 3);
    OK(hipGraphExecKernelNodeSetParams(x, nodes[3], &p)); /* back to the short arguments */
    expected[3] = 3;
    RUN_AND_CHECK(x);
    EXPECT(hipGraphExecKernelNodeSetParams(x, nodes[3], NULL), hipErrorInvalidValue);

    /* Launch, change, launch: the first launch runs the old parameters, the second the new. */
    hipGraph_t lg;
    OK(hipGraphCreate(&lg, 0));
    struct log *l;
    OK(hipMalloc((void **)&l, sizeof *l));
    OK(hipMemset(l, 0, sizeof *l));
    hipGraphNode_t prev = NULL, last;
    for (unsigned i = 0; i < 1000; i++) { /* a long launch, likely still running at the change */
        p = store_params(&a, words, i, i);
        OK(hipGraphAddKernelNode(&prev, lg, i ? &prev : NULL, i ? 1 : 0, &p));
    }
    unsigned v = 1;
    void *log_args[] = {&l, &v};
    hipKernelNodeParams lp = {{1, 1, 1}, NULL, &append_symbol, {1, 1, 1}, log_args, 0};
    OK(hipGraphAddKernelNode(&last, lg, &prev, 1, &lp));
    hipGraphExec_t lx;
    OK(hipGraphInstantiate(&lx, lg, NULL, NULL, 0));
    OK(hipGraphLaunch(lx, s));
    v = 2;
    OK(hipGraphExecKernelNodeSetParams(lx, last, &lp));
    OK(hipGraphLaunch(lx, s));
    v = 3;
    OK(hipGraphKernelNodeSetParams(last, &lp));
    OK(hipGraphExecUpdate(lx, lg, &err, &(hipGraphExecUpdateResult){0}));
    OK(hipGraphLaunch(lx, s));
    OK(hipStreamSynchronize(s));
    struct log hl;
    OK(hipMemcpy(&hl, l, sizeof hl, hipMemcpyDeviceToHost));
    TRUE(hl.n == 3 && hl.values[0] == 1 && hl.values[1] == 2 && hl.values[2] == 3);
    OK(hipGraphExecDestroy(lx));

    /* Copies, fills and host functions, changed in the executable and by update. */
    unsigned *dev_a, *dev_b, *out;
    OK(hipMalloc((void **)&dev_a, 4 * M * 4));
    OK(hipMalloc((void **)&dev_b, 4 * M * 4));
    OK(hipMalloc((void **)&out, 4 * M * 4));
    unsigned host_a_words[4 * M], host_out[4 * M];
    for (unsigned i = 0; i < 4 * M; i++) host_a_words[i] = 1000 + i;
    OK(hipMemcpy(dev_a, host_a_words, sizeof host_a_words, hipMemcpyHostToDevice));
    for (unsigned i = 0; i < 4 * M; i++) host_a_words[i] = 2000 + i;
    OK(hipMemcpy(dev_b, host_a_words, sizeof host_a_words, hipMemcpyHostToDevice));
    for (unsigned i = 0; i < M; i++) {
        pageable_a[i] = 3000 + i;
        pageable_b[i] = 4000 + i;
    }
    hipGraph_t cg;
    OK(hipGraphCreate(&cg, 0));
    hipGraphNode_t fill, copy1d, copy2d, staged, hostn;
    hipMemsetParams mp = {out, 4, 1, 0, 7, 4 * M}; /* out[0..4M) = 7 */
    OK(hipGraphAddMemsetNode(&fill, cg, NULL, 0, &mp));
    OK(hipGraphAddMemcpyNode1D(&copy1d, cg, &fill, 1, out, dev_a, M * 4, hipMemcpyDeviceToDevice));
    /* Two pitched rows of 8 words from dev_a into out[M + …]. */
    hipMemcpy3DParms p3 = {0};
    p3.srcPtr = make_hipPitchedPtr(dev_a, 64 * 4, 8 * 4, 2);
    p3.dstPtr = make_hipPitchedPtr(out + M, 16 * 4, 8 * 4, 2);
    p3.extent = make_hipExtent(8 * 4, 2, 1);
    p3.kind = hipMemcpyDeviceToDevice;
    OK(hipGraphAddMemcpyNode(&copy2d, cg, &copy1d, 1, &p3));
    /* A pageable source, staged. */
    OK(hipGraphAddMemcpyNode1D(&staged, cg, &copy2d, 1, out + 2 * M, pageable_a, M * 4, hipMemcpyHostToDevice));
    int one = 1;
    hipHostNodeParams hp = {host_a, &one};
    OK(hipGraphAddHostNode(&hostn, cg, &staged, 1, &hp));
    hipGraphExec_t cx;
    OK(hipGraphInstantiate(&cx, cg, NULL, NULL, 0));
    OK(hipGraphLaunch(cx, s));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(host_out, out, sizeof host_out, hipMemcpyDeviceToHost));
    TRUE(host_out[0] == 1000 && host_out[M - 1] == 1000 + M - 1 && host_out[3 * M] == 7);
    TRUE(host_out[M] == 1000 && host_out[M + 16] == 1064 && host_out[M + 8] == 7);
    TRUE(host_out[2 * M] == 3000 && host_out[3 * M - 1] == 3000 + M - 1 && runs_a == 1);

    mp.value = 9;
    OK(hipGraphExecMemsetNodeSetParams(cx, fill, &mp));
    OK(hipGraphExecMemcpyNodeSetParams1D(cx, copy1d, out, dev_b, M * 4, hipMemcpyDeviceToDevice));
    p3.srcPtr = make_hipPitchedPtr(dev_b + 1, 64 * 4, 8 * 4, 2); /* the same rows, shifted */
    OK(hipGraphExecMemcpyNodeSetParams(cx, copy2d, &p3));
    OK(hipGraphExecMemcpyNodeSetParams1D(cx, staged, out + 2 * M, pageable_b, M * 4, hipMemcpyHostToDevice));
    hipHostNodeParams hp2 = {host_b, &one};
    OK(hipGraphExecHostNodeSetParams(cx, hostn, &hp2));
    OK(hipGraphLaunch(cx, s));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(host_out, out, sizeof host_out, hipMemcpyDeviceToHost));
    TRUE(host_out[0] == 2000 && host_out[M - 1] == 2000 + M - 1 && host_out[3 * M] == 9);
    TRUE(host_out[M] == 2001 && host_out[M + 16] == 2065 && host_out[M + 8] == 9);
    TRUE(host_out[2 * M] == 4000 && host_out[3 * M - 1] == 4000 + M - 1);
    TRUE(runs_a == 1 && runs_b == 1);

    /* A fill of two rows where there was one: rebuilt. */
    hipMemsetParams mp2 = {out, 4, 1, 2 * M * 4, 5, M}; /* rows out[0..M) and out[2M..3M) */
    OK(hipGraphExecMemsetNodeSetParams(cx, fill, &mp2));
    OK(hipGraphExecMemcpyNodeSetParams1D(cx, staged, out + 3 * M, pageable_b, 4, hipMemcpyHostToDevice));
    mp2.height = 2;
    OK(hipGraphExecMemsetNodeSetParams(cx, fill, &mp2));
    OK(hipGraphLaunch(cx, s));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(host_out, out, sizeof host_out, hipMemcpyDeviceToHost));
    TRUE(host_out[0] == 2000 && host_out[2 * M] == 5 && host_out[3 * M] == 4000 && host_out[3 * M + 1] == 9);
    TRUE(runs_b == 2);

    /* The same changes made in the graph and taken in by update: back to the first ones. */
    hipGraph_t cg2;
    OK(hipGraphClone(&cg2, cg));
    hipGraphNode_t f2, h2;
    OK(hipGraphNodeFindInClone(&f2, fill, cg2));
    OK(hipGraphNodeFindInClone(&h2, hostn, cg2));
    mp.value = 11;
    OK(hipGraphMemsetNodeSetParams(f2, &mp));
    hipHostNodeParams hp3 = {host_b, &one};
    OK(hipGraphHostNodeSetParams(h2, &hp3));
    TRUE(update(cx, cg2, &err, hipSuccess) == hipGraphExecUpdateSuccess && err == NULL);
    OK(hipMemset(out, 0, 4 * M * 4));
    OK(hipGraphLaunch(cx, s));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(host_out, out, sizeof host_out, hipMemcpyDeviceToHost));
    TRUE(host_out[0] == 1000 && host_out[2 * M] == 3000 && host_out[3 * M] == 11 && host_out[M + 8] == 11);
    TRUE(runs_a == 1 && runs_b == 3);

    /* Refused updates: the executable stays as it was. */
    hipGraph_t bad;
    OK(hipGraphClone(&bad, cg));
    hipGraphNode_t extra;
    OK(hipGraphAddEmptyNode(&extra, bad, NULL, 0));
    TRUE(update(cx, bad, &err, hipErrorGraphExecUpdateFailure) == hipGraphExecUpdateErrorTopologyChanged);
    TRUE(err == NULL);
    OK(hipGraphDestroy(bad));
    /* Other edges, the same nodes: the copy out of pageable memory loses its dependency. */
    OK(hipGraphClone(&bad, cg));
    hipGraphNode_t bc2, bstaged, bhost;
    OK(hipGraphNodeFindInClone(&bc2, copy2d, bad));
    OK(hipGraphNodeFindInClone(&bstaged, staged, bad));
    OK(hipGraphNodeFindInClone(&bhost, hostn, bad));
    OK(hipGraphRemoveDependencies(bad, &bc2, &bstaged, 1));
    TRUE(update(cx, bad, &err, hipErrorGraphExecUpdateFailure) == hipGraphExecUpdateErrorTopologyChanged);
    TRUE(err == bstaged);
    OK(hipGraphDestroy(bad));
    /* Another node type at the host node's place. */
    OK(hipGraphClone(&bad, cg));
    OK(hipGraphNodeFindInClone(&bstaged, staged, bad));
    OK(hipGraphNodeFindInClone(&bhost, hostn, bad));
    OK(hipGraphDestroyNode(bhost));
    hipGraphNode_t bempty;
    OK(hipGraphAddEmptyNode(&bempty, bad, &bstaged, 1));
    TRUE(update(cx, bad, &err, hipErrorGraphExecUpdateFailure) == hipGraphExecUpdateErrorNodeTypeChanged);
    TRUE(err == bempty);
    OK(hipGraphDestroy(bad));
    /* A copy of another kind. */
    OK(hipGraphClone(&bad, cg));
    hipGraphNode_t bc1;
    OK(hipGraphNodeFindInClone(&bc1, copy1d, bad));
    OK(hipGraphMemcpyNodeSetParams1D(bc1, out, dev_b, M * 4, hipMemcpyDefault));
    TRUE(update(cx, bad, &err, hipErrorGraphExecUpdateFailure) == hipGraphExecUpdateErrorParametersChanged);
    TRUE(err == bc1);
    OK(hipGraphDestroy(bad));
    EXPECT(hipGraphExecUpdate(cx, cg, NULL, &(hipGraphExecUpdateResult){0}), hipErrorInvalidValue);
    EXPECT(hipGraphExecUpdate(cx, NULL, &err, &(hipGraphExecUpdateResult){0}), hipErrorInvalidValue);
    /* The refusals changed nothing: still the parameters of cg2. */
    OK(hipMemset(out, 0, 4 * M * 4));
    OK(hipGraphLaunch(cx, s));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(host_out, out, sizeof host_out, hipMemcpyDeviceToHost));
    TRUE(host_out[0] == 1000 && host_out[2 * M] == 3000 && host_out[3 * M] == 11 && runs_b == 4);

    /* Captured graphs: eight stores (node i stores 100 + i into word i) and a host function. */
    unsigned *cw, host_cw[8];
    OK(hipMalloc((void **)&cw, sizeof host_cw));
    hipGraph_t captured[2];
    hipGraphNode_t tail[2];
    for (int c = 0; c < 2; c++) {
        OK(hipStreamBeginCapture(s, hipStreamCaptureModeGlobal));
        for (unsigned i = 0; i < 8; i++) {
            unsigned index = i, value = 100 + i;
            void *list[] = {&cw, &index, &value};
            OK(hipLaunchKernel(&store_symbol, (dim3){1, 1, 1}, (dim3){1, 1, 1}, list, 0, s));
        }
        /* The last store's node, as the capture reports it (the graph table is not read). */
        hipStreamCaptureStatus st;
        const hipGraphNode_t *deps = NULL;
        size_t ndeps = 0;
        OK(hipStreamGetCaptureInfo_v2(s, &st, NULL, NULL, &deps, &ndeps));
        TRUE(ndeps == 1);
        tail[c] = deps[0];
        OK(hipLaunchHostFunc(s, host_a, &one));
        OK(hipStreamEndCapture(s, &captured[c]));
    }
    hipGraphExec_t cx1, cx2, cx3;
    OK(hipGraphInstantiate(&cx1, captured[0], NULL, NULL, 0));
    OK(hipGraphInstantiate(&cx2, captured[0], NULL, NULL, 0));
    OK(hipGraphInstantiate(&cx3, captured[1], NULL, NULL, 0));
    /* Changed through the executable first: word 7 gets 777 in cx1 alone. */
    p = store_params(&a, cw, 7, 777);
    OK(hipGraphExecKernelNodeSetParams(cx1, tail[0], &p));
    int runs_before = runs_a;
    OK(hipMemset(cw, 0, sizeof host_cw));
    OK(hipGraphLaunch(cx1, s));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(host_cw, cw, sizeof host_cw, hipMemcpyDeviceToHost));
    TRUE(host_cw[0] == 100 && host_cw[6] == 106 && host_cw[7] == 777 && runs_a == runs_before + 1);
    /* The graph itself is as captured: its last store is 107, and so is cx2's. */
    hipKernelNodeParams got_p;
    OK(hipGraphKernelNodeGetParams(tail[0], &got_p));
    TRUE(got_p.func == &store_symbol && *(unsigned *)got_p.kernelParams[2] == 107);
    OK(hipGraphDestroy(captured[0]));
    OK(hipMemset(cw, 0, sizeof host_cw));
    OK(hipGraphLaunch(cx2, s));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(host_cw, cw, sizeof host_cw, hipMemcpyDeviceToHost));
    TRUE(host_cw[0] == 100 && host_cw[7] == 107 && runs_a == runs_before + 2);
    /* The second graph changed (word 7 gets 999), taken in by cx3 through an update. */
    p = store_params(&a, cw, 7, 999);
    OK(hipGraphKernelNodeSetParams(tail[1], &p));
    TRUE(update(cx3, captured[1], &err, hipSuccess) == hipGraphExecUpdateSuccess && err == NULL);
    OK(hipMemset(cw, 0, sizeof host_cw));
    OK(hipGraphLaunch(cx3, s));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(host_cw, cw, sizeof host_cw, hipMemcpyDeviceToHost));
    TRUE(host_cw[0] == 100 && host_cw[6] == 106 && host_cw[7] == 999 && runs_a == runs_before + 3);
    OK(hipGraphExecDestroy(cx1));
    OK(hipGraphExecDestroy(cx2));
    OK(hipGraphExecDestroy(cx3));
    OK(hipGraphDestroy(captured[1]));
    EXPECT(hipGraphDestroy(captured[0]), hipErrorInvalidValue);
    OK(hipFree(cw));

    /* And the 10,000-node executable still runs what it was last given. */
    RUN_AND_CHECK(x);
    OK(hipGraphExecDestroy(cx));
    OK(hipGraphExecDestroy(x));
    OK(hipGraphDestroy(cg2));
    OK(hipGraphDestroy(cg));
    OK(hipGraphDestroy(clone));
    OK(hipGraphDestroy(lg));
    OK(hipGraphDestroy(g));
    OK(hipStreamDestroy(s));
    DONE("graph_update");
}
