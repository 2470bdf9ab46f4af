/*
 * signals.h: what a process of the pool does with every signal.
 *
 * Each process (master, worker, status process) states its actions as a
 * table of rules; every catchable signal the table does not name gets the
 * one default of its kind, so no signal a user or a tool may send is left
 * to its kernel default of ending the process:
 *  - CHLD, CONT, WINCH, URG keep the kernel's default (ignored; CONT also
 *    resumes a stopped process); ABRT keeps it too: it is abort()'s and
 *    the systemd watchdog's (WatchdogSignal=), and it must end the process
 *    with a core dump;
 *  - SEGV, BUS, FPE, ILL, TRAP, SYS made by the kernel (a real fault) end
 *    the process as before; the same signals sent by a process are noted;
 *  - every other one (USR1, USR2, XFSZ, ALRM, PROF, VTALRM, IO, PWR,
 *    STKFLT, TSTP, TTIN, TTOU, the real-time signals...) is noted: counted
 *    and said in one log line (at most one a second per signal, with the
 *    sender's pid and how many came), and otherwise ignored.
 * The handler only sets a flag or counts, except for a real fault, where
 * it puts the default back and raises the signal again.  Rules and
 * defaults are documented for operators in enrichd(8).
 */
#ifndef ENR_SIGNALS_H
#define ENR_SIGNALS_H

#include <signal.h>
#include <stddef.h>

enum enr_sig_do {
    ENR_SIG_NOTE,   /* counted and logged, else ignored (why says whose it is) */
    ENR_SIG_FLAG,   /* sets *flag: the process acts on it in its loop */
    ENR_SIG_IGNORE, /* SIG_IGN, silently (SIGPIPE: errors are EPIPE returns) */
    ENR_SIG_KEEP    /* left as it is (another module installs its own) */
};

typedef struct enr_sig_rule {
    int sig;
    int what; /* enum enr_sig_do */
    volatile sig_atomic_t *flag;
    const char *why; /* ENR_SIG_NOTE: said in the log line, or NULL */
} enr_sig_rule;

/* Installs the rules and, for every catchable signal they do not name,
 * the default of its kind (above).  *handled receives the signals that
 * now have this module's handler: a process blocks them outside its
 * waits, so a handler never interrupts its work.  Returns 0, or -1 with
 * errno set. */
int enr_signals_install(const enr_sig_rule *rules, size_t n, sigset_t *handled);

/* Logs the signals noted since the last call: one line per signal, at
 * most one a second each (the next line counts those held back).  Called
 * by each process after a wait that a signal may have ended. */
void enr_signals_report(void);

/* The short name of sig ("USR1", "RTMIN+3") in buf. */
const char *enr_signal_name(int sig, char *buf, size_t len);

#endif
