/*
 * bench-null.c: the transport floor of `make bench`: a FastCGI responder
 * that does no work.  Behind the same nginx configuration as enrichd it
 * measures what nginx, libfcgi and the kernel cost per request on this
 * machine, so that enrichd's figures can be read as a share of it.
 *
 *   bench-null [--stock] SOCKET [WORKERS [ANSWER_BYTES]]
 *
 * Binds SOCKET (a Unix path, mode 0666: it lives in the bench's private
 * directory), forks WORKERS processes (default 6, enrichd's default pool)
 * that each accept, read the whole body as enrichd does, and answer
 * ANSWER_BYTES (default 80 KB, about enrichd's answer to the 400 KB
 * batch) of NDJSON-shaped bytes: the body read straight into a buffer
 * by enrichd's record reader (fcgi_body.h), the answer and the closing
 * records in 64 KB records by writev (fcgi_stream.h), through enrichd's
 * connection layer (fcgi_conn.h); --stock: libfcgi's own accept and 8 KB
 * streams both ways.  Runs until killed; the
 * bench kills its process group.  A bench tool only: never installed.
 */
#include <fcgiapp.h>
#include <fcntl.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/clock.h"
#include "fcgi/fcgi_body.h"
#include "fcgi/fcgi_conn.h"
#include "fcgi/fcgi_stream.h"

#define NULL_DEFAULT_WORKERS 6
#define NULL_DEFAULT_ANSWER (80 * 1024)
#define NULL_BACKLOG 511
#define NULL_READ_CHUNK (64 * 1024) /* enrichd's body read size */
#define NULL_WRITE_TIMEOUT_MS 10000 /* enrichd's default write_timeout_ms */
#define NULL_MAX_BODY (4u << 20)    /* nginx/enrichd.conf client_max_body_size */
#define NULL_HEADER_TIMEOUT_MS 1000 /* enrichd's worker.h bounds */
#define NULL_LINGER_MS 500
#define NULL_BODY_TIMEOUT_MS 5000 /* enrichd's default body_timeout_ms */

/* enrichd's transport (fcgi_conn.h): accept, the checked records, the
 * body straight into a buffer the process keeps, the answer and its
 * closing records in 64 KB records, the bounded close. */
static void serve_wide(int fd, const char *answer, size_t len)
{
    static volatile sig_atomic_t never;
    enr_buf body = {0};
    FCGX_Request req;
    enr_fcgi_conn c;
    char head[128];
    int hlen = snprintf(head, sizeof head,
                        "Status: 200 OK\r\nContent-Type: application/x-ndjson\r\n"
                        "Content-Length: %zu\r\n\r\n",
                        len);

    memset(&c, 0, sizeof c);
    c.listen_fd = fd;
    c.side_fd = -1; /* nothing else to wait for (0 would be stdin) */
    c.req = &req;
    c.header_ms = NULL_HEADER_TIMEOUT_MS;
    c.read_ms = NULL_HEADER_TIMEOUT_MS;
    c.write_ms = NULL_WRITE_TIMEOUT_MS;
    c.linger_ms = NULL_LINGER_MS;
    c.max_conns = 1;
    c.stop = &never;
    if (enr_fcgi_conn_init(&c) != 0)
        exit(1);
    for (;;) {
        int cfd = enr_fcgi_conn_next(&c, -1);
        if (cfd < 0)
            exit(1);
        if (enr_fcgi_conn_open(&c, cfd) != 0)
            continue;
        enr_buf_reset(&body);
        /* A real deadline: with 0, the first read that finds nothing yet
         * would end the body (every batch larger than a socket buffer). */
        if (enr_fcgi_conn_body(&c, &body, NULL_MAX_BODY, SIZE_MAX,
                               enr_mono_ms() + NULL_BODY_TIMEOUT_MS) == ENR_FCGI_BODY_DONE)
            enr_fcgi_write_answer(&req, head, (size_t)hlen, answer, len, NULL_WRITE_TIMEOUT_MS);
        enr_fcgi_conn_finish(&c);
        enr_fcgi_conn_close(&c);
    }
}

/* libfcgi's own 8 KB streams both ways (--stock). */
static void serve_stock(int fd, const char *answer, size_t len)
{
    static char scratch[NULL_READ_CHUNK];
    FCGX_Request req;
    char head[128];
    int hlen;

    if (FCGX_InitRequest(&req, fd, 0) != 0)
        exit(1);
    while (FCGX_Accept_r(&req) >= 0) {
        hlen = snprintf(head, sizeof head,
                        "Status: 200 OK\r\nContent-Type: application/x-ndjson\r\n"
                        "Content-Length: %zu\r\n\r\n",
                        len);
        while (FCGX_GetStr(scratch, sizeof scratch, req.in) == (int)sizeof scratch)
            ;
        FCGX_PutStr(head, hlen, req.out);
        FCGX_PutStr(answer, (int)len, req.out);
        FCGX_Finish_r(&req);
    }
    exit(0);
}

int main(int argc, char **argv)
{
    int wide = !(argc > 1 && strcmp(argv[1], "--stock") == 0);
    long workers, alen;
    char *answer;
    int fd;

    if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        printf("usage: bench-null [--stock] SOCKET [WORKERS [ANSWER_BYTES]]\n");
        return 0;
    }
    if (!wide) {
        argc--;
        argv++;
    }
    workers = argc > 2 ? strtol(argv[2], NULL, 10) : NULL_DEFAULT_WORKERS;
    alen = argc > 3 ? strtol(argv[3], NULL, 10) : NULL_DEFAULT_ANSWER;
    if (argc < 2 || workers < 1 || workers > 256 || alen < 1 || alen > (1L << 30)) {
        fprintf(stderr, "usage: bench-null [--stock] SOCKET [WORKERS [ANSWER_BYTES]]\n");
        return 2;
    }
    answer = malloc((size_t)alen);
    if (answer == NULL) {
        perror("bench-null: malloc");
        return 1;
    }
    /* Lines of a plausible record length, so nginx sees the usual bytes. */
    for (long i = 0; i < alen; i++)
        answer[i] = (i % 400 == 399) ? '\n' : 'x';
    if (FCGX_Init() != 0) {
        fprintf(stderr, "bench-null: FCGX_Init failed\n");
        return 1;
    }
    unlink(argv[1]);
    fd = FCGX_OpenSocket(argv[1], NULL_BACKLOG);
    if (fd < 0) {
        fprintf(stderr, "bench-null: cannot listen on %s\n", argv[1]);
        return 1;
    }
    /* enrichd's listening sockets are non-blocking (fcgi_conn.h). */
    if (wide && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) {
        perror("bench-null: O_NONBLOCK");
        return 1;
    }
    if (chmod(argv[1], 0666) != 0) {
        perror("bench-null: chmod");
        return 1;
    }
    for (long i = 0; i < workers; i++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("bench-null: fork");
            return 1;
        }
        if (pid == 0) {
            if (wide)
                serve_wide(fd, answer, (size_t)alen);
            serve_stock(fd, answer, (size_t)alen);
        }
    }
    /* The parent only waits: the bench kills the whole process group. */
    while (wait(NULL) > 0)
        ;
    return 0;
}
