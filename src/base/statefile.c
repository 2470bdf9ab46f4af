/*
 * statefile.c: the files of the state directory, found, trusted, locked
 * and replaced whole (statefile.h).
 *
 * Invariants: what is checked is the descriptor that is then used (one
 * open with O_NOFOLLOW, then fstat); a lock taken is on the file still at
 * the path (a file renamed away while we waited is let go and the path
 * opened again); a file is never given the path before it is whole and
 * synced; a name is replaced only by a caller that holds the file it
 * names or refused it as its own.  This process's held files are known
 * (held[]) so that it can tell its own lock from another daemon's: a
 * flock taken through a second descriptor conflicts with our own first.
 */
#include "base/statefile.h"
#include "base/safedir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#define POLL_MS 10
#define MAX_HELD 8     /* state files one process holds: the cache (two at a reload), the budget */
#define REOPEN_TRIES 3 /* a file renamed away while we waited for its lock, opened again */

static struct held {
    dev_t dev;
    ino_t ino;
    int fd1;   /* the descriptor + 1; 0: a free row */
    pid_t pid; /* the process that holds it: a forked child's copy of the row is not its own */
} held[MAX_HELD];

static void hold(int fd)
{
    struct stat st;

    if (fstat(fd, &st) != 0)
        return;
    for (int i = 0; i < MAX_HELD; i++)
        if (held[i].fd1 == 0) {
            held[i] = (struct held){st.st_dev, st.st_ino, fd + 1, getpid()};
            return;
        }
}

static int held_here(const struct stat *st)
{
    for (int i = 0; i < MAX_HELD; i++)
        if (held[i].fd1 != 0 && held[i].pid == getpid() && held[i].dev == st->st_dev &&
            held[i].ino == st->st_ino)
            return 1;
    return 0;
}

void enr_statefile_close(int fd)
{
    if (fd < 0)
        return;
    for (int i = 0; i < MAX_HELD; i++)
        if (held[i].fd1 == fd + 1)
            held[i].fd1 = 0;
    close(fd);
}

int enr_statefile_trusted(const struct stat *st, char *why, size_t whylen)
{
    if (enr_safedir_file_ok(st, why, whylen) != 0)
        return -1;
    if ((st->st_mode & (S_IWGRP | S_IWOTH)) != 0) {
        snprintf(why, whylen, "mode %04o: %s may write it", (unsigned)(st->st_mode & 07777),
                 (st->st_mode & S_IWOTH) ? "every user" : "its group");
        return -1;
    }
    return 0;
}

int enr_statefile_default(const char *name, char *out, size_t outlen)
{
    const char *dir = getenv("STATE_DIRECTORY");
    size_t n;

    if (dir == NULL || dir[0] != '/')
        return -1;
    n = strcspn(dir, ":"); /* of several StateDirectory= entries, the first */
    if (n + 1 + strlen(name) + 1 > outlen)
        return -1;
    snprintf(out, outlen, "%.*s/%s", (int)n, dir, name);
    return 0;
}

/* The pid that holds a flock on the file st, from /proc/locks (its lines
 * "N: FLOCK  ADVISORY  WRITE PID MAJ:MIN:INODE 0 EOF", waiters marked
 * "->"); 0 when it is not said. */
static long lock_holder(const struct stat *st)
{
    FILE *f = fopen("/proc/locks", "re");
    char line[256];
    long pid = 0;

    if (f == NULL)
        return 0;
    while (pid == 0 && fgets(line, sizeof line, f) != NULL) {
        char kind[16], adv[16], mode[16];
        unsigned maj, min;
        unsigned long long ino;
        long p;
        if (strstr(line, "->") != NULL)
            continue;
        if (sscanf(line, "%*d: %15s %15s %15s %ld %x:%x:%llu", kind, adv, mode, &p, &maj, &min,
                   &ino) == 7 &&
            strcmp(kind, "FLOCK") == 0 && ino == (unsigned long long)st->st_ino &&
            maj == major(st->st_dev) && min == minor(st->st_dev))
            pid = p;
    }
    fclose(f);
    return pid;
}

/* The lock, waited for ENR_STATEFILE_WAIT_MS: 0, or -1 (errno). */
static int take_lock(int fd)
{
    for (unsigned waited = 0;; waited += POLL_MS) {
        struct timespec ts = {0, POLL_MS * 1000000L};
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
            return 0;
        if (errno != EWOULDBLOCK || waited >= ENR_STATEFILE_WAIT_MS)
            return -1;
        nanosleep(&ts, NULL);
    }
}

