/*
 * reply_scan.h: what every reader of a provider's answer shares (the
 * aggregator protocol's, upstream_reply.c, and each API's, api_*.c): the
 * shape of a reply read in one pass, the poster and duration checks, and
 * the seeded table of the ids a call asked for.  Internal to
 * src/upstream/.
 *
 * The scanner is base/jscan.h's (strict, nesting bounded by
 * ENR_REPLY_MAX_DEPTH): an unpaired surrogate escape decodes to U+FFFD
 * and is counted, so an id reader can refuse a string whose decoding was
 * not faithful.
 */
#ifndef ENR_REPLY_SCAN_H
#define ENR_REPLY_SCAN_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/jscan.h"
#include "upstream/reply_id.h"

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
