/*
 * fuzz_statustext.c: libFuzzer target on the status document reader of
 * `enrichd status` (enr_status_text_parse), and of its --watch screen
 * (enr_status_text_top): whatever the status socket returns, no crash, no
 * sanitizer report, and nothing printed that a terminal would take as a
 * control sequence (only LF separates lines).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "ops/statustext.h"

static void check_clean(const enr_buf *out)
{
    for (size_t i = 0; i < out->len; i++) {
        unsigned char c = (unsigned char)out->data[i];
        if ((c < 0x20 && c != '\n') || c == 0x7f)
            abort();
        if (c == 0xc2 && i + 1 < out->len && (unsigned char)out->data[i + 1] >= 0x80 &&
            (unsigned char)out->data[i + 1] <= 0x9f)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    enr_buf out = {0}, top = {0};
    int rc = enr_status_text_parse(&out, (const char *)data, size);

    if (rc != 0 && out.len != 0)
        abort(); /* a refused document prints nothing */
    if (enr_status_text_parse_as(&top, (const char *)data, size, enr_status_text_top) != rc)
        abort(); /* both views accept the same documents */
    check_clean(&out);
    check_clean(&top);
    enr_buf_free(&out);
    enr_buf_free(&top);
    return 0;
}
