/* hipStreamBeginCaptureToGraph (CUDA's cudaStreamBeginCaptureToGraph): a capture whose work
   lands in an existing graph, after nodes of it; checked by what the graph holds and by what it
   computes when launched (a host kernel x = x * m + a, whose order matters). */
#include "check.h"

static char mul_add_symbol;

/* One work-group: p[0] = p[0] * m + a. */
static void mul_add(void **args, dim3 blockIdx, dim3 gridDim, dim3 blockDim) {
    unsigned *p = *(unsigned **)args[0];
    unsigned m = *(unsigned *)args[1], a = *(unsigned *)args[2];
    p[0] = p[0] * m + a;
}

static hipError_t launch(unsigned *p, unsigned m, unsigned a, hipStream_t s) {
    void *args[] = {&p, &m, &a};
    return hipLaunchKernel(&mul_add_symbol, (dim3){1, 1, 1}, (dim3){1, 1, 1}, args, 0, s);
}

static size_t node_count(hipGraph_t g) {
    size_t n = 0;
    OK(hipGraphGetNodes(g, NULL, &n));
    return n;
}

static size_t edge_count(hipGraph_t g) {
    size_t n = 0;
    OK(hipGraphGetEdges(g, NULL, NULL, &n));
    return n;
}

/* Launches graph g once on s and answers *p afterwards. */
static unsigned run(hipGraph_t g, unsigned *p, hipStream_t s) {
    hipGraphExec_t x;
    unsigned v = 0;
    OK(hipGraphInstantiate(&x, g, NULL, NULL, 0));
    OK(hipGraphLaunch(x, s));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(&v, p, sizeof v, hipMemcpyDeviceToHost));
    OK(hipGraphExecDestroy(x));
    return v;
}

