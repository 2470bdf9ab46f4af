/*
 * confcheck.c: -t's warnings about a valid configuration and the
 * components around it (confcheck.h).
 *
 * Every neighbour is read where this process sees it, as the daemon
 * would: getrlimit for descriptors, /proc/self/cgroup for the memory
 * bound (cgroup v2 memory.max or v1 memory.limit_in_bytes, the smallest
 * of the group and its parents), the systemd manager over D-Bus for the
 * unit's TimeoutStopUSec (only when systemd started this process for a
 * service: ExecStartPre), the nginx snippet named by nginx_fastcgi_conf
 * for fastcgi_read_timeout, and libcurl's CA bundle and directory as
 * built for an https source that trusts the system's store.
 * A neighbour that cannot be read is not a finding: -t must pass on a
 * build host without nginx or systemd.
 */
#include "ops/confcheck.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-login.h>
#include <unistd.h>

#include "upstream/curlapi.h"

#define NGINX_CONF_MAX (64 * 1024) /* the snippet is ~1 KB; larger is not ours */
#define CGROUP_LINE_MAX 4096
#define DBUS_TIMEOUT_US 1000000 /* -t runs in ExecStartPre: never wait long */
/* cgroup v1 writes "no limit" as a page-rounded LLONG_MAX */
#define CGROUP_NO_LIMIT (1ULL << 62)

typedef struct warner {
    const enr_config *c;
    enr_warn_fn fn;
    void *arg;
    unsigned n;
} warner;

