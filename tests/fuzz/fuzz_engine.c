/*
 * fuzz_engine.c: libFuzzer target on the whole engine (reader, record
 * rules, Unicode steps, number conversions, printer).
 *
 * Beyond "no crash, no sanitizer report" it checks the engine's own
 * promises on every input: a rejection has a 4xx/5xx status and a JSON
 * body; an accepted batch prints one LF-terminated line per record, valid
 * UTF-8 with no raw control character, and parsing is deterministic.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/clock.h"
#include "engine/engine.h"

static enr_engine *eng;
static enr_batch batch;
static enr_buf out;

static int valid_utf8(const unsigned char *s, size_t n)
{
    size_t i = 0;

    while (i < n) {
        unsigned c = s[i];
        size_t k;
        unsigned lo = 0x80, hi = 0xbf;

        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf)
            k = 1;
        else if (c >= 0xe0 && c <= 0xef)
            k = 2, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
        else if (c >= 0xf0 && c <= 0xf4)
            k = 3, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
        else
            return 0;
        if (i + k >= n)
            return 0;
        if (s[i + 1] < lo || s[i + 1] > hi)
            return 0;
        for (size_t j = 2; j <= k; j++)
            if (s[i + j] < 0x80 || s[i + j] > 0xbf)
                return 0;
        i += k + 1;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    enr_error err;
    size_t lines = 0, first_len;

    if (eng == NULL && (eng = enr_engine_new()) == NULL)
        abort();
    enr_buf_reset(&out);
    if (enr_parse(eng, (const char *)data, size, 0, &batch, &err) < 0) {
        if (err.status < 400 || err.status > 599 || err.msg[0] == '\0')
            abort();
        enr_error_json(&err, &out);
        if (out.len < 12 || memcmp(out.data, "{\"error\":\"", 10) != 0)
            abort();
        return 0;
    }
    if (enr_emit(eng, &batch, enr_wall_ms, &out, &err) != 0)
        abort(); /* no limit set */
    if (out.oom || out.len == 0 || out.data[out.len - 1] != '\n')
        abort();
    for (size_t i = 0; i < out.len; i++) {
        unsigned char c = (unsigned char)out.data[i];

        if (c == '\n')
            lines++;
        else if (c < 0x20)
            abort(); /* rule 11: control characters are escaped */
    }
    if (batch.n == 0 ? (out.len != 1) : (lines != batch.n))
        abort();
    if (!valid_utf8((const unsigned char *)out.data, out.len))
        abort();
    /* Deterministic: a second parse of the same bytes gives the same records. */
    first_len = batch.n;
    if (enr_parse(eng, (const char *)data, size, 0, &batch, &err) < 0 || batch.n != first_len)
        abort();
    /* max_output_bytes is exactly the output's size, whatever refused it
     * (the parse-time bounds or the printer): the same length passes, one
     * byte less is a 413 (fetched_at has 13 digits either way). */
    {
        size_t whole = out.len;

        enr_engine_set_max_output(eng, whole);
        enr_buf_reset(&out);
        if (enr_parse(eng, (const char *)data, size, 0, &batch, &err) < 0 ||
            enr_emit(eng, &batch, enr_wall_ms, &out, &err) < 0 || out.len != whole)
            abort();
        enr_engine_set_max_output(eng, whole - 1);
        enr_buf_reset(&out);
        if (whole > 1 && enr_parse(eng, (const char *)data, size, 0, &batch, &err) == 0 &&
            enr_emit(eng, &batch, enr_wall_ms, &out, &err) == 0)
            abort();
        if (whole > 1 && (err.status != 413 || err.limit != whole - 1 || err.reached < whole))
            abort();
        enr_engine_set_max_output(eng, 0);
    }
    return 0;
}
