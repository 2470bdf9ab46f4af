/*
 * storeaddr.h: where the fleet's shared store is (shared_store), parsed
 * once by one pure function that the configuration's check and the
 * store's client both call, so -t refuses what a worker could not use.
 *
 *   redis://HOST:PORT/DB   HOST an IPv4 address, [IPv6] or a name;
 *                          PORT 1..65535 (6379 when left out); DB 0..15
 *                          (0 when left out)
 *   unix:PATH              an absolute path that fits a sockaddr_un
 *
 * Nothing else: no user or password in the address (they have their own
 * keys, the password a secret), no query, no TLS scheme (hiredis 0.14 has
 * none: docs/fleet.md).
 */
#ifndef ENR_STOREADDR_H
#define ENR_STOREADDR_H

#include <stddef.h>

#define ENR_STORE_HOST_MAX 255
#define ENR_STORE_PATH_MAX 107 /* sockaddr_un's sun_path, its NUL left out */
#define ENR_STORE_DB_MAX 15    /* Redis's default "databases 16" */
#define ENR_STORE_PORT_DEFAULT 6379

typedef struct enr_store_addr {
    int is_unix;
    char host[ENR_STORE_HOST_MAX + 1]; /* without IPv6's brackets */
    char path[ENR_STORE_PATH_MAX + 1];
    int port, db;
} enr_store_addr;

/* 0 and *a filled, or -1 and why. */
int enr_store_addr_parse(const char *s, enr_store_addr *a, char *why, size_t whylen);

/* A prefix the keys may start with: 1..ENR_STORE_PREFIX_MAX bytes of
 * letters, digits and ":_.-" (no space, no byte a Redis client would
 * need to quote), or 0. */
int enr_store_prefix_ok(const char *p);

#endif
