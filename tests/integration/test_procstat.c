/*
 * test_procstat.c: the descriptor count a worker takes of itself after
 * every request (through a directory it keeps open), against what
 * another process counting it sees, across opens, closes and a fork;
 * its own RSS through the statm it keeps open, reread in place and its
 * own after a fork.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/procstat.h"
#include "t.h"

/* Opens and closes follow at once in the count the process takes of
 * itself, and the kept directory is not counted. */
static void self_count(void)
{
    long base = enr_proc_fd_count(0), again = enr_proc_fd_count(0), n;
    int p[3][2];

    T_CHECK(base >= 3, "own count %ld (stdin, stdout, stderr at least)", base);
    T_CHECK(again == base, "a second count %ld, first %ld: the kept directory is not counted",
            again, base);
    for (int i = 0; i < 3; i++)
        T_CHECK(pipe(p[i]) == 0, "pipe");
    n = enr_proc_fd_count(0);
    T_CHECK(n == base + 6, "after 3 pipes: %ld, want %ld", n, base + 6);
    for (int i = 0; i < 3; i++) {
        close(p[i][0]);
        close(p[i][1]);
    }
    n = enr_proc_fd_count(0);
    T_CHECK(n == base, "after closing them: %ld, want %ld", n, base);
    /* Another process's view (the master's of a worker) has the kept
     * directory in it: one more. */
    n = enr_proc_fd_count(getpid());
    T_CHECK(n == base + 1, "counted by pid: %ld, want %ld", n, base + 1);
}

/* A forked child counts its own table, not the parent's through the
 * directory it inherited. */
static void after_fork(void)
{
    long parent = enr_proc_fd_count(0);
    int p[2], status = 0;
    pid_t pid;

    T_CHECK(pipe(p) == 0, "pipe");
    pid = fork();
    if (pid == 0) {
        /* The child closes one end: its table is the parent's less one
         * (the inherited directory is replaced, not added to). */
        long n;
        close(p[0]);
        n = enr_proc_fd_count(0);
        _exit(n == parent + 1 ? 0 : 1);
    }
    T_CHECK(pid > 0, "fork");
    T_CHECK(pid > 0 && t_wait_child(pid, 5000, &status) == 0 && WIFEXITED(status) &&
                WEXITSTATUS(status) == 0,
            "the child's own count, within 5 s (status %d)", status);
    T_CHECK(enr_proc_fd_count(0) == parent + 2, "the parent's count after the fork");
    close(p[0]);
    close(p[1]);
    T_CHECK(enr_proc_fd_count(0) == parent, "the parent's count back");
}

/* kb of fresh memory, touched so that it is resident. */
static void *touch(size_t kb)
{
    void *p = mmap(NULL, kb * 1024, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (p != MAP_FAILED)
        memset(p, 0x5a, kb * 1024);
    return p == MAP_FAILED ? NULL : p;
}

/* The kept statm is reread, not a stale first reading, and a forked
 * child reads its own, not its parent's through the one it inherited. */
static void self_rss(void)
{
    long before = enr_proc_rss_kb(0), fds = enr_proc_fd_count(0), after;
    void *p = touch(16384);
    int status = 0;
    pid_t pid;

    T_CHECK(before > 0, "own RSS %ld KiB", before);
    after = enr_proc_rss_kb(0);
    T_CHECK(p != NULL && after >= before + 15000, "16 MiB touched: %ld KiB after %ld", after,
            before);
    T_CHECK(enr_proc_fd_count(0) == fds, "the kept statm is one descriptor, opened once");
    pid = fork();
    if (pid == 0) {
        /* The parent's RSS stays; only the child's grows by 32 MiB. */
        long mine = enr_proc_rss_kb(0), grown;
        touch(32768);
        grown = enr_proc_rss_kb(0);
        _exit(mine > 0 && grown >= mine + 30000 ? 0 : 1);
    }
    T_CHECK(pid > 0 && t_wait_child(pid, 5000, &status) == 0 && WIFEXITED(status) &&
                WEXITSTATUS(status) == 0,
            "the child's own RSS grows with its own memory (status %d)", status);
    after = enr_proc_rss_kb(0);
    T_CHECK(after < before + 16384 + 15000, "the parent's RSS without the child's: %ld", after);
    if (p != NULL)
        munmap(p, 16384 * 1024);
}

int main(void)
{
    self_count();
    after_fork();
    self_rss();
    T_CHECK(enr_proc_fd_count(999999999) == -1, "a process that does not exist: -1");
    T_DONE();
}
