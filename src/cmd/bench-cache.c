/*
 * bench-cache.c: the host cache's lookup path alone (docs/upstream.md,
 * "Why not LMDB"): 40,000 YouTube-shaped answers in a cache of the
 * default bounds, then ROUNDS lookups of each, timed; under callgrind
 * (valgrind --tool=callgrind build/bench-cache 2) enr_cache_get's
 * inclusive count over 80,000 lookups gives instructions per lookup.
 *
 *   bench-cache [ROUNDS [FILE [keyed]]]
 *
 * FILE: the cache mapped from that file (made anew) instead of anonymous
 * memory; the lookups are the same code either way.  keyed: its records
 * carry a MAC (enr_cache_authenticate), checked at every lookup.  Then
 * the check every answer read back passes (enr_answer_check) is timed
 * over the same answers.  The program uses
 * only enr_cache_new, _put and _get in memory mode, so the same file
 * built against an older tree measures that tree's cache.  A bench tool
 * only: never installed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "upstream/answer.h"
#include "upstream/cache.h"

#define N 40000

static char ids[N][24];

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 20;
    unsigned long hits = 0;
    struct timespec t0, t1;
    enr_cache_val v;
    enr_cache *c;
    double ns;

    if (argc > 2) {
        uint8_t id[ENR_CACHE_ID_BYTES] = {0};
        const char *why;
        unlink(argv[2]);
        c = enr_cache_open(argv[2], 50000, 16u << 20, id, &why);
        if (c != NULL && argc > 3 && enr_cache_authenticate(c, id) != 0)
            c = NULL;
    } else {
        c = enr_cache_new(50000, 16u << 20);
    }
    if (c == NULL || rounds <= 0) {
        fprintf(stderr, "bench-cache: no cache\n");
        return 1;
    }
    for (int i = 0; i < N; i++) {
        char poster[80];
        int n;
        snprintf(ids[i], sizeof ids[i], "Vid%08dxyz", i * 7919);
        n = snprintf(poster, sizeof poster, "https://i.ytimg.com/vi/%s/hqdefault.jpg", ids[i]);
        memset(&v, 0, sizeof v);
        v.poster = poster;
        v.poster_len = (size_t)n;
        v.duration = i;
        v.has_duration = 1;
        enr_cache_put(c, 1 + i % 3, ids[i], strlen(ids[i]), &v, 1ull << 62);
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < N; i++)
            hits += (unsigned long)enr_cache_get(c, 1 + i % 3, ids[i], strlen(ids[i]), 1000, &v);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ns = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) /
         ((double)rounds * N);
    printf("bench-cache: %s, %lu hits of %lu lookups, %.1f ns a lookup\n",
           argc > 3   ? "keyed file"
           : argc > 2 ? "file"
                      : "memory",
           hits, (unsigned long)rounds * N, ns);
    hits = 0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < N; i++)
            if (enr_cache_get(c, 1 + i % 3, ids[i], strlen(ids[i]), 1000, &v))
                hits += enr_answer_check(&v) == NULL;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("bench-cache: with enr_answer_check, %lu passed, %.1f ns a lookup\n", hits,
           ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) /
               ((double)rounds * N));
    if (argc > 2)
        unlink(argv[2]);
    enr_cache_free(c);
    return 0;
}
