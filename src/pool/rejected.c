/*
 * rejected.c: X-Enrich-Rejected and its positions (rejected.h).
 *
 * The engine records nothing for a dropped element: every accepted record
 * already carries its element index (enr_record.element, ascending), so
 * the dropped ones are the gaps between them, found after the parse in
 * one pass over the accepted records.  The reader's hot loop is left as
 * it was (make bench-engine: the same instruction count).
 */
#include "pool/rejected.h"

#include <stdio.h>
#include <string.h>

/* Appends ",a" or ",a-b" if the entry fits in ENR_REJECTED_POSITIONS_MAX
 * (room kept for ",..."); returns 0, or -1 when it does not fit. */
static int add_range(char *val, size_t *len, size_t a, size_t b)
{
    char item[48];
    int n = a == b ? snprintf(item, sizeof item, "%s%zu", *len ? "," : "", a)
                   : snprintf(item, sizeof item, "%s%zu-%zu", *len ? "," : "", a, b);

    if (n < 0 || *len + (size_t)n + 4 > ENR_REJECTED_POSITIONS_MAX)
        return -1;
    memcpy(val + *len, item, (size_t)n + 1);
    *len += (size_t)n;
    return 0;
}

size_t enr_rejected_headers(const enr_batch *b, char *out, size_t cap)
{
    char val[ENR_REJECTED_POSITIONS_MAX + 1];
    size_t len = 0, next = 0, rejected = b->elements - b->n;
    int cut = 0;

    val[0] = '\0';
    for (size_t i = 0; i <= b->n && !cut && rejected > 0; i++) {
        size_t upto = i < b->n ? b->recs[i].element : b->elements;
        if (upto > next && add_range(val, &len, next, upto - 1) != 0)
            cut = 1;
        next = upto + 1;
    }
    if (cut)
        memcpy(val + len, ",...", 5);
    if (rejected > 0)
        snprintf(out, cap, "X-Enrich-Rejected: %zu\r\nX-Enrich-Rejected-Positions: %s\r\n",
                 rejected, val);
    else
        snprintf(out, cap, "X-Enrich-Rejected: 0\r\n");
    return rejected;
}
