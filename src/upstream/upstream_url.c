/*
 * upstream_url.c: the upstream_url check (upstream_url.h).
 *
 * The client appends "?provider=...&ids=..." (or "&..." after a query)
 * to the configured text as it is and hands the result to libcurl for
 * every call, so the text itself must already be what libcurl will
 * parse the same way each time: no white space or control bytes (curl
 * would refuse or split them), no '#' at all (an empty fragment hides
 * the appended query from the server), nothing outside ASCII, an
 * authority in the text (curl would read "http:///x" as host x), and
 * libcurl's own parser must accept it.  Credentials in the authority are
 * refused (upstream_secret_* is the way to send a key); a URL quoted in a
 * message has its query redacted (enr_url_redact).
 *
 * Invariant: every refusal says what is wrong in operator words; the
 * caller prefixes FILE:LINE: upstream_url or "upstream_url:".
 */
#include "upstream/upstream_url.h"

#include <stdio.h>
#include <string.h>

#include "upstream/curlapi.h"
#include "base/secret.h"

static const char *curlu_problem(CURLUcode rc)
{
    switch (rc) {
    case CURLUE_NO_HOST:
        return "no host";
    case CURLUE_BAD_PORT_NUMBER:
        return "the port is not a number from 1 to 65535";
    case CURLUE_BAD_IPV6:
        return "bad IPv6 address (brackets?)";
    case CURLUE_BAD_HOSTNAME:
        return "bad host name";
    case CURLUE_BAD_SLASHES:
        return "expected \"//\" after the scheme";
    case CURLUE_BAD_LOGIN:
    case CURLUE_BAD_USER:
    case CURLUE_BAD_PASSWORD:
        return "bad user:password@ part";
    case CURLUE_OUT_OF_MEMORY:
        return "out of memory";
    default:
        return "not a URL libcurl accepts";
    }
}

int enr_upstream_url_check(const char *url, int *has_query, char *why, size_t whylen)
{
    const char *auth, *end;
    char *port = NULL, *user = NULL, *password = NULL, *query = NULL;
    CURLU *h;
    CURLUcode rc;
    int ret = -1;

    if (has_query != NULL)
        *has_query = 0;
    if (strncmp(url, "http://", 7) == 0) {
        auth = url + 7;
    } else if (strncmp(url, "https://", 8) == 0) {
        auth = url + 8;
    } else {
        char shown[208];
        enr_url_redact(url, shown, sizeof shown); /* a query may carry a key */
        snprintf(why, whylen, "\"%s\" is not an http:// or https:// URL (empty: off)", shown);
        return -1;
    }
    for (const char *p = url; *p; p++) {
        unsigned char ch = (unsigned char)*p;
        if (ch <= ' ' || ch == 0x7f) {
            snprintf(why, whylen, "white space or control character at byte %zu",
                     (size_t)(p - url));
            return -1;
        }
        if (ch >= 0x80) {
            snprintf(why, whylen, "byte %zu is not ASCII (percent-encode it)", (size_t)(p - url));
            return -1;
        }
        if (ch == '#') {
            snprintf(why, whylen, "must not have a fragment ('#' at byte %zu)", (size_t)(p - url));
            return -1;
        }
    }
    end = auth + strcspn(auth, "/?");
    if (end == auth) {
        snprintf(why, whylen, "no host after the scheme");
        return -1;
    }
    if (memchr(auth, '@', (size_t)(end - auth)) != NULL) {
        snprintf(why, whylen, "must not carry credentials (user@ or user:password@)");
        return -1;
    }
    if (enr_curl_load(why, whylen) != 0)
        return -1; /* why says that libcurl cannot be loaded */
    h = curl_url();
    if (h == NULL) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    rc = curl_url_set(h, CURLUPART_URL, url, 0);
    if (rc != CURLUE_OK) {
        snprintf(why, whylen, "%s", curlu_problem(rc));
        goto out;
    }
    if (curl_url_get(h, CURLUPART_USER, &user, 0) == CURLUE_OK ||
        curl_url_get(h, CURLUPART_PASSWORD, &password, 0) == CURLUE_OK) {
        snprintf(why, whylen, "must not carry credentials (user@ or user:password@)");
        goto out;
    }
    if (curl_url_get(h, CURLUPART_PORT, &port, 0) == CURLUE_OK && strcmp(port, "0") == 0) {
        snprintf(why, whylen, "port 0");
        goto out;
    }
    if (has_query != NULL)
        *has_query = curl_url_get(h, CURLUPART_QUERY, &query, 0) == CURLUE_OK && query[0] != '\0';
    ret = 0;
out:
    curl_free(port);
    curl_free(user);
    curl_free(password);
    curl_free(query);
    curl_url_cleanup(h);
    return ret;
}
