/*
 * hash.h: the seeded hash of the client's tables (the cache, the batch's
 * wanted ids, the ids of one reply).
 *
 * FNV-1a over a per-process random seed, then a 64-bit finalizer
 * (splitmix64) so the low bits used as the bucket depend on every byte:
 * ids come from request bodies and replies, and the seed keeps anyone from
 * choosing ids that collide.
 */
#ifndef ENR_HASH_H
#define ENR_HASH_H

#include <stddef.h>
#include <stdint.h>

static inline uint64_t enr_hash_key(uint64_t seed, int provider, const char *key, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull ^ seed;

    h = (h ^ (uint8_t)provider) * 0x100000001b3ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (uint8_t)key[i]) * 0x100000001b3ull;
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 31;
    return h;
}

#endif
