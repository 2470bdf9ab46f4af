/*
 * api_youtube.c: the YouTube Data API v3's videos.list, the one method
 * enrichd calls (1 quota unit a call, 50 ids at most):
 *
 *   GET {youtube_url}/videos?part=contentDetails,snippet&id=A,B
 *       &fields=items(id,contentDetails/duration,snippet/thumbnails)
 *       &prettyPrint=false&key=KEY
 *
 * fields is percent-encoded as Google's client libraries encode a query
 * value; the ids, a comma apart, each percent-encoded.  prettyPrint=false
 * (one of Google's standard parameters) asks for the answer without its
 * indentation: a third fewer bytes to carry, decrypt and scan.  An answer is
 * {"items":[{"id":..,"contentDetails":{"duration":"PT4M13S"},
 * "snippet":{"thumbnails":{"default":{"url":..},..,"maxres":{..}}}}]}:
 * unknown, private and deleted ids are simply not in it, and a partial
 * response may leave out an empty "items" (the answer then found
 * nothing).  The poster is the url of the largest thumbnail that passes
 * the poster checks, maxres > standard > high > medium > default; the
 * runtime is the ISO 8601 duration, none for P0D/PT0S (live, upcoming).
 *
 * Errors (developers.google.com/youtube/v3/docs/errors) are
 * {"error":{"code":403,"message":..,"errors":[{"reason":"quotaExceeded",
 * "domain":..}],"details":[{"reason":"API_KEY_INVALID",..}]}}: the reason
 * decides, else the message ("API key not valid"), else the status.
 * Within an object the last occurrence of a key counts.
 */
#include "upstream/api.h"
#include "upstream/api_int.h"
#include "upstream/reply_scan.h"

#include <string.h>

#define FORBID "," /* the id parameter's separator */
#define DURATION_TEXT_MAX 64

static int yt_matchable(const char *id, size_t len)
{
    return enr_api_id_ok(id, len, FORBID);
}

static int yt_build_url(enr_buf *url, const char *base, const enr_reply_id *ids, size_t n,
                        const char *secret, size_t secret_len)
{
    static const char fields[] = "items(id,contentDetails/duration,snippet/thumbnails)";
    size_t start = url->len;

    if (enr_api_url_ids(url, base, "videos?part=contentDetails,snippet&id=", ids, n,
                        enr_api_youtube.max_ids, "", FORBID) != 0)
        return -1;
    enr_buf_lit(url, "&fields=");
    enr_api_pct(url, fields, sizeof fields - 1);
    enr_buf_lit(url, "&prettyPrint=false");
    if (secret != NULL) {
        enr_buf_lit(url, "&key=");
        enr_api_pct(url, secret, secret_len);
    }
    if (url->oom) {
        url->len = start;
        return -1;
    }
    return 0;
}

static void yt_headers(enr_buf *out, const char *secret, size_t secret_len)
{
    /* the key travels in the URL (key=), as the API documents it */
}

/* ---- the reader ---- */

enum { T_DEFAULT, T_MEDIUM, T_HIGH, T_STANDARD, T_MAXRES, T_COUNT };

/* One item being read: where the last string of each field starts. */
typedef struct yt_item {
    enr_rscan *r;
    const unsigned char *id, *duration, *thumb[T_COUNT];
    int rank; /* the thumbnail being read */
} yt_item;

static int thumb_member(void *ctx, int key, int depth)
{
    yt_item *it = ctx;
    const unsigned char *ignored;

    return enr_jscan_string_at(&it->r->j, depth, key == 0 ? &it->thumb[it->rank] : &ignored);
}

static int thumbnails_member(void *ctx, int key, int depth)
{
    static const char *const names[] = {"url"};
    yt_item *it = ctx;

    if (key < 0)
        return enr_jscan_skip(&it->r->j, depth);
    it->rank = key;
    it->thumb[key] = NULL;
    return enr_jscan_object(&it->r->j, depth, names, 1, thumb_member, it);
}

/* snippet {thumbnails {RANK {url}}} */
static int snippet_member(void *ctx, int key, int depth)
{
    static const char *const names[] = {"default", "medium", "high", "standard", "maxres"};
    yt_item *it = ctx;

    if (key < 0)
        return enr_jscan_skip(&it->r->j, depth);
    memset(it->thumb, 0, sizeof it->thumb); /* a later thumbnails replaces an earlier one */
    return enr_jscan_object(&it->r->j, depth, names, T_COUNT, thumbnails_member, it);
}

/* contentDetails {duration} */
static int details_member(void *ctx, int key, int depth)
{
    yt_item *it = ctx;
    const unsigned char *ignored;

    return enr_jscan_string_at(&it->r->j, depth, key == 0 ? &it->duration : &ignored);
}

static int item_member(void *ctx, int key, int depth)
{
    static const char *const snippet[] = {"thumbnails"}, *const details[] = {"duration"};
    yt_item *it = ctx;
    const unsigned char *ignored;

    if (key == 1) {
        memset(it->thumb, 0, sizeof it->thumb);
        return enr_jscan_object(&it->r->j, depth, snippet, 1, snippet_member, it);
    }
    if (key == 2) {
        it->duration = NULL;
        return enr_jscan_object(&it->r->j, depth, details, 1, details_member, it);
    }
    return enr_jscan_string_at(&it->r->j, depth, key == 0 ? &it->id : &ignored);
}

