/*
 * api_extra.c: a fourth API for the tests alone, built only with
 * -DENR_TEST_SOURCE (make extra: build-extra/); in any other build this
 * file defines nothing.  It shows what adding a provider's API takes:
 * this file and its row in base/sources.h (ENR_SOURCE_EXTRA), nothing
 * else.  Its keys (extra_url, extra_cache_ttl_s, extra_daily_quota,
 * extra_key_file, extra_key_credential), its source number, its counters
 * in /metrics and /status, its breaker, its budget and its cache
 * namespace all follow from the row.
 *
 * It serves YouTube's records and speaks the aggregator's wire format
 * (docs/upstream.md), so that tests/fake_upstream.py answers it:
 *
 *   GET {extra_url}/meta?provider=yt&ids=A,B
 *   X-Extra-Key: {the key}
 *
 * Its answers are read as the aggregator's are (enr_upstream_reply_parse);
 * any status but 2xx is the shared classifier's (enr_api_classify) on the
 * status alone: its rows say nothing of the body.
 */
#include "upstream/api.h"
#include "upstream/api_int.h"

#ifdef ENR_TEST_SOURCE

#include <string.h>

#define FORBID "," /* the ids parameter's separator */
#define KEY_HEADER "X-Extra-Key: "

static int extra_build_url(enr_buf *url, const char *base, const char *provider,
                           const enr_reply_id *ids, size_t n, const char *secret, size_t secret_len)
{
    (void)secret;
    (void)secret_len;
    return enr_api_url_ids(url, base, "meta?provider=yt&ids=", ids, n, enr_api_extra.max_ids, "",
                           FORBID);
}

/* The key in its header; one that could break the line is left out. */
static void extra_headers(enr_buf *out, const char *secret, size_t secret_len)
{
    if (secret == NULL || memchr(secret, '\r', secret_len) != NULL ||
        memchr(secret, '\n', secret_len) != NULL)
        return;
    enr_buf_append(out, KEY_HEADER, strlen(KEY_HEADER));
    enr_buf_append(out, secret, secret_len);
    enr_buf_putc(out, '\0');
}

static void extra_classify(int status, const char *body, size_t len, const enr_api_headers *h,
                           int64_t now, enr_api_outcome *out)
{
    enr_api_classify(&enr_api_extra, status, body, len, h, now, out);
}

const enr_api enr_api_extra = {
    .name = "extra",
    .title = "Extra",
    .max_ids = 20,
    .needs_secret = 1,
    .day_clock = ENR_API_DAY_UTC,
    .units_per_call = 1,
    .build_url = extra_build_url,
    .headers = extra_headers,
    .parse = enr_upstream_reply_parse,
    .classify = extra_classify,
};

#endif
