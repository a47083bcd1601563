/* HIP IPC between two processes on the same (emulated) GPU: the parent allocates and fills
   device memory, exports it and an interprocess event, and starts itself again as the child
   ("ipc child RFD WFD"), which opens the handles, checks the parent's bytes, writes its own, and
   waits on the parent's event; the parent sees the child's writes, the child's wait holds until
   the parent's record completes, and the parent's query and synchronize follow the child's
   record of the same event. Plus the error cases on both sides. */
#include "check.h"

#include <signal.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define N ((1u << 20) + 100) /* bytes of the shared allocation (not a page multiple) */

static void put_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w <= 0) {
            perror("write");
            exit(2);
        }
        c += w;
        n -= (size_t)w;
    }
}

static void get_all(int fd, void *p, size_t n) {
    char *c = p;
    while (n > 0) {
        ssize_t r = read(fd, c, n);
        if (r <= 0) {
            perror("read");
            exit(2);
        }
        c += r;
        n -= (size_t)r;
    }
}

static void say(int fd, char c) { put_all(fd, &c, 1); }

static char hear(int fd) {
    char c;
    get_all(fd, &c, 1);
    return c;
}

struct handles {
    hipIpcMemHandle_t mem, inner, stale, fresh;
    hipIpcEventHandle_t event;
};

