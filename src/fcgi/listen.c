/*
 * listen.c: the listening sockets (listen.h).
 *
 * Invariants: a unix socket is made in a directory no other user can
 * plant entries in (safedir.h: the socket's directory is checked first),
 * born with no permission at all (umask 0777), then given its group and
 * listen_mode through that directory's descriptor without following a
 * link, and listens only then: no one reaches it before it has the mode
 * and group it must have, and nothing planted in its place is ever
 * chown'ed or chmod'ed (CVE-2025-23016: the socket is the trust
 * boundary).  A live socket of another instance is never unlinked.  A TCP
 * listener takes any address sockaddr.c parses; each accepted TCP peer is
 * checked against listen_allow by the worker that accepted it (worker.c,
 * allow.h) before a byte is read.
 * Every descriptor is close-on-exec and non-blocking: workers race for
 * each connection (worker.c), and each waits for one through its own
 * EPOLLEXCLUSIVE epoll instance, so a connection wakes one idle worker,
 * not all of them (enr_listen_wait).
 */
#include "fcgi/listen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "base/log.h"
#include "base/safedir.h"
#include "base/sockaddr.h"
#include "base/sockdiag.h"

static int set_flags(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    int fdfl = fcntl(fd, F_GETFD);

    if (fl < 0 || fdfl < 0)
        return -1;
    /* Non-blocking: workers race for each connection (worker.c). */
    if (fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, fdfl | FD_CLOEXEC) < 0)
        return -1;
    return 0;
}

/* A socket file left by a dead instance refuses connections; a live
 * instance accepts them, and then we must not steal its path. */
static int unlink_stale(const char *path)
{
    struct sockaddr_un sa;
    struct stat st;
    int fd, r;

    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : -1;
    if (!S_ISSOCK(st.st_mode)) {
        errno = EEXIST;
        return -1;
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    r = connect(fd, (struct sockaddr *)&sa, sizeof sa);
    close(fd);
    if (r == 0) {
        errno = EADDRINUSE;
        return -1;
    }
    return unlink(path);
}

/* The socket at path, bound in its checked directory, given gid (or
 * left in ours: (gid_t)-1) and mode; not listening yet.  Returns the
 * descriptor, or -1 with err (and no file left behind). */
static int bind_unix(const char *path, gid_t gid, mode_t mode, char *err, size_t errlen)
{
    struct sockaddr_un sa;
    struct stat st;
    char dir[ENR_PATH_MAX], why[ENR_PATH_MAX + 200];
    const char *slash = strrchr(path, '/'), *base = slash + 1;
    mode_t old;
    int fd, dfd;

    if (strlen(path) >= sizeof sa.sun_path) {
        snprintf(err, errlen, "%s: longer than a unix socket path may be (%zu)", path,
                 sizeof sa.sun_path - 1);
        return -1;
    }
    snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    dfd = enr_safedir_open(dir, why, sizeof why);
    if (dfd < 0) {
        snprintf(err, errlen, "%s: %s", path, why);
        return -1;
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        close(dfd);
        return -1;
    }
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    /* Born with no permission: until the mode below, only root reaches
     * it, and no one connects before listen(). */
    old = umask(0777);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        umask(old);
        snprintf(err, errlen, "bind %s: %s", path, strerror(errno));
        goto fail_closed;
    }
    umask(old);
    /* The entry is ours in a directory where no one else may replace it;
     * still, what is changed is checked to be our socket, not followed. */
    if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISSOCK(st.st_mode) ||
        st.st_uid != geteuid()) {
        snprintf(err, errlen, "%s: not the socket just bound", path);
        goto fail_closed; /* what is there is not ours to remove */
    }
    if (gid != (gid_t)-1 && fchownat(dfd, base, (uid_t)-1, gid, AT_SYMLINK_NOFOLLOW) != 0) {
        snprintf(err, errlen, "chown %s to gid %ld: %s", path, (long)gid, strerror(errno));
        goto fail_bound;
    }
    if (fchmodat(dfd, base, mode, 0) != 0) {
        snprintf(err, errlen, "chmod %s: %s", path, strerror(errno));
        goto fail_bound;
    }
    close(dfd);
    return fd;

