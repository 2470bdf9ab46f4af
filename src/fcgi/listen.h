/*
 * listen.h: the master's listening sockets: passed by systemd (socket
 * activation) or bound from the configuration.
 */
#ifndef ENR_LISTEN_H
#define ENR_LISTEN_H

#include <signal.h>
#include <stddef.h>

#include "base/config.h"

/* Opens the FastCGI socket and the status socket: a descriptor passed by
 * systemd (named "status" for the status socket, any other name for the
 * FastCGI one) wins over the configuration, and each key of it the passed
 * socket overrides (listen, status_listen, listen_mode, listen_group,
 * listen_backlog) is logged as a warning when the two differ.  Both end up non-blocking
 * and close-on-exec.  listen_path / status_path (ENR_PATH_MAX) receive
 * the unix socket paths this call created (to unlink at exit), or "".
 * Returns 0, or -1 with a message in err. */
int enr_listen_open(const enr_config *c, int *listen_fd, int *status_fd, char *listen_path,
                    char *status_path, char *err, size_t errlen);

/* What a listening socket really is, as the kernel and the file system
 * say (the configuration may say otherwise under socket activation). */
typedef struct enr_listen_real {
    char addr[ENR_PATH_MAX]; /* the unix path, A.B.C.D:PORT or [IPV6]:PORT */
    int is_unix;
    int have_file; /* a unix socket whose file could be stat'ed */
    unsigned mode; /* its permission bits */
    char owner[64], group[64];
    int group_unknown; /* not mapped in our user namespace: "unmapped" */
    int have_backlog;
    unsigned backlog; /* listen(2)'s limit, as the kernel holds it */
} enr_listen_real;

/* Fills r for the listening socket fd.  0, or -1 when fd has no address. */
int enr_listen_real_get(int fd, enr_listen_real *r);

/* The socket as logfmt pairs named after key ("listen"): key=ADDR
 * key_mode=0660 key_owner=USER:GROUP key_backlog=N, "-" for what a TCP
 * socket has not or the kernel did not say.  Returns buf. */
const char *enr_listen_describe(int fd, const char *key, char *buf, size_t len);

/* 1 when systemd passed sockets (socket activation).  Call it before
 * enr_listen_open(), which takes them over. */
int enr_listen_activated(void);

/* A worker's wait for the next connection on the shared listening
 * socket.  Poll-style waiting wakes every idle worker for each
 * connection and all but one lose the accept (EAGAIN); the waiter is an
 * epoll instance of the calling process holding the socket with
 * EPOLLEXCLUSIVE, so the kernel wakes one idle worker per connection.
 * side_fd (-1: none) joins the set without EPOLLEXCLUSIVE: the process's
 * own work between connections (the upstream client's transfers).
 * Returns the waiter's descriptor (close-on-exec), or -1 when epoll
 * refused it (enr_listen_wait then polls as before). */
int enr_listen_waiter(int listen_fd, int side_fd);

/* enr_listen_wait()'s answers besides 0 (time ran out) and -1. */
#define ENR_LISTEN_READY 1 /* listen_fd may have a connection */
#define ENR_LISTEN_SIDE 2  /* side_fd is readable (and listen_fd has nothing) */

/* Waits up to timeout_ms (-1: no bound) until listen_fd may have a
 * connection or side_fd (-1: none; the same one the waiter was made with)
 * is readable, with mask as the signal mask meanwhile (ppoll semantics: a
 * signal ends the wait with EINTR; mask NULL: the current one).  Returns
 * ENR_LISTEN_READY, ENR_LISTEN_SIDE, 0, or -1 with errno set. */
int enr_listen_wait(int waiter, int listen_fd, int side_fd, int timeout_ms, const sigset_t *mask);

#endif
