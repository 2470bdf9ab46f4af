/*
 * engine.c: the record rules of the contract (docs/contract.md §3-7, 13)
 * on top of the reader; the printer is emit.c.
 *
 * enr_parse() turns each object element into an enr_record as soon as the
 * reader has it (streaming: the body is walked once), so a batch holds
 * only the accepted records' strings.  Any contract error discards the
 * whole batch: a rejected request never produces NDJSON.
 *
 * Invariants: record strings live in batch->text and are referenced by
 * offset (the arena may move while it grows); an enr_engine is used by one
 * thread.  With max_output set, nothing here grows with what the input
 * inflates to: the reader's field texts are capped (an id, a title or a
 * duration text longer than max_output cannot be printed in an output
 * that fits), a running lower bound of the output (ENR_LINE_MIN + id +
 * title per record) refuses a batch as soon as it cannot fit, and the
 * printer stops at the limit.
 *
 * A title string, and an id of plain ASCII, is left in the body by the
 * reader (enr_field.raw) and read there: the title pass validates UTF-8
 * as it goes, and only a title it cannot take as it is gets decoded the
 * reader's way first (slow mode: always, by the reader).
 */
#include "engine/engine.h"
#include "engine/engine_int.h"

#include <math.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdio.h>
#include <string.h>

#include "engine/jstring.h"
#include "engine/numfmt.h"
#include "engine/reader.h"
#include "base/text.h"
#include "engine/unicode.h"

/* The shortest possible output line: everything but the id, the title
 * and the poster, the shortest duration and fetched_at.  A record's line
 * is at least this + its id + its title. */
#define ENR_LINE_MIN                                                                               \
    (sizeof("{\"hash\":\"0123456789012345678901234567890123456789\",\"provider\":\"yt\","          \
            "\"id\":\"\",\"title\":\"\",\"poster\":\"\",\"duration\":0,\"availability\":{"         \
            "\"US\":true,\"GB\":true,\"JP\":true,\"KR\":true,\"TW\":true,\"SG\":true,"             \
            "\"VN\":true,\"TH\":true},\"fetched_at\":0}\n") -                                      \
     1)

static const char output_limit_msg[] = "output larger than max_output_bytes";

enr_engine *enr_engine_new(void)
{
    enr_engine *e = calloc(1, sizeof(*e));

    if (e == NULL)
        return NULL;
#ifdef __GLIBC__
    /* A fixed threshold keeps every large buffer in its own mapping, so
     * freeing one after a huge request gives the memory back.  Left
     * dynamic, glibc raises the threshold to the size of the first such
     * buffer freed and serves the next ones from the heap, which keeps
     * them resident (enr_engine_shrink would then free nothing). */
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
#endif
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
    free(e);
}

void enr_engine_set_max_output(enr_engine *e, size_t max)
{
    e->max_output = max;
}

void enr_engine_set_slow(enr_engine *e, int slow)
{
    e->rd.slow = slow;
    e->slow = slow;
    enr_uni_set_slow(e->uni, slow);
}

void enr_engine_shrink(enr_engine *e, enr_batch *b, size_t keep)
{
    enr_buf_shrink(&e->f.id.text, keep);
    enr_buf_shrink(&e->f.title.text, keep);
    enr_buf_shrink(&e->f.duration.text, keep);
    enr_uni_shrink(e->uni, keep);
    enr_buf_shrink(&b->text, keep);
    if (b->cap * sizeof(*b->recs) > keep) {
        free(b->recs);
        b->recs = NULL;
        b->n = b->cap = 0;
    }
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
    err->limit = err->reached = 0;
    err->record = -1;
    snprintf(err->msg, sizeof(err->msg), "%s", msg);
    return -1;
}

/* The output could not fit in max_output: it would reach at least
 * `reached` bytes, at output line `record`. */
int enr_engine_output_fail(const enr_engine *e, enr_error *err, long element, size_t record,
                           size_t reached)
{
    fail(err, 413, -1, element, output_limit_msg);
    err->limit = e->max_output;
    err->reached = reached;
    err->record = (long)record;
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
        /* Past its cap (max(max_output, body) + 64) a text cannot be a
         * number: that needs one string or number, no comma, no
         * "[object Object]", and a string is no longer than the body. */
        v = d->text.over ? NAN : enr_num_from_text(d->text.data, d->text.len);
        break;
    default: /* missing (NaN), null, false, object (NaN) */
        v = 0;
        break;
    }
    return (isnan(v) || v == 0) ? 0 : v;
}

/* Turns the fields of one object element into a record, or skips it. */
/* Rule 4: the id's text as JavaScript's String() would give it, between
 * *s and *t; returns whether the id is truthy (a falsy one drops the
 * record). */
