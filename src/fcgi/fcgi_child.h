/*
 * fcgi_child.h: how a child of the master that serves FastCGI (a worker,
 * the status process) starts: one order, one parent-death signal, one
 * check that the master is still there (see fcgi_child.c).
 */
#ifndef ENR_FCGI_CHILD_H
#define ENR_FCGI_CHILD_H

#include <signal.h>
#include <stddef.h>
#include <sys/types.h>

#include "base/signals.h"

/* The signal a child gets when its master dies (PR_SET_PDEATHSIG). */
#define ENR_CHILD_PDEATHSIG SIGKILL

typedef struct enr_fcgi_child {
    const char *role;          /* the log lines' role= */
    const char *title;         /* the line ps shows, until the child sets its own */
    const char *gone;          /* the log line when the master died before us */
    pid_t master_pid;          /* getppid() before the fork */
    const enr_sig_rule *rules; /* the child's signals (signals.h) */
    size_t nrules;
} enr_fcgi_child;

/* Sets the role and title, FCGX_Init()s libfcgi, installs the child's
 * signals and blocks every handled one (*wait_mask: the empty mask to
 * wait with, the only moment they are delivered), and ties the child to
 * its master (ENR_CHILD_PDEATHSIG, then a master gone before that is
 * seen).  0, or -1 (logged): the child must exit. */
int enr_fcgi_child_start(const enr_fcgi_child *c, sigset_t *wait_mask);

#endif
