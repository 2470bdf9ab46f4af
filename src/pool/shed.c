/*
 * shed.c: the queue wait of a request and the shedding rule (shed.h).
 *
 * Invariants: pure functions of their arguments (the caller reads the
 * clock and the parameter), so the unit tests and the fuzzer drive them
 * with any text, except enr_shed_tcp_wait_ms, which asks the kernel; a
 * parameter that is not exactly nginx's $msec format is "unknown", never
 * a guess.
 */
#include "pool/shed.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

/* $msec is at most 10 digits of seconds for a long while yet; more is not nginx. */
#define MSEC_SECONDS_DIGITS_MAX 12
#define MSEC_FRACTION_DIGITS_MAX 3

int enr_shed_parse_msec(const char *text, uint64_t *ms)
{
    uint64_t sec = 0, frac = 0;
    unsigned nsec = 0, nfrac = 0;
    const char *p = text;

    if (p == NULL)
        return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (++nsec > MSEC_SECONDS_DIGITS_MAX)
            return -1;
        sec = sec * 10 + (uint64_t)(*p - '0');
    }
    if (nsec == 0)
        return -1;
    if (*p == '.') {
        for (p++; *p >= '0' && *p <= '9'; p++) {
            if (++nfrac > MSEC_FRACTION_DIGITS_MAX)
                return -1;
            frac = frac * 10 + (uint64_t)(*p - '0');
        }
        if (nfrac == 0)
            return -1;
        for (; nfrac < MSEC_FRACTION_DIGITS_MAX; nfrac++)
            frac *= 10;
    }
    if (*p != '\0')
        return -1;
    *ms = sec * 1000 + frac;
    return 0;
}

uint64_t enr_shed_wait_ms(const char *text, uint64_t now_wall_ms, int *known)
{
    uint64_t at;
    int ok;

    /* nginx's clock ahead of ours (another host, a step): no wait known. */
    ok = text != NULL && enr_shed_parse_msec(text, &at) == 0 && at <= now_wall_ms &&
         now_wall_ms - at <= ENR_SHED_WAIT_SANE_MS;
    if (known != NULL)
        *known = ok;
    return ok ? now_wall_ms - at : 0;
}

int enr_shed_tcp_wait_ms(int fd, uint64_t *ms)
{
    struct tcp_info ti;
    socklen_t len = sizeof ti;

    /* A unix socket fails here (EOPNOTSUPP): no kernel view of its wait. */
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 || len < sizeof ti)
        return -1;
    *ms = ti.tcpi_last_data_recv;
    return 0;
}

int enr_shed_due(const enr_config *c, uint64_t wait_ms)
{
    return c->queue_timeout_ms != 0 && wait_ms > c->queue_timeout_ms;
}

unsigned enr_shed_retry_after_s(const enr_config *c)
{
    unsigned s = (c->queue_timeout_ms + 999) / 1000;
    return s ? s : 1;
}
