/*
 * test_cache_file.c: the cache in a file.  Opened again with its entries
 * when it is this build's for these bounds and this identity; refused
 * (and replaced by an empty one, nothing of it read) when truncated,
 * zeroed, foreign, of another version, layout, size or identity, or when
 * its header's checksum or ring positions are wrong; replaced when this
 * process maps it (a reload's new cache; another process's lock, and the
 * owner, mode and links, are test_statefile's).  Writers SIGKILLed mid-put, then the file opened
 * again: every entry found is whole.  A power loss, as the disk may see
 * it (each page of the file from one moment or another, zeroed, or torn
 * between two): every lookup is a miss or an answer that was stored, and
 * writers go on.  A process killed while it makes the file leaves the
 * directory as it was: no stray file the size of the cache.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "upstream/cache.h"
#include "t.h"

#define ENTRIES 2000
#define BYTES (256u << 10)
#define KEYS 3000
#define PAGE 4096
#define WRITER_WARMUP 8 /* puts a killed writer makes before its kill is timed */

static char dir[64], path[128];
static uint8_t ident[ENR_CACHE_ID_BYTES] = {1, 2, 3};

/* Key k's answer as stored at moment e: the poster and the duration
 * both name the moment, so a record made of two moments shows. */
static void value_of(int k, int e, char *poster, size_t cap, enr_cache_val *v)
{
    int n = snprintf(poster, cap, "https://p/%d/%d/", e, k), len = 12 + (k * 37 + e) % 300;

    for (; n < len && n < (int)cap - 1; n++)
        poster[n] = (char)('a' + (k + n + e) % 26);
    poster[n] = '\0';
    memset(v, 0, sizeof *v);
    v->poster = poster;
    v->poster_len = (size_t)n;
    v->duration = k * 10 + e;
    v->has_duration = 1;
}

/* The moment (1..) whose answer got is, or 0 when it is none of them. */
static int moment_of(int k, const enr_cache_val *got, int moments)
{
    for (int e = 1; e <= moments; e++) {
        char want[512];
        enr_cache_val w;
        value_of(k, e, want, sizeof want, &w);
        if (got->has_duration && got->duration == w.duration && !got->negative &&
            got->poster_len == w.poster_len && got->poster &&
            memcmp(got->poster, w.poster, w.poster_len) == 0)
            return e;
    }
    return 0;
}

static void key_of(int k, char *id, size_t cap)
{
    snprintf(id, cap, "Key-%d", k);
}

static int put_k(enr_cache *c, int k, int e)
{
    char poster[512], id[32];
    enr_cache_val v;

    key_of(k, id, sizeof id);
    value_of(k, e, poster, sizeof poster, &v);
    return enr_cache_put(c, 1 + k % 3, id, strlen(id), &v, UINT64_MAX);
}

/* Lookups of every key: *hits, and how many were no stored answer. */
static int scan(enr_cache *c, int moments, int *hits)
{
    int bad = 0;

    *hits = 0;
    for (int k = 0; k < KEYS; k++) {
        char id[32];
        enr_cache_val v;
        key_of(k, id, sizeof id);
        if (enr_cache_lookup(c, 1 + k % 3, id, strlen(id), 1, 0, &v) != ENR_CACHE_MISS) {
            (*hits)++;
            bad += moment_of(k, &v, moments) == 0;
        }
    }
    return bad;
}

static enr_cache *open_c(const char **why)
{
    return enr_cache_open(path, ENTRIES, BYTES, ident, why);
}

static void patch(off_t off, const void *p, size_t n)
{
    int fd = open(path, O_WRONLY);

    if (fd < 0 || pwrite(fd, p, n, off) != (ssize_t)n)
        T_CHECK(0, "patch the file: %s", strerror(errno));
    if (fd >= 0)
        close(fd);
}

/* A file with entries, closed; then damaged by how, reopened: refused
 * with a reason starting with want, and the new cache empty. */
