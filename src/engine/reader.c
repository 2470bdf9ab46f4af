/*
 * reader.c: the strict, streaming JSON reader of a request batch, at the
 * level of the batch and its records (see reader.h for what it hands
 * out; the tokens, and the walk and skip of any value, are lex.h and
 * lex.c).
 *
 * The top-level array is read element by element; in an object element
 * (a record) only id, title, duration, provider and blocked are read,
 * converted as the contract's fields (ECMAScript String()/Number() of
 * arrays and objects, a provider's and a region's name), their strings
 * decoded to WTF-8 with the maximal-subpart replacement.  The walk of a
 * record's members inlines the member callback (record_member); a value
 * nobody reads is skipped by one loop (skip_fast) rather than a call per
 * element, with its short strings and its numbers told inline, and a
 * record's unread members in a row are skipped together (skip_unread).
 * Each fast path has its slow path behind r->slow, the reference of the
 * fast fuzz target.
 *
 * Invariants: a field holds its LAST occurrence in the record; nothing
 * is allocated but the fields' text and the scratch (capped at
 * SCRATCH_MAX); depth counts the outer array as 1 (docs/contract.md §15),
 * deeper than ENR_MAX_DEPTH is a 400.
 */
#include "engine/reader.h"

#include <string.h>

#include "engine/contract.h"
#include "engine/lex.h"
#include "engine/numfmt.h"

/* The reader's scratch only ever compares a decoded key or string with a
 * name of at most 8 bytes ("toString", "provider"), whose escaped form is
 * at most 48 bytes: anything longer is no match, and is never decoded
 * whole (a key of invalid bytes would triple). */
#define SCRATCH_MAX 64

#define REGION(a, b) ((unsigned)(a) | (unsigned)(b) << 8)
static const unsigned region_codes[ENR_REGIONS] = {
    REGION('U', 'S'), REGION('G', 'B'), REGION('J', 'P'), REGION('K', 'R'),
    REGION('T', 'W'), REGION('S', 'G'), REGION('V', 'N'), REGION('T', 'H')};

static int text_value(enr_reader *r, int depth, enr_buf *out, uint8_t *tostring);

void enr_reader_init(enr_reader *r, const char *body, size_t len, size_t max_elements)
{
    enr_buf keep = r->scratch;
    int slow = r->slow;

    memset(r, 0, sizeof(*r));
    r->scratch = keep;
    r->slow = slow;
    enr_buf_reset(&r->scratch);
    r->scratch.max = SCRATCH_MAX;
    r->start = r->p = (const unsigned char *)body;
    r->end = r->start + len;
    r->max_elements = max_elements;
    r->err_offset = -1;
}

void enr_reader_free(enr_reader *r)
{
    enr_buf_free(&r->scratch);
}

void enr_fields_free(enr_fields *f)
{
    enr_buf_free(&f->id.text);
    enr_buf_free(&f->title.text);
    enr_buf_free(&f->duration.text);
}

/* Are the two bytes at p those of s: one 16-bit compare. */
static inline int two_bytes(const unsigned char *p, const char *s)
{
    uint16_t a, b;

    memcpy(&a, p, 2);
    memcpy(&b, s, 2);
    return a == b;
}

/*
 * enr_lex_skip_value for the values a record holds and nobody reads
 * (tags, stats, descriptions: most of a batch): one loop with the
 * nesting in a bit stack instead of a call per element and per member.
 * It accepts exactly what enr_lex_skip_value accepts and stops at the
 * same byte; on any byte it does not expect it starts over with
 * enr_lex_skip_value, which finds and reports the error (the fuzz target
 * compares the two).  The shapes of a batch's bulk go without the
 * switch per token: an array of integers 16 bytes a step
 * (enr_lex_int_array), a short key and its ':' from one load, then a
 * number or a string at once.  It is here, beside skip_unread, its one caller,
 * because it must be inlined there: a call per unread member costs 1 to
 * 2% of a batch's instructions.
 */
