/*
 * config.h: the configuration of a running enrichd, read from
 * `key = value` lines (or the embedded default) and validated whole
 * before it is used: a bad file never replaces a good one (HUP).
 *
 * A config is immutable once loaded; a reload builds a new one.
 * conf/enrichd.conf documents every key.
 */
#ifndef ENR_CONFIG_H
#define ENR_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/allow.h"
#include "base/secret.h"
#include "base/sources.h"

#define ENR_PATH_MAX 256

/* shared_store_prefix: its bytes at most (config_store.c checks it). */
#define ENR_STORE_PREFIX_MAX 64

/* workers = auto: processes per CPU the master may run on.  Two: on one
 * core with nginx, 2 workers served the most 400 KB batches per second,
 * 1 had the lowest p50, and 3 or 6 cost more CPU per request and a longer
 * tail (docs/benchmarks.md, the pool size per core). */
#define ENR_WORKERS_PER_CPU 2
/* ... and at most this many: what the systemd unit's MemoryMax covers
 * (workers x rss_hard_mb, docs/pool.md).  A larger host sets a number and
 * raises MemoryMax with it. */
#define ENR_WORKERS_AUTO_MAX 6

/* Room for every key of conftable.c's table (checked there at compile time). */
#define ENR_CONFIG_KEYS_MAX 96

/* Their config values: "upstream", then the rows of ENR_SOURCE_LIST. */
extern const char *const enr_config_source_names[ENR_SOURCE_COUNT];

/* What one provider's own API is configured with: the keys NAME_url,
 * NAME_cache_ttl_s, NAME_daily_quota, NAME_WORD_file and
 * NAME_WORD_credential of its row in base/sources.h (confkeys.inc's KS
 * rows). */
typedef struct enr_config_api {
    char url[1024];
    unsigned cache_ttl_s;           /* its answers' lifetime; default 86400 */
    unsigned daily_quota;           /* the day's budget (upstream/budget.h), units; 0: none */
    char secret_file[ENR_PATH_MAX]; /* its key or token, when its row says SECRET */
    char secret_credential[ENR_SECRET_CRED_NAME_MAX];
    /* The secret itself, read like upstream_secret (by
     * enr_config_load_secrets, only when a source uses it); never shown. */
    enr_secret secret;
} enr_config_api;

