#!/usr/bin/env python3
"""make test and make check: every suite, one summary.

Runs the unit test binaries, the conformance vectors through the CLI, the
Unicode sweeps against Node, and every integration and hostile script
(real nginx, real enrichd; found by glob, so a new tests/*/test_*.py is
run without being listed); each prints "N passed, M failed" as its last
such line, which is summed here.  A suite that crashes or prints no
summary counts as one failure.  Ends with the total "N passed, M failed"
and exits non-zero on any failure.

Suites run side by side (-j, sized to the machine by default): each has
its own directory, sockets and ports, and most of their time is spent
waiting for the daemon.  A suite that needs the machine to itself (a load
it makes, a resource it takes whole; never a time bar: docs/testing.md)
says so in a comment line of its own that starts "# run alone:" (a C
suite's source: " * run alone:" or "/* run alone:"), followed by why;
those run afterwards, one at a time, with nothing else running.  A suite that measures what a process holds in
memory says "# plain build only:" and why: on a sanitizer build (the
sanitizer's allocator keeps freed memory in quarantine, its shadow
mappings fill every core) it is listed as skipped, with that reason, and
counts nothing.  A suite that runs alone on the plain build but
not on a sanitizer build says "# sanitizer build: side by side:" and why:
there it runs with the others.  Each suite's line (its name, counts and time,
and the tail of its output when it failed) prints as it finishes; the
failed ones are named again in a fixed order at the end.  The vectors
and Unicode sweeps (they time nothing) start with the others, and when
the suites that run alone take 30 s or more, these need not wait for
them: what is left of the sweeps runs beside them on the idle scheduling
class (SCHED_IDLE: any other runnable process takes the core from them
at once), on the cores they leave idle, then on the normal class once
they end.  The longest
suites (by the previous run's times, kept in BUILD/test-times.json; on a
fresh clone, by tests/suite-times.json, a CI run's, the longer of the
plain and sanitizer builds' times) are started first, so that -j is not
left waiting on one long suite started last.  Each suite's CPU seconds
(its own and those of the processes it waited for) print beside its
wall time: on a shared machine, the steadier figure of what it costs.
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SUMMARY = re.compile(r"^(?:\w+: )?(\d+) passed, (\d+) failed", re.M)
# Tests (functions) apart from assertions: "tests: N run, M failed".  A
# suite that does not say counts as one test.
TESTS = re.compile(r"^tests: (\d+) run, (\d+) failed", re.M)
MARK = r"^(?:#|/\*| \*) "  # a marker's line: a Python comment, or a C one's first or later line
ALONE = re.compile(MARK + r"run alone: ", re.M)
PLAIN_ONLY = re.compile(MARK + r"plain build only: (.*)$", re.M)
SAN_SHARED = re.compile(MARK + r"sanitizer build: side by side: ", re.M)
# A hung suite's bound: several times the longest suite's time on a busy
# machine, where the suites side by side slow one another.
SUITE_TIMEOUT_S = 600
# A suite process, its nginx and its daemon's workers hold ~100-250 MB
# (more on the sanitizer build): the default -j leaves room for them.
SUITE_MB = 400
# The suites that run alone leave room for the sweeps beside them (on the
# idle class) when they take this long or more.
BACKFILL_ALONE_S = 30
BACKFILL_JOBS = 2


def default_jobs():
    """Three times the cores (the suites mostly wait: make test's take
    about a quarter of a core each, 158 s of CPU over 629 s of suite time
    on 2 cores), at most what memory holds."""
    jobs = 3 * (os.cpu_count() or 1)
    try:
        with open("/proc/meminfo") as f:
            avail = next(int(l.split()[1]) for l in f if l.startswith("MemAvailable:"))
        jobs = min(jobs, max(1, avail // 1024 // SUITE_MB))
    except (OSError, StopIteration, ValueError):
        pass
    return max(1, min(jobs, 8))


class Suite:
    def __init__(self, name, argv, src=None):
        self.name, self.argv = name, argv
        self.text = source_text(src) if src else ""  # its source, where its markers are read
        self.alone = bool(ALONE.search(self.text))
        self.leaks = False  # a C suite: its leaks checked (see leak_env)
        self.idle = False  # on the idle scheduling class (beside the suites that run alone)
        self.pid = None
        self.line = None  # the printed result, once run
        self.counts = (0, 0, 0, 0)
        self.secs = 0.0
        self.cpu = 0.0


def leak_env(suite, env):
    """A C suite's environment: on a sanitizer build, its leaks are
    checked wherever it runs, and its reports go to its own output.  The
    integration pass turns LeakSanitizer off for the daemon (workers are
    killed on purpose) and collects the daemon's reports in files that
    must stay empty; a C suite's processes end as they mean to, a report
    ends the suite itself with an error, and one provokes faults on
    purpose (test_signals: SIGSEGV, SIGFPE), judging its reports as it
    did when such suites (tests/integration/*.c) ran in the unit pass."""
    if not suite.leaks:
        return env
    out = dict(env)
    for var in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
        opts = [o for o in env.get(var, "").split(":") if o and not o.startswith("log_path=")]
        if var == "ASAN_OPTIONS":
            opts = ["detect_leaks=1" if o == "detect_leaks=0" else o for o in opts]
        if var in env:
            out[var] = ":".join(opts)
    return out


def run(suite, env):
    """Runs one suite; its CPU seconds (user + system of the suite and of
    the processes it waited for, from wait4) go with its wall time."""
    t = time.monotonic()
    env = leak_env(suite, env)
    with tempfile.TemporaryFile() as so, tempfile.TemporaryFile() as se:
        idle = suite.idle
        p = subprocess.Popen((["chrt", "--idle", "0"] if idle else []) + suite.argv, cwd=ROOT,
                             env=env, stdout=so, stderr=se)
        suite.pid = p.pid
        if idle != suite.idle:  # set_idle came between
            set_class(p.pid, os.SCHED_IDLE if suite.idle else os.SCHED_OTHER)
        hung = threading.Event()
        timer = threading.Timer(SUITE_TIMEOUT_S, lambda: (hung.set(), p.kill()))
        timer.start()
        try:
            _, status, ru = os.wait4(p.pid, 0)
        finally:
            timer.cancel()
        p.returncode = rc = os.waitstatus_to_exitcode(status)
        suite.cpu = ru.ru_utime + ru.ru_stime
        so.seek(0)
        se.seek(0)
        out = (so.read() + se.read()).decode(errors="replace")
    if hung.is_set():
        out += "\nTIMEOUT after %ds" % SUITE_TIMEOUT_S
    found = SUMMARY.findall(out)
    if found:
        passed, failed = int(found[-1][0]), int(found[-1][1])
    else:
        passed, failed = 0, 1
    if rc != 0 and failed == 0:
        failed = 1  # a crash after its summary still fails the suite
    tests = TESTS.findall(out)
    ntests, tfailed = (int(tests[-1][0]), int(tests[-1][1])) if tests else (1, 0)
    if failed and tfailed == 0:
        tfailed = 1
    suite.secs = time.monotonic() - t
    status = "ok  " if failed == 0 else "FAIL"
    line = "%s %-36s %3d tests %5d passed, %d failed  (%.1fs, CPU %.1fs)" % (
        status, suite.name, ntests, passed, failed, suite.secs, suite.cpu)
    if failed:
        line += "".join("\n     | " + l for l in out.strip().splitlines()[-40:])
    suite.counts = (passed, failed, ntests, tfailed)
    suite.line = line


def set_class(pid, policy):
    """pid and every process under it to the scheduling class policy."""
    try:
        os.sched_setscheduler(pid, policy, os.sched_param(0))
        kids = []
        for tid in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
                kids += [int(k) for k in f.read().split()]
    except OSError:
        return
    for k in kids:
        set_class(k, policy)


def set_idle(suites, idle):
    """The suites (those running and those yet to start) on the idle
    scheduling class, or back on the normal one."""
    for s in suites:
        s.idle = idle
        if s.pid is not None and s.line is None:  # running (a finished one's pid may be reused)
            set_class(s.pid, os.SCHED_IDLE if idle else os.SCHED_OTHER)


def source_text(source):
    try:
        with open(source, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def collect(build, kinds, only):
    suites = []
    # The C suites: a pure one's source is in tests/unit, one that forks
    # or opens sockets is in tests/integration (its kind).
    for t in sorted(glob.glob(os.path.join(build, "tests", "test_*"))):
        if os.access(t, os.X_OK) and not t.endswith((".o", ".d")):
            kind = next((k for k in ("unit", "integration") if os.path.exists(
                os.path.join(HERE, k, os.path.basename(t) + ".c"))), "unit")
            src = os.path.join(HERE, kind, os.path.basename(t) + ".c")
            suites.append(Suite(kind + "/" + os.path.basename(t), [t], src))
            suites[-1].leaks = True
    suites.append(Suite("vectors/cli", [sys.executable, "tests/vectors.py", "--cmd",
                                        os.path.join(build, "enrich")]))
    # The lower-casing and NFKC against Node's (tests/unicode/oracle.mjs):
    # every code point and composition pair, then seeded random strings
    # (a million of them once by hand: --random 1000000).
    node = ["node", "tests/unicode/oracle.mjs", "--cmd", os.path.join(build, "enrich")]
    suites.append(Suite("vectors/unicode-node", node))
    suites.append(Suite("vectors/unicode-node-random", node + ["--random", "200000", "--seed", "17"]))
    # hostile/: the same real stack, driven as an attacker or a careless
    # operator would (slow readers, inflating input, bad upstreams, bad
    # reloads, raw FastCGI); counted as integration suites.
    for kind in ("integration", "hostile"):
        for t in sorted(glob.glob(os.path.join(HERE, kind, "test_*.py"))):
            suites.append(Suite(kind + "/" + os.path.basename(t), [sys.executable, t], t))
    kinds = kinds.split(",")
    if "integration" in kinds:
        kinds.append("hostile")
    suites = [s for s in suites if s.name.split("/")[0] in kinds]
    if only:
        suites = [s for s in suites if only in s.name]
    return suites


class Printer:
    """Prints each suite's line as it finishes (one at a time)."""

    def __init__(self):
        self.lock = threading.Lock()

    def done(self, suite):
        with self.lock:
            print(suite.line, flush=True)


def load_times(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def save_times(path, suites, old):
    times = dict(old)
    times.update({s.name: round(s.secs, 1) for s in suites if s.line is not None})
    try:
        with open(path + ".tmp", "w") as f:
            json.dump(times, f, indent=0, sort_keys=True)
        os.replace(path + ".tmp", path)
    except OSError:
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--only", help="substring of the suite names to run")
    ap.add_argument("--kind", default="unit,vectors,integration",
                    help="comma-separated suite kinds: unit, vectors, integration "
                         "(integration includes hostile), hostile")
    ap.add_argument("-j", "--jobs", type=int, default=int(os.environ.get("TEST_JOBS") or 0),
                    help="suites run side by side (default: sized to the machine, %d here)"
                         % default_jobs())
    part = ap.add_mutually_exclusive_group()
    part.add_argument("--skip-alone", action="store_true",
                      help="only the suites that run side by side (CI runs the others apart)")
    part.add_argument("--alone-only", action="store_true",
                      help="only the suites that run alone")
    args = ap.parse_args()
    jobs = args.jobs if args.jobs > 0 else default_jobs()
    env = dict(os.environ, ENR_BUILD=args.build, PYTHONUNBUFFERED="1")
    suites = collect(args.build, args.kind, args.only)
    if os.path.basename(os.path.normpath(args.build)).startswith("build-san"):
        for s in list(suites):
            m = PLAIN_ONLY.search(s.text)
            if m:
                print("skip %-36s on a sanitizer build: %s" % (s.name, m.group(1)), flush=True)
                suites.remove(s)
            elif SAN_SHARED.search(s.text):
                s.alone = False
    if args.skip_alone or args.alone_only:
        suites = [s for s in suites if s.alone == args.alone_only]
    shared = [s for s in suites if not s.alone]
    alone = [s for s in suites if s.alone]
    times_path = os.path.join(args.build, "test-times.json")
    times = dict(load_times(os.path.join(HERE, "suite-times.json")), **load_times(times_path))
    # The vectors and sweeps time nothing: they start with the others
    # (BACKFILL_JOBS at a time, apart from -j) and need not end before the
    # suites that run alone start, when these take long enough to leave
    # room: what is left of them runs beside those on the idle class.
    backfill = []
    if sum(times.get(s.name, BACKFILL_ALONE_S) for s in alone) >= BACKFILL_ALONE_S:
        backfill = [s for s in shared if s.name.startswith("vectors/")]
    shared = [s for s in shared if s not in backfill]
    printer = Printer()
    print("%d suites: %d side by side (-j %d), %d alone after them%s"
          % (len(suites), len(shared), jobs, len(alone),
             " (%d sweeps beside them on the idle class)" % len(backfill) if backfill else ""),
          flush=True)
    t0 = time.monotonic()

    def one(s):
        run(s, env)
        printer.done(s)

    # Longest first (unknown ones count as long), so that the last to
    # finish are short ones.
    start = sorted(shared, key=lambda s: -times.get(s.name, 1e6))
    back_pool = ThreadPoolExecutor(max_workers=BACKFILL_JOBS)
    try:
        back_runs = [back_pool.submit(one, s) for s in
                     sorted(backfill, key=lambda s: -times.get(s.name, 1e6))]
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            for f in [pool.submit(one, s) for s in start]:
                f.result()
        set_idle(backfill, True)
        for s in alone:
            one(s)
        set_idle(backfill, False)
        for f in back_runs:
            f.result()
    finally:
        back_pool.shutdown()
        save_times(times_path, suites, load_times(times_path))
    total_p = sum(s.counts[0] for s in suites)
    total_f = sum(s.counts[1] for s in suites)
    total_t = sum(s.counts[2] for s in suites)
    total_tf = sum(s.counts[3] for s in suites)
    # Assertions overstate coverage (one table of cases is hundreds of
    # them): the tests are reported apart.
    failed = [s.name for s in suites if s.counts[1]]
    if failed:
        print("failed: " + " ".join(failed))
    print("%d suites, %d tests (%d failed), %d assertions (%d failed) in %.0f s (CPU %.0f s)"
          % (len(suites), total_t, total_tf, total_p + total_f, total_f, time.monotonic() - t0,
             sum(s.cpu for s in suites)))
    print("%d passed, %d failed" % (total_p, total_f))
    return 1 if total_f else 0


if __name__ == "__main__":
    sys.exit(main())
