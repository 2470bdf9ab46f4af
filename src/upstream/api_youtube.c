/*
 * api_youtube.c: the YouTube Data API v3's videos.list, the one method
 * enrichd calls (1 quota unit a call, 50 ids at most):
 *
 *   GET {youtube_url}/videos?part=contentDetails,snippet&id=A,B
 *       &fields=items(id,contentDetails/duration,snippet(thumbnails,liveBroadcastContent))
 *       &prettyPrint=false&key=KEY
 *
 * fields is percent-encoded as Google's client libraries encode a query
 * value; the ids, a comma apart, each percent-encoded.  prettyPrint=false
 * (one of Google's standard parameters) asks for the answer without its
 * indentation: a third fewer bytes to carry, decrypt and scan.  An answer is
 * {"items":[{"id":..,"contentDetails":{"duration":"PT4M13S"},
 * "snippet":{"liveBroadcastContent":"none","thumbnails":{"default":
 * {"url":..,"width":120,"height":90},..,"maxres":{..}}}}]}: unknown,
 * private and deleted ids are simply not in it, and a partial response
 * may leave out an empty "items" (the answer then found nothing).
 *
 * The poster is the widest thumbnail whose url passes the poster checks
 * (https, docs/providers.md).  A thumbnail is judged by its width when
 * the answer gives a positive one, else by the width its name stands for
 * (default 120 < medium 320 < high 480 < standard 640 < maxres 1280 <
 * fhd 1920 < qhd 2560 < uhd 3840: the new names rank above maxres
 * whether widths are given or not, and a mix compares given widths with
 * named ones); a name not in that list counts only with a width (the
 * first 8 such names of an object).  Of equal widths the higher name
 * wins, a known name before an unknown one, then the unknown that came
 * first.  The runtime is the ISO 8601 duration, none for P0D/PT0S.  An
 * item whose liveBroadcastContent is "live" or "upcoming" is marked live
 * (its thumbnail is ..._live.jpg and its duration P0D until it ends): the
 * client keeps its answer cache_live_ttl_s only.
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

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FORBID "," /* the id parameter's separator */
#define DURATION_TEXT_MAX 64

static int yt_matchable(const char *id, size_t len)
{
    return enr_api_id_ok(id, len, FORBID);
}

