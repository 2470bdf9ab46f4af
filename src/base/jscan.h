/*
 * jscan.h: the JSON scanner every reader outside the engine shares (a
 * provider's answer, upstream/reply_scan.c; enrich-replay's trace lines,
 * replay/replay_trace.c): a bounded pull scanner over a buffer that keeps
 * nothing but what its caller copies out.  The engine's reader
 * (engine/reader.c) is not one of them: it is the byte-exact contract.
 *
 * Syntax is RFC 8259 (no comments, trailing commas, NaN or leading
 * zeros); inside strings, raw control (but NUL) and non-UTF-8 bytes are
 * taken as they are and an unpaired surrogate escape decodes to U+FFFD
 * and is counted in enr_jscan.lone, so an id reader can refuse a string
 * whose decoding was not faithful.  A key is compared up to its first NUL
 * (json-c kept keys as C strings).  Nesting is bounded by max_depth, so
 * is the recursion; the scanner never reads past end.
 *
 * A raw scanner (the trace's) reads strings as the trace's writer wrote
 * them instead: a NUL is a byte, an unknown escape \X is X, a lone
 * \udc80..\udcff is the byte 0x80..0xff (Python's surrogateescape) and
 * any other lone surrogate keeps its WTF-8 form.  enr_jscan_span() skips
 * a value without judging it, for a reader that passes on what it does
 * not read.
 */
#ifndef ENR_JSCAN_H
#define ENR_JSCAN_H

#include <stddef.h>

#define ENR_JSCAN_KEY_MAX 31 /* the longest key a reader names; longer keys are other keys */

typedef struct enr_jscan {
    const unsigned char *p, *end;
    unsigned lone; /* unpaired surrogate escapes decoded so far */
    int max_depth; /* nested containers, the root counting as 1 */
    int raw;       /* strings as a trace holds them (above) */
} enr_jscan;

static inline void enr_jscan_init(enr_jscan *s, const void *buf, size_t len, int max_depth, int raw)
{
    s->p = buf;
    s->end = s->p + len;
    s->lone = 0;
    s->max_depth = max_depth;
    s->raw = raw;
}

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
/* The value at s->p passed over unjudged: a string to its first
 * unescaped quote, a container to the bracket that balances it (strings
 * inside it skipped the same way, at most max_depth open), anything else
 * up to a comma, a '}' or white space (possibly nothing).  0, or -1 when
 * the buffer ends first. */
int enr_jscan_span(enr_jscan *s);
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
/* A value whose string (when it is one) is decoded later: *at is where
 * it starts, NULL when the value is of another type; then skipped. */
int enr_jscan_string_at(enr_jscan *s, int depth, const unsigned char **at);

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

#endif
