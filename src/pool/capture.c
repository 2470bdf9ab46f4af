/*
 * capture.c: sampled request bodies to trace files (capture.h).
 *
 * Invariants: the worker's side (enr_capture_offer) never blocks on the
 * disk and never allocates more than capture_queue_bytes in total for
 * queued samples; only the writer thread touches the file; a line is
 * written whole or the file is cut back to the last whole line, so a
 * full disk leaves a valid trace; the thread blocks every signal (they
 * are the worker's); the directory holds at most two files per slot,
 * each at most half the slot's share of capture_max_bytes (a file that
 * cannot be rotated takes no more samples), and no sample older than
 * capture_max_age_s (give or take a CAPTURE_AGE_TICK): a file is rotated
 * once its oldest sample is half that old, and the rotated one removed
 * once its oldest is that old, checked before each write and on a timer
 * while no sample comes.  Files are mode 0640, in capture_group when one
 * is set: captured bodies are production data.
 *
 * Nothing on disk is trusted (safedir.h): the directory is opened once
 * and checked (owner, mode) before every sample; the files are opened
 * under its descriptor without following links and must be regular files
 * of ours with one link, else the sample is dropped.  A directory that is
 * gone (removed, or another one in its place) is noticed before the
 * write, so a sample is counted as written only when it reached a file
 * in the directory; samples are dropped and counted (cap_dropped_nodir)
 * until it is back, then it is opened again.  Each kind of trouble is
 * said once when it starts, then at most once a CAPTURE_LOG_INTERVAL_MS
 * with the count dropped meanwhile.
 */
#include "pool/capture.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/safedir.h"
#include "base/utf8.h"

#define CAPTURE_FILE_MODE 0640
/* The age bound is checked this often while no sample comes: a
 * sixteenth of capture_max_age_s, within these bounds. */
#define CAPTURE_AGE_TICK_MIN_MS 250
#define CAPTURE_AGE_TICK_MAX_MS 60000
/* A trouble that goes on is said again at most this often. */
#define CAPTURE_LOG_INTERVAL_MS 60000

/* What went wrong with a sample, for the counters and the log. */
enum trouble { T_NONE, T_NODIR, T_DIR, T_FILE, T_WRITE, T_ROTATE, T_MEMORY };

typedef struct item {
    struct item *next;
    uint64_t arrival_us;
    int json_ok; /* the engine read the body as JSON */
    size_t len;
    char data[];
} item;

struct enr_capture {
    enr_sb_slot *sb;
    double sample;
    size_t queue_max, queued;
    uint64_t file_max;            /* rotate past this */
    uint64_t max_age_us, tick_ms; /* 0: no age bound */
    gid_t gid;                    /* the files' group, when have_gid */
    int have_gid;
    char dir[ENR_PATH_MAX];
    char name[32], rotated[40]; /* under dir */
    uint64_t rng;

    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    item *head, *tail;
    int stop;

    /* the writer thread's own */
    int dfd, fd;
    dev_t dir_dev;
    ino_t dir_ino;
    int dir_lost; /* the directory went away: say so when it is back */
    uint64_t file_size;
    uint64_t cur_oldest_us, rot_oldest_us; /* the files' oldest samples, 0: none */
    int rot_known;                         /* rot_oldest_us read from the disk */
    enr_buf line;
    int last_trouble;
    uint64_t said_ms, held_back; /* the last line said, samples dropped since */
};

