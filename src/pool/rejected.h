/*
 * rejected.h: the answer's account of the records the contract drops
 * without a line (an element that is not a valid record): how many, and
 * where they were in the batch, as response headers.  The body stays
 * byte for byte the old worker's.
 *
 *   X-Enrich-Rejected: N                     always
 *   X-Enrich-Rejected-Positions: 0,3,7-9     when N > 0: element indexes
 *                                            (0-based), ranges a-b
 *
 * The positions header is cut at a whole entry, and then ends in ",...",
 * so that the whole header section fits nginx's fastcgi_buffer_size
 * (16k in nginx/snippets/enrichd-fastcgi.conf; nginx answers 502 to a
 * larger one) with room left for the other headers.
 */
#ifndef ENR_REJECTED_H
#define ENR_REJECTED_H

#include <stddef.h>

#include "engine/engine.h"

/* The positions' value at most (without the name), a quarter of nginx's
 * 16 KiB header buffer. */
#define ENR_REJECTED_POSITIONS_MAX 4096
/* Both header lines at most, CRLFs included. */
#define ENR_REJECTED_HEADERS_MAX (ENR_REJECTED_POSITIONS_MAX + 96)

/* Writes the header lines for b (accepted records in element order,
 * b->elements in all) into out (at least ENR_REJECTED_HEADERS_MAX
 * bytes), NUL-terminated; returns the number of rejected elements. */
size_t enr_rejected_headers(const enr_batch *b, char *out, size_t cap);

#endif
