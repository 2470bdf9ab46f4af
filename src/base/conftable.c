/*
 * conftable.c: the configuration's keys (config_int.h): the built-in
 * defaults as text, the table that says each key's type, bounds and field,
 * and the two readers of a parsed configuration by key: -T's printout
 * (enr_config_dump) and enr_config_line.
 *
 * Adding a key is one row of enr_config_keys plus its default line in
 * enr_config_default_text, and its documentation in conf/enrichd.conf
 * (the tests hold all three to the same keys and defaults).
 *
 * Invariants: every row's offset and size are its field's in enr_config
 * (the F() macro, never written by hand); the defaults text parses on its
 * own (config.c reads it before every file).
 */
#include "base/config.h"
#include "base/config_int.h"

#include <stdio.h>
#include <string.h>

const char enr_config_default_text[] =
    "# enrichd built-in configuration (conf/enrichd.conf documents each key)\n"
    "listen = /run/enrichd/enrichd.sock\n"
    "listen_mode = 0660\n"
    "listen_group = www-data\n"
    "listen_backlog = 511\n"
    "listen_allow = 127.0.0.0/8 ::1\n"
    "workers = auto\n"
    "max_requests = 10000\n"
    "max_requests_jitter = 1000\n"
    "rss_soft_mb = 64\n"
    "rss_hard_mb = 128\n"
    "fd_soft = 256\n"
    "fd_hard = 512\n"
    "request_timeout_ms = 2000\n"
    "queue_timeout_ms = 1000\n"
    "body_timeout_ms = 5000\n"
    "liveness_timeout_ms = 20000\n"
    "drain_timeout_ms = 10000\n"
    "max_body_bytes = 4194304\n"
    "max_records = 10000\n"
    "max_output_bytes = 8388608\n"
    "kill_grace_ms = 2000\n"
    "write_timeout_ms = 10000\n"
    "idle_exit_s = 0\n"
    "upstream_url =\n"
    "upstream_timeout_ms = 150\n"
    "ids_per_call = 50\n"
    "max_calls_per_batch = 4\n"
    "upstream_max_connections = 4\n"
    "upstream_connect_timeout_ms = 2000\n"
    "upstream_warm_connections = 4\n"
    "upstream_ca_file =\n"
    "upstream_client_cert =\n"
    "upstream_client_key =\n"
    "cache_entries = 50000\n"
    "cache_bytes = 16777216\n"
    "cache_ttl_s = 3600\n"
    "cache_negative_ttl_s = 300\n"
    "youtube_cache_ttl_s = 86400\n"
    "vimeo_cache_ttl_s = 86400\n"
    "dailymotion_cache_ttl_s = 86400\n"
    "cache_max_stale_s = 604800\n"
    "cache_file =\n"
    "breaker_failures = 5\n"
    "breaker_cooldown_ms = 5000\n"
    "breaker_window = 20\n"
    "breaker_failure_ratio = 0.5\n"
    "upstream_max_calls_per_s = 0\n"
    "upstream_header =\n"
    "upstream_secret_file =\n"
    "upstream_secret_credential =\n"
    "upstream_secret_header =\n"
    "upstream_secret_query =\n"
    "yt_source =\n"
    "vm_source =\n"
    "dm_source =\n"
    "youtube_url = https://www.googleapis.com/youtube/v3\n"
    "vimeo_url = https://api.vimeo.com\n"
    "dailymotion_url = https://api.dailymotion.com\n"
    "youtube_key_file =\n"
    "youtube_key_credential =\n"
    "vimeo_token_file =\n"
    "vimeo_token_credential =\n"
    "status_listen = /run/enrichd/status.sock\n"
    "slow_request_ms = 500\n"
    "health_window_s = 30\n"
    "health_max_5xx_ratio = 0.05\n"
    "health_max_degraded_ratio = 0.5\n"
    "health_max_p99_ms = 1000\n"
    "min_ready_workers = 1\n"
    "capture_dir =\n"
    "capture_sample = 0\n"
    "capture_max_bytes = 1g\n"
    "capture_max_age_s = 604800\n"
    "capture_group =\n"
    "capture_queue_bytes = 8m\n"
    "nginx_fastcgi_conf = /etc/nginx/snippets/enrichd-fastcgi.conf\n";

