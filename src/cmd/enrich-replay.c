/*
 * enrich-replay: replays a JSON-lines trace (scripts/gen-trace) against one
 * or more HTTP targets and reports full latency distributions side by side.
 *
 * Modes:
 *   open loop (default): request i is due at t0 + ts_i / speed whatever the
 *     servers do (a slow server never slows the arrivals); a request that
 *     finds --concurrency requests in flight on its target waits in a FIFO
 *     and its latency still counts from when it was due (no coordinated
 *     omission).  With several targets each trace entry is sent to every
 *     target at the same moment, in an order rotated per entry.
 *   closed loop (--closed): each target keeps exactly --concurrency
 *     requests in flight, cycling through the trace, for --duration s.
 *   check (--check FILE, for the next target): every 200's body, "fetched_at"
 *     values made 0, is hashed (SHA-1, its first 8 bytes) and compared with the FILE's line
 *     for its trace entry (16 hex digits, or "-" for any); one that differs
 *     is a bad body, and only 200s with a whole body that passed count as
 *     good (the summary's good rate and percentiles).
 *   compare (--compare, open loop, two targets): also keeps both bodies and
 *     counts responses that differ other than in "fetched_at" values.  Only
 *     two answers are compared: an entry a target gave no answer to (a
 *     connect error, a timeout, an answer past --max-answer-bytes) is
 *     counted as failed, never as identical, and fails the run as a
 *     mismatch does.
 *
 * Invariants: one thread, one epoll set; every request ends as exactly one
 * record; no answer is read past --max-answer-bytes (kept or not), so
 * memory is bounded by concurrency x targets x that cap; the trace is read-only; SIGINT/SIGTERM
 * only set a flag (the loop stops issuing, lets in-flight requests finish, and reports).
 */
#include "base/cli.h"
#include "replay/replay_http.h"
#include "replay/replay_stats.h"
#include "replay/replay_trace.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define MAX_TARGETS 8
#define DEFAULT_CONCURRENCY 64
#define DEFAULT_TIMEOUT_MS 30000
#define DEFAULT_CLOSED_S 10.0
#define PROGRESS_NS 500000000LL
#define HOUSEKEEPING_NS 50000000LL
#define START_DELAY_NS 20000000LL /* lets the first due times be met */
#define MAX_EVENTS 256
/* Timer wake-ups in this VM come up to ~100 us late: sleep until this
 * long before the next due time, then poll without sleeping. */
#define SPIN_NS 300000LL
#define SHOW_MISMATCHES 3
/* 8 x enrichd's max_output_bytes default: any answer of a sane server. */
#define DEFAULT_MAX_ANSWER_BYTES (64u << 20)

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
}

typedef struct tstate {
    enr_replay_target tgt;
    uint64_t *expect; /* --check: per trace entry, 0 for any */
    enr_replay_conn *conns;
    enr_replay_conn **idle; /* stack of free conns (open ones on top) */
    size_t nidle;
    uint32_t *queue; /* open loop: jobs waiting for a slot */
    int64_t *qdue;
    size_t qhead, qtail, qcap;
    size_t inflight, issued, done;
    int64_t t_end; /* last completion */
} tstate;

typedef struct cmp_slot {
    char *body[2];
    size_t len[2];
    int status[2];
    int err[2]; /* enum of replay_stats.h: no answer from that target */
    int have;
} cmp_slot;

