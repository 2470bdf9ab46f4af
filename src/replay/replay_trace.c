/*
 * replay_trace.c: maps a JSON-lines trace and indexes its requests.
 *
 * Only the top-level keys "ts" and "payload" of each line are read; other
 * keys are skipped.  The scanner checks structure (strings, nesting) well
 * enough to find where the payload value ends; it does not validate the
 * payload itself, because sending invalid bodies is a legitimate use.
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

#include "base/text.h"

/* Nesting of a payload deeper than this is still skipped correctly (we
 * only count), this bound only catches runaway lines. */
#define TRACE_MAX_DEPTH 1000000

static const char *skip_ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r'))
        p++;
    return p;
}

/* p at '"'; returns the byte after the closing quote, or NULL. */
static const char *skip_string(const char *p, const char *end)
{
    for (p++; p < end; p++) {
        if (*p == '\\') {
            p++;
            continue;
        }
        if (*p == '"')
            return p + 1;
    }
    return NULL;
}

/* Skip one JSON value; returns its end or NULL on a broken line. */
static const char *skip_value(const char *p, const char *end)
{
    if (p >= end)
        return NULL;
    if (*p == '"')
        return skip_string(p, end);
    if (*p == '{' || *p == '[') {
        long depth = 0;
        while (p < end) {
            char c = *p;
            if (c == '"') {
                p = skip_string(p, end);
                if (!p)
                    return NULL;
                continue;
            }
            if (c == '{' || c == '[') {
                if (++depth > TRACE_MAX_DEPTH)
                    return NULL;
            } else if (c == '}' || c == ']') {
                if (--depth == 0)
                    return p + 1;
            }
            p++;
        }
        return NULL;
    }
    while (p < end && *p != ',' && *p != '}' && *p != ' ' && *p != '\t' && *p != '\r')
        p++;
    return p;
}

static int read_u16(const char *p, const char *end, unsigned *out)
{
    if (end - p < 4)
        return -1;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = enr_hex_digit(p[i]);
        if (h < 0)
            return -1;
        v = v << 4 | (unsigned)h;
    }
    *out = v;
    return 0;
}

static size_t put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12);
        o[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18);
    o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Decode the JSON string [p, q) (quotes included) into a new buffer.
 * The decoded text is never longer than the escaped one. */
static char *decode_string(const char *p, const char *q, size_t *len)
{
    char *out = malloc((size_t)(q - p) + 1);
    if (!out)
        return NULL;
    size_t n = 0;
    const char *end = q - 1;
    for (p++; p < end; p++) {
        if (*p != '\\') {
            out[n++] = *p;
            continue;
        }
        if (++p >= end)
            break;
        switch (*p) {
        case 'b':
            out[n++] = '\b';
            break;
        case 'f':
            out[n++] = '\f';
            break;
        case 'n':
            out[n++] = '\n';
            break;
        case 'r':
            out[n++] = '\r';
            break;
        case 't':
            out[n++] = '\t';
            break;
        case 'u': {
            unsigned cp, lo;
            if (read_u16(p + 1, end, &cp) < 0) {
                free(out);
                return NULL;
            }
            p += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF && end - p >= 7 && p[1] == '\\' && p[2] == 'u' &&
                read_u16(p + 3, end, &lo) == 0 && lo >= 0xDC00 && lo <= 0xDFFF) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                p += 6;
            } else if (cp >= 0xDC80 && cp <= 0xDCFF) {
                out[n++] = (char)(cp - 0xDC00); /* surrogateescape: a raw byte */
                break;
            }
            n += put_utf8(out + n, cp);
            break;
        }
        default:
            out[n++] = *p;
            break;
        }
    }
    *len = n;
    return out;
}

static int parse_line(enr_replay_entry *e, const char *p, const char *end)
{
    int have_ts = 0, have_payload = 0;
    p = skip_ws(p, end);
    if (p >= end || *p != '{')
        return -1;
    p++;
    for (;;) {
        p = skip_ws(p, end);
        if (p < end && *p == '}')
            break;
        if (p >= end || *p != '"')
            return -1;
        const char *k = p + 1;
        const char *ke = skip_string(p, end);
        if (!ke)
            return -1;
        size_t klen = (size_t)(ke - 1 - k);
        p = skip_ws(ke, end);
        if (p >= end || *p != ':')
            return -1;
        p = skip_ws(p + 1, end);
        const char *v = p;
        const char *ve = skip_value(p, end);
        if (!ve)
            return -1;
        if (klen == 2 && memcmp(k, "ts", 2) == 0) {
            char tmp[64];
            size_t l = (size_t)(ve - v);
            if (l == 0 || l >= sizeof tmp)
                return -1;
            memcpy(tmp, v, l);
            tmp[l] = 0;
            char *ep;
            e->ts = strtod(tmp, &ep);
            if (*ep || !isfinite(e->ts)) /* "nan", "inf" would break the schedule */
                return -1;
            have_ts = 1;
        } else if (klen == 7 && memcmp(k, "payload", 7) == 0) {
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
            have_payload = 1;
        }
        p = skip_ws(ve, end);
        if (p < end && *p == ',') {
            p++;
            continue;
        }
        if (p < end && *p == '}')
            break;
        return -1;
    }
    return have_ts && have_payload ? 0 : -1;
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
        if (skip_ws(p, le) < le) {
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
