/*
 * fuzz_store_addr.c: libFuzzer target on the shared store's address and
 * key prefix (enr_store_addr_parse, enr_store_prefix_ok,
 * src/base/storeaddr.c), which both the configuration's check and the
 * store's client call.
 *
 * Input: the text of shared_store (its first NUL ends it, as the
 * configuration's value would).  Beyond "no crash, no sanitizer report"
 * it checks storeaddr.h's promises on every input: an accepted address
 * is unix: or redis://, the latter never with '@' (no user or password); a
 * host of 1..255 bytes of letters, digits, ".-_" (':' only in brackets),
 * a port 1..65535, a database 0..15; a path absolute and within
 * sockaddr_un; a refusal says why.  And the round trip: an address
 * accepted, written back in its full form, parses to the same address.
 * The prefix check accepts only what storeaddr.h allows.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/storeaddr.h"

#define MAX_LEN 4096

static void check_prefix(const char *p)
{
    size_t n = strlen(p);
    int ok = n >= 1 && n <= ENR_STORE_PREFIX_MAX &&
             strspn(p, "abcdefghijklmnopqrstuvwxyz"
                       "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                       "0123456789:_.-") == n;

    if (enr_store_prefix_ok(p) != ok)
        abort();
}

static void check_accepted(const char *s, const enr_store_addr *a)
{
    char again[MAX_LEN + 64], why[200];
    enr_store_addr b;
    size_t hl = strlen(a->host);

    if (a->is_unix) {
        if (strncmp(s, "unix:", 5) != 0 || a->path[0] != '/' ||
            strlen(a->path) > ENR_STORE_PATH_MAX)
            abort();
        snprintf(again, sizeof again, "unix:%s", a->path);
    } else {
        if (strncmp(s, "redis://", 8) != 0 || strchr(s, '@') != NULL || hl == 0 ||
            hl > ENR_STORE_HOST_MAX ||
            strspn(a->host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_:") !=
                hl ||
            (strchr(a->host, ':') != NULL && s[8] != '[') || a->port < 1 || a->port > 65535 ||
            a->db < 0 || a->db > ENR_STORE_DB_MAX)
            abort();
        snprintf(again, sizeof again, "redis://%s%s%s:%d/%d", s[8] == '[' ? "[" : "", a->host,
                 s[8] == '[' ? "]" : "", a->port, a->db);
    }
    if (enr_store_addr_parse(again, &b, why, sizeof why) != 0 || b.is_unix != a->is_unix ||
        strcmp(b.host, a->host) != 0 || strcmp(b.path, a->path) != 0 || b.port != a->port ||
        b.db != a->db)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char s[MAX_LEN + 1], why[200];
    enr_store_addr a;

    if (size > MAX_LEN)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    why[0] = '\0';
    if (enr_store_addr_parse(s, &a, why, sizeof why) == 0)
        check_accepted(s, &a);
    else if (why[0] == '\0')
        abort();
    check_prefix(s);
    return 0;
}
