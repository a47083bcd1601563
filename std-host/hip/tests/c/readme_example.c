/* The README's C example: a host kernel captured with a fork/join into a graph, then launched.
   Build: gcc -D__HIP_PLATFORM_AMD__ -Istd-host/hip/include example.c -Ltarget/debug -laqueduct_hip */
#include <aqueduct_hip.h>
#include <stdio.h>

#define CHECK(call) do { hipError_t e = (call); if (e != hipSuccess) { \
    fprintf(stderr, "%s: %s\n", #call, hipGetErrorName(e)); return 1; } } while (0)

/* Runs once per work-group on the emulated GPU: p[i] += v for this block's items. */
static void add(void **args, dim3 blockIdx, dim3 gridDim, dim3 blockDim) {
    unsigned *p = *(unsigned **)args[0], v = *(unsigned *)args[1];
    for (unsigned t = 0; t < blockDim.x; t++) p[blockIdx.x * blockDim.x + t] += v;
}
static char add_symbol;

int main(void) {
    size_t sizes[] = {sizeof(unsigned *), sizeof(unsigned)};
    CHECK(aqdRegisterHostKernel(&add_symbol, add, 2, sizes));

    unsigned *buf, host[256];
    hipStream_t s, side;
    hipEvent_t fork, join;
    CHECK(hipMalloc((void **)&buf, sizeof host));
    CHECK(hipStreamCreate(&s));
    CHECK(hipStreamCreateWithFlags(&side, hipStreamNonBlocking));
    CHECK(hipEventCreate(&fork));
    CHECK(hipEventCreate(&join));

    /* Capture: fill on s, fork to side (+1 on the first half), +10 on s, join, +100. */
    hipGraph_t graph;
    CHECK(hipStreamBeginCapture(s, hipStreamCaptureModeGlobal));
    CHECK(hipMemsetD32Async(buf, 0, 256, s));
    CHECK(hipEventRecord(fork, s));
    CHECK(hipStreamWaitEvent(side, fork, 0));
    unsigned *half = buf, one = 1, ten = 10, hundred = 100;
    void *a1[] = {&half, &one}, *a10[] = {&buf, &ten}, *a100[] = {&buf, &hundred};
    CHECK(hipLaunchKernel(&add_symbol, (dim3){2, 1, 1}, (dim3){64, 1, 1}, a1, 0, side));
    CHECK(hipEventRecord(join, side));
    CHECK(hipLaunchKernel(&add_symbol, (dim3){4, 1, 1}, (dim3){64, 1, 1}, a10, 0, s));
    CHECK(hipStreamWaitEvent(s, join, 0));
    CHECK(hipLaunchKernel(&add_symbol, (dim3){4, 1, 1}, (dim3){64, 1, 1}, a100, 0, s));
    CHECK(hipStreamEndCapture(s, &graph));

    size_t nodes = 0;
    hipGraphExec_t exec;
    CHECK(hipGraphGetNodes(graph, NULL, &nodes));
    CHECK(hipGraphInstantiate(&exec, graph, NULL, NULL, 0));
    CHECK(hipGraphLaunch(exec, s));
    CHECK(hipStreamSynchronize(s));
    CHECK(hipMemcpy(host, buf, sizeof host, hipMemcpyDeviceToHost));
    printf("%zu nodes: host[0] = %u, host[255] = %u\n", nodes, host[0], host[255]); /* 4: 111, 110 */

    /* Errors are HIP's, and stick per thread until read. */
    if (hipStreamEndCapture(s, &graph) != hipErrorIllegalState) return 1;
    printf("last error: %s\n", hipGetErrorName(hipGetLastError())); /* hipErrorIllegalState */

    CHECK(hipGraphExecDestroy(exec));
    CHECK(hipGraphDestroy(graph));
    CHECK(hipFree(buf));
    CHECK(hipStreamDestroy(s));
    CHECK(hipStreamDestroy(side));
    printf("readme_example: ok\n");
    return 0;
}