static struct {
    enr_replay_trace tr;
    tstate ts[MAX_TARGETS];
    size_t nt;
    unsigned conc;
    double speed;
    int closed;
    double duration;
    size_t limit;
    int64_t timeout_ns;
    int progress;
    int compare;
    size_t max_answer;
    enr_replay_rec *rec;
    size_t nrec, caprec;
    cmp_slot *cmp;
    size_t cmp_same, cmp_diff, cmp_both_rejected, cmp_failed, cmp_shown;
    int epfd;
    int64_t t0;
} R;

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: enrich-replay [options] TRACE URL [URL...]\n"
        "  -c, --concurrency N   requests in flight per target (default 64)\n"
        "  -s, --speed X         open loop: play the trace X times faster (0: no gaps)\n"
        "  -n, --requests N      use only the first N trace entries (closed loop: N per target)\n"
        "      --closed          closed loop: keep N in flight per target\n"
        "  -d, --duration S      closed loop: run S seconds (default 10)\n"
        "      --name NAME       name the next target (repeat, in URL order)\n"
        "      --timeout MS      per-request timeout (default 30000)\n"
        "      --compare         two targets: compare bodies, ignoring fetched_at\n"
        "      --check FILE      the next target's 200s must have these bodies (a line per\n"
        "                        trace entry: SHA-1's first 8 bytes in hex, fetched_at 0)\n"
        "      --max-answer-bytes N  an answer's body past N bytes fails it (default 64 MiB)\n"
        "      --tsv FILE        raw per-request records\n"
        "      --json FILE       summary as JSON\n"
        "      --histogram[=P]   print log histograms; write P.*.hgrm, P.cdf.dat, P.gp\n"
        "                        (and P.svg when gnuplot is installed); P defaults to replay\n"
        "      --progress / --no-progress   (default: on when stderr is a terminal)\n");
}

static int push_rec(const enr_replay_rec *r)
{
    if (R.nrec == R.caprec) {
        size_t cap = R.caprec ? 2 * R.caprec : 65536;
        enr_replay_rec *n = realloc(R.rec, cap * sizeof *n);
        if (!n)
            return -1;
        R.rec = n;
        R.caprec = cap;
    }
    R.rec[R.nrec++] = *r;
    return 0;
}

/* --check's digest: the first 8 bytes of the SHA-1 of the body with its
 * "fetched_at" values made 0 (as normalize() leaves it), in hex. */
static uint64_t body_digest(const char *in, size_t n)
{
    static const char key[] = "\"fetched_at\":";
    const size_t kl = sizeof key - 1;
    unsigned char md[EVP_MAX_MD_SIZE];
    uint64_t h = 0;
    size_t run = 0;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();

    if (ctx == NULL || EVP_DigestInit_ex(ctx, EVP_sha1(), NULL) != 1) {
        fprintf(stderr, "enrich-replay: SHA-1 unavailable\n");
        exit(1);
    }
    for (size_t i = 0; i < n;) {
        if (in[i] == '"' && n - i >= kl && memcmp(in + i, key, kl) == 0) {
            EVP_DigestUpdate(ctx, in + run, i + kl - run);
            i += kl;
            while (i < n && (in[i] == '-' || in[i] == '.' || (in[i] >= '0' && in[i] <= '9') ||
                             in[i] == 'e' || in[i] == 'E' || in[i] == '+'))
                i++;
            EVP_DigestUpdate(ctx, "0", 1);
            run = i;
            continue;
        }
        i++;
    }
    EVP_DigestUpdate(ctx, in + run, n - run);
    EVP_DigestFinal_ex(ctx, md, NULL);
    EVP_MD_CTX_free(ctx);
    for (int k = 0; k < 8; k++)
        h = h << 8 | md[k];
    return h;
}

/* The --check file: a line per trace entry. */
static uint64_t *load_check(const char *path, size_t n)
{
    FILE *f = fopen(path, "re");
    uint64_t *v = calloc(n ? n : 1, sizeof *v);
    char line[64];
    size_t i = 0;

    if (!f || !v) {
        fprintf(stderr, "enrich-replay: --check %s: %s\n", path, strerror(errno));
        exit(1);
    }
    while (i < n && fgets(line, sizeof line, f))
        v[i++] = line[0] == '-' ? 0 : strtoull(line, NULL, 16);
    fclose(f);
    if (i < n) {
        fprintf(stderr, "enrich-replay: --check %s: %zu lines for %zu trace entries\n", path, i, n);
        exit(1);
    }
    return v;
}