#define F(field) offsetof(enr_config, field), sizeof(((enr_config *)0)->field)

const enr_config_key enr_config_keys[] = {
    {"listen", ENR_KEY_LISTEN, F(listen), 0, 0},
    {"listen_mode", ENR_KEY_MODE, F(listen_mode), 0, 0777},
    {"listen_group", ENR_KEY_GROUP, F(listen_group), 0, 0},
    {"listen_backlog", ENR_KEY_UINT, F(listen_backlog), 1, 65535},
    {"listen_allow", ENR_KEY_ALLOW, F(listen_allow), 0, 0},
    {"workers", ENR_KEY_PER_CPU, F(workers), 1, 256},
    {"max_requests", ENR_KEY_UINT, F(max_requests), 0, 100000000},
    {"max_requests_jitter", ENR_KEY_UINT, F(max_requests_jitter), 0, 100000000},
    {"rss_soft_mb", ENR_KEY_UINT, F(rss_soft_mb), 0, 65536},
    {"rss_hard_mb", ENR_KEY_UINT, F(rss_hard_mb), 0, 65536},
    {"fd_soft", ENR_KEY_UINT, F(fd_soft), 0, 1048576},
    {"fd_hard", ENR_KEY_UINT, F(fd_hard), 0, 1048576},
    {"request_timeout_ms", ENR_KEY_UINT, F(request_timeout_ms), 100, 600000},
    {"queue_timeout_ms", ENR_KEY_UINT, F(queue_timeout_ms), 0, 600000},
    {"body_timeout_ms", ENR_KEY_UINT, F(body_timeout_ms), 100, 600000},
    {"liveness_timeout_ms", ENR_KEY_UINT, F(liveness_timeout_ms), 1000, 3600000},
    {"drain_timeout_ms", ENR_KEY_UINT, F(drain_timeout_ms), 1, 3600000},
    {"max_body_bytes", ENR_KEY_SIZE, F(max_body_bytes), 1024, 1ULL << 30},
    {"max_records", ENR_KEY_UINT, F(max_records), 0, 10000000},
    {"max_output_bytes", ENR_KEY_SIZE, F(max_output_bytes), 4096, 1ULL << 30},
    {"kill_grace_ms", ENR_KEY_UINT, F(kill_grace_ms), 1, 600000},
    {"write_timeout_ms", ENR_KEY_UINT, F(write_timeout_ms), 100, 600000},
    {"idle_exit_s", ENR_KEY_UINT, F(idle_exit_s), 0, 86400},
    {"upstream_url", ENR_KEY_URL, F(upstream_url), 0, 0},
    {"upstream_timeout_ms", ENR_KEY_UINT, F(upstream_timeout_ms), 1, 600000},
    {"ids_per_call", ENR_KEY_UINT, F(ids_per_call), 1, 10000},
    {"max_calls_per_batch", ENR_KEY_UINT, F(max_calls_per_batch), 1, 1000},
    {"upstream_max_connections", ENR_KEY_UINT, F(upstream_max_connections), 1, 1000},
    {"upstream_connect_timeout_ms", ENR_KEY_UINT, F(upstream_connect_timeout_ms), 1, 600000},
    {"upstream_warm_connections", ENR_KEY_UINT, F(upstream_warm_connections), 0, 1000},
    {"upstream_ca_file", ENR_KEY_PATH, F(upstream_ca_file), 0, 0},
    {"upstream_client_cert", ENR_KEY_PATH, F(upstream_client_cert), 0, 0},
    {"upstream_client_key", ENR_KEY_PATH, F(upstream_client_key), 0, 0},
    {"cache_entries", ENR_KEY_UINT, F(cache_entries), 0, 100000000},
    {"cache_bytes", ENR_KEY_SIZE, F(cache_bytes), 0, 1ULL << 34},
    {"cache_ttl_s", ENR_KEY_UINT, F(cache_ttl_s), 0, 31536000},
    {"cache_negative_ttl_s", ENR_KEY_UINT, F(cache_negative_ttl_s), 0, 31536000},
    {"youtube_cache_ttl_s", ENR_KEY_UINT, F(youtube_cache_ttl_s), 0, 31536000},
    {"vimeo_cache_ttl_s", ENR_KEY_UINT, F(vimeo_cache_ttl_s), 0, 31536000},
    {"dailymotion_cache_ttl_s", ENR_KEY_UINT, F(dailymotion_cache_ttl_s), 0, 31536000},
    {"cache_max_stale_s", ENR_KEY_UINT, F(cache_max_stale_s), 0, 31536000},
    {"cache_file", ENR_KEY_PATH, F(cache_file), 0, 0},
    {"breaker_failures", ENR_KEY_UINT, F(breaker_failures), 1, 1000000},
    {"breaker_cooldown_ms", ENR_KEY_UINT, F(breaker_cooldown_ms), 1, 3600000},
    {"breaker_window", ENR_KEY_UINT, F(breaker_window), 0, 128},
    {"breaker_failure_ratio", ENR_KEY_RATIO, F(breaker_failure_ratio), 0, 0},
    {"upstream_max_calls_per_s", ENR_KEY_UINT, F(upstream_max_calls_per_s), 0, 1000000},
    {"upstream_header", ENR_KEY_HEADER, F(upstream_headers), 0, 0},
    {"upstream_secret_file", ENR_KEY_PATH, F(upstream_secret_file), 0, 0},
    {"upstream_secret_credential", ENR_KEY_STR, F(upstream_secret_credential), 0, 0},
    {"upstream_secret_header", ENR_KEY_STR, F(upstream_secret_header), 0, 0},
    {"upstream_secret_query", ENR_KEY_STR, F(upstream_secret_query), 0, 0},
    {"yt_source", ENR_KEY_STR, F(yt_source), 0, 0},
    {"vm_source", ENR_KEY_STR, F(vm_source), 0, 0},
    {"dm_source", ENR_KEY_STR, F(dm_source), 0, 0},
    {"youtube_url", ENR_KEY_URL, F(youtube_url), 0, 0},
    {"vimeo_url", ENR_KEY_URL, F(vimeo_url), 0, 0},
    {"dailymotion_url", ENR_KEY_URL, F(dailymotion_url), 0, 0},
    {"youtube_key_file", ENR_KEY_PATH, F(youtube_key_file), 0, 0},
    {"youtube_key_credential", ENR_KEY_STR, F(youtube_key_credential), 0, 0},
    {"vimeo_token_file", ENR_KEY_PATH, F(vimeo_token_file), 0, 0},
    {"vimeo_token_credential", ENR_KEY_STR, F(vimeo_token_credential), 0, 0},
    {"status_listen", ENR_KEY_LISTEN, F(status_listen), 0, 0},
    {"slow_request_ms", ENR_KEY_UINT, F(slow_request_ms), 0, 3600000},
    {"health_window_s", ENR_KEY_UINT, F(health_window_s), 1, 60},
    {"health_max_5xx_ratio", ENR_KEY_RATIO, F(health_max_5xx_ratio), 0, 0},
    {"health_max_degraded_ratio", ENR_KEY_RATIO, F(health_max_degraded_ratio), 0, 0},
    {"health_max_p99_ms", ENR_KEY_UINT, F(health_max_p99_ms), 1, 3600000},
    {"min_ready_workers", ENR_KEY_UINT, F(min_ready_workers), 0, 256},
    {"capture_dir", ENR_KEY_PATH, F(capture_dir), 0, 0},
    {"capture_sample", ENR_KEY_RATIO, F(capture_sample), 0, 0},
    {"capture_max_bytes", ENR_KEY_SIZE, F(capture_max_bytes), 1ULL << 20, 1ULL << 40},
    {"capture_max_age_s", ENR_KEY_UINT, F(capture_max_age_s), 0, 31536000},
    {"capture_group", ENR_KEY_GROUP, F(capture_group), 0, 0},
    {"capture_queue_bytes", ENR_KEY_SIZE, F(capture_queue_bytes), 0, 1ULL << 30},
    {"nginx_fastcgi_conf", ENR_KEY_PATH, F(nginx_fastcgi_conf), 0, 0},
};

