/*
 * test_api_verdicts.c: every classifier (api.h) over one grid of answers,
 * compared case by case with what it concluded when this grid was made
 * (api_verdicts.inc): the status, the headers (Retry-After, a rate
 * limit's reset and remaining) and the error body (each API's own shape,
 * each of YouTube's reason words and messages), to the verdict, the
 * pause's end, the calls left and the API's word.  A change to any
 * classifier that moves one outcome fails here, naming the case.  Then
 * the columns of base/upfail.h the classifiers and the client's pauses
 * read (how a pause ends, its length, its log line's level and words),
 * and the words tables of the rows.
 *
 *   build/tests/test_api_verdicts --print   writes the grid's outcomes in
 *       the .inc's form (to remake it after a change meant to move them)
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "t.h"
#include "upstream/api.h"

#define NOW 1700000000 /* 2023-11-14 22:13:20 UTC, 14:13:20 PST */

/* ---- the grid ---- */

static const int statuses[] = {200, 204, 302, 400, 401, 403, 429, 500, 503};

static const struct {
    const char *name;
    enr_api_headers h;
} headers[] = {
    {"none", {0}},
    {"ra0+left3",
     {.retry_after = "0",
      .retry_after_len = 1,
      .ratelimit_remaining = " 3\r\n",
      .ratelimit_remaining_len = 4}},
    {"reset60+ra30",
     {.ratelimit_reset = "1700000060",
      .ratelimit_reset_len = 10,
      .retry_after = "30",
      .retry_after_len = 2}},
    {"resetpast+ra7",
     {.ratelimit_reset = "1600000000",
      .ratelimit_reset_len = 10,
      .retry_after = "7",
      .retry_after_len = 1}},
    {"resetjunk+ra30+left97",
     {.ratelimit_reset = "soon",
      .ratelimit_reset_len = 4,
      .retry_after = "30",
      .retry_after_len = 2,
      .ratelimit_remaining = "97",
      .ratelimit_remaining_len = 2}},
};

#define YT_ERR(reason, message)                                                                    \
    "{\"error\":{\"code\":400,\"message\":\"" message "\",\"errors\":[{\"message\":\"" message     \
    "\",\"domain\":\"d\",\"reason\":\"" reason "\"}]}}"
#define YT_DETAIL(reason, detail)                                                                  \
    "{\"error\":{\"code\":400,\"message\":\"m\",\"errors\":[{\"reason\":\"" reason                 \
    "\"}],\"details\":[{\"@type\":\"t\",\"reason\":\"" detail "\"}]}}"

/* The bodies every API is given, with every status and header set. */
static const char *const common[] = {
    NULL,
    YT_ERR("somethingElse", "Bad"),
    "{\"error\":\"Too many API requests.\",\"developer_message\":\"rate\",\"error_code\":9000}",
    "{\"error\":{\"code\":403,\"message\":\"m\",\"type\":\"access_forbidden\"}}",
};

/* Bodies that speak YouTube's words, for YouTube, with fewer statuses and
 * one header set (the others' classifiers read none of these words: the
 * common YouTube-shaped body shows it). */
