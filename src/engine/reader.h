/*
 * reader.h: the strict, streaming JSON reader of a request batch.
 *
 * It walks the body once, validates every byte against RFC 8259 and the
 * contract's decoding rules (docs/contract.md §2), and hands the engine one record
 * (an object element of the top-level array) at a time, holding only the
 * five fields the contract reads.  Everything else is validated and
 * skipped without allocating.  No DOM is ever built.
 *
 * Invariants: a field's buffers hold its LAST occurrence in the object
 * (docs/contract.md §2.5); decoded text is WTF-8 (text.h); the reader never reads
 * past body + len.
 */
#ifndef ENR_READER_H
#define ENR_READER_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "engine/lex.h" /* enum enr_kind, enr_reader */

/* Which strings of a field the reader may leave in the body (raw) for
 * the engine to read there. */
enum enr_raw {
    ENR_RAW_NONE,  /* every string decoded into text */
    ENR_RAW_ASCII, /* ASCII without escapes: the same bytes decoded */
    ENR_RAW_ANY    /* any string (not known to be well-formed; raw_escaped) */
};

/* One field as the contract reads it.  For a string, text is the decoded
 * string; for an array, text is its ECMAScript String() form (elements
 * joined by ","); for id only, a number is also printed into text. */
typedef struct enr_field {
    uint8_t kind;
    uint8_t tostring; /* an object with a "toString" key was converted */
    uint8_t raw_ok;   /* ENR_RAW_*: which strings may stay in the body (raw) */
    double num;       /* ENR_K_NUMBER */
    enr_buf text;
    /* a string raw_ok lets stay in the body: its bytes there, not yet
     * decoded (text is empty); the body outlives the record */
    const unsigned char *raw;
    size_t raw_len;
    uint8_t raw_escaped; /* raw holds a backslash */
} enr_field;

typedef struct enr_fields {
    enr_field id, title, duration;
    int provider;        /* enum enr_provider, NONE unless exactly yt/vm/dm */
    uint8_t blocked_arr; /* blocked is an array */
    uint8_t blocked;     /* bit r: region r listed in blocked */
} enr_fields;

void enr_reader_init(enr_reader *r, const char *body, size_t len, size_t max_elements);
void enr_reader_free(enr_reader *r);
void enr_fields_free(enr_fields *f);

/* Skips a leading BOM and white space, consumes '['.  0 or -1. */
int enr_reader_begin(enr_reader *r);

/* Reads elements up to the next object and fills f from it: returns 1.
 * Returns 0 after the closing ']' and the end of the body (only white
 * space may follow), -1 on an error (null element, syntax, depth, limit),
 * with err_* set. */
int enr_reader_next(enr_reader *r, enr_fields *f);

#endif
