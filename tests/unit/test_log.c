/*
 * test_log.c: a log line is one line of logfmt whatever its values hold
 * (log.h): enr_log_quote() escapes what could end a value or a line, and
 * a raw control byte a caller left unquoted never starts a forged line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "t.h"

/* What enr_log writes to stderr for one call, into out. */
#define CAPTURE(out, ...)                                                                          \
    do {                                                                                           \
        int p_[2], saved_ = dup(STDERR_FILENO);                                                    \
        ssize_t n_;                                                                                \
        if (pipe(p_) != 0)                                                                         \
            abort();                                                                               \
        dup2(p_[1], STDERR_FILENO);                                                                \
        enr_log(ENR_LOG_WARN, __VA_ARGS__);                                                        \
        dup2(saved_, STDERR_FILENO);                                                               \
        close(saved_);                                                                             \
        close(p_[1]);                                                                              \
        n_ = read(p_[0], (out), sizeof(out) - 1);                                                  \
        (out)[n_ > 0 ? n_ : 0] = '\0';                                                             \
        close(p_[0]);                                                                              \
    } while (0)

static int lines_in(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void test_quote(void)
{
    char q[128];

    T_STREQ(enr_log_quote(q, sizeof q, "plain"), "plain");
    T_STREQ(enr_log_quote(q, sizeof q, ""), "\"\"");
    T_STREQ(enr_log_quote(q, sizeof q, "a\" msg=\"forged"), "\"a\\\" msg=\\\"forged\"");
    T_STREQ(enr_log_quote(q, sizeof q, "a\nts=1 msg=x"), "\"a\\x0ats=1 msg=x\"");
    T_STREQ(enr_log_quote(q, sizeof q, "back\\slash"), "\"back\\\\slash\"");
    T_STREQ(enr_log_quote(q, 8, "\"\"\"\"\"\"\"\""), "\"\\\"\"");
}

static void test_one_line(void)
{
    char out[2048], q[256];

    setenv("JOURNAL_STREAM", "", 1); /* stderr, not the journal */
    CAPTURE(out, "m", "name=%s", enr_log_quote(q, sizeof q, "x\" msg=\"worker exit\"\nts=1"));
    T_CHECK(lines_in(out) == 1 && strstr(out, "msg=\"worker exit\"") == NULL,
            "a quoted value: one line, no forged field: %s", out);
    CAPTURE(out, "m", "unquoted=%s", "a\nts=2026 level=error msg=forged\r");
    T_CHECK(lines_in(out) == 1 && strstr(out, "a?ts=2026") != NULL && strchr(out, '\r') == NULL,
            "a raw control byte left unquoted never starts a line: %s", out);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    test_quote();
    test_one_line();
    T_DONE();
}
