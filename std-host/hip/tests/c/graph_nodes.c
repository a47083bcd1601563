/* Graphs built node by node: every node kind, edges and queries (with HIP's list conventions),
   parameters read and changed in graphs and in executables, clones, whole-graph updates,
   child graphs, copies of pageable memory replayed with the host data of each launch, and the
   nodes of a capture's graph. */
#include "check.h"

/* add(buf, value, n): buf[i] += value. */
static void add(void **args, dim3 blockIdx, dim3 gridDim, dim3 blockDim) {
    unsigned *buf = *(unsigned **)args[0];
    unsigned value = *(unsigned *)args[1];
    unsigned n = *(unsigned *)args[2];
    for (unsigned t = 0; t < blockDim.x; t++) {
        unsigned i = blockIdx.x * blockDim.x + t;
        if (i < n) buf[i] += value;
    }
}
static char add_symbol, not_a_kernel;

static volatile int host_runs;
static void count_run(void *data) { host_runs += *(int *)data; }
static void other_fn(void *data) { (void)data; }

enum { N = 256 };
static unsigned pageable_in[N], pageable_out[N];

static hipGraphNodeType type_of(hipGraphNode_t n) {
    hipGraphNodeType t = (hipGraphNodeType)-1;
    OK(hipGraphNodeGetType(n, &t));
    return t;
}

static int has(hipGraphNode_t *list, size_t n, hipGraphNode_t x) {
    for (size_t i = 0; i < n; i++)
        if (list[i] == x) return 1;
    return 0;
}

/* Graphs core holds (docs/hip-semantics.md, "Graphs"): kernel, host, empty and event nodes
   only, built and instantiated with no other call in between; then calls that need this
   layer's model of them. `foreign` is a node of another graph. */
