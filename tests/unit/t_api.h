/*
 * t_api.h: the ids of one call and its reader's answer, for the unit
 * tests of the readers (test_api.c, test_api_answers.c: the providers'
 * APIs; test_upstream_reply.c: the aggregator's): parse a body against a
 * list of ids, then ask what each id got.
 */
#ifndef ENR_T_API_H
#define ENR_T_API_H

#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "upstream/api.h"

#define MAXIDS 8
static enr_reply_id ids[MAXIDS];
static size_t nids;
static enr_buf arena;

/* ids from a comma-separated list (a list of one may hold a comma: "=" prefix) */
static inline void set_ids(const char *idlist)
{
    static char store[512];
    char *p;

    snprintf(store, sizeof store, "%s", idlist);
    nids = 0;
    for (p = store; *p && nids < MAXIDS;) {
        char *comma = strchr(p, ',');
        ids[nids].id = p;
        ids[nids].id_len = comma ? (size_t)(comma - p) : strlen(p);
        nids++;
        if (comma == NULL)
            break;
        p = comma + 1;
    }
}

static inline int parse(int api, const char *idlist, const char *body)
{
    set_ids(idlist);
    enr_buf_reset(&arena);
    return enr_api_get(api)->parse(body, strlen(body), ids, nids, 42, &arena);
}

static inline int poster_is(size_t i, const char *want)
{
    return ids[i].has_poster && ids[i].poster_len == strlen(want) &&
           memcmp(arena.data + ids[i].poster_off, want, ids[i].poster_len) == 0;
}

static inline int found(size_t i, const char *poster, double duration)
{
    if (ids[i].state != ENR_REPLY_FOUND)
        return 0;
    if (poster ? !poster_is(i, poster) : ids[i].has_poster)
        return 0;
    return duration > 0 ? ids[i].has_duration && ids[i].duration == duration : !ids[i].has_duration;
}

#endif
