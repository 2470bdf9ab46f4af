/*
 * api.h: what enrichd knows of each provider's own API (one descriptor
 * per row of base/sources.h, in its api_NAME.c) and of the aggregator
 * protocol (api_upstream.c, source 0), as pure functions: the URL of one
 * call, the headers it carries, the reader of a 200 answer and the
 * classifier of any other; and, as columns, where the aggregator differs.  No I/O, no libcurl, no
 * configuration, so unit tests and fuzzers drive every one directly; the client (upstream.c) picks
 * the table row of a record's source and does the transfers.
 *
 * Invariants: a reader resolves only ids that were asked for, compared
 * after the same decoding on both sides (the request's id bytes against
 * the answer's JSON string decoded; an id whose bytes the answer cannot
 * carry unchanged is never matched); the first item naming an id
 * decides it; order and duplicates in the answer mean nothing.  A reader
 * has the contract of enr_upstream_reply_parse() (upstream_reply.h):
 * bounded, one pass, no DOM, 0 with every id resolved or -1 with every
 * id ENR_REPLY_ABSENT and the arena untouched.  Posters pass the same
 * checks as the aggregator protocol's (https, ENR_REPLY_POSTER_MAX, no
 * controls); a runtime of 0 (live, upcoming) is no runtime.
 */
#ifndef ENR_API_H
#define ENR_API_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/sources.h"
#include "base/upfail.h"
#include "upstream/upstream_reply.h"

/* The sources a provider's records can be enriched from, numbered as
 * base/sources.h numbers them: ENR_API_UPSTREAM is the aggregator
 * protocol of docs/upstream.md, the others the providers' own APIs, one
 * a row of ENR_SOURCE_LIST (each row's descriptor is enr_api_NAME). */
enum enr_api_id {
    ENR_API_UPSTREAM = ENR_SOURCE_UPSTREAM,
#define ENR_API_ENUM(NAME, ...) ENR_API_##NAME = ENR_SOURCE_##NAME,
    ENR_SOURCE_LIST(ENR_API_ENUM)
#undef ENR_API_ENUM
        ENR_API_COUNT = ENR_SOURCE_COUNT
};

/* What a non-200 answer (or a 200 carrying an API error) means: how the
 * call ended, a failure kind of base/upfail.h with a pause rank (the
 * provider asked to slow down: retry after *until, 0 unknown; its day's
 * quota is spent: until *until; the key or token rejected: the
 * operator's fault, until a reload) or ENR_UP_F_STATUS (the provider
 * failed: the breaker's business); or one of these two. */
enum enr_api_verdict {
    ENR_API_V_OK = ENR_UP_NFAILS, /* not an error */
    ENR_API_V_CONFIG              /* request refused as malformed: the operator's or ours */
};

/* One answer's headers that the classifiers read, already split by the
 * caller (NULL/0 when absent); values are as received, not trimmed. */
typedef struct enr_api_headers {
    const char *retry_after;
    size_t retry_after_len;
    const char *ratelimit_remaining; /* the row's remaining_header */
    size_t ratelimit_remaining_len;
    const char *ratelimit_reset; /* the row's reset_header: epoch seconds or an HTTP date */
    size_t ratelimit_reset_len;
} enr_api_headers;

/* The parameters of an API's URL besides its ids, at most: the bound a
 * descriptor's url_params of 0 stands for. */
#define ENR_API_URL_PARAMS 256

/* When an API's day (its daily quota, the budget's day) starts again. */
enum enr_api_day {
    ENR_API_DAY_UTC = 0, /* midnight UTC */
    ENR_API_DAY_PACIFIC  /* midnight in America/Los_Angeles (enr_pacific_next_midnight) */
};

/* What a classifier concluded. */
typedef struct enr_api_outcome {
    int verdict;     /* enum enr_api_verdict, or a failure kind (above) */
    int64_t until;   /* wall clock, Unix seconds: the pause's end; 0 = none given */
    long remaining;  /* the rate limit's calls left on any answer, -1 = absent */
    char reason[64]; /* the API's own word ("quotaExceeded", "keyInvalid", "2101"),
                      * printable ASCII only, for the log and /healthz; "" = none */
} enr_api_outcome;

