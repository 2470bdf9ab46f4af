/*
 * upcounters.c: the table of the upstream counters as data
 * (upcounters.h), for the surfaces that loop over it.
 */
#include "base/upcounters.h"

const enr_up_counter_row enr_up_counter_rows[ENR_UP_NCOUNTERS] = {
#define ENR_UP_DATA(field, metric, kind, help) {#field, metric, kind, help},
    ENR_UP_COUNTERS(ENR_UP_DATA)
#undef ENR_UP_DATA
};