/* xorshift64*: sampling needs no quality beyond "about this share". */
static double next_unit(enr_capture *c)
{
    c->rng ^= c->rng >> 12;
    c->rng ^= c->rng << 25;
    c->rng ^= c->rng >> 27;
    return (double)((c->rng * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

/* A body the trace can hold as is: JSON the engine read, starting with
 * its array (no BOM), on one line, in UTF-8 (so any JSON tool reads the
 * capture too). */
static int verbatim_ok(const item *it)
{
    const unsigned char *s = (const unsigned char *)it->data;

    if (!it->json_ok || it->len == 0 || s[0] != '[')
        return 0;
    for (size_t i = 0; i < it->len;) {
        int k = 1;
        if (s[i] == '\n' || s[i] == '\r' ||
            (s[i] >= 0x80 && (k = enr_utf8_seq(s + i, s + it->len)) <= 0))
            return 0;
        i += (size_t)k;
    }
    return 1;
}

/* The body as a JSON string in the trace's raw form: valid UTF-8 as is,
 * invalid bytes as \udc80..\udcff (the trace reader turns them back into
 * the bytes), so any body round-trips byte for byte. */
static void put_raw_string(enr_buf *b, const unsigned char *s, size_t n)
{
    enr_buf_putc(b, '"');
    for (size_t i = 0; i < n;) {
        unsigned char ch = s[i];
        int k;
        if (ch < 0x80) {
            if (ch == '"' || ch == '\\') {
                enr_buf_putc(b, '\\');
                enr_buf_putc(b, (char)ch);
            } else if (ch < 0x20 || ch == 0x7f) {
                enr_buf_printf(b, "\\u%04x", ch);
            } else {
                enr_buf_putc(b, (char)ch);
            }
            i++;
            continue;
        }
        k = enr_utf8_seq(s + i, s + n);
        if (k <= 0) {
            enr_buf_printf(b, "\\udc%02x", ch);
            i++;
        } else {
            enr_buf_append(b, s + i, (size_t)k);
            i += (size_t)k;
        }
    }
    enr_buf_putc(b, '"');
}

static void format_line(enr_buf *b, const item *it)
{
    enr_buf_reset(b);
    enr_buf_printf(b, "{\"ts\":%" PRIu64 ".%06" PRIu64 ",\"payload\":", it->arrival_us / 1000000,
                   it->arrival_us % 1000000);
    if (verbatim_ok(it))
        enr_buf_append(b, it->data, it->len);
    else
        put_raw_string(b, (const unsigned char *)it->data, it->len);
    enr_buf_lit(b, "}\n");
}

/* The arrival time of a trace file's first line (its oldest sample), or
 * its modification time when that cannot be read; 0 for no file or an
 * empty one. */
static uint64_t file_oldest_us(int dfd, const char *name)
{
    char head[64];
    struct stat st;
    ssize_t n;
    int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
    uint64_t us = 0;

    if (fd < 0)
        return 0;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
        us = (uint64_t)st.st_mtim.tv_sec * 1000000u + (uint64_t)st.st_mtim.tv_nsec / 1000u;
        n = pread(fd, head, sizeof head - 1, 0);
        if (n > 7) {
            char *end;
            double ts;
            head[n] = '\0';
            ts = strncmp(head, "{\"ts\":", 6) == 0 ? strtod(head + 6, &end) : 0.0;
            if (ts > 0.0 && ts < 1e11)
                us = (uint64_t)(ts * 1e6);
        }
    }
    close(fd);
    return us;
}

static void close_file(enr_capture *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
}

static void close_dir(enr_capture *c)
{
    close_file(c);
    if (c->dfd >= 0)
        close(c->dfd);
    c->dfd = -1;
}

/* The directory, open and checked, and still the one at its path.
 * Returns T_NONE, T_NODIR (gone) or T_DIR (there but not safe), with the
 * reason in why. */
static int ensure_dir(enr_capture *c, char *why, size_t whylen)
{
    struct stat st, at;

    if (c->dfd >= 0) {
        /* Removed (no links left), or another directory at the path:
         * what is written now would never be found. */
        if (fstat(c->dfd, &st) == 0 && st.st_nlink > 0 && stat(c->dir, &at) == 0 &&
            at.st_dev == c->dir_dev && at.st_ino == c->dir_ino) {
            /* Its owner or mode may have changed since it was opened. */
            if (enr_safedir_check(c->dfd, c->dir, why, whylen) == 0)
                return T_NONE;
            close_dir(c);
            return T_DIR;
        }
        close_dir(c);
        c->dir_lost = 1; /* the one at the path now, if any, is opened below */
    }
    c->dfd = enr_safedir_open(c->dir, why, whylen);
    if (c->dfd < 0) {
        if (errno == EPERM)
            return T_DIR;
        c->dir_lost = 1;
        return T_NODIR;
    }
    if (fstat(c->dfd, &st) != 0) {
        snprintf(why, whylen, "\"%s\": %s", c->dir, strerror(errno));
        close_dir(c);
        c->dir_lost = 1;
        return T_NODIR;
    }
    c->dir_dev = st.st_dev;
    c->dir_ino = st.st_ino;
    if (c->dir_lost) {
        char q[ENR_PATH_MAX + 8];
        c->dir_lost = 0;
        enr_log(ENR_LOG_INFO, "capture directory back", "dir=%s",
                enr_log_quote(q, sizeof q, c->dir));
    }
    return T_NONE;
}

/* The file to append to, opened under the directory without following a
 * link; a file someone else made (or linked) there is never written. */
static int open_file(enr_capture *c, char *why, size_t whylen)
{
    struct stat st;
    char what[96];

    /* O_NONBLOCK: a FIFO in the file's place must not hang the thread. */
    c->fd = openat(c->dfd, c->name,
                   O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK,
                   CAPTURE_FILE_MODE);
    if (c->fd < 0) {
        snprintf(why, whylen, "%s/%s: %s", c->dir, c->name,
                 errno == ELOOP ? "a symbolic link: not followed" : strerror(errno));
        return T_FILE;
    }
    if (fstat(c->fd, &st) != 0 || enr_safedir_file_ok(&st, what, sizeof what) != 0) {
        snprintf(why, whylen, "%s/%s: %s", c->dir, c->name, what);
        close_file(c);
        return T_FILE;
    }
    /* Exactly 0640: opened wider by someone, no one else may read
     * production bodies; made narrower by the umask (the unit's 0077),
     * capture_group could not read them. */
    if ((st.st_mode & 07777) != CAPTURE_FILE_MODE && fchmod(c->fd, CAPTURE_FILE_MODE) != 0) {
        snprintf(why, whylen, "%s/%s: chmod: %s", c->dir, c->name, strerror(errno));
        close_file(c);
        return T_FILE;
    }
    /* The group that may read them (capture_group), before a byte is in. */
    if (c->have_gid && st.st_gid != c->gid && fchown(c->fd, (uid_t)-1, c->gid) != 0) {
        snprintf(why, whylen, "%s/%s: chown to gid %ld: %s", c->dir, c->name, (long)c->gid,
                 strerror(errno));
        close_file(c);
        return T_FILE;
    }
    c->file_size = (uint64_t)st.st_size;
    c->cur_oldest_us = c->file_size ? file_oldest_us(c->dfd, c->name) : 0;
    return T_NONE;
}

/* The current file becomes the rotated one (the old rotated one goes). */
static int rotate(enr_capture *c, char *why, size_t whylen)
{
    close_file(c);
    if (renameat(c->dfd, c->name, c->dfd, c->rotated) != 0) {
        snprintf(why, whylen, "%s/%s to %s: %s", c->dir, c->name, c->rotated, strerror(errno));
        return T_ROTATE;
    }
    c->rot_oldest_us = c->cur_oldest_us;
    c->rot_known = 1;
    c->cur_oldest_us = 0;
    return T_NONE;
}

/* The age bound (capture_max_age_s) at wall time now: the rotated file
 * goes once its oldest sample is max_age old, the current one is rotated
 * once its oldest is half that, so none on disk is older than max_age.
 * The directory is open. */
static int expire(enr_capture *c, uint64_t now, char *why, size_t whylen)
{
    if (c->max_age_us == 0)
        return T_NONE;
    if (!c->rot_known) {
        c->rot_oldest_us = file_oldest_us(c->dfd, c->rotated);
        c->rot_known = 1;
    }
    if (c->fd < 0 && c->cur_oldest_us == 0)
        c->cur_oldest_us = file_oldest_us(c->dfd, c->name);
    if (c->cur_oldest_us && now >= c->cur_oldest_us + c->max_age_us / 2) {
        int t = rotate(c, why, whylen);
        if (t != T_NONE)
            return t;
    }
    if (c->rot_oldest_us && now >= c->rot_oldest_us + c->max_age_us) {
        if (unlinkat(c->dfd, c->rotated, 0) != 0 && errno != ENOENT) {
            snprintf(why, whylen, "%s/%s: unlink: %s", c->dir, c->rotated, strerror(errno));
            return T_ROTATE;
        }
        c->rot_oldest_us = 0;
    }
    return T_NONE;
}

/* The open file, full or old ones rotated first. */
static int ensure_file(enr_capture *c, char *why, size_t whylen)
{
    struct stat st;
    int t;

    if (c->fd >= 0 && (fstat(c->fd, &st) != 0 || st.st_nlink == 0)) {
        close_file(c); /* removed under us: a new one, or the sample is lost */
        c->cur_oldest_us = 0;
    }
    if ((t = expire(c, enr_wall_us(), why, whylen)) != T_NONE)
        return t;
    if (c->fd < 0 && (t = open_file(c, why, whylen)) != T_NONE)
        return t;
    if (c->file_size < c->file_max)
        return T_NONE;
    if ((t = rotate(c, why, whylen)) != T_NONE)
        return t; /* the file is full: no more samples until it rotates */
    return open_file(c, why, whylen);
}

/* Writes one line whole, or cuts the file back to where it was. */
static int write_line(enr_capture *c, const enr_buf *b, uint64_t arrival_us, char *why,
                      size_t whylen)
{
    size_t off = 0;
    int t;

    if ((t = ensure_dir(c, why, whylen)) != T_NONE || (t = ensure_file(c, why, whylen)) != T_NONE)
        return t;
    while (off < b->len) {
        ssize_t n = write(c->fd, b->data + off, b->len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int e = n < 0 ? errno : EIO;
            if (off > 0 && ftruncate(c->fd, (off_t)c->file_size) != 0)
                enr_log(ENR_LOG_WARN, "capture truncate failed", "error=%s", enr_log_errno(errno));
            snprintf(why, whylen, "%s/%s: %s", c->dir, c->name, strerror(e));
            return T_WRITE;
        }
        off += (size_t)n;
    }
    if (c->file_size == 0 || c->cur_oldest_us == 0)
        c->cur_oldest_us = arrival_us;
    c->file_size += b->len;
    return T_NONE;
}

/* One line when a kind of trouble starts, then at most one a
 * CAPTURE_LOG_INTERVAL_MS while it lasts, with what was dropped since. */
static void complain(enr_capture *c, int trouble, const char *why)
{
    static const char *const what[] = {
        [T_NODIR] = "capture directory gone: samples dropped until it is back",
        [T_DIR] = "capture directory refused: samples dropped",
        [T_FILE] = "capture file refused: samples dropped",
        [T_WRITE] = "capture write failed: sample dropped",
        [T_ROTATE] = "capture rotate failed: samples dropped until it can",
        [T_MEMORY] = "capture sample dropped: out of memory",
    };
    uint64_t now = enr_mono_ms();
    char q[ENR_PATH_MAX + 200];

    c->held_back++;
    if (trouble == c->last_trouble && now < c->said_ms + CAPTURE_LOG_INTERVAL_MS)
        return;
    enr_log(ENR_LOG_WARN, what[trouble], "error=%s dropped=%" PRIu64,
            enr_log_quote(q, sizeof q, why), c->held_back);
    c->last_trouble = trouble;
    c->said_ms = now;
    c->held_back = 0;
}

/* While no sample comes: the age bound still holds. */
static void idle_expire(enr_capture *c)
{
    char why[ENR_PATH_MAX + 160];
    int t;

    if (ensure_dir(c, why, sizeof why) != T_NONE)
        return; /* said by the next sample's write */
    if ((t = expire(c, enr_wall_us(), why, sizeof why)) != T_NONE)
        complain(c, t, why);
}

static void *writer(void *arg)
{
    enr_capture *c = arg;
    sigset_t all;
    char why[ENR_PATH_MAX + 160];
    int trouble;

    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    for (;;) {
        item *it;
        pthread_mutex_lock(&c->lock);
        while (c->head == NULL && !c->stop) {
            struct timespec until;
            if (c->tick_ms == 0) {
                pthread_cond_wait(&c->wake, &c->lock);
                continue;
            }
            clock_gettime(CLOCK_MONOTONIC, &until);
            until.tv_sec += (time_t)(c->tick_ms / 1000);
            until.tv_nsec += (long)(c->tick_ms % 1000) * 1000000L;
            if (until.tv_nsec >= 1000000000L) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000L;
            }
            if (pthread_cond_timedwait(&c->wake, &c->lock, &until) == ETIMEDOUT &&
                c->head == NULL && !c->stop) {
                pthread_mutex_unlock(&c->lock);
                idle_expire(c);
                pthread_mutex_lock(&c->lock);
            }
        }
        it = c->head;
        if (it == NULL) { /* stopping, and everything is written */
            pthread_mutex_unlock(&c->lock);
            return NULL;
        }
        c->head = it->next;
        if (c->head == NULL)
            c->tail = NULL;
        pthread_mutex_unlock(&c->lock);

        format_line(&c->line, it);
        trouble = c->line.oom ? T_MEMORY : write_line(c, &c->line, it->arrival_us, why, sizeof why);
        if (trouble == T_NONE) {
            ENR_SB_ADD(c->sb->cap_written, 1);
            c->last_trouble = T_NONE;
        } else {
            if (trouble == T_NODIR)
                ENR_SB_ADD(c->sb->cap_dropped_nodir, 1);
            else
                ENR_SB_ADD(c->sb->cap_dropped_error, 1);
            complain(c, trouble, trouble == T_MEMORY ? "ENOMEM" : why);
        }
        pthread_mutex_lock(&c->lock);
        c->queued -= it->len;
        pthread_mutex_unlock(&c->lock);
        free(it);
    }
}

enr_capture *enr_capture_new(const enr_config *cfg, unsigned slot, enr_sb_slot *sb)
{
    enr_capture *c;
    sigset_t all, old;
    int rc;

    if (cfg->capture_dir[0] == '\0' || cfg->capture_sample <= 0.0)
        return NULL;
    c = calloc(1, sizeof *c);
    if (c == NULL) {
        enr_log(ENR_LOG_ERROR, "capture off: out of memory", NULL);
        return NULL;
    }
    c->sb = sb;
    c->sample = cfg->capture_sample;
    c->queue_max = cfg->capture_queue_bytes;
    c->file_max = cfg->capture_max_bytes / (cfg->workers ? cfg->workers : 1) / 2;
    c->max_age_us = (uint64_t)cfg->capture_max_age_s * 1000000u;
    if (c->max_age_us) {
        c->tick_ms = c->max_age_us / 1000u / 16u;
        if (c->tick_ms < CAPTURE_AGE_TICK_MIN_MS)
            c->tick_ms = CAPTURE_AGE_TICK_MIN_MS;
        if (c->tick_ms > CAPTURE_AGE_TICK_MAX_MS)
            c->tick_ms = CAPTURE_AGE_TICK_MAX_MS;
    }
    if (cfg->capture_group[0]) {
        char why[160];
        if (enr_safedir_group(cfg->capture_group, &c->gid, why, sizeof why) != 0) {
            /* The check passed when the file was read: the group went since. */
            char q[2 * sizeof why];
            enr_log(ENR_LOG_ERROR, "capture off: capture_group", "error=%s",
                    enr_log_quote(q, sizeof q, why));
            free(c);
            return NULL;
        }
        c->have_gid = 1;
    }
    c->fd = c->dfd = -1;
    c->rng = ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)c ^ 0x9e3779b97f4a7c15ULL;
    snprintf(c->dir, sizeof c->dir, "%s", cfg->capture_dir);
    snprintf(c->name, sizeof c->name, "capture-%u.ndjson", slot);
    snprintf(c->rotated, sizeof c->rotated, "%s.1", c->name);
    pthread_mutex_init(&c->lock, NULL);
    {
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the tick ignores clock steps */
        pthread_cond_init(&c->wake, &ca);
        pthread_condattr_destroy(&ca);
    }
    /* The thread starts with every signal blocked, so no signal meant for
     * the worker is ever delivered to it. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&c->thread, NULL, writer, c);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        enr_log(ENR_LOG_ERROR, "capture off: thread start failed", "error=%s", enr_log_errno(rc));
        pthread_mutex_destroy(&c->lock);
        pthread_cond_destroy(&c->wake);
        free(c);
        return NULL;
    }
    return c;
}

void enr_capture_offer(enr_capture *c, const char *body, size_t len, uint64_t arrival_us,
                       int json_ok)
{
    item *it;
    int full;

    if (c == NULL || next_unit(c) >= c->sample)
        return;
    pthread_mutex_lock(&c->lock);
    full = len > c->queue_max - c->queued || c->queued > c->queue_max;
    if (!full)
        c->queued += len; /* reserved before the copy, released by the writer */
    pthread_mutex_unlock(&c->lock);
    if (full) {
        ENR_SB_ADD(c->sb->cap_dropped_queue, 1);
        return;
    }
    it = malloc(sizeof *it + len);
    if (it == NULL) {
        pthread_mutex_lock(&c->lock);
        c->queued -= len;
        pthread_mutex_unlock(&c->lock);
        ENR_SB_ADD(c->sb->cap_dropped_error, 1);
        return;
    }
    it->next = NULL;
    it->arrival_us = arrival_us;
    it->len = len;
    memcpy(it->data, body, len);
    it->json_ok = json_ok;
    pthread_mutex_lock(&c->lock);
    if (c->tail)
        c->tail->next = it;
    else
        c->head = it;
    c->tail = it;
    pthread_cond_signal(&c->wake);
    pthread_mutex_unlock(&c->lock);
}

void enr_capture_free(enr_capture *c)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&c->lock);
    c->stop = 1;
    pthread_cond_signal(&c->wake);
    pthread_mutex_unlock(&c->lock);
    pthread_join(c->thread, NULL);
    close_dir(c);
    enr_buf_free(&c->line);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->wake);
    free(c);
}
