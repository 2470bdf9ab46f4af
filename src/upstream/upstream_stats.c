/*
 * upstream_stats.c: the table of the upstream counters as data
 * (upstream_stats.h), for the surfaces that loop over it.
 */
#include "upstream/upstream_stats.h"

const enr_up_counter_row enr_up_counter_rows[ENR_UP_NCOUNTERS] = {
#define ENR_UP_DATA(field, metric, kind, help) {#field, metric, kind, help},
    ENR_UP_COUNTERS(ENR_UP_DATA)
#undef ENR_UP_DATA
};