static int child(int rfd, int wfd) {
    struct handles h;
    get_all(rfd, &h, sizeof h);

    /* The parent's bytes, through the child's own device. */
    unsigned char *p = NULL, *again = NULL, *inner = NULL;
    EXPECT(hipIpcOpenMemHandle((void **)&p, h.mem, 0x10), hipErrorInvalidValue);
    OK(hipIpcOpenMemHandle((void **)&p, h.mem, hipIpcMemLazyEnablePeerAccess));
    TRUE(p != NULL);
    OK(hipIpcOpenMemHandle((void **)&again, h.mem, hipIpcMemLazyEnablePeerAccess));
    TRUE(again == p); /* one handle opened twice: one pointer, two references */
    OK(hipIpcOpenMemHandle((void **)&inner, h.inner, hipIpcMemLazyEnablePeerAccess));
    TRUE(inner == p + 4096); /* a handle of an inner pointer: the allocation, at the offset */
    hipPointerAttribute_t attr;
    OK(hipPointerGetAttributes(&attr, p + 100));
    TRUE(attr.memoryType == hipMemoryTypeDevice);
    static unsigned char host[N];
    OK(hipMemcpy(host, p, N, hipMemcpyDeviceToHost));
    int bad = 0;
    for (unsigned i = 0; i < N; i++) bad += host[i] != 0x5a;
    TRUE(bad == 0);

    /* The child writes: a fill by its device, and a copy from its host. */
    OK(hipMemset(p, 0xc3, 4096));
    for (unsigned i = 0; i < 256; i++) host[i] = (unsigned char)i;
    OK(hipMemcpy(inner + 4096, host, 256, hipMemcpyHostToDevice));
    OK(hipDeviceSynchronize());

    /* A handle whose allocation the parent freed (its fd closed, the number maybe reused). */
    void *stale = NULL;
    EXPECT(hipIpcOpenMemHandle(&stale, h.stale, hipIpcMemLazyEnablePeerAccess), hipErrorInvalidDevicePointer);
    void *fresh = NULL;
    OK(hipIpcOpenMemHandle(&fresh, h.fresh, hipIpcMemLazyEnablePeerAccess));
    OK(hipIpcCloseMemHandle(fresh));

    /* Closing: each open takes a reference. */
    OK(hipIpcCloseMemHandle(p));
    OK(hipIpcCloseMemHandle(inner));
    OK(hipIpcCloseMemHandle(again));
    EXPECT(hipIpcCloseMemHandle(p), hipErrorInvalidValue);
    say(wfd, 'w'); /* written */

    /* The parent's event: the parent's stream is held until the child says it waits. */
    hipEvent_t ev;
    EXPECT(hipIpcOpenEventHandle(NULL, h.event), hipErrorInvalidValue);
    OK(hipIpcOpenEventHandle(&ev, h.event));
    OK(hipIpcOpenMemHandle((void **)&p, h.mem, hipIpcMemLazyEnablePeerAccess));
    TRUE(hear(rfd) == 'r'); /* the parent recorded (behind its held stream) */
    EXPECT(hipEventQuery(ev), hipErrorNotReady);
    hipStream_t s;
    OK(hipStreamCreate(&s));
    /* Pinned: an asynchronous copy to pageable memory would return complete, as HIP's does. */
    unsigned char *seen = NULL;
    OK(hipHostMalloc((void **)&seen, 64, 0));
    OK(hipStreamWaitEvent(s, ev, 0));
    OK(hipMemcpyAsync(seen, p + 8192, 64, hipMemcpyDeviceToHost, s));
    say(wfd, 'q'); /* queued: the parent may release its stream */
    OK(hipStreamSynchronize(s));
    bad = 0;
    for (unsigned i = 0; i < 64; i++) bad += seen[i] != 0x99;
    TRUE(bad == 0); /* the copy waited for the parent's fill before its record */
    OK(hipEventSynchronize(ev));
    OK(hipEventQuery(ev));
    EXPECT(hipEventElapsedTime(&(float){0}, ev, ev), hipErrorInvalidHandle);

    /* The other way: the child records the opened event behind its own held stream, and the
       parent's query and synchronize follow the child's record (once the parent is done with
       its own: the latest record is the one that counts). */
    TRUE(hear(rfd) == 'x');
    unsigned *flag = NULL;
    OK(hipHostMalloc((void **)&flag, sizeof *flag, 0));
    *flag = 0;
    OK(hipStreamWaitValue32(s, flag, 1, hipStreamWaitValueEq, 0xffffffffu));
    OK(hipMemsetAsync(p + 12288, 0x66, 4096, s));
    OK(hipEventRecord(ev, s));
    say(wfd, 'R');
    TRUE(hear(rfd) == 'g'); /* the parent saw the record pending */
    __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
    OK(hipStreamSynchronize(s));
    TRUE(hear(rfd) == 's'); /* the parent's synchronize returned */
    OK(hipHostFree(flag));
    OK(hipStreamDestroy(s));
    OK(hipHostFree(seen));
    OK(hipEventDestroy(ev));
    OK(hipIpcCloseMemHandle(p));
    say(wfd, 'd');
    DONE("ipc child");
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "child") == 0) return child(atoi(argv[2]), atoi(argv[3]));

    unsigned char *d = NULL, *d2 = NULL, *d3 = NULL, *h = NULL;
    OK(hipMalloc((void **)&d, N));
    OK(hipMemset(d, 0x5a, N));
    OK(hipDeviceSynchronize());

    struct handles hs;
    memset(&hs, 0, sizeof hs);
    /* Arguments, and memory that is not device memory allocated here. */
    int stack_value = 0;
    EXPECT(hipIpcGetMemHandle(NULL, d), hipErrorInvalidValue);
    EXPECT(hipIpcGetMemHandle(&hs.mem, NULL), hipErrorInvalidValue);
    EXPECT(hipIpcGetMemHandle(&hs.mem, &stack_value), hipErrorInvalidValue);
    OK(hipHostMalloc((void **)&h, 4096, 0));
    EXPECT(hipIpcGetMemHandle(&hs.mem, h), hipErrorInvalidValue);
    OK(hipIpcGetMemHandle(&hs.mem, d));
    OK(hipIpcGetMemHandle(&hs.inner, d + 4096));

    /* Opening in the exporting process is refused, as clr refuses it. */
    void *opened = NULL;
    EXPECT(hipIpcOpenMemHandle(&opened, hs.mem, hipIpcMemLazyEnablePeerAccess), hipErrorInvalidContext);
    EXPECT(hipIpcOpenMemHandle(NULL, hs.mem, hipIpcMemLazyEnablePeerAccess), hipErrorInvalidValue);
    hipIpcMemHandle_t zero, garbage;
    memset(&zero, 0, sizeof zero);
    EXPECT(hipIpcOpenMemHandle(&opened, zero, hipIpcMemLazyEnablePeerAccess), hipErrorInvalidValue);
    memset(&garbage, 0x17, sizeof garbage);
    EXPECT(hipIpcOpenMemHandle(&opened, garbage, hipIpcMemLazyEnablePeerAccess), hipErrorInvalidDevicePointer);
    EXPECT(hipIpcCloseMemHandle(NULL), hipErrorInvalidValue);
    EXPECT(hipIpcCloseMemHandle(d), hipErrorInvalidValue);

    /* A stale handle: its allocation freed before the child opens it. */
    OK(hipMalloc((void **)&d2, 8192));
    OK(hipIpcGetMemHandle(&hs.stale, d2));
    OK(hipFree(d2));
    OK(hipMalloc((void **)&d3, 8192));
    OK(hipIpcGetMemHandle(&hs.fresh, d3));

    /* Events: only interprocess ones have handles. */
    hipEvent_t plain, ev, dead;
    EXPECT(hipEventCreateWithFlags(&ev, hipEventInterprocess), hipErrorInvalidValue);
    OK(hipEventCreateWithFlags(&ev, hipEventInterprocess | hipEventDisableTiming));
    OK(hipEventCreate(&plain));
    OK(hipEventCreate(&dead));
    OK(hipEventDestroy(dead));
    EXPECT(hipIpcGetEventHandle(NULL, ev), hipErrorInvalidValue);
    EXPECT(hipIpcGetEventHandle(&hs.event, NULL), hipErrorInvalidValue);
    EXPECT(hipIpcGetEventHandle(&hs.event, dead), hipErrorContextIsDestroyed);
    EXPECT(hipIpcGetEventHandle(&hs.event, plain), hipErrorInvalidConfiguration);
    OK(hipIpcGetEventHandle(&hs.event, ev));
    hipEvent_t self_opened;
    EXPECT(hipIpcOpenEventHandle(&self_opened, hs.event), hipErrorInvalidContext);
    hipIpcEventHandle_t ezero;
    memset(&ezero, 0, sizeof ezero);
    EXPECT(hipIpcOpenEventHandle(&self_opened, ezero), hipErrorInvalidValue);

    /* The child: this program again. */
    int to_child[2], from_child[2];
    TRUE(pipe(to_child) == 0 && pipe(from_child) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        /* The child goes with the parent (a hung parent is killed by the test's timeout). */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        char r[16], w[16];
        snprintf(r, sizeof r, "%d", to_child[0]);
        snprintf(w, sizeof w, "%d", from_child[1]);
        close(to_child[1]);
        close(from_child[0]);
        execl("/proc/self/exe", argv[0], "child", r, w, (char *)NULL);
        _exit(127);
    }
    TRUE(pid > 0);
    close(to_child[0]);
    close(from_child[1]);
    put_all(to_child[1], &hs, sizeof hs);

    /* The child's writes, seen by the parent's device. */
    TRUE(hear(from_child[0]) == 'w');
    static unsigned char back[3 * 4096];
    OK(hipMemcpy(back, d, sizeof back, hipMemcpyDeviceToHost));
    int bad = 0;
    for (unsigned i = 0; i < 4096; i++) bad += back[i] != 0xc3;
    for (unsigned i = 0; i < 256; i++) bad += back[8192 + i] != (unsigned char)i;
    for (unsigned i = 256; i < 4096; i++) bad += back[8192 + i] != 0x5a;
    TRUE(bad == 0);

    /* A stream held on a flag, then a fill and the record: the child's wait must hold until the
       parent lets the stream go. */
    unsigned *flag = NULL;
    OK(hipHostMalloc((void **)&flag, sizeof *flag, 0));
    *flag = 0;
    hipStream_t s;
    OK(hipStreamCreate(&s));
    OK(hipStreamWaitValue32(s, flag, 1, hipStreamWaitValueEq, 0xffffffffu));
    OK(hipMemsetAsync(d + 8192, 0x99, 4096, s));
    OK(hipEventRecord(ev, s));
    EXPECT(hipEventQuery(ev), hipErrorNotReady);
    say(to_child[1], 'r');
    TRUE(hear(from_child[0]) == 'q');
    __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
    OK(hipEventSynchronize(ev));
    OK(hipEventQuery(ev));

    /* The child's record of the same event, behind the child's held stream. */
    say(to_child[1], 'x');
    TRUE(hear(from_child[0]) == 'R');
    EXPECT(hipEventQuery(ev), hipErrorNotReady);
    say(to_child[1], 'g');
    OK(hipEventSynchronize(ev));
    OK(hipEventQuery(ev));
    OK(hipMemcpy(back, d + 12288, 4096, hipMemcpyDeviceToHost));
    bad = 0;
    for (unsigned i = 0; i < 4096; i++) bad += back[i] != 0x66;
    TRUE(bad == 0); /* the child's fill before its record, seen once the record completed */
    say(to_child[1], 's');
    TRUE(hear(from_child[0]) == 'd');

    int status = 0;
    TRUE(waitpid(pid, &status, 0) == pid);
    TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    OK(hipStreamDestroy(s));
    OK(hipEventDestroy(ev));
    OK(hipEventDestroy(plain));
    OK(hipHostFree(flag));
    OK(hipHostFree(h));
    OK(hipFree(d3));
    OK(hipFree(d));
    DONE("ipc");
}
