/*
 * breaker.h: the upstream client's circuit breaker (docs/upstream.md).
 *
 * closed --(failures consecutive failed calls)--> open
 * closed --(failure ratio >= ratio over the last `window` calls)--> open
 * open --(cooldown elapsed, next allow())--> half_open: exactly one probe
 * half_open --probe succeeded--> closed;  --probe failed--> open again
 *
 * Pure state machine: the caller passes the clock (CLOCK_MONOTONIC ms),
 * so tests drive time by hand.  Every transition is reported to the
 * caller through the return value, so the caller logs and counts it.
 */
#ifndef ENR_BREAKER_H
#define ENR_BREAKER_H

#include <stdint.h>

/* Stored as a number in the scoreboard (up_breaker_state). */
enum enr_breaker_state {
    ENR_BREAKER_CLOSED = 0,
    ENR_BREAKER_OPEN,
    ENR_BREAKER_HALF_OPEN,
    ENR_BREAKER_STATES
};

typedef struct enr_breaker {
    int state;            /* enum enr_breaker_state */
    unsigned failures;    /* consecutive failed calls while closed */
    unsigned threshold;   /* failures that open it (>= 1) */
    unsigned cooldown_ms; /* open -> half_open delay */
    uint64_t opened_ms;   /* when it last opened */
    int probe_out;        /* half_open: the one probe has been let through */
    uint64_t opens;       /* transitions into open, cumulative */
    /* The ratio rule catches an upstream that fails often but never
     * `threshold` times in a row (a flapping one): the outcomes of the last
     * `window` calls while closed, one bit each (1 = failed). */
    unsigned window;      /* 0: rule off; at most ENR_BREAKER_WINDOW_MAX */
    double ratio;         /* failures / window that open it */
    uint64_t ring[2];     /* outcome bits, oldest overwritten */
    unsigned ring_n;      /* outcomes recorded, up to window */
    unsigned ring_pos;    /* next bit to write */
    unsigned ring_failed; /* set bits among the recorded outcomes */
} enr_breaker;

#define ENR_BREAKER_WINDOW_MAX 128

void enr_breaker_init(enr_breaker *br, unsigned threshold, unsigned cooldown_ms);

/* Turns on the ratio rule (window 0 turns it off; larger than
 * ENR_BREAKER_WINDOW_MAX is clamped to it).  Only a full window judges. */
void enr_breaker_set_window(enr_breaker *br, unsigned window, double ratio);

/* May a call go out now?  1 yes, 0 skip it.  In half_open only the first
 * caller gets 1 (the probe) until its result is reported.  *prev is set
 * to the state before the call so a transition (open -> half_open) shows. */
int enr_breaker_allow(enr_breaker *br, uint64_t now_ms, int *prev);

/* Report a call's result; returns the state before it (compare with
 * br->state to see a transition). */
int enr_breaker_success(enr_breaker *br, uint64_t now_ms);
int enr_breaker_failure(enr_breaker *br, uint64_t now_ms);

/* A call that was let through but never made (no time was left): in
 * half_open the probe it held is given back, so the next call probes. */
void enr_breaker_release(enr_breaker *br);

/* "closed", "open", "half_open" (logs, JSON and metrics labels alike);
 * "unknown" for anything else. */
const char *enr_breaker_state_name(uint64_t state);

#endif
