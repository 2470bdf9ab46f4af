/*
 * status.h: the operators' view of the pool, served by a status process
 * that the master supervises, so it answers while every worker is busy.
 *
 * The status process only reads the scoreboard; it never touches the
 * workers' listening socket except to measure its queue.
 */
#ifndef ENR_STATUS_H
#define ENR_STATUS_H

#include <sys/types.h>

#include "base/config.h"
#include "base/scoreboard.h"
#include "upstream/cache.h"

/* Body of the status process (forked by the master's single fork site):
 * serves /healthz, /readyz, /status, /metrics over FastCGI on status_fd
 * until SIGTERM.  main_fd is the workers' listening socket, only for the
 * listen-queue depth; cache the host's upstream cache (or NULL), read
 * for its size and evictions; master_pid is the master's pid taken before the
 * fork.  Returns the process exit code. */
int enr_status_main(const enr_config *c, enr_scoreboard *sb, const enr_cache *cache, int status_fd,
                    int main_fd, pid_t master_pid);

/* `enrichd status [SOCKET]`: prints the status table for a terminal
 * (statuscli.c). */
int enr_status_cli(int argc, char **argv);

#endif
