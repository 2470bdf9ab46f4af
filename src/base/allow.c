/*
 * allow.c: parsing and matching of `listen_allow` (allow.h).
 *
 * Invariants: a parsed entry never has bits set past its prefix (the
 * parser refuses "10.0.0.1/8" instead of guessing what was meant), so a
 * match is a plain prefix comparison; matching reads only the list and
 * the address, so it is safe on every accept.  Every entry the parser
 * accepts can match some TCP peer: an IPv4-mapped IPv6 peer is compared
 * as the IPv4 address it carries (and with any IPv6 entry that holds the
 * whole mapped range, such as ::/0), so an entry inside that range is
 * refused with its IPv4 spelling, and so are the unspecified address and
 * multicast and broadcast networks, which are never the source of a
 * connection.
 */
#include "base/allow.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ENTRY_MAX 64   /* longer than any IPv6 address with a prefix */
#define MAPPED_BITS 96 /* ::ffff:0:0/96, the IPv4-mapped IPv6 range */

static const uint8_t mapped_prefix[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

static int is_sep(char ch)
{
    return ch == ',' || ch == ' ' || ch == '\t';
}

static int prefix_equal(const uint8_t *a, const uint8_t *b, unsigned bits)
{
    unsigned whole = bits / 8, rest = bits % 8;

    if (memcmp(a, b, whole) != 0)
        return 0;
    if (rest == 0)
        return 1;
    return ((a[whole] ^ b[whole]) & (uint8_t)(0xffu << (8 - rest))) == 0;
}

/* Entries no TCP peer can ever match, or "" for one that some peer can. */
static const char *never_matches(const enr_allow_net *net, char *hint, size_t hintlen)
{
    const uint8_t *a = net->addr;
    unsigned max = net->family == AF_INET ? 32 : 128;
    static const uint8_t zero[16];

    hint[0] = '\0';
    if (net->prefix == max && memcmp(a, zero, max / 8) == 0)
        return "is the unspecified address, never a peer's";
    if (net->family == AF_INET) {
        if (net->prefix >= 4 && (a[0] & 0xf0) == 0xe0)
            return "is multicast, never a TCP peer";
        if (net->prefix == 32 && memcmp(a, "\xff\xff\xff\xff", 4) == 0)
            return "is the broadcast address, never a TCP peer";
        return "";
    }
    if (net->prefix >= 8 && a[0] == 0xff)
        return "is multicast, never a TCP peer";
    if (net->prefix > MAPPED_BITS && prefix_equal(a, mapped_prefix, MAPPED_BITS)) {
        char v4[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, a + 12, v4, sizeof v4);
        if (net->prefix == 128)
            snprintf(hint, hintlen, " (write %s)", v4);
        else
            snprintf(hint, hintlen, " (write %s/%u)", v4, (unsigned)net->prefix - MAPPED_BITS);
        return "is IPv4-mapped: such peers are matched as IPv4 addresses";
    }
    return "";
}

static int parse_entry(const char *s, enr_allow_net *net, char *why, size_t whylen)
{
    char addr[ENTRY_MAX];
    const char *slash = strchr(s, '/');
    size_t alen = slash ? (size_t)(slash - s) : strlen(s);
    unsigned max, bits;

    if (alen == 0 || alen >= sizeof addr) {
        snprintf(why, whylen, "\"%s\" is not an address or CIDR", s);
        return -1;
    }
    memcpy(addr, s, alen);
    addr[alen] = '\0';
    memset(net, 0, sizeof *net);
    if (inet_pton(AF_INET, addr, net->addr) == 1) {
        net->family = AF_INET;
        max = 32;
    } else if (inet_pton(AF_INET6, addr, net->addr) == 1) {
        net->family = AF_INET6;
        max = 128;
    } else {
        snprintf(why, whylen, "\"%s\" is not an IPv4 or IPv6 address", addr);
        return -1;
    }
    bits = max;
    if (slash != NULL) {
        char *end;
        unsigned long v;
        /* Digits only: strtoul would also take a sign or white space. */
        if (slash[1] < '0' || slash[1] > '9') {
            snprintf(why, whylen, "\"%s\": prefix is not a number", s);
            return -1;
        }
        v = strtoul(slash + 1, &end, 10);
        if (*end != '\0' || v > max) {
            snprintf(why, whylen, "\"%s\": prefix must be 0..%u", s, max);
            return -1;
        }
        bits = (unsigned)v;
    }
    net->prefix = (uint8_t)bits;
    for (unsigned i = bits; i < max; i++) {
        if (net->addr[i / 8] & (0x80u >> (i % 8))) {
            snprintf(why, whylen, "\"%s\" has bits set past /%u (a network is its first address)",
                     s, bits);
            return -1;
        }
    }
    {
        char hint[48];
        const char *never = never_matches(net, hint, sizeof hint);
        if (never[0] != '\0') {
            snprintf(why, whylen, "\"%s\" %s%s", s, never, hint);
            return -1;
        }
    }
    return 0;
}

int enr_allow_parse(const char *text, enr_allow *out, char *why, size_t whylen)
{
    const char *p = text;

    memset(out, 0, sizeof *out);
    for (;;) {
        char entry[ENTRY_MAX];
        size_t n = 0;

        while (is_sep(*p))
            p++;
        if (*p == '\0')
            break;
        while (p[n] != '\0' && !is_sep(p[n]))
            n++;
        if (n >= sizeof entry) {
            snprintf(why, whylen, "entry \"%.*s...\" is too long", 20, p);
            return -1;
        }
        memcpy(entry, p, n);
        entry[n] = '\0';
        p += n;
        if (out->n == ENR_ALLOW_MAX) {
            snprintf(why, whylen, "more than %d entries", ENR_ALLOW_MAX);
            return -1;
        }
        if (parse_entry(entry, &out->net[out->n], why, whylen) != 0)
            return -1;
        out->n++;
    }
    if (out->n == 0) {
        /* An empty list would refuse every TCP peer, nginx included. */
        snprintf(why, whylen, "empty (name at least one address, e.g. 127.0.0.1)");
        return -1;
    }
    return 0;
}

int enr_allow_match(const enr_allow *a, const struct sockaddr *sa, socklen_t len)
{
    uint8_t addr[16];
    int family, mapped = 0;

    if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        family = AF_INET;
        memcpy(addr, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        const struct in6_addr *in6 = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(in6)) {
            mapped = 1;
            family = AF_INET;
            memcpy(addr, in6->s6_addr + 12, 4);
        } else {
            family = AF_INET6;
            memcpy(addr, in6->s6_addr, 16);
        }
    } else {
        return 0;
    }
    for (unsigned i = 0; i < a->n && i < ENR_ALLOW_MAX; i++) {
        const enr_allow_net *n = &a->net[i];
        if (n->family == family && prefix_equal(n->addr, addr, n->prefix))
            return 1;
        /* A dual-stack listener's IPv4 peer, under an IPv6 entry that
         * holds every mapped address (::/0, ::ffff:0:0/96). */
        if (mapped && n->family == AF_INET6 && n->prefix <= MAPPED_BITS &&
            prefix_equal(n->addr, mapped_prefix, n->prefix))
            return 1;
    }
    return 0;
}
