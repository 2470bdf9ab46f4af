/*
 * test_config.c: the configuration parser's rules through
 * enr_config_parse(): the embedded default, every kind of value, and
 * that each error names the source, the line and the key; and what a
 * reload does with each key by its row (confkeys.inc).
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/config.h"
#include "base/config_int.h"
#include "upstream/upstream_url.h"
#include "ops/confcheck.h"
#include "engine/contract.h"
#include "upstream/api.h"
#include "t.h"

static enr_config c;
static char err[512];

static int parse(const char *text)
{
    err[0] = '\0';
    return enr_config_parse(&c, text, strlen(text), "t.conf", err, sizeof err);
}

/* parse(), then the secrets read as the daemon reads them. */
static int load(const char *text)
{
    int rc = parse(text);

    if (rc == 0)
        rc = enr_config_load_secrets(&c, err, sizeof err);
    return rc;
}

/* The text fails, and the message starts with "t.conf:LINE: KEY". */
static void bad(const char *text, const char *where)
{
    int rc = parse(text);

    T_CHECK(rc != 0, "accepted: %s", text);
    T_CHECK(strncmp(err, where, strlen(where)) == 0, "error \"%s\" should start with \"%s\"", err,
            where);
}

/* What an operator's first mistakes are told. */
static void test_messages(void)
{
    bad("workers = 2\nworker = 4\n", "t.conf:2: worker: unknown key (did you mean \"workers\"?)");
    bad("request_timout_ms = 100\n",
        "t.conf:1: request_timout_ms: unknown key (did you mean \"request_timeout_ms\"?)");
    bad("colour = red\n", "t.conf:1: colour: unknown key");
    T_CHECK(strstr(err, "did you mean") == NULL, "no guess when nothing is close: %s", err);
    bad("\xEF\xBB\xBFworkers = 2\n", "t.conf:1: (file): starts with a UTF-8 byte order mark");
    bad("request_timeout_ms = 150ms\n", "t.conf:1: request_timeout_ms: \"150ms\" is not");
    T_CHECK(strstr(err, "drop the unit \"ms\"") && strstr(err, "milliseconds: 150)"), "%s", err);
    bad("idle_exit_s = 30s\n", "t.conf:1: idle_exit_s:");
    T_CHECK(strstr(err, "drop the unit \"s\"") && strstr(err, "in seconds: 30)"), "%s", err);
    bad("max_body_bytes = 4MB\n", "t.conf:1: max_body_bytes:");
    T_CHECK(strstr(err, "drop the unit \"MB\"") && strstr(err, "4m)"), "%s", err);
    bad("workers = two\n", "t.conf:1: workers:");
    T_CHECK(strstr(err, "drop the unit") == NULL, "no unit hint without digits: %s", err);
}

/* -T: every key once, each origin said, and read back the same. */
static void test_dump(void)
{
    static char out1[16384], out2[16384];
    static const char text[] = "# a comment\nworkers = 3\nupstream_header = X-A: 1\n"
                               "health_max_5xx_ratio = 0.05\nlisten_mode = 0640\n";
    FILE *f;

    T_CHECK(parse(text) == 0, "%s", err);
    T_CHECK(enr_config_line(&c, "workers") == 2 && enr_config_line(&c, "listen_mode") == 5 &&
                enr_config_line(&c, "listen") == 0,
            "the line of each key");
    f = fmemopen(out1, sizeof out1, "w");
    enr_config_dump(&c, f);
    fclose(f);
    T_CHECK(strstr(out1, "\nworkers = 3  # t.conf:2\n") != NULL, "workers from t.conf:2:\n%s",
            out1);
    T_CHECK(strstr(out1, "\nlisten_mode = 0640  # t.conf:5\n") != NULL, "octal mode");
    T_CHECK(strstr(out1, "\nupstream_header = X-A: 1  # t.conf:3\n") != NULL, "a header line");
    T_CHECK(strstr(out1, "\nhealth_max_5xx_ratio = 0.05  # t.conf:4\n") != NULL, "a ratio");
    T_CHECK(strstr(out1, "\nmax_requests = 10000  # built-in default\n") != NULL, "a default");
    T_CHECK(strstr(out1, "\nupstream_url =  # built-in default\n") != NULL, "an empty default");
    T_CHECK(parse(out1) == 0, "the dump reads back: %s", err);
    f = fmemopen(out2, sizeof out2, "w");
    enr_config_dump(&c, f);
    fclose(f);
    /* read back, each key now comes from a line of the dump: the values agree */
    {
        char *a = out1, *b = out2;
        int same = 1;
        a = strchr(a, '\n') + 1;
        b = strchr(b, '\n') + 1;
        while (*a && *b) {
            size_t la = strcspn(a, "#"), lb = strcspn(b, "#");
            if (la != lb || memcmp(a, b, la) != 0)
                same = 0;
            a += strcspn(a, "\n") + (a[strcspn(a, "\n")] != 0);
            b += strcspn(b, "\n") + (b[strcspn(b, "\n")] != 0);
        }
        T_CHECK(same && !*a && !*b, "the same values after a round trip");
    }
}

