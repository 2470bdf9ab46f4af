/*
 * sockdiag.c: listen-queue depth and descriptor attribution from the
 * kernel's own tables (NETLINK_SOCK_DIAG, TCP_INFO, /proc/PID/fd).
 *
 * Invariants: every descriptor opened here is closed before returning
 * and carries O_CLOEXEC/SOCK_CLOEXEC; a snapshot is immutable after
 * enr_sockdiag_snap_take() and sorted by inode, so lookups are bsearch.
 * A netlink dump is read to NLMSG_DONE or the whole snapshot fails: a
 * partial table would misattribute sockets silently.
 */
#include "base/sockdiag.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define SD_RECV_BUF 32768        /* one netlink datagram of a dump */
#define SD_MAX_DISTINCT_PEERS 64 /* CLOSE_WAIT peers tracked per process */
#define SD_LINK_MAX 128          /* readlink of /proc/PID/fd/N */

enum { SD_KIND_TCP = 1, SD_KIND_UNIX = 2 };

typedef struct sd_entry {
    uint64_t inode;
    uint8_t kind, state, family;
    uint8_t peer[16]; /* remote address, network order */
    uint16_t port;    /* remote port, host order */
} sd_entry;

struct enr_sockdiag_snap {
    sd_entry *v;
    size_t n, cap;
};

static const char *const tcp_state_names[ENR_TCP_STATE_COUNT] = {
    "UNKNOWN", "ESTABLISHED", "SYN_SENT", "SYN_RECV", "FIN_WAIT1", "FIN_WAIT2",    "TIME_WAIT",
    "CLOSE",   "CLOSE_WAIT",  "LAST_ACK", "LISTEN",   "CLOSING",   "NEW_SYN_RECV",
};

const char *enr_tcp_state_name(unsigned state)
{
    if (state >= ENR_TCP_STATE_COUNT)
        return "UNKNOWN";
    return tcp_state_names[state];
}

static int snap_push(enr_sockdiag_snap *s, const sd_entry *e)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        sd_entry *v = realloc(s->v, cap * sizeof *v);
        if (v == NULL)
            return -1;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = *e;
    return 0;
}

/* Sends one dump request and feeds every message to cb until NLMSG_DONE. */
typedef int (*sd_msg_cb)(const struct nlmsghdr *h, void *arg);

static int netlink_dump(void *req, size_t reqlen, sd_msg_cb cb, void *arg, char *err, size_t errlen)
{
    struct sockaddr_nl nladdr = {.nl_family = AF_NETLINK};
    struct nlmsghdr nlh = {
        .nlmsg_len = NLMSG_LENGTH(reqlen),
        .nlmsg_type = SOCK_DIAG_BY_FAMILY,
        .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP,
        .nlmsg_seq = 1,
    };
    struct iovec iov[2] = {{&nlh, sizeof nlh}, {req, reqlen}};
    struct msghdr msg = {
        .msg_name = &nladdr, .msg_namelen = sizeof nladdr, .msg_iov = iov, .msg_iovlen = 2};
    char buf[SD_RECV_BUF] __attribute__((aligned(8)));
    int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    int rc = -1;

    if (fd < 0) {
        snprintf(err, errlen, "socket(NETLINK_SOCK_DIAG): %s", strerror(errno));
        return -1;
    }
    if (sendmsg(fd, &msg, 0) < 0) {
        snprintf(err, errlen, "sock_diag sendmsg: %s", strerror(errno));
        goto out;
    }
    for (;;) {
        ssize_t got = recv(fd, buf, sizeof buf, 0);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            snprintf(err, errlen, "sock_diag recv: %s", strerror(errno));
            goto out;
        }
        if (got == 0) {
            snprintf(err, errlen, "sock_diag: dump ended without NLMSG_DONE");
            goto out;
        }
        for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)got);
             h = NLMSG_NEXT(h, got)) {
            if (h->nlmsg_type == NLMSG_DONE) {
                rc = 0;
                goto out;
            }
            if (h->nlmsg_type == NLMSG_ERROR) {
                const struct nlmsgerr *e = NLMSG_DATA(h);
                snprintf(err, errlen, "sock_diag: %s", strerror(-e->error));
                goto out;
            }
            if (cb(h, arg) != 0) {
                snprintf(err, errlen, "sock_diag: out of memory");
                goto out;
            }
        }
    }
out:
    close(fd);
    return rc;
}

static int on_inet(const struct nlmsghdr *h, void *arg)
{
    const struct inet_diag_msg *m = NLMSG_DATA(h);
    sd_entry e = {0};

    if (h->nlmsg_len < NLMSG_LENGTH(sizeof *m))
        return 0;
    if (m->idiag_inode == 0) /* TIME_WAIT and the like: owned by no descriptor */
        return 0;
    e.inode = m->idiag_inode;
    e.kind = SD_KIND_TCP;
    e.state = m->idiag_state;
    e.family = m->idiag_family;
    memcpy(e.peer, m->id.idiag_dst, m->idiag_family == AF_INET ? 4 : 16);
    e.port = ntohs(m->id.idiag_dport);
    return snap_push(arg, &e);
}