static const char *const worded[] = {
    YT_ERR("quotaExceeded", "q"),
    YT_ERR("dailyLimitExceeded", "q"),
    YT_ERR("rateLimitExceeded", "r"),
    YT_ERR("userRateLimitExceeded", "r"),
    YT_ERR("RATE_LIMIT_EXCEEDED", "r"),
    YT_ERR("keyInvalid", "k"),
    YT_ERR("keyExpired", "k"),
    YT_ERR("accessNotConfigured", "k"),
    YT_ERR("forbidden", "k"),
    YT_ERR("ipRefererBlocked", "k"),
    YT_ERR("dailyLimitExceededUnreg", "k"),
    YT_ERR("API_KEY_INVALID", "k"),
    YT_ERR("API_KEY_EXPIRED", "k"),
    YT_ERR("API_KEY_SERVICE_BLOCKED", "k"),
    YT_ERR("API_KEY_HTTP_REFERRER_BLOCKED", "k"),
    YT_ERR("API_KEY_IP_ADDRESS_BLOCKED", "k"),
    YT_ERR("SERVICE_DISABLED", "k"),
    YT_ERR("badRequest", "API key not valid. Please pass a valid API key."),
    YT_ERR("badRequest", "API key expired. Please renew the API key."),
    YT_ERR("quotaExceeded", "API key not valid. Please pass a valid API key."),
    YT_DETAIL("badRequest", "API_KEY_INVALID"),
    YT_DETAIL("rateLimitExceeded", "API_KEY_INVALID"),
    YT_DETAIL("somethingElse", "quotaExceeded"),
    YT_DETAIL("somethingElse", "somethingMore"),
    "{\"error\":{\"details\":[{\"reason\":\"detailOnly\"}]}}",
    "{\"error\":{\"errors\":[{\"reason\":\"quo",
};
static const int worded_statuses[] = {400, 403, 429, 503};
#define WORDED_HEADERS 4 /* Retry-After: 30 */

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* The APIs of every build (a test build's fourth is its own suite's). */
static const char *const apis[] = {"upstream", "youtube", "vimeo", "dailymotion"};

/* ---- one case ---- */

typedef struct verdict_case {
    const char *api;
    int status;
    const char *headers;
    const char *body; /* "common N" or "worded N" */
    const char *verdict;
    long long until;
    long remaining;
    const char *reason;
} verdict_case;

static const verdict_case want[] = {
#include "api_verdicts.inc"
};

static const char *verdict_word(int v)
{
    if (v == ENR_API_V_OK)
        return "ok";
    if (v == ENR_API_V_CONFIG)
        return "config";
    return enr_up_fail_name(v);
}

static size_t at; /* the next case of want[] */
static int printing;

static void one(const char *api, int status, size_t hi, const char *set, size_t bi,
                const char *body)
{
    const enr_api *a = enr_api_get(enr_api_by_name(api));
    enr_api_outcome o;
    const verdict_case *w = at < N(want) ? &want[at] : NULL;
    char where[32];

    memset(&o, 0x55, sizeof o);
    a->classify(status, body, body ? strlen(body) : 0, hi ? &headers[hi].h : NULL, NOW, &o);
    snprintf(where, sizeof where, "%s %zu", set, bi);
    at++;
    if (printing) {
        printf("{\"%s\", %d, \"%s\", \"%s\", \"%s\", %lld, %ld, \"", api, status, headers[hi].name,
               where, verdict_word(o.verdict), (long long)o.until, o.remaining);
        for (const char *p = o.reason; *p; p++)
            printf(*p == '"' || *p == '\\' ? "\\%c" : "%c", *p);
        printf("\"},\n");
        return;
    }
    T_CHECK(w != NULL && strcmp(w->api, api) == 0 && w->status == status &&
                strcmp(w->headers, headers[hi].name) == 0 && strcmp(w->body, where) == 0,
            "case %zu is %s %d %s %s in the grid", at - 1, api, status, headers[hi].name, where);
    if (w == NULL)
        return;
    T_CHECK(strcmp(verdict_word(o.verdict), w->verdict) == 0 && o.until == w->until &&
                o.remaining == w->remaining && strcmp(o.reason, w->reason) == 0,
            "%s %d %s %s: %s until %lld left %ld \"%s\", not %s until %lld left %ld \"%s\"", api,
            status, headers[hi].name, where, verdict_word(o.verdict), (long long)o.until,
            o.remaining, o.reason, w->verdict, w->until, w->remaining, w->reason);
}

