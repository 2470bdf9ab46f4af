/*
 * engine.c: the record rules of the contract (CONTRACT 3-7, 11, 13, 16)
 * on top of the reader, and the NDJSON printer.
 *
 * enr_parse() turns each object element into an enr_record as soon as the
 * reader has it (streaming: the body is walked once), so a batch holds
 * only the accepted records' strings.  Any contract error discards the
 * whole batch: a rejected request never produces NDJSON.
 *
 * Invariants: record strings live in batch->text and are referenced by
 * offset (the arena may move while it grows); an enr_engine is used by one
 * thread.
 */
/* SHA-1 through OpenSSL's direct interface: the EVP path initialises the
 * provider machinery on first use, 2-7 ms measured here, which alone
 * would break the CLI's cold start, and EVP costs 17 us per 200 keys
 * against 10 us this way.  The function is deprecated in OpenSSL 3 (in
 * favour of EVP), not removed; this file is its only user. */
#define OPENSSL_SUPPRESS_DEPRECATED

#include "engine.h"

#include <math.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "numfmt.h"
#include "reader.h"
#include "text.h"
#include "unicode.h"

struct enr_engine {
    enr_uni *uni;
    enr_reader rd;
    enr_fields f;
    enr_buf scratch; /* hash input */
};

static const char *const provider_names[] = {"", "yt", "vm", "dm"};
static const char *const provider_bases[] = {
    "", "https://i.ytimg.com/vi", "https://i.vimeocdn.com/video", "https://s2.dmcdn.net/v"};
static const char availability_keys[ENR_REGIONS][24] = {",\"availability\":{\"US\":",
                                                        ",\"GB\":",
                                                        ",\"JP\":",
                                                        ",\"KR\":",
                                                        ",\"TW\":",
                                                        ",\"SG\":",
                                                        ",\"VN\":",
                                                        ",\"TH\":"};

const char *enr_provider_name(int provider)
{
    return provider > 0 && provider <= ENR_PROV_DM ? provider_names[provider] : "";
}

const char *enr_provider_base(int provider)
{
    return provider > 0 && provider <= ENR_PROV_DM ? provider_bases[provider] : "";
}

enr_engine *enr_engine_new(void)
{
    enr_engine *e = calloc(1, sizeof(*e));

    if (e == NULL)
        return NULL;
    e->uni = enr_uni_new();
    if (e->uni == NULL) {
        enr_engine_free(e);
        return NULL;
    }
    return e;
}

void enr_engine_free(enr_engine *e)
{
    if (e == NULL)
        return;
    enr_uni_free(e->uni);
    enr_reader_free(&e->rd);
    enr_fields_free(&e->f);
    enr_buf_free(&e->scratch);
    free(e);
}

void enr_batch_reset(enr_batch *b)
{
    b->n = 0;
    b->elements = 0;
    enr_buf_reset(&b->text);
}

void enr_batch_free(enr_batch *b)
{
    free(b->recs);
    b->recs = NULL;
    b->n = b->cap = 0;
    enr_buf_free(&b->text);
}

static int fail(enr_error *err, int status, long offset, long element, const char *msg)
{
    err->status = status;
    err->offset = offset;
    err->element = element;
    snprintf(err->msg, sizeof(err->msg), "%s", msg);
    return -1;
}

static void trim_ws(const unsigned char **s, const unsigned char **e)
{
    size_t n;

    while (*s < *e && (n = enr_ws_len(*s, *e)) > 0)
        *s += n;
    while (*e > *s && (n = enr_ws_len_back(*s, *e)) > 0)
        *e -= n;
}

/* ECMAScript Number(value) for duration (rule 13.1), NaN folded to 0. */
static double duration_of(const enr_field *d)
{
    double v;

    switch (d->kind) {
    case ENR_K_TRUE:
        v = 1;
        break;
    case ENR_K_NUMBER:
        v = d->num;
        break;
    case ENR_K_STRING:
    case ENR_K_ARRAY:
        v = enr_num_from_text(d->text.data, d->text.len);
        break;
    default: /* missing (NaN), null, false, object (NaN) */
        v = 0;
        break;
    }
    return (isnan(v) || v == 0) ? 0 : v;
}