/* "fetched_at":<number> is the one field allowed to differ. */
static size_t normalize(const char *in, size_t n, char *out)
{
    static const char key[] = "\"fetched_at\":";
    const size_t kl = sizeof key - 1;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        if (in[i] == '"' && n - i >= kl && memcmp(in + i, key, kl) == 0) {
            memcpy(out + o, key, kl);
            o += kl;
            i += kl;
            while (i < n && (in[i] == '-' || in[i] == '.' || (in[i] >= '0' && in[i] <= '9') ||
                             in[i] == 'e' || in[i] == 'E' || in[i] == '+'))
                i++;
            out[o++] = '0';
            continue;
        }
        out[o++] = in[i++];
    }
    return o;
}

static void show_diff(uint32_t job, cmp_slot *s, const char *a, size_t al, const char *b, size_t bl)
{
    size_t i = 0, line = 1, ls = 0;
    while (i < al && i < bl && a[i] == b[i]) {
        if (a[i] == '\n') {
            line++;
            ls = i + 1;
        }
        i++;
    }
    fprintf(stderr,
            "mismatch: trace entry %u: %s %d (%zu B) vs %s %d (%zu B), first difference at line "
            "%zu byte %zu\n",
            job, R.ts[0].tgt.name, s->status[0], s->len[0], R.ts[1].tgt.name, s->status[1],
            s->len[1], line, i - ls);
    for (int k = 0; k < 2; k++) {
        const char *p = k ? b : a;
        size_t l = k ? bl : al;
        size_t e = ls;
        while (e < l && p[e] != '\n' && e - ls < 400)
            e++;
        fprintf(stderr, "  %s: %.*s\n", R.ts[k].tgt.name, (int)(e - ls), p + ls);
    }
}

static void compare_done(uint32_t job)
{
    cmp_slot *s = &R.cmp[job];
    int ok0 = s->status[0] >= 200 && s->status[0] < 300;
    int ok1 = s->status[1] >= 200 && s->status[1] < 300;
    if (s->err[0] || s->err[1]) {
        R.cmp_failed++;
        if (R.cmp_shown++ < SHOW_MISMATCHES)
            fprintf(stderr, "failed: trace entry %u: no answer to compare: %s %s, %s %s\n", job,
                    R.ts[0].tgt.name, s->err[0] ? enr_replay_err_names[s->err[0]] : "answered",
                    R.ts[1].tgt.name, s->err[1] ? enr_replay_err_names[s->err[1]] : "answered");
    } else if (!ok0 && !ok1) {
        R.cmp_both_rejected++;
    } else if (ok0 != ok1) {
        R.cmp_diff++;
        if (R.cmp_shown++ < SHOW_MISMATCHES)
            fprintf(stderr, "mismatch: trace entry %u: status %d from %s, %d from %s\n", job,
                    s->status[0], R.ts[0].tgt.name, s->status[1], R.ts[1].tgt.name);
    } else {
        char *a = malloc(s->len[0] + 1), *b = malloc(s->len[1] + 1);
        if (!a || !b) {
            fprintf(stderr, "enrich-replay: out of memory comparing\n");
            exit(1);
        }
        size_t al = normalize(s->body[0], s->len[0], a);
        size_t bl = normalize(s->body[1], s->len[1], b);
        if (al == bl && memcmp(a, b, al) == 0) {
            R.cmp_same++;
        } else {
            R.cmp_diff++;
            if (R.cmp_shown++ < SHOW_MISMATCHES)
                show_diff(job, s, a, al, b, bl);
        }
        free(a);
        free(b);
    }
    free(s->body[0]);
    free(s->body[1]);
    s->body[0] = s->body[1] = NULL;
}

