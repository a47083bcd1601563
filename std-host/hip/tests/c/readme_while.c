/* The README's WHILE example: a loop the device runs until the body's kernel says stop.
   Build: gcc -D__HIP_PLATFORM_AMD__ -Istd-host/hip/include while.c -Ltarget/debug -laqueduct_hip */
#include <aqueduct_hip.h>
#include <stdio.h>

#define CHECK(call) do { hipError_t e = (call); if (e != hipSuccess) { \
    fprintf(stderr, "%s: %s\n", #call, hipGetErrorName(e)); return 1; } } while (0)

/* The body's kernel: halve x[0], count in x[1], go on while x[0] > 1. A host kernel, as the
   emulated GPU runs them; GPU code calls hipGraphSetConditional (aqueduct_hip_device.h). */
static void halve(void **args, dim3 blockIdx, dim3 gridDim, dim3 blockDim) {
    unsigned *x = *(unsigned **)args[0];
    hipGraphConditionalHandle loop = *(hipGraphConditionalHandle *)args[1];
    x[0] /= 2;
    x[1] += 1;
    aqdGraphSetConditional(loop, x[0] > 1);
}
static char halve_symbol;

int main(void) {
    size_t sizes[] = {sizeof(unsigned *), sizeof(hipGraphConditionalHandle)};
    CHECK(aqdRegisterHostKernel(&halve_symbol, halve, 2, sizes));
    unsigned *x, host[2] = {1000000, 0};
    hipStream_t s;
    CHECK(hipMalloc((void **)&x, sizeof host));
    CHECK(hipStreamCreate(&s));

    /* One WHILE node; its value is set to the default, 1, at every launch. */
    hipGraph_t graph, body;
    hipGraphConditionalHandle loop;
    CHECK(hipGraphCreate(&graph, 0));
    CHECK(hipGraphConditionalHandleCreate(&loop, graph, 1, hipGraphCondAssignDefault));
    hipGraphNodeParams p = {.type = hipGraphNodeTypeConditional};
    p.conditional.handle = loop;
    p.conditional.type = hipGraphCondTypeWhile;
    p.conditional.size = 1;
    hipGraphNode_t node, step;
    CHECK(hipGraphAddNode(&node, graph, NULL, 0, &p));
    body = p.conditional.phGraph_out[0]; /* the node's own body graph, empty until filled */
    void *args[] = {&x, &loop};
    hipKernelNodeParams kp = {{1, 1, 1}, NULL, &halve_symbol, {1, 1, 1}, args, 0};
    CHECK(hipGraphAddKernelNode(&step, body, NULL, 0, &kp));

    hipGraphExec_t exec;
    CHECK(hipGraphInstantiate(&exec, graph, NULL, NULL, 0));
    CHECK(hipMemcpy(x, host, sizeof host, hipMemcpyHostToDevice));
    CHECK(hipGraphLaunch(exec, s)); /* no host code runs between the iterations */
    CHECK(hipStreamSynchronize(s));
    CHECK(hipMemcpy(host, x, sizeof host, hipMemcpyDeviceToHost));
    printf("x = %u after %u iterations\n", host[0], host[1]); /* x = 1 after 19 iterations */

    CHECK(hipGraphExecDestroy(exec));
    CHECK(hipGraphDestroy(graph));
    CHECK(hipFree(x));
    CHECK(hipStreamDestroy(s));
    printf("readme_while: ok\n");
    return 0;
}