static void test_nginx_time(void)
{
    T_CHECK(enr_nginx_time_ms("10s", 3) == 10000, "10s");
    T_CHECK(enr_nginx_time_ms("60", 2) == 60000, "a bare number is seconds");
    T_CHECK(enr_nginx_time_ms("200ms", 5) == 200, "200ms");
    T_CHECK(enr_nginx_time_ms("1m30s", 5) == 90000, "1m30s");
    T_CHECK(enr_nginx_time_ms("1h", 2) == 3600000, "1h");
    T_CHECK(enr_nginx_time_ms("", 0) == -1 && enr_nginx_time_ms("s", 1) == -1 &&
                enr_nginx_time_ms("10x", 3) == -1 && enr_nginx_time_ms("$var", 4) == -1,
            "not times");
}

/* The sources: their defaults (a configuration written before them keeps
 * its meaning), each API for its own provider only, the secrets a source
 * needs named by -t, and read only when used. */
/* The parser leaves the built-in URLs unchecked (the check loads
 * libcurl, which a daemon without a source never needs): each must pass
 * the check a file's URL gets. */
static void test_builtin_urls(void)
{
    char why[200];
    int n = 0;

    T_CHECK(parse("") == 0, "the defaults parse: %s", err);
    for (size_t i = 0; i < enr_config_nkeys; i++) {
        const char *v = (const char *)&c + enr_config_keys[i].off;
        if (enr_config_keys[i].type != ENR_KEY_URL || v[0] == '\0')
            continue;
        n++;
        T_CHECK(enr_upstream_url_check(v, NULL, why, sizeof why) == 0, "built-in %s = %s: %s",
                enr_config_keys[i].name, v, why);
    }
    T_CHECK(n >= 3, "the providers' built-in URLs were checked (%d)", n);
}