static int on_unix(const struct nlmsghdr *h, void *arg)
{
    const struct unix_diag_msg *m = NLMSG_DATA(h);
    sd_entry e = {0};

    if (h->nlmsg_len < NLMSG_LENGTH(sizeof *m))
        return 0;
    e.inode = m->udiag_ino;
    e.kind = SD_KIND_UNIX;
    e.state = m->udiag_state;
    e.family = AF_UNIX;
    return snap_push(arg, &e);
}

static int cmp_entry(const void *a, const void *b)
{
    const sd_entry *x = a, *y = b;
    return x->inode < y->inode ? -1 : x->inode > y->inode;
}

enr_sockdiag_snap *enr_sockdiag_snap_take(char *err, size_t errlen)
{
    enr_sockdiag_snap *s = calloc(1, sizeof *s);
    static const int families[] = {AF_INET, AF_INET6};

    if (s == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
        struct inet_diag_req_v2 req = {
            .sdiag_family = (uint8_t)families[i],
            .sdiag_protocol = IPPROTO_TCP,
            .idiag_states = ~0u,
        };
        if (netlink_dump(&req, sizeof req, on_inet, s, err, errlen) != 0)
            goto fail;
    }
    {
        struct unix_diag_req req = {.sdiag_family = AF_UNIX, .udiag_states = ~0u};
        if (netlink_dump(&req, sizeof req, on_unix, s, err, errlen) != 0)
            goto fail;
    }
    qsort(s->v, s->n, sizeof *s->v, cmp_entry);
    return s;
fail:
    enr_sockdiag_snap_free(s);
    return NULL;
}

void enr_sockdiag_snap_free(enr_sockdiag_snap *s)
{
    if (s == NULL)
        return;
    free(s->v);
    free(s);
}

static const sd_entry *snap_find(const enr_sockdiag_snap *s, uint64_t inode)
{
    sd_entry key = {.inode = inode};
    if (s == NULL || s->n == 0)
        return NULL;
    return bsearch(&key, s->v, s->n, sizeof *s->v, cmp_entry);
}

static void format_peer(const sd_entry *e, char *out, size_t len)
{
    char a[INET6_ADDRSTRLEN];
    int fam = e->family == AF_INET6 ? AF_INET6 : AF_INET;

    if (inet_ntop(fam, e->peer, a, sizeof a) == NULL) {
        snprintf(out, len, "?:%u", (unsigned)e->port);
        return;
    }
    if (fam == AF_INET6)
        snprintf(out, len, "[%s]:%u", a, (unsigned)e->port);
    else
        snprintf(out, len, "%s:%u", a, (unsigned)e->port);
}

static void count_peer(enr_fd_peer *peers, unsigned *npeers, const char *addr)
{
    for (unsigned i = 0; i < *npeers; i++) {
        if (strcmp(peers[i].addr, addr) == 0) {
            peers[i].n++;
            return;
        }
    }
    /* Past the table's size the rest stay counted in close_wait only:
     * the top peers of a leak are the first ones seen many times. */
    if (*npeers == SD_MAX_DISTINCT_PEERS)
        return;
    snprintf(peers[*npeers].addr, sizeof peers[*npeers].addr, "%s", addr);
    peers[*npeers].n = 1;
    (*npeers)++;
}

static int cmp_peer_desc(const void *a, const void *b)
{
    const enr_fd_peer *x = a, *y = b;
    if (x->n != y->n)
        return x->n > y->n ? -1 : 1;
    return strcmp(x->addr, y->addr);
}

static void classify_socket(const enr_sockdiag_snap *snap, uint64_t inode, enr_fd_kinds *k,
                            enr_fd_peer *peers, unsigned *npeers)
{
    const sd_entry *e = snap_find(snap, inode);
    char addr[64];

    if (e == NULL) {
        k->other_socks++;
        return;
    }
    if (e->kind == SD_KIND_UNIX) {
        k->unix_socks++;
        return;
    }
    k->tcp_socks++;
    if (e->state < ENR_TCP_STATE_COUNT)
        k->tcp_state[e->state]++;
    if (e->state == TCP_CLOSE_WAIT) {
        k->close_wait++;
        format_peer(e, addr, sizeof addr);
        count_peer(peers, npeers, addr);
    }
}

