#!/usr/bin/env python3
"""bench.py: `make bench` (through scripts/bench.sh): one table of the
service's performance, measured with build/enrich-replay against the real
stack (nginx + enrichd, tests/integration/harness.py) and, side by side,
the incumbent worker (Bun and Node, scripts/bench-incumbent.sh) and any
--peer URL.

Phases (each server pinned to core 0, the load client to core 1):
  1. replayer self-check against a trivial responder (nginx `return 200`):
     closed-loop 400 KB batches (the replayer's ceiling) and a 5,000 req/s
     open loop of small batches (what it adds to a latency);
  2. per target, alone: open-loop replay of a production-shaped trace at
     ~185 req/s, at most as many in flight as the site admits (nginx's
     max_conns: a later arrival waits in the replayer, its wait counted),
     PSS and descriptors sampled meanwhile; then closed loop at half that
     concurrency on the 400 KB / 200-record batch (req/s, and CPU per
     request of the server's processes from /proc);
  3. one interleaved open-loop run of every target (same arrivals, same
     moment; they share core 0, so read it as a relative comparison);
  4. cold start: exec to the first 200, median of 20.
Invariants: every process started here is killed on exit (also on error);
numbers come only from measurements of this run; a rate, a percentile or
a CPU per request counts only good answers: a 200 whose whole body is
the one expected (build/enrich's output for that batch, "fetched_at"
aside; the floor's, its own 80 KB), checked by enrich-replay --check.
Anything else (a refusal, an error, a wrong body) is counted beside it,
and a goal fed by a phase that had any fails.
"""
import argparse
import json
import re
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from harness import free_port  # noqa: E402
# The processes measured and pinned (bench-nginx.py and bench-pool.py take
# these names from here).
from bench_proc import (CLIENT_CPUS, CLIENT_NICE, CORES, IS_ROOT, SERVER_CPUS,  # noqa: E402
                        Sampler, as_client, as_server, cpu_s, descendants, pinned)

TARGET_RATE = 185.0          # req/s of the open-loop replay (the issue's)
SPEED = 100.0
COLD_RUNS = 20
CLOSED_S = 6.0
NULL_ANSWER = 80 * 1024   # build/bench-null's answer: 'x' lines of 400 bytes


def machine():
    """The CPU model, its count and the kernel, for the table's head."""
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return "%d x %s, Linux %s" % (CORES, model, os.uname().release)


def admission_limit():
    """max_conns of the shipped site's upstream (nginx/enrichd.conf): past
    it nginx refuses at once with 503."""
    with open(os.path.join(ROOT, "nginx", "enrichd.conf")) as f:
        m = re.search(r"^\s*server\s+\S+.*\bmax_conns=(\d+)", f.read(), re.M)
    return int(m.group(1)) if m else 0


def body_digest(body):
    """enrich-replay --check's digest: SHA-1's first 8 bytes, "fetched_at" values 0."""
    import hashlib
    return hashlib.sha1(re.sub(rb'"fetched_at":[-.0-9eE+]*', b'"fetched_at":0', body)).hexdigest()[:16]


def expect_files(build, trace, out):
    """The --check file of trace for enrichd and its peers (build/enrich's
    answer to each entry; "-" where it refuses the batch, counted) and
    for the floor (bench-null's answer).  Returns (enrich_path,
    floor_path, refused)."""
    from concurrent.futures import ThreadPoolExecutor

    null = bytes(10 if i % 400 == 399 else 120 for i in range(NULL_ANSWER))

    def one(line):
        # The payload's own bytes, as the replayer sends them: gen-trace
        # writes it last, {"ts":T,"payload":VALUE}.
        k = line.index(b'"payload":') + len(b'"payload":')
        body = line[k:line.rstrip().rindex(b"}")]
        r = subprocess.run([os.path.join(build, "enrich")], input=body, capture_output=True)
        return "-" if r.returncode != 0 else body_digest(r.stdout)

    with open(trace, "rb") as f:
        with ThreadPoolExecutor(CORES) as pool:
            lines = list(pool.map(one, [l for l in f if l.strip()]))
    refused = lines.count("-")
    with open(out + ".enrich", "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(out + ".floor", "w") as f:
        f.write((body_digest(null) + "\n") * len(lines))
    return out + ".enrich", out + ".floor", refused


def log(msg):
    print("bench: " + msg, file=sys.stderr, flush=True)


def honest(s):
    """A replayer summary whose rate and percentiles count good answers only
    (200, the whole expected body); what else came is kept beside."""
    h = dict(s)
    for k in ("rps", "p50", "p99", "p999", "max"):
        h[k] = s["good_" + k]
    h["not_good"] = s["count"] - s["good"]
    return h


def not_good_text(s):
    """What a phase got besides good answers, e.g. '12 (5xx 12)', or '0'."""
    parts = ["%s %d" % (k, s[k]) for k in ("s5xx", "s4xx", "errors", "bad_body") if s.get(k)]
    return "%d (%s)" % (s["not_good"], ", ".join(parts)) if s["not_good"] else "0"


def replay(build, tmp, trace, targets, extra, tag, checks=None):
    """Runs enrich-replay; checks: name -> --check file (a target without
    one is checked for a 200 with a whole body only)."""
    out = os.path.join(tmp, tag + ".json")
    cmd = pinned(CLIENT_CPUS, CLIENT_NICE) + [os.path.join(build, "enrich-replay"), "--no-progress", "--json", out]
    for name, _ in targets:
        cmd += ["--name", name, "--check", (checks or {}).get(name, "-")]
    cmd += extra + [trace] + [url for _, url in targets]
    with open(os.path.join(tmp, tag + ".txt"), "w") as f:
        rc = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT)
    if rc != 0:
        with open(os.path.join(tmp, tag + ".txt")) as f:
            sys.stderr.write(f.read())
        raise RuntimeError("enrich-replay failed (%s)" % tag)
    with open(out) as f:
        return {s["target"]: honest(s) for s in json.load(f)}


