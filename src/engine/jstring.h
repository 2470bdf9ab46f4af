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

/* Appends [p, e) with its escapes decoded and every other byte copied
 * as it is, unchecked: for a reader that validates UTF-8 as it goes
 * (enr_uni_title_raw).  Where the body's bytes are well-formed UTF-8
 * this is enr_jstring_decode's result; where they are not, they stay
 * ill-formed, since an escape decodes to ASCII or a whole sequence. */
void enr_jstring_decode_unchecked(const unsigned char *p, const unsigned char *e, enr_buf *out);

#endif
