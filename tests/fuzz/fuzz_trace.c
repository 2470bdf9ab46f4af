/*
 * fuzz_trace.c: libFuzzer target on enrich-replay's trace reader.
 *
 * On success: at least one entry, the first at time 0, times finite and
 * non-decreasing, every body either inside the input or owned, and the
 * byte total equal to the sum of the bodies.  On failure: a message.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "replay/replay_trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    enr_replay_trace t;
    char err[256] = "";
    size_t bytes = 0;

    if (enr_replay_trace_parse(&t, buf, size, "fuzz", err, sizeof err) < 0) {
        if (err[0] == '\0')
            abort();
        return 0;
    }
    if (t.n == 0 || t.e[0].ts != 0)
        abort();
    for (size_t i = 0; i < t.n; i++) {
        const enr_replay_entry *e = &t.e[i];

        if (!isfinite(e->ts) || (i > 0 && e->ts < t.e[i - 1].ts))
            abort();
        if (!e->owned && e->len > 0 && (e->body < buf || e->body + e->len > buf + size))
            abort();
        bytes += e->len;
    }
    if (bytes != t.bytes)
        abort();
    enr_replay_trace_free(&t);
    return 0;
}
