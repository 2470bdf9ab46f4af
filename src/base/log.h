/*
 * log.h: structured log lines (logfmt) on stderr; under systemd, journal
 * records with each key=value pair as a field (log.c says how).
 *
 * One line per event that an operator acts on: a worker start or exit
 * (with its reason), a reload, a slow request, a breaker transition.
 * Never one line per ordinary request.  Each line is written with a
 * single write(2) so that lines of concurrent processes never interleave.
 */
#ifndef ENR_LOG_H
#define ENR_LOG_H

#include <stddef.h>

enum enr_log_level { ENR_LOG_DEBUG = 0, ENR_LOG_INFO, ENR_LOG_WARN, ENR_LOG_ERROR };

#define ENR_LOG_LINE_MAX 1024 /* longer lines are cut, never split */

/* The role of this process ("master", "worker", "status"), printed on
 * every line; call again after fork. */
void enr_log_role(const char *role);

/* Lines below this level are dropped (env ENRICHD_LOG_LEVEL=debug|info|warn|error). */
void enr_log_set_level(int level);

/* One line: ts=... level=... role=... pid=... msg="msg" then fmt's
 * already formatted key=value pairs (may be NULL).  Values that may
 * contain spaces or quotes go through enr_log_quote(). */
void enr_log(int level, const char *msg, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Writes s as a logfmt value (quoted and escaped when needed) into out
 * and returns out, so it can sit inside an enr_log() argument list. */
const char *enr_log_quote(char *out, size_t outlen, const char *s);

/* strerror(e) as a logfmt value, in a buffer of the calling thread: one
 * per enr_log() call ("error=%s", enr_log_errno(errno)). */
const char *enr_log_errno(int e);

#endif