/* Where an error document holds the API's own word for what went wrong:
 * a path of keys from the root ("[]" any element of an array), NULL
 * after the last key (api_int.h's enr_api_field). */
#define ENR_API_PATH_MAX 5
#define ENR_API_REASONS_MAX 2 /* the places an API's word may be, most trusted first */

/* One of an API's own words for what went wrong, and the failure kind
 * (base/upfail.h) it stands for. */
typedef struct enr_api_word {
    const char *word;
    int kind;
} enr_api_word;

/* A message that says what one of the API's words says (an older form):
 * the word stands in for it, in the log too. */
typedef struct enr_api_message {
    const char *prefix, *word;
} enr_api_message;

typedef struct enr_api {
    const char *name;        /* the config value: "youtube" */
    const char *title;       /* for operators: "YouTube" */
    size_t max_ids;          /* per call, the API's documented limit; 0: ids_per_call's */
    int needs_secret;        /* 1: a call without the key/token is never made */
    int day_clock;           /* enum enr_api_day: its daily quota's day */
    unsigned units_per_call; /* what one call costs of the day's quota, whatever its ids */
    /* The rate limit's header lines the classifier reads (lower case,
     * with the colon: "x-ratelimit-remaining:"), NULL: the API sends none. */
    const char *remaining_header, *reset_header;
    /* What a call's URL takes besides its base and its ids, at most, each
     * id counted with a comma before it (how upstream.c plans a call
     * within a request line); 0: ENR_API_URL_PARAMS. */
    size_t url_params;
    /* Where the aggregator protocol (api_upstream.c) differs from the
     * providers' APIs: each 0 for an API (what it need not say), 1 for
     * the aggregator.
     *   wire_configured  its URL's query start, header lines and the
     *            secret's place are configured too (upstream_header,
     *            upstream_secret_header, upstream_secret_query); 0: the
     *            descriptor's alone
     *   rate_paced  no day's quota (no budget, budget.h): the configured
     *            upstream_max_calls_per_s paces its calls instead
     *   pause_by_status  a pause is said with the HTTP status and the
     *            Retry-After alone (quota.c); 0: in the API's own words
     *            (upsource.c)
     *   head_warmed  HTTP/1.1, its connections warmed by a HEAD of its
     *            URL, upstream_warm_connections of them; 0: HTTP/2 where
     *            offered, warmed by handshakes alone (a request may cost
     *            quota), as many as enr_upconn_warm_target() says
     *   unlabelled  /metrics shows its series with no source label and
     *            /status its counters at the top of "upstream" too: the
     *            names dashboards knew before there were sources */
    int wire_configured, rate_paced, pause_by_status, head_warmed, unlabelled;
    /* Append to url the whole URL of one call: base (the configured
     * NAME_url, no query: the API's root, as its row's default in
     * base/sources.h; the method's path, /videos, goes after one '/'),
     * the API's parameters and
     * ids[0..n) percent-encoded; secret (NULL when none) where the API
     * takes it in the URL.  Returns 0, or -1 with url as it was when n is
     * 0 or past max_ids or an id cannot be asked for at all (too long, or
     * bytes the API's answer could not echo unchanged): the caller skips
     * it (asking for it alone tells which).  provider: the engine's
     * name of the records' provider ("yt"), which the aggregator's URL
     * names; an API serves one provider and ignores it. */
    int (*build_url)(enr_buf *url, const char *base, const char *provider, const enr_reply_id *ids,
                     size_t n, const char *secret, size_t secret_len);
    /* Append the extra request header lines, "Name: value" each
     * NUL-terminated, secret (NULL when none) where the API takes it (a
     * secret that could break the line is left out). */
    void (*headers)(enr_buf *out, const char *secret, size_t secret_len);
    /* Read a 200 answer: see the contract at the top. */
    int (*parse)(const char *body, size_t len, enr_reply_id *ids, size_t n, uint64_t seed,
                 enr_buf *arena);
    /* Classify an answer of HTTP status (any status, 200 included: rate
     * headers, errors in a 200 body); now is the wall clock.  An API's is
     * the shared one (enr_api_classify, api_int.h) reading the columns
     * below; the aggregator's is its protocol's rule. */
    void (*classify)(int status, const char *body, size_t len, const enr_api_headers *h,
                     int64_t now, enr_api_outcome *out);
    /* What the item of one id of id_len bytes may take of an answer;
     * NULL: its even share (enr_api_item_cap). */
    size_t (*item_cap)(size_t id_len);
    /* Its error documents: where its word is (reason_at, most trusted
     * first: the first whose word is in words decides the kind; else,
     * when message_at's text starts with a prefix of messages, that one's
     * word does; else the first found is only the log's reason), the
     * words that say more than the status and the messages that stand
     * for one of them (each {NULL} last; NULL: none). */
    const char *reason_at[ENR_API_REASONS_MAX][ENR_API_PATH_MAX];
    const char *message_at[ENR_API_PATH_MAX];
    const enr_api_word *words;
    const enr_api_message *messages;
    /* Besides 429, the status by which it asks to slow down (0: none). */
    int slow_down_status;
} enr_api;