static void test_sources(void)
{
    char dir[] = "/tmp/enr-conf-XXXXXX", key[64], text[512];
    FILE *f;

    T_CHECK(parse("") == 0 && c.sources[ENR_PROV_YT] == ENR_SOURCE_OFF &&
                c.sources[ENR_PROV_VM] == ENR_SOURCE_OFF &&
                c.sources[ENR_PROV_DM] == ENR_SOURCE_OFF && !enr_config_enriches(&c) &&
                strcmp(c.yt_source, "off") == 0,
            "no upstream_url: every source off (%s)", err);
    T_CHECK(parse("upstream_url = http://127.0.0.1:1/m\n") == 0 &&
                c.sources[ENR_PROV_YT] == ENR_API_UPSTREAM &&
                c.sources[ENR_PROV_VM] == ENR_API_UPSTREAM &&
                c.sources[ENR_PROV_DM] == ENR_API_UPSTREAM && strcmp(c.dm_source, "upstream") == 0,
            "upstream_url alone: every source upstream, as before (%s)", err);
    T_CHECK(strcmp(c.api[ENR_SOURCE_YOUTUBE].url, "https://www.googleapis.com/youtube/v3") == 0 &&
                strcmp(c.api[ENR_SOURCE_VIMEO].url, "https://api.vimeo.com") == 0 &&
                strcmp(c.api[ENR_SOURCE_DAILYMOTION].url, "https://api.dailymotion.com") == 0,
            "the public base URLs by default");
    T_CHECK(parse("dm_source = dailymotion\n") == 0 &&
                c.sources[ENR_PROV_DM] == ENR_API_DAILYMOTION &&
                c.sources[ENR_PROV_YT] == ENR_SOURCE_OFF && enr_config_enriches(&c),
            "Dailymotion needs no secret: %s", err);
    T_CHECK(
        parse("upstream_url = http://127.0.0.1:1/m\ndm_source = dailymotion\nvm_source = off\n") ==
                0 &&
            c.sources[ENR_PROV_YT] == ENR_API_UPSTREAM && c.sources[ENR_PROV_VM] == ENR_SOURCE_OFF,
        "sources mixed: %s", err);
    bad("yt_source = vimeo\n", "t.conf:1: yt_source: vimeo is the API of another provider");
    bad("\ndm_source = youtube\n", "t.conf:2: dm_source: youtube is the API of another");
    bad("vm_source = netflix\n", "t.conf:1: vm_source: \"netflix\" is not a source");
    bad("yt_source = upstream\n", "t.conf:1: yt_source: upstream needs upstream_url");
    bad("yt_source = youtube\n", "t.conf:1: yt_source: youtube needs youtube_key_file or "
                                 "youtube_key_credential");
    bad("vm_source = vimeo\n", "t.conf:1: vm_source: vimeo needs vimeo_token_file or "
                               "vimeo_token_credential");
    bad("dm_source = dailymotion\ndailymotion_url = ftp://x/\n", "t.conf:2: dailymotion_url");
    /* A CA file needs a source served over https, any of them. */
    bad("upstream_url = http://127.0.0.1:1/m\nupstream_ca_file = /etc/hostname\n",
        "t.conf:2: upstream_ca_file: needs a source served over https://");
    T_CHECK(parse("upstream_url = http://127.0.0.1:1/m\ndm_source = dailymotion\n"
                  "upstream_ca_file = /etc/hostname\n") == 0,
            "the CA file applies to the https source: %s", err);

    T_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(key, sizeof key, "%s/yt.key", dir);
    f = fopen(key, "w");
    T_CHECK(f != NULL, "key file");
    if (f == NULL)
        return;
    fputs("AIzaFAKEKEY123\n", f);
    fclose(f);
    T_CHECK(chmod(key, 0600) == 0, "chmod");
    snprintf(text, sizeof text, "yt_source = youtube\nyoutube_key_file = %s\n", key);
    T_CHECK(load(text) == 0 && c.sources[ENR_PROV_YT] == ENR_API_YOUTUBE &&
                c.api[ENR_SOURCE_YOUTUBE].secret.len == 14 &&
                memcmp(c.api[ENR_SOURCE_YOUTUBE].secret.bytes, "AIzaFAKEKEY123", 14) == 0,
            "the key read: %s", err);
    enr_config_secrets_free(&c, NULL);
    snprintf(text, sizeof text,
             "yt_source = youtube\nyoutube_key_file = %s\nyoutube_key_credential = yt\n", key);
    bad(text, "t.conf:3: youtube_key_credential: set youtube_key_file or");
    /* A key no source uses is not read. */
    snprintf(text, sizeof text, "youtube_key_file = %s\n", key);
    T_CHECK(load(text) == 0 && c.api[ENR_SOURCE_YOUTUBE].secret.len == 0, "unused key not read: %s",
            err);
    T_CHECK(chmod(key, 0644) == 0, "chmod");
    snprintf(text, sizeof text, "yt_source = youtube\nyoutube_key_file = %s\n", key);
    T_CHECK(load(text) != 0 && strncmp(err, "t.conf:2: youtube_key_file:", 27) == 0,
            "a key open to others refused: %s", err);
    T_CHECK(strstr(err, "AIza") == NULL, "the key is never quoted: %s", err);
    unlink(key);
    rmdir(dir);
}

/* The keys only a restart changes: the sockets' settings and the budget's
 * file.  The master binds its sockets and maps the budget's page once and
 * they stay across generations, so a HUP that applied one of these would
 * describe sockets (or a file) that are not the ones in use. */