const size_t enr_config_nkeys = sizeof enr_config_keys / sizeof enr_config_keys[0];
_Static_assert(sizeof enr_config_keys / sizeof enr_config_keys[0] <= ENR_CONFIG_KEYS_MAX,
               "raise ENR_CONFIG_KEYS_MAX");

/* -T: one line a key, in the table's order, read back by -c as the same
 * configuration; the comment says which line set it.  A value is shown
 * as parsed (workers = auto as the number it became). */
static void dump_origin(const enr_config *c, size_t i, FILE *f)
{
    if (c->key_line[i] != 0)
        fprintf(f, "  # %s:%u\n", c->source, c->key_line[i]);
    else if (strcmp(enr_config_keys[i].name, "max_requests_jitter") == 0)
        fprintf(f, "  # built-in default (max_requests / 10)\n");
    else if (strcmp(enr_config_keys[i].name + 2, "_source") == 0)
        fprintf(f, "  # built-in default (upstream where upstream_url is set, else off)\n");
    else if (enr_config_keys[i].type == ENR_KEY_PER_CPU)
        fprintf(f, "  # built-in default (auto: %d per CPU, at most %d)\n", ENR_WORKERS_PER_CPU,
                ENR_WORKERS_AUTO_MAX);
    else
        fprintf(f, "  # built-in default\n");
}

