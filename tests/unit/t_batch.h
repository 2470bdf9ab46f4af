/*
 * t_batch.h: batches built by hand for the unit tests (key, provider,
 * duration), as enr_parse would leave them.
 */
#ifndef ENR_T_BATCH_H
#define ENR_T_BATCH_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "engine/engine.h"

static void add_rec(enr_batch *b, int prov, const char *key, double duration)
{
    enr_record *r;
    if (b->n == b->cap) {
        b->cap = b->cap ? b->cap * 2 : 16;
        b->recs = realloc(b->recs, b->cap * sizeof(*b->recs));
    }
    r = &b->recs[b->n];
    memset(r, 0, sizeof(*r));
    r->key_off = b->text.len;
    r->key_len = strlen(key);
    enr_buf_append(&b->text, key, r->key_len);
    r->id_off = r->key_off;
    r->id_len = r->key_len;
    r->provider = (uint8_t)prov;
    r->duration = duration;
    r->element = (uint32_t)b->n;
    b->n++;
    b->elements = b->n;
}

static void clear(enr_batch *b)
{
    b->n = 0;
    b->elements = 0;
    enr_buf_reset(&b->text);
}

static int poster_is(const enr_batch *b, size_t i, const char *want)
{
    const enr_record *r = &b->recs[i];
    return r->poster_len == strlen(want) &&
           memcmp(b->text.data + r->poster_off, want, r->poster_len) == 0;
}

#endif
