/*
 * sockaddr.c: listening addresses from text (sockaddr.h).
 *
 * Invariants: strict forms only (no host names: a listener resolved
 * through DNS at start would depend on the resolver, and on HUP could
 * change under a running pool); a port is 1..65535 in plain decimal; a
 * unix path is absolute and fits sun_path with its NUL.
 */
#include "base/sockaddr.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/un.h>

static int parse_port(const char *s, in_port_t *port)
{
    unsigned long v = 0;

    if (*s == '\0')
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > 65535)
            return -1;
        v = v * 10 + (unsigned long)(*s - '0');
    }
    if (v == 0 || v > 65535)
        return -1;
    *port = htons((in_port_t)v);
    return 0;
}

int enr_sockaddr_parse(const char *text, enr_sockaddr *out, char *why, size_t whylen)
{
    char host[INET6_ADDRSTRLEN + 1];
    const char *colon, *h = text;
    size_t hl;
    in_port_t port;

    memset(out, 0, sizeof *out);
    if (text[0] == '/') {
        struct sockaddr_un *sun = (struct sockaddr_un *)&out->ss;
        if (strlen(text) >= sizeof sun->sun_path) {
            snprintf(why, whylen, "unix socket path longer than %zu bytes",
                     sizeof sun->sun_path - 1);
            return -1;
        }
        sun->sun_family = AF_UNIX;
        memcpy(sun->sun_path, text, strlen(text) + 1);
        out->len = (socklen_t)sizeof *sun;
        return 0;
    }
    if (text[0] == '[') {
        const char *close = strchr(text, ']');
        if (close == NULL || close[1] != ':') {
            snprintf(why, whylen, "\"%s\": an IPv6 address is written [ADDR]:PORT", text);
            return -1;
        }
        h = text + 1;
        hl = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = strrchr(text, ':');
        if (colon == NULL) {
            snprintf(why, whylen, "\"%s\" is neither an absolute unix socket path nor ADDRESS:PORT",
                     text);
            return -1;
        }
        hl = (size_t)(colon - text);
    }
    if (parse_port(colon + 1, &port) != 0) {
        snprintf(why, whylen, "bad port in \"%s\" (1 to 65535)", text);
        return -1;
    }
    if (hl == 0 || hl >= sizeof host) {
        snprintf(why, whylen, "bad address in \"%s\"", text);
        return -1;
    }
    memcpy(host, h, hl);
    host[hl] = '\0';
    if (text[0] == '[') {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&out->ss;
        if (inet_pton(AF_INET6, host, &s6->sin6_addr) != 1) {
            snprintf(why, whylen, "\"%s\" is not an IPv6 address", host);
            return -1;
        }
        s6->sin6_family = AF_INET6;
        s6->sin6_port = port;
        out->len = (socklen_t)sizeof *s6;
    } else {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&out->ss;
        if (inet_pton(AF_INET, host, &s4->sin_addr) != 1) {
            snprintf(why, whylen, "\"%s\" is not an IPv4 address (host names are not resolved)",
                     host);
            return -1;
        }
        s4->sin_family = AF_INET;
        s4->sin_port = port;
        out->len = (socklen_t)sizeof *s4;
    }
    return 0;
}

int enr_sockaddr_is_loopback(const enr_sockaddr *a)
{
    if (a->ss.ss_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)&a->ss)->sin_addr.s_addr) >> 24) == 127;
    if (a->ss.ss_family == AF_INET6)
        return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)&a->ss)->sin6_addr);
    return 0;
}
