/*
 * cache.c: the host's cache of upstream answers in one shared mapping,
 * anonymous or a file's (see cache.h; cache_file.c makes and checks the
 * file; cache_int.h is the header both share).
 *
 * Layout: a header, an index of fixed slots (buckets of ENR_CACHE_WAYS),
 * and a ring of variable records (the whole answer with its expiry and
 * checksum, the key, the poster) addressed by absolute, ever-growing
 * positions: [tail, head) holds the records, the physical offset is
 * pos % ring_size, and a record never straddles the end (a padding
 * record, or a gap shorter than a record header, fills it).
 *
 * Writers hold a robust process-shared mutex (never more than
 * ENR_CACHE_LOCK_MS to get it); readers take no lock:
 *  - a slot is a sequence lock: seq odd while a writer changes it; a
 *    reader copies the slot and keeps the copy only if seq was even and
 *    the same before and after;
 *  - the tail is the ring's sequence: a writer moves it past a region
 *    before writing over it, and a reader keeps the bytes it copied only
 *    if the record still begins at or after the tail once copied;
 *  - the record repeats the slot's position, hash, provider and key
 *    length, the key is compared and the record's checksum checked, so a
 *    slot and a record of different writes, or a record torn on the disk
 *    (a file after a power loss: any mix of pages), never pass for an
 *    entry.  The answer is the record's alone.
 * A put writes its record, then moves head past it, then publishes the
 * slot; a writer killed between any two steps leaves at worst an odd
 * seq (a miss for readers) or a record nobody points to (reclaimed when
 * the tail passes it).  The next writer gets EOWNERDEAD and repairs:
 * odd slots cleared, slots outside [tail, head) cleared, entries
 * recounted, then the mutex is marked consistent.  A file opened after
 * its writers were gone (dirty) gets the same repair from the first
 * writer of the run; a tail that is not at a record (a file's pages of
 * different moments) moves to the next one that is.
 *
 * Invariants (outside a writer's critical section, once repaired): every
 * used slot points into [tail, head) at a record that names it; entries
 * is the number of used slots, <= max_entries; head - tail <= ring_size.
 * Eviction is oldest first: the record at the tail frees its slot when
 * the ring needs room or the entries bound is reached; a full bucket
 * gives up its entry that expires first (the oldest of those).  An entry
 * past its lifetime stays until then (stale-if-error).  The hash is
 * seeded per host (per file), so ids chosen by a client cannot be aimed
 * at one bucket.
 *
 * A keyed cache (enr_cache_authenticate) adds to each record a MAC under
 * a key the file does not hold: a record rewritten by a writer of the
 * state directory, its sum recomputed with the file's own seed, fails it
 * and is reported as DROPPED, not served.  The key's HMAC states (the
 * inner and outer pads, hashed once) live in this process's memory, a
 * row per cache it maps (g_keys), copied by fork to the workers.
 */
#define OPENSSL_SUPPRESS_DEPRECATED /* SHA256_*: a context copied per record, no allocation */
#include "upstream/cache.h"
#include "upstream/cache_int.h"
#include "base/hash.h"
#include "base/statefile.h"

#include <errno.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define LOAD(x) atomic_load_explicit(&(x), memory_order_relaxed)
#define STORE(x, v) atomic_store_explicit(&(x), (v), memory_order_relaxed)
#define ADD(x, v) atomic_fetch_add_explicit(&(x), (v), memory_order_relaxed)

typedef struct enr_crec crec;
typedef struct enr_cslot cslot;

/* A get's copy of a record: what out->poster points into.  One per
 * process (workers are single-threaded). */
static _Alignas(8) char scratch[ENR_CACHE_RECORD_MAX];

/* The keys of the keyed caches this process maps. */
static struct keyed {
    const enr_cache *c; /* NULL: a free row */
    SHA256_CTX in, out; /* after the key's ipad and opad blocks */
} g_keys[ENR_CACHE_MAX_KEYED];

