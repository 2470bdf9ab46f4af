/*
 * reply_scan.h: what every reader of a provider's answer shares (the
 * aggregator protocol's, upstream_reply.c, and each API's, api_*.c): a
 * bounded one-pass JSON scanner that keeps nothing but what its caller
 * copies out, the poster and duration checks, and the seeded table of the
 * ids a call asked for.  Internal to src/upstream/.
 *
 * Syntax is RFC 8259 (no comments, trailing commas, NaN or leading
 * zeros); inside strings, raw control (but NUL) and non-UTF-8 bytes are
 * taken as they are and an unpaired surrogate escape decodes to U+FFFD
 * and is counted in enr_jscan.lone, so an id reader can refuse a string
 * whose decoding was not faithful.  A key is compared up to its first NUL
 * (json-c kept keys as C strings).  Nesting is bounded by
 * ENR_REPLY_MAX_DEPTH, so is the recursion; the scanner never reads past
 * end.
 */
#ifndef ENR_REPLY_SCAN_H
#define ENR_REPLY_SCAN_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "upstream/reply_id.h"

#define ENR_JSCAN_KEY_MAX 31 /* the longest key a reader names; longer keys are other keys */

typedef struct enr_jscan {
    const unsigned char *p, *end;
    unsigned lone; /* unpaired surrogate escapes decoded so far */
} enr_jscan;

static inline int enr_jscan_at(const enr_jscan *s, char c)
{
    return s->p < s->end && *s->p == (unsigned char)c;
}

static inline int enr_jscan_at_number(const enr_jscan *s)
{
    return s->p < s->end && (*s->p == '-' || (*s->p >= '0' && *s->p <= '9'));
}

void enr_jscan_ws(enr_jscan *s);
/* The string at s->p (on its opening quote) decoded into out[0..cap)
 * (out may be NULL: validated and skipped); *len is its whole decoded
 * length, so a string longer than cap is seen to be.  0, or -1. */
int enr_jscan_string(enr_jscan *s, char *out, size_t cap, size_t *len);
/* A key and its colon: *key is its index in names[0..nnames), or -1. */
int enr_jscan_key(enr_jscan *s, const char *const *names, int nnames, int *key);
/* The same for a reader that takes keys it cannot list: the key's text
 * cut at its first NUL in k[0..ENR_JSCAN_KEY_MAX] (not terminated), *len
 * its length; a length past ENR_JSCAN_KEY_MAX is a longer key, whose
 * first bytes alone are kept. */
int enr_jscan_key_text(enr_jscan *s, char *k, size_t *len);
/* Any value, its containers at depth (the root is 1). 0, or -1. */
int enr_jscan_skip(enr_jscan *s, int depth);
/* s->p on '{' or '[' opening a container at depth: 1 when it has
 * members (s->p on the first), 0 when empty, -1 on error. */
int enr_jscan_open(enr_jscan *s, int depth);
/* After a member or element: 1 when another follows (s->p on it), 0 at
 * close, -1 on error. */
int enr_jscan_next(enr_jscan *s, unsigned char close);
/* A number at s->p: *at is where it starts when it is one (NULL when the
 * value is of another type, then skipped).  Its text is read with strtod
 * once the container holding it is closed: a delimiter then follows it
 * inside the body. */
int enr_jscan_number_at(enr_jscan *s, int depth, const unsigned char **at);

/* A member of an object read by enr_jscan_object(): s->p on its value
 * (at depth), which fn reads whole; key is its index in names, or -1. */
typedef int (*enr_jscan_member_fn)(void *ctx, int key, int depth);
/* An element of an array read by enr_jscan_array(), the same way. */
typedef int (*enr_jscan_element_fn)(void *ctx, int depth);
/* The object at s->p, at depth: each member to fn.  Any other value is
 * skipped, as an object with no member would be.  0, or -1. */
int enr_jscan_object(enr_jscan *s, int depth, const char *const *names, int nnames,
                     enr_jscan_member_fn fn, void *ctx);
/* The array at s->p, at depth: each element to fn; any other value is
 * skipped.  0, or -1. */
int enr_jscan_array(enr_jscan *s, int depth, enr_jscan_element_fn fn, void *ctx);
/* A value whose string (when it is one) is decoded later: *at is where
 * it starts, NULL when the value is of another type; then skipped. */
