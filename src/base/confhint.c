/*
 * confhint.c: what an operator's first mistakes in a configuration file
 * are told (confhint.h): the key a typo meant, the number to write for
 * a value given with a unit.  Pure functions of their arguments, so
 * config.c's messages stay one line each.
 */
#include "base/confhint.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Edit distance of a and b, at most KEY_NAME_MAX bytes each (else
 * a large number): a typo's nearest key is what the operator meant. */
#define KEY_NAME_MAX 40
static unsigned edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned row[KEY_NAME_MAX + 1];

    if (la > KEY_NAME_MAX || lb > KEY_NAME_MAX)
        return UINT_MAX;
    for (size_t j = 0; j <= lb; j++)
        row[j] = (unsigned)j;
    for (size_t i = 1; i <= la; i++) {
        unsigned diag = row[0];
        row[0] = (unsigned)i;
        for (size_t j = 1; j <= lb; j++) {
            unsigned up = row[j];
            unsigned best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* The key one or two edits away (a third of the name at most), if one
 * is nearest; NULL when none is close. */
const char *enr_confhint_nearest(const char *key, const char *const *names, size_t n, size_t stride)
{
    const char *best = NULL;
    unsigned bestd = UINT_MAX;
    unsigned limit = strlen(key) < 6 ? 1 : 2;

    for (size_t i = 0; i < n; i++) {
        const char *name = *(const char *const *)((const char *)names + i * stride);
        unsigned d = edit_distance(key, name);
        if (d < bestd) {
            bestd = d;
            best = name;
        }
    }
    return bestd <= limit ? best : NULL;
}

/* "150ms" for a key in milliseconds, "4MB" for a size: digits, then a
 * unit.  A key's name carries its unit, so the value never does: says so
 * with the number to write instead ("10s" for a key in milliseconds is
 * 10000), or returns "" when v is not digits and a word. */
const char *enr_confhint_unit(const char *key, int size, const char *v, char *out, size_t outlen)
{
    static const struct {
        const char *suffix, *unit;
        unsigned long long ms; /* the key's unit, in ms; 0: not a time */
    } keyunits[] = {{"_ms", "milliseconds", 1}, {"_s", "seconds", 1000}, {"_mb", "MiB", 0}};
    static const struct {
        const char *name;
        unsigned long long ms;
    } times[] = {{"ms", 1},    {"s", 1000},    {"sec", 1000},
                 {"m", 60000}, {"min", 60000}, {"h", 3600000}};
    size_t d = strspn(v, "0123456789"), klen = strlen(key);
    const char *unit = v + d + strspn(v + d, " ");
    unsigned long long n = 0;
    size_t ki;

    if (d == 0 || d > 12 || *unit == '\0')
        return "";
    for (const char *p = unit; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
            return "";
    for (size_t i = 0; i < d; i++)
        n = n * 10 + (unsigned long long)(v[i] - '0');
    if (size) {
        char c = (char)(unit[0] | 0x20);
        if (c == 'k' || c == 'm' || c == 'g')
            snprintf(out, outlen, ": drop the unit \"%s\" (bytes, or one letter k, m or g: %llu%c)",
                     unit, n, c);
        else
            snprintf(out, outlen, ": drop the unit \"%s\" (bytes, or one letter k, m or g)", unit);
        return out;
    }
    for (ki = 0; ki < sizeof keyunits / sizeof keyunits[0]; ki++) {
        size_t sl = strlen(keyunits[ki].suffix);
        if (klen > sl && strcmp(key + klen - sl, keyunits[ki].suffix) == 0)
            break;
    }
    if (ki == sizeof keyunits / sizeof keyunits[0]) {
        snprintf(out, outlen, ": drop the unit \"%s\" (a plain number: %llu)", unit, n);
        return out;
    }
    if (keyunits[ki].ms != 0) {
        for (size_t t = 0; t < sizeof times / sizeof times[0]; t++) {
            unsigned long long ms = n * times[t].ms;
            if (strcasecmp(unit, times[t].name) != 0)
                continue;
            if (ms % keyunits[ki].ms == 0) {
                snprintf(out, outlen, ": drop the unit \"%s\" (%s is in %s: %llu)", unit, key,
                         keyunits[ki].unit, ms / keyunits[ki].ms);
                return out;
            }
        }
    }
    snprintf(out, outlen, ": drop the unit \"%s\" (%s is in %s)", unit, key, keyunits[ki].unit);
    return out;
}
