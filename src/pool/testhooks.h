/*
 * testhooks.h: the worker's fault injection for the tests (leaks,
 * crashes, slow and stuck requests, a planted wrong byte), and what the
 * daemon says of itself in such a build (its -V line, the master's
 * warning at start, a compressed budget day), compiled only with -DENR_TEST_HOOKS (make hooks:
 * build-hooks/, never installed).
 *
 * Invariant: in a production build every hook is an empty static inline
 * function, so the worker's code calls them without an #ifdef and the
 * compiler leaves nothing of them behind.  What each one does, and which
 * variable or header drives it, is said in testhooks.c.
 */
#ifndef ENR_TESTHOOKS_H
#define ENR_TESTHOOKS_H

#include "base/buf.h"

#ifdef ENR_TEST_HOOKS
void enr_hook_start_delay(void);
void enr_hook_init(void);
void enr_hook_hang(char **envp);
void enr_hook_slow(char **envp);
void enr_hook_plant(enr_buf *out);
void enr_hook_leak(void);
void enr_hook_announce(void);
const char *enr_hook_version_note(void);
void enr_hook_budget_day(void);
#else
static inline void enr_hook_start_delay(void)
{
}
static inline void enr_hook_init(void)
{
}
static inline void enr_hook_hang(char **envp)
{
    (void)envp;
}
static inline void enr_hook_slow(char **envp)
{
    (void)envp;
}
static inline void enr_hook_plant(enr_buf *out)
{
    (void)out;
}
static inline void enr_hook_leak(void)
{
}
static inline void enr_hook_announce(void)
{
}
static inline const char *enr_hook_version_note(void)
{
    return "";
}
static inline void enr_hook_budget_day(void)
{
}
#endif

#endif