static int yt_build_url(enr_buf *url, const char *base, const char *provider,
                        const enr_reply_id *ids, size_t n, const char *secret, size_t secret_len)
{
    static const char fields[] =
        "items(id,contentDetails/duration,snippet(thumbnails,liveBroadcastContent))";
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

/* The thumbnail names YouTube documents, narrowest first (fhd, qhd and
 * uhd since 2026-09-11), each with the width its images have: the width
 * a thumbnail is judged by when the answer gives it none. */
static const struct {
    const char *name;
    double width;
} known_thumbs[] = {{"default", 120}, {"medium", 320}, {"high", 480}, {"standard", 640},
                    {"maxres", 1280}, {"fhd", 1920},   {"qhd", 2560}, {"uhd", 3840}};

#define T_KNOWN (sizeof known_thumbs / sizeof known_thumbs[0])
/* Names the reader does not know, kept per thumbnails object (the first
 * to appear; a later one is not a candidate): the API lists 8 at most. */
#define T_OTHER_MAX 8
#define LIVE_TEXT_MAX 16 /* "upcoming" and room to see a longer word */

/* One thumbnail: where the last string of its url and the last number
 * of its width start (NULL: none), and an unknown one's name. */
typedef struct yt_thumb {
    const unsigned char *url, *width;
    char name[ENR_JSCAN_KEY_MAX + 1];
    size_t name_len;
} yt_thumb;

/* One item being read: where the last string of each field starts. */
typedef struct yt_item {
    enr_rscan *r;
    const unsigned char *id, *duration, *live;
    yt_thumb thumb[T_KNOWN + T_OTHER_MAX]; /* the known ones by rank, then the others */
    size_t nother;
    yt_thumb *cur; /* the thumbnail being read */
} yt_item;

static void thumbs_reset(yt_item *it)
{
    memset(it->thumb, 0, sizeof it->thumb);
    it->nother = 0;
}

static int thumb_member(void *ctx, int key, int depth)
{
    yt_item *it = ctx;
    const unsigned char *ignored;

    if (key == 1)
        return enr_jscan_number_at(&it->r->j, depth, &it->cur->width);
    return enr_jscan_string_at(&it->r->j, depth, key == 0 ? &it->cur->url : &ignored);
}

/* The slot of the thumbnail named k[0..len): its rank's when known, else
 * the one its name first took; NULL when the name is too long or the
 * others' slots are all taken. */
static yt_thumb *thumb_slot(yt_item *it, const char *k, size_t len)
{
    yt_thumb *t;

    if (len > ENR_JSCAN_KEY_MAX)
        return NULL;
    for (size_t i = 0; i < T_KNOWN; i++)
        if (strlen(known_thumbs[i].name) == len && memcmp(known_thumbs[i].name, k, len) == 0)
            return &it->thumb[i];
    for (size_t i = 0; i < it->nother; i++) {
        t = &it->thumb[T_KNOWN + i];
        if (t->name_len == len && memcmp(t->name, k, len) == 0)
            return t;
    }
    if (it->nother == T_OTHER_MAX)
        return NULL;
    t = &it->thumb[T_KNOWN + it->nother++];
    memcpy(t->name, k, len);
    t->name_len = len;
    return t;
}

/* thumbnails {NAME {url, width}}: any name, the last occurrence counting. */
static int read_thumbnails(yt_item *it, int depth)
{
    static const char *const names[] = {"url", "width"};
    enr_jscan *j = &it->r->j;
    char k[ENR_JSCAN_KEY_MAX + 1];
    size_t len;
    int more;

    thumbs_reset(it); /* a later thumbnails replaces an earlier one */
    if (!enr_jscan_at(j, '{'))
        return enr_jscan_skip(j, depth);
    for (more = enr_jscan_open(j, depth); more == 1; more = enr_jscan_next(j, '}')) {
        if (enr_jscan_key_text(j, k, &len) != 0)
            return -1;
        if ((it->cur = thumb_slot(it, k, len)) == NULL) {
            if (enr_jscan_skip(j, depth + 1) != 0)
                return -1;
            continue;
        }
        it->cur->url = it->cur->width = NULL;
        if (enr_jscan_object(j, depth + 1, names, 2, thumb_member, it) != 0)
            return -1;
    }
    return more;
}

/* snippet {thumbnails, liveBroadcastContent} */
static int snippet_member(void *ctx, int key, int depth)
{
    yt_item *it = ctx;

    if (key == 0)
        return read_thumbnails(it, depth);
    if (key == 1)
        return enr_jscan_string_at(&it->r->j, depth, &it->live);
    return enr_jscan_skip(&it->r->j, depth);
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
    static const char *const snippet[] = {"thumbnails", "liveBroadcastContent"};
    static const char *const details[] = {"duration"};
    yt_item *it = ctx;
    const unsigned char *ignored;

    if (key == 1) {
        thumbs_reset(it);
        it->live = NULL;
        return enr_jscan_object(&it->r->j, depth, snippet, 2, snippet_member, it);
    }
    if (key == 2) {
        it->duration = NULL;
        return enr_jscan_object(&it->r->j, depth, details, 1, details_member, it);
    }
    return enr_jscan_string_at(&it->r->j, depth, key == 0 ? &it->id : &ignored);
}

/* The width thumbnail i is judged by: its width when the answer gives a
 * positive finite one, else its name's (0 for a name not known: no
 * candidate). */
static double thumb_width(const yt_item *it, size_t i)
{
    const yt_thumb *t = &it->thumb[i];
    double w;

    if (t->width != NULL) {
        w = strtod((const char *)t->width, NULL); /* a delimiter follows it in the body */
        if (w > 0 && isfinite(w))
            return w;
    }
    return i < T_KNOWN ? known_thumbs[i].width : 0;
}

/* The poster: the widest thumbnail (thumb_width) whose url passes the
 * poster checks.  Of equal widths, the known name of the higher rank,
 * then a known name before another, then the other that appeared first. */
static void pick_poster(yt_item *it, enr_reply_id *id)
{
    double w[T_KNOWN + T_OTHER_MAX];
    size_t n = T_KNOWN + it->nother;

    for (size_t i = 0; i < n; i++)
        w[i] = it->thumb[i].url != NULL ? thumb_width(it, i) : 0;
    for (;;) {
        size_t best = n;
        for (size_t i = 0; i < n; i++) {
            /* ranks: the known from uhd down, then the others in order */
            size_t at = i < T_KNOWN ? T_KNOWN - 1 - i : i;
            if (w[at] > 0 && (best == n || w[at] > w[best]))
                best = at;
        }
        if (best == n || enr_rscan_poster_at(it->r, id, it->thumb[best].url))
            return;
        w[best] = 0; /* refused: the next widest */
    }
}

/* snippet.liveBroadcastContent: "live" or "upcoming" (else "none"). */
static int is_live(const yt_item *it)
{
    char text[LIVE_TEXT_MAX];
    size_t len;
    int faithful;

    if (enr_rscan_string_at(it->r, it->live, text, sizeof text, &len, &faithful) != 0)
        return 0;
    return (len == 4 && memcmp(text, "live", 4) == 0) ||
           (len == 8 && memcmp(text, "upcoming", 8) == 0);
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
    pick_poster(&it, id);
    if (enr_rscan_string_at(r, it.duration, text, sizeof text, &len, &faithful) == 0 &&
        len <= sizeof text && enr_iso8601_duration(text, len, &d) == 0)
        enr_rscan_runtime(id, d);
    id->live = (uint8_t)is_live(&it);
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

/* Google's reason words that say more than the status. */
static const enr_api_word reasons[] = {
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
    {NULL, 0},
};

/* Messages that say what an older reason word said: the word stands in
 * for them, in the log too. */
static const enr_api_message messages[] = {
    {"API key not valid", "keyInvalid"},
    {"API key expired", "keyExpired"},
    {NULL, NULL},
};

static void yt_classify(int status, const char *body, size_t len, const enr_api_headers *h,
                        int64_t now, enr_api_outcome *out)
{
    enr_api_classify(&enr_api_youtube, status, body, len, h, now, out);
}

const enr_api enr_api_youtube = {
    .name = "youtube",
    .title = "YouTube",
    .max_ids = 50,
    .needs_secret = 1,
    .day_clock = ENR_API_DAY_PACIFIC, /* the quota starts again at midnight Pacific time */
    .units_per_call = 1,              /* videos.list, up to 50 ids */
    .build_url = yt_build_url,
    .headers = yt_headers,
    .parse = yt_parse,
    .classify = yt_classify,
    .reason_at = {{"error", "errors", "[]", "reason"}, {"error", "details", "[]", "reason"}},
    .message_at = {"error", "message"},
    .words = reasons,
    .messages = messages,
};
