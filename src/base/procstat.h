/*
 * procstat.h: cheap measurements of a process from /proc, used by the
 * master's sampler (every worker, about once a second) and by a worker on
 * itself after its requests.
 *
 * Each call costs one small read (statm) or one directory scan (fd); no
 * call allocates on the heap.  On this process (pid 0) both reread a
 * descriptor kept open from the first call (one pread for statm, an
 * lseek and the scan for fd), and a forked child opens its own.  All return -1 when the process is
 * gone or /proc is unreadable, so callers can tell "unknown" from zero.
 */
#ifndef ENR_PROCSTAT_H
#define ENR_PROCSTAT_H

#include <sys/types.h>

/* Resident set size in KiB (pid 0: this process), from /proc/PID/statm.
 * pid 0 keeps /proc/self/statm open from the first call on: one of the
 * process's descriptors, counted like any other. */
long enr_proc_rss_kb(pid_t pid);

/* Open descriptors, counted in /proc/PID/fd.  pid 0: this process,
 * through a directory it keeps open (and does not count) from the first
 * call on: another process counting this one sees one descriptor more. */
long enr_proc_fd_count(pid_t pid);

#endif