static const char *const restart_keys[][2] = {
    {"listen", "listen = /tmp/enr-t-other.sock\n"},
    {"listen_mode", "listen_mode = 0600\n"},
    {"listen_group", "listen_group =\n"},
    {"listen_backlog", "listen_backlog = 64\n"},
    {"status_listen", "status_listen = /tmp/enr-t-other-status.sock\n"},
    {"budget_file", "budget_file = /tmp/enr-t-budget\n"},
};
#define N_RESTART (sizeof restart_keys / sizeof restart_keys[0])

/* The keys whose change starts a new, empty upstream cache: its identity
 * (where a call goes, what it carries, on whose account) ... */
static const char *const identity_keys[] = {
    "upstream_url",
    "upstream_header",
    "upstream_secret_file",
    "upstream_secret_credential",
    "upstream_secret_header",
    "upstream_secret_query",
    "yt_source",
    "vm_source",
    "dm_source",
    "youtube_url",
    "vimeo_url",
    "dailymotion_url",
    "youtube_key_file",
    "youtube_key_credential",
    "vimeo_token_file",
    "vimeo_token_credential",
};
/* ... and its layout. */
static const char *const layout_keys[] = {"cache_entries", "cache_bytes", "cache_file"};

static int named(const char *name, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(name, list[i]) == 0)
            return 1;
    return 0;
}
#define NAMED(name, list) named(name, list, sizeof list / sizeof list[0])

static const enr_config_key *row(const char *name)
{
    for (size_t i = 0; i < enr_config_nkeys; i++)
        if (strcmp(enr_config_keys[i].name, name) == 0)
            return &enr_config_keys[i];
    return NULL;
}

/* The identity's parts, one after another (names and bytes), for a test
 * to compare two configurations' by. */
typedef struct parts {
    char buf[16384];
    size_t n, count;
} parts;

static void add_part(void *arg, const char *name, const void *bytes, size_t len)
{
    parts *p = arg;
    size_t need = strlen(name) + 1 + sizeof len + len;

    p->count++;
    if (p->n + need > sizeof p->buf)
        return;
    memcpy(p->buf + p->n, name, strlen(name) + 1);
    memcpy(p->buf + p->n + strlen(name) + 1, &len, sizeof len);
    if (len)
        memcpy(p->buf + p->n + strlen(name) + 1 + sizeof len, bytes, len);
    p->n += need;
}

static int same_identity(const enr_config *a, const enr_config *b)
{
    static parts x, y;

    memset(&x, 0, sizeof x);
    memset(&y, 0, sizeof y);
    enr_config_identity(a, add_part, &x);
    enr_config_identity(b, add_part, &y);
    return x.count == y.count && x.n == y.n && memcmp(x.buf, y.buf, x.n) == 0;
}

/* What a HUP does with each key, by its row: the socket settings are kept
 * from the running configuration (with every other change applied), the
 * cache's identity and layout give a new cache, and nothing else does. */
