/*
 * slow_getaddrinfo.c: an LD_PRELOAD shim that makes name resolution of one
 * host stall, as a broken resolver does, for the DNS deadline tests.
 *
 *   ENR_SLOW_DNS_HOST  the name that stalls (every other name resolves
 *                      normally)
 *   ENR_SLOW_DNS_MS    how long each lookup of it sleeps (default 3000);
 *                      then it resolves as 127.0.0.1
 *   ENR_SLOW_DNS_FILE  optional: stall only while this file exists, so a
 *                      test can end the stall
 *   ENR_SLOW_DNS_LOG   optional: one line appended per stalled lookup, so
 *                      the test can tell the shim was really used
 *
 * Built by the test with cc -shared -fPIC; never part of the daemon.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int (*gai_fn)(const char *, const char *, const struct addrinfo *, struct addrinfo **);

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                struct addrinfo **res)
{
    static gai_fn real;
    const char *host = getenv("ENR_SLOW_DNS_HOST");

    if (real == NULL)
        real = (gai_fn)dlsym(RTLD_NEXT, "getaddrinfo");
    const char *flag = getenv("ENR_SLOW_DNS_FILE");

    if (node != NULL && host != NULL && strcmp(node, host) == 0 &&
        (flag == NULL || access(flag, F_OK) == 0)) {
        const char *ms = getenv("ENR_SLOW_DNS_MS");
        const char *logp = getenv("ENR_SLOW_DNS_LOG");
        long v = ms ? atol(ms) : 3000;
        struct timespec ts = {v / 1000, (v % 1000) * 1000000L};
        if (logp != NULL) {
            int fd = open(logp, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
            if (fd >= 0) {
                (void)!write(fd, "stall\n", 6);
                close(fd);
            }
        }
        while (nanosleep(&ts, &ts) != 0)
            ;
        node = "127.0.0.1";
    } else if (node != NULL && host != NULL && strcmp(node, host) == 0) {
        node = "127.0.0.1"; /* the stall is over: the name resolves at once */
    }
    return real(node, service, hints, res);
}
