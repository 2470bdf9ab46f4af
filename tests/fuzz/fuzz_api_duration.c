/*
 * fuzz_api_duration.c: libFuzzer target on the clocks of the providers'
 * APIs (src/upstream/api_time.c).
 *
 * The input as an ISO 8601 duration (enr_iso8601_duration), against a
 * second reading written from the grammar (api.h): components in the
 * order W D T H M S, each once, digits with a decimal sign only on the
 * last, strtod for the values; both accept the same texts and agree on
 * the seconds, which are finite, in [0, 1e7).  The input as a date-time
 * (enr_api_iso_datetime) must not read past its bytes.  Its first 8
 * bytes as a Unix time: the next Pacific midnight is after it, at most
 * 25 hours on, a midnight in PST or PDT, and the same for every instant
 * until it.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "upstream/api.h"
#include "upstream/api_int.h"

#define MAX_LEN 128

/* The grammar's reading: 0 with *out, or -1. */
static int oracle(const char *s, size_t n, double *out)
{
    static const char order[] = "WDTHMS";
    size_t i = 1, pos = 0;
    int parts = 0, after_t = 0, t_parts = 0, had_fraction = 0;
    double sum = 0;

    if (n < 2 || s[0] != 'P')
        return -1;
    while (i < n) {
        char text[MAX_LEN + 1];
        size_t k = 0, dots = 0;
        const char *at;
        double v, unit;
        if (s[i] == 'T') {
            if (after_t)
                return -1;
            after_t = 1;
            pos = 3;
            i++;
            continue;
        }
        if (had_fraction)
            return -1;
        while (i < n && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.' || s[i] == ',')) {
            if (s[i] == '.' || s[i] == ',')
                dots++;
            text[k++] = s[i] == ',' ? '.' : s[i];
            i++;
        }
        text[k] = '\0';
        if (k == 0 || dots > 1 || text[0] == '.' || text[k - 1] == '.' || i >= n)
            return -1;
        at = strchr(order + pos, s[i]);
        if (s[i] == '\0' || s[i] == 'T' || at == NULL || (after_t != (at >= order + 3)))
            return -1;
        pos = (size_t)(at - order) + 1;
        unit = s[i] == 'W'   ? 604800
               : s[i] == 'D' ? 86400
               : s[i] == 'H' ? 3600
               : s[i] == 'M' ? 60
                             : 1;
        v = strtod(text, NULL);
        had_fraction = dots > 0;
        sum += v * unit;
        parts++;
        t_parts += after_t;
        i++;
    }
    if (parts == 0 || (after_t && t_parts == 0) || !(sum < 1e7))
        return -1;
    *out = sum;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s;
    double d = -1, want = -1;
    int rc, rc2;
    int64_t t;

    if (size > MAX_LEN)
        return 0;
    s = malloc(size ? size : 1); /* exactly size bytes: ASan sees a read past them */
    if (s == NULL)
        return 0;
    memcpy(s, data, size);
    rc = enr_iso8601_duration(s, size, &d);
    rc2 = oracle(s, size, &want);
    if (rc != rc2)
        abort();
    if (rc == 0 && (!isfinite(d) || d < 0 || d >= ENR_REPLY_DURATION_LIMIT ||
                    fabs(d - want) > 1e-6 * (want > 1 ? want : 1)))
        abort();
    (void)enr_api_iso_datetime(s, size, &t);
    free(s);

    if (size >= 8) {
        int64_t now, next;
        memcpy(&now, data, 8);
        now %= INT64_C(1) << 40; /* some 35,000 years either way */
        next = enr_pacific_next_midnight(now);
        if (next <= now || next - now > 25 * 3600)
            abort();
        if ((next - 7 * 3600) % 86400 != 0 && (next - 8 * 3600) % 86400 != 0)
            abort();
        if (enr_pacific_next_midnight(next - 1) != next ||
            enr_pacific_next_midnight(now + (next - now) / 2) != next)
            abort();
    }
    return 0;
}