int enr_cache_authenticate(enr_cache *c, const uint8_t key[ENR_CACHE_KEY_BYTES])
{
    unsigned char pad[SHA256_CBLOCK];

    for (int i = 0; i < ENR_CACHE_MAX_KEYED; i++) {
        struct keyed *k = &g_keys[i];
        if (k->c != NULL && k->c != c)
            continue;
        /* HMAC (RFC 2104) with a key shorter than a block: the pads
         * hashed once here, a copy of each per record. */
        memset(pad, 0x36, sizeof pad);
        for (int b = 0; b < ENR_CACHE_KEY_BYTES; b++)
            pad[b] ^= key[b];
        SHA256_Init(&k->in);
        SHA256_Update(&k->in, pad, sizeof pad);
        memset(pad, 0x5c, sizeof pad);
        for (int b = 0; b < ENR_CACHE_KEY_BYTES; b++)
            pad[b] ^= key[b];
        SHA256_Init(&k->out);
        SHA256_Update(&k->out, pad, sizeof pad);
        explicit_bzero(pad, sizeof pad);
        k->c = c;
        return 0;
    }
    errno = ENOSPC;
    return -1;
}

static const struct keyed *key_of(const enr_cache *c)
{
    for (int i = 0; i < ENR_CACHE_MAX_KEYED; i++)
        if (g_keys[i].c == c)
            return &g_keys[i];
    return NULL;
}

/* The record's MAC: HMAC-SHA256 of its n bytes (sum and mac as 0), the
 * first 8 bytes of it. */
static uint64_t rec_mac(const struct keyed *k, const void *rec, size_t n)
{
    unsigned char inner[SHA256_DIGEST_LENGTH], outer[SHA256_DIGEST_LENGTH];
    SHA256_CTX x = k->in;
    uint64_t m;

    SHA256_Update(&x, rec, n);
    SHA256_Final(inner, &x);
    x = k->out;
    SHA256_Update(&x, inner, sizeof inner);
    SHA256_Final(outer, &x);
    memcpy(&m, outer, sizeof m);
    return m;
}

static cslot *slots(const enr_cache *c)
{
    return (cslot *)((char *)c + c->index_off);
}

static char *ring(const enr_cache *c)
{
    return (char *)c + c->ring_off;
}

static uint64_t nslots(const enr_cache *c)
{
    return c->nbuckets * ENR_CACHE_WAYS;
}

void enr_cache_layout(size_t max_entries, size_t max_bytes, enr_cache *c)
{
    uint64_t hdr = ENR_CACHE_ALIGN64(sizeof(enr_cache)), nb = 1;

    c->magic = ENR_CACHE_MAGIC;
    c->version = ENR_CACHE_VERSION;
    c->hdr_size = (uint32_t)sizeof(enr_cache);
    c->slot_size = (uint32_t)sizeof(cslot);
    c->rec_size = (uint32_t)sizeof(crec);
    c->ways = ENR_CACHE_WAYS;
    c->unused_ = 0;
    c->index_off = hdr;
    if (max_entries == 0 || max_bytes == 0) {
        c->map_bytes = c->ring_off = hdr;
        c->max_entries = c->ring_size = 0;
        c->nbuckets = 1;
        return;
    }
    if (max_bytes < ENR_CACHE_MIN_BYTES)
        max_bytes = ENR_CACHE_MIN_BYTES;
    /* a quarter more slots than entries: few buckets are ever full */
    while (nb * ENR_CACHE_WAYS < max_entries + max_entries / 4 && nb < ENR_CACHE_MAX_BUCKETS)
        nb <<= 1;
    /* The index takes at most half of the bytes: a small cache_bytes
     * holds fewer entries rather than no data. */
    while (nb > 1 && hdr + nb * ENR_CACHE_WAYS * sizeof(cslot) > max_bytes / 2)
        nb >>= 1;
    if (max_entries > nb * ENR_CACHE_WAYS)
        max_entries = nb * ENR_CACHE_WAYS;
    c->nbuckets = nb;
    c->max_entries = max_entries;
    c->ring_off = ENR_CACHE_ALIGN64(hdr + nb * ENR_CACHE_WAYS * sizeof(cslot));
    c->map_bytes = max_bytes;
    c->ring_size = (max_bytes - c->ring_off) & ~(uint64_t)7;
}

