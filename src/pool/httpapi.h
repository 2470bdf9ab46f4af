/*
 * httpapi.h: the worker's HTTP API: one FastCGI request in, one answer
 * out (routes, method, shedding, the body, the engine and the upstream
 * client, the NDJSON answer or a JSON error).
 *
 * Every way a request ends is one row of ENR_REQ_OUTCOMES with its HTTP
 * status: the status each answer carries, the one the scoreboard counts
 * and the one the logs show all come from that row (enr_req_status).
 */
#ifndef ENR_HTTPAPI_H
#define ENR_HTTPAPI_H

#include <stdint.h>

#include "base/scoreboard.h"
#include "engine/engine.h"
#include "pool/worker_int.h"

/* The worker's deadline keeps this much (or a tenth of
 * request_timeout_ms, if smaller) to write a 503 before the master's
 * request_timeout_ms sampler would kill it. */
#define ENR_API_ANSWER_MARGIN_MS 100

/* X(NAME, STATUS): STATUS 0 is the engine's own (enr_error.status: 400,
 * 413, 500), for a batch it refused or an answer past max_output_bytes. */
#define ENR_REQ_OUTCOMES(X)                                                                        \
    X(OK, 200)             /* answered; before the answer: nothing wrong yet */                    \
    X(NOT_FOUND, 404)      /* a path that is none of the routes */                                 \
    X(NOT_POST, 405)       /* a route asked with another method */                                 \
    X(SHED, 503)           /* waited past queue_timeout_ms (shed.h) */                             \
    X(BODY_LENGTH, 400)    /* a body shorter or longer than its CONTENT_LENGTH */                  \
    X(BODY_TOO_LARGE, 413) /* past max_body_bytes */                                               \
    X(BODY_TIMEOUT, 408)   /* not received within body_timeout_ms, the caller still there */       \
    X(NO_MEMORY, 503)      /* the worker's allocation failed: its failure, not the caller's */     \
    X(DEADLINE, 503)       /* request_timeout_ms (less the answer's margin) reached */             \
    X(REJECTED, 0)         /* the engine's error, its status and where */                          \
    X(CALLER_GONE, ENR_SB_STATUS_CLIENT_GONE) /* nobody to answer: nothing is sent */              \
    X(ANSWER_LOST, ENR_SB_STATUS_CLIENT_GONE) /* the answer's write failed */

typedef enum {
#define ENR_REQ_ENUM(name, status) ENR_REQ_##name,
    ENR_REQ_OUTCOMES(ENR_REQ_ENUM)
#undef ENR_REQ_ENUM
        ENR_REQ_N
} enr_req_outcome;

/* The HTTP status of outcome o; err is the engine's error (read for
 * ENR_REQ_REJECTED only). */
int enr_req_status(enr_req_outcome o, const enr_error *err);

/* What one request did, for the scoreboard and the logs: its status and,
 * for an answered batch, its records in and out and those degraded. */
typedef struct enr_api_result {
    enr_req_outcome outcome;
    int status;
    uint64_t rec_in, rec_out, degraded;
} enr_api_result;

/* Answers the request w holds (w->req, w->conn); fills *o. */
void enr_api_handle(enr_worker *w, enr_api_result *o);

#endif
