/*
 * safedir.c: directories others cannot plant entries in (safedir.h).
 *
 * Invariants: a check reads only fstat() of a descriptor already open, so
 * what was checked is what is used; nothing here follows a path twice.
 */
#include "base/safedir.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Supplementary groups looked at (NGROUPS_MAX is 65536: no stack for that). */
#define ENR_SAFEDIR_MAX_GROUPS 256

int enr_safedir_check(int dfd, const char *path, char *why, size_t whylen)
{
    struct stat st;
    uid_t me = geteuid();

    if (fstat(dfd, &st) != 0) {
        snprintf(why, whylen, "\"%s\": %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(why, whylen, "\"%s\" is not a directory", path);
        return -1;
    }
    if (st.st_uid != me && st.st_uid != 0) {
        snprintf(why, whylen,
                 "\"%s\" is owned by uid %ld, neither enrichd's (%ld) nor root: its owner could "
                 "replace what enrichd writes there",
                 path, (long)st.st_uid, (long)me);
        return -1;
    }
    if (!(st.st_mode & S_ISVTX) &&
        ((st.st_mode & S_IWOTH) || ((st.st_mode & S_IWGRP) && st.st_gid != getegid()))) {
        snprintf(why, whylen,
                 "\"%s\" (mode %04o) is writable by %s without the sticky bit: anyone there "
                 "could plant links or files in enrichd's place (chmod o-w,g-w, or +t)",
                 path, (unsigned)(st.st_mode & 07777),
                 (st.st_mode & S_IWOTH) ? "every user" : "another group");
        return -1;
    }
    return 0;
}

int enr_safedir_open(const char *path, char *why, size_t whylen)
{
    int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    if (dfd < 0) {
        snprintf(why, whylen, "\"%s\": %s", path, strerror(errno));
        return -1;
    }
    if (enr_safedir_check(dfd, path, why, whylen) != 0) {
        close(dfd);
        errno = EPERM;
        return -1;
    }
    return dfd;
}

int enr_safedir_file_ok(const struct stat *st, char *why, size_t whylen)
{
    if (!S_ISREG(st->st_mode)) {
        snprintf(why, whylen, "not a regular file");
        return -1;
    }
    if (st->st_uid != geteuid()) {
        snprintf(why, whylen, "owned by uid %ld, not enrichd's (%ld)", (long)st->st_uid,
                 (long)geteuid());
        return -1;
    }
    if (st->st_nlink != 1) {
        snprintf(why, whylen, "has %ld links: another name for another file", (long)st->st_nlink);
        return -1;
    }
    return 0;
}

int enr_safedir_group(const char *name, gid_t *gid, char *why, size_t whylen)
{
    struct group *g = getgrnam(name);
    gid_t groups[ENR_SAFEDIR_MAX_GROUPS];
    int n;

    if (g == NULL) {
        snprintf(why, whylen, "no such group \"%s\"", name);
        return -1;
    }
    *gid = g->gr_gid;
    if (geteuid() == 0 || g->gr_gid == getegid())
        return 0;
    n = getgroups(ENR_SAFEDIR_MAX_GROUPS, groups);
    for (int i = 0; i < n; i++)
        if (groups[i] == g->gr_gid)
            return 0;
    snprintf(why, whylen,
             "enrichd (uid %ld) is not in group \"%s\": it cannot give its files that group",
             (long)geteuid(), name);
    return -1;
}