fail_bound:
    unlinkat(dfd, base, 0);
fail_closed:
    close(fd);
    close(dfd);
    return -1;
}

static int bind_socket(const enr_config *c, const char *addr, char *created, char *err,
                       size_t errlen)
{
    int fd;

    created[0] = '\0';
    if (addr[0] == '/') {
        gid_t gid = (gid_t)-1;

        if (c->listen_group[0]) {
            struct group *g = getgrnam(c->listen_group);
            if (g == NULL) {
                snprintf(err, errlen, "%s: no such group \"%s\"", addr, c->listen_group);
                return -1;
            }
            gid = g->gr_gid;
        }
        if (unlink_stale(addr) != 0) {
            snprintf(err, errlen, "%s: %s", addr,
                     errno == EADDRINUSE ? "another process is serving this socket"
                                         : strerror(errno));
            return -1;
        }
        fd = bind_unix(addr, gid, c->listen_mode, err, errlen);
        if (fd < 0)
            return -1;
        snprintf(created, ENR_PATH_MAX, "%s", addr);
    } else {
        enr_sockaddr sa;
        char why[160];
        int one = 1;

        if (enr_sockaddr_parse(addr, &sa, why, sizeof why) != 0) {
            snprintf(err, errlen, "%s", why);
            return -1;
        }
        fd = socket(sa.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
            snprintf(err, errlen, "socket: %s", strerror(errno));
            return -1;
        }
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) {
            snprintf(err, errlen, "SO_REUSEADDR: %s", strerror(errno));
            close(fd);
            return -1;
        }
        if (bind(fd, (struct sockaddr *)&sa.ss, sa.len) != 0) {
            snprintf(err, errlen, "bind %s: %s", addr, strerror(errno));
            close(fd);
            return -1;
        }
    }
    if (listen(fd, c->listen_backlog) != 0) {
        snprintf(err, errlen, "listen %s: %s", addr, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static void format_addr(const struct sockaddr_storage *ss, char *out, size_t len)
{
    char ip[INET6_ADDRSTRLEN];

    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &in->sin_addr, ip, sizeof ip);
        snprintf(out, len, "%s:%u", ip, ntohs(in->sin_port));
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof ip);
        snprintf(out, len, "[%s]:%u", ip, ntohs(in6->sin6_port));
    } else if (ss->ss_family == AF_UNIX) {
        snprintf(out, len, "%s", ((const struct sockaddr_un *)ss)->sun_path);
    } else {
        snprintf(out, len, "(family %d)", ss->ss_family);
    }
}

static void group_name(gid_t gid, char *out, size_t len)
{
    struct group *g = getgrgid(gid);

    if (g != NULL)
        snprintf(out, len, "%s", g->gr_name);
    else
        snprintf(out, len, "%ld", (long)gid);
}

/* The gid the kernel shows for a group not mapped into our user
 * namespace (PrivateUsers=yes maps only root and the service's own). */
static gid_t overflow_gid(void)
{
    FILE *f = fopen("/proc/sys/kernel/overflowgid", "re");
    long g = 65534;

    if (f != NULL) {
        if (fscanf(f, "%ld", &g) != 1)
            g = 65534;
        fclose(f);
    }
    return (gid_t)g;
}

