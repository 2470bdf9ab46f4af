/*
 * log.c: logfmt lines on stderr, or journal records under systemd (see
 * log.h).
 *
 * Invariants: a line is formatted into a stack buffer and written with
 * one write(2), so it is atomic on a pipe (< PIPE_BUF) and safe after
 * fork; nothing here allocates.  Timestamps are UTC with milliseconds.
 * A value from outside (a peer, a provider, a file) reaches a line only
 * through enr_log_quote(), and a line never holds a raw control byte
 * (one a caller left unquoted becomes '?'), so no value can forge a
 * field or a line.
 * When stderr is the journal's stream (JOURNAL_STREAM names its device
 * and inode, as systemd sets it), the same line goes to the journal as
 * one datagram in journald's native protocol instead: MESSAGE (the line
 * without ts=, journald stamps it), PRIORITY, and every key=value pair as
 * a field of its own, the key upper-cased (worker_pid -> WORKER_PID), so
 * `journalctl REASON=rss` selects events.  The socket is non-blocking: a
 * journal that cannot take a record (queue full, gone) never stalls the
 * master; that record goes to stderr as text instead.
 */
#include "base/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define LOG_JOURNAL_SOCKET "/run/systemd/journal/socket"
#define LOG_JOURNAL_NAME_MAX 64 /* journald's limit on a field name */

static const char *log_role_name = "enrichd";
static int log_min_level = ENR_LOG_INFO;

static const char *const log_level_names[] = {"debug", "info", "warn", "error"};
/* syslog(3) priorities of the levels above (debug, info, warning, err). */
static const char log_journal_priority[] = {'7', '6', '4', '3'};
static int log_to_journal = -1; /* -1: not decided yet; inherited across fork */
static int log_journal_fd = -1; /* shared by every process after fork: datagrams */

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
    if ((unsigned long long)st.st_dev != dev || (unsigned long long)st.st_ino != ino)
        return 0;
    log_journal_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    return log_journal_fd >= 0;
}

/* Appends s[0..n) to out at *o, newlines turned into spaces (a field is
 * one line in the protocol's text form).  Returns -1 when it does not fit. */
static int put(char *out, size_t outlen, size_t *o, const char *s, size_t n)
{
    if (*o + n >= outlen)
        return -1;
    for (size_t i = 0; i < n; i++)
        out[(*o)++] = s[i] == '\n' ? ' ' : s[i];
    return 0;
}

/* Appends logfmt pairs of p as "KEY=value\n" fields: key upper-cased,
 * other characters than [A-Z0-9_] as '_', quoted values unquoted (\" and
 * \\; \xHH stays as written).  Tokens that are not pairs, and keys that
 * would replace the record's own fields, are left out. */
static void journal_fields(const char *p, char *out, size_t outlen, size_t *o)
{
    while (*p) {
        size_t start = *o, name = 0;

        while (*p == ' ')
            p++;
        if (*p == '\0')
            break;
        for (; *p && *p != '=' && *p != ' '; p++) {
            char c = *p;
            if (c >= 'a' && c <= 'z')
                c = (char)(c - 'a' + 'A');
            else if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
                c = '_';
            if (name < LOG_JOURNAL_NAME_MAX && *o + 1 < outlen)
                out[(*o)++] = c;
            name++;
        }
        if (*p != '=' || name == 0 || name > LOG_JOURNAL_NAME_MAX || out[start] == '_' ||
            (out[start] >= '0' && out[start] <= '9') ||
            (*o - start == 7 && memcmp(out + start, "MESSAGE", 7) == 0) ||
            (*o - start == 8 && memcmp(out + start, "PRIORITY", 8) == 0) ||
            (*o - start == 17 && memcmp(out + start, "SYSLOG_IDENTIFIER", 17) == 0)) {
            while (*p && *p != ' ') /* not a pair we keep: skip the token */
                p++;
            *o = start;
            continue;
        }
        p++; /* '=' */
        if (*o + 1 < outlen)
            out[(*o)++] = '=';
        if (*p == '"') {
            for (p++; *p && *p != '"'; p++) {
                if (*p == '\\' && (p[1] == '"' || p[1] == '\\'))
                    p++;
                if (put(out, outlen, o, p, 1) != 0)
                    break;
            }
            if (*p == '"')
                p++;
        } else {
            const char *v = p;
            while (*p && *p != ' ')
                p++;
            if (put(out, outlen, o, v, (size_t)(p - v)) != 0)
                *o = outlen; /* does not fit: dropped below */
        }
        if (*o + 1 >= outlen) {
            *o = start;
            break;
        }
        out[(*o)++] = '\n';
    }
}

/* One journal record from a formatted line (its text after ts=...).
 * Returns 0 when journald took it. */
static int journal_send(int level, const char *text, size_t len)
{
    static const struct sockaddr_un addr = {AF_UNIX, LOG_JOURNAL_SOCKET};
    char line[ENR_LOG_LINE_MAX];
    char rec[ENR_LOG_LINE_MAX * 2 + 64];
    char prio[] = "PRIORITY=6";
    size_t o = 0;

    if (len >= sizeof line)
        len = sizeof line - 1;
    memcpy(line, text, len);
    line[len] = '\0';
    prio[9] = log_journal_priority[level];
    if (put(rec, sizeof rec, &o, "MESSAGE=", 8) != 0 || put(rec, sizeof rec, &o, line, len) != 0)
        return -1;
    rec[o++] = '\n';
    if (put(rec, sizeof rec, &o, prio, sizeof prio - 1) != 0)
        return -1;
    rec[o++] = '\n';
    if (put(rec, sizeof rec, &o, "SYSLOG_IDENTIFIER=enrichd", 25) != 0)
        return -1;
    rec[o++] = '\n';
    journal_fields(line, rec, sizeof rec, &o);
    if (sendto(log_journal_fd, rec, o, MSG_NOSIGNAL, (const struct sockaddr *)&addr, sizeof addr) !=
        (ssize_t)o)
        return -1;
    return 0;
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
    /* The last guard: quoted values hold no raw control byte, so one here
     * came unquoted from a caller, and must not start a forged line. */
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)line[i] < 0x20)
            line[i] = '?';
    if (log_to_journal < 0)
        log_to_journal = journal_stream_is_stderr();
    if (log_to_journal) {
        /* ts= is the first field, 28 bytes with its space: journald
         * stamps records itself. */
        size_t skip = n > 28 ? 28 : 0;
        if (journal_send(level, line + skip, n - skip) == 0) {
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

const char *enr_log_errno(int e)
{
    static _Thread_local char buf[160];

    return enr_log_quote(buf, sizeof buf, strerror(e));
}