def http_ok(port, body, timeout=2.0):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout)
    except OSError:
        return False
    try:
        s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                  % len(body) + body)
        s.settimeout(timeout)
        data = s.recv(64)
        return data.startswith(b"HTTP/1.1 200")
    except OSError:
        return False
    finally:
        s.close()


class Peer:
    """A peer server process (Bun, Node) pinned to the server core."""

    def __init__(self, name, argv, cwd):
        self.name, self.argv, self.cwd, self.proc, self.port = name, argv, cwd, None, None

    def start(self):
        self.port = free_port()
        env = dict(os.environ, PORT=str(self.port), HOST="127.0.0.1")
        self.proc = subprocess.Popen(pinned(SERVER_CPUS) + self.argv, cwd=self.cwd, env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        return self.port

    def stop(self):
        if self.proc:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            self.proc.wait()
            self.proc = None

    def pids(self):
        return descendants(self.proc.pid) if self.proc else []

    def url(self):
        return "http://127.0.0.1:%d/" % self.port


def start_floor(build, name):
    """The floor: the shipped nginx configuration in front of
    build/bench-null, a FastCGI responder that reads the body and answers
    80 KB of nothing.  Returns (env, the responder's process); the caller
    closes env."""
    import harness  # imported where a stack starts, as main() does

    fenv = harness.Env(build=build, name=name)
    as_server()
    try:
        null = subprocess.Popen([os.path.join(build, "bench-null"), fenv.sock],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        fenv.procs.append(null)
        harness.wait_for(lambda: os.path.exists(fenv.sock), 5, what="bench-null socket")
        fenv.start_nginx()
    except BaseException:
        fenv.close()
        raise
    finally:
        as_client()
    return fenv, null


def warm_ms(port, body):
    t0 = time.perf_counter()
    ok = http_ok(port, body)
    return (time.perf_counter() - t0) * 1e3 if ok else None


def cold_start_peer(peer, body):
    """Median cold start and median warm request right after, in ms."""
    times, warm = [], []
    for _ in range(COLD_RUNS):
        t0 = time.perf_counter()
        port = peer.start()
        while not http_ok(port, body, 0.5):
            if peer.proc.poll() is not None:
                raise RuntimeError("%s exited at start" % peer.name)
            if time.perf_counter() - t0 > 10:
                raise RuntimeError("%s: no 200 within 10 s" % peer.name)
            time.sleep(0.0005)
        times.append((time.perf_counter() - t0) * 1e3)
        w = warm_ms(port, body)
        if w is not None:
            warm.append(w)
        peer.stop()
    return statistics.median(times), statistics.median(warm) if warm else None


def activation(launcher, program, args):
    """(path, argv) that start program with LISTEN_PID set to the pid it
    will run as, as systemd's exec of a service does: through
    build/bench-activate (launcher: its path), or launcher "sh", the
    shell that sets it and execs (the bench's way until 2026-12-02: it
    adds a shell's start, ~56 page faults, to every measurement)."""
    if launcher == "sh":
        return "/bin/sh", ["sh", "-c", 'LISTEN_PID=$$ exec "$0" "$@"', program] + args
    return launcher, [launcher, program] + args


def spawn_floor_ms(launcher, runs=COLD_RUNS):
    """The same spawn path as enrichd's cold start (launcher: see
    activation()) running /bin/true to its exit: what this machine charges
    any program before it runs a line of its own."""
    path, argv = activation(launcher, "/bin/true", [])
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        pid = os.posix_spawn(path, argv, dict(os.environ))
        os.waitpid(pid, 0)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def start_cost(master):
    """CPU ms and page faults of a cold start: the master (its launcher's
    exec and the dynamic loader included: the pid is the same) and its
    first child, the worker that answered, read from /proc when the answer
    arrives.  Steadier than the wall clock on a loaded machine, where
    waiting for a core is most of it; the faults are most of the CPU on
    this VM (~40-60 us each)."""
    try:
        with open("/proc/%d/task/%d/children" % (master, master)) as f:
            kids = sorted(int(k) for k in f.read().split())
    except OSError:
        return None
    ns = faults = 0
    for p in [master] + kids[:1]:
        try:
            with open("/proc/%d/schedstat" % p) as f:
                ns += int(f.read().split()[0])
            with open("/proc/%d/stat" % p) as f:
                st = f.read()
            faults += int(st[st.rindex(")") + 2:].split()[7])
        except (OSError, ValueError, IndexError):
            return None
    return ns / 1e6, faults


def cold_start_enrichd(harness, body, launcher, build=None, runs=COLD_RUNS):
    """exec of enrichd to the first 200 through nginx, sockets already bound:
    this process binds them once (as systemd would) and hands them to each
    new enrichd as socket-activation descriptors 3 and 4; the clock starts
    just before the spawn and the request is sent at once (it waits in the
    listen backlog until a worker accepts).  launcher: see activation();
    build: the build directory (default the harness's).  Returns the
    medians of the cold start and of the warm request after it (ms), and
    of the start's CPU ms and page faults (start_cost())."""
    env = harness.Env(build=build, name="bench-cold")
    times, warm, cost = [], [], []
    socks = []
    try:
        env.write_config()
        for path in (env.sock, env.status_sock):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(path)
            s.listen(511)
            os.chmod(path, 0o660)
            if IS_ROOT:
                shutil.chown(path, group="www-data")
            socks.append(s)
        as_server()
        env.start_nginx()
        as_client()
        # The sockets at fixed high descriptors (close-on-exec), dup'ed to
        # 3 and 4 in the child; LISTEN_PID is the launcher's pid, which
        # enrichd keeps across `exec`.  posix_spawn keeps our own cost to ~1 ms.
        high = [os.dup2(sk.fileno(), 100 + i, inheritable=False) for i, sk in enumerate(socks)]
        log_fh = open(os.path.join(env.dir, "cold.log"), "ab")
        path, argv = activation(launcher, os.path.join(env.build, "enrichd"), ["-c", env.conf])
        spawn_env = dict(os.environ, LISTEN_FDS="2", LISTEN_FDNAMES="enrichd:status")
        actions = [(os.POSIX_SPAWN_DUP2, high[0], 3), (os.POSIX_SPAWN_DUP2, high[1], 4),
                   (os.POSIX_SPAWN_DUP2, log_fh.fileno(), 1), (os.POSIX_SPAWN_DUP2, log_fh.fileno(), 2)]
        for _ in range(runs):
            as_server()
            t0 = time.perf_counter()
            pid = os.posix_spawn(path, argv, spawn_env, file_actions=actions, setsid=True)
            as_client()
            ok = http_ok(env.port, body, 10)
            t1 = time.perf_counter()
            c = start_cost(pid)
            if c is not None:
                cost.append(c)
            try:
                if not ok:
                    with open(os.path.join(env.dir, "cold.log")) as f:
                        sys.stderr.write(f.read()[-2000:])
                    raise RuntimeError("enrichd cold start: no 200")
                times.append((t1 - t0) * 1e3)
                w = warm_ms(env.port, body)
                if w is not None:
                    warm.append(w)
            finally:
                os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        for fd in high:
            os.close(fd)
        log_fh.close()
    finally:
        as_client()
        for s in socks:
            s.close()
        env.close()
    cpu = statistics.median([c for c, _ in cost]) if cost else None
    faults = statistics.median([f for _, f in cost]) if cost else None
    return statistics.median(times), statistics.median(warm) if warm else None, cpu, faults


def fmt(v, nd=2):
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    return ("%." + str(nd) + "f") % v


# The performance goals, as rows of one table: label, the value of a
# target's results, "hi"/"lo" (which way is better), the phase whose
# answers feed it ("open", "closed", None), and the goal: ("bun", x) at
# least x times better than Bun, ("floor", f) at least f of the floor's
# rate, ("floor+", d) at most the floor's cost plus d, ("abs", v) at most v.
GOALS = [
    ("closed loop, 400 KB / 200 records, req/s", lambda r: r["closed"]["rps"], "hi", "closed", ("bun", 4.0)),
    ("closed loop, 400 KB / 200 records, req/s", lambda r: r["closed"]["rps"], "hi", "closed",
     ("floor", 0.9)),
    ("server CPU per request (nginx + workers), ms", lambda r: r["cpu_ms"], "lo", "closed", ("floor+", 0.1)),
    ("open loop replay p50, ms", lambda r: r["open"]["p50"], "lo", "open", ("bun", 4.0)),
    ("open loop replay p99, ms", lambda r: r["open"]["p99"], "lo", "open", ("bun", 4.0)),
    ("open loop replay p99.9, ms", lambda r: r["open"]["p999"], "lo", "open", ("bun", 4.0)),
    ("cold start (socket activation), ms", lambda r: r["cold"], "lo", None, ("abs", 10.0)),
]


def goal_met(kind, want, better, e, b, f):
    """(the goal's text, its ratio or share text, met)."""
    if e is None:
        return "-", "-", False
    if kind == "bun":
        ratio = (e / b if better == "hi" else b / e) if b else None
        return ">= %gx bun" % want, "%.2fx" % ratio if ratio else "-", ratio is not None and ratio >= want
    if kind == "floor":
        return ">= %.0f%% floor" % (100 * want), "%.0f%%" % (100 * e / f) if f else "-", bool(f) and e >= want * f
    if kind == "floor+":
        return "<= floor+%g" % want, "%+.3f" % (e - f) if f is not None else "-", f is not None and e <= f + want
    return "< %g" % want, "-", e < want


def goals_table(res, ref, share):
    """The goals, each row with enrichd, Bun, the floor, the goal, the ratio
    or share, whether it is met, and what was not good in the phase that
    fed it (anything fails the goal)."""
    print()
    print("goals (same run, same trace, same pinning; only good answers counted):")
    print("%-46s %9s %9s %9s %16s %8s %5s  %s" % ("", "enrichd", ref or "bun", "floor", "goal", "ratio", "met",
                                                 "not good"))
    for label, fn, better, phase, (kind, want) in GOALS:
        vals = []
        for n in ("enrichd", ref, "floor" if share else None):
            try:
                vals.append(fn(res[n]) if n else None)
            except (KeyError, TypeError):
                vals.append(None)
        e, b, f = vals
        goal, ratio, met = goal_met(kind, want, better, e, b, f)
        bad = res["enrichd"]["bad"][phase] if phase and "bad" in res["enrichd"] else [0, "0"]
        if bad[0]:
            met = False
        nd = 0 if better == "hi" else 3
        print("%-46s %9s %9s %9s %16s %8s %5s  %s" % (label, fmt(e, nd), fmt(b, nd), fmt(f, nd), goal, ratio,
                                                     "yes" if met else "NO", bad[1]))


def main():
    ap = argparse.ArgumentParser(description="make bench")
    ap.add_argument("--build", default=os.environ.get("ENR_BUILD", os.path.join(ROOT, "build")))
    ap.add_argument("--peer", action="append", default=[], metavar="[NAME=]URL",
                    help="another server for the same runs (repeatable); URL@PID,PID names its processes")
    ap.add_argument("--no-incumbent", action="store_true", help="do not run Bun/Node")
    ap.add_argument("--requests", type=int, default=3000, help="open-loop trace length")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=2, help="rounds of the per-target runs (best reported)")
    ap.add_argument("--workers", type=int, default=0, help="enrichd's pool size (default: its config default)")
    ap.add_argument("--no-floor", action="store_true", help="do not run the null responder (the floor)")
    ap.add_argument("--no-cold", action="store_true", help="skip the cold-start phase")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    a = ap.parse_args()
    t_start = time.time()
    a.load_start = os.getloadavg()[0]
    tmp = tempfile.mkdtemp(prefix="enrichd-bench-")
    os.chmod(tmp, 0o755)
    cleanup = []
    try:
        return run(a, tmp, cleanup, t_start)
    finally:
        for fn in reversed(cleanup):
            try:
                fn()
            except Exception as e:  # keep cleaning up the rest
                log("cleanup: %s" % e)
        as_client()
        if a.keep:
            log("kept %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def make_traces(a, tmp):
    """The run's traces (gen-trace): the production-shaped replay, 20 big
    batches, 20,000 tiny ones."""
    gen = os.path.join(ROOT, "scripts", "gen-trace")
    trace = os.path.join(tmp, "replay.jsonl")
    big = os.path.join(tmp, "big.jsonl")
    tiny = os.path.join(tmp, "tiny.jsonl")
    span = a.requests / TARGET_RATE * SPEED
    log("generating traces (%d requests, %.0f s of trace time at %gx)" % (a.requests, span, SPEED))
    # No batch the contract refuses: every answer of the replay is then a
    # 200 whose body build/enrich can tell in advance.
    jobs = [subprocess.Popen([gen, "-n", str(a.requests), "--duration", str(span), "--seed", str(a.seed),
                              "--bad-rate", "0", "-o", trace]),
            subprocess.Popen([gen, "--shape", "big", "-n", "20", "--seed", str(a.seed), "-o", big]),
            subprocess.Popen([gen, "-n", "20000", "--duration", "4", "--bursts-per-hour", "0",
                              "--gaps-per-hour", "0", "--max-body", "1500", "--pool", "500",
                              "--bad-rate", "0", "--seed", str(a.seed), "-o", tiny])]
    for j in jobs:
        if j.wait() != 0:
            raise RuntimeError("gen-trace failed")
    return trace, big, tiny


def self_check(build, tmp, big, tiny, closed_c, cleanup):
    """1. replayer self-check against nginx `return 200`."""
    triv_dir = os.path.join(tmp, "trivial")
    os.makedirs(triv_dir)
    tport = free_port()
    with open(os.path.join(triv_dir, "nginx.conf"), "w") as f:
        f.write("daemon off; worker_processes 1; pid %s/nginx.pid; error_log %s/error.log;\n"
                "events { worker_connections 4096; }\n"
                "http { access_log off; client_body_temp_path %s; keepalive_requests 1000000;\n"
                "  server { listen 127.0.0.1:%d; location / { return 200 \"ok\\n\"; } } }\n"
                % (triv_dir, triv_dir, triv_dir, tport))
    triv = subprocess.Popen(pinned(SERVER_CPUS) + ["nginx", "-p", triv_dir, "-c",
                                                    os.path.join(triv_dir, "nginx.conf")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    cleanup.append(lambda: (os.killpg(triv.pid, signal.SIGKILL), triv.wait()))
    deadline = time.time() + 5
    while not http_ok(tport, b"[]") and time.time() < deadline:
        time.sleep(0.01)
    turl = [("trivial", "http://127.0.0.1:%d/" % tport)]
    log("replayer self-check against nginx return 200")
    self_closed = replay(build, tmp, big, turl, ["--closed", "-d", "4", "-c", str(closed_c)],
                         "self-closed")["trivial"]
    self_open = replay(build, tmp, tiny, turl, ["--speed", "1"], "self-open")["trivial"]
    self_small = replay(build, tmp, tiny, turl, ["--closed", "-d", "2"], "self-small")["trivial"]
    os.killpg(triv.pid, signal.SIGKILL)
    triv.wait()
    cleanup.pop()
    return self_closed, self_open, self_small


def start_targets(a, build, harness, cleanup, notes, small_body):
    """Starts the targets: [(name, url, pids_fn, mem_pids_fn)] of enrichd, the
    floor, Bun and Node and the --peer URLs; enrichd's Env, the peers and
    the nginx pid functions of enrichd and the floor beside."""
    # -- targets ---------------------------------------------------------------
    targets = []   # (name, url, pids_fn, server_pids_fn_for_memory)
    env = None
    nginx_pids = None  # no enrichd: its nginx is not measured either
    if os.access(os.path.join(build, "enrichd"), os.X_OK) and os.path.exists(harness.NGINX_CONF):
        env = harness.Env(build=build, name="bench")
        cleanup.append(env.close)
        as_server()
        try:
            env.start_enrichd("workers = %d\n" % a.workers if a.workers else "")
            env.start_nginx()
        finally:
            as_client()
        mp = env.master_pid()
        nginx_pids = lambda: descendants(env.nginx.pid)
        targets.append(("enrichd", "http://127.0.0.1:%d/" % env.port,
                        lambda: descendants(mp) + descendants(env.nginx.pid),
                        lambda: descendants(mp)))
    else:
        notes.append("enrichd or nginx/enrichd.conf missing: enrichd columns skipped")
    floor_nginx = None
    # The floor: the same nginx configuration in front of build/bench-null,
    # a FastCGI responder that reads the body and answers 80 KB of nothing.
    if env is not None and os.access(os.path.join(build, "bench-null"), os.X_OK) and not a.no_floor:
        fenv, fnull = start_floor(build, "bench-floor")
        cleanup.append(fenv.close)
        targets.append(("floor", "http://127.0.0.1:%d/" % fenv.port,
                        lambda: descendants(fnull.pid) + descendants(fenv.nginx.pid),
                        lambda: descendants(fnull.pid)))
        floor_nginx = lambda: descendants(fenv.nginx.pid)
    peers = []
    if not a.no_incumbent:
        r = subprocess.run([os.path.join(ROOT, "scripts", "bench-incumbent.sh")], capture_output=True,
                           text=True)
        if r.returncode == 0:
            d = r.stdout.strip()
            bun = os.path.join(d, "node_modules", "@oven", "bun-linux-x64", "bin", "bun")
            peers.append(Peer("bun", [bun, "server-bun.mjs"], d))
            peers.append(Peer("node", ["node", "server-hono.mjs"], d))
        else:
            notes.append("incumbent skipped: " + r.stderr.strip())
    for p in peers:
        p.start()
        cleanup.append(p.stop)
        deadline = time.time() + 10
        while not http_ok(p.port, small_body):
            if time.time() > deadline:
                raise RuntimeError("%s did not answer" % p.name)
            time.sleep(0.01)
        targets.append((p.name, p.url(), p.pids, p.pids))
    for spec in a.peer:
        name, _, url = spec.rpartition("=")
        # URL@PID[,PID...]: the peer's processes (and their children), for
        # its CPU per request and memory.
        url, _, pids = url.partition("@")
        roots = [int(p) for p in pids.split(",") if p.isdigit()]
        fn = (lambda roots=roots: sum((descendants(p) for p in roots), []))
        targets.append((name or "peer%d" % len(targets), url, fn, fn))
    return targets, env, peers, nginx_pids, floor_nginx


def alone_rounds(a, build, tmp, trace, big, targets, open_c, closed_c, checks_open, checks_big,
                 nginx_pids, floor_nginx):
    """Phase 2: each target alone, open then closed loop; {name: its best round}."""
    # -- 2. each target alone, in --rounds rounds (order reversed each round) --
    # The better round per target and phase is reported: on a shared
    # machine the worse one mostly measures the neighbours.
    res = {}
    for rnd in range(a.rounds):
        order = targets if rnd % 2 == 0 else list(reversed(targets))
        for name, url, pids_fn, mem_fn in order:
            log("round %d/%d, %s: open-loop replay (%.0f s, c<=%d), then closed loop (%.0f s, c=%d)"
                % (rnd + 1, a.rounds, name, a.requests / TARGET_RATE, open_c, CLOSED_S, closed_c))
            sm = Sampler(mem_fn)
            sm.start()
            o = replay(build, tmp, trace, [(name, url)], ["--speed", str(SPEED), "-c", str(open_c)],
                       "open-%s-%d" % (name, rnd), checks_open)[name]
            sm.stop.set()
            sm.join()
            ngx = {"enrichd": nginx_pids, "floor": floor_nginx}.get(name)
            c0, n0 = cpu_s(pids_fn()), cpu_s(ngx()) if ngx else 0
            c = replay(build, tmp, big, [(name, url)], ["--closed", "-d", str(CLOSED_S), "-c", str(closed_c)],
                       "closed-%s-%d" % (name, rnd), checks_big)[name]
            c1, n1 = cpu_s(pids_fn()), cpu_s(ngx()) if ngx else 0
            # CPU per good answer: a refusal's or an error's CPU is spent
            # for nothing, and counts against the answers that were given.
            cur = {"open": o, "closed": c,
                   "cpu_ms": (c1 - c0) * 1e3 / c["good"] if c["good"] and pids_fn() else None,
                   "nginx_cpu_ms": (n1 - n0) * 1e3 / c["good"] if c["good"] and ngx else None,
                   "pss_mb": max(sm.pss) / 1024 if sm.pss and sm.pss[-1] else None,
                   "fds": (min(sm.fds), max(sm.fds)) if sm.fds and sm.fds[-1] else None}
            cur["bad"] = {"open": [o["not_good"], not_good_text(o)],
                          "closed": [c["not_good"], not_good_text(c)]}
            prev = res.get(name)
            if prev is None:
                res[name] = cur
                continue
            # What was not good in any round stays said, whichever round is kept.
            for ph in ("open", "closed"):
                if cur["bad"][ph][0]:
                    prev["bad"][ph] = [prev["bad"][ph][0] + cur["bad"][ph][0],
                                       "; ".join(x for x in (prev["bad"][ph][1], cur["bad"][ph][1]) if x != "0")]
            if cur["open"]["p99"] < prev["open"]["p99"]:
                prev["open"] = cur["open"]
            if cur["closed"]["rps"] > prev["closed"]["rps"]:
                for k in ("closed", "cpu_ms", "nginx_cpu_ms"):
                    prev[k] = cur[k]
            if cur["pss_mb"] and (prev["pss_mb"] is None or cur["pss_mb"] > prev["pss_mb"]):
                prev["pss_mb"] = cur["pss_mb"]   # memory: the worse round
            if cur["fds"] and prev["fds"]:
                prev["fds"] = (min(prev["fds"][0], cur["fds"][0]), max(prev["fds"][1], cur["fds"][1]))
    return res


def measure_cold(a, env, peers, harness, small_body):
    """4. cold start: enrichd's (and the spawn floor's), then each peer's."""
    cold = {}
    cold_floor = None
    if env is not None and not a.no_cold:
        log("enrichd cold start x%d" % COLD_RUNS)
        launcher = os.path.join(a.build, "bench-activate")
        cold["enrichd"] = cold_start_enrichd(harness, small_body, launcher)
        cold_floor = spawn_floor_ms(launcher)
    for p in peers if not a.no_cold else []:
        log("%s cold start x%d" % (p.name, COLD_RUNS))
        p.stop()
        cold[p.name] = cold_start_peer(p, small_body)
    return cold, cold_floor


def print_targets_table(res, inter, cold, names, ref, closed_c):
    """The table of every target's figures; whether it has the enrichd/floor column."""
    rows = [
        ("closed loop req/s (400 KB/200 rec, c=%d)" % closed_c, lambda n: res[n]["closed"]["rps"], "hi", 0),
        ("  answers not good (all rounds)", lambda n: res[n]["bad"]["closed"][1], None, 0),
        ("closed loop p50 ms", lambda n: res[n]["closed"]["p50"], "lo", 2),
        ("server CPU ms/request (closed loop)", lambda n: res[n]["cpu_ms"], "lo", 3),
        ("  of which nginx", lambda n: res[n]["nginx_cpu_ms"], None, 3),
        ("open loop p50 ms", lambda n: res[n]["open"]["p50"], "lo", 3),
        ("open loop p99 ms", lambda n: res[n]["open"]["p99"], "lo", 3),
        ("open loop p99.9 ms", lambda n: res[n]["open"]["p999"], "lo", 3),
        ("open loop max ms", lambda n: res[n]["open"]["max"], "lo", 3),
        ("  answers not good (all rounds)", lambda n: res[n]["bad"]["open"][1], None, 0),
        ("interleaved p50 ms", lambda n: inter.get(n, {}).get("p50"), "lo", 3),
        ("interleaved p99 ms", lambda n: inter.get(n, {}).get("p99"), "lo", 3),
        ("interleaved p99.9 ms", lambda n: inter.get(n, {}).get("p999"), "lo", 3),
        ("  answers not good", lambda n: not_good_text(inter[n]) if n in inter else None, None, 0),
        ("memory PSS MB (max during replay)", lambda n: res[n]["pss_mb"], "lo", 1),
        ("descriptors (min-max during replay)",
         lambda n: "%d-%d" % res[n]["fds"] if res[n]["fds"] else None, None, 0),
        ("cold start ms (median of %d)" % COLD_RUNS, lambda n: cold[n][0], "lo", 1),
        ("  the next (warm) request ms, median", lambda n: cold[n][1], "lo", 2),
    ]
    head = "%-40s" % "metric" + "".join(" %12s" % n for n in names)
    if ref and "enrichd" in names:
        head += " %16s" % "enrichd vs bun"
    share = "floor" in names and "enrichd" in names
    if share:
        head += " %14s" % "enrichd/floor"
    print(head)
    for label, fn, better, nd in rows:
        vals = {}
        for n in names:
            try:
                vals[n] = fn(n)
            except (KeyError, TypeError):
                vals[n] = None
        line = "%-40s" % label + "".join(" %12s" % fmt(vals[n], nd) for n in names)
        if ref and "enrichd" in names:
            e, b = vals.get("enrichd"), vals.get(ref)
            if better and isinstance(e, (int, float)) and isinstance(b, (int, float)) and e > 0 and b > 0:
                x = e / b if better == "hi" else b / e
                line += " %15.2fx" % x
            else:
                line += " %16s" % "-"
        if share:
            e, f = vals.get("enrichd"), vals.get("floor")
            if better and isinstance(e, (int, float)) and isinstance(f, (int, float)) and e > 0 and f > 0:
                line += " %13.0f%%" % (100.0 * (e / f if better == "hi" else f / e))
            else:
                line += " %14s" % "-"
        print(line)
    print("(rates, percentiles and CPU per request count good answers only: a 200 with the whole expected body;"
          " what else came is on the 'not good' rows)")
    if ref and "enrichd" in names:
        print("(enrichd vs bun: how many times better enrichd is)")
    if share:
        print("(enrichd/floor: enrichd's share of the floor, the same nginx in front of build/bench-null, a")
        print(" FastCGI responder that reads the body and answers 80 KB without work; 100% = transport-bound)")
        fr, er = res["floor"], res["enrichd"]
        if fr["cpu_ms"] and er["cpu_ms"]:
            print("  CPU/request: floor %.3f ms (nginx %.3f), enrichd %.3f ms (nginx %.3f): enrichd's own work "
                  "%.3f ms" % (fr["cpu_ms"], fr["nginx_cpu_ms"] or 0, er["cpu_ms"], er["nginx_cpu_ms"] or 0,
                               er["cpu_ms"] - fr["cpu_ms"]))
    return share


def print_self_check(res, self_closed, self_small, self_open, closed_c):
    """What the replayer itself did against nginx `return 200`: its ceiling beside enrichd's."""
    print("replayer self-check against nginx `return 200` on core 0 (the replayer on core 1):")
    ceiling = ""
    if "enrichd" in res and res["enrichd"]["closed"]["rps"] > 0:
        ceiling = ", %.1fx enrichd's closed-loop rate" % (self_closed["rps"] / res["enrichd"]["closed"]["rps"])
    cpu_ceiling = 1e6 / self_closed["client_cpu_us"] if self_closed["client_cpu_us"] > 0 else 0
    if cpu_ceiling and "enrichd" in res and res["enrichd"]["closed"]["rps"] > 0:
        ceiling += "; its CPU alone would allow %.0f req/s = %.1fx" % (
            cpu_ceiling, cpu_ceiling / res["enrichd"]["closed"]["rps"])
    print("  closed loop, 400 KB batches, c=%d: %.0f req/s (%.0f MB/s, the responder's core is the limit)%s; "
          "replayer CPU %.0f us/request" % (closed_c, self_closed["rps"], self_closed["mb_out"] / self_closed["elapsed_s"],
                                            ceiling, self_closed["client_cpu_us"]))
    print("  closed loop, ~1.5 KB batches, c=64: %.0f req/s; replayer CPU %.1f us/request"
          % (self_small["rps"], self_small["client_cpu_us"]))
    print("  open loop, ~1.5 KB batches at %.0f req/s, c<=64: round trip (nginx included) p50 %.3f ms, "
          "p99 %.3f ms; client lag p50 %.0f us, p99 %.0f us"
          % (self_open["rps"], self_open["p50"], self_open["p99"], self_open["lag_p50_us"],
             self_open["lag_p99_us"]))


def run(a, tmp, cleanup, t_start):
    import harness
    build = a.build
    if not os.access(os.path.join(build, "enrich-replay"), os.X_OK):
        log("build/enrich-replay missing: run make")
        return 1
    trace, big, tiny = make_traces(a, tmp)
    small_body = b'[{"provider":"yt","id":"abc","title":"x"}]'
    notes = []
    admit = admission_limit()
    open_c = admit or 64
    closed_c = max(1, admit // 2) if admit else 16
    log("expected answers of the traces (build/enrich, one batch at a time)")
    exp_trace, floor_trace, refused = expect_files(build, trace, os.path.join(tmp, "replay.expect"))
    exp_big, floor_big, refused_big = expect_files(build, big, os.path.join(tmp, "big.expect"))
    if refused or refused_big:
        notes.append("%d batches of the traces are refused by build/enrich: their answers are not good"
                     % (refused + refused_big))

    self_closed, self_open, self_small = self_check(build, tmp, big, tiny, closed_c, cleanup)

    targets, env, peers, nginx_pids, floor_nginx = start_targets(a, build, harness, cleanup, notes,
                                                                  small_body)
    if not targets:
        log("no target to measure")
        return 1
    checks_open = {t[0]: floor_trace if t[0] == "floor" else exp_trace for t in targets}
    checks_big = {t[0]: floor_big if t[0] == "floor" else exp_big for t in targets}

    res = alone_rounds(a, build, tmp, trace, big, targets, open_c, closed_c, checks_open, checks_big,
                       nginx_pids, floor_nginx)

    # -- 3. interleaved ----------------------------------------------------------
    # Node needs more than the whole shared core at this rate (see its CPU
    # per request): interleaved with it, every target would only measure
    # Node's queue.  It is measured alone above.
    inter = {}
    itargets = [(t[0], t[1]) for t in targets if t[0] not in ("node", "floor")]
    if len(itargets) > 1:
        log("interleaved open-loop run of %s" % ", ".join(t[0] for t in itargets))
        inter = replay(build, tmp, trace, itargets, ["--speed", str(SPEED), "-c", str(open_c)], "interleaved",
                       checks_open)

    cold, cold_floor = measure_cold(a, env, peers, harness, small_body)

    # -- the table ------------------------------------------------------------------
    names = [t[0] for t in targets]
    ref = "bun" if "bun" in names else None
    print()
    print("enrichd benchmark (%s; servers on core 0, load client on core 1; %d-request trace at %gx = ~%.0f req/s;"
          % (time.strftime("%Y-%m-%d %H:%M"), a.requests, SPEED, TARGET_RATE))
    print("  %s; the site admits %s batches at once (nginx max_conns): the open loop keeps at most %d in"
          " flight, the closed loop %d)" % (machine(), admit or "unlimited", open_c, closed_c))
    print("  load average %.2f at start, %.2f at end: above ~1 other work shared the cores, expect noisy tails)"
          % (a.load_start, os.getloadavg()[0]))
    share = print_targets_table(res, inter, cold, names, ref, closed_c)
    for n, v in cold.items():
        if n in res:
            res[n]["cold"] = v[0]
    if "enrichd" in res:
        goals_table(res, ref, share)
    if cold_floor is not None:
        print("(cold start floor on this machine, same spawn path running /bin/true: %.1f ms median)"
              % cold_floor)
    if "enrichd" in cold and cold["enrichd"][2] is not None:
        print("(enrichd's cold start used %.1f ms of CPU and %d page faults, its launcher, master and "
              "first worker, medians)" % (cold["enrichd"][2], cold["enrichd"][3]))
    print_self_check(res, self_closed, self_small, self_open, closed_c)
    for n in notes:
        print("note: " + n)
    print("bench finished in %.0f s (raw outputs: %s with --keep)" % (time.time() - t_start, tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
