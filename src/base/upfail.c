/*
 * upfail.c: the table of how an upstream call ends (upfail.h) as data,
 * and the lookups every surface shares.
 */
#include "base/upfail.h"

#include <stdio.h>

#include "base/log.h"

const enr_up_fail_row enr_up_fail_rows[ENR_UP_NFAILS] = {
#define ENR_UP_FAIL_DATA(id, field, word, pause, breaker, degraded, ends, pause_s, level, said,    \
                         help)                                                                     \
    {#field,          word, help, pause, breaker, degraded, ENR_UP_END_##ends, pause_s,            \
     ENR_LOG_##level, said},
    ENR_UP_FAILS(ENR_UP_FAIL_DATA)
#undef ENR_UP_FAIL_DATA
};

const char *enr_up_fail_name(int kind)
{
    return kind >= 0 && kind < ENR_UP_NFAILS ? enr_up_fail_rows[kind].word : "unknown";
}

int enr_up_fail_of_end(unsigned ends)
{
    for (int k = 0; ends != ENR_UP_END_NONE && k < ENR_UP_NFAILS; k++)
        if (enr_up_fail_rows[k].ends == ends)
            return k;
    return -1;
}

int enr_up_fail_of_pause(uint64_t rank)
{
    for (int k = 0; rank != 0 && k < ENR_UP_NFAILS; k++)
        if (enr_up_fail_rows[k].pause == rank)
            return k;
    return -1;
}

const char *enr_up_pause_name(uint64_t rank)
{
    return rank == 0 ? "none" : enr_up_fail_name(enr_up_fail_of_pause(rank));
}

void enr_up_pause_words(char *out, size_t n)
{
    size_t used = 0;

    if (n == 0)
        return;
    out[0] = '\0';
    for (int k = 0; k < ENR_UP_NFAILS && used < n; k++) {
        int w;
        if (enr_up_fail_rows[k].pause == 0)
            continue;
        w = snprintf(out + used, n - used, "%s%s", used ? ", " : "", enr_up_fail_rows[k].word);
        if (w < 0)
            return;
        used += (size_t)w;
    }
}
