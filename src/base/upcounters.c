/*
 * upcounters.c: the table of the upstream counters as data
 * (upcounters.h), and of the shared store's (storestats.h), for the
 * surfaces that loop over them.
 */
#include "base/upcounters.h"
#include "base/storestats.h"

const enr_up_counter_row enr_up_counter_rows[ENR_UP_NCOUNTERS] = {
#define ENR_UP_DATA(field, metric, kind, help) {#field, metric, kind, help},
    ENR_UP_COUNTERS(ENR_UP_DATA)
#undef ENR_UP_DATA
};

const enr_store_stat_row enr_store_stat_rows[ENR_STORE_NSTATS] = {
#define ENR_STORE_DATA(f, metric, type, help) {#f, metric, type, help},
    ENR_STORE_STATS(ENR_STORE_DATA)
#undef ENR_STORE_DATA
};
