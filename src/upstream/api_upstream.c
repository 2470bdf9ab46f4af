/*
 * api_upstream.c: the aggregator protocol of docs/upstream.md (source 0,
 * ENR_API_UPSTREAM) as a descriptor like every API's (api.h):
 *
 *   GET {upstream_url}?provider=yt&ids=A,B
 *   Accept: application/json
 *   {upstream_header lines, the secret's header when configured}
 *
 * Its reader is enr_upstream_reply_parse(); its classifier is the one
 * pause rule of the protocol (enr_api_upstream_pause: 429, or 503 with a
 * Retry-After, asks to slow down); every other answer but a 2xx is the
 * aggregator's failure, the breaker's business, whatever its status (a
 * 4xx included: the protocol has no key to refuse, no quota to spend).
 *
 * What only the configuration knows stays the client's: where the secret
 * goes (upstream_secret_header or upstream_secret_query) and the extra
 * header lines (upstream_header) are configured, so the base the client
 * passes to build_url is upstream_url already followed by '?' or '&' and
 * by the secret's parameter (upstream_setup.c); the ids per call are
 * ids_per_call's (max_ids 0).  Its keys are the upstream_* ones, not a
 * row of base/sources.h: it is source 0, before the list.
 *
 * Invariants: build_url writes base, the provider's name and every id
 * percent-encoded (RFC 3986: no byte of an id can end its parameter), so
 * any id can be asked; its length is what upstream.c plans
 * (url_params).
 */
#include "upstream/api.h"
#include "upstream/api_int.h"

#include <string.h>

/* "provider=xx&ids=": the provider's name is two letters (contract.h). */
#define UPSTREAM_PARAMS "provider=xx&ids="

static int upstream_build_url(enr_buf *url, const char *base, const char *provider,
                              const enr_reply_id *ids, size_t n, const char *secret,
                              size_t secret_len)
{
    if (n == 0)
        return -1;
    enr_buf_append(url, base, strlen(base));
    enr_buf_lit(url, "provider=");
    enr_buf_append(url, provider, strlen(provider));
    enr_buf_lit(url, "&ids=");
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            enr_buf_putc(url, ',');
        enr_api_pct(url, ids[i].id, ids[i].id_len);
    }
    return 0;
}

/* The protocol's own line; the configured ones follow (upstream_setup.c). */
static void upstream_headers(enr_buf *out, const char *secret, size_t secret_len)
{
    static const char accept[] = "Accept: application/json";

    enr_buf_append(out, accept, sizeof accept); /* with its NUL */
}

static void upstream_classify(int status, const char *body, size_t len, const enr_api_headers *h,
                              int64_t now, enr_api_outcome *out)
{
    int pause;

    enr_api_outcome_init(out);
    if (status >= 200 && status < 300)
        return;
    out->until = enr_api_retry_after(h, now);
    pause = enr_api_upstream_pause(status, out->until != 0);
    out->verdict = pause >= 0 ? pause : ENR_UP_F_STATUS;
}

int enr_api_upstream_pause(int status, int has_retry_after)
{
    /* The kind whose pause ends as the answer's Retry-After says
     * (base/upfail.h), the one a slow-down stands for. */
    return status == 429 || (status == 503 && has_retry_after) ? enr_up_fail_of_end(ENR_UP_END_RATE)
                                                               : -1;
}

const enr_api enr_api_upstream = {
    .name = "upstream",
    .title = "upstream",
    .max_ids = 0, /* ids_per_call */
    .needs_secret = 0,
    .day_clock = ENR_API_DAY_UTC,
    .units_per_call = 1,
    /* The plan counts a comma before every id (upstream.c): the first has none. */
    .url_params = sizeof(UPSTREAM_PARAMS) - 1 - 1,
    .wire_configured = 1,
    .rate_paced = 1,
    .pause_by_status = 1,
    .head_warmed = 1,
    .unlabelled = 1,
    .build_url = upstream_build_url,
    .headers = upstream_headers,
    .parse = enr_upstream_reply_parse,
    .classify = upstream_classify,
    .item_cap = enr_upstream_reply_item_cap,
};
