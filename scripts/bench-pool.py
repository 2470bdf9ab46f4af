#!/usr/bin/env python3
"""bench-pool.py: the pool size per core, and where the open-loop tail
comes from.

For each pool size (--workers, default 1,2,3,6) the stack of `make bench`
(nginx + enrichd, servers pinned to core 0, the replayer to core 1) runs
the bench's open-loop trace at 100x with per-request records (--tsv),
then the closed loop at concurrency 64 on the 400 KB batch; the floor
(nginx + build/bench-null) runs the same in each round, so every figure
is also a ratio to the floor of the same moment.  Sizes and the floor
alternate over --rounds rounds; per size the best round is kept (by p99
for the open loop, by req/s for the closed loop).

Besides throughput and percentiles it reports, per request of the open
loop, the time the server's processes spent runnable but waiting for the
core (run_delay from /proc/PID/schedstat, nginx and enrichd summed), their
context switches (/proc/PID/status), and the p50/p99 of the requests that
arrived to an idle stack (none in flight) against those that arrived
behind others (from the TSV): queueing shows in the second, wake-ups and
the neighbours in the first.
  scripts/bench-pool.py [--build build] [--workers 1,2,3,6] [--rounds 2] [--requests 2000]
"""
import argparse
import bisect
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import harness  # noqa: E402
from bench import (CLOSED_S, SPEED, TARGET_RATE, as_client, as_server, cpu_s,  # noqa: E402
                   descendants, replay, start_floor)


def sched(pids):
    """(run_delay ns, context switches) summed over pids and their threads."""
    delay = switches = 0
    for p in pids:
        try:
            for t in os.listdir("/proc/%d/task" % p):
                with open("/proc/%d/task/%s/schedstat" % (p, t)) as f:
                    delay += int(f.read().split()[1])
                with open("/proc/%d/task/%s/status" % (p, t)) as f:
                    for line in f:
                        if "ctxt_switches:" in line:
                            switches += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            pass
    return delay, switches


def pct(xs, q):
    if not xs:
        return 0.0
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def by_arrival(tsv):
    """p50/p99 (ms) of requests that arrived to an idle stack and of the rest."""
    rows = []
    with open(tsv) as f:
        next(f)
        for line in f:
            c = line.rstrip("\n").split("\t")
            rows.append((float(c[0]), int(c[4]) / 1e3))
    rows.sort()
    ends = []
    idle, busy = [], []
    for due, lat in rows:
        # in flight at arrival: earlier requests not yet finished
        n = len(ends) - bisect.bisect_right(ends, due)
        (idle if n == 0 else busy).append(lat)
        bisect.insort(ends, due + lat / 1e3)
    return (len(idle), pct(idle, 0.5), pct(idle, 0.99), len(busy), pct(busy, 0.5), pct(busy, 0.99))