static void warn(warner *w, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void warn(warner *w, const char *key, const char *fmt, ...)
{
    char what[512], msg[ENR_PATH_MAX + 700];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(msg, sizeof msg, "%s:%u: %s: %s", w->c->source, enr_config_line(w->c, key), key, what);
    w->fn(w->arg, msg);
    w->n++;
}

static int is_unix(const char *listen)
{
    return listen[0] == '/';
}

static void check_empty(warner *w)
{
    if (strcmp(w->c->source, "(built-in)") == 0)
        return;
    for (size_t i = 0; i < ENR_CONFIG_KEYS_MAX; i++)
        if (w->c->key_line[i] != 0)
            return;
    warn(w, "(file)", "sets no key: every value is the built-in default (enrichd -T prints them)");
}

/* nginx runs as a user of listen_group (www-data): it must be able to
 * search every directory above a socket, or every request is a 502.
 * Both sockets take listen_mode and listen_group (listen.c). */
static void check_dir_of(warner *w, const char *key, const char *path, gid_t gid)
{
    char dir[ENR_PATH_MAX];

    snprintf(dir, sizeof dir, "%s", path);
    for (char *p = dir + 1; *p; p++) {
        struct stat st;
        if (*p != '/')
            continue;
        *p = '\0';
        if (stat(dir, &st) != 0)
            return; /* made at start (or by the socket unit) */
        if (S_ISDIR(st.st_mode) && !(st.st_mode & S_IXOTH) &&
            !(st.st_gid == gid && (st.st_mode & S_IXGRP))) {
            struct group *og = getgrgid(st.st_gid);
            warn(w, key,
                 "group %s cannot reach the socket: \"%s\" is mode %04o, group %s; nginx "
                 "answers 502",
                 w->c->listen_group, dir, (unsigned)(st.st_mode & 07777),
                 og != NULL ? og->gr_name : "?");
            return;
        }
        *p = '/';
    }
}

static void check_sockets(warner *w)
{
    const enr_config *c = w->c;
    struct group *g;

    if (is_unix(c->listen) && (c->listen_mode & 0002))
        warn(w, "listen_mode",
             "%04o lets every local user write to the socket, and libfcgi trusts its peer "
             "(CVE-2025-23016 is only partly fixed): 0660 with listen_group",
             c->listen_mode);
    if (c->listen_group[0] == '\0')
        return;
    errno = 0;
    if ((g = getgrnam(c->listen_group)) == NULL)
        return; /* config.c checked it; gone since: not this check's business */
    if (is_unix(c->listen))
        check_dir_of(w, "listen", c->listen, g->gr_gid);
    if (is_unix(c->status_listen))
        check_dir_of(w, "status_listen", c->status_listen, g->gr_gid);
}

static void check_nofile(warner *w)
{
    struct rlimit rl;

    if (w->c->fd_hard == 0 || getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return;
    if (w->c->fd_hard > rl.rlim_cur)
        warn(w, "fd_hard",
             "%u is above this process's descriptor limit (RLIMIT_NOFILE %llu, the unit's "
             "LimitNOFILE=): a worker's accept and open fail before the master recycles it",
             w->c->fd_hard, (unsigned long long)rl.rlim_cur);
}

/* The smallest limit file in base+path and its parents (2^62 if none). */
static unsigned long long cgroup_limit(const char *base, const char *path, const char *file)
{
    char dir[CGROUP_LINE_MAX], name[CGROUP_LINE_MAX + 64];
    unsigned long long best = CGROUP_NO_LIMIT;

    snprintf(dir, sizeof dir, "%s", path);
    for (;;) {
        FILE *f;
        char v[64];
        size_t n = strlen(dir);
        while (n > 1 && dir[n - 1] == '/')
            dir[--n] = '\0';
        snprintf(name, sizeof name, "%s%s/%s", base, strcmp(dir, "/") == 0 ? "" : dir, file);
        if ((f = fopen(name, "re")) != NULL) {
            if (fgets(v, sizeof v, f) != NULL && v[0] >= '0' && v[0] <= '9') {
                unsigned long long x = strtoull(v, NULL, 10);
                if (x < best)
                    best = x;
            }
            fclose(f);
        }
        char *slash = strrchr(dir, '/');
        if (slash == NULL || n <= 1)
            break;
        if (slash == dir)
            dir[1] = '\0';
        else
            *slash = '\0';
    }
    return best;
}

static unsigned long long memory_limit(void)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    char line[CGROUP_LINE_MAX];
    unsigned long long best = CGROUP_NO_LIMIT;

    if (f == NULL)
        return best;
    while (fgets(line, sizeof line, f) != NULL) {
        char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL, *path;
        unsigned long long x = CGROUP_NO_LIMIT;
        if (b == NULL)
            continue;
        path = b + 1;
        path[strcspn(path, "\n")] = '\0';
        *a = '\0';
        *b = '\0';
        if (strcmp(line, "0") == 0 && a[1] == '\0')
            x = cgroup_limit("/sys/fs/cgroup", path, "memory.max");
        else {
            /* v1: the controller list may name several ("memory" among them) */
            for (char *t = strtok(a + 1, ","); t != NULL; t = strtok(NULL, ","))
                if (strcmp(t, "memory") == 0)
                    x = cgroup_limit("/sys/fs/cgroup/memory", path, "memory.limit_in_bytes");
        }
        if (x < best)
            best = x;
    }
    fclose(f);
    return best;
}

static void check_memory(warner *w)
{
    unsigned long long lim, need;

    if (w->c->rss_hard_mb == 0)
        return;
    lim = memory_limit();
    need = (unsigned long long)w->c->workers * w->c->rss_hard_mb << 20;
    if (lim < CGROUP_NO_LIMIT && need > lim)
        warn(w, "rss_hard_mb",
             "workers x rss_hard_mb (%u x %u MiB) is above this cgroup's memory limit (%llu MiB, "
             "the unit's MemoryMax=): the kernel kills workers before the master recycles them",
             w->c->workers, w->c->rss_hard_mb, lim >> 20);
}

/* Under systemd the stop timeout is the unit's: drained past it, the
 * master is killed mid-drain and in-flight requests are lost. */
static void check_stop_timeout(warner *w)
{
    char *unit = NULL, *path = NULL;
    sd_bus *bus = NULL;
    sd_bus_error e = SD_BUS_ERROR_NULL;
    uint64_t usec = 0;

    /* INVOCATION_ID: systemd started this process for a unit (ExecStartPre),
     * not a shell that happens to sit in some service's cgroup */
    if (getenv("INVOCATION_ID") == NULL || sd_pid_get_unit(0, &unit) < 0 || unit == NULL)
        return;
    if (strstr(unit, ".service") != NULL && sd_bus_open_system(&bus) >= 0 &&
        sd_bus_set_method_call_timeout(bus, DBUS_TIMEOUT_US) >= 0 &&
        sd_bus_path_encode("/org/freedesktop/systemd1/unit", unit, &path) >= 0 &&
        sd_bus_get_property_trivial(bus, "org.freedesktop.systemd1", path,
                                    "org.freedesktop.systemd1.Service", "TimeoutStopUSec", &e, 't',
                                    &usec) >= 0 &&
        usec != 0 && usec != UINT64_MAX && (uint64_t)w->c->drain_timeout_ms * 1000 >= usec)
        warn(w, "drain_timeout_ms",
             "%u ms is not below %s's TimeoutStopSec= (%llu ms): systemd kills the master "
             "mid-drain",
             w->c->drain_timeout_ms, unit, (unsigned long long)(usec / 1000));
    sd_bus_error_free(&e);
    free(path);
    sd_bus_unref(bus);
    free(unit);
}

long long enr_nginx_time_ms(const char *s, size_t len)
{
    static const struct {
        const char *unit;
        long long ms;
    } units[] = {{"ms", 1},       {"s", 1000},      {"m", 60000},        {"h", 3600000},
                 {"d", 86400000}, {"w", 604800000}, {"M", 2592000000LL}, {"y", 31536000000LL}};
    const char *p = s, *end = s + len;
    long long total = 0;

    if (len == 0)
        return -1;
    while (p < end) {
        long long n = 0, mul = 1000; /* a bare number is seconds */
        const char *d = p;
        size_t ul = 0;
        while (p < end && *p >= '0' && *p <= '9') {
            if (n > 1000000000LL)
                return -1;
            n = n * 10 + (*p++ - '0');
        }
        if (p == d)
            return -1;
        while (p + ul < end && ((p[ul] >= 'a' && p[ul] <= 'z') || (p[ul] >= 'A' && p[ul] <= 'Z')))
            ul++;
        if (ul > 0) {
            size_t i;
            for (i = 0; i < sizeof units / sizeof units[0]; i++)
                if (strlen(units[i].unit) == ul && memcmp(units[i].unit, p, ul) == 0)
                    break;
            if (i == sizeof units / sizeof units[0])
                return -1;
            mul = units[i].ms;
            p += ul;
        } else if (p < end) {
            return -1;
        }
        total += n * mul;
    }
    return total;
}

/* The first `fastcgi_read_timeout VALUE;` directive of text, outside
 * comments; -1 if none. */
static long long nginx_read_timeout(const char *text)
{
    static const char dir[] = "fastcgi_read_timeout";
    const char *p = text;
    int stmt_start = 1;

    while (*p) {
        if (*p == '#') {
            p += strcspn(p, "\n");
            continue;
        }
        if (*p == ';' || *p == '{' || *p == '}') {
            stmt_start = 1;
            p++;
            continue;
        }
        if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') {
            p++;
            continue;
        }
        if (stmt_start && strncmp(p, dir, sizeof dir - 1) == 0 &&
            (p[sizeof dir - 1] == ' ' || p[sizeof dir - 1] == '\t')) {
            const char *v = p + sizeof dir - 1;
            v += strspn(v, " \t");
            return enr_nginx_time_ms(v, strcspn(v, "; \t\r\n"));
        }
        stmt_start = 0;
        p++;
    }
    return -1;
}