static void refused_when(const char *what, void (*how)(void), const char *want)
{
    const char *why;
    enr_cache *c = open_c(&why);
    struct stat st;
    int hits = 0;

    for (int k = 0; k < 100; k++)
        put_k(c, k, 1);
    enr_cache_free(c);
    how();
    c = open_c(&why);
    T_CHECK(c != NULL && why != NULL && strncmp(why, want, strlen(want)) == 0,
            "%s: refused (%s), saying why: %s", what, want, why ? why : "(opened)");
    T_CHECK(c != NULL && enr_cache_entries(c) == 0 && scan(c, 1, &hits) == 0 && hits == 0,
            "%s: replaced by an empty cache, nothing of the old one read", what);
    T_CHECK(stat(path, &st) == 0 && st.st_size == BYTES && (st.st_mode & 077) == 0,
            "%s: the new file is whole and the service's alone: %ld bytes, mode %o", what,
            (long)st.st_size, (unsigned)st.st_mode & 0777);
    enr_cache_free(c);
}

static void cut_half(void)
{
    T_CHECK(truncate(path, BYTES / 2) == 0, "truncate");
}

static void cut_short(void)
{
    T_CHECK(truncate(path, 100) == 0, "truncate");
}

static void zero_all(void)
{
    T_CHECK(truncate(path, 0) == 0 && truncate(path, BYTES) == 0, "zero");
}

static void foreign(void)
{
    patch(0, "\177ELF\2\1\1\0", 8);
}

static void version(void)
{
    uint32_t v = 99;
    patch(8, &v, sizeof v);
}

static void header_bit(void)
{
    uint8_t b = 0x5a;
    patch(100, &b, 1); /* inside the identity: the checksum sees it first */
}

static void test_reopen_and_refuse(void)
{
    const char *why = "";
    enr_cache *c, *d;
    uint8_t other[ENR_CACHE_ID_BYTES] = {9};
    int hits = 0, kept = 0, held = 0;
    size_t n;

    unlink(path);
    c = open_c(&why);
    T_CHECK(c != NULL && why != NULL && strcmp(why, "created") == 0, "a missing file is created");
    for (int k = 0; k < 500; k++)
        put_k(c, k, 1);
    /* What it holds is what it kept: the hash seed is drawn per file, and
     * now and then a bucket of a few ways overflows and evicts (about 1
     * run in 20 lost one or two of the 500). */
    n = enr_cache_entries(c);
    T_CHECK(scan(c, 1, &kept) == 0 && (size_t)kept == n && n >= 490,
            "500 puts: %zu entries, %d found", n, kept);
    enr_cache_free(c);
    c = open_c(&why);
    T_CHECK(c != NULL && why == NULL, "opened again as it was: %s", why ? why : "-");
    T_CHECK(enr_cache_entries(c) == n && scan(c, 1, &hits) == 0 && hits == kept,
            "its %zu entries, whole: %d hits", n, hits);
    T_CHECK(put_k(c, 600, 1) == 0 && scan(c, 1, &held) == 0 && held >= kept &&
                (size_t)held == enr_cache_entries(c),
            "and written to: %d found", held);

    /* this process holds it (a reload's new configuration): replaced,
     * another process's lock is test_statefile's */
    d = open_c(&why);
    T_CHECK(d != NULL && why != NULL && strcmp(why, "replaced: a new configuration's cache") == 0 &&
                enr_cache_entries(d) == 0,
            "a file this process maps is replaced for a new configuration (%s)", why ? why : "-");
    T_CHECK(scan(c, 1, &hits) == 0 && hits == held, "the holder keeps its own: %d", hits);
    enr_cache_free(d);
    enr_cache_free(c);

    c = enr_cache_open(path, ENTRIES, BYTES, other, &why);
    T_CHECK(c != NULL && why != NULL && strncmp(why, "another identity", 16) == 0,
            "another identity: refused: %s", why ? why : "-");
    enr_cache_free(c);
    c = enr_cache_open(path, ENTRIES, BYTES * 2, ident, &why);
    T_CHECK(c != NULL && why != NULL && strncmp(why, "another size", 12) == 0,
            "other cache_bytes: refused: %s", why ? why : "-");
    enr_cache_free(c);
    c = enr_cache_open(path, ENTRIES + 1000, BYTES, ident, &why);
    T_CHECK(c != NULL && why != NULL && strncmp(why, "another size", 12) == 0,
            "other cache_entries: refused: %s", why ? why : "-");
    enr_cache_free(c);
    unlink(path);

    refused_when("truncated to half", cut_half, "truncated or extended");
    refused_when("truncated to 100 bytes", cut_short, "truncated: shorter than its header");
    refused_when("zeroed", zero_all, "zeroed");
    refused_when("foreign magic", foreign, "foreign");
    refused_when("another version", version, "another version");
    refused_when("a flipped header byte", header_bit, "corrupt: its header's checksum");
}