static void core_held(hipStream_t s, unsigned *buf, unsigned *buf2, hipEvent_t ev2, hipGraphNode_t foreign) {
    unsigned host[N];
    /* Kernel, host, empty and event nodes only, built and instantiated with no other call in
       between: core holds the graph (docs/hip-semantics.md, "Graphs"). k1 → {k2, h} → e, the
       event record after e and h through added edges (one pair of them an existing edge). */
    OK(hipMemset(buf2, 0, N * 4));
    hipGraph_t cg;
    OK(hipGraphCreate(&cg, 0));
    hipGraphNode_t c1, c2, ch, ce, crec, c3;
    unsigned cn = N, one = 1, two = 2, hundred = 100;
    void *a1[] = {&buf2, &one, &cn}, *a2[] = {&buf2, &two, &cn}, *a3[] = {&buf2, &hundred, &cn};
    hipKernelNodeParams k1 = {{64, 1, 1}, NULL, &add_symbol, {N / 64, 1, 1}, a1, 0};
    hipKernelNodeParams k2 = {{64, 1, 1}, NULL, &add_symbol, {N / 64, 1, 1}, a2, 0};
    hipKernelNodeParams k3 = {{64, 1, 1}, NULL, &add_symbol, {N / 64, 1, 1}, a3, 0};
    OK(hipGraphAddKernelNode(&c1, cg, NULL, 0, &k1));
    one = 50; /* copied at add time */
    OK(hipGraphAddKernelNode(&c2, cg, &c1, 1, &k2));
    int inc = 1;
    hipHostNodeParams chp = {count_run, &inc};
    OK(hipGraphAddHostNode(&ch, cg, &c1, 1, &chp));
    hipGraphNode_t cjoin[] = {c2, ch};
    OK(hipGraphAddEmptyNode(&ce, cg, cjoin, 2));
    OK(hipGraphAddEventRecordNode(&crec, cg, NULL, 0, ev2));
    EXPECT(hipGraphAddDependencies(cg, &ce, &ce, 1), hipErrorInvalidValue);
    EXPECT(hipGraphAddDependencies(cg, &foreign, &crec, 1), hipErrorInvalidValue); /* another graph's */
    hipGraphNode_t cfrom[] = {ce, ch, c1}, cto[] = {crec, crec, c2};
    EXPECT(hipGraphAddDependencies(cg, cfrom, cto, 3), hipErrorInvalidValue); /* c1 → c2 exists */
    /* An edge against id order: cz, added last, runs first. */
    hipGraphNode_t cz;
    OK(hipGraphAddEmptyNode(&cz, cg, NULL, 0));
    OK(hipGraphAddDependencies(cg, &cz, &c1, 1));
    /* Lists (read from core's graph): topological order, lowest id first among the ready. */
    hipGraphNode_t clist[8], cdeps[4];
    size_t cnodes = 8, cnd = 4, cedges = 0;
    OK(hipGraphGetNodes(cg, clist, &cnodes));
    TRUE(cnodes == 6 && clist[0] == cz && clist[1] == c1 && clist[2] == c2 && clist[3] == ch);
    TRUE(clist[4] == ce && clist[5] == crec);
    cnodes = 8;
    OK(hipGraphGetRootNodes(cg, clist, &cnodes));
    TRUE(cnodes == 1 && clist[0] == cz);
    OK(hipGraphGetEdges(cg, NULL, NULL, &cedges));
    TRUE(cedges == 7);
    OK(hipGraphNodeGetDependentNodes(c1, cdeps, &cnd));
    TRUE(cnd == 2 && has(cdeps, 2, c2) && has(cdeps, 2, ch));
    TRUE(type_of(c1) == hipGraphNodeTypeKernel && type_of(crec) == hipGraphNodeTypeEventRecord);
    /* Host and event parameters read back from core's graph. */
    hipHostNodeParams chq = {NULL, NULL};
    OK(hipGraphHostNodeGetParams(ch, &chq));
    TRUE(chq.fn == count_run && chq.userData == &inc);
    hipEvent_t cev = NULL;
    OK(hipGraphEventRecordNodeGetEvent(crec, &cev));
    TRUE(cev == ev2);
    EXPECT(hipGraphEventWaitNodeGetEvent(crec, &cev), hipErrorInvalidValue);
    EXPECT(hipGraphHostNodeGetParams(c1, &chq), hipErrorInvalidValue);
    hipGraphExec_t cx;
    OK(hipGraphInstantiate(&cx, cg, NULL, NULL, 0));
    host_runs = 0;
    OK(hipGraphLaunch(cx, s));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(host, buf2, N * 4, hipMemcpyDeviceToHost));
    TRUE(host[0] == 3 && host[N - 1] == 3 && host_runs == 1);
    OK(hipEventQuery(ev2));
    /* A node added after instantiation is not in that executable. */
    OK(hipGraphAddKernelNode(&c3, cg, &ce, 1, &k3));
    OK(hipGraphLaunch(cx, s));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(host, buf2, N * 4, hipMemcpyDeviceToHost));
    TRUE(host[0] == 6 && host_runs == 2);
    /* Calls that read the graph: the node handles given out before, the parameters as given. */
    OK(hipGraphGetEdges(cg, NULL, NULL, &cedges));
    TRUE(cedges == 8);
    cnd = 4;
    OK(hipGraphNodeGetDependencies(crec, cdeps, &cnd));
    TRUE(cnd == 2 && has(cdeps, 2, ce) && has(cdeps, 2, ch));
    TRUE(type_of(c1) == hipGraphNodeTypeKernel && type_of(ch) == hipGraphNodeTypeHost);
    TRUE(type_of(ce) == hipGraphNodeTypeEmpty && type_of(crec) == hipGraphNodeTypeEventRecord);
    hipKernelNodeParams ck;
    OK(hipGraphKernelNodeGetParams(c1, &ck));
    TRUE(ck.func == &add_symbol && ck.extra == NULL && ck.kernelParams != NULL);
    TRUE(ck.gridDim.x == N / 64 && ck.blockDim.x == 64 && ck.sharedMemBytes == 0);
    TRUE(*(unsigned *)ck.kernelParams[1] == 1 && *(unsigned **)ck.kernelParams[0] == buf2);
    chq.fn = NULL;
    OK(hipGraphHostNodeGetParams(ch, &chq));
    TRUE(chq.fn == count_run && chq.userData == &inc);
    cev = NULL;
    OK(hipGraphEventRecordNodeGetEvent(crec, &cev));
    TRUE(cev == ev2);
    /* The executable kept the graph as it was instantiated: c3 is no node of it. */
    hipGraphNode_t cerr = NULL;
    hipGraphExecUpdateResult cres = hipGraphExecUpdateSuccess;
    EXPECT(hipGraphExecUpdate(cx, cg, &cerr, &cres), hipErrorGraphExecUpdateFailure);
    TRUE(cres == hipGraphExecUpdateErrorTopologyChanged && cerr == NULL);
    /* The executable changed in place, then instantiated anew from the graph. */
    k2.kernelParams = a2;
    two = 5;
    OK(hipGraphExecKernelNodeSetParams(cx, c2, &k2));
    OK(hipGraphLaunch(cx, s));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(host, buf2, N * 4, hipMemcpyDeviceToHost));
    TRUE(host[0] == 12 && host_runs == 3);
    OK(hipGraphExecDestroy(cx));
    OK(hipGraphInstantiate(&cx, cg, NULL, NULL, 0));
    OK(hipGraphLaunch(cx, s));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(host, buf2, N * 4, hipMemcpyDeviceToHost));
    TRUE(host[0] == 115 && host_runs == 4); /* 12 + 1 + 2 + 100: the graph's k2 kept 2 */
    OK(hipGraphExecDestroy(cx));
    OK(hipGraphDestroy(cg));

    /* A graph core holds, then a node it does not (a copy): the graph moves to this layer's
       model, the node handles given out before staying valid; an executable core instantiated
       changed in place. */
    OK(hipMemset(buf2, 0, N * 4));
    OK(hipGraphCreate(&cg, 0));
    OK(hipGraphAddKernelNode(&c1, cg, NULL, 0, &k1));
    hipGraphExec_t cx2;
    OK(hipGraphInstantiate(&cx2, cg, NULL, NULL, 0));
    hipGraphNode_t ccopy;
    OK(hipGraphAddMemcpyNode1D(&ccopy, cg, &c1, 1, buf, buf2, N * 4, hipMemcpyDeviceToDevice));
    OK(hipGraphAddKernelNode(&c2, cg, &ccopy, 1, &k2));
    cnd = 4;
    OK(hipGraphNodeGetDependencies(c2, cdeps, &cnd));
    TRUE(cnd == 1 && cdeps[0] == ccopy);
    OK(hipGraphExecKernelNodeSetParams(cx2, c1, &k3));
    OK(hipGraphLaunch(cx2, s));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(host, buf2, N * 4, hipMemcpyDeviceToHost));
    TRUE(host[0] == 100 && host[N - 1] == 100);
    OK(hipGraphExecDestroy(cx2));
    OK(hipGraphInstantiate(&cx2, cg, NULL, NULL, 0));
    OK(hipGraphLaunch(cx2, s));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(host, buf, N * 4, hipMemcpyDeviceToHost));
    TRUE(host[0] == 150); /* the copy of 100 + k1's 50 */
    OK(hipMemcpy(host, buf2, N * 4, hipMemcpyDeviceToHost));
    TRUE(host[0] == 155); /* + k2's 5 */
    OK(hipGraphExecDestroy(cx2));
    OK(hipGraphDestroy(cg));
}