def measure(build, tmp, trace, big, name, url, pids_fn, tag):
    d0, s0 = sched(pids_fn())
    tsv = os.path.join(tmp, tag + ".tsv")
    o = replay(build, tmp, trace, [(name, url)], ["--speed", str(SPEED), "--tsv", tsv], "open-" + tag)[name]
    d1, s1 = sched(pids_fn())
    c0 = cpu_s(pids_fn())
    c = replay(build, tmp, big, [(name, url)], ["--closed", "-d", str(CLOSED_S)], "closed-" + tag)[name]
    c1 = cpu_s(pids_fn())
    n = max(o["count"], 1)
    return {"open": o, "closed": c, "cpu_ms": (c1 - c0) * 1e3 / max(c["count"], 1),
            "delay_us": (d1 - d0) / 1e3 / n, "switches": (s1 - s0) / n, "arrival": by_arrival(tsv)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--workers", default="1,2,3,6")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    sizes = [int(x) for x in a.workers.split(",")]
    tmp = tempfile.mkdtemp(prefix="enrichd-bench-pool-")
    os.chmod(tmp, 0o755)
    gen = os.path.join(ROOT, "scripts", "gen-trace")
    trace, big = os.path.join(tmp, "replay.jsonl"), os.path.join(tmp, "big.jsonl")
    span = a.requests / TARGET_RATE * SPEED
    subprocess.run([gen, "-n", str(a.requests), "--duration", str(span), "--seed", str(a.seed), "-o", trace],
                   check=True)
    subprocess.run([gen, "--shape", "big", "-n", "20", "--seed", str(a.seed), "-o", big], check=True)
    best = {}
    envs = []
    try:
        fenv, null = start_floor(a.build, "bench-pool-floor")
        envs.append(fenv)
        floor_pids = lambda: descendants(null.pid) + descendants(fenv.nginx.pid)  # noqa: E731
        for rnd in range(a.rounds):
            order = ["floor"] + sizes if rnd % 2 == 0 else list(reversed(sizes)) + ["floor"]
            for size in order:
                print("bench-pool: round %d, %s" % (rnd + 1, size), file=sys.stderr, flush=True)
                if size == "floor":
                    cur = measure(a.build, tmp, trace, big, "floor", "http://127.0.0.1:%d/" % fenv.port,
                                  floor_pids, "floor-%d" % rnd)
                else:
                    env = harness.Env(build=a.build, name="bench-pool-%d" % size)
                    try:
                        as_server()
                        try:
                            env.start_enrichd("workers = %d\n" % size)
                            env.start_nginx()
                        finally:
                            as_client()
                        env.wait_workers(size)
                        mp = env.master_pid()
                        cur = measure(a.build, tmp, trace, big, "enrichd", "http://127.0.0.1:%d/" % env.port,
                                      lambda: descendants(mp) + descendants(env.nginx.pid),
                                      "w%d-%d" % (size, rnd))
                    finally:
                        env.close()
                prev = best.get(size)
                if prev is None:
                    best[size] = cur
                    continue
                if cur["open"]["p99"] < prev["open"]["p99"]:
                    for k in ("open", "delay_us", "switches", "arrival"):
                        prev[k] = cur[k]
                if cur["closed"]["rps"] > prev["closed"]["rps"]:
                    prev["closed"], prev["cpu_ms"] = cur["closed"], cur["cpu_ms"]
    finally:
        for e in envs:
            e.close()
        shutil.rmtree(tmp, ignore_errors=True)
    f = best["floor"]
    print("pool size on one core (servers on core 0, replayer on core 1; best of %d rounds; "
          "load average now %.2f)" % (a.rounds, os.getloadavg()[0]))
    print("%-7s %8s %6s %7s %7s %7s %7s %6s %9s %7s %17s %17s" % (
        "workers", "req/s", "floor", "CPU ms", "p50", "p99", "p99.9", "floor", "wait us", "ctxsw",
        "idle n p50/p99", "queued n p50/p99"))
    for size in ["floor"] + sizes:
        r = best[size]
        ar = r["arrival"]
        print("%-7s %8.0f %5.0f%% %7.3f %7.2f %7.2f %7.2f %5.0f%% %9.0f %7.1f %5d %5.2f/%5.2f %5d %5.2f/%5.2f" % (
            size, r["closed"]["rps"], 100 * r["closed"]["rps"] / f["closed"]["rps"], r["cpu_ms"],
            r["open"]["p50"], r["open"]["p99"], r["open"]["p999"], 100 * f["open"]["p99"] / r["open"]["p99"],
            r["delay_us"], r["switches"], ar[0], ar[1], ar[2], ar[3], ar[4], ar[5]))
    print("(req/s: closed loop c=64, 400 KB; floor %: of the floor's req/s, and floor p99 / p99;"
          " wait us: run-queue wait of nginx + workers per open-loop request; ctxsw: their context"
          " switches per request; idle/queued: open-loop requests that arrived with nothing / something"
          " in flight, count and p50/p99 ms)")


if __name__ == "__main__":
    main()
