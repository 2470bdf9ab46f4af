/*
 * api_vimeo.c: the Vimeo API 3.4's GET /videos by uris (50 ids a call:
 * the limit is undocumented):
 *
 *   GET {vimeo_url}/videos?uris=/videos/1,/videos/2&fields=uri,duration,pictures.sizes
 *   Authorization: bearer TOKEN
 *   Accept: application/vnd.vimeo.*+json;version=3.4
 *
 * and nothing else in the query: the API refuses sort, filter and page
 * parameters beside uris (error 2101).  An answer is {"data":[{"uri":
 * "/videos/ID" or "/videos/ID:HASH" (unlisted), "duration":213,
 * "pictures":{"sizes":[{"width":1920,"link":..},..]}}], "total":..,..};
 * ids the API does not know are absent.  The poster is the link of the
 * widest size whose link passes the poster checks (the first of equal
 * widths); the runtime is duration in seconds, none when 0.
 *
 * Errors are {"error":"..","developer_message":"..","error_code":2204}:
 * 401 is the token, 429 the rate limit (X-RateLimit-Reset says until
 * when: epoch seconds, or a date), any other 4xx a request refused (its
 * error_code for the log); X-RateLimit-Remaining is read on every answer.
 * Within an object the last occurrence of a key counts.
 */
#include "upstream/api.h"
#include "upstream/api_int.h"
#include "upstream/reply_scan.h"

#include <stdlib.h>
#include <string.h>

/* The uris separator, and the bytes that would make /videos/ID another
 * path or cut ID:HASH in the wrong place. */
#define FORBID ",/:"
#define URI_PREFIX "/videos/"
#define URI_PREFIX_LEN (sizeof URI_PREFIX - 1)

static int vm_matchable(const char *id, size_t len)
{
    return enr_api_id_ok(id, len, FORBID);
}

static int vm_build_url(enr_buf *url, const char *base, const char *provider,
                        const enr_reply_id *ids, size_t n, const char *secret, size_t secret_len)
{
    size_t start = url->len;

    if (enr_api_url_ids(url, base, "videos?uris=", ids, n, enr_api_vimeo.max_ids, URI_PREFIX,
                        FORBID) != 0)
        return -1;
    enr_buf_lit(url, "&fields=uri,duration,pictures.sizes");
    if (url->oom) {
        url->len = start;
        return -1;
    }
    return 0;
}

/* A token that could end the header line or start another is not sent:
 * the call then gets the API's 401, which names the fault. */
static int token_ok(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
            return 0;
    return n > 0;
}

static void vm_headers(enr_buf *out, const char *secret, size_t secret_len)
{
    static const char accept[] = "Accept: application/vnd.vimeo.*+json;version=3.4";

    if (secret != NULL && token_ok(secret, secret_len)) {
        enr_buf_lit(out, "Authorization: bearer ");
        enr_buf_append(out, secret, secret_len);
        enr_buf_putc(out, '\0');
    }
    enr_buf_append(out, accept, sizeof accept); /* with its NUL */
}

/* ---- the reader ---- */

typedef struct vm_item {
    enr_rscan *r;
    const unsigned char *uri, *duration;
    const unsigned char *link; /* of the widest usable size so far */
    double width;
    const unsigned char *size_width, *size_link; /* of the size being read */
} vm_item;

static int size_member(void *ctx, int key, int depth)
{
    vm_item *it = ctx;
    const unsigned char *ignored;

    if (key == 0)
        return enr_jscan_number_at(&it->r->j, depth, &it->size_width);
    return enr_jscan_string_at(&it->r->j, depth, key == 1 ? &it->size_link : &ignored);
}

/* One element of sizes: a candidate when its width is a number and its
 * link passes the poster checks; the first of equal widths wins. */
