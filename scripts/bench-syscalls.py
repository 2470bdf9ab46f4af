#!/usr/bin/env python3
"""bench-syscalls.py: system calls and CPU per request of one enrichd worker.

Starts enrichd (one worker) behind the real nginx (tests/integration/
harness.py); sends N requests, one at a time, with the 400 KB / 200-record
batch of bench-engine and reports the worker's CPU time (utime+stime from
/proc) per request; then attaches `strace -c -f` to the worker for N more
and prints the calls per request by name (read, write, ...), and how
many of them failed (an idle worker woken for a connection a sibling
took: accept4 EAGAIN).  --workers N (default 1) shows the accept pattern
of a pool whose idle workers wait together.  Usage:
  scripts/bench-syscalls.py [--build build] [-n 50] [--workers 1]
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import harness  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("-n", type=int, default=50)
    ap.add_argument("--workers", type=int, default=1)
    a = ap.parse_args()
    body = subprocess.run([os.path.join(a.build, "bench-engine"), "--dump", "big"],
                          capture_output=True, check=True).stdout
    env = harness.Env(build=a.build, name="bench-syscalls")
    try:
        env.start_enrichd("workers = %d\nmin_ready_workers = 1\n" % a.workers)
        env.wait_workers(a.workers)
        env.start_nginx()
        st, _, _ = env.request("/v1/enrich", body)   # warm: buffers grown
        assert st == 200, st
        mp = env.master_pid()
        kids = subprocess.run(["pgrep", "-P", str(mp)], capture_output=True, text=True).stdout.split()
        tick = os.sysconf("SC_CLK_TCK")

        def cpu():
            t = 0
            for k in kids:
                with open("/proc/%s/stat" % k) as f:
                    st = f.read()
                fl = st[st.rindex(")") + 2:].split()
                t += int(fl[11]) + int(fl[12])
            return t / tick
        c0 = cpu()
        for _ in range(a.n * 4):
            st, _, data = env.request("/v1/enrich", body)
            assert st == 200, st
        print("enrichd worker CPU: %.3f ms per request (%d requests, one at a time, %d workers)"
              % ((cpu() - c0) * 1e3 / (a.n * 4), a.n * 4, a.workers))
        out = os.path.join(env.dir, "strace.txt")
        tr = subprocess.Popen(["strace", "-c", "-f", "-o", out] + sum([["-p", k] for k in kids], []),
                              stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        for _ in range(a.n):
            st, _, data = env.request("/v1/enrich", body)
            assert st == 200, st
        time.sleep(0.2)
        tr.send_signal(signal.SIGINT)
        tr.wait(10)
        with open(out) as f:
            text = f.read()
        total = 0
        rows = []
        for line in text.splitlines():
            m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(\d+\s+)?(\w+)$", line)
            if m and m.group(3) != "total":
                rows.append((int(m.group(1)), m.group(3), int(m.group(2) or 0)))
                total += int(m.group(1))
        print("enrichd workers (%d), %d requests of %d bytes through nginx: %.1f system calls per request"
              % (a.workers, a.n, len(body), total / a.n))
        print("  %-16s %7s %7s" % ("call", "count", "failed"))
        for n, name, err in sorted(rows, reverse=True):
            print("  %-16s %7.1f %7.1f" % (name, n / a.n, err / a.n))
    finally:
        env.close()


if __name__ == "__main__":
    main()
