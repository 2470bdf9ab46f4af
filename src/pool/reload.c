/*
 * reload.c: configuration generations.  On HUP the file is read and
 * validated again, and a valid configuration is tried on one worker (the
 * probe) in a slot no generation uses; once the probe reports ready the
 * configuration is committed (generation + 1) and the old generation's
 * workers are asked to finish, each replaced in its own slot by a worker
 * of the new one.  A probe that dies or does not report ready within
 * ENR_RELOAD_PROBE_MS is the configuration's failure: it is retried after
 * a back-off, or replaced by the next HUP.
 *
 * Invariants:
 *  - The running generation is never asked to stop before a worker of
 *    the new configuration has reported ready: a configuration whose
 *    workers cannot start is never committed, and the old one keeps
 *    serving (docs/pool.md).
 *  - The socket settings (the sockets stay open across generations) and
 *    the budget's file (its page stays mapped) never change on reload: a
 *    file that changes a key whose row says RESTART (base/confkeys.inc)
 *    is applied without it, with a warning naming it.
 *  - This file forks nothing and calls nothing of master.c: a probe to
 *    start is returned to the master (enr_reload_start), which forks it at
 *    its one fork site and says how it went (enr_reload_started); workers
 *    are ended only through child.h.
 *  - The reload's end (done, failed, refused) and its STATUS= text are
 *    decided here and nowhere else.
 *  - The upstream cache is kept across a reload that leaves its layout
 *    (the rows that say LAYOUT in base/confkeys.inc: cache_entries,
 *    cache_bytes, cache_file) and its identity (every key that changes
 *    what a call sends or where: the rows that say IDENTITY, and the
 *    secrets' bytes) as they were; otherwise the new configuration gets
 *    a new, empty cache, made before its probe is forked, and the old one
 *    lives on in the old generation's workers until the last of them
 *    exits (docs/upstream.md).  A cached answer is never served to a
 *    configuration that would have asked differently.
 */
#define OPENSSL_SUPPRESS_DEPRECATED /* SHA256_*: no provider to load at start-up */
#include "pool/reload.h"
#include "upstream/budget.h"
#include "upstream/quota.h"

#include <errno.h>
#include <openssl/sha.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "ops/health.h"
#include "pool/child.h"
#include "base/clock.h"
#include "base/log.h"
#include "pool/notify.h"
#include "base/scoreboard.h"
#include "pool/worker.h"

/* The probe of a pending configuration ended without reporting ready
 * (why: an exit reason and its detail, or a time-out).  The running
 * generation was never touched; the same configuration is tried again
 * after a back-off, or replaced by the next HUP. */
static void probe_failed(enr_master *m, const char *why, const char *detail, uint64_t now)
{
    enr_sb_pool *p = &m->sb->pool;
    char status[256];

    m->probe_failures++;
    m->retry_ms = enr_backoff_next(m->retry_ms, ENR_RELOAD_RETRY_MIN_MS);
    m->retry_at = now + m->retry_ms;
    snprintf(m->probe_error, sizeof m->probe_error, "%s%s%s", why, detail[0] ? " " : "", detail);
    ENR_SB_ADD(p->reload_failures, 1);
    ENR_SB_SET(p->reload_retry_ms, m->retry_ms);
    memcpy(p->reload_error, m->probe_error, sizeof p->reload_error);
    ENR_SB_SET(p->state, ENR_POOL_RUNNING); /* the old generation is running as before */
    enr_log(ENR_LOG_ERROR,
            "reload failed: a worker of the new configuration did not start; the old "
            "configuration keeps serving",
            "generation=%u reason=%s%s%s failures=%u retry_in_ms=%" PRIu64, m->generation + 1, why,
            detail[0] ? " " : "", detail, m->probe_failures, m->retry_ms);
    enr_reload_failed_text(m, status, sizeof status);
    enr_notify_status(status);
    /* systemd's reload ends here: the configuration in force is the old one. */
    if (m->probe_failures == 1)
        enr_notify_ready();
}

/* A HUP whose file cannot be used at all (invalid, or a resource the new
 * configuration needs cannot be had): nothing was tried, the running
 * configuration stays.  Counted and shown like a probe that failed, so a
 * refused reload is never mistaken for a done one. */