static int yt_item_read(enr_rscan *r, int depth)
{
    static const char *const names[] = {"id", "snippet", "contentDetails"};
    yt_item it = {.r = r};
    char text[DURATION_TEXT_MAX];
    enr_reply_id *id;
    size_t len;
    int faithful;
    double d;

    if (enr_jscan_object(&r->j, depth, names, 3, item_member, &it) != 0)
        return -1;
    if ((id = enr_rscan_claim_at(r, it.id)) == NULL)
        return 0;
    for (int t = T_MAXRES; t >= T_DEFAULT; t--)
        if (enr_rscan_poster_at(r, id, it.thumb[t]))
            break;
    if (enr_rscan_string_at(r, it.duration, text, sizeof text, &len, &faithful) == 0 &&
        len <= sizeof text && enr_iso8601_duration(text, len, &d) == 0)
        enr_rscan_runtime(id, d);
    enr_rscan_settle(id);
    return 0;
}

static int yt_parse(const char *body, size_t len, enr_reply_id *ids, size_t n, uint64_t seed,
                    enr_buf *arena)
{
    static const enr_rscan_spec spec = {"items", 1, 0, yt_matchable, yt_item_read};

    return enr_rscan_parse(body, len, ids, n, seed, arena, &spec);
}

/* ---- the classifier ---- */

static const struct {
    const char *word;
    int verdict;
} reasons[] = {
    {"quotaExceeded", ENR_UP_F_QUOTA},
    {"dailyLimitExceeded", ENR_UP_F_QUOTA},
    {"rateLimitExceeded", ENR_UP_F_THROTTLED},
    {"userRateLimitExceeded", ENR_UP_F_THROTTLED},
    {"RATE_LIMIT_EXCEEDED", ENR_UP_F_THROTTLED},
    {"keyInvalid", ENR_UP_F_AUTH},
    {"keyExpired", ENR_UP_F_AUTH},
    {"accessNotConfigured", ENR_UP_F_AUTH},
    {"forbidden", ENR_UP_F_AUTH},
    {"ipRefererBlocked", ENR_UP_F_AUTH},
    {"dailyLimitExceededUnreg", ENR_UP_F_AUTH}, /* no key reached the API */
    {"API_KEY_INVALID", ENR_UP_F_AUTH},
    {"API_KEY_EXPIRED", ENR_UP_F_AUTH},
    {"API_KEY_SERVICE_BLOCKED", ENR_UP_F_AUTH},
    {"API_KEY_HTTP_REFERRER_BLOCKED", ENR_UP_F_AUTH},
    {"API_KEY_IP_ADDRESS_BLOCKED", ENR_UP_F_AUTH},
    {"SERVICE_DISABLED", ENR_UP_F_AUTH},
};

/* Messages that say what an older reason word said: the word stands in
 * for them in the log. */
static const struct {
    const char *prefix, *word;
} messages[] = {
    {"API key not valid", "keyInvalid"},
    {"API key expired", "keyExpired"},
};

/* The verdict a reason word stands for, -1 when it is not one of ours. */
static int reason_verdict(const enr_api_field *f)
{
    for (size_t i = 0; f->found && i < sizeof reasons / sizeof reasons[0]; i++)
        if (strcmp(f->text, reasons[i].word) == 0)
            return reasons[i].verdict;
    return -1;
}

static void yt_classify(int status, const char *body, size_t len, const enr_api_headers *h,
                        int64_t now, enr_api_outcome *out)
{
    enum { F_REASON, F_DETAIL, F_MESSAGE, F_COUNT };
    enr_api_field f[F_COUNT] = {{.path = {"error", "errors", "[]", "reason"}},
                                {.path = {"error", "details", "[]", "reason"}},
                                {.path = {"error", "message"}}};
    int v;

    enr_api_outcome_init(out);
    if (status >= 200 && status < 300)
        return;
    out->verdict = enr_api_status_verdict(status);
    (void)enr_api_fields(body, len, f, F_COUNT);
    if ((v = reason_verdict(&f[F_REASON])) >= 0) {
        enr_api_set_reason(out, f[F_REASON].text, f[F_REASON].len);
    } else if ((v = reason_verdict(&f[F_DETAIL])) >= 0) {
        enr_api_set_reason(out, f[F_DETAIL].text, f[F_DETAIL].len);
    } else {
        const enr_api_field *w = f[F_REASON].found ? &f[F_REASON] : &f[F_DETAIL];
        enr_api_set_reason(out, w->text, w->len);
        for (size_t i = 0; f[F_MESSAGE].found && i < sizeof messages / sizeof messages[0]; i++)
            if (strncmp(f[F_MESSAGE].text, messages[i].prefix, strlen(messages[i].prefix)) == 0) {
                v = ENR_UP_F_AUTH;
                enr_api_set_reason(out, messages[i].word, strlen(messages[i].word));
            }
    }
    if (v >= 0 && status < 500)
        out->verdict = v; /* a 5xx is the provider's failure whatever it says */
    if (out->verdict == ENR_UP_F_QUOTA)
        out->until = enr_pacific_next_midnight(now);
    else if (out->verdict == ENR_UP_F_THROTTLED)
        out->until = enr_api_retry_after(h, now);
}

const enr_api enr_api_youtube = {
    .name = "youtube",
    .title = "YouTube",
    .max_ids = 50,
    .needs_secret = 1,
    .build_url = yt_build_url,
    .headers = yt_headers,
    .parse = yt_parse,
    .classify = yt_classify,
};
