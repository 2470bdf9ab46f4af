/*
 * listen.h: the master's listening sockets: passed by systemd (socket
 * activation) or bound from the configuration.
 */
#ifndef ENR_LISTEN_H
#define ENR_LISTEN_H

#include <stddef.h>

#include "config.h"

/* Opens the FastCGI socket and the status socket: a descriptor passed by
 * systemd (named "status" for the status socket, any other name for the
 * FastCGI one) wins over the configuration.  Both end up non-blocking
 * and close-on-exec.  listen_path / status_path (ENR_PATH_MAX) receive
 * the unix socket paths this call created (to unlink at exit), or "".
 * Returns 0, or -1 with a message in err. */
int enr_listen_open(const enr_config *c, int *listen_fd, int *status_fd, char *listen_path,
                    char *status_path, char *err, size_t errlen);

/* 1 when systemd passed sockets (socket activation).  Call it before
 * enr_listen_open(), which takes them over. */
int enr_listen_activated(void);

#endif
