/*
 * fuzz_ids.h: the input of the fuzzers on answer readers
 * (fuzz_upstream_reply.c, fuzz_api.h): the ids the call asked for,
 * comma-separated, up to the first LF, distinct as the client passes
 * them; the rest is the answer's body.
 */
#ifndef ENR_FUZZ_IDS_H
#define ENR_FUZZ_IDS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "upstream/reply_id.h"

/* ids[0..*n) (at most max; empty ones only when empty_ok) pointing into
 * data; returns the body, its length in *blen. */
static inline const char *fuzz_ids(const uint8_t *data, size_t size, enr_reply_id *ids, size_t max,
                                   int empty_ok, size_t *n, size_t *blen)
{
    const char *p = (const char *)data, *nl = memchr(data, '\n', size);
    const char *end = nl ? nl : p + size, *body;

    *n = 0;
    while (p < end && *n < max) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *e = comma ? comma : end;
        size_t len = (size_t)(e - p), j;
        for (j = 0; j < *n; j++)
            if (ids[j].id_len == len && memcmp(ids[j].id, p, len) == 0)
                break;
        if ((len > 0 || empty_ok) && j == *n) {
            ids[*n].id = p;
            ids[*n].id_len = len;
            (*n)++;
        }
        p = e + 1;
    }
    body = nl ? nl + 1 : (const char *)data + size;
    *blen = (size_t)((const char *)data + size - body);
    return body;
}

#endif
