/*
 * master.h: the supervising process: owns the listening sockets, the
 * scoreboard and the pool, and talks to systemd.  See master.c.
 */
#ifndef ENR_MASTER_H
#define ENR_MASTER_H

#include "base/config.h"

/* Runs the daemon in the foreground until TERM/INT (drain) or QUIT.
 * cfg_path is re-read on HUP (NULL: the built-in default).  Returns the
 * process exit code. */
int enr_master_run(const enr_config *cfg, const char *cfg_path);

#endif
