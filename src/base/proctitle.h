/*
 * proctitle.h: the line `ps` shows for each process of the pool
 * ("enrichd: master", "enrichd: worker 3 gen 2 busy", "enrichd: status"),
 * as nginx and PostgreSQL set theirs.
 */
#ifndef ENR_PROCTITLE_H
#define ENR_PROCTITLE_H

/* Takes over the memory of argv and environ (environ is copied to the
 * heap first), once, from main() before any thread; argv[] itself is
 * left as it was for getopt.  A failure leaves titles off, never the
 * program. */
void enr_proctitle_init(int argc, char **argv);

/* Sets the title to "enrichd: " followed by fmt; a no-op before init or
 * when the area is too small, truncated to the area otherwise. */
void enr_proctitle_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
