/*
 * fuzz_scan.c: every wide string scanner (src/engine/scan.c: SSE2, AVX2 where the
 * CPU has it) against the portable byte loop, from the start of the input
 * and from after each point where they stop: same stop pointer, same
 * "byte >= 0x80 seen" and "escape seen" answers; and each scanner of
 * strings nobody reads (enr_skip_impl: escapes resolved by bit masks)
 * stops at the same byte.  The input is
 * copied to a buffer of its exact size so ASan sees any read past it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/scan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const names[] = {"sse2", "avx2"};
    enr_scan_fn slow = enr_scan_impl("portable");
    unsigned char *buf = malloc(size ? size : 1);

    if (buf == NULL)
        return 0;
    memcpy(buf, data, size);
    for (size_t n = 0; n < sizeof names / sizeof names[0]; n++) {
        enr_scan_fn fast = enr_scan_impl(names[n]);
        const unsigned char *p = buf, *end = buf + size;

        if (fast == NULL)
            continue;
        /* From the start, then from just after each stop byte. */
        for (;;) {
            unsigned hs = 0, hf = 0;
            int es = 0, ef = 0;
            const unsigned char *s = slow(p, end, &hs, &es), *f = fast(p, end, &hf, &ef);

            if (s != f || (hs != 0) != (hf != 0) || es != ef)
                abort();
            if (s == end)
                break;
            p = s + 1;
        }
    }
    /* The scanners of strings nobody reads: the same stops. */
    for (size_t n = 0; n < sizeof names / sizeof names[0]; n++) {
        enr_skip_fn fast = enr_skip_impl(names[n]);
        const unsigned char *p = buf, *end = buf + size;

        if (fast == NULL)
            continue;
        for (;;) {
            unsigned hs = 0;
            int es = 0;
            const unsigned char *s = slow(p, end, &hs, &es);

            if (fast(p, end) != s)
                abort();
            if (s == end)
                break;
            p = s + 1;
        }
    }
    {
        unsigned hs = 0;
        int es = 0;
        if (slow(buf, buf + size, &hs, &es) != enr_skip_string(buf, buf + size))
            abort();
    }
    /* And the dispatching entry point agrees too. */
    {
        unsigned hs = 0, hd = 0;
        int es = 0, ed = 0;
        if (slow(buf, buf + size, &hs, &es) != enr_scan_string(buf, buf + size, &hd, &ed) ||
            (hs != 0) != (hd != 0) || es != ed)
            abort();
    }
    free(buf);
    return 0;
}
