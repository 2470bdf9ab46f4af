/*
 * breaker.c: the circuit breaker state machine (see breaker.h).
 *
 * Invariants: state is one of enum enr_breaker_state; failures counts
 * only while closed and is zeroed by any success; the outcome window
 * records only calls made while closed and is emptied whenever the state
 * changes; probe_out is set only in half_open.  No clock is read here:
 * time comes from the caller.
 */
#include "upstream/breaker.h"

void enr_breaker_init(enr_breaker *br, unsigned threshold, unsigned cooldown_ms)
{
    br->state = ENR_BREAKER_CLOSED;
    br->failures = 0;
    /* A threshold of 0 would open on nothing; treat it as "open on the
     * first failure", the most cautious reading. */
    br->threshold = threshold ? threshold : 1;
    br->cooldown_ms = cooldown_ms;
    br->opened_ms = 0;
    br->probe_out = 0;
    br->opens = 0;
    br->window = 0;
    br->ratio = 1;
    br->ring[0] = br->ring[1] = 0;
    br->ring_n = br->ring_pos = br->ring_failed = 0;
}

static void window_clear(enr_breaker *br)
{
    br->ring[0] = br->ring[1] = 0;
    br->ring_n = br->ring_pos = br->ring_failed = 0;
}

void enr_breaker_set_window(enr_breaker *br, unsigned window, double ratio)
{
    br->window = window > ENR_BREAKER_WINDOW_MAX ? ENR_BREAKER_WINDOW_MAX : window;
    br->ratio = ratio;
    window_clear(br);
}

/* Records one outcome of a closed breaker's call; returns 1 when the
 * window is full and its failure ratio reaches the limit. */
static int window_record(enr_breaker *br, int failed)
{
    uint64_t *word = &br->ring[br->ring_pos / 64];
    uint64_t bit = (uint64_t)1 << (br->ring_pos % 64);

    if (br->window == 0)
        return 0;
    if (br->ring_n == br->window) { /* full: the oldest outcome leaves */
        if (*word & bit)
            br->ring_failed--;
    } else {
        br->ring_n++;
    }
    if (failed) {
        *word |= bit;
        br->ring_failed++;
    } else {
        *word &= ~bit;
    }
    br->ring_pos = (br->ring_pos + 1) % br->window;
    return br->ring_n == br->window && (double)br->ring_failed >= br->ratio * br->window;
}

static void breaker_open(enr_breaker *br, uint64_t now_ms)
{
    br->state = ENR_BREAKER_OPEN;
    br->opened_ms = now_ms;
    br->probe_out = 0;
    br->failures = 0;
    br->opens++;
    window_clear(br);
}

int enr_breaker_allow(enr_breaker *br, uint64_t now_ms, int *prev)
{
    *prev = br->state;
    switch (br->state) {
    case ENR_BREAKER_CLOSED:
        return 1;
    case ENR_BREAKER_OPEN:
        if (now_ms - br->opened_ms < br->cooldown_ms)
            return 0;
        br->state = ENR_BREAKER_HALF_OPEN;
        br->probe_out = 1;
        return 1;
    default: /* half_open: the probe is already out */
        if (br->probe_out)
            return 0;
        br->probe_out = 1;
        return 1;
    }
}

int enr_breaker_success(enr_breaker *br, uint64_t now_ms)
{
    int prev = br->state;

    (void)now_ms;
    /* A success reported while open is a call that was let out before the
     * breaker opened; it says nothing about the upstream now, so only the
     * probe (half_open) or a closed breaker act on it. */
    if (br->state == ENR_BREAKER_OPEN)
        return prev;
    if (prev == ENR_BREAKER_CLOSED)
        window_record(br, 0);
    else
        window_clear(br); /* the probe closed it: judge afresh */
    br->state = ENR_BREAKER_CLOSED;
    br->failures = 0;
    br->probe_out = 0;
    return prev;
}

int enr_breaker_failure(enr_breaker *br, uint64_t now_ms)
{
    int prev = br->state;

    switch (br->state) {
    case ENR_BREAKER_CLOSED:
        /* both rules see every failure: record before judging */
        if (window_record(br, 1) || ++br->failures >= br->threshold)
            breaker_open(br, now_ms);
        break;
    case ENR_BREAKER_HALF_OPEN:
        breaker_open(br, now_ms);
        break;
    default: /* already open: a straggler of an earlier batch */
        break;
    }
    return prev;
}

void enr_breaker_release(enr_breaker *br)
{
    if (br->state == ENR_BREAKER_HALF_OPEN)
        br->probe_out = 0;
}

const char *enr_breaker_state_name(uint64_t state)
{
    switch (state) {
    case ENR_BREAKER_CLOSED:
        return "closed";
    case ENR_BREAKER_OPEN:
        return "open";
    case ENR_BREAKER_HALF_OPEN:
        return "half_open";
    }
    return "unknown";
}