/* Turns the fields of one object element into a record, or skips it. */
static int add_record(enr_engine *e, enr_batch *b, const enr_fields *f, long element,
                      enr_error *err)
{
    const unsigned char *s, *t;
    enr_record *rec;
    size_t mark = b->text.len;
    int truthy;

    /* Rule 4.5/4.6: the id is converted before the provider is checked. */
    if (f->id.tostring)
        return fail(err, 400, -1, element, "id: object with a toString key cannot be converted");
    if (f->provider == ENR_PROV_NONE)
        return 0;
    switch (f->id.kind) {
    case ENR_K_STRING:
    case ENR_K_NUMBER:
    case ENR_K_ARRAY:
        /* "" and 0 are falsy; an array is truthy even when it prints "" */
        truthy = f->id.kind == ENR_K_ARRAY ||
                 (f->id.kind == ENR_K_STRING ? f->id.text.len > 0 : f->id.num != 0);
        /* an empty buffer may have no allocation yet: never offset NULL */
        s = (const unsigned char *)(f->id.text.len ? f->id.text.data : "");
        t = s + f->id.text.len;
        break;
    case ENR_K_TRUE:
        truthy = 1;
        s = (const unsigned char *)"true";
        t = s + 4;
        break;
    case ENR_K_OBJECT:
        truthy = 1;
        s = (const unsigned char *)"[object Object]";
        t = s + 15;
        break;
    default:
        truthy = 0;
        s = t = NULL;
        break;
    }
    if (!truthy)
        return 0;
    trim_ws(&s, &t);
    if (s == t)
        return 0;

    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        enr_record *nr = realloc(b->recs, cap * sizeof(*nr));

        if (nr == NULL)
            return fail(err, 500, -1, element, "out of memory");
        b->recs = nr;
        b->cap = cap;
    }
    rec = &b->recs[b->n];
    memset(rec, 0, sizeof(*rec));
    rec->element = (uint32_t)element;
    rec->provider = (uint8_t)f->provider;

    rec->key_off = b->text.len;
    rec->key_len = (size_t)(t - s);
    enr_buf_append(&b->text, s, rec->key_len);
    rec->id_off = b->text.len;
    if (enr_uni_id(e->uni, (const char *)s, (size_t)(t - s), &b->text) < 0)
        return fail(err, 500, -1, element, "unicode: lower-casing failed");
    rec->id_len = b->text.len - rec->id_off;
    if (rec->id_len == 0) {
        b->text.len = mark;
        return 0;
    }

    /* Rule 7: only truthy strings are normalized; other truthy values throw. */
    rec->title_off = b->text.len;
    switch (f->title.kind) {
    case ENR_K_STRING:
        if (f->title.text.len > 0 &&
            enr_uni_title(e->uni, f->title.text.data, f->title.text.len, &b->text) < 0)
            return fail(err, 500, -1, element, "unicode: normalization failed");
        break;
    case ENR_K_NUMBER:
        if (f->title.num != 0)
            return fail(err, 400, -1, element, "title: a number is not a string");
        break;
    case ENR_K_TRUE:
    case ENR_K_ARRAY:
    case ENR_K_OBJECT:
        return fail(err, 400, -1, element, "title: must be a string");
    default:
        break;
    }
    rec->title_len = b->text.len - rec->title_off;

    if (f->duration.tostring)
        return fail(err, 400, -1, element,
                    "duration: object with a toString key cannot be converted");
    rec->duration = duration_of(&f->duration);
    rec->avail = f->blocked_arr ? (uint8_t)~f->blocked : 0xff;
    if (b->text.oom)
        return fail(err, 500, -1, element, "out of memory");
    b->n++;
    return 0;
}

int enr_parse(enr_engine *e, const char *body, size_t len, size_t max_records, enr_batch *b,
              enr_error *err)
{
    enr_reader *r = &e->rd;
    int rc;

    enr_batch_reset(b);
    enr_reader_init(r, body, len, max_records);
    if (enr_reader_begin(r) < 0)
        return fail(err, r->err_status, r->err_offset, -1, r->err_msg);
    while ((rc = enr_reader_next(r, &e->f)) == 1)
        if (add_record(e, b, &e->f, (long)r->record_element, err) < 0)
            return -1;
    if (rc < 0)
        return fail(err, r->err_status, r->err_offset,
                    r->element == (size_t)-1 ? -1 : (long)r->element, r->err_msg);
    b->elements = r->elements;
    return 0;
}

/* JSON string body (no quotes) of WTF-8 text, escaped per rule 11. */
static void put_escaped(enr_buf *out, const char *str, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)str, *end = s + n;

    if (enr_buf_reserve(out, n + 16) != 0)
        return;
    while (s < end) {
        const unsigned char *run = s;
        unsigned c;

        while (s < end && *s >= 0x20 && *s != '"' && *s != '\\' && *s != 0xed)
            s++;
        enr_buf_append(out, run, (size_t)(s - run));
        if (s >= end)
            break;
        c = *s;
        if (c == 0xed) {
            if (end - s >= 3 && s[1] >= 0xa0) { /* lone surrogate (text.h) */
                unsigned cp = 0xd000u | ((s[1] & 0x3fu) << 6) | (s[2] & 0x3fu);
                char u[6] = {
                    '\\',        'u', hex[cp >> 12], hex[(cp >> 8) & 15], hex[(cp >> 4) & 15],
                    hex[cp & 15]};

                enr_buf_append(out, u, 6);
                s += 3;
            } else {
                enr_buf_putc(out, (char)c);
                s++;
            }
            continue;
        }
        s++;
        switch (c) {
        case '"':
            enr_buf_lit(out, "\\\"");
            break;
        case '\\':
            enr_buf_lit(out, "\\\\");
            break;
        case '\b':
            enr_buf_lit(out, "\\b");
            break;
        case '\t':
            enr_buf_lit(out, "\\t");
            break;
        case '\n':
            enr_buf_lit(out, "\\n");
            break;
        case '\f':
            enr_buf_lit(out, "\\f");
            break;
        case '\r':
            enr_buf_lit(out, "\\r");
            break;
        default: {
            char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};

            enr_buf_append(out, u, 6);
            break;
        }
        }
    }
}

