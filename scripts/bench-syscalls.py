#!/usr/bin/env python3
"""bench-syscalls.py: system calls and CPU per request of one enrichd
worker, and of the nginx worker in front of it (`make bench-syscalls`).

Starts enrichd (one worker, the defaults otherwise) behind the real nginx
(tests/integration/harness.py); sends N requests, one at a time, with
the 400 KB / 200-record batch of bench-engine, each answer a 200 with
the expected body (build/enrich's, "fetched_at" aside), and reports the
worker's CPU time (utime+stime from /proc) per request; then attaches
`strace -c -f` to the worker and to nginx's worker for N more and prints
the calls per request by name, and how many of them failed.  --trace
prints one request's calls in order instead (strace without -c).
--build DIR measures another build's enrichd (an old commit's, for a
bisect); the batch and its expected answer come from this tree's build.
--workers N (default 1) shows the accept pattern of a pool whose idle
workers wait together.  Usage:
  scripts/bench-syscalls.py [--build build] [-n 200] [--workers 1] [--trace]
"""
import argparse
import hashlib
import os
import re
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import harness  # noqa: E402


def digest(body):
    """The body with its "fetched_at" values made 0, hashed."""
    return hashlib.sha1(re.sub(rb'"fetched_at":[-.0-9eE+]*', b'"fetched_at":0', body)).digest()


def strace_rows(path, n):
    """(calls per request, name, failed per request) from an strace -c file."""
    rows = []
    with open(path) as f:
        for line in f:
            m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(\d+\s+)?(\w+)$", line)
            if m and m.group(3) != "total":
                rows.append((int(m.group(1)) / n, m.group(3), int(m.group(2) or 0) / n))
    return sorted(rows, reverse=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("-n", type=int, default=200)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--trace", action="store_true", help="one request's calls in order")
    a = ap.parse_args()
    here = os.path.join(ROOT, "build")
    body = subprocess.run([os.path.join(here, "bench-engine"), "--dump", "big"],
                          capture_output=True, check=True).stdout
    want = digest(subprocess.run([os.path.join(here, "enrich")], input=body, capture_output=True,
                                 check=True).stdout)
    env = harness.Env(build=a.build, name="bench-syscalls")

    def one():
        st, _, data = env.request("/v1/enrich", body)
        if st != 200 or digest(data) != want:
            raise SystemExit("bench-syscalls: not a good answer: status %s, %d bytes" % (st, len(data)))

    try:
        env.start_enrichd("workers = %d\nmin_ready_workers = 1\n" % a.workers)
        kids = [str(p) for p in env.wait_workers(a.workers)]
        env.start_nginx()
        one()   # warm: buffers grown
        ngx = [str(p) for p in harness.children(env.nginx.pid)]
        tick = os.sysconf("SC_CLK_TCK")

        def cpu(pids):
            t = 0
            for k in pids:
                with open("/proc/%s/stat" % k) as f:
                    st = f.read()
                fl = st[st.rindex(")") + 2:].split()
                t += int(fl[11]) + int(fl[12])
            return t / tick
        c0, n0 = cpu(kids), cpu(ngx)
        for _ in range(a.n):
            one()
        print("CPU per request (%d requests, one at a time, %d workers): enrichd %.3f ms, nginx %.3f ms"
              % (a.n, a.workers, (cpu(kids) - c0) * 1e3 / a.n, (cpu(ngx) - n0) * 1e3 / a.n))
        out = {w: os.path.join(env.dir, "strace-%s.txt" % w) for w in ("enrichd", "nginx")}
        count = 2 if a.trace else a.n
        tr = [subprocess.Popen(["strace"] + ([] if a.trace else ["-c"]) + ["-f", "-o", out[w]] +
                               sum([["-p", k] for k in pids], []), stderr=subprocess.DEVNULL)
              for w, pids in (("enrichd", kids), ("nginx", ngx))]
        # strace attaches each thread of each pid: wait until all are.
        time.sleep(1.5)
        for _ in range(count):
            one()
        time.sleep(0.2)
        for t in tr:
            t.send_signal(signal.SIGINT)
            t.wait(10)
        if a.trace:
            with open(out["enrichd"]) as f:
                print(f.read())
            return
        print("%d requests of %d bytes through nginx, system calls per request:" % (a.n, len(body)))
        for w in ("enrichd", "nginx"):
            if not os.path.exists(out[w]):
                print("%s: strace could not attach" % w)
                continue
            rows = strace_rows(out[w], a.n)
            # Each request is one connect of nginx to enrichd: strace may
            # attach to nginx's workers late, so its share is per connect.
            conn = [r[0] for r in rows if r[1] == "connect"]
            if w == "nginx" and conn and abs(conn[0] - 1) > 0.02:
                rows = [(r[0] / conn[0], r[1], r[2] / conn[0]) for r in rows]
                print("(nginx: strace saw %.0f of %d requests; per request of those)" % (conn[0] * a.n, a.n))
            print("%s %s: %.1f (%.1f failed)" % (w, "worker" if w == "nginx" or a.workers == 1 else "workers",
                                                  sum(r[0] for r in rows), sum(r[2] for r in rows)))
            print("  %-16s %7s %7s" % ("call", "count", "failed"))
            for n, name, err in rows:
                if n >= 0.05:
                    print("  %-16s %7.2f %7.2f" % (name, n, err))
    finally:
        env.close()


if __name__ == "__main__":
    main()