static void refused(enr_master *m, const char *msg, const char *status, const char *err)
{
    enr_sb_pool *p = &m->sb->pool;
    char q[600];

    ENR_SB_ADD(p->reload_failures, 1);
    snprintf(p->reload_error, sizeof p->reload_error, "refused: %s", err[0] ? err : status);
    if (err[0])
        enr_log(ENR_LOG_ERROR, msg, "error=%s", enr_log_quote(q, sizeof q, err));
    else
        enr_log(ENR_LOG_ERROR, msg, NULL);
    enr_notify_status(status);
    enr_notify_ready();
}

/* A cache of next's own, unless next could use the running one as it is
 * (the same identity, the same bounds: its answers and layout still
 * hold; TTLs are stamped at each put, so a new one applies from now on).
 * *why names what changed. */
static int cache_kept(const enr_config *next, const enr_config *cur, const char **why)
{
    *why = enr_config_cache_change(next, cur);
    return *why == NULL;
}

/* The pending configuration's cache, when it has one of its own, is
 * unmapped here (a probe that used it has its own mapping). */
static void drop_next_cache(enr_master *m)
{
    if (m->next_cache != m->cache)
        enr_cache_free(m->next_cache);
    m->next_cache = m->cache;
}

/* The probe reported ready: the new configuration becomes the running
 * one, and only now is the old generation asked to finish. */
static void commit_reload(enr_master *m)
{
    char qsource[2 * ENR_PATH_MAX];
    enr_sb_pool *p = &m->sb->pool;

    if (m->next_cache != m->cache) {
        /* The master's view only: the old workers keep theirs until they exit. */
        enr_cache_free(m->cache);
        m->cache = m->next_cache;
    }
    enr_config_secrets_free(&m->cfg, &m->next_cfg); /* the old generation's workers keep theirs */
    m->cfg = m->next_cfg;
    enr_budget_configure(&m->cfg); /* the new limits, for every process */
    m->generation++;
    /* A refused key waits for this: the new configuration may hold a new
     * one, so its sources try again at once (quota.h). */
    enr_quota_clear_auth(m->sb->quota);
    m->pending = 0;
    if (m->probe_slot < ENR_SB_MAX_WORKERS && m->w[m->probe_slot].pid > 0)
        m->w[m->probe_slot].probe = ENR_PROBE_EXTRA;
    ENR_SB_ADD(p->generation, 1);
    ENR_SB_SET(p->workers, m->cfg.workers);
    if (m->cfg.workers > m->sb->nslots)
        m->sb->nslots = m->cfg.workers;
    ENR_SB_SET(p->state, ENR_POOL_RELOADING);
    ENR_SB_SET(p->reload_pending, 0);
    ENR_SB_SET(p->reload_retry_ms, 0);
    p->reload_error[0] = '\0';
    m->reloading = 1;
    m->reload_start_ms = enr_mono_ms();
    /* A worker asked to reload finishes the request in hand; the
     * connections waiting in the backlog go to the probe and to the new
     * workers that take the old ones' slots. */
    for (unsigned i = 0; i < ENR_SB_MAX_WORKERS; i++)
        if (m->w[i].pid > 0 && m->w[i].generation != m->generation)
            enr_child_ask(&m->w[i], ENR_EXIT_RELOAD, ENR_STEP_TERM);
    enr_child_ask(&m->status, ENR_EXIT_RELOAD, ENR_STEP_TERM);
    enr_log(ENR_LOG_INFO, "reload", "generation=%u source=%s workers=%u probe_failures=%u",
            m->generation, enr_log_quote(qsource, sizeof qsource, m->cfg.source), m->cfg.workers,
            m->probe_failures);
}

/* One worker of the pending configuration, in a slot no generation uses:
 * the running pool is untouched until it reports ready.  The slot is
 * returned for the master to fork (enr_reload_started says how it went). */
