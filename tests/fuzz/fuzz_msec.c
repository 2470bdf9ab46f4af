/*
 * fuzz_msec.c: libFuzzer target on enr_shed_parse_msec (nginx's $msec in
 * the ENRICHD_QUEUED_AT parameter).  Checks it against a plain reading
 * of the format (1-12 digits, then optionally '.' and 1-3 digits, and
 * nothing else), that a refusal writes nothing, and that a taken value
 * printed back in $msec's form parses to the same milliseconds.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool/shed.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int plain_ok(const char *s)
{
    size_t i = 0, d = 0, f = 0;

    while (s[i] >= '0' && s[i] <= '9')
        i++, d++;
    if (d < 1 || d > 12)
        return 0;
    if (s[i] == '.') {
        i++;
        while (s[i] >= '0' && s[i] <= '9')
            i++, f++;
        if (f < 1 || f > 3)
            return 0;
    }
    return s[i] == '\0';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char text[64], back[64];
    uint64_t ms = 12345, again = 0;
    int known;

    if (size >= sizeof text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    if ((enr_shed_parse_msec(text, &ms) == 0) != (plain_ok(text) != 0))
        abort();
    if (!plain_ok(text)) {
        if (ms != 12345)
            abort();
        return 0;
    }
    snprintf(back, sizeof back, "%llu.%03llu", (unsigned long long)(ms / 1000),
             (unsigned long long)(ms % 1000));
    if (enr_shed_parse_msec(back, &again) != 0 || again != ms)
        abort();
    /* The wait never exceeds the sane bound, and is 0 unless known. */
    again = enr_shed_wait_ms(text, ms + 5, &known);
    if (!known || again != 5)
        abort();
    again = enr_shed_wait_ms(text, ms + ENR_SHED_WAIT_SANE_MS + 1, &known);
    if (known || again != 0)
        abort();
    return 0;
}