static void test_reload_rows(void)
{
    static enr_config cur, next;
    size_t n_restart = 0, n_cache = 0;

    for (size_t i = 0; i < enr_config_nkeys; i++) {
        const enr_config_key *k = &enr_config_keys[i];
        int restart = 0;
        for (size_t j = 0; j < N_RESTART; j++)
            restart |= strcmp(k->name, restart_keys[j][0]) == 0;
        n_restart += k->reload == ENR_RELOAD_RESTART;
        n_cache += k->reload == ENR_RELOAD_IDENTITY || k->reload == ENR_RELOAD_LAYOUT;
        T_CHECK((k->reload == ENR_RELOAD_RESTART) == restart, "%s: restart-only is %d, want %d",
                k->name, k->reload == ENR_RELOAD_RESTART, restart);
        T_CHECK((k->reload == ENR_RELOAD_IDENTITY) == NAMED(k->name, identity_keys),
                "%s: the cache's identity is %d", k->name, k->reload == ENR_RELOAD_IDENTITY);
        T_CHECK((k->reload == ENR_RELOAD_LAYOUT) == NAMED(k->name, layout_keys),
                "%s: the cache's layout is %d", k->name, k->reload == ENR_RELOAD_LAYOUT);
        /* kept by copying its field alone: no second home */
        T_CHECK(k->reload != ENR_RELOAD_RESTART ||
                    (k->type != ENR_KEY_HEADER && k->type != ENR_KEY_ALLOW),
                "%s: a restart-only key is a plain field", k->name);
    }
    T_CHECK(n_restart == N_RESTART && n_cache == sizeof identity_keys / sizeof identity_keys[0] +
                                                     sizeof layout_keys / sizeof layout_keys[0],
            "every key named above has a row: %zu restart-only, %zu new-cache", n_restart, n_cache);

    T_CHECK(parse("") == 0, "defaults: %s", err);
    cur = c;
    for (size_t j = 0; j < N_RESTART; j++) {
        const enr_config_key *k = row(restart_keys[j][0]);
        char text[256];
        char kept[64];
        snprintf(text, sizeof text, "%sworkers = 3\n", restart_keys[j][1]);
        T_CHECK(parse(text) == 0, "%s: %s", text, err);
        next = c;
        T_CHECK(k != NULL && memcmp((char *)&next + k->off, (char *)&cur + k->off, k->size) != 0,
                "%s: the file changes it", restart_keys[j][0]);
        T_CHECK(enr_config_keep_restart(&next, &cur, kept, sizeof kept) == 1 &&
                    strcmp(kept, restart_keys[j][0]) == 0,
                "a HUP changing %s is told so: %s", restart_keys[j][0], kept);
        T_CHECK(k != NULL && memcmp((char *)&next + k->off, (char *)&cur + k->off, k->size) == 0,
                "a HUP keeps the running %s", restart_keys[j][0]);
        T_CHECK(next.workers == 3, "and applies the rest: workers %u", next.workers);
        T_CHECK(enr_config_cache_change(&next, &cur) == NULL, "and keeps the cache");
    }
    {
        char kept[64];
        T_CHECK(parse("listen_backlog = 64\nlisten_mode = 0600\n") == 0, "%s", err);
        T_CHECK(enr_config_keep_restart(&c, &cur, kept, sizeof kept) == 2 &&
                    strcmp(kept, "listen_mode,listen_backlog") == 0 && c.listen_backlog == 511 &&
                    c.listen_mode == 0660,
                "two at once: both kept, both named: %s", kept);
    }
    T_CHECK(parse("workers = 3\ncache_ttl_s = 60\nlisten_allow = 10.0.0.0/8\n") == 0, "%s", err);
    next = c;
    T_CHECK(enr_config_keep_restart(&next, &cur, NULL, 0) == 0 && next.workers == 3 &&
                next.cache_ttl_s == 60 && strcmp(next.listen_allow, "10.0.0.0/8") == 0,
            "live keys change on HUP");
    T_CHECK(enr_config_cache_change(&next, &cur) == NULL, "a new TTL keeps the cache");
    T_CHECK(parse("cache_bytes = 8m\n") == 0, "%s", err);
    T_CHECK(enr_config_cache_change(&c, &cur) != NULL &&
                strcmp(enr_config_cache_change(&c, &cur), "cache_bytes") == 0,
            "a new cache size is a new cache");
    T_CHECK(parse("upstream_url = http://127.0.0.1:1/m\nupstream_header = X-Tenant: a\n") == 0,
            "%s", err);
    cur = c;
    T_CHECK(parse("upstream_url = http://127.0.0.1:1/m\nupstream_header = X-Tenant: b\n") == 0,
            "%s", err);
    T_CHECK(enr_config_cache_change(&c, &cur) != NULL &&
                strcmp(enr_config_cache_change(&c, &cur), "upstream_headers") == 0,
            "another header line is a new cache, named as the log always named it");
    T_CHECK(!same_identity(&c, &cur), "and another identity (a cache file's digest)");
    {
        static enr_config same;
        T_CHECK(parse("upstream_url = http://127.0.0.1:1/m\nupstream_header = X-Tenant: a\n"
                      "cache_bytes = 8m\ncache_ttl_s = 60\n") == 0,
                "%s", err);
        same = c;
        T_CHECK(same_identity(&same, &cur), "the layout and the TTLs are not the identity");
        T_CHECK(parse("upstream_url = http://127.0.0.1:1/n\nupstream_header = X-Tenant: a\n") == 0,
                "%s", err);
        T_CHECK(!same_identity(&c, &cur), "another URL is another identity");
    }
}

