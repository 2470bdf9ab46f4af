/*
 * engine.h: one POST body in, the contract's response out.
 *
 * The engine is pure: it knows nothing of FastCGI, processes or the
 * network.  A request goes through three steps so that the upstream
 * client can enrich records between parsing and printing:
 *
 *   enr_parse()   body -> enr_batch (accepted records only), or a 4xx
 *   (upstream)    may set a record's poster override and duration
 *   enr_emit()    enr_batch -> NDJSON body
 *
 * An enr_engine belongs to one worker and is reused for every request;
 * an enr_batch is reset, not freed, between requests, so steady-state
 * requests do not allocate.
 */
#ifndef ENR_ENGINE_H
#define ENR_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "engine/contract.h"

/* Offsets index enr_batch.text; every string is WTF-8 (text.h). */
typedef struct enr_record {
    size_t id_off, id_len;         /* final id: trimmed, lower-cased */
    size_t key_off, key_len;       /* trimmed id in its original case (upstream) */
    size_t title_off, title_len;   /* normalized title */
    size_t poster_off, poster_len; /* upstream poster; poster_len 0: local URL */
    double duration;               /* rule 13.1, NaN already folded to 0 */
    uint32_t element;              /* index of the element in the batch */
    uint8_t provider;              /* enum enr_provider, never NONE */
    uint8_t avail;                 /* bit r set: region r available */
} enr_record;

typedef struct enr_batch {
    enr_record *recs;
    size_t n, cap;
    enr_buf text;    /* arena for the record strings */
    size_t elements; /* elements of the top-level array */
} enr_batch;

/* A rejected request: status 400 (or 413 for limits), what and where. */
typedef struct enr_error {
    int status;
    long offset;    /* byte offset in the body, or -1 */
    long element;   /* index of the batch element, or -1 */
    size_t limit;   /* max_output_bytes when that is what was passed, else 0 */
    size_t reached; /* ... bytes the output had reached when it stopped */
    long record;    /* ... index of the output line (accepted record) */
    char msg[96];
} enr_error;

/* Engine buffers (and the worker's body and output buffers) that grew
 * past this for one request are freed after it: a normal batch (400 KB
 * body, ~100 KB out) never reallocates, one huge request does not pin
 * its memory for the worker's life. */
#define ENR_KEEP_BYTES (1u << 20)

typedef struct enr_engine enr_engine;

enr_engine *enr_engine_new(void); /* NULL on failure (OpenSSL, memory) */
void enr_engine_free(enr_engine *e);

/* max_output_bytes (0: none).  The output is checked while it is printed
 * (exactly max passes, max + 1 is a 413), and enr_parse() refuses early,
 * with the same error, a batch whose output could not fit: each id,
 * title or duration text, and the sum of the ids and titles, is bounded
 * by it, so nothing the engine holds grows with what the input inflates
 * to (docs/pool.md, "Memory bounds"). */
void enr_engine_set_max_output(enr_engine *e, size_t max);

/* slow = 1 turns every fast path off (reader, Unicode steps, printer):
 * the reference the fuzz target holds the fast paths to, byte for byte.
 * Off by default; never set in the product. */
void enr_engine_set_slow(enr_engine *e, int slow);

/* Frees the engine's and b's buffers grown past keep bytes. */
void enr_engine_shrink(enr_engine *e, enr_batch *b, size_t keep);

/* Parse and normalize a whole body.  Returns 0 with b holding the
 * accepted records, or -1 with err filled and b's contents unspecified.
 * max_records > 0 caps the number of elements (413 past it). */
int enr_parse(enr_engine *e, const char *body, size_t len, size_t max_records, enr_batch *b,
              enr_error *err);

/* The caller's clock for fetched_at: milliseconds since the Unix epoch. */
typedef uint64_t (*enr_clock_ms_fn)(void);

/* Append the NDJSON body for b (a single LF when b has no record).
 * fetched_at is now_ms() called per record (the contract lets lines of
 * one response differ); the engine itself reads no clock, so a test can
 * pass a fixed one.  Returns 0, or -1 with
 * err filled (413) as soon as the output passes max_output_bytes; out
 * then holds a cut body that must not be sent.  A failed allocation
 * sets out->oom. */
int enr_emit(enr_engine *e, const enr_batch *b, enr_clock_ms_fn now_ms, enr_buf *out,
             enr_error *err);

/* Append the JSON error body {"error":"...","offset":N,...}; an output
 * limit adds "limit", "reached" and "record". */
void enr_error_json(const enr_error *err, enr_buf *out);

void enr_batch_reset(enr_batch *b);
void enr_batch_free(enr_batch *b);

/* The contract's name of a provider ("yt"), "" for none. */
const char *enr_provider_name(int provider);

#endif
