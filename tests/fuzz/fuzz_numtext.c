/*
 * fuzz_numtext.c: libFuzzer target on the number conversions: text to
 * number (rule 13.1) and number to text (rule 9).  Checks that printing
 * round-trips: enr_num_parse_json(enr_num_format(v)) == v for every
 * finite v the text parser produces.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/numfmt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char buf[ENR_NUM_MAX];
    double v = enr_num_from_text((const char *)data, size), back;
    size_t n;

    if (isnan(v) || isinf(v))
        return 0;
    n = enr_num_format(v, buf);
    if (n == 0 || n >= ENR_NUM_MAX || buf[n] != '\0')
        abort();
    back = enr_num_from_text(buf, n);
    if (back != v || (v == 0 && signbit(v) && strcmp(buf, "0") != 0))
        abort();
    if (size >= 8) { /* the raw bytes as a double, too */
        double d;

        memcpy(&d, data, sizeof(d));
        if (!isnan(d) && !isinf(d)) {
            n = enr_num_format(d, buf);
            if (enr_num_from_text(buf, n) != d)
                abort();
        }
    }
    return 0;
}