/* The built-in text, workers = auto, and a valid file's values. */
static void test_defaults(void)
{
    T_CHECK(parse(enr_config_default_text) == 0, "built-in text: %s", err);
    {
        cpu_set_t set;
        unsigned ncpu = sched_getaffinity(0, sizeof set, &set) == 0 ? (unsigned)CPU_COUNT(&set) : 0;
        unsigned want = ncpu * ENR_WORKERS_PER_CPU;
        if (want > ENR_WORKERS_AUTO_MAX)
            want = ENR_WORKERS_AUTO_MAX;
        T_CHECK(ncpu == 0 || c.workers == want, "default workers %u (auto, want %u)", c.workers,
                want);
    }
    T_CHECK(parse("workers = auto\n") == 0 && c.workers >= ENR_WORKERS_PER_CPU,
            "workers = auto: %s", err);
    T_CHECK(parse("workers = 6\n") == 0 && c.workers == 6, "workers = 6: %u", c.workers);
    T_CHECK(c.listen_mode == 0660, "default mode %o", c.listen_mode);
    T_CHECK(c.upstream_url[0] == '\0', "enrichment off by default");
    T_CHECK(c.request_timeout_ms > c.upstream_timeout_ms, "deadlines nest");

    T_CHECK(parse("# comment\n\n  workers = 3   # trailing\r\nmax_body_bytes = 2m\n"
                  "listen_mode = 0600\nhealth_max_5xx_ratio = 0.25\n") == 0,
            "valid file: %s", err);
    T_CHECK(c.workers == 3, "workers %u", c.workers);
    T_CHECK(c.max_body_bytes == 2u << 20, "size suffix: %zu", c.max_body_bytes);
    T_CHECK(c.listen_mode == 0600, "octal mode %o", c.listen_mode);
    T_CHECK(c.health_max_5xx_ratio == 0.25, "ratio %g", c.health_max_5xx_ratio);
    T_CHECK(c.max_records == 10000, "keys not given keep their defaults (%u)", c.max_records);
}

/* The addresses the two sockets may take. */
static void test_listen(void)
{
    T_CHECK(parse("listen = 127.0.0.1:9000\nstatus_listen = 127.0.0.1:9001\n") == 0,
            "TCP listen: %s", err);
    T_CHECK(strcmp(c.listen, "127.0.0.1:9000") == 0, "listen %s", c.listen);
    /* The workers' socket on any address (listen_allow guards it); the
     * status socket only on unix or loopback. */
    T_CHECK(parse("listen = 198.51.100.7:9000\n") == 0, "TCP listen on any IPv4: %s", err);
    T_CHECK(parse("listen = [::1]:9000\nstatus_listen = [::1]:9001\n") == 0, "IPv6: %s", err);
    T_CHECK(parse("listen = [2001:db8::7]:9000\n") == 0, "any IPv6: %s", err);
    bad("status_listen = 198.51.100.7:9001\n", "t.conf:1: status_listen");
    bad("listen = example.org:9000\n", "t.conf:1: listen"); /* no name resolution */
    bad("listen = 127.0.0.1:0\n", "t.conf:1: listen");
    bad("listen = 127.0.0.1:65536\n", "t.conf:1: listen");
    bad("listen = 127.0.0.1:+80\n", "t.conf:1: listen");
    bad("listen = [::1:9000\n", "t.conf:1: listen");
    bad("listen = ::1:9000\n", "t.conf:1: listen");
    bad("listen = 127.0.0.1\n", "t.conf:1: listen");
    bad("listen = relative.sock\n", "t.conf:1: listen");
}