#define SKIP_LEVELS 63 /* deeper: enr_lex_skip_value */
#define SKIP_INLINE static inline __attribute__((always_inline))

/* Where skip_fast is: its byte, and the containers open around it (bit 0
 * of objects: the innermost is an object).  Kept in registers: every
 * function below is inlined into skip_fast. */
typedef struct skip_nest {
    const unsigned char *p;
    uint64_t objects;
    int level;
    int tight; /* the last key had no white space around its ':' */
} skip_nest;

/* Inside an array: a run of strings or numbers is taken at once. */
SKIP_INLINE int skip_in_array(const skip_nest *n)
{
    return n->level != 0 && !(n->objects & 1);
}

/* Room for one more container, in the bit stack and under ENR_MAX_DEPTH. */
SKIP_INLINE int skip_room(const skip_nest *n, int depth)
{
    return n->level < SKIP_LEVELS && depth + n->level + 1 <= ENR_MAX_DEPTH;
}

SKIP_INLINE void skip_push(skip_nest *n, unsigned is_object)
{
    n->objects = n->objects << 1 | is_object;
    n->level++;
}

/* The innermost container's closing byte at n->p: taken, 1. */
SKIP_INLINE int skip_close(skip_nest *n, const unsigned char *end)
{
    if (n->p < end && *n->p == ((n->objects & 1) ? '}' : ']')) {
        n->p++;
        n->objects >>= 1;
        n->level--;
        return 1;
    }
    return 0;
}

/* The string whose opening quote is at p: past its closing one, or NULL. */
SKIP_INLINE const unsigned char *skip_string(const unsigned char *p, const unsigned char *end)
{
    p = enr_lex_skip_str(p + 1, end);
    return p < end && *p == '"' ? p + 1 : NULL;
}

/* Strings in an array (tags): the one at p and every next one at once. */
SKIP_INLINE const unsigned char *skip_strings(const unsigned char *p, const unsigned char *end)
{
    for (;;) {
        if ((p = skip_string(p, end)) == NULL)
            return NULL;
        if (end - p < 2 || !two_bytes(p, ",\""))
            return p;
        p++;
    }
}

/* A number, and in an array (a history) every next one at once. */
SKIP_INLINE const unsigned char *skip_numbers(const unsigned char *p, const unsigned char *end,
                                              int run)
{
    for (;;) {
        if ((p = enr_lex_skip_num(p, end)) == NULL)
            return NULL;
        if (!run || end - p < 2 || p[0] != ',' || (unsigned)(p[1] - '0') >= 10)
            return p;
        p++;
    }
}

/* The literal word (true, false, null) at p. */
SKIP_INLINE const unsigned char *skip_word(const unsigned char *p, const unsigned char *end,
                                           const char *word, size_t n)
{
    return (size_t)(end - p) >= n && memcmp(p, word, n) == 0 ? p + n : NULL;
}

/* The key at p and its ':': p on the member's value, or NULL; *tight
 * when no white space came around the ':' (what clients send). */
SKIP_INLINE const unsigned char *skip_key(const unsigned char *p, const unsigned char *end,
                                          int *tight)
{
    *tight = 1;
#ifdef __SSE2__
    /* a short key without escapes right before its ':': its closing
     * quote and the ':' told from one load */
    if (end - p >= 19 && *p == '"') {
        unsigned m = enr_lex_stops16(p + 1);

        if (m != 0) {
            const unsigned char *q = p + 1 + __builtin_ctz(m);

            if (two_bytes(q, "\":") && q[2] > ' ')
                return q + 2;
        }
    }
#endif
    if (p >= end || *p != '"')
        return NULL;
    p = enr_lex_skip_str(p + 1, end);
    if (p >= end || *p != '"')
        return NULL;
    if (end - p > 2 && p[1] == ':' && p[2] > ' ')
        return p + 2;
    *tight = 0;
    p = enr_lex_ws_end(p + 1, end);
    if (p >= end || *p != ':')
        return NULL;
    return enr_lex_ws_end(p + 1, end);
}