/* Writers SIGKILLed at random in their puts, then the master's view
 * closed and the file opened again (a restart after a crash): every
 * entry found is whole, and puts work. */
static void test_killed_writers(void)
{
    const char *why;
    enr_cache *c;
    int hits, bad;

    unlink(path);
    c = open_c(&why);
    srandom(7);
    for (int round = 0; round < 60; round++) {
        struct timespec d = {0, 200000 + random() % 2000000};
        int go[2];
        char ch;
        pid_t p;

        /* The kill comes at a random moment of the writer's puts, not
         * before its first: on a loaded machine a child can wait longer
         * than the whole delay to run at all. */
        T_CHECK(pipe(go) == 0, "pipe");
        p = fork();
        if (p == 0) {
            close(go[0]);
            for (unsigned i = 0;; i++) {
                put_k(c, (int)((i * 7919u + (unsigned)round * 131u) % KEYS), 1);
                if (i == WRITER_WARMUP)
                    (void)!write(go[1], "w", 1);
            }
        }
        close(go[1]);
        T_CHECK(read(go[0], &ch, 1) == 1, "round %d: the writer is writing", round);
        close(go[0]);
        nanosleep(&d, NULL);
        kill(p, SIGKILL);
        waitpid(p, NULL, 0);
    }
    enr_cache_free(c);
    c = open_c(&why);
    T_CHECK(c != NULL && why == NULL, "opened again after the kills: %s", why ? why : "-");
    bad = scan(c, 1, &hits);
    T_CHECK(hits > 100 && bad == 0, "every entry found is whole: %d hits, %d not stored", hits,
            bad);
    T_CHECK(put_k(c, 1, 1) == 0, "a put works: the lock made anew, what was torn repaired");
    bad = scan(c, 1, &hits);
    T_CHECK(hits > 100 && bad == 0, "and after the repair: %d hits, %d not stored", hits, bad);
    enr_cache_free(c);
}

static int read_all(const char *p, char *buf, size_t n)
{
    int fd = open(p, O_RDONLY);
    ssize_t got = fd >= 0 ? pread(fd, buf, n, 0) : -1;

    if (fd >= 0)
        close(fd);
    return got == (ssize_t)n ? 0 : -1;
}

/* The disk after a power loss: each page of the file as of moment A or
 * moment B, zeroed (never written back), or torn between A and B at a
 * sector.  The header's page is A's or B's whole (its fields fit in a
 * sector). */
