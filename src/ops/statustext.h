/*
 * statustext.h: a status document (GET /status?full) as plain text for a
 * terminal: `enrichd status` and GET /status?text.
 *
 * The document may come from another process over a socket, so it is
 * untrusted input: its size and nesting are bounded before it is parsed,
 * and nothing in it reaches the terminal as a control character.
 */
#ifndef ENR_STATUSTEXT_H
#define ENR_STATUSTEXT_H

#include <json-c/json.h>
#include <stddef.h>

#include "base/buf.h"

#define ENR_STATUS_DOC_MAX_BYTES (8u << 20) /* a full document is ~100 KB at 256 workers */
#define ENR_STATUS_DOC_MAX_DEPTH 8          /* the document nests 3 deep */

/* Appends the text of doc to out. */
void enr_status_text(enr_buf *out, json_object *doc);

/* The screen of `enrichd status --watch`: a few lines of the pool's
 * numbers, then the same tables. */
void enr_status_text_top(enr_buf *out, json_object *doc);

/* Parses body (len bytes, no NUL needed) as a status document and
 * appends its text to out.  0, or -1 when body is not a JSON object within
 * the bounds above (out is then unchanged). */
int enr_status_text_parse(enr_buf *out, const char *body, size_t len);

/* The same, rendered by render (enr_status_text or enr_status_text_top). */
int enr_status_text_parse_as(enr_buf *out, const char *body, size_t len,
                             void (*render)(enr_buf *out, json_object *doc));

#endif