static int id_text(const enr_field *id, const unsigned char **s, const unsigned char **t)
{
    switch (id->kind) {
    case ENR_K_STRING:
    case ENR_K_NUMBER:
    case ENR_K_ARRAY:
        /* an empty buffer may have no allocation yet: never offset NULL */
        *s = (const unsigned char *)(id->text.len ? id->text.data : "");
        *t = *s + id->text.len;
        if (id->raw != NULL) { /* ASCII in the body, as decoding gives it */
            *s = id->raw;
            *t = *s + id->raw_len;
            return id->raw_len > 0;
        }
        /* "" and 0 are falsy; an array is truthy even when it prints "" */
        return id->kind == ENR_K_ARRAY ||
               (id->kind == ENR_K_STRING ? id->text.len > 0 : id->num != 0);
    case ENR_K_TRUE:
        *s = (const unsigned char *)"true";
        *t = *s + 4;
        return 1;
    case ENR_K_OBJECT:
        *s = (const unsigned char *)"[object Object]";
        *t = *s + 15;
        return 1;
    default:
        *s = *t = NULL;
        return 0;
    }
}

/* Room for twice as many records (the batch is full).  0 or -1. */
static int grow_records(enr_batch *b)
{
    size_t cap = b->cap ? b->cap * 2 : 64;
    enr_record *nr = realloc(b->recs, cap * sizeof(*nr));

    if (nr == NULL)
        return -1;
    b->recs = nr;
    b->cap = cap;
    return 0;
}

/* The id lower-cased, then its original-case copy (the key), into
 * b->text: the id first, so that one that cannot fit is refused before
 * the key is made.  0, 1 when the id lower-cases to nothing (the record
 * is dropped, b->text as it was), -1 (err). */
static int add_id(enr_engine *e, enr_batch *b, enr_record *rec, const unsigned char *s,
                  const unsigned char *t, long element, enr_error *err)
{
    size_t mark = b->text.len, room = ENR_UNI_NO_MAX;
    int rc;

    if (e->max_output) {
        if (e->lower + ENR_LINE_MIN > e->max_output)
            return enr_engine_output_fail(e, err, element, b->n, e->lower + ENR_LINE_MIN);
        room = e->max_output - e->lower - ENR_LINE_MIN;
    }
    rec->id_off = b->text.len;
    rc = enr_uni_id(e->uni, (const char *)s, (size_t)(t - s), room, &b->text);
    if (rc == ENR_UNI_TOO_LONG)
        return enr_engine_output_fail(e, err, element, b->n, e->lower + ENR_LINE_MIN + room + 1);
    if (rc < 0)
        return fail(err, 500, -1, element, "unicode: lower-casing failed");
    rec->id_len = b->text.len - rec->id_off;
    if (rec->id_len == 0) {
        b->text.len = mark;
        return 1;
    }
    rec->key_off = b->text.len;
    rec->key_len = (size_t)(t - s);
    enr_buf_append(&b->text, s, rec->key_len);
    return 0;
}

/* A string title normalized into b->text within room: from the body's
 * bytes when the reader kept them (decoded here if escaped), else, or
 * when those need the general path, from the decoded text.  0 or -1. */
static int add_string_title(enr_engine *e, enr_batch *b, const enr_fields *f, size_t used,
                            long element, enr_error *err)
{
    size_t room = ENR_UNI_NO_MAX;
    int rc = 0;

    if (e->max_output) {
        if (f->title.text.over || used > e->max_output)
            return enr_engine_output_fail(e, err, element, b->n, e->max_output + 1);
        room = e->max_output - used;
    }
    if (f->title.raw != NULL && f->title.raw_len > 0) {
        const char *v = (const char *)f->title.raw;
        size_t n = f->title.raw_len;

        if (f->title.raw_escaped) { /* never longer than the body's bytes */
            enr_jstring_decode_unchecked(f->title.raw, f->title.raw + n, &e->f.title.text);
            if (e->f.title.text.oom)
                return fail(err, 500, -1, element, "out of memory");
            v = e->f.title.text.data;
            n = e->f.title.text.len;
        }
        rc = n > 0 ? enr_uni_title_raw(e->uni, v, n, room, &b->text) : 0;
        if (rc == 1) { /* decoded, as the reader would have, then as usual */
            enr_buf_reset(&e->f.title.text);
            enr_jstring_decode(f->title.raw, f->title.raw + f->title.raw_len, f->title.raw_escaped,
                               1, 0, &e->f.title.text);
            if (e->f.title.text.over)
                return enr_engine_output_fail(e, err, element, b->n, e->max_output + 1);
            if (e->f.title.text.oom)
                return fail(err, 500, -1, element, "out of memory");
        }
    }
    if ((f->title.raw == NULL || rc == 1) && f->title.text.len > 0)
        rc = enr_uni_title(e->uni, f->title.text.data, f->title.text.len, room, &b->text);
    if (rc == ENR_UNI_TOO_LONG)
        return enr_engine_output_fail(e, err, element, b->n, used + room + 1);
    if (rc < 0)
        return fail(err, 500, -1, element, "unicode: normalization failed");
    return 0;
}

