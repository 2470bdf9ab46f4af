/*
 * upconn.c: the connections of one worker to the upstream (upconn.h).
 *
 * libcurl keeps the connections in the multi handle's cache; this file
 * decides how they are made and watched.  Every socket goes through
 * up_opensocket()/up_closesocket(), so the worker knows how many it holds
 * (checked against /proc in the tests).  curl's interest in its sockets
 * and its timer are mirrored into one epoll set (a timerfd for the
 * timer), driven with curl_multi_socket_action(): the same loop serves a
 * batch waiting for its calls and an idle worker finishing what a batch
 * left behind.
 *
 * TLS: verification of the chain and of the host name is always on (no
 * key turns it off), TLS 1.2 at least, the CA store parsed once per
 * worker (curl's CA cache in the multi handle: trust_setup() says why it
 * needs one file and no directory) and sessions resumed across
 * reconnects (a share object holding the session cache).
 *
 * Warm connections (made ahead of batches, over HTTP/2 or HTTP/1.1 as
 * each API speaks) are upwarm.c's; the state both files keep is
 * upconn_int.h.
 *
 * Each origin (a source in use) counts its own sockets: a socket's
 * callbacks carry its origin, set on a transfer before it starts, and
 * curl closes a connection with the callbacks of the transfer that made
 * it.
 */
#include "upstream/upconn.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/secret.h"
#include "upstream/api.h"
#include "upstream/upconn_int.h"

/* Idle connections older than this are not reused: below the idle
 * timeouts of the NAT gateways a path may cross (350 s and more), which
 * drop a connection without a word.  A server that closes an idle
 * connection sooner says so (FIN), and curl checks for that before reuse. */
#define UPCONN_MAXAGE_S 300L
#define UPCONN_LIFETIME_S 600L  /* no connection is reused past this age */
#define UPCONN_CA_CACHE_S 3600L /* the parsed CA store is kept this long */
#define UPCONN_LOG_GAP_MS 10000 /* one TLS explanation per this long */
#define UPCONN_EVENTS 16

/* ---- descriptors ---- */

static curl_socket_t up_opensocket(void *clientp, curlsocktype purpose, struct curl_sockaddr *a)
{
    enr_uporigin *o = clientp;
    int fd;

    (void)purpose;
    fd = socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
    if (fd < 0)
        return CURL_SOCKET_BAD; /* curl reports it as a connect failure */
    o->fds++;
    o->p->fds++;
    return fd;
}

static int up_closesocket(void *clientp, curl_socket_t fd)
{
    enr_uporigin *o = clientp;

    /* Every socket curl closes here was opened here, by its origin. */
    if (o->fds > 0)
        o->fds--;
    if (o->p->fds > 0)
        o->p->fds--;
    return close(fd);
}

/* ---- curl's interest, mirrored into the epoll set ---- */

static int up_socket(CURL *e, curl_socket_t s, int what, void *userp, void *socketp)
{
    enr_upconn *p = userp;
    struct epoll_event ev = {.data.fd = s};

    (void)e;
    (void)socketp;
    if (what == CURL_POLL_REMOVE) {
        /* The socket may be closed already, which removed it. */
        (void)epoll_ctl(p->ep, EPOLL_CTL_DEL, s, NULL);
        return 0;
    }
    ev.events = ((what & CURL_POLL_IN) ? EPOLLIN : 0) | ((what & CURL_POLL_OUT) ? EPOLLOUT : 0);
    if (epoll_ctl(p->ep, EPOLL_CTL_MOD, s, &ev) != 0 &&
        (errno != ENOENT || epoll_ctl(p->ep, EPOLL_CTL_ADD, s, &ev) != 0)) {
        enr_log(ENR_LOG_ERROR, "upstream: epoll_ctl failed", "error=%s", enr_log_errno(errno));
        return -1;
    }
    return 0;
}

