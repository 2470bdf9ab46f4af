/*
 * secret.c: upstream header lines, the upstream secret and its redaction
 * (secret.h, docs/upstream.md "Credentials").
 *
 * Invariants: no message written here contains a byte of a header value
 * or of a secret; a credential file is opened without following it into
 * a FIFO or device (O_NONBLOCK, then fstat: a regular file only); a
 * secret is read within ENR_SECRET_MAX + 1 bytes straight into the
 * memory that keeps it (enr_secret: MADV_DONTDUMP before the first byte)
 * and refused unless ENR_CRED_PRIVATE's rule holds; every scratch copy
 * of it is wiped before return.
 */
#include "base/secret.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

/* Headers the client writes or that frame the exchange: one set through
 * upstream_header would change the protocol, not authenticate it. */
static const char *const owned_headers[] = {
    "host",       "content-length",   "transfer-encoding",
    "connection", "keep-alive",       "te",
    "trailer",    "upgrade",          "expect",
    "accept",     "proxy-connection",
};

/* RFC 9110 tchar */
static int tchar(unsigned char ch)
{
    return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
           (ch != 0 && strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

int enr_uri_unreserved(unsigned char ch)
{
    return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
           ch == '-' || ch == '.' || ch == '_' || ch == '~';
}

/* The name at s[0..n): a token the client does not own. */
static int name_check(const char *s, size_t n, char *why, size_t whylen)
{
    if (n == 0) {
        snprintf(why, whylen, "expected \"Name: value\" (no header name)");
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        if (!tchar((unsigned char)s[i])) {
            snprintf(why, whylen,
                     "the header name has a byte that is not a token character "
                     "(at byte %zu)",
                     i);
            return -1;
        }
    for (size_t i = 0; i < sizeof owned_headers / sizeof owned_headers[0]; i++)
        if (strlen(owned_headers[i]) == n && strncasecmp(s, owned_headers[i], n) == 0) {
            snprintf(why, whylen, "header %.*s is the client's own, not configurable", (int)n, s);
            return -1;
        }
    return 0;
}

int enr_upstream_header_check(const char *line, size_t len, size_t *name_len, char *why,
                              size_t whylen)
{
    const char *colon = memchr(line, ':', len);
    size_t n;

    if (len >= ENR_UP_HEADER_MAX) {
        snprintf(why, whylen, "longer than %d bytes", ENR_UP_HEADER_MAX - 1);
        return -1;
    }
    if (colon == NULL) {
        snprintf(why, whylen, "expected \"Name: value\" (no ':')");
        return -1;
    }
    n = (size_t)(colon - line);
    if (name_check(line, n, why, whylen) != 0)
        return -1;
    for (size_t i = n + 1; i < len; i++) {
        unsigned char ch = (unsigned char)line[i];
        if ((ch < 0x20 && ch != '\t') || ch == 0x7f) {
            snprintf(why, whylen, "the value has a control byte (CR, LF, NUL, ...) at byte %zu", i);
            return -1;
        }
    }
    if (name_len != NULL)
        *name_len = n;
    return 0;
}

int enr_secret_header_check(const char *spec, char *why, size_t whylen)
{
    const char *colon = strchr(spec, ':');
    size_t n = colon ? (size_t)(colon - spec) : strlen(spec);
    const char *ph;

    if (name_check(spec, n, why, whylen) != 0)
        return -1;
    if (colon == NULL)
        return 0; /* "Name": the value is the secret */
    if (enr_upstream_header_check(spec, strlen(spec), NULL, why, whylen) != 0)
        return -1;
    ph = strstr(colon, ENR_SECRET_PLACEHOLDER);
    if (ph == NULL || strstr(ph + 1, ENR_SECRET_PLACEHOLDER) != NULL) {
        snprintf(why, whylen, "a value must hold %s exactly once (or give the name alone)",
                 ENR_SECRET_PLACEHOLDER);
        return -1;
    }
    return 0;
}

int enr_secret_query_check(const char *name, char *why, size_t whylen)
{
    size_t n = strlen(name);

    if (n == 0 || n >= ENR_SECRET_CRED_NAME_MAX) {
        snprintf(why, whylen, "a parameter name of 1 to %d bytes", ENR_SECRET_CRED_NAME_MAX - 1);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        if (!enr_uri_unreserved((unsigned char)name[i])) {
            snprintf(why, whylen, "a parameter name is letters, digits, '-', '.', '_', '~'");
            return -1;
        }
    if (strcmp(name, "provider") == 0 || strcmp(name, "ids") == 0) {
        snprintf(why, whylen, "\"%s\" is a parameter the client writes itself", name);
        return -1;
    }
    return 0;
}

int enr_secret_credential_name_check(const char *name, char *why, size_t whylen)
{
    size_t n = strlen(name);

    if (n == 0 || n >= ENR_SECRET_CRED_NAME_MAX || strcmp(name, ".") == 0 ||
        strcmp(name, "..") == 0) {
        snprintf(why, whylen, "a credential name of 1 to %d bytes", ENR_SECRET_CRED_NAME_MAX - 1);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        if (!enr_uri_unreserved((unsigned char)name[i]) && name[i] != ':') {
            snprintf(why, whylen, "a credential name is letters, digits, '-', '.', '_', '~', ':'");
            return -1;
        }
    return 0;
}

int enr_secret_credential_path(const char *name, char *out, size_t outlen, char *why, size_t whylen)
{
    const char *dir = getenv("CREDENTIALS_DIRECTORY");
    int w;

    if (enr_secret_credential_name_check(name, why, whylen) != 0)
        return -1;
    if (dir == NULL || dir[0] != '/') {
        snprintf(why, whylen,
                 "CREDENTIALS_DIRECTORY is not set (LoadCredential=%s:FILE in the "
                 "unit, systemd 247 or later)",
                 name);
        return -1;
    }
    w = snprintf(out, outlen, "%s/%s", dir, name);
    if (w < 0 || (size_t)w >= outlen) {
        snprintf(why, whylen, "CREDENTIALS_DIRECTORY is too long");
        return -1;
    }
    return 0;
}

void enr_secret_wipe(void *p, size_t n)
{
    volatile unsigned char *v = p;

    while (n--)
        *v++ = 0;
}

int enr_cred_mode_check(const char *path, const struct stat *st, enr_cred_kind kind, char *why,
                        size_t whylen)
{
    unsigned mode = (unsigned)(st->st_mode & 07777);

    if (!S_ISREG(st->st_mode)) {
        snprintf(why, whylen, "%s is not a regular file", path);
        return -1;
    }
    if (st->st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(why, whylen, "%s is writable by %s (mode %04o): chmod go-w it", path,
                 st->st_mode & S_IWOTH ? "others" : "its group", mode);
        return -1;
    }
    if (kind == ENR_CRED_PUBLIC)
        return 0;
    if (st->st_mode & S_IRWXO) {
        snprintf(why, whylen, "%s is open to others (mode %04o): chmod o-rwx it", path, mode);
        return -1;
    }
    if ((st->st_mode & S_IRGRP) && st->st_uid != 0) {
        snprintf(why, whylen,
                 "%s is readable by its group and not owned by root (mode %04o): chmod g-r it, "
                 "or give it to root (root:GROUP 0640)",
                 path, mode);
        return -1;
    }
    return 0;
}

/* A secret of st's size can hold a secret: 1..ENR_SECRET_MAX bytes. */
static int secret_size_check(const char *path, const struct stat *st, char *why, size_t whylen)
{
    if (st->st_size == 0) {
        snprintf(why, whylen, "%s is empty", path);
        return -1;
    }
    if (st->st_size > ENR_SECRET_MAX) {
        snprintf(why, whylen, "%s is larger than %d bytes", path, ENR_SECRET_MAX);
        return -1;
    }
    return 0;
}

/* O_NONBLOCK: a FIFO put there must not hang the start; the caller's
 * fstat then refuses anything but a regular file. */
static int cred_open(const char *path)
{
    return open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
}

int enr_cred_probe(const char *path, enr_cred_kind kind, int is_secret, char *why, size_t whylen)
{
    struct stat st;
    int fd;

    if (stat(path, &st) != 0) {
        snprintf(why, whylen, "%s: %s", path, strerror(errno));
        return errno == EACCES ? 1 : -1;
    }
    if (enr_cred_mode_check(path, &st, kind, why, whylen) != 0)
        return -1;
    if (is_secret && secret_size_check(path, &st, why, whylen) != 0)
        return -1;
    /* Opened, never read: whether this user could. */
    fd = cred_open(path);
    if (fd < 0) {
        snprintf(why, whylen, "%s: %s", path, strerror(errno));
        return errno == EACCES ? 1 : -1;
    }
    close(fd);
    return 0;
}

int enr_secret_read(const char *path, char *out, size_t outcap, size_t *len, char *why,
                    size_t whylen)
{
    struct stat st;
    size_t n = 0;
    int fd, rc = -1;

    *len = 0;
    if (outcap <= ENR_SECRET_MAX) {
        snprintf(why, whylen, "internal: secret buffer too small");
        return -1;
    }
    fd = cred_open(path);
    if (fd < 0) {
        snprintf(why, whylen, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) != 0) {
        snprintf(why, whylen, "%s: %s", path, strerror(errno));
        goto out;
    }
    if (enr_cred_mode_check(path, &st, ENR_CRED_PRIVATE, why, whylen) != 0)
        goto out;
    /* Straight into out: a stack buffer would be one more copy. */
    while (n < ENR_SECRET_MAX + 1) {
        ssize_t r = read(fd, out + n, ENR_SECRET_MAX + 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            snprintf(why, whylen, "%s: %s", path, strerror(errno));
            goto out;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    if (n > ENR_SECRET_MAX) {
        snprintf(why, whylen, "%s is larger than %d bytes", path, ENR_SECRET_MAX);
        goto out;
    }
    if (n > 0 && out[n - 1] == '\n')
        n--;
    if (n > 0 && out[n - 1] == '\r')
        n--;
    if (n == 0) {
        snprintf(why, whylen, "%s is empty", path);
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)out[i] < 0x21 || (unsigned char)out[i] > 0x7e) {
            snprintf(why, whylen,
                     "%s: byte %zu is not visible ASCII (a secret is one line "
                     "without spaces)",
                     path, i);
            goto out;
        }
    out[n] = '\0';
    *len = n;
    rc = 0;
out:
    if (rc != 0)
        enr_secret_wipe(out, ENR_SECRET_MAX + 1);
    else
        enr_secret_wipe(out + n, ENR_SECRET_MAX + 1 - n); /* what the newline left */
    close(fd);
    return rc;
}

int enr_secret_load(enr_secret *s, const char *path, char *why, size_t whylen)
{
    long pg = sysconf(_SC_PAGESIZE);
    size_t page = pg > 0 ? (size_t)pg : 4096;
    size_t maplen = (ENR_SECRET_MAX + 1 + page - 1) / page * page;
    size_t len;
    char *p;

    p = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        snprintf(why, whylen, "cannot map memory for the secret: %s", strerror(errno));
        return -1;
    }
    /* Before a byte is read: out of every core from now on.  A kernel
     * that cannot would put the secret in every core: refused. */
    if (madvise(p, maplen, MADV_DONTDUMP) != 0) {
        snprintf(why, whylen, "cannot keep the secret out of core dumps (MADV_DONTDUMP): %s",
                 strerror(errno));
        munmap(p, maplen);
        return -1;
    }
    /* Never swapped, when RLIMIT_MEMLOCK (or a seccomp filter) allows:
     * a refusal costs nothing but that. */
    (void)mlock(p, maplen);
    if (enr_secret_read(path, p, maplen, &len, why, whylen) != 0) {
        munlock(p, maplen);
        munmap(p, maplen);
        return -1;
    }
    /* No core, no ptrace, no /proc/PID/mem for another process of this
     * user while it holds a secret (DONTDUMP covers cores only). */
    (void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    s->bytes = p;
    s->len = len;
    s->maplen = maplen;
    return 0;
}

void enr_secret_free(enr_secret *s)
{
    if (s->bytes == NULL)
        return;
    explicit_bzero(s->bytes, s->maplen);
    munlock(s->bytes, s->maplen);
    munmap(s->bytes, s->maplen);
    memset(s, 0, sizeof *s);
}

void enr_secret_forget(enr_secret *s)
{
    if (s->bytes == NULL)
        return;
    munmap(s->bytes, s->maplen);
    memset(s, 0, sizeof *s);
}

void enr_secret_relock(const enr_secret *s)
{
    if (s->bytes != NULL)
        (void)mlock(s->bytes, s->maplen);
}

void enr_secret_child_dumpable(void)
{
    (void)prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
}

int enr_secret_cleartext_url(const char *url)
{
    const char *h, *end;
    size_t n;

    if (strncasecmp(url, "http://", 7) != 0)
        return 0;
    h = url + 7;
    n = strcspn(h, "/?#");
    /* userinfo is refused by upstream_url's own check; skip it anyway */
    for (const char *at = memchr(h, '@', n); at != NULL; at = memchr(h, '@', n)) {
        n -= (size_t)(at + 1 - h);
        h = at + 1;
    }
    if (n > 0 && h[0] == '[') {
        end = memchr(h, ']', n);
        return !(end != NULL && (size_t)(end - h) == 4 && strncmp(h, "[::1", 4) == 0);
    }
    end = memchr(h, ':', n);
    if (end != NULL)
        n = (size_t)(end - h);
    if (n == 9 && strncasecmp(h, "localhost", 9) == 0)
        return 0;
    if (n >= 4 && strncmp(h, "127.", 4) == 0) {
        for (size_t i = 4; i < n; i++)
            if (!((h[i] >= '0' && h[i] <= '9') || h[i] == '.'))
                return 1;
        return 0;
    }
    return 1;
}

void enr_url_redact(const char *url, char *out, size_t outlen)
{
    size_t q = strcspn(url, "?");

    if (outlen == 0)
        return;
    if (url[q] == '?')
        snprintf(out, outlen, "%.*s?[redacted]", (int)q, url);
    else
        snprintf(out, outlen, "%s", url);
}
