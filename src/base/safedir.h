/*
 * safedir.h: a directory enrichd writes into (capture_dir, the unix
 * sockets' directories), opened and checked once, then used through its
 * descriptor (openat, renameat), so that what another user plants on the
 * way (a symlink, a renamed directory) is never followed.
 *
 * A directory is safe when it is a directory, owned by the daemon's user
 * or root, and no one else may create or rename entries in it: not
 * writable by others, nor by a group other than the daemon's, unless it
 * has the sticky bit (as /tmp), where only an entry's owner may remove or
 * rename it.
 */
#ifndef ENR_SAFEDIR_H
#define ENR_SAFEDIR_H

#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Checks the open directory dfd (named path in the message); 0, or -1
 * with the reason in why. */
int enr_safedir_check(int dfd, const char *path, char *why, size_t whylen);

/* Opens path as a directory (O_DIRECTORY, close-on-exec) and checks it;
 * returns the descriptor, or -1 with errno set and the reason in why
 * (errno EPERM for a directory that is there but not safe). */
int enr_safedir_open(const char *path, char *why, size_t whylen);

/* The file name under dfd was created by us, or is ours: a regular file
 * owned by the daemon's user with one link (never a link planted to
 * another file).  0, or -1 with the reason in why. */
int enr_safedir_file_ok(const struct stat *st, char *why, size_t whylen);

/* The group named name, when the daemon may give its files that group
 * (root, or the daemon's own or supplementary group: chown(2) allows no
 * other).  0 with *gid, or -1 with the reason in why. */
int enr_safedir_group(const char *name, gid_t *gid, char *why, size_t whylen);

#endif
