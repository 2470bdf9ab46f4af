/*
 * store_cache.c: the fleet's cache in the shared store (store_cache.h):
 * the keys, the values and their checks, a batch's one MGET, and the
 * SETs that are not waited for.
 *
 * Invariants: a batch waits for the store once, for one MGET, and never
 * past its deadline (enr_store_call's); the SETs are queued and written
 * without waiting, their replies read in idle time; no value reaches a
 * record without enr_store_value_decode's checks, whose check of the
 * answer itself is enr_answer_check (answer.h), the same as a provider's
 * reply and the host's cache file pass.
 */
#include "upstream/store_cache.h"

#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "engine/engine.h"
#include "upstream/answer.h"

/* An MGET's reply is one array of its ids: the reader's bound lets it through. */
_Static_assert(ENR_STORE_MGET_MAX <= ENR_STORE_ARRAY_MAX, "an MGET's reply within a reply's array");

struct enr_store_batch {
    enr_buf keys;      /* every key, back to back */
    size_t *off, *len; /* ... each one's place */
    const char **argv; /* MGET's arguments, made when it is sent */
    size_t *lens;
    size_t n, cap;
    enr_buf scratch; /* one SET's key */
};

/* ---- keys and values ---- */

int enr_store_cache_key(enr_buf *out, const char *prefix, int provider, int src, const char *id,
                        size_t len)
{
    const char *pname = enr_provider_name(provider);

    enr_buf_reset(out);
    if (len == 0 || len > ENR_STORE_ID_MAX || src < 0 || src >= ENR_SOURCE_COUNT || pname == NULL)
        return -1;
    enr_buf_append(out, prefix, strlen(prefix));
    enr_buf_lit(out, "c:");
    enr_buf_append(out, enr_config_source_names[src], strlen(enr_config_source_names[src]));
    enr_buf_putc(out, ':');
    enr_buf_append(out, pname, strlen(pname));
    enr_buf_putc(out, ':');
    enr_buf_append(out, id, len);
    return out->oom ? -1 : 0;
}