static void finish(tstate *t, enr_replay_conn *c, int status, int err)
{
    int64_t now = enr_replay_now_ns();
    enr_replay_rec r = {
        .t_sched = (double)(c->t_due - R.t0) / 1e9,
        .job = c->job,
        .target = (uint16_t)c->target,
        .status = (uint16_t)(err ? 0 : status),
        .lat_us = (uint32_t)((now - c->t_due) / 1000),
        .wait_us = c->t_sent ? (uint32_t)((c->t_sent - c->t_due) / 1000) : 0,
        .bytes_out = (uint32_t)c->body_len,
        .bytes_in = (uint32_t)c->got,
        .err = (uint8_t)err,
        .capped = (uint8_t)c->capped,
    };
    if (t->expect && !err && status == 200 && t->expect[c->job] != 0)
        r.bad_body = body_digest(c->kb, c->kb_len) != t->expect[c->job];
    if (push_rec(&r) < 0) {
        fprintf(stderr, "enrich-replay: out of memory for records\n");
        exit(1);
    }
    t->inflight--;
    t->done++;
    t->t_end = now;
    if (R.compare) {
        cmp_slot *s = &R.cmp[c->job];
        unsigned k = c->target;
        s->status[k] = r.status;
        s->err[k] = err;
        s->body[k] = c->kb;
        s->len[k] = err ? 0 : c->kb_len;
        c->kb = NULL;
        c->kb_len = c->kb_cap = 0;
        if (++s->have == 2)
            compare_done(c->job);
    }
    t->idle[t->nidle++] = c;
    /* Open connections on top of the stack: reuse before reconnecting. */
    if (c->state != ENR_RC_IDLE && t->nidle > 1) {
        enr_replay_conn *tmp = t->idle[0];
        t->idle[0] = c;
        t->idle[t->nidle - 1] = tmp;
    }
}

static void start(tstate *t, unsigned ti, uint32_t job, int64_t due, int capped)
{
    enr_replay_conn *c = t->idle[--t->nidle];
    const enr_replay_entry *e = &R.tr.e[job];
    c->job = job;
    c->t_due = due;
    c->capped = capped;
    c->body = e->body;
    c->body_len = e->len;
    c->target = ti;
    c->keep = R.compare || t->expect != NULL;
    c->max_answer = R.max_answer;
    t->inflight++;
    t->issued++;
    int err = 0;
    if (enr_replay_conn_start(c, R.epfd, &t->tgt, &err) == ENR_RC_FAILED)
        finish(t, c, 0, err);
}

static void dispatch_queue(tstate *t, unsigned ti)
{
    while (t->qhead != t->qtail && t->nidle > 0) {
        size_t k = t->qhead++ % t->qcap;
        start(t, ti, t->queue[k], t->qdue[k], 1);
    }
}

static void check_timeouts(int64_t now)
{
    for (size_t ti = 0; ti < R.nt; ti++) {
        tstate *t = &R.ts[ti];
        for (unsigned i = 0; i < R.conc; i++) {
            enr_replay_conn *c = &t->conns[i];
            if (c->state != ENR_RC_CLOSED && c->state != ENR_RC_IDLE &&
                now - c->t_due > R.timeout_ns) {
                enr_replay_conn_close(c, R.epfd);
                finish(t, c, 0, ENR_RERR_TIMEOUT);
            }
        }
    }
}

static void progress(int64_t now, int final)
{
    size_t done = 0, inflight = 0, queued = 0, errs = 0;
    for (size_t ti = 0; ti < R.nt; ti++) {
        done += R.ts[ti].done;
        inflight += R.ts[ti].inflight;
        queued += R.ts[ti].qtail - R.ts[ti].qhead;
    }
    for (size_t i = 0; i < R.nrec; i++)
        errs += R.rec[i].err != 0;
    double el = (double)(now - R.t0) / 1e9;
    if (final) {
        fprintf(stderr, "\r\033[K");
        return;
    }
    fprintf(stderr, "\r\033[K%7.1f s  done %zu  in flight %zu  queued %zu  errors %zu  %.0f req/s",
            el, done, inflight, queued, errs, el > 0 ? (double)done / el : 0);
}

static int64_t due_of(size_t job)
{
    if (R.speed <= 0)
        return R.t0;
    return R.t0 + (int64_t)(R.tr.e[job].ts / R.speed * 1e9);
}

