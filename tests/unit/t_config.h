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

#endif
