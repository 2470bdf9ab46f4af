/*
 * test_statefile.c: the one rule for the files of the state directory
 * (base/statefile.h), as the cache file and the budget file meet it.
 *
 * The rule alone, on stat results: a regular file, ours, one link, no
 * group or other write.  Then each file, made by enrichd and then made
 * mode 0666, given a second link, given to another user (as root: the
 * suites run as root in CI) or replaced by a symbolic link: refused, the
 * log naming the file and why, the file never touched.  Then two
 * daemons on one file: the second is refused, the log naming the file
 * and the first's pid, and what the first writes afterwards is in the
 * file at the path (opened again and read); the same for two daemons
 * sharing a state directory with budget_file unset.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/config.h"
#include "base/statefile.h"
#include "upstream/api.h"
#include "upstream/budget.h"
#include "upstream/cache.h"
#include "t.h"
#include "t_config.h"

#define ENTRIES 1000
#define BYTES (256u << 10)
#define OTHER_UID 54321
#define LOG_MAX 8192

static char dir[64], cpath[128], bpath[128], logpath[128];
static const uint8_t ident[ENR_CACHE_ID_BYTES] = {5, 5};
static int saved_err = -1;

/* stderr (the log) into logpath until log_end(). */
static void log_begin(void)
{
    int fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

    fflush(stderr);
    saved_err = dup(2);
    dup2(fd, 2);
    close(fd);
}

static const char *log_end(void)
{
    static char text[LOG_MAX];
    int fd;
    ssize_t n;

    fflush(stderr);
    dup2(saved_err, 2);
    close(saved_err);
    fd = open(logpath, O_RDONLY | O_CLOEXEC);
    n = fd >= 0 ? read(fd, text, sizeof text - 1) : 0;
    text[n > 0 ? n : 0] = '\0';
    if (fd >= 0)
        close(fd);
    return text;
}

static int has(const char *text, const char *a, const char *b)
{
    return strstr(text, a) != NULL && (b == NULL || strstr(text, b) != NULL);
}

static void test_rule(void)
{
    struct stat ok = {0}, st;
    char why[200];

    ok.st_mode = S_IFREG | 0600;
    ok.st_uid = geteuid();
    ok.st_nlink = 1;
    T_CHECK(enr_statefile_trusted(&ok, why, sizeof why) == 0, "ours, 0600, one link: trusted");
    st = ok;
    st.st_mode = S_IFREG | 0666;
    T_CHECK(enr_statefile_trusted(&st, why, sizeof why) != 0 && strstr(why, "mode 0666"),
            "0666: refused (%s)", why);
    st.st_mode = S_IFREG | 0620;
    T_CHECK(enr_statefile_trusted(&st, why, sizeof why) != 0 && strstr(why, "its group"),
            "group-writable: refused (%s)", why);
    st = ok;
    st.st_nlink = 2;
    T_CHECK(enr_statefile_trusted(&st, why, sizeof why) != 0 && strstr(why, "2 links"),
            "two links: refused (%s)", why);
    st = ok;
    st.st_uid = geteuid() + 1;
    T_CHECK(enr_statefile_trusted(&st, why, sizeof why) != 0 && strstr(why, "owned by uid"),
            "another owner: refused (%s)", why);
    st = ok;
    st.st_mode = S_IFLNK | 0777;
    T_CHECK(enr_statefile_trusted(&st, why, sizeof why) != 0, "not a regular file: refused");
}

/* ---- the cache file ---- */

static int put_one(enr_cache *c, const char *id)
{
    enr_cache_val v = {0};

    v.poster = "https://i.example/p.jpg";
    v.poster_len = strlen(v.poster);
    v.duration = 60;
    v.has_duration = 1;
    return enr_cache_put(c, 1, id, strlen(id), &v, UINT64_MAX / 2);
}

static int has_one(enr_cache *c, const char *id)
{
    enr_cache_val v;

    return enr_cache_get(c, 1, id, strlen(id), 1000, &v);
}

/* A good cache file at cpath holding "kept". */
static void cache_made(void)
{
    const char *why;
    enr_cache *c;

    unlink(cpath);
    c = enr_cache_open(cpath, ENTRIES, BYTES, ident, &why);
    T_CHECK(c != NULL && put_one(c, "kept") == 0, "a cache file made");
    enr_cache_free(c);
}

/* The cache file, damaged by how, is refused with want in the log and
 * never touched. */
static void cache_refused(const char *what, void (*how)(void), const char *want)
{
    struct stat before, after;
    const char *why = NULL, *log;
    enr_cache *c;
    int e;

    cache_made();
    how();
    T_CHECK(lstat(cpath, &before) == 0, "%s: stat", what);
    log_begin();
    c = enr_cache_open(cpath, ENTRIES, BYTES, ident, &why);
    e = errno;
    log = log_end();
    T_CHECK(c == NULL && e == EPERM && why != NULL && strstr(why, want) != NULL,
            "cache, %s: refused (%s)", what, why ? why : "opened");
    T_CHECK(has(log, "upstream cache file refused", cpath) && strstr(log, want),
            "cache, %s: the log names the file and why: %s", what, log);
    T_CHECK(lstat(cpath, &after) == 0 && after.st_ino == before.st_ino &&
                after.st_mode == before.st_mode && after.st_mtime == before.st_mtime,
            "cache, %s: never touched", what);
    enr_cache_free(c);
}