void enr_config_dump(const enr_config *c, FILE *f)
{
    fprintf(f, "# enrichd effective configuration, from %s\n", c->source);
    for (size_t i = 0; i < enr_config_nkeys; i++) {
        const enr_config_key *k = &enr_config_keys[i];
        const char *field = (const char *)c + k->off;
        unsigned u;
        size_t z;
        double d;

        switch (k->type) {
        case ENR_KEY_HEADER:
            for (unsigned h = 0; h < c->upstream_nheaders; h++) {
                fprintf(f, "%s = %s", k->name, c->upstream_headers[h]);
                dump_origin(c, i, f);
            }
            if (c->upstream_nheaders > 0)
                continue;
            fprintf(f, "%s =", k->name);
            break;
        case ENR_KEY_STR:
        case ENR_KEY_LISTEN:
        case ENR_KEY_URL:
        case ENR_KEY_GROUP:
        case ENR_KEY_PATH:
        case ENR_KEY_ALLOW:
            fprintf(f, "%s =%s%s", k->name, field[0] ? " " : "", field);
            break;
        case ENR_KEY_MODE:
            memcpy(&u, field, sizeof u);
            fprintf(f, "%s = %04o", k->name, u);
            break;
        case ENR_KEY_PER_CPU:
        case ENR_KEY_UINT:
        case ENR_KEY_SIZE:
            if (k->size == sizeof(size_t)) {
                memcpy(&z, field, sizeof z);
                fprintf(f, "%s = %zu", k->name, z);
            } else {
                memcpy(&u, field, sizeof u);
                fprintf(f, "%s = %u", k->name, u);
            }
            break;
        case ENR_KEY_RATIO:
            memcpy(&d, field, sizeof d);
            fprintf(f, "%s = %.15g", k->name, d);
            break;
        }
        dump_origin(c, i, f);
    }
}

unsigned enr_config_line(const enr_config *c, const char *key)
{
    for (size_t i = 0; i < enr_config_nkeys; i++)
        if (strcmp(enr_config_keys[i].name, key) == 0)
            return c->key_line[i];
    return 0;
}
