/*
 * replay_trace.c: maps a JSON-lines trace and indexes its requests.
 *
 * Only the top-level keys "ts" and "payload" of each line are read; other
 * keys are skipped.  The scanner (base/jscan.h, raw) checks structure
 * (strings, nesting) well enough to find where the payload value ends; it
 * does not validate the payload itself, because sending invalid bodies is
 * a legitimate use.
 */
#include "replay/replay_trace.h"

#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/jscan.h"

/* Nesting of a payload deeper than this is still skipped correctly (we
 * only count), this bound only catches runaway lines. */
#define TRACE_MAX_DEPTH 1000000

/* The string span [v, ve) (quotes included) decoded into a new buffer:
 * the decoded text is never longer than the escaped one. */
static char *decode_string(const char *v, const char *ve, size_t *len)
{
    enr_jscan d;
    char *out = malloc((size_t)(ve - v) + 1);

    if (!out)
        return NULL;
    enr_jscan_init(&d, v, (size_t)(ve - v), TRACE_MAX_DEPTH, 1);
    if (enr_jscan_string(&d, out, (size_t)(ve - v), len) != 0) {
        free(out);
        return NULL;
    }
    return out;
}

/* The member key [k, ke) (a string span, quotes included) with its value
 * [v, ve) into e; 0, or -1 for a value the trace cannot use. */
static int take_member(enr_replay_entry *e, const char *k, size_t klen, const char *v,
                       const char *ve, int *have_ts, int *have_payload)
{
    if (klen == 4 && memcmp(k, "\"ts\"", 4) == 0) {
        char tmp[64], *ep;
        size_t l = (size_t)(ve - v);
        if (l == 0 || l >= sizeof tmp)
            return -1;
        memcpy(tmp, v, l);
        tmp[l] = 0;
        e->ts = strtod(tmp, &ep);
        if (*ep || !isfinite(e->ts)) /* "nan", "inf" would break the schedule */
            return -1;
        *have_ts = 1;
    } else if (klen == 9 && memcmp(k, "\"payload\"", 9) == 0) {
        if (e->owned)
            free((void *)e->body);
        e->owned = 0;
        if (*v == '"') {
            e->body = decode_string(v, ve, &e->len);
            if (!e->body)
                return -1;
            e->owned = 1;
        } else {
            e->body = v;
            e->len = (size_t)(ve - v);
        }
        *have_payload = 1;
    }
    return 0;
}

static int blank(const char *p, const char *end)
{
    enr_jscan s;

    enr_jscan_init(&s, p, (size_t)(end - p), TRACE_MAX_DEPTH, 1);
    enr_jscan_ws(&s);
    return s.p == s.end;
}

/* One line: an object whose members are passed over unjudged (a
 * trailing comma forgiven, what follows its close ignored), but for
 * "ts" and "payload". */
static int parse_line(enr_replay_entry *e, const char *p, const char *end)
{
    enr_jscan s;
    int more, have_ts = 0, have_payload = 0;

    enr_jscan_init(&s, p, (size_t)(end - p), TRACE_MAX_DEPTH, 1);
    enr_jscan_ws(&s);
    if (!enr_jscan_at(&s, '{'))
        return -1;
    for (more = enr_jscan_open(&s, 1); more == 1; more = enr_jscan_next(&s, '}')) {
        const char *k = (const char *)s.p, *v;
        size_t klen;
        if (enr_jscan_at(&s, '}')) {
            s.p++;
            more = 0;
            break;
        }
        if (!enr_jscan_at(&s, '"') || enr_jscan_span(&s) != 0)
            return -1;
        klen = (size_t)((const char *)s.p - k);
        enr_jscan_ws(&s);
        if (!enr_jscan_at(&s, ':'))
            return -1;
        s.p++;
        enr_jscan_ws(&s);
        v = (const char *)s.p;
        if (enr_jscan_span(&s) != 0 ||
            take_member(e, k, klen, v, (const char *)s.p, &have_ts, &have_payload) != 0)
            return -1;
    }
    return more == 0 && have_ts && have_payload ? 0 : -1;
}

int enr_replay_trace_load(enr_replay_trace *t, const char *path, char *err, size_t errlen)
{
    struct stat st;
    void *map;
    int fd;

    memset(t, 0, sizeof *t);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) < 0) {
        snprintf(err, errlen, "%s: fstat: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (st.st_size == 0) {
        snprintf(err, errlen, "%s: empty trace", path);
        close(fd);
        return -1;
    }
    map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        snprintf(err, errlen, "%s: mmap: %s", path, strerror(errno));
        return -1;
    }
    if (enr_replay_trace_parse(t, map, (size_t)st.st_size, path, err, errlen) < 0) {
        munmap(map, (size_t)st.st_size);
        return -1;
    }
    t->map = map; /* freed with the trace */
    t->map_len = (size_t)st.st_size;
    return 0;
}

int enr_replay_trace_parse(enr_replay_trace *t, const char *buf, size_t len, const char *name,
                           char *err, size_t errlen)
{
    const char *p = buf, *end = buf + len;
    size_t cap = 1024, lineno = 0;
    double first = 0, prev = 0;

    memset(t, 0, sizeof *t);
    t->e = calloc(cap, sizeof *t->e);
    if (!t->e) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        lineno++;
        if (!blank(p, le)) {
            if (t->n == cap) {
                enr_replay_entry *ne = realloc(t->e, 2 * cap * sizeof *ne);
                if (!ne) {
                    snprintf(err, errlen, "out of memory");
                    enr_replay_trace_free(t);
                    return -1;
                }
                memset(ne + cap, 0, cap * sizeof *ne);
                t->e = ne;
                cap *= 2;
            }
            enr_replay_entry *e = &t->e[t->n];
            if (parse_line(e, p, le) < 0) {
                snprintf(err, errlen, "%s:%zu: not a {\"ts\": N, \"payload\": ...} line", name,
                         lineno);
                t->n++; /* so free() releases a decoded body */
                enr_replay_trace_free(t);
                return -1;
            }
            if (t->n == 0)
                first = e->ts;
            e->ts -= first;
            if (t->n > 0 && e->ts < prev) {
                e->ts = prev;
                t->reordered++;
            }
            prev = e->ts;
            t->bytes += e->len;
            t->n++;
        }
        p = nl ? nl + 1 : end;
    }
    if (t->n == 0) {
        snprintf(err, errlen, "%s: no requests", name);
        enr_replay_trace_free(t);
        return -1;
    }
    return 0;
}

void enr_replay_trace_free(enr_replay_trace *t)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->e[i].owned)
            free((void *)t->e[i].body);
    free(t->e);
    if (t->map)
        munmap(t->map, t->map_len);
    memset(t, 0, sizeof *t);
}
