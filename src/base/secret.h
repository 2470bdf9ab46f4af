/*
 * secret.h: what the upstream client sends besides the ids: header lines
 * from the configuration and one secret (an API key) read from a file or
 * a systemd credential, and the redaction that keeps the secret out of
 * everything enrichd shows (docs/upstream.md, "Credentials").
 *
 * The secret lives only in the loaded configuration (never printed: no
 * reader of enr_config shows it) and in the client's header list or base
 * URL; every message here names a path, a size or a mode, never a byte
 * of the secret.
 */
#ifndef ENR_SECRET_H
#define ENR_SECRET_H

#include <stddef.h>

#define ENR_SECRET_MAX 4096         /* bytes of a secret file, its newline included */
#define ENR_UP_HEADERS_MAX 8        /* upstream_header lines */
#define ENR_UP_HEADER_MAX 1024      /* one "Name: value" line, its NUL included */
#define ENR_SECRET_CRED_NAME_MAX 64 /* a credential name, its NUL included */
#define ENR_SECRET_PLACEHOLDER "{secret}"

/* 0 when line[0..len) is "Name: value": Name an HTTP token (RFC 9110) that
 * is not one the client owns (Host, Content-Length, Accept, ...), value
 * without CR, LF, NUL or other controls than HTAB.  *name_len gets the
 * name's length (may be NULL).  Otherwise -1 and why (the value is never
 * quoted: it may be a credential). */
int enr_upstream_header_check(const char *line, size_t len, size_t *name_len, char *why,
                              size_t whylen);

/* 0 when name is a header name upstream_secret_header may use and the
 * rest, when there is a ": value", holds ENR_SECRET_PLACEHOLDER exactly
 * once; otherwise -1 and why. */
int enr_secret_header_check(const char *spec, char *why, size_t whylen);

/* 0 when name (upstream_secret_query) is 1..63 RFC 3986 unreserved bytes
 * and not one of the parameters the client writes itself. */
int enr_secret_query_check(const char *name, char *why, size_t whylen);

/* The path of systemd credential `name` ($CREDENTIALS_DIRECTORY/name),
 * or -1 and why (no such variable, a name that is not a file name). */
int enr_secret_credential_path(const char *name, char *out, size_t outlen, char *why,
                               size_t whylen);

/* Reads the secret at path: a regular file of at most ENR_SECRET_MAX
 * bytes that others (the "other" permission bits) can neither read nor
 * write, holding one line of visible ASCII (0x21..0x7e); one trailing
 * LF or CRLF is dropped.  0 and out[0..*len) NUL-terminated (outcap >
 * ENR_SECRET_MAX), or -1 and why. */
int enr_secret_read(const char *path, char *out, size_t outcap, size_t *len, char *why,
                    size_t whylen);

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

/* url with its query, if any, shown as "?[redacted]": the way every
 * message shows an upstream URL (a query may carry a key). */
void enr_url_redact(const char *url, char *out, size_t outlen);

/* Zeroes n bytes at p in a way the compiler keeps. */
void enr_secret_wipe(void *p, size_t n);

#endif