static void run(void)
{
    struct epoll_event ev[MAX_EVENTS];
    size_t njobs = R.tr.n;
    if (!R.closed && R.limit && R.limit < njobs)
        njobs = R.limit;
    size_t next = 0;
    R.t0 = enr_replay_now_ns() + START_DELAY_NS;
    int64_t t_stop = R.t0 + (int64_t)(R.duration * 1e9);
    int64_t next_prog = R.t0 + PROGRESS_NS, next_house = R.t0 + HOUSEKEEPING_NS;
    for (;;) {
        int64_t now = enr_replay_now_ns();
        int issuing = !stop_flag;
        if (R.closed) {
            if (now >= t_stop)
                issuing = 0;
            for (size_t ti = 0; issuing && ti < R.nt; ti++) {
                tstate *t = &R.ts[ti];
                while (t->nidle > 0 && (!R.limit || t->issued < R.limit) && now >= R.t0)
                    start(t, (unsigned)ti, (uint32_t)(t->issued % R.tr.n), enr_replay_now_ns(), 0);
            }
        } else {
            while (issuing && next < njobs && due_of(next) <= now) {
                int64_t due = due_of(next);
                for (size_t k = 0; k < R.nt; k++) {
                    size_t ti = (next + k) % R.nt; /* rotate who goes first */
                    tstate *t = &R.ts[ti];
                    if (t->nidle > 0 && t->qhead == t->qtail) {
                        start(t, (unsigned)ti, (uint32_t)next, due, 0);
                    } else {
                        size_t q = t->qtail++ % t->qcap;
                        t->queue[q] = (uint32_t)next;
                        t->qdue[q] = due;
                    }
                }
                next++;
            }
        }
        size_t busy = 0;
        for (size_t ti = 0; ti < R.nt; ti++)
            busy += R.ts[ti].inflight + (R.ts[ti].qtail - R.ts[ti].qhead);
        int more = issuing && (R.closed ? (now < t_stop && (!R.limit || R.ts[0].issued < R.limit))
                                        : next < njobs);
        if (!more && busy == 0)
            break;
        if (stop_flag && !R.closed) {
            /* Drop what is still queued: it was never sent. */
            for (size_t ti = 0; ti < R.nt; ti++)
                R.ts[ti].qhead = R.ts[ti].qtail;
        }
        int64_t wake = next_house;
        if (!R.closed && issuing && next < njobs && due_of(next) < wake)
            wake = due_of(next);
        if (R.closed && issuing && t_stop < wake)
            wake = t_stop;
        if (R.progress && next_prog < wake)
            wake = next_prog;
        int64_t d = wake - now;
        if (!R.closed && issuing && next < njobs && due_of(next) == wake)
            d -= SPIN_NS;
        if (d < 0)
            d = 0;
        struct timespec to = {.tv_sec = d / 1000000000, .tv_nsec = d % 1000000000};
        int n = epoll_pwait2(R.epfd, ev, MAX_EVENTS, &to, NULL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            perror("enrich-replay: epoll_pwait2");
            exit(1);
        }
        for (int i = 0; i < n; i++) {
            enr_replay_conn *c = ev[i].data.ptr;
            tstate *t = &R.ts[c->target];
            if (c->state == ENR_RC_IDLE) {
                enr_replay_conn_close(c, R.epfd); /* the server closed it */
                continue;
            }
            int err = 0;
            int rc = enr_replay_conn_event(c, R.epfd, &t->tgt, ev[i].events, &err);
            if (rc == ENR_RC_DONE)
                finish(t, c, c->status, 0);
            else if (rc == ENR_RC_FAILED)
                finish(t, c, 0, err);
        }
        for (size_t ti = 0; ti < R.nt; ti++)
            dispatch_queue(&R.ts[ti], (unsigned)ti);
        now = enr_replay_now_ns();
        if (now >= next_house) {
            check_timeouts(now);
            next_house = now + HOUSEKEEPING_NS;
        }
        if (R.progress && now >= next_prog) {
            progress(now, 0);
            next_prog = now + PROGRESS_NS;
        }
    }
    if (R.progress)
        progress(enr_replay_now_ns(), 1);
}

