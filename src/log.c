/*
 * log.c: logfmt lines on stderr (see log.h).
 *
 * Invariants: a line is formatted into a stack buffer and written with
 * one write(2), so it is atomic on a pipe (< PIPE_BUF) and safe after
 * fork; nothing here allocates.  Timestamps are UTC with milliseconds.
 */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *log_role_name = "enrichd";
static int log_min_level = ENR_LOG_INFO;

static const char *const log_level_names[] = {"debug", "info", "warn", "error"};

void enr_log_role(const char *role)
{
    log_role_name = role;
}

void enr_log_set_level(int level)
{
    if (level >= ENR_LOG_DEBUG && level <= ENR_LOG_ERROR)
        log_min_level = level;
}

const char *enr_log_quote(char *out, size_t outlen, const char *s)
{
    size_t o = 0;
    int plain = s[0] != '\0';

    if (outlen < 3) {
        if (outlen)
            out[0] = '\0';
        return out;
    }
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c <= ' ' || c == '"' || c == '=' || c == '\\' || c >= 0x7f)
            plain = 0;
    }
    if (plain) {
        snprintf(out, outlen, "%s", s);
        return out;
    }
    out[o++] = '"';
    for (const char *p = s; *p && o + 6 < outlen; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else if (c < 0x20 || c == 0x7f) {
            o += (size_t)snprintf(out + o, outlen - o, "\\x%02x", c);
        } else {
            out[o++] = (char)c;
        }
    }
    out[o++] = '"';
    out[o] = '\0';
    return out;
}

void enr_log(int level, const char *msg, const char *fmt, ...)
{
    char line[ENR_LOG_LINE_MAX];
    char qmsg[256];
    struct timespec ts;
    struct tm tm;
    size_t n;
    int k;
    int saved = errno; /* callers log and then look at errno */

    if (level < log_min_level)
        return;
    if (level < ENR_LOG_DEBUG || level > ENR_LOG_ERROR)
        level = ENR_LOG_ERROR;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    k = snprintf(line, sizeof line,
                 "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s role=%s pid=%ld msg=%s",
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                 ts.tv_nsec / 1000000, log_level_names[level], log_role_name, (long)getpid(),
                 enr_log_quote(qmsg, sizeof qmsg, msg));
    n = k < 0 ? 0 : ((size_t)k < sizeof line ? (size_t)k : sizeof line - 1);
    if (fmt != NULL && fmt[0] != '\0' && n + 2 < sizeof line) {
        va_list ap;
        line[n++] = ' ';
        va_start(ap, fmt);
        k = vsnprintf(line + n, sizeof line - n, fmt, ap);
        va_end(ap);
        if (k > 0)
            n += (size_t)k < sizeof line - n ? (size_t)k : sizeof line - n - 1;
    }
    if (n >= sizeof line - 1)
        n = sizeof line - 2;
    line[n++] = '\n';
    /* A failed or short write to stderr has nowhere better to be reported. */
    if (write(STDERR_FILENO, line, n) < 0)
        errno = saved;
    errno = saved;
}