static int read_size(void *ctx, int depth)
{
    static const char *const names[] = {"width", "link"};
    vm_item *it = ctx;
    enr_rscan *r = it->r;
    size_t len;
    int faithful;
    double w;

    it->size_width = it->size_link = NULL;
    if (enr_jscan_object(&r->j, depth, names, 2, size_member, it) != 0)
        return -1;
    if (it->size_width == NULL || it->size_link == NULL)
        return 0;
    w = strtod((const char *)it->size_width, NULL); /* a delimiter follows it in the body */
    if ((it->link == NULL || w > it->width) &&
        enr_rscan_string_at(r, it->size_link, r->poster, sizeof r->poster, &len, &faithful) == 0 &&
        len <= sizeof r->poster && enr_reply_poster_ok(r->poster, len)) {
        it->link = it->size_link;
        it->width = w;
    }
    return 0;
}

/* pictures {sizes [..]}: a later sizes replaces an earlier one. */
static int pictures_member(void *ctx, int key, int depth)
{
    vm_item *it = ctx;

    if (key != 0)
        return enr_jscan_skip(&it->r->j, depth);
    it->link = NULL;
    return enr_jscan_array(&it->r->j, depth, read_size, it);
}

static int item_member(void *ctx, int key, int depth)
{
    static const char *const pictures[] = {"sizes"};
    vm_item *it = ctx;
    const unsigned char *ignored;

    if (key == 2) {
        it->link = NULL;
        return enr_jscan_object(&it->r->j, depth, pictures, 1, pictures_member, it);
    }
    if (key == 1)
        return enr_jscan_number_at(&it->r->j, depth, &it->duration);
    return enr_jscan_string_at(&it->r->j, depth, key == 0 ? &it->uri : &ignored);
}

/* The asked id a uri names: /videos/ID or /videos/ID:HASH. */
static enr_reply_id *claim_uri(enr_rscan *r, const unsigned char *uri)
{
    size_t len, cap = r->idmax + r->idextra;
    int faithful;
    const char *colon;

    if (enr_rscan_string_at(r, uri, r->idbuf, cap, &len, &faithful) != 0 || !faithful ||
        len <= URI_PREFIX_LEN || memcmp(r->idbuf, URI_PREFIX, URI_PREFIX_LEN) != 0)
        return NULL;
    colon = memchr(r->idbuf + URI_PREFIX_LEN, ':', (len < cap ? len : cap) - URI_PREFIX_LEN);
    if (colon != NULL)
        len = (size_t)(colon - r->idbuf);
    else if (len > cap)
        return NULL; /* an id longer than any asked */
    return enr_rscan_claim(r, r->idbuf + URI_PREFIX_LEN, len - URI_PREFIX_LEN);
}

static int vm_item_read(enr_rscan *r, int depth)
{
    static const char *const names[] = {"uri", "duration", "pictures"};
    vm_item it = {.r = r};
    enr_reply_id *id;

    if (enr_jscan_object(&r->j, depth, names, 3, item_member, &it) != 0)
        return -1;
    if ((id = claim_uri(r, it.uri)) == NULL)
        return 0;
    (void)enr_rscan_poster_at(r, id, it.link);
    enr_rscan_seconds_at(id, it.duration);
    enr_rscan_settle(id);
    return 0;
}

static int vm_parse(const char *body, size_t len, enr_reply_id *ids, size_t n, uint64_t seed,
                    enr_buf *arena)
{
    /* a candidate uri: the prefix, the longest id asked, and its colon */
    static const enr_rscan_spec spec = {"data", 0, URI_PREFIX_LEN + 1, vm_matchable, vm_item_read};

    return enr_rscan_parse(body, len, ids, n, seed, arena, &spec);
}

/* ---- the classifier ---- */

static void vm_classify(int status, const char *body, size_t len, const enr_api_headers *h,
                        int64_t now, enr_api_outcome *out)
{
    enr_api_classify(&enr_api_vimeo, status, body, len, h, now, out);
}

const enr_api enr_api_vimeo = {
    .name = "vimeo",
    .title = "Vimeo",
    .max_ids = 50,
    .needs_secret = 1,
    .day_clock = ENR_API_DAY_UTC,
    .units_per_call = 1, /* the API counts requests */
    .remaining_header = "x-ratelimit-remaining:",
    .reset_header = "x-ratelimit-reset:",
    .build_url = vm_build_url,
    .headers = vm_headers,
    .parse = vm_parse,
    .classify = vm_classify,
    .reason_at = {{"error_code"}}, /* a number, for the log */
};
