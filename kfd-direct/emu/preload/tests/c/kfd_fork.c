/* amdkfd refuses a forked child's use of its parent's /dev/kfd fd with EBADF (libhsakmt's
 * is_forked_child relies on it); through the preload the child's ioctl fails the same way,
 * while the parent's fd keeps working. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

struct version { uint32_t major, minor; };
#define GET_VERSION _IOR('K', 0x01, struct version)

int main(void) {
    int fd = open("/dev/kfd", O_RDWR | O_CLOEXEC);
    if (fd < 0) { perror("open /dev/kfd"); return 1; }
    struct version v = {0, 0};
    if (ioctl(fd, GET_VERSION, &v) != 0 || v.major != 1) { perror("parent GET_VERSION"); return 1; }
    pid_t pid = fork();
    if (pid == 0) {
        struct version c = {0, 0};
        int r = ioctl(fd, GET_VERSION, &c);
        if (r == -1 && errno == EBADF) _exit(0);
        fprintf(stderr, "child: ioctl returned %d errno %d\n", r, errno);
        _exit(1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) { fprintf(stderr, "child status %#x\n", status); return 1; }
    if (ioctl(fd, GET_VERSION, &v) != 0) { perror("parent after fork"); return 1; }
    printf("fork ok: child EBADF, parent kfd %u.%u\n", v.major, v.minor);
    return 0;
}
