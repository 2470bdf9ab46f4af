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
 * worker (curl's CA cache in the multi handle) and sessions resumed
 * across reconnects (a share object holding the session cache).
 *
 * Warm connections: a connection costs TCP + TLS + the first request, a
 * batch's deadline covers one round trip.  So the worker opens its
 * connections ahead of batches, at start and whenever the upstream has
 * closed one (every N requests, in the incident this service exists
 * for), with a HEAD of the configured URL on a fresh connection; the
 * connection stays in curl's cache for the next batch.
 */
#include "upstream/upconn.h"

#include <errno.h>
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

/* Idle connections older than this are not reused: below the idle
 * timeouts of the NAT gateways a path may cross (350 s and more), which
 * drop a connection without a word.  A server that closes an idle
 * connection sooner says so (FIN), and curl checks for that before reuse. */
#define UPCONN_MAXAGE_S 300L
#define UPCONN_LIFETIME_S 600L  /* no connection is reused past this age */
#define UPCONN_CA_CACHE_S 3600L /* the parsed CA store is kept this long */
#define UPCONN_WARM_BACKOFF_MIN_MS 1000
#define UPCONN_WARM_BACKOFF_MAX_MS 30000
#define UPCONN_LOG_GAP_MS 10000 /* one TLS explanation per this long */
#define UPCONN_EVENTS 16

typedef struct warm {
    CURL *easy;
    int running;
    char errbuf[CURL_ERROR_SIZE];
} warm;

struct enr_upconn {
    CURLM *multi;
    CURLSH *share;
    int ep, tfd;
    unsigned fds;
    const enr_config *cfg;
    struct curl_slist *headers;
    char *warm_url;
    char host[256]; /* for messages: the name the certificate must carry */
    int https;
    int global_init;

    warm *warms;
    unsigned nwarm, warm_running;
    unsigned wave_fds; /* connections open when the running wave started */
    int wave_failed;
    uint64_t warmups;
    uint64_t warm_next_ms;
    unsigned warm_backoff_ms;
    uint64_t tls_logged_ms;
    unsigned tls_suppressed;
};

/* ---- descriptors ---- */

static curl_socket_t up_opensocket(void *clientp, curlsocktype purpose, struct curl_sockaddr *a)
{
    enr_upconn *p = clientp;
    int fd;

    (void)purpose;
    fd = socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
    if (fd < 0)
        return CURL_SOCKET_BAD; /* curl reports it as a connect failure */
    p->fds++;
    return fd;
}

static int up_closesocket(void *clientp, curl_socket_t fd)
{
    enr_upconn *p = clientp;

    if (p->fds > 0) /* every socket curl closes here was opened here */
        p->fds--;
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

static size_t discard(char *ptr, size_t size, size_t n, void *ud)
{
    (void)ptr;
    (void)ud;
    return size * n;
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
        curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, p) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, up_closesocket) != CURLE_OK ||
        curl_easy_setopt(e, CURLOPT_CLOSESOCKETDATA, p) != CURLE_OK ||
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
    if (c->upstream_ca_file[0] &&
        curl_easy_setopt(e, CURLOPT_CAINFO, c->upstream_ca_file) != CURLE_OK)
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

static int warm_setup(enr_upconn *p, warm *w)
{
    /* The whole warm-up, its request included, within the set-up bound
     * and one batch deadline. */
    long total = (long)p->cfg->upstream_connect_timeout_ms + (long)p->cfg->upstream_timeout_ms;

    w->easy = curl_easy_init();
    if (w->easy == NULL || enr_upconn_easy(p, w->easy) != 0)
        return -1;
    return curl_easy_setopt(w->easy, CURLOPT_URL, p->warm_url) != CURLE_OK ||
                   curl_easy_setopt(w->easy, CURLOPT_NOBODY, 1L) != CURLE_OK ||
                   curl_easy_setopt(w->easy, CURLOPT_FRESH_CONNECT, 1L) != CURLE_OK ||
                   curl_easy_setopt(w->easy, CURLOPT_TIMEOUT_MS, total) != CURLE_OK ||
                   curl_easy_setopt(w->easy, CURLOPT_WRITEFUNCTION, discard) != CURLE_OK ||
                   curl_easy_setopt(w->easy, CURLOPT_ERRORBUFFER, w->errbuf) != CURLE_OK
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
    p->nwarm = p->warm_url ? c->upstream_warm_connections : 0;
    if (p->nwarm) {
        p->warms = calloc(p->nwarm, sizeof *p->warms);
        if (p->warms == NULL) {
            snprintf(err, errlen, "upstream: out of memory");
            goto fail;
        }
        for (unsigned i = 0; i < p->nwarm; i++)
            if (warm_setup(p, &p->warms[i]) != 0) {
                snprintf(err, errlen, "upstream: curl_easy_setopt failed");
                goto fail;
            }
    }
    p->warm_backoff_ms = UPCONN_WARM_BACKOFF_MIN_MS;
    return p;
fail:
    enr_upconn_free(p);
    return NULL;
}

void enr_upconn_free(enr_upconn *p)
{
    if (p == NULL)
        return;
    for (unsigned i = 0; p->warms && i < p->nwarm; i++) {
        warm *w = &p->warms[i];
        if (w->easy == NULL)
            continue;
        if (w->running)
            curl_multi_remove_handle(p->multi, w->easy);
        curl_easy_cleanup(w->easy);
    }
    free(p->warms);
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

uint64_t enr_upconn_warmups(const enr_upconn *p)
{
    return p->warmups;
}

/* ---- failures, in the words an operator acts on ---- */

int enr_upconn_fail_kind(CURLcode rc)
{
    switch (rc) {
    case CURLE_OPERATION_TIMEDOUT:
        return ENR_UPCONN_TIMEOUT;
    case CURLE_PARTIAL_FILE:
    case CURLE_WRITE_ERROR:
    case CURLE_BAD_CONTENT_ENCODING:
    case CURLE_WEIRD_SERVER_REPLY:
        return ENR_UPCONN_BODY;
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
        return ENR_UPCONN_TLS;
    default:
        return ENR_UPCONN_CONNECT;
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

    if (enr_upconn_fail_kind(rc) != ENR_UPCONN_TLS)
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
        snprintf(reason, sizeof reason, "upstream_ca_file holds no usable certificate");
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

/* ---- warm-ups ---- */

static void warm_done(enr_upconn *p, warm *w, CURLcode rc)
{
    curl_multi_remove_handle(p->multi, w->easy);
    w->running = 0;
    p->warm_running--;
    if (rc != CURLE_OK) {
        /* Whatever went wrong, the next batch will meet it too and count
         * it; here it only spaces the warm-ups out. */
        enr_upconn_explain(p, w->easy, rc, w->errbuf);
        enr_log(ENR_LOG_DEBUG, "upstream warm-up failed", "code=%d backoff_ms=%u", (int)rc,
                p->warm_backoff_ms);
        p->wave_failed = 1;
    }
    if (p->warm_running > 0)
        return;
    /* A wave that left no more connections than it found (failed, or an
     * upstream that closes after every answer) is not repeated at once. */
    if (p->wave_failed || p->fds <= p->wave_fds) {
        p->warm_next_ms = enr_mono_ms() + p->warm_backoff_ms;
        p->warm_backoff_ms = p->warm_backoff_ms * 2 > UPCONN_WARM_BACKOFF_MAX_MS
                                 ? UPCONN_WARM_BACKOFF_MAX_MS
                                 : p->warm_backoff_ms * 2;
    } else {
        p->warm_backoff_ms = UPCONN_WARM_BACKOFF_MIN_MS;
    }
}

int enr_upconn_maintain(enr_upconn *p, uint64_t now_ms)
{
    unsigned want;

    if (p->nwarm == 0 || p->warm_running > 0)
        return -1; /* one wave at a time: its end wakes the epoll set */
    if (now_ms < p->warm_next_ms)
        return (int)(p->warm_next_ms - now_ms);
    if (p->fds >= p->nwarm)
        return -1;
    want = p->nwarm - p->fds;
    p->wave_fds = p->fds;
    p->wave_failed = 0;
    for (unsigned i = 0; i < p->nwarm && want > 0; i++) {
        warm *w = &p->warms[i];
        if (w->running)
            continue;
        w->errbuf[0] = '\0';
        if (curl_multi_add_handle(p->multi, w->easy) != CURLM_OK)
            break;
        w->running = 1;
        p->warm_running++;
        p->warmups++;
        want--;
    }
    return -1;
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
        warm *w = NULL;
        if (m->msg != CURLMSG_DONE)
            continue;
        for (unsigned i = 0; i < p->nwarm; i++)
            if (p->warms[i].easy == m->easy_handle)
                w = &p->warms[i];
        if (w != NULL)
            warm_done(p, w, m->data.result);
        else
            done(ud, m->easy_handle, m->data.result);
    }
}