/* The file at fd is still the one named path (not renamed away). */
static int still_at(int fd, const char *path)
{
    struct stat a, b;

    return fstat(fd, &a) == 0 && lstat(path, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

/* One try of enr_statefile_open; -2: the file went away meanwhile. */
static int open_once(const char *path, int *fd, char *why, size_t whylen)
{
    struct stat st;
    int e;

    *fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (*fd < 0) {
        e = errno;
        if (e == ENOENT)
            return ENR_SF_ABSENT;
        snprintf(why, whylen, "%s", e == ELOOP ? "a symbolic link" : strerror(e));
        errno = e == ELOOP ? EPERM : e;
        return e == ELOOP ? ENR_SF_REFUSED : ENR_SF_ERROR;
    }
    if (fstat(*fd, &st) != 0) {
        e = errno;
        snprintf(why, whylen, "%s", strerror(e));
        goto fail;
    }
    if (held_here(&st))
        return ENR_SF_OURS;
    if (enr_statefile_trusted(&st, why, whylen) != 0) {
        close(*fd);
        *fd = -1;
        errno = EPERM;
        return ENR_SF_REFUSED;
    }
    if (take_lock(*fd) != 0) {
        long pid = lock_holder(&st);
        e = errno == EWOULDBLOCK ? EBUSY : errno;
        if (e != EBUSY)
            snprintf(why, whylen, "cannot lock it: %s", strerror(e));
        else if (pid > 0)
            snprintf(why, whylen, "in use by another process (pid %ld holds its lock)", pid);
        else
            snprintf(why, whylen, "in use by another process (it holds its lock)");
        close(*fd);
        *fd = -1;
        errno = e;
        return e == EBUSY ? ENR_SF_BUSY : ENR_SF_ERROR;
    }
    if (!still_at(*fd, path)) {
        close(*fd);
        *fd = -1;
        return -2;
    }
    hold(*fd);
    return ENR_SF_OPENED;
fail:
    close(*fd);
    *fd = -1;
    errno = e;
    return ENR_SF_ERROR;
}

int enr_statefile_open(const char *path, int *fd, char *why, size_t whylen)
{
    int rc = -2;

    why[0] = '\0';
    for (int i = 0; i < REOPEN_TRIES && rc == -2; i++)
        rc = open_once(path, fd, why, whylen);
    if (rc == -2) {
        snprintf(why, whylen, "replaced again and again while its lock was waited for");
        errno = EBUSY;
        rc = ENR_SF_BUSY;
    }
    return rc;
}

/* The directory of path, for O_TMPFILE and its fsync. */
static void dir_of(const char *path, char *dir, size_t n)
{
    const char *slash = strrchr(path, '/');

    if (slash == NULL)
        snprintf(dir, n, ".");
    else
        snprintf(dir, n, "%.*s", slash == path ? 1 : (int)(slash - path), path);
}

static void sync_dir(const char *path)
{
    char dir[ENR_STATEFILE_PATH_MAX];
    int fd;

    dir_of(path, dir, sizeof dir);
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd); /* the rename's durability; the file works without it */
        close(fd);
    }
}

/* Nameless (O_TMPFILE) where the file system can, so a process killed
 * while the file is made leaves nothing behind; else under a temporary
 * name next to path, removed on every failure. */
static int open_new(const char *path, enr_statefile_new *nf)
{
    char dir[ENR_STATEFILE_PATH_MAX];

    dir_of(path, dir, sizeof dir);
    if (snprintf(nf->tmp, sizeof nf->tmp, "%s.new.%ld", path, (long)getpid()) >=
        (int)sizeof nf->tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    nf->fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    nf->nameless = nf->fd >= 0;
    if (nf->fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
        return nf->fd;
    snprintf(nf->tmp, sizeof nf->tmp, "%s.XXXXXX", path);
    nf->fd = mkostemp(nf->tmp, O_CLOEXEC); /* mode 0600 */
    return nf->fd;
}

int enr_statefile_create(const char *path, uint64_t size, enr_statefile_new *nf, const char **why)
{
    int rc;

    nf->nameless = 0;
    nf->tmp[0] = '\0';
    if (open_new(path, nf) < 0) {
        *why = errno == ENAMETOOLONG ? "path too long" : "cannot create a file in its directory";
        nf->fd = -1;
        return -1;
    }
    rc = posix_fallocate(nf->fd, 0, (off_t)size);
    if (rc != 0) {
        *why = "no room for it on its file system";
        enr_statefile_discard(nf);
        errno = rc;
        return -1;
    }
    if (flock(nf->fd, LOCK_EX | LOCK_NB) != 0) {
        *why = "cannot lock it";
        rc = errno;
        enr_statefile_discard(nf);
        errno = rc;
        return -1;
    }
    return 0;
}

void enr_statefile_discard(enr_statefile_new *nf)
{
    int e = errno;

    if (nf->fd >= 0 && !nf->nameless && nf->tmp[0] != '\0')
        unlink(nf->tmp);
    if (nf->fd >= 0)
        close(nf->fd);
    nf->fd = -1;
    errno = e;
}

/* The nameless file linked at tmp (linkat cannot replace a name). */
static int link_at(int fd, const char *name)
{
    char self[64];

    snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    return linkat(AT_FDCWD, self, AT_FDCWD, name, AT_SYMLINK_FOLLOW);
}

static int name_it(enr_statefile_new *nf, const char *path, int replace)
{
    if (nf->nameless && !replace)
        return link_at(nf->fd, path); /* EEXIST: another daemon made one meanwhile */
    if (nf->nameless) {
        if (unlink(nf->tmp) != 0 && errno != ENOENT) /* our pid's, from a crash */
            return -1;
        if (link_at(nf->fd, nf->tmp) != 0)
            return -1;
    } else if (!replace) {
        int rc = link(nf->tmp, path), e = errno;
        unlink(nf->tmp);
        errno = e;
        return rc;
    }
    if (rename(nf->tmp, path) != 0) {
        int e = errno;
        unlink(nf->tmp);
        errno = e;
        return -1;
    }
    return 0;
}

int enr_statefile_publish(enr_statefile_new *nf, const char *path, int replace, const char **why)
{
    /* The contents on disk before the name: a file found at path is whole. */
    if (fsync(nf->fd) != 0) {
        *why = "cannot make it durable";
        enr_statefile_discard(nf);
        return -1;
    }
    if (name_it(nf, path, replace) != 0) {
        *why = errno == EEXIST ? "made meanwhile by another process" : "cannot give it its name";
        nf->tmp[0] = '\0'; /* name_it removed it */
        enr_statefile_discard(nf);
        return -1;
    }
    sync_dir(path);
    hold(nf->fd);
    return 0;
}