static enr_reload_start start_probe(enr_master *m)
{
    enr_reload_start none = {0, 0, NULL, 0};
    unsigned lo = m->cfg.workers > m->next_cfg.workers ? m->cfg.workers : m->next_cfg.workers;
    unsigned slot = ENR_SB_MAX_WORKERS;

    for (unsigned i = lo; i < ENR_SB_MAX_WORKERS; i++)
        if (m->w[i].pid == 0) {
            slot = i;
            break;
        }
    if (slot == ENR_SB_MAX_WORKERS) {
        enr_log(ENR_LOG_WARN, "reload: no spare slot for a probe worker, switching at once",
                "workers=%u", m->next_cfg.workers);
        m->probe_slot = ENR_SB_MAX_WORKERS; /* none */
        commit_reload(m);
        return none;
    }
    if (slot >= m->sb->nslots)
        m->sb->nslots = slot + 1;
    m->probe_slot = slot;
    return (enr_reload_start){1, slot, &m->next_cfg, m->generation + 1};
}

void enr_reload_started(enr_master *m, const enr_reload_start *st, int forked, uint64_t now)
{
    if (!st->start)
        return;
    if (!forked) {
        probe_failed(m, "fork", "", now);
        return;
    }
    m->w[st->slot].probe = ENR_PROBE_TRYING;
    m->probe_deadline = now + ENR_RELOAD_PROBE_MS;
    enr_log(ENR_LOG_INFO, "reload: starting one worker of the new configuration first",
            "generation=%u slot=%u attempt=%u", st->gen, st->slot, m->probe_failures + 1);
}

/* Each loop turn while a reload is pending or its probe still serves. */
enr_reload_start enr_reload_check(enr_master *m, uint64_t now)
{
    enr_reload_start none = {0, 0, NULL, 0};

    if (m->pending) {
        enr_child *ch = &m->w[m->probe_slot];
        if (ch->pid == 0 || ch->probe != ENR_PROBE_TRYING) {
            if (now >= m->retry_at)
                return start_probe(m);
        } else if (ch->ready) {
            commit_reload(m);
        } else if (now >= m->probe_deadline && ch->asked == ENR_EXIT_NONE) {
            enr_log(ENR_LOG_ERROR, "reload: the new worker did not report ready in time",
                    "worker_pid=%ld timeout_ms=%d", (long)ch->pid, ENR_RELOAD_PROBE_MS);
            enr_child_ask(ch, ENR_EXIT_TIMEOUT, ENR_STEP_KILL);
        }
        return none;
    }
    /* A committed probe serves until its generation fills the pool. */
    for (unsigned i = 0; i < ENR_SB_MAX_WORKERS; i++) {
        enr_child *ch = &m->w[i];
        int full = 1;
        if (ch->pid <= 0 || ch->probe != ENR_PROBE_EXTRA || ch->asked != ENR_EXIT_NONE)
            continue;
        for (unsigned j = 0; j < m->cfg.workers && full; j++)
            full = m->w[j].pid > 0 && m->w[j].ready && m->w[j].generation == m->generation;
        if (full)
            enr_child_ask(ch, ENR_EXIT_RELOAD, ENR_STEP_TERM);
    }
    return none;
}

