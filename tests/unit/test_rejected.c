/*
 * test_rejected.c: X-Enrich-Rejected and its positions (pool/rejected.h)
 * from real parses of batches with dropped elements.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "pool/rejected.h"
#include "t.h"

static enr_engine *e;
static enr_batch b;
static char out[ENR_REJECTED_HEADERS_MAX];

static size_t run(const char *body)
{
    enr_error err;

    enr_batch_reset(&b);
    if (enr_parse(e, body, strlen(body), 0, &b, &err) != 0) {
        T_CHECK(0, "parse refused %s: %s", body, err.msg);
        return (size_t)-1;
    }
    return enr_rejected_headers(&b, out, sizeof out);
}

#define OK "{\"provider\":\"yt\",\"id\":\"a\",\"title\":\"t\"}"
#define BAD "{\"provider\":\"nope\",\"id\":\"a\"}"

int main(void)
{
    e = enr_engine_new();
    T_CHECK(e != NULL, "engine");
    T_CHECK(run("[" OK "," OK "]") == 0, "none dropped");
    T_STREQ(out, "X-Enrich-Rejected: 0\r\n");
    T_CHECK(run("[]") == 0, "empty batch");
    T_STREQ(out, "X-Enrich-Rejected: 0\r\n");
    T_CHECK(run("[" BAD "," OK ",1," BAD "," BAD "," OK "," BAD "]") == 5, "five dropped");
    T_STREQ(out, "X-Enrich-Rejected: 5\r\nX-Enrich-Rejected-Positions: 0,2-4,6\r\n");
    T_CHECK(run("[1,\"x\"]") == 2, "all dropped");
    T_STREQ(out, "X-Enrich-Rejected: 2\r\nX-Enrich-Rejected-Positions: 0-1\r\n");
    {
        /* every other element dropped: the list is cut, said, and fits */
        size_t n = 10000, len = 0;
        char *body = malloc(n * (sizeof OK + 2) + 4), *p = body;
        *p++ = '[';
        for (size_t i = 0; i < n; i++) {
            const char *el = i % 2 ? OK : "0";
            len = strlen(el);
            memcpy(p, el, len);
            p += len;
            *p++ = i + 1 < n ? ',' : ']';
        }
        *p = '\0';
        T_CHECK(run(body) == n / 2, "half of %zu dropped", n);
        len = strlen(out);
        T_CHECK(len < ENR_REJECTED_HEADERS_MAX && len > ENR_REJECTED_POSITIONS_MAX - 16,
                "cut near the cap: %zu bytes", len);
        {
            static const char want[] = "X-Enrich-Rejected: 5000\r\n"
                                       "X-Enrich-Rejected-Positions: 0,2,4,";
            T_CHECK(strncmp(out, want, sizeof want - 1) == 0 &&
                        strcmp(out + len - 6, ",...\r\n") == 0,
                    "cut at a whole entry, ending in \",...\": %.80s", out);
        }
        free(body);
    }
    enr_batch_free(&b);
    enr_engine_free(e);
    T_DONE();
}