int enr_sockdiag_fds(const enr_sockdiag_snap *snap, pid_t pid, enr_fd_kinds *out)
{
    char path[64];
    enr_fd_peer peers[SD_MAX_DISTINCT_PEERS];
    unsigned npeers = 0;
    DIR *d;
    int dfd;
    struct dirent *de;

    memset(out, 0, sizeof *out);
    snprintf(path, sizeof path, "/proc/%ld/fd", (long)pid);
    dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -1;
    d = fdopendir(dfd);
    if (d == NULL) {
        int e = errno;
        close(dfd);
        errno = e;
        return -1;
    }
    while ((de = readdir(d)) != NULL) {
        char link[SD_LINK_MAX];
        ssize_t n;
        unsigned long long inode;

        if (de->d_name[0] == '.')
            continue;
        n = readlinkat(dfd, de->d_name, link, sizeof link - 1);
        if (n < 0) /* closed between readdir and readlink: not a descriptor any more */
            continue;
        link[n] = '\0';
        out->total++;
        if (sscanf(link, "socket:[%llu]", &inode) == 1)
            classify_socket(snap, inode, out, peers, &npeers);
        else if (strncmp(link, "pipe:", 5) == 0)
            out->pipes++;
        else if (link[0] == '/')
            out->files++;
        else
            out->other++;
    }
    closedir(d);

    qsort(peers, npeers, sizeof peers[0], cmp_peer_desc);
    out->n_top_close_wait = npeers < ENR_FD_TOP_PEERS ? npeers : ENR_FD_TOP_PEERS;
    memcpy(out->top_close_wait, peers, out->n_top_close_wait * sizeof peers[0]);
    return 0;
}

typedef struct unix_q {
    uint64_t inode;
    int found;
    unsigned queued, limit;
} unix_q;

static int on_unix_rqlen(const struct nlmsghdr *h, void *arg)
{
    const struct unix_diag_msg *m = NLMSG_DATA(h);
    unix_q *q = arg;
    int len;
    const struct rtattr *a;

    if (h->nlmsg_len < NLMSG_LENGTH(sizeof *m) || m->udiag_ino != q->inode)
        return 0;
    len = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof *m));
    for (a = (const struct rtattr *)(m + 1); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
        if (a->rta_type == UNIX_DIAG_RQLEN &&
            RTA_PAYLOAD(a) >= (int)sizeof(struct unix_diag_rqlen)) {
            const struct unix_diag_rqlen *r = RTA_DATA(a);
            /* For a listener the kernel reports the accept queue and its
             * backlog limit in these two fields. */
            q->queued = r->udiag_rqueue;
            q->limit = r->udiag_wqueue;
            q->found = 1;
        }
    }
    return 0;
}

int enr_sockdiag_listen_queue(int fd, unsigned *queued, unsigned *limit)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;

    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
        return -1;
    if (ss.ss_family == AF_INET || ss.ss_family == AF_INET6) {
        struct tcp_info ti;
        socklen_t tl = sizeof ti;
        if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) != 0)
            return -1;
        /* On a listener the kernel puts the accept queue in unacked and
         * the backlog limit in sacked. */
        *queued = ti.tcpi_unacked;
        *limit = ti.tcpi_sacked;
        return 0;
    }
    if (ss.ss_family == AF_UNIX) {
        struct stat st;
        char err[128];
        unix_q q = {0};
        struct unix_diag_req req = {
            .sdiag_family = AF_UNIX,
            .udiag_states = 1u << TCP_LISTEN,
            .udiag_show = UDIAG_SHOW_RQLEN,
        };
        if (fstat(fd, &st) != 0)
            return -1;
        q.inode = st.st_ino;
        if (netlink_dump(&req, sizeof req, on_unix_rqlen, &q, err, sizeof err) != 0) {
            errno = EIO;
            return -1;
        }
        if (!q.found) {
            errno = ENOENT;
            return -1;
        }
        *queued = q.queued;
        *limit = q.limit;
        return 0;
    }
    errno = EAFNOSUPPORT;
    return -1;
}

int enr_fd_kinds_describe(const enr_fd_kinds *k, char *buf, size_t len)
{
    size_t off = 0;
    int n;

#define SD_APPEND(...)                                                                             \
    do {                                                                                           \
        n = snprintf(buf + (off < len ? off : len), off < len ? len - off : 0, __VA_ARGS__);       \
        if (n < 0)                                                                                 \
            return n;                                                                              \
        off += (size_t)n;                                                                          \
    } while (0)

    SD_APPEND("%u fds", k->total);
    if (k->close_wait) {
        SD_APPEND(", %u TCP CLOSE_WAIT", k->close_wait);
        /* A single peer needs no count: it holds them all. */
        if (k->n_top_close_wait == 1 && k->top_close_wait[0].n == k->close_wait)
            SD_APPEND(" to %s", k->top_close_wait[0].addr);
        else
            for (unsigned i = 0; i < k->n_top_close_wait; i++)
                SD_APPEND("%s%s (%u)", i == 0 ? " to " : ", ", k->top_close_wait[i].addr,
                          k->top_close_wait[i].n);
    }
    if (k->tcp_socks > k->close_wait)
        SD_APPEND(", %u TCP other", k->tcp_socks - k->close_wait);
    SD_APPEND(", %u unix, %u files, %u pipes", k->unix_socks, k->files, k->pipes);
    if (k->other_socks)
        SD_APPEND(", %u other sockets", k->other_socks);
    if (k->other)
        SD_APPEND(", %u other", k->other);
#undef SD_APPEND
    return (int)off;
}
