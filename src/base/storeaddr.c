/*
 * storeaddr.c: the shared store's address and the checks of its keys
 * (storeaddr.h, config.h's enr_config_store_check).  Pure: no I/O.
 */
#include "base/storeaddr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"

static int bad(char *why, size_t whylen, const char *msg)
{
    snprintf(why, whylen, "%s", msg);
    return -1;
}

/* A decimal number of at most 5 digits, lo..hi, spanning [s, end). */
static int number(const char *s, const char *end, int lo, int hi, int *out)
{
    long v = 0;

    if (s == end || end - s > 5)
        return -1;
    for (const char *p = s; p < end; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (*p - '0');
    }
    if (v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

static int host_byte_ok(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '.' || ch == '-' || ch == '_' || ch == ':';
}

static int parse_tcp(const char *s, enr_store_addr *a, char *why, size_t whylen)
{
    const char *h = s, *hend, *p, *slash = strchr(s, '/');
    const char *end = slash ? slash : s + strlen(s);

    if (*h == '[') {
        hend = memchr(h, ']', (size_t)(end - h));
        if (hend == NULL)
            return bad(why, whylen, "an IPv6 address without its closing ]");
        h++;
        p = hend + 1;
    } else {
        hend = memchr(h, ':', (size_t)(end - h));
        if (hend == NULL)
            hend = end;
        p = hend;
    }
    if (hend == h || (size_t)(hend - h) > ENR_STORE_HOST_MAX)
        return bad(why, whylen, "no host, or a host over 255 bytes");
    for (const char *q = h; q < hend; q++)
        if (!host_byte_ok((unsigned char)*q) || (*q == ':' && s[0] != '['))
            return bad(why, whylen, "a host of letters, digits, '.', '-', or an [IPv6] address");
    memcpy(a->host, h, (size_t)(hend - h));
    a->host[hend - h] = '\0';
    a->port = ENR_STORE_PORT_DEFAULT;
    if (p < end) {
        if (*p != ':' || number(p + 1, end, 1, 65535, &a->port) != 0)
            return bad(why, whylen, "a port is :1 to :65535");
    }
    a->db = 0;
    if (slash && slash[1] != '\0' &&
        number(slash + 1, slash + strlen(slash), 0, ENR_STORE_DB_MAX, &a->db) != 0)
        return bad(why, whylen, "the database is /0 to /15");
    return 0;
}

int enr_store_addr_parse(const char *s, enr_store_addr *a, char *why, size_t whylen)
{
    memset(a, 0, sizeof *a);
    if (strncmp(s, "unix:", 5) == 0) {
        const char *path = s + 5;
        if (path[0] != '/')
            return bad(why, whylen, "unix:PATH needs an absolute path");
        if (strlen(path) > ENR_STORE_PATH_MAX)
            return bad(why, whylen, "the socket's path is over 107 bytes");
        a->is_unix = 1;
        snprintf(a->path, sizeof a->path, "%s", path);
        return 0;
    }
    if (strncmp(s, "redis://", 8) == 0) {
        if (strchr(s + 8, '@') != NULL)
            return bad(why, whylen,
                       "no user or password in the address: shared_store_user and "
                       "shared_store_password_file");
        return parse_tcp(s + 8, a, why, whylen);
    }
    if (strncmp(s, "rediss://", 9) == 0)
        return bad(why, whylen,
                   "no TLS in Debian 12's hiredis: a private network or a tunnel "
                   "(docs/fleet.md)");
    return bad(why, whylen, "redis://HOST:PORT/DB or unix:PATH");
}

int enr_store_prefix_ok(const char *p)
{
    size_t n = strlen(p);

    if (n == 0 || n > ENR_STORE_PREFIX_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (!host_byte_ok(ch))
            return 0;
    }
    return 1;
}

int enr_config_store_check(const enr_config *c, const char **key, char *why, size_t whylen)
{
    enr_store_addr a;

    if (c->shared_store[0] != '\0' && enr_store_addr_parse(c->shared_store, &a, why, whylen) != 0) {
        *key = "shared_store";
        return -1;
    }
    if (!enr_store_prefix_ok(c->shared_store_prefix)) {
        *key = "shared_store_prefix";
        snprintf(why, whylen, "1 to %d bytes of letters, digits and \":_.-\"",
                 ENR_STORE_PREFIX_MAX);
        return -1;
    }
    if (c->shared_store_user[0] == '\0' || strpbrk(c->shared_store_user, " \t\r\n") != NULL) {
        *key = "shared_store_user";
        snprintf(why, whylen, "a Redis ACL user name, without white space");
        return -1;
    }
    if (c->shared_store_password_file[0] != '\0' &&
        c->shared_store_password_credential[0] != '\0') {
        *key = "shared_store_password_credential";
        snprintf(why, whylen,
                 "set shared_store_password_file or shared_store_password_credential, not both");
        return -1;
    }
    return 0;
}
