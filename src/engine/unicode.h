/*
 * unicode.h: the Unicode steps of the contract on WTF-8 text (text.h):
 * id lower-casing (rule 10), title NFKC and white-space folding (rules 7.2,
 * 8, 12), with the Unicode data of ucd.c (rule 17).
 *
 * An enr_uni holds the scratch buffers of one worker; it is not shared
 * between threads.  ASCII input never reaches the normalizer.
 */
#ifndef ENR_UNICODE_H
#define ENR_UNICODE_H

#include "base/buf.h"
#include "engine/wtf8.h" /* ENR_UNI_TOO_LONG */

typedef struct enr_uni enr_uni;

#define ENR_UNI_NO_MAX ((size_t)-1 / 2) /* max for "no limit" */

enr_uni *enr_uni_new(void); /* NULL without memory */
void enr_uni_free(enr_uni *u);

/* Rule 4.2: trim white space at both ends, then full lower-case mapping
 * (root locale: final sigma, U+0130).  Appends to out; 0, -1 (out of
 * memory failure), or ENR_UNI_TOO_LONG (nothing appended) when the result
 * would pass max bytes. */
int enr_uni_id(enr_uni *u, const char *s, size_t len, size_t max, enr_buf *out);

/* Rule 7.2: NFKC, then every maximal run of white space becomes one
 * U+0020, then trim.  Appends to out; 0, -1, or ENR_UNI_TOO_LONG (nothing
 * appended) when the result would pass max bytes: it is found out piece
 * by piece, before the scratch buffers grow for more than one piece. */
int enr_uni_title(enr_uni *u, const char *s, size_t len, size_t max, enr_buf *out);

/* enr_uni_title of a string's bytes in the body, without escapes and not
 * yet decoded (not known to be well-formed): the same result, or 1
 * (nothing appended) when they need decoding or the checked paths first
 * (ill-formed UTF-8, a lone surrogate's bytes, slow mode, ...). */
int enr_uni_title_raw(enr_uni *u, const char *s, size_t len, size_t max, enr_buf *out);

/* slow = 1 turns the fast paths off (the NFKC check on UTF-8 bytes, the
 * table-driven white-space fold): the reference the fuzz target holds
 * them to.  Off by default. */
void enr_uni_set_slow(enr_uni *u, int slow);

/* Frees scratch buffers grown past keep bytes (after a huge request). */
void enr_uni_shrink(enr_uni *u, size_t keep);

/* "Unicode 17.0": reported by -V and at start-up (rule 17). */
const char *enr_uni_version(void);

#endif