static int up_timer(CURLM *m, long timeout_ms, void *userp)
{
    enr_upconn *p = userp;
    struct itimerspec it;

    (void)m;
    memset(&it, 0, sizeof it);
    if (timeout_ms >= 0) {
        /* An all-zero value disarms a timerfd: "now" is one nanosecond. */
        it.it_value.tv_sec = timeout_ms / 1000;
        it.it_value.tv_nsec = (timeout_ms % 1000) * 1000000L;
        if (timeout_ms == 0)
            it.it_value.tv_nsec = 1;
    }
    if (timerfd_settime(p->tfd, 0, &it, NULL) != 0) {
        enr_log(ENR_LOG_ERROR, "upstream: timerfd_settime failed", "error=%s",
                enr_log_errno(errno));
        return -1;
    }
    return 0;
}

/* ---- set-up ---- */

int enr_upconn_easy(enr_upconn *p, CURL *e)
{
    const enr_config *c = p->cfg;

    /* Every option is checked: a silently ignored option is how a client
     * ends up unbounded, or unverified. */
    if (curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_PROXY, "") != CURLE_OK || /* ignore *_proxy env */
        curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, p->headers) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, up_opensocket) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, &p->org[ENR_API_UPSTREAM]) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, up_closesocket) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_CLOSESOCKETDATA, &p->org[ENR_API_UPSTREAM]) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_MAXCONNECTS, (long)c->upstream_max_connections) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_MAXAGE_CONN, UPCONN_MAXAGE_S) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_MAXLIFETIME_CONN, UPCONN_LIFETIME_S) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)c->upstream_connect_timeout_ms) !=
            CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_SHARE, p->share) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_CA_CACHE_TIMEOUT, UPCONN_CA_CACHE_S) != CURLE_OK)
        return -1;
    /* The chain is kept only to say whom a refused certificate was for. */
    if (p->https && curl_easy_setopt(e, CURLOPT_CERTINFO, 1L) != CURLE_OK)
        return -1;
    /* One file of CAs (trust_setup()), or with none readable the
     * directory alone: libcurl refuses every handshake when its default
     * file is missing, even with the directory full. */
    if (p->https &&
        (curl_easy_setopt(e, CURLOPT_CAINFO, p->ca_file[0] ? p->ca_file : NULL) != CURLE_OK ||
         (p->ca_file[0] && curl_easy_setopt(e, CURLOPT_CAPATH, NULL) != CURLE_OK)))
        return -1;
    if (c->upstream_client_cert[0] &&
        (curl_easy_setopt(e, CURLOPT_SSLCERT, c->upstream_client_cert) != CURLE_OK ||
         curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM") != CURLE_OK ||
         curl_easy_setopt(e, CURLOPT_SSLKEY, c->upstream_client_key) != CURLE_OK ||
         curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM") != CURLE_OK))
        return -1;
    /* libcurl resolves names in a thread; removing a transfer whose lookup
     * is still running would wait for that lookup (seconds, with a stalled
     * resolver), past the batch deadline.  QUICK_EXIT lets the thread go
     * (it ends, and frees itself, when the lookup returns).  Without it
     * (libcurl older than 7.87) a name can stall a batch: docs/upstream.md. */
    if (curl_easy_setopt(e, CURLOPT_QUICK_EXIT, 1L) != CURLE_OK)
        enr_log(ENR_LOG_WARN, "upstream: libcurl without CURLOPT_QUICK_EXIT",
                "effect=\"a stalled DNS lookup can hold a batch past its deadline\"");
    return 0;
}

int enr_upconn_source(enr_upconn *p, CURL *e, int src)
{
    enr_uporigin *o = &p->org[src];
    int api = !o->head_warmed;

    return curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, o) != CURLE_OK ||
                   curl_easy_setopt(e, CURLOPT_CLOSESOCKETDATA, o) != CURLE_OK ||
                   curl_easy_setopt(e, CURLOPT_HTTP_VERSION,
                                    api ? (long)CURL_HTTP_VERSION_2TLS
                                        : (long)CURL_HTTP_VERSION_1_1) != CURLE_OK ||
                   curl_easy_setopt(e, CURLOPT_PIPEWAIT, api ? 1L : 0L) != CURLE_OK
               ? -1
               : 0;
}

