/*
 * fcgi_child.c: the start-up every FastCGI child of the master shares
 * (the workers on the API socket, the status process on its own), in one
 * order, so that the two cannot drift.
 *
 * Invariants:
 *  - libfcgi is initialised before the child's signals are installed:
 *    FCGX_Init() sets handlers of its own (SIGPIPE, SIGUSR1) where it
 *    finds the default, and the child's table must be the last word.
 *  - Every handled signal is blocked on return; the child unblocks them
 *    only while it waits for a connection (fcgi_conn.h's wait_mask), so
 *    a handler never runs in the middle of a request.
 *  - A child dies with its master (nginx's workers and php-fpm's children
 *    likewise never outlive theirs): ENR_CHILD_PDEATHSIG is KILL because
 *    a child without a master has nobody to bound its request or reap
 *    it; a master that died before prctl() is seen by getppid(), and a
 *    prctl() that fails is a start-up failure, not a silent orphan.
 */
#include "fcgi/fcgi_child.h"

#include <errno.h>
#include <fcgiapp.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "base/log.h"
#include "base/proctitle.h"

int enr_fcgi_child_start(const enr_fcgi_child *c, sigset_t *wait_mask)
{
    sigset_t handled;

    enr_log_role(c->role);
    enr_proctitle_set("%s", c->title);
    if (prctl(PR_SET_PDEATHSIG, ENR_CHILD_PDEATHSIG) != 0) {
        enr_log(ENR_LOG_ERROR, "parent-death signal failed", "error=%s", enr_log_errno(errno));
        return -1;
    }
    /* A master that died before prctl() left us another parent, and no
     * signal will ever come. */
    if (getppid() != c->master_pid) {
        enr_log(ENR_LOG_ERROR, c->gone, "master_pid=%ld", (long)c->master_pid);
        return -1;
    }
    if (FCGX_Init() != 0) {
        enr_log(ENR_LOG_ERROR, "FCGX_Init failed", NULL);
        return -1;
    }
    if (enr_signals_install(c->rules, c->nrules, &handled) != 0 ||
        sigprocmask(SIG_SETMASK, &handled, NULL) != 0) {
        enr_log(ENR_LOG_ERROR, "signal setup failed", "error=%s", enr_log_errno(errno));
        return -1;
    }
    sigemptyset(wait_mask);
    return 0;
}