size_t enr_store_value_encode(char *out, size_t cap, const enr_cache_val *v, uint64_t expires_ms)
{
    int n;

    if (cap > ENR_STORE_VALUE_MAX + 1)
        cap = ENR_STORE_VALUE_MAX + 1;
    if (v->negative)
        n = snprintf(out, cap, "E1 %" PRIu64 " N", expires_ms);
    else if (v->poster == NULL && !v->has_duration)
        return 0;
    else if (v->has_duration)
        n = snprintf(out, cap, "E1 %" PRIu64 " F %.17g %.*s", expires_ms, v->duration,
                     v->poster ? (int)v->poster_len : 1, v->poster ? v->poster : "-");
    else
        n = snprintf(out, cap, "E1 %" PRIu64 " F - %.*s", expires_ms, (int)v->poster_len,
                     v->poster);
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

/* The checks of a provider's answer, applied to one read back: the one
 * place to swap for the shared validator of cached records. */
static int value_checked(const enr_cache_val *v)
{
    return enr_answer_check(v) == NULL;
}

/* The next space-separated field of [*p, end): its start and length. */
static const char *field(const char **p, const char *end, size_t *len)
{
    const char *s = *p, *e;

    if (s >= end)
        return NULL;
    e = memchr(s, ' ', (size_t)(end - s));
    if (e == NULL)
        e = end;
    *len = (size_t)(e - s);
    *p = e < end ? e + 1 : end;
    return *len ? s : NULL;
}

static int decimal(const char *s, size_t n, uint64_t *out)
{
    uint64_t v = 0;

    if (n == 0 || n > 19)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return 0;
}

/* A duration as encode writes it: digits, '.', 'e', signs; strtod
 * consumes it whole.  Checked in the copy: s is not NUL-terminated (its
 * field may end the value), so nothing may read past its n bytes. */
static int duration(const char *s, size_t n, double *out)
{
    char tmp[40], *e;

    if (n == 0 || n >= sizeof tmp)
        return -1;
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    if (strspn(tmp, "0123456789.e+-") < n)
        return -1;
    *out = strtod(tmp, &e);
    return *e == '\0' ? 0 : -1;
}

int enr_store_value_decode(const char *s, size_t n, uint64_t now_ms, enr_cache_val *v)
{
    const char *p = s, *end = s + n, *f;
    size_t len;
    uint64_t exp;

    memset(v, 0, sizeof *v);
    if (n > ENR_STORE_VALUE_MAX || (f = field(&p, end, &len)) == NULL || len != 2 ||
        memcmp(f, "E1", 2) != 0)
        return -1;
    if ((f = field(&p, end, &len)) == NULL || decimal(f, len, &exp) != 0 || exp <= now_ms ||
        exp - now_ms > (uint64_t)ENR_STORE_TTL_MAX_S * 1000u)
        return -1;
    v->expires_ms = exp;
    if ((f = field(&p, end, &len)) == NULL || len != 1)
        return -1;
    if (*f == 'N') {
        v->negative = 1;
        return p == end && s[n - 1] == 'N' ? 0 : -1;
    }
    if (*f != 'F' || (f = field(&p, end, &len)) == NULL)
        return -1;
    if (!(len == 1 && *f == '-')) {
        if (duration(f, len, &v->duration) != 0)
            return -1;
        v->has_duration = 1;
    }
    if ((f = field(&p, end, &len)) == NULL || p != end || f + len != end)
        return -1;
    if (!(len == 1 && *f == '-')) {
        v->poster = f;
        v->poster_len = len;
    }
    if (v->poster == NULL && !v->has_duration)
        return -1;
    return value_checked(v) ? 0 : -1;
}

/* ---- a batch ---- */

size_t enr_store_mget_cap(size_t n)
{
    return 64 + n * (ENR_STORE_VALUE_MAX + 16);
}

enr_store_batch *enr_store_batch_new(void)
{
    return calloc(1, sizeof(enr_store_batch));
}

void enr_store_batch_free(enr_store_batch *sb)
{
    if (sb == NULL)
        return;
    enr_buf_free(&sb->keys);
    enr_buf_free(&sb->scratch);
    free(sb->off);
    free(sb->len);
    free(sb->argv);
    free(sb->lens);
    free(sb);
}

void enr_store_batch_reset(enr_store_batch *sb)
{
    enr_buf_reset(&sb->keys);
    sb->n = 0;
}

static int grow(enr_store_batch *sb)
{
    size_t cap = sb->cap ? sb->cap * 2 : 64;
    size_t *off = realloc(sb->off, cap * sizeof *off), *len;
    const char **argv;

    if (off == NULL)
        return -1;
    sb->off = off;
    if ((len = realloc(sb->len, cap * sizeof *len)) == NULL)
        return -1;
    sb->len = len;
    if ((argv = realloc(sb->argv, (cap + 1) * sizeof *argv)) == NULL)
        return -1;
    sb->argv = argv;
    if ((len = realloc(sb->lens, (cap + 1) * sizeof *len)) == NULL)
        return -1;
    sb->lens = len;
    sb->cap = cap;
    return 0;
}

int enr_store_batch_add(enr_store_batch *sb, const char *prefix, int provider, int src,
                        const char *id, size_t len)
{
    size_t at = sb->keys.len;

    if (sb->n >= ENR_STORE_MGET_MAX || (sb->n == sb->cap && grow(sb) != 0))
        return -1;
    if (enr_store_cache_key(&sb->scratch, prefix, provider, src, id, len) != 0)
        return -1;
    enr_buf_append(&sb->keys, sb->scratch.data, sb->scratch.len);
    if (sb->keys.oom)
        return -1;
    sb->off[sb->n] = at;
    sb->len[sb->n++] = sb->scratch.len;
    return 0;
}

long enr_store_mget_take(const struct redisReply *r, size_t n, uint64_t now_wall_ms,
                         enr_store_hit_fn *fn, void *ud, enr_store_stats *st)
{
    long hits = 0;

    if (r->type != REDIS_REPLY_ARRAY || r->elements != n)
        return -1;
    for (size_t i = 0; i < n; i++) {
        const redisReply *e = r->element[i];
        enr_cache_val v;
        if (e->type == REDIS_REPLY_NIL)
            continue;
        if (e->type != REDIS_REPLY_STRING ||
            enr_store_value_decode(e->str, e->len, now_wall_ms, &v) != 0) {
            st->refused++;
            continue;
        }
        hits++;
        fn(ud, i, &v);
    }
    st->hits += (uint64_t)hits;
    return hits;
}

size_t enr_store_batch_get(enr_store *s, enr_store_batch *sb, uint64_t now_wall_ms,
                           uint64_t deadline_ms, enr_store_hit_fn *fn, void *ud)
{
    enr_store_stats *st;
    redisReply *r;
    long hits;

    if (sb->n == 0)
        return 0;
    st = enr_store_stats_of(s);
    sb->argv[0] = "MGET";
    sb->lens[0] = 4;
    for (size_t i = 0; i < sb->n; i++) {
        sb->argv[i + 1] = sb->keys.data + sb->off[i];
        sb->lens[i + 1] = sb->len[i];
    }
    st->lookups += sb->n;
    r = enr_store_call(s, (int)sb->n + 1, sb->argv, sb->lens, enr_store_mget_cap(sb->n),
                       deadline_ms);
    if (r == NULL)
        return 0;
    hits = enr_store_mget_take(r, sb->n, now_wall_ms, fn, ud, st);
    if (hits < 0)
        st->errors++;
    enr_store_reply_free(r);
    return hits < 0 ? 0 : (size_t)hits;
}

void enr_store_cache_put(enr_store *s, enr_store_batch *sb, int provider, int src, const char *id,
                         size_t len, const enr_cache_val *v, uint64_t expires_ms,
                         uint64_t now_wall_ms)
{
    char val[ENR_STORE_VALUE_MAX + 1], ttl[24];
    const char *argv[5];
    size_t lens[5], n;

    if (!enr_store_ready(s) || expires_ms <= now_wall_ms + 1000 ||
        enr_store_cache_key(&sb->scratch, enr_store_prefix(s), provider, src, id, len) != 0 ||
        (n = enr_store_value_encode(val, sizeof val, v, expires_ms)) == 0)
        return;
    snprintf(ttl, sizeof ttl, "%" PRIu64, (expires_ms - now_wall_ms) / 1000);
    argv[0] = "SET";
    argv[1] = sb->scratch.data;
    argv[2] = val;
    argv[3] = "EX";
    argv[4] = ttl;
    lens[0] = 3;
    lens[1] = sb->scratch.len;
    lens[2] = n;
    lens[3] = 2;
    lens[4] = strlen(ttl);
    if (enr_store_send(s, 5, argv, lens, ENR_STORE_REPLY_SMALL, NULL, NULL, 0) == 0)
        enr_store_stats_of(s)->writes++;
}
