/*
 * procstat.c: RSS and descriptor count from /proc (procstat.h).
 *
 * statm is read with open/read/close into a stack
 * buffer; the descriptor count walks /proc/PID/fd with getdents64 into a
 * stack buffer so that counting never opens a DIR* (a heap allocation)
 * and never reads link targets.  Every descriptor is opened O_CLOEXEC.
 *
 * A process measuring itself (pid 0: a worker after its requests) keeps
 * its statm and fd directory open and rereads them in place: one pread,
 * or an lseek and the scan, instead of an open, reads and a close.  A
 * forked child drops the ones it inherited (they name its parent) in a
 * pthread_atfork handler, so no call asks getpid() whose they are.
 */
#include "base/procstat.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

static long page_kb(void)
{
    static long kb;

    if (kb == 0) {
        long sz = sysconf(_SC_PAGESIZE);
        kb = sz > 0 ? sz / 1024 : 4;
    }
    return kb;
}

static void proc_path(char *out, size_t len, pid_t pid, const char *leaf)
{
    if (pid == 0)
        snprintf(out, len, "/proc/self/%s", leaf);
    else
        snprintf(out, len, "/proc/%ld/%s", (long)pid, leaf);
}

static ssize_t read_small(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n, total = 0;

    if (fd < 0)
        return -1;
    while ((size_t)total < len - 1) {
        n = read(fd, buf + total, len - 1 - (size_t)total);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            close(fd);
            return -1;
        }
        if (n == 0)
            break;
        total += n;
    }
    close(fd);
    buf[total] = '\0';
    return total;
}

/* This process's own kept descriptors (file comment): -1 until first use
 * and in a child after fork. */
static int self_dir = -1;
static int self_statm = -1;

static void forget_parent(void)
{
    if (self_dir >= 0)
        close(self_dir);
    if (self_statm >= 0)
        close(self_statm);
    self_dir = self_statm = -1;
}

/* Registered once, before the first kept descriptor exists. */
static int watch_forks(void)
{
    static int registered;

    if (!registered && pthread_atfork(NULL, NULL, forget_parent) != 0)
        return -1;
    registered = 1;
    return 0;
}

/* statm of this process through its kept descriptor: one pread. */
static ssize_t read_self_statm(char *buf, size_t len)
{
    ssize_t n;

    if (self_statm < 0) {
        if (watch_forks() != 0)
            return -1;
        self_statm = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
        if (self_statm < 0)
            return -1;
    }
    do
        n = pread(self_statm, buf, len - 1, 0);
    while (n < 0 && errno == EINTR);
    if (n <= 0) {
        close(self_statm);
        self_statm = -1;
        return -1;
    }
    buf[n] = '\0';
    return n;
}

long enr_proc_rss_kb(pid_t pid)
{
    char path[64], buf[128];
    unsigned long size, resident;

    if (pid == 0) {
        if (read_self_statm(buf, sizeof buf) <= 0)
            return -1;
    } else {
        proc_path(path, sizeof path, pid, "statm");
        if (read_small(path, buf, sizeof buf) <= 0)
            return -1;
    }
    if (sscanf(buf, "%lu %lu", &size, &resident) != 2)
        return -1;
    return (long)resident * page_kb();
}

struct linux_dirent64 {
    unsigned long long d_ino;
    long long d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* The entries of an open /proc/PID/fd from its start, "." and ".." left
 * out; -1 on a read error. */
static long count_entries(int dfd)
{
    char buf[4096] __attribute__((aligned(8)));
    long count = 0;

    for (;;) {
        long n = syscall(SYS_getdents64, dfd, buf, sizeof buf);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (n == 0)
            return count;
        for (long off = 0; off < n;) {
            struct linux_dirent64 *d = (struct linux_dirent64 *)(buf + off);
            if (d->d_name[0] != '.')
                count++;
            off += d->d_reclen;
        }
    }
}

/* A worker counts its own table after its requests.  Opening a /proc
 * path is most of the cost (~14 us a count here, ~7 us rewinding a
 * directory kept open), so the process keeps its own fd directory open
 * and rewinds it; a forked child drops its parent's (forget_parent). */
static long count_self(void)
{
    long n;

    if (self_dir < 0) {
        if (watch_forks() != 0)
            return -1;
        self_dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (self_dir < 0)
            return -1;
    } else if (lseek(self_dir, 0, SEEK_SET) != 0) {
        close(self_dir);
        self_dir = -1;
        return -1;
    }
    n = count_entries(self_dir);
    if (n < 0) {
        close(self_dir);
        self_dir = -1;
        return -1;
    }
    return n - 1; /* the directory itself is ours, not the caller's */
}

long enr_proc_fd_count(pid_t pid)
{
    char path[64];
    long count;
    int dfd;

    if (pid == 0)
        return count_self();
    proc_path(path, sizeof path, pid, "fd");
    dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -1;
    count = count_entries(dfd);
    close(dfd);
    /* Counting our own table includes the directory just opened. */
    if (count > 0 && pid == getpid())
        count--;
    return count;
}