static void test_power_loss(void)
{
    static char a[BYTES], b[BYTES], img[BYTES];
    const char *why;
    enr_cache *c;
    int hits, bad, worst = 0, total = 0, fd, base;

    /* what the bounds hold of the same puts, in a cache that lost nothing */
    c = enr_cache_new(ENTRIES, BYTES);
    for (int k = 0; k < KEYS; k++)
        put_k(c, k, 2);
    scan(c, 2, &base);
    enr_cache_free(c);

    for (int trial = 0; trial < 12; trial++) {
        unlink(path);
        c = open_c(&why);
        srandom((unsigned)trial + 1);
        for (int k = 0; k < KEYS; k++)
            put_k(c, k, 1);
        T_CHECK(read_all(path, a, BYTES) == 0, "moment A");
        for (int i = 0; i < KEYS; i++)
            put_k(c, (int)(random() % KEYS), 2);
        T_CHECK(read_all(path, b, BYTES) == 0, "moment B");
        enr_cache_free(c);
        for (size_t pg = 0; pg < BYTES / PAGE; pg++) {
            char *dst = img + pg * PAGE;
            long r = pg == 0 ? random() % 2 : random() % 5;
            if (r == 0)
                memcpy(dst, a + pg * PAGE, PAGE);
            else if (r == 1)
                memcpy(dst, b + pg * PAGE, PAGE);
            else if (r == 2)
                memset(dst, 0, PAGE);
            else {
                size_t cut = (size_t)(1 + random() % 7) * 512;
                memcpy(dst, (r == 3 ? a : b) + pg * PAGE, cut);
                memcpy(dst + cut, (r == 3 ? b : a) + pg * PAGE + cut, PAGE - cut);
            }
        }
        fd = open(path, O_WRONLY | O_TRUNC);
        T_CHECK(fd >= 0 && write(fd, img, BYTES) == (ssize_t)BYTES, "the image written");
        close(fd);
        c = open_c(&why);
        T_CHECK(c != NULL && why == NULL, "trial %d: the file is opened: %s", trial,
                why ? why : "-");
        bad = scan(c, 2, &hits);
        worst = bad > worst ? bad : worst;
        total += hits;
        for (int k = 0; k < KEYS; k++)
            put_k(c, k, 2); /* writers go on over whatever the ring holds */
        bad += scan(c, 2, &hits);
        T_CHECK(hits >= base - base / 10,
                "trial %d: writers go on: %d hits after, as in a cache never lost (%d)", trial,
                hits, base);
        worst = bad > worst ? bad : worst;
        enr_cache_free(c);
    }
    T_CHECK(worst == 0 && total > 0,
            "after a power loss every lookup is a miss or a stored answer: %d hits before the "
            "writes, %d answers never stored",
            total, worst);
}

/* The names in dir other than "." and "..". */
static int dir_entries(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    while (d != NULL && (e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    if (d != NULL)
        closedir(d);
    return n;
}

/* A process killed while it allocates a new file (here by SIGXFSZ: its
 * file size limit is below the cache's, which the kernel enforces in
 * fallocate) leaves nothing in the directory, and the next open makes
 * the file. */
static void test_killed_while_made(void)
{
    const char *why;
    enr_cache *c;
    int st = 0;
    pid_t pid;

    unlink(path);
    T_CHECK(dir_entries() == 0, "the directory starts empty (%d)", dir_entries());
    pid = fork();
    if (pid == 0) {
        struct rlimit rl = {PAGE, PAGE};
        setrlimit(RLIMIT_FSIZE, &rl);
        open_c(&why);
        _exit(0);
    }
    T_CHECK(pid > 0 && waitpid(pid, &st, 0) == pid, "the child ran");
    T_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGXFSZ, "the child died making the file (%#x)", st);
    T_CHECK(dir_entries() == 0, "a process killed making the file leaves no file behind (%d)",
            dir_entries());
    c = open_c(&why);
    T_CHECK(c != NULL && why && strcmp(why, "created") == 0 && dir_entries() == 1,
            "the next open makes it (%s, %d names)", why ? why : "-", dir_entries());
    enr_cache_free(c);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    snprintf(dir, sizeof dir, "/tmp/enr-cachefile-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return 1;
    snprintf(path, sizeof path, "%s/cache", dir);
    test_reopen_and_refuse();
    test_killed_writers();
    test_power_loss();
    test_killed_while_made();
    unlink(path);
    rmdir(dir);
    T_DONE();
}
