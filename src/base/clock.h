/*
 * clock.h: the two clocks, in the units the daemon uses.
 *
 * CLOCK_MONOTONIC for every deadline, interval and age (it never jumps);
 * CLOCK_REALTIME only for times people or other programs read (fetched_at,
 * log timestamps, start times on the status page) and the providers' days;
 * CLOCK_BOOTTIME (monotonic, counting suspend) for how much of a provider's
 * day really passed, whatever the wall clock was stepped to (budget.c).
 */
#ifndef ENR_CLOCK_H
#define ENR_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t enr_mono_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static inline uint64_t enr_mono_ms(void)
{
    return enr_mono_us() / 1000u;
}

static inline uint64_t enr_wall_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static inline uint64_t enr_wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static inline uint64_t enr_boot_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_BOOTTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

#endif
