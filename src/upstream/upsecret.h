/*
 * upsecret.h: the secret on its way out and never back: placed in a
 * request's header line or query (percent-encoded), and scrubbed from
 * text that came from elsewhere before it is logged.  The secret itself,
 * its checks and its memory are the configuration's (base/secret.h).
 */
#ifndef ENR_UPSECRET_H
#define ENR_UPSECRET_H

#include <stddef.h>

#include "base/secret.h"

/* The header line of spec (enr_secret_header_check) with the secret in
 * place: "Name: secret" or the value with its placeholder replaced.
 * -1 when it does not fit outlen. */
int enr_secret_header_line(const char *spec, const char *secret, size_t slen, char *out,
                           size_t outlen);

/* Appends the RFC 3986 percent-encoding of s[0..n) (unreserved kept) to
 * out; -1 when it does not fit (out is then truncated, NUL-terminated). */
int enr_secret_pct(const char *s, size_t n, char *out, size_t outlen);

/* Overwrites with '*' every occurrence in the NUL-terminated text of the
 * secret and of its percent-encoded form: a last guard for text that
 * came from elsewhere (libcurl's error buffer) before it is logged. */
void enr_secret_scrub(char *text, const char *secret, size_t slen);

#endif
