/* Conditional graph nodes through the C ABI on the emulated GPU: IF (true and false), IF/ELSE,
   SWITCH (each case and out of range), WHILE with 0, 1 and 1000 iterations, nesting, a loop whose
   body kernel decides when it has converged, assign-default against a value that persists,
   relaunches, executables outliving their graphs, updates, hipGraphAddNode for the other node
   kinds, the layout of the new structs, and the errors. Kernels are host kernels: they set a
   condition through aqdGraphSetConditional, as GPU code stores the handle's word. */
#include "check.h"

#include <math.h>
#include <stddef.h>

/* The layouts of aqueduct_hip.h (CUDA's and newer HIP's). */
_Static_assert(sizeof(hipGraphConditionalHandle) == 8, "handle");
_Static_assert(sizeof(hipConditionalNodeParams) == 24, "hipConditionalNodeParams");
_Static_assert(offsetof(hipConditionalNodeParams, type) == 8, "type");
_Static_assert(offsetof(hipConditionalNodeParams, size) == 12, "size");
_Static_assert(offsetof(hipConditionalNodeParams, phGraph_out) == 16, "phGraph_out");
_Static_assert(sizeof(hipMemcpyNodeParams) == 176, "hipMemcpyNodeParams");
_Static_assert(sizeof(hipMemAllocNodeParams) <= 232, "hipMemAllocNodeParams");
_Static_assert(sizeof(hipGraphNodeParams) == 256, "hipGraphNodeParams");
_Static_assert(offsetof(hipGraphNodeParams, kernel) == 16, "union");
_Static_assert(offsetof(hipGraphNodeParams, conditional) == 16, "conditional");
_Static_assert(offsetof(hipGraphNodeParams, reserved2) == 248, "reserved2");
_Static_assert(hipGraphNodeTypeConditional == 13, "CUDA's value");
_Static_assert(hipGraphCondTypeIf == 0 && hipGraphCondTypeWhile == 1 && hipGraphCondTypeSwitch == 2, "types");

/* ----- host kernels (one work-item each) ----- */

/* add(p, v): *p += v. */
static void k_add(void **args, dim3 b, dim3 g, dim3 d) { **(unsigned **)args[0] += *(unsigned *)args[1]; }
/* set(h, src): the value of h becomes *src. */
static void k_set(void **args, dim3 b, dim3 g, dim3 d) {
    aqdGraphSetConditional(*(hipGraphConditionalHandle *)args[0], **(unsigned **)args[1]);
}
/* step(counter, h, limit): ++*counter; the value of h becomes *counter < *limit. */
static void k_step(void **args, dim3 b, dim3 g, dim3 d) {
    unsigned *counter = *(unsigned **)args[0], *limit = *(unsigned **)args[2];
    *counter += 1;
    aqdGraphSetConditional(*(hipGraphConditionalHandle *)args[1], *counter < *limit);
}
/* odd(h, n): the value of h becomes *n & 1. */
static void k_odd(void **args, dim3 b, dim3 g, dim3 d) {
    aqdGraphSetConditional(*(hipGraphConditionalHandle *)args[0], **(unsigned **)args[1] & 1);
}
/* newton(s, h): one Newton step towards sqrt(s->a); the loop goes on while it has not converged. */
struct newton { double a, x; unsigned iterations; };
static int newton_step(struct newton *s) {
    s->x = 0.5 * (s->x + s->a / s->x);
    s->iterations++;
    return fabs(s->x * s->x - s->a) > 1e-12 * s->a;
}
static void k_newton(void **args, dim3 b, dim3 g, dim3 d) {
    struct newton *s = *(struct newton **)args[0];
    aqdGraphSetConditional(*(hipGraphConditionalHandle *)args[1], newton_step(s));
}
static char add_sym, set_sym, step_sym, odd_sym, newton_sym;

static void register_kernels(void) {
    size_t two[] = {sizeof(void *), 4};
    size_t handle_ptr[] = {8, sizeof(void *)};
    size_t step[] = {sizeof(void *), 8, sizeof(void *)};
    size_t newton[] = {sizeof(void *), 8};
    OK(aqdRegisterHostKernel(&add_sym, k_add, 2, two));
    OK(aqdRegisterHostKernel(&set_sym, k_set, 2, handle_ptr));
    OK(aqdRegisterHostKernel(&step_sym, k_step, 3, step));
    OK(aqdRegisterHostKernel(&odd_sym, k_odd, 2, handle_ptr));
    OK(aqdRegisterHostKernel(&newton_sym, k_newton, 2, newton));
}