static void url_host(enr_upconn *p, const char *url)
{
    CURLU *h = curl_url();
    char *host = NULL;

    snprintf(p->host, sizeof p->host, "?");
    if (h == NULL)
        return;
    if (curl_url_set(h, CURLUPART_URL, url, 0) == CURLUE_OK &&
        curl_url_get(h, CURLUPART_HOST, &host, 0) == CURLUE_OK) {
        snprintf(p->host, sizeof p->host, "%s", host);
        curl_free(host);
    }
    curl_url_cleanup(h);
}

/* The sources in use, each its own origin: upstream_max_connections each. */
static long origins(const enr_config *c)
{
    long n = 0;
    int seen[ENR_API_COUNT] = {0};

    for (int p = 1; p < ENR_SOURCE_PROVIDERS; p++) {
        int a = c->sources[p];
        if (a < 0 || a >= ENR_API_COUNT || seen[a])
            continue;
        seen[a] = 1;
        n++;
    }
    return n > 0 ? n : 1;
}

/* The origin TLS messages name: the aggregator's, else the first API's. */
static const char *origin_url(const enr_config *c)
{
    if (c->upstream_url[0] != '\0')
        return c->upstream_url;
    for (int p = 1; p < ENR_SOURCE_PROVIDERS; p++)
        if (c->sources[p] >= 0)
            return enr_config_source_url(c, c->sources[p]);
    return "";
}

/* The CAs trusted, as one file.  curl keeps the parsed store in the
 * multi handle only when it comes from a file alone, no CA directory
 * beside it; Debian's libcurl is built with both (its bundle and
 * /etc/ssl/certs), so with the defaults every handshake parsed the whole
 * bundle again: 140-odd certificates, 30 ms of CPU a connection.  And with
 * upstream_ca_file set, the directory kept the system's CAs trusted
 * beside it, which is not what the key says.  So: upstream_ca_file and
 * nothing else; unset, libcurl's default bundle alone (the certificates
 * of the directory, one file: update-ca-certificates writes both) when
 * it can be read; else the directory alone, uncached. */
static int trust_setup(enr_upconn *p, const enr_config *c)
{
    char dir[PATH_MAX];

    if (c->upstream_ca_file[0] != '\0') {
        snprintf(p->ca_file, sizeof p->ca_file, "%s", c->upstream_ca_file);
        return 0;
    }
    if (enr_curl_ca_defaults(p->ca_file, sizeof p->ca_file, dir, sizeof dir) != 0)
        return -1;
    if (access(p->ca_file, R_OK) != 0)
        p->ca_file[0] = '\0';
    return 0;
}