typedef struct enr_config {
    /* pool */
    char listen[ENR_PATH_MAX];    /* unix path or 127.0.0.1:PORT */
    unsigned listen_mode;         /* octal, default 0660 */
    char listen_group[64];        /* default: nginx's group (www-data) */
    int listen_backlog;           /* default 511 */
    char listen_allow[512];       /* TCP peers accepted; default loopback only */
    enr_allow listen_allow_nets;  /* listen_allow, parsed by config.c */
    unsigned workers;             /* default auto: ENR_WORKERS_PER_CPU per CPU, capped */
    unsigned max_requests;        /* default 10000, 0 = never */
    unsigned max_requests_jitter; /* default 10% of max_requests */
    unsigned rss_soft_mb, rss_hard_mb;
    unsigned fd_soft, fd_hard;
    unsigned request_timeout_ms;  /* worker deadline, below nginx's read timeout */
    unsigned queue_timeout_ms;    /* shed a request that waited longer for a worker; 0 off */
    unsigned body_timeout_ms;     /* the whole body must reach the worker within this */
    unsigned liveness_timeout_ms; /* work waiting and none taken this long: the watchdog stops */
    unsigned drain_timeout_ms;
    size_t max_body_bytes;     /* default 4 MiB */
    unsigned max_records;      /* default 10000 */
    size_t max_output_bytes;   /* default 8 MiB; bounds every string the engine derives */
    unsigned kill_grace_ms;    /* TERM -> KILL escalation delay */
    unsigned write_timeout_ms; /* the answer's write to nginx, apart from the request */
    unsigned idle_exit_s;      /* socket-activated: exit after this long without a request */

    /* upstream enrichment */
    char upstream_url[1024];                 /* empty: enrichment off */
    unsigned upstream_timeout_ms;            /* batch deadline, default 150 */
    unsigned ids_per_call;                   /* default 50 */
    unsigned max_calls_per_batch;            /* default 4 */
    unsigned upstream_max_connections;       /* default 4 */
    unsigned upstream_connect_timeout_ms;    /* DNS + TCP + TLS of one connection, default 2000 */
    unsigned upstream_warm_connections;      /* kept open ahead of batches, default 4 */
    char upstream_ca_file[ENR_PATH_MAX];     /* PEM bundle; empty: the system store */
    char upstream_client_cert[ENR_PATH_MAX]; /* mutual TLS, PEM; with the key */
    char upstream_client_key[ENR_PATH_MAX];
    unsigned cache_entries;            /* default 50000 */
    size_t cache_bytes;                /* default 16 MiB */
    unsigned cache_ttl_s;              /* the aggregator's answers; default 3600 */
    unsigned cache_negative_ttl_s;     /* default 300 */
    unsigned cache_live_ttl_s;         /* a live or upcoming broadcast's answer; default 300 */
    unsigned cache_max_stale_s;        /* served past the lifetime on error; default 7 days */
    char cache_file[ENR_PATH_MAX];     /* empty: in memory only */
    unsigned breaker_failures;         /* default 5 consecutive */
    unsigned breaker_cooldown_ms;      /* default 5000 */
    unsigned breaker_window;           /* calls judged by the ratio rule; default 20, 0 off */
    double breaker_failure_ratio;      /* default 0.5 */
    unsigned upstream_max_calls_per_s; /* host-wide, 0 = no limit (default) */
    unsigned budget_burst_s;           /* how far ahead of the day's pace, in seconds of it */
    char budget_file[ENR_PATH_MAX];    /* empty: $STATE_DIRECTORY/budget, or memory only */
    /* the fleet's shared store (upstream/store.h); shared_store empty: off */
    char shared_store[ENR_PATH_MAX];
    char shared_store_user[ENR_SECRET_CRED_NAME_MAX];
    char shared_store_password_file[ENR_PATH_MAX];
    char shared_store_password_credential[ENR_SECRET_CRED_NAME_MAX];
    char shared_store_prefix[ENR_STORE_PREFIX_MAX + 1];
    unsigned shared_store_timeout_ms; /* a batch's wait for the store, at most */
    unsigned budget_lease_units;      /* a host's lease of the fleet's day; 0: 1 % of it */
    enr_secret shared_store_password; /* read like the others; never shown */
    /* what a call carries besides the ids (secret.h): header lines, and
     * one secret from a file or a systemd credential, put in a header or
     * in the query */
    char upstream_headers[ENR_UP_HEADERS_MAX][ENR_UP_HEADER_MAX];
    unsigned upstream_nheaders;
    char upstream_secret_file[ENR_PATH_MAX];
    char upstream_secret_credential[ENR_SECRET_CRED_NAME_MAX];
    char upstream_secret_header[ENR_UP_HEADER_MAX]; /* "Name" or "Name: ...{secret}..." */
    char upstream_secret_query[ENR_SECRET_CRED_NAME_MAX];
    /* The secret itself: empty after enr_config_load, read by
     * enr_config_load_secrets (the daemon, at start and on each HUP: a
     * rotated file is read then).  Never shown: no reader of enr_config
     * prints it. */
    enr_secret upstream_secret;
    /* Where each provider's records are enriched from (confsource.c):
     * a name of ENR_SOURCE_LIST (the provider's own API, its own
     * provider only), "upstream" (the protocol at upstream_url) or "off";
     * empty in the file: upstream where upstream_url is set, else off. */
    char yt_source[16], vm_source[16], dm_source[16];
    /* Each API of ENR_SOURCE_LIST, by its source ([ENR_SOURCE_UPSTREAM]
     * unused: the aggregator's keys are the upstream_* above). */
    enr_config_api api[ENR_SOURCE_COUNT];
    /* The sources resolved: per enum enr_provider (contract.h), an
     * enum enr_api_id (upstream/api.h) or ENR_SOURCE_OFF. */
    int sources[ENR_SOURCE_PROVIDERS];

    /* operators */
    char status_listen[ENR_PATH_MAX]; /* status process socket */
    unsigned slow_request_ms;         /* log requests slower than this */
    unsigned health_window_s;         /* default 30 */
    double health_max_5xx_ratio;      /* default 0.05 */
    double health_max_degraded_ratio; /* default 0.5 */
    unsigned health_max_p99_ms;       /* default 1000 */
    unsigned min_ready_workers;       /* /readyz 503 below this; default 1 */

    /* a sample of real batches, in the replay trace format (capture.h) */
    char capture_dir[ENR_PATH_MAX]; /* empty: off */
    double capture_sample;          /* share of requests kept, 0..1 */
    size_t capture_max_bytes;       /* the whole directory, every worker */
    unsigned capture_max_age_s;     /* no sample kept longer; 0: no bound */
    char capture_group[64];         /* the files' group (mode 0640); empty: ours */
    size_t capture_queue_bytes;     /* per worker, waiting for the disk */

    /* neighbours -t compares against (confcheck.h); empty: not compared */
    char nginx_fastcgi_conf[ENR_PATH_MAX];

    /* where it came from, for messages */
    char source[ENR_PATH_MAX]; /* file path or "(built-in)" */
    /* the line of source that set each key, in the order of the key table
     * (enr_config_dump); 0: the built-in default */
    unsigned key_line[ENR_CONFIG_KEYS_MAX];
} enr_config;