static void test_grid(void)
{
    for (size_t a = 0; a < N(apis); a++) {
        for (size_t b = 0; b < N(common); b++)
            for (size_t s = 0; s < N(statuses); s++)
                for (size_t h = 0; h < N(headers); h++)
                    one(apis[a], statuses[s], h, "common", b, common[b]);
        for (size_t b = 0; strcmp(apis[a], "youtube") == 0 && b < N(worded); b++)
            for (size_t s = 0; s < N(worded_statuses); s++)
                one(apis[a], worded_statuses[s], WORDED_HEADERS, "worded", b, worded[b]);
    }
    if (!printing)
        T_CHECK(at == N(want), "the grid has %zu cases, the .inc %zu", at, N(want));
}

/* ---- the pauses' columns ---- */

/* A pause's row says how it ends; a kind that is none says nothing. */
static void test_pause_rows(void)
{
    for (int k = 0; k < ENR_UP_NFAILS; k++) {
        const enr_up_fail_row *r = &enr_up_fail_rows[k];
        const char *pct = r->said ? strchr(r->said, '%') : NULL;
        if (r->pause == 0) {
            T_CHECK(r->ends == ENR_UP_END_NONE && r->pause_s == 0 && r->said == NULL &&
                        r->level == ENR_LOG_DEBUG,
                    "%s: no pause, no pause's columns", r->word);
            continue;
        }
        T_CHECK(r->ends != ENR_UP_END_NONE && enr_up_fail_of_end(r->ends) == k,
                "%s: a pause that ends its own way", r->word);
        T_CHECK((r->ends == ENR_UP_END_DAY) == (r->pause_s == 0), "%s: a length when not a day's",
                r->word);
        T_CHECK(r->level == ENR_LOG_WARN || r->level == ENR_LOG_ERROR,
                "%s: said as a warning or error", r->word);
        T_CHECK(pct == NULL || (pct[1] == 's' && strchr(pct + 1, '%') == NULL),
                "%s: said holds one %%s at most, no other %%", r->word);
    }
    T_CHECK(enr_up_fail_of_end(ENR_UP_END_RATE) == ENR_UP_F_THROTTLED &&
                enr_up_fail_of_end(ENR_UP_END_DAY) == ENR_UP_F_QUOTA &&
                enr_up_fail_of_end(ENR_UP_END_RELOAD) == ENR_UP_F_AUTH &&
                enr_up_fail_of_end(ENR_UP_END_NONE) == -1,
            "each way to end is one kind's");
    /* The levels the pauses' lines have always had. */
    T_CHECK(enr_up_fail_rows[ENR_UP_F_THROTTLED].level == ENR_LOG_WARN &&
                enr_up_fail_rows[ENR_UP_F_QUOTA].level == ENR_LOG_ERROR &&
                enr_up_fail_rows[ENR_UP_F_AUTH].level == ENR_LOG_ERROR,
            "a slow-down a warning, a spent quota and a refused key errors");
}

/* The client's pause (upsource.c) as each kind's row derives it: what the
 * client did before the rows said it, case by case. */