enr_upconn *enr_upconn_new(const enr_config *c, struct curl_slist *headers, const char *warm_url,
                           char *err, size_t errlen)
{
    enr_upconn *p = calloc(1, sizeof *p);
    long maxconn = (long)c->upstream_max_connections;
    long norigins = origins(c);

    if (p == NULL) {
        snprintf(err, errlen, "upstream: out of memory");
        return NULL;
    }
    p->ep = p->tfd = -1;
    p->cfg = c;
    for (int src = 0; src < ENR_API_COUNT; src++) {
        p->org[src].p = p;
        p->org[src].head_warmed = enr_api_get(src)->head_warmed;
    }
    p->headers = headers;
    p->warm_url = warm_url ? strdup(warm_url) : NULL;
    if (warm_url != NULL && p->warm_url == NULL) {
        snprintf(err, errlen, "upstream: out of memory");
        goto fail;
    }
    p->https = enr_config_any_https(c);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(err, errlen, "upstream: curl_global_init failed");
        goto fail;
    }
    p->global_init = 1;
    if (p->https && trust_setup(p, c) != 0) {
        snprintf(err, errlen, "upstream: libcurl could not be asked for its CA store");
        goto fail;
    }
    url_host(p, origin_url(c));
    p->ep = epoll_create1(EPOLL_CLOEXEC);
    p->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (p->ep < 0 || p->tfd < 0) {
        snprintf(err, errlen, "upstream: epoll/timerfd: %s", strerror(errno));
        goto fail;
    }
    {
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = p->tfd};
        if (epoll_ctl(p->ep, EPOLL_CTL_ADD, p->tfd, &ev) != 0) {
            snprintf(err, errlen, "upstream: epoll_ctl: %s", strerror(errno));
            goto fail;
        }
    }
    p->multi = curl_multi_init();
    p->share = curl_share_init();
    if (p->multi == NULL || p->share == NULL) {
        snprintf(err, errlen, "upstream: out of memory");
        goto fail;
    }
    /* One process, one thread: the share needs no lock functions. */
    if (curl_share_setopt(p->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION) != CURLSHE_OK ||
        curl_multi_setopt(p->multi, CURLMOPT_MAXCONNECTS, maxconn * norigins) != CURLM_OK ||
        curl_multi_setopt(p->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, maxconn * norigins) !=
            CURLM_OK ||
        curl_multi_setopt(p->multi, CURLMOPT_MAX_HOST_CONNECTIONS, maxconn) != CURLM_OK ||
        curl_multi_setopt(p->multi, CURLMOPT_SOCKETFUNCTION, up_socket) != CURLM_OK ||
        curl_multi_setopt(p->multi, CURLMOPT_SOCKETDATA, p) != CURLM_OK ||
        curl_multi_setopt(p->multi, CURLMOPT_TIMERFUNCTION, up_timer) != CURLM_OK ||
        curl_multi_setopt(p->multi, CURLMOPT_TIMERDATA, p) != CURLM_OK) {
        snprintf(err, errlen, "upstream: curl_multi_setopt failed");
        goto fail;
    }
    if (enr_upconn_warm_init(p, c, err, errlen) != 0)
        goto fail;
    return p;
fail:
    enr_upconn_free(p);
    return NULL;
}

void enr_upconn_free(enr_upconn *p)
{
    if (p == NULL)
        return;
    enr_upconn_warm_free(p);
    /* Closes the cached connections through up_closesocket, so p must
     * still be alive here; the easy handles that used the share are gone. */
    if (p->multi)
        curl_multi_cleanup(p->multi);
    if (p->share)
        curl_share_cleanup(p->share);
    if (p->tfd >= 0)
        close(p->tfd);
    if (p->ep >= 0)
        close(p->ep);
    if (p->global_init)
        curl_global_cleanup();
    if (p->warm_url != NULL)
        enr_secret_wipe(p->warm_url, strlen(p->warm_url));
    free(p->warm_url);
    free(p);
}

/* curl is about to write the request: the connection is set up. */
static int request_begins(void *ud, char *ip, char *local_ip, int port, int local_port)
{
    (void)ip;
    (void)local_ip;
    (void)port;
    (void)local_port;
    *(int *)ud = 1;
    return CURL_PREREQFUNC_OK;
}

int enr_upconn_track_request(CURL *e, int *began)
{
    *began = 0;
    return curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, request_begins) != CURLE_OK ||
                   curl_easy_setopt(e, CURLOPT_PREREQDATA, began) != CURLE_OK
               ? -1
               : 0;
}

int enr_upconn_request_left(CURL *e, int began)
{
    long sent = 0;

    /* The request size alone may be the previous transfer's until this
     * one has started. */
    return began && curl_easy_getinfo(e, CURLINFO_REQUEST_SIZE, &sent) == CURLE_OK && sent > 0;
}