static void check_nginx(warner *w)
{
    const char *path = w->c->nginx_fastcgi_conf;
    char *text;
    size_t n;
    long long ms;
    int fd;
    FILE *f;
    struct stat st;

    if (path[0] == '\0' || (fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)) < 0)
        return; /* no nginx here, or a site of its own: nothing to compare */
    /* A FIFO would hold -t until a writer came: only a regular file is read. */
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (f = fdopen(fd, "r")) == NULL) {
        close(fd);
        return;
    }
    text = malloc(NGINX_CONF_MAX + 1);
    if (text == NULL) {
        fclose(f);
        return;
    }
    n = fread(text, 1, NGINX_CONF_MAX, f);
    fclose(f);
    text[n] = '\0';
    ms = nginx_read_timeout(text);
    free(text);
    if (ms >= 0 && (long long)w->c->request_timeout_ms >= ms)
        warn(w, "request_timeout_ms",
             "%u ms is not below nginx's fastcgi_read_timeout (%lld ms in %s): nginx answers "
             "504 before the worker's own 503, and the worker keeps working for nobody",
             w->c->request_timeout_ms, ms, path);
}

/* A CA directory with something in it (OpenSSL looks certificates up
 * there by name: what they are is its business, at the handshake). */
static int has_entry(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int found = 0;

    if (d == NULL)
        return 0;
    while (!found && (e = readdir(d)) != NULL)
        found = e->d_name[0] != '.';
    closedir(d);
    return found;
}

/* An https source verifies against the system's CA store unless
 * upstream_ca_file names one; a system without (a minimal image without
 * ca-certificates) fails every call as tls, which is better said now. */
static void check_trust(warner *w)
{
    char bundle[PATH_MAX], dir[PATH_MAX], err[256];

    if (w->c->upstream_ca_file[0] != '\0' || !enr_config_any_https(w->c) ||
        enr_curl_load(err, sizeof err) != 0 ||
        enr_curl_ca_defaults(bundle, sizeof bundle, dir, sizeof dir) != 0)
        return; /* no libcurl: the daemon says so when it loads it */
    if ((bundle[0] != '\0' && access(bundle, R_OK) == 0) || (dir[0] != '\0' && has_entry(dir)))
        return;
    warn(w, "upstream_ca_file",
         "unset, and this system has no CA store (%s unreadable, %s empty): every https call "
         "will fail as tls; install ca-certificates, or name a PEM bundle here",
         bundle[0] ? bundle : "no bundle", dir[0] ? dir : "no directory");
}

unsigned enr_config_warn(const enr_config *c, enr_warn_fn fn, void *arg)
{
    warner w = {c, fn, arg, 0};

    check_empty(&w);
    check_sockets(&w);
    check_nofile(&w);
    check_memory(&w);
    check_stop_timeout(&w);
    check_nginx(&w);
    check_trust(&w);
    return w.n;
}