/* Eight bytes at a time, each mixed in by a multiply and a rotation,
 * then splitmix64's finalizer: a torn or stale record fails it but for
 * a chance of 2^-64, at a fraction of a byte-wise hash's cost. */
uint64_t enr_cache_sum(uint64_t seed, const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = seed ^ 0x9e3779b97f4a7c15ull ^ n;

    for (size_t i = 0; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h = (h << 29) | (h >> 35);
    }
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

int enr_cache_init_run(enr_cache *c, int fd, int dirty)
{
    pthread_mutexattr_t at;
    int rc;

    c->disabled = c->max_entries == 0 || c->ring_size == 0;
    c->fd = fd;
    STORE(c->dirty, dirty ? 1u : 0u);
    STORE(c->evictions, 0);
    STORE(c->recoveries, 0);
    STORE(c->busy, 0);
    rc = pthread_mutexattr_init(&at);
    if (rc != 0)
        return rc;
    rc = pthread_mutexattr_setpshared(&at, PTHREAD_PROCESS_SHARED);
    if (rc == 0)
        rc = pthread_mutexattr_setrobust(&at, PTHREAD_MUTEX_ROBUST);
    if (rc == 0)
        rc = pthread_mutex_init(&c->lock, &at);
    pthread_mutexattr_destroy(&at);
    return rc;
}

enr_cache *enr_cache_new(size_t max_entries, size_t max_bytes)
{
    enr_cache lay, *c;
    void *p;
    int rc;

    memset(&lay, 0, sizeof lay);
    enr_cache_layout(max_entries, max_bytes, &lay);
    p = mmap(NULL, lay.map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    /* Anonymous pages are zero: every slot unused with seq 0, head = tail = 0.
     * Only the header is touched here; the rest is paid for as it fills. */
    c = p;
    memcpy(c, &lay, offsetof(enr_cache, seed));
    if (getrandom(&c->seed, sizeof(c->seed), GRND_NONBLOCK) != (ssize_t)sizeof(c->seed)) {
        /* No entropy yet (early boot): a time-based seed still differs
         * per host start, which is all the flooding defence needs here. */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        c->seed =
            (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)ts.tv_sec ^ (uint64_t)getpid();
    }
    c->layout_sum = enr_cache_sum(c->seed, c, offsetof(enr_cache, layout_sum));
    rc = enr_cache_init_run(c, -1, 0);
    if (rc != 0) {
        munmap(p, lay.map_bytes);
        errno = rc;
        return NULL;
    }
    return c;
}

void enr_cache_free(enr_cache *c)
{
    int fd;

    if (c == NULL)
        return;
    fd = c->fd;
    for (int i = 0; i < ENR_CACHE_MAX_KEYED; i++)
        if (g_keys[i].c == c) {
            explicit_bzero(&g_keys[i], sizeof g_keys[i]);
            g_keys[i].c = NULL;
        }
    munmap(c, c->map_bytes);
    enr_statefile_close(fd);
}

/* ---- the sequence locks ------------------------------------------------ */

/* A consistent copy of *s into *out, or 0 (being written, or changed). */
static int slot_read(cslot *s, cslot *out)
{
    uint32_t a = atomic_load_explicit(&s->seq, memory_order_acquire), b;

    if (a & 1u)
        return 0;
    memcpy((char *)out + offsetof(cslot, len), (const char *)s + offsetof(cslot, len),
           sizeof(cslot) - offsetof(cslot, len));
    atomic_thread_fence(memory_order_acquire);
    b = LOAD(s->seq);
    return a == b;
}

/* Writers only (lock held): seq goes odd, the fields change, seq goes even. */
static void slot_write(cslot *s, const cslot *v)
{
    uint32_t q = LOAD(s->seq);

    STORE(s->seq, q + 1);
    atomic_thread_fence(memory_order_release);
    memcpy((char *)s + offsetof(cslot, len), (const char *)v + offsetof(cslot, len),
           sizeof(cslot) - offsetof(cslot, len));
    atomic_store_explicit(&s->seq, q + 2, memory_order_release);
}

static void slot_clear(enr_cache *c, cslot *s)
{
    cslot none;

    memset(&none, 0, sizeof none);
    slot_write(s, &none);
    if (LOAD(c->entries) > 0)
        STORE(c->entries, LOAD(c->entries) - 1);
}

/* The tail moves before the bytes behind it are written over: a reader
 * that copied a record and still sees it at or after the tail copied it
 * whole (pairs with the acquire fence in enr_cache_get). */
static void tail_to(enr_cache *c, uint64_t t)
{
    STORE(c->tail, t);
    atomic_thread_fence(memory_order_release);
}

/* ---- writers (lock held) --------------------------------------------- */

/* A record header that is what a writer put at absolute position at. */
static int rec_sane(enr_cache *c, const crec *r, uint64_t at)
{
    uint64_t off = at % c->ring_size;

    return r->pos == at && r->len >= sizeof *r && r->len % 8 == 0 && off + r->len <= c->ring_size &&
           at + r->len <= LOAD(c->head);
}

static void recover(enr_cache *c);

/* The tail is not at a record: the file's pages come from different
 * moments (a power loss), so the ring holds bytes its header never saw.
 * The tail goes to the next record that is one, or to the head; the
 * slots left behind are cleared. */
static void resync(enr_cache *c, uint64_t t)
{
    uint64_t h = LOAD(c->head);
    crec r;

    for (t += 8; t < h; t += 8) {
        uint64_t off = t % c->ring_size;
        if (c->ring_size - off < sizeof r)
            continue;
        memcpy(&r, ring(c) + off, sizeof r);
        if (rec_sane(c, &r, t))
            break;
    }
    tail_to(c, t < h ? t : h);
    recover(c);
}

/* The tail past the oldest record; its slot is freed if it still points
 * at it (a slot reused since points elsewhere). */
static void evict_oldest(enr_cache *c)
{
    uint64_t t = LOAD(c->tail), h = LOAD(c->head), off = t % c->ring_size;
    crec r;

    if (t >= h)
        return;
    if (c->ring_size - off < sizeof r) {
        tail_to(c, t + (c->ring_size - off));
        return;
    }
    memcpy(&r, ring(c) + off, sizeof r);
    if (!rec_sane(c, &r, t)) {
        resync(c, t);
        return;
    }
    if (r.slot != 0 && r.slot <= nslots(c)) {
        cslot *s = &slots(c)[r.slot - 1];
        if (s->used && s->pos == t) {
            slot_clear(c, s);
            ADD(c->evictions, 1);
        }
    }
    tail_to(c, t + r.len);
}

/* Room for need bytes in one piece; returns where they go. */
static uint64_t make_room(enr_cache *c, uint64_t need)
{
    uint64_t R = c->ring_size;

    for (;;) {
        uint64_t h = LOAD(c->head), t = LOAD(c->tail), off = h % R;
        uint64_t start = R - off < need ? h + (R - off) : h;
        /* need <= R / 4 and start - h < need: an empty ring always fits,
         * so the loop ends; each turn moves the tail forward. */
        if (start + need - t <= R) {
            if (start != h && R - off >= sizeof(crec)) {
                crec pad;
                memset(&pad, 0, sizeof pad);
                pad.len = (uint32_t)(R - off);
                pad.pos = h;
                memcpy(ring(c) + off, &pad, sizeof pad);
            }
            return start;
        }
        evict_oldest(c);
    }
}

/* The used slot of the bucket holding provider + key, or NULL. */
static cslot *find_locked(enr_cache *c, cslot *bucket, uint64_t h, int provider, const char *key,
                          size_t key_len)
{
    for (unsigned w = 0; w < ENR_CACHE_WAYS; w++) {
        cslot *s = &bucket[w];
        if (s->used && s->hash == h && s->provider == provider && s->key_len == key_len &&
            s->pos % c->ring_size + sizeof(crec) + key_len <= c->ring_size &&
            memcmp(ring(c) + s->pos % c->ring_size + sizeof(crec), key, key_len) == 0)
            return s;
    }
    return NULL;
}

/* A writer died holding the lock, or the file was opened after its
 * writers were gone: whatever was left half done is undone. */
static void recover(enr_cache *c)
{
    cslot *sl = slots(c);
    uint64_t n = 0, t = LOAD(c->tail), h = LOAD(c->head);

    if (t > h || h - t > c->ring_size) {
        tail_to(c, h);
        t = h;
    }
    for (uint64_t i = 0; i < nslots(c); i++) {
        cslot *s = &sl[i];
        uint32_t q = LOAD(s->seq);
        if (q & 1u) {
            /* torn: readers saw it odd; emptied, and even again */
            memset((char *)s + offsetof(cslot, len), 0, sizeof(cslot) - offsetof(cslot, len));
            atomic_store_explicit(&s->seq, q + 1, memory_order_release);
        } else if (s->used && (s->pos < t || s->pos + s->len > h)) {
            slot_clear(c, s);
        } else if (s->used) {
            n++;
        }
    }
    STORE(c->entries, n);
}

static int lock(enr_cache *c)
{
    struct timespec ts;
    int rc;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += ENR_CACHE_LOCK_MS * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    rc = pthread_mutex_clocklock(&c->lock, CLOCK_MONOTONIC, &ts);
    if (rc == EOWNERDEAD) {
        recover(c);
        pthread_mutex_consistent(&c->lock);
        ADD(c->recoveries, 1);
        STORE(c->dirty, 0);
        return 0;
    }
    if (rc != 0) {
        /* ETIMEDOUT (a writer stopped or very slow), ENOTRECOVERABLE: the
         * answer is simply not cached. */
        ADD(c->busy, 1);
        return -1;
    }
    if (LOAD(c->dirty)) {
        /* the file's last writers may have died in a put (or the machine
         * under them): repaired once, by the first writer of this run */
        recover(c);
        STORE(c->dirty, 0);
    }
    return 0;
}

/* The record of v for key at absolute position at, summed. */
static void rec_write(enr_cache *c, uint64_t at, uint32_t slot, uint64_t h, int provider,
                      const char *key, size_t key_len, const enr_cache_val *v, uint64_t need,
                      uint64_t expires_ms)
{
    char *dst = ring(c) + at % c->ring_size;
    size_t plen = v->poster ? v->poster_len : 0;
    const struct keyed *k;
    crec r;

    memset(&r, 0, sizeof r);
    r.len = (uint32_t)need;
    r.slot = slot;
    r.pos = at;
    r.hash = h;
    r.expires_ms = expires_ms;
    r.duration = v->has_duration ? v->duration : 0;
    r.key_len = (uint32_t)key_len;
    r.poster_len = (uint32_t)plen;
    r.provider = (uint8_t)provider;
    r.flags = (uint8_t)((v->poster ? ENR_CF_POSTER : 0) | (v->has_duration ? ENR_CF_DURATION : 0) |
                        (v->negative ? ENR_CF_NEGATIVE : 0));
    memcpy(dst, &r, sizeof r);
    memcpy(dst + sizeof r, key, key_len);
    if (plen)
        memcpy(dst + sizeof r + key_len, v->poster, plen);
    /* the padding to 8 is summed too: zeroed, not what the ring held */
    memset(dst + sizeof r + key_len + plen, 0, need - sizeof r - key_len - plen);
    if ((k = key_of(c)) != NULL) {
        r.mac = rec_mac(k, dst, need); /* sum and mac still 0 */
        memcpy(dst + offsetof(crec, mac), &r.mac, sizeof r.mac);
    }
    r.sum = enr_cache_sum(c->seed, dst, need);
    memcpy(dst + offsetof(crec, sum), &r.sum, sizeof r.sum);
}

int enr_cache_put(enr_cache *c, int provider, const char *key, size_t key_len,
                  const enr_cache_val *v, uint64_t expires_ms)
{
    size_t plen = v->poster ? v->poster_len : 0;
    uint64_t need, h, at;
    cslot *bucket, *victim = NULL, nv;

    if (c == NULL || c->disabled || key_len > ENR_CACHE_RECORD_MAX || plen > ENR_CACHE_RECORD_MAX)
        return -1;
    need = ENR_CACHE_ALIGN8(sizeof(crec) + key_len + plen);
    if (need > ENR_CACHE_RECORD_MAX || need > c->ring_size / 4)
        return -1;
    h = enr_hash_key(c->seed, provider, key, key_len);
    if (lock(c) != 0)
        return -1;
    bucket = &slots(c)[(h & (c->nbuckets - 1)) * ENR_CACHE_WAYS];
    victim = find_locked(c, bucket, h, provider, key, key_len);
    if (victim != NULL)
        slot_clear(c, victim);
    while (LOAD(c->entries) >= c->max_entries && LOAD(c->tail) < LOAD(c->head))
        evict_oldest(c);
    at = make_room(c, need);
    /* The slot: the one just freed, else an unused one, else the one
     * that expires first (the oldest of those). */
    if (victim == NULL || victim->used) {
        victim = &bucket[0];
        for (unsigned w = 1; w < ENR_CACHE_WAYS && victim->used; w++)
            if (!bucket[w].used || bucket[w].expires_ms < victim->expires_ms ||
                (bucket[w].expires_ms == victim->expires_ms && bucket[w].pos < victim->pos))
                victim = &bucket[w];
    }
    if (victim->used) {
        slot_clear(c, victim);
        ADD(c->evictions, 1);
    }
    rec_write(c, at, (uint32_t)(victim - slots(c)) + 1, h, provider, key, key_len, v, need,
              expires_ms);
    STORE(c->head, at + need);
    memset(&nv, 0, sizeof nv);
    nv.len = (uint32_t)need;
    nv.key_len = (uint32_t)key_len;
    nv.used = 1;
    nv.provider = (uint8_t)provider;
    nv.hash = h;
    nv.pos = at;
    nv.expires_ms = expires_ms;
    slot_write(victim, &nv);
    ADD(c->entries, 1);
    pthread_mutex_unlock(&c->lock);
    return 0;
}

int enr_cache_drop(enr_cache *c, int provider, const char *key, size_t key_len)
{
    uint64_t h;
    cslot *s;

    if (c == NULL || c->disabled)
        return -1;
    h = enr_hash_key(c->seed, provider, key, key_len);
    if (lock(c) != 0)
        return -1;
    s = find_locked(c, &slots(c)[(h & (c->nbuckets - 1)) * ENR_CACHE_WAYS], h, provider, key,
                    key_len);
    if (s != NULL)
        slot_clear(c, s);
    pthread_mutex_unlock(&c->lock);
    return s != NULL ? 0 : -1;
}

/* ---- readers (no lock) ------------------------------------------------ */

/* The copy in scratch of slot s's record: 1 when it is whole, still in
 * the ring, and the record of provider + key that s points to; -1 when
 * it is all that but a keyed cache's MAC does not match (forged); else 0. */
static int rec_read(enr_cache *c, const cslot *s, uint64_t h, int provider, const char *key,
                    size_t key_len, crec *r)
{
    uint64_t off = s->pos % c->ring_size, sum;
    const struct keyed *k;

    if (s->len < sizeof *r || s->len > sizeof scratch || off + s->len > c->ring_size)
        return 0;
    memcpy(scratch, ring(c) + off, s->len);
    atomic_thread_fence(memory_order_acquire);
    if (s->pos < LOAD(c->tail))
        return 0; /* written over while we copied */
    memcpy(r, scratch, sizeof *r);
    if (r->len != s->len || r->pos != s->pos || r->hash != h || r->provider != provider ||
        r->key_len != key_len || sizeof *r + (uint64_t)key_len + r->poster_len > s->len ||
        memcmp(scratch + sizeof *r, key, key_len) != 0)
        return 0;
    memset(scratch + offsetof(crec, sum), 0, sizeof sum);
    sum = enr_cache_sum(c->seed, scratch, s->len);
    if (sum != r->sum)
        return 0; /* torn: a miss */
    if ((k = key_of(c)) == NULL)
        return 1;
    memset(scratch + offsetof(crec, mac), 0, sizeof r->mac);
    return rec_mac(k, scratch, s->len) == r->mac ? 1 : -1;
}

int enr_cache_lookup(enr_cache *c, int provider, const char *key, size_t key_len, uint64_t now_ms,
                     uint64_t max_stale_ms, enr_cache_val *out)
{
    uint64_t h;
    cslot *bucket;

    if (c == NULL || c->disabled)
        return ENR_CACHE_MISS;
    h = enr_hash_key(c->seed, provider, key, key_len);
    bucket = &slots(c)[(h & (c->nbuckets - 1)) * ENR_CACHE_WAYS];
    for (unsigned w = 0; w < ENR_CACHE_WAYS; w++) {
        cslot s;
        crec r;
        int fresh, rc;

        if (!slot_read(&bucket[w], &s) || !s.used || s.hash != h || s.provider != provider ||
            s.key_len != key_len)
            continue;
        fresh = now_ms < s.expires_ms;
        if (!fresh && (max_stale_ms == 0 || now_ms - s.expires_ms >= max_stale_ms))
            return ENR_CACHE_MISS; /* reclaimed by a writer when its room is needed */
        rc = rec_read(c, &s, h, provider, key, key_len, &r);
        if (rc <= 0)
            return rc < 0 ? ENR_CACHE_DROPPED : ENR_CACHE_MISS;
        /* the record's expiry: the slot's may be of another moment (a file's pages) */
        fresh = now_ms < r.expires_ms;
        if (!fresh && (max_stale_ms == 0 || now_ms - r.expires_ms >= max_stale_ms))
            return ENR_CACHE_MISS;
        out->poster = r.flags & ENR_CF_POSTER ? scratch + sizeof r + key_len : NULL;
        out->poster_len = r.flags & ENR_CF_POSTER ? r.poster_len : 0;
        out->duration = r.duration;
        out->has_duration = (r.flags & ENR_CF_DURATION) != 0;
        out->negative = (r.flags & ENR_CF_NEGATIVE) != 0;
        out->expires_ms = r.expires_ms;
        return fresh ? ENR_CACHE_FRESH : ENR_CACHE_STALE;
    }
    return ENR_CACHE_MISS;
}

int enr_cache_get(enr_cache *c, int provider, const char *key, size_t key_len, uint64_t now_ms,
                  enr_cache_val *out)
{
    return enr_cache_lookup(c, provider, key, key_len, now_ms, 0, out) == ENR_CACHE_FRESH;
}

void enr_cache_stats_of(const enr_cache *cc, enr_cache_stats *st)
{
    enr_cache *c = (enr_cache *)cc; /* atomic loads want a non-const object */
    uint64_t t, h;

    memset(st, 0, sizeof *st);
    if (c == NULL)
        return;
    /* tail first: head only grows, so head >= that tail */
    t = atomic_load_explicit(&c->tail, memory_order_acquire);
    h = atomic_load_explicit(&c->head, memory_order_acquire);
    st->entries = LOAD(c->entries);
    st->max_entries = c->max_entries;
    st->bytes = h >= t ? h - t : 0;
    st->max_bytes = c->map_bytes;
    st->evictions = LOAD(c->evictions);
    st->recoveries = LOAD(c->recoveries);
    st->busy = LOAD(c->busy);
    st->persistent = c->fd >= 0;
}

size_t enr_cache_entries(const enr_cache *c)
{
    enr_cache_stats st;

    enr_cache_stats_of(c, &st);
    return (size_t)st.entries;
}

size_t enr_cache_bytes(const enr_cache *c)
{
    enr_cache_stats st;

    enr_cache_stats_of(c, &st);
    return (size_t)st.bytes;
}

uint64_t enr_cache_evictions(const enr_cache *c)
{
    enr_cache_stats st;

    enr_cache_stats_of(c, &st);
    return st.evictions;
}
