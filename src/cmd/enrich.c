/*
 * enrich.c: the engine on the command line, for pipelines that start a
 * process per batch.  The body on stdin, the NDJSON on stdout, exit 0; on
 * a contract error exit 2 with the JSON error on stderr and nothing on
 * stdout; exit 1 on an operating-system or internal failure.
 *
 * Start-up is kept to what the engine needs (its Unicode tables are
 * constant data, nothing to load), so a cold run costs a few
 * milliseconds.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "engine/engine.h"

#define ENR_CLI_READ_CHUNK 65536

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);

        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int main(int argc, char **argv)
{
    enr_buf in = {0}, out = {0};
    enr_batch batch = {0};
    enr_error err;
    enr_engine *e;
    int rc = 0;

    if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        printf("usage: enrich < batch.json > batch.ndjson\n"
               "  exit 0 answered, 2 the batch breaks the contract (JSON error on stderr),\n"
               "  1 a system or internal failure\n");
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "usage: %s < batch.json > batch.ndjson\n", argv[0]);
        return 1;
    }
    for (;;) {
        ssize_t n;

        if (enr_buf_reserve(&in, ENR_CLI_READ_CHUNK) != 0) {
            fprintf(stderr, "enrich: out of memory reading stdin\n");
            return 1;
        }
        n = read(0, in.data + in.len, in.cap - in.len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "enrich: read stdin: %s\n", strerror(errno));
            return 1;
        }
        if (n == 0)
            break;
        in.len += (size_t)n;
    }
    e = enr_engine_new();
    if (e == NULL) {
        fprintf(stderr, "enrich: cannot initialise the engine (OpenSSL or memory)\n");
        return 1;
    }
    if (enr_parse(e, in.data ? in.data : "", in.len, 0, &batch, &err) < 0) {
        enr_error_json(&err, &out);
        write_all(2, out.data, out.len);
        rc = err.status >= 500 ? 1 : 2;
    } else if (enr_emit(e, &batch, enr_wall_ms, &out, &err) < 0) { /* no limit set: never */
        enr_buf_reset(&out);
        enr_error_json(&err, &out);
        write_all(2, out.data, out.len);
        rc = 2;
    } else {
        if (out.oom) {
            fprintf(stderr, "enrich: out of memory\n");
            rc = 1;
        } else if (write_all(1, out.data, out.len) < 0) {
            fprintf(stderr, "enrich: write stdout: %s\n", strerror(errno));
            rc = 1;
        }
    }
    enr_batch_free(&batch);
    enr_engine_free(e);
    enr_buf_free(&in);
    enr_buf_free(&out);
    return rc;
}
