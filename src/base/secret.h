/*
 * secret.h: what the upstream client sends besides the ids: header lines
 * from the configuration and one secret (an API key) read from a file or
 * a systemd credential, and the redaction that keeps the secret out of
 * everything enrichd shows (docs/upstream.md, "Credentials").
 *
 * A secret (the upstream one, and any other a provider needs) is one
 * enr_secret: its bytes in a mapping of their own, never in a struct
 * that gets copied.  That mapping is left out of core dumps
 * (MADV_DONTDUMP, inherited by fork), locked in memory when the process
 * may (mlock: never swapped), and wiped before it is unmapped.  The
 * process that loads a secret stops being dumpable (PR_SET_DUMPABLE 0: no
 * core, no ptrace or /proc/PID/mem by another process of its user); a
 * forked child that must not hold it forgets it, and one that must be
 * readable in /proc again says so (enr_secret_child_dumpable).
 *
 * Credential files (a secret, a TLS private key, a CA bundle or a
 * certificate) pass one permission rule per kind (enr_cred_mode_check).
 * Every message here names a path, a size or a mode, never a byte of
 * the secret.
 */
#ifndef ENR_SECRET_H
#define ENR_SECRET_H

#include <stddef.h>
#include <sys/stat.h>

#define ENR_SECRET_MAX 4096         /* bytes of a secret file, its newline included */
#define ENR_UP_HEADERS_MAX 8        /* upstream_header lines */
#define ENR_UP_HEADER_MAX 1024      /* one "Name: value" line, its NUL included */
#define ENR_SECRET_CRED_NAME_MAX 64 /* a credential name, its NUL included */
#define ENR_SECRET_PLACEHOLDER "{secret}"

/* 1 when ch is an RFC 3986 unreserved byte (carried as is in a query:
 * a parameter name, or a value percent-encoded around them). */
int enr_uri_unreserved(unsigned char ch);

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

/* 0 when name may name a systemd credential (a file name); otherwise -1
 * and why. */
int enr_secret_credential_name_check(const char *name, char *why, size_t whylen);

/* The path of systemd credential `name` ($CREDENTIALS_DIRECTORY/name),
 * or -1 and why (no such variable, a name that is not a file name). */
int enr_secret_credential_path(const char *name, char *out, size_t outlen, char *why,
                               size_t whylen);

/* What a credential file holds, and so who else may touch it:
 *  - PRIVATE (a secret, a TLS private key): nobody but its owner may
 *    write it, others may not read it, and its group may read it only
 *    when root owns it (root:ssl-cert 0640, the Debian way; PostgreSQL's
 *    and OpenSSH's rule for keys);
 *  - PUBLIC (a CA bundle, a certificate): anyone may read it, nobody but
 *    its owner may write it (a CA added by a stranger is a stranger
 *    trusted). */
typedef enum { ENR_CRED_PRIVATE, ENR_CRED_PUBLIC } enr_cred_kind;

/* 0 when st, the stat of path, is a regular file kind's rule allows;
 * otherwise -1 and why (with the chmod that mends it). */
int enr_cred_mode_check(const char *path, const struct stat *st, enr_cred_kind kind, char *why,
                        size_t whylen);

/* What `enrichd -t` may say of a credential file without reading a byte
 * of it: 0 when it is there, passes kind's rule (for a secret: and its
 * size is possible) and this process could open it; 1 and why when this
 * process cannot look (EACCES: the daemon's user may); -1 and why when
 * it is refused whoever looks. */
int enr_cred_probe(const char *path, enr_cred_kind kind, int is_secret, char *why, size_t whylen);

/* Reads the secret at path: a regular file of at most ENR_SECRET_MAX
 * bytes passing ENR_CRED_PRIVATE's rule, holding one line of visible
 * ASCII (0x21..0x7e); one trailing LF or CRLF is dropped.  Read straight
 * into out (no other copy): 0 and out[0..*len) NUL-terminated (outcap >
 * ENR_SECRET_MAX), or -1, why, and out wiped. */
int enr_secret_read(const char *path, char *out, size_t outcap, size_t *len, char *why,
                    size_t whylen);

/* One secret held in memory.  A struct holding one may be copied (the
 * copy points at the same bytes); exactly one copy is freed. */
typedef struct enr_secret {
    char *bytes; /* NUL-terminated; NULL: none loaded */
    size_t len;
    size_t maplen; /* the mapping's size */
} enr_secret;

/* Reads path (enr_secret_read's rules) into a new mapping as described
 * at the top; s is written only on success.  0, or -1 and why. */
int enr_secret_load(enr_secret *s, const char *path, char *why, size_t whylen);

/* Wipes and unmaps s's bytes; s then holds none.  No-op on an empty s. */
void enr_secret_free(enr_secret *s);

/* Unmaps s's bytes without writing them: a forked child that must not
 * hold the secret its parent keeps (a write would only copy the page
 * first).  s then holds none. */
void enr_secret_forget(enr_secret *s);

/* In a forked child that keeps s: locks it again (locks are not
 * inherited), when the process may. */
void enr_secret_relock(const enr_secret *s);

/* In a forked child: dumpable again, so that its parent and the status
 * process, of the same user, can read its /proc/PID/fd (a non-dumpable
 * process's is root's). */
void enr_secret_child_dumpable(void);

/* 1 when url sends what it carries in clear text to another host:
 * http:// to a host that is not loopback (localhost, 127.0.0.0/8,
 * [::1]); 0 otherwise (https://, loopback, anything else). */
int enr_secret_cleartext_url(const char *url);

/* url with its query, if any, shown as "?[redacted]": the way every
 * message shows an upstream URL (a query may carry a key). */
void enr_url_redact(const char *url, char *out, size_t outlen);

/* Zeroes n bytes at p in a way the compiler keeps. */
void enr_secret_wipe(void *p, size_t n);

#endif