int enr_listen_real_get(int fd, enr_listen_real *r)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    struct stat st;
    unsigned queued;

    memset(r, 0, sizeof *r);
    memset(&ss, 0, sizeof ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
        return -1;
    format_addr(&ss, r->addr, sizeof r->addr);
    r->is_unix = ss.ss_family == AF_UNIX;
    if (r->is_unix && r->addr[0] == '/' && stat(r->addr, &st) == 0 && S_ISSOCK(st.st_mode)) {
        struct passwd *pw = getpwuid(st.st_uid);
        r->have_file = 1;
        r->mode = (unsigned)(st.st_mode & 07777);
        if (pw != NULL)
            snprintf(r->owner, sizeof r->owner, "%s", pw->pw_name);
        else
            snprintf(r->owner, sizeof r->owner, "%ld", (long)st.st_uid);
        if (st.st_gid == overflow_gid() && st.st_gid != getegid()) {
            /* Its real group is outside our user namespace: unknown here. */
            r->group_unknown = 1;
            snprintf(r->group, sizeof r->group, "unmapped");
        } else {
            group_name(st.st_gid, r->group, sizeof r->group);
        }
    }
    r->have_backlog = enr_sockdiag_listen_queue(fd, &queued, &r->backlog) == 0;
    return 0;
}

const char *enr_listen_describe(int fd, const char *key, char *buf, size_t len)
{
    enr_listen_real r;
    char q[ENR_PATH_MAX + 8], mode[8] = "-", owner[132] = "-", backlog[16] = "-";

    if (enr_listen_real_get(fd, &r) != 0)
        snprintf(r.addr, sizeof r.addr, "-");
    if (r.have_file) {
        snprintf(mode, sizeof mode, "%04o", r.mode);
        snprintf(owner, sizeof owner, "%s:%s", r.owner, r.group);
    }
    if (r.have_backlog)
        snprintf(backlog, sizeof backlog, "%u", r.backlog);
    snprintf(buf, len, "%s=%s %s_mode=%s %s_owner=%s %s_backlog=%s", key,
             enr_log_quote(q, sizeof q, r.addr), key, mode, key, owner, key, backlog);
    return buf;
}

static void overridden(const char *sock, const char *key, const char *configured, const char *real)
{
    char q1[ENR_PATH_MAX + 8], q2[ENR_PATH_MAX + 8];

    enr_log(ENR_LOG_WARN,
            "socket activation: the passed socket overrides the configuration (change the "
            "socket unit, or the key)",
            "socket=%s key=%s configured=%s real=%s", sock, key,
            enr_log_quote(q1, sizeof q1, configured), enr_log_quote(q2, sizeof q2, real));
}

/* A passed socket is what is served, whatever the file says: each key it
 * overrides is said when the two differ, so no one reads the configured
 * value as the one in force.  The status socket has no backlog key of
 * its own (a bound one takes listen_backlog), so only its address, mode
 * and group are compared. */
static void report_passed(const enr_config *c, int fd, int is_status)
{
    const char *want = is_status ? c->status_listen : c->listen;
    const char *sock = is_status ? "status" : "fastcgi";
    char conf[ENR_PATH_MAX], v1[32], v2[32];
    enr_listen_real r;
    enr_sockaddr sa;
    char why[160];

    if (enr_listen_real_get(fd, &r) != 0)
        return;
    snprintf(conf, sizeof conf, "%s", want);
    if (want[0] != '/' && enr_sockaddr_parse(want, &sa, why, sizeof why) == 0)
        format_addr(&sa.ss, conf, sizeof conf); /* the spelling the kernel's is in */
    if (strcmp(conf, r.addr) != 0)
        overridden(sock, is_status ? "status_listen" : "listen", want, r.addr);
    if (r.have_file) {
        char grp[64];
        if (r.mode != c->listen_mode) {
            snprintf(v1, sizeof v1, "%04o", c->listen_mode);
            snprintf(v2, sizeof v2, "%04o", r.mode);
            overridden(sock, "listen_mode", v1, v2);
        }
        if (c->listen_group[0])
            snprintf(grp, sizeof grp, "%s", c->listen_group);
        else
            group_name(getegid(), grp, sizeof grp); /* empty: the daemon's own */
        if (!r.group_unknown && strcmp(grp, r.group) != 0)
            overridden(sock, "listen_group", c->listen_group, r.group);
    }
    if (!is_status && r.have_backlog && r.backlog != (unsigned)c->listen_backlog) {
        snprintf(v1, sizeof v1, "%d", c->listen_backlog);
        snprintf(v2, sizeof v2, "%u", r.backlog);
        overridden(sock, "listen_backlog", v1, v2);
    }
}

