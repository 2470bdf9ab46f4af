/*
 * capture.h: a sample of real batches, written in the replay trace format
 * (replay_trace.h) so `enrich-replay` can play production back against a
 * candidate build.
 *
 * Capture never fails or slows a request beyond one copy of a sampled
 * body: the worker hands the copy to a writer thread through a queue
 * bounded by capture_queue_bytes; a full queue, a full disk or any write
 * error drops the sample and counts it.  Each worker writes its own file
 * (DIR/capture-SLOT.ndjson, rotated once to .1 at half its share of
 * capture_max_bytes), so the directory never holds more than
 * capture_max_bytes; the files are in time order and merge with
 * `sort -m`.
 */
#ifndef ENR_CAPTURE_H
#define ENR_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

#include "base/config.h"
#include "base/scoreboard.h"

typedef struct enr_capture enr_capture;

/* The capture of the worker in slot (NULL when capture_dir is empty or
 * capture_sample is 0; a start failure is logged and also gives NULL:
 * capture is never a reason for a worker not to serve). */
enr_capture *enr_capture_new(const enr_config *c, unsigned slot, enr_sb_slot *sb);

/* Offers one request body that arrived at arrival_us (CLOCK_REALTIME
 * microseconds); json_ok says the engine read it as JSON.  Sampled at
 * capture_sample; copies what it keeps. */
void enr_capture_offer(enr_capture *cap, const char *body, size_t len, uint64_t arrival_us,
                       int json_ok);

/* Writes what is queued, then stops the thread and frees everything. */
void enr_capture_free(enr_capture *cap);

#endif
