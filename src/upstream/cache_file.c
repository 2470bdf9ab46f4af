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
 * file takes its place.  Finding, trusting, locking and replacing the
 * file are base/statefile.c's, as for every file of the state directory:
 * a file that breaks its rule (owner, mode, links, a symbolic link) is
 * refused and never touched, and enr_cache_open fails (errno EPERM), as
 * it does (EBUSY) for a file another daemon holds: the caller refuses to
 * start rather than run without the file it was told to keep, or with a
 * copy of it.
 *
 * The master holds an exclusive flock on the file for as long as any of
 * its processes maps it (the children inherit the descriptor): a file
 * whose lock is free has no writer left, so its robust mutex is made anew
 * (one held by a process of another boot would never be given back) and
 * the first write of the run repairs what a writer killed mid-put left
 * (cache_int.h: dirty).  A lock still held is a dead master's children on
 * their way out (they die with it), waited for ENR_STATEFILE_WAIT_MS, or
 * another daemon on the same file, which keeps it: this one is refused.
 * The master itself replaces its own file when a reload needs a new cache
 * (another identity or layout): its old workers keep the old one, now
 * nameless, until they exit.
 *
 * What is empty here is the cache's own choice: an empty cache_file means
 * memory only (enr_cache_new), never a default path; budget_file's empty
 * value means the state directory's (budget.c).
 */
#include "upstream/cache.h"
#include "upstream/cache_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/statefile.h"

#define PATH_BUF ENR_STATEFILE_PATH_MAX

_Static_assert(ENR_CACHE_OPEN_WAIT_MS == ENR_STATEFILE_WAIT_MS, "one wait for a dead master");

/* The reason of a refusal enr_cache_open returns (the master's only). */
static char g_why[ENR_STATEFILE_WHY_MAX];

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

/* A new, empty file at path (over the one there when replace); NULL,
 * errno and *why the failing step. */
static enr_cache *create(const char *path, const enr_cache *want, const uint8_t *identity,
                         int replace, const char **why)
{
    enr_statefile_new nf;
    enr_cache *c;
    void *p;
    int rc;

    if (enr_statefile_create(path, want->map_bytes, &nf, why) != 0)
        return NULL;
    p = mmap(NULL, want->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, nf.fd, 0);
    if (p == MAP_FAILED) {
        *why = "cannot map it";
        enr_statefile_discard(&nf);
        return NULL;
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
    rc = enr_cache_init_run(c, nf.fd, 0);
    if (rc != 0 || msync(p, want->index_off, MS_SYNC) != 0) {
        *why = "cannot make it durable";
        munmap(p, want->map_bytes);
        enr_statefile_discard(&nf);
        errno = rc != 0 ? rc : errno;
        return NULL;
    }
    if (enr_statefile_publish(&nf, path, replace, why) != 0) {
        int e = errno;
        munmap(p, want->map_bytes);
        errno = e;
        return NULL;
    }
    return c;
}

/* The file at fd (trusted and locked), checked: mapped when it is the
 * cache want describes; else NULL and *why the refusal. */
static enr_cache *open_existing(int fd, const enr_cache *want, const uint8_t *identity,
                                const char **why)
{
    enr_cache h;
    struct stat st;
    void *p;

    if (fstat(fd, &st) != 0) {
        *why = "cannot be read";
        return NULL;
    }
    if ((uint64_t)st.st_size < sizeof h || pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h) {
        *why = "truncated: shorter than its header";
        return NULL;
    }
    *why = refusal(&h, (uint64_t)st.st_size, want, identity);
    if (*why != NULL)
        return NULL;
    p = mmap(NULL, want->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED || enr_cache_init_run(p, fd, 1) != 0) {
        if (p != MAP_FAILED)
            munmap(p, want->map_bytes);
        *why = "cannot map it";
        return NULL;
    }
    return p;
}

/* A file that may not be used, whatever its contents (statefile.h):
 * refused, the log naming it and why; NULL with errno kept. */
static enr_cache *refused(const char *q, int found, const char **why)
{
    char qr[ENR_STATEFILE_WHY_MAX + 8];
    int e = errno;

    *why = g_why;
    enr_log(ENR_LOG_ERROR,
            found == ENR_SF_BUSY ? "upstream cache file refused: another daemon uses it"
                                 : "upstream cache file refused: it is not enrichd's to use",
            "path=%s reason=%s", q, enr_log_quote(qr, sizeof qr, g_why));
    errno = e;
    return NULL;
}

enr_cache *enr_cache_open(const char *path, size_t max_entries, size_t max_bytes,
                          const uint8_t identity[ENR_CACHE_ID_BYTES], const char **why)
{
    char q[2 * PATH_BUF], qr[160];
    enr_cache want, *c = NULL;
    int fd = -1, found;

    *why = NULL;
    memset(&want, 0, sizeof want);
    enr_cache_layout(max_entries, max_bytes, &want);
    if (want.max_entries == 0 || want.ring_size == 0)
        return enr_cache_new(0, 0); /* disabled: nothing to keep */
    enr_log_quote(q, sizeof q, path);
    found = enr_statefile_open(path, &fd, g_why, sizeof g_why);
    if (found == ENR_SF_REFUSED || found == ENR_SF_BUSY || found == ENR_SF_ERROR)
        return refused(q, found, why);
    if (found == ENR_SF_OPENED) {
        c = open_existing(fd, &want, identity, why);
        if (c != NULL) {
            enr_log(ENR_LOG_INFO, "upstream cache file opened", "path=%s entries=%llu", q,
                    (unsigned long long)atomic_load(&c->entries));
            return c;
        }
        enr_log(ENR_LOG_WARN, "upstream cache file refused, replaced by an empty one",
                "path=%s reason=%s", q, enr_log_quote(qr, sizeof qr, *why));
    } else if (found == ENR_SF_OURS) {
        *why = "replaced: a new configuration's cache";
    } else {
        *why = "created";
    }
    c = create(path, &want, identity, found != ENR_SF_ABSENT, why);
    enr_statefile_close(fd); /* the old file's lock, once the new one has the name */
    if (c == NULL && errno == EEXIST)
        errno = EBUSY; /* another daemon made it meanwhile: it is that one's */
    if (c != NULL && strcmp(*why, "created") == 0)
        enr_log(ENR_LOG_INFO, "upstream cache file created", "path=%s bytes=%llu", q,
                (unsigned long long)want.map_bytes);
    return c;
}
