/*
 * allow.h: the list of peers a TCP listening socket accepts
 * (`listen_allow`): IPv4 and IPv6 addresses and CIDR networks.
 *
 * The list is parsed once by the configuration reader (so `enrichd -t`
 * and a HUP refuse a bad value with the same words) and matched by each
 * worker on every accepted TCP connection before a byte is read.  A
 * parsed list is plain data inside enr_config: it is copied with it and
 * never allocates.
 */
#ifndef ENR_ALLOW_H
#define ENR_ALLOW_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define ENR_ALLOW_MAX 32 /* entries in one list: a longer one is a mistake */

typedef struct enr_allow_net {
    uint8_t family; /* AF_INET or AF_INET6 */
    uint8_t prefix; /* significant leading bits of addr */
    uint8_t addr[16];
} enr_allow_net;

typedef struct enr_allow {
    unsigned n;
    enr_allow_net net[ENR_ALLOW_MAX];
} enr_allow;

/* Parses "ADDR[/BITS]" entries separated by commas and/or white space
 * into out.  Returns 0, or -1 with the problem in why (out is then
 * undefined).  An empty list, host bits set past the prefix, a prefix
 * out of range, more than ENR_ALLOW_MAX entries and an entry no TCP peer
 * can match (the unspecified address, multicast, broadcast, an
 * IPv4-mapped IPv6 network: the problem names its IPv4 spelling) are
 * errors. */
int enr_allow_parse(const char *text, enr_allow *out, char *why, size_t whylen);

/* 1 when the peer address sa is in the list; 0 otherwise, and for any
 * other family than AF_INET and AF_INET6.  An IPv4-mapped IPv6 peer (an
 * IPv4 client of a dual-stack listener) matches the IPv4 entries that
 * hold its IPv4 address, and the IPv6 entries that hold the whole mapped
 * range ::ffff:0:0/96 (::/0 among them). */
int enr_allow_match(const enr_allow *a, const struct sockaddr *sa, socklen_t len);

#endif
