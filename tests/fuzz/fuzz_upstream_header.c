/*
 * fuzz_upstream_header.c: libFuzzer target on the checks of what a call
 * carries besides its ids (src/base/secret.c): upstream_header lines,
 * upstream_secret_header / _query values, the URL redaction and the
 * secret scrub.
 *
 * Input: a selector byte, then text.  Checks on every input: an accepted
 * header line has a token name (RFC 9110 tchar), a ':' and no byte below
 * 0x20 but HTAB nor DEL anywhere, so it can never add a header or split
 * the request; an accepted secret header template holds the placeholder
 * exactly once and its filled line passes the header check; an accepted
 * query name is unreserved bytes only; a redacted URL keeps nothing after
 * its '?'; a scrubbed text holds the secret in neither form.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/secret.h"
#include "upstream/upsecret.h"

#define MAX_LEN 2048

static int tchar(unsigned char ch)
{
    return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
           (ch != 0 && strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

static void check_line(const char *s, size_t n)
{
    const char *colon = memchr(s, ':', n);

    if (colon == NULL || colon == s)
        abort();
    for (const char *q = s; q < colon; q++)
        if (!tchar((unsigned char)*q))
            abort();
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char why[512], *s, out[ENR_UP_HEADER_MAX + 64];
    size_t n, name_len = 0;

    if (size < 1 || size > MAX_LEN)
        return 0;
    n = size - 1;
    s = malloc(n + 1);
    if (s == NULL)
        return 0;
    memcpy(s, data + 1, n);
    s[n] = '\0';
    switch (data[0] % 5) {
    case 0:
        /* the raw bytes, NULs included: exactly n of them are read */
        if (enr_upstream_header_check(s, n, &name_len, why, sizeof why) == 0) {
            check_line(s, n);
            if (n >= ENR_UP_HEADER_MAX || name_len == 0 || s[name_len] != ':')
                abort();
        }
        break;
    case 1:
        if (strlen(s) == n && enr_secret_header_check(s, why, sizeof why) == 0) {
            const char *colon = strchr(s, ':');
            if (colon != NULL) {
                const char *ph = strstr(colon, ENR_SECRET_PLACEHOLDER);
                if (ph == NULL || strstr(ph + 1, ENR_SECRET_PLACEHOLDER) != NULL)
                    abort();
            }
            if (enr_secret_header_line(s, "k3y", 3, out, sizeof out) == 0) {
                check_line(out, strlen(out));
                if (strstr(out, "k3y") == NULL)
                    abort();
            }
        }
        break;
    case 2:
        if (enr_secret_query_check(s, why, sizeof why) == 0) {
            if (strlen(s) == 0 || strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                            "0123456789-._~") != strlen(s))
                abort();
        }
        break;
    case 3: {
        char red[256];
        const char *q;
        enr_url_redact(s, red, sizeof red);
        q = strchr(red, '?');
        if (strlen(red) >= sizeof red || (q != NULL && strcmp(q, "?[redacted]") != 0 &&
                                          strncmp(q, "?[redacted]", strlen(q)) != 0))
            abort();
        break;
    }
    default: {
        /* secret: up to the first space (visible ASCII only), text: the rest */
        char *sp = strchr(s, ' '), enc[3 * 64 + 1] = "";
        size_t sl = sp ? (size_t)(sp - s) : 0;
        int ok = sl > 0 && sl <= 64;
        for (size_t i = 0; ok && i < sl; i++)
            ok = (unsigned char)s[i] >= 0x21 && (unsigned char)s[i] <= 0x7e;
        if (!ok)
            break;
        *sp = '\0';
        enr_secret_scrub(sp + 1, s, sl);
        /* A secret of '*'s alone is what the mask looks like. */
        if (strspn(s, "*") != sl && strstr(sp + 1, s) != NULL)
            abort();
        if (enr_secret_pct(s, sl, enc, sizeof enc) == 0 && strstr(sp + 1, enc) != NULL)
            abort();
        break;
    }
    }
    free(s);
    return 0;
}
