/*
 * api_dailymotion.c: the Dailymotion API's GET /videos by ids (public
 * data, no key; 100 ids a call, limit at most 100):
 *
 *   GET {dailymotion_url}/videos?ids=x1,x2&limit=N
 *       &fields=id,duration,thumbnail_1080_url,thumbnail_720_url,thumbnail_480_url,thumbnail_url,
 *       mode&family_filter=false
 *
 * family_filter=false, or explicit videos silently vanish from the list.
 * An answer is {"page":1,"limit":N,"has_more":false,"list":[{"id":"x1",
 * "duration":213,"thumbnail_1080_url":..,..}]}; ids the API does not
 * know are absent.  The poster is the first of thumbnail_1080_url >
 * 720 > 480 > thumbnail_url that passes the poster checks; the runtime is
 * duration in seconds, none when 0.  A video whose mode is "live" is a
 * live stream (its documentation's word: on air, scheduled or over), marked
 * live: the client keeps its answer cache_live_ttl_s only.
 *
 * Errors are {"error":{"code":400,"message":"..","type":"invalid_parameter",
 * "error_data":{..}}}: 400 is a request refused (its type for the log),
 * 401 a token, 403 and 429 the API's read limits (undocumented: back off,
 * Retry-After when given).  Within an object the last occurrence of a key
 * counts.
 */
#include "upstream/api.h"
#include "upstream/api_int.h"
#include "upstream/reply_scan.h"

#include <string.h>

#define FORBID "," /* the ids parameter's separator */

static int dm_matchable(const char *id, size_t len)
{
    return enr_api_id_ok(id, len, FORBID);
}

static int dm_build_url(enr_buf *url, const char *base, const char *provider,
                        const enr_reply_id *ids, size_t n, const char *secret, size_t secret_len)
{
    size_t start = url->len;

    if (enr_api_url_ids(url, base, "videos?ids=", ids, n, enr_api_dailymotion.max_ids, "",
                        FORBID) != 0)
        return -1;
    enr_buf_printf(url, "&limit=%zu", n);
    enr_buf_lit(url, "&fields=id,duration,thumbnail_1080_url,thumbnail_720_url,"
                     "thumbnail_480_url,thumbnail_url,mode&family_filter=false");
    if (url->oom) {
        url->len = start;
        return -1;
    }
    return 0;
}

static void dm_headers(enr_buf *out, const char *secret, size_t secret_len)
{
    /* public data: nothing but what every call carries */
}

/* ---- the reader ---- */

/* The item's keys: the thumbnails first, best first. */
enum { K_1080, K_720, K_480, K_THUMB, K_ID, K_DURATION, K_MODE, K_COUNT };

#define MODE_TEXT_MAX 8 /* "live" and room to see a longer word */

typedef struct dm_item {
    enr_rscan *r;
    const unsigned char *at[K_COUNT]; /* the last string of each (a number for duration) */
} dm_item;

static int item_member(void *ctx, int key, int depth)
{
    dm_item *it = ctx;
    const unsigned char *ignored;

    if (key == K_DURATION)
        return enr_jscan_number_at(&it->r->j, depth, &it->at[K_DURATION]);
    return enr_jscan_string_at(&it->r->j, depth, key >= 0 ? &it->at[key] : &ignored);
}

static int dm_item_read(enr_rscan *r, int depth)
{
    static const char *const names[] = {"thumbnail_1080_url",
                                        "thumbnail_720_url",
                                        "thumbnail_480_url",
                                        "thumbnail_url",
                                        "id",
                                        "duration",
                                        "mode"};
    dm_item it = {.r = r};
    enr_reply_id *id;
    char mode[MODE_TEXT_MAX];
    size_t len;
    int faithful;

    if (enr_jscan_object(&r->j, depth, names, K_COUNT, item_member, &it) != 0)
        return -1;
    if ((id = enr_rscan_claim_at(r, it.at[K_ID])) == NULL)
        return 0;
    for (int k = K_1080; k <= K_THUMB; k++)
        if (enr_rscan_poster_at(r, id, it.at[k]))
            break;
    enr_rscan_seconds_at(id, it.at[K_DURATION]);
    id->live = enr_rscan_string_at(r, it.at[K_MODE], mode, sizeof mode, &len, &faithful) == 0 &&
               len == 4 && memcmp(mode, "live", 4) == 0;
    enr_rscan_settle(id);
    return 0;
}

static int dm_parse(const char *body, size_t len, enr_reply_id *ids, size_t n, uint64_t seed,
                    enr_buf *arena)
{
    static const enr_rscan_spec spec = {"list", 0, 0, dm_matchable, dm_item_read};

    return enr_rscan_parse(body, len, ids, n, seed, arena, &spec);
}

/* ---- the classifier ---- */

static void dm_classify(int status, const char *body, size_t len, const enr_api_headers *h,
                        int64_t now, enr_api_outcome *out)
{
    enr_api_classify(&enr_api_dailymotion, status, body, len, h, now, out);
}

const enr_api enr_api_dailymotion = {
    .name = "dailymotion",
    .title = "Dailymotion",
    .max_ids = 100,
    .needs_secret = 0,
    .day_clock = ENR_API_DAY_UTC,
    .units_per_call = 1, /* the API counts requests */
    .build_url = dm_build_url,
    .headers = dm_headers,
    .parse = dm_parse,
    .classify = dm_classify,
    .reason_at = {{"error", "type"}},
    .slow_down_status = 403, /* its read limits' (undocumented) */
};
