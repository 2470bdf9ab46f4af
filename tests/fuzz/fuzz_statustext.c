/*
 * fuzz_statustext.c: libFuzzer target on the status document reader of
 * `enrichd status` (enr_status_text_parse): whatever the status socket
 * returns, no crash, no sanitizer report, and nothing printed that a
 * terminal would take as a control sequence (only LF separates lines).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "ops/statustext.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    enr_buf out = {0};

    if (enr_status_text_parse(&out, (const char *)data, size) != 0 && out.len != 0)
        abort(); /* a refused document prints nothing */
    for (size_t i = 0; i < out.len; i++) {
        unsigned char c = (unsigned char)out.data[i];
        if ((c < 0x20 && c != '\n') || c == 0x7f)
            abort();
        if (c == 0xc2 && i + 1 < out.len && (unsigned char)out.data[i + 1] >= 0x80 &&
            (unsigned char)out.data[i + 1] <= 0x9f)
            abort();
    }
    enr_buf_free(&out);
    return 0;
}