/* ----- device words and helpers ----- */

static unsigned *w; /* 64 device words */
static hipStream_t s;

static void put_word(int i, unsigned v) { OK(hipMemcpy(w + i, &v, 4, hipMemcpyHostToDevice)); }
static unsigned word(int i) {
    unsigned v = 0xdeadbeef;
    OK(hipMemcpy(&v, w + i, 4, hipMemcpyDeviceToHost));
    return v;
}
static void clear_words(void) { OK(hipMemset(w, 0, 64 * 4)); }

static hipGraphNode_t kernel(hipGraph_t g, const hipGraphNode_t *deps, size_t n, const void *fn, void **args) {
    hipGraphNode_t node = NULL;
    hipKernelNodeParams kp = {{1, 1, 1}, NULL, (void *)fn, {1, 1, 1}, args, 0};
    OK(hipGraphAddKernelNode(&node, g, deps, n, &kp));
    return node;
}
/* add(w + i, v). */
static hipGraphNode_t add(hipGraph_t g, const hipGraphNode_t *deps, size_t n, int i, unsigned v) {
    unsigned *p = w + i;
    void *args[] = {&p, &v};
    return kernel(g, deps, n, &add_sym, args);
}
/* set(h, w + i). */
static hipGraphNode_t set(hipGraph_t g, const hipGraphNode_t *deps, size_t n, hipGraphConditionalHandle h, int i) {
    unsigned *p = w + i;
    void *args[] = {&h, &p};
    return kernel(g, deps, n, &set_sym, args);
}
/* step(w + counter, h, w + limit). */
static hipGraphNode_t step(hipGraph_t g, int counter, hipGraphConditionalHandle h, int limit) {
    unsigned *c = w + counter, *l = w + limit;
    void *args[] = {&c, &h, &l};
    return kernel(g, NULL, 0, &step_sym, args);
}

static void cond_params(hipGraphNodeParams *p, hipGraphConditionalHandle h, hipGraphConditionalNodeType type,
                        unsigned size) {
    memset(p, 0, sizeof *p);
    p->type = hipGraphNodeTypeConditional;
    p->conditional.handle = h;
    p->conditional.type = type;
    p->conditional.size = size;
}

/* A conditional node; its bodies into bodies[]. */
static hipGraphNode_t cond(hipGraph_t g, const hipGraphNode_t *deps, size_t n, hipGraphConditionalHandle h,
                           hipGraphConditionalNodeType type, unsigned size, hipGraph_t *bodies) {
    hipGraphNodeParams p;
    cond_params(&p, h, type, size);
    hipGraphNode_t node = NULL;
    OK(hipGraphAddNode(&node, g, deps, n, &p));
    TRUE(p.conditional.phGraph_out != NULL);
    for (unsigned i = 0; i < size && p.conditional.phGraph_out; i++) bodies[i] = p.conditional.phGraph_out[i];
    return node;
}

static hipGraphConditionalHandle handle(hipGraph_t g, unsigned def, unsigned flags) {
    hipGraphConditionalHandle h = 0;
    OK(hipGraphConditionalHandleCreate(&h, g, def, flags));
    TRUE(h != 0);
    return h;
}

static hipGraphExec_t instantiate(hipGraph_t g) {
    hipGraphExec_t x = NULL;
    OK(hipGraphInstantiate(&x, g, NULL, NULL, 0));
    return x;
}
static void run(hipGraphExec_t x) {
    OK(hipGraphLaunch(x, s));
    OK(hipStreamSynchronize(s));
}

/* ----- scenarios ----- */

