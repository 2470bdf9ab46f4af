/*
 * conftable.c: the configuration's keys (config_int.h), made from their
 * rows (confkeys.inc): the built-in defaults as text, the table that says
 * each key's type, bounds, field and what a HUP does with it, and the
 * readers of a parsed configuration by key: -T's printout
 * (enr_config_dump), enr_config_line, and a reload's comparisons by the
 * rows' reload column (enr_config_keep_restart, enr_config_cache_change,
 * enr_config_identity).
 *
 * Adding a key is one row of confkeys.inc (and its field in enr_config)
 * plus its documentation in conf/enrichd.conf (the tests hold the file
 * and enrichd.conf(5) to the rows' keys and defaults).
 *
 * Invariants: every row's offset and size are its field's in enr_config
 * (the K() macro, never written by hand); the defaults text parses on its
 * own (config.c reads it before every file).
 */
#include "base/config.h"
#include "base/config_int.h"

#include <stdio.h>
#include <string.h>

/* A template row of confkeys.inc (KS, KSECRET) made once per row of
 * ENR_SOURCE_LIST: each source's row gets the template as ctx, unpacked
 * by KS_CALL, and its own columns (base/sources.h). */
#define KS_STR2(x) #x
#define KS_STR(x) KS_STR2(x)
#define KS_CALL(m, ...) m(__VA_ARGS__)
#define KS_UNPACK(...) __VA_ARGS__
#define KS_COL_url(url, ttl, quota) url
#define KS_COL_ttl(url, ttl, quota) ttl
#define KS_COL_quota(url, ttl, quota) quota
#define KS_EACH(ctx, NAME, name, PROV, S, word, noun, url, ttl, quota, ...)                        \
    KS_CALL(KS_ONE, KS_UNPACK ctx, NAME, name, url, ttl, quota)
#define KSEC_EACH(ctx, NAME, name, PROV, S, word, ...) KSEC_##S(KS_UNPACK ctx, NAME, name, word)
#define KSEC_NOSECRET(...)
#define KS(suffix, type, col, lo, hi, reload, help)                                                \
    ENR_SOURCE_ROWS(KS_EACH, (suffix, type, col, lo, hi, reload))
#define KSECRET(reload, help_file, help_cred) ENR_SOURCE_ROWS(KSEC_EACH, (reload))

/* "key = default" lines, in the rows' order.  (The help column is the
 * man page's: scripts/gen-conf-man.py reads the rows.) */
