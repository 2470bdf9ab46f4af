/*
 * replay_trace.h: the replay trace in memory (enrich-replay).
 *
 * A trace is JSON lines {"ts": <unix seconds>, "payload": <body>} in
 * arrival order.  A payload that is JSON is sent verbatim (the exact bytes
 * of the line, no re-serialization); a payload that is a JSON string is
 * the raw body, decoded, with lone surrogates U+DC80..U+DCFF standing for
 * the bytes 0x80..0xFF (Python's surrogateescape).
 *
 * Invariant: after enr_replay_trace_load() succeeds every entry's body
 * stays valid until enr_replay_trace_free(); timestamps are made
 * non-decreasing (an out-of-order line is clamped to its predecessor and
 * counted in `reordered`).
 */
#ifndef ENR_REPLAY_TRACE_H
#define ENR_REPLAY_TRACE_H

#include <stddef.h>

typedef struct enr_replay_entry {
    double ts;        /* seconds, relative to the first entry */
    const char *body; /* into the mapping, or owned (decoded string) */
    size_t len;
    int owned;
} enr_replay_entry;

typedef struct enr_replay_trace {
    enr_replay_entry *e;
    size_t n;
    size_t bytes; /* sum of body lengths */
    size_t reordered;
    void *map;
    size_t map_len;
} enr_replay_trace;

/* Load path ("-" is not supported: the trace is mapped).  On error returns
 * -1 with "path:line: problem" in err. */
int enr_replay_trace_load(enr_replay_trace *t, const char *path, char *err, size_t errlen);
/* Index a trace already in memory (buf must outlive t; name is for
 * messages).  The same rules and errors as enr_replay_trace_load(). */
int enr_replay_trace_parse(enr_replay_trace *t, const char *buf, size_t len, const char *name,
                           char *err, size_t errlen);
void enr_replay_trace_free(enr_replay_trace *t);

#endif