/* IF, IF/ELSE and SWITCH on a value a kernel reads from w[0]; one executable each, relaunched. */
static void branches(void) {
    /* IF: set(h, w[0]) -> IF { w[1] += 1 }. */
    hipGraph_t g, body[8];
    OK(hipGraphCreate(&g, 0));
    hipGraphConditionalHandle h = handle(g, 0, 0);
    hipGraphNode_t sn = set(g, NULL, 0, h, 0);
    hipGraphNode_t c = cond(g, &sn, 1, h, hipGraphCondTypeIf, 1, body);
    add(body[0], NULL, 0, 1, 1);
    hipGraphNodeType t = (hipGraphNodeType)-1;
    OK(hipGraphNodeGetType(c, &t));
    TRUE(t == hipGraphNodeTypeConditional);
    size_t n = 0;
    OK(hipGraphGetNodes(body[0], NULL, &n));
    TRUE(n == 1);
    hipGraphExec_t x = instantiate(g);
    clear_words();
    put_word(0, 1);
    run(x);
    TRUE(word(1) == 1);
    put_word(0, 0);
    run(x);
    TRUE(word(1) == 1);
    put_word(0, 7);
    run(x);
    TRUE(word(1) == 2);
    OK(hipGraphExecDestroy(x));
    OK(hipGraphDestroy(g));

    /* IF/ELSE: w[1] += 1 when w[0] != 0, else w[2] += 1. */
    OK(hipGraphCreate(&g, 0));
    h = handle(g, 0, 0);
    sn = set(g, NULL, 0, h, 0);
    cond(g, &sn, 1, h, hipGraphCondTypeIf, 2, body);
    TRUE(body[0] != body[1]);
    add(body[0], NULL, 0, 1, 1);
    add(body[1], NULL, 0, 2, 1);
    x = instantiate(g);
    clear_words();
    put_word(0, 1);
    run(x);
    TRUE(word(1) == 1 && word(2) == 0);
    put_word(0, 0);
    run(x);
    TRUE(word(1) == 1 && word(2) == 1);
    OK(hipGraphExecDestroy(x));
    OK(hipGraphDestroy(g));

    /* SWITCH of 3: case i adds 1 << i to w[1]; then w[3] += 1 after the node, whatever ran. */
    OK(hipGraphCreate(&g, 0));
    h = handle(g, 0, 0);
    sn = set(g, NULL, 0, h, 0);
    c = cond(g, &sn, 1, h, hipGraphCondTypeSwitch, 3, body);
    for (int i = 0; i < 3; i++) add(body[i], NULL, 0, 1, 1u << i);
    add(g, &c, 1, 3, 1);
    x = instantiate(g);
    clear_words();
    unsigned want = 0;
    for (unsigned v = 0; v < 5; v++) { /* 3 and 4 are out of range */
        put_word(0, v == 4 ? 1000 : v);
        run(x);
        if (v < 3) want += 1u << v;
        TRUE(word(1) == want);
        TRUE(word(3) == v + 1);
    }
    OK(hipGraphExecDestroy(x));
    OK(hipGraphDestroy(g));
}

/* WHILE: w[1] = 0 (a fill), set(h, w[0]) and WHILE { step(w[1], h, w[2]) }: 0, 1 and 1000 rounds
   with the same executable, then the fill runs after the loop ended. */
static void loops(void) {
    hipGraph_t g, body[1];
    OK(hipGraphCreate(&g, 0));
    hipGraphConditionalHandle h = handle(g, 0, 0);
    hipGraphNode_t fill, sn, c;
    hipMemsetParams mp = {w + 1, 4, 1, 0, 0, 1};
    OK(hipGraphAddMemsetNode(&fill, g, NULL, 0, &mp));
    sn = set(g, &fill, 1, h, 0);
    c = cond(g, &sn, 1, h, hipGraphCondTypeWhile, 1, body);
    step(body[0], 1, h, 2);
    add(g, &c, 1, 3, 1); /* after the loop */
    hipGraphExec_t x = instantiate(g);
    clear_words();
    put_word(0, 0);
    put_word(2, 5);
    run(x);
    TRUE(word(1) == 0);
    put_word(0, 1);
    put_word(2, 1);
    run(x);
    TRUE(word(1) == 1);
    put_word(2, 1000);
    run(x);
    TRUE(word(1) == 1000);
    TRUE(word(3) == 3);
    OK(hipGraphExecDestroy(x));
    OK(hipGraphDestroy(g));
}

/* WHILE (5 rounds of step(w[1])) whose body holds an IF on the parity of w[1] (w[2] += 1 for odd
   rounds) inside a child graph, and SWITCH nested in the IF (case 0 bumps w[4]). */
