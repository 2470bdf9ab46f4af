/*
 * notify.c: sd_notify(3) for the master (notify.h).
 *
 * Only the master notifies: NotifyAccess=main in the unit, and
 * enr_notify_forget() in every child drops the socket variable so a
 * library in a worker cannot speak for the service.  A failed send is
 * logged once per kind and otherwise ignored: systemd being away must
 * never stop the pool from serving.
 */
#include "pool/notify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "base/log.h"

static int notify_enabled;
static int notify_warned;

static void send_state(const char *state)
{
    int r;

    if (!notify_enabled)
        return;
    r = sd_notify(0, state);
    if (r < 0 && !notify_warned) {
        notify_warned = 1;
        enr_log(ENR_LOG_WARN, "sd_notify failed", "error=%d", -r);
    }
}

uint64_t enr_notify_init(void)
{
    uint64_t usec = 0;
    const char *s = getenv("NOTIFY_SOCKET");

    notify_enabled = s != NULL && s[0] != '\0';
    if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0)
        return usec / 2000; /* ping at half the period, in ms */
    return 0;
}

void enr_notify_ready(void)
{
    send_state("READY=1");
}

void enr_notify_reloading(void)
{
    struct timespec ts;
    char msg[96];

    clock_gettime(CLOCK_MONOTONIC, &ts);
    snprintf(msg, sizeof msg, "RELOADING=1\nMONOTONIC_USEC=%llu",
             (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000);
    send_state(msg);
}

void enr_notify_stopping(void)
{
    send_state("STOPPING=1");
}

void enr_notify_watchdog(void)
{
    send_state("WATCHDOG=1");
}

void enr_notify_status(const char *text)
{
    char msg[512];

    snprintf(msg, sizeof msg, "STATUS=%s", text);
    send_state(msg);
}

void enr_notify_forget(void)
{
    notify_enabled = 0;
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
}
