/* HIP scale through the C ABI: 4096 streams, 16384 events and a captured 10,000-node graph on the
   emulated gfx90a. Prints the process's resident memory before and with 4096 idle streams. */
#include "check.h"

enum { STREAMS = 4096, EVENTS = 16384, NODES = 10000 };

static long rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof line, f)) {
        if (sscanf(line, "VmRSS: %ld kB", &v) == 1) {
            break;
        }
    }
    if (f) {
        fclose(f);
    }
    return v;
}

static hipStream_t s[STREAMS];
static hipEvent_t e[EVENTS];
static unsigned int host[STREAMS];

int main(void) {
    unsigned int *buf;
    OK(hipMalloc((void **)&buf, sizeof(unsigned int) * STREAMS));
    OK(hipMemset(buf, 0, sizeof(unsigned int) * STREAMS));
    long before = rss_kib();
    for (int i = 0; i < STREAMS; i++) {
        OK(hipStreamCreate(&s[i]));
    }
    OK(hipDeviceSynchronize());
    long idle = rss_kib();
    printf("rss: %ld KiB before the streams, %ld KiB with %d idle streams\n", before, idle, STREAMS);

    /* Every stream works, in its own word. */
    for (int i = 0; i < STREAMS; i++) {
        OK(hipMemsetD32Async(buf + i, i + 1, 1, s[i]));
    }
    OK(hipDeviceSynchronize());
    OK(hipMemcpy(host, buf, sizeof host, hipMemcpyDeviceToHost));
    int wrong = 0;
    for (int i = 0; i < STREAMS; i++) {
        wrong += host[i] != (unsigned int)(i + 1);
    }
    TRUE(wrong == 0);

    /* 16384 events; every 64th recorded on a stream and waited for. */
    for (int i = 0; i < EVENTS; i++) {
        OK(hipEventCreate(&e[i]));
    }
    for (int i = 0; i < EVENTS; i += 64) {
        OK(hipEventRecord(e[i], s[i % STREAMS]));
    }
    for (int i = 0; i < EVENTS; i += 64) {
        OK(hipEventSynchronize(e[i]));
    }
    for (int i = 0; i < EVENTS; i++) {
        OK(hipEventDestroy(e[i]));
    }

    /* A captured chain of 10,000 fills, launched once. */
    hipGraph_t g = NULL;
    hipGraphExec_t x = NULL;
    OK(hipStreamBeginCapture(s[0], hipStreamCaptureModeGlobal));
    for (int i = 0; i < NODES; i++) {
        OK(hipMemsetD32Async(buf + (i % STREAMS), i, 1, s[0]));
    }
    OK(hipStreamEndCapture(s[0], &g));
    size_t n = 0;
    OK(hipGraphGetNodes(g, NULL, &n));
    TRUE(n == NODES);
    OK(hipGraphInstantiate(&x, g, NULL, NULL, 0));
    OK(hipGraphLaunch(x, s[0]));
    OK(hipStreamSynchronize(s[0]));
    OK(hipMemcpy(host, buf, sizeof host, hipMemcpyDeviceToHost));
    /* Word j holds the last i < NODES with i % STREAMS == j. */
    wrong = 0;
    for (int j = 0; j < STREAMS; j++) {
        int last = j + STREAMS * ((NODES - 1 - j) / STREAMS);
        wrong += host[j] != (unsigned int)last;
    }
    TRUE(wrong == 0);
    OK(hipGraphExecDestroy(x));
    OK(hipGraphDestroy(g));

    for (int i = 0; i < STREAMS; i++) {
        OK(hipStreamDestroy(s[i]));
    }
    OK(hipFree(buf));
    DONE("scale");
}