/* Any provider enriched from anywhere: the upstream client is made. */
int enr_config_enriches(const enr_config *c);

/* Resolves and checks the sources and reads the secrets they need
 * (confsource.c); -1 with the key at fault in *key and why. */
int enr_config_sources(enr_config *c, const char **key, char *why, size_t whylen);

/* The shared store's keys (config_store.c): its address, its prefix and
 * its password's source; -1 with the key at fault in *key and why. */
int enr_config_store_check(const enr_config *c, const char **key, char *why, size_t whylen);

/* The base URL of a source (enum enr_api_id): its configured *_url. */
const char *enr_config_source_url(const enr_config *c, int api);
/* Its answers' lifetime: its *_cache_ttl_s (the aggregator's:
 * cache_ttl_s); 0 out of range. */
unsigned enr_config_source_ttl(const enr_config *c, int api);

/* A source in use is served over https (the TLS files apply to every one). */
int enr_config_any_https(const enr_config *c);

/* The least liveness_timeout_ms may be: what the longest request the other
 * bounds allow takes (body, work, kill grace), plus this. */
#define ENR_LIVENESS_SLACK_MS 1000
unsigned enr_config_liveness_floor_ms(const enr_config *c);

/* The check of a URL key's value (upstream_url and the sources' base
 * URLs): 0, or -1 with the problem in why.  The layer that makes the
 * calls owns it (upstream/upstream_url.h: the URL parsed as libcurl
 * will), and the daemon sets it before it loads a configuration, so
 * that -t and a HUP refuse a URL a worker would.  Unset (a program that
 * only reads the configuration, as `enrichd status -c`), a URL is held
 * to its length alone; a worker's client checks it again at start. */
typedef int (*enr_config_url_check_fn)(const char *url, int *has_query, char *why, size_t whylen);
void enr_config_set_url_check(enr_config_url_check_fn check);

/* Load path (NULL: the embedded default).  On error returns -1 and writes
 * "FILE:LINE: key: problem" into err. */
int enr_config_load(enr_config *c, const char *path, char *err, size_t errlen);

/* The same from text of len bytes (it need not end in a NUL); source
 * names it in messages and in c->source (NULL: "(text)").  Errors as
 * for enr_config_load, with line 0 for whole-text problems. */
int enr_config_parse(enr_config *c, const char *text, size_t len, const char *source, char *err,
                     size_t errlen);

