/*
 * statefile.h: a file of enrichd's state directory that it maps and
 * keeps (the upstream cache's cache_file, the day's budget_file, a
 * shared store's local fallback): found, trusted, locked for as long as
 * it is in use, and replaced whole (docs/operations.md, "State files").
 *
 * One rule decides whether a file found at the path may be used at all
 * (enr_statefile_trusted): a regular file (never a symbolic link:
 * O_NOFOLLOW), owned by the daemon's user, with exactly one link, that
 * neither its group nor others may write.  A file that breaks it is
 * refused and never touched: not read, not rewritten, not renamed over.
 * Its contents (magic, version, layout, checksums) are the caller's to
 * check; a file of ours whose contents are refused is replaced by a new
 * one, made whole under no name (O_TMPFILE, or a temporary name), synced,
 * then given the path.
 *
 * The lock (flock, exclusive) is taken when the file is opened or made
 * and held as long as its descriptor is open: the children a master
 * forks inherit it, so it is free only once the last process that maps
 * the file is gone.  A file whose lock another process holds is not
 * taken, nor replaced, after ENR_STATEFILE_WAIT_MS (a dead master's
 * children on their way out): that is a second daemon on the same file,
 * and the caller refuses it, naming the holder's pid when the kernel
 * says it (/proc/locks).  The process that holds a file itself (a reload
 * that makes a new cache for a new configuration) may replace it.
 */
#ifndef ENR_STATEFILE_H
#define ENR_STATEFILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

/* A file still locked by a dead master's children: they die with it. */
#define ENR_STATEFILE_WAIT_MS 2000
#define ENR_STATEFILE_WHY_MAX 200   /* a refusal's reason, with a pid */
#define ENR_STATEFILE_PATH_MAX 4096 /* PATH_MAX */

/* What enr_statefile_open found at the path. */
enum enr_statefile_found {
    ENR_SF_OPENED = 0, /* trusted and locked: *fd is the caller's */
    ENR_SF_ABSENT,     /* no file: make one (enr_statefile_create) */
    ENR_SF_OURS,       /* held by this very process: it may replace it; *fd open, not locked */
    ENR_SF_REFUSED,    /* breaks the rule: never touched (errno EPERM) */
    ENR_SF_BUSY,       /* another process holds its lock (errno EBUSY) */
    ENR_SF_ERROR       /* cannot be opened or locked (errno set) */
};

/* The one rule for every state file (see the top): 0, or -1 and why. */
int enr_statefile_trusted(const struct stat *st, char *why, size_t whylen);

/* The default path of a state file named name: the first directory of
 * systemd's $STATE_DIRECTORY (StateDirectory=) joined with name.  0, or
 * -1 when there is none (or it is not absolute, or too long). */
int enr_statefile_default(const char *name, char *out, size_t outlen);

/* Opens the file at path for reading and writing, checks it against the
 * rule and takes its lock (waiting ENR_STATEFILE_WAIT_MS for a dead
 * master's children).  One of enr_statefile_found; *fd is set for
 * ENR_SF_OPENED and ENR_SF_OURS, why says the reason of every other
 * outcome but ENR_SF_ABSENT. */
int enr_statefile_open(const char *path, int *fd, char *why, size_t whylen);

/* A file being made: not at the path yet. */
typedef struct enr_statefile_new {
    int fd;                                /* locked, mode 0600, its size allocated */
    int nameless;                          /* O_TMPFILE: nothing to clean up after a crash */
    char tmp[ENR_STATEFILE_PATH_MAX + 32]; /* its temporary name next to the path */
} enr_statefile_new;

/* A new file for path of size bytes, every block allocated (a page
 * written later can never meet a full disk: SIGBUS in a worker), zeroed,
 * locked.  0, or -1 with errno and *why the failing step. */
int enr_statefile_create(const char *path, uint64_t size, enr_statefile_new *nf, const char **why);

/* The made file, synced, takes the path: over the file there when
 * replace (the caller holds it, or it was refused as ours), else only
 * if none is there (a second daemon that made one meanwhile keeps its
 * own: errno EEXIST).  The directory is synced.  0 and the descriptor
 * stays the caller's, or -1 (the new file discarded, errno, *why). */
int enr_statefile_publish(enr_statefile_new *nf, const char *path, int replace, const char **why);

/* A made file not published: closed, its temporary name removed. */
void enr_statefile_discard(enr_statefile_new *nf);

/* Closes a state file's descriptor (the lock goes with the last process
 * holding it).  -1 is a no-op. */
void enr_statefile_close(int fd);

#endif