/* Values refused, each naming its line and key, and the rules between keys. */
static void test_refused(void)
{
    bad("workers = 2\nno_such_key = 1\n", "t.conf:2: no_such_key");
    bad("\n\nworkers = 0\n", "t.conf:3: workers");
    bad("workers = 257\n", "t.conf:1: workers");
    bad("workers = 3x\n", "t.conf:1: workers");
    bad("workers = -1\n", "t.conf:1: workers");
    bad("listen = 127.0.0.1:\t910\n", "t.conf:1: listen"); /* a number starts with a digit */
    bad("workers = 2\nworkers = 3\n", "t.conf:2: workers");
    bad("listen /tmp/x.sock\n", "t.conf:1");
    bad("health_max_5xx_ratio = 1.5\n", "t.conf:1: health_max_5xx_ratio");
    bad("health_max_degraded_ratio = nan\n", "t.conf:1: health_max_degraded_ratio");
    bad("rss_soft_mb = 200\nrss_hard_mb = 100\n", "t.conf:1: rss_soft_mb");
    bad("upstream_timeout_ms = 5000\nrequest_timeout_ms = 2000\n", "t.conf:1: upstream_timeout_ms");
    bad("listen = /tmp/a.sock\nstatus_listen = /tmp/a.sock\n", "t.conf:2: status_listen");
    bad("upstream_url = ftp://example.org/x\n", "t.conf:1: upstream_url");
    /* What the worker's upstream client would refuse at start. */
    bad("upstream_url = https://example.com/x#frag\n", "t.conf:1: upstream_url: must not have");
    bad("upstream_url = http://exa mple.com/\n", "t.conf:1: upstream_url: white space");
    bad("upstream_url = http://\n", "t.conf:1: upstream_url: no host");
    bad("upstream_url = https://[::1\n", "t.conf:1: upstream_url: bad IPv6");
    /* Without the upstream layer's check (a program that only reads the
     * configuration) a URL is held to its length alone. */
    enr_config_set_url_check(NULL);
    T_CHECK(parse("upstream_url = http://exa mple.com/\n") == 0,
            "no URL check set: the URL is not parsed (%s)", err);
    enr_config_set_url_check(enr_upstream_url_check);
    bad("rss_hard_mb = 2\nrss_soft_mb = 1\n", "t.conf:2: rss_soft_mb: 1 is below");
    bad("upstream_url = http://127.0.0.1:1/m\ncache_bytes = 64m\n",
        "t.conf:2: cache_bytes: must be below rss_soft_mb (64 MiB)");
    T_CHECK(
        parse("cache_bytes = 64m\n") == 0 &&
            parse("upstream_url = http://127.0.0.1:1/m\ncache_bytes = 64m\nrss_soft_mb = 0\n") == 0,
        "a large cache is fine with enrichment off or no soft RSS bound: %s", err);
    bad("fd_hard = 8\n", "t.conf:1: fd_hard: 8 is below");
    T_CHECK(parse("upstream_url = http://[::1]:8080/v1/meta?key=a\n") == 0,
            "a bracketed IPv6 URL with a port and a query: %s", err);
    bad("listen_group = nosuchgroupxyz\n", "t.conf:1: listen_group");
    bad("listen_mode = 0999\n", "t.conf:1: listen_mode");
    bad("breaker_failure_ratio = 0\n", "t.conf:1: breaker_failure_ratio");
    bad("breaker_window = 129\n", "t.conf:1: breaker_window");
    T_CHECK(parse("breaker_window = 0\nbreaker_failure_ratio = 0\n") == 0,
            "ratio 0 is fine with the window rule off: %s", err);
}

/* A secret over plain http:// to another host is refused, whichever
 * provider's it is (one rule over the secrets), while its source sends
 * it; loopback and https pass. */
