/*
 * t_config.h: the shipped configuration for the unit tests: the built-in
 * defaults, parsed (never copied by hand), which a test then changes
 * where it chooses on purpose.
 */
#ifndef ENR_T_CONFIG_H
#define ENR_T_CONFIG_H

#include <string.h>

#include "base/config.h"
#include "t.h"

static inline void t_default_config(enr_config *c)
{
    char err[256] = "";

    T_CHECK(enr_config_parse(c, enr_config_default_text, strlen(enr_config_default_text),
                             "defaults", err, sizeof err) == 0,
            "the built-in defaults parse: %s", err);
}

/* The defaults with the health rules the health and metrics tests judge
 * by: a window of window_s seconds, at most 5% of 5xx and half the
 * records degraded, a p99 of a second, one ready worker. */
static inline void t_health_config(enr_config *c, unsigned window_s)
{
    t_default_config(c);
    c->health_window_s = window_s;
    c->health_max_5xx_ratio = 0.05;
    c->health_max_degraded_ratio = 0.5;
    c->health_max_p99_ms = 1000;
    c->min_ready_workers = 1;
}

#endif
