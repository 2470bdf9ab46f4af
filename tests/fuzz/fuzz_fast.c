/*
 * fuzz_fast.c: the engine's fast paths against its slow paths, byte for
 * byte (enr_engine_set_slow): the reader's decoding, the NFKC check on
 * UTF-8 bytes, the white-space fold, the printer, the skipping of values
 * nobody reads.  Each input is run three times through both engines: as
 * a whole body, wrapped as the title and the id of one record (so that
 * most inputs reach the Unicode steps instead of failing as JSON), and
 * as the raw value of two unread members of a record.  Same status, same
 * error, same output, also under a max_output_bytes that cuts the output.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "engine/engine.h"

static enr_engine *fast, *slow;
static enr_batch bf, bs;
static enr_buf of, os, body;

static uint64_t fixed_ms(void)
{
    return 1700000000123ull;
}

static void run(enr_engine *e, enr_batch *b, enr_buf *out, const char *in, size_t n, enr_error *err,
                int *rc)
{
    enr_buf_reset(out);
    memset(err, 0, sizeof(*err));
    *rc = enr_parse(e, in, n, 0, b, err);
    if (*rc == 0)
        *rc = enr_emit(e, b, fixed_ms, out, err);
    if (*rc < 0)
        enr_error_json(err, out);
}

static void same(const char *in, size_t n)
{
    enr_error ef, es;
    int rf, rs;

    run(fast, &bf, &of, in, n, &ef, &rf);
    run(slow, &bs, &os, in, n, &es, &rs);
    if (rf != rs || of.len != os.len || (of.len && memcmp(of.data, os.data, of.len) != 0))
        abort();
    if (rf < 0 && (ef.status != es.status || ef.offset != es.offset))
        abort();
    /* and where max_output_bytes cuts it: the same 413, or the same bytes */
    if (rf == 0 && of.len > 1) {
        size_t max = of.len / 2 + of.len % 97;

        enr_engine_set_max_output(fast, max);
        enr_engine_set_max_output(slow, max);
        run(fast, &bf, &of, in, n, &ef, &rf);
        run(slow, &bs, &os, in, n, &es, &rs);
        enr_engine_set_max_output(fast, 0);
        enr_engine_set_max_output(slow, 0);
        if (rf != rs || of.len != os.len || (of.len && memcmp(of.data, os.data, of.len) != 0))
            abort();
    }
}

/* The input as a JSON string body: raw bytes kept (the reader replaces
 * invalid UTF-8), only what would end the string or be refused escaped. */
static void put_string(enr_buf *b, const uint8_t *d, size_t n)
{
    static const char hex[] = "0123456789abcdef";

    enr_buf_putc(b, '"');
    for (size_t i = 0; i < n; i++) {
        if (d[i] == '"' || d[i] == '\\' || d[i] < 0x20) {
            char u[6] = {'\\', 'u', '0', '0', hex[d[i] >> 4], hex[d[i] & 15]};
            /* a backslash followed by 'u' in the input stays an escape */
            if (d[i] == '\\' && i + 5 < n && d[i + 1] == 'u') {
                enr_buf_putc(b, '\\');
                continue;
            }
            enr_buf_append(b, u, 6);
        } else {
            enr_buf_putc(b, (char)d[i]);
        }
    }
    enr_buf_putc(b, '"');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (fast == NULL) {
        fast = enr_engine_new();
        slow = enr_engine_new();
        if (fast == NULL || slow == NULL)
            abort();
        enr_engine_set_slow(slow, 1);
    }
    same((const char *)data, size);

    enr_buf_reset(&body);
    enr_buf_lit(&body, "[{\"provider\":\"yt\",\"id\":\"x\",\"title\":");
    put_string(&body, data, size);
    enr_buf_lit(&body, "},{\"provider\":\"dm\",\"title\":\"t\",\"id\":");
    put_string(&body, data, size);
    enr_buf_lit(&body, "}]");
    if (body.oom)
        abort();
    same(body.data, body.len);

    /* and as the raw value of unread members between read ones: the
     * skipping of nested values and of unread members in a row */
    enr_buf_reset(&body);
    enr_buf_lit(&body, "[{\"provider\":\"yt\",\"stats\":");
    enr_buf_append(&body, (const char *)data, size);
    enr_buf_lit(&body, ",\"tags\":");
    enr_buf_append(&body, (const char *)data, size);
    enr_buf_lit(&body, ",\"id\":\"x\",\"title\":\"t\"}]");
    if (body.oom)
        abort();
    same(body.data, body.len);
    return 0;
}
