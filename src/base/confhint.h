/*
 * confhint.h: advice for a refused configuration line (config.c).
 */
#ifndef ENR_CONFHINT_H
#define ENR_CONFHINT_H

#include <stddef.h>

/* The name one or two edits away from key (a third of it at most), if
 * one is nearest; NULL when none is close.  names: the first of n
 * `const char *` fields, stride bytes apart (a table of structs). */
const char *enr_confhint_nearest(const char *key, const char *const *names, size_t n,
                                 size_t stride);

/* For a value refused as a number ("150ms", "4MB", "10 s"): ": drop the
 * unit ..." with the number to write instead, written into out; ""
 * when v is not digits and a word.  size: the key takes a size (k, m, g). */
const char *enr_confhint_unit(const char *key, int size, const char *v, char *out, size_t outlen);

#endif