#define K(name, type, def, lo, hi, reload, help) #name " = " def "\n"
#define KF(name, field, type, def, lo, hi, reload, help) #name " = " def "\n"
#define KS_ONE(suffix, type, col, lo, hi, reload, NAME, name, url, ttl, quota)                     \
    KS_STR(name##_##suffix) " = " KS_COL_##col(url, ttl, quota) "\n"
#define KSEC_SECRET(reload, NAME, name, word)                                                      \
    KS_STR(name##_##word##_file) " = \n" KS_STR(name##_##word##_credential) " = \n"
const char enr_config_default_text[] =
    "# enrichd built-in configuration (conf/enrichd.conf documents each key)\n"
#include "base/confkeys.inc"
    ;
#undef K
#undef KF
#undef KS_ONE
#undef KSEC_SECRET

#define KF(name, field, type, def, lo, hi, reload, help)                                           \
    {#name,                                                                                        \
     ENR_KEY_##type,                                                                               \
     offsetof(enr_config, field),                                                                  \
     sizeof(((enr_config *)0)->field),                                                             \
     lo,                                                                                           \
     hi,                                                                                           \
     ENR_RELOAD_##reload,                                                                          \
     #field},
#define K(name, type, def, lo, hi, reload, help) KF(name, name, type, def, lo, hi, reload, help)
/* A source's key: its field in enr_config.api[], named in a reload's
 * log by its key (as the field was before the sources had one row). */
#define KAPI(key, NAME, member, type, lo, hi, reload)                                              \
    {KS_STR(key),                                                                                  \
     ENR_KEY_##type,                                                                               \
     offsetof(enr_config, api[ENR_SOURCE_##NAME].member),                                          \
     sizeof(((enr_config *)0)->api[0].member),                                                     \
     lo,                                                                                           \
     hi,                                                                                           \
     ENR_RELOAD_##reload,                                                                          \
     KS_STR(key)},
#define KS_ONE(suffix, type, col, lo, hi, reload, NAME, name, url, ttl, quota)                     \
    KAPI(name##_##suffix, NAME, suffix, type, lo, hi, reload)
#define KSEC_SECRET(reload, NAME, name, word)                                                      \
    KAPI(name##_##word##_file, NAME, secret_file, PATH, 0, 0, reload)                              \
    KAPI(name##_##word##_credential, NAME, secret_credential, STR, 0, 0, reload)
const enr_config_key enr_config_keys[] = {
#include "base/confkeys.inc"
};
#undef K
#undef KF
#undef KS_ONE
#undef KSEC_SECRET

const size_t enr_config_nkeys = sizeof enr_config_keys / sizeof enr_config_keys[0];
_Static_assert(sizeof enr_config_keys / sizeof enr_config_keys[0] <= ENR_CONFIG_KEYS_MAX,
               "raise ENR_CONFIG_KEYS_MAX");

/* -T: one line a key, in the table's order, read back by -c as the same
 * configuration; the comment says which line set it.  A value is shown
 * as parsed (workers = auto as the number it became). */
static void dump_origin(const enr_config *c, size_t i, FILE *f)
{
    if (c->key_line[i] != 0)
        fprintf(f, "  # %s:%u\n", c->source, c->key_line[i]);
    else if (strcmp(enr_config_keys[i].name, "max_requests_jitter") == 0)
        fprintf(f, "  # built-in default (max_requests / 10)\n");
    else if (strcmp(enr_config_keys[i].name + 2, "_source") == 0)
        fprintf(f, "  # built-in default (upstream where upstream_url is set, else off)\n");
    else if (enr_config_keys[i].type == ENR_KEY_PER_CPU)
        fprintf(f, "  # built-in default (auto: %d per CPU, at most %d)\n", ENR_WORKERS_PER_CPU,
                ENR_WORKERS_AUTO_MAX);
    else
        fprintf(f, "  # built-in default\n");
}

void enr_config_dump(const enr_config *c, FILE *f)
{
    fprintf(f, "# enrichd effective configuration, from %s\n", c->source);
    for (size_t i = 0; i < enr_config_nkeys; i++) {
        const enr_config_key *k = &enr_config_keys[i];
        const char *field = (const char *)c + k->off;
        unsigned u;
        size_t z;
        double d;

        if (enr_config_key_is_text(k)) {
            fprintf(f, "%s =%s%s", k->name, field[0] ? " " : "", field);
            dump_origin(c, i, f);
            continue;
        }
        switch (k->type) {
        case ENR_KEY_HEADER:
            for (unsigned h = 0; h < c->upstream_nheaders; h++) {
                fprintf(f, "%s = %s", k->name, c->upstream_headers[h]);
                dump_origin(c, i, f);
            }
            if (c->upstream_nheaders > 0)
                continue;
            fprintf(f, "%s =", k->name);
            break;
        case ENR_KEY_MODE:
            memcpy(&u, field, sizeof u);
            fprintf(f, "%s = %04o", k->name, u);
            break;
        case ENR_KEY_PER_CPU:
        case ENR_KEY_UINT:
        case ENR_KEY_SIZE:
            if (k->size == sizeof(size_t)) {
                memcpy(&z, field, sizeof z);
                fprintf(f, "%s = %zu", k->name, z);
            } else {
                memcpy(&u, field, sizeof u);
                fprintf(f, "%s = %u", k->name, u);
            }
            break;
        case ENR_KEY_RATIO:
            memcpy(&d, field, sizeof d);
            fprintf(f, "%s = %.15g", k->name, d);
            break;
        default: /* text: above */
            break;
        }
        dump_origin(c, i, f);
    }
}

unsigned enr_config_line(const enr_config *c, const char *key)
{
    for (size_t i = 0; i < enr_config_nkeys; i++)
        if (strcmp(enr_config_keys[i].name, key) == 0)
            return c->key_line[i];
    return 0;
}

/* Whether key k says the same in a and b. */
static int key_same(const enr_config_key *k, const enr_config *a, const enr_config *b)
{
    const char *x = (const char *)a + k->off, *y = (const char *)b + k->off;

    if (k->type == ENR_KEY_HEADER) {
        if (a->upstream_nheaders != b->upstream_nheaders)
            return 0;
        for (unsigned h = 0; h < a->upstream_nheaders; h++)
            if (strcmp(a->upstream_headers[h], b->upstream_headers[h]) != 0)
                return 0;
        return 1;
    }
    return enr_config_key_is_text(k) ? strcmp(x, y) == 0 : memcmp(x, y, k->size) == 0;
}

unsigned enr_config_keep_restart(enr_config *next, const enr_config *cur, char *names, size_t len)
{
    unsigned n = 0;
    size_t at = 0;

    if (len > 0)
        names[0] = '\0';
    for (size_t i = 0; i < enr_config_nkeys; i++) {
        const enr_config_key *k = &enr_config_keys[i];
        /* A plain field: no row of a type with a second home (the
         * headers' count, listen_allow's parsed networks) is RESTART
         * (tests/unit/test_config.c holds the rows to that). */
        if (k->reload != ENR_RELOAD_RESTART || key_same(k, next, cur))
            continue;
        memcpy((char *)next + k->off, (const char *)cur + k->off, k->size);
        if (at < len)
            at += (size_t)snprintf(names + at, len - at, "%s%s", n ? "," : "", k->name);
        n++;
    }
    return n;
}

/* The first row of this reload column whose value differs, by its field. */
static const char *changed_in(const enr_config *next, const enr_config *cur,
                              enum enr_config_reload reload)
{
    for (size_t i = 0; i < enr_config_nkeys; i++)
        if (enr_config_keys[i].reload == reload && !key_same(&enr_config_keys[i], next, cur))
            return enr_config_keys[i].field;
    return NULL;
}

const char *enr_config_cache_change(const enr_config *next, const enr_config *cur)
{
    const char *why = changed_in(next, cur, ENR_RELOAD_IDENTITY);

    if (why == NULL)
        why = enr_config_secret_change(next, cur);
    if (why == NULL)
        why = changed_in(next, cur, ENR_RELOAD_LAYOUT);
    return why;
}

void enr_config_identity(const enr_config *c, enr_config_part_fn fn, void *arg)
{
    for (size_t i = 0; i < enr_config_nkeys; i++) {
        const enr_config_key *k = &enr_config_keys[i];
        const char *v = (const char *)c + k->off;
        if (k->reload != ENR_RELOAD_IDENTITY)
            continue;
        if (k->type == ENR_KEY_HEADER) {
            for (unsigned h = 0; h < c->upstream_nheaders; h++)
                fn(arg, k->field, c->upstream_headers[h], strlen(c->upstream_headers[h]));
        } else if (enr_config_key_is_text(k)) {
            fn(arg, k->field, v, strlen(v));
        } else {
            fn(arg, k->field, v, k->size);
        }
    }
    enr_config_secret_parts(c, fn, arg);
}
