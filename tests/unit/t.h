/*
 * t.h: the unit-test harness.  Each test binary prints one line per
 * failed check and ends with "N passed, M failed"; tests/run.py sums
 * these lines.  A check is one assertion, so a count means something.
 */
#ifndef ENR_T_H
#define ENR_T_H

#include <stdio.h>
#include <string.h>

static int t_pass, t_fail;

#define T_CHECK(cond, ...)                                                                         \
    do {                                                                                           \
        if (cond) {                                                                                \
            t_pass++;                                                                              \
        } else {                                                                                   \
            t_fail++;                                                                              \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
        }                                                                                          \
    } while (0)

#define T_STREQ(got, want)                                                                         \
    T_CHECK(strcmp((got), (want)) == 0, "got \"%s\", want \"%s\"", (got), (want))

#define T_DONE()                                                                                   \
    do {                                                                                           \
        printf("%d passed, %d failed\n", t_pass, t_fail);                                          \
        return t_fail ? 1 : 0;                                                                     \
    } while (0)

#endif