int main(void) {
    size_t sizes[] = {sizeof(void *), 4, 4};
    OK(aqdRegisterHostKernel(&add_symbol, add, 3, sizes));
    hipStream_t s;
    OK(hipStreamCreate(&s));
    unsigned *buf, *buf2, host[N];
    OK(hipMalloc((void **)&buf, N * 4));
    OK(hipMalloc((void **)&buf2, N * 4));
    hipEvent_t ev, ev2;
    OK(hipEventCreate(&ev));
    OK(hipEventCreate(&ev2));

    /* fill → add 10 → host → copy out; an empty node and an event record beside. */
    hipGraph_t g;
    OK(hipGraphCreate(&g, 0));
    hipGraphNode_t fill, kern, hostn, copy, empty, rec;
    hipMemsetParams mp = {buf, 4, 1, 0, 1, N};
    OK(hipGraphAddMemsetNode(&fill, g, NULL, 0, &mp));
    unsigned value = 10, n = N;
    void *kargs[] = {&buf, &value, &n};
    hipKernelNodeParams kp = {{64, 1, 1}, NULL, &add_symbol, {N / 64, 1, 1}, kargs, 0};
    OK(hipGraphAddKernelNode(&kern, g, &fill, 1, &kp));
    value = 99; /* the arguments were copied */
    int one = 1;
    hipHostNodeParams hp = {count_run, &one};
    OK(hipGraphAddHostNode(&hostn, g, &kern, 1, &hp));
    OK(hipGraphAddMemcpyNode1D(&copy, g, &hostn, 1, buf2, buf, N * 4, hipMemcpyDeviceToDevice));
    OK(hipGraphAddEmptyNode(&empty, g, NULL, 0));
    OK(hipGraphAddEventRecordNode(&rec, g, &copy, 1, ev));

    /* Types (HIP 5.2's numbering). */
    TRUE(type_of(fill) == hipGraphNodeTypeMemset && type_of(kern) == hipGraphNodeTypeKernel);
    TRUE(type_of(hostn) == hipGraphNodeTypeHost && type_of(copy) == hipGraphNodeTypeMemcpy);
    TRUE(type_of(empty) == hipGraphNodeTypeEmpty && type_of(rec) == hipGraphNodeTypeEventRecord);
    hipGraphNodeType t;
    EXPECT(hipGraphNodeGetType(NULL, &t), hipErrorInvalidValue);
    EXPECT(hipGraphNodeGetType(kern, NULL), hipErrorInvalidValue);

    /* Nodes, roots, edges, neighbours, with HIP's list conventions. */
    size_t count = 0;
    OK(hipGraphGetNodes(g, NULL, &count));
    TRUE(count == 6);
    hipGraphNode_t list[8];
    count = 8;
    OK(hipGraphGetNodes(g, list, &count));
    TRUE(count == 6 && list[6] == NULL && list[7] == NULL);
    TRUE(list[0] == fill && list[1] == kern); /* topological order */
    count = 8;
    OK(hipGraphGetRootNodes(g, list, &count));
    TRUE(count == 2 && has(list, 2, fill) && has(list, 2, empty));
    hipGraphNode_t from[8], to[8];
    count = 0;
    OK(hipGraphGetEdges(g, NULL, NULL, &count));
    TRUE(count == 4);
    count = 2;
    OK(hipGraphGetEdges(g, from, to, &count));
    TRUE(count == 2);
    count = 8;
    OK(hipGraphGetEdges(g, from, to, &count));
    TRUE(count == 4 && from[0] == fill && to[0] == kern && from[4] == NULL && to[4] == NULL);
    EXPECT(hipGraphGetEdges(g, from, NULL, &count), hipErrorInvalidValue);
    EXPECT(hipGraphGetEdges(g, NULL, NULL, NULL), hipErrorInvalidValue);
    count = 8;
    OK(hipGraphNodeGetDependencies(kern, list, &count));
    TRUE(count == 1 && list[0] == fill);
    count = 8;
    OK(hipGraphNodeGetDependentNodes(kern, list, &count));
    TRUE(count == 1 && list[0] == hostn);
    count = 0;
    OK(hipGraphNodeGetDependencies(empty, NULL, &count));
    TRUE(count == 0);

    /* Edges: existing, self, another graph's node, missing; NULL lists; zero pairs. */
    hipGraph_t other;
    hipGraphNode_t foreign;
    OK(hipGraphCreate(&other, 0));
    OK(hipGraphAddEmptyNode(&foreign, other, NULL, 0));
    EXPECT(hipGraphAddDependencies(g, &fill, &kern, 1), hipErrorInvalidValue);
    EXPECT(hipGraphAddDependencies(g, &kern, &kern, 1), hipErrorInvalidValue);
    EXPECT(hipGraphAddDependencies(g, &foreign, &kern, 1), hipErrorInvalidValue);
    EXPECT(hipGraphAddDependencies(g, NULL, &kern, 1), hipErrorInvalidValue);
    OK(hipGraphAddDependencies(g, NULL, NULL, 0));
    OK(hipGraphAddDependencies(g, &empty, &copy, 1));
    count = 8;
    OK(hipGraphNodeGetDependencies(copy, list, &count));
    TRUE(count == 2 && has(list, 2, empty) && has(list, 2, hostn));
    OK(hipGraphRemoveDependencies(g, &empty, &copy, 1));
    EXPECT(hipGraphRemoveDependencies(g, &empty, &copy, 1), hipErrorInvalidValue);
    EXPECT(hipGraphRemoveDependencies(g, &foreign, &copy, 1), hipErrorInvalidValue);
    /* A cycle is refused at instantiation. */
    hipGraphExec_t x;
    OK(hipGraphAddDependencies(g, &rec, &fill, 1));
    EXPECT(hipGraphInstantiate(&x, g, NULL, NULL, 0), hipErrorInvalidValue);
    OK(hipGraphRemoveDependencies(g, &rec, &fill, 1));

    /* Instantiate and launch three times. */
    OK(hipGraphInstantiate(&x, g, NULL, NULL, 0));
    for (int i = 0; i < 3; i++) OK(hipGraphLaunch(x, s));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(host, buf2, sizeof host, hipMemcpyDeviceToHost));
    TRUE(host[0] == 11 && host[N - 1] == 11);
    TRUE(host_runs == 3);
    OK(hipEventQuery(ev));

    /* Parameters: read back (the node's own copies), then changed in the graph. */
    hipKernelNodeParams got;
    OK(hipGraphKernelNodeGetParams(kern, &got));
    TRUE(got.func == &add_symbol && got.gridDim.x == N / 64 && got.blockDim.x == 64 && got.extra == NULL);
    TRUE(got.kernelParams != NULL && *(unsigned *)got.kernelParams[1] == 10 && *(unsigned **)got.kernelParams[0] == buf);
    TRUE(got.kernelParams != (void **)kargs);
    EXPECT(hipGraphKernelNodeGetParams(fill, &got), hipErrorInvalidValue);
    EXPECT(hipGraphKernelNodeGetParams(kern, NULL), hipErrorInvalidValue);
    hipMemsetParams gm;
    OK(hipGraphMemsetNodeGetParams(fill, &gm));
    TRUE(gm.dst == buf && gm.elementSize == 4 && gm.width == N && gm.height == 1 && gm.value == 1);
    hipHostNodeParams gh;
    OK(hipGraphHostNodeGetParams(hostn, &gh));
    TRUE(gh.fn == count_run && gh.userData == &one);
    hipMemcpy3DParms gc;
    OK(hipGraphMemcpyNodeGetParams(copy, &gc));
    TRUE(gc.srcPtr.ptr == buf && gc.dstPtr.ptr == buf2 && gc.extent.width == N * 4 && gc.extent.height == 1);
    TRUE(gc.kind == hipMemcpyDeviceToDevice && gc.srcArray == NULL);
    hipEvent_t got_event;
    OK(hipGraphEventRecordNodeGetEvent(rec, &got_event));
    TRUE(got_event == ev);
    EXPECT(hipGraphEventWaitNodeGetEvent(rec, &got_event), hipErrorInvalidValue);

    value = 20;
    kp.kernelParams = kargs;
    OK(hipGraphKernelNodeSetParams(kern, &kp));
    mp.value = 2;
    OK(hipGraphMemsetNodeSetParams(fill, &mp));
    OK(hipGraphEventRecordNodeSetEvent(rec, ev2));
    OK(hipGraphEventRecordNodeGetEvent(rec, &got_event));
    TRUE(got_event == ev2);
    /* The executable keeps what it was instantiated with. */
    OK(hipGraphLaunch(x, s));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(host, buf2, sizeof host, hipMemcpyDeviceToHost));
    TRUE(host[0] == 11);
    /* Until its own node is set. */
    value = 30;
    OK(hipGraphExecKernelNodeSetParams(x, kern, &kp));
    OK(hipGraphLaunch(x, s));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(host, buf2, sizeof host, hipMemcpyDeviceToHost));
    TRUE(host[0] == 31 && host[N - 1] == 31);
    EXPECT(hipGraphExecKernelNodeSetParams(x, fill, &kp), hipErrorInvalidValue);
    EXPECT(hipGraphExecKernelNodeSetParams(x, foreign, &kp), hipErrorInvalidValue);
    EXPECT(hipGraphExecKernelNodeSetParams(NULL, kern, &kp), hipErrorInvalidValue);
    mp.value = 5;
    OK(hipGraphExecMemsetNodeSetParams(x, fill, &mp));
    OK(hipGraphExecMemcpyNodeSetParams1D(x, copy, buf2, buf, 4, hipMemcpyDeviceToDevice));
    OK(hipMemset(buf2, 0, N * 4));
    OK(hipGraphLaunch(x, s));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(host, buf2, sizeof host, hipMemcpyDeviceToHost));
    TRUE(host[0] == 35 && host[1] == 0);
    hipHostNodeParams hp2 = {other_fn, NULL};
    OK(hipGraphExecHostNodeSetParams(x, hostn, &hp2));
    OK(hipGraphExecEventRecordNodeSetEvent(x, rec, ev));
    int runs = host_runs;
    OK(hipGraphLaunch(x, s));
    OK(hipStreamSynchronize(s));
    TRUE(host_runs == runs);

    /* Whole-graph update: a clone with other parameters, then graphs of another shape. */
    hipGraph_t clone;
    OK(hipGraphClone(&clone, g));
    hipGraphNode_t ckern;
    OK(hipGraphNodeFindInClone(&ckern, kern, clone));
    TRUE(ckern != kern && type_of(ckern) == hipGraphNodeTypeKernel);
    EXPECT(hipGraphNodeFindInClone(&ckern, foreign, clone), hipErrorInvalidValue);
    EXPECT(hipGraphNodeFindInClone(&ckern, kern, other), hipErrorInvalidValue);
    value = 40;
    OK(hipGraphKernelNodeSetParams(ckern, &kp));
    hipGraphNode_t err = (hipGraphNode_t)1;
    hipGraphExecUpdateResult res = (hipGraphExecUpdateResult)-1;
    OK(hipGraphExecUpdate(x, clone, &err, &res));
    TRUE(res == hipGraphExecUpdateSuccess && err == NULL);
    OK(hipGraphLaunch(x, s));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(host, buf2, sizeof host, hipMemcpyDeviceToHost));
    TRUE(host[0] == 42 && host[N - 1] == 42); /* the clone's fill (2) and add (40), full copy */
    hipGraphNode_t extra;
    OK(hipGraphAddEmptyNode(&extra, clone, NULL, 0));
    EXPECT(hipGraphExecUpdate(x, clone, &err, &res), hipErrorGraphExecUpdateFailure);
    TRUE(res == hipGraphExecUpdateErrorTopologyChanged && err == NULL);
    OK(hipGraphDestroyNode(extra));
    EXPECT(hipGraphNodeGetType(extra, &t), hipErrorInvalidValue);
    hipGraphNode_t cempty, crec;
    OK(hipGraphNodeFindInClone(&cempty, empty, clone));
    OK(hipGraphNodeFindInClone(&crec, rec, clone));
    OK(hipGraphDestroyNode(cempty));
    OK(hipGraphAddEventWaitNode(&cempty, clone, NULL, 0, ev));
    EXPECT(hipGraphExecUpdate(x, clone, &err, &res), hipErrorGraphExecUpdateFailure);
    /* Nodes pair up in topological order: the empty node meets the event record first. */
    TRUE(res == hipGraphExecUpdateErrorNodeTypeChanged && err == crec);
    EXPECT(hipGraphExecUpdate(x, clone, NULL, &res), hipErrorInvalidValue);
    OK(hipGraphExecDestroy(x));

    /* Child graphs: copied when added; edits through the node's own graph count. */
    hipGraph_t child, inner;
    hipGraphNode_t cfill, cnode, more;
    OK(hipGraphCreate(&child, 0));
    hipMemsetParams cm = {buf, 4, 1, 0, 7, N};
    OK(hipGraphAddMemsetNode(&cfill, child, NULL, 0, &cm));
    hipGraph_t parent;
    OK(hipGraphCreate(&parent, 0));
    OK(hipGraphAddChildGraphNode(&cnode, parent, NULL, 0, child));
    TRUE(type_of(cnode) == hipGraphNodeTypeGraph);
    OK(hipGraphChildGraphNodeGetGraph(cnode, &inner));
    TRUE(inner != child);
    value = 100;
    kp.kernelParams = kargs;
    OK(hipGraphAddKernelNode(&more, inner, NULL, 0, &kp));
    count = 0;
    OK(hipGraphGetNodes(inner, NULL, &count));
    TRUE(count == 2);
    hipGraphNode_t inner_nodes[2];
    count = 2;
    OK(hipGraphGetNodes(inner, inner_nodes, &count));
    OK(hipGraphAddDependencies(inner, &inner_nodes[0], &more, 1));
    count = 0;
    OK(hipGraphGetNodes(child, NULL, &count));
    TRUE(count == 1); /* the original child is untouched */
    hipGraphNode_t after;
    OK(hipGraphAddMemcpyNode1D(&after, parent, &cnode, 1, buf2, buf, N * 4, hipMemcpyDeviceToDevice));
    OK(hipGraphInstantiate(&x, parent, NULL, NULL, 0));
    OK(hipGraphLaunch(x, s));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(host, buf2, sizeof host, hipMemcpyDeviceToHost));
    TRUE(host[0] == 107 && host[N - 1] == 107);
    /* The executable's child, swapped for a graph of the same shape. */
    hipGraph_t child2;
    OK(hipGraphClone(&child2, inner));
    hipGraphNode_t c2fill;
    OK(hipGraphNodeFindInClone(&c2fill, inner_nodes[0], child2));
    cm.value = 8;
    OK(hipGraphMemsetNodeSetParams(c2fill, &cm));
    OK(hipGraphExecChildGraphNodeSetParams(x, cnode, child2));
    EXPECT(hipGraphExecChildGraphNodeSetParams(x, cnode, child), hipErrorInvalidValue);
    OK(hipGraphLaunch(x, s));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(host, buf2, sizeof host, hipMemcpyDeviceToHost));
    TRUE(host[0] == 108);
    OK(hipGraphExecDestroy(x));
    EXPECT(hipGraphDestroy(inner), hipErrorInvalidValue); /* owned by its node */

    /* Pageable memory: every launch copies the host data as it is then. */
    hipGraph_t pg;
    hipGraphNode_t in, k2, out;
    OK(hipGraphCreate(&pg, 0));
    OK(hipGraphAddMemcpyNode1D(&in, pg, NULL, 0, buf, pageable_in, sizeof pageable_in, hipMemcpyHostToDevice));
    value = 1;
    OK(hipGraphAddKernelNode(&k2, pg, &in, 1, &kp));
    OK(hipGraphAddMemcpyNode1D(&out, pg, &k2, 1, pageable_out, buf, sizeof pageable_out, hipMemcpyDeviceToHost));
    OK(hipGraphInstantiate(&x, pg, NULL, NULL, 0));
    for (unsigned round = 0; round < 4; round++) {
        for (unsigned i = 0; i < N; i++) pageable_in[i] = round * 1000 + i;
        OK(hipGraphLaunch(x, s));
        OK(hipStreamSynchronize(s));
        TRUE(pageable_out[0] == round * 1000 + 1 && pageable_out[N - 1] == round * 1000 + N);
    }
    /* Captured pageable copies too. */
    hipGraph_t cap;
    hipGraphExec_t cx;
    OK(hipStreamBeginCapture(s, hipStreamCaptureModeGlobal));
    OK(hipMemcpyAsync(buf2, pageable_in, sizeof pageable_in, hipMemcpyHostToDevice, s));
    OK(hipMemcpyAsync(pageable_out, buf2, sizeof pageable_out, hipMemcpyDeviceToHost, s));
    OK(hipStreamEndCapture(s, &cap));
    OK(hipGraphInstantiate(&cx, cap, NULL, NULL, 0));
    for (unsigned round = 0; round < 3; round++) {
        for (unsigned i = 0; i < N; i++) pageable_in[i] = 7 * round + i;
        OK(hipGraphLaunch(cx, s));
        OK(hipStreamSynchronize(s));
        TRUE(pageable_out[0] == 7 * round && pageable_out[N - 1] == 7 * round + N - 1);
    }
    OK(hipGraphExecDestroy(cx));
    OK(hipGraphDestroy(cap));
    OK(hipGraphExecDestroy(x));

    /* Nodes added to a capture's graph, then handles that outlive the capture. */
    hipStreamCaptureStatus st;
    hipGraph_t capg;
    const hipGraphNode_t *deps;
    size_t ndeps;
    hipGraphNode_t manual;
    int two = 2;
    OK(hipStreamBeginCapture(s, hipStreamCaptureModeGlobal));
    OK(hipMemsetD32Async(buf, 3, N, s));
    OK(hipStreamGetCaptureInfo_v2(s, &st, NULL, &capg, &deps, &ndeps));
    TRUE(ndeps == 1);
    hipHostNodeParams hp3 = {count_run, &two};
    OK(hipGraphAddHostNode(&manual, capg, deps, ndeps, &hp3));
    OK(hipStreamUpdateCaptureDependencies(s, &manual, 1, hipStreamSetCaptureDependencies));
    OK(hipStreamEndCapture(s, &cap));
    TRUE(cap == capg);
    TRUE(type_of(manual) == hipGraphNodeTypeHost);
    count = 4;
    OK(hipGraphGetNodes(cap, list, &count));
    TRUE(count == 2 && type_of(list[0]) == hipGraphNodeTypeMemset);
    OK(hipGraphMemsetNodeGetParams(list[0], &gm));
    TRUE(gm.dst == buf && gm.value == 3 && gm.width == N && gm.elementSize == 4);
    runs = host_runs;
    OK(hipGraphInstantiate(&cx, cap, NULL, NULL, 0));
    OK(hipGraphLaunch(cx, s));
    OK(hipStreamSynchronize(s));
    TRUE(host_runs == runs + 2);
    OK(hipGraphExecDestroy(cx));
    OK(hipGraphDestroy(cap));

    /* Errors of the add calls. */
    hipGraphNode_t bad;
    EXPECT(hipGraphAddEmptyNode(NULL, g, NULL, 0), hipErrorInvalidValue);
    EXPECT(hipGraphAddEmptyNode(&bad, NULL, NULL, 0), hipErrorInvalidValue);
    EXPECT(hipGraphAddEmptyNode(&bad, g, NULL, 1), hipErrorInvalidValue);
    EXPECT(hipGraphAddEmptyNode(&bad, g, &foreign, 1), hipErrorInvalidValue);
    hipGraphNode_t twice[2] = {fill, fill};
    EXPECT(hipGraphAddEmptyNode(&bad, g, twice, 2), hipErrorInvalidValue);
    EXPECT(hipGraphAddKernelNode(&bad, g, NULL, 0, NULL), hipErrorInvalidValue);
    kp.func = NULL;
    EXPECT(hipGraphAddKernelNode(&bad, g, NULL, 0, &kp), hipErrorInvalidValue);
    kp.func = &not_a_kernel;
    EXPECT(hipGraphAddKernelNode(&bad, g, NULL, 0, &kp), hipErrorInvalidDeviceFunction);
    kp.func = &add_symbol;
    kp.blockDim.x = 0;
    EXPECT(hipGraphAddKernelNode(&bad, g, NULL, 0, &kp), hipErrorInvalidConfiguration);
    kp.blockDim.x = 64;
    mp.elementSize = 3;
    EXPECT(hipGraphAddMemsetNode(&bad, g, NULL, 0, &mp), hipErrorInvalidValue);
    mp.elementSize = 4;
    mp.height = 0;
    EXPECT(hipGraphAddMemsetNode(&bad, g, NULL, 0, &mp), hipErrorInvalidValue);
    mp.height = 1;
    mp.width = N + 1; /* past the allocation */
    EXPECT(hipGraphAddMemsetNode(&bad, g, NULL, 0, &mp), hipErrorInvalidValue);
    EXPECT(hipGraphAddMemcpyNode1D(&bad, g, NULL, 0, buf2, buf, 0, hipMemcpyDeviceToDevice), hipErrorInvalidValue);
    EXPECT(hipGraphAddMemcpyNode1D(&bad, g, NULL, 0, buf2, buf, 4, (hipMemcpyKind)7),
           hipErrorInvalidMemcpyDirection);
    EXPECT(hipGraphAddMemcpyNode1D(&bad, g, NULL, 0, buf2, buf, N * 4 + 4, hipMemcpyDeviceToDevice),
           hipErrorInvalidValue);
    EXPECT(hipGraphAddMemcpyNode1D(&bad, g, NULL, 0, buf2, pageable_in, 4, hipMemcpyDeviceToHost),
           hipErrorInvalidValue);
    hipHostNodeParams nofn = {NULL, NULL};
    EXPECT(hipGraphAddHostNode(&bad, g, NULL, 0, &nofn), hipErrorInvalidValue);
    EXPECT(hipGraphAddEventRecordNode(&bad, g, NULL, 0, NULL), hipErrorInvalidValue);
    EXPECT(hipGraphAddChildGraphNode(&bad, g, NULL, 0, NULL), hipErrorInvalidValue);
    hipMemcpy3DParms p3 = {0};
    p3.srcPtr = make_hipPitchedPtr(buf, 16, 16, 4);
    p3.dstPtr = make_hipPitchedPtr(buf2, 8, 16, 4);
    p3.extent = make_hipExtent(16, 4, 1);
    p3.kind = hipMemcpyDeviceToDevice;
    EXPECT(hipGraphAddMemcpyNode(&bad, g, NULL, 0, &p3), hipErrorInvalidPitchValue);
    p3.dstPtr = make_hipPitchedPtr(buf2, 32, 16, 4);
    OK(hipGraphAddMemcpyNode(&bad, g, NULL, 0, &p3));
    OK(hipGraphMemcpyNodeGetParams(bad, &gc));
    TRUE(gc.dstPtr.pitch == 32 && gc.extent.height == 4 && gc.extent.width == 16);

    core_held(s, buf, buf2, ev2, kern);

    OK(hipGraphDestroy(g));
    OK(hipGraphDestroy(clone));
    OK(hipGraphDestroy(other));
    OK(hipGraphDestroy(child));
    OK(hipGraphDestroy(child2));
    OK(hipGraphDestroy(parent));
    OK(hipGraphDestroy(pg));
    EXPECT(hipGraphDestroy(g), hipErrorInvalidValue);
    OK(hipEventDestroy(ev));
    OK(hipEventDestroy(ev2));
    OK(hipFree(buf));
    OK(hipFree(buf2));
    OK(hipStreamDestroy(s));
    DONE("graph_nodes");
}