/* Rule 7: only truthy strings are normalized; other truthy values throw.
 * 0 or -1. */
static int add_title(enr_engine *e, enr_batch *b, enr_record *rec, const enr_fields *f,
                     long element, enr_error *err)
{
    rec->title_off = b->text.len;
    switch (f->title.kind) {
    case ENR_K_STRING:
        /* what is left of max_output for this title, or no limit */
        if (add_string_title(e, b, f, e->lower + ENR_LINE_MIN + rec->id_len, element, err) < 0)
            return -1;
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
    return 0;
}

static int add_record(enr_engine *e, enr_batch *b, const enr_fields *f, long element,
                      enr_error *err)
{
    const unsigned char *s, *t;
    enr_record *rec;
    int rc;

    /* Rule 4.5/4.6: the id is converted before the provider is checked. */
    if (f->id.tostring)
        return fail(err, 400, -1, element, "id: object with a toString key cannot be converted");
    if (f->provider == ENR_PROV_NONE)
        return 0;
    /* A text past its cap is not white space only: the record is
     * accepted, and its id cannot fit in the output. */
    if (f->id.text.over)
        return enr_engine_output_fail(e, err, element, b->n,
                                      e->lower + ENR_LINE_MIN + e->max_output + 1);
    if (!id_text(&f->id, &s, &t))
        return 0;
    trim_ws(&s, &t);
    if (s == t)
        return 0;

    if (b->n == b->cap && grow_records(b) != 0)
        return fail(err, 500, -1, element, "out of memory");
    rec = &b->recs[b->n];
    memset(rec, 0, sizeof(*rec));
    rec->element = (uint32_t)element;
    rec->provider = (uint8_t)f->provider;
    rc = add_id(e, b, rec, s, t, element, err);
    if (rc != 0)
        return rc > 0 ? 0 : rc;
    if (add_title(e, b, rec, f, element, err) != 0)
        return -1;

    if (f->duration.tostring)
        return fail(err, 400, -1, element,
                    "duration: object with a toString key cannot be converted");
    rec->duration = duration_of(&f->duration);
    rec->avail = f->blocked_arr ? (uint8_t)~f->blocked : 0xff;
    if (b->text.oom)
        return fail(err, 500, -1, element, "out of memory");
    e->lower += ENR_LINE_MIN + rec->id_len + rec->title_len;
    if (e->max_output && e->lower > e->max_output)
        return enr_engine_output_fail(e, err, element, b->n, e->lower);
    b->n++;
    return 0;
}

int enr_parse(enr_engine *e, const char *body, size_t len, size_t max_records, enr_batch *b,
              enr_error *err)
{
    enr_reader *r = &e->rd;
    int rc, refused = 0;

    enr_batch_reset(b);
    e->lower = 0;
    /* What a text can hold beyond what reaches the output comes from the
     * body itself (white space trimmed or folded, letters that lower-case
     * shorter): past max_output + len it cannot be printed in max_output. */
    if (e->max_output) {
        size_t cap = e->max_output + len + 64;
        e->f.id.text.max = e->f.title.text.max = cap < len ? (size_t)-1 : cap;
        e->f.duration.text.max = (e->max_output > len ? e->max_output : len) + 64;
    } else {
        e->f.id.text.max = e->f.title.text.max = e->f.duration.text.max = 0;
    }
    /* the title pass reads unescaped titles in the body, validating them
     * as it goes; ids are read there when they are plain ASCII */
    e->f.title.raw_ok = e->slow ? ENR_RAW_NONE : ENR_RAW_ANY;
    e->f.id.raw_ok = e->slow ? ENR_RAW_NONE : ENR_RAW_ASCII;
    enr_reader_init(r, body, len, max_records);
    if (enr_reader_begin(r) < 0)
        return fail(err, r->err_status, r->err_offset, -1, r->err_msg);
    while ((rc = enr_reader_next(r, &e->f)) == 1)
        if (add_record(e, b, &e->f, (long)r->record_element, err) < 0) {
            refused = 1;
            break;
        }
    /* The fields are copied into b: what one record grew goes now, not
     * after the output has been built next to it. */
    enr_buf_shrink(&e->f.id.text, ENR_KEEP_BYTES);
    enr_buf_shrink(&e->f.title.text, ENR_KEEP_BYTES);
    enr_buf_shrink(&e->f.duration.text, ENR_KEEP_BYTES);
    if (refused)
        return -1; /* add_record filled err */
    if (rc < 0)
        return fail(err, r->err_status, r->err_offset,
                    r->element == (size_t)-1 ? -1 : (long)r->element, r->err_msg);
    b->elements = r->elements;
    return 0;
}