int enr_upconn_add(enr_upconn *p, CURL *e)
{
    return curl_multi_add_handle(p->multi, e) == CURLM_OK ? 0 : -1;
}

void enr_upconn_remove(enr_upconn *p, CURL *e)
{
    curl_multi_remove_handle(p->multi, e);
}

int enr_upconn_fd(const enr_upconn *p)
{
    return p->ep;
}

unsigned enr_upconn_fds(const enr_upconn *p)
{
    return p->fds;
}

uint64_t enr_upconn_warmups(const enr_upconn *p, int src)
{
    return p->org[src].warmups;
}

/* ---- failures, in the words an operator acts on ---- */

int enr_upconn_fail_kind(CURLcode rc)
{
    switch (rc) {
    case CURLE_OPERATION_TIMEDOUT:
        return ENR_UP_F_TIMEOUT;
    case CURLE_PARTIAL_FILE:
    case CURLE_WRITE_ERROR:
    case CURLE_BAD_CONTENT_ENCODING:
    case CURLE_WEIRD_SERVER_REPLY:
        return ENR_UP_F_BODY;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_SSL_CLIENTCERT:
    case CURLE_USE_SSL_FAILED:
        return ENR_UP_F_TLS;
    default:
        return ENR_UP_F_CONNECT;
    }
}

/* X509_V_ERR_* codes (openssl/x509_vfy.h), as an operator reads them. */
static const char *verify_words(long v)
{
    switch (v) {
    case 2:  /* unable to get issuer certificate */
    case 20: /* unable to get local issuer certificate */
    case 21: /* unable to verify the first certificate */
        return "certificate not trusted (its issuer is not in the CA store)";
    case 18: /* self-signed certificate */
    case 19: /* self-signed certificate in chain */
        return "certificate not trusted (self-signed)";
    case 9:
        return "certificate not yet valid";
    case 10:
        return "certificate expired";
    case 23:
        return "certificate revoked";
    case 26: /* invalid purpose */
        return "certificate not for a TLS server";
    default:
        return "certificate not trusted";
    }
}

/* The names the server's certificate is for, from curl's copy of the
 * chain: its subjectAltName DNS/IP entries, else its subject. */
static void cert_names(CURL *e, char *out, size_t outlen)
{
    static const char san[] = "X509v3 Subject Alternative Name:";
    static const char subj[] = "Subject:";
    struct curl_certinfo *ci = NULL;

    snprintf(out, outlen, "?");
    if (curl_easy_getinfo(e, CURLINFO_CERTINFO, &ci) != CURLE_OK || ci == NULL ||
        ci->num_of_certs < 1)
        return;
    for (const struct curl_slist *s = ci->certinfo[0]; s; s = s->next)
        if (strncmp(s->data, subj, sizeof subj - 1) == 0)
            snprintf(out, outlen, "%s", s->data + sizeof subj - 1);
    for (const struct curl_slist *s = ci->certinfo[0]; s; s = s->next) {
        const char *v;
        size_t o = 0;
        if (strncmp(s->data, san, sizeof san - 1) != 0)
            continue;
        /* "DNS:a.example, IP Address:127.0.0.1" -> "a.example, 127.0.0.1" */
        for (v = s->data + sizeof san - 1; *v && o + 1 < outlen; v++) {
            if (strncmp(v, "DNS:", 4) == 0)
                v += 3;
            else if (strncmp(v, "IP Address:", 11) == 0)
                v += 10;
            else
                out[o++] = *v;
        }
        out[o] = '\0';
        return;
    }
}

