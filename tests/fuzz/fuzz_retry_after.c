/*
 * fuzz_retry_after.c: libFuzzer target on the Retry-After parser
 * (enr_retry_after_parse, src/upstream/quota.c), a provider's header.
 *
 * Beyond "no crash, no sanitizer report" it checks on every input: the
 * wait is at most ENR_RETRY_AFTER_MAX_S; it reads only the n bytes it is
 * given; the same bytes give the same answer; delay-seconds (digits,
 * white space around) are read exactly; and a date it accepts is the
 * date glibc's strptime + timegm read from the same text in the C locale
 * (the oracle for the three HTTP-date forms: asked again 100 s before
 * that date, the wait must be exactly 100 s).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "upstream/quota.h"

#define MAX_LEN 64
#define NOW 1700000000 /* any "now": the oracle sets its own */

static int oracle(const char *s, time_t *t)
{
    static const char *const fmts[] = {"%a, %d %b %Y %H:%M:%S GMT", "%A, %d-%b-%y %H:%M:%S GMT",
                                       "%a %b %e %H:%M:%S %Y"};
    for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
        struct tm tm;
        const char *end;
        memset(&tm, 0, sizeof tm);
        end = strptime(s, fmts[i], &tm);
        if (end != NULL && *end == '\0') {
            *t = timegm(&tm);
            return 0;
        }
    }
    return -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *p, text[MAX_LEN + 1];
    unsigned d = 0, d2 = 0;
    size_t a, b;
    int rc;

    if (size > MAX_LEN)
        return 0;
    /* exactly size bytes, so ASan sees any read past them */
    p = malloc(size ? size : 1);
    if (p == NULL)
        return 0;
    memcpy(p, data, size);
    rc = enr_retry_after_parse(p, size, NOW, &d);
    if (rc != 0 && rc != -1)
        abort();
    if (enr_retry_after_parse(p, size, NOW, &d2) != rc || (rc == 0 && d2 != d))
        abort();
    if (rc == 0 && d > ENR_RETRY_AFTER_MAX_S)
        abort();
    /* the same text trimmed, NUL-terminated, for the oracles */
    a = 0;
    b = size;
    while (a < b && (p[a] == ' ' || p[a] == '\t'))
        a++;
    while (b > a && (p[b - 1] == ' ' || p[b - 1] == '\t' || p[b - 1] == '\r' || p[b - 1] == '\n'))
        b--;
    memcpy(text, p + a, b - a);
    text[b - a] = '\0';
    free(p);
    if (rc != 0 || memchr(text, '\0', b - a) != NULL)
        return 0;
    if (text[0] >= '0' && text[0] <= '9') {
        unsigned long long v = 0;
        for (size_t i = 0; text[i]; i++) {
            if (text[i] < '0' || text[i] > '9')
                abort(); /* accepted a number with a tail */
            if (v < 1000000)
                v = v * 10 + (unsigned)(text[i] - '0');
        }
        if (d != (v > ENR_RETRY_AFTER_MAX_S ? ENR_RETRY_AFTER_MAX_S : v))
            abort();
        return 0;
    }
    {
        time_t t;
        unsigned d100 = 0;
        if (oracle(text, &t) != 0)
            abort(); /* accepted a date strptime cannot read */
        if (enr_retry_after_parse(text, b - a, (int64_t)t - 100, &d100) != 0 || d100 != 100)
            abort(); /* read another instant than the oracle */
    }
    return 0;
}
