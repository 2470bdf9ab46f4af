/*
 * notify.h: the master's conversation with systemd (sd_notify):
 * READY=1, RELOADING=1 + MONOTONIC_USEC, STOPPING=1, STATUS= and the
 * watchdog.  Without NOTIFY_SOCKET every call is a cheap no-op, so the
 * daemon runs the same in a terminal.
 */
#ifndef ENR_NOTIFY_H
#define ENR_NOTIFY_H

#include <stdint.h>

/* Reads NOTIFY_SOCKET / WATCHDOG_USEC once; returns the watchdog ping
 * interval in ms (half of WATCHDOG_USEC), or 0 when there is no watchdog. */
uint64_t enr_notify_init(void);

void enr_notify_ready(void);
void enr_notify_reloading(void); /* RELOADING=1 with MONOTONIC_USEC */
void enr_notify_stopping(void);
void enr_notify_watchdog(void);
void enr_notify_status(const char *text);

/* Called in a child after fork: the children never talk to systemd. */
void enr_notify_forget(void);

#endif