static void mode_0666(void)
{
    chmod(cpath, 0666);
}

static void two_links(void)
{
    char l[160];

    snprintf(l, sizeof l, "%s.link", cpath);
    unlink(l);
    T_CHECK(link(cpath, l) == 0, "a second link");
}

static void other_owner(void)
{
    T_CHECK(chown(cpath, OTHER_UID, OTHER_UID) == 0, "given to uid %d", OTHER_UID);
}

static void symlinked(void)
{
    char real[160];

    snprintf(real, sizeof real, "%s.real", cpath);
    T_CHECK(rename(cpath, real) == 0 && symlink(real, cpath) == 0, "a symlink in its place");
}

static void test_cache_rule(void)
{
    cache_refused("mode 0666", mode_0666, "mode 0666");
    cache_refused("two links", two_links, "2 links");
    if (geteuid() == 0)
        cache_refused("another owner", other_owner, "owned by uid 54321");
    cache_refused("a symbolic link", symlinked, "a symbolic link");
    unlink(cpath);
}

/* Two daemons on one cache file: the second refused, naming the first's
 * pid; the first's later answers are in the file at the path. */
static void test_cache_two_daemons(void)
{
    struct stat before, after;
    const char *why;
    enr_cache *c;
    int st = 0;
    pid_t pid;

    cache_made();
    c = enr_cache_open(cpath, ENTRIES, BYTES, ident, &why);
    T_CHECK(c != NULL && why == NULL && has_one(c, "kept"), "the first daemon opens it");
    T_CHECK(stat(cpath, &before) == 0, "stat");
    pid = fork();
    if (pid == 0) {
        char want[64];
        const char *log;
        enr_cache *d;
        int e;
        log_begin();
        d = enr_cache_open(cpath, ENTRIES, BYTES, ident, &why);
        e = errno;
        log = log_end();
        snprintf(want, sizeof want, "pid %ld", (long)getppid());
        _exit(d != NULL                                    ? 1
              : e != EBUSY                                 ? 2
              : !has(why, want, NULL)                      ? 3
              : !has(log, "another daemon uses it", cpath) ? 4
              : !has(log, want, NULL)                      ? 5
                                                           : 0);
    }
    T_CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
            "the second is refused, the log naming the file and the first's pid (%d)",
            WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    T_CHECK(put_one(c, "later") == 0, "the first goes on writing");
    T_CHECK(stat(cpath, &after) == 0 && after.st_ino == before.st_ino,
            "the path still names the first's file");
    enr_cache_free(c);
    c = enr_cache_open(cpath, ENTRIES, BYTES, ident, &why);
    T_CHECK(c != NULL && why == NULL && has_one(c, "kept") && has_one(c, "later"),
            "opened again: the first's later answer is in the file at the path");
    enr_cache_free(c);
    unlink(cpath);
}

/* ---- the budget file ---- */

static const char *read_log(void)
{
    static char text[LOG_MAX];
    int fd = open(logpath, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, text, sizeof text - 1) : 0;

    text[n > 0 ? n : 0] = '\0';
    if (fd >= 0)
        close(fd);
    return text;
}

/* In a child: the budget of bpath opened (its log in logpath), n units
 * taken; with a pipe, n more once the parent says go.  Exits with the
 * units spent, or 250 when the budget cannot be opened. */
static int budget_child(unsigned n, int ready_fd, int go_fd)
{
    enr_budget_state st;
    enr_config c;
    char b;

    t_default_config(&c);
    if (getenv("STATE_DIRECTORY") == NULL) /* else the default: the state directory's */
        snprintf(c.budget_file, sizeof c.budget_file, "%s", bpath);
    c.api[ENR_API_YOUTUBE].daily_quota = 10000;
    c.budget_burst_s = 86400;
    log_begin();
    if (enr_budget_open(&c) != 0) {
        log_end();
        return 250;
    }
    log_end();
    for (unsigned i = 0; i < n; i++)
        enr_budget_take(ENR_API_YOUTUBE, 1, 0, enr_budget_clocks());
    if (ready_fd >= 0) {
        (void)!write(ready_fd, "r", 1);
        (void)!read(go_fd, &b, 1);
        for (unsigned i = 0; i < n; i++)
            enr_budget_take(ENR_API_YOUTUBE, 1, 0, enr_budget_clocks());
    }
    enr_budget_view(ENR_API_YOUTUBE, enr_budget_clocks(), &st);
    return (int)st.v[ENR_BUDGET_ROW_spent];
}

static int budget_run(unsigned n)
{
    int st = 0;
    pid_t pid = fork();

    if (pid == 0)
        _exit(budget_child(n, -1, -1));
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
        return -1;
    return WEXITSTATUS(st);
}