/* What the command line asks for besides the run itself (R). */
typedef struct outs {
    const char *names[MAX_TARGETS], *checks[MAX_TARGETS];
    size_t nnames, nchecks;
    const char *tsv, *json, *hist;
    int want_hist;
} outs;

static const struct option long_opts[] = {
    {"concurrency", required_argument, 0, 'c'},
    {"speed", required_argument, 0, 's'},
    {"requests", required_argument, 0, 'n'},
    {"duration", required_argument, 0, 'd'},
    {"closed", no_argument, 0, 'C'},
    {"name", required_argument, 0, 'N'},
    {"timeout", required_argument, 0, 'T'},
    {"compare", no_argument, 0, 'K'},
    {"check", required_argument, 0, 'X'},
    {"max-answer-bytes", required_argument, 0, 'M'},
    {"tsv", required_argument, 0, 'V'},
    {"json", required_argument, 0, 'J'},
    {"histogram", optional_argument, 0, 'H'},
    {"progress", no_argument, 0, 'P'},
    {"no-progress", no_argument, 0, 'Q'},
    {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0},
};

/* The options into R and *o.  -1 to go on, or the exit code. */
static int parse_args(int argc, char **argv, outs *o)
{
    R.conc = DEFAULT_CONCURRENCY;
    R.speed = 1.0;
    R.duration = DEFAULT_CLOSED_S;
    R.timeout_ns = (int64_t)DEFAULT_TIMEOUT_MS * 1000000;
    R.max_answer = DEFAULT_MAX_ANSWER_BYTES;
    R.progress = isatty(STDERR_FILENO);
    int c;
    while ((c = getopt_long(argc, argv, "c:s:n:d:h", long_opts, NULL)) != -1) {
        char *ep = NULL;
        switch (c) {
        case 'c':
            R.conc = (unsigned)strtoul(optarg, &ep, 10);
            break;
        case 's':
            R.speed = strtod(optarg, &ep);
            break;
        case 'n':
            R.limit = strtoull(optarg, &ep, 10);
            break;
        case 'd':
            R.duration = strtod(optarg, &ep);
            break;
        case 'T':
            R.timeout_ns = (int64_t)(strtod(optarg, &ep) * 1e6);
            break;
        case 'C':
            R.closed = 1;
            break;
        case 'K':
            R.compare = 1;
            break;
        case 'M':
            /* Digits only: strtoull would take "-1" as the largest cap. */
            if (optarg[0] < '0' || optarg[0] > '9') {
                fprintf(stderr, "enrich-replay: bad number '%s'\n", optarg);
                return 2;
            }
            R.max_answer = strtoull(optarg, &ep, 10);
            break;
        case 'N':
            if (o->nnames < MAX_TARGETS)
                o->names[o->nnames++] = optarg;
            break;
        case 'X':
            if (o->nchecks < MAX_TARGETS)
                o->checks[o->nchecks++] = optarg;
            break;
        case 'V':
            o->tsv = optarg;
            break;
        case 'J':
            o->json = optarg;
            break;
        case 'H':
            o->want_hist = 1;
            o->hist = optarg;
            break;
        case 'P':
            R.progress = 1;
            break;
        case 'Q':
            R.progress = 0;
            break;
        case 'h':
            return enr_cli_usage(usage, 0);
        default:
            return enr_cli_usage(usage, ENR_CLI_USAGE);
        }
        if (ep && (*ep || ep == optarg)) {
            fprintf(stderr, "enrich-replay: bad number '%s'\n", optarg);
            return 2;
        }
    }
    if (argc - optind < 2 || R.conc == 0 || R.speed < 0 || R.duration <= 0 || R.timeout_ns <= 0 ||
        R.max_answer == 0)
        return enr_cli_usage(usage, ENR_CLI_USAGE);
    R.nt = (size_t)(argc - optind - 1);
    if (R.nt > MAX_TARGETS) {
        fprintf(stderr, "enrich-replay: at most %d targets\n", MAX_TARGETS);
        return 2;
    }
    if (R.compare && (R.nt != 2 || R.closed)) {
        fprintf(stderr, "enrich-replay: --compare needs exactly two targets and the open loop\n");
        return 2;
    }
    return -1;
}

