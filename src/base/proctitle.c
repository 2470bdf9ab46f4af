/*
 * proctitle.c: process titles (proctitle.h).
 *
 * Linux shows /proc/PID/cmdline from the memory where the kernel placed
 * argv and, right after it, the environment strings.  That area (argv[0]
 * to the end of the last contiguous environment string) is rewritten in
 * place; the environment is copied to the heap first so getenv() keeps
 * working.  Invariants: the area is only ever written within its bounds,
 * and the title is NUL-padded to its end, so no stale argument shows
 * after a shorter title; the copies of argv[] that getopt and the
 * configuration use were taken before the first write (main parses its
 * options before forking, and the master keeps its own copy of the path).
 */
#include "base/proctitle.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TITLE_PREFIX "enrichd: "

extern char **environ;

static char *title_area;
static size_t title_len;
/* The environment's copy, one block: kept here, so the strings stay
 * reachable after setenv/unsetenv drop them from environ (sd_listen_fds
 * unsets LISTEN_*), instead of looking leaked.  volatile: nothing reads
 * them, and the compiler would drop the stores. */
static char **volatile env_copy;
static char *volatile env_block;

void enr_proctitle_init(int argc, char **argv)
{
    char *start, *end, **env;
    size_t n;

    if (argc < 1 || argv == NULL || argv[0] == NULL || title_area != NULL)
        return;
    start = argv[0];
    end = start + strlen(start) + 1;
    for (int i = 1; i < argc; i++)
        if (argv[i] == end)
            end = argv[i] + strlen(argv[i]) + 1;
    for (n = 0; environ[n] != NULL; n++)
        ;
    {
        size_t total = 0, off = 0;
        for (size_t i = 0; i < n; i++)
            total += strlen(environ[i]) + 1;
        env = calloc(n + 1, sizeof *env);
        env_block = malloc(total ? total : 1);
        if (env == NULL || env_block == NULL) {
            free(env);
            free(env_block);
            env_block = NULL;
            return; /* environ untouched, titles off */
        }
        for (size_t i = 0; i < n; i++) {
            size_t len = strlen(environ[i]) + 1;
            if (environ[i] == end)
                end = environ[i] + len;
            memcpy(env_block + off, environ[i], len);
            env[i] = env_block + off;
            off += len;
        }
        env_copy = env;
    }
    /* argv[] strings the program still reads (getopt's optarg, the
     * configuration path) move to the heap too. */
    for (int i = 0; i < argc; i++) {
        char *copy = strdup(argv[i]);
        if (copy == NULL)
            return;
        argv[i] = copy;
    }
    environ = env;
    title_area = start;
    title_len = (size_t)(end - start);
}

void enr_proctitle_set(const char *fmt, ...)
{
    char t[256];
    va_list ap;
    int n;
    size_t len;

    if (title_area == NULL || title_len < sizeof TITLE_PREFIX)
        return;
    n = snprintf(t, sizeof t, "%s", TITLE_PREFIX);
    va_start(ap, fmt);
    vsnprintf(t + n, sizeof t - (size_t)n, fmt, ap);
    va_end(ap);
    len = strlen(t);
    if (len > title_len - 1)
        len = title_len - 1;
    memcpy(title_area, t, len);
    memset(title_area + len, '\0', title_len - len);
}
