/*
 * upsecret.c: the secret placed in a request and scrubbed from text
 * (upsecret.h).
 *
 * Invariants: every scratch copy of the secret (its percent-encoded
 * form) is wiped before return; nothing here logs.
 */
#include "upstream/upsecret.h"

#include <stdio.h>
#include <string.h>

int enr_secret_header_line(const char *spec, const char *secret, size_t slen, char *out,
                           size_t outlen)
{
    const char *colon = strchr(spec, ':');
    const char *ph;
    int w;

    if (colon == NULL) {
        w = snprintf(out, outlen, "%s: %.*s", spec, (int)slen, secret);
        return w < 0 || (size_t)w >= outlen ? -1 : 0;
    }
    ph = strstr(colon, ENR_SECRET_PLACEHOLDER);
    if (ph == NULL)
        return -1;
    w = snprintf(out, outlen, "%.*s%.*s%s", (int)(ph - spec), spec, (int)slen, secret,
                 ph + strlen(ENR_SECRET_PLACEHOLDER));
    return w < 0 || (size_t)w >= outlen ? -1 : 0;
}

int enr_secret_pct(const char *s, size_t n, char *out, size_t outlen)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = strlen(out);

    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        size_t need = enr_uri_unreserved(ch) ? 1 : 3;
        if (o + need >= outlen) {
            out[o] = '\0';
            return -1;
        }
        if (need == 1) {
            out[o++] = (char)ch;
        } else {
            out[o++] = '%';
            out[o++] = hex[ch >> 4];
            out[o++] = hex[ch & 15];
        }
    }
    out[o] = '\0';
    return 0;
}

/* Every occurrence of needle in text becomes '*'s; 1 when one did.  A
 * needle of '*'s alone is what the mask looks like: never "changed". */
static int mask_all(char *text, const char *needle, size_t n)
{
    char *p;
    int changed = 0;

    if (n == 0)
        return 0;
    for (p = strstr(text, needle); p != NULL; p = strstr(p + n, needle)) {
        memset(p, '*', n);
        changed = 1;
    }
    return changed && strspn(needle, "*") != n;
}

void enr_secret_scrub(char *text, const char *secret, size_t slen)
{
    char enc[3 * ENR_SECRET_MAX + 1];
    int have_enc, again;

    if (text == NULL || secret == NULL || slen == 0)
        return;
    enc[0] = '\0';
    have_enc = enr_secret_pct(secret, slen, enc, sizeof enc) == 0;
    /* A mask next to the text around it can form either form again
     * ("a*" in "aa*"; "-*" out of "--%2A"), so both are searched again
     * until neither is found; each pass turns bytes other than '*' into
     * '*', so it ends. */
    do {
        again = mask_all(text, secret, slen);
        if (have_enc)
            again |= mask_all(text, enc, strlen(enc));
    } while (again);
    enr_secret_wipe(enc, sizeof enc);
}