/* Each target of the command line with its connections, queue and
 * expected answers.  0, or -1 (said on stderr). */
static int setup_targets(char **targets, const outs *o)
{
    char err[512];
    size_t qcap = R.tr.n + 1;
    for (size_t i = 0; i < R.nt; i++) {
        tstate *t = &R.ts[i];
        if (enr_replay_target_parse(&t->tgt, targets[i], err, sizeof err) < 0) {
            fprintf(stderr, "enrich-replay: %s\n", err);
            return -1;
        }
        if (i < o->nnames)
            snprintf(t->tgt.name, sizeof t->tgt.name, "%s", o->names[i]);
        if (i < o->nchecks && strcmp(o->checks[i], "-") != 0)
            t->expect = load_check(o->checks[i], R.tr.n);
        t->conns = calloc(R.conc, sizeof *t->conns);
        t->idle = calloc(R.conc, sizeof *t->idle);
        t->queue = calloc(qcap, sizeof *t->queue);
        t->qdue = calloc(qcap, sizeof *t->qdue);
        if (!t->conns || !t->idle || !t->queue || !t->qdue) {
            fprintf(stderr, "enrich-replay: out of memory\n");
            return -1;
        }
        t->qcap = qcap;
        for (unsigned k = 0; k < R.conc; k++) {
            t->conns[k].fd = -1;
            t->idle[t->nidle++] = &t->conns[k];
        }
    }
    if (R.compare && !(R.cmp = calloc(R.tr.n, sizeof *R.cmp))) {
        fprintf(stderr, "enrich-replay: out of memory\n");
        return -1;
    }
    return 0;
}

/* The summary, histograms, comparison and files of a finished run.
 * Returns the exit code. */
static int report(const outs *o, size_t used, double elapsed, double cpu)
{
    enr_replay_summary sum[MAX_TARGETS];
    for (size_t i = 0; i < R.nt; i++) {
        sum[i].name = R.ts[i].tgt.name;
        sum[i].cpu_ms_per_req = -1;
        enr_replay_summarize(R.rec, R.nrec, (unsigned)i, elapsed, &sum[i]);
    }
    /* In the open loop the CPU includes the spin before due times. */
    printf("mode %s, concurrency %u%s, %zu records in %.2f s; replayer CPU %.1f us/request\n",
           R.closed ? "closed loop" : "open loop", R.conc,
           R.closed ? "" : (R.speed > 0 ? "" : ", no gaps"), R.nrec, elapsed,
           R.nrec ? cpu * 1e6 / (double)R.nrec : 0);
    if (!R.closed && R.speed > 0)
        printf("speed %gx: trace span %.1f s played in %.1f s\n", R.speed, R.tr.e[used - 1].ts,
               R.tr.e[used - 1].ts / R.speed);
    enr_replay_print(stdout, sum, R.nt);
    if (o->want_hist) {
        enr_replay_print_histogram(stdout, R.rec, R.nrec, sum, R.nt);
        const char *prefix = o->hist && *o->hist ? o->hist : "replay";
        if (enr_replay_write_plots(prefix, R.rec, R.nrec, sum, R.nt) < 0)
            fprintf(stderr, "enrich-replay: writing %s.*: %s\n", prefix, strerror(errno));
        else
            printf("histograms: %s.N.hgrm, CDF data %s.cdf.dat, gnuplot script %s.gp%s\n", prefix,
                   prefix, prefix,
                   access("/usr/bin/gnuplot", X_OK) == 0 ? " -> .svg" : " (gnuplot not installed)");
    }
    int rc = 0;
    if (R.compare) {
        printf("compare %s vs %s: %zu identical (ignoring fetched_at), %zu both rejected, %zu "
               "FAILED (no answer to compare), %zu MISMATCHES\n",
               R.ts[0].tgt.name, R.ts[1].tgt.name, R.cmp_same, R.cmp_both_rejected, R.cmp_failed,
               R.cmp_diff);
        rc = R.cmp_diff || R.cmp_failed ? 3 : 0;
    }
    if (o->tsv && enr_replay_write_tsv(o->tsv, R.rec, R.nrec, sum) != 0) {
        fprintf(stderr, "enrich-replay: %s: %s\n", o->tsv, strerror(errno));
        rc = 1;
    }
    if (o->json && enr_replay_write_json(o->json, sum, R.nt, R.closed ? "closed" : "open",
                                         R.nrec ? cpu * 1e6 / (double)R.nrec : 0) != 0) {
        fprintf(stderr, "enrich-replay: %s: %s\n", o->json, strerror(errno));
        rc = 1;
    }
    return rc;
}

