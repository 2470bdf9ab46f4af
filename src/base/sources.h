/*
 * sources.h: the one list of the providers' own APIs that enrichd can
 * enrich records from.  Every surface that names an API is generated from
 * it: the sources' numbers (ENR_SOURCE_*, upstream/api.h's ENR_API_*),
 * their count (the scoreboard's rows, the counters' sources), their
 * configuration keys (confkeys.inc's KS rows: URL, lifetime, daily quota,
 * the secret's file and credential), the secrets' rows (config_cred.c),
 * the provider each serves (confsource.c) and the names of /metrics and
 * /status.  What the API is beyond that (its URL and reply, its day's
 * clock, its cost per call, its rate-limit headers, its ids per call) is
 * its descriptor's, upstream/api_NAME.c's enr_api_NAME.
 *
 * Adding an API is its descriptor file, one row here, and its
 * documentation (conf/enrichd.conf, docs/providers.md).
 *
 * X(ctx, NAME, name, PROV, SECRET, word, "noun", "url", "ttl", "quota", "title", "units"):
 *   NAME, name  ENR_SOURCE_NAME / ENR_API_NAME; its config value and the
 *               stem of its keys (name_url, name_cache_ttl_s, ...)
 *   PROV        the engine's provider it serves (ENR_SOURCE_PROV_PROV)
 *   SECRET      SECRET: calls carry a secret, read from name_word_file or
 *               name_word_credential; NOSECRET: none (word unused)
 *   noun        what operators call the secret ("API key")
 *   url, ttl, quota  the defaults of name_url, name_cache_ttl_s and
 *               name_daily_quota
 *   title       the API's name in enrichd.conf(5) (scripts/confkeys.py)
 *   units       what name_daily_quota counts, for the same page
 *
 * Invariants: the rows are in the order the keys appear in -T; the
 * aggregator protocol (ENR_SOURCE_UPSTREAM, the upstream_* keys) comes
 * before them and is not a row, since its keys are named otherwise (its
 * descriptor is upstream/api_upstream.c's enr_api_upstream, first in the
 * table of api.c); ENR_SOURCE_EXTRA adds a row only to a test build.
 */
#ifndef ENR_SOURCES_H
#define ENR_SOURCES_H

/* clang-format off */
#define ENR_SOURCE_ROWS(X, ctx) \
X(ctx, YOUTUBE, youtube, YT, SECRET, key, "API key", "https://www.googleapis.com/youtube/v3", "86400", "10000", "YouTube Data API", "its quota units") \
X(ctx, VIMEO, vimeo, VM, SECRET, token, "access token", "https://api.vimeo.com", "86400", "0", "Vimeo API", "calls") \
X(ctx, DAILYMOTION, dailymotion, DM, NOSECRET, none, "", "https://api.dailymotion.com", "86400", "0", "Dailymotion API", "calls") \
ENR_SOURCE_EXTRA(X, ctx)
/* clang-format on */

/* The rows to X(NAME, name, PROV, ...); ENR_SOURCE_ROWS(X, ctx) passes
 * ctx first, for a row made of a template and each source (conftable.c). */
#define ENR_SOURCE_NOCTX(X, ...) X(__VA_ARGS__)
#define ENR_SOURCE_LIST(X) ENR_SOURCE_ROWS(ENR_SOURCE_NOCTX, X)

/* A fourth API for the tests alone (-DENR_TEST_SOURCE, make extra): its
 * row, and its file upstream/api_extra.c, are all it takes
 * (tests/integration/test_source_extra.py configures it and enriches
 * through it). */
#ifdef ENR_TEST_SOURCE
/* clang-format off */
#define ENR_SOURCE_EXTRA(X, ctx) \
X(ctx, EXTRA, extra, YT, SECRET, key, "test key", "http://127.0.0.1:9/v1", "600", "0", "test API", "calls")
/* clang-format on */
#else
#define ENR_SOURCE_EXTRA(X, ctx)
#endif

/* enr_config.sources: indexed by provider, as enum enr_provider
 * (engine/contract.h) numbers them (0 unused); each a source, as enum
 * enr_api_id (upstream/api.h) numbers them, or ENR_SOURCE_OFF.  The
 * upstream's code checks at compile time that the numbers agree. */
#define ENR_SOURCE_PROVIDERS 4
#define ENR_SOURCE_PROV_YT 1
#define ENR_SOURCE_PROV_VM 2
#define ENR_SOURCE_PROV_DM 3
#define ENR_SOURCE_OFF (-1)

enum enr_source_id {
    ENR_SOURCE_UPSTREAM = 0,
#define ENR_SOURCE_ENUM(NAME, ...) ENR_SOURCE_##NAME,
    ENR_SOURCE_LIST(ENR_SOURCE_ENUM)
#undef ENR_SOURCE_ENUM
        ENR_SOURCE_COUNT
};

#endif
