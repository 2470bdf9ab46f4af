/*
 * confcheck.h: what `enrichd -t` says about a valid configuration next to
 * its neighbours: the rlimit and cgroup the process runs under, the
 * systemd unit's stop timeout, the nginx site that talks to the socket,
 * the socket's directory.  Warnings only: the configuration itself is
 * valid (config.h refused everything that is not), and what the
 * neighbours say may change before the daemon starts.
 *
 * Each check reads only what this process can see; one that cannot read
 * its neighbour says nothing.
 */
#ifndef ENR_CONFCHECK_H
#define ENR_CONFCHECK_H

#include "base/config.h"

/* Warnings go to an enr_warn_fn (config.h): "FILE:LINE: key: problem"
 * (LINE 0: the built-in default). */

/* Runs every check, calling warn once per finding; returns how many. */
unsigned enr_config_warn(const enr_config *c, enr_warn_fn warn, void *arg);

/* nginx's time syntax ("10s", "1m30s", "500ms", a bare number is
 * seconds): milliseconds, or -1 when text is not one. */
long long enr_nginx_time_ms(const char *text, size_t len);

#endif
