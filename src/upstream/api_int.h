/*
 * api_int.h: what the files of the providers' APIs (api.c, api_time.c,
 * and each api_NAME.c of base/sources.h's list) share and nobody else
 * uses: the URL pieces, the id rule, the outcome's helpers and the
 * reader of an error document.
 */
#ifndef ENR_API_INT_H
#define ENR_API_INT_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/sources.h"
#include "upstream/reply_id.h"

/* api.h's types, by their tags: api.c includes this header, so this one
 * may not include api.h back (one way between modules). */
struct enr_api;
struct enr_api_headers;
struct enr_api_outcome;

/* The longest id asked of any API: the real ones are 7 to 11 bytes. */
#define ENR_API_ID_MAX 256

/* Each row of ENR_SOURCE_LIST (base/sources.h) is described by its file,
 * api_NAME.c, as enr_api_NAME; the aggregator protocol, source 0, by
 * api_upstream.c. */
#define ENR_API_EXTERN(NAME, name, ...) extern const struct enr_api enr_api_##name;
ENR_API_EXTERN(UPSTREAM, upstream)
ENR_SOURCE_LIST(ENR_API_EXTERN)
#undef ENR_API_EXTERN

/* An id an API can be asked for and can name in its answer unchanged:
 * 1 to ENR_API_ID_MAX bytes of strict UTF-8 (no lone surrogate, which
 * no JSON answer can carry back), no control character, none of the
 * bytes of forbid (the separators of the API's parameter). */
int enr_api_id_ok(const char *id, size_t len, const char *forbid);

/* RFC 3986: every byte but the unreserved ones as %XX. */
void enr_api_pct(enr_buf *o, const char *s, size_t n);

/* base (one '/' between it and path whatever it ends with), then path
 * (from the API's root to its '?'), then ids[0..n) comma-separated, each
 * prefix then the id percent-encoded.  0, or -1 with url as it was when
 * n is 0 or past max, or an id is not enr_api_id_ok(forbid). */
int enr_api_url_ids(enr_buf *url, const char *base, const char *path, const enr_reply_id *ids,
                    size_t n, size_t max, const char *prefix, const char *forbid);

/* The outcome of an answer before its classifier looks: OK, no pause, no
 * remaining count, no reason. */
void enr_api_outcome_init(struct enr_api_outcome *o);
/* The API's word, kept as printable ASCII (other bytes dropped) and cut
 * to the reason's size. */
void enr_api_set_reason(struct enr_api_outcome *o, const char *s, size_t n);
/* The classifier of an API's answer (api.h), as its row says: the rate
 * limit's calls left (its remaining_header), then for an error the
 * status's verdict (its slow_down_status as 429), what its words in the
 * body say (reason_at, message_at, words, messages; a 5xx stays the
 * provider's failure whatever it says), and the end of the pause the
 * verdict's row of base/upfail.h derives (ends: the reset header, else
 * Retry-After; the API's next day; none). */
void enr_api_classify(const struct enr_api *api, int status, const char *body, size_t len,
                      const struct enr_api_headers *h, int64_t now, struct enr_api_outcome *out);
/* What a status means when the body says nothing more: 2xx OK, 401 and
 * 403 a refused key, 429 a slow-down, other 4xx (and 3xx: a redirect is
 * a wrong URL) CONFIG, the rest the provider's failure (api.h). */
int enr_api_status_verdict(int status);
/* Retry-After as the wall clock's end of the pause, 0 when absent or
 * unreadable; at most ENR_RETRY_AFTER_MAX_S away. */
int64_t enr_api_retry_after(const struct enr_api_headers *h, int64_t now);
/* A rate limit's reset time: epoch seconds, seconds from now (a number
 * below 10^9), an ISO 8601 date-time or an HTTP-date; the end of the
 * pause, clamped to [now, now + ENR_RETRY_AFTER_MAX_S], 0 when absent or
 * unreadable. */
int64_t enr_api_reset_until(const char *v, size_t n, int64_t now);
/* A count header (X-RateLimit-Remaining): its value, -1 when absent or
 * not a number. */
long enr_api_count(const char *v, size_t n);
/* "YYYY-MM-DDTHH:MM:SS" with an optional fraction and "Z" or an offset
 * ("+00:00", "+0000"): Unix seconds.  0, or -1. (api_time.c) */
int enr_api_iso_datetime(const char *s, size_t n, int64_t *t);

/* One field of an error document, by its path of keys from the root
 * ("[]" for any element of an array): the first string or number found
 * there, its text cut to the size of text. */
typedef struct enr_api_field {
    const char *path[5]; /* NULL-terminated */
    char text[64];
    size_t len;
    int found;
} enr_api_field;

/* Reads body (bounded, one pass, no tree) for the fields f[0..nf); 0, or
 * -1 when it is not JSON (what was found before is kept). */
int enr_api_fields(const char *body, size_t len, enr_api_field *f, size_t nf);
/* f's text equals word. */
int enr_api_field_is(const enr_api_field *f, const char *word);

#endif
