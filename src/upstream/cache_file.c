/*
 * cache_file.c: the host's cache in a file (cache_file): checked before
 * any byte of it is used, replaced whole when it is not this build's
 * cache for this configuration (see cache.h, docs/upstream.md).
 *
 * A file is taken only when its header says, field by field, what this
 * build would write for the configured cache_entries, cache_bytes and
 * upstream identity (magic, version, the sizes of the header, a slot and
 * a record, the ways, the bounds, the file's size, the identity's digest,
 * a checksum over all of it) and its ring positions are in bounds.
 * Anything else is refused with one log line saying why, and an empty
 * file takes its place: made without a name (O_TMPFILE; a temporary
 * name where the file system cannot), its blocks allocated (a page
 * written later can never hit a full disk: that would be SIGBUS in a
 * worker), synced, then named and renamed over the path, so a crash
 * while making it leaves the old file or the new one, never half of one,
 * and no stray file of the cache's size.
 *
 * The master holds an exclusive flock on the file for as long as any of
 * its processes maps it (the children inherit the descriptor): a file
 * whose lock is free has no writer left, so its robust mutex is made anew
 * (one held by a process of another boot would never be given back) and
 * the first write of the run repairs what a writer killed mid-put left
 * (cache_int.h: dirty).  A lock still held is a dead master's children on
 * their way out (they die with it), waited for ENR_CACHE_OPEN_WAIT_MS, or
 * another daemon on the same file, which keeps it: this one gets a new one.
 */
#include "upstream/cache.h"
#include "upstream/cache_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"

#define OPEN_POLL_MS 10
#define PATH_BUF 4096 /* PATH_MAX */

/* Why the header h of a file of file_bytes is not the cache want
 * describes, or NULL when it is. */
static const char *refusal(const enr_cache *h, uint64_t file_bytes, const enr_cache *want,
                           const uint8_t *identity)
{
    static const unsigned char zero[offsetof(enr_cache, layout_sum)];

    if (memcmp(h, zero, sizeof zero) == 0)
        return "zeroed: no header";
    if (h->magic != ENR_CACHE_MAGIC)
        return "foreign: not an enrichd cache (magic)";
    if (h->version != ENR_CACHE_VERSION)
        return "another version of the file format";
    if (h->layout_sum != enr_cache_sum(h->seed, h, offsetof(enr_cache, layout_sum)))
        return "corrupt: its header's checksum does not match";
    if (h->hdr_size != want->hdr_size || h->slot_size != want->slot_size ||
        h->rec_size != want->rec_size || h->ways != want->ways || h->index_off != want->index_off)
        return "another layout: header, slot or record size, or ways";
    if (h->map_bytes != want->map_bytes || h->max_entries != want->max_entries ||
        h->nbuckets != want->nbuckets || h->ring_off != want->ring_off ||
        h->ring_size != want->ring_size)
        return "another size: made for other cache_entries or cache_bytes";
    if (file_bytes != h->map_bytes)
        return "truncated or extended: its size is not its header's";
    if (memcmp(h->identity, identity, ENR_CACHE_ID_BYTES) != 0)
        return "another identity: made for other upstream settings or keys";
    if (h->tail > h->head || h->head - h->tail > h->ring_size)
        return "corrupt: ring positions out of bounds";
    return NULL;
}

/* The lock that says nobody else maps the file, waited for a while. */
static int take_lock(int fd)
{
    for (unsigned waited = 0;; waited += OPEN_POLL_MS) {
        struct timespec ts = {0, OPEN_POLL_MS * 1000000L};
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
            return 0;
        if (errno != EWOULDBLOCK || waited >= ENR_CACHE_OPEN_WAIT_MS)
            return -1;
        nanosleep(&ts, NULL);
    }
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
    char dir[PATH_BUF];
    int fd;

    dir_of(path, dir, sizeof dir);
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd); /* the rename's durability; the cache works without it */
        close(fd);
    }
}

/* The file being made: nameless (O_TMPFILE) where the file system can,
 * so a process killed while it is allocated leaves nothing behind; else
 * under a temporary name next to path, unlinked on every failure.  *tmp
 * is the name it takes before the rename (a nameless one is linked
 * there only once whole). */
static int open_new(const char *path, char *tmp, size_t n, int *nameless)
{
    char dir[PATH_BUF];
    int fd;

    dir_of(path, dir, sizeof dir);
    if (snprintf(tmp, n, "%s.new.%ld", path, (long)getpid()) >= (int)n) {
        errno = ENAMETOOLONG;
        return -1;
    }
    fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    *nameless = fd >= 0;
    if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
        return fd;
    snprintf(tmp, n, "%s.XXXXXX", path);
    return mkostemp(tmp, O_CLOEXEC); /* mode 0600: the answers are the provider's data */
}

/* Gives the whole new file the name path: a nameless one is linked at
 * tmp first (linkat cannot replace a name), then renamed over path. */
