/*
 * upconn_int.h: the state of one worker's connections (upconn.h),
 * shared by the two files that keep them and nobody else: upconn.c (the
 * multi handle, sockets, TLS, the transfer loop) and upwarm.c (the
 * connections opened ahead of batches).  upconn.h is the public face;
 * this header sits below it (the files include both, upconn.h first), so
 * it names the connections by their tag.
 *
 * Invariants: an origin's fds counts the sockets open to it now (every
 * one opened and closed through upconn.c's callbacks); warms holds
 * nwarm warm-up handles, an origin's nslots of them, of which at most
 * its nwarm (its target) run or are kept at once.
 */
#ifndef ENR_UPCONN_INT_H
#define ENR_UPCONN_INT_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "base/config.h"
#include "upstream/api.h"
#include "upstream/curlapi.h"

typedef struct enr_upwarm {
    CURL *easy;
    int running;
    int src;     /* the origin it warms */
    int as_head; /* set up as a HEAD of the origin's root (an API over HTTP/1.1) */
    char errbuf[CURL_ERROR_SIZE];
} enr_upwarm;

/* One source's connections, and the waves of warm-ups that keep them. */
typedef struct enr_uporigin {
    struct enr_upconn *p;
    int head_warmed;   /* its source's row says so (api.h): HTTP/1.1, warmed by HEADs of
                        * warm_url; 0: an API's, HTTP/2 where offered, handshakes alone */
    unsigned fds;      /* sockets open to this origin now */
    unsigned nwarm;    /* the connections kept open ahead of batches */
    unsigned nslots;   /* warm-up handles of this origin (its HTTP/1.1 target) */
    int h1;            /* an API that answered over HTTP/1.1: one connection a call */
    char *root;        /* an API's origin root, what its HTTP/1.1 warm-up asks (HEAD) */
    unsigned running;  /* warm-ups of the wave running */
    unsigned wave_fds; /* connections open when the running wave started */
    int wave_failed;
    uint64_t warmups;
    uint64_t next_ms;
    unsigned backoff_ms;
} enr_uporigin;

struct enr_upconn {
    CURLM *multi;
    CURLSH *share;
    int ep, tfd;
    unsigned fds;
    const enr_config *cfg;
    struct curl_slist *headers;
    char *warm_url;
    char ca_file[PATH_MAX]; /* the one file of CAs trusted, or "": the CA directory */
    char host[256];         /* for messages: the name the certificate must carry */
    int https;
    int global_init;

    enr_uporigin org[ENR_API_COUNT];
    enr_upwarm *warms;
    unsigned nwarm;
    uint64_t tls_logged_ms;
    unsigned tls_suppressed;
};

/* upwarm.c: the warm-up handles of every origin in use, made once the
 * multi handle and the share exist (0, or -1 with the reason in err),
 * and freed before them. */
int enr_upconn_warm_init(struct enr_upconn *p, const enr_config *c, char *err, size_t errlen);
void enr_upconn_warm_free(struct enr_upconn *p);

/* A transfer the loop saw end: 1 when it was a warm-up (handled), 0 when
 * it is the caller's. */
int enr_upconn_warm_ended(struct enr_upconn *p, CURL *e, CURLcode rc);

#endif
