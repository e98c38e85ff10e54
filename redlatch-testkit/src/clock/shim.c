/* The movable clock of redlatch-testkit's clock.rs, preloaded into one server process
 * (LD_PRELOAD): clock_gettime(CLOCK_REALTIME*), gettimeofday() and time() answer the
 * real time plus the whole seconds written in the file named by $REDLATCH_CLOCK_FILE
 * ("+60"), read at every call, so rewriting the file jumps the wall clock at once. The
 * monotonic clocks are left alone, as an NTP step leaves them.
 *
 * Why not libfaketime: it cannot start inside a process linked with jemalloc (Debian's
 * redis-server): jemalloc reads the clock while libfaketime initialises, and the
 * recursion aborts the start (libfaketime issues #130, #327). This shim needs no
 * initialisation: raw system calls only, no allocation, no dlsym. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static long offset_secs(void) {
    const char *path = getenv("REDLATCH_CLOCK_FILE");
    if (!path) return 0;
    long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char buf[32];
    long n = syscall(SYS_read, fd, buf, sizeof buf - 1);
    syscall(SYS_close, fd);
    if (n <= 0) return 0;
    long v = 0, i = 0, neg = 0;
    if (buf[0] == '+' || buf[0] == '-') { neg = buf[0] == '-'; i = 1; }
    for (; i < n && buf[i] >= '0' && buf[i] <= '9'; i++) v = v * 10 + (buf[i] - '0');
    return neg ? -v : v;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
    long r = syscall(SYS_clock_gettime, id, ts);
    if (r == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) ts->tv_sec += offset_secs();
    return (int)r;
}

int gettimeofday(struct timeval *tv, void *tz) {
    struct timespec ts;
    long r = syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts);
    (void)tz;
    if (r == 0 && tv) {
        tv->tv_sec = ts.tv_sec + offset_secs();
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return (int)r;
}

time_t time(time_t *t) {
    struct timespec ts;
    syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts);
    time_t now = ts.tv_sec + offset_secs();
    if (t) *t = now;
    return now;
}