static void budget_refused(const char *what, void (*how)(const char *), const char *want)
{
    struct stat before, after;
    const char *log;

    unlink(bpath);
    T_CHECK(budget_run(3) == 3, "budget, %s: a file made", what);
    how(bpath);
    T_CHECK(lstat(bpath, &before) == 0, "stat");
    T_CHECK(budget_run(0) == 250, "budget, %s: refused, the start too", what);
    log = read_log();
    T_CHECK(has(log, "cannot open budget_file", bpath) && strstr(log, want),
            "budget, %s: the log names the file and why: %s", what, log);
    T_CHECK(lstat(bpath, &after) == 0 && after.st_ino == before.st_ino &&
                after.st_mode == before.st_mode && after.st_mtime == before.st_mtime,
            "budget, %s: never touched", what);
}

static void b_0666(const char *p)
{
    chmod(p, 0666);
}

static void b_link(const char *p)
{
    char l[160];

    snprintf(l, sizeof l, "%s.link", p);
    unlink(l);
    T_CHECK(link(p, l) == 0, "a second link");
}

static void b_owner(const char *p)
{
    T_CHECK(chown(p, OTHER_UID, OTHER_UID) == 0, "given to uid %d", OTHER_UID);
}

static void test_budget_rule(void)
{
    budget_refused("mode 0666", b_0666, "mode 0666");
    budget_refused("two links", b_link, "2 links");
    if (geteuid() == 0)
        budget_refused("another owner", b_owner, "owned by uid 54321");
    unlink(bpath);
}

/* Two daemons on one budget file: the second refused (it would count
 * into a copy of its own, or the two into one page under two
 * configurations), naming the first's pid; the first's later units are
 * in the file. */
static void test_budget_two_daemons(void)
{
    int ready[2], go[2], st = 0, second;
    char b = 0, want[64];
    pid_t first;

    unlink(bpath);
    T_CHECK(pipe(ready) == 0 && pipe(go) == 0, "pipes");
    first = fork();
    if (first == 0)
        _exit(budget_child(5, ready[1], go[0]));
    T_CHECK(read(ready[0], &b, 1) == 1, "the first daemon spent 5 units");
    second = budget_run(0);
    snprintf(want, sizeof want, "pid %ld", (long)first);
    T_CHECK(second == 250 && has(read_log(), "cannot open budget_file", bpath) &&
                has(read_log(), want, NULL),
            "the second is refused (%d), the log naming the file and the first's %s: %s", second,
            want, read_log());
    T_CHECK(write(go[1], "g", 1) == 1 && waitpid(first, &st, 0) == first && WIFEXITED(st) &&
                WEXITSTATUS(st) == 10,
            "the first spent 5 more: 10 (%d)", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    T_CHECK(budget_run(0) == 10, "the file at the path holds the first's 10 units");
    close(ready[0]);
    close(ready[1]);
    close(go[0]);
    close(go[1]);
    unlink(bpath);
}

/* budget_file unset: the state directory's "budget" (the first of
 * $STATE_DIRECTORY's), and a second daemon sharing that directory is
 * refused as well (memory only would count the day twice). */
static void test_budget_default_path(void)
{
    int ready[2], go[2], st = 0, second;
    char b = 0, env[200], want[64];
    pid_t first;

    unlink(bpath);
    snprintf(env, sizeof env, "%s:/nonexistent", dir);
    T_CHECK(enr_statefile_default("budget", want, sizeof want) == -1, "no state directory: none");
    setenv("STATE_DIRECTORY", env, 1);
    T_CHECK(enr_statefile_default("budget", want, sizeof want) == 0 && strcmp(want, bpath) == 0,
            "the first state directory's: %s", want);
    T_CHECK(pipe(ready) == 0 && pipe(go) == 0, "pipes");
    first = fork();
    if (first == 0)
        _exit(budget_child(2, ready[1], go[0]));
    T_CHECK(read(ready[0], &b, 1) == 1 && access(bpath, F_OK) == 0,
            "the first daemon keeps its budget in the state directory");
    second = budget_run(0);
    snprintf(want, sizeof want, "pid %ld", (long)first);
    T_CHECK(second == 250 && has(read_log(), "cannot open budget_file", want),
            "a second daemon on the same state directory refused (%d): %s", second, read_log());
    T_CHECK(write(go[1], "g", 1) == 1 && waitpid(first, &st, 0) == first && WIFEXITED(st) &&
                WEXITSTATUS(st) == 4,
            "the first spent its 4 (%d)", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    unsetenv("STATE_DIRECTORY");
    close(ready[0]);
    close(ready[1]);
    close(go[0]);
    close(go[1]);
    unlink(bpath);
}

int main(void)
{
    char cmd[96];

    setvbuf(stdout, NULL, _IOLBF, 0);
    snprintf(dir, sizeof dir, "/tmp/enr-statefile-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return 1;
    snprintf(cpath, sizeof cpath, "%s/cache", dir);
    snprintf(bpath, sizeof bpath, "%s/budget", dir);
    snprintf(logpath, sizeof logpath, "%s/log", dir);
    test_rule();
    test_cache_rule();
    test_cache_two_daemons();
    test_budget_rule();
    test_budget_two_daemons();
    test_budget_default_path();
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    T_CHECK(system(cmd) == 0, "cleaned up");
    T_DONE();
}
