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

#include "buf.h"

enum enr_provider { ENR_PROV_NONE = 0, ENR_PROV_YT, ENR_PROV_VM, ENR_PROV_DM };

#define ENR_REGIONS 8      /* US GB JP KR TW SG VN TH, in output order */
#define ENR_MAX_DEPTH 1000 /* CONTRACT 15: deeper documents are a 4xx */

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
    long offset;  /* byte offset in the body, or -1 */
    long element; /* index of the batch element, or -1 */
    char msg[96];
} enr_error;

typedef struct enr_engine enr_engine;

enr_engine *enr_engine_new(void); /* NULL on failure (ICU, OpenSSL, memory) */
void enr_engine_free(enr_engine *e);

/* Parse and normalize a whole body.  Returns 0 with b holding the
 * accepted records, or -1 with err filled and b's contents unspecified.
 * max_records > 0 caps the number of elements (413 past it). */
int enr_parse(enr_engine *e, const char *body, size_t len, size_t max_records, enr_batch *b,
              enr_error *err);

/* Append the NDJSON body for b (a single LF when b has no record).
 * fetched_at is read from the clock per record. */
void enr_emit(enr_engine *e, const enr_batch *b, enr_buf *out);

/* Append the JSON error body {"error":"...","offset":N,...}. */
void enr_error_json(const enr_error *err, enr_buf *out);

void enr_batch_reset(enr_batch *b);
void enr_batch_free(enr_batch *b);

/* The poster base of a provider ("https://i.ytimg.com/vi"). */
const char *enr_provider_name(int provider);
const char *enr_provider_base(int provider);

#endif