/* Everything the run held, given back. */
static void teardown(void)
{
    for (size_t i = 0; i < R.nt; i++) {
        for (unsigned k = 0; k < R.conc; k++) {
            enr_replay_conn_close(&R.ts[i].conns[k], R.epfd);
            free(R.ts[i].conns[k].hb);
            free(R.ts[i].conns[k].kb);
        }
        free(R.ts[i].conns);
        free(R.ts[i].idle);
        free(R.ts[i].queue);
        free(R.ts[i].qdue);
    }
    if (R.cmp) {
        for (size_t i = 0; i < R.tr.n; i++) {
            free(R.cmp[i].body[0]);
            free(R.cmp[i].body[1]);
        }
        free(R.cmp);
    }
    free(R.rec);
    close(R.epfd);
    enr_replay_trace_free(&R.tr);
}

int main(int argc, char **argv)
{
    static outs o;
    int rc = parse_args(argc, argv, &o);

    if (rc >= 0)
        return rc;
    char err[512];
    if (enr_replay_trace_load(&R.tr, argv[optind], err, sizeof err) < 0) {
        fprintf(stderr, "enrich-replay: %s\n", err);
        return 1;
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
            perror("enrich-replay: setrlimit");
    }
    /* The default 50 µs timer slack would be the largest error in our due
     * times; ask for the tightest wake-ups. */
    if (prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0) < 0)
        perror("enrich-replay: PR_SET_TIMERSLACK");
    R.epfd = epoll_create1(EPOLL_CLOEXEC);
    if (R.epfd < 0) {
        perror("enrich-replay: epoll_create1");
        return 1;
    }
    if (setup_targets(argv + optind + 1, &o) != 0)
        return 1;
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGINT, &sa, NULL) < 0 || sigaction(SIGTERM, &sa, NULL) < 0) {
        perror("enrich-replay: sigaction");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);

    size_t used = !R.closed && R.limit && R.limit < R.tr.n ? R.limit : R.tr.n;
    double used_mb = 0;
    for (size_t i = 0; i < used; i++)
        used_mb += (double)R.tr.e[i].len / 1e6;
    fprintf(stderr,
            "enrich-replay: %zu requests (%.1f MB) from %s, %s, %zu target(s), concurrency %u\n",
            used, used_mb, argv[optind], R.closed ? "closed loop" : "open loop", R.nt, R.conc);
    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    run();
    getrusage(RUSAGE_SELF, &ru1);
    int64_t t_last = R.t0;
    for (size_t i = 0; i < R.nt; i++)
        if (R.ts[i].t_end > t_last)
            t_last = R.ts[i].t_end;
    double elapsed = (double)(t_last - R.t0) / 1e9;
    double cpu = (double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec + ru1.ru_stime.tv_sec -
                          ru0.ru_stime.tv_sec) +
                 (double)(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec + ru1.ru_stime.tv_usec -
                          ru0.ru_stime.tv_usec) /
                     1e6;

    rc = report(&o, used, elapsed, cpu);
    teardown();
    return rc;
}
