/*
 * children.h: the master's children once forked: how many live, their
 * exits reaped and counted, the crash-loop guard (see children.c).
 */
#ifndef ENR_CHILDREN_H
#define ENR_CHILDREN_H

#include <stdint.h>

#include "pool/master_state.h"

/* A worker that ends (crash or failure) younger than this died "early". */
#define ENR_EARLY_DEATH_MS 1000
/* This many early deaths in a row mean a crash loop. */
#define ENR_CRASHLOOP_THRESHOLD 3

/* Workers with a process (ready_only: those that have shown ready). */
int enr_children_live(const enr_master *m, int ready_only);

/* Reaps every child that has ended (flags: WNOHANG, or 0 to wait for
 * them all), each exit classified, logged and counted once. */
void enr_children_reap(enr_master *m, int flags);

/* Ends the crash loop once some worker has lived past the early-death
 * window (the tick's sampling asks). */
void enr_children_crashloop_end(enr_master *m, uint64_t now);

#endif
