/*
 * jstring.h: JSON string decoding to WTF-8, for the batch reader.
 */
#ifndef ENR_JSTRING_H
#define ENR_JSTRING_H

#include "base/buf.h"

/* Appends the decoded form of the string body [p, e) (between its
 * quotes; the scanner has checked its escapes) to out.  escaped and
 * nonascii say whether it holds a backslash or a byte >= 0x80, as the
 * scanner saw; slow takes the reference path (no copy-at-once). */
void enr_jstring_decode(const unsigned char *p, const unsigned char *e, int escaped, int nonascii,
                        int slow, enr_buf *out);

#endif
