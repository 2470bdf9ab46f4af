/*
 * sockaddr.h: the text forms of the addresses enrichd listens on, parsed
 * once for the configuration check and for bind(), so what `enrichd -t`
 * accepts is exactly what the master can bind.
 *
 *   /abs/path          a unix socket
 *   A.B.C.D:PORT       TCP over IPv4
 *   [IPV6]:PORT        TCP over IPv6
 */
#ifndef ENR_SOCKADDR_H
#define ENR_SOCKADDR_H

#include <stddef.h>
#include <sys/socket.h>

typedef struct enr_sockaddr {
    struct sockaddr_storage ss;
    socklen_t len;
} enr_sockaddr;

/* Parses text into out: 0, or -1 with the reason in why. */
int enr_sockaddr_parse(const char *text, enr_sockaddr *out, char *why, size_t whylen);

/* 1 when the address is a loopback one (127.0.0.0/8, ::1). */
int enr_sockaddr_is_loopback(const enr_sockaddr *a);

#endif
