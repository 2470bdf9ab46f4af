/*
 * config.c: reads and validates `key = value` configuration (config.h).
 *
 * The whole file is parsed into a fresh enr_config that starts from the
 * embedded defaults; the caller's config is only overwritten when every
 * line and every cross-key rule passed, so a bad file on HUP leaves the
 * running configuration untouched.  Keys are described by one table:
 * name, type, bounds and offset (conftable.c, with the built-in defaults
 * and -T's printout); this file reads a value by its row's type.
 */
#include "base/config.h"
#include "base/config_int.h"
#include "base/confhint.h"
#include "base/safedir.h"
#include "base/sockaddr.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <grp.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/secret.h"

#define CONFIG_LINE_MAX 2048
#define CONFIG_FILE_MAX (1 << 20) /* a config larger than this is a mistake */
#define CONFIG_INCLUDE_MAX 64     /* files `include` lines may read, all together */
/* A worker starts at about 4 MB of RSS and 6 descriptors (libraries, the
 * Unicode tables, the sockets): recycling limits must leave room above that. */
#define ENR_CONFIG_RSS_FLOOR_MB 16
#define ENR_CONFIG_FD_FLOOR 16

typedef struct parse_state {
    const char *file;
    unsigned line;
    char *err;
    size_t errlen;
    unsigned char seen[ENR_CONFIG_KEYS_MAX];
    unsigned seen_line[ENR_CONFIG_KEYS_MAX]; /* where each key was last set, for cross-key errors */
    const char *seen_file[ENR_CONFIG_KEYS_MAX];
    unsigned n_inc; /* files included so far; their names are kept for the messages */
    int including;  /* parsing an included file */
    int builtin;    /* parsing enr_config_default_text */
    char inc_path[CONFIG_INCLUDE_MAX][ENR_PATH_MAX];
} parse_state;