/* Rule 6: SHA-1 of provider ":" id, lone surrogates hashed as U+FFFD. */
static void put_hash(enr_engine *e, enr_buf *out, const char *prov, const char *id, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char md[SHA_DIGEST_LENGTH];
    SHA_CTX ctx;
    unsigned i;
    char h[40];
    enr_buf *in = &e->scratch;

    enr_buf_reset(in);
    enr_buf_append(in, prov, 2);
    enr_buf_putc(in, ':');
    enr_buf_append(in, id, n);
    for (i = 3; i + 2 < in->len + 0u; i++) {
        unsigned char *p = (unsigned char *)in->data + i;

        if (p[0] == 0xed && p[1] >= 0xa0) {
            p[0] = 0xef;
            p[1] = 0xbf;
            p[2] = 0xbd;
            i += 2;
        }
    }
    if (SHA1_Init(&ctx) != 1 || SHA1_Update(&ctx, in->data, in->len) != 1 ||
        SHA1_Final(md, &ctx) != 1) {
        out->oom = 1; /* cannot fail for SHA-1; never print a wrong hash */
        return;
    }
    for (i = 0; i < 20; i++) {
        h[2 * i] = hex[md[i] >> 4];
        h[2 * i + 1] = hex[md[i] & 15];
    }
    enr_buf_append(out, h, 40);
}

static void put_u64(enr_buf *out, uint64_t v)
{
    char d[24];
    int i = 24;

    do {
        d[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    enr_buf_append(out, d + i, (size_t)(24 - i));
}

void enr_emit(enr_engine *e, const enr_batch *b, enr_buf *out)
{
    char num[ENR_NUM_MAX];

    if (b->n == 0) {
        enr_buf_putc(out, '\n');
        return;
    }
    for (size_t i = 0; i < b->n; i++) {
        const enr_record *r = &b->recs[i];
        const char *text = b->text.data;
        const char *prov = provider_names[r->provider];

        enr_buf_lit(out, "{\"hash\":\"");
        put_hash(e, out, prov, text + r->id_off, r->id_len);
        enr_buf_lit(out, "\",\"provider\":\"");
        enr_buf_append(out, prov, 2);
        enr_buf_lit(out, "\",\"id\":\"");
        put_escaped(out, text + r->id_off, r->id_len);
        enr_buf_lit(out, "\",\"title\":\"");
        put_escaped(out, text + r->title_off, r->title_len);
        enr_buf_lit(out, "\",\"poster\":\"");
        if (r->poster_len > 0) {
            put_escaped(out, text + r->poster_off, r->poster_len);
        } else {
            const char *base = provider_bases[r->provider];

            enr_buf_append(out, base, strlen(base));
            enr_buf_putc(out, '/');
            put_escaped(out, text + r->id_off, r->id_len);
            enr_buf_lit(out, "/hqdefault.jpg");
        }
        enr_buf_lit(out, "\",\"duration\":");
        if (isinf(r->duration))
            enr_buf_lit(out, "null");
        else
            enr_buf_append(out, num, enr_num_format(r->duration, num));
        for (int k = 0; k < ENR_REGIONS; k++) {
            enr_buf_append(out, availability_keys[k], strlen(availability_keys[k]));
            if (r->avail & (1u << k))
                enr_buf_lit(out, "true");
            else
                enr_buf_lit(out, "false");
        }
        enr_buf_lit(out, "},\"fetched_at\":");
        put_u64(out, enr_wall_ms());
        enr_buf_lit(out, "}\n");
    }
}

/* JSON string of plain ASCII text (error messages are ours, no escapes
 * beyond quotes and backslashes needed). */
void enr_error_json(const enr_error *err, enr_buf *out)
{
    enr_buf_lit(out, "{\"error\":\"");
    put_escaped(out, err->msg, strlen(err->msg));
    enr_buf_putc(out, '"');
    if (err->offset >= 0) {
        enr_buf_lit(out, ",\"offset\":");
        put_u64(out, (uint64_t)err->offset);
    }
    if (err->element >= 0) {
        enr_buf_lit(out, ",\"element\":");
        put_u64(out, (uint64_t)err->element);
    }
    enr_buf_lit(out, "}\n");
}