/* On a member's value (p < end): a stat's number or a string at once;
 * p itself when it is neither (the general switch takes it), NULL on an
 * error. */
SKIP_INLINE const unsigned char *skip_scalar(const unsigned char *p, const unsigned char *end)
{
    if ((unsigned)(*p - '1') < 9)
        return enr_lex_skip_num(p, end);
    if (*p == '"')
        return skip_string(p, end);
    return p;
}

/* An array of integers (a history) at p, its '[': all of it at once;
 * NULL when it is not one. */
SKIP_INLINE const unsigned char *skip_ints(const unsigned char *p, const unsigned char *end)
{
#ifdef __SSE2__
    if (end - p > 1 && (unsigned)(p[1] - '0') < 10)
        return enr_lex_int_array(p + 1, end);
#endif
    (void)p;
    (void)end;
    return NULL;
}

static int skip_fast(enr_reader *r, int depth)
{
    const unsigned char *start = r->p, *end = r->end, *q;
    skip_nest n = {start, 0, 0, 0};

    if (r->slow)
        return enr_lex_skip_value(r, depth);
value:
    if (n.p >= end)
        goto slow;
    switch (*n.p) {
    case '"':
        n.p = skip_in_array(&n) ? skip_strings(n.p, end) : skip_string(n.p, end);
        break;
    case '{':
        if (!skip_room(&n, depth))
            goto slow;
        skip_push(&n, 1);
        if (end - n.p > 1 && n.p[1] == '"') { /* a member, no white space */
            n.p++;
            goto key;
        }
        goto open;
    case '[':
        if (!skip_room(&n, depth))
            goto slow;
        if (end - n.p > 1 && n.p[1] == '"') { /* tags, no white space */
            skip_push(&n, 0);
            if ((n.p = skip_strings(n.p + 1, end)) == NULL)
                goto slow;
            skip_close(&n, end);
            goto after;
        }
        if ((q = skip_ints(n.p, end)) != NULL) {
            n.p = q;
            break;
        }
        skip_push(&n, 0);
    open:
        n.p = enr_lex_ws_end(n.p + 1, end);
        if (skip_close(&n, end))
            break;
        if (n.objects & 1)
            goto key;
        goto value;
    case 't':
        n.p = skip_word(n.p, end, "true", 4);
        break;
    case 'f':
        n.p = skip_word(n.p, end, "false", 5);
        break;
    case 'n':
        n.p = skip_word(n.p, end, "null", 4);
        break;
    default:
        n.p = skip_numbers(n.p, end, skip_in_array(&n));
        break;
    }
    if (n.p == NULL)
        goto slow;
after:
    while (n.level != 0) {
        if (end - n.p > 1 && n.p[0] == ',' && n.p[1] > ' ') { /* no white space */
            n.p++;
            if (n.objects & 1)
                goto key;
            goto value;
        }
        n.p = enr_lex_ws_end(n.p, end);
        if (n.p < end && *n.p == ',') {
            n.p = enr_lex_ws_end(n.p + 1, end);
            if (n.objects & 1)
                goto key;
            goto value;
        }
        if (!skip_close(&n, end))
            goto slow;
    }
    r->p = n.p;
    return 0;
key:
    if ((n.p = skip_key(n.p, end, &n.tight)) == NULL)
        goto slow;
    if (!n.tight)
        goto value;
    if ((q = skip_scalar(n.p, end)) == NULL)
        goto slow;
    if (q == n.p)
        goto value;
    n.p = q;
    if (end - n.p > 1 && two_bytes(n.p, ",\"")) {
        n.p++;
        goto key;
    }
    skip_close(&n, end);
    goto after;
slow:
    r->p = start;
    return enr_lex_skip_value(r, depth);
}

