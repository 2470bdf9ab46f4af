/*
 * master.h: the supervising process: owns the listening sockets, the
 * scoreboard and the pool, and talks to systemd.  See master.c.
 */
#ifndef ENR_MASTER_H
#define ENR_MASTER_H

#include "base/config.h"

/* Master tick: sampling of workers, hard limits, health, watchdog. */
#define ENR_MASTER_TICK_MS 1000
/* STATUS= is refreshed this often. */
#define ENR_MASTER_STATUS_MS 2000
/* A worker that ends (crash or failure) younger than this died "early". */
#define ENR_EARLY_DEATH_MS 1000
/* This many early deaths in a row mean a crash loop. */
#define ENR_CRASHLOOP_THRESHOLD 3

/* Runs the daemon in the foreground until TERM/INT (drain) or QUIT.
 * cfg_path is re-read on HUP (NULL: the built-in default).  Returns the
 * process exit code. */
int enr_master_run(const enr_config *cfg, const char *cfg_path);

#endif
