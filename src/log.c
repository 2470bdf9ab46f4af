/*
 * log.c: logfmt lines on stderr, or journal records under systemd (see
 * log.h).
 *
 * Invariants: a line is formatted into a stack buffer and written with
 * one write(2), so it is atomic on a pipe (< PIPE_BUF) and safe after
 * fork; nothing here allocates.  Timestamps are UTC with milliseconds.
 * When stderr is the journal's stream (JOURNAL_STREAM names its device
 * and inode, as systemd sets it), the same line goes to the journal as
 * one record instead: MESSAGE (the line without ts=, journald stamps
 * it), PRIORITY, and every key=value pair as a field of its own, the key
 * upper-cased (worker_pid -> WORKER_PID), so `journalctl REASON=rss`
 * selects events.  A record the journal refuses falls back to stderr.
 */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
/* CODE_FILE= and CODE_LINE= would always name this file: left out. */
#define SD_JOURNAL_SUPPRESS_LOCATION
#include <systemd/sd-journal.h>
#include <time.h>
#include <unistd.h>

#define LOG_JOURNAL_FIELDS_MAX 32 /* pairs past this stay in MESSAGE only */
#define LOG_JOURNAL_NAME_MAX 64   /* journald's limit on a field name */

static const char *log_role_name = "enrichd";
static int log_min_level = ENR_LOG_INFO;

static const char *const log_level_names[] = {"debug", "info", "warn", "error"};
/* syslog(3) priorities of the levels above (debug, info, warning, err). */
static const char *const log_journal_priority[] = {"PRIORITY=7", "PRIORITY=6", "PRIORITY=4",
                                                   "PRIORITY=3"};
static int log_to_journal = -1; /* -1: not decided yet; inherited across fork */

/* systemd sets JOURNAL_STREAM=DEV:INODE when stderr is connected to the
 * journal; stderr redirected elsewhere (a file, a terminal) keeps text. */
static int journal_stream_is_stderr(void)
{
    const char *v = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    struct stat st;
    char tail;

    if (v == NULL || sscanf(v, "%llu:%llu%c", &dev, &ino, &tail) != 2)
        return 0;
    if (fstat(STDERR_FILENO, &st) != 0)
        return 0;
    return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

/* Parses logfmt pairs in p (NUL-terminated) into "KEY=value" fields
 * written to store, one iovec each.  Quoted values are unescaped (\" \\
 * \xHH).  Returns the number of fields. */
static int journal_fields(const char *p, char *store, size_t storelen, struct iovec *iov, int max)
{
    size_t o = 0;
    int n = 0;

    while (*p && n < max) {
        size_t start = o, name = 0;
        int reserved;

        while (*p == ' ')
            p++;
        if (*p == '\0')
            break;
        for (; *p && *p != '=' && *p != ' ' && o + 1 < storelen; p++) {
            char c = *p;
            if (c >= 'a' && c <= 'z')
                c = (char)(c - 'a' + 'A');
            else if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
                c = '_';
            if (name < LOG_JOURNAL_NAME_MAX)
                store[o++] = c;
            name++;
        }
        if (*p != '=' || name == 0 || store[start] == '_' ||
            (store[start] >= '0' && store[start] <= '9')) {
            while (*p && *p != ' ') /* not a pair: skip the token */
                p++;
            o = start;
            continue;
        }
        reserved = (o - start == 7 && memcmp(store + start, "MESSAGE", 7) == 0) ||
                   (o - start == 8 && memcmp(store + start, "PRIORITY", 8) == 0) ||
                   (o - start == 17 && memcmp(store + start, "SYSLOG_IDENTIFIER", 17) == 0);
        p++; /* '=' */
        if (o + 1 < storelen)
            store[o++] = '=';
        if (*p == '"') {
            for (p++; *p && *p != '"' && o + 1 < storelen; p++) {
                if (*p == '\\' && p[1] == 'x' && p[2] && p[3]) {
                    unsigned v;
                    if (sscanf(p + 2, "%2x", &v) == 1) {
                        store[o++] = (char)v;
                        p += 3;
                        continue;
                    }
                }
                if (*p == '\\' && p[1])
                    p++;
                store[o++] = *p;
            }
            if (*p == '"')
                p++;
        } else {
            for (; *p && *p != ' ' && o + 1 < storelen; p++)
                store[o++] = *p;
        }
        if (reserved || o + 1 >= storelen) {
            o = start;
            continue;
        }
        iov[n].iov_base = store + start;
        iov[n].iov_len = o - start;
        n++;
    }
    return n;
}

/* One journal record from a formatted line (its text after ts=...). */
static int journal_send(int level, const char *text, size_t len)
{
    char msg[ENR_LOG_LINE_MAX + 8];
    char line[ENR_LOG_LINE_MAX];
    char store[ENR_LOG_LINE_MAX * 2];
    struct iovec iov[LOG_JOURNAL_FIELDS_MAX + 3];
    int n = 0;

    if (len >= sizeof line)
        len = sizeof line - 1;
    memcpy(line, text, len);
    line[len] = '\0';
    memcpy(msg, "MESSAGE=", 8);
    memcpy(msg + 8, line, len);
    iov[n].iov_base = msg;
    iov[n++].iov_len = 8 + len;
    iov[n].iov_base = (void *)log_journal_priority[level];
    iov[n++].iov_len = strlen(log_journal_priority[level]);
    iov[n].iov_base = (void *)"SYSLOG_IDENTIFIER=enrichd";
    iov[n++].iov_len = strlen("SYSLOG_IDENTIFIER=enrichd");
    n += journal_fields(line, store, sizeof store, iov + n, LOG_JOURNAL_FIELDS_MAX);
    return sd_journal_sendv(iov, n);
}

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
    if (log_to_journal < 0)
        log_to_journal = journal_stream_is_stderr();
    if (log_to_journal) {
        /* ts= is the first field, 28 bytes with its space: journald
         * stamps records itself. */
        size_t skip = n > 28 ? 28 : 0;
        if (journal_send(level, line + skip, n - skip) >= 0) {
            errno = saved;
            return;
        }
    }
    line[n++] = '\n';
    /* A failed or short write to stderr has nowhere better to be reported. */
    if (write(STDERR_FILENO, line, n) < 0)
        errno = saved;
    errno = saved;
}