enr_reload_start enr_reload(enr_master *m, uint64_t now)
{
    enr_reload_start none = {0, 0, NULL, 0};
    enr_cache *ncache = NULL;
    enr_config next;
    const char *changed = NULL;
    char err[512], kept[256];

    enr_notify_reloading();
    {
        /* A HUP is also the operator's way out of the provider's pause
         * (up to an hour from one Retry-After), whatever the file's fate:
         * the cache is kept, and the next call asks again. */
        for (unsigned i = 0; i < ENR_UP_SOURCES; i++) {
            uint64_t left = enr_quota_resume(&m->sb->quota[i], now);
            if (left > 0)
                enr_log(ENR_LOG_WARN, "reload: the provider's pause ended early, calls resume",
                        "source=%s pause_ms_left=%" PRIu64, enr_config_source_names[i], left);
        }
    }
    if (enr_config_load(&next, m->cfg_path, err, sizeof err) != 0 ||
        enr_config_load_secrets(&next, err, sizeof err) != 0) {
        refused(m, "reload refused: configuration invalid, keeping the old one",
                "reload refused: invalid configuration (see log)", err);
        return none;
    }
    if (enr_worker_preload(&next, err, sizeof err) != 0) {
        refused(m, "reload refused: upstream_url is set but libcurl cannot be loaded",
                "reload refused: libcurl cannot be loaded (see log)", err);
        enr_config_secrets_free(&next, NULL);
        return none;
    }
    if (enr_config_keep_restart(&next, &m->cfg, kept, sizeof kept) > 0)
        enr_log(ENR_LOG_WARN,
                "reload: these keys change only on restart, their running values stay", "keys=%s",
                kept);
    if (cache_kept(&next, &m->cfg, &changed)) {
        ncache = m->cache;
    } else if (enr_reload_cache_new(&next, &ncache) != 0) {
        refused(m, "reload refused: the new upstream cache cannot be mapped",
                "reload refused: upstream cache cannot be mapped (see log)", "");
        enr_config_secrets_free(&next, NULL);
        return none;
    } else if (ncache != NULL) {
        enr_log(ENR_LOG_INFO, "reload: a new, empty upstream cache for the new configuration",
                "changed=%s cache_entries=%u cache_bytes=%zu", changed, next.cache_entries,
                next.cache_bytes);
    }
    if (m->pending) {
        /* A newer file replaces the one still being tried. */
        enr_child *ch = &m->w[m->probe_slot];
        if (ch->pid > 0 && ch->probe == ENR_PROBE_TRYING) {
            ch->probe = ENR_PROBE_NONE;
            enr_child_ask(ch, ENR_EXIT_RELOAD, ENR_STEP_TERM);
        }
    }
    drop_next_cache(m);
    m->next_cache = ncache;
    enr_config_secrets_free(&m->next_cfg, &m->cfg); /* a pending one's, never the running one's */
    m->next_cfg = next;
    m->pending = 1;
    m->probe_failures = 0;
    m->retry_ms = 0;
    m->retry_at = now;
    m->probe_error[0] = '\0';
    ENR_SB_SET(m->sb->pool.reload_pending, 1);
    ENR_SB_SET(m->sb->pool.state, ENR_POOL_RELOADING);
    return start_probe(m);
}

int enr_reload_probe_exited(enr_master *m, unsigned slot, const char *why, const char *detail,
                            uint64_t now)
{
    if (m->w[slot].probe != ENR_PROBE_TRYING || !m->pending || slot != m->probe_slot)
        return 0;
    probe_failed(m, why, detail, now);
    return 1;
}

void enr_reload_drop(enr_master *m)
{
    drop_next_cache(m);
    enr_config_secrets_free(&m->next_cfg, &m->cfg);
    m->pending = 0;
    ENR_SB_SET(m->sb->pool.reload_pending, 0);
}

uint64_t enr_reload_next(const enr_master *m, uint64_t now)
{
    uint64_t t;

    if (!m->pending)
        return UINT64_MAX;
    t = m->w[m->probe_slot].pid == 0 ? m->retry_at : m->probe_deadline;
    return t > now ? t : UINT64_MAX;
}

/* One part of the identity: its name, its length, its bytes. */
static void identity_part(void *arg, const char *name, const void *bytes, size_t len)
{
    SHA256_CTX *x = arg;
    uint64_t n = len;

    SHA256_Update(x, name, strlen(name) + 1);
    SHA256_Update(x, &n, sizeof n);
    if (n)
        SHA256_Update(x, bytes, n);
}

/* What a cache file is made for (cache.h): every part of the cache's
 * identity (enr_config_identity: the keys whose rows say IDENTITY, then
 * the secrets), so that a file is never read by a configuration that
 * would have asked differently.  The secrets enter only through the
 * digest, which only the service's user can read (as it can the secrets
 * themselves). */
static void cache_identity(const enr_config *c, uint8_t out[ENR_CACHE_ID_BYTES])
{
    SHA256_CTX x;

    SHA256_Init(&x);
    SHA256_Update(&x, "enrichd cache identity 2", 25);
    enr_config_identity(c, identity_part, &x);
    SHA256_Final(out, &x);
    explicit_bzero(&x, sizeof x);
}

/* One secret into the cache's record key; *any once one has bytes. */
static void key_part(void *arg, const char *name, const void *bytes, size_t len)
{
    struct {
        SHA256_CTX x;
        int any;
    } *k = arg;

    identity_part(&k->x, name, bytes, len);
    k->any |= len > 0;
}

/* The key a cache file's records are authenticated with (cache.h): a
 * digest of the secrets alone, which live outside the state directory,
 * under its own label (the identity, which the file holds, is another
 * digest).  0 when no secret is configured: the records then carry
 * their checksum only (docs/limits.md). */