static void nested(void) {
    hipGraph_t g, outer[1], inner[1], sw[2], child;
    OK(hipGraphCreate(&g, 0));
    hipGraphConditionalHandle ho = handle(g, 1, hipGraphCondAssignDefault);
    hipGraphConditionalHandle hs = handle(g, 0, hipGraphCondAssignDefault);
    cond(g, NULL, 0, ho, hipGraphCondTypeWhile, 1, outer);
    hipGraphNode_t st = step(outer[0], 1, ho, 3);
    /* A child graph node in the body, then the IF inside the child graph (as the node holds it). */
    hipGraph_t empty;
    OK(hipGraphCreate(&empty, 0));
    hipGraphNode_t cn;
    OK(hipGraphAddChildGraphNode(&cn, outer[0], &st, 1, empty));
    OK(hipGraphDestroy(empty));
    OK(hipGraphChildGraphNodeGetGraph(cn, &child));
    hipGraphConditionalHandle hi = handle(child, 0, 0);
    unsigned *counter = w + 1;
    void *oargs[] = {&hi, &counter};
    hipGraphNode_t on = kernel(child, NULL, 0, &odd_sym, oargs);
    cond(child, &on, 1, hi, hipGraphCondTypeIf, 1, inner);
    hipGraphNode_t a = add(inner[0], NULL, 0, 2, 1);
    cond(inner[0], &a, 1, hs, hipGraphCondTypeSwitch, 2, sw);
    add(sw[0], NULL, 0, 4, 1);
    add(sw[1], NULL, 0, 5, 1);
    hipGraphExec_t x = instantiate(g);
    clear_words();
    put_word(3, 5);
    run(x);
    TRUE(word(1) == 5);
    TRUE(word(2) == 3);
    TRUE(word(4) == 3 && word(5) == 0);
    /* Assign-default: the loop runs again from its default of 1. */
    put_word(1, 0);
    run(x);
    TRUE(word(1) == 5 && word(2) == 6 && word(4) == 6);
    OK(hipGraphExecDestroy(x));
    OK(hipGraphDestroy(g));
}

/* Newton's method for sqrt(a) until |x*x - a| <= 1e-12 a, the body kernel deciding when to stop. */
static void convergence(void) {
    struct newton *st;
    OK(hipMalloc((void **)&st, sizeof *st));
    hipGraph_t g, body[1];
    OK(hipGraphCreate(&g, 0));
    hipGraphConditionalHandle h = handle(g, 1, hipGraphCondAssignDefault);
    cond(g, NULL, 0, h, hipGraphCondTypeWhile, 1, body);
    void *args[] = {&st, &h};
    kernel(body[0], NULL, 0, &newton_sym, args);
    hipGraphExec_t x = instantiate(g);
    double as[] = {2.0, 1e6, 12345.678};
    for (int i = 0; i < 3; i++) {
        struct newton start = {as[i], as[i], 0}, got, ref = start;
        while (newton_step(&ref)) {}
        OK(hipMemcpy(st, &start, sizeof start, hipMemcpyHostToDevice));
        run(x);
        OK(hipMemcpy(&got, st, sizeof got, hipMemcpyDeviceToHost));
        TRUE(got.iterations == ref.iterations && got.iterations > 2);
        TRUE(got.x == ref.x && fabs(got.x * got.x - as[i]) <= 1e-12 * as[i]);
    }
    OK(hipGraphExecDestroy(x));
    OK(hipGraphDestroy(g));
    OK(hipFree(st));
}

/* IF { w[1] += 1 } followed by set(h, w[0] = 0): with hipGraphCondAssignDefault every launch starts
   from the default (1), without it the value keeps the 0 the last launch left. */
static void defaults(void) {
    for (unsigned flags = 0; flags <= 1; flags++) {
        hipGraph_t g, body[1];
        OK(hipGraphCreate(&g, 0));
        hipGraphConditionalHandle h = handle(g, 1, flags);
        hipGraphNode_t c = cond(g, NULL, 0, h, hipGraphCondTypeIf, 1, body);
        add(body[0], NULL, 0, 1, 1);
        set(g, &c, 1, h, 0);
        hipGraphExec_t x = instantiate(g);
        clear_words();
        run(x);
        run(x);
        run(x);
        TRUE(word(1) == (flags ? 3u : 1u));
        OK(hipGraphExecDestroy(x));
        OK(hipGraphDestroy(g));
    }
}