int enr_jscan_string_at(enr_jscan *s, int depth, const unsigned char **at);

/* The aggregator protocol's checks (upstream_reply.c's header comment):
 * an absolute https:// URL with a host, at most ENR_REPLY_POSTER_MAX
 * bytes, strict UTF-8 with no control character and no white space. */
int enr_reply_poster_ok(const char *s, size_t n);
/* finite, 0 <= v < ENR_REPLY_DURATION_LIMIT; -0 becomes 0. */
int enr_reply_duration_ok(double v, double *out);
void enr_reply_reset(enr_reply_id *ids, size_t n);

/* One reply being read against the ids of its call. */
typedef struct enr_rscan {
    enr_jscan j;
    enr_reply_id *ids;
    size_t n, mask;
    uint32_t *table; /* open addressing: index + 1, 0 empty */
    uint64_t seed;
    enr_buf *arena;
    size_t arena_start;
    char *idbuf; /* one candidate id: idmax bytes, and idextra more */
    size_t idmax, idextra;
    char poster[ENR_REPLY_POSTER_MAX]; /* one candidate poster */
    int (*item)(struct enr_rscan *r, int depth);
} enr_rscan;

/* Reads one element of the array that is an object (r->j.p on its '{',
 * at depth); 0, or -1 for a bad body. */
typedef int (*enr_rscan_item_fn)(enr_rscan *r, int depth);

typedef struct enr_rscan_spec {
    const char *array;  /* the root's member holding the items: "items" */
    int array_optional; /* 1: a root without it is an answer that found nothing */
    size_t idextra;     /* bytes of a candidate id beyond the longest asked */
    /* NULL, or 0 for an asked id no answer can name faithfully: never matched */
    int (*matchable)(const char *id, size_t len);
    enr_rscan_item_fn item;
} enr_rscan_spec;

/* The shape every reader shares: one root object, whose last member
 * spec->array is an array (the earlier ones are forgotten); its object
 * elements go to spec->item, the others are skipped; nothing but white
 * space after the root.  The contract of enr_upstream_reply_parse(). */
int enr_rscan_parse(const char *body, size_t len, enr_reply_id *ids, size_t n, uint64_t seed,
                    enr_buf *arena, const enr_rscan_spec *spec);

/* The id of an item: the asked id of bytes s[0..len) when the answer has
 * not decided it yet, else NULL (not asked, not matchable, or a later
 * duplicate). */
enr_reply_id *enr_rscan_claim(enr_rscan *r, const char *s, size_t len);
/* A poster candidate for id: kept (appended to the arena) when it passes
 * enr_reply_poster_ok() and the arena can take it. */
void enr_rscan_poster(enr_rscan *r, enr_reply_id *id, const char *s, size_t len);
/* The state of id once its fields are set: FOUND or EMPTY. */
void enr_rscan_settle(enr_reply_id *id);

/* A reader that lets the last occurrence of a key count keeps where its
 * string starts (at, on the opening quote, already scanned once) and
 * decodes it when the object closes: into out[0..cap), *len its whole
 * decoded length; 0, or -1 when at is NULL.  *faithful is 0 when an
 * unpaired surrogate was replaced (such a string names no id). */
int enr_rscan_string_at(const enr_rscan *r, const unsigned char *at, char *out, size_t cap,
                        size_t *len, int *faithful);
/* The poster at at (NULL: none) for id, as enr_rscan_poster(); 1 when kept. */
int enr_rscan_poster_at(enr_rscan *r, enr_reply_id *id, const unsigned char *at);
/* A runtime for id: kept when 0 < d < ENR_REPLY_DURATION_LIMIT (0 is a
 * live or upcoming video's: no runtime). */
void enr_rscan_runtime(enr_reply_id *id, double d);
/* The same from the number at num (NULL: none), in seconds. */
void enr_rscan_seconds_at(enr_reply_id *id, const unsigned char *num);
/* The id of an item, decoded from the string at at into r->idbuf: the
 * asked id it names (as enr_rscan_claim()), NULL when none or when its
 * decoding was not faithful. */
enr_reply_id *enr_rscan_claim_at(enr_rscan *r, const unsigned char *at);

#endif
