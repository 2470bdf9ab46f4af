/*
 * enrichd.c: the daemon's command line.
 *
 *   enrichd [-c FILE] [-t | -T] [-V]  run in the foreground (systemd style)
 *   enrichd status [SOCKET]        the operator's status table (statuscli.c)
 *
 * Nothing heavy happens before the master forks its workers: the cold
 * start (exec to first answer) is the configuration parse and a fork.
 */
#include <json-c/json_c_version.h>
#include <openssl/opensslv.h>
#include <fcgi_config.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cli.h"
#include "base/config.h"
#include "ops/confcheck.h"
#include "upstream/curlapi.h"
#include "upstream/upstream_url.h"
#include "base/log.h"
#include "base/proctitle.h"
#include "pool/master.h"
#include "pool/testhooks.h"
#include "ops/status.h"
#include "engine/unicode.h"

#ifndef ENR_VERSION
#error "ENR_VERSION comes from the Makefile's VERSION, the one place it is written"
#endif

static void usage(FILE *f)
{
    fprintf(f,
            "usage: enrichd [-c FILE] [-t | -T] [-V] [-h | --help]\n"
            "       enrichd status [--json] [--health] [--watch [-n SECONDS]] [-c FILE | SOCKET]\n"
            "  -c FILE  configuration file (default: the built-in configuration)\n"
            "  -t       check the configuration and exit (0 ok, 1 with FILE:LINE: key: problem);\n"
            "           warnings about its neighbours (nginx, systemd, limits) go to stderr\n"
            "  -T       check it, then print the effective configuration: every key, its\n"
            "           value and where it came from (FILE:LINE or the built-in default)\n"
            "  -V       print the version and the versions of the linked libraries\n");
}

static void print_versions(void)
{
    char err[256];

    printf("enrichd %s%s\n", ENR_VERSION, enr_hook_version_note());
    printf("unicode: %s\n", enr_uni_version());
    if (enr_curl_load(err, sizeof err) == 0)
        printf("libcurl: %s (loaded only when upstream_url is set)\n", curl_version());
    else
        printf("libcurl: unavailable: %s (needed only when upstream_url is set)\n", err);
    printf("json-c: %s\n", json_c_version());
    /* libcrypto is linked statically, so the header's version is the
     * library's; OpenSSL_version() would link its init, error and provider
     * machinery (2 MB of text, 17,000 relocations every exec applies). */
    printf("openssl: %s\n", OPENSSL_VERSION_TEXT);
    printf("libfcgi: %s (Debian; CVE-2025-23016 only partly fixed: the socket is the trust "
           "boundary)\n",
           VERSION);
}

static void print_warning(void *arg, const char *msg)
{
    (void)arg;
    fprintf(stderr, "enrichd: warning: %s\n", msg);
}

static void log_level_from_env(void)
{
    const char *v = getenv("ENRICHD_LOG_LEVEL");
    static const char *const names[] = {"debug", "info", "warn", "error"};

    if (v == NULL)
        return;
    for (int i = 0; i < 4; i++)
        if (strcmp(v, names[i]) == 0)
            enr_log_set_level(i);
}

int main(int argc, char **argv)
{
    const char *path = NULL;
    int check = 0, dump = 0, opt;
    enr_config cfg;
    char err[512];

    if (argc >= 2 && strcmp(argv[1], "status") == 0)
        return enr_status_cli(argc - 1, argv + 1);
    if (argc == 2 && strcmp(argv[1], "--help") == 0)
        return enr_cli_usage(usage, 0);
    enr_proctitle_init(argc, argv);
    while ((opt = getopt(argc, argv, "c:tTVh")) != -1) {
        switch (opt) {
        case 'c':
            path = optarg;
            break;
        case 't':
            check = 1;
            break;
        case 'T':
            dump = 1;
            break;
        case 'V':
            print_versions();
            return 0;
        case 'h':
            return enr_cli_usage(usage, 0);
        default:
            return enr_cli_usage(usage, ENR_CLI_USAGE);
        }
    }
    if (optind != argc)
        return enr_cli_usage(usage, ENR_CLI_USAGE);
    log_level_from_env();
    enr_config_set_url_check(enr_upstream_url_check);
    if (enr_config_load(&cfg, path, err, sizeof err) != 0) {
        fprintf(stderr, "enrichd: %s\n", err);
        return 1;
    }
    /* -t looks at the credential files without reading them; -T needs
     * none; the daemon reads the secrets (config.h). */
    if ((check && enr_config_probe_credentials(&cfg, print_warning, NULL, err, sizeof err) != 0) ||
        (!check && !dump && enr_config_load_secrets(&cfg, err, sizeof err) != 0)) {
        fprintf(stderr, "enrichd: %s\n", err);
        return 1;
    }
    if (check || dump) {
        enr_config_warn(&cfg, print_warning, NULL);
        if (dump)
            enr_config_dump(&cfg, stdout);
        else
            printf("enrichd: configuration %s ok\n", cfg.source);
        return fflush(stdout) == 0 ? 0 : 1;
    }
    return enr_master_run(&cfg, path);
}