/* An object being converted to text (ECMAScript String()/Number()): only
 * a "toString" key matters, and it makes the conversion throw. */
static int tostring_member(enr_reader *r, const enr_span *key, int depth, void *arg)
{
    if (enr_lex_key_is(r, key, "toString", 8))
        *(uint8_t *)arg = 1;
    return enr_lex_skip_value(r, depth);
}

struct join_arg {
    enr_buf *out;
    uint8_t *tostring;
};

static int join_element(enr_reader *r, int depth, size_t index, void *arg)
{
    struct join_arg *j = arg;

    if (index > 0)
        enr_buf_putc(j->out, ',');
    return text_value(r, depth, j->out, j->tostring) < 0 ? -1 : 0;
}

/*
 * Appends the ECMAScript ToString of the value at r->p as an element of
 * an array being joined: null gives "", numbers print per rule 9 (-0 is
 * "0"), arrays join recursively, objects give "[object Object]" unless
 * they have a toString key.  Returns the value's kind or -1.
 */
static int text_value(enr_reader *r, int depth, enr_buf *out, uint8_t *tostring)
{
    const unsigned char *s, *e;
    char num[ENR_NUM_MAX];
    struct join_arg j = {out, tostring};
    enr_span sp;
    int k;

    if (r->p >= r->end)
        ENR_LEX_FAIL(r, r->p, "value expected");
    switch (*r->p) {
    case '"':
        if (enr_lex_scan_string(r, &sp) < 0)
            return -1;
        enr_lex_decode_span(r, &sp, out);
        return ENR_K_STRING;
    case '[':
        return enr_lex_walk_array(r, depth + 1, join_element, &j) < 0 ? -1 : ENR_K_ARRAY;
    case '{':
        if (enr_lex_walk_object(r, depth + 1, tostring_member, tostring) < 0)
            return -1;
        enr_buf_lit(out, "[object Object]");
        return ENR_K_OBJECT;
    case 't':
    case 'f':
    case 'n':
        k = enr_lex_scan_literal(r);
        if (k == ENR_K_TRUE)
            enr_buf_lit(out, "true");
        else if (k == ENR_K_FALSE)
            enr_buf_lit(out, "false");
        return k;
    default:
        if (enr_lex_scan_number(r, &s, &e) < 0)
            return -1;
        if (!out->over) /* past its cap the text is only validated */
            enr_buf_append(
                out, num,
                enr_num_format(enr_num_parse_json((const char *)s, (size_t)(e - s)), num));
        return ENR_K_NUMBER;
    }
}

/*
 * Reads the value of a field the contract looks at into f: its kind, its
 * number, its text (strings decoded, arrays joined, and for id numbers
 * printed), and whether an object conversion met "toString".  Only
 * converts what the field's rule can use.
 */
static int field_value(enr_reader *r, int depth, enr_field *f, int print_numbers)
{
    const unsigned char *s, *e;
    char num[ENR_NUM_MAX];
    int k;

    enr_buf_reset(&f->text);
    f->tostring = 0;
    f->num = 0;
    f->raw = NULL;
    if (r->p >= r->end)
        ENR_LEX_FAIL(r, r->p, "value expected");
    switch (*r->p) {
    case '"':
        if (f->raw_ok) {
            /* decoding it now would validate it only for its consumer to
             * read it again: that one reads the body bytes and decodes
             * only what it cannot take as it is */
            enr_span sp;

            if (enr_lex_scan_string(r, &sp) < 0)
                return -1;
            if (f->raw_ok == ENR_RAW_ASCII && (sp.escaped || sp.nonascii)) {
                enr_lex_decode_span(r, &sp, &f->text);
            } else {
                f->raw = sp.s;
                f->raw_len = (size_t)(sp.e - sp.s);
                f->raw_escaped = (uint8_t)sp.escaped;
            }
            k = ENR_K_STRING;
            break;
        }
        k = text_value(r, depth, &f->text, &f->tostring);
        break;
    case '[':
        k = text_value(r, depth, &f->text, &f->tostring);
        break;
    case '{':
        if (enr_lex_walk_object(r, depth + 1, tostring_member, &f->tostring) < 0)
            return -1;
        k = ENR_K_OBJECT;
        break;
    case 't':
    case 'f':
    case 'n':
        k = enr_lex_scan_literal(r);
        break;
    default:
        if (enr_lex_scan_number(r, &s, &e) < 0)
            return -1;
        f->num = enr_num_parse_json((const char *)s, (size_t)(e - s));
        if (print_numbers)
            enr_buf_append(&f->text, num, enr_num_format(f->num, num));
        k = ENR_K_NUMBER;
        break;
    }
    if (k < 0)
        return -1;
    f->kind = (uint8_t)k;
    return 0;
}

