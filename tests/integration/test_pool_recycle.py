#!/usr/bin/env python3
"""test_pool_recycle.py: the pool keeps N workers through deaths and
recycling, with real nginx and real signals.

- kill -9 of a worker under load: the pool is back to N at once and at
  most that worker's one request failed;
- a crafted FastCGI PARAMS record (CVE-2025-23016, which aborts libfcgi
  2.4.2) is refused before libfcgi sees it: no worker dies, it is counted
  as bad_pairs; a worker that aborts anyway counts as a crash, the pool
  recovers;
- max_requests recycles workers under load with zero failed requests."""
import os
import re
import signal
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

BODY = harness.sample_body(50)


def test_kill9_under_load(r):
    with harness.Env(name="pool-kill") as env:
        pids = env.start_stack("workers = 4\n", workers=4)
        load = harness.Load(env, clients=8, body=BODY)
        harness.wait_for(lambda: load.count() > 50, 20, what="load")
        victim = pids[1]
        os.kill(victim, signal.SIGKILL)
        ev = env.wait_log("worker exit", pred=lambda e: e["worker_pid"] == str(victim))[0]
        r.check(ev["reason"] == "crash" and ev.get("signal") == "KILL",
                "kill -9 is a crash with its signal: %r" % ev)
        # Replacement at once: back to 4 workers, the victim not among them.
        after = env.wait_workers(4, timeout=5)
        r.check(victim not in after, "victim replaced")
        n0 = load.count()
        harness.wait_for(lambda: load.count() > n0 + 100, 20, what="load after the kill")
        res = load.stop()
        fails = [x for x in res if x[0] != 200]
        r.check(len(res) > 150, "load ran (%d requests)" % len(res))
        r.check(len(fails) <= 1, "at most the victim's request failed: %r" % fails[:3])
        starts = env.log_events("worker start")
        r.check(len(starts) == 5, "exactly one replacement forked (%d starts)" % len(starts))


def crafted_params(sock_path):
    """BEGIN_REQUEST then a PARAMS record whose 4-byte name and value
    lengths overflow libfcgi's int sum (CVE-2025-23016), and the empty
    PARAMS that would hand it to libfcgi's ReadParams."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock_path)
    begin = harness.fcgi_begin()
    n = 0x7ffffffe
    lens = struct.pack(">II", n | 0x80000000, n | 0x80000000)
    s.sendall(begin + harness.fcgi_record(harness.FCGI_PARAMS, lens)
              + harness.fcgi_record(harness.FCGI_PARAMS, b""))
    s.settimeout(5)
    try:
        data = s.recv(100)
    except OSError:
        data = None
    s.close()
    return data


def test_cve_params_refused(r):
    with harness.Env(name="pool-cve") as env:
        before = env.start_stack("workers = 3\n", workers=3)
        load = harness.Load(env, clients=4, body=BODY)
        harness.wait_for(lambda: load.count() > 20, 20, what="load")
        data = crafted_params(env.sock)
        r.check(not data, "no answer to the crafted record")
        time.sleep(0.5)
        r.check(not env.log_events("worker exit"), "no worker died of it: %r"
                % env.log_events("worker exit"))
        r.check(env.worker_pids() == before, "the same three workers")
        st, _, text = env.request("/metrics", method="GET")
        m = re.search(rb'^enrichd_fastcgi_rejected_reason_total\{reason="bad_pairs"\} (\d+)$',
                      text, re.M)
        r.check(st == 200 and m is not None and int(m.group(1)) == 1,
                "refused and counted as bad_pairs (%r)" % (m and m.group(0)))
        # A worker that does abort (any other way) still counts as a crash.
        os.kill(before[0], signal.SIGABRT)
        ev = env.wait_log("worker exit", timeout=5)
        r.check(ev[0]["reason"] == "crash" and ev[0].get("signal") == "ABRT",
                "an abort counts as a crash: %r" % ev[0])
        after = env.wait_workers(3, timeout=5)
        r.check(len(set(before) & set(after)) == 2, "the two others untouched")
        n0 = load.count()
        harness.wait_for(lambda: load.count() > n0 + 30, 20, what="load after the crash")
        res = load.stop()
        fails = [x for x in res if x[0] != 200]
        r.check(len(fails) <= 1, "at most the aborted worker's request failed: %r" % fails[:3])


def test_max_requests(r):
    with harness.Env(name="pool-maxreq") as env:
        env.start_stack("workers = 2\nmax_requests = 25\nmax_requests_jitter = 0\n", workers=2)
        load = harness.Load(env, clients=4, body=BODY)
        env.wait_log("worker exit", count=6, timeout=30)
        res = load.stop()
        fails = [x for x in res if x[0] != 200]
        r.check(not fails, "recycling under load lost nothing: %d of %d failed %r"
                % (len(fails), len(res), fails[:3]))
        exits = env.log_events("worker exit")
        r.check(all(e["reason"] == "max_requests" and e["served"] == "25" for e in exits),
                "every exit is max_requests after 25: %r" % [(e["reason"], e["served"]) for e in exits])
        env.wait_workers(2)


if __name__ == "__main__":
    harness.run_tests(test_kill9_under_load, test_cve_params_refused, test_max_requests)