/* An executable outlives its graph (the handle's cell with it), is rebuilt by a parameter change
   after the graph is gone, and takes a changed body through hipGraphExecUpdate. */
static void lifetimes_and_updates(void) {
    hipGraph_t g, body[1];
    OK(hipGraphCreate(&g, 0));
    hipGraphConditionalHandle h = handle(g, 0, 0);
    hipGraphNode_t sn = set(g, NULL, 0, h, 0);
    cond(g, &sn, 1, h, hipGraphCondTypeWhile, 1, body);
    step(body[0], 1, h, 2);
    hipGraphExec_t x = instantiate(g);
    hipGraphExec_t x2 = instantiate(g); /* the same graph twice */
    clear_words();
    put_word(0, 1);
    put_word(2, 10);
    run(x2);
    TRUE(word(1) == 10);

    /* Update: the body's step now counts into w[5]. */
    hipGraphNode_t bn;
    size_t n = 1;
    OK(hipGraphGetNodes(body[0], &bn, &n));
    hipKernelNodeParams kp;
    OK(hipGraphKernelNodeGetParams(bn, &kp));
    unsigned *c5 = w + 5, *limit = w + 2;
    void *args[] = {&c5, &h, &limit};
    kp.kernelParams = args;
    kp.extra = NULL;
    OK(hipGraphKernelNodeSetParams(bn, &kp));
    hipGraphNode_t err = NULL;
    hipGraphExecUpdateResult r = hipGraphExecUpdateError;
    OK(hipGraphExecUpdate(x, g, &err, &r));
    TRUE(r == hipGraphExecUpdateSuccess);

    /* Another graph of the same shape has another handle: ParametersChanged. */
    hipGraph_t g2, body2[1];
    OK(hipGraphCreate(&g2, 0));
    hipGraphConditionalHandle h2 = handle(g2, 0, 0);
    hipGraphNode_t sn2 = set(g2, NULL, 0, h2, 0);
    hipGraphNode_t c2 = cond(g2, &sn2, 1, h2, hipGraphCondTypeWhile, 1, body2);
    step(body2[0], 1, h2, 2);
    EXPECT(hipGraphExecUpdate(x, g2, &err, &r), hipErrorGraphExecUpdateFailure);
    TRUE(r == hipGraphExecUpdateErrorParametersChanged && err == c2);
    OK(hipGraphDestroy(g2));

    /* The graph goes; both executables still run, and x is rebuilt by a parameter change. */
    OK(hipGraphDestroy(g));
    put_word(1, 0);
    put_word(5, 0);
    put_word(2, 4);
    run(x);
    TRUE(word(5) == 4 && word(1) == 0);
    unsigned *zero = w + 0;
    void *sargs[] = {&h, &zero};
    hipKernelNodeParams sp = {{1, 1, 1}, NULL, (void *)&set_sym, {1, 1, 1}, sargs, 0};
    OK(hipGraphExecKernelNodeSetParams(x, sn, &sp));
    put_word(5, 0);
    run(x);
    TRUE(word(5) == 4);
    run(x2);
    TRUE(word(1) == 4);
    OK(hipGraphExecDestroy(x));
    OK(hipGraphExecDestroy(x2));
}

/* hipGraphAddNode for the other kinds: fill, kernel, copy, host, child graph, empty, event record
   and wait, in one chain. */
