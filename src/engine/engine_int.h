/*
 * engine_int.h: what the engine's two halves share and nobody else sees:
 * the engine object, and the one way a batch whose output cannot fit in
 * max_output is refused (the parser refuses on a running lower bound,
 * engine.c; the printer at the limit itself, emit.c).
 */
#ifndef ENR_ENGINE_INT_H
#define ENR_ENGINE_INT_H

#include <stddef.h>

#include "engine/reader.h"
#include "engine/unicode.h"

/* engine.h's types, by tag: this header sits below engine.h (emit.c
 * includes both, engine.c this one) so that the two halves do not
 * include each other. */
struct enr_error;

struct enr_engine {
    enr_uni *uni;
    enr_reader rd;
    enr_fields f;
    size_t max_output; /* 0: no limit */
    size_t lower;      /* this batch's output is at least this long */
    int slow;          /* fast paths off: enr_engine_set_slow */
};

/* The 413 of an output that would reach at least `reached` bytes, at
 * output line `record` (element: the batch element, or -1).  Returns -1. */
int enr_engine_output_fail(const struct enr_engine *e, struct enr_error *err, long element,
                           size_t record, size_t reached);

#endif