void enr_upconn_explain(enr_upconn *p, CURL *e, CURLcode rc, const char *errbuf)
{
    char reason[640], names[256], q[CURL_ERROR_SIZE + 8], qreason[700], qhost[300];
    uint64_t now = enr_mono_ms();
    long vr = 0;

    if (enr_upconn_fail_kind(rc) != ENR_UP_F_TLS)
        return;
    /* One line a while: a provider with a bad certificate fails every
     * call, and the counters tell how many. */
    if (p->tls_logged_ms != 0 && now - p->tls_logged_ms < UPCONN_LOG_GAP_MS) {
        p->tls_suppressed++;
        return;
    }
    p->tls_logged_ms = now;
    (void)curl_easy_getinfo(e, CURLINFO_SSL_VERIFYRESULT, &vr);
    switch (rc) {
    case CURLE_PEER_FAILED_VERIFICATION:
        /* A name mismatch comes as X509_V_ERR_HOSTNAME_MISMATCH (62) or as
         * curl's own check of the names after a good chain (0). */
        if (vr != 0 && vr != 62 && strstr(errbuf, "host name") == NULL) {
            snprintf(reason, sizeof reason, "%s", verify_words(vr));
        } else {
            cert_names(e, names, sizeof names);
            snprintf(reason, sizeof reason, "certificate is for %s, not %s", names, p->host);
        }
        break;
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CLIENTCERT:
        snprintf(reason, sizeof reason, "client certificate or key refused");
        break;
    case CURLE_SSL_CACERT_BADFILE:
        /* Readable at start (-t, trust_setup()): it holds no PEM
         * certificate, or went away and curl's cache expired. */
        snprintf(reason, sizeof reason, "CA file %.512s unreadable or without a certificate",
                 p->ca_file[0] ? p->ca_file : "(none)");
        break;
    default:
        snprintf(reason, sizeof reason, "TLS handshake failed");
        break;
    }
    /* The certificate's names are the provider's words: quoted like any
     * value from outside, so a crafted name cannot forge a field or a line. */
    enr_log(ENR_LOG_WARN, "upstream TLS failed", "host=%s reason=%s error=%s suppressed=%u",
            enr_log_quote(qhost, sizeof qhost, p->host),
            enr_log_quote(qreason, sizeof qreason, reason), enr_log_quote(q, sizeof q, errbuf),
            p->tls_suppressed);
    p->tls_suppressed = 0;
}

/* ---- the loop ---- */

void enr_upconn_drive(enr_upconn *p, int wait_ms, enr_upconn_done_fn *done, void *ud)
{
    struct epoll_event ev[UPCONN_EVENTS];
    int n = epoll_wait(p->ep, ev, UPCONN_EVENTS, wait_ms), running, q;
    CURLMsg *m;

    if (n < 0 && errno != EINTR)
        enr_log(ENR_LOG_ERROR, "upstream: epoll_wait failed", "error=%s", enr_log_errno(errno));
    for (int i = 0; i < n; i++) {
        if (ev[i].data.fd == p->tfd) {
            uint64_t ticks;
            if (read(p->tfd, &ticks, sizeof ticks) < 0 && errno != EAGAIN)
                enr_log(ENR_LOG_ERROR, "upstream: timerfd read failed", "error=%s",
                        enr_log_errno(errno));
            curl_multi_socket_action(p->multi, CURL_SOCKET_TIMEOUT, 0, &running);
        } else {
            int fl = ((ev[i].events & EPOLLIN) ? CURL_CSELECT_IN : 0) |
                     ((ev[i].events & EPOLLOUT) ? CURL_CSELECT_OUT : 0) |
                     ((ev[i].events & (EPOLLERR | EPOLLHUP)) ? CURL_CSELECT_ERR : 0);
            curl_multi_socket_action(p->multi, ev[i].data.fd, fl, &running);
        }
    }
    while ((m = curl_multi_info_read(p->multi, &q)) != NULL) {
        if (m->msg != CURLMSG_DONE)
            continue;
        if (!enr_upconn_warm_ended(p, m->easy_handle, m->data.result))
            done(ud, m->easy_handle, m->data.result);
    }
}