static volatile int host_ran;
static void host_fn(void *data) { host_ran += *(int *)data; }
static void other_kinds(void) {
    hipGraph_t g, child;
    OK(hipGraphCreate(&g, 0));
    OK(hipGraphCreate(&child, 0));
    add(child, NULL, 0, 4, 100);
    hipEvent_t ev;
    OK(hipEventCreate(&ev));
    hipGraphNodeParams p;
    hipGraphNode_t nodes[9];
    int one = 1;
    unsigned *dst = w + 1, v = 5;
    void *kargs[] = {&dst, &v};
    for (int k = 0; k < 8; k++) {
        memset(&p, 0, sizeof p);
        switch (k) {
        case 0:
            p.type = hipGraphNodeTypeMemset;
            p.memset = (hipMemsetParams){w + 1, 4, 1, 0, 7, 1};
            break;
        case 1:
            p.type = hipGraphNodeTypeKernel;
            p.kernel = (hipKernelNodeParams){{1, 1, 1}, NULL, (void *)&add_sym, {1, 1, 1}, kargs, 0};
            break;
        case 2:
            p.type = hipGraphNodeTypeMemcpy;
            p.memcpy.copyParams.srcPtr = make_hipPitchedPtr(w + 1, 4, 4, 1);
            p.memcpy.copyParams.dstPtr = make_hipPitchedPtr(w + 2, 4, 4, 1);
            p.memcpy.copyParams.extent = make_hipExtent(4, 1, 1);
            p.memcpy.copyParams.kind = hipMemcpyDeviceToDevice;
            break;
        case 3:
            p.type = hipGraphNodeTypeHost;
            p.host = (hipHostNodeParams){host_fn, &one};
            break;
        case 4:
            p.type = hipGraphNodeTypeGraph;
            p.graph.graph = child;
            break;
        case 5: p.type = hipGraphNodeTypeEmpty; break;
        case 6:
            p.type = hipGraphNodeTypeEventRecord;
            p.eventRecord.event = ev;
            break;
        case 7:
            p.type = hipGraphNodeTypeWaitEvent;
            p.eventWait.event = ev;
            break;
        }
        OK(hipGraphAddNode(&nodes[k], g, k ? &nodes[k - 1] : NULL, k ? 1 : 0, &p));
        hipGraphNodeType t = (hipGraphNodeType)-1;
        OK(hipGraphNodeGetType(nodes[k], &t));
        TRUE(t == p.type);
    }
    v = 1000; /* copied at add time */
    hipGraphExec_t x = instantiate(g);
    clear_words();
    host_ran = 0;
    run(x);
    TRUE(word(1) == 12 && word(2) == 12 && word(4) == 100 && host_ran == 1);
    OK(hipGraphExecDestroy(x));

    /* Kinds this layer cannot add, bad types, copy flags. */
    memset(&p, 0, sizeof p);
    p.type = (hipGraphNodeType)10; /* newer HIP's hipGraphNodeTypeMemAlloc */
    EXPECT(hipGraphAddNode(&nodes[8], g, NULL, 0, &p), hipErrorNotSupported);
    p.type = (hipGraphNodeType)11;
    EXPECT(hipGraphAddNode(&nodes[8], g, NULL, 0, &p), hipErrorNotSupported);
    p.type = (hipGraphNodeType)0;
    EXPECT(hipGraphAddNode(&nodes[8], g, NULL, 0, &p), hipErrorInvalidValue);
    p.type = (hipGraphNodeType)9;
    EXPECT(hipGraphAddNode(&nodes[8], g, NULL, 0, &p), hipErrorInvalidValue);
    p.type = hipGraphNodeTypeMemcpy;
    p.memcpy.flags = 1;
    EXPECT(hipGraphAddNode(&nodes[8], g, NULL, 0, &p), hipErrorInvalidValue);
    p.type = hipGraphNodeTypeKernel;
    EXPECT(hipGraphAddNode(&nodes[8], g, NULL, 0, &p), hipErrorInvalidValue); /* func NULL */
    EXPECT(hipGraphAddNode(&nodes[8], g, NULL, 0, NULL), hipErrorInvalidValue);
    p.type = hipGraphNodeTypeEmpty;
    EXPECT(hipGraphAddNode(NULL, g, NULL, 0, &p), hipErrorInvalidValue);
    EXPECT(hipGraphAddNode(&nodes[8], NULL, NULL, 0, &p), hipErrorInvalidValue);
    EXPECT(hipGraphAddNode(&nodes[8], g, NULL, 1, &p), hipErrorInvalidValue);
    OK(hipEventDestroy(ev));
    OK(hipGraphDestroy(child));
    OK(hipGraphDestroy(g));
}