/* A finding that does not stop anything: "FILE:LINE: key: problem". */
typedef void (*enr_warn_fn)(void *arg, const char *msg);

/* ---- credentials (config_cred.c) ----
 * enr_config_load checks what the credential keys say, never the files
 * they name: a command that never calls the provider (-T, `enrichd
 * status -c`, -t) does not need to be able to read them. */

/* What every secret's keys say, whatever the secret: one of its file or
 * credential keys, a credential name that is a file name, the URL it is
 * sent to set, and, while a source sends it, that URL not plain http://
 * to another host than loopback.  0, or -1 and err (enr_config_load calls
 * it: -t, the start and a reload refuse alike). */
int enr_config_check_secret_keys(const enr_config *c, char *err, size_t errlen);

/* The daemon: every credential file c names checked (secret.h's rule of
 * its kind, readable by this process) and every secret read into its
 * enr_secret.  0, or -1 and "FILE:LINE: key: problem" in err (nothing is then kept). */
int enr_config_load_secrets(enr_config *c, char *err, size_t errlen);

/* -t: the same files checked without reading a byte of them: a refusal
 * any user would see (missing, mode, size) is an error; one this user
 * cannot check (EACCES, a credential outside the unit) is a warning.
 * 0, or -1 and err. */
int enr_config_probe_credentials(const enr_config *c, enr_warn_fn warn, void *arg, char *err,
                                 size_t errlen);

/* Wipes and unmaps every secret of c that keep (may be NULL) does not
 * hold too. */
void enr_config_secrets_free(enr_config *c, const enr_config *keep);

/* In a child just forked: the secrets of a and of b (the master's two
 * configurations) unmapped unless keep (the child's, NULL for none) holds
 * them, keep's locked again, and the process dumpable again. */
void enr_config_secrets_child(enr_config *a, enr_config *b, const enr_config *keep);

/* Print the effective configuration to f as a file -c reads back: every
 * key with its value, and a comment saying where it came from (FILE:LINE
 * or the built-in default).  The upstream secret itself is never shown. */
void enr_config_dump(const enr_config *c, FILE *f);

/* The line of c->source that set key; 0 for a built-in default. */
unsigned enr_config_line(const enr_config *c, const char *key);

/* ---- a reload's view of two configurations (conftable.c, by the keys'
 * reload column in confkeys.inc) ---- */

/* Keeps in next the value cur has of every key that changes only on
 * restart (the sockets' settings, budget_file); returns how many next had changed,
 * their names in names ("listen,listen_mode", cut to len). */
unsigned enr_config_keep_restart(enr_config *next, const enr_config *cur, char *names, size_t len);

/* What makes cur's upstream cache wrong for next: the first key of the
 * cache's identity or layout next changes (named by its enr_config field:
 * "upstream_headers" for the upstream_header lines), else the first
 * secret whose bytes differ (enr_config_secret_change), else NULL.  Only
 * names: never a value. */
const char *enr_config_cache_change(const enr_config *next, const enr_config *cur);

/* The first secret whose bytes differ between a and b ("upstream_secret",
 * or an API's NAME_WORD, as "youtube_key"; config_cred.c), or NULL. */
const char *enr_config_secret_change(const enr_config *a, const enr_config *b);

/* One part of a configuration's cache identity: a name and its bytes. */
typedef void (*enr_config_part_fn)(void *arg, const char *name, const void *bytes, size_t len);

/* Each part of c's cache identity to fn, in order: the value of every key
 * whose row says IDENTITY (named by its field; an upstream_header line
 * each), then each secret's bytes (enr_config_secret_parts).  What
 * enr_config_cache_change compares, for a reader that keeps it (a digest). */
void enr_config_identity(const enr_config *c, enr_config_part_fn fn, void *arg);
void enr_config_secret_parts(const enr_config *c, enr_config_part_fn fn, void *arg);

/* The embedded default configuration text (also what `make run` serves). */
extern const char enr_config_default_text[];

#endif