/* What the item of one id of id_len bytes can take in an answer of
 * source src, the share of its call's reply cap: its row's item_cap; the
 * aggregator's is enr_upstream_reply_item_cap() (its protocol's items are
 * small).  Without one, an API's: the untrimmed object, since an API may not honour fields= (a
 * proxy that drops the query's tail, a version that ignores it): whole
 * video objects recorded from the APIs are 4.8-25 KB, a description and
 * its localized copy can take tens of KB escaped.  So each id gets its
 * even share of ENR_REPLY_BODY_MAX over the API's max_ids (about 82 KB
 * at 50 ids a call, 41 KB at 100: docs/limits.md): a full chunk of such
 * objects fits the per-call bound, a call for fewer ids is held to less. */
size_t enr_api_item_cap(int src, size_t id_len);

/* The aggregator protocol's one pause rule (docs/upstream.md), its
 * classifier's (api_upstream.c): 429, or 503 with a Retry-After, asks to
 * slow down; the kind that pause stands for, or -1. */
int enr_api_upstream_pause(int status, int has_retry_after);

/* The end, Unix seconds, of the pause source src takes for why (a kind
 * with a pause rank, base/upfail.h), as the kind's row says (its ends and
 * pause_s): until is the end the classifier read (0: none), retry_after_s
 * the answer's Retry-After in seconds (0: none or 0), wall the clock. */
int64_t enr_api_pause_until(int src, int why, int64_t until, unsigned retry_after_s, int64_t wall);
/* Into out[0..n): the words of the log line saying source src's pause for
 * why began, "<title> <the row's said>: <reason>" (reason "-" when ""). */
void enr_api_pause_said(int src, int why, const char *reason, char *out, size_t n);
/* The start of source src's next day after now (its day_clock). */
int64_t enr_api_day_end(int src, int64_t now);

/* The row of a source (the aggregator's too: api_upstream.c); NULL for
 * an id out of range. */
const enr_api *enr_api_get(int id);
/* What source id's secret is called, for operators: its row's noun in
 * base/sources.h ("API key"); "secret" for the aggregator's, "" out of
 * range. */
const char *enr_api_secret_noun(int id);
/* The source of a config value ("youtube"), or -1. */
int enr_api_by_name(const char *name);

/* ISO 8601 durations as YouTube writes them (PT4M13S, PT1H2M3S,
 * P1DT2H3M4S, P0D, PT0S; weeks, fractions of the last unit).  Returns 0
 * with *seconds set, or -1 for anything else (empty, unknown designator,
 * units out of order, a value too large for ENR_REPLY_DURATION_LIMIT). */
int enr_iso8601_duration(const char *s, size_t n, double *seconds);

/* The next midnight in America/Los_Angeles after now (Unix seconds),
 * summer time included (US rules since 2007): when YouTube's daily quota
 * starts again. */
int64_t enr_pacific_next_midnight(int64_t now);

#endif