static void errors(void) {
    hipGraph_t g, other, body[8], body2[8];
    hipGraphConditionalHandle h = 0;
    hipGraphNodeParams p;
    hipGraphNode_t node = NULL;
    OK(hipGraphCreate(&g, 0));
    OK(hipGraphCreate(&other, 0));

    /* Handles. */
    EXPECT(hipGraphConditionalHandleCreate(NULL, g, 0, 0), hipErrorInvalidValue);
    EXPECT(hipGraphConditionalHandleCreate(&h, NULL, 0, 0), hipErrorInvalidValue);
    EXPECT(hipGraphConditionalHandleCreate(&h, g, 0, 2), hipErrorInvalidValue);
    EXPECT(hipGraphConditionalHandleCreate(&h, g, 0, hipGraphCondAssignDefault | 4), hipErrorInvalidValue);
    hipGraph_t gone;
    OK(hipGraphCreate(&gone, 0));
    OK(hipGraphDestroy(gone));
    EXPECT(hipGraphConditionalHandleCreate(&h, gone, 0, 0), hipErrorInvalidValue);
    h = handle(g, 0, 0);
    hipGraphConditionalHandle ho = handle(other, 0, 0);

    /* Sizes and types. */
    unsigned bad[][2] = {{hipGraphCondTypeIf, 0}, {hipGraphCondTypeIf, 3}, {hipGraphCondTypeWhile, 0},
                         {hipGraphCondTypeWhile, 2}, {hipGraphCondTypeSwitch, 0}, {3, 1}, {~0u, 1}};
    for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cond_params(&p, h, (hipGraphConditionalNodeType)bad[i][0], bad[i][1]);
        EXPECT(hipGraphAddNode(&node, g, NULL, 0, &p), hipErrorInvalidValue);
        TRUE(p.conditional.phGraph_out == NULL);
    }
    cond_params(&p, h, hipGraphCondTypeSwitch, 9);
    EXPECT(hipGraphAddNode(&node, g, NULL, 0, &p), hipErrorNotSupported);
    cond_params(&p, h, hipGraphCondTypeIf, 1);
    EXPECT(hipGraphAddNode(NULL, g, NULL, 0, &p), hipErrorInvalidValue);
    EXPECT(hipGraphAddNode(&node, NULL, NULL, 0, &p), hipErrorInvalidValue);
    EXPECT(hipGraphAddNode(&node, g, NULL, 2, &p), hipErrorInvalidValue);

    /* Handles of another graph, unknown handles, a handle serving two nodes. */
    cond_params(&p, ho, hipGraphCondTypeIf, 1);
    EXPECT(hipGraphAddNode(&node, g, NULL, 0, &p), hipErrorInvalidValue);
    cond_params(&p, 0, hipGraphCondTypeIf, 1);
    EXPECT(hipGraphAddNode(&node, g, NULL, 0, &p), hipErrorInvalidValue);
    cond_params(&p, h + 4, hipGraphCondTypeIf, 1);
    EXPECT(hipGraphAddNode(&node, g, NULL, 0, &p), hipErrorInvalidValue);
    hipGraphNode_t c = cond(g, NULL, 0, h, hipGraphCondTypeSwitch, 8, body);
    cond_params(&p, h, hipGraphCondTypeIf, 1);
    EXPECT(hipGraphAddNode(&node, g, NULL, 0, &p), hipErrorInvalidValue);
    EXPECT(hipGraphAddNode(&node, body[0], NULL, 0, &p), hipErrorInvalidValue); /* in its body too */
    /* A handle of a body serves nodes in that body, not in the graph holding it. */
    hipGraphConditionalHandle hb = handle(body[1], 0, 0);
    cond_params(&p, hb, hipGraphCondTypeIf, 1);
    EXPECT(hipGraphAddNode(&node, g, NULL, 0, &p), hipErrorInvalidValue);
    EXPECT(hipGraphAddNode(&node, body[2], NULL, 0, &p), hipErrorInvalidValue);
    cond(body[1], NULL, 0, hb, hipGraphCondTypeIf, 1, body2);
    /* A dependency in another graph. */
    cond_params(&p, handle(g, 0, 0), hipGraphCondTypeIf, 1);
    EXPECT(hipGraphAddNode(&node, body[3], &c, 1, &p), hipErrorInvalidValue);

    /* Bodies belong to the node; the graph with conditional nodes is neither cloned nor nested. */
    EXPECT(hipGraphDestroy(body[0]), hipErrorInvalidValue);
    hipGraph_t clone = NULL;
    EXPECT(hipGraphClone(&clone, g), hipErrorNotSupported);
    EXPECT(hipGraphAddChildGraphNode(&node, other, NULL, 0, g), hipErrorNotSupported);
    EXPECT(hipGraphAddChildGraphNode(&node, other, NULL, 0, body[1]), hipErrorNotSupported);

    /* Destroying the node frees its handle for another node. */
    OK(hipGraphDestroyNode(c));
    size_t n = 0;
    EXPECT(hipGraphGetNodes(body[0], NULL, &n), hipErrorInvalidValue);
    cond(g, NULL, 0, h, hipGraphCondTypeIf, 1, body);

    /* Bodies hold kernel, copy, fill, empty, child-graph and conditional nodes only: a host or
       event node, or a copy of pageable memory, makes the instantiation InvalidValue. */
    hipGraphExec_t x = NULL;
    OK(hipGraphAddEmptyNode(&node, body[0], NULL, 0));
    x = instantiate(g);
    OK(hipGraphExecDestroy(x));
    hipEvent_t ev;
    OK(hipEventCreate(&ev));
    hipGraphNode_t bad_node;
    OK(hipGraphAddEventRecordNode(&bad_node, body[0], NULL, 0, ev));
    EXPECT(hipGraphInstantiate(&x, g, NULL, NULL, 0), hipErrorInvalidValue);
    OK(hipGraphDestroyNode(bad_node));
    int one = 1;
    hipHostNodeParams hp = {host_fn, &one};
    OK(hipGraphAddHostNode(&bad_node, body[0], NULL, 0, &hp));
    EXPECT(hipGraphInstantiate(&x, g, NULL, NULL, 0), hipErrorInvalidValue);
    OK(hipGraphDestroyNode(bad_node));
    static unsigned pageable[4];
    OK(hipGraphAddMemcpyNode1D(&bad_node, body[0], NULL, 0, w, pageable, sizeof pageable, hipMemcpyHostToDevice));
    EXPECT(hipGraphInstantiate(&x, g, NULL, NULL, 0), hipErrorInvalidValue);
    OK(hipGraphDestroyNode(bad_node));
    OK(hipGraphAddMemcpyNode1D(&bad_node, body[0], NULL, 0, w, w + 8, 16, hipMemcpyDeviceToDevice));
    x = instantiate(g);
    OK(hipGraphExecDestroy(x));
    /* The host node is fine outside bodies. */
    OK(hipGraphAddHostNode(&bad_node, g, NULL, 0, &hp));
    x = instantiate(g);
    OK(hipGraphExecDestroy(x));

    /* Core's limits: 8 conditional nodes per executable, 16 handles per graph. */
    hipGraph_t many;
    OK(hipGraphCreate(&many, 0));
    for (int i = 0; i < 9; i++) cond(many, NULL, 0, handle(many, 0, 0), hipGraphCondTypeIf, 1, body);
    EXPECT(hipGraphInstantiate(&x, many, NULL, NULL, 0), hipErrorNotSupported);
    for (int i = 9; i < 16; i++) handle(many, 0, 0);
    EXPECT(hipGraphConditionalHandleCreate(&h, many, 0, 0), hipErrorOutOfMemory);
    OK(hipGraphDestroy(many));

    OK(hipEventDestroy(ev));
    OK(hipGraphDestroy(g));
    OK(hipGraphDestroy(other));
}