static void test_pause_until(void)
{
    const int yt = ENR_API_YOUTUBE, vm = ENR_API_VIMEO, dm = ENR_API_DAILYMOTION;
    const int64_t w = NOW;

    T_CHECK(enr_api_pause_until(yt, ENR_UP_F_QUOTA, w + 500, 0, w) == w + 500,
            "quota: the end the classifier read");
    T_CHECK(enr_api_pause_until(yt, ENR_UP_F_QUOTA, 0, 30, w) == 1700035200 &&
                enr_api_pause_until(yt, ENR_UP_F_QUOTA, w, 0, w) == 1700035200,
            "quota, none read or passed: midnight Pacific (YouTube's day)");
    T_CHECK(enr_api_pause_until(vm, ENR_UP_F_QUOTA, 0, 0, w) == 1700006400,
            "quota, none read: the next midnight UTC (Vimeo's day)");
    T_CHECK(enr_api_pause_until(yt, ENR_UP_F_AUTH, w + 500, 30, w) == w + 86400 &&
                enr_api_pause_until(vm, ENR_UP_F_AUTH, 0, 0, w) == w + 86400,
            "auth: a day, whatever was read");
    T_CHECK(enr_api_pause_until(vm, ENR_UP_F_THROTTLED, w + 60, 7, w) == w + 60,
            "throttled: the end the classifier read");
    T_CHECK(enr_api_pause_until(vm, ENR_UP_F_THROTTLED, w, 7, w) == w + 7 &&
                enr_api_pause_until(dm, ENR_UP_F_THROTTLED, 0, 7, w) == w + 7,
            "throttled, none read or passed: Retry-After's seconds");
    T_CHECK(enr_api_pause_until(dm, ENR_UP_F_THROTTLED, 0, 0, w) == w + ENR_THROTTLE_DEFAULT_S,
            "throttled, no Retry-After (or 0): the default");
    T_CHECK(enr_api_pause_until(yt, ENR_UP_F_STATUS, 5, 7, w) == 5 &&
                enr_api_pause_until(yt, -1, 5, 7, w) == 5,
            "no pause's kind: as read");
    T_CHECK(enr_api_day_end(vm, 1700006399) == 1700006400 &&
                enr_api_day_end(vm, 1700006400) == 1700092800,
            "a UTC day ends at midnight, the next one after it");
}

/* The words of the line saying a pause began, as operators (and the
 * integration suites) read them. */
static void test_pause_said(void)
{
    char m[160];

    enr_api_pause_said(ENR_API_YOUTUBE, ENR_UP_F_AUTH, "keyInvalid", m, sizeof m);
    T_STREQ(m, "YouTube rejected the API key: keyInvalid");
    enr_api_pause_said(ENR_API_VIMEO, ENR_UP_F_AUTH, "8003", m, sizeof m);
    T_STREQ(m, "Vimeo rejected the access token: 8003");
    enr_api_pause_said(ENR_API_YOUTUBE, ENR_UP_F_QUOTA, "quotaExceeded", m, sizeof m);
    T_STREQ(m, "YouTube quota spent: quotaExceeded");
    enr_api_pause_said(ENR_API_VIMEO, ENR_UP_F_THROTTLED, "9000", m, sizeof m);
    T_STREQ(m, "Vimeo throttled: 9000");
    enr_api_pause_said(ENR_API_DAILYMOTION, ENR_UP_F_THROTTLED, "", m, sizeof m);
    T_STREQ(m, "Dailymotion throttled: -");
    enr_api_pause_said(ENR_API_YOUTUBE, ENR_UP_F_AUTH, "keyInvalid", m, 12);
    T_STREQ(m, "YouTube rej");
}

/* Every word an API's rows name stands for a kind of the table, and a
 * message's stand-in is one of its words. */
static void test_words(void)
{
    for (int i = 0; i < ENR_API_COUNT; i++) {
        const enr_api *a = enr_api_get(i);
        for (const enr_api_word *w = a->words; w != NULL && w->word != NULL; w++)
            T_CHECK(w->kind >= 0 && w->kind < ENR_UP_NFAILS && enr_up_fail_rows[w->kind].pause,
                    "%s: %s stands for a pause's kind", a->name, w->word);
        for (const enr_api_message *m = a->messages; m != NULL && m->prefix != NULL; m++) {
            int known = 0;
            for (const enr_api_word *w = a->words; w != NULL && w->word != NULL; w++)
                known |= strcmp(w->word, m->word) == 0;
            T_CHECK(known, "%s: the message \"%s\" stands in for a word of its own (%s)", a->name,
                    m->prefix, m->word);
        }
        T_CHECK(a->messages == NULL || a->message_at[0] != NULL, "%s: messages, and where",
                a->name);
    }
}

int main(int argc, char **argv)
{
    printing = argc > 1 && strcmp(argv[1], "--print") == 0;
    test_grid();
    if (printing)
        return 0;
    test_pause_rows();
    test_pause_until();
    test_pause_said();
    test_words();
    T_DONE();
}