static int cache_record_key(const enr_config *c, uint8_t out[ENR_CACHE_KEY_BYTES])
{
    struct {
        SHA256_CTX x;
        int any;
    } k = {.any = 0};

    SHA256_Init(&k.x);
    SHA256_Update(&k.x, "enrichd cache record key 1", 27);
    enr_config_secret_parts(c, key_part, &k);
    SHA256_Final(out, &k.x);
    explicit_bzero(&k.x, sizeof k.x);
    return k.any;
}

int enr_reload_cache_new(const enr_config *c, enr_cache **out)
{
    *out = NULL;
    if (!enr_config_enriches(c) || c->cache_entries == 0 || c->cache_bytes == 0)
        return 0;
    if (c->cache_file[0] != '\0') {
        uint8_t id[ENR_CACHE_ID_BYTES];
        const char *step = NULL;
        char q[2 * ENR_PATH_MAX], qs[120];
        cache_identity(c, id);
        *out = enr_cache_open(c->cache_file, c->cache_entries, c->cache_bytes, id, &step);
        if (*out != NULL) {
            uint8_t key[ENR_CACHE_KEY_BYTES];
            int rc = 0;
            if (cache_record_key(c, key) && enr_cache_authenticate(*out, key) != 0) {
                enr_log(ENR_LOG_ERROR, "upstream cache file: its key cannot be set", "error=%s",
                        enr_log_errno(errno));
                enr_cache_free(*out);
                *out = NULL;
                rc = -1;
            }
            explicit_bzero(key, sizeof key);
            return rc;
        }
        /* Not ours to use (statefile.h), or another daemon's: refused,
         * the file named in the log, rather than run without it. */
        if (errno == EBUSY || errno == EPERM)
            return -1;
        enr_log(ENR_LOG_ERROR, "upstream cache file unusable, the cache is in memory only",
                "path=%s step=%s error=%s", enr_log_quote(q, sizeof q, c->cache_file),
                enr_log_quote(qs, sizeof qs, step ? step : "-"), enr_log_errno(errno));
    }
    *out = enr_cache_new(c->cache_entries, c->cache_bytes);
    if (*out == NULL) {
        enr_log(ENR_LOG_ERROR, "upstream cache mmap failed", "error=%s cache_bytes=%zu",
                enr_log_errno(errno), c->cache_bytes);
        return -1;
    }
    return 0;
}

void enr_reload_failed_text(const enr_master *m, char *buf, size_t n)
{
    snprintf(buf, n,
             "RELOAD FAILED: new workers do not start (%s), old configuration serving, attempt "
             "%u, retry in %" PRIu64 " ms",
             m->probe_error, m->probe_failures + 1, m->retry_ms);
}

int enr_reload_failing(const enr_master *m)
{
    return m->pending && m->probe_failures;
}

static int old_generation_left(const enr_master *m)
{
    for (unsigned i = 0; i < ENR_SB_MAX_WORKERS; i++)
        if (m->w[i].pid > 0 && m->w[i].generation != m->generation)
            return 1;
    return 0;
}

/* Workers of the current generation that serve, in the pool's own slots
 * (a reload's probe, kept until the pool is whole, is not one of them). */
static int generation_ready(const enr_master *m)
{
    int n = 0;
    for (unsigned i = 0; i < m->cfg.workers && i < ENR_SB_MAX_WORKERS; i++)
        if (m->w[i].pid > 0 && m->w[i].ready && m->w[i].generation == m->generation)
            n++;
    return n;
}

/* Done when the new generation is whole, or, past the start-up wait,
 * with what started: the line says how many serve, not the first. */
void enr_reload_done_check(enr_master *m, int ready, uint64_t now)
{
    if (m->reloading && !old_generation_left(m) && ready >= 1 &&
        (generation_ready(m) >= (int)m->cfg.workers ||
         now >= m->reload_start_ms + ENR_READY_WAIT_MS)) {
        m->reloading = 0;
        enr_health_restart(&m->health);
        ENR_SB_SET(m->sb->pool.state, ENR_POOL_RUNNING);
        enr_notify_ready();
        enr_log(ENR_LOG_INFO, "reload done", "generation=%u workers=%d configured=%u",
                m->generation, generation_ready(m), m->cfg.workers);
    }
}