/* A capture's graph takes no conditional handles or nodes until the capture ends. */
static void capture(void) {
    hipStream_t cs;
    OK(hipStreamCreate(&cs));
    OK(hipStreamBeginCapture(cs, hipStreamCaptureModeGlobal));
    hipGraph_t cg = NULL;
    hipStreamCaptureStatus status;
    unsigned long long id;
    OK(hipStreamGetCaptureInfo_v2(cs, &status, &id, &cg, NULL, NULL));
    hipGraphConditionalHandle h;
    EXPECT(hipGraphConditionalHandleCreate(&h, cg, 0, 0), hipErrorNotSupported);
    hipGraphNodeParams p;
    cond_params(&p, 1, hipGraphCondTypeIf, 1);
    hipGraphNode_t node;
    EXPECT(hipGraphAddNode(&node, cg, NULL, 0, &p), hipErrorNotSupported);
    OK(hipStreamEndCapture(cs, &cg));
    OK(hipGraphDestroy(cg));
    OK(hipStreamDestroy(cs));
}

int main(void) {
    register_kernels();
    OK(hipStreamCreate(&s));
    OK(hipMalloc((void **)&w, 64 * 4));
    branches();
    loops();
    nested();
    convergence();
    defaults();
    lifetimes_and_updates();
    other_kinds();
    errors();
    capture();
    OK(hipFree(w));
    OK(hipStreamDestroy(s));
    DONE("conditional");
}