/* Socket activation first (enrichd.socket); else bind what the config
 * says.  A passed descriptor named "status" is the status socket. */
int enr_listen_open(const enr_config *c, int *listen_fd, int *status_fd, char *listen_path,
                    char *status_path, char *err, size_t errlen)
{
    char **names = NULL;
    int n = sd_listen_fds_with_names(1, &names);

    *listen_fd = *status_fd = -1;
    if (n < 0) {
        snprintf(err, errlen, "sd_listen_fds: %s", strerror(-n));
        return -1;
    }
    for (int i = 0; i < n; i++) {
        int fd = SD_LISTEN_FDS_START + i;
        int is_status = names && names[i] && strcmp(names[i], "status") == 0;
        if (sd_is_socket(fd, AF_UNSPEC, SOCK_STREAM, 1) <= 0) {
            snprintf(err, errlen, "passed descriptor %d is not a listening stream socket", fd);
            return -1;
        }
        if (set_flags(fd) != 0) {
            snprintf(err, errlen, "fcntl on passed descriptor %d: %s", fd, strerror(errno));
            return -1;
        }
        if (is_status && *status_fd < 0)
            *status_fd = fd;
        else if (*listen_fd < 0)
            *listen_fd = fd;
    }
    if (names) {
        for (int i = 0; i < n; i++)
            free(names[i]);
        free(names);
    }
    if (n > 0)
        enr_log(ENR_LOG_INFO, "socket activation", "fds=%d", n);
    if (*listen_fd >= 0)
        report_passed(c, *listen_fd, 0);
    if (*status_fd >= 0)
        report_passed(c, *status_fd, 1);
    if (*listen_fd < 0) {
        *listen_fd = bind_socket(c, c->listen, listen_path, err, errlen);
        if (*listen_fd < 0)
            return -1;
    }
    if (*status_fd < 0) {
        *status_fd = bind_socket(c, c->status_listen, status_path, err, errlen);
        if (*status_fd < 0)
            return -1;
    }
    return 0;
}

int enr_listen_activated(void)
{
    return sd_listen_fds(0) > 0;
}

int enr_listen_waiter(int listen_fd, int side_fd)
{
    struct epoll_event ev = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.fd = listen_fd};
    struct epoll_event side = {.events = EPOLLIN, .data.fd = side_fd};
    int ep = epoll_create1(EPOLL_CLOEXEC);

    if (ep < 0)
        return -1;
    if (epoll_ctl(ep, EPOLL_CTL_ADD, listen_fd, &ev) != 0 ||
        (side_fd >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, side_fd, &side) != 0)) {
        close(ep);
        return -1;
    }
    return ep;
}

int enr_listen_wait(int waiter, int listen_fd, int side_fd, int timeout_ms, const sigset_t *mask)
{
    struct pollfd p[2] = {{.fd = listen_fd, .events = POLLIN}, {.fd = side_fd, .events = POLLIN}};
    struct timespec ts;
    int r;

    if (waiter >= 0) {
        struct epoll_event ev[2];
        r = epoll_pwait(waiter, ev, 2, timeout_ms, mask);
        if (r <= 0)
            return r < 0 ? -1 : 0;
        /* A connection first: the side's work can wait for its answer. */
        for (int i = 0; i < r; i++)
            if (ev[i].data.fd == listen_fd)
                return ENR_LISTEN_READY;
        return ENR_LISTEN_SIDE;
    }
    ts.tv_sec = timeout_ms / 1000;
    ts.tv_nsec = (long)(timeout_ms % 1000) * 1000000L;
    r = ppoll(p, side_fd >= 0 ? 2 : 1, timeout_ms >= 0 ? &ts : NULL, mask);
    if (r <= 0)
        return r < 0 ? -1 : 0;
    return (p[0].revents & POLLIN) || !(p[1].revents & POLLIN) ? ENR_LISTEN_READY : ENR_LISTEN_SIDE;
}