static int provider_value(enr_reader *r, int *provider)
{
    enr_span sp;
    const char *v;
    size_t n;

    *provider = ENR_PROV_NONE;
    if (r->p < r->end && *r->p == '"') {
        if (enr_lex_scan_string(r, &sp) < 0)
            return -1;
        v = enr_lex_short_text(r, &sp, &n);
        if (n == 2) {
            if (memcmp(v, "yt", 2) == 0)
                *provider = ENR_PROV_YT;
            else if (memcmp(v, "vm", 2) == 0)
                *provider = ENR_PROV_VM;
            else if (memcmp(v, "dm", 2) == 0)
                *provider = ENR_PROV_DM;
        }
        return 0;
    }
    return enr_lex_skip_value(r, 2);
}

static int blocked_element(enr_reader *r, int depth, size_t index, void *arg)
{
    uint8_t *mask = arg;
    enr_span sp;
    const char *v;
    size_t n;

    if (r->p >= r->end || *r->p != '"')
        return enr_lex_skip_value(r, depth);
    if (enr_lex_scan_string(r, &sp) < 0)
        return -1;
    v = enr_lex_short_text(r, &sp, &n);
    if (n == 2) {
        /* a region's two letters as one 16-bit number: one compare each */
        unsigned code = (unsigned char)v[0] | (unsigned char)v[1] << 8;

        for (int i = 0; i < ENR_REGIONS; i++)
            if (code == region_codes[i])
                *mask |= (uint8_t)(1u << i);
    }
    return 0;
}

/* A printable ASCII byte that a string holds as it is (no quote, no
 * backslash). */