static int publish(int fd, const char *tmp, const char *path, int nameless)
{
    char self[64];

    if (nameless) {
        snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
        if (unlink(tmp) != 0 && errno != ENOENT) /* our pid's, from a crash */
            return -1;
        if (linkat(AT_FDCWD, self, AT_FDCWD, tmp, AT_SYMLINK_FOLLOW) != 0)
            return -1;
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        errno = e;
        return -1;
    }
    return 0;
}

/* A new, empty file at path; NULL, errno and *why the failing step. */
static enr_cache *create(const char *path, const enr_cache *want, const uint8_t *identity,
                         const char **why)
{
    char tmp[PATH_BUF + 32];
    enr_cache *c;
    void *p;
    int fd, rc, e, nameless;

    fd = open_new(path, tmp, sizeof tmp, &nameless);
    if (fd < 0) {
        *why = errno == ENAMETOOLONG ? "path too long" : "cannot create a file in its directory";
        return NULL;
    }
    rc = posix_fallocate(fd, 0, (off_t)want->map_bytes);
    if (rc != 0) {
        *why = "no room for it on its file system";
        errno = rc;
        goto fail;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        *why = "cannot lock it";
        goto fail;
    }
    p = mmap(NULL, want->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        *why = "cannot map it";
        goto fail;
    }
    c = p; /* its blocks read as zeros: every slot unused, head = tail = 0 */
    memcpy(c, want, offsetof(enr_cache, seed));
    if (getrandom(&c->seed, sizeof c->seed, GRND_NONBLOCK) != (ssize_t)sizeof c->seed) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        c->seed =
            (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)ts.tv_sec ^ (uint64_t)getpid();
    }
    memcpy(c->identity, identity, ENR_CACHE_ID_BYTES);
    c->layout_sum = enr_cache_sum(c->seed, c, offsetof(enr_cache, layout_sum));
    rc = enr_cache_init_run(c, fd, 0);
    /* The header on disk before the name: a file found at path is whole. */
    if (rc != 0 || msync(p, want->index_off, MS_SYNC) != 0 || fsync(fd) != 0 ||
        publish(fd, tmp, path, nameless) != 0) {
        e = rc != 0 ? rc : errno;
        *why = "cannot make it durable or give it its name";
        munmap(p, want->map_bytes);
        errno = e;
        goto fail;
    }
    sync_dir(path);
    return c;
fail:
    e = errno;
    if (!nameless)
        unlink(tmp);
    close(fd);
    errno = e;
    return NULL;
}

/* The file at fd, checked: mapped when it is the cache want describes
 * and nobody else maps it; else NULL and *why the refusal. */
static enr_cache *open_existing(int fd, const enr_cache *want, const uint8_t *identity,
                                const char **why)
{
    enr_cache h;
    struct stat st;
    void *p;

    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        *why = "not a regular file";
        return NULL;
    }
    if ((uint64_t)st.st_size < sizeof h || pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h) {
        *why = "truncated: shorter than its header";
        return NULL;
    }
    *why = refusal(&h, (uint64_t)st.st_size, want, identity);
    if (*why != NULL)
        return NULL;
    if (take_lock(fd) != 0) {
        *why = "in use by another process";
        return NULL;
    }
    p = mmap(NULL, want->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED || enr_cache_init_run(p, fd, 1) != 0) {
        if (p != MAP_FAILED)
            munmap(p, want->map_bytes);
        *why = "cannot map it";
        return NULL;
    }
    return p;
}

enr_cache *enr_cache_open(const char *path, size_t max_entries, size_t max_bytes,
                          const uint8_t identity[ENR_CACHE_ID_BYTES], const char **why)
{
    char q[2 * PATH_BUF], qr[160];
    enr_cache want, *c = NULL;
    int fd;

    *why = NULL;
    memset(&want, 0, sizeof want);
    enr_cache_layout(max_entries, max_bytes, &want);
    if (want.max_entries == 0 || want.ring_size == 0)
        return enr_cache_new(0, 0); /* disabled: nothing to keep */
    enr_log_quote(q, sizeof q, path);
    fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) {
        c = open_existing(fd, &want, identity, why);
        if (c != NULL) {
            enr_log(ENR_LOG_INFO, "upstream cache file opened", "path=%s entries=%llu", q,
                    (unsigned long long)atomic_load(&c->entries));
            return c;
        }
        close(fd);
        enr_log(ENR_LOG_WARN, "upstream cache file refused, replaced by an empty one",
                "path=%s reason=%s", q, enr_log_quote(qr, sizeof qr, *why));
    } else if (errno == ENOENT) {
        *why = "created";
    } else {
        *why = "cannot be opened";
        enr_log(ENR_LOG_WARN, "upstream cache file refused, replaced by an empty one",
                "path=%s reason=%s error=%s", q, enr_log_quote(qr, sizeof qr, *why),
                enr_log_errno(errno));
    }
    c = create(path, &want, identity, why);
    if (c != NULL && strcmp(*why, "created") == 0)
        enr_log(ENR_LOG_INFO, "upstream cache file created", "path=%s bytes=%llu", q,
                (unsigned long long)want.map_bytes);
    return c;
}
