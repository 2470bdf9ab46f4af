/*
 * capture.c: sampled request bodies to trace files (capture.h).
 *
 * Invariants: the worker's side (enr_capture_offer) never blocks on the
 * disk and never allocates more than capture_queue_bytes in total for
 * queued samples; only the writer thread touches the file; a line is
 * written whole or the file is cut back to the last whole line, so a
 * full disk leaves a valid trace; the thread blocks every signal (they
 * are the worker's); the directory holds at most two files per slot,
 * each at most half the slot's share of capture_max_bytes.
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
#include <unistd.h>

#include "base/buf.h"
#include "base/log.h"

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
    uint64_t file_max; /* rotate past this */
    char path[ENR_PATH_MAX + 32], rotated[ENR_PATH_MAX + 40];
    uint64_t rng;

    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    item *head, *tail;
    int stop;

    /* the writer thread's own */
    int fd;
    uint64_t file_size;
    enr_buf line;
};

/* xorshift64*: sampling needs no quality beyond "about this share". */
static double next_unit(enr_capture *c)
{
    c->rng ^= c->rng >> 12;
    c->rng ^= c->rng << 25;
    c->rng ^= c->rng >> 27;
    return (double)((c->rng * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

/* Length of the well-formed UTF-8 sequence at s[i] (i < n, s[i] >= 0x80),
 * or 0. */
static size_t utf8_seq(const unsigned char *s, size_t i, size_t n)
{
    unsigned char ch = s[i];

    if (ch >= 0xc2 && ch <= 0xdf && i + 1 < n && (s[i + 1] & 0xc0) == 0x80)
        return 2;
    if (ch >= 0xe0 && ch <= 0xef && i + 2 < n && (s[i + 1] & 0xc0) == 0x80 &&
        (s[i + 2] & 0xc0) == 0x80 && (ch != 0xe0 || s[i + 1] >= 0xa0) &&
        (ch != 0xed || s[i + 1] < 0xa0))
        return 3;
    if (ch >= 0xf0 && ch <= 0xf4 && i + 3 < n && (s[i + 1] & 0xc0) == 0x80 &&
        (s[i + 2] & 0xc0) == 0x80 && (s[i + 3] & 0xc0) == 0x80 &&
        (ch != 0xf0 || s[i + 1] >= 0x90) && (ch != 0xf4 || s[i + 1] < 0x90))
        return 4;
    return 0;
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
        size_t k = 1;
        if (s[i] == '\n' || s[i] == '\r' || (s[i] >= 0x80 && (k = utf8_seq(s, i, it->len)) == 0))
            return 0;
        i += k;
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
        size_t k;
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
        k = utf8_seq(s, i, n);
        if (k == 0) {
            enr_buf_printf(b, "\\udc%02x", ch);
            i++;
        } else {
            enr_buf_append(b, s + i, k);
            i += k;
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

static int open_file(enr_capture *c)
{
    c->fd = open(c->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (c->fd < 0) {
        char q[ENR_PATH_MAX + 64];
        enr_log(ENR_LOG_ERROR, "capture file open failed", "path=%s error=%s",
                enr_log_quote(q, sizeof q, c->path), enr_log_errno(errno));
        return -1;
    }
    c->file_size = (uint64_t)lseek(c->fd, 0, SEEK_END);
    return 0;
}

/* Writes one line whole, or cuts the file back to where it was. */
static int write_line(enr_capture *c, const enr_buf *b)
{
    size_t off = 0;

    if (c->fd < 0 && open_file(c) != 0)
        return -1;
    while (off < b->len) {
        ssize_t n = write(c->fd, b->data + off, b->len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int e = errno;
            if (off > 0 && ftruncate(c->fd, (off_t)c->file_size) != 0)
                enr_log(ENR_LOG_WARN, "capture truncate failed", "error=%s", enr_log_errno(errno));
            errno = e;
            return -1;
        }
        off += (size_t)n;
    }
    c->file_size += b->len;
    if (c->file_size >= c->file_max) {
        close(c->fd);
        c->fd = -1;
        if (rename(c->path, c->rotated) != 0) {
            char q[ENR_PATH_MAX + 64];
            enr_log(ENR_LOG_WARN, "capture rotate failed", "path=%s error=%s",
                    enr_log_quote(q, sizeof q, c->path), enr_log_errno(errno));
        }
    }
    return 0;
}

static void *writer(void *arg)
{
    enr_capture *c = arg;
    sigset_t all;
    int last_errno = 0;

    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    for (;;) {
        item *it;
        pthread_mutex_lock(&c->lock);
        while (c->head == NULL && !c->stop)
            pthread_cond_wait(&c->wake, &c->lock);
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
        if (c->line.oom || write_line(c, &c->line) != 0) {
            int e = c->line.oom ? ENOMEM : errno;
            ENR_SB_ADD(c->sb->cap_dropped_error, 1);
            if (e != last_errno) /* one line per kind of trouble, not per sample */
                enr_log(ENR_LOG_WARN, "capture sample dropped", "error=%s", enr_log_errno(e));
            last_errno = e;
        } else {
            ENR_SB_ADD(c->sb->cap_written, 1);
            last_errno = 0;
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
    c->fd = -1;
    c->rng = ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)c ^ 0x9e3779b97f4a7c15ULL;
    snprintf(c->path, sizeof c->path, "%s/capture-%u.ndjson", cfg->capture_dir, slot);
    snprintf(c->rotated, sizeof c->rotated, "%s.1", c->path);
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->wake, NULL);
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
    if (c->fd >= 0)
        close(c->fd);
    enr_buf_free(&c->line);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->wake);
    free(c);
}