static inline int plain_ascii(unsigned c)
{
    return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

/*
 * The blocked array as clients send it: strings of two plain ASCII
 * bytes, no white space ("[\"JP\",\"KR\"]").  Anything else (-1) leaves
 * r->p and *mask as they were, and enr_lex_walk_array reads the array; the fast
 * fuzz target compares the two.
 */
static int blocked_fast(enr_reader *r, uint8_t *mask)
{
    const unsigned char *p = r->p + 1, *end = r->end;
    uint8_t m = 0;

    if (end - p >= 1 && *p == ']') {
        r->p = p + 1;
        return 0;
    }
    for (;;) {
        unsigned code;

        if (end - p < 5 || p[0] != '"' || !plain_ascii(p[1]) || !plain_ascii(p[2]) || p[3] != '"')
            return -1;
        code = p[1] | p[2] << 8;
        for (int i = 0; i < ENR_REGIONS; i++)
            if (code == region_codes[i])
                m |= (uint8_t)(1u << i);
        p += 4;
        if (*p == ']') {
            r->p = p + 1;
            *mask = m;
            return 0;
        }
        if (*p != ',')
            return -1;
        p++;
    }
}

/* The closing quote of a key with neither escape nor control byte that
 * ends within 16 bytes of k (the bulky fields' names), or NULL. */
static inline __attribute__((always_inline)) const unsigned char *
plain_key(const unsigned char *k, const unsigned char *end)
{
#ifdef __SSE2__
    if (end - k >= 16) {
        unsigned m = enr_lex_stops16(k);

        return m != 0 && k[__builtin_ctz(m)] == '"' ? k + __builtin_ctz(m) : NULL;
    }
#endif
    for (const unsigned char *p = k; p < end && p - k < 16; p++) {
        if (*p == '"')
            return p;
        if (*p == '\\' || *p < 0x20)
            return NULL;
    }
    return NULL;
}

/* Is this unescaped key one record_member reads? */
static int key_read(const unsigned char *k, size_t n)
{
    switch (n) {
    case 2:
        return memcmp(k, "id", 2) == 0;
    case 5:
        return memcmp(k, "title", 5) == 0;
    case 7:
        return memcmp(k, "blocked", 7) == 0;
    case 8:
        return memcmp(k, "provider", 8) == 0 || memcmp(k, "duration", 8) == 0;
    default:
        return 0;
    }
}

/*
 * Skips the value of a record member nobody reads, then the members
 * after it as long as they are unread too (a record's bulky fields come
 * in a row: description, tags, stats, ...), without a return to the
 * walk of the record's members (enr_lex_walk_members) and a call of
 * record_member per member.  It only goes on over ',"key":' as clients
 * send it (no white space, a short key without escapes, compared as it
 * is); at anything else it leaves r->p after the last value skipped and
 * the walk reads on from there as it would have, errors included.
 */
static __attribute__((noinline)) int skip_unread(enr_reader *r, int depth)
{
    const unsigned char *end = r->end;

    for (;;) {
        const unsigned char *p, *k;

        if (skip_fast(r, depth) < 0)
            return -1;
        p = r->p;
        if (r->slow || end - p < 2 || !two_bytes(p, ",\""))
            return 0;
        k = p + 2;
        p = plain_key(k, end);
        if (p == NULL || end - p < 3 || p[1] != ':' || p[2] <= ' ' || key_read(k, (size_t)(p - k)))
            return 0;
        r->p = p + 2;
    }
}

static int record_member_escaped(enr_reader *r, const enr_span *key, int depth, void *arg);

/* Inlined into the walk of a record's members (enr_lex_walk_members). */
static inline __attribute__((always_inline)) int record_member(enr_reader *r, const enr_span *key,
                                                               int depth, void *arg)
{
    enr_fields *f = arg;
    const char *k = (const char *)key->s;
    size_t n = (size_t)(key->e - key->s);

    if (key->escaped)
        return record_member_escaped(r, key, depth, arg);
    switch (n) {
    case 2:
        if (memcmp(k, "id", 2) == 0)
            return field_value(r, depth, &f->id, 1);
        break;
    case 5:
        if (memcmp(k, "title", 5) == 0)
            return field_value(r, depth, &f->title, 0);
        break;
    case 7:
        if (memcmp(k, "blocked", 7) == 0) {
            f->blocked = 0;
            f->blocked_arr = r->p < r->end && *r->p == '[';
            if (f->blocked_arr) {
                if (!r->slow && depth < ENR_MAX_DEPTH && blocked_fast(r, &f->blocked) == 0)
                    return 0;
                return enr_lex_walk_array(r, depth + 1, blocked_element, &f->blocked);
            }
            return enr_lex_skip_value(r, depth);
        }
        break;
    case 8:
        if (memcmp(k, "provider", 8) == 0)
            return provider_value(r, &f->provider);
        if (memcmp(k, "duration", 8) == 0)
            return field_value(r, depth, &f->duration, 0);
        break;
    default:
        break;
    }
    return skip_unread(r, depth);
}

/* Rare: a key with escapes, decoded once, then matched by its name. */
static __attribute__((noinline)) int record_member_escaped(enr_reader *r, const enr_span *key,
                                                           int depth, void *arg)
{
    enr_span dec;
    size_t n;
    const char *k = enr_lex_short_text(r, key, &n);
    char name[8];

    if (n == 0 || n > 8)
        return enr_lex_skip_value(r, depth);
    memcpy(name, k, n);
    dec.s = (const unsigned char *)name;
    dec.e = dec.s + n;
    dec.escaped = dec.nonascii = 0;
    return record_member(r, &dec, depth, arg);
}

int enr_reader_begin(enr_reader *r)
{
    if (r->end - r->p >= 3 && r->p[0] == 0xef && r->p[1] == 0xbb && r->p[2] == 0xbf)
        r->p += 3;
    enr_lex_skip_ws(r);
    if (r->p >= r->end)
        ENR_LEX_FAIL(r, r->p, "empty body");
    if (*r->p != '[') {
        /* Validate first: a malformed body is a syntax error, not a shape one. */
        if (enr_lex_skip_value(r, 0) < 0)
            return -1;
        enr_lex_skip_ws(r);
        if (r->p != r->end)
            ENR_LEX_FAIL(r, r->p, "unexpected data after the JSON value");
        r->err_offset = 0;
        r->err_msg = "expected a JSON array of records";
        r->err_status = 400;
        return -1;
    }
    r->p++;
    enr_lex_skip_ws(r);
    r->element = 0;
    if (r->p < r->end && *r->p == ']') {
        r->p++;
        r->element = (size_t)-1; /* empty array: nothing to read */
    }
    return 0;
}

static int finish(enr_reader *r)
{
    enr_lex_skip_ws(r);
    if (r->p != r->end)
        ENR_LEX_FAIL(r, r->p, "unexpected data after the JSON value");
    return 0;
}

/* After a top-level element: ',' (1: more elements) or ']' (0: done). */
static inline int after_element(enr_reader *r)
{
    int more = enr_lex_next_or_close(r, ']');

    if (more < 0)
        return -1;
    r->elements++;
    if (more)
        r->element++;
    else
        r->element = (size_t)-1;
    return more;
}

static void fields_reset(enr_fields *f)
{
    f->id.kind = f->title.kind = f->duration.kind = ENR_K_MISSING;
    f->id.tostring = f->title.tostring = f->duration.tostring = 0;
    enr_buf_reset(&f->id.text);
    enr_buf_reset(&f->title.text);
    enr_buf_reset(&f->duration.text);
    f->provider = ENR_PROV_NONE;
    f->blocked_arr = 0;
    f->blocked = 0;
}

int enr_reader_next(enr_reader *r, enr_fields *f)
{
    int more;

    while (r->element != (size_t)-1) {
        if (r->max_elements && r->element >= r->max_elements) {
            r->err_offset = (long)(r->p - r->start);
            r->err_msg = "too many records in the batch";
            r->err_status = 413;
            return -1;
        }
        if (r->p >= r->end)
            ENR_LEX_FAIL(r, r->p, "value expected");
        if (*r->p == '{') {
            fields_reset(f);
            if (enr_lex_walk_members(r, 2, record_member, f) < 0)
                return -1;
            /* over is not an error here: a field past its cap is refused
             * by the engine only if the record uses it */
            if ((f->id.text.oom && !f->id.text.over) ||
                (f->title.text.oom && !f->title.text.over) ||
                (f->duration.text.oom && !f->duration.text.over)) {
                r->err_offset = (long)(r->p - r->start);
                r->err_msg = "out of memory";
                r->err_status = 500;
                return -1;
            }
            r->record_element = r->element;
            if (after_element(r) < 0)
                return -1;
            return 1;
        }
        if (*r->p == 'n' && r->end - r->p >= 4 && memcmp(r->p, "null", 4) == 0)
            ENR_LEX_FAIL(r, r->p, "null element in the batch");
        if (enr_lex_skip_value(r, 1) < 0)
            return -1;
        more = after_element(r);
        if (more < 0)
            return -1;
    }
    return finish(r) < 0 ? -1 : 0;
}
