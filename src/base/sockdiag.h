/*
 * sockdiag.h: what the kernel knows about our sockets, for operators.
 *
 *   - the listen-queue depth of the workers' listening socket: for a unix
 *     socket through NETLINK_SOCK_DIAG (UNIX_DIAG_RQLEN), for TCP through
 *     TCP_INFO; both give the current depth and the backlog limit;
 *   - leak attribution of a process: its descriptors from /proc/PID/fd by
 *     kind (files, pipes, unix sockets, TCP sockets by state with
 *     CLOSE_WAIT apart and its most common peers), matched by inode
 *     against a snapshot of the kernel's socket tables (sock_diag).
 *
 * Everything here only reads; nothing blocks on another process.
 */
#ifndef ENR_SOCKDIAG_H
#define ENR_SOCKDIAG_H

#include <stddef.h>
#include <sys/types.h>

#define ENR_FD_TOP_PEERS 3     /* CLOSE_WAIT peers reported per process */
#define ENR_TCP_STATE_COUNT 13 /* kernel TCP states are 1..12 */

typedef struct enr_fd_peer {
    char addr[64]; /* "10.0.0.5:443" or "[::1]:8080" */
    unsigned n;
} enr_fd_peer;

typedef struct enr_fd_kinds {
    unsigned total;
    unsigned files; /* regular files, devices, directories */
    unsigned pipes;
    unsigned unix_socks;
    unsigned tcp_socks;                           /* every TCP state, CLOSE_WAIT included */
    unsigned other_socks;                         /* netlink, UDP, sockets not in the snapshot */
    unsigned other;                               /* anon inodes (eventfd, epoll, timerfd ...) */
    unsigned tcp_state[ENR_TCP_STATE_COUNT];      /* indexed by kernel state */
    unsigned close_wait;                          /* == tcp_state[TCP_CLOSE_WAIT], kept apart */
    enr_fd_peer top_close_wait[ENR_FD_TOP_PEERS]; /* most frequent first */
    unsigned n_top_close_wait;
} enr_fd_kinds;

/* A snapshot of the TCP (v4 and v6) and unix socket tables, by inode. */
typedef struct enr_sockdiag_snap enr_sockdiag_snap;

/* NULL on failure, with the reason in err. */
enr_sockdiag_snap *enr_sockdiag_snap_take(char *err, size_t errlen);
void enr_sockdiag_snap_free(enr_sockdiag_snap *s);

/* Classify the descriptors of pid.  snap may be NULL (sockets then count
 * as other_socks).  Returns 0, or -1 with errno when /proc/PID/fd cannot
 * be read (the process is gone or not ours). */
int enr_sockdiag_fds(const enr_sockdiag_snap *snap, pid_t pid, enr_fd_kinds *out);

/* Listen-queue depth of the listening socket fd (unix or TCP): queued
 * connections not yet accepted, and the backlog limit.  0 or -1. */
int enr_sockdiag_listen_queue(int fd, unsigned *queued, unsigned *limit);

/* "CLOSE_WAIT", "ESTABLISHED" ... ("UNKNOWN" out of range). */
const char *enr_tcp_state_name(unsigned state);

/* One line for a human: "812 fds, 790 TCP CLOSE_WAIT to 10.0.0.5:443,
 * 12 files, 4 pipes, 3 unix".  Returns the length snprintf would need. */
int enr_fd_kinds_describe(const enr_fd_kinds *k, char *buf, size_t len);

#endif