static void test_cleartext_secrets(void)
{
    static const struct {
        const char *conf, *where;
    } refused[] = {
        {"yt_source = youtube\nyoutube_key_file = /k\nyoutube_url = http://192.0.2.1:9/v3\n",
         "t.conf:2: youtube_key_file: refused: the secret would go in clear text to another "
         "host (youtube_url = http://192.0.2.1:9/v3)"},
        {"yt_source = youtube\nyoutube_key_credential = yt\nyoutube_url = http://yt.example/\n",
         "t.conf:2: youtube_key_credential: refused: the secret would go in clear text"},
        {"vm_source = vimeo\nvimeo_url = http://10.1.2.3:80/\nvimeo_token_file = /t\n",
         "t.conf:3: vimeo_token_file: refused: the secret would go in clear text to another "
         "host (vimeo_url = http://10.1.2.3:80/)"},
        {"upstream_url = http://10.20.30.40:8080/v1?k=v\nupstream_secret_file = /s\n"
         "upstream_secret_header = X-Api-Key\n",
         "t.conf:2: upstream_secret_file: refused: the secret would go in clear text to another "
         "host (upstream_url = http://10.20.30.40:8080/v1?[redacted])"},
        {"upstream_url = http://127.0.0.1.evil.example/\nupstream_secret_credential = up\n"
         "upstream_secret_header = X-Api-Key\n",
         "t.conf:2: upstream_secret_credential: refused"},
    };
    static const char *const allowed[] = {
        "yt_source = youtube\nyoutube_key_file = /k\nyoutube_url = http://127.0.0.1:9/v3\n",
        "yt_source = youtube\nyoutube_key_file = /k\nyoutube_url = http://localhost:9/v3\n",
        "vm_source = vimeo\nvimeo_token_file = /t\nvimeo_url = http://[::1]:9/\n",
        "vm_source = vimeo\nvimeo_token_file = /t\nvimeo_url = https://10.1.2.3/\n",
        ("upstream_url = https://10.20.30.40/v1\nupstream_secret_file = /s\n"
         "upstream_secret_header = X-Api-Key\n"),
        /* no source sends it: never read, never sent */
        "yt_source = off\nyoutube_key_file = /k\nyoutube_url = http://192.0.2.1:9/v3\n",
        /* no secret: nothing to leak */
        "dm_source = dailymotion\ndailymotion_url = http://192.0.2.1:9/\n",
    };

    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        bad(refused[i].conf, refused[i].where);
    T_CHECK(strstr(err, "use https://, or a loopback address") != NULL, "says what to do: %s", err);
    for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++)
        T_CHECK(parse(allowed[i]) == 0, "accepted: %s (%s)", allowed[i], err);
}

/* Liveness: its default makes room for the longest request the other
 * bounds allow; set explicitly below that, it is refused. */
static void test_liveness(void)
{
    T_CHECK(parse("") == 0 && c.liveness_timeout_ms == 20000 && c.queue_timeout_ms == 1000 &&
                c.body_timeout_ms == 5000,
            "defaults: liveness %u queue %u body %u", c.liveness_timeout_ms, c.queue_timeout_ms,
            c.body_timeout_ms);
    T_CHECK(parse("request_timeout_ms = 30000\n") == 0 &&
                c.liveness_timeout_ms == 5000 + 30000 + 2000 + ENR_LIVENESS_SLACK_MS,
            "unset, raised to the floor: %u (%s)", c.liveness_timeout_ms, err);
    T_CHECK(parse("liveness_timeout_ms = 10000\n") == 0 && c.liveness_timeout_ms == 10000,
            "at the floor: %s", err);
    bad("liveness_timeout_ms = 9999\n", "t.conf:1: liveness_timeout_ms");
    bad("body_timeout_ms = 9000\nliveness_timeout_ms = 12000\n", "t.conf:2: liveness_timeout_ms");
    T_CHECK(parse("queue_timeout_ms = 0\n") == 0 && c.queue_timeout_ms == 0, "shedding off: %s",
            err);
}

/* A NUL byte cannot hide the lines after it. */
static void test_nul_byte(void)
{
    static const char nul[] = "workers = 2\n\0workers = 3\n";
    T_CHECK(enr_config_parse(&c, nul, sizeof nul - 1, "t.conf", err, sizeof err) != 0,
            "a NUL byte is refused");
}

int main(void)
{
    /* As the daemon does: the upstream layer's check of a URL. */
    enr_config_set_url_check(enr_upstream_url_check);
    test_defaults();
    test_listen();
    test_refused();
    test_cleartext_secrets();
    test_liveness();
    test_nul_byte();
    test_messages();
    test_sources();
    test_builtin_urls();
    test_dump();
    test_nginx_time();
    test_reload_rows();
    T_DONE();
}