int main(void) {
    size_t sizes[] = {sizeof(void *), sizeof(unsigned), sizeof(unsigned)};
    OK(aqdRegisterHostKernel(&mul_add_symbol, mul_add, 3, sizes));
    unsigned *p = NULL;
    OK(hipMalloc((void **)&p, 64));
    hipStream_t s, other;
    OK(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
    OK(hipStreamCreateWithFlags(&other, hipStreamNonBlocking));

    /* The graph: a fill p[0] = 2, and an unrelated empty node. */
    hipGraph_t graph;
    OK(hipGraphCreate(&graph, 0));
    hipGraphNode_t fill, lone;
    hipMemsetParams m;
    memset(&m, 0, sizeof m);
    m.dst = p;
    m.elementSize = 4;
    m.width = 1;
    m.height = 1;
    m.value = 2;
    OK(hipGraphAddMemsetNode(&fill, graph, NULL, 0, &m));
    OK(hipGraphAddEmptyNode(&lone, graph, NULL, 0));

    /* Capture two launches after the fill. */
    OK(hipStreamBeginCaptureToGraph(s, graph, &fill, NULL, 1, hipStreamCaptureModeGlobal));
    hipStreamCaptureStatus st;
    hipGraph_t seen = NULL;
    const hipGraphNode_t *deps = NULL;
    size_t ndeps = 0;
    OK(hipStreamGetCaptureInfo_v2(s, &st, NULL, &seen, &deps, &ndeps));
    TRUE(st == hipStreamCaptureStatusActive && seen == graph);
    TRUE(ndeps == 1 && deps[0] == fill);
    /* The graph cannot go, nor take a second capture, while this one records into it. */
    EXPECT(hipGraphDestroy(graph), hipErrorInvalidValue);
    EXPECT(hipStreamBeginCaptureToGraph(other, graph, NULL, NULL, 0, hipStreamCaptureModeGlobal),
           hipErrorIllegalState);
    /* Stream-ordered allocation would belong to the wrong graph. */
    void *a = NULL;
    EXPECT(hipMallocAsync(&a, 64, s), hipErrorNotSupported);

    OK(launch(p, 3, 1, s));
    OK(hipStreamGetCaptureInfo_v2(s, &st, NULL, NULL, &deps, &ndeps));
    TRUE(ndeps == 1);
    hipGraphNode_t first = ndeps == 1 ? deps[0] : NULL;
    TRUE(first != fill);
    OK(launch(p, 5, 2, s));
    hipGraph_t ended = NULL;
    OK(hipStreamEndCapture(s, &ended));
    TRUE(ended == graph);

    /* fill -> first -> second, plus the lone node; the handle given during the capture names the
       first launch's node of the graph. */
    TRUE(node_count(graph) == 4);
    TRUE(edge_count(graph) == 2);
    hipGraphNodeType type;
    OK(hipGraphNodeGetType(first, &type));
    TRUE(type == hipGraphNodeTypeKernel);
    hipGraphNode_t before[2] = {NULL, NULL};
    size_t nb = 2;
    OK(hipGraphNodeGetDependencies(first, before, &nb));
    TRUE(nb == 1 && before[0] == fill);
    hipGraphNode_t after[2] = {NULL, NULL};
    size_t na = 2;
    OK(hipGraphNodeGetDependentNodes(first, after, &na));
    TRUE(na == 1);
    size_t nl = 0;
    OK(hipGraphNodeGetDependentNodes(lone, NULL, &nl));
    TRUE(nl == 0);
    /* (2 * 3 + 1) * 5 + 2 */
    TRUE(run(graph, p, s) == 37);

    /* A second capture into the same graph, after the last launch and the lone node. */
    hipGraphNode_t two[2] = {after[0], lone};
    OK(hipStreamBeginCaptureToGraph(s, graph, two, NULL, 2, hipStreamCaptureModeThreadLocal));
    OK(launch(p, 1, 100, s));
    OK(hipStreamEndCapture(s, &ended));
    TRUE(ended == graph);
    TRUE(node_count(graph) == 5);
    TRUE(edge_count(graph) == 4);
    TRUE(run(graph, p, s) == 137);

    /* Into an empty graph with no dependencies: the captured work is its roots. */
    hipGraph_t empty;
    OK(hipGraphCreate(&empty, 0));
    OK(hipMemset(p, 0, 4));
    OK(hipStreamBeginCaptureToGraph(s, empty, NULL, NULL, 0, hipStreamCaptureModeGlobal));
    OK(launch(p, 1, 4, s));
    OK(launch(p, 10, 0, s));
    OK(hipStreamEndCapture(s, &ended));
    TRUE(ended == empty && node_count(empty) == 2 && edge_count(empty) == 1);
    TRUE(run(empty, p, s) == 40);

    /* Default edge data is taken; any other edge is not supported. */
    hipGraph_t g2;
    OK(hipGraphCreate(&g2, 0));
    hipGraphNode_t root;
    OK(hipGraphAddEmptyNode(&root, g2, NULL, 0));
    hipGraphEdgeData edge;
    memset(&edge, 0, sizeof edge);
    edge.type = 1;
    EXPECT(hipStreamBeginCaptureToGraph(s, g2, &root, &edge, 1, hipStreamCaptureModeGlobal), hipErrorNotSupported);
    /* Dependencies must be nodes of the graph, once each. */
    EXPECT(hipStreamBeginCaptureToGraph(s, g2, &fill, NULL, 1, hipStreamCaptureModeGlobal), hipErrorInvalidValue);
    hipGraphNode_t twice[2] = {root, root};
    EXPECT(hipStreamBeginCaptureToGraph(s, g2, twice, NULL, 2, hipStreamCaptureModeGlobal), hipErrorInvalidValue);
    EXPECT(hipStreamBeginCaptureToGraph(s, g2, NULL, NULL, 1, hipStreamCaptureModeGlobal), hipErrorInvalidValue);
    EXPECT(hipStreamBeginCaptureToGraph(s, NULL, NULL, NULL, 0, hipStreamCaptureModeGlobal), hipErrorInvalidValue);
    hipStreamCaptureStatus none;
    OK(hipStreamIsCapturing(s, &none));
    TRUE(none == hipStreamCaptureStatusNone);

    /* An invalidated capture leaves the graph as it was, and free to go. */
    memset(&edge, 0, sizeof edge);
    OK(hipStreamBeginCaptureToGraph(s, g2, &root, &edge, 1, hipStreamCaptureModeGlobal));
    OK(launch(p, 2, 2, s));
    EXPECT(hipStreamSynchronize(s), hipErrorStreamCaptureUnsupported);
    EXPECT(hipStreamEndCapture(s, &ended), hipErrorStreamCaptureInvalidated);
    TRUE(ended == NULL);
    TRUE(node_count(g2) == 1 && edge_count(g2) == 0);
    OK(hipGraphDestroy(g2));

    /* A capture torn down with its stream frees the graph too. */
    hipGraph_t g3;
    hipStream_t doomed;
    OK(hipGraphCreate(&g3, 0));
    OK(hipStreamCreateWithFlags(&doomed, hipStreamNonBlocking));
    OK(hipStreamBeginCaptureToGraph(doomed, g3, NULL, NULL, 0, hipStreamCaptureModeRelaxed));
    OK(launch(p, 1, 1, doomed));
    OK(hipStreamDestroy(doomed));
    TRUE(node_count(g3) == 0);
    OK(hipGraphDestroy(g3));

    /* A capture torn down with its execution context holds the graph until its stream goes. */
    hipGraph_t g4;
    aqdExecCtx_t ctx;
    hipStream_t cs;
    OK(hipGraphCreate(&g4, 0));
    OK(aqdExecCtxCreate(&ctx, 0));
    OK(aqdExecCtxStreamCreate(ctx, &cs, hipStreamNonBlocking, 0));
    OK(hipStreamBeginCaptureToGraph(cs, g4, NULL, NULL, 0, hipStreamCaptureModeRelaxed));
    OK(launch(p, 1, 1, cs));
    OK(aqdExecCtxDestroy(ctx));
    EXPECT(hipGraphDestroy(g4), hipErrorInvalidValue);
    OK(hipStreamDestroy(cs));
    TRUE(node_count(g4) == 0);
    OK(hipStreamBeginCaptureToGraph(other, g4, NULL, NULL, 0, hipStreamCaptureModeRelaxed));
    OK(hipStreamEndCapture(other, &ended));
    TRUE(ended == g4);
    OK(hipGraphDestroy(g4));

    OK(hipGraphDestroy(graph));
    OK(hipGraphDestroy(empty));
    OK(hipStreamDestroy(s));
    OK(hipStreamDestroy(other));
    OK(hipFree(p));
    DONE("capture_to_graph");
}