static int fail(parse_state *ps, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(parse_state *ps, const char *key, const char *fmt, ...)
{
    char what[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(ps->err, ps->errlen, "%s:%u: %s: %s", ps->file, ps->line, key, what);
    return -1;
}

static int parse_ull(const char *v, int base, unsigned long long *out)
{
    char *end;

    /* Digits only: strtoull would also take a sign and leading white
     * space of any kind (a tab after "127.0.0.1:" passed). */
    if (v[0] < '0' || v[0] > '9')
        return -1;
    errno = 0;
    *out = strtoull(v, &end, base);
    if (errno != 0 || *end != '\0')
        return -1;
    return 0;
}

/* Sizes accept an optional binary suffix (k, m, g) so 4m reads as 4 MiB. */
static int parse_size(const char *v, unsigned long long *out)
{
    char num[32];
    size_t n = strlen(v);
    unsigned shift = 0;

    if (n == 0 || n >= sizeof num)
        return -1;
    memcpy(num, v, n + 1);
    switch (num[n - 1]) {
    case 'k':
    case 'K':
        shift = 10;
        break;
    case 'm':
    case 'M':
        shift = 20;
        break;
    case 'g':
    case 'G':
        shift = 30;
        break;
    default:
        break;
    }
    if (shift)
        num[--n] = '\0';
    if (parse_ull(num, 10, out) != 0)
        return -1;
    if (*out > (ULLONG_MAX >> shift))
        return -1;
    *out <<= shift;
    return 0;
}

/* The workers' socket may be any address: listen_allow decides who may
 * talk to it.  The status socket has no such list, so it stays on unix or
 * loopback (nginx on the same host routes to it). */
static int check_listen(const enr_config_key *k, const char *v, char *why, size_t whylen)
{
    enr_sockaddr a;

    if (enr_sockaddr_parse(v, &a, why, whylen) != 0)
        return -1;
    if (strcmp(k->name, "status_listen") == 0 && a.ss.ss_family != AF_UNIX &&
        !enr_sockaddr_is_loopback(&a)) {
        snprintf(why, whylen, "\"%s\": the status socket is a unix path or a loopback address", v);
        return -1;
    }
    return 0;
}

static enr_config_url_check_fn url_check; /* enr_config_set_url_check */

void enr_config_set_url_check(enr_config_url_check_fn check)
{
    url_check = check;
}

/* A text key (enr_config_key_is_text): its length, then its type's own
 * check. */
static int set_text(parse_state *ps, enr_config *c, const enr_config_key *k, const char *v)
{
    char why[200];

    if (strlen(v) >= k->size)
        return fail(ps, k->name, "value longer than %zu bytes", k->size - 1);
    if (k->type == ENR_KEY_PATH && v[0] != '\0' && v[0] != '/')
        return fail(ps, k->name, "\"%s\" is not an absolute path (empty: off)", v);
    if (k->type == ENR_KEY_LISTEN && check_listen(k, v, why, sizeof why) != 0)
        return fail(ps, k->name, "%s", why);
    /* The worker's upstream client runs this same check at start.  It
     * loads libcurl, tens of ms before the first answer, so the
     * built-in URLs are left to the unit test that checks them. */
    if (k->type == ENR_KEY_URL && v[0] != '\0' && !ps->builtin && url_check != NULL &&
        url_check(v, NULL, why, sizeof why) != 0)
        return fail(ps, k->name, "%s", why);
    if (k->type == ENR_KEY_GROUP && v[0] != '\0') {
        errno = 0;
        if (getgrnam(v) == NULL)
            return fail(ps, k->name, "no such group \"%s\"", v);
    }
    /* Parsed here, once: the workers match peers against this. */
    if (k->type == ENR_KEY_ALLOW && enr_allow_parse(v, &c->listen_allow_nets, why, sizeof why) != 0)
        return fail(ps, k->name, "%s", why);
    memcpy((char *)c + k->off, v, strlen(v) + 1);
    return 0;
}

static int set_value(parse_state *ps, enr_config *c, const enr_config_key *k, const char *v)
{
    char *field = (char *)c + k->off;
    unsigned long long u = 0;
    char why[200];

    if (enr_config_key_is_text(k))
        return set_text(ps, c, k, v);
    switch (k->type) {
    case ENR_KEY_HEADER: {
        size_t n = strlen(v), name_len;
        if (n == 0)
            return 0; /* the built-in default: no header */
        if (c->upstream_nheaders >= ENR_UP_HEADERS_MAX)
            return fail(ps, k->name, "more than %d lines", ENR_UP_HEADERS_MAX);
        if (enr_upstream_header_check(v, n, &name_len, why, sizeof why) != 0)
            return fail(ps, k->name, "%s", why);
        for (unsigned i = 0; i < c->upstream_nheaders; i++)
            if (strncasecmp(c->upstream_headers[i], v, name_len) == 0 &&
                c->upstream_headers[i][name_len] == ':')
                return fail(ps, k->name, "header %.*s given twice", (int)name_len, v);
        memcpy(c->upstream_headers[c->upstream_nheaders++], v, n + 1);
        return 0;
    }
    case ENR_KEY_MODE:
        if (parse_ull(v, 8, &u) != 0 || u > k->hi)
            return fail(ps, k->name, "\"%s\" is not an octal mode (0000..0777)", v);
        break;
    case ENR_KEY_PER_CPU:
        if (strcmp(v, "auto") == 0) {
            cpu_set_t set;
            long n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                                 : sysconf(_SC_NPROCESSORS_ONLN);
            u = (unsigned long long)(n > 0 ? n : 1) * ENR_WORKERS_PER_CPU;
            if (u > ENR_WORKERS_AUTO_MAX)
                u = ENR_WORKERS_AUTO_MAX;
            break;
        }
        /* fall through */
    case ENR_KEY_UINT:
        if (parse_ull(v, 10, &u) != 0)
            return fail(ps, k->name, "\"%s\" is not a non-negative integer%s", v,
                        enr_confhint_unit(k->name, k->type == ENR_KEY_SIZE, v, why, sizeof why));
        break;
    case ENR_KEY_SIZE:
        if (parse_size(v, &u) != 0)
            return fail(ps, k->name, "\"%s\" is not a size (bytes, or with k/m/g)%s", v,
                        enr_confhint_unit(k->name, k->type == ENR_KEY_SIZE, v, why, sizeof why));
        break;
    case ENR_KEY_RATIO: {
        char *end;
        double d;
        errno = 0;
        d = strtod(v, &end);
        if (v[0] == '\0' || *end != '\0' || errno != 0 || !(d >= 0.0 && d <= 1.0))
            return fail(ps, k->name, "\"%s\" is not a ratio between 0 and 1", v);
        memcpy(field, &d, sizeof d);
        return 0;
    }
    default: /* text: set_text */
        break;
    }
    if (u < k->lo || u > k->hi)
        return fail(ps, k->name, "%llu is out of range %llu..%llu", u, k->lo, k->hi);
    if (k->size == sizeof(unsigned)) {
        unsigned x = (unsigned)u;
        memcpy(field, &x, sizeof x);
    } else if (k->size == sizeof(size_t)) {
        size_t x = (size_t)u;
        memcpy(field, &x, sizeof x);
    } else {
        return fail(ps, k->name, "internal: unexpected field size %zu", k->size);
    }
    return 0;
}

static char *trim(char *s)
{
    char *e;

    while (*s == ' ' || *s == '\t')
        s++;
    e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r' || e[-1] == '\n'))
        *--e = '\0';
    return s;
}

static int include_files(parse_state *ps, enr_config *c, const char *pattern);

static int parse_line(parse_state *ps, enr_config *c, char *line)
{
    char *eq, *key, *val;
    size_t i;

    key = trim(line);
    if (key[0] == '\0' || key[0] == '#')
        return 0;
    eq = strchr(key, '=');
    if (eq == NULL)
        return fail(ps, key, "expected \"key = value\"");
    *eq = '\0';
    key = trim(key);
    val = trim(eq + 1);
    /* A value runs to the end of the line; `#` starts a comment only
     * after white space, so URLs with fragments stay intact. */
    for (char *p = val; *p; p++) {
        if (*p == '#' && (p == val || p[-1] == ' ' || p[-1] == '\t')) {
            *p = '\0';
            val = trim(val);
            break;
        }
    }
    if (key[0] == '\0')
        return fail(ps, "(none)", "missing key before '='");
    if (strcmp(key, "include") == 0)
        return include_files(ps, c, val);
    for (i = 0; i < enr_config_nkeys; i++)
        if (strcmp(enr_config_keys[i].name, key) == 0)
            break;
    if (i == enr_config_nkeys) {
        const char *near = enr_confhint_nearest(key, &enr_config_keys[0].name, enr_config_nkeys,
                                                sizeof enr_config_keys[0]);
        if (near != NULL)
            return fail(ps, key, "unknown key (did you mean \"%s\"?)", near);
        return fail(ps, key, "unknown key");
    }
    if (ps->seen[i] == 2 && enr_config_keys[i].type != ENR_KEY_HEADER)
        return fail(ps, key, "duplicate key");
    ps->seen[i] = 2;
    ps->seen_line[i] = ps->line;
    ps->seen_file[i] = ps->file;
    return set_value(ps, c, &enr_config_keys[i], val);
}

static int parse_text(parse_state *ps, enr_config *c, char *text)
{
    char *p = text;

    ps->line = 0;
    /* Some editors on other systems start a UTF-8 file with a byte order
     * mark: invisible, it would make the first key "unknown". */
    if (strncmp(p, "\xEF\xBB\xBF", 3) == 0) {
        ps->line = 1;
        return fail(ps, "(file)",
                    "starts with a UTF-8 byte order mark (bytes EF BB BF): save it without one");
    }
    while (*p) {
        char *nl = strchr(p, '\n');
        ps->line++;
        if (nl)
            *nl = '\0';
        if (strlen(p) >= CONFIG_LINE_MAX)
            return fail(ps, "(line)", "longer than %d bytes", CONFIG_LINE_MAX - 1);
        if (parse_line(ps, c, p) != 0)
            return -1;
        if (!nl)
            break;
        p = nl + 1;
    }
    return 0;
}

/* Rules that span keys: a soft limit must trip before its hard limit,
 * and the worker's own deadlines must fit inside the request deadline. */
static unsigned line_of(parse_state *ps, const char *key)
{
    for (size_t i = 0; i < enr_config_nkeys; i++)
        if (strcmp(enr_config_keys[i].name, key) == 0) {
            if (ps->seen_file[i] != NULL)
                ps->file = ps->seen_file[i]; /* it may be an included file's */
            return ps->seen_line[i];
        }
    return 0;
}

#define FAIL_AT(ps, key, ...) ((ps)->line = line_of((ps), (key)), fail((ps), (key), __VA_ARGS__))

/* The TLS files need https; the files themselves are checked by
 * config_cred.c, for the commands that use them. */
static int check_tls_files(parse_state *ps, const enr_config *c)
{
    static const struct {
        const char *key;
        size_t off;
    } files[] = {
        {"upstream_ca_file", offsetof(enr_config, upstream_ca_file)},
        {"upstream_client_cert", offsetof(enr_config, upstream_client_cert)},
        {"upstream_client_key", offsetof(enr_config, upstream_client_key)},
    };
    int https = enr_config_any_https(c);

    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        const char *path = (const char *)c + files[i].off;
        if (path[0] == '\0')
            continue;
        if (!https)
            return FAIL_AT(ps, files[i].key, "needs a source served over https://");
    }
    if (c->upstream_client_cert[0] && !c->upstream_client_key[0])
        return FAIL_AT(ps, "upstream_client_cert", "needs upstream_client_key too");
    if (c->upstream_client_key[0] && !c->upstream_client_cert[0])
        return FAIL_AT(ps, "upstream_client_key", "needs upstream_client_cert too");
    return 0;
}

/* A file of the state directory (budget_file): kept across restarts, so
 * its directory must be one no one else may plant a file in, and the
 * path must name a file.  Empty: memory only.  Not cache_file: the
 * packaged one is in the unit's StateDirectory, which `enrichd -t` run
 * outside the unit cannot enter, and an unusable cache file only costs
 * the cache's persistence (the master says so and keeps it in memory). */
static int state_file_bad(parse_state *ps, const char *key, const char *path)
{
    char why[ENR_PATH_MAX + 200], dir[ENR_PATH_MAX];
    const char *slash = strrchr(path, '/');
    int dfd;

    if (path[0] == '\0')
        return 0;
    if (slash == NULL) /* ENR_KEY_PATH refuses relative paths; kept for any other caller */
        return FAIL_AT(ps, key, "\"%s\" is not an absolute path", path);
    snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    dfd = enr_safedir_open(dir, why, sizeof why);
    if (dfd < 0)
        return FAIL_AT(ps, key, "%s", why);
    close(dfd);
    if (slash[1] == '\0')
        return FAIL_AT(ps, key, "\"%s\" names a directory, not a file", path);
    return 0;
}

static int check_whole(parse_state *ps, const enr_config *c)
{
    /* Limits a worker is over the moment it starts would recycle or kill
     * every worker at once, for ever: 0 turns a limit off instead. */
    static const struct {
        const char *key;
        size_t off;
        unsigned floor;
    } floors[] = {
        {"rss_soft_mb", offsetof(enr_config, rss_soft_mb), ENR_CONFIG_RSS_FLOOR_MB},
        {"rss_hard_mb", offsetof(enr_config, rss_hard_mb), ENR_CONFIG_RSS_FLOOR_MB},
        {"fd_soft", offsetof(enr_config, fd_soft), ENR_CONFIG_FD_FLOOR},
        {"fd_hard", offsetof(enr_config, fd_hard), ENR_CONFIG_FD_FLOOR},
    };

    for (size_t i = 0; i < sizeof floors / sizeof floors[0]; i++) {
        unsigned v;
        memcpy(&v, (const char *)c + floors[i].off, sizeof v);
        if (v != 0 && v < floors[i].floor)
            return FAIL_AT(ps, floors[i].key,
                           "%u is below what a worker uses at start (%u); 0 turns it off", v,
                           floors[i].floor);
    }
    if (c->rss_hard_mb && c->rss_soft_mb >= c->rss_hard_mb)
        return FAIL_AT(ps, "rss_soft_mb", "must be below rss_hard_mb (%u)", c->rss_hard_mb);
    if (c->fd_hard && c->fd_soft >= c->fd_hard)
        return FAIL_AT(ps, "fd_soft", "must be below fd_hard (%u)", c->fd_hard);
    if (c->max_requests_jitter > c->max_requests)
        return FAIL_AT(ps, "max_requests_jitter", "must not exceed max_requests (%u)",
                       c->max_requests);
    if (c->upstream_timeout_ms >= c->request_timeout_ms)
        return FAIL_AT(ps, "upstream_timeout_ms", "must be below request_timeout_ms (%u)",
                       c->request_timeout_ms);
    if (c->upstream_warm_connections > c->upstream_max_connections)
        return FAIL_AT(ps, "upstream_warm_connections",
                       "must not exceed upstream_max_connections (%u)",
                       c->upstream_max_connections);
    if (check_tls_files(ps, c) != 0)
        return -1;
    if (c->liveness_timeout_ms < enr_config_liveness_floor_ms(c))
        return FAIL_AT(ps, "liveness_timeout_ms",
                       "must be at least body_timeout_ms + request_timeout_ms + kill_grace_ms + "
                       "%u (%u)",
                       ENR_LIVENESS_SLACK_MS, enr_config_liveness_floor_ms(c));
    if (c->min_ready_workers > c->workers)
        return FAIL_AT(ps, "min_ready_workers", "must not exceed workers (%u)", c->workers);
    if (strcmp(c->listen, c->status_listen) == 0)
        return FAIL_AT(ps, "status_listen", "must differ from listen");
    if (c->capture_sample > 0 && c->capture_dir[0] == '\0')
        return FAIL_AT(ps, "capture_sample", "needs capture_dir");
    if (c->capture_dir[0] != '\0') {
        char why[ENR_PATH_MAX + 200];
        int dfd = enr_safedir_open(c->capture_dir, why, sizeof why);
        if (dfd < 0)
            return FAIL_AT(ps, "capture_dir", "%s", why);
        if (faccessat(dfd, ".", W_OK | X_OK, 0) != 0) {
            int e = errno;
            close(dfd);
            return FAIL_AT(ps, "capture_dir", "\"%s\" is not a writable directory: %s",
                           c->capture_dir, strerror(e));
        }
        close(dfd);
    }
    if (state_file_bad(ps, "budget_file", c->budget_file))
        return -1;
    if (c->capture_group[0] != '\0') {
        char why[160];
        gid_t gid;
        if (enr_safedir_group(c->capture_group, &gid, why, sizeof why) != 0)
            return FAIL_AT(ps, "capture_group", "%s", why);
    }
    /* The host's cache is one shared mapping whose pages count in the RSS
     * of every worker that reads them: as large as the recycling bound, it
     * would recycle (or, past rss_hard_mb, kill) workers for reading it. */
    if (enr_config_enriches(c) && c->rss_soft_mb && c->cache_bytes >= (size_t)c->rss_soft_mb << 20)
        return FAIL_AT(ps, "cache_bytes",
                       "must be below rss_soft_mb (%u MiB): the shared cache's pages count in "
                       "the RSS of every worker that reads them",
                       c->rss_soft_mb);
    if (c->breaker_window > 0 && c->breaker_failure_ratio <= 0)
        return FAIL_AT(ps, "breaker_failure_ratio",
                       "must be above 0 while breaker_window is on (it would open on successes)");
    return 0;
}

/* Where the upstream secret goes: somewhere when it comes from somewhere
 * (enr_config_check_secret_keys checked where from), one place.  The
 * file is read by enr_config_load_secrets (config_cred.c), only by the
 * daemon.  No message quotes it. */
static int check_secret_keys(parse_state *ps, enr_config *c)
{
    const int from_file = c->upstream_secret_file[0] != '\0';
    const int from_cred = c->upstream_secret_credential[0] != '\0';
    const int to_header = c->upstream_secret_header[0] != '\0';
    const int to_query = c->upstream_secret_query[0] != '\0';
    char why[ENR_PATH_MAX + 200];
    const char *key = from_file ? "upstream_secret_file" : "upstream_secret_credential";

    memset(&c->upstream_secret, 0, sizeof c->upstream_secret);
    if (to_header && enr_secret_header_check(c->upstream_secret_header, why, sizeof why) != 0)
        return FAIL_AT(ps, "upstream_secret_header", "%s", why);
    if (to_header) {
        size_t n = strcspn(c->upstream_secret_header, ":");
        for (unsigned i = 0; i < c->upstream_nheaders; i++)
            if (strncasecmp(c->upstream_headers[i], c->upstream_secret_header, n) == 0 &&
                c->upstream_headers[i][n] == ':')
                return FAIL_AT(ps, "upstream_secret_header",
                               "header %.*s is also an upstream_header line", (int)n,
                               c->upstream_secret_header);
    }
    if (to_query && enr_secret_query_check(c->upstream_secret_query, why, sizeof why) != 0)
        return FAIL_AT(ps, "upstream_secret_query", "%s", why);
    if (!from_file && !from_cred) {
        if (to_header || to_query)
            return FAIL_AT(ps, to_header ? "upstream_secret_header" : "upstream_secret_query",
                           "needs upstream_secret_file or upstream_secret_credential");
        return 0;
    }
    if (!to_header && !to_query)
        return FAIL_AT(ps, key,
                       "needs upstream_secret_header or upstream_secret_query (where "
                       "the secret goes)");
    if (to_header && to_query)
        return FAIL_AT(ps, "upstream_secret_query",
                       "set upstream_secret_header or upstream_secret_query, not both");
    return 0;
}

/* The sources and their secrets (confsource.c), before the rules that
 * depend on them (the TLS files, the cache's size). */
static int sources(parse_state *ps, enr_config *c)
{
    const char *key = "yt_source";
    char why[ENR_PATH_MAX + 200];

    if (enr_config_sources(c, &key, why, sizeof why) != 0)
        return FAIL_AT(ps, key, "%s", why);
    if (enr_config_store_check(c, &key, why, sizeof why) != 0)
        return FAIL_AT(ps, key, "%s", why);
    return 0;
}

/* The file given with -c and each included one, read the same way: only
 * a regular file.  It is opened without blocking and checked on its
 * descriptor, so a FIFO (whose open and read wait for a writer) or a
 * device is refused at once and a file swapped between a check and the
 * open cannot slip past.  /dev/null, the usual "no settings", is the one
 * device taken: it is empty and never waits. */
static int read_file(const char *path, char **out, char *why, size_t whylen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    struct stat st;
    FILE *f;
    char *buf;
    size_t n;

    if (fd < 0) {
        snprintf(why, whylen, "%s", strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) != 0 ||
        !(S_ISREG(st.st_mode) || (S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3)))) {
        snprintf(why, whylen, "not a regular file");
        close(fd);
        return -1;
    }
    f = fdopen(fd, "r");
    if (f == NULL) {
        snprintf(why, whylen, "%s", strerror(errno));
        close(fd);
        return -1;
    }
    buf = malloc(CONFIG_FILE_MAX + 1);
    if (buf == NULL) {
        fclose(f);
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    n = fread(buf, 1, CONFIG_FILE_MAX + 1, f);
    if (ferror(f)) {
        snprintf(why, whylen, "read error: %s", strerror(errno));
        fclose(f);
        free(buf);
        return -1;
    }
    fclose(f);
    if (n > CONFIG_FILE_MAX) {
        snprintf(why, whylen, "larger than %d bytes", CONFIG_FILE_MAX);
        free(buf);
        return -1;
    }
    if (memchr(buf, '\0', n) != NULL) {
        snprintf(why, whylen, "contains a NUL byte");
        free(buf);
        return -1;
    }
    buf[n] = '\0';
    *out = buf;
    return 0;
}

static int key_seen(const parse_state *ps, const char *name)
{
    for (size_t i = 0; i < enr_config_nkeys; i++)
        if (strcmp(enr_config_keys[i].name, name) == 0)
            return ps->seen[i] != 0;
    return 0;
}

unsigned enr_config_liveness_floor_ms(const enr_config *c)
{
    /* A request may read its body for body_timeout_ms, work for
     * request_timeout_ms and be killed kill_grace_ms later: a pool whose
     * every worker does that is slow, not wedged. */
    return c->body_timeout_ms + c->request_timeout_ms + c->kill_grace_ms + ENR_LIVENESS_SLACK_MS;
}

/* `include = PATTERN` (absolute, glob(7)): each file it matches, in name
 * order, is read as if its lines stood here; none matching is no error
 * (an empty conf.d).  A key may still be set once in all the files
 * together, and an included file includes nothing itself. */
/* A directory of the pattern that is not there matches nothing; one that
 * cannot be read would hide its files: that stops the include. */
static int glob_error(const char *path, int err)
{
    (void)path;
    return err != ENOENT && err != ENOTDIR;
}

static int include_files(parse_state *ps, enr_config *c, const char *pattern)
{
    const char *file = ps->file;
    unsigned line = ps->line;
    glob_t g;
    int rc;

    if (ps->including)
        return fail(ps, "include", "an included file cannot include");
    if (pattern[0] != '/')
        return fail(ps, "include", "\"%s\" is not an absolute path", pattern);
    rc = glob(pattern, 0, glob_error, &g);
    if (rc == GLOB_NOMATCH)
        return 0;
    if (rc != 0)
        return fail(ps, "include", "\"%s\": %s", pattern,
                    rc == GLOB_NOSPACE ? "out of memory" : "a directory cannot be read");
    for (size_t i = 0; i < g.gl_pathc; i++) {
        char *text = NULL, why[256];
        if (ps->n_inc == CONFIG_INCLUDE_MAX) {
            rc = fail(ps, "include", "more than %d files", CONFIG_INCLUDE_MAX);
            break;
        }
        if (strlen(g.gl_pathv[i]) >= ENR_PATH_MAX) {
            rc = fail(ps, "include", "%s: path longer than %d bytes", g.gl_pathv[i],
                      ENR_PATH_MAX - 1);
            break;
        }
        if (read_file(g.gl_pathv[i], &text, why, sizeof why) != 0) {
            rc = fail(ps, "include", "%s: %s", g.gl_pathv[i], why);
            break;
        }
        snprintf(ps->inc_path[ps->n_inc], ENR_PATH_MAX, "%s", g.gl_pathv[i]);
        ps->file = ps->inc_path[ps->n_inc++];
        ps->including = 1;
        rc = parse_text(ps, c, text);
        ps->including = 0;
        free(text);
        ps->file = file;
        ps->line = line;
        if (rc != 0)
            break;
    }
    globfree(&g);
    return rc;
}

/* Defaults, then text (NUL-terminated; NULL: the defaults alone),
 * then the cross-key rules; c is written only when all of it passed. */
static int load_text(enr_config *c, char *text, const char *source, char *err, size_t errlen)
{
    enr_config next;
    parse_state ps;
    char *deftext;

    memset(&next, 0, sizeof next);
    memset(&ps, 0, sizeof ps);
    ps.err = err;
    ps.errlen = errlen;
    ps.file = "(built-in)";
    deftext = strdup(enr_config_default_text);
    if (deftext == NULL) {
        snprintf(err, errlen, "(built-in):0: (config): out of memory");
        return -1;
    }
    ps.builtin = 1;
    if (parse_text(&ps, &next, deftext) != 0) {
        free(deftext);
        return -1;
    }
    ps.builtin = 0;
    free(deftext);
    /* A file may override each default once; line 0 means "not in the file". */
    memset(ps.seen, 0, sizeof ps.seen);
    memset(ps.seen_line, 0, sizeof ps.seen_line);
    memset(ps.seen_file, 0, sizeof ps.seen_file);
    if (text != NULL) {
        ps.file = source;
        if (parse_text(&ps, &next, text) != 0)
            return -1;
        /* The jitter defaults to a tenth of max_requests unless set. */
        if (!key_seen(&ps, "max_requests_jitter"))
            next.max_requests_jitter = next.max_requests / 10;
        /* The liveness bound's default makes room for the longest request
         * the other bounds allow; set explicitly, check_whole holds it to that. */
        if (!key_seen(&ps, "liveness_timeout_ms") &&
            next.liveness_timeout_ms < enr_config_liveness_floor_ms(&next))
            next.liveness_timeout_ms = enr_config_liveness_floor_ms(&next);
        snprintf(next.source, sizeof next.source, "%s", source);
        for (size_t i = 0; i < enr_config_nkeys; i++)
            next.key_line[i] = ps.seen_line[i];
    } else {
        snprintf(next.source, sizeof next.source, "(built-in)");
    }
    if (sources(&ps, &next) != 0 || check_whole(&ps, &next) != 0 ||
        enr_config_check_secret_keys(&next, err, errlen) != 0 || check_secret_keys(&ps, &next) != 0)
        return -1;
    *c = next;
    return 0;
}

int enr_config_parse(enr_config *c, const char *text, size_t len, const char *source, char *err,
                     size_t errlen)
{
    char *copy;
    int rc;

    if (source == NULL)
        source = "(text)";
    /* The same limits as a file, so a config accepted here loads from disk. */
    if (len > CONFIG_FILE_MAX) {
        snprintf(err, errlen, "%s:0: (file): larger than %d bytes", source, CONFIG_FILE_MAX);
        return -1;
    }
    if (len > 0 && memchr(text, '\0', len) != NULL) {
        snprintf(err, errlen, "%s:0: (file): contains a NUL byte", source);
        return -1;
    }
    copy = malloc(len + 1);
    if (copy == NULL) {
        snprintf(err, errlen, "%s:0: (file): out of memory", source);
        return -1;
    }
    if (len > 0)
        memcpy(copy, text, len);
    copy[len] = '\0';
    rc = load_text(c, copy, source, err, errlen);
    free(copy);
    return rc;
}

int enr_config_load(enr_config *c, const char *path, char *err, size_t errlen)
{
    char *text = NULL;
    char why[256];
    int rc;

    if (path == NULL)
        return load_text(c, NULL, NULL, err, errlen);
    if (read_file(path, &text, why, sizeof why) != 0) {
        snprintf(err, errlen, "%s:0: (file): %s", path, why);
        return -1;
    }
    rc = load_text(c, text, path, err, errlen);
    free(text);
    return rc;
}
