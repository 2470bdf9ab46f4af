/*
 * test_api_verdicts.c: every classifier (api.h) over one grid of answers,
 * compared case by case with what it concluded when this grid was made
 * (api_verdicts.inc): the status, the headers (Retry-After, a rate
 * limit's reset and remaining) and the error body (each API's own shape,
 * each of YouTube's reason words and messages), to the verdict, the
 * pause's end, the calls left and the API's word.  A change to any
 * classifier that moves one outcome fails here, naming the case.
 *
 *   build/tests/test_api_verdicts --print   writes the grid's outcomes in
 *       the .inc's form (to remake it after a change meant to move them)
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

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

int main(int argc, char **argv)
{
    printing = argc > 1 && strcmp(argv[1], "--print") == 0;
    test_grid();
    if (printing)
        return 0;
    T_DONE();
}
