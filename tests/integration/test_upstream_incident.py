#!/usr/bin/env python3
"""test_upstream_incident.py: the connection-leak incident (docs/upstream.md), replayed through
the real path (HTTP client -> nginx -> enrichd workers -> fake upstream).

The upstream closes every connection after 100 requests without saying
so (the old client leaked a descriptor each time, hit EMFILE, and kept
answering 200 slowly).  20,000 batches (ENR_INCIDENT_BATCHES) of cache
misses: zero failed or degraded batches, the same worker processes
throughout (max_requests = 0, so recycling cannot hide a leak), and each
worker's descriptor count, sampled from /proc at the start, middle and
end, is flat apart from its live upstream sockets, which stay within
upstream_max_connections and match the enrichd_upstream_open_fds gauge.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import (FakeUpstream, degraded, fake_poster, fd_count, metrics,  # noqa: E402
                           post, upstream_conf, upstream_fds)

WORKERS = 3
MAX_CONN = 4
CLIENTS = 6


def run_phase(env, tag, n, results):
    """n batches from CLIENTS keep-alive clients; appends (status, degraded, ok)."""
    def send(conn, i):
        recs = [{"provider": "yt", "id": "Inc-%s-%d-%d" % (tag, i, k)} for k in range(3)]
        recs.append({"provider": "vm", "id": "HotId"})
        try:
            st, h, lines = post(env, recs, conn=conn)
            good = (len(lines) == 4 and lines[0]["poster"] == fake_poster("yt", recs[0]["id"]))
            return (st, degraded(h), good)
        except Exception as e:  # a transport failure is a failed batch
            conn.close()  # the next batch on a new connection
            print("client error:", repr(e))
            return (0, -1, False)

    results.extend(harness.keepalive_clients(env, n, CLIENTS, send, timeout=300))


def sample(env, fake):
    time.sleep(0.3)  # quiescent: no batch in flight
    pids = sorted(env.worker_pids())
    out = {}
    for p in pids:
        out[p] = (fd_count(p), upstream_fds(p, fake.port))
    return out


def test_incident(r, fake):
    total = int(os.environ.get("ENR_INCIDENT_BATCHES", "20000"))
    with harness.Env(name="up-incident") as env:
        # No recycling of any kind (sanitizer builds are big): a leak must show.
        env.start_enrichd("workers = %d\nmax_requests = 0\nrss_soft_mb = 4000\nrss_hard_mb = 8000\n" % WORKERS +
                          upstream_conf(fake, upstream_max_connections=MAX_CONN,
                                        upstream_timeout_ms=500, cache_entries=5000))
        env.start_nginx()
        env.wait_workers(WORKERS)
        fake.control(mode="ok", close_after=100, close_style="silent")
        results = []
        run_phase(env, "warm", 300, results)  # every worker has connected
        fake.reset()
        s0 = sample(env, fake)
        results = []
        t0 = time.monotonic()
        run_phase(env, "a", total // 2, results)
        s1 = sample(env, fake)
        run_phase(env, "b", total - total // 2, results)
        took = time.monotonic() - t0
        s2 = sample(env, fake)
        m = metrics(env)
        st = fake.stats()

        failed = sum(1 for x in results if x[0] != 200 or not x[2])
        deg = sum(1 for x in results if x[1] != 0)
        r.check(len(results) == total, "%d batches sent: %d" % (total, len(results)))
        r.check(failed == 0, "no failed batch: %d" % failed)
        r.check(deg == 0, "no degraded batch: %d" % deg)
        r.check(st["server_closes"] >= total // 100 - 1,
                "the upstream cycled connections: %d closes" % st["server_closes"])
        r.check(sorted(s0) == sorted(s1) == sorted(s2) and len(s0) == WORKERS,
                "the same %d workers throughout (no recycling hid anything): %s %s %s"
                % (WORKERS, sorted(s0), sorted(s1), sorted(s2)))
        for p in s0:
            a, b, c = s0[p], s1.get(p, (0, 0)), s2.get(p, (0, 0))
            r.check(a[0] - a[1] == b[0] - b[1] == c[0] - c[1],
                    "worker %d: descriptors less upstream sockets flat: %d %d %d (total %d %d %d)"
                    % (p, a[0] - a[1], b[0] - b[1], c[0] - c[1], a[0], b[0], c[0]))
            r.check(max(a[1], b[1], c[1]) <= MAX_CONN,
                    "worker %d: upstream sockets within %d: %d %d %d" % (p, MAX_CONN, a[1], b[1], c[1]))
        r.check(m.get("enrichd_upstream_open_fds") == sum(v[1] for v in s2.values()),
                "enrichd_upstream_open_fds (%s) equals the sockets seen in /proc (%d)"
                % (m.get("enrichd_upstream_open_fds"), sum(v[1] for v in s2.values())))
        fails = sum(m.get('enrichd_upstream_failures_total{kind="%s"}' % k, 0)
                    for k in ("timeout", "connect", "status", "body"))
        r.check(fails == 0, "no failed upstream call counted: %d" % fails)
        print("incident: %d batches in %.1f s (%.0f/s), upstream closes %d, retries %d, "
              "fds start %s mid %s end %s"
              % (len(results), took, len(results) / took, st["server_closes"],
                 m.get("enrichd_upstream_retries_total", -1), s0, s1, s2))


def main():
    harness.run_tests(test_incident, fixture=FakeUpstream)


if __name__ == "__main__":
    main()
